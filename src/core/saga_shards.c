/*
 * saga_shards.c — the linear models across servers, the coordinator's side
 * (saga_shards.h): the label classes and the feature statistics from the
 * shards, then OWL-QN on the same objective as SAGA,
 *
 *   (1/n) sum_i s_i loss(w.z_i + b, y_i) + alpha ((1 - l1_ratio)/2 |w|^2 + l1_ratio |w|_1),
 *
 * z the standardized rows when standardizing.  The shards work at raw-scale
 * weights (w_j scale_j, b + sum_j w_j shift_j) on their raw rows; the
 * coordinator maps their gradient sums back to the standardized scale.
 */
#include "saga_shards.h"
#include "saga_shard_msg.h"
#include "owlqn.h"
#include "saga_kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* SAGA epochs each shard runs on its own rows for the starting point */
#define SG_WARM_EPOCHS 10

typedef struct sg_coord
{
	gbml_shard_channel ch;
	gbml_env   *env;
	const gbml_saga_params *p;
	int			d;
	int64_t		n;
	double		alpha;
	double	   *scale,
			   *shift,
			   *raw;			/* d + 1: raw-scale weights and intercept of the request */
	double	   *sums;			/* d + 3: a loss-gradient reply's sums, all shards */
	gbml_saga_shards_result *out;
	double		t_start;
} sg_coord;

/* The shards' label classes: one encoding for the union, both classes present (logistic); saga.c's rules. */
static int
sg_labels(sg_coord *C)
{
	const gbml_shard_link *link = C->ch.link;
	const char *where = "the rows on the shards";
	char		named[128];
	int64_t		classes = 0;
	double		other = 0;

	C->out->label_encoding = GBML_SAGA_LABELS_NONE;
	for (int s = 0; s < link->n_shards; s++)
	{
		gbml_msg_reader r = {link->hello[s] + GBML_SHARD_HELLO_HEAD, link->hello[s] + link->hello_len[s], false};
		int64_t		k = gbml_msg_get_i64(&r);
		double		o = gbml_msg_get_f64(&r);

		if (r.bad || r.p != r.end)
			return gbml_error(C->env, GBML_EINVAL, "saga: shard %s answered its opening with a malformed message",
							  link->name(link->ctx, s));
		if ((k & GBML_SAGA_CLASS_OTHER) && !(classes & GBML_SAGA_CLASS_OTHER))
		{
			/* the first label outside the classes is named with its shard */
			snprintf(named, sizeof(named), "shard %s", link->name(link->ctx, s));
			where = named;
			other = o;
		}
		classes |= k;
	}
	if (C->p->loss != GBML_SAGA_LOSS_LOGISTIC)
		return GBML_OK;
	return gbml_saga_encoding_of((int) classes, other, where, 0, C->env, &C->out->label_encoding);
}

/* Whether the model standardizes column j (the numeric ones; one-hot indicators stay 0/1). */
static bool
sg_scaled(const sg_coord *C, int j)
{
	return C->p->standardize && j < C->out->n_scaled;
}

/* Population mean and standard deviation of every feature (two sums, as on one server). */
static int
sg_feature_stats(sg_coord *C)
{
	gbml_strbuf *m;
	int			rc;

	m = gbml_shard_request(&C->ch, SG_OP_MOMENTS);
	gbml_msg_put_i64(m, 0);
	for (int j = 0; j < C->d; j++)
		gbml_msg_put_f64(m, 0);
	if ((rc = gbml_shard_send_sum_f64(&C->ch, C->out->mean, (size_t) C->d)) != GBML_OK)
		return rc;
	for (int j = 0; j < C->d; j++)
		C->out->mean[j] /= (double) C->n;
	m = gbml_shard_request(&C->ch, SG_OP_MOMENTS);
	gbml_msg_put_i64(m, 1);
	gbml_msg_put(m, C->out->mean, sizeof(double) * C->d);
	if ((rc = gbml_shard_send_sum_f64(&C->ch, C->out->std, (size_t) C->d)) != GBML_OK)
		return rc;
	for (int j = 0; j < C->d; j++)
	{
		bool		scaled = sg_scaled(C, j);

		C->out->std[j] = sqrt(C->out->std[j] / (double) C->n);
		C->scale[j] = scaled && C->out->std[j] > 0 ? 1.0 / C->out->std[j] : 1.0;
		/*
		 * An unscaled column is centred too when there is an intercept: the
		 * same objective (the penalty is on w; the intercept takes the mean,
		 * given back in sg_model_intercept), but one-hot indicators, whose
		 * block sums to 1 like the intercept's column, no longer leave the
		 * solver a direction of curvature alpha alone to crawl along
		 */
		C->shift[j] = scaled ? -C->out->mean[j] * C->scale[j] : C->p->fit_intercept ? -C->out->mean[j] : 0.0;
	}
	return GBML_OK;
}

/*
 * OWL-QN's f: the smooth part of the objective at x = (w, b) and its
 * gradient, from one loss-gradient round trip at the raw-scale weights.
 */
static int
sg_objective(void *ctx, const double *x, double *f, double *g)
{
	sg_coord   *C = ctx;
	int			d = C->d;
	double		b = C->p->fit_intercept ? x[d] : 0,
				l2 = C->alpha * (1 - C->p->l1_ratio),
				inv_n = 1.0 / (double) C->n,
				ww = 0;
	gbml_strbuf *m = gbml_shard_request(&C->ch, SG_OP_LOSS_GRAD);
	int64_t		before = C->ch.traffic.bytes_sent + C->ch.traffic.bytes_received;
	int			rc;

	for (int j = 0; j < d; j++)
	{
		C->raw[j] = x[j] * C->scale[j];
		b += x[j] * C->shift[j];
	}
	C->raw[d] = b;
	gbml_msg_put(m, C->raw, sizeof(double) * (size_t) (d + 1));
	if ((rc = gbml_shard_send_sum_f64(&C->ch, C->sums, (size_t) d + 3)) != GBML_OK)
		return rc;
	C->ch.traffic.step_bytes = C->ch.traffic.bytes_sent + C->ch.traffic.bytes_received - before;
	for (int j = 0; j < d; j++)
	{
		g[j] = (C->scale[j] * C->sums[3 + j] + C->shift[j] * C->sums[2]) * inv_n + l2 * x[j];
		ww += x[j] * x[j];
	}
	if (C->p->fit_intercept)
		g[d] = C->sums[2] * inv_n;
	*f = C->sums[0] * inv_n + 0.5 * l2 * ww;
	return GBML_OK;
}

static bool
sg_progress(void *ctx, int64_t iteration, double objective, double pg_max)
{
	sg_coord   *C = ctx;
	gbml_saga_shards_result *o = C->out;
	gbml_progress_info info = {"train", iteration, C->p->max_iter, "objective", objective};

	if (o->n_trace < o->trace_cap)
	{
		o->trace_iter[o->n_trace] = (double) iteration;
		o->trace_obj[o->n_trace] = objective;
		o->trace_time[o->n_trace] = gbml_now() - C->t_start;
		o->trace_rel[o->n_trace] = pg_max;
		o->n_trace++;
	}
	return gbml_progress(C->env, &info);
}

/*
 * Where OWL-QN starts: each shard's SAGA solution on its own rows (a few
 * epochs), averaged by row count, at the standardized scale; zeros when no
 * shard solved.  Far nearer the optimum than zero, so the round trips that
 * each cost a pass over every row are fewer.
 */
static int
sg_warm_start(sg_coord *C, double *x)
{
	int			d = C->d;
	double		rows = 0;
	gbml_strbuf *m = gbml_shard_request(&C->ch, SG_OP_LOCAL);
	int			rc;

	gbml_msg_put_f64(m, C->alpha);
	gbml_msg_put_i64(m, SG_WARM_EPOCHS);
	if ((rc = gbml_shard_send(&C->ch)) != GBML_OK)
		return rc;
	memset(C->raw, 0, sizeof(double) * (size_t) (d + 1));
	for (int s = 0; s < C->ch.n_shards; s++)
	{
		gbml_msg_reader r;
		double		solved;

		if (!gbml_shard_reply(&C->ch, s, &r))
			continue;
		solved = gbml_msg_get_f64(&r);
		for (int j = 0; j <= d; j++)
			C->sums[j] = gbml_msg_get_f64(&r);
		if ((rc = gbml_shard_reply_done(&C->ch, s, &r)) != GBML_OK)
			return rc;
		if (solved != 1.0)
			continue;
		for (int j = 0; j <= d; j++)
			C->raw[j] += (double) C->ch.n_rows[s] * C->sums[j];
		rows += (double) C->ch.n_rows[s];
	}
	if (rows == 0)
		return GBML_OK;
	/* raw (w_eff, b_eff) to the standardized scale: w = w_eff / scale, b = b_eff - sum w shift */
	x[d] = C->raw[d] / rows;
	for (int j = 0; j < d; j++)
	{
		x[j] = C->raw[j] / rows / C->scale[j];
		x[d] -= x[j] * C->shift[j];
	}
	if (!C->p->fit_intercept)
		x[d] = 0;
	return GBML_OK;
}

/*
 * The model's intercept for the solver's (x[d]): the model standardizes
 * the first n_scaled columns only, so the centring of the others is given
 * back (b = b' + sum over them of w_j shift_j).
 */
static double
sg_model_intercept(const sg_coord *C, const double *x)
{
	double		b = x[C->d];

	for (int j = 0; j < C->d; j++)
		if (!sg_scaled(C, j))
			b += x[j] * C->shift[j];
	return b;
}

/* OWL-QN from the shards' averaged solutions; the solution, its objective and the metric at it into out. */
static int
sg_solve(sg_coord *C)
{
	gbml_saga_shards_result *o = C->out;
	int			n = C->d + (C->p->fit_intercept ? 1 : 0);
	/*
	 * Stop when the suboptimality is provably below 1e-8 of the objective
	 * (strong convexity alpha (1 - l1_ratio) from the L2 term; the
	 * intercept's curvature comes from the loss, far above alpha in
	 * practice), when the pseudo-gradient is ~0, or when ten iterations
	 * together gained less than 1e-9 of it (then, converging linearly at
	 * any rate up to 0.999 an iteration, less than 1e-7 remains).  30
	 * correction pairs: 10 took 230 iterations on 600k x 100 rows where 30
	 * take 181 and 100 no fewer (tests/bench/distributed_bench.sh).
	 */
	gbml_owlqn_params P = {n, C->d, C->alpha * C->p->l1_ratio, 30, C->p->max_iter, 1e-10, 1e-9,
	C->alpha * (1 - C->p->l1_ratio), 1e-8};
	gbml_owlqn_result res;
	double	   *x = gbml_alloc0(C->env, sizeof(double) * (size_t) (n + 1)),
			   *g = gbml_alloc0(C->env, sizeof(double) * (size_t) (n + 1)),
				f;
	int			rc;

	if (x == NULL || g == NULL)
		rc = C->env->error_code;
	else if ((rc = sg_warm_start(C, x)) == GBML_OK &&
			 (rc = gbml_owlqn(C->env, &P, sg_objective, sg_progress, C, x, &res)) == GBML_OK &&
			 (rc = sg_objective(C, x, &f, g)) == GBML_OK)
	{
		memcpy(o->w, x, sizeof(double) * C->d);
		o->b = C->p->fit_intercept ? sg_model_intercept(C, x) : 0;
		o->objective = res.objective;
		o->metric = C->p->loss == GBML_SAGA_LOSS_LOGISTIC ? C->sums[1] / (double) C->n
			: sqrt(C->sums[1] / (double) C->n);
		o->pg_max = res.pg_max;
		o->gap_bound = res.gap_bound;
		o->rel = res.rel_change;
		o->iterations = res.iterations;
		o->evaluations = res.evaluations + 1;
		o->stop_reason = res.stop_reason;
		o->converged = res.converged;
	}
	gbml_free(C->env, x);
	gbml_free(C->env, g);
	return rc;
}

int
gbml_saga_shards_train(const gbml_dataset *ds, gbml_env *env, const gbml_saga_params *p, double alpha,
					   double t_start, gbml_saga_shards_result *out)
{
	int			d = ds->n_features;
	sg_coord	C;
	double		t0 = gbml_now();
	int			rc;

	memset(&C, 0, sizeof(C));
	C.env = env;
	C.p = p;
	C.d = d;
	C.n = ds->n_rows;
	C.alpha = alpha;
	C.out = out;
	C.t_start = t_start;
	if ((rc = gbml_shard_channel_open(&C.ch, ds->shards, SG_SHARD_MAGIC, "saga", env)) != GBML_OK)
		goto done;
	C.scale = gbml_alloc0(env, sizeof(double) * (size_t) d);
	C.shift = gbml_alloc0(env, sizeof(double) * (size_t) d);
	C.raw = gbml_alloc0(env, sizeof(double) * (size_t) (d + 1));
	C.sums = gbml_alloc0(env, sizeof(double) * (size_t) (d + 3));
	if (!C.scale || !C.shift || !C.raw || !C.sums)
	{
		rc = env->error_code;
		goto done;
	}
	if ((rc = sg_labels(&C)) != GBML_OK || (rc = sg_feature_stats(&C)) != GBML_OK)
		goto done;
	out->t_stats = gbml_now() - t0;
	t0 = gbml_now();
	rc = sg_solve(&C);
	out->t_solver = gbml_now() - t0;
done:
	out->traffic = C.ch.traffic;
	gbml_shard_channel_close(&C.ch);
	gbml_free(env, C.scale);
	gbml_free(env, C.shift);
	gbml_free(env, C.raw);
	gbml_free(env, C.sums);
	return rc;
}
