/*
 * kmeans_kernels.h — the hot loops of K-Means as plain-C functions over
 * simple arrays, so that the CUDA backend can provide the same entry points
 * (the hybrid CPU/GPU mode of the K-Means seed splits the rows of one
 * iteration between them).
 *
 *   S1, assignment: gbml_km_assign() — argmin_j (|c_j|^2 - 2 x.c_j) for a
 *       block of rows, float32 register-blocked dot products with the
 *       centroids in cache (all k centroids in registers-wide vectors for
 *       small k, 32-centroid panels otherwise), then an exact-in-double
 *       re-check of the rows whose two best candidates are closer than the
 *       float32 error bound.  The
 *       labels are therefore those of a float64 computation (what
 *       scikit-learn does with float64 input), at float32 speed.
 *   S2, update: gbml_km_accumulate() — per-cluster sums in fixed point
 *       (kmeans_exact.h), exact whatever the order.
 *   Init: gbml_km_candidate_dist() — squared distances of rows to a few
 *       k-means++ candidates.
 *
 * None of these allocate or call back into the engine: callers run them
 * inside OpenMP regions on disjoint row ranges.
 */
#ifndef GBML_KMEANS_KERNELS_H
#define GBML_KMEANS_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

/* Centroids are padded to a multiple of this many (the widest register tile). */
#define GBML_KM_KPAD 32

/*
 * The centroids of one iteration in the layouts the assignment kernel
 * needs.  Built by gbml_km_centers_prepare() from the double centroids.
 */
typedef struct gbml_km_centers
{
	int			k;				/* clusters */
	int			d;				/* features */
	int			kp;				/* k rounded up to GBML_KM_KPAD */
	float	   *panels;			/* kp/32 panels, each d x 32 floats (centroid-minor) */
	float	   *cnorm;			/* kp: |c|^2 as float, +inf for the padding */
	const double *c;			/* k x d, the exact centroids */
	double	   *panels_d;		/* kp/8 panels, each d x 8 doubles: the exact re-check */
	double	   *cnorm_d;		/* k: |c|^2 in double */
	double		cmax;			/* max_j |c_j| */
	double		alpha;			/* float32 error-bound factor, see kmeans_kernels.c */
} gbml_km_centers;

/* Bytes of the arrays gbml_km_centers_prepare() fills (caller allocates). */
static inline int
gbml_km_padded(int k)
{
	return (k + GBML_KM_KPAD - 1) / GBML_KM_KPAD * GBML_KM_KPAD;
}

/*
 * Fills panels[kp*d], panels_d[kp*d], cnorm[kp], cnorm_d[k], cmax and alpha
 * from the double centroids c[k*d].  xnorm_max is the largest row norm of
 * the data: when float32 could overflow the whole assignment runs in double.
 */
void		gbml_km_centers_prepare(gbml_km_centers *C, const double *c, int k, int d,
									float *panels, double *panels_d, float *cnorm, double *cnorm_d,
									double xnorm_max);

/*
 * S1 for rows x[n*d] (row-major), n <= GBML_KM_MAX_BLOCK: labels[i] is the
 * first index of the minimum of |c_j|^2 - 2 x_i.c_j (in double semantics).
 * xnorm2[i] = |x_i|^2 (double).  Returns the number of rows that needed
 * the exact double re-check.
 */
#define GBML_KM_MAX_BLOCK 4096
int64_t		gbml_km_assign(const gbml_km_centers *C, const float *x, int64_t n,
						   const double *xnorm2, int32_t *labels);

/*
 * Exact (double) assignment of one row, the re-check path: each centroid's
 * dot product summed in feature order with separate multiply and add, so all
 * ISA variants give the same bits.  gbml_km_assign_exact_ref is the plain
 * scalar reference of the same arithmetic (tests).
 */
int32_t		gbml_km_assign_exact(const gbml_km_centers *C, const float *x);
int32_t		gbml_km_assign_exact_ref(const gbml_km_centers *C, const float *x);

/*
 * S2 in fixed point (kmeans_exact.h): for each row,
 * sums[labels[i]*d + j] += gbml_km_fix_term(x[i][j] * scale[i], fix_scale[j])
 * (scale NULL means 1) and counts[labels[i]]++.  Exact, so the order of
 * rows, threads or devices does not matter.
 */
void		gbml_km_accumulate(const float *x, int64_t n, int d, const int32_t *labels,
							   const double *scale, const double *fix_scale, int64_t *sums,
							   int64_t *counts);

/* Squared row norms in double. */
void		gbml_km_row_norms(const float *x, int64_t n, int d, double *xnorm2);

/*
 * k-means++ step: for each row i and candidate t < T <= GBML_KM_CAND_LANES
 * (cand_t[d][GBML_KM_CAND_LANES], float, candidate-minor),
 * out[t*n + i] = min(closest[i], gbml_km_cand_dist(x_i, (float) scale_i,
 * cand_t + t)) (scale NULL = 1, float arithmetic of kmeans_exact.h), and
 * pot[t] += the fixed-point terms (grid pot_scale) of those values.
 */
#define GBML_KM_CAND_LANES 16
void		gbml_km_candidate_dist(const float *x, int64_t n, int d, const double *scale,
								   const float *cand_t, int T, const float *closest,
								   float *out, double pot_scale, int64_t *pot);

/* |x*scale - c|^2 in double (inertia, relocation, distances). */
double		gbml_km_sqdist(const float *x, double scale, const double *c, int d);

/*
 * One row's squared distances to a block of 4 x n_groups centroids (n_groups
 * 1..8; scoring: gbml.kmeans_assign and kmeans_distance), each the same
 * double as gbml_km_sqdist(x, 1, c, d) gives: a centroid's (x_i - c_i)^2
 * added in feature order, no fused multiply-add.  The centroids come
 * transposed in groups of 4 (block[(g * d + i) * 4 + lane] = feature i of
 * centroid 4g + lane); lanes are centroids, so the sums run side by side.
 */
#define GBML_KM_ROW_LANES 4
#define GBML_KM_ROW_GROUPS 8	/* groups a call at most: independent chains, within 16 vector registers */
void		gbml_km_sqdist_block(const float *x, const double *block, int d, int n_groups, double *out);

/* The same block's dot products x.c (the spherical mode's cosines): x_i * c_i added in feature order. */
void		gbml_km_dot_block(const float *x, const double *block, int d, int n_groups, double *out);

/*
 * Which register-tile variant gbml_km_assign uses ("avx512", "avx2",
 * "generic"), chosen from the CPU at the first gbml_km_centers_prepare().
 * gbml_km_force_isa() overrides it (tests compare the variants; "panels"
 * keeps the CPU's ISA but turns the small-k tile off; a name the
 * CPU cannot run is ignored); NULL restores the automatic choice.
 */
const char *gbml_km_kernel_isa(void);
void		gbml_km_force_isa(const char *name);

#endif
