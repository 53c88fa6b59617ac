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
#include "test_shards_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct sh_data
{
	int64_t		n;
	int			d;
	int			distinct;		/* > 0: rows repeat this many points */
	int64_t		first;			/* the rows are those from this index on (an eval set's: other rows) */
	int64_t		lone;			/* > 0: row lone - 1 alone on the last shard */
} sh_data;

static void
sh_row(const sh_data *s, int64_t i, float *x)
{
	int64_t		p = s->first + (s->distinct > 0 ? i % s->distinct : i);
	gbml_rng	rng;

	gbml_rng_seed(&rng, 991 + (uint64_t) p);
	for (int j = 0; j < s->d; j++)
		x[j] = (float) ((p % 5 == j % 5 ? 4.0 : 0.0) + gbml_rng_uniform(&rng) * 2 - 1 + (j == 0 ? 100.0 : 0.0));
}

/* Rows i with shard_of(i) == shard (all when shard < 0) into ds. */
static void
sh_fill(gbml_dataset *ds, gbml_env *env, int shard, int n_shards, bool to_files, void *arg)
{
	const sh_data *s = arg;
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

		if (s->lone > 0)
			owner = i == s->lone - 1 ? n_shards - 1 : 0;

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

TEST(kmeans_shards_kmeanspp_n_init_same_bytes)
{
	sh_data		s = {9100, 6, 0, 0, 0};
	gbml_param_value v[] = {tu_num("k", 7), tu_num("n_init", 2), tu_num("random_seed", 4)};

	tu_check_same_bytes("kmeans", "k-means++, n_init 2", sh_fill, &s, v, 3);
}

TEST(kmeans_shards_random_spherical_same_bytes)
{
	sh_data		s = {5000, 9, 0, 0, 0};
	gbml_param_value v[] = {tu_num("k", 5), tu_str("init", "random"), tu_bool("spherical", true),
	tu_num("n_init", 2)};

	tu_check_same_bytes("kmeans", "random, spherical", sh_fill, &s, v, 4);
}

/*
 * k-means++ in the spherical mode on rows far from unit norm (the first
 * feature's 100): a shard bounded its candidate pass by the rows' raw norm
 * against the coordinator's grid for unit rows, and refused the pass as a
 * malformed request (the differential probe, seed 174).
 */
TEST(kmeans_shards_kmeanspp_spherical_same_bytes)
{
	sh_data		s = {4000, 5, 0, 0, 0};
	gbml_param_value v[] = {tu_num("k", 4), tu_bool("spherical", true), tu_num("random_seed", 6)};

	tu_check_same_bytes("kmeans", "k-means++, spherical", sh_fill, &s, v, 3);
}

TEST(kmeans_shards_duplicates_and_empty_clusters_same_bytes)
{
	/* 6 distinct points on 3000 rows (each on both shards), k 9: random init takes duplicates */
	sh_data		s = {3000, 4, 6, 0, 0};
	gbml_param_value v[] = {tu_num("k", 9), tu_str("init", "random"), tu_num("random_seed", 2),
	tu_num("min_frac_changed", 0)};

	tu_check_same_bytes("kmeans", "duplicates, empty clusters", sh_fill, &s, v, 4);
}

/* An eval set of the coordinator's own (eval_source): its inertia under the model, as one server computes it. */
TEST(kmeans_shards_eval_source_same_bytes)
{
	sh_data		s = {5000, 6, 0, 0, 0};
	sh_data		e = {800, 6, 0, 100000, 0};
	gbml_param_value v[] = {tu_num("k", 5), tu_num("random_seed", 3)};

	tu_check_same_bytes_eval("kmeans", "an eval set of the coordinator's", sh_fill, &s, sh_fill, &e, v, 2);
}

/*
 * eval_fraction: each shard holds out the rows one server would, the
 * coordinator gathers them (pages of 97 rows in the tests) and computes
 * their inertia as one server does.
 */
TEST(kmeans_shards_eval_fraction_same_bytes)
{
	sh_data		s = {6000, 6, 0, 0, 0};
	gbml_param_value v[] = {tu_num("k", 5), tu_num("random_seed", 3), tu_num("eval_fraction", 0.25)};

	tu_check_same_bytes("kmeans", "eval_fraction, gathered to the coordinator", sh_fill, &s, v, 3);
}

/*
 * A shard whose every row eval_fraction holds out (here its only one) has
 * no training rows but its eval row: the coordinator gathers it as one
 * server holds it out.
 */
TEST(kmeans_shards_a_shard_whose_rows_are_all_held_out)
{
	sh_data		s = {3000, 6, 0, 0, 0};
	gbml_param_value v[] = {tu_num("k", 4), tu_num("random_seed", 3), tu_num("eval_fraction", 0.25)};
	int64_t		i = tu_first_held_out("kmeans", v, 3, sh_fill, &s, 0);

	CHECK(i >= 0);
	s.lone = i + 1;
	tu_check_same_bytes("kmeans", "a shard whose one row is held out", sh_fill, &s, v, 3);
}

/* One row alone on the last shard: its order is whole early, and the later pages it gets are empty (as boosting's). */
TEST(kmeans_shards_a_lone_row_takes_empty_pages)
{
	sh_data		s = {3000, 6, 0, 0, 40};
	gbml_param_value v[] = {tu_num("k", 4), tu_num("random_seed", 3)};

	tu_check_same_bytes("kmeans", "a lone row on a shard", sh_fill, &s, v, 2);
}

TEST(kmeans_shards_failing_shard_names_it)
{
	sh_data		s = {3000, 5, 0, 0, 0};
	gbml_param_value v[] = {tu_num("k", 4)};
	char		error[512];
	size_t		len;
	uint8_t    *m;

	for (int at = 1; at <= 25; at += 8)
	{
		m = tu_train_sharded("kmeans", sh_fill, &s, 2, v, 1, at, &len, error, sizeof(error));
		CHECK(m == NULL);
		CHECK(strstr(error, "shard2") != NULL && strstr(error, "planted failure") != NULL);
		if (m != NULL || strstr(error, "planted failure") == NULL)
			fprintf(stderr, "failure at round trip %d: %s\n", at, m ? "the fit ended first" : error);
		free(m);
	}
}
