/*
 * boost_gpu.c — see boost_gpu.h: the device choice for one boosting
 * training, the device context's life, and backend failures as engine
 * errors that name the CUDA call.
 */
#include "boost_gpu.h"
#include "gpu_ctx.h"

#include <stdio.h>
#include <string.h>

bool
gbml_boost_gpu_wanted(gbml_env *env, int64_t n_rows, int n_features)
{
	int64_t		bytes = n_rows * (int64_t) n_features;

	if (env->device != GBML_DEVICE_GPU || env->gpu == NULL)
		return false;
	if (env->gpu->boost_begin == NULL)
	{
		snprintf(env->device_note, sizeof(env->device_note), "the GPU backend has no boosting kernels");
		return false;
	}
	if (env->device_auto && bytes < GBML_BOOST_GPU_AUTO_MIN_BYTES)
	{
		snprintf(env->device_note, sizeof(env->device_note),
				 "device auto: %lld bin bytes (rows x features) is under the GPU threshold of %lld",
				 (long long) bytes, (long long) GBML_BOOST_GPU_AUTO_MIN_BYTES);
		gbml_notice(env, GBML_LOG_DEBUG, "boost: training on the CPU: %s", env->device_note);
		return false;
	}
	snprintf(env->device_note, sizeof(env->device_note), "%s", env->device_auto ? "device auto: a usable GPU and enough data" : "device gpu");
	return true;
}

/* The backend's failure as an engine error (the budget gets its own code and hint). */
static int
backend_error(gbml_boost_gpu *g, const char *what)
{
	return gbml_error(g->env, gbml_gpu_ctx_status(g->env, g->ctx), "GPU %s: %s", what, g->b->last_error());
}

void
gbml_boost_gpu_close(gbml_boost_gpu *g)
{
	if (g->ctx == NULL)
		return;
	if (g->owns_ctx)
		gbml_gpu_ctx_close(g->env, g->ctx);
	else
	{
		/* the chunk store destroys the context; the training's memory goes now */
		gbml_gpu_ctx_record(g->env, g->ctx);
		g->b->boost_end(g->ctx);
	}
	g->ctx = NULL;
}

/* boost_begin for the bins' shape. */
static int
begin(gbml_boost_gpu *g, const gbml_boost_bins *bins, int n_features, const int64_t *feat_off,
	  int64_t total_bins, int max_slots)
{
	gbml_gpu_boost_shape shape;

	memset(&shape, 0, sizeof(shape));
	shape.n_rows = bins->n_rows;
	shape.n_features = n_features;
	shape.block_rows = bins->block_rows;
	shape.n_blocks = bins->n_blocks;
	shape.feat_off = feat_off;
	shape.total_bins = total_bins;
	shape.max_slots = max_slots;
	return g->b->boost_begin(g->ctx, &shape) != 0 ? backend_error(g, "boosting setup") : GBML_OK;
}

int
gbml_boost_gpu_open_stored(gbml_boost_gpu *g, gbml_env *env, gbml_gpu_ctx *ctx, const gbml_boost_bins *bins,
						   int n_features, const int64_t *feat_off, int64_t total_bins, int max_slots,
						   const int64_t *src, const gbml_boost_borders *borders)
{
	int			rc;

	memset(g, 0, sizeof(*g));
	g->env = env;
	g->b = env->gpu;
	g->ctx = ctx;
	g->owns_ctx = false;
	if ((rc = begin(g, bins, n_features, feat_off, total_bins, max_slots)) != GBML_OK)
		return rc;
	if (g->b->boost_bin_rows(g->ctx, src, borders->count, borders->offset, borders->values) != 0)
		return backend_error(g, "quantization");
	return GBML_OK;
}

/* Streams every host bin block to the device. */
static int
upload_bins(gbml_boost_gpu *g, const gbml_boost_bins *bins)
{
	for (int64_t b = 0; b < bins->n_blocks; b++)
		if (g->b->boost_put_bins(g->ctx, b, bins->blocks[b], gbml_boost_block_len(bins, b)) != 0)
			return backend_error(g, "bin upload");
	return GBML_OK;
}

int
gbml_boost_gpu_open_stored_bins(gbml_boost_gpu *g, gbml_env *env, gbml_gpu_ctx *ctx, const gbml_boost_bins *bins,
								int n_features, const int64_t *feat_off, int64_t total_bins, int max_slots)
{
	int			rc;

	memset(g, 0, sizeof(*g));
	g->env = env;
	g->b = env->gpu;
	g->ctx = ctx;
	g->owns_ctx = false;
	if ((rc = begin(g, bins, n_features, feat_off, total_bins, max_slots)) != GBML_OK)
		return rc;
	return upload_bins(g, bins);
}

int
gbml_boost_gpu_open(gbml_boost_gpu *g, gbml_env *env, const gbml_boost_bins *bins,
					int n_features, const int64_t *feat_off, int64_t total_bins, int max_slots)
{
	int			rc;

	memset(g, 0, sizeof(*g));
	g->env = env;
	g->b = env->gpu;
	g->owns_ctx = true;
	if ((g->ctx = gbml_gpu_ctx_open(env)) == NULL)
		return env->error_code;

	if ((rc = begin(g, bins, n_features, feat_off, total_bins, max_slots)) != GBML_OK)
	{
		if (rc == GBML_EGPUBUDGET && env->device_auto)
		{
			/* auto: the CPU trains instead, and the user hears why */
			gbml_notice(env, GBML_LOG_NOTICE, "boost: training on the CPU: %s", env->error);
			snprintf(env->device_note, sizeof(env->device_note), "device auto: over the GPU memory budget");
			env->error[0] = '\0';
			env->error_code = GBML_OK;
			gbml_boost_gpu_close(g);
			return GBML_OK;
		}
		return rc;
	}
	return upload_bins(g, bins);
}

int
gbml_boost_gpu_begin_tree(gbml_boost_gpu *g, const uint16_t *leaf, const int64_t *gq, const int64_t *hq)
{
	return g->b->boost_begin_tree(g->ctx, leaf, gq, hq) ? backend_error(g, "tree setup") : GBML_OK;
}

int
gbml_boost_gpu_level(gbml_boost_gpu *g, int level, int prev_feature, int prev_border,
					 const int16_t *slot_of, int n_slots, gbml_boost_hist_bin *hist)
{
	return g->b->boost_level(g->ctx, level, prev_feature, prev_border, slot_of, n_slots, hist)
		? backend_error(g, "histograms") : GBML_OK;
}

int
gbml_boost_gpu_end_tree(gbml_boost_gpu *g, int level, int feature, int border, uint16_t *leaf_out)
{
	return g->b->boost_end_tree(g->ctx, level, feature, border, leaf_out)
		? backend_error(g, "leaf update") : GBML_OK;
}

int
gbml_boost_gpu_tree_leaves(gbml_boost_gpu *g, int depth, const int32_t *features, const int32_t *borders,
						   uint16_t *leaf_out)
{
	return g->b->boost_tree_leaves(g->ctx, depth, features, borders, leaf_out)
		? backend_error(g, "tree leaves") : GBML_OK;
}

int
gbml_boost_gpu_nodes(gbml_boost_gpu *g, int levels, const int32_t *features, const int32_t *borders,
					 const uint8_t *set_masks)
{
	return g->b->boost_nodes(g->ctx, levels, features, borders, set_masks) ? backend_error(g, "node splits") : GBML_OK;
}

int
gbml_boost_gpu_tree_leaves_nodes(gbml_boost_gpu *g, int depth, const int32_t *features, const int32_t *borders,
								 const uint8_t *set_masks, uint16_t *leaf_out)
{
	int			rc;

	if ((rc = gbml_boost_gpu_nodes(g, depth, features, borders, set_masks)) != GBML_OK)
		return rc;
	return gbml_boost_gpu_tree_leaves(g, depth, NULL, NULL, leaf_out);	/* no level's split: the nodes' */
}
