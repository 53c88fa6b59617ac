/*
 * gpu_context.h — one training's device context (gbml_gpu_ctx of
 * src/core/backend.h): the device it runs on, its stream, the memory budget,
 * and the list of every device allocation, pinned buffer, event and extra
 * stream it made, so that destroying the context releases them all (the
 * glue destroys it on ERROR and cancel through a MemoryContext reset
 * callback).
 *
 * Also the backend's error reporting: every CUDA call goes through
 * gpu_check(), which keeps "the call: the CUDA message" as the text that
 * last_error() returns and the caller puts in its ERROR.
 */
#ifndef GBML_CUDA_GPU_CONTEXT_H
#define GBML_CUDA_GPU_CONTEXT_H

#include "compat.h"

extern "C" {
#include "backend.h"
}

#include <stddef.h>
#include <stdint.h>

struct gpu_boost_state;
struct gpu_chunk_state;
struct gpu_saga_state;
struct gpu_kmeans_state;

/* One tracked resource of a context. */
typedef enum gpu_resource_kind
{
	GPU_RES_DEVICE,
	GPU_RES_PINNED,
	GPU_RES_EVENT,
	GPU_RES_STREAM
} gpu_resource_kind;

typedef struct gpu_resource
{
	gpu_resource_kind kind;
	void	   *ptr;
	size_t		bytes;
} gpu_resource;

struct gbml_gpu_ctx
{
	int			device;
	cudaStream_t stream;
	size_t		memory_limit;	/* bytes of device memory this context may hold */
	size_t		memory_used;
	size_t		memory_peak;
	bool		over_budget;	/* the last failure was the budget, not CUDA */
	gpu_resource *res;			/* live resources, unordered */
	int			n_res;
	int			cap_res;
	double		h2d_bytes;		/* bytes copied host -> device */
	double		wait_seconds;	/* time spent waiting on the device */
	struct gpu_boost_state *boost;
	struct gpu_chunk_state *chunks;	/* stored dataset chunks (chunk_store.cu) */
	struct gpu_saga_state *saga;	/* a SAGA training (saga_device.cu) */
	struct gpu_kmeans_state *kmeans;	/* a K-Means fit's device state (kmeans_device.cu) */
	gbml_gpu_ctx *next_live;	/* the process's list of live contexts */
};

/* 0 on success; else records "what: CUDA message" for last_error() and returns 1. */
int			gpu_check(cudaError_t err, const char *what);
/* Records a message of the backend's own (budget, bad arguments); returns 1. */
int			gpu_fail(const char *fmt,...) __attribute__((format(printf, 1, 2)));
const char *gpu_last_error(void);

gbml_gpu_ctx *gpu_ctx_create(int device, size_t memory_limit);
void		gpu_ctx_destroy(gbml_gpu_ctx *ctx);
void		gpu_resources(gbml_gpu_resources *out);

/* Device memory under the context's budget; NULL on failure (error recorded). */
void	   *gpu_alloc_device(gbml_gpu_ctx *ctx, size_t bytes, const char *what);
/* Pinned host memory, tracked like device memory but outside the device budget. */
void	   *gpu_alloc_pinned(gbml_gpu_ctx *ctx, size_t bytes, const char *what);
cudaEvent_t gpu_event(gbml_gpu_ctx *ctx);
/* An event that records a time stamp (cudaEventElapsedTime), tracked like gpu_event's. */
cudaEvent_t gpu_timing_event(gbml_gpu_ctx *ctx);
/* A second stream (copies beside the context's stream), released with the context. */
cudaStream_t gpu_stream(gbml_gpu_ctx *ctx);
/* Frees one tracked resource (device, pinned, event or stream) now. */
void		gpu_release(gbml_gpu_ctx *ctx, void *ptr);

/* Frees the chunk store's host-side state (chunk_store.cu). */
extern "C" void gpu_chunk_state_free(gbml_gpu_ctx *ctx);
/* Frees a SAGA training's host-side state (saga_device.cu). */
extern "C" void gpu_saga_state_free(gbml_gpu_ctx *ctx);
/* Frees the K-Means fit's host-side state (kmeans_device.cu). */
extern "C" void gpu_kmeans_state_free(gbml_gpu_ctx *ctx);
/* Bins of the training rows from the stored chunks into d_bins (chunk_store.cu). */
extern "C" int gpu_chunk_bin_rows(gbml_gpu_ctx *ctx, uint8_t *d_bins, const int64_t *src, int64_t n,
								  int64_t block_rows, const int *border_count, const int64_t *border_off,
								  const float *border_values);

/* Waits for the context's stream, counting the time as waiting. */
int			gpu_sync(gbml_gpu_ctx *ctx, const char *what);
/* Host -> device on the context's stream (asynchronous; counts the bytes). */
int			gpu_upload(gbml_gpu_ctx *ctx, void *dst, const void *src, size_t bytes, const char *what);

#endif
