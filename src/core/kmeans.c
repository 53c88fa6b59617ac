/*
 * kmeans.c — K-Means' fit: parameters, the work state of a fit, the Lloyd
 * loop with the seed's two phases timed separately (S1 assignment, S2
 * update), the stop rules and gbml_kmeans_fit.  The initialisation
 * (k-means++, random, given centroids) is kmeans_init.c's, the model (its
 * section, loader, scoring and JSON dump) kmeans_model.c's; the hot loops
 * are in kmeans_kernels.c.
 *
 * Work is split into tasks of at most KM_TASK_ROWS rows inside chunks (the
 * CPU threads' unit) and blocks of whole tasks (the GPU's unit); see
 * kmeans_internal.h.  Every sum across rows is in fixed point
 * (kmeans_exact.h) and every distance is computed with the arithmetic both
 * devices share, so the model bytes are the same for any env->threads, on
 * the CPU, on the GPU (device 'gpu'), or split between them (device
 * 'hybrid': kmeans_device.c and kmeans_balance.c).
 *
 * The features may be in host memory or in the dataset's chunk store
 * (temporary files, for a table past the memory budget): every pass over
 * the rows walks the chunks through kmeans_walk.c, which reads stored ones
 * back in turn, and single rows (init, relocation) are fetched by index.
 * A stored dataset gives the bytes the same rows give in memory.
 *
 * The iteration and its stop rules follow scikit-learn's Lloyd so the two can
 * be compared on the same initial centroids: labels unchanged ->
 * "converged"; fraction of rows that changed cluster <= min_frac_changed
 * (the seed's phi0) -> "min_frac_changed"; total squared centre shift <=
 * tol * mean feature variance -> "tol"; else "max_iter".  After a stop other
 * than "converged" one more assignment makes the labels match the centroids.
 */
#include "kmeans_internal.h"
#include "chunk_prefetch.h"
#include "kmeans_exact.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#define KM_TASK_ROWS 512
#define KM_TASK_ROWS_MIN 64
#define KM_MAX_SLOTS 16
#define KM_SLOT_BYTES ((size_t) 64 << 20)	/* cap on all slot partial sums */
/*
 * Work (multiply-adds) below which a parallel region uses fewer threads: a
 * fork/join costs microseconds, and on a busy machine a barrier can cost a
 * scheduler time slice.  Results never depend on the thread count.
 */
#define KM_WORK_PER_THREAD ((double) (1 << 19))

static const char *const km_init_choices[] = {"k-means++", "random", NULL};

#define KP(field) offsetof(gbml_kmeans_params, field)
const gbml_param_spec gbml_kmeans_param_specs[] = {
	{"k", GBML_PARAM_INT, KP(k), 0, GBML_KM_MAX_K, 0, NULL, NULL,
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
	{"one_hot", GBML_PARAM_BOOL, KP(one_hot), 0, 1, 0, NULL, NULL,
	"categorical features: each category seen in training (NULL included) becomes a 0/1 column of the distance; without it a categorical feature is an error"},
	GBML_PARAM_END
};
#undef KP

/* ------------------------------------------------------------------ */
/* Work state of one fit (kmeans_internal.h)                          */
/* ------------------------------------------------------------------ */

/* Blocks: about this many per fit, of at most KM_BLOCK_ROWS_MAX rows. */
#define KM_BLOCKS_TARGET 64
#define KM_BLOCK_ROWS_MAX 65536

void *
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

bool
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

void
km_work_free(km_work *w)
{
	gbml_env   *env = w->env;

	if (env == NULL)
		return;
	km_shards_free(w);
	km_dev_close(w);
	gbml_free(env, w->tasks);
	gbml_free(env, w->blocks);
	gbml_free(env, w->rows_before);
	gbml_free(env, w->block_ids);
	gbml_free(env, w->chunk_start);
	gbml_free(env, w->chunk_task);
	km_walk_free(w);
	km_free_chunks(w, (void **) w->labels);
	km_free_chunks(w, (void **) w->xnorm2);
	km_free_chunks(w, (void **) w->scale);
	km_free_chunks(w, (void **) w->closest);
	km_free_chunks(w, (void **) w->cand_out);
	km_free_chunks(w, (void **) w->far);
	gbml_free(env, w->c);
	gbml_free(env, w->cnew);
	gbml_free(env, w->fix_scale);
	gbml_free(env, w->sums);
	gbml_free(env, w->counts);
	gbml_free(env, w->slot_sums);
	gbml_free(env, w->slot_counts);
	gbml_free(env, w->panels);
	gbml_free(env, w->panels_d);
	gbml_free(env, w->cnorm);
	gbml_free(env, w->cnorm_d);
	gbml_free(env, w->cand);
	gbml_free(env, w->cand_rows);
	gbml_free(env, w->task_pot);
	gbml_free(env, w->block_pot);
	gbml_free(env, w->cur_pot);
	gbml_free(env, w->row_scratch);
	gbml_free(env, w->label_scratch);
	memset(w, 0, sizeof(*w));
}

/* The block holding global row g. */
static int
km_block_of(const km_work *w, int64_t g)
{
	return gbml_run_of(w->rows_before, w->nblocks, g);
}

static double
km_row_scale(const km_work *w, int chunk, int64_t row)
{
	return w->spherical ? w->scale[chunk][row] : 1.0;
}

/* Threads worth starting for `work` multiply-adds. */
int
km_threads_for(const km_work *w, double work)
{
	double		t = work / KM_WORK_PER_THREAD;

	if (t < 1)
		return 1;
	return t < w->threads ? (int) t : w->threads;
}

/* Tasks and blocks, functions of n and the chunking only (never of threads or devices). */
static int
km_plan(km_work *w)
{
	const gbml_dataset *ds = w->ds;
	gbml_env   *env = w->env;
	int64_t		g = 0,
				block_rows;
	int			task_rows,
				tasks_per_block,
				t = 0,
				b = 0;

	/* Small inputs get smaller tasks so that the slots (and their threads) stay balanced. */
	task_rows = (int) ((ds->n_rows / (2 * KM_MAX_SLOTS) + 15) / 16 * 16);
	if (task_rows < KM_TASK_ROWS_MIN)
		task_rows = KM_TASK_ROWS_MIN;
	if (task_rows > KM_TASK_ROWS)
		task_rows = KM_TASK_ROWS;
	block_rows = (ds->n_rows / KM_BLOCKS_TARGET + task_rows - 1) / task_rows * task_rows;
	if (block_rows < task_rows)
		block_rows = task_rows;
	if (block_rows > KM_BLOCK_ROWS_MAX)
		block_rows = KM_BLOCK_ROWS_MAX;
	tasks_per_block = (int) (block_rows / task_rows);

	w->chunk_start = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t));
	w->chunk_task = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int));
	if (w->chunk_start == NULL || w->chunk_task == NULL)
		return env->error_code;
	w->ntasks = w->nblocks = 0;
	for (int c = 0; c < ds->n_chunks; c++)
	{
		int			tc = (int) ((ds->chunks[c]->n_rows + task_rows - 1) / task_rows);

		w->chunk_start[c] = g;
		w->chunk_task[c] = w->ntasks;
		g += ds->chunks[c]->n_rows;
		w->ntasks += tc;
		w->nblocks += (tc + tasks_per_block - 1) / tasks_per_block;
	}
	w->chunk_start[ds->n_chunks] = g;
	w->chunk_task[ds->n_chunks] = w->ntasks;
	w->tasks = gbml_alloc_array(env, (size_t) w->ntasks, sizeof(km_task));
	w->blocks = gbml_alloc_array(env, (size_t) w->nblocks, sizeof(km_block));
	w->rows_before = gbml_alloc_array(env, (size_t) w->nblocks + 1, sizeof(int64_t));
	w->block_ids = gbml_alloc_array(env, (size_t) w->nblocks, sizeof(int));
	if (!w->tasks || !w->blocks || !w->rows_before || !w->block_ids)
		return env->error_code;
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t s = 0; s < ds->chunks[c]->n_rows; s += task_rows)
		{
			km_task    *tk = &w->tasks[t];

			tk->chunk = c;
			tk->start = s;
			tk->count = ds->chunks[c]->n_rows - s < task_rows ? ds->chunks[c]->n_rows - s : task_rows;
			tk->global = w->chunk_start[c] + s;
			if (s % block_rows == 0)
			{
				km_block   *bl = &w->blocks[b];

				bl->chunk = c;
				bl->start = s;
				bl->global = tk->global;
				bl->first_task = t;
				bl->count = 0;
				w->rows_before[b] = tk->global;
				w->block_ids[b] = b;
				b++;
			}
			w->blocks[b - 1].count += tk->count;
			w->blocks[b - 1].end_task = t + 1;
			t++;
		}
	w->rows_before[w->nblocks] = g;
	w->max_block_rows = 0;
	for (b = 0; b < w->nblocks; b++)
		if (w->blocks[b].count > w->max_block_rows)
			w->max_block_rows = w->blocks[b].count;
	return GBML_OK;
}

/* Row norms (and inverse norms for the spherical mode) of tasks [first, end). */
static int
km_norm_tasks(km_work *w, int first, int end, void *arg)
{
	(void) arg;
#pragma omp parallel for schedule(dynamic, 1) num_threads(km_threads_for(w, (double) km_task_rows(w, first, end) * w->d))
	for (int ti = first; ti < end; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		double	   *xn = w->xnorm2[tk->chunk] + tk->start;

		gbml_km_row_norms(km_task_x(w, tk), tk->count, w->d, xn);
		if (w->spherical)
			for (int64_t i = 0; i < tk->count; i++)
				w->scale[tk->chunk][tk->start + i] = xn[i] > 0 ? 1.0 / sqrt(xn[i]) : 0.0;
	}
	return GBML_OK;
}

void
km_work_init(km_work *w, const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env,
			 const km_rows_ops *rows)
{
	memset(w, 0, sizeof(*w));
	w->env = env;
	w->ds = ds;
	w->k = (int) p->k;
	w->d = ds->n_features;
	w->n = ds->n_rows;
	w->rank_of_row = ds->rank_of_row;
	w->row_of_rank = ds->row_of_rank;
	w->threads = env->threads;
	w->spherical = p->spherical;
	w->rows = rows;
}

/*
 * What km_setup allocates beside the per-row state (the centroids, their
 * sums, the passes' slots and panels) and what a device's blocks take on
 * the host (a block's row and label scratch): small, but a check that
 * leaves them out passes a budget that the next allocation then fails.
 */
static size_t
centroid_state_bytes(const km_work *w)
{
	size_t		kd = (size_t) w->k * (size_t) w->d,
				padded = (size_t) gbml_km_padded(w->k);

	return kd * (2 * sizeof(double) + sizeof(int64_t)) + (size_t) w->d * sizeof(double) +
		(size_t) w->max_slots * (kd + (size_t) w->k) * sizeof(int64_t) +
		padded * (size_t) w->d * (sizeof(float) + sizeof(double)) + padded * sizeof(float) +
		(size_t) w->k * (sizeof(int64_t) + sizeof(double)) +
		(size_t) w->max_block_rows * (sizeof(float) + sizeof(int32_t));
}

/* Allocations, tasks, blocks, row norms, the fixed-point grid; checks the input. */
int
km_setup(km_work *w, const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env)
{
	size_t		kd;
	size_t		slot_cap;
	size_t		row_bytes,
				reader;
	int			zero_row_chunk = -1;
	int64_t		zero_row = -1;
	int			rc;

	km_work_init(w, ds, p, env, &km_local_rows);
	kd = (size_t) w->k * (size_t) w->d;
	if ((rc = km_plan(w)) != GBML_OK)
		return rc;

	/*
	 * Slots of partial sums: at most one per thread of a pass, bounded so
	 * that their memory stays under KM_SLOT_BYTES.
	 */
	w->max_slots = KM_MAX_SLOTS;
	if (w->max_slots > w->ntasks)
		w->max_slots = w->ntasks;
	slot_cap = KM_SLOT_BYTES / (kd * sizeof(int64_t) + (size_t) w->k * sizeof(int64_t) + 1);
	if ((size_t) w->max_slots > slot_cap)
		w->max_slots = slot_cap > 0 ? (int) slot_cap : 1;
	if (w->max_slots < 1)
		w->max_slots = 1;

	/*
	 * The per-row state stays in memory whatever went to files, kept to the
	 * end (km_work_free): labels, norms, the inertia's distances, the
	 * spherical scales, k-means++' closest distances and candidates.  Past
	 * the budget, say so before any of it.
	 */
	row_bytes = sizeof(int32_t) + 2 * sizeof(double) + (w->spherical ? sizeof(double) : 0);
	if (p->init.choice == GBML_KM_INIT_KMEANSPP)
		row_bytes += sizeof(float) * (size_t) (1 + km_kpp_trials(w->k));
	/* rows in files are read back a chunk at a time, the next one read ahead */
	reader = ds->store && strcmp(ds->store->residence, "file") == 0 ? gbml_chunk_prefetch_buffer_bytes(ds) : 0;
	if ((rc = gbml_budget_check(env, (size_t) ds->n_rows * row_bytes + reader + km_walk_bytes(w) +
								centroid_state_bytes(w),
								"K-Means' per-row state (%zu bytes a row for %lld rows: cluster labels, norms and distances), its centroids' sums%s",
								row_bytes, (long long) ds->n_rows,
								reader ? ", with two chunks of rows read back from temporary files" : "")) != GBML_OK ||
		(rc = km_walk_setup(w)) != GBML_OK)
		return rc;
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
	w->fix_scale = gbml_alloc_array(env, (size_t) w->d, sizeof(double));
	w->sums = gbml_alloc_array(env, kd, sizeof(int64_t));
	w->counts = gbml_alloc_array(env, (size_t) w->k, sizeof(int64_t));
	w->slot_sums = gbml_alloc_array(env, kd * (size_t) w->max_slots, sizeof(int64_t));
	w->slot_counts = gbml_alloc_array(env, (size_t) w->k * (size_t) w->max_slots, sizeof(int64_t));
	w->panels = gbml_alloc_array(env, (size_t) gbml_km_padded(w->k) * (size_t) w->d, sizeof(float));
	w->panels_d = gbml_alloc_array(env, (size_t) gbml_km_padded(w->k) * (size_t) w->d, sizeof(double));
	w->cnorm = gbml_alloc_array(env, (size_t) gbml_km_padded(w->k), sizeof(float));
	w->cnorm_d = gbml_alloc_array(env, (size_t) w->k, sizeof(double));
	if (!w->c || !w->cnew || !w->fix_scale || !w->sums || !w->counts || !w->slot_sums ||
		!w->slot_counts || !w->panels || !w->panels_d || !w->cnorm || !w->cnorm_d)
		return env->error_code;

	if ((rc = km_walk(w, 0, w->ntasks, km_norm_tasks, NULL)) != GBML_OK)
		return rc;
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
	{
		gbml_error(env, GBML_EINVAL,
				   "kmeans: spherical mode needs non-zero rows, but row %lld (in training order) is all zeros",
				   (long long) (km_global_row(w, w->chunk_start[zero_row_chunk] + zero_row) + 1));
		/* a zero row has no direction: cosine distance is undefined for it */
		return gbml_hint(env, "Filter the all-zero rows out of the source query, or train without \"spherical\".");
	}
	w->fix_bits = gbml_km_fix_bits(w->n);
	return GBML_OK;
}

/*
 * Per-feature reductions over the rows (normalised in the spherical mode),
 * each thread into its own row of partials: extremes, or integer sums on a
 * grid the driver chose, so exact in any order, any split between threads,
 * chunks or servers.
 */
typedef enum km_reduce_what
{
	KM_REDUCE_EXTENTS,			/* per-feature min and max */
	KM_REDUCE_SUM,				/* fixed-point sums of x */
	KM_REDUCE_SQDEV				/* fixed-point sums of (x - mean)^2 */
} km_reduce_what;

typedef struct km_reduce_arg
{
	km_reduce_what what;
	const double *mean;			/* KM_REDUCE_SQDEV */
	const double *scale;		/* the sums' per-feature grid */
	int			nthreads;
	double	   *mn;				/* nthreads x d */
	double	   *mx;
	int64_t    *acc;
} km_reduce_arg;

static void
km_reduce_task(km_work *w, const km_reduce_arg *a, const km_task *tk, int th)
{
	int			d = w->d;
	const float *xt = km_task_x(w, tk);
	double	   *mn = a->mn + (size_t) th * d,
			   *mx = a->mx + (size_t) th * d;
	int64_t    *acc = a->acc + (size_t) th * d;

	for (int64_t i = 0; i < tk->count; i++)
	{
		const float *x = xt + (size_t) i * d;
		double		sc = km_row_scale(w, tk->chunk, tk->start + i);

		for (int j = 0; j < d; j++)
		{
			double		v = (double) x[j] * sc;

			if (a->what == KM_REDUCE_EXTENTS)
			{
				mn[j] = v < mn[j] ? v : mn[j];
				mx[j] = v > mx[j] ? v : mx[j];
			}
			else if (a->what == KM_REDUCE_SUM)
				acc[j] += gbml_km_fix_term(v, a->scale[j]);
			else
			{
				double		t = v - a->mean[j];

				acc[j] += gbml_km_fix_term(t * t, a->scale[j]);
			}
		}
	}
}

static int
km_reduce_tasks(km_work *w, int first, int end, void *arg)
{
	const km_reduce_arg *a = arg;

#pragma omp parallel for schedule(dynamic, 1) num_threads(a->nthreads)
	for (int ti = first; ti < end; ti++)
		km_reduce_task(w, a, &w->tasks[ti], omp_get_thread_num());
	return GBML_OK;
}

/* One reduction over every row into mn / mx (extents) or sums (d values each). */
static int
km_reduce(km_work *w, km_reduce_what what, const double *mean, const double *scale,
		  double *mn, double *mx, int64_t *sums)
{
	int			d = w->d;
	km_reduce_arg a = {what, mean, scale, km_threads_for(w, (double) w->n * d), NULL, NULL, NULL};
	size_t		cells = (size_t) a.nthreads * d;
	int			rc;

	a.mn = gbml_alloc_array(w->env, cells, sizeof(double));
	a.mx = gbml_alloc_array(w->env, cells, sizeof(double));
	a.acc = gbml_alloc_array(w->env, cells, sizeof(int64_t));
	if (a.mn == NULL || a.mx == NULL || a.acc == NULL)
	{
		rc = w->env->error_code;
		goto done;
	}
	for (size_t c = 0; c < cells; c++)
	{
		a.mn[c] = INFINITY;
		a.mx[c] = -INFINITY;
		a.acc[c] = 0;
	}
	if ((rc = km_walk(w, 0, w->ntasks, km_reduce_tasks, &a)) != GBML_OK)
		goto done;
	for (int j = 0; j < d; j++)
	{
		double		lo = INFINITY,
					hi = -INFINITY;
		int64_t		s = 0;

		for (int t = 0; t < a.nthreads; t++)
		{
			lo = fmin(lo, a.mn[(size_t) t * d + j]);
			hi = fmax(hi, a.mx[(size_t) t * d + j]);
			s += a.acc[(size_t) t * d + j];
		}
		if (what == KM_REDUCE_EXTENTS)
		{
			mn[j] = lo;
			mx[j] = hi;
		}
		else
			sums[j] = s;
	}
done:
	gbml_free(w->env, a.mn);
	gbml_free(w->env, a.mx);
	gbml_free(w->env, a.acc);
	return rc;
}

static int
km_local_extents(km_work *w, double *mn, double *mx)
{
	return km_reduce(w, KM_REDUCE_EXTENTS, NULL, NULL, mn, mx, NULL);
}

static int
km_local_feature_sums(km_work *w, const double *mean, const double *scale, int64_t *sums)
{
	return km_reduce(w, mean ? KM_REDUCE_SQDEV : KM_REDUCE_SUM, mean, scale, NULL, NULL, sums);
}

/*
 * Per-feature statistics of the rows (normalised in the spherical mode):
 * the fixed-point grid of each feature's centroid sums (from the largest
 * |x_j|), and, when var_out is not NULL, the mean over features of the
 * per-feature variance (two sums, like numpy.var: the tol rule's scale).
 * Every figure is an extreme or a fixed-point sum, so the rows may be
 * anywhere (threads, devices, files, servers) and give the same bits.
 */
static int
km_feature_stats(km_work *w, double *var_out)
{
	int			d = w->d;
	double	   *mn = gbml_alloc_array(w->env, (size_t) d, sizeof(double)),
			   *mx = gbml_alloc_array(w->env, (size_t) d, sizeof(double)),
			   *dev_scale = gbml_alloc_array(w->env, (size_t) d, sizeof(double));
	double	   *mean = w->cnew;		/* d <= k*d scratch */
	int64_t    *sums = gbml_alloc_array(w->env, (size_t) d, sizeof(int64_t));
	double		var = 0;
	int			rc;

	if (mn == NULL || mx == NULL || dev_scale == NULL || sums == NULL)
	{
		rc = w->env->error_code;
		goto done;
	}
	if ((rc = w->rows->extents(w, mn, mx)) != GBML_OK)
		goto done;
	for (int j = 0; j < d; j++)
		w->fix_scale[j] = gbml_km_fix_scale(fmax(fabs(mn[j]), fabs(mx[j])), w->fix_bits);
	if ((rc = w->rows->grid_set(w)) != GBML_OK)
		goto done;
	if (var_out == NULL)
		goto done;
	if ((rc = w->rows->feature_sums(w, NULL, w->fix_scale, sums)) != GBML_OK)
		goto done;
	for (int j = 0; j < d; j++)
	{
		double		dev;

		mean[j] = gbml_km_fix_value(sums[j], w->fix_scale[j]) / (double) w->n;
		dev = fmax(mx[j] - mean[j], mean[j] - mn[j]);
		dev_scale[j] = gbml_km_fix_scale(dev * dev, w->fix_bits);
	}
	if ((rc = w->rows->feature_sums(w, mean, dev_scale, sums)) != GBML_OK)
		goto done;
	for (int j = 0; j < d; j++)
		var += gbml_km_fix_value(sums[j], dev_scale[j]) / (double) w->n;
	*var_out = var / d;
done:
	gbml_free(w->env, mn);
	gbml_free(w->env, mx);
	gbml_free(w->env, dev_scale);
	gbml_free(w->env, sums);
	return rc;
}

/* The current label of global row g (the device holds the labels of its blocks). */
static int
km_label_of(km_work *w, int64_t g, int32_t *label)
{
	int			b;
	const km_block *bl;
	int			rc;

	g = km_dataset_row(w, g);
	b = km_block_of(w, g);
	bl = &w->blocks[b];

	if (b >= w->gpu_blocks)
	{
		*label = w->labels[bl->chunk][bl->start + (g - bl->global)];
		return GBML_OK;
	}
	if ((rc = km_dev_read_labels(w, b, w->label_scratch)) != GBML_OK)
		return rc;
	*label = w->label_scratch[g - bl->global];
	return GBML_OK;
}

/* far[] of tasks [first, end). */
static int
km_dist_tasks(km_work *w, int first, int end, void *arg)
{
	(void) arg;
#pragma omp parallel for schedule(dynamic, 1) num_threads(km_threads_for(w, (double) km_task_rows(w, first, end) * w->d))
	for (int ti = first; ti < end; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		const float *x = km_task_x(w, tk);

		for (int64_t i = 0; i < tk->count; i++)
		{
			int64_t		r = tk->start + i;

			w->far[tk->chunk][r] = gbml_km_row_dist(x + (size_t) i * w->d, km_row_scale(w, tk->chunk, r),
													w->c + (size_t) w->labels[tk->chunk][r] * w->d,
													w->d, w->spherical);
		}
	}
	return GBML_OK;
}

/*
 * Every row's distance to its labelled centroid into w->far (the CPU's
 * tasks here, the device's blocks there, the same arithmetic).
 */
static int
km_row_dists(km_work *w)
{
	int			rc;

	if (w->far == NULL)
	{
		w->far = km_alloc_chunks(w, sizeof(double), true);
		if (!km_chunks_ok(w, (void **) w->far))
			return w->env->error_code;
	}
	if ((rc = km_walk(w, km_cpu_first_task(w), w->ntasks, km_dist_tasks, NULL)) != GBML_OK)
		return rc;
	return w->gpu_blocks > 0 ? km_dev_row_dists(w) : GBML_OK;
}

/* ------------------------------------------------------------------ */
/* Lloyd                                                               */
/* ------------------------------------------------------------------ */

/* A CPU pass across its runs of tasks: one slot of partial sums per thread. */
typedef struct km_cpu_arg
{
	const gbml_km_centers *C;
	bool		update;
	int			threads;		/* team size asked of every run (<= max_slots) */
	int			slots;			/* slots zeroed so far: the largest team seen */
	int64_t		changed;
	int64_t		rechecked;
	double		ts1;			/* the tasks' S1 and S2 seconds */
	double		ts2;
} km_cpu_arg;

/* Task tk: S1 labels, then S2's accumulation of the same rows while they are in cache. */
static void
km_cpu_task(km_work *w, const km_cpu_arg *a, const km_task *tk, int64_t *sums, int64_t *cnt,
			int64_t *changed, int64_t *rechecked, double *ts1, double *ts2)
{
	const float *x = km_task_x(w, tk);
	int32_t    *lab = w->labels[tk->chunk] + tk->start;
	int32_t		tmp[KM_TASK_ROWS];
	double		ta = gbml_now(),
				tb;

	*rechecked += gbml_km_assign(a->C, x, tk->count, w->xnorm2[tk->chunk] + tk->start, tmp);
	for (int64_t i = 0; i < tk->count; i++)
		if (tmp[i] != lab[i])
		{
			(*changed)++;
			lab[i] = tmp[i];
		}
	tb = gbml_now();
	*ts1 += tb - ta;
	if (a->update)
		gbml_km_accumulate(x, tk->count, w->d, lab, w->spherical ? w->scale[tk->chunk] + tk->start : NULL,
						   w->fix_scale, sums, cnt);
	else
		for (int64_t i = 0; i < tk->count; i++)
			cnt[lab[i]]++;
	*ts2 += gbml_now() - tb;
}

/*
 * Tasks [first, end) of a CPU pass, each thread into its own slot (zeroed
 * in the thread's first run): integer sums, so neither the runs nor which
 * thread took which task changes a bit.
 */
static int
km_cpu_tasks(km_work *w, int first, int end, void *arg)
{
	km_cpu_arg *a = arg;
	size_t		kd = (size_t) w->k * w->d;
	int			team = 0;
	int64_t		changed = 0,
				rechecked = 0;
	double		ts1 = 0,
				ts2 = 0;

#pragma omp parallel num_threads(a->threads) reduction(+:changed, rechecked, ts1, ts2)
	{
		int			s = omp_get_thread_num();
		int64_t    *sums = w->slot_sums + (size_t) s * kd;
		int64_t    *cnt = w->slot_counts + (size_t) s * w->k;

		if (s == 0)
			team = omp_get_num_threads();
		if (s >= a->slots)
		{
			if (a->update)
				memset(sums, 0, sizeof(int64_t) * kd);
			memset(cnt, 0, sizeof(int64_t) * w->k);
		}
#pragma omp for schedule(dynamic, 1)
		for (int ti = first; ti < end; ti++)
			km_cpu_task(w, a, &w->tasks[ti], sums, cnt, &changed, &rechecked, &ts1, &ts2);
	}
	if (team > a->slots)
		a->slots = team;
	a->changed += changed;
	a->rechecked += rechecked;
	a->ts1 += ts1;
	a->ts2 += ts2;
	return GBML_OK;
}

/* The slots' integer sums into w->sums / w->counts, cluster by cluster (exact: the order is free). */
static void
km_merge_slots(km_work *w, const km_cpu_arg *a)
{
	int			k = w->k,
				d = w->d;
	size_t		kd = (size_t) k * d;

#pragma omp parallel for schedule(static) num_threads(a->threads)
	for (int j = 0; j < k; j++)
	{
		int64_t    *dst = w->sums + (size_t) j * d;
		int64_t		cn = 0;

		for (int s = 0; s < a->slots; s++)
		{
			if (a->update)
			{
				const int64_t *src = w->slot_sums + (size_t) s * kd + (size_t) j * d;

				for (int i = 0; i < d; i++)
					dst[i] += src[i];
			}
			cn += w->slot_counts[(size_t) s * k + j];
		}
		w->counts[j] = cn;
	}
}

/*
 * The CPU's share of a pass: S1 for the tasks of the CPU's blocks and,
 * when `update`, S2's accumulation of the same rows into the slot sums,
 * chunk by chunk from wherever the rows are, then the slots merged into
 * w->sums / w->counts.  Each task times its two phases (*ts1, *ts2).
 */
static int
km_cpu_pass(km_work *w, const gbml_km_centers *C, bool update, km_pass_stats *st, double *ts1_out,
			double *ts2_out)
{
	int			t0 = km_cpu_first_task(w);
	int			threads = km_threads_for(w, (double) (w->n - w->rows_before[w->gpu_blocks]) * w->d * (w->k + 1));
	km_cpu_arg	a = {C, update, threads < w->max_slots ? threads : w->max_slots, 0, 0, 0, 0, 0};
	int			rc;

	memset(w->counts, 0, sizeof(int64_t) * w->k);
	if (update)
		memset(w->sums, 0, sizeof(int64_t) * (size_t) w->k * w->d);
	if (t0 >= w->ntasks)
		return GBML_OK;
	if ((rc = km_walk(w, t0, w->ntasks, km_cpu_tasks, &a)) != GBML_OK)
		return rc;
	km_merge_slots(w, &a);
	st->changed += a.changed;
	st->rechecked += a.rechecked;
	*ts1_out = a.ts1;
	*ts2_out = a.ts2;
	return GBML_OK;
}

/*
 * One pass over the rows: labels for the centroids w->c (the device's
 * blocks there, the CPU's here, at the same time: the seed's overlap) and,
 * when `update`, the fixed-point sums and counts of the new clusters in
 * w->sums / w->counts.  The pass's wall time is split between S1 and S2 in
 * proportion to the CPU tasks' phase times (all S1 when the CPU had none).
 */
static int
km_pass(km_work *w, bool update, km_pass_stats *st)
{
	gbml_km_centers C;
	double		ts1 = 0,
				ts2 = 0,
				t_start = gbml_now(),
				t_cpu;
	int			rc;

	memset(st, 0, sizeof(*st));
	gbml_km_centers_prepare(&C, w->c, w->k, w->d, w->panels, w->panels_d, w->cnorm, w->cnorm_d, w->xnorm_max);
	if (w->gpu_blocks > 0 &&
		((rc = km_dev_set_centers(w, &C)) != GBML_OK || (rc = km_dev_pass_launch(w, update)) != GBML_OK))
		return rc;
	t_cpu = gbml_now();
	if ((rc = km_cpu_pass(w, &C, update, st, &ts1, &ts2)) != GBML_OK)
		return rc;
	st->cpu_seconds = gbml_now() - t_cpu;
	if (w->gpu_blocks > 0 &&
		(rc = km_dev_pass_finish(w, &st->changed, &st->rechecked, &st->gpu_seconds)) != GBML_OK)
		return rc;
	w->gpu_seconds += st->gpu_seconds;
	w->cpu_seconds += st->cpu_seconds;
	st->s1 = gbml_now() - t_start;
	if (update && ts1 + ts2 > 0)
		st->s1 *= ts1 / (ts1 + ts2);
	return GBML_OK;
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

/* The m rows farthest from their centre, farthest first, into heap[0..*m). */
static void
km_farthest(km_work *w, km_far *heap, int *m_io)
{
	int			m = *m_io,
				kept = 0;

	for (int c = 0; c < w->ds->n_chunks; c++)
		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
		{
			km_far		f = {w->far[c][i], km_global_row(w, w->chunk_start[c] + i), -1};

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
	if (kept < m)				/* fewer rows than empty clusters: cannot happen (k <= n) */
		m = kept;
	for (int a = 1; a < m; a++)
		for (int b = a; b > 0 && km_far_better(&heap[b], &heap[b - 1]); b--)
		{
			km_far		t = heap[b];

			heap[b] = heap[b - 1];
			heap[b - 1] = t;
		}
	*m_io = m;
}

/*
 * The *m rows farthest from their centre in w->c (farthest first, then
 * lower row), with their labels, and the rows themselves into out[m][d].
 */
static int
km_local_farthest(km_work *w, km_far *heap, int *m, double *out)
{
	int64_t    *rows;
	int			rc;

	if ((rc = km_row_dists(w)) != GBML_OK)
		return rc;
	km_farthest(w, heap, m);
	rows = gbml_alloc_array(w->env, (size_t) *m, sizeof(int64_t));
	if (rows == NULL)
		return w->env->error_code;
	for (int e = 0; e < *m; e++)
		rows[e] = heap[e].row;
	rc = km_copy_rows(w, rows, *m, out);
	for (int e = 0; e < *m && rc == GBML_OK; e++)
		rc = km_label_of(w, heap[e].row, &heap[e].label);
	gbml_free(w->env, rows);
	return rc;
}

/*
 * Empty clusters (scikit-learn's rule): each takes one of the rows farthest
 * from the (old) centre of their cluster, farthest first; the row's
 * fixed-point terms move from its cluster to the empty one.  The rows are
 * fetched into w->cnew (k x d scratch until km_update fills it).
 */
static int
km_relocate_empty(km_work *w, int64_t *relocations)
{
	gbml_env   *env = w->env;
	int			d = w->d;
	int			m = 0;
	km_far	   *heap;
	int			e = 0;
	int			rc;

	for (int j = 0; j < w->k; j++)
		if (w->counts[j] == 0)
			m++;
	if (m == 0)
		return GBML_OK;
	heap = gbml_alloc_array(env, (size_t) m, sizeof(km_far));
	if (heap == NULL)
		return env->error_code;
	rc = w->rows->farthest(w, heap, &m, w->cnew);
	for (int j = 0; j < w->k && e < m && rc == GBML_OK; j++)
	{
		const double *x = w->cnew + (size_t) e * d;
		int32_t		old = heap[e].label;

		if (w->counts[j] != 0)
			continue;
		for (int i = 0; i < d; i++)
		{
			int64_t		t = gbml_km_fix_term(x[i], w->fix_scale[i]);

			w->sums[(size_t) old * d + i] -= t;
			w->sums[(size_t) j * d + i] = t;
		}
		w->counts[old]--;
		w->counts[j] = 1;
		e++;
		(*relocations)++;
	}
	gbml_free(env, heap);
	return rc;
}

/*
 * End of S2: empty clusters, means (unit vectors in the spherical mode) from
 * the fixed-point sums; returns the total squared centre shift and makes
 * the new centroids current.
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
		const int64_t *sum = w->sums + (size_t) j * d;

		if (w->counts[j] <= 0)
			memcpy(dst, old, sizeof(double) * d);
		else if (w->spherical)
		{
			double		s = 0;

			for (int i = 0; i < d; i++)
			{
				dst[i] = gbml_km_fix_value(sum[i], w->fix_scale[i]);
				s += dst[i] * dst[i];
			}
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
			double		cnt = (double) w->counts[j];

			for (int i = 0; i < d; i++)
				dst[i] = gbml_km_fix_value(sum[i], w->fix_scale[i]) / cnt;
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

/* Every row's distance to its centroid in w->c; the largest into *mx. */
static int
km_local_dist_max(km_work *w, double *mx)
{
	int			rc;

	*mx = 0;
	if ((rc = km_row_dists(w)) != GBML_OK)
		return rc;
	for (int c = 0; c < w->ds->n_chunks; c++)
		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			if (fabs(w->far[c][i]) > *mx)
				*mx = fabs(w->far[c][i]);
	return GBML_OK;
}

/* The distances of km_local_dist_max summed on grid `scale`. */
static int
km_local_dist_sum(km_work *w, double scale, int64_t *out)
{
	int64_t		total = 0;

#pragma omp parallel for schedule(static) reduction(+:total) num_threads(km_threads_for(w, (double) w->n * 4))
	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];

		for (int64_t i = 0; i < tk->count; i++)
			total += gbml_km_fix_term(w->far[tk->chunk][tk->start + i], scale);
	}
	*out = total;
	return GBML_OK;
}

/* Inertia of the current labels and centroids: the row distances' fixed-point sum. */
static int
km_inertia(km_work *w, double *out)
{
	double		mx,
				scale;
	int64_t		total;
	int			rc;

	if ((rc = w->rows->dist_max(w, &mx)) != GBML_OK)
		return rc;
	scale = gbml_km_fix_scale(mx, w->fix_bits);
	if ((rc = w->rows->dist_sum(w, scale, &total)) != GBML_OK)
		return rc;
	*out = gbml_km_fix_value(total, scale);
	return GBML_OK;
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

/* Progress, cancel, and the stop rules after iteration `it`; *stop set when the loop ends. */
static int
km_iteration_end(km_work *w, const gbml_kmeans_params *p, km_run *run, int64_t it, int64_t changed,
				 double shift, double tol_scaled, bool *stop)
{
	gbml_progress_info info;

	run->iterations = (int) it;
	run->frac_changed = (double) changed / (double) w->n;
	info.phase = "train";
	info.iteration = it;
	info.total = p->max_iter;
	info.metric_name = "frac_changed";
	info.metric = run->frac_changed;
	if (gbml_progress(w->env, &info))
		return gbml_error(w->env, GBML_ECANCELLED, "canceled");
	*stop = true;
	if (changed == 0)
		run->stop_reason = "converged";
	else if (run->frac_changed <= p->min_frac_changed)
		run->stop_reason = "min_frac_changed";
	else if (shift <= tol_scaled)
		run->stop_reason = "tol";
	else
		*stop = false;
	return GBML_OK;
}

static int
km_lloyd(km_work *w, const gbml_kmeans_params *p, double tol_scaled, km_run *run,
		 double *s1, double *s2)
{
	bool		stop = false;
	int64_t		relocations_before = 0;
	double		t_start = gbml_now();
	km_pass_stats st;
	int			rc;

	run->stop_reason = "max_iter";
	if ((rc = w->rows->reset_labels(w)) != GBML_OK)
		return rc;
	for (int64_t it = 1; it <= p->max_iter && !stop; it++)
	{
		double		t0 = gbml_now(),
					t2,
					shift = 0;
		gbml_progress_info train = {"train", it, p->max_iter, NULL, 0};

		w->progress = train;
		if ((rc = w->rows->pass(w, true, &st)) != GBML_OK)
			return rc;
		run->rechecked += st.rechecked;
		relocations_before = run->relocations;
		if ((rc = km_update(w, &shift, &run->relocations)) != GBML_OK)
			return rc;
		t2 = gbml_now();
		/* the pass's wall time split by phase; the centre update is S2 */
		if (run->n_timed < GBML_KM_MAX_TIMED)
		{
			s1[run->n_timed] = st.s1;
			s2[run->n_timed] = t2 - t0 - st.s1;
			run->n_timed++;
		}
		run->s1_total += st.s1;
		run->s2_total += t2 - t0 - st.s1;
		if ((rc = km_iteration_end(w, p, run, it, st.changed, shift, tol_scaled, &stop)) != GBML_OK)
			return rc;
		if (w->mode == KM_MODE_HYBRID && !stop && it < p->max_iter &&
			(rc = km_dev_rebalance(w, st.gpu_seconds, st.cpu_seconds)) != GBML_OK)
			return rc;
	}
	/*
	 * Labels match the centroids unless the loop stopped early, or the last
	 * update moved a row into an empty cluster (which changes centroids and
	 * counts but not labels): then one more assignment.
	 */
	if (strcmp(run->stop_reason, "converged") != 0 || run->relocations != relocations_before)
		if ((rc = w->rows->pass(w, false, &st)) != GBML_OK)
			return rc;
	if ((rc = km_inertia(w, &run->inertia)) != GBML_OK)
		return rc;
	run->lloyd_seconds = gbml_now() - t_start;
	return GBML_OK;
}

/* Every label to -1: the host's, and the device's for its blocks. */
static int
km_local_reset_labels(km_work *w)
{
	for (int c = 0; c < w->ds->n_chunks; c++)
		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			w->labels[c][i] = -1;
	return km_dev_reset_labels(w);
}

static int
km_local_grid_set(km_work *w)
{
	(void) w;					/* the grid is w's own */
	return GBML_OK;
}

/* The rows of w's own dataset: host memory, temporary files, the GPU's blocks. */
const km_rows_ops km_local_rows = {
	.extents = km_local_extents,
	.grid_set = km_local_grid_set,
	.feature_sums = km_local_feature_sums,
	.copy_rows = km_copy_rows,
	.kpp_start = km_local_kpp_start,
	.cand_pass = km_local_cand_pass,
	.cand_take = km_local_cand_take,
	.search = km_local_search,
	.reset_labels = km_local_reset_labels,
	.pass = km_pass,
	.farthest = km_local_farthest,
	.dist_max = km_local_dist_max,
	.dist_sum = km_local_dist_sum,
};

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
	{
		gbml_error(env, GBML_EINVAL, "kmeans: k = %lld is more than the %lld rows (at most one cluster per row)",
				   (long long) p->k, (long long) ds->n_rows);
		return gbml_hint(env, "Lower \"k\" to at most the number of rows.");
	}
	if (ds->n_features < 1)
		return gbml_error(env, GBML_EINVAL, "kmeans: rows have no features");
	if (ds->has_missing)
		return gbml_error(env, GBML_EINVAL, "kmeans: features must be finite (NaN or infinity found)");
	if ((int64_t) p->k * ds->n_features > ((int64_t) 1 << 31))
		return gbml_error(env, GBML_EINVAL, "kmeans: k x n_features = %lld is too large",
						  (long long) p->k * ds->n_features);
	return GBML_OK;
}

/* Where the fit ran, into the result (the run report's timings). */
static void
km_record_device(const km_work *w, gbml_kmeans_result *res)
{
	res->device = w->mode == KM_MODE_HYBRID ? "hybrid" : w->mode == KM_MODE_GPU ? "gpu" : "cpu";
	res->n_blocks = w->nblocks;
	res->gpu_seconds = w->gpu_seconds;
	res->cpu_seconds = w->cpu_seconds;
	res->blocks_moved = w->blocks_moved;
	res->n_split = 0;
	if (w->mode != KM_MODE_HYBRID)
		return;
	for (int i = 0; i < w->balance.n_trace; i++)
		res->split[res->n_split++] = (double) w->rows_before[w->balance.trace[i]] / (double) w->n;
}

/*
 * The rest of res from the kept run and from w (its sizes, device and
 * traffic, and — labels_of non-NULL — the labels, taken over).
 */
static int
km_fill_result(gbml_kmeans_result *res, km_work *w, const km_run *best_run, const gbml_dataset *labels_of)
{
	res->k = w->k;
	res->d = w->d;
	res->spherical = w->spherical;
	if ((res->sizes = gbml_alloc_array(w->env, (size_t) w->k, sizeof(int64_t))) == NULL)
		return w->env->error_code;
	memcpy(res->sizes, w->counts, sizeof(int64_t) * w->k);
	res->inertia = best_run->inertia;
	res->iterations = best_run->iterations;
	res->stop_reason = best_run->stop_reason;
	res->last_frac_changed = best_run->frac_changed;
	res->init_seconds = best_run->init_seconds;
	res->lloyd_seconds = best_run->lloyd_seconds;
	res->n_timed = best_run->n_timed;
	res->s1_total = best_run->s1_total;
	res->s2_total = best_run->s2_total;
	res->rechecked = best_run->rechecked;
	res->empty_relocations = best_run->relocations;
	res->kernel = gbml_km_kernel_isa();
	km_record_device(w, res);
	km_shards_traffic(w, &res->traffic);
	if (labels_of)
	{
		res->labels = w->labels;
		res->n_label_chunks = labels_of->n_chunks;
		w->labels = NULL;
	}
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
	if (ds->shards && want_labels)
		return gbml_error(env, GBML_EUNSUPPORTED, "kmeans: the labels of rows on other servers stay there");
	if ((rc = ds->shards ? km_shards_setup(&w, ds, p, env) : km_setup(&w, ds, p, env)) != GBML_OK)
		goto done;
	if ((rc = km_feature_stats(&w, p->tol > 0 ? &tol_scaled : NULL)) != GBML_OK ||
		(!ds->shards && (rc = km_dev_open(&w)) != GBML_OK))
		goto done;
	tol_scaled *= p->tol;
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

	for (int r = 0; r < n_init; r++)
	{
		double		t0 = gbml_now();

		memset(&run, 0, sizeof(run));
		if ((rc = km_init_centres(&w, p, r)) != GBML_OK)
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
		km_pass_stats st;
		double		inertia;

		memcpy(w.c, best_c, kd * sizeof(double));
		if ((rc = w.rows->pass(&w, false, &st)) != GBML_OK || (rc = km_inertia(&w, &inertia)) != GBML_OK)
			goto done;
	}
	if (want_labels && (rc = km_dev_fetch_labels(&w)) != GBML_OK)
		goto done;

	res->centroids = best_c;
	res->s1 = best_s1;
	res->s2 = best_s2;
	best_c = best_s1 = best_s2 = NULL;
	res->tol_scaled = tol_scaled;
	res->n_init = n_init;
	res->best_init = best_init;
	if ((rc = km_fill_result(res, &w, &best_run, want_labels ? ds : NULL)) != GBML_OK)
		goto done;
	res->total_seconds = gbml_now() - t_all;

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

