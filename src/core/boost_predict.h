/*
 * boost_predict.h — scoring raw float rows with a forest of oblivious trees.
 *
 * An oblivious tree of depth D asks the same question at every node of a
 * level, so a row's leaf is a D-bit number: bit d = (x[feature[d]] >
 * border[d]), NaN giving 0 (an ordered comparison with NaN is false) — the
 * same rule training used on bins.  No branches: D loads, compares and
 * shift-ors, then one leaf load per tree.
 *
 * A model with categorical inputs splits on features computed from the row
 * (forest.inputs, boost_cat.h): each scorer computes the ones the trees use
 * first, then scores as above.
 *
 * The batch scorer transposes a block of rows to feature-major and scores
 * the block tree by tree, so each level's compare is one vector instruction
 * over many rows; it returns exactly the single-row result (the same
 * additions in the same order: base score, then tree 0, 1, ...).
 */
#ifndef GBML_BOOST_PREDICT_H
#define GBML_BOOST_PREDICT_H

#include <stdbool.h>
#include <stdint.h>
#include "env.h"

struct gbml_boost_inputs;

typedef struct gbml_boost_forest
{
	int			n_features;		/* the model features splits index (the row's, unless inputs) */
	int			n_trees;
	double		base_score;
	int			n_classes;		/* MultiClass: tree t scores class t mod n_classes; 0: one score */
	const double *class_base;	/* MultiClass: n_classes base scores (base_score is 0) */
	int			uniform_depth;	/* the depth of every tree, or -1 when they differ (or split per node) */
	int			node_depth;		/* the depth of every tree when all split per node, else -1 */
	const int32_t *depth;		/* n_trees */
	const int64_t *split_off;	/* n_trees + 1: tree t's splits are split_off[t] .. (a level's, or a node's) */
	const int64_t *leaf_off;	/* n_trees + 1: tree t's 2^depth leaves start at leaf_off[t] */
	const int32_t *feature;		/* per split (split_off) */
	const float *border;		/* per split */
	const float *leaf;			/* leaf values (learning rate applied) */
	/* For the batch scorer: the features the splits use, and each split's position in that list. */
	int			n_used;
	const int32_t *used_features;	/* n_used, ascending */
	const int32_t *feature_pos;	/* per level: index into used_features */
	/* Optional quantized SIMD layout for the single-row scorer (boost_predict_fast.c), or NULL. */
	const struct gbml_boost_fast *fast;
	/*
	 * How the model features come from a row (categorical inputs:
	 * boost_cat.h), or NULL: they are the row's own floats.  Every scorer
	 * here computes a used feature through it.
	 */
	const struct gbml_boost_inputs *inputs;
} gbml_boost_forest;

/*
 * Builds the quantized layout of the single-row fast path when the CPU and
 * the forest allow it (AVX-512 VBMI, one depth <= 8, <= 128 used features);
 * leaves f->fast NULL otherwise.  Free with gbml_boost_forest_free_fast.
 */
int			gbml_boost_forest_prepare_fast(gbml_boost_forest *f, gbml_env *env);
void		gbml_boost_forest_free_fast(gbml_boost_forest *f, gbml_env *env);
double		gbml_boost_forest_predict_fast(const gbml_boost_forest *f, const float *x);

/*
 * How a score is summed, the same in every scorer (scalar, batch, SIMD):
 * tree t's leaf goes into accumulator t mod 4 (in tree order), then
 * base + ((a0 + a1) + (a2 + a3)).  Four independent chains instead of one let
 * the CPU overlap the additions; the order is fixed, so scores are
 * deterministic and identical across scorers.
 */
#define GBML_BOOST_LANES 4
static inline double
gbml_boost_combine(double base, const double acc[GBML_BOOST_LANES])
{
	return base + ((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

/* Sum of the trees' leaf values (plus the base score) for one row (not for MultiClass). */
double		gbml_boost_forest_predict(const gbml_boost_forest *f, const float *x);
/* A MultiClass forest's class scores of one row: out[c] sums class c's trees (each as above, in tree order). */
void		gbml_boost_forest_class_scores(const gbml_boost_forest *f, const float *x, double *out);

/* Leaf index of an oblivious tree of depth d (split l: feature feat[l], border bord[l]) for row x:
   the scorer, the trainer's eval set and tests all use this one definition. */
static inline int
gbml_oblivious_leaf(const int32_t *feat, const float *bord, int d, const float *x)
{
	int			idx = 0;

	for (int l = 0; l < d; l++)
		idx |= (x[feat[l]] > bord[l]) << l;
	return idx;
}

/*
 * Leaf index of a tree of depth d that splits per node (grow_policy
 * Depthwise): its 2^d - 1 splits level by level, level l's node k (from
 * 2^l - 1) taken by the rows whose leaf bits so far are k; bit l as above.
 */
static inline int
gbml_node_tree_leaf(const int32_t *feat, const float *bord, int d, const float *x)
{
	int			idx = 0;

	for (int l = 0; l < d; l++)
	{
		int			s = (1 << l) - 1 + idx;

		idx |= (x[feat[s]] > bord[s]) << l;
	}
	return idx;
}

/* Whether tree t splits per node: it has more splits than levels (at depth 1 the two kinds agree). */
static inline bool
gbml_boost_tree_splits_nodes(const gbml_boost_forest *f, int t)
{
	return f->split_off[t + 1] - f->split_off[t] > f->depth[t];
}

/* Leaf index of tree t for row x: the scorers' general case, and tests. */
static inline int
gbml_boost_tree_leaf(const gbml_boost_forest *f, int t, const float *x)
{
	const int32_t *feat = f->feature + f->split_off[t];
	const float *bord = f->border + f->split_off[t];

	if (gbml_boost_tree_splits_nodes(f, t))
		return gbml_node_tree_leaf(feat, bord, f->depth[t], x);
	return gbml_oblivious_leaf(feat, bord, f->depth[t], x);
}

/*
 * Scores n rows (row i at x + i * stride floats) into out[n], parallel over
 * row blocks with env->threads threads (scratch allocated through env before
 * the parallel region).  Returns GBML_OK or an allocation error.
 */
int			gbml_boost_forest_predict_batch(const gbml_boost_forest *f, const float *x, int64_t n,
											int64_t stride, double *out, gbml_env *env);

#endif
