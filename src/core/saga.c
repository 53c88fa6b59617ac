/*
 * saga.c — the SAGA linear-model trainer (the Dask SAGA seed) and the
 * model section it writes; the model's loader, scorer and JSON dump are
 * saga_model.c's.
 *
 * Training follows the seed's chunked design: the solver state (weights,
 * average gradient, one stored gradient scalar per row kept beside its chunk,
 * on the host wherever the chunk's features live) is carried through the
 * rows.  Each epoch cuts the canonical order into slices of 256 rows at a
 * random offset, shuffles the slices, and visits groups of consecutive
 * slices of that order (8 MB of features) with each group's rows shuffled
 * (saga_plan.h, which says why not whole chunks one after the other, the
 * seed's loop, nor each slice on its own).  It is drawn from one seeded
 * generator and depends only on the row count and width, so rows in
 * temporary files train to the bytes of the same rows in memory, whatever
 * the chunk layout.  Epochs read the rows a group at a time
 * (saga_slices.h: in place for host chunks, else a read per slice with the
 * next group read ahead); the statistics and objective passes read whole
 * chunks in order (chunk_prefetch.h) and sum in fixed blocks of canonical
 * positions.  SAGA itself is sequential, so the model bytes do not depend
 * on the thread count; threads only speed up the passes and the shuffles.
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
 *
 * Categorical features: the training set and the eval set are one-hot
 * encoded first (onehot.h: the encoding learned from the training rows'
 * category counts, the encoded rows in datasets of their own), and
 * everything above runs on the encoded rows; `standardize` scales only the
 * numeric columns.  The model keeps the encoding ('ONEH'), and scoring
 * (saga_model.c) applies it to the raw row, without building the encoded
 * one.
 */
#include "saga_internal.h"
#include "saga_shards.h"
#include "chunk_prefetch.h"
#include "row_pieces.h"
#include "onehot.h"
#include "saga_gpu.h"
#include "saga_kernels.h"
#include "saga_plan.h"
#include "saga_slices.h"
#include "rng.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#define TRACE_CAP 1000
#define EVAL_BLOCK_ROWS 4096
#define CHECK_ROWS 65536		/* a cancel check at least this often inside an epoch */
#define PARALLEL_MIN_VALUES (1 << 21)	/* rows x features below which passes stay serial */

const char *const gbml_saga_loss_choices[] = {"logistic", "squared", NULL};

#define SP(field) offsetof(gbml_saga_params, field)
const gbml_param_spec gbml_saga_param_specs[] = {
	{"loss", GBML_PARAM_ENUM, SP(loss), 0, 0, 0, NULL, gbml_saga_loss_choices,
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
	"scale numeric features to mean 0, standard deviation 1 at train time (applied again at predict time); one-hot indicators stay 0/1"},
	{"batch_size", GBML_PARAM_INT, SP(batch_size), 0, 1e6, 0, NULL, NULL,
	"GPU only: rows of one mini-batch SAGA step (at most the row count); 0 = automatic (docs/gpu.md)"},
	{"max_categories", GBML_PARAM_INT, SP(max_categories), 1, 1e6, 100, NULL, NULL,
	"categorical features: a 0/1 column for each of the most frequent categories, at most this many per feature; the other categories, and values training never saw, share one \"other\" column"},
	GBML_PARAM_END
};
#undef SP

/* ---------------------------------------------------------------------------
 * helpers shared by the trainer and the loader (saga_internal.h)
 * ------------------------------------------------------------------------- */

/*
 * z = x*scale + shift: scale = 1/std (1 for a constant feature), shift =
 * -mean*scale, for the first n_scaled columns (the numeric features).  The
 * rest are one-hot indicators and stay 0/1 (scale 1, shift 0): scaled, a
 * rare category's column would take large values and its weight would pay
 * less penalty than a common one's, and the weights would no longer read
 * as "this category adds w to the score".
 */
void
gbml_saga_make_standardizer(int d, int n_scaled, const double *mean, const double *std, double *scale, double *shift)
{
	for (int j = 0; j < d; j++)
	{
		scale[j] = j < n_scaled && std[j] > 0 ? 1.0 / std[j] : 1.0;
		shift[j] = j < n_scaled ? -mean[j] * scale[j] : 0.0;
	}
}

/* Raw-feature weights equivalent to (w, b) on the standardized scale. */
void
gbml_saga_effective_weights(int d, const double *w, double b, const double *scale, const double *shift,
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

const char *
gbml_saga_encoding_name(int enc)
{
	return enc == GBML_SAGA_LABELS_01 ? "0/1" : enc == GBML_SAGA_LABELS_PM1 ? "-1/+1" : "none";
}

double *
gbml_saga_alloc_vec(gbml_env *env, int64_t dp)
{
	return gbml_alloc0(env, sizeof(double) * (size_t) dp);
}

/* ---------------------------------------------------------------------------
 * training
 * ------------------------------------------------------------------------- */

static inline int64_t
Min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* One training: the data, the solver state, and the figures it reports (CPU or GPU). */
typedef struct saga_state
{
	const gbml_dataset *ds;
	gbml_env   *env;
	const gbml_saga_params *p;
	const gbml_onehot *enc;		/* the rows' one-hot encoding, or NULL: the input features */
	int			d;
	int			n_scaled;		/* columns [0, n_scaled) are standardized (the numeric ones) */
	int64_t		dp;				/* padded length of the vectors */
	int			loss;
	bool		stdz;
	double		alpha;
	double	   *w,
			   *avg,
			   *w_prev,
			   *w_eff,
			   *mean,
			   *std,
			   *scale,
			   *shift;
	double	  **memory;			/* per chunk: one stored gradient per row, on the host wherever the rows are */
	gbml_saga_plan plan;		/* the epochs' visiting order */
	gbml_saga_slices *slices;	/* the epochs' rows */
	/* one group of the plan: its rows' features and per-row state, gathered in group order */
	const float **g_rows;
	float	   *g_label;
	float	   *g_weight;
	double	   *g_memory;
	float	   *g_pad;			/* copies of host rows too close to their chunk's end to load whole */
	int64_t		pad_rows;
	double	   *trace_epoch,
			   *trace_obj,
			   *trace_time,
			   *trace_rel;
	int64_t		n_trace;
	/* the solution and its figures */
	double		b,
				avg_b,
				L,
				step,
				rel,
				objective,
				metric;
	int64_t		epoch;
	bool		converged;
	const gbml_saga_shards_result *shards;	/* trained on other servers' rows (OWL-QN), or NULL */
	double		t_start,
				t_stats,
				t_solver,
				t_objective;
} saga_state;

/*
 * The CPU solver's state (alloc_solver), freed once the epochs are done: the
 * final objective and eval passes read chunks into buffers of their own,
 * and under a tight budget they need the groups' room.
 */
static void
free_solver(saga_state *st)
{
	gbml_env   *env = st->env;

	if (st->memory)
		for (int c = 0; c < st->ds->n_chunks; c++)
			gbml_free(env, st->memory[c]);
	gbml_free(env, st->memory);
	st->memory = NULL;
	gbml_saga_slices_close(st->slices);
	st->slices = NULL;
	gbml_saga_plan_free(&st->plan, env);
	gbml_free(env, st->g_rows);
	gbml_free(env, st->g_label);
	gbml_free(env, st->g_weight);
	gbml_free(env, st->g_memory);
	gbml_free(env, st->g_pad);
	st->g_rows = NULL;
	st->g_label = st->g_weight = NULL;
	st->g_memory = NULL;
	st->g_pad = NULL;
}

static void
state_free(saga_state *st)
{
	gbml_env   *env = st->env;

	free_solver(st);
	gbml_free(env, st->w);
	gbml_free(env, st->avg);
	gbml_free(env, st->w_prev);
	gbml_free(env, st->w_eff);
	gbml_free(env, st->mean);
	gbml_free(env, st->std);
	gbml_free(env, st->scale);
	gbml_free(env, st->shift);
	gbml_free(env, st->trace_epoch);
	gbml_free(env, st->trace_obj);
	gbml_free(env, st->trace_time);
	gbml_free(env, st->trace_rel);
}

/* The vectors and the trace, which the CPU and the GPU solvers share. */
static int
alloc_state(saga_state *st)
{
	gbml_env   *env = st->env;

	if ((st->w = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->avg = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->w_prev = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->w_eff = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->mean = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->std = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->scale = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->shift = gbml_saga_alloc_vec(env, st->dp)) == NULL ||
		(st->trace_epoch = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL ||
		(st->trace_obj = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL ||
		(st->trace_time = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL ||
		(st->trace_rel = gbml_alloc_array(env, TRACE_CAP, sizeof(double))) == NULL)
		return env->error_code;
	return GBML_OK;
}

int
gbml_saga_label_classes(const gbml_dataset *ds, double *other)
{
	int			classes = 0;

	*other = 0;
	for (int c = 0; c < ds->n_chunks; c++)
	{
		const gbml_chunk *ch = ds->chunks[c];

		for (int64_t r = 0; r < ch->n_rows; r++)
		{
			float		y = ch->label[r];
			int			k = y == 1.0f ? GBML_SAGA_CLASS_POS : y == 0.0f ? GBML_SAGA_CLASS_ZERO
				: y == -1.0f ? GBML_SAGA_CLASS_NEG : GBML_SAGA_CLASS_OTHER;

			if (k == GBML_SAGA_CLASS_OTHER && !(classes & GBML_SAGA_CLASS_OTHER))
				*other = y;
			classes |= k;
		}
	}
	return classes;
}

int
gbml_saga_encoding_of(int classes, double other, const char *what, int want, gbml_env *env, int *enc)
{
	bool		has_pos = classes & GBML_SAGA_CLASS_POS,
				has_zero = classes & GBML_SAGA_CLASS_ZERO,
				has_neg = classes & GBML_SAGA_CLASS_NEG;

	if (classes & GBML_SAGA_CLASS_OTHER)
		return gbml_error(env, GBML_EINVAL,
						  "saga: %s has a row with label %g, which is not a class label for loss \"logistic\" (use 0/1, -1/+1 or boolean)",
						  what, other);
	if (has_zero && has_neg)
		return gbml_error(env, GBML_EINVAL,
						  "saga: %s mixes labels 0 and -1; for loss \"logistic\" use either 0/1 or -1/+1", what);
	if (want != 0)
	{
		if ((want == GBML_SAGA_LABELS_01 && has_neg) || (want == GBML_SAGA_LABELS_PM1 && has_zero))
			return gbml_error(env, GBML_EINVAL,
							  "saga: the eval set's labels are %s but the training labels are %s",
							  has_neg ? "-1/+1" : "0/1", gbml_saga_encoding_name(want));
		return GBML_OK;
	}
	if (!has_pos || !(has_zero || has_neg))
	{
		gbml_error(env, GBML_EINVAL, "saga: loss \"logistic\" needs rows of both classes, but every row has label %s",
				   has_pos ? "1" : has_neg ? "-1" : "0");
		return gbml_hint(env, "Check the source query's rows, or use loss \"squared\" for a numeric target.");
	}
	*enc = has_neg ? GBML_SAGA_LABELS_PM1 : GBML_SAGA_LABELS_01;
	return GBML_OK;
}

/*
 * Checks logistic labels and finds their encoding.  `want` is 0 for the
 * training set (detect, into *enc), or the training encoding for an eval set
 * (checked against it; enc unused).
 */
static int
check_labels(const gbml_dataset *ds, gbml_env *env, const char *what, int want, int *enc)
{
	double		other;
	int			classes = gbml_saga_label_classes(ds, &other);

	return gbml_saga_encoding_of(classes, other, what, want, env, enc);
}

/*
 * A pass over ds's chunks in order.  Stored rows that any thread may read
 * (the file store) are read by the threads that work on them, in pieces
 * that stay in cache (row_pieces.h); others come through the chunk reader
 * (chunk_prefetch.h: host chunks as they are, stored ones read ahead), whose
 * buffers stay with the dataset between passes, so a reader a pass costs no
 * fresh pages.
 */
typedef struct saga_pass
{
	const gbml_dataset *ds;
	gbml_chunk_prefetch *rd;	/* NULL: the chunks in turn, stored rows in pieces */
	gbml_row_pieces rp;
	int			next;			/* pieces: the next chunk */
} saga_pass;

/* What pass_begin's reader holds for threads: a piece of rows a thread, or the chunk reader's two buffers. */
static size_t
pass_buffer_bytes(const gbml_dataset *ds, int threads)
{
	return gbml_row_pieces_apply(ds) ? gbml_row_pieces_buffer_bytes(ds, threads) : gbml_chunk_prefetch_buffer_bytes(ds);
}

/* threads: how many may read pieces at once. */
static int
pass_begin(saga_state *st, const gbml_dataset *ds, saga_pass *p, int threads)
{
	memset(p, 0, sizeof(*p));
	p->ds = ds;
	if (gbml_row_pieces_apply(ds))
		return gbml_row_pieces_open(&p->rp, ds, st->env, threads);
	p->rd = gbml_chunk_prefetch_open(ds, st->env);
	return p->rd == NULL ? st->env->error_code : GBML_OK;
}

/* The next chunk: 1 with *x (NULL: read its rows with pass_rows), *rows, *c; 0 at the end; < 0 failed. */
static int
pass_next(saga_pass *p, const float **x, int64_t *rows, int *c)
{
	if (p->rd != NULL)
		return gbml_chunk_prefetch_next(p->rd, x, rows, c);
	if (p->next >= p->ds->n_chunks || p->rp.rc != 0)
		return 0;
	*c = p->next++;
	*x = p->ds->chunks[*c]->x;
	*rows = p->ds->chunks[*c]->n_rows;
	return 1;
}

/* fn over rows [r0, r0 + n) of chunk c, on thread t: from x as pass_next gave it, or in pieces. */
static void
pass_rows(saga_pass *p, int c, const float *x, int64_t r0, int64_t n, int t,
		  void (*fn) (void *ctx, const float *x, int64_t r, int64_t m), void *ctx)
{
	if (x != NULL)
		fn(ctx, x + (size_t) r0 * (size_t) p->ds->n_features, r0, n);
	else
		gbml_row_pieces_each(&p->rp, c, r0, n, t, fn, ctx);
}

/* rc: the pass's result so far; returns it, or a failed piece's read. */
static int
pass_end(saga_state *st, saga_pass *p, int rc)
{
	if (p->rd == NULL)
	{
		int			prc = gbml_row_pieces_close(&p->rp, st->env);

		return rc != GBML_OK ? rc : prc;
	}
	gbml_chunk_prefetch_close(p->rd);
	/* the eval set is walked once an epoch: its buffers would sit idle in the budget the groups need */
	if (p->ds != st->ds)
		gbml_dataset_release_reader_buffers(p->ds, st->env);
	return rc;
}

typedef struct moments_ctx
{
	int			d;
	const double *center;
	double	   *sums;
} moments_ctx;

static void
moments_rows(void *ctx, const float *x, int64_t r, int64_t m)
{
	moments_ctx *mc = ctx;

	(void) r;
	gbml_saga_column_moments(x, m, mc->d, mc->center, mc->sums);
}

/*
 * Column moments of every row, in order: sums of x (center NULL) or of
 * (x - center)^2, into sums (padded).
 */
static int
moments_pass(saga_state *st, const double *center, double *sums)
{
	saga_pass	p;
	moments_ctx mc = {st->d, center, sums};
	const float *x;
	int64_t		rows;
	int			c,
				rc;

	if ((rc = pass_begin(st, st->ds, &p, 1)) != GBML_OK)
		return rc;
	while ((rc = pass_next(&p, &x, &rows, &c)) > 0)
		pass_rows(&p, c, x, 0, rows, 0, moments_rows, &mc);
	return pass_end(st, &p, rc);
}

/*
 * Population mean and standard deviation of every feature: two passes (sum,
 * then squared deviations from the mean, which stays accurate when the mean
 * is large against the spread).  mean and std are padded vectors.
 */
static int
feature_stats(saga_state *st)
{
	double		inv_n = 1.0 / (double) st->ds->n_rows;
	int			rc;

	memset(st->mean, 0, sizeof(double) * (size_t) st->dp);
	memset(st->std, 0, sizeof(double) * (size_t) st->dp);
	if ((rc = moments_pass(st, NULL, st->mean)) != GBML_OK)
		return rc;
	for (int j = 0; j < st->d; j++)
		st->mean[j] *= inv_n;
	if ((rc = moments_pass(st, st->mean, st->std)) != GBML_OK)
		return rc;
	for (int j = 0; j < st->d; j++)
		st->std[j] = sqrt(st->std[j] * inv_n);
	return GBML_OK;
}

typedef struct norm_ctx
{
	const saga_state *st;
	const float *weight;		/* the chunk's, or NULL */
	double		best;
} norm_ctx;

static void
norm_rows(void *ctx, const float *x, int64_t r, int64_t m)
{
	norm_ctx   *nc = ctx;
	const saga_state *st = nc->st;
	double		v = gbml_saga_max_row_norm(x, nc->weight ? nc->weight + r : NULL, m, st->d,
										   st->stdz ? st->scale : NULL, st->stdz ? st->shift : NULL,
										   st->p->fit_intercept ? 1.0 : 0.0);

	if (v > nc->best)
		nc->best = v;
}

/* max_i s_i (|z_i|^2 + [intercept]) over every row: blocks of a chunk on the threads (a max is exact in any order). */
static int
max_row_norm(saga_state *st, double *out)
{
	const gbml_dataset *ds = st->ds;
	gbml_env   *env = st->env;
	const bool	par = env->threads > 1 && (double) ds->n_rows * ds->n_features >= PARALLEL_MIN_VALUES;
	saga_pass	p;
	const float *x;
	int64_t		rows;
	int			c,
				rc;
	double		best = 0;

	if ((rc = pass_begin(st, ds, &p, env->threads)) != GBML_OK)
		return rc;
	while ((rc = pass_next(&p, &x, &rows, &c)) > 0)
	{
		const float *weight = ds->has_weight ? ds->chunks[c]->weight : NULL;
		int64_t		n_blocks = (rows + EVAL_BLOCK_ROWS - 1) / EVAL_BLOCK_ROWS;

#pragma omp parallel for schedule(dynamic, 1) reduction(max:best) num_threads(env->threads) if (par && n_blocks > 1)
		for (int64_t k = 0; k < n_blocks; k++)
		{
			int64_t		r0 = k * EVAL_BLOCK_ROWS;
			norm_ctx	nc = {st, weight, 0};

			pass_rows(&p, c, x, r0, Min64(EVAL_BLOCK_ROWS, rows - r0), omp_get_thread_num(), norm_rows, &nc);
			if (nc.best > best)
				best = nc.best;
		}
	}
	*out = best;
	return pass_end(st, &p, rc);
}

typedef struct eval_ctx
{
	const saga_state *st;
	const gbml_chunk *ch;
	bool		weighted;
	double		b_eff;
	double	   *sums;
} eval_ctx;

/* Adds rows [r, r + m) of the chunk (features x) into the block's sums, at raw-space weights st->w_eff, b_eff. */
static void
eval_rows(void *ctx, const float *x, int64_t r, int64_t m)
{
	eval_ctx   *e = ctx;

	gbml_saga_block_eval(x, e->ch->label + r, e->weighted ? e->ch->weight + r : NULL, m, e->st->d,
						 e->st->w_eff, e->b_eff, e->st->loss, e->sums);
}

/*
 * Sums of weighted loss and of the accuracy/squared-error statistic over a
 * dataset at raw-space weights (st->w_eff padded, b_eff), chunk by chunk,
 * in fixed blocks of EVAL_BLOCK_ROWS canonical positions added in block
 * order.  A block that straddles two chunks is summed on across the
 * boundary (`open`: the last block begun), so the result depends neither
 * on the chunk layout nor on where the rows live (a block's rows are added
 * one after the other, in pieces or not); the blocks that begin in a chunk
 * run on the threads, so it does not depend on the thread count either.
 */
static int
dataset_eval(saga_state *st, const gbml_dataset *ds, double b_eff, double *loss_sum, double *stat)
{
	gbml_env   *env = st->env;
	/*
	 * Threads only pay off on big data: on a small set the fork/join costs
	 * more than the pass (and much more when the machine is oversubscribed).
	 */
	const bool	par = env->threads > 1 && (double) ds->n_rows * ds->n_features >= PARALLEL_MIN_VALUES;
	int64_t		widest = 1,
				g0 = 0,
				rows;
	double	   *part,
				open[2] = {0, 0},
				total[2] = {0, 0};
	bool		is_open = false;
	saga_pass	p;
	const float *x;
	int			c,
				rc;

	for (c = 0; c < ds->n_chunks; c++)
		widest = ds->chunks[c]->n_rows > widest ? ds->chunks[c]->n_rows : widest;
	if ((part = gbml_alloc_array(env, (size_t) (widest / EVAL_BLOCK_ROWS + 2) * 2, sizeof(double))) == NULL)
		return env->error_code;
	if ((rc = pass_begin(st, ds, &p, env->threads)) != GBML_OK)
	{
		gbml_free(env, part);
		return rc;
	}
	while ((rc = pass_next(&p, &x, &rows, &c)) > 0)
	{
		/* the rows that finish the block begun in an earlier chunk */
		int64_t		head = is_open ? Min64(rows, (EVAL_BLOCK_ROWS - g0 % EVAL_BLOCK_ROWS) % EVAL_BLOCK_ROWS) : 0;
		int64_t		n_blocks = (rows - head + EVAL_BLOCK_ROWS - 1) / EVAL_BLOCK_ROWS;
		eval_ctx	e = {st, ds->chunks[c], ds->has_weight, b_eff, open};

		pass_rows(&p, c, x, 0, head, 0, eval_rows, &e);
		if (n_blocks > 0 && is_open)
		{
			total[0] += open[0];
			total[1] += open[1];
		}
#pragma omp parallel for schedule(dynamic, 1) num_threads(env->threads) if (par && n_blocks > 1)
		for (int64_t k = 0; k < n_blocks; k++)
		{
			int64_t		r0 = head + k * EVAL_BLOCK_ROWS;
			eval_ctx	ek = {st, ds->chunks[c], ds->has_weight, b_eff, part + 2 * k};

			part[2 * k] = part[2 * k + 1] = 0;
			pass_rows(&p, c, x, r0, Min64(EVAL_BLOCK_ROWS, rows - r0), omp_get_thread_num(), eval_rows, &ek);
		}
		for (int64_t k = 0; k + 1 < n_blocks; k++)
		{
			total[0] += part[2 * k];
			total[1] += part[2 * k + 1];
		}
		if (n_blocks > 0)
		{
			/* the chunk's last block may go on in the next chunk */
			open[0] = part[2 * (n_blocks - 1)];
			open[1] = part[2 * (n_blocks - 1) + 1];
			is_open = true;
		}
		g0 += rows;
	}
	rc = pass_end(st, &p, rc);
	gbml_free(env, part);
	*loss_sum = total[0] + open[0];
	*stat = total[1] + open[1];
	return rc;
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

/* Objective and the accuracy (logistic) or RMSE (squared) of the current (w, b) on ds. */
static int
evaluate(saga_state *st, const gbml_dataset *ds, double *objective, double *metric)
{
	double		b_eff,
				loss_sum = 0,
				stat = 0;
	int			rc;

	gbml_saga_effective_weights(st->d, st->w, st->b, st->stdz ? st->scale : NULL, st->stdz ? st->shift : NULL,
								st->w_eff, &b_eff);
	if ((rc = dataset_eval(st, ds, b_eff, &loss_sum, &stat)) != GBML_OK)
		return rc;
	*objective = loss_sum / (double) ds->n_rows + penalty(st->w, st->d, st->alpha, st->p->l1_ratio);
	*metric = st->loss == GBML_SAGA_LOSS_LOGISTIC ? stat / (double) ds->n_rows
		: sqrt(stat / (double) ds->n_rows);
	return GBML_OK;
}

/*
 * The CPU solver's own state: stored gradients (one per row, zero), the
 * epochs' plan and reader, and one group's scratch.
 */
static int
alloc_solver(saga_state *st)
{
	const gbml_dataset *ds = st->ds;
	gbml_env   *env = st->env;
	size_t		groups,
				scratch;
	int			rc;

	if (gbml_saga_plan_init(&st->plan, ds, env) != GBML_OK)
		return env->error_code;
	/*
	 * What stays in memory whatever went to files, past the budget said
	 * so: the stored gradients, the two groups an epoch reads, what the
	 * other passes read rows into, and the group's scratch below.
	 */
	groups = gbml_saga_slices_buffer_bytes(ds, &st->plan) + pass_buffer_bytes(ds, env->threads);
	scratch = (size_t) st->plan.group_rows * (sizeof(float *) + 2 * sizeof(float) + sizeof(double));
	if ((rc = gbml_budget_check(env, (size_t) ds->n_rows * sizeof(double) + groups + scratch,
								"the linear model's per-row state (a stored gradient, 8 bytes a row for %lld rows) and "
								"its buffers for rows read back from temporary files (two groups, and a piece a "
								"thread: %.1f MB)",
								(long long) ds->n_rows, (double) groups / 1048576.0)) != GBML_OK)
		return rc;
	if ((st->memory = gbml_alloc0(env, sizeof(double *) * (size_t) (ds->n_chunks > 0 ? ds->n_chunks : 1))) == NULL)
		return env->error_code;
	for (int c = 0; c < ds->n_chunks; c++)
		if ((st->memory[c] = gbml_alloc0(env, sizeof(double) * (size_t) ds->chunks[c]->n_rows)) == NULL)
			return env->error_code;
	/* rows within padded(d) floats of their chunk's end: at most this many per chunk, each once an epoch */
	st->pad_rows = (st->dp - st->d + st->d - 1) / st->d * ds->n_chunks;
	st->pad_rows = st->pad_rows < st->plan.group_rows ? st->pad_rows : st->plan.group_rows;
	if ((st->slices = gbml_saga_slices_open(ds, env, &st->plan)) == NULL ||
		(st->g_rows = gbml_alloc_array(env, (size_t) st->plan.group_rows, sizeof(float *))) == NULL ||
		(st->g_label = gbml_alloc_array(env, (size_t) st->plan.group_rows, sizeof(float))) == NULL ||
		(st->g_weight = gbml_alloc_array(env, (size_t) st->plan.group_rows, sizeof(float))) == NULL ||
		(st->g_memory = gbml_alloc_array(env, (size_t) st->plan.group_rows, sizeof(double))) == NULL ||
		(st->g_pad = gbml_alloc0(env, sizeof(float) * (size_t) (st->pad_rows + 1) * (size_t) st->dp)) == NULL)
		return env->error_code;
	return GBML_OK;
}

/*
 * Feature statistics (always: they are stored for importance), the step
 * size, and what every group's pass shares (per group only the rows, their
 * state and the order change).
 */
static int
prepare(saga_state *st, gbml_saga_pass_args *a)
{
	const gbml_saga_params *p = st->p;
	double		max_norm = 0;
	int			rc;

	if ((rc = alloc_solver(st)) != GBML_OK || (rc = feature_stats(st)) != GBML_OK)
		return rc;
	gbml_saga_make_standardizer(st->d, st->n_scaled, st->mean, st->std, st->scale, st->shift);
	if ((rc = max_row_norm(st, &max_norm)) != GBML_OK)
		return rc;
	st->L = (st->loss == GBML_SAGA_LOSS_LOGISTIC ? 0.25 : 1.0) * max_norm + st->alpha * (1 - p->l1_ratio);
	if (!(st->L > 0))
		st->L = 1;				/* all-zero features, no intercept, no L2: any step works */
	st->step = p->step_size > 0 ? p->step_size : 1.0 / (3.0 * st->L);
	st->t_stats = gbml_now() - st->t_start;

	memset(a, 0, sizeof(*a));
	a->d = st->d;
	a->scale = st->stdz ? st->scale : NULL;
	a->shift = st->stdz ? st->shift : NULL;
	a->w = st->w;
	a->avg = st->avg;
	a->intercept = &st->b;
	a->avg_intercept = &st->avg_b;
	a->loss = st->loss;
	a->fit_intercept = p->fit_intercept;
	a->step = st->step;
	a->inv_n = 1.0 / (double) st->ds->n_rows;
	a->l1_threshold = st->step * st->alpha * p->l1_ratio;
	a->l2_shrink = 1.0 / (1.0 + st->step * st->alpha * (1 - p->l1_ratio));
	return GBML_OK;
}

/* Gathering one group: the reader's rows (NULL: the rows are in host chunks), and the pad used so far. */
typedef struct group_gather
{
	saga_state *st;
	const float *x;
	int64_t		n_pad;
} group_gather;

/*
 * Row r of host chunk c as the kernel loads it: in place, or, when a whole
 * padded(d) load would run past the chunk's features, a zero-padded copy.
 */
static const float *
host_row(group_gather *gg, const gbml_chunk *ch, int64_t r)
{
	saga_state *st = gg->st;
	float	   *copy;

	if (r * st->d + st->dp <= ch->n_rows * st->d)
		return ch->x + (size_t) r * (size_t) st->d;
	copy = st->g_pad + (size_t) gg->n_pad++ * (size_t) st->dp;
	memcpy(copy, ch->x + (size_t) r * (size_t) st->d, sizeof(float) * (size_t) st->d);
	return copy;
}

/* A piece of the group (gbml_saga_plan_pieces): rows [r, r + n) of chunk c are its rows [i, i + n). */
static void
gather_piece(void *arg, int c, int64_t r, int64_t i, int64_t n)
{
	group_gather *gg = arg;
	saga_state *st = gg->st;
	const gbml_chunk *ch = st->ds->chunks[c];

	memcpy(st->g_label + i, ch->label + r, sizeof(float) * (size_t) n);
	if (st->ds->has_weight)
		memcpy(st->g_weight + i, ch->weight + r, sizeof(float) * (size_t) n);
	memcpy(st->g_memory + i, st->memory[c] + r, sizeof(double) * (size_t) n);
	for (int64_t k = 0; k < n; k++)
		st->g_rows[i + k] = gg->x ? gg->x + (size_t) (i + k) * (size_t) st->d : host_row(gg, ch, r + k);
}

/* The group's stored gradients, back to their chunks. */
static void
scatter_piece(void *arg, int c, int64_t r, int64_t i, int64_t n)
{
	saga_state *st = ((group_gather *) arg)->st;

	memcpy(st->memory[c] + r, st->g_memory + i, sizeof(double) * (size_t) n);
}

/*
 * SAGA steps over group j's rows in the plan's order: their features in
 * place (host chunks) or in the reader's buffer (x), their labels, weights
 * and stored gradients gathered in group order and the gradients given
 * back after.  Returns the rows visited.
 */
static int64_t
train_group(saga_state *st, gbml_saga_pass_args *a, const float *x, int64_t j)
{
	const gbml_saga_plan *pl = &st->plan;
	group_gather gg = {st, x, 0};

	gbml_saga_plan_pieces(pl, j, gather_piece, &gg);
	a->rows = st->g_rows;
	a->label = st->g_label;
	a->weight = st->ds->has_weight ? st->g_weight : NULL;
	a->memory = st->g_memory;
	a->order = pl->perm + pl->group_pos[j];
	a->n_visit = pl->group_pos[j + 1] - pl->group_pos[j];
	gbml_saga_chunk_pass(a);
	gbml_saga_plan_pieces(pl, j, scatter_piece, &gg);
	return a->n_visit;
}

/*
 * One epoch: the plan's groups (saga_plan.h) in order, their rows through
 * the reader (rows in files: the next group read ahead), the state carried
 * from group to group.  A cancel check every ~64k rows: an epoch over a big
 * table can take seconds.
 */
static int
run_epoch(saga_state *st, gbml_saga_pass_args *a, gbml_rng *rng, const gbml_progress_info *info)
{
	const float *x;
	int64_t		j,
				since_check = 0;
	int			rc;

	gbml_saga_plan_epoch(&st->plan, rng, st->env->threads);
	gbml_saga_slices_start(st->slices);
	while ((rc = gbml_saga_slices_next(st->slices, &x, &j)) > 0)
	{
		since_check += train_group(st, a, x, j);
		if (since_check >= CHECK_ROWS && j + 1 < st->plan.n_groups)
		{
			since_check = 0;
			if (gbml_progress(st->env, info))
				return gbml_error(st->env, GBML_ECANCELLED, "canceled");
		}
	}
	return rc;
}

/*
 * After an epoch: the relative change max|dw| / max|w| (the intercept
 * included), the divergence check, and the objective on a fixed schedule
 * (it costs about half an epoch: every epoch up to 20, then every 10th, and
 * the last), so the trace stays deterministic and costs a few percent.
 */
static int
end_epoch(saga_state *st, double b_before)
{
	double		max_change = fabs(st->b - b_before),
				max_w = fabs(st->b),
				abs_sum = 0,
				t0;
	int			rc;

	for (int j = 0; j < st->d; j++)
	{
		double		ch = fabs(st->w[j] - st->w_prev[j]);

		if (ch > max_change)
			max_change = ch;
		if (fabs(st->w[j]) > max_w)
			max_w = fabs(st->w[j]);
		abs_sum += fabs(st->w[j]);
	}
	st->rel = max_w > 0 ? max_change / max_w : (max_change > 0 ? INFINITY : 0);
	if (!isfinite(abs_sum) || !isfinite(st->b))
		return gbml_error(st->env, GBML_EINVAL,
						  "saga: the solver diverged in epoch %lld (non-finite weights); use a smaller step_size (now %g) or standardize",
						  (long long) st->epoch, st->step);
	st->converged = st->rel < st->p->tol;
	if (!(st->epoch <= 20 || st->epoch % 10 == 0 || st->converged || st->epoch == st->p->max_iter))
		return GBML_OK;
	t0 = gbml_now();
	if ((rc = evaluate(st, st->ds, &st->objective, &st->metric)) != GBML_OK)
		return rc;
	st->t_objective += gbml_now() - t0;
	if (st->n_trace < TRACE_CAP)
	{
		st->trace_epoch[st->n_trace] = (double) st->epoch;
		st->trace_obj[st->n_trace] = st->objective;
		st->trace_time[st->n_trace] = gbml_now() - st->t_start;
		st->trace_rel[st->n_trace] = st->rel;
		st->n_trace++;
	}
	return GBML_OK;
}

/* The CPU solver: statistics, step size, then epochs until tol or max_iter. */
static int
solve(saga_state *st)
{
	const gbml_saga_params *p = st->p;
	gbml_saga_pass_args a;
	gbml_rng	rng;
	int			rc;

	if ((rc = prepare(st, &a)) != GBML_OK)
		return rc;
	gbml_rng_seed(&rng, (uint64_t) p->random_seed);
	for (st->epoch = 1; st->epoch <= p->max_iter; st->epoch++)
	{
		double		t0 = gbml_now(),
					b_before = st->b;
		gbml_progress_info info = {"train", st->epoch, p->max_iter, "objective", NAN};

		memcpy(st->w_prev, st->w, sizeof(double) * (size_t) st->d);
		if ((rc = run_epoch(st, &a, &rng, &info)) != GBML_OK)
			return rc;
		st->t_solver += gbml_now() - t0;
		if ((rc = end_epoch(st, b_before)) != GBML_OK)
			return rc;
		info.metric = st->objective;
		if (gbml_progress(st->env, &info))
			return gbml_error(st->env, GBML_ECANCELLED, "canceled");
		if (st->converged)
			break;
	}
	if (st->epoch > p->max_iter)
		st->epoch = p->max_iter;
	return GBML_OK;
}

/*
 * Mini-batch SAGA on the device (saga_gpu.h) when env says so; *on_gpu
 * false: the CPU trains.  The model is written as for the CPU.
 */
static int
solve_gpu(saga_state *st, gbml_saga_gpu_result *gpu, bool *on_gpu)
{
	int			rc;

	gpu->w = st->w;
	gpu->mean = st->mean;
	gpu->std = st->std;
	gpu->trace_epoch = st->trace_epoch;
	gpu->trace_obj = st->trace_obj;
	gpu->trace_time = st->trace_time;
	gpu->trace_rel = st->trace_rel;
	gpu->trace_cap = TRACE_CAP;
	gpu->n_scaled = st->n_scaled;
	if ((rc = gbml_saga_gpu_train(st->ds, st->env, st->p, st->alpha, st->t_start, gpu)) != GBML_OK)
		return rc;
	*on_gpu = gpu->on_gpu;
	if (!gpu->on_gpu)
		return GBML_OK;
	gbml_saga_make_standardizer(st->d, st->n_scaled, st->mean, st->std, st->scale, st->shift);
	st->b = gpu->b;
	st->L = gpu->L;
	st->step = gpu->step;
	st->epoch = gpu->epochs;
	st->converged = gpu->converged;
	st->rel = gpu->rel;
	st->objective = gpu->objective;
	st->metric = gpu->metric;
	st->n_trace = gpu->n_trace;
	st->t_stats = gpu->t_stats;
	st->t_solver = gpu->t_solver;
	st->t_objective = gpu->t_objective;
	return GBML_OK;
}

/* The model section: layout version, loss, encoding, flags, d, b, w, mean, std. */
static int
write_section(const saga_state *st, gbml_train_context *ctx, int enc)
{
	gbml_strbuf body;
	int			rc;

	gbml_sb_init(&body, st->env);
	gbml_sb_u32(&body, GBML_SAGA_LAYOUT_VERSION);
	gbml_sb_u32(&body, (uint32_t) st->loss);
	gbml_sb_u32(&body, (uint32_t) enc);
	gbml_sb_u32(&body, (st->p->fit_intercept ? GBML_SAGA_FLAG_INTERCEPT : 0) |
				(st->stdz ? GBML_SAGA_FLAG_STANDARDIZED : 0));
	gbml_sb_u32(&body, (uint32_t) st->d);
	gbml_sb_f64(&body, st->b);
	gbml_sb_append(&body, st->w, sizeof(double) * (size_t) st->d);
	gbml_sb_append(&body, st->mean, sizeof(double) * (size_t) st->d);
	gbml_sb_append(&body, st->std, sizeof(double) * (size_t) st->d);
	if ((rc = gbml_sb_status(&body)) == GBML_OK)
		gbml_model_add_sb(ctx->writer, GBML_SAGA_SECTION, &body);
	gbml_sb_free(&body);
	return rc;
}

/* The metrics member of the metadata: training figures, and the eval set's when there is one. */
static int
write_metrics(saga_state *st, gbml_train_context *ctx, bool *first)
{
	gbml_strbuf *m = ctx->meta;
	double		eval_obj = NAN,
				eval_metric = NAN;
	bool		mf = true;
	bool		logistic = st->loss == GBML_SAGA_LOSS_LOGISTIC;
	int			rc;

	if (ctx->eval && (rc = evaluate(st, ctx->eval, &eval_obj, &eval_metric)) != GBML_OK)
		return rc;
	gbml_sb_json_key(m, "metrics", first);
	gbml_sb_append(m, "{", 1);
	gbml_sb_json_key(m, "objective", &mf);
	gbml_sb_json_number(m, st->objective);
	gbml_sb_json_key(m, logistic ? "train_accuracy" : "train_rmse", &mf);
	gbml_sb_json_number(m, st->metric);
	if (ctx->eval)
	{
		gbml_sb_json_key(m, "eval_objective", &mf);
		gbml_sb_json_number(m, eval_obj);
		gbml_sb_json_key(m, logistic ? "eval_accuracy" : "eval_rmse", &mf);
		gbml_sb_json_number(m, eval_metric);
	}
	gbml_sb_json_key(m, "eval_metric", &mf);
	gbml_sb_json_string(m, ctx->eval ? "eval_objective" : "objective");
	gbml_sb_json_key(m, "eval_value", &mf);
	gbml_sb_json_number(m, ctx->eval ? eval_obj : st->objective);
	gbml_sb_json_key(m, "higher_is_better", &mf);
	gbml_sb_append(m, "false}", 6);
	return GBML_OK;
}

/* The metadata: the fit's figures, the trace, the metrics and the (run-dependent) timings. */
static int
write_meta(saga_state *st, gbml_train_context *ctx, int enc, const gbml_saga_gpu_result *gpu)
{
	gbml_strbuf *m = ctx->meta;
	bool		first = true;
	int64_t		n_nonzero = 0;
	int			rc;

	for (int j = 0; j < st->d; j++)
		n_nonzero += st->w[j] != 0;
	gbml_sb_json_key(m, "loss", &first);
	gbml_sb_json_string(m, gbml_saga_loss_choices[st->loss]);
	gbml_sb_json_key(m, "label_encoding", &first);
	if (enc == GBML_SAGA_LABELS_NONE)
		gbml_sb_append(m, "null", 4);
	else
		gbml_sb_json_string(m, gbml_saga_encoding_name(enc));
	gbml_sb_json_key(m, "epochs", &first);
	gbml_sb_json_number(m, (double) st->epoch);
	gbml_sb_json_key(m, "objective", &first);
	gbml_sb_json_number(m, st->objective);
	gbml_sb_json_key(m, "stop_reason", &first);
	gbml_sb_json_string(m, st->shards ? st->shards->stop_reason : st->converged ? "tol" : "max_iter");
	gbml_sb_json_key(m, "converged", &first);
	gbml_sb_append(m, st->converged ? "true" : "false", st->converged ? 4 : 5);
	gbml_sb_json_key(m, "rel_change", &first);
	gbml_sb_json_number(m, st->rel);
	gbml_sb_json_key(m, "alpha", &first);
	gbml_sb_json_number(m, st->alpha);
	gbml_sb_json_key(m, "step_size", &first);
	gbml_sb_json_number(m, st->step);
	gbml_sb_json_key(m, "L", &first);
	gbml_sb_json_number(m, st->L);
	gbml_sb_json_key(m, "n_nonzero", &first);
	gbml_sb_json_number(m, (double) n_nonzero);
	gbml_sb_json_key(m, "standardized", &first);
	gbml_sb_append(m, st->stdz ? "true" : "false", st->stdz ? 4 : 5);
	if (st->enc)
	{
		/* what the weights are over: the one-hot encoded columns */
		gbml_sb_json_key(m, "one_hot_columns", &first);
		gbml_sb_json_number(m, (double) st->enc->n_cols);
	}
	if (st->shards)
	{
		/* rows on other servers: the same objective minimised by OWL-QN, a round trip per evaluation */
		gbml_sb_json_key(m, "solver", &first);
		gbml_sb_json_string(m, "owlqn_shards");
		gbml_sb_json_key(m, "pg_max", &first);
		gbml_sb_json_number(m, st->shards->pg_max);
		gbml_sb_json_key(m, "suboptimality_bound", &first);
		gbml_sb_json_number(m, st->shards->gap_bound);
		gbml_sb_json_key(m, "evaluations", &first);
		gbml_sb_json_number(m, (double) st->shards->evaluations);
	}
	if (gpu->on_gpu)
	{
		/* a GPU model says which solver made it: its bytes are not the CPU solver's */
		gbml_sb_json_key(m, "solver", &first);
		gbml_sb_json_string(m, "minibatch_saga");
		gbml_sb_json_key(m, "batch_size", &first);
		gbml_sb_json_number(m, (double) gpu->batch_size);
		gbml_sb_json_key(m, "L_max", &first);
		gbml_sb_json_number(m, gpu->L_max);
	}
	gbml_sb_json_key(m, "trace_epochs", &first);
	gbml_sb_json_doubles(m, st->trace_epoch, st->n_trace);
	gbml_sb_json_key(m, "trace_objective", &first);
	gbml_sb_json_doubles(m, st->trace_obj, st->n_trace);
	gbml_sb_json_key(m, "trace_rel_change", &first);
	gbml_sb_json_doubles(m, st->trace_rel, st->n_trace);
	if ((rc = write_metrics(st, ctx, &first)) != GBML_OK)
		return rc;

	gbml_sb_json_key(m, "timings", &first);
	/* run-dependent: the driver moves this member out of the model bytes into the report */
	gbml_sb_printf(m, "{\"stats_seconds\":%.6f,\"solver_seconds\":%.6f,\"objective_seconds\":%.6f,\"total_seconds\":%.6f,",
				   st->t_stats, st->t_solver, st->t_objective, gbml_now() - st->t_start);
	if (gpu->on_gpu)
		gbml_sb_printf(m, "\"device\":\"gpu\",\"rows_on_device\":\"%s\",\"batch_size\":%lld,\"step_size\":%.17g,"
					   "\"epochs\":%lld,\"power_iterations\":%d,\"h2d_bytes\":%.0f,",
					   gpu->streamed ? "streamed" : "resident", (long long) gpu->batch_size, st->step,
					   (long long) st->epoch, gpu->power_iterations, st->env->gpu_h2d_bytes);
	if (st->shards)
	{
		gbml_shard_traffic_json(m, &st->shards->traffic, "gradient");
		gbml_sb_append(m, ",", 1);
	}
	gbml_sb_printf(m, "\"trace_seconds\":");
	gbml_sb_json_doubles(m, st->trace_time, st->n_trace);
	gbml_sb_append(m, "}", 1);
	return gbml_sb_status(m);
}

/* Labels (logistic: both classes, one encoding, the eval set's the same), finite features. */
static int
check_input(const gbml_dataset *ds, gbml_train_context *ctx, int loss, int *enc)
{
	gbml_env   *env = ctx->env;
	int			rc;

	*enc = GBML_SAGA_LABELS_NONE;
	/* with a schema the error names the column */
	if ((rc = gbml_onehot_check_numeric(ds, "saga", "the training set", env)) != GBML_OK ||
		(ctx->eval && (rc = gbml_onehot_check_numeric(ctx->eval, "saga", "the eval set", env)) != GBML_OK))
		return rc;
	if (ds->has_missing || (ctx->eval && ctx->eval->has_missing))
		return gbml_error(env, GBML_EINVAL, "saga: features must be finite (NaN or infinite values found)");
	if (loss != GBML_SAGA_LOSS_LOGISTIC)
		return GBML_OK;
	if ((rc = check_labels(ds, env, "the training set", 0, enc)) != GBML_OK)
		return rc;
	if (ctx->eval && (rc = check_labels(ctx->eval, env, "the eval set", *enc, NULL)) != GBML_OK)
		return rc;
	return GBML_OK;
}

/* A training's state before any allocation: its shape, loss and penalty (alpha resolved). */
static void
state_init(saga_state *st, const gbml_dataset *ds, gbml_env *env, const gbml_saga_params *p,
		   const gbml_onehot *enc, double alpha)
{
	memset(st, 0, sizeof(*st));
	st->ds = ds;
	st->env = env;
	st->p = p;
	st->enc = enc;
	st->d = ds->n_features;
	st->n_scaled = enc ? enc->n_numeric : st->d;
	st->dp = gbml_saga_padded(st->d);
	st->loss = p->loss;
	st->stdz = p->standardize;
	st->alpha = alpha;
	st->rel = INFINITY;
	st->objective = st->metric = NAN;
	st->t_start = gbml_now();
}

int
gbml_saga_local_weights(const gbml_dataset *ds, gbml_env *env, const gbml_saga_params *p, double alpha,
						double *w_eff, double *b_eff)
{
	saga_state	st;
	int			rc;

	state_init(&st, ds, env, p, NULL, alpha);
	if ((rc = alloc_state(&st)) == GBML_OK && (rc = solve(&st)) == GBML_OK)
	{
		gbml_saga_effective_weights(st.d, st.w, st.b, st.stdz ? st.scale : NULL, st.stdz ? st.shift : NULL, st.w_eff, b_eff);
		memcpy(w_eff, st.w_eff, sizeof(double) * (size_t) st.d);
	}
	state_free(&st);
	return rc;
}

/*
 * Rows on other servers (saga_shards.h): the labels' classes and the
 * statistics from the shards, OWL-QN on the same objective, the model
 * written as on one server.
 */
static int
train_on_shards(const gbml_dataset *ds, gbml_train_context *ctx, saga_state *st, const gbml_onehot *enc)
{
	gbml_saga_shards_result res;
	gbml_saga_gpu_result none;
	int			rc;

	memset(&res, 0, sizeof(res));
	memset(&none, 0, sizeof(none));
	res.w = st->w;
	res.n_scaled = st->n_scaled;
	res.mean = st->mean;
	res.std = st->std;
	res.trace_iter = st->trace_epoch;
	res.trace_obj = st->trace_obj;
	res.trace_time = st->trace_time;
	res.trace_rel = st->trace_rel;
	res.trace_cap = TRACE_CAP;
	if ((rc = gbml_saga_shards_train(ds, ctx->env, st->p, st->alpha, st->t_start, &res)) != GBML_OK)
		return rc;
	/* an eval set of this server's own (eval_source): checked as one server checks it, scored here */
	if (ctx->eval && ctx->eval->has_missing)
		return gbml_error(ctx->env, GBML_EINVAL, "saga: features must be finite (NaN or infinite values found)");
	if (ctx->eval && st->loss == GBML_SAGA_LOSS_LOGISTIC &&
		(rc = check_labels(ctx->eval, ctx->env, "the eval set", res.label_encoding, NULL)) != GBML_OK)
		return rc;
	gbml_saga_make_standardizer(st->d, st->n_scaled, st->mean, st->std, st->scale, st->shift);
	st->shards = &res;
	st->b = res.b;
	st->objective = res.objective;
	st->metric = res.metric;
	st->epoch = res.iterations;
	st->converged = res.converged;
	st->rel = res.rel;
	st->n_trace = res.n_trace;
	st->L = st->step = NAN;
	st->t_stats = res.t_stats;
	st->t_solver = res.t_solver;
	if ((rc = write_section(st, ctx, res.label_encoding)) == GBML_OK &&
		(enc == NULL || (rc = gbml_onehot_add_section(enc, ctx->writer, ctx->env)) == GBML_OK))
		rc = write_meta(st, ctx, res.label_encoding, &none);
	st->shards = NULL;
	return rc;
}

/*
 * The training proper on rows of plain numbers: the input's, or its one-hot
 * encoding's (enc: the model gets the encoding too).
 */
static int
train_rows(const gbml_dataset *ds, gbml_train_context *ctx, const gbml_onehot *enc)
{
	const gbml_saga_params *p = ctx->params;
	saga_state	st;
	gbml_saga_gpu_result gpu;
	bool		on_gpu = false;
	int			label_enc,
				rc;

	memset(&gpu, 0, sizeof(gpu));
	state_init(&st, ds, ctx->env, p, enc, p->C > 0 ? 1.0 / (p->C * (double) ds->n_rows) : p->alpha);
	if (ds->shards)
	{
		if ((rc = alloc_state(&st)) == GBML_OK)
			rc = train_on_shards(ds, ctx, &st, enc);
		goto done;
	}
	if ((rc = check_input(ds, ctx, p->loss, &label_enc)) != GBML_OK)
		return rc;
	if ((rc = alloc_state(&st)) != GBML_OK)
		goto done;
	if (ctx->env->device == GBML_DEVICE_GPU && (rc = solve_gpu(&st, &gpu, &on_gpu)) != GBML_OK)
		goto done;
	if (!on_gpu && (rc = solve(&st)) != GBML_OK)
		goto done;
	free_solver(&st);
	if ((rc = write_section(&st, ctx, label_enc)) != GBML_OK ||
		(enc && (rc = gbml_onehot_add_section(enc, ctx->writer, ctx->env)) != GBML_OK))
		goto done;
	rc = write_meta(&st, ctx, label_enc, &gpu);
done:
	state_free(&st);
	return rc;
}

int
gbml_saga_one_hot(const gbml_dataset *ds, const gbml_dataset *eval, const gbml_saga_params *p, bool union_counts,
				  gbml_env *env, gbml_onehot **enc, gbml_dataset *xds, gbml_dataset *xeval)
{
	gbml_onehot_options o = {.algo = &gbml_algorithm_saga,.max_categories = p->max_categories,.other = true,
	.union_counts = union_counts};

	return gbml_onehot_prepare(ds, eval, &o, env, enc, xds, xeval);
}

/*
 * Categorical features: the one-hot encoding learned from the training
 * rows (an indicator per kept category and an "other" one per feature),
 * the training and eval rows encoded, and the training on those.
 */
static int
train_encoded(const gbml_dataset *ds, gbml_train_context *ctx)
{
	gbml_train_context sub = *ctx;
	gbml_onehot *enc;
	gbml_dataset xds,
				xeval;
	int			rc;

	/* on shards, each encoded its rows by the union's counts (saga_shard.c), as this server does */
	if ((rc = gbml_saga_one_hot(ds, ctx->eval, ctx->params, ds->shards != NULL, ctx->env, &enc, &xds, &xeval)) !=
		GBML_OK)
		return rc;
	sub.eval = ctx->eval ? &xeval : NULL;
	rc = train_rows(&xds, &sub, enc);
	gbml_onehot_finish(enc, &xds, &xeval, ctx->env);
	return rc;
}

int
gbml_saga_train(const gbml_dataset *ds, gbml_train_context *ctx)
{
	if (gbml_schema_n_categorical(ds->schema) > 0)
		return train_encoded(ds, ctx);
	return train_rows(ds, ctx, NULL);
}
