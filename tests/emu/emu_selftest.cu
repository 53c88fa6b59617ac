/*
 * emu_selftest.cu — checks that the CPU emulation of the CUDA runtime
 * (cuda/emu) behaves like CUDA where the backend relies on it, and that it
 * makes the usual GPU bugs (a missing barrier, a missing stream
 * synchronization, an out-of-bounds write, a host pointer handed to a
 * kernel) fail visibly.  Each check would fail on a wrong emulation.
 *
 * Built by tests/emu/Makefile with g++ as C++ (-DGBML_CUDA_EMU); prints one
 * "ok - ..." or "not ok - ..." line per check, then "N passed, N failed".
 */
#include "compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int	n_passed;
static int	n_failed;

static void
check(bool cond, const char *name)
{
	if (cond)
		n_passed++;
	else
		n_failed++;
	printf("%s - %s\n", cond ? "ok" : "not ok", name);
	if (!cond && strcmp(gbml_emu_error_detail(), "no error") != 0)
		printf("#   emulator detail: %s\n", gbml_emu_error_detail());
}

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

/* ---- block barriers ---- */

__global__ static void
reduce_sync(const int *in, long long *out)
{
	__shared__ long long s[256];
	unsigned int t = threadIdx.x;

	s[t] = in[blockIdx.x * 256 + t];
	__syncthreads();
	for (unsigned int stride = 128; stride > 0; stride >>= 1)
	{
		if (t < stride)
			s[t] += s[t + stride];
		__syncthreads();
	}
	if (t == 0)
		out[blockIdx.x] = s[0];
}

/* The same reduction with the barriers forgotten. */
__global__ static void
reduce_nosync(const int *in, long long *out)
{
	__shared__ long long s[256];
	unsigned int t = threadIdx.x;

	s[t] = in[blockIdx.x * 256 + t];
	for (unsigned int stride = 128; stride > 0; stride >>= 1)
		if (t < stride)
			s[t] += s[t + stride];
	if (t == 0)
		out[blockIdx.x] = s[0];
}

__global__ static void
barrier_votes(int *out)
{
	unsigned int t = threadIdx.x;
	int			count = __syncthreads_count(t % 3 == 0);
	int			any = __syncthreads_or(t == 77);
	int			all_true = __syncthreads_and(t < 1000);
	int			all_false = __syncthreads_and(t != 5);

	if (t == 0)
	{
		out[0] = count;
		out[1] = any;
		out[2] = all_true;
		out[3] = all_false;
	}
}

/* Threads that return early do not hold up the barrier of the others. */
__global__ static void
early_exit(int *out)
{
	__shared__ int s[64];

	if (threadIdx.x >= 32)
		return;
	s[threadIdx.x] = (int) threadIdx.x;
	__syncthreads();
	out[threadIdx.x] = s[31 - threadIdx.x];
}

static void
test_barriers(void)
{
	const int	blocks = 16;
	int		   *h = (int *) malloc(sizeof(int) * blocks * 256);
	long long	expect[blocks];
	long long	got[blocks];
	int		   *din;
	long long  *dout;
	int		   *dvotes;
	int			votes[4];
	bool		all_right = true;
	bool		some_wrong = false;

	for (int b = 0; b < blocks; b++)
	{
		expect[b] = 0;
		for (int t = 0; t < 256; t++)
		{
			h[b * 256 + t] = (b + 1) * 1000 + t * 7;
			expect[b] += h[b * 256 + t];
		}
	}
	cudaMalloc(&din, sizeof(int) * blocks * 256);
	cudaMalloc(&dout, sizeof(long long) * blocks);
	cudaMemcpy(din, h, sizeof(int) * blocks * 256, cudaMemcpyHostToDevice);

	GBML_LAUNCH(reduce_sync, blocks, 256, 0, 0, din, dout);
	check(cudaDeviceSynchronize() == cudaSuccess, "barrier reduction runs");
	cudaMemcpy(got, dout, sizeof(got), cudaMemcpyDeviceToHost);
	for (int b = 0; b < blocks; b++)
		all_right &= got[b] == expect[b];
	check(all_right, "block reduction with __syncthreads gives the right sums");

	GBML_LAUNCH(reduce_nosync, blocks, 256, 0, 0, din, dout);
	check(cudaDeviceSynchronize() == cudaSuccess, "reduction without barriers runs");
	cudaMemcpy(got, dout, sizeof(got), cudaMemcpyDeviceToHost);
	for (int b = 0; b < blocks; b++)
		some_wrong |= got[b] != expect[b];
	check(some_wrong, "the same reduction without __syncthreads gives wrong sums");

	cudaMalloc(&dvotes, sizeof(votes));
	GBML_LAUNCH(barrier_votes, 1, 256, 0, 0, dvotes);
	cudaMemcpy(votes, dvotes, sizeof(votes), cudaMemcpyDeviceToHost);
	check(votes[0] == 86 && votes[1] == 1 && votes[2] == 1 && votes[3] == 0,
		  "__syncthreads_count/_or/_and");

	{
		int			out[32];
		int		   *dearly;
		bool		ok = true;

		cudaMalloc(&dearly, sizeof(out));
		GBML_LAUNCH(early_exit, 1, 64, 0, 0, dearly);
		ok = cudaMemcpy(out, dearly, sizeof(out), cudaMemcpyDeviceToHost) == cudaSuccess;
		for (int i = 0; i < 32; i++)
			ok &= out[i] == 31 - i;
		check(ok, "__syncthreads waits only for threads that have not returned");
		cudaFree(dearly);
	}
	cudaFree(din);
	cudaFree(dout);
	cudaFree(dvotes);
	free(h);
}

/* ---- shared memory and atomics ---- */

__global__ static void
histogram(const unsigned int *v, int n, unsigned int *hist)
{
	__shared__ unsigned int h[64];

	for (unsigned int k = threadIdx.x; k < 64; k += blockDim.x)
		h[k] = 0;
	__syncthreads();
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
		atomicAdd(&h[v[i] % 64], 1u);
	__syncthreads();
	for (unsigned int k = threadIdx.x; k < 64; k += blockDim.x)
		atomicAdd(&hist[k], h[k]);
}

__global__ static void
atomics_misc(int *ival, unsigned long long *uval, float *fval, double *dval)
{
	int			t = (int) threadIdx.x;

	atomicMax(&ival[0], t * 3 - 100);
	atomicMin(&ival[1], 50 - t);
	atomicSub(&ival[2], 2);
	atomicOr(&ival[3], 1 << (t % 31));
	atomicAdd(&uval[0], (unsigned long long) t << 33);
	atomicAdd(fval, 0.5f);
	atomicAdd(dval, 0.25);
	if (atomicCAS(&ival[4], 0, t + 1) == 0)
		atomicExch(&ival[5], t + 1);
}

/* Reads dynamic shared memory before writing it: must see the poison. */
__global__ static void
read_fresh_shared(unsigned char *out)
{
	GBML_DYNAMIC_SHARED(unsigned char, sm);

	out[blockIdx.x * blockDim.x + threadIdx.x] = sm[threadIdx.x];
	sm[threadIdx.x] = 7;
}

__global__ static void
dynamic_shared_sum(const float *in, float *out)
{
	GBML_DYNAMIC_SHARED(float, s);
	unsigned int t = threadIdx.x;

	s[t] = in[t];
	__syncthreads();
	if (t == 0)
	{
		float		total = 0;

		for (unsigned int i = 0; i < blockDim.x; i++)
			total += s[i];
		*out = total;
	}
}

__global__ static void
shared_overflow(int n)
{
	GBML_DYNAMIC_SHARED(int, s);

	s[threadIdx.x] = n;			/* one thread more than the ints requested */
}

static void
test_shared_atomics(void)
{
	const int	n = 100003;
	unsigned int *h = (unsigned int *) malloc(sizeof(unsigned int) * n);
	unsigned int cpu[64] = {0};
	unsigned int gpu[64];
	unsigned int *dv;
	unsigned int *dhist;
	bool		same = true;

	srand(7);
	for (int i = 0; i < n; i++)
	{
		h[i] = (unsigned int) rand();
		cpu[h[i] % 64]++;
	}
	cudaMalloc(&dv, sizeof(unsigned int) * n);
	cudaMalloc(&dhist, sizeof(gpu));
	cudaMemcpy(dv, h, sizeof(unsigned int) * n, cudaMemcpyHostToDevice);
	cudaMemset(dhist, 0, sizeof(gpu));
	GBML_LAUNCH(histogram, 40, 256, 0, 0, dv, n, dhist);
	cudaMemcpy(gpu, dhist, sizeof(gpu), cudaMemcpyDeviceToHost);
	for (int k = 0; k < 64; k++)
		same &= gpu[k] == cpu[k];
	check(same, "shared-memory histogram with atomicAdd over 40 blocks equals the CPU's");
	cudaFree(dv);
	cudaFree(dhist);
	free(h);

	{
		int			iv[6] = {-1000, 1000, 0, 0, 0, 0};
		unsigned long long uv = 0;
		float		fv = 0;
		double		dvv = 0;
		int		   *div;
		unsigned long long *duv;
		float	   *dfv;
		double	   *ddv;
		unsigned long long usum = 0;

		cudaMalloc(&div, sizeof(iv));
		cudaMalloc(&duv, sizeof(uv));
		cudaMalloc(&dfv, sizeof(fv));
		cudaMalloc(&ddv, sizeof(dvv));
		cudaMemcpy(div, iv, sizeof(iv), cudaMemcpyHostToDevice);
		cudaMemcpy(duv, &uv, sizeof(uv), cudaMemcpyHostToDevice);
		cudaMemcpy(dfv, &fv, sizeof(fv), cudaMemcpyHostToDevice);
		cudaMemcpy(ddv, &dvv, sizeof(dvv), cudaMemcpyHostToDevice);
		GBML_LAUNCH(atomics_misc, 1, 128, 0, 0, div, duv, dfv, ddv);
		cudaMemcpy(iv, div, sizeof(iv), cudaMemcpyDeviceToHost);
		cudaMemcpy(&uv, duv, sizeof(uv), cudaMemcpyDeviceToHost);
		cudaMemcpy(&fv, dfv, sizeof(fv), cudaMemcpyDeviceToHost);
		cudaMemcpy(&dvv, ddv, sizeof(dvv), cudaMemcpyDeviceToHost);
		for (int t = 0; t < 128; t++)
			usum += (unsigned long long) t << 33;
		check(iv[0] == 127 * 3 - 100 && iv[1] == 50 - 127 && iv[2] == -256 &&
			  iv[3] == 0x7fffffff && uv == usum && fv == 64.0f && dvv == 32.0 &&
			  iv[4] == iv[5] && iv[4] >= 1,
			  "atomicMax/Min/Sub/Or/CAS/Exch and 64-bit, float, double atomicAdd");
		cudaFree(div);
		cudaFree(duv);
		cudaFree(dfv);
		cudaFree(ddv);
	}

	{
		unsigned char out[2 * 128];
		unsigned char *dout;
		bool		poisoned = true;

		cudaMalloc(&dout, sizeof(out));
		GBML_LAUNCH(read_fresh_shared, 2, 128, 128, 0, dout);
		GBML_LAUNCH(read_fresh_shared, 2, 128, 128, 0, dout);
		cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost);
		for (int i = 0; i < 2 * 128; i++)
			poisoned &= out[i] == 0xA5;
		check(poisoned, "dynamic shared memory is poisoned at every block start");
		cudaFree(dout);
	}

	{
		float		in[96];
		float		total = 0;
		float	   *din;
		float	   *dout;

		for (int i = 0; i < 96; i++)
			in[i] = (float) i;
		cudaMalloc(&din, sizeof(in));
		cudaMalloc(&dout, sizeof(float));
		cudaMemcpy(din, in, sizeof(in), cudaMemcpyHostToDevice);
		GBML_LAUNCH(dynamic_shared_sum, 1, 96, 96 * sizeof(float), 0, din, dout);
		cudaMemcpy(&total, dout, sizeof(float), cudaMemcpyDeviceToHost);
		check(total == 95.0f * 96.0f / 2.0f, "dynamic shared memory holds a block's values");
		cudaFree(din);
		cudaFree(dout);
	}

	GBML_LAUNCH(shared_overflow, 1, 33, 32 * sizeof(int), 0, 5);
	check(cudaDeviceSynchronize() == cudaErrorIllegalAddress,
		  "a write past the dynamic shared memory is an illegal address");
	cudaDeviceReset();
}

/* ---- warps ---- */

__global__ static void
warp_ops(int *out)
{
	unsigned int lane = threadIdx.x % 32;
	unsigned int warp = threadIdx.x / 32;
	int		   *o = out + threadIdx.x * 12;
	int			v = (int) (lane + 1 + warp * 100);
	int			sum = v;
	int			bfly = v;
	int			scan = v;
	double		dv = lane * 0.5;

	for (int off = 16; off > 0; off >>= 1)
		sum += __shfl_down_sync(0xffffffffu, sum, off);
	for (int m = 16; m > 0; m >>= 1)
		bfly += __shfl_xor_sync(0xffffffffu, bfly, m);
	for (unsigned int d = 1; d < 32; d <<= 1)
	{
		int			t = __shfl_up_sync(0xffffffffu, scan, d);

		if (lane >= d)
			scan += t;
	}
	for (int m = 16; m > 0; m >>= 1)
		dv += __shfl_xor_sync(0xffffffffu, dv, m);
	o[0] = sum;
	o[1] = bfly;
	o[2] = scan;
	o[3] = __shfl_sync(0xffffffffu, (int) lane * 3, 5);
	o[4] = __shfl_sync(0xffffffffu, (int) lane, 2, 8);
	o[5] = (int) __ballot_sync(0xffffffffu, lane % 3 == 0);
	o[6] = __any_sync(0xffffffffu, lane == 31);
	o[7] = __all_sync(0xffffffffu, lane < 31);
	o[8] = __all_sync(0xffffffffu, lane < 32);
	o[9] = (int) (dv * 4);
	o[10] = (int) __activemask();
	o[11] = (int) (__shfl_down_sync(0xffffffffu, (unsigned long long) lane << 40, 1) >> 40);
}

/* 16x8 block: a warp is two rows, threadIdx.x fastest. */
__global__ static void
warp_2d(int *out)
{
	unsigned int linear = threadIdx.y * blockDim.x + threadIdx.x;

	out[linear * 2] = (int) __ballot_sync(0xffffffffu, threadIdx.y % 2 == 1);
	out[linear * 2 + 1] = __shfl_sync(0xffffffffu, (int) threadIdx.y, 16);
}

/* Lanes 16..31 return; the others' collectives with mask 0xffff complete. */
__global__ static void
half_warp(int *out)
{
	int			v = (int) threadIdx.x;

	if (threadIdx.x >= 16)
		return;
	for (int off = 8; off > 0; off >>= 1)
		v += __shfl_down_sync(0x0000ffffu, v, off, 16);
	__syncwarp(0x0000ffffu);
	if (threadIdx.x == 0)
		out[0] = v;
	out[1 + threadIdx.x] = (int) __activemask();
}

/* Warp-aggregated atomics in a divergent branch: __activemask() names the branch's lanes. */
__global__ static void
aggregated_append(int *counter, int *slots, unsigned int *masks)
{
	unsigned int lane = threadIdx.x % 32;

	if (threadIdx.x % 3 != 0)
	{
		unsigned int m = __activemask();
		int			leader = __ffs((int) m) - 1;
		int			rank = __popc(m & ((1u << lane) - 1));
		int			base = 0;

		if ((int) lane == leader)
			base = atomicAdd(counter, __popc(m));
		base = __shfl_sync(m, base, leader);
		slots[base + rank] = (int) threadIdx.x;
		masks[threadIdx.x] = m;
	}
	__syncthreads();
}

/* Half the warp waits at a shuffle, the other half at __syncthreads. */
__global__ static void
stuck_warp(int *out)
{
	int			v = 1;

	if (threadIdx.x < 16)
		v = __shfl_sync(0xffffffffu, v, 0);
	__syncthreads();
	out[threadIdx.x] = v;
}

static void
test_warps(void)
{
	int			out[64 * 12];
	int		   *dout;
	bool		ok = true;

	cudaMalloc(&dout, sizeof(out));
	GBML_LAUNCH(warp_ops, 1, 64, 0, 0, dout);
	check(cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost) == cudaSuccess, "warp kernel runs");
	for (int t = 0; t < 64; t++)
	{
		int			lane = t % 32;
		int			warp = t / 32;
		int			total = 528 + 3200 * warp;
		int			prefix = (lane + 1) * (lane + 2) / 2 + (lane + 1) * 100 * warp;
		const int  *o = out + t * 12;

		if (lane == 0)
			ok &= o[0] == total;
		ok &= o[1] == total;
		ok &= o[2] == prefix;
		ok &= o[3] == 15;
		ok &= o[4] == (lane & ~7) + 2;
		ok &= (unsigned int) o[5] == 0x49249249u;
		ok &= o[6] == 1 && o[7] == 0 && o[8] == 1;
		ok &= o[9] == 4 * 248;	/* sum of lane * 0.5 over the warp, times 4 */
		ok &= (unsigned int) o[10] == 0xffffffffu;
		ok &= o[11] == (lane < 31 ? lane + 1 : lane);
	}
	check(ok, "shuffles (down, xor, up, broadcast, width 8, double, 64-bit), ballot, any, all");
	cudaFree(dout);

	{
		int			o2[128 * 2];
		int		   *d2;

		ok = true;
		cudaMalloc(&d2, sizeof(o2));
		GBML_LAUNCH(warp_2d, 1, dim3(16, 8), 0, 0, d2);
		cudaMemcpy(o2, d2, sizeof(o2), cudaMemcpyDeviceToHost);
		for (int i = 0; i < 128; i++)
			ok &= (unsigned int) o2[i * 2] == 0xffff0000u && o2[i * 2 + 1] == (i / 32) * 2 + 1;
		check(ok, "a 16x8 block's warps follow linear thread ids");
		cudaFree(d2);
	}

	{
		int			o3[17];
		int		   *d3;

		ok = true;
		cudaMalloc(&d3, sizeof(o3));
		GBML_LAUNCH(half_warp, 1, 32, 0, 0, d3);
		cudaMemcpy(o3, d3, sizeof(o3), cudaMemcpyDeviceToHost);
		ok = o3[0] == 120;
		for (int i = 0; i < 16; i++)
			ok &= (unsigned int) o3[1 + i] == 0x0000ffffu;
		check(ok, "collectives over a half warp whose other lanes returned");
		cudaFree(d3);
	}

	{
		const int	nt = 128;
		int			count = 0;
		int			slots[nt];
		unsigned int masks[nt];
		bool		seen[nt] = {false};
		int		   *dcount;
		int		   *dslots;
		unsigned int *dmasks;
		int			expect_count = 0;

		ok = true;
		cudaMalloc(&dcount, sizeof(int));
		cudaMalloc(&dslots, sizeof(slots));
		cudaMalloc(&dmasks, sizeof(masks));
		cudaMemset(dcount, 0, sizeof(int));
		GBML_LAUNCH(aggregated_append, 1, nt, 0, 0, dcount, dslots, dmasks);
		cudaMemcpy(&count, dcount, sizeof(int), cudaMemcpyDeviceToHost);
		cudaMemcpy(slots, dslots, sizeof(slots), cudaMemcpyDeviceToHost);
		cudaMemcpy(masks, dmasks, sizeof(masks), cudaMemcpyDeviceToHost);
		for (int t = 0; t < nt; t++)
			if (t % 3 != 0)
			{
				unsigned int m = 0;

				for (int l = 0; l < 32; l++)
					if ((t / 32 * 32 + l) % 3 != 0)
						m |= 1u << l;
				ok &= masks[t] == m;
				expect_count++;
			}
		ok &= count == expect_count;
		for (int i = 0; ok && i < count; i++)
		{
			ok &= slots[i] >= 0 && slots[i] < nt && slots[i] % 3 != 0 && !seen[slots[i]];
			if (ok)
				seen[slots[i]] = true;
		}
		check(ok, "__activemask in a divergent branch: warp-aggregated atomics");
		cudaFree(dcount);
		cudaFree(dslots);
		cudaFree(dmasks);
	}

	{
		int		   *d4;

		cudaMalloc(&d4, 64 * sizeof(int));
		GBML_LAUNCH(stuck_warp, 1, 64, 0, 0, d4);
		check(cudaDeviceSynchronize() == cudaErrorLaunchFailure,
			  "a shuffle that half the warp never reaches fails the launch instead of hanging");
		check(cudaMalloc(&d4, 16) == cudaErrorLaunchFailure, "the launch failure is sticky");
		cudaDeviceReset();
	}
}

/* ---- launch configuration ---- */

__global__ static void
touch_shared(int n, int *out)
{
	GBML_DYNAMIC_SHARED(int, s);

	for (int i = (int) threadIdx.x; i < n; i += (int) blockDim.x)
		s[i] = i;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		long long	total = 0;

		for (int i = 0; i < n; i++)
			total += s[i];
		*out = total == (long long) n * (n - 1) / 2;
	}
}

static void
test_launch_checks(void)
{
	int		   *dout;
	int			out = 0;

	cudaMalloc(&dout, sizeof(int));
	cudaGetLastError();
	GBML_LAUNCH(touch_shared, 1, 1025, 0, 0, 0, dout);
	check(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads per block is refused");
	check(cudaGetLastError() == cudaSuccess, "cudaGetLastError clears the error");
	GBML_LAUNCH(touch_shared, 1, dim3(8, 8, 65), 0, 0, 0, dout);
	check(cudaPeekAtLastError() == cudaErrorInvalidConfiguration &&
		  cudaGetLastError() == cudaErrorInvalidConfiguration, "blockDim.z 65 is refused");
	GBML_LAUNCH(touch_shared, 0, 32, 0, 0, 0, dout);
	check(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid is refused");
	GBML_LAUNCH(touch_shared, 1, 32, 49 * 1024, 0, 0, dout);
	check(cudaGetLastError() != cudaSuccess, "49 KB of dynamic shared memory without opt-in is refused");
	check(cudaFuncSetAttribute(touch_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024) == cudaSuccess,
		  "opting in to 100 KB of dynamic shared memory");
	GBML_LAUNCH(touch_shared, 1, 256, 100 * 1024, 0, 100 * 1024 / 4, dout);
	check(cudaGetLastError() == cudaSuccess, "a 100 KB launch after opting in is accepted");
	cudaMemcpy(&out, dout, sizeof(int), cudaMemcpyDeviceToHost);
	check(out == 1, "the 100 KB launch uses all of its shared memory");
	check(cudaFuncSetAttribute(touch_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024) == cudaErrorInvalidValue,
		  "opting in to 300 KB is refused");
	cudaGetLastError();
	GBML_LAUNCH(touch_shared, 1, 256, 300 * 1024, 0, 1, dout);
	check(cudaGetLastError() != cudaSuccess, "a 300 KB launch is refused");
	{
		cudaStream_t bogus = (cudaStream_t) &out;

		GBML_LAUNCH(touch_shared, 1, 32, 0, bogus, 1, dout);
		check(cudaGetLastError() == cudaErrorInvalidResourceHandle, "a launch on a bogus stream is refused");
	}
	cudaFree(dout);
}

/* ---- streams and events ---- */

__global__ static void
double_into(const int *in, int *out, int n)
{
	int			i = (int) (blockIdx.x * blockDim.x + threadIdx.x);

	if (i < n)
		out[i] = in[i] * 2;
}

static bool
all_equal(const int *a, int n, int base, int mul)
{
	for (int i = 0; i < n; i++)
		if (a[i] != (base + i) * mul)
			return false;
	return true;
}

static void
fill(int *a, int n, int base)
{
	for (int i = 0; i < n; i++)
		a[i] = base + i;
}

static void
test_streams(void)
{
	const int	n = 1000;
	int		   *h;
	int		   *back = (int *) malloc(sizeof(int) * n);
	int		   *d;
	int		   *d2;
	cudaStream_t s1;
	cudaStream_t s2;
	cudaEvent_t e;
	cudaEvent_t t0;
	cudaEvent_t t1;
	float		ms = -1;

	cudaMallocHost(&h, sizeof(int) * n);
	cudaStreamCreate(&s1);
	cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
	cudaEventCreate(&e);
	cudaEventCreate(&t0);
	cudaEventCreate(&t1);
	cudaMalloc(&d, sizeof(int) * n);
	cudaMalloc(&d2, sizeof(int) * n);

	/* the bug: the host buffer is reused before the copy's stream synchronized */
	fill(h, n, 1);
	cudaMemcpyAsync(d, h, sizeof(int) * n, cudaMemcpyHostToDevice, s1);
	fill(h, n, 5000);
	cudaStreamSynchronize(s1);
	cudaMemcpy(back, d, sizeof(int) * n, cudaMemcpyDeviceToHost);
	check(all_equal(back, n, 5000, 1), "an async copy reads its host source when it runs, not when enqueued");

	/* the fix: wait for the copy (through an event) before reusing the buffer */
	fill(h, n, 1);
	cudaMemcpyAsync(d, h, sizeof(int) * n, cudaMemcpyHostToDevice, s1);
	cudaEventRecord(e, s1);
	check(cudaEventQuery(e) == cudaErrorNotReady, "cudaEventQuery of an unfinished event answers not ready");
	check(cudaEventQuery(e) == cudaSuccess, "and the next query answers success");
	fill(h, n, 5000);
	cudaEventSynchronize(e);
	cudaMemcpy(back, d, sizeof(int) * n, cudaMemcpyDeviceToHost);
	check(all_equal(back, n, 1, 1), "after cudaEventSynchronize the device has the old contents");

	/* two streams ordered by an event */
	fill(h, n, 10);
	cudaMemset(d, 0, sizeof(int) * n);
	cudaMemcpyAsync(d, h, sizeof(int) * n, cudaMemcpyHostToDevice, s1);
	cudaEventRecord(e, s1);
	cudaStreamWaitEvent(s2, e, 0);
	GBML_LAUNCH(double_into, (n + 127) / 128, 128, 0, s2, d, d2, n);
	cudaStreamSynchronize(s2);
	cudaMemcpyAsync(back, d2, sizeof(int) * n, cudaMemcpyDeviceToHost, s2);
	cudaStreamSynchronize(s2);
	check(all_equal(back, n, 10, 2), "cudaStreamWaitEvent orders a kernel after another stream's copy");

	/* the same without the wait: the kernel runs before the copy */
	fill(h, n, 20);
	cudaMemset(d, 0, sizeof(int) * n);
	cudaMemcpyAsync(d, h, sizeof(int) * n, cudaMemcpyHostToDevice, s1);
	GBML_LAUNCH(double_into, (n + 127) / 128, 128, 0, s2, d, d2, n);
	cudaStreamSynchronize(s2);
	cudaMemcpyAsync(back, d2, sizeof(int) * n, cudaMemcpyDeviceToHost, s2);
	cudaStreamSynchronize(s2);
	check(back[0] == 0 && back[n - 1] == 0, "without the wait the kernel sees the memory before the copy");
	check(cudaStreamQuery(s1) == cudaErrorNotReady && cudaStreamQuery(s1) == cudaSuccess,
		  "cudaStreamQuery runs pending work and answers not ready once");

	/* nothing runs until a synchronization point */
	cudaMemcpy(d2, h, sizeof(int) * n, cudaMemcpyHostToDevice);
	GBML_LAUNCH(double_into, (n + 127) / 128, 128, 0, s1, d2, d, n);
	cudaMemsetAsync(d2, 0, sizeof(int) * n, s2);
	cudaStreamSynchronize(s2);
	cudaStreamSynchronize(s1);
	cudaMemcpy(back, d, sizeof(int) * n, cudaMemcpyDeviceToHost);
	check(back[0] == 0 && back[n - 1] == 0, "a launch runs at its stream's synchronization, not at enqueue");

	cudaEventRecord(t0, 0);
	GBML_LAUNCH(double_into, (n + 127) / 128, 128, 0, 0, d, d2, n);
	cudaEventRecord(t1, 0);
	cudaEventSynchronize(t1);
	check(cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess && ms >= 0 && ms < 1000,
		  "cudaEventElapsedTime between two completed events");

	cudaFree(d);
	cudaFree(d2);
	cudaFreeHost(h);
	cudaStreamDestroy(s1);
	cudaStreamDestroy(s2);
	cudaEventDestroy(e);
	cudaEventDestroy(t0);
	cudaEventDestroy(t1);
	free(back);
}

/* ---- memory checking and resources ---- */

__global__ static void
write_one_past(int *a, int n)
{
	if ((int) threadIdx.x <= n)
		a[threadIdx.x] = 1;		/* thread n writes a[n] */
}

/* A device pointer the argument check cannot see: inside a struct. */
struct hidden_ptr
{
	int		   *p;
};

__global__ static void
write_through_struct(hidden_ptr h)
{
	h.p[threadIdx.x] = 42;
}

static void
test_memory(void)
{
	int		   *d;
	int		   *d2;
	int		   *h = (int *) malloc(sizeof(int) * 65);
	long long	st[6];
	size_t		free_b;
	size_t		total_b;
	unsigned char fresh[16];

	cudaMalloc(&d, sizeof(int) * 64);
	cudaMemcpy(fresh, d, sizeof(fresh), cudaMemcpyDeviceToHost);
	check(fresh[0] == 0xCD && fresh[15] == 0xCD, "fresh device memory is garbage, not zeros");

	GBML_LAUNCH(write_one_past, 1, 65, 0, 0, d, 64);
	check(cudaGetLastError() == cudaSuccess, "the bad launch is accepted");
	check(cudaDeviceSynchronize() == cudaErrorIllegalAddress,
		  "a write one element past a cudaMalloc block is an illegal address at the sync");
	check(cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost) == cudaErrorIllegalAddress,
		  "the illegal address is sticky");
	check(cudaDeviceReset() == cudaSuccess && cudaMalloc(&d, sizeof(int) * 64) == cudaSuccess,
		  "cudaDeviceReset clears it");

	GBML_LAUNCH(write_one_past, 1, 64, 0, 0, d, 63);
	check(cudaDeviceSynchronize() == cudaSuccess, "the same kernel within bounds is fine");

	check(cudaMemcpyAsync(d, h, sizeof(int) * 65, cudaMemcpyHostToDevice, 0) == cudaErrorInvalidValue,
		  "an async copy past the end of an allocation fails at enqueue");
	check(cudaMemcpyAsync(d + 1, h, sizeof(int) * 63, cudaMemcpyHostToDevice, 0) == cudaSuccess,
		  "an async copy inside an allocation is accepted");
	check(cudaMemset(d + 60, 0, 5 * sizeof(int)) == cudaErrorInvalidValue, "a memset past the end fails");
	cudaGetLastError();

	GBML_LAUNCH(write_one_past, 1, 4, 0, 0, h, 3);
	check(cudaDeviceSynchronize() == cudaErrorIllegalAddress, "a host pointer handed to a kernel is an illegal address");
	cudaDeviceReset();

	cudaMalloc(&d, sizeof(int) * 64);
	cudaFree(d);
	GBML_LAUNCH(write_one_past, 1, 4, 0, 0, d, 3);
	check(cudaDeviceSynchronize() == cudaErrorIllegalAddress, "a kernel on freed device memory is an illegal address");
	cudaDeviceReset();
	check(cudaFree(h) == cudaErrorInvalidValue, "cudaFree of a host pointer fails");

	{
		int		   *freed;
		int		   *churn;
		cudaError_t e = cudaSuccess;

		cudaMalloc(&freed, 64 * sizeof(int));
		cudaFree(freed);
		GBML_LAUNCH(write_through_struct, 1, 4, 0, 0, hidden_ptr{freed});
		check(cudaDeviceSynchronize() == cudaSuccess, "a write after free hidden in a struct runs");
		/* enough frees to push the block out of quarantine, where the write is found */
		for (int i = 0; i < 5000 && e == cudaSuccess; i++)
		{
			e = cudaMalloc(&churn, 16);
			if (e == cudaSuccess)
				e = cudaFree(churn);
		}
		check(e == cudaErrorIllegalAddress, "and is reported as an illegal address when the block leaves quarantine");
		cudaDeviceReset();
	}

	gbml_emu_set_device_memory(64LL << 20);
	check(cudaMalloc(&d, (64 << 20) + 1) == cudaErrorMemoryAllocation,
		  "cudaMalloc over the emulated memory fails");
	check(cudaMalloc(&d, 32 << 20) == cudaSuccess && cudaMalloc(&d2, 33 << 20) == cudaErrorMemoryAllocation,
		  "the emulated memory is shared by allocations");
	check(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && free_b == (32 << 20) && total_b == (64 << 20),
		  "cudaMemGetInfo");
	cudaFree(d);
	gbml_emu_set_device_memory(4LL << 30);
	cudaGetLastError();

	gbml_emu_fail_after(2);
	check(cudaMalloc(&d, 16) == cudaSuccess && cudaMalloc(&d2, 16) == cudaErrorMemoryAllocation,
		  "fault injection fails the chosen allocation");
	check(cudaMalloc(&d2, 16) == cudaSuccess, "and only that one");
	cudaFree(d2);
	{
		cudaStream_t s;

		gbml_emu_fail_after(1);
		check(cudaStreamCreate(&s) == cudaErrorLaunchFailure, "fault injection fails a non-allocation call");
	}
	gbml_emu_fail_after(1);
	GBML_LAUNCH(write_one_past, 1, 4, 0, 0, d, 3);
	check(cudaGetLastError() == cudaErrorLaunchFailure, "fault injection fails a launch");
	check(cudaDeviceSynchronize() == cudaSuccess, "an injected failure is not sticky");
	cudaFree(d);

	{
		cudaStream_t s;
		cudaEvent_t e;
		void	   *p;

		cudaStreamCreate(&s);
		cudaEventCreate(&e);
		cudaMallocHost(&p, 100);
		gbml_emu_stats(&st[0], &st[1], &st[2], &st[3], &st[4], &st[5]);
		check(st[2] == 100 && st[3] == 1 && st[4] == 1 && st[5] == 1, "gbml_emu_stats counts what is held");
		cudaEventRecord(e, s);
		cudaEventDestroy(e);	/* with its record still queued */
		cudaStreamDestroy(s);
		cudaFreeHost(p);
	}
	gbml_emu_stats(&st[0], &st[1], &st[2], &st[3], &st[4], &st[5]);
	check(st[0] == 0 && st[1] == 0 && st[2] == 0 && st[3] == 0 && st[4] == 0 && st[5] == 0,
		  "after freeing everything gbml_emu_stats reports nothing held");
	check(cudaGetLastError() == cudaSuccess, "no error left behind");
	free(h);
}

/* ---- device properties ---- */

static void
test_device(void)
{
	cudaDeviceProp p;
	int			n = 0;

	check(cudaGetDeviceCount(&n) == cudaSuccess && n == 1, "one emulated device");
	check(cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.major == 9 && p.minor == 0 &&
		  p.multiProcessorCount == 132 && p.sharedMemPerBlock == 48 * 1024 &&
		  p.sharedMemPerBlockOptin == 232448 && p.maxThreadsPerBlock == 1024 && p.warpSize == 32 &&
		  p.totalGlobalMem == (size_t) 4 << 30 && strstr(p.name, "emulated") != NULL,
		  "device properties of an H200-like card");
	check(cudaSetDevice(1) == cudaErrorInvalidDevice && cudaSetDevice(0) == cudaSuccess,
		  "only device 0 exists");
	cudaGetLastError();
}

/* ---- timing ---- */

__global__ static void
three_barriers(float *out)
{
	__shared__ float s[256];
	unsigned int t = threadIdx.x;

	s[t] = (float) t;
	__syncthreads();
	float		v = s[255 - t];

	__syncthreads();
	s[t] = v * 2;
	__syncthreads();
	if (t == 0)
		out[blockIdx.x] = s[1];
}

static void
test_timing(void)
{
	const int	blocks = 2000;
	float	   *d;
	double		t0;
	double		us;
	char		name[128];

	cudaMalloc(&d, sizeof(float) * blocks);
	GBML_LAUNCH(three_barriers, 10, 256, 0, 0, d);	/* warm the fibers up */
	cudaDeviceSynchronize();
	t0 = now_us();
	GBML_LAUNCH(three_barriers, blocks, 256, 0, 0, d);
	cudaDeviceSynchronize();
	us = (now_us() - t0) / blocks;
	cudaFree(d);
	printf("# %.1f us per 256-thread block with 3 barriers\n", us);
	snprintf(name, sizeof(name), "a 256-thread block with 3 barriers costs under 1 ms (%.1f us)", us);
	check(us < 1000, name);
}

int
main(void)
{
	test_device();
	test_barriers();
	test_shared_atomics();
	test_warps();
	test_launch_checks();
	test_streams();
	test_memory();
	test_timing();
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
