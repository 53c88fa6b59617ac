/*
 * kmeans_shards.h — K-Means over rows that other servers hold (issue 14).
 *
 * The coordinator runs the same Lloyd driver as a local fit (kmeans.c),
 * through row operations (km_rows_ops) each of which is one round trip to
 * every shard at once; each shard answers from its own rows with the local
 * operations.  Only small states cross: centroids, per-feature extremes,
 * fixed-point sums and counts, a few rows (init, relocation), per-block
 * k-means++ potentials.  Every figure a shard returns is an extreme or an
 * integer sum, and every row has a global index (its place in the union's
 * canonical order, merged from the shards' sorted row hashes), so the model
 * is the bytes a single server gives on the union of the rows.
 *
 * The engine sees the shards through a gbml_shard_link (shard_link.h).
 * Messages are the engine's own binary format (shard_msg.h; native byte
 * order: every server of a training is the same architecture).
 */
#ifndef GBML_KMEANS_SHARDS_H
#define GBML_KMEANS_SHARDS_H

#include "shard_link.h"

/*
 * K-Means' shard side, its entry in the algorithm table (shard_link.h):
 * its rows (canonical order), their global indices once the coordinator
 * sends them, and the local K-Means work state.
 */
extern const gbml_shard_ops gbml_kmeans_shard_ops;

#endif
