/*
 * test_boost_spill.c — boosting from rows in temporary files (issue 12):
 * the same rows appended in another order to a dataset streamed to files
 * (small chunks, so many of them) train to exactly the model bytes of the
 * rows in memory, for RMSE, Logloss, YetiRank, PairLogit and MultiClass, with missing
 * values, weights, subsampling, an eval split or an eval set of its own,
 * and early stopping, on 1 and 2 threads; the fit keeps only bins (the
 * stores are released once binned, and a wide set peaks lower than in
 * memory); and a failed read or a cancel while binning is an error that
 * leaves nothing behind.  Under a budget too small for the bins they go to
 * a file of their own and the trees walk them from it: the same bytes
 * (RMSE with subsample, YetiRank, Logloss with Newton steps, an eval set
 * with the best model), and a cancel inside a tree.
 */
#include "harness.h"
#include "boost_bins_walk.h"
#include "chunk_store_file.h"
#include "rng.h"
#include "test_util.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define SPILL_CHUNK_ROWS 700

typedef enum
{
	SPILL_REGRESSION,
	SPILL_BINARY,
	SPILL_RANKING,
	SPILL_MULTICLASS			/* four classes, 0..3, from the regression target */
} spill_kind;

/* Rows kept apart from any dataset, to be appended in any order. */
typedef struct spill_rows
{
	int64_t		n;
	int			d;
	float	   *x;				/* n * d */
	gbml_row   *row;			/* n, pointing into x */
} spill_rows;

static void
make_rows(spill_rows *s, spill_kind kind, int64_t n, int d, uint64_t seed, double missing, bool weights)
{
	gbml_rng	rng;

	gbml_rng_seed(&rng, seed);
	s->n = n;
	s->d = d;
	s->x = malloc(sizeof(float) * (size_t) (n * d));
	s->row = calloc((size_t) n, sizeof(gbml_row));
	for (int64_t i = 0; i < n; i++)
	{
		float	   *x = s->x + i * d;
		gbml_row   *row = &s->row[i];
		double		y;

		for (int j = 0; j < d; j++)
		{
			x[j] = (float) gbml_rng_uniform(&rng);
			if (j >= 2 && gbml_rng_uniform(&rng) < missing)
				x[j] = NAN;
		}
		y = 3.0 * (x[0] > 0.5f) + 2.0 * x[1] * x[1] + 0.5 * (gbml_rng_uniform(&rng) - 0.5);
		row->x = x;
		row->n_features = d;
		row->label = kind == SPILL_BINARY ? (float) (y > 1.8) : kind == SPILL_RANKING ? (float) floor(y) :
			kind == SPILL_MULTICLASS ? (float) fmax(0, fmin(3, floor(y * 0.8))) : (float) y;
		/* query ids in random order: the group sort scatters every chunk's rows */
		row->group = (int64_t) (gbml_rng_next(&rng) % (uint64_t) (n / 12 + 1));
		row->group_is_null = kind != SPILL_RANKING;
		row->weight = (float) (0.25 + 1.5 * gbml_rng_uniform(&rng));
		row->weight_is_null = !weights;
	}
}

static void
free_rows(spill_rows *s)
{
	free(s->x);
	free(s->row);
}

/*
 * The rows as a dataset: in host memory in their order (in chunks of
 * SPILL_CHUNK_ROWS rows when small_chunks, else the default), or streamed
 * to files (SPILL_CHUNK_ROWS-row chunks) in an order shuffled by seed.
 */
static void
load_rows_in(gbml_dataset *ds, gbml_env *env, const spill_rows *s, bool stored, uint64_t seed, bool small_chunks)
{
	int64_t    *order = malloc(sizeof(int64_t) * (size_t) s->n);
	gbml_rng	rng;

	for (int64_t i = 0; i < s->n; i++)
		order[i] = i;
	gbml_rng_seed(&rng, seed);
	for (int64_t i = s->n - 1; stored && i > 0; i--)
	{
		int64_t		j = (int64_t) (gbml_rng_next(&rng) % (uint64_t) (i + 1)),
					t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	gbml_dataset_init(ds, true);
	if (stored || small_chunks)
		ds->chunk_rows = SPILL_CHUNK_ROWS;
	if (stored)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < s->n; i++)
		CHECK(gbml_dataset_append(ds, env, &s->row[order[i]], true) == GBML_OK);
	CHECK(!stored || (ds->store != NULL && strcmp(ds->store->residence, "file") == 0));
	free(order);
}

static void
load_rows(gbml_dataset *ds, gbml_env *env, const spill_rows *s, bool stored, uint64_t seed)
{
	load_rows_in(ds, env, s, stored, seed, false);
}

typedef struct spill_case
{
	const char *name;
	spill_kind	kind;
	int64_t		n;
	int			d;
	double		missing;
	bool		weights;
	bool		eval_set;		/* an eval set of its own (stored like the training rows) */
	gbml_param_value v[8];
	int			nv;
} spill_case;

/*
 * Trains the case's rows (and eval rows), in memory or stored, on `threads`;
 * the model or NULL, and what the trainer's own files (stored bins) took.
 */
static uint8_t *
fit_counting(const spill_case *c, const spill_rows *rows, const spill_rows *eval_rows, bool stored, int threads,
			 size_t *len, int64_t *bins_written, int64_t *bins_read)
{
	gbml_env	env;
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL;
	int			rc;

	gbml_env_init_malloc(&env, threads);
	load_rows(&ds, &env, rows, stored, 31 + (uint64_t) threads);
	if (c->eval_set)
		load_rows(&ev, &env, eval_rows, stored, 77);
	rc = gbml_train_values(&env, "boost", c->v, c->nv, &ds, c->eval_set ? &ev : NULL, &model, len);
	if (rc != GBML_OK)
		printf("# %s (%s, %d threads): %s\n", c->name, stored ? "stored" : "memory", threads, env.error);
	CHECK(rc == GBML_OK);
	if (stored)
	{
		gbml_spill_stats st;

		/* binned: the float rows went with their files */
		CHECK(gbml_chunk_store_file_stats(ds.store, &st) && st.chunks == 0 && st.bytes_read > 0);
		if (c->eval_set)
			CHECK(gbml_chunk_store_file_stats(ev.store, &st) && st.chunks == 0);
	}
	*bins_written = env.trainer_temp_written;
	*bins_read = env.trainer_temp_read;
	gbml_dataset_free(&ds, &env);
	if (c->eval_set)
		gbml_dataset_free(&ev, &env);
	if (model)
	{
		/* the model's bytes outlive the env's accounting: a plain copy */
		uint8_t    *copy = malloc(*len);

		memcpy(copy, model, *len);
		gbml_free(&env, model);
		model = copy;
	}
	CHECK(env.memory_used == 0);
	return model;
}

static uint8_t *
fit(const spill_case *c, const spill_rows *rows, const spill_rows *eval_rows, bool stored, int threads,
	size_t *len)
{
	int64_t		written,
				read;

	return fit_counting(c, rows, eval_rows, stored, threads, len, &written, &read);
}

/* The case in memory on 1 thread, and stored on 1 and 2 threads: the same bytes. */
static void
check_case(const spill_case *c)
{
	spill_rows	rows,
				eval_rows;
	uint8_t    *m[3];
	size_t		len[3];
	bool		same;

	make_rows(&rows, c->kind, c->n, c->d, 5, c->missing, c->weights);
	if (c->eval_set)
		make_rows(&eval_rows, c->kind, c->n / 3, c->d, 6, c->missing, c->weights);
	m[0] = fit(c, &rows, &eval_rows, false, 1, &len[0]);
	m[1] = fit(c, &rows, &eval_rows, true, 1, &len[1]);
	m[2] = fit(c, &rows, &eval_rows, true, 2, &len[2]);
	same = m[0] && m[1] && m[2] && len[0] == len[1] && len[0] == len[2] &&
		memcmp(m[0], m[1], len[0]) == 0 && memcmp(m[0], m[2], len[0]) == 0;
	if (!same)
		printf("# %s: the stored rows train other bytes\n", c->name);
	CHECK(same);
	for (int i = 0; i < 3; i++)
		free(m[i]);
	free_rows(&rows);
	if (c->eval_set)
		free_rows(&eval_rows);
}

#define NUM(k, x) {.key = k,.kind = GBML_VALUE_NUMBER,.number = x}
#define STR(k, x) {.key = k,.kind = GBML_VALUE_STRING,.string = x}

TEST(boost_spill_rmse_same_bytes_as_memory)
{
	/* 100 borders: some features binned by search, not by counting; three blocks of bins */
	spill_case	c = {"RMSE", SPILL_REGRESSION, 18000, 5, 0.1, true, false,
		{NUM("iterations", 12), NUM("depth", 5), NUM("subsample", 0.7), STR("loss", "RMSE"),
		NUM("random_seed", 3), NUM("border_count", 100)}, 6};

	check_case(&c);
}

/*
 * The border sample of shuffled rows in files is fetched in the order the
 * file keeps them: about one read of the file for the sample and one for
 * the bins.  Fetched in canonical order, each 1 MB piece of the sample read
 * spans over the whole file (here 8 pieces: about 8 reads of it).
 */
TEST(boost_spill_border_sample_reads_the_file_about_once)
{
	spill_rows	rows;
	gbml_env	env;
	gbml_dataset ds;
	gbml_param_value v[] = {NUM("iterations", 1), NUM("depth", 3)};
	gbml_spill_stats st;
	uint8_t    *model = NULL;
	size_t		len;

	make_rows(&rows, SPILL_REGRESSION, 20000, 100, 8, 0, false);
	gbml_env_init_malloc(&env, 2);
	load_rows(&ds, &env, &rows, true, 12);
	CHECK(gbml_train_values(&env, "boost", v, 2, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_chunk_store_file_stats(ds.store, &st));
	if (!(st.bytes_read <= 3 * st.bytes_written))
		printf("# %.1f MB read for %.1f MB written\n", (double) st.bytes_read / 1048576.0,
			   (double) st.bytes_written / 1048576.0);
	CHECK(st.bytes_written >= (uint64_t) 20000 * 100 * sizeof(float) && st.bytes_read <= 3 * st.bytes_written);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	free_rows(&rows);
	CHECK(env.memory_used == 0);
}

TEST(boost_spill_logloss_eval_split_early_stopping)
{
	spill_case	c = {"Logloss", SPILL_BINARY, 5000, 6, 0.05, false, false,
		{NUM("iterations", 200), NUM("depth", 4), STR("loss", "Logloss"), NUM("learning_rate", 0.6),
		NUM("eval_fraction", 0.2), NUM("early_stopping_rounds", 4)}, 6};

	check_case(&c);
}

/*
 * Missing values in a handful of rows, half the rows held out: some
 * feature's only missing values are likely in held-out rows, and the rows
 * kept in files (reached through a map, not rewritten) must then say that
 * feature has none, as the rows kept in memory do.
 */
TEST(boost_spill_eval_split_keeps_the_kept_rows_missing_values)
{
	spill_case	c = {"sparse NaN", SPILL_REGRESSION, 3000, 8, 0.0004, false, false,
		{NUM("iterations", 8), NUM("depth", 3), NUM("eval_fraction", 0.5), NUM("border_count", 16)}, 4};

	check_case(&c);
}

TEST(boost_spill_yetirank_same_bytes_as_memory)
{
	/* two blocks of bins, every chunk's rows scattered over both */
	spill_case	c = {"YetiRank", SPILL_RANKING, 11000, 5, 0.1, false, false,
		{NUM("iterations", 10), NUM("depth", 4), STR("loss", "YetiRank"), NUM("subsample", 0.8),
		NUM("eval_fraction", 0.2)}, 5};

	check_case(&c);
}

TEST(boost_spill_rmse_with_group_ids_subsample_same_bytes_as_memory)
{
	/* a pointwise loss with group ids: the rows drawn by their index in the group-sorted training order */
	spill_case	c = {"RMSE with group ids", SPILL_RANKING, 11000, 5, 0.1, false, false,
		{NUM("iterations", 10), NUM("depth", 4), STR("loss", "RMSE"), NUM("subsample", 0.7),
		NUM("border_sample_size", 5000)}, 5};

	check_case(&c);
}

TEST(boost_spill_pairlogit_weights_early_stopping)
{
	spill_case	c = {"PairLogit", SPILL_RANKING, 4000, 5, 0.0, true, false,
		{NUM("iterations", 60), NUM("depth", 3), STR("loss", "PairLogit"), NUM("learning_rate", 0.5),
		NUM("eval_fraction", 0.25), NUM("early_stopping_rounds", 3)}, 6};

	check_case(&c);
}

TEST(boost_spill_eval_set_of_its_own)
{
	spill_case	c = {"RMSE, eval set", SPILL_REGRESSION, 3000, 6, 0.1, true, true,
		{NUM("iterations", 150), NUM("depth", 6), NUM("learning_rate", 0.5), NUM("l2_leaf_reg", 0),
		NUM("early_stopping_rounds", 6)}, 5};

	check_case(&c);
}

/*
 * The case trained from rows in files with its bins in a temporary file
 * too (as under a budget too small for them; in windows of two blocks,
 * walked a block a run): the bytes of the rows in memory, on 1 and 2
 * threads, and the bins' file was written and read.
 */
static void
check_bins_in_files(const spill_case *c)
{
	spill_rows	rows,
				eval_rows;
	uint8_t    *ref;
	size_t		ref_len,
				block_bytes = (size_t) 8192 * (size_t) c->d,
				run_was = gbml_boost_bins_test_sizes(block_bytes);

	gbml_boost_bins_test_window = 2 * block_bytes;
	make_rows(&rows, c->kind, c->n, c->d, 5, c->missing, c->weights);
	if (c->eval_set)
		make_rows(&eval_rows, c->kind, c->n / 3, c->d, 6, c->missing, c->weights);
	ref = fit(c, &rows, &eval_rows, false, 1, &ref_len);
	for (int threads = 1; threads <= 2; threads++)
	{
		size_t		len = 0;
		int64_t		written,
					read;
		uint8_t    *m = fit_counting(c, &rows, &eval_rows, true, threads, &len, &written, &read);

		/* the bins were written once and read a pass at a time */
		CHECK(written == (int64_t) c->n * c->d && read >= 2 * written);
		if (ref == NULL || m == NULL || len != ref_len || memcmp(m, ref, len) != 0)
		{
			printf("# %s: bins in files train other bytes (%d threads)\n", c->name, threads);
			CHECK(false);
		}
		free(m);
	}
	gbml_boost_bins_test_window = 0;
	gbml_boost_bins_test_sizes(run_was);
	free(ref);
	free_rows(&rows);
	if (c->eval_set)
		free_rows(&eval_rows);
}

TEST(boost_spill_bins_in_files_rmse_subsample)
{
	/* 5 blocks of bins, 3 windows, 5 runs a pass */
	spill_case	c = {"RMSE", SPILL_REGRESSION, 40000, 5, 0.1, true, false,
		{NUM("iterations", 8), NUM("depth", 5), NUM("subsample", 0.7), STR("loss", "RMSE"),
		NUM("random_seed", 3)}, 5};

	check_bins_in_files(&c);
}

TEST(boost_spill_bins_in_files_yetirank_and_newton_steps)
{
	spill_case	r = {"YetiRank", SPILL_RANKING, 30000, 5, 0.1, false, false,
		{NUM("iterations", 6), NUM("depth", 4), STR("loss", "YetiRank")}, 3};
	spill_case	l = {"Logloss, 3 Newton steps", SPILL_BINARY, 26000, 6, 0.05, true, false,
		{NUM("iterations", 6), NUM("depth", 4), STR("loss", "Logloss"), NUM("leaf_estimation_iterations", 3)}, 4};

	check_bins_in_files(&r);
	check_bins_in_files(&l);
}

TEST(boost_spill_depthwise_same_bytes_as_memory)
{
	/* a split per node: rows from files, and their bins in a file too, train the bytes of memory */
	spill_case	y = {"YetiRank, Depthwise", SPILL_RANKING, 30000, 5, 0.1, false, false,
		{NUM("iterations", 6), NUM("depth", 4), STR("loss", "YetiRank"), STR("grow_policy", "Depthwise")}, 4};
	spill_case	e = {"RMSE, Depthwise, eval set", SPILL_REGRESSION, 24000, 6, 0.1, true, true,
		{NUM("iterations", 40), NUM("depth", 4), NUM("learning_rate", 0.9), NUM("l2_leaf_reg", 0),
		NUM("early_stopping_rounds", 5), STR("grow_policy", "Depthwise"), NUM("subsample", 0.8)}, 7};

	check_case(&y);
	check_bins_in_files(&y);
	check_bins_in_files(&e);
}

TEST(boost_spill_multiclass_same_bytes_as_memory)
{
	/* a tree a class an iteration, the best iterations kept: rows and bins from files train memory's bytes */
	spill_case	c = {"MultiClass, eval set", SPILL_MULTICLASS, 20000, 6, 0.1, true, true,
		{NUM("iterations", 30), NUM("depth", 4), STR("loss", "MultiClass"), NUM("learning_rate", 0.8),
		NUM("early_stopping_rounds", 3), NUM("subsample", 0.8), NUM("random_strength", 1)}, 7};

	check_case(&c);
	check_bins_in_files(&c);
}

TEST(boost_spill_bins_in_files_eval_set_best_model)
{
	/* the trees past the best iteration dropped: the predictions rebuilt from the stored bins */
	spill_case	c = {"RMSE, eval set", SPILL_REGRESSION, 24000, 6, 0.1, true, true,
		{NUM("iterations", 60), NUM("depth", 4), NUM("learning_rate", 0.9), NUM("l2_leaf_reg", 0),
		NUM("early_stopping_rounds", 5)}, 5};

	check_bins_in_files(&c);
}

/*
 * Engine peak memory of one fit, the dataset as held included: host rows in
 * chunks as small as the stored ones (no chunk capacity beyond the rows),
 * the stored rows' reorder window small.
 */
static size_t
fit_peak(const spill_rows *rows, bool stored, const gbml_param_value *v, int nv)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len,
				peak;

	gbml_env_init_malloc(&env, 2);
	load_rows_in(&ds, &env, rows, stored, 8, true);
	gbml_dataset_finish_appends(&ds, &env);	/* the host rows' pre-faulted spare chunk goes */
	if (stored)
		gbml_chunk_store_file_set_permute_budget(ds.store, (size_t) 256 << 10);
	env.memory_peak = env.memory_used;
	CHECK(gbml_train_values(&env, "boost", v, nv, &ds, NULL, &model, &len) == GBML_OK);
	peak = env.memory_peak;
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	return peak;
}

TEST(boost_spill_wide_rows_peak_below_memory)
{
	spill_rows	rows;
	gbml_param_value v[] = {NUM("iterations", 3), NUM("depth", 4)};
	size_t		in_memory,
				in_files;

	/* 300 features: 3.6 MB of floats, 0.9 MB of bins */
	make_rows(&rows, SPILL_REGRESSION, 3000, 300, 9, 0.0, false);
	in_memory = fit_peak(&rows, false, v, 2);
	in_files = fit_peak(&rows, true, v, 2);
	printf("# peak in memory %zu bytes, from files %zu\n", in_memory, in_files);
	CHECK(in_files < in_memory);
	free_rows(&rows);
}

/* ---- failures while binning ---- */

/* A file store whose chunk reads fail after `reads_left` of them (any thread: one read at a time). */
typedef struct failing_store
{
	gbml_chunk_store base;
	gbml_chunk_store *inner;
	int			reads_left;
	bool		failed;
} failing_store;

#define INNER(s) (((failing_store *) (s))->inner)

static float *
fw_buffer(gbml_chunk_store *s, int64_t rows, int n_features)
{
	return INNER(s)->buffer(INNER(s), rows, n_features);
}

static int
fw_put(gbml_chunk_store *s, const float *x, int64_t n_rows, int n_features)
{
	return INNER(s)->put(INNER(s), x, n_rows, n_features);
}

static int
fw_fetch(gbml_chunk_store *s, const int64_t *src, int64_t n, float *out)
{
	return INNER(s)->fetch(INNER(s), src, n, out);
}

static int
fw_read_chunk(gbml_chunk_store *s, int index, float *out)
{
	failing_store *f = (failing_store *) s;

	if (__atomic_sub_fetch(&f->reads_left, 1, __ATOMIC_SEQ_CST) < 0)
	{
		__atomic_store_n(&f->failed, true, __ATOMIC_SEQ_CST);
		return 1;
	}
	return f->inner->read_chunk(f->inner, index, out);
}

static bool
fw_out_of_room(gbml_chunk_store *s)
{
	return INNER(s)->out_of_room(INNER(s));
}

static int
fw_permute(gbml_chunk_store *s, const int64_t *src, int64_t n, int64_t first_rows, int64_t chunk_rows)
{
	return INNER(s)->permute(INNER(s), src, n, first_rows, chunk_rows);
}

static int
fw_missing(gbml_chunk_store *s, bool *out)
{
	return INNER(s)->missing(INNER(s), out);
}

static int
fw_flush(gbml_chunk_store *s)
{
	return INNER(s)->flush(INNER(s));
}

static void
fw_release(gbml_chunk_store *s)
{
	INNER(s)->release(INNER(s));
}

static void
fw_destroy(gbml_chunk_store *s)
{
	INNER(s)->destroy(INNER(s));
	free(s);
}

static const char *
fw_error(gbml_chunk_store *s)
{
	return ((failing_store *) s)->failed ? "could not read from a temporary file: Input/output error"
		: INNER(s)->error(INNER(s));
}

static int
fw_error_code(gbml_chunk_store *s)
{
	return ((failing_store *) s)->failed ? GBML_EIO : INNER(s)->error_code(INNER(s));
}

/* Puts a failing store around ds's file store. */
static void
fail_reads_after(gbml_dataset *ds, int reads)
{
	failing_store *f = calloc(1, sizeof(failing_store));

	f->base = *ds->store;
	f->inner = ds->store;
	f->reads_left = reads;
	f->base.buffer = fw_buffer;
	f->base.put = fw_put;
	f->base.fetch = fw_fetch;
	f->base.read_chunk = fw_read_chunk;
	f->base.out_of_room = fw_out_of_room;
	f->base.permute = fw_permute;
	f->base.missing = fw_missing;
	f->base.flush = fw_flush;
	f->base.release = fw_release;
	f->base.destroy = fw_destroy;
	f->base.error = fw_error;
	f->base.error_code = fw_error_code;
	ds->store = &f->base;
}

TEST(boost_spill_read_failure_is_a_clear_error_and_leaks_nothing)
{
	spill_rows	rows,
				eval_rows;
	gbml_param_value v[] = {NUM("iterations", 5), NUM("depth", 4), STR("loss", "YetiRank")};
	int			fds = tu_open_fds();

	make_rows(&rows, SPILL_RANKING, 4000, 5, 11, 0.0, false);
	make_rows(&eval_rows, SPILL_RANKING, 1500, 5, 12, 0.0, false);
	/* the training rows' third chunk read fails; then the eval set's first */
	for (int on_eval = 0; on_eval <= 1; on_eval++)
	{
		gbml_env	env;
		gbml_dataset ds,
					ev;
		uint8_t    *model = NULL;
		size_t		len;

		gbml_env_init_malloc(&env, 2);
		load_rows(&ds, &env, &rows, true, 4);
		load_rows(&ev, &env, &eval_rows, true, 5);
		fail_reads_after(on_eval ? &ev : &ds, on_eval ? 0 : 2);
		CHECK(gbml_train_values(&env, "boost", v, 3, &ds, &ev, &model, &len) == GBML_EIO);
		CHECK(model == NULL);
		CHECK(strstr(env.error, on_eval ? "reading chunk 1 (rows in temporary files)"
					 : "reading chunk 3 (rows in temporary files)") != NULL);
		CHECK(strstr(env.error, "Input/output error") != NULL);
		gbml_dataset_free(&ds, &env);
		gbml_dataset_free(&ev, &env);
		CHECK(env.memory_used == 0);
	}
	CHECK(tu_open_fds() == fds);
	free_rows(&rows);
	free_rows(&eval_rows);
}

/* Counts the progress reports of one phase; cancels at report `cancel_at` (0: never). */
typedef struct phase_progress
{
	const char *phase;
	int			reports;
	int			cancel_at;
	int64_t		total;
} phase_progress;

static bool
count_phase(void *ctx, const gbml_progress_info *info)
{
	phase_progress *q = ctx;

	if (strcmp(info->phase, q->phase) != 0)
		return false;
	q->total = info->total;
	return ++q->reports == q->cancel_at;
}

/*
 * Boosting on rows in files (stored in a shuffled order), q watching one
 * phase's reports: the training's code, the dataset's chunk count, and
 * every byte given back (a CHECK).
 */
static int
train_watching_phase(const spill_rows *rows, const gbml_param_value *v, int nv, phase_progress *q, int *n_chunks)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	int			rc;

	gbml_env_init_malloc(&env, 2);
	load_rows(&ds, &env, rows, true, 5);
	env.progress_fn = count_phase;
	env.progress_ctx = q;
	rc = gbml_train_values(&env, "boost", v, nv, &ds, NULL, &model, &len);
	*n_chunks = ds.n_chunks;
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	return rc;
}

/*
 * The same training twice, watching phase: whole (*full: its reports, and
 * *n_chunks), then stopped at the cancel_at-th report (*cut).
 */
static void
train_then_cancel(const spill_rows *rows, const gbml_param_value *v, const char *phase, int cancel_at,
				  phase_progress *full, phase_progress *cut, int *n_chunks)
{
	int			cut_chunks;

	*full = (phase_progress) {phase, 0, 0, 0};
	*cut = (phase_progress) {phase, 0, cancel_at, 0};
	CHECK(train_watching_phase(rows, v, 2, full, n_chunks) == GBML_OK);
	CHECK(train_watching_phase(rows, v, 2, cut, &cut_chunks) == GBML_ECANCELLED);
}

TEST(boost_spill_progress_and_cancel_between_chunks)
{
	spill_rows	rows;
	gbml_param_value v[] = {NUM("iterations", 3), NUM("depth", 3)};

	phase_progress full,
				cut;
	int			n_chunks;

	make_rows(&rows, SPILL_REGRESSION, 3500, 4, 12, 0.0, false);
	train_then_cancel(&rows, v, "quantize", 2, &full, &cut, &n_chunks);
	/* a report per chunk, the last one stopping it when asked */
	CHECK(n_chunks > 2 && full.total == n_chunks && full.reports == n_chunks);
	CHECK(cut.total == n_chunks && cut.reports == 2);
	free_rows(&rows);
}

/*
 * The border sample of rows in files is fetched a piece of 1 MB of rows at
 * a time (a read of the files each): a report after each piece and after each batch's
 * sorts, so a cancel is seen within a piece, not after the whole sample
 * (it was seen only once binning began: over a second at 500,000 rows).
 * 300 features: pieces of 873 rows, five for the 4,000-row sample.
 */
TEST(boost_spill_borders_progress_and_cancel_between_sample_pieces)
{
	spill_rows	rows;
	gbml_param_value v[] = {NUM("iterations", 1), NUM("depth", 2)};

	phase_progress full,
				cut;
	int			n_chunks;

	make_rows(&rows, SPILL_REGRESSION, 4000, 300, 21, 0.0, false);
	train_then_cancel(&rows, v, "borders", 3, &full, &cut, &n_chunks);
	/* five pieces and one batch: six reports of five pieces, or the cancel at the third */
	CHECK(full.reports == 6 && full.total == 5);
	CHECK(cut.reports == 3 && cut.total == 5);
	free_rows(&rows);
}

/*
 * Bins in files: the tree's passes check for a cancel between runs of
 * blocks (several reports a tree, not one), and a cancel inside a tree
 * ends the fit with nothing left behind.
 */
TEST(boost_spill_bins_in_files_cancel_inside_a_tree)
{
	spill_rows	rows;
	gbml_param_value v[] = {NUM("iterations", 2), NUM("depth", 3)};
	size_t		run_was = gbml_boost_bins_test_sizes((size_t) 8192 * 4);
	phase_progress full,
				cut;
	int			n_chunks;

	gbml_boost_bins_test_window = (size_t) 8192 * 4 * 2;
	make_rows(&rows, SPILL_REGRESSION, 40000, 4, 12, 0.0, false);
	train_then_cancel(&rows, v, "train", 7, &full, &cut, &n_chunks);
	CHECK(cut.reports == 7);
	/* 5 runs a pass, 4 passes a tree (3 levels, the leaf values), 2 trees, and one report after each tree */
	CHECK(full.reports == 2 * 4 * 5 + 2);
	gbml_boost_bins_test_window = 0;
	gbml_boost_bins_test_sizes(run_was);
	free_rows(&rows);
}

/*
 * The budget decides: a training from files whose bins do not fit beside
 * its per-row state under memory_limit puts them in a file (and stays
 * under the limit), with the bytes of a training without a limit.
 */
TEST(boost_spill_bins_go_to_a_file_past_the_budget)
{
	spill_rows	rows;
	gbml_param_value v[] = {NUM("iterations", 4), NUM("depth", 4), NUM("border_sample_size", 20000)};
	uint8_t    *m[2] = {NULL, NULL};
	size_t		len[2] = {0, 0};
	int64_t		written[2] = {0, 0};
	size_t		peak[2] = {0, 0};

	make_rows(&rows, SPILL_REGRESSION, 300000, 40, 21, 0.0, false);
	for (int run = 0; run < 2; run++)
	{
		gbml_env	env;
		gbml_dataset ds;
		int			rc;

		gbml_env_init_malloc(&env, 2);
		if (run == 1)
			env.memory_limit = (size_t) 36 << 20;	/* the bins are 11.4 MB; without a limit the fit peaks at about 35 MB */
		load_rows(&ds, &env, &rows, true, 9);
		rc = gbml_train_values(&env, "boost", v, 3, &ds, NULL, &m[run], &len[run]);
		if (rc != GBML_OK)
			printf("# budget %zu: %s\n", env.memory_limit, env.error);
		CHECK(rc == GBML_OK);
		written[run] = env.trainer_temp_written;
		peak[run] = env.memory_peak;
		if (m[run])
		{
			uint8_t    *copy = malloc(len[run]);

			memcpy(copy, m[run], len[run]);
			gbml_free(&env, m[run]);
			m[run] = copy;
		}
		gbml_dataset_free(&ds, &env);
		CHECK(env.memory_used == 0);
	}
	printf("# peak without a limit %zu, with %zu; bins written %lld\n", peak[0], peak[1], (long long) written[1]);
	CHECK(written[0] == 0 && written[1] == (int64_t) 300000 * 40);
	CHECK(peak[1] <= ((size_t) 36 << 20) && peak[1] < peak[0]);
	CHECK(m[0] && m[1] && len[0] == len[1] && memcmp(m[0], m[1], len[0]) == 0);
	free(m[0]);
	free(m[1]);
	free_rows(&rows);
}

/* The malloc env's temporary-file writer, and the length of the writes damaging_write spoils. */
static int	(*plain_write) (void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg,
							size_t msg_len);
static size_t damage_len;

/* Writes of damage_len bytes (whole bin blocks) go out with one byte set to 255. */
static int
damaging_write(void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg, size_t msg_len)
{
	uint8_t    *copy;
	int			rc;

	if (len != damage_len)
		return plain_write(ctx, handle, buf, len, offset, msg, msg_len);
	copy = malloc(len);
	memcpy(copy, buf, len);
	copy[len / 2] = 255;
	rc = plain_write(ctx, handle, copy, len, offset, msg, msg_len);
	free(copy);
	return rc;
}

/*
 * Bins read back from a damaged file (a bin past its feature's borders,
 * which would index past the histograms) end the training with an error
 * that says so, and leave nothing behind.
 */
TEST(boost_spill_bins_in_files_damaged_is_an_error)
{
	spill_rows	rows;
	gbml_param_value v[] = {NUM("iterations", 3), NUM("depth", 3)};
	size_t		run_was = gbml_boost_bins_test_sizes((size_t) 8192 * 5);
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	int			rc;

	gbml_boost_bins_test_window = (size_t) 8192 * 5 * 2;
	make_rows(&rows, SPILL_REGRESSION, 40000, 5, 13, 0.0, false);
	gbml_env_init_malloc(&env, 2);
	plain_write = env.temp_write;
	damage_len = (size_t) 8192 * 5;	/* a whole block of bins; the rows' chunks are 700 x 5 floats */
	env.temp_write = damaging_write;
	load_rows(&ds, &env, &rows, true, 5);
	rc = gbml_train_values(&env, "boost", v, 2, &ds, NULL, &model, &len);
	CHECK(rc == GBML_EIO && strstr(env.error, "damaged") != NULL && strstr(env.error, "past its") != NULL);
	printf("# %s\n", env.error);
	if (rc != GBML_EIO)
		printf("# rc %d: %s\n", rc, env.error);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	gbml_boost_bins_test_window = 0;
	gbml_boost_bins_test_sizes(run_was);
	free_rows(&rows);
}
