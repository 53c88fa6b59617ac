/*
 * test_shards_util.c — the in-process shards of test_shards_util.h.
 */
#include "harness.h"
#include "test_shards_util.h"
#include "onehot_counts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tu_link
{
	gbml_env	env[TU_MAX_SHARDS];
	gbml_dataset ds[TU_MAX_SHARDS];
	gbml_dataset eval[TU_MAX_SHARDS];	/* what eval_fraction held out of ds, as the glue splits it */
	void	   *shard[TU_MAX_SHARDS];
	const gbml_shard_ops *ops;
	gbml_strbuf hello[TU_MAX_SHARDS];
	gbml_strbuf reply[TU_MAX_SHARDS];
	const uint8_t *hello_p[TU_MAX_SHARDS];
	size_t		hello_len[TU_MAX_SHARDS];
	int			calls;
	int			fail_at;		/* > 0: shard 1 fails at this round trip */
	char		names[TU_MAX_SHARDS][24];
	bool		has_eval[TU_MAX_SHARDS];
	int64_t    *counts[64];		/* the union's category counts given to the shards' schema, per categorical feature */
	int			n_counts;
} tu_link;

/*
 * As the glue does for an algorithm that encodes by the union's category
 * counts: each shard's counts of its training rows as a message, summed
 * here, sent back as the coordinator's message and read into the schema
 * the shards share (the test's; tu_forget_counts takes them off again).
 */
static void
tu_exchange_counts(tu_link *L, int n_shards)
{
	gbml_feature_schema *schema = (gbml_feature_schema *) L->ds[0].schema;
	int64_t    *sums[64];
	gbml_env	env;
	gbml_strbuf msg;
	int			k = 0;

	gbml_env_init_malloc(&env, 1);
	for (int j = 0; j < schema->n_features; j++)
		if (gbml_feature_is_categorical(schema, j))
		{
			CHECK(k < 64);
			sums[k] = calloc((size_t) schema->features[j].n_categories + 1, sizeof(int64_t));
			L->counts[k++] = calloc((size_t) schema->features[j].n_categories + 1, sizeof(int64_t));
		}
	L->n_counts = k;
	for (int sh = 0; sh < n_shards; sh++)
	{
		gbml_sb_init(&msg, &env);
		CHECK(gbml_onehot_counts_of_rows(&L->ds[sh], "test", &L->env[sh], &msg) == GBML_OK);
		CHECK(gbml_onehot_counts_is((const uint8_t *) msg.data, msg.len));
		CHECK(gbml_onehot_counts_add(schema, (const uint8_t *) msg.data, msg.len, sums, L->names[sh], &env) == GBML_OK);
		gbml_sb_free(&msg);
	}
	for (int j = 0, b = 0; j < schema->n_features; j++)
		if (gbml_feature_is_categorical(schema, j))
			schema->features[j].category_counts = sums[b++];
	gbml_sb_init(&msg, &env);
	gbml_onehot_counts_of_schema(schema, &msg);
	CHECK(gbml_onehot_counts_add(schema, (const uint8_t *) msg.data, msg.len, L->counts, "the coordinator", &env) ==
		  GBML_OK);
	gbml_sb_free(&msg);
	for (int j = 0, b = 0; j < schema->n_features; j++)
		if (gbml_feature_is_categorical(schema, j))
		{
			schema->features[j].category_counts = L->counts[b];
			free(sums[b++]);
		}
}

static void
tu_forget_counts(tu_link *L)
{
	gbml_feature_schema *schema = (gbml_feature_schema *) L->ds[0].schema;

	for (int j = 0; L->n_counts > 0 && j < schema->n_features; j++)
		schema->features[j].category_counts = NULL;
	for (int k = 0; k < L->n_counts; k++)
		free(L->counts[k]);
	L->n_counts = 0;
}

static const char *
tu_shard_name(void *ctx, int s)
{
	return ((tu_link *) ctx)->names[s];
}

static int
tu_shard_round_trip(void *ctx, const uint8_t *const *req, const size_t *req_len, const uint8_t **reply,
			  size_t *reply_len, gbml_env *env)
{
	tu_link    *L = ctx;
	int			n = L->names[2][0] ? 3 : 2;

	L->calls++;
	for (int s = 0; s < n; s++)
	{
		int			rc;

		L->reply[s].len = 0;
		rc = L->fail_at > 0 && L->calls == L->fail_at && s == 1
			? gbml_error(&L->env[s], GBML_EIO, "planted failure")
			: gbml_shard_answer(L->ops, L->shard[s], req[s], req_len[s], &L->reply[s]);
		if (rc != GBML_OK)
			return gbml_error(env, rc, "shard %s: %s", L->names[s], L->env[s].error);
		reply[s] = (const uint8_t *) L->reply[s].data;
		reply_len[s] = L->reply[s].len;
	}
	return GBML_OK;
}

uint8_t *
tu_train_sharded(const char *algorithm, tu_fill_fn fill, void *arg, int n_shards, const gbml_param_value *v,
				 int nv, int fail_at, size_t *len, char *error, size_t error_size)
{
	return tu_train_sharded_eval(algorithm, fill, arg, NULL, NULL, n_shards, v, nv, fail_at, len, error, error_size);
}

uint8_t *
tu_train_sharded_eval(const char *algorithm, tu_fill_fn fill, void *arg, tu_fill_fn eval_fill, void *eval_arg,
					  int n_shards, const gbml_param_value *v, int nv, int fail_at, size_t *len, char *error,
					  size_t error_size)
{
	const gbml_algorithm *algo = gbml_algorithm_by_name(algorithm);
	tu_link    *L = calloc(1, sizeof(tu_link));
	gbml_shard_link link;
	gbml_env	env;
	gbml_dataset ds,
				eval;
	gbml_parsed_params pp;
	uint8_t    *model = NULL;
	int			rc;

	L->fail_at = fail_at;
	L->ops = algo->shard;
	error[0] = '\0';
	for (int sh = 0; sh < n_shards; sh++)
	{
		gbml_env_init_malloc(&L->env[sh], sh + 1);
		snprintf(L->names[sh], sizeof(L->names[sh]), "shard%d", sh + 1);
		fill(&L->ds[sh], &L->env[sh], sh, n_shards, sh == 1, arg);
		CHECK(gbml_dataset_canonicalize(&L->ds[sh], &L->env[sh]) == GBML_OK);
		CHECK(gbml_parse_training_params(&L->env[sh], algo, v, nv, &pp) == GBML_OK);
		/* as the glue sends them: with the coordinator's own eval rows, no eval_fraction */
		if (eval_fill)
			pp.common.eval_fraction = 0;
		CHECK(gbml_shard_split_eval(&pp, &L->ds[sh], &L->eval[sh], &L->has_eval[sh], &L->env[sh]) == GBML_OK);
		gbml_parsed_params_free(&L->env[sh], &pp);
		gbml_sb_init(&L->hello[sh], &L->env[sh]);
		gbml_sb_init(&L->reply[sh], &L->env[sh]);
	}
	/* as the glue does: the union's category counts from the shards' before they open */
	if (L->ops->counts_categories && gbml_schema_n_categorical(L->ds[0].schema) > 0)
		tu_exchange_counts(L, n_shards);
	for (int sh = 0; sh < n_shards; sh++)
	{
		CHECK(gbml_parse_training_params(&L->env[sh], algo, v, nv, &pp) == GBML_OK);
		rc = L->ops->open(&L->ds[sh], L->has_eval[sh] ? &L->eval[sh] : NULL, pp.algo_params, &L->env[sh],
						  &L->shard[sh], &L->hello[sh]);
		gbml_parsed_params_free(&L->env[sh], &pp);
		if (rc != GBML_OK)
		{
			/* a shard that refuses to open: the glue's error names it */
			snprintf(error, error_size, "shard %s: %s", L->names[sh], L->env[sh].error);
			for (int o = 0; o < n_shards; o++)
			{
				if (L->shard[o])
					L->ops->close(L->shard[o]);
				gbml_sb_free(&L->hello[o]);
				gbml_sb_free(&L->reply[o]);
				gbml_dataset_free(&L->ds[o], &L->env[o]);
				gbml_dataset_free(&L->eval[o], &L->env[o]);
				CHECK(L->env[o].memory_used == 0);
			}
			tu_forget_counts(L);
			free(L);
			return NULL;
		}
		L->hello_p[sh] = (const uint8_t *) L->hello[sh].data;
		L->hello_len[sh] = L->hello[sh].len;
	}
	link.n_shards = n_shards;
	link.ctx = L;
	link.name = tu_shard_name;
	link.round_trip = tu_shard_round_trip;
	link.hello = L->hello_p;
	link.hello_len = L->hello_len;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	gbml_dataset_init(&eval, false);
	if (eval_fill)
		eval_fill(&eval, &env, -1, 1, false, eval_arg);
	CHECK(gbml_shards_describe(&link, L->ops->hello_magic, &env, &ds.n_rows, &ds.n_features) == GBML_OK);
	ds.shards = &link;
	/* as the glue does: the union's schema (the shards' rows follow it) */
	ds.schema = L->ds[0].schema;
	/* ... and the raw rows' width (the shards' may be one-hot encoded, wider) */
	if (ds.schema)
		ds.n_features = ds.schema->n_features;
	/* as the glue does: the rows the shards held out gathered here when the algorithm scores them here */
	CHECK(gbml_parse_training_params(&env, algo, v, nv, &pp) == GBML_OK);
	if (!eval_fill && pp.common.eval_fraction > 0 && L->ops->gathers_eval_split)
	{
		/* as the glue does: the training rows' schema, a NULL category a NaN */
		eval.schema = ds.schema;
		eval.allow_missing = gbml_schema_n_categorical(ds.schema) > 0;
		/* pages of 97 rows: many round trips, a short last page per shard */
		CHECK(gbml_shards_gather_eval_paged(&link, L->ops->hello_magic, algorithm, &eval, 97, &env) == GBML_OK);
		gbml_dataset_finish_appends(&eval, &env);
	}
	gbml_parsed_params_free(&env, &pp);
	rc = tu_train_eval(algorithm, &ds, eval.n_rows > 0 ? &eval : NULL, &env, v, nv, &model, len);
	if (rc != GBML_OK)
		snprintf(error, error_size, "%s", env.error);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&eval, &env);
	CHECK(env.memory_used == 0);
	tu_forget_counts(L);
	for (int sh = 0; sh < n_shards; sh++)
	{
		L->ops->close(L->shard[sh]);
		gbml_sb_free(&L->hello[sh]);
		gbml_sb_free(&L->reply[sh]);
		gbml_dataset_free(&L->ds[sh], &L->env[sh]);
		gbml_dataset_free(&L->eval[sh], &L->env[sh]);
		CHECK(L->env[sh].memory_used == 0);
	}
	free(L);
	return model;
}

void
tu_check_sharded(const char *algorithm, const char *name, tu_fill_fn fill, void *arg, const gbml_param_value *v,
				 int nv, int n_sharded, tu_compare_fn compare, void *compare_arg)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *ref;
	size_t		ref_len;
	char		error[512];

	gbml_env_init_malloc(&env, 2);
	fill(&ds, &env, -1, 1, false, arg);
	CHECK(tu_train(algorithm, &ds, &env, v, nv, &ref, &ref_len) == GBML_OK);
	gbml_dataset_free(&ds, &env);
	for (int n_shards = 2; n_shards <= 3; n_shards++)
	{
		size_t		len = 0;
		uint8_t    *m = tu_train_sharded(algorithm, fill, arg, n_shards, v, n_sharded, 0, &len, error, sizeof(error));

		CHECK(m != NULL);
		if (m == NULL)
			fprintf(stderr, "%s, %d shards: %s\n", name, n_shards, error);
		else
			compare(compare_arg, name, n_shards, m, len, ref, ref_len);
		free(m);
	}
	free(ref);
}

int64_t
tu_first_held_out(const char *algorithm, const gbml_param_value *v, int nv, tu_fill_fn fill, void *arg,
				  int64_t from)
{
	gbml_env	env;
	gbml_parsed_params pp;
	gbml_dataset ds;
	int64_t		at = 0,
				found = -1;

	gbml_env_init_malloc(&env, 1);
	CHECK(gbml_parse_training_params(&env, gbml_algorithm_by_name(algorithm), v, nv, &pp) == GBML_OK);
	fill(&ds, &env, -1, 1, false, arg);
	gbml_dataset_finish_appends(&ds, &env);
	for (int c = 0; c < ds.n_chunks && found < 0; c++)
	{
		const gbml_chunk *ch = ds.chunks[c];

		for (int64_t r = 0; r < ch->n_rows && found < 0; r++, at++)
		{
			gbml_row	row = {.x = ch->x + r * ds.n_features,.n_features = ds.n_features,.label = ch->label[r],
			.group = ch->group[r],.group_is_null = ds.group_state <= 0,.weight = ch->weight[r]};
			gbml_dataset one,
						eval;
			bool		has_eval;

			if (at < from)
				continue;
			gbml_dataset_init(&one, ds.allow_missing);
			one.schema = ds.schema;
			CHECK(gbml_dataset_append(&one, &env, &row, false) == GBML_OK);
			CHECK(gbml_shard_split_eval(&pp, &one, &eval, &has_eval, &env) == GBML_OK);
			if (one.n_rows == 0)
				found = at;
			gbml_dataset_free(&one, &env);
			gbml_dataset_free(&eval, &env);
		}
	}
	gbml_dataset_free(&ds, &env);
	gbml_parsed_params_free(&env, &pp);
	CHECK(env.memory_used == 0);
	return found;
}

void
tu_check_same_bytes(const char *algorithm, const char *name, tu_fill_fn fill, void *arg,
					const gbml_param_value *v, int nv)
{
	tu_check_same_bytes_eval(algorithm, name, fill, arg, NULL, NULL, v, nv);
}

void
tu_check_same_bytes_eval(const char *algorithm, const char *name, tu_fill_fn fill, void *arg, tu_fill_fn eval_fill,
						 void *eval_arg, const gbml_param_value *v, int nv)
{
	gbml_env	env;
	gbml_dataset ds,
				eval;
	uint8_t    *ref;
	size_t		ref_len;
	char		error[512];

	gbml_env_init_malloc(&env, 2);
	fill(&ds, &env, -1, 1, false, arg);
	gbml_dataset_init(&eval, false);
	if (eval_fill)
		eval_fill(&eval, &env, -1, 1, false, eval_arg);
	CHECK(tu_train_eval(algorithm, &ds, eval_fill ? &eval : NULL, &env, v, nv, &ref, &ref_len) == GBML_OK);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&eval, &env);
	for (int n_shards = 2; n_shards <= 3; n_shards++)
	{
		size_t		len = 0;
		uint8_t    *m = tu_train_sharded_eval(algorithm, fill, arg, eval_fill, eval_arg, n_shards, v, nv, 0, &len,
											  error, sizeof(error));
		bool		same = m != NULL && len == ref_len && memcmp(m, ref, len) == 0;

		CHECK(same);
		if (!same)
			fprintf(stderr, "%s, %d shards: %s\n", name, n_shards, m ? "other bytes than one server" : error);
		free(m);
	}
	free(ref);
}
