/*
 * saga_kernels.h — the hot loops of the SAGA trainer as plain-C entry points
 * with simple array arguments, so a GPU backend can later provide the same
 * functions:
 *
 *   gbml_saga_chunk_pass   one SAGA sweep over a set of rows in a given
 *                          order, carrying the solver state (weights,
 *                          average gradient, stored per-row gradients);
 *   gbml_saga_block_eval   loss and accuracy/squared-error sums of a block of
 *                          rows at fixed weights (objective, metrics);
 *   gbml_saga_dot          the margin x·w of one row, summed in the same fixed
 *                          lane order as the kernels (scoring).
 *
 * Layout rules shared with saga.c: every weight-like vector (w, avg, scale,
 * shift) is allocated with gbml_saga_padded(d) doubles and its padding lanes
 * are zero, so the kernels work in whole 8-lane blocks without a scalar tail.
 * Sums over features are split into 4 x 8 partial sums (feature j goes to
 * accumulator (j / 8) % 4, lane j % 8), added in one fixed order, so results
 * do not depend on the vector width the CPU happens to have (up to FMA
 * contraction: a CPU without FMA rounds differently, which only matters
 * across machines).
 *
 * Labels: the kernels read the user's labels as stored in the chunk.  For the
 * logistic loss a label > 0 is the positive class (y = +1) and anything else
 * the negative class (y = -1); saga.c has already checked that labels are
 * 0/1 or -1/+1.
 */
#ifndef GBML_SAGA_KERNELS_H
#define GBML_SAGA_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* The per-row loss functions below also compile as CUDA device code (cuda/saga_device.cu). */
#if defined(__CUDACC__) || defined(GBML_CUDA_EMU)
#define GBML_SAGA_HD __host__ __device__
#else
#define GBML_SAGA_HD
#endif

typedef enum gbml_saga_loss
{
	GBML_SAGA_LOSS_LOGISTIC = 0,	/* log(1 + exp(-y p)), y in {-1, +1} */
	GBML_SAGA_LOSS_SQUARED = 1	/* (p - y)^2 / 2 */
} gbml_saga_loss;

#define GBML_SAGA_LANES 8

/* Number of doubles to allocate for a d-vector (a multiple of 8, at least 8). */
static inline int64_t
gbml_saga_padded(int64_t d)
{
	return d <= 0 ? GBML_SAGA_LANES : (d + GBML_SAGA_LANES - 1) / GBML_SAGA_LANES * GBML_SAGA_LANES;
}

/* Loss of one row at margin p (unweighted). */
GBML_SAGA_HD static inline double
gbml_saga_loss_value(int loss, double p, float label)
{
	if (loss == GBML_SAGA_LOSS_LOGISTIC)
	{
		double		z = label > 0 ? -p : p; /* -y p */

		return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
	}
	else
	{
		double		e = p - (double) label;

		return 0.5 * e * e;
	}
}

/*
 * d loss / d p of one row at margin p (unweighted).  Logistic:
 * -y sigmoid(-y p) = -y e' / (1 + e) with e = exp(-|p|) and e' = e when
 * y p > 0, else 1: exp never overflows, and the select is branch-free (the
 * sign of y p is random from row to row, a branch would mispredict).
 */
GBML_SAGA_HD static inline double
gbml_saga_loss_deriv(int loss, double p, float label)
{
	if (loss == GBML_SAGA_LOSS_LOGISTIC)
	{
		double		y = label > 0 ? 1.0 : -1.0;
		double		e = exp(-fabs(p));
		double		num = y * p > 0 ? e : 1.0;

		return -y * num / (1.0 + e);
	}
	return p - (double) label;
}

/* One SAGA sweep over a set of rows (a chunk's, or a group of slices': saga_plan.h). */
typedef struct gbml_saga_pass_args
{
	/*
	 * the rows: row i's features at rows[i], readable up to
	 * gbml_saga_padded(d) floats from there (the last block is loaded whole
	 * and masked: a row inside a chunk, or a copy with room)
	 */
	const float *const *rows;
	const float *label;			/* per row */
	const float *weight;		/* per row, or NULL for all 1 */
	const uint32_t *order;		/* rows to visit, in order */
	int64_t		n_visit;
	int			d;

	/* optional standardization z = x * scale + shift (both NULL: raw x) */
	const double *scale;		/* padded */
	const double *shift;		/* padded */

	/* solver state, updated in place */
	double	   *memory;			/* per row: its stored gradient scalar */
	double	   *w;				/* padded weights */
	double	   *avg;			/* padded average of the stored gradients */
	double	   *intercept;
	double	   *avg_intercept;

	/* constants */
	int			loss;			/* gbml_saga_loss */
	bool		fit_intercept;
	double		step;			/* step size gamma */
	double		inv_n;			/* 1 / total rows of the data set */
	double		l1_threshold;	/* gamma * alpha * l1_ratio */
	double		l2_shrink;		/* 1 / (1 + gamma * alpha * (1 - l1_ratio)) */
} gbml_saga_pass_args;

void		gbml_saga_chunk_pass(const gbml_saga_pass_args *a);

/*
 * Sums over rows [0, n) of a row-major block at fixed (raw-space) weights w
 * (padded) and intercept b, added row after row onto out (zero it for a
 * fresh block; a block split in two is summed on as if whole): out[0] +=
 * weight * loss, out[1] += 1 per correctly classified row (logistic) or the
 * squared error (squared).
 */
void		gbml_saga_block_eval(const float *x, const float *label, const float *weight,
								 int64_t n, int d, const double *w, double b, int loss,
								 double out[2]);

/* x · w for one row (w padded), lanes summed in the fixed order. */
double		gbml_saga_dot(const double *w, const float *x, int d);

/*
 * Column moments of a row-major block, added into sums (padded): with
 * center == NULL the sums of x, else the sums of (x - center)^2.  Rows are
 * added in order, so the result is deterministic.
 */
void		gbml_saga_column_moments(const float *x, int64_t n, int d, const double *center,
									 double *sums);

/* max over rows of weight * (|z|^2 + extra), z standardized when scale != NULL. */
double		gbml_saga_max_row_norm(const float *x, const float *weight, int64_t n, int d,
								   const double *scale, const double *shift, double extra);

#endif
