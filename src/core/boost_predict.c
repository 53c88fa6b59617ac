/*
 * boost_predict.c — branch-free scoring of oblivious-tree forests, one row
 * (the SQL predict path) or a batch of rows (the bench, and batch scoring).
 * Trees that split per node (grow_policy Depthwise) look each level's split
 * up by the row's leaf bits so far (sum_nodes, several trees side by side).
 *
 * Batch: rows are taken BATCH_ROWS at a time and the features the forest
 * uses are transposed to feature-major, so a level of a tree is a compare of
 * BATCH_ROWS contiguous floats against one border (vectorised, no gathers),
 * and a row's sum is built in the same order as the single-row scorer.
 */
#include "boost_predict.h"
#include "boost_cat.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define BATCH_ROWS 64

/*
 * The common case, every tree of one depth d; inlined once per depth so the
 * level loop is unrolled with constant shifts.
 */
static inline __attribute__((always_inline)) double
sum_uniform(const gbml_boost_forest *f, const float *x, const int d)
{
	const int32_t *feat = f->feature;
	const float *bord = f->border;
	const float *leaf = f->leaf;
	double		acc[GBML_BOOST_LANES] = {0, 0, 0, 0};

	for (int t = 0; t < f->n_trees; t++)
	{
		acc[t & 3] += (double) leaf[gbml_oblivious_leaf(feat, bord, d, x)];
		feat += d;
		bord += d;
		leaf += (size_t) 1 << d;
	}
	return gbml_boost_combine(f->base_score, acc);
}

/*
 * Model features computed from the row split by split (categorical
 * inputs): only for models too wide to widen the row on the stack.
 */
static double
sum_inputs(const gbml_boost_forest *f, const float *x)
{
	double		acc[GBML_BOOST_LANES] = {0, 0, 0, 0};

	for (int t = 0; t < f->n_trees; t++)
	{
		int64_t		s0 = f->split_off[t];
		bool		nodes = gbml_boost_tree_splits_nodes(f, t);
		int			idx = 0;

		for (int l = 0; l < f->depth[t]; l++)
		{
			int64_t		s = s0 + (nodes ? (1 << l) - 1 + idx : l);

			idx |= (gbml_boost_input_value(f->inputs, f->feature[s], x) > f->border[s]) << l;
		}
		acc[t & 3] += (double) f->leaf[f->leaf_off[t] + idx];
	}
	return gbml_boost_combine(f->base_score, acc);
}

#define WIDEN_MAX_FEATURES 4096		/* model features widened on the stack (16 KB) */

static double predict_model_row(const gbml_boost_forest *f, const float *x);

/*
 * Every tree splits per node, at depth d: a tree's levels form one chain of
 * dependent loads (the node depends on the last compare), so eight trees
 * walk side by side, their chains overlapping (tree t still adds into
 * accumulator t mod 4, in tree order: the same sum as every scorer).
 */
static double
sum_nodes(const gbml_boost_forest *f, const float *x, const int d)
{
	enum
	{
		WALK = 8				/* trees walked side by side */
	};
	const int	splits = (1 << d) - 1;
	const int32_t *feat = f->feature;
	const float *bord = f->border;
	const float *leaf = f->leaf;
	double		acc[GBML_BOOST_LANES] = {0, 0, 0, 0};
	int			t = 0;

	for (; t + WALK <= f->n_trees; t += WALK)
	{
		int			idx[WALK] = {0};

		for (int l = 0; l < d; l++)
			for (int k = 0; k < WALK; k++)
			{
				int			s = k * splits + (1 << l) - 1 + idx[k];

				idx[k] |= (x[feat[s]] > bord[s]) << l;
			}
		/* tree t + k into accumulator (t + k) mod 4, in tree order */
		for (int k = 0; k < WALK; k++)
			acc[k & 3] += (double) leaf[((size_t) k << d) + (size_t) idx[k]];
		feat += WALK * splits;
		bord += WALK * splits;
		leaf += (size_t) WALK << d;
	}
	for (; t < f->n_trees; t++)
	{
		acc[t & 3] += (double) leaf[gbml_node_tree_leaf(feat, bord, d, x)];
		feat += splits;
		bord += splits;
		leaf += (size_t) 1 << d;
	}
	return gbml_boost_combine(f->base_score, acc);
}

double
gbml_boost_forest_predict(const gbml_boost_forest *f, const float *x)
{
	if (f->fast)
		return gbml_boost_forest_predict_fast(f, x);
	if (f->inputs)
	{
		int			n = f->inputs->n_inputs + f->inputs->n_derived;

		if (n > WIDEN_MAX_FEATURES)
			return sum_inputs(f, x);
		{
			/* each derived feature once per row, not once per split that reads it */
			float		xm[WIDEN_MAX_FEATURES];

			for (int k = 0; k < n; k++)
				xm[k] = gbml_boost_input_value(f->inputs, k, x);
			return predict_model_row(f, xm);
		}
	}
	return predict_model_row(f, x);
}

/*
 * Tree t's leaf for row x; with `in`, x is the row's inputs and each split's
 * model feature is computed through in (a model too wide to widen).
 */
static int
tree_leaf_of(const gbml_boost_forest *f, const struct gbml_boost_inputs *in, int t, const float *x)
{
	int64_t		s0 = f->split_off[t];
	bool		nodes = gbml_boost_tree_splits_nodes(f, t);
	int			idx = 0;

	if (in == NULL)
		return gbml_boost_tree_leaf(f, t, x);
	for (int l = 0; l < f->depth[t]; l++)
	{
		int64_t		s = s0 + (nodes ? (1 << l) - 1 + idx : l);

		idx |= (gbml_boost_input_value(in, f->feature[s], x) > f->border[s]) << l;
	}
	return idx;
}

/* Each class's trees summed as one forest is: class c's i-th tree into lane i mod 4, in tree order. */
static void
class_sums(const gbml_boost_forest *f, const struct gbml_boost_inputs *in, const float *x, double *out)
{
	int			k = f->n_classes;

	for (int c = 0; c < k; c++)
	{
		double		acc[GBML_BOOST_LANES] = {0, 0, 0, 0};

		for (int t = c, i = 0; t < f->n_trees; t += k, i++)
			acc[i & 3] += (double) f->leaf[f->leaf_off[t] + tree_leaf_of(f, in, t, x)];
		out[c] = gbml_boost_combine(f->class_base[c], acc);
	}
}

void
gbml_boost_forest_class_scores(const gbml_boost_forest *f, const float *x, double *out)
{
	if (f->inputs)
	{
		int			n = f->inputs->n_inputs + f->inputs->n_derived;

		if (n <= WIDEN_MAX_FEATURES)
		{
			/* each derived feature once per row */
			float		xm[WIDEN_MAX_FEATURES];

			for (int j = 0; j < n; j++)
				xm[j] = gbml_boost_input_value(f->inputs, j, x);
			class_sums(f, NULL, xm, out);
		}
		else
			class_sums(f, f->inputs, x, out);
		return;
	}
	class_sums(f, NULL, x, out);
}

/* A row of model features (inputs, then derived ones) scored. */
static double
predict_model_row(const gbml_boost_forest *f, const float *x)
{
	double		acc[GBML_BOOST_LANES] = {0, 0, 0, 0};

	switch (f->uniform_depth)
	{
		case 1:
			return sum_uniform(f, x, 1);
		case 2:
			return sum_uniform(f, x, 2);
		case 3:
			return sum_uniform(f, x, 3);
		case 4:
			return sum_uniform(f, x, 4);
		case 5:
			return sum_uniform(f, x, 5);
		case 6:
			return sum_uniform(f, x, 6);
		case 7:
			return sum_uniform(f, x, 7);
		case 8:
			return sum_uniform(f, x, 8);
		case 9:
			return sum_uniform(f, x, 9);
		case 10:
			return sum_uniform(f, x, 10);
		default:
			break;
	}
	if (f->node_depth > 0)
		return sum_nodes(f, x, f->node_depth);
	for (int t = 0; t < f->n_trees; t++)
		acc[t & 3] += (double) f->leaf[f->leaf_off[t] + gbml_boost_tree_leaf(f, t, x)];
	return gbml_boost_combine(f->base_score, acc);
}

/*
 * The leaves of a tree that splits per node (splits from s0) for a block of
 * transposed rows: each row's node picks its own column, so a gather a row.
 */
static void
node_tree_block(const gbml_boost_forest *f, int64_t s0, int d, const float *xt, uint32_t *idx)
{
	for (int l = 0; l < d; l++)
		for (int r = 0; r < BATCH_ROWS; r++)
		{
			int64_t		s = s0 + (1 << l) - 1 + idx[r];

			idx[r] |= (uint32_t) (xt[(size_t) f->feature_pos[s] * BATCH_ROWS + r] > f->border[s]) << l;
		}
}

/* Scores one block of BATCH_ROWS transposed rows (xt[pos * BATCH_ROWS + r]) into acc. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void
score_block(const gbml_boost_forest *f, const float *xt, double *acc)
{
	uint32_t	idx[BATCH_ROWS];
	double		lanes[GBML_BOOST_LANES][BATCH_ROWS];

	for (int a = 0; a < GBML_BOOST_LANES; a++)
		for (int r = 0; r < BATCH_ROWS; r++)
			lanes[a][r] = 0;
	for (int t = 0; t < f->n_trees; t++)
	{
		int64_t		s0 = f->split_off[t];
		int			d = f->depth[t];
		const float *leaf = f->leaf + f->leaf_off[t];
		double	   *lane = lanes[t & 3];

		for (int r = 0; r < BATCH_ROWS; r++)
			idx[r] = 0;
		if (gbml_boost_tree_splits_nodes(f, t))
			node_tree_block(f, s0, d, xt, idx);
		else
			for (int l = 0; l < d; l++)
			{
				const float *col = xt + (size_t) f->feature_pos[s0 + l] * BATCH_ROWS;
				float		b = f->border[s0 + l];

				for (int r = 0; r < BATCH_ROWS; r++)
					idx[r] |= (uint32_t) (col[r] > b) << l;
			}
		for (int r = 0; r < BATCH_ROWS; r++)
			lane[r] += (double) leaf[idx[r]];
	}
	for (int r = 0; r < BATCH_ROWS; r++)
	{
		double		a[GBML_BOOST_LANES] = {lanes[0][r], lanes[1][r], lanes[2][r], lanes[3][r]};

		acc[r] = gbml_boost_combine(f->base_score, a);
	}
}

int
gbml_boost_forest_predict_batch(const gbml_boost_forest *f, const float *x, int64_t n,
								int64_t stride, double *out, gbml_env *env)
{
	int			threads = env->threads;
	int64_t		n_blocks = (n + BATCH_ROWS - 1) / BATCH_ROWS;
	size_t		per_thread = (size_t) (f->n_used > 0 ? f->n_used : 1) * BATCH_ROWS;
	float	   *scratch;

	if (n <= 0)
		return GBML_OK;
	if (threads > n_blocks)
		threads = (int) n_blocks;
	scratch = gbml_alloc_array(env, per_thread * (size_t) threads, sizeof(float));
	if (scratch == NULL)
		return env->error_code;

#pragma omp parallel num_threads(threads)
	{
		int			t = 0;
		float	   *xt;
		double		acc[BATCH_ROWS];

#ifdef _OPENMP
		t = omp_get_thread_num();
#endif
		xt = scratch + per_thread * (size_t) t;
#pragma omp for schedule(static)
		for (int64_t b = 0; b < n_blocks; b++)
		{
			int64_t		r0 = b * BATCH_ROWS;
			int			nr = (int) (n - r0 < BATCH_ROWS ? n - r0 : BATCH_ROWS);

			for (int r = 0; r < nr; r++)
			{
				const float *row = x + (size_t) (r0 + r) * (size_t) stride;

				if (f->inputs)
					for (int u = 0; u < f->n_used; u++)
						xt[(size_t) u * BATCH_ROWS + r] = gbml_boost_input_value(f->inputs, f->used_features[u], row);
				else
					for (int u = 0; u < f->n_used; u++)
						xt[(size_t) u * BATCH_ROWS + r] = row[f->used_features[u]];
			}
			for (int r = nr; r < BATCH_ROWS; r++)
				for (int u = 0; u < f->n_used; u++)
					xt[(size_t) u * BATCH_ROWS + r] = 0;
			score_block(f, xt, acc);
			memcpy(out + r0, acc, sizeof(double) * (size_t) nr);
		}
	}
	gbml_free(env, scratch);
	return GBML_OK;
}
