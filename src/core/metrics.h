/*
 * metrics.h — evaluation metrics shared by the trainers (eval sets, early
 * stopping, META) and the SQL aggregates gbml.ndcg / gbml.auc.
 *
 * NDCG convention (the same wherever gbml prints a figure): exponential gain
 * 2^rel - 1, discount 1/log2(1 + position), a query with no relevant document
 * (ideal DCG = 0) counts 1.  Ties in score are broken by original position
 * (stable sort by score descending), as LightGBM and XGBoost do.
 */
#ifndef GBML_METRICS_H
#define GBML_METRICS_H

#include <math.h>
#include <stdint.h>

#include "env.h"

/*
 * The largest relevance label NDCG takes: past 1000 the gains' sums
 * overflow a double within queries of a few million rows (2^1024 is
 * infinite), and NDCG and LambdaMART's weights become NaN.  (XGBoost and
 * LightGBM refuse a label past 31 with this gain.)  The gbml.ndcg aggregate
 * also refuses a negative label; training takes one, and the losses that
 * order by label differences (PairLogit, YetiRank, QueryRMSE) take any.
 */
#define GBML_NDCG_MAX_LABEL 1000

/* NDCG@k of one query; k <= 0 means all documents. */
/* The NDCG convention in one place: gain 2^label - 1, discount 1/log2(2 + rank), rank 0 the top. */
static inline double
gbml_ndcg_gain(double label)
{
	return exp2(label) - 1.0;
}

static inline double
gbml_ndcg_discount(int64_t rank)
{
	return 1.0 / log2(2.0 + (double) rank);
}

double		gbml_ndcg_at_k(const double *score, const float *label, int64_t n, int k);
/* Mean NDCG@k over queries (unweighted); rows of query g are [off[g], off[g+1]); NaN if none. */
double		gbml_mean_ndcg(const double *score, const float *label, int64_t n_groups,
						   const int64_t *group_offsets, int k);
/* ROC AUC: label > 0.5 is positive; ties count 1/2; weighted (weight may be NULL);
   NaN scores rank lowest; NaN when either class has no weight (AUC undefined). */
double		gbml_auc(const double *score, const float *label, const float *weight, int64_t n);
/* Weighted root mean squared error (weight may be NULL); NaN when the weights sum to 0. */
/*
 * The same with scratch memory (a large-k NDCG sort, the AUC sort) taken
 * from env, so it counts against the memory budget and lives in a
 * MemoryContext.  The engine and the SQL aggregates use these; the forms
 * without env (malloc) are for tests and benchmarks.
 */
double		gbml_ndcg_at_k_env(gbml_env *env, const double *score, const float *label, int64_t n, int k);
/* ideal: each query's ideal DCG from gbml_ndcg_ideals (a trainer's eval set, every tree), or NULL */
double		gbml_mean_ndcg_env(gbml_env *env, const double *score, const float *label, int64_t n_groups,
							   const int64_t *group_offsets, int k, const double *ideal);
/* Each query's NDCG@k into out[n_groups] (ideal: each query's ideal DCG at k, or NULL: computed here). */
void		gbml_ndcg_per_group_env(gbml_env *env, const double *score, const float *label, int64_t n_groups,
									const int64_t *group_offsets, int k, const double *ideal, double *out);
void		gbml_ndcg_ideals(gbml_env *env, const float *label, int64_t n_groups,
							 const int64_t *group_offsets, int k, double *ideal);
double		gbml_auc_env(gbml_env *env, const double *score, const float *label, const float *weight, int64_t n);

double		gbml_rmse(const double *score, const float *label, const float *weight, int64_t n);

#endif
