/*
 * chunk_store_file.c — see chunk_store_file.h.  Owns the temporary file of
 * a spilled dataset's features, its chunk table, the grouping of rows by
 * hash as they arrive (put_hashed), and the reorder (permute) that gives
 * the rows their canonical order on disk: in place for rows grouped by
 * hash (a segment table then says where each output position is), else
 * into a new file.
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
 * background (env's temp_write_start): the scan fills the other meanwhile;
 * put_hashed writes a group's full run so, the group staging on in a spare
 * slot.  One write is in flight at most; the next put, and every main-thread call
 * that reads or changes the file, waits for it first (drain_write), and
 * read_any_thread is false while it is in flight.  A background write that
 * failed leaves the file not whole: the next call reports it, and reads
 * after that are an ERROR.
 */
#include "chunk_store_file.h"

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
/* permute's window when env has no budget to take half of */
#define PERMUTE_MAX_WINDOW ((size_t) 1 << 30)
#define SLOT_DONE UINT32_MAX

typedef struct file_chunk
{
	uint64_t	offset;			/* of its first row in the file (unused while rows are grouped by hash) */
	int64_t		n_rows;
	int64_t		first_row;		/* the chunks' rows before it */
} file_chunk;

/*
 * put_hashed's groups: rows go to one of HASH_GROUPS staging buffers by the
 * top bits of their canonical-order hash, a full buffer is written as one
 * run, so each run holds rows of one hash range.  The canonical order sorts
 * by hash, so a window of it lies in a few groups' runs and permute reads
 * them straight into place: one write of the rows and about one read, where
 * rows in arrival order need two of each.  Staging takes at most
 * GROUP_STAGE_BYTES a group and an eighth of the free budget in all; when
 * that leaves a group under GROUP_STAGE_MIN_BYTES (runs too small to read
 * well) the rows go in arrival order.
 */
#define HASH_GROUP_BITS 6
#define HASH_GROUPS (1 << HASH_GROUP_BITS)
#define GROUP_STAGE_BYTES ((size_t) 512 << 10)
#define GROUP_STAGE_MIN_BYTES ((size_t) 32 << 10)

/* Staging bytes a group at most (gbml_chunk_store_file_test_group_stage changes it). */
static size_t group_stage_bytes = GROUP_STAGE_BYTES;

typedef struct file_store
{
	gbml_chunk_store base;		/* first: a gbml_chunk_store * is a file_store * */
	gbml_env   *env;
	gbml_temp_file file;
	int			n_features;		/* 0 until the first buffer or put */
	file_chunk *chunks;
	int			n_chunks;
	int			cap_chunks;
	uint64_t	end;			/* bytes in the file: where the next chunk goes */
	float	   *buf[2];			/* the host chunk buffers that buffer() hands out in turn */
	size_t		buf_floats[2];
	/* a write in flight (from writing_from: a buffer or a staging slot), and what it was for messages */
	bool		writing;
	const void *writing_from;
	size_t		writing_len;
	char		writing_what[96];
	bool	   *missing;		/* per feature: a stored row has NaN or -Infinity there */
	/*
	 * Rows grouped by hash (put_hashed): the file is not in chunk order;
	 * place[chunk's first_row + r] is row r's place in the file, in rows
	 * (-1 while it waits in its group's staging buffer).  NULL: in chunk
	 * order, chunk c's row r at first_row + r.
	 */
	int64_t    *place;
	int64_t		place_cap;
	float	   *stage;			/* HASH_GROUPS + 1 slots of stage_rows rows */
	int64_t    *stage_row;		/* per group: the staged rows' indices into place */
	int64_t		stage_rows;
	int64_t		staged[HASH_GROUPS];
	int64_t		stage_limit[HASH_GROUPS];	/* a group's run is written at this many rows */
	uint8_t		stage_slot[HASH_GROUPS];	/* group g stages in slot stage_slot[g] ... */
	uint8_t		spare_slot;		/* ... and this one is written in the background, or free */
	/*
	 * The runs written while rows are grouped (place non-NULL): run k starts
	 * at file row run_at[k] and holds rows of hash group run_group[k] (-1: a
	 * plain put's chunk, any group).  permute_in_place cuts its windows
	 * where the group changes.
	 */
	int64_t    *run_at;
	int8_t	   *run_group;
	int64_t		n_runs;
	int64_t		cap_runs;
	/*
	 * Rows reordered in place (permute_in_place): the stored rows' positions
	 * (chunk c's row r at chunks[c].first_row + r) are cut into segments,
	 * segment k holding positions [seg_pos[k], seg_pos[k + 1]) at file rows
	 * from seg_at[k] on.  NULL: position i at file row i (the chunks back to
	 * back).
	 */
	int64_t    *seg_pos;		/* n_segs + 1 */
	int64_t    *seg_at;
	int64_t		n_segs;
	int64_t		cap_segs;
	size_t		permute_budget; /* 0: from env's free budget */
	const char *damaged;		/* what failed after changing the file (a reorder, a write), so it is not whole */
	int64_t		rows_spilled;
	uint64_t	bytes_written;
	uint64_t	bytes_read;		/* atomic: read_chunk may run on any thread */
	uint64_t	bytes_discarded;	/* given back by permute (gbml_temp_discard) */
	int			reorders_in_place;	/* permutes done by permute_in_place */
	pthread_mutex_t error_lock;
	char		error[512];
	int			error_code;
} file_store;

static const char *const file_residence = "file";

static size_t
row_bytes(const file_store *f)
{
	return (size_t) f->n_features * sizeof(float);
}

/* What env's budget has free (SIZE_MAX without a limit): the store's buffers size themselves by it. */
static size_t
free_budget(const file_store *f)
{
	const gbml_env *env = f->env;

	if (env->memory_limit == 0)
		return SIZE_MAX;
	return env->memory_limit > env->memory_used ? env->memory_limit - env->memory_used : 0;
}

static double
mb(uint64_t bytes)
{
	return (double) bytes / 1048576.0;
}

/* Records a failure for error() / error_code(); returns 1 (the store's failure value). */
static int
store_fail(file_store *f, int code, const char *fmt,...)
	__attribute__((format(printf, 3, 4)));

static int
store_fail(file_store *f, int code, const char *fmt,...)
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
static int
store_fail_env(file_store *f)
{
	return store_fail(f, f->env->error_code ? f->env->error_code : GBML_EIO, "%s", f->env->error);
}

/* The row count of the file's features: from the first buffer or put on; they must agree after. */
static int
set_features(file_store *f, int n_features)
{
	if (f->n_features == n_features)
		return 0;
	if (f->n_features != 0 || n_features <= 0)
		return store_fail(f, GBML_EINVAL, "chunks of %d features in a file of %d", n_features, f->n_features);
	if ((f->missing = gbml_alloc0(f->env, (size_t) n_features * sizeof(bool))) == NULL)
		return store_fail_env(f);
	f->n_features = n_features;
	return 0;
}

/* Reads bytes [offset, offset + len) of the file; any thread. */
static int
read_at(file_store *f, void *out, size_t len, uint64_t offset, const char *what)
{
	int			e;

	if (f->damaged)
		return store_fail(f, GBML_EIO, "could not read %s: the temporary file is not whole (%s failed)",
						  what, f->damaged);
	e = gbml_temp_read(&f->file, out, len, offset);
	if (e != 0)
		return store_fail(f, GBML_EIO, "could not read %s (%.1f MB at %.1f MB) from a temporary file: %s",
						  what, mb(len), mb(offset), strerror(e));
	__atomic_fetch_add(&f->bytes_read, (uint64_t) len, __ATOMIC_RELAXED);
	return 0;
}

/* Writes to `file` at offset (main thread); a failure names the chunk and the bytes so far. */
static int
write_at(file_store *f, gbml_temp_file *file, const void *x, size_t len, uint64_t offset, const char *what)
{
	if (gbml_temp_write(f->env, file, x, len, offset) != GBML_OK)
		return store_fail(f, f->env->error_code, "writing %s (%.1f MB) after %.1f MB written: %s",
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
		return store_fail(f, f->env->error_code, "writing %s (%.1f MB) after %.1f MB written: %s",
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
		return store_fail(f, f->env->error_code, "writing %s (%.1f MB) in the background: %s",
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
		return store_fail_env(f);
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
 * Each file row's hash group (-1: a plain put's run), a byte a row, from the
 * runs: a lookup a row where a search of the runs took most of the time of
 * planning an in-place reorder.  NULL with the store's error set (memory).
 */
static int8_t *
groups_by_place(file_store *f, int64_t rows)
{
	int8_t	   *g = gbml_alloc_array(f->env, (size_t) (rows > 0 ? rows : 1), sizeof(int8_t));

	if (g == NULL)
	{
		store_fail_env(f);
		return NULL;
	}
	memset(g, -1, (size_t) rows);
	/* runs are appended in file order, each up to the next one's start */
	for (int64_t k = 0; k < f->n_runs; k++)
	{
		int64_t		end = k + 1 < f->n_runs ? f->run_at[k + 1] : rows;

		memset(g + f->run_at[k], f->run_group[k], (size_t) (end - f->run_at[k]));
	}
	return g;
}

/*
 * Positions [pos, pos + n), right after the last segment's, at file rows
 * from `at`: the last segment grows when they follow on in the file too.
 */
static int
push_segment(file_store *f, int64_t pos, int64_t at, int64_t n)
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

/* The segment holding position i (segments are in position order, the first at 0): a binary search. */
static int64_t
segment_of(const file_store *f, int64_t i)
{
	int64_t		lo = 0,
				hi = f->n_segs;

	while (hi - lo > 1)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (f->seg_pos[mid] <= i)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Reads positions [pos, pos + n) through the segments; any thread (the segments do not change then). */
static int
read_positions(file_store *f, int64_t pos, int64_t n, float *out, const char *what)
{
	size_t		rb = row_bytes(f);

	for (int64_t k = segment_of(f, pos); n > 0; k++)
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

static void
free_runs(file_store *f)
{
	gbml_free(f->env, f->run_at);
	gbml_free(f->env, f->run_group);
	f->run_at = NULL;
	f->run_group = NULL;
	f->n_runs = f->cap_runs = 0;
}

static void
free_segments(file_store *f)
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
	if (k == 1 && want > f->buf_floats[1] && free_budget(f) / 2 / sizeof(float) < want)
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
			store_fail_env(f);
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
			return store_fail_env(f);
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
	len = (size_t) n_rows * row_bytes(f);
	snprintf(what, sizeof(what), "chunk %d of %lld rows", f->n_chunks + 1, (long long) n_rows);
	first = stored_rows(f);
	/* rows grouped by hash before: this chunk is one run, its rows' places noted */
	if (f->place != NULL && grow_places(f, first, n_rows) != 0)
		return 1;
	/* the table first: a failed write then leaves no chunk behind */
	if (push_chunk(f, f->end, n_rows) != 0)
		return 1;
	if ((background ? write_start(f, x, len, f->end, what) : write_at(f, &f->file, x, len, f->end, what)) != 0 ||
		(f->place != NULL && note_run(f, (int64_t) (f->end / row_bytes(f)), -1) != 0) ||
		(f->seg_pos != NULL && push_segment(f, first, (int64_t) (f->end / row_bytes(f)), n_rows) != 0))
	{
		f->n_chunks--;
		return 1;
	}
	for (int64_t r = 0, at = (int64_t) (f->end / row_bytes(f)); f->place != NULL && r < n_rows; r++)
		f->place[first + r] = at + r;
	gbml_missing_flags(f->missing, x, n_rows, n_features);
	f->end += len;
	f->rows_spilled += n_rows;
	return 0;
}

/* ---- rows grouped by hash as they arrive (put_hashed) ---- */

/* Row (chunk << 32 | row)'s place in the file, in rows. */
static int64_t
place_of(const file_store *f, int64_t addr)
{
	const file_chunk *c = &f->chunks[addr >> 32];
	int64_t		i = c->first_row + (addr & 0xffffffffLL);

	if (f->place != NULL)
		return f->place[i];
	if (f->seg_pos != NULL)
	{
		int64_t		k = segment_of(f, i);

		return f->seg_at[k] + (i - f->seg_pos[k]);
	}
	return i;
}

/* The staging buffers, if the budget leaves each group GROUP_STAGE_MIN_BYTES (else none). */
static int
alloc_stage(file_store *f)
{
	size_t		rb = row_bytes(f),
				per_group = group_stage_bytes,
				/* runs smaller are not worth it; a test's smaller stage stands down to one row */
				min_run = group_stage_bytes < GROUP_STAGE_BYTES ? rb : GROUP_STAGE_MIN_BYTES;

	if (free_budget(f) / 8 / HASH_GROUPS < per_group)
		per_group = free_budget(f) / 8 / HASH_GROUPS;
	if (per_group < min_run || per_group < rb)
		return 0;
	f->stage_rows = (int64_t) (per_group / rb);
	f->stage = gbml_alloc_array(f->env, (size_t) (HASH_GROUPS + 1) * (size_t) f->stage_rows, rb);
	f->stage_row = gbml_alloc_array(f->env, (size_t) HASH_GROUPS * (size_t) f->stage_rows, sizeof(int64_t));
	memset(f->staged, 0, sizeof(f->staged));
	/*
	 * Hashes are uniform, so groups filled from empty fill together and
	 * their runs would be written in bursts, each waiting for the one before
	 * (one write in flight): the first runs are staggered in size, so the
	 * runs come one at a time, each written while the next ones fill.
	 */
	for (int g = 0; g < HASH_GROUPS; g++)
	{
		f->stage_slot[g] = (uint8_t) g;
		f->stage_limit[g] = f->stage_rows * (g + 1) / HASH_GROUPS;
		if (f->stage_limit[g] < 1)
			f->stage_limit[g] = 1;
	}
	f->spare_slot = HASH_GROUPS;
	if (f->stage == NULL || f->stage_row == NULL)
	{
		gbml_free(f->env, f->stage);
		gbml_free(f->env, f->stage_row);
		f->stage = NULL;
		f->stage_row = NULL;
		return store_fail_env(f);
	}
	return 0;
}

/* Slot k of the staging memory. */
static float *
stage_slot(const file_store *f, int k)
{
	return (float *) ((char *) f->stage + (size_t) k * (size_t) f->stage_rows * row_bytes(f));
}

/*
 * Writes group g's staged rows as one run at the end of the file, in the
 * background: the group stages on in the spare slot meanwhile (the write
 * before, whose slot becomes the spare, is waited for first).
 */
static int
flush_group(file_store *f, int g)
{
	size_t		rb = row_bytes(f);
	int64_t		at,
				m = f->staged[g];
	const int64_t *rows = f->stage_row + (size_t) g * (size_t) f->stage_rows;
	uint8_t		full = f->stage_slot[g];

	if (m == 0)
		return 0;
	if (drain_write(f) != 0)
		return 1;
	at = (int64_t) (f->end / rb);
	if (write_start(f, stage_slot(f, full), (size_t) m * rb, f->end, "rows grouped by hash") != 0 ||
		note_run(f, at, g) != 0)
		return 1;
	for (int64_t k = 0; k < m; k++)
		f->place[rows[k]] = at + k;
	f->end += (uint64_t) m * rb;
	f->staged[g] = 0;
	f->stage_limit[g] = f->stage_rows;
	f->stage_slot[g] = f->spare_slot;
	f->spare_slot = full;
	return 0;
}

/* put's write done and every staged row in the file, the staging memory freed: before anything reads rows. */
static int
settle(file_store *f)
{
	if (drain_write(f) != 0)
		return 1;
	if (f->stage == NULL)
		return 0;
	for (int g = 0; g < HASH_GROUPS; g++)
		if (flush_group(f, g) != 0)
			return 1;
	if (drain_write(f) != 0)	/* the last run's slot is about to go */
		return 1;
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
	rb = row_bytes(f);
	first = stored_rows(f);
	if (grow_places(f, first, n_rows) != 0 || push_chunk(f, 0, n_rows) != 0)
		return 1;
	for (int64_t r = 0; r < n_rows; r++)
	{
		int			g = (int) (hash[r] >> (64 - HASH_GROUP_BITS));
		int64_t		k = f->staged[g];

		memcpy((char *) stage_slot(f, f->stage_slot[g]) + (size_t) k * rb, (const char *) x + (size_t) r * rb, rb);
		f->place[first + r] = -1;
		f->stage_row[(size_t) g * (size_t) f->stage_rows + (size_t) k] = first + r;
		if (++f->staged[g] == f->stage_limit[g] && flush_group(f, g) != 0)
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

static int
check_addresses(file_store *f, const int64_t *src, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		if (!valid_address(f, src[i]))
			return store_fail(f, GBML_EINVAL, "row address %lld (chunk %lld, row %lld) is not stored",
							  (long long) src[i], (long long) (src[i] >> 32), (long long) (src[i] & 0xffffffffLL));
	return 0;
}

typedef struct discard_units discard_units;
static int	fetch_rows(file_store *f, const int64_t *src, int64_t n, float *out, discard_units *gone);

/* Rows [first, first + n) of chunk `index`, grouped by hash: gathered from their places (main thread). */
static int
read_grouped(file_store *f, int index, int64_t first, int64_t n, float *out)
{
	int64_t    *src = gbml_alloc_array(f->env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));
	int			rc;

	if (src == NULL)
		return store_fail_env(f);
	for (int64_t r = 0; r < n; r++)
		src[r] = ((int64_t) index << 32) | (first + r);
	rc = settle(f) != 0 ? 1 : fetch_rows(f, src, n, out, NULL);
	gbml_free(f->env, src);
	return rc;
}

static int
fs_read_chunk(gbml_chunk_store *s, int index, float *out)
{
	file_store *f = (file_store *) s;
	char		what[64];

	if (index < 0 || index >= f->n_chunks)
		return store_fail(f, GBML_EINVAL, "chunk %d is not stored (%d chunks)", index, f->n_chunks);
	/* a write in flight: read_any_thread is false, so this is the main thread */
	if (drain_write(f) != 0)
		return 1;
	if (f->place != NULL)
		return read_grouped(f, index, 0, f->chunks[index].n_rows, out);
	snprintf(what, sizeof(what), "chunk %d", index + 1);
	if (f->seg_pos != NULL)
		return read_positions(f, f->chunks[index].first_row, f->chunks[index].n_rows, out, what);
	return read_at(f, out, (size_t) f->chunks[index].n_rows * row_bytes(f), f->chunks[index].offset, what);
}

static int
fs_read_rows(gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out)
{
	file_store *f = (file_store *) s;
	char		what[64];

	if (index < 0 || index >= f->n_chunks)
		return store_fail(f, GBML_EINVAL, "chunk %d is not stored (%d chunks)", index, f->n_chunks);
	if (first < 0 || n < 0 || first + n > f->chunks[index].n_rows)
		return store_fail(f, GBML_EINVAL, "rows %lld..%lld are not in chunk %d (%lld rows)", (long long) first,
						  (long long) (first + n), index + 1, (long long) f->chunks[index].n_rows);
	if (drain_write(f) != 0)
		return 1;
	if (f->place != NULL)
		return read_grouped(f, index, first, n, out);
	snprintf(what, sizeof(what), "chunk %d", index + 1);
	if (f->seg_pos != NULL)
		return read_positions(f, f->chunks[index].first_row + first, n, out, what);
	return read_at(f, out, (size_t) n * row_bytes(f), f->chunks[index].offset + (uint64_t) first * row_bytes(f),
				   what);
}

/* ---- fetch: rows by address ---- */

typedef struct place_slot
{
	int64_t		place;			/* in the file, in rows */
	int64_t		i;				/* where the row goes in out */
} place_slot;

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

#define RADIX_BUCKETS 65536

/*
 * Sorts o[0..n) by place (ties by i, as cmp_place) with room (n place
 * slots, then RADIX_BUCKETS + 1 counters) beside it: for long lists a radix
 * sort of two 16-bit passes when every place is under 2^32 (stable, and o
 * comes in ascending i), else qsort: a reorder sorts every window's
 * places, and qsort with its comparison callback was most of its fetches'
 * time.
 */
static void
sort_places(place_slot *o, void *room, int64_t n)
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
static size_t
fetch_span_bytes(const file_store *f)
{
	size_t		span = FETCH_SPAN_BYTES;

	if (free_budget(f) / 4 < span)
		span = free_budget(f) / 4;
	return span > row_bytes(f) ? span : row_bytes(f);
}

/*
 * The reorder's give-back of rows read for the last time (permute_grouped).
 * The file is cut into DISCARD_UNIT_BYTES units, each counting the kept
 * rows whose bytes touch it; fetch_rows counts a window's rows down in its
 * sorted place order, so the units that reach zero come in ascending order
 * and adjacent ones are punched out (gbml_temp_discard) in one call.  The
 * old file's pages and blocks go back while the new file is written: the
 * reorder holds about one copy of the rows, not two (page cache and disk).
 * No memory for the counts (4 bytes a unit): nothing is given back.
 */
#define DISCARD_UNIT_BYTES ((uint64_t) 64 << 10)

/* The unit (gbml_chunk_store_file_test_discard_unit changes it). */
static uint64_t discard_unit_bytes = DISCARD_UNIT_BYTES;

struct discard_units
{
	int32_t    *left;			/* per unit: kept rows not fetched yet */
	int64_t		n;
	int64_t		run_from,		/* units at zero not punched yet: [run_from, run_to) */
				run_to;
	bool		any;			/* some unit was punched */
};

/* The units of a row at file place p: [*u0, *u1]. */
static inline void
discard_span(const file_store *f, int64_t p, int64_t *u0, int64_t *u1)
{
	uint64_t	b = (uint64_t) p * row_bytes(f);

	*u0 = (int64_t) (b / discard_unit_bytes);
	*u1 = (int64_t) ((b + row_bytes(f) - 1) / discard_unit_bytes);
}

/* Counts the units of the kept rows src[0..n) (d->n 0: no room, nothing will be given back). */
static void
discard_init(file_store *f, const int64_t *src, int64_t n, discard_units *d)
{
	size_t		want;

	memset(d, 0, sizeof(*d));
	d->n = (int64_t) ((f->end + discard_unit_bytes - 1) / discard_unit_bytes);
	want = (size_t) (d->n > 0 ? d->n : 1) * sizeof(int32_t);
	if (d->n <= 0 || d->n >= INT32_MAX || free_budget(f) <= want + want / 8 ||
		(d->left = gbml_alloc0(f->env, want)) == NULL)
	{
		d->n = 0;
		return;
	}
	for (int64_t k = 0; k < n; k++)
	{
		int64_t		u0,
					u1;

		discard_span(f, place_of(f, src[k]), &u0, &u1);
		for (int64_t u = u0; u <= u1; u++)
			d->left[u]++;
	}
}

/* Punches out the pending run of units at zero. */
static void
discard_flush(file_store *f, discard_units *d)
{
	uint64_t	from = (uint64_t) d->run_from * discard_unit_bytes,
				to = (uint64_t) d->run_to * discard_unit_bytes;

	if (d->run_to <= d->run_from)
		return;
	if (to > f->end)
		to = f->end;
	if (gbml_temp_discard(&f->file, from, to - from))
	{
		d->any = true;
		f->bytes_discarded += to - from;
	}
	d->run_from = d->run_to = 0;
}

/* A row at place p was read for the last time (places in ascending order): its units counted down. */
static void
discard_row(file_store *f, discard_units *d, int64_t p)
{
	int64_t		u0,
				u1;

	discard_span(f, p, &u0, &u1);
	for (int64_t u = u0; u <= u1; u++)
		if (--d->left[u] == 0)
		{
			if (u != d->run_to)
				discard_flush(f, d);
			if (d->run_to <= d->run_from)
				d->run_from = u;
			d->run_to = u + 1;
		}
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
static int
fetch_rows(file_store *f, const int64_t *src, int64_t n, float *out, discard_units *gone)
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
	rb = row_bytes(f);
	span_rows = (int64_t) (fetch_span_bytes(f) / rb);
	gap_rows = (int64_t) (FETCH_GAP_BYTES / rb);
	if (gap_rows > span_rows)
		gap_rows = span_rows;
	o = gbml_alloc_array(f->env, (size_t) n, sizeof(place_slot));
	span = gbml_alloc_array(f->env, (size_t) span_rows, rb);
	if (o == NULL || span == NULL)
		rc = store_fail_env(f);
	for (int64_t i = 0; rc == 0 && i < n; i++)
		o[i] = (place_slot) {place_of(f, src[i]), i};
	if (rc == 0)
	{
		/* the radix sort's room only when the budget has it (qsort needs none of ours) */
		size_t		want = (size_t) n * sizeof(place_slot) + (RADIX_BUCKETS + 1) * sizeof(int64_t);
		void	   *room = n >= RADIX_BUCKETS && free_budget(f) > want + want / 8 ? gbml_alloc(f->env, want) : NULL;

		sort_places(o, room, n);
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
			discard_row(f, gone, o[j].place);
	}
	if (rc == 0 && gone != NULL && gone->n > 0)
		discard_flush(f, gone);
	gbml_free(f->env, o);
	gbml_free(f->env, span);
	return rc;
}

static int
fs_fetch(gbml_chunk_store *s, const int64_t *src, int64_t n, float *out)
{
	file_store *f = (file_store *) s;

	if (check_addresses(f, src, n) != 0 || settle(f) != 0)
		return 1;
	return fetch_rows(f, src, n, out, NULL);
}

/* ---- permute: the rows src[0..n) in that order, into a new file ---- */

/*
 * The output layout: chunk k holds rows [start[k], start[k + 1]); windows
 * are runs of whole output chunks of at most `budget` bytes (one chunk at
 * least), window w holding chunks [win[w], win[w + 1]).
 */
typedef struct permute_plan
{
	int64_t		n;
	int			n_out;
	int64_t    *start;			/* n_out + 1 */
	int			n_windows;
	int		   *win;			/* n_windows + 1 */
	int		   *window_of;		/* output chunk -> window */
	int64_t		window_rows;	/* rows of the largest window */
	int64_t		first_rows;
	int64_t		chunk_rows;
} permute_plan;

static int64_t
out_chunk_of(const permute_plan *p, int64_t pos)
{
	return pos < p->first_rows ? 0 : 1 + (pos - p->first_rows) / p->chunk_rows;
}

static int64_t
window_start(const permute_plan *p, int w)
{
	return p->start[p->win[w]];
}

static void
plan_free(gbml_env *env, permute_plan *p)
{
	gbml_free(env, p->start);
	gbml_free(env, p->win);
	gbml_free(env, p->window_of);
}

static int
plan_layout(file_store *f, permute_plan *p, int64_t n, int64_t first_rows, int64_t chunk_rows, size_t budget)
{
	size_t		rb = row_bytes(f);
	size_t		bytes = 0;

	memset(p, 0, sizeof(*p));
	p->n = n;
	p->first_rows = first_rows;
	p->chunk_rows = chunk_rows;
	p->n_out = n == 0 ? 0 : n <= first_rows ? 1 : (int) (1 + (n - first_rows + chunk_rows - 1) / chunk_rows);
	p->start = gbml_alloc_array(f->env, (size_t) p->n_out + 1, sizeof(int64_t));
	p->win = gbml_alloc_array(f->env, (size_t) p->n_out + 1, sizeof(int));
	p->window_of = gbml_alloc_array(f->env, (size_t) p->n_out + 1, sizeof(int));
	if (p->start == NULL || p->win == NULL || p->window_of == NULL)
		return store_fail_env(f);
	p->start[0] = 0;
	for (int k = 1; k <= p->n_out; k++)
	{
		int64_t		end = k == 1 ? first_rows : p->start[k - 1] + chunk_rows;

		p->start[k] = end < n ? end : n;
	}
	for (int k = 0; k < p->n_out; k++)
	{
		size_t		cb = (size_t) (p->start[k + 1] - p->start[k]) * rb;

		if (k == 0 || bytes + cb > budget)
		{
			p->win[p->n_windows++] = k;
			bytes = 0;
		}
		bytes += cb;
		p->window_of[k] = p->n_windows - 1;
	}
	p->win[p->n_windows] = p->n_out;
	for (int w = 0; w < p->n_windows; w++)
		if (window_start(p, w + 1) - window_start(p, w) > p->window_rows)
			p->window_rows = window_start(p, w + 1) - window_start(p, w);
	if (p->window_rows >= (int64_t) SLOT_DONE)
		return store_fail(f, GBML_EINVAL, "a reorder window of %lld rows is too large", (long long) p->window_rows);
	return 0;
}

/* Everything one permute holds. */
typedef struct permute_state
{
	file_store *f;
	const int64_t *src;
	permute_plan plan;
	int64_t    *by_chunk;		/* output positions grouped by source chunk, ascending in each */
	int64_t    *group;			/* source chunk c's positions: by_chunk[group[c] .. group[c + 1]) */
	float	   *chunk;			/* one source chunk */
	float	   *window;			/* the output rows of one window */
	float	   *stage;			/* several windows: a staging buffer per window */
	int64_t		stage_rows;
	int64_t    *staged;			/* per window: rows in its staging buffer */
	int64_t    *filled;			/* per window: rows that arrived (written or staged) */
	uint32_t   *slot;			/* several windows: arrival i of window w goes to slot[start + i] */
	bool	   *missing;		/* recomputed over the kept rows */
	gbml_temp_file out;
	int64_t		steps;			/* progress */
	int64_t		total_steps;
} permute_state;

static int
permute_progress(permute_state *st)
{
	gbml_progress_info info = {.phase = "spill reorder",.iteration = ++st->steps,.total = st->total_steps};

	if (gbml_progress(st->f->env, &info))
		return store_fail(st->f, GBML_ECANCELLED, "canceled while reordering rows");
	return 0;
}

/* Groups the output positions by source chunk (a counting sort: ascending positions in each group). */
static int
group_by_chunk(permute_state *st)
{
	file_store *f = st->f;
	int64_t		n = st->plan.n;
	int64_t    *fill;

	st->group = gbml_alloc0(f->env, sizeof(int64_t) * ((size_t) f->n_chunks + 1));
	st->by_chunk = gbml_alloc_array(f->env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));
	fill = gbml_alloc0(f->env, sizeof(int64_t) * ((size_t) f->n_chunks + 1));
	if (st->group == NULL || st->by_chunk == NULL || fill == NULL)
	{
		gbml_free(f->env, fill);
		return store_fail_env(f);
	}
	for (int64_t p = 0; p < n; p++)
		st->group[(st->src[p] >> 32) + 1]++;
	for (int c = 0; c < f->n_chunks; c++)
		st->group[c + 1] += st->group[c];
	for (int64_t p = 0; p < n; p++)
	{
		int64_t		c = st->src[p] >> 32;

		st->by_chunk[st->group[c] + fill[c]++] = p;
	}
	gbml_free(f->env, fill);
	return 0;
}

/* Writes window w's staged rows after the rows of w already written. */
static int
flush_stage(permute_state *st, int w)
{
	size_t		rb = row_bytes(st->f);
	int64_t		at = window_start(&st->plan, w) + st->filled[w] - st->staged[w];
	int			rc;

	if (st->staged[w] == 0)
		return 0;
	rc = write_at(st->f, &st->out, (char *) st->stage + (size_t) w * (size_t) st->stage_rows * rb,
				  (size_t) st->staged[w] * rb, (uint64_t) at * rb, "reordered rows");
	st->staged[w] = 0;
	return rc;
}

/*
 * Output position p takes the source row x.  One window: straight to its
 * place.  Several: to its window's staging buffer, in arrival order, with
 * its place in the window noted for the second pass.
 */
static int
place_row(permute_state *st, int64_t p, const float *x)
{
	size_t		rb = row_bytes(st->f);
	int			w;
	int64_t		w0;

	if (st->plan.n_windows == 1)
	{
		memcpy((char *) st->window + (size_t) p * rb, x, rb);
		return 0;
	}
	w = st->plan.window_of[out_chunk_of(&st->plan, p)];
	w0 = window_start(&st->plan, w);
	st->slot[w0 + st->filled[w]] = (uint32_t) (p - w0);
	memcpy((char *) st->stage + ((size_t) w * (size_t) st->stage_rows + (size_t) st->staged[w]) * rb, x, rb);
	st->filled[w]++;
	if (++st->staged[w] == st->stage_rows)
		return flush_stage(st, w);
	return 0;
}

/* Pass 1: every source chunk that gives a row is read once, in file order. */
static int
scatter_pass(permute_state *st)
{
	file_store *f = st->f;
	int			d = f->n_features;

	for (int c = 0; c < f->n_chunks; c++)
	{
		if (st->group[c] == st->group[c + 1])
			continue;
		if (permute_progress(st) != 0 || fs_read_chunk(&f->base, c, st->chunk) != 0)
			return 1;
		for (int64_t k = st->group[c]; k < st->group[c + 1]; k++)
		{
			int64_t		p = st->by_chunk[k];
			const float *x = st->chunk + (size_t) (st->src[p] & 0xffffffffLL) * (size_t) d;

			gbml_missing_flags(st->missing, x, 1, d);
			if (place_row(st, p, x) != 0)
				return 1;
		}
	}
	for (int w = 0; st->plan.n_windows > 1 && w < st->plan.n_windows; w++)
		if (flush_stage(st, w) != 0)
			return 1;
	return 0;
}

/*
 * Moves row i of rows[0..m) to slot[i], following the permutation's cycles
 * (each row moves once, through one spare row); slot[] is used up.
 */
static void
apply_slots(float *rows, uint32_t *slot, int64_t m, size_t d, float *carry, float *spare)
{
	size_t		rb = d * sizeof(float);

	for (int64_t i = 0; i < m; i++)
	{
		int64_t		cur = i;

		if (slot[i] == SLOT_DONE)
			continue;
		memcpy(carry, rows + (size_t) i * d, rb);
		for (;;)
		{
			int64_t		t = slot[cur];
			float	   *swap;

			slot[cur] = SLOT_DONE;
			if (t == i)
				break;
			memcpy(spare, rows + (size_t) t * d, rb);
			memcpy(rows + (size_t) t * d, carry, rb);
			swap = carry;
			carry = spare;
			spare = swap;
			cur = t;
		}
		memcpy(rows + (size_t) i * d, carry, rb);
	}
}

/*
 * Pass 2 (several windows): each window's region is read, its rows moved to
 * their places in memory, and written back in place.  The staging buffers
 * are gone by now: the window takes their share of the budget.
 */
static int
order_pass(permute_state *st)
{
	file_store *f = st->f;
	size_t		rb = row_bytes(f);
	float	   *carry = st->chunk,
			   *spare = st->chunk + f->n_features;	/* the source chunk's room is free now */

	gbml_free(f->env, st->stage);
	st->stage = NULL;
	if ((st->window = gbml_alloc_array(f->env, (size_t) st->plan.window_rows, rb)) == NULL)
		return store_fail_env(f);
	for (int w = 0; w < st->plan.n_windows; w++)
	{
		int64_t		w0 = window_start(&st->plan, w),
					m = window_start(&st->plan, w + 1) - w0;
		int			e;

		if (permute_progress(st) != 0)
			return 1;
		if ((e = gbml_temp_read(&st->out, st->window, (size_t) m * rb, (uint64_t) w0 * rb)) != 0)
			return store_fail(f, GBML_EIO, "could not read reordered rows back from a temporary file: %s", strerror(e));
		__atomic_fetch_add(&f->bytes_read, (uint64_t) m * rb, __ATOMIC_RELAXED);
		apply_slots(st->window, st->slot + w0, m, (size_t) f->n_features, carry, spare);
		if (write_at(f, &st->out, st->window, (size_t) m * rb, (uint64_t) w0 * rb, "reordered rows") != 0)
			return 1;
	}
	return 0;
}

static int64_t
largest_chunk_rows(const file_store *f)
{
	int64_t		m = 2;			/* order_pass borrows two rows of it */

	for (int c = 0; c < f->n_chunks; c++)
		if (f->chunks[c].n_rows > m)
			m = f->chunks[c].n_rows;
	return m;
}

/* The window budget: the caller's, or half of what env's budget has free. */
static size_t
window_budget(const file_store *f)
{
	size_t		window = PERMUTE_MAX_WINDOW;

	if (f->permute_budget > 0 && f->permute_budget < window)
		window = f->permute_budget;
	if (free_budget(f) / 2 < window)
		window = free_budget(f) / 2;
	return window;
}

/*
 * The buffers of pass 1: one window holds the whole output; several share
 * the budget as a staging buffer each (order_pass allocates its window).
 */
static int
permute_buffers(permute_state *st, size_t budget)
{
	file_store *f = st->f;
	gbml_env   *env = f->env;
	size_t		rb = row_bytes(f);
	int			k = st->plan.n_windows;

	if ((st->missing = gbml_alloc0(env, (size_t) f->n_features * sizeof(bool) + 1)) == NULL)
		return store_fail_env(f);
	if (k <= 1)
	{
		st->window = gbml_alloc_array(env, (size_t) (st->plan.n > 0 ? st->plan.n : 1), rb);
		return st->window == NULL ? store_fail_env(f) : 0;
	}
	st->stage_rows = (int64_t) (budget / ((size_t) k * rb));
	if (st->stage_rows < 1)
		st->stage_rows = 1;
	st->stage = gbml_alloc_array(env, (size_t) k * (size_t) st->stage_rows, rb);
	st->staged = gbml_alloc0(env, sizeof(int64_t) * (size_t) k);
	st->filled = gbml_alloc0(env, sizeof(int64_t) * (size_t) k);
	st->slot = gbml_alloc_array(env, (size_t) st->plan.n, sizeof(uint32_t));
	if (st->stage == NULL || st->staged == NULL || st->filled == NULL || st->slot == NULL)
		return store_fail_env(f);
	return 0;
}

static void
permute_state_free(permute_state *st)
{
	gbml_env   *env = st->f->env;

	plan_free(env, &st->plan);
	gbml_free(env, st->by_chunk);
	gbml_free(env, st->group);
	gbml_free(env, st->chunk);
	gbml_free(env, st->window);
	gbml_free(env, st->stage);
	gbml_free(env, st->staged);
	gbml_free(env, st->filled);
	gbml_free(env, st->slot);
	gbml_free(env, st->missing);
	gbml_temp_close(env, &st->out);
}

/* The output chunks of st's plan, at their offsets in a file of the rows back to back; NULL: failed. */
static file_chunk *
output_chunks(permute_state *st)
{
	file_store *f = st->f;
	size_t		rb = row_bytes(f);
	file_chunk *table = gbml_alloc_array(f->env, (size_t) (st->plan.n_out > 0 ? st->plan.n_out : 1), sizeof(file_chunk));

	if (table == NULL)
	{
		store_fail_env(f);
		return NULL;
	}
	for (int k = 0; k < st->plan.n_out; k++)
	{
		table[k].offset = (uint64_t) st->plan.start[k] * rb;
		table[k].n_rows = st->plan.start[k + 1] - st->plan.start[k];
		table[k].first_row = st->plan.start[k];
	}
	return table;
}

/* The new file and chunk table replace the old ones. */
static int
permute_commit(permute_state *st)
{
	file_store *f = st->f;
	gbml_temp_file old = f->file;
	bool	   *missing = f->missing;
	file_chunk *table = output_chunks(st);

	if (table == NULL)
		return 1;
	/* the rows are in chunk order now: no places, runs nor segments, and any thread may read */
	gbml_free(f->env, f->place);
	f->place = NULL;
	f->place_cap = 0;
	free_runs(f);
	free_segments(f);
	f->base.read_any_thread = true;
	gbml_free(f->env, f->chunks);
	f->chunks = table;
	f->cap_chunks = st->plan.n_out > 0 ? st->plan.n_out : 1;
	f->n_chunks = st->plan.n_out;
	f->end = (uint64_t) st->plan.n * row_bytes(f);
	f->file = st->out;
	st->out = old;				/* closed (deleted) with the state */
	f->missing = st->missing;
	st->missing = missing;
	return 0;
}

/*
 * permute of rows grouped by hash, in place: no second file.  The output is
 * cut into windows (of the budget permute_grouped's would have) whose edges
 * fall where the rows' hash group changes, as far as the budget allows.
 * Each window's rows are fetched, then written back in output order over
 * the file rows they came from, taken in ascending file order: a window
 * owns its rows' places, so nothing still to be read is overwritten, and
 * the rows of the canonical order, which sorts by hash, land in the runs of
 * their group, a few long segments.  A write over pages already in the page
 * cache costs a fraction of one into new pages (issue 12:
 * tests/bench/rewrite_pages.c, and in place about 0.5 s a GB against
 * 0.6-4 s into a second file on this kind of machine), and the disk holds
 * one copy of the rows, not two.
 *
 * Returns 0 (done), 1 (failed: the store's error; if a window was written
 * the old rows are not whole any more and the store reads as damaged), or
 * -1 (nothing written: an address repeats, or the windows' rows are not in
 * runs, so the segments would average under IN_PLACE_MIN_SEGMENT_ROWS rows;
 * the caller reorders into a new file).
 */
#define IN_PLACE_MIN_SEGMENT_ROWS 16

/*
 * The window starts (positions), cut at group changes where the budget
 * allows: *n_win windows, win[*n_win] = n; -1 when a row is kept twice.
 */
static int
in_place_windows(file_store *f, const int64_t *src, int64_t n, int64_t cap_rows, int64_t **win_out, int64_t *n_win)
{
	int64_t		rows = (int64_t) (f->end / row_bytes(f));
	uint64_t   *seen = gbml_alloc0(f->env, sizeof(uint64_t) * (size_t) (rows / 64 + 1));
	int64_t    *win = gbml_alloc_array(f->env, (size_t) (n / cap_rows + 2) * 2, sizeof(int64_t));
	int8_t	   *group = seen != NULL && win != NULL ? groups_by_place(f, rows) : NULL;
	int64_t		w0 = 0,
				cut_at = -1;	/* the last group change after w0 */
	int			prev = -2,
				rc = 0;

	*n_win = 0;
	if (group == NULL)
		rc = seen != NULL && win != NULL ? 1 : store_fail_env(f);
	else
		win[0] = 0;
	for (int64_t p = 0; rc == 0 && p < n; p++)
	{
		int64_t		at;
		int			g;

		if ((p & ((1 << 16) - 1)) == 0 && p > 0)
		{
			/* tens of ns a row: a cancel is seen within a second whatever the table's size */
			gbml_progress_info info = {.phase = "spill reorder plan",.iteration = p,.total = n};

			if (gbml_progress(f->env, &info))
				rc = store_fail(f, GBML_ECANCELLED, "canceled while reordering rows");
		}
		at = place_of(f, src[p]);
		g = group[at];
		if (rc == 0 && (seen[at / 64] & ((uint64_t) 1 << (at % 64))))
			rc = -1;			/* a row kept twice: its place cannot take two rows */
		seen[at / 64] |= (uint64_t) 1 << (at % 64);
		if (p > 0 && g != prev)
			cut_at = p;
		prev = g;
		if (p - w0 == cap_rows)
		{
			/*
			 * [w0, p) is full: end it at the last group change if that keeps
			 * at least half of it (so there are at most 2 n / cap_rows + 1
			 * windows), else here
			 */
			w0 = cut_at > w0 + cap_rows / 2 ? cut_at : p;
			win[++*n_win] = w0;
			cut_at = -1;
		}
	}
	gbml_free(f->env, seen);
	gbml_free(f->env, group);
	if (rc != 0)
	{
		gbml_free(f->env, win);
		return rc;
	}
	win[++*n_win] = n;
	*win_out = win;
	return 0;
}

/* The segments of the windows' places, ascending in each window; -1 when they would be too short. */
static int
in_place_segments(file_store *f, const int64_t *src, int64_t n, const int64_t *win, int64_t n_win, int64_t cap_rows)
{
	place_slot *o = gbml_alloc_array(f->env, (size_t) cap_rows, sizeof(place_slot));
	size_t		want = (size_t) cap_rows * sizeof(place_slot) + (RADIX_BUCKETS + 1) * sizeof(int64_t);
	void	   *room = cap_rows >= RADIX_BUCKETS ? gbml_alloc(f->env, want) : NULL;
	int			rc = 0;

	if (o == NULL)
		rc = store_fail_env(f);
	for (int64_t w = 0; rc == 0 && w < n_win; w++)
	{
		int64_t		w0 = win[w],
					m = win[w + 1] - w0;

		for (int64_t i = 0; i < m; i++)
			o[i] = (place_slot) {place_of(f, src[w0 + i]), i};
		sort_places(o, room, m);
		for (int64_t i = 0; rc == 0 && i < m; i++)
			rc = push_segment(f, w0 + i, o[i].place, 1);
		if (rc == 0 && f->n_segs * IN_PLACE_MIN_SEGMENT_ROWS > n)
			rc = -1;
	}
	gbml_free(f->env, o);
	gbml_free(f->env, room);
	if (rc != 0)
		free_segments(f);
	return rc;
}

/*
 * Window by window: the rows fetched, then written over their own places
 * through the segments.  From the first write on, the places no longer
 * describe the file: a failure leaves the store damaged.
 */
static int
in_place_write(permute_state *st, const int64_t *win, int64_t n_win)
{
	file_store *f = st->f;
	size_t		rb = row_bytes(f);
	bool		wrote = false;
	int			rc = 0;

	for (int64_t w = 0; rc == 0 && w < n_win; w++)
	{
		int64_t		w0 = win[w],
					w1 = win[w + 1];

		rc = permute_progress(st);
		if (rc == 0)
			rc = fetch_rows(f, st->src + w0, w1 - w0, st->window, NULL);
		if (rc == 0)
			gbml_missing_flags(st->missing, st->window, w1 - w0, f->n_features);
		/* the segments overlapping [w0, w1): one may run on from the window before or into the next */
		for (int64_t k = segment_of(f, w0); rc == 0 && k < f->n_segs && f->seg_pos[k] < w1; k++)
		{
			int64_t		a = f->seg_pos[k] > w0 ? f->seg_pos[k] : w0,
						b = f->seg_pos[k + 1] < w1 ? f->seg_pos[k + 1] : w1;

			wrote = true;
			rc = write_at(f, &f->file, (char *) st->window + (size_t) (a - w0) * rb, (size_t) (b - a) * rb,
						  (uint64_t) (f->seg_at[k] + (a - f->seg_pos[k])) * rb, "rows reordered in place");
		}
	}
	if (rc != 0 && wrote)
		f->damaged = "a reorder rewriting some of its rows in place";
	return rc;
}

static file_chunk *output_chunks(permute_state *st);

/* The rows are where the segments say: the output chunks' table, no places nor runs, any thread may read. */
static int
in_place_commit(permute_state *st, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = st->f;
	bool	   *missing = f->missing;
	file_chunk *table;

	/* a budget of 0: a window per output chunk, so no window is too large to plan */
	if (plan_layout(f, &st->plan, st->plan.n, first_rows, chunk_rows, 0) != 0 || (table = output_chunks(st)) == NULL)
		return 1;
	gbml_free(f->env, f->place);
	f->place = NULL;
	f->place_cap = 0;
	free_runs(f);
	f->base.read_any_thread = true;
	gbml_free(f->env, f->chunks);
	f->chunks = table;
	f->cap_chunks = st->plan.n_out > 0 ? st->plan.n_out : 1;
	f->n_chunks = st->plan.n_out;
	f->missing = st->missing;
	st->missing = missing;
	f->reorders_in_place++;
	return 0;
}

static int
permute_in_place(permute_state *st, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = st->f;
	size_t		rb = row_bytes(f),
				budget = window_budget(f);
	int64_t		n = st->plan.n,
				cap_rows,
				n_win = 0;
	int64_t    *win = NULL;
	int			rc;

	if (f->n_runs == 0 || n == 0)
		return -1;
	/* permute_grouped's window: the rows, and fetch's places and their sort */
	budget = budget > fetch_span_bytes(f) ? budget - fetch_span_bytes(f) : 0;
	cap_rows = (int64_t) (budget / (rb + 2 * sizeof(place_slot)));
	cap_rows = cap_rows < 1 ? 1 : cap_rows > n ? n : cap_rows;	/* no window larger than the rows */
	rc = in_place_windows(f, st->src, n, cap_rows, &win, &n_win);
	if (rc == 0)
		rc = in_place_segments(f, st->src, n, win, n_win, cap_rows);
	if (rc == 0)
	{
		st->window = gbml_alloc_array(f->env, (size_t) cap_rows, rb);
		st->missing = gbml_alloc0(f->env, (size_t) f->n_features * sizeof(bool) + 1);
		if (st->window == NULL || st->missing == NULL)
			rc = store_fail_env(f);
	}
	st->total_steps = n_win;
	if (rc == 0)
		rc = in_place_write(st, win, n_win);
	if (rc == 0 && (rc = in_place_commit(st, first_rows, chunk_rows)) != 0)
		f->damaged = "a reorder rewriting some of its rows in place";	/* written, but the table not replaced */
	if (rc != 0)
		free_segments(f);
	gbml_free(f->env, win);
	return rc;
}

/*
 * permute of rows grouped by hash (put_hashed): window by window, the
 * window's rows are fetched straight into place (their places sorted,
 * nearby rows read in one span: a window of the canonical order lies in a
 * few groups' runs) and the window is written once.  The window shares the
 * budget with fetch's 32 bytes a row (places and their sort) and its span.
 */
static int
permute_grouped(permute_state *st, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = st->f;
	size_t		rb = row_bytes(f),
				budget = window_budget(f);
	int64_t		n = st->plan.n;
	int			rc;
	discard_units gone = {0};

	budget = budget > fetch_span_bytes(f) ? budget - fetch_span_bytes(f) : 0;
	budget = budget / (rb + 2 * sizeof(place_slot)) * rb;	/* fetch's places, and its sort's room */
	if ((rc = plan_layout(f, &st->plan, n, first_rows, chunk_rows, budget)) != 0)
		return rc;
	st->total_steps = st->plan.n_windows;
	st->window = gbml_alloc_array(f->env, (size_t) (st->plan.window_rows > 0 ? st->plan.window_rows : 1), rb);
	st->missing = gbml_alloc0(f->env, (size_t) f->n_features * sizeof(bool) + 1);
	if (st->window == NULL || st->missing == NULL)
		rc = store_fail_env(f);
	if (rc == 0 && gbml_temp_create(f->env, &st->out) != GBML_OK)
		rc = store_fail_env(f);
	if (rc == 0)
		discard_init(f, st->src, n, &gone);
	for (int w = 0; rc == 0 && w < st->plan.n_windows; w++)
	{
		int64_t		w0 = window_start(&st->plan, w),
					m = window_start(&st->plan, w + 1) - w0;

		rc = permute_progress(st);
		if (rc == 0)
			rc = fetch_rows(f, st->src + w0, m, st->window, &gone);
		if (rc == 0)
		{
			gbml_missing_flags(st->missing, st->window, m, f->n_features);
			rc = write_at(f, &st->out, st->window, (size_t) m * rb, (uint64_t) w0 * rb, "reordered rows");
		}
	}
	if (rc == 0)
		rc = permute_commit(st);
	/* the old file, given back in part, cannot stand in for the rows any more */
	if (rc != 0 && gone.any)
		f->damaged = "a reorder giving back some of its rows";
	gbml_free(f->env, gone.left);
	return rc;
}

/*
 * Keeps the rows src[0..n) in that order, in chunks of first_rows, then
 * chunk_rows rows, in a new temporary file (the old one is deleted when the
 * new one is complete; on failure the store is as it was).
 *
 * The output is cut into windows of whole output chunks that fit the
 * budget.  If one window holds it all: each source chunk that gives a row
 * is read once and its rows copied to their places in memory, then written
 * once (read the file, write the output).  Otherwise, two passes: pass 1
 * reads each source chunk once and appends each row to its window's
 * staging buffer (budget / windows bytes each), writing full buffers to
 * that window's region of the new file, in arrival order; pass 2 reads
 * each window's region (budget bytes), moves the rows to their places in
 * memory, and writes the region back.  Either way the I/O does not grow
 * with the number of windows: at most one read of the source, two writes
 * and one read of the output, all in large sequential pieces, where
 * windowed passes over the source would read it once per window.
 * Memory: the budget, one source chunk, 12 bytes per kept row (positions
 * grouped by source chunk, and the slots) and a few bytes per chunk.
 */
static int
fs_permute(gbml_chunk_store *s, const int64_t *src, int64_t n, int64_t first_rows, int64_t chunk_rows)
{
	file_store *f = (file_store *) s;
	permute_state st;
	int			rc;

	memset(&st, 0, sizeof(st));
	st.f = f;
	st.src = src;
	st.out.fd = -1;
	if (first_rows < 1 || chunk_rows < 1 || n < 0)
		return store_fail(f, GBML_EINVAL, "bad chunk sizes for reordering rows");
	if (check_addresses(f, src, n) != 0 || settle(f) != 0)
		return 1;
	st.plan.n = n;
	if (f->place != NULL)
	{
		rc = permute_in_place(&st, first_rows, chunk_rows);
		if (rc < 0)
		{
			permute_state_free(&st);
			memset(&st, 0, sizeof(st));
			st.f = f;
			st.src = src;
			st.out.fd = -1;
			st.plan.n = n;
			rc = permute_grouped(&st, first_rows, chunk_rows);
		}
		permute_state_free(&st);
		return rc;
	}
	rc = group_by_chunk(&st);
	if (rc == 0 && (st.chunk = gbml_alloc_array(f->env, (size_t) largest_chunk_rows(f), row_bytes(f) ? row_bytes(f) : 1)) == NULL)
		rc = store_fail_env(f);
	if (rc == 0)
	{
		size_t		budget = window_budget(f);

		rc = plan_layout(f, &st.plan, n, first_rows, chunk_rows, budget);
		if (rc == 0)
			rc = permute_buffers(&st, budget);
	}
	st.total_steps = (int64_t) f->n_chunks + (st.plan.n_windows > 1 ? st.plan.n_windows : 0);
	if (rc == 0 && gbml_temp_create(f->env, &st.out) != GBML_OK)
		rc = store_fail_env(f);
	if (rc == 0)
		rc = scatter_pass(&st);
	if (rc == 0 && st.plan.n_windows == 1)
		rc = write_at(f, &st.out, st.window, (size_t) n * row_bytes(f), 0, "reordered rows");
	if (rc == 0 && st.plan.n_windows > 1)
		rc = order_pass(&st);
	if (rc == 0)
		rc = permute_commit(&st);
	permute_state_free(&st);
	return rc;
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
	gbml_free(f->env, f->stage);
	gbml_free(f->env, f->stage_row);
	gbml_free(f->env, f->place);
	f->stage = NULL;
	f->stage_row = NULL;
	f->place = NULL;
	f->place_cap = 0;
	free_runs(f);
	free_segments(f);
	f->n_chunks = 0;
	f->end = 0;
}

static void
fs_destroy(gbml_chunk_store *s)
{
	file_store *f = (file_store *) s;

	fs_release(s);
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
	f->base.flush = fs_flush;
	f->base.out_of_room = fs_out_of_room;
	f->base.permute = fs_permute;
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
gbml_chunk_store_file_test_discard_unit(size_t bytes)
{
	size_t		was = (size_t) discard_unit_bytes;

	discard_unit_bytes = bytes > 0 ? (uint64_t) bytes : DISCARD_UNIT_BYTES;
	return was;
}

size_t
gbml_chunk_store_file_test_group_stage(size_t bytes)
{
	size_t		was = group_stage_bytes;

	group_stage_bytes = bytes > 0 ? bytes : GROUP_STAGE_BYTES;
	return was;
}
