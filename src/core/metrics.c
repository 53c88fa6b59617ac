/*
 * metrics.c — NDCG@k, ROC AUC and RMSE (declared in metrics.h).
 *
 * One ranking order everywhere (rank_order.h): score descending, NaN scores
 * last, ties by original position (the stable sort LightGBM and XGBoost use), so a figure
 * here matches the benchmark's Python metric and the peers' own evaluators.
 * NDCG uses exponential gain 2^rel - 1 and discount 1/log2(2 + rank) (rank 0
 * at the top); a query whose ideal DCG is 0 (no relevant document) counts 1.
 *
 * NDCG@k with a small k uses an O(n k) selection that allocates nothing;
 * only a large k (or all documents) and AUC sort an index, taken from the
 * caller's env once per call (the plain forms, for tests and benchmarks, use
 * a malloc env), and freed before returning; without the memory, NDCG falls
 * back to the selection.  Sums run in row order on one thread, so
 * the results are deterministic.
 */
#include "metrics.h"
#include "rank_order.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Up to this cut-off NDCG selects the top k in O(n k) without memory. */
#define NDCG_SELECT_MAX_K 64

/*
 * DCG of the first kk positions of the order "key desc, index asc", where the
 * gain of row i is gbml_ndcg_gain(label[i]).  key == NULL ranks by label (ideal DCG).
 */
static double
dcg_select(const double *key, const float *label, int64_t n, int64_t kk)
{
	int64_t		prev = -1;
	double		dcg = 0;

	for (int64_t r = 0; r < kk; r++)
	{
		int64_t		best = -1;

		for (int64_t i = 0; i < n; i++)
		{
			double		ki = key ? key[i] : (double) label[i];

			if (prev >= 0)
			{
				double		kp = key ? key[prev] : (double) label[prev];

				if (!gbml_ranks_before(kp, prev, ki, i))
					continue;
			}
			if (best < 0 || gbml_ranks_before(ki, i, key ? key[best] : (double) label[best], best))
				best = i;
		}
		if (best < 0)
			break;
		dcg += gbml_ndcg_gain(label[best]) * gbml_ndcg_discount(r);
		prev = best;
	}
	return dcg;
}

typedef gbml_keyed ranked;

static int
cmp_ranked(const void *a, const void *b)
{
	const ranked *x = a,
			   *y = b;

	if (gbml_ranks_before(x->key, x->idx, y->key, y->idx))
		return -1;
	if (gbml_ranks_before(y->key, y->idx, x->key, x->idx))
		return 1;
	return 0;
}

/* DCG of the first kk positions by sorting (large k), in the caller's scratch of n entries. */
static double
dcg_sort(ranked *rs, const double *key, const float *label, int64_t n, int64_t kk)
{
	double		dcg = 0;

	for (int64_t i = 0; i < n; i++)
	{
		rs[i].key = key ? key[i] : (double) label[i];
		rs[i].idx = i;
	}
	qsort(rs, (size_t) n, sizeof(ranked), cmp_ranked);
	for (int64_t r = 0; r < kk; r++)
		dcg += gbml_ndcg_gain(label[rs[r].idx]) * gbml_ndcg_discount(r);
	return dcg;
}

/* DCG@kk; scratch (n entries, or NULL) serves the sort a large kk wants, else O(n kk) selection. */
static double
dcg_at(ranked *scratch, const double *key, const float *label, int64_t n, int64_t kk)
{
	if (kk > NDCG_SELECT_MAX_K && scratch != NULL)
		return dcg_sort(scratch, key, label, n, kk);
	return dcg_select(key, label, n, kk);
}

/* Scratch for the queries of largest size max_n at cut-off k, or NULL when none is needed (or no memory). */
static ranked *
dcg_scratch(gbml_env *env, int64_t max_n, int k)
{
	int64_t		kk = (k <= 0 || k > max_n) ? max_n : k;

	if (kk <= NDCG_SELECT_MAX_K)
		return NULL;
	return gbml_alloc(env, (size_t) max_n * sizeof(ranked));
}

/* NDCG of one query, given its ideal DCG. */
static double
ndcg_with_ideal(ranked *scratch, const double *score, const float *label, int64_t n, int k, double ideal)
{
	int64_t		kk = (k <= 0 || k > n) ? n : k;

	if (n <= 0 || !(ideal > 0))
		return 1.0;
	return dcg_at(scratch, score, label, n, kk) / ideal;
}

static double
ideal_dcg(ranked *scratch, const float *label, int64_t n, int k)
{
	int64_t		kk = (k <= 0 || k > n) ? n : k;

	return n <= 0 ? 0 : dcg_at(scratch, NULL, label, n, kk);
}

double
gbml_ndcg_at_k(const double *score, const float *label, int64_t n, int k)
{
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	return gbml_ndcg_at_k_env(&env, score, label, n, k);
}

double
gbml_ndcg_at_k_env(gbml_env *env, const double *score, const float *label, int64_t n, int k)
{
	ranked	   *scratch = dcg_scratch(env, n, k);
	double		v = ndcg_with_ideal(scratch, score, label, n, k, ideal_dcg(scratch, label, n, k));

	gbml_free(env, scratch);
	return v;
}

static int64_t
largest_group(int64_t n_groups, const int64_t *group_offsets)
{
	int64_t		m = 0;

	for (int64_t g = 0; g < n_groups; g++)
		if (group_offsets[g + 1] - group_offsets[g] > m)
			m = group_offsets[g + 1] - group_offsets[g];
	return m;
}

void
gbml_ndcg_ideals(gbml_env *env, const float *label, int64_t n_groups, const int64_t *group_offsets,
				 int k, double *ideal)
{
	ranked	   *scratch = dcg_scratch(env, largest_group(n_groups, group_offsets), k);

	for (int64_t g = 0; g < n_groups; g++)
		ideal[g] = ideal_dcg(scratch, label + group_offsets[g], group_offsets[g + 1] - group_offsets[g], k);
	gbml_free(env, scratch);
}

double
gbml_mean_ndcg(const double *score, const float *label, int64_t n_groups,
			   const int64_t *group_offsets, int k)
{
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	return gbml_mean_ndcg_env(&env, score, label, n_groups, group_offsets, k, NULL);
}

void
gbml_ndcg_per_group_env(gbml_env *env, const double *score, const float *label, int64_t n_groups,
						const int64_t *group_offsets, int k, const double *ideal, double *out)
{
	ranked	   *scratch = dcg_scratch(env, largest_group(n_groups, group_offsets), k);

	for (int64_t g = 0; g < n_groups; g++)
	{
		int64_t		b = group_offsets[g],
					n = group_offsets[g + 1] - b;

		out[g] = ndcg_with_ideal(scratch, score + b, label + b, n, k,
								 ideal ? ideal[g] : ideal_dcg(scratch, label + b, n, k));
	}
	gbml_free(env, scratch);
}

double
gbml_mean_ndcg_env(gbml_env *env, const double *score, const float *label, int64_t n_groups,
				   const int64_t *group_offsets, int k, const double *ideal)
{
	ranked	   *scratch;
	double		sum = 0;

	if (n_groups <= 0)
		return NAN;
	scratch = dcg_scratch(env, largest_group(n_groups, group_offsets), k);
	for (int64_t g = 0; g < n_groups; g++)
	{
		int64_t		b = group_offsets[g],
					n = group_offsets[g + 1] - b;

		sum += ndcg_with_ideal(scratch, score + b, label + b, n, k,
							   ideal ? ideal[g] : ideal_dcg(scratch, label + b, n, k));
	}
	gbml_free(env, scratch);
	return sum / (double) n_groups;
}

typedef struct auc_row
{
	double		score;
	float		label;
	float		weight;
} auc_row;

/* A total order on floats: NaN first, then ascending. */
static int
cmp_float_total(float a, float b)
{
	if (isnan(a) || isnan(b))
		return isnan(b) - isnan(a);
	return (a > b) - (a < b);
}

/* Ascending score, NaN first (it ranks last, i.e. lowest): the blocks of tied scores. */
static int
cmp_auc_score(const auc_row *x, const auc_row *y)
{
	bool		nx = isnan(x->score),
				ny = isnan(y->score);

	if (nx != ny)
		return nx ? -1 : 1;
	if (nx)
		return 0;
	return (x->score > y->score) - (x->score < y->score);
}

/*
 * The blocks, and inside a block label then weight: the rows' order is a
 * function of their values, so a block's weight sums (and the AUC) are the
 * same bits whatever order the rows came in (shards' rows gathered).
 */
static int
cmp_auc_row(const void *a, const void *b)
{
	const auc_row *x = a,
			   *y = b;
	int			c = cmp_auc_score(x, y);

	if (c != 0)
		return c;
	if ((c = cmp_float_total(x->label, y->label)) != 0)
		return c;
	return cmp_float_total(x->weight, y->weight);
}

/* A score as an unsigned key in the order cmp_auc_score gives (NaN 0, first; -0 and +0 one key). */
static inline uint64_t
auc_score_key(double s)
{
	uint64_t	u;

	if (isnan(s))
		return 0;
	if (s == 0)
		s = 0.0;
	memcpy(&u, &s, sizeof(u));
	/* negative: every bit flipped (larger magnitude, smaller key); positive: the sign bit set */
	return (u >> 63) ? ~u : (u | 0x8000000000000000ULL);
}

/*
 * rs sorted by cmp_auc_row: an LSD radix sort of the score keys (stable,
 * eight byte passes, a pass skipped when every key has the same byte
 * there), then each block of equal scores by label and weight.  A
 * training's eval AUC sorts its eval rows every tree: qsort's comparisons
 * were most of that time.
 */
static int
auc_sort(gbml_env *env, auc_row *rs, int64_t n)
{
	uint64_t   *key = gbml_alloc_array(env, (size_t) n * 2, sizeof(uint64_t));
	auc_row    *tmp = gbml_alloc_array(env, (size_t) n, sizeof(auc_row));
	int64_t		count[8][256];
	uint64_t   *k0,
			   *k1;
	auc_row    *r0 = rs,
			   *r1 = tmp;

	if (key == NULL || tmp == NULL)
	{
		gbml_free(env, key);
		gbml_free(env, tmp);
		return env->error_code;
	}
	k0 = key;
	k1 = key + n;
	memset(count, 0, sizeof(count));
	for (int64_t i = 0; i < n; i++)
	{
		k0[i] = auc_score_key(rs[i].score);
		for (int b = 0; b < 8; b++)
			count[b][(k0[i] >> (8 * b)) & 0xff]++;
	}
	for (int b = 0; b < 8; b++)
	{
		int64_t		at = 0;

		if (count[b][(k0[0] >> (8 * b)) & 0xff] == n)
			continue;			/* every key has this byte: the pass would move nothing */
		for (int v = 0; v < 256; v++)
		{
			int64_t		c = count[b][v];

			count[b][v] = at;
			at += c;
		}
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		to = count[b][(k0[i] >> (8 * b)) & 0xff]++;

			k1[to] = k0[i];
			r1[to] = r0[i];
		}
		{
			uint64_t   *kt = k0;
			auc_row    *rt = r0;

			k0 = k1;
			k1 = kt;
			r0 = r1;
			r1 = rt;
		}
	}
	if (r0 != rs)
		memcpy(rs, r0, sizeof(auc_row) * (size_t) n);
	/* each block of tied scores by label, then weight */
	for (int64_t s = 0, t; s < n; s = t)
	{
		for (t = s + 1; t < n && k0[t] == k0[s]; t++)
			;
		if (t - s > 1)
			qsort(rs + s, (size_t) (t - s), sizeof(auc_row), cmp_auc_row);
	}
	gbml_free(env, key);
	gbml_free(env, tmp);
	return GBML_OK;
}

double
gbml_auc(const double *score, const float *label, const float *weight, int64_t n)
{
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	return gbml_auc_env(&env, score, label, weight, n);
}

double
gbml_auc_env(gbml_env *env, const double *score, const float *label, const float *weight, int64_t n)
{
	auc_row    *rs;
	double		wpos = 0,
				wneg = 0,
				neg_below = 0,
				area = 0;

	if (n <= 0)
		return NAN;
	rs = gbml_alloc(env, (size_t) n * sizeof(auc_row));
	if (rs == NULL)
		return NAN;
	for (int64_t i = 0; i < n; i++)
	{
		rs[i].score = score[i];
		rs[i].label = label[i];
		rs[i].weight = weight ? weight[i] : 1.0f;
	}
	if (auc_sort(env, rs, n) != GBML_OK)
	{
		gbml_free(env, rs);
		return NAN;
	}
	/* Walk blocks of tied scores: a positive beats every negative below its
	 * block and half of the negatives inside it. */
	for (int64_t s = 0; s < n;)
	{
		int64_t		t = s;
		double		bp = 0,
					bn = 0;

		while (t < n && cmp_auc_score(&rs[s], &rs[t]) == 0)
		{
			if (rs[t].label > 0.5f)
				bp += rs[t].weight;
			else
				bn += rs[t].weight;
			t++;
		}
		area += bp * (neg_below + 0.5 * bn);
		neg_below += bn;
		wpos += bp;
		wneg += bn;
		s = t;
	}
	gbml_free(env, rs);
	if (!(wpos > 0) || !(wneg > 0))
		return NAN;
	return area / (wpos * wneg);
}

double
gbml_rmse(const double *score, const float *label, const float *weight, int64_t n)
{
	double		se = 0,
				sw = 0;

	for (int64_t i = 0; i < n; i++)
	{
		double		w = weight ? (double) weight[i] : 1.0,
					e = score[i] - (double) label[i];

		se += w * e * e;
		sw += w;
	}
	if (!(sw > 0))
		return NAN;
	return sqrt(se / sw);
}
