/*
 * row_pieces.h — a dataset's rows in pieces small enough to stay in a
 * core's cache, for passes that work on blocks of rows on the threads
 * (SAGA's statistics, step size and objective).
 *
 * Rows in host memory are handed over in place.  Rows in a store that any
 * thread may read (the file store) are read by the thread that works on
 * them, a piece of at most GBML_ROW_PIECE_BYTES at a time, into that
 * thread's own buffer, and worked on while still in its cache.  Reading
 * whole chunks ahead on a helper thread (chunk_prefetch.h) copies every
 * row into a buffer larger than the cache and reads it back from memory:
 * three memory passes a row where the piece takes one (issue 12: SAGA's
 * eight full passes over files).  A block's pieces come in row order, so a
 * pass that adds rows one after the other into the block's sums gets the
 * same sums in pieces as in one go: the bytes of a model do not depend on
 * where its rows live.
 *
 *     gbml_row_pieces rp;
 *     if (gbml_row_pieces_open(&rp, ds, env, threads) != GBML_OK) ...
 *     for each chunk c (rows in place: ds->chunks[c]->x, NULL when stored),
 *       on thread t, for a block [r0, r0 + n) of it:
 *         gbml_row_pieces_each(&rp, c, r0, n, t, fn, ctx);
 *     rc = gbml_row_pieces_close(&rp, env);   (env's error set on a failed read)
 *
 * each() may run on any thread (no env, no allocation); open and close on
 * the main thread.
 */
#ifndef GBML_ROW_PIECES_H
#define GBML_ROW_PIECES_H

#include "dataset.h"

#define GBML_ROW_PIECE_BYTES ((size_t) 256 << 10)

typedef struct gbml_row_pieces
{
	const gbml_dataset *ds;
	int64_t		piece_rows;
	float	   *buf;			/* threads x piece_rows rows: thread t's from t * piece_rows */
	int			rc;				/* the first failed read's store code (0: none); set once */
	int			failed_chunk;
} gbml_row_pieces;

/*
 * Whether ds's stored rows can be read this way (some chunk is in a store
 * whose rows any thread may read by range); otherwise a pass reads through
 * chunk_prefetch.h.
 */
bool		gbml_row_pieces_apply(const gbml_dataset *ds);

/* What open allocates for `threads` threads (0 where the rows do not come in pieces), for a budget check. */
size_t		gbml_row_pieces_buffer_bytes(const gbml_dataset *ds, int threads);

/* Buffers for `threads` threads; a GBML_* code with env's error set (memory). */
int			gbml_row_pieces_open(gbml_row_pieces *rp, const gbml_dataset *ds, gbml_env *env, int threads);

/*
 * fn(ctx, x, r, m) for consecutive pieces of rows [r0, r0 + n) of chunk c,
 * in order: x holds rows [r, r + m) of the chunk.  Host rows come in one
 * piece.  Thread t (0 .. threads - 1) uses its own buffer.  After a failed
 * read nothing more is called (close reports it).
 */
void		gbml_row_pieces_each(gbml_row_pieces *rp, int c, int64_t r0, int64_t n, int t,
								 void (*fn) (void *ctx, const float *x, int64_t r, int64_t m), void *ctx);

/* Frees the buffers; GBML_OK, or the failed read's code with env's error set. */
int			gbml_row_pieces_close(gbml_row_pieces *rp, gbml_env *env);

#endif
