/*
 * onehot_counts.c — the categories' counts across servers as messages
 * (onehot_counts.h): a shard's of its rows, the coordinator's union, and
 * the sum, checked whole before anything is added.
 */
#include "onehot_counts.h"
#include "onehot.h"
#include "shard_msg.h"

#include <string.h>

bool
gbml_onehot_counts_is(const uint8_t *msg, size_t len)
{
	uint32_t	magic;

	if (len < sizeof(magic))
		return false;
	memcpy(&magic, msg, sizeof(magic));
	return magic == GBML_ONEHOT_COUNTS_MAGIC;
}

static void
put_head(gbml_strbuf *out, const gbml_feature_schema *schema)
{
	uint32_t	head[2] = {GBML_ONEHOT_COUNTS_MAGIC, GBML_SHARD_HELLO_VERSION};

	gbml_msg_put(out, head, sizeof(head));
	gbml_msg_put_i64(out, gbml_schema_n_categorical(schema));
}

/* Categorical feature j's counts (n_categories + 1 of them). */
static void
put_feature(gbml_strbuf *out, const gbml_feature_schema *schema, int j, const int64_t *counts)
{
	gbml_msg_put_i64(out, j);
	gbml_msg_put_i64(out, schema->features[j].n_categories);
	gbml_msg_put(out, counts, sizeof(int64_t) * ((size_t) schema->features[j].n_categories + 1));
}

int
gbml_onehot_counts_of_rows(const gbml_dataset *ds, const char *algo, gbml_env *env, gbml_strbuf *out)
{
	const gbml_feature_schema *s = ds->schema;
	int			n = gbml_schema_n_categorical(s),
				k = 0,
				rc;
	int64_t   **counts = gbml_alloc0(env, sizeof(int64_t *) * (size_t) (n > 0 ? n : 1));

	if (counts == NULL)
		return env->error_code;
	for (int j = 0; s && j < s->n_features && k < n; j++)
		if (gbml_feature_is_categorical(s, j) &&
			(counts[k++] = gbml_alloc_array(env, (size_t) s->features[j].n_categories + 1, sizeof(int64_t))) == NULL)
			n = -1;
	rc = n < 0 ? env->error_code : gbml_onehot_count(ds, algo, counts, env);
	if (rc == GBML_OK)
	{
		put_head(out, s);
		for (int j = 0, b = 0; j < s->n_features; j++)
			if (gbml_feature_is_categorical(s, j))
				put_feature(out, s, j, counts[b++]);
		rc = gbml_sb_status(out);
	}
	for (int b = 0; b < k; b++)
		gbml_free(env, counts[b]);
	gbml_free(env, counts);
	return rc;
}

void
gbml_onehot_counts_of_schema(const gbml_feature_schema *schema, gbml_strbuf *out)
{
	put_head(out, schema);
	for (int j = 0; j < schema->n_features; j++)
		if (gbml_feature_is_categorical(schema, j))
			put_feature(out, schema, j, schema->features[j].category_counts);
}

/* Whether r holds, from its place on, exactly schema's features' counts (all non-negative). */
static bool
counts_fit(const gbml_feature_schema *schema, gbml_msg_reader r)
{
	if (gbml_msg_get_i64(&r) != gbml_schema_n_categorical(schema))
		return false;
	for (int j = 0; j < schema->n_features && !r.bad; j++)
	{
		int64_t		n;

		if (!gbml_feature_is_categorical(schema, j))
			continue;
		if (gbml_msg_get_i64(&r) != j || gbml_msg_get_i64(&r) != schema->features[j].n_categories)
			return false;
		/* row counts: never negative, and far from overflowing when summed over shards */
		for (n = 0; n <= schema->features[j].n_categories && !r.bad; n++)
			if ((uint64_t) gbml_msg_get_i64(&r) > ((uint64_t) 1 << 53))
				return false;
	}
	return !r.bad && r.p == r.end;
}

int
gbml_onehot_counts_add(const gbml_feature_schema *schema, const uint8_t *msg, size_t len, int64_t *const *counts,
					   const char *who, gbml_env *env)
{
	gbml_msg_reader r = {msg, msg + len, false};
	uint32_t	head[2];

	gbml_msg_get(&r, head, sizeof(head));
	if (head[0] != GBML_ONEHOT_COUNTS_MAGIC || head[1] != GBML_SHARD_HELLO_VERSION)
		return gbml_error(env, GBML_EINVAL, "%s sent no categories' counts of this gbml version (%u)", who,
						  (unsigned) head[1]);
	if (!counts_fit(schema, r))
		return gbml_error(env, GBML_EINVAL, "%s sent categories' counts of other features", who);
	(void) gbml_msg_get_i64(&r);
	for (int j = 0, k = 0; j < schema->n_features; j++)
	{
		if (!gbml_feature_is_categorical(schema, j))
			continue;
		(void) gbml_msg_get_i64(&r);
		(void) gbml_msg_get_i64(&r);
		for (int c = 0; c <= schema->features[j].n_categories; c++)
			counts[k][c] += gbml_msg_get_i64(&r);
		k++;
	}
	return GBML_OK;
}
