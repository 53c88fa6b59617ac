/*
 * kmeans_fit_bench.c — whole K-Means fits for tests/gpu/run.sh: seconds per
 * Lloyd iteration on the CPU (every core), on the GPU, and split between
 * them (device 'hybrid'), on the K-Means seed's grid (100,000 rows, d 10 /
 * 50 / 100, k 10 / 50 / 100) and at up to 10M x 128 with k = 1000; the
 * hybrid split it settled on, and whether all three gave the same
 * centroids (they must).  Prints one markdown table; tests/gpu/torch_kmeans.py
 * times PyTorch on the same shapes.
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
#include "dataset.h"
#include "kmeans.h"
#include "rng.h"

/* n rows of d features around 32 random centres. */
static void
make_blobs(gbml_dataset *ds, gbml_env *env, int64_t n, int d)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * (size_t) d);
	float	   *centres = malloc(sizeof(float) * 32 * (size_t) d);

	gbml_rng_seed(&rng, 11);
	for (int i = 0; i < 32 * d; i++)
		centres[i] = (float) (gbml_rng_uniform(&rng) * 20 - 10);
	gbml_dataset_init(ds, false);
	for (int64_t i = 0; i < n; i++)
	{
		gbml_row	row = {0};
		const float *c = centres + (size_t) (i % 32) * d;

		for (int j = 0; j < d; j++)
			x[j] = c[j] + (float) (gbml_rng_uniform(&rng) * 4 - 2);
		row.x = x;
		row.n_features = d;
		row.label_is_null = row.group_is_null = row.weight_is_null = true;
		gbml_dataset_append(ds, env, &row, false);
	}
	free(x);
	free(centres);
}

typedef struct fit_result
{
	double		seconds_per_iteration;
	double		last_split;
	int			iterations;
	double	   *centroids;
	size_t		bytes;
} fit_result;

static void
timed_fit(const gbml_dataset *ds, int k, int iterations, gbml_device device, int threads, fit_result *out)
{
	gbml_env	env;
	gbml_kmeans_params p;
	gbml_kmeans_result res;

	memset(out, 0, sizeof(*out));
	out->seconds_per_iteration = NAN;
	gbml_env_init_malloc(&env, threads);
	env.memory_limit = (size_t) 1 << 40;
	if (device != GBML_DEVICE_CPU)
	{
		env.device = device;
		env.gpu = gc_backend;
	}
	memset(&p, 0, sizeof(p));
	p.k = k;
	p.init.choice = GBML_KM_INIT_RANDOM;
	p.n_init = 1;
	p.max_iter = iterations;
	p.random_seed = 7;
	if (gbml_kmeans_fit(ds, &p, &env, false, &res) != GBML_OK)
	{
		printf("# kmeans fit (device %d) failed: %s\n", (int) device, env.error);
		return;
	}
	out->iterations = res.iterations;
	out->seconds_per_iteration = (res.s1_total + res.s2_total) / res.iterations;
	out->last_split = res.n_split > 0 ? res.split[res.n_split - 1] : NAN;
	out->bytes = sizeof(double) * (size_t) k * ds->n_features;
	out->centroids = malloc(out->bytes);
	memcpy(out->centroids, res.centroids, out->bytes);
	gbml_kmeans_result_free(&res, &env);
}

static void
bench_shape(int64_t n, int d, int k, int iterations, int cores)
{
	gbml_env	env;
	gbml_dataset ds;
	fit_result	cpu,
				gpu,
				hyb;
	bool		same;
	double		best;

	gbml_env_init_malloc(&env, cores);
	env.memory_limit = (size_t) 1 << 40;
	make_blobs(&ds, &env, n, d);
	timed_fit(&ds, k, iterations, GBML_DEVICE_CPU, cores, &cpu);
	timed_fit(&ds, k, iterations, GBML_DEVICE_GPU, cores, &gpu);
	timed_fit(&ds, k, iterations, GBML_DEVICE_HYBRID, cores, &hyb);
	same = cpu.centroids && gpu.centroids && hyb.centroids && memcmp(cpu.centroids, gpu.centroids, cpu.bytes) == 0 &&
		memcmp(cpu.centroids, hyb.centroids, cpu.bytes) == 0;
	best = fmin(cpu.seconds_per_iteration, gpu.seconds_per_iteration);
	printf("| %lld | %d | %d | %.5f | %.5f | %.1fx | %.5f | %.2f | %.2f | %.2f | %s |\n", (long long) n, d, k,
		   cpu.seconds_per_iteration, gpu.seconds_per_iteration, cpu.seconds_per_iteration / gpu.seconds_per_iteration,
		   hyb.seconds_per_iteration, best / hyb.seconds_per_iteration,
		   2.0 * n * k * d / gpu.seconds_per_iteration / 1e12, hyb.last_split, same ? "yes" : "NO");
	gc_check(same, "kmeans bench %lld x %d, k %d: CPU, GPU and hybrid give the same centroids", (long long) n, d, k);
	free(cpu.centroids);
	free(gpu.centroids);
	free(hyb.centroids);
	gbml_dataset_free(&ds, &env);
}

void
gc_kmeans_fit_bench(int64_t max_rows)
{
	int			cores = 1;
	int64_t		grid_rows = max_rows >= 1000000 ? 100000 : max_rows / 20;
	int			ds_[3] = {10, 50, 100},
				ks[3] = {10, 50, 100};

#ifdef _OPENMP
	cores = omp_get_num_procs();
#endif
	printf("\n| rows | d | k | CPU s/iter (%d threads) | GPU s/iter | GPU speed-up | hybrid s/iter | "
		   "best single / hybrid | GPU TFLOP/s (2nkd/s) | hybrid GPU row share | same centroids |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|\n", cores);
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 3; b++)
			bench_shape(grid_rows, ds_[a], ks[b], 8, cores);
	bench_shape(max_rows, 128, max_rows >= 1000000 ? 1000 : 50, 3, cores);
}
