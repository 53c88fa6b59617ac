/*
 * boost_rows_local.c — the boosting trainer's row side for this process's
 * rows (boost_row_ops boost_local_rows; boost_internal.h says what the row
 * side is): the row sampling per tree, the gradients and their maxima, the
 * fixed-point gradients, the level passes (histograms on the CPU or the
 * GPU, the splits applied to the rows' leaf indices), the Newton hessians'
 * and the Logloss refinement's per-leaf sums, the leaf values added to the
 * predictions, and the exact term sums of the base score and the metrics.
 * The driver and the split side are boost.c; a shard runs this file's
 * table on its rows (boost_shard.c).
 */
#include "boost_internal.h"
#include "boost_bins_walk.h"
#include "rng.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/*
 * Unit u's uniform for tree `iteration`: the u-th output of a SplitMix64
 * sequence started from (seed, iteration), computed directly (its state
 * after u steps is start + u x the golden increment), so a shard draws its
 * own rows' without walking the union's.
 */
static inline double
unit_uniform(uint64_t start, int64_t u)
{
	uint64_t	x = start + (uint64_t) u * 0x9e3779b97f4a7c15ULL;

	return (double) (gbml_splitmix64(&x) >> 11) * 0x1.0p-53;
}

/*
 * Row sampling for one tree: leaf[r] = 0 for a drawn row, GBML_BOOST_UNSAMPLED
 * otherwise.  Whole groups are drawn for ranking losses.  One uniform per
 * row (per query) of the whole training, by its index in the training
 * order: a shard draws at its rows' global indices (row_rank) or its
 * queries' (group_global), so its rows are drawn as one server draws them,
 * at a cost of its own rows; when no row of the union is drawn, every row
 * is (found by looking for the first drawn index: about 1 / subsample
 * uniforms).  Returns the number of this process's rows drawn.
 */
static int64_t
draw_rows(trainer *T, int64_t iteration)
{
	int64_t		n = T->train.n,
				drawn = 0;
	double		q = T->p->subsample;
	bool		by_group = gbml_boost_loss_is_ranking(T->kind) && T->train.n_groups > 0;
	const int64_t *mine = by_group ? T->train.group_global : T->row_rank;
	int64_t		units = by_group ? T->n_groups_global : T->n_global,
				n_mine = by_group ? T->train.n_groups : n;
	uint64_t	x = ((uint64_t) T->p->random_seed ^ 0x7375627361ULL) + (uint64_t) iteration * 0xd1342543de82ef95ULL,
				start = gbml_splitmix64(&x);
	bool		any = false;

	if (q >= 1.0)
	{
		memset(T->leaf, 0, sizeof(uint16_t) * (size_t) n);
		return n;
	}
	for (int64_t u = 0; u < units && !any; u++)
		any = unit_uniform(start, u) < q;
	if (!any)
	{
		/* tiny data and a small share: take every row rather than an empty tree */
		memset(T->leaf, 0, sizeof(uint16_t) * (size_t) n);
		return n;
	}
	for (int64_t at = 0; at < n_mine; at++)
	{
		uint16_t	v = unit_uniform(start, mine ? mine[at] : at) < q ? 0 : GBML_BOOST_UNSAMPLED;

		if (by_group)
		{
			for (int64_t r = T->train.group_off[at]; r < T->train.group_off[at + 1]; r++)
				T->leaf[r] = v;
			if (v == 0)
				drawn += T->train.group_off[at + 1] - T->train.group_off[at];
		}
		else
		{
			T->leaf[at] = v;
			drawn += v == 0;
		}
	}
	return drawn;
}

/* The maxima of this tree's gradients over the drawn rows of this process (one parallel reduction). */
static void
local_gradient_maxima(trainer *T, boost_grad_max *m)
{
	int64_t		n = T->train.n;
	double		mg = 0,
				mg_all = 0,
				mh = 0,
				mnh = 0,
				hmin = INFINITY,
				hmax = -INFINITY;

#pragma omp parallel for reduction(max:mg, mg_all, mh, mnh, hmax) reduction(min:hmin) schedule(static) num_threads(T->threads)
	for (int64_t r = 0; r < n; r++)
	{
		double		h = T->hess[r];

		if (fabs(T->grad[r]) > mg_all)
			mg_all = fabs(T->grad[r]);
		if (T->leaf[r] & GBML_BOOST_UNSAMPLED)
			continue;
		if (fabs(T->grad[r]) > mg)
			mg = fabs(T->grad[r]);
		if (fabs(h) > mh)
			mh = fabs(h);
		if (T->newton_hess && T->newton_hess[r] > mnh)
			mnh = T->newton_hess[r];
		if (h < hmin)
			hmin = h;
		if (h > hmax)
			hmax = h;
	}
	m->g = mg;
	m->g_all = mg_all;
	m->h = mh;
	m->newton_h = mnh;
	m->hmin = hmin;
	m->hmax = hmax;
}

/* This process's gradients to fixed point by T's plan; unsampled rows get 0. */
static void
local_fixed_point(trainer *T)
{
	int64_t		n = T->train.n;
	double		sg = T->sg,
				sh = T->sh;
	int			K = T->count_bits;

#pragma omp parallel for schedule(static) num_threads(T->threads)
	for (int64_t r = 0; r < n; r++)
	{
		if (T->leaf[r] & GBML_BOOST_UNSAMPLED)
		{
			T->gq[r] = 0;
			T->hq[r] = 0;
		}
		else if (T->packed)
			T->gq[r] = (int64_t) llrint(T->grad[r] * sg) * ((int64_t) 1 << K) + 1;
		else
		{
			T->gq[r] = (int64_t) llrint(T->grad[r] * sg);
			T->hq[r] = (int64_t) llrint(T->hess[r] * sh);
		}
	}
}

#define MERGE_BINS 4096			/* bins per task of the per-thread histogram merge */

/*
 * Level `level` of the open tree applied to one block's leaf indices (bins
 * feature-major, len rows): its one split (feature, border), which the row
 * side is handed (on a shard the forest is the coordinator's), or with
 * Depthwise (this process only) its nodes' splits from the forest.
 */
static void
apply_level_split(const trainer *T, int level, int feature, int border, const uint8_t *block, int64_t len,
				  uint16_t *leaf)
{
	const forest_builder *F = &T->forest;

	if (F->node_splits)
	{
		size_t		s = boost_split_index(F, F->n_trees, level, 0);

		gbml_boost_leaf_update_nodes(block, len, level, F->feature + s, F->border_index + s,
									 F->has_sets ? F->set_mask + s * GBML_BOOST_SET_MASK_BYTES : NULL, leaf);
	}
	else
		gbml_boost_leaf_update(block + (size_t) feature * (size_t) len, len, border, level, leaf);
}

/* What one level's pass over the blocks needs (level_blocks). */
typedef struct level_arg
{
	trainer    *T;
	int			level;
	bool		identity;
	int			n_slots;
	int			prev_feature;
	int			prev_border;
} level_arg;

/* One run of blocks of the level pass: into each thread's own histograms. */
static void
level_blocks(void *arg, const uint8_t *const *blk, int64_t b0, int64_t b1)
{
	const level_arg *a = arg;
	trainer    *T = a->T;
	int64_t		tb = T->total_bins;

#pragma omp parallel num_threads(T->threads)
	{
		int			t = 0;

#ifdef _OPENMP
		t = omp_get_thread_num();
#endif
		gbml_boost_hist_bin *h = T->thist + (size_t) t * (size_t) T->max_slots * (size_t) tb;
		uint16_t   *idx = T->tidx + (size_t) t * BLOCK_ROWS;
		int64_t    *G = T->tG + (size_t) t * BLOCK_ROWS;
		int64_t    *H = T->tH + (size_t) t * BLOCK_ROWS;
		int64_t    *seg = T->tseg + (size_t) t * (size_t) (T->max_slots + 1);

#pragma omp for schedule(dynamic, 1)
		for (int64_t b = b0; b < b1; b++)
		{
			int64_t		start = b * BLOCK_ROWS;
			int64_t		len = gbml_boost_block_len(&T->bins, b);

			if (a->level > 0)
				apply_level_split(T, a->level - 1, a->prev_feature, a->prev_border, blk[b], len, T->leaf + start);
			const int64_t *hq = T->packed ? NULL : T->hq + start;

			if (a->identity)
				gbml_boost_hist_block(blk[b], len, T->n_features, T->feat_off, tb,
									  NULL, NULL, 1, T->gq + start, hq, G, H, h);
			else
			{
				gbml_boost_partition_block(T->leaf + start, len, T->slot_of, a->n_slots, seg, idx);
				if (seg[a->n_slots] > 0)
					gbml_boost_hist_block(blk[b], len, T->n_features, T->feat_off, tb,
										  idx, seg, a->n_slots, T->gq + start, hq, G, H, h);
			}
		}
	}
}

/*
 * The CPU histogram pass of level_histograms: per-thread histograms of the
 * slots' rows over every block (a run at a time when the bins are in a
 * file), merged into T->thist (unpacked).
 */
static int
level_pass_cpu(trainer *T, int level, bool identity, int n_slots, int prev_feature, int prev_border)
{
	int64_t		tb = T->total_bins;
	int64_t		used = (int64_t) n_slots * tb;
	level_arg	a = {T, level, identity, n_slots, prev_feature, prev_border};
	int			rc;

	/* every thread's histogram of the slots this level uses starts at zero */
#pragma omp parallel for schedule(static) num_threads(T->threads)
	for (int t = 0; t < T->threads; t++)
		memset(T->thist + (size_t) t * (size_t) T->max_slots * (size_t) tb, 0,
			   sizeof(gbml_boost_hist_bin) * (size_t) used);
	if ((rc = gbml_boost_bins_walk(&T->bins, T->env, &T->progress, level_blocks, &a)) != GBML_OK)
		return rc;

	/*
	 * Merge the per-thread histograms into thread 0's, split by bins across
	 * the threads (integer sums: any order gives the same bits).
	 */
#pragma omp parallel for schedule(static) num_threads(T->threads)
	for (int64_t lo = 0; lo < used; lo += MERGE_BINS)
	{
		int64_t		len = used - lo < MERGE_BINS ? used - lo : MERGE_BINS;

		for (int u = 1; u < T->threads; u++)
			gbml_boost_hist_add(T->thist + lo, T->thist + (size_t) u * (size_t) T->max_slots * (size_t) tb + lo, len);
		if (T->packed && !T->send_packed)
			gbml_boost_hist_unpack(T->thist + lo, len, T->count_bits, T->hq_const);
	}
	return GBML_OK;
}

/*
 * On the GPU, the split the device applies to leaf bit `level`: the level's
 * one (feature, border), or with Depthwise GBML_GPU_SPLIT_BY_NODE after the
 * open tree's node splits of levels 0 .. level went to the device.
 */
static int
gpu_level_split(trainer *T, int level, int *feature)
{
	const forest_builder *F = &T->forest;
	size_t		s = boost_split_index(F, F->n_trees, 0, 0);

	if (!F->node_splits)
		return GBML_OK;
	*feature = GBML_GPU_SPLIT_BY_NODE;
	return gbml_boost_gpu_nodes(&T->gpu, level + 1, F->feature + s, F->border_index + s,
								F->has_sets ? F->set_mask + s * GBML_BOOST_SET_MASK_BYTES : NULL);
}

/* The row side's level pass on this process's rows (boost_row_ops.level). */
static int
local_level(trainer *T, int level, int prev_f, int prev_j, int n_slots)
{
	int			rc;

	if (level == 0)
	{
		local_fixed_point(T);
		if (T->on_gpu &&
			(rc = gbml_boost_gpu_begin_tree(&T->gpu, T->leaf, T->gq, T->packed ? NULL : T->hq)) != GBML_OK)
			return rc;
	}
	if (T->on_gpu)
	{
		if (level > 0 && (rc = gpu_level_split(T, level - 1, &prev_f)) != GBML_OK)
			return rc;
		if ((rc = gbml_boost_gpu_level(&T->gpu, level, prev_f, prev_j, T->slot_of, n_slots, T->thist)) != GBML_OK)
			return rc;
		if (T->packed && !T->send_packed)
			gbml_boost_hist_unpack(T->thist, (int64_t) n_slots * T->total_bins, T->count_bits, T->hq_const);
		return GBML_OK;
	}
	return level_pass_cpu(T, level, level == 0 && T->drawn == T->train.n, n_slots, prev_f, prev_j);
}

/* The Newton hessians' per-leaf sums of a run of blocks (newton_blocks). */
typedef struct newton_arg
{
	trainer    *T;
	int			feature;
	int			border;
} newton_arg;

static void
newton_blocks(void *arg, const uint8_t *const *blk, int64_t b0, int64_t b1)
{
	const newton_arg *a = arg;
	trainer    *T = a->T;
	int			d = T->depth;
	int64_t		nl = (int64_t) 1 << d;

#pragma omp parallel num_threads(T->threads)
	{
		int			t = 0;

#ifdef _OPENMP
		t = omp_get_thread_num();
#endif
		int64_t    *acc = T->tleaf_h + (size_t) t * (size_t) nl;

#pragma omp for schedule(dynamic, 1)
		for (int64_t b = b0; b < b1; b++)
		{
			int64_t		start = b * BLOCK_ROWS;
			int64_t		len = gbml_boost_block_len(&T->bins, b);
			uint16_t   *leaf = T->leaf + start;

			if (!T->leaves_applied)
				apply_level_split(T, d - 1, a->feature, a->border, blk[b], len, leaf);
			for (int64_t r = 0; r < len; r++)
				if (!(leaf[r] & GBML_BOOST_UNSAMPLED))
					acc[leaf[r] & GBML_BOOST_LEAF_MASK] +=
						(int64_t) llrint(T->newton_hess[start + r] * T->newton_scale);
		}
	}
}

/*
 * Applies the tree's last split to every row's leaf index (unless the
 * device already did: T->on_gpu) and returns, per leaf, the fixed-point sum
 * (at newton_scale) of newton_hess over the drawn rows: integer sums, so
 * the same bits whatever the thread count.
 */
int
boost_newton_sums(trainer *T, int feature, int border, int64_t *sums)
{
	int64_t		nl = (int64_t) 1 << T->depth;
	newton_arg	a = {T, feature, border};
	int			rc;

	memset(T->tleaf_h, 0, sizeof(int64_t) * (size_t) T->threads * (size_t) nl);
	if (T->leaves_applied)
		newton_blocks(&a, NULL, 0, T->bins.n_blocks);	/* the leaves are known: no bins needed */
	else if ((rc = gbml_boost_bins_walk(&T->bins, T->env, &T->progress, newton_blocks, &a)) != GBML_OK)
		return rc;
	T->leaves_applied = true;
	for (int64_t l = 0; l < nl; l++)
	{
		sums[l] = 0;
		for (int t = 0; t < T->threads; t++)
			sums[l] += T->tleaf_h[(size_t) t * (size_t) nl + (size_t) l];
	}
	return GBML_OK;
}

/* A split (the tree's last) applied to a run of blocks' leaf indices. */
typedef struct split_arg
{
	trainer    *T;
	int			feature;
	int			border;
} split_arg;

static void
split_blocks(void *arg, const uint8_t *const *blk, int64_t b0, int64_t b1)
{
	const split_arg *a = arg;
	trainer    *T = a->T;

#pragma omp parallel for schedule(dynamic, 1) num_threads(T->threads)
	for (int64_t b = b0; b < b1; b++)
	{
		int64_t		len = gbml_boost_block_len(&T->bins, b);

		apply_level_split(T, T->depth - 1, a->feature, a->border, blk[b], len, T->leaf + b * BLOCK_ROWS);
	}
}

/* The tree's last split applied to every row's leaf (no prediction update). */
static int
apply_last_split(trainer *T, int last_f, int last_j)
{
	split_arg	a = {T, last_f, last_j};

	return gbml_boost_bins_walk(&T->bins, T->env, &T->progress, split_blocks, &a);
}

/*
 * The tree's last split into every row's leaf index, once per tree (on the
 * GPU the device applies it and hands back every row's leaf).
 */
static int
apply_last_split_once(trainer *T, int last_f, int last_j)
{
	int			rc;

	if (T->leaves_applied)
		return GBML_OK;
	if (T->on_gpu)
	{
		if ((rc = gpu_level_split(T, T->depth - 1, &last_f)) != GBML_OK ||
			(rc = gbml_boost_gpu_end_tree(&T->gpu, T->depth - 1, last_f, last_j, T->leaf)) != GBML_OK)
			return rc;
	}
	else if ((rc = apply_last_split(T, last_f, last_j)) != GBML_OK)
		return rc;
	T->leaves_applied = true;
	return GBML_OK;
}

/*
 * The row side's sums of a refinement step on this process's rows: the
 * tree's last split applied to the leaf indices first (once per tree),
 * then per block and thread int64 sums (any order: the same bits).
 */
static int
local_refine_sums(trainer *T, int last_f, int last_j, const double *v, double scale, int64_t *G, int64_t *H)
{
	int			nl = 1 << T->depth;
	int64_t    *acc;
	gbml_boost_problem prob = boost_data_problem(&T->train, false);
	int			rc;

	if ((rc = apply_last_split_once(T, last_f, last_j)) != GBML_OK)
		return rc;
	if ((acc = gbml_alloc0(T->env, sizeof(int64_t) * 2 * (size_t) nl * (size_t) T->threads)) == NULL)
		return T->env->error_code;
#pragma omp parallel num_threads(T->threads)
	{
		int			t = 0;

#ifdef _OPENMP
		t = omp_get_thread_num();
#endif
		int64_t    *g = acc + (size_t) t * 2 * (size_t) nl;

#pragma omp for schedule(dynamic, 1)
		for (int64_t b = 0; b < T->bins.n_blocks; b++)
			gbml_boost_logloss_leaf_sums(&prob, T->pred, T->leaf, b * BLOCK_ROWS, gbml_boost_block_len(&T->bins, b),
										 v, GBML_BOOST_LEAF_MASK, GBML_BOOST_UNSAMPLED, scale, g, g + nl);
	}
	for (int l = 0; l < nl; l++)
	{
		G[l] = H[l] = 0;
		for (int t = 0; t < T->threads; t++)
		{
			G[l] += acc[(size_t) t * 2 * (size_t) nl + (size_t) l];
			H[l] += acc[(size_t) t * 2 * (size_t) nl + (size_t) nl + (size_t) l];
		}
	}
	gbml_free(T->env, acc);
	return GBML_OK;
}

/* The row side's gradients on this process's rows (boost_row_ops.gradients). */
static int
local_gradients(trainer *T, int64_t iteration, boost_grad_max *m)
{
	gbml_boost_problem prob;
	int			rc;

	T->drawn = draw_rows(T, iteration);
	if (T->kind == GBML_LOSS_MULTICLASS)
	{
		/* every class's gradients at the iteration's start: the softmax once, with class 0's tree */
		if (T->cls == 0)
			gbml_boost_multiclass_probs(T->pred_all, T->train.n, T->n_classes, T->prob, T->threads);
		gbml_boost_multiclass_gradients(T->prob, T->train.label, T->train.weight, T->train.n, T->n_classes, T->cls,
										T->p->multiclass_hessian_factor, T->grad, T->hess, T->threads);
		local_gradient_maxima(T, m);
		return GBML_OK;
	}
	prob = boost_data_problem(&T->train, gbml_boost_loss_is_ranking(T->kind));
	rc = gbml_boost_loss_gradients(T->kind, &prob, T->pred, (uint64_t) T->p->random_seed, iteration,
								   T->grad, T->newton_hess ? T->newton_hess : T->hess, T->env);
	if (rc == GBML_OK)
		local_gradient_maxima(T, m);
	return rc;
}

/* A tree's leaf values added to a run of blocks' predictions (leaf_value_blocks). */
typedef struct leaf_value_arg
{
	trainer    *T;
	int			last_f;
	int			last_j;
	bool		leaves_known;
	const float *lv;
} leaf_value_arg;

static void
leaf_value_blocks(void *arg, const uint8_t *const *blk, int64_t b0, int64_t b1)
{
	const leaf_value_arg *a = arg;
	trainer    *T = a->T;

#pragma omp parallel for schedule(dynamic, 1) num_threads(T->threads)
	for (int64_t b = b0; b < b1; b++)
	{
		int64_t		start = b * BLOCK_ROWS;
		int64_t		len = gbml_boost_block_len(&T->bins, b);
		uint16_t   *leaf = T->leaf + start;
		double	   *pred = T->pred + start;

		if (!a->leaves_known)
			apply_level_split(T, T->depth - 1, a->last_f, a->last_j, blk[b], len, leaf);
		for (int64_t r = 0; r < len; r++)
			pred[r] += (double) a->lv[leaf[r] & GBML_BOOST_LEAF_MASK];
	}
}

/*
 * pred += lv[the row's leaf] for every row, the tree's last split (last_f,
 * last_j) applied to the leaf indices first unless leaves_known (then the
 * bins are not read).
 */
static int
add_leaf_values(trainer *T, int last_f, int last_j, bool leaves_known, const float *lv)
{
	leaf_value_arg a = {T, last_f, last_j, leaves_known, lv};

	if (leaves_known)
	{
		leaf_value_blocks(&a, NULL, 0, T->bins.n_blocks);
		return GBML_OK;
	}
	return gbml_boost_bins_walk(&T->bins, T->env, &T->progress, leaf_value_blocks, &a);
}

/*
 * The row side's end of a tree on this process's rows: the leaf values,
 * then the last split and the predictions in one pass (with newton_hess,
 * the last split comes first, with the leaves' H; with further Newton
 * steps too, which need every row's leaf).
 */
static int
local_finish_tree(trainer *T, int last_f, int last_j, float *lv)
{
	int64_t		newton_h[1 << GBML_BOOST_MAX_DEPTH];
	int			rc;

	T->leaves_applied = false;
	if (boost_refines_leaves(T))
	{
		/* (its first step applies the last split to every row's leaf) */
		if ((rc = boost_refined_leaf_values(T, last_f, last_j, lv)) != GBML_OK)
			return rc;
	}
	else
	{
		/* on the GPU the device applies the last split and hands back every row's leaf */
		if (T->on_gpu && (rc = apply_last_split_once(T, last_f, last_j)) != GBML_OK)
			return rc;
		if (T->newton_hess && (rc = boost_newton_sums(T, last_f, last_j, newton_h)) != GBML_OK)
			return rc;
		boost_newton_leaf_values(T, T->newton_hess ? newton_h : NULL, lv);
	}
	if ((rc = add_leaf_values(T, last_f, last_j, T->leaves_applied, lv)) != GBML_OK)
		return rc;
	return boost_eval_add_tree(T);
}

int
boost_apply_tree(trainer *T, int last_f, int last_j, const float *lv)
{
	int			rc;

	if (T->on_gpu && (rc = apply_last_split_once(T, last_f, last_j)) != GBML_OK)
		return rc;
	rc = add_leaf_values(T, last_f, last_j, T->leaves_applied, lv);
	T->leaves_applied = false;
	return rc;
}

static int
local_start(trainer *T, double base)
{
	int64_t		cols = T->n_classes > 0 ? T->n_classes : 1;	/* MultiClass: every class's column */
	double	   *pred = T->pred_all ? T->pred_all : T->pred,
			   *eval_pred = T->eval_pred_all ? T->eval_pred_all : T->eval_pred;

	T->base_score = base;
	for (int64_t r = 0; r < T->train.n * cols; r++)
		pred[r] = T->n_classes > 0 ? T->class_base[r / T->train.n] : base;
	for (int64_t r = 0; r < T->eval.n * cols; r++)
		eval_pred[r] = T->n_classes > 0 ? T->class_base[r / T->eval.n] : base;
	return GBML_OK;
}

/* Rows a thread takes at a time for the per-row terms: each block's maxima fold and its sums add, in any order. */
#define TERM_BLOCK_ROWS 16384

/* The per-row terms of `which` (a base kind) of rows [r0, r0 + m) of d into bmax (scale NULL) or bsum. */
static void
block_row_terms(const trainer *T, int which, int k, const boost_data *d, const double *pred, const double *pred_all,
				int64_t r0, int64_t m, const double *scale, double *bmax, int64_t *bsum)
{
	const float *label = d->label + r0,
			   *weight = d->weight ? d->weight + r0 : NULL;

	if (which == BOOST_TERMS_CLASS_COUNT)
	{
		if (scale)
			bsum[0] = 0;		/* (a maximum only) */
		else
			gbml_boost_class_count_max(label, m, bmax);
	}
	else if (which == BOOST_TERMS_CLASSES)
		gbml_boost_class_terms(label, weight, m, k, scale, bmax, bsum);
	else if (which == BOOST_TERMS_MULTICLASS)
		gbml_boost_multiclass_terms(pred_all + r0, d->n, label, weight, m, T->n_classes, scale, bmax, bsum);
	else
	{
		gbml_boost_problem prob = boost_data_problem(d, false);
		const double *p = which == BOOST_TERMS_LABELS ? NULL : pred + r0;
		unsigned	with = which == BOOST_TERMS_POINTWISE_SQERR ? GBML_BOOST_WITH_SQERR
			: which == BOOST_TERMS_POINTWISE_LOGLOSS ? GBML_BOOST_WITH_LOGLOSS : GBML_BOOST_WITH_BOTH;

		prob.n = m;
		prob.label = label;
		prob.weight = weight;
		if (scale)
			gbml_boost_term_sums(&prob, p, with, scale, bsum);
		else
			gbml_boost_term_maxima(&prob, p, with, bmax);
	}
}

/*
 * The per-row terms of d's rows: blocks on the threads, each block's
 * maxima folded and its fixed-point sums added into the totals (a max and
 * integer sums: the same figures however the blocks fall).
 */
static void
local_row_terms(const trainer *T, int which, int k, const boost_data *d, const double *pred,
				const double *pred_all, const double *scale, double *max, int64_t *sum)
{
	int			nt = boost_terms_count(which, k);
	int64_t		blocks = (d->n + TERM_BLOCK_ROWS - 1) / TERM_BLOCK_ROWS;

	for (int t = 0; t < nt; t++)
		if (scale)
			sum[t] = 0;
		else
			max[t] = 0;
#pragma omp parallel num_threads(blocks > 1 ? T->threads : 1)
	{
		double		bmax[BOOST_MAX_TERMS],
					tmax[BOOST_MAX_TERMS];
		int64_t		bsum[BOOST_MAX_TERMS],
					tsum[BOOST_MAX_TERMS];

		for (int t = 0; t < nt; t++)
		{
			tmax[t] = 0;
			tsum[t] = 0;
		}
#pragma omp for schedule(static)
		for (int64_t b = 0; b < blocks; b++)
		{
			int64_t		r0 = b * TERM_BLOCK_ROWS,
						m = d->n - r0 < TERM_BLOCK_ROWS ? d->n - r0 : TERM_BLOCK_ROWS;

			block_row_terms(T, which, k, d, pred, pred_all, r0, m, scale, bmax, bsum);
			for (int t = 0; t < nt; t++)
				if (scale)
					tsum[t] += bsum[t];
				else
					gbml_boost_term_max_fold(&tmax[t], bmax[t]);
		}
#pragma omp critical
		for (int t = 0; t < nt; t++)
			if (scale)
				sum[t] += tsum[t];
			else
				gbml_boost_term_max_fold(&max[t], tmax[t]);
	}
}

/*
 * The per-query terms of `which` (BOOST_TERMS_QUERY_*, with
 * BOOST_TERMS_EVAL for d the eval rows) of d's rows at pred: computed by
 * the maxima's call and kept for the sums' call that follows (a query's
 * NDCG sorts its rows), else computed here.
 */
static int
local_query_terms(trainer *T, const boost_data *d, const double *pred, int which, int k, bool for_sums)
{
	gbml_boost_problem prob = boost_data_problem(d, true);
	size_t		ng = (size_t) (d->n_groups > 0 ? d->n_groups : 1);
	int			base = boost_terms_base(which);
	/* the eval set's ideal DCGs were computed once, at its NDCG's cut-off */
	const double *ideal = base == BOOST_TERMS_QUERY_NDCG && k == T->p->eval_k ? d->ideal_dcg : NULL;
	bool		kept = T->kept_terms_kind == which && T->kept_terms_k == k;

	T->kept_terms_kind = 0;
	if (for_sums && kept)
		return GBML_OK;
	if (T->kept_num == NULL)
	{
		/* sized for the larger of the two sets' queries: both fit */
		size_t		most = (size_t) (T->train.n_groups > T->eval.n_groups ? T->train.n_groups : T->eval.n_groups);

		most = most > ng ? most : ng;
		T->kept_num = gbml_alloc_array(T->env, most, sizeof(double));
		T->kept_den = gbml_alloc_array(T->env, most, sizeof(double));
		if (T->kept_num == NULL || T->kept_den == NULL)
			return T->env->error_code;
	}
	if (gbml_boost_group_terms(T->env, T->kind, base == BOOST_TERMS_QUERY_NDCG ? k : 0, &prob, pred, ideal,
							   T->kept_num, T->kept_den) != GBML_OK)
		return T->env->error_code;
	if (!for_sums)
	{
		T->kept_terms_kind = which;
		T->kept_terms_k = k;
	}
	return GBML_OK;
}

/* The per-query terms' maxima (scale NULL) or their fixed-point sums at scale. */
static int
local_query_fold(trainer *T, const boost_data *d, const double *pred, int which, int k, const double *scale,
				 double *max, int64_t *sum)
{
	int			rc;

	if ((rc = local_query_terms(T, d, pred, which, k, scale != NULL)) != GBML_OK)
		return rc;
	for (int t = 0; t < 2; t++)
	{
		const double *v = t == 0 ? T->kept_num : T->kept_den;

		if (scale == NULL)
			max[t] = 0;
		else
			sum[t] = 0;
		for (int64_t g = 0; g < d->n_groups; g++)
		{
			if (scale)
				sum[t] += gbml_boost_term_fixed(v[g], scale[t]);
			else
				gbml_boost_term_max_fold(&max[t], v[g]);
		}
	}
	return GBML_OK;
}

/*
 * The terms' maxima (scale NULL) or their fixed-point sums at scale: per
 * row through boost_loss.h's term functions, per query from the query
 * terms; of the eval rows with BOOST_TERMS_EVAL (none here: zeros).
 */
static int
local_terms(trainer *T, int which, int k, const double *scale, double *max, int64_t *sum)
{
	bool		eval = (which & BOOST_TERMS_EVAL) != 0;
	const boost_data *d = eval ? &T->eval : &T->train;
	int			base = boost_terms_base(which);

	if (eval && !T->has_eval)
	{
		for (int t = 0; t < boost_terms_count(which, k); t++)
			if (scale)
				sum[t] = 0;
			else
				max[t] = 0;
		return GBML_OK;
	}
	if (boost_terms_per_row(which))
	{
		T->kept_terms_kind = 0;
		local_row_terms(T, base, k, d, eval ? T->eval_pred : T->pred, eval ? T->eval_pred_all : T->pred_all, scale,
						max, sum);
		if (which == BOOST_TERMS_CLASS_COUNT && T->has_eval)
		{
			/* the class count is the largest label of the training and eval rows + 1 (boost.c, check_labels) */
			double		eval_top;

			gbml_boost_class_count_max(T->eval.label, T->eval.n, &eval_top);
			max[0] = fmax(max[0], eval_top);
		}
		return GBML_OK;
	}
	return local_query_fold(T, d, eval ? T->eval_pred : T->pred, which, k, scale, max, sum);
}

static int
local_term_maxima(trainer *T, int which, int k, double *max)
{
	return local_terms(T, which, k, NULL, max, NULL);
}

static int
local_term_sums(trainer *T, int which, int k, const double *scale, int64_t *sum)
{
	return local_terms(T, which, k, scale, NULL, sum);
}

static int
local_gradient_squares(trainer *T, double scale, int64_t *out)
{
	int64_t		n = T->train.n,
				sum = 0;

	*out = 0;
	if (n == 0)
		return GBML_OK;			/* a shard without rows */
#pragma omp parallel for schedule(static) reduction(+:sum) num_threads(T->threads)
	for (int64_t r = 0; r < n; r++)
		sum += (int64_t) llrint(T->grad[r] * T->grad[r] * scale);
	*out = sum;
	return GBML_OK;
}

const boost_row_ops boost_local_rows = {
	.gradient_squares = local_gradient_squares,
	.refine_sums = local_refine_sums,
	.term_maxima = local_term_maxima,
	.term_sums = local_term_sums,
	.start = local_start,
	.gradients = local_gradients,
	.level = local_level,
	.finish_tree = local_finish_tree,
	.trees_cut = boost_rebuild_predictions,
};
