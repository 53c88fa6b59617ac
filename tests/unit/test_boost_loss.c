/*
 * test_boost_loss.c — the boosting losses: gradients (and hessians where they
 * are exact) against central finite differences of the objective for RMSE,
 * Logloss, QueryRMSE, PairLogit (all pairs, counted pairs and sampled pairs),
 * YetiRank (pairs fixed by seed and iteration) and LambdaMART without norm;
 * properties of YetiRank and LambdaMART (relevant documents pushed up,
 * per-query sums, positive hessians, a hand-computed LightGBM case with norm);
 * determinism with a seed and independence from the thread count; base
 * scores, loss values and errors.
 */
#include "harness.h"
#include "boost_loss.h"
#include "metrics.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

typedef struct test_problem
{
	gbml_boost_problem p;
	float	   *label;
	float	   *weight;
	int64_t    *off;
	double	   *pred;
} test_problem;

/* ng queries of sizes in [min_m, max_m], labels in 0..n_labels-1. */
static void
make_problem(test_problem *t, int64_t ng, int min_m, int max_m, int n_labels, bool weighted,
			 uint64_t seed)
{
	gbml_rng	rng;
	int64_t		n = 0;

	gbml_rng_seed(&rng, seed);
	t->off = malloc(sizeof(int64_t) * (ng + 1));
	t->off[0] = 0;
	for (int64_t g = 0; g < ng; g++)
		t->off[g + 1] = t->off[g] + min_m + (int64_t) gbml_rng_below(&rng, (uint64_t) (max_m - min_m + 1));
	n = t->off[ng];
	t->label = malloc(sizeof(float) * n);
	t->weight = malloc(sizeof(float) * n);
	t->pred = malloc(sizeof(double) * n);
	for (int64_t i = 0; i < n; i++)
	{
		t->label[i] = (float) gbml_rng_below(&rng, (uint64_t) n_labels);
		t->weight[i] = (float) (0.5 + gbml_rng_uniform(&rng));
		t->pred[i] = 2.0 * gbml_rng_uniform(&rng) - 1.0 + 0.3 * t->label[i];
	}
	t->p.n = n;
	t->p.label = t->label;
	t->p.weight = weighted ? t->weight : NULL;
	t->p.n_groups = ng;
	t->p.group_offsets = t->off;
	t->p.group_stream = NULL;
}

static void
free_problem(test_problem *t)
{
	free(t->label);
	free(t->weight);
	free(t->off);
	free(t->pred);
}

/*
 * Central finite differences of objective_ex against gradients_ex (and the
 * diagonal hessian when check_hess).  Relative tolerance tol.
 */
static void
fd_check(gbml_boost_loss_kind kind, const test_problem *t, const gbml_boost_loss_options *opt,
		 uint64_t seed, int64_t it, bool check_hess, double tol)
{
	gbml_env	env;
	int64_t		n = t->p.n;
	double	   *g = malloc(sizeof(double) * n),
			   *h = malloc(sizeof(double) * n),
			   *x = malloc(sizeof(double) * n),
			   *gp = malloc(sizeof(double) * n),
			   *hp = malloc(sizeof(double) * n);
	double		eps = 1e-5,
				eps2 = 1e-6,
				f0;
	int			bad = 0;

	gbml_env_init_malloc(&env, 2);
	CHECK(gbml_boost_loss_gradients_ex(kind, &t->p, t->pred, seed, it, opt, g, h, &env) == GBML_OK);
	memcpy(x, t->pred, sizeof(double) * n);
	f0 = gbml_boost_loss_objective_ex(kind, &t->p, x, seed, it, opt);
	CHECK(isfinite(f0));
	for (int64_t i = 0; i < n && bad < 5; i++)
	{
		double		fp,
					fm,
					fd;

		x[i] = t->pred[i] + eps;
		fp = gbml_boost_loss_objective_ex(kind, &t->p, x, seed, it, opt);
		x[i] = t->pred[i] - eps;
		fm = gbml_boost_loss_objective_ex(kind, &t->p, x, seed, it, opt);
		fd = (fp - fm) / (2 * eps);
		if (!(fabs(fd - g[i]) <= tol * (1 + fabs(g[i]))))
		{
			CHECK_NEAR(g[i], fd, tol * (1 + fabs(g[i])));
			bad++;
		}
		if (check_hess)
		{
			/* diagonal hessian from differences of the gradient (a small step
			 * keeps YetiRank's noisy permutations unchanged) */
			double		hd;

			x[i] = t->pred[i] + eps2;
			CHECK(gbml_boost_loss_gradients_ex(kind, &t->p, x, seed, it, opt, gp, hp, &env) == GBML_OK);
			hd = gp[i];
			x[i] = t->pred[i] - eps2;
			CHECK(gbml_boost_loss_gradients_ex(kind, &t->p, x, seed, it, opt, gp, hp, &env) == GBML_OK);
			hd = (hd - gp[i]) / (2 * eps2);
			if (!(fabs(hd - h[i]) <= 1e-5 * (1 + fabs(h[i]))))
			{
				CHECK_NEAR(h[i], hd, 1e-5 * (1 + fabs(h[i])));
				bad++;
			}
		}
		x[i] = t->pred[i];
	}
	for (int64_t i = 0; i < n; i++)
		CHECK(h[i] > 0);
	free(g);
	free(h);
	free(x);
	free(gp);
	free(hp);
}

TEST(boost_loss_names_and_kinds)
{
	CHECK(strcmp(gbml_boost_loss_names[GBML_LOSS_RMSE], "RMSE") == 0);
	CHECK(strcmp(gbml_boost_loss_names[GBML_LOSS_LOGLOSS], "Logloss") == 0);
	CHECK(strcmp(gbml_boost_loss_names[GBML_LOSS_QUERYRMSE], "QueryRMSE") == 0);
	CHECK(strcmp(gbml_boost_loss_names[GBML_LOSS_PAIRLOGIT], "PairLogit") == 0);
	CHECK(strcmp(gbml_boost_loss_names[GBML_LOSS_YETIRANK], "YetiRank") == 0);
	CHECK(strcmp(gbml_boost_loss_names[GBML_LOSS_LAMBDAMART], "LambdaMART") == 0);
	CHECK(strcmp(gbml_boost_loss_names[GBML_LOSS_MULTICLASS], "MultiClass") == 0);
	CHECK(gbml_boost_loss_names[GBML_LOSS_MULTICLASS + 1] == NULL);
	CHECK(!gbml_boost_loss_is_ranking(GBML_LOSS_RMSE));
	CHECK(!gbml_boost_loss_is_ranking(GBML_LOSS_LOGLOSS));
	CHECK(gbml_boost_loss_is_ranking(GBML_LOSS_QUERYRMSE));
	CHECK(gbml_boost_loss_is_ranking(GBML_LOSS_PAIRLOGIT));
	CHECK(gbml_boost_loss_is_ranking(GBML_LOSS_YETIRANK));
	CHECK(gbml_boost_loss_is_ranking(GBML_LOSS_LAMBDAMART));
	CHECK(!gbml_boost_loss_is_ranking(GBML_LOSS_MULTICLASS));
	/* MultiClass has a column a class (boost_multiclass.h): the per-row functions here refuse it */
	{
		test_problem t;
		gbml_env	env;
		double	   *g,
				   *h;

		gbml_env_init_malloc(&env, 1);
		make_problem(&t, 30, 1, 9, 2, true, 1);
		g = malloc(sizeof(double) * (size_t) t.p.n);
		h = malloc(sizeof(double) * (size_t) t.p.n);
		CHECK(gbml_boost_loss_gradients(GBML_LOSS_MULTICLASS, &t.p, t.pred, 1, 0, g, h, &env) == GBML_EINVAL);
		free(g);
		free(h);
		free_problem(&t);
	}
}

TEST(boost_loss_pointwise_finite_differences)
{
	test_problem t;
	gbml_boost_loss_options opt;

	gbml_boost_loss_default_options(&opt);
	make_problem(&t, 30, 1, 9, 2, true, 1);
	fd_check(GBML_LOSS_RMSE, &t, &opt, 0, 0, true, 1e-6);
	fd_check(GBML_LOSS_LOGLOSS, &t, &opt, 0, 0, true, 1e-6);
	/* QueryRMSE: exact gradient; its hessian is CatBoost's w, not the exact one */
	fd_check(GBML_LOSS_QUERYRMSE, &t, &opt, 0, 0, false, 1e-6);
	t.p.weight = NULL;
	fd_check(GBML_LOSS_RMSE, &t, &opt, 0, 0, true, 1e-6);
	fd_check(GBML_LOSS_LOGLOSS, &t, &opt, 0, 0, true, 1e-6);
	fd_check(GBML_LOSS_QUERYRMSE, &t, &opt, 0, 0, false, 1e-6);
	free_problem(&t);
}

TEST(boost_loss_pointwise_closed_form)
{
	float		y[] = {1, 0, 3};
	float		w[] = {2, 1, 0};
	double		pred[] = {0.5, 0.0, 1.0};
	double		g[3],
				h[3];
	gbml_boost_problem p = {3, y, w, 0, NULL, NULL};
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_RMSE, &p, pred, 0, 0, g, h, &env) == GBML_OK);
	CHECK_NEAR(g[0], 2 * (0.5 - 1), 1e-15);
	CHECK_NEAR(g[1], 0.0, 1e-15);
	CHECK_NEAR(g[2], 0.0, 1e-15);
	CHECK_NEAR(h[0], 2.0, 1e-15);
	CHECK(h[2] > 0 && h[2] < 1e-10);	/* zero weight: floored, still > 0 */
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_LOGLOSS, &p, pred, 0, 0, g, h, &env) == GBML_OK);
	CHECK_NEAR(g[1], 1 * (0.5 - 0), 1e-15);
	CHECK_NEAR(h[1], 0.25, 1e-15);
	CHECK_NEAR(g[0], 2 * (1 / (1 + exp(-0.5)) - 1), 1e-15);
	/* extreme scores keep a positive hessian */
	{
		double		big[] = {800, -800, 0};

		CHECK(gbml_boost_loss_gradients(GBML_LOSS_LOGLOSS, &p, big, 0, 0, g, h, &env) == GBML_OK);
		CHECK(h[0] > 0 && h[1] > 0 && isfinite(g[0]) && isfinite(g[1]));
		CHECK_NEAR(g[0], 0.0, 1e-15);
		CHECK_NEAR(g[1], 0.0, 1e-15);
	}
}

TEST(boost_loss_base_scores_and_values)
{
	float		y[] = {1, 0, 1, 1};
	float		w[] = {1, 1, 2, 0};
	double		pred[] = {0.5, 0.25, 2, 9};
	gbml_boost_problem p = {4, y, w, 0, NULL, NULL};
	int64_t		off[] = {0, 2, 4};

	CHECK_NEAR(gbml_boost_loss_base_score(GBML_LOSS_RMSE, &p), 3.0 / 4.0, 1e-15);
	CHECK_NEAR(gbml_boost_loss_base_score(GBML_LOSS_LOGLOSS, &p), log(3.0), 1e-12);
	CHECK(gbml_boost_loss_base_score(GBML_LOSS_YETIRANK, &p) == 0);
	CHECK(gbml_boost_loss_base_score(GBML_LOSS_QUERYRMSE, &p) == 0);
	{
		float		y0[] = {0, 0, 0, 0};
		gbml_boost_problem p0 = {4, y0, NULL, 0, NULL, NULL};
		double		b = gbml_boost_loss_base_score(GBML_LOSS_LOGLOSS, &p0);

		CHECK(isfinite(b) && b < -10);
	}
	CHECK_NEAR(gbml_boost_loss_value(GBML_LOSS_RMSE, &p, pred), gbml_rmse(pred, y, w, 4), 1e-12);
	CHECK_NEAR(gbml_boost_loss_value(GBML_LOSS_LOGLOSS, &p, pred),
			   (log1p(exp(-0.5)) + log1p(exp(0.25)) + 2 * log1p(exp(-2))) / 4.0, 1e-12);
	p.n_groups = 2;
	p.group_offsets = off;
	CHECK_NEAR(gbml_boost_loss_value(GBML_LOSS_YETIRANK, &p, pred),
			   1.0 - gbml_mean_ndcg(pred, y, 2, off, 10), 1e-15);
	CHECK_NEAR(gbml_boost_loss_value(GBML_LOSS_LAMBDAMART, &p, pred),
			   1.0 - gbml_mean_ndcg(pred, y, 2, off, 10), 1e-15);
	/* QueryRMSE ignores a per-query shift of the predictions */
	{
		double		shifted[] = {0.5 + 3, 0.25 + 3, 2 - 7, 9 - 7};

		CHECK_NEAR(gbml_boost_loss_value(GBML_LOSS_QUERYRMSE, &p, pred),
				   gbml_boost_loss_value(GBML_LOSS_QUERYRMSE, &p, shifted), 1e-12);
	}
	/* PairLogit value: one pair per query, weight-averaged */
	{
		double		pv = gbml_boost_loss_value(GBML_LOSS_PAIRLOGIT, &p, pred);
		double		want = (1.0 * log1p(exp(-(0.5 - 0.25))) + 1.0 * 0) / 1.0;

		/* query 2 has labels 1,1: no pair */
		CHECK_NEAR(pv, want, 1e-12);
	}
}

TEST(boost_loss_ranking_needs_groups)
{
	float		y[] = {1, 0};
	double		pred[] = {0, 0},
				g[2],
				h[2];
	int64_t		bad_off[] = {0, 1};	/* does not cover n */
	gbml_boost_problem p = {2, y, NULL, 0, NULL, NULL};
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	for (int k = GBML_LOSS_QUERYRMSE; k <= GBML_LOSS_LAMBDAMART; k++)
	{
		CHECK(gbml_boost_loss_gradients((gbml_boost_loss_kind) k, &p, pred, 0, 0, g, h, &env) == GBML_EINVAL);
		CHECK(isnan(gbml_boost_loss_value((gbml_boost_loss_kind) k, &p, pred)));
	}
	p.n_groups = 1;
	p.group_offsets = bad_off;
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_YETIRANK, &p, pred, 0, 0, g, h, &env) == GBML_EINVAL);
	CHECK(strstr(env.error, "group") != NULL);
}

TEST(boost_loss_pairlogit_finite_differences)
{
	test_problem t;
	gbml_boost_loss_options opt;

	gbml_boost_loss_default_options(&opt);
	make_problem(&t, 12, 1, 25, 3, true, 2);
	fd_check(GBML_LOSS_PAIRLOGIT, &t, &opt, 5, 3, true, 1e-6);
	/* counted pairs (all pairs > cap >= differing pairs) and sampled pairs */
	opt.pairlogit_max_pairs = 40;
	fd_check(GBML_LOSS_PAIRLOGIT, &t, &opt, 5, 3, true, 1e-6);
	opt.pairlogit_max_pairs = 7;
	fd_check(GBML_LOSS_PAIRLOGIT, &t, &opt, 5, 3, true, 1e-6);
	free_problem(&t);
}

TEST(boost_loss_pairlogit_counted_equals_enumerated)
{
	/* one query of 100 rows, 5 relevant: 475 pairs of 4950 */
	test_problem t;
	gbml_boost_loss_options opt;
	gbml_env	env;
	double		g1[100],
				h1[100],
				g2[100],
				h2[100],
				s = 0;

	make_problem(&t, 1, 100, 100, 1, true, 3);
	for (int i = 0; i < 100; i++)
		t.label[i] = (i % 20 == 3) ? 1.0f : 0.0f;
	gbml_env_init_malloc(&env, 2);
	gbml_boost_loss_default_options(&opt);
	CHECK(gbml_boost_loss_gradients_ex(GBML_LOSS_PAIRLOGIT, &t.p, t.pred, 1, 1, &opt, g1, h1, &env) == GBML_OK);
	opt.pairlogit_max_pairs = 500;	/* < 4950 all pairs, >= 475: counted branch */
	CHECK(gbml_boost_loss_gradients_ex(GBML_LOSS_PAIRLOGIT, &t.p, t.pred, 1, 1, &opt, g2, h2, &env) == GBML_OK);
	for (int i = 0; i < 100; i++)
	{
		CHECK_NEAR(g1[i], g2[i], 1e-12);
		CHECK_NEAR(h1[i], h2[i], 1e-12);
		s += g1[i];
		if (t.label[i] > 0)
			CHECK(g1[i] < 0);
		else
			CHECK(g1[i] > 0);
	}
	/* sampled: an unbiased estimate, close to the exact gradient on average */
	{
		double		acc[100] = {0};
		int			reps = 200;

		opt.pairlogit_max_pairs = 100;
		for (int r = 0; r < reps; r++)
		{
			CHECK(gbml_boost_loss_gradients_ex(GBML_LOSS_PAIRLOGIT, &t.p, t.pred, 1, r, &opt, g2, h2, &env) == GBML_OK);
			for (int i = 0; i < 100; i++)
				acc[i] += g2[i] / reps;
		}
		for (int i = 0; i < 100; i++)
			if (t.label[i] > 0)
				CHECK_NEAR(acc[i], g1[i], 0.1 * fabs(g1[i]));
	}
	free_problem(&t);
	(void) s;
}

TEST(boost_loss_yetirank_finite_differences)
{
	test_problem t;
	gbml_boost_loss_options opt;

	gbml_boost_loss_default_options(&opt);
	opt.yetirank_newton = true;
	make_problem(&t, 10, 1, 30, 4, true, 4);
	/* pairs and their weights are fixed by (seed, iteration): the gradient is exact */
	fd_check(GBML_LOSS_YETIRANK, &t, &opt, 42, 7, true, 1e-6);
	opt.yetirank_newton = false;
	fd_check(GBML_LOSS_YETIRANK, &t, &opt, 42, 8, false, 1e-6);
	free_problem(&t);
}

/* Sum of grad over each query is 0 for pairwise losses. */
static void
check_query_sums_zero(const test_problem *t, const double *g)
{
	for (int64_t q = 0; q < t->p.n_groups; q++)
	{
		double		s = 0,
					a = 0;

		for (int64_t i = t->off[q]; i < t->off[q + 1]; i++)
		{
			s += g[i];
			a += fabs(g[i]);
		}
		CHECK(fabs(s) <= 1e-12 * (1 + a));
	}
}

/*
 * Gradients of kind on t (opt NULL: gbml_boost_loss_gradients with its
 * defaults) with 1 and n_threads threads: CHECKs both succeed with the same
 * bytes.  The 1-thread result is left in g, h (t->p.n each).
 */
static void
gradients_any_threads(gbml_boost_loss_kind kind, const test_problem *t, const gbml_boost_loss_options *opt,
					  uint64_t seed, int64_t it, int n_threads, double *g, double *h)
{
	gbml_env	env1,
				envn;
	int64_t		n = t->p.n;
	double	   *gn = malloc(sizeof(double) * n),
			   *hn = malloc(sizeof(double) * n);

	gbml_env_init_malloc(&env1, 1);
	gbml_env_init_malloc(&envn, n_threads);
	if (opt)
	{
		CHECK(gbml_boost_loss_gradients_ex(kind, &t->p, t->pred, seed, it, opt, g, h, &env1) == GBML_OK);
		CHECK(gbml_boost_loss_gradients_ex(kind, &t->p, t->pred, seed, it, opt, gn, hn, &envn) == GBML_OK);
	}
	else
	{
		CHECK(gbml_boost_loss_gradients(kind, &t->p, t->pred, seed, it, g, h, &env1) == GBML_OK);
		CHECK(gbml_boost_loss_gradients(kind, &t->p, t->pred, seed, it, gn, hn, &envn) == GBML_OK);
	}
	CHECK(memcmp(g, gn, sizeof(double) * n) == 0);
	CHECK(memcmp(h, hn, sizeof(double) * n) == 0);
	free(gn);
	free(hn);
}

/* Lowest and highest label of query q. */
static void
query_label_range(const test_problem *t, int64_t q, float *lo, float *hi)
{
	*lo = 1e9f;
	*hi = -1e9f;
	for (int64_t i = t->off[q]; i < t->off[q + 1]; i++)
	{
		*lo = fminf(*lo, t->label[i]);
		*hi = fmaxf(*hi, t->label[i]);
	}
}

TEST(boost_loss_yetirank_properties)
{
	test_problem t;
	gbml_env	env4;
	int64_t		n;
	double	   *g1,
			   *h1,
			   *g4,
			   *h4;

	make_problem(&t, 300, 1, 40, 3, false, 5);
	n = t.p.n;
	g1 = malloc(sizeof(double) * n);
	h1 = malloc(sizeof(double) * n);
	g4 = malloc(sizeof(double) * n);
	h4 = malloc(sizeof(double) * n);
	gbml_env_init_malloc(&env4, 4);

	/* same bytes whatever the thread count */
	gradients_any_threads(GBML_LOSS_YETIRANK, &t, NULL, 9, 2, 4, g1, h1);
	check_query_sums_zero(&t, g1);
	for (int64_t i = 0; i < n; i++)
		CHECK(h1[i] > 0);
	/* another iteration or seed draws other permutations */
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_YETIRANK, &t.p, t.pred, 9, 3, g4, h4, &env4) == GBML_OK);
	CHECK(memcmp(g1, g4, sizeof(double) * n) != 0);
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_YETIRANK, &t.p, t.pred, 10, 2, g4, h4, &env4) == GBML_OK);
	CHECK(memcmp(g1, g4, sizeof(double) * n) != 0);

	/* all scores equal: the best documents of a query are pushed up, the worst down */
	for (int64_t i = 0; i < n; i++)
		t.pred[i] = 0;
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_YETIRANK, &t.p, t.pred, 1, 0, g1, h1, &env4) == GBML_OK);
	for (int64_t q = 0; q < t.p.n_groups; q++)
	{
		float		lo,
					hi;

		query_label_range(&t, q, &lo, &hi);
		for (int64_t i = t.off[q]; i < t.off[q + 1]; i++)
		{
			if (lo == hi)
				CHECK(g1[i] == 0);
			else if (t.label[i] == hi)
				CHECK(g1[i] <= 0);
			else if (t.label[i] == lo)
				CHECK(g1[i] >= 0);
		}
	}
	/* a steep correct order gives (almost) no gradient */
	for (int64_t i = 0; i < n; i++)
		t.pred[i] = 100.0 * t.label[i];
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_YETIRANK, &t.p, t.pred, 1, 0, g1, h1, &env4) == GBML_OK);
	for (int64_t i = 0; i < n; i++)
		CHECK(fabs(g1[i]) < 1e-20);
	free(g1);
	free(h1);
	free(g4);
	free(h4);
	free_problem(&t);
}

TEST(boost_loss_lambdamart_finite_differences)
{
	test_problem t;
	gbml_boost_loss_options opt;

	gbml_boost_loss_default_options(&opt);
	opt.lambdamart_norm = false;
	make_problem(&t, 10, 1, 40, 5, false, 6);
	fd_check(GBML_LOSS_LAMBDAMART, &t, &opt, 0, 0, false, 1e-6);
	opt.lambdamart_truncation = 3;
	fd_check(GBML_LOSS_LAMBDAMART, &t, &opt, 0, 0, false, 1e-6);
	opt.sigmoid = 2.0;
	fd_check(GBML_LOSS_LAMBDAMART, &t, &opt, 0, 0, false, 1e-6);
	free_problem(&t);
}

TEST(boost_loss_lambdamart_hand_case)
{
	/* two documents, equal scores: LightGBM's lambdarank by hand */
	float		y[] = {1, 0};
	double		pred[] = {0, 0},
				g[2],
				h[2];
	int64_t		off[] = {0, 2};
	gbml_boost_problem p = {2, y, NULL, 1, off, NULL};
	gbml_env	env;
	double		delta = 1.0 - 1.0 / log2(3.0);	/* |1/log2(2) - 1/log2(3)| / maxDCG(=1) */
	double		lam = 0.5 * delta,
				hes = 0.25 * delta,
				f = log2(1 + 2 * lam) / (2 * lam);

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_LAMBDAMART, &p, pred, 0, 0, g, h, &env) == GBML_OK);
	CHECK_NEAR(g[0], -lam * f, 1e-15);
	CHECK_NEAR(g[1], lam * f, 1e-15);
	CHECK_NEAR(h[0], hes * f, 1e-15);
	CHECK_NEAR(h[1], hes * f, 1e-15);

	/* distinct scores, norm: delta divided by (0.01 + |ds|) */
	{
		double		pr[] = {0.5, 1.5};	/* wrong order: doc 1 (rel 0) on top */
		double		d = delta / (0.01 + 1.0);
		double		q = 1.0 / (1.0 + exp(-1.0));	/* sigmoid(-(0.5 - 1.5)) */
		double		l2 = q * d,
					h2 = q * (1 - q) * d,
					f2 = log2(1 + 2 * l2) / (2 * l2);

		CHECK(gbml_boost_loss_gradients(GBML_LOSS_LAMBDAMART, &p, pr, 0, 0, g, h, &env) == GBML_OK);
		CHECK_NEAR(g[0], -l2 * f2, 1e-15);
		CHECK_NEAR(g[1], l2 * f2, 1e-15);
		CHECK_NEAR(h[0], h2 * f2, 1e-15);
	}
	/* weights multiply each row */
	{
		float		w[] = {2, 3};
		double		gw[2],
					hw[2];

		p.weight = w;
		CHECK(gbml_boost_loss_gradients(GBML_LOSS_LAMBDAMART, &p, pred, 0, 0, gw, hw, &env) == GBML_OK);
		CHECK_NEAR(gw[0], -2 * lam * f, 1e-15);
		CHECK_NEAR(gw[1], 3 * lam * f, 1e-15);
		CHECK_NEAR(hw[1], 3 * hes * f, 1e-15);
	}
	/* no relevant document: no gradient */
	{
		float		y0[] = {0, 0};

		p.weight = NULL;
		p.label = y0;
		CHECK(gbml_boost_loss_gradients(GBML_LOSS_LAMBDAMART, &p, pred, 0, 0, g, h, &env) == GBML_OK);
		CHECK(g[0] == 0 && g[1] == 0 && h[0] > 0);
	}
}

TEST(boost_loss_lambdamart_properties)
{
	test_problem t;
	gbml_env	env3;
	int64_t		n;
	double	   *g1,
			   *h1;

	make_problem(&t, 200, 1, 60, 5, true, 8);
	n = t.p.n;
	g1 = malloc(sizeof(double) * n);
	h1 = malloc(sizeof(double) * n);
	gbml_env_init_malloc(&env3, 3);
	gradients_any_threads(GBML_LOSS_LAMBDAMART, &t, NULL, 0, 0, 3, g1, h1);
	for (int64_t i = 0; i < n; i++)
		CHECK(h1[i] > 0);
	/* unweighted: per-query sums vanish */
	t.p.weight = NULL;
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_LAMBDAMART, &t.p, t.pred, 0, 0, g1, h1, &env3) == GBML_OK);
	check_query_sums_zero(&t, g1);
	/* reversed order: the most relevant document (ranked last) is pushed up */
	for (int64_t i = 0; i < n; i++)
		t.pred[i] = -(double) t.label[i] - 1e-3 * (double) i;
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_LAMBDAMART, &t.p, t.pred, 0, 0, g1, h1, &env3) == GBML_OK);
	for (int64_t q = 0; q < t.p.n_groups; q++)
	{
		float		lo,
					hi;

		query_label_range(&t, q, &lo, &hi);
		for (int64_t i = t.off[q]; i < t.off[q + 1]; i++)
			if (lo != hi && t.label[i] == hi && t.off[q + 1] - t.off[q] <= 30)
				CHECK(g1[i] < 0);
	}
	free(g1);
	free(h1);
	free_problem(&t);
}

TEST(boost_loss_thread_independent_all_kinds)
{
	test_problem t;
	int64_t		n;
	double	   *g1,
			   *h1;

	make_problem(&t, 500, 1, 50, 3, true, 9);
	n = t.p.n;
	g1 = malloc(sizeof(double) * n);
	h1 = malloc(sizeof(double) * n);
	for (int k = GBML_LOSS_RMSE; k <= GBML_LOSS_LAMBDAMART; k++)
	{
		gbml_boost_loss_options opt;

		gbml_boost_loss_default_options(&opt);
		opt.pairlogit_max_pairs = 300;	/* exercise sampling too */
		if (k == GBML_LOSS_LOGLOSS)
			for (int64_t i = 0; i < n; i++)
				t.label[i] = t.label[i] > 1 ? 1.0f : 0.0f;
		gradients_any_threads((gbml_boost_loss_kind) k, &t, &opt, 77, 5, 4, g1, h1);
	}
	free(g1);
	free(h1);
	free_problem(&t);
}

TEST(boost_loss_bad_options)
{
	float		y[] = {1, 0};
	double		pred[] = {0, 0},
				g[2],
				h[2];
	int64_t		off[] = {0, 2};
	gbml_boost_problem p = {2, y, NULL, 1, off, NULL};
	gbml_boost_loss_options opt;
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	gbml_boost_loss_default_options(&opt);
	opt.yetirank_permutations = 0;
	CHECK(gbml_boost_loss_gradients_ex(GBML_LOSS_YETIRANK, &p, pred, 0, 0, &opt, g, h, &env) == GBML_EINVAL);
	gbml_boost_loss_default_options(&opt);
	opt.yetirank_decay = 1.5;
	CHECK(gbml_boost_loss_gradients_ex(GBML_LOSS_YETIRANK, &p, pred, 0, 0, &opt, g, h, &env) == GBML_EINVAL);
}

TEST(boost_loss_yetirank_hand_case)
{
	/* Scores 40 apart: the logistic noise (scale 1) practically never reorders
	 * them, so every permutation has the adjacent pairs (0,1) at position 1
	 * (decay^0) and (1,2) at position 2 (decay^1); weights 0.15 * decay * |dy|,
	 * averaged over the permutations, and the pair gradient sigmoid(-(s_w - s_l)). */
	float		y[] = {2, 1, 0};
	double		pred[] = {80, 40, 0},
				g[3],
				h[3];
	int64_t		off[] = {0, 3};
	gbml_boost_problem p = {3, y, NULL, 1, off, NULL};
	gbml_env	env;
	double		q = 1.0 / (1.0 + exp(40.0));
	double		w01 = 0.15 * 1.0 * 1.0,
				w12 = 0.15 * 0.85 * 1.0;

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_boost_loss_gradients(GBML_LOSS_YETIRANK, &p, pred, 3, 0, g, h, &env) == GBML_OK);
	CHECK_NEAR(g[0] / q, -w01, 1e-9);
	CHECK_NEAR(g[1] / q, w01 - w12, 1e-9);
	CHECK_NEAR(g[2] / q, w12, 1e-9);
	/* default (Newton leaves): hessian = sum of pair w q (1 - q), floored at 1e-16 */
	CHECK_NEAR(h[0], fmax(w01 * q * (1 - q), 1e-16), 1e-20);
	CHECK_NEAR(h[2], fmax(w12 * q * (1 - q), 1e-16), 1e-20);
	/* "Gradient" leaves: the hessian is the row weight */
	{
		gbml_boost_loss_options opt;

		gbml_boost_loss_default_options(&opt);
		CHECK(opt.yetirank_newton);
		opt.yetirank_newton = false;
		CHECK(gbml_boost_loss_gradients_ex(GBML_LOSS_YETIRANK, &p, pred, 3, 0, &opt, g, h, &env) == GBML_OK);
		CHECK(h[0] == 1.0 && h[1] == 1.0 && h[2] == 1.0);
		CHECK_NEAR(g[0] / q, -w01, 1e-9);
	}
}

TEST(boost_loss_yetirank_sorted_order_cases)
{
	/* Scores 60 apart exceed any noise difference (|log(u/(1-u))| < 37 for a
	 * 53-bit u), so every permutation is the score order, whatever the sort's
	 * run and merge structure; the adjacent pairs and their gradients follow
	 * in closed form.  Sizes cover the sort's runs, merges and tails. */
	int			sizes[] = {2, 4, 5, 13, 37, 64, 100};
	gbml_env	env;

	gbml_env_init_malloc(&env, 2);
	for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++)
	{
		int			m = sizes[c];
		float	   *y = malloc(sizeof(float) * m);
		double	   *pred = malloc(sizeof(double) * m),
				   *g = malloc(sizeof(double) * m),
				   *h = malloc(sizeof(double) * m),
				   *want = calloc(m, sizeof(double));
		int		   *rank_row = malloc(sizeof(int) * m);
		int64_t		off[2] = {0, m};
		gbml_boost_problem p = {m, y, NULL, 1, off, NULL};
		double		decay = 1;

		for (int i = 0; i < m; i++)
		{
			/* a scrambled score order: row i has rank (i * 7 + 3) % m when gcd(7, m) = 1 */
			int			r = (m % 7 == 0) ? m - 1 - i : (i * 7 + 3) % m;

			rank_row[r] = i;
			pred[i] = 60.0 * (m - r);
			y[i] = (float) ((i * 5 + c) % 4);
		}
		for (int r = 1; r < m; r++)
		{
			int			a = rank_row[r - 1],
						b = rank_row[r];

			if (y[a] != y[b])
			{
				int			w = y[a] > y[b] ? a : b,
							l = y[a] > y[b] ? b : a;
				double		q = 1.0 / (1.0 + exp(pred[w] - pred[l]));
				double		pw = 0.15 * decay * fabs((double) y[a] - (double) y[b]);

				want[w] -= pw * q;
				want[l] += pw * q;
			}
			decay *= 0.85;
		}
		CHECK(gbml_boost_loss_gradients(GBML_LOSS_YETIRANK, &p, pred, 11, 4, g, h, &env) == GBML_OK);
		for (int i = 0; i < m; i++)
			CHECK_NEAR(g[i], want[i], 1e-12);
		free(y);
		free(pred);
		free(g);
		free(h);
		free(want);
		free(rank_row);
	}
}
