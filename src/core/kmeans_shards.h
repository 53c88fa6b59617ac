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

#include "dataset.h"
#include "kmeans.h"
#include "shard_link.h"
#include "strbuf.h"

/*
 * The shard's side: its rows (canonical order, gbml_dataset_canonicalize
 * done), their global indices once the coordinator sends them, and the
 * local K-Means work state.  The hello lists the rows' hashes in order.
 */
typedef struct gbml_km_shard gbml_km_shard;

int			gbml_km_shard_open(const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env,
							   gbml_km_shard **out, gbml_strbuf *hello);
/* One request of the coordinator's, its answer appended to reply. */
int			gbml_km_shard_step(gbml_km_shard *sh, const uint8_t *req, size_t len, gbml_strbuf *reply);
void		gbml_km_shard_close(gbml_km_shard *sh);

/* The same as K-Means' entry in the algorithm table (shard_link.h). */
extern const gbml_shard_ops gbml_kmeans_shard_ops;

#endif
