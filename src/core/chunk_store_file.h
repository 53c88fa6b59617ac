/*
 * chunk_store_file.h — the temporary-file residence of dataset chunks: a
 * gbml_chunk_store (dataset.h) whose chunks' features live in one temporary
 * file made through env's hooks (env.h: PostgreSQL's temporary files in the
 * server, plain files in the unit tests), for datasets past their memory
 * budget.
 *
 * The file holds the chunks back to back, row-major as on the host; the
 * store keeps each chunk's offset and row count, one host chunk buffer for
 * the chunk being filled, and per-feature missing-value flags gathered as
 * the chunks arrive.  Writes (put, permute) run on the main thread; reads of
 * whole chunks (read_chunk) may run on any thread, so a trainer can read the
 * next chunk while it works on this one (chunk_prefetch.h).
 *
 * Rows put with their hashes (put_hashed, for a dataset that will be
 * reordered into canonical order) go instead to 64 staging buffers by the
 * top bits of the hash, written a full buffer at a time: the file then
 * holds runs of hash ranges, and the canonical reorder reads each window's
 * rows straight from their runs and writes them back over their own places
 * in the same file, in output order (the file is then a few long segments
 * of the output; where the rows are not in runs, into a second file: rows
 * in arrival order need a staging pass and a pass in place, two writes and
 * two reads).  Until that reorder, rows are read on the main thread only.
 *
 * A full temporary-file budget (temp_file_limit) is an error, not a reason
 * to fall back: out_of_room() is always false.
 */
#ifndef GBML_CHUNK_STORE_FILE_H
#define GBML_CHUNK_STORE_FILE_H

#include "dataset.h"

/* What the store did, for the run report. */
typedef struct gbml_spill_stats
{
	int64_t		rows_spilled;	/* rows put into the file (each row once) */
	int64_t		chunks;			/* chunks stored now */
	uint64_t	bytes_written;	/* by put and permute */
	uint64_t	bytes_read;		/* by read_chunk, fetch and permute */
	uint64_t	bytes_discarded;	/* given back by permute as it read rows for the last time */
	int			reorders_in_place;	/* permutes that rewrote the rows over their own places */
	int64_t		segments;		/* after one: the file's stretches of rows in output order */
} gbml_spill_stats;

/*
 * Opens a store over a new temporary file; NULL with env's error set when
 * the file cannot be made.  The env (hooks, budget) must outlive the store.
 */
gbml_chunk_store *gbml_chunk_store_file_open(gbml_env *env);

/*
 * At most how many bytes of host memory permute may use for its window of
 * output rows (0, the default: no cap of the caller's).  The window is
 * never more than half of what env's budget has free when it runs, nor
 * 1 GB.  permute also holds one stored chunk and 12 bytes per kept row.
 */
void		gbml_chunk_store_file_set_permute_budget(gbml_chunk_store *s, size_t bytes);

/*
 * The staging bytes a hash group takes at most (512 KB) for the unit tests,
 * which make runs of a few rows; 0 restores the default.  Returns the size
 * before.  Not thread-safe: tests only.
 */
size_t		gbml_chunk_store_file_test_group_stage(size_t bytes);

/*
 * The bytes of full runs gathered for one background write at most (4 MB)
 * for the unit tests, whose runs are small: a few runs a batch; 0 restores
 * the default.  Returns the size before.  Not thread-safe: tests only.
 */
size_t		gbml_chunk_store_file_test_run_batch(size_t bytes);

/*
 * The unit (64 KB) in which permute gives back rows read for the last time,
 * for the unit tests, whose files are a few KB; 0 restores the default.
 * Returns the size before.  Not thread-safe: tests only.
 */
size_t		gbml_chunk_store_file_test_discard_unit(size_t bytes);

/* The store's figures; false (and zeros) when s is not a file store. */
bool		gbml_chunk_store_file_stats(const gbml_chunk_store *s, gbml_spill_stats *out);

#endif
