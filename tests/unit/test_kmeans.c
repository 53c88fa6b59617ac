/*
 * test_kmeans.c — unit tests of K-Means (src/core/kmeans*.c): the assignment
 * kernel against the exact double argmin on every ISA variant (near ties
 * included), recovery of separated blobs, determinism over thread counts,
 * the stop rules, empty-cluster relocation, argument errors (k > rows, k
 * missing, bad init matrix, NaN, zero rows in the spherical mode), the
 * spherical mode, n_init, the stored model (assign / distance / JSON), a
 * crafted model with a valid checksum, and cancellation.
 */
#include "harness.h"
#include "algorithm.h"
#include "kmeans.h"
#include "kmeans_kernels.h"
#include "rng.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Gaussian-ish blobs: `centers` blob centres on a grid of spacing `sep`, noise in [-1, 1). */
static void
fill_blobs(gbml_dataset *ds, gbml_env *env, int64_t n, int d, int centers, double sep, uint64_t seed)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * d);

	gbml_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (i % centers);
		gbml_row	row = {0};

		for (int j = 0; j < d; j++)
			x[j] = (float) ((j == c % d ? sep * (1 + c / d) : 0.0) + (gbml_rng_uniform(&rng) * 2 - 1));
		row.x = x;
		row.n_features = d;
		row.label_is_null = true;
		row.group_is_null = true;
		row.weight_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, false) == GBML_OK);
	}
	free(x);
}

static void
default_params(gbml_kmeans_params *p, int64_t k)
{
	memset(p, 0, sizeof(*p));
	p->k = k;
	p->init.choice = GBML_KM_INIT_KMEANSPP;
	p->n_init = 1;
	p->max_iter = 300;
	p->tol = 1e-4;
	p->min_frac_changed = 0.001;
}

/* Labels of every row, flattened. */
static int32_t *
flat_labels(const gbml_kmeans_result *r, const gbml_dataset *ds)
{
	int32_t    *out = malloc(sizeof(int32_t) * (size_t) ds->n_rows);
	int64_t		g = 0;

	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t i = 0; i < ds->chunks[c]->n_rows; i++)
			out[g++] = r->labels[c][i];
	return out;
}

TEST(kmeans_kernel_matches_exact_argmin_on_every_isa)
{
	/* "panels" = the CPU's best ISA without the small-k tile */
	const char *isas[] = {"avx512", "avx2", "generic", "panels"};
	/* the small-k tile's vector-count boundaries (16 and 8 lanes), then random k */
	const int	ks[] = {1, 2, 8, 9, 15, 16, 17, 24, 25, 32, 33, 48, 49, 63, 64, 65};
	const int	nks = (int) (sizeof(ks) / sizeof(ks[0]));
	gbml_rng	rng;

	gbml_rng_seed(&rng, 7);
	for (int trial = 0; trial < nks + 6; trial++)
	{
		int			d = trial == 0 ? 1 : (int) (3 + gbml_rng_below(&rng, 70));
		int			k = trial < nks ? ks[trial] : (int) (1 + gbml_rng_below(&rng, 90));
		int			n = 700;
		int			kp = gbml_km_padded(k);
		float	   *x = malloc(sizeof(float) * n * d);
		double	   *c = malloc(sizeof(double) * k * d);
		double	   *xn = malloc(sizeof(double) * n);
		float	   *panels = malloc(sizeof(float) * kp * d);
		double	   *panels_d = malloc(sizeof(double) * kp * d);
		float	   *cnorm = malloc(sizeof(float) * kp);
		double	   *cnorm_d = malloc(sizeof(double) * k);
		int32_t    *lab = malloc(sizeof(int32_t) * n);
		double		xmax = 0;

		for (int j = 0; j < k * d; j++)
			c[j] = gbml_rng_uniform(&rng) * 10 + 100;	/* far from the origin: cancellation */
		if (trial % 2 == 1 && k >= 3)
		{
			/*
			 * One centroid far out (cmax >> |x|): the small-k tile then
			 * decides with its local error bound, which the near ties
			 * below must not fool.
			 */
			for (int j = 0; j < d; j++)
				c[(k - 1) * d + j] = 3e4 + gbml_rng_uniform(&rng) * 100;
		}
		for (int i = 0; i < n; i++)
		{
			if (i % 3 == 0 && k >= 2)
			{
				/* exactly between centroids 0 and 1 (up to float rounding): a near tie */
				for (int j = 0; j < d; j++)
					x[i * d + j] = (float) ((c[j] + c[d + j]) / 2);
			}
			else if (i % 3 == 1)
			{
				/* a copy of a centroid */
				int			t = (int) gbml_rng_below(&rng, k);

				for (int j = 0; j < d; j++)
					x[i * d + j] = (float) c[t * d + j];
			}
			else
				for (int j = 0; j < d; j++)
					x[i * d + j] = (float) (gbml_rng_uniform(&rng) * 10 + 100);
		}
		gbml_km_row_norms(x, n, d, xn);
		for (int i = 0; i < n; i++)
			if (sqrt(xn[i]) > xmax)
				xmax = sqrt(xn[i]);
		for (int v = 0; v < 4; v++)
		{
			gbml_km_centers C;
			int			mismatches = 0;
			int64_t		rechecked;

			gbml_km_force_isa(isas[v]);
			gbml_km_centers_prepare(&C, c, k, d, panels, panels_d, cnorm, cnorm_d, xmax);
			rechecked = gbml_km_assign(&C, x, n, xn, lab);
			for (int i = 0; i < n; i++)
				mismatches += lab[i] != gbml_km_assign_exact_ref(&C, x + i * d) ||
					gbml_km_assign_exact(&C, x + i * d) != gbml_km_assign_exact_ref(&C, x + i * d);
			CHECK(mismatches == 0);
			CHECK(rechecked < n);	/* the float path decides most rows */
		}
		gbml_km_force_isa(NULL);
		free(x);
		free(c);
		free(xn);
		free(panels);
		free(panels_d);
		free(cnorm);
		free(cnorm_d);
		free(lab);
	}
}

TEST(kmeans_recovers_separated_blobs)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;
	int32_t    *lab;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 3000, 4, 5, 50, 1);
	default_params(&p, 5);
	CHECK(gbml_kmeans_fit(&ds, &p, &env, true, &r) == GBML_OK);
	lab = flat_labels(&r, &ds);
	/* rows i and i+5 come from the same blob: same label; neighbours differ */
	for (int64_t i = 0; i + 5 < ds.n_rows; i++)
	{
		CHECK(lab[i] == lab[i + 5]);
		if (lab[i] != lab[i + 5])
			break;
	}
	for (int a = 0; a < 5; a++)
		for (int b = a + 1; b < 5; b++)
			CHECK(lab[a] != lab[b]);
	for (int j = 0; j < 5; j++)
		CHECK(r.sizes[j] == 600);
	/* noise is uniform in [-1,1)^4: inertia per row is about 4/3 */
	CHECK(r.inertia / 3000 < 1.5 && r.inertia / 3000 > 1.1);
	CHECK(strcmp(r.stop_reason, "converged") == 0 || strcmp(r.stop_reason, "min_frac_changed") == 0);
	free(lab);
	gbml_kmeans_result_free(&r, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_model_bytes_do_not_depend_on_threads)
{
	uint8_t    *m[3];
	size_t		len[3];
	gbml_param_value vals[3] = {
		tu_num("k", 7),
		tu_num("random_seed", 11),
		tu_num("n_init", 2),
	};

	for (int t = 0; t < 3; t++)
	{
		gbml_env	env;
		gbml_dataset ds;

		gbml_env_init_malloc(&env, t + 1);
		gbml_dataset_init(&ds, false);
		ds.chunk_rows = 1000;	/* several chunks and tasks */
		fill_blobs(&ds, &env, 5000, 6, 9, 3, 5);	/* overlapping: many iterations */
		uint8_t    *model;

		CHECK(gbml_train_values(&env, "kmeans", vals, 3, &ds, NULL, &model, &len[t]) == GBML_OK);
		m[t] = memcpy(malloc(len[t]), model, len[t]);
		gbml_free(&env, model);
		gbml_dataset_free(&ds, &env);
		CHECK(env.memory_used == 0);
	}
	CHECK(len[0] == len[1] && len[1] == len[2]);
	CHECK(memcmp(m[0], m[1], len[0]) == 0 && memcmp(m[1], m[2], len[0]) == 0);
	for (int t = 0; t < 3; t++)
		free(m[t]);
}

TEST(kmeans_same_seed_same_result_other_seed_other_init)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result a,
				b,
				c;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 2000, 3, 12, 2, 9);
	default_params(&p, 12);
	p.init.choice = GBML_KM_INIT_RANDOM;
	p.random_seed = 1;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &a) == GBML_OK);
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &b) == GBML_OK);
	p.random_seed = 2;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &c) == GBML_OK);
	CHECK(memcmp(a.centroids, b.centroids, sizeof(double) * 12 * 3) == 0);
	CHECK(a.inertia == b.inertia);
	CHECK(memcmp(a.centroids, c.centroids, sizeof(double) * 12 * 3) != 0);
	gbml_kmeans_result_free(&a, &env);
	gbml_kmeans_result_free(&b, &env);
	gbml_kmeans_result_free(&c, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_stop_rules)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 4000, 5, 20, 1, 3);	/* heavy overlap: slow convergence */
	default_params(&p, 20);
	p.init.choice = GBML_KM_INIT_RANDOM;

	p.max_iter = 3;
	p.tol = 0;
	p.min_frac_changed = 0;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
	CHECK(strcmp(r.stop_reason, "max_iter") == 0 && r.iterations == 3 && r.n_timed == 3);
	CHECK(r.s1[0] >= 0 && r.s2[0] >= 0 && r.s1_total > 0);
	gbml_kmeans_result_free(&r, &env);

	p.max_iter = 1000;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
	CHECK(strcmp(r.stop_reason, "converged") == 0 && r.last_frac_changed == 0);
	CHECK(r.iterations > 5);
	{
		int			conv_iters = r.iterations;

		gbml_kmeans_result_free(&r, &env);
		p.min_frac_changed = 0.01;
		CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
		CHECK(strcmp(r.stop_reason, "min_frac_changed") == 0);
		CHECK(r.last_frac_changed <= 0.01 && r.last_frac_changed > 0);
		CHECK(r.iterations < conv_iters);
		gbml_kmeans_result_free(&r, &env);
	}

	p.min_frac_changed = 0;
	p.tol = 1e9;				/* any shift is small enough: stop after the first update */
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
	CHECK(strcmp(r.stop_reason, "tol") == 0 && r.iterations == 1 && r.tol_scaled > 0);
	gbml_kmeans_result_free(&r, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_empty_cluster_takes_the_farthest_row)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;
	/* two tight groups near 0 and 10, one far outlier at 100; init puts a centroid at 1000 */
	float		pts[] = {0, 0.1f, 0.2f, 10, 10.1f, 10.2f, 100};
	double		init[] = {0, 10, 1000};

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&ds, false);
	for (int i = 0; i < 7; i++)
	{
		gbml_row	row = {.x = &pts[i],.n_features = 1,.label_is_null = true,.group_is_null = true,.weight_is_null = true};

		CHECK(gbml_dataset_append(&ds, &env, &row, false) == GBML_OK);
	}
	default_params(&p, 3);
	p.init.choice = -1;
	p.init.matrix.values = init;
	p.init.matrix.rows = 3;
	p.init.matrix.cols = 1;
	p.tol = 0;
	p.min_frac_changed = 0;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
	CHECK(r.empty_relocations == 1);
	/* centroid 2 moved onto the outlier (farthest from its centre 10), cluster 1 kept the 10s */
	CHECK_NEAR(r.centroids[2], 100, 1e-12);
	CHECK_NEAR(r.centroids[1], 10.1, 1e-5);
	CHECK_NEAR(r.centroids[0], 0.1, 1e-5);
	CHECK(r.sizes[0] == 3 && r.sizes[1] == 3 && r.sizes[2] == 1);
	gbml_kmeans_result_free(&r, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_argument_errors)
{
	gbml_env	env;
	gbml_dataset ds,
				nan_ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;
	double		bad_init[4] = {0, 0, 1, 1};
	float		nanrow[2] = {1, NAN};
	gbml_row	row = {.x = nanrow,.n_features = 2,.label_is_null = true,.group_is_null = true,.weight_is_null = true};
	uint8_t    *model = NULL;
	size_t		len;
	gbml_param_value no_k = tu_num("max_iter", 5);

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 10, 2, 2, 5, 1);

	default_params(&p, 11);
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_EINVAL);
	CHECK(strstr(env.error, "k = 11 is more than the 10 rows") != NULL);

	CHECK(gbml_train_values(&env, "kmeans", &no_k, 1, &ds, NULL, &model, &len) == GBML_EINVAL);
	CHECK(strstr(env.error, "\"k\" is required") != NULL && model == NULL);

	default_params(&p, 3);
	p.init.choice = -1;
	p.init.matrix.values = bad_init;
	p.init.matrix.rows = 2;
	p.init.matrix.cols = 2;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_EINVAL);
	CHECK(strstr(env.error, "k x n_features = 3 x 2") != NULL);

	/* NaN: the dataset refuses it for K-Means (no GBML_INPUT_MISSING); a dataset that allowed it is refused by the trainer */
	CHECK(gbml_dataset_append(&ds, &env, &row, false) == GBML_EINVAL);
	gbml_dataset_init(&nan_ds, true);
	CHECK(gbml_dataset_append(&nan_ds, &env, &row, false) == GBML_OK);
	default_params(&p, 1);
	CHECK(gbml_kmeans_fit(&nan_ds, &p, &env, false, &r) == GBML_EINVAL);
	CHECK(strstr(env.error, "finite") != NULL);
	CHECK((gbml_algorithm_by_name("kmeans")->input_flags & GBML_INPUT_MISSING) == 0);

	gbml_dataset_free(&nan_ds, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_spherical_groups_by_direction)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;
	gbml_rng	rng;
	int32_t    *lab;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	gbml_rng_seed(&rng, 3);
	/* three directions, each at scales from 0.1 to 1000 */
	for (int i = 0; i < 900; i++)
	{
		float		x[3] = {0, 0, 0};
		double		s = pow(10.0, gbml_rng_uniform(&rng) * 4 - 1);
		gbml_row	row = {.x = x,.n_features = 3,.label_is_null = true,.group_is_null = true,.weight_is_null = true};

		x[i % 3] = (float) s;
		x[(i + 1) % 3] = (float) (s * 0.1 * gbml_rng_uniform(&rng));
		CHECK(gbml_dataset_append(&ds, &env, &row, false) == GBML_OK);
	}
	default_params(&p, 3);
	p.spherical = true;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, true, &r) == GBML_OK);
	lab = flat_labels(&r, &ds);
	for (int i = 3; i < 900; i++)
		CHECK(lab[i] == lab[i % 3]);
	CHECK(lab[0] != lab[1] && lab[1] != lab[2] && lab[0] != lab[2]);
	for (int j = 0; j < 3; j++)
	{
		double		nrm = 0;

		for (int t = 0; t < 3; t++)
			nrm += r.centroids[j * 3 + t] * r.centroids[j * 3 + t];
		CHECK_NEAR(nrm, 1.0, 1e-12);
	}
	CHECK(r.inertia >= 0 && r.inertia < 900 * 0.01);
	free(lab);
	gbml_kmeans_result_free(&r, &env);

	/* a zero row is an error in this mode */
	{
		float		z[3] = {0, 0, 0};
		gbml_row	row = {.x = z,.n_features = 3,.label_is_null = true,.group_is_null = true,.weight_is_null = true};

		CHECK(gbml_dataset_append(&ds, &env, &row, false) == GBML_OK);
		CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_EINVAL);
		CHECK(strstr(env.error, "all zeros") != NULL);
		p.spherical = false;
		CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
		gbml_kmeans_result_free(&r, &env);
	}
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_n_init_keeps_the_best_run)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result one,
				many;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 3000, 2, 30, 4, 8);
	default_params(&p, 30);
	p.init.choice = GBML_KM_INIT_RANDOM;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &one) == GBML_OK);
	p.n_init = 6;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &many) == GBML_OK);
	CHECK(many.n_init == 6 && many.best_init >= 0 && many.best_init < 6);
	CHECK(many.inertia <= one.inertia);	/* run 0 of `many` is `one` */
	if (many.best_init == 0)
		CHECK(many.inertia == one.inertia);
	gbml_kmeans_result_free(&one, &env);
	gbml_kmeans_result_free(&many, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_k1_centroid_is_the_mean)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;
	double		mean[3] = {0, 0, 0};

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 1234, 3, 4, 10, 2);
	for (int c = 0; c < ds.n_chunks; c++)
		for (int64_t i = 0; i < ds.chunks[c]->n_rows; i++)
			for (int j = 0; j < 3; j++)
				mean[j] += ds.chunks[c]->x[i * 3 + j];
	default_params(&p, 1);
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
	for (int j = 0; j < 3; j++)
		CHECK_NEAR(r.centroids[j], mean[j] / 1234, 1e-9);
	CHECK(r.sizes[0] == 1234);
	gbml_kmeans_result_free(&r, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_stored_model_assigns_and_measures)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	gbml_strbuf js;
	double		out,
				dist;
	float		x[2] = {20.2f, 0.1f};
	double		init[] = {0, 0, 20, 0};
	gbml_param_value vals[3] = {
		tu_num("k", 2),
		{.key = "init",.kind = GBML_VALUE_MATRIX,.matrix = {init, 2, 2}},
		tu_num("tol", 0),
	};
	const gbml_algorithm *algo = gbml_algorithm_by_name("kmeans");
	void	   *h;
	double		imp[2];

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 400, 2, 2, 20, 4);	/* blobs at (20,0) and (0,20) */
	CHECK(gbml_train_values(&env, "kmeans", vals, 3, &ds, NULL, &model, &len) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_CLUSTER, &out) == GBML_OK);
	CHECK(out == 1.0 || out == 0.0);
	{
		double		other;
		float		y[2] = {0.1f, 20.3f};

		CHECK(gbml_scorer_predict(&sc, &env, y, 2, GBML_OUT_CLUSTER, &other) == GBML_OK);
		CHECK(other != out);
		CHECK(gbml_scorer_predict(&sc, &env, y, 2, GBML_OUT_SCORE, &dist) == GBML_OK);
		CHECK(dist == other);
	}
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_DISTANCE, &dist) == GBML_OK);
	CHECK(dist >= 0 && dist < 1.0);	/* near the blob centre (~(20,0)) */
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_PROBA, &dist) == GBML_EUNSUPPORTED);
	CHECK(gbml_scorer_predict(&sc, &env, x, 3, GBML_OUT_CLUSTER, &dist) == GBML_EINVAL);

	gbml_sb_init(&js, &env);
	CHECK(algo->to_json(sc.handle, &js) == GBML_OK);
	CHECK(strstr(js.data, "\"k\":2") && strstr(js.data, "\"centroids\":[[") && strstr(js.data, "\"cluster_sizes\":[200,200]"));
	gbml_sb_free(&js);
	CHECK(algo->importance(sc.handle, imp) == GBML_OK);
	CHECK_NEAR(imp[0] + imp[1], 1.0, 1e-12);
	gbml_scorer_free(&sc, &env);

	gbml_sb_init(&js, &env);
	CHECK(gbml_model_info_json(&env, model, len, &js) == GBML_OK);
	CHECK(strstr(js.data, "\"eval_metric\":\"inertia\"") && strstr(js.data, "\"stop_reason\""));
	CHECK(strstr(js.data, "seconds") == NULL);	/* timings go to the report, not the model */
	gbml_sb_free(&js);

	/* A crafted model: valid checksum, but k in the section says 3 (the length check must catch it). */
	{
		uint8_t    *bad = malloc(len);
		size_t		off,
					slen;
		uint32_t	k3 = 3;

		memcpy(bad, model, len);
		CHECK(tu_section_offset(&env, bad, len, GBML_TAG('K', 'M', 'N', 'S'), &off, &slen) && slen >= 8);
		memcpy(bad + off + 4, &k3, 4);
		tu_fix_crc(bad, len);
		CHECK(gbml_model_open(&sc.reader, &env, bad, len) == GBML_OK);	/* the container is fine */
		CHECK(algo->load(&sc.reader, &env, &h) == GBML_ECORRUPT);
		CHECK(strstr(env.error, "wrong length") != NULL);
		free(bad);
	}
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(kmeans_cancel_between_iterations)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;
	tu_cancel	cancel = {.at_call = 5};

	gbml_env_init_malloc(&env, 2);
	env.progress_fn = tu_cancel_progress;
	env.progress_ctx = &cancel;
	gbml_dataset_init(&ds, false);
	fill_blobs(&ds, &env, 3000, 3, 20, 1, 1);
	default_params(&p, 20);
	p.tol = 0;
	p.min_frac_changed = 0;
	p.init.choice = GBML_KM_INIT_RANDOM;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_ECANCELLED);
	CHECK(cancel.calls == 5);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * The tol rule's scale is the mean per-feature variance (numpy.var), from
 * fixed-point sums: within 1e-9 of a long-double two-pass reference even
 * when the mean is a thousand times the spread.
 */
TEST(kmeans_tol_scale_is_the_mean_feature_variance)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;
	gbml_rng	rng;
	enum
	{
		N = 5000, D = 3
	};
	static float x[N][D];
	long double mean[D] = {0},
				var = 0;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	gbml_rng_seed(&rng, 17);
	for (int i = 0; i < N; i++)
	{
		gbml_row	row = {0};

		for (int j = 0; j < D; j++)
		{
			x[i][j] = (float) (1000.0 * (j + 1) + gbml_rng_uniform(&rng) * (j + 1));
			mean[j] += x[i][j];
		}
		row.x = x[i];
		row.n_features = D;
		row.label_is_null = row.group_is_null = row.weight_is_null = true;
		CHECK(gbml_dataset_append(&ds, &env, &row, false) == GBML_OK);
	}
	for (int j = 0; j < D; j++)
	{
		long double s = 0;

		mean[j] /= N;
		for (int i = 0; i < N; i++)
			s += (x[i][j] - mean[j]) * (x[i][j] - mean[j]);
		var += s / N;
	}
	var /= D;
	memset(&p, 0, sizeof(p));
	p.k = 3;
	p.init.choice = GBML_KM_INIT_RANDOM;
	p.n_init = 1;
	p.max_iter = 2;
	p.tol = 1;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
	CHECK_NEAR(r.tol_scaled / (double) var, 1.0, 1e-9);
	gbml_kmeans_result_free(&r, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * The single-row scorer's block kernels (gbml_km_sqdist_block and
 * gbml_km_dot_block, 4 centroids a lane group) give the one-at-a-time
 * doubles bit for bit, for 1 to 8 groups and any width; and a model's
 * kmeans_distance / kmeans_assign (Euclidean and spherical) are the
 * one-at-a-time argmin (ties to the lower index) of those doubles.
 */
TEST(kmeans_row_scorer_blocks_match_one_at_a_time)
{
	static const int widths[] = {1, 2, 3, 7, 16, 37, 100, 131};
	gbml_rng	rng;

	gbml_rng_seed(&rng, 41);
	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
	{
		int			d = widths[w];
		float	   *x = malloc(sizeof(float) * (size_t) d);
		double	   *c = malloc(sizeof(double) * 32 * (size_t) d),
				   *block = malloc(sizeof(double) * 32 * (size_t) d),
					out[32];

		for (int rep = 0; rep < 20; rep++)
		{
			for (int i = 0; i < d; i++)
				x[i] = (float) ((gbml_rng_uniform(&rng) - 0.5) * (rep % 3 == 0 ? 1e6 : 3));
			for (int j = 0; j < 32; j++)
				for (int i = 0; i < d; i++)
				{
					c[(size_t) j * d + i] = (gbml_rng_uniform(&rng) - 0.5) * (rep % 2 ? 2e5 : 2.5);
					block[((size_t) (j / 4) * d + i) * 4 + j % 4] = c[(size_t) j * d + i];
				}
			for (int ng = 1; ng <= GBML_KM_ROW_GROUPS; ng++)
			{
				double		dots[32];

				gbml_km_sqdist_block(x, block, d, ng, out);
				gbml_km_dot_block(x, block, d, ng, dots);
				for (int j = 0; j < 4 * ng; j++)
				{
					double		ref = gbml_km_sqdist(x, 1.0, c + (size_t) j * d, d),
								dot = 0;

					for (int i = 0; i < d; i++)
						dot += x[i] * c[(size_t) j * d + i];
					CHECK(memcmp(&out[j], &ref, sizeof(double)) == 0);
					CHECK(memcmp(&dots[j], &dot, sizeof(double)) == 0);
				}
			}
		}
		free(x);
		free(c);
		free(block);
	}
}

TEST(kmeans_row_scorer_is_the_one_at_a_time_argmin)
{
	static const int ks[] = {1, 3, 4, 5, 16, 17, 23, 32, 33, 40, 70};
	const int	d = 37;

	for (size_t t = 0; t < 2 * sizeof(ks) / sizeof(ks[0]); t++)
	{
		int			k = ks[t % (sizeof(ks) / sizeof(ks[0]))];
		bool		spherical = t >= sizeof(ks) / sizeof(ks[0]);
		gbml_env	env;
		gbml_dataset ds;
		gbml_param_value v[3] = {tu_num("k", k), tu_num("random_seed", 3), tu_bool("spherical", spherical)};
		uint8_t    *model;
		size_t		len,
					off,
					slen;
		gbml_scorer sc;
		gbml_rng	rng;
		float		x[37];
		const uint8_t *centroids;	/* in the model's bytes (f64, maybe unaligned) */

		gbml_env_init_malloc(&env, 2);
		gbml_dataset_init(&ds, false);
		fill_blobs(&ds, &env, 1200, d, k, 5, 7 + (uint64_t) k);
		CHECK(gbml_train_values(&env, "kmeans", v, 3, &ds, NULL, &model, &len) == GBML_OK);
		CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
		CHECK(tu_section_offset(&env, model, len, GBML_TAG('K', 'M', 'N', 'S'), &off, &slen));
		centroids = model + off + 24 + 8 * (size_t) k;	/* after the header, inertia and sizes */
		gbml_rng_seed(&rng, 99);
		for (int r = 0; r < 2000; r++)
		{
			double		best = INFINITY,
						dist,
						cluster,
						xn = 0;
			int			arg = 0;
			double		cj[37];

			for (int i = 0; i < d; i++)
			{
				/* every fifth row on a centroid (distance 0), the others anywhere */
				memcpy(&cj[i], centroids + 8 * ((size_t) (r % k) * d + i), sizeof(double));
				x[i] = r % 5 == 0 ? (float) cj[i] : (float) ((gbml_rng_uniform(&rng) - 0.5) * 30);
			}
			for (int i = 0; i < d; i++)
				xn += (double) x[i] * x[i];
			xn = sqrt(xn);
			for (int j = 0; j < k; j++)
			{
				double		cc[37],
							s,
							dot = 0,
							cn = 0;

				memcpy(cc, centroids + 8 * (size_t) j * d, sizeof(double) * d);
				for (int i = 0; i < d; i++)
				{
					dot += x[i] * cc[i];
					cn += cc[i] * cc[i];
				}
				cn = sqrt(cn);
				s = !spherical ? gbml_km_sqdist(x, 1.0, cc, d) : xn > 0 && cn > 0 ? 1.0 - dot / (xn * cn) : 1.0;
				if (s < best)
				{
					best = s;
					arg = j;
				}
			}
			CHECK(gbml_scorer_predict(&sc, &env, x, d, GBML_OUT_DISTANCE, &dist) == GBML_OK);
			CHECK(gbml_scorer_predict(&sc, &env, x, d, GBML_OUT_CLUSTER, &cluster) == GBML_OK);
			CHECK(dist == (spherical ? best : sqrt(best)) && cluster == (double) arg);
		}
		gbml_scorer_free(&sc, &env);
		gbml_free(&env, model);
		gbml_dataset_free(&ds, &env);
		CHECK(env.memory_used == 0);
	}
}
