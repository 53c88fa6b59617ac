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
 * The engine sees the shards through a gbml_shard_link: the glue backs it
 * with libpq connections (src/pg/shards.c), the unit tests with calls in
 * the same process.  Messages are the engine's own binary format (native
 * byte order: every server of a training is the same architecture).
 */
#ifndef GBML_KMEANS_SHARDS_H
#define GBML_KMEANS_SHARDS_H

#include "dataset.h"
#include "kmeans.h"
#include "strbuf.h"

typedef struct gbml_shard_link
{
	int			n_shards;
	void	   *ctx;
	/* the shard's name, for messages */
	const char *(*name) (void *ctx, int shard);

	/*
	 * Sends req[s] (req_len[s] bytes) to every shard s at once and waits for
	 * every reply; reply[s] stays valid until the next call.  Returns GBML_OK
	 * or an error (env) that names the shard.
	 */
	int			(*round_trip) (void *ctx, const uint8_t *const *req, const size_t *req_len,
							   const uint8_t **reply, size_t *reply_len, gbml_env *env);
	/* each shard's answer to its open (gbml_km_shard_open's hello) */
	const uint8_t **hello;
	const size_t *hello_len;
} gbml_shard_link;

/* The union's rows and features from the shards' hellos (the coordinator's dataset). */
int			gbml_km_shards_describe(const gbml_shard_link *link, gbml_env *env,
									int64_t *n_rows, int *n_features);

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

#endif
