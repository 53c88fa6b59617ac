/*
 * kmeans_internal.h — the work state of one K-Means fit, shared by the
 * Lloyd loop (kmeans.c), the initialisation (kmeans_init.c) and their
 * device share (kmeans_device.c).
 *
 * The rows are cut twice: into tasks (at most KM_TASK_ROWS rows inside a
 * chunk: the CPU threads' unit of work) and into blocks (runs of whole
 * tasks inside a chunk: the unit the GPU holds and the hybrid mode moves).
 * Blocks [0, gpu_blocks) live on the device, the rest are the CPU's.  Every
 * sum that crosses rows is in fixed point (kmeans_exact.h), so neither the
 * cut, nor the thread count, nor the split between devices changes a bit.
 *
 * The features may be in host memory or in a chunk store (a dataset past
 * its memory budget: temporary files), so no pass reads ds->chunks[c]->x:
 * every pass over the rows goes through km_walk (kmeans_walk.c), which
 * reads the chunks in turn and hands the pass runs of tasks whose features
 * it can reach through km_task_x(); single rows come from km_copy_rows.
 * The per-row state (labels, norms, distances) is always on the host.
 */
#ifndef GBML_KMEANS_INTERNAL_H
#define GBML_KMEANS_INTERNAL_H

#include "kmeans.h"
#include "kmeans_backend.h"
#include "kmeans_balance.h"
#include "kmeans_kernels.h"
#include "backend.h"

#include <math.h>

typedef struct km_task
{
	int			chunk;
	int64_t		start;			/* row inside the chunk */
	int64_t		count;
	int64_t		global;			/* global index of the first row */
} km_task;

typedef struct km_block
{
	int			chunk;
	int64_t		start;			/* row inside the chunk */
	int64_t		count;
	int64_t		global;
	int			first_task;		/* tasks [first_task, end_task) */
	int			end_task;
} km_block;

typedef enum km_mode
{
	KM_MODE_CPU,
	KM_MODE_GPU,				/* every block on the device */
	KM_MODE_HYBRID				/* the split re-balanced every iteration */
} km_mode;

/* What one pass measured. */
typedef struct km_pass_stats
{
	int64_t		changed;
	int64_t		rechecked;
	double		s1;				/* wall seconds attributed to S1 */
	double		gpu_seconds;	/* the device's share */
	double		cpu_seconds;	/* the CPU's share */
} km_pass_stats;

/* A row far from its centroid (the relocation of empty clusters): farther first, then lower row. */
typedef struct km_far
{
	double		dist;
	int64_t		row;			/* global index */
	int32_t		label;
} km_far;

/* The relocation's order: a farther before a nearer, then the lower row first. */
static inline bool
km_far_better(const km_far *a, const km_far *b)
{
	return a->dist > b->dist || (a->dist == b->dist && a->row < b->row);
}

typedef struct km_work km_work;

/*
 * The rows as the Lloyd driver (kmeans.c, kmeans_init.c) sees them: every
 * operation that reads rows, in global row indices, its results exact
 * whatever holds the rows.  km_local_rows works on w's own chunks (memory,
 * files, a GPU); kmeans_shards.c's on rows held by other servers.  The
 * driver's state (centroids w->c, the grids fix_scale / pot_scale /
 * cur_scale, the candidates w->cand) is read from w; each returns GBML_OK
 * or an error.
 */
typedef struct km_rows_ops
{
	/* per-feature min and max of the rows (normalised when spherical) */
	int			(*extents) (km_work *w, double *mn, double *mx);
	/* the driver fixed w->fix_scale: the side that holds the rows learns it */
	int			(*grid_set) (km_work *w);
	/* fixed-point per-feature sums on grid scale[]: of x (mean NULL) or of (x - mean)^2 */
	int			(*feature_sums) (km_work *w, const double *mean, const double *scale, int64_t *sums);
	/* rows g[0..n) into out[n][d] (normalised when spherical) */
	int			(*copy_rows) (km_work *w, const int64_t *g, int n, double *out);
	/* k-means++: every row's closest distance to +inf, room for T candidates */
	int			(*kpp_start) (km_work *w, int T);
	/* distances to the T candidates in w->cand, floored by closest, on grid w->pot_scale: totals[T] */
	int			(*cand_pass) (km_work *w, int T, int64_t *totals);
	/* candidate t of the last pass becomes closest[]; its largest value into *max_out */
	int			(*cand_take) (km_work *w, int t, int T, float *max_out);
	/* per u[i]: the first row whose running closest potential (grid w->cur_scale) exceeds u[i] * total */
	int			(*search) (km_work *w, const double *u, int m, int64_t total, int64_t *rows);
	/* every label to -1 (a new run) */
	int			(*reset_labels) (km_work *w);
	/* labels for w->c, and when `update` the fixed-point sums and counts into w->sums / w->counts */
	int			(*pass) (km_work *w, bool update, km_pass_stats *st);
	/* the *m rows farthest from their centroid in w->c, farthest first, with their rows into out */
	int			(*farthest) (km_work *w, km_far *far, int *m, double *out);
	/* every row's distance to its centroid in w->c: the largest, then their sum on a grid */
	int			(*dist_max) (km_work *w, double *mx);
	int			(*dist_sum) (km_work *w, double scale, int64_t *total);
} km_rows_ops;

extern const km_rows_ops km_local_rows;

struct km_work
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
	int		   *chunk_task;		/* n_chunks + 1: first task of each chunk */
	int			max_slots;		/* CPU partial sums (a function of n, k, d only) */
	int64_t    *chunk_start;	/* global index of each chunk's first row */
	int			nblocks;
	km_block   *blocks;
	int64_t    *rows_before;	/* nblocks + 1: rows of blocks [0, b) */
	int64_t		max_block_rows;

	/*
	 * Rows kept in their written order (dataset.h's rank arrays), or NULL:
	 * the dataset's order is the canonical one.  The ops speak of rows by
	 * canonical position ("global"); the chunks, tasks and per-row arrays
	 * below are in the dataset's order, which only copy_rows, search,
	 * farthest and km_label_of translate.  CPU only.
	 */
	const uint32_t *rank_of_row;
	const uint32_t *row_of_rank;

	int32_t   **labels;			/* per chunk (stale for the device's blocks) */
	double	  **xnorm2;			/* per chunk: |x|^2 */
	double	  **scale;			/* per chunk: 1/|x| (spherical only) */
	double		xnorm_max;

	/* the walk (kmeans_walk.c) */
	const float **chunk_x;		/* per chunk: its features, while km_walk hands its tasks over */
	int		   *walk_order;		/* n_chunks: the chunks a walk reads */
	float	   *fetch_x;		/* fetch_rows x d: rows km_copy_rows fetches */
	int64_t    *fetch_addr;		/* fetch_rows */
	int			fetch_rows;
	gbml_progress_info progress;	/* what a cancel check between chunks reports */

	double	   *c;				/* k x d current centroids */
	double	   *cnew;			/* k x d next centroids */
	int			fix_bits;		/* significant bits of a fixed-point term */
	double	   *fix_scale;		/* d: grid of each feature's centroid sums */
	int64_t    *sums;			/* k x d fixed-point sums of the pass */
	int64_t    *counts;			/* k */
	int64_t    *slot_sums;		/* max_slots x k x d */
	int64_t    *slot_counts;	/* max_slots x k */
	float	   *panels;			/* assignment kernel layouts */
	double	   *panels_d;
	float	   *cnorm;
	double	   *cnorm_d;

	/* k-means++ scratch (allocated on first use) */
	int			T;
	float	  **closest;		/* per chunk (the CPU's blocks) */
	float	  **cand_out;		/* per chunk: T x rows, task-blocked */
	float	   *cand;			/* d x GBML_KM_CAND_LANES, candidate-minor */
	double	   *cand_rows;		/* T x d: the candidates' rows (normalised when spherical) */
	int64_t    *task_pot;		/* ntasks x T: fixed-point partials of the last pass */
	int64_t    *block_pot;		/* nblocks x T */
	int64_t    *cur_pot;		/* nblocks: the potential of the current closest[] */
	float		closest_max;	/* max closest[] (+inf before the first centre) */
	double		pot_scale;		/* grid of the next pass's potentials */
	double		cur_scale;		/* grid of cur_pot (the pass that made closest[]) */
	float	   *row_scratch;	/* max_block_rows: a device block's closest[] */
	int32_t    *label_scratch;	/* max_block_rows: a device block's labels */

	double	  **far;			/* per chunk: each row's distance to its centroid */

	/* the device share */
	km_mode		mode;
	const gbml_backend *gpu;
	const struct gbml_backend_kmeans *ops;
	gbml_gpu_ctx *ctx;
	int			gpu_blocks;		/* blocks [0, gpu_blocks) are on the device */
	int		   *block_ids;		/* 0 .. nblocks-1 */
	gbml_km_balance balance;
	double		gpu_seconds;	/* device time of all passes */
	double		cpu_seconds;	/* CPU time of the CPU's share of all passes */
	int64_t		blocks_moved;	/* block copies between the sides after the start */
	bool		dev_labels_fresh;	/* the device's labels are all -1 (just put) */

	/* where the rows are */
	const km_rows_ops *rows;
	struct km_shards *shards;	/* kmeans_shards.c: rows on other servers */
};

/* kmeans.c: w's shape from ds and p, its rows reached through `rows` (nothing allocated). */
void		km_work_init(km_work *w, const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env,
						 const km_rows_ops *rows);
/* kmeans.c: w over ds's own rows (allocations, tasks, blocks, norms), and its release. */
int			km_setup(km_work *w, const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env);
void		km_work_free(km_work *w);
/* kmeans.c: a per-chunk array (one elem per row, or one per chunk); km_chunks_ok says whether all of it was allocated. */
void	   *km_alloc_chunks(km_work *w, size_t elem, bool per_row);
bool		km_chunks_ok(const km_work *w, void **arr);
/* kmeans.c: threads worth starting for `work` multiply-adds. */
int			km_threads_for(const km_work *w, double work);

/* kmeans_init.c: run r's first centres into w->c by p's init, from the run's own random stream. */
int			km_init_centres(km_work *w, const gbml_kmeans_params *p, int r);
/* k-means++' candidates per step (scikit-learn's 2 + ln k): kmeans_init.c's draw, km_setup's budget */
static inline int
km_kpp_trials(int k)
{
	return 2 + (int) log((double) k);
}

/* kmeans_init.c: k-means++'s operations on this server's rows (km_local_rows; km_rows_ops says what each does). */
int			km_local_kpp_start(km_work *w, int T);
int			km_local_cand_pass(km_work *w, int T, int64_t *totals);
int			km_local_cand_take(km_work *w, int t, int T, float *max_out);
int			km_local_search(km_work *w, const double *u, int m, int64_t total, int64_t *rows);

/*
 * kmeans_model.c: a categorical input's one-hot encoding (one_hot; refused
 * without it, naming the column) and ds and eval encoded (onehot.h);
 * union_counts: by the union's counts across servers (a shard, or its
 * coordinator).
 */
struct gbml_onehot;
int			km_one_hot(const gbml_dataset *ds, const gbml_dataset *eval, const gbml_kmeans_params *p,
					   bool union_counts, gbml_env *env, struct gbml_onehot **enc, gbml_dataset *xds,
					   gbml_dataset *xeval);

/* kmeans_shards.c: w over the rows of the shards behind ds->shards (the coordinator's side). */
int			km_shards_setup(km_work *w, const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env);
void		km_shards_free(km_work *w);
/* What the training exchanged with its shards so far. */
void		km_shards_traffic(const km_work *w, gbml_shard_traffic *out);

/* The first task of the CPU's share. */
static inline int
km_cpu_first_task(const km_work *w)
{
	return w->gpu_blocks < w->nblocks ? w->blocks[w->gpu_blocks].first_task : w->ntasks;
}

/* Rows of tasks [first, end). */
static inline int64_t
km_task_rows(const km_work *w, int first, int end)
{
	return first < end ? w->tasks[end - 1].global + w->tasks[end - 1].count - w->tasks[first].global : 0;
}

/* The features of task tk's rows (valid inside a km_walk callback for its tasks). */
static inline const float *
km_task_x(const km_work *w, const km_task *tk)
{
	return w->chunk_x[tk->chunk] + (size_t) tk->start * (size_t) w->d;
}

/*
 * kmeans_walk.c: the rows wherever they are.
 *
 * km_walk calls fn(w, first, end, arg) on runs of the tasks [t0, t1), in
 * order, each run the tasks of whole chunks (clipped to [t0, t1)) whose
 * features km_task_x reaches until fn returns: a run of chunks in host
 * memory at once, a stored chunk alone, read while the one before is
 * worked on (chunk_prefetch.h).  Between stored chunks it asks
 * gbml_progress (w->progress) whether to stop.  fn runs on the main thread
 * (its OpenMP regions inside) and returns GBML_OK or an error, which ends
 * the walk.  Returns GBML_OK or the first error (a read, a cancel, fn's).
 */
typedef int (*km_walk_fn) (km_work *w, int first, int end, void *arg);
int			km_walk(km_work *w, int t0, int t1, km_walk_fn fn, void *arg);

/* Walk scratch (after km_plan): chunk pointers, chunk order, the fetch buffer. */
int			km_walk_setup(km_work *w);
/* What km_walk_setup allocates (for the budget check before it). */
size_t		km_walk_bytes(const km_work *w);
void		km_walk_free(km_work *w);

/* Chunk and row of row i of the dataset's order (a global row's km_dataset_row). */
void		km_locate(const km_work *w, int64_t i, int *chunk, int64_t *row);

/* The dataset's row of global (canonical) row g. */
static inline int64_t
km_dataset_row(const km_work *w, int64_t g)
{
	return w->row_of_rank ? (int64_t) w->row_of_rank[g] : g;
}

/* The global (canonical) row of row i of the dataset's order. */
static inline int64_t
km_global_row(const km_work *w, int64_t i)
{
	return w->rank_of_row ? (int64_t) w->rank_of_row[i] : i;
}

/* Rows g[0..n) (global indices) into out[n][d] as doubles, times 1/|x| in the spherical mode. */
int			km_copy_rows(km_work *w, const int64_t *g, int n, double *out);

/*
 * kmeans_device.c: the device share.  Each returns GBML_OK or an engine
 * error naming the backend's failure (the budget gets GBML_EGPUBUDGET).
 */

/* Chooses the mode from env and the data; opens the context and moves the GPU's blocks. */
int			km_dev_open(km_work *w);
void		km_dev_close(km_work *w);
int			km_dev_set_centers(km_work *w, const gbml_km_centers *C);
int			km_dev_pass_launch(km_work *w, bool update);
/* Adds the device's counts (and sums) into w->counts / w->sums. */
int			km_dev_pass_finish(km_work *w, int64_t *changed, int64_t *rechecked, double *seconds);
/* Hybrid: the split for the next iteration from this one's timings; moves the blocks that change sides. */
int			km_dev_rebalance(km_work *w, double gpu_seconds, double cpu_seconds);
int			km_dev_cand_reset(km_work *w);
/* pot[b*T + t] for the device's blocks b < gpu_blocks. */
int			km_dev_cand_pass(km_work *w, int T, int64_t *pot);
int			km_dev_cand_take(km_work *w, int t, float *max_out);
int			km_dev_read_closest(km_work *w, int b, float *out);
int			km_dev_read_labels(km_work *w, int b, int32_t *out);
/* The device's labels back to -1 (a new run); the host's labels of its blocks from the device. */
int			km_dev_reset_labels(km_work *w);
int			km_dev_fetch_labels(km_work *w);
/* far[chunk][row] of the device's blocks. */
int			km_dev_row_dists(km_work *w);

#endif
