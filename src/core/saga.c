/*
 * saga.c — the SAGA linear-model trainer (the Dask SAGA seed), its model
 * section, loader, scorer and JSON dump.
 *
 * Training follows the seed's chunked design: the solver state (weights,
 * average gradient, one stored gradient scalar per row kept beside its chunk)
 * is carried from chunk to chunk; each epoch visits slices of 256 rows of the
 * chunks' shuffled orders in a shuffled order (plan_epoch: whole chunks one
 * after the other, as in the seed, converged badly), all drawn from one
 * seeded generator on the main thread.  SAGA itself is sequential, so the
 * model bytes do not depend on the thread count; threads only speed up the
 * objective/metric passes, which sum fixed row blocks and combine them in
 * block order.
 *
 * Penalties: the smooth part of the objective is the data term; the whole
 * elastic-net penalty alpha((1-r)/2 |w|^2 + r |w|_1) is applied through its
 * exact proximal map (saga_kernels.c), which keeps a lasso solution exactly
 * sparse.  Step size 1/(3L), L = c max_i s_i (|x_i|^2 + [intercept]) +
 * alpha (1 - r), c = 1/4 (logistic) or 1 (squared): the largest per-row
 * smoothness constant, as in the DESIGN and scikit-learn.
 *
 * On the GPU (env->device, saga_gpu.h) mini-batch SAGA replaces the CPU's
 * statistics and epochs; the model section and the metadata are written
 * here for both.
 */
#include "saga.h"
#include "saga_gpu.h"
#include "saga_kernels.h"
#include "rng.h"

#include <math.h>
#include <string.h>

#define TRACE_CAP 1000
#define EVAL_BLOCK_ROWS 4096
#define SLICE_ROWS 256			/* rows of one chunk visited in a row (see plan_epoch) */
#define PARALLEL_MIN_VALUES (1 << 21)	/* rows x features below which passes stay serial */

static const char *const loss_choices[] = {"logistic", "squared", NULL};

#define SP(field) offsetof(gbml_saga_params, field)
const gbml_param_spec gbml_saga_param_specs[] = {
	{"loss", GBML_PARAM_ENUM, SP(loss), 0, 0, 0, NULL, loss_choices,
	"logistic (binary labels 0/1, -1/+1 or boolean) or squared (regression)"},
	{"alpha", GBML_PARAM_REAL, SP(alpha), 0, 1e9, 1e-4, NULL, NULL,
	"penalty strength: alpha * ((1 - l1_ratio)/2 * sum(w^2) + l1_ratio * sum(abs(w)))"},
	{"C", GBML_PARAM_REAL, SP(C), 0, 1e15, 0, NULL, NULL,
	"scikit-learn's inverse penalty: when > 0, alpha = 1/(C*rows) (overrides alpha)"},
	{"l1_ratio", GBML_PARAM_REAL, SP(l1_ratio), 0, 1, 0, NULL, NULL,
	"share of the L1 penalty: 0 = ridge (L2), 1 = lasso (L1), between = elastic net"},
	{"tol", GBML_PARAM_REAL, SP(tol), 0, 1, 1e-4, NULL, NULL,
	"stop when the largest weight change over an epoch divided by the largest weight is below tol (0: run max_iter epochs)"},
	{"max_iter", GBML_PARAM_INT, SP(max_iter), 1, 1e6, 1000, NULL, NULL,
	"maximum number of epochs (passes over the data)"},
	{"step_size", GBML_PARAM_REAL, SP(step_size), 0, 1e9, 0, NULL, NULL,
	"SAGA step size; 0 = automatic 1/(3L) from the largest squared row norm"},
	{"fit_intercept", GBML_PARAM_BOOL, SP(fit_intercept), 0, 1, 1, NULL, NULL,
	"learn an unpenalized intercept"},
	{"random_seed", GBML_PARAM_INT, SP(random_seed), 0, 9007199254740992.0, 0, NULL, NULL,
	"seed of the row and slice shuffles"},
	{"standardize", GBML_PARAM_BOOL, SP(standardize), 0, 1, 0, NULL, NULL,
	"scale features to mean 0, standard deviation 1 at train time (applied again at predict time)"},
	{"batch_size", GBML_PARAM_INT, SP(batch_size), 0, 1e6, 0, NULL, NULL,
	"GPU only: rows of one mini-batch SAGA step (at most the row count); 0 = automatic (docs/gpu.md)"},
	GBML_PARAM_END
};
#undef SP

/* ---------------------------------------------------------------------------
 * helpers shared by the trainer and the loader
 * ------------------------------------------------------------------------- */

/* z = x*scale + shift: scale = 1/std (1 for a constant feature), shift = -mean*scale. */
static void
make_standardizer(int d, const double *mean, const double *std, double *scale, double *shift)
{
	for (int j = 0; j < d; j++)
	{
		scale[j] = std[j] > 0 ? 1.0 / std[j] : 1.0;
		shift[j] = -mean[j] * scale[j];
	}
}

/* Raw-feature weights equivalent to (w, b) on the standardized scale. */
static void
effective_weights(int d, const double *w, double b, const double *scale, const double *shift,
				  double *w_eff, double *b_eff)
{
	double		bb = b;

	for (int j = 0; j < d; j++)
	{
		w_eff[j] = scale ? w[j] * scale[j] : w[j];
		if (shift)
			bb += w[j] * shift[j];
	}
	*b_eff = bb;
}

static const char *
encoding_name(int enc)
{
	return enc == GBML_SAGA_LABELS_01 ? "0/1" : enc == GBML_SAGA_LABELS_PM1 ? "-1/+1" : "none";
}

/* ---------------------------------------------------------------------------
 * training
 * ------------------------------------------------------------------------- */

typedef struct saga_state
{
	int			d;
	int64_t		dp;				/* padded length of the vectors */
	double	   *w,
			   *avg,
			   *w_prev,
			   *w_eff,
			   *mean,
			   *std,
			   *scale,
			   *shift;
	double	  **memory;			/* per chunk: one stored gradient per row */
	uint32_t   *order;			/* every chunk's row order, chunk c at row_start[c] */
	int64_t    *row_start;		/* n_chunks + 1 */
	uint64_t   *slice_at;		/* this epoch's slices: chunk << 32 | first position in its order */
	int64_t		n_slices;
	double	   *trace_epoch,
			   *trace_obj,
			   *trace_time,
			   *trace_rel;
} saga_state;

static void
state_free(saga_state *st, const gbml_dataset *ds, gbml_env *env)
{
	if (st->memory)
		for (int c = 0; c < ds->n_chunks; c++)
			gbml_free(env, st->memory[c]);
	gbml_free(env, st->memory);
	gbml_free(env, st->w);
	gbml_free(env, st->avg);
	gbml_free(env, st->w_prev);
	gbml_free(env, st->w_eff);
	gbml_free(env, st->mean);
	gbml_free(env, st->std);
	gbml_free(env, st->scale);
	gbml_free(env, st->shift);
	gbml_free(env, st->order);
	gbml_free(env, st->row_start);
	gbml_free(env, st->slice_at);
	gbml_free(env, st->trace_epoch);
	gbml_free(env, st->trace_obj);
	gbml_free(env, st->trace_time);
	gbml_free(env, st->trace_rel);
}

static double *
alloc_vec(gbml_env *env, int64_t dp)
{
	return gbml_alloc0(env, sizeof(double) * (size_t) dp);
}

/*
 * Checks logistic labels and finds their encoding.  `want` is 0 for the
 * training set (detect, into *enc), or the training encoding for an eval set
 * (checked against it; enc unused).
 */
static int
check_labels(const gbml_dataset *ds, gbml_env *env, const char *what, int want, int *enc)
{
	bool		has_pos = false,
				has_zero = false,
				has_neg = false;

	for (int c = 0; c < ds->n_chunks; c++)
	{
		const gbml_chunk *ch = ds->chunks[c];

		for (int64_t r = 0; r < ch->n_rows; r++)
		{
			float		y = ch->label[r];

			if (y == 1.0f)
				has_pos = true;
			else if (y == 0.0f)
				has_zero = true;
			else if (y == -1.0f)
				has_neg = true;
			else
				return gbml_error(env, GBML_EINVAL,
								  "saga: %s has a row with label %g, which is not a class label for loss \"logistic\" (use 0/1, -1/+1 or boolean)",
								  what, (double) y);
		}
	}
	if (has_zero && has_neg)
		return gbml_error(env, GBML_EINVAL,
						  "saga: %s mixes labels 0 and -1; for loss \"logistic\" use either 0/1 or -1/+1", what);
	if (want != 0)
	{
		if ((want == GBML_SAGA_LABELS_01 && has_neg) || (want == GBML_SAGA_LABELS_PM1 && has_zero))
			return gbml_error(env, GBML_EINVAL,
							  "saga: the eval set's labels are %s but the training labels are %s",
							  has_neg ? "-1/+1" : "0/1", encoding_name(want));
		return GBML_OK;
	}
	if (!has_pos || !(has_zero || has_neg))
		return gbml_error(env, GBML_EINVAL,
						  "saga: loss \"logistic\" needs rows of both classes, but every row has label %s",
						  has_pos ? "1" : has_neg ? "-1" : "0");
	*enc = has_neg ? GBML_SAGA_LABELS_PM1 : GBML_SAGA_LABELS_01;
	return GBML_OK;
}

static inline int64_t
Min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * The visiting order of one epoch.  The rows of every chunk are shuffled;
 * with one chunk that is the epoch (a uniformly random permutation).  With
 * several, each chunk's shuffled order is cut into slices of SLICE_ROWS and
 * the slices of all chunks are shuffled together, so an epoch is close to a
 * uniformly random permutation of all rows.  Visiting whole chunks one after
 * the other (the seed's loop, chunk order shuffled) measured much worse:
 * a9a split in two chunks stalled near 1e-4 relative suboptimality and drifted
 * up with more epochs, where one chunk reaches 1e-8 in 200 epochs; the
 * solver state stayed exact (the average gradient matched its stored
 * gradients to 1e-17), it is the order: long runs of one subset.
 */
static void
plan_epoch(saga_state *st, const gbml_dataset *ds, gbml_rng *rng)
{
	int64_t		ns = 0;

	for (int c = 0; c < ds->n_chunks; c++)
	{
		int64_t		rows = ds->chunks[c]->n_rows;
		uint32_t   *o = st->order + st->row_start[c];

		for (int64_t r = 0; r < rows; r++)
			o[r] = (uint32_t) r;
		gbml_rng_shuffle_u32(rng, o, (uint64_t) rows);
	}
	if (ds->n_chunks == 1)
	{
		st->slice_at[0] = 0;
		st->n_slices = 1;
		return;
	}
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r += SLICE_ROWS)
			st->slice_at[ns++] = ((uint64_t) c << 32) | (uint64_t) r;
	gbml_rng_shuffle_u64(rng, st->slice_at, (uint64_t) ns);
	st->n_slices = ns;
}

/*
 * Population mean and standard deviation of every feature: two passes (sum,
 * then squared deviations from the mean, which stays accurate when the mean
 * is large against the spread), chunk by chunk in chunk order.  mean and std
 * are padded vectors.
 */
static void
feature_stats(const gbml_dataset *ds, int d, double *mean, double *std)
{
	double		inv_n = 1.0 / (double) ds->n_rows;

	memset(mean, 0, sizeof(double) * (size_t) gbml_saga_padded(d));
	memset(std, 0, sizeof(double) * (size_t) gbml_saga_padded(d));
	for (int c = 0; c < ds->n_chunks; c++)
		gbml_saga_column_moments(ds->chunks[c]->x, ds->chunks[c]->n_rows, d, NULL, mean);
	for (int j = 0; j < d; j++)
		mean[j] *= inv_n;
	for (int c = 0; c < ds->n_chunks; c++)
		gbml_saga_column_moments(ds->chunks[c]->x, ds->chunks[c]->n_rows, d, mean, std);
	for (int j = 0; j < d; j++)
		std[j] = sqrt(std[j] * inv_n);
}

/*
 * Sums of weighted loss and of the accuracy/squared-error statistic over a
 * dataset at raw-space weights (w_eff padded, b_eff), in fixed blocks of
 * EVAL_BLOCK_ROWS combined in block order: the result does not depend on
 * the thread count.
 */
static int
dataset_eval(const gbml_dataset *ds, gbml_env *env, const double *w_eff, double b_eff,
			 int loss, double *loss_sum, double *stat)
{
	int64_t		n_blocks = 0;
	int64_t    *block_start;
	double	   *part;
	int64_t		b = 0;
	double		ls = 0,
				st = 0;

	for (int c = 0; c < ds->n_chunks; c++)
		n_blocks += (ds->chunks[c]->n_rows + EVAL_BLOCK_ROWS - 1) / EVAL_BLOCK_ROWS;
	if (n_blocks == 0)
	{
		*loss_sum = *stat = 0;
		return GBML_OK;
	}
	/* per block: chunk index and first row, packed as chunk * 2^32 + row */
	block_start = gbml_alloc_array(env, (size_t) n_blocks, sizeof(int64_t));
	part = gbml_alloc_array(env, (size_t) n_blocks * 2, sizeof(double));
	if (block_start == NULL || part == NULL)
	{
		gbml_free(env, block_start);
		gbml_free(env, part);
		return env->error_code;
	}
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r += EVAL_BLOCK_ROWS)
			block_start[b++] = ((int64_t) c << 32) | r;

	/*
	 * Threads only pay off on big data: on a small set the fork/join costs
	 * more than the pass (and much more when the machine is oversubscribed).
	 */
#pragma omp parallel for schedule(dynamic, 1) num_threads(env->threads) \
	if (env->threads > 1 && n_blocks > 1 && (double) ds->n_rows * ds->n_features >= PARALLEL_MIN_VALUES)
	for (int64_t k = 0; k < n_blocks; k++)
	{
		int			c = (int) (block_start[k] >> 32);
		int64_t		r0 = block_start[k] & 0xffffffffLL;
		const gbml_chunk *ch = ds->chunks[c];
		int64_t		cnt = ch->n_rows - r0 < EVAL_BLOCK_ROWS ? ch->n_rows - r0 : EVAL_BLOCK_ROWS;

		gbml_saga_block_eval(ch->x + (size_t) r0 * ds->n_features, ch->label + r0,
							 ds->has_weight ? ch->weight + r0 : NULL,
							 cnt, ds->n_features, w_eff, b_eff, loss, part + 2 * k);
	}
	for (int64_t k = 0; k < n_blocks; k++)
	{
		ls += part[2 * k];
		st += part[2 * k + 1];
	}
	*loss_sum = ls;
	*stat = st;
	gbml_free(env, block_start);
	gbml_free(env, part);
	return GBML_OK;
}

static double
penalty(const double *w, int d, double alpha, double l1_ratio)
{
	double		l2 = 0,
				l1 = 0;

	for (int j = 0; j < d; j++)
	{
		l2 += w[j] * w[j];
		l1 += fabs(w[j]);
	}
	return alpha * ((1 - l1_ratio) * 0.5 * l2 + l1_ratio * l1);
}

/* Objective and the accuracy (logistic) or RMSE (squared) of (w, b) on ds. */
static int
evaluate(const gbml_dataset *ds, gbml_env *env, saga_state *st, double b, int loss,
		 double alpha, double l1_ratio, bool stdz, double *objective, double *metric)
{
	double		b_eff,
				loss_sum = 0,
				stat = 0;
	int			rc;

	effective_weights(st->d, st->w, b, stdz ? st->scale : NULL, stdz ? st->shift : NULL,
					  st->w_eff, &b_eff);
	if ((rc = dataset_eval(ds, env, st->w_eff, b_eff, loss, &loss_sum, &stat)) != GBML_OK)
		return rc;
	*objective = loss_sum / (double) ds->n_rows + penalty(st->w, st->d, alpha, l1_ratio);
	*metric = loss == GBML_SAGA_LOSS_LOGISTIC ? stat / (double) ds->n_rows
			: sqrt(stat / (double) ds->n_rows);
	return GBML_OK;
}

static int
saga_train(const gbml_dataset *ds, gbml_train_context *ctx)
{
	const gbml_saga_params *p = ctx->params;
	gbml_env   *env = ctx->env;
	const int	d = ds->n_features;
	const int64_t n = ds->n_rows;
	const int	loss = p->loss;
	const bool	stdz = p->standardize;
	saga_state	st;
	gbml_rng	rng;
	gbml_saga_pass_args a;
	gbml_strbuf body;
	double		alpha,
				L,
				max_norm,
				step,
				b = 0,
				avg_b = 0,
				objective = NAN,
				metric = NAN,
				rel = INFINITY,
				t_start = gbml_now(),
				t_stats,
				t_solver = 0,
				t_objective = 0;
	int64_t		epoch = 0,
				n_trace = 0,
				n_nonzero = 0;
	int			enc = GBML_SAGA_LABELS_NONE,
				rc = GBML_OK;
	bool		converged = false,
				first = true;
	gbml_saga_gpu_result gpu;

	memset(&st, 0, sizeof(st));
	memset(&gpu, 0, sizeof(gpu));
	if (ds->has_missing)
		return gbml_error(env, GBML_EINVAL, "saga: features must be finite (NaN or infinite values found)");
	if (loss == GBML_SAGA_LOSS_LOGISTIC)
	{
		if ((rc = check_labels(ds, env, "the training set", 0, &enc)) != GBML_OK)
			return rc;
		if (ctx->eval && (rc = check_labels(ctx->eval, env, "the eval set", enc, NULL)) != GBML_OK)
			return rc;
	}
	alpha = p->C > 0 ? 1.0 / (p->C * (double) n) : p->alpha;

	st.d = d;
	st.dp = gbml_saga_padded(d);
	if ((st.w = alloc_vec(env, st.dp)) == NULL ||
		(st.avg = alloc_vec(env, st.dp)) == NULL ||
		(st.w_prev = alloc_vec(env, st.dp)) == NULL ||
		(st.w_eff = alloc_vec(env, st.dp)) == NULL ||
		(st.mean = alloc_vec(env, st.dp)) == NULL ||
		(st.std = alloc_vec(env, st.dp)) == NULL ||
		(st.scale = alloc_vec(env, st.dp)) == NULL ||
		(st.shift = alloc_vec(env, st.dp)) == NULL ||
		(st.memory = gbml_alloc0(env, sizeof(double *) * (size_t) ds->n_chunks)) == NULL ||
		(st.order = gbml_alloc_array(env, (size_t) n, sizeof(uint32_t))) == NULL ||
		(st.row_start = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t))) == NULL ||
		(st.slice_at = gbml_alloc_array(env, (size_t) (n / SLICE_ROWS + ds->n_chunks), sizeof(uint64_t))) == NULL ||
		(st.trace_epoch = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL ||
		(st.trace_obj = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL ||
		(st.trace_time = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL ||
		(st.trace_rel = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	if (env->device == GBML_DEVICE_GPU)
	{
		/* mini-batch SAGA on the device (saga_gpu.h); the model is written below as for the CPU */
		gpu.w = st.w;
		gpu.mean = st.mean;
		gpu.std = st.std;
		gpu.trace_epoch = st.trace_epoch;
		gpu.trace_obj = st.trace_obj;
		gpu.trace_time = st.trace_time;
		gpu.trace_rel = st.trace_rel;
		gpu.trace_cap = TRACE_CAP;
		if ((rc = gbml_saga_gpu_train(ds, env, p, alpha, t_start, &gpu)) != GBML_OK)
			goto done;
		if (gpu.on_gpu)
		{
			make_standardizer(d, st.mean, st.std, st.scale, st.shift);
			b = gpu.b;
			L = gpu.L;
			step = gpu.step;
			epoch = gpu.epochs;
			converged = gpu.converged;
			rel = gpu.rel;
			objective = gpu.objective;
			metric = gpu.metric;
			n_trace = gpu.n_trace;
			t_stats = gpu.t_stats;
			t_solver = gpu.t_solver;
			t_objective = gpu.t_objective;
			goto solved;
		}
	}
	st.row_start[0] = 0;
	for (int c = 0; c < ds->n_chunks; c++)
	{
		st.row_start[c + 1] = st.row_start[c] + ds->chunks[c]->n_rows;
		if ((st.memory[c] = gbml_alloc0(env, sizeof(double) * (size_t) ds->chunks[c]->n_rows)) == NULL)
		{
			rc = env->error_code;
			goto done;
		}
	}

	/* feature statistics (always: they are stored for importance) and the step size */
	feature_stats(ds, d, st.mean, st.std);
	make_standardizer(d, st.mean, st.std, st.scale, st.shift);
	max_norm = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(max:max_norm) num_threads(env->threads) \
	if (env->threads > 1 && ds->n_chunks > 1)
	for (int c = 0; c < ds->n_chunks; c++)
	{
		const gbml_chunk *ch = ds->chunks[c];
		double		m = gbml_saga_max_row_norm(ch->x, ds->has_weight ? ch->weight : NULL, ch->n_rows, d,
											   stdz ? st.scale : NULL, stdz ? st.shift : NULL,
											   p->fit_intercept ? 1.0 : 0.0);

		if (m > max_norm)
			max_norm = m;
	}
	L = (loss == GBML_SAGA_LOSS_LOGISTIC ? 0.25 : 1.0) * max_norm + alpha * (1 - p->l1_ratio);
	if (!(L > 0))
		L = 1;					/* all-zero features, no intercept, no L2: any step works */
	step = p->step_size > 0 ? p->step_size : 1.0 / (3.0 * L);
	t_stats = gbml_now() - t_start;

	/* what every pass shares; per slice only the chunk's arrays and the rows change */
	a.d = d;
	a.scale = stdz ? st.scale : NULL;
	a.shift = stdz ? st.shift : NULL;
	a.w = st.w;
	a.avg = st.avg;
	a.intercept = &b;
	a.avg_intercept = &avg_b;
	a.loss = loss;
	a.fit_intercept = p->fit_intercept;
	a.step = step;
	a.inv_n = 1.0 / (double) n;
	a.l1_threshold = step * alpha * p->l1_ratio;
	a.l2_shrink = 1.0 / (1.0 + step * alpha * (1 - p->l1_ratio));

	gbml_rng_seed(&rng, (uint64_t) p->random_seed);
	for (epoch = 1; epoch <= p->max_iter; epoch++)
	{
		double		t0 = gbml_now(),
					max_change = 0,
					max_w = 0,
					abs_sum = 0;
		gbml_progress_info info = {"train", epoch, p->max_iter, "objective", NAN};

		memcpy(st.w_prev, st.w, sizeof(double) * (size_t) d);
		plan_epoch(&st, ds, &rng);
		{
			double		b_before = b;
			int64_t		since_check = 0;

			for (int64_t k = 0; k < st.n_slices; k++)
			{
				int			c = (int) (st.slice_at[k] >> 32);
				int64_t		first_pos = (int64_t) (uint32_t) st.slice_at[k];
				const gbml_chunk *ch = ds->chunks[c];

				a.x = ch->x;
				a.label = ch->label;
				a.weight = ds->has_weight ? ch->weight : NULL;
				a.order = st.order + st.row_start[c] + first_pos;
				a.n_visit = st.n_slices == 1 ? ch->n_rows : Min64(SLICE_ROWS, ch->n_rows - first_pos);
				a.n_rows = ch->n_rows;
				a.memory = st.memory[c];
				gbml_saga_chunk_pass(&a);
				/* a cancel check every ~64k rows: an epoch over a big table can take seconds */
				since_check += a.n_visit;
				if (since_check >= 65536 && k + 1 < st.n_slices)
				{
					since_check = 0;
					if (gbml_progress(env, &info))
					{
						rc = gbml_error(env, GBML_ECANCELLED, "canceled");
						goto done;
					}
				}
			}
			max_change = fabs(b - b_before);
			max_w = fabs(b);
		}
		for (int j = 0; j < d; j++)
		{
			double		ch = fabs(st.w[j] - st.w_prev[j]);

			if (ch > max_change)
				max_change = ch;
			if (fabs(st.w[j]) > max_w)
				max_w = fabs(st.w[j]);
			abs_sum += fabs(st.w[j]);
		}
		rel = max_w > 0 ? max_change / max_w : (max_change > 0 ? INFINITY : 0);
		t_solver += gbml_now() - t0;
		if (!isfinite(abs_sum) || !isfinite(b))
		{
			rc = gbml_error(env, GBML_EINVAL,
							"saga: the solver diverged in epoch %lld (non-finite weights); use a smaller step_size (now %g) or standardize",
							(long long) epoch, step);
			goto done;
		}
		converged = rel < p->tol;

		/*
		 * The objective costs about half an epoch, so it is evaluated on a
		 * fixed schedule (every epoch up to 20, then every 10th, and the
		 * last): the trace stays deterministic and costs a few percent.
		 */
		if (epoch <= 20 || epoch % 10 == 0 || converged || epoch == p->max_iter)
		{
			t0 = gbml_now();
			if ((rc = evaluate(ds, env, &st, b, loss, alpha, p->l1_ratio, stdz, &objective, &metric)) != GBML_OK)
				goto done;
			t_objective += gbml_now() - t0;
			if (n_trace < TRACE_CAP)
			{
				st.trace_epoch[n_trace] = (double) epoch;
				st.trace_obj[n_trace] = objective;
				st.trace_time[n_trace] = gbml_now() - t_start;
				st.trace_rel[n_trace] = rel;
				n_trace++;
			}
		}
		info.metric = objective;
		if (gbml_progress(env, &info))
		{
			rc = gbml_error(env, GBML_ECANCELLED, "canceled");
			goto done;
		}
		if (converged)
			break;
	}
	if (epoch > p->max_iter)
		epoch = p->max_iter;

solved:
	/* final figures: objective and metric are those of the last epoch's weights */
	for (int j = 0; j < d; j++)
		n_nonzero += st.w[j] != 0;

	/* model section */
	gbml_sb_init(&body, env);
	gbml_sb_u32(&body, GBML_SAGA_LAYOUT_VERSION);
	gbml_sb_u32(&body, (uint32_t) loss);
	gbml_sb_u32(&body, (uint32_t) enc);
	gbml_sb_u32(&body, (p->fit_intercept ? GBML_SAGA_FLAG_INTERCEPT : 0) |
				(stdz ? GBML_SAGA_FLAG_STANDARDIZED : 0));
	gbml_sb_u32(&body, (uint32_t) d);
	gbml_sb_f64(&body, b);
	gbml_sb_append(&body, st.w, sizeof(double) * (size_t) d);
	gbml_sb_append(&body, st.mean, sizeof(double) * (size_t) d);
	gbml_sb_append(&body, st.std, sizeof(double) * (size_t) d);
	if ((rc = gbml_sb_status(&body)) == GBML_OK)
		gbml_model_add_sb(ctx->writer, GBML_SAGA_SECTION, &body);
	gbml_sb_free(&body);
	if (rc != GBML_OK)
		goto done;

	/* metadata */
	{
		gbml_strbuf *m = ctx->meta;
		double		eval_obj = NAN,
					eval_metric = NAN;
		bool		mf = true;

		if (ctx->eval &&
			(rc = evaluate(ctx->eval, env, &st, b, loss, alpha, p->l1_ratio, stdz, &eval_obj, &eval_metric)) != GBML_OK)
			goto done;
		gbml_sb_json_key(m, "loss", &first);
		gbml_sb_json_string(m, loss_choices[loss]);
		gbml_sb_json_key(m, "label_encoding", &first);
		if (enc == GBML_SAGA_LABELS_NONE)
			gbml_sb_append(m, "null", 4);
		else
			gbml_sb_json_string(m, encoding_name(enc));
		gbml_sb_json_key(m, "epochs", &first);
		gbml_sb_json_number(m, (double) epoch);
		gbml_sb_json_key(m, "objective", &first);
		gbml_sb_json_number(m, objective);
		gbml_sb_json_key(m, "stop_reason", &first);
		gbml_sb_json_string(m, converged ? "tol" : "max_iter");
		gbml_sb_json_key(m, "converged", &first);
		gbml_sb_append(m, converged ? "true" : "false", converged ? 4 : 5);
		gbml_sb_json_key(m, "rel_change", &first);
		gbml_sb_json_number(m, rel);
		gbml_sb_json_key(m, "alpha", &first);
		gbml_sb_json_number(m, alpha);
		gbml_sb_json_key(m, "step_size", &first);
		gbml_sb_json_number(m, step);
		gbml_sb_json_key(m, "L", &first);
		gbml_sb_json_number(m, L);
		gbml_sb_json_key(m, "n_nonzero", &first);
		gbml_sb_json_number(m, (double) n_nonzero);
		gbml_sb_json_key(m, "standardized", &first);
		gbml_sb_append(m, stdz ? "true" : "false", stdz ? 4 : 5);
		if (gpu.on_gpu)
		{
			/* a GPU model says which solver made it: its bytes are not the CPU solver's */
			gbml_sb_json_key(m, "solver", &first);
			gbml_sb_json_string(m, "minibatch_saga");
			gbml_sb_json_key(m, "batch_size", &first);
			gbml_sb_json_number(m, (double) gpu.batch_size);
			gbml_sb_json_key(m, "L_max", &first);
			gbml_sb_json_number(m, gpu.L_max);
		}
		gbml_sb_json_key(m, "trace_epochs", &first);
		gbml_sb_json_doubles(m, st.trace_epoch, n_trace);
		gbml_sb_json_key(m, "trace_objective", &first);
		gbml_sb_json_doubles(m, st.trace_obj, n_trace);
		gbml_sb_json_key(m, "trace_rel_change", &first);
		gbml_sb_json_doubles(m, st.trace_rel, n_trace);

		gbml_sb_json_key(m, "metrics", &first);
		gbml_sb_append(m, "{", 1);
		gbml_sb_json_key(m, "objective", &mf);
		gbml_sb_json_number(m, objective);
		gbml_sb_json_key(m, loss == GBML_SAGA_LOSS_LOGISTIC ? "train_accuracy" : "train_rmse", &mf);
		gbml_sb_json_number(m, metric);
		if (ctx->eval)
		{
			gbml_sb_json_key(m, "eval_objective", &mf);
			gbml_sb_json_number(m, eval_obj);
			gbml_sb_json_key(m, loss == GBML_SAGA_LOSS_LOGISTIC ? "eval_accuracy" : "eval_rmse", &mf);
			gbml_sb_json_number(m, eval_metric);
		}
		gbml_sb_json_key(m, "eval_metric", &mf);
		gbml_sb_json_string(m, ctx->eval ? "eval_objective" : "objective");
		gbml_sb_json_key(m, "eval_value", &mf);
		gbml_sb_json_number(m, ctx->eval ? eval_obj : objective);
		gbml_sb_json_key(m, "higher_is_better", &mf);
		gbml_sb_append(m, "false}", 6);

		gbml_sb_json_key(m, "timings", &first);
		/* run-dependent: the driver moves this member out of the model bytes into the report */
		gbml_sb_printf(m, "{\"stats_seconds\":%.6f,\"solver_seconds\":%.6f,\"objective_seconds\":%.6f,\"total_seconds\":%.6f,",
					   t_stats, t_solver, t_objective, gbml_now() - t_start);
		if (gpu.on_gpu)
			gbml_sb_printf(m, "\"device\":\"gpu\",\"rows_on_device\":\"%s\",\"batch_size\":%lld,\"step_size\":%.17g,"
						   "\"epochs\":%lld,\"power_iterations\":%d,\"h2d_bytes\":%.0f,",
						   gpu.streamed ? "streamed" : "resident", (long long) gpu.batch_size, step,
						   (long long) epoch, gpu.power_iterations, env->gpu_h2d_bytes);
		gbml_sb_printf(m, "\"trace_seconds\":");
		gbml_sb_json_doubles(m, st.trace_time, n_trace);
		gbml_sb_append(m, "}", 1);
		rc = gbml_sb_status(m);
	}

done:
	state_free(&st, ds, env);
	return rc;
}

/* ---------------------------------------------------------------------------
 * loading and scoring
 * ------------------------------------------------------------------------- */

typedef struct saga_model
{
	int			d;
	int			loss;
	int			enc;
	uint32_t	flags;
	double		b;				/* solver scale */
	double		b_eff;			/* raw-feature scale */
	double	   *w;				/* solver scale, d */
	double	   *w_eff;			/* raw-feature scale, padded */
	double	   *mean;
	double	   *std;
} saga_model;

static void
saga_unload(void *handle, gbml_env *env)
{
	saga_model *m = handle;

	if (m == NULL)
		return;
	gbml_free(env, m->w);
	gbml_free(env, m->w_eff);
	gbml_free(env, m->mean);
	gbml_free(env, m->std);
	gbml_free(env, m);
}

static int
saga_load(const gbml_model_reader *model, gbml_env *env, void **handle)
{
	const uint8_t *data;
	size_t		len;
	gbml_cursor cur;
	saga_model *m;
	uint32_t	version,
				loss,
				enc,
				flags,
				d;
	double	   *scale = NULL,
			   *shift = NULL;
	int			rc = GBML_OK;

	if (!gbml_model_find(model, GBML_SAGA_SECTION, &data, &len))
		return gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section is missing");
	gbml_cursor_init(&cur, data, len);
	version = gbml_cursor_u32(&cur);
	loss = gbml_cursor_u32(&cur);
	enc = gbml_cursor_u32(&cur);
	flags = gbml_cursor_u32(&cur);
	d = gbml_cursor_u32(&cur);
	if (!cur.ok)
		return gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section is truncated");
	if (version != GBML_SAGA_LAYOUT_VERSION)
		return gbml_error(env, GBML_ECORRUPT, "saga model: unknown section layout %u", version);
	if (loss > GBML_SAGA_LOSS_SQUARED)
		return gbml_error(env, GBML_ECORRUPT, "saga model: unknown loss %u", loss);
	if ((loss == GBML_SAGA_LOSS_LOGISTIC && enc != GBML_SAGA_LABELS_01 && enc != GBML_SAGA_LABELS_PM1) ||
		(loss == GBML_SAGA_LOSS_SQUARED && enc != GBML_SAGA_LABELS_NONE))
		return gbml_error(env, GBML_ECORRUPT, "saga model: label encoding %u does not fit loss %u", enc, loss);
	if (flags & ~(GBML_SAGA_FLAG_INTERCEPT | GBML_SAGA_FLAG_STANDARDIZED))
		return gbml_error(env, GBML_ECORRUPT, "saga model: unknown flags 0x%x", flags);
	if (d != model->n_features || d > GBML_MAX_FEATURES)
		return gbml_error(env, GBML_ECORRUPT, "saga model: %u weights for %u features", d, model->n_features);
	if (gbml_cursor_remaining(&cur) != sizeof(double) * (1 + 3 * (size_t) d))
		return gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section has %zu bytes of values, expected %zu",
						  gbml_cursor_remaining(&cur), sizeof(double) * (1 + 3 * (size_t) d));

	m = gbml_alloc0(env, sizeof(saga_model));
	if (m == NULL)
		return env->error_code;
	m->d = (int) d;
	m->loss = (int) loss;
	m->enc = (int) enc;
	m->flags = flags;
	if ((m->w = alloc_vec(env, gbml_saga_padded(d))) == NULL ||
		(m->w_eff = alloc_vec(env, gbml_saga_padded(d))) == NULL ||
		(m->mean = alloc_vec(env, gbml_saga_padded(d))) == NULL ||
		(m->std = alloc_vec(env, gbml_saga_padded(d))) == NULL ||
		(scale = alloc_vec(env, gbml_saga_padded(d))) == NULL ||
		(shift = alloc_vec(env, gbml_saga_padded(d))) == NULL)
	{
		rc = env->error_code;
		goto fail;
	}
	m->b = gbml_cursor_f64(&cur);
	gbml_cursor_f64_array(&cur, m->w, d);
	gbml_cursor_f64_array(&cur, m->mean, d);
	gbml_cursor_f64_array(&cur, m->std, d);
	if (!cur.ok || !isfinite(m->b))
	{
		rc = gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section is corrupt");
		goto fail;
	}
	for (uint32_t j = 0; j < d; j++)
		if (!isfinite(m->w[j]) || !isfinite(m->mean[j]) || !isfinite(m->std[j]) || m->std[j] < 0)
		{
			rc = gbml_error(env, GBML_ECORRUPT, "saga model: weight or statistic %u is not a valid number", j + 1);
			goto fail;
		}
	if (flags & GBML_SAGA_FLAG_STANDARDIZED)
	{
		make_standardizer(m->d, m->mean, m->std, scale, shift);
		effective_weights(m->d, m->w, m->b, scale, shift, m->w_eff, &m->b_eff);
	}
	else
		effective_weights(m->d, m->w, m->b, NULL, NULL, m->w_eff, &m->b_eff);
	for (uint32_t j = 0; j < d; j++)
		if (!isfinite(m->w_eff[j]))
		{
			rc = gbml_error(env, GBML_ECORRUPT, "saga model: weight %u overflows on the raw feature scale", j + 1);
			goto fail;
		}
	if (!isfinite(m->b_eff))
	{
		rc = gbml_error(env, GBML_ECORRUPT, "saga model: the intercept overflows on the raw feature scale");
		goto fail;
	}
	gbml_free(env, scale);
	gbml_free(env, shift);
	*handle = m;
	return GBML_OK;

fail:
	gbml_free(env, scale);
	gbml_free(env, shift);
	saga_unload(m, env);
	return rc;
}

/*
 * SCORE: the linear score x·w + b for squared loss; for logistic the
 * predicted class in the user's encoding (1 when x·w + b > 0, else 0 or -1).
 * PROBA: P(class 1) for logistic, NaN for squared loss.
 */
static double
saga_predict(const void *handle, const float *x, gbml_output what)
{
	const saga_model *m = handle;
	double		p = gbml_saga_dot(m->w_eff, x, m->d) + m->b_eff;

	if (m->loss == GBML_SAGA_LOSS_SQUARED)
		return what == GBML_OUT_SCORE ? p : NAN;
	if (what == GBML_OUT_PROBA)
		return p >= 0 ? 1.0 / (1.0 + exp(-p)) : exp(p) / (1.0 + exp(p));
	return p > 0 ? 1.0 : (m->enc == GBML_SAGA_LABELS_PM1 ? -1.0 : 0.0);
}

static int
saga_to_json(const void *handle, gbml_strbuf *out)
{
	const saga_model *m = handle;
	bool		first = true;
	int64_t		nnz = 0;

	for (int j = 0; j < m->d; j++)
		nnz += m->w[j] != 0;
	gbml_sb_json_key(out, "loss", &first);
	gbml_sb_json_string(out, loss_choices[m->loss]);
	gbml_sb_json_key(out, "label_encoding", &first);
	if (m->enc == GBML_SAGA_LABELS_NONE)
		gbml_sb_append(out, "null", 4);
	else
		gbml_sb_json_string(out, encoding_name(m->enc));
	gbml_sb_json_key(out, "fit_intercept", &first);
	gbml_sb_append(out, (m->flags & GBML_SAGA_FLAG_INTERCEPT) ? "true" : "false",
				   (m->flags & GBML_SAGA_FLAG_INTERCEPT) ? 4 : 5);
	gbml_sb_json_key(out, "standardized", &first);
	gbml_sb_append(out, (m->flags & GBML_SAGA_FLAG_STANDARDIZED) ? "true" : "false",
				   (m->flags & GBML_SAGA_FLAG_STANDARDIZED) ? 4 : 5);
	gbml_sb_json_key(out, "n_nonzero", &first);
	gbml_sb_json_number(out, (double) nnz);
	gbml_sb_json_key(out, "intercept", &first);
	gbml_sb_json_number(out, m->b_eff);
	gbml_sb_json_key(out, "coef", &first);
	gbml_sb_json_doubles(out, m->w_eff, m->d);
	if (m->flags & GBML_SAGA_FLAG_STANDARDIZED)
	{
		gbml_sb_json_key(out, "intercept_standardized", &first);
		gbml_sb_json_number(out, m->b);
		gbml_sb_json_key(out, "coef_standardized", &first);
		gbml_sb_json_doubles(out, m->w, m->d);
	}
	gbml_sb_json_key(out, "feature_mean", &first);
	gbml_sb_json_doubles(out, m->mean, m->d);
	gbml_sb_json_key(out, "feature_std", &first);
	gbml_sb_json_doubles(out, m->std, m->d);
	return gbml_sb_status(out);
}

/* |coefficient| times the feature's standard deviation, normalized to sum 1. */
static int
saga_importance(const void *handle, double *out)
{
	const saga_model *m = handle;

	for (int j = 0; j < m->d; j++)
		out[j] = fabs(m->w_eff[j]) * m->std[j];
	gbml_importance_normalize(out, m->d);
	return GBML_OK;
}

const gbml_algorithm gbml_algorithm_saga = {
	.id = GBML_ALGO_SAGA,
	.name = "saga",
	.params = gbml_saga_param_specs,
	.params_size = sizeof(gbml_saga_params),
	.input_flags = GBML_INPUT_LABEL,
	.outputs = GBML_OUT_SCORE | GBML_OUT_PROBA,
	.gpu_trains = true,
	.train = saga_train,
	.load = saga_load,
	.unload = saga_unload,
	.predict = saga_predict,
	.to_json = saga_to_json,
	.importance = saga_importance,
};
