/*
 * test_saga_categorical.c — SAGA with categorical features (onehot.h,
 * saga.c): a category that decides the label is learned; the cap keeps the
 * most frequent categories (ties to the smaller id) and the rest share the
 * "other" column, as do unseen values and NULL when training had none;
 * `standardize` scales the numeric columns only; the model bytes do not
 * depend on threads, row order, chunk size or rows in temporary files;
 * scoring the raw rows gives what training measured; damaged 'ONEH' or
 * 'SCHM' sections are GBML_ECORRUPT, never a crash; bad values are errors
 * naming the column.
 */
#include "harness.h"
#include "algorithm.h"
#include "chunk_store_file.h"
#include "onehot.h"
#include "saga.h"
#include "saga_shards.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

/* Rows kept apart from any dataset, so they can be appended in any order. */
typedef struct cat_rows
{
	int64_t		n;
	int			d;
	float	   *x;
	float	   *label;
	float	   *weight;
} cat_rows;

static void
rows_init(cat_rows *t, int64_t n, int d)
{
	t->n = n;
	t->d = d;
	t->x = calloc((size_t) (n * d), sizeof(float));
	t->label = calloc((size_t) n, sizeof(float));
	t->weight = malloc(sizeof(float) * (size_t) n);
	for (int64_t i = 0; i < n; i++)
		t->weight[i] = 1.0f;
}

static void
rows_free(cat_rows *t)
{
	free(t->x);
	free(t->label);
	free(t->weight);
}

/*
 * The rows in a dataset with schema s (NULL allowed: allow_missing), in the
 * order `order` (NULL: as stored), chunks of chunk_rows (0: default), in
 * temporary files when stored.
 */
static void
build(gbml_dataset *ds, gbml_env *env, const cat_rows *t, const gbml_feature_schema *s, const int64_t *order,
	  int64_t chunk_rows, bool stored)
{
	gbml_dataset_init(ds, true);
	ds->schema = s;
	if (chunk_rows > 0)
		ds->chunk_rows = chunk_rows;
	if (stored)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t k = 0; k < t->n; k++)
	{
		int64_t		i = order ? order[k] : k;
		gbml_row	row = {.x = t->x + i * t->d,.n_features = t->d,.label = t->label[i],.group_is_null = true,
		.weight = t->weight[i],.weight_is_null = t->weight[i] == 1.0f};

		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
}

/* Trains; the model (env's) or NULL with the error printed. */
static uint8_t *
train(gbml_env *env, gbml_dataset *ds, gbml_dataset *eval, const gbml_param_value *p, int np, size_t *len)
{
	uint8_t    *model = NULL;

	if (gbml_train_values(env, "saga", p, np, ds, eval, &model, len) != GBML_OK)
	{
		fprintf(stderr, "  saga: %s\n", env->error);
		return NULL;
	}
	return model;
}

/* One score of a loaded model. */
static double
score(const gbml_scorer *sc, gbml_env *env, const float *x, int n, gbml_output what)
{
	double		out = NAN;

	CHECK(gbml_scorer_predict(sc, env, x, n, what, &out) == GBML_OK);
	return out;
}

/* The model_json text (malloc'd). */
static char *
model_json(const gbml_scorer *sc, gbml_env *env)
{
	gbml_strbuf js;
	char	   *out;

	gbml_sb_init(&js, env);
	CHECK(sc->algo->to_json(sc->handle, &js) == GBML_OK);
	out = strdup(js.data ? js.data : "");
	gbml_sb_free(&js);
	return out;
}

/* The SAGA section's values: intercept, then w, mean, std (d each) into vals (1 + 3d doubles). */
static bool
decode_saga(gbml_env *env, const uint8_t *model, size_t len, int d, double *vals)
{
	size_t		off,
				slen;
	uint32_t	dd;

	if (!tu_section_offset(env, model, len, GBML_SAGA_SECTION, &off, &slen) || slen != 20 + 8 * (1 + 3 * (size_t) d))
		return false;
	memcpy(&dd, model + off + 16, 4);
	memcpy(vals, model + off + 20, 8 * (1 + 3 * (size_t) d));
	return dd == (uint32_t) d;
}

static const char *const noise_color[] = {"noise", "color"};

/* noise in [-1, 1), color = i % 6 (5: NULL); label 1 for colors 0, 2 and NULL. */
static void
color_rows(cat_rows *t, int64_t n, uint64_t seed)
{
	gbml_rng	rng;

	gbml_rng_seed(&rng, seed);
	rows_init(t, n, 2);
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (i % 6);

		t->x[2 * i] = (float) (2 * gbml_rng_uniform(&rng) - 1);
		t->x[2 * i + 1] = c == 5 ? NAN : (float) c;
		t->label[i] = (c == 0 || c == 2 || c == 5) ? 1.0f : 0.0f;
	}
}

TEST(saga_categorical_feature_that_decides_the_label_is_learned)
{
	gbml_env	env;
	gbml_dataset ds;
	cat_rows	t;
	int			ncat[] = {0, 5};
	gbml_feature_schema *s = tu_schema(2, noise_color, ncat);
	gbml_param_value p[] = {tu_num("alpha", 1e-4), tu_num("max_iter", 300)};
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	double		imp[2];

	gbml_env_init_malloc(&env, 1);
	color_rows(&t, 2400, 1);
	build(&ds, &env, &t, s, NULL, 0, false);
	model = train(&env, &ds, NULL, p, 2, &len);
	CHECK(model != NULL);
	CHECK(tu_meta_number(&env, model, len, "train_accuracy") == 1.0);
	/* 1 numeric + 5 categories + NULL + other */
	CHECK(tu_meta_number(&env, model, len, "one_hot_columns") == 8);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	for (int c = 0; c <= 5; c++)
	{
		float		x[2] = {0.3f, c == 5 ? NAN : (float) c};
		bool		pos = c == 0 || c == 2 || c == 5;

		CHECK(score(&sc, &env, x, 2, GBML_OUT_SCORE) == (pos ? 1.0 : 0.0));
		CHECK(pos ? score(&sc, &env, x, 2, GBML_OUT_PROBA) > 0.9 : score(&sc, &env, x, 2, GBML_OUT_PROBA) < 0.1);
	}
	CHECK(sc.algo->importance(sc.handle, imp) == GBML_OK);
	CHECK_NEAR(imp[0] + imp[1], 1, 1e-12);
	CHECK(imp[1] > 0.9);
	{
		char	   *js = model_json(&sc, &env);

		CHECK(strstr(js, "\"categorical\":[{\"feature\":\"color\",\"categories\":[\"v000\",\"v001\",\"v002\",\"v003\",\"v004\",null],\"coef\":["));
		CHECK(strstr(js, "\"columns\":[{\"feature\":\"noise\"},{\"feature\":\"color\",\"category\":\"v000\"}"));
		CHECK(strstr(js, "{\"feature\":\"color\",\"category\":null},{\"feature\":\"color\",\"other\":true}]"));
		free(js);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	rows_free(&t);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

TEST(saga_categorical_cap_keeps_the_most_frequent_and_the_rest_share_other)
{
	/* rows per id 0..7 and NULL (slot 8): the 4 most frequent are 1, 4, NULL and, of the three at 100, id 2 */
	static const int count[9] = {50, 300, 100, 100, 200, 10, 100, 0, 150};
	static const char *const names[] = {"x", "kind"};
	int			ncat[] = {0, 8};
	gbml_feature_schema *s = tu_schema(2, names, ncat);
	gbml_param_value p[] = {tu_str("loss", "squared"), tu_num("alpha", 1e-7), tu_num("tol", 1e-10),
	tu_num("max_iter", 3000), tu_num("max_categories", 4)};
	gbml_env	env;
	gbml_dataset ds;
	cat_rows	t;
	gbml_rng	rng;
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	int64_t		i = 0;
	double		other;

	gbml_env_init_malloc(&env, 1);
	gbml_rng_seed(&rng, 2);
	rows_init(&t, 1010, 2);
	for (int slot = 0; slot < 9; slot++)
		for (int k = 0; k < count[slot]; k++, i++)
		{
			t.x[2 * i] = (float) (2 * gbml_rng_uniform(&rng) - 1);
			t.x[2 * i + 1] = slot == 8 ? NAN : (float) slot;
			t.label[i] = (float) ((slot == 8 ? 10.0 : slot) + 2.0 * t.x[2 * i]);
		}
	CHECK(i == t.n);
	build(&ds, &env, &t, s, NULL, 0, false);
	model = train(&env, &ds, NULL, p, 5, &len);
	CHECK(model != NULL);
	CHECK(tu_meta_number(&env, model, len, "one_hot_columns") == 1 + 4 + 1);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	{
		char	   *js = model_json(&sc, &env);

		CHECK(strstr(js, "\"categories\":[\"v001\",\"v002\",\"v004\",null]"));
		free(js);
	}
	for (int id = 1; id <= 4; id += (id == 2 ? 2 : 1))
	{
		float		x[2] = {0, (float) id};

		CHECK_NEAR(score(&sc, &env, x, 2, GBML_OUT_SCORE), id, 0.02);
		/* within the other bucket x and the category are not quite independent: the slope moves a little */
		x[0] = 1;
		CHECK_NEAR(score(&sc, &env, x, 2, GBML_OUT_SCORE), id + 2.0, 0.1);
	}
	{
		float		x[2] = {0, NAN};

		CHECK_NEAR(score(&sc, &env, x, 2, GBML_OUT_SCORE), 10, 0.02);
		x[1] = 0;
		other = score(&sc, &env, x, 2, GBML_OUT_SCORE);
		/* the other rows' mean label: (0*50 + 3*100 + 5*10 + 6*100) / 260 */
		CHECK_NEAR(other, 950.0 / 260.0, 0.02);
		/* past the cap, never in training, unseen, not an id at all: the same column */
		for (int k = 0; k < 6; k++)
		{
			static const float v[6] = {3, 5, 6, 7, GBML_CATEGORY_UNSEEN, 2.5f};

			x[1] = v[k];
			CHECK(score(&sc, &env, x, 2, GBML_OUT_SCORE) == other);
		}
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	rows_free(&t);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

TEST(saga_categorical_unseen_and_null_at_predict)
{
	static const char *const names[] = {"size"};
	int			ncat[] = {3};
	gbml_feature_schema *s = tu_schema(1, names, ncat);
	gbml_param_value p[] = {tu_str("loss", "squared"), tu_num("tol", 1e-9)};
	gbml_env	env;
	gbml_dataset ds;
	cat_rows	t;
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	char	   *js;

	gbml_env_init_malloc(&env, 1);
	rows_init(&t, 300, 1);
	for (int64_t i = 0; i < t.n; i++)
	{
		t.x[i] = (float) (i % 3);
		t.label[i] = (float) (1 + i % 3) + (i % 7) * 0.01f;
	}
	build(&ds, &env, &t, s, NULL, 0, false);
	model = train(&env, &ds, NULL, p, 2, &len);
	CHECK(model != NULL);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	js = model_json(&sc, &env);
	/* no training row was NULL or other: that column's weight never moved */
	CHECK(strstr(js, "\"categories\":[\"v000\",\"v001\",\"v002\"],\"coef\":[") && strstr(js, "\"other_coef\":0}"));
	{
		float		x[1] = {NAN};
		double		b = tu_json_number(js, "intercept");

		/* NULL, not seen in training, and the unseen id: the other column, that is the intercept alone */
		CHECK(score(&sc, &env, x, 1, GBML_OUT_SCORE) == b);
		x[0] = GBML_CATEGORY_UNSEEN;
		CHECK(score(&sc, &env, x, 1, GBML_OUT_SCORE) == b);
		for (int c = 0; c < 3; c++)
		{
			x[0] = (float) c;
			CHECK_NEAR(score(&sc, &env, x, 1, GBML_OUT_SCORE), 1 + c + 0.03, 0.01);
		}
	}
	free(js);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	rows_free(&t);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

TEST(saga_categorical_standardize_leaves_indicators_alone)
{
	static const char *const names[] = {"amount", "grade"};
	static const double effect[4] = {0, 1, 3, -2};
	int			ncat[] = {0, 4};
	gbml_feature_schema *s = tu_schema(2, names, ncat);
	gbml_param_value p[] = {tu_str("loss", "squared"), tu_bool("standardize", true), tu_num("tol", 1e-8)};
	gbml_env	env;
	gbml_dataset ds;
	cat_rows	t;
	gbml_rng	rng;
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	double		v[1 + 3 * 6];
	const double *w = v + 1,
			   *mean = v + 7,
			   *std = v + 13;

	gbml_env_init_malloc(&env, 1);
	gbml_rng_seed(&rng, 4);
	rows_init(&t, 800, 2);
	for (int64_t i = 0; i < t.n; i++)
	{
		/* rows of grade 1 are twice as common as the others */
		int			g = (int) (i % 5) == 4 ? 1 : (int) (i % 5) % 4;

		t.x[2 * i] = (float) (50 + 100 * gbml_rng_uniform(&rng));
		t.x[2 * i + 1] = (float) g;
		t.label[i] = (float) (0.01 * t.x[2 * i] + effect[g]);
	}
	build(&ds, &env, &t, s, NULL, 0, false);
	model = train(&env, &ds, NULL, p, 3, &len);
	CHECK(model != NULL);
	CHECK(decode_saga(&env, model, len, 6, v));
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	/* the score: the numeric column standardized, the indicators as they are */
	for (int64_t i = 0; i < 40; i++)
	{
		const float *x = t.x + 2 * i;
		double		manual = v[0] + w[0] * ((double) x[0] - mean[0]) / std[0] + w[1 + (int) x[1]];

		CHECK_NEAR(score(&sc, &env, x, 2, GBML_OUT_SCORE), manual, 1e-9 * (1 + fabs(manual)));
		CHECK_NEAR(score(&sc, &env, x, 2, GBML_OUT_SCORE), t.label[i], 0.01);
	}
	CHECK_NEAR(mean[0], 100, 5);
	/* the indicators' statistics are their shares of the rows (stored for importance, not used to scale) */
	CHECK_NEAR(mean[1], 0.2, 1e-12);
	CHECK_NEAR(mean[2], 0.4, 1e-12);
	for (int c = 1; c <= 4; c++)
		CHECK_NEAR(std[c], sqrt(mean[c] * (1 - mean[c])), 1e-12);
	CHECK(mean[5] == 0 && std[5] == 0);
	{
		char	   *js = model_json(&sc, &env);

		CHECK(strstr(js, "\"standardized\":true") && strstr(js, "\"coef_standardized\":["));
		free(js);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	rows_free(&t);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

/* Temporary files made, to see the encoded rows spill. */
static int temp_files;
static void *(*plain_create) (void *ctx, int *read_fd, char *msg, size_t msg_len);

static void *
counting_create(void *ctx, int *read_fd, char *msg, size_t msg_len)
{
	temp_files++;
	return plain_create(ctx, read_fd, msg, msg_len);
}

/* Two numeric and two categorical features (one past the cap, with NULLs), weights, logistic labels. */
static void
mixed_rows(cat_rows *t, int64_t n, uint64_t seed)
{
	gbml_rng	rng;

	gbml_rng_seed(&rng, seed);
	rows_init(t, n, 4);
	for (int64_t i = 0; i < n; i++)
	{
		float	   *x = t->x + 4 * i;
		int			a = (int) gbml_rng_below(&rng, 7),
					b = (int) (gbml_rng_below(&rng, 20) * gbml_rng_uniform(&rng));
		double		z;

		x[0] = (float) (3 * gbml_rng_uniform(&rng) - 1);
		x[1] = a == 6 ? NAN : (float) a;
		x[2] = (float) (10 * gbml_rng_uniform(&rng));
		x[3] = (float) b;
		z = 0.8 * x[0] + (a == 1 ? 1.5 : a == 6 ? -1 : 0) + 0.1 * (x[2] - 5) + (b < 3 ? 0.7 : -0.3);
		t->label[i] = gbml_rng_uniform(&rng) < 1 / (1 + exp(-z)) ? 1.0f : 0.0f;
		t->weight[i] = (float) (0.5 + gbml_rng_uniform(&rng));
	}
}

/*
 * The one-hot encoding of rows in files goes to files too, in the source's
 * canonical order as written: never grouped by hash (it was, for SAGA, so
 * every pass over the encoded rows gathered them on the main thread
 * through the reader's two chunks, and a one-hot SAGA of 500,000 rows at
 * 64 MB failed on those buffers).
 */
TEST(saga_categorical_encoded_rows_in_files_are_not_grouped)
{
	static const char *const names[] = {"n1", "c1", "n2", "c2"};
	int			ncat[] = {0, 6, 0, 20};
	gbml_feature_schema *s = tu_schema(4, names, ncat);
	gbml_saga_params p = {.max_categories = 8};
	cat_rows	t;
	gbml_env	env;
	gbml_dataset ds,
				xds,
				xeval;
	gbml_onehot *enc = NULL;

	mixed_rows(&t, 70000, 9);	/* more than a chunk of encoded rows (65,536) */
	gbml_env_init_malloc(&env, 2);
	env.memory_limit = (size_t) 8 << 20;	/* the encoding (5.3 MB) spills by the budget's plan */
	build(&ds, &env, &t, s, NULL, 512, true);
	CHECK(gbml_dataset_canonicalize(&ds, &env) == GBML_OK);
	CHECK(gbml_saga_one_hot(&ds, NULL, &p, false, &env, &enc, &xds, &xeval) == GBML_OK);
	CHECK(xds.store != NULL && strcmp(xds.store->residence, "file") == 0 && !xds.spill_by_hash);
	CHECK(xds.store->read_any_thread);
	gbml_onehot_finish(enc, &xds, &xeval, &env);
	gbml_dataset_free(&ds, &env);
	rows_free(&t);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

TEST(saga_categorical_same_bytes_any_threads_order_chunks_or_files)
{
	static const char *const names[] = {"n1", "c1", "n2", "c2"};
	int			ncat[] = {0, 6, 0, 20};
	gbml_feature_schema *s = tu_schema(4, names, ncat);
	/* few epochs, tol 0: far from the optimum, so any change of order shows in the bytes */
	gbml_param_value p[] = {tu_num("max_iter", 4), tu_num("tol", 0), tu_num("random_seed", 3),
	tu_num("eval_fraction", 0.2), tu_num("max_categories", 8), tu_bool("standardize", true), tu_num("alpha", 1e-3)};
	cat_rows	t;
	uint8_t    *m[4] = {NULL};
	size_t		len[4] = {0};
	gbml_env	env[4];

	mixed_rows(&t, 6000, 5);
	for (int k = 0; k < 4; k++)
	{
		int64_t    *order = k == 0 ? NULL : tu_shuffled(t.n, (uint64_t) (10 + k));
		gbml_dataset ds;

		gbml_env_init_malloc(&env[k], k == 1 || k == 3 ? 2 : 1);
		if (k >= 2)
		{
			plain_create = env[k].temp_create;
			env[k].temp_create = counting_create;
			temp_files = 0;
		}
		build(&ds, &env[k], &t, s, order, k == 0 ? 700 : k == 1 ? 333 : 512, k >= 2);
		m[k] = train(&env[k], &ds, NULL, p, 7, &len[k]);
		CHECK(m[k] != NULL);
		/*
		 * In files: the rows as written, the held-out rows, and the kept
		 * rows reordered once into canonical order with the split (it was a
		 * reorder of all the rows, then another of the kept ones: 4 files).
		 */
		CHECK(k < 2 || temp_files == 3);
		gbml_dataset_free(&ds, &env[k]);
		free(order);
	}
	CHECK(tu_meta_number(&env[0], m[0], len[0], "one_hot_columns") == 2 + 8 + 9);
	for (int k = 1; k < 4; k++)
		CHECK(len[k] == len[0] && m[k] && memcmp(m[k], m[0], len[0]) == 0);
	for (int k = 0; k < 4; k++)
	{
		gbml_free(&env[k], m[k]);
		CHECK(env[k].memory_used == 0);
	}
	rows_free(&t);
	tu_schema_free(s);
}

TEST(saga_categorical_scoring_raw_rows_matches_training)
{
	static const char *const names[] = {"n1", "c1", "n2", "c2"};
	int			ncat[] = {0, 6, 0, 20};
	gbml_feature_schema *s = tu_schema(4, names, ncat);
	gbml_param_value p[] = {tu_num("max_categories", 5), tu_num("tol", 1e-6)};
	gbml_env	env;
	gbml_dataset ds,
				ev;
	cat_rows	t,
				te;
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	int64_t		right = 0,
				right_eval = 0;

	gbml_env_init_malloc(&env, 2);
	mixed_rows(&t, 3000, 7);
	mixed_rows(&te, 700, 8);
	/* the eval set may hold values training never saw */
	for (int64_t i = 0; i < te.n; i += 9)
		te.x[4 * i + 3] = GBML_CATEGORY_UNSEEN;
	build(&ds, &env, &t, s, NULL, 0, false);
	build(&ev, &env, &te, s, NULL, 0, false);
	model = train(&env, &ds, &ev, p, 2, &len);
	CHECK(model != NULL);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	for (int64_t i = 0; i < t.n; i++)
		right += score(&sc, &env, t.x + 4 * i, 4, GBML_OUT_SCORE) == t.label[i];
	for (int64_t i = 0; i < te.n; i++)
		right_eval += score(&sc, &env, te.x + 4 * i, 4, GBML_OUT_SCORE) == te.label[i];
	/* the trainer measured its accuracy on the encoded rows; scoring encodes the raw ones the same way */
	CHECK(tu_meta_number(&env, model, len, "train_accuracy") == (double) right / (double) t.n);
	CHECK(tu_meta_number(&env, model, len, "eval_accuracy") == (double) right_eval / (double) te.n);
	CHECK((double) right / (double) t.n > 0.6);
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	rows_free(&t);
	rows_free(&te);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

/* Loads bad (a patched copy of a model, checksum fixed); scores a few rows when it loads. */
static int
try_load(gbml_env *env, uint8_t *bad, size_t len)
{
	gbml_scorer sc;
	int			rc;

	tu_fix_crc(bad, len);
	if ((rc = gbml_scorer_load(&sc, env, bad, len)) != GBML_OK)
	{
		CHECK(rc == GBML_ECORRUPT);
		return rc;
	}
	for (int k = 0; k < 4; k++)
	{
		static const float rows[4][4] = {{0, 1, 2, 3}, {1, NAN, 0, 19}, {-1, 5, 3, GBML_CATEGORY_UNSEEN}, {0, 2.5f, 1, 1e9f}};
		double		out = score(&sc, env, rows[k], 4, GBML_OUT_PROBA);

		CHECK(isnan(out) || (out >= 0 && out <= 1));
	}
	gbml_scorer_free(&sc, env);
	return GBML_OK;
}

/* The model with section tag's 4-byte tag renamed (it goes missing). */
static int
load_without(gbml_env *env, const uint8_t *model, size_t len, uint32_t tag)
{
	uint8_t    *bad = malloc(len);
	size_t		off,
				slen;
	int			rc;

	memcpy(bad, model, len);
	CHECK(tu_section_offset(env, model, len, tag, &off, &slen));
	bad[off - 12] = 'X';		/* the section header: u32 tag | u64 length */
	rc = try_load(env, bad, len);
	free(bad);
	return rc;
}

TEST(saga_categorical_damaged_sections_are_corrupt_never_a_crash)
{
	static const char *const names[] = {"n1", "c1", "n2", "c2"};
	int			ncat[] = {0, 6, 0, 20};
	gbml_feature_schema *s = tu_schema(4, names, ncat);
	gbml_param_value p[] = {tu_num("max_iter", 3), tu_num("max_categories", 6)};
	gbml_env	env;
	gbml_dataset ds;
	cat_rows	t;
	uint8_t    *model;
	size_t		len,
				off,
				slen;
	gbml_rng	rng;
	int			rejected = 0,
				accepted = 0;

	gbml_env_init_malloc(&env, 1);
	mixed_rows(&t, 500, 9);
	build(&ds, &env, &t, s, NULL, 0, false);
	model = train(&env, &ds, NULL, p, 2, &len);
	CHECK(model != NULL && try_load(&env, model, len) == GBML_OK);
	/* a categorical feature without its encoding, an encoding without the schema */
	CHECK(load_without(&env, model, len, GBML_SECTION_ONEHOT) == GBML_ECORRUPT);
	CHECK(load_without(&env, model, len, GBML_SECTION_SCHEMA) == GBML_ECORRUPT);
	gbml_rng_seed(&rng, 77);
	for (int trial = 0; trial < 6000; trial++)
	{
		uint8_t    *bad = malloc(len);
		uint32_t	tag = trial % 3 == 2 ? GBML_SECTION_SCHEMA : GBML_SECTION_ONEHOT;
		int			kind = trial % 4;

		memcpy(bad, model, len);
		CHECK(tu_section_offset(&env, model, len, tag, &off, &slen));
		if (kind <= 1)			/* a u32 of the section: small values reach the bounds */
		{
			uint32_t	v = (uint32_t) gbml_rng_next(&rng);

			if (kind == 0)
				v &= 31;
			memcpy(bad + off + 4 * gbml_rng_below(&rng, slen / 4), &v, 4);
		}
		else
			for (int k = 0; k < kind; k++)
				bad[off + gbml_rng_below(&rng, slen)] = (uint8_t) gbml_rng_next(&rng);
		if (try_load(&env, bad, len) == GBML_OK)
			accepted++;
		else
			rejected++;
		free(bad);
	}
	CHECK(rejected > 3000);
	CHECK(accepted > 0);		/* e.g. a changed category name still loads */
	{
		/* SAGA always trains an other column: an encoding without them is refused */
		uint8_t    *bad = malloc(len);
		uint32_t	zero = 0;

		memcpy(bad, model, len);
		CHECK(tu_section_offset(&env, model, len, GBML_SECTION_ONEHOT, &off, &slen));
		memcpy(bad + off + 4, &zero, 4);
		CHECK(try_load(&env, bad, len) == GBML_ECORRUPT);
		free(bad);
	}
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	rows_free(&t);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

/* Trains rows t under schema s; the return code, env's error and hint kept. */
static int
train_rc(gbml_env *env, const cat_rows *t, const gbml_feature_schema *s, const cat_rows *te)
{
	gbml_dataset ds,
				ev;
	uint8_t    *model = NULL;
	size_t		len;
	int			rc;

	build(&ds, env, t, s, NULL, 0, false);
	if (te)
		build(&ev, env, te, s, NULL, 0, false);
	rc = gbml_train_values(env, "saga", NULL, 0, &ds, te ? &ev : NULL, &model, &len);
	gbml_free(env, model);
	gbml_dataset_free(&ds, env);
	if (te)
		gbml_dataset_free(&ev, env);
	return rc;
}

TEST(saga_categorical_bad_values_are_errors_naming_the_column)
{
	static const char *const names[] = {"price", "color"};
	int			ncat[] = {0, 5},
				nonum[] = {0, 0};
	gbml_feature_schema *s = tu_schema(2, names, ncat),
			   *numeric = tu_schema(2, names, nonum);
	gbml_env	env;
	cat_rows	t,
				te;

	gbml_env_init_malloc(&env, 1);
	color_rows(&t, 300, 3);
	color_rows(&te, 50, 4);
	/* NULL in a numeric column: named, with a hint; a categorical one may be NULL */
	t.x[2 * 17] = NAN;
	CHECK(train_rc(&env, &t, s, NULL) == GBML_EINVAL);
	CHECK(strstr(env.error, "column \"price\" (double precision) is NULL, NaN or infinite") && env.hint[0]);
	/* the same in a schema of numeric columns only (no encoding involved) */
	for (int64_t i = 0; i < t.n; i++)
		t.x[2 * i + 1] = (float) (i % 5);
	t.x[2 * 17] = INFINITY;
	CHECK(train_rc(&env, &t, numeric, NULL) == GBML_EINVAL);
	CHECK(strstr(env.error, "column \"price\"") && strstr(env.error, "training set"));
	t.x[2 * 17] = 0.5f;
	CHECK(train_rc(&env, &t, s, NULL) == GBML_OK);
	/* in the eval set too */
	te.x[2 * 3] = NAN;
	CHECK(train_rc(&env, &t, s, &te) == GBML_EINVAL);
	CHECK(strstr(env.error, "column \"price\"") && strstr(env.error, "eval set"));
	te.x[2 * 3] = 0;
	/* an id past the categories, or the unseen id in training rows: the rows and the schema disagree */
	t.x[2 * 5 + 1] = 5;
	CHECK(train_rc(&env, &t, s, NULL) == GBML_EINVAL && strstr(env.error, "column \"color\" holds 5"));
	t.x[2 * 5 + 1] = GBML_CATEGORY_UNSEEN;
	CHECK(train_rc(&env, &t, s, NULL) == GBML_EINVAL && strstr(env.error, "column \"color\" holds -1"));
	t.x[2 * 5 + 1] = 1;
	/* the unseen id in the eval set is fine: the other column */
	te.x[2 * 4 + 1] = GBML_CATEGORY_UNSEEN;
	CHECK(train_rc(&env, &t, s, &te) == GBML_OK);
	{
		/* an eval set whose ids index other categories than the training set's */
		int			other_ncat[] = {0, 4};
		gbml_feature_schema *other = tu_schema(2, names, other_ncat);
		gbml_dataset ds,
					ev;
		uint8_t    *model = NULL;
		size_t		len;

		build(&ds, &env, &t, s, NULL, 0, false);
		build(&ev, &env, &te, other, NULL, 0, false);
		CHECK(gbml_train_values(&env, "saga", NULL, 0, &ds, &ev, &model, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "column \"color\" of the eval set does not have the training set's categories"));
		gbml_dataset_free(&ds, &env);
		gbml_dataset_free(&ev, &env);
		tu_schema_free(other);
	}
	rows_free(&t);
	rows_free(&te);
	tu_schema_free(s);
	tu_schema_free(numeric);
	CHECK(env.memory_used == 0);
}
