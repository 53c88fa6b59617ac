/*
 * rewrite_pages.c — what a spilled reorder's write costs in the page cache,
 * with and without giving back the old file as it is read (issue 12; the
 * file store's discard, chunk_store_permute.c).  Writes MB megabytes (default
 * 1024) to a temporary file in 512 KB pieces (the staging runs), then reads
 * it back in 100 MB windows, writing each window to a second file (the
 * reordered rows), either as it is (keep) or after punching the window out
 * of the first file (punch: fallocate PUNCH_HOLE).  Alternates the two
 * REPEAT (default 3) times; prints each rewrite's seconds and the medians.
 *
 *   make -s -f tests/bench/bench.mk tests/bench/bin/rewrite_pages
 *   tests/bench/bin/rewrite_pages [MB] [REPEAT] [DIR]
 *
 * No engine code: the question is the system's, how fast new page-cache
 * pages come compared with pages just freed (on a virtual machine whose host
 * takes back free pages, touching one again is the expensive part).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PIECE ((size_t) 512 << 10)
#define WINDOW ((size_t) 100 << 20)

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static void
must(int ok, const char *what)
{
	if (!ok)
	{
		fprintf(stderr, "rewrite_pages: %s: %s\n", what, strerror(errno));
		exit(1);
	}
}

static int
temp_file(const char *dir)
{
	char		path[4096];
	int			fd;

	snprintf(path, sizeof(path), "%s/rewrite_pages_XXXXXX", dir);
	must((fd = mkstemp(path)) >= 0, "mkstemp");
	unlink(path);
	return fd;
}

/* One staging write and one windowed rewrite; returns the rewrite's seconds. */
static double
rewrite(size_t total, int punch, const char *dir, char *buf)
{
	int			a = temp_file(dir),
				b = temp_file(dir);
	double		t;

	for (size_t o = 0; o < total; o += PIECE)
		must(pwrite(a, buf, PIECE, (off_t) o) == (ssize_t) PIECE, "staging write");
	t = now();
	for (size_t o = 0; o < total; o += WINDOW)
	{
		size_t		n = total - o < WINDOW ? total - o : WINDOW;

		must(pread(a, buf, n, (off_t) o) == (ssize_t) n, "read");
		if (punch)
			must(fallocate(a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) o, (off_t) n) == 0, "punch hole");
		must(pwrite(b, buf, n, (off_t) o) == (ssize_t) n, "rewrite");
	}
	t = now() - t;
	close(a);
	close(b);
	return t;
}

static int
cmp_double(const void *x, const void *y)
{
	double		a = *(const double *) x,
				b = *(const double *) y;

	return (a > b) - (a < b);
}

int
main(int argc, char **argv)
{
	size_t		mb = argc > 1 ? (size_t) atol(argv[1]) : 1024;
	int			repeat = argc > 2 ? atoi(argv[2]) : 3;
	const char *dir = argc > 3 ? argv[3] : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	size_t		total = mb << 20;
	char	   *buf = malloc(WINDOW);
	double		t[2][64];

	must(buf != NULL && repeat >= 1 && repeat <= 64 && total >= PIECE, "arguments (MB >= 1, 1 <= REPEAT <= 64)");
	total -= total % PIECE;
	memset(buf, 7, WINDOW);
	for (int r = 0; r < repeat; r++)
		for (int punch = 0; punch < 2; punch++)
		{
			t[punch][r] = rewrite(total, punch, dir, buf);
			printf("%s %zu MB: rewrite %.2f s\n", punch ? "punch" : "keep ", total >> 20, t[punch][r]);
		}
	for (int punch = 0; punch < 2; punch++)
		qsort(t[punch], (size_t) repeat, sizeof(double), cmp_double);
	printf("medians of %d: keep %.2f s, punch %.2f s\n", repeat, t[0][repeat / 2], t[1][repeat / 2]);
	free(buf);
	return 0;
}
