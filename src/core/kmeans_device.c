/*
 * kmeans_device.c — the device share of a K-Means fit: which mode a fit
 * runs in (cpu, gpu, hybrid), the device context and the row blocks it
 * holds, the calls into the backend's K-Means table (kmeans_backend.h), and
 * the hybrid mode's moves of blocks between the sides (kmeans_balance.c
 * decides where the split goes).
 *
 * The dataset keeps every row (in host memory or in its chunk store), so a
 * block that leaves the device needs only its labels copied back, and a
 * block that joins it is uploaded from its chunk, which km_walk reads
 * first when the chunk is stored (temporary files).
 */
#include "kmeans_internal.h"
#include "gpu_ctx.h"

#include <stdio.h>
#include <string.h>

/*
 * Multiply-adds per iteration (n k d) below which device 'auto' keeps
 * K-Means on the CPU: about 4 ms of the CPU kernels at 290 GFLOP/s, where
 * a GPU's launch and copy latency would eat the gain.  Not yet measured on
 * a card (tests/gpu/run.sh prints the figures to set it from).
 */
#define KM_GPU_AUTO_MIN_WORK ((double) (1 << 30))

/* Share of the device budget the blocks may fill (the rest: centroids, scratch). */
#define KM_GPU_BUDGET_SHARE 0.85

static int
dev_error(km_work *w, const char *what)
{
	return gbml_error(w->env, gbml_gpu_ctx_status(w->env, w->ctx), "GPU K-Means %s: %s", what,
					  w->gpu->last_error());
}

/* Device bytes one row of a block needs: x, |x|^2, scale, label, closest, T candidate outputs, a distance. */
static double
bytes_per_row(const km_work *w)
{
	return 4.0 * w->d + 8 + 8 + 4 + 4 + 4.0 * GBML_KM_CAND_LANES + 8;
}

/* Device bytes independent of the rows: centroids in both precisions and layouts, sums, counts, per-block alignment. */
static double
fixed_bytes(const km_work *w)
{
	return (double) w->k * w->d * 32 + (double) w->k * 32 + (double) w->d * 8 + (double) w->nblocks * 4096 + (1 << 20);
}

static km_mode
choose_mode(km_work *w)
{
	gbml_env   *env = w->env;
	double		work = (double) w->n * w->k * w->d;

	if ((env->device != GBML_DEVICE_GPU && env->device != GBML_DEVICE_HYBRID) || env->gpu == NULL)
		return KM_MODE_CPU;
	if (env->gpu->kmeans == NULL)
	{
		snprintf(env->device_note, sizeof(env->device_note), "the GPU backend has no K-Means kernels");
		gbml_notice(env, env->device_auto ? GBML_LOG_DEBUG : GBML_LOG_NOTICE,
					"kmeans: training on the CPU: %s", env->device_note);
		return KM_MODE_CPU;
	}
	if (env->device_auto && work < KM_GPU_AUTO_MIN_WORK)
	{
		snprintf(env->device_note, sizeof(env->device_note),
				 "device auto: %.3g multiply-adds per iteration (rows x k x features) is under the GPU threshold of %.3g",
				 work, KM_GPU_AUTO_MIN_WORK);
		gbml_notice(env, GBML_LOG_DEBUG, "kmeans: training on the CPU: %s", env->device_note);
		return KM_MODE_CPU;
	}
	if (env->device_auto || env->device == GBML_DEVICE_HYBRID)
	{
		snprintf(env->device_note, sizeof(env->device_note), "%s",
				 env->device_auto ? "device auto: a usable GPU and enough work: hybrid" : "device hybrid");
		return KM_MODE_HYBRID;
	}
	snprintf(env->device_note, sizeof(env->device_note), "device gpu");
	return KM_MODE_GPU;
}

/* Block b's rows to the device; x: its chunk's features. */
static int
put_block(km_work *w, int b, const float *x)
{
	const km_block *bl = &w->blocks[b];

	if (w->ops->put_block(w->ctx, b, x + (size_t) bl->start * w->d,
						  w->xnorm2[bl->chunk] + bl->start,
						  w->spherical ? w->scale[bl->chunk] + bl->start : NULL,
						  w->labels[bl->chunk] + bl->start, bl->count) != 0)
		return dev_error(w, "block upload");
	return GBML_OK;
}

static int
drop_block(km_work *w, int b, bool keep_labels)
{
	const km_block *bl = &w->blocks[b];

	if (w->ops->drop_block(w->ctx, b, keep_labels ? w->labels[bl->chunk] + bl->start : NULL) != 0)
		return dev_error(w, "block release");
	return GBML_OK;
}

/* Blocks [next, end) to put; `again`: each is on the device already and goes up anew (its labels -1). */
typedef struct km_put_arg
{
	int			next;
	int			end;
	bool		again;
} km_put_arg;

/* The blocks inside tasks [first, end) (a block never crosses a chunk, so none is cut). */
static int
put_tasks(km_work *w, int first, int end, void *arg)
{
	km_put_arg *a = arg;
	int			rc;

	(void) first;
	for (; a->next < a->end && w->blocks[a->next].end_task <= end; a->next++)
	{
		const km_block *bl = &w->blocks[a->next];

		if (a->again && (rc = drop_block(w, a->next, false)) != GBML_OK)
			return rc;
		if ((rc = put_block(w, a->next, w->chunk_x[bl->chunk])) != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

/* Blocks [b0, b1) to the device, their chunks read in turn. */
static int
put_blocks(km_work *w, int b0, int b1, bool again)
{
	km_put_arg	a = {b0, b1, again};

	if (b0 >= b1)
		return GBML_OK;
	return km_walk(w, w->blocks[b0].first_task, w->blocks[b1 - 1].end_task, put_tasks, &a);
}

/*
 * The most blocks (a prefix) the device budget holds; for device 'gpu'
 * every block must fit, else the budget ERROR with the figures.
 */
static int
device_capacity(km_work *w, int *cap)
{
	double		limit = (double) w->gpu->ctx_memory_limit(w->ctx) * KM_GPU_BUDGET_SHARE - fixed_bytes(w);
	double		per_row = bytes_per_row(w);

	*cap = 0;
	while (*cap < w->nblocks && (double) w->rows_before[*cap + 1] * per_row <= limit)
		(*cap)++;
	if (w->mode == KM_MODE_GPU && *cap < w->nblocks)
		return gbml_error(w->env, GBML_EGPUBUDGET,
						  "kmeans: the %lld rows need about %.1f MB of GPU memory, over the budget of %.1f MB",
						  (long long) w->n, ((double) w->n * per_row + fixed_bytes(w)) / 1048576.0,
						  (double) w->gpu->ctx_memory_limit(w->ctx) / 1048576.0);
	return GBML_OK;
}

/* The device context, the fit's shape, and the first split's blocks on the device. */
static int
open_device(km_work *w)
{
	gbml_env   *env = w->env;
	int			cap,
				g0 = w->nblocks,
				rc;

	w->gpu = env->gpu;
	w->ops = env->gpu->kmeans;
	w->row_scratch = gbml_alloc_array(env, (size_t) w->max_block_rows, sizeof(float));
	w->label_scratch = gbml_alloc_array(env, (size_t) w->max_block_rows, sizeof(int32_t));
	if (w->row_scratch == NULL || w->label_scratch == NULL)
		return env->error_code;
	if ((w->ctx = gbml_gpu_ctx_open(env)) == NULL)
		return env->error_code;
	if ((rc = device_capacity(w, &cap)) != GBML_OK)
		return rc;
	if (w->ops->begin(w->ctx, w->k, w->d, w->spherical, w->nblocks, w->fix_scale) != 0)
		return dev_error(w, "setup");
	/* hybrid starts half and half (by rows): the first iteration measures both sides */
	if (w->mode == KM_MODE_HYBRID)
		for (g0 = 0; g0 < w->nblocks && w->rows_before[g0] * 2 < w->n; g0++)
			;
	if (g0 > cap)
		g0 = cap;
	if ((rc = put_blocks(w, 0, g0, false)) != GBML_OK)
		return rc;
	w->gpu_blocks = g0;
	w->dev_labels_fresh = true;
	gbml_km_balance_init(&w->balance, w->nblocks, w->rows_before, g0);
	w->balance.max_gpu_blocks = cap;
	return GBML_OK;
}

int
km_dev_open(km_work *w)
{
	gbml_env   *env = w->env;
	int			rc;

	/* rows kept in their written order are ranked on the host only (the driver asks for them on the CPU) */
	w->mode = w->rank_of_row ? KM_MODE_CPU : choose_mode(w);
	w->gpu_blocks = 0;
	if (w->mode == KM_MODE_CPU)
	{
		env->device = GBML_DEVICE_CPU;
		return GBML_OK;
	}
	if ((rc = open_device(w)) == GBML_OK)
	{
		env->device = w->mode == KM_MODE_HYBRID ? GBML_DEVICE_HYBRID : GBML_DEVICE_GPU;
		return GBML_OK;
	}
	if (rc == GBML_EGPUBUDGET && env->device_auto)
	{
		/* auto: the CPU trains instead, and the user hears why */
		gbml_notice(env, GBML_LOG_NOTICE, "kmeans: training on the CPU: %s", env->error);
		snprintf(env->device_note, sizeof(env->device_note), "device auto: over the GPU memory budget");
		env->error[0] = '\0';
		env->error_code = GBML_OK;
		km_dev_close(w);
		w->mode = KM_MODE_CPU;
		env->device = GBML_DEVICE_CPU;
		return GBML_OK;
	}
	return rc;
}

void
km_dev_close(km_work *w)
{
	if (w->ctx == NULL)
		return;
	w->ops->end(w->ctx);
	gbml_gpu_ctx_close(w->env, w->ctx);
	w->ctx = NULL;
	w->gpu_blocks = 0;
}

int
km_dev_set_centers(km_work *w, const gbml_km_centers *C)
{
	gbml_km_device_centers dc;

	dc.c = C->c;
	dc.cnorm_d = C->cnorm_d;
	dc.cmax = C->cmax;
	dc.alpha = C->alpha;
	return w->ops->set_centers(w->ctx, &dc) != 0 ? dev_error(w, "centroid upload") : GBML_OK;
}

int
km_dev_pass_launch(km_work *w, bool update)
{
	w->dev_labels_fresh = false;
	return w->ops->pass_launch(w->ctx, w->block_ids, w->gpu_blocks, update) != 0
		? dev_error(w, "assignment") : GBML_OK;
}

int
km_dev_pass_finish(km_work *w, int64_t *changed, int64_t *rechecked, double *seconds)
{
	gbml_km_pass_result r;

	memset(&r, 0, sizeof(r));
	if (w->ops->pass_finish(w->ctx, w->sums, w->counts, &r) != 0)
		return dev_error(w, "assignment");
	*changed += r.changed;
	*rechecked += r.rechecked;
	*seconds = r.seconds;
	return GBML_OK;
}

int
km_dev_rebalance(km_work *w, double gpu_seconds, double cpu_seconds)
{
	int			g_old = w->gpu_blocks,
				g_new = gbml_km_balance_next(&w->balance, gpu_seconds, cpu_seconds),
				rc;

	/* the blocks between the old and the new split change sides, nothing else moves */
	if ((rc = put_blocks(w, g_old, g_new, false)) != GBML_OK)
		return rc;
	for (int b = g_new; b < g_old; b++)
		if ((rc = drop_block(w, b, true)) != GBML_OK)
			return rc;
	w->blocks_moved += g_new > g_old ? g_new - g_old : g_old - g_new;
	w->gpu_blocks = g_new;
	return GBML_OK;
}

int
km_dev_cand_reset(km_work *w)
{
	return w->ops->cand_reset(w->ctx, w->block_ids, w->gpu_blocks) != 0 ? dev_error(w, "k-means++") : GBML_OK;
}

int
km_dev_cand_pass(km_work *w, int T, int64_t *pot)
{
	return w->ops->cand_pass(w->ctx, w->block_ids, w->gpu_blocks, w->cand, T, w->pot_scale, pot) != 0
		? dev_error(w, "k-means++") : GBML_OK;
}

int
km_dev_cand_take(km_work *w, int t, float *max_out)
{
	return w->ops->cand_take(w->ctx, w->block_ids, w->gpu_blocks, t, max_out) != 0
		? dev_error(w, "k-means++") : GBML_OK;
}

int
km_dev_read_closest(km_work *w, int b, float *out)
{
	return w->ops->read_closest(w->ctx, b, out) != 0 ? dev_error(w, "k-means++") : GBML_OK;
}

int
km_dev_read_labels(km_work *w, int b, int32_t *out)
{
	return w->ops->read_labels(w->ctx, b, out) != 0 ? dev_error(w, "label copy") : GBML_OK;
}

int
km_dev_row_dists(km_work *w)
{
	for (int b = 0; b < w->gpu_blocks; b++)
	{
		const km_block *bl = &w->blocks[b];

		if (w->ops->row_dist(w->ctx, b, w->far[bl->chunk] + bl->start) != 0)
			return dev_error(w, "distances");
	}
	return GBML_OK;
}

int
km_dev_reset_labels(km_work *w)
{
	int			rc;

	/* a new run: the blocks go up again with the host's labels (all -1) */
	if (w->dev_labels_fresh)
		return GBML_OK;
	if ((rc = put_blocks(w, 0, w->gpu_blocks, true)) != GBML_OK)
		return rc;
	w->dev_labels_fresh = true;
	return GBML_OK;
}

int
km_dev_fetch_labels(km_work *w)
{
	int			rc;

	for (int b = 0; b < w->gpu_blocks; b++)
		if ((rc = km_dev_read_labels(w, b, w->labels[w->blocks[b].chunk] + w->blocks[b].start)) != GBML_OK)
			return rc;
	return GBML_OK;
}
