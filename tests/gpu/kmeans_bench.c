/*
 * kmeans_bench.c — K-Means timings for tests/gpu/run.sh on a card: one
 * Lloyd pass (assignment + update) over n resident rows on the device (the
 * pass's event time, best of three), its TFLOP/s (2 n k d / time) against
 * the H200's FP32 peak, and the same pass with the CPU kernels on every
 * core (gbml_km_assign and gbml_km_accumulate's fixed-point sums, OpenMP
 * over blocks of rows).  The labels and sums of the two must agree.
 * Prints one markdown table; on the emulation the sizes shrink to a dry run.
 */
#include "gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "env.h"
#include "kmeans_backend.h"
#include "kmeans_exact.h"
#include "kmeans_kernels.h"
#include "rng.h"

#define FP32_PEAK 67e12			/* H200, FLOP/s */
#define DEVICE_BLOCK 65536		/* rows per device block */

typedef struct bench_data
{
	int64_t		n;
	int			d;
	int			k;
	float	   *x;
	double	   *xnorm2;
	double	   *cent;
	double	   *fix;
	int32_t    *labels;
	gbml_km_centers C;
	float	   *panels;
	double	   *panels_d;
	float	   *cnorm;
	double	   *cnorm_d;
} bench_data;

/* Rows around k hidden centers (a real iteration's distances), centroids at random rows. */
static void
bench_make(bench_data *b, int64_t n, int d, int k)
{
	size_t		kp = (size_t) gbml_km_padded(k);
	double		xmax = 0;
	gbml_rng	rng;

	memset(b, 0, sizeof(*b));
	b->n = n;
	b->d = d;
	b->k = k;
	b->x = malloc(sizeof(float) * (size_t) n * (size_t) d);
	b->xnorm2 = malloc(sizeof(double) * (size_t) n);
	b->labels = malloc(sizeof(int32_t) * (size_t) n);
	b->cent = malloc(sizeof(double) * (size_t) k * (size_t) d);
	b->fix = malloc(sizeof(double) * (size_t) d);
	b->panels = malloc(sizeof(float) * kp * (size_t) d);
	b->panels_d = malloc(sizeof(double) * kp * (size_t) d);
	b->cnorm = malloc(sizeof(float) * kp);
	b->cnorm_d = malloc(sizeof(double) * (size_t) k);
#pragma omp parallel for schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		gbml_rng	r;
		double		s = 0;

		gbml_rng_stream(&r, 11, (uint64_t) i);
		for (int j = 0; j < d; j++)
		{
			float		v = (float) ((double) ((i % k) * 7 + j) / (k * 7.0) + 0.1 * gbml_rng_uniform(&r));

			b->x[i * d + j] = v;
			s += (double) v * v;
		}
		b->xnorm2[i] = s;
		b->labels[i] = -1;
	}
	gbml_rng_seed(&rng, 12);
	for (int j = 0; j < k; j++)
	{
		int64_t		r = (int64_t) gbml_rng_below(&rng, (uint64_t) n);

		for (int i = 0; i < d; i++)
			b->cent[j * d + i] = b->x[r * d + i];
	}
	for (int64_t i = 0; i < n; i++)
		xmax = fmax(xmax, b->xnorm2[i]);
	for (int j = 0; j < d; j++)
		b->fix[j] = gbml_km_fix_scale(1.5, gbml_km_fix_bits(n));	/* values lie in [0, 1.1] */
	gbml_km_centers_prepare(&b->C, b->cent, k, d, b->panels, b->panels_d, b->cnorm, b->cnorm_d, sqrt(xmax));
}

static void
bench_free(bench_data *b)
{
	free(b->x);
	free(b->xnorm2);
	free(b->labels);
	free(b->cent);
	free(b->fix);
	free(b->panels);
	free(b->panels_d);
	free(b->cnorm);
	free(b->cnorm_d);
}

/* One pass with the CPU kernels on every core; seconds.  labels, sums[k*d], counts[k] out. */
static double
cpu_pass(const bench_data *b, int32_t *labels, int64_t *sums, int64_t *counts)
{
	int64_t		nblk = (b->n + GBML_KM_MAX_BLOCK - 1) / GBML_KM_MAX_BLOCK;
	size_t		kd = (size_t) b->k * (size_t) b->d;
	double		t0 = gbml_now();

	memset(sums, 0, sizeof(int64_t) * kd);
	memset(counts, 0, sizeof(int64_t) * (size_t) b->k);
#pragma omp parallel
	{
		int64_t    *s = calloc(kd, sizeof(int64_t)),
				   *c = calloc((size_t) b->k, sizeof(int64_t));

#pragma omp for schedule(dynamic, 1)
		for (int64_t q = 0; q < nblk; q++)
		{
			int64_t		i0 = q * GBML_KM_MAX_BLOCK,
						m = b->n - i0 < GBML_KM_MAX_BLOCK ? b->n - i0 : GBML_KM_MAX_BLOCK;

			gbml_km_assign(&b->C, b->x + i0 * b->d, m, b->xnorm2 + i0, labels + i0);
			gbml_km_accumulate(b->x + i0 * b->d, m, b->d, labels + i0, NULL, b->fix, s, c);
		}
#pragma omp critical
		{
			for (size_t i = 0; i < kd; i++)
				sums[i] += s[i];
			for (int j = 0; j < b->k; j++)
				counts[j] += c[j];
		}
		free(s);
		free(c);
	}
	return gbml_now() - t0;
}

/* The device: every block resident, then the best of three passes (event time); NAN on failure. */
static double
device_pass(const bench_data *b, int32_t *labels, int64_t *sums, int64_t *counts)
{
	const struct gbml_backend_kmeans *K = gc_backend->kmeans;
	int			nb = (int) ((b->n + DEVICE_BLOCK - 1) / DEVICE_BLOCK);
	int		   *ids = malloc(sizeof(int) * (size_t) nb);
	gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 0);
	gbml_km_device_centers dc = {b->cent, b->cnorm_d, b->C.cmax, b->C.alpha};
	gbml_km_pass_result res;
	double		best = INFINITY;
	bool		ok = ctx != NULL && K->begin(ctx, b->k, b->d, false, nb, b->fix) == 0;

	for (int i = 0; ok && i < nb; i++)
	{
		int64_t		i0 = (int64_t) i * DEVICE_BLOCK;

		ids[i] = i;
		ok = K->put_block(ctx, i, b->x + i0 * b->d, b->xnorm2 + i0, NULL, b->labels + i0,
						  b->n - i0 < DEVICE_BLOCK ? b->n - i0 : DEVICE_BLOCK) == 0;
	}
	ok = ok && K->set_centers(ctx, &dc) == 0;
	for (int rep = 0; ok && rep < 3; rep++)
	{
		memset(sums, 0, sizeof(int64_t) * (size_t) b->k * (size_t) b->d);
		memset(counts, 0, sizeof(int64_t) * (size_t) b->k);
		ok = K->pass_launch(ctx, ids, nb, true) == 0 && K->pass_finish(ctx, sums, counts, &res) == 0;
		best = fmin(best, res.seconds);
	}
	for (int i = 0; ok && i < nb; i++)
		ok = K->read_labels(ctx, i, labels + (int64_t) i * DEVICE_BLOCK) == 0;
	if (!ok)
		printf("# K-Means device pass: %s\n", gc_backend->last_error());
	if (ctx)
		K->end(ctx);
	gc_backend->ctx_destroy(ctx);
	free(ids);
	return ok ? best : NAN;
}

static void
bench_row(int64_t n, int d, int k)
{
	bench_data	b;
	size_t		kd = (size_t) k * (size_t) d;
	int32_t    *lc = malloc(sizeof(int32_t) * (size_t) n),
			   *lg = malloc(sizeof(int32_t) * (size_t) n);
	int64_t    *sc = malloc(sizeof(int64_t) * kd),
			   *sg = malloc(sizeof(int64_t) * kd),
			   *cc = malloc(sizeof(int64_t) * (size_t) k),
			   *cg = malloc(sizeof(int64_t) * (size_t) k);
	double		cpu,
				gpu,
				flops = 2.0 * (double) n * k * d;
	bool		same;

	bench_make(&b, n, d, k);
	gpu = device_pass(&b, lg, sg, cg);
	cpu = cpu_pass(&b, lc, sc, cc);
	same = isfinite(gpu) && memcmp(lc, lg, sizeof(int32_t) * (size_t) n) == 0 &&
		memcmp(sc, sg, sizeof(int64_t) * kd) == 0 && memcmp(cc, cg, sizeof(int64_t) * (size_t) k) == 0;
	printf("| %lld | %d | %d | %.4f | %.4f | %.1fx | %.2f | %.1f%% | %s |\n", (long long) n, d, k, cpu, gpu,
		   cpu / gpu, flops / gpu / 1e12, flops / gpu / FP32_PEAK * 100, same ? "yes" : "NO");
	gc_check(same, "K-Means bench %lld x %d, k = %d: device labels, counts and sums equal the CPU's",
			 (long long) n, d, k);
	bench_free(&b);
	free(lc);
	free(lg);
	free(sc);
	free(sg);
	free(cc);
	free(cg);
}

void
gc_kmeans_bench(int64_t max_rows)
{
	static const int grid[] = {10, 50, 100};
	int			cores = 1;
	/* the emulation runs a kernel on one core: a dry run of the table */
	int64_t		big = gc_emulated ? 2000 : 1000000,
				small = gc_emulated ? 1000 : 100000;
	int			big_k = gc_emulated ? 50 : 1000;

	if (gc_backend->kmeans == NULL)
	{
		gc_check(false, "K-Means bench: the backend has no K-Means table");
		return;
	}
#ifdef _OPENMP
	cores = omp_get_num_procs();
#endif
	printf("\n| K-Means pass: rows | d | k | CPU s (%d threads) | GPU s | GPU speed-up | GPU TFLOP/s | share of 67 TFLOP/s FP32 | same |\n"
		   "|---|---|---|---|---|---|---|---|---|\n", cores);
	bench_row(max_rows < big ? max_rows : big, 128, big_k);
	if (!gc_emulated && max_rows >= 10000000)
		bench_row(10000000, 128, big_k);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			bench_row(max_rows < small ? max_rows : small, grid[i], grid[j]);
}
