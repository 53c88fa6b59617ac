/*
 * emu_fibers.cpp — the block scheduler of the CUDA emulation: runs a launch's
 * blocks one after another, in blockIdx order (x fastest), on the calling OS
 * thread, with each thread of a block a cooperative fiber.  Also owns the
 * device-side synchronization: __syncthreads() and its counting variants,
 * and the warp collectives (__syncwarp, shuffles, votes).
 *
 * Scheduling: the scheduler sweeps the block's fibers in linear thread-id
 * order and runs each runnable one until it blocks (at a barrier or a warp
 * collective that is still waiting for lanes) or returns.  Running a fiber
 * as far as it goes, rather than a step at a time, is what makes a missing
 * __syncthreads() visible: thread 0 runs to the point where it reads its
 * neighbours' shared memory before any of them has written it.  When a sweep
 * finds nothing runnable, either every live thread waits at __syncthreads()
 * and all are released, or the block is stuck and the launch fails.
 *
 * A warp collective completes when the last live lane named in its mask
 * arrives: that lane computes every participant's result at once (so a
 * fast lane that moves on to the next collective cannot overwrite a value a
 * slow lane has yet to read), releases the others and carries on without
 * yielding.
 *
 * Fibers and their stacks live as long as the OS thread (or until
 * cudaDeviceReset) and are reused by every block of every launch; a fiber
 * that returns from the kernel parks at the top of its loop, ready for the
 * next block.  On x86-64 a fiber switch is a few instructions of assembly
 * (callee-saved registers and the stack pointer); elsewhere, or with
 * -DGBML_EMU_UCONTEXT, it is swapcontext(), which also makes a sigprocmask
 * system call per switch and so is several times slower.
 */
#include "emu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(GBML_EMU_UCONTEXT)
#define EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

namespace gbml_emu
{
__thread thread_ctx *cur;
}

#ifdef EMU_ASM_SWITCH
/*
 * gbml_emu_switch(save, load): push the callee-saved registers, store the
 * stack pointer in *save, continue on stack `load` where the same layout was
 * pushed (by an earlier switch, or by fiber_prepare for a fresh fiber).
 */
extern "C" __attribute__((visibility("hidden"))) void gbml_emu_switch(void **save, void *load);

asm(".pushsection .text\n"
	".globl gbml_emu_switch\n"
	".hidden gbml_emu_switch\n"
	".type gbml_emu_switch, @function\n"
	".p2align 4\n"
	"gbml_emu_switch:\n"
	"	pushq %rbp\n"
	"	pushq %rbx\n"
	"	pushq %r12\n"
	"	pushq %r13\n"
	"	pushq %r14\n"
	"	pushq %r15\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	popq %r15\n"
	"	popq %r14\n"
	"	popq %r13\n"
	"	popq %r12\n"
	"	popq %rbx\n"
	"	popq %rbp\n"
	"	ret\n"
	".size gbml_emu_switch, .-gbml_emu_switch\n"
	".popsection\n");
#endif

namespace gbml_emu
{
namespace
{
enum
{
	STACK_SIZE = 64 * 1024,		/* per fiber, plus one guard page below */
	SHARED_REDZONE = 64,		/* checked after each block */
	SHARED_POISON = 0xA5,
	SHARED_CANARY = 0xFB
};

/* A lane reading a lane that is not taking part gets this. */
const unsigned long long WARP_POISON = 0xA5A5A5A5A5A5A5A5ull;

enum fiber_state
{
	F_RUNNABLE, F_AT_BARRIER, F_AT_WARP, F_AT_ACTIVE, F_EXITED
};

struct fiber
{
	thread_ctx	t;
	int			state;
	int			pred;			/* __syncthreads_count & co */
	bool		fresh;			/* context must be built before running */
	/* the warp collective it waits at, and its result */
	int			wkind;
	unsigned int wmask;
	int			wparam;
	int			wwidth;
	unsigned long long wval;
	unsigned long long wres;
	const void *site;			/* where it called __activemask() */
	char	   *map;			/* guard page + stack */
#ifdef EMU_ASM_SWITCH
	void	   *sp;
#else
	ucontext_t	uc;
#endif
};

struct warp_state
{
	unsigned int live;			/* lanes that exist and have not returned */
	unsigned int arrived;		/* lanes waiting at a warp collective */
	unsigned int at_active;		/* lanes waiting in __activemask() */
};

struct sched
{
	fiber	  **fibers;			/* each allocated apart: a ucontext_t must not move */
	unsigned int n_fibers;
	fiber	   *running;
#ifdef EMU_ASM_SWITCH
	void	   *sched_sp;
#else
	ucontext_t	sched_uc;
#endif
	block_ctx	blk;
	kernel_call *call;
	unsigned int nthreads;
	unsigned int live;
	unsigned int at_barrier;
	unsigned int bar_count;		/* of the barrier just released */
	unsigned int bar_n;
	warp_state	warps[MAX_THREADS_PER_BLOCK / 32];
	bool		failed;
	char	   *detail;
	size_t		detail_size;
	unsigned char *shared_mem;	/* MAX_SHARED_PER_BLOCK_OPTIN + red zone */
};

__thread sched *tls;

size_t
page_size()
{
	long		p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (size_t) p : 4096;
}

void		fiber_entry();

void
fiber_prepare(fiber *f)
{
	char	   *stack = f->map + page_size();

#ifdef EMU_ASM_SWITCH
	void	  **sp = (void **) (((uintptr_t) (stack + STACK_SIZE)) & ~(uintptr_t) 15);

	*--sp = nullptr;			/* fiber_entry's return address: it never returns */
	*--sp = reinterpret_cast<void *>(&fiber_entry);
	for (int i = 0; i < 6; i++)
		*--sp = nullptr;		/* rbp rbx r12 r13 r14 r15 */
	f->sp = sp;
#else
	getcontext(&f->uc);
	f->uc.uc_stack.ss_sp = stack;
	f->uc.uc_stack.ss_size = STACK_SIZE;
	f->uc.uc_link = nullptr;
	makecontext(&f->uc, fiber_entry, 0);
#endif
	f->fresh = false;
}

inline void
resume(sched *S, fiber *f)
{
	S->running = f;
	cur = &f->t;
#ifdef EMU_ASM_SWITCH
	gbml_emu_switch(&S->sched_sp, f->sp);
#else
	swapcontext(&S->sched_uc, &f->uc);
#endif
}

inline void
to_scheduler(sched *S, fiber *f)
{
#ifdef EMU_ASM_SWITCH
	gbml_emu_switch(&f->sp, S->sched_sp);
#else
	swapcontext(&f->uc, &S->sched_uc);
#endif
}

void
fail(sched *S, const fiber *f, const char *what)
{
	const uint3 &b = S->blk.block_idx;
	const uint3 &t = f->t.thread_idx;

	if (!S->failed)
		snprintf(S->detail, S->detail_size, "block (%u,%u,%u) thread (%u,%u,%u): %s",
				 b.x, b.y, b.z, t.x, t.y, t.z, what);
	S->failed = true;
}

inline fiber *
lane_fiber(sched *S, unsigned int warp, unsigned int lane)
{
	return S->fibers[warp * 32 + lane];
}

/* Source lane of a shuffle for `lane`, or `lane` itself when out of range. */
unsigned int
shuffle_source(int kind, unsigned int lane, int param, int width)
{
	unsigned int w = (unsigned int) width;
	unsigned int seg = lane & ~(w - 1);
	unsigned int pos = lane & (w - 1);
	unsigned int delta = (unsigned int) param;

	switch (kind)
	{
		case WARP_SHFL:
			return seg + (delta & (w - 1));
		case WARP_SHFL_UP:
			return pos >= delta ? lane - delta : lane;
		case WARP_SHFL_DOWN:
			return pos + delta < w ? lane + delta : lane;
		default:				/* WARP_SHFL_XOR: may read earlier segments, not later */
			{
				unsigned int src = lane ^ delta;

				return src < seg + w ? src : lane;
			}
	}
}

/*
 * Completes the collective `kind` over `mask` in warp `wi` if every live lane
 * of the mask has arrived: computes each lane's result and makes them all
 * runnable.  Returns false when lanes are still missing or on a mismatch
 * (then S->failed is set).
 */
bool
try_complete(sched *S, unsigned int wi, int kind, unsigned int mask)
{
	warp_state *w = &S->warps[wi];
	unsigned int need = mask & w->live;
	unsigned int ballot = 0;
	fiber	   *lanes[32];

	if ((w->arrived & need) != need)
		return false;
	for (unsigned int m = need; m != 0; m &= m - 1)
	{
		unsigned int lane = (unsigned int) __builtin_ctz(m);
		fiber	   *g = lane_fiber(S, wi, lane);

		if (g->wmask != mask || g->wkind != kind)
		{
			fail(S, g, "lanes of a warp meet at different warp operations or masks");
			return false;
		}
		lanes[lane] = g;
		if (g->wval != 0)
			ballot |= 1u << lane;
	}
	for (unsigned int m = need; m != 0; m &= m - 1)
	{
		unsigned int lane = (unsigned int) __builtin_ctz(m);
		fiber	   *g = lanes[lane];

		switch (kind)
		{
			case WARP_SYNC:
				g->wres = 0;
				break;
			case WARP_BALLOT:
				g->wres = ballot;
				break;
			case WARP_ANY:
				g->wres = ballot != 0;
				break;
			case WARP_ALL:
				g->wres = ballot == need;
				break;
			default:
				{
					unsigned int src = shuffle_source(kind, lane, g->wparam, g->wwidth);

					if (src == lane)
						g->wres = g->wval;
					else if (src < 32 && (need >> src) & 1)
						g->wres = lanes[src]->wval;
					else
						g->wres = WARP_POISON;
				}
		}
		g->state = F_RUNNABLE;
	}
	w->arrived &= ~need;
	return true;
}

/*
 * Answers the lanes of warp wi waiting in __activemask() once none of its
 * live lanes can still get there (all have blocked or returned): each gets
 * the set of lanes waiting at its call site.  True if it answered.
 */
bool
resolve_active(sched *S, unsigned int wi)
{
	warp_state *w = &S->warps[wi];
	unsigned int rest = w->at_active;

	if (rest == 0)
		return false;
	for (unsigned int m = w->live; m != 0; m &= m - 1)
		if (lane_fiber(S, wi, (unsigned int) __builtin_ctz(m))->state == F_RUNNABLE)
			return false;
	while (rest != 0)
	{
		const void *site = lane_fiber(S, wi, (unsigned int) __builtin_ctz(rest))->site;
		unsigned int group = 0;

		for (unsigned int m = rest; m != 0; m &= m - 1)
			if (lane_fiber(S, wi, (unsigned int) __builtin_ctz(m))->site == site)
				group |= 1u << __builtin_ctz(m);
		for (unsigned int m = group; m != 0; m &= m - 1)
		{
			fiber	   *g = lane_fiber(S, wi, (unsigned int) __builtin_ctz(m));

			g->wres = group;
			g->state = F_RUNNABLE;
		}
		rest &= ~group;
	}
	w->at_active = 0;
	return true;
}

/* A fiber returned from the kernel: it no longer holds up its warp's collectives. */
void
fiber_exited(sched *S, fiber *f)
{
	unsigned int wi = f->t.linear >> 5;
	warp_state *w = &S->warps[wi];
	unsigned int pending;

	f->state = F_EXITED;
	S->live--;
	w->live &= ~(1u << (f->t.linear & 31));
	pending = w->arrived;
	while (pending != 0 && !S->failed)
	{
		fiber	   *g = lane_fiber(S, wi, (unsigned int) __builtin_ctz(pending));

		try_complete(S, wi, g->wkind, g->wmask);
		pending &= ~g->wmask;
	}
	resolve_active(S, wi);
}

/* Every fiber's loop: run the kernel once per block, park in between. */
void
fiber_entry()
{
	for (;;)
	{
		sched	   *S = tls;
		fiber	   *f = S->running;

		S->call->run();
		fiber_exited(S, f);
		to_scheduler(S, f);
	}
}

sched *
get_sched()
{
	sched	   *S = tls;
	void	   *mem = nullptr;

	if (S != nullptr)
		return S;
	S = (sched *) calloc(1, sizeof(sched));
	if (S == nullptr)
		return nullptr;
	if (posix_memalign(&mem, 256, MAX_SHARED_PER_BLOCK_OPTIN + SHARED_REDZONE) != 0)
	{
		free(S);
		return nullptr;
	}
	S->shared_mem = (unsigned char *) mem;
	tls = S;
	return S;
}

bool
ensure_fibers(sched *S, unsigned int n)
{
	size_t		map_len = page_size() + STACK_SIZE;

	if (n <= S->n_fibers)
		return true;
	fiber	  **grown = (fiber **) realloc(S->fibers, n * sizeof(fiber *));

	if (grown == nullptr)
		return false;
	S->fibers = grown;
	while (S->n_fibers < n)
	{
		fiber	   *f = (fiber *) calloc(1, sizeof(fiber));
		void	   *map;

		if (f == nullptr)
			return false;
		map = mmap(nullptr, map_len, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (map == MAP_FAILED)
		{
			free(f);
			return false;
		}
		/* a stack overflow faults on the guard page instead of corrupting the heap */
		mprotect(map, page_size(), PROT_NONE);
		f->map = (char *) map;
		f->fresh = true;
		S->fibers[S->n_fibers++] = f;
	}
	return true;
}

/* Runs one block to the end; false (with S->detail) when it got stuck or failed. */
bool
run_block(sched *S)
{
	unsigned int n = S->nthreads;

	for (unsigned int wi = 0; wi * 32 < n; wi++)
	{
		unsigned int lanes = n - wi * 32;

		S->warps[wi].live = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1;
		S->warps[wi].arrived = 0;
		S->warps[wi].at_active = 0;
	}
	for (unsigned int i = 0; i < n; i++)
	{
		fiber	   *f = S->fibers[i];

		if (f->fresh)
			fiber_prepare(f);
		f->state = F_RUNNABLE;
	}
	S->live = n;
	S->at_barrier = 0;

	for (;;)
	{
		bool		ran = false;

		for (unsigned int i = 0; i < n; i++)
		{
			fiber	   *f = S->fibers[i];

			if (f->state != F_RUNNABLE)
				continue;
			resume(S, f);
			ran = true;
			if (S->failed)
				goto failed;
		}
		if (ran)
			continue;
		if (S->live == 0)
			return true;
		if (S->at_barrier == S->live)
		{
			unsigned int count = 0;

			for (unsigned int i = 0; i < n; i++)
			{
				fiber	   *f = S->fibers[i];

				if (f->state == F_AT_BARRIER)
				{
					count += f->pred != 0;
					f->state = F_RUNNABLE;
				}
			}
			S->bar_count = count;
			S->bar_n = S->at_barrier;
			S->at_barrier = 0;
			continue;
		}
		for (unsigned int i = 0; i < n; i++)
			if (S->fibers[i]->state != F_EXITED)
			{
				char		what[160];

				snprintf(what, sizeof(what),
						 "stuck: %u of %u live threads wait at __syncthreads(), the rest at a warp operation",
						 S->at_barrier, S->live);
				fail(S, S->fibers[i], what);
				break;
			}
		goto failed;
	}

failed:
	/* the fibers are abandoned mid-kernel: rebuild their contexts before reuse */
	for (unsigned int i = 0; i < n; i++)
		S->fibers[i]->fresh = true;
	return false;
}
}								/* anonymous namespace */

int
block_barrier(int kind, int pred)
{
	sched	   *S = tls;
	fiber	   *f = S->running;

	f->pred = pred;
	f->state = F_AT_BARRIER;
	S->at_barrier++;
	resolve_active(S, f->t.linear >> 5);
	to_scheduler(S, f);
	switch (kind)
	{
		case BAR_COUNT:
			return (int) S->bar_count;
		case BAR_OR:
			return S->bar_count != 0;
		case BAR_AND:
			return S->bar_count == S->bar_n;
		default:
			return 0;
	}
}

unsigned long long
warp_op(int kind, unsigned int mask, unsigned long long value, int param, int width)
{
	sched	   *S = tls;
	fiber	   *f = S->running;
	unsigned int wi = f->t.linear >> 5;
	unsigned int lane = f->t.linear & 31;

	if (!((mask >> lane) & 1))
		fail(S, f, "a warp operation's mask leaves out the lane that calls it");
	else if (width < 1 || width > 32 || (width & (width - 1)) != 0)
		fail(S, f, "a shuffle's width is not a power of two from 1 to 32");
	if (S->failed)
	{
		to_scheduler(S, f);		/* never resumed */
		return 0;
	}
	f->wkind = kind;
	f->wmask = mask;
	f->wparam = param;
	f->wwidth = width;
	f->wval = value;
	f->state = F_AT_WARP;
	S->warps[wi].arrived |= 1u << lane;
	if (!try_complete(S, wi, kind, mask))
	{
		if (!S->failed)
			resolve_active(S, wi);
		to_scheduler(S, f);		/* resumed once the last lane arrives */
	}
	return f->wres;
}

unsigned int
active_mask()
{
	sched	   *S = tls;
	fiber	   *f = S->running;
	unsigned int wi = f->t.linear >> 5;

	f->site = __builtin_return_address(0);
	f->state = F_AT_ACTIVE;
	S->warps[wi].at_active |= 1u << (f->t.linear & 31);
	if (!resolve_active(S, wi))
		to_scheduler(S, f);		/* resumed when the rest of the warp has blocked */
	return (unsigned int) f->wres;
}

cudaError_t
run_blocks(kernel_call *call, dim3 grid, dim3 block, size_t shared_bytes,
		   char *detail, size_t detail_size)
{
	sched	   *S = get_sched();
	unsigned int n = block.x * block.y * block.z;
	unsigned char canary[SHARED_REDZONE];

	if (S == nullptr || !ensure_fibers(S, n))
	{
		snprintf(detail, detail_size, "no memory for %u fibers", n);
		return cudaErrorMemoryAllocation;
	}
	S->call = call;
	S->nthreads = n;
	S->failed = false;
	S->detail = detail;
	S->detail_size = detail_size;
	S->blk.block_dim = block;
	S->blk.grid_dim = grid;
	S->blk.dyn_shared = S->shared_mem;
	for (unsigned int i = 0; i < n; i++)
	{
		fiber	   *f = S->fibers[i];

		f->t.thread_idx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
		f->t.linear = i;
		f->t.blk = &S->blk;
	}
	memset(canary, SHARED_CANARY, sizeof(canary));

	for (unsigned int z = 0; z < grid.z; z++)
		for (unsigned int y = 0; y < grid.y; y++)
			for (unsigned int x = 0; x < grid.x; x++)
			{
				S->blk.block_idx = uint3{x, y, z};
				/* real shared memory starts as whatever the last block left */
				memset(S->shared_mem, SHARED_POISON, shared_bytes);
				memset(S->shared_mem + shared_bytes, SHARED_CANARY, SHARED_REDZONE);
				if (!run_block(S))
					return cudaErrorLaunchFailure;
				if (memcmp(S->shared_mem + shared_bytes, canary, SHARED_REDZONE) != 0)
				{
					snprintf(detail, detail_size,
							 "block (%u,%u,%u) wrote past its %zu bytes of dynamic shared memory",
							 x, y, z, shared_bytes);
					return cudaErrorIllegalAddress;
				}
			}
	return cudaSuccess;
}

void
release_fibers()
{
	sched	   *S = tls;

	if (S == nullptr)
		return;
	for (unsigned int i = 0; i < S->n_fibers; i++)
	{
		munmap(S->fibers[i]->map, page_size() + STACK_SIZE);
		free(S->fibers[i]);
	}
	free(S->fibers);
	free(S->shared_mem);
	free(S);
	tls = nullptr;
}
}								/* namespace gbml_emu */
