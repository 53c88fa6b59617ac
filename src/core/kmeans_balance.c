/*
 * kmeans_balance.c — see kmeans_balance.h.
 */
#include "kmeans_balance.h"

/* A move must cut the predicted iteration time by this share to be made. */
#define KM_BALANCE_MIN_GAIN 0.03

void
gbml_km_balance_init(gbml_km_balance *bal, int n_blocks, const int64_t *rows_before, int g0)
{
	bal->n_blocks = n_blocks;
	bal->rows_before = rows_before;
	bal->gpu_blocks = g0 < 0 ? 0 : (g0 > n_blocks ? n_blocks : g0);
	bal->max_gpu_blocks = n_blocks;
	bal->gpu_rate = 0;
	bal->cpu_rate = 0;
	bal->moves = 0;
	bal->n_trace = 0;
}

/* Predicted seconds of an iteration with blocks [0, g) on the GPU. */
static double
predicted(const gbml_km_balance *bal, int g)
{
	double		gpu_rows = (double) bal->rows_before[g];
	double		cpu_rows = (double) (bal->rows_before[bal->n_blocks] - bal->rows_before[g]);
	double		tg = gpu_rows > 0 ? gpu_rows / bal->gpu_rate : 0;
	double		tc = cpu_rows > 0 ? cpu_rows / bal->cpu_rate : 0;

	return tg > tc ? tg : tc;
}

int
gbml_km_balance_next(gbml_km_balance *bal, double gpu_seconds, double cpu_seconds)
{
	int			g = bal->gpu_blocks;
	int64_t		gpu_rows = bal->rows_before[g];
	int64_t		cpu_rows = bal->rows_before[bal->n_blocks] - gpu_rows;
	int			best = g;
	double		now,
				best_t;

	if (bal->n_trace < GBML_KM_BALANCE_TRACE)
		bal->trace[bal->n_trace++] = g;
	/* A side's rate is remembered while it has no rows (it may get some back later). */
	if (gpu_rows > 0 && gpu_seconds > 0)
		bal->gpu_rate = (double) gpu_rows / gpu_seconds;
	if (cpu_rows > 0 && cpu_seconds > 0)
		bal->cpu_rate = (double) cpu_rows / cpu_seconds;
	if (!(bal->gpu_rate > 0) || !(bal->cpu_rate > 0))
		return g;				/* one side never measured: nothing to compare */
	now = best_t = predicted(bal, g);
	for (int c = 0; c <= bal->max_gpu_blocks; c++)
	{
		double		t = predicted(bal, c);

		if (t < best_t)
		{
			best_t = t;
			best = c;
		}
	}
	if (best != g && best_t < now * (1.0 - KM_BALANCE_MIN_GAIN))
	{
		bal->gpu_blocks = best;
		bal->moves++;
	}
	return bal->gpu_blocks;
}
