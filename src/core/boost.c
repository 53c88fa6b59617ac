/*
 * boost.c — the "boost" model kind: boosted oblivious trees (MatrixNet /
 * CatBoost style).  Owns the parameters, the training driver (row order,
 * quantization, the level-by-level tree growth loop, eval set, early
 * stopping, best model, META) and its split side (the fixed-point plan, the
 * splits, the leaf values), the model sections it writes, and the
 * algorithm table.  The row side it drives for this process's rows (the
 * gradients, the histogram passes, the leaf indices and predictions:
 * boost_local_rows) is boost_rows_local.c, for rows on other servers
 * boost_shards.c (boost_internal.h); the trained model's side (loading the
 * sections, scoring, the readable dump, feature importance) is
 * boost_model.c.
 *
 * One tree:
 *   1. gradients and hessians of the loss at the current predictions
 *      (boost_loss.c), turned into int64 fixed point (boost_histogram.h says
 *      why: exact, order-free sums, hence thread-count-independent models);
 *   2. level by level: one histogram pass over the bins of the rows in the
 *      smaller child of every pair of siblings (the larger child's histogram
 *      is parent - smaller), then the single (feature, border) with the best
 *      total score over all leaves; every row's leaf index gets that bit at
 *      the start of the next level's pass (one visit of each block per level);
 *   3. Newton leaf values -lr * G / (H + l2_leaf_reg), stored as float, and
 *      the predictions updated with exactly the float the scorer will add.
 * With grow_policy Depthwise, step 2 picks a split per leaf of the level
 * instead (boost_node_split.c, sets of categories too); the rows' leaf
 * indices then take each node's own split (apply_level_split in
 * boost_rows_local.c), and the forest keeps 2^depth - 1 splits a tree
 * (boost_split_index).  Trees that split sets are written with set
 * features (boost_set_features.c).
 *
 * YetiRank follows CatBoost here too (and Logloss with score_function L2):
 * its split search sees the row weights in the place of the hessian
 * (CatBoost scores splits on weighted first derivatives), and the loss's
 * Newton hessian only enters the leaf values (structure_by_weight below).
 *
 * Rows are trained in the canonical order the driver hands over, except that
 * with a group id they are stably sorted by group first, so the ranking losses
 * and NDCG see contiguous queries.
 *
 * On the GPU (boost_gpu.h) the bins live on the device only (the host's
 * copy is freed once streamed in); the histogram passes and the leaf-index
 * updates run there, with the same integer sums, and every row's leaf index
 * comes back once per tree for the predictions.  Everything else — the
 * gradients, the split search, the leaf values, the eval set — is this
 * file's and boost_rows_local.c's code on both devices, so the model bytes
 * are the same.
 *
 * Categorical inputs (boost_ctr.h) become one-hot or target-statistic
 * features after the rows are binned: their ids are kept while binning, and
 * the derived features join the bins as extra columns, so everything below
 * (histograms, the GPU, the eval set) treats them as ordinary features; the
 * model stores how to compute them ('BSTC', boost_cat.h).
 *
 * Rows in temporary files (a dataset past its memory budget, dataset.h)
 * are binned as their chunks are read back (gbml_boost_bins_from_chunks),
 * and the files go before the first tree: the fit holds the bins and the
 * per-row state, not the float rows.  When even the bins do not fit the
 * budget beside the per-row state, they go to a temporary file of their own
 * (bins_window) and every pass over them is a walk of runs of blocks read
 * ahead (boost_bins_walk.h), on the CPU.  The eval rows, wherever they are, are
 * binned with the same borders and scored per tree from their bins (a bin
 * compares to a border index as its value to the border), so their floats
 * are not needed either.
 */
#include "boost_internal.h"
#include "boost_bins_walk.h"
#include "boost_model.h"
#include "chunk_prefetch.h"
#include "chunk_store_gpu.h"
#include "metrics.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *const gbml_boost_loss_choices[] = {
	"auto", "RMSE", "Logloss", "QueryRMSE", "PairLogit", "YetiRank", "LambdaMART", "MultiClass", NULL
};
enum
{
	SCORE_AUTO = 0, SCORE_NEWTON_L2 = 1, SCORE_L2 = 2
};
static const char *const score_function_choices[] = {"auto", "NewtonL2", "L2", NULL};
static const char *const border_type_choices[] = {"Median", "GreedyLogSum", NULL};
static const char *const metric_choices[] = {"auto", "NDCG", "RMSE", "AUC", "Logloss", "loss", "MultiClass", "Accuracy", NULL};
static const char *const grow_policy_choices[] = {"SymmetricTree", "Depthwise", NULL};
static const char *const categorical_split_choices[] = {"ctr", "sets", NULL};

#define BP(field) offsetof(gbml_boost_params, field)
const gbml_param_spec gbml_boost_param_specs[] = {
	{"iterations", GBML_PARAM_INT, BP(iterations), 1, 100000, 500, NULL, NULL,
	"number of boosting iterations (trees)"},
	{"learning_rate", GBML_PARAM_REAL, BP(learning_rate), 1e-6, 1, 0.1, NULL, NULL,
	"shrinkage applied to every leaf value"},
	{"depth", GBML_PARAM_INT, BP(depth), 1, GBML_BOOST_MAX_DEPTH, 6, NULL, NULL,
	"depth of every oblivious tree (2^depth leaves)"},
	{"l2_leaf_reg", GBML_PARAM_REAL, BP(l2_leaf_reg), 0, 1e6, NAN, NULL, NULL,
	"L2 regularisation of leaf values: -G / (H + l2_leaf_reg); null: 0 for YetiRank (CatBoost's default), else 3"},
	{"border_count", GBML_PARAM_INT, BP(border_count), 1, 255, 32, NULL, NULL,
	"maximum number of borders (split candidates) per feature"},
	{"border_type", GBML_PARAM_ENUM, BP(border_type), 0, 0, 0, NULL, border_type_choices,
	"how borders are chosen when a feature has more distinct values than border_count: Median (quantiles "
	"of the sample) or GreedyLogSum (CatBoost's: greedy splits maximising the sum of log bin sizes)"},
	{"border_sample_size", GBML_PARAM_INT, BP(border_sample_size), 1000, 1e8, 200000, NULL, NULL,
	"rows sampled to compute the borders"},
	{"random_seed", GBML_PARAM_INT, BP(random_seed), 0, 9007199254740991.0, 0, NULL, NULL,
	"seed of every random choice (border sample, subsampling, YetiRank permutations)"},
	{"subsample", GBML_PARAM_REAL, BP(subsample), 1e-6, 1, 1, NULL, NULL,
	"share of rows (of groups, for ranking losses) drawn for each tree"},
	{"loss", GBML_PARAM_ENUM, BP(loss), 0, 0, 0, NULL, gbml_boost_loss_choices,
	"loss function; auto = YetiRank when rows have a group_id, else RMSE; MultiClass: labels are class ids 0, 1, "
	"2, ... (softmax, one tree per class an iteration)"},
	{"eval_metric", GBML_PARAM_ENUM, BP(eval_metric), 0, 0, 0, NULL, metric_choices,
	"metric on the eval set; auto = NDCG@eval_k for ranking losses, RMSE for RMSE, Logloss for Logloss, "
	"MultiClass (mean -log p(label)) for MultiClass, which also takes Accuracy"},
	{"eval_k", GBML_PARAM_INT, BP(eval_k), 1, 1000000, 10, NULL, NULL,
	"k of NDCG@k"},
	{"early_stopping_rounds", GBML_PARAM_INT, BP(early_stopping_rounds), 0, 1000000, 0, NULL, NULL,
	"stop when the eval metric has not improved for this many trees; 0 = off"},
	{"use_best_model", GBML_PARAM_BOOL, BP(use_best_model), 0, 0, 1, NULL, NULL,
	"with an eval set, keep only the trees up to the best eval iteration"},
	{"one_hot_max_size", GBML_PARAM_INT, BP(one_hot_max_size), 0, 255, 2, NULL, NULL,
	"a categorical feature with at most this many categories in the training rows (NULL counts as one) "
	"splits as \"feature = category\"; one with more by ordered target statistics (CatBoost's meaning)"},
	{"ctr_prior", GBML_PARAM_REAL, BP(ctr_prior), -1e15, 1e15, NAN, NULL, NULL,
	"prior of the target statistics: (sum of earlier targets + ctr_prior * ctr_prior_weight) / "
	"(count + ctr_prior_weight); null: the mean target"},
	{"ctr_prior_weight", GBML_PARAM_REAL, BP(ctr_prior_weight), 1e-6, 1e6, 1, NULL, NULL,
	"weight of ctr_prior in the target statistics, in rows"},
	{"ctr_counter", GBML_PARAM_BOOL, BP(ctr_counter), 0, 0, 1, NULL, NULL,
	"with each target statistic, a frequency feature (CatBoost's Counter: count / (largest count + 1))"},
	{"leaf_estimation_iterations", GBML_PARAM_INT, BP(leaf_estimation_iterations), 1, 100, 1, NULL, NULL,
	"Newton steps for each tree's leaf values with Logloss: the first from the tree's sums, each further "
	"one from the derivatives at the leaf values so far (CatBoost's leaf_estimation_iterations); "
	"other losses take one"},
	{"score_function", GBML_PARAM_ENUM, BP(score_function), 0, 0, 0, NULL, score_function_choices,
	"how a split is scored: NewtonL2 (sum G^2 / (H + l2) with the loss's hessians H) or L2 (CatBoost's: "
	"H replaced by the row weights, the hessians only in the leaf values; Logloss and YetiRank); "
	"auto = L2 for YetiRank, else NewtonL2"},
	{"random_strength", GBML_PARAM_REAL, BP(random_strength), 0, 1e6, 0, NULL, NULL,
	"CatBoost's split noise: each candidate split's score is compared with a normal draw added, of "
	"standard deviation random_strength x the gradients' root mean square x n / (n + exp(iteration x "
	"learning_rate)); 0: none"},
	{"grow_policy", GBML_PARAM_ENUM, BP(grow_policy), 0, 0, 0, NULL, grow_policy_choices,
	"SymmetricTree: oblivious trees, one split per level (MatrixNet's, the fastest to score); Depthwise: each "
	"node picks its own split, level by level to the full depth (CatBoost's Depthwise, XGBoost's trees); a "
	"node with no split of positive gain sends all its rows left"},
	{"min_child_weight", GBML_PARAM_REAL, BP(min_child_weight), 0, 1e15, 1, NULL, NULL,
	"Depthwise: a node's split must leave each child at least this sum of the loss's hessians (of the row "
	"weights with score_function L2), XGBoost's min_child_weight; 0: any split leaving rows on both sides"},
	{"categorical_split", GBML_PARAM_ENUM, BP(categorical_split), 0, 0, 0, NULL, categorical_split_choices,
	"a categorical feature with more than one_hot_max_size categories: ctr (ordered target statistics, "
	"CatBoost's) or sets (grow_policy Depthwise only: each node splits its categories into two sets, in the "
	"order of their gradient ratio in that node, as XGBoost and LightGBM do; at most 254 categories, ctr "
	"beyond)"},
	{"classes_count", GBML_PARAM_INT, BP(classes_count), 0, GBML_BOOST_MAX_CLASSES, 0, NULL, NULL,
	"MultiClass: the number of classes, when some class has no row; 0: the largest label of the training and eval rows + 1"},
	{"multiclass_hessian_factor", GBML_PARAM_REAL, BP(multiclass_hessian_factor), 0, 100, 0, NULL, NULL,
	"MultiClass: the factor f of each class's hessian w f p (1 - p), which sets the size of the leaves' "
	"Newton steps; 0: K/(K-1) (Friedman's, LightGBM's); XGBoost's multi:softprob takes 2"},
	GBML_PARAM_END
};

/* The categorical parameters go into a model's PARAMS only when it has a categorical input. */
static bool
boost_records_param(const gbml_param_spec *s, const void *params, const gbml_dataset *ds)
{
	if (s->offset == BP(leaf_estimation_iterations))
		return ((const gbml_boost_params *) params)->leaf_estimation_iterations != 1;
	if (s->offset == BP(score_function))
		return ((const gbml_boost_params *) params)->score_function != SCORE_AUTO;
	if (s->offset == BP(random_strength))
		return ((const gbml_boost_params *) params)->random_strength != 0;
	if (s->offset == BP(border_type))
		return ((const gbml_boost_params *) params)->border_type != GBML_BORDER_MEDIAN;
	if (s->offset == BP(grow_policy) || s->offset == BP(min_child_weight))
		return ((const gbml_boost_params *) params)->grow_policy != GBML_GROW_SYMMETRIC;
	if (s->offset == BP(classes_count))
		return ((const gbml_boost_params *) params)->loss == 1 + GBML_LOSS_MULTICLASS;
	if (s->offset == BP(categorical_split))
		return ((const gbml_boost_params *) params)->categorical_split != 0;
	if (s->offset == BP(multiclass_hessian_factor))
		return ((const gbml_boost_params *) params)->multiclass_hessian_factor != 0;
	return s->offset < BP(one_hot_max_size) || gbml_schema_n_categorical(ds->schema) > 0;
}
#undef BP

/* ------------------------------------------------------------------ */
/* Rows in training order                                             */
/* ------------------------------------------------------------------ */

static void
data_free(boost_data *d, gbml_env *env)
{
	gbml_free(env, d->rows);
	gbml_free(env, d->src);
	gbml_free(env, d->label);
	gbml_free(env, d->weight);
	gbml_free(env, d->group_off);
	gbml_free(env, d->group_id);
	gbml_free(env, d->group_global);
	gbml_free(env, d->ideal_dcg);
	memset(d, 0, sizeof(*d));
}

/* Puts ds's row r of chunk c at position i of d. */
static inline void
gather_row(boost_data *d, int64_t i, const gbml_dataset *ds, int c, int64_t r)
{
	const gbml_chunk *ch = ds->chunks[c];

	if (d->src)
		d->src[i] = ((int64_t) c << 32) | r;
	else
		d->rows[i] = ch->x + (size_t) r * ds->n_features;
	d->label[i] = ch->label[r];
	if (d->weight)
		d->weight[i] = ch->weight[r];
}

/*
 * Gathers ds's rows into training order: canonical, stably sorted by group
 * id when there is one (the sort key's index is chunk << 32 | row, which
 * orders like the canonical position).
 */
static int
data_prepare(const gbml_dataset *ds, boost_data *d, gbml_env *env)
{
	int64_t		n = ds->n_rows;
	int64_t		i = 0;
	gbml_group_order_key *keys = NULL;

	memset(d, 0, sizeof(*d));
	d->n = n;
	if (ds->store)
		d->src = gbml_alloc_array(env, (size_t) n, sizeof(int64_t));
	else
		d->rows = gbml_alloc_array(env, (size_t) n, sizeof(float *));
	d->label = gbml_alloc_array(env, (size_t) n, sizeof(float));
	if (ds->has_weight)
		d->weight = gbml_alloc_array(env, (size_t) n, sizeof(float));
	if ((d->rows == NULL && d->src == NULL) || d->label == NULL || (ds->has_weight && d->weight == NULL))
		goto fail;
	if (ds->group_state <= 0)
	{
		for (int c = 0; c < ds->n_chunks; c++)
			for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++)
				gather_row(d, i++, ds, c, r);
		return GBML_OK;
	}

	keys = gbml_alloc_array(env, (size_t) n, sizeof(gbml_group_order_key));
	if (keys == NULL)
		goto fail;
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, i++)
		{
			keys[i].group = ds->chunks[c]->group[r];
			keys[i].pos = ((int64_t) c << 32) | r;
		}
	qsort(keys, (size_t) n, sizeof(gbml_group_order_key), gbml_group_order_cmp);
	d->n_groups = 0;
	for (i = 0; i < n; i++)
		if (i == 0 || keys[i].group != keys[i - 1].group)
			d->n_groups++;
	d->group_off = gbml_alloc_array(env, (size_t) d->n_groups + 1, sizeof(int64_t));
	d->group_id = gbml_alloc_array(env, (size_t) (d->n_groups > 0 ? d->n_groups : 1), sizeof(int64_t));
	if (d->group_off == NULL || d->group_id == NULL)
		goto fail;
	{
		int64_t		g = 0;

		for (i = 0; i < n; i++)
		{
			if (i == 0 || keys[i].group != keys[i - 1].group)
			{
				d->group_id[g] = keys[i].group;
				d->group_off[g++] = i;
			}
			gather_row(d, i, ds, (int) (keys[i].pos >> 32), keys[i].pos & 0xffffffffLL);
		}
		d->group_off[g] = n;
	}
	gbml_free(env, keys);
	return GBML_OK;

fail:
	gbml_free(env, keys);
	data_free(d, env);
	return env->error_code ? env->error_code : GBML_ENOMEM;
}

gbml_boost_problem
boost_data_problem(const boost_data *d, bool with_groups)
{
	gbml_boost_problem p;

	p.n = d->n;
	p.label = d->label;
	p.weight = d->weight;
	p.n_groups = with_groups ? d->n_groups : 0;
	p.group_offsets = with_groups ? d->group_off : NULL;
	p.group_stream = with_groups ? d->group_global : NULL;
	return p;
}

/* ------------------------------------------------------------------ */
/* Metrics                                                            */
/* ------------------------------------------------------------------ */

static bool
metric_higher_is_better(int metric)
{
	return metric == GBML_BOOST_METRIC_NDCG || metric == GBML_BOOST_METRIC_AUC || metric == GBML_BOOST_METRIC_ACCURACY;
}

static void
metric_name(int metric, gbml_boost_loss_kind kind, int64_t k, char *buf, size_t len)
{
	switch (metric)
	{
		case GBML_BOOST_METRIC_NDCG:
			snprintf(buf, len, "NDCG@%lld", (long long) k);
			break;
		case GBML_BOOST_METRIC_RMSE:
			snprintf(buf, len, "RMSE");
			break;
		case GBML_BOOST_METRIC_AUC:
			snprintf(buf, len, "AUC");
			break;
		case GBML_BOOST_METRIC_LOGLOSS:
			snprintf(buf, len, "Logloss");
			break;
		case GBML_BOOST_METRIC_ACCURACY:
			snprintf(buf, len, "Accuracy");
			break;
		default:
			snprintf(buf, len, "%s", gbml_boost_loss_names[kind]);
			break;
	}
}

/* ------------------------------------------------------------------ */
/* The forest being built                                             */
/* ------------------------------------------------------------------ */

static void
builder_free(forest_builder *b, gbml_env *env)
{
	gbml_free(env, b->feature);
	gbml_free(env, b->border_index);
	gbml_free(env, b->border);
	gbml_free(env, b->gain);
	gbml_free(env, b->leaf);
	gbml_free(env, b->set_mask);
	memset(b, 0, sizeof(*b));
}

/* Makes room for one more tree. */
static int
builder_reserve(forest_builder *b, gbml_env *env)
{
	int64_t		cap;
	size_t		d = (size_t) b->splits,
				nl = (size_t) 1 << b->depth;
	void	   *p;

	if (b->n_trees < b->cap)
		return GBML_OK;
	cap = b->cap ? b->cap * 2 : 64;
#define GROW(field, per) do { \
		p = gbml_realloc(env, b->field, (size_t) cap * (per) * sizeof(*b->field)); \
		if (p == NULL) return env->error_code; \
		b->field = p; \
	} while (0)
	GROW(feature, d);
	GROW(border_index, d);
	GROW(border, d);
	GROW(gain, d);
	GROW(leaf, nl);
	if (b->has_sets)
		GROW(set_mask, d * GBML_BOOST_SET_MASK_BYTES);
#undef GROW
	b->cap = cap;
	return GBML_OK;
}

/* ------------------------------------------------------------------ */
/* Training                                                           */
/* ------------------------------------------------------------------ */

static void
trainer_free(trainer *T)
{
	gbml_env   *env = T->env;

	boost_shards_free(T);
	gbml_boost_gpu_close(&T->gpu);
	data_free(&T->train, env);
	data_free(&T->eval, env);
	gbml_boost_borders_free(&T->borders, env);
	gbml_boost_bins_free(&T->bins, env);
	gbml_boost_bins_free(&T->eval_bins, env);
	gbml_boost_ctr_free(&T->cat, env);
	gbml_free(env, T->feat_off);
	gbml_free(env, T->is_set);
	gbml_free(env, T->ordinal_count);
	gbml_free(env, T->pred_all ? T->pred_all : T->pred);
	gbml_free(env, T->eval_pred_all ? T->eval_pred_all : T->eval_pred);
	gbml_free(env, T->kept_num);
	gbml_free(env, T->kept_den);
	gbml_free(env, T->prob);
	gbml_free(env, T->class_base);
	gbml_free(env, T->grad);
	gbml_free(env, T->hess);
	gbml_free(env, T->newton_hess);
	gbml_free(env, T->tleaf_h);
	gbml_free(env, T->gq);
	gbml_free(env, T->hq);
	gbml_free(env, T->leaf);
	gbml_free(env, T->thist);
	gbml_free(env, T->tidx);
	gbml_free(env, T->tG);
	gbml_free(env, T->tH);
	gbml_free(env, T->tseg);
	gbml_free(env, T->hist_cur);
	gbml_free(env, T->hist_parent);
	gbml_free(env, T->feature_best);
	builder_free(&T->forest, env);
}

/*
 * The fixed-point plan of a tree: the scales of its gradients and
 * hessians, from their maxima over every drawn row of the training
 * (T->n_global rows, wherever they are).
 *
 * When every drawn row has the same hessian (RMSE, QueryRMSE and YetiRank
 * without weights) and the data is small enough that gradients keep at least
 * PACKED_MIN_BITS bits, the tree uses packed histograms: gq = g * 2^K + 1,
 * K = bits of the row count, and H = count * hq_const (boost_histogram.h).
 * Also sets newton_scale when the leaf values use newton_hess.
 */
#define PACKED_MIN_BITS 16
void
boost_fixed_point_plan(trainer *T, const boost_grad_max *m)
{
	int64_t		n = T->n_global;
	int			K = gbml_boost_bits_for(n);
	bool		packed = m->hmin == m->hmax && 62 - 2 * K >= PACKED_MIN_BITS;

	T->sh = gbml_boost_fixed_scale(m->h, n);
	T->newton_scale = gbml_boost_fixed_scale(m->newton_h, n);
	if (packed)
	{
		int			k;

		/* rows' |gq| <= 2^(62-2K): sums stay below 2^(62-K), packed sums below 2^63 */
		if (m->g > 0 && isfinite(m->g))
		{
			frexp(m->g, &k);
			T->sg = ldexp(1.0, 62 - 2 * K - k);
		}
		else
			T->sg = 1;
	}
	else
		T->sg = gbml_boost_fixed_scale(m->g, n);
	T->packed = packed;
	T->count_bits = K;
	T->hq_const = packed ? (int64_t) llrint(m->hmax * T->sh) : 0;
}

/*
 * Histograms of every leaf of level `level` into hist_cur: the smaller child
 * of each sibling pair by a pass over the bins, the other by subtraction.
 * The pass first applies the previous level's split (prev_feature,
 * prev_border) to the block's leaf indices, so a level is one parallel
 * region and one visit of each block.
 *
 * "Smaller" is judged by the children's hessian sums (known exactly from the
 * parent's histogram before any row moves): the row count for constant-hessian
 * losses, a close proxy otherwise.  Any choice gives the same exact sums;
 * this one only decides how many rows the pass reads.
 */
static int
level_histograms(trainer *T, int level, int prev_feature, int prev_border)
{
	int64_t		tb = T->total_bins;
	int			n_slots;
	int			rc;

	for (int i = 0; i < GBML_BOOST_SLOT_TABLE; i++)
		T->slot_of[i] = -1;
	if (level == 0)
	{
		n_slots = 1;
		T->small[0] = 0;
		T->slot_of[0] = 0;
	}
	else
	{
		int			half = 1 << (level - 1);

		n_slots = half;
		for (int p = 0; p < half; p++)
		{
			int			c0 = p,
						c1 = p | half;

			T->small[p] = (int16_t) (T->child_sums[c0].h <= T->child_sums[c1].h ? c0 : c1);
			T->slot_of[T->small[p]] = (int16_t) p;
		}
	}

	if ((rc = T->rows->level(T, level, prev_feature, prev_border, n_slots)) != GBML_OK)
		return rc;
	if (level == 0)
		memcpy(T->hist_cur, T->thist, sizeof(gbml_boost_hist_bin) * (size_t) tb);
	else
	{
		int			half = 1 << (level - 1);

		for (int p = 0; p < half; p++)
		{
			int64_t		other = T->small[p] ^ half;

			memcpy(T->hist_cur + (size_t) T->small[p] * tb, T->thist + (size_t) p * tb,
				   sizeof(gbml_boost_hist_bin) * (size_t) tb);
			gbml_boost_hist_sub(T->hist_cur + (size_t) other * tb, T->hist_parent + (size_t) p * tb,
								T->thist + (size_t) p * tb, tb);
		}
	}
	return GBML_OK;
}

/*
 * (G, H) of the children of every leaf of hist_cur (n_leaves leaves, totals
 * leaf_sums) under the split (feature, border): child l keeps bit `level` =
 * 0, child l | 1 << level gets 1.  leaf_split_sums: one leaf's.
 */
void
boost_leaf_split_sums(const trainer *T, int l, const gbml_boost_hist_bin *leaf_sum, int feature, int border,
					  gbml_boost_hist_bin *left, gbml_boost_hist_bin *right)
{
	const gbml_boost_hist_bin *h = T->hist_cur + (size_t) l * T->total_bins + T->feat_off[feature];
	int64_t		lg = 0,
				lh = 0;

	for (int b = 0; b <= border; b++)
	{
		lg += h[b].g;
		lh += h[b].h;
	}
	left->g = lg;
	left->h = lh;
	right->g = leaf_sum->g - lg;
	right->h = leaf_sum->h - lh;
}

static void
split_sums(const trainer *T, const gbml_boost_hist_bin *leaf_sums, int n_leaves, int level,
		   int feature, int border, gbml_boost_hist_bin *out)
{
	for (int l = 0; l < n_leaves; l++)
		boost_leaf_split_sums(T, l, &leaf_sums[l], feature, border, &out[l], &out[l | (1 << level)]);
}

/* Tree t added to pred[] by the blocks' bins (tree_blocks). */
typedef struct tree_arg
{
	const trainer *T;
	const gbml_boost_bins *bins;
	int64_t		t;
	double	   *pred;
} tree_arg;

static void
tree_blocks(void *arg, const uint8_t *const *blk, int64_t b0, int64_t b1)
{
	const tree_arg *a = arg;
	const forest_builder *F = &a->T->forest;
	int			d = F->depth;
	const int32_t *feat = F->feature + boost_split_index(F, a->t, 0, 0);
	const int32_t *bord = F->border_index + boost_split_index(F, a->t, 0, 0);
	const float *lv = F->leaf + (a->t << d);
	bool		nodes = F->node_splits;
	const uint8_t *masks = F->has_sets ? F->set_mask + boost_split_index(F, a->t, 0, 0) * GBML_BOOST_SET_MASK_BYTES : NULL;

#pragma omp parallel for schedule(dynamic, 1) num_threads(a->T->threads)
	for (int64_t b = b0; b < b1; b++)
	{
		int64_t		start = b * a->bins->block_rows;
		int64_t		len = gbml_boost_block_len(a->bins, b);
		const uint8_t *bb = blk[b];

		for (int64_t r = 0; r < len; r++)
		{
			int			idx = 0;

			for (int l = 0; l < d; l++)
			{
				int			s = nodes ? (1 << l) - 1 + idx : l;

				idx |= gbml_boost_bin_goes_right(bb[(size_t) feat[s] * len + r], bord[s],
												 masks ? masks + (size_t) s * GBML_BOOST_SET_MASK_BYTES : NULL) << l;
			}
			a->pred[start + r] += (double) lv[idx];
		}
	}
}

/*
 * Adds tree t's leaf values to pred[] of the rows whose bins are `bins`, on
 * the CPU: bin > border_index exactly when the raw value > the border
 * (boost_quantize.h), so this is the scorer's leaf, bit for bit.
 */
static int
add_tree_to_pred(trainer *T, gbml_boost_bins *bins, int64_t t, double *pred)
{
	tree_arg	a = {T, bins, t, pred};

	return gbml_boost_bins_walk(bins, T->env, &T->progress, tree_blocks, &a);
}

/* Adds tree t's contribution to the training rows' predictions (after use_best_model). */
static int
add_tree_from_bins(trainer *T, int64_t t, double *pred)
{
	const forest_builder *F = &T->forest;
	int			d = F->depth;

	if (T->on_gpu)
	{
		/* the bins are on the device: it computes the leaf indices */
		size_t		s = boost_split_index(F, t, 0, 0);
		int			rc = F->node_splits
			? gbml_boost_gpu_tree_leaves_nodes(&T->gpu, d, F->feature + s, F->border_index + s,
											   F->has_sets ? F->set_mask + s * GBML_BOOST_SET_MASK_BYTES : NULL, T->leaf)
			: gbml_boost_gpu_tree_leaves(&T->gpu, d, F->feature + s, F->border_index + s, T->leaf);

		if (rc != GBML_OK)
			return rc;
#pragma omp parallel for schedule(static) num_threads(T->threads)
		for (int64_t r = 0; r < T->train.n; r++)
			pred[r] += (double) F->leaf[(t << d) + T->leaf[r]];
		return GBML_OK;
	}

	return add_tree_to_pred(T, &T->bins, t, pred);
}

/*
 * Whether the trees are grown as CatBoost grows them (score_function L2:
 * YetiRank's default, Logloss's on request): the split search weighs rows by
 * their weight, not by the loss's hessian (CatBoost scores splits on the
 * weighted first derivatives only; at its YetiRank default l2 of 0 its Cosine
 * score orders splits as sum G^2/W does), and the hessian enters only the
 * Newton leaf values -G / (H + l2).
 */
bool
boost_structure_by_weight(const trainer *T)
{
	return T->by_weight;
}

/* The rows are in a GPU chunk store: the device bins them where they are (setup_device). */
static bool
bins_on_device(const gbml_dataset *ds)
{
	return ds->store != NULL && gbml_chunk_store_gpu_ctx(ds->store) != NULL;
}

/* What a training holds per row beside its bins (setup_row_arrays: pred, grad, hess, gq, hq, leaf, newton_hess). */
#define ROW_STATE_BYTES 50
/* Per row while stored rows are binned: their training positions by chunk */
#define BINNING_ROW_BYTES 16
#define BINS_WINDOW_MAX ((size_t) 256 << 20)

/* > 0: the bins of rows in files go to a file in windows of this many bytes, whatever the budget (unit tests) */
size_t		gbml_boost_bins_test_window = 0;

/* The histograms' bytes (setup_histograms: each thread's slots, the level's and its parent's), about. */
static size_t
histogram_bytes(const trainer *T, int n_features)
{
	size_t		bins = 0;

	for (int f = 0; f < n_features; f++)
		bins += (size_t) T->borders.count[f] + 2;
	return ((size_t) T->threads + 2) * ((size_t) 1 << (T->p->depth > 0 ? T->p->depth - 1 : 0)) * bins *
		sizeof(gbml_boost_hist_bin);
}

/*
 * Whether the training bins go to a temporary file too, and in windows of
 * how many bytes (0: they stay in memory): only for rows already in
 * temporary files (a dataset past its budget) whose bins would not fit in
 * what the budget has left beside the per-row state and the histograms.
 * Categorical inputs keep their bins on the host (their statistics are
 * added as columns).
 */
/*
 * What binning n stored rows holds beside the bins: their positions and the
 * chunk reader's two buffers, as large as the largest chunk stored (through
 * a map, the store's chunks as written: the reader reads those), not the
 * largest a chunk may grow to (a GPU's chunk of 65,536 rows for 30,000).
 */
static size_t
binning_transient_bytes(const gbml_dataset *ds, int64_t n)
{
	int64_t		widest = 0;

	for (int c = 0; ds->stored_addr != NULL && c < ds->stored_n_chunks; c++)
		if (ds->stored_chunk_rows[c] > widest)
			widest = ds->stored_chunk_rows[c];
	return (size_t) n * BINNING_ROW_BYTES + (ds->stored_addr != NULL ?
											 2 * (size_t) widest * (size_t) ds->n_features * sizeof(float) :
											 gbml_chunk_prefetch_buffer_bytes(ds));
}

static size_t
bins_window(const trainer *T, const gbml_dataset *ds, int64_t n, const gbml_boost_keep *keep)
{
	const gbml_env *env = T->env;
	size_t		bins = (size_t) n * (size_t) ds->n_features;
	size_t		state = (size_t) n * ROW_STATE_BYTES + histogram_bytes(T, ds->n_features);
	size_t		room,
				transient = binning_transient_bytes(ds, n),
				w;

	if (keep == NULL && gbml_boost_bins_test_window > 0)
		return gbml_boost_bins_test_window;
	if (keep != NULL || env->memory_limit == 0 || env->memory_used + bins + state <= env->memory_limit)
		return 0;
	room = env->memory_limit > env->memory_used ? env->memory_limit - env->memory_used : 0;
	w = room > transient ? (room - transient) / 2 : 0;
	/* a small window only costs reads of the rows' file (one a window); at least one block is made at a time */
	return w > BINS_WINDOW_MAX ? BINS_WINDOW_MAX : w > 0 ? w : 1;
}

/*
 * The bins of d's rows (ds's, in d's training order) with the borders.
 * Host rows are binned from d->rows; rows in a chunk store (temporary
 * files) are read chunk by chunk and each chunk binned into its positions:
 * in chunk order without groups, scattered by d->src with them, or through
 * the dataset's map when the files kept the order they were written in
 * (see gbml_boost_bins_from_chunks), the training bins into a file of
 * their own when bins_window says they do not fit.  Then the float rows are not needed: the
 * store releases them (the host ones are the caller's), and d's pointers or
 * addresses go.  The training rows in a GPU store get empty blocks here,
 * their bins made on the device (setup_device).
 */
static int
bin_rows(trainer *T, const gbml_dataset *ds, boost_data *d, gbml_boost_bins *out, bool training)
{
	gbml_env   *env = T->env;
	const gbml_boost_keep *keep = T->cat.n_cat == 0 ? NULL : training ? &T->cat.keep : &T->cat.eval_keep;
	size_t		window;
	int			rc;

	/* (a categorical input's statistics need its ids on the host: those rows are binned here) */
	if (training && bins_on_device(ds) && keep == NULL)
	{
		out->n_rows = d->n;
		out->block_rows = BLOCK_ROWS;
		out->n_blocks = (d->n + BLOCK_ROWS - 1) / BLOCK_ROWS;
		out->blocks = gbml_alloc0(env, sizeof(uint8_t *) * (size_t) (out->n_blocks > 0 ? out->n_blocks : 1));
		return out->blocks ? GBML_OK : env->error_code;
	}
	window = ds->store && training ? bins_window(T, ds, d->n, keep) : 0;
	/* bins made in memory (with categorical features always: their statistics add columns): past the budget, say so */
	if (window == 0 &&
		(rc = gbml_budget_check(env, (size_t) d->n * (size_t) ds->n_features +
								(ds->store ? binning_transient_bytes(ds, d->n) : 0),
								"boosting's %sbins (a byte a feature: %d bytes a row for %lld rows)%s%s",
								training ? "" : "eval set's ", ds->n_features, (long long) d->n,
								keep != NULL ? ", which stay in memory with categorical features (their statistics add "
								"columns to the bins)" : "",
								ds->store ? ", made from rows read back a chunk at a time" : "")) != GBML_OK)
		return rc;
	if (ds->store)
		rc = gbml_boost_bins_from_chunks(ds, d->n_groups > 0 ? d->src : NULL, &T->borders, BLOCK_ROWS, keep, window,
										 training ? "quantize" : "quantize eval", out, env);
	else
	{
		gbml_boost_keep_rows(keep, d->rows, d->n);
		rc = gbml_boost_bins_build(d->rows, d->n, ds->n_features, &T->borders, BLOCK_ROWS, out, env);
	}
	if (rc != GBML_OK)
		return rc;
	if (ds->store)
		ds->store->release(ds->store);
	gbml_free(env, d->rows);
	gbml_free(env, d->src);
	d->rows = NULL;
	d->src = NULL;
	return GBML_OK;
}

/* Frees the host's bin blocks: the device holds the only copy. */
static void
free_host_blocks(trainer *T)
{
	for (int64_t b = 0; b < T->bins.n_blocks; b++)
	{
		gbml_free(T->env, T->bins.blocks[b]);
		T->bins.blocks[b] = NULL;
	}
}

/* Rows streamed to the device but binned on the host (categorical inputs): the bins go up into the store's context. */
static int
setup_stored_host_bins(trainer *T, gbml_gpu_ctx *ctx)
{
	int			rc = gbml_boost_gpu_open_stored_bins(&T->gpu, T->env, ctx, &T->bins, T->n_features, T->feat_off,
													 T->total_bins, (int) T->max_slots);

	if (rc == GBML_OK)
		free_host_blocks(T);
	return rc;
}

/*
 * Moves the bins to the GPU when this training runs there (the host's copy
 * is freed: the device's is the only one), else settles on the CPU.
 */
static int
setup_device(trainer *T, const gbml_dataset *ds)
{
	gbml_env   *env = T->env;
	int			rc;

	if (ds->stream_fell_back)
	{
		/* the GPU ran out of room while the rows streamed in: they are on the host, and stay there */
		env->device = GBML_DEVICE_CPU;
		snprintf(env->device_note, sizeof(env->device_note), "device auto: the GPU memory budget was reached while the rows streamed in");
		return GBML_OK;
	}
	if (bins_on_device(ds))
	{
		gbml_gpu_ctx *ctx = gbml_chunk_store_gpu_ctx(ds->store);

		if (env->gpu == NULL)
			return gbml_error(env, GBML_EDEVICE, "boost: the rows are in %s, which this trainer cannot use",
							  ds->store->where);
		if (T->cat.n_cat > 0)
			rc = setup_stored_host_bins(T, ctx);
		else
			rc = gbml_boost_gpu_open_stored(&T->gpu, env, ctx, &T->bins, T->n_features, T->feat_off,
											T->total_bins, (int) T->max_slots, T->train.src, &T->borders);
		if (rc != GBML_OK)
			return rc;
		/* quantized: the float rows and their addresses are not needed any more */
		ds->store->release(ds->store);
		gbml_free(env, T->train.src);
		T->train.src = NULL;
		T->on_gpu = true;
		env->device = GBML_DEVICE_GPU;
		snprintf(env->device_note, sizeof(env->device_note), "device gpu: rows streamed to the device during the scan");
		return GBML_OK;
	}
	if (T->bins.stored)
	{
		/* the bins did not fit the host's budget: the CPU walks them from their file */
		if (env->device != GBML_DEVICE_CPU)
		{
			snprintf(env->device_note, sizeof(env->device_note), "the bins are in temporary files");
			gbml_notice(env, env->device_auto ? GBML_LOG_DEBUG : GBML_LOG_NOTICE,
						"boost: training on the CPU: the bins are in temporary files (past gbml.memory_limit)");
		}
		env->device = GBML_DEVICE_CPU;
		return GBML_OK;
	}
	if (gbml_boost_gpu_wanted(env, T->train.n, T->n_features))
	{
		if ((rc = gbml_boost_gpu_open(&T->gpu, env, &T->bins, T->n_features, T->feat_off, T->total_bins,
									  (int) T->max_slots)) != GBML_OK)
			return rc;
		T->on_gpu = T->gpu.ctx != NULL;
	}
	if (!T->on_gpu)
	{
		env->device = GBML_DEVICE_CPU;
		return GBML_OK;
	}
	free_host_blocks(T);
	return GBML_OK;
}

/* The categorical statistics' parameters of this training. */
static gbml_boost_ctr_params
ctr_params(const trainer *T)
{
	gbml_boost_ctr_params cp;

	cp.one_hot_max_size = (int) T->p->one_hot_max_size;
	cp.prior = T->p->ctr_prior;
	cp.prior_weight = T->p->ctr_prior_weight;
	cp.counter = T->p->ctr_counter;
	cp.border_count = (int) T->p->border_count;
	cp.border_type = (gbml_boost_border_type) T->p->border_type;
	cp.border_sample_size = T->p->border_sample_size;
	cp.seed = (uint64_t) T->p->random_seed;
	cp.binary_target = T->kind == GBML_LOSS_LOGLOSS;
	cp.classes = T->kind == GBML_LOSS_MULTICLASS ? T->train_classes : 0;	/* (a coordinator counts its gathered labels) */
	cp.sets = T->p->categorical_split == 1;
	return cp;
}

/*
 * Borders and bins of the training (and eval) rows.  With categorical
 * inputs (boost_ctr.h) their ids are kept while the rows are binned, and
 * the derived features join the bins and borders afterwards.
 */
static int
quantize(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval)
{
	gbml_env   *env = T->env;
	const gbml_boost_params *p = T->p;
	int			rc;

	T->n_inputs = T->n_features = ds->n_features;
	if ((rc = gbml_boost_ctr_begin(&T->cat, ds->schema, ds->n_features, T->train.n,
								   T->has_eval ? T->eval.n : 0, env)) != GBML_OK ||
		(rc = gbml_boost_borders_build(ds, (int) p->border_count, (gbml_boost_border_type) p->border_type,
									   p->border_sample_size,
									   (uint64_t) p->random_seed, &T->borders, env)) != GBML_OK ||
		(T->cat.n_cat > 0 && (rc = gbml_boost_ctr_clear_borders(&T->cat, &T->borders, env)) != GBML_OK))
		return rc;
	if ((rc = bin_rows(T, ds, &T->train, &T->bins, true)) != GBML_OK ||
		(T->has_eval && (rc = bin_rows(T, eval, &T->eval, &T->eval_bins, false)) != GBML_OK))
		return rc;
	if (T->cat.n_cat > 0)
	{
		gbml_boost_ctr_params cp = ctr_params(T);

		if ((rc = gbml_boost_ctr_finish(&T->cat, &cp, T->train.label, T->train.n_groups, T->train.group_off,
										&T->bins, T->n_inputs, T->has_eval ? &T->eval_bins : NULL, &T->borders,
										T->threads, env)) != GBML_OK)
			return rc;
		T->n_features = gbml_boost_inputs_width(&T->cat.model);
	}
	return GBML_OK;
}

int
boost_resolve_loss(trainer *T, int group_state)
{
	gbml_env   *env = T->env;
	const gbml_boost_params *p = T->p;

	if (p->loss == 0)
		T->kind = group_state > 0 ? GBML_LOSS_YETIRANK : GBML_LOSS_RMSE;
	else
		T->kind = (gbml_boost_loss_kind) (p->loss - 1);
	if (strcmp(gbml_boost_loss_names[T->kind], gbml_boost_loss_choices[T->kind + 1]) != 0)
		return gbml_error(env, GBML_EINVAL, "boost: internal error: loss tables disagree");
	if (gbml_boost_loss_is_ranking(T->kind) && group_state <= 0)
		return gbml_error(env, GBML_EINVAL, "boost: loss %s needs a group_id per row",
						  gbml_boost_loss_names[T->kind]);
	/* CatBoost's defaults: no L2 term for YetiRank, whose pair hessians are
	 * small (0.15 * decay^position * p (1 - p) per pair), 3 for the rest */
	if (isnan(p->l2_leaf_reg))
		T->l2 = T->kind == GBML_LOSS_YETIRANK ? 0.0 : 3.0;
	else
		T->l2 = p->l2_leaf_reg;
	if (p->score_function == SCORE_L2 && T->kind != GBML_LOSS_LOGLOSS && T->kind != GBML_LOSS_YETIRANK)
		return gbml_error(env, GBML_EINVAL, "boost: score_function L2 is for Logloss and YetiRank, not %s",
						  gbml_boost_loss_names[T->kind]);
	if (p->score_function == SCORE_NEWTON_L2 && T->kind == GBML_LOSS_YETIRANK)
		return gbml_error(env, GBML_EINVAL,
						  "boost: score_function NewtonL2 is not for YetiRank (its splits are scored on the row weights)");
	T->by_weight = p->score_function == SCORE_L2 || (p->score_function == SCORE_AUTO && T->kind == GBML_LOSS_YETIRANK);
	T->metric = p->eval_metric;
	if (T->metric == GBML_BOOST_METRIC_AUTO)
	{
		if (gbml_boost_loss_is_ranking(T->kind))
			T->metric = GBML_BOOST_METRIC_NDCG;
		else if (T->kind == GBML_LOSS_LOGLOSS)
			T->metric = GBML_BOOST_METRIC_LOGLOSS;
		else if (T->kind == GBML_LOSS_MULTICLASS)
			T->metric = GBML_BOOST_METRIC_MULTICLASS;
		else
			T->metric = GBML_BOOST_METRIC_RMSE;
	}
	if (T->kind == GBML_LOSS_MULTICLASS && T->metric == GBML_BOOST_METRIC_LOSS)
		T->metric = GBML_BOOST_METRIC_MULTICLASS;
	if ((T->kind == GBML_LOSS_MULTICLASS) !=
		(T->metric == GBML_BOOST_METRIC_MULTICLASS || T->metric == GBML_BOOST_METRIC_ACCURACY))
		return gbml_error(env, GBML_EINVAL, "boost: the MultiClass loss takes the eval_metric MultiClass or Accuracy, "
						  "and they are for the MultiClass loss only");
	if (p->multiclass_hessian_factor != 0 && T->kind != GBML_LOSS_MULTICLASS)
		return gbml_error(env, GBML_EINVAL, "boost: multiclass_hessian_factor is for the MultiClass loss only");
	if (T->metric == GBML_BOOST_METRIC_NDCG && group_state <= 0)
		return gbml_error(env, GBML_EINVAL, "boost: eval_metric NDCG needs a group_id per row");
	T->depth = (int) p->depth;
	T->max_slots = T->depth >= 2 ? (int64_t) 1 << (T->depth - 2) : 1;
	T->forest.depth = T->depth;
	T->forest.node_splits = p->grow_policy == GBML_GROW_DEPTHWISE;
	T->forest.splits = T->forest.node_splits ? (1 << T->depth) - 1 : T->depth;
	if (p->categorical_split == 1 && !T->forest.node_splits)
		return gbml_error(env, GBML_EINVAL, "boost: categorical_split sets needs grow_policy Depthwise (a symmetric "
						  "level splits all its nodes alike, and a set is chosen per node)");
	return GBML_OK;
}

/* Labels a Logloss needs in [0, 1]; MultiClass's class ids (the training rows' give the class count). */
static int
check_labels(trainer *T, const boost_data *d, const char *which)
{
	if (T->kind == GBML_LOSS_MULTICLASS)
	{
		/*
		 * Without classes_count the class count is the largest label of the
		 * training and eval rows + 1: an eval share split from the rows can
		 * hold a rare class's every row, and the user has one table.  A
		 * shard's (shard_part) counts may be fewer than the union's, or none:
		 * the union's (boost_rows_local.c's class count term takes the eval
		 * labels too) comes with the base score, and its eval labels are
		 * checked then.
		 */
		bool		part = T->shard_part;
		int			k;
		int			rc = gbml_boost_multiclass_count(d->label, d->n, T->p->classes_count, which,
													 part || d == &T->eval, &k, T->env);

		if (part && d == &T->eval)
			T->eval_classes = k;
		else if (part)
			T->n_classes = k > 1 ? k : 1;	/* (at least a column of predictions until then) */
		else if (rc == GBML_OK && k > T->n_classes)
			T->n_classes = k;
		if (!part && d == &T->train)
			T->train_classes = k;
		return rc;
	}
	/*
	 * LambdaMART's gradients and an asked-for NDCG take the gain 2^label - 1,
	 * which past GBML_NDCG_MAX_LABEL overflows their sums (NaN weights, a
	 * garbage model).  The other ranking losses order by label differences,
	 * any scale; the NDCG they report by default is then NaN, as before.
	 */
	if (T->kind == GBML_LOSS_LAMBDAMART || T->p->eval_metric == GBML_BOOST_METRIC_NDCG)
		for (int64_t i = 0; i < d->n; i++)
			if (d->label[i] > GBML_NDCG_MAX_LABEL)
				return gbml_error(T->env, GBML_EINVAL, "boost: %s needs %srelevance labels of at most %d (the "
								  "gain 2^label - 1); found %g", T->kind == GBML_LOSS_LAMBDAMART ?
								  "LambdaMART" : "eval_metric NDCG", which, GBML_NDCG_MAX_LABEL,
								  (double) d->label[i]);
	if (T->kind != GBML_LOSS_LOGLOSS && T->metric != GBML_BOOST_METRIC_LOGLOSS)
		return GBML_OK;
	for (int64_t i = 0; i < d->n; i++)
		if (!(d->label[i] >= 0 && d->label[i] <= 1))
			return gbml_error(T->env, GBML_EINVAL, "boost: Logloss needs %slabels in [0, 1]; found %g", which,
							  (double) d->label[i]);
	return GBML_OK;
}

/*
 * The slot columns (categorical_split sets): marked as split by sets, and
 * out of the ordinal search (their count there 0); the forest keeps a mask
 * a split.
 */
static int
setup_set_features(trainer *T)
{
	int			n_in = T->n_inputs;

	if (T->cat.n_slot == 0)
		return GBML_OK;
	T->is_set = gbml_alloc0(T->env, (size_t) T->n_features);
	T->ordinal_count = gbml_alloc_array(T->env, (size_t) T->n_features, sizeof(int));
	if (T->is_set == NULL || T->ordinal_count == NULL)
		return T->env->error_code;
	for (int f = 0; f < T->n_features; f++)
	{
		T->is_set[f] = f >= n_in && T->cat.model.derived[f - n_in].kind == GBML_BOOST_CAT_SLOT;
		T->ordinal_count[f] = T->is_set[f] ? 0 : T->borders.count[f];
	}
	T->forest.has_sets = true;
	return GBML_OK;
}

/* The model features' bin offsets, from the borders. */
static int
setup_layout(trainer *T)
{
	T->feat_off = gbml_alloc_array(T->env, (size_t) T->n_features + 1, sizeof(int64_t));
	if (T->feat_off == NULL)
		return T->env->error_code;
	T->feat_off[0] = 0;
	for (int f = 0; f < T->n_features; f++)
		T->feat_off[f + 1] = T->feat_off[f] + T->borders.count[f] + 1;
	T->total_bins = T->feat_off[T->n_features];
	return setup_set_features(T);
}

/*
 * The arrays of the level passes' histograms: thist (per thread on the
 * CPU; one set on the GPU or the coordinator, which get them whole), and
 * the split side's.
 */
static int
setup_histograms(trainer *T, int sets)
{
	gbml_env   *env = T->env;

	T->thist = gbml_alloc_array(env, (size_t) sets * (size_t) T->max_slots * (size_t) T->total_bins,
								sizeof(gbml_boost_hist_bin));
	T->hist_cur = gbml_alloc_array(env, ((size_t) 1 << (T->depth - 1)) * (size_t) T->total_bins,
								   sizeof(gbml_boost_hist_bin));
	T->hist_parent = gbml_alloc_array(env, ((size_t) 1 << (T->depth - 1)) * (size_t) T->total_bins,
									  sizeof(gbml_boost_hist_bin));
	T->feature_best = gbml_alloc_array(env, (size_t) (T->n_features > 0 ? T->n_features : 1),
									   sizeof(gbml_boost_split));
	return T->thist && T->hist_cur && T->hist_parent && T->feature_best ? GBML_OK : env->error_code;
}

/*
 * What setup_row_arrays allocates, against the budget before it does: the
 * per-row state and the histograms stay in memory whatever went to files,
 * so past the budget the error says so, with their size.
 */
static int
check_row_state_budget(trainer *T, int64_t n, size_t cols)
{
	size_t		sets = T->on_gpu ? 1 : (size_t) T->threads,
				row_bytes = cols * sizeof(double) + 4 * sizeof(double) + sizeof(uint16_t),
				rows,
				hist,
				other;

	if (T->n_classes > 0)
		row_bytes += cols * sizeof(double) * (T->shard_part ? 2 : 1);	/* prob; a shard's iteration start */
	if (boost_structure_by_weight(T))
		row_bytes += sizeof(double);	/* newton_hess */
	rows = (size_t) n * row_bytes;
	/* setup_histograms: each set's slots, the level's and its parent's */
	hist = (sets * (size_t) T->max_slots + 2 * ((size_t) 1 << (T->depth - 1))) * (size_t) T->total_bins *
		sizeof(gbml_boost_hist_bin);
	other = (size_t) T->threads * BLOCK_ROWS * (sizeof(uint16_t) + 2 * sizeof(int64_t)) +
		(size_t) T->threads * (size_t) (T->max_slots + 1) * sizeof(int64_t) +
		(T->has_eval ? (size_t) T->eval.n * cols * sizeof(double) : 0);
	/* a ranking metric's per-query terms, for the larger set's queries (local_query_terms) */
	other += 2 * sizeof(double) *
		(size_t) (T->train.n_groups > T->eval.n_groups ? T->train.n_groups : T->eval.n_groups);
	/* bins in a file are walked through two buffers of at least a block each (boost_bins_walk.c) */
	if (T->bins.stored)
		other += 2 * (size_t) T->bins.block_rows * (size_t) T->bins.n_features;
	/* a shard's reply to a level: each slot's histogram sums (G, H), in a message that grows by doubling */
	if (T->shard_part)
		other += 2 * (size_t) T->max_slots * (size_t) T->total_bins * 2 * sizeof(int64_t);
	return gbml_budget_check(T->env, rows + hist + other,
							 "boosting's per-row state (%zu bytes a row for %lld rows: predictions, gradients, leaf indexes) and its histograms (%.1f MB)%s",
							 row_bytes, (long long) n, (double) hist / 1048576.0,
							 T->bins.stored ? ", with two blocks of the bins read back from their file" : "");
}

/* The row side's per-row arrays and scratch, once the bins are made. */
static int
setup_row_arrays(trainer *T, const gbml_dataset *ds)
{
	gbml_env   *env = T->env;
	int64_t		n = T->train.n;
	size_t		cols = T->n_classes > 0 ? (size_t) T->n_classes : 1;	/* MultiClass: a prediction per class */
	int			rc;

	if ((rc = setup_device(T, ds)) != GBML_OK ||
		(rc = check_row_state_budget(T, n, cols)) != GBML_OK)
		return rc;
	T->pred = gbml_alloc_array(env, (size_t) n * cols, sizeof(double));
	T->grad = gbml_alloc_array(env, (size_t) n, sizeof(double));
	T->hess = gbml_alloc_array(env, (size_t) n, sizeof(double));
	T->gq = gbml_alloc_array(env, (size_t) n, sizeof(int64_t));
	T->hq = gbml_alloc_array(env, (size_t) n, sizeof(int64_t));
	T->leaf = gbml_alloc_array(env, (size_t) n, sizeof(uint16_t));
	T->tidx = gbml_alloc_array(env, (size_t) T->threads * BLOCK_ROWS, sizeof(uint16_t));
	T->tG = gbml_alloc_array(env, (size_t) T->threads * BLOCK_ROWS, sizeof(int64_t));
	T->tH = gbml_alloc_array(env, (size_t) T->threads * BLOCK_ROWS, sizeof(int64_t));
	T->tseg = gbml_alloc_array(env, (size_t) T->threads * (size_t) (T->max_slots + 1), sizeof(int64_t));
	if (T->has_eval)
		T->eval_pred = gbml_alloc_array(env, (size_t) T->eval.n * cols, sizeof(double));
	if (T->n_classes > 0)
	{
		if ((T->class_base = gbml_alloc_array(env, cols, sizeof(double))) == NULL)
			return env->error_code;
		T->pred_all = T->pred;
		T->eval_pred_all = T->eval_pred;
		T->prob = gbml_alloc_array(env, (size_t) n * cols, sizeof(double));
		if (T->prob == NULL)
			return env->error_code;
	}
	if (boost_structure_by_weight(T))
	{
		T->newton_hess = gbml_alloc_array(env, (size_t) n, sizeof(double));
		T->tleaf_h = gbml_alloc_array(env, (size_t) T->threads << T->depth, sizeof(int64_t));
	}
	if (!T->pred || !T->grad || !T->hess || !T->gq || !T->hq || !T->leaf || !T->tidx ||
		!T->tG || !T->tH || !T->tseg || (T->has_eval && !T->eval_pred) ||
		(boost_structure_by_weight(T) && (!T->newton_hess || !T->tleaf_h)))
		return env->error_code;
	/* the split search's hessian is the row weight, the same for every tree */
	if (T->newton_hess)
		for (int64_t r = 0; r < n; r++)
			T->hess[r] = T->train.weight ? (double) T->train.weight[r] : 1.0;
	return setup_histograms(T, T->on_gpu ? 1 : T->threads);
}

/*
 * early_stopping_rounds without an eval set has nothing to watch: every
 * iteration trains.  Said by the server that decides, once its eval set is
 * known (setup, setup_coordinator; not a shard, which may hold none of the
 * union's eval rows).
 */
static void
note_unwatched_stopping(trainer *T)
{
	if (!T->has_eval && T->p->early_stopping_rounds > 0)
		gbml_notice(T->env, GBML_LOG_NOTICE, "boost: early_stopping_rounds is %d but there is no eval set to watch "
					"(eval_fraction, eval_source): every iteration trains", (int) T->p->early_stopping_rounds);
}

/* The eval rows (given, or held out), checked against the training set's n_features, in training order. */
static int
setup_eval_rows(trainer *T, const gbml_dataset *eval, int n_features)
{
	gbml_env   *env = T->env;
	int			rc;

	T->has_eval = eval != NULL && eval->n_rows > 0;
	if (!T->has_eval)
		return GBML_OK;
	if (eval->n_features != n_features)
		return gbml_error(env, GBML_EINVAL, "boost: the eval set has %d features, the training set %d",
						  eval->n_features, n_features);
	if ((T->metric == GBML_BOOST_METRIC_NDCG ||
		 (T->metric == GBML_BOOST_METRIC_LOSS && gbml_boost_loss_is_ranking(T->kind))) &&
		eval->group_state <= 0)
		return gbml_error(env, GBML_EINVAL, "boost: the eval set needs a group_id per row for %s",
						  T->metric == GBML_BOOST_METRIC_NDCG ? "NDCG" : gbml_boost_loss_names[T->kind]);
	if ((rc = data_prepare(eval, &T->eval, env)) != GBML_OK)
		return rc;
	if (T->metric == GBML_BOOST_METRIC_NDCG && T->eval.n_groups > 0)
	{
		/* the labels never change: each eval query's ideal DCG once, not every tree */
		T->eval.ideal_dcg = gbml_alloc_array(env, (size_t) T->eval.n_groups, sizeof(double));
		if (T->eval.ideal_dcg == NULL)
			return env->error_code;
		gbml_ndcg_ideals(env, T->eval.label, T->eval.n_groups, T->eval.group_off, (int) T->p->eval_k,
						 T->eval.ideal_dcg);
	}
	T->n_eval_global = T->eval.n;
	T->n_eval_groups_global = T->eval.n_groups;
	return check_labels(T, &T->eval, "eval ");
}

/* The training rows (and eval rows) in training order, their labels checked. */
static int
setup_rows(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval)
{
	int			rc;

	if ((rc = data_prepare(ds, &T->train, T->env)) != GBML_OK)
		return rc;
	T->n_global = T->train.n;
	T->n_groups_global = T->train.n_groups;
	if ((rc = check_labels(T, &T->train, "")) != GBML_OK)
		return rc;
	return setup_eval_rows(T, eval, ds->n_features);
}

/* A training on this process's rows: rows, borders, bins, arrays. */
static int
setup(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval)
{
	int			rc;

	T->rows = &boost_local_rows;
	if ((rc = boost_resolve_loss(T, ds->group_state)) != GBML_OK ||
		(rc = setup_rows(T, ds, eval)) != GBML_OK)
		return rc;
	note_unwatched_stopping(T);
	if ((rc = quantize(T, ds, eval)) != GBML_OK ||
		(rc = setup_layout(T)) != GBML_OK)
		return rc;
	return setup_row_arrays(T, ds);
}

/*
 * A training on rows other servers hold (boost_shards.c): the split side's
 * arrays only, and with an eval set of this server's own (eval_source) its
 * rows, binned with the union's borders and scored here every tree.
 */
static int
setup_coordinator(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval)
{
	int			rc;

	/* (the shards' hellos say whether the rows have group ids: the loss is resolved there) */
	if ((rc = boost_shards_setup(T, ds, eval ? eval->n_rows : 0)) != GBML_OK)
		return rc;
	T->n_inputs = T->n_features = ds->n_features;
	if (eval && eval->n_rows > 0)
	{
		if (T->has_eval)
			return gbml_error(T->env, GBML_EINVAL, "boost: the shards held out eval rows beside an eval_source");
		if ((rc = setup_eval_rows(T, eval, ds->n_features)) != GBML_OK ||
			(rc = bin_rows(T, eval, &T->eval, &T->eval_bins, false)) != GBML_OK)
			return rc;
		T->eval_here = true;
	}
	note_unwatched_stopping(T);
	if (T->cat.n_cat > 0)
	{
		gbml_boost_ctr_params cp = ctr_params(T);

		/* the derived features, computed here from the union's ids and labels, go to the shards */
		if ((rc = boost_shards_categories(T, &cp)) != GBML_OK)
			return rc;
		T->n_features = gbml_boost_inputs_width(&T->cat.model);
	}
	if ((rc = setup_layout(T)) != GBML_OK)
		return rc;
	return setup_histograms(T, 1);
}

int
boost_trainer_rows(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval, const gbml_boost_params *p,
				   gbml_env *env)
{
	int			rc;

	memset(T, 0, sizeof(*T));
	T->env = env;
	T->p = p;
	T->threads = env->threads;
	T->rows = &boost_local_rows;
	T->shard_part = true;
	/* (a shard whose every row eval_fraction held out: its eval rows say whether the rows have group ids) */
	if ((rc = boost_resolve_loss(T, ds->n_rows == 0 && eval ? eval->group_state : ds->group_state)) != GBML_OK)
		return rc;
	return setup_rows(T, ds, eval);
}

int
boost_trainer_bins(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval, int64_t n_global)
{
	int			rc;

	T->n_inputs = T->n_features = ds->n_features;
	/* categorical inputs: their ids kept while binning (the coordinator asks for them; boost_shard_cat.c) */
	if ((rc = gbml_boost_ctr_begin(&T->cat, ds->schema, ds->n_features, T->train.n,
								   T->has_eval ? T->eval.n : 0, T->env)) != GBML_OK ||
		(rc = bin_rows(T, ds, &T->train, &T->bins, true)) != GBML_OK ||
		(T->has_eval && (rc = bin_rows(T, eval, &T->eval, &T->eval_bins, false)) != GBML_OK))
		return rc;
	T->n_global = n_global;
	return T->cat.n_cat > 0 ? GBML_OK : boost_trainer_arrays(T, ds);
}

int
boost_trainer_arrays(trainer *T, const gbml_dataset *ds)
{
	int			rc;

	/* a shard's passes are over its own rows (boost_loop sets a coordinator's) */
	boost_use_tree_threads(T, T->train.n);

	if ((rc = setup_layout(T)) != GBML_OK)
		return rc;
	return setup_row_arrays(T, ds);
}

int
boost_forest_reserve(trainer *T)
{
	return builder_reserve(&T->forest, T->env);
}

int
boost_eval_add_tree(trainer *T)
{
	double		t0 = gbml_now();
	int			rc;

	if (!T->has_eval)
		return GBML_OK;
	rc = add_tree_to_pred(T, &T->eval_bins, T->forest.n_trees, T->eval_pred);
	T->t_eval += gbml_now() - t0;
	return rc;
}

void
boost_trainer_free(trainer *T)
{
	trainer_free(T);
}

/* Whether this training takes further Newton steps for its leaf values (Logloss only). */
bool
boost_refines_leaves(const trainer *T)
{
	return T->kind == GBML_LOSS_LOGLOSS && T->p->leaf_estimation_iterations > 1;
}

/*
 * Leaf l's Newton step -G / (H + l2) from the tree's sums (its H from
 * newton_h, the leaves' Newton hessians, when not NULL), before the
 * learning rate.
 */
static double
newton_value(const trainer *T, int l, const int64_t *newton_h)
{
	double		G = (double) T->child_sums[l].g / T->sg;
	double		H = newton_h ? (double) newton_h[l] / T->newton_scale : (double) T->child_sums[l].h / T->sh;

	return (H + T->l2 > 0) ? -G / (H + T->l2) : 0.0;
}

/*
 * Leaf values by leaf_estimation_iterations Newton steps: the first from
 * the tree's sums (-G / (H + l2)), each further one from the Logloss
 * derivatives at the values so far, v -= G(v) / (H(v) + l2), as CatBoost's
 * leaf estimation does (l2 damps each step but does not shrink the fixed
 * point; the fully regularised step, -(G + l2 v) / (H + l2), measured no
 * better on the categorical bench).  The derivatives' sums come from the
 * row side (refine_sums: every row's leaf known), in fixed point at a
 * scale from the largest weight, so they are the same bits however the
 * rows are split.  With the splits scored on the row weights (score_function
 * L2) the tree's sums hold no hessians: every step comes from the rows, the
 * first at v = 0.  lv gets learning_rate x v.
 */
int
boost_refined_leaf_values(trainer *T, int last_f, int last_j, float *lv)
{
	int			nl = 1 << T->depth;
	double		v[1 << GBML_BOOST_MAX_DEPTH];
	int64_t		G[1 << GBML_BOOST_MAX_DEPTH],
				H[1 << GBML_BOOST_MAX_DEPTH];
	double		scale = gbml_boost_fixed_scale(gbml_boost_logloss_derivative_bound(T->max_weight), T->n_global);
	int64_t		first = boost_structure_by_weight(T) ? 0 : 1;
	int			rc;

	for (int l = 0; l < nl; l++)
		v[l] = first == 0 ? 0.0 : newton_value(T, l, NULL);
	for (int64_t it = first; it < T->p->leaf_estimation_iterations; it++)
	{
		if ((rc = T->rows->refine_sums(T, last_f, last_j, v, scale, G, H)) != GBML_OK)
			return rc;
		for (int l = 0; l < nl; l++)
		{
			double		g = (double) G[l] / scale,
						h = (double) H[l] / scale;

			if (h + T->l2 > 0)
				v[l] -= g / (h + T->l2);
		}
	}
	for (int l = 0; l < nl; l++)
		lv[l] = (float) (T->p->learning_rate * v[l]);
	return GBML_OK;
}

void
boost_newton_leaf_values(const trainer *T, const int64_t *newton_h, float *lv)
{
	for (int l = 0; l < (1 << T->depth); l++)
		lv[l] = (float) (T->p->learning_rate * newton_value(T, l, newton_h));
}

/*
 * The totals of the level's leaves: at the root from the bins of feature 0,
 * which cover every row; below it the children's sums the last split
 * computed.
 */
static void
level_leaf_sums(const trainer *T, int level, gbml_boost_hist_bin *leaf_sums)
{
	if (level == 0)
	{
		leaf_sums[0].g = leaf_sums[0].h = 0;
		for (int64_t b = 0; b < T->feat_off[1]; b++)
		{
			leaf_sums[0].g += T->hist_cur[b].g;
			leaf_sums[0].h += T->hist_cur[b].h;
		}
	}
	else
		memcpy(leaf_sums, T->child_sums, sizeof(gbml_boost_hist_bin) * ((size_t) 1 << level));
}

/* Split s of the open tree := (feature, border index) with its gain. */
void
boost_set_split(trainer *T, size_t s, int feature, int border, double gain)
{
	forest_builder *F = &T->forest;

	F->feature[s] = feature;
	F->border_index[s] = border;
	F->border[s] = T->borders.values[T->borders.offset[feature] + border];
	F->gain[s] = gbml_boost_stored_gain(gain);
}

/*
 * The split side's choice at one level: the leaves' totals, the best split
 * over every leaf (or each leaf's own, Depthwise), the children's sums
 * under it.  Returns false when no feature can split.
 */
static bool
choose_split(trainer *T, int level, gbml_boost_hist_bin *leaf_sums, const gbml_boost_split_noise *noise)
{
	forest_builder *F = &T->forest;
	int			n_leaves = 1 << level;
	gbml_boost_split best;
	double		parent_score;

	level_leaf_sums(T, level, leaf_sums);
	if (F->node_splits)
		return boost_choose_node_splits(T, level, leaf_sums, noise);
	parent_score = gbml_boost_leaves_score(leaf_sums, n_leaves, 1.0 / T->sg, 1.0 / T->sh, T->l2);
	gbml_boost_best_split(T->hist_cur, leaf_sums, n_leaves, T->n_features, T->feat_off, T->total_bins,
						  T->borders.count, 1.0 / T->sg, 1.0 / T->sh, T->l2, T->threads, 0, noise,
						  T->feature_best, &best);
	if (best.feature < 0)
		return false;			/* no feature has a border: nothing can split */
	boost_set_split(T, boost_split_index(F, F->n_trees, level, 0), best.feature, best.border, best.score - parent_score);
	/* the children's sums: the next level's sibling choice, or the leaf values */
	split_sums(T, leaf_sums, n_leaves, level, best.feature, best.border, T->child_sums);
	return true;
}

/*
 * The standard deviation of this tree's split noise (random_strength, as
 * CatBoost scales it): random_strength x the root mean square of every
 * training row's gradient x n / (n + e^L), L = iteration x learning_rate, so
 * the noise fades as the model grows.  The squares are summed in fixed
 * point (exact, in any order), so the same rows give the same bits on any
 * thread count, and the same rows on shards (the union's n, maximum and sum)
 * the bits of one server.
 */
static int
split_noise_sd(trainer *T, int64_t iteration, const boost_grad_max *gm, double *sd)
{
	int64_t		n = T->n_global;
	double		scale,
				model_left;
	int64_t		sum;
	int			rc;

	*sd = 0;
	if (!(T->p->random_strength > 0) || n == 0)
		return GBML_OK;
	/* over every row, drawn or not (g_all, not g) */
	scale = gbml_boost_fixed_scale(gm->g_all * gm->g_all, n);
	if ((rc = T->rows->gradient_squares(T, scale, &sum)) != GBML_OK)
		return rc;
	model_left = exp(log((double) n) - (double) iteration * T->p->learning_rate);
	*sd = T->p->random_strength * sqrt((double) sum / scale / (double) n) * model_left / (1.0 + model_left);
	return GBML_OK;
}

/*
 * Grows one tree on the current gradients and appends it to the forest.
 * *grown = false when no feature can split (every feature constant).
 * `stream` names the tree's random draws (rows, noise): the iteration, or
 * with MultiClass iteration * classes + class.
 */
static int
grow_tree(trainer *T, int64_t iteration, int64_t stream, bool *grown)
{
	forest_builder *F = &T->forest;
	int			d = T->depth;
	boost_grad_max gm;
	double		t0;
	int			rc;
	int			last_f = -1,
				last_j = -1;
	gbml_boost_hist_bin leaf_sums[1 << GBML_BOOST_MAX_DEPTH];
	gbml_boost_split_noise noise;

	*grown = false;
	t0 = gbml_now();
	if ((rc = T->rows->gradients(T, stream, &gm)) != GBML_OK)
		return rc;
	boost_fixed_point_plan(T, &gm);
	if ((rc = split_noise_sd(T, iteration, &gm, &noise.sd)) != GBML_OK)
		return rc;
	T->t_gradients += gbml_now() - t0;

	if ((rc = builder_reserve(F, T->env)) != GBML_OK)
		return rc;

	for (int level = 0; level < d; level++)
	{
		bool		split;

		t0 = gbml_now();
		if ((rc = level_histograms(T, level, last_f, last_j)) != GBML_OK)
			return rc;
		T->t_histograms += gbml_now() - t0;

		t0 = gbml_now();
		{
			/* each level's draws from streams of their own: "rstr", the tree, the level */
			uint64_t	x = ((uint64_t) T->p->random_seed ^ 0x72737472ULL) ^
				((uint64_t) stream * 16 + (uint64_t) level) * 0x9e3779b97f4a7c15ULL;

			noise.seed = gbml_splitmix64(&x);
		}
		split = choose_split(T, level, leaf_sums, &noise);
		T->t_splits += gbml_now() - t0;
		if (!split)
		{
			if (T->rows->drop_tree)
				T->rows->drop_tree(T);
			return GBML_OK;
		}
		/* (the row side's handle on a symmetric level; Depthwise nodes are read from the forest) */
		last_f = F->feature[boost_split_index(F, F->n_trees, level, 0)];
		last_j = F->border_index[boost_split_index(F, F->n_trees, level, 0)];
		{
			gbml_boost_hist_bin *tmp = T->hist_cur;

			T->hist_cur = T->hist_parent;
			T->hist_parent = tmp;
		}
	}

	t0 = gbml_now();
	if ((rc = T->rows->finish_tree(T, last_f, last_j, F->leaf + ((size_t) F->n_trees << d))) != GBML_OK)
		return rc;
	T->t_update += gbml_now() - t0;

	F->n_trees++;
	*grown = true;
	return GBML_OK;
}

static int
write_sections(trainer *T, gbml_train_context *ctx, double base_score)
{
	gbml_strbuf sb;
	const forest_builder *F = &T->forest;
	int			d = F->depth;
	boost_model_features mf;
	int			rc;

	memset(&mf, 0, sizeof(mf));
	if (F->has_sets && (rc = boost_plan_model_features(T, &mf)) != GBML_OK)
	{
		boost_model_features_free(&mf, T->env);
		return rc;
	}
	gbml_sb_init(&sb, T->env);
	gbml_sb_u32(&sb, GBML_BOOST_LAYOUT_VERSION);
	gbml_sb_u32(&sb, (uint32_t) T->kind);
	gbml_sb_f64(&sb, base_score);
	gbml_sb_u32(&sb, (uint32_t) F->n_trees);
	gbml_sb_u32(&sb, (uint32_t) T->n_inputs);
	if (T->kind == GBML_LOSS_MULTICLASS)
	{
		/* (only there: other models' headers keep their bytes) */
		gbml_sb_u32(&sb, (uint32_t) T->n_classes);
		for (int c = 0; c < T->n_classes; c++)
			gbml_sb_f64(&sb, T->class_base[c]);
	}
	gbml_model_add_sb(ctx->writer, GBML_SECTION_BOOST_HEADER, &sb);
	gbml_sb_free(&sb);

	gbml_sb_init(&sb, T->env);
	for (int64_t t = 0; t < F->n_trees; t++)
	{
		size_t		s0 = boost_split_index(F, t, 0, 0);

		gbml_sb_u32(&sb, (uint32_t) d | (F->node_splits ? GBML_BOOST_TREE_NODE_SPLITS : 0));
		for (size_t s = s0; s < s0 + (size_t) F->splits; s++)
		{
			gbml_sb_u32(&sb, boost_model_feature_of(T, &mf, s, s0));
			gbml_sb_f32(&sb, F->border[s]);
			gbml_sb_f32(&sb, F->gain[s]);
		}
		for (int l = 0; l < (1 << d); l++)
			gbml_sb_f32(&sb, F->leaf[(t << d) + l]);
	}
	gbml_model_add_sb(ctx->writer, GBML_SECTION_BOOST_TREES, &sb);
	gbml_sb_free(&sb);

	gbml_sb_init(&sb, T->env);
	boost_write_borders(T, &mf, &sb);
	gbml_model_add_sb(ctx->writer, GBML_SECTION_BOOST_BORDERS, &sb);
	gbml_sb_free(&sb);

	/* the splits on derived features index model features past the inputs: how to compute them */
	if (T->cat.n_cat > 0)
	{
		gbml_sb_init(&sb, T->env);
		gbml_boost_inputs_write(mf.to ? &mf.inputs : &T->cat.model, &sb);
		gbml_model_add_sb(ctx->writer, GBML_SECTION_BOOST_CATEGORICAL, &sb);
		gbml_sb_free(&sb);
	}
	boost_model_features_free(&mf, T->env);
	return GBML_OK;
}

/*
 * The exact sums of a kind of terms (boost_internal.h): their maxima over
 * every row (or query), the scales from them, the sums at those scales.
 */
static int
exact_terms(trainer *T, int which, int k, int64_t *sum, double *scale, double *max)
{
	bool		eval = (which & BOOST_TERMS_EVAL) != 0;
	int64_t		count = boost_terms_per_row(which) ? (eval ? T->n_eval_global : T->n_global)
		: (eval ? T->n_eval_groups_global : T->n_groups_global);
	/* a coordinator's own eval rows (eval_source) are summed here */
	const boost_row_ops *rows = eval && T->eval_here ? &boost_local_rows : T->rows;
	int			rc;

	if ((rc = rows->term_maxima(T, which, k, max)) != GBML_OK)
		return rc;
	gbml_boost_term_scales(max, boost_terms_count(which, k), count, scale);
	return rows->term_sums(T, which, k, scale, sum);
}

/*
 * MultiClass across servers: the union's class count (classes_count, or
 * the largest label + 1 of the training and eval rows, the shards' and
 * an eval_source's here; every shard checks its labels against it), and
 * its arrays of class base scores.
 */
static int
union_class_count(trainer *T)
{
	double		top;
	int			rc;

	if ((rc = T->rows->term_maxima(T, BOOST_TERMS_CLASS_COUNT, 0, &top)) != GBML_OK)
		return rc;
	/* (T->n_classes so far: the class count of this server's eval rows, an eval_source's) */
	T->n_classes = T->p->classes_count > 0 ? (int) T->p->classes_count : (int) fmax(top, T->n_classes);
	if (T->n_classes < 2)
	{
		gbml_error(T->env, GBML_EINVAL, "boost: MultiClass needs at least 2 classes; the labels have only class 0");
		return gbml_hint(T->env, "Set \"classes_count\" if the other classes are absent from these rows.");
	}
	if ((T->class_base = gbml_alloc_array(T->env, (size_t) T->n_classes, sizeof(double))) == NULL)
		return T->env->error_code;
	return GBML_OK;
}

/*
 * MultiClass: each class's base score from the exact sums of the classes'
 * weights, the same bits from shards' partial sums as from one server's rows.
 */
static int
class_base_scores(trainer *T)
{
	double		scale[BOOST_MAX_TERMS],
				max[BOOST_MAX_TERMS],
				weight[BOOST_MAX_TERMS];
	int64_t		sum[BOOST_MAX_TERMS];
	int			rc;

	if (T->shards && (rc = union_class_count(T)) != GBML_OK)
		return rc;
	if ((rc = exact_terms(T, BOOST_TERMS_CLASSES, T->n_classes, sum, scale, max)) != GBML_OK)
		return rc;
	for (int c = 0; c < T->n_classes; c++)
		weight[c] = scale[c] > 0 ? (double) sum[c] / scale[c] : 0.0;
	gbml_boost_multiclass_base(weight, T->n_classes, T->class_base);
	return GBML_OK;
}

/*
 * The base score from exact sums of the labels (boost_loss.h): the same
 * bits from shards' partial sums as from one server's rows; MultiClass:
 * its classes' (T->class_base).
 */
static int
base_score_of(trainer *T, double *base)
{
	double		scale[GBML_BOOST_N_TERMS],
				max[GBML_BOOST_N_TERMS];
	int64_t		sum[GBML_BOOST_N_TERMS];
	int			rc;

	*base = 0;
	if (T->kind == GBML_LOSS_MULTICLASS)
		return class_base_scores(T);
	if (T->kind != GBML_LOSS_RMSE && T->kind != GBML_LOSS_LOGLOSS)
		return GBML_OK;
	if ((rc = exact_terms(T, BOOST_TERMS_LABELS, 0, sum, scale, max)) != GBML_OK)
		return rc;
	*base = gbml_boost_base_from_sums(T->kind, sum, scale);
	T->max_weight = max[GBML_BOOST_TERM_W];	/* the refinement's fixed-point bound */
	if (!isfinite(*base))
		*base = 0;
	return GBML_OK;
}

/* Whether the metric (and the loss) is a pointwise mean: summed exactly from the rows' terms. */
static bool
pointwise_metric(const trainer *T, int metric)
{
	return metric == GBML_BOOST_METRIC_RMSE || metric == GBML_BOOST_METRIC_LOGLOSS ||
		(metric == GBML_BOOST_METRIC_LOSS && (T->kind == GBML_LOSS_RMSE || T->kind == GBML_LOSS_LOGLOSS));
}

/* Whether a pointwise metric is the root mean squared error (else the log loss). */
static bool
pointwise_rmse(const trainer *T, int metric)
{
	return metric == GBML_BOOST_METRIC_RMSE || (metric == GBML_BOOST_METRIC_LOSS && T->kind == GBML_LOSS_RMSE);
}

/* A pointwise metric from the exact term sums. */
static double
pointwise_value(const trainer *T, int metric, const int64_t *sum, const double *scale)
{
	double		sw = gbml_boost_term_value(sum, scale, GBML_BOOST_TERM_W);
	bool		rmse = pointwise_rmse(T, metric);

	if (!(sw > 0))
		return metric == GBML_BOOST_METRIC_RMSE ? NAN : 0.0;
	if (rmse)
		return sqrt(gbml_boost_term_value(sum, scale, GBML_BOOST_TERM_SQERR) / sw);
	return gbml_boost_term_value(sum, scale, GBML_BOOST_TERM_LOGLOSS) / sw;
}

/*
 * MultiClass's metrics (MultiClass, Accuracy; the loss is MultiClass):
 * weighted means of exact per-row sums (eval: BOOST_TERMS_EVAL or 0).
 */
static int
multiclass_value(trainer *T, int metric, int eval, double *out)
{
	double		scale[GBML_BOOST_MULTICLASS_TERMS],
				max[GBML_BOOST_MULTICLASS_TERMS],
				w;
	int64_t		sum[GBML_BOOST_MULTICLASS_TERMS];
	int			t = metric == GBML_BOOST_METRIC_ACCURACY ? GBML_BOOST_MC_TERM_HIT : GBML_BOOST_MC_TERM_LOSS;
	int			rc;

	if ((rc = exact_terms(T, BOOST_TERMS_MULTICLASS | eval, T->n_classes, sum, scale, max)) != GBML_OK)
		return rc;
	w = (double) sum[GBML_BOOST_MC_TERM_W] / scale[GBML_BOOST_MC_TERM_W];
	*out = w > 0 ? (double) sum[t] / scale[t] / w : 0.0;
	return GBML_OK;
}

/*
 * The model's value of `metric` on its training rows (eval: 0) or its eval
 * rows (BOOST_TERMS_EVAL), exactly summed wherever the rows are: pointwise
 * terms per row, NDCG and the ranking losses per query; AUC from every
 * prediction (the shards' gathered here: its value does not depend on the
 * rows' order).  *point caches the pointwise sums between two calls.
 */
static int
rows_value(trainer *T, int metric, int eval, bool *have_point, int64_t *point, double *point_scale, double *out)
{
	double		scale[GBML_BOOST_N_TERMS],
				max[GBML_BOOST_N_TERMS];
	int64_t		sum[GBML_BOOST_N_TERMS];
	int			rc;

	if (T->kind == GBML_LOSS_MULTICLASS)
		return multiclass_value(T, metric, eval, out);
	if (pointwise_metric(T, metric))
	{
		/* the train values (metric and loss) share one request; an eval metric asks for its term only */
		int			kind = eval == 0 ? BOOST_TERMS_POINTWISE : pointwise_rmse(T, metric) ? BOOST_TERMS_POINTWISE_SQERR
			: BOOST_TERMS_POINTWISE_LOGLOSS;

		if (!*have_point && (rc = exact_terms(T, kind | eval, 0, point, point_scale, max)) != GBML_OK)
			return rc;
		*have_point = true;
		*out = pointwise_value(T, metric, point, point_scale);
		return GBML_OK;
	}
	if (metric == GBML_BOOST_METRIC_NDCG || metric == GBML_BOOST_METRIC_LOSS)
	{
		int			k = metric == GBML_BOOST_METRIC_NDCG ? (int) T->p->eval_k : 0;

		if ((rc = exact_terms(T, (k ? BOOST_TERMS_QUERY_NDCG : BOOST_TERMS_QUERY_LOSS) | eval, k, sum, scale,
							  max)) != GBML_OK)
			return rc;
		*out = gbml_boost_group_value(T->kind, k, sum, scale);
		return GBML_OK;
	}
	if (T->shards && !(eval && T->eval_here))
		return boost_shards_auc(T, eval != 0, out);	/* (every prediction gathered here) */
	{
		const boost_data *d = eval ? &T->eval : &T->train;

		*out = gbml_auc_env(T->env, eval ? T->eval_pred : T->pred, d->label, d->weight, d->n);
	}
	return GBML_OK;
}

/* The trained model's metric and loss on its training rows. */
static int
train_values(trainer *T, double *metric, double *loss)
{
	double		point_scale[GBML_BOOST_N_TERMS];
	int64_t		point[GBML_BOOST_N_TERMS];
	bool		have_point = false;
	int			rc;

	if ((rc = rows_value(T, T->metric, 0, &have_point, point, point_scale, metric)) != GBML_OK)
		return rc;
	return rows_value(T, GBML_BOOST_METRIC_LOSS, 0, &have_point, point, point_scale, loss);
}

/* How the boosting loop went: what the META section and the best-model cut need. */
typedef struct boost_run
{
	int64_t		best_iter;		/* the tree (0-based) whose eval value was best; -1 without an eval set */
	int64_t		iterations_run;
	double		best_value,
				last_value;
	bool		higher_is_better,
				stopped_early,
				no_split;		/* a tree found no split: the loop ended there */
	char		metric_name[64];
} boost_run;

void
boost_select_class(trainer *T, int cls)
{
	T->cls = cls;
	if (T->eval_pred_all)
		T->eval_pred = T->eval_pred_all + (size_t) cls * (size_t) T->eval.n;
	if (T->pred_all)			/* (a coordinator: the rows are on the shards) */
		T->pred = T->pred_all + (size_t) cls * (size_t) T->train.n;
}

int
boost_trainer_classes(trainer *T, int k, const double *base)
{
	size_t		n = (size_t) T->train.n,
				ne = T->has_eval ? (size_t) T->eval.n : 0;
	int			rc;

	if (k != T->n_classes)
	{
		double	   *pred,
				   *prob,
				   *class_base,
				   *eval_pred;

		/* the union's class count came after this shard's arrays were sized for its own: made beside them */
		if ((rc = gbml_budget_check(T->env, (3 * n + ne) * (size_t) k * sizeof(double),
									"boosting's predictions for the union's %d classes (%zu bytes a row for %lld rows: "
									"predictions, probabilities, the iteration's start; and the eval rows' %zu)", k,
									3 * (size_t) k * sizeof(double), (long long) n, (size_t) k * sizeof(double))) != GBML_OK)
			return rc;
		pred = gbml_alloc_array(T->env, n * (size_t) k, sizeof(double));
		prob = gbml_alloc_array(T->env, n * (size_t) k, sizeof(double));
		class_base = gbml_alloc_array(T->env, (size_t) k, sizeof(double));
		eval_pred = ne ? gbml_alloc_array(T->env, ne * (size_t) k, sizeof(double)) : NULL;
		if (pred == NULL || prob == NULL || class_base == NULL || (ne && eval_pred == NULL))
		{
			gbml_free(T->env, pred);
			gbml_free(T->env, prob);
			gbml_free(T->env, class_base);
			gbml_free(T->env, eval_pred);
			return T->env->error_code;
		}
		gbml_free(T->env, T->pred_all);
		gbml_free(T->env, T->prob);
		gbml_free(T->env, T->class_base);
		T->pred = T->pred_all = pred;
		T->prob = prob;
		T->class_base = class_base;
		if (ne)
		{
			gbml_free(T->env, T->eval_pred_all);
			T->eval_pred = T->eval_pred_all = eval_pred;
		}
		T->n_classes = k;
	}
	memcpy(T->class_base, base, sizeof(double) * (size_t) k);
	return GBML_OK;
}

int
boost_rebuild_predictions(trainer *T)
{
	double		base_score = T->base_score;
	int64_t		cols = T->n_classes > 0 ? T->n_classes : 1;
	double	   *pred = T->n_classes > 0 ? T->pred_all : T->pred;
	int			rc = GBML_OK;

	for (int64_t r = 0; r < T->train.n * cols; r++)
		pred[r] = T->n_classes > 0 ? T->class_base[r / T->train.n] : base_score;
	for (int64_t t = 0; t < T->forest.n_trees && rc == GBML_OK; t++)
		rc = add_tree_from_bins(T, t, pred + (size_t) (t % cols) * (size_t) T->train.n);
	return rc;
}

/*
 * One iteration's trees: one, or with MultiClass one a class, each on its
 * class's gradients at the iteration's start (the row side takes the
 * softmax with class 0's).  When a class's tree finds no split, the
 * iteration's earlier trees go too (a model has whole iterations).
 */
static int
grow_iteration(trainer *T, int64_t it, bool *grown)
{
	int			rc;

	if (T->n_classes == 0)
		return grow_tree(T, it, it, grown);
	for (int c = 0; c < T->n_classes; c++)
	{
		boost_select_class(T, c);
		if ((rc = grow_tree(T, it, it * T->n_classes + c, grown)) != GBML_OK)
			return rc;
		if (!*grown)
		{
			if (c == 0)
				return GBML_OK;
			T->forest.n_trees -= c;
			/* (shards go back to the iteration's start themselves: the drop told them) */
			return T->shards ? GBML_OK : boost_rebuild_predictions(T);
		}
	}
	return GBML_OK;
}

/*
 * The threads a tree's passes run on.  Each pass over the rows is a parallel
 * region (about twenty a tree, more with Depthwise nodes), and a region's
 * join waits for every thread: on a server whose other processes keep the
 * cores busy, a thread the scheduler has not run yet costs the others
 * OpenMP's spin (3 ms by default) and its time slice.  Measured with both
 * cores busy (4,000 rows of 19 features, 300 trees): 0.32 s on one thread,
 * 5.0-8.6 s on two.  Passes of a few thousand rows gain next to nothing
 * from a second thread even on an idle machine, so with the setting's
 * count a tree uses one thread per env->bins_per_thread of the bins of
 * `rows` rows (the whole training's on a coordinator, a shard's own on a
 * shard); a count the call asked for (the "threads" param) is used as
 * asked.  The bytes do not depend on it.  Set in env too: the loss's passes
 * read env's count, and the run report says what the trees used.
 */
void
boost_use_tree_threads(trainer *T, int64_t rows)
{
	int64_t		bins = rows * (int64_t) (T->n_features > 0 ? T->n_features : 1);
	int64_t		by_work;

	if (T->env->bins_per_thread <= 0)
		return;
	by_work = bins / T->env->bins_per_thread;
	if (by_work < 1)
		by_work = 1;
	if (by_work < T->threads)
		T->threads = T->env->threads = (int) by_work;
}

/* Grows the trees: one an iteration (a class), each iteration scored on the eval set (early stopping), cancel checked. */
static int
boost_loop(trainer *T, boost_run *run)
{
	const gbml_boost_params *p = T->p;
	gbml_env   *env = T->env;

	boost_use_tree_threads(T, T->n_global > T->train.n ? T->n_global : T->train.n);
	for (int64_t it = 0; it < p->iterations; it++)
	{
		bool		grown;
		gbml_progress_info info = {"train", it + 1, p->iterations, NULL, 0};
		int			rc;

		T->progress = info;		/* what a cancel check inside the tree reports */
		if ((rc = grow_iteration(T, it, &grown)) != GBML_OK)
			return rc;
		if (!grown)
		{
			run->no_split = true;
			break;
		}
		run->iterations_run = it + 1;
		if (T->has_eval)
		{
			double		t0 = gbml_now(),
						v;
			double		point_scale[GBML_BOOST_N_TERMS];
			int64_t		point[GBML_BOOST_N_TERMS];
			bool		have_point = false;

			if ((rc = rows_value(T, T->metric, BOOST_TERMS_EVAL, &have_point, point, point_scale, &v)) != GBML_OK)
				return rc;
			T->t_eval += gbml_now() - t0;
			run->last_value = v;
			if (run->best_iter < 0 || (run->higher_is_better ? v > run->best_value : v < run->best_value))
			{
				run->best_value = v;
				run->best_iter = it;
			}
			info.metric_name = run->metric_name;
			info.metric = v;
		}
		if (gbml_progress(env, &info))
			return gbml_error(env, GBML_ECANCELLED, "canceled");
		if (T->has_eval && p->early_stopping_rounds > 0 && it - run->best_iter >= p->early_stopping_rounds)
		{
			run->stopped_early = true;
			break;
		}
	}
	return GBML_OK;
}

/* use_best_model: the trees after the best eval iteration go, and the predictions are those of the rest. */
static int
keep_best_trees(trainer *T, const boost_run *run)
{
	int64_t		per_iteration = T->n_classes > 0 ? T->n_classes : 1;

	if (!T->has_eval || !T->p->use_best_model || run->best_iter < 0 ||
		(run->best_iter + 1) * per_iteration >= T->forest.n_trees)
		return GBML_OK;
	T->forest.n_trees = (run->best_iter + 1) * per_iteration;
	return T->rows->trees_cut(T);
}

/* The trainer's part of META: the forest's shape, the metrics, the categorical inputs, the timings. */
static int
write_meta(trainer *T, gbml_strbuf *m, const boost_run *run, double base_score, double t_quant, double t_boost)
{
	const gbml_boost_params *p = T->p;
	const char *mname = run->metric_name;
	double		train_value = NAN,
				train_loss = NAN;
	double		eval_value = T->has_eval ? (p->use_best_model && run->best_iter >= 0 ? run->best_value : run->last_value)
		: NAN;
	int			rc;

	if ((rc = train_values(T, &train_value, &train_loss)) != GBML_OK)
		return rc;
	if (!T->has_eval)
		eval_value = train_value;
	gbml_sb_printf(m, "\"loss\":\"%s\",\"trees\":%lld,\"depth\":%d,\"iterations_run\":%lld,",
				   gbml_boost_loss_names[T->kind], (long long) T->forest.n_trees, T->depth,
				   (long long) run->iterations_run);
	if (T->n_classes > 0)
	{
		gbml_sb_printf(m, "\"classes\":%d,\"class_base_scores\":[", T->n_classes);
		for (int c = 0; c < T->n_classes; c++)
		{
			gbml_sb_printf(m, c ? "," : "");
			gbml_sb_json_number(m, T->class_base[c]);
		}
		gbml_sb_printf(m, "],");
	}
	gbml_sb_printf(m, "\"l2_leaf_reg\":");
	gbml_sb_json_number(m, T->l2);
	gbml_sb_printf(m, ",\"base_score\":");
	gbml_sb_json_number(m, base_score);
	gbml_sb_printf(m, ",\"best_iteration\":%lld,\"stopped_early\":%s,\"no_split_possible\":%s,",
				   (long long) (run->best_iter >= 0 ? run->best_iter + 1 : T->forest.n_trees),
				   run->stopped_early ? "true" : "false", run->no_split ? "true" : "false");
	gbml_sb_printf(m, "\"borders\":%lld,", (long long) T->borders.offset[T->n_features]);
	if (T->cat.n_cat > 0)
	{
		gbml_sb_printf(m, "\"categorical\":{\"features\":%d,\"one_hot\":%d,\"ctr\":%d,",
					   T->cat.n_cat, T->cat.n_one_hot, T->cat.n_ctr);
		if (T->cat.n_slot > 0)
			gbml_sb_printf(m, "\"split_as_sets\":%d,", T->cat.n_slot);
		gbml_sb_printf(m, "\"ctr_prior\":");
		gbml_sb_json_number(m, T->cat.model.prior);
		gbml_sb_printf(m, "},");
	}
	gbml_sb_printf(m, "\"metrics\":{\"eval_metric\":\"%s\",\"eval_value\":", mname);
	gbml_sb_json_number(m, eval_value);
	gbml_sb_printf(m, ",\"higher_is_better\":%s,\"eval_set\":\"%s\",\"train_%s\":",
				   run->higher_is_better ? "true" : "false", T->has_eval ? "eval" : "train", mname);
	gbml_sb_json_number(m, train_value);
	gbml_sb_printf(m, ",\"train_loss\":");
	gbml_sb_json_number(m, train_loss);
	gbml_sb_printf(m, "},\"timings\":{\"quantize_seconds\":%.6f,\"boost_seconds\":%.6f,"
				   "\"seconds_per_tree\":%.6f,\"gradient_seconds\":%.6f,\"histogram_seconds\":%.6f,"
				   "\"split_seconds\":%.6f,\"update_seconds\":%.6f,\"eval_seconds\":%.6f",
				   t_quant, t_boost,
				   /* (MultiClass: K trees an iteration) */
				   run->iterations_run > 0 ? t_boost / (double) run->iterations_run /
				   (double) (T->n_classes > 0 ? T->n_classes : 1) : 0.0,
				   T->t_gradients, T->t_histograms, T->t_splits, T->t_update, T->t_eval);
	if (T->shards)
	{
		/* the exchanges with the shards: the coordination's cost beside the shards' own work */
		gbml_sb_printf(m, ",");
		boost_shards_traffic_json(T, m);
	}
	gbml_sb_printf(m, "}");
	return gbml_sb_status(m);
}

static int
boost_train(const gbml_dataset *ds, gbml_train_context *ctx)
{
	trainer		T;
	gbml_env   *env = ctx->env;
	double		t_start = gbml_now(),
				t_quant,
				t_boost;
	double		base_score;
	boost_run	run = {.best_iter = -1,.best_value = NAN,.last_value = NAN};
	int			rc;

	memset(&T, 0, sizeof(T));
	T.env = env;
	T.p = ctx->params;
	T.threads = env->threads;
	if ((rc = ds->shards ? setup_coordinator(&T, ds, ctx->eval) : setup(&T, ds, ctx->eval)) != GBML_OK)
		goto done;
	if (ds->shards)
		ctx->shards_eval_rows = T.n_eval_global;	/* (META's eval_rows: the driver saw none) */
	t_quant = gbml_now() - t_start;
	run.higher_is_better = metric_higher_is_better(T.metric);
	metric_name(T.metric, T.kind, T.p->eval_k, run.metric_name, sizeof(run.metric_name));
	if ((rc = base_score_of(&T, &base_score)) != GBML_OK || (rc = T.rows->start(&T, base_score)) != GBML_OK ||
		(rc = boost_loop(&T, &run)) != GBML_OK)
		goto done;
	t_boost = gbml_now() - t_start - t_quant;
	if ((rc = keep_best_trees(&T, &run)) != GBML_OK)
		goto done;
	env->trainer_temp_written = T.bins.bytes_written;
	env->trainer_temp_read = T.bins.bytes_read;
	if ((rc = write_sections(&T, ctx, base_score)) != GBML_OK)
		goto done;
	rc = write_meta(&T, ctx->meta, &run, base_score, t_quant, t_boost);

done:
	trainer_free(&T);
	return rc;
}

const gbml_algorithm gbml_algorithm_boost = {
	.id = GBML_ALGO_BOOST,
	.name = "boost",
	.params = gbml_boost_param_specs,
	.params_size = sizeof(gbml_boost_params),
	.input_flags = GBML_INPUT_LABEL | GBML_INPUT_MISSING,
	.outputs = GBML_OUT_SCORE | GBML_OUT_PROBA,
	.gpu_trains = true,
	.gpu_streams = true,
	.reads_spilled_rows = true,
	.quantizes_rows = true,
	.categorical_features = true,
	.shard = &gbml_boost_shard_ops,
	.records_param = boost_records_param,
	.train = boost_train,
	.load = boost_load,
	.unload = boost_unload,
	.predict = boost_predict,
	.classes = boost_classes,
	.gives_probability = boost_gives_probability,
	.to_json = boost_to_json,
	.importance = boost_importance,
};
