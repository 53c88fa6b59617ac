/*
 * saga_kernels.c — CPU versions of the SAGA hot loops (see saga_kernels.h).
 *
 * Why it looks like this:
 *  - One row costs two passes over d features, the floor for dense SAGA: the
 *    margin x_i·w, then the fused update (gradient step with the stored
 *    gradient difference and the average gradient, average-gradient update,
 *    elastic-net prox).  The margin of the NEXT row is accumulated inside the
 *    update pass of the current one, so w and avg are read and written once
 *    per row and the next row's features stream in while we compute.
 *  - Explicit 8-lane vectors (GCC vector extensions) instead of relying on
 *    the auto-vectoriser: the build uses -O2, which does not vectorise
 *    floating-point reductions, and a fixed lane layout makes the summation
 *    order identical for the avx512f, avx2 and baseline clones.
 *  - Padding lanes of w/avg/scale/shift are zero and the last partial block of
 *    x is loaded whole and masked to zeros, so padded lanes stay exactly
 *    zero: no scalar tail (the caller leaves room to load it whole).
 *  - Rows are reached through a table of row pointers (the rows of a group
 *    of slices sit in several chunks) and visited in shuffled order, so the
 *    row GBML_SAGA_PREFETCH visits ahead is prefetched explicitly (the
 *    hardware prefetcher cannot guess it).
 *  - A row's cost is mostly a dependency chain (margin -> exp -> gradient ->
 *    update -> next margin); four independent accumulators keep the margin's
 *    FMAs from queueing behind each other.
 */
#include "saga_kernels.h"

#include <string.h>

typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int64_t v8l __attribute__((vector_size(64)));

/* Rows ahead to prefetch: about one DRAM latency of work at ~100 ns per row. */
#ifndef GBML_SAGA_PREFETCH
#define GBML_SAGA_PREFETCH 8
#endif

#if defined(__x86_64__) && !defined(__clang_analyzer__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif
#define INLINE static inline __attribute__((always_inline))

/* Loads features [8*blk, 8*blk+8) of a row as doubles; lanes past d are 0. */
INLINE void
load_x(const float *row, int blk, int d, v8d *out)
{
	v8f			f;
	int			j = blk * GBML_SAGA_LANES;

	if (j + GBML_SAGA_LANES <= d)
		memcpy(&f, row + j, sizeof(f));
	else
	{
		memset(&f, 0, sizeof(f));
		for (int k = 0; j + k < d; k++)
			f[k] = row[j + k];
	}
	*out = __builtin_convertvector(f, v8d);
}

/*
 * The last, partial block of a row inside the update loop: one full 8-float
 * load masked to the row's lanes (the caller guarantees the row is readable
 * that far: gbml_saga_pass_args.rows).
 */
INLINE void
load_x_tail(const float *row, int blk, const v8l *mask, v8d *out)
{
	v8f			f;

	memcpy(&f, row + blk * GBML_SAGA_LANES, sizeof(f));
	*out = (v8d) ((v8l) __builtin_convertvector(f, v8d) & *mask);
}

INLINE void
load_d(const double *p, int blk, v8d *out)
{
	memcpy(out, p + blk * GBML_SAGA_LANES, sizeof(v8d));
}

INLINE void
store_d(double *p, int blk, const v8d *v)
{
	memcpy(p + blk * GBML_SAGA_LANES, v, sizeof(v8d));
}

/* The fixed lane order every sum over features uses. */
INLINE double
hsum(const v8d *a)
{
	const double *l = (const double *) a;

	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/*
 * Four accumulators (block b goes to accumulator b % 4) so consecutive FMAs do
 * not wait on each other; combined in one fixed order.
 */
INLINE double
hsum4(const v8d *acc)
{
	v8d			t = (acc[0] + acc[1]) + (acc[2] + acc[3]);

	return hsum(&t);
}

/* Features of one block, standardized when asked (padding lanes stay 0). */
INLINE void
load_z(const float *row, int blk, int d, const double *scale, const double *shift,
	   const bool stdz, v8d *out)
{
	load_x(row, blk, d, out);
	if (stdz)
	{
		v8d			sc,
					sh;

		load_d(scale, blk, &sc);
		load_d(shift, blk, &sh);
		*out = *out * sc + sh;
	}
}

INLINE double
dot_row(const double *w, const float *row, int d, const double *scale, const double *shift,
		const bool stdz)
{
	v8d			acc[4] = {{0}, {0}, {0}, {0}};
	int			nb = (int) (gbml_saga_padded(d) / GBML_SAGA_LANES);

	for (int blk = 0; blk < nb; blk++)
	{
		v8d			z,
					wv;

		load_z(row, blk, d, scale, shift, stdz, &z);
		load_d(w, blk, &wv);
		acc[blk & 3] += wv * z;
	}
	return hsum4(acc);
}

INLINE void
prefetch_row(const float *row, int d)
{
	const char *p = (const char *) row;
	size_t		bytes = sizeof(float) * (size_t) d;

	for (size_t off = 0; off < bytes; off += 64)
		__builtin_prefetch(p + off, 0, 3);
}

/* Update of one 8-feature block (see pass_body); z, zn are raw features. */
INLINE void
update_block(const gbml_saga_pass_args *a, int blk, const bool stdz, v8d *z, v8d *zn,
			 double step, double delta, double delta_n, double thr, double shrink,
			 double *restrict w, double *restrict avg, v8d *acc)
{
	const v8l	abs_mask = (v8l) {0} + (int64_t) 0x7fffffffffffffffLL;
	const v8l	sign_mask = (v8l) {0} + (int64_t) (-0x7fffffffffffffffLL - 1);
	v8d			wv,
				av,
				v,
				t,
				nw;
	v8l			pos;

	if (stdz)
	{
		v8d			sc,
					sh;

		load_d(a->scale, blk, &sc);
		load_d(a->shift, blk, &sh);
		*z = *z * sc + sh;
		*zn = *zn * sc + sh;
	}
	load_d(w, blk, &wv);
	load_d(avg, blk, &av);
	v = wv - step * (delta * *z + av);
	av += delta_n * *z;
	/* prox: sign(v) * max(|v| - thr, 0) * shrink, branch-free */
	t = (v8d) ((v8l) v & abs_mask) - thr;
	pos = t > 0;
	t *= shrink;
	nw = (v8d) ((((v8l) t) | ((v8l) v & sign_mask)) & pos);
	store_d(w, blk, &nw);
	store_d(avg, blk, &av);
	*acc += nw * *zn;
}

/*
 * The SAGA step for row i with stored gradient alpha_i and average gradient
 * A = (1/n) sum_k alpha_k (the intercept is one more coordinate with feature 1):
 *     g      = weight_i * loss'(x_i·w + b, y_i)
 *     w      = prox( w - step * ((g - alpha_i) x_i + A) )
 *     A     += (g - alpha_i) x_i / n ;  alpha_i = g
 * where prox is the elastic-net proximal map: soft-threshold by
 * step*alpha*l1_ratio, then shrink by 1/(1 + step*alpha*(1 - l1_ratio)).
 */
INLINE void
pass_body(const gbml_saga_pass_args *a, const bool stdz)
{
	const int	d = a->d;
	const int	nb = (int) (gbml_saga_padded(d) / GBML_SAGA_LANES);
	const float *const *rows = a->rows;
	const uint32_t *order = a->order;
	double	   *restrict w = a->w;
	double	   *restrict avg = a->avg;
	double	   *restrict memory = a->memory;
	const double step = a->step;
	const double thr = a->l1_threshold;
	const double shrink = a->l2_shrink;
	const int	nfull = d / GBML_SAGA_LANES;
	v8l			tail_mask;
	double		b = *a->intercept;
	double		avg_b = *a->avg_intercept;
	double		p;

	if (a->n_visit <= 0)
		return;
	for (int k = 0; k < GBML_SAGA_LANES; k++)
		tail_mask[k] = nfull * GBML_SAGA_LANES + k < d ? -1 : 0;
	p = dot_row(w, rows[order[0]], d, a->scale, a->shift, stdz) + b;

	for (int64_t k = 0; k < a->n_visit; k++)
	{
		uint32_t	i = order[k];
		const float *xi = rows[i];
		const float *xn = k + 1 < a->n_visit ? rows[order[k + 1]] : xi;
		double		s = a->weight ? (double) a->weight[i] : 1.0;
		double		g = s * gbml_saga_loss_deriv(a->loss, p, a->label[i]);
		double		delta = g - memory[i];
		double		delta_n = delta * a->inv_n;
		v8d			acc[4] = {{0}, {0}, {0}, {0}};

		if (k + GBML_SAGA_PREFETCH < a->n_visit)
			prefetch_row(rows[order[k + GBML_SAGA_PREFETCH]], d);
		memory[i] = g;

		for (int blk = 0; blk < nfull; blk++)
		{
			v8d			z,
						zn;

			load_x(xi, blk, d, &z);
			load_x(xn, blk, d, &zn);
			update_block(a, blk, stdz, &z, &zn, step, delta, delta_n, thr, shrink, w, avg, &acc[blk & 3]);
		}
		if (nfull < nb)
		{
			v8d			z,
						zn;

			load_x_tail(xi, nfull, &tail_mask, &z);
			load_x_tail(xn, nfull, &tail_mask, &zn);
			update_block(a, nfull, stdz, &z, &zn, step, delta, delta_n, thr, shrink, w, avg, &acc[nfull & 3]);
		}
		if (a->fit_intercept)
		{
			b -= step * (delta + avg_b);
			avg_b += delta_n;
		}
		p = hsum4(acc) + b;
	}
	*a->intercept = b;
	*a->avg_intercept = avg_b;
}

CLONES void
gbml_saga_chunk_pass(const gbml_saga_pass_args *a)
{
	if (a->scale != NULL)
		pass_body(a, true);
	else
		pass_body(a, false);
}

CLONES void
gbml_saga_block_eval(const float *x, const float *label, const float *weight,
					 int64_t n, int d, const double *w, double b, int loss,
					 double out[2])
{
	double		loss_sum = out[0],
				stat = out[1];

	for (int64_t r = 0; r < n; r++)
	{
		double		p = dot_row(w, x + (size_t) r * d, d, NULL, NULL, false) + b;
		double		s = weight ? (double) weight[r] : 1.0;

		loss_sum += s * gbml_saga_loss_value(loss, p, label[r]);
		if (loss == GBML_SAGA_LOSS_LOGISTIC)
			stat += ((p > 0) == (label[r] > 0)) ? 1.0 : 0.0;
		else
		{
			double		e = p - (double) label[r];

			stat += e * e;
		}
	}
	out[0] = loss_sum;
	out[1] = stat;
}

CLONES double
gbml_saga_dot(const double *w, const float *x, int d)
{
	return dot_row(w, x, d, NULL, NULL, false);
}

CLONES double
gbml_saga_max_row_norm(const float *x, const float *weight, int64_t n, int d,
					   const double *scale, const double *shift, double extra)
{
	double		best = 0;
	int			nb = (int) (gbml_saga_padded(d) / GBML_SAGA_LANES);

	for (int64_t r = 0; r < n; r++)
	{
		const float *row = x + (size_t) r * d;
		v8d			acc = {0};
		double		v;

		for (int blk = 0; blk < nb; blk++)
		{
			v8d			z;

			if (scale)
				load_z(row, blk, d, scale, shift, true, &z);
			else
				load_z(row, blk, d, NULL, NULL, false, &z);
			acc += z * z;
		}
		v = (hsum(&acc) + extra) * (weight ? (double) weight[r] : 1.0);
		if (v > best)
			best = v;
	}
	return best;
}

CLONES void
gbml_saga_column_moments(const float *x, int64_t n, int d, const double *center, double *sums)
{
	int			nb = (int) (gbml_saga_padded(d) / GBML_SAGA_LANES);

	/* rows outer, so the block streams through memory once; sums stay in L1 */
	for (int64_t r = 0; r < n; r++)
	{
		const float *row = x + (size_t) r * d;

		for (int blk = 0; blk < nb; blk++)
		{
			v8d			acc,
						z;

			load_d(sums, blk, &acc);
			load_x(row, blk, d, &z);
			if (center)
			{
				v8d			c;

				/* padding lanes: x = 0 and center = 0, so they stay 0 */
				load_d(center, blk, &c);
				z -= c;
				acc += z * z;
			}
			else
				acc += z;
			store_d(sums, blk, &acc);
		}
	}
}
