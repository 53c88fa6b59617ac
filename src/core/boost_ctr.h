/*
 * boost_ctr.h — categorical features at training time, as CatBoost treats
 * them: what each categorical input becomes (boost_cat.h), the ordered
 * target statistics of the training rows, the final statistics the model
 * keeps, and the extra bin columns all of them fill.
 *
 * Per categorical input, by how many slots (categories, and NULL when it
 * occurs) its training rows use:
 *   - one: nothing (a constant);
 *   - up to one_hot_max_size: one one-hot feature per slot used;
 *   - more: a ctr_mean feature, plus a ctr_counter one when asked; or with
 *     sets (categorical_split sets, Depthwise trees) and at most 254
 *     categories, a slot column (boost_cat.h) the trees split as sets.
 *
 * Ordered statistics (no target leak): the training rows are visited in a
 * random permutation (seeded, drawn over the canonical training order,
 * whole query groups together when rows have a group id); each row's
 * ctr_mean is computed from the rows visited before it with its category
 * only, then its own target joins the sums.  The sums are doubles added in
 * that fixed order, the value rounded once to float, so the statistic does
 * not depend on threads, chunks or where the rows lived.  The model keeps
 * the statistic over all training rows (the sums after the last row): the
 * eval set is binned with it, as scoring uses it.  The counter needs no
 * target and is the same for every row.
 *
 * Targets: the label; for Logloss 1 when it is > 0.5, else 0; for
 * MultiClass one ctr_mean per class c, of the target [label = c] (its
 * class in the feature's `category`, training only: the table is what a
 * model keeps), with the prior 1/K unless ctr_prior is set.  Weights do
 * not enter (CatBoost's CTRs ignore them too).
 *
 * The derived features follow the inputs in the bins, each binned with
 * borders of its own (one-hot: 0.5; a ctr: quantiles of the training
 * rows' values, like a numeric feature's), and the categorical inputs
 * themselves keep no border: no tree splits on a raw id.
 */
#ifndef GBML_BOOST_CTR_H
#define GBML_BOOST_CTR_H

#include "boost_cat.h"
#include "boost_quantize.h"

typedef struct gbml_boost_ctr_params
{
	int			one_hot_max_size;
	double		prior;			/* NaN: the mean target */
	double		prior_weight;
	bool		counter;
	int			border_count;
	gbml_boost_border_type border_type;
	int64_t		border_sample_size;
	uint64_t	seed;
	bool		binary_target;	/* Logloss: targets 0/1 */
	int			classes;		/* MultiClass: K, a ctr_mean per class; else 0 */
	bool		sets;			/* categorical_split sets: slot columns instead of statistics */
} gbml_boost_ctr_params;

typedef struct gbml_boost_ctr_fit
{
	const gbml_feature_schema *schema;
	int			n_inputs;
	int			n_cat;			/* categorical inputs */
	int		   *col;			/* n_cat: their input indices */
	gbml_boost_keep keep;		/* the training rows' ids, kept while binning */
	gbml_boost_keep eval_keep;	/* the eval rows' */
	gbml_boost_inputs model;	/* what the model will store */
	int			n_one_hot,
				n_ctr,
				n_slot;
} gbml_boost_ctr_fit;

/*
 * Sets fit up for inputs described by schema (NULL: none categorical),
 * n training rows and n_eval eval rows: the id buffers keep points into.
 * Leaves fit->n_cat 0, and nothing allocated, without categorical inputs.
 */
int			gbml_boost_ctr_begin(gbml_boost_ctr_fit *fit, const gbml_feature_schema *schema, int n_inputs,
								 int64_t n, int64_t n_eval, gbml_env *env);
void		gbml_boost_ctr_free(gbml_boost_ctr_fit *fit, gbml_env *env);

/* Takes the categorical inputs' borders away (before binning). */
int			gbml_boost_ctr_clear_borders(const gbml_boost_ctr_fit *fit, gbml_boost_borders *borders,
										 gbml_env *env);

/*
 * Once the rows are binned and their ids kept: checks the ids, chooses the
 * derived features, computes their statistics, and adds them to the bins
 * (training rows: label[], groups group_off[0..n_groups]; eval rows:
 * eval_bins, may be NULL) and to borders.  The training bins have
 * bins_first columns before the derived ones: the inputs' (n_inputs), or
 * none on a coordinator whose shards hold the inputs' bins
 * (boost_shards_cat.c).  fit->model is then the section to store; the kept
 * ids are freed.
 */
int			gbml_boost_ctr_finish(gbml_boost_ctr_fit *fit, const gbml_boost_ctr_params *p, const float *label,
								  int64_t n_groups, const int64_t *group_off, gbml_boost_bins *bins,
								  int bins_first, gbml_boost_bins *eval_bins, gbml_boost_borders *borders,
								  int threads, gbml_env *env);

/*
 * The permutation of the n training positions the statistics visit them
 * in: perm[k] is the k-th visited; with groups (n_groups > 0), whole groups
 * in a random order, each group's rows in their order.
 */
int			gbml_boost_ctr_permutation(int64_t n, int64_t n_groups, const int64_t *group_off, uint64_t seed,
									   int64_t *perm, gbml_env *env);

/* What a statistic averages: the label, 1 for a label > 0.5 (Logloss), or a class c >= 0: [label = c]. */
#define GBML_CTR_LABEL (-1)
#define GBML_CTR_BINARY (-2)

/*
 * One categorical feature's ordered statistics: row i (ids[i], label[i])
 * gets value[i] = (sum + prior * prior_weight) / (count + prior_weight)
 * over the rows before it in perm with its slot (sum of the rows' targets,
 * `target` above); table[s] gets the same over all rows, for each of the
 * n_categories + 2 slots.
 */
int			gbml_boost_ctr_ordered(const float *ids, int32_t n_categories, const float *label, int target,
								   const int64_t *perm, int64_t n, double prior, double prior_weight,
								   float *value, float *table, gbml_env *env);

#endif
