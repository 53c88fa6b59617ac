/*
 * emu_memory.cpp — the emulated device's memory and the copies into and out
 * of it: cudaMalloc blocks with red zones, pinned host memory, a quarantine
 * for freed device blocks, and the checks that make memory bugs visible.
 *
 * Every device block is 256-byte aligned, starts filled with 0xCD (real
 * device memory is not zeroed, and a kernel reading what nobody wrote should
 * get garbage, not a plausible 0), and sits between two 256-byte red zones
 * of 0xFB that are checked after every launch and at cudaFree; a damaged one
 * is a sticky cudaErrorIllegalAddress.  A freed block of up to 1 MB stays
 * allocated, filled with 0xDD, in a quarantine of at most 16 MB / 4096
 * blocks: a kernel handed a pointer into it fails (emu_runtime.cpp checks
 * pointer arguments against the live blocks), a read of it gives garbage,
 * and a write to it is found when it leaves the quarantine.  A copy or memset
 * whose device range is not inside one live block fails when it is called.
 */
#include "emu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace gbml_emu
{
namespace
{
enum
{
	REDZONE = 256,				/* before and after every device block */
	ALLOC_POISON = 0xCD,		/* fresh device and pinned memory */
	FREED_POISON = 0xDD,		/* device memory in quarantine */
	CANARY = 0xFB				/* red zones */
};

const size_t QUARANTINE_MAX_BLOCK = 1 << 20;	/* larger blocks are freed at once */
const size_t QUARANTINE_BYTES = 16 << 20;
const size_t QUARANTINE_BLOCKS = 4096;

bool
all_bytes(const char *p, size_t n, int byte)
{
	/* every byte equals the first, and the first is `byte` */
	return n == 0 || ((unsigned char) p[0] == byte && memcmp(p, p + 1, n - 1) == 0);
}

/* False, with the detail written, when a red zone of `b` was overwritten. */
bool
check_block(emu_state *S, const device_block &b, const char *when)
{
	const char *user = b.base + REDZONE;

	if (all_bytes(b.base, REDZONE, CANARY) && all_bytes(user + b.size, REDZONE, CANARY))
		return true;
	snprintf(S->detail, sizeof(S->detail),
			 "%s: out-of-bounds write %s the %zu-byte device allocation at %p",
			 when, all_bytes(b.base, REDZONE, CANARY) ? "past the end of" : "before",
			 b.size, (const void *) user);
	return false;
}

/* Frees the oldest quarantined block, after checking nobody wrote to it. */
void
evict_oldest(emu_state *S)
{
	freed_block *q = S->q_head;

	S->q_head = q->next;
	if (S->q_head == nullptr)
		S->q_tail = nullptr;
	S->q_bytes -= q->size;
	S->q_count--;
	if (!all_bytes(q->base + REDZONE, q->size, FREED_POISON))
	{
		snprintf(S->detail, sizeof(S->detail),
				 "a write to device memory after it was freed (a %zu-byte block at %p)",
				 q->size, (void *) (q->base + REDZONE));
		make_sticky(S, cudaErrorIllegalAddress);
	}
	free(q->base);
	delete q;
}

void
quarantine(emu_state *S, const device_block &b)
{
	freed_block *q = nullptr;

	if (b.size <= QUARANTINE_MAX_BLOCK)
		q = new (std::nothrow) freed_block{nullptr, b.base, b.size};
	if (q == nullptr)
	{
		free(b.base);
		return;
	}
	memset(b.base + REDZONE, FREED_POISON, b.size);
	if (S->q_tail != nullptr)
		S->q_tail->next = q;
	else
		S->q_head = q;
	S->q_tail = q;
	S->q_bytes += b.size;
	S->q_count++;
	while (S->q_bytes > QUARANTINE_BYTES || S->q_count > QUARANTINE_BLOCKS)
		evict_oldest(S);
}

/* ---- copies ---- */

/* Checks a copy's pointers at enqueue; device ranges must lie inside one live block. */
cudaError_t
check_copy(emu_state *S, void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
	bool		dst_dev;
	bool		src_dev;

	switch (kind)
	{
		case cudaMemcpyHostToHost:
			dst_dev = src_dev = false;
			break;
		case cudaMemcpyHostToDevice:
			dst_dev = true;
			src_dev = false;
			break;
		case cudaMemcpyDeviceToHost:
			dst_dev = false;
			src_dev = true;
			break;
		case cudaMemcpyDeviceToDevice:
			dst_dev = src_dev = true;
			break;
		case cudaMemcpyDefault:
			dst_dev = find_device(S, dst, 0) != nullptr;
			src_dev = find_device(S, src, 0) != nullptr;
			break;
		default:
			return error_detail(S, cudaErrorInvalidMemcpyDirection, "bad cudaMemcpyKind %d", (int) kind);
	}
	if (count == 0)
		return cudaSuccess;
	if (dst == nullptr || src == nullptr)
		return error_detail(S, cudaErrorInvalidValue, "copy of %zu bytes with a NULL pointer", count);
	if (dst_dev && find_device(S, dst, count) == nullptr)
		return error_detail(S, cudaErrorInvalidValue,
							"copy destination [%p, +%zu) is not inside one live device allocation",
							dst, count);
	if (src_dev && find_device(S, src, count) == nullptr)
		return error_detail(S, cudaErrorInvalidValue,
							"copy source [%p, +%zu) is not inside one live device allocation",
							src, count);
	return cudaSuccess;
}

cudaError_t
check_memset(emu_state *S, void *ptr, size_t count)
{
	if (count > 0 && find_device(S, ptr, count) == nullptr)
		return error_detail(S, cudaErrorInvalidValue,
							"memset range [%p, +%zu) is not inside one live device allocation",
							ptr, count);
	return cudaSuccess;
}
}								/* anonymous namespace */

/* The live block holding [p, p + n), or null.  n = 0 still needs p inside or at the end. */
device_block *
find_device(emu_state *S, const void *p, size_t n)
{
	uintptr_t	a = (uintptr_t) p;
	auto		it = S->device.upper_bound(a);

	if (it == S->device.begin())
		return nullptr;
	--it;
	if (a - it->first > it->second.size || n > it->second.size - (a - it->first))
		return nullptr;
	return &it->second;
}

bool
is_pinned(emu_state *S, const void *p)
{
	uintptr_t	a = (uintptr_t) p;
	auto		it = S->pinned.upper_bound(a);

	if (it == S->pinned.begin())
		return false;
	--it;
	return a - it->first <= it->second.size;
}

bool
in_quarantine(emu_state *S, const void *p)
{
	for (freed_block *q = S->q_head; q != nullptr; q = q->next)
		if ((const char *) p >= q->base + REDZONE && (const char *) p <= q->base + REDZONE + q->size)
			return true;
	return false;
}

void
check_all_blocks(emu_state *S, const char *when)
{
	for (auto &it : S->device)
		if (!check_block(S, it.second, when))
		{
			make_sticky(S, cudaErrorIllegalAddress);
			return;
		}
}

void
reset_memory(emu_state *S)
{
	for (auto &it : S->device)
		free(it.second.base);
	S->device.clear();
	for (auto &it : S->pinned)
		free((void *) it.first);
	S->pinned.clear();
	while (S->q_head != nullptr)
	{
		freed_block *q = S->q_head;

		S->q_head = q->next;
		free(q->base);
		delete q;
	}
	S->q_tail = nullptr;
	S->q_bytes = 0;
	S->q_count = 0;
	S->device_bytes = S->pinned_bytes = 0;
}
}								/* namespace gbml_emu */

using namespace gbml_emu;

cudaError_t
cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	API_BEGIN(true, false);
	if (free_bytes == nullptr || total_bytes == nullptr)
		return error(S, cudaErrorInvalidValue);
	*free_bytes = (size_t) (S->total_memory - S->device_bytes);
	*total_bytes = (size_t) S->total_memory;
	return cudaSuccess;
}

/* ---- memory ---- */

cudaError_t
cudaMalloc(void **ptr, size_t size)
{
	API_BEGIN(true, true);
	void	   *base = nullptr;

	if (ptr == nullptr)
		return error(S, cudaErrorInvalidValue);
	*ptr = nullptr;
	if (size == 0)
		return cudaSuccess;
	if (size > (size_t) (S->total_memory - S->device_bytes))
		return error_detail(S, cudaErrorMemoryAllocation,
							"cudaMalloc(%zu): %lld of %lld bytes of the emulated device in use",
							size, S->device_bytes, S->total_memory);
	/* cudaMalloc aligns to 256 bytes; the leading red zone keeps that */
	if (posix_memalign(&base, 256, size + 2 * REDZONE) != 0)
		return error_detail(S, cudaErrorMemoryAllocation, "cudaMalloc(%zu): host memory exhausted", size);
	memset(base, CANARY, REDZONE);
	memset((char *) base + REDZONE, ALLOC_POISON, size);
	memset((char *) base + REDZONE + size, CANARY, REDZONE);
	try
	{
		S->device.emplace((uintptr_t) base + REDZONE, device_block{(char *) base, size});
	}
	catch (...)
	{
		free(base);
		return error(S, cudaErrorMemoryAllocation);
	}
	S->device_bytes += (long long) size;
	*ptr = (char *) base + REDZONE;
	return cudaSuccess;
}

cudaError_t
cudaFree(void *ptr)
{
	API_BEGIN(false, false);
	if (ptr == nullptr)
		return result(S);
	run_all(S);
	auto		it = S->device.find((uintptr_t) ptr);

	if (it == S->device.end())
		return error_detail(S, cudaErrorInvalidValue,
							"cudaFree(%p): not the start of a live device allocation%s", ptr,
							in_quarantine(S, ptr) ? " (freed already)" : "");
	device_block b = it->second;

	S->device.erase(it);
	S->device_bytes -= (long long) b.size;
	if (!check_block(S, b, "at cudaFree"))
		make_sticky(S, cudaErrorIllegalAddress);
	quarantine(S, b);
	return result(S);
}

cudaError_t
cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
	API_BEGIN(true, true);
	void	   *p = nullptr;

	if (ptr == nullptr || (flags & ~0x7u) != 0)
		return error(S, cudaErrorInvalidValue);
	*ptr = nullptr;
	if (size == 0)
		return cudaSuccess;
	if (posix_memalign(&p, 4096, size) != 0)
		return error_detail(S, cudaErrorMemoryAllocation, "cudaHostAlloc(%zu): host memory exhausted", size);
	memset(p, ALLOC_POISON, size);
	try
	{
		S->pinned.emplace((uintptr_t) p, pinned_block{size});
	}
	catch (...)
	{
		free(p);
		return error(S, cudaErrorMemoryAllocation);
	}
	S->pinned_bytes += (long long) size;
	*ptr = p;
	return cudaSuccess;
}

cudaError_t
cudaMallocHost(void **ptr, size_t size)
{
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t
cudaFreeHost(void *ptr)
{
	API_BEGIN(false, false);
	if (ptr == nullptr)
		return result(S);
	run_all(S);					/* queued copies may still read or write it */
	auto		it = S->pinned.find((uintptr_t) ptr);

	if (it == S->pinned.end())
		return error_detail(S, cudaErrorInvalidValue, "cudaFreeHost(%p): not a pinned allocation", ptr);
	S->pinned_bytes -= (long long) it->second.size;
	S->pinned.erase(it);
	free(ptr);
	return result(S);
}

cudaError_t
cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	API_BEGIN(true, false);
	cudaError_t e = check_copy(S, dst, src, count, kind);

	if (e != cudaSuccess)
		return e;
	run_all(S);
	if (S->sticky == cudaSuccess && count > 0)
		memmove(dst, src, count);
	return result(S);
}

cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
				cudaStream_t stream)
{
	API_BEGIN(true, false);
	cudaError_t e = check_copy(S, dst, src, count, kind);

	if (e != cudaSuccess)
		return e;
	return enqueue_data_op(S, stream, OP_COPY, dst, src, count, 0);
}

cudaError_t
cudaMemset(void *ptr, int value, size_t count)
{
	API_BEGIN(true, false);
	cudaError_t e = check_memset(S, ptr, count);

	if (e != cudaSuccess)
		return e;
	run_all(S);
	if (S->sticky == cudaSuccess && count > 0)
		memset(ptr, value, count);
	return result(S);
}

cudaError_t
cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
	API_BEGIN(true, false);
	cudaError_t e = check_memset(S, ptr, count);

	if (e != cudaSuccess)
		return e;
	return enqueue_data_op(S, stream, OP_MEMSET, ptr, nullptr, count, value);
}

/* ---- test hook ---- */

void
gbml_emu_set_device_memory(long long bytes)
{
	lock_guard guard;
	emu_state  *S = state();

	if (S != nullptr && bytes > 0 && S->device.empty())
		S->total_memory = bytes;
}
