/*
 * test_kmeans_categorical.c — K-Means with categorical features
 * (kmeans_model.c, onehot.h): without "one_hot" an error naming the column
 * with a hint; with it each category (NULL included) is a 0/1 column, so
 * rows that differ only by category separate; scoring a raw row gives the
 * distances of its encoded row bit for bit, an unseen value's columns all
 * zero; the bytes do not depend on threads or row order; importance is per
 * input column; a damaged encoding is GBML_ECORRUPT.
 */
#include "harness.h"
#include "algorithm.h"
#include "chunk_store_file.h"
#include "kmeans.h"
#include "kmeans_kernels.h"
#include "onehot.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"height", "city"};

/*
 * n rows of (height, city): city = i % 4 (3: NULL), height a little noise
 * around 0, so only the city tells the rows apart.
 */
static float *
city_rows(int64_t n, uint64_t seed)
{
	float	   *x = malloc(sizeof(float) * (size_t) (2 * n));
	gbml_rng	rng;

	gbml_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
	{
		x[2 * i] = (float) (0.2 * gbml_rng_uniform(&rng) - 0.1);
		x[2 * i + 1] = i % 4 == 3 ? NAN : (float) (i % 4);
	}
	return x;
}

/*
 * The rows x (n x 2) in order `order` (NULL: as they are), with schema s, in
 * chunks of chunk_rows (0: default), in temporary files when files.
 */
static void
build_chunks(gbml_dataset *ds, gbml_env *env, const float *x, int64_t n, const gbml_feature_schema *s,
			 const int64_t *order, int64_t chunk_rows, bool files)
{
	gbml_dataset_init(ds, true);
	ds->schema = s;
	if (chunk_rows > 0)
		ds->chunk_rows = chunk_rows;
	if (files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t k = 0; k < n; k++)
	{
		int64_t		i = order ? order[k] : k;
		gbml_row	row = {.x = x + 2 * i,.n_features = 2,.label_is_null = true,.group_is_null = true,
		.weight_is_null = true};

		CHECK(gbml_dataset_append(ds, env, &row, false) == GBML_OK);
	}
}

static void
build(gbml_dataset *ds, gbml_env *env, const float *x, int64_t n, const gbml_feature_schema *s, const int64_t *order)
{
	build_chunks(ds, env, x, n, s, order, 0, false);
}

/* Trains K-Means with k and one_hot (and spherical) on the rows; the model or NULL (env's error set). */
static uint8_t *
train(gbml_env *env, gbml_dataset *ds, int k, bool one_hot, bool spherical, size_t *len)
{
	gbml_param_value p[] = {tu_num("k", k), tu_bool("one_hot", one_hot), tu_bool("spherical", spherical),
	tu_num("random_seed", 1), tu_num("n_init", 3)};
	uint8_t    *model = NULL;

	if (gbml_train_values(env, "kmeans", p, 5, ds, NULL, &model, len) != GBML_OK)
	{
		if (one_hot)
			fprintf(stderr, "  kmeans: %s\n", env->error);
		return NULL;
	}
	return model;
}

static double
score(const gbml_scorer *sc, gbml_env *env, const float *x, gbml_output what)
{
	double		out = NAN;

	CHECK(gbml_scorer_predict(sc, env, x, 2, what, &out) == GBML_OK);
	return out;
}

TEST(kmeans_categorical_needs_one_hot_and_says_so)
{
	int			ncat[] = {0, 3};
	gbml_feature_schema *s = tu_schema(2, names, ncat);
	gbml_env	env;
	gbml_dataset ds;
	float	   *x = city_rows(200, 1);
	size_t		len;

	gbml_env_init_malloc(&env, 1);
	build(&ds, &env, x, 200, s, NULL);
	CHECK(train(&env, &ds, 3, false, false, &len) == NULL);
	CHECK(env.error_code == GBML_EINVAL);
	CHECK(strstr(env.error, "column \"city\" (text) is categorical"));
	CHECK(strstr(env.hint, "\"one_hot\": true"));
	gbml_dataset_free(&ds, &env);
	{
		/* an init matrix cannot go with one_hot: its columns are not known yet */
		double		init[2] = {0, 1};
		gbml_param_value p[] = {tu_num("k", 1), tu_bool("one_hot", true),
		{.key = "init",.kind = GBML_VALUE_MATRIX,.matrix = {init, 1, 2}}};
		uint8_t    *model = NULL;

		build(&ds, &env, x, 200, s, NULL);
		CHECK(gbml_train_values(&env, "kmeans", p, 3, &ds, NULL, &model, &len) == GBML_EINVAL);
		CHECK(strstr(env.error, "\"init\" as an array") && model == NULL);
		p[2] = tu_str("init", "random");
		CHECK(gbml_train_values(&env, "kmeans", p, 3, &ds, NULL, &model, &len) == GBML_OK);
		gbml_free(&env, model);
		gbml_dataset_free(&ds, &env);
	}
	/* with a schema, a NaN in a numeric column is named (no categorical feature involved) */
	{
		int			nonum[] = {0, 0};
		gbml_feature_schema *numeric = tu_schema(2, names, nonum);

		x[2 * 7 + 1] = 1;
		for (int64_t i = 0; i < 200; i++)
			x[2 * i + 1] = (float) (i % 3);
		x[2 * 9] = NAN;
		build(&ds, &env, x, 200, numeric, NULL);
		CHECK(train(&env, &ds, 3, false, false, &len) == NULL);
		CHECK(strstr(env.error, "column \"height\"") && env.hint[0]);
		gbml_dataset_free(&ds, &env);
		tu_schema_free(numeric);
	}
	free(x);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_categorical_one_hot_clusters_separate_by_category)
{
	int			ncat[] = {0, 3};
	gbml_feature_schema *s = tu_schema(2, names, ncat);
	gbml_env	env;
	gbml_dataset ds;
	int64_t		n = 400;
	float	   *x = city_rows(n, 2);
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	int			cluster_of[4];
	double		imp[2];

	gbml_env_init_malloc(&env, 1);
	build(&ds, &env, x, n, s, NULL);
	model = train(&env, &ds, 4, true, false, &len);
	CHECK(model != NULL);
	/* 1 numeric + 3 cities + NULL, no other column */
	CHECK(tu_meta_number(&env, model, len, "one_hot_columns") == 5);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	for (int c = 0; c < 4; c++)
		cluster_of[c] = (int) score(&sc, &env, x + 2 * c, GBML_OUT_CLUSTER);
	/* four cities (NULL one of them), four clusters */
	for (int a = 0; a < 4; a++)
		for (int b = a + 1; b < 4; b++)
			CHECK(cluster_of[a] != cluster_of[b]);
	for (int64_t i = 0; i < n; i++)
		CHECK(score(&sc, &env, x + 2 * i, GBML_OUT_CLUSTER) == cluster_of[i % 4]);
	CHECK(sc.algo->importance(sc.handle, imp) == GBML_OK);
	CHECK_NEAR(imp[0] + imp[1], 1, 1e-12);
	CHECK(imp[1] > 0.99);
	{
		gbml_strbuf js;

		gbml_sb_init(&js, &env);
		CHECK(sc.algo->to_json(sc.handle, &js) == GBML_OK);
		CHECK(strstr(js.data, "\"columns\":[{\"feature\":\"height\"},{\"feature\":\"city\",\"category\":\"v000\"},"
					 "{\"feature\":\"city\",\"category\":\"v001\"},{\"feature\":\"city\",\"category\":\"v002\"},"
					 "{\"feature\":\"city\",\"category\":null}]"));
		gbml_sb_free(&js);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	free(x);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

/* The centroids (k x d) of a model's KMNS section: after u32 version, k, d, flags, f64 inertia, u64 sizes[k]. */
static const uint8_t *
centroids_of(gbml_env *env, const uint8_t *model, size_t len, int k, int d)
{
	size_t		off,
				slen;

	if (!tu_section_offset(env, model, len, GBML_TAG('K', 'M', 'N', 'S'), &off, &slen) ||
		slen != 24 + 8 * (size_t) k + 8 * (size_t) k * d)
		return NULL;
	return model + off + 24 + 8 * (size_t) k;
}

TEST(kmeans_categorical_scoring_is_the_encoded_rows_distance)
{
	int			ncat[] = {0, 5};	/* cities 3 and 4 never occur: like unseen values, all zeros */
	gbml_feature_schema *s = tu_schema(2, names, ncat);
	gbml_env	env;
	gbml_dataset ds;
	int64_t		n = 300;
	float	   *x = city_rows(n, 3);
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	double		c[3 * 5];

	gbml_env_init_malloc(&env, 1);
	for (int64_t i = 0; i < n; i++)
		x[2 * i] = (float) (i % 11) - 5;	/* a real numeric spread */
	build(&ds, &env, x, n, s, NULL);
	model = train(&env, &ds, 3, true, false, &len);
	CHECK(model != NULL);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(centroids_of(&env, model, len, 3, 5) != NULL);
	memcpy(c, centroids_of(&env, model, len, 3, 5), sizeof(c));
	for (int t = 0; t < 9; t++)
	{
		/* cities 0..2, NULL, never-seen 3 and 4, the unseen id, a non-id */
		static const float city[9] = {0, 1, 2, NAN, 3, 4, GBML_CATEGORY_UNSEEN, 2.5f, 1e9f};
		float		raw[2] = {(float) t - 4, city[t]},
					enc[5] = {raw[0], 0, 0, 0, 0};
		double		best = INFINITY;
		int			arg = 0;

		if (t < 3)
			enc[1 + t] = 1;
		else if (t == 3)
			enc[4] = 1;
		for (int j = 0; j < 3; j++)
		{
			double		d2 = gbml_km_sqdist(enc, 1.0, c + 5 * j, 5);

			if (d2 < best)
			{
				best = d2;
				arg = j;
			}
		}
		CHECK(score(&sc, &env, raw, GBML_OUT_DISTANCE) == sqrt(best));
		CHECK(score(&sc, &env, raw, GBML_OUT_CLUSTER) == arg);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	/* the spherical mode too: the cosine of the encoded row */
	model = train(&env, &ds, 3, true, true, &len);
	CHECK(model != NULL);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	memcpy(c, centroids_of(&env, model, len, 3, 5), sizeof(c));
	{
		float		raw[2] = {2, 1},
					enc[5] = {2, 0, 1, 0, 0};
		double		xn = 0,
					best = INFINITY;

		for (int i = 0; i < 5; i++)
			xn += (double) enc[i] * enc[i];
		xn = sqrt(xn);
		for (int j = 0; j < 3; j++)
		{
			double		dot = 0,
						cn = 0;

			for (int i = 0; i < 5; i++)
			{
				dot += enc[i] * c[5 * j + i];
				cn += c[5 * j + i] * c[5 * j + i];
			}
			best = fmin(best, 1.0 - dot / (xn * sqrt(cn)));
		}
		CHECK(score(&sc, &env, raw, GBML_OUT_DISTANCE) == best);
	}
	gbml_scorer_free(&sc, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	free(x);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_categorical_same_bytes_any_threads_or_order)
{
	int			ncat[] = {0, 3};
	gbml_feature_schema *s = tu_schema(2, names, ncat);
	int64_t		n = 5000;
	float	   *x = city_rows(n, 4);
	uint8_t    *m[5];
	size_t		len[5];
	gbml_env	env[5];

	for (int64_t i = 0; i < n; i++)
		x[2 * i] = (float) (i % 97) * 0.37f;
	for (int k = 0; k < 5; k++)
	{
		int64_t    *order = k ? tu_shuffled(n, (uint64_t) k) : NULL;
		gbml_dataset ds;

		gbml_env_init_malloc(&env[k], k == 2 ? 2 : 1);
		/* k 4: in temporary files, kept in the order written: the encoded rows take the ranks */
		build_chunks(&ds, &env[k], x, n, s, order, k == 1 ? 333 : k == 4 ? 700 : 0, k == 4);
		/* chunks that are not the canonical layout (as after a merge): the rows are laid out again, schema kept */
		if (k == 3)
			ds.chunk_rows = 333;
		m[k] = train(&env[k], &ds, 5, true, false, &len[k]);
		CHECK(m[k] != NULL);
		gbml_dataset_free(&ds, &env[k]);
		free(order);
	}
	for (int k = 1; k < 5; k++)
		CHECK(m[k] && len[k] == len[0] && memcmp(m[k], m[0], len[0]) == 0);
	for (int k = 0; k < 5; k++)
	{
		gbml_free(&env[k], m[k]);
		CHECK(env[k].memory_used == 0);
	}
	free(x);
	tu_schema_free(s);
}

TEST(kmeans_categorical_damaged_encoding_is_corrupt)
{
	int			ncat[] = {0, 3};
	gbml_feature_schema *s = tu_schema(2, names, ncat);
	gbml_env	env;
	gbml_dataset ds;
	float	   *x = city_rows(200, 5);
	uint8_t    *model,
			   *bad;
	size_t		len,
				off,
				slen;
	gbml_rng	rng;
	gbml_scorer sc;
	int			rejected = 0;

	gbml_env_init_malloc(&env, 1);
	build(&ds, &env, x, 200, s, NULL);
	model = train(&env, &ds, 2, true, false, &len);
	CHECK(model != NULL);
	CHECK(tu_section_offset(&env, model, len, GBML_SECTION_ONEHOT, &off, &slen));
	bad = malloc(len);
	gbml_rng_seed(&rng, 5);
	for (int trial = 0; trial < 3000; trial++)
	{
		uint32_t	v = (uint32_t) gbml_rng_next(&rng) & (trial % 2 ? 7u : ~0u);

		memcpy(bad, model, len);
		memcpy(bad + off + 4 * gbml_rng_below(&rng, slen / 4), &v, 4);
		tu_fix_crc(bad, len);
		if (gbml_scorer_load(&sc, &env, bad, len) != GBML_OK)
		{
			CHECK(env.error_code == GBML_ECORRUPT);
			rejected++;
			continue;
		}
		for (int i = 0; i < 4; i++)
		{
			double		out = score(&sc, &env, x + 2 * i, GBML_OUT_DISTANCE);

			CHECK(isnan(out) || out >= 0);
		}
		gbml_scorer_free(&sc, &env);
	}
	CHECK(rejected > 1500);
	/* an encoding with "other" columns is not one K-Means trains */
	{
		uint32_t	other = 1;

		memcpy(bad, model, len);
		memcpy(bad + off + 4, &other, 4);
		tu_fix_crc(bad, len);
		CHECK(gbml_scorer_load(&sc, &env, bad, len) == GBML_ECORRUPT);
	}
	free(bad);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	free(x);
	tu_schema_free(s);
	CHECK(env.memory_used == 0);
}
