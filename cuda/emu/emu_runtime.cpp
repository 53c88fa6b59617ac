/*
 * emu_runtime.cpp — the host side of the CUDA emulation, but for memory
 * (emu_memory.cpp): the one emulated device, streams as FIFO queues of
 * deferred operations, events, launches (checked when enqueued, handed to
 * emu_fibers.cpp when their turn comes), the error state, and the test
 * hooks (gbml_emu_*).
 *
 * Deferred execution: nothing queued on a stream runs when it is enqueued.
 * Work runs at synchronization points only:
 *	- cudaStreamSynchronize and cudaStreamQuery: that stream;
 *	- cudaEventSynchronize and cudaEventQuery: the event's stream up to the
 *	  event;
 *	- cudaDeviceSynchronize, the synchronous cudaMemcpy and cudaMemset,
 *	  cudaFree, cudaFreeHost and cudaStreamDestroy: every stream, in the order
 *	  the operations were enqueued (cudaStreamDestroy runs its stream's work
 *	  before freeing it, where CUDA would let it finish in the background);
 *	- a queued cudaStreamWaitEvent, when it runs, first runs the other stream
 *	  up to the event.
 * An async copy reads its source when it runs, so a host buffer reused
 * before the copy's stream was synchronized gives the device the new
 * contents: the missing synchronization shows up as a wrong result every
 * time instead of once in a while.
 *
 * Queries: cudaStreamQuery and cudaEventQuery on unfinished work run it and
 * answer cudaErrorNotReady that time (so a caller's not-ready path runs and a
 * polling loop ends on its next query); the next query answers cudaSuccess.
 *
 * Errors: a failed call returns its error and records it as the last error
 * (cudaGetLastError returns and clears it).  A kernel that fails (an
 * out-of-bounds write found in a red zone, a host or freed pointer among its
 * arguments, a stuck barrier) leaves a sticky error, as a corrupted context
 * does on a real card: every later call returns it until cudaDeviceReset,
 * and queued work is dropped.  The release calls (cudaFree, cudaFreeHost,
 * cudaStreamDestroy, cudaEventDestroy) still release under a sticky error,
 * and return it.
 *
 * All calls take one mutex, so the runtime is safe to call from several
 * threads; kernels run under it, on the calling thread.
 */
#include "emu_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace gbml_emu
{
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

namespace
{
const long long DEFAULT_DEVICE_MEMORY = 4LL << 30;

emu_state  *g_state;

double
now_ms()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}
}								/* anonymous namespace */

emu_state *
state()
{
	if (g_state == nullptr)
	{
		emu_state  *S = new (std::nothrow) emu_state();

		if (S == nullptr)
			return nullptr;
		S->total_memory = DEFAULT_DEVICE_MEMORY;
		S->fail_after = -1;
		g_state = S;
	}
	return g_state;
}

cudaError_t
error(emu_state *S, cudaError_t e)
{
	S->last = e;
	snprintf(S->detail, sizeof(S->detail), "%s", cudaGetErrorName(e));
	return e;
}

cudaError_t
error_detail(emu_state *S, cudaError_t e, const char *fmt,...)
{
	va_list		ap;

	S->last = e;
	va_start(ap, fmt);
	vsnprintf(S->detail, sizeof(S->detail), fmt, ap);
	va_end(ap);
	return e;
}

/* The start of every call that can fail: a sticky error, or an injected one. */
cudaError_t
enter(emu_state *S, bool alloc)
{
	if (S->sticky != cudaSuccess)
		return S->last = S->sticky;	/* keeping the detail of what broke */
	if (S->fail_after > 0 && --S->fail_after == 0)
	{
		S->fail_after = -1;
		return error_detail(S, alloc ? cudaErrorMemoryAllocation : cudaErrorLaunchFailure,
							"injected failure (gbml_emu_fail_after)");
	}
	return cudaSuccess;
}

void
make_sticky(emu_state *S, cudaError_t e)
{
	if (S->sticky == cudaSuccess)
		S->sticky = e;
	S->last = S->sticky;
}

namespace
{
/* ---- streams ---- */

CUstream_st *
find_stream(emu_state *S, cudaStream_t h)
{
	if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread)
		return &S->default_stream;
	for (CUstream_st *s = S->streams; s != nullptr; s = s->next)
		if (s == h)
			return s;
	return nullptr;
}

CUevent_st *
find_event(emu_state *S, cudaEvent_t h)
{
	for (CUevent_st *e = S->events; e != nullptr; e = e->next)
		if (e == h && !e->destroyed)
			return e;
	return nullptr;
}

void
free_event(emu_state *S, CUevent_st *e)
{
	for (CUevent_st **p = &S->events; *p != nullptr; p = &(*p)->next)
		if (*p == e)
		{
			*p = e->next;
			break;
		}
	delete e;
}

void
enqueue(emu_state *S, CUstream_st *s, op *o)
{
	o->next = nullptr;
	o->seq = ++S->seq;
	if (s->tail != nullptr)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
}

op *
pop(CUstream_st *s)
{
	op		   *o = s->head;

	s->head = o->next;
	if (s->head == nullptr)
		s->tail = nullptr;
	return o;
}

void
free_op(emu_state *S, op *o)
{
	if (o->kind == OP_LAUNCH)
		delete o->call;
	else if (o->kind == OP_RECORD && --o->event->pending == 0 && o->event->destroyed)
		free_event(S, o->event);
	delete o;
}

void		run_through(emu_state *S, CUstream_st *s, unsigned long long seq);

/* A kernel argument the card could not dereference is an illegal address. */
bool
check_arguments(emu_state *S, const kernel_call *c)
{
	for (int i = 0; i < c->n_args; i++)
	{
		const void *p = c->ptrs[i];

		if (p == nullptr || find_device(S, p, 0) != nullptr || is_pinned(S, p))
			continue;
		snprintf(S->detail, sizeof(S->detail), "kernel argument %d (%p) %s", i, p,
				 in_quarantine(S, p) ? "points into freed device memory"
				 : "is neither device nor pinned memory (a host pointer?)");
		return false;
	}
	return true;
}

void
run_launch(emu_state *S, op *o)
{
	cudaError_t e;

	if (!check_arguments(S, o->call))
	{
		make_sticky(S, cudaErrorIllegalAddress);
		return;
	}
	e = run_blocks(o->call, o->grid, o->block, o->shared_bytes, S->detail, sizeof(S->detail));
	if (e != cudaSuccess)
		make_sticky(S, e == cudaErrorMemoryAllocation ? cudaErrorLaunchOutOfResources : e);
	else
		check_all_blocks(S, "after a kernel");
}

/* Runs one operation that has been popped; under a sticky error it is dropped. */
void
run_op(emu_state *S, op *o)
{
	if (S->sticky == cudaSuccess)
		switch (o->kind)
		{
			case OP_LAUNCH:
				run_launch(S, o);
				break;
			case OP_COPY:
				memmove(o->dst, o->src, o->count);
				break;
			case OP_MEMSET:
				memset(o->dst, o->value, o->count);
				break;
			case OP_RECORD:
				if (o->seq > o->event->done_seq)
				{
					o->event->done_seq = o->seq;
					o->event->ms = now_ms();
				}
				break;
			case OP_WAIT:
				if (o->wait_stream != nullptr)
					run_through(S, o->wait_stream, o->wait_seq);
				break;
		}
	free_op(S, o);
}

/*
 * Runs stream s's operations up to and including sequence number `seq`.
 * A wait only ever reaches back to earlier sequence numbers, so the
 * recursion through OP_WAIT ends.
 */
void
run_through(emu_state *S, CUstream_st *s, unsigned long long seq)
{
	while (s->head != nullptr && s->head->seq <= seq)
		run_op(S, pop(s));
}


void
drop_queue(emu_state *S, CUstream_st *s)
{
	while (s->head != nullptr)
		free_op(S, pop(s));
}

/* Releases everything (cudaDeviceReset); the settings and the hooks stay. */
void
reset_state(emu_state *S)
{
	drop_queue(S, &S->default_stream);
	while (S->streams != nullptr)
	{
		CUstream_st *s = S->streams;

		S->streams = s->next;
		drop_queue(S, s);
		delete s;
	}
	while (S->events != nullptr)
	{
		CUevent_st *e = S->events;

		S->events = e->next;
		delete e;
	}
	reset_memory(S);
	S->max_dynamic_shared.clear();
	S->n_streams = S->n_events = 0;
	S->last = S->sticky = cudaSuccess;
	S->detail[0] = '\0';
	release_fibers();
}
}								/* anonymous namespace */

void
run_all(emu_state *S)
{
	for (;;)
	{
		CUstream_st *next = S->default_stream.head ? &S->default_stream : nullptr;

		for (CUstream_st *s = S->streams; s != nullptr; s = s->next)
			if (s->head != nullptr && (next == nullptr || s->head->seq < next->head->seq))
				next = s;
		if (next == nullptr)
			return;
		run_op(S, pop(next));
	}
}

cudaError_t
enqueue_data_op(emu_state *S, cudaStream_t h, op_kind kind, void *dst, const void *src,
				size_t count, int value)
{
	CUstream_st *s = find_stream(S, h);
	op		   *o;

	if (s == nullptr)
		return error_detail(S, cudaErrorInvalidResourceHandle, "unknown stream %p", (void *) h);
	if (count == 0)
		return cudaSuccess;
	o = new (std::nothrow) op();
	if (o == nullptr)
		return error(S, cudaErrorMemoryAllocation);
	o->kind = kind;
	o->dst = dst;
	o->src = src;
	o->count = count;
	o->value = value;
	enqueue(S, s, o);
	return cudaSuccess;
}

void
enqueue_launch(kernel_call *call, const void *kernel, dim3 grid, dim3 block,
			   size_t shared_bytes, cudaStream_t stream)
{
	lock_guard guard;
	emu_state  *S = state();
	unsigned long long threads = (unsigned long long) block.x * block.y * block.z;
	size_t		limit = DEFAULT_SHARED_PER_BLOCK;
	CUstream_st *s;
	op		   *o;

	if (S == nullptr || enter(S, false) != cudaSuccess)
		goto fail;
	if (call == nullptr)
	{
		error(S, cudaErrorMemoryAllocation);
		goto fail;
	}
	if (block.x == 0 || block.y == 0 || block.z == 0 ||
		block.x > MAX_THREADS_PER_BLOCK || block.y > MAX_THREADS_PER_BLOCK ||
		block.z > MAX_BLOCK_Z || threads > MAX_THREADS_PER_BLOCK)
	{
		error_detail(S, cudaErrorInvalidConfiguration, "launch with a block of %ux%ux%u threads",
					 block.x, block.y, block.z);
		goto fail;
	}
	if (grid.x == 0 || grid.y == 0 || grid.z == 0 ||
		grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
	{
		error_detail(S, cudaErrorInvalidConfiguration, "launch with a grid of %ux%ux%u blocks",
					 grid.x, grid.y, grid.z);
		goto fail;
	}
	{
		auto		it = S->max_dynamic_shared.find(kernel);

		if (it != S->max_dynamic_shared.end())
			limit = (size_t) it->second.bytes;
	}
	if (shared_bytes > limit)
	{
		error_detail(S, cudaErrorInvalidValue,
					 "launch with %zu bytes of dynamic shared memory, over the kernel's %zu",
					 shared_bytes, limit);
		goto fail;
	}
	s = find_stream(S, stream);
	if (s == nullptr)
	{
		error_detail(S, cudaErrorInvalidResourceHandle, "launch on unknown stream %p", (void *) stream);
		goto fail;
	}
	o = new (std::nothrow) op();
	if (o == nullptr)
	{
		error(S, cudaErrorMemoryAllocation);
		goto fail;
	}
	o->kind = OP_LAUNCH;
	o->call = call;
	o->grid = grid;
	o->block = block;
	o->shared_bytes = shared_bytes;
	enqueue(S, s, o);
	return;

fail:
	delete call;
}
}								/* namespace gbml_emu */

using namespace gbml_emu;

/* ---- device ---- */

cudaError_t
cudaGetDeviceCount(int *count)
{
	API_BEGIN(true, false);
	if (count == nullptr)
		return error(S, cudaErrorInvalidValue);
	*count = 1;
	return cudaSuccess;
}

cudaError_t
cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
	API_BEGIN(true, false);
	if (prop == nullptr)
		return error(S, cudaErrorInvalidValue);
	if (device != 0)
		return error(S, cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "gbml emulated GPU (CPU)");
	prop->totalGlobalMem = (size_t) S->total_memory;
	prop->sharedMemPerBlock = DEFAULT_SHARED_PER_BLOCK;
	prop->sharedMemPerBlockOptin = MAX_SHARED_PER_BLOCK_OPTIN;
	prop->sharedMemPerMultiprocessor = 233472;
	prop->regsPerBlock = 65536;
	prop->regsPerMultiprocessor = 65536;
	prop->warpSize = 32;
	prop->memPitch = 2147483647;
	prop->maxThreadsPerBlock = MAX_THREADS_PER_BLOCK;
	prop->maxThreadsDim[0] = MAX_THREADS_PER_BLOCK;
	prop->maxThreadsDim[1] = MAX_THREADS_PER_BLOCK;
	prop->maxThreadsDim[2] = MAX_BLOCK_Z;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = 65535;
	prop->maxGridSize[2] = 65535;
	prop->clockRate = 1980000;
	prop->totalConstMem = 65536;
	prop->major = 9;
	prop->minor = 0;
	prop->textureAlignment = 512;
	prop->multiProcessorCount = MULTIPROCESSORS;
	prop->canMapHostMemory = 1;
	prop->concurrentKernels = 1;
	prop->asyncEngineCount = 2;
	prop->unifiedAddressing = 1;
	prop->memoryClockRate = 2619000;
	prop->memoryBusWidth = 6144;
	prop->l2CacheSize = 52428800;
	prop->maxThreadsPerMultiProcessor = 2048;
	prop->maxBlocksPerMultiProcessor = 32;
	return cudaSuccess;
}

cudaError_t
cudaSetDevice(int device)
{
	API_BEGIN(true, false);
	if (device != 0)
		return error(S, cudaErrorInvalidDevice);
	return cudaSuccess;
}

cudaError_t
cudaGetDevice(int *device)
{
	API_BEGIN(true, false);
	if (device == nullptr)
		return error(S, cudaErrorInvalidValue);
	*device = 0;
	return cudaSuccess;
}

cudaError_t
cudaRuntimeGetVersion(int *version)
{
	API_BEGIN(false, false);
	if (version == nullptr)
		return error(S, cudaErrorInvalidValue);
	*version = 12040;
	return cudaSuccess;
}

cudaError_t
cudaDriverGetVersion(int *version)
{
	return cudaRuntimeGetVersion(version);
}

cudaError_t
cudaDeviceSynchronize(void)
{
	API_BEGIN(true, false);
	run_all(S);
	return result(S);
}

cudaError_t
cudaDeviceReset(void)
{
	API_BEGIN(false, false);
	reset_state(S);
	return cudaSuccess;
}

/* ---- streams ---- */

cudaError_t
cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
	API_BEGIN(true, false);
	CUstream_st *s;

	if (stream == nullptr || (flags & ~(unsigned int) cudaStreamNonBlocking) != 0)
		return error(S, cudaErrorInvalidValue);
	s = new (std::nothrow) CUstream_st();
	if (s == nullptr)
		return error(S, cudaErrorMemoryAllocation);
	s->flags = flags;
	s->next = S->streams;
	S->streams = s;
	S->n_streams++;
	*stream = s;
	return cudaSuccess;
}

cudaError_t
cudaStreamCreate(cudaStream_t *stream)
{
	return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t
cudaStreamDestroy(cudaStream_t stream)
{
	API_BEGIN(false, false);
	CUstream_st *s = find_stream(S, stream);

	if (s == nullptr || s == &S->default_stream)
		return error_detail(S, cudaErrorInvalidResourceHandle, "cudaStreamDestroy(%p): not a stream",
							(void *) stream);
	run_through(S, s, ~0ull);
	for (CUstream_st **p = &S->streams; *p != nullptr; p = &(*p)->next)
		if (*p == s)
		{
			*p = s->next;
			break;
		}
	/* its work is done, so waits on it that are still queued have nothing to wait for */
	for (CUstream_st *t = &S->default_stream; t != nullptr; t = (t == &S->default_stream ? S->streams : t->next))
		for (op *o = t->head; o != nullptr; o = o->next)
			if (o->kind == OP_WAIT && o->wait_stream == s)
				o->wait_stream = nullptr;
	S->n_streams--;
	delete s;
	return result(S);
}

cudaError_t
cudaStreamSynchronize(cudaStream_t stream)
{
	API_BEGIN(true, false);
	CUstream_st *s = find_stream(S, stream);

	if (s == nullptr)
		return error_detail(S, cudaErrorInvalidResourceHandle, "unknown stream %p", (void *) stream);
	run_through(S, s, ~0ull);
	return result(S);
}

cudaError_t
cudaStreamQuery(cudaStream_t stream)
{
	API_BEGIN(true, false);
	CUstream_st *s = find_stream(S, stream);

	if (s == nullptr)
		return error_detail(S, cudaErrorInvalidResourceHandle, "unknown stream %p", (void *) stream);
	if (s->head == nullptr)
		return cudaSuccess;
	run_through(S, s, ~0ull);
	return S->sticky != cudaSuccess ? S->sticky : cudaErrorNotReady;
}

cudaError_t
cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	API_BEGIN(true, false);
	CUstream_st *s = find_stream(S, stream);
	CUevent_st *e = find_event(S, event);
	op		   *o;

	if (s == nullptr || e == nullptr)
		return error(S, cudaErrorInvalidResourceHandle);
	if (flags != 0)
		return error(S, cudaErrorInvalidValue);
	if (e->done_seq >= e->record_seq)
		return cudaSuccess;		/* never recorded, or its record has run */
	o = new (std::nothrow) op();
	if (o == nullptr)
		return error(S, cudaErrorMemoryAllocation);
	o->kind = OP_WAIT;
	o->wait_stream = e->stream;
	o->wait_seq = e->record_seq;
	enqueue(S, s, o);
	return cudaSuccess;
}

/* ---- events ---- */

cudaError_t
cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	API_BEGIN(true, false);
	CUevent_st *e;

	if (event == nullptr || (flags & ~0x7u) != 0)
		return error(S, cudaErrorInvalidValue);
	e = new (std::nothrow) CUevent_st();
	if (e == nullptr)
		return error(S, cudaErrorMemoryAllocation);
	e->flags = flags;
	e->next = S->events;
	S->events = e;
	S->n_events++;
	*event = e;
	return cudaSuccess;
}

cudaError_t
cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t
cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	API_BEGIN(true, false);
	CUstream_st *s = find_stream(S, stream);
	CUevent_st *e = find_event(S, event);
	op		   *o;

	if (s == nullptr || e == nullptr)
		return error(S, cudaErrorInvalidResourceHandle);
	o = new (std::nothrow) op();
	if (o == nullptr)
		return error(S, cudaErrorMemoryAllocation);
	o->kind = OP_RECORD;
	o->event = e;
	enqueue(S, s, o);
	e->record_seq = o->seq;
	e->stream = s;
	e->pending++;
	return cudaSuccess;
}

cudaError_t
cudaEventQuery(cudaEvent_t event)
{
	API_BEGIN(true, false);
	CUevent_st *e = find_event(S, event);

	if (e == nullptr)
		return error(S, cudaErrorInvalidResourceHandle);
	if (e->done_seq >= e->record_seq)
		return cudaSuccess;
	run_through(S, e->stream, e->record_seq);
	return S->sticky != cudaSuccess ? S->sticky : cudaErrorNotReady;
}

cudaError_t
cudaEventSynchronize(cudaEvent_t event)
{
	API_BEGIN(true, false);
	CUevent_st *e = find_event(S, event);

	if (e == nullptr)
		return error(S, cudaErrorInvalidResourceHandle);
	if (e->done_seq < e->record_seq)
		run_through(S, e->stream, e->record_seq);
	return result(S);
}

cudaError_t
cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	API_BEGIN(true, false);
	CUevent_st *a = find_event(S, start);
	CUevent_st *b = find_event(S, end);

	if (ms == nullptr)
		return error(S, cudaErrorInvalidValue);
	if (a == nullptr || b == nullptr || a->record_seq == 0 || b->record_seq == 0 ||
		((a->flags | b->flags) & cudaEventDisableTiming) != 0)
		return error(S, cudaErrorInvalidResourceHandle);
	if (a->done_seq < a->record_seq || b->done_seq < b->record_seq)
		return cudaErrorNotReady;
	*ms = (float) (b->ms - a->ms);
	return cudaSuccess;
}

cudaError_t
cudaEventDestroy(cudaEvent_t event)
{
	API_BEGIN(false, false);
	CUevent_st *e = find_event(S, event);

	if (e == nullptr)
		return error(S, cudaErrorInvalidResourceHandle);
	e->destroyed = true;
	S->n_events--;
	if (e->pending == 0)
		free_event(S, e);
	return result(S);
}

/* ---- errors and attributes ---- */

cudaError_t
cudaGetLastError(void)
{
	API_BEGIN(false, false);
	cudaError_t e = S->sticky != cudaSuccess ? S->sticky : S->last;

	S->last = cudaSuccess;
	return e;
}

cudaError_t
cudaPeekAtLastError(void)
{
	API_BEGIN(false, false);
	return S->sticky != cudaSuccess ? S->sticky : S->last;
}

static const struct
{
	cudaError_t code;
	const char *name;
	const char *text;
}			error_table[] =
{
	{cudaSuccess, "cudaSuccess", "no error"},
	{cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
	{cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
	{cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
	{cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
	{cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
	{cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
	{cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
	{cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
	{cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
	{cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
	{cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
	{cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
	{cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
	{cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const char *
cudaGetErrorString(cudaError_t error)
{
	for (const auto &e : error_table)
		if (e.code == error)
			return e.text;
	return "unrecognized error code";
}

const char *
cudaGetErrorName(cudaError_t error)
{
	for (const auto &e : error_table)
		if (e.code == error)
			return e.name;
	return "cudaErrorUnknown";
}

cudaError_t
cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	API_BEGIN(true, false);
	if (func == nullptr)
		return error(S, cudaErrorInvalidValue);
	if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
		return value >= -1 && value <= 100 ? cudaSuccess : error(S, cudaErrorInvalidValue);
	if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
		value > MAX_SHARED_PER_BLOCK_OPTIN)
		return error_detail(S, cudaErrorInvalidValue, "cudaFuncSetAttribute(%d, %d)", (int) attr, value);
	try
	{
		S->max_dynamic_shared[func] = shared_limit{value};
	}
	catch (...)
	{
		return error(S, cudaErrorMemoryAllocation);
	}
	return cudaSuccess;
}

/* ---- test hooks ---- */

void
gbml_emu_stats(long long *device_bytes, long long *device_allocs, long long *pinned_bytes,
			   long long *pinned_allocs, long long *streams, long long *events)
{
	lock_guard guard;
	emu_state  *S = state();
	bool		ok = S != nullptr;

	if (device_bytes)
		*device_bytes = ok ? S->device_bytes : 0;
	if (device_allocs)
		*device_allocs = ok ? (long long) S->device.size() : 0;
	if (pinned_bytes)
		*pinned_bytes = ok ? S->pinned_bytes : 0;
	if (pinned_allocs)
		*pinned_allocs = ok ? (long long) S->pinned.size() : 0;
	if (streams)
		*streams = ok ? S->n_streams : 0;
	if (events)
		*events = ok ? S->n_events : 0;
}


void
gbml_emu_fail_after(long long n)
{
	lock_guard guard;
	emu_state  *S = state();

	if (S != nullptr)
		S->fail_after = n > 0 ? n : -1;
}

const char *
gbml_emu_error_detail(void)
{
	lock_guard guard;
	emu_state  *S = state();

	return S != nullptr && S->detail[0] ? S->detail : "no error";
}
