/*
 * backend.cu — gbml's CUDA backend: device discovery, the column-sum kernel
 * and the entry table (src/core/backend.h) that exports the contexts
 * (gpu_context.cu), the boosting kernels (boost_device.cu) and the K-Means
 * table (kmeans_device.cu).  Built into
 * gbml_cuda.so only when nvcc exists, and into gbml_cuda_emu.so against the
 * CPU emulation of the runtime (cuda/emu); dlopen()ed by gbml.so on first
 * use, so the extension never needs CUDA to load.
 *
 * Kernels mirror CPU functions of src/core with the same arguments; the GPU
 * checks (tests/gpu/gpu_check.c, on the emulation in `make test` and on a
 * card in tests/gpu/run.sh) compare the two on the same inputs.
 */
#include "gpu_context.h"
#include "kmeans_device.h"
#include "saga_device.h"

#include <stdio.h>
#include <string.h>

/* boost_device.cu */
extern "C" int gpu_boost_begin(gbml_gpu_ctx *ctx, const gbml_gpu_boost_shape *shape);
extern "C" int gpu_boost_put_bins(gbml_gpu_ctx *ctx, int64_t block, const uint8_t *bins, int64_t len);
extern "C" int gpu_boost_begin_tree(gbml_gpu_ctx *ctx, const uint16_t *leaf, const int64_t *gq, const int64_t *hq);
extern "C" int gpu_boost_level(gbml_gpu_ctx *ctx, int level, int prev_feature, int prev_border,
							   const int16_t *slot_of, int n_slots, struct gbml_boost_hist_bin *hist);
extern "C" int gpu_boost_end_tree(gbml_gpu_ctx *ctx, int level, int feature, int border, uint16_t *leaf_out);
extern "C" int gpu_boost_tree_leaves(gbml_gpu_ctx *ctx, int depth, const int32_t *features,
									 const int32_t *borders, uint16_t *leaf_out);
extern "C" int gpu_boost_nodes(gbml_gpu_ctx *ctx, int levels, const int32_t *features, const int32_t *borders,
							   const uint8_t *set_masks);
extern "C" void gpu_boost_end(gbml_gpu_ctx *ctx);
extern "C" int gpu_boost_bin_rows(gbml_gpu_ctx *ctx, const int64_t *src, const int *border_count,
								  const int64_t *border_off, const float *border_values);

/* chunk_store.cu */
extern "C" float *gpu_chunk_buffer(gbml_gpu_ctx *ctx, int64_t rows, int n_features);
extern "C" int gpu_chunk_put(gbml_gpu_ctx *ctx, const float *x, int64_t n_rows, int n_features);
extern "C" int gpu_chunk_fetch(gbml_gpu_ctx *ctx, const int64_t *src, int64_t n, float *out);
extern "C" int gpu_chunk_read(gbml_gpu_ctx *ctx, int index, float *out);
extern "C" int gpu_chunk_permute(gbml_gpu_ctx *ctx, const int64_t *src, int64_t n, int64_t first_rows,
								 int64_t chunk_rows);
extern "C" void gpu_chunk_release(gbml_gpu_ctx *ctx);
extern "C" int gpu_chunk_missing(gbml_gpu_ctx *ctx, uint8_t *out);

static int
cuda_device_count(void)
{
	int			n = 0;

	if (gpu_check(cudaGetDeviceCount(&n), "cudaGetDeviceCount"))
		return 0;
	return n;
}

static int
cuda_device_info(int id, gbml_device_info *info)
{
	cudaDeviceProp prop;

	if (gpu_check(cudaGetDeviceProperties(&prop, id), "cudaGetDeviceProperties"))
		return 1;
	memset(info, 0, sizeof(*info));
	{
		size_t		n = strnlen(prop.name, sizeof(info->name) - 1);

		memcpy(info->name, prop.name, n);
		info->name[n] = '\0';
	}
	info->total_memory = prop.totalGlobalMem;
	info->compute_major = prop.major;
	info->compute_minor = prop.minor;
	info->multiprocessors = prop.multiProcessorCount;
	info->shared_per_block = prop.sharedMemPerBlock;
	info->shared_per_block_optin = prop.sharedMemPerBlockOptin;
	info->emulated = GBML_CUDA_EMULATED;
	{
		size_t		free_b = 0,
					total_b = 0;

		if (gpu_check(cudaSetDevice(id), "cudaSetDevice") ||
			gpu_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"))
			return 1;
		info->free_memory = free_b;
	}
	return 0;
}

static const char *
cuda_last_error(void)
{
	return gpu_last_error();
}

/*
 * Column sums: one thread block per 32-column slice, threads stride over rows
 * and reduce in shared memory, accumulating in double like the CPU version.
 */
__global__ static void
column_sums_kernel(const float *x, long long n, int d, double *sums)
{
	__shared__ double partial[8][32];
	int			col = blockIdx.x * 32 + threadIdx.x;
	double		acc = 0.0;

	if (col < d)
		for (long long i = threadIdx.y; i < n; i += blockDim.y)
			acc += x[i * d + col];
	partial[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y == 0 && col < d)
	{
		double		total = 0.0;

		for (int k = 0; k < (int) blockDim.y; k++)
			total += partial[k][threadIdx.x];
		sums[col] += total;
	}
}

static int
cuda_column_sums(int device, const float *x, int64_t n, int d, double *sums)
{
	float	   *dx = NULL;
	double	   *dsums = NULL;
	size_t		xbytes = (size_t) n * (size_t) d * sizeof(float);
	int			rc = 1;
	dim3		block(32, 8);
	dim3		grid((d + 31) / 32);

	if (gpu_check(cudaSetDevice(device), "cudaSetDevice"))
		return 1;
	if (gpu_check(cudaMalloc(&dx, xbytes), "cudaMalloc") ||
		gpu_check(cudaMalloc(&dsums, sizeof(double) * d), "cudaMalloc") ||
		gpu_check(cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice), "cudaMemcpy") ||
		gpu_check(cudaMemcpy(dsums, sums, sizeof(double) * d, cudaMemcpyHostToDevice), "cudaMemcpy"))
		goto done;
	GBML_LAUNCH(column_sums_kernel, grid, block, 0, 0, dx, (long long) n, d, dsums);
	if (gpu_check(cudaGetLastError(), "column_sums_kernel") ||
		gpu_check(cudaMemcpy(sums, dsums, sizeof(double) * d, cudaMemcpyDeviceToHost), "cudaMemcpy"))
		goto done;
	rc = 0;
done:
	cudaFree(dx);
	cudaFree(dsums);
	return rc;
}

static size_t
ctx_memory_limit(const gbml_gpu_ctx *ctx)
{
	return ctx->memory_limit;
}

static size_t
ctx_memory_peak(const gbml_gpu_ctx *ctx)
{
	return ctx->memory_peak;
}

static bool
ctx_over_budget(const gbml_gpu_ctx *ctx)
{
	return ctx->over_budget;
}

static void
ctx_transfer_stats(const gbml_gpu_ctx *ctx, double *h2d_bytes, double *wait_seconds)
{
	*h2d_bytes = ctx->h2d_bytes;
	*wait_seconds = ctx->wait_seconds;
}

static const struct gbml_backend cuda_backend = {
	GBML_BACKEND_ABI_VERSION,
	GBML_CUDA_EMULATED ? "cuda-emulated" : "cuda",
	cuda_device_count,
	cuda_device_info,
	cuda_last_error,
	gpu_resources,
	cuda_column_sums,
	gpu_ctx_create,
	gpu_ctx_destroy,
	ctx_memory_limit,
	ctx_memory_peak,
	ctx_over_budget,
	ctx_transfer_stats,
	gpu_boost_begin,
	gpu_boost_put_bins,
	gpu_boost_begin_tree,
	gpu_boost_level,
	gpu_boost_end_tree,
	gpu_boost_tree_leaves,
	gpu_boost_nodes,
	gpu_boost_end,
	gpu_chunk_buffer,
	gpu_chunk_put,
	gpu_chunk_fetch,
	gpu_chunk_read,
	gpu_chunk_permute,
	gpu_chunk_release,
	gpu_chunk_missing,
	gpu_boost_bin_rows,
	&gpu_kmeans_backend,
	&gpu_saga_backend,
};

extern "C" __attribute__((visibility("default"))) const struct gbml_backend *
gbml_cuda_backend(void)
{
	return &cuda_backend;
}
