/*
 * chunk_store_file_internal.h — what chunk_store_file.c (the temporary
 * file store: its state, tables, reads, writes and fetch) shares with
 * chunk_store_permute.c (its reorder); not part of chunk_store_file.h's
 * interface.  The functions' comments are at their definitions.
 */
#ifndef GBML_CHUNK_STORE_FILE_INTERNAL_H
#define GBML_CHUNK_STORE_FILE_INTERNAL_H

#include "chunk_store_file.h"

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
/*
 * Full runs are gathered into buffers of up to RUN_BATCH_BYTES and written
 * in the background, each batch one write: the copy into the page cache,
 * the collect's largest cost past the budget, leaves the backend's thread
 * (the runs themselves, at most GROUP_STAGE_BYTES, are too small to hand
 * to a thread one by one).  Two buffers, each at most a 32nd of the
 * free budget and room for two runs at least, or none.
 */
#define RUN_BATCH_BYTES ((size_t) 4 << 20)

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
	/* renumber_on_read: feature j's values v read as renumber[j][v] (NULL: as stored), v below renumber_n[j] */
	int32_t   **renumber;
	int32_t    *renumber_n;
	float	   *stage;			/* per group: stage_rows rows */
	int64_t    *stage_row;		/* per group: the staged rows' indices into place */
	int64_t		stage_rows;
	int64_t		staged[HASH_GROUPS];
	/*
	 * Full runs gathered for one background write (flush_group):
	 * batch[batch_cur] holds batch_len bytes of runs that follow on in the
	 * file from batch_at; the other buffer may be in flight.  NULL: each run
	 * is written at once (no room for the buffers).
	 */
	float	   *batch[2];
	size_t		batch_cap;
	size_t		batch_len;
	uint64_t	batch_at;
	int			batch_cur;
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

/* ---- chunk_store_file.c: the store's state, reads and writes ---- */

static inline size_t
gbml_cfs_row_bytes(const file_store *f)
{
	return (size_t) f->n_features * sizeof(float);
}

/* What env's budget has free (SIZE_MAX without a limit): the store's buffers size themselves by it. */
static inline size_t
gbml_cfs_free_budget(const file_store *f)
{
	const gbml_env *env = f->env;

	if (env->memory_limit == 0)
		return SIZE_MAX;
	return env->memory_limit > env->memory_used ? env->memory_limit - env->memory_used : 0;
}

/* Records a failure for error() / error_code(); returns 1 (the store's failure value). */
int			gbml_cfs_store_fail(file_store *f, int code, const char *fmt,...)
	__attribute__((format(printf, 3, 4)));
int			gbml_cfs_store_fail_env(file_store *f);
int			gbml_cfs_write_at(file_store *f, gbml_temp_file *file, const void *x, size_t len, uint64_t offset, const char *what);
int			gbml_cfs_push_segment(file_store *f, int64_t pos, int64_t at, int64_t n);
void		gbml_cfs_free_runs(file_store *f);
void		gbml_cfs_free_segments(file_store *f);
int			gbml_cfs_settle(file_store *f);
int			gbml_cfs_check_addresses(file_store *f, const int64_t *src, int64_t n);
int			gbml_cfs_read_chunk(gbml_chunk_store *s, int index, float *out);

/* The segment holding position i (segments are in position order, the first at 0): a binary search. */
static inline int64_t
gbml_cfs_segment_of(const file_store *f, int64_t i)
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

/* Row (chunk << 32 | row)'s place in the file, in rows. */
static inline int64_t
gbml_cfs_place_of(const file_store *f, int64_t addr)
{
	const file_chunk *c = &f->chunks[addr >> 32];
	int64_t		i = c->first_row + (addr & 0xffffffffLL);

	if (f->place != NULL)
		return f->place[i];
	if (f->seg_pos != NULL)
	{
		int64_t		k = gbml_cfs_segment_of(f, i);

		return f->seg_at[k] + (i - f->seg_pos[k]);
	}
	return i;
}

/* fetch: rows by address */

typedef struct place_slot
{
	int64_t		place;			/* in the file, in rows */
	int64_t		i;				/* where the row goes in out */
} place_slot;

#define RADIX_BUCKETS 65536

void		gbml_cfs_sort_places(place_slot *o, void *room, int64_t n);
size_t		gbml_cfs_fetch_span_bytes(const file_store *f);

/* The reorder's give-back units (chunk_store_permute.c); gbml_cfs_fetch_rows counts them down. */
typedef struct discard_units discard_units;

struct discard_units
{
	int32_t    *left;			/* per unit: kept rows not fetched yet */
	int64_t		n;
	int64_t		run_from,		/* units at zero not punched yet: [run_from, run_to) */
				run_to;
	bool		any;			/* some unit was punched */
};

int			gbml_cfs_fetch_rows(file_store *f, const int64_t *src, int64_t n, float *out, discard_units *gone);

/* ---- chunk_store_permute.c: the reorder ---- */

int			gbml_cfs_permute(gbml_chunk_store *s, const int64_t *src, int64_t n, int64_t first_rows, int64_t chunk_rows);
void		gbml_cfs_discard_flush(file_store *f, discard_units *d);
void		gbml_cfs_discard_row(file_store *f, discard_units *d, int64_t p);

#endif
