/*
 * boost_shard_msg.h — boosting's messages between a coordinator and its
 * shards (boost_shards.c, boost_shard.c): the request codes and what the
 * requests carry; the reader and writers are shard_msg.h's.
 *
 * After the borders, every request that reads the predictions (TERM_MAX,
 * TERM_SUMS, GRADIENTS) begins with what changed them since the last one:
 *     i64 BS_PENDING_NONE
 *     i64 BS_PENDING_BASE, f64 base score          (before the first tree)
 *     i64 BS_PENDING_TREE, the last level's split,
 *         f32 x 2^depth leaf values                (after each tree's last level)
 *     i64 BS_PENDING_DROPPED                       (a tree whose root could not split)
 *     i64 BS_PENDING_CUT, i64 trees kept           (use_best_model; an open tree is dropped)
 * so a tree costs depth + 1 round trips: its gradients, then one per level
 * (YetiRank one more: its leaves' Newton hessians after the last split;
 * random_strength one more after the gradients: their squares' sum).
 * A level's split ("split" below): i64 feature, i64 border index; with
 * grow_policy Depthwise i64 -1, i64 -1, then the level's 2^level nodes'
 * i32 features and i32 border indices (GBML_BOOST_NO_SPLIT: unsplit;
 * GBML_BOOST_SET_SPLIT: a set split, on a slot column), then each set
 * split's GBML_BOOST_SET_MASK_BYTES mask in node order.
 * The hello: the head (shard_msg.h), one byte per feature (has a missing
 * value), i64 the shard's query count (0 without group ids), i64 its eval
 * rows and i64 their queries (eval_fraction's, held out by the shard).
 * TERM_MAX and TERM_SUMS of a metric's kind with BOOST_TERMS_EVAL are the
 * eval rows' (after the pending tree, which the shard adds to them too).
 */
#ifndef GBML_BOOST_SHARD_MSG_H
#define GBML_BOOST_SHARD_MSG_H

#include "shard_msg.h"

#define BS_SHARD_MAGIC 0x67626273u	/* "gbbs" */

typedef enum bs_shard_op
{
	BS_OP_HASHES = 1,			/* i64 offset, i64 count -> a page of row hashes (shard_order.h) */
	BS_OP_SAMPLE,				/* i64 count, i64 x count local rows (ascending) -> f32 x count x d */
	BS_OP_BORDERS,				/* i64 n_global, per feature: i64 count, i64 has_missing, f32 x count -> () */
	BS_OP_TERM_MAX,				/* pending, i64 which, i64 k -> f64 x boost_terms_count(which) (max) */
	BS_OP_TERM_SUMS,			/* pending, i64 which, i64 k, f64 x count scales -> i64 x count (sum) */
	BS_OP_GRADIENTS,			/* pending, i64 iteration -> f64 g, g_all, h, newton_h, -hmin, hmax (max) */
	BS_OP_LEVEL,				/* i64 level, the previous level's split (level 0: i64, i64 unused),
								 * i64 slots, i64 x slots leaves,
								 * at level 0 f64 x 5 the union's maxima -> per bin of each slot i64 G,
								 * i64 H, or with packed histograms one i64 G 2^K + count (sum) */
	BS_OP_GROUPS,				/* () -> i64 count, i64 x count: the shard's query ids, ascending */
	BS_OP_GROUP_INDEX,			/* i64 union's queries, i64 count, i64 x count: each query's index -> () */
	BS_OP_NEWTON,				/* the last level's split -> i64 x 2^depth: Newton hessians per leaf (sum) */
	BS_OP_RANKS,				/* a page of the rows' global indices (shard_order.h) -> () */
	BS_OP_REFINE,				/* the last level's split, f64 scale, f64 x 2^depth leaf values
								 * -> i64 x 2^depth G, i64 x 2^depth H: a Logloss refinement step (sum) */
	BS_OP_GRADIENT_SQUARES,		/* f64 scale -> i64 the gradients' squares of every row at scale (sum):
								 * random_strength */
	BS_OP_SCORES,				/* pending, i64 eval (1: the eval rows), i64 first, i64 count -> i64 m,
								 * m x (f64 prediction, f32 label, f32 weight): rows first .. first + m - 1
								 * of this shard's (m < count: its last), for AUC */
	/*
	 * Categorical inputs (boost_shards_cat.c), after the borders: the kept
	 * ids and labels of training rows first .. first + m - 1 (m < count: the
	 * last), each input's m ids then the m labels; the queries' sizes; the
	 * derived features (the model's 'BSTC' section, their borders); their
	 * training bins, a page of rows, derived feature by feature.
	 */
	BS_OP_CAT_ROWS,				/* i64 first, i64 count -> i64 m, f32 x m x (inputs + 1) */
	BS_OP_CAT_GROUP_SIZES,		/* () -> i64 count, i64 x count: each query's rows, in order */
	BS_OP_CAT_INPUTS,			/* i64 len, len bytes, i64 n_derived, per derived feature i64 count,
								 * f32 x count -> () */
	BS_OP_CAT_BINS,				/* i64 first, i64 count, u8 x n_derived x count -> () */
	/*
	 * subsample with group ids and a pointwise loss (the rows drawn by their
	 * index in the union's training order, a query possibly on several
	 * shards): pages of (group key, hash, content hash) in the shard's
	 * training order (shard_order.h), then its rows' indices (BS_OP_RANKS)
	 */
	BS_OP_GROUP_HASHES			/* i64 offset, i64 count -> i64 count, u64 x 3 x count */
} bs_shard_op;

typedef enum bs_pending
{
	BS_PENDING_NONE = 0,
	BS_PENDING_BASE,
	BS_PENDING_TREE,
	BS_PENDING_DROPPED,			/* the open tree's root could not split: no tree */
	BS_PENDING_CUT				/* use_best_model: i64 trees kept (whole iterations); an open tree goes */
} bs_pending;

/* Rows a SCORES page carries at most (16 bytes each: 64 MB). */
#define BS_SCORES_PAGE_ROWS ((int64_t) 4 << 20)

/* Gradient maxima in a reply or a level-0 request. */
#define BS_GRAD_MAXIMA 6

#endif
