/*
 * boost_histogram.c — CPU kernels of one tree level: row lists per block,
 * the (gradient, hessian) histogram, sibling subtraction, leaf-index update
 * and the split search (contract in boost_histogram.h).
 *
 * The histogram loop is the hot path (a level reads every selected row's bin
 * of every feature once).  Rows are walked feature by feature inside a block
 * (the block's column of bins is contiguous and stays in L1/L2, one feature's
 * slice of the histogram too), with the block's gradients gathered once in
 * row-list order so the inner loop reads them sequentially — the "ordered
 * gradients" idea of LightGBM, and the MatrixNet seed's transposed index.
 */
#include "boost_histogram.h"
#include "rng.h"

#include <math.h>
#include <string.h>

#define MAX_SLOTS (1 << (GBML_BOOST_MAX_DEPTH - 1))

void
gbml_boost_partition_block(const uint16_t *leaf, int64_t len,
						   const int16_t *slot_of, int n_slots,
						   int64_t *seg, uint16_t *idx)
{
	/*
	 * Branch-free counting sort: rows of no slot go to a trash slot n_slots
	 * whose entries land past the real lists (idx has room for len entries),
	 * so neither loop has a data-dependent branch (half the rows are skipped
	 * at every level, in no predictable pattern).
	 */
	int64_t		pos[MAX_SLOTS + 2];

	memset(pos, 0, sizeof(int64_t) * ((size_t) n_slots + 2));
	for (int64_t r = 0; r < len; r++)
	{
		int			s = slot_of[leaf[r]];

		s = s < 0 ? n_slots : s;
		pos[s + 1]++;
	}
	seg[0] = 0;
	for (int s = 0; s <= n_slots; s++)
	{
		int64_t		c = pos[s + 1];

		pos[s] = seg[s];
		if (s < n_slots)
			seg[s + 1] = seg[s] + c;
	}
	for (int64_t r = 0; r < len; r++)
	{
		int			s = slot_of[leaf[r]];

		s = s < 0 ? n_slots : s;
		idx[pos[s]++] = (uint16_t) r;
	}
}

/*
 * Four feature columns, one slot: the inner loop.  Each row's list index,
 * gradient and hessian are loaded once for four features (the loads, not the
 * additions, bound this loop), and the four histogram slices are disjoint, so
 * the read-modify-writes of one row never wait on each other.
 */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void
hist_columns4(const uint8_t *c0, const uint8_t *c1, const uint8_t *c2, const uint8_t *c3,
			  const uint16_t *idx, int64_t k0, int64_t k1, const int64_t *G, const int64_t *H,
			  gbml_boost_hist_bin *h0, gbml_boost_hist_bin *h1, gbml_boost_hist_bin *h2,
			  gbml_boost_hist_bin *h3)
{
	for (int64_t k = k0; k < k1; k++)
	{
		int64_t		i = idx ? idx[k] : k;
		int64_t		g = G[k],
					h = H[k];
		gbml_boost_hist_bin *b0 = h0 + c0[i],
				   *b1 = h1 + c1[i],
				   *b2 = h2 + c2[i],
				   *b3 = h3 + c3[i];

		b0->g += g;
		b0->h += h;
		b1->g += g;
		b1->h += h;
		b2->g += g;
		b2->h += h;
		b3->g += g;
		b3->h += h;
	}
}

/*
 * The packed variant (constant hessian): each row adds one int64 holding
 * gradient << K plus 1, so one read-modify-write per (row, feature) carries
 * both the gradient sum and the row count.
 */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void
hist_columns4_packed(const uint8_t *c0, const uint8_t *c1, const uint8_t *c2, const uint8_t *c3,
					 const uint16_t *idx, int64_t k0, int64_t k1, const int64_t *G,
					 gbml_boost_hist_bin *h0, gbml_boost_hist_bin *h1, gbml_boost_hist_bin *h2,
					 gbml_boost_hist_bin *h3)
{
	for (int64_t k = k0; k < k1; k++)
	{
		int64_t		i = idx ? idx[k] : k;
		int64_t		g = G[k];

		h0[c0[i]].g += g;
		h1[c1[i]].g += g;
		h2[c2[i]].g += g;
		h3[c3[i]].g += g;
	}
}

/* One feature column, one slot (the features left over after groups of four). */
static void
hist_column(const uint8_t *col, const uint16_t *idx, int64_t k0, int64_t k1,
			const int64_t *G, const int64_t *H, gbml_boost_hist_bin *h)
{
	for (int64_t k = k0; k < k1; k++)
	{
		gbml_boost_hist_bin *b = h + col[idx ? idx[k] : k];

		b->g += G[k];
		if (H)
			b->h += H[k];
	}
}

void
gbml_boost_hist_block(const uint8_t *bins, int64_t len, int n_features,
					  const int64_t *feat_off, int64_t total_bins,
					  const uint16_t *idx, const int64_t *seg, int n_slots,
					  const int64_t *gq, const int64_t *hq,
					  int64_t *G, int64_t *H, gbml_boost_hist_bin *hist)
{
	int64_t		one_seg[2] = {0, len};
	bool		packed = hq == NULL;

	if (idx == NULL)
	{
		seg = one_seg;
		n_slots = 1;
		G = (int64_t *) gq;
		H = (int64_t *) hq;
	}
	else
	{
		int64_t		n = seg[n_slots];

		for (int64_t k = 0; k < n; k++)
			G[k] = gq[idx[k]];
		if (packed)
			H = NULL;
		else
			for (int64_t k = 0; k < n; k++)
				H[k] = hq[idx[k]];
	}
	{
		int			f = 0;

		for (; f + 4 <= n_features; f += 4)
		{
			const uint8_t *col = bins + (size_t) f * (size_t) len;

			for (int s = 0; s < n_slots; s++)
			{
				gbml_boost_hist_bin *hs = hist + (size_t) s * (size_t) total_bins;

				if (seg[s + 1] <= seg[s])
					continue;
				if (packed)
					hist_columns4_packed(col, col + len, col + 2 * len, col + 3 * len, idx, seg[s], seg[s + 1],
										 G, hs + feat_off[f], hs + feat_off[f + 1], hs + feat_off[f + 2],
										 hs + feat_off[f + 3]);
				else
					hist_columns4(col, col + len, col + 2 * len, col + 3 * len, idx, seg[s], seg[s + 1], G, H,
								  hs + feat_off[f], hs + feat_off[f + 1], hs + feat_off[f + 2],
								  hs + feat_off[f + 3]);
			}
		}
		for (; f < n_features; f++)
		{
			const uint8_t *col = bins + (size_t) f * (size_t) len;

			for (int s = 0; s < n_slots; s++)
			{
				if (seg[s + 1] > seg[s])
					hist_column(col, idx, seg[s], seg[s + 1], G, H,
								hist + (size_t) s * (size_t) total_bins + feat_off[f]);
			}
		}
	}
}

void
gbml_boost_hist_unpack(gbml_boost_hist_bin *hist, int64_t n, int count_bits, int64_t hess_per_row)
{
	int64_t		mask = ((int64_t) 1 << count_bits) - 1;

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		s = hist[i].g;
		int64_t		c = s & mask;

		hist[i].g = (s - c) / ((int64_t) 1 << count_bits);
		hist[i].h = c * hess_per_row;
	}
}

void
gbml_boost_hist_add(gbml_boost_hist_bin *a, const gbml_boost_hist_bin *b, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
	{
		a[i].g += b[i].g;
		a[i].h += b[i].h;
	}
}

void
gbml_boost_hist_sub(gbml_boost_hist_bin *out, const gbml_boost_hist_bin *parent,
					const gbml_boost_hist_bin *child, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
	{
		out[i].g = parent[i].g - child[i].g;
		out[i].h = parent[i].h - child[i].h;
	}
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void
gbml_boost_leaf_update(const uint8_t *col, int64_t len, int border_index, int level,
					   uint16_t *leaf)
{
	uint8_t		b = (uint8_t) border_index;

	for (int64_t r = 0; r < len; r++)
		leaf[r] |= (uint16_t) ((col[r] > b) << level);
}

static inline double
leaf_term(int64_t g, int64_t h, double isg, double ish, double l2)
{
	double		G = (double) g * isg;
	double		den = (double) h * ish + l2;

	return den > 0 ? G * G / den : 0.0;
}

void
gbml_boost_leaf_update_nodes(const uint8_t *block, int64_t len, int level, const int32_t *feature,
							 const int32_t *border_index, const uint8_t *set_mask, uint16_t *leaf)
{
	uint16_t	node_mask = (uint16_t) ((1u << level) - 1);

	for (int64_t r = 0; r < len; r++)
	{
		int			k = leaf[r] & node_mask;
		uint8_t		bin = block[(size_t) feature[k] * (size_t) len + (size_t) r];

		leaf[r] |= (uint16_t) (gbml_boost_bin_goes_right(bin, border_index[k], set_mask ?
														  set_mask + (size_t) k * GBML_BOOST_SET_MASK_BYTES : NULL)
							   << level);
	}
}

double
gbml_boost_leaves_score(const gbml_boost_hist_bin *leaf_sums, int n_leaves,
						double inv_scale_g, double inv_scale_h, double l2)
{
	double		s = 0;

	for (int l = 0; l < n_leaves; l++)
		s += leaf_term(leaf_sums[l].g, leaf_sums[l].h, inv_scale_g, inv_scale_h, l2);
	return s;
}

void
gbml_boost_best_split(const gbml_boost_hist_bin *hist, const gbml_boost_hist_bin *leaf_sums,
					  int n_leaves, int n_features,
					  const int64_t *feat_off, int64_t total_bins, const int *n_borders,
					  double inv_scale_g, double inv_scale_h, double l2, int threads,
					  int64_t min_child_h, const gbml_boost_split_noise *noise,
					  gbml_boost_split *feature_best, gbml_boost_split *best)
{
	bool		noisy = noise != NULL && noise->sd > 0;

	/*
	 * Small searches (the usual case: ~100 features x 32 leaves x 33 bins is
	 * a millisecond) stay on one thread: a parallel region costs more than it
	 * saves when the cores are shared.
	 */
	int64_t		work = (int64_t) n_leaves * total_bins;

#pragma omp parallel for schedule(dynamic, 4) num_threads(threads) if (work > (1 << 22))
	for (int f = 0; f < n_features; f++)
	{
		int			nb = n_borders[f];
		double		score[256];
		bool		one_sided[256];
		gbml_boost_split fb = {-1, -1, -INFINITY, -INFINITY};

		if (nb > 0)
		{
			for (int j = 0; j < nb; j++)
			{
				score[j] = 0;
				one_sided[j] = false;
			}
			for (int l = 0; l < n_leaves; l++)
			{
				const gbml_boost_hist_bin *h = hist + (size_t) l * (size_t) total_bins + feat_off[f];
				int64_t		tg = leaf_sums[l].g,
							th = leaf_sums[l].h,
							lg = 0,
							lh = 0;

				if (th == 0 && tg == 0)
					continue;	/* an empty leaf adds 0 whatever the split */
				for (int j = 0; j < nb; j++)
				{
					lg += h[j].g;
					lh += h[j].h;
					score[j] += leaf_term(lg, lh, inv_scale_g, inv_scale_h, l2) +
						leaf_term(tg - lg, th - lh, inv_scale_g, inv_scale_h, l2);
					if (min_child_h > 0 && (lh < min_child_h || th - lh < min_child_h))
						one_sided[j] = true;
				}
			}
			{
				gbml_rng	rng;

				if (noisy)
					gbml_rng_stream(&rng, noise->seed, (uint64_t) f);
				for (int j = 0; j < nb; j++)
				{
					double		pick = noisy ? score[j] + noise->sd * gbml_rng_normal(&rng) : score[j];

					if (!one_sided[j] && pick > fb.pick)
					{
						fb.score = score[j];
						fb.pick = pick;
						fb.border = j;
						fb.feature = f;
					}
				}
			}
		}
		feature_best[f] = fb;
	}
	best->feature = -1;
	best->border = -1;
	best->score = best->pick = -INFINITY;
	for (int f = 0; f < n_features; f++)
		if (feature_best[f].feature >= 0 && feature_best[f].pick > best->pick)
			*best = feature_best[f];
}
