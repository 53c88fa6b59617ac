/*
 * gpu_bench.c — timings for tests/gpu/run.sh on a card: seconds per tree of
 * whole boosting trainings on the GPU against the CPU backend on every core
 * (rows x 100 features, depth 6, 32 borders), the level-0 histogram pass as
 * a share of the card's memory bandwidth, and host-to-device streaming of
 * the bins.  Prints one markdown table.
 */
#include "gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "algorithm.h"
#include "boost_histogram.h"
#include "dataset.h"
#include "rng.h"
#include "../unit/test_util.h"

#define BENCH_FEATURES 100
#define BENCH_TREES 10
#define HBM_BYTES_PER_SECOND 4.8e12	/* H200 */

static void
make_rows(gbml_dataset *ds, gbml_env *env, int64_t n)
{
	gbml_rng	rng;
	float		x[BENCH_FEATURES];

	gbml_rng_seed(&rng, 5);
	gbml_dataset_init(ds, false);
	for (int64_t i = 0; i < n; i++)
	{
		gbml_row	row;
		double		y = 0;

		for (int f = 0; f < BENCH_FEATURES; f++)
		{
			x[f] = (float) gbml_rng_uniform(&rng);
			if (f < 8)
				y += x[f] * (f + 1);
		}
		memset(&row, 0, sizeof(row));
		row.x = x;
		row.n_features = BENCH_FEATURES;
		row.label = (float) y;
		row.group_is_null = true;
		row.weight_is_null = true;
		gbml_dataset_append(ds, env, &row, true);
	}
}

/* Seconds per tree of one training (symmetric or Depthwise trees); the model bytes into *model. */
static double
seconds_per_tree(int64_t n, bool gpu, bool depthwise, int threads, uint8_t **model, size_t *len, double *h2d_gbps)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_parsed_params pp;
	gbml_strbuf report;
	gbml_param_value v[5] = {tu_num("iterations", BENCH_TREES), tu_num("depth", 6), tu_num("border_count", 32),
		tu_num("threads", threads), tu_str("grow_policy", depthwise ? "Depthwise" : "SymmetricTree")};
	double		spt = NAN;

	gbml_env_init_malloc(&env, threads);
	if (gpu)
	{
		env.device = GBML_DEVICE_GPU;
		env.gpu = gc_backend;
	}
	make_rows(&ds, &env, n);
	gbml_sb_init(&report, &env);
	if (gbml_parse_training_params(&env, gbml_algorithm_by_name("boost"), v, 5, &pp) == GBML_OK &&
		gbml_train_report(&env, &pp, &ds, NULL, model, len, &report) == GBML_OK)
	{
		char	   *text = calloc(report.len + 1, 1);

		memcpy(text, report.data, report.len);
		spt = tu_json_number(text, "seconds_per_tree");
		if (h2d_gbps)
			*h2d_gbps = env.gpu_h2d_bytes / 1e9 / fmax(1e-9, tu_json_number(text, "quantize_seconds"));
		free(text);
	}
	else
		printf("# training failed: %s\n", env.error);
	gbml_parsed_params_free(&env, &pp);
	gbml_sb_free(&report);
	gbml_dataset_free(&ds, &env);
	return spt;
}

/* The level-0 histogram pass alone: bytes read per second, and the bins' upload rate. */
static void
histogram_rate(int64_t n, double *share, double *h2d_gbps)
{
	int64_t		block_rows = 8192,
				n_blocks = (n + block_rows - 1) / block_rows;
	int64_t		feat_off[BENCH_FEATURES + 1];
	gbml_gpu_boost_shape shape;
	gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 0);
	uint8_t    *block = malloc((size_t) block_rows * BENCH_FEATURES);
	uint16_t   *leaf = calloc((size_t) n, sizeof(uint16_t));
	int64_t    *gq = malloc(sizeof(int64_t) * (size_t) n);
	int64_t    *hq = malloc(sizeof(int64_t) * (size_t) n);
	int16_t		slot_of[GBML_BOOST_SLOT_TABLE];
	gbml_boost_hist_bin *hist = malloc(sizeof(gbml_boost_hist_bin) * 33 * BENCH_FEATURES);
	double		t0,
				best = INFINITY;

	*share = *h2d_gbps = NAN;
	for (int f = 0; f <= BENCH_FEATURES; f++)
		feat_off[f] = (int64_t) f * 33;
	for (int64_t i = 0; i < block_rows * BENCH_FEATURES; i++)
		block[i] = (uint8_t) (i * 7 % 33);
	for (int64_t r = 0; r < n; r++)
	{
		gq[r] = r % 1000 - 500;
		hq[r] = 1 + r % 3;
	}
	for (int i = 0; i < GBML_BOOST_SLOT_TABLE; i++)
		slot_of[i] = -1;
	slot_of[0] = 0;
	memset(&shape, 0, sizeof(shape));
	shape.n_rows = n;
	shape.n_features = BENCH_FEATURES;
	shape.block_rows = block_rows;
	shape.n_blocks = n_blocks;
	shape.feat_off = feat_off;
	shape.total_bins = feat_off[BENCH_FEATURES];
	shape.max_slots = 1;
	if (ctx == NULL || gc_backend->boost_begin(ctx, &shape) != 0)
		goto done;
	t0 = gbml_now();
	for (int64_t b = 0; b < n_blocks; b++)
		if (gc_backend->boost_put_bins(ctx, b, block, b == n_blocks - 1 ? n - b * block_rows : block_rows) != 0)
			goto done;
	if (gc_backend->boost_begin_tree(ctx, leaf, gq, hq) != 0)
		goto done;
	*h2d_gbps = (double) n * (BENCH_FEATURES + 18) / 1e9 / (gbml_now() - t0);
	for (int rep = 0; rep < 5; rep++)
	{
		t0 = gbml_now();
		if (gc_backend->boost_level(ctx, 0, -1, -1, slot_of, 1, hist) != 0)
			goto done;
		best = fmin(best, gbml_now() - t0);
	}
	/* bytes the pass must read: every bin, and each row's leaf, gradient and hessian */
	*share = (double) n * (BENCH_FEATURES + 18) / best / HBM_BYTES_PER_SECOND;
done:
	if (ctx == NULL || !isfinite(*share))
		printf("# histogram rate: %s\n", gc_backend->last_error());
	gc_backend->ctx_destroy(ctx);
	free(block);
	free(leaf);
	free(gq);
	free(hq);
	free(hist);
}

void
gc_bench(int64_t max_rows)
{
	int			cores = 1;
	int64_t		sizes[3] = {max_rows / 10, max_rows, max_rows / 10};	/* run.sh: 1M and 10M, then 1M Depthwise */
	gbml_env	freer;				/* models come from malloc envs: any one frees them */

	gbml_env_init_malloc(&freer, 1);
#ifdef _OPENMP
	cores = omp_get_num_procs();
#endif
	printf("\n| rows (x 100 features) | trees | CPU s/tree (%d threads) | GPU s/tree | GPU speed-up | same bytes | "
		   "level-0 histogram, share of 4.8 TB/s | bins+row state H2D GB/s |\n|---|---|---|---|---|---|---|---|\n", cores);
	for (int i = 0; i < 3; i++)
	{
		int64_t		n = sizes[i];
		bool		depthwise = i == 2;
		uint8_t    *mc = NULL,
				   *mg = NULL;
		size_t		lc = 0,
					lg = 0;
		double		cpu,
					gpu,
					share,
					h2d,
					train_h2d = NAN;

		cpu = seconds_per_tree(n, false, depthwise, cores, &mc, &lc, NULL);
		gpu = seconds_per_tree(n, true, depthwise, cores, &mg, &lg, &train_h2d);
		printf("| %lld | %s | %.4f | %.4f | %.1fx | %s |", (long long) n, depthwise ? "Depthwise" : "symmetric", cpu, gpu,
			   cpu / gpu, lc == lg && lc > 0 && memcmp(mc, mg, lc) == 0 ? "yes" : "NO");
		if (depthwise)
			printf(" (the same pass) | — |\n");
		else
		{
			histogram_rate(n, &share, &h2d);
			printf(" %.1f%% | %.1f |\n", share * 100, h2d);
		}
		gc_check(lc == lg && lc > 0 && memcmp(mc, mg, lc) == 0, "bench training %lld x 100%s: same bytes", (long long) n,
				 depthwise ? ", Depthwise" : "");
		gbml_free(&freer, mc);
		gbml_free(&freer, mg);
	}
}
