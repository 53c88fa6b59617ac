/*
 * chunk_store_file.c — see chunk_store_file.h.  Owns the temporary file of
 * a spilled dataset's features, its chunk table, the grouping of rows by
 * hash as they arrive (put_hashed), the tables of where rows are in the
 * file (runs while grouped, segments after an in-place reorder) and the
 * reads: read_chunk, read_rows and fetch (rows by address), which give
 * categorical ids renumbered once renumber_on_read has been asked (the
 * bytes on disk keep the ids they were written with, and permute, which
 * reads through gbml_cfs_read_chunk and gbml_cfs_fetch_rows, moves them
 * as they are).  The reorder (permute) that gives the rows their canonical
 * order on disk is chunk_store_permute.c's; the store's state and what the
 * two files share are in chunk_store_file_internal.h.
 *
 * Threads: put, put_hashed, fetch, permute, buffer, release and destroy run
 * on the main thread (they allocate through env, and writes go through
 * env's hooks).  read_chunk touches only the read descriptor (pread), the
 * byte counter (atomic) and, when it fails, the error text (under a mutex),
 * so any thread may call it while no main-thread call changes the chunk
 * table, except while rows are grouped by hash: it then gathers them
 * through fetch, and read_any_thread says so.
 *
 * put writes a chunk that fills one of buffer()'s two buffers in the
 * background (env's temp_write_start): the scan fills the other meanwhile.
 * put_hashed copies a group's full run into one of two batch buffers and
 * writes a full batch in the background (runs are at most
 * GROUP_STAGE_BYTES; handing each to a thread of its own cost more than it
 * saved: SAGA's collect at 1M x 100 and 96 MB, 0.84-0.94 s behind, 0.53-0.70 s
 * at once).  One write is in flight at most; the next put, and every main-thread call
 * that reads or changes the file, waits for it first (drain_write), and
 * read_any_thread is false while it is in flight.  A background write that
 * failed leaves the file not whole: the next call reports it, and reads
 * after that are an ERROR.
 */
#include "chunk_store_file_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fetch reads runs of nearby rows whole: at most this much at once ... */
#define FETCH_SPAN_BYTES ((size_t) 1 << 20)
/* ... reading over gaps up to this size rather than paying another read */
#define FETCH_GAP_BYTES ((size_t) 64 << 10)

/* Staging bytes a group at most (gbml_chunk_store_file_test_group_stage changes it). */
static size_t group_stage_bytes = GROUP_STAGE_BYTES;
/* A batch of runs at most (gbml_chunk_store_file_test_run_batch changes it). */
static size_t run_batch_bytes = RUN_BATCH_BYTES;

static const char *const file_residence = "file";

static double
mb(uint64_t bytes)
{
	return (double) bytes / 1048576.0;
}

int
gbml_cfs_store_fail(file_store *f, int code, const char *fmt,...)
{
	va_list		ap;

	pthread_mutex_lock(&f->error_lock);
	va_start(ap, fmt);
	vsnprintf(f->error, sizeof(f->error), fmt, ap);
	va_end(ap);
	f->error_code = code;
	pthread_mutex_unlock(&f->error_lock);
	return 1;
}

/* env's last error (an allocation, a hook) as the store's. */
int
gbml_cfs_store_fail_env(file_store *f)
{
	return gbml_cfs_store_fail(f, f->env->error_code ? f->env->error_code : GBML_EIO, "%s", f->env->error);
}

/* The row count of the file's features: from the first buffer or put on; they must agree after. */
static int
set_features(file_store *f, int n_features)
{
	if (f->n_features == n_features)
		return 0;
	if (f->n_features != 0 || n_features <= 0)
		return gbml_cfs_store_fail(f, GBML_EINVAL, "chunks of %d features in a file of %d", n_features, f->n_features);
	if ((f->missing = gbml_alloc0(f->env, (size_t) n_features * sizeof(bool))) == NULL)
		return gbml_cfs_store_fail_env(f);
	f->n_features = n_features;
	return 0;
}

/* Reads bytes [offset, offset + len) of the file; any thread. */
static int
read_at(file_store *f, void *out, size_t len, uint64_t offset, const char *what)
{
	int			e;

	if (f->damaged)
		return gbml_cfs_store_fail(f, GBML_EIO, "could not read %s: the temporary file is not whole (%s failed)",
						  what, f->damaged);
	e = gbml_temp_read(&f->file, out, len, offset);
	if (e != 0)
		return gbml_cfs_store_fail(f, GBML_EIO, "could not read %s (%.1f MB at %.1f MB) from a temporary file: %s",
						  what, mb(len), mb(offset), strerror(e));
	__atomic_fetch_add(&f->bytes_read, (uint64_t) len, __ATOMIC_RELAXED);
	return 0;
}

/* Writes to `file` at offset (main thread); a failure names the chunk and the bytes so far. */
int
gbml_cfs_write_at(file_store *f, gbml_temp_file *file, const void *x, size_t len, uint64_t offset, const char *what)
{
	if (gbml_temp_write(f->env, file, x, len, offset) != GBML_OK)
		return gbml_cfs_store_fail(f, f->env->error_code, "writing %s (%.1f MB) after %.1f MB written: %s",
						  what, mb(len), mb(f->bytes_written), f->env->error);
	f->bytes_written += len;
	return 0;
}

/*
 * Starts writing a chunk from one of the buffers at offset (main thread);
 * drain_write waits for it.  Counted as written now: the bytes are taken.
 */
static int
write_start(file_store *f, const float *x, size_t len, uint64_t offset, const char *what)
{
	if (gbml_temp_write_start(f->env, &f->file, x, len, offset) != GBML_OK)
		return gbml_cfs_store_fail(f, f->env->error_code, "writing %s (%.1f MB) after %.1f MB written: %s",
						  what, mb(len), mb(f->bytes_written), f->env->error);
	f->writing = true;
	f->writing_from = x;
	f->writing_len = len;
	snprintf(f->writing_what, sizeof(f->writing_what), "%s", what);
	f->base.read_any_thread = false;
	f->bytes_written += len;
	return 0;
}

/*
 * Waits for put's write in flight, if any (main thread).  If it failed, the
 * file is not whole (the chunk is in the tables already): this call and
 * every read after it fail, naming the write.
 */
static int
drain_write(file_store *f)
{
	if (!f->writing)
		return 0;
	f->writing = false;
	f->base.read_any_thread = f->place == NULL;
	if (gbml_temp_write_wait(f->env, &f->file) != GBML_OK)
	{
		f->damaged = "a background write";
		return gbml_cfs_store_fail(f, f->env->error_code, "writing %s (%.1f MB) in the background: %s",
						  f->writing_what, mb(f->writing_len), f->env->error);
	}
	return 0;
}

/* ---- where rows are in the file: runs while grouped, segments after an in-place reorder ---- */

/*
 * The table whose pointer is at `where` (an int64_t ** or int8_t **)
 * resized to cap entries of `size` bytes; the store's error on failure.
 * The pointer is read and written with memcpy: no access through another
 * pointer type.
 */
static int
resize_table(file_store *f, void *where, int64_t cap, size_t size)
{
	void	   *old,
			   *q;

	memcpy(&old, where, sizeof(old));
	if ((q = gbml_realloc(f->env, old, (size_t) cap * size)) == NULL)
		return gbml_cfs_store_fail_env(f);
	memcpy(where, &q, sizeof(q));
	return 0;
}

/* Notes a run written at file row `at` while rows are grouped: of hash group g (-1: any). */
static int
note_run(file_store *f, int64_t at, int g)
{
	if (f->n_runs == f->cap_runs)
	{
		int64_t		cap = f->cap_runs ? f->cap_runs * 2 : 256;

		if (resize_table(f, &f->run_at, cap, sizeof(int64_t)) != 0 ||
			resize_table(f, &f->run_group, cap, sizeof(int8_t)) != 0)
			return 1;
		f->cap_runs = cap;
	}
	f->run_at[f->n_runs] = at;
	f->run_group[f->n_runs++] = (int8_t) g;
	return 0;
}

/*
 * Positions [pos, pos + n), right after the last segment's, at file rows
 * from `at`: the last segment grows when they follow on in the file too.
 */
int
gbml_cfs_push_segment(file_store *f, int64_t pos, int64_t at, int64_t n)
{
	int64_t		k = f->n_segs - 1;

	if (k >= 0 && f->seg_at[k] + (pos - f->seg_pos[k]) == at)
	{
		f->seg_pos[k + 1] = pos + n;
		return 0;
	}
	if (f->n_segs + 1 >= f->cap_segs)
	{
		int64_t		cap = f->cap_segs ? f->cap_segs * 2 : 256;

		if (resize_table(f, &f->seg_pos, cap, sizeof(int64_t)) != 0 ||
			resize_table(f, &f->seg_at, cap, sizeof(int64_t)) != 0)
			return 1;
		f->cap_segs = cap;
	}
	f->seg_pos[f->n_segs] = pos;
	f->seg_at[f->n_segs++] = at;
	f->seg_pos[f->n_segs] = pos + n;
	return 0;
}

/* Reads positions [pos, pos + n) through the segments; any thread (the segments do not change then). */
static int
read_positions(file_store *f, int64_t pos, int64_t n, float *out, const char *what)
{
	size_t		rb = gbml_cfs_row_bytes(f);

	for (int64_t k = gbml_cfs_segment_of(f, pos); n > 0; k++)
	{
		int64_t		m = f->seg_pos[k + 1] - pos < n ? f->seg_pos[k + 1] - pos : n;

		if (read_at(f, out, (size_t) m * rb, (uint64_t) (f->seg_at[k] + pos - f->seg_pos[k]) * rb, what) != 0)
			return 1;
		out += (size_t) m * (size_t) f->n_features;
		pos += m;
		n -= m;
	}
	return 0;
}

void
gbml_cfs_free_runs(file_store *f)
{
	gbml_free(f->env, f->run_at);
	gbml_free(f->env, f->run_group);
	f->run_at = NULL;
	f->run_group = NULL;
	f->n_runs = f->cap_runs = 0;
}

void
gbml_cfs_free_segments(file_store *f)
{
	gbml_free(f->env, f->seg_pos);
	gbml_free(f->env, f->seg_at);
	f->seg_pos = NULL;
	f->seg_at = NULL;
	f->n_segs = f->cap_segs = 0;
}

/*
 * The buffer not being written: the second one is taken only while at
 * least as much budget again stays free (else the write in flight is
 * waited for, and its buffer reused).
 */
static float *
fs_buffer(gbml_chunk_store *s, int64_t rows, int n_features)
{
	file_store *f = (file_store *) s;
	size_t		want = (size_t) rows * (size_t) n_features;
	int			k = f->writing && f->writing_from == f->buf[0] ? 1 : 0;

	if (set_features(f, n_features) != 0)
		return NULL;
	if (k == 1 && want > f->buf_floats[1] && gbml_cfs_free_budget(f) / 2 / sizeof(float) < want)
	{
		if (drain_write(f) != 0)
			return NULL;
		k = 0;
	}
	if (want > f->buf_floats[k])
	{
		/* not in flight: its chunk was written already */
		gbml_free(f->env, f->buf[k]);
		f->buf_floats[k] = 0;
		if ((f->buf[k] = gbml_alloc_array(f->env, want, sizeof(float))) == NULL)
		{
			gbml_cfs_store_fail_env(f);
			return NULL;
		}
		f->buf_floats[k] = want;
	}
	return f->buf[k];
}

/* The rows of the chunks stored so far. */
static int64_t
stored_rows(const file_store *f)
{
	return f->n_chunks == 0 ? 0 : f->chunks[f->n_chunks - 1].first_row + f->chunks[f->n_chunks - 1].n_rows;
}

static int
push_chunk(file_store *f, uint64_t offset, int64_t n_rows)
{
	int64_t		first_row = stored_rows(f);

	if (f->n_chunks == f->cap_chunks)
	{
		int			cap = f->cap_chunks ? f->cap_chunks * 2 : 16;
		file_chunk *p = gbml_realloc(f->env, f->chunks, (size_t) cap * sizeof(file_chunk));

		if (p == NULL)
			return gbml_cfs_store_fail_env(f);
		f->chunks = p;
		f->cap_chunks = cap;
	}
	f->chunks[f->n_chunks].offset = offset;
	f->chunks[f->n_chunks].n_rows = n_rows;
	f->chunks[f->n_chunks].first_row = first_row;
	f->n_chunks++;
	return 0;
}

static int	grow_places(file_store *f, int64_t rows, int64_t more);

static int
fs_put(gbml_chunk_store *s, const float *x, int64_t n_rows, int n_features)
{
	file_store *f = (file_store *) s;
	size_t		len;
	int64_t		first;
	char		what[96];
	bool		background;

	if (set_features(f, n_features) != 0 || drain_write(f) != 0)
		return 1;
	/* rows in one of our buffers are written in the background: the caller refills the other */
	background = n_rows > 0 && (x == f->buf[0] || x == f->buf[1]);
	len = (size_t) n_rows * gbml_cfs_row_bytes(f);
	snprintf(what, sizeof(what), "chunk %d of %lld rows", f->n_chunks + 1, (long long) n_rows);
	first = stored_rows(f);
	/* rows grouped by hash before: this chunk is one run, its rows' places noted */
	if (f->place != NULL && grow_places(f, first, n_rows) != 0)
		return 1;
	/* the table first: a failed write then leaves no chunk behind */
	if (push_chunk(f, f->end, n_rows) != 0)
		return 1;
	if ((background ? write_start(f, x, len, f->end, what) : gbml_cfs_write_at(f, &f->file, x, len, f->end, what)) != 0 ||
		(f->place != NULL && note_run(f, (int64_t) (f->end / gbml_cfs_row_bytes(f)), -1) != 0) ||
		(f->seg_pos != NULL && gbml_cfs_push_segment(f, first, (int64_t) (f->end / gbml_cfs_row_bytes(f)), n_rows) != 0))
	{
		f->n_chunks--;
		return 1;
	}
	for (int64_t r = 0, at = (int64_t) (f->end / gbml_cfs_row_bytes(f)); f->place != NULL && r < n_rows; r++)
		f->place[first + r] = at + r;
	gbml_missing_flags(f->missing, x, n_rows, n_features);
	f->end += len;
	f->rows_spilled += n_rows;
	return 0;
}

/* ---- rows grouped by hash as they arrive (put_hashed) ---- */

/* The batch buffers (flush_group), when the budget has room for them; else runs are written at once. */
static int
alloc_batches(file_store *f)
{
	size_t		cap = gbml_cfs_free_budget(f) / 32,
				run = (size_t) f->stage_rows * gbml_cfs_row_bytes(f);

	if (cap > run_batch_bytes)
		cap = run_batch_bytes;
	cap -= cap % sizeof(float);
	if (cap < 2 * run)
		return 0;
	for (int k = 0; k < 2; k++)
		if ((f->batch[k] = gbml_alloc_array(f->env, cap / sizeof(float), sizeof(float))) == NULL)
			return gbml_cfs_store_fail_env(f);
	f->batch_cap = cap;
	f->batch_len = 0;
	f->batch_cur = 0;
	return 0;
}

/* Gives back the batch buffers (none may be in flight). */
static void
free_batches(file_store *f)
{
	for (int k = 0; k < 2; k++)
	{
		gbml_free(f->env, f->batch[k]);
		f->batch[k] = NULL;
	}
	f->batch_cap = f->batch_len = 0;
}

/* Starts writing the filling batch (if it holds runs) after the write in flight; the other one fills next. */
static int
write_batch(file_store *f)
{
	if (f->batch_len == 0)
		return 0;
	if (drain_write(f) != 0 ||
		write_start(f, f->batch[f->batch_cur], f->batch_len, f->batch_at, "rows grouped by hash") != 0)
		return 1;
	f->batch_cur ^= 1;
	f->batch_len = 0;
	return 0;
}

/* The staging buffers, if the budget leaves each group GROUP_STAGE_MIN_BYTES (else none), and the batches. */
static int
alloc_stage(file_store *f)
{
	size_t		rb = gbml_cfs_row_bytes(f),
				per_group = group_stage_bytes,
				/* runs smaller are not worth it; a test's smaller stage stands down to one row */
				min_run = group_stage_bytes < GROUP_STAGE_BYTES ? rb : GROUP_STAGE_MIN_BYTES;

	if (gbml_cfs_free_budget(f) / 8 / HASH_GROUPS < per_group)
		per_group = gbml_cfs_free_budget(f) / 8 / HASH_GROUPS;
	if (per_group < min_run || per_group < rb)
		return 0;
	f->stage_rows = (int64_t) (per_group / rb);
	f->stage = gbml_alloc_array(f->env, (size_t) HASH_GROUPS * (size_t) f->stage_rows, rb);
	f->stage_row = gbml_alloc_array(f->env, (size_t) HASH_GROUPS * (size_t) f->stage_rows, sizeof(int64_t));
	memset(f->staged, 0, sizeof(f->staged));
	if (f->stage == NULL || f->stage_row == NULL)
	{
		gbml_free(f->env, f->stage);
		gbml_free(f->env, f->stage_row);
		f->stage = NULL;
		f->stage_row = NULL;
		return gbml_cfs_store_fail_env(f);
	}
	return alloc_batches(f);
}

/* Group g's staging memory. */
static float *
group_stage(const file_store *f, int g)
{
	return (float *) ((char *) f->stage + (size_t) g * (size_t) f->stage_rows * gbml_cfs_row_bytes(f));
}

/*
 * Group g's staged rows as one run at the end of the file: copied into the
 * filling batch (a full batch's write started first), or, without batches,
 * written at once (a plain put's write waited for first).
 */
static int
flush_group(file_store *f, int g)
{
	size_t		rb = gbml_cfs_row_bytes(f),
				len = (size_t) f->staged[g] * rb;
	int64_t		at,
				m = f->staged[g];
	const int64_t *rows = f->stage_row + (size_t) g * (size_t) f->stage_rows;

	if (m == 0)
		return 0;
	at = (int64_t) (f->end / rb);
	if (f->batch[0] != NULL)
	{
		if (f->batch_len + len > f->batch_cap && write_batch(f) != 0)
			return 1;
		if (f->batch_len == 0)
			f->batch_at = f->end;
		memcpy((char *) f->batch[f->batch_cur] + f->batch_len, group_stage(f, g), len);
		f->batch_len += len;
	}
	else if (drain_write(f) != 0 ||
			 gbml_cfs_write_at(f, &f->file, group_stage(f, g), len, f->end, "rows grouped by hash") != 0)
		return 1;
	if (note_run(f, at, g) != 0)
		return 1;
	for (int64_t k = 0; k < m; k++)
		f->place[rows[k]] = at + k;
	f->end += (uint64_t) len;
	f->staged[g] = 0;
	return 0;
}

/* put's write done and every staged row in the file, the staging memory freed: before anything reads rows. */
int
gbml_cfs_settle(file_store *f)
{
	if (f->stage == NULL)
		return drain_write(f);
	for (int g = 0; g < HASH_GROUPS; g++)
		if (flush_group(f, g) != 0)
			return 1;
	if (write_batch(f) != 0 || drain_write(f) != 0)
		return 1;
	free_batches(f);
	gbml_free(f->env, f->stage);
	gbml_free(f->env, f->stage_row);
	f->stage = NULL;
	f->stage_row = NULL;
	return 0;
}

/* Room in place for `more` rows after the stored ones. */
static int
grow_places(file_store *f, int64_t rows, int64_t more)
{
	int64_t		cap = f->place_cap;

	if (rows + more <= cap)
		return 0;
	while (cap < rows + more)
		cap = cap ? cap * 2 : 1024;
	if (resize_table(f, &f->place, cap, sizeof(int64_t)) != 0)
		return 1;
	f->place_cap = cap;
	return 0;
}

/*
 * put, with each row's canonical-order hash: the first put (nothing stored
 * yet) decides whether rows are grouped (the staging buffers fit); reads
 * are then on the main thread only (they settle the staging first) until
 * permute writes the rows in the order asked.
 */
static int
fs_put_hashed(gbml_chunk_store *s, const float *x, const uint64_t *hash, int64_t n_rows, int n_features)
{
	file_store *f = (file_store *) s;
	size_t		rb;
	int64_t		first;

	if (set_features(f, n_features) != 0)
		return 1;
	if (f->n_chunks == 0)
	{
		if (alloc_stage(f) != 0 || (f->stage != NULL && grow_places(f, 0, n_rows) != 0))
			return 1;
		s->read_any_thread = f->place == NULL;
	}
	if (f->place == NULL)
		return fs_put(s, x, n_rows, n_features);
	if (f->stage == NULL && alloc_stage(f) != 0)
		return 1;				/* settled by a read: staging again */
	if (f->stage == NULL)
		return fs_put(s, x, n_rows, n_features);	/* no room to stage again: one run as it is */
	rb = gbml_cfs_row_bytes(f);
	first = stored_rows(f);
	if (grow_places(f, first, n_rows) != 0 || push_chunk(f, 0, n_rows) != 0)
		return 1;
	for (int64_t r = 0; r < n_rows; r++)
	{
		int			g = (int) (hash[r] >> (64 - HASH_GROUP_BITS));
		int64_t		k = f->staged[g];

		memcpy((char *) group_stage(f, g) + (size_t) k * rb, (const char *) x + (size_t) r * rb, rb);
		f->place[first + r] = -1;
		f->stage_row[(size_t) g * (size_t) f->stage_rows + (size_t) k] = first + r;
		if (++f->staged[g] == f->stage_rows && flush_group(f, g) != 0)
			return 1;
	}
	gbml_missing_flags(f->missing, x, n_rows, n_features);
	f->rows_spilled += n_rows;
	return 0;
}

/* Whether address a names a stored row. */
static bool
valid_address(const file_store *f, int64_t a)
{
	int64_t		c = a >> 32;

	return a >= 0 && c < f->n_chunks && (a & 0xffffffffLL) < f->chunks[c].n_rows;
}

int
gbml_cfs_check_addresses(file_store *f, const int64_t *src, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		if (!valid_address(f, src[i]))
			return gbml_cfs_store_fail(f, GBML_EINVAL, "row address %lld (chunk %lld, row %lld) is not stored",
							  (long long) src[i], (long long) (src[i] >> 32), (long long) (src[i] & 0xffffffffLL));
	return 0;
}

/* Rows [first, first + n) of chunk `index`, grouped by hash: gathered from their places (main thread). */
static int
read_grouped(file_store *f, int index, int64_t first, int64_t n, float *out)
{
	int64_t    *src = gbml_alloc_array(f->env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));
	int			rc;

	if (src == NULL)
		return gbml_cfs_store_fail_env(f);
	for (int64_t r = 0; r < n; r++)
		src[r] = ((int64_t) index << 32) | (first + r);
	rc = gbml_cfs_settle(f) != 0 ? 1 : gbml_cfs_fetch_rows(f, src, n, out, NULL);
	gbml_free(f->env, src);
	return rc;
}

int
gbml_cfs_read_chunk(gbml_chunk_store *s, int index, float *out)
{
	file_store *f = (file_store *) s;
	char		what[64];

	if (index < 0 || index >= f->n_chunks)
		return gbml_cfs_store_fail(f, GBML_EINVAL, "chunk %d is not stored (%d chunks)", index, f->n_chunks);
	/* a write in flight: read_any_thread is false, so this is the main thread */
	if (drain_write(f) != 0)
		return 1;
	if (f->place != NULL)
		return read_grouped(f, index, 0, f->chunks[index].n_rows, out);
	snprintf(what, sizeof(what), "chunk %d", index + 1);
	if (f->seg_pos != NULL)
		return read_positions(f, f->chunks[index].first_row, f->chunks[index].n_rows, out, what);
	return read_at(f, out, (size_t) f->chunks[index].n_rows * gbml_cfs_row_bytes(f), f->chunks[index].offset, what);
}

/* ---- categories renumbered on read (renumber_on_read) ---- */

static int
fs_renumber_on_read(gbml_chunk_store *s, const int32_t *const *ids, const int32_t *n_ids)
{
	file_store *f = (file_store *) s;

	if (f->renumber != NULL || f->n_features == 0)
		return gbml_cfs_store_fail(f, GBML_EINVAL, "categories renumbered %s", f->renumber ? "twice" : "before any row");
	if ((f->renumber = gbml_alloc0(f->env, sizeof(int32_t *) * (size_t) f->n_features)) == NULL ||
		(f->renumber_n = gbml_alloc0(f->env, sizeof(int32_t) * (size_t) f->n_features)) == NULL)
		return gbml_cfs_store_fail_env(f);
	for (int j = 0; j < f->n_features; j++)
	{
		if (ids[j] == NULL)
			continue;
		if ((f->renumber[j] = gbml_alloc_array(f->env, (size_t) (n_ids[j] > 0 ? n_ids[j] : 1), sizeof(int32_t))) == NULL)
			return gbml_cfs_store_fail_env(f);
		memcpy(f->renumber[j], ids[j], sizeof(int32_t) * (size_t) n_ids[j]);
		f->renumber_n[j] = n_ids[j];
	}
	return 0;
}

static void
free_renumber(file_store *f)
{
	for (int j = 0; f->renumber != NULL && j < f->n_features; j++)
		gbml_free(f->env, f->renumber[j]);
	gbml_free(f->env, f->renumber);
	gbml_free(f->env, f->renumber_n);
	f->renumber = NULL;
	f->renumber_n = NULL;
}

/* Rows just read (rc: the read's result) as renumber_on_read asked; any thread. */
static int
renumber_rows(file_store *f, float *x, int64_t n, int rc)
{
	float		bad;

	for (int j = 0; rc == 0 && f->renumber != NULL && j < f->n_features; j++)
		if (f->renumber[j] != NULL &&
			gbml_renumber_column(x, n, f->n_features, j, f->renumber[j], f->renumber_n[j], &bad) != 0)
			return gbml_cfs_store_fail(f, GBML_EINVAL, "feature %d: stored category id %g is not renumbered (internal)",
									   j + 1, (double) bad);
	return rc;
}

/* The store's read_chunk: gbml_cfs_read_chunk (what permute reads: the bytes as stored), renumbered. */
static int
fs_read_chunk(gbml_chunk_store *s, int index, float *out)
{
	file_store *f = (file_store *) s;
	int			rc = gbml_cfs_read_chunk(s, index, out);

	return renumber_rows(f, out, rc == 0 ? f->chunks[index].n_rows : 0, rc);
}

static int
read_rows_as_stored(gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out)
{
	file_store *f = (file_store *) s;
	char		what[64];

	if (index < 0 || index >= f->n_chunks)
		return gbml_cfs_store_fail(f, GBML_EINVAL, "chunk %d is not stored (%d chunks)", index, f->n_chunks);
	if (first < 0 || n < 0 || first + n > f->chunks[index].n_rows)
		return gbml_cfs_store_fail(f, GBML_EINVAL, "rows %lld..%lld are not in chunk %d (%lld rows)", (long long) first,
						  (long long) (first + n), index + 1, (long long) f->chunks[index].n_rows);
	if (drain_write(f) != 0)
		return 1;
	if (f->place != NULL)
		return read_grouped(f, index, first, n, out);
	snprintf(what, sizeof(what), "chunk %d", index + 1);
	if (f->seg_pos != NULL)
		return read_positions(f, f->chunks[index].first_row + first, n, out, what);
	return read_at(f, out, (size_t) n * gbml_cfs_row_bytes(f), f->chunks[index].offset + (uint64_t) first * gbml_cfs_row_bytes(f),
				   what);
}

static int
fs_read_rows(gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out)
{
	return renumber_rows((file_store *) s, out, n, read_rows_as_stored(s, index, first, n, out));
}

/* ---- fetch: rows by address ---- */

static int
cmp_place(const void *a, const void *b)
{
	const place_slot *x = a,
			   *y = b;

	return x->place < y->place ? -1 : x->place > y->place ? 1 : (x->i > y->i) - (x->i < y->i);
}

/*
 * From o[k] on (sorted by place), how many entries one read covers: rows
 * within FETCH_SPAN_BYTES of the first, no gap between neighbours wider
 * than FETCH_GAP_BYTES.
 */
static int64_t
span_end(const place_slot *o, int64_t k, int64_t n, int64_t span_rows, int64_t gap_rows)
{
	int64_t		e = k + 1;

	while (e < n && o[e].place - o[k].place < span_rows && o[e].place - o[e - 1].place <= gap_rows + 1)
		e++;
	return e;
}

/*
 * Sorts o[0..n) by place (ties by i, as cmp_place) with room (n place
 * slots, then RADIX_BUCKETS + 1 counters) beside it: for long lists a radix
 * sort of two 16-bit passes when every place is under 2^32 (stable, and o
 * comes in ascending i), else qsort: a reorder sorts every window's
 * places, and qsort with its comparison callback was most of its fetches'
 * time.
 */
void
gbml_cfs_sort_places(place_slot *o, void *room, int64_t n)
{
	place_slot *tmp = room;
	int64_t    *count = room ? (int64_t *) (tmp + n) : NULL;
	int64_t		top = 0;

	for (int64_t k = 0; k < n; k++)
		top = o[k].place > top ? o[k].place : top;
	if (room == NULL || n < RADIX_BUCKETS || top >= ((int64_t) 1 << 32))
	{
		qsort(o, (size_t) n, sizeof(place_slot), cmp_place);
		return;
	}
	for (int shift = 0; shift < 32; shift += 16)
	{
		memset(count, 0, sizeof(int64_t) * (RADIX_BUCKETS + 1));
		for (int64_t k = 0; k < n; k++)
			count[((o[k].place >> shift) & 0xffff) + 1]++;
		for (int b = 0; b < RADIX_BUCKETS; b++)
			count[b + 1] += count[b];
		for (int64_t k = 0; k < n; k++)
			tmp[count[(o[k].place >> shift) & 0xffff]++] = o[k];
		memcpy(o, tmp, (size_t) n * sizeof(place_slot));
	}
}

/* fetch's span buffer: FETCH_SPAN_BYTES, or a quarter of what the budget has free (one row at least). */
size_t
gbml_cfs_fetch_span_bytes(const file_store *f)
{
	size_t		span = FETCH_SPAN_BYTES;

	if (gbml_cfs_free_budget(f) / 4 < span)
		span = gbml_cfs_free_budget(f) / 4;
	return span > gbml_cfs_row_bytes(f) ? span : gbml_cfs_row_bytes(f);
}

/*
 * Copies rows src[0..n) into out.  Their places are sorted, so the file is
 * read in order, and nearby rows come in one read of their span (copying a
 * small gap from the page cache is cheaper than another system call): a
 * run of duplicate rows, a dense sample, or a window of rows grouped by
 * hash does not pay one read per row.  The addresses are valid and nothing
 * is staged (the callers check and settle once: permute for all its
 * windows).  gone (or NULL): the rows are read for the last time, their
 * units given back as they reach zero.  Main thread (it allocates).
 */
int
gbml_cfs_fetch_rows(file_store *f, const int64_t *src, int64_t n, float *out, discard_units *gone)
{
	size_t		rb;
	int64_t		span_rows,
				gap_rows;
	place_slot *o;
	float	   *span;
	int			rc = 0;

	if (n <= 0)
		return 0;
	/* some row is stored, so the rows have features */
	rb = gbml_cfs_row_bytes(f);
	/* the places first: the span buffer is sized by what they leave free */
	_Static_assert(sizeof(place_slot) == GBML_STORE_FETCH_ROW_BYTES, "fetch's places as dataset.h counts them");
	o = gbml_alloc_array(f->env, (size_t) n, sizeof(place_slot));
	span_rows = (int64_t) (gbml_cfs_fetch_span_bytes(f) / rb);
	gap_rows = (int64_t) (FETCH_GAP_BYTES / rb);
	if (gap_rows > span_rows)
		gap_rows = span_rows;
	span = o != NULL ? gbml_alloc_array(f->env, (size_t) span_rows, rb) : NULL;
	if (o == NULL || span == NULL)
		rc = gbml_cfs_store_fail_env(f);
	for (int64_t i = 0; rc == 0 && i < n; i++)
		o[i] = (place_slot) {gbml_cfs_place_of(f, src[i]), i};
	if (rc == 0)
	{
		/* the radix sort's room only when the budget has it (qsort needs none of ours) */
		size_t		want = (size_t) n * sizeof(place_slot) + (RADIX_BUCKETS + 1) * sizeof(int64_t);
		void	   *room = n >= RADIX_BUCKETS && gbml_cfs_free_budget(f) > want + want / 8 ? gbml_alloc(f->env, want) : NULL;

		gbml_cfs_sort_places(o, room, n);
		gbml_free(f->env, room);
	}
	for (int64_t k = 0, e; rc == 0 && k < n; k = e)
	{
		int64_t		first = o[k].place;

		e = span_end(o, k, n, span_rows, gap_rows);
		rc = read_at(f, span, (size_t) (o[e - 1].place - first + 1) * rb, (uint64_t) first * rb, "fetched rows");
		for (int64_t j = k; rc == 0 && j < e; j++)
			memcpy((char *) out + (size_t) o[j].i * rb, (char *) span + (size_t) (o[j].place - first) * rb, rb);
		for (int64_t j = k; rc == 0 && gone != NULL && gone->n > 0 && j < e; j++)
			gbml_cfs_discard_row(f, gone, o[j].place);
	}
	if (rc == 0 && gone != NULL && gone->n > 0)
		gbml_cfs_discard_flush(f, gone);
	gbml_free(f->env, o);
	gbml_free(f->env, span);
	return rc;
}

static int
fs_fetch(gbml_chunk_store *s, const int64_t *src, int64_t n, float *out)
{
	file_store *f = (file_store *) s;

	if (gbml_cfs_check_addresses(f, src, n) != 0 || gbml_cfs_settle(f) != 0)
		return 1;
	return renumber_rows(f, out, n, gbml_cfs_fetch_rows(f, src, n, out, NULL));
}

/* Gives back buffer()'s chunk buffers (none may be in flight); a later buffer() makes one. */
static void
free_buffers(file_store *f)
{
	for (int k = 0; k < 2; k++)
	{
		gbml_free(f->env, f->buf[k]);
		f->buf[k] = NULL;
		f->buf_floats[k] = 0;
	}
}

/* The collect's end: the last write waited for, and the chunk buffers given back. */
static int
fs_flush(gbml_chunk_store *s)
{
	file_store *f = (file_store *) s;

	if (drain_write(f) != 0)
		return 1;
	free_buffers(f);
	return 0;
}

static bool
fs_out_of_room(gbml_chunk_store *s)
{
	(void) s;
	return false;
}

static int
fs_missing(gbml_chunk_store *s, bool *out)
{
	file_store *f = (file_store *) s;

	for (int j = 0; j < f->n_features; j++)
		out[j] = f->missing[j];
	return 0;
}

static void
fs_release(gbml_chunk_store *s)
{
	file_store *f = (file_store *) s;

	/* the file goes now (its disk space and its temp_file_limit share), not at destroy */
	/* closing waits for a write in flight (env.h), before its buffer goes; its result matters no more */
	gbml_temp_close(f->env, &f->file);
	f->writing = false;
	free_buffers(f);
	free_batches(f);
	gbml_free(f->env, f->stage);
	gbml_free(f->env, f->stage_row);
	gbml_free(f->env, f->place);
	f->stage = NULL;
	f->stage_row = NULL;
	f->place = NULL;
	f->place_cap = 0;
	gbml_cfs_free_runs(f);
	gbml_cfs_free_segments(f);
	f->n_chunks = 0;
	f->end = 0;
}

static void
fs_destroy(gbml_chunk_store *s)
{
	file_store *f = (file_store *) s;

	fs_release(s);
	free_renumber(f);
	gbml_free(f->env, f->chunks);
	gbml_free(f->env, f->missing);
	pthread_mutex_destroy(&f->error_lock);
	gbml_free(f->env, f);
}

static const char *
fs_error(gbml_chunk_store *s)
{
	return ((file_store *) s)->error;
}

static int
fs_error_code(gbml_chunk_store *s)
{
	return ((file_store *) s)->error_code;
}

gbml_chunk_store *
gbml_chunk_store_file_open(gbml_env *env)
{
	file_store *f = gbml_alloc0(env, sizeof(file_store));

	if (f == NULL)
		return NULL;
	f->env = env;
	if (gbml_temp_create(env, &f->file) != GBML_OK)
	{
		gbml_free(env, f);
		return NULL;
	}
	pthread_mutex_init(&f->error_lock, NULL);
	f->base.residence = file_residence;
	f->base.where = "temporary files";
	f->base.read_any_thread = true;
	f->base.buffer = fs_buffer;
	f->base.put = fs_put;
	f->base.put_hashed = fs_put_hashed;
	f->base.fetch = fs_fetch;
	f->base.read_chunk = fs_read_chunk;
	f->base.read_rows = fs_read_rows;
	f->base.renumber_on_read = fs_renumber_on_read;
	f->base.flush = fs_flush;
	f->base.out_of_room = fs_out_of_room;
	f->base.permute = gbml_cfs_permute;
	f->base.missing = fs_missing;
	f->base.release = fs_release;
	f->base.destroy = fs_destroy;
	f->base.error = fs_error;
	f->base.error_code = fs_error_code;
	return &f->base;
}

void
gbml_chunk_store_file_set_permute_budget(gbml_chunk_store *s, size_t bytes)
{
	if (s && s->destroy == fs_destroy)
		((file_store *) s)->permute_budget = bytes;
}

bool
gbml_chunk_store_file_stats(const gbml_chunk_store *s, gbml_spill_stats *out)
{
	const file_store *f = (const file_store *) s;

	memset(out, 0, sizeof(*out));
	if (s == NULL || s->destroy != fs_destroy)
		return false;
	out->rows_spilled = f->rows_spilled;
	out->chunks = f->n_chunks;
	out->bytes_written = f->bytes_written;
	out->bytes_read = __atomic_load_n(&f->bytes_read, __ATOMIC_RELAXED);
	out->bytes_discarded = f->bytes_discarded;
	out->reorders_in_place = f->reorders_in_place;
	out->segments = f->n_segs;
	return true;
}

size_t
gbml_chunk_store_file_test_group_stage(size_t bytes)
{
	size_t		was = group_stage_bytes;

	group_stage_bytes = bytes > 0 ? bytes : GROUP_STAGE_BYTES;
	return was;
}

size_t
gbml_chunk_store_file_test_run_batch(size_t bytes)
{
	size_t		was = run_batch_bytes;

	run_batch_bytes = bytes > 0 ? bytes : RUN_BATCH_BYTES;
	return was;
}
