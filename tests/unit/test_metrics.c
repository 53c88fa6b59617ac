/*
 * test_metrics.c — NDCG@k (hand-computed examples, the no-relevant-document
 * rule, tie order, NaN scores, both the selection and the sorting paths
 * against a brute-force reference), AUC against brute force with weights and
 * ties, and weighted RMSE.
 */
#include "harness.h"
#include "metrics.h"
#include "rng.h"

#include <stdbool.h>
#include <stdlib.h>

static const double L3 = 1.0 / 1.5849625007211562;	/* 1 / log2(3) */

TEST(metrics_ndcg_hand_example)
{
	/* Ranked by score: row 1 (rel 0), row 2 (rel 1), row 0 (rel 2). */
	double		s[] = {0.1, 0.9, 0.5};
	float		y[] = {2, 0, 1};
	double		ideal = 3.0 + 1.0 * L3;

	CHECK_NEAR(gbml_ndcg_at_k(s, y, 3, 0), (1.0 * L3 + 3.0 / 2.0) / ideal, 1e-12);
	CHECK_NEAR(gbml_ndcg_at_k(s, y, 3, 3), (1.0 * L3 + 3.0 / 2.0) / ideal, 1e-12);
	CHECK_NEAR(gbml_ndcg_at_k(s, y, 3, 10), (1.0 * L3 + 3.0 / 2.0) / ideal, 1e-12);
	CHECK_NEAR(gbml_ndcg_at_k(s, y, 3, 1), 0.0, 1e-15);
	CHECK_NEAR(gbml_ndcg_at_k(s, y, 3, 2), (1.0 * L3) / ideal, 1e-12);
	/* perfect order */
	{
		double		s2[] = {3, 1, 2};

		CHECK_NEAR(gbml_ndcg_at_k(s2, y, 3, 0), 1.0, 1e-15);
		CHECK_NEAR(gbml_ndcg_at_k(s2, y, 3, 1), 1.0, 1e-15);
	}
}

TEST(metrics_ndcg_no_relevant_counts_one)
{
	double		s[] = {0.3, 0.2, 0.1};
	float		y[] = {0, 0, 0};

	CHECK(gbml_ndcg_at_k(s, y, 3, 10) == 1.0);
	CHECK(gbml_ndcg_at_k(s, y, 3, 0) == 1.0);
	CHECK(gbml_ndcg_at_k(s, y, 0, 10) == 1.0);
	/* a relevant document below the cut-off still makes the ideal DCG > 0 */
	{
		float		y2[] = {0, 0, 1};

		CHECK_NEAR(gbml_ndcg_at_k(s, y2, 3, 2), 0.0, 1e-15);
	}
}

TEST(metrics_ndcg_ties_by_position_and_nan_last)
{
	double		s[] = {1, 1};
	float		y[] = {0, 1};

	/* tie: row 0 ranks first, so the relevant row 1 is at rank 2 */
	CHECK_NEAR(gbml_ndcg_at_k(s, y, 2, 0), L3, 1e-12);
	{
		double		s2[] = {NAN, 0.0};
		float		y2[] = {1, 0};

		/* the NaN-scored relevant row goes last */
		CHECK_NEAR(gbml_ndcg_at_k(s2, y2, 2, 0), L3, 1e-12);
	}
}

TEST(metrics_mean_ndcg_averages_queries)
{
	double		s[] = {0.1, 0.9, 0.5, 5, 4, 2, 1};
	float		y[] = {2, 0, 1, 0, 0, 1, 3};
	int64_t		off[] = {0, 3, 5, 7};
	double		q0 = (1.0 * L3 + 3.0 / 2.0) / (3.0 + L3);
	double		q2 = (1.0 * 1 + 7.0 * L3) / (7.0 + L3);

	CHECK_NEAR(gbml_mean_ndcg(s, y, 3, off, 0), (q0 + 1.0 + q2) / 3.0, 1e-12);
	CHECK(isnan(gbml_mean_ndcg(s, y, 0, off, 0)));
}

/* Brute force: insertion sort by (score desc, NaN last, index asc). */
static double
ref_ndcg(const double *s, const float *y, int n, int k)
{
	int		   *o = malloc(sizeof(int) * n),
			   *oi = malloc(sizeof(int) * n);
	double		dcg = 0,
				idcg = 0;
	int			kk = (k <= 0 || k > n) ? n : k;

	for (int i = 0; i < n; i++)
		o[i] = oi[i] = i;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0; j--)
		{
			int			a = o[j - 1],
						b = o[j];
			bool		swap = isnan(s[a]) ? !isnan(s[b]) || b < a
				: (!isnan(s[b]) && (s[b] > s[a] || (s[b] == s[a] && b < a)));

			if (!swap)
				break;
			o[j - 1] = b;
			o[j] = a;
		}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && y[oi[j]] > y[oi[j - 1]]; j--)
		{
			int			t = oi[j];

			oi[j] = oi[j - 1];
			oi[j - 1] = t;
		}
	for (int r = 0; r < kk; r++)
	{
		dcg += (pow(2, y[o[r]]) - 1) / log2(r + 2.0);
		idcg += (pow(2, y[oi[r]]) - 1) / log2(r + 2.0);
	}
	free(o);
	free(oi);
	return idcg > 0 ? dcg / idcg : 1.0;
}

TEST(metrics_ndcg_matches_brute_force)
{
	gbml_rng	rng;
	int			n = 200;
	double	   *s = malloc(sizeof(double) * n);
	float	   *y = malloc(sizeof(float) * n);
	int			ks[] = {1, 5, 10, 63, 64, 65, 100, 200, 500, 0};

	gbml_rng_seed(&rng, 7);
	for (int rep = 0; rep < 5; rep++)
	{
		for (int i = 0; i < n; i++)
		{
			/* coarse scores make many ties */
			s[i] = (double) gbml_rng_below(&rng, rep == 0 ? 5 : 1000);
			if (rep == 4 && i % 17 == 0)
				s[i] = NAN;
			y[i] = (float) gbml_rng_below(&rng, 5);
		}
		for (size_t t = 0; t < sizeof(ks) / sizeof(ks[0]); t++)
			CHECK_NEAR(gbml_ndcg_at_k(s, y, n, ks[t]), ref_ndcg(s, y, n, ks[t]), 1e-12);
	}
	free(s);
	free(y);
}

static double
ref_auc(const double *s, const float *y, const float *w, int n)
{
	double		num = 0,
				wp = 0,
				wn = 0;

	for (int i = 0; i < n; i++)
	{
		if (y[i] > 0.5f)
			wp += w ? w[i] : 1;
		else
			wn += w ? w[i] : 1;
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
		{
			double		wij;

			if (!(y[i] > 0.5f) || y[j] > 0.5f)
				continue;
			wij = (w ? w[i] : 1) * (w ? w[j] : 1);
			if (s[i] > s[j])
				num += wij;
			else if (s[i] == s[j])
				num += 0.5 * wij;
		}
	return num / (wp * wn);
}

TEST(metrics_auc_matches_brute_force)
{
	gbml_rng	rng;
	int			n = 300;
	double	   *s = malloc(sizeof(double) * n);
	float	   *y = malloc(sizeof(float) * n),
			   *w = malloc(sizeof(float) * n);

	gbml_rng_seed(&rng, 11);
	for (int rep = 0; rep < 4; rep++)
	{
		for (int i = 0; i < n; i++)
		{
			y[i] = (float) gbml_rng_below(&rng, 2);
			/* informative, coarse (tied) scores */
			s[i] = (double) gbml_rng_below(&rng, rep == 0 ? 3 : 50) + y[i] * 5 * rep;
			w[i] = (float) (0.25 * (1 + gbml_rng_below(&rng, 8)));
		}
		CHECK_NEAR(gbml_auc(s, y, NULL, n), ref_auc(s, y, NULL, n), 1e-12);
		CHECK_NEAR(gbml_auc(s, y, w, n), ref_auc(s, y, w, n), 1e-12);
	}
	/* scores of every sign and size (the sort's keys): -0 ties +0, the infinities order as numbers */
	{
		static const double values[] = {-INFINITY, -1e300, -3.5, -2.0, -1e-300, -0.0, 0.0, 1e-300, 2.0, 3.5, 1e300,
		INFINITY};

		for (int rep = 0; rep < 4; rep++)
		{
			for (int i = 0; i < n; i++)
			{
				int			v = (int) gbml_rng_below(&rng, 12);

				y[i] = (float) gbml_rng_below(&rng, 2);
				s[i] = values[y[i] > 0.5f && v < 11 && gbml_rng_below(&rng, 3) == 0 ? v + 1 : v];
				w[i] = (float) (0.25 * (1 + gbml_rng_below(&rng, 8)));
			}
			CHECK_NEAR(gbml_auc(s, y, NULL, n), ref_auc(s, y, NULL, n), 1e-12);
			CHECK_NEAR(gbml_auc(s, y, w, n), ref_auc(s, y, w, n), 1e-12);
		}
	}
	free(s);
	free(y);
	free(w);
}

TEST(metrics_auc_edge_cases)
{
	double		s[] = {0.1, 0.2, 0.3, 0.4};
	float		y[] = {0, 0, 1, 1};
	float		y1[] = {1, 1, 1, 1};
	double		t[] = {1, 1, 1, 1};
	float		w0[] = {0, 1, 1, 1};

	CHECK_NEAR(gbml_auc(s, y, NULL, 4), 1.0, 1e-15);
	{
		double		r[] = {0.4, 0.3, 0.2, 0.1};

		CHECK_NEAR(gbml_auc(r, y, NULL, 4), 0.0, 1e-15);
	}
	CHECK_NEAR(gbml_auc(t, y, NULL, 4), 0.5, 1e-15);
	CHECK(isnan(gbml_auc(s, y1, NULL, 4)));
	CHECK(isnan(gbml_auc(s, y, NULL, 0)));
	/* labels are thresholded at 0.5 */
	{
		float		yf[] = {0.2f, 0.4f, 0.6f, 0.9f};

		CHECK_NEAR(gbml_auc(s, yf, NULL, 4), 1.0, 1e-15);
	}
	/* a zero-weight negative does not count: {0.2} vs {0.3,0.4} */
	{
		float		yw[] = {0, 0, 1, 1};
		double		sw[] = {0.9, 0.2, 0.3, 0.4};

		CHECK_NEAR(gbml_auc(sw, yw, w0, 4), 1.0, 1e-15);
		CHECK_NEAR(gbml_auc(sw, yw, NULL, 4), 0.5, 1e-15);
	}
}

/*
 * AUC does not depend on the rows' order, to the bit, with tied scores
 * and weights whose sums round (shards' predictions are gathered in any
 * order): the rows in a tie block are summed in an order of their values.
 */
TEST(metrics_auc_is_the_same_bits_in_any_row_order)
{
	enum
	{
		N = 400
	};
	double		s[N],
				ps[N];
	float		y[N],
				w[N],
				py[N],
				pw[N];
	gbml_rng	rng;
	double		auc;

	gbml_rng_seed(&rng, 11);
	for (int i = 0; i < N; i++)
	{
		s[i] = (double) (i % 7);	/* seven blocks of tied scores */
		y[i] = (float) (gbml_rng_uniform(&rng) < 0.4);
		w[i] = (float) (i % 3 == 0 ? 1e7 * gbml_rng_uniform(&rng) : 0.1 + gbml_rng_uniform(&rng) * 1e-3);
	}
	auc = gbml_auc(s, y, w, N);
	for (int trial = 0; trial < 20; trial++)
	{
		int			perm[N];

		for (int i = 0; i < N; i++)
			perm[i] = i;
		for (int i = N - 1; i > 0; i--)
		{
			int			j = (int) (gbml_rng_uniform(&rng) * (i + 1)),
						t = perm[i];

			perm[i] = perm[j];
			perm[j] = t;
		}
		for (int i = 0; i < N; i++)
		{
			ps[i] = s[perm[i]];
			py[i] = y[perm[i]];
			pw[i] = w[perm[i]];
		}
		CHECK(gbml_auc(ps, py, pw, N) == auc);
	}
}

TEST(metrics_rmse_weighted)
{
	double		s[] = {1, 2, 4};
	float		y[] = {1, 0, 1};
	float		w[] = {1, 2, 3};

	CHECK_NEAR(gbml_rmse(s, y, NULL, 3), sqrt((0 + 4 + 9) / 3.0), 1e-12);
	CHECK_NEAR(gbml_rmse(s, y, w, 3), sqrt((0 + 2 * 4 + 3 * 9) / 6.0), 1e-12);
	CHECK(isnan(gbml_rmse(s, y, w, 0)));
}
