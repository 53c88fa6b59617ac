/*
 * env.h — the engine's execution environment: allocator hook with a memory
 * budget, progress/cancel callback, thread count, device choice and the last
 * error message.
 *
 * src/core never includes a PostgreSQL header.  The glue (src/pg) fills a
 * gbml_env so that every engine allocation lands in a MemoryContext and every
 * long loop can be cancelled; the unit tests fill one backed by malloc.
 *
 * Contract for engine code:
 *   - allocate only through gbml_alloc/gbml_free, and only outside OpenMP
 *     parallel regions (the hook may call into PostgreSQL);
 *   - call gbml_progress() between iterations (never inside a parallel
 *     region) and return GBML_ECANCELLED promptly when it says stop;
 *   - report errors with gbml_error(), which formats env->error and returns
 *     the status code, so `return gbml_error(env, GBML_EINVAL, "...")` reads
 *     naturally.
 */
#ifndef GBML_ENV_H
#define GBML_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Status codes: 0 is success, every failure is negative. */
enum
{
	GBML_OK = 0,
	GBML_EINVAL = -1,			/* bad input data or parameter */
	GBML_ENOMEM = -2,			/* allocator refused (out of memory) */
	GBML_EBUDGET = -3,			/* allocation would exceed the memory budget */
	GBML_ECANCELLED = -4,		/* progress callback asked to stop */
	GBML_ECORRUPT = -5,			/* a model failed validation */
	GBML_EDEVICE = -6,			/* device (GPU) problem */
	GBML_EUNSUPPORTED = -7,		/* operation not supported by this model */
	GBML_EGPUBUDGET = -8		/* allocation would exceed the GPU memory budget */
};

/* Levels of gbml_notice(). */
enum
{
	GBML_LOG_DEBUG = 0,			/* the server log at DEBUG1 (why a device was chosen) */
	GBML_LOG_NOTICE = 1			/* the user (a fallback they should know about) */
};

typedef enum gbml_device
{
	GBML_DEVICE_AUTO = 0,
	GBML_DEVICE_CPU = 1,
	GBML_DEVICE_GPU = 2,
	GBML_DEVICE_HYBRID = 3		/* the GPU and the CPU threads together (K-Means); others train on the GPU */
} gbml_device;

/* One progress report, passed to the callback between iterations. */
typedef struct gbml_progress_info
{
	const char *phase;			/* "train", "init", ... */
	int64_t		iteration;		/* 1-based */
	int64_t		total;			/* planned iterations, 0 if unknown */
	const char *metric_name;	/* NULL if none */
	double		metric;
} gbml_progress_info;

typedef struct gbml_backend gbml_backend;
typedef struct gbml_gpu_ctx gbml_gpu_ctx;

typedef struct gbml_env
{
	/* Allocator hook: returns NULL on failure, never longjmps.  free_fn gets
	 * the size that was asked of alloc_fn. */
	void	   *(*alloc_fn) (void *ctx, size_t size);
	void		(*free_fn) (void *ctx, void *ptr, size_t size);
	void	   *alloc_ctx;

	/* Budget in bytes (0 = unlimited) and bytes currently held. */
	size_t		memory_limit;
	size_t		memory_used;
	size_t		memory_peak;

	/* Progress/cancel hook: return true to ask the engine to stop. */
	bool		(*progress_fn) (void *ctx, const gbml_progress_info *info);
	void	   *progress_ctx;

	/* Messages for the log or the user; main thread only; may be NULL. */
	void		(*notice_fn) (void *ctx, int level, const char *msg);
	void	   *notice_ctx;

	/*
	 * Told when a trainer opens (open = true) and closes a GPU context, so
	 * the glue can destroy one that an ERROR left open; may be NULL.
	 */
	void		(*gpu_ctx_fn) (void *ctx, const gbml_backend *b, gbml_gpu_ctx *gctx, bool open);
	void	   *gpu_ctx_hook_ctx;

	int			threads;		/* >= 1 */
	gbml_device device;			/* resolved: CPU or GPU (a trainer may fall back to CPU) */
	bool		device_auto;	/* chosen by "auto": a trainer may still pick the CPU */
	int			gpu_id;
	const gbml_backend *gpu;	/* loaded CUDA backend, or NULL */
	size_t		gpu_memory_limit;	/* device bytes one training may hold; 0 = the backend's default */
	char		device_note[200];	/* why the trainer used the device it did (run report) */
	/* figures of the last GPU training (run report) */
	double		gpu_memory_peak;
	double		gpu_h2d_bytes;
	double		gpu_wait_seconds;

	char		error[512];
	int			error_code;		/* code of the last gbml_error() */
} gbml_env;

/* A malloc-backed environment (unit tests, benchmarks). */
void		gbml_env_init_malloc(gbml_env *env, int threads);

void	   *gbml_alloc(gbml_env *env, size_t size);
void	   *gbml_alloc0(gbml_env *env, size_t size);
/* Array allocation with overflow check: n * elem bytes. */
void	   *gbml_alloc_array(gbml_env *env, size_t n, size_t elem);
void	   *gbml_realloc(gbml_env *env, void *ptr, size_t new_size);
void		gbml_free(gbml_env *env, void *ptr);
char	   *gbml_strdup(gbml_env *env, const char *s);

/* Formats env->error and returns code (for `return gbml_error(...)`). */
int			gbml_error(gbml_env *env, int code, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* Formats a message and hands it to notice_fn (if any). */
void		gbml_notice(gbml_env *env, int level, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* Calls the progress hook; true means "stop now". */
bool		gbml_progress(gbml_env *env, const gbml_progress_info *info);

/* Monotonic wall clock in seconds. */
double		gbml_now(void);

#endif
