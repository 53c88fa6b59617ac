/*
 * kmeans.h — K-Means (the hybrid CPU/GPU K-Means seed, CPU part): the
 * parameters, the training entry point the algorithm table and the
 * benchmarks share, and its result.
 *
 * gbml_kmeans_fit() runs init (k-means++, random or given centroids),
 * n_init times, and Lloyd iterations (S1 assignment by argmin |c|^2 - 2x.c in
 * the blocked kernel of kmeans_kernels.c or on the GPU, S2 update with
 * fixed-point sums), keeping the run with the lowest inertia.  The result is
 * the same bytes for any thread count and on the CPU, the GPU or both
 * (device 'hybrid').
 */
#ifndef GBML_KMEANS_H
#define GBML_KMEANS_H

#include "algorithm.h"
#include "kmeans_balance.h"
#include "shard_link.h"

enum
{
	GBML_KM_INIT_KMEANSPP = 0,
	GBML_KM_INIT_RANDOM = 1
};

typedef struct gbml_kmeans_params
{
	int64_t		k;				/* 0 = not given (an error) */
	gbml_enum_or_matrix init;	/* choice GBML_KM_INIT_* or a k x d matrix */
	int64_t		n_init;
	int64_t		max_iter;
	double		tol;			/* times the mean feature variance (as scikit-learn) */
	double		min_frac_changed;	/* the seed's phi0 */
	int64_t		random_seed;
	bool		spherical;
	bool		one_hot;		/* categorical features: a 0/1 column per category (else an error) */
} gbml_kmeans_params;

extern const gbml_param_spec gbml_kmeans_param_specs[];

/* Largest k (the params' limit and the loader's check). */
#define GBML_KM_MAX_K 1000000

/* Per-iteration timings kept (the first ones). */
#define GBML_KM_MAX_TIMED 1000

typedef struct gbml_kmeans_result
{
	int			k;
	int			d;
	bool		spherical;
	double	   *centroids;		/* k x d (unit rows when spherical) */
	int64_t    *sizes;			/* k: rows per cluster at the end */
	double		inertia;		/* sum |x-c|^2, or sum (1 - cos) when spherical */
	int			iterations;		/* Lloyd iterations of the kept run */
	const char *stop_reason;	/* "converged", "min_frac_changed", "tol", "max_iter" */
	double		last_frac_changed;
	double		tol_scaled;		/* tol times the mean feature variance */
	int			n_init;			/* runs made */
	int			best_init;		/* 0-based index of the kept run */
	double		init_seconds;	/* kept run's init */
	double		lloyd_seconds;	/* kept run's iterations, final assignment included */
	double		total_seconds;	/* everything, all runs */
	int			n_timed;		/* entries in s1 / s2 */
	double	   *s1;				/* per iteration: assignment seconds */
	double	   *s2;				/* per iteration: update seconds */
	double		s1_total;
	double		s2_total;
	int64_t		rechecked;		/* rows re-assigned in double (kept run) */
	int64_t		empty_relocations;	/* empty clusters moved to far points (kept run) */
	const char *kernel;			/* tile variant used ("avx512", ...) */
	const char *device;			/* "cpu", "gpu" or "hybrid" */
	int			n_blocks;		/* row blocks (the unit the GPU holds) */
	double		gpu_seconds;	/* device time of every pass, all runs */
	double		cpu_seconds;	/* the CPU's share of every pass, all runs */
	int64_t		blocks_moved;	/* hybrid: blocks that changed sides */
	int			n_split;		/* hybrid: entries in split */
	double		split[GBML_KM_BALANCE_TRACE];	/* the GPU's share of the rows, per iteration */
	gbml_shard_traffic traffic;	/* rows on other servers: the exchanges */
	/* Labels per chunk of the training set (only when asked for). */
	int			n_label_chunks;
	int32_t   **labels;
} gbml_kmeans_result;

/*
 * Trains on ds (any row order; >= 1 row, no NaN).  want_labels: keep the
 * final label of every row in res->labels (chunk by chunk, dataset order).
 */
int			gbml_kmeans_fit(const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env,
							bool want_labels, gbml_kmeans_result *res);
void		gbml_kmeans_result_free(gbml_kmeans_result *res, gbml_env *env);

extern const gbml_algorithm gbml_algorithm_kmeans;

#endif
