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
 */
#ifndef GBML_BOOST_QUANTIZE_H
#define GBML_BOOST_QUANTIZE_H

#include "env.h"
#include "dataset.h"

#define GBML_BOOST_MAX_BORDERS 255

typedef struct gbml_boost_borders
{
	int		   *count;			/* borders of feature f: 0..255 */
	int64_t    *offset;			/* n_features + 1: feature f's borders are values[offset[f] .. offset[f+1]) */
	float	   *values;			/* ascending per feature; -INFINITY first when the feature has missing values */
	bool	   *has_missing;	/* the training data had NaN / -Inf in the feature */
} gbml_boost_borders;

/*
 * Computes borders from a sample of ds (deterministic in `seed`): at most
 * border_count quantile borders per feature (plus the missing border),
 * sample_size rows at most (all rows when there are fewer).
 */
int			gbml_boost_borders_build(const gbml_dataset *ds, int border_count, int64_t sample_size,
									 uint64_t seed, gbml_boost_borders *out, gbml_env *env);
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
} gbml_boost_bins;

static inline int64_t
gbml_boost_block_len(const gbml_boost_bins *b, int64_t block)
{
	int64_t		start = block * b->block_rows;
	int64_t		len = b->n_rows - start;

	return len < b->block_rows ? len : b->block_rows;
}

/*
 * Bins the rows rows[0..n_rows) (pointers to n_features floats each, in
 * training order) into feature-major blocks of block_rows rows.  Parallel over
 * blocks with env->threads.
 */
int			gbml_boost_bins_build(const float *const *rows, int64_t n_rows, int n_features,
								  const gbml_boost_borders *borders, int64_t block_rows,
								  gbml_boost_bins *out, gbml_env *env);
void		gbml_boost_bins_free(gbml_boost_bins *b, gbml_env *env);

#endif
