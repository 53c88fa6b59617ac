/*
 * onehot_counts.h — the categories' counts a one-hot encoding keeps
 * categories by (onehot.h), across servers.  One server counts its
 * training rows; across servers every shard counts its own (after its
 * eval split) and sends them in place of its hello, the coordinator sums
 * them into the union's (the schema's category_counts) and sends those
 * back, and then every shard encodes its rows by them (union_counts) and
 * says its hello — so the shards, the coordinator and one server keep the
 * same categories.
 *
 * The message (native byte order, as every shard message):
 *   u32 GBML_ONEHOT_COUNTS_MAGIC | u32 GBML_SHARD_HELLO_VERSION |
 *   i64 categorical features | per feature (schema order):
 *   i64 its input, i64 n_categories, i64 count[n_categories + 1] (NULL's last)
 */
#ifndef GBML_ONEHOT_COUNTS_H
#define GBML_ONEHOT_COUNTS_H

#include "dataset.h"
#include "schema.h"
#include "strbuf.h"

#define GBML_ONEHOT_COUNTS_MAGIC GBML_TAG('O','H','C','N')

/* Whether a shard's answer to its opening is a counts message (not its hello). */
bool		gbml_onehot_counts_is(const uint8_t *msg, size_t len);

/* A shard's message: the counts of ds's rows (ds->schema's categorical features). */
int			gbml_onehot_counts_of_rows(const gbml_dataset *ds, const char *algo, gbml_env *env, gbml_strbuf *out);

/* The coordinator's message: schema's category_counts (the union's; every categorical feature has them). */
void		gbml_onehot_counts_of_schema(const gbml_feature_schema *schema, gbml_strbuf *out);

/*
 * msg's counts added into counts[k] (the k-th categorical feature of
 * schema, n_categories + 1 values each): GBML_EINVAL, nothing added, when
 * the message is malformed or describes other features (`who` names the
 * sender in the error).
 */
int			gbml_onehot_counts_add(const gbml_feature_schema *schema, const uint8_t *msg, size_t len,
								   int64_t *const *counts, const char *who, gbml_env *env);

#endif
