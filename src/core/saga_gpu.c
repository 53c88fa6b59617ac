/*
 * saga_gpu.c — see saga_gpu.h: mini-batch SAGA on the device, driven from
 * the host.  The host owns the epochs (the visiting order, drawn from the
 * seeded generator), the step size, the stop rule and the trace; the
 * device owns the rows and the solver state.
 *
 * Step size (Gazagnadou, Gower and Salmon, "Optimal mini-batch and step
 * sizes for SAGA", ICML 2019): for b-nice sampling (b rows drawn without
 * replacement) the expected smoothness constant is bounded by
 *     L(b) = n (b - 1) / (b (n - 1)) L + (n - b) / (b (n - 1)) L_max
 * and with zeta(b) = (n - b) / (b (n - 1)) L_max the step is
 *     gamma = 1 / (4 max{ L(b), zeta(b) + mu n / (4 b) })
 * where, for f_i(w) = s_i loss(z_i.w + b, y_i) (+ the L2 part):
 *     L_max = c max_i s_i (|z_i|^2 + [intercept]) + alpha (1 - l1_ratio)
 *     L     = c lambda_max((1/n) sum_i s_i z'_i z'_i^T) + alpha (1 - l1_ratio)
 *     mu    = alpha (1 - l1_ratio)
 * c = 1/4 (logistic) or 1 (squared), z'_i = (z_i, 1) with an intercept.
 * L_max is the CPU solver's L (the largest row smoothness); L, the whole
 * data's, comes from a power iteration on the device (Rayleigh quotients,
 * which approach lambda_max from below: the factor 4 of the step leaves the
 * room).  b = 1 gives 1/(4 L_max + mu n), SAGA's own step; b = n gives
 * 1/(4 L), gradient descent's.
 *
 * Batches: an epoch visits the rows in the CPU solver's order (saga_plan.h:
 * slices of consecutive canonical rows in a shuffled order, gathered in
 * groups whose rows are shuffled), b consecutive rows a step.
 *
 * Rows on the host or in temporary files (dataset.h's chunk store): the
 * upload of resident rows and every pass read whole chunks in order
 * (chunk_prefetch.h, the next one read ahead); the steps of streamed rows
 * read the epoch's groups of slices (saga_slices.h, the next group read
 * ahead).  A
 * stored row is read once per pass or epoch, and the bytes are those of
 * the same rows in memory.
 *
 * Batch size, automatic: the largest power of two with at least
 * AUTO_STEPS steps an epoch, within [AUTO_MIN, AUTO_MAX].  The basis: on a
 * card a step costs about one kernel launch (a few microseconds) until its
 * rows fill the card, so per step a bigger batch is nearly free; but the
 * step size stays below 1/(4 L) whatever b, so once b is past L_max / L a
 * step makes about a gradient step's progress, and the steps to a given
 * precision stop falling with b (counted on the emulation, where epochs
 * mean what they do on a card and seconds do not: a9a-like data took
 * about 11,000 steps to 1e-4 at b = 16 and 8,600 at b = 256).  So an epoch
 * should keep many steps, and AUTO_MAX is the figure to set from a card:
 * tests/gpu/run.sh prints the time to 1e-4 for batch sizes around it on
 * a9a-like data at 10M rows (no card was available when it was set).
 */
#include "saga_gpu.h"
#include "chunk_prefetch.h"
#include "gpu_ctx.h"
#include "rng.h"
#include "saga_backend.h"
#include "saga_kernels.h"
#include "saga_plan.h"
#include "saga_slices.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#define AUTO_STEPS 1024
#define AUTO_MIN 16
#define AUTO_MAX 4096
#define POWER_MAX_ITER 50
#define POWER_TOL 1e-4			/* stop when successive Rayleigh quotients agree to this */
#define CHECK_ROWS 65536		/* a cancel check at least this often inside an epoch */
#define PARALLEL_COPY_BYTES ((size_t) 1 << 22)	/* host copies from this size use the threads */

/* One GPU training's host side. */
typedef struct saga_gpu
{
	gbml_env   *env;
	const gbml_dataset *ds;
	const gbml_saga_params *p;
	const struct gbml_backend_saga *k;
	gbml_gpu_ctx *ctx;
	int			d;
	int64_t		n;
	int			batch;
	int64_t		stage_rows;
	int64_t		work_rows;		/* positions one steps() call covers: a multiple of batch */
	bool		streamed;
	double		alpha;
	double	   *vec;			/* d + 1 scratch */
	double	   *w1;				/* d + 1: weights and intercept from the device */
	double	   *scale;
	double	   *shift;
	int64_t    *order;			/* this epoch's visiting order, n addresses */
	int64_t    *next_order;		/* the next epoch's, drawn while the device runs this one */
	gbml_saga_plan plan;		/* the groups behind order (saga_plan.h); next_order's once it is drawn */
	int64_t    *maps;			/* per thread: a group's row addresses in group order (plan_epoch) */
	gbml_saga_slices *slices;	/* the epoch's groups: streamed rows only */
	/* streamed rows: the group the next staged position comes from */
	const float *stream_x;		/* its rows from the reader, or NULL: in host chunks */
	int64_t    *stream_map;		/* its row addresses in group order */
	int64_t		stream_end;		/* the position after its last */
	/* the device's chunks (set_device_chunks) */
	int64_t		vrows;			/* rows of each but the last */
	int			n_vchunks;
	int64_t    *chunk_first;	/* the dataset's chunk c starts at row chunk_first[c] (n_chunks + 1) */
	float	   *labels;			/* every row's, in order: uploaded a device chunk at a time */
	float	   *weights;		/* the same, or NULL (all 1) */
} saga_gpu;

static int
backend_error(saga_gpu *g, const char *what)
{
	return gbml_error(g->env, gbml_gpu_ctx_status(g->env, g->ctx), "GPU SAGA %s: %s", what,
					  g->env->gpu->last_error());
}

/* Whether this training runs on the GPU; the reason into env->device_note. */
static bool
wanted(gbml_env *env, const gbml_dataset *ds)
{
	double		values = (double) ds->n_rows * (double) ds->n_features;

	if (env->device != GBML_DEVICE_GPU || env->gpu == NULL)
		return false;
	if (env->gpu->saga == NULL)
	{
		snprintf(env->device_note, sizeof(env->device_note), "the GPU backend has no SAGA kernels");
		return false;
	}
	if (ds->n_features > GBML_SAGA_GPU_MAX_FEATURES)
	{
		snprintf(env->device_note, sizeof(env->device_note), "the GPU trainer takes at most %d features, the rows have %d",
				 GBML_SAGA_GPU_MAX_FEATURES, ds->n_features);
		gbml_notice(env, env->device_auto ? GBML_LOG_DEBUG : GBML_LOG_NOTICE, "saga: training on the CPU: %s",
					env->device_note);
		return false;
	}
	if (env->device_auto && values < (double) GBML_SAGA_GPU_AUTO_MIN_VALUES)
	{
		snprintf(env->device_note, sizeof(env->device_note),
				 "device auto: %.0f values (rows x features) is under the GPU threshold of %lld",
				 values, (long long) GBML_SAGA_GPU_AUTO_MIN_VALUES);
		gbml_notice(env, GBML_LOG_DEBUG, "saga: training on the CPU: %s", env->device_note);
		return false;
	}
	snprintf(env->device_note, sizeof(env->device_note), "%s",
			 env->device_auto ? "device auto: a usable GPU and enough data" : "device gpu");
	return true;
}

int
gbml_saga_gpu_batch(int64_t asked, int64_t n)
{
	int64_t		b = AUTO_MIN;

	if (asked > 0)
		return (int) (asked < n ? asked : n);
	while (b * 2 <= AUTO_MAX && b * 2 * AUTO_STEPS <= n)
		b *= 2;
	return (int) (b < n ? b : n);
}

static void
free_host(saga_gpu *g)
{
	gbml_free(g->env, g->vec);
	gbml_free(g->env, g->w1);
	gbml_free(g->env, g->scale);
	gbml_free(g->env, g->shift);
	gbml_free(g->env, g->order);
	gbml_free(g->env, g->next_order);
	gbml_saga_slices_close(g->slices);
	gbml_saga_plan_free(&g->plan, g->env);
	gbml_free(g->env, g->maps);
	gbml_free(g->env, g->stream_map);
	gbml_free(g->env, g->chunk_first);
	gbml_free(g->env, g->labels);
	gbml_free(g->env, g->weights);
}

/*
 * What the host holds beside the rows, past the budget said so: the
 * epochs' two orders, the groups' maps and, for rows in temporary files,
 * the chunk reader's two buffers (the passes, and the upload of resident
 * rows).  Streamed rows' groups are checked once the device says it
 * streams (check_groups_budget).
 */
static int
check_host_budget(saga_gpu *g)
{
	size_t		reads = gbml_chunk_prefetch_buffer_bytes(g->ds),
				maps = ((size_t) g->env->threads + 1) * (size_t) g->plan.group_rows * sizeof(int64_t);

	return gbml_budget_check(g->env, (size_t) g->n * (2 * sizeof(int64_t) + 2 * sizeof(float)) + maps + reads,
							 "the GPU linear model's host state (its epochs' row orders and the labels and weights it "
							 "uploads, 24 bytes a row for %lld rows, and its groups' maps) and two chunks of rows "
							 "read back from temporary files (%.1f MB)",
							 (long long) g->n, (double) reads / 1048576.0);
}

/* Streamed rows in temporary files: the two groups an epoch reads, beside what is held already. */
static int
check_groups_budget(saga_gpu *g)
{
	size_t		groups = gbml_saga_slices_buffer_bytes(g->ds, &g->plan);

	return gbml_budget_check(g->env, groups + gbml_chunk_prefetch_buffer_bytes(g->ds),
							 "the two groups of rows (%.1f MB) a GPU epoch reads back from temporary files when "
							 "the rows stream to the device, and the passes' two chunks",
							 (double) groups / 1048576.0);
}

static int
alloc_host(saga_gpu *g)
{
	gbml_env   *env = g->env;
	const gbml_dataset *ds = g->ds;
	size_t		d1 = (size_t) g->d + 1;

	if (gbml_saga_plan_init(&g->plan, ds, env) != GBML_OK || check_host_budget(g) != GBML_OK)
		return env->error_code;
	if ((g->vec = gbml_alloc0(env, sizeof(double) * d1)) == NULL ||
		(g->w1 = gbml_alloc0(env, sizeof(double) * d1)) == NULL ||
		(g->scale = gbml_alloc0(env, sizeof(double) * d1)) == NULL ||
		(g->shift = gbml_alloc0(env, sizeof(double) * d1)) == NULL ||
		(g->order = gbml_alloc_array(env, (size_t) g->n, sizeof(int64_t))) == NULL ||
		(g->next_order = gbml_alloc_array(env, (size_t) g->n, sizeof(int64_t))) == NULL ||
		(g->maps = gbml_alloc_array(env, (size_t) env->threads * (size_t) g->plan.group_rows, sizeof(int64_t))) == NULL ||
		(g->stream_map = gbml_alloc_array(env, (size_t) g->plan.group_rows, sizeof(int64_t))) == NULL ||
		(g->chunk_first = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t))) == NULL ||
		(g->labels = gbml_alloc_array(env, (size_t) (g->n > 0 ? g->n : 1), sizeof(float))) == NULL ||
		(ds->has_weight && (g->weights = gbml_alloc_array(env, (size_t) (g->n > 0 ? g->n : 1), sizeof(float))) == NULL))
		return env->error_code;
	return GBML_OK;
}

/* ---------------------------------------------------------------------------
 * rows to the device
 * ------------------------------------------------------------------------- */

/* memcpy, on the threads when it is big (a plain copy: the bytes do not depend on them). */
static void
copy_bytes(const gbml_env *env, void *dst, const void *src, size_t bytes)
{
	const size_t piece = (size_t) 1 << 20;
	int64_t		pieces = (int64_t) ((bytes + piece - 1) / piece);

#pragma omp parallel for schedule(static) num_threads(env->threads) if (env->threads > 1 && bytes >= PARALLEL_COPY_BYTES)
	for (int64_t k = 0; k < pieces; k++)
	{
		size_t		off = (size_t) k * piece;

		memcpy((char *) dst + off, (const char *) src + off, bytes - off < piece ? bytes - off : piece);
	}
}

/*
 * The device's chunks: the rows in their order, cut every vrows rows (the
 * last chunk shorter), vrows a multiple of GBML_SAGA_DEVICE_ROWS: the
 * passes' sums then do not depend on how the dataset's chunks fell (the
 * memory budget, files or memory), so neither do the model bytes.  vrows
 * is the dataset's widest chunk rounded down (GBML_SAGA_DEVICE_ROWS at
 * least), so the staging buffers are about as large as before.
 */
static void
set_device_chunks(saga_gpu *g)
{
	const gbml_dataset *ds = g->ds;
	int64_t		widest = 0;

	g->chunk_first[0] = 0;
	for (int c = 0; c < ds->n_chunks; c++)
	{
		g->chunk_first[c + 1] = g->chunk_first[c] + ds->chunks[c]->n_rows;
		widest = ds->chunks[c]->n_rows > widest ? ds->chunks[c]->n_rows : widest;
		memcpy(g->labels + g->chunk_first[c], ds->chunks[c]->label, sizeof(float) * (size_t) ds->chunks[c]->n_rows);
		if (g->weights)
			memcpy(g->weights + g->chunk_first[c], ds->chunks[c]->weight,
				   sizeof(float) * (size_t) ds->chunks[c]->n_rows);
	}
	g->vrows = widest / GBML_SAGA_DEVICE_ROWS * GBML_SAGA_DEVICE_ROWS;
	if (g->vrows < GBML_SAGA_DEVICE_ROWS)
		g->vrows = GBML_SAGA_DEVICE_ROWS;
	g->n_vchunks = (int) ((g->n + g->vrows - 1) / g->vrows);
}

/* Rows of device chunk v. */
static int64_t
vchunk_rows(const saga_gpu *g, int v)
{
	int64_t		first = (int64_t) v * g->vrows;

	return g->n - first < g->vrows ? g->n - first : g->vrows;
}

/* The device's address of row r of dataset chunk c. */
static int64_t
device_address(const saga_gpu *g, int c, int64_t r)
{
	int64_t		i = g->chunk_first[c] + r;

	return ((i / g->vrows) << 32) | (i % g->vrows);
}

/*
 * Every device chunk's rows in turn in a staging buffer, handed to fn:
 * the dataset's chunks through a chunk reader (stored ones read ahead into
 * the buffers the dataset keeps), copied in where the device chunk wants
 * them.
 */
static int
each_device_chunk(saga_gpu *g, int (*fn) (saga_gpu *g, int v, const float *buf))
{
	gbml_chunk_prefetch *rd;
	const float *x;
	float	   *buf = NULL;
	const size_t d = (size_t) g->d;
	int64_t		rows,
				filled = 0;
	int			v = 0,
				c,
				rc;

	if ((rd = gbml_chunk_prefetch_open(g->ds, g->env)) == NULL)
		return g->env->error_code;
	while ((rc = gbml_chunk_prefetch_next(rd, &x, &rows, &c)) > 0)
	{
		for (int64_t r = 0, m; r < rows; r += m)
		{
			if (buf == NULL && (buf = g->k->stage(g->ctx)) == NULL)
			{
				rc = backend_error(g, "staging");
				goto done;
			}
			m = vchunk_rows(g, v) - filled < rows - r ? vchunk_rows(g, v) - filled : rows - r;
			copy_bytes(g->env, buf + (size_t) filled * d, x + (size_t) r * d, sizeof(float) * (size_t) m * d);
			if ((filled += m) == vchunk_rows(g, v))
			{
				if ((rc = fn(g, v++, buf)) != GBML_OK)
					goto done;
				buf = NULL;
				filled = 0;
			}
		}
	}
done:
	gbml_chunk_prefetch_close(rd);
	return rc < 0 ? rc : GBML_OK;
}

static int
put_device_chunk(saga_gpu *g, int v, const float *buf)
{
	return g->k->put_chunk(g->ctx, v, buf) != 0 ? backend_error(g, "rows upload") : GBML_OK;
}

/* Labels and weights of every device chunk, and the features too when they stay resident. */
static int
load_rows(saga_gpu *g)
{
	for (int v = 0; v < g->n_vchunks; v++)
	{
		size_t		first = (size_t) v * (size_t) g->vrows;

		if (g->k->put_rows(g->ctx, v, g->labels + first, g->weights ? g->weights + first : NULL) != 0)
			return backend_error(g, "labels upload");
	}
	/* streamed: labels only, no chunk to read */
	return g->streamed ? GBML_OK : each_device_chunk(g, put_device_chunk);
}

/* One device chunk of a pass, from the staging buffer (streamed). */
static int
pass_staged(saga_gpu *g, int v, const float *buf)
{
	return g->k->pass_chunk(g->ctx, v, buf) != 0 ? backend_error(g, "pass") : GBML_OK;
}

/* One pass over every row (saga_backend.h's kinds): out[d + 1], scalars[2]. */
static int
run_pass(saga_gpu *g, gbml_saga_pass_kind kind, const double *vec, double extra, double *out, double *scalars)
{
	int			rc;

	if (g->k->pass_begin(g->ctx, kind, vec, extra) != 0)
		return backend_error(g, "pass");
	if (g->streamed && (rc = each_device_chunk(g, pass_staged)) != GBML_OK)
		return rc;
	for (int v = 0; !g->streamed && v < g->n_vchunks; v++)
		if (g->k->pass_chunk(g->ctx, v, NULL) != 0)
			return backend_error(g, "pass");
	return g->k->pass_end(g->ctx, out, scalars) != 0 ? backend_error(g, "pass") : GBML_OK;
}

/* ---------------------------------------------------------------------------
 * statistics and the step size
 * ------------------------------------------------------------------------- */

/* Population mean and standard deviation of every feature (two passes, as saga.c's feature_stats). */
static int
feature_stats(saga_gpu *g, double *mean, double *std)
{
	double		sc[2];
	double		inv_n = 1.0 / (double) g->n;
	int			rc;

	if ((rc = run_pass(g, GBML_SAGA_PASS_SUM, NULL, 0, g->vec, sc)) != GBML_OK)
		return rc;
	for (int j = 0; j < g->d; j++)
		mean[j] = g->vec[j] * inv_n;
	memcpy(g->vec, mean, sizeof(double) * (size_t) g->d);
	g->vec[g->d] = 0;
	if ((rc = run_pass(g, GBML_SAGA_PASS_SQDEV, g->vec, 0, g->vec, sc)) != GBML_OK)
		return rc;
	for (int j = 0; j < g->d; j++)
		std[j] = sqrt(g->vec[j] * inv_n);
	return GBML_OK;
}

/* z = x scale + shift as saga.c's gbml_saga_make_standardizer (columns from n_scaled on stay as they are), on the device too. */
static int
set_scaling(saga_gpu *g, const double *mean, const double *std, int n_scaled)
{
	if (!g->p->standardize)
		return GBML_OK;
	for (int j = 0; j < g->d; j++)
	{
		g->scale[j] = j < n_scaled && std[j] > 0 ? 1.0 / std[j] : 1.0;
		g->shift[j] = j < n_scaled ? -mean[j] * g->scale[j] : 0.0;
	}
	return g->k->set_scaling(g->ctx, g->scale, g->shift) != 0 ? backend_error(g, "scaling") : GBML_OK;
}

/*
 * lambda_max of (1/n) sum s_i z'_i z'_i^T by power iteration from a fixed
 * pseudo-random start: the largest Rayleigh quotient seen (a lower bound
 * that converges to it), stopped once two successive ones agree.
 */
static int
power_iteration(saga_gpu *g, double *lambda, int *iterations)
{
	int			d1 = g->d + (g->p->fit_intercept ? 1 : 0);
	double		sc[2],
				prev = 0,
				norm = 0;
	gbml_rng	rng;
	int			rc;

	*lambda = 0;
	*iterations = 0;
	gbml_rng_seed(&rng, 0x5a6a);
	memset(g->vec, 0, sizeof(double) * ((size_t) g->d + 1));
	for (int j = 0; j < d1; j++)
	{
		g->vec[j] = 0.5 + gbml_rng_uniform(&rng);
		norm += g->vec[j] * g->vec[j];
	}
	for (int j = 0; j < d1; j++)
		g->vec[j] /= sqrt(norm);
	for (int it = 1; it <= POWER_MAX_ITER; it++)
	{
		double		rq = 0,
					nu = 0;

		if ((rc = run_pass(g, GBML_SAGA_PASS_POWER, g->vec, 0, g->w1, sc)) != GBML_OK)
			return rc;
		*iterations = it;
		for (int j = 0; j < d1; j++)
		{
			g->w1[j] /= (double) g->n;
			rq += g->vec[j] * g->w1[j];
			nu += g->w1[j] * g->w1[j];
		}
		if (!(nu > 0))
			break;				/* every row is zero: lambda 0 */
		if (rq > *lambda)
			*lambda = rq;
		if (it > 1 && fabs(rq - prev) <= POWER_TOL * fabs(rq))
			break;
		prev = rq;
		nu = sqrt(nu);
		for (int j = 0; j < d1; j++)
			g->vec[j] = g->w1[j] / nu;
	}
	return GBML_OK;
}

/* The step size of the header's formula; 0 when no constant is positive. */
static double
minibatch_step(double n, double b, double L, double L_max, double mu)
{
	double		Lb = L_max,
				zeta = 0,
				bound;

	if (n > 1)
	{
		Lb = n * (b - 1) / (b * (n - 1)) * L + (n - b) / (b * (n - 1)) * L_max;
		zeta = (n - b) / (b * (n - 1)) * L_max;
	}
	bound = fmax(Lb, zeta + mu * n / (4 * b));
	return bound > 0 ? 1.0 / (4 * bound) : 0;
}

/* Statistics, norms and the step size: what comes before the first epoch. */
static int
prepare(saga_gpu *g, gbml_saga_gpu_result *out)
{
	const gbml_saga_params *p = g->p;
	double		c = p->loss == GBML_SAGA_LOSS_LOGISTIC ? 0.25 : 1.0;
	double		mu = g->alpha * (1 - p->l1_ratio);
	double		sc[2],
				lambda;
	gbml_saga_device_solver s;
	int			rc;

	if ((rc = load_rows(g)) != GBML_OK ||
		(rc = feature_stats(g, out->mean, out->std)) != GBML_OK ||
		(rc = set_scaling(g, out->mean, out->std, out->n_scaled)) != GBML_OK ||
		(rc = run_pass(g, GBML_SAGA_PASS_NORM, NULL, p->fit_intercept ? 1.0 : 0.0, g->vec, sc)) != GBML_OK ||
		(rc = power_iteration(g, &lambda, &out->power_iterations)) != GBML_OK)
		return rc;
	out->L_max = c * sc[0] + mu;
	out->L = c * lambda + mu;
	out->step = p->step_size > 0 ? p->step_size : minibatch_step((double) g->n, g->batch, out->L, out->L_max, mu);
	if (!(out->step > 0))
		out->step = 1.0 / 3.0;	/* all-zero features, no intercept, no L2: any step works (saga.c's L = 1) */
	s.step = out->step;
	s.inv_n = 1.0 / (double) g->n;
	s.l1_threshold = out->step * g->alpha * p->l1_ratio;
	s.l2_shrink = 1.0 / (1.0 + out->step * g->alpha * (1 - p->l1_ratio));
	return g->k->set_solver(g->ctx, &s) != 0 ? backend_error(g, "solver setup") : GBML_OK;
}

/* ---------------------------------------------------------------------------
 * epochs
 * ------------------------------------------------------------------------- */

/* A piece of a group (gbml_saga_plan_pieces): the addresses of its rows [i, i + n), rows [r, r + n) of chunk c. */
static void
map_piece(void *arg, int c, int64_t r, int64_t i, int64_t n)
{
	int64_t    *map = arg;

	for (int64_t k = 0; k < n; k++)
		map[i + k] = ((int64_t) c << 32) | (r + k);
}

/*
 * An epoch's order: the plan's groups (saga_plan.h, the CPU solver's) as
 * the device's row addresses, the groups on the threads, so a ten-million-row epoch is
 * planned in a few milliseconds instead of holding the device up; the
 * order does not depend on the thread count.
 */
static void
plan_epoch(saga_gpu *g, gbml_rng *rng, int64_t *order)
{
	gbml_saga_plan *pl = &g->plan;
	bool		par = g->env->threads > 1 && g->n >= 2048;	/* the checker's thread test takes this path */

	gbml_saga_plan_epoch(pl, rng, g->env->threads);
#pragma omp parallel num_threads(g->env->threads) if (par)
	{
		int64_t    *map = g->maps + (size_t) omp_get_thread_num() * (size_t) pl->group_rows;

#pragma omp for schedule(dynamic, 1)
		for (int64_t j = 0; j < pl->n_groups; j++)
		{
			gbml_saga_plan_pieces(pl, j, map_piece, map);
			for (int64_t p = pl->group_pos[j]; p < pl->group_pos[j + 1]; p++)
			{
				int64_t		a = map[pl->perm[p]];

				order[p] = device_address(g, (int) (a >> 32), a & 0xffffffffLL);
			}
		}
	}
}

/* The next group of the epoch from the reader, for the positions that follow; env's error set on failure. */
static int
next_group(saga_gpu *g)
{
	const gbml_saga_plan *pl = &g->plan;
	int64_t		j;
	int			rc = gbml_saga_slices_next(g->slices, &g->stream_x, &j);

	if (rc <= 0)
		return rc < 0 ? rc : gbml_error(g->env, GBML_EINVAL, "GPU SAGA: the epoch's groups ended before its order");
	gbml_saga_plan_pieces(pl, j, map_piece, g->stream_map);
	g->stream_end = pl->group_pos[j + 1];
	return GBML_OK;
}

/*
 * The rows of positions [p0, p1) of the order into a staging buffer; NULL
 * with env's error set.  Positions come group after group from the reader
 * (a group may go on in the next staging buffer: the reader keeps it until
 * the next group is asked for), each row from the reader's buffer or its
 * host chunk; on the threads when the copy is big (a plain copy: the bytes
 * do not depend on them).
 */
static float *
stage_positions(saga_gpu *g, int64_t p0, int64_t p1)
{
	const gbml_saga_plan *pl = &g->plan;
	const gbml_dataset *ds = g->ds;
	const size_t d = (size_t) g->d;
	float	   *buf = g->k->stage(g->ctx);

	if (buf == NULL)
	{
		backend_error(g, "staging");
		return NULL;
	}
	for (int64_t p = p0, end; p < p1; p = end)
	{
		if (p == g->stream_end && next_group(g) != GBML_OK)
			return NULL;
		end = p1 < g->stream_end ? p1 : g->stream_end;
#pragma omp parallel for schedule(static) num_threads(g->env->threads) \
	if (g->env->threads > 1 && (size_t) (end - p) * d * sizeof(float) >= PARALLEL_COPY_BYTES)
		for (int64_t q = p; q < end; q++)
		{
			uint32_t	i = pl->perm[q];
			int64_t		a = g->stream_map[i];
			const float *src = g->stream_x ? g->stream_x + (size_t) i * d
				: ds->chunks[a >> 32]->x + (size_t) (a & 0xffffffffLL) * d;

			memcpy(buf + (size_t) (q - p0) * d, src, sizeof(float) * d);
		}
	}
	return buf;
}

/*
 * One epoch's steps over g->order, queued b rows a step in runs of
 * work_rows positions (each staged first when streamed), with a cancel
 * check every CHECK_ROWS.
 */
static int
queue_steps(saga_gpu *g, gbml_progress_info *info)
{
	int64_t		since_check = 0;

	for (int64_t p0 = 0; p0 < g->n; p0 += g->work_rows)
	{
		int64_t		p1 = p0 + g->work_rows < g->n ? p0 + g->work_rows : g->n;
		float	   *x = NULL;

		if (g->streamed && (x = stage_positions(g, p0, p1)) == NULL)
			return g->env->error_code;
		if (g->k->steps(g->ctx, p0, p1, x) != 0)
			return backend_error(g, "steps");
		since_check += p1 - p0;
		if (since_check >= CHECK_ROWS && p1 < g->n)
		{
			since_check = 0;
			if (gbml_progress(g->env, info))
				return gbml_error(g->env, GBML_ECANCELLED, "canceled");
		}
	}
	return GBML_OK;
}

/*
 * One epoch; w1 gets the weights and intercept at its end.  Once the steps
 * are queued, the host draws the next epoch's order (last: none) while the
 * device works: the generator's sequence is the same either way.
 */
static int
run_epoch(saga_gpu *g, gbml_rng *rng, bool last, gbml_progress_info *info)
{
	int64_t    *t;
	int			rc;

	if (g->k->epoch_begin(g->ctx, g->order) != 0)
		return backend_error(g, "epoch");
	/* streamed rows come through the group reader, in the epoch's order */
	if (g->slices != NULL)
		gbml_saga_slices_start(g->slices);
	g->stream_end = 0;
	if ((rc = queue_steps(g, info)) != GBML_OK)
		return rc;
	if (!last)
		plan_epoch(g, rng, g->next_order);
	if (g->k->epoch_end(g->ctx, g->w1) != 0)
		return backend_error(g, "epoch");
	t = g->order;
	g->order = g->next_order;
	g->next_order = t;
	return GBML_OK;
}

/* Objective and accuracy (logistic) or RMSE (squared) at the device's weights, as saga.c's evaluate. */
static int
evaluate(saga_gpu *g, double *objective, double *metric)
{
	double		sc[2],
				l2 = 0,
				l1 = 0;
	int			rc;

	if ((rc = run_pass(g, GBML_SAGA_PASS_EVAL, NULL, 0, g->vec, sc)) != GBML_OK)
		return rc;
	for (int j = 0; j < g->d; j++)
	{
		l2 += g->w1[j] * g->w1[j];
		l1 += fabs(g->w1[j]);
	}
	*objective = sc[0] / (double) g->n + g->alpha * ((1 - g->p->l1_ratio) * 0.5 * l2 + g->p->l1_ratio * l1);
	*metric = g->p->loss == GBML_SAGA_LOSS_LOGISTIC ? sc[1] / (double) g->n : sqrt(sc[1] / (double) g->n);
	return GBML_OK;
}

/* max|dw| / max|w| over the epoch, the intercept included (saga.c's rule); w_prev becomes w. */
static double
relative_change(const saga_gpu *g, double *w_prev, double *b_prev)
{
	double		max_change = fabs(g->w1[g->d] - *b_prev),
				max_w = fabs(g->w1[g->d]);

	for (int j = 0; j < g->d; j++)
	{
		double		ch = fabs(g->w1[j] - w_prev[j]);

		max_change = ch > max_change ? ch : max_change;
		max_w = fabs(g->w1[j]) > max_w ? fabs(g->w1[j]) : max_w;
		w_prev[j] = g->w1[j];
	}
	*b_prev = g->w1[g->d];
	return max_w > 0 ? max_change / max_w : (max_change > 0 ? INFINITY : 0);
}

/* The epochs, the stop rule and the trace, as saga_train's loop. */
static int
solve(saga_gpu *g, double t_start, gbml_saga_gpu_result *out)
{
	const gbml_saga_params *p = g->p;
	gbml_rng	rng;
	int64_t		epoch;
	int			rc;

	out->b = 0;
	out->rel = INFINITY;
	out->objective = out->metric = NAN;
	memset(out->w, 0, sizeof(double) * (size_t) g->d);
	gbml_rng_seed(&rng, (uint64_t) p->random_seed);
	plan_epoch(g, &rng, g->order);
	for (epoch = 1; epoch <= p->max_iter; epoch++)
	{
		double		t0 = gbml_now(),
					abs_sum = 0;
		gbml_progress_info info = {"train", epoch, p->max_iter, "objective", NAN};

		if ((rc = run_epoch(g, &rng, epoch == p->max_iter, &info)) != GBML_OK)
			return rc;
		out->rel = relative_change(g, out->w, &out->b);
		out->t_solver += gbml_now() - t0;
		for (int j = 0; j < g->d; j++)
			abs_sum += fabs(out->w[j]);
		if (!isfinite(abs_sum) || !isfinite(out->b))
			return gbml_error(g->env, GBML_EINVAL,
							  "saga: the solver diverged in epoch %lld (non-finite weights); use a smaller step_size (now %g) or standardize",
							  (long long) epoch, out->step);
		out->converged = out->rel < p->tol;
		/* the objective on saga.c's schedule: every epoch up to 20, then every 10th, and the last */
		if (epoch <= 20 || epoch % 10 == 0 || out->converged || epoch == p->max_iter)
		{
			t0 = gbml_now();
			if ((rc = evaluate(g, &out->objective, &out->metric)) != GBML_OK)
				return rc;
			out->t_objective += gbml_now() - t0;
			if (out->n_trace < out->trace_cap)
			{
				out->trace_epoch[out->n_trace] = (double) epoch;
				out->trace_obj[out->n_trace] = out->objective;
				out->trace_time[out->n_trace] = gbml_now() - t_start;
				out->trace_rel[out->n_trace] = out->rel;
				out->n_trace++;
			}
		}
		info.metric = out->objective;
		if (gbml_progress(g->env, &info))
			return gbml_error(g->env, GBML_ECANCELLED, "canceled");
		if (out->converged)
			break;
	}
	out->epochs = epoch > p->max_iter ? p->max_iter : epoch;
	return GBML_OK;
}

/* ---------------------------------------------------------------------------
 * the training
 * ------------------------------------------------------------------------- */

/* begin on the device; under auto a training over the budget falls back to the CPU (g->ctx NULL). */
static int
begin(saga_gpu *g)
{
	const gbml_dataset *ds = g->ds;
	gbml_saga_device_shape shape;
	int64_t    *rows;
	int64_t		widest = 0;
	int			rc = GBML_OK;

	if ((rows = gbml_alloc_array(g->env, (size_t) (g->n_vchunks > 0 ? g->n_vchunks : 1), sizeof(int64_t))) == NULL)
		return g->env->error_code;
	for (int v = 0; v < g->n_vchunks; v++)
	{
		rows[v] = vchunk_rows(g, v);
		widest = rows[v] > widest ? rows[v] : widest;
	}
	g->stage_rows = widest > g->batch ? widest : g->batch;
	g->work_rows = g->stage_rows / g->batch * g->batch;
	memset(&shape, 0, sizeof(shape));
	shape.n_rows = g->n;
	shape.n_features = g->d;
	shape.n_chunks = g->n_vchunks;
	shape.chunk_rows = rows;
	shape.loss = g->p->loss;
	shape.fit_intercept = g->p->fit_intercept;
	shape.has_weight = ds->has_weight;
	shape.batch_size = g->batch;
	shape.stage_rows = g->stage_rows;
	if (g->k->begin(g->ctx, &shape, &g->streamed) != 0)
	{
		rc = backend_error(g, "setup");
		if (rc == GBML_EGPUBUDGET && g->env->device_auto)
		{
			/* auto: the CPU trains instead, and the user hears why */
			gbml_notice(g->env, GBML_LOG_NOTICE, "saga: training on the CPU: %s", g->env->error);
			snprintf(g->env->device_note, sizeof(g->env->device_note), "device auto: over the GPU memory budget");
			g->env->error[0] = '\0';
			g->env->error_code = GBML_OK;
			gbml_gpu_ctx_close(g->env, g->ctx);
			g->ctx = NULL;
			rc = GBML_OK;
		}
	}
	gbml_free(g->env, rows);
	return rc;
}

int
gbml_saga_gpu_train(const gbml_dataset *ds, gbml_env *env, const gbml_saga_params *p, double alpha,
					double t_start, gbml_saga_gpu_result *out)
{
	saga_gpu	g;
	int			rc;

	out->on_gpu = false;
	if (!wanted(env, ds))
	{
		env->device = GBML_DEVICE_CPU;
		return GBML_OK;
	}
	/* rows in temporary files come through the reader; device chunks belong to another context */
	if (ds->store != NULL && strcmp(ds->store->residence, "file") != 0)
		return gbml_error(env, GBML_EDEVICE, "saga: the rows are in %s, which the GPU trainer cannot read",
						  ds->store->where);
	memset(&g, 0, sizeof(g));
	g.env = env;
	g.ds = ds;
	g.p = p;
	g.k = env->gpu->saga;
	g.d = ds->n_features;
	g.n = ds->n_rows;
	g.alpha = alpha;
	g.batch = gbml_saga_gpu_batch(p->batch_size, ds->n_rows);
	if ((rc = alloc_host(&g)) != GBML_OK)
		goto done;
	set_device_chunks(&g);
	if ((g.ctx = gbml_gpu_ctx_open(env)) == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	if ((rc = begin(&g)) != GBML_OK || g.ctx == NULL)
	{
		if (g.ctx == NULL)
			env->device = GBML_DEVICE_CPU;
		goto done;
	}
	/* streamed rows: the epochs read them a group at a time */
	if (g.streamed && ((rc = check_groups_budget(&g)) != GBML_OK ||
					   (g.slices = gbml_saga_slices_open(ds, env, &g.plan)) == NULL))
	{
		rc = rc != GBML_OK ? rc : env->error_code;
		goto done;
	}
	out->on_gpu = true;
	out->streamed = g.streamed;
	out->batch_size = g.batch;
	if ((rc = prepare(&g, out)) != GBML_OK)
		goto done;
	out->t_stats = gbml_now() - t_start;
	rc = solve(&g, t_start, out);
done:
	gbml_gpu_ctx_close(env, g.ctx);
	free_host(&g);
	return rc;
}
