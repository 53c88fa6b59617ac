/*
 * kmeans_shard_msg.h — the messages between a K-Means coordinator and its
 * shards (kmeans_shards.c, kmeans_shard.c): the request codes, the hello's
 * layout, and a bounds-checked reader.  A request is its code (int64), then
 * its fields; every value is in the servers' native byte order.  A reader
 * that runs past the end, or meets a count out of range, is marked bad and
 * reads zeros: the caller reports a malformed message, never reads out of
 * bounds or allocates from a damaged count.
 */
#ifndef GBML_KMEANS_SHARD_MSG_H
#define GBML_KMEANS_SHARD_MSG_H

#include "strbuf.h"

#include <stdint.h>
#include <string.h>

#define KM_SHARD_MAGIC 0x676b6d73u	/* "gkms" */
#define KM_SHARD_VERSION 1
#define KM_SHARD_BLOCK_ROWS 4096	/* rows of a global block (k-means++'s potentials) */
#define KM_HELLO_HEAD 32		/* magic, version, rows, features, largest row norm */

typedef enum km_shard_op
{
	KM_OP_RANKS = 1,
	KM_OP_EXTENTS,
	KM_OP_GRID,
	KM_OP_FEATURE_SUMS,
	KM_OP_ROWS,
	KM_OP_KPP_START,
	KM_OP_CAND,
	KM_OP_TAKE,
	KM_OP_TERMS,
	KM_OP_RESET_LABELS,
	KM_OP_PASS,
	KM_OP_FAR,
	KM_OP_DIST_MAX,
	KM_OP_DIST_SUM
} km_shard_op;

typedef struct km_reader
{
	const uint8_t *p;
	const uint8_t *end;
	bool		bad;
} km_reader;

static inline void
km_get(km_reader *r, void *out, size_t n)
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
km_get_i64(km_reader *r)
{
	int64_t		v;

	km_get(r, &v, sizeof(v));
	return v;
}

static inline double
km_get_f64(km_reader *r)
{
	double		v;

	km_get(r, &v, sizeof(v));
	return v;
}

/* A count that must fit in [0, max] (a damaged message is an error, never a huge allocation). */
static inline int64_t
km_get_count(km_reader *r, int64_t max)
{
	int64_t		v = km_get_i64(r);

	if (v < 0 || v > max)
	{
		r->bad = true;
		return 0;
	}
	return v;
}

static inline void
km_put(gbml_strbuf *sb, const void *p, size_t n)
{
	gbml_sb_append(sb, p, n);
}

static inline void
km_put_i64(gbml_strbuf *sb, int64_t v)
{
	km_put(sb, &v, sizeof(v));
}

static inline void
km_put_f64(gbml_strbuf *sb, double v)
{
	km_put(sb, &v, sizeof(v));
}

#endif
