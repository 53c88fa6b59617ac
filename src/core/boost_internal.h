/*
 * boost_internal.h — what the boosting trainer's parts share: the trainer
 * (boost.c's driver and split side), and the row side it calls through
 * boost_row_ops: this process's rows (boost_local_rows,
 * boost_rows_local.c), or rows on other servers (boost_shards.c, whose
 * shards run boost_local_rows on theirs, boost_shard.c).
 *
 * The split between the sides: the row side holds the rows, their bins,
 * predictions, gradients and leaf indices, and returns only maxima,
 * integer sums and histograms, which are exact in any order; the split
 * side turns them into the fixed-point scales, the splits, the leaf values
 * and the model.  One driver over either row side: the same model bytes.
 */
#ifndef GBML_BOOST_INTERNAL_H
#define GBML_BOOST_INTERNAL_H

#include <float.h>
#include <math.h>

#include "boost.h"
#include "boost_gpu.h"
#include "boost_histogram.h"
#include "boost_loss.h"
#include "boost_multiclass.h"
#include "boost_quantize.h"
#include "boost_ctr.h"
#include "shard_link.h"

/* Rows per bin block (<= 65536: row lists inside a block are uint16). */
#define BLOCK_ROWS 8192

typedef struct boost_data
{
	int64_t		n;
	const float **rows;			/* n pointers to n_features floats (host rows), until binned */
	int64_t    *src;			/* rows in a chunk store: n addresses (chunk << 32 | row) instead */
	float	   *label;
	float	   *weight;			/* NULL when every weight is 1 */
	int64_t		n_groups;		/* 0 without group ids */
	int64_t    *group_off;		/* n_groups + 1 */
	int64_t    *group_id;		/* n_groups: each query's id, ascending */
	int64_t    *group_global;	/* n_groups: its index among the union's queries (shards), or NULL */
	double	   *ideal_dcg;		/* per query, for the eval NDCG of every tree; NULL: computed per call */
} boost_data;

/* The loss's view of d's rows (boost_loss.h), with their queries when with_groups (boost.c). */
gbml_boost_problem boost_data_problem(const boost_data *d, bool with_groups);


typedef struct forest_builder
{
	int			depth;
	bool		node_splits;	/* grow_policy Depthwise: a split per node, not per level */
	int			splits;			/* per tree: depth, or 2^depth - 1 with node_splits */
	int64_t		n_trees;
	int64_t		cap;
	int32_t    *feature;		/* cap * splits: tree t's from t * splits, level by level */
	int32_t    *border_index;
	float	   *border;
	float	   *gain;
	float	   *leaf;			/* cap << depth */
	/* with set splits (categorical_split sets): per split, the bins going right (a bit each) */
	bool		has_sets;
	uint8_t    *set_mask;		/* cap * splits * GBML_BOOST_SET_MASK_BYTES */
} forest_builder;


/* Everything one training run holds; freed in one place. */
typedef struct trainer
{
	gbml_env   *env;
	const gbml_boost_params *p;
	gbml_boost_loss_kind kind;
	bool		by_weight;		/* splits scored on the row weights (score_function L2; boost_structure_by_weight) */
	int			metric;
	int			threads;
	int			depth;
	double		l2;				/* l2_leaf_reg, the loss's default resolved */

	boost_data	train;
	boost_data	eval;
	bool		has_eval;
	gbml_boost_borders borders;
	gbml_boost_bins bins;
	gbml_boost_bins eval_bins;	/* the eval rows' bins (same borders, eval order): scored per tree */
	int			n_inputs;		/* the rows' features */
	gbml_boost_ctr_fit cat;		/* categorical inputs and what they become (boost_ctr.h) */
	int			n_features;		/* the model features the trees split on: inputs, then derived */
	int64_t    *feat_off;		/* n_features + 1 */
	int64_t		total_bins;
	/* with slot columns (categorical_split sets): which features split as sets, the others' border counts */
	uint8_t    *is_set;			/* n_features, or NULL */
	int		   *ordinal_count;	/* n_features: borders.count, 0 for a set feature */

	double		base_score;		/* the first prediction (the row side's start); MultiClass: class_base */
	double	   *pred,
			   *grad,
			   *hess;
	/* structure_by_weight losses: hess holds the row weights (the split
	 * search's), newton_hess the loss's hessian (the leaf values'), summed in
	 * fixed point at newton_scale into tleaf_h (threads << depth) */
	double	   *newton_hess;
	double		newton_scale;
	int64_t    *tleaf_h;
	int64_t    *gq,
			   *hq;
	uint16_t   *leaf;
	double	   *eval_pred;
	/*
	 * MultiClass (boost_multiclass.h): n_classes class-major predictions,
	 * their softmax at the iteration's start, and the class of the open
	 * tree, at whose column pred and eval_pred point; n_classes 0 otherwise
	 */
	int			n_classes;
	int			cls;
	double	   *class_base;		/* n_classes: each class's first score */
	double	   *pred_all,
			   *eval_pred_all,
			   *prob;

	/* per-thread scratch */
	gbml_boost_hist_bin *thist;	/* threads * max_slots * total_bins */
	uint16_t   *tidx;			/* threads * BLOCK_ROWS */
	int64_t    *tG,
			   *tH;				/* threads * BLOCK_ROWS */
	int64_t    *tseg;			/* threads * (max_slots + 1) */
	int64_t		max_slots;

	gbml_boost_hist_bin *hist_cur,
			   *hist_parent;	/* (1 << (depth-1)) * total_bins each */
	/* (G, H) sums of the leaves the next level will split (choose the smaller sibling by H) */
	gbml_boost_hist_bin child_sums[1 << GBML_BOOST_MAX_DEPTH];
	gbml_boost_split *feature_best;
	int16_t		slot_of[GBML_BOOST_SLOT_TABLE];
	int16_t		small[1 << (GBML_BOOST_MAX_DEPTH - 1)];	/* per slot: the leaf its pass fills */
	/* this tree's histograms are packed (constant hessian): gq = g * 2^count_bits + 1 */
	bool		packed;
	int			count_bits;
	int64_t		hq_const;

	forest_builder forest;
	gbml_progress_info progress;	/* the tree being grown: what a cancel check inside it reports */

	/* where the rows are: this process's (boost_local_rows) or shards' (boost_shards.c) */
	const struct boost_row_ops *rows;
	struct boost_shards *shards;	/* the coordinator's side, when the rows are on shards */
	int64_t		n_global;		/* the rows of the whole training (the fixed-point scales' n) */
	int64_t		n_groups_global;	/* its queries */
	int64_t		n_eval_global;	/* the eval rows of the whole training, and their queries */
	int64_t		n_eval_groups_global;
	const int64_t *row_rank;	/* a shard's rows' global indices (subsample without queries), or NULL */
	bool		leaves_applied; /* the open tree's last split is in every row's leaf index */
	bool		send_packed;	/* a shard: the level passes leave packed histograms packed (half the bytes) */
	double		max_weight;		/* the largest row weight (the Logloss refinement's bound; a shard's: its own) */
	int64_t		drawn;			/* this tree's drawn rows (of this process's) */
	double		sg,				/* this tree's fixed-point scales (fixed_point_plan) */
				sh;

	/*
	 * A query kind's per-query terms from its maxima, kept for its sums
	 * (exact_terms asks for both in turn at the same predictions; a shard
	 * computes the maxima again before its sums): the kind with
	 * BOOST_TERMS_EVAL and k, or kind 0 (none)
	 */
	int			kept_terms_kind;
	int			kept_terms_k;
	double	   *kept_num,
			   *kept_den;

	bool		eval_here;		/* a coordinator's eval rows are its own (eval_source), not the shards' */
	/*
	 * A shard's trainer (boost_trainer_rows): its rows are a part of the
	 * union's, so MultiClass's class count is the union's, which comes with
	 * the base score; its eval labels' largest + 1 is checked against it then
	 */
	bool		shard_part;
	int			eval_classes;
	/*
	 * MultiClass on one server without classes_count: the training labels'
	 * largest + 1 (n_classes takes the eval labels' too), the count of
	 * categorical statistics, as a coordinator counts them from the
	 * training labels it gathers
	 */
	int			train_classes;

	bool		on_gpu;			/* the level passes run on the device */
	gbml_boost_gpu gpu;

	double		t_gradients,
				t_histograms,
				t_splits,
				t_update,
				t_eval;
} trainer;


/*
 * A split's gain as the model stores it (a float32, for the importances):
 * at least 0, and at most FLT_MAX, so labels of 1e30 (squared gradients past
 * float's range) still give a model that loads, with its largest gains
 * tied.
 */
static inline float
gbml_boost_stored_gain(double gain)
{
	return (float) fmin(fmax(0.0, gain), FLT_MAX);
}

/*
 * Where split `node` of `level` of tree t is in the forest's arrays: level
 * by level, one entry a level (symmetric trees) or one a node (Depthwise:
 * level l's nodes from 2^l - 1, node k holding the rows whose leaf bits so
 * far are k).
 */
static inline size_t
boost_split_index(const forest_builder *F, int64_t t, int level, int node)
{
	return (size_t) t * (size_t) F->splits +
		(F->node_splits ? ((size_t) 1 << level) - 1 + (size_t) node : (size_t) level);
}

/* Split s of the open tree := (feature, border index) with its gain (the border's value from the borders). */
void		boost_set_split(trainer *T, size_t s, int feature, int border, double gain);
/* Leaf l's children's (G, H) under (feature, border) from the level's histograms. */
void		boost_leaf_split_sums(const trainer *T, int l, const gbml_boost_hist_bin *leaf_sum, int feature, int border,
								  gbml_boost_hist_bin *left, gbml_boost_hist_bin *right);
/*
 * Depthwise (boost_node_split.c): each leaf of the level its own split, the
 * children's sums into T->child_sums; false when the root cannot split.
 */
bool		boost_choose_node_splits(trainer *T, int level, const gbml_boost_hist_bin *leaf_sums,
									 const gbml_boost_split_noise *noise);

/*
 * What the model stores of trees that split sets (categorical_split sets):
 * the slot columns are training's only, so the model's features are the
 * inputs, the other derived features, then one set feature per distinct
 * (column, set) the splits used, split at 0.5 (boost_cat.h).
 */
typedef struct boost_model_features
{
	int32_t    *to;				/* per training feature: its model feature, -1 for a slot column */
	int32_t    *set_of;			/* per split: its set feature among the sets, or -1 */
	int			n_kept;			/* model features before the set ones */
	int			n_sets;
	gbml_boost_inputs inputs;	/* the derived features to store (the sets' tables owned) */
} boost_model_features;

/* mf for T's forest (only when it has set splits); free with boost_model_features_free. */
int			boost_plan_model_features(const trainer *T, boost_model_features *mf);
void		boost_model_features_free(boost_model_features *mf, gbml_env *env);
/* Split s's model feature (root: its tree's first split, which a node left unsplit names). */
uint32_t	boost_model_feature_of(const trainer *T, const boost_model_features *mf, size_t s, size_t root);
/* The model features' borders ('BSTB' body). */
void		boost_write_borders(const trainer *T, const boost_model_features *mf, gbml_strbuf *sb);

/* The maxima of one tree's gradients over the drawn rows (exact in any order). */
typedef struct boost_grad_max
{
	double		g,				/* max |gradient| */
				g_all,			/* ... over every row, drawn or not (random_strength's noise scale) */
				h,				/* max |hessian| (the split search's) */
				newton_h,		/* max of the leaf values' hessian (structure_by_weight losses) */
				hmin,			/* the hessians' extremes: equal means packed histograms */
				hmax;
} boost_grad_max;

/*
 * What a term request sums exactly (boost_loss.h): the pointwise terms per
 * row (without the predictions: the base score's), per query the terms of
 * NDCG@k or of the ranking loss's value; MultiClass (boost_multiclass.h):
 * the class count (a maximum only), each of k classes' weight (the base
 * scores'), the metric terms at the predictions.
 */
typedef enum boost_terms_kind
{
	BOOST_TERMS_LABELS,
	BOOST_TERMS_POINTWISE,
	BOOST_TERMS_QUERY_NDCG,
	BOOST_TERMS_QUERY_LOSS,
	BOOST_TERMS_CLASS_COUNT,
	BOOST_TERMS_CLASSES,
	BOOST_TERMS_MULTICLASS,
	/* the pointwise terms with one of the prediction terms (the other 0): an eval metric's */
	BOOST_TERMS_POINTWISE_SQERR,
	BOOST_TERMS_POINTWISE_LOGLOSS
} boost_terms_kind;

/*
 * OR'ed into a kind: the same terms of the eval rows at their predictions
 * (the eval metric, each iteration), not of the training rows.
 */
#define BOOST_TERMS_EVAL 0x40

/* A kind without BOOST_TERMS_EVAL. */
static inline boost_terms_kind
boost_terms_base(int which)
{
	return (boost_terms_kind) (which & ~BOOST_TERMS_EVAL);
}

/* The most terms a request has: a weight per class. */
#define BOOST_MAX_TERMS GBML_BOOST_MAX_CLASSES

/* Terms of a kind (k: the class count of BOOST_TERMS_CLASSES). */
static inline int
boost_terms_count(int which, int k)
{
	switch (boost_terms_base(which))
	{
		case BOOST_TERMS_LABELS:
		case BOOST_TERMS_POINTWISE:
		case BOOST_TERMS_POINTWISE_SQERR:
		case BOOST_TERMS_POINTWISE_LOGLOSS:
			return GBML_BOOST_N_TERMS;
		case BOOST_TERMS_CLASS_COUNT:
			return 1;
		case BOOST_TERMS_CLASSES:
			return k;
		case BOOST_TERMS_MULTICLASS:
			return GBML_BOOST_MULTICLASS_TERMS;
		default:
			return 2;
	}
}

/* Whether a kind's terms are per row (else per query). */
static inline bool
boost_terms_per_row(int which)
{
	which = boost_terms_base(which);
	return which != BOOST_TERMS_QUERY_NDCG && which != BOOST_TERMS_QUERY_LOSS;
}

/* Whether a kind's terms need only the labels (and weights), not the predictions. */
static inline bool
boost_terms_of_labels(int which)
{
	which = boost_terms_base(which);
	return which == BOOST_TERMS_LABELS || which == BOOST_TERMS_CLASS_COUNT || which == BOOST_TERMS_CLASSES;
}

/* The row side (see the top of this file). */
typedef struct boost_row_ops
{
	/* the largest |term| of each term of `which` (k: NDCG's cut-off) */
	int			(*term_maxima) (trainer *T, int which, int k, double *max);
	/* the terms' fixed-point sums at scale */
	int			(*term_sums) (trainer *T, int which, int k, const double *scale, int64_t *sum);
	/* every prediction := base */
	int			(*start) (trainer *T, double base);
	/* the rows drawn for tree `iteration`, the loss's gradients at the predictions, their maxima */
	int			(*gradients) (trainer *T, int64_t iteration, boost_grad_max *m);
	/*
	 * The histograms of the leaves T->small[0 .. n_slots) (slot_of: leaf ->
	 * slot) into T->thist, unpacked, after the previous level's split
	 * (prev_f, prev_j) is applied to the leaf indices; level 0 first turns
	 * the gradients into fixed point by T's plan (fixed_point_plan).
	 */
	int			(*level) (trainer *T, int level, int prev_f, int prev_j, int n_slots);
	/* the tree's leaf values (lv, 2^depth) from its last split and T->child_sums; pred += them */
	int			(*finish_tree) (trainer *T, int last_f, int last_j, float *lv);
	/*
	 * A Logloss refinement step's sums: the derivatives at pred + v[leaf]
	 * per leaf, in fixed point at scale (the last split applied first,
	 * once per tree)
	 */
	int			(*refine_sums) (trainer *T, int last_f, int last_j, const double *v, double scale, int64_t *G,
								int64_t *H);
	/*
	 * random_strength's noise scale (CatBoost's: the root mean square of
	 * the gradients over every row, drawn or not): after gradients(), whose
	 * maxima give g_all, the squares' sum in fixed point at scale
	 */
	int			(*gradient_squares) (trainer *T, double scale, int64_t *sum);
	/* optional: the open tree is dropped, its root could not split (the training ends) */
	void		(*drop_tree) (trainer *T);
	/*
	 * The forest was cut to its first forest.n_trees trees (use_best_model):
	 * the training rows' predictions become the base score's plus theirs
	 */
	int			(*trees_cut) (trainer *T);
} boost_row_ops;

/* This process's rows (boost_rows_local.c). */
extern const boost_row_ops boost_local_rows;
/* A shard's side of boosting (boost_shard.c), in the algorithm table. */
extern const gbml_shard_ops gbml_boost_shard_ops;

/* The fixed-point plan of a tree from its gradients' maxima over every row (T->n_global of them). */
void		boost_fixed_point_plan(trainer *T, const boost_grad_max *m);
/* The Newton leaf values -lr G / (H + l2) of the tree's leaves (newton_h: their H, or NULL: child_sums'). */
void		boost_newton_leaf_values(const trainer *T, const int64_t *newton_h, float *lv);
/* The open tree's class (MultiClass): the predictions it grows on and adds to are that class's. */
void		boost_select_class(trainer *T, int cls);
/*
 * A shard's MultiClass rows take the union's class count k (at least
 * their own) and base scores: its class-major arrays sized for k.
 */
int			boost_trainer_classes(trainer *T, int k, const double *base);

/* The loss and eval metric from T's parameters; the checks that need no rows. */
int			boost_resolve_loss(trainer *T, int group_state);

/* Shard side (boost_shard.c): a trainer over a shard's rows and eval rows (or NULL), up to the borders. */
int			boost_trainer_rows(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval,
							   const gbml_boost_params *p, gbml_env *env);
/*
 * ... then the coordinator's borders: the bins (the eval rows' too) and,
 * without categorical inputs, the row side's arrays (T->borders taken
 * over).  With them the categorical inputs' ids are kept (T->cat) and the
 * arrays wait for the derived features (boost_shard_cat.c), then
 * boost_trainer_arrays makes them.
 */
int			boost_trainer_bins(trainer *T, const gbml_dataset *ds, const gbml_dataset *eval, int64_t n_global);
/* Sets the threads a tree's passes over `rows` rows take, in T and its env (env->bins_per_thread; boost.c says why). */
void		boost_use_tree_threads(trainer *T, int64_t rows);
int			boost_trainer_arrays(trainer *T, const gbml_dataset *ds);
/* Room in the forest for one more tree (a shard keeps every tree the coordinator sends). */
int			boost_forest_reserve(trainer *T);
/* The open tree (forest index n_trees, its leaves set) added to the eval rows' predictions. */
int			boost_eval_add_tree(trainer *T);
/* The training rows' predictions from the base score and the forest's trees (tree t: class t mod classes). */
int			boost_rebuild_predictions(trainer *T);
/*
 * The coordinator's tree (its last split, its leaf values) applied to the
 * rows' leaves (unless T->leaves_applied: a Newton or refinement step did)
 * and predictions (boost_rows_local.c, as is boost_newton_sums).
 */
int			boost_apply_tree(trainer *T, int last_f, int last_j, const float *lv);
/* The last split applied to the rows' leaves (once); per leaf the fixed-point sum of the Newton hessians. */
int			boost_newton_sums(trainer *T, int last_f, int last_j, int64_t *sums);
/*
 * Whether T's splits are scored on the row weights (score_function L2:
 * YetiRank's default, Logloss's on request), its leaf values then taking the
 * Newton hessians' sums, not the split search's.
 */
bool		boost_structure_by_weight(const trainer *T);
/* Whether the leaf values take further Newton steps (Logloss, leaf_estimation_iterations > 1). */
bool		boost_refines_leaves(const trainer *T);
/* Those leaf values, each step's sums from T->rows->refine_sums. */
int			boost_refined_leaf_values(trainer *T, int last_f, int last_j, float *lv);
void		boost_trainer_free(trainer *T);

/*
 * A shard's categorical inputs (boost_shard_cat.c; the messages are
 * boost_shard_msg.h's BS_OP_CAT_*): a page of its kept ids and labels; its
 * queries' sizes; the derived features' section and borders taken in (the
 * eval rows binned with them; schema: the shard's rows'); a page of their
 * training bins (*filled: the rows so far).  A malformed request sets
 * r->bad and changes nothing.
 */
int			boost_cat_rows_page(const trainer *T, gbml_msg_reader *r, gbml_strbuf *reply);
int			boost_cat_group_sizes(const trainer *T, gbml_strbuf *reply);
int			boost_cat_take_inputs(trainer *T, const gbml_feature_schema *schema, gbml_msg_reader *r);
int			boost_cat_take_bins(trainer *T, gbml_msg_reader *r, int64_t *filled);

/*
 * Coordinator side (boost_shards.c): the shards' hellos, the borders from
 * their sample, T->rows; with categorical inputs T->cat begun (n_eval_here:
 * the coordinator's own eval rows) and the union's order kept for
 * boost_shards_categories.
 */
int			boost_shards_setup(trainer *T, const gbml_dataset *ds, int64_t n_eval_here);
/*
 * Categorical inputs across servers (boost_shards_cat.c): the union's ids,
 * labels and queries gathered in its training order, the derived features
 * computed as one server does (the coordinator's eval rows binned with
 * them), and sent to the shards (the model's section, the borders, every
 * training row's bins).  The order's map is freed.
 */
int			boost_shards_categories(trainer *T, const gbml_boost_ctr_params *cp);
void		boost_shards_free(trainer *T);
/* AUC of every row's (eval: every eval row's) prediction, gathered from the shards. */
int			boost_shards_auc(trainer *T, bool eval, double *out);
/* The exchanges so far, as timings members. */
void		boost_shards_traffic_json(const trainer *T, gbml_strbuf *m);

#endif
