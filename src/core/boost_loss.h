/*
 * boost_loss.h — the losses the boosted oblivious-tree trainer optimises:
 * per-row gradients and (diagonal) hessians, the mean loss value and the
 * initial constant prediction.
 *
 * Pointwise losses (RMSE, Logloss) and query-wise ones (QueryRMSE,
 * PairLogit, YetiRank, LambdaMART).  Query-wise losses need the rows of each
 * query contiguous: the trainer passes group_offsets (n_groups + 1 entries).
 * Everything here is deterministic whatever env->threads is: each group (or
 * fixed row block) writes only its own rows, and the randomised YetiRank draws
 * from a per-group RNG stream derived from (seed, iteration, group).
 *
 * Semantics follow CatBoost (RMSE, Logloss, QueryRMSE, PairLogit, YetiRank)
 * and LightGBM (LambdaMART = lambdarank); docs/boost_losses.md has the details.
 */
#ifndef GBML_BOOST_LOSS_H
#define GBML_BOOST_LOSS_H

#include <stdbool.h>
#include <stdint.h>
#include "env.h"

#include <math.h>

typedef enum gbml_boost_loss_kind
{
	GBML_LOSS_RMSE,
	GBML_LOSS_LOGLOSS,
	GBML_LOSS_QUERYRMSE,
	GBML_LOSS_PAIRLOGIT,
	GBML_LOSS_YETIRANK,
	GBML_LOSS_LAMBDAMART,
	/* softmax over K classes, K trees an iteration (boost_multiclass.h); not one of the per-row losses here */
	GBML_LOSS_MULTICLASS
} gbml_boost_loss_kind;

/* "RMSE","Logloss","QueryRMSE","PairLogit","YetiRank","LambdaMART","MultiClass", NULL — index = kind */
extern const char *const gbml_boost_loss_names[];

/* True for the losses that need a group id on every row. */
bool		gbml_boost_loss_is_ranking(gbml_boost_loss_kind kind);

typedef struct gbml_boost_problem
{
	int64_t		n;				/* rows */
	const float *label;			/* n */
	const float *weight;		/* n, or NULL for all 1 */
	int64_t		n_groups;		/* 0 when no groups */
	const int64_t *group_offsets;	/* n_groups+1: rows of group g are [off[g], off[g+1]) — contiguous */
	/*
	 * n_groups: query g's index among every query of the training (its
	 * random stream), or NULL when the rows are every query's (a shard's
	 * queries are some of the union's)
	 */
	const int64_t *group_stream;
} gbml_boost_problem;

/* Tunables of the ranking losses; gbml_boost_loss_gradients() uses the defaults. */
#define GBML_PAIRLOGIT_MAX_PAIRS		 10000	/* pairs kept per query (deterministic subsample beyond) */
#define GBML_YETIRANK_PERMUTATIONS		 10		/* CatBoost's default */
#define GBML_YETIRANK_DECAY				 0.85	/* CatBoost's position discount decay */
#define GBML_LAMBDAMART_TRUNCATION		 30		/* LightGBM's lambdarank_truncation_level */

typedef struct gbml_boost_loss_options
{
	int64_t		pairlogit_max_pairs;	/* > 0: pairs per query before sampling */
	int			yetirank_permutations;	/* > 0 */
	double		yetirank_decay;			/* in (0, 1] */
	bool		yetirank_newton;		/* true (default, CatBoost 1.2 "Newton" leaves): hess =
										 * sum of pair w p(1-p); false (CatBoost's older
										 * "Gradient" leaves): hess = row weight */
	int			lambdamart_truncation;	/* > 0 */
	bool		lambdamart_norm;		/* LightGBM lambdarank_norm (default true) */
	double		sigmoid;				/* LambdaMART pairwise sigmoid scale (LightGBM sigmoid, default 1) */
} gbml_boost_loss_options;

void		gbml_boost_loss_default_options(gbml_boost_loss_options *opt);

/*
 * Fills grad[n], hess[n] (hess > 0) for the current predictions; `iteration`
 * and `seed` feed the randomised losses (YetiRank's permutations)
 * deterministically.  Parallel over groups/rows with env->threads,
 * deterministic whatever the thread count.  Sign convention: grad is
 * dLoss/dpred (the trainer's leaf value is -G/(H+lambda)).
 * Returns GBML_OK, or an error code with env->error set (missing groups for a
 * ranking loss, allocation failure).
 */
int			gbml_boost_loss_gradients(gbml_boost_loss_kind kind, const gbml_boost_problem *p,
									  const double *pred, uint64_t seed, int64_t iteration,
									  double *grad, double *hess, gbml_env *env);
int			gbml_boost_loss_gradients_ex(gbml_boost_loss_kind kind, const gbml_boost_problem *p,
										 const double *pred, uint64_t seed, int64_t iteration,
										 const gbml_boost_loss_options *opt,
										 double *grad, double *hess, gbml_env *env);

/*
 * Logloss derivatives of rows [first, first + n) at pred[r] + value[leaf of
 * r], in fixed point at scale, summed per leaf into g[] and h[] (added to
 * what they hold): a further Newton step of a tree's leaf values, the same
 * bits whatever the rows' split into blocks, threads or shards.  leaf[r]'s
 * low bits are its leaf (mask), rows flagged `skip` are left out.  One
 * thread.
 */
void		gbml_boost_logloss_leaf_sums(const gbml_boost_problem *p, const double *pred, const uint16_t *leaf,
										 int64_t first, int64_t n, const double *value, uint16_t mask,
										 uint16_t skip, double scale, int64_t *g, int64_t *h);
/* The largest |derivative| (g or h) a row of weight at most max_weight has: scale's bound. */
double		gbml_boost_logloss_derivative_bound(double max_weight);

/*
 * The summed objective whose derivative gradients_ex() returns, at the same
 * (seed, iteration, options): RMSE 1/2 sum w (p-y)^2, Logloss sum w (log(1+e^p) - y p),
 * QueryRMSE 1/2 sum w (y - p - shift_q)^2, PairLogit / YetiRank sum over the
 * (sampled / permutation-weighted) pairs of pw log(1 + e^-(s_win - s_lose)),
 * LambdaMART (only meaningful with lambdamart_norm = false) sum over the pairs
 * of |dNDCG| log(1 + e^-sigma(s_hi - s_lo)).  The pair weights of YetiRank and
 * LambdaMART are piecewise constant in pred, so the gradient is exact between
 * order changes.  Exists for tests and diagnostics; NaN if p is invalid.
 */
double		gbml_boost_loss_objective_ex(gbml_boost_loss_kind kind, const gbml_boost_problem *p,
										 const double *pred, uint64_t seed, int64_t iteration,
										 const gbml_boost_loss_options *opt);

/*
 * Mean loss value (for progress / eval when the eval metric is the loss),
 * lower is better: RMSE and QueryRMSE the root mean squared error, Logloss the
 * weighted mean log loss, PairLogit the pair-weighted mean pair log loss,
 * YetiRank and LambdaMART 1 - mean NDCG@10 (metrics.h convention).
 * NaN when a ranking loss gets no groups.
 */
double		gbml_boost_loss_value(gbml_boost_loss_kind kind, const gbml_boost_problem *p,
								  const double *pred);
/* The same with its scratch from env (the trainer's form; the one above mallocs, for tests). */
double		gbml_boost_loss_value_env(gbml_env *env, gbml_boost_loss_kind kind, const gbml_boost_problem *p,
									  const double *pred);

/*
 * Exact sums of the pointwise losses' per-row terms (RMSE, Logloss): the
 * base score and a trained model's RMSE, Logloss and loss.  Each term is
 * rounded to fixed point at a scale from the largest term over the whole
 * data (gbml_boost_fixed_scale) and summed as int64, so the sums do not
 * depend on the rows' order, and shards' partial sums (at the scales from
 * the shards' maxima and the union's row count) add up to one server's.
 */
typedef enum gbml_boost_term
{
	GBML_BOOST_TERM_W,			/* w */
	GBML_BOOST_TERM_WY,			/* w y */
	GBML_BOOST_TERM_SQERR,		/* w (pred - y)^2 */
	GBML_BOOST_TERM_LOGLOSS,	/* w (log(1 + e^pred) - y pred) */
	GBML_BOOST_N_TERMS
} gbml_boost_term;

/* Which prediction terms a call computes (the others are 0): an eval metric needs one. */
#define GBML_BOOST_WITH_SQERR	1
#define GBML_BOOST_WITH_LOGLOSS 2
#define GBML_BOOST_WITH_BOTH	3

/* The largest |term| of each kind over p's rows (pred NULL, or not `with`: the prediction terms are 0). */
void		gbml_boost_term_maxima(const gbml_boost_problem *p, const double *pred, unsigned with, double *max);
/*
 * The scales of n_terms sums over n rows (or queries) of the union from the
 * union's maxima (0: a term is not finite somewhere).
 */
void		gbml_boost_term_scales(const double *max, int n_terms, int64_t n, double *scale);

/* A term into its largest |term| so far (NaN: infinity, the sum is not finite). */
static inline void
gbml_boost_term_max_fold(double *max, double term)
{
	if (!(fabs(term) <= *max))
		*max = isnan(term) ? INFINITY : fabs(term);
}

/* A term in fixed point at scale (0: a term not summed). */
static inline int64_t
gbml_boost_term_fixed(double term, double scale)
{
	return scale > 0 ? (int64_t) llrint(term * scale) : 0;
}
/* The fixed-point sums of p's terms at those scales. */
void		gbml_boost_term_sums(const gbml_boost_problem *p, const double *pred, unsigned with, const double *scale,
								 int64_t *sum);
/* Their value: sum[t] / scale[t] (NaN when the scale is 0). */
double		gbml_boost_term_value(const int64_t *sum, const double *scale, gbml_boost_term t);
/*
 * The per-query terms of the ranking metrics (ndcg_k > 0: NDCG@ndcg_k) or
 * of kind's loss value (ndcg_k 0), num[g] and den[g] for each query, so
 * that the value is a function of sum num and sum den (gbml_boost_group_value):
 * summed exactly as the terms above (at scales from the largest |num| and
 * |den| and the union's query count), the same bits from shards' queries.
 * GBML_EINVAL for a pointwise kind with ndcg_k 0.  ideal: with ndcg_k > 0,
 * each query's ideal DCG at ndcg_k (gbml_ndcg_ideals), or NULL.
 */
int			gbml_boost_group_terms(gbml_env *env, gbml_boost_loss_kind kind, int ndcg_k, const gbml_boost_problem *p,
								   const double *pred, const double *ideal, double *num, double *den);
/* The metric (ndcg_k > 0) or the loss value from the summed terms (num at scale[0], den at scale[1]). */
double		gbml_boost_group_value(gbml_boost_loss_kind kind, int ndcg_k, const int64_t *sum, const double *scale);

/* The base score of kind from the sums of W and WY. */
double		gbml_boost_base_from_sums(gbml_boost_loss_kind kind, const int64_t *sum, const double *scale);

/*
 * Initial constant prediction (mean label for RMSE, log-odds for Logloss, 0
 * for ranking losses), the mean from the exact term sums above.
 */
double		gbml_boost_loss_base_score(gbml_boost_loss_kind kind, const gbml_boost_problem *p);

#endif
