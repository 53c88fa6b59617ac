/*
 * kmeans.c — K-Means: parameters, init (k-means++, random, given
 * centroids), the Lloyd loop with the seed's two phases timed separately
 * (S1 assignment, S2 update), the stop rules, the model section, its loader,
 * scoring and the JSON dump.  The hot loops are in kmeans_kernels.c.
 *
 * Work is split into fixed tasks of at most KM_TASK_ROWS rows inside chunks
 * (fewer for small inputs, so that 2 x KM_MAX_SLOTS tasks exist) (S1,
 * dynamic schedule) and a fixed number of slots, groups of consecutive tasks
 * (S2: one partial sum per slot, merged in slot order).  Neither depends on
 * the thread count, and every floating-point sum is reduced in a fixed order,
 * so the model bytes are the same for any env->threads.
 *
 * The iteration and its stop rules follow scikit-learn's Lloyd so the two can
 * be compared on the same initial centroids: labels unchanged ->
 * "converged"; fraction of rows that changed cluster <= min_frac_changed
 * (the seed's phi0) -> "min_frac_changed"; total squared centre shift <=
 * tol * mean feature variance -> "tol"; else "max_iter".  After a stop other
 * than "converged" one more assignment makes the labels match the centroids.
 */
#include "kmeans.h"
#include "kmeans_kernels.h"
#include "rng.h"

#include <math.h>
#include <string.h>

#define KM_TASK_ROWS 512
#define KM_TASK_ROWS_MIN 64
#define KM_MAX_SLOTS 16
#define KM_SLOT_BYTES ((size_t) 64 << 20)	/* cap on all slot partial sums */
#define KM_SECTION GBML_TAG('K','M','N','S')
#define KM_SECTION_VERSION 1
#define KM_MAX_K 1000000
/*
 * Work (multiply-adds) below which a parallel region uses fewer threads: a
 * fork/join costs microseconds, and on a busy machine a barrier can cost a
 * scheduler time slice.  Results never depend on the thread count.
 */
#define KM_WORK_PER_THREAD ((double) (1 << 19))

static const char *const km_init_choices[] = {"k-means++", "random", NULL};

#define KP(field) offsetof(gbml_kmeans_params, field)
const gbml_param_spec gbml_kmeans_param_specs[] = {
	{"k", GBML_PARAM_INT, KP(k), 0, KM_MAX_K, 0, NULL, NULL,
	"number of clusters (required; gbml.kmeans_fit passes its k argument here)"},
	{"init", GBML_PARAM_ENUM_OR_MATRIX, KP(init), 0, 0, GBML_KM_INIT_KMEANSPP, NULL, km_init_choices,
	"k-means++ (greedy, 2 + ln k trials), random (k distinct rows), or a k x n_features array of initial centroids"},
	{"n_init", GBML_PARAM_INT, KP(n_init), 1, 1000, 1, NULL, NULL,
	"number of initialisations; the run with the lowest inertia is kept (1 when init is an array)"},
	{"max_iter", GBML_PARAM_INT, KP(max_iter), 1, 1000000, 300, NULL, NULL,
	"maximum Lloyd iterations per run"},
	{"tol", GBML_PARAM_REAL, KP(tol), 0, 1e12, 1e-4, NULL, NULL,
	"stop when the total squared centre shift is <= tol times the mean feature variance (scikit-learn's rule); 0 disables"},
	{"min_frac_changed", GBML_PARAM_REAL, KP(min_frac_changed), 0, 1, 0.001, NULL, NULL,
	"stop when the fraction of rows that changed cluster is <= this (the seed's phi0); 0 disables"},
	{"random_seed", GBML_PARAM_INT, KP(random_seed), 0, 9007199254740991.0, 0, NULL, NULL,
	"seed of the initialisation"},
	{"spherical", GBML_PARAM_BOOL, KP(spherical), 0, 1, 0, NULL, NULL,
	"cosine k-means: rows and centroids L2-normalised, distance = 1 - cosine"},
	GBML_PARAM_END
};
#undef KP

/* ------------------------------------------------------------------ */
/* Work state of one fit                                               */
/* ------------------------------------------------------------------ */

typedef struct km_task
{
	int			chunk;
	int64_t		start;			/* row inside the chunk */
	int64_t		count;
	int64_t		global;			/* global index of the first row */
} km_task;

typedef struct km_work
{
	gbml_env   *env;
	const gbml_dataset *ds;
	int			k;
	int			d;
	int			threads;
	int64_t		n;
	bool		spherical;

	int			ntasks;
	km_task    *tasks;
	int			nslots;
	int		   *slot_first;		/* nslots + 1 task boundaries */
	int64_t    *chunk_start;	/* global index of each chunk's first row */

	int32_t   **labels;			/* per chunk */
	double	  **xnorm2;			/* per chunk: |x|^2 */
	double	  **scale;			/* per chunk: 1/|x| (spherical only) */
	double		xnorm_max;

	double	   *c;				/* k x d current centroids */
	double	   *cnew;			/* k x d next centroids / merged sums */
	double	   *slot_sums;		/* nslots x k x d */
	int64_t    *slot_counts;	/* nslots x k */
	int64_t    *counts;			/* k */
	float	   *panels;			/* assignment kernel layouts */
	double	   *panels_d;
	float	   *cnorm;
	double	   *cnorm_d;
	double	   *task_acc;		/* ntasks x max(T, 1) partials */
	double	   *task_pot;		/* ntasks: k-means++ potential per task */

	/* k-means++ scratch (allocated on first use) */
	int			T;
	float	  **closest;		/* per chunk */
	float	  **cand_out;		/* per chunk: T x rows, task-blocked */
	float	   *cand;			/* d x GBML_KM_CAND_LANES, candidate-minor */

	double	  **far;			/* per chunk: distance to own centre (relocation) */
} km_work;

static void *
km_alloc_chunks(km_work *w, size_t elem, bool per_row)
{
	const gbml_dataset *ds = w->ds;
	void	  **arr = gbml_alloc0(w->env, sizeof(void *) * (size_t) ds->n_chunks);

	if (arr == NULL)
		return NULL;
	for (int c = 0; c < ds->n_chunks; c++)
	{
		size_t		rows = (size_t) (ds->chunks[c]->n_rows > 0 ? ds->chunks[c]->n_rows : 1);

		arr[c] = gbml_alloc_array(w->env, per_row ? rows : 1, elem);
		if (arr[c] == NULL)
			return arr;			/* caller checks the last element via km_chunks_ok */
	}
	return arr;
}

static bool
km_chunks_ok(const km_work *w, void **arr)
{
	if (arr == NULL)
		return false;
	for (int c = 0; c < w->ds->n_chunks; c++)
		if (arr[c] == NULL)
			return false;
	return true;
}

static void
km_free_chunks(km_work *w, void **arr)
{
	if (arr == NULL)
		return;
	for (int c = 0; c < w->ds->n_chunks; c++)
		gbml_free(w->env, arr[c]);
	gbml_free(w->env, arr);
}

static void
km_work_free(km_work *w)
{
	gbml_env   *env = w->env;

	gbml_free(env, w->tasks);
	gbml_free(env, w->slot_first);
	gbml_free(env, w->chunk_start);
	km_free_chunks(w, (void **) w->labels);
	km_free_chunks(w, (void **) w->xnorm2);
	km_free_chunks(w, (void **) w->scale);
	km_free_chunks(w, (void **) w->closest);
	km_free_chunks(w, (void **) w->cand_out);
	km_free_chunks(w, (void **) w->far);
	gbml_free(env, w->c);
	gbml_free(env, w->cnew);
	gbml_free(env, w->slot_sums);
	gbml_free(env, w->slot_counts);
	gbml_free(env, w->counts);
	gbml_free(env, w->panels);
	gbml_free(env, w->panels_d);
	gbml_free(env, w->cnorm);
	gbml_free(env, w->cnorm_d);
	gbml_free(env, w->task_acc);
	gbml_free(env, w->task_pot);
	gbml_free(env, w->cand);
	memset(w, 0, sizeof(*w));
}

/* Global row index -> chunk and row. */
static const float *
km_row(const km_work *w, int64_t g, int *chunk_out, int64_t *row_out)
{
	int			lo = 0,
				hi = w->ds->n_chunks - 1;

	while (lo < hi)
	{
		int			mid = (lo + hi + 1) / 2;

		if (w->chunk_start[mid] <= g)
			lo = mid;
		else
			hi = mid - 1;
	}
	*chunk_out = lo;
	*row_out = g - w->chunk_start[lo];
	return gbml_dataset_row(w->ds, lo, *row_out);
}

static double
km_row_scale(const km_work *w, int chunk, int64_t row)
{
	return w->spherical ? w->scale[chunk][row] : 1.0;
}

/* Threads worth starting for `work` multiply-adds. */
static int
km_threads_for(const km_work *w, double work)
{
	double		t = work / KM_WORK_PER_THREAD;

	if (t < 1)
		return 1;
	return t < w->threads ? (int) t : w->threads;
}

/* Allocations, tasks, slots, row norms; checks the input. */
static int
km_setup(km_work *w, const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env)
{
	int64_t		g = 0;
	int			t = 0;
	int			task_rows;
	size_t		kd;
	size_t		slot_cap;
	int			zero_row_chunk = -1;
	int64_t		zero_row = -1;

	memset(w, 0, sizeof(*w));
	w->env = env;
	w->ds = ds;
	w->k = (int) p->k;
	w->d = ds->n_features;
	w->n = ds->n_rows;
	w->threads = env->threads;
	w->spherical = p->spherical;
	kd = (size_t) w->k * (size_t) w->d;

	w->chunk_start = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t));
	if (w->chunk_start == NULL)
		return env->error_code;
	/*
	 * Task size, a function of n only: small inputs get smaller tasks so that
	 * the slots (and the threads taking them) stay balanced.
	 */
	task_rows = (int) ((ds->n_rows / (2 * KM_MAX_SLOTS) + 15) / 16 * 16);
	if (task_rows < KM_TASK_ROWS_MIN)
		task_rows = KM_TASK_ROWS_MIN;
	if (task_rows > KM_TASK_ROWS)
		task_rows = KM_TASK_ROWS;
	w->ntasks = 0;
	for (int c = 0; c < ds->n_chunks; c++)
	{
		w->chunk_start[c] = g;
		g += ds->chunks[c]->n_rows;
		w->ntasks += (int) ((ds->chunks[c]->n_rows + task_rows - 1) / task_rows);
	}
	w->chunk_start[ds->n_chunks] = g;
	w->tasks = gbml_alloc_array(env, (size_t) w->ntasks, sizeof(km_task));
	if (w->tasks == NULL)
		return env->error_code;
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t s = 0; s < ds->chunks[c]->n_rows; s += task_rows)
		{
			km_task    *tk = &w->tasks[t++];

			tk->chunk = c;
			tk->start = s;
			tk->count = ds->chunks[c]->n_rows - s < task_rows ? ds->chunks[c]->n_rows - s : task_rows;
			tk->global = w->chunk_start[c] + s;
		}

	/* Slots: a function of n, k and d only (never of the thread count). */
	w->nslots = KM_MAX_SLOTS;
	if (w->nslots > w->ntasks)
		w->nslots = w->ntasks;
	slot_cap = KM_SLOT_BYTES / (kd * sizeof(double) + (size_t) w->k * sizeof(int64_t) + 1);
	if ((size_t) w->nslots > slot_cap)
		w->nslots = slot_cap > 0 ? (int) slot_cap : 1;
	if (w->nslots < 1)
		w->nslots = 1;
	w->slot_first = gbml_alloc_array(env, (size_t) w->nslots + 1, sizeof(int));
	if (w->slot_first == NULL)
		return env->error_code;
	for (int s = 0; s <= w->nslots; s++)
		w->slot_first[s] = (int) ((int64_t) s * w->ntasks / w->nslots);

	w->labels = km_alloc_chunks(w, sizeof(int32_t), true);
	if (!km_chunks_ok(w, (void **) w->labels))
		return env->error_code;
	w->xnorm2 = km_alloc_chunks(w, sizeof(double), true);
	if (!km_chunks_ok(w, (void **) w->xnorm2))
		return env->error_code;
	if (w->spherical)
	{
		w->scale = km_alloc_chunks(w, sizeof(double), true);
		if (!km_chunks_ok(w, (void **) w->scale))
			return env->error_code;
	}
	w->c = gbml_alloc_array(env, kd, sizeof(double));
	w->cnew = gbml_alloc_array(env, kd, sizeof(double));
	w->slot_sums = gbml_alloc_array(env, kd * (size_t) w->nslots, sizeof(double));
	w->slot_counts = gbml_alloc_array(env, (size_t) w->k * (size_t) w->nslots, sizeof(int64_t));
	w->counts = gbml_alloc_array(env, (size_t) w->k, sizeof(int64_t));
	w->panels = gbml_alloc_array(env, (size_t) gbml_km_padded(w->k) * (size_t) w->d, sizeof(float));
	w->panels_d = gbml_alloc_array(env, (size_t) gbml_km_padded(w->k) * (size_t) w->d, sizeof(double));
	w->cnorm = gbml_alloc_array(env, (size_t) gbml_km_padded(w->k), sizeof(float));
	w->cnorm_d = gbml_alloc_array(env, (size_t) w->k, sizeof(double));
	w->task_pot = gbml_alloc_array(env, (size_t) w->ntasks, sizeof(double));
	if (!w->c || !w->cnew || !w->slot_sums || !w->slot_counts || !w->counts ||
		!w->panels || !w->panels_d || !w->cnorm || !w->cnorm_d || !w->task_pot)
		return env->error_code;

	/* Row norms (and inverse norms for the spherical mode), task-parallel. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(km_threads_for(w, (double) w->n * w->d))
	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		const float *x = ds->chunks[tk->chunk]->x + (size_t) tk->start * w->d;
		double	   *xn = w->xnorm2[tk->chunk] + tk->start;

		gbml_km_row_norms(x, tk->count, w->d, xn);
		if (w->spherical)
			for (int64_t i = 0; i < tk->count; i++)
				w->scale[tk->chunk][tk->start + i] = xn[i] > 0 ? 1.0 / sqrt(xn[i]) : 0.0;
	}
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t i = 0; i < ds->chunks[c]->n_rows; i++)
		{
			double		v = w->xnorm2[c][i];

			if (v > w->xnorm_max)
				w->xnorm_max = v;
			if (v == 0 && zero_row < 0)
			{
				zero_row_chunk = c;
				zero_row = i;
			}
			w->labels[c][i] = -1;
		}
	w->xnorm_max = sqrt(w->xnorm_max);
	if (w->spherical && zero_row >= 0)
		return gbml_error(env, GBML_EINVAL,
						  "kmeans: spherical mode needs non-zero rows, but row %lld (in training order) is all zeros",
						  (long long) (w->chunk_start[zero_row_chunk] + zero_row + 1));
	return GBML_OK;
}

/*
 * Mean over features of the per-feature variance (two passes, like
 * numpy.var), of the normalised rows in the spherical mode.  Slot partials.
 */
static double
km_mean_variance(km_work *w)
{
	int			d = w->d;
	double	   *mean = w->cnew;		/* d <= k*d scratch */
	double		var = 0;

	for (int pass = 0; pass < 2; pass++)
	{
#pragma omp parallel for schedule(dynamic, 1) num_threads(km_threads_for(w, (double) w->n * d))
		for (int s = 0; s < w->nslots; s++)
		{
			double	   *acc = w->slot_sums + (size_t) s * d;

			memset(acc, 0, sizeof(double) * d);
			for (int ti = w->slot_first[s]; ti < w->slot_first[s + 1]; ti++)
			{
				const km_task *tk = &w->tasks[ti];

				for (int64_t i = 0; i < tk->count; i++)
				{
					const float *x = gbml_dataset_row(w->ds, tk->chunk, tk->start + i);
					double		sc = km_row_scale(w, tk->chunk, tk->start + i);

					if (pass == 0)
						for (int j = 0; j < d; j++)
							acc[j] += x[j] * sc;
					else
						for (int j = 0; j < d; j++)
						{
							double		t = x[j] * sc - mean[j];

							acc[j] += t * t;
						}
				}
			}
		}
		if (pass == 0)
		{
			for (int j = 0; j < d; j++)
			{
				double		s = 0;

				for (int sl = 0; sl < w->nslots; sl++)
					s += w->slot_sums[(size_t) sl * d + j];
				mean[j] = s / (double) w->n;
			}
		}
		else
		{
			for (int j = 0; j < d; j++)
			{
				double		s = 0;

				for (int sl = 0; sl < w->nslots; sl++)
					s += w->slot_sums[(size_t) sl * d + j];
				var += s / (double) w->n;
			}
		}
	}
	return var / d;
}

/* Copies row g (normalised in the spherical mode) into c[d] as double. */
static void
km_copy_row(const km_work *w, int64_t g, double *c)
{
	int			chunk;
	int64_t		row;
	const float *x = km_row(w, g, &chunk, &row);
	double		sc = km_row_scale(w, chunk, row);

	for (int j = 0; j < w->d; j++)
		c[j] = x[j] * sc;
}

/* ------------------------------------------------------------------ */
/* Initialisation                                                      */
/* ------------------------------------------------------------------ */

/* k distinct rows uniformly at random (Floyd's sampling, then shuffled). */
static int
km_init_random(km_work *w, gbml_rng *rng, double *centers)
{
	int64_t		n = w->n;
	int			k = w->k;
	size_t		cap = 16;
	int64_t    *table;
	int64_t    *chosen;
	int			m = 0;

	while (cap < (size_t) k * 2)
		cap *= 2;
	table = gbml_alloc_array(w->env, cap, sizeof(int64_t));
	chosen = gbml_alloc_array(w->env, (size_t) k, sizeof(int64_t));
	if (table == NULL || chosen == NULL)
	{
		gbml_free(w->env, table);
		gbml_free(w->env, chosen);
		return w->env->error_code;
	}
	for (size_t i = 0; i < cap; i++)
		table[i] = -1;
	for (int64_t j = n - k; j < n; j++)
	{
		int64_t		t = (int64_t) gbml_rng_below(rng, (uint64_t) j + 1);
		int64_t		pick = t;

		for (int pass = 0; pass < 2; pass++)
		{
			size_t		h = (size_t) ((uint64_t) pick * 0x9e3779b97f4a7c15ULL >> 20) & (cap - 1);
			bool		found = false;

			while (table[h] >= 0)
			{
				if (table[h] == pick)
				{
					found = true;
					break;
				}
				h = (h + 1) & (cap - 1);
			}
			if (!found)
			{
				table[h] = pick;
				chosen[m++] = pick;
				break;
			}
			pick = j;			/* t already taken: Floyd takes j, which is new */
		}
	}
	gbml_rng_shuffle_u64(rng, (uint64_t *) chosen, (uint64_t) m);
	for (int i = 0; i < k; i++)
		km_copy_row(w, chosen[i], centers + (size_t) i * w->d);
	gbml_free(w->env, table);
	gbml_free(w->env, chosen);
	return GBML_OK;
}

/* First global row whose running sum of closest[] reaches r (numpy.searchsorted). */
static int64_t
km_search(const km_work *w, double r)
{
	double		cum = 0;

	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];

		if (cum + w->task_pot[ti] >= r)
		{
			const float *cl = w->closest[tk->chunk] + tk->start;

			for (int64_t i = 0; i < tk->count; i++)
			{
				cum += cl[i];
				if (cum >= r)
					return tk->global + i;
			}
			return tk->global + tk->count - 1;
		}
		cum += w->task_pot[ti];
	}
	return w->n - 1;
}

/*
 * One k-means++ pass: distances of every row to the T candidates in w->cand,
 * floored by closest[]; task partial potentials into task_acc[ti*T + t].
 */
static void
km_candidate_pass(km_work *w, int T)
{
#pragma omp parallel for schedule(static) num_threads(km_threads_for(w, 2.0 * w->n * w->d * T))
	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		const float *x = w->ds->chunks[tk->chunk]->x + (size_t) tk->start * w->d;
		double	   *acc = w->task_acc + (size_t) ti * w->T;

		for (int t = 0; t < T; t++)
			acc[t] = 0;
		gbml_km_candidate_dist(x, tk->count, w->d,
							   w->spherical ? w->scale[tk->chunk] + tk->start : NULL,
							   w->cand, T, w->closest[tk->chunk] + tk->start,
							   w->cand_out[tk->chunk] + (size_t) tk->start * w->T, acc);
	}
}

/* Takes candidate t of the last pass as the new floor (closest[], task_pot). */
static double
km_take_candidate(km_work *w, int t)
{
	double		pot = 0;

	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];

		memcpy(w->closest[tk->chunk] + tk->start,
			   w->cand_out[tk->chunk] + (size_t) tk->start * w->T + (size_t) t * tk->count,
			   sizeof(float) * tk->count);
		w->task_pot[ti] = w->task_acc[(size_t) ti * w->T + t];
		pot += w->task_pot[ti];
	}
	return pot;
}

/*
 * Greedy k-means++ (Arthur & Vassilvitskii; scikit-learn's variant): each new
 * centre is the best of 2 + ln k candidates drawn with probability
 * proportional to the squared distance to the nearest chosen centre.
 */
static int
km_init_kmeanspp(km_work *w, gbml_rng *rng, double *centers)
{
	gbml_env   *env = w->env;
	int			d = w->d;
	int			T = 2 + (int) log((double) w->k);
	int64_t		idx[GBML_KM_CAND_LANES];
	double		pot;

	if (T > GBML_KM_CAND_LANES)
		T = GBML_KM_CAND_LANES;
	if (w->closest == NULL)
	{
		w->T = T;
		w->closest = km_alloc_chunks(w, sizeof(float), true);
		if (!km_chunks_ok(w, (void **) w->closest))
			return env->error_code;
		w->cand_out = km_alloc_chunks(w, sizeof(float) * (size_t) T, true);
		if (!km_chunks_ok(w, (void **) w->cand_out))
			return env->error_code;
		w->cand = gbml_alloc0(env, sizeof(float) * GBML_KM_CAND_LANES * (size_t) d);
		w->task_acc = gbml_alloc_array(env, (size_t) w->ntasks * T, sizeof(double));
		if (w->cand == NULL || w->task_acc == NULL)
			return env->error_code;
	}
	for (int c = 0; c < w->ds->n_chunks; c++)
		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			w->closest[c][i] = INFINITY;

	km_copy_row(w, (int64_t) gbml_rng_below(rng, (uint64_t) w->n), centers);
	for (int j = 0; j < d; j++)
		w->cand[(size_t) j * GBML_KM_CAND_LANES] = (float) centers[j];
	km_candidate_pass(w, 1);
	pot = km_take_candidate(w, 0);

	for (int c = 1; c < w->k; c++)
	{
		double		best_pot = INFINITY;
		int			best = 0;

		for (int t = 0; t < T; t++)
		{
			idx[t] = km_search(w, gbml_rng_uniform(rng) * pot);
			km_copy_row(w, idx[t], w->cnew);
			for (int j = 0; j < d; j++)
				w->cand[(size_t) j * GBML_KM_CAND_LANES + t] = (float) w->cnew[j];
		}
		km_candidate_pass(w, T);
		for (int t = 0; t < T; t++)
		{
			double		s = 0;

			for (int ti = 0; ti < w->ntasks; ti++)
				s += w->task_acc[(size_t) ti * T + t];
			if (s < best_pot)
			{
				best_pot = s;
				best = t;
			}
		}
		pot = km_take_candidate(w, best);
		km_copy_row(w, idx[best], centers + (size_t) c * d);
		if ((c & 15) == 0)
		{
			gbml_progress_info info = {"init", c, w->k, NULL, 0};

			if (gbml_progress(env, &info))
				return gbml_error(env, GBML_ECANCELLED, "canceled");
		}
	}
	return GBML_OK;
}

static int
km_init_matrix(km_work *w, const gbml_matrix *m, double *centers)
{
	if (m->rows != w->k || m->cols != w->d)
		return gbml_error(w->env, GBML_EINVAL,
						  "kmeans: init has %lld x %lld values; it must be k x n_features = %d x %d",
						  (long long) m->rows, (long long) m->cols, w->k, w->d);
	for (int i = 0; i < w->k; i++)
	{
		double	   *c = centers + (size_t) i * w->d;
		double		s = 0;

		memcpy(c, m->values + (size_t) i * w->d, sizeof(double) * w->d);
		if (!w->spherical)
			continue;
		for (int j = 0; j < w->d; j++)
			s += c[j] * c[j];
		if (s == 0)
			return gbml_error(w->env, GBML_EINVAL,
							  "kmeans: initial centroid %d is all zeros, which the spherical mode cannot normalise", i + 1);
		s = 1.0 / sqrt(s);
		for (int j = 0; j < w->d; j++)
			c[j] *= s;
	}
	return GBML_OK;
}

/* ------------------------------------------------------------------ */
/* Lloyd                                                               */
/* ------------------------------------------------------------------ */

/*
 * One pass over the rows: S1 (labels for the centroids w->c) and, when
 * `update`, S2's accumulation of the same rows into their slot's sums while
 * they are still in cache, then the merge of the slots (in slot order) into
 * w->cnew / w->counts.  One parallel region per iteration; threads take whole
 * slots, so every sum has a fixed order.  Each task times its two phases;
 * the pass's wall time is split between S1 and S2 in proportion, and S1's
 * share goes to *s1_out (NULL: not wanted; likewise rechecked_out).  Returns
 * the number of rows whose label changed.
 */
static int64_t
km_pass(km_work *w, bool update, int64_t *rechecked_out, double *s1_out)
{
	gbml_km_centers C;
	int64_t		changed = 0,
				rechecked = 0;
	double		ts1 = 0,
				ts2 = 0,
				t_start = gbml_now(),
				wall;
	int			k = w->k,
				d = w->d;
	size_t		kd = (size_t) k * d;

	gbml_km_centers_prepare(&C, w->c, k, d, w->panels, w->panels_d, w->cnorm, w->cnorm_d, w->xnorm_max);
#pragma omp parallel num_threads(km_threads_for(w, (double) w->n * d * (k + (update ? 1 : 0)))) \
	reduction(+:changed, rechecked, ts1, ts2)
	{
#pragma omp for schedule(dynamic, 1)
		for (int s = 0; s < w->nslots; s++)
		{
			double	   *sums = w->slot_sums + (size_t) s * kd;
			int64_t    *cnt = w->slot_counts + (size_t) s * k;

			if (update)
			{
				memset(sums, 0, sizeof(double) * kd);
				memset(cnt, 0, sizeof(int64_t) * k);
			}
			for (int ti = w->slot_first[s]; ti < w->slot_first[s + 1]; ti++)
			{
				const km_task *tk = &w->tasks[ti];
				const float *x = w->ds->chunks[tk->chunk]->x + (size_t) tk->start * d;
				int32_t    *lab = w->labels[tk->chunk] + tk->start;
				int32_t		tmp[KM_TASK_ROWS];
				double		t0 = gbml_now(),
							t1;

				rechecked += gbml_km_assign(&C, x, tk->count, w->xnorm2[tk->chunk] + tk->start, tmp);
				for (int64_t i = 0; i < tk->count; i++)
					if (tmp[i] != lab[i])
					{
						changed++;
						lab[i] = tmp[i];
					}
				t1 = gbml_now();
				ts1 += t1 - t0;
				if (update)
				{
					gbml_km_accumulate(x, tk->count, d, lab,
									   w->spherical ? w->scale[tk->chunk] + tk->start : NULL, sums, cnt);
					ts2 += gbml_now() - t1;
				}
			}
		}
		if (update)
		{
			double		tm = gbml_now();

			/* Merge the slots in slot order (each cluster's row of sums independently). */
#pragma omp for schedule(static) nowait
			for (int j = 0; j < k; j++)
			{
				double	   *dst = w->cnew + (size_t) j * d;
				int64_t		cn = w->slot_counts[j];

				memcpy(dst, w->slot_sums + (size_t) j * d, sizeof(double) * d);
				for (int s = 1; s < w->nslots; s++)
				{
					const double *src = w->slot_sums + (size_t) s * kd + (size_t) j * d;

					for (int i = 0; i < d; i++)
						dst[i] += src[i];
					cn += w->slot_counts[(size_t) s * k + j];
				}
				w->counts[j] = cn;
			}
			ts2 += gbml_now() - tm;
		}
	}
	wall = gbml_now() - t_start;
	if (s1_out)
		*s1_out = update && ts1 + ts2 > 0 ? wall * ts1 / (ts1 + ts2) : wall;
	if (rechecked_out)
		*rechecked_out += rechecked;
	return changed;
}

/* Heap order for the relocation: farther first, then lower row index. */
typedef struct km_far
{
	double		dist;
	int64_t		row;
} km_far;

static bool
km_far_better(const km_far *a, const km_far *b)
{
	return a->dist > b->dist || (a->dist == b->dist && a->row < b->row);
}

/* Min-heap on "better": the root is the worst of the kept ones. */
static void
km_heap_sift(km_far *h, int m, int i)
{
	for (;;)
	{
		int			l = 2 * i + 1,
					r = l + 1,
					w = i;

		if (l < m && km_far_better(&h[w], &h[l]))
			w = l;
		if (r < m && km_far_better(&h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		km_far		t = h[i];

		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

/*
 * Empty clusters (scikit-learn's rule): each takes one of the rows farthest
 * from the (old) centre of their new cluster, farthest first; the row's sum
 * moves from its cluster to the empty one.  Sums in w->cnew, counts in
 * w->counts.
 */
static int
km_relocate_empty(km_work *w, int64_t *relocations)
{
	gbml_env   *env = w->env;
	int			d = w->d;
	int			m = 0;
	km_far	   *heap;
	int			e = 0;

	for (int j = 0; j < w->k; j++)
		if (w->counts[j] == 0)
			m++;
	if (m == 0)
		return GBML_OK;
	if (w->far == NULL)
	{
		w->far = km_alloc_chunks(w, sizeof(double), true);
		if (!km_chunks_ok(w, (void **) w->far))
			return env->error_code;
	}
	heap = gbml_alloc_array(env, (size_t) m, sizeof(km_far));
	if (heap == NULL)
		return env->error_code;
#pragma omp parallel for schedule(dynamic, 1) num_threads(km_threads_for(w, (double) w->n * d))
	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];

		for (int64_t i = 0; i < tk->count; i++)
		{
			int64_t		r = tk->start + i;

			w->far[tk->chunk][r] = gbml_km_sqdist(gbml_dataset_row(w->ds, tk->chunk, r),
												  km_row_scale(w, tk->chunk, r),
												  w->c + (size_t) w->labels[tk->chunk][r] * d, d);
		}
	}
	{
		int			kept = 0;

		for (int c = 0; c < w->ds->n_chunks; c++)
			for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			{
				km_far		f = {w->far[c][i], w->chunk_start[c] + i};

				if (kept < m)
				{
					heap[kept++] = f;
					if (kept == m)
						for (int h = m / 2 - 1; h >= 0; h--)
							km_heap_sift(heap, m, h);
				}
				else if (km_far_better(&f, &heap[0]))
				{
					heap[0] = f;
					km_heap_sift(heap, m, 0);
				}
			}
		if (kept < m)			/* fewer rows than empty clusters: cannot happen (k <= n) */
			m = kept;
	}
	/* Best first. */
	for (int a = 1; a < m; a++)
		for (int b = a; b > 0 && km_far_better(&heap[b], &heap[b - 1]); b--)
		{
			km_far		t = heap[b];

			heap[b] = heap[b - 1];
			heap[b - 1] = t;
		}
	for (int j = 0; j < w->k && e < m; j++)
	{
		int			chunk;
		int64_t		row;
		const float *x;
		double		sc;
		int32_t		old;

		if (w->counts[j] != 0)
			continue;
		x = km_row(w, heap[e].row, &chunk, &row);
		sc = km_row_scale(w, chunk, row);
		old = w->labels[chunk][row];
		for (int i = 0; i < d; i++)
		{
			double		v = x[i] * sc;

			w->cnew[(size_t) old * d + i] -= v;
			w->cnew[(size_t) j * d + i] = v;
		}
		w->counts[old]--;
		w->counts[j] = 1;
		e++;
		(*relocations)++;
	}
	gbml_free(env, heap);
	return GBML_OK;
}

/*
 * End of S2: empty clusters, means (unit vectors in the spherical mode) from
 * the merged sums in w->cnew; returns the total squared centre shift and
 * makes the new centroids current.
 */
static int
km_update(km_work *w, double *shift_out, int64_t *relocations)
{
	int			k = w->k,
				d = w->d;
	double		shift = 0;
	int			rc;

	if ((rc = km_relocate_empty(w, relocations)) != GBML_OK)
		return rc;
	for (int j = 0; j < k; j++)
	{
		double	   *dst = w->cnew + (size_t) j * d;
		const double *old = w->c + (size_t) j * d;

		if (w->counts[j] <= 0)
			memcpy(dst, old, sizeof(double) * d);
		else if (w->spherical)
		{
			double		s = 0;

			for (int i = 0; i < d; i++)
				s += dst[i] * dst[i];
			if (s > 0)
			{
				s = 1.0 / sqrt(s);
				for (int i = 0; i < d; i++)
					dst[i] *= s;
			}
			else
				memcpy(dst, old, sizeof(double) * d);
		}
		else
		{
			double		inv = 1.0 / (double) w->counts[j];

			for (int i = 0; i < d; i++)
				dst[i] *= inv;
		}
		for (int i = 0; i < d; i++)
		{
			double		t = dst[i] - old[i];

			shift += t * t;
		}
	}
	{
		double	   *t = w->c;

		w->c = w->cnew;
		w->cnew = t;
	}
	*shift_out = shift;
	return GBML_OK;
}

/* Inertia of the current labels and centroids (task partials, task order), and sizes. */
static double
km_inertia(km_work *w)
{
	double		total = 0;
	int			d = w->d;

#pragma omp parallel for schedule(dynamic, 1) num_threads(km_threads_for(w, (double) w->n * d))
	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		double		s = 0;

		for (int64_t i = 0; i < tk->count; i++)
		{
			int64_t		r = tk->start + i;
			const float *x = gbml_dataset_row(w->ds, tk->chunk, r);
			const double *c = w->c + (size_t) w->labels[tk->chunk][r] * d;

			if (w->spherical)
			{
				double		dot = 0;

				for (int j = 0; j < d; j++)
					dot += x[j] * c[j];
				s += 1.0 - dot * w->scale[tk->chunk][r];
			}
			else
				s += gbml_km_sqdist(x, 1.0, c, d);
		}
		w->task_pot[ti] = s;
	}
	for (int ti = 0; ti < w->ntasks; ti++)
		total += w->task_pot[ti];
	memset(w->counts, 0, sizeof(int64_t) * w->k);
	for (int c = 0; c < w->ds->n_chunks; c++)
		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			w->counts[w->labels[c][i]]++;
	return total;
}

/* One run's bookkeeping. */
typedef struct km_run
{
	int			iterations;
	const char *stop_reason;
	double		frac_changed;
	double		init_seconds;
	double		lloyd_seconds;
	int			n_timed;
	double		s1_total;
	double		s2_total;
	int64_t		rechecked;
	int64_t		relocations;
	double		inertia;
} km_run;

static int
km_lloyd(km_work *w, const gbml_kmeans_params *p, double tol_scaled, km_run *run,
		 double *s1, double *s2)
{
	gbml_env   *env = w->env;
	bool		converged = false;
	int64_t		relocations_before = 0;
	double		t_start = gbml_now();
	int			rc;

	run->stop_reason = "max_iter";
	for (int c = 0; c < w->ds->n_chunks; c++)
		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			w->labels[c][i] = -1;
	for (int64_t it = 1; it <= p->max_iter; it++)
	{
		double		t0 = gbml_now(),
					t1,
					t2;
		int64_t		changed;
		double		shift = 0,
					p1;
		gbml_progress_info info;

		changed = km_pass(w, true, &run->rechecked, &p1);
		relocations_before = run->relocations;
		if ((rc = km_update(w, &shift, &run->relocations)) != GBML_OK)
			return rc;
		t2 = gbml_now();
		/* the pass's wall time split by phase; the centre update is S2 */
		t1 = t0 + p1;
		if (run->n_timed < GBML_KM_MAX_TIMED)
		{
			s1[run->n_timed] = t1 - t0;
			s2[run->n_timed] = t2 - t1;
			run->n_timed++;
		}
		run->s1_total += t1 - t0;
		run->s2_total += t2 - t1;
		run->iterations = (int) it;
		run->frac_changed = (double) changed / (double) w->n;

		info.phase = "train";
		info.iteration = it;
		info.total = p->max_iter;
		info.metric_name = "frac_changed";
		info.metric = run->frac_changed;
		if (gbml_progress(env, &info))
			return gbml_error(env, GBML_ECANCELLED, "canceled");

		if (changed == 0)
		{
			converged = true;
			run->stop_reason = "converged";
			break;
		}
		if (run->frac_changed <= p->min_frac_changed)
		{
			run->stop_reason = "min_frac_changed";
			break;
		}
		if (shift <= tol_scaled)
		{
			run->stop_reason = "tol";
			break;
		}
	}
	/*
	 * Labels match the centroids unless the loop stopped early, or the last
	 * update moved a row into an empty cluster (which changes centroids and
	 * counts but not labels): then one more assignment.
	 */
	if (!converged || run->relocations != relocations_before)
		km_pass(w, false, NULL, NULL);
	run->inertia = km_inertia(w);
	run->lloyd_seconds = gbml_now() - t_start;
	return GBML_OK;
}

void
gbml_kmeans_result_free(gbml_kmeans_result *res, gbml_env *env)
{
	gbml_free(env, res->centroids);
	gbml_free(env, res->sizes);
	gbml_free(env, res->s1);
	gbml_free(env, res->s2);
	if (res->labels)
	{
		for (int c = 0; c < res->n_label_chunks; c++)
			gbml_free(env, res->labels[c]);
		gbml_free(env, res->labels);
	}
	memset(res, 0, sizeof(*res));
}

static int
km_check(const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env)
{
	if (p->k <= 0)
		return gbml_error(env, GBML_EINVAL, "kmeans: parameter \"k\" is required (the number of clusters, at least 1)");
	if (ds->n_rows < 1)
		return gbml_error(env, GBML_EINVAL, "kmeans: no input rows");
	if (p->k > ds->n_rows)
		return gbml_error(env, GBML_EINVAL, "kmeans: k = %lld is more than the %lld rows (at most one cluster per row)",
						  (long long) p->k, (long long) ds->n_rows);
	if (ds->n_features < 1)
		return gbml_error(env, GBML_EINVAL, "kmeans: rows have no features");
	if (ds->has_missing)
		return gbml_error(env, GBML_EINVAL, "kmeans: features must be finite (NaN or infinity found)");
	if ((int64_t) p->k * ds->n_features > ((int64_t) 1 << 31))
		return gbml_error(env, GBML_EINVAL, "kmeans: k x n_features = %lld is too large",
						  (long long) p->k * ds->n_features);
	return GBML_OK;
}

int
gbml_kmeans_fit(const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env,
				bool want_labels, gbml_kmeans_result *res)
{
	km_work		w;
	km_run		run,
				best_run;
	double	   *best_c = NULL,
			   *s1 = NULL,
			   *s2 = NULL,
			   *best_s1 = NULL,
			   *best_s2 = NULL;
	double		t_all = gbml_now();
	double		tol_scaled = 0;
	int			n_init = p->init.choice < 0 ? 1 : (int) p->n_init;
	int			best_init = -1;
	int			rc;
	size_t		kd;

	memset(res, 0, sizeof(*res));
	memset(&best_run, 0, sizeof(best_run));
	if ((rc = km_check(ds, p, env)) != GBML_OK)
		return rc;
	if ((rc = km_setup(&w, ds, p, env)) != GBML_OK)
		goto done;
	kd = (size_t) w.k * w.d;
	best_c = gbml_alloc_array(env, kd, sizeof(double));
	s1 = gbml_alloc_array(env, GBML_KM_MAX_TIMED, sizeof(double));
	s2 = gbml_alloc_array(env, GBML_KM_MAX_TIMED, sizeof(double));
	best_s1 = gbml_alloc_array(env, GBML_KM_MAX_TIMED, sizeof(double));
	best_s2 = gbml_alloc_array(env, GBML_KM_MAX_TIMED, sizeof(double));
	if (!best_c || !s1 || !s2 || !best_s1 || !best_s2)
	{
		rc = env->error_code;
		goto done;
	}
	if (p->tol > 0)
		tol_scaled = p->tol * km_mean_variance(&w);

	for (int r = 0; r < n_init; r++)
	{
		gbml_rng	rng;
		double		t0 = gbml_now();

		memset(&run, 0, sizeof(run));
		gbml_rng_stream(&rng, (uint64_t) p->random_seed, (uint64_t) r);
		if (p->init.choice < 0)
			rc = km_init_matrix(&w, &p->init.matrix, w.c);
		else if (p->init.choice == GBML_KM_INIT_RANDOM)
			rc = km_init_random(&w, &rng, w.c);
		else
			rc = km_init_kmeanspp(&w, &rng, w.c);
		if (rc != GBML_OK)
			goto done;
		run.init_seconds = gbml_now() - t0;
		if ((rc = km_lloyd(&w, p, tol_scaled, &run, s1, s2)) != GBML_OK)
			goto done;
		if (best_init < 0 || run.inertia < best_run.inertia)
		{
			best_init = r;
			best_run = run;
			memcpy(best_c, w.c, kd * sizeof(double));
			memcpy(best_s1, s1, sizeof(double) * run.n_timed);
			memcpy(best_s2, s2, sizeof(double) * run.n_timed);
		}
	}
	/*
	 * Labels and sizes of the kept run: km_lloyd left them for the last run,
	 * so they are recomputed only when an earlier run was better.
	 */
	if (best_init != n_init - 1)
	{
		memcpy(w.c, best_c, kd * sizeof(double));
		km_pass(&w, false, NULL, NULL);
		km_inertia(&w);
	}

	res->k = w.k;
	res->d = w.d;
	res->spherical = w.spherical;
	res->centroids = best_c;
	best_c = NULL;
	res->sizes = gbml_alloc_array(env, (size_t) w.k, sizeof(int64_t));
	if (res->sizes == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	memcpy(res->sizes, w.counts, sizeof(int64_t) * w.k);
	res->inertia = best_run.inertia;
	res->iterations = best_run.iterations;
	res->stop_reason = best_run.stop_reason;
	res->last_frac_changed = best_run.frac_changed;
	res->tol_scaled = tol_scaled;
	res->n_init = n_init;
	res->best_init = best_init;
	res->init_seconds = best_run.init_seconds;
	res->lloyd_seconds = best_run.lloyd_seconds;
	res->n_timed = best_run.n_timed;
	res->s1 = best_s1;
	res->s2 = best_s2;
	best_s1 = best_s2 = NULL;
	res->s1_total = best_run.s1_total;
	res->s2_total = best_run.s2_total;
	res->rechecked = best_run.rechecked;
	res->empty_relocations = best_run.relocations;
	res->kernel = gbml_km_kernel_isa();
	if (want_labels)
	{
		res->labels = w.labels;
		res->n_label_chunks = ds->n_chunks;
		w.labels = NULL;
	}
	res->total_seconds = gbml_now() - t_all;
	rc = GBML_OK;

done:
	gbml_free(env, best_c);
	gbml_free(env, s1);
	gbml_free(env, s2);
	gbml_free(env, best_s1);
	gbml_free(env, best_s2);
	km_work_free(&w);
	if (rc != GBML_OK)
		gbml_kmeans_result_free(res, env);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Model: section, loader, scoring, JSON                               */
/* ------------------------------------------------------------------ */

typedef struct km_model
{
	int			k;
	int			d;
	bool		spherical;
	double		inertia;
	double	   *c;				/* k x d */
	double	   *cnorm;			/* k: |c| */
	uint64_t   *sizes;
} km_model;

/*
 * Section KMNS: u32 version | u32 k | u32 d | u32 flags (bit 0 spherical) |
 * f64 inertia | u64 sizes[k] | f64 centroids[k*d].
 */
static int
km_write_section(const gbml_kmeans_result *res, gbml_model_writer *wr, gbml_env *env)
{
	gbml_strbuf sb;
	int			rc;

	gbml_sb_init(&sb, env);
	gbml_sb_u32(&sb, KM_SECTION_VERSION);
	gbml_sb_u32(&sb, (uint32_t) res->k);
	gbml_sb_u32(&sb, (uint32_t) res->d);
	gbml_sb_u32(&sb, res->spherical ? 1u : 0u);
	gbml_sb_f64(&sb, res->inertia);
	for (int j = 0; j < res->k; j++)
		gbml_sb_u64(&sb, (uint64_t) res->sizes[j]);
	gbml_sb_append(&sb, res->centroids, sizeof(double) * (size_t) res->k * res->d);
	rc = gbml_sb_status(&sb);
	if (rc == GBML_OK)
		gbml_model_add_sb(wr, KM_SECTION, &sb);
	gbml_sb_free(&sb);
	return rc;
}

/* Inertia of a held-out set under the model's rule (exact double assignment). */
static double
km_eval_inertia(const gbml_dataset *ev, const gbml_kmeans_result *res)
{
	double		total = 0;
	int			d = res->d;

	for (int c = 0; c < ev->n_chunks; c++)
	{
		const gbml_chunk *ch = ev->chunks[c];

		for (int64_t i = 0; i < ch->n_rows; i++)
		{
			const float *x = ch->x + (size_t) i * d;
			double		best = INFINITY;

			if (res->spherical)
			{
				double		xn = 0;

				for (int j = 0; j < d; j++)
					xn += (double) x[j] * x[j];
				xn = xn > 0 ? 1.0 / sqrt(xn) : 0;
				for (int j = 0; j < res->k; j++)
				{
					double		dot = 0;

					for (int t = 0; t < d; t++)
						dot += x[t] * res->centroids[(size_t) j * d + t];
					if (1.0 - dot * xn < best)
						best = 1.0 - dot * xn;
				}
			}
			else
				for (int j = 0; j < res->k; j++)
				{
					double		s = gbml_km_sqdist(x, 1.0, res->centroids + (size_t) j * d, d);

					if (s < best)
						best = s;
				}
			total += best;
		}
	}
	return total;
}

static int
kmeans_train(const gbml_dataset *ds, gbml_train_context *ctx)
{
	const gbml_kmeans_params *p = ctx->params;
	gbml_env   *env = ctx->env;
	gbml_strbuf *m = ctx->meta;
	gbml_kmeans_result res;
	double		eval_value;
	bool		first = true;
	int			rc;

	if ((rc = gbml_kmeans_fit(ds, p, env, false, &res)) != GBML_OK)
		return rc;
	if ((rc = km_write_section(&res, ctx->writer, env)) != GBML_OK)
	{
		gbml_kmeans_result_free(&res, env);
		return rc;
	}
	eval_value = ctx->eval && ctx->eval->n_rows > 0 ? km_eval_inertia(ctx->eval, &res) : res.inertia;

	gbml_sb_json_key(m, "metrics", &first);
	gbml_sb_append(m, "{\"inertia\":", 11);
	gbml_sb_json_number(m, res.inertia);
	gbml_sb_append(m, ",\"mean_inertia\":", 16);
	gbml_sb_json_number(m, res.inertia / (double) ds->n_rows);
	if (ctx->eval && ctx->eval->n_rows > 0)
	{
		gbml_sb_append(m, ",\"eval_inertia\":", 16);
		gbml_sb_json_number(m, eval_value);
	}
	gbml_sb_printf(m, ",\"eval_metric\":\"%s\",\"eval_value\":",
				   ctx->eval && ctx->eval->n_rows > 0 ? "eval_inertia" : "inertia");
	gbml_sb_json_number(m, eval_value);
	gbml_sb_append(m, ",\"higher_is_better\":false}", 26);

	/* Run-dependent figures (times, kernel variant) only inside "timings": the driver moves them to the report. */
	gbml_sb_json_key(m, "timings", &first);
	gbml_sb_append(m, "{\"init_seconds\":", 16);
	gbml_sb_json_number(m, res.init_seconds);
	gbml_sb_append(m, ",\"lloyd_seconds\":", 17);
	gbml_sb_json_number(m, res.lloyd_seconds);
	gbml_sb_append(m, ",\"s1_seconds_total\":", 20);
	gbml_sb_json_number(m, res.s1_total);
	gbml_sb_append(m, ",\"s2_seconds_total\":", 20);
	gbml_sb_json_number(m, res.s2_total);
	gbml_sb_append(m, ",\"s1_s2_ratio\":", 15);
	gbml_sb_json_number(m, res.s2_total > 0 ? res.s1_total / res.s2_total : 0);
	gbml_sb_append(m, ",\"seconds_per_iteration\":", 25);
	gbml_sb_json_number(m, res.iterations > 0 ? (res.s1_total + res.s2_total) / res.iterations : 0);
	gbml_sb_append(m, ",\"all_runs_seconds\":", 20);
	gbml_sb_json_number(m, res.total_seconds);
	gbml_sb_printf(m, ",\"kernel\":\"%s\",\"rechecked_rows\":%lld,\"s1_seconds\":",
				   res.kernel, (long long) res.rechecked);
	gbml_sb_json_doubles(m, res.s1, res.n_timed);
	gbml_sb_append(m, ",\"s2_seconds\":", 14);
	gbml_sb_json_doubles(m, res.s2, res.n_timed);
	gbml_sb_append(m, "}", 1);

	gbml_sb_printf(m, ",\"k\":%d,\"iterations\":%d,\"stop_reason\":\"%s\",\"inertia\":",
				   res.k, res.iterations, res.stop_reason);
	gbml_sb_json_number(m, res.inertia);
	gbml_sb_append(m, ",\"frac_changed\":", 16);
	gbml_sb_json_number(m, res.last_frac_changed);
	gbml_sb_append(m, ",\"tol_scaled\":", 14);
	gbml_sb_json_number(m, res.tol_scaled);
	gbml_sb_printf(m, ",\"n_init\":%d,\"best_init\":%d,\"spherical\":%s,\"empty_relocations\":%lld,\"cluster_sizes\":[",
				   res.n_init, res.best_init, res.spherical ? "true" : "false",
				   (long long) res.empty_relocations);
	for (int j = 0; j < res.k; j++)
		gbml_sb_printf(m, j ? ",%lld" : "%lld", (long long) res.sizes[j]);
	gbml_sb_append(m, "]", 1);
	rc = gbml_sb_status(m);
	gbml_kmeans_result_free(&res, env);
	return rc;
}

static void
km_model_free(km_model *m, gbml_env *env)
{
	if (m == NULL)
		return;
	gbml_free(env, m->c);
	gbml_free(env, m->cnorm);
	gbml_free(env, m->sizes);
	gbml_free(env, m);
}

static int
kmeans_load(const gbml_model_reader *model, gbml_env *env, void **handle)
{
	const uint8_t *data;
	size_t		len;
	gbml_cursor cur;
	uint32_t	version,
				k,
				d,
				flags;
	km_model   *m;

	if (!gbml_model_find(model, KM_SECTION, &data, &len))
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section is missing");
	gbml_cursor_init(&cur, data, len);
	version = gbml_cursor_u32(&cur);
	k = gbml_cursor_u32(&cur);
	d = gbml_cursor_u32(&cur);
	flags = gbml_cursor_u32(&cur);
	if (!cur.ok || version != KM_SECTION_VERSION)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: unknown centroid section version");
	if (k < 1 || k > KM_MAX_K)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: k = %u is out of range", k);
	if (d != model->n_features || d < 1)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: %u centroid features, the model has %u",
						  d, model->n_features);
	if ((flags & ~1u) != 0)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: unknown flags 0x%x", flags);
	/* Exact size: header, inertia, sizes, centroids. */
	if (gbml_cursor_remaining(&cur) != 8 + 8 * (size_t) k + 8 * (size_t) k * d)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section has the wrong length");

	m = gbml_alloc0(env, sizeof(km_model));
	if (m == NULL)
		return env->error_code;
	m->k = (int) k;
	m->d = (int) d;
	m->spherical = (flags & 1u) != 0;
	m->c = gbml_alloc_array(env, (size_t) k * d, sizeof(double));
	m->cnorm = gbml_alloc_array(env, k, sizeof(double));
	m->sizes = gbml_alloc_array(env, k, sizeof(uint64_t));
	if (m->c == NULL || m->cnorm == NULL || m->sizes == NULL)
	{
		int			rc = env->error_code;

		km_model_free(m, env);
		return rc;
	}
	m->inertia = gbml_cursor_f64(&cur);
	for (uint32_t j = 0; j < k; j++)
		m->sizes[j] = gbml_cursor_u64(&cur);
	if (!gbml_cursor_f64_array(&cur, m->c, (size_t) k * d) || !cur.ok)
	{
		km_model_free(m, env);
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section is truncated");
	}
	for (uint32_t j = 0; j < k; j++)
	{
		double		s = 0;

		for (uint32_t i = 0; i < d; i++)
		{
			double		v = m->c[(size_t) j * d + i];

			if (!isfinite(v) || fabs(v) > 1e150)
			{
				km_model_free(m, env);
				return gbml_error(env, GBML_ECORRUPT, "kmeans model: centroid %u has a non-finite value", j + 1);
			}
			s += v * v;
		}
		m->cnorm[j] = sqrt(s);
	}
	*handle = m;
	return GBML_OK;
}

static void
kmeans_unload(void *handle, gbml_env *env)
{
	km_model_free(handle, env);
}

/*
 * Nearest centroid of one row, in double: Euclidean (|x - c|^2 directly, not
 * the expanded form) or cosine.  Ties go to the lower cluster index.  A zero
 * row in the spherical mode has cosine 0 with every centroid: cluster 0 at
 * distance 1.
 */
static double
kmeans_predict(const void *handle, const float *x, gbml_output what)
{
	const km_model *m = handle;
	int			d = m->d;
	double		best = INFINITY;
	int			arg = 0;

	for (int i = 0; i < d; i++)
		if (!isfinite(x[i]))
			return NAN;
	if (m->spherical)
	{
		double		xn = 0;

		for (int i = 0; i < d; i++)
			xn += (double) x[i] * x[i];
		xn = sqrt(xn);
		for (int j = 0; j < m->k; j++)
		{
			const double *c = m->c + (size_t) j * d;
			double		dot = 0,
						dist;

			for (int i = 0; i < d; i++)
				dot += x[i] * c[i];
			dist = (xn > 0 && m->cnorm[j] > 0) ? 1.0 - dot / (xn * m->cnorm[j]) : 1.0;
			if (dist < best)
			{
				best = dist;
				arg = j;
			}
		}
		return what == GBML_OUT_DISTANCE ? best : (double) arg;
	}
	for (int j = 0; j < m->k; j++)
	{
		double		s = gbml_km_sqdist(x, 1.0, m->c + (size_t) j * d, d);

		if (s < best)
		{
			best = s;
			arg = j;
		}
	}
	return what == GBML_OUT_DISTANCE ? sqrt(best) : (double) arg;
}

static int
kmeans_to_json(const void *handle, gbml_strbuf *out)
{
	const km_model *m = handle;

	gbml_sb_printf(out, "\"k\":%d,\"n_features\":%d,\"spherical\":%s,\"inertia\":",
				   m->k, m->d, m->spherical ? "true" : "false");
	gbml_sb_json_number(out, m->inertia);
	gbml_sb_append(out, ",\"cluster_sizes\":[", 18);
	for (int j = 0; j < m->k; j++)
		gbml_sb_printf(out, j ? ",%llu" : "%llu", (unsigned long long) m->sizes[j]);
	gbml_sb_append(out, "],\"centroids\":[", 15);
	for (int j = 0; j < m->k; j++)
	{
		if (j)
			gbml_sb_append(out, ",", 1);
		gbml_sb_json_doubles(out, m->c + (size_t) j * m->d, m->d);
	}
	gbml_sb_append(out, "]", 1);
	return gbml_sb_status(out);
}

/*
 * Importance: each feature's share of the between-cluster dispersion,
 * sum_j size_j (c_jf - mean_f)^2 normalised to sum 1 — how much the feature
 * separates the clusters.
 */
static int
kmeans_importance(const void *handle, double *out)
{
	const km_model *m = handle;
	int			d = m->d;
	double		total_w = 0;

	for (int j = 0; j < m->k; j++)
		total_w += (double) m->sizes[j];
	for (int f = 0; f < d; f++)
	{
		double		mean = 0,
					s = 0;

		if (total_w <= 0)
		{
			out[f] = 0;
			continue;
		}
		for (int j = 0; j < m->k; j++)
			mean += (double) m->sizes[j] * m->c[(size_t) j * d + f];
		mean /= total_w;
		for (int j = 0; j < m->k; j++)
		{
			double		t = m->c[(size_t) j * d + f] - mean;

			s += (double) m->sizes[j] * t * t;
		}
		out[f] = s;
	}
	gbml_importance_normalize(out, d);
	return GBML_OK;
}

const gbml_algorithm gbml_algorithm_kmeans = {
	.id = GBML_ALGO_KMEANS,
	.name = "kmeans",
	.params = gbml_kmeans_param_specs,
	.params_size = sizeof(gbml_kmeans_params),
	.input_flags = 0,
	.outputs = GBML_OUT_CLUSTER | GBML_OUT_DISTANCE | GBML_OUT_SCORE,
	.train = kmeans_train,
	.load = kmeans_load,
	.unload = kmeans_unload,
	.predict = kmeans_predict,
	.to_json = kmeans_to_json,
	.importance = kmeans_importance,
};
