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

/* A reader of ds's chunks from the first; NULL with env's error set (memory). */
gbml_chunk_prefetch *gbml_chunk_prefetch_open(const gbml_dataset *ds, gbml_env *env);

/*
 * A reader of the chunks order[0 .. n) in that order (a chunk may come more
 * than once; the order is copied): SAGA's shuffled epochs.
 */
gbml_chunk_prefetch *gbml_chunk_prefetch_open_order(const gbml_dataset *ds, gbml_env *env,
													const int *order, int n);

/*
 * Starts the reader over on the chunks order[0 .. n) (NULL: chunks 0 ..
 * n - 1), with the buffers it has: a trainer that walks the chunks pass
 * after pass (SAGA's statistics and objective) reads into the same memory
 * instead of fresh buffers, whose page faults cost about as much as the
 * reads.  Waits for a read in flight; the chunk handed out before is
 * released.  GBML_OK, or a GBML_* code with env's error set (a chunk out
 * of range, memory).
 */
int			gbml_chunk_prefetch_restart(gbml_chunk_prefetch *p, const int *order, int n);

/*
 * The next chunk: returns 1 with *x (its features, valid until the next
 * call), *n_rows and *index set; 0 after the last chunk; a GBML_* code (< 0)
 * with env's error set when a read failed.
 */
int			gbml_chunk_prefetch_next(gbml_chunk_prefetch *p, const float **x, int64_t *n_rows, int *index);

/* Waits for a read in flight and frees the reader (NULL is fine). */
void		gbml_chunk_prefetch_close(gbml_chunk_prefetch *p);

#endif
