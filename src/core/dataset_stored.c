/*
 * dataset_stored.c — the dataset operations for chunks whose features live
 * in a chunk store (dataset.h): appends that fill the store's buffers and
 * hand each full chunk over, the canonical order and the eval split as
 * reorderings inside the store (the host reorders only the per-row state:
 * label, group, weight, hash) or, for a trainer that reads each row once
 * (reorder_as_map: boosting), as a map of addresses over the file as it was
 * written, and fetching rows back.
 *
 * The rows come out in the order dataset.c gives a host dataset — the same
 * row hash, the same ties broken by content, the same eval keys — so a
 * trainer gives the same model bytes whichever residence the rows had.
 */
#include "dataset_internal.h"
#include "chunk_store_file.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Rows fetched to the host at a time by the eval split. */
#define FETCH_BATCH 4096

int
gbml_dataset_store_error(const gbml_dataset *ds, gbml_env *env, const char *what)
{
	gbml_chunk_store *s = ds->store;

	return gbml_error(env, s->error_code(s), "%s (rows in %s): %s", what, s->where, s->error(s));
}

/* What meta_chunk_alloc gives each row in host memory: its label, group, weight and hash. */
#define META_ROW_BYTES (sizeof(float) + sizeof(int64_t) + sizeof(float) + sizeof(uint64_t))

/* Whether ds's rows are in temporary files (not on a GPU): only files reorder, map and split as below. */
static inline bool
in_files(const gbml_dataset *ds)
{
	return ds->store != NULL && strcmp(ds->store->residence, "file") == 0;
}

/* A chunk with host room for the per-row state only; x comes from the store. */
static gbml_chunk *
meta_chunk_alloc(gbml_env *env, int64_t capacity)
{
	gbml_chunk *c = gbml_alloc0(env, sizeof(gbml_chunk));

	if (c == NULL)
		return NULL;
	c->capacity = capacity;
	c->label = gbml_alloc_array(env, (size_t) capacity, sizeof(float));
	c->group = gbml_alloc_array(env, (size_t) capacity, sizeof(int64_t));
	c->weight = gbml_alloc_array(env, (size_t) capacity, sizeof(float));
	c->hash = gbml_alloc_array(env, (size_t) capacity, sizeof(uint64_t));
	if (!c->label || !c->group || !c->weight || !c->hash)
	{
		gbml_ds_chunk_free(c, env);
		return NULL;
	}
	return c;
}

static int	stop_streaming(gbml_dataset *ds, gbml_env *env);

/*
 * A progress report (and cancel check) per chunk written: a scan that
 * spills can write gigabytes, so a cancel must not wait for its end.
 */
static int
stored_progress(const gbml_dataset *ds, gbml_env *env)
{
	gbml_progress_info info = {.phase = "collect (rows to temporary files)",.iteration = ds->n_chunks};

	if (!in_files(ds))
		return GBML_OK;
	if (gbml_progress(env, &info))
		return gbml_error(env, GBML_ECANCELLED, "canceled while writing rows to %s", ds->store->where);
	return GBML_OK;
}

/*
 * Hands chunk c's features (still in a store buffer) to the store, after
 * hashing its rows for the canonical order.  On this thread: the hash is
 * about 0.07 µs a row of 100 features, while an OpenMP region a chunk left
 * its workers spinning for milliseconds after each one, taking a core from
 * the scan and from the store's background write (SAGA 2.5M x 100 from
 * files, 2 cores, alternating runs: collect 1.90 s against 2.41 s).
 */
static int
store_chunk(gbml_dataset *ds, gbml_chunk *c, gbml_env *env)
{
	size_t		d = (size_t) ds->n_features;

	if (c->x == NULL || c->n_rows == 0)
		return GBML_OK;
	for (int64_t r = 0; r < c->n_rows; r++)
		c->hash[r] = gbml_ds_hash_row(c->x + (size_t) r * d, d, c->label[r], c->group[r], c->weight[r]);
	if ((ds->spill_by_hash && ds->store->put_hashed
		 ? ds->store->put_hashed(ds->store, c->x, c->hash, c->n_rows, ds->n_features)
		 : ds->store->put(ds->store, c->x, c->n_rows, ds->n_features)) != 0)
	{
		if (ds->stream_fallback && ds->store->out_of_room(ds->store))
			return stop_streaming(ds, env);
		return gbml_dataset_store_error(ds, env, "storing a chunk");
	}
	if (!c->x_from_store)
		gbml_free(env, c->x);	/* dataset.c's own memory: put copied it before returning */
	c->x = NULL;
	c->x_from_store = false;
	return stored_progress(ds, env);
}

/*
 * Every chunk's features in the store (the last one may still be in a
 * buffer), and written (a file store writes in the background).
 */
static int
seal(gbml_dataset *ds, gbml_env *env)
{
	int			rc = ds->n_chunks > 0 ? store_chunk(ds, ds->chunks[ds->n_chunks - 1], env) : GBML_OK;

	if (rc == GBML_OK && ds->store != NULL && ds->store->flush != NULL && ds->store->flush(ds->store) != 0)
		return gbml_dataset_store_error(ds, env, "writing the last chunk");
	return rc;
}

static int start_streaming(gbml_dataset *ds, gbml_env *env);

/*
 * The features go to files, but every row's label, group, weight and hash
 * stay in memory (24 bytes a row): past the budget while rows still come,
 * say that, with what the rows so far hold, rather than the one chunk's
 * allocation that failed.
 */
static void
say_meta_past_budget(const gbml_dataset *ds, gbml_env *env, int64_t cap, size_t buffer_bytes)
{
	size_t		row_bytes = META_ROW_BYTES;
	char		buffer[96] = "";

	if (buffer_bytes > 0)
		snprintf(buffer, sizeof(buffer), ", beside the %.1f MB buffer their features are written from",
				 (double) buffer_bytes / 1048576.0);
	gbml_error(env, GBML_EBUDGET,
			   "memory limit exceeded by what stays in memory whatever goes to temporary files: each row's label, "
			   "group, weight and hash (%zu bytes a row: %.1f MB for the %lld rows so far, and the next chunk's "
			   "%lld rows%s); %.1f MB are in use and the limit is %.1f MB",
			   row_bytes, (double) ((size_t) ds->n_rows * row_bytes) / 1048576.0, (long long) ds->n_rows,
			   (long long) cap, buffer, (double) env->memory_used / 1048576.0, (double) env->memory_limit / 1048576.0);
	gbml_hint(env, "Raise the \"memory_limit_mb\" parameter (or gbml.memory_limit) by %zu bytes for every row of the "
			  "source (about %.0f MB for a million rows) beside what the training needs, or train on fewer rows.",
			  row_bytes, (double) row_bytes * 1e6 / 1048576.0);
}

gbml_chunk *
gbml_ds_stored_writable_chunk(gbml_dataset *ds, gbml_env *env)
{
	gbml_chunk *c = ds->n_chunks ? ds->chunks[ds->n_chunks - 1] : NULL;
	int64_t		cap;

	if (ds->store == NULL)
	{
		if (start_streaming(ds, env) != GBML_OK)
			return NULL;
		c = NULL;				/* stored: the next chunk is the store's */
	}
	if (c != NULL && c->n_rows < c->capacity)
		return c;
	if (c != NULL && store_chunk(ds, c, env) != GBML_OK)
		return NULL;
	if (ds->store == NULL)
		return NULL;			/* fell back to host memory: dataset.c allocates the next chunk */
	/* the serial layout, so the store's chunks are the ones a host dataset would have */
	cap = ds->n_chunks == 0 ? gbml_ds_first_chunk_limit(ds) : ds->chunk_rows;
	if ((c = meta_chunk_alloc(env, cap)) == NULL)
	{
		if (env->error_code == GBML_EBUDGET)
			say_meta_past_budget(ds, env, cap, 0);
		return NULL;
	}
	c->x = ds->store->buffer(ds->store, cap, ds->n_features);
	c->x_from_store = true;
	if (c->x == NULL)
	{
		gbml_ds_chunk_free(c, env);
		/* no room for the buffer beside the rows' state so far: that state is what to budget for */
		if (ds->store->error_code(ds->store) == GBML_EBUDGET)
			say_meta_past_budget(ds, env, cap, (size_t) cap * (size_t) ds->n_features * sizeof(float));
		else
			gbml_dataset_store_error(ds, env, "a buffer for the next chunk");
		return NULL;
	}
	if (gbml_ds_push_chunk(ds, env, c) != GBML_OK)
	{
		c->x = NULL;
		gbml_ds_chunk_free(c, env);
		return NULL;
	}
	return c;
}

/* The dataset's per-row state rebuilt for the rows at addresses src[0..n), in the serial layout. */
static int
rebuild_meta(gbml_dataset *ds, gbml_env *env, const int64_t *src, int64_t n)
{
	int64_t		first = gbml_ds_first_chunk_limit(ds);
	gbml_chunk **fresh = gbml_alloc0(env, sizeof(gbml_chunk *) * (size_t) (n / ds->chunk_rows + 2));
	int			n_fresh = 0;
	int64_t		done = 0;

	if (fresh == NULL)
		return env->error_code;
	while (done < n)
	{
		int64_t		want = n_fresh == 0 ? first : ds->chunk_rows;
		int64_t		rows = n - done < want ? n - done : want;
		gbml_chunk *c = meta_chunk_alloc(env, rows);

		if (c == NULL)
		{
			for (int i = 0; i < n_fresh; i++)
				gbml_ds_chunk_free(fresh[i], env);
			gbml_free(env, fresh);
			return env->error_code;
		}
		for (int64_t i = 0; i < rows; i++)
		{
			int64_t		a = src[done + i];
			const gbml_chunk *s = ds->chunks[a >> 32];
			int64_t		sr = a & 0xffffffffLL;

			c->label[i] = s->label[sr];
			c->group[i] = s->group[sr];
			c->weight[i] = s->weight[sr];
			c->hash[i] = s->hash[sr];
		}
		c->n_rows = rows;
		fresh[n_fresh++] = c;
		done += rows;
	}
	for (int i = 0; i < ds->n_chunks; i++)
		gbml_ds_chunk_free(ds->chunks[i], env);
	gbml_free(env, ds->chunks);
	ds->chunks = fresh;
	ds->n_chunks = n_fresh;
	ds->chunks_cap = (int) (n / ds->chunk_rows + 2);
	ds->n_rows = n;
	return GBML_OK;
}

int
gbml_dataset_store_addresses(const gbml_dataset *ds, const int64_t *addr, int64_t n, int64_t *out, gbml_env *env)
{
	int64_t    *start;

	if (ds->stored_addr == NULL)
	{
		memcpy(out, addr, sizeof(int64_t) * (size_t) n);
		return GBML_OK;
	}
	if ((start = gbml_dataset_chunk_starts(ds, env)) == NULL)
		return env->error_code;
	for (int64_t i = 0; i < n; i++)
		out[i] = ds->stored_addr[start[addr[i] >> 32] + (addr[i] & 0xffffffffLL)];
	gbml_free(env, start);
	return GBML_OK;
}

static void
free_map(gbml_dataset *ds, gbml_env *env)
{
	gbml_free(env, ds->stored_addr);
	gbml_free(env, ds->stored_chunk_rows);
	gbml_free(env, ds->stored_missing);
	ds->stored_addr = NULL;
	ds->stored_chunk_rows = NULL;
	ds->stored_missing = NULL;
	ds->stored_n_chunks = 0;
}

/*
 * The missing-value flags of the kept rows only (the store's cover every
 * row it holds): each stored chunk read once, its kept rows scanned.  Only
 * when the store saw a missing value and some rows are not kept.
 */
static int
rescan_missing(gbml_dataset *ds, gbml_env *env)
{
	int			d = ds->n_features;
	bool	   *flags = gbml_alloc0(env, (size_t) (d > 0 ? d : 1) * sizeof(bool));
	int64_t    *row0 = gbml_alloc_array(env, (size_t) ds->stored_n_chunks + 1, sizeof(int64_t));
	bool	   *kept = NULL;
	float	   *x = NULL;
	int64_t		most = 1;
	int			rc = GBML_OK;

	if (flags == NULL || row0 == NULL || ds->store->missing(ds->store, flags) != 0)
		rc = flags && row0 ? gbml_dataset_store_error(ds, env, "reading the missing-value flags") : env->error_code;
	if (rc == GBML_OK && memchr(flags, true, (size_t) d) == NULL)
		goto done;				/* nothing missing anywhere: nothing missing in the kept rows */
	row0[0] = 0;
	for (int c = 0; rc == GBML_OK && c < ds->stored_n_chunks; c++)
	{
		row0[c + 1] = row0[c] + ds->stored_chunk_rows[c];
		most = ds->stored_chunk_rows[c] > most ? ds->stored_chunk_rows[c] : most;
	}
	if (rc == GBML_OK && ((kept = gbml_alloc0(env, (size_t) row0[ds->stored_n_chunks] + 1)) == NULL ||
						  (x = gbml_alloc_array(env, (size_t) most * (size_t) d, sizeof(float))) == NULL))
		rc = env->error_code;
	for (int64_t g = 0; rc == GBML_OK && g < ds->n_rows; g++)
		kept[row0[ds->stored_addr[g] >> 32] + (ds->stored_addr[g] & 0xffffffffLL)] = true;
	memset(flags, 0, (size_t) d * sizeof(bool));
	for (int c = 0; rc == GBML_OK && c < ds->stored_n_chunks; c++)
	{
		if (ds->store->read_chunk(ds->store, c, x) != 0)
		{
			rc = gbml_dataset_store_error(ds, env, "reading rows for their missing values");
			break;
		}
		for (int64_t r = 0; r < ds->stored_chunk_rows[c]; r++)
			if (kept[row0[c] + r])
				gbml_missing_flags(flags, x + (size_t) r * (size_t) d, 1, d);
	}
done:
	gbml_free(env, row0);
	gbml_free(env, kept);
	gbml_free(env, x);
	if (rc == GBML_OK)
	{
		gbml_free(env, ds->stored_missing);
		ds->stored_missing = flags;
	}
	else
		gbml_free(env, flags);
	return rc;
}

/*
 * keep_rows for a trainer that reads the features through the map
 * (reorder_as_map): the file stays as written, the map says where each
 * kept row is.  The first map records the store's chunks.
 */
static int
keep_rows_as_map(gbml_dataset *ds, gbml_env *env, const int64_t *src, int64_t n)
{
	int64_t    *addr = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));
	int64_t		stored_rows = 0;
	int			rc;

	if (addr == NULL || (rc = gbml_dataset_store_addresses(ds, src, n, addr, env)) != GBML_OK)
	{
		gbml_free(env, addr);
		return env->error_code;
	}
	if (ds->stored_addr == NULL)
	{
		if ((ds->stored_chunk_rows = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t))) == NULL)
		{
			gbml_free(env, addr);
			return env->error_code;
		}
		for (int c = 0; c < ds->n_chunks; c++)
			ds->stored_chunk_rows[c] = ds->chunks[c]->n_rows;
		ds->stored_n_chunks = ds->n_chunks;
	}
	if ((rc = rebuild_meta(ds, env, src, n)) != GBML_OK)
	{
		gbml_free(env, addr);
		return rc;
	}
	gbml_free(env, ds->stored_addr);
	ds->stored_addr = addr;
	for (int c = 0; c < ds->stored_n_chunks; c++)
		stored_rows += ds->stored_chunk_rows[c];
	return n < stored_rows ? rescan_missing(ds, env) : GBML_OK;
}

/*
 * keep_rows for a trainer whose passes run in any order (reorder_as_ranks):
 * every row stays where it was written; the canonical order becomes the two
 * rank arrays.  Only for the whole dataset (canonical order, no split).
 */
static int
keep_rows_as_ranks(gbml_dataset *ds, gbml_env *env, const int64_t *src, int64_t n)
{
	int64_t    *first = gbml_alloc_array(env, (size_t) ds->n_chunks + 1, sizeof(int64_t));
	uint32_t   *rank = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(uint32_t));
	uint32_t   *row = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(uint32_t));

	if (first == NULL || rank == NULL || row == NULL)
	{
		gbml_free(env, first);
		gbml_free(env, rank);
		gbml_free(env, row);
		return env->error_code;
	}
	first[0] = 0;
	for (int c = 0; c < ds->n_chunks; c++)
		first[c + 1] = first[c] + ds->chunks[c]->n_rows;
	for (int64_t g = 0; g < n; g++)
	{
		row[g] = (uint32_t) (first[src[g] >> 32] + (src[g] & 0xffffffffLL));
		rank[row[g]] = (uint32_t) g;
	}
	gbml_free(env, first);
	ds->rank_of_row = rank;
	ds->row_of_rank = row;
	/* ranked: the hashes are not needed any more (their 8 bytes a row pay for the ranks') */
	for (int c = 0; c < ds->n_chunks; c++)
	{
		gbml_free(env, ds->chunks[c]->hash);
		ds->chunks[c]->hash = NULL;
	}
	return GBML_OK;
}

/*
 * Keeps the rows at addresses src[0..n) in that order: the store reorders
 * the features (or, for a trainer that reads them through a map, the map
 * changes), the host rebuilds the per-row state in the serial layout.
 */
static int
keep_rows(gbml_dataset *ds, gbml_env *env, const int64_t *src, int64_t n)
{
	if (ds->reorder_as_map && in_files(ds))
		return keep_rows_as_map(ds, env, src, n);
	if (ds->rank_of_row != NULL)
		return gbml_error(env, GBML_EINVAL, "rows kept in their written order cannot be reordered again");
	if (ds->stored_addr != NULL)
		return gbml_error(env, GBML_EINVAL, "rows reordered through a map cannot be rewritten");
	if (ds->reorder_window_quarter)
	{
		/* about what the bins will take: the fit's peak is then the bins', not the reorder's */
		size_t		quarter = (size_t) n * (size_t) ds->n_features;	/* a quarter of the features' bytes */
		size_t		floor = (size_t) 4 * (size_t) ds->chunk_rows * (size_t) ds->n_features * sizeof(float);

		gbml_chunk_store_file_set_permute_budget(ds->store, quarter > floor ? quarter : floor);
	}
	if (ds->store->permute(ds->store, src, n, gbml_ds_first_chunk_limit(ds), ds->chunk_rows) != 0)
		return gbml_dataset_store_error(ds, env, "reordering rows");
	return rebuild_meta(ds, env, src, n);
}

/* Insertion-sorts keys[0..m) (rows at x[0..m)) by content, moving both: dataset.c's order for a run. */
static void
sort_run(const gbml_dataset *ds, row_key *keys, const float **x, int64_t m)
{
	for (int64_t i = 1; i < m; i++)
		for (int64_t j = i; j > 0 && gbml_ds_compare_rows(ds, &keys[j - 1], x[j - 1], &keys[j], x[j]) > 0; j--)
		{
			row_key		tk = keys[j];
			const float *tx = x[j];

			keys[j] = keys[j - 1];
			x[j] = x[j - 1];
			keys[j - 1] = tk;
			x[j - 1] = tx;
		}
}

/*
 * Puts every run of equal hashes (duplicate rows, or a collision) of the
 * sorted keys in content order, as dataset.c does.  The runs' rows are
 * fetched together, whole runs at a time, up to FETCH_BATCH rows a call (a
 * longer run in a call of its own): one round trip per batch, not one per
 * comparison, which a table full of duplicate rows would pay per row.
 */
static int
order_ties(gbml_dataset *ds, gbml_env *env, row_key *keys, int64_t n)
{
	size_t		d = (size_t) ds->n_features;
	int64_t		cap = 0,
				i = 0;
	float	   *rows = NULL;
	const float **x = NULL;
	int64_t    *addr = NULL;
	int			rc = GBML_OK;

	while (i < n && rc == GBML_OK)
	{
		int64_t		first = i,
					m = 0;

		/* a batch: whole runs from i on, FETCH_BATCH rows at most unless one run is longer */
		while (i < n)
		{
			int64_t		end = i + 1;

			while (end < n && keys[end].hash == keys[i].hash)
				end++;
			if (end - i > 1 && m > 0 && m + (end - i) > FETCH_BATCH)
				break;
			if (end - i > 1)
				m += end - i;
			else if (m == 0)
				first = end;	/* a singleton before the batch's first run */
			i = end;
			if (m >= FETCH_BATCH)
				break;
		}
		if (m == 0)
			break;
		if (m > cap)
		{
			gbml_free(env, rows);
			gbml_free(env, x);
			gbml_free(env, addr);
			rows = NULL;
			x = NULL;
			addr = NULL;
			/* a long run of duplicate rows is held whole beside the keys */
			if ((rc = gbml_budget_check(env, (size_t) m * (d * sizeof(float) + sizeof(float *) + sizeof(int64_t)),
										"ordering %lld rows with the same hash (duplicate rows) by their contents",
										(long long) m)) != GBML_OK)
				break;
			cap = m;
			rows = gbml_alloc_array(env, (size_t) cap * d, sizeof(float));
			x = gbml_alloc_array(env, (size_t) cap, sizeof(float *));
			addr = gbml_alloc_array(env, (size_t) cap, sizeof(int64_t));
			if (rows == NULL || x == NULL || addr == NULL)
			{
				rc = env->error_code;
				break;
			}
		}
		/* the batch's tied rows, in key order (singletons between runs are skipped) */
		{
			int64_t		k = 0;

			for (int64_t j = first; j < i; j++)
				if ((j + 1 < i && keys[j + 1].hash == keys[j].hash) || (j > first && keys[j - 1].hash == keys[j].hash))
				{
					x[k] = rows + (size_t) k * d;
					addr[k++] = ((int64_t) keys[j].chunk << 32) | keys[j].row;
				}
		}
		if ((rc = gbml_dataset_fetch_rows(ds, addr, m, rows, env)) != GBML_OK)
			break;
		for (int64_t j = first, k = 0; j < i;)
		{
			int64_t		end = j + 1;

			while (end < i && keys[end].hash == keys[j].hash)
				end++;
			if (end - j > 1)
			{
				sort_run(ds, keys + j, x + k, end - j);
				k += end - j;
			}
			j = end;
		}
	}
	gbml_free(env, rows);
	gbml_free(env, x);
	gbml_free(env, addr);
	return rc;
}

/*
 * The most gbml_ds_stored_canonicalize holds at once per row beside the
 * dataset: its two sort keys; then one key's room as addresses, with the
 * rank arrays (keep_rows_as_ranks), or the rebuilt label, group, weight and
 * hash while the old ones still exist (a rewrite), and the map's addresses
 * besides (keep_rows_as_map).
 */
static size_t
canonicalize_row_bytes(const gbml_dataset *ds)
{
	size_t		keys = 2 * sizeof(row_key),
				after;
	bool		file = in_files(ds);

	if (ds->reorder_as_map && file)
		after = sizeof(row_key) + sizeof(int64_t) + META_ROW_BYTES;
	else if (ds->reorder_as_ranks && file && ds->stored_addr == NULL)
		after = sizeof(row_key) + 2 * sizeof(uint32_t);
	else
		after = sizeof(row_key) + META_ROW_BYTES;
	return after > keys ? after : keys;
}

/*
 * The most gbml_ds_stored_split_eval holds at once per row beside the
 * dataset: the kept and held addresses, and the kept rows' rebuilt label,
 * group, weight and hash while the old ones still exist (and, when their
 * order becomes a map, its addresses).
 */
static size_t
split_row_bytes(const gbml_dataset *ds)
{
	/* a map's addresses; or a rewrite's, whose permute (12 bytes a row) comes before the rebuild */
	return 2 * sizeof(int64_t) + META_ROW_BYTES +
		(ds->reorder_as_map && in_files(ds) ? sizeof(int64_t) : 0);
}

/* An eval share to split from the rows as they are ordered (gbml_ds_stored_canonicalize_split). */
typedef struct pending_split
{
	gbml_dataset *eval;
	double		fraction;
	uint64_t	seed;
} pending_split;

static int	order_stored(gbml_dataset *ds, gbml_env *env, const pending_split *split);
static int	check_split_budget(const gbml_dataset *ds, double fraction, gbml_env *env);
static int	split_rows(gbml_dataset *ds, gbml_dataset *eval, double fraction, uint64_t seed, const int64_t *order,
					   gbml_env *env);

int
gbml_ds_stored_canonicalize(gbml_dataset *ds, gbml_env *env)
{
	return order_stored(ds, env, NULL);
}

int
gbml_ds_stored_canonicalize_split(gbml_dataset *ds, gbml_dataset *eval, double fraction, uint64_t seed,
								  gbml_env *env)
{
	pending_split split = {eval, fraction, seed};

	gbml_ds_split_eval_init(ds, eval);
	return order_stored(ds, env, &split);
}

/*
 * The canonical order of ds's rows (sorted by hash, ties by content), kept
 * by keep_rows or as ranks; with a split, the order is walked once into
 * the eval set's rows and the kept ones (split_rows): the kept rows are
 * reordered once, not once as a whole and again without the held-out ones.
 */
static int
order_stored(gbml_dataset *ds, gbml_env *env, const pending_split *split)
{
	int64_t		n = ds->n_rows,
				i = 0;
	row_key    *keys,
			   *tmp;
	int64_t    *src;
	int			rc;

	if (ds->rank_of_row != NULL)
		return split ? gbml_error(env, GBML_EINVAL, "rows kept in their written order cannot be split (internal)")
			: GBML_OK;			/* ranked already */
	if ((rc = seal(ds, env)) != GBML_OK || n == 0)
		return rc;				/* (no rows: an empty eval set) */
	if (ds->store == NULL)
	{
		/* the last chunk did not fit: on the host now */
		if ((rc = gbml_dataset_canonicalize(ds, env)) != GBML_OK || split == NULL)
			return rc;
		return gbml_dataset_split_eval(ds, split->eval, split->fraction, split->seed, true, env);
	}
	if ((rc = gbml_budget_check(env, (size_t) n * canonicalize_row_bytes(ds),
								"ordering the %lld rows canonically (%zu bytes a row: sort keys, addresses)",
								(long long) n, canonicalize_row_bytes(ds))) != GBML_OK)
		return rc;
	keys = gbml_alloc_array(env, (size_t) n, sizeof(row_key));
	tmp = gbml_alloc_array(env, (size_t) n, sizeof(row_key));
	if (keys == NULL || tmp == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, i++)
		{
			keys[i].hash = ds->chunks[c]->hash[r];
			keys[i].chunk = c;
			keys[i].row = (int32_t) r;
		}
	gbml_ds_sort_keys(keys, tmp, n);
	if ((rc = order_ties(ds, env, keys, n)) != GBML_OK)
		goto done;
	/* the keys' memory holds the addresses now (8 bytes of each 16) */
	src = (int64_t *) tmp;
	for (i = 0; i < n; i++)
		src[i] = ((int64_t) keys[i].chunk << 32) | keys[i].row;
	/* the keys are spent: their room goes to the reorder's window */
	gbml_free(env, keys);
	keys = NULL;
	if (split)
	{
		if ((rc = check_split_budget(ds, split->fraction, env)) == GBML_OK)
			rc = split_rows(ds, split->eval, split->fraction, split->seed, src, env);
	}
	else if (ds->reorder_as_ranks && in_files(ds) && ds->stored_addr == NULL &&
			 n < (int64_t) UINT32_MAX)
		rc = keep_rows_as_ranks(ds, env, src, n);
	else
		rc = keep_rows(ds, env, src, n);
done:
	gbml_free(env, keys);
	gbml_free(env, tmp);
	return rc;
}

/*
 * The split's memory against the budget: beside the lists, the eval rows'
 * label, group, weight and hash, the chunk they fill and the rows fetched.
 */
static int
check_split_budget(const gbml_dataset *ds, double fraction, gbml_env *env)
{
	int64_t		n = ds->n_rows,
				held = (int64_t) (fraction * (double) n + 1);
	size_t		row = (size_t) ds->n_features * sizeof(float);
	/* rows not in files (a GPU's): the eval set's features go to the host, a chunk of growth beside them */
	bool		host = !in_files(ds);

	return gbml_budget_check(env, (size_t) n * split_row_bytes(ds) + (size_t) held * META_ROW_BYTES +
							 2 * (size_t) ds->chunk_rows * row +
							 (host ? (size_t) (held + ds->chunk_rows) * row : 0),
							 "splitting the %lld rows in %s into training and eval sets (%zu bytes a row, "
							 "and the eval rows' own%s)",
							 (long long) n, ds->store->where, split_row_bytes(ds),
							 host ? ", their features in host memory" : "");
}

/*
 * Splits ds's stored rows, walked in `order` (addresses; NULL: as they lie
 * in the chunks), into the held-out rows, appended to eval in that order,
 * and the kept ones, which ds keeps in that order (keep_rows): one reorder
 * for both when order is the canonical one.
 */
static int
split_rows(gbml_dataset *ds, gbml_dataset *eval, double fraction, uint64_t seed, const int64_t *order,
		   gbml_env *env)
{
	int64_t		n = ds->n_rows,
				n_kept = 0,
				n_held = 0;
	int64_t    *kept,
			   *held;
	int64_t		batch;
	float	   *rows = NULL;
	bool		eval_as_map = ds->reorder_as_map && in_files(ds);
	int			rc;

	kept = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));
	held = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));
	/*
	 * A chunk's worth of held-out rows at a time (what check_split_budget
	 * counts; a small budget has small chunks): in canonical order they lie
	 * all over the file, and a batch of 4,096 of them was fetched row by
	 * row (boosting, 1M rows, a fifth held out: 3.6 GB read, 0.48-0.51 s
	 * to prepare), where a chunk's worth is close enough to read in spans
	 * (2.0 GB, 0.25-0.32 s).
	 */
	batch = ds->chunk_rows;
	rows = gbml_alloc_array(env, (size_t) batch * (size_t) ds->n_features, sizeof(float));
	if (kept == NULL || held == NULL || rows == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	/* the keys are the rows' hashes (or groups), which a stored chunk keeps: its features are not here */
	for (int c = 0; c < ds->n_chunks; c++)
		if (ds->group_state <= 0 && ds->chunks[c]->hash == NULL)
		{
			rc = gbml_error(env, GBML_EINVAL, "eval split: stored rows without their hashes (internal)");
			goto done;
		}
	/*
	 * The kept rows in canonical order.  The held-out ones too, unless the
	 * trainer reads rows through a map (boosting): then in the order they
	 * were written, so that the batches below read the file about once, and
	 * the eval set is given its canonical order as a map once it is whole
	 * (1M rows of 100 floats, a fifth held out: 2.0 GB read for the 382 MB
	 * file in canonical order, 1.2 GB so).  A rewrite of the eval set
	 * (K-Means, SAGA) cost as much as the reads it saved.
	 */
	for (int64_t c = 0, i = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, i++)
		{
			int64_t		addr = order ? order[i] : (c << 32) | r;
			bool		out = gbml_ds_held_out(gbml_ds_eval_key(ds, ds->chunks[addr >> 32], addr & 0xffffffffLL),
											   seed, fraction);

			if (!out)
				kept[n_kept++] = addr;
			else if (!eval_as_map)
				held[n_held++] = addr;
			if (eval_as_map && gbml_ds_held_out(gbml_ds_eval_key(ds, ds->chunks[c], r), seed, fraction))
				held[n_held++] = (c << 32) | r;
		}
	/*
	 * The held-out rows: to temporary files of their own when the rows are
	 * in files (the eval set is as big a share of the budget as the
	 * training set), else to the host as a plain dataset.
	 */
	if (in_files(ds))
		gbml_dataset_stream_to(eval, ds->store_open, 0, false);
	for (int64_t b = 0; b < n_held; b += batch)
	{
		int64_t		m = n_held - b < batch ? n_held - b : batch;

		if ((rc = gbml_dataset_fetch_rows(ds, held + b, m, rows, env)) != GBML_OK)
			goto done;
		for (int64_t i = 0; i < m; i++)
		{
			const gbml_chunk *s = ds->chunks[held[b + i] >> 32];
			int64_t		sr = held[b + i] & 0xffffffffLL;
			gbml_row	row = {
				.x = rows + (size_t) i * (size_t) ds->n_features,.n_features = ds->n_features,
				.label = s->label[sr],.group = s->group[sr],.group_is_null = ds->group_state <= 0,
				.weight = s->weight[sr]
			};

			if ((rc = gbml_dataset_append(eval, env, &row, false)) != GBML_OK)
				goto done;
		}
	}
	/* the fetch buffer goes before the kept rows' reorder, whose windows take half of what is free */
	gbml_free(env, rows);
	rows = NULL;
	if ((rc = keep_rows(ds, env, kept, n_kept)) != GBML_OK)
		goto done;
	/* the eval set's last chunk goes to its store too: trainers read it from there */
	if (eval->store && (rc = seal(eval, env)) != GBML_OK)
		goto done;
	eval->group_state = ds->group_state;
	eval->schema = ds->schema;
	/* held out in the order written: their canonical order, as a map */
	if (eval_as_map)
	{
		eval->reorder_as_map = true;
		rc = gbml_dataset_canonicalize(eval, env);
	}
done:
	gbml_free(env, kept);
	gbml_free(env, held);
	gbml_free(env, rows);
	return rc;
}

int
gbml_ds_stored_split_eval(gbml_dataset *ds, gbml_dataset *eval, double fraction, uint64_t seed,
						  gbml_env *env)
{
	int			rc;

	gbml_ds_split_eval_init(ds, eval);
	if ((rc = seal(ds, env)) != GBML_OK)
		return rc;
	if (ds->store == NULL)
		return gbml_dataset_split_eval(ds, eval, fraction, seed, true, env);	/* back on the host (the caller checks) */
	if ((rc = check_split_budget(ds, fraction, env)) != GBML_OK)
		return rc;
	return split_rows(ds, eval, fraction, seed, NULL, env);
}

int
gbml_dataset_seal(gbml_dataset *ds, gbml_env *env)
{
	gbml_dataset_finish_appends(ds, env);
	return ds->store ? seal(ds, env) : GBML_OK;
}

int
gbml_dataset_stored_missing(const gbml_dataset *ds, bool *out, gbml_env *env)
{
	if (ds->stored_missing)
	{
		memcpy(out, ds->stored_missing, (size_t) ds->n_features * sizeof(bool));
		return GBML_OK;
	}
	if (ds->store->missing(ds->store, out) != 0)
		return gbml_dataset_store_error(ds, env, "reading the missing-value flags");
	return GBML_OK;
}

int
gbml_dataset_stored_view(const gbml_dataset *ds, gbml_dataset *view, gbml_env *env)
{
	gbml_dataset_init(view, ds->allow_missing);
	view->n_features = ds->n_features;
	view->store = ds->store;
	view->chunk_rows = ds->chunk_rows;
	if (ds->stored_addr == NULL)
		return gbml_error(env, GBML_EINVAL, "the rows are in the dataset's own order: read the dataset");
	view->chunks = gbml_alloc0(env, sizeof(gbml_chunk *) * (size_t) (ds->stored_n_chunks > 0 ? ds->stored_n_chunks : 1));
	if (view->chunks == NULL)
		return env->error_code;
	view->chunks_cap = ds->stored_n_chunks;
	for (int c = 0; c < ds->stored_n_chunks; c++)
	{
		/* a shell: the features are the store's, the per-row state is ds's */
		if ((view->chunks[c] = gbml_alloc0(env, sizeof(gbml_chunk))) == NULL)
		{
			gbml_dataset_stored_view_free(view, env);
			return env->error_code;
		}
		view->chunks[c]->n_rows = view->chunks[c]->capacity = ds->stored_chunk_rows[c];
		view->n_chunks++;
		view->n_rows += ds->stored_chunk_rows[c];
	}
	return GBML_OK;
}

void
gbml_dataset_stored_view_free(gbml_dataset *view, gbml_env *env)
{
	for (int c = 0; c < view->n_chunks; c++)
		gbml_free(env, view->chunks[c]);
	gbml_free(env, view->chunks);
	for (int b = 0; b < 2; b++)
		gbml_free(env, view->reader_buf[b]);
	memset(view, 0, sizeof(*view));
}

void
gbml_ds_stored_free(gbml_dataset *ds, gbml_env *env)
{
	free_map(ds, env);
	gbml_free(env, ds->rank_of_row);
	gbml_free(env, ds->row_of_rank);
	ds->rank_of_row = ds->row_of_rank = NULL;
	if (ds->store)
		ds->store->destroy(ds->store);
	ds->store = NULL;
}

int
gbml_dataset_copy_ranks(const gbml_dataset *src, gbml_dataset *out, gbml_env *env)
{
	size_t		n = (size_t) (src->n_rows > 0 ? src->n_rows : 1);

	if (src->rank_of_row == NULL)
		return GBML_OK;
	if (out->n_rows != src->n_rows)
		return gbml_error(env, GBML_EINVAL, "ranks of %lld rows for a dataset of %lld",
						  (long long) src->n_rows, (long long) out->n_rows);
	gbml_free(env, out->rank_of_row);
	gbml_free(env, out->row_of_rank);
	out->rank_of_row = gbml_alloc_array(env, n, sizeof(uint32_t));
	out->row_of_rank = gbml_alloc_array(env, n, sizeof(uint32_t));
	if (out->rank_of_row == NULL || out->row_of_rank == NULL)
		return env->error_code;
	memcpy(out->rank_of_row, src->rank_of_row, n * sizeof(uint32_t));
	memcpy(out->row_of_rank, src->row_of_rank, n * sizeof(uint32_t));
	return GBML_OK;
}

void
gbml_dataset_close_files(gbml_dataset *ds)
{
	if (in_files(ds))
	{
		ds->store->destroy(ds->store);
		ds->store = NULL;
	}
}

void
gbml_dataset_stream_to(gbml_dataset *ds, gbml_chunk_store *(*open) (gbml_env *env), int64_t from_values,
					   bool fallback)
{
	ds->store_open = open;
	ds->stream_from = from_values;
	ds->stream_fallback = fallback;
}

/*
 * The dataset reached its streaming size at a chunk boundary: open the store
 * and hand it every chunk held so far (their rows get their hashes now, the
 * host copies go); the next chunks fill the store's buffers.
 */
static int
start_streaming(gbml_dataset *ds, gbml_env *env)
{
	int			rc;

	gbml_dataset_finish_appends(ds, env);	/* no pre-faulted spare: the store's buffers come next */
	for (int i = 0; i < ds->n_chunks; i++)
		if ((ds->chunks[i]->hash = gbml_alloc_array(env, (size_t) ds->chunks[i]->capacity, sizeof(uint64_t))) == NULL)
			return env->error_code;
	if ((ds->store = ds->store_open(env)) == NULL)
		return env->error_code ? env->error_code : GBML_EDEVICE;
	for (int i = 0; i < ds->n_chunks; i++)
		if ((rc = store_chunk(ds, ds->chunks[i], env)) != GBML_OK)
			return rc;
	return GBML_OK;
}

bool
gbml_ds_stored_should_start(const gbml_dataset *ds)
{
	const gbml_chunk *c = ds->n_chunks > 0 ? ds->chunks[ds->n_chunks - 1] : NULL;

	/*
	 * A chunk boundary of the serial layout: the last chunk is full at its
	 * final size.  A row held in memory costs its features and its state
	 * (label, group, weight) and, when the rows are put in canonical order,
	 * two sort keys: narrow rows reach the budget on that, not their features.
	 */
	return ds->store == NULL && ds->store_open != NULL && c != NULL && c->n_rows == c->capacity &&
		c->capacity == (ds->n_chunks == 1 ? gbml_ds_first_chunk_limit(ds) : ds->chunk_rows) &&
		ds->n_rows * ((int64_t) ds->n_features + GBML_HOST_ROW_OVERHEAD_VALUES) >= ds->stream_from;
}

/*
 * The store ran out of room while the rows streamed in (fallback allowed):
 * every chunk comes back to host memory, the store goes, and the dataset
 * stays on the host from now on.  The chunk whose put failed is still in
 * the store's buffer.
 */
static int
stop_streaming(gbml_dataset *ds, gbml_env *env)
{
	size_t		d = (size_t) ds->n_features;
	char		why[300];

	snprintf(why, sizeof(why), "%s", ds->store->error(ds->store));
	for (int i = 0; i < ds->n_chunks; i++)
	{
		gbml_chunk *c = ds->chunks[i];
		float	   *x = gbml_alloc_array(env, (size_t) c->capacity * d, sizeof(float));

		if (x == NULL)
			return env->error_code;
		if (c->x != NULL)
			memcpy(x, c->x, (size_t) c->n_rows * d * sizeof(float));
		else if (c->n_rows > 0 && ds->store->read_chunk(ds->store, i, x) != 0)
		{
			gbml_free(env, x);
			return gbml_dataset_store_error(ds, env, "bringing the rows back to host memory");
		}
		c->x = x;
		c->x_from_store = false;
		gbml_free(env, c->hash);
		c->hash = NULL;
	}
	ds->store->destroy(ds->store);
	ds->store = NULL;
	ds->store_open = NULL;
	ds->stream_fell_back = true;
	gbml_notice(env, GBML_LOG_NOTICE, "the rows stay in host memory: the GPU is out of room (%s)", why);
	return GBML_OK;
}

void
gbml_dataset_addresses(const gbml_dataset *ds, const int64_t *pos, int64_t n, int64_t *addr)
{
	int64_t		first = 0;		/* canonical position of chunk c's first row */
	int			c = 0;

	for (int64_t i = 0; i < n; i++)
	{
		while (pos[i] >= first + ds->chunks[c]->n_rows)
			first += ds->chunks[c++]->n_rows;
		addr[i] = ((int64_t) c << 32) | (pos[i] - first);
	}
}

int
gbml_dataset_fetch_rows(const gbml_dataset *ds, const int64_t *addr, int64_t n, float *out, gbml_env *env)
{
	size_t		d = (size_t) ds->n_features;

	if (ds->store)
	{
		int64_t    *at = ds->stored_addr ? gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(int64_t)) : NULL;
		int			rc = GBML_OK;

		if (ds->stored_addr && (at == NULL || gbml_dataset_store_addresses(ds, addr, n, at, env) != GBML_OK))
			rc = env->error_code;
		else if (ds->store->fetch(ds->store, at ? at : addr, n, out) != 0)
			rc = gbml_dataset_store_error(ds, env, "fetching rows");
		gbml_free(env, at);
		return rc;
	}
	for (int64_t i = 0; i < n; i++)
	{
		const gbml_chunk *c = ds->chunks[addr[i] >> 32];

		memcpy(out + (size_t) i * d, c->x + (size_t) (addr[i] & 0xffffffffLL) * d, d * sizeof(float));
	}
	return GBML_OK;
}
