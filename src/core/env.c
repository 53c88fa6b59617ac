/*
 * env.c — allocation through the caller's hook with budget accounting,
 * error formatting, the progress hook, temporary files through the
 * caller's hooks (the malloc env's: plain files), and helper threads.
 *
 * Every block carries a small header with its size so that gbml_free can
 * return it to the budget; the header keeps 16-byte alignment for SIMD loads.
 */
/* fallocate's punch hole (PostgreSQL's build defines it; the unit tests' may not) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "env.h"
#include "write_behind.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct alloc_header
{
	size_t		size;
	size_t		magic;
} alloc_header;

#define ALLOC_MAGIC ((size_t) 0x67626d6c616c6c63ULL)

static void *
malloc_hook(void *ctx, size_t size)
{
	(void) ctx;
	return malloc(size);
}

static void
free_hook(void *ctx, void *ptr, size_t size)
{
	(void) ctx;
	(void) size;
	free(ptr);
}

/*
 * The malloc env's temporary files: mkstemp in $TMPDIR (or /tmp), unlinked
 * at once so the file goes when its descriptor closes, even if the process
 * dies.  One descriptor serves writes and reads (pread/pwrite keep no
 * position); the handle holds it and the file's write in flight.
 */
typedef struct plain_temp
{
	int			fd;
	gbml_write_behind behind;
} plain_temp;

static void *
plain_temp_create(void *ctx, int *read_fd, char *msg, size_t msg_len)
{
	const char *dir = getenv("TMPDIR");
	char		path[4096];
	plain_temp *t;

	(void) ctx;
	if (dir == NULL || dir[0] == '\0')
		dir = "/tmp";
	if ((t = calloc(1, sizeof(plain_temp))) == NULL)
	{
		snprintf(msg, msg_len, "out of memory for a temporary file");
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/gbml_spill_XXXXXX", dir);
	if ((t->fd = mkstemp(path)) < 0)
	{
		snprintf(msg, msg_len, "could not create a temporary file in \"%s\": %s", dir, strerror(errno));
		free(t);
		return NULL;
	}
	unlink(path);
	*read_fd = t->fd;
	return t;
}

static int
plain_temp_write(void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg,
				 size_t msg_len)
{
	int			e = gbml_write_all(((plain_temp *) handle)->fd, buf, len, offset);

	(void) ctx;
	if (e != 0)
	{
		snprintf(msg, msg_len, "could not write to a temporary file: %s", strerror(e));
		return gbml_temp_write_code(e);
	}
	return GBML_OK;
}

static int
plain_temp_write_start(void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg,
					   size_t msg_len)
{
	plain_temp *t = handle;

	(void) ctx;
	(void) msg;
	(void) msg_len;
	gbml_write_behind_start(&t->behind, t->fd, buf, len, offset);
	return GBML_OK;
}

static int
plain_temp_write_wait(void *ctx, void *handle, char *msg, size_t msg_len)
{
	int			e = gbml_write_behind_wait(&((plain_temp *) handle)->behind);

	(void) ctx;
	if (e != 0)
	{
		snprintf(msg, msg_len, "could not write to a temporary file: %s", strerror(e));
		return gbml_temp_write_code(e);
	}
	return GBML_OK;
}

static void
plain_temp_close(void *ctx, void *handle)
{
	plain_temp *t = handle;

	(void) ctx;
	gbml_write_behind_wait(&t->behind);
	close(t->fd);
	free(t);
}

void
gbml_env_init_malloc(gbml_env *env, int threads)
{
	memset(env, 0, sizeof(*env));
	env->alloc_fn = malloc_hook;
	env->free_fn = free_hook;
	env->temp_create = plain_temp_create;
	env->temp_write = plain_temp_write;
	env->temp_close = plain_temp_close;
	env->temp_write_start = plain_temp_write_start;
	env->temp_write_wait = plain_temp_write_wait;
	env->threads = threads > 0 ? threads : 1;
	env->device = GBML_DEVICE_CPU;
}

void
gbml_notice(gbml_env *env, int level, const char *fmt,...)
{
	va_list		ap;
	char		msg[512];

	if (env->notice_fn == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	env->notice_fn(env->notice_ctx, level, msg);
}

int
gbml_error(gbml_env *env, int code, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(env->error, sizeof(env->error), fmt, ap);
	va_end(ap);
	env->error_code = code;
	env->hint[0] = '\0';
	return code;
}

int
gbml_error_prefix(gbml_env *env, int code, const char *prefix)
{
	size_t		room = sizeof(env->error) - 1;
	size_t		p = strlen(prefix) + 2;	/* "prefix: " */
	size_t		e = strnlen(env->error, room);

	if (p < room)
	{
		/* the old text moves right (cut at the end if need be), the prefix goes before it */
		e = e < room - p ? e : room - p;
		memmove(env->error + p, env->error, e);
		memcpy(env->error, prefix, p - 2);
		memcpy(env->error + p - 2, ": ", 2);
		env->error[p + e] = '\0';
	}
	env->error_code = code;
	return code;
}

int
gbml_hint(gbml_env *env, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(env->hint, sizeof(env->hint), fmt, ap);
	va_end(ap);
	return env->error_code;
}

int
gbml_temp_write_code(int e)
{
	return e == ENOSPC ? GBML_EDISKFULL : GBML_EIO;
}

#define BUDGET_SLACK_BYTES ((size_t) 64 << 10)

int
gbml_budget_check(gbml_env *env, size_t bytes, const char *fmt,...)
{
	char		what[300];
	va_list		ap;
	double		mb = 1048576.0;
	size_t		need;

	/*
	 * Room for the small allocations that follow the checked ones (arrays
	 * of pointers, a model's bytes) too: a check that passes within a few
	 * kilobytes of the limit lets the next allocation fail with the plain
	 * message (SAGA one-hot at 32 MB: 5 kB to spare, then 0.5 MB short).
	 */
	need = env->memory_used + bytes + bytes / 64 + BUDGET_SLACK_BYTES;
	if (env->memory_limit == 0 || need <= env->memory_limit)
		return GBML_OK;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	gbml_error(env, GBML_EBUDGET,
			   "memory limit exceeded by what stays in memory whatever goes to temporary files: %s: %.1f MB; %.1f MB are in use and the limit is %.1f MB",
			   what, (double) bytes / mb, (double) env->memory_used / mb, (double) env->memory_limit / mb);
	/*
	 * Whole megabytes, rounded up: a limit the user can type.  A sixteenth
	 * more for the small allocations that follow (the model's bytes, a
	 * report), which no check counts, beside the check's own room.
	 */
	return gbml_hint(env, "Raise the \"memory_limit_mb\" parameter (or gbml.memory_limit) to at least %.0f MB for this step (a later one may need more), or train on fewer rows.",
					 ceil((double) need * 17.0 / 16.0 / mb));
}

void *
gbml_alloc(gbml_env *env, size_t size)
{
	alloc_header *h;
	size_t		total;

	if (size > SIZE_MAX - sizeof(alloc_header))
	{
		gbml_error(env, GBML_ENOMEM, "allocation of %zu bytes is too large", size);
		return NULL;
	}
	total = size + sizeof(alloc_header);
	if (env->memory_limit != 0 &&
		(total > env->memory_limit || env->memory_used > env->memory_limit - total))
	{
		/* kB for a small request: "0.0 MB needed" says nothing */
		if (total < 104858)
			gbml_error(env, GBML_EBUDGET,
					   "memory limit exceeded: %.1f kB needed, %.1f MB in use, limit %.1f MB",
					   (double) total / 1024.0, (double) env->memory_used / 1048576.0,
					   (double) env->memory_limit / 1048576.0);
		else
			gbml_error(env, GBML_EBUDGET,
					   "memory limit exceeded: %.1f MB needed, %.1f MB in use, limit %.1f MB",
					   (double) total / 1048576.0, (double) env->memory_used / 1048576.0,
					   (double) env->memory_limit / 1048576.0);
		return NULL;
	}
	h = env->alloc_fn(env->alloc_ctx, total);
	if (h == NULL)
	{
		gbml_error(env, GBML_ENOMEM, "out of memory allocating %zu bytes", size);
		return NULL;
	}
	h->size = size;
	h->magic = ALLOC_MAGIC;

	/*
	 * No MADV_HUGEPAGE on big blocks (an earlier version had it): pages
	 * follow the system's transparent-huge-page policy.  On this VM, whose
	 * host takes freed memory back, a fresh 2 MB page costs what the host
	 * charges to provide it: a first training after a pause took 1.5x as
	 * long with the advice (mean_fit on 1M x 100: 0.76 s against 0.52 s),
	 * while back-to-back runs gained 7-15% from it and boosting nothing.
	 */
	env->memory_used += total;
	if (env->memory_used > env->memory_peak)
		env->memory_peak = env->memory_used;
	return h + 1;
}

void *
gbml_alloc0(gbml_env *env, size_t size)
{
	void	   *p = gbml_alloc(env, size);

	if (p)
		memset(p, 0, size);
	return p;
}

void *
gbml_alloc_array(gbml_env *env, size_t n, size_t elem)
{
	if (elem != 0 && n > SIZE_MAX / elem)
	{
		gbml_error(env, GBML_ENOMEM, "allocation of %zu x %zu bytes overflows", n, elem);
		return NULL;
	}
	return gbml_alloc(env, n * elem);
}

void *
gbml_realloc(gbml_env *env, void *ptr, size_t new_size)
{
	void	   *p;
	alloc_header *h;

	if (ptr == NULL)
		return gbml_alloc(env, new_size);
	h = (alloc_header *) ptr - 1;
	p = gbml_alloc(env, new_size);
	if (p == NULL)
		return NULL;
	memcpy(p, ptr, h->size < new_size ? h->size : new_size);
	gbml_free(env, ptr);
	return p;
}

void
gbml_free(gbml_env *env, void *ptr)
{
	alloc_header *h;

	if (ptr == NULL)
		return;
	h = (alloc_header *) ptr - 1;
	if (h->magic != ALLOC_MAGIC)
		abort();				/* a foreign pointer: a programming error */
	h->magic = 0;
	env->memory_used -= h->size + sizeof(alloc_header);
	env->free_fn(env->alloc_ctx, h, h->size + sizeof(alloc_header));
}

char *
gbml_strdup(gbml_env *env, const char *s)
{
	size_t		n = strlen(s) + 1;
	char	   *p = gbml_alloc(env, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

bool
gbml_progress(gbml_env *env, const gbml_progress_info *info)
{
	if (env->progress_fn == NULL)
		return false;
	return env->progress_fn(env->progress_ctx, info);
}

int
gbml_temp_create(gbml_env *env, gbml_temp_file *f)
{
	char		msg[400] = "";

	f->handle = NULL;
	f->fd = -1;
	if (env->temp_create == NULL)
		return gbml_error(env, GBML_EUNSUPPORTED, "this environment has no temporary files");
	if ((f->handle = env->temp_create(env->temp_ctx, &f->fd, msg, sizeof(msg))) == NULL)
	{
		f->fd = -1;
		return gbml_error(env, GBML_EIO, "%s", msg[0] ? msg : "could not create a temporary file");
	}
	return GBML_OK;
}

/* A write hook's result: GBML_OK, or env's error set to its message. */
static int
write_hook_result(gbml_env *env, int rc, const char *msg)
{
	if (rc == GBML_OK)
		return GBML_OK;
	return gbml_error(env, rc, "%s", msg[0] ? msg : "could not write to a temporary file");
}

/* Whether env writes in the background (both hooks; else every write is temp_write's). */
static bool
writes_behind(const gbml_env *env)
{
	return env->temp_write_start != NULL && env->temp_write_wait != NULL;
}

int
gbml_temp_write(gbml_env *env, gbml_temp_file *f, const void *buf, size_t len, uint64_t offset)
{
	char		msg[400] = "";

	if (len == 0)
		return GBML_OK;
	return write_hook_result(env, env->temp_write(env->temp_ctx, f->handle, buf, len, offset, msg, sizeof(msg)),
							 msg);
}

int
gbml_temp_write_start(gbml_env *env, gbml_temp_file *f, const void *buf, size_t len, uint64_t offset)
{
	char		msg[400] = "";

	if (!writes_behind(env))
		return gbml_temp_write(env, f, buf, len, offset);
	if (len == 0)
		return GBML_OK;
	return write_hook_result(env,
							 env->temp_write_start(env->temp_ctx, f->handle, buf, len, offset, msg, sizeof(msg)),
							 msg);
}

int
gbml_temp_write_wait(gbml_env *env, gbml_temp_file *f)
{
	char		msg[400] = "";

	if (!writes_behind(env) || f->handle == NULL)
		return GBML_OK;
	return write_hook_result(env, env->temp_write_wait(env->temp_ctx, f->handle, msg, sizeof(msg)), msg);
}

void
gbml_temp_close(gbml_env *env, gbml_temp_file *f)
{
	if (f->handle != NULL)
		env->temp_close(env->temp_ctx, f->handle);
	f->handle = NULL;
	f->fd = -1;
}

int
gbml_temp_read(const gbml_temp_file *f, void *buf, size_t len, uint64_t offset)
{
	char	   *p = buf;

	while (len > 0)
	{
		ssize_t		n = pread(f->fd, p, len, (off_t) offset);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? EIO : errno;
		p += n;
		len -= (size_t) n;
		offset += (uint64_t) n;
	}
	return 0;
}

bool
gbml_temp_discard(const gbml_temp_file *f, uint64_t offset, uint64_t len)
{
#if defined(FALLOC_FL_PUNCH_HOLE) && defined(FALLOC_FL_KEEP_SIZE)
	if (f->fd < 0 || len == 0)
		return false;
	return fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) offset, (off_t) len) == 0;
#else
	(void) f;
	(void) offset;
	(void) len;
	return false;
#endif
}

bool
gbml_thread_start(pthread_t *thread, void *(*fn) (void *), void *arg)
{
	sigset_t	all,
				old;
	bool		started;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	started = pthread_create(thread, NULL, fn, arg) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return started;
}

double
gbml_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}
