/*
 * boost_device.cu — the boosting level kernels on the GPU: bins resident on
 * the device (streamed in block by block through a ring of pinned buffers),
 * every row's leaf index and fixed-point gradients on the device, the
 * per-level histograms in shared memory, and the leaf-index updates (one
 * split a level, or for Depthwise trees a split a node from a table of the
 * tree's node splits).
 *
 * The arithmetic is exactly boost_histogram.c's: histogram entries are
 * int64 sums of the same int64 fixed-point gradients (added with 64-bit
 * integer atomics, which are associative), so the histograms, hence the
 * splits and the model bytes, equal the CPU backend's bit for bit whatever
 * the block schedule.  The split search, the leaf values and the gradients
 * stay on the host (boost.c); what crosses the bus per level is one
 * histogram of the smaller children (n_slots x total_bins x 16 bytes).
 *
 * Device layout of the bins: the host's bin blocks concatenated, block b at
 * b * block_rows * n_features, feature-major inside (bins[f * len + r], len
 * the block's row count), so a warp reading one feature of consecutive rows
 * reads consecutive bytes.
 *
 * Histogram kernel: one thread block per (tile of rows inside one bin block,
 * group of consecutive features whose histograms for all n_slots slots fit
 * in shared memory).  The block clears its shared histogram, adds its rows
 * with shared-memory atomics, and adds the non-zero entries into the global
 * histogram.  When not even one feature fits (deep trees: many slots), a
 * second kernel adds straight into global memory.
 */
#include "gpu_context.h"

extern "C" {
#include "boost_histogram.h"
}

#include <stdlib.h>
#include <string.h>

/*
 * GBML_PLANT n builds this file with one deliberate bug, for the checker's
 * mutation test (make -C tests/gpu plants): each must fail a check.  Every
 * real build has GBML_PLANT 0.
 *   GBML_PLANT == 1: the barrier after clearing the shared histogram is missing
 *   GBML_PLANT == 2: the leaf update sends bin == border right (>= instead of >)
 *   GBML_PLANT == 3: the shared histogram's last entry is never flushed
 *   GBML_PLANT == 4: a staging buffer is reused before its copy has run
 *   GBML_PLANT == 5: the last row of every histogram tile is skipped
 *   GBML_PLANT == 13: a node that splits a set is split at its border index instead
 *   GBML_PLANT == 14: a node's split is read for the leaf's bits of one level fewer
 */
#ifndef GBML_PLANT
#define GBML_PLANT 0
#endif

#define RING_SLOTS 4			/* pinned staging buffers for streaming bins in */
#define HIST_THREADS 256
#define TILE_ROWS 2048			/* rows one histogram thread block reads */
#define ROW_THREADS 256			/* threads per block of the per-row kernels */
#define MAX_NODES ((1 << GBML_BOOST_MAX_DEPTH) - 1)	/* the splits of a Depthwise tree */

typedef unsigned long long u64;

typedef struct gpu_boost_state
{
	int64_t		n_rows;
	int			n_features;
	int64_t		block_rows;
	int64_t		n_blocks;
	int64_t		total_bins;
	int			max_slots;
	int64_t    *feat_off;		/* host copy, n_features + 1 */

	uint8_t    *d_bins;
	uint16_t   *d_leaf;
	int64_t    *d_gq;
	int64_t    *d_hq;
	int16_t    *d_slot_of;
	int64_t    *d_feat_off;
	gbml_boost_hist_bin *d_hist;
	int32_t    *d_node_feature;	/* Depthwise: the node splits boost_nodes uploaded */
	int32_t    *d_node_border;
	uint8_t    *d_node_mask;	/* GBML_BOOST_SET_MASK_BYTES a node */
	int			node_levels;	/* levels boost_nodes uploaded (0: none yet) */
	bool		node_masks;		/* and whether with set masks */
	bool		tree_packed;	/* the current tree's gradients are packed (no hq) */

	uint8_t    *ring[RING_SLOTS];
	cudaEvent_t ring_done[RING_SLOTS];
	bool		ring_used[RING_SLOTS];
	int			ring_next;
	size_t		ring_bytes;

	size_t		shared_limit;	/* dynamic shared memory one block may use */
} gpu_boost_state;

/* ---- kernels ---- */

/* Feature f's bin of global row r (block-local feature-major layout). */
__device__ __forceinline__ static uint8_t
bin_of_row(const uint8_t *bins, int64_t n_rows, int n_features, int64_t block_rows, int f, int64_t r)
{
	int64_t		b = r / block_rows;
	int64_t		start = b * block_rows;
	int64_t		len = n_rows - start < block_rows ? n_rows - start : block_rows;

	return bins[start * n_features + (int64_t) f * len + (r - start)];
}

/* leaf[r] |= (bin(feature) > border) << level, as gbml_boost_leaf_update. */
__global__ static void
leaf_update_kernel(const uint8_t *bins, int64_t n_rows, int n_features, int64_t block_rows,
				   int feature, int border, int level, uint16_t *leaf)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

#if GBML_PLANT == 2
	if (r < n_rows)
		leaf[r] |= (uint16_t) ((bin_of_row(bins, n_rows, n_features, block_rows, feature, r) >= border) << level);
#else
	if (r < n_rows)
		leaf[r] |= (uint16_t) ((bin_of_row(bins, n_rows, n_features, block_rows, feature, r) > border) << level);
#endif
}

/* The node splits of a Depthwise tree on the device (boost_nodes), passed by value. */
typedef struct node_table
{
	const int32_t *feature;		/* boost_split_index's layout: level l's nodes from 2^l - 1 */
	const int32_t *border;
	const uint8_t *mask;		/* NULL: no node splits a set */
} node_table;

/* Whether a row with this bin goes right at node s: gbml_boost_bin_goes_right's rule. */
__device__ __forceinline__ static int
goes_right_at_node(node_table t, int64_t s, uint8_t bin)
{
	int32_t		border = t.border[s];

#if GBML_PLANT != 13
	if (t.mask != NULL && border == GBML_BOOST_SET_SPLIT)
		return (t.mask[s * GBML_BOOST_SET_MASK_BYTES + (bin >> 3)] >> (bin & 7)) & 1;
#endif
	return (int) bin > border;	/* GBML_BOOST_NO_SPLIT is above every bin */
}

/* leaf[r] |= (row r goes right at its node of `level`) << level, as gbml_boost_leaf_update_nodes. */
__global__ static void
leaf_update_nodes_kernel(const uint8_t *bins, int64_t n_rows, int n_features, int64_t block_rows,
						 node_table t, int level, uint16_t *leaf)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (r < n_rows)
	{
#if GBML_PLANT == 14
		int			k = leaf[r] & ((1 << level) - 1) >> 1;
#else
		int			k = leaf[r] & ((1 << level) - 1);	/* the node: the leaf bits so far */
#endif
		int64_t		s = ((int64_t) 1 << level) - 1 + k;
		uint8_t		bin = bin_of_row(bins, n_rows, n_features, block_rows, t.feature[s], r);

		leaf[r] |= (uint16_t) (goes_right_at_node(t, s, bin) << level);
	}
}

/* leaf[r] = a Depthwise tree's leaf index, walking its nodes from the root. */
__global__ static void
tree_leaves_nodes_kernel(const uint8_t *bins, int64_t n_rows, int n_features, int64_t block_rows,
						 node_table t, int depth, uint16_t *leaf)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (r < n_rows)
	{
		int			idx = 0;

		for (int l = 0; l < depth; l++)
		{
			int64_t		s = ((int64_t) 1 << l) - 1 + idx;
			uint8_t		bin = bin_of_row(bins, n_rows, n_features, block_rows, t.feature[s], r);

			idx |= goes_right_at_node(t, s, bin) << l;
		}
		leaf[r] = (uint16_t) idx;
	}
}

typedef struct tree_splits
{
	int32_t		feature[GBML_BOOST_MAX_DEPTH];
	int32_t		border[GBML_BOOST_MAX_DEPTH];
} tree_splits;

/* leaf[r] = the leaf index of a whole tree, as add_tree_from_bins computes it. */
__global__ static void
tree_leaves_kernel(const uint8_t *bins, int64_t n_rows, int n_features, int64_t block_rows,
				   tree_splits s, int depth, uint16_t *leaf)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (r < n_rows)
	{
		int			idx = 0;

		for (int l = 0; l < depth; l++)
			idx |= (bin_of_row(bins, n_rows, n_features, block_rows, s.feature[l], r) > s.border[l]) << l;
		leaf[r] = (uint16_t) idx;
	}
}

/* What a histogram launch reads; passed by value. */
typedef struct hist_args
{
	const uint8_t *bins;
	const uint16_t *leaf;
	const int16_t *slot_of;
	const int64_t *gq;
	const int64_t *hq;			/* NULL: packed, only g accumulates */
	const int64_t *feat_off;
	int64_t		n_rows;
	int			n_features;
	int64_t		block_rows;
	int64_t		total_bins;
	int			n_slots;
	int			tiles_per_block;	/* row tiles per bin block */
	int			features_per_group;
	gbml_boost_hist_bin *hist;	/* n_slots x total_bins, zeroed */
} hist_args;

/* This thread block's tile of rows: [r0, r1) inside the bin block that starts at row start. */
typedef struct tile
{
	int64_t		start;			/* first row of the bin block */
	int64_t		len;			/* rows in the bin block */
	int64_t		r0,
				r1;				/* the tile's rows (global indices) */
	const uint8_t *bins;		/* the bin block: bins[f * len + (r - start)] */
} tile;

__device__ __forceinline__ static tile
tile_of_block(const hist_args *a)
{
	tile		t;
	int64_t		b = blockIdx.x / a->tiles_per_block;
	int64_t		k = blockIdx.x % a->tiles_per_block;

	t.start = b * a->block_rows;
	t.len = a->n_rows - t.start < a->block_rows ? a->n_rows - t.start : a->block_rows;
	t.r0 = k * TILE_ROWS;
	t.r1 = t.r0 + TILE_ROWS < t.len ? t.r0 + TILE_ROWS : t.len;
	t.r0 += t.start;
	t.r1 += t.start;
	t.bins = a->bins + t.start * a->n_features;
	return t;
}

/*
 * Row r's histogram slot (negative: not histogrammed at this level) and its
 * fixed-point gradient and hessian (0 when packed).
 */
__device__ __forceinline__ static int
row_slot(const hist_args *a, int64_t r, u64 *g, u64 *h)
{
	int			slot = a->slot_of[a->leaf[r]];

	*g = (u64) a->gq[r];
	*h = a->hq ? (u64) a->hq[r] : 0;
	return slot;
}

__global__ static void __launch_bounds__(HIST_THREADS)
hist_shared_kernel(hist_args a)
{
	GBML_DYNAMIC_SHARED(u64, sh);
	int			f0 = blockIdx.y * a.features_per_group;
	int			f1 = f0 + a.features_per_group < a.n_features ? f0 + a.features_per_group : a.n_features;
	int64_t		gb0 = a.feat_off[f0];
	int64_t		group_bins = a.feat_off[f1] - gb0;
	int64_t		entries = (int64_t) a.n_slots * group_bins;
	tile		t = tile_of_block(&a);

	/* packed gradients (no hq) need only the g word of each entry: half the shared memory */
	int			words = a.hq ? 2 : 1;

	for (int64_t i = threadIdx.x; i < words * entries; i += blockDim.x)
		sh[i] = 0;
#if GBML_PLANT != 1
	__syncthreads();
#endif
#if GBML_PLANT == 5
	t.r1--;
#endif

	for (int64_t r = t.r0 + threadIdx.x; r < t.r1; r += blockDim.x)
	{
		u64			g,
					h;
		int			slot = row_slot(&a, r, &g, &h);

		if (slot < 0)
			continue;
		int64_t		local = r - t.start;
		u64		   *slot_hist = sh + words * (int64_t) slot * group_bins;

		for (int f = f0; f < f1; f++)
		{
			int64_t		e = a.feat_off[f] - gb0 + t.bins[(int64_t) f * t.len + local];

			atomicAdd(&slot_hist[words * e], g);
			if (a.hq)
				atomicAdd(&slot_hist[2 * e + 1], h);
		}
	}
	__syncthreads();

#if GBML_PLANT == 3
	entries--;
#endif
	for (int64_t i = threadIdx.x; i < entries; i += blockDim.x)
	{
		int64_t		slot = i / group_bins;
		int64_t		e = i % group_bins;
		u64		   *out = (u64 *) &a.hist[slot * a.total_bins + gb0 + e];

		if (sh[words * i] != 0)
			atomicAdd(&out[0], sh[words * i]);
		if (a.hq && sh[2 * i + 1] != 0)
			atomicAdd(&out[1], sh[2 * i + 1]);
	}
}

/* Deep trees: every (row, feature) adds straight into the global histogram. */
__global__ static void __launch_bounds__(HIST_THREADS)
hist_global_kernel(hist_args a)
{
	tile		t = tile_of_block(&a);

	for (int64_t r = t.r0 + threadIdx.x; r < t.r1; r += blockDim.x)
	{
		u64			g,
					h;
		int			slot = row_slot(&a, r, &g, &h);

		if (slot < 0)
			continue;
		for (int f = (int) blockIdx.y; f < a.n_features; f += (int) gridDim.y)
		{
			u64		   *out = (u64 *) &a.hist[(int64_t) slot * a.total_bins + a.feat_off[f] +
											 t.bins[(int64_t) f * t.len + (r - t.start)]];

			atomicAdd(&out[0], g);
			if (a.hq)
				atomicAdd(&out[1], h);
		}
	}
}

/* ---- host side ---- */

static gpu_boost_state *
state_of(gbml_gpu_ctx *ctx)
{
	if (ctx->boost == NULL)
		gpu_fail("GPU boosting: boost_begin was not called");
	return ctx->boost;
}

extern "C" int
gpu_boost_begin(gbml_gpu_ctx *ctx, const gbml_gpu_boost_shape *shape)
{
	gpu_boost_state *s;
	cudaDeviceProp prop;
	int64_t		n = shape->n_rows;

	if (ctx->boost != NULL)
		return gpu_fail("GPU boosting: boost_begin called twice on one context");
	if (shape->n_features < 1 || n < 1 || shape->block_rows < 1 || shape->block_rows > 65536 ||
		shape->max_slots < 1 || shape->max_slots > GBML_BOOST_SLOT_TABLE)
		return gpu_fail("GPU boosting: bad shape (%lld rows, %d features)", (long long) n, shape->n_features);
	s = (gpu_boost_state *) calloc(1, sizeof(gpu_boost_state) + sizeof(int64_t) * (size_t) (shape->n_features + 1));
	if (s == NULL)
		return gpu_fail("out of host memory for the GPU boosting state");
	ctx->boost = s;
	s->n_rows = n;
	s->n_features = shape->n_features;
	s->block_rows = shape->block_rows;
	s->n_blocks = shape->n_blocks;
	s->total_bins = shape->total_bins;
	s->max_slots = shape->max_slots;
	s->feat_off = (int64_t *) (s + 1);
	memcpy(s->feat_off, shape->feat_off, sizeof(int64_t) * (size_t) (shape->n_features + 1));

	if (gpu_check(cudaGetDeviceProperties(&prop, ctx->device), "cudaGetDeviceProperties"))
		return 1;
	s->shared_limit = prop.sharedMemPerBlockOptin > prop.sharedMemPerBlock ? prop.sharedMemPerBlockOptin
		: prop.sharedMemPerBlock;
	if (gpu_check(cudaFuncSetAttribute(hist_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
									   (int) s->shared_limit), "cudaFuncSetAttribute"))
		return 1;

	/* the bins first: they are the big allocation, and the budget error should name them */
	if ((s->d_bins = (uint8_t *) gpu_alloc_device(ctx, (size_t) n * (size_t) s->n_features, "the bins")) == NULL ||
		(s->d_leaf = (uint16_t *) gpu_alloc_device(ctx, (size_t) n * sizeof(uint16_t), "the leaf indices")) == NULL ||
		(s->d_gq = (int64_t *) gpu_alloc_device(ctx, (size_t) n * sizeof(int64_t), "the gradients")) == NULL ||
		(s->d_hq = (int64_t *) gpu_alloc_device(ctx, (size_t) n * sizeof(int64_t), "the hessians")) == NULL ||
		(s->d_slot_of = (int16_t *) gpu_alloc_device(ctx, sizeof(int16_t) * GBML_BOOST_SLOT_TABLE, "the slot table")) == NULL ||
		(s->d_feat_off = (int64_t *) gpu_alloc_device(ctx, sizeof(int64_t) * (size_t) (s->n_features + 1), "the bin offsets")) == NULL ||
		(s->d_node_feature = (int32_t *) gpu_alloc_device(ctx, sizeof(int32_t) * MAX_NODES, "the node splits")) == NULL ||
		(s->d_node_border = (int32_t *) gpu_alloc_device(ctx, sizeof(int32_t) * MAX_NODES, "the node splits")) == NULL ||
		(s->d_node_mask = (uint8_t *) gpu_alloc_device(ctx, (size_t) GBML_BOOST_SET_MASK_BYTES * MAX_NODES, "the node sets")) == NULL ||
		(s->d_hist = (gbml_boost_hist_bin *) gpu_alloc_device(ctx, sizeof(gbml_boost_hist_bin) * (size_t) s->max_slots *
															  (size_t) s->total_bins, "the histograms")) == NULL)
		return 1;
	if (gpu_upload(ctx, s->d_feat_off, s->feat_off, sizeof(int64_t) * (size_t) (s->n_features + 1), "cudaMemcpyAsync(bin offsets)"))
		return 1;
	s->ring_bytes = (size_t) s->block_rows * (size_t) s->n_features;
	for (int i = 0; i < RING_SLOTS; i++)
		if ((s->ring[i] = (uint8_t *) gpu_alloc_pinned(ctx, s->ring_bytes, "bin staging")) == NULL ||
			(s->ring_done[i] = gpu_event(ctx)) == NULL)
			return 1;
	/* the offsets came from the caller's memory: done before we return */
	return gpu_sync(ctx, "cudaStreamSynchronize(boost_begin)");
}

extern "C" int
gpu_boost_put_bins(gbml_gpu_ctx *ctx, int64_t block, const uint8_t *bins, int64_t len)
{
	gpu_boost_state *s = state_of(ctx);
	int			slot;
	size_t		bytes;

	if (s == NULL)
		return 1;
	if (block < 0 || block >= s->n_blocks || len < 1 || len > s->block_rows ||
		block * s->block_rows + len > s->n_rows)
		return gpu_fail("GPU boosting: bin block %lld of %lld rows is out of range", (long long) block, (long long) len);
	slot = s->ring_next;
	s->ring_next = (s->ring_next + 1) % RING_SLOTS;
	/* the staging buffer is free once the copy that last read it has run */
	if (s->ring_used[slot] && !(GBML_PLANT == 4) &&
		gpu_check(cudaEventSynchronize(s->ring_done[slot]), "cudaEventSynchronize(bin staging)"))
		return 1;
	bytes = (size_t) len * (size_t) s->n_features;
	memcpy(s->ring[slot], bins, bytes);
	if (gpu_upload(ctx, s->d_bins + (size_t) block * (size_t) s->block_rows * (size_t) s->n_features,
				   s->ring[slot], bytes, "cudaMemcpyAsync(bins)") ||
		gpu_check(cudaEventRecord(s->ring_done[slot], ctx->stream), "cudaEventRecord(bin staging)"))
		return 1;
	s->ring_used[slot] = true;
	return 0;
}

extern "C" int
gpu_boost_begin_tree(gbml_gpu_ctx *ctx, const uint16_t *leaf, const int64_t *gq, const int64_t *hq)
{
	gpu_boost_state *s = state_of(ctx);
	size_t		n;

	if (s == NULL)
		return 1;
	n = (size_t) s->n_rows;
	s->tree_packed = hq == NULL;
	if (gpu_upload(ctx, s->d_leaf, leaf, n * sizeof(uint16_t), "cudaMemcpyAsync(leaf indices)") ||
		gpu_upload(ctx, s->d_gq, gq, n * sizeof(int64_t), "cudaMemcpyAsync(gradients)") ||
		(hq && gpu_upload(ctx, s->d_hq, hq, n * sizeof(int64_t), "cudaMemcpyAsync(hessians)")))
		return 1;
	/* the caller rewrites these arrays for the next tree: let the copies finish */
	return gpu_sync(ctx, "cudaStreamSynchronize(begin tree)");
}

/* The node table boost_nodes uploaded (the kernels' view). */
static node_table
nodes_of(const gpu_boost_state *s)
{
	node_table	t;

	t.feature = s->d_node_feature;
	t.border = s->d_node_border;
	t.mask = s->node_masks ? s->d_node_mask : NULL;
	return t;
}

/* Level `level`'s split (one feature and border, or GBML_GPU_SPLIT_BY_NODE) into every row's leaf bit `level`. */
static int
launch_leaf_update(gbml_gpu_ctx *ctx, gpu_boost_state *s, int feature, int border, int level)
{
	unsigned	blocks = (unsigned) ((s->n_rows + ROW_THREADS - 1) / ROW_THREADS);

	if (feature == GBML_GPU_SPLIT_BY_NODE)
	{
		if (level < 0 || level >= s->node_levels)
			return gpu_fail("GPU boosting: level %d's node splits were not uploaded (%d levels are)", level,
							s->node_levels);
		GBML_LAUNCH(leaf_update_nodes_kernel, dim3(blocks), dim3(ROW_THREADS), 0, ctx->stream,
					s->d_bins, s->n_rows, s->n_features, s->block_rows, nodes_of(s), level, s->d_leaf);
		return gpu_check(cudaGetLastError(), "leaf_update_nodes_kernel launch");
	}
	if (feature < 0 || feature >= s->n_features || level < 0 || level >= GBML_BOOST_MAX_DEPTH)
		return gpu_fail("GPU boosting: bad split (feature %d, level %d)", feature, level);
	GBML_LAUNCH(leaf_update_kernel, dim3(blocks), dim3(ROW_THREADS), 0, ctx->stream,
				s->d_bins, s->n_rows, s->n_features, s->block_rows, feature, border, level, s->d_leaf);
	return gpu_check(cudaGetLastError(), "leaf_update_kernel launch");
}

/* Bytes of shared memory per histogram entry: (g, h), or g alone for packed gradients. */
static size_t
entry_bytes(const gpu_boost_state *s)
{
	return s->tree_packed ? sizeof(u64) : sizeof(gbml_boost_hist_bin);
}

/*
 * Features per shared-memory group for n_slots slots (0 when one feature does
 * not fit), and in *widest_out the most bins any such group has (what its
 * launch reserves).
 */
static int
features_per_group(const gpu_boost_state *s, int n_slots, int64_t *widest_out)
{
	int			best = 0;

	*widest_out = 0;
	/* the largest run of consecutive features, from every start, that fits: use the worst case */
	for (int k = 1; k <= s->n_features; k++)
	{
		int64_t		widest = 0;

		for (int f0 = 0; f0 < s->n_features; f0 += k)
		{
			int			f1 = f0 + k < s->n_features ? f0 + k : s->n_features;
			int64_t		w = s->feat_off[f1] - s->feat_off[f0];

			if (w > widest)
				widest = w;
		}
		if ((size_t) n_slots * (size_t) widest * entry_bytes(s) > s->shared_limit)
			break;
		best = k;
		*widest_out = widest;
		if (k == s->n_features)
			break;
	}
	return best;
}

extern "C" int
gpu_boost_level(gbml_gpu_ctx *ctx, int level, int prev_feature, int prev_border,
				const int16_t *slot_of, int n_slots, gbml_boost_hist_bin *hist)
{
	gpu_boost_state *s = state_of(ctx);
	hist_args	a;
	size_t		hist_bytes;
	int			per_group;
	int64_t		widest;

	if (s == NULL)
		return 1;
	if (n_slots < 1 || n_slots > s->max_slots)
		return gpu_fail("GPU boosting: %d histogram slots, at most %d", n_slots, s->max_slots);
	hist_bytes = sizeof(gbml_boost_hist_bin) * (size_t) n_slots * (size_t) s->total_bins;
	if (gpu_upload(ctx, s->d_slot_of, slot_of, sizeof(int16_t) * GBML_BOOST_SLOT_TABLE, "cudaMemcpyAsync(slot table)"))
		return 1;
	if (level > 0 && launch_leaf_update(ctx, s, prev_feature, prev_border, level - 1))
		return 1;
	if (gpu_check(cudaMemsetAsync(s->d_hist, 0, hist_bytes, ctx->stream), "cudaMemsetAsync(histograms)"))
		return 1;

	memset(&a, 0, sizeof(a));
	a.bins = s->d_bins;
	a.leaf = s->d_leaf;
	a.slot_of = s->d_slot_of;
	a.gq = s->d_gq;
	a.hq = s->tree_packed ? NULL : s->d_hq;
	a.feat_off = s->d_feat_off;
	a.n_rows = s->n_rows;
	a.n_features = s->n_features;
	a.block_rows = s->block_rows;
	a.total_bins = s->total_bins;
	a.n_slots = n_slots;
	a.tiles_per_block = (int) ((s->block_rows + TILE_ROWS - 1) / TILE_ROWS);
	a.hist = s->d_hist;
	per_group = features_per_group(s, n_slots, &widest);
	if (per_group > 0)
	{
		int			groups = (s->n_features + per_group - 1) / per_group;

		a.features_per_group = per_group;
		GBML_LAUNCH(hist_shared_kernel, dim3((unsigned) (s->n_blocks * a.tiles_per_block), (unsigned) groups),
					dim3(HIST_THREADS), entry_bytes(s) * (size_t) n_slots * (size_t) widest,
					ctx->stream, a);
		if (gpu_check(cudaGetLastError(), "hist_shared_kernel launch"))
			return 1;
	}
	else
	{
		int			groups = s->n_features < 32 ? s->n_features : 32;

		GBML_LAUNCH(hist_global_kernel, dim3((unsigned) (s->n_blocks * a.tiles_per_block), (unsigned) groups),
					dim3(HIST_THREADS), 0, ctx->stream, a);
		if (gpu_check(cudaGetLastError(), "hist_global_kernel launch"))
			return 1;
	}
	if (gpu_check(cudaMemcpyAsync(hist, s->d_hist, hist_bytes, cudaMemcpyDeviceToHost, ctx->stream),
				  "cudaMemcpyAsync(histograms to host)"))
		return 1;
	return gpu_sync(ctx, "histogram pass");
}

/* A per-row kernel just launched (named), then every row's leaf index to the host. */
static int
copy_leaves_back(gbml_gpu_ctx *ctx, gpu_boost_state *s, const char *launch, uint16_t *leaf_out)
{
	if (gpu_check(cudaGetLastError(), launch) ||
		gpu_check(cudaMemcpyAsync(leaf_out, s->d_leaf, sizeof(uint16_t) * (size_t) s->n_rows,
								  cudaMemcpyDeviceToHost, ctx->stream), "cudaMemcpyAsync(leaf indices to host)"))
		return 1;
	return gpu_sync(ctx, "leaf indices");
}

extern "C" int
gpu_boost_end_tree(gbml_gpu_ctx *ctx, int level, int feature, int border, uint16_t *leaf_out)
{
	gpu_boost_state *s = state_of(ctx);

	if (s == NULL)
		return 1;
	if (launch_leaf_update(ctx, s, feature, border, level) ||
		gpu_check(cudaMemcpyAsync(leaf_out, s->d_leaf, sizeof(uint16_t) * (size_t) s->n_rows,
								  cudaMemcpyDeviceToHost, ctx->stream), "cudaMemcpyAsync(leaf indices to host)"))
		return 1;
	return gpu_sync(ctx, "leaf update");
}

/* Frees everything boost_begin allocated (the context stays, for its owner). */
extern "C" void
gpu_boost_end(gbml_gpu_ctx *ctx)
{
	gpu_boost_state *s = ctx->boost;

	if (s == NULL)
		return;
	gpu_release(ctx, s->d_bins);
	gpu_release(ctx, s->d_leaf);
	gpu_release(ctx, s->d_gq);
	gpu_release(ctx, s->d_hq);
	gpu_release(ctx, s->d_slot_of);
	gpu_release(ctx, s->d_feat_off);
	gpu_release(ctx, s->d_hist);
	gpu_release(ctx, s->d_node_feature);
	gpu_release(ctx, s->d_node_border);
	gpu_release(ctx, s->d_node_mask);
	for (int i = 0; i < RING_SLOTS; i++)
	{
		gpu_release(ctx, s->ring[i]);
		gpu_release(ctx, (void *) s->ring_done[i]);
	}
	free(s);
	ctx->boost = NULL;
}

extern "C" int
gpu_boost_bin_rows(gbml_gpu_ctx *ctx, const int64_t *src, const int *border_count, const int64_t *border_off,
				   const float *border_values)
{
	gpu_boost_state *s = state_of(ctx);

	if (s == NULL)
		return 1;
	return gpu_chunk_bin_rows(ctx, s->d_bins, src, s->n_rows, s->block_rows, border_count, border_off, border_values);
}

extern "C" int
gpu_boost_tree_leaves(gbml_gpu_ctx *ctx, int depth, const int32_t *features, const int32_t *borders,
					  uint16_t *leaf_out)
{
	gpu_boost_state *s = state_of(ctx);
	tree_splits t;
	unsigned	blocks;

	if (s == NULL)
		return 1;
	if (depth < 1 || depth > GBML_BOOST_MAX_DEPTH)
		return gpu_fail("GPU boosting: bad tree depth %d", depth);
	blocks = (unsigned) ((s->n_rows + ROW_THREADS - 1) / ROW_THREADS);
	if (features == NULL)
	{
		/* a tree with a split per node: the ones boost_nodes uploaded */
		if (depth > s->node_levels)
			return gpu_fail("GPU boosting: a tree of depth %d, but %d levels of node splits were uploaded", depth,
							s->node_levels);
		GBML_LAUNCH(tree_leaves_nodes_kernel, dim3(blocks), dim3(ROW_THREADS), 0, ctx->stream,
					s->d_bins, s->n_rows, s->n_features, s->block_rows, nodes_of(s), depth, s->d_leaf);
		return copy_leaves_back(ctx, s, "tree_leaves_nodes_kernel launch", leaf_out);
	}
	memset(&t, 0, sizeof(t));
	for (int l = 0; l < depth; l++)
	{
		if (features[l] < 0 || features[l] >= s->n_features)
			return gpu_fail("GPU boosting: bad split feature %d", features[l]);
		t.feature[l] = features[l];
		t.border[l] = borders[l];
	}
	GBML_LAUNCH(tree_leaves_kernel, dim3(blocks), dim3(ROW_THREADS), 0, ctx->stream,
				s->d_bins, s->n_rows, s->n_features, s->block_rows, t, depth, s->d_leaf);
	return copy_leaves_back(ctx, s, "tree_leaves_kernel launch", leaf_out);
}

extern "C" int
gpu_boost_nodes(gbml_gpu_ctx *ctx, int levels, const int32_t *features, const int32_t *borders,
				const uint8_t *set_masks)
{
	gpu_boost_state *s = state_of(ctx);
	size_t		n;

	if (s == NULL)
		return 1;
	if (levels < 1 || levels > GBML_BOOST_MAX_DEPTH)
		return gpu_fail("GPU boosting: %d levels of node splits, at most %d", levels, GBML_BOOST_MAX_DEPTH);
	n = ((size_t) 1 << levels) - 1;
	for (size_t k = 0; k < n; k++)
		if (features[k] < 0 || features[k] >= s->n_features)
			return gpu_fail("GPU boosting: node %zu splits on feature %d of %d", k, features[k], s->n_features);
	s->node_levels = 0;			/* until the copies below have run */
	if (gpu_upload(ctx, s->d_node_feature, features, sizeof(int32_t) * n, "cudaMemcpyAsync(node features)") ||
		gpu_upload(ctx, s->d_node_border, borders, sizeof(int32_t) * n, "cudaMemcpyAsync(node borders)") ||
		(set_masks && gpu_upload(ctx, s->d_node_mask, set_masks, (size_t) GBML_BOOST_SET_MASK_BYTES * n,
								 "cudaMemcpyAsync(node sets)")))
		return 1;
	s->node_levels = levels;
	s->node_masks = set_masks != NULL;
	/* the caller's arrays may change once we return */
	return gpu_sync(ctx, "cudaStreamSynchronize(node splits)");
}
