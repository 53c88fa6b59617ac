/*
 * boost_quantize.h — turning raw float features into the small integer bins
 * the boosted-tree trainer works on (the MatrixNet seed's "forward index").
 *
 * Borders: for every feature, up to border_count split values taken from the
 * quantiles of a row sample (default up to 200,000 rows), sorted ascending.
 * A feature that has a missing value (NaN, or -Infinity) in the training data
 * gets one extra border, -Infinity, first in its list: the split "x > -Inf"
 * separates missing from present values.  The list never exceeds 255 borders.
 *
 * Bin of a value: bin(x) = #{ j : x > border[j] }.  NaN compares false with
 * everything, so it always lands in bin 0 (its own bin when the feature has
 * missing values), and a split on border j sends x right exactly when
 * x > border[j] — the comparison the scorer does on raw floats.  Training and
 * scoring agree by construction, bit for bit.
 *
 * Bins are stored feature-major (uint8) per block of rows: block b holds
 * rows [b*block_rows, ...) and bins[f * rows_in_block + r], so one feature's
 * column of a block is contiguous — what the histogram kernel streams.
 * They are filled a run of rows at a time into their training positions,
 * from host rows or chunk by chunk from rows a chunk store holds (temporary
 * files): the bins of a row depend on it alone, so both give the same bytes.
 */
#ifndef GBML_BOOST_QUANTIZE_H
#define GBML_BOOST_QUANTIZE_H

#include "env.h"
#include "dataset.h"

#define GBML_BOOST_MAX_BORDERS 255

/*
 * How a feature's borders are chosen when it has more distinct values than
 * borders (the index of the `border_type` parameter's choice).
 */
typedef enum gbml_boost_border_type
{
	GBML_BORDER_MEDIAN = 0,		/* quantiles of the sample, moved to the edge of a run of ties */
	GBML_BORDER_GREEDY_LOGSUM = 1	/* CatBoost's GreedyLogSum: greedy splits maximising sum(log(bin size)) */
} gbml_boost_border_type;

typedef struct gbml_boost_borders
{
	int		   *count;			/* borders of feature f: 0..255 */
	int64_t    *offset;			/* n_features + 1: feature f's borders are values[offset[f] .. offset[f+1]) */
	float	   *values;			/* ascending per feature; -INFINITY first when the feature has missing values */
	bool	   *has_missing;	/* the training data had NaN / -Inf in the feature */
} gbml_boost_borders;

/*
 * Computes borders from a sample of ds (deterministic in `seed`): at most
 * border_count borders per feature chosen by `type` (plus the missing
 * border), sample_size rows at most (all rows when there are fewer).
 */
int			gbml_boost_borders_build(const gbml_dataset *ds, int border_count, gbml_boost_border_type type,
									 int64_t sample_size, uint64_t seed, gbml_boost_borders *out, gbml_env *env);
/* Per-feature "has a missing value" flags over every row of ds (NaN or -Inf). */
int			gbml_boost_scan_missing(const gbml_dataset *ds, bool *has_missing, gbml_env *env);

/*
 * Selection sampling (Knuth's algorithm S) of min(m, n) positions among
 * 0 .. n-1, ascending, into pos: the canonical positions of the border
 * sample, which depend on n, m and the seed only.  Returns the count.
 */
int64_t		gbml_boost_sample_positions(int64_t n, int64_t m, uint64_t seed, int64_t *pos);

/*
 * Borders from a sample already gathered: rows[i * d + f] is feature f of
 * sample row i (any order: a feature's borders depend on its sorted
 * values only), has_missing[d] the whole data's flags.  The same borders
 * gbml_boost_borders_build chooses from the same sample (a coordinator's,
 * from its shards' rows).
 */
/* The work space gbml_boost_borders_from_sample takes beside its m x d sample (a batch of columns, the sort's). */
size_t		gbml_boost_borders_work_bytes(int64_t m, int d, int threads);
int			gbml_boost_borders_from_sample(const float *rows, int64_t m, int d, const bool *has_missing,
										   int border_count, gbml_boost_border_type type,
										   gbml_boost_borders *out, gbml_env *env);
void		gbml_boost_borders_free(gbml_boost_borders *b, gbml_env *env);

/* bin(x) = #{ j : x > borders[j] } for sorted borders (count <= 255). */
static inline int
gbml_boost_bin_of(const float *borders, int count, float x)
{
	int			lo = 0,
				hi = count;		/* answer in [lo, hi] */

	while (lo < hi)
	{
		int			mid = (lo + hi) >> 1;

		if (x > borders[mid])
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

typedef struct gbml_boost_bins
{
	int64_t		n_rows;
	int64_t		block_rows;		/* rows per block (the last block may be shorter) */
	int64_t		n_blocks;
	uint8_t   **blocks;			/* block b: n_features * rows_in_block(b) bytes, feature-major */
	int			n_features;
	/*
	 * Bins past the memory budget (gbml_boost_bins_from_chunks with a
	 * window): every block is in this temporary file, block b at
	 * gbml_boost_block_offset(b), and blocks[] is NULL; passes reach them
	 * through gbml_boost_bins_walk (boost_bins_walk.h).
	 */
	bool		stored;
	uint8_t    *limit;			/* stored: per feature, its largest bin (its border count): what a read checks */
	gbml_temp_file file;
	int64_t		bytes_written;
	int64_t		bytes_read;
	struct gbml_boost_bins_reader *reader;	/* the walk's buffers, kept between passes */
} gbml_boost_bins;

/* Where block b starts in a stored bins' file. */
static inline uint64_t
gbml_boost_block_offset(const gbml_boost_bins *b, int64_t block)
{
	return (uint64_t) block * (uint64_t) b->block_rows * (uint64_t) b->n_features;
}

static inline int64_t
gbml_boost_block_len(const gbml_boost_bins *b, int64_t block)
{
	int64_t		start = block * b->block_rows;
	int64_t		len = b->n_rows - start;

	return len < b->block_rows ? len : b->block_rows;
}

/*
 * What binning needs of the borders, ready for the search: each feature's
 * borders padded with +Inf to a power of two (a branch-free lookup).
 */
typedef struct gbml_boost_binner
{
	int			n_features;
	const int  *count;			/* the borders' own count array */
	float	   *pad;			/* n_features * 256 */
	int		   *half;			/* n_features: half the padded length */
} gbml_boost_binner;

int			gbml_boost_binner_init(gbml_boost_binner *bz, const gbml_boost_borders *borders, int n_features,
								   gbml_env *env);
void		gbml_boost_binner_free(gbml_boost_binner *bz, gbml_env *env);

/* The blocks for n_rows rows of n_features bins (not yet written). */
int			gbml_boost_bins_alloc(gbml_boost_bins *out, int64_t n_rows, int n_features, int64_t block_rows,
								  gbml_env *env);

/*
 * Bins rows[0..m) (pointers to n_features floats) into existing blocks, row
 * i at training position p0 + i, or at pos[i] when pos is not NULL (then
 * ascending).  Parallel over pieces of rows with `threads` threads; each
 * bin depends only on its row, so the bytes do not depend on how the rows
 * were cut into calls.  No allocation.
 */
void		gbml_boost_bins_fill(gbml_boost_bins *bins, const gbml_boost_binner *bz, const float *const *rows,
								 const int64_t *pos, int64_t p0, int64_t m, int threads);

/*
 * Bins the rows rows[0..n_rows) (pointers to n_features floats each, in
 * training order) into feature-major blocks of block_rows rows: alloc, then
 * fill.  Parallel with env->threads.
 */
int			gbml_boost_bins_build(const float *const *rows, int64_t n_rows, int n_features,
								  const gbml_boost_borders *borders, int64_t block_rows,
								  gbml_boost_bins *out, gbml_env *env);

/*
 * Raw columns copied out while rows are binned (a categorical feature's
 * ids, which its bins do not keep): column col[k] of the row at training
 * position i goes to out[k * n_rows + i].
 */
typedef struct gbml_boost_keep
{
	int			n;
	const int  *col;
	float	   *out;
	int64_t		n_rows;
} gbml_boost_keep;

/*
 * The same for a dataset whose rows are read chunk by chunk through the
 * reader (chunk_prefetch.h), wherever the chunks live: training position i
 * holds the row at address src[i] (chunk << 32 | row), or with src NULL the
 * rows in chunk order.  A dataset whose stored rows are reached through a
 * map (dataset.h: stored_addr) is read in the store's own chunks, each row
 * binned into its position.  Each chunk's rows are binned while the next
 * chunk is read, and keep's columns (keep may be NULL) copied out; progress
 * (`phase`, one iteration a chunk) and cancel between chunks.  On failure
 * out holds nothing.
 *
 * window_bytes > 0 (and no keep): the bins go to a temporary file instead
 * (out->stored), made a window of about that many bytes of whole blocks at
 * a time, each window from one more read of every chunk: the host holds one
 * window of bins, not all of them.
 */
int			gbml_boost_bins_from_chunks(const gbml_dataset *ds, const int64_t *src,
										const gbml_boost_borders *borders, int64_t block_rows,
										const gbml_boost_keep *keep, size_t window_bytes,
										const char *phase, gbml_boost_bins *out, gbml_env *env);
void		gbml_boost_bins_free(gbml_boost_bins *b, gbml_env *env);

/* Copies keep's columns of host rows rows[0..n) (training order) out. */
void		gbml_boost_keep_rows(const gbml_boost_keep *keep, const float *const *rows, int64_t n);

/*
 * Features made after binning (categorical ones: boost_ctr.h) join the
 * bins as extra columns: every block grows from n_from to n_to feature
 * columns (the old ones kept: blocks are feature-major), then each new
 * column is binned from a value per training position with its borders.
 */
int			gbml_boost_bins_widen(gbml_boost_bins *bins, int n_from, int n_to, gbml_env *env);
void		gbml_boost_bins_fill_column(gbml_boost_bins *bins, int column, const float *values,
										const float *borders, int count, int threads);

/*
 * Borders from values v[0..m) (finite): at most max_borders, chosen as a
 * feature's are from its sample.  *count gets how many went to out.
 */
int			gbml_boost_value_borders(const float *v, int64_t m, int max_borders, gbml_boost_border_type type,
									 float *out, int *count, gbml_env *env);

/* Takes every border away from the features f < n with clear[f] (they can never split). */
void		gbml_boost_borders_clear(gbml_boost_borders *b, int n, const bool *clear);

/*
 * Appends n_add features to b's n_old: feature j gets count[j] borders,
 * values[j * stride ..] (no missing border).
 */
int			gbml_boost_borders_append(gbml_boost_borders *b, int n_old, int n_add, const int *count,
									  const float *values, int stride, gbml_env *env);

#endif
