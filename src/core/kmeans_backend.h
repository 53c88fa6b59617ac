/*
 * kmeans_backend.h — the K-Means part of the compute backend (backend.h's
 * `kmeans` table, implemented by cuda/kmeans_device.cu): the rows of some
 * row blocks resident on the device, and the passes kmeans.c runs over
 * them.  Every result equals what the CPU kernels give for the same rows
 * (kmeans_exact.h defines the shared arithmetic), so kmeans.c can give any
 * block to either device and get the same model bytes.
 *
 * A fit numbers its row blocks 0..n_blocks-1 (kmeans.c's plan); a block is
 * resident on the device between put_block and drop_block.  Calls that
 * name blocks take an array of resident block ids.  Every call returns 0 on
 * success, nonzero on a device error or a budget refusal (the reason in the
 * backend's last_error, the kind in ctx_over_budget), after which the
 * context is unusable except for end/ctx_destroy.
 */
#ifndef GBML_KMEANS_BACKEND_H
#define GBML_KMEANS_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gbml_gpu_ctx gbml_gpu_ctx;

/* The centroids of the coming passes, as the CPU prepared them (gbml_km_centers_prepare). */
typedef struct gbml_km_device_centers
{
	const double *c;			/* k x d, the exact centroids */
	const double *cnorm_d;		/* k: |c_j|^2 in double, as the CPU summed it */
	double		cmax;			/* max_j |c_j| */
	double		alpha;			/* float error factor; +inf: every row takes the exact path */
} gbml_km_device_centers;

/* What a Lloyd pass over some blocks found. */
typedef struct gbml_km_pass_result
{
	int64_t		changed;		/* rows whose label differs from their previous one */
	int64_t		rechecked;		/* rows that took the exact double path */
	double		seconds;		/* device time of the pass (events around its kernels) */
} gbml_km_pass_result;

struct gbml_backend_kmeans
{
	/*
	 * A fit's device state: k clusters of d features, the spherical mode,
	 * up to n_blocks blocks, and the fixed-point grid of each feature's
	 * centroid sums (fix_scale[d], a power of two each: a row's term for
	 * feature j is gbml_km_fix_term(x_j * sc, fix_scale[j]), sc = the row's
	 * scale in the spherical mode, else 1).
	 */
	int			(*begin) (gbml_gpu_ctx *ctx, int k, int d, bool spherical, int n_blocks,
						  const double *fix_scale);
	/* Frees everything begin and the blocks allocated. */
	void		(*end) (gbml_gpu_ctx *ctx);

	/*
	 * Block b's rows move to the device: x[rows][d] (row-major), xnorm2[rows]
	 * (|x|^2 in double, as the CPU computed it), scale[rows] (1/|x|, spherical
	 * only, else NULL) and labels[rows] (the current labels, -1 for none).
	 * The host arrays may be reused when it returns.
	 */
	int			(*put_block) (gbml_gpu_ctx *ctx, int b, const float *x, const double *xnorm2,
							  const double *scale, const int32_t *labels, int64_t rows);
	/* Block b's current labels to labels_out[rows] (NULL: not wanted), then it leaves the device. */
	int			(*drop_block) (gbml_gpu_ctx *ctx, int b, int32_t *labels_out);
	/* Block b's current labels to labels_out[rows]; it stays. */
	int			(*read_labels) (gbml_gpu_ctx *ctx, int b, int32_t *labels_out);

	/* The centroids every following pass uses (copied: the host arrays may change). */
	int			(*set_centers) (gbml_gpu_ctx *ctx, const gbml_km_device_centers *centers);

	/*
	 * A Lloyd pass over blocks[0..nb): each row's label for the current
	 * centroids (the first index of the minimum of |c_j|^2 - 2 x.c_j in
	 * double semantics: a float32 pass, gbml_km_float_decides, and
	 * gbml_km_exact_dist for the rows it cannot decide), which replaces the
	 * row's label; counts[k] of the new labels; and, when `update`,
	 * sums[k][d] += the rows' fixed-point terms.  pass_launch returns once
	 * the work is queued (the CPU works meanwhile); pass_done polls it
	 * (1 done, 0 still running, < 0 error); pass_finish waits and adds the
	 * pass's counts into counts[k] and, with update, its sums into
	 * sums[k*d] (the caller's int64 arrays, which it zeroes or fills with
	 * the CPU's part).
	 */
	int			(*pass_launch) (gbml_gpu_ctx *ctx, const int *blocks, int nb, bool update);
	int			(*pass_done) (gbml_gpu_ctx *ctx);
	int			(*pass_finish) (gbml_gpu_ctx *ctx, int64_t *sums, int64_t *counts,
								gbml_km_pass_result *out);

	/*
	 * k-means++.  cand_reset sets every row's closest distance to +inf.
	 * cand_pass computes, for each row and candidate t < T (cand_t[d][16],
	 * candidate-minor, as gbml_km_candidate_dist takes it), the float
	 * min(closest, gbml_km_cand_dist(x, (float) sc, cand_t + t, 16, d)),
	 * and pot[i*T + t] = the fixed-point sum (grid pot_scale) of those
	 * values over block blocks[i].  cand_take makes candidate t's values of
	 * the last cand_pass the rows' closest distances and returns their
	 * maximum over the blocks in *max_out.  read_closest copies block b's
	 * closest distances to out[rows].
	 */
	int			(*cand_reset) (gbml_gpu_ctx *ctx, const int *blocks, int nb);
	int			(*cand_pass) (gbml_gpu_ctx *ctx, const int *blocks, int nb, const float *cand_t,
							  int T, double pot_scale, int64_t *pot);
	int			(*cand_take) (gbml_gpu_ctx *ctx, const int *blocks, int nb, int t, float *max_out);
	int			(*read_closest) (gbml_gpu_ctx *ctx, int b, float *out);

	/*
	 * Each row of block b's distance to its labelled centroid of the current
	 * centers: gbml_km_row_dist(x, sc, c_label, d, spherical), sc = 1/|x| or
	 * 1 (inertia, and the relocation of empty clusters).
	 */
	int			(*row_dist) (gbml_gpu_ctx *ctx, int b, double *out);
};

#endif
