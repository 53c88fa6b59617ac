/*
 * gpu_context.cu — per-training device contexts: creation on a device with
 * a memory budget, tracked allocations (device, pinned, events, streams) released
 * together by gpu_ctx_destroy, and the backend's error text.
 *
 * The budget is checked before every cudaMalloc, so a training that would
 * not fit fails with the figures (and the glue's hint) instead of a CUDA
 * out-of-memory in the middle of a tree.
 */
#include "gpu_context.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Default budget: this share of the device's free memory at context creation. */
#define DEFAULT_BUDGET_SHARE 0.8

static char last_error_text[512];
static gbml_gpu_ctx *live_contexts;

/*
 * After a failure, let everything already queued run (or be dropped with a
 * broken context) before the call returns: the caller frees its buffers
 * once it sees the error, and a copy still queued from or into them would
 * touch freed memory later.  Twice, in case the first attempt fails too.
 */
static void
drain_after_failure(void)
{
	for (int i = 0; i < 2; i++)
	{
		(void) cudaGetLastError();
		if (cudaDeviceSynchronize() == cudaSuccess)
			break;
	}
	(void) cudaGetLastError();
}

int
gpu_check(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return 0;
	snprintf(last_error_text, sizeof(last_error_text), "%s failed: %s (%s)", what,
			 cudaGetErrorString(err), cudaGetErrorName(err));
	drain_after_failure();
	return 1;
}

int
gpu_fail(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(last_error_text, sizeof(last_error_text), fmt, ap);
	va_end(ap);
	drain_after_failure();
	return 1;
}

const char *
gpu_last_error(void)
{
	return last_error_text[0] ? last_error_text : "no error";
}

static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

gbml_gpu_ctx *
gpu_ctx_create(int device, size_t memory_limit)
{
	gbml_gpu_ctx *ctx;
	size_t		free_b = 0,
				total_b = 0;

	if (gpu_check(cudaSetDevice(device), "cudaSetDevice") ||
		gpu_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"))
		return NULL;
	ctx = (gbml_gpu_ctx *) calloc(1, sizeof(gbml_gpu_ctx));
	if (ctx == NULL)
	{
		gpu_fail("out of host memory for a GPU context");
		return NULL;
	}
	ctx->device = device;
	ctx->memory_limit = memory_limit ? memory_limit : (size_t) ((double) free_b * DEFAULT_BUDGET_SHARE);
	if (gpu_check(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"))
	{
		free(ctx);
		return NULL;
	}
	ctx->next_live = live_contexts;
	live_contexts = ctx;
	return ctx;
}

static int
track(gbml_gpu_ctx *ctx, gpu_resource_kind kind, void *ptr, size_t bytes)
{
	if (ctx->n_res == ctx->cap_res)
	{
		int			cap = ctx->cap_res ? ctx->cap_res * 2 : 16;
		gpu_resource *r = (gpu_resource *) realloc(ctx->res, sizeof(gpu_resource) * (size_t) cap);

		if (r == NULL)
			return gpu_fail("out of host memory tracking GPU allocations");
		ctx->res = r;
		ctx->cap_res = cap;
	}
	ctx->res[ctx->n_res].kind = kind;
	ctx->res[ctx->n_res].ptr = ptr;
	ctx->res[ctx->n_res].bytes = bytes;
	ctx->n_res++;
	return 0;
}

static void
free_resource(gbml_gpu_ctx *ctx, const gpu_resource *r)
{
	switch (r->kind)
	{
		case GPU_RES_DEVICE:
			cudaFree(r->ptr);
			ctx->memory_used -= r->bytes;
			break;
		case GPU_RES_PINNED:
			cudaFreeHost(r->ptr);
			break;
		case GPU_RES_EVENT:
			cudaEventDestroy((cudaEvent_t) r->ptr);
			break;
		case GPU_RES_STREAM:
			cudaStreamDestroy((cudaStream_t) r->ptr);
			break;
	}
}

void *
gpu_alloc_device(gbml_gpu_ctx *ctx, size_t bytes, const char *what)
{
	void	   *p = NULL;

	ctx->over_budget = false;
	if (bytes == 0)
		bytes = 1;
	if (ctx->memory_used + bytes > ctx->memory_limit)
	{
		ctx->over_budget = true;
		gpu_fail("GPU memory budget exceeded: %s need %.3f MB more, %.3f MB held, limit %.3f MB",
				 what, (double) bytes / 1048576.0, (double) ctx->memory_used / 1048576.0,
				 (double) ctx->memory_limit / 1048576.0);
		return NULL;
	}
	if (gpu_check(cudaMalloc(&p, bytes), "cudaMalloc"))
		return NULL;
	if (track(ctx, GPU_RES_DEVICE, p, bytes))
	{
		cudaFree(p);
		return NULL;
	}
	ctx->memory_used += bytes;
	if (ctx->memory_used > ctx->memory_peak)
		ctx->memory_peak = ctx->memory_used;
	return p;
}

void *
gpu_alloc_pinned(gbml_gpu_ctx *ctx, size_t bytes, const char *what)
{
	void	   *p = NULL;

	(void) what;
	if (gpu_check(cudaMallocHost(&p, bytes), "cudaMallocHost"))
		return NULL;
	if (track(ctx, GPU_RES_PINNED, p, bytes))
	{
		cudaFreeHost(p);
		return NULL;
	}
	return p;
}

static cudaEvent_t
tracked_event(gbml_gpu_ctx *ctx, unsigned int flags)
{
	cudaEvent_t ev = NULL;

	if (gpu_check(cudaEventCreateWithFlags(&ev, flags), "cudaEventCreateWithFlags"))
		return NULL;
	if (track(ctx, GPU_RES_EVENT, (void *) ev, 0))
	{
		cudaEventDestroy(ev);
		return NULL;
	}
	return ev;
}

cudaEvent_t
gpu_event(gbml_gpu_ctx *ctx)
{
	return tracked_event(ctx, cudaEventDisableTiming);
}

cudaEvent_t
gpu_timing_event(gbml_gpu_ctx *ctx)
{
	return tracked_event(ctx, cudaEventDefault);
}

cudaStream_t
gpu_stream(gbml_gpu_ctx *ctx)
{
	cudaStream_t s = NULL;

	if (gpu_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"))
		return NULL;
	if (track(ctx, GPU_RES_STREAM, (void *) s, 0))
	{
		cudaStreamDestroy(s);
		return NULL;
	}
	return s;
}

void
gpu_release(gbml_gpu_ctx *ctx, void *ptr)
{
	for (int i = 0; i < ctx->n_res; i++)
		if (ctx->res[i].ptr == ptr)
		{
			free_resource(ctx, &ctx->res[i]);
			ctx->res[i] = ctx->res[--ctx->n_res];
			return;
		}
}

void
gpu_ctx_destroy(gbml_gpu_ctx *ctx)
{
	gbml_gpu_ctx **pp;

	if (ctx == NULL)
		return;
	/* nothing may still read or write what is about to be freed */
	cudaSetDevice(ctx->device);
	cudaStreamSynchronize(ctx->stream);
	for (int i = 0; i < ctx->n_res; i++)
		if (ctx->res[i].kind == GPU_RES_STREAM)
			cudaStreamSynchronize((cudaStream_t) ctx->res[i].ptr);
	(void) cudaGetLastError();
	for (int i = ctx->n_res - 1; i >= 0; i--)
		free_resource(ctx, &ctx->res[i]);
	free(ctx->res);
	cudaStreamDestroy(ctx->stream);
	(void) cudaGetLastError();
	for (pp = &live_contexts; *pp; pp = &(*pp)->next_live)
		if (*pp == ctx)
		{
			*pp = ctx->next_live;
			break;
		}
	free(ctx->boost);
	gpu_chunk_state_free(ctx);
	gpu_saga_state_free(ctx);
	gpu_kmeans_state_free(ctx);
	free(ctx);
}

void
gpu_resources(gbml_gpu_resources *out)
{
	memset(out, 0, sizeof(*out));
	for (gbml_gpu_ctx *c = live_contexts; c; c = c->next_live)
	{
		out->contexts++;
		out->streams++;
		for (int i = 0; i < c->n_res; i++)
			switch (c->res[i].kind)
			{
				case GPU_RES_DEVICE:
					out->device_allocations++;
					out->device_bytes += (int64_t) c->res[i].bytes;
					break;
				case GPU_RES_PINNED:
					out->pinned_allocations++;
					out->pinned_bytes += (int64_t) c->res[i].bytes;
					break;
				case GPU_RES_EVENT:
					out->events++;
					break;
				case GPU_RES_STREAM:
					out->streams++;
					break;
			}
	}
}

int
gpu_sync(gbml_gpu_ctx *ctx, const char *what)
{
	double		t0 = now_seconds();
	int			rc = gpu_check(cudaStreamSynchronize(ctx->stream), what);

	ctx->wait_seconds += now_seconds() - t0;
	return rc;
}

int
gpu_upload(gbml_gpu_ctx *ctx, void *dst, const void *src, size_t bytes, const char *what)
{
	ctx->h2d_bytes += (double) bytes;
	return gpu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream), what);
}
