/*
 * cuda_emu.h — the CPU emulation of the CUDA runtime that cuda/compat.h
 * includes when the .cu sources of cuda/ are compiled by g++ (C++17) with
 * -DGBML_CUDA_EMU, into gbml_cuda_emu.so and into tests/emu.  It owns the
 * device-side vocabulary (qualifiers, threadIdx and friends, barriers, warp
 * operations, atomics, intrinsics), GBML_LAUNCH, and the declarations of the
 * runtime API, which is implemented in emu_runtime.cpp (streams, events,
 * launches, errors), emu_memory.cpp (device and pinned memory, copies) and
 * emu_fibers.cpp (running a launch's blocks on fibers).
 *
 * The emulation is built to make the bugs a real GPU hides or only shows
 * sometimes visible every time, deterministically:
 *	- launches and async copies are queued and run only at synchronization
 *	  points, and an async copy reads its host source when it runs, so a
 *	  missing synchronization corrupts the result;
 *	- the threads of a block are cooperative fibers, each run until it blocks
 *	  at a barrier or returns, so a missing __syncthreads() lets thread 0 read
 *	  what the others have not written yet;
 *	- device allocations have red zones checked after every launch, fresh
 *	  device and dynamic shared memory is filled with garbage, freed device
 *	  memory stays poisoned in quarantine, and a kernel argument that is a
 *	  host pointer or points into freed memory is an illegal address.
 *
 * Differences from CUDA worth knowing when writing kernels:
 *	- __shared__ is `static thread_local`: a __shared__ variable must not
 *	  have an initializer (CUDA forbids one too) and keeps its contents from
 *	  the previous block; only dynamic shared memory is poisoned.
 *	- GBML_DYNAMIC_SHARED must be used inside the kernel (it declares a
 *	  local pointer), not at file scope.
 *	- __activemask() answers the lanes of the warp that reach the same call
 *	  site, once every other live lane has blocked or returned; in
 *	  converged code that is every live lane, as on the card.
 *	- Warp operations exchange values through the runtime: every lane named
 *	  in the mask must call the same operation with the same mask (as CUDA
 *	  requires); a mismatch, a lane calling with a mask that does not name
 *	  it, or a barrier nobody can complete fails the launch with
 *	  cudaErrorLaunchFailure instead of hanging.
 *	- Fibers are cooperative: a thread that spins waiting for another thread
 *	  or block (a flag in memory) never yields and hangs the launch.  Each
 *	  fiber has a 64 KB stack.
 *	- Kernel arguments are converted to the kernel's parameter types as in a
 *	  function call; a pointer argument must be NULL, device memory or pinned
 *	  host memory (cudaMallocHost, cudaHostAlloc) when the launch runs.
 */
#ifndef GBML_CUDA_EMU_H
#define GBML_CUDA_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#define GBML_CUDA_EMULATED 1

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
/* One OS thread runs a launch's blocks one at a time: its fibers share it. */
#define __shared__ static thread_local __attribute__((unused))

/* ---- types ---- */
struct uint3
{
	unsigned int x, y, z;
};

struct dim3
{
	unsigned int x, y, z;

	constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
		: x(vx), y(vy), z(vz) {}
	constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
	constexpr operator uint3() const { return uint3{x, y, z}; }
};

struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };

static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return double2{x, y}; }

/* Numbered as in CUDA 12, so logs read the same. */
enum cudaError
{
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInitializationError = 3,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInvalidMemcpyDirection = 21,
	cudaErrorNoDevice = 100,
	cudaErrorInvalidDevice = 101,
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorNotReady = 600,
	cudaErrorIllegalAddress = 700,
	cudaErrorLaunchOutOfResources = 701,
	cudaErrorLaunchFailure = 719,
	cudaErrorNotSupported = 801,
	cudaErrorUnknown = 999
};
typedef enum cudaError cudaError_t;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

/* The special stream handles all mean the default stream here. */
#define cudaStreamLegacy ((cudaStream_t) 0x1)
#define cudaStreamPerThread ((cudaStream_t) 0x2)

enum cudaMemcpyKind
{
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4
};

enum cudaFuncAttribute
{
	cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
	cudaFuncAttributePreferredSharedMemoryCarveout = 9
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04

struct cudaDeviceProp
{
	char		name[256];
	size_t		totalGlobalMem;
	size_t		sharedMemPerBlock;
	int			regsPerBlock;
	int			warpSize;
	size_t		memPitch;
	int			maxThreadsPerBlock;
	int			maxThreadsDim[3];
	int			maxGridSize[3];
	int			clockRate;
	size_t		totalConstMem;
	int			major;
	int			minor;
	size_t		textureAlignment;
	int			multiProcessorCount;
	int			integrated;
	int			canMapHostMemory;
	int			concurrentKernels;
	int			asyncEngineCount;
	int			unifiedAddressing;
	int			memoryClockRate;
	int			memoryBusWidth;
	int			l2CacheSize;
	int			maxThreadsPerMultiProcessor;
	size_t		sharedMemPerMultiprocessor;
	int			regsPerMultiprocessor;
	size_t		sharedMemPerBlockOptin;
	int			maxBlocksPerMultiProcessor;
};

/* ---- runtime API (emu_runtime.cpp) ---- */
extern "C"
{
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
							cudaStream_t stream = 0);
cudaError_t cudaMemset(void *ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream = 0);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value);

/*
 * Test hooks.  gbml_emu_stats: what is held now (device bytes and blocks,
 * pinned bytes and blocks, streams, events).  gbml_emu_set_device_memory:
 * the emulated card's memory (default 4 GiB; ignored while anything is
 * allocated).  gbml_emu_fail_after(n): the n-th next runtime call that can
 * fail (n >= 1; not the release calls, nor the error queries) fails, with
 * cudaErrorMemoryAllocation for an allocation and cudaErrorLaunchFailure
 * otherwise, then injection is off again; n <= 0 turns it off.
 * gbml_emu_error_detail: what the last sticky error was about.
 */
__attribute__((visibility("default"))) void gbml_emu_stats(long long *device_bytes,
				long long *device_allocs, long long *pinned_bytes, long long *pinned_allocs,
				long long *streams, long long *events);
__attribute__((visibility("default"))) void gbml_emu_set_device_memory(long long bytes);
__attribute__((visibility("default"))) void gbml_emu_fail_after(long long n);
__attribute__((visibility("default"))) const char *gbml_emu_error_detail(void);
}

/* The C++ overloads that cuda_runtime.h also has. */
template <class T>
static inline cudaError_t
cudaMalloc(T **ptr, size_t size)
{
	return cudaMalloc(reinterpret_cast<void **>(ptr), size);
}

template <class T>
static inline cudaError_t
cudaMallocHost(T **ptr, size_t size, unsigned int flags = 0)
{
	return cudaHostAlloc(reinterpret_cast<void **>(ptr), size, flags);
}

template <class T>
static inline cudaError_t
cudaHostAlloc(T **ptr, size_t size, unsigned int flags)
{
	return cudaHostAlloc(reinterpret_cast<void **>(ptr), size, flags);
}

static inline cudaError_t
cudaEventCreate(cudaEvent_t *event, unsigned int flags)
{
	return cudaEventCreateWithFlags(event, flags);
}

template <class T>
static inline cudaError_t
cudaFuncSetAttribute(T *entry, enum cudaFuncAttribute attr, int value)
{
	return cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}

/* ---- the emulator's internals that device code reaches ---- */
#pragma GCC visibility push(hidden)
namespace gbml_emu
{
/* What the index variables of the running block read. */
struct block_ctx
{
	uint3		block_idx;
	dim3		block_dim;
	dim3		grid_dim;
	unsigned char *dyn_shared;
};

/* The running fiber's identity; `cur` points at the running one's. */
struct thread_ctx
{
	uint3		thread_idx;
	unsigned int linear;		/* x + y * bx + z * bx * by */
	const block_ctx *blk;
};

extern __thread thread_ctx *cur;

static inline const uint3 &thread_idx() { return cur->thread_idx; }
static inline const uint3 &block_idx() { return cur->blk->block_idx; }
static inline const dim3 &block_dim() { return cur->blk->block_dim; }
static inline const dim3 &grid_dim() { return cur->blk->grid_dim; }

/* Block barriers (emu_fibers.cpp); `kind` picks what the call returns. */
enum
{
	BAR_SYNC, BAR_COUNT, BAR_OR, BAR_AND
};
int			block_barrier(int kind, int pred);

/* Warp collectives (emu_fibers.cpp), on values carried as raw 64 bits. */
enum
{
	WARP_SYNC, WARP_SHFL, WARP_SHFL_UP, WARP_SHFL_DOWN, WARP_SHFL_XOR,
	WARP_BALLOT, WARP_ANY, WARP_ALL
};
unsigned long long warp_op(int kind, unsigned int mask, unsigned long long value,
						   int param, int width);
/* The lanes of the warp at the same call site (the caller's return address). */
__attribute__((noinline)) unsigned int active_mask();

template <typename T>
static inline unsigned long long
to_bits(T v)
{
	static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
				  "warp operations take scalars of up to 8 bytes");
	unsigned long long bits = 0;

	memcpy(&bits, &v, sizeof(T));
	return bits;
}

template <typename T>
static inline T
from_bits(unsigned long long bits)
{
	T			v;

	memcpy(&v, &bits, sizeof(T));
	return v;
}

/*
 * One queued launch: the kernel and copies of its arguments, run once per
 * thread on that thread's fiber.  `ptrs` lists the pointer arguments (NULL
 * for the others) so the runtime can check them before running.
 */
struct kernel_call
{
	const void *kernel;
	int			n_args;
	const void *const *ptrs;

	virtual		~kernel_call() {}
	virtual void run() = 0;
};

template <typename T>
static inline const void *
arg_pointer(const T &v)
{
	if constexpr (std::is_pointer<T>::value &&
				  std::is_object<typename std::remove_pointer<T>::type>::value)
		return (const void *) v;
	else
		return nullptr;
}

template <typename... P>
struct kernel_call_impl final : kernel_call
{
	void		(*fn) (P...);
	std::tuple<P...> args;
	const void *ptr_args[sizeof...(P) + 1];

	kernel_call_impl(void (*f) (P...), P... a) : fn(f), args(a...), ptr_args{arg_pointer(a)..., nullptr}
	{
		kernel = reinterpret_cast<const void *>(f);
		n_args = (int) sizeof...(P);
		ptrs = ptr_args;
	}
	void		run() override { std::apply(fn, args); }
};

/* Queues `call` (emu_runtime.cpp), which takes it over; errors go to the last error. */
void		enqueue_launch(kernel_call *call, const void *kernel, dim3 grid, dim3 block,
						   size_t shared_bytes, cudaStream_t stream);

/* GBML_LAUNCH(k, ...)(args) : the call converts the arguments like a kernel call. */
template <typename... P>
struct launcher
{
	void		(*fn) (P...);
	dim3		grid;
	dim3		block;
	size_t		shared_bytes;
	cudaStream_t stream;

	void operator() (P... a) const
	{
		kernel_call *call = new (std::nothrow) kernel_call_impl<P...>(fn, a...);

		enqueue_launch(call, reinterpret_cast<const void *>(fn), grid, block, shared_bytes, stream);
	}
};

template <typename... P>
static inline launcher<P...>
launch(void (*fn) (P...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream)
{
	return launcher<P...>{fn, grid, block, shared_bytes, stream};
}
}								/* namespace gbml_emu */
#pragma GCC visibility pop

#define GBML_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
	gbml_emu::launch((kernel), (grid), (block), (shared_bytes), (stream))(__VA_ARGS__)

#define GBML_DYNAMIC_SHARED(type, name) \
	type *const name __attribute__((unused)) = reinterpret_cast<type *>(gbml_emu::cur->blk->dyn_shared)

/* ---- built-in variables ---- */
#define threadIdx (gbml_emu::thread_idx())
#define blockIdx (gbml_emu::block_idx())
#define blockDim (gbml_emu::block_dim())
#define gridDim (gbml_emu::grid_dim())
constexpr int warpSize = 32;

/* ---- barriers and warp operations ---- */
static inline void __syncthreads() { gbml_emu::block_barrier(gbml_emu::BAR_SYNC, 0); }
static inline int __syncthreads_count(int pred) { return gbml_emu::block_barrier(gbml_emu::BAR_COUNT, pred); }
static inline int __syncthreads_or(int pred) { return gbml_emu::block_barrier(gbml_emu::BAR_OR, pred); }
static inline int __syncthreads_and(int pred) { return gbml_emu::block_barrier(gbml_emu::BAR_AND, pred); }

static inline void
__syncwarp(unsigned int mask = 0xffffffffu)
{
	gbml_emu::warp_op(gbml_emu::WARP_SYNC, mask, 0, 0, 32);
}

template <typename T>
static inline T
__shfl_sync(unsigned int mask, T var, int src_lane, int width = warpSize)
{
	return gbml_emu::from_bits<T>(gbml_emu::warp_op(gbml_emu::WARP_SHFL, mask,
													gbml_emu::to_bits(var), src_lane, width));
}

template <typename T>
static inline T
__shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize)
{
	return gbml_emu::from_bits<T>(gbml_emu::warp_op(gbml_emu::WARP_SHFL_UP, mask,
													gbml_emu::to_bits(var), (int) delta, width));
}

template <typename T>
static inline T
__shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize)
{
	return gbml_emu::from_bits<T>(gbml_emu::warp_op(gbml_emu::WARP_SHFL_DOWN, mask,
													gbml_emu::to_bits(var), (int) delta, width));
}

template <typename T>
static inline T
__shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = warpSize)
{
	return gbml_emu::from_bits<T>(gbml_emu::warp_op(gbml_emu::WARP_SHFL_XOR, mask,
													gbml_emu::to_bits(var), lane_mask, width));
}

static inline unsigned int
__ballot_sync(unsigned int mask, int pred)
{
	return (unsigned int) gbml_emu::warp_op(gbml_emu::WARP_BALLOT, mask, pred != 0, 0, 32);
}

static inline int
__any_sync(unsigned int mask, int pred)
{
	return (int) gbml_emu::warp_op(gbml_emu::WARP_ANY, mask, pred != 0, 0, 32);
}

static inline int
__all_sync(unsigned int mask, int pred)
{
	return (int) gbml_emu::warp_op(gbml_emu::WARP_ALL, mask, pred != 0, 0, 32);
}

/*
 * The lanes "converged" here: those that reach this call site (the call
 * must come straight from the kernel's code, hence a macro) while every
 * other live lane of the warp has blocked or returned.
 */
#define __activemask() gbml_emu::active_mask()

/* One OS thread runs all fibers, but the fences keep the compiler honest. */
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ---- atomics: relaxed, like CUDA's ---- */
#define GBML_EMU_ATOMIC_INT(T) \
	static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
	static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); } \
	static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); } \
	static inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); } \
	static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); } \
	static inline T atomicCAS(T *p, T expected, T desired) \
	{ \
		__atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
		return expected; \
	}
GBML_EMU_ATOMIC_INT(int)
GBML_EMU_ATOMIC_INT(unsigned int)
GBML_EMU_ATOMIC_INT(unsigned long long int)
#undef GBML_EMU_ATOMIC_INT

static inline int atomicSub(int *p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
static inline unsigned int atomicSub(unsigned int *p, unsigned int v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }

namespace gbml_emu
{
/* old = *p; *p = f(old), retried until no other thread got in between. */
template <typename T, typename F>
static inline T
atomic_update(T *p, F f)
{
	T			old;
	T			desired;

	__atomic_load(p, &old, __ATOMIC_RELAXED);
	do
		desired = f(old);
	while (!__atomic_compare_exchange(p, &old, &desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return old;
}
}

#define GBML_EMU_ATOMIC_MINMAX(T) \
	static inline T atomicMax(T *p, T v) \
	{ return gbml_emu::atomic_update(p, [v](T old) { return old < v ? v : old; }); } \
	static inline T atomicMin(T *p, T v) \
	{ return gbml_emu::atomic_update(p, [v](T old) { return v < old ? v : old; }); }
GBML_EMU_ATOMIC_MINMAX(int)
GBML_EMU_ATOMIC_MINMAX(unsigned int)
GBML_EMU_ATOMIC_MINMAX(long long int)
GBML_EMU_ATOMIC_MINMAX(unsigned long long int)
#undef GBML_EMU_ATOMIC_MINMAX

static inline float
atomicAdd(float *p, float v)
{
	return gbml_emu::atomic_update(p, [v](float old) { return old + v; });
}

static inline double
atomicAdd(double *p, double v)
{
	return gbml_emu::atomic_update(p, [v](double old) { return old + v; });
}

static inline float
atomicExch(float *p, float v)
{
	float		old;

	__atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);
	return old;
}

static inline unsigned int
atomicInc(unsigned int *p, unsigned int limit)
{
	return gbml_emu::atomic_update(p, [limit](unsigned int old) { return old >= limit ? 0u : old + 1; });
}

static inline unsigned int
atomicDec(unsigned int *p, unsigned int limit)
{
	return gbml_emu::atomic_update(p, [limit](unsigned int old) {
		return (old == 0 || old > limit) ? limit : old - 1;
	});
}

/* ---- intrinsics ---- */
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int) x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long) x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }

static inline unsigned int
__brev(unsigned int x)
{
	x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
	x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
	x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
	return __builtin_bswap32(x);
}

template <typename T>
static inline T __ldg(const T *p) { return *p; }

static inline int __float_as_int(float f) { return gbml_emu::from_bits<int>(gbml_emu::to_bits(f)); }
static inline unsigned int __float_as_uint(float f) { return gbml_emu::from_bits<unsigned int>(gbml_emu::to_bits(f)); }
static inline float __int_as_float(int i) { return gbml_emu::from_bits<float>(gbml_emu::to_bits(i)); }
static inline float __uint_as_float(unsigned int i) { return gbml_emu::from_bits<float>(gbml_emu::to_bits(i)); }
static inline long long __double_as_longlong(double d) { return gbml_emu::from_bits<long long>(gbml_emu::to_bits(d)); }
static inline double __longlong_as_double(long long i) { return gbml_emu::from_bits<double>(gbml_emu::to_bits(i)); }

/*
 * Correctly rounded single operations that are never fused into an FMA:
 * code that must give the CPU's bits writes its arithmetic with these (the
 * emulated build also compiles with -ffp-contract=off).
 */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }

/* glibc declares (and does not export) functions of these names: macros, then */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __powf(x, y) powf(x, y)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }

/*
 * CUDA's global min/max: the usual arithmetic conversions, then compare
 * (fminf/fmin for floating point, as in CUDA).  Only found by unqualified
 * calls; std::min and std::max are untouched.
 */
template <typename A, typename B>
static inline typename std::enable_if<std::is_integral<A>::value && std::is_integral<B>::value,
									  typename std::common_type<A, B>::type>::type
min(A a, B b)
{
	typedef typename std::common_type<A, B>::type C;

	return (C) a < (C) b ? (C) a : (C) b;
}

template <typename A, typename B>
static inline typename std::enable_if<std::is_integral<A>::value && std::is_integral<B>::value,
									  typename std::common_type<A, B>::type>::type
max(A a, B b)
{
	typedef typename std::common_type<A, B>::type C;

	return (C) a < (C) b ? (C) b : (C) a;
}

static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }

#endif							/* GBML_CUDA_EMU_H */
