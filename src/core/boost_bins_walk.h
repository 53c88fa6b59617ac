/*
 * boost_bins_walk.h — every pass of boosting over its bins, wherever the
 * blocks are: in host memory (one call over all blocks, one parallel
 * region, as before bins could be stored), or in a temporary file (a
 * training whose bins do not fit its memory budget): runs of whole blocks
 * read in turn into one of two buffers, the next run read on a helper
 * thread while the pass works on the current one.
 *
 * A pass's result never depends on how the blocks were cut into runs: each
 * block's work is its own, and the sums across blocks are integer sums, so
 * stored bins train to the bytes of bins in memory.
 */
#ifndef GBML_BOOST_BINS_WALK_H
#define GBML_BOOST_BINS_WALK_H

#include "boost_quantize.h"

/*
 * Works on blocks [b0, b1): block b's bins at blk[b] (n_features x its
 * length, feature-major).  Called on the caller's thread; it may open
 * parallel regions of its own.
 */
typedef void (*gbml_boost_blocks_fn) (void *arg, const uint8_t *const *blk, int64_t b0, int64_t b1);

/*
 * fn over every block in order.  Stored bins: a cancel check between runs
 * (reporting info, the caller's progress; NULL: "train"); a failed read or
 * a cancel is env's error.
 */
int			gbml_boost_bins_walk(gbml_boost_bins *bins, gbml_env *env, const gbml_progress_info *info,
								 gbml_boost_blocks_fn fn, void *arg);

/*
 * The bytes of a run (16 MB) for the unit tests, which walk a few small
 * blocks in several runs; returns the size before (0 keeps it).
 */
size_t		gbml_boost_bins_test_sizes(size_t run_bytes);

/* > 0: bins of rows in files go to a file in windows of this many bytes, whatever the budget (boost.c; unit tests only). */
extern size_t gbml_boost_bins_test_window;

/* The walk's buffers (kept between passes) go; gbml_boost_bins_free calls it. */
void		gbml_boost_bins_reader_free(gbml_boost_bins *bins, gbml_env *env);

#endif
