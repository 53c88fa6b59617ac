/*
 * saga_bench.c — SAGA timings for tests/gpu/run.sh: a9a-like data (123
 * binary features in 14 one-hot groups, 11% dense, logistic labels from a
 * planted model; C = 1) replicated to about max_rows rows, and the time each
 * solver needs to reach 1e-4 relative suboptimality: mini-batch SAGA on the
 * GPU at several batch sizes (the automatic one included: these figures are
 * what its AUTO_MAX in src/core/saga_gpu.c is set from) against the CPU
 * solver on every core.  Prints one markdown table.
 *
 * The optimum: exact copies of a base set have the base set's objective at
 * the same alpha = 1/(C n), so F* is the CPU solver run far past 1e-8 on the
 * base set alone.  A training stops (a cancel from its progress callback)
 * at the first epoch whose objective, evaluated by the solver on its usual
 * schedule, is within 1e-4 of F*; the time is from the training call,
 * canonical ordering included (the same host code for both devices; its
 * own time is printed too).
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
#include "rng.h"
#include "saga_gpu.h"
#include "../unit/test_util.h"

#define A9A_ROWS 32561
#define A9A_FEATURES 123
#define TARGET 1e-4

/* The sizes of a9a's 14 one-hot groups (they add up to 123). */
static const int group_sizes[14] = {5, 7, 16, 16, 7, 14, 6, 5, 2, 4, 4, 4, 8, 25};

/* n base rows of exactly one 1 per group, labels from a planted logistic model. */
static void
make_base(float *x, float *y, int64_t n)
{
	gbml_rng	rng;
	double		w[A9A_FEATURES];

	gbml_rng_seed(&rng, 123);
	for (int j = 0; j < A9A_FEATURES; j++)
		w[j] = (gbml_rng_uniform(&rng) * 2 - 1) * 1.5;
	for (int64_t i = 0; i < n; i++)
	{
		float	   *row = x + (size_t) i * A9A_FEATURES;
		double		m = -1.2;
		int			at = 0;

		memset(row, 0, sizeof(float) * A9A_FEATURES);
		for (int g = 0; g < 14; g++)
		{
			/* skewed within a group, as a9a's categories are */
			double		u = gbml_rng_uniform(&rng);
			int			k = (int) (u * u * group_sizes[g]);

			row[at + k] = 1.0f;
			m += w[at + k];
			at += group_sizes[g];
		}
		y[i] = gbml_rng_uniform(&rng) < 1.0 / (1.0 + exp(-m)) ? 1.0f : 0.0f;
	}
}

static void
fill(gbml_dataset *ds, gbml_env *env, const float *x, const float *y, int64_t base, int64_t copies)
{
	gbml_dataset_init(ds, false);
	for (int64_t c = 0; c < copies; c++)
		for (int64_t i = 0; i < base; i++)
		{
			gbml_row	row;

			memset(&row, 0, sizeof(row));
			row.x = x + (size_t) i * A9A_FEATURES;
			row.n_features = A9A_FEATURES;
			row.label = y[i];
			row.group_is_null = true;
			row.weight_is_null = true;
			gbml_dataset_append(ds, env, &row, true);
		}
	gbml_dataset_finish_appends(ds, env);
}

/* What the progress callback watches for: the first objective within TARGET of f_star. */
typedef struct watch
{
	double		f_star;
	double		t0;
	double		seconds;		/* to the target; NaN: not reached */
	int64_t		epoch;
	double		reached;		/* the relative suboptimality then */
} watch;

static bool
stop_at_target(void *ctx, const gbml_progress_info *info)
{
	watch	   *w = ctx;
	double		rel = (info->metric - w->f_star) / fabs(w->f_star);

	if (!isfinite(info->metric) || rel > TARGET)
		return false;
	w->seconds = gbml_now() - w->t0;
	w->epoch = info->iteration;
	w->reached = rel;
	return true;
}

/* One training of ds up to the target (max_iter epochs at most); batch < 0: the CPU. */
static void
time_to_target(gbml_dataset *ds, int threads, int batch, int64_t max_iter, watch *w)
{
	gbml_env	env;
	gbml_param_value p[5] = {tu_num("C", 1), tu_num("tol", 0), tu_num("max_iter", (double) max_iter),
	tu_num("batch_size", batch > 0 ? batch : 0), tu_num("random_seed", 1)};
	uint8_t    *model = NULL;
	size_t		len = 0;
	int			rc;

	gbml_env_init_malloc(&env, threads);
	if (batch >= 0)
	{
		env.device = GBML_DEVICE_GPU;
		env.gpu = gc_backend;
	}
	env.progress_fn = stop_at_target;
	env.progress_ctx = w;
	w->seconds = w->reached = NAN;
	w->epoch = 0;
	w->t0 = gbml_now();
	rc = gbml_train_values(&env, "saga", p, 5, ds, NULL, &model, &len);
	if (rc != GBML_OK && rc != GBML_ECANCELLED)
		printf("# training failed: %s\n", env.error);
	gbml_free(&env, model);
}

/* F*: the CPU solver on the base set, at the replicated set's alpha. */
static double
optimum(const float *x, const float *y, int64_t base, int64_t n, int threads)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_param_value p[3] = {tu_num("alpha", 1.0 / (double) n), tu_num("tol", 1e-12), tu_num("max_iter", 600)};
	uint8_t    *model = NULL;
	size_t		len = 0;
	double		f = NAN;

	gbml_env_init_malloc(&env, threads);
	fill(&ds, &env, x, y, base, 1);
	if (gbml_train_values(&env, "saga", p, 3, &ds, NULL, &model, &len) == GBML_OK)
		f = tu_meta_number(&env, model, len, "objective");
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	return f;
}

void
gc_saga_bench(int64_t max_rows)
{
	int			threads = 1;
	int64_t		base = max_rows / 8 < A9A_ROWS ? max_rows / 8 : A9A_ROWS;
	int64_t		copies,
				n;
	float	   *x,
			   *y;
	gbml_env	env;
	gbml_dataset ds;
	double		f_star,
				t_prep,
				cpu_seconds;
	watch		w;
	const int	batches[] = {0, 256, 1024, 4096, 16384};

#ifdef _OPENMP
	threads = omp_get_num_procs();
#endif
	if (base < 100)
		base = 100;
	copies = max_rows / base > 0 ? max_rows / base : 1;
	n = base * copies;
	x = malloc(sizeof(float) * (size_t) base * A9A_FEATURES);
	y = malloc(sizeof(float) * (size_t) base);
	make_base(x, y, base);
	f_star = optimum(x, y, base, n, threads);
	gbml_env_init_malloc(&env, threads);
	fill(&ds, &env, x, y, base, copies);
	t_prep = gbml_now();
	gbml_dataset_canonicalize(&ds, &env);
	t_prep = gbml_now() - t_prep;

	printf("\n# SAGA, logistic C = 1, a9a-like: %lld base rows x %lld copies = %lld rows x %d features; "
		   "F* = %.10g; time to %.0e relative suboptimality (from the training call; canonical order %.2f s of it)\n\n",
		   (long long) base, (long long) copies, (long long) n, A9A_FEATURES, f_star, TARGET, t_prep);
	printf("| solver | batch | epochs | seconds | speed-up | suboptimality then |\n|---|---|---|---|---|---|\n");
	w.f_star = f_star;
	time_to_target(&ds, threads, -1, 50, &w);
	cpu_seconds = w.seconds;
	printf("| CPU SAGA, %d threads | 1 | %lld | %.3f | 1.0 | %.2e |\n", threads, (long long) w.epoch, w.seconds, w.reached);
	for (size_t k = 0; k < sizeof(batches) / sizeof(batches[0]); k++)
	{
		if (batches[k] > 0 && batches[k] * 16 > n)
			continue;
		time_to_target(&ds, threads, batches[k], 300, &w);
		printf("| GPU mini-batch SAGA | %s%d | %lld | %.3f | %.1f | %.2e |\n", batches[k] ? "" : "auto: ",
			   gbml_saga_gpu_batch(batches[k], n), (long long) w.epoch, w.seconds, cpu_seconds / w.seconds, w.reached);
	}
	fflush(stdout);
	gc_check(gc_no_resources(), "SAGA bench: nothing held on the device");
	gbml_dataset_free(&ds, &env);
	free(x);
	free(y);
}
