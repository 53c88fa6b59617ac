/*
 * boost_quantize.c — borders from quantiles of a row sample, and the
 * feature-major uint8 bins of the training rows (see boost_quantize.h for the
 * bin convention that keeps training and raw-float scoring identical).
 *
 * Everything here is deterministic whatever env->threads is: the sample is
 * drawn on the main thread (selection sampling over the canonical row order),
 * each feature's borders depend only on its sorted sample, and each row's
 * bins only on the row, wherever it was read from and however the rows were
 * cut into runs.  Rows a chunk store holds are fetched (the sample) or read
 * chunk by chunk through the reader (the bins), never all at once.
 */
#include "boost_quantize.h"
#include "boost_bins_walk.h"
#include "chunk_prefetch.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Bytes of sample values gathered per pass (features are done in batches). */
#define SAMPLE_BATCH_BYTES ((size_t) 64 << 20)
/* Rows per tile when binning: the tile's rows stay in L1 while every feature is binned. */
#define BIN_TILE 64
/* Up to this many borders a feature is binned by counting (vectorised), above by binary search. */
#define COUNT_BINS_MAX 48

void
gbml_boost_borders_free(gbml_boost_borders *b, gbml_env *env)
{
	gbml_free(env, b->count);
	gbml_free(env, b->offset);
	gbml_free(env, b->values);
	gbml_free(env, b->has_missing);
	memset(b, 0, sizeof(*b));
}

/* Order-preserving map float -> uint32 (for finite floats). */
static inline uint32_t
float_key(float v)
{
	uint32_t	u;

	memcpy(&u, &v, 4);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static inline float
key_float(uint32_t k)
{
	uint32_t	u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
	float		v;

	memcpy(&v, &u, 4);
	return v;
}

/* LSD radix sort of n uint32 keys, 3 passes of 11 bits; result in a. */
static void
radix_sort_u32(uint32_t *a, uint32_t *tmp, int64_t n)
{
	uint32_t   *src = a,
			   *dst = tmp;
	int64_t		count[2048];

	for (int pass = 0; pass < 3; pass++)
	{
		int			shift = pass * 11;
		int64_t		sum = 0;

		memset(count, 0, sizeof(count));
		for (int64_t i = 0; i < n; i++)
			count[(src[i] >> shift) & 2047]++;
		for (int b = 0; b < 2048; b++)
		{
			int64_t		c = count[b];

			count[b] = sum;
			sum += c;
		}
		for (int64_t i = 0; i < n; i++)
			dst[count[(src[i] >> shift) & 2047]++] = src[i];
		{
			uint32_t   *t = src;

			src = dst;
			dst = t;
		}
	}
	/* three passes: the result is in tmp; copy back */
	memcpy(a, src, (size_t) n * sizeof(uint32_t));
}

/* A split value between sorted values a < b: a <= border < b, so a goes left, b right. */
static float
border_between(float a, float b)
{
	float		mid = (float) ((double) a + ((double) b - (double) a) * 0.5);

	if (!(mid >= a && mid < b))
		mid = a;
	return mid;
}

/* A bin of the greedy border choice: sorted positions [lo, hi) and its best split. */
typedef struct greedy_bin
{
	int64_t		lo,
				hi;
	int64_t		split;			/* the value boundary that splits it best; 0: none */
	double		gain;			/* L * R / (L + R) at that split: log of it is the log-sum gain */
} greedy_bin;

/*
 * bin's best split among the value boundaries bnd[0..nb) (ascending
 * positions where the sorted value changes): of the boundaries nearest its
 * middle on either side, the one with the larger L * R (ties: the lower).
 */
static void
greedy_best_split(greedy_bin *bin, const uint32_t *bnd, int64_t nb)
{
	int64_t		mid = bin->lo + (bin->hi - bin->lo) / 2;
	int64_t		a = 0,
				b = nb;

	bin->split = 0;
	bin->gain = -1.0;
	while (a < b)
	{
		int64_t		c = (a + b) >> 1;

		if ((int64_t) bnd[c] < mid)
			a = c + 1;
		else
			b = c;
	}
	for (int64_t k = a - 1; k <= a; k++)
	{
		double		l,
					r,
					g;

		if (k < 0 || k >= nb || (int64_t) bnd[k] <= bin->lo || (int64_t) bnd[k] >= bin->hi)
			continue;
		l = (double) (bnd[k] - bin->lo);
		r = (double) (bin->hi - bnd[k]);
		g = l * r / (l + r);
		if (g > bin->gain)
		{
			bin->gain = g;
			bin->split = bnd[k];
		}
	}
}

/*
 * CatBoost's GreedyLogSum: starting from one bin, split max_borders times
 * the bin whose best split raises sum(log(bin size)) most (ties: the lower
 * bin), each split at a value boundary.  Unlike quantiles, a heavy run of
 * equal values never costs a border: the borders go where there is room.
 */
static int
choose_borders_greedy(const uint32_t *v, int64_t m, int max_borders, uint32_t *bnd, float *out)
{
	greedy_bin	bins[GBML_BOOST_MAX_BORDERS + 1];
	int64_t		split[GBML_BOOST_MAX_BORDERS];
	int64_t		nb = 0;
	int			n_bins = 1,
				n = 0;

	for (int64_t i = 1; i < m; i++)
		if (v[i] != v[i - 1])
			bnd[nb++] = (uint32_t) i;

	bins[0].lo = 0;
	bins[0].hi = m;
	greedy_best_split(&bins[0], bnd, nb);
	while (n < max_borders)
	{
		int			best = -1;

		for (int i = 0; i < n_bins; i++)
			if (bins[i].split > 0 && (best < 0 || bins[i].gain > bins[best].gain ||
									  (bins[i].gain == bins[best].gain && bins[i].lo < bins[best].lo)))
				best = i;
		if (best < 0)
			break;
		split[n++] = bins[best].split;
		bins[n_bins].lo = bins[best].split;
		bins[n_bins].hi = bins[best].hi;
		bins[best].hi = bins[best].split;
		greedy_best_split(&bins[best], bnd, nb);
		greedy_best_split(&bins[n_bins], bnd, nb);
		n_bins++;
	}
	for (int i = 1; i < n; i++)		/* insertion sort: at most 255 */
		for (int j = i; j > 0 && split[j - 1] > split[j]; j--)
		{
			int64_t		t = split[j];

			split[j] = split[j - 1];
			split[j - 1] = t;
		}
	for (int i = 0; i < n; i++)
		out[i] = border_between(key_float(v[split[i] - 1]), key_float(v[split[i]]));
	return n;
}

/*
 * Chooses at most max_borders borders from sorted keys v[0..m) (finite values):
 * every value boundary when there are that few, else by `type`.  Median:
 * quantile positions k*m/(B+1); a position inside a run of equal values moves
 * to the nearer edge of the run, so heavy ties cost borders, never create
 * empty bins.  GreedyLogSum: choose_borders_greedy, in scratch (m keys;
 * positions are 32-bit, and samples are at most border_sample_size, 1e8,
 * so the Median fallback past 2^32 values never happens in a training).
 * Returns the number written to out.
 */
static int
choose_borders(const uint32_t *v, int64_t m, int max_borders, gbml_boost_border_type type, uint32_t *scratch,
			   float *out)
{
	int			n = 0;
	int64_t		distinct = m > 0 ? 1 : 0;

	if (m < 2 || max_borders <= 0)
		return 0;
	for (int64_t i = 1; i < m && distinct <= max_borders + 1; i++)
		if (v[i] != v[i - 1])
			distinct++;
	if (distinct - 1 <= max_borders)
	{
		for (int64_t i = 1; i < m; i++)
			if (v[i] != v[i - 1])
				out[n++] = border_between(key_float(v[i - 1]), key_float(v[i]));
		return n;
	}
	if (type == GBML_BORDER_GREEDY_LOGSUM && m <= (int64_t) UINT32_MAX)
		return choose_borders_greedy(v, m, max_borders, scratch, out);
	{
		int64_t		last = 0;

		for (int k = 1; k <= max_borders; k++)
		{
			int64_t		p = (int64_t) k * m / (max_borders + 1);
			int64_t		lo,
						hi,
						q;
			uint32_t	x;

			if (p <= 0)
				p = 1;
			if (p >= m)
				p = m - 1;
			x = v[p];
			/* [lo, hi) = the run of values equal to v[p] */
			{
				int64_t		a = 0,
							b = p;

				while (a < b)
				{
					int64_t		mid = (a + b) >> 1;

					if (v[mid] < x)
						a = mid + 1;
					else
						b = mid;
				}
				lo = a;
				a = p;
				b = m;
				while (a < b)
				{
					int64_t		mid = (a + b) >> 1;

					if (v[mid] <= x)
						a = mid + 1;
					else
						b = mid;
				}
				hi = a;
			}
			if (lo == p)
				q = p;
			else if (lo > 0 && hi < m)
				q = (p - lo <= hi - p) ? lo : hi;
			else if (lo > 0)
				q = lo;
			else if (hi < m)
				q = hi;
			else
				continue;
			if (q <= last || q <= 0 || q >= m)
				continue;
			out[n++] = border_between(key_float(v[q - 1]), key_float(v[q]));
			last = q;
		}
	}
	return n;
}

int
gbml_boost_scan_missing(const gbml_dataset *ds, bool *has_missing, gbml_env *env)
{
	int			d = ds->n_features;

	memset(has_missing, 0, sizeof(bool) * d);
	if (!ds->has_missing)
		return GBML_OK;
	if (ds->store)
	{
		/* the rows are where the store keeps them: it scans them there */
		return gbml_dataset_stored_missing(ds, has_missing, env);
	}
	for (int c = 0; c < ds->n_chunks; c++)
		gbml_missing_flags(has_missing, ds->chunks[c]->x, ds->chunks[c]->n_rows, d);
	return GBML_OK;
}

int64_t
gbml_boost_sample_positions(int64_t n, int64_t m, uint64_t seed, int64_t *pos)
{
	gbml_rng	rng;
	int64_t		taken = 0;

	if (m > n)
		m = n;
	gbml_rng_stream(&rng, seed, 0x626f7264);	/* "bord" */
	for (int64_t seen = 0; seen < n && taken < m; seen++)
		if (m == n || (double) (n - seen) * gbml_rng_uniform(&rng) < (double) (m - taken))
			pos[taken++] = seen;
	return taken;
}

static int
cmp_address(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a,
				y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/*
 * The sample's rows (gbml_boost_sample_positions over the canonical order)
 * as pointers into the host chunks (sample[]), or, when a chunk store
 * holds the rows (addr[] not NULL; sample_columns fetches them), as the
 * store's own addresses (chunk << 32 | row, through boosting's map),
 * sorted.  Returns the number taken, or -1.  In canonical order they lie
 * all over the file, and each piece sample_columns fetches read spans
 * across all of it (500,000 rows of 52 features: 3.2 GB read for a 95 MB
 * file); sorted, a piece is one stretch of the file.  Every column is
 * sorted before its borders are chosen, so the rows' order in the sample
 * changes nothing.
 */
static int64_t
draw_sample(const gbml_dataset *ds, int64_t m, uint64_t seed, const float **sample, int64_t *addr,
			gbml_env *env)
{
	int64_t    *pos = gbml_alloc_array(env, (size_t) (m > 0 ? m : 1), sizeof(int64_t));
	int64_t		taken;

	if (pos == NULL)
		return -1;
	taken = gbml_boost_sample_positions(ds->n_rows, m, seed, pos);
	gbml_dataset_addresses(ds, pos, taken, pos);
	if (addr && gbml_dataset_store_addresses(ds, pos, taken, addr, env) != GBML_OK)
		taken = -1;
	else if (addr)
		qsort(addr, (size_t) taken, sizeof(int64_t), cmp_address);
	for (int64_t i = 0; addr == NULL && i < taken; i++)
		sample[i] = ds->chunks[pos[i] >> 32]->x + (size_t) (pos[i] & 0xffffffffLL) * ds->n_features;
	gbml_free(env, pos);
	return taken;
}

/* Bytes of stored sample rows fetched at a time by sample_columns. */
#define SAMPLE_FETCH_BYTES ((size_t) 1 << 20)

/* Progress of the border sample (its rows fetched and sorted) and a cancel check: GBML_OK or GBML_ECANCELLED. */
static int
sample_progress(gbml_env *env, int64_t done, int64_t total)
{
	gbml_progress_info info = {"borders", done, total, NULL, 0};

	return gbml_progress(env, &info) ? gbml_error(env, GBML_ECANCELLED, "canceled") : GBML_OK;
}

/* The sample rows sample_columns fetches at a time (at least one, at most m). */
static int64_t
sample_piece_rows(const gbml_dataset *ds, int64_t m)
{
	int64_t		piece = (int64_t) (SAMPLE_FETCH_BYTES / ((size_t) ds->n_features * sizeof(float)));

	return piece < 1 ? 1 : piece > m ? (m > 0 ? m : 1) : piece;
}

/* What a piece of stored sample rows holds while it is fetched: the rows and the fetch's places. */
static size_t
sample_piece_bytes(const gbml_dataset *ds, int64_t m)
{
	return (size_t) sample_piece_rows(ds, m) * ((size_t) ds->n_features * sizeof(float) + GBML_STORE_FETCH_ROW_BYTES);
}

/*
 * The sample's features f0 .. f0 + fb as columns: colbuf[j * m + i] is
 * feature f0 + j of sample row i.  Stored rows are fetched a piece at a
 * time from the store (addr: its addresses), so the sample is never held
 * twice (as rows and as columns); each piece is a read of the files, so
 * progress and cancel go between pieces (fetched: the pieces fetched by
 * earlier batches, of fetch_total in all).
 */
static int
sample_columns(const gbml_dataset *ds, const float **sample, const int64_t *addr, int64_t m, int64_t f0,
			   int64_t fb, float *colbuf, int64_t fetched, int64_t fetch_total, gbml_env *env)
{
	size_t		d = (size_t) ds->n_features;
	int64_t		piece = sample_piece_rows(ds, m);
	float	   *rows;

	if (addr == NULL)
	{
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < fb; j++)
				colbuf[j * m + i] = sample[i][f0 + j];
		return GBML_OK;
	}
	if ((rows = gbml_alloc_array(env, (size_t) piece * d, sizeof(float))) == NULL)
		return env->error_code;
	for (int64_t i0 = 0; i0 < m; i0 += piece)
	{
		int64_t		k = m - i0 < piece ? m - i0 : piece;
		int			rc = ds->store->fetch(ds->store, addr + i0, k, rows) != 0 ?
			gbml_dataset_store_error(ds, env, "fetching the border sample") :
			sample_progress(env, fetched + i0 / piece + 1, fetch_total);

		if (rc != GBML_OK)
		{
			gbml_free(env, rows);
			return rc;
		}
		for (int64_t i = 0; i < k; i++)
			for (int64_t j = 0; j < fb; j++)
				colbuf[j * m + i0 + i] = rows[(size_t) i * d + (size_t) (f0 + j)];
	}
	gbml_free(env, rows);
	return GBML_OK;
}

/*
 * The borders being chosen: per feature at most border_count + 1 values
 * (the missing one first) in `chosen`, then counted and packed into out.
 */
typedef struct border_choice
{
	gbml_boost_borders *out;
	int			d;
	int			border_count;
	gbml_boost_border_type type;
	int64_t		stride;
	float	   *chosen;
} border_choice;

static int
choice_begin(border_choice *bc, gbml_boost_borders *out, int d, int border_count, gbml_boost_border_type type,
			 gbml_env *env)
{
	memset(out, 0, sizeof(*out));
	bc->out = out;
	bc->type = type;
	bc->d = d;
	bc->border_count = border_count > GBML_BOOST_MAX_BORDERS ? GBML_BOOST_MAX_BORDERS : border_count;
	bc->stride = bc->border_count + 1;
	out->count = gbml_alloc0(env, sizeof(int) * (size_t) d);
	out->offset = gbml_alloc0(env, sizeof(int64_t) * ((size_t) d + 1));
	out->has_missing = gbml_alloc0(env, sizeof(bool) * (size_t) d);
	bc->chosen = gbml_alloc_array(env, (size_t) (d > 0 ? d : 1) * (size_t) bc->stride, sizeof(float));
	return out->count && out->offset && out->has_missing && bc->chosen ? GBML_OK : env->error_code;
}

/*
 * Features f0 .. f0 + fb's borders from their sample columns (colbuf[j * m
 * + i]: feature f0 + j of sample row i): each column's finite values
 * sorted, then choose_borders.  scratch: threads * 2 * m keys.
 */
static void
choice_batch(border_choice *bc, const float *colbuf, int64_t m, int64_t f0, int64_t fb, uint32_t *scratch,
			 int threads)
{
	gbml_boost_borders *out = bc->out;

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (int64_t j = 0; j < fb; j++)
	{
		int			t = 0;
		uint32_t   *keys,
				   *tmp;
		const float *col = colbuf + j * m;
		int64_t		mf = 0;
		int64_t		f = f0 + j;
		int			extra = out->has_missing[f] ? 1 : 0;
		int			cap = bc->border_count;
		float	   *dst = bc->chosen + f * bc->stride;

#ifdef _OPENMP
		t = omp_get_thread_num();
#endif
		keys = scratch + (size_t) t * 2 * (size_t) m;
		tmp = keys + m;
		for (int64_t i = 0; i < m; i++)
			if (isfinite(col[i]))
				keys[mf++] = float_key(col[i]);
		radix_sort_u32(keys, tmp, mf);
		if (cap > GBML_BOOST_MAX_BORDERS - extra)
			cap = GBML_BOOST_MAX_BORDERS - extra;
		if (extra)
			dst[0] = -INFINITY;
		out->count[f] = extra + choose_borders(keys, mf, cap, bc->type, tmp, dst + extra);
	}
}

/* The chosen borders packed into out (freed on failure). */
static int
choice_finish(border_choice *bc, int rc, gbml_env *env)
{
	gbml_boost_borders *out = bc->out;
	int			d = bc->d;

	if (rc == GBML_OK)
	{
		for (int f = 0; f < d; f++)
			out->offset[f + 1] = out->offset[f] + out->count[f];
		out->values = gbml_alloc_array(env, (size_t) (out->offset[d] > 0 ? out->offset[d] : 1), sizeof(float));
		if (out->values == NULL)
			rc = env->error_code;
	}
	for (int f = 0; rc == GBML_OK && f < d; f++)
		memcpy(out->values + out->offset[f], bc->chosen + (size_t) f * (size_t) bc->stride,
			   sizeof(float) * out->count[f]);
	gbml_free(env, bc->chosen);
	bc->chosen = NULL;
	if (rc != GBML_OK)
		gbml_boost_borders_free(out, env);
	return rc;
}

/*
 * The border sample's memory past what is in use: batch of its columns,
 * threads' sort scratch, with stored rows a piece of them fetched (and the
 * fetch's places), and `beside` bytes more.  Past the budget, an ERROR
 * that names the step.
 */
static int
check_sample_budget(const gbml_dataset *ds, int64_t m, int64_t batch, int threads, size_t beside, gbml_env *env)
{
	size_t		rows = (size_t) (m > 0 ? m : 1);
	size_t		piece = ds->store ? sample_piece_bytes(ds, m) : 0;

	return gbml_budget_check(env, beside + (size_t) batch * rows * sizeof(float) +
							 (size_t) threads * 2 * rows * sizeof(uint32_t) + piece,
							 "choosing borders from a sample of %lld rows (%s%lld of its columns at a time, %d "
							 "threads' sort scratch%s)", (long long) m, beside ? "their places, " : "",
							 (long long) batch, threads,
							 ds->store ? " and a piece of its rows read back from temporary files" : "");
}

int
gbml_boost_borders_build(const gbml_dataset *ds, int border_count, gbml_boost_border_type type,
						 int64_t sample_size, uint64_t seed, gbml_boost_borders *out, gbml_env *env)
{
	int			d = ds->n_features;
	int64_t		n = ds->n_rows;
	int64_t		m = n < sample_size ? n : sample_size;
	const float **sample = NULL;
	int64_t    *addr = NULL;
	float	   *colbuf = NULL;
	uint32_t   *scratch = NULL;
	int			threads = env->threads;
	int64_t		batch,
				batches,
				pieces;
	border_choice bc;
	int			rc;

	if ((rc = choice_begin(&bc, out, d, border_count, type, env)) != GBML_OK)
		goto done;
	/* before the draw: its rows' places and addresses (8 + 8 bytes a row), and a column's sorts after */
	if ((rc = check_sample_budget(ds, m, 1, threads, (size_t) (m > 0 ? m : 1) * 2 * sizeof(int64_t), env)) != GBML_OK)
		goto done;
	if (ds->store)
		addr = gbml_alloc_array(env, (size_t) (m > 0 ? m : 1), sizeof(int64_t));
	else
		sample = gbml_alloc_array(env, (size_t) (m > 0 ? m : 1), sizeof(float *));
	if (!sample && !addr)
	{
		rc = env->error_code;
		goto done;
	}
	if ((rc = gbml_boost_scan_missing(ds, out->has_missing, env)) != GBML_OK)
		goto done;
	if ((m = draw_sample(ds, m, seed, sample, addr, env)) < 0)
	{
		rc = env->error_code;
		goto done;
	}

	/*
	 * Host rows are transposed a batch of features at a time; stored rows
	 * all at once, in one pass over the files (the columns take what the
	 * fetched rows would have).
	 */
	batch = (int64_t) (SAMPLE_BATCH_BYTES / ((size_t) (m > 0 ? m : 1) * sizeof(float)));
	if (addr)
	{
		/*
		 * All at once unless the budget is small: then a batch takes half
		 * of what is free, and each batch fetches the sample rows again.
		 */
		size_t		column = (size_t) (m > 0 ? m : 1) * sizeof(float);
		size_t		sort_room = (size_t) threads * 2 * column + sample_piece_bytes(ds, m);

		batch = d;
		if (env->memory_limit > 0)
		{
			size_t		free_bytes = env->memory_limit > env->memory_used + sort_room ?
				env->memory_limit - env->memory_used - sort_room : 0;

			if ((size_t) batch * column > free_bytes / 2)
				batch = (int64_t) (free_bytes / 2 / column);
		}
	}
	if (batch < 1)
		batch = 1;
	if (batch > d)
		batch = d;
	/* what the sample's sorts hold whatever the batch (a column at least): past the budget, say so */
	if ((rc = check_sample_budget(ds, m, batch, threads, 0, env)) != GBML_OK)
		goto done;
	colbuf = gbml_alloc_array(env, (size_t) batch * (size_t) m, sizeof(float));
	scratch = gbml_alloc_array(env, (size_t) threads * 2 * (size_t) (m > 0 ? m : 1), sizeof(uint32_t));
	if (colbuf == NULL || scratch == NULL)
	{
		rc = env->error_code;
		goto done;
	}

	/* progress in pieces fetched, batch after batch (one a batch for host rows) */
	batches = (d + batch - 1) / batch;
	pieces = addr ? (m + sample_piece_rows(ds, m) - 1) / sample_piece_rows(ds, m) : 1;
	for (int64_t f0 = 0; f0 < d; f0 += batch)
	{
		int64_t		fb = d - f0 < batch ? d - f0 : batch;

		if ((rc = sample_columns(ds, sample, addr, m, f0, fb, colbuf, f0 / batch * pieces, batches * pieces, env)) !=
			GBML_OK)
			goto done;
		choice_batch(&bc, colbuf, m, f0, fb, scratch, threads);
		/* a batch's sorts take a while too: a cancel is seen before the next */
		if ((rc = sample_progress(env, (f0 / batch + 1) * pieces, batches * pieces)) != GBML_OK)
			goto done;
	}

done:
	gbml_free(env, sample);
	gbml_free(env, addr);
	gbml_free(env, colbuf);
	gbml_free(env, scratch);
	return choice_finish(&bc, rc, env);
}

/* Columns of an m-row sample sorted in one batch: within SAMPLE_BATCH_BYTES, at least one, at most d. */
static int64_t
sample_batch_columns(int64_t m, int d)
{
	int64_t		batch = (int64_t) (SAMPLE_BATCH_BYTES / ((size_t) (m > 0 ? m : 1) * sizeof(float)));

	return batch < 1 ? 1 : batch > d ? d : batch;
}

size_t
gbml_boost_borders_work_bytes(int64_t m, int d, int threads)
{
	size_t		rows = (size_t) (m > 0 ? m : 1);

	return rows * (size_t) sample_batch_columns(m, d) * sizeof(float) + (size_t) threads * 2 * rows * sizeof(uint32_t);
}

int
gbml_boost_borders_from_sample(const float *rows, int64_t m, int d, const bool *has_missing, int border_count,
							   gbml_boost_border_type type, gbml_boost_borders *out, gbml_env *env)
{
	int64_t		batch = sample_batch_columns(m, d);
	float	   *colbuf = NULL;
	uint32_t   *scratch = NULL;
	border_choice bc;
	int			rc;

	if ((rc = choice_begin(&bc, out, d, border_count, type, env)) != GBML_OK)
		goto done;
	memcpy(out->has_missing, has_missing, sizeof(bool) * (size_t) d);
	colbuf = gbml_alloc_array(env, (size_t) (batch > 0 ? batch : 1) * (size_t) (m > 0 ? m : 1), sizeof(float));
	scratch = gbml_alloc_array(env, (size_t) env->threads * 2 * (size_t) (m > 0 ? m : 1), sizeof(uint32_t));
	if (colbuf == NULL || scratch == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	for (int64_t f0 = 0; f0 < d; f0 += batch)
	{
		int64_t		fb = d - f0 < batch ? d - f0 : batch;

		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < fb; j++)
				colbuf[j * m + i] = rows[(size_t) i * (size_t) d + (size_t) (f0 + j)];
		choice_batch(&bc, colbuf, m, f0, fb, scratch, env->threads);
	}
done:
	gbml_free(env, colbuf);
	gbml_free(env, scratch);
	return choice_finish(&bc, rc, env);
}

void
gbml_boost_bins_free(gbml_boost_bins *b, gbml_env *env)
{
	gbml_boost_bins_reader_free(b, env);
	gbml_temp_close(env, &b->file);
	gbml_free(env, b->limit);
	if (b->blocks)
		for (int64_t i = 0; i < b->n_blocks; i++)
			gbml_free(env, b->blocks[i]);
	gbml_free(env, b->blocks);
	memset(b, 0, sizeof(*b));
}

/*
 * Bins of one feature for a tile of rows by counting the borders below each
 * value: a vector compare-and-add per border over the whole tile, cheaper than
 * a search per value while the feature has few borders (the default 32).
 */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void
count_bins(const float *xv, int nr, const float *borders, int nb, uint8_t *out)
{
	int32_t		c[BIN_TILE];

	for (int r = 0; r < BIN_TILE; r++)
		c[r] = 0;
	for (int j = 0; j < nb; j++)
	{
		float		b = borders[j];

		for (int r = 0; r < BIN_TILE; r++)
			c[r] += xv[r] > b;
	}
	for (int r = 0; r < nr; r++)
		out[r] = (uint8_t) c[r];
}

/*
 * Branch-free bin lookup in a table padded to a power of two with +Inf
 * (x > +Inf is false, so padding never counts): log2(P) compare-and-adds.
 */
static inline int
padded_bin(const float *pad, int half, float x)
{
	int			pos = 0;

	for (int step = half; step > 0; step >>= 1)
		pos += (x > pad[pos + step - 1]) ? step : 0;
	return pos;
}

void
gbml_boost_binner_free(gbml_boost_binner *bz, gbml_env *env)
{
	gbml_free(env, bz->pad);
	gbml_free(env, bz->half);
	memset(bz, 0, sizeof(*bz));
}

int
gbml_boost_binner_init(gbml_boost_binner *bz, const gbml_boost_borders *borders, int n_features, gbml_env *env)
{
	memset(bz, 0, sizeof(*bz));
	bz->n_features = n_features;
	bz->count = borders->count;
	bz->pad = gbml_alloc_array(env, (size_t) (n_features > 0 ? n_features : 1) * 256, sizeof(float));
	bz->half = gbml_alloc_array(env, (size_t) (n_features > 0 ? n_features : 1), sizeof(int));
	if (bz->pad == NULL || bz->half == NULL)
	{
		gbml_boost_binner_free(bz, env);
		return env->error_code;
	}
	for (int f = 0; f < n_features; f++)
	{
		int			cnt = borders->count[f];
		int			p = 1;
		float	   *t = bz->pad + (size_t) f * 256;

		while (p < cnt + 1)
			p <<= 1;
		for (int j = 0; j < p - 1; j++)
			t[j] = j < cnt ? borders->values[borders->offset[f] + j] : INFINITY;
		bz->half[f] = p >> 1;
	}
	return GBML_OK;
}

/* out's shape for n_rows rows: every block pointer NULL, no file. */
static int
bins_shape(gbml_boost_bins *out, int64_t n_rows, int n_features, int64_t block_rows, gbml_env *env)
{
	memset(out, 0, sizeof(*out));
	out->file.fd = -1;
	out->n_rows = n_rows;
	out->n_features = n_features;
	out->block_rows = block_rows;
	out->n_blocks = (n_rows + block_rows - 1) / block_rows;
	out->blocks = gbml_alloc0(env, sizeof(uint8_t *) * (size_t) (out->n_blocks > 0 ? out->n_blocks : 1));
	return out->blocks ? GBML_OK : env->error_code;
}

int
gbml_boost_bins_alloc(gbml_boost_bins *out, int64_t n_rows, int n_features, int64_t block_rows, gbml_env *env)
{
	if (bins_shape(out, n_rows, n_features, block_rows, env) != GBML_OK)
		return env->error_code;
	for (int64_t b = 0; b < out->n_blocks; b++)
		if ((out->blocks[b] = gbml_alloc_array(env, (size_t) gbml_boost_block_len(out, b),
											   (size_t) (n_features > 0 ? n_features : 1))) == NULL)
		{
			gbml_boost_bins_free(out, env);
			return env->error_code;
		}
	return GBML_OK;
}

/*
 * Bins rows[0..m) into one block (dst, len rows, its first position
 * `start`): row i at position p + i, or pos[i] (then scattered through a
 * tile buffer).  Tiles of BIN_TILE rows, every feature per tile, so the
 * tile's rows stay in L1.
 */
static void
bin_run(uint8_t *dst, int64_t len, int64_t start, const gbml_boost_binner *bz, const float *const *rows,
		const int64_t *pos, int64_t p, int64_t m)
{
	for (int64_t i0 = 0; i0 < m; i0 += BIN_TILE)
	{
		int			nr = (int) (m - i0 < BIN_TILE ? m - i0 : BIN_TILE);

		for (int f = 0; f < bz->n_features; f++)
		{
			const float *t = bz->pad + (size_t) f * 256;
			int			cnt = bz->count[f],
						h = bz->half[f];	/* locals: the byte stores below may alias bz's arrays */
			uint8_t    *col = dst + (size_t) f * (size_t) len;
			uint8_t		tile[BIN_TILE];
			uint8_t    *out = pos ? tile : col + (p - start) + i0;

			if (cnt <= COUNT_BINS_MAX)
			{
				float		xv[BIN_TILE];

				for (int r = 0; r < nr; r++)
					xv[r] = rows[i0 + r][f];
				for (int r = nr; r < BIN_TILE; r++)
					xv[r] = 0;
				count_bins(xv, nr, t, cnt, out);
			}
			else
				for (int r = 0; r < nr; r++)
					out[r] = (uint8_t) padded_bin(t, h, rows[i0 + r][f]);
			if (pos)
				for (int r = 0; r < nr; r++)
					col[pos[i0 + r] - start] = tile[r];
		}
	}
}

/*
 * Rows per task of a fill: small enough that one chunk's rows keep every
 * thread busy, a multiple of BIN_TILE, and a divisor of the trainer's block
 * (8192), so a fill from position 0 (host rows) never cuts a piece in two.
 */
#define FILL_PIECE 1024

void
gbml_boost_bins_fill(gbml_boost_bins *bins, const gbml_boost_binner *bz, const float *const *rows,
					 const int64_t *pos, int64_t p0, int64_t m, int threads)
{
	int64_t		pieces = (m + FILL_PIECE - 1) / FILL_PIECE;

	/*
	 * A piece of rows may cross a block boundary: it is cut into runs that
	 * stay in one block (with pos, runs of positions in the same block).
	 */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (int64_t k = 0; k < pieces; k++)
	{
		int64_t		i = k * FILL_PIECE,
					end = i + FILL_PIECE < m ? i + FILL_PIECE : m;

		while (i < end)
		{
			int64_t		at = pos ? pos[i] : p0 + i;
			int64_t		b = at / bins->block_rows;
			int64_t		start = b * bins->block_rows;
			int64_t		len = gbml_boost_block_len(bins, b);
			int64_t		j = i + 1;

			if (pos)
				while (j < end && pos[j] < start + len)
					j++;
			else
				j = end < i + (start + len - at) ? end : i + (start + len - at);
			bin_run(bins->blocks[b], len, start, bz, rows + i, pos ? pos + i : NULL, at, j - i);
			i = j;
		}
	}
}

int
gbml_boost_bins_build(const float *const *rows, int64_t n_rows, int n_features,
					  const gbml_boost_borders *borders, int64_t block_rows,
					  gbml_boost_bins *out, gbml_env *env)
{
	gbml_boost_binner bz;
	int			rc;

	if ((rc = gbml_boost_binner_init(&bz, borders, n_features, env)) != GBML_OK)
		return rc;
	if ((rc = gbml_boost_bins_alloc(out, n_rows, n_features, block_rows, env)) == GBML_OK)
		gbml_boost_bins_fill(out, &bz, rows, NULL, 0, n_rows, env->threads);
	gbml_boost_binner_free(&bz, env);
	return rc;
}

/*
 * Per chunk, the training positions of its rows, ascending: chunk c's are
 * pos[off[c] .. off[c + 1]) (a counting sort of src by chunk).
 */
static int
positions_by_chunk(const gbml_dataset *ds, const int64_t *src, int64_t n, int64_t **off_out, int64_t **pos_out,
				   gbml_env *env)
{
	int64_t    *off = gbml_alloc0(env, sizeof(int64_t) * ((size_t) ds->n_chunks + 1));
	int64_t    *pos = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(int64_t));

	*off_out = off;
	*pos_out = pos;
	if (off == NULL || pos == NULL)
		return env->error_code;
	for (int64_t i = 0; i < n; i++)
		off[(src[i] >> 32) + 1]++;
	for (int c = 0; c < ds->n_chunks; c++)
		off[c + 1] += off[c];
	/* off[c] walks chunk c's slots, ending where chunk c + 1's start; then shifted back */
	for (int64_t i = 0; i < n; i++)
		pos[off[src[i] >> 32]++] = i;
	for (int c = ds->n_chunks; c > 0; c--)
		off[c] = off[c - 1];
	off[0] = 0;
	return GBML_OK;
}

/* Copies keep's columns of rows ptr[0..m) (at positions pos[i], or p0 + i) out. */
static void
keep_columns(const gbml_boost_keep *keep, const float *const *ptr, const int64_t *pos, int64_t p0, int64_t m)
{
	if (keep == NULL)
		return;
	for (int k = 0; k < keep->n; k++)
	{
		float	   *out = keep->out + (size_t) k * (size_t) keep->n_rows;
		int			c = keep->col[k];

		for (int64_t i = 0; i < m; i++)
			out[pos ? pos[i] : p0 + i] = ptr[i][c];
	}
}

void
gbml_boost_keep_rows(const gbml_boost_keep *keep, const float *const *rows, int64_t n)
{
	keep_columns(keep, rows, NULL, 0, n);
}

/* The first of the ascending pos[lo .. hi) at or past p (hi: none). */
static int64_t
first_at_or_past(const int64_t *pos, int64_t lo, int64_t hi, int64_t p)
{
	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (pos[mid] < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Bins one chunk's rows x (rows of them, chunk `index`) into their training
 * positions, those in the window [w0, w1) only.
 */
static void
fill_chunk(gbml_boost_bins *out, const gbml_boost_binner *bz, const float *x, int64_t rows, int index,
		   const int64_t *src, const int64_t *off, const int64_t *pos, int64_t p0, const float **ptr,
		   const gbml_boost_keep *keep, int threads, int64_t w0, int64_t w1)
{
	size_t		d = (size_t) bz->n_features;
	int64_t		k0,
				k1;

	if (src == NULL)
	{
		/* chunk order is training order: the chunk is the positions p0 .. p0 + rows */
		int64_t		a = p0 > w0 ? p0 : w0,
					b = p0 + rows < w1 ? p0 + rows : w1;

		for (int64_t p = a; p < b; p++)
			ptr[p - a] = x + (size_t) (p - p0) * d;
		if (b > a)
		{
			gbml_boost_bins_fill(out, bz, ptr, NULL, a, b - a, threads);
			keep_columns(keep, ptr, NULL, a, b - a);
		}
		return;
	}
	/* its rows in the order of their positions, scattered into the blocks */
	k0 = first_at_or_past(pos, off[index], off[index + 1], w0);
	k1 = first_at_or_past(pos, k0, off[index + 1], w1);
	for (int64_t k = k0; k < k1; k++)
		ptr[k - k0] = x + (size_t) (src[pos[k]] & 0xffffffffLL) * d;
	gbml_boost_bins_fill(out, bz, ptr, pos + k0, 0, k1 - k0, threads);
	keep_columns(keep, ptr, pos + k0, 0, k1 - k0);
}

/*
 * Reads every chunk through the reader and bins its rows of the window
 * [w0, w1) (fill_chunk); progress and cancel between chunks.
 */
static int
fill_from_reader(const gbml_dataset *ds, const int64_t *src, const int64_t *off, const int64_t *pos,
				 const gbml_boost_binner *bz, const float **ptr, const gbml_boost_keep *keep,
				 gbml_boost_bins *out, const char *phase, gbml_env *env, int64_t w0, int64_t w1)
{
	gbml_chunk_prefetch *p = gbml_chunk_prefetch_open(ds, env);
	const float *x;
	int64_t		rows,
				p0 = 0;
	int			index,
				rc;

	if (p == NULL)
		return env->error_code;
	while ((rc = gbml_chunk_prefetch_next(p, &x, &rows, &index)) == 1)
	{
		gbml_progress_info info = {phase, index + 1, ds->n_chunks, NULL, 0};

		fill_chunk(out, bz, x, rows, index, src, off, pos, p0, ptr, keep, env->threads, w0, w1);
		p0 += rows;
		if (gbml_progress(env, &info))
		{
			rc = gbml_error(env, GBML_ECANCELLED, "canceled");
			break;
		}
	}
	gbml_chunk_prefetch_close(p);
	return rc < 0 ? rc : GBML_OK;
}

static int	bins_scattered(const gbml_dataset *ds, const int64_t *src, int64_t n,
						   const gbml_boost_borders *borders, int64_t block_rows, const gbml_boost_keep *keep,
						   size_t window_bytes, const char *phase, gbml_boost_bins *out, gbml_env *env);

/*
 * Rows reached through a map (dataset.h: stored_addr): the store's chunks
 * are read in the order they were written, each row binned into its
 * training position (src's, or the dataset's own order).
 */
static int
bins_through_map(const gbml_dataset *ds, const int64_t *src, const gbml_boost_borders *borders,
				 int64_t block_rows, const gbml_boost_keep *keep, size_t window_bytes, const char *phase,
				 gbml_boost_bins *out, gbml_env *env)
{
	gbml_dataset view;
	int64_t    *at = NULL;
	int			rc;

	if (src != NULL)
	{
		/* training position i: the row src[i] of ds, where the map says it is */
		if ((at = gbml_alloc_array(env, (size_t) (ds->n_rows > 0 ? ds->n_rows : 1), sizeof(int64_t))) == NULL ||
			gbml_dataset_store_addresses(ds, src, ds->n_rows, at, env) != GBML_OK)
		{
			gbml_free(env, at);
			return env->error_code;
		}
	}
	if ((rc = gbml_dataset_stored_view(ds, &view, env)) == GBML_OK)
	{
		rc = bins_scattered(&view, at ? at : ds->stored_addr, ds->n_rows, borders, block_rows, keep, window_bytes,
							phase, out, env);
		gbml_dataset_stored_view_free(&view, env);
	}
	gbml_free(env, at);
	return rc;
}

int
gbml_boost_bins_from_chunks(const gbml_dataset *ds, const int64_t *src, const gbml_boost_borders *borders,
							int64_t block_rows, const gbml_boost_keep *keep, size_t window_bytes,
							const char *phase, gbml_boost_bins *out, gbml_env *env)
{
	if (ds->stored_addr)
		return bins_through_map(ds, src, borders, block_rows, keep, window_bytes, phase, out, env);
	return bins_scattered(ds, src, ds->n_rows, borders, block_rows, keep, window_bytes, phase, out, env);
}

/*
 * The bins into a temporary file, a window of whole blocks at a time: the
 * window's blocks are made from one more read of every chunk (each row
 * binned once, into the one window holding its position), written, freed.
 */
static int
fill_windows_to_file(const gbml_dataset *ds, const int64_t *src, const int64_t *off, const int64_t *pos,
					 const gbml_boost_binner *bz, const float **ptr, size_t window_bytes, const char *phase,
					 gbml_boost_bins *out, gbml_env *env)
{
	size_t		block_bytes = (size_t) out->block_rows * (size_t) (out->n_features > 0 ? out->n_features : 1);
	int64_t		per_window = (int64_t) (window_bytes / block_bytes);
	int			rc;

	if (per_window < 1)
		per_window = 1;
	/* what every read back checks: no bin past its feature's borders (a damaged file is an error, not a stray index) */
	if ((out->limit = gbml_alloc_array(env, (size_t) (out->n_features > 0 ? out->n_features : 1), 1)) == NULL)
		return env->error_code;
	for (int f = 0; f < out->n_features; f++)
		out->limit[f] = (uint8_t) bz->count[f];
	if ((rc = gbml_temp_create(env, &out->file)) != GBML_OK)
		return rc;
	out->stored = true;
	for (int64_t b0 = 0; b0 < out->n_blocks; b0 += per_window)
	{
		int64_t		b1 = b0 + per_window < out->n_blocks ? b0 + per_window : out->n_blocks;

		for (int64_t b = b0; b < b1; b++)
			if ((out->blocks[b] = gbml_alloc_array(env, (size_t) gbml_boost_block_len(out, b),
												   (size_t) (out->n_features > 0 ? out->n_features : 1))) == NULL)
				return env->error_code;
		if ((rc = fill_from_reader(ds, src, off, pos, bz, ptr, NULL, out, phase, env, b0 * out->block_rows,
								   b1 * out->block_rows < out->n_rows ? b1 * out->block_rows : out->n_rows)) != GBML_OK)
			return rc;
		for (int64_t b = b0; b < b1; b++)
		{
			size_t		len = (size_t) gbml_boost_block_len(out, b) * (size_t) out->n_features;

			if ((rc = gbml_temp_write(env, &out->file, out->blocks[b], len, gbml_boost_block_offset(out, b))) != GBML_OK)
				return rc;
			out->bytes_written += (int64_t) len;
			gbml_free(env, out->blocks[b]);
			out->blocks[b] = NULL;
		}
	}
	return GBML_OK;
}

/* The bins of n training rows, row i at address src[i] of ds (NULL: ds's rows in order). */
static int
bins_scattered(const gbml_dataset *ds, const int64_t *src, int64_t n, const gbml_boost_borders *borders,
			   int64_t block_rows, const gbml_boost_keep *keep, size_t window_bytes, const char *phase,
			   gbml_boost_bins *out, gbml_env *env)
{
	gbml_boost_binner bz;
	int64_t    *off = NULL,
			   *pos = NULL,
				largest = 1;
	const float **ptr = NULL;
	int			rc;

	memset(out, 0, sizeof(*out));
	for (int c = 0; c < ds->n_chunks; c++)
		if (ds->chunks[c]->n_rows > largest)
			largest = ds->chunks[c]->n_rows;
	if ((rc = gbml_boost_binner_init(&bz, borders, ds->n_features, env)) != GBML_OK)
		return rc;
	if ((ptr = gbml_alloc_array(env, (size_t) largest, sizeof(float *))) == NULL ||
		(src && (rc = positions_by_chunk(ds, src, n, &off, &pos, env)) != GBML_OK))
		rc = env->error_code;
	else if (window_bytes > 0 && keep == NULL)
		rc = bins_shape(out, n, ds->n_features, block_rows, env) != GBML_OK ? env->error_code :
			fill_windows_to_file(ds, src, off, pos, &bz, ptr, window_bytes, phase, out, env);
	else if ((rc = gbml_boost_bins_alloc(out, n, ds->n_features, block_rows, env)) == GBML_OK)
		rc = fill_from_reader(ds, src, off, pos, &bz, ptr, keep, out, phase, env, 0, n);
	gbml_free(env, ptr);
	gbml_free(env, off);
	gbml_free(env, pos);
	gbml_boost_binner_free(&bz, env);
	if (rc != GBML_OK)
		gbml_boost_bins_free(out, env);
	return rc;
}

int
gbml_boost_bins_widen(gbml_boost_bins *bins, int n_from, int n_to, gbml_env *env)
{
	if (bins->stored)
		return gbml_error(env, GBML_EINVAL, "boost: bins in a temporary file cannot take more columns");
	bins->n_features = n_to;
	for (int64_t b = 0; b < bins->n_blocks; b++)
	{
		size_t		len = (size_t) gbml_boost_block_len(bins, b);
		uint8_t    *p = gbml_realloc(env, bins->blocks[b], len * (size_t) (n_to > 0 ? n_to : 1));

		if (p == NULL)
			return env->error_code;
		memset(p + len * (size_t) n_from, 0, len * (size_t) (n_to - n_from));
		bins->blocks[b] = p;
	}
	return GBML_OK;
}

void
gbml_boost_bins_fill_column(gbml_boost_bins *bins, int column, const float *values, const float *borders,
							int count, int threads)
{
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (int64_t b = 0; b < bins->n_blocks; b++)
	{
		int64_t		len = gbml_boost_block_len(bins, b);
		uint8_t    *col = bins->blocks[b] + (size_t) column * (size_t) len;
		const float *v = values + b * bins->block_rows;

		for (int64_t r = 0; r < len; r++)
			col[r] = (uint8_t) gbml_boost_bin_of(borders, count, v[r]);
	}
}

int
gbml_boost_value_borders(const float *v, int64_t m, int max_borders, gbml_boost_border_type type, float *out,
						 int *count, gbml_env *env)
{
	uint32_t   *keys = gbml_alloc_array(env, (size_t) (m > 0 ? m : 1) * 2, sizeof(uint32_t));
	int64_t		mf = 0;

	*count = 0;
	if (keys == NULL)
		return env->error_code;
	for (int64_t i = 0; i < m; i++)
		if (isfinite(v[i]))
			keys[mf++] = float_key(v[i]);
	radix_sort_u32(keys, keys + (m > 0 ? m : 1), mf);
	if (max_borders > GBML_BOOST_MAX_BORDERS)
		max_borders = GBML_BOOST_MAX_BORDERS;
	*count = choose_borders(keys, mf, max_borders, type, keys + (m > 0 ? m : 1), out);
	gbml_free(env, keys);
	return GBML_OK;
}

void
gbml_boost_borders_clear(gbml_boost_borders *b, int n, const bool *clear)
{
	int64_t		at = 0;

	/* packed in place: a feature's borders only ever move towards the front */
	for (int f = 0; f < n; f++)
	{
		int64_t		from = b->offset[f];

		if (clear[f])
		{
			b->count[f] = 0;
			b->has_missing[f] = false;
		}
		memmove(b->values + at, b->values + from, sizeof(float) * (size_t) b->count[f]);
		b->offset[f] = at;
		at += b->count[f];
	}
	b->offset[n] = at;
}

int
gbml_boost_borders_append(gbml_boost_borders *b, int n_old, int n_add, const int *count, const float *values,
						  int stride, gbml_env *env)
{
	int			n = n_old + n_add;
	int64_t		total = b->offset[n_old];
	int		   *c;
	int64_t    *off;
	bool	   *miss;
	float	   *val;

	for (int j = 0; j < n_add; j++)
		total += count[j];
	c = gbml_realloc(env, b->count, sizeof(int) * (size_t) (n > 0 ? n : 1));
	if (c == NULL)
		return env->error_code;
	b->count = c;
	off = gbml_realloc(env, b->offset, sizeof(int64_t) * ((size_t) n + 1));
	if (off == NULL)
		return env->error_code;
	b->offset = off;
	miss = gbml_realloc(env, b->has_missing, sizeof(bool) * (size_t) (n > 0 ? n : 1));
	if (miss == NULL)
		return env->error_code;
	b->has_missing = miss;
	val = gbml_realloc(env, b->values, sizeof(float) * (size_t) (total > 0 ? total : 1));
	if (val == NULL)
		return env->error_code;
	b->values = val;
	for (int j = 0; j < n_add; j++)
	{
		int			f = n_old + j;

		c[f] = count[j];
		miss[f] = false;
		memcpy(val + off[f], values + (size_t) j * (size_t) stride, sizeof(float) * (size_t) count[j]);
		off[f + 1] = off[f] + count[j];
	}
	return GBML_OK;
}
