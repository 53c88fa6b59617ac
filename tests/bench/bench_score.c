/*
 * bench_score.c — the single-row boosting scorer (what `gbml.predict` runs
 * per row) timed apart from PostgreSQL: the CPU's fast kernel (AVX-512 VBMI
 * or AVX2), the AVX2 kernel forced, and the scalar walk, on the same model
 * and rows in one run, with their scores checked equal bit for bit.
 *
 *   make -s -f tests/bench/bench.mk tests/bench/bin/bench_score
 *   tests/bench/bin/bench_score [features=100] [trees=500] [informative=4] [rows=100000]
 *
 * The model: depth 6, learning rate 0.05, border_count 32, trained on
 * 20,000 uniform rows whose label depends on the first `informative`
 * features (4: the SQL scoring bench's x1 * 3 + x2 * x3 + sin(6 x4); more:
 * a sum of sines over that many), so its later trees split on a few
 * features (4) or on most of them (all informative).  Prints ns a row, best
 * of 5 passes over the rows, and the kernels' ratios to the scalar walk.
 *
 *   tests/bench/bin/bench_score kmeans [features=100] [k=20] [rows=100000]
 *
 * times K-Means' single-row scorer (`gbml.kmeans_distance`) instead: a
 * Euclidean and a spherical model (random_seed 1) of 20,000 uniform rows,
 * ns a row and the sum of the rows' distances (equal across builds that
 * compute the same doubles).
 */
#include "algorithm.h"
#include "bench_util.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float
label_of(const float *x, int informative)
{
	double		y = 0;

	if (informative <= 4)
		return x[0] * 3 + x[1] * x[2] + sinf(x[3] * 6);
	for (int j = 0; j < informative; j++)
		y += sin(x[j] * (1 + j % 5)) * (1.0 + j % 3);
	return (float) y;
}

/* The model loaded with the environment variable var set to value (NULL: none), and its rows' scores timed. */
static double
time_scorer(const uint8_t *model, size_t len, const char *var, const char *value, const float *rows, int d, int n,
			gbml_output what, double *scores)
{
	gbml_env	env;
	gbml_scorer sc;
	double		best = INFINITY;

	if (var)
		setenv(var, value, 1);
	gbml_env_init_malloc(&env, 1);
	if (gbml_scorer_load(&sc, &env, model, len) != GBML_OK)
	{
		fprintf(stderr, "bench_score: loading the model: %s\n", env.error);
		exit(1);
	}
	if (var)
		unsetenv(var);
	for (int pass = 0; pass < 5; pass++)
	{
		double		t0 = gbml_now();

		for (int i = 0; i < n; i++)
			(void) gbml_scorer_predict(&sc, &env, rows + (size_t) i * (size_t) d, d, what, &scores[i]);
		best = fmin(best, (gbml_now() - t0) * 1e9 / n);
	}
	gbml_scorer_free(&sc, &env);
	return best;
}

/* `bench_score kmeans ...`: K-Means' single-row distance, Euclidean and spherical. */
static int
bench_kmeans(int d, int k, int n)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * (size_t) d),
			   *rows = malloc(sizeof(float) * (size_t) d * (size_t) n);
	double	   *dist = malloc(sizeof(double) * (size_t) n);

	gbml_rng_seed(&rng, 1);
	for (size_t i = 0; i < (size_t) d * (size_t) n; i++)
		rows[i] = (float) gbml_rng_uniform(&rng);
	printf("K-Means, k %d, %d features, %d rows, ns a row (best of 5 passes):\n", k, d, n);
	for (int spherical = 0; spherical < 2; spherical++)
	{
		gbml_param_value v[3];
		char		kk[32];
		gbml_env	env;
		gbml_dataset ds;
		uint8_t    *model;
		size_t		len;
		double		t,
					sum = 0;

		snprintf(kk, sizeof(kk), "%d", k);
		bu_param_value("k", kk, &v[0]);
		bu_param_value("random_seed", "1", &v[1]);
		bu_param_value("spherical", spherical ? "true" : "false", &v[2]);
		gbml_env_init_malloc(&env, 2);
		gbml_dataset_init(&ds, false);
		for (int i = 0; i < 20000; i++)
		{
			gbml_row	row = {.x = x,.n_features = d,.label_is_null = true,.group_is_null = true,.weight_is_null = true};

			for (int j = 0; j < d; j++)
				x[j] = (float) gbml_rng_uniform(&rng);
			if (gbml_dataset_append(&ds, &env, &row, false) != GBML_OK)
				return fprintf(stderr, "bench_score: %s\n", env.error), 1;
		}
		if (gbml_train_values(&env, "kmeans", v, 3, &ds, NULL, &model, &len) != GBML_OK)
			return fprintf(stderr, "bench_score: training: %s\n", env.error), 1;
		t = time_scorer(model, len, NULL, NULL, rows, d, n, GBML_OUT_DISTANCE, dist);
		for (int i = 0; i < n; i++)
			sum += dist[i];
		printf("  %-9s %8.1f   (sum of distances %.17g)\n", spherical ? "spherical" : "Euclidean", t, sum);
		gbml_free(&env, model);
		gbml_dataset_free(&ds, &env);
	}
	free(x);
	free(rows);
	free(dist);
	return 0;
}

/* The boosting scorer's kernels against the scalar walk. */
static int
bench_boost(int d, int trees, int informative, int n)
{
	gbml_param_value v[4];
	char		iters[32];
	gbml_env	env;
	gbml_dataset ds;
	gbml_rng	rng;			/* the same rows every run */
	float	   *x,
			   *rows;
	uint8_t    *model;
	size_t		len;
	double	   *fast,
			   *avx2,
			   *scalar,
				t_fast,
				t_avx2,
				t_scalar;

	if (d < 4 || trees < 1 || informative < 1 || informative > d || n < 1)
	{
		fprintf(stderr, "usage: bench_score [features >= 4] [trees] [informative <= features] [rows]\n");
		return 2;
	}
	snprintf(iters, sizeof(iters), "%d", trees);
	bu_param_value("iterations", iters, &v[0]);
	bu_param_value("depth", "6", &v[1]);
	bu_param_value("learning_rate", "0.05", &v[2]);
	bu_param_value("border_count", "32", &v[3]);
	x = malloc(sizeof(float) * (size_t) d);
	rows = malloc(sizeof(float) * (size_t) d * (size_t) n);
	fast = malloc(sizeof(double) * (size_t) n);
	avx2 = malloc(sizeof(double) * (size_t) n);
	scalar = malloc(sizeof(double) * (size_t) n);
	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, true);
	gbml_rng_seed(&rng, 1);
	for (int i = 0; i < 20000; i++)
	{
		gbml_row	row = {0};

		for (int j = 0; j < d; j++)
			x[j] = (float) gbml_rng_uniform(&rng);
		row.x = x;
		row.n_features = d;
		row.label = label_of(x, informative);
		row.group_is_null = true;
		row.weight_is_null = true;
		if (gbml_dataset_append(&ds, &env, &row, true) != GBML_OK)
		{
			fprintf(stderr, "bench_score: %s\n", env.error);
			return 1;
		}
	}
	if (gbml_train_values(&env, "boost", v, 4, &ds, NULL, &model, &len) != GBML_OK)
	{
		fprintf(stderr, "bench_score: training: %s\n", env.error);
		return 1;
	}
	for (size_t i = 0; i < (size_t) d * (size_t) n; i++)
		rows[i] = (float) gbml_rng_uniform(&rng);
	t_fast = time_scorer(model, len, NULL, NULL, rows, d, n, GBML_OUT_SCORE, fast);
	t_avx2 = time_scorer(model, len, "GBML_FAST_SCORER", "avx2", rows, d, n, GBML_OUT_SCORE, avx2);
	t_scalar = time_scorer(model, len, "GBML_NO_FAST_SCORER", "1", rows, d, n, GBML_OUT_SCORE, scalar);
	printf("%d trees of depth 6, %d features (%d informative), %d rows, ns a row (best of 5 passes):\n", trees, d,
		   informative, n);
	printf("  the CPU's kernel %8.1f   (scalar / kernel %.2f)\n", t_fast, t_scalar / t_fast);
	printf("  AVX2 forced      %8.1f   (scalar / AVX2 %.2f)\n", t_avx2, t_scalar / t_avx2);
	printf("  scalar walk      %8.1f\n", t_scalar);
	printf("  same scores: %s\n",
		   memcmp(fast, scalar, sizeof(double) * (size_t) n) == 0 &&
		   memcmp(avx2, scalar, sizeof(double) * (size_t) n) == 0 ? "yes" : "NO");
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	free(x);
	free(rows);
	free(fast);
	free(avx2);
	free(scalar);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "kmeans") == 0)
		return bench_kmeans(argc > 2 ? atoi(argv[2]) : 100, argc > 3 ? atoi(argv[3]) : 20,
							argc > 4 ? atoi(argv[4]) : 100000);
	return bench_boost(argc > 1 ? atoi(argv[1]) : 100, argc > 2 ? atoi(argv[2]) : 500, argc > 3 ? atoi(argv[3]) : 4,
					   argc > 4 ? atoi(argv[4]) : 100000);
}
