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

#include <pthread.h>
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
	GBML_EGPUBUDGET = -8,		/* allocation would exceed the GPU memory budget */
	GBML_EIO = -9,				/* a temporary file could not be created, written or read */
	GBML_ETEMPLIMIT = -10,		/* temporary files would exceed their limit (temp_file_limit) */
	GBML_EDISKFULL = -11		/* the temporary files' filesystem is full (ENOSPC) */
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

/*
 * An open temporary file (gbml_temp_create): the hook's handle, and a
 * descriptor that any thread may read with gbml_temp_read (pread: no call
 * into PostgreSQL, no shared file position).
 */
typedef struct gbml_temp_file
{
	void	   *handle;			/* the hook's own; NULL when not open */
	int			fd;				/* the engine's reads (the hooks may also write through it); -1 when not open */
} gbml_temp_file;

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

	/*
	 * Temporary files, for rows past the memory budget (chunk_store_file.h).
	 * temp_create makes an empty file and sets *read_fd to a descriptor for
	 * reads; temp_write writes len bytes at offset; temp_close closes the
	 * descriptor and deletes the file (the system also deletes it at ERROR,
	 * cancel and exit).  A failure returns NULL or a GBML_* code, with
	 * msg[0..msg_len) saying why; never longjmps.  Main thread only, like
	 * the allocator; only reads of the descriptor may come from any thread.
	 * NULL hooks: no temporary files.
	 */
	void	   *(*temp_create) (void *ctx, int *read_fd, char *msg, size_t msg_len);
	int			(*temp_write) (void *ctx, void *handle, const void *buf, size_t len, uint64_t offset,
							   char *msg, size_t msg_len);
	void		(*temp_close) (void *ctx, void *handle);
	/*
	 * Optional (NULL: temp_write, synchronously): temp_write_start checks
	 * and accounts for len bytes at offset as temp_write would (limits,
	 * statistics), then writes them on a helper thread; buf must stay as
	 * it is until temp_write_wait, which waits for that write and returns
	 * its result.  One write in flight per file; temp_close, and an abort
	 * that closes the file, wait for it first.
	 */
	int			(*temp_write_start) (void *ctx, void *handle, const void *buf, size_t len, uint64_t offset,
									 char *msg, size_t msg_len);
	int			(*temp_write_wait) (void *ctx, void *handle, char *msg, size_t msg_len);
	void	   *temp_ctx;

	int			threads;		/* >= 1 */
	/*
	 * Boosting's trees take a thread for each this many bins of their rows
	 * (rows x features), up to `threads`; 0: `threads` whatever the size
	 * (a count the caller chose; the unit tests).  The glue sets
	 * GBML_BINS_PER_THREAD when the count is gbml.threads' default.
	 */
	int64_t		bins_per_thread;
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
	/*
	 * What the trainer's own temporary files took (boosting's stored bins,
	 * one-hot encoded rows), beside the rows' (run report); rows: the most
	 * rows one of its files held (the encoded rows are the source's again).
	 */
	int64_t		trainer_temp_written;
	int64_t		trainer_temp_read;
	int64_t		trainer_temp_rows;

	char		error[512];
	int			error_code;		/* code of the last gbml_error() */
	/* what the user can do about the last error (gbml_hint), or empty: the glue's HINT line */
	char		hint[256];
} gbml_env;

/* A malloc-backed environment (unit tests, benchmarks). */
void		gbml_env_init_malloc(gbml_env *env, int threads);

/* What a boosting tree's passes need per thread when the thread count is the setting's (env->bins_per_thread). */
#define GBML_BINS_PER_THREAD ((int64_t) 1 << 17)

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

/*
 * Puts "prefix: " before env's last error (which part of the work failed),
 * keeping its hint; returns code.
 */
int			gbml_error_prefix(gbml_env *env, int code, const char *prefix);

/*
 * Formats env->hint, what the user can do about the error just set (each
 * gbml_error clears it), and returns that error's code:
 *     gbml_error(env, GBML_EINVAL, "...");
 *     return gbml_hint(env, "Pass ...");
 */
int			gbml_hint(gbml_env *env, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));

/* The code of a temporary file's failed write with errno e: GBML_EDISKFULL for ENOSPC, else GBML_EIO. */
int			gbml_temp_write_code(int e);

/*
 * A trainer's state that stays in memory whatever goes to temporary files
 * (its per-row arrays, its histograms), checked against the budget before
 * it is allocated: past the budget the error names that state and its size
 * (what, a phrase such as "boosting's per-row state ..."), and the hint the
 * limit that would hold it.  The check keeps a little room beside `bytes`
 * (a 64th of them and 64 kB) for the small allocations no check counts.
 * GBML_OK, or GBML_EBUDGET.
 */
int			gbml_budget_check(gbml_env *env, size_t bytes, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* Formats a message and hands it to notice_fn (if any). */
void		gbml_notice(gbml_env *env, int level, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* Calls the progress hook; true means "stop now". */
bool		gbml_progress(gbml_env *env, const gbml_progress_info *info);

/*
 * Temporary files through env's hooks (see gbml_env).  create and write set
 * env's error to the hook's message and return its code; close is a no-op
 * on a file that is not open.  gbml_temp_read may run on any thread and
 * touches no env: it returns 0, or the errno of a failed read (EIO for a
 * file shorter than asked).
 */
int			gbml_temp_create(gbml_env *env, gbml_temp_file *f);
int			gbml_temp_write(gbml_env *env, gbml_temp_file *f, const void *buf, size_t len, uint64_t offset);
void		gbml_temp_close(gbml_env *env, gbml_temp_file *f);
/*
 * A write that may go on after the call returns (temp_write_start; without
 * that hook a plain gbml_temp_write): buf stays untouched until
 * gbml_temp_write_wait, which gives the write's result as gbml_temp_write
 * would.  Main thread only, one write in flight per file.
 */
int			gbml_temp_write_start(gbml_env *env, gbml_temp_file *f, const void *buf, size_t len, uint64_t offset);
int			gbml_temp_write_wait(gbml_env *env, gbml_temp_file *f);
int			gbml_temp_read(const gbml_temp_file *f, void *buf, size_t len, uint64_t offset);
/*
 * Gives back the disk blocks and page-cache pages of [offset, offset + len)
 * (a hole that reads as zeros; the file's size stays): rows read for the
 * last time.  Best effort (Linux's punch hole through the read descriptor,
 * which the hooks open read-write): nothing happens where the system or the
 * file system cannot do it.  Returns whether it was done.
 */
bool		gbml_temp_discard(const gbml_temp_file *f, uint64_t offset, uint64_t len);

/*
 * Starts fn(arg) on a helper thread that blocks every signal (PostgreSQL's
 * handlers must only ever run on the backend's own thread); false if no
 * thread could be started.  The helper must not call env or PostgreSQL.
 */
bool		gbml_thread_start(pthread_t *thread, void *(*fn) (void *), void *arg);

/* Monotonic wall clock in seconds. */
double		gbml_now(void);

#endif
