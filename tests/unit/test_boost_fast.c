/*
 * test_boost_fast.c — the single-row fast scorer (boost_predict_fast.c)
 * gives bit-identical scores to the scalar scorer: rows on the borders,
 * NaN, infinities, more than one block of 64 trees, several depths, used
 * features in one to eight 16-byte pieces, up to 255 distinct borders a
 * feature (the AVX2 kernel's count and search); with the CPU's kernel and with
 * the AVX2 kernel forced (GBML_FAST_SCORER=avx2), each checked to be
 * taken where the CPU has it.
 */
#include "harness.h"
#include "algorithm.h"
#include "boost.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

/*
 * A feature value: one of a few (on the borders, NaN, infinities) or
 * uniform; `fine`: uniform on a grid of 1,000 values most of the time, so
 * the model has many distinct borders a feature (the two-level search).
 */
static float
feature_value(gbml_rng *rng, bool fine)
{
	static const float values[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 0.1f, NAN, INFINITY, -INFINITY, 0.3333f};
	uint64_t	k = gbml_rng_below(rng, fine ? 40 : 14);

	if (k < 10)
		return values[k];
	return fine ? (float) gbml_rng_below(rng, 1000) / 1000.0f : (float) gbml_rng_uniform(rng);
}

/* Whether the scorer took the fast path (its forest has the SIMD layout). */
static bool
takes_fast_path(const gbml_scorer *sc)
{
	return ((const gbml_boost_model *) sc->handle)->forest.fast != NULL;
}

static void
check_kernel(int depth, int trees, int features, bool fine, bool force_avx2)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_rng	rng;
	gbml_param_value v[4] = {
		tu_num("iterations", trees),
		tu_num("depth", depth),
		tu_num("learning_rate", 0.3),
		tu_num("border_count", fine ? 255 : 32),	/* (32: the default) */
	};
	uint8_t    *model;
	size_t		len;
	gbml_scorer fast,
				slow;
	float	   *x = malloc(sizeof(float) * features);
	int			mismatches = 0;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, true);
	gbml_rng_seed(&rng, (uint64_t) depth * 7 + trees);
	for (int i = 0; i < 3000; i++)
	{
		gbml_row	row = {0};

		for (int j = 0; j < features; j++)
			x[j] = feature_value(&rng, fine);
		if (!isfinite(x[0]))
			x[0] = 0.5f;
		row.x = x;
		row.n_features = features;
		row.label = x[0] * 2 + (isfinite(x[1]) ? x[1] : 0) + (float) gbml_rng_uniform(&rng) * 0.1f;
		if (fine)				/* wiggly in x[0]: splits at many of its borders */
			row.label = (float) (sin(x[0] * 800.0) + (isfinite(x[1]) ? sin(x[1] * 500.0) : 0));
		row.group_is_null = true;
		row.weight_is_null = true;
		CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
	}
	CHECK(gbml_train_values(&env, "boost", v, 4, &ds, NULL, &model, &len) == GBML_OK);
	if (force_avx2)
		setenv("GBML_FAST_SCORER", "avx2", 1);
	CHECK(gbml_scorer_load(&fast, &env, model, len) == GBML_OK);
	unsetenv("GBML_FAST_SCORER");
	/* the fast path is there where the CPU has a kernel (at most 128 used features) */
	if (__builtin_cpu_supports("avx2") && features <= 128)
		CHECK(takes_fast_path(&fast));
	setenv("GBML_NO_FAST_SCORER", "1", 1);
	CHECK(gbml_scorer_load(&slow, &env, model, len) == GBML_OK);
	unsetenv("GBML_NO_FAST_SCORER");
	for (int i = 0; i < 20000; i++)
	{
		double		a,
					b;

		for (int j = 0; j < features; j++)
			x[j] = feature_value(&rng, fine);
		CHECK(gbml_scorer_predict(&fast, &env, x, features, GBML_OUT_SCORE, &a) == GBML_OK);
		CHECK(gbml_scorer_predict(&slow, &env, x, features, GBML_OUT_SCORE, &b) == GBML_OK);
		if (memcmp(&a, &b, sizeof(double)) != 0)
			mismatches++;
	}
	CHECK(mismatches == 0);
	gbml_scorer_free(&fast, &env);
	gbml_scorer_free(&slow, &env);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	free(x);
}

static void
check_depth(int depth, int trees, int features)
{
	check_kernel(depth, trees, features, false, false);
	check_kernel(depth, trees, features, false, true);
}

TEST(boost_fast_scorer_matches_scalar_depth6_many_blocks)
{
	check_depth(6, 150, 12);
}

TEST(boost_fast_scorer_matches_scalar_shallow_and_deep)
{
	check_depth(1, 70, 3);
	check_depth(8, 65, 130);	/* more than 128 used features may fall back: still equal */
}

TEST(boost_fast_scorer_matches_scalar_many_used_features)
{
	check_depth(6, 200, 40);	/* three 16-byte pieces of bins */
	check_depth(5, 130, 120);	/* eight */
}

TEST(boost_fast_scorer_matches_scalar_many_borders)
{
	/* features on a fine grid: over 32 distinct borders a feature, the AVX2 kernel's two-level search */
	check_kernel(6, 300, 6, true, false);
	check_kernel(6, 300, 6, true, true);
	check_kernel(4, 100, 30, true, true);
}
