/*
 * test_kmeans_exact.c — unit tests of what makes K-Means the same on every
 * device (kmeans_exact.h): the fixed-point terms (exact, order-free, the
 * vector kernels equal the scalar definition bit for bit), the k-means++
 * float distances of the vector kernel equal the scalar definition, model
 * bytes that do not depend on how the rows are cut into chunks, and the
 * hybrid split (kmeans_balance.c) driven with simulated slow and fast sides.
 */
#include "harness.h"
#include "algorithm.h"
#include "kmeans.h"
#include "kmeans_balance.h"
#include "kmeans_exact.h"
#include "kmeans_kernels.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

TEST(kmeans_fixed_point_terms_are_exact_and_order_free)
{
	gbml_rng	rng;
	int			n = 20000,
				bits = gbml_km_fix_bits(n);
	double	   *v = malloc(sizeof(double) * n);
	double		mx = 0,
				scale;
	int64_t		fwd = 0,
				bwd = 0,
				halves[2] = {0, 0};

	gbml_rng_seed(&rng, 3);
	for (int i = 0; i < n; i++)
	{
		v[i] = (gbml_rng_uniform(&rng) - 0.5) * 1e6 * (i % 7 == 0 ? 1e-9 : 1);
		if (fabs(v[i]) > mx)
			mx = fabs(v[i]);
	}
	scale = gbml_km_fix_scale(mx, bits);
	for (int i = 0; i < n; i++)
	{
		fwd += gbml_km_fix_term(v[i], scale);
		bwd += gbml_km_fix_term(v[n - 1 - i], scale);
		halves[i % 2] += gbml_km_fix_term(v[i], scale);
	}
	CHECK(fwd == bwd && fwd == halves[0] + halves[1]);
	/* a term is the value rounded to the grid: within half a grid step */
	for (int i = 0; i < n; i += 97)
		CHECK(fabs((double) gbml_km_fix_term(v[i], scale) / scale - v[i]) <= 0.5 / scale);
	/* the sum is close to the double sum (relative to the largest value) */
	{
		double		s = 0;

		for (int i = 0; i < n; i++)
			s += v[i];
		CHECK(fabs(gbml_km_fix_value(fwd, scale) - s) <= 1e-6 * mx);
	}
	/* ties round to even, negative values symmetric */
	CHECK(gbml_km_fix_term(2.5, 1.0) == 2 && gbml_km_fix_term(3.5, 1.0) == 4);
	CHECK(gbml_km_fix_term(-2.5, 1.0) == -2 && gbml_km_fix_term(-0.7, 1.0) == -1);
	CHECK(gbml_km_fix_bits(1) == GBML_KM_FIX_BITS_MAX && gbml_km_fix_bits(10000000) == 62 - 24);
	free(v);
}

TEST(kmeans_vector_kernels_equal_the_scalar_definitions)
{
	gbml_rng	rng;
	int			n = 301,
				d = 37,
				k = 5,
				T = 3;
	float	   *x = malloc(sizeof(float) * n * d);
	double	   *scale = malloc(sizeof(double) * n);
	double	   *fs = malloc(sizeof(double) * d);
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	int64_t    *sums = calloc((size_t) k * d, sizeof(int64_t)),
			   *ref = calloc((size_t) k * d, sizeof(int64_t));
	int64_t		counts[5] = {0},
				pot[3] = {0},
				pot_ref[3] = {0};
	float	   *cand = calloc((size_t) d * GBML_KM_CAND_LANES, sizeof(float));
	float	   *closest = malloc(sizeof(float) * n);
	float	   *out = malloc(sizeof(float) * n * T);
	int			bad = 0;

	gbml_rng_seed(&rng, 9);
	for (int i = 0; i < n * d; i++)
		x[i] = (float) ((gbml_rng_uniform(&rng) - 0.3) * (1 + i % 11) * 100);
	for (int i = 0; i < n; i++)
	{
		scale[i] = 1.0 / (1 + gbml_rng_uniform(&rng));
		lab[i] = (int32_t) gbml_rng_below(&rng, (uint64_t) k);
		closest[i] = i % 3 == 0 ? INFINITY : (float) (gbml_rng_uniform(&rng) * 1e6);
	}
	for (int j = 0; j < d; j++)
		fs[j] = gbml_km_fix_scale(100.0 * (1 + j % 11), gbml_km_fix_bits(n));
	for (int j = 0; j < d * GBML_KM_CAND_LANES; j++)
		cand[j] = (float) ((gbml_rng_uniform(&rng) - 0.3) * 300);

	for (int pass = 0; pass < 2; pass++)
	{
		const double *sc = pass ? scale : NULL;

		memset(sums, 0, sizeof(int64_t) * k * d);
		memset(ref, 0, sizeof(int64_t) * k * d);
		gbml_km_accumulate(x, n, d, lab, sc, fs, sums, counts);
		for (int i = 0; i < n; i++)
			for (int j = 0; j < d; j++)
				ref[lab[i] * d + j] += gbml_km_fix_term((double) x[i * d + j] * (sc ? sc[i] : 1.0), fs[j]);
		CHECK(memcmp(sums, ref, sizeof(int64_t) * k * d) == 0);

		memset(pot, 0, sizeof(pot));
		memset(pot_ref, 0, sizeof(pot_ref));
		gbml_km_candidate_dist(x, n, d, sc, cand, T, closest, out, 1.0 / 64, pot);
		for (int i = 0; i < n; i++)
			for (int t = 0; t < T; t++)
			{
				float		a = gbml_km_cand_dist(x + i * d, sc ? (float) sc[i] : 1.0f, cand + t,
												  GBML_KM_CAND_LANES, d);
				float		v = a < closest[i] ? a : closest[i];

				bad += memcmp(&v, &out[t * n + i], sizeof(float)) != 0;
				pot_ref[t] += gbml_km_fix_term((double) v, 1.0 / 64);
			}
		CHECK(bad == 0);
		CHECK(memcmp(pot, pot_ref, sizeof(pot)) == 0);
	}
	free(x);
	free(scale);
	free(fs);
	free(lab);
	free(sums);
	free(ref);
	free(cand);
	free(closest);
	free(out);
}

/* The model bytes of a fit of the same rows cut into chunks of chunk_rows. */
static uint8_t *
fit_bytes(int64_t chunk_rows, bool spherical, const char *init, size_t *len)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_rng	rng;
	float		x[9];
	uint8_t    *model,
			   *copy;
	gbml_param_value vals[5] = {
		tu_num("k", 13), tu_num("random_seed", 4), tu_num("n_init", 2),
		tu_bool("spherical", spherical), tu_str("init", init),
	};

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	ds.chunk_rows = chunk_rows;
	gbml_rng_seed(&rng, 21);
	for (int i = 0; i < 6000; i++)
	{
		gbml_row	row = {0};

		for (int j = 0; j < 9; j++)
			x[j] = (float) (gbml_rng_uniform(&rng) * 10 + (i % 5) * (j == i % 9) * 4 + 1000);
		row.x = x;
		row.n_features = 9;
		row.label_is_null = row.group_is_null = row.weight_is_null = true;
		CHECK(gbml_dataset_append(&ds, &env, &row, false) == GBML_OK);
	}
	CHECK(gbml_train_values(&env, "kmeans", vals, 5, &ds, NULL, &model, len) == GBML_OK);
	copy = memcpy(malloc(*len), model, *len);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	return copy;
}

TEST(kmeans_model_bytes_do_not_depend_on_chunking)
{
	for (int mode = 0; mode < 3; mode++)
	{
		bool		sph = mode == 1;
		const char *init = mode == 2 ? "random" : "k-means++";
		size_t		la,
					lb,
					lc;
		uint8_t    *a = fit_bytes(65536, sph, init, &la),
				   *b = fit_bytes(700, sph, init, &lb),
				   *c = fit_bytes(64, sph, init, &lc);

		CHECK(la == lb && lb == lc);
		CHECK(memcmp(a, b, la) == 0 && memcmp(b, c, la) == 0);
		free(a);
		free(b);
		free(c);
	}
}

/* Runs the balancer on rows split in nb equal blocks with the given per-row costs. */
static int
simulate(gbml_km_balance *bal, double gpu_cost, double cpu_cost, int iterations)
{
	int			g = bal->gpu_blocks;

	for (int it = 0; it < iterations; it++)
	{
		int64_t		gr = bal->rows_before[g],
					cr = bal->rows_before[bal->n_blocks] - gr;

		g = gbml_km_balance_next(bal, gr * gpu_cost, cr * cpu_cost);
	}
	return g;
}

TEST(kmeans_hybrid_split_follows_measured_speeds)
{
	int64_t		rows_before[101];
	gbml_km_balance bal;
	int			moves;

	for (int b = 0; b <= 100; b++)
		rows_before[b] = (int64_t) b * 1000;
	/* the GPU 4x faster: from half and half to 80 % within two iterations, then still */
	gbml_km_balance_init(&bal, 100, rows_before, 50);
	CHECK(simulate(&bal, 1.0, 4.0, 2) == 80);
	moves = bal.moves;
	CHECK(simulate(&bal, 1.0, 4.0, 5) == 80 && bal.moves == moves);
	/* the GPU slows down 16x (now 4x slower than the CPU): the split follows */
	CHECK(simulate(&bal, 16.0, 4.0, 2) == 20);
	/* noise of a few percent moves nothing */
	moves = bal.moves;
	CHECK(simulate(&bal, 16.0 * 1.01, 4.0, 1) == 20 && simulate(&bal, 16.0, 4.0 * 1.01, 1) == 20);
	CHECK(bal.moves == moves);
	/* a side 1000x slower gets nothing; the trace keeps each iteration's split */
	CHECK(simulate(&bal, 1.0, 1000.0, 2) == 100);
	CHECK(bal.n_trace == 13 && bal.trace[0] == 50 && bal.trace[1] == 80);
	/* the device's memory cap bounds the split */
	gbml_km_balance_init(&bal, 100, rows_before, 30);
	bal.max_gpu_blocks = 30;
	CHECK(simulate(&bal, 1.0, 10.0, 3) == 30);
	/* a side that never ran keeps the split where it is */
	gbml_km_balance_init(&bal, 100, rows_before, 0);
	CHECK(simulate(&bal, 1.0, 10.0, 3) == 0);
}
