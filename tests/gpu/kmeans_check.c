/*
 * kmeans_check.c — the K-Means table of the CUDA backend
 * (cuda/kmeans_device.cu, the contract in src/core/kmeans_backend.h)
 * against the CPU, bit for bit: labels equal gbml_km_assign's, the sums a
 * plain loop of gbml_km_fix_term, counts and changed rows; the k-means++
 * values and potentials a plain loop of gbml_km_cand_dist; cand_take's
 * maximum; the row distances gbml_km_row_dist's.  On random data of several
 * shapes (k 1 to 300, d 1 to 130, uneven blocks down to one row, spherical
 * or not) and on data that forces the exact path: duplicated centroids,
 * rows midway between two centroids, huge offsets, alpha = +inf.  Each
 * case also lists its blocks in reverse or passes over a subset, drops and
 * puts blocks back, and poisons every host array once the call that got it
 * returns.  Then what must fail cleanly and hold nothing afterwards:
 * misuse, the memory budget, CUDA failures injected into the emulation.
 */
#include "gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "kmeans_backend.h"
#include "kmeans_exact.h"
#include "kmeans_kernels.h"
#include "rng.h"

#define CAND_LANES 16			/* cand_t[d][16] */

typedef enum km_kind
{
	KM_RANDOM,
	KM_DUPLICATES,				/* every second centroid repeats the one before */
	KM_MIDPOINTS,				/* rows exactly midway between two centroids */
	KM_OFFSET					/* values ~1e6 with a spread of a few units: float cannot decide */
} km_kind;

typedef struct km_case
{
	int64_t		n;
	int			d;
	int			k;
	bool		spherical;
	km_kind		kind;
	bool		all_exact;		/* alpha = +inf */
	int			T;				/* k-means++ candidates */
} km_case;

/* One problem: the rows in blocks, the centroids, and the CPU's view of them. */
typedef struct km_prob
{
	km_case		c;
	float	   *x;
	double	   *xnorm2;
	double	   *scale;			/* spherical: 1/|x|, else NULL */
	int			nb;
	int64_t    *start;
	int64_t    *len;
	int		   *ids;			/* every block, in the order the calls that take a list get */
	double	   *cent;			/* k x d */
	double	   *fix;			/* d: the sums' fixed-point grids */
	gbml_km_centers C;
	float	   *panels;
	double	   *panels_d;
	float	   *cnorm;
	double	   *cnorm_d;
	double		xnorm_max;
} km_prob;

static const struct gbml_backend_kmeans *K;

/* ---- the problem ---- */

static double
row_scale(const km_prob *p, int64_t i)
{
	return p->scale ? p->scale[i] : 1.0;
}

static void
make_rows(km_prob *p, gbml_rng *rng)
{
	int			d = p->c.d;

	for (int64_t i = 0; i < p->c.n * d; i++)
		p->x[i] = p->c.kind == KM_OFFSET ? (float) (1e6 + 0.0625 * (double) gbml_rng_below(rng, 64))
			: (float) (gbml_rng_uniform(rng) * 2 - 1);
	for (int64_t i = 0; i < p->c.n; i++)
	{
		double		s = 0;

		for (int j = 0; j < d; j++)
			s += (double) p->x[i * d + j] * p->x[i * d + j];
		if (s == 0)
		{
			p->x[i * d] = 1.0f;	/* the spherical mode needs non-zero rows */
			s = 1;
		}
		p->xnorm2[i] = s;
		if (p->scale)
			p->scale[i] = 1.0 / sqrt(s);
		p->xnorm_max = fmax(p->xnorm_max, sqrt(s));
	}
}

/*
 * KM_MIDPOINTS: centroids 2q and 2q+1 at x_q +- v (exact in double) for
 * the first k/2 rows x_q, and the rows up to n/2 copies of those: the two
 * distances of such a row are equal in exact arithmetic, and whichever
 * the rounding favours is the CPU's label.
 */
static void
make_midpoints(km_prob *p, gbml_rng *rng)
{
	int			d = p->c.d,
				pairs = p->c.k / 2;

	for (int q = 0; q < pairs; q++)
	{
		const float *xq = p->x + (int64_t) q * d;

		for (int j = 0; j < d; j++)
		{
			double		v = (double) (float) (gbml_rng_uniform(rng) * 0.02 - 0.01);

			p->cent[(2 * q) * d + j] = (double) xq[j] + v;
			p->cent[(2 * q + 1) * d + j] = (double) xq[j] - v;
		}
	}
	for (int64_t i = pairs; pairs > 0 && i < p->c.n / 2; i++)
	{
		memcpy(p->x + i * d, p->x + (i % pairs) * d, sizeof(float) * (size_t) d);
		p->xnorm2[i] = p->xnorm2[i % pairs];
		if (p->scale)
			p->scale[i] = p->scale[i % pairs];
	}
}

/* Centroids: random rows (slightly moved), then the kind's pattern; unit length when spherical. */
static void
make_centroids(km_prob *p, gbml_rng *rng)
{
	int			d = p->c.d,
				k = p->c.k;

	for (int j = 0; j < k; j++)
	{
		int64_t		r = (int64_t) gbml_rng_below(rng, (uint64_t) p->c.n);

		for (int i = 0; i < d; i++)
			p->cent[j * d + i] = (double) p->x[r * d + i] + (p->c.kind == KM_DUPLICATES ? 0 : 1e-3 * gbml_rng_uniform(rng));
		if (p->c.kind == KM_DUPLICATES && j % 2 == 1)
			memcpy(p->cent + j * d, p->cent + (j - 1) * d, sizeof(double) * (size_t) d);
	}
	if (p->c.kind == KM_MIDPOINTS)
		make_midpoints(p, rng);
	for (int j = 0; p->c.spherical && j < k; j++)
	{
		double		s = 0;

		for (int i = 0; i < d; i++)
			s += p->cent[j * d + i] * p->cent[j * d + i];
		for (int i = 0; i < d; i++)
			p->cent[j * d + i] /= sqrt(s);
	}
}

/*
 * Blocks of 1, 777, 2500 (more than one CTA of the update kernel), 300
 * and 1024 rows in turn, the last one what is left.  Odd seeds list them
 * in reverse (any order is a valid list).
 */
static void
make_blocks(km_prob *p, uint64_t seed)
{
	static const int64_t sizes[] = {1, 777, 2500, 300, 1024};
	int64_t		at = 0;

	p->nb = 0;
	while (at < p->c.n)
	{
		int64_t		len = sizes[p->nb % 5] < p->c.n - at ? sizes[p->nb % 5] : p->c.n - at;

		p->start[p->nb] = at;
		p->len[p->nb] = len;
		p->nb++;
		at += len;
	}
	for (int i = 0; i < p->nb; i++)
		p->ids[i] = seed % 2 ? p->nb - 1 - i : i;
}

/* The CPU's centroids (gbml_km_centers_prepare), and alpha = +inf for the all-exact cases. */
static void
prepare_centers(km_prob *p)
{
	gbml_km_centers_prepare(&p->C, p->cent, p->c.k, p->c.d, p->panels, p->panels_d, p->cnorm, p->cnorm_d,
							p->xnorm_max);
	if (p->c.all_exact)
		p->C.alpha = INFINITY;
}

static void
prob_make(km_prob *p, const km_case *c, uint64_t seed)
{
	size_t		n = (size_t) c->n,
				d = (size_t) c->d,
				kp = (size_t) gbml_km_padded(c->k);
	int			bits = gbml_km_fix_bits(c->n);
	gbml_rng	rng;

	memset(p, 0, sizeof(*p));
	p->c = *c;
	gbml_rng_seed(&rng, seed);
	p->x = malloc(sizeof(float) * n * d);
	p->xnorm2 = malloc(sizeof(double) * n);
	p->scale = c->spherical ? malloc(sizeof(double) * n) : NULL;
	p->start = malloc(sizeof(int64_t) * n);
	p->len = malloc(sizeof(int64_t) * n);
	p->ids = malloc(sizeof(int) * n);
	p->cent = malloc(sizeof(double) * (size_t) c->k * d);
	p->fix = malloc(sizeof(double) * d);
	p->panels = malloc(sizeof(float) * kp * d);
	p->panels_d = malloc(sizeof(double) * kp * d);
	p->cnorm = malloc(sizeof(float) * kp);
	p->cnorm_d = malloc(sizeof(double) * (size_t) c->k);
	make_rows(p, &rng);
	make_centroids(p, &rng);
	make_blocks(p, seed);
	for (size_t j = 0; j < d; j++)
	{
		double		vmax = 0;

		for (size_t i = 0; i < n; i++)
			vmax = fmax(vmax, fabs((double) p->x[i * d + j] * row_scale(p, (int64_t) i)));
		p->fix[j] = gbml_km_fix_scale(vmax, bits);
	}
	prepare_centers(p);
}

static void
prob_free(km_prob *p)
{
	free(p->x);
	free(p->xnorm2);
	free(p->scale);
	free(p->start);
	free(p->len);
	free(p->ids);
	free(p->cent);
	free(p->fix);
	free(p->panels);
	free(p->panels_d);
	free(p->cnorm);
	free(p->cnorm_d);
}

/* ---- the CPU's results ---- */

typedef struct km_ref
{
	int32_t    *labels;			/* n: updated by each pass */
	int64_t    *sums;			/* k x d */
	int64_t    *counts;			/* k */
	int64_t		changed;
	int64_t		rechecked;
} km_ref;

/* A pass on the CPU: gbml_km_assign (blocks of at most 4,096 rows), then the plain fixed-point sums. */
static void
cpu_pass(const km_prob *p, km_ref *r)
{
	int64_t		n = p->c.n;
	int			d = p->c.d;
	int32_t    *lab = malloc(sizeof(int32_t) * (size_t) n);

	r->rechecked = 0;
	r->changed = 0;
	for (int64_t i0 = 0; i0 < n; i0 += GBML_KM_MAX_BLOCK)
		r->rechecked += gbml_km_assign(&p->C, p->x + i0 * d, n - i0 < GBML_KM_MAX_BLOCK ? n - i0 : GBML_KM_MAX_BLOCK,
									   p->xnorm2 + i0, lab + i0);
	memset(r->sums, 0, sizeof(int64_t) * (size_t) p->c.k * (size_t) d);
	memset(r->counts, 0, sizeof(int64_t) * (size_t) p->c.k);
	for (int64_t i = 0; i < n; i++)
	{
		r->changed += lab[i] != r->labels[i];
		r->labels[i] = lab[i];
		r->counts[lab[i]]++;
		for (int j = 0; j < d; j++)
			r->sums[(int64_t) lab[i] * d + j] += gbml_km_fix_term((double) p->x[i * d + j] * row_scale(p, i), p->fix[j]);
	}
	free(lab);
}

/* ---- the device ---- */

/*
 * Block b to the device from copies that are poisoned as soon as
 * put_block returns (the caller may reuse its arrays); labels NULL: none.
 */
static bool
put_copy(const km_prob *p, gbml_gpu_ctx *ctx, int b, const int32_t *labels)
{
	size_t		rows = (size_t) p->len[b],
				xb = sizeof(float) * rows * (size_t) p->c.d;
	float	   *x = malloc(xb);
	double	   *xn = malloc(sizeof(double) * rows),
			   *sc = malloc(sizeof(double) * rows);
	int32_t    *lab = malloc(sizeof(int32_t) * rows);
	bool		ok;

	memcpy(x, p->x + p->start[b] * p->c.d, xb);
	memcpy(xn, p->xnorm2 + p->start[b], sizeof(double) * rows);
	if (p->scale)
		memcpy(sc, p->scale + p->start[b], sizeof(double) * rows);
	if (labels)
		memcpy(lab, labels, sizeof(int32_t) * rows);
	ok = K->put_block(ctx, b, x, xn, p->scale ? sc : NULL, labels ? lab : NULL, p->len[b]) == 0;
	memset(x, 0x7f, xb);
	memset(xn, 0x7f, sizeof(double) * rows);
	memset(sc, 0x7f, sizeof(double) * rows);
	memset(lab, 0x7f, sizeof(int32_t) * rows);
	free(x);
	free(xn);
	free(sc);
	free(lab);
	return ok;
}

/* The problem's centroids to the device from copies poisoned once set_centers returns. */
static bool
set_copy(const km_prob *p, gbml_gpu_ctx *ctx)
{
	size_t		kd = (size_t) p->c.k * (size_t) p->c.d;
	double	   *c = malloc(sizeof(double) * kd),
			   *cn = malloc(sizeof(double) * (size_t) p->c.k);
	gbml_km_device_centers dc = {c, cn, p->C.cmax, p->C.alpha};
	bool		ok;

	memcpy(c, p->cent, sizeof(double) * kd);
	memcpy(cn, p->cnorm_d, sizeof(double) * (size_t) p->c.k);
	ok = K->set_centers(ctx, &dc) == 0;
	memset(c, 0x7f, sizeof(double) * kd);
	memset(cn, 0x7f, sizeof(double) * (size_t) p->c.k);
	free(c);
	free(cn);
	return ok;
}

static gbml_gpu_ctx *
dev_open(const km_prob *p, size_t memory_limit)
{
	gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, memory_limit);
	int32_t    *none = malloc(sizeof(int32_t) * (size_t) p->c.n);
	bool		ok = ctx != NULL && K->begin(ctx, p->c.k, p->c.d, p->c.spherical, p->nb, p->fix) == 0;

	for (int64_t i = 0; i < p->c.n; i++)
		none[i] = -1;
	/* block 0 without labels (NULL: none yet), the others with -1 */
	for (int b = 0; ok && b < p->nb; b++)
		ok = put_copy(p, ctx, b, b == 0 ? NULL : none);
	ok = ok && set_copy(p, ctx);
	free(none);
	if (!ok)
	{
		printf("# backend error: %s\n", gc_backend->last_error());
		gc_backend->ctx_destroy(ctx);
		return NULL;
	}
	return ctx;
}

/* New centroids: the means of the pass (empty clusters keep theirs), re-prepared on both sides. */
static bool
move_centers(km_prob *p, const km_ref *r, gbml_gpu_ctx *ctx)
{
	int			d = p->c.d;

	for (int j = 0; j < p->c.k; j++)
	{
		double		s = 0;

		for (int i = 0; i < d && r->counts[j] > 0; i++)
			p->cent[j * d + i] = gbml_km_fix_value(r->sums[j * d + i], p->fix[i]) / (double) r->counts[j];
		for (int i = 0; i < d && p->c.spherical; i++)
			s += p->cent[j * d + i] * p->cent[j * d + i];
		for (int i = 0; i < d && p->c.spherical && s > 0; i++)
			p->cent[j * d + i] /= sqrt(s);
	}
	prepare_centers(p);
	return set_copy(p, ctx);
}

/* Launches a pass, polls it, finishes it into sums and counts. */
static bool
dev_pass(const km_prob *p, gbml_gpu_ctx *ctx, bool update, int64_t *sums, int64_t *counts, gbml_km_pass_result *res)
{
	int			r;

	if (K->pass_launch(ctx, p->ids, p->nb, update) != 0)
		return false;
	while ((r = K->pass_done(ctx)) == 0)
		;
	return r == 1 && K->pass_finish(ctx, sums, counts, res) == 0;
}

static bool
dev_labels_equal(const km_prob *p, gbml_gpu_ctx *ctx, const int32_t *want)
{
	int32_t    *buf = malloc(sizeof(int32_t) * (size_t) p->c.n);
	bool		same = true;

	for (int b = 0; b < p->nb && same; b++)
	{
		memset(buf, 0x5a, sizeof(int32_t) * (size_t) p->len[b]);
		same = K->read_labels(ctx, b, buf) == 0 &&
			memcmp(buf, want + p->start[b], sizeof(int32_t) * (size_t) p->len[b]) == 0;
	}
	free(buf);
	return same;
}

/*
 * One pass on both sides.  The device adds into the caller's arrays, so
 * they start non-zero; without update the sums stay as they were.
 */
static void
check_pass(const km_prob *p, gbml_gpu_ctx *ctx, km_ref *r, bool update, bool first, const char *name)
{
	size_t		kd = (size_t) p->c.k * (size_t) p->c.d;
	int64_t    *sums = malloc(sizeof(int64_t) * kd),
			   *counts = malloc(sizeof(int64_t) * (size_t) p->c.k);
	gbml_km_pass_result res = {-1, -1, -1};
	bool		ok,
				same_counts = true,
				same_sums = true;

	for (size_t i = 0; i < kd; i++)
		sums[i] = (int64_t) i * 3 - 7;
	for (int j = 0; j < p->c.k; j++)
		counts[j] = 100 + j;
	cpu_pass(p, r);
	ok = dev_pass(p, ctx, update, sums, counts, &res);
	if (!ok)
		printf("# backend error: %s\n", gc_backend->last_error());
	for (int j = 0; j < p->c.k; j++)
		same_counts = same_counts && counts[j] - (100 + j) == r->counts[j];
	for (size_t i = 0; i < kd; i++)
		same_sums = same_sums && sums[i] - ((int64_t) i * 3 - 7) == (update ? r->sums[i] : 0);
	gc_check(ok && dev_labels_equal(p, ctx, r->labels), "K-Means pass%s: labels equal gbml_km_assign's: %s",
			 update ? "" : " (no update)", name);
	gc_check(ok && same_counts && res.changed == r->changed, "K-Means pass: counts, %lld changed rows (%lld): %s",
			 (long long) r->changed, (long long) res.changed, name);
	gc_check(ok && same_sums, "K-Means pass: %s: %s", update ? "fixed-point sums equal the plain loop's"
			 : "the sums are left alone", name);
	if (p->c.all_exact)
		gc_check(res.rechecked == p->c.n, "K-Means pass: alpha = +inf re-checks every row (%lld): %s",
				 (long long) res.rechecked, name);
	else if (first && p->c.kind != KM_RANDOM)
		gc_check(res.rechecked > 0, "K-Means pass: the exact path ran (%lld rows, the CPU %lld): %s",
				 (long long) res.rechecked, (long long) r->rechecked, name);
	gc_check(res.seconds >= 0 && res.seconds < 1e4, "K-Means pass: timed (%.3g s): %s", res.seconds, name);
	free(sums);
	free(counts);
}

/* ---- k-means++ ---- */

/* Candidate-minor candidates: T random rows times their scale; the unused lanes NaN (never read). */
static void
make_cands(const km_prob *p, gbml_rng *rng, int T, float *cand_t)
{
	int			d = p->c.d;

	for (int i = 0; i < d * CAND_LANES; i++)
		cand_t[i] = NAN;
	for (int t = 0; t < T; t++)
	{
		int64_t		r = (int64_t) gbml_rng_below(rng, (uint64_t) p->c.n);

		for (int j = 0; j < d; j++)
			cand_t[j * CAND_LANES + t] = p->x[r * d + j] * (float) row_scale(p, r);
	}
}

/* The plain loop: out[t][i] = min(closest[i], gbml_km_cand_dist), pot[i][t] the sums of block ids[i]. */
static double
cpu_cands(const km_prob *p, const float *cand_t, int T, const float *closest, float *out, int64_t *pot)
{
	int64_t		n = p->c.n;
	double		vmax = 0,
				pot_scale;

	for (int64_t i = 0; i < n; i++)
		for (int t = 0; t < T; t++)
		{
			float		acc = gbml_km_cand_dist(p->x + i * p->c.d, (float) row_scale(p, i), cand_t + t, CAND_LANES, p->c.d);

			out[t * n + i] = acc < closest[i] ? acc : closest[i];
			vmax = fmax(vmax, out[t * n + i]);
		}
	pot_scale = gbml_km_fix_scale(vmax, gbml_km_fix_bits(n));
	memset(pot, 0, sizeof(int64_t) * (size_t) p->nb * (size_t) T);
	for (int l = 0; l < p->nb; l++)
	{
		int			b = p->ids[l];

		for (int64_t i = p->start[b]; i < p->start[b] + p->len[b]; i++)
			for (int t = 0; t < T; t++)
				pot[l * T + t] += gbml_km_fix_term((double) out[t * n + i], pot_scale);
	}
	return pot_scale;
}

/* cand_take(t): the maximum, and read_closest of every block, against the CPU's values. */
static void
check_take(const km_prob *p, gbml_gpu_ctx *ctx, int t, float *closest, const float *out, const char *name)
{
	float		want = 0,
				got = -1;
	float	   *buf = malloc(sizeof(float) * (size_t) p->c.n);
	bool		ok = K->cand_take(ctx, p->ids, p->nb, t, &got) == 0,
				same = true;

	for (int64_t i = 0; i < p->c.n; i++)
	{
		closest[i] = out[t * p->c.n + i];
		want = closest[i] > want ? closest[i] : want;
	}
	gc_check(ok && memcmp(&want, &got, sizeof(float)) == 0, "k-means++: cand_take(%d) maximum %g (%g): %s",
			 t, want, got, name);
	for (int b = 0; b < p->nb && same; b++)
		same = K->read_closest(ctx, b, buf) == 0 &&
			memcmp(buf, closest + p->start[b], sizeof(float) * (size_t) p->len[b]) == 0;
	gc_check(same, "k-means++: the closest distances equal the plain loop's: %s", name);
	free(buf);
}

/*
 * Two rounds: from +inf (cand_reset), then from the first round's chosen
 * candidate with one candidate more (the device's buffers grow).  The
 * candidates are poisoned once cand_pass returns: it must have copied them.
 */
static void
check_cands(const km_prob *p, gbml_gpu_ctx *ctx, uint64_t seed, const char *name)
{
	int64_t		n = p->c.n;
	size_t		cand_bytes = sizeof(float) * (size_t) p->c.d * CAND_LANES;
	float	   *cand_t = malloc(cand_bytes);
	float	   *closest = malloc(sizeof(float) * (size_t) n);
	float	   *out = malloc(sizeof(float) * (size_t) n * CAND_LANES);
	int64_t    *want = malloc(sizeof(int64_t) * (size_t) p->nb * CAND_LANES),
			   *got = malloc(sizeof(int64_t) * (size_t) p->nb * CAND_LANES);
	gbml_rng	rng;
	bool		ok = K->cand_reset(ctx, p->ids, p->nb) == 0;

	gbml_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
		closest[i] = INFINITY;
	for (int round = 0; round < 2; round++)
	{
		int			T = round == 0 || p->c.T == CAND_LANES ? p->c.T : p->c.T + 1;
		double		pot_scale;

		make_cands(p, &rng, T, cand_t);
		pot_scale = cpu_cands(p, cand_t, T, closest, out, want);
		memset(got, 0x5a, sizeof(int64_t) * (size_t) p->nb * (size_t) T);
		ok = ok && K->cand_pass(ctx, p->ids, p->nb, cand_t, T, pot_scale, got) == 0;
		memset(cand_t, 0x7f, cand_bytes);
		gc_check(ok && memcmp(want, got, sizeof(int64_t) * (size_t) p->nb * (size_t) T) == 0,
				 "k-means++ round %d: %d candidates' potentials per block equal the plain loop's: %s", round + 1, T, name);
		check_take(p, ctx, round == 0 ? T - 1 : 0, closest, out, name);
	}
	if (!ok)
		printf("# backend error: %s\n", gc_backend->last_error());
	free(cand_t);
	free(closest);
	free(out);
	free(want);
	free(got);
}

/* ---- distances, blocks leaving and coming back ---- */

static void
check_row_dist(const km_prob *p, gbml_gpu_ctx *ctx, const int32_t *labels, const char *name)
{
	double	   *buf = malloc(sizeof(double) * (size_t) p->c.n);
	bool		same = true;

	for (int b = 0; b < p->nb && same; b++)
	{
		same = K->row_dist(ctx, b, buf) == 0;
		for (int64_t r = 0; r < p->len[b] && same; r++)
		{
			int64_t		i = p->start[b] + r;
			double		want = gbml_km_row_dist(p->x + i * p->c.d, row_scale(p, i), p->cent + (int64_t) labels[i] * p->c.d,
												p->c.d, p->c.spherical);

			same = memcmp(&want, &buf[r], sizeof(double)) == 0;
		}
	}
	gc_check(same, "K-Means row distances equal gbml_km_row_dist's: %s", name);
	free(buf);
}

/*
 * The last block leaves with its labels, the first without; both come
 * back (the first with the CPU's labels), and a pass over the same
 * centroids then changes nothing.
 */
static void
check_round_trip(const km_prob *p, gbml_gpu_ctx *ctx, km_ref *r, const char *name)
{
	int			last = p->nb - 1;
	int32_t    *got = malloc(sizeof(int32_t) * (size_t) p->len[last]),
				one;
	bool		ok = K->drop_block(ctx, last, got) == 0,
				same = ok && memcmp(got, r->labels + p->start[last], sizeof(int32_t) * (size_t) p->len[last]) == 0;

	if (last > 0)
	{
		ok = ok && K->drop_block(ctx, 0, NULL) == 0;
		gc_check(ok && K->read_labels(ctx, 0, &one) != 0, "K-Means: a dropped block cannot be read (%s)",
				 gc_backend->last_error());
		ok = ok && put_copy(p, ctx, 0, r->labels);
	}
	ok = ok && put_copy(p, ctx, last, got);
	gc_check(ok && same && dev_labels_equal(p, ctx, r->labels), "K-Means: drop, put back: the labels are kept: %s", name);
	free(got);
	check_pass(p, ctx, r, true, false, name);
	gc_check(r->changed == 0, "K-Means: the same centroids again change no label: %s", name);
}

/*
 * A pass over every second block of the list (a device that holds only
 * part of the rows): counts and sums of those rows alone, nothing changed.
 */
static void
check_subset(const km_prob *p, gbml_gpu_ctx *ctx, const km_ref *r, const char *name)
{
	size_t		kd = (size_t) p->c.k * (size_t) p->c.d;
	int		   *list = malloc(sizeof(int) * (size_t) p->nb);
	int64_t    *ws = calloc(kd, sizeof(int64_t)),
			   *wc = calloc((size_t) p->c.k, sizeof(int64_t)),
			   *gs = calloc(kd, sizeof(int64_t)),
			   *gcnt = calloc((size_t) p->c.k, sizeof(int64_t));
	gbml_km_pass_result res = {-1, -1, -1};
	int			m = 0;
	bool		ok;

	for (int l = 0; l < p->nb; l += 2)
	{
		int			b = list[m++] = p->ids[l];

		for (int64_t i = p->start[b]; i < p->start[b] + p->len[b]; i++)
		{
			wc[r->labels[i]]++;
			for (int j = 0; j < p->c.d; j++)
				ws[(int64_t) r->labels[i] * p->c.d + j] +=
					gbml_km_fix_term((double) p->x[i * p->c.d + j] * row_scale(p, i), p->fix[j]);
		}
	}
	ok = K->pass_launch(ctx, list, m, true) == 0 && K->pass_finish(ctx, gs, gcnt, &res) == 0;
	gc_check(ok && res.changed == 0 && memcmp(ws, gs, sizeof(int64_t) * kd) == 0 &&
			 memcmp(wc, gcnt, sizeof(int64_t) * (size_t) p->c.k) == 0,
			 "K-Means: a pass over %d of the %d blocks sums those rows alone: %s", m, p->nb, name);
	free(list);
	free(ws);
	free(wc);
	free(gs);
	free(gcnt);
}

static void
run_case(const km_case *c, uint64_t seed)
{
	static const char *kinds[] = {"random", "duplicated centroids", "rows midway between centroids", "offset 1e6"};
	km_prob		p;
	km_ref		r;
	gbml_gpu_ctx *ctx;
	char		name[200];

	prob_make(&p, c, seed);
	snprintf(name, sizeof(name), "%lld rows x %d in %d blocks, k = %d, %s%s%s", (long long) c->n, c->d, p.nb, c->k,
			 kinds[c->kind], c->spherical ? ", spherical" : "", c->all_exact ? ", alpha = +inf" : "");
	r.labels = malloc(sizeof(int32_t) * (size_t) c->n);
	r.sums = malloc(sizeof(int64_t) * (size_t) c->k * (size_t) c->d);
	r.counts = malloc(sizeof(int64_t) * (size_t) c->k);
	for (int64_t i = 0; i < c->n; i++)
		r.labels[i] = -1;
	ctx = dev_open(&p, 0);
	gc_check(ctx != NULL, "K-Means: begin, put the blocks, set the centroids: %s", name);
	if (ctx != NULL)
	{
		check_pass(&p, ctx, &r, true, true, name);
		gc_check(move_centers(&p, &r, ctx), "K-Means: new centroids: %s", name);
		check_pass(&p, ctx, &r, false, false, name);
		check_cands(&p, ctx, seed + 1, name);
		check_row_dist(&p, ctx, r.labels, name);
		check_round_trip(&p, ctx, &r, name);
		check_subset(&p, ctx, &r, name);
		K->end(ctx);
		gc_backend->ctx_destroy(ctx);
	}
	gc_check(gc_no_resources(), "K-Means: nothing held afterwards: %s", name);
	free(r.labels);
	free(r.sums);
	free(r.counts);
	prob_free(&p);
}

/* ---- failures ---- */

static void
misuse_checks(void)
{
	gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 0);
	double		fix[2] = {1.0, 1.0};
	int			b0 = 0;
	float		x = 1;
	double		xn = 1;

	gc_check(ctx != NULL && K->pass_launch(ctx, &b0, 1, true) != 0 && strstr(gc_backend->last_error(), "begin"),
			 "K-Means: a pass before begin is an error (%s)", gc_backend->last_error());
	gc_check(K->begin(ctx, 2, 1, false, 1, fix) == 0 && K->begin(ctx, 2, 1, false, 1, fix) != 0,
			 "K-Means: begin twice is an error (%s)", gc_backend->last_error());
	gc_check(K->pass_launch(ctx, &b0, 1, true) != 0, "K-Means: a pass over a block not on the device is an error (%s)",
			 gc_backend->last_error());
	gc_check(K->put_block(ctx, 0, &x, &xn, NULL, NULL, 1) == 0 && K->pass_launch(ctx, &b0, 1, true) != 0 &&
			 strstr(gc_backend->last_error(), "set_centers"), "K-Means: a pass before set_centers is an error (%s)",
			 gc_backend->last_error());
	gc_check(K->put_block(ctx, 0, &x, &xn, NULL, NULL, 1) != 0, "K-Means: a block put twice is an error (%s)",
			 gc_backend->last_error());
	K->end(ctx);
	gc_check(K->begin(ctx, 3, 2, true, 2, fix) == 0, "K-Means: after end the context takes another fit");
	K->end(ctx);
	gc_backend->ctx_destroy(ctx);
	gc_check(gc_no_resources(), "K-Means: nothing held after the misuse checks");
}

/* A context that fits begin and one block refuses the second block; nothing is held afterwards. */
static void
budget_checks(void)
{
	km_case		c = {3000, 20, 5, false, KM_RANDOM, false, 2};
	km_prob		p;
	gbml_gpu_ctx *ctx;
	size_t		one_block;
	bool		refused;

	prob_make(&p, &c, 9);
	ctx = gc_backend->ctx_create(0, 1024);
	gc_check(ctx != NULL && K->begin(ctx, c.k, c.d, false, p.nb, p.fix) != 0 && gc_backend->ctx_over_budget(ctx) &&
			 strstr(gc_backend->last_error(), "budget") != NULL, "K-Means over a 1 KB budget: %s", gc_backend->last_error());
	gc_backend->ctx_destroy(ctx);
	ctx = gc_backend->ctx_create(0, 0);
	K->begin(ctx, c.k, c.d, false, p.nb, p.fix);
	K->put_block(ctx, 1, p.x + p.start[1] * c.d, p.xnorm2 + p.start[1], NULL, NULL, p.len[1]);
	one_block = gc_backend->ctx_memory_peak(ctx);
	gc_backend->ctx_destroy(ctx);
	ctx = gc_backend->ctx_create(0, one_block + 1000);
	refused = K->begin(ctx, c.k, c.d, false, p.nb, p.fix) == 0 &&
		K->put_block(ctx, 1, p.x + p.start[1] * c.d, p.xnorm2 + p.start[1], NULL, NULL, p.len[1]) == 0 &&
		K->put_block(ctx, 2, p.x + p.start[2] * c.d, p.xnorm2 + p.start[2], NULL, NULL, p.len[2]) != 0;
	gc_check(refused && gc_backend->ctx_over_budget(ctx) && strstr(gc_backend->last_error(), "budget") != NULL,
			 "K-Means: a block past the budget is refused: %s", gc_backend->last_error());
	gc_backend->ctx_destroy(ctx);
	gc_check(gc_no_resources(), "K-Means: nothing held after the budget errors");
	prob_free(&p);
}

/* Every entry point once on a small problem; false at the first failure. */
static bool
fault_attempt(const km_prob *p, gbml_gpu_ctx *ctx)
{
	float		cand_t[3 * CAND_LANES] = {0},
				mx,
				closest[600];
	int64_t		pot[8],
				sums[4 * 3] = {0},
				counts[4] = {0};
	int32_t		labels[600];
	double		dist[600];
	gbml_km_pass_result res;
	gbml_km_device_centers dc = {p->cent, p->cnorm_d, p->C.cmax, p->C.alpha};

	return K->begin(ctx, p->c.k, p->c.d, false, p->nb, p->fix) == 0 &&
		K->put_block(ctx, 0, p->x, p->xnorm2, NULL, NULL, p->len[0]) == 0 &&
		K->put_block(ctx, 1, p->x + p->start[1] * p->c.d, p->xnorm2 + p->start[1], NULL, NULL, p->len[1]) == 0 &&
		K->set_centers(ctx, &dc) == 0 && dev_pass(p, ctx, true, sums, counts, &res) &&
		K->cand_reset(ctx, p->ids, 2) == 0 && K->cand_pass(ctx, p->ids, 2, cand_t, 2, 1.0, pot) == 0 &&
		K->cand_take(ctx, p->ids, 2, 1, &mx) == 0 && K->read_closest(ctx, 1, closest) == 0 &&
		K->row_dist(ctx, 1, dist) == 0 && K->read_labels(ctx, 1, labels) == 0 && K->drop_block(ctx, 1, labels) == 0;
}

/* A CUDA failure injected at every call in turn: an error naming the call, nothing held afterwards. */
static void
fault_checks(void)
{
	gc_emu_fail_after_fn fail_after = gc_emu_fail_after();
	km_case		c = {500, 3, 4, false, KM_RANDOM, false, 2};	/* blocks of 1 and 499 rows */
	km_prob		p;
	int			errors = 0,
				named = 0,
				clean = 0,
				tries = 0;
	bool		done = false;

	if (fail_after == NULL)
	{
		printf("# K-Means fault injection: only on the emulation\n");
		return;
	}
	prob_make(&p, &c, 5);
	for (long long k = 1; !done && k < 400; k++)
	{
		gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 0);

		fail_after(k);
		done = ctx != NULL && fault_attempt(&p, ctx);
		fail_after(-1);
		tries++;
		errors += !done;
		named += !done && strstr(gc_backend->last_error(), "failed: ") != NULL;
		/* half the failures end the fit first, the others only destroy the context */
		if (k % 2)
			K->end(ctx);
		gc_backend->ctx_destroy(ctx);
		clean += gc_no_resources();
	}
	gc_check(done && errors > 20 && named == errors, "K-Means: %d of %d injected CUDA failures became errors naming the call",
			 named, errors);
	gc_check(clean == tries, "K-Means: nothing held after any of the %d injected failures", tries);
	prob_free(&p);
}

/*
 * Every k of {1, 2, 7, 33, 300} with every d of {1, 3, 57, 130} on random
 * data (spherical every other one), then the data that forces the exact
 * path.  quick: half of the random shapes.
 */
void
gc_kmeans_checks(bool quick)
{
	static const int ks[] = {1, 2, 7, 33, 300},
				ds[] = {1, 3, 57, 130};
	static const km_case exact_cases[] = {
		/* n, d, k, spherical, kind, alpha = +inf, candidates */
		{1000, 3, 33, false, KM_DUPLICATES, false, 4},
		{300, 130, 300, true, KM_DUPLICATES, false, 16},
		{800, 57, 7, false, KM_MIDPOINTS, false, 3},
		{1200, 1, 7, false, KM_MIDPOINTS, false, 2},
		{900, 130, 33, false, KM_MIDPOINTS, false, 5},
		{600, 3, 7, false, KM_OFFSET, false, 3},
		{400, 130, 33, false, KM_OFFSET, false, 3},
		{4000, 57, 2, false, KM_OFFSET, false, 2},
		{1000, 57, 33, false, KM_RANDOM, true, 3},
		{4000, 3, 300, true, KM_RANDOM, true, 7},
	};
	double		t0 = gbml_now();
	int			i = 0;

	K = gc_backend->kmeans;
	gc_check(K != NULL, "the backend has a K-Means table");
	if (K == NULL)
		return;
	/* the first case is one row in one block; one of 4,000 rows has a block of 2,500 */
	for (int a = 0; a < 5; a++)
		for (int b = 0; b < 4; b++, i++)
		{
			km_case		c = {i == 0 ? 1 : ks[a] == 300 ? 800 : i == 9 ? 4000 : 1500, ds[b], ks[a], i % 2 == 1,
			KM_RANDOM, false, 1 + i % 16};

			if (!quick || i % 2 == 0)
				run_case(&c, 4000 + (uint64_t) i);
		}
	for (size_t e = 0; e < sizeof(exact_cases) / sizeof(exact_cases[0]); e++)
		run_case(&exact_cases[e], 5000 + e);
	misuse_checks();
	budget_checks();
	fault_checks();
	printf("# K-Means checks: %.1f s\n", gbml_now() - t0);
}
