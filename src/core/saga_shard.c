/*
 * saga_shard.c — a linear model's shard (saga_shards.h): its rows, their
 * labels' classes in the hello, and two answers: per-feature moments (for
 * the standardization) and the loss, its gradient and the metric's
 * statistic at raw-scale weights.  Sums run over fixed blocks of rows
 * added in block order, so an answer does not depend on the thread count.
 * Categorical inputs are one-hot encoded at the opening by the union's
 * counts (onehot_counts.h), as one server encodes them; the held-out rows
 * stay raw for the coordinator to gather and encode.
 */
#include "saga_shards.h"
#include "saga_kernels.h"
#include "saga_shard_msg.h"
#include "chunk_prefetch.h"
#include "onehot.h"

#include <math.h>
#include <string.h>

#define SG_BLOCK_ROWS 4096

typedef struct sg_shard
{
	const gbml_dataset *ds;
	/* the rows eval_fraction held out, raw (the coordinator gathers and encodes them), or NULL */
	const gbml_dataset *eval;
	int			eval_d;			/* their width */
	/* categorical inputs: the encoding by the union's counts, the rows worked on (ds) */
	gbml_onehot *onehot;
	gbml_dataset xds;
	gbml_env   *env;
	gbml_saga_params p;			/* a copy: the opener's params may go before the steps */
	int			dp;				/* padded feature count */
} sg_shard;

static void sg_close(void *state);

static int
sg_open(const gbml_dataset *ds, const gbml_dataset *eval, const void *algo_params, gbml_env *env, void **state,
		gbml_strbuf *hello)
{
	const gbml_saga_params *p = algo_params;
	double		other = 0;
	int64_t		classes = 0;
	sg_shard   *sh;

	*state = NULL;
	if ((sh = gbml_alloc0(env, sizeof(*sh))) == NULL)
		return env->error_code;
	gbml_dataset_init(&sh->xds, false);
	sh->env = env;
	sh->eval_d = ds->n_features;
	if (gbml_schema_n_categorical(ds->schema) > 0 && ds->n_rows > 0)
	{
		gbml_dataset no_eval;	/* (the eval rows stay raw) */
		int			rc = gbml_saga_one_hot(ds, NULL, p, true, env, &sh->onehot, &sh->xds, &no_eval);

		if (rc != GBML_OK)
		{
			sg_close(sh);
			return rc;
		}
		ds = &sh->xds;
	}
	/* (a shard whose every row eval_fraction held out keeps the raw rows' flag, and no row to encode) */
	if (ds->has_missing && ds->n_rows > 0)
	{
		sg_close(sh);
		return gbml_error(env, GBML_EINVAL, "saga: features must be finite (NaN or infinite values found)");
	}
	if (p->loss == GBML_SAGA_LOSS_LOGISTIC)
		classes = gbml_saga_label_classes(ds, &other);
	sh->ds = ds;
	sh->eval = eval;
	sh->p = *p;
	sh->dp = (int) gbml_saga_padded(ds->n_features);
	gbml_shard_hello_head(hello, SG_SHARD_MAGIC, ds->n_rows, ds->n_features);
	gbml_msg_put_i64(hello, classes);
	gbml_msg_put_f64(hello, other);
	*state = sh;
	return gbml_sb_status(hello);
}

static void
sg_close(void *state)
{
	sg_shard   *sh = state;

	if (sh == NULL)
		return;
	gbml_onehot_free(sh->onehot, sh->env);
	gbml_dataset_free(&sh->xds, sh->env);
	gbml_free(sh->env, sh);
}

/* fn(sh, chunk, its features, its rows, arg) for every chunk in order, host or stored. */
static int
sg_each_chunk(sg_shard *sh, int (*fn) (sg_shard *, int, const float *, int64_t, void *), void *arg)
{
	gbml_chunk_prefetch *rd = gbml_chunk_prefetch_open(sh->ds, sh->env);
	const float *x;
	int64_t		rows;
	int			c,
				rc;

	if (rd == NULL)
		return sh->env->error_code;
	while ((rc = gbml_chunk_prefetch_next(rd, &x, &rows, &c)) > 0)
		if ((rc = fn(sh, c, x, rows, arg)) != GBML_OK)
			break;
	gbml_chunk_prefetch_close(rd);
	return rc < 0 ? rc : GBML_OK;
}

typedef struct sg_moments_arg
{
	const double *center;		/* NULL: sums of x */
	double	   *sums;
} sg_moments_arg;

static int
sg_chunk_moments(sg_shard *sh, int c, const float *x, int64_t rows, void *arg)
{
	sg_moments_arg *a = arg;

	(void) c;
	gbml_saga_column_moments(x, rows, sh->ds->n_features, a->center, a->sums);
	return GBML_OK;
}

/* Per-feature sums of x (no center) or of (x - center)^2 over every row. */
static int
sg_moments(sg_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	int			d = sh->ds->n_features;
	bool		centered = gbml_msg_get_i64(r) != 0;
	double	   *center = gbml_alloc0(sh->env, sizeof(double) * sh->dp);
	sg_moments_arg a = {centered ? center : NULL, gbml_alloc0(sh->env, sizeof(double) * sh->dp)};
	int			rc = GBML_OK;

	if (center == NULL || a.sums == NULL)
		rc = sh->env->error_code;
	else
	{
		gbml_msg_get(r, center, sizeof(double) * d);
		if (!r->bad && (rc = sg_each_chunk(sh, sg_chunk_moments, &a)) == GBML_OK)
			gbml_msg_put(reply, a.sums, sizeof(double) * d);
	}
	gbml_free(sh->env, center);
	gbml_free(sh->env, a.sums);
	return rc;
}

/* One block's loss, statistic, intercept gradient and feature gradients (out: d + 3, added to). */
static void
sg_block_loss_grad(const sg_shard *sh, const float *x, const float *label, const float *weight, int64_t n,
				   const double *w, double b, double *out)
{
	int			d = sh->ds->n_features;
	double	   *g = out + 3;

	for (int64_t i = 0; i < n; i++)
	{
		const float *row = x + (size_t) i * d;
		double		z = gbml_saga_dot(w, row, d) + b,
					s = weight ? (double) weight[i] : 1.0,
					dz = s * gbml_saga_loss_deriv(sh->p.loss, z, label[i]);

		out[0] += s * gbml_saga_loss_value(sh->p.loss, z, label[i]);
		if (sh->p.loss == GBML_SAGA_LOSS_LOGISTIC)
			out[1] += ((z > 0) == (label[i] > 0)) ? 1.0 : 0.0;
		else
			out[1] += (z - label[i]) * (z - label[i]);
		out[2] += dz;
		for (int j = 0; j < d; j++)
			g[j] += dz * row[j];
	}
}

typedef struct sg_loss_arg
{
	const double *w;			/* raw scale, padded */
	double		b;
	double	   *total;			/* d + 3 */
} sg_loss_arg;

/* Per chunk: its blocks on the threads, then added in block order into total. */
static int
sg_chunk_loss_grad(sg_shard *sh, int c, const float *x, int64_t rows, void *arg)
{
	const sg_loss_arg *a = arg;
	const gbml_dataset *ds = sh->ds;
	const gbml_chunk *ch = ds->chunks[c];
	int			width = ds->n_features + 3;
	int64_t		n_blocks = (rows + SG_BLOCK_ROWS - 1) / SG_BLOCK_ROWS;
	double	   *part = gbml_alloc0(sh->env, sizeof(double) * (size_t) (n_blocks > 0 ? n_blocks : 1) * width);

	if (part == NULL)
		return sh->env->error_code;
#pragma omp parallel for schedule(dynamic, 1) num_threads(sh->env->threads) if (n_blocks > 1)
	for (int64_t k = 0; k < n_blocks; k++)
	{
		int64_t		r0 = k * SG_BLOCK_ROWS,
					n = rows - r0 < SG_BLOCK_ROWS ? rows - r0 : SG_BLOCK_ROWS;

		sg_block_loss_grad(sh, x + (size_t) r0 * ds->n_features, ch->label + r0,
						   ds->has_weight ? ch->weight + r0 : NULL, n, a->w, a->b, part + (size_t) k * width);
	}
	for (int64_t k = 0; k < n_blocks; k++)
		for (int j = 0; j < width; j++)
			a->total[j] += part[(size_t) k * width + j];
	gbml_free(sh->env, part);
	return GBML_OK;
}

/* At raw-scale weights (w, b): the loss sum, the statistic, the intercept's and the weights' gradient sums. */
static int
sg_loss_grad(sg_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	int			d = sh->ds->n_features;
	double	   *w = gbml_alloc0(sh->env, sizeof(double) * sh->dp);
	sg_loss_arg a = {w, 0, gbml_alloc0(sh->env, sizeof(double) * (size_t) (d + 3))};
	int			rc = GBML_OK;

	if (w == NULL || a.total == NULL)
		rc = sh->env->error_code;
	else
	{
		gbml_msg_get(r, w, sizeof(double) * d);
		a.b = gbml_msg_get_f64(r);
		if (!r->bad && (rc = sg_each_chunk(sh, sg_chunk_loss_grad, &a)) == GBML_OK)
			gbml_msg_put(reply, a.total, sizeof(double) * (size_t) (d + 3));
	}
	gbml_free(sh->env, w);
	gbml_free(sh->env, a.total);
	return rc;
}

/*
 * SAGA on this shard's rows alone, for at most `epochs` epochs: the
 * solution at the raw scale, the coordinator's starting point.  A local
 * solve that fails (a shard with one class diverges) answers "not solved";
 * a cancel, the memory budget or a temporary file that failed is an error.
 */
static int
sg_local(sg_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	int			d = sh->ds->n_features;
	gbml_saga_params p = sh->p;
	double		alpha = gbml_msg_get_f64(r),
				b = 0;
	int64_t		epochs = gbml_msg_get_count(r, 100);
	double	   *w = gbml_alloc0(sh->env, sizeof(double) * sh->dp);
	int			rc;

	if (w == NULL)
		return sh->env->error_code;
	if (r->bad || !(alpha >= 0) || !isfinite(alpha) || epochs < 1)
	{
		r->bad = true;
		gbml_free(sh->env, w);
		return GBML_OK;
	}
	p.max_iter = epochs;
	rc = gbml_saga_local_weights(sh->ds, sh->env, &p, alpha, w, &b);
	if (rc == GBML_ECANCELLED || rc == GBML_EBUDGET || rc == GBML_ENOMEM || rc == GBML_EIO || rc == GBML_ETEMPLIMIT ||
		rc == GBML_EDISKFULL)
	{
		gbml_free(sh->env, w);
		return rc;
	}
	gbml_msg_put_f64(reply, rc == GBML_OK ? 1.0 : 0.0);
	gbml_msg_put(reply, w, sizeof(double) * (size_t) d);
	gbml_msg_put_f64(reply, b);
	gbml_free(sh->env, w);
	return GBML_OK;
}

static int
sg_step(void *state, const uint8_t *req, size_t len, gbml_strbuf *reply)
{
	sg_shard   *sh = state;
	gbml_msg_reader r = {req, req + len, false};
	int64_t		op = gbml_msg_get_i64(&r);
	int			rc;

	/* its eval rows, even without training rows (a small partition's may all be held out) */
	if (op == GBML_SHARD_OP_EVAL_ROWS)
		rc = gbml_shard_eval_rows_page(sh->eval, sh->eval_d, &r, reply, sh->env);
	else if (sh->ds->n_rows == 0)
		return GBML_OK;			/* left out: the coordinator skips its replies */
	else if (op == SG_OP_MOMENTS)
		rc = sg_moments(sh, &r, reply);
	else if (op == SG_OP_LOSS_GRAD)
		rc = sg_loss_grad(sh, &r, reply);
	else if (op == SG_OP_LOCAL)
		rc = sg_local(sh, &r, reply);
	else
		return gbml_error(sh->env, GBML_EINVAL, "saga shard: unknown request %lld", (long long) op);
	if (rc != GBML_OK)
		return rc;
	if (r.bad || r.p != r.end)
		return gbml_error(sh->env, GBML_EINVAL, "saga shard: malformed request %lld", (long long) op);
	return gbml_sb_status(reply);
}

const gbml_shard_ops gbml_saga_shard_ops = {
	.takes_eval_source = true,	/* (the coordinator scores it) */
	.takes_eval_split = true,
	.gathers_eval_split = true,
	.takes_categorical = true,
	.counts_categories = true,
	.hello_magic = SG_SHARD_MAGIC,
	.open = sg_open,
	.step = sg_step,
	.close = sg_close,
};
