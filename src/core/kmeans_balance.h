/*
 * kmeans_balance.h — the split of the hybrid K-Means (the K-Means seed's
 * CPU/GPU data-parallel iteration, with the split chosen by the program
 * instead of by hand).  The rows are cut into blocks; the GPU takes blocks
 * [0, g) and the CPU threads the rest.  After each iteration the measured
 * time of each side gives its throughput, and g moves to where both are
 * predicted to finish together.  Only the blocks between the old and the
 * new g change sides, so the data moves as little as possible.
 *
 * A pure function of the timings it is given, so the unit tests drive it
 * with simulated slow and fast sides.
 */
#ifndef GBML_KMEANS_BALANCE_H
#define GBML_KMEANS_BALANCE_H

#include <stdbool.h>
#include <stdint.h>

/* Iterations whose split the trace keeps (the run report shows them). */
#define GBML_KM_BALANCE_TRACE 64

typedef struct gbml_km_balance
{
	int			n_blocks;
	const int64_t *rows_before; /* n_blocks + 1: rows of blocks [0, b) */
	int			gpu_blocks;		/* the current split g */
	int			max_gpu_blocks; /* the most the device's memory budget holds */
	double		gpu_rate;		/* rows per second, last measured (0: not yet) */
	double		cpu_rate;
	int			moves;			/* times g changed */
	int			n_trace;
	int			trace[GBML_KM_BALANCE_TRACE];	/* g of each iteration so far */
} gbml_km_balance;

/* Starts at blocks [0, g0) on the GPU (max_gpu_blocks: n_blocks; the caller may lower it). */
void		gbml_km_balance_init(gbml_km_balance *bal, int n_blocks, const int64_t *rows_before, int g0);

/*
 * One iteration ran with the current split: the GPU's share took
 * gpu_seconds, the CPU's cpu_seconds (either share may be empty).  Records
 * the split in the trace and returns the split for the next iteration:
 * the g that minimises the predicted max(gpu rows / gpu rate, cpu rows /
 * cpu rate); it stays put unless that gains more than a few percent
 * (measurements are noisy and every move copies blocks).
 */
int			gbml_km_balance_next(gbml_km_balance *bal, double gpu_seconds, double cpu_seconds);

#endif
