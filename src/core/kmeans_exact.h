/*
 * kmeans_exact.h — the arithmetic that K-Means' CPU kernels
 * (kmeans_kernels.c) and the CUDA backend (cuda/kmeans_device.cu) must do
 * bit for bit, so that a fit gives the same model bytes on the CPU, on the
 * GPU, or split between them (the hybrid mode):
 *
 *  - Fixed-point sums.  Every sum whose order differs between devices or
 *    splits (the centroid sums, the k-means++ potentials, the inertia) adds
 *    int64 terms, each a double rounded once to a power-of-two grid.
 *    Integer addition is associative, so any order, any split between
 *    threads, devices or shards gives the same total.  A grid is chosen per
 *    quantity (per feature for the centroid sums) from an exact maximum, so
 *    a term keeps about `bits` significant bits relative to the largest
 *    value of its quantity: 50 bits up to 4,096 rows, 62 - log2(n) beyond
 *    (38 bits at 10M rows), far finer than the float32 input.
 *  - The exact re-check of a label: |c_j|^2 - 2 x.c_j in double, summed in
 *    feature order with separate multiply and add.
 *  - The k-means++ distance of a row to a candidate in float32, feature
 *    order, separate multiply and add.
 *  - The double distance of a row to its centroid (inertia, relocation).
 *
 * The functions compile as C (the engine) and as CUDA (GBML_KM_HD), where
 * the _rn intrinsics keep the compiler from fusing a multiply and an add.
 */
#ifndef GBML_KMEANS_EXACT_H
#define GBML_KMEANS_EXACT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__) || defined(GBML_CUDA_EMU)
#define GBML_KM_HD __host__ __device__
#else
#define GBML_KM_HD
#endif

static inline int64_t
gbml_km_host_dbits(double v)
{
	int64_t		b;

	memcpy(&b, &v, sizeof(b));
	return b;
}

#if defined(__CUDA_ARCH__) || defined(GBML_CUDA_EMU)
/* Device code (and the emulation of it): intrinsics that are never fused. */
#define GBML_KM_DADD(a, b) __dadd_rn((a), (b))
#define GBML_KM_DSUB(a, b) __dsub_rn((a), (b))
#define GBML_KM_DMUL(a, b) __dmul_rn((a), (b))
#define GBML_KM_FADD(a, b) __fadd_rn((a), (b))
#define GBML_KM_FSUB(a, b) __fsub_rn((a), (b))
#define GBML_KM_FMUL(a, b) __fmul_rn((a), (b))
#define GBML_KM_DBITS(v) ((int64_t) __double_as_longlong(v))
#else
/* Host code: every caller is built with -ffp-contract=off (Makefile). */
#define GBML_KM_DADD(a, b) ((a) + (b))
#define GBML_KM_DSUB(a, b) ((a) - (b))
#define GBML_KM_DMUL(a, b) ((a) * (b))
#define GBML_KM_FADD(a, b) ((a) + (b))
#define GBML_KM_FSUB(a, b) ((a) - (b))
#define GBML_KM_FMUL(a, b) ((a) * (b))
#define GBML_KM_DBITS(v) gbml_km_host_dbits(v)
#endif

/* Largest significant bits of a fixed-point term (the rounding trick needs < 52). */
#define GBML_KM_FIX_BITS_MAX 50

/* 1.5 * 2^52: adding it to |t| < 2^51 leaves round(t) (nearest, ties to even) in the low mantissa bits. */
#define GBML_KM_FIX_MAGIC 6755399441055744.0

/*
 * Significant bits of a term when up to n terms are summed: n terms below
 * 2^(bits-1) in magnitude stay below 2^62, so an int64 never overflows,
 * whatever the order or the split.
 */
static inline int
gbml_km_fix_bits(int64_t n)
{
	int			log2n = 0;

	while (log2n < 62 && ((int64_t) 1 << log2n) < n + 1)
		log2n++;
	return 62 - log2n < GBML_KM_FIX_BITS_MAX ? 62 - log2n : GBML_KM_FIX_BITS_MAX;
}

/*
 * The grid of a quantity whose values satisfy |v| <= vmax: the power of
 * two 2^s that maps vmax below 2^(bits-1).  A term is round(v * 2^s).
 */
static inline double
gbml_km_fix_scale(double vmax, int bits)
{
	int			e;

	if (!(vmax > 0) || !isfinite(vmax))
		return 1.0;
	e = ilogb(vmax) + 1;		/* vmax < 2^e */
	return ldexp(1.0, bits - 1 - e);
}

/* round(v * scale) for |v * scale| < 2^51, the same bits on every device. */
GBML_KM_HD static inline int64_t
gbml_km_fix_term(double v, double scale)
{
	double		t = GBML_KM_DADD(GBML_KM_DMUL(v, scale), GBML_KM_FIX_MAGIC);

	return GBML_KM_DBITS(t) - GBML_KM_DBITS(GBML_KM_FIX_MAGIC);
}

/* The value of a fixed-point sum (host). */
static inline double
gbml_km_fix_value(int64_t sum, double scale)
{
	return (double) sum / scale;
}

/* |c_j|^2 - 2 x.c_j in double, feature order (c_j's features `stride` apart). */
GBML_KM_HD static inline double
gbml_km_exact_dist(const float *x, const double *c, int64_t stride, int d, double cnorm)
{
	double		s = 0;

	for (int i = 0; i < d; i++)
		s = GBML_KM_DADD(s, GBML_KM_DMUL((double) x[i], c[(int64_t) i * stride]));
	return GBML_KM_DSUB(cnorm, GBML_KM_DMUL(2.0, s));
}

/*
 * One feature of gbml_km_cand_dist: acc + (x_i*sc - cand_i)^2.  A kernel that
 * walks the features in chunks (cuda/kmeans_device.cu) applies it in feature
 * order and gets the same bits.
 */
GBML_KM_HD static inline float
gbml_km_cand_step(float acc, float xi, float sc, float ci)
{
	float		diff = GBML_KM_FSUB(GBML_KM_FMUL(xi, sc), ci);

	return GBML_KM_FADD(acc, GBML_KM_FMUL(diff, diff));
}

/* k-means++: |x*sc - cand|^2 in float32, feature order (cand's features `stride` apart). */
GBML_KM_HD static inline float
gbml_km_cand_dist(const float *x, float sc, const float *cand, int64_t stride, int d)
{
	float		acc = 0.0f;

	for (int i = 0; i < d; i++)
		acc = gbml_km_cand_step(acc, x[i], sc, cand[(int64_t) i * stride]);
	return acc;
}

/*
 * A row's distance to a centroid in double: |x*sc - c|^2, or in the
 * spherical mode (sc = 1/|x|) the cosine distance 1 - sc * x.c.
 */
GBML_KM_HD static inline double
gbml_km_row_dist(const float *x, double sc, const double *c, int d, bool spherical)
{
	double		s = 0;

	if (spherical)
	{
		for (int j = 0; j < d; j++)
			s = GBML_KM_DADD(s, GBML_KM_DMUL((double) x[j], c[j]));
		return GBML_KM_DSUB(1.0, GBML_KM_DMUL(s, sc));
	}
	for (int j = 0; j < d; j++)
	{
		double		t = GBML_KM_DSUB(GBML_KM_DMUL((double) x[j], sc), c[j]);

		s = GBML_KM_DADD(s, GBML_KM_DMUL(t, t));
	}
	return s;
}

/* Absolute slack for float underflow (products below FLT_MIN lose absolute accuracy). */
#define GBML_KM_ABS_SLACK 1e-36

/*
 * Whether the float32 winner of a row is provably the exact argmin: its
 * value b and the runner-up's `second` (float estimates of |c|^2 - 2x.c,
 * summed in any order, with or without FMA) are further apart than twice
 * the float error bound (kmeans_kernels.c derives it).  xn2 = |x|^2.  When
 * this says no, the caller re-checks the row with gbml_km_exact_dist.
 */
GBML_KM_HD static inline bool
gbml_km_float_decides(double alpha, double cmax, int d, double xn2, double b, double second)
{
	double		gap = second - b;
	double		slack = GBML_KM_ABS_SLACK * (d + 4) * 2.0 * (1.0 + xn2);
	double		xn,
				ec,
				rho,
				e;

	/* Quick accept, no sqrt: 2|x||c| <= |x|^2 + |c|^2 bounds every candidate's error. */
	if (gap > 2.0 * (alpha * (2.0 * cmax * cmax + xn2) + slack))
		return true;
	/* Local bound: only centroids within rho of the origin can compete. */
	xn = sqrt(xn2);
	ec = alpha * (cmax * cmax + 2.0 * xn * cmax) + slack;
	rho = xn + sqrt(fmax(0.0, b + xn2 * (1.0 + 1e-12) + ec));
	if (rho > cmax)
		rho = cmax;
	e = alpha * (rho * rho + 2.0 * xn * rho) + slack;
	return gap > 2.0 * e;
}

#endif
