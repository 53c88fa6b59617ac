/*
 * boost.h — the boosted oblivious-tree model kind ("boost"): parameters,
 * and the loaded model that scoring, the bench and the tests use.
 *
 * The algorithm table itself is gbml_algorithm_boost (algorithm.h contract);
 * the trainer lives in boost.c on top of boost_quantize (bins),
 * boost_histogram (the level kernels), boost_loss (part B: gradients) and
 * boost_predict (the scorer); the loader of the model below, its dump and
 * importance in boost_model.c.
 */
#ifndef GBML_BOOST_H
#define GBML_BOOST_H

#include "algorithm.h"
#include "boost_cat.h"
#include "boost_predict.h"

/* Model sections. */
#define GBML_SECTION_BOOST_HEADER	GBML_TAG('B','S','T','H')
#define GBML_SECTION_BOOST_TREES	GBML_TAG('B','S','T','T')
#define GBML_SECTION_BOOST_BORDERS	GBML_TAG('B','S','T','B')
/* GBML_SECTION_BOOST_CATEGORICAL ('BSTC'): boost_cat.h */
#define GBML_BOOST_LAYOUT_VERSION	1

/* Choices of "eval_metric". */
typedef enum gbml_boost_eval_metric
{
	GBML_BOOST_METRIC_AUTO,
	GBML_BOOST_METRIC_NDCG,
	GBML_BOOST_METRIC_RMSE,
	GBML_BOOST_METRIC_AUC,
	GBML_BOOST_METRIC_LOGLOSS,
	GBML_BOOST_METRIC_LOSS,
	GBML_BOOST_METRIC_MULTICLASS,	/* mean -log p(label) (MultiClass loss only) */
	GBML_BOOST_METRIC_ACCURACY	/* share of rows whose most probable class is theirs (MultiClass) */
} gbml_boost_eval_metric;

typedef struct gbml_boost_params
{
	int64_t		iterations;
	double		learning_rate;
	int64_t		depth;
	double		l2_leaf_reg;
	int64_t		border_count;
	int			border_type;	/* gbml_boost_border_type; recorded in a model only when not Median */
	int64_t		border_sample_size;
	int64_t		random_seed;
	double		subsample;
	int			loss;			/* 0 = auto, else 1 + gbml_boost_loss_kind */
	int			eval_metric;	/* gbml_boost_eval_metric */
	int64_t		eval_k;
	int64_t		early_stopping_rounds;
	bool		use_best_model;
	/* categorical features (boost_ctr.h); recorded in a model only when it has one */
	int64_t		one_hot_max_size;
	double		ctr_prior;		/* NaN: the mean target */
	double		ctr_prior_weight;
	bool		ctr_counter;
	/* Newton steps of each tree's leaf values (Logloss); recorded in a model only when not 1 */
	int64_t		leaf_estimation_iterations;
	/* 0 auto, then gbml_boost_score_function_choices[]; recorded in a model only when not auto */
	int			score_function;
	/* CatBoost's split-score noise; recorded in a model only when not 0 */
	double		random_strength;
	/* gbml_boost_grow_policy; recorded in a model only when not SymmetricTree */
	int			grow_policy;
	/* Depthwise: the least hessian sum of a split's child; recorded with Depthwise only */
	double		min_child_weight;
	/* 0: ctr, 1: sets (Depthwise); recorded in a model only when sets */
	int			categorical_split;
	/* MultiClass: the number of classes (0: the largest label + 1); recorded with MultiClass only */
	int64_t		classes_count;
	/* MultiClass: the hessian's factor f in w f p (1 - p) (0: K/(K-1)); recorded only when set */
	double		multiclass_hessian_factor;
} gbml_boost_params;

/* Choices of "grow_policy": how a tree's nodes split. */
typedef enum gbml_boost_grow_policy
{
	GBML_GROW_SYMMETRIC,		/* one split per level (oblivious trees) */
	GBML_GROW_DEPTHWISE			/* one split per node, level by level to the full depth */
} gbml_boost_grow_policy;

/*
 * In the trees section, a tree's depth word with this bit set: the tree
 * splits per node, its 2^depth - 1 splits listed level by level (level l's
 * node k is where the rows whose leaf bits so far are k go).
 */
#define GBML_BOOST_TREE_NODE_SPLITS 0x10000u

extern const gbml_param_spec gbml_boost_param_specs[];
/* "auto" followed by the loss names (index = 1 + gbml_boost_loss_kind). */
extern const char *const gbml_boost_loss_choices[];

extern const gbml_algorithm gbml_algorithm_boost;

/* A loaded model: the forest plus what introspection needs. */
typedef struct gbml_boost_model
{
	gbml_boost_forest forest;
	int			loss;			/* gbml_boost_loss_kind */
	float	   *gain;			/* per level, like forest.feature */
	/* borders per feature, as trained (for model_json) */
	int		   *border_count;
	int64_t    *border_off;
	float	   *border_values;
	/* storage of the forest arrays */
	int32_t    *depth_buf;
	int64_t    *split_off_buf;
	int64_t    *leaf_off_buf;
	int32_t    *feature_buf;
	float	   *border_buf;
	float	   *leaf_buf;
	double	   *class_base;		/* MultiClass: forest.class_base's storage */
	int32_t    *used_buf;
	int32_t    *pos_buf;
	/* with categorical inputs: the model features the splits index, and the column names */
	gbml_boost_inputs inputs;
	const gbml_feature_schema *schema;	/* the scorer's (borrowed), or own_schema */
	gbml_feature_schema *own_schema;	/* parsed here when loaded without a scorer */
} gbml_boost_model;

#endif
