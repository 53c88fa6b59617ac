/*
 * kmeans_kernels.c — the K-Means hot loops (see kmeans_kernels.h): the
 * register-tiled assignment kernel with its exact re-check, the update
 * accumulation, and the k-means++ candidate distances.
 *
 * Assignment (S1) is a small matrix product X.C^T followed by an argmin.  The
 * floor is arithmetic: 2*n*k*d flops.  The centroids are laid out as panels of
 * 32 centroids (d x 32 floats, centroid index fastest), so that one panel
 * stays in L1 while a block of rows streams past it; each row group of R rows
 * keeps R x 32 dot products in registers, and every step of the inner loop
 * loads one panel row and broadcasts R scalars of x: R*32 multiply-adds per
 * 32/LANES + R loads.  The tile shape depends on the register file (32 zmm
 * with AVX-512, 16 ymm with AVX2), which is why the tile is instantiated
 * three times from one template (this file includes itself with
 * KM_TEMPLATE defined) and picked at run time from the CPU, per function —
 * the same idea as target_clones, without -march=native.
 *
 * Exactness.  The dot products run in float32, but every label is checked
 * against a rigorous bound of the float32 error, and a row whose best two
 * candidates are closer than that bound is re-assigned in double.  So labels
 * are those of the double computation (|c|^2 - 2x.c with float64 centroids),
 * whatever the ISA, the thread count or the tile — the whole Lloyd trajectory
 * is reproducible, and it matches scikit-learn's float64 Lloyd.
 *
 * The bound (u = 2^-24, gamma_d = d*u/(1-d*u)): the float value D~ of
 * D = |c|^2 - 2x.c, computed from float copies of the double centroid c,
 * satisfies |D~ - D| <= (gamma_d + 3u)(|c|^2 + 2|x||c|) (dot-product
 * summation, rounding c and |c|^2 to float, the final subtraction); we use
 * twice that factor as alpha.  A centroid j that can beat the float winner b
 * satisfies |x - c_j| <= |x - c_b|, hence |c_j| <= rho = |x| + |x - c_b|, so
 * its error is at most E = alpha(rho^2 + 2|x|rho).  If the second-smallest
 * D~ exceeds the smallest by more than 2E, b is the exact argmin.  With this
 * rho (instead of the largest centroid norm) the bound stays local: far-away
 * outlier centroids do not widen it.
 */
#ifndef KM_TEMPLATE

#include "kmeans_kernels.h"
#include "kmeans_exact.h"

#include <float.h>
#include <math.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KM_X86 1
#endif

/* Largest number of rows one tile call handles (state arrays live on the stack). */
#define KM_RB 256

/*
 * The small-k tile tries the local (row-dependent) error bound when
 * 2 cmax^2 exceeds this many times the block's mean |x|^2: below it the
 * quick gap is about as tight and the extra arithmetic would not pay.
 */
#define KM_LOCAL_RATIO 8.0

#define KM_ABS_SLACK GBML_KM_ABS_SLACK

/*
 * Largest k for the small-k tile (at most 4 vectors of centroids per row):
 * above it the 32-centroid panels of the general tile amortise their
 * per-lane bookkeeping better.  Set from measurements on AMD EPYC (Zen 4).
 */
#define KM_SMALL_KMAX_AVX512 64
#define KM_SMALL_KMAX_AVX2 32

/* Eight rows' acceptance thresholds at once in the small-k tile. */
typedef double km_q8d __attribute__((vector_size(64)));
typedef int64_t km_q8l __attribute__((vector_size(64)));
typedef float km_q8f __attribute__((vector_size(32)));

#define KM_SELD(m, a, b) ((km_q8d) (((km_q8l) (a) & (m)) | ((km_q8l) (b) & ~(m))))

/* ---- the tile template, instantiated three times ---- */

#define KM_TEMPLATE
/*
 * The tiles' float estimates may fuse multiply-adds (the engine builds with
 * -ffp-contract=off for the arithmetic both devices must share): the error
 * bound holds for any summation order with or without FMA, and the labels
 * are exact either way.  Without it the inner loop is twice the
 * instructions (30 % slower at k = 100).
 */
#define KM_FAST_FLOAT optimize("fp-contract=fast")

/* AVX-512: 16 lanes, 6 rows x 2 vectors = 12 accumulators of 32 registers. */
#define KM_SUFFIX avx512
#define KM_TARGET __attribute__((target("avx512f,avx2,fma"), KM_FAST_FLOAT))
#define KM_LANES 16
#define KM_R 6
#define KM_NV 2
#ifdef KM_X86
#define KM_SMALL 1
#define KM_RMIN(v) _mm512_reduce_min_ps((__m512) (v))
#define KM_LEMASK(a, b) ((uint64_t) _mm512_cmp_ps_mask((__m512) (a), (__m512) (b), _CMP_LE_OQ))
#define KM_EQMASK(a, b) ((uint64_t) _mm512_cmp_ps_mask((__m512) (a), (__m512) (b), _CMP_EQ_OQ))
#endif
#include "kmeans_kernels.c"
#undef KM_SUFFIX
#undef KM_TARGET
#undef KM_LANES
#undef KM_R
#undef KM_NV

/* AVX2 + FMA: 8 lanes, 4 rows x 2 vectors = 8 accumulators of 16 registers. */
#define KM_SUFFIX avx2
#define KM_TARGET __attribute__((target("avx2,fma"), KM_FAST_FLOAT))
#define KM_LANES 8
#define KM_R 4
#define KM_NV 2
#ifdef KM_X86
#define KM_SMALL 1
#define KM_RMIN(v) km_rmin_avx2((__m256) (v))
#define KM_LEMASK(a, b) ((uint64_t) _mm256_movemask_ps(_mm256_cmp_ps((__m256) (a), (__m256) (b), _CMP_LE_OQ)))
#define KM_EQMASK(a, b) ((uint64_t) _mm256_movemask_ps(_mm256_cmp_ps((__m256) (a), (__m256) (b), _CMP_EQ_OQ)))
__attribute__((target("avx2,fma"))) static inline float
km_rmin_avx2(__m256 v)
{
	__m128		m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	m = _mm_min_ps(m, _mm_movehl_ps(m, m));
	m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
	return _mm_cvtss_f32(m);
}
#endif
#include "kmeans_kernels.c"
#undef KM_SUFFIX
#undef KM_TARGET
#undef KM_LANES
#undef KM_R
#undef KM_NV

/* Baseline x86-64 (SSE2) or any other CPU: 4 lanes. */
#define KM_SUFFIX generic
#define KM_TARGET
#define KM_LANES 4
#define KM_R 4
#define KM_NV 2
#include "kmeans_kernels.c"
#undef KM_SUFFIX
#undef KM_TARGET
#undef KM_LANES
#undef KM_R
#undef KM_NV
#undef KM_TEMPLATE

typedef void (*km_tile_fn) (const gbml_km_centers *C, const float *x, int n,
							float *best, float *second, int32_t *arg);

typedef int (*km_small_fn) (const gbml_km_centers *C, const float *x, int n, const double *xnorm2,
							double qa, double qb, int32_t *labels, int32_t *pend, float *best,
							float *second, int32_t *arg, bool use_local);

static km_tile_fn km_tile = NULL;
static km_small_fn km_small = NULL;	/* NULL: no small-k tile on this CPU */
static int	km_small_kmax = 0;	/* largest k the small-k tile takes */
static const char *km_tile_name = "generic";
static const char *km_forced = NULL;

static void
km_resolve(void)
{
	bool		avx512 = false,
				avx2 = false;

#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
	avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
	if (km_forced && strcmp(km_forced, "generic") == 0)
		avx512 = avx2 = false;
	else if (km_forced && strcmp(km_forced, "avx2") == 0)
		avx512 = false;
	km_small = NULL;
	km_small_kmax = 0;
	if (avx512)
	{
		km_tile = km_tile_avx512;
		km_tile_name = "avx512";
#ifdef KM_X86
		km_small = km_small_avx512;
		km_small_kmax = KM_SMALL_KMAX_AVX512;
#endif
	}
	else if (avx2)
	{
		km_tile = km_tile_avx2;
		km_tile_name = "avx2";
#ifdef KM_X86
		km_small = km_small_avx2;
		km_small_kmax = KM_SMALL_KMAX_AVX2;
#endif
	}
	else
	{
		km_tile = km_tile_generic;
		km_tile_name = "generic";
	}
	if (km_forced && strcmp(km_forced, "panels") == 0)
		km_small = NULL;
}

const char *
gbml_km_kernel_isa(void)
{
	if (km_tile == NULL)
		km_resolve();
	return km_tile_name;
}

void
gbml_km_force_isa(const char *name)
{
	km_forced = name;
	km_resolve();
}

void
gbml_km_centers_prepare(gbml_km_centers *C, const double *c, int k, int d,
						float *panels, double *panels_d, float *cnorm, double *cnorm_d,
						double xnorm_max)
{
	int			kp = gbml_km_padded(k);
	double		cmax2 = 0;
	const double u = 0x1.0p-24;
	double		gamma;

	if (km_tile == NULL)
		km_resolve();
	C->k = k;
	C->d = d;
	C->kp = kp;
	C->panels = panels;
	C->panels_d = panels_d;
	C->cnorm = cnorm;
	C->c = c;
	C->cnorm_d = cnorm_d;
	for (int j = 0; j < kp; j++)
	{
		int			p = j / GBML_KM_KPAD,
					l = j % GBML_KM_KPAD;
		float	   *panel = panels + (size_t) p * d * GBML_KM_KPAD;
		double	   *panel_d = panels_d + (size_t) (j / 8) * d * 8;

		if (j < k)
		{
			const double *cj = c + (size_t) j * d;
			double		s = 0;

			for (int i = 0; i < d; i++)
			{
				panel[(size_t) i * GBML_KM_KPAD + l] = (float) cj[i];
				panel_d[(size_t) i * 8 + j % 8] = cj[i];
				s += cj[i] * cj[i];
			}
			cnorm_d[j] = s;
			cnorm[j] = (float) s;
			if (s > cmax2)
				cmax2 = s;
		}
		else
		{
			for (int i = 0; i < d; i++)
			{
				panel[(size_t) i * GBML_KM_KPAD + l] = 0.0f;
				panel_d[(size_t) i * 8 + j % 8] = 0.0;
			}
			cnorm[j] = INFINITY;
		}
	}
	C->cmax = sqrt(cmax2);
	gamma = (double) d * u / (1.0 - (double) d * u);
	C->alpha = 2.0 * (gamma + 3.0 * u);
	/* Anything near float overflow: no float estimate can be trusted, go exact. */
	if (!(cmax2 + 2.0 * xnorm_max * C->cmax < 1e36) || !(xnorm_max * xnorm_max < 1e36))
		C->alpha = INFINITY;
}

/* Scalar reference: no contraction into FMA, so it matches the vector path bit for bit. */
__attribute__((optimize("fp-contract=off")))
int32_t
gbml_km_assign_exact_ref(const gbml_km_centers *C, const float *x)
{
	int			d = C->d;
	double		best = INFINITY;
	int32_t		arg = 0;

	for (int j = 0; j < C->k; j++)
	{
		const double *cj = C->c + (size_t) j * d;
		double		s = 0;
		double		D;

		for (int i = 0; i < d; i++)
			s += (double) x[i] * cj[i];
		D = C->cnorm_d[j] - 2.0 * s;
		if (D < best)
		{
			best = D;
			arg = j;
		}
	}
	return arg;
}

typedef double km_v8dd __attribute__((vector_size(64)));
typedef double km_v8ddu __attribute__((vector_size(64), aligned(8)));

/* Eight centroids per vector, each summed in feature order: the same arithmetic as the reference. */
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
int32_t
gbml_km_assign_exact(const gbml_km_centers *C, const float *x)
{
	int			d = C->d;
	double		best = INFINITY;
	int32_t		arg = 0;

	for (int p = 0; p * 8 < C->k; p++)
	{
		const double *P = C->panels_d + (size_t) p * d * 8;
		km_v8dd		acc = {0};

		for (int i = 0; i < d; i++)
		{
			km_v8dd		prod = (double) x[i] * *(const km_v8ddu *) (P + (size_t) i * 8);

			acc = acc + prod;
		}
		for (int l = 0; l < 8 && p * 8 + l < C->k; l++)
		{
			double		D = C->cnorm_d[p * 8 + l] - 2.0 * acc[l];

			if (D < best)
			{
				best = D;
				arg = p * 8 + l;
			}
		}
	}
	return arg;
}

/*
 * The full float test of one row whose float winner is arg with value b and
 * runner-up `second`: the label when the gap is provably larger than the
 * float error (kmeans_exact.h, the same test the GPU makes), else the exact
 * double assignment (*rechecked counts those).
 */
static inline int32_t
km_decide(const gbml_km_centers *C, const float *xi, double xn2, double b, double second,
		  int32_t arg, int64_t *rechecked)
{
	if (gbml_km_float_decides(C->alpha, C->cmax, C->d, xn2, b, second))
		return arg;
	(*rechecked)++;
	return gbml_km_assign_exact(C, xi);
}

int64_t
gbml_km_assign(const gbml_km_centers *C, const float *x, int64_t n,
			   const double *xnorm2, int32_t *labels)
{
	float		best[KM_RB],
				second[KM_RB];
	int32_t		arg[KM_RB];
	int			d = C->d;
	int			rb;
	int64_t		rechecked = 0;
	km_tile_fn	tile = km_tile;
	km_small_fn small = km_small;

	if (tile == NULL)
		tile = km_tile_generic;
	if (isinf(C->alpha))
	{
		for (int64_t i = 0; i < n; i++)
			labels[i] = gbml_km_assign_exact(C, x + (size_t) i * d);
		return n;
	}
	if (small != NULL && C->k <= km_small_kmax)
	{
		/* quick-accept gap q = qa + qb |x|^2, the first test of km_decide */
		double		slack0 = KM_ABS_SLACK * (d + 4) * 2.0;
		double		qa = 2.0 * (C->alpha * 2.0 * C->cmax * C->cmax + slack0);
		double		qb = 2.0 * (C->alpha + slack0);
		int32_t		pend[KM_RB];

		for (int64_t i0 = 0; i0 < n; i0 += KM_RB)
		{
			int			m = (int) (n - i0 < KM_RB ? n - i0 : KM_RB);
			double		xsum = 0;
			int			ns = 0,
						np;

			/*
			 * The local bound costs a few double operations per row; it
			 * pays when the largest centroid is far out compared with the
			 * rows (then the quick gap is loose).  Every 16th row's norm is
			 * enough to tell (a sum over all rows would be a serial
			 * dependency chain as long as a small-d assignment).  Speed
			 * only: the labels are exact either way.
			 */
			for (int i = 0; i < m; i += 16, ns++)
				xsum += xnorm2[i0 + i];
			np = small(C, x + (size_t) i0 * d, m, xnorm2 + i0, qa, qb, labels + i0, pend, best,
					   second, arg, 2.0 * C->cmax * C->cmax * ns > KM_LOCAL_RATIO * xsum);

			for (int p = 0; p < np; p++)
			{
				int64_t		i = i0 + pend[p];

				labels[i] = km_decide(C, x + (size_t) i * d, xnorm2[i], best[p], second[p],
									  arg[p], &rechecked);
			}
		}
		return rechecked;
	}
	/* Rows per tile call: keep the row block (rb*d floats) within ~96 KB of L2. */
	rb = 24576 / (d > 0 ? d : 1);
	if (rb > KM_RB)
		rb = KM_RB;
	if (rb < 12)
		rb = 12;
	for (int64_t i0 = 0; i0 < n; i0 += rb)
	{
		int			m = (int) (n - i0 < rb ? n - i0 : rb);
		const float *xb = x + (size_t) i0 * d;

		tile(C, xb, m, best, second, arg);
		for (int i = 0; i < m; i++)
			labels[i0 + i] = km_decide(C, xb + (size_t) i * d, xnorm2[i0 + i], best[i], second[i],
									   arg[i], &rechecked);
	}
	return rechecked;
}

/*
 * S2 in fixed point (kmeans_exact.h): each value (times the row's scale in
 * the spherical mode) becomes an int64 term on its feature's grid, 8
 * features at a time (explicit vectors: -O2 does not vectorise the plain
 * loop).  The rounding is the magic-number add, whose result's bits are the
 * term: no double-to-int64 vector conversion needed.  Bandwidth-bound when
 * the rows come from memory, which is why the trainer calls it right after
 * the assignment of the same rows, while they are still in cache.
 */
typedef float km_v8f __attribute__((vector_size(32)));
typedef float km_v8fu __attribute__((vector_size(32), aligned(4)));
typedef double km_v8d __attribute__((vector_size(64)));
typedef double km_v8du __attribute__((vector_size(64), aligned(8)));
typedef int64_t km_v8l __attribute__((vector_size(64)));
typedef int64_t km_v8lu __attribute__((vector_size(64), aligned(8)));

__attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
void
gbml_km_accumulate(const float *restrict x, int64_t n, int d, const int32_t *restrict labels,
				   const double *restrict scale, const double *restrict fix_scale,
				   int64_t *restrict sums, int64_t *restrict counts)
{
	const int64_t magic_bits = GBML_KM_DBITS(GBML_KM_FIX_MAGIC);

	for (int64_t i = 0; i < n; i++)
	{
		const float *xi = x + (size_t) i * d;
		int64_t    *s = sums + (size_t) labels[i] * d;
		double		sc = scale ? scale[i] : 1.0;
		int			j = 0;

		counts[labels[i]]++;
		for (; j + 8 <= d; j += 8)
		{
			km_v8d		v = __builtin_convertvector(*(const km_v8fu *) (xi + j), km_v8d);
			km_v8d		t = v * sc;

			t = t * *(const km_v8du *) (fix_scale + j);
			t = t + GBML_KM_FIX_MAGIC;
			*(km_v8lu *) (s + j) += (km_v8l) t - magic_bits;
		}
		for (; j < d; j++)
			s[j] += gbml_km_fix_term((double) xi[j] * sc, fix_scale[j]);
	}
}

void
gbml_km_row_norms(const float *x, int64_t n, int d, double *xnorm2)
{
	for (int64_t i = 0; i < n; i++)
	{
		const float *xi = x + (size_t) i * d;
		double		s = 0;

		for (int j = 0; j < d; j++)
			s += (double) xi[j] * xi[j];
		xnorm2[i] = s;
	}
}

double
gbml_km_sqdist(const float *x, double scale, const double *c, int d)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
	{
		double		t = (double) x[j] * scale - c[j];

		s += t * t;
	}
	return s;
}

typedef double km_v4d __attribute__((vector_size(32)));

/*
 * NG (a constant where it is inlined) groups of 4 centroids: NG independent
 * chains of adds, each lane (x_i - c_i)^2 (sqdist) or x_i * c_i (a dot
 * product) in feature order.
 */
static inline __attribute__((always_inline)) void
km_row_groups(const float *x, const double *block, int d, const int NG, const bool dot, double *out)
{
	km_v4d		s[GBML_KM_ROW_GROUPS] = {{0}};

	for (int i = 0; i < d; i++)
	{
		double		xi = x[i];

		for (int g = 0; g < NG; g++)
		{
			km_v4d		c,
						t;

			memcpy(&c, block + ((size_t) g * d + i) * GBML_KM_ROW_LANES, sizeof(c));
			if (dot)
				s[g] += xi * c;
			else
			{
				t = xi - c;
				s[g] += t * t;
			}
		}
	}
	memcpy(out, s, sizeof(double) * GBML_KM_ROW_LANES * (size_t) NG);
}

/* n_groups (1..GBML_KM_ROW_GROUPS) made a constant for km_row_groups. */
static inline __attribute__((always_inline)) void
km_row_block(const float *x, const double *block, int d, int n_groups, const bool dot, double *out)
{
	/* one case a count (the switch is what makes NG a constant) */
#define KM_ROW_CASE(n) case n: km_row_groups(x, block, d, n, dot, out); break
	switch (n_groups)
	{
		KM_ROW_CASE(1);
		KM_ROW_CASE(2);
		KM_ROW_CASE(3);
		KM_ROW_CASE(4);
		KM_ROW_CASE(5);
		KM_ROW_CASE(6);
		KM_ROW_CASE(7);
		default:
			km_row_groups(x, block, d, 8, dot, out);
			break;
	}
#undef KM_ROW_CASE
}

__attribute__((target_clones("avx2", "default"), optimize("fp-contract=off")))
void
gbml_km_sqdist_block(const float *x, const double *block, int d, int n_groups, double *out)
{
	km_row_block(x, block, d, n_groups, false, out);
}

__attribute__((target_clones("avx2", "default"), optimize("fp-contract=off")))
void
gbml_km_dot_block(const float *x, const double *block, int d, int n_groups, double *out)
{
	km_row_block(x, block, d, n_groups, true, out);
}

/*
 * k-means++ candidates: direct differences (no cancellation, whatever the
 * offset of the data), vectorised over the candidates (2 + ln k <= 16 of
 * them, one lane each) and 8 rows at a time for independent FMA chains:
 * 2d vector operations per row for all candidates.  One pass over the rows
 * per chosen centroid, so it is bandwidth-bound for wide rows.
 */
typedef float km_v16 __attribute__((vector_size(64)));
typedef float km_v16u __attribute__((vector_size(64), aligned(4)));

#define KM_CAND_ROWS 8

__attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
void
gbml_km_candidate_dist(const float *x, int64_t n, int d, const double *scale,
					   const float *cand_t, int T, const float *closest,
					   float *out, double pot_scale, int64_t *pot)
{
	for (int64_t i0 = 0; i0 < n; i0 += KM_CAND_ROWS)
	{
		const float *xr[KM_CAND_ROWS];
		float		sc[KM_CAND_ROWS];
		km_v16		acc[KM_CAND_ROWS];

#pragma GCC unroll 8
		for (int r = 0; r < KM_CAND_ROWS; r++)
		{
			int64_t		i = i0 + r < n ? i0 + r : n - 1;

			xr[r] = x + (size_t) i * d;
			sc[r] = scale ? (float) scale[i] : 1.0f;
			acc[r] = (km_v16) {0};
		}
		for (int j = 0; j < d; j++)
		{
			km_v16		cv = *(const km_v16u *) (cand_t + (size_t) j * GBML_KM_CAND_LANES);

#pragma GCC unroll 8
			for (int r = 0; r < KM_CAND_ROWS; r++)
			{
				km_v16		diff = xr[r][j] * sc[r] - cv;

				acc[r] += diff * diff;
			}
		}
		for (int r = 0; r < KM_CAND_ROWS && i0 + r < n; r++)
		{
			int64_t		i = i0 + r;

			for (int t = 0; t < T; t++)
			{
				float		v = acc[r][t] < closest[i] ? acc[r][t] : closest[i];

				out[(size_t) t * n + i] = v;
				pot[t] += gbml_km_fix_term((double) v, pot_scale);
			}
		}
	}
}

#else							/* KM_TEMPLATE: one tile variant */

#define KM_CAT2(a, b) a##_##b
#define KM_CAT(a, b) KM_CAT2(a, b)
#define KM_FN KM_CAT(km_tile, KM_SUFFIX)
#define KM_VF KM_CAT(km_vf, KM_SUFFIX)
#define KM_VI KM_CAT(km_vi, KM_SUFFIX)
#define KM_VFU KM_CAT(km_vfu, KM_SUFFIX)
#define KM_SEL KM_CAT(km_sel, KM_SUFFIX)
#define KM_HMIN KM_CAT(km_hmin, KM_SUFFIX)
#define KM_HMIN_I KM_CAT(km_hmini, KM_SUFFIX)
#define KM_HALVES (GBML_KM_KPAD / (KM_LANES * KM_NV))

typedef float KM_VF __attribute__((vector_size(KM_LANES * 4)));
typedef int32_t KM_VI __attribute__((vector_size(KM_LANES * 4)));
typedef float KM_VFU __attribute__((vector_size(KM_LANES * 4), aligned(4)));

/* m ? a : b, lane-wise (m is all-ones or zero per lane). */
KM_TARGET static inline KM_VF
KM_SEL(KM_VI m, KM_VF a, KM_VF b)
{
	return (KM_VF) (((KM_VI) a & m) | ((KM_VI) b & ~m));
}

/* Horizontal minimum by halving shuffles (log2(lanes) steps). */
KM_TARGET static inline float
KM_HMIN(KM_VF v)
{
	KM_VI		iota;

	for (int l = 0; l < KM_LANES; l++)
		iota[l] = l;
	for (int s = KM_LANES / 2; s >= 1; s /= 2)
	{
		KM_VF		w = __builtin_shuffle(v, iota ^ s);

		v = KM_SEL(w < v, w, v);
	}
	return v[0];
}

KM_TARGET static inline int32_t
KM_HMIN_I(KM_VI v)
{
	KM_VI		iota;

	for (int l = 0; l < KM_LANES; l++)
		iota[l] = l;
	for (int s = KM_LANES / 2; s >= 1; s /= 2)
	{
		KM_VI		w = __builtin_shuffle(v, iota ^ s);
		KM_VI		m = w < v;

		v = (w & m) | (v & ~m);
	}
	return v[0];
}

/*
 * For rows x[0..n-1] (n <= KM_RB): arg[i] = first argmin_j of the float
 * estimate of |c_j|^2 - 2 x_i.c_j, best[i] its value, second[i] the smallest
 * value among the other centroids.  Each lane keeps its own best, second
 * and argmin; lanes are merged once at the end.
 */
KM_TARGET static void
KM_FN(const gbml_km_centers *C, const float *x, int n, float *best, float *second, int32_t *arg)
{
	KM_VF		s1[KM_RB],
				s2[KM_RB];
	KM_VI		si[KM_RB];
	KM_VI		iota;
	const int	d = C->d;
	const int	npanels = C->kp / GBML_KM_KPAD;
	const KM_VF inf = (KM_VF) {0} + INFINITY;

	for (int l = 0; l < KM_LANES; l++)
		iota[l] = l;
	for (int i = 0; i < n; i++)
	{
		s1[i] = inf;
		s2[i] = inf;
		si[i] = (KM_VI) {0};
	}
	for (int p = 0; p < npanels; p++)
	{
		for (int h = 0; h < KM_HALVES; h++)
		{
			const int	off = h * KM_LANES * KM_NV;
			const float *P = C->panels + (size_t) p * d * GBML_KM_KPAD + off;
			const float *cn = C->cnorm + p * GBML_KM_KPAD + off;
			const int	base = p * GBML_KM_KPAD + off;

			for (int i0 = 0; i0 < n; i0 += KM_R)
			{
				const float *xr[KM_R];
				KM_VF		acc[KM_R][KM_NV];

#pragma GCC unroll 8
				for (int r = 0; r < KM_R; r++)
				{
					int			i = i0 + r < n ? i0 + r : n - 1;

					xr[r] = x + (size_t) i * d;
#pragma GCC unroll 4
					for (int v = 0; v < KM_NV; v++)
						acc[r][v] = (KM_VF) {0};
				}
				for (int j = 0; j < d; j++)
				{
					KM_VF		cv[KM_NV];

#pragma GCC unroll 4
					for (int v = 0; v < KM_NV; v++)
						cv[v] = *(const KM_VFU *) (P + (size_t) j * GBML_KM_KPAD + v * KM_LANES);
#pragma GCC unroll 8
					for (int r = 0; r < KM_R; r++)
					{
						float		xs = xr[r][j];

#pragma GCC unroll 4
						for (int v = 0; v < KM_NV; v++)
							acc[r][v] += xs * cv[v];
					}
				}
#pragma GCC unroll 8
				for (int r = 0; r < KM_R; r++)
				{
					int			i = i0 + r;

					if (i >= n)
						break;
#pragma GCC unroll 4
					for (int v = 0; v < KM_NV; v++)
					{
						KM_VF		D = *(const KM_VFU *) (cn + v * KM_LANES) - 2.0f * acc[r][v];
						KM_VI		idx = iota + (base + v * KM_LANES);
						KM_VI		m1 = D < s1[i];
						KM_VF		lo2 = KM_SEL(D < s2[i], D, s2[i]);

						s2[i] = KM_SEL(m1, s1[i], lo2);
						s1[i] = KM_SEL(m1, D, s1[i]);
						si[i] = (si[i] & ~m1) | (idx & m1);
					}
				}
			}
		}
	}
	/* Merge the lanes: best value, lowest index among equal bests, then the runner-up. */
	for (int i = 0; i < n; i++)
	{
		float		b = KM_HMIN(s1[i]);
		KM_VI		eq = s1[i] == b;
		int32_t		a = KM_HMIN_I((si[i] & eq) | (KM_VI) ((~eq) & INT32_MAX));
		KM_VI		own = eq & (si[i] == a);
		KM_VF		rest = KM_SEL(own, inf, s1[i]);
		KM_VF		lo = KM_SEL(rest < s2[i], rest, s2[i]);

		best[i] = b;
		second[i] = KM_HMIN(lo);
		arg[i] = a;
	}
}

#ifdef KM_SMALL
#define KM_SMALL_BODY KM_CAT(km_small_body, KM_SUFFIX)
#define KM_SMALL_FN KM_CAT(km_small, KM_SUFFIX)

/*
 * The small-k tile: all k <= 4 x LANES centroids in NV vectors, so one pass
 * over a row's features gives every distance, and the argmin needs no
 * per-lane bookkeeping.  R rows at a time share each centroid load (R x NV
 * accumulators in registers).  Each row then takes one horizontal minimum b
 * and one compare against b + q (q = the row's quick-accept gap, see
 * gbml_km_assign): when only the winning lane is within q of b the label is
 * final (the same test as gap > q, without computing the runner-up).  The
 * other rows are handed back with best, runner-up and argmin for the full
 * test.  NV and R are constants after inlining.
 */
KM_TARGET static inline __attribute__((always_inline)) int
KM_SMALL_BODY(const gbml_km_centers *C, const float *x, int n, const double *xnorm2,
			  double qa, double qb, int32_t *labels, int32_t *pend, float *best,
			  float *second, int32_t *arg, const bool LOCAL, const int NV, const int R)
{
	const int	d = C->d;
	const float *P[4];
	KM_VF		cn[4];
	KM_VI		iota;
	int			np = 0;
	const KM_VF inf = (KM_VF) {0} + INFINITY;
	const double alpha = C->alpha,
				twocm2 = 2.0 * C->cmax * C->cmax,
				slack0 = KM_ABS_SLACK * (d + 4) * 2.0;

	for (int l = 0; l < KM_LANES; l++)
		iota[l] = l;
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
	{
		int			off = v * KM_LANES;

		P[v] = C->panels + (size_t) (off / GBML_KM_KPAD) * d * GBML_KM_KPAD + off % GBML_KM_KPAD;
		cn[v] = *(const KM_VFU *) (C->cnorm + off);
	}
	for (int i0 = 0; i0 < n; i0 += R)
	{
		const float *xr[8];
		KM_VF		acc[8][4];
		float		bs[8];
		km_q8f		tfs = {0};

#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
		{
			int			i = i0 + r < n ? i0 + r : n - 1;

			xr[r] = x + (size_t) i * d;
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				acc[r][v] = (KM_VF) {0};
		}
		for (int j = 0; j < d; j++)
		{
			KM_VF		cv[4];

#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				cv[v] = *(const KM_VFU *) (P[v] + (size_t) j * GBML_KM_KPAD);
#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
			{
				float		xs = xr[r][j];

#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
					acc[r][v] += xs * cv[v];
			}
		}
		/*
		 * With the local bound (LOCAL, a constant): distances and each row's
		 * float minimum b first, then the acceptance thresholds of the R rows
		 * at once in double vectors.  The gap is the smaller of q0 = qa +
		 * qb|x|^2 (km_decide's quick test) and its local bound without the
		 * square roots: with r = |x - c_b| and rho = |x| + r, rho^2 +
		 * 2|x|rho <= 5|x|^2 + 3r^2, and r^2 <= r2 below (b's own error
		 * bounded with 2|x||c| <= |x|^2 + |c|^2).  The local bound is far
		 * tighter when one centroid lies far out (cmax large) and the row
		 * does not.  Without it, each row takes q0 in the loop below.
		 */
		if (LOCAL)
		{
			km_q8d		bd = {0},
						xv = {0},
						q0,
						sl,
						r2,
						q,
						t,
						at;

#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
			{
				KM_VF		m;

#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
					acc[r][v] = cn[v] - 2.0f * acc[r][v];
				m = acc[r][0];
#pragma GCC unroll 4
				for (int v = 1; v < NV; v++)
					m = KM_SEL(acc[r][v] < m, acc[r][v], m);
				bs[r] = KM_RMIN(m);
				bd[r] = bs[r];
				xv[r] = xnorm2[i0 + r < n ? i0 + r : n - 1];
			}
			q0 = qa + qb * xv;
			sl = slack0 * (1.0 + xv);
			r2 = bd + xv * (1.0 + 1e-12) + (alpha * (twocm2 + xv) + sl);
			r2 = KM_SELD(r2 > 0.0, r2, (km_q8d) {0});
			q = 2.0 * (alpha * (5.0 * xv + 3.0 * r2) + sl) * (1.0 + 1e-9);
			t = bd + KM_SELD(q < q0, q, q0);
			at = KM_SELD(t < 0.0, -t, t);
			tfs = __builtin_convertvector(t + at * 0x1p-22 + 0x1p-126, km_q8f);
		}
#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
		{
			int			i = i0 + r;
			KM_VF		Dq[4];
			KM_VF	   *D = LOCAL ? acc[r] : Dq;
			float		b,
						tf;
			uint64_t	mk = 0;

			if (i >= n)
				break;
			if (LOCAL)
			{
				b = bs[r];
				tf = tfs[r];
			}
			else
			{
				KM_VF		m;
				double		t;

#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
					Dq[v] = cn[v] - 2.0f * acc[r][v];
				m = Dq[0];
#pragma GCC unroll 4
				for (int v = 1; v < NV; v++)
					m = KM_SEL(Dq[v] < m, Dq[v], m);
				b = KM_RMIN(m);
				t = (double) b + (qa + qb * xnorm2[i]);
				tf = (float) (t + fabs(t) * 0x1p-22 + 0x1p-126);
			}
			/* tf >= b + gap (rounded up to float): "no other lane <= tf" implies a larger float gap */
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				mk |= KM_LEMASK(D[v], (KM_VF) {0} + tf) << (v * KM_LANES);
			if ((mk & (mk - 1)) == 0 && mk != 0)
			{
				labels[i] = (int32_t) __builtin_ctzll(mk);
				continue;
			}
			/* Undecided: the first lane equal to b, and the smallest other value. */
			{
				uint64_t	eq = 0;
				int32_t		a;
				float		s = INFINITY;

#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
					eq |= KM_EQMASK(D[v], (KM_VF) {0} + b) << (v * KM_LANES);
				a = eq ? (int32_t) __builtin_ctzll(eq) : 0;
#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
				{
					KM_VI		own = (iota + v * KM_LANES) == a;
					float		sv = KM_RMIN(KM_SEL(own, inf, D[v]));

					s = sv < s ? sv : s;
				}
				pend[np] = i;
				best[np] = b;
				second[np] = s;
				arg[np] = a;
				np++;
			}
		}
	}
	return np;
}

KM_TARGET static int
KM_SMALL_FN(const gbml_km_centers *C, const float *x, int n, const double *xnorm2,
			double qa, double qb, int32_t *labels, int32_t *pend, float *best,
			float *second, int32_t *arg, bool use_local)
{
	/* the local-bound flag and the vector count become constants of the inlined body */
	if (use_local)
		switch ((C->k + KM_LANES - 1) / KM_LANES)
		{
			case 1:
				return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, true, 1, 8);
			case 2:
				return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, true, 2, KM_LANES == 16 ? 6 : 4);
			case 3:
				return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, true, 3, 4);
			default:
				return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, true, 4, KM_LANES == 16 ? 4 : 2);
		}
	switch ((C->k + KM_LANES - 1) / KM_LANES)
	{
		case 1:
			return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, false, 1, 8);
		case 2:
			return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, false, 2, KM_LANES == 16 ? 6 : 4);
		case 3:
			return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, false, 3, 4);
		default:
			return KM_SMALL_BODY(C, x, n, xnorm2, qa, qb, labels, pend, best, second, arg, false, 4, KM_LANES == 16 ? 4 : 2);
	}
}

#undef KM_SMALL_BODY
#undef KM_SMALL_FN
#undef KM_SMALL
#undef KM_RMIN
#undef KM_LEMASK
#undef KM_EQMASK
#endif							/* KM_SMALL */

#undef KM_CAT2
#undef KM_CAT
#undef KM_FN
#undef KM_VF
#undef KM_VI
#undef KM_VFU
#undef KM_SEL
#undef KM_HMIN
#undef KM_HMIN_I
#undef KM_HALVES

#endif							/* KM_TEMPLATE */
