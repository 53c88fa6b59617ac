/*
 * saga_gpu.h — the SAGA trainer on the GPU: mini-batch SAGA driven from the
 * host over the backend's saga table (saga_backend.h).  saga.c calls it
 * when the training's device is the GPU and writes the model from what it
 * returns, exactly as for a CPU training.
 *
 * A different algorithm from the CPU solver (b rows a step instead of one),
 * so the model bytes differ from a CPU training's; the optimum is the same
 * (the same objective, penalties, weights, intercept and standardization),
 * and the stop rule, the trace and the epochs are reported the same way.
 * On one machine the bytes depend only on the rows, the params and the seed
 * (not on the thread count, nor on whether the rows were resident on the
 * device or streamed from the host).
 */
#ifndef GBML_SAGA_GPU_H
#define GBML_SAGA_GPU_H

#include "dataset.h"
#include "env.h"
#include "saga.h"

/*
 * Under "auto", the GPU trains only from this many values (rows x
 * features) up: below it an epoch of launches costs more than the CPU's
 * epoch.  A first estimate, not yet measured on a card: 2^24 is 136,000
 * rows of 123 features (a9a's width).
 */
#define GBML_SAGA_GPU_AUTO_MIN_VALUES ((int64_t) 1 << 24)

/*
 * The step kernel keeps w (d + 1 doubles) in shared memory: up to this many
 * features it fits an H100/H200's 227 KB per block beside the rows' state.
 * Wider data trains on the CPU (a NOTICE under device gpu).
 */
#define GBML_SAGA_GPU_MAX_FEATURES 16384

/* What a GPU training found: saga.c's arrays, filled, and the figures it reports. */
typedef struct gbml_saga_gpu_result
{
	/* the caller's arrays (d values each; traces trace_cap) */
	double	   *w;
	double	   *mean;
	double	   *std;
	double	   *trace_epoch;
	double	   *trace_obj;
	double	   *trace_time;
	double	   *trace_rel;
	int64_t		trace_cap;
	/* columns [0, n_scaled) are standardized (with `standardize`); the rest are one-hot indicators, left 0/1 */
	int			n_scaled;

	bool		on_gpu;			/* false: the CPU trains (auto's threshold, no kernels, auto over the budget) */
	bool		streamed;		/* the rows were streamed from the host every pass */
	bool		converged;
	double		b;				/* intercept */
	double		L;				/* the data's smoothness constant (power iteration) */
	double		L_max;			/* the largest row's */
	double		step;
	double		rel;
	double		objective;
	double		metric;
	int64_t		epochs;
	int64_t		n_trace;
	int64_t		batch_size;
	int			power_iterations;
	double		t_stats;		/* upload, statistics, norms, power iteration */
	double		t_solver;
	double		t_objective;
} gbml_saga_gpu_result;

/* The batch size a training of n rows uses when batch_size is `asked` (0: automatic). */
int			gbml_saga_gpu_batch(int64_t asked, int64_t n);

/*
 * Trains on the GPU when env says so (device gpu, a backend with SAGA
 * kernels, and under auto enough data and room); else returns GBML_OK with
 * out->on_gpu false and env->device set to the CPU.  alpha is the resolved
 * penalty strength, t_start the training's start (trace times).
 */
int			gbml_saga_gpu_train(const gbml_dataset *ds, gbml_env *env, const gbml_saga_params *p, double alpha,
								double t_start, gbml_saga_gpu_result *out);

#endif
