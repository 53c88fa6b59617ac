/*
 * kmeans_device.cu — K-Means on the device: the `kmeans` table of
 * src/core/kmeans_backend.h.  A fit's row blocks live on the device between
 * put_block and drop_block; a Lloyd pass labels their rows and sums them per
 * cluster, k-means++ measures them against candidate centroids, and
 * row_dist gives each row's distance to its centroid.  The fit's state
 * hangs off the training's context (ctx->kmeans) and every allocation goes
 * through it (gpu_context.h), so ctx_destroy releases all of it.
 *
 * Every result equals the CPU kernels' bit for bit (kmeans_exact.h):
 *  - A label is the first index of the minimum of |c_j|^2 - 2 x.c_j in
 *    double semantics.  A float32 pass finds each row's best and runner-up
 *    value; gbml_km_float_decides accepts the float winner when the gap
 *    between the two exceeds the float error bound, and the other rows
 *    take gbml_km_exact_dist over all k centroids, as the CPU's re-check
 *    does.  Which rows are re-checked may differ from the CPU's (the float
 *    values are summed in another order); the labels cannot.
 *  - Centroid sums, counts and k-means++ potentials are int64 sums of
 *    fixed-point terms added with integer atomics: integer addition is
 *    associative, so any thread order gives the exact total.
 *  - k-means++ distances and row distances use the shared functions.
 *
 * A pass queues three kernels per row block on the context's stream:
 *   assign_float_kernel  128 rows x all centroids per CTA, register tiles
 *                        of 8 rows x TN centroids per thread over shared
 *                        memory tiles (the n x k matrix never exists); per
 *                        row the best, runner-up and arg, then the decision;
 *                        undecided rows are appended to the block's list;
 *   assign_exact_kernel  one warp per listed row, the lanes split the
 *                        centroids, first index on ties;
 *   update_kernel        changed rows, counts and fixed-point sums.
 *
 * Device layout of a row block (one allocation, pieces 256-byte aligned):
 * x[rows][d], xnorm2[rows], scale[rows] (spherical), labels[rows] (these
 * four as put_block uploads them, in one copy), then a scratch of 8 bytes
 * a row (a pass's new labels and pending list, or row_dist's distances),
 * the pending count and the k-means++ closest distances.
 */
#include "gpu_context.h"
#include "kmeans_device.h"
#include "kmeans_exact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Deliberate bugs for the checker's mutation test (see boost_device.cu):
 *   GBML_PLANT == 8: the exact path takes the last index on ties (<=)
 *   GBML_PLANT == 9: the float winner is accepted without gbml_km_float_decides
 *   GBML_PLANT == 10: the fixed-point sums skip the last row of a block
 */
#ifndef GBML_PLANT
#define GBML_PLANT 0
#endif

#ifdef __CUDACC__
#define KM_UNROLL _Pragma("unroll")
#else
#define KM_UNROLL
#endif

typedef unsigned long long u64;

/* The assignment tile: 16 x 16 threads, each 8 rows x TN centroids. */
#define TILE_T 16
#define TILE_M 8
#define TILE_BM (TILE_T * TILE_M)	/* rows per CTA */
#define TILE_BK 16				/* features per shared-memory step */
#define TILE_THREADS (TILE_T * TILE_T)
#define TILE_X_LOADS (TILE_BM * TILE_BK / TILE_THREADS)

#define EXACT_THREADS 128
#define UPDATE_THREADS 256
#define UPDATE_ROWS 2048		/* rows per update CTA: 2048 x KM_MAX_D fits an int */
#define KM_MAX_D 1000000		/* GBML_MAX_FEATURES */
#define SHARED_SUMS_BYTES (48 * 1024)	/* the default dynamic shared memory of a CTA */
#define CAND_ROWS 128			/* rows (threads) per k-means++ CTA */
#define CAND_FEATS 32			/* features per shared-memory step */
#define CAND_LANES 16			/* cand_t[d][16], kmeans_kernels.h's GBML_KM_CAND_LANES */
#define ROW_THREADS 256
#define STAGE_SLOTS 2			/* pinned put_block buffers, filled in turn */
#define FULL_MASK 0xffffffffu

/* The head of the accumulator array: then counts[k], then sums[k][d]. */
#define ACC_CHANGED 0
#define ACC_RECHECKED 1
#define ACC_MAX 2				/* cand_take's maximum, as float bits */
#define ACC_HEAD 4

typedef struct km_block
{
	void	   *mem;			/* the allocation; NULL: not on the device */
	int64_t		rows;
	float	   *x;
	double	   *xnorm2;
	double	   *scale;			/* spherical only */
	int32_t    *labels;
	int32_t    *newlab;			/* scratch: the pass's new labels ... */
	int32_t    *pend;			/* ... and the rows left to the exact path */
	double	   *dist;			/* the same scratch, row_dist's output */
	unsigned int *pend_count;
	float	   *closest;
	float	   *cand;			/* the last cand_pass's values, T x rows */
	int			cand_cap;		/* T the cand buffer holds */
	int			cand_T;			/* T of the last cand_pass (0: none) */
	unsigned int stamp;			/* finds a block listed twice */
} km_block;

typedef struct gpu_kmeans_state
{
	int			k;
	int			d;
	int			tile_n;			/* centroids per thread of the float tile: 2, 4 or 8 */
	int			kp;				/* k padded to the float tile's 16 * tile_n */
	bool		spherical;
	int			n_blocks;
	km_block   *blocks;
	unsigned int stamp;
	int			exact_ctas;		/* most CTAs of the exact kernel */

	/* the centroids, one allocation */
	double	   *d_c;			/* k x d, then cnorm[k] */
	double	   *d_cnorm;
	double	   *d_cT;			/* d x k: a warp's lanes read consecutive centroids */
	float	   *d_cTf;			/* d x kp, float, zero padding */
	float	   *d_cnf;			/* kp: (float) cnorm, +inf padding */
	double	   *d_fix;			/* d: the fixed-point grids of the sums */
	float	   *d_cand_t;		/* d x 16: cand_pass's candidates */
	double		cmax;
	double		alpha;
	bool		have_centers;
	double	   *h_centers;		/* pinned staging of set_centers */
	float	   *h_cand;			/* pinned staging of cand_pass */
	cudaEvent_t centers_done;
	cudaEvent_t cand_done;
	bool		centers_staged;
	bool		cand_staged;

	/* a pass */
	u64		   *d_acc;			/* ACC_HEAD + k + k*d */
	int64_t    *h_acc;			/* pinned copy */
	u64		   *d_pot;			/* n_blocks x 16 k-means++ potentials */
	int64_t    *h_pot;
	cudaEvent_t ev_start;
	cudaEvent_t ev_end;
	cudaEvent_t ev_done;
	bool		pass_active;
	bool		pass_update;

	/* put_block staging */
	void	   *stage[STAGE_SLOTS];
	size_t		stage_bytes[STAGE_SLOTS];
	cudaEvent_t stage_done[STAGE_SLOTS];
	bool		stage_used[STAGE_SLOTS];
	int			stage_next;
} gpu_kmeans_state;

/* ---- kernels: centroids ---- */

/* The transposed double copy, the padded float copy and the float norms of the centroids. */
__global__ static void
centers_convert_kernel(const double *c, const double *cnorm, int k, int d, int kp,
					   double *cT, float *cTf, float *cnf)
{
	int64_t		e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	int			i,
				j;

	if (e >= (int64_t) d * kp)
		return;
	i = (int) (e / kp);
	j = (int) (e % kp);
	if (j < k)
	{
		double		v = c[(int64_t) j * d + i];

		cT[(int64_t) i * k + j] = v;
		cTf[e] = (float) v;
	}
	else
		cTf[e] = 0.0f;
	if (i == 0)
		cnf[j] = j < k ? (float) cnorm[j] : INFINITY;
}

/* ---- kernels: the float assignment pass ---- */

typedef struct assign_args
{
	const float *x;
	const double *xnorm2;
	int64_t		rows;
	int			d;
	int			kp;
	const float *cTf;
	const float *cnf;
	double		alpha;
	double		cmax;
	int32_t    *newlab;			/* the float winner, or -1: the exact path decides */
	int32_t    *pend;			/* rows for the exact path, appended */
	unsigned int *pend_count;
} assign_args;

/* The tiles of one step, then (reusing the bytes) the per-thread results of every row. */
template <int TN>
union assign_shared
{
	struct
	{
		float		xs[TILE_BK][TILE_BM + 4];	/* x tile, feature-major; +4 keeps float4 rows aligned */
		float		cs[TILE_BK][TILE_T * TN];
	}			t;
	struct
	{
		float		best[TILE_BM][TILE_T + 1];
		float		second[TILE_BM][TILE_T + 1];
		int32_t		arg[TILE_BM][TILE_T + 1];
	}			r;
};

/* One step's x and centroid values, loaded into registers while the previous step computes. */
template <int TN>
struct assign_regs
{
	float		x[TILE_X_LOADS];
	float		c[TN];
};

template <int TN>
__device__ __forceinline__ static void
assign_load(const assign_args &a, int64_t row0, int c0, int f0, assign_regs<TN> &g)
{
	const int	BN = TILE_T * TN;

	KM_UNROLL
	for (int i = 0; i < TILE_X_LOADS; i++)
	{
		int			e = (int) threadIdx.x + i * TILE_THREADS;
		int64_t		row = row0 + e / TILE_BK;
		int			f = f0 + e % TILE_BK;

		g.x[i] = row < a.rows && f < a.d ? a.x[row * a.d + f] : 0.0f;
	}
	KM_UNROLL
	for (int i = 0; i < TN; i++)
	{
		int			e = (int) threadIdx.x + i * TILE_THREADS;
		int			f = f0 + e / BN;

		g.c[i] = f < a.d ? a.cTf[(int64_t) f * a.kp + c0 + e % BN] : 0.0f;
	}
}

template <int TN>
__device__ __forceinline__ static void
assign_store(const assign_regs<TN> &g, assign_shared<TN> &sh)
{
	const int	BN = TILE_T * TN;

	KM_UNROLL
	for (int i = 0; i < TILE_X_LOADS; i++)
	{
		int			e = (int) threadIdx.x + i * TILE_THREADS;

		sh.t.xs[e % TILE_BK][e / TILE_BK] = g.x[i];
	}
	KM_UNROLL
	for (int i = 0; i < TN; i++)
	{
		int			e = (int) threadIdx.x + i * TILE_THREADS;

		sh.t.cs[e / BN][e % BN] = g.c[i];
	}
}

/* N consecutive floats of shared memory (16-byte aligned) into registers: 128-bit loads on a card. */
template <int N>
__device__ __forceinline__ static void
shared_vec(float *dst, const float *src)
{
#ifdef __CUDACC__
	if constexpr (N % 4 == 0)
	{
		KM_UNROLL
		for (int i = 0; i < N; i += 4)
		{
			float4		v = *reinterpret_cast<const float4 *>(src + i);

			dst[i] = v.x;
			dst[i + 1] = v.y;
			dst[i + 2] = v.z;
			dst[i + 3] = v.w;
		}
	}
	else
#endif
	{
		KM_UNROLL
		for (int i = 0; i < N; i++)
			dst[i] = src[i];
	}
}

/* acc += the outer products of one step: thread (tx, ty) owns rows ty*8.. and centroids tx*TN.. */
template <int TN>
__device__ __forceinline__ static void
assign_products(const assign_shared<TN> &sh, float (&acc)[TILE_M][TN])
{
	int			tx = (int) threadIdx.x % TILE_T,
				ty = (int) threadIdx.x / TILE_T;

	KM_UNROLL
	for (int kk = 0; kk < TILE_BK; kk++)
	{
		float		xv[TILE_M],
					cv[TN];

		shared_vec<TILE_M>(xv, &sh.t.xs[kk][ty * TILE_M]);
		shared_vec<TN>(cv, &sh.t.cs[kk][tx * TN]);
		KM_UNROLL
		for (int i = 0; i < TILE_M; i++)
			KM_UNROLL
			for (int j = 0; j < TN; j++)
				acc[i][j] += xv[i] * cv[j];
	}
}

/* A row's best so far: the smallest value, its centroid, and the smallest of the others. */
typedef struct best2
{
	float		best;
	float		second;
	int32_t		arg;
} best2;

__device__ __forceinline__ static void
best2_add(best2 &b, float D, int32_t j)
{
	if (D < b.best)
	{
		b.second = b.best;
		b.best = D;
		b.arg = j;
	}
	else if (D < b.second)
		b.second = D;
}

/* Two partial results of one row; equal bests leave a zero gap, so the exact path decides. */
__device__ __forceinline__ static void
best2_merge(best2 &b, float ob, float os, int32_t oa)
{
	if (ob < b.best || (ob == b.best && oa < b.arg))
	{
		b.second = os < b.best ? os : b.best;
		b.best = ob;
		b.arg = oa;
	}
	else if (ob < b.second)
		b.second = ob;
}

/*
 * Appends the rows whose lane has `pending` to the block's list: one
 * atomic per warp (the ballot counts the lanes), every lane of the warp
 * calls it.
 */
__device__ __forceinline__ static void
append_pending(const assign_args &a, bool pending, int64_t row)
{
	unsigned int mask = __ballot_sync(FULL_MASK, pending);
	int			lane = (int) threadIdx.x & 31;
	unsigned int base = 0;

	if (mask == 0)
		return;
	if (lane == 0)
		base = atomicAdd(a.pend_count, (unsigned int) __popc(mask));
	base = __shfl_sync(FULL_MASK, base, 0);
	if (pending)
		a.pend[base + (unsigned int) __popc(mask & ((1u << lane) - 1u))] = (int32_t) row;
}

/* The CTA's rows: merge the 16 partial results of each row, decide, list the undecided. */
template <int TN>
__device__ __forceinline__ static void
assign_decide(const assign_args &a, assign_shared<TN> &sh, int64_t row0)
{
	int			r = (int) threadIdx.x;
	int64_t		row = row0 + r;
	bool		pending = false;
	best2		b;

	if (r >= TILE_BM)
		return;					/* whole warps: the ballot below sees every lane */
	b.best = sh.r.best[r][0];
	b.second = sh.r.second[r][0];
	b.arg = sh.r.arg[r][0];
	for (int t = 1; t < TILE_T; t++)
		best2_merge(b, sh.r.best[r][t], sh.r.second[r][t], sh.r.arg[r][t]);
	if (row < a.rows)
	{
#if GBML_PLANT == 9
		bool		decided = true;
#else
		bool		decided = gbml_km_float_decides(a.alpha, a.cmax, a.d, a.xnorm2[row], (double) b.best,
													(double) b.second);
#endif

		a.newlab[row] = decided ? b.arg : -1;
		pending = !decided;
	}
	append_pending(a, pending, row);
}

template <int TN>
__global__ static void __launch_bounds__(TILE_THREADS)
assign_float_kernel(assign_args a)
{
	__shared__ assign_shared<TN> sh;
	const int	BN = TILE_T * TN;
	int			tx = (int) threadIdx.x % TILE_T,
				ty = (int) threadIdx.x / TILE_T;
	int64_t		row0 = (int64_t) blockIdx.x * TILE_BM;
	best2		b[TILE_M];
	assign_regs<TN> g;

	KM_UNROLL
	for (int i = 0; i < TILE_M; i++)
	{
		b[i].best = b[i].second = INFINITY;
		b[i].arg = 0;
	}
	for (int c0 = 0; c0 < a.kp; c0 += BN)
	{
		float		acc[TILE_M][TN];

		KM_UNROLL
		for (int i = 0; i < TILE_M; i++)
			KM_UNROLL
			for (int j = 0; j < TN; j++)
				acc[i][j] = 0.0f;
		assign_load<TN>(a, row0, c0, 0, g);
		for (int f0 = 0; f0 < a.d; f0 += TILE_BK)
		{
			assign_store<TN>(g, sh);
			__syncthreads();
			if (f0 + TILE_BK < a.d)
				assign_load<TN>(a, row0, c0, f0 + TILE_BK, g);	/* in flight during the products */
			assign_products<TN>(sh, acc);
			__syncthreads();
		}
		/* D~ = (float) |c|^2 - 2 x.c; padding centroids are +inf and never win */
		KM_UNROLL
		for (int j = 0; j < TN; j++)
		{
			int			c = c0 + tx * TN + j;
			float		cn = a.cnf[c];

			KM_UNROLL
			for (int i = 0; i < TILE_M; i++)
				best2_add(b[i], cn - 2.0f * acc[i][j], c);
		}
	}
	KM_UNROLL
	for (int i = 0; i < TILE_M; i++)
	{
		sh.r.best[ty * TILE_M + i][tx] = b[i].best;
		sh.r.second[ty * TILE_M + i][tx] = b[i].second;
		sh.r.arg[ty * TILE_M + i][tx] = b[i].arg;
	}
	__syncthreads();
	assign_decide<TN>(a, sh, row0);
}

/* ---- kernels: the exact path ---- */

typedef struct exact_args
{
	const float *x;
	int64_t		rows;
	int			d;
	int			k;
	const double *cT;			/* d x k */
	const double *cnorm;
	const int32_t *pend;		/* NULL: every row */
	const unsigned int *pend_count;
	int32_t    *newlab;
	u64		   *acc;
} exact_args;

#if GBML_PLANT == 8
#define TIE_LAST 1
#define NO_ARG (-1)
#else
#define TIE_LAST 0
#define NO_ARG INT32_MAX
#endif

/* (D, j) comes before (best, arg): the smaller distance, on ties the first index. */
__device__ __forceinline__ static bool
exact_before(double D, int32_t j, double best, int32_t arg)
{
	return D < best || (D == best && (TIE_LAST ? j > arg : j < arg));
}

/*
 * The exact label of row x, computed by a whole warp: lane l takes
 * centroids l, l+32, ... (strict <, so its first minimum), then the lanes
 * merge by (distance, index).  No centroid below +inf: 0, as on the CPU.
 */
__device__ static int32_t
exact_label(const exact_args &a, const float *x, int lane)
{
	double		best = INFINITY;
	int32_t		arg = NO_ARG;

	for (int j = lane; j < a.k; j += 32)
	{
		double		D = gbml_km_exact_dist(x, a.cT + j, a.k, a.d, a.cnorm[j]);

		if (TIE_LAST ? D <= best : D < best)
		{
			best = D;
			arg = j;
		}
	}
	for (int off = 16; off > 0; off >>= 1)
	{
		double		ob = __shfl_xor_sync(FULL_MASK, best, off);
		int32_t		oa = __shfl_xor_sync(FULL_MASK, arg, off);

		if (exact_before(ob, oa, best, arg))
		{
			best = ob;
			arg = oa;
		}
	}
	return arg == NO_ARG ? 0 : arg;
}

__global__ static void __launch_bounds__(EXACT_THREADS)
assign_exact_kernel(exact_args a)
{
	int			lane = (int) threadIdx.x & 31;
	int64_t		warp = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int64_t		n_warps = ((int64_t) gridDim.x * blockDim.x) >> 5;
	int64_t		count = a.pend ? (int64_t) *a.pend_count : a.rows;

	if (blockIdx.x == 0 && threadIdx.x == 0 && count > 0)
		atomicAdd(&a.acc[ACC_RECHECKED], (u64) count);
	for (int64_t p = warp; p < count; p += n_warps)
	{
		int64_t		row = a.pend ? a.pend[p] : p;
		int32_t		label = exact_label(a, a.x + row * a.d, lane);

		if (lane == 0)
			a.newlab[row] = label;
	}
}

/* ---- kernels: labels, counts and sums ---- */

typedef struct update_args
{
	const float *x;
	const double *scale;		/* NULL: not spherical */
	const int32_t *newlab;
	int32_t    *labels;
	int64_t		rows;
	int			d;
	int			k;
	bool		update;
	const double *fix;
	u64		   *acc;			/* ACC_HEAD, counts[k], sums[k*d] */
} update_args;

/*
 * sums[label][j] += the fixed-point term of x[r][j] * scale[r] for the
 * rows [r0, r1): consecutive threads take consecutive values of x, so the
 * loads are coalesced and a warp's atomics hit consecutive sums.
 */
__device__ static void
add_sums(const update_args &a, int64_t r0, int64_t r1, u64 *sums)
{
	const float *x = a.x + r0 * a.d;
	int			n;

#if GBML_PLANT == 10
	if (r1 == a.rows)
		r1--;
#endif
	n = (int) ((r1 - r0) * a.d);
	for (int e = (int) threadIdx.x; e < n; e += (int) blockDim.x)
	{
		int			r = e / a.d;
		int			j = e - r * a.d;
		double		sc = a.scale ? a.scale[r0 + r] : 1.0;
		int64_t		term = gbml_km_fix_term(GBML_KM_DMUL((double) x[e], sc), a.fix[j]);

		atomicAdd(&sums[(int64_t) a.newlab[r0 + r] * a.d + j], (u64) term);
	}
}

/*
 * One CTA per UPDATE_ROWS rows: changed rows, the new labels, counts and
 * (with update) the sums.  SHARED: the CTA adds into a copy of counts and
 * sums in shared memory and adds its non-zero entries to the global ones
 * once, which pays when k*(d+1) is small (many rows per entry, and the
 * global atomics of a small k would all hit the same few addresses).  Not
 * SHARED (k*(d+1) over 6,144 words): a CTA's 2,048 rows touch a small part
 * of a large k x d, so a partial copy would be flushed mostly empty; the
 * atomics go straight to global memory, where a warp's 32 lanes add to 32
 * consecutive sums of one centroid and proceed in parallel in L2.
 */
template <bool SHARED>
__global__ static void __launch_bounds__(UPDATE_THREADS)
update_kernel(update_args a)
{
	GBML_DYNAMIC_SHARED(u64, sh);
	__shared__ unsigned int changed;
	int64_t		r0 = (int64_t) blockIdx.x * UPDATE_ROWS;
	int64_t		r1 = r0 + UPDATE_ROWS < a.rows ? r0 + UPDATE_ROWS : a.rows;
	int64_t		words = a.k + (a.update ? (int64_t) a.k * a.d : 0);
	u64		   *counts = SHARED ? sh : a.acc + ACC_HEAD;
	unsigned int mine = 0;

	if (SHARED)
		for (int64_t i = threadIdx.x; i < words; i += blockDim.x)
			sh[i] = 0;
	if (threadIdx.x == 0)
		changed = 0;
	__syncthreads();
	for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x)
	{
		int32_t		label = a.newlab[r];

		mine += label != a.labels[r];
		a.labels[r] = label;
		atomicAdd(&counts[label], 1ull);
	}
	if (mine)
		atomicAdd(&changed, mine);
	if (a.update)
		add_sums(a, r0, r1, counts + a.k);
	__syncthreads();
	if (SHARED)
		for (int64_t i = threadIdx.x; i < words; i += blockDim.x)
			if (sh[i] != 0)
				atomicAdd(&a.acc[ACC_HEAD + i], sh[i]);
	if (threadIdx.x == 0 && changed)
		atomicAdd(&a.acc[ACC_CHANGED], (u64) changed);
}

/* ---- kernels: k-means++ and distances ---- */

typedef struct cand_args
{
	const float *x;
	const double *scale;		/* NULL: not spherical */
	const float *closest;
	int64_t		rows;
	int			d;
	const float *cand_t;		/* d x 16 */
	int			T;
	double		pot_scale;
	float	   *out;			/* T x rows */
	u64		   *pot;			/* T: this block's potentials */
} cand_args;

__device__ __forceinline__ static u64
warp_sum(u64 v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_xor_sync(FULL_MASK, v, off);
	return v;
}

/*
 * One thread per row, all T candidates at once: the row's features come
 * through shared memory 32 at a time (coalesced loads), and each
 * candidate's distance advances one feature at a time in feature order,
 * which is gbml_km_cand_dist's arithmetic.  Then out = min(closest, the
 * distance), and the CTA's fixed-point potential per candidate.
 */
__global__ static void __launch_bounds__(CAND_ROWS)
cand_kernel(cand_args a)
{
	__shared__ float xs[CAND_FEATS][CAND_ROWS + 1];
	__shared__ float cs[CAND_FEATS][CAND_LANES];
	__shared__ u64 pot[CAND_LANES];
	int			tid = (int) threadIdx.x;
	int64_t		row0 = (int64_t) blockIdx.x * CAND_ROWS,
				row = row0 + tid;
	bool		valid = row < a.rows;
	float		sc = valid && a.scale ? (float) a.scale[row] : 1.0f;
	float		acc[CAND_LANES];

	KM_UNROLL
	for (int t = 0; t < CAND_LANES; t++)
		acc[t] = 0.0f;
	if (tid < CAND_LANES)
		pot[tid] = 0;
	for (int f0 = 0; f0 < a.d; f0 += CAND_FEATS)
	{
		int			nf = a.d - f0 < CAND_FEATS ? a.d - f0 : CAND_FEATS;

		for (int e = tid; e < CAND_ROWS * CAND_FEATS; e += CAND_ROWS)
		{
			int64_t		r = row0 + e / CAND_FEATS;
			int			f = e % CAND_FEATS;

			xs[f][e / CAND_FEATS] = r < a.rows && f < nf ? a.x[r * a.d + f0 + f] : 0.0f;
		}
		for (int e = tid; e < CAND_FEATS * CAND_LANES; e += CAND_ROWS)
			cs[e / CAND_LANES][e % CAND_LANES] = e / CAND_LANES < nf ? a.cand_t[(int64_t) f0 * CAND_LANES + e] : 0.0f;
		__syncthreads();
		for (int f = 0; f < nf; f++)
		{
			float		xv = xs[f][tid];

			KM_UNROLL
			for (int t = 0; t < CAND_LANES; t++)
				if (t < a.T)
					acc[t] = gbml_km_cand_step(acc[t], xv, sc, cs[f][t]);
		}
		__syncthreads();
	}
	KM_UNROLL
	for (int t = 0; t < CAND_LANES; t++)
		if (t < a.T)
		{
			u64			term = 0;

			if (valid)
			{
				float		c = a.closest[row];
				float		v = acc[t] < c ? acc[t] : c;

				a.out[t * a.rows + row] = v;
				term = (u64) gbml_km_fix_term((double) v, a.pot_scale);
			}
			term = warp_sum(term);
			if ((tid & 31) == 0 && term != 0)
				atomicAdd(&pot[t], term);
		}
	__syncthreads();
	if (tid < a.T && pot[tid] != 0)
		atomicAdd(&a.pot[tid], pot[tid]);
}

/* closest = one candidate's values; the maximum (non-negative floats order as their bits). */
__global__ static void
cand_take_kernel(const float *cand, int64_t rows, float *closest, u64 *max_bits)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	float		v = 0.0f;

	if (r < rows)
	{
		v = cand[r];
		closest[r] = v;
	}
	for (int off = 16; off > 0; off >>= 1)
	{
		float		o = __shfl_xor_sync(FULL_MASK, v, off);

		v = o > v ? o : v;
	}
	if ((threadIdx.x & 31) == 0)
		atomicMax(max_bits, (u64) __float_as_uint(v));
}

__global__ static void
fill_inf_kernel(float *v, int64_t n)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		v[i] = INFINITY;
}

__global__ static void
row_dist_kernel(const float *x, const double *scale, const int32_t *labels, int64_t rows, int d, int k,
				const double *c, bool spherical, double *out)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	int32_t		label;

	if (r >= rows)
		return;
	label = labels[r];
	out[r] = label >= 0 && label < k
		? gbml_km_row_dist(x + r * d, spherical ? scale[r] : 1.0, c + (int64_t) label * d, d, spherical)
		: NAN;
}

/* ---- host side: state and memory ---- */

static size_t
align_up(size_t v)
{
	return (v + 255) & ~(size_t) 255;
}

/* The offset of the next piece of one allocation, and the running size past it. */
static size_t
piece(size_t *at, size_t bytes)
{
	size_t		off = *at;

	*at = align_up(off + bytes);
	return off;
}

static unsigned int
grid_for(int64_t n, int threads)
{
	return (unsigned int) ((n + threads - 1) / threads);
}

static gpu_kmeans_state *
state_of(gbml_gpu_ctx *ctx, bool idle)
{
	gpu_kmeans_state *s = ctx->kmeans;

	if (s == NULL)
		gpu_fail("GPU K-Means: begin was not called");
	else if (idle && s->pass_active)
	{
		gpu_fail("GPU K-Means: a pass is still running");
		return NULL;
	}
	return s;
}

/* Block b, which must be on the device. */
static km_block *
resident(gpu_kmeans_state *s, int b)
{
	if (b < 0 || b >= s->n_blocks || s->blocks[b].mem == NULL)
	{
		gpu_fail("GPU K-Means: block %d is not on the device", b);
		return NULL;
	}
	return &s->blocks[b];
}

/* Every listed block on the device, none twice. */
static int
check_blocks(gpu_kmeans_state *s, const int *blocks, int nb)
{
	if (nb < 0 || nb > s->n_blocks || (nb > 0 && blocks == NULL))
		return gpu_fail("GPU K-Means: a list of %d blocks (the fit has %d)", nb, s->n_blocks);
	s->stamp++;
	for (int i = 0; i < nb; i++)
	{
		km_block   *blk = resident(s, blocks[i]);

		if (blk == NULL)
			return 1;
		if (blk->stamp == s->stamp)
			return gpu_fail("GPU K-Means: block %d is listed twice", blocks[i]);
		blk->stamp = s->stamp;
	}
	return 0;
}

extern "C" void
gpu_kmeans_state_free(gbml_gpu_ctx *ctx)
{
	if (ctx->kmeans)
	{
		free(ctx->kmeans->blocks);
		free(ctx->kmeans);
		ctx->kmeans = NULL;
	}
}

static void
release_block(gbml_gpu_ctx *ctx, km_block *blk)
{
	gpu_release(ctx, blk->mem);
	if (blk->cand)
		gpu_release(ctx, blk->cand);
	memset(blk, 0, sizeof(*blk));
}

static void
km_end(gbml_gpu_ctx *ctx)
{
	gpu_kmeans_state *s = ctx->kmeans;

	if (s == NULL)
		return;
	/* nothing queued may still touch what is freed */
	(void) cudaStreamSynchronize(ctx->stream);
	(void) cudaGetLastError();
	for (int b = 0; b < s->n_blocks; b++)
		if (s->blocks[b].mem)
			release_block(ctx, &s->blocks[b]);
	{
		void	   *held[] = {s->d_c, s->d_acc, s->d_pot, s->h_centers, s->h_cand, s->h_acc, s->h_pot,
			s->stage[0], s->stage[1], (void *) s->centers_done, (void *) s->cand_done, (void *) s->ev_start,
		(void *) s->ev_end, (void *) s->ev_done, (void *) s->stage_done[0], (void *) s->stage_done[1]};

		for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
			if (held[i])
				gpu_release(ctx, held[i]);
	}
	gpu_kmeans_state_free(ctx);
}

/* The centroid arrays: one device allocation cut into pieces. */
static int
alloc_centers(gbml_gpu_ctx *ctx, gpu_kmeans_state *s)
{
	size_t		kd = (size_t) s->k * (size_t) s->d,
				at = 0;
	size_t		o_c = piece(&at, sizeof(double) * (kd + (size_t) s->k)),
				o_ct = piece(&at, sizeof(double) * kd),
				o_fix = piece(&at, sizeof(double) * (size_t) s->d),
				o_ctf = piece(&at, sizeof(float) * (size_t) s->d * (size_t) s->kp),
				o_cnf = piece(&at, sizeof(float) * (size_t) s->kp),
				o_cand = piece(&at, sizeof(float) * (size_t) s->d * CAND_LANES);
	char	   *base = (char *) gpu_alloc_device(ctx, at, "the centroids");

	if (base == NULL)
		return 1;
	s->d_c = (double *) (base + o_c);
	s->d_cnorm = s->d_c + kd;
	s->d_cT = (double *) (base + o_ct);
	s->d_fix = (double *) (base + o_fix);
	s->d_cTf = (float *) (base + o_ctf);
	s->d_cnf = (float *) (base + o_cnf);
	s->d_cand_t = (float *) (base + o_cand);
	return 0;
}

/* Everything of a fit but the row blocks: centroids, sums, potentials, staging, events. */
static int
alloc_fixed(gbml_gpu_ctx *ctx, gpu_kmeans_state *s)
{
	size_t		kd = (size_t) s->k * (size_t) s->d;
	size_t		acc = ACC_HEAD + (size_t) s->k + kd,
				pot = (size_t) s->n_blocks * CAND_LANES;

	if (alloc_centers(ctx, s) ||
		(s->d_acc = (u64 *) gpu_alloc_device(ctx, sizeof(u64) * acc, "the centroid sums")) == NULL ||
		(s->d_pot = (u64 *) gpu_alloc_device(ctx, sizeof(u64) * pot, "the k-means++ potentials")) == NULL ||
		(s->h_acc = (int64_t *) gpu_alloc_pinned(ctx, sizeof(int64_t) * acc, "centroid sums")) == NULL ||
		(s->h_pot = (int64_t *) gpu_alloc_pinned(ctx, sizeof(int64_t) * pot, "potentials")) == NULL ||
		(s->h_centers = (double *) gpu_alloc_pinned(ctx, sizeof(double) * (kd + (size_t) s->k), "centroid staging")) == NULL ||
		(s->h_cand = (float *) gpu_alloc_pinned(ctx, sizeof(float) * (size_t) s->d * CAND_LANES, "candidate staging")) == NULL ||
		(s->ev_start = gpu_timing_event(ctx)) == NULL ||
		(s->ev_end = gpu_timing_event(ctx)) == NULL ||
		(s->ev_done = gpu_event(ctx)) == NULL ||
		(s->centers_done = gpu_event(ctx)) == NULL ||
		(s->cand_done = gpu_event(ctx)) == NULL)
		return 1;
	for (int i = 0; i < STAGE_SLOTS; i++)
		if ((s->stage_done[i] = gpu_event(ctx)) == NULL)
			return 1;
	return 0;
}

static int
km_begin(gbml_gpu_ctx *ctx, int k, int d, bool spherical, int n_blocks, const double *fix_scale)
{
	gpu_kmeans_state *s;
	cudaDeviceProp prop;

	if (ctx->kmeans != NULL)
		return gpu_fail("GPU K-Means: begin called twice on one context");
	if (k < 1 || d < 1 || d > KM_MAX_D || n_blocks < 1 || fix_scale == NULL)
		return gpu_fail("GPU K-Means: bad shape (k = %d, %d features, %d blocks)", k, d, n_blocks);
	s = (gpu_kmeans_state *) calloc(1, sizeof(gpu_kmeans_state));
	if (s == NULL || (s->blocks = (km_block *) calloc((size_t) n_blocks, sizeof(km_block))) == NULL)
	{
		free(s);
		return gpu_fail("out of host memory for the GPU K-Means state");
	}
	ctx->kmeans = s;
	s->k = k;
	s->d = d;
	s->spherical = spherical;
	s->n_blocks = n_blocks;
	/* the narrowest tile that covers k: small k wastes less on padding centroids */
	s->tile_n = k <= 2 * TILE_T ? 2 : k <= 4 * TILE_T ? 4 : 8;
	s->kp = (k + TILE_T * s->tile_n - 1) / (TILE_T * s->tile_n) * (TILE_T * s->tile_n);
	if (gpu_check(cudaGetDeviceProperties(&prop, ctx->device), "cudaGetDeviceProperties"))
		return 1;
	/* enough warps to fill the card; the emulation runs every CTA's fibers, even idle ones */
	s->exact_ctas = GBML_CUDA_EMULATED ? 8 : prop.multiProcessorCount * 16;
	if (alloc_fixed(ctx, s) ||
		gpu_upload(ctx, s->d_fix, fix_scale, sizeof(double) * (size_t) d, "cudaMemcpyAsync(fixed-point grids)"))
		return 1;
	/* fix_scale is the caller's memory: copied before we return */
	return gpu_sync(ctx, "cudaStreamSynchronize(K-Means begin)");
}

/* ---- host side: row blocks ---- */

typedef struct block_layout
{
	size_t		xnorm2,
				scale,
				labels,
				upload,			/* bytes put_block copies: x .. labels */
				scratch,
				pend_count,
				closest,
				total;
} block_layout;

static block_layout
layout_of(const gpu_kmeans_state *s, int64_t rows)
{
	block_layout L;
	size_t		r = (size_t) rows,
				at = 0;

	(void) piece(&at, sizeof(float) * r * (size_t) s->d);
	L.xnorm2 = piece(&at, sizeof(double) * r);
	L.scale = piece(&at, s->spherical ? sizeof(double) * r : 0);
	L.labels = piece(&at, sizeof(int32_t) * r);
	L.upload = L.labels + sizeof(int32_t) * r;
	L.scratch = piece(&at, sizeof(double) * r);
	L.pend_count = piece(&at, sizeof(unsigned int));
	L.closest = piece(&at, sizeof(float) * r);
	L.total = at;
	return L;
}

/* A pinned staging buffer of at least `bytes`, free to fill (its last copy has run). */
static char *
staging_slot(gbml_gpu_ctx *ctx, gpu_kmeans_state *s, size_t bytes, int *slot_out)
{
	int			slot = s->stage_next;

	s->stage_next = (slot + 1) % STAGE_SLOTS;
	if (s->stage_used[slot] &&
		gpu_check(cudaEventSynchronize(s->stage_done[slot]), "cudaEventSynchronize(row staging)"))
		return NULL;
	s->stage_used[slot] = false;
	if (s->stage_bytes[slot] < bytes)
	{
		if (s->stage[slot])
			gpu_release(ctx, s->stage[slot]);
		s->stage_bytes[slot] = 0;
		if ((s->stage[slot] = gpu_alloc_pinned(ctx, bytes, "row staging")) == NULL)
			return NULL;
		s->stage_bytes[slot] = bytes;
	}
	*slot_out = slot;
	return (char *) s->stage[slot];
}

static void
bind_block(km_block *blk, char *mem, int64_t rows, const block_layout *L, bool spherical)
{
	memset(blk, 0, sizeof(*blk));
	blk->mem = mem;
	blk->rows = rows;
	blk->x = (float *) mem;
	blk->xnorm2 = (double *) (mem + L->xnorm2);
	blk->scale = spherical ? (double *) (mem + L->scale) : NULL;
	blk->labels = (int32_t *) (mem + L->labels);
	blk->newlab = (int32_t *) (mem + L->scratch);
	blk->pend = blk->newlab + rows;
	blk->dist = (double *) (mem + L->scratch);
	blk->pend_count = (unsigned int *) (mem + L->pend_count);
	blk->closest = (float *) (mem + L->closest);
}

static int
km_put_block(gbml_gpu_ctx *ctx, int b, const float *x, const double *xnorm2, const double *scale,
			 const int32_t *labels, int64_t rows)
{
	gpu_kmeans_state *s = state_of(ctx, false);
	block_layout L;
	char	   *stage,
			   *mem;
	int			slot = 0;
	km_block   *blk;

	if (s == NULL)
		return 1;
	if (b < 0 || b >= s->n_blocks || rows < 1 || x == NULL || xnorm2 == NULL || (s->spherical && scale == NULL))
		return gpu_fail("GPU K-Means: bad block %d of %lld rows", b, (long long) rows);
	blk = &s->blocks[b];
	if (blk->mem != NULL)
		return gpu_fail("GPU K-Means: block %d is already on the device", b);
	L = layout_of(s, rows);
	if ((mem = (char *) gpu_alloc_device(ctx, L.total, "a block of rows")) == NULL)
		return 1;
	if ((stage = staging_slot(ctx, s, L.upload, &slot)) == NULL)
	{
		gpu_release(ctx, mem);
		return 1;
	}
	memcpy(stage, x, sizeof(float) * (size_t) rows * (size_t) s->d);
	memcpy(stage + L.xnorm2, xnorm2, sizeof(double) * (size_t) rows);
	if (s->spherical)
		memcpy(stage + L.scale, scale, sizeof(double) * (size_t) rows);
	if (labels)
		memcpy(stage + L.labels, labels, sizeof(int32_t) * (size_t) rows);
	else
		memset(stage + L.labels, 0xff, sizeof(int32_t) * (size_t) rows);	/* -1: no label yet */
	if (gpu_upload(ctx, mem, stage, L.upload, "cudaMemcpyAsync(K-Means rows)") ||
		gpu_check(cudaEventRecord(s->stage_done[slot], ctx->stream), "cudaEventRecord(row staging)"))
	{
		gpu_release(ctx, mem);
		return 1;
	}
	s->stage_used[slot] = true;
	bind_block(blk, mem, rows, &L, s->spherical);
	return 0;
}

static int
copy_labels(gbml_gpu_ctx *ctx, const km_block *blk, int32_t *out)
{
	if (gpu_check(cudaMemcpyAsync(out, blk->labels, sizeof(int32_t) * (size_t) blk->rows,
								  cudaMemcpyDeviceToHost, ctx->stream), "cudaMemcpyAsync(labels to host)"))
		return 1;
	return gpu_sync(ctx, "cudaStreamSynchronize(labels)");
}

static int
km_read_labels(gbml_gpu_ctx *ctx, int b, int32_t *labels_out)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	km_block   *blk = s ? resident(s, b) : NULL;

	if (blk == NULL)
		return 1;
	if (labels_out == NULL)
		return gpu_fail("GPU K-Means: read_labels without an output");
	return copy_labels(ctx, blk, labels_out);
}

static int
km_drop_block(gbml_gpu_ctx *ctx, int b, int32_t *labels_out)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	km_block   *blk = s ? resident(s, b) : NULL;

	if (blk == NULL || (labels_out && copy_labels(ctx, blk, labels_out)))
		return 1;
	release_block(ctx, blk);
	return 0;
}

/* ---- host side: centroids and the Lloyd pass ---- */

static int
km_set_centers(gbml_gpu_ctx *ctx, const gbml_km_device_centers *centers)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	size_t		kd,
				n;

	if (s == NULL)
		return 1;
	if (centers == NULL || centers->c == NULL || centers->cnorm_d == NULL)
		return gpu_fail("GPU K-Means: set_centers without centroids");
	kd = (size_t) s->k * (size_t) s->d;
	n = (size_t) s->d * (size_t) s->kp;
	/* the staging buffer is free once the last upload from it has run */
	if (s->centers_staged &&
		gpu_check(cudaEventSynchronize(s->centers_done), "cudaEventSynchronize(centroid staging)"))
		return 1;
	memcpy(s->h_centers, centers->c, sizeof(double) * kd);
	memcpy(s->h_centers + kd, centers->cnorm_d, sizeof(double) * (size_t) s->k);
	if (gpu_upload(ctx, s->d_c, s->h_centers, sizeof(double) * (kd + (size_t) s->k), "cudaMemcpyAsync(centroids)") ||
		gpu_check(cudaEventRecord(s->centers_done, ctx->stream), "cudaEventRecord(centroid staging)"))
		return 1;
	s->centers_staged = true;
	GBML_LAUNCH(centers_convert_kernel, dim3(grid_for((int64_t) n, 256)), dim3(256), 0, ctx->stream,
				s->d_c, s->d_cnorm, s->k, s->d, s->kp, s->d_cT, s->d_cTf, s->d_cnf);
	if (gpu_check(cudaGetLastError(), "centers_convert_kernel launch"))
		return 1;
	s->cmax = centers->cmax;
	s->alpha = centers->alpha;
	s->have_centers = true;
	return 0;
}

static int
launch_float(gbml_gpu_ctx *ctx, const gpu_kmeans_state *s, const km_block *blk)
{
	assign_args a;
	dim3		grid(grid_for(blk->rows, TILE_BM));

	a.x = blk->x;
	a.xnorm2 = blk->xnorm2;
	a.rows = blk->rows;
	a.d = s->d;
	a.kp = s->kp;
	a.cTf = s->d_cTf;
	a.cnf = s->d_cnf;
	a.alpha = s->alpha;
	a.cmax = s->cmax;
	a.newlab = blk->newlab;
	a.pend = blk->pend;
	a.pend_count = blk->pend_count;
	if (s->tile_n == 2)
		GBML_LAUNCH(assign_float_kernel<2>, grid, dim3(TILE_THREADS), 0, ctx->stream, a);
	else if (s->tile_n == 4)
		GBML_LAUNCH(assign_float_kernel<4>, grid, dim3(TILE_THREADS), 0, ctx->stream, a);
	else
		GBML_LAUNCH(assign_float_kernel<8>, grid, dim3(TILE_THREADS), 0, ctx->stream, a);
	return gpu_check(cudaGetLastError(), "assign_float_kernel launch");
}

/* The exact path for the block's listed rows, or (all_rows) for every row. */
static int
launch_exact(gbml_gpu_ctx *ctx, const gpu_kmeans_state *s, const km_block *blk, bool all_rows)
{
	exact_args	a;
	unsigned int grid = grid_for(blk->rows, EXACT_THREADS / 32);

	a.x = blk->x;
	a.rows = blk->rows;
	a.d = s->d;
	a.k = s->k;
	a.cT = s->d_cT;
	a.cnorm = s->d_cnorm;
	a.pend = all_rows ? NULL : blk->pend;
	a.pend_count = blk->pend_count;
	a.newlab = blk->newlab;
	a.acc = s->d_acc;
	if (grid > (unsigned int) s->exact_ctas)
		grid = (unsigned int) s->exact_ctas;
	GBML_LAUNCH(assign_exact_kernel, dim3(grid), dim3(EXACT_THREADS), 0, ctx->stream, a);
	return gpu_check(cudaGetLastError(), "assign_exact_kernel launch");
}

static int
launch_update(gbml_gpu_ctx *ctx, const gpu_kmeans_state *s, const km_block *blk, bool update)
{
	update_args a;
	size_t		words = (size_t) s->k + (update ? (size_t) s->k * (size_t) s->d : 0);
	dim3		grid(grid_for(blk->rows, UPDATE_ROWS));

	a.x = blk->x;
	a.scale = blk->scale;
	a.newlab = blk->newlab;
	a.labels = blk->labels;
	a.rows = blk->rows;
	a.d = s->d;
	a.k = s->k;
	a.update = update;
	a.fix = s->d_fix;
	a.acc = s->d_acc;
	if (words * sizeof(u64) <= SHARED_SUMS_BYTES)
		GBML_LAUNCH(update_kernel<true>, grid, dim3(UPDATE_THREADS), words * sizeof(u64), ctx->stream, a);
	else
		GBML_LAUNCH(update_kernel<false>, grid, dim3(UPDATE_THREADS), 0, ctx->stream, a);
	return gpu_check(cudaGetLastError(), "update_kernel launch");
}

/* One block's kernels; an alpha of +inf (or NaN) trusts no float value: every row is exact. */
static int
launch_pass_block(gbml_gpu_ctx *ctx, const gpu_kmeans_state *s, const km_block *blk, bool update)
{
	bool		all_exact = !(s->alpha < INFINITY);

	if (!all_exact &&
		(gpu_check(cudaMemsetAsync(blk->pend_count, 0, sizeof(unsigned int), ctx->stream), "cudaMemsetAsync(pending rows)") ||
		 launch_float(ctx, s, blk)))
		return 1;
	return launch_exact(ctx, s, blk, all_exact) || launch_update(ctx, s, blk, update);
}

static int
km_pass_launch(gbml_gpu_ctx *ctx, const int *blocks, int nb, bool update)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	size_t		words;

	if (s == NULL || check_blocks(s, blocks, nb))
		return 1;
	if (!s->have_centers)
		return gpu_fail("GPU K-Means: a pass before set_centers");
	words = ACC_HEAD + (size_t) s->k + (update ? (size_t) s->k * (size_t) s->d : 0);
	if (gpu_check(cudaEventRecord(s->ev_start, ctx->stream), "cudaEventRecord(pass start)") ||
		gpu_check(cudaMemsetAsync(s->d_acc, 0, sizeof(u64) * words, ctx->stream), "cudaMemsetAsync(centroid sums)"))
		return 1;
	for (int i = 0; i < nb; i++)
		if (launch_pass_block(ctx, s, &s->blocks[blocks[i]], update))
			return 1;
	if (gpu_check(cudaEventRecord(s->ev_end, ctx->stream), "cudaEventRecord(pass end)") ||
		gpu_check(cudaMemcpyAsync(s->h_acc, s->d_acc, sizeof(u64) * words, cudaMemcpyDeviceToHost, ctx->stream),
				  "cudaMemcpyAsync(centroid sums to host)") ||
		gpu_check(cudaEventRecord(s->ev_done, ctx->stream), "cudaEventRecord(pass done)"))
		return 1;
	s->pass_active = true;
	s->pass_update = update;
	return 0;
}

static int
km_pass_done(gbml_gpu_ctx *ctx)
{
	gpu_kmeans_state *s = state_of(ctx, false);
	cudaError_t e;

	if (s == NULL)
		return -1;
	if (!s->pass_active)
	{
		gpu_fail("GPU K-Means: no pass is running");
		return -1;
	}
	e = cudaEventQuery(s->ev_done);
	if (e == cudaErrorNotReady)
	{
		/* not an error: keep it from looking like the next launch's */
		if (cudaPeekAtLastError() == cudaErrorNotReady)
			(void) cudaGetLastError();
		return 0;
	}
	return gpu_check(e, "cudaEventQuery(K-Means pass)") ? -1 : 1;
}

static int
km_pass_finish(gbml_gpu_ctx *ctx, int64_t *sums, int64_t *counts, gbml_km_pass_result *out)
{
	gpu_kmeans_state *s = state_of(ctx, false);
	const int64_t *h;
	float		ms = 0;

	if (s == NULL)
		return 1;
	if (!s->pass_active)
		return gpu_fail("GPU K-Means: no pass is running");
	s->pass_active = false;
	if (gpu_sync(ctx, "K-Means pass") ||
		gpu_check(cudaEventElapsedTime(&ms, s->ev_start, s->ev_end), "cudaEventElapsedTime(K-Means pass)"))
		return 1;
	h = s->h_acc;
	if (counts)
		for (int j = 0; j < s->k; j++)
			counts[j] += h[ACC_HEAD + j];
	if (s->pass_update && sums)
		for (size_t i = 0; i < (size_t) s->k * (size_t) s->d; i++)
			sums[i] += h[ACC_HEAD + s->k + i];
	if (out)
	{
		out->changed = h[ACC_CHANGED];
		out->rechecked = h[ACC_RECHECKED];
		out->seconds = ms / 1000.0;
	}
	return 0;
}

/* ---- host side: k-means++ and distances ---- */

static int
km_cand_reset(gbml_gpu_ctx *ctx, const int *blocks, int nb)
{
	gpu_kmeans_state *s = state_of(ctx, true);

	if (s == NULL || check_blocks(s, blocks, nb))
		return 1;
	for (int i = 0; i < nb; i++)
	{
		km_block   *blk = &s->blocks[blocks[i]];

		GBML_LAUNCH(fill_inf_kernel, dim3(grid_for(blk->rows, ROW_THREADS)), dim3(ROW_THREADS), 0, ctx->stream,
					blk->closest, blk->rows);
		if (gpu_check(cudaGetLastError(), "fill_inf_kernel launch"))
			return 1;
	}
	return 0;
}

/* Room for T candidates' values of the block's rows. */
static int
cand_room(gbml_gpu_ctx *ctx, km_block *blk, int T)
{
	if (blk->cand_cap >= T)
		return 0;
	if (blk->cand)
		gpu_release(ctx, blk->cand);
	blk->cand_cap = 0;
	blk->cand = (float *) gpu_alloc_device(ctx, sizeof(float) * (size_t) T * (size_t) blk->rows,
										   "the k-means++ distances");
	if (blk->cand == NULL)
		return 1;
	blk->cand_cap = T;
	return 0;
}

static int
launch_cand(gbml_gpu_ctx *ctx, const gpu_kmeans_state *s, const km_block *blk, int T, double pot_scale, u64 *pot)
{
	cand_args	a;

	a.x = blk->x;
	a.scale = blk->scale;
	a.closest = blk->closest;
	a.rows = blk->rows;
	a.d = s->d;
	a.cand_t = s->d_cand_t;
	a.T = T;
	a.pot_scale = pot_scale;
	a.out = blk->cand;
	a.pot = pot;
	GBML_LAUNCH(cand_kernel, dim3(grid_for(blk->rows, CAND_ROWS)), dim3(CAND_ROWS), 0, ctx->stream, a);
	return gpu_check(cudaGetLastError(), "cand_kernel launch");
}

static int
km_cand_pass(gbml_gpu_ctx *ctx, const int *blocks, int nb, const float *cand_t, int T, double pot_scale,
			 int64_t *pot)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	size_t		pot_bytes;

	if (s == NULL || check_blocks(s, blocks, nb))
		return 1;
	if (T < 1 || T > CAND_LANES || cand_t == NULL || (nb > 0 && pot == NULL))
		return gpu_fail("GPU K-Means: %d k-means++ candidates (1 to %d)", T, CAND_LANES);
	if (s->cand_staged &&
		gpu_check(cudaEventSynchronize(s->cand_done), "cudaEventSynchronize(candidate staging)"))
		return 1;
	memcpy(s->h_cand, cand_t, sizeof(float) * (size_t) s->d * CAND_LANES);
	pot_bytes = sizeof(u64) * (size_t) nb * (size_t) T;
	if (gpu_upload(ctx, s->d_cand_t, s->h_cand, sizeof(float) * (size_t) s->d * CAND_LANES, "cudaMemcpyAsync(candidates)") ||
		gpu_check(cudaEventRecord(s->cand_done, ctx->stream), "cudaEventRecord(candidate staging)") ||
		gpu_check(cudaMemsetAsync(s->d_pot, 0, pot_bytes, ctx->stream), "cudaMemsetAsync(potentials)"))
		return 1;
	s->cand_staged = true;
	for (int i = 0; i < nb; i++)
	{
		km_block   *blk = &s->blocks[blocks[i]];

		if (cand_room(ctx, blk, T) || launch_cand(ctx, s, blk, T, pot_scale, s->d_pot + (size_t) i * T))
			return 1;
		blk->cand_T = T;
	}
	if (gpu_check(cudaMemcpyAsync(s->h_pot, s->d_pot, pot_bytes, cudaMemcpyDeviceToHost, ctx->stream),
				  "cudaMemcpyAsync(potentials to host)") ||
		gpu_sync(ctx, "k-means++ candidates"))
		return 1;
	if (nb > 0)
		memcpy(pot, s->h_pot, pot_bytes);
	return 0;
}

static int
km_cand_take(gbml_gpu_ctx *ctx, const int *blocks, int nb, int t, float *max_out)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	uint32_t	bits;

	if (s == NULL || check_blocks(s, blocks, nb))
		return 1;
	if (max_out == NULL)
		return gpu_fail("GPU K-Means: cand_take without an output");
	for (int i = 0; i < nb; i++)
		if (t < 0 || t >= s->blocks[blocks[i]].cand_T)
			return gpu_fail("GPU K-Means: candidate %d was not measured on block %d", t, blocks[i]);
	if (gpu_check(cudaMemsetAsync(s->d_acc + ACC_MAX, 0, sizeof(u64), ctx->stream), "cudaMemsetAsync(maximum)"))
		return 1;
	for (int i = 0; i < nb; i++)
	{
		km_block   *blk = &s->blocks[blocks[i]];

		GBML_LAUNCH(cand_take_kernel, dim3(grid_for(blk->rows, ROW_THREADS)), dim3(ROW_THREADS), 0, ctx->stream,
					blk->cand + (size_t) t * (size_t) blk->rows, blk->rows, blk->closest, s->d_acc + ACC_MAX);
		if (gpu_check(cudaGetLastError(), "cand_take_kernel launch"))
			return 1;
	}
	if (gpu_check(cudaMemcpyAsync(s->h_acc + ACC_MAX, s->d_acc + ACC_MAX, sizeof(u64), cudaMemcpyDeviceToHost,
								  ctx->stream), "cudaMemcpyAsync(maximum to host)") ||
		gpu_sync(ctx, "k-means++ take"))
		return 1;
	bits = (uint32_t) s->h_acc[ACC_MAX];
	memcpy(max_out, &bits, sizeof(float));
	return 0;
}

static int
km_read_closest(gbml_gpu_ctx *ctx, int b, float *out)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	km_block   *blk = s ? resident(s, b) : NULL;

	if (blk == NULL)
		return 1;
	if (out == NULL)
		return gpu_fail("GPU K-Means: read_closest without an output");
	if (gpu_check(cudaMemcpyAsync(out, blk->closest, sizeof(float) * (size_t) blk->rows, cudaMemcpyDeviceToHost,
								  ctx->stream), "cudaMemcpyAsync(closest distances to host)"))
		return 1;
	return gpu_sync(ctx, "cudaStreamSynchronize(closest distances)");
}

static int
km_row_dist(gbml_gpu_ctx *ctx, int b, double *out)
{
	gpu_kmeans_state *s = state_of(ctx, true);
	km_block   *blk = s ? resident(s, b) : NULL;

	if (blk == NULL)
		return 1;
	if (out == NULL || !s->have_centers)
		return gpu_fail("GPU K-Means: row_dist needs the centroids and an output");
	GBML_LAUNCH(row_dist_kernel, dim3(grid_for(blk->rows, ROW_THREADS)), dim3(ROW_THREADS), 0, ctx->stream,
				blk->x, blk->scale, blk->labels, blk->rows, s->d, s->k, s->d_c, s->spherical, blk->dist);
	if (gpu_check(cudaGetLastError(), "row_dist_kernel launch") ||
		gpu_check(cudaMemcpyAsync(out, blk->dist, sizeof(double) * (size_t) blk->rows, cudaMemcpyDeviceToHost,
								  ctx->stream), "cudaMemcpyAsync(row distances to host)"))
		return 1;
	return gpu_sync(ctx, "cudaStreamSynchronize(row distances)");
}

const struct gbml_backend_kmeans gpu_kmeans_backend = {
	km_begin,
	km_end,
	km_put_block,
	km_drop_block,
	km_read_labels,
	km_set_centers,
	km_pass_launch,
	km_pass_done,
	km_pass_finish,
	km_cand_reset,
	km_cand_pass,
	km_cand_take,
	km_read_closest,
	km_row_dist,
};
