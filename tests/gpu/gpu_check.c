/*
 * gpu_check.c — CUDA-vs-CPU equivalence and timings for the kernels the CUDA
 * backend provides (src/core/backend.h), run by tests/gpu/run.sh on a machine
 * with a GPU.  Exits non-zero when a kernel disagrees with the CPU reference.
 * Prints "N passed, N failed" last.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "env.h"
#include "rng.h"

static int	passed,
			failed;

static void
check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (ok)
		passed++;
	else
		failed++;
}

int
main(int argc, char **argv)
{
	const char *lib = argc > 1 ? argv[1] : "./gbml_cuda.so";
	char		err[300] = "";
	const gbml_backend *b = gbml_backend_load(lib, err, sizeof(err));
	gbml_device_info info;

	if (b == NULL)
	{
		printf("no CUDA backend: %s\n0 passed, 1 failed\n", err);
		return 1;
	}
	printf("devices: %d\n", b->device_count());
	if (b->device_count() < 1)
	{
		printf("no GPU: %s\n0 passed, 1 failed\n", b->last_error());
		return 1;
	}
	if (b->device_info(0, &info) == 0)
		printf("device 0: %s, %zu MB, sm_%d%d, %d SMs\n", info.name, info.total_memory >> 20,
			   info.compute_major, info.compute_minor, info.multiprocessors);

	printf("\n| kernel | rows x cols | CPU s | GPU s (incl. copies) | max rel diff |\n|---|---|---|---|---|\n");
	{
		int64_t		sizes[][2] = {{1000, 3}, {65536, 100}, {1000000, 100}};

		for (int s = 0; s < 3; s++)
		{
			int64_t		n = sizes[s][0];
			int			d = (int) sizes[s][1];
			float	   *x = malloc(sizeof(float) * n * d);
			double	   *cpu = calloc(d, sizeof(double));
			double	   *gpu = calloc(d, sizeof(double));
			gbml_rng	rng;
			double		t0,
						t_cpu,
						t_gpu,
						worst = 0;

			gbml_rng_seed(&rng, 1);
			for (int64_t i = 0; i < n * d; i++)
				x[i] = (float) (gbml_rng_uniform(&rng) * 2 - 1);
			t0 = gbml_now();
			gbml_cpu_column_sums(x, n, d, cpu);
			t_cpu = gbml_now() - t0;
			t0 = gbml_now();
			if (b->column_sums(0, x, n, d, gpu) != 0)
				printf("GPU error: %s\n", b->last_error());
			t_gpu = gbml_now() - t0;
			for (int j = 0; j < d; j++)
			{
				double		rel = fabs(cpu[j] - gpu[j]) / fmax(1.0, fabs(cpu[j]));

				worst = fmax(worst, rel);
			}
			printf("| column_sums | %lld x %d | %.4f | %.4f | %.2e |\n", (long long) n, d, t_cpu, t_gpu, worst);
			check(worst < 1e-9, "column_sums matches the CPU");
			free(x);
			free(cpu);
			free(gpu);
		}
	}
	printf("\n%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
