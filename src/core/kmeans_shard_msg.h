/*
 * kmeans_shard_msg.h — K-Means' messages between a coordinator and its
 * shards (kmeans_shards.c, kmeans_shard.c): the request codes and the
 * hello's layout; the reader and writers are shard_msg.h's.
 */
#ifndef GBML_KMEANS_SHARD_MSG_H
#define GBML_KMEANS_SHARD_MSG_H

#include "shard_msg.h"

#define KM_SHARD_MAGIC 0x676b6d73u	/* "gkms" */
#define KM_SHARD_BLOCK_ROWS 4096	/* rows of a global block (k-means++'s potentials) */

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
	KM_OP_DIST_SUM,
	KM_OP_HASHES
} km_shard_op;

/* The global order's pages (KM_OP_HASHES, KM_OP_RANKS) have GBML_SHARD_ORDER_PAGE rows (shard_order.h). */

#endif
