/*
 * boost_histogram.h — the hot path of boosted oblivious-tree training: the
 * per-level histogram of (gradient, hessian) sums over (leaf, feature, bin),
 * the row bookkeeping around it, and the split search on the histograms.
 *
 * These are plain-C kernels over simple arrays so that the CUDA backend can
 * provide the same entry points (the MatrixNet seed's shared-memory
 * histograms) and the trainer in boost.c picks one or the other.
 *
 * Fixed-point sums.  Gradients and hessians enter the histograms as int64
 * fixed-point numbers (scaled per tree so that no sum over the whole data set
 * can overflow: about 40 significant bits per row; see the packed mode below
 * for constant-hessian losses).  Integer addition is
 * associative, so per-thread histograms merged in any order, and siblings
 * obtained by subtraction (parent - smaller child), are exact and give the
 * same bits whatever the thread count or block schedule: determinism for free,
 * and no precision lost to the subtraction trick.
 *
 * Histogram layout: hist[slot][total_bins], feature f's bins at
 * feat_off[f] .. feat_off[f] + n_borders[f] (n_borders[f] + 1 bins).
 */
#ifndef GBML_BOOST_HISTOGRAM_H
#define GBML_BOOST_HISTOGRAM_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GBML_BOOST_MAX_DEPTH 10
/* Leaf index flag of a row left out of this tree by subsampling (leaves are < 1024). */
#define GBML_BOOST_UNSAMPLED 0x400u
#define GBML_BOOST_LEAF_MASK 0x3ffu
/* Entries of a slot_of table: indexed by a row's leaf value, flag included. */
#define GBML_BOOST_SLOT_TABLE 0x800

/* Smallest K with n < 2^K. */
static inline int
gbml_boost_bits_for(int64_t n)
{
	int			k = 0;

	while (k < 63 && ((int64_t) 1 << k) <= n)
		k++;
	return k;
}

/*
 * The fixed-point scale of a sum over n terms of magnitude at most max_abs:
 * the power of two 2^e with n * max_abs * 2^e <= 2^62, so no such sum can
 * overflow (1 when max_abs is 0 or not finite).  n is the whole data's
 * row count, on a shard too: then shards' partial sums add up to the bits
 * one server gets.
 */
static inline double
gbml_boost_fixed_scale(double max_abs, int64_t n)
{
	int			k;

	if (!(max_abs > 0) || !isfinite(max_abs))
		return 1.0;
	frexp(max_abs, &k);			/* max_abs < 2^k */
	return ldexp(1.0, 62 - k - gbml_boost_bits_for(n));
}

typedef struct gbml_boost_hist_bin
{
	int64_t		g;
	int64_t		h;
} gbml_boost_hist_bin;

/*
 * Row lists of one block for the slots being histogrammed: rows r with
 * slot_of[leaf[r]] >= 0 (slot_of has GBML_BOOST_SLOT_TABLE entries, -1 for
 * leaves not histogrammed and for every unsampled value), grouped by slot,
 * row order inside a slot.  seg[s] .. seg[s+1] delimits slot s in idx.
 */
void		gbml_boost_partition_block(const uint16_t *leaf, int64_t len,
									   const int16_t *slot_of, int n_slots,
									   int64_t *seg, uint16_t *idx);

/*
 * Adds one block's rows into hist (n_slots x total_bins):
 * for every feature f and slot s, for k in seg[s] .. seg[s+1]:
 *   hist[s][feat_off[f] + bins[f*len + idx[k]]] += (gq[idx[k]], hq[idx[k]]).
 * idx == NULL means one slot holding every row of the block in order.
 * G and H are scratch of len entries (the block's gradients gathered in idx
 * order once, then streamed for every feature).
 *
 * Packed mode, hq == NULL (losses whose hessian is the same for every row):
 * gq holds gradient * 2^K + 1, only the .g member accumulates — one
 * read-modify-write per (row, feature) instead of two — and
 * gbml_boost_hist_unpack() turns the sums back into (gradient, hessian)
 * before any subtraction or split search.  The sums are exact as long as
 * the rows' gradients fit in 63 - 2K bits (the trainer's choice of scale).
 */
void		gbml_boost_hist_block(const uint8_t *bins, int64_t len, int n_features,
								  const int64_t *feat_off, int64_t total_bins,
								  const uint16_t *idx, const int64_t *seg, int n_slots,
								  const int64_t *gq, const int64_t *hq,
								  int64_t *G, int64_t *H, gbml_boost_hist_bin *hist);

/* Packed sums -> (G, count * hess_per_row); count_bits = K. */
void		gbml_boost_hist_unpack(gbml_boost_hist_bin *hist, int64_t n, int count_bits,
								   int64_t hess_per_row);

/* hist_a[i] += hist_b[i] for n bins (merging per-thread histograms). */
void		gbml_boost_hist_add(gbml_boost_hist_bin *a, const gbml_boost_hist_bin *b, int64_t n);
/* out[i] = parent[i] - child[i] (the sibling of a histogrammed child). */
void		gbml_boost_hist_sub(gbml_boost_hist_bin *out, const gbml_boost_hist_bin *parent,
								const gbml_boost_hist_bin *child, int64_t n);

/* leaf[r] |= (col[r] > border_index) << level: the row goes right when x > border. */
void		gbml_boost_leaf_update(const uint8_t *col, int64_t len, int border_index, int level,
								   uint16_t *leaf);

/*
 * The same for a level whose nodes split differently (grow_policy
 * Depthwise): the row's node is its leaf index so far (the low `level`
 * bits), and node k splits on (feature[k], border_index[k]) of the block's
 * feature-major bins (len rows).  A node that does not split has border
 * index GBML_BOOST_NO_SPLIT: no bin is above it, so every row goes left.
 */
#define GBML_BOOST_NO_SPLIT 255
/*
 * A node that splits its feature's bins as a set (categorical_split sets)
 * has border index GBML_BOOST_SET_SPLIT and a mask of the bins that go
 * right, GBML_BOOST_SET_MASK_BYTES a node in set_mask (NULL: no set node).
 */
#define GBML_BOOST_SET_SPLIT (-1)
#define GBML_BOOST_SET_MASK_BYTES 32
static inline int
gbml_boost_set_has(const uint8_t *mask, int bin)
{
	return (mask[bin >> 3] >> (bin & 7)) & 1;
}

/*
 * Whether a row with this bin goes right at a node split (border_index,
 * mask: the node's set, or NULL): the one rule of the trainer's passes.
 */
static inline int
gbml_boost_bin_goes_right(uint8_t bin, int32_t border_index, const uint8_t *mask)
{
	if (mask != NULL && border_index == GBML_BOOST_SET_SPLIT)
		return gbml_boost_set_has(mask, bin);
	return (int) bin > border_index;	/* GBML_BOOST_NO_SPLIT is above every bin */
}
void		gbml_boost_leaf_update_nodes(const uint8_t *block, int64_t len, int level, const int32_t *feature,
										 const int32_t *border_index, const uint8_t *set_mask, uint16_t *leaf);

typedef struct gbml_boost_split
{
	int			feature;		/* -1 when no feature has a border */
	int			border;			/* index into the feature's borders */
	double		score;			/* sum over children of G^2 / (H + l2) */
	double		pick;			/* score plus the split's noise: what the search compares */
} gbml_boost_split;

/*
 * CatBoost's random_strength: the search compares each candidate's score
 * plus a normal draw of standard deviation sd, feature f's borders drawing
 * in turn from stream (seed, f); sd 0 (or no noise at all): plain scores.
 */
typedef struct gbml_boost_split_noise
{
	double		sd;
	uint64_t	seed;
} gbml_boost_split_noise;

/*
 * Best (feature, border) for a level: the split maximising the sum over all
 * n_leaves leaves of G_L^2/(H_L + l2) + G_R^2/(H_R + l2), with the sums
 * de-scaled by inv_scale_g / inv_scale_h.  leaf_sums holds each leaf's
 * totals (the same for every feature: every row has a bin in each).  Ties go
 * to the lowest feature, then the lowest border.  feature_best is scratch of
 * n_features entries.  Parallel over features (each feature's score is
 * computed in a fixed order).  With min_child_h > 0, a border that leaves
 * either side of a leaf with a hessian sum (fixed point) below it is no
 * candidate (one leaf's own split, grow_policy Depthwise, min_child_weight);
 * best->feature is -1 when none is left.
 */
void		gbml_boost_best_split(const gbml_boost_hist_bin *hist, const gbml_boost_hist_bin *leaf_sums,
								  int n_leaves, int n_features,
								  const int64_t *feat_off, int64_t total_bins, const int *n_borders,
								  double inv_scale_g, double inv_scale_h, double l2, int threads,
								  int64_t min_child_h, const gbml_boost_split_noise *noise,
								  gbml_boost_split *feature_best, gbml_boost_split *best);

/* Sum over leaves of G^2/(H + l2) before the split (for the split's gain). */
double		gbml_boost_leaves_score(const gbml_boost_hist_bin *leaf_sums, int n_leaves,
									double inv_scale_g, double inv_scale_h, double l2);

#endif
