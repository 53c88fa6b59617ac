/*
 * shard_msg.h — the messages between a coordinator and its shards
 * (training across servers): a bounds-checked reader and the writers.  A
 * request is its code (int64), then its fields; every value is in the
 * servers' native byte order.  A reader that runs past the end, or meets a
 * count out of range, is marked bad and reads zeros: the caller reports a
 * malformed message, never reads out of bounds or allocates from a damaged
 * count.
 */
#ifndef GBML_SHARD_MSG_H
#define GBML_SHARD_MSG_H

#include "strbuf.h"

#include <stdint.h>
#include <string.h>

typedef struct gbml_msg_reader
{
	const uint8_t *p;
	const uint8_t *end;
	bool		bad;
} gbml_msg_reader;

static inline void
gbml_msg_get(gbml_msg_reader *r, void *out, size_t n)
{
	if (r->bad || (size_t) (r->end - r->p) < n)
	{
		r->bad = true;
		memset(out, 0, n);
		return;
	}
	memcpy(out, r->p, n);
	r->p += n;
}

static inline int64_t
gbml_msg_get_i64(gbml_msg_reader *r)
{
	int64_t		v;

	gbml_msg_get(r, &v, sizeof(v));
	return v;
}

static inline double
gbml_msg_get_f64(gbml_msg_reader *r)
{
	double		v;

	gbml_msg_get(r, &v, sizeof(v));
	return v;
}

/* A count that must fit in [0, max] (a damaged message is an error, never a huge allocation). */
static inline int64_t
gbml_msg_get_count(gbml_msg_reader *r, int64_t max)
{
	int64_t		v = gbml_msg_get_i64(r);

	if (v < 0 || v > max)
	{
		r->bad = true;
		return 0;
	}
	return v;
}

static inline void
gbml_msg_put(gbml_strbuf *sb, const void *p, size_t n)
{
	gbml_sb_append(sb, p, n);
}

static inline void
gbml_msg_put_i64(gbml_strbuf *sb, int64_t v)
{
	gbml_msg_put(sb, &v, sizeof(v));
}

static inline void
gbml_msg_put_f64(gbml_strbuf *sb, double v)
{
	gbml_msg_put(sb, &v, sizeof(v));
}

/*
 * Every hello begins with: the algorithm's magic (u32), this version (u32),
 * rows and features (i64 each).  The version changes with any message's
 * layout, so servers of different gbml builds refuse each other at the
 * opening (2: boosting's gradient maxima carry the every-row maximum, and
 * random_strength's squares request; 3: Depthwise node splits in boosting's
 * split fields, a dropped tree's pending kind, MultiClass's class count and
 * base scores with the start and its term kinds; 4: boosting's eval rows in
 * its hello, eval terms and the best model's cut; 5: AUC's scores,
 * boosting's categorical requests and set splits' masks; 6: the
 * categories' counts before a K-Means or linear model's hello
 * (onehot_counts.h), the eval rows' pages carry their width; 7: a boosting
 * shard with eval rows only answers every step, and the grouped hashes'
 * pages of the training order with group ids).
 */
#define GBML_SHARD_HELLO_VERSION 7
#define GBML_SHARD_HELLO_HEAD 24

/*
 * A request every shard side that gathers its eval rows answers (whatever
 * its algorithm's own codes): i64 first, i64 count -> i64 the eval set's
 * group_state, i64 rows m (m < count: the last page), then each row's f32
 * label, i64 group, f32 weight and f32 x features — the rows eval_fraction
 * held out, in their order (gbml_shard_eval_rows_page).
 */
#define GBML_SHARD_OP_EVAL_ROWS 100

#endif
