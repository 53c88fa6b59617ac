/*
 * write_behind.c — see write_behind.h.  One helper thread per write (a few
 * tens of microseconds to start, against tens of milliseconds to copy a
 * chunk into the page cache), joined by wait: nothing to park or wake, and
 * nothing outlives the wait.
 */
#include "write_behind.h"
#include "env.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int
gbml_write_all(int fd, const void *buf, size_t len, uint64_t offset)
{
	const char *p = buf;

	while (len > 0)
	{
		ssize_t		n = pwrite(fd, p, len, (off_t) offset);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? ENOSPC : errno;
		p += n;
		len -= (size_t) n;
		offset += (uint64_t) n;
	}
	return 0;
}

static void *
write_behind_main(void *arg)
{
	gbml_write_behind *w = arg;

	w->err = gbml_write_all(w->fd, w->buf, w->len, w->offset);
	return NULL;
}

/* Smaller writes are done at once: copying them costs less than starting a thread (tens of microseconds). */
#define BEHIND_MIN_BYTES ((size_t) 64 << 10)

void
gbml_write_behind_start(gbml_write_behind *w, int fd, const void *buf, size_t len, uint64_t offset)
{
	w->fd = fd;
	w->buf = buf;
	w->len = len;
	w->offset = offset;
	w->err = 0;
	w->running = len >= BEHIND_MIN_BYTES && gbml_thread_start(&w->thread, write_behind_main, w);
	if (!w->running)
		write_behind_main(w);
}

int
gbml_write_behind_wait(gbml_write_behind *w)
{
	if (w->running)
	{
		pthread_join(w->thread, NULL);
		w->running = false;
	}
	return w->err;
}
