/*
 * boost_gpu.h — the boosting trainer's door to the GPU backend: choosing
 * the device for one training (auto's size threshold and budget fallback),
 * opening the device context and streaming the bins into it, the per-tree
 * and per-level calls, and backend failures as engine errors.
 *
 * boost.c keeps the algorithm: the device only replaces the histogram pass
 * and the leaf-index updates (one split a level, or one a node), with the same exact integer sums
 * (boost_histogram.h), so a GPU training gives the CPU training's bytes.
 */
#ifndef GBML_BOOST_GPU_H
#define GBML_BOOST_GPU_H

#include "backend.h"
#include "boost_histogram.h"
#include "boost_quantize.h"
#include "env.h"

/*
 * Under "auto", the GPU trains only from this many bin bytes (rows x
 * features) up.  Below it the per-level round trips cost more than the
 * histogram pass they replace.  Not yet measured on a card (no GPU was
 * available when it was set): 2^22 is 40,000 rows x 100 features.
 */
#define GBML_BOOST_GPU_AUTO_MIN_BYTES ((int64_t) 1 << 22)

typedef struct gbml_boost_gpu
{
	gbml_env   *env;
	const gbml_backend *b;
	gbml_gpu_ctx *ctx;
	bool		owns_ctx;		/* false: the dataset's chunk store owns it */
} gbml_boost_gpu;

/*
 * Whether this training runs on the GPU (env->device, and under auto the
 * size threshold); writes the reason to env->device_note and the log.
 */
bool		gbml_boost_gpu_wanted(gbml_env *env, int64_t n_rows, int n_features);

/*
 * Opens the device context, sizes it for the bins and row state, and
 * streams every bin block to the device (the caller may free the host bins
 * afterwards).  Under auto, a training over the GPU budget falls back:
 * returns GBML_OK with g->ctx NULL and a NOTICE.
 */
int			gbml_boost_gpu_open(gbml_boost_gpu *g, gbml_env *env, const gbml_boost_bins *bins,
								int n_features, const int64_t *feat_off, int64_t total_bins,
								int max_slots);
/*
 * The same for rows already on the device (a dataset streamed into a GPU
 * chunk store during the scan): trains in the store's context, quantizes
 * training row i from stored row src[i] there; nothing crosses the bus.
 */
int			gbml_boost_gpu_open_stored(gbml_boost_gpu *g, gbml_env *env, gbml_gpu_ctx *ctx,
									   const gbml_boost_bins *bins, int n_features, const int64_t *feat_off,
									   int64_t total_bins, int max_slots, const int64_t *src,
									   const gbml_boost_borders *borders);
/*
 * Rows streamed to the device whose bins were made on the host instead (a
 * categorical input's statistics need the ids there: boost_ctr.h): trains
 * in the store's context, the host bins streamed in as by
 * gbml_boost_gpu_open.  The store's rows should be released first.
 */
int			gbml_boost_gpu_open_stored_bins(gbml_boost_gpu *g, gbml_env *env, gbml_gpu_ctx *ctx,
											const gbml_boost_bins *bins, int n_features, const int64_t *feat_off,
											int64_t total_bins, int max_slots);
void		gbml_boost_gpu_close(gbml_boost_gpu *g);

int			gbml_boost_gpu_begin_tree(gbml_boost_gpu *g, const uint16_t *leaf, const int64_t *gq,
									  const int64_t *hq);
int			gbml_boost_gpu_level(gbml_boost_gpu *g, int level, int prev_feature, int prev_border,
								 const int16_t *slot_of, int n_slots, gbml_boost_hist_bin *hist);
int			gbml_boost_gpu_end_tree(gbml_boost_gpu *g, int level, int feature, int border,
									uint16_t *leaf_out);
int			gbml_boost_gpu_tree_leaves(gbml_boost_gpu *g, int depth, const int32_t *features,
									   const int32_t *borders, uint16_t *leaf_out);
/*
 * Trees with a split per node (grow_policy Depthwise): the node splits of
 * the tree's first `levels` levels (boost_split_index's layout; set_masks
 * NULL when no node splits a set) to the device, which the next level
 * passes and leaf updates given GBML_GPU_SPLIT_BY_NODE apply, and a whole
 * such tree's leaf index for every row.
 */
int			gbml_boost_gpu_nodes(gbml_boost_gpu *g, int levels, const int32_t *features, const int32_t *borders,
								 const uint8_t *set_masks);
int			gbml_boost_gpu_tree_leaves_nodes(gbml_boost_gpu *g, int depth, const int32_t *features,
											 const int32_t *borders, const uint8_t *set_masks, uint16_t *leaf_out);

#endif
