/*
 * boost_node_split.c — the split side of Depthwise trees (grow_policy
 * Depthwise): each leaf of a level takes its own split, the best ordinal
 * (feature, border) or, for a categorical column split as sets
 * (categorical_split sets), the best set of its categories; a leaf with no
 * split of gain sends every row left.  The sums are the level's exact
 * histograms (boost.c grows them as for symmetric trees), so the choice is
 * the same bits on any thread count.
 */
#include "boost_internal.h"
#include "rng.h"

#include <math.h>
#include <string.h>

/*
 * One leaf's best split of set feature f (a slot column, categorical_split
 * sets), as XGBoost splits categories: every bin (slot) ordered by its
 * Newton value G / (H + l2) in the leaf (ties: the lower bin), and the best
 * of the splits "the first i of them go right" whose children each keep
 * min_h of hessian.  As in XGBoost, a slot with less than min_h of hessian
 * in the leaf has value 0: a category with a few rows there is not placed
 * by their noise (without this, churn's 51 states overfit: test logloss
 * 0.20 against 0.157), and one with none (the unseen slot among them) goes
 * with the side whose values are nearer 0, not an arbitrary one.  Exact
 * integer sums, a fixed order: the same bits on any thread count.  With
 * random_strength, each candidate is compared by its score plus a normal
 * draw, as the ordinal ones are (the stream of (noise seed, f), a draw per
 * candidate in order; the set features have no ordinal candidates, so the
 * stream is theirs).  best->feature -1 when there is none; else mask holds
 * the bins going right.
 */
static void
best_set_split(const trainer *T, int l, const gbml_boost_hist_bin *leaf_sum, int f, int64_t min_h,
			   const gbml_boost_split_noise *noise, gbml_boost_split *best, uint8_t *mask)
{
	const gbml_boost_hist_bin *h = T->hist_cur + (size_t) l * (size_t) T->total_bins + T->feat_off[f];
	int			nb = T->borders.count[f] + 1,
				best_i = -1;
	int			order[GBML_BOOST_MAX_BORDERS + 1];
	double		ratio[GBML_BOOST_MAX_BORDERS + 1];
	gbml_boost_hist_bin child[2] = {{0, 0}, {0, 0}};
	bool		noisy = noise != NULL && noise->sd > 0;
	gbml_rng	rng;

	for (int b = 0; b < nb; b++)
	{
		int			i = b;

		/* (min_h >= 1, so a counted slot's denominator is positive) */
		ratio[b] = h[b].h < min_h ? 0.0 : ((double) h[b].g / T->sg) / ((double) h[b].h / T->sh + T->l2);
		/* insertion by (ratio, bin): at most 256 bins */
		while (i > 0 && ratio[order[i - 1]] > ratio[b])
		{
			order[i] = order[i - 1];
			i--;
		}
		order[i] = b;
	}
	best->feature = best->border = -1;
	best->score = best->pick = -INFINITY;
	if (noisy)
		gbml_rng_stream(&rng, noise->seed, (uint64_t) f);
	for (int i = 0; i + 1 < nb; i++)
	{
		double		score,
					pick;
		/* drawn for every candidate, taken or not: the stream does not depend on which are */
		double		draw = noisy ? noise->sd * gbml_rng_normal(&rng) : 0.0;

		child[1].g += h[order[i]].g;
		child[1].h += h[order[i]].h;
		child[0].g = leaf_sum->g - child[1].g;
		child[0].h = leaf_sum->h - child[1].h;
		if (child[1].h < min_h || child[0].h < min_h)
			continue;
		score = gbml_boost_leaves_score(child, 2, 1.0 / T->sg, 1.0 / T->sh, T->l2);
		pick = score + draw;
		if (pick > best->pick)
		{
			best->score = score;
			best->pick = pick;
			best_i = i;
		}
	}
	if (best_i < 0)
		return;
	best->feature = f;
	best->border = GBML_BOOST_SET_SPLIT;
	memset(mask, 0, GBML_BOOST_SET_MASK_BYTES);
	for (int i = 0; i <= best_i; i++)
		mask[order[i] >> 3] |= (uint8_t) (1u << (order[i] & 7));
}

/* Split s of the open tree := the set split of feature f (mask: the bins going right), and its children's sums. */
static void
set_set_split(trainer *T, size_t s, int l, const gbml_boost_hist_bin *leaf_sum, int f, const uint8_t *mask,
			  double gain, gbml_boost_hist_bin *left, gbml_boost_hist_bin *right)
{
	forest_builder *F = &T->forest;
	const gbml_boost_hist_bin *h = T->hist_cur + (size_t) l * (size_t) T->total_bins + T->feat_off[f];

	F->feature[s] = f;
	F->border_index[s] = GBML_BOOST_SET_SPLIT;
	F->border[s] = 0.5f;		/* the set feature's border, once the model is written */
	F->gain[s] = gbml_boost_stored_gain(gain);
	memcpy(F->set_mask + s * GBML_BOOST_SET_MASK_BYTES, mask, GBML_BOOST_SET_MASK_BYTES);
	right->g = right->h = 0;
	for (int b = 0; b <= T->borders.count[f]; b++)
		if (gbml_boost_set_has(mask, b))
		{
			right->g += h[b].g;
			right->h += h[b].h;
		}
	left->g = leaf_sum->g - right->g;
	left->h = leaf_sum->h - right->h;
}

/*
 * The best split of leaf l of the level: the ordinal search over every
 * feature but the set ones, then each set feature's (best_set_split); the
 * higher pick wins (the ordinal one on a tie).  mask: the winner's, when a
 * set.
 */
static void
best_leaf_split(trainer *T, int l, const gbml_boost_hist_bin *leaf_sum, int64_t min_h,
				const gbml_boost_split_noise *noise, gbml_boost_split *best, uint8_t *mask)
{
	gbml_boost_split cand;
	uint8_t		cand_mask[GBML_BOOST_SET_MASK_BYTES];

	gbml_boost_best_split(T->hist_cur + (size_t) l * (size_t) T->total_bins, leaf_sum, 1, T->n_features,
						  T->feat_off, T->total_bins, T->is_set ? T->ordinal_count : T->borders.count,
						  1.0 / T->sg, 1.0 / T->sh, T->l2, T->threads, min_h, noise, T->feature_best, best);
	for (int f = 0; T->is_set != NULL && f < T->n_features; f++)
		if (T->is_set[f])
		{
			best_set_split(T, l, leaf_sum, f, min_h, noise, &cand, cand_mask);
			if (cand.feature >= 0 && cand.pick > best->pick)
			{
				*best = cand;
				memcpy(mask, cand_mask, GBML_BOOST_SET_MASK_BYTES);
			}
		}
}

/*
 * Depthwise: each leaf of the level takes its own best split over the
 * borders that leave each child at least min_child_weight of hessian (and
 * rows), when its score beats the leaf unsplit (no split: every row goes
 * left, the right child stays empty, with leaf value 0).  Each leaf's noise
 * draws from a stream of its own.  At the root this is the tree's first
 * split; false when the root cannot split.
 */
bool
boost_choose_node_splits(trainer *T, int level, const gbml_boost_hist_bin *leaf_sums,
						 const gbml_boost_split_noise *noise)
{
	forest_builder *F = &T->forest;
	int			n_leaves = 1 << level;
	size_t		root = boost_split_index(F, F->n_trees, 0, 0);
	/* min_child_weight in fixed point, at least one unit: a child with no rows is never a split's */
	int64_t		min_h = (int64_t) fmin(ceil(T->p->min_child_weight * T->sh), 4.0e18);

	if (min_h < 1)
		min_h = 1;
	for (int l = 0; l < n_leaves; l++)
	{
		size_t		s = boost_split_index(F, F->n_trees, level, l);
		gbml_boost_split best = {-1, -1, -INFINITY, -INFINITY};
		uint8_t		mask[GBML_BOOST_SET_MASK_BYTES];
		gbml_boost_split_noise leaf_noise = *noise;
		uint64_t	x = noise->seed ^ ((uint64_t) (l + 1) * 0x9e3779b97f4a7c15ULL);
		double		unsplit = gbml_boost_leaves_score(leaf_sums + l, 1, 1.0 / T->sg, 1.0 / T->sh, T->l2);
		gbml_boost_hist_bin *c0 = &T->child_sums[l],
				   *c1 = &T->child_sums[l | (1 << level)];

		leaf_noise.seed = gbml_splitmix64(&x);
		if (leaf_sums[l].h > 0)
			best_leaf_split(T, l, &leaf_sums[l], min_h, &leaf_noise, &best, mask);
		if (best.feature >= 0 && best.score > unsplit && best.border == GBML_BOOST_SET_SPLIT)
		{
			set_set_split(T, s, l, &leaf_sums[l], best.feature, mask, best.score - unsplit, c0, c1);
			continue;
		}
		if (best.feature >= 0 && best.score > unsplit)
		{
			boost_set_split(T, s, best.feature, best.border, best.score - unsplit);
			boost_leaf_split_sums(T, l, &leaf_sums[l], best.feature, best.border, c0, c1);
			continue;
		}
		if (level == 0)
			return false;		/* nothing can split the root */
		/* unsplit: every row left (no bin is above GBML_BOOST_NO_SPLIT), on a feature the tree uses */
		F->feature[s] = F->feature[root];
		F->border_index[s] = GBML_BOOST_NO_SPLIT;
		F->border[s] = INFINITY;
		F->gain[s] = 0;
		*c0 = leaf_sums[l];
		c1->g = c1->h = 0;
	}
	return true;
}
