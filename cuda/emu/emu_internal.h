/*
 * emu_internal.h — what the parts of the CUDA emulation share: the runtime's
 * state (emu_runtime.cpp: streams, events, errors, launches;
 * emu_memory.cpp: device and pinned memory, copies) and the entry of the
 * block scheduler (emu_fibers.cpp), which knows nothing of that state.
 */
#ifndef GBML_EMU_INTERNAL_H
#define GBML_EMU_INTERNAL_H

#include "cuda_emu.h"

#include <pthread.h>

#include <map>

#pragma GCC visibility push(hidden)
namespace gbml_emu
{
/* The card's limits, shared by the launch checks and cudaGetDeviceProperties. */
enum
{
	MAX_THREADS_PER_BLOCK = 1024,
	MAX_BLOCK_Z = 64,
	DEFAULT_SHARED_PER_BLOCK = 48 * 1024,
	MAX_SHARED_PER_BLOCK_OPTIN = 232448,	/* 227 KB, as on an H200 */
	MULTIPROCESSORS = 132
};

/*
 * Runs every block of a launch on the calling OS thread.  Returns cudaSuccess,
 * cudaErrorLaunchFailure (a barrier nobody can complete, a malformed warp
 * operation), cudaErrorIllegalAddress (a write past the dynamic shared
 * memory) or cudaErrorMemoryAllocation (no memory for the fibers), with a
 * sentence in `detail` on failure.
 */
cudaError_t run_blocks(kernel_call *call, dim3 grid, dim3 block, size_t shared_bytes,
					   char *detail, size_t detail_size);

/* Frees the calling thread's fibers (cudaDeviceReset). */
void		release_fibers();

/* ---- the runtime's state (emu_runtime.cpp, emu_memory.cpp) ---- */

enum op_kind
{
	OP_LAUNCH, OP_COPY, OP_MEMSET, OP_RECORD, OP_WAIT
};

/* One queued stream operation; `seq` orders all operations of all streams. */
struct op
{
	op		   *next;
	op_kind		kind;
	unsigned long long seq;
	kernel_call *call;			/* OP_LAUNCH */
	dim3		grid;
	dim3		block;
	size_t		shared_bytes;
	void	   *dst;			/* OP_COPY, OP_MEMSET */
	const void *src;
	size_t		count;
	int			value;
	CUevent_st *event;			/* OP_RECORD */
	CUstream_st *wait_stream;	/* OP_WAIT: run it through wait_seq */
	unsigned long long wait_seq;
};
}								/* namespace gbml_emu */

/*
 * The handles' structs have default visibility (a caller's struct holding a
 * cudaStream_t must not warn) and point at hidden types: harmless, as they
 * have no members that make symbols.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"
struct CUstream_st
{
	CUstream_st *next;
	gbml_emu::op *head;
	gbml_emu::op *tail;
	unsigned int flags;
};

struct CUevent_st
{
	CUevent_st *next;
	unsigned int flags;
	unsigned long long record_seq;	/* the latest cudaEventRecord; 0 = never */
	unsigned long long done_seq;	/* the latest record that has run */
	CUstream_st *stream;		/* where the latest record was queued */
	double		ms;				/* host clock when done_seq ran */
	int			pending;		/* queued records that point here */
	bool		destroyed;		/* freed when the last pending record goes */
};
#pragma GCC diagnostic pop

namespace gbml_emu
{
struct device_block
{
	char	   *base;			/* red zone, user bytes, red zone */
	size_t		size;
};

/* (hidden types, so the std::map instances stay internal to the library) */
struct pinned_block
{
	size_t		size;
};

struct shared_limit
{
	int			bytes;
};

struct freed_block
{
	freed_block *next;
	char	   *base;
	size_t		size;
};

struct emu_state
{
	std::map<uintptr_t, device_block> device;	/* by user address */
	std::map<uintptr_t, pinned_block> pinned;
	std::map<const void *, shared_limit> max_dynamic_shared;	/* by kernel */
	long long	total_memory;
	long long	device_bytes;
	long long	pinned_bytes;
	CUstream_st default_stream;
	CUstream_st *streams;		/* created ones */
	long long	n_streams;
	CUevent_st *events;			/* every one not yet freed */
	long long	n_events;		/* not destroyed */
	freed_block *q_head;
	freed_block *q_tail;
	size_t		q_bytes;
	size_t		q_count;
	unsigned long long seq;
	cudaError_t last;
	cudaError_t sticky;
	long long	fail_after;
	char		detail[512];
};

/* One lock for every call (a pthread mutex: std::mutex::lock may throw). */
extern pthread_mutex_t g_lock;

struct lock_guard
{
	lock_guard() { pthread_mutex_lock(&g_lock); }
	~lock_guard() { pthread_mutex_unlock(&g_lock); }
};

/* Created on first use (never by a constructor); null if out of memory. */
emu_state  *state();

#define API_BEGIN(can_fail, alloc) \
	lock_guard guard_; \
	emu_state  *S = state(); \
	if (S == nullptr) \
		return cudaErrorInitializationError; \
	if (can_fail) \
	{ \
		cudaError_t e_ = enter(S, alloc); \
		if (e_ != cudaSuccess) \
			return e_; \
	}

/* Records a failed call's error (and a detail naming it) and returns it. */
cudaError_t error(emu_state *S, cudaError_t e);

/* The same with a sentence for gbml_emu_error_detail. */
cudaError_t error_detail(emu_state *S, cudaError_t e, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* The start of every call that can fail: a sticky error, or an injected one. */
cudaError_t enter(emu_state *S, bool alloc);

/* What a call that did its work returns: success, or the context's error. */
static inline cudaError_t
result(emu_state *S)
{
	return S->sticky;
}

/* A kernel broke the context: every later call fails until cudaDeviceReset. */
void		make_sticky(emu_state *S, cudaError_t e);

/* emu_memory.cpp */
/* The live device block holding [p, p + n) (p may be its end when n = 0), or null. */
device_block *find_device(emu_state *S, const void *p, size_t n);
bool		is_pinned(emu_state *S, const void *p);
bool		in_quarantine(emu_state *S, const void *p);
/* After a kernel: a damaged red zone makes cudaErrorIllegalAddress sticky. */
void		check_all_blocks(emu_state *S, const char *when);
/* cudaDeviceReset: frees every device, pinned and quarantined block. */
void		reset_memory(emu_state *S);

/* emu_runtime.cpp */
/* Runs every stream's queued work, in the order it was enqueued. */
void		run_all(emu_state *S);
/* Queues a copy or memset (OP_COPY, OP_MEMSET) on stream h. */
cudaError_t enqueue_data_op(emu_state *S, cudaStream_t h, op_kind kind, void *dst,
							const void *src, size_t count, int value);
}
#pragma GCC visibility pop

#endif
