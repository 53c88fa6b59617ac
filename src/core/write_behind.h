/*
 * write_behind.h — one write to a file descriptor on a helper thread, so
 * that the thread that filled the buffer can fill the next one meanwhile
 * (rows spilled while a scan goes on: the copy into the page cache is then
 * off the backend's thread).  Plain pwrite on a descriptor, no env, no
 * PostgreSQL: both the malloc env's temporary files and the glue's use it
 * (env.h's temp_write_start / temp_write_wait).
 */
#ifndef GBML_WRITE_BEHIND_H
#define GBML_WRITE_BEHIND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gbml_write_behind
{
	bool		running;		/* a helper thread is writing (join it) */
	pthread_t	thread;
	int			fd;
	const char *buf;			/* the caller's: untouched until wait */
	size_t		len;
	uint64_t	offset;
	int			err;			/* errno of the write (0: written), set by the helper before it exits */
} gbml_write_behind;

/* Writes all of buf at offset (pwrite, retried on EINTR and short writes); 0 or the errno (ENOSPC for no progress). */
int			gbml_write_all(int fd, const void *buf, size_t len, uint64_t offset);

/*
 * Starts writing buf[0..len) at offset on a helper thread; w must not be
 * running.  A write under 64 KB, or one for which no thread can be
 * started, is done here, before returning.  Either way, wait gives its
 * result.
 */
void		gbml_write_behind_start(gbml_write_behind *w, int fd, const void *buf, size_t len, uint64_t offset);

/* Waits for the write started last (none: at once); 0 or its errno.  Idempotent. */
int			gbml_write_behind_wait(gbml_write_behind *w);

#endif
