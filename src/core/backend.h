/*
 * backend.h — the compute backend interface that the CUDA library
 * (cuda/, built into gbml_cuda.so when nvcc exists, and into
 * gbml_cuda_emu.so against the CPU emulation of the CUDA runtime in
 * cuda/emu/) implements, and the loader that finds it at run time.
 *
 * The CPU code paths live in src/core; a backend provides device discovery,
 * a per-training device context that owns every device resource, and the
 * GPU versions of the engine's hot kernels.  A NULL kernel pointer means
 * "not on this backend", and the caller uses the CPU path.  gbml.so never
 * links against CUDA: the library is dlopen()ed on first use in a backend
 * process (never in the postmaster), so a machine without CUDA loads and
 * runs gbml unchanged.
 *
 * Threads: every entry point is called from the PostgreSQL backend's main
 * thread only; the library never calls back into the caller.
 */
#ifndef GBML_BACKEND_H
#define GBML_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GBML_BACKEND_ABI_VERSION 4

typedef struct gbml_device_info
{
	char		name[128];
	size_t		total_memory;
	size_t		free_memory;	/* at the time of the call */
	int			compute_major;
	int			compute_minor;
	int			multiprocessors;
	size_t		shared_per_block;	/* default dynamic shared memory limit per block */
	size_t		shared_per_block_optin; /* the limit after opting in */
	bool		emulated;		/* the CPU emulation, not a card */
} gbml_device_info;

/* What this process holds through the backend right now (leak checks). */
typedef struct gbml_gpu_resources
{
	int64_t		contexts;
	int64_t		device_bytes;
	int64_t		device_allocations;
	int64_t		pinned_bytes;
	int64_t		pinned_allocations;
	int64_t		streams;
	int64_t		events;
} gbml_gpu_resources;

/*
 * One training's device context: every device allocation, pinned host
 * buffer, stream and event it makes belongs to it, counts against its
 * memory budget, and is released by ctx_destroy (which the glue also calls
 * from a MemoryContext reset callback, so ERROR and cancel release it).
 */
typedef struct gbml_gpu_ctx gbml_gpu_ctx;

/* The split feature that tells boost_level and boost_end_tree to split each row by its node's split. */
#define GBML_GPU_SPLIT_BY_NODE (-2)

/* The shape of one boosting training on the device (see boost_histogram.h). */
typedef struct gbml_gpu_boost_shape
{
	int64_t		n_rows;
	int			n_features;
	int64_t		block_rows;		/* rows per bin block; block b is bins[f * len + r] */
	int64_t		n_blocks;
	const int64_t *feat_off;	/* n_features + 1: feature f's bins in a histogram row */
	int64_t		total_bins;
	int			max_slots;		/* most leaves one histogram pass fills */
} gbml_gpu_boost_shape;

struct gbml_boost_hist_bin;

struct gbml_backend
{
	int			abi_version;	/* GBML_BACKEND_ABI_VERSION */
	const char *name;			/* "cuda" or "cuda-emulated" */

	/* Number of usable devices (0 when the driver or the device is absent). */
	int			(*device_count) (void);
	/* Fills info for device id; returns 0 on success. */
	int			(*device_info) (int id, gbml_device_info *info);
	/* Last error text of the backend (static storage): names the CUDA call and its message. */
	const char *(*last_error) (void);
	/* Totals over every live context of this process. */
	void		(*resources) (gbml_gpu_resources *out);

	/*
	 * Kernels that work without a context.  Each mirrors a CPU function of
	 * src/core with the same arguments plus the device id, returns 0 on
	 * success, nonzero on a device error (the caller then reports
	 * last_error()).
	 */

	/* Column sums of a row-major block x[n][d] (float) added into sums[d] (double). */
	int			(*column_sums) (int device, const float *x, int64_t n, int d, double *sums);

	/*
	 * Contexts.  ctx_create returns NULL (reason in last_error) when the
	 * device cannot be used; memory_limit 0 means the default share of the
	 * device's free memory.  A request over the budget fails with a message
	 * that gives the figures; ctx_over_budget tells it from a CUDA error.
	 */
	gbml_gpu_ctx *(*ctx_create) (int device, size_t memory_limit);
	void		(*ctx_destroy) (gbml_gpu_ctx *ctx);
	size_t		(*ctx_memory_limit) (const gbml_gpu_ctx *ctx);
	size_t		(*ctx_memory_peak) (const gbml_gpu_ctx *ctx);
	bool		(*ctx_over_budget) (const gbml_gpu_ctx *ctx);
	/* Host-to-device bytes copied and seconds spent waiting for the device. */
	void		(*ctx_transfer_stats) (const gbml_gpu_ctx *ctx, double *h2d_bytes, double *wait_seconds);

	/*
	 * Boosting (boost.c drives; boost_histogram.h defines the arithmetic).
	 *
	 * boost_begin allocates the device bins, row state and histograms for
	 * `shape`; boost_put_bins streams one feature-major bin block to the
	 * device through a ring of pinned buffers (returns before the copy is
	 * done; the caller may reuse `bins` at once).
	 *
	 * Per tree: boost_begin_tree uploads the rows' leaf indices (0 or
	 * GBML_BOOST_UNSAMPLED) and fixed-point gradients (hq NULL: packed);
	 * boost_level applies the previous level's split (level > 0) to every
	 * row's leaf index and writes the histograms of the n_slots slots
	 * (rows r with slot_of[leaf[r]] = s >= 0) into hist (n_slots x
	 * total_bins, packed sums when hq was NULL) — the same sums as
	 * gbml_boost_hist_block over every block; boost_end_tree applies the
	 * tree's last split and copies every row's leaf index to leaf_out.
	 * boost_tree_leaves computes the leaf index of a whole tree (depth
	 * levels of features and border indices) for every row into leaf_out.
	 *
	 * Trees with a split per node (grow_policy Depthwise): boost_nodes
	 * uploads the node splits of a tree's first `levels` levels, in the
	 * forest's layout (level l's nodes from 2^l - 1, node k holding the
	 * rows whose leaf bits so far are k; set_masks NULL or
	 * GBML_BOOST_SET_MASK_BYTES a node), each a (feature, border index)
	 * with gbml_boost_bin_goes_right's rule.  Until the next boost_nodes,
	 * boost_level and boost_end_tree given the feature
	 * GBML_GPU_SPLIT_BY_NODE split each row by its node's split (as
	 * gbml_boost_leaf_update_nodes), and boost_tree_leaves given NULL
	 * features walks the nodes from the root.
	 */
	int			(*boost_begin) (gbml_gpu_ctx *ctx, const gbml_gpu_boost_shape *shape);
	int			(*boost_put_bins) (gbml_gpu_ctx *ctx, int64_t block, const uint8_t *bins, int64_t len);
	int			(*boost_begin_tree) (gbml_gpu_ctx *ctx, const uint16_t *leaf, const int64_t *gq,
									 const int64_t *hq);
	int			(*boost_level) (gbml_gpu_ctx *ctx, int level, int prev_feature, int prev_border,
								const int16_t *slot_of, int n_slots, struct gbml_boost_hist_bin *hist);
	int			(*boost_end_tree) (gbml_gpu_ctx *ctx, int level, int feature, int border,
								   uint16_t *leaf_out);
	int			(*boost_tree_leaves) (gbml_gpu_ctx *ctx, int depth, const int32_t *features,
									  const int32_t *borders, uint16_t *leaf_out);
	int			(*boost_nodes) (gbml_gpu_ctx *ctx, int levels, const int32_t *features,
								const int32_t *borders, const uint8_t *set_masks);
	/* Frees what boost_begin allocated (a context that outlives the training keeps nothing). */
	void		(*boost_end) (gbml_gpu_ctx *ctx);

	/*
	 * The chunk store: dataset chunks resident on the device (dataset.h).
	 * chunk_buffer hands out a pinned host buffer for the next chunk's
	 * features (one of a ring of two; it waits until that buffer's last
	 * copy has run), chunk_put stores the filled buffer (or any host
	 * memory) as the next chunk, asynchronously when it is the ring's.
	 * Rows are addressed chunk << 32 | row.  chunk_fetch copies rows to the
	 * host; chunk_permute replaces the chunks with the listed rows in that
	 * order (first chunk first_rows rows, then chunk_rows each);
	 * chunk_release frees them all.  boost_bin_rows (after boost_begin)
	 * fills the device bins of training row i from stored row src[i] with
	 * the given borders (boost_quantize.h's bin of a value).
	 */
	float	   *(*chunk_buffer) (gbml_gpu_ctx *ctx, int64_t rows, int n_features);
	int			(*chunk_put) (gbml_gpu_ctx *ctx, const float *x, int64_t n_rows, int n_features);
	int			(*chunk_fetch) (gbml_gpu_ctx *ctx, const int64_t *src, int64_t n, float *out);
	/* Copies stored chunk `index` to out as it is (no device memory needed: for running out of room). */
	int			(*chunk_read) (gbml_gpu_ctx *ctx, int index, float *out);
	int			(*chunk_permute) (gbml_gpu_ctx *ctx, const int64_t *src, int64_t n, int64_t first_rows,
								  int64_t chunk_rows);
	void		(*chunk_release) (gbml_gpu_ctx *ctx);
	/* out[f] = 1 when a stored row has NaN or -Infinity in feature f, else 0. */
	int			(*chunk_missing) (gbml_gpu_ctx *ctx, uint8_t *out);
	int			(*boost_bin_rows) (gbml_gpu_ctx *ctx, const int64_t *src, const int *border_count,
								   const int64_t *border_off, const float *border_values);

	/* K-Means (kmeans_backend.h) and SAGA (saga_backend.h); NULL: not on this backend. */
	const struct gbml_backend_kmeans *kmeans;
	const struct gbml_backend_saga *saga;
};

typedef struct gbml_backend gbml_backend;

/* The entry point gbml_cuda.so (and gbml_cuda_emu.so) exports. */
typedef const struct gbml_backend *(*gbml_backend_entry_fn) (void);
#define GBML_BACKEND_ENTRY "gbml_cuda_backend"

/*
 * Loads the backend library at `path` once per process and path; returns
 * NULL (with a reason in errbuf) when it is absent or unusable.  Not
 * thread-safe: call from the backend's main thread only.
 */
const struct gbml_backend *gbml_backend_load(const char *path, char *errbuf, size_t errlen);

/* CPU reference of column_sums, shared by the mean model and the GPU checks. */
void		gbml_cpu_column_sums(const float *x, int64_t n, int d, double *sums);

#endif
