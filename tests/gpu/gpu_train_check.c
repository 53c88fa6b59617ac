/*
 * gpu_train_check.c — whole boosting trainings on the GPU backend against
 * the CPU backend: the same rows, params and seed must give the same model
 * bytes for every loss, with subsampling, eval sets, early stopping and the
 * best-model cut, shallow and deep trees, rows streamed to the device or
 * read back from temporary files.  Then what must not leak or crash:
 * the GPU budget (an error, or under auto a CPU fallback with the CPU's
 * bytes), CUDA failures injected into the emulation (an error naming the
 * call), and cancelled trainings (nothing held afterwards).
 */
#include "gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "chunk_store_file.h"
#include "chunk_store_gpu.h"
#include "dataset.h"
#include "rng.h"
#include "schema.h"
#include "../unit/test_util.h"

typedef struct data_spec
{
	int64_t		n;
	int			n_features;
	bool		groups;			/* rows in query groups, graded labels */
	bool		binary;			/* 0/1 labels */
	bool		weights;
	double		missing;		/* share of NaN features */
	bool		many_copies;	/* make_streamed: long runs of duplicate rows */
	bool		classes;		/* class ids 0..3 (MultiClass), no groups */
} data_spec;

/* A random dataset (deterministic in seed); labels depend on the first features. */
static void
make_data(gbml_dataset *ds, gbml_env *env, const data_spec *s, uint64_t seed)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * (size_t) s->n_features);

	gbml_rng_seed(&rng, seed);
	gbml_dataset_init(ds, true);
	for (int64_t i = 0; i < s->n; i++)
	{
		gbml_row	row;
		double		y = 0;

		for (int f = 0; f < s->n_features; f++)
		{
			x[f] = (float) (gbml_rng_uniform(&rng) * 4 - 2);
			if (f < 4)
				y += (f + 1) * x[f] * (f % 2 ? 1 : -1);
			if (gbml_rng_uniform(&rng) < s->missing)
				x[f] = NAN;
		}
		y += gbml_rng_uniform(&rng);
		memset(&row, 0, sizeof(row));
		row.x = x;
		row.n_features = s->n_features;
		if (s->binary)
			row.label = y > 0 ? 1.0f : 0.0f;
		else if (s->groups || s->classes)
			row.label = (float) (y > 2 ? 3 : y > 0.5 ? 2 : y > -1 ? 1 : 0);
		else
			row.label = (float) y;
		row.group = (int64_t) (i / 17);
		row.group_is_null = !s->groups;
		row.weight = s->weights ? (float) (0.5 + gbml_rng_uniform(&rng)) : 1.0f;
		row.weight_is_null = !s->weights;
		if (gbml_dataset_append(ds, env, &row, true) != GBML_OK)
			printf("# append: %s\n", env->error);
	}
	free(x);
}

typedef struct train_case
{
	const char *name;
	data_spec	data;
	gbml_param_value params[8];
	int			n_params;
} train_case;

/* Notices the trainer sends (the auto fallback's). */
static char last_notice[512];

static void
record_notice(void *ctx, int level, const char *msg)
{
	(void) ctx;
	if (level == GBML_LOG_NOTICE)
		snprintf(last_notice, sizeof(last_notice), "%s", msg);
}

/* Trains one case on the CPU (gpu false) or the GPU; returns the status. */
static int
train(const train_case *c, bool gpu, bool automatic, size_t gpu_budget, gbml_env *env, uint8_t **model,
	  size_t *len, int threads)
{
	gbml_dataset ds;
	int			rc;

	gbml_env_init_malloc(env, threads);
	env->notice_fn = record_notice;
	if (gpu)
	{
		env->device = GBML_DEVICE_GPU;
		env->device_auto = automatic;
		env->gpu = gc_backend;
		env->gpu_memory_limit = gpu_budget;
	}
	make_data(&ds, env, &c->data, 42);
	*model = NULL;
	*len = 0;
	rc = gbml_train_values(env, "boost", c->params, c->n_params, &ds, NULL, model, len);
	gbml_dataset_free(&ds, env);
	return rc;
}

static const train_case cases[] = {
	{"RMSE, depth 6", {3001, 8, false, false, false, 0.05}, {{0}}, 0},
	{"RMSE with weights and subsample", {2500, 6, false, false, true, 0}, {{0}}, 0},
	{"Logloss, subsample 0.7", {2000, 7, false, true, false, 0.1}, {{0}}, 0},
	{"QueryRMSE", {1700, 5, true, false, false, 0}, {{0}}, 0},
	{"PairLogit", {1700, 5, true, false, false, 0}, {{0}}, 0},
	{"YetiRank, eval set, early stopping, best model", {2500, 6, true, false, false, 0.02}, {{0}}, 0},
	{"LambdaMART", {1700, 5, true, false, false, 0}, {{0}}, 0},
	{"RMSE depth 9, 255 borders (global-memory histograms)", {1500, 3, false, false, false, 0}, {{0}}, 0},
	{"MultiClass, weights, subsample 0.8 (a tree a class)", {2000, 6, false, false, true, 0.05, false, true}, {{0}}, 0},
	{"Depthwise MultiClass, depth 7, weights, min_child_weight 0", {2000, 6, false, false, true, 0.05, false, true}, {{0}}, 0},
	{"Depthwise Logloss, random_strength 1, subsample 0.8, eval set, early stopping, best model",
	{2500, 8, false, true, false, 0.05}, {{0}}, 0},
};

/* The params of case i (tu_num needs run time). */
static void
case_params(train_case *c, int i)
{
	int			k = 0;

	if (i != 5 && i != 7 && i != 10)
		c->params[k++] = tu_num("iterations", 12);
	switch (i)
	{
		case 1:
			c->params[k++] = tu_num("subsample", 0.6);
			break;
		case 2:
			c->params[k++] = tu_str("loss", "Logloss");
			c->params[k++] = tu_num("subsample", 0.7);
			break;
		case 3:
			c->params[k++] = tu_str("loss", "QueryRMSE");
			break;
		case 4:
			c->params[k++] = tu_str("loss", "PairLogit");
			break;
		case 5:
			c->params[k++] = tu_str("loss", "YetiRank");
			c->params[k++] = tu_num("eval_fraction", 0.25);
			c->params[k++] = tu_num("early_stopping_rounds", 3);
			c->params[k++] = tu_num("iterations", 30);
			break;
		case 6:
			c->params[k++] = tu_str("loss", "LambdaMART");
			c->params[k++] = tu_num("subsample", 0.8);
			break;
		case 7:
			c->params[k++] = tu_num("depth", 9);
			c->params[k++] = tu_num("border_count", 255);
			c->params[k++] = tu_num("iterations", 4);
			break;
		case 8:
			c->params[k++] = tu_str("loss", "MultiClass");
			c->params[k++] = tu_num("subsample", 0.8);
			break;
		case 9:
			c->params[k++] = tu_str("loss", "MultiClass");
			c->params[k++] = tu_str("grow_policy", "Depthwise");
			c->params[k++] = tu_num("depth", 7);
			c->params[k++] = tu_num("min_child_weight", 0);
			break;
		case 10:
			/* a high learning rate overfits soon: the best model drops trees (their leaves from the device) */
			c->params[k++] = tu_str("loss", "Logloss");
			c->params[k++] = tu_str("grow_policy", "Depthwise");
			c->params[k++] = tu_num("random_strength", 1);
			c->params[k++] = tu_num("subsample", 0.8);
			c->params[k++] = tu_num("learning_rate", 0.9);
			c->params[k++] = tu_num("eval_fraction", 0.25);
			c->params[k++] = tu_num("early_stopping_rounds", 3);
			c->params[k++] = tu_num("iterations", 60);
			break;
	}
	c->n_params = k;
}

static void
equivalence_checks(bool quick)
{
	int			n = (int) (sizeof(cases) / sizeof(cases[0]));

	for (int i = 0; i < n; i++)
	{
		train_case	c = cases[i];
		gbml_env	ecpu,
					egpu;
		uint8_t    *mcpu,
				   *mgpu;
		size_t		lcpu,
					lgpu;
		int			rc_cpu,
					rc_gpu;

		if (quick && i % 2 == 1 && i != 5)
			continue;
		case_params(&c, i);
		rc_cpu = train(&c, false, false, 0, &ecpu, &mcpu, &lcpu, 2);
		rc_gpu = train(&c, true, false, 0, &egpu, &mgpu, &lgpu, 1 + i % 2);
		if (rc_gpu != GBML_OK)
			printf("# GPU training: %s\n", egpu.error);
		gc_check(rc_cpu == GBML_OK && rc_gpu == GBML_OK && egpu.device == GBML_DEVICE_GPU &&
				 lcpu == lgpu && memcmp(mcpu, mgpu, lcpu) == 0,
				 "same model bytes on the GPU as on the CPU: %s (%zu bytes)", c.name, lcpu);
		gbml_free(&ecpu, mcpu);
		gbml_free(&egpu, mgpu);
	}
	gc_check(gc_no_resources(), "no GPU resources left after the trainings");
}

static void
budget_checks(void)
{
	train_case	c = cases[0];
	gbml_env	e1,
				e2,
				e3;
	uint8_t    *m1,
			   *m2,
			   *m3;
	size_t		l1,
				l2,
				l3;
	int			rc;

	/* big enough for auto to want the GPU (GBML_BOOST_GPU_AUTO_MIN_BYTES) */
	c.data.n = 42000;
	c.data.n_features = 100;
	c.params[0] = tu_num("iterations", 2);
	c.n_params = 1;
	rc = train(&c, true, false, 4096, &e1, &m1, &l1, 2);
	gc_check(rc == GBML_EGPUBUDGET && strstr(e1.error, "budget") != NULL,
			 "device gpu over the GPU budget is an error: %s", e1.error);
	last_notice[0] = '\0';
	rc = train(&c, true, true, 4096, &e2, &m2, &l2, 2);
	(void) train(&c, false, false, 0, &e3, &m3, &l3, 2);
	gc_check(rc == GBML_OK && e2.device == GBML_DEVICE_CPU && strstr(last_notice, "CPU") != NULL &&
			 l2 == l3 && memcmp(m2, m3, l2) == 0,
			 "device auto over the GPU budget trains on the CPU with a notice (\"%s\")", last_notice);
	gbml_free(&e1, m1);
	gbml_free(&e2, m2);
	gbml_free(&e3, m3);
	gc_check(gc_no_resources(), "no GPU resources left after the budget checks");
}

void
gc_inject_faults(const char *what, gc_fault_attempt attempt, long long dense, long long step, long long last)
{
	gc_emu_fail_after_fn fail_after = gc_emu_fail_after();
	int			errors = 0,
				named = 0,
				clean = 0,
				tries = 0;
	char		example[600] = "";

	if (fail_after == NULL)
	{
		printf("# fault injection (%s): only on the emulation\n", what);
		return;
	}
	for (long long k = 1; k < last; k += k < dense ? 1 : step)
	{
		gbml_env	e;
		int			rc;

		fail_after(k);
		rc = attempt(&e);
		fail_after(-1);
		tries++;
		if (rc != GBML_OK)
		{
			errors++;
			if (rc == GBML_EDEVICE && strstr(e.error, "failed: ") != NULL && strstr(e.error, "cuda") != NULL)
				named++;
			else
				printf("# unexpected failure %d: %s\n", rc, e.error);
			if (example[0] == '\0')
				snprintf(example, sizeof(example), "%s", e.error);
		}
		clean += gc_no_resources();
	}
	gc_check(errors > 0 && named == errors, "%s: %d of %d injected CUDA failures became errors naming the call (\"%s\")",
			 what, named, errors, example);
	gc_check(clean == tries, "%s: nothing held after any of the %d injected failures", what, tries);
}

static int
attempt_training(gbml_env *e)
{
	train_case	c = cases[0];
	uint8_t    *m;
	size_t		l;
	int			rc;

	case_params(&c, 0);
	rc = train(&c, true, false, 0, e, &m, &l, 2);
	gbml_free(e, m);
	return rc;
}

static bool
cancel_at_third(void *ctx, const gbml_progress_info *info)
{
	(void) ctx;
	return info->iteration >= 3;
}

static void
cancel_checks(int rounds)
{
	train_case	c = cases[0];
	int			cancelled = 0,
				clean = 0;

	case_params(&c, 0);
	c.data.n = 1200;
	for (int i = 0; i < rounds; i++)
	{
		gbml_env	e;
		gbml_dataset ds;
		uint8_t    *m = NULL;
		size_t		l = 0;
		int			rc;

		gbml_env_init_malloc(&e, 2);
		e.device = GBML_DEVICE_GPU;
		e.gpu = gc_backend;
		e.progress_fn = cancel_at_third;
		make_data(&ds, &e, &c.data, (uint64_t) i);
		rc = gbml_train_values(&e, "boost", c.params, c.n_params, &ds, NULL, &m, &l);
		gbml_dataset_free(&ds, &e);
		cancelled += rc == GBML_ECANCELLED;
		clean += gc_no_resources();
		gbml_free(&e, m);
	}
	gc_check(cancelled == rounds && clean == rounds, "%d GPU trainings cancelled at the third tree: %d cancelled, %d left nothing held",
			 rounds, cancelled, clean);
}

static void streaming_checks(void);
static void categorical_checks(void);

void
gc_training_checks(bool quick)
{
	equivalence_checks(quick);
	budget_checks();
	gc_inject_faults("a training", attempt_training, 20, 37, 400);
	cancel_checks(quick ? 20 : 100);
	streaming_checks();
	categorical_checks();
}

/* ---- categorical features (boost_ctr.h): derived bin columns reach the device ---- */

#define CAT_D 6

/* Columns 4 (60 categories, NULLs) and 5 (3 categories): names and values for the schema. */
typedef struct cat_schema
{
	gbml_feature_schema s;
	gbml_feature_def f[CAT_D];
	char	   *names[60];
	char		buf[60][16];	/* room for any int: the sanitizer build checks snprintf truncation */
} cat_schema;

static void
cat_schema_init(cat_schema *cs)
{
	memset(cs, 0, sizeof(*cs));
	for (int c = 0; c < 60; c++)
	{
		snprintf(cs->buf[c], sizeof(cs->buf[c]), "c%02d", c);
		cs->names[c] = cs->buf[c];
	}
	cs->s.n_features = CAT_D;
	cs->s.features = cs->f;
	for (int j = 0; j < CAT_D; j++)
	{
		cs->f[j].name = (char *) (j == 4 ? "city" : j == 5 ? "plan" : "x");
		cs->f[j].source_type = (char *) "text";
		cs->f[j].kind = j >= 4 ? GBML_FEATURE_CATEGORICAL : GBML_FEATURE_NUMERIC;
		cs->f[j].n_categories = j == 4 ? 60 : j == 5 ? 3 : 0;
		cs->f[j].categories = j >= 4 ? cs->names : NULL;
	}
}

/*
 * n rows (in an order shuffled by seed when shuffle), streamed to `open`
 * (NULL: host memory); labels from both categorical columns and x0.
 */
static int
make_categorical(gbml_dataset *ds, gbml_env *env, const cat_schema *cs, int64_t n, bool groups,
				 gbml_chunk_store *(*open) (gbml_env *env), bool shuffle)
{
	int64_t    *order = shuffle ? tu_shuffled(n, 99) : NULL;
	int			rc = GBML_OK;

	gbml_dataset_init(ds, true);
	ds->schema = &cs->s;
	if (open)
	{
		ds->chunk_rows = 4096;	/* several chunks, so the rows do go to the store */
		gbml_dataset_stream_to(ds, open, 0, false);
	}
	for (int64_t k = 0; k < n && rc == GBML_OK; k++)
	{
		int64_t		i = order ? order[k] : k;
		gbml_rng	rng;
		float		x[CAT_D];
		gbml_row	row;
		double		y;

		gbml_rng_stream(&rng, 4242, (uint64_t) i);	/* row i's content depends on i alone */
		for (int j = 0; j < 4; j++)
			x[j] = (float) gbml_rng_uniform(&rng);
		x[4] = gbml_rng_uniform(&rng) < 0.05 ? NAN : (float) gbml_rng_below(&rng, 60);
		x[5] = (float) gbml_rng_below(&rng, 3);
		y = (isnan(x[4]) ? 1.0 : (double) (((int) x[4] * 7) % 11) / 3.0) + (x[5] == 2.0f) + x[0] +
			0.3 * gbml_rng_uniform(&rng);
		memset(&row, 0, sizeof(row));
		row.x = x;
		row.n_features = CAT_D;
		row.label = groups ? (float) floor(y) : (float) y;
		row.group = i / 13;
		row.group_is_null = !groups;
		row.weight_is_null = true;
		rc = gbml_dataset_append(ds, env, &row, true);
	}
	free(order);
	return rc;
}

/*
 * A categorical training on the CPU from host rows, and on the GPU with
 * the rows in host memory, streamed to the device, or in temporary files:
 * the same model bytes every time.
 */
static void
categorical_checks(void)
{
	static const char *const where[3] = {"host memory", "the device", "temporary files"};
	cat_schema	cs;

	cat_schema_init(&cs);
	for (int grouped = 0; grouped < 2; grouped++)
	{
		gbml_param_value p[5] = {tu_num("iterations", 8), tu_str("loss", grouped ? "YetiRank" : "RMSE"),
		tu_num("eval_fraction", 0.2), tu_num("one_hot_max_size", 3), tu_num("subsample", 0.9)};
		gbml_env	ecpu;
		gbml_dataset dcpu;
		uint8_t    *mcpu = NULL;
		size_t		lcpu = 0;
		int			rc_cpu;

		gbml_env_init_malloc(&ecpu, 2);
		rc_cpu = make_categorical(&dcpu, &ecpu, &cs, 20000, grouped, NULL, false);
		if (rc_cpu == GBML_OK)
			rc_cpu = gbml_train_values(&ecpu, "boost", p, 5, &dcpu, NULL, &mcpu, &lcpu);
		for (int w = 0; w < 3; w++)
		{
			gbml_env	e;
			gbml_dataset ds;
			uint8_t    *m = NULL;
			size_t		l = 0;
			int			rc;

			gbml_env_init_malloc(&e, 1 + w % 2);
			e.device = GBML_DEVICE_GPU;
			e.gpu = gc_backend;
			rc = make_categorical(&ds, &e, &cs, 20000, grouped,
								  w == 1 ? gbml_chunk_store_gpu_open : w == 2 ? gbml_chunk_store_file_open : NULL,
								  w > 0);
			if (rc == GBML_OK)
				rc = gbml_train_values(&e, "boost", p, 5, &ds, NULL, &m, &l);
			if (rc != GBML_OK)
				printf("# categorical training on the GPU: %s\n", e.error);
			gc_check(rc_cpu == GBML_OK && rc == GBML_OK && e.device == GBML_DEVICE_GPU &&
					 (w == 0 || ds.store != NULL) && l == lcpu && memcmp(m, mcpu, l) == 0,
					 "categorical features (%s), rows in %s: the GPU trains the CPU's bytes",
					 grouped ? "YetiRank" : "RMSE", where[w]);
			gbml_dataset_free(&ds, &e);
			gbml_free(&e, m);
			gc_check(e.memory_used == 0, "categorical training on the GPU: no host memory held afterwards");
		}
		gbml_dataset_free(&dcpu, &ecpu);
		gbml_free(&ecpu, mcpu);
	}
	gc_check(gc_no_resources(), "no GPU resources left after the categorical trainings");
}

/* ---- rows streamed to the device during the scan ---- */

/*
 * The rows of make_data in a shuffled order, with every 97th row a copy of
 * an earlier one (equal hashes: the ties are broken by content fetched from
 * the device), appended to a dataset that streams to the GPU.  data_spec's
 * many_copies instead makes every third row a copy of row 7 (one run of
 * equal hashes longer than a fetch batch) and every third a copy of another.
 */
static int
make_streamed_to(gbml_dataset *ds, gbml_env *env, const data_spec *s, uint64_t seed,
				 gbml_chunk_store *(*open) (gbml_env *env), bool shuffle, int64_t from_values, bool fallback)
{
	gbml_dataset src;
	int64_t		n;
	int64_t    *order;
	gbml_rng	rng;
	int			rc = GBML_OK;

	make_data(&src, env, s, seed);
	gbml_dataset_finish_appends(&src, env);
	n = src.n_rows;
	order = malloc(sizeof(int64_t) * (size_t) n);
	for (int64_t i = 0; i < n; i++)
		order[i] = s->many_copies ? (i % 3 == 0 ? 7 : i % 3 == 1 ? i / 2 : i) : i % 97 == 96 ? i / 2 : i;
	gbml_rng_seed(&rng, seed ^ 0x5eed);
	for (int64_t i = n - 1; shuffle && i > 0; i--)
	{
		int64_t		j = (int64_t) gbml_rng_below(&rng, (uint64_t) i + 1),
					t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	gbml_dataset_init(ds, true);
	if (open)
		gbml_dataset_stream_to(ds, open, from_values, fallback);
	for (int64_t i = 0; i < n && rc == GBML_OK; i++)
	{
		int			c = 0;
		int64_t		r = order[i];
		gbml_row	row;

		while (r >= src.chunks[c]->n_rows)
			r -= src.chunks[c++]->n_rows;
		memset(&row, 0, sizeof(row));
		row.x = src.chunks[c]->x + (size_t) r * (size_t) src.n_features;
		row.n_features = src.n_features;
		row.label = src.chunks[c]->label[r];
		row.group = src.chunks[c]->group[r];
		row.group_is_null = src.group_state <= 0;
		row.weight = src.chunks[c]->weight[r];
		row.weight_is_null = !src.has_weight;
		rc = gbml_dataset_append(ds, env, &row, true);
	}
	free(order);
	gbml_dataset_free(&src, env);
	return rc;
}

static int
make_streamed_from(gbml_dataset *ds, gbml_env *env, const data_spec *s, uint64_t seed, bool stream, bool shuffle,
				   int64_t from_values, bool fallback)
{
	return make_streamed_to(ds, env, s, seed, stream ? gbml_chunk_store_gpu_open : NULL, shuffle, from_values,
							fallback);
}

static int
make_streamed(gbml_dataset *ds, gbml_env *env, const data_spec *s, uint64_t seed, bool stream, bool shuffle)
{
	return make_streamed_from(ds, env, s, seed, stream, shuffle, 0, false);
}

/*
 * Device "auto": streaming starts at a later chunk boundary (two host chunks
 * handed over), and a budget reached while streaming brings the rows back to
 * the host (a NOTICE, the CPU trains): the CPU's bytes either way.
 */
/* Rows streamed to the device, then trained there, with an eval split. */
static int
attempt_streamed(gbml_env *e)
{
	data_spec	s = {10000, 40, false, false, false, 0.01};
	gbml_param_value p[2] = {tu_num("iterations", 3), tu_num("eval_fraction", 0.2)};
	gbml_dataset ds;
	uint8_t    *m = NULL;
	size_t		l = 0;
	int			rc;

	gbml_env_init_malloc(e, 2);
	e->device = GBML_DEVICE_GPU;
	e->gpu = gc_backend;
	rc = make_streamed(&ds, e, &s, 5, true, true);
	if (rc == GBML_OK)
		rc = gbml_train_values(e, "boost", p, 2, &ds, NULL, &m, &l);
	gbml_dataset_free(&ds, e);
	gbml_free(e, m);
	return rc;
}

static void
auto_streaming_checks(void)
{
	data_spec	s = {80000, 40, false, false, false, 0.01};
	gbml_param_value p[1] = {tu_num("iterations", 3)};
	gbml_env	ecpu;
	gbml_dataset dcpu;
	uint8_t    *mcpu = NULL;
	size_t		lcpu = 0;

	gbml_env_init_malloc(&ecpu, 2);
	make_streamed(&dcpu, &ecpu, &s, 21, false, false);
	gbml_train_values(&ecpu, "boost", p, 1, &dcpu, NULL, &mcpu, &lcpu);
	for (int budget_case = 0; budget_case < 2; budget_case++)
	{
		gbml_env	e;
		gbml_dataset ds;
		uint8_t    *m = NULL;
		size_t		l = 0;
		int			rc;
		bool		streamed,
					fell_back;

		gbml_env_init_malloc(&e, 2);
		e.device = GBML_DEVICE_GPU;
		e.device_auto = true;
		e.gpu = gc_backend;
		e.notice_fn = record_notice;
		last_notice[0] = '\0';
		if (budget_case)
			e.gpu_memory_limit = 2 << 20;	/* the first chunk fits, the second does not */
		/* past the first boundary (8,192 rows x 40): streaming starts at the second, 73,728 rows */
		rc = make_streamed_from(&ds, &e, &s, 21, true, true, budget_case ? 0 : 8192 * 40 + 1, true);
		streamed = ds.store != NULL && ds.n_chunks == 3 && ds.chunks[0]->x == NULL;
		fell_back = ds.store == NULL && ds.stream_fell_back;
		if (rc == GBML_OK)
			rc = gbml_train_values(&e, "boost", p, 1, &ds, NULL, &m, &l);
		if (rc != GBML_OK)
			printf("# auto streaming: %s\n", e.error);
		if (budget_case)
			gc_check(rc == GBML_OK && fell_back && e.device == GBML_DEVICE_CPU && strstr(last_notice, "host memory") &&
					 l == lcpu && memcmp(m, mcpu, l) == 0,
					 "auto: the budget reached while streaming brings the rows back to the host, the CPU trains its bytes (\"%s\")",
					 last_notice);
		else
			gc_check(rc == GBML_OK && streamed && e.device == GBML_DEVICE_GPU && l == lcpu && memcmp(m, mcpu, l) == 0,
					 "auto: streaming starts at the chunk boundary past the threshold (two host chunks handed over), same bytes");
		gbml_dataset_free(&ds, &e);
		gbml_free(&e, m);
		gc_check(gc_no_resources(), "auto streaming: nothing held afterwards");
	}
	gbml_dataset_free(&dcpu, &ecpu);
	gbml_free(&ecpu, mcpu);
}

/*
 * Rows in temporary files (a dataset past its memory budget) trained on the
 * GPU: the host bins made from the files go up as for rows in memory, the
 * files go once binned, and the bytes are the CPU's from rows in memory.
 */
static void
file_store_checks(void)
{
	data_spec	s = {20000, 40, true, false, true, 0.02};	/* two chunks: 8,192 rows, then the rest */
	gbml_param_value p[3] = {tu_num("iterations", 6), tu_str("loss", "YetiRank"), tu_num("eval_fraction", 0.2)};
	gbml_env	ecpu,
				egpu;
	gbml_dataset dcpu,
				dgpu;
	uint8_t    *mcpu = NULL,
			   *mgpu = NULL;
	size_t		lcpu = 0,
				lgpu = 0;
	gbml_spill_stats st = {0};
	int			rc_cpu,
				rc_gpu;

	gbml_env_init_malloc(&ecpu, 2);
	gbml_env_init_malloc(&egpu, 2);
	egpu.device = GBML_DEVICE_GPU;
	egpu.gpu = gc_backend;
	rc_cpu = make_streamed_to(&dcpu, &ecpu, &s, 17, NULL, false, 0, false);
	rc_gpu = make_streamed_to(&dgpu, &egpu, &s, 17, gbml_chunk_store_file_open, true, 0, false);
	if (rc_cpu == GBML_OK)
		rc_cpu = gbml_train_values(&ecpu, "boost", p, 3, &dcpu, NULL, &mcpu, &lcpu);
	if (rc_gpu == GBML_OK)
		rc_gpu = gbml_train_values(&egpu, "boost", p, 3, &dgpu, NULL, &mgpu, &lgpu);
	if (rc_gpu != GBML_OK)
		printf("# training from files on the GPU: %s\n", egpu.error);
	gc_check(rc_cpu == GBML_OK && rc_gpu == GBML_OK && egpu.device == GBML_DEVICE_GPU && dgpu.n_chunks > 1 &&
			 gbml_chunk_store_file_stats(dgpu.store, &st) && st.chunks == 0 && st.bytes_read > 0 &&
			 lcpu == lgpu && memcmp(mcpu, mgpu, lcpu) == 0,
			 "rows in temporary files train on the GPU from their host bins, the files released: the CPU's bytes");
	gbml_dataset_free(&dcpu, &ecpu);
	gbml_dataset_free(&dgpu, &egpu);
	gbml_free(&ecpu, mcpu);
	gbml_free(&egpu, mgpu);
	gc_check(gc_no_resources() && egpu.memory_used == 0, "nothing held after the training from files");
}

static void
streaming_checks(void)
{
	struct
	{
		const char *name;
		data_spec	data;
		const char *loss;
		double		eval_fraction;
	}			cases[] = {
		{"RMSE, NaN features", {20000, 40, false, false, false, 0.02}, "RMSE", 0},
		{"YetiRank with groups and an eval split", {12000, 60, true, false, false, 0}, "YetiRank", 0.2},
		{"Logloss with weights", {9000, 100, false, true, true, 0}, "Logloss", 0},
		{"RMSE, a third of the rows one duplicate, a third pairs", {20000, 40, false, false, false, 0, true}, "RMSE", 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		gbml_env	ecpu,
					egpu;
		gbml_dataset dcpu,
					dgpu;
		gbml_param_value p[4] = {tu_num("iterations", 6), tu_str("loss", cases[i].loss),
		tu_num("eval_fraction", cases[i].eval_fraction), tu_num("subsample", 0.9)};
		uint8_t    *mcpu = NULL,
				   *mgpu = NULL;
		size_t		lcpu = 0,
					lgpu = 0;
		int			rc_cpu,
					rc_gpu;
		bool		streamed;

		gbml_env_init_malloc(&ecpu, 2);
		gbml_env_init_malloc(&egpu, 2);
		egpu.device = GBML_DEVICE_GPU;
		egpu.gpu = gc_backend;
		rc_cpu = make_streamed(&dcpu, &ecpu, &cases[i].data, 11 + i, false, false);
		rc_gpu = make_streamed(&dgpu, &egpu, &cases[i].data, 11 + i, true, true);
		streamed = dgpu.store != NULL && dgpu.chunks[0]->x == NULL;
		if (rc_cpu == GBML_OK)
			rc_cpu = gbml_train_values(&ecpu, "boost", p, 4, &dcpu, NULL, &mcpu, &lcpu);
		if (rc_gpu == GBML_OK)
			rc_gpu = gbml_train_values(&egpu, "boost", p, 4, &dgpu, NULL, &mgpu, &lgpu);
		if (rc_gpu != GBML_OK)
			printf("# streamed training: %s\n", egpu.error);
		{
			/* trained: the dataset's context holds its stream and nothing else until the dataset goes */
			gbml_gpu_resources r;

			gc_backend->resources(&r);
			gc_check(r.contexts == 1 && r.device_bytes == 0 && r.pinned_bytes == 0 && r.events == 0,
					 "after the streamed training the rows, bins and buffers are freed (%lld device bytes, %lld pinned)",
					 (long long) r.device_bytes, (long long) r.pinned_bytes);
		}
		gc_check(rc_cpu == GBML_OK && rc_gpu == GBML_OK && streamed && lcpu == lgpu && memcmp(mcpu, mgpu, lcpu) == 0,
				 "rows streamed to the device in another order train the CPU's bytes: %s (%lld rows x %d)",
				 cases[i].name, (long long) cases[i].data.n, cases[i].data.n_features);
		gbml_dataset_free(&dcpu, &ecpu);
		gbml_dataset_free(&dgpu, &egpu);
		gbml_free(&ecpu, mcpu);
		gbml_free(&egpu, mgpu);
	}
	gc_check(gc_no_resources(), "no GPU resources left after the streamed trainings");
	auto_streaming_checks();
	file_store_checks();

	gc_inject_faults("rows streaming in and training", attempt_streamed, 12, 29, 300);

	/* the GPU budget crossed while streaming: an error at that chunk, nothing held */
	{
		gbml_env	e;
		gbml_dataset ds;
		data_spec	s = {80000, 40, false, false, false, 0};	/* the second chunk fills at row 73,728 */
		int			rc;

		gbml_env_init_malloc(&e, 2);
		e.device = GBML_DEVICE_GPU;
		e.gpu = gc_backend;
		e.gpu_memory_limit = 2 << 20;	/* the first chunk (8192 x 40 floats) fits, the second does not */
		rc = make_streamed(&ds, &e, &s, 3, true, false);
		gc_check(rc == GBML_EGPUBUDGET && strstr(e.error, "budget") != NULL,
				 "streaming past the GPU budget fails at that chunk: %s", e.error);
		gbml_dataset_free(&ds, &e);
		gc_check(gc_no_resources(), "no GPU resources left after the budget error");
	}
}
