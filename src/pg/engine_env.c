/*
 * engine_env.c — binds the engine's environment to PostgreSQL: allocations
 * in a MemoryContext (huge allocations allowed, failures reported to the
 * engine instead of longjmp'ing out of it; big blocks mapped directly and
 * unmapped off the critical path), the memory budget, query cancel
 * and progress NOTICEs, the GPU backend, temporary files (tempfile.c), and
 * engine errors as ERRORs.
 *
 * The hooks run only on the backend's main thread: the engine promises not
 * to allocate or report progress inside parallel regions.
 */
#include "glue.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include "miscadmin.h"
#include "utils/memutils.h"

typedef struct progress_state
{
	const char *what;
	double		started;
	double		last_notice;
} progress_state;

/*
 * Big blocks (dataset chunks, bins, gradients: BIG_BLOCK bytes and more) are
 * mapped directly instead of palloc'd, so that giving them back can leave
 * the backend's critical path: unmapping 400 MB of 4 KB pages takes about
 * 30 ms here, paid at the end of every big training.  A binding lists its
 * blocks; gbml_free unmaps one at once, and the reset callback of the
 * binding's MemoryContext (end of query, ERROR, cancel) hands all that are
 * left, when they are 64 MB or more, to a detached thread that only calls
 * munmap — no PostgreSQL API, all signals blocked — or unmaps them itself
 * (less than that, or if no thread can be started).
 * Callbacks run newest first, so a dataset's guard (registered after the
 * binding) has stopped its pre-fault thread before its pages go.
 * The blocks count in their context's mem_allocated, as palloc'd ones would:
 * hash aggregation reads it to spill at work_mem (a GROUP BY over a fit
 * aggregate), and MemoryContextMemAllocated reports it.  Reset callbacks run
 * before the context's own reset, which checks that figure.
 */
#define BIG_BLOCK ((size_t) 8 << 20)
#define BIG_HEADER 64			/* keeps the block's payload 64-byte aligned */
#define BACKGROUND_UNMAP_BYTES ((size_t) 64 << 20)

typedef struct big_block
{
	struct big_block *prev,
			   *next;
	size_t		mapped;
	MemoryContext owner;		/* whose mem_allocated counts it */
} big_block;

/* A GPU context a trainer opened and has not closed yet. */
typedef struct gpu_guard
{
	struct gpu_guard *next;
	const gbml_backend *backend;
	gbml_gpu_ctx *ctx;
} gpu_guard;

typedef struct binding
{
	MemoryContext mcxt;
	big_block	blocks;			/* circular list head */
	gpu_guard  *gpu_open;		/* device contexts to destroy at reset */
	const char *budget_hint;	/* gbml_env_budget_hint's, or NULL */
	MemoryContextCallback cb;
} binding;

static void *
unmap_blocks_main(void *arg)
{
	big_block  *b = arg;

	while (b)
	{
		big_block  *next = b->next;

		munmap(b, b->mapped);
		b = next;
	}
	return NULL;
}

static void
binding_reset(void *arg)
{
	binding    *bd = arg;
	big_block  *first = bd->blocks.next;
	pthread_t	thread;
	pthread_attr_t attr;
	sigset_t	all,
				old;
	bool		started = false;
	size_t		total = 0;

	/*
	 * Device contexts first: destroying one waits for its stream, which may
	 * still copy into host blocks listed below.
	 */
	for (gpu_guard *g = bd->gpu_open; g; g = g->next)
		g->backend->ctx_destroy(g->ctx);
	bd->gpu_open = NULL;
	if (first == &bd->blocks)
		return;
	/* a NULL-terminated chain for the thread, detached from the binding */
	bd->blocks.prev->next = NULL;
	bd->blocks.next = bd->blocks.prev = &bd->blocks;
	for (big_block *b = first; b; b = b->next)
	{
		b->owner->mem_allocated -= b->mapped;
		total += b->mapped;
	}
	if (total < BACKGROUND_UNMAP_BYTES)
	{
		/* a few ms at most: no thread (a GROUP BY may end thousands of these) */
		unmap_blocks_main(first);
		return;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_attr_init(&attr) == 0)
	{
		if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0)
			started = pthread_create(&thread, &attr, unmap_blocks_main, first) == 0;
		pthread_attr_destroy(&attr);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!started)
		unmap_blocks_main(first);
}

static void *
mcxt_alloc(void *ctx, size_t size)
{
	binding    *bd = ctx;
	big_block  *b;

	if (size < BIG_BLOCK)
		return MemoryContextAllocExtended(bd->mcxt, size, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	b = mmap(NULL, BIG_HEADER + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return NULL;
	b->mapped = BIG_HEADER + size;
	b->owner = bd->mcxt;
	b->owner->mem_allocated += b->mapped;
	b->next = bd->blocks.next;
	b->prev = &bd->blocks;
	b->next->prev = b;
	bd->blocks.next = b;
	return (char *) b + BIG_HEADER;
}

static void
mcxt_free(void *ctx, void *ptr, size_t size)
{
	big_block  *b;

	(void) ctx;
	if (size < BIG_BLOCK)
	{
		pfree(ptr);
		return;
	}
	b = (big_block *) ((char *) ptr - BIG_HEADER);
	b->owner->mem_allocated -= b->mapped;
	b->prev->next = b->next;
	b->next->prev = b->prev;
	munmap(b, b->mapped);
}

/*
 * Called between iterations.  A pending cancel (or termination) makes the
 * engine stop and unwind; the caller then raises the cancel ERROR with
 * CHECK_FOR_INTERRUPTS.  Other interrupts are served here.
 */
static bool
progress_hook(void *ctx, const gbml_progress_info *info)
{
	progress_state *ps = ctx;
	double		now;

	if (InterruptPending)
	{
		if (QueryCancelPending || ProcDiePending)
			return true;
		CHECK_FOR_INTERRUPTS();
	}
	if (gbml_setting_progress_interval_s <= 0)
		return false;
	now = gbml_now();
	if (now - ps->last_notice >= gbml_setting_progress_interval_s)
	{
		double		elapsed = now - ps->started;
		char		metric[96] = "";
		char		eta[48] = "";

		if (info->metric_name && isfinite(info->metric))
			snprintf(metric, sizeof(metric), ", %s %.6g", info->metric_name, info->metric);
		if (info->total > 0 && info->iteration > 0)
			snprintf(eta, sizeof(eta), ", ETA %.1f s",
					 elapsed / (double) info->iteration * (double) (info->total - info->iteration));
		if (info->total > 0)
			ereport(NOTICE, (errmsg("%s: %s iteration " INT64_FORMAT "/" INT64_FORMAT "%s, elapsed %.1f s%s",
									ps->what, info->phase, info->iteration, info->total, metric, elapsed, eta)));
		else
			ereport(NOTICE, (errmsg("%s: %s iteration " INT64_FORMAT "%s, elapsed %.1f s",
									ps->what, info->phase, info->iteration, metric, elapsed)));
		ps->last_notice = now;
	}
	return false;
}

/* env->gpu_ctx_fn: keeps the list of open device contexts that reset destroys. */
static void
gpu_ctx_hook(void *ctx, const gbml_backend *b, gbml_gpu_ctx *gctx, bool open)
{
	binding    *bd = ctx;

	if (open)
	{
		gpu_guard  *g = MemoryContextAllocZero(bd->mcxt, sizeof(gpu_guard));

		g->backend = b;
		g->ctx = gctx;
		g->next = bd->gpu_open;
		bd->gpu_open = g;
		return;
	}
	for (gpu_guard **pp = &bd->gpu_open; *pp; pp = &(*pp)->next)
		if ((*pp)->ctx == gctx)
		{
			gpu_guard  *g = *pp;

			*pp = g->next;
			pfree(g);
			return;
		}
}

/* env->notice_fn: the engine's messages as NOTICE or DEBUG1. */
static void
notice_hook(void *ctx, int level, const char *msg)
{
	ereport(level == GBML_LOG_NOTICE ? NOTICE : DEBUG1, (errmsg("%s", msg)));
}

void
gbml_env_bind(gbml_env *env, MemoryContext mcxt, const char *what)
{
	progress_state *ps = MemoryContextAllocZero(mcxt, sizeof(progress_state));
	binding    *bd = MemoryContextAllocZero(mcxt, sizeof(binding));

	bd->mcxt = mcxt;
	bd->blocks.next = bd->blocks.prev = &bd->blocks;
	bd->cb.func = binding_reset;
	bd->cb.arg = bd;
	MemoryContextRegisterResetCallback(mcxt, &bd->cb);
	memset(env, 0, sizeof(*env));
	env->alloc_fn = mcxt_alloc;
	env->free_fn = mcxt_free;
	env->alloc_ctx = bd;
	env->memory_limit = (size_t) gbml_setting_memory_limit_kb * 1024;
	env->threads = gbml_setting_threads;
	env->bins_per_thread = GBML_BINS_PER_THREAD;	/* (the setting's count: small trainings take fewer) */
	env->device = GBML_DEVICE_CPU;
	env->gpu_id = gbml_setting_gpu_id;
	ps->what = what;
	ps->started = ps->last_notice = gbml_now();
	env->progress_fn = progress_hook;
	env->progress_ctx = ps;
	env->notice_fn = notice_hook;
	env->gpu_ctx_fn = gpu_ctx_hook;
	env->gpu_ctx_hook_ctx = bd;
	env->gpu_memory_limit = (size_t) gbml_setting_gpu_memory_limit_mb * 1048576;
	gbml_env_bind_temp_files(env, mcxt);
}

void
gbml_env_budget_hint(gbml_env *env, const char *hint)
{
	((binding *) env->alloc_ctx)->budget_hint = hint;
}

const gbml_backend *
gbml_gpu_backend(char *reason, size_t reason_len)
{
	char		path[MAXPGPATH];
	const gbml_backend *b;

	snprintf(path, sizeof(path), "%s/%s.so", pkglib_path,
			 gbml_setting_cuda_library ? gbml_setting_cuda_library : "gbml_cuda");
	b = gbml_backend_load(path, reason, reason_len);
	if (b && b->device_count() <= 0)
	{
		snprintf(reason, reason_len, "the CUDA backend found no usable GPU (%s)", b->last_error());
		return NULL;
	}
	return b;
}

/*
 * The emulation names itself (backend.h); asking device_info instead would
 * create a CUDA context on a real card just to learn it is not emulated.
 */
static bool
is_emulated(const gbml_backend *b)
{
	return strcmp(b->name, "cuda-emulated") == 0;
}

void
gbml_env_configure(gbml_env *env, const gbml_common_params *common, const char *algorithm)
{
	int			device = common->device_given ? common->device : gbml_setting_device;
	char		reason[300] = "";

	if (common->threads_given)
	{
		env->threads = (int) common->threads;
		env->bins_per_thread = 0;	/* asked for: used as asked */
	}
	if (common->memory_limit_given)
		env->memory_limit = (size_t) (common->memory_limit_mb * 1048576.0);
	if (common->gpu_id_given)
		env->gpu_id = (int) common->gpu_id;
	if (common->gpu_memory_limit_given)
		env->gpu_memory_limit = (size_t) (common->gpu_memory_limit_mb * 1048576.0);
	env->device = GBML_DEVICE_CPU;
	env->device_auto = device == GBML_DEVICE_AUTO;
	env->gpu = NULL;
	if (device == GBML_DEVICE_CPU)
		return;
	env->gpu = gbml_gpu_backend(reason, sizeof(reason));
	if (env->gpu && env->gpu_id >= env->gpu->device_count())
	{
		snprintf(reason, sizeof(reason), "gpu_id %d does not exist (%d GPUs)", env->gpu_id, env->gpu->device_count());
		env->gpu = NULL;
	}
	if (env->gpu && env->device_auto && is_emulated(env->gpu))
	{
		/* the emulation is for tests: only an explicit "gpu" trains on it */
		snprintf(reason, sizeof(reason), "the CUDA backend is the CPU emulation");
		env->gpu = NULL;
	}
	if (env->gpu)
		env->device = device == GBML_DEVICE_HYBRID ? GBML_DEVICE_HYBRID : GBML_DEVICE_GPU;
	else if (device == GBML_DEVICE_AUTO)
		ereport(DEBUG1, (errmsg("%s: training on the CPU: %s", algorithm, reason)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s: device \"%s\" was requested but no GPU is usable", algorithm,
						device == GBML_DEVICE_HYBRID ? "hybrid" : "gpu"),
				 errdetail("%s", reason),
				 errhint("Set gbml.device = 'auto' or 'cpu' (or the \"device\" parameter) to train on the CPU.")));
}

void
gbml_stream_setup(gbml_env *env, const gbml_parsed_params *params, gbml_dataset *ds, bool partial)
{
	const gbml_algorithm *algo = params->algo;

	/*
	 * "gpu": stream once the first chunk is full; over the budget is an
	 * ERROR.  "auto" (a usable GPU): stream from the chunk boundary where
	 * the data is big enough for the GPU to gain; over the budget, the rows
	 * come back to the host and train on the CPU, with a NOTICE.
	 */
	if (env->device == GBML_DEVICE_GPU && algo->gpu_streams && algo->gpu_trains && !partial &&
		env->gpu != NULL && env->gpu->chunk_put != NULL)
	{
		/* the chunk being filled is on the host: as small as the budget wants (the default's is 64 MB) */
		gbml_plan_chunk_bytes(env, ds);
		gbml_dataset_stream_to(ds, gbml_chunk_store_gpu_open,
							   env->device_auto ? GBML_BOOST_GPU_AUTO_MIN_BYTES : 0, env->device_auto);
	}
	/*
	 * Otherwise past the memory budget (or, for boosting, early) the rows
	 * go to temporary files.  A parallel plan's partial states do not: they
	 * are serialized to the leader, and a file cannot travel.
	 */
	else if (!partial)
		gbml_plan_spill(algo, env, ds);
}

void
gbml_raise(gbml_env *env, int rc, const char *what)
{
	/* the engine's own hint (gbml_hint: what to do about this error, a shard's too), where the code has none */
	const char *hint = env->hint[0] ? env->hint : NULL;

	/* a bound env's rows that cannot spill say why (gbml_env_budget_hint) */
	if (hint == NULL && rc == GBML_EBUDGET && env->alloc_fn == mcxt_alloc)
		hint = ((binding *) env->alloc_ctx)->budget_hint;

	switch (rc)
	{
		case GBML_ECANCELLED:
			CHECK_FOR_INTERRUPTS();
			ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED), errmsg("%s: canceled", what)));
			break;
		case GBML_EBUDGET:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("%s: %s", what, env->error),
					 hint ? errhint("%s", hint) :
					 errhint("Raise gbml.memory_limit (or the \"memory_limit_mb\" parameter), or train on fewer rows or features.")));
			break;
		case GBML_ENOMEM:
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("%s: %s", what, env->error),
							hint ? errhint("%s", hint) : 0));
			break;
		case GBML_ECORRUPT:
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("%s: invalid model: %s", what, env->error),
							hint ? errhint("%s", hint) : 0));
			break;
		case GBML_EGPUBUDGET:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("%s: %s", what, env->error),
					 errhint("Raise gbml.gpu_memory_limit (or the \"gpu_memory_limit_mb\" parameter), train with device 'cpu', or use device 'auto' to fall back to the CPU.")));
			break;
		case GBML_ETEMPLIMIT:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("%s: %s", what, env->error),
					 errhint("Raise temp_file_limit, or gbml.memory_limit (or the \"memory_limit_mb\" parameter) so that fewer rows go to temporary files.")));
			break;
		case GBML_EDISKFULL:
			ereport(ERROR,
					(errcode(ERRCODE_DISK_FULL),
					 errmsg("%s: %s", what, env->error),
					 errhint("The filesystem of the temporary files (temp_tablespaces, else the database's tablespace) is full: "
							 "free space there, point temp_tablespaces at a larger one, or raise gbml.memory_limit (or the "
							 "\"memory_limit_mb\" parameter) so that fewer rows go to temporary files.")));
			break;
		case GBML_EIO:
			ereport(ERROR, (errcode(ERRCODE_IO_ERROR), errmsg("%s: %s", what, env->error),
							hint ? errhint("%s", hint) : 0));
			break;
		case GBML_EDEVICE:
			ereport(ERROR, (errcode(ERRCODE_SYSTEM_ERROR), errmsg("%s: %s", what, env->error),
							hint ? errhint("%s", hint) : 0));
			break;
		case GBML_EUNSUPPORTED:
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s: %s", what, env->error),
							hint ? errhint("%s", hint) : 0));
			break;
		default:
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s: %s", what, env->error),
							hint ? errhint("%s", hint) : 0));
	}
	pg_unreachable();
}

/*
 * The dataset's memory goes: stop its pre-faulting thread, and close its
 * temporary file (after an abort, tempfile.c knows PostgreSQL closed it).
 */
static void
dataset_reset_callback(void *arg)
{
	gbml_dataset_stop_prefault((gbml_dataset *) arg);
	gbml_dataset_close_files((gbml_dataset *) arg);
}

void
gbml_dataset_guard(MemoryContext mcxt, gbml_dataset *ds)
{
	MemoryContextCallback *cb = MemoryContextAllocZero(mcxt, sizeof(MemoryContextCallback));

	cb->func = dataset_reset_callback;
	cb->arg = ds;
	MemoryContextRegisterResetCallback(mcxt, cb);
}
