/*
 * backend.cu — gbml's CUDA backend: device discovery and the GPU versions of
 * the engine's kernels, exported as one entry table (src/core/backend.h).
 * Built into gbml_cuda.so only when nvcc exists, and dlopen()ed by gbml.so
 * on first use, so the extension never needs CUDA to load.
 *
 * Kernels mirror CPU functions of src/core with the same arguments; the GPU
 * checks (tests/gpu) compare the two on the same inputs.
 */
extern "C" {
#include "backend.h"
}

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

static char last_error_text[256];

static int
record(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return 0;
	snprintf(last_error_text, sizeof(last_error_text), "%s: %s", what, cudaGetErrorString(err));
	return 1;
}

static int
cuda_device_count(void)
{
	int			n = 0;

	if (record(cudaGetDeviceCount(&n), "cudaGetDeviceCount"))
		return 0;
	return n;
}

static int
cuda_device_info(int id, gbml_device_info *info)
{
	cudaDeviceProp prop;

	if (record(cudaGetDeviceProperties(&prop, id), "cudaGetDeviceProperties"))
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
	return 0;
}

static const char *
cuda_last_error(void)
{
	return last_error_text[0] ? last_error_text : "no error";
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

	if (record(cudaSetDevice(device), "cudaSetDevice"))
		return 1;
	if (record(cudaMalloc(&dx, xbytes), "cudaMalloc") ||
		record(cudaMalloc(&dsums, sizeof(double) * d), "cudaMalloc") ||
		record(cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice), "cudaMemcpy") ||
		record(cudaMemcpy(dsums, sums, sizeof(double) * d, cudaMemcpyHostToDevice), "cudaMemcpy"))
		goto done;
	column_sums_kernel<<<grid, block>>>(dx, (long long) n, d, dsums);
	if (record(cudaGetLastError(), "column_sums_kernel") ||
		record(cudaMemcpy(sums, dsums, sizeof(double) * d, cudaMemcpyDeviceToHost), "cudaMemcpy"))
		goto done;
	rc = 0;
done:
	cudaFree(dx);
	cudaFree(dsums);
	return rc;
}

static const struct gbml_backend cuda_backend = {
	GBML_BACKEND_ABI_VERSION,
	"cuda",
	cuda_device_count,
	cuda_device_info,
	cuda_last_error,
	cuda_column_sums,
};

extern "C" __attribute__((visibility("default"))) const struct gbml_backend *
gbml_cuda_backend(void)
{
	return &cuda_backend;
}
