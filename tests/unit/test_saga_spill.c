/*
 * test_saga_spill.c — SAGA from rows in temporary files (issue 12): a
 * dataset streamed to the file store (chunk_store_file.h, plain files in
 * the unit env) trains to the model bytes of the same rows in memory,
 * appended in another order and cut into chunks of another size, for every
 * loss and penalty, with weights, an eval split, standardization and 1 or
 * 2 threads; a read that fails mid-training is a clear error that leaks
 * nothing; a cancel lands inside an epoch; and the epoch plan and its
 * slice reader (saga_plan.h, saga_slices.h) visit every row once, with
 * its features, wherever the rows live.
 */
#include "harness.h"
#include "algorithm.h"
#include "chunk_store_file.h"
#include "rng.h"
#include "saga_plan.h"
#include "saga_slices.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#define SPILL_CHUNK_ROWS 700

/* Rows kept apart from any dataset, so they can be appended in any order. */
typedef struct spill_rows
{
	int64_t		n;
	int			d;
	float	   *x;
	float	   *label;
	float	   *weight;
} spill_rows;

/* A linear signal in the first two features plus noise; labels 0/1 (logistic) or real. */
static void
rows_make(spill_rows *t, int64_t n, int d, bool logistic, uint64_t seed)
{
	gbml_rng	rng;

	gbml_rng_seed(&rng, seed);
	t->n = n;
	t->d = d;
	t->x = malloc(sizeof(float) * (size_t) (n * d));
	t->label = malloc(sizeof(float) * (size_t) n);
	t->weight = malloc(sizeof(float) * (size_t) n);
	for (int64_t i = 0; i < n; i++)
	{
		double		z = 0.2;

		for (int j = 0; j < d; j++)
			t->x[i * d + j] = (float) ((2 * gbml_rng_uniform(&rng) - 1) * (1 + j) + (j == 1 ? 1.5 : 0));
		z += 1.2 * t->x[i * d] - 0.6 * (d > 1 ? t->x[i * d + 1] - 1.5 : 0);
		t->label[i] = logistic ? (gbml_rng_uniform(&rng) < 1 / (1 + exp(-z)) ? 1.0f : 0.0f)
			: (float) (z + 0.3 * (gbml_rng_uniform(&rng) - 0.5));
		t->weight[i] = (float) (0.25 + 1.5 * gbml_rng_uniform(&rng));
	}
}

static void
rows_free(spill_rows *t)
{
	free(t->x);
	free(t->label);
	free(t->weight);
}

/*
 * Where build puts the rows: memory, files in arrival order, files grouped
 * by hash (put_hashed) in runs of 7 rows (every group writes many runs), or
 * in runs of 64 (about one a group: the reorder in place, below).
 */
enum
{
	IN_MEMORY, IN_FILES, IN_FILES_GROUPED, IN_FILES_GROUPED_LONG_RUNS
};

/*
 * The rows in a dataset of SPILL_CHUNK_ROWS-row chunks: in memory in their
 * order, or streamed to files from the first chunk in a shuffled order
 * (grouped by hash: in runs of 7 rows, so every group writes many runs).
 */
static void
build(gbml_dataset *ds, gbml_env *env, const spill_rows *t, bool weights, int stored, int64_t chunk_rows)
{
	int64_t    *perm = malloc(sizeof(int64_t) * (size_t) t->n);
	gbml_rng	rng;

	for (int64_t i = 0; i < t->n; i++)
		perm[i] = i;
	gbml_rng_seed(&rng, 99);
	if (stored)
		gbml_rng_shuffle_u64(&rng, (uint64_t *) perm, (uint64_t) t->n);
	gbml_dataset_init(ds, false);
	ds->chunk_rows = chunk_rows;
	if (stored)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	ds->spill_by_hash = stored >= IN_FILES_GROUPED;
	gbml_chunk_store_file_test_group_stage(stored >= IN_FILES_GROUPED
										   ? (stored == IN_FILES_GROUPED ? 7 : 64) * sizeof(float) * (size_t) t->d : 0);
	for (int64_t k = 0; k < t->n; k++)
	{
		int64_t		i = perm[k];
		gbml_row	row = {.x = t->x + i * t->d,.n_features = t->d,.label = t->label[i],.group_is_null = true,
		.weight = t->weight[i],.weight_is_null = !weights};

		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	gbml_chunk_store_file_test_group_stage(0);
	free(perm);
}

/* One training case: data, params, threads. */
typedef struct spill_case
{
	const char *name;
	bool		logistic;
	double		alpha;
	double		l1_ratio;
	bool		weights;
	bool		standardize;
	bool		intercept;
	double		eval_fraction;
	int			max_iter;		/* with tol 0: far from the optimum, so the order shows in the bytes */
	int64_t		n;
	int			d;				/* 512: 2 KB rows, an epoch of three groups of 16 slices */
} spill_case;

static const spill_case spill_cases[] = {
	{"logistic, L2", true, 1e-3, 0, false, false, true, 0, 6, 3000, 6},
	{"logistic, L1, weights, standardized", true, 2e-3, 1, true, true, true, 0, 6, 3000, 6},
	{"logistic, elastic net, eval split", true, 1e-3, 0.5, false, false, true, 0.2, 6, 3000, 6},
	{"squared, L2, weights, no intercept", false, 1e-2, 0, true, false, false, 0, 6, 3000, 6},
	{"squared, elastic net, weights, eval split, standardized", false, 1e-2, 0.3, true, true, true, 0.25, 6, 3000, 6},
	{"squared, lasso, to convergence", false, 5e-2, 1, false, true, true, 0, 400, 3000, 6},
	{"wide rows: logistic, elastic net, weights, eval split", true, 1e-3, 0.5, true, false, true, 0.2, 4, 12000, 512},
	{"wide rows: squared, L2, standardized", false, 1e-2, 0, false, true, true, 0, 4, 12000, 511},
};

/*
 * Trains c on t (stored or not, in chunks of chunk_rows) with `threads`;
 * returns the model (env's) or NULL.  Runs of 64 rows are reordered in
 * windows of at most 1,000 rows; *in_place (or NULL): the store's reorders
 * done in place.
 */
static uint8_t *
train_case(const spill_case *c, const spill_rows *t, int stored, int64_t chunk_rows, int threads, size_t *len,
		   gbml_env *env, int *in_place)
{
	gbml_dataset ds;
	uint8_t    *model = NULL;
	gbml_param_value p[] = {
		tu_str("loss", c->logistic ? "logistic" : "squared"),
		tu_num("alpha", c->alpha),
		tu_num("l1_ratio", c->l1_ratio),
		tu_bool("standardize", c->standardize),
		tu_bool("fit_intercept", c->intercept),
		tu_num("eval_fraction", c->eval_fraction),
		tu_num("max_iter", c->max_iter),
		tu_num("tol", c->max_iter > 100 ? 1e-9 : 0),
		tu_num("random_seed", 5),
	};

	gbml_env_init_malloc(env, threads);
	build(&ds, env, t, c->weights, stored, chunk_rows);
	CHECK(!stored || (ds.store != NULL && strcmp(ds.store->residence, "file") == 0));
	/* grouped rows: only the main thread reads them until the canonical reorder */
	CHECK(stored < IN_FILES_GROUPED || !ds.store->read_any_thread);
	/* the window shares the budget with the reorder's 1 MB span and 32 bytes a row of places */
	if (stored == IN_FILES_GROUPED_LONG_RUNS)
		gbml_chunk_store_file_set_permute_budget(ds.store, ((size_t) 1 << 20) +
												 1000 * ((size_t) t->d * sizeof(float) + 32));
	if (gbml_train_values(env, "saga", p, (int) (sizeof(p) / sizeof(p[0])), &ds, NULL, &model, len) != GBML_OK)
		fprintf(stderr, "  %s (%s, %d threads): %s\n", c->name, stored ? "files" : "memory", threads, env->error);
	if (in_place)
	{
		gbml_spill_stats st;

		gbml_chunk_store_file_stats(ds.store, &st);
		*in_place = st.reorders_in_place;
	}
	gbml_dataset_free(&ds, env);
	return model;
}

/*
 * Every case: in memory with one thread, in files in arrival order with
 * one, grouped by hash with two, grouped in smaller chunks (as a smaller
 * memory budget would), and grouped in long runs, reordered in place in
 * several windows (the passes then read the rows in pieces, row_pieces.h);
 * the same model bytes (META included: the timings go to the report).
 */
TEST(saga_spill_same_bytes_as_memory)
{
	for (size_t k = 0; k < sizeof(spill_cases) / sizeof(spill_cases[0]); k++)
	{
		const spill_case *c = &spill_cases[k];
		spill_rows	t;
		gbml_env	e[5];
		uint8_t    *m[5];
		size_t		len[5] = {0, 0, 0, 0, 0};
		int			in_place = 0;

		rows_make(&t, c->n, c->d, c->logistic, 17 + k);
		m[0] = train_case(c, &t, false, SPILL_CHUNK_ROWS, 1, &len[0], &e[0], NULL);
		m[1] = train_case(c, &t, true, SPILL_CHUNK_ROWS, 1, &len[1], &e[1], NULL);
		m[2] = train_case(c, &t, IN_FILES_GROUPED, SPILL_CHUNK_ROWS, 2, &len[2], &e[2], NULL);
		m[3] = train_case(c, &t, IN_FILES_GROUPED, 300, 2, &len[3], &e[3], NULL);
		m[4] = train_case(c, &t, IN_FILES_GROUPED_LONG_RUNS, 300, 2, &len[4], &e[4], &in_place);
		CHECK(in_place >= 1);
		for (int i = 1; i < 5; i++)
		{
			CHECK(m[0] && m[i] && len[0] == len[i] && memcmp(m[0], m[i], len[0]) == 0);
			if (!(m[0] && m[i] && len[0] == len[i] && memcmp(m[0], m[i], len[0]) == 0))
				fprintf(stderr, "  case %s, training %d: the model bytes differ from memory's\n", c->name, i);
		}
		if (c->max_iter > 100)
			CHECK(m[0] && tu_meta_number(&e[0], m[0], len[0], "converged") == 1);
		for (int i = 0; i < 5; i++)
		{
			gbml_free(&e[i], m[i]);
			CHECK(e[i].memory_used == 0);
		}
		rows_free(&t);
	}
}

/*
 * Read hooks over the file store's (whole chunks for the passes, row
 * ranges for the epochs' slices): count the reads (from any thread: the
 * readers read ahead on a helper), and fail every read after `fail_after`
 * with their own message.
 */
static struct
{
	int			(*read_chunk) (gbml_chunk_store *s, int index, float *out);
	int			(*read_rows) (gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out);
	const char *(*error) (gbml_chunk_store *s);
	int			(*error_code) (gbml_chunk_store *s);
	int			reads;
	int			fail_after;
	int			failed;
} hook;

static bool
hooked_fails(void)
{
	if (__atomic_add_fetch(&hook.reads, 1, __ATOMIC_SEQ_CST) <= hook.fail_after)
		return false;
	__atomic_store_n(&hook.failed, 1, __ATOMIC_SEQ_CST);
	return true;
}

static int
hooked_read(gbml_chunk_store *s, int index, float *out)
{
	return hooked_fails() ? 1 : hook.read_chunk(s, index, out);
}

static int
hooked_rows(gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out)
{
	return hooked_fails() ? 1 : hook.read_rows(s, index, first, n, out);
}

static const char *
hooked_error(gbml_chunk_store *s)
{
	return __atomic_load_n(&hook.failed, __ATOMIC_SEQ_CST) ? "could not read from a temporary file: Input/output error"
		: hook.error(s);
}

static int
hooked_code(gbml_chunk_store *s)
{
	return __atomic_load_n(&hook.failed, __ATOMIC_SEQ_CST) ? GBML_EIO : hook.error_code(s);
}

/* A stored training whose store's reads go through the hook; returns the driver's result. */
static int
train_hooked(const spill_rows *t, int fail_after, gbml_env *env, uint8_t **model, size_t *len)
{
	gbml_dataset ds;
	gbml_param_value p[] = {tu_num("max_iter", 20), tu_num("tol", 0), tu_bool("standardize", true)};
	int			rc;

	gbml_env_init_malloc(env, 2);
	build(&ds, env, t, false, true, SPILL_CHUNK_ROWS);
	CHECK(gbml_dataset_canonicalize(&ds, env) == GBML_OK);
	hook.read_chunk = ds.store->read_chunk;
	hook.read_rows = ds.store->read_rows;
	hook.error = ds.store->error;
	hook.error_code = ds.store->error_code;
	hook.reads = 0;
	hook.failed = 0;
	hook.fail_after = fail_after;
	ds.store->read_chunk = hooked_read;
	ds.store->read_rows = hooked_rows;
	ds.store->error = hooked_error;
	ds.store->error_code = hooked_code;
	rc = gbml_train_values(env, "saga", p, 3, &ds, NULL, model, len);
	gbml_dataset_free(&ds, env);
	return rc;
}

TEST(saga_spill_read_failure_is_a_clear_error_and_leaks_nothing)
{
	spill_rows	t;
	gbml_env	env;
	uint8_t    *model = NULL;
	size_t		len = 0;
	int			total;

	rows_make(&t, 3000, 5, true, 3);
	/*
	 * A clean run counts the reads: 5 whole chunks a pass (3 passes of
	 * statistics, then an objective after each of the 20 epochs), and each
	 * epoch's 12 or 13 slices.
	 */
	CHECK(train_hooked(&t, 1 << 30, &env, &model, &len) == GBML_OK && model != NULL);
	total = hook.reads;
	CHECK(total > 15 + 20 * (5 + 12));
	gbml_free(&env, model);
	CHECK(env.memory_used == 0);
	/* half way: in an epoch's slices or an objective pass; 8 reads before the end: the last epoch's slices */
	for (int k = 0; k < 2; k++)
	{
		model = NULL;
		CHECK(train_hooked(&t, k == 0 ? total / 2 : total - 8, &env, &model, &len) == GBML_EIO);
		CHECK(model == NULL);
		CHECK(strstr(env.error, "reading chunk") != NULL && strstr(env.error, "temporary files") != NULL &&
			  strstr(env.error, "Input/output error") != NULL);
		if (strstr(env.error, "reading chunk") == NULL)
			fprintf(stderr, "  error: %s\n", env.error);
		CHECK(env.memory_used == 0);
	}
	/* the very first read: the feature statistics */
	CHECK(train_hooked(&t, 0, &env, &model, &len) == GBML_EIO && model == NULL);
	CHECK(env.memory_used == 0);
	rows_free(&t);
}

/* 100,000 stored rows of 64 features (four groups): the first cancel check inside epoch 1, after ~64k rows, stops it. */
TEST(saga_spill_cancel_inside_an_epoch)
{
	spill_rows	t;
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	tu_cancel	cancel = {.at_call = 1};
	gbml_param_value p[] = {tu_num("max_iter", 5), tu_num("tol", 0)};

	rows_make(&t, 100000, 64, true, 4);
	gbml_env_init_malloc(&env, 1);
	build(&ds, &env, &t, false, true, 8192);
	env.progress_fn = tu_cancel_progress;
	env.progress_ctx = &cancel;
	CHECK(gbml_train_values(&env, "saga", p, 2, &ds, NULL, &model, &len) == GBML_ECANCELLED);
	CHECK(cancel.calls == 1 && model == NULL);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	rows_free(&t);
}

/* Group pieces as canonical positions, for the test's checks. */
typedef struct canon_map
{
	const gbml_saga_plan *pl;
	int64_t    *g;				/* per row of the group: its canonical position */
} canon_map;

static void
canon_piece(void *arg, int c, int64_t r, int64_t i, int64_t n)
{
	canon_map  *m = arg;

	for (int64_t k = 0; k < n; k++)
		m->g[i + k] = m->pl->row_start[c] + r + k;
}

/*
 * The plan and its reader, on rows wide enough for several groups: each
 * epoch visits every row once; a group's slices are consecutive canonical
 * rows; the reader hands a group's rows from files as they are in memory;
 * the plan is the same for any chunk layout, residence and thread count.
 */
TEST(saga_spill_plan_and_groups)
{
	spill_rows	t;
	gbml_env	env;
	gbml_dataset ds[3];
	gbml_saga_plan pl[3];
	gbml_saga_slices *sr[3];
	gbml_rng	rng[3];
	const int64_t chunk_rows[3] = {1000, 1000, 300};
	const bool	stored[3] = {false, true, false};
	const int	d = 512;
	canon_map	m;
	bool		ok = true;

	rows_make(&t, 12000, d, true, 8);
	gbml_env_init_malloc(&env, 2);
	for (int i = 0; i < 3; i++)
	{
		build(&ds[i], &env, &t, false, stored[i], chunk_rows[i]);
		CHECK(gbml_dataset_canonicalize(&ds[i], &env) == GBML_OK);
		CHECK(gbml_saga_plan_init(&pl[i], &ds[i], &env) == GBML_OK);
		sr[i] = gbml_saga_slices_open(&ds[i], &env, &pl[i]);
		CHECK(sr[i] != NULL);
		gbml_rng_seed(&rng[i], 1);
	}
	CHECK(ds[1].store != NULL && ds[1].chunks[0]->x == NULL && ds[2].n_chunks > ds[0].n_chunks);
	m.pl = &pl[0];
	m.g = malloc(sizeof(int64_t) * (size_t) pl[0].group_rows);
	for (int epoch = 0; epoch < 3 && ok; epoch++)
	{
		char	   *seen = calloc((size_t) t.n, 1);
		int64_t		total = 0;

		for (int i = 0; i < 3; i++)
		{
			gbml_saga_plan_epoch(&pl[i], &rng[i], i + 1);
			gbml_saga_slices_start(sr[i]);
		}
		ok = pl[0].n_groups >= 3 && pl[0].n_groups == pl[1].n_groups && pl[0].n_groups == pl[2].n_groups &&
			memcmp(pl[0].order, pl[1].order, sizeof(uint64_t) * (size_t) pl[0].n_slices) == 0 &&
			memcmp(pl[0].order, pl[2].order, sizeof(uint64_t) * (size_t) pl[0].n_slices) == 0 &&
			memcmp(pl[0].perm, pl[1].perm, sizeof(uint32_t) * (size_t) t.n) == 0 &&
			memcmp(pl[0].perm, pl[2].perm, sizeof(uint32_t) * (size_t) t.n) == 0;
		for (int64_t j = 0; ok && j < pl[0].n_groups; j++)
		{
			const float *x[3];
			int64_t		k[3];

			for (int i = 0; i < 3; i++)
				ok = ok && gbml_saga_slices_next(sr[i], &x[i], &k[i]) == 1 && k[i] == j;
			ok = ok && x[0] == NULL && x[1] != NULL && x[2] == NULL;
			if (!ok)
				break;
			gbml_saga_plan_pieces(&pl[0], j, canon_piece, &m);
			for (int64_t p = pl[0].group_pos[j]; ok && p < pl[0].group_pos[j + 1]; p++)
			{
				uint32_t	i = pl[0].perm[p];
				int64_t		g = m.g[i];
				int			c = gbml_run_of(pl[0].row_start, pl[0].n_chunks, g);

				/* group row i from the files is canonical row g of the host chunks */
				ok = !seen[g] && i < pl[0].group_pos[j + 1] - pl[0].group_pos[j] &&
					memcmp(x[1] + (size_t) i * d, ds[0].chunks[c]->x + (g - pl[0].row_start[c]) * d,
						   sizeof(float) * d) == 0;
				seen[g] = 1;
				total++;
			}
		}
		for (int i = 0; i < 3; i++)
		{
			const float *x;
			int64_t		k;

			ok = ok && gbml_saga_slices_next(sr[i], &x, &k) == 0;
		}
		CHECK(ok && total == t.n);
		free(seen);
	}
	CHECK(ok);
	free(m.g);
	for (int i = 0; i < 3; i++)
	{
		gbml_saga_slices_close(sr[i]);
		gbml_saga_plan_free(&pl[i], &env);
		gbml_dataset_free(&ds[i], &env);
	}
	CHECK(env.memory_used == 0);
	rows_free(&t);
}
