/*
 * test_kmeans_shards.c — K-Means across shards (kmeans_shards.h) with the
 * shards in this process: the rows dealt to 2 or 3 shards (one of them
 * empty, duplicates on two shards, one shard's rows in files) train to the
 * same model bytes as all of them on one server, for k-means++, random
 * init, the spherical mode, n_init, and empty-cluster relocation; a shard
 * that fails mid-training ends the fit with an error naming it and leaves
 * no memory behind.
 */
#include "harness.h"
#include "chunk_store_file.h"
#include "kmeans.h"
#include "kmeans_shards.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#define SH_MAX 3

typedef struct sh_data
{
	int64_t		n;
	int			d;
	int			distinct;		/* > 0: rows repeat this many points */
} sh_data;

static void
sh_row(const sh_data *s, int64_t i, float *x)
{
	int64_t		p = s->distinct > 0 ? i % s->distinct : i;
	gbml_rng	rng;

	gbml_rng_seed(&rng, 991 + (uint64_t) p);
	for (int j = 0; j < s->d; j++)
		x[j] = (float) ((p % 5 == j % 5 ? 4.0 : 0.0) + gbml_rng_uniform(&rng) * 2 - 1 + (j == 0 ? 100.0 : 0.0));
}

/* Rows i with shard_of(i) == shard (all when shard < 0) into ds. */
static void
sh_fill(gbml_dataset *ds, gbml_env *env, const sh_data *s, int shard, int n_shards, bool to_files)
{
	float	   *x = malloc(sizeof(float) * (size_t) s->d);

	gbml_dataset_init(ds, false);
	ds->chunk_rows = 600;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < s->n; i++)
	{
		gbml_row	row = {0};
		/* uneven shares; the last of three shards gets nothing */
		int			owner = n_shards == 3 ? (int) ((i * 7) % 5 < 3 ? 0 : 1) : (int) ((i * 13) % 3 == 0);

		if (shard >= 0 && owner != shard)
			continue;
		sh_row(s, i, x);
		row.x = x;
		row.n_features = s->d;
		row.label_is_null = row.group_is_null = row.weight_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, false) == GBML_OK);
	}
	free(x);
}

typedef struct sh_link
{
	gbml_env	env[SH_MAX];
	gbml_dataset ds[SH_MAX];
	gbml_km_shard *shard[SH_MAX];
	gbml_strbuf hello[SH_MAX];
	gbml_strbuf reply[SH_MAX];
	const uint8_t *hello_p[SH_MAX];
	size_t		hello_len[SH_MAX];
	int			calls;
	int			fail_at;		/* > 0: shard 1 fails at this round trip */
	char		names[SH_MAX][16];
} sh_link;

static const char *
sh_name(void *ctx, int s)
{
	return ((sh_link *) ctx)->names[s];
}

static int
sh_round_trip(void *ctx, const uint8_t *const *req, const size_t *req_len, const uint8_t **reply,
			  size_t *reply_len, gbml_env *env)
{
	sh_link    *L = ctx;
	int			n = L->names[2][0] ? 3 : 2;

	L->calls++;
	for (int s = 0; s < n; s++)
	{
		int			rc;

		L->reply[s].len = 0;
		rc = L->fail_at > 0 && L->calls == L->fail_at && s == 1
			? gbml_error(&L->env[s], GBML_EIO, "planted failure")
			: gbml_shard_answer(&gbml_kmeans_shard_ops, L->shard[s], req[s], req_len[s], &L->reply[s]);
		if (rc != GBML_OK)
			return gbml_error(env, rc, "shard %s: %s", L->names[s], L->env[s].error);
		reply[s] = (const uint8_t *) L->reply[s].data;
		reply_len[s] = L->reply[s].len;
	}
	return GBML_OK;
}

/* The sharded fit's model (malloc'd) or NULL; *error the coordinator's error. */
static uint8_t *
sh_train_sharded(const sh_data *s, int n_shards, const gbml_param_value *v, int nv, int fail_at,
				 size_t *len, char *error, size_t error_size)
{
	sh_link    *L = calloc(1, sizeof(sh_link));
	gbml_shard_link link;
	gbml_env	env;
	gbml_dataset ds;
	gbml_parsed_params pp;
	uint8_t    *model = NULL;
	int			rc;

	L->fail_at = fail_at;
	error[0] = '\0';
	for (int sh = 0; sh < n_shards; sh++)
	{
		gbml_env_init_malloc(&L->env[sh], sh + 1);
		snprintf(L->names[sh], sizeof(L->names[sh]), "shard%d", sh + 1);
		sh_fill(&L->ds[sh], &L->env[sh], s, sh, n_shards, sh == 1);
		CHECK(gbml_dataset_canonicalize(&L->ds[sh], &L->env[sh]) == GBML_OK);
		CHECK(gbml_parse_training_params(&L->env[sh], gbml_algorithm_by_name("kmeans"), v, nv, &pp) == GBML_OK);
		gbml_sb_init(&L->hello[sh], &L->env[sh]);
		gbml_sb_init(&L->reply[sh], &L->env[sh]);
		CHECK(gbml_km_shard_open(&L->ds[sh], pp.algo_params, &L->env[sh], &L->shard[sh], &L->hello[sh]) == GBML_OK);
		gbml_parsed_params_free(&L->env[sh], &pp);
		L->hello_p[sh] = (const uint8_t *) L->hello[sh].data;
		L->hello_len[sh] = L->hello[sh].len;
	}
	link.n_shards = n_shards;
	link.ctx = L;
	link.name = sh_name;
	link.round_trip = sh_round_trip;
	link.hello = L->hello_p;
	link.hello_len = L->hello_len;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	CHECK(gbml_shards_describe(&link, gbml_kmeans_shard_ops.hello_magic, &env, &ds.n_rows, &ds.n_features) == GBML_OK);
	CHECK(ds.n_rows == s->n && ds.n_features == s->d);
	ds.shards = &link;
	rc = tu_train("kmeans", &ds, &env, v, nv, &model, len);
	if (rc != GBML_OK)
		snprintf(error, error_size, "%s", env.error);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
	for (int sh = 0; sh < n_shards; sh++)
	{
		gbml_km_shard_close(L->shard[sh]);
		gbml_sb_free(&L->hello[sh]);
		gbml_sb_free(&L->reply[sh]);
		gbml_dataset_free(&L->ds[sh], &L->env[sh]);
		CHECK(L->env[sh].memory_used == 0);
	}
	free(L);
	return model;
}

static void
sh_check_same_bytes(const char *name, const sh_data *s, const gbml_param_value *v, int nv)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *ref;
	size_t		ref_len;
	char		error[512];

	gbml_env_init_malloc(&env, 2);
	sh_fill(&ds, &env, s, -1, 1, false);
	CHECK(tu_train("kmeans", &ds, &env, v, nv, &ref, &ref_len) == GBML_OK);
	gbml_dataset_free(&ds, &env);
	for (int n_shards = 2; n_shards <= 3; n_shards++)
	{
		size_t		len = 0;
		uint8_t    *m = sh_train_sharded(s, n_shards, v, nv, 0, &len, error, sizeof(error));
		bool		same = m != NULL && len == ref_len && memcmp(m, ref, len) == 0;

		CHECK(same);
		if (!same)
			fprintf(stderr, "%s, %d shards: %s\n", name, n_shards, m ? "other bytes than one server" : error);
		free(m);
	}
	free(ref);
}

TEST(kmeans_shards_kmeanspp_n_init_same_bytes)
{
	sh_data		s = {9100, 6, 0};
	gbml_param_value v[] = {tu_num("k", 7), tu_num("n_init", 2), tu_num("random_seed", 4)};

	sh_check_same_bytes("k-means++, n_init 2", &s, v, 3);
}

TEST(kmeans_shards_random_spherical_same_bytes)
{
	sh_data		s = {5000, 9, 0};
	gbml_param_value v[] = {tu_num("k", 5), tu_str("init", "random"), tu_bool("spherical", true),
	tu_num("n_init", 2)};

	sh_check_same_bytes("random, spherical", &s, v, 4);
}

TEST(kmeans_shards_duplicates_and_empty_clusters_same_bytes)
{
	/* 6 distinct points on 3000 rows (each on both shards), k 9: random init takes duplicates */
	sh_data		s = {3000, 4, 6};
	gbml_param_value v[] = {tu_num("k", 9), tu_str("init", "random"), tu_num("random_seed", 2),
	tu_num("min_frac_changed", 0)};

	sh_check_same_bytes("duplicates, empty clusters", &s, v, 4);
}

TEST(kmeans_shards_failing_shard_names_it)
{
	sh_data		s = {3000, 5, 0};
	gbml_param_value v[] = {tu_num("k", 4)};
	char		error[512];
	size_t		len;
	uint8_t    *m;

	for (int at = 1; at <= 25; at += 8)
	{
		m = sh_train_sharded(&s, 2, v, 1, at, &len, error, sizeof(error));
		CHECK(m == NULL);
		CHECK(strstr(error, "shard2") != NULL && strstr(error, "planted failure") != NULL);
		if (m != NULL || strstr(error, "planted failure") == NULL)
			fprintf(stderr, "failure at round trip %d: %s\n", at, m ? "the fit ended first" : error);
		free(m);
	}
}
