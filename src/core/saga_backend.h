/*
 * saga_backend.h — the SAGA part of the compute backend (backend.h's `saga`
 * table, implemented by cuda/saga_device.cu): mini-batch SAGA on the device
 * (saga_gpu.c drives it).
 *
 * The device holds one training's solver state — the weights w and the
 * average gradient A (d entries plus the intercept at index d), one stored
 * gradient scalar per row, the rows' labels and weights — and the rows'
 * features either resident (device chunks of consecutive rows, uploaded
 * once) or, when they do not fit the budget, streamed: the host fills a
 * pinned staging buffer (one of a ring of two) with the next rows while the
 * device works on the previous buffer, whose copy ran on a second stream.
 * Which of the two is the backend's choice at begin (it knows the budget);
 * every result is the same either way, bit for bit: the arithmetic never
 * depends on where a row came from.
 *
 * Rows are addressed by the device's chunks: chunk << 32 | row.  Every sum
 * the device computes runs in a fixed order (blocks of
 * GBML_SAGA_DEVICE_ROWS rows from each chunk's first, combined in block
 * order across the chunks), so a training's results depend only on the
 * rows, the params and the seed, never on timing; and, with every chunk but
 * the last a multiple of GBML_SAGA_DEVICE_ROWS rows (saga_gpu.c cuts them
 * so), not on where the chunks fall either.
 *
 * Every call returns 0 on success, nonzero on a device error or a budget
 * refusal (the reason in the backend's last_error, the kind in
 * ctx_over_budget); after a failure only end / ctx_destroy are meaningful.
 */
#ifndef GBML_SAGA_BACKEND_H
#define GBML_SAGA_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gbml_gpu_ctx gbml_gpu_ctx;

/* Rows of one block of the device's kernels: the grain of its sums. */
#define GBML_SAGA_DEVICE_ROWS 256

/* One training's shape. */
typedef struct gbml_saga_device_shape
{
	int64_t		n_rows;
	int			n_features;		/* d */
	int			n_chunks;
	const int64_t *chunk_rows;	/* n_chunks: the device's chunks, all but the last GBML_SAGA_DEVICE_ROWS-aligned */
	int			loss;			/* gbml_saga_loss */
	bool		fit_intercept;
	bool		has_weight;
	int			batch_size;		/* rows of one SAGA step, 1 .. n_rows */
	int64_t		stage_rows;		/* rows a staging buffer holds: >= every chunk and >= batch_size */
} gbml_saga_device_shape;

/*
 * Passes over every row, chunk by chunk in order.  Each returns a
 * vector out[d + 1] and two scalars; slot d of the vector is the intercept's
 * column (1 for every row) where it applies, else 0.  z is a row's features
 * after the scaling set by set_scaling (none: the raw features), s its weight.
 */
typedef enum gbml_saga_pass_kind
{
	GBML_SAGA_PASS_SUM = 0,		/* out[j] = sum x_j (raw features) */
	GBML_SAGA_PASS_SQDEV = 1,	/* out[j] = sum (x_j - vec[j])^2 (raw) */
	GBML_SAGA_PASS_NORM = 2,	/* scalars: max s (|z|^2 + extra), sum s (|z|^2 + extra) */
	GBML_SAGA_PASS_POWER = 3,	/* out = sum s (z'.vec) z' with z' = (z, 1 if fit_intercept): a product with the Gram matrix */
	GBML_SAGA_PASS_EVAL = 4		/* at the current weights: scalars sum s loss, and #correct (logistic) or sum of squared errors */
} gbml_saga_pass_kind;

/* The constants of the steps (the prox: soft-threshold, then shrink). */
typedef struct gbml_saga_device_solver
{
	double		step;			/* gamma */
	double		inv_n;			/* 1 / n_rows */
	double		l1_threshold;	/* gamma alpha l1_ratio */
	double		l2_shrink;		/* 1 / (1 + gamma alpha (1 - l1_ratio)) */
} gbml_saga_device_solver;

struct gbml_backend_saga
{
	/*
	 * Allocates the solver state (w = A = stored gradients = 0) and either
	 * room for every chunk's features (*streamed = false) or the staging
	 * ring (*streamed = true), whichever the context's budget allows.
	 */
	int			(*begin) (gbml_gpu_ctx *ctx, const gbml_saga_device_shape *shape, bool *streamed);
	/* Frees everything begin allocated (the context stays). */
	void		(*end) (gbml_gpu_ctx *ctx);

	/* Chunk c's labels and weights (weight NULL: all 1); the host arrays must live until the next sync call. */
	int			(*put_rows) (gbml_gpu_ctx *ctx, int chunk, const float *label, const float *weight);
	/*
	 * The next staging buffer (stage_rows x d floats, pinned): one of a ring
	 * of two, handed out once the copy that last read it has run.  Fill it,
	 * then pass it to put_chunk, pass_chunk or steps.
	 */
	float	   *(*stage) (gbml_gpu_ctx *ctx);
	/* Resident only: chunk c's features, from the buffer stage() handed out (or any host memory). */
	int			(*put_chunk) (gbml_gpu_ctx *ctx, int chunk, const float *x);

	/* z = x scale + shift from now on (both NULL: raw features); d values each. */
	int			(*set_scaling) (gbml_gpu_ctx *ctx, const double *scale, const double *shift);
	int			(*set_solver) (gbml_gpu_ctx *ctx, const gbml_saga_device_solver *solver);

	/*
	 * A pass: pass_begin (vec: d + 1 values for SQDEV and POWER, else NULL;
	 * extra: NORM's addend), then pass_chunk for every chunk in order (x NULL
	 * when resident, else a staging buffer holding the chunk's rows), then
	 * pass_end (waits; out d + 1 values, scalars 2).
	 */
	int			(*pass_begin) (gbml_gpu_ctx *ctx, gbml_saga_pass_kind kind, const double *vec, double extra);
	int			(*pass_chunk) (gbml_gpu_ctx *ctx, int chunk, const float *x);
	int			(*pass_end) (gbml_gpu_ctx *ctx, double *out, double *scalars);

	/*
	 * An epoch: epoch_begin uploads its visiting order (n_rows addresses);
	 * steps runs the SAGA steps over positions [p0, p1) of it, batch_size
	 * rows a step (the epoch's last step may be shorter): x NULL when
	 * resident, else a staging buffer holding the rows of those positions in
	 * order (p1 - p0 <= stage_rows, p0 a multiple of batch_size); it returns
	 * once the work is queued.  epoch_end waits, applies the last step and
	 * copies w and the intercept to w_out[d + 1].
	 */
	int			(*epoch_begin) (gbml_gpu_ctx *ctx, const int64_t *order);
	int			(*steps) (gbml_gpu_ctx *ctx, int64_t p0, int64_t p1, const float *x);
	int			(*epoch_end) (gbml_gpu_ctx *ctx, double *w_out);
};

#endif
