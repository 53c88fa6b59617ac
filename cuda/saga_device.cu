/*
 * saga_device.cu — mini-batch SAGA on the GPU (src/core/saga_backend.h; the
 * host driver is src/core/saga_gpu.c): the step kernel, the passes over
 * every row (feature statistics, row norms, the Gram-matrix product of the
 * power iteration, the objective), the solver state in the training's
 * context, and the rows either resident in device chunks or streamed
 * through a ring of two pinned staging buffers.
 *
 * One SAGA step over a batch B of b rows (the intercept is coordinate d,
 * with feature 1):
 *     delta_i = s_i loss'(z_i.w, y_i) - alpha_i ;  alpha_i += delta_i   (i in B)
 *     u       = sum_{i in B} delta_i z_i
 *     w       = prox(w - gamma (u / b + A)) ;  A += u / n
 * The step kernel runs one step on a grid of blocks of ROWS rows each: every
 * block computes its rows' margins at the same w, their gradient scalars,
 * and its part of u (a partial vector).  The update of w that those partials
 * make is applied at the start of the NEXT step's kernel, by every block
 * identically (the sum of the partials in block order, then the prox), so a
 * step costs one launch: block 0 also stores the updated w and A, into the
 * other of two buffers (nothing a kernel reads is written by it).  The
 * epoch's last update is applied by a one-block launch of the same kernel
 * with no rows.
 *
 * Deterministic: a row's margin is summed over features in a fixed order,
 * a block's partial over its rows in a fixed order, the partials in block
 * order; no atomics.  Where a row's features come from (a resident chunk, a
 * staging buffer, or the block's shared-memory copy of either) never changes
 * the arithmetic, so a streamed training gives a resident one's bytes.
 *
 * Rows in shared memory: a block first copies its rows there (coalesced
 * reads of whole rows), with an odd row stride so that the thread-per-row
 * margin loop reads without bank conflicts; when ROWS rows do not fit, the
 * kernels read the rows in place instead (same values, same order).
 *
 * Streaming: the staging buffer's copy runs on a second stream; the compute
 * stream waits for that copy (an event), and the next copy into the same
 * device buffer waits for the kernels that read it (another event), so the
 * host fills one buffer and the device copies the next while it works on the
 * current one.
 */
#include "gpu_context.h"
#include "saga_device.h"
#include "saga_kernels.h"

#include <stdlib.h>
#include <string.h>

/*
 * Deliberate bugs for the checker's mutation test (see boost_device.cu):
 *   GBML_PLANT == 11: the prox skips the L1 part (no soft-threshold)
 *   GBML_PLANT == 12: a staging buffer's next copy does not wait for the kernels reading it
 */
#ifndef GBML_PLANT
#define GBML_PLANT 0
#endif

#define ROWS GBML_SAGA_DEVICE_ROWS	/* rows of one block of the step and pass kernels */
#define THREADS 256				/* threads of every block */
#define STAGE_RING 2

typedef struct stage_slot
{
	float	   *host;			/* pinned, stage_rows x d */
	float	   *dev;			/* streamed: its device copy */
	cudaEvent_t copied;			/* its last copy has run (copy stream) */
	cudaEvent_t used;			/* the kernels that read dev have run (compute stream) */
	bool		copy_pending;
	bool		use_pending;
} stage_slot;

typedef struct gpu_saga_state
{
	int64_t		n;
	int			d;
	int			n_chunks;
	int			loss;
	bool		fit_intercept;
	bool		has_weight;
	int			batch;
	int64_t		stage_rows;
	bool		streamed;
	int64_t    *chunk_rows;		/* host, n_chunks */
	int64_t    *row_start;		/* host, n_chunks + 1 */
	float	  **chunk_x;		/* host table of the resident chunks' device memory */

	float	  **d_chunk_table;	/* device copy of chunk_x */
	int64_t    *d_row_start;
	float	   *d_label;
	float	   *d_weight;		/* NULL: all 1 */
	double	   *d_memory;		/* stored gradient scalar per row */
	int64_t    *d_order;		/* this epoch's visiting order */
	double	   *d_w[2];			/* d + 1: weights and intercept */
	double	   *d_a[2];			/* d + 1: average gradient */
	double	   *d_part[2];		/* step partials, max_blocks x (d + 1) */
	double	   *d_scale;
	double	   *d_shift;
	bool		scaled;
	double	   *d_vec;			/* a pass's input vector, d + 1 */
	double	   *d_scratch;		/* a chunk's pass partials, groups x (d + 3) */
	double	   *d_total;		/* d + 3: the pass's running sums, block after block across the chunks */

	cudaStream_t copy;
	stage_slot	ring[STAGE_RING];
	int			ring_next;
	int			handed_out;		/* ring slot stage() returned last, or -1 */

	gbml_saga_device_solver solver;
	bool		solver_set;
	int			par;			/* d_w[par], d_a[par]: the state before the pending update */
	int			ppar;			/* d_part[ppar]: the pending partials */
	int			pend_rows;		/* rows of the pending step (0: none) */
	int			pend_parts;

	int			pass_kind;		/* -1: no pass open */
	double		pass_extra;
	int			pass_next;		/* the chunk pass_chunk expects */
	size_t		step_shared;
	size_t		pass_shared;
	int			tile_ld;		/* row stride of the shared copy; 0: rows are read in place */
} gpu_saga_state;

/* ---- device arithmetic ---- */

/* The elastic-net prox: soft-threshold by thr, then shrink. */
__device__ __forceinline__ static double
prox(double v, double thr, double shrink)
{
#if GBML_PLANT == 11
	double		t = fabs(v);

	(void) thr;
#else
	double		t = fabs(v) - thr;
#endif

	return t > 0 ? copysign(t * shrink, v) : 0.0;
}

/* Feature j of a row, scaled when the training standardizes. */
__device__ __forceinline__ static double
feature(const float *x, int j, const double *scale, const double *shift)
{
	return scale ? (double) x[j] * scale[j] + shift[j] : (double) x[j];
}

/* z . v over the d features: four partial sums (feature j to sum j % 4), added in one order. */
__device__ static double
dot_row(const float *x, const double *v, int d, const double *scale, const double *shift)
{
	double		a0 = 0,
				a1 = 0,
				a2 = 0,
				a3 = 0;
	int			j = 0;

	for (; j + 3 < d; j += 4)
	{
		a0 += feature(x, j, scale, shift) * v[j];
		a1 += feature(x, j + 1, scale, shift) * v[j + 1];
		a2 += feature(x, j + 2, scale, shift) * v[j + 2];
		a3 += feature(x, j + 3, scale, shift) * v[j + 3];
	}
	if (j < d)
		a0 += feature(x, j, scale, shift) * v[j];
	if (j + 1 < d)
		a1 += feature(x, j + 1, scale, shift) * v[j + 1];
	if (j + 2 < d)
		a2 += feature(x, j + 2, scale, shift) * v[j + 2];
	return (a0 + a1) + (a2 + a3);
}

/* |z|^2 in the same order. */
__device__ static double
norm2_row(const float *x, int d, const double *scale, const double *shift)
{
	double		a0 = 0,
				a1 = 0,
				a2 = 0,
				a3 = 0;
	int			j = 0;

	for (; j + 3 < d; j += 4)
	{
		double		z0 = feature(x, j, scale, shift),
					z1 = feature(x, j + 1, scale, shift),
					z2 = feature(x, j + 2, scale, shift),
					z3 = feature(x, j + 3, scale, shift);

		a0 += z0 * z0;
		a1 += z1 * z1;
		a2 += z2 * z2;
		a3 += z3 * z3;
	}
	for (int k = 0; j + k < d; k++)
	{
		double		z = feature(x, j + k, scale, shift),
					sq = z * z;

		if (k == 0)
			a0 += sq;
		else if (k == 1)
			a1 += sq;
		else
			a2 += sq;
	}
	return (a0 + a1) + (a2 + a3);
}

/*
 * Copies rows [0, nr) (row r at src(r)) into the block's shared tile, row
 * stride ld, and leaves row r's address in rows[r] (the tile's, or src(r)
 * itself when ld is 0).  Ends with a barrier.
 */
__device__ static void
stage_rows_in_shared(const float **rows, float *tile, int ld, int nr, int d)
{
	if (ld > 0)
	{
		int			warp = threadIdx.x / 32,
					lane = threadIdx.x % 32,
					warps = blockDim.x / 32;

		__syncthreads();		/* every rows[r] is written */
		/* a warp a row: consecutive lanes read consecutive features */
		for (int r = warp; r < nr; r += warps)
			for (int j = lane; j < d; j += 32)
				tile[r * ld + j] = rows[r][j];
		__syncthreads();		/* the copies are read below, and rows[] is rewritten */
		for (int r = threadIdx.x; r < nr; r += blockDim.x)
			rows[r] = tile + (size_t) r * ld;
	}
	__syncthreads();
}

/* ---- the step kernel ---- */

typedef struct step_args
{
	float	   *const *chunks;	/* resident chunk table, or NULL */
	const float *stage;			/* streamed: rows of positions stage_p0.., or NULL */
	int64_t		stage_p0;
	const int64_t *order;
	const int64_t *row_start;
	const float *label;
	const float *weight;
	double	   *memory;
	const double *scale;
	const double *shift;
	const double *w_in;
	const double *a_in;
	double	   *w_out;
	double	   *a_out;
	const double *part_in;		/* the pending step's partials */
	int			parts_in;
	int			rows_in;		/* its rows (0: nothing pending) */
	double	   *part_out;
	int64_t		p0;				/* this step's positions [p0, p0 + rows) */
	int			rows;
	int			d;
	int			tile_ld;
	int			loss;
	int			fit_intercept;
	gbml_saga_device_solver k;
} step_args;

/* Coordinate j (< d + 1) after the pending update, into *w and *a. */
__device__ __forceinline__ static void
apply_pending(const step_args *a, int j, double *w, double *avg)
{
	int			d1 = a->d + 1;
	double		wj = a->w_in[j],
				aj = a->a_in[j];

	if (a->rows_in > 0)
	{
		double		u = 0;
		double		v;

		for (int k = 0; k < a->parts_in; k++)
			u += a->part_in[(size_t) k * d1 + j];
		v = wj - a->k.step * (u / a->rows_in + aj);
		aj += u * a->k.inv_n;
		if (j < a->d)
			wj = prox(v, a->k.l1_threshold, a->k.l2_shrink);
		else
			wj = a->fit_intercept ? v : 0.0;
	}
	*w = wj;
	*avg = aj;
}

/* Row r's term c_r z_rj of a weighted column sum (z_rd = 1: the intercept). */
__device__ __forceinline__ static double
weighted_term(const float *const *rows, const double *c, int r, int j, int d, const double *scale, const double *shift)
{
	return c[r] * (j < d ? feature(rows[r], j, scale, shift) : 1.0);
}

/* sum_r c_r z_rj over rows [0, nr): four partial sums (row r to sum r % 4), added in one order. */
__device__ static double
weighted_column(const float *const *rows, const double *c, int nr, int j, int d, const double *scale,
				const double *shift)
{
	double		s0 = 0,
				s1 = 0,
				s2 = 0,
				s3 = 0;
	int			r = 0;

	for (; r + 3 < nr; r += 4)
	{
		s0 += weighted_term(rows, c, r, j, d, scale, shift);
		s1 += weighted_term(rows, c, r + 1, j, d, scale, shift);
		s2 += weighted_term(rows, c, r + 2, j, d, scale, shift);
		s3 += weighted_term(rows, c, r + 3, j, d, scale, shift);
	}
	if (r < nr)
		s0 += weighted_term(rows, c, r, j, d, scale, shift);
	if (r + 1 < nr)
		s1 += weighted_term(rows, c, r + 1, j, d, scale, shift);
	if (r + 2 < nr)
		s2 += weighted_term(rows, c, r + 2, j, d, scale, shift);
	return (s0 + s1) + (s2 + s3);
}

__global__ static void __launch_bounds__(THREADS)
saga_step_kernel(step_args a)
{
	GBML_DYNAMIC_SHARED(double, sh);
	const int	d = a.d,
				d1 = a.d + 1;
	double	   *w = sh;			/* d + 1 */
	double	   *delta = w + d1;	/* ROWS */
	int64_t    *gi = (int64_t *) (delta + ROWS);
	const float **rows = (const float **) (gi + ROWS);
	float	   *tile = (float *) (rows + ROWS);
	int64_t		first = a.p0 + (int64_t) blockIdx.x * ROWS;
	int			nr = (int) (a.p0 + a.rows - first < ROWS ? a.p0 + a.rows - first : ROWS);

	/* 1. the pending step's update, identical in every block; block 0 stores it */
	for (int j = threadIdx.x; j < d1; j += blockDim.x)
	{
		double		wj,
					aj;

		apply_pending(&a, j, &wj, &aj);
		w[j] = wj;
		if (blockIdx.x == 0)
		{
			a.w_out[j] = wj;
			a.a_out[j] = aj;
		}
	}

	/* 2. this block's rows */
	for (int r = threadIdx.x; r < nr; r += blockDim.x)
	{
		int64_t		addr = a.order[first + r];
		int64_t		c = addr >> 32,
					row = addr & 0xffffffffLL;

		gi[r] = a.row_start[c] + row;
		rows[r] = a.stage ? a.stage + (size_t) (first + r - a.stage_p0) * d : a.chunks[c] + (size_t) row * d;
	}
	stage_rows_in_shared(rows, tile, a.tile_ld, nr, d);

	/* 3. margins at the updated w, gradient scalars, stored gradients (one thread a row) */
	for (int r = threadIdx.x; r < nr; r += blockDim.x)
	{
		int64_t		i = gi[r];
		double		m = dot_row(rows[r], w, d, a.scale, a.shift) + w[d];
		double		s = a.weight ? (double) a.weight[i] : 1.0;
		double		g = s * gbml_saga_loss_deriv(a.loss, m, a.label[i]);

		delta[r] = g - a.memory[i];
		a.memory[i] = g;
	}
	__syncthreads();

	/* 4. this block's part of u = sum delta_i z_i (one thread a coordinate) */
	for (int j = threadIdx.x; j < d1; j += blockDim.x)
		a.part_out[(size_t) blockIdx.x * d1 + j] =
			j < d || a.fit_intercept ? weighted_column(rows, delta, nr, j, d, a.scale, a.shift) : 0.0;
}

/* ---- passes over every row ---- */

typedef struct pass_args
{
	const float *x;				/* the chunk's rows */
	int64_t		n;				/* its row count */
	const float *label;			/* the chunk's labels and weights */
	const float *weight;
	const double *scale;
	const double *shift;
	const double *vec;			/* SQDEV: the centre; POWER: v; EVAL: the weights */
	double		extra;
	double	   *out;			/* per block: d + 1 vector entries, 2 scalars */
	int			d;
	int			kind;
	int			loss;
	int			fit_intercept;
	int			tile_ld;
} pass_args;

/* Row r's per-row value(s) for the kinds that have them, into coef[r] (and aux[r]). */
__device__ static void
row_values(const pass_args *a, const float *x, int64_t i, double *coef, double *aux)
{
	double		s = a->weight ? (double) a->weight[i] : 1.0;

	if (a->kind == GBML_SAGA_PASS_NORM)
		*coef = s * (norm2_row(x, a->d, a->scale, a->shift) + a->extra);
	else if (a->kind == GBML_SAGA_PASS_POWER)
		*coef = s * (dot_row(x, a->vec, a->d, a->scale, a->shift) + (a->fit_intercept ? a->vec[a->d] : 0.0));
	else
	{
		double		m = dot_row(x, a->vec, a->d, a->scale, a->shift) + a->vec[a->d];

		*coef = s * gbml_saga_loss_value(a->loss, m, a->label[i]);
		if (a->loss == GBML_SAGA_LOSS_LOGISTIC)
			*aux = (m > 0) == (a->label[i] > 0) ? 1.0 : 0.0;
		else
			*aux = (m - (double) a->label[i]) * (m - (double) a->label[i]);
	}
}

/* Row r's term in the raw column sums of SUM and SQDEV. */
__device__ __forceinline__ static double
raw_term(const pass_args *a, const float *const *rows, int r, int j)
{
	double		e = (double) rows[r][j] - (a->kind == GBML_SAGA_PASS_SQDEV ? a->vec[j] : 0.0);

	return a->kind == GBML_SAGA_PASS_SQDEV ? e * e : e;
}

/* Vector entry j (< d + 1) of this block: the kind's column sum over its rows, in a fixed order. */
__device__ static double
column_value(const pass_args *a, const float *const *rows, const double *coef, int nr, int j)
{
	double		s0 = 0,
				s1 = 0,
				s2 = 0,
				s3 = 0;
	int			r = 0;

	if (a->kind == GBML_SAGA_PASS_POWER)
		return j < a->d || a->fit_intercept ? weighted_column(rows, coef, nr, j, a->d, a->scale, a->shift) : 0.0;
	if (j == a->d || a->kind == GBML_SAGA_PASS_NORM || a->kind == GBML_SAGA_PASS_EVAL)
		return 0.0;
	for (; r + 3 < nr; r += 4)
	{
		s0 += raw_term(a, rows, r, j);
		s1 += raw_term(a, rows, r + 1, j);
		s2 += raw_term(a, rows, r + 2, j);
		s3 += raw_term(a, rows, r + 3, j);
	}
	if (r < nr)
		s0 += raw_term(a, rows, r, j);
	if (r + 1 < nr)
		s1 += raw_term(a, rows, r + 1, j);
	if (r + 2 < nr)
		s2 += raw_term(a, rows, r + 2, j);
	return (s0 + s1) + (s2 + s3);
}

/* Scalar k (0 or 1) of this block. */
__device__ static double
scalar_value(const pass_args *a, const double *coef, const double *aux, int nr, int k)
{
	double		t = 0;

	if (a->kind == GBML_SAGA_PASS_NORM && k == 0)
	{
		for (int r = 0; r < nr; r++)
			t = coef[r] > t ? coef[r] : t;
		return t;
	}
	if (a->kind != GBML_SAGA_PASS_NORM && a->kind != GBML_SAGA_PASS_EVAL)
		return 0.0;
	for (int r = 0; r < nr; r++)
		t += k == 0 || a->kind == GBML_SAGA_PASS_NORM ? coef[r] : aux[r];
	return t;
}

__global__ static void __launch_bounds__(THREADS)
saga_pass_kernel(pass_args a)
{
	GBML_DYNAMIC_SHARED(double, sh);
	const int	d1 = a.d + 1;
	double	   *coef = sh;		/* ROWS */
	double	   *aux = coef + ROWS;
	const float **rows = (const float **) (aux + ROWS);
	float	   *tile = (float *) (rows + ROWS);
	int64_t		r0 = (int64_t) blockIdx.x * ROWS;
	int			nr = (int) (a.n - r0 < ROWS ? a.n - r0 : ROWS);
	bool		per_row = a.kind == GBML_SAGA_PASS_NORM || a.kind == GBML_SAGA_PASS_POWER ||
		a.kind == GBML_SAGA_PASS_EVAL;
	double	   *out = a.out + (size_t) blockIdx.x * (d1 + 2);

	for (int r = threadIdx.x; r < nr; r += blockDim.x)
		rows[r] = a.x + (size_t) (r0 + r) * a.d;
	stage_rows_in_shared(rows, tile, per_row ? a.tile_ld : 0, nr, a.d);
	if (per_row)
	{
		for (int r = threadIdx.x; r < nr; r += blockDim.x)
			row_values(&a, rows[r], r0 + r, &coef[r], &aux[r]);
		__syncthreads();
	}
	for (int j = threadIdx.x; j < d1 + 2; j += blockDim.x)
		out[j] = j < d1 ? column_value(&a, rows, coef, nr, j) : scalar_value(&a, coef, aux, nr, j - d1);
}

/*
 * out[j] += the sum over items 0..n-1 of in[item * width + j], in item order
 * (the maximum for column max_col): the pass's running sums go on from the
 * previous chunk's last block, so the sum is over every block in order
 * whatever the chunks.  One block.
 */
__global__ static void
combine_kernel(const double *in, int64_t n, int width, int max_col, double *out)
{
	for (int j = threadIdx.x; j < width; j += blockDim.x)
	{
		double		t = out[j];

		for (int64_t i = 0; i < n; i++)
		{
			double		v = in[(size_t) i * width + j];

			t = j == max_col ? (v > t ? v : t) : t + v;
		}
		out[j] = t;
	}
}

/* ---- host side: state ---- */

static gpu_saga_state *
state_of(gbml_gpu_ctx *ctx)
{
	if (ctx->saga == NULL)
		gpu_fail("GPU SAGA: saga begin was not called");
	return ctx->saga;
}

static int64_t
blocks_of(int64_t rows)
{
	return (rows + ROWS - 1) / ROWS;
}

static int64_t
max_chunk_rows(const gpu_saga_state *s)
{
	int64_t		m = 0;

	for (int c = 0; c < s->n_chunks; c++)
		m = s->chunk_rows[c] > m ? s->chunk_rows[c] : m;
	return m;
}

static int
check_shape(const gbml_saga_device_shape *sh)
{
	int64_t		sum = 0,
				widest = 0;

	if (sh->n_rows < 1 || sh->n_features < 1 || sh->n_chunks < 1 || sh->chunk_rows == NULL ||
		sh->loss < 0 || sh->loss > 1 || sh->batch_size < 1 || sh->batch_size > sh->n_rows)
		return gpu_fail("GPU SAGA: bad shape (%lld rows, %d features, %d chunks, batch %d)",
						(long long) sh->n_rows, sh->n_features, sh->n_chunks, sh->batch_size);
	for (int c = 0; c < sh->n_chunks; c++)
	{
		if (sh->chunk_rows[c] < 0 || sh->chunk_rows[c] > 0x7fffffffLL)
			return gpu_fail("GPU SAGA: chunk %d has %lld rows", c, (long long) sh->chunk_rows[c]);
		sum += sh->chunk_rows[c];
		widest = sh->chunk_rows[c] > widest ? sh->chunk_rows[c] : widest;
	}
	if (sum != sh->n_rows || sh->stage_rows < widest || sh->stage_rows < sh->batch_size)
		return gpu_fail("GPU SAGA: the chunks hold %lld rows of %lld, staging buffers of %lld rows",
						(long long) sum, (long long) sh->n_rows, (long long) sh->stage_rows);
	return 0;
}

/*
 * Shared memory of the two kernels, and whether ROWS rows fit beside it
 * (then s->tile_ld is their odd row stride, else 0: rows read in place).
 */
static int
plan_shared(gbml_gpu_ctx *ctx, gpu_saga_state *s)
{
	cudaDeviceProp prop;
	size_t		limit,
				step_fixed = sizeof(double) * (size_t) (s->d + 1) + ROWS * (sizeof(double) + sizeof(int64_t) + sizeof(float *)),
				pass_fixed = ROWS * (2 * sizeof(double) + sizeof(float *));
	int			ld = s->d | 1;
	size_t		tile = sizeof(float) * (size_t) ROWS * (size_t) ld;

	if (gpu_check(cudaGetDeviceProperties(&prop, ctx->device), "cudaGetDeviceProperties"))
		return 1;
	limit = prop.sharedMemPerBlockOptin > prop.sharedMemPerBlock ? prop.sharedMemPerBlockOptin : prop.sharedMemPerBlock;
	if (step_fixed > limit)
		return gpu_fail("GPU SAGA: %d features need %zu bytes of shared memory, the device has %zu",
						s->d, step_fixed, limit);
	s->tile_ld = step_fixed + tile <= limit ? ld : 0;
	s->step_shared = step_fixed + (s->tile_ld ? tile : 0);
	s->pass_shared = pass_fixed + (s->tile_ld ? tile : 0);
	if (gpu_check(cudaFuncSetAttribute(saga_step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
									   (int) s->step_shared), "cudaFuncSetAttribute(saga_step_kernel)") ||
		gpu_check(cudaFuncSetAttribute(saga_pass_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
									   (int) s->pass_shared), "cudaFuncSetAttribute(saga_pass_kernel)"))
		return 1;
	return 0;
}

/* Device memory for the solver state, the per-row state and the pass partials. */
static int
alloc_state(gbml_gpu_ctx *ctx, gpu_saga_state *s)
{
	size_t		d1 = (size_t) s->d + 1,
				n = (size_t) s->n;
	size_t		parts = (size_t) blocks_of(s->batch) * d1;

	if ((s->d_row_start = (int64_t *) gpu_alloc_device(ctx, sizeof(int64_t) * (size_t) (s->n_chunks + 1), "the chunk offsets")) == NULL ||
		(s->d_chunk_table = (float **) gpu_alloc_device(ctx, sizeof(float *) * (size_t) s->n_chunks, "the chunk table")) == NULL ||
		(s->d_label = (float *) gpu_alloc_device(ctx, sizeof(float) * n, "the labels")) == NULL ||
		(s->has_weight && (s->d_weight = (float *) gpu_alloc_device(ctx, sizeof(float) * n, "the weights")) == NULL) ||
		(s->d_memory = (double *) gpu_alloc_device(ctx, sizeof(double) * n, "the stored gradients")) == NULL ||
		(s->d_order = (int64_t *) gpu_alloc_device(ctx, sizeof(int64_t) * n, "the visiting order")) == NULL)
		return 1;
	for (int i = 0; i < 2; i++)
		if ((s->d_w[i] = (double *) gpu_alloc_device(ctx, sizeof(double) * d1, "the weights")) == NULL ||
			(s->d_a[i] = (double *) gpu_alloc_device(ctx, sizeof(double) * d1, "the average gradient")) == NULL ||
			(s->d_part[i] = (double *) gpu_alloc_device(ctx, sizeof(double) * parts, "the step partials")) == NULL)
			return 1;
	if ((s->d_scale = (double *) gpu_alloc_device(ctx, sizeof(double) * (size_t) s->d, "the scaling")) == NULL ||
		(s->d_shift = (double *) gpu_alloc_device(ctx, sizeof(double) * (size_t) s->d, "the scaling")) == NULL ||
		(s->d_vec = (double *) gpu_alloc_device(ctx, sizeof(double) * d1, "a pass vector")) == NULL ||
		(s->d_scratch = (double *) gpu_alloc_device(ctx, sizeof(double) * (size_t) blocks_of(max_chunk_rows(s)) * (d1 + 2),
													 "the pass partials")) == NULL ||
		(s->d_total = (double *) gpu_alloc_device(ctx, sizeof(double) * (d1 + 2), "the pass result")) == NULL)
		return 1;
	return gpu_check(cudaMemsetAsync(s->d_memory, 0, sizeof(double) * n, ctx->stream), "cudaMemsetAsync(stored gradients)") ||
		gpu_check(cudaMemsetAsync(s->d_w[0], 0, sizeof(double) * d1, ctx->stream), "cudaMemsetAsync(weights)") ||
		gpu_check(cudaMemsetAsync(s->d_a[0], 0, sizeof(double) * d1, ctx->stream), "cudaMemsetAsync(average gradient)");
}

/*
 * The rows' features: resident when every chunk fits in what is left of the
 * budget, else two device staging buffers.  Then the pinned ring and its
 * events (both residences fill the ring on the host).
 */
static int
alloc_rows(gbml_gpu_ctx *ctx, gpu_saga_state *s)
{
	size_t		row_bytes = sizeof(float) * (size_t) s->d;
	size_t		stage_bytes = row_bytes * (size_t) s->stage_rows;
	size_t		resident = row_bytes * (size_t) s->n + (size_t) s->n_chunks;	/* allocations of 0 rows take 1 byte */

	s->streamed = ctx->memory_used + resident > ctx->memory_limit;
	if (!s->streamed)
	{
		for (int c = 0; c < s->n_chunks; c++)
			if ((s->chunk_x[c] = (float *) gpu_alloc_device(ctx, row_bytes * (size_t) s->chunk_rows[c], "the rows")) == NULL)
				return 1;
		if (gpu_upload(ctx, s->d_chunk_table, s->chunk_x, sizeof(float *) * (size_t) s->n_chunks, "cudaMemcpyAsync(chunk table)"))
			return 1;
	}
	for (int i = 0; i < STAGE_RING; i++)
	{
		if (s->streamed && (s->ring[i].dev = (float *) gpu_alloc_device(ctx, stage_bytes, "the staging buffers")) == NULL)
			return 1;
		if ((s->ring[i].host = (float *) gpu_alloc_pinned(ctx, stage_bytes, "staging")) == NULL ||
			(s->ring[i].copied = gpu_event(ctx)) == NULL ||
			(s->ring[i].used = gpu_event(ctx)) == NULL)
			return 1;
	}
	return 0;
}

static int
gpu_saga_begin(gbml_gpu_ctx *ctx, const gbml_saga_device_shape *shape, bool *streamed)
{
	gpu_saga_state *s;
	size_t		nc;

	if (ctx->saga != NULL)
		return gpu_fail("GPU SAGA: saga begin called twice on one context");
	if (check_shape(shape))
		return 1;
	nc = (size_t) shape->n_chunks;
	s = (gpu_saga_state *) calloc(1, sizeof(gpu_saga_state) + nc * sizeof(int64_t) + (nc + 1) * sizeof(int64_t) +
								  nc * sizeof(float *));
	if (s == NULL)
		return gpu_fail("out of host memory for the GPU SAGA state");
	ctx->saga = s;
	s->n = shape->n_rows;
	s->d = shape->n_features;
	s->n_chunks = shape->n_chunks;
	s->loss = shape->loss;
	s->fit_intercept = shape->fit_intercept;
	s->has_weight = shape->has_weight;
	s->batch = shape->batch_size;
	s->stage_rows = shape->stage_rows;
	s->chunk_rows = (int64_t *) (s + 1);
	s->row_start = s->chunk_rows + nc;
	s->chunk_x = (float **) (s->row_start + nc + 1);
	s->handed_out = -1;
	s->pass_kind = -1;
	memcpy(s->chunk_rows, shape->chunk_rows, nc * sizeof(int64_t));
	for (size_t c = 0; c < nc; c++)
		s->row_start[c + 1] = s->row_start[c] + s->chunk_rows[c];

	if (plan_shared(ctx, s) || (s->copy = gpu_stream(ctx)) == NULL || alloc_state(ctx, s) || alloc_rows(ctx, s) ||
		gpu_upload(ctx, s->d_row_start, s->row_start, sizeof(int64_t) * (nc + 1), "cudaMemcpyAsync(chunk offsets)"))
		return 1;
	*streamed = s->streamed;
	/* the offsets and the chunk table came from host memory: done before we return */
	return gpu_sync(ctx, "cudaStreamSynchronize(saga begin)");
}

static void
gpu_saga_end(gbml_gpu_ctx *ctx)
{
	gpu_saga_state *s = ctx->saga;

	if (s == NULL)
		return;
	if (s->copy)
		cudaStreamSynchronize(s->copy);
	cudaStreamSynchronize(ctx->stream);
	(void) cudaGetLastError();
	for (int c = 0; c < s->n_chunks; c++)
		gpu_release(ctx, s->chunk_x[c]);
	for (int i = 0; i < STAGE_RING; i++)
	{
		gpu_release(ctx, s->ring[i].dev);
		gpu_release(ctx, s->ring[i].host);
		gpu_release(ctx, (void *) s->ring[i].copied);
		gpu_release(ctx, (void *) s->ring[i].used);
	}
	for (int i = 0; i < 2; i++)
	{
		gpu_release(ctx, s->d_w[i]);
		gpu_release(ctx, s->d_a[i]);
		gpu_release(ctx, s->d_part[i]);
	}
	gpu_release(ctx, s->d_row_start);
	gpu_release(ctx, s->d_chunk_table);
	gpu_release(ctx, s->d_label);
	gpu_release(ctx, s->d_weight);
	gpu_release(ctx, s->d_memory);
	gpu_release(ctx, s->d_order);
	gpu_release(ctx, s->d_scale);
	gpu_release(ctx, s->d_shift);
	gpu_release(ctx, s->d_vec);
	gpu_release(ctx, s->d_scratch);
	gpu_release(ctx, s->d_total);
	gpu_release(ctx, (void *) s->copy);
	free(s);
	ctx->saga = NULL;
}

extern "C" void
gpu_saga_state_free(gbml_gpu_ctx *ctx)
{
	free(ctx->saga);
	ctx->saga = NULL;
}

static int
check_chunk(const gpu_saga_state *s, int c)
{
	return c < 0 || c >= s->n_chunks ? gpu_fail("GPU SAGA: chunk %d of %d", c, s->n_chunks) : 0;
}

static int
gpu_saga_put_rows(gbml_gpu_ctx *ctx, int chunk, const float *label, const float *weight)
{
	gpu_saga_state *s = state_of(ctx);
	size_t		rows;

	if (s == NULL || check_chunk(s, chunk))
		return 1;
	rows = (size_t) s->chunk_rows[chunk];
	if (rows == 0)
		return 0;
	if (gpu_upload(ctx, s->d_label + s->row_start[chunk], label, sizeof(float) * rows, "cudaMemcpyAsync(labels)"))
		return 1;
	if (s->has_weight && weight == NULL)
		return gpu_fail("GPU SAGA: chunk %d has no weights", chunk);
	return s->has_weight &&
		gpu_upload(ctx, s->d_weight + s->row_start[chunk], weight, sizeof(float) * rows, "cudaMemcpyAsync(weights)");
}

/* ---- host side: the staging ring ---- */

static float *
gpu_saga_stage(gbml_gpu_ctx *ctx)
{
	gpu_saga_state *s = state_of(ctx);
	stage_slot *slot;

	if (s == NULL)
		return NULL;
	slot = &s->ring[s->ring_next];
	/* the pinned buffer is free once the copy that last read it has run */
	if (slot->copy_pending)
	{
		if (gpu_check(cudaEventSynchronize(slot->copied), "cudaEventSynchronize(saga staging)"))
			return NULL;
		slot->copy_pending = false;
	}
	s->handed_out = s->ring_next;
	return slot->host;
}

/*
 * Queues the copy of the handed-out staging buffer x (rows rows) on the copy
 * stream into dst, or (dst NULL) into the slot's device buffer after the
 * kernels that last read it; the compute stream waits for the copy.
 * Returns the slot, or -1 after recording an error.
 */
static int
queue_stage_copy(gbml_gpu_ctx *ctx, gpu_saga_state *s, const float *x, float *dst, int64_t rows)
{
	int			k = s->handed_out;
	stage_slot *slot;
	size_t		bytes = sizeof(float) * (size_t) rows * (size_t) s->d;

	if (k < 0 || x != s->ring[k].host)
	{
		gpu_fail("GPU SAGA: rows must come in the buffer stage() handed out last");
		return -1;
	}
	slot = &s->ring[k];
	s->handed_out = -1;
	s->ring_next = (k + 1) % STAGE_RING;
	if (dst == NULL)
		dst = slot->dev;
	if (dst == slot->dev && slot->use_pending && !(GBML_PLANT == 12) &&
		gpu_check(cudaStreamWaitEvent(s->copy, slot->used, 0), "cudaStreamWaitEvent(saga staging reuse)"))
		return -1;
	ctx->h2d_bytes += (double) bytes;
	if ((bytes > 0 && gpu_check(cudaMemcpyAsync(dst, slot->host, bytes, cudaMemcpyHostToDevice, s->copy),
								"cudaMemcpyAsync(saga rows)")) ||
		gpu_check(cudaEventRecord(slot->copied, s->copy), "cudaEventRecord(saga rows copied)") ||
		gpu_check(cudaStreamWaitEvent(ctx->stream, slot->copied, 0), "cudaStreamWaitEvent(saga rows copied)"))
		return -1;
	slot->copy_pending = true;
	return k;
}

/* The kernels just queued on the compute stream read slot k's device buffer. */
static int
mark_used(gbml_gpu_ctx *ctx, gpu_saga_state *s, int k)
{
	if (gpu_check(cudaEventRecord(s->ring[k].used, ctx->stream), "cudaEventRecord(saga staging used)"))
		return 1;
	s->ring[k].use_pending = true;
	return 0;
}

static int
gpu_saga_put_chunk(gbml_gpu_ctx *ctx, int chunk, const float *x)
{
	gpu_saga_state *s = state_of(ctx);
	size_t		bytes;

	if (s == NULL || check_chunk(s, chunk))
		return 1;
	if (s->streamed)
		return gpu_fail("GPU SAGA: put_chunk on a streamed training");
	if (s->handed_out >= 0 && x == s->ring[s->handed_out].host)
		return queue_stage_copy(ctx, s, x, s->chunk_x[chunk], s->chunk_rows[chunk]) < 0;
	/* pageable memory the caller may free: copy before returning */
	bytes = sizeof(float) * (size_t) s->chunk_rows[chunk] * (size_t) s->d;
	if (bytes > 0 && gpu_upload(ctx, s->chunk_x[chunk], x, bytes, "cudaMemcpyAsync(saga rows)"))
		return 1;
	return gpu_sync(ctx, "cudaStreamSynchronize(saga rows)");
}

static int
gpu_saga_set_scaling(gbml_gpu_ctx *ctx, const double *scale, const double *shift)
{
	gpu_saga_state *s = state_of(ctx);

	if (s == NULL)
		return 1;
	s->scaled = scale != NULL && shift != NULL;
	if (!s->scaled)
		return 0;
	if (gpu_upload(ctx, s->d_scale, scale, sizeof(double) * (size_t) s->d, "cudaMemcpyAsync(scaling)") ||
		gpu_upload(ctx, s->d_shift, shift, sizeof(double) * (size_t) s->d, "cudaMemcpyAsync(scaling)"))
		return 1;
	return gpu_sync(ctx, "cudaStreamSynchronize(scaling)");
}

static int
gpu_saga_set_solver(gbml_gpu_ctx *ctx, const gbml_saga_device_solver *solver)
{
	gpu_saga_state *s = state_of(ctx);

	if (s == NULL)
		return 1;
	s->solver = *solver;
	s->solver_set = true;
	return 0;
}

/* ---- host side: passes ---- */

static int
gpu_saga_pass_begin(gbml_gpu_ctx *ctx, gbml_saga_pass_kind kind, const double *vec, double extra)
{
	gpu_saga_state *s = state_of(ctx);

	if (s == NULL)
		return 1;
	if (kind < GBML_SAGA_PASS_SUM || kind > GBML_SAGA_PASS_EVAL)
		return gpu_fail("GPU SAGA: unknown pass %d", (int) kind);
	if (kind == GBML_SAGA_PASS_EVAL && s->pend_rows > 0)
		return gpu_fail("GPU SAGA: the objective pass needs epoch_end first");
	s->pass_kind = (int) kind;
	s->pass_extra = extra;
	s->pass_next = 0;
	if (gpu_check(cudaMemsetAsync(s->d_total, 0, sizeof(double) * (size_t) (s->d + 3), ctx->stream),
				  "cudaMemsetAsync(pass sums)"))
		return 1;
	if (kind == GBML_SAGA_PASS_SQDEV || kind == GBML_SAGA_PASS_POWER)
	{
		if (vec == NULL)
			return gpu_fail("GPU SAGA: pass %d needs a vector", (int) kind);
		if (gpu_upload(ctx, s->d_vec, vec, sizeof(double) * ((size_t) s->d + 1), "cudaMemcpyAsync(pass vector)"))
			return 1;
		/* the caller may change vec when we return */
		return gpu_sync(ctx, "cudaStreamSynchronize(pass vector)");
	}
	return 0;
}

static pass_args
pass_arguments(const gpu_saga_state *s, int c, const float *x)
{
	pass_args	a;
	bool		scaled = s->scaled && s->pass_kind != GBML_SAGA_PASS_SUM && s->pass_kind != GBML_SAGA_PASS_SQDEV;

	memset(&a, 0, sizeof(a));
	a.x = x;
	a.n = s->chunk_rows[c];
	a.label = s->d_label + s->row_start[c];
	a.weight = s->d_weight ? s->d_weight + s->row_start[c] : NULL;
	a.scale = scaled ? s->d_scale : NULL;
	a.shift = scaled ? s->d_shift : NULL;
	a.vec = s->pass_kind == GBML_SAGA_PASS_EVAL ? s->d_w[s->par] : s->d_vec;
	a.extra = s->pass_extra;
	a.out = s->d_scratch;
	a.d = s->d;
	a.kind = s->pass_kind;
	a.loss = s->loss;
	a.fit_intercept = s->fit_intercept;
	a.tile_ld = s->tile_ld;
	return a;
}

/* Adds n items of d + 3 values from in to out, in order (NORM's scalar 0 is a maximum). */
static int
launch_combine(gbml_gpu_ctx *ctx, const gpu_saga_state *s, const double *in, int64_t n, double *out)
{
	int			width = s->d + 3;

	GBML_LAUNCH(combine_kernel, dim3(1), dim3(THREADS), 0, ctx->stream, in, n, width,
				s->pass_kind == GBML_SAGA_PASS_NORM ? s->d + 1 : -1, out);
	return gpu_check(cudaGetLastError(), "saga combine_kernel launch");
}

static int
gpu_saga_pass_chunk(gbml_gpu_ctx *ctx, int chunk, const float *x)
{
	gpu_saga_state *s = state_of(ctx);
	const float *rows;
	int			slot = -1;
	int64_t		blocks;

	if (s == NULL || check_chunk(s, chunk))
		return 1;
	if (s->pass_kind < 0 || chunk != s->pass_next)
		return gpu_fail("GPU SAGA: pass_chunk(%d) out of turn", chunk);
	if (s->streamed != (x != NULL))
		return gpu_fail("GPU SAGA: a %s training's pass got %s rows", s->streamed ? "streamed" : "resident",
						x ? "staged" : "no");
	if (x && (slot = queue_stage_copy(ctx, s, x, NULL, s->chunk_rows[chunk])) < 0)
		return 1;
	s->pass_next++;
	blocks = blocks_of(s->chunk_rows[chunk]);
	if (blocks == 0)
		return slot >= 0 ? mark_used(ctx, s, slot) : 0;
	rows = slot >= 0 ? s->ring[slot].dev : s->chunk_x[chunk];
	GBML_LAUNCH(saga_pass_kernel, dim3((unsigned) blocks), dim3(THREADS), s->pass_shared, ctx->stream,
				pass_arguments(s, chunk, rows));
	if (gpu_check(cudaGetLastError(), "saga_pass_kernel launch") ||
		launch_combine(ctx, s, s->d_scratch, blocks, s->d_total))
		return 1;
	return slot >= 0 ? mark_used(ctx, s, slot) : 0;
}

static int
gpu_saga_pass_end(gbml_gpu_ctx *ctx, double *out, double *scalars)
{
	gpu_saga_state *s = state_of(ctx);
	double	   *host;
	int			rc;

	if (s == NULL)
		return 1;
	if (s->pass_kind < 0 || s->pass_next != s->n_chunks)
		return gpu_fail("GPU SAGA: pass_end after %d of %d chunks", s->pass_next, s->n_chunks);
	host = (double *) malloc(sizeof(double) * (size_t) (s->d + 3));
	if (host == NULL)
		return gpu_fail("out of host memory for a pass result");
	rc = gpu_check(cudaMemcpyAsync(host, s->d_total, sizeof(double) * (size_t) (s->d + 3), cudaMemcpyDeviceToHost,
								  ctx->stream), "cudaMemcpyAsync(pass result)") ||
		gpu_sync(ctx, "saga pass");
	if (rc == 0)
	{
		memcpy(out, host, sizeof(double) * (size_t) (s->d + 1));
		scalars[0] = host[s->d + 1];
		scalars[1] = host[s->d + 2];
	}
	free(host);
	s->pass_kind = -1;
	return rc;
}

/* ---- host side: epochs ---- */

static int
gpu_saga_epoch_begin(gbml_gpu_ctx *ctx, const int64_t *order)
{
	gpu_saga_state *s = state_of(ctx);

	if (s == NULL)
		return 1;
	for (int64_t i = 0; i < s->n; i++)
	{
		int64_t		c = order[i] >> 32,
					r = order[i] & 0xffffffffLL;

		if (order[i] < 0 || c >= s->n_chunks || r >= s->chunk_rows[c])
			return gpu_fail("GPU SAGA: position %lld of the order names row %lld of chunk %lld, which is not stored",
							(long long) i, (long long) r, (long long) c);
	}
	/* queued after the last epoch's kernels (one stream); the host rewrites order next epoch */
	if (gpu_upload(ctx, s->d_order, order, sizeof(int64_t) * (size_t) s->n, "cudaMemcpyAsync(visiting order)"))
		return 1;
	return gpu_sync(ctx, "cudaStreamSynchronize(visiting order)");
}

/* One step kernel over positions [p0, p0 + rows) (rows 0: only the pending update). */
static int
launch_step(gbml_gpu_ctx *ctx, gpu_saga_state *s, int64_t p0, int rows, const float *stage, int64_t stage_p0)
{
	step_args	a;
	int			blocks = rows > 0 ? (int) blocks_of(rows) : 1;

	memset(&a, 0, sizeof(a));
	a.chunks = stage ? NULL : s->d_chunk_table;
	a.stage = stage;
	a.stage_p0 = stage_p0;
	a.order = s->d_order;
	a.row_start = s->d_row_start;
	a.label = s->d_label;
	a.weight = s->d_weight;
	a.memory = s->d_memory;
	a.scale = s->scaled ? s->d_scale : NULL;
	a.shift = s->scaled ? s->d_shift : NULL;
	a.w_in = s->d_w[s->par];
	a.a_in = s->d_a[s->par];
	a.w_out = s->d_w[s->par ^ 1];
	a.a_out = s->d_a[s->par ^ 1];
	a.part_in = s->d_part[s->ppar];
	a.parts_in = s->pend_parts;
	a.rows_in = s->pend_rows;
	a.part_out = s->d_part[s->ppar ^ 1];
	a.p0 = p0;
	a.rows = rows;
	a.d = s->d;
	a.tile_ld = s->tile_ld;
	a.loss = s->loss;
	a.fit_intercept = s->fit_intercept;
	a.k = s->solver;
	GBML_LAUNCH(saga_step_kernel, dim3((unsigned) blocks), dim3(THREADS), s->step_shared, ctx->stream, a);
	if (gpu_check(cudaGetLastError(), "saga_step_kernel launch"))
		return 1;
	s->par ^= 1;
	s->ppar ^= 1;
	s->pend_rows = rows;
	s->pend_parts = rows > 0 ? blocks : 0;
	return 0;
}

static int
gpu_saga_steps(gbml_gpu_ctx *ctx, int64_t p0, int64_t p1, const float *x)
{
	gpu_saga_state *s = state_of(ctx);
	int			slot = -1;
	const float *stage = NULL;

	if (s == NULL)
		return 1;
	if (!s->solver_set)
		return gpu_fail("GPU SAGA: steps before set_solver");
	if (p0 < 0 || p1 <= p0 || p1 > s->n || p0 % s->batch != 0 || (p1 != s->n && (p1 - p0) % s->batch != 0) ||
		(x && p1 - p0 > s->stage_rows))
		return gpu_fail("GPU SAGA: steps over positions [%lld, %lld) with batches of %d", (long long) p0,
						(long long) p1, s->batch);
	if (s->streamed != (x != NULL))
		return gpu_fail("GPU SAGA: a %s training's steps got %s rows", s->streamed ? "streamed" : "resident",
						x ? "staged" : "no");
	if (x)
	{
		if ((slot = queue_stage_copy(ctx, s, x, NULL, p1 - p0)) < 0)
			return 1;
		stage = s->ring[slot].dev;
	}
	for (int64_t p = p0; p < p1; p += s->batch)
		if (launch_step(ctx, s, p, (int) (p1 - p < s->batch ? p1 - p : s->batch), stage, p0))
			return 1;
	return slot >= 0 ? mark_used(ctx, s, slot) : 0;
}

static int
gpu_saga_epoch_end(gbml_gpu_ctx *ctx, double *w_out)
{
	gpu_saga_state *s = state_of(ctx);

	if (s == NULL)
		return 1;
	if (s->pend_rows > 0 && launch_step(ctx, s, 0, 0, NULL, 0))
		return 1;
	if (gpu_check(cudaMemcpyAsync(w_out, s->d_w[s->par], sizeof(double) * ((size_t) s->d + 1), cudaMemcpyDeviceToHost,
								  ctx->stream), "cudaMemcpyAsync(weights to host)"))
		return 1;
	return gpu_sync(ctx, "saga epoch");
}

const struct gbml_backend_saga gpu_saga_backend = {
	gpu_saga_begin,
	gpu_saga_end,
	gpu_saga_put_rows,
	gpu_saga_stage,
	gpu_saga_put_chunk,
	gpu_saga_set_scaling,
	gpu_saga_set_solver,
	gpu_saga_pass_begin,
	gpu_saga_pass_chunk,
	gpu_saga_pass_end,
	gpu_saga_epoch_begin,
	gpu_saga_steps,
	gpu_saga_epoch_end,
};
