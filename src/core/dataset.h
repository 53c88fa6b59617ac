/*
 * dataset.h — the chunked training set every trainer reads.
 *
 * Rows (float features, label, group id, weight) are appended into chunks of
 * at most `chunk_rows` rows (65,536 by default, fewer for very wide rows so a
 * chunk stays near 64 MB).  A chunk starts small and doubles up to that size,
 * so GROUP BY over many small groups stays cheap.  There is never one
 * allocation for the whole table: no 1 GB limit, and trainers walk the data
 * chunk by chunk (the Dask SAGA design) or copy what they need.
 *
 * Features are row-major inside a chunk: x[row * n_features + j].
 * NaN features are allowed only when the dataset was created with
 * allow_missing (boosting treats them as missing); labels must be finite.
 *
 * Where chunks live.  By default in host memory.  A dataset told where to
 * stream (gbml_dataset_stream_to) opens that chunk store at the first chunk
 * boundary past a size — small datasets, such as most GROUP BY groups,
 * never do — hands it the chunks it holds, and from then on keeps only the
 * per-row state on the host (label, group, weight and the row's content
 * hash): each chunk's features are written into a buffer the store hands
 * out and, once the chunk is full, go to the store (the GPU:
 * chunk_store_gpu.h; temporary files: chunk_store_file.h).  A dataset
 * allowed to fall back brings its rows back to host memory when the store
 * runs out of room (its budget), and stays there.  Canonical order and the eval split then
 * reorder the rows inside the store, and a trainer that needs a few rows on
 * the host (a sample) fetches them.  Addresses of rows are chunk << 32 | row.
 */
#ifndef GBML_DATASET_H
#define GBML_DATASET_H

#include "env.h"
#include "strbuf.h"

#define GBML_CHUNK_ROWS 65536
#define GBML_MAX_FEATURES 1000000
/*
 * What a row in host memory costs beside its features, in 4-byte values:
 * label, group and weight (16 bytes) and the canonical order's two sort
 * keys (2 x 16 bytes, gbml_dataset_canonicalize).  Counted when deciding
 * whether rows stream to a store (gbml_ds_stored_should_start).
 */
#define GBML_HOST_ROW_OVERHEAD_VALUES 12
/* What a store's fetch holds a row asked for (the rows' places, sorted), beside the rows. */
#define GBML_STORE_FETCH_ROW_BYTES 16

typedef struct gbml_chunk
{
	int64_t		n_rows;
	int64_t		capacity;
	float	   *x;				/* capacity * n_features; NULL once the store holds them */
	float	   *label;
	int64_t    *group;
	float	   *weight;
	uint64_t   *hash;			/* stored datasets: each row's canonical-order hash, else NULL */
	bool		x_from_store;	/* x is a buffer the store handed out (not ours to free) */
} gbml_chunk;

/*
 * A residence for chunks' features (see above).  Each call returns 0 on
 * success; on failure error() says why and error_code() is GBML_EDEVICE,
 * GBML_EGPUBUDGET, GBML_EIO, ... for gbml_error().
 */
typedef struct gbml_chunk_store gbml_chunk_store;
struct gbml_chunk_store
{
	const char *residence;		/* "device", "file" */
	const char *where;			/* for messages: "device memory", "temporary files" */
	bool		read_any_thread;	/* read_chunk may run on a helper thread (gbml_chunk_prefetch) */
	/* A buffer for the next chunk's features (rows x n_features floats). */
	float	   *(*buffer) (gbml_chunk_store *s, int64_t rows, int n_features);
	/* Stores the filled buffer as the next chunk (the buffer may be reused after the next buffer() call). */
	int			(*put) (gbml_chunk_store *s, const float *x, int64_t n_rows, int n_features);
	/*
	 * Optional (NULL: put): put with each row's canonical-order hash, for a
	 * store that groups rows by hash as they arrive, so that the canonical
	 * reorder is one pass (the file store).  Reads may then run on the main
	 * thread only (read_any_thread false) until the next permute.
	 */
	int			(*put_hashed) (gbml_chunk_store *s, const float *x, const uint64_t *hash, int64_t n_rows,
							   int n_features);
	/*
	 * Copies the rows at src[0..n) into out (n x n_features).  Holds
	 * GBML_STORE_FETCH_ROW_BYTES a row asked for while it runs, and a read
	 * buffer sized by what the budget has free after that.
	 */
	int			(*fetch) (gbml_chunk_store *s, const int64_t *src, int64_t n, float *out);
	/* Copies stored chunk `index` (all its rows) into out; any thread when read_any_thread. */
	int			(*read_chunk) (gbml_chunk_store *s, int index, float *out);
	/* Copies rows [first, first + n) of stored chunk `index` into out; optional (NULL: whole chunks only). */
	int			(*read_rows) (gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out);
	/*
	 * Optional (NULL: put writes before it returns): the appends' end.
	 * Waits until every put's rows are in the store, so reads may start on
	 * any thread, and gives back the memory kept for puts (their buffers).
	 */
	int			(*flush) (gbml_chunk_store *s);
	/* Whether the last failure was the store's budget (room), not an error. */
	bool		(*out_of_room) (gbml_chunk_store *s);
	/* Keeps only the rows src[0..n), in that order: chunks of first_rows, then chunk_rows rows. */
	int			(*permute) (gbml_chunk_store *s, const int64_t *src, int64_t n, int64_t first_rows,
							int64_t chunk_rows);
	/* out[f] = some stored row has NaN or -Infinity in feature f. */
	int			(*missing) (gbml_chunk_store *s, bool *out);
	/*
	 * Optional (NULL: not supported): every read from now on (read_chunk,
	 * read_rows, fetch) gives feature j's value v as ids[j][v] where ids[j]
	 * is not NULL (v an integer below n_ids[j]; NaN stays NaN).  The stored
	 * bytes do not change, and nor does what permute writes.  The tables
	 * are copied.  Main thread, before the reads.
	 */
	int			(*renumber_on_read) (gbml_chunk_store *s, const int32_t *const *ids, const int32_t *n_ids);
	/* The features are not needed any more (a trainer has what it needs). */
	void		(*release) (gbml_chunk_store *s);
	void		(*destroy) (gbml_chunk_store *s);
	const char *(*error) (gbml_chunk_store *s);
	int			(*error_code) (gbml_chunk_store *s);
};

typedef struct gbml_dataset
{
	int			n_features;		/* 0 until the first row */
	int64_t		n_rows;
	int64_t		chunk_rows;		/* maximum rows per chunk */
	size_t		chunk_bytes;	/* features per chunk at most (0: 64 MB), for small budgets; set before the first row */
	int			n_chunks;
	int			chunks_cap;
	gbml_chunk **chunks;
	bool		allow_missing;	/* NaN/Inf features accepted as missing */
	bool		has_missing;	/* some feature is non-finite */
	int			group_state;	/* 0 unknown, 1 every row has a group, -1 none has */
	bool		has_weight;		/* some weight differs from 1 */
	struct gbml_prefault *prefault; /* background page-faulting of the next chunk, or NULL */
	int64_t		prefault_at;	/* start it when the last chunk holds this many rows (-1: not armed) */
	gbml_chunk_store *store;	/* where full chunks' features go, or NULL (host memory) */
	/* opens the store to stream to; NULL: stay in host memory */
	gbml_chunk_store *(*store_open) (gbml_env *env);
	int64_t		stream_from;	/* start streaming at a chunk boundary once rows x (features +
								 * GBML_HOST_ROW_OVERHEAD_VALUES) >= this */
	bool		stream_fallback;	/* out of room in the store: rows back to the host, not an error */
	bool		stream_fell_back;	/* that happened */
	/*
	 * Rows spilled early for a trainer that keeps only bins: reordering them
	 * in the file (canonical order, eval split) may use about a quarter of
	 * the features' bytes, what the bins will take, not half the budget.
	 * Set with a file store only.
	 */
	bool		reorder_window_quarter;
	/*
	 * The rows will be reordered in the store (canonical order, then any
	 * eval split) rather than read as written through a map or ranks: the
	 * store may group them by hash as they arrive (put_hashed), so the
	 * canonical reorder is one pass.  Set before the first row.
	 */
	bool		spill_by_hash;
	/*
	 * The trainer reads stored features only through gbml_dataset_fetch_rows
	 * and gbml_dataset_stored_view (boosting's borders and binning, each row
	 * once): the canonical order and the eval split of file-stored rows may
	 * stay a map of addresses instead of a rewrite of the file.  Set before
	 * gbml_dataset_canonicalize.
	 */
	bool		reorder_as_map;
	/*
	 * The trainer's passes give the same results in any row order, and it
	 * reaches a row by its canonical position only through rank_of_row /
	 * row_of_rank (K-Means: its sums are exact, its ties broken by canonical
	 * position): the canonical order of file-stored rows may stay two
	 * arrays, the rows as written.  Set before gbml_dataset_canonicalize.
	 */
	bool		reorder_as_ranks;
	/*
	 * Those arrays, once made (NULL otherwise: the dataset's order is the
	 * canonical one): dataset row i (chunk order, as written) is canonical
	 * row rank_of_row[i]; canonical row g is dataset row row_of_rank[g].
	 * 4 bytes each (a dataset of 2^32 rows or more is rewritten instead),
	 * and the rows' hashes go once ranked: the per-row state does not grow.
	 */
	uint32_t   *rank_of_row;
	uint32_t   *row_of_rank;
	/*
	 * That map, once made: row g of the dataset (chunk order) has its
	 * features at stored_addr[g], an address in the store's own chunks
	 * (stored_chunk_rows[0 .. stored_n_chunks), as they were written);
	 * stored_missing: the missing-value flags of the rows kept (NULL: the
	 * store's own flags hold).  NULL when the store's chunks are the
	 * dataset's.
	 */
	int64_t    *stored_addr;
	int64_t    *stored_chunk_rows;
	int			stored_n_chunks;
	bool	   *stored_missing;
	/*
	 * The chunk reader's two buffers, kept between passes (chunk_prefetch.c):
	 * a trainer walks the rows every iteration, and fresh buffers would be
	 * faulted in again each time.  Freed with the dataset.
	 */
	float	   *reader_buf[2];
	size_t		reader_buf_floats;
	bool		reader_buf_busy;	/* a reader holds them */
	/*
	 * What each feature is (schema.h: names, numeric or categorical ids),
	 * or NULL: all numeric, unnamed (the real[] forms).  Owned by whoever
	 * built the dataset (the glue, a test); an eval set split from this one
	 * shares it.
	 */
	const struct gbml_feature_schema *schema;
	/*
	 * Rows held by other servers (kmeans_shards.h): n_rows and n_features
	 * describe their union, there are no chunks here, and a trainer that
	 * can reach them (K-Means) works through the link.
	 */
	const struct gbml_shard_link *shards;
} gbml_dataset;

/* Row as the glue hands it over; group_is_null / weight_is_null for SQL NULL. */
typedef struct gbml_row
{
	const float *x;
	int			n_features;
	float		label;
	bool		label_is_null;
	int64_t		group;
	bool		group_is_null;
	float		weight;
	bool		weight_is_null;
} gbml_row;

void		gbml_dataset_init(gbml_dataset *ds, bool allow_missing);

/*
 * out holds src's rows in src's order (derived rows, such as their one-hot
 * encoding): it takes a copy of src's rank arrays, so it has src's
 * canonical order too (nothing to do when src has none).
 */
int			gbml_dataset_copy_ranks(const gbml_dataset *src, gbml_dataset *out, gbml_env *env);
void		gbml_dataset_free(gbml_dataset *ds, gbml_env *env);

/*
 * Frees the chunk reader's buffers kept with ds (chunk_prefetch.c) when no
 * reader holds them: for a set walked now and then beside a training set
 * walked all the time (SAGA's eval set), whose idle buffers would sit in
 * the budget.
 */
void		gbml_dataset_release_reader_buffers(const gbml_dataset *ds, gbml_env *env);

/*
 * Appends one row after validating it; the error message names the row
 * (1-based, counting rows already held).  require_label: a NULL label is an
 * error (else stored as 0).
 */
/*
 * The most memory the first chunk of ds's rows takes while it fills, for
 * rows of n_features (its arrays grow by doubling, the old beside the new):
 * what must be free to start a dataset before its first row.
 */
size_t		gbml_dataset_first_chunk_peak_bytes(const gbml_dataset *ds, int n_features);

int			gbml_dataset_append(gbml_dataset *ds, gbml_env *env, const gbml_row *row,
								bool require_label);

/*
 * Appending pre-faults the next chunk on a helper thread (fresh memory is
 * zeroed by the kernel on first touch, which otherwise costs the scan as much
 * as the copy).  Call gbml_dataset_finish_appends once no more rows come (the
 * driver, merge and free do); gbml_dataset_stop_prefault only stops the
 * thread (it checks a flag every 2 MB) and waits for it, for a MemoryContext
 * reset callback that frees the memory itself.
 */
void		gbml_dataset_finish_appends(gbml_dataset *ds, gbml_env *env);
void		gbml_dataset_stop_prefault(gbml_dataset *ds);

/*
 * Streams the dataset's rows to the store `open` returns (NULL with env's
 * error set when it cannot open), from the first chunk boundary where rows x
 * features reaches from_values (0: once the first chunk is full).  With
 * fallback, a store out of room (its budget) sends every row back to host
 * memory with a NOTICE instead of an error.  The dataset owns the store.
 * Call before the first row.
 */
void		gbml_dataset_stream_to(gbml_dataset *ds, gbml_chunk_store *(*open) (gbml_env *env),
								   int64_t from_values, bool fallback);

/*
 * Destroys a temporary-file store (its file goes), for the MemoryContext
 * reset callback that frees the dataset's memory after an ERROR; other
 * residences have their own cleanup.  The dataset's chunks must not be
 * used afterwards.
 */
void		gbml_dataset_close_files(gbml_dataset *ds);

/*
 * No more rows come: stops the pre-faulting and hands a streaming dataset's
 * last chunk to its store, so that readers see every row.  The driver's
 * canonical order does this for the sets it hands a trainer; a trainer
 * that builds a dataset of its own (one-hot encoded rows, onehot.h) calls
 * it after the last row.  In host memory it only stops the pre-faulting.
 */
int			gbml_dataset_seal(gbml_dataset *ds, gbml_env *env);

/*
 * Categorical ids renumbered after the rows came, before the canonical
 * order (the training aggregates number a column's values as first seen
 * and sort them once every row is in): feature j's id v becomes ids[j][v]
 * where ids[j] is not NULL (v below n_ids[j]; NaN, a missing category,
 * stays).  Rows in host memory are rewritten; rows in a store are
 * renumbered as they are read (renumber_on_read) and their canonical-order
 * hashes computed again from the new ids, so the order, and the model, are
 * those of the same rows collected with the final ids.  Seals ds first.
 * Rows grouped by hash as they arrived (spill_by_hash) cannot be: ds must
 * not set it when some ids[j] is not NULL (with none, only the seal).
 */
int			gbml_dataset_renumber_categories(gbml_dataset *ds, gbml_env *env, const int32_t *const *ids,
											 const int32_t *n_ids);

/*
 * Feature j of rows x[0..n) (d floats a row) renumbered through ids (NaN
 * stays): 0, or -1 at the first value that is no id below n_ids (*bad: it).
 * Any thread (the file store's reads use it too).
 */
int			gbml_renumber_column(float *x, int64_t n, int d, int j, const int32_t *ids, int32_t n_ids, float *bad);

/* The store's last failure as env's error: "what (rows in temporary files): why"; returns the code. */
int			gbml_dataset_store_error(const gbml_dataset *ds, gbml_env *env, const char *what);

/* The addresses (chunk << 32 | row) of the rows at canonical positions pos[0..n), ascending (in place is fine). */
void		gbml_dataset_addresses(const gbml_dataset *ds, const int64_t *pos, int64_t n, int64_t *addr);

/* Copies rows (addresses chunk << 32 | row) into out (n x n_features), from host chunks or the store. */
int			gbml_dataset_fetch_rows(const gbml_dataset *ds, const int64_t *addr, int64_t n, float *out,
									gbml_env *env);

/*
 * For a reader of a dataset whose stored rows are reached through a map
 * (stored_addr): a view of the store's own chunks (features only, no
 * per-row state) to read them in the order they were written, row g of ds
 * being at view address stored_addr[g].  Free it with
 * gbml_dataset_stored_view_free (the store stays ds's).
 */
int			gbml_dataset_stored_view(const gbml_dataset *ds, gbml_dataset *view, gbml_env *env);
void		gbml_dataset_stored_view_free(gbml_dataset *view, gbml_env *env);

/*
 * addr[0..n) (chunk addresses of the dataset) as addresses in its store's
 * own chunks (through stored_addr; the same without a map), into out.
 */
int			gbml_dataset_store_addresses(const gbml_dataset *ds, const int64_t *addr, int64_t n, int64_t *out,
										 gbml_env *env);

/* flags[j] |= some row of x (n_rows x d) has NaN or -Infinity, a missing value, in feature j. */
void		gbml_missing_flags(bool *flags, const float *x, int64_t n_rows, int d);

/* The dataset's first row of each chunk, n_chunks + 1 of them (env's memory); NULL with env's error. */
int64_t    *gbml_dataset_chunk_starts(const gbml_dataset *ds, gbml_env *env);

/* out[f]: some stored row of the dataset has NaN or -Infinity in feature f (the kept rows, with a map). */
int			gbml_dataset_stored_missing(const gbml_dataset *ds, bool *out, gbml_env *env);

/* Moves all chunks of src into dst (src is left empty). Feature counts must match. */
int			gbml_dataset_merge(gbml_dataset *dst, gbml_dataset *src, gbml_env *env);

/*
 * Reorders rows into a canonical order that depends only on their contents
 * (hash, then bytes), so a model never depends on scan order: a parallel plan
 * and a serial one give the same bytes.
 */
int			gbml_dataset_canonicalize(gbml_dataset *ds, gbml_env *env);

/* Flat binary form for parallel aggregates: its exact size, and writing it into a buffer of that size. */
size_t		gbml_dataset_serialized_size(const gbml_dataset *ds);
void		gbml_dataset_serialize_into(const gbml_dataset *ds, uint8_t *out);
int			gbml_dataset_deserialize(gbml_dataset *ds, gbml_env *env,
									 const void *data, size_t len);

/* Global row index -> (chunk, row) helpers for trainers that need random access. */
static inline const float *
gbml_dataset_row(const gbml_dataset *ds, int chunk, int64_t row)
{
	return ds->chunks[chunk]->x + (size_t) row * (size_t) ds->n_features;
}

/*
 * The run holding position v, for runs that start at start[0] = 0 <
 * start[1] < ... (chunks' first rows, blocks' first rows): the last i <
 * n with start[i] <= v, by binary search.
 */
static inline int
gbml_run_of(const int64_t *start, int n, int64_t v)
{
	int			lo = 0,
				hi = n - 1;

	while (lo < hi)
	{
		int			mid = (lo + hi + 1) >> 1;

		if (start[mid] <= v)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/*
 * Moves a deterministic share of the rows into `eval` (initialised here):
 * whole groups when rows have group ids, single rows otherwise, each chosen
 * by a seeded hash of its key (the group id, or the row's contents:
 * gbml_ds_eval_key), so the split is reproducible and a row's side does
 * not depend on the other rows.  The training set is compacted
 * in place.  Every row held out is an error (GBML_EINVAL, "leaves no
 * training rows") unless may_empty (a shard's part of a split across
 * servers: the union may still have training rows).  On failure `eval`
 * holds nothing (it is freed here).
 */
int			gbml_dataset_split_eval(gbml_dataset *ds, gbml_dataset *eval, double fraction,
									uint64_t seed, bool may_empty, gbml_env *env);

/*
 * gbml_dataset_canonicalize, then gbml_dataset_split_eval (may_empty
 * false): the same rows on each side, in the same order.  Rows in
 * temporary files written as they came (not grouped by hash) are reordered
 * once for both (the kept ones, in canonical order), not once as a whole
 * and again without the held-out ones.
 */
int			gbml_dataset_canonicalize_split(gbml_dataset *ds, gbml_dataset *eval, double fraction,
											uint64_t seed, gbml_env *env);

/*
 * The training order with group ids (boosting's, one server's and the
 * union's across shards): rows by group id, then by canonical position
 * (pos: any value that orders as the position does, a chunk address too);
 * gbml_group_order_cmp is qsort's comparator.
 */
typedef struct gbml_group_order_key
{
	int64_t		group;
	int64_t		pos;
} gbml_group_order_key;

int			gbml_group_order_cmp(const void *a, const void *b);

#endif
