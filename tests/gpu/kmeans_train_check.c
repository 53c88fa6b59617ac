/*
 * kmeans_train_check.c — whole K-Means fits on the GPU backend (device
 * 'gpu') and split between the GPU and the CPU threads (device 'hybrid')
 * against the CPU: the same rows, params and seed must give the same model
 * bytes with k-means++, random and given initial centroids, the spherical
 * mode, n_init, empty-cluster relocation and any thread count.  The hybrid
 * fit's split trace is in its result.  Then what must not leak or crash:
 * the GPU budget, CUDA failures injected into the emulation, and cancels.
 * The same with the rows in temporary files (a table past the memory
 * budget): blocks go up from chunks read back, the hybrid CPU share reads
 * its rows from the files each iteration, and the bytes stay the CPU's.
 */
#include "gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "chunk_store_file.h"
#include "dataset.h"
#include "kmeans.h"
#include "rng.h"
#include "../unit/test_util.h"

typedef struct km_case
{
	const char *name;
	int64_t		n;
	int			d;
	int			distinct;		/* > 0: rows repeat this many points (empty clusters) */
	double		offset;			/* added to every feature (large: float cancellation) */
	gbml_param_value params[6];
	int			n_params;
} km_case;

static double init_values[4 * 5];

/* Blobs around `d` directions, plus noise; deterministic in seed; in temporary files when `files`. */
static void
make_rows(gbml_dataset *ds, gbml_env *env, const km_case *c, uint64_t seed, bool files)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * (size_t) c->d);

	gbml_rng_seed(&rng, seed);
	gbml_dataset_init(ds, false);
	ds->chunk_rows = 700;		/* several chunks, blocks and tasks */
	if (files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < c->n; i++)
	{
		gbml_row	row = {0};
		int64_t		p = c->distinct > 0 ? i % c->distinct : i;

		for (int j = 0; j < c->d; j++)
		{
			gbml_rng	r2;

			gbml_rng_seed(&r2, (uint64_t) p * 977 + (uint64_t) j);
			x[j] = (float) (c->offset + (p % 5 == j % 5 ? 3.0 : 0.0) + gbml_rng_uniform(c->distinct > 0 ? &r2 : &rng));
		}
		row.x = x;
		row.n_features = c->d;
		row.label_is_null = row.group_is_null = row.weight_is_null = true;
		gbml_dataset_append(ds, env, &row, false);
	}
	free(x);
}

static int
fit_where(const km_case *c, gbml_device device, int threads, size_t budget, bool files, gbml_env *env,
		  uint8_t **model, size_t *len)
{
	gbml_dataset ds;
	int			rc;

	gbml_env_init_malloc(env, threads);
	if (device != GBML_DEVICE_CPU)
	{
		env->device = device;
		env->gpu = gc_backend;
		env->gpu_memory_limit = budget;
	}
	make_rows(&ds, env, c, 17, files);
	*model = NULL;
	*len = 0;
	rc = gbml_train_values(env, "kmeans", c->params, c->n_params, &ds, NULL, model, len);
	gbml_dataset_free(&ds, env);
	return rc;
}

static int
fit(const km_case *c, gbml_device device, int threads, size_t budget, gbml_env *env, uint8_t **model,
	size_t *len)
{
	return fit_where(c, device, threads, budget, false, env, model, len);
}

static gbml_param_value
init_matrix(void)
{
	gbml_param_value v;

	memset(&v, 0, sizeof(v));
	v.key = "init";
	v.kind = GBML_VALUE_MATRIX;
	for (int i = 0; i < 4 * 5; i++)
		init_values[i] = (i % 5 == i / 5) ? 3.0 : 0.5;
	v.matrix.rows = 4;
	v.matrix.cols = 5;
	v.matrix.values = init_values;
	return v;
}

static void
equivalence_checks(bool quick)
{
	km_case		cases[] = {
		{"k-means++, n_init 2", 2500, 7, 0, 0, {tu_num("k", 6), tu_num("n_init", 2), tu_num("random_seed", 3)}, 3},
		{"random init, spherical", 2000, 9, 0, 0, {tu_num("k", 5), tu_str("init", "random"), tu_bool("spherical", true)}, 3},
		{"given centroids", 1500, 5, 0, 0, {tu_num("k", 4), init_matrix()}, 2},
		{"offset 1e4 (near ties)", 1800, 6, 0, 1e4, {tu_num("k", 7), tu_num("random_seed", 5)}, 2},
		{"5 distinct points, k 8 (empty clusters)", 1200, 4, 5, 0,
		{tu_num("k", 8), tu_str("init", "random"), tu_num("random_seed", 2), tu_num("min_frac_changed", 0)}, 4},
		{"k 1", 900, 3, 0, 0, {tu_num("k", 1)}, 1},
	};
	int			ncases = quick ? 3 : (int) (sizeof(cases) / sizeof(cases[0]));

	for (int i = 0; i < ncases; i++)
	{
		gbml_env	e0,
					e1,
					e2;
		uint8_t    *m0,
				   *m1,
				   *m2;
		size_t		l0,
					l1,
					l2;
		int			r0 = fit(&cases[i], GBML_DEVICE_CPU, 2, 0, &e0, &m0, &l0),
					r1 = fit(&cases[i], GBML_DEVICE_GPU, 2, 0, &e1, &m1, &l1),
					r2 = fit(&cases[i], GBML_DEVICE_HYBRID, i % 2 + 1, 0, &e2, &m2, &l2);

		gc_check(r0 == GBML_OK && r1 == GBML_OK && r2 == GBML_OK && l0 == l1 && l0 == l2 &&
				 memcmp(m0, m1, l0) == 0 && memcmp(m0, m2, l0) == 0,
				 "kmeans %s: CPU, GPU and hybrid (%d threads) fits give the same model bytes (%d %d %d: %s%s)",
				 cases[i].name, i % 2 + 1, r0, r1, r2, e1.error, e2.error);
		gc_check(e1.device == GBML_DEVICE_GPU && e2.device == GBML_DEVICE_HYBRID,
				 "kmeans %s: the fits ran where asked (gpu: %d, hybrid: %d)", cases[i].name, e1.device, e2.device);
		gbml_free(&e0, m0);
		gbml_free(&e1, m1);
		gbml_free(&e2, m2);
	}
	gc_check(gc_no_resources(), "kmeans fits: nothing held on the device afterwards");
}

/* The CPU's fit of c's rows in memory equals res (centroids, sizes, inertia). */
static bool
same_as_cpu(const km_case *c, const gbml_kmeans_params *p, const gbml_kmeans_result *res)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_result ref;
	bool		same;

	gbml_env_init_malloc(&env, 2);
	make_rows(&ds, &env, c, 17, false);
	same = gbml_kmeans_fit(&ds, p, &env, false, &ref) == GBML_OK && ref.k == res->k &&
		memcmp(ref.centroids, res->centroids, sizeof(double) * (size_t) res->k * res->d) == 0 &&
		memcmp(ref.sizes, res->sizes, sizeof(int64_t) * (size_t) res->k) == 0 && ref.inertia == res->inertia;
	gbml_kmeans_result_free(&ref, &env);
	gbml_dataset_free(&ds, &env);
	return same;
}

/*
 * A hybrid fit keeps the split of every iteration; the emulated GPU is
 * slow, so the CPU gains rows.  With the rows in files the CPU's share
 * also pays for its reads, so the split may go either way (the machine's
 * load decides): there the blocks that move, whichever way, must leave the
 * CPU's result unchanged.
 */
static void
hybrid_trace_checks(bool files)
{
	km_case		c = {"trace", 6000, 8, 0, 0, {tu_num("k", 9), tu_num("min_frac_changed", 0), tu_num("tol", 0),
	tu_num("max_iter", 6)}, 4};
	gbml_kmeans_params p;
	gbml_kmeans_result res;
	gbml_env	env;
	gbml_dataset ds;
	int			rc;

	gbml_env_init_malloc(&env, 2);
	env.device = GBML_DEVICE_HYBRID;
	env.gpu = gc_backend;
	make_rows(&ds, &env, &c, 17, files);
	memset(&p, 0, sizeof(p));
	p.k = 9;
	p.init.choice = GBML_KM_INIT_KMEANSPP;
	p.n_init = 1;
	p.max_iter = 6;
	rc = gbml_kmeans_fit(&ds, &p, &env, false, &res);
	gc_check(rc == GBML_OK && strcmp(res.device, "hybrid") == 0 && res.n_split == res.iterations - 1 &&
			 res.n_split >= 2 && res.split[0] >= 0.45 && res.split[0] <= 0.55,
			 "kmeans hybrid%s: the split of each iteration is reported (%d iterations, %d splits, first %.2f)",
			 files ? ", rows in files" : "", res.iterations, res.n_split, res.n_split > 0 ? res.split[0] : -1);
	if (rc == GBML_OK && gc_emulated && !files)
		gc_check(res.split[res.n_split - 1] < res.split[0] && res.blocks_moved > 0,
				 "kmeans hybrid: the slow emulated GPU loses rows to the CPU (%.2f -> %.2f, %lld blocks moved)",
				 res.split[0], res.split[res.n_split - 1], (long long) res.blocks_moved);
	if (rc == GBML_OK && files)
		gc_check(same_as_cpu(&c, &p, &res),
				 "kmeans hybrid, rows in files: the CPU's result from memory (%.2f -> %.2f, %lld blocks moved)",
				 res.split[0], res.split[res.n_split - 1], (long long) res.blocks_moved);
	if (rc == GBML_OK)
		gbml_kmeans_result_free(&res, &env);
	gbml_dataset_free(&ds, &env);
	gc_check(env.memory_used == 0 && gc_no_resources(), "kmeans hybrid%s: nothing held afterwards",
			 files ? ", rows in files" : "");
}

static void
budget_checks(void)
{
	km_case		c = {"budget", 1500, 6, 0, 0, {tu_num("k", 4)}, 1};
	gbml_env	e0,
				e1,
				e2;
	uint8_t    *m0,
			   *m1,
			   *m2;
	size_t		l0,
				l1,
				l2;
	int			r0 = fit(&c, GBML_DEVICE_CPU, 2, 0, &e0, &m0, &l0),
				r1 = fit(&c, GBML_DEVICE_GPU, 2, 200 << 10, &e1, &m1, &l1),
				r2 = fit(&c, GBML_DEVICE_HYBRID, 2, 1400000, &e2, &m2, &l2);

	gc_check(r1 == GBML_EGPUBUDGET && strstr(e1.error, "over the budget") != NULL,
			 "kmeans gpu over the GPU budget: a budget error with the figures (%d: %s)", r1, e1.error);
	gc_check(r0 == GBML_OK && r2 == GBML_OK && l0 == l2 && memcmp(m0, m2, l0) == 0,
			 "kmeans hybrid with a budget for part of the rows: the CPU's bytes (%d %d: %s)", r0, r2, e2.error);
	gbml_free(&e0, m0);
	gbml_free(&e1, m1);
	gbml_free(&e2, m2);
	gc_check(gc_no_resources(), "kmeans budget: nothing held afterwards");
}

static int
attempt_fit(gbml_env *e)
{
	km_case		c = {"faults", 600, 5, 0, 0, {tu_num("k", 4), tu_num("n_init", 2), tu_num("max_iter", 3)}, 3};
	uint8_t    *m;
	size_t		l;
	int			rc = fit(&c, GBML_DEVICE_HYBRID, 2, 0, e, &m, &l);

	gbml_free(e, m);
	return rc;
}

static int
attempt_fit_files(gbml_env *e)
{
	km_case		c = {"faults", 1500, 5, 0, 0, {tu_num("k", 4), tu_num("n_init", 2), tu_num("max_iter", 3)}, 3};
	uint8_t    *m;
	size_t		l;
	int			rc = fit_where(&c, GBML_DEVICE_HYBRID, 2, 0, true, e, &m, &l);

	gbml_free(e, m);
	return rc;
}

static void
fault_checks(bool quick)
{
	gc_inject_faults("a hybrid K-Means fit", attempt_fit, 40, quick ? 37 : 11, 400);
	gc_inject_faults("a hybrid K-Means fit from temporary files", attempt_fit_files, quick ? 10 : 40,
					 quick ? 53 : 17, 400);
}

/*
 * Rows in temporary files: the device's blocks are uploaded from chunks
 * read back, the hybrid CPU share reads the files every iteration, and
 * the bytes are those of the CPU on the same rows in memory.
 */
static void
stored_checks(bool quick)
{
	km_case		cases[] = {
		{"k-means++, n_init 2", 2500, 7, 0, 0, {tu_num("k", 6), tu_num("n_init", 2), tu_num("random_seed", 3)}, 3},
		{"random init, spherical", 2000, 9, 0, 0, {tu_num("k", 5), tu_str("init", "random"), tu_bool("spherical", true)}, 3},
		{"5 distinct points, k 8 (empty clusters)", 1200, 4, 5, 0,
		{tu_num("k", 8), tu_str("init", "random"), tu_num("random_seed", 2), tu_num("min_frac_changed", 0)}, 4},
	};
	int			ncases = quick ? 1 : (int) (sizeof(cases) / sizeof(cases[0]));

	for (int i = 0; i < ncases; i++)
	{
		gbml_env	e0,
					e1,
					e2;
		uint8_t    *m0,
				   *m1,
				   *m2;
		size_t		l0,
					l1,
					l2;
		int			r0 = fit(&cases[i], GBML_DEVICE_CPU, 2, 0, &e0, &m0, &l0),
					r1 = fit_where(&cases[i], GBML_DEVICE_GPU, 2, 0, true, &e1, &m1, &l1),
					r2 = fit_where(&cases[i], GBML_DEVICE_HYBRID, i % 2 + 1, 0, true, &e2, &m2, &l2);

		gc_check(r0 == GBML_OK && r1 == GBML_OK && r2 == GBML_OK && l0 == l1 && l0 == l2 &&
				 memcmp(m0, m1, l0) == 0 && memcmp(m0, m2, l0) == 0,
				 "kmeans %s: GPU and hybrid (%d threads) fits from temporary files give the CPU's bytes from memory (%d %d %d: %s%s)",
				 cases[i].name, i % 2 + 1, r0, r1, r2, e1.error, e2.error);
		gbml_free(&e0, m0);
		gbml_free(&e1, m1);
		gbml_free(&e2, m2);
		gc_check(e1.device == GBML_DEVICE_GPU && e2.device == GBML_DEVICE_HYBRID && e1.memory_used == 0 &&
				 e2.memory_used == 0, "kmeans %s from files: the fits ran where asked, nothing held afterwards",
				 cases[i].name);
	}
	gc_check(gc_no_resources(), "kmeans fits from files: nothing held on the device afterwards");
	hybrid_trace_checks(true);
}

static bool
cancel_at_second(void *ctx, const gbml_progress_info *info)
{
	(void) ctx;
	return strcmp(info->phase, "train") == 0 && info->iteration >= 2;
}

static void
cancel_checks(void)
{
	km_case		c = {"cancel", 1500, 6, 0, 0, {tu_num("k", 5), tu_num("min_frac_changed", 0), tu_num("tol", 0)}, 3};
	gbml_env	e;
	gbml_dataset ds;
	uint8_t    *m = NULL;
	size_t		l = 0;
	int			rc;

	gbml_env_init_malloc(&e, 2);
	e.device = GBML_DEVICE_HYBRID;
	e.gpu = gc_backend;
	e.progress_fn = cancel_at_second;
	make_rows(&ds, &e, &c, 3, false);
	rc = gbml_train_values(&e, "kmeans", c.params, c.n_params, &ds, NULL, &m, &l);
	gbml_dataset_free(&ds, &e);
	gc_check(rc == GBML_ECANCELLED && gc_no_resources() && e.memory_used == 0,
			 "kmeans hybrid cancelled at the second iteration: cancelled, nothing held (%d)", rc);
	gbml_free(&e, m);
}

/* One-hot K-Means of rows (x, city, y), city = i % 5 (4: NULL), on `device`; in temporary files when `files`. */
static int
fit_categorical(const gbml_feature_schema *s, gbml_device device, bool files, gbml_env *env, uint8_t **model,
				size_t *len)
{
	gbml_param_value p[] = {tu_num("k", 6), tu_bool("one_hot", true), tu_num("random_seed", 4)};
	gbml_dataset ds;
	gbml_rng	rng;
	int			rc;

	gbml_env_init_malloc(env, 2);
	if (device != GBML_DEVICE_CPU)
	{
		env->device = device;
		env->gpu = gc_backend;
	}
	gbml_rng_seed(&rng, 8);
	gbml_dataset_init(&ds, true);
	ds.schema = s;
	ds.chunk_rows = 700;
	if (files)
		gbml_dataset_stream_to(&ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < 3000; i++)
	{
		float		x[3] = {(float) (3 * gbml_rng_uniform(&rng)), i % 5 == 4 ? NAN : (float) (i % 5),
		(float) gbml_rng_uniform(&rng)};
		gbml_row	row = {.x = x,.n_features = 3,.label_is_null = true,.group_is_null = true,.weight_is_null = true};

		gbml_dataset_append(&ds, env, &row, false);
	}
	*model = NULL;
	rc = gbml_train_values(env, "kmeans", p, 3, &ds, NULL, model, len);
	gbml_dataset_free(&ds, env);
	return rc;
}

/* Categorical features (one_hot): the encoded rows fit to the CPU's bytes on the GPU and hybrid, in memory or files. */
static void
categorical_checks(void)
{
	static const char *const names[] = {"x", "city", "y"};
	int			ncat[] = {0, 4, 0};
	gbml_feature_schema *s = tu_schema(3, names, ncat);
	static const gbml_device devices[3] = {GBML_DEVICE_CPU, GBML_DEVICE_GPU, GBML_DEVICE_HYBRID};

	for (int files = 0; files < 2; files++)
	{
		gbml_env	env[3];
		uint8_t    *m[3];
		size_t		len[3] = {0};
		int			rc[3];

		for (int k = 0; k < 3; k++)
			rc[k] = fit_categorical(s, devices[k], files, &env[k], &m[k], &len[k]);
		gc_check(rc[0] == GBML_OK && rc[1] == GBML_OK && rc[2] == GBML_OK && len[0] == len[1] && len[0] == len[2] &&
				 memcmp(m[0], m[1], len[0]) == 0 && memcmp(m[0], m[2], len[0]) == 0 &&
				 env[1].device == GBML_DEVICE_GPU && env[2].device == GBML_DEVICE_HYBRID,
				 "kmeans with one_hot%s: CPU, GPU and hybrid fits give the same model bytes (%d %d %d: %s%s)",
				 files ? ", rows in files" : "", rc[0], rc[1], rc[2], env[1].error, env[2].error);
		for (int k = 0; k < 3; k++)
			gbml_free(&env[k], m[k]);
	}
	tu_schema_free(s);
	gc_check(gc_no_resources(), "kmeans one_hot fits: nothing held on the device afterwards");
}

void
gc_kmeans_training_checks(bool quick)
{
	if (gc_backend->kmeans == NULL)
	{
		gc_check(false, "the backend has K-Means kernels");
		return;
	}
	equivalence_checks(quick);
	categorical_checks();
	hybrid_trace_checks(false);
	stored_checks(quick);
	budget_checks();
	fault_checks(quick);
	cancel_checks();
}
