/*
 * chunk_prefetch.h — walking a dataset's chunks in order with the next
 * chunk's read overlapped with the work on this one: the reader trainers
 * use whatever the chunks' residence.
 *
 * A chunk in host memory is handed over as it is.  A chunk in a store is
 * read into one of two buffers; when the store allows reads from any
 * thread (the file store) the next stored chunk is read on a helper thread
 * (pthread, signals blocked, no call into env or PostgreSQL) while the
 * caller works on the one it was given; otherwise it is read when asked.
 * The same holds for runs of rows that are not whole chunks (the range
 * reader below).
 *
 *     gbml_chunk_prefetch *p = gbml_chunk_prefetch_open(ds, env);
 *     while ((rc = gbml_chunk_prefetch_next(p, &x, &rows, &index)) > 0)
 *         ... work on rows x[0 .. rows * n_features) of chunk index ...
 *     gbml_chunk_prefetch_close(p);
 *
 * Close it before returning to the caller of the engine, on every path: the
 * helper thread writes into buffers the dataset's memory context frees.
 * Main thread only (open, next and close allocate and report through env).
 */
#ifndef GBML_CHUNK_PREFETCH_H
#define GBML_CHUNK_PREFETCH_H

#include "dataset.h"

typedef struct gbml_chunk_prefetch gbml_chunk_prefetch;

/*
 * What a reader of ds's chunks holds beside them, for a budget check: two
 * buffers as big as the largest chunk in a store (0 when none is).
 */
size_t		gbml_chunk_prefetch_buffer_bytes(const gbml_dataset *ds);

/* A reader of ds's chunks from the first; NULL with env's error set (memory). */
gbml_chunk_prefetch *gbml_chunk_prefetch_open(const gbml_dataset *ds, gbml_env *env);

/*
 * A reader of the chunks order[0 .. n) in that order (a chunk may come more
 * than once; the order is copied): SAGA's shuffled epochs.
 */
gbml_chunk_prefetch *gbml_chunk_prefetch_open_order(const gbml_dataset *ds, gbml_env *env,
													const int *order, int n);

/*
 * A reader of row ranges: visit i is rows [start[i], start[i] + rows[i]) in
 * the dataset's order, which may span chunks (next() reports i as the
 * index).  A range inside one host chunk is handed over in place; any other
 * is assembled in a buffer (stored parts read with the store's read_rows),
 * the next one read ahead.  For a trainer whose visiting order must not
 * depend on the chunk layout (chunks shrink with the memory budget).
 */
gbml_chunk_prefetch *gbml_chunk_prefetch_open_ranges(const gbml_dataset *ds, gbml_env *env,
													 const int64_t *start, const int64_t *rows, int n);

/*
 * The next chunk: returns 1 with *x (its features, valid until the next
 * call), *n_rows and *index set; 0 after the last chunk; a GBML_* code (< 0)
 * with env's error set when a read failed.
 */
int			gbml_chunk_prefetch_next(gbml_chunk_prefetch *p, const float **x, int64_t *n_rows, int *index);

/* Waits for a read in flight and frees the reader (NULL is fine). */
void		gbml_chunk_prefetch_close(gbml_chunk_prefetch *p);

#endif
