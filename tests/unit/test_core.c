/*
 * test_core.c — unit tests of the engine's shared machinery: allocator
 * budget, buffers, params parser, chunked dataset (validation, merge,
 * serialization, canonical order, eval split), model container and the
 * mean model through the training driver.
 */
#include "harness.h"
#include "algorithm.h"
#include "rng.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static void
fill_dataset(gbml_dataset *ds, gbml_env *env, int64_t n, int d, uint64_t seed, bool groups)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * d);

	gbml_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
	{
		gbml_row	row = {0};

		for (int j = 0; j < d; j++)
			x[j] = (float) gbml_rng_uniform(&rng);
		row.x = x;
		row.n_features = d;
		row.label = x[0] * 2 + 1;
		row.group = i / 10;
		row.group_is_null = !groups;
		row.weight_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	free(x);
}

TEST(crc32c_known_vector)
{
	CHECK(gbml_crc32c(0, "123456789", 9) == 0xE3069283u);
	CHECK(gbml_crc32c(0, "", 0) == 0);
}

TEST(budget_is_enforced_and_released)
{
	gbml_env	env;
	void	   *a,
			   *b;

	gbml_env_init_malloc(&env, 1);
	env.memory_limit = 1 << 20;
	a = gbml_alloc(&env, 600 << 10);
	CHECK(a != NULL);
	b = gbml_alloc(&env, 600 << 10);
	CHECK(b == NULL);
	CHECK(env.error_code == GBML_EBUDGET);
	CHECK(strstr(env.error, "memory limit") != NULL);
	gbml_free(&env, a);
	CHECK(env.memory_used == 0);
	b = gbml_alloc(&env, 600 << 10);
	CHECK(b != NULL);
	gbml_free(&env, b);
	CHECK(gbml_alloc_array(&env, SIZE_MAX / 2, 4) == NULL);
}

/* A prefix names the part that failed and keeps the error's hint; a long message is cut, never overrun. */
TEST(error_prefix_keeps_the_hint)
{
	gbml_env	env;
	char		longer[600];

	gbml_env_init_malloc(&env, 1);
	gbml_error(&env, GBML_EBUDGET, "memory limit exceeded");
	gbml_hint(&env, "Raise gbml.memory_limit.");
	CHECK(gbml_error_prefix(&env, GBML_EIO, "kmeans (eval set)") == GBML_EIO);
	CHECK(strcmp(env.error, "kmeans (eval set): memory limit exceeded") == 0);
	CHECK(strcmp(env.hint, "Raise gbml.memory_limit.") == 0 && env.error_code == GBML_EIO);
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	gbml_error(&env, GBML_EIO, "%s", longer);
	gbml_error_prefix(&env, GBML_EIO, "kmeans");
	CHECK(strncmp(env.error, "kmeans: xxx", 11) == 0 && strlen(env.error) == sizeof(env.error) - 1);
}

TEST(json_writer_escapes_and_nulls)
{
	gbml_env	env;
	gbml_strbuf sb;
	bool		first = true;

	gbml_env_init_malloc(&env, 1);
	gbml_sb_init(&sb, &env);
	gbml_sb_append(&sb, "{", 1);
	gbml_sb_json_key(&sb, "a\"b", &first);
	gbml_sb_json_number(&sb, 0.0 / 0.0);
	gbml_sb_json_key(&sb, "n", &first);
	gbml_sb_json_number(&sb, 2.5);
	gbml_sb_json_key(&sb, "s", &first);
	gbml_sb_json_string(&sb, "x\ny");
	gbml_sb_append(&sb, "}", 1);
	CHECK(strcmp(sb.data, "{\"a\\\"b\":null,\"n\":2.5,\"s\":\"x\\u000ay\"}") == 0);
	gbml_sb_free(&sb);
}

typedef struct test_params
{
	int64_t		depth;
	double		rate;
	bool		flag;
	int			mode;
	char	   *name;
	gbml_enum_or_matrix init;
} test_params;

static const char *const modes[] = {"a", "b", NULL};
static const gbml_param_spec test_specs[] = {
	{"depth", GBML_PARAM_INT, offsetof(test_params, depth), 1, 10, 6, NULL, NULL, "d"},
	{"rate", GBML_PARAM_REAL, offsetof(test_params, rate), 0, 1, 0.1, NULL, NULL, "r"},
	{"flag", GBML_PARAM_BOOL, offsetof(test_params, flag), 0, 0, 1, NULL, NULL, "f"},
	{"mode", GBML_PARAM_ENUM, offsetof(test_params, mode), 0, 0, 1, NULL, modes, "m"},
	{"name", GBML_PARAM_STRING, offsetof(test_params, name), 0, 0, 0, "x", NULL, "n"},
	{"init", GBML_PARAM_ENUM_OR_MATRIX, offsetof(test_params, init), 0, 0, 0, NULL, modes, "i"},
	GBML_PARAM_END
};

static int
parse_one(gbml_env *env, test_params *p, const gbml_param_value *v, int n)
{
	const gbml_param_spec *tables[] = {test_specs, NULL};
	void	   *outs[] = {p};

	return gbml_params_parse(env, "test", tables, outs, v, n);
}

/* frees what parse_one allocated (the default "name", a matrix), even after an error */
static void
free_one(gbml_env *env, test_params *p)
{
	const gbml_param_spec *tables[] = {test_specs, NULL};
	void	   *outs[] = {p};

	gbml_params_free(env, tables, outs);
}

TEST(params_defaults_and_values)
{
	gbml_env	env;
	test_params p;
	double		m[4] = {1, 2, 3, 4};
	gbml_param_value v[] = {
		tu_num("depth", 3),
		tu_str("mode", "a"),
		{.key = "init",.kind = GBML_VALUE_MATRIX,.matrix = {m, 2, 2}},
	};

	gbml_env_init_malloc(&env, 1);
	CHECK(parse_one(&env, &p, v, 0) == GBML_OK);
	CHECK(p.depth == 6 && p.rate == 0.1 && p.flag && p.mode == 1 && strcmp(p.name, "x") == 0);
	CHECK(p.init.choice == 0);
	free_one(&env, &p);
	CHECK(parse_one(&env, &p, v, 3) == GBML_OK);
	CHECK(p.depth == 3 && p.mode == 0 && p.init.choice == -1 && p.init.matrix.rows == 2 &&
		  p.init.matrix.values[3] == 4);
	free_one(&env, &p);
	CHECK(env.memory_used == 0);
}

TEST(params_errors_name_key_and_range)
{
	gbml_env	env;
	test_params p;
	gbml_param_value bad_int = tu_num("depth", 11);
	gbml_param_value frac_int = tu_num("depth", 2.5);
	gbml_param_value str_int = tu_str("depth", "6");
	gbml_param_value unknown = tu_num("dept", 1);
	gbml_param_value bad_enum = tu_str("mode", "z");
	gbml_param_value twice[] = {tu_num("rate", 0.5), tu_num("rate", 0.5)};

	gbml_env_init_malloc(&env, 1);
	CHECK(parse_one(&env, &p, &bad_int, 1) == GBML_EINVAL);
	free_one(&env, &p);
	CHECK(strstr(env.error, "\"depth\"") && strstr(env.error, "between 1 and 10") && strstr(env.error, "11"));
	CHECK(parse_one(&env, &p, &frac_int, 1) == GBML_EINVAL);
	free_one(&env, &p);
	CHECK(parse_one(&env, &p, &str_int, 1) == GBML_EINVAL);
	free_one(&env, &p);
	CHECK(strstr(env.error, "a string") != NULL);
	CHECK(parse_one(&env, &p, &unknown, 1) == GBML_EINVAL);
	free_one(&env, &p);
	CHECK(strstr(env.error, "unknown parameter \"dept\"") && strstr(env.error, "depth, rate"));
	CHECK(parse_one(&env, &p, &bad_enum, 1) == GBML_EINVAL);
	free_one(&env, &p);
	CHECK(strstr(env.error, "\"a\", \"b\"") != NULL);
	CHECK(parse_one(&env, &p, twice, 2) == GBML_EINVAL);
	free_one(&env, &p);
	CHECK(env.memory_used == 0);
}

TEST(dataset_validation_names_rows)
{
	gbml_env	env;
	gbml_dataset ds;
	float		x3[3] = {1, 2, 3},
				x2[2] = {1, 2},
				xnan[3] = {1, NAN, 3};
	gbml_row	r = {.x = x3,.n_features = 3,.label = 1,.group_is_null = true,.weight_is_null = true};

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&ds, false);
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_OK);
	r.x = x2;
	r.n_features = 2;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_EINVAL);
	CHECK(strstr(env.error, "row 2") && strstr(env.error, "expected 3"));
	r.x = xnan;
	r.n_features = 3;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_EINVAL);
	CHECK(strstr(env.error, "feature 2 is NaN") != NULL);
	r.x = x3;
	r.label_is_null = true;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_EINVAL);
	CHECK(strstr(env.error, "label is NULL") != NULL);
	r.label_is_null = false;
	r.label = INFINITY;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_EINVAL);
	r.label = 1;
	r.group_is_null = false;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_EINVAL);
	CHECK(strstr(env.error, "group_id") != NULL);
	r.group_is_null = true;
	r.weight_is_null = false;
	r.weight = -1;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_EINVAL);
	r.x = NULL;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_EINVAL);
	CHECK(ds.n_rows == 1);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);

	gbml_dataset_init(&ds, true);	/* boosting: NaN is missing */
	r.x = xnan;
	r.weight_is_null = true;
	CHECK(gbml_dataset_append(&ds, &env, &r, true) == GBML_OK);
	CHECK(ds.has_missing);
	gbml_dataset_free(&ds, &env);
}

TEST(dataset_chunks_grow_and_split)
{
	gbml_env	env;
	gbml_dataset ds;

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&ds, false);
	ds.chunk_rows = 1000;
	fill_dataset(&ds, &env, 2500, 4, 1, false);
	CHECK(ds.n_rows == 2500 && ds.n_chunks == 3);
	CHECK(ds.chunks[0]->n_rows == 1000 && ds.chunks[2]->n_rows == 500);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/* Sum of a row-order-independent fingerprint, to check permutations keep rows intact. */
static double
fingerprint(const gbml_dataset *ds)
{
	double		s = 0;

	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++)
		{
			const float *x = gbml_dataset_row(ds, c, r);
			double		h = ds->chunks[c]->label[r] * 7.0 + ds->chunks[c]->group[r];

			for (int j = 0; j < ds->n_features; j++)
				h = h * 1.000001 + x[j];
			s += h * h;
		}
	return s;
}

/*
 * A dataset merged from partial states (a parallel plan) is rewritten into
 * the chunk layout serial appends give, so chunk-walking trainers see the
 * same thing: same chunks, same rows, same serialized bytes.
 */
TEST(canonical_layout_of_merged_datasets)
{
	gbml_env	env;
	gbml_dataset serial,
				part1,
				part2,
				rows;
	uint8_t    *bs,
			   *bm;
	size_t		ls,
				lm;

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&rows, false);
	rows.chunk_rows = 1u << 20;
	fill_dataset(&rows, &env, 3000, 3, 5, false);
	gbml_dataset_init(&serial, false);
	gbml_dataset_init(&part1, false);
	gbml_dataset_init(&part2, false);
	serial.chunk_rows = part1.chunk_rows = part2.chunk_rows = 1000;
	for (int64_t r = 0; r < 3000; r++)
	{
		gbml_row	row = {.x = gbml_dataset_row(&rows, 0, r),.n_features = 3,
			.label = rows.chunks[0]->label[r],.group_is_null = true,.weight = 1};

		/* serial in reverse order; the parallel halves interleaved */
		gbml_row	rev = {.x = gbml_dataset_row(&rows, 0, 2999 - r),.n_features = 3,
			.label = rows.chunks[0]->label[2999 - r],.group_is_null = true,.weight = 1};

		CHECK(gbml_dataset_append(&serial, &env, &rev, true) == GBML_OK);
		CHECK(gbml_dataset_append(r % 7 ? &part1 : &part2, &env, &row, true) == GBML_OK);
	}
	CHECK(gbml_dataset_merge(&part1, &part2, &env) == GBML_OK);
	CHECK(part1.n_chunks != serial.n_chunks || part1.chunks[0]->n_rows != serial.chunks[0]->n_rows);
	CHECK(gbml_dataset_canonicalize(&serial, &env) == GBML_OK);
	CHECK(gbml_dataset_canonicalize(&part1, &env) == GBML_OK);
	CHECK(part1.n_chunks == serial.n_chunks);
	for (int c = 0; c < serial.n_chunks && c < part1.n_chunks; c++)
		CHECK(part1.chunks[c]->n_rows == serial.chunks[c]->n_rows);
	bs = tu_serialize(&serial, &ls);
	bm = tu_serialize(&part1, &lm);
	CHECK(ls == lm && memcmp(bs, bm, ls) == 0);
	free(bs);
	free(bm);
	gbml_dataset_free(&serial, &env);
	gbml_dataset_free(&part1, &env);
	gbml_dataset_free(&rows, &env);
	CHECK(env.memory_used == 0);
}

TEST(canonical_order_ignores_input_order)
{
	gbml_env	env;
	gbml_dataset a,
				b,
				b2;

	gbml_env_init_malloc(&env, 1);
	/* a: rows 0..999 in one dataset; b: the same rows split in two and merged the other way round */
	gbml_dataset_init(&a, false);
	a.chunk_rows = 300;
	fill_dataset(&a, &env, 1000, 3, 7, true);
	gbml_dataset_init(&b, false);
	gbml_dataset_init(&b2, false);
	b.chunk_rows = b2.chunk_rows = 256;
	{
		/* same generator, different split: first 400 into b2, rest into b */
		gbml_dataset tmp;

		gbml_dataset_init(&tmp, false);
		tmp.chunk_rows = 1000;
		fill_dataset(&tmp, &env, 1000, 3, 7, true);
		for (int64_t r = 0; r < 1000; r++)
		{
			gbml_row	row = {.x = gbml_dataset_row(&tmp, 0, r),.n_features = 3,
				.label = tmp.chunks[0]->label[r],.group = tmp.chunks[0]->group[r],.weight = 1};

			CHECK(gbml_dataset_append(r < 400 ? &b2 : &b, &env, &row, true) == GBML_OK);
		}
		gbml_dataset_free(&tmp, &env);
	}
	CHECK(gbml_dataset_merge(&b, &b2, &env) == GBML_OK);
	CHECK(b.n_rows == 1000 && b2.n_rows == 0);
	CHECK_NEAR(fingerprint(&a), fingerprint(&b), 1e-6 * fingerprint(&a));
	{
		double		before = fingerprint(&a);

		CHECK(gbml_dataset_canonicalize(&a, &env) == GBML_OK);
		/* the permutation moves rows, never loses or duplicates one */
		CHECK_NEAR(fingerprint(&a), before, 1e-9 * before);
	}
	CHECK(gbml_dataset_canonicalize(&b, &env) == GBML_OK);
	/* compare row by row, whatever the chunking */
	{
		bool		same = true;
		int64_t		ia = 0;

		for (int c = 0; c < a.n_chunks; c++)
			for (int64_t r = 0; r < a.chunks[c]->n_rows; r++, ia++)
			{
				/* find row ia in b */
				int64_t		ib = ia;
				int			cb = 0;

				while (ib >= b.chunks[cb]->n_rows)
					ib -= b.chunks[cb++]->n_rows;
				if (memcmp(gbml_dataset_row(&a, c, r), gbml_dataset_row(&b, cb, ib), 12) != 0 ||
					a.chunks[c]->label[r] != b.chunks[cb]->label[ib])
					same = false;
			}
		CHECK(same);
	}
	CHECK_NEAR(fingerprint(&a), fingerprint(&b), 1e-6 * fingerprint(&a));
	gbml_dataset_free(&a, &env);
	gbml_dataset_free(&b, &env);
	gbml_dataset_free(&b2, &env);
	CHECK(env.memory_used == 0);
}

TEST(serialize_round_trip_and_rejects_corruption)
{
	gbml_env	env;
	gbml_dataset a,
				b;
	gbml_strbuf s;

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&a, false);
	a.chunk_rows = 100;
	fill_dataset(&a, &env, 250, 5, 3, true);
	gbml_sb_init(&s, &env);
	{
		size_t		n;
		uint8_t    *buf = tu_serialize(&a, &n);

		gbml_sb_append(&s, buf, n);
		free(buf);
	}
	CHECK(s.len == gbml_dataset_serialized_size(&a));
	CHECK(gbml_dataset_deserialize(&b, &env, s.data, s.len) == GBML_OK);
	CHECK(b.n_rows == 250 && b.n_features == 5 && b.group_state == 1);
	CHECK_NEAR(fingerprint(&a), fingerprint(&b), 0);
	gbml_dataset_free(&b, &env);
	/* every truncation fails cleanly and frees what it had allocated */
	{
		size_t		before = env.memory_used;

		for (size_t cut = 0; cut < s.len; cut += 97)
			CHECK(gbml_dataset_deserialize(&b, &env, s.data, cut) == GBML_ECORRUPT);
		CHECK(env.memory_used == before);
	}
	gbml_sb_free(&s);
	gbml_dataset_free(&a, &env);
	CHECK(env.memory_used == 0);
}

TEST(eval_split_is_by_group_and_reproducible)
{
	gbml_env	env;
	gbml_dataset ds,
				ev,
				ds2,
				ev2;

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&ds, false);
	ds.chunk_rows = 128;
	fill_dataset(&ds, &env, 2000, 3, 5, true);
	gbml_dataset_init(&ds2, false);
	ds2.chunk_rows = 128;
	fill_dataset(&ds2, &env, 2000, 3, 5, true);
	CHECK(gbml_dataset_split_eval(&ds, &ev, 0.2, 9, false, &env) == GBML_OK);
	CHECK(gbml_dataset_split_eval(&ds2, &ev2, 0.2, 9, false, &env) == GBML_OK);
	CHECK(ds.n_rows + ev.n_rows == 2000);
	CHECK(ev.n_rows > 200 && ev.n_rows < 600);
	CHECK(ev.n_rows % 10 == 0);		/* whole groups of 10 */
	CHECK(ev.n_rows == ev2.n_rows);
	{
		int64_t		counted = 0;

		for (int c = 0; c < ds.n_chunks; c++)
		{
			counted += ds.chunks[c]->n_rows;
			for (int64_t r = 0; r < ds.chunks[c]->n_rows; r++)
				for (int e = 0; e < ev.n_chunks; e++)
					for (int64_t q = 0; q < ev.chunks[e]->n_rows; q++)
						CHECK(ev.chunks[e]->group[q] != ds.chunks[c]->group[r]);
		}
		CHECK(counted == ds.n_rows);
	}
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&ev, &env);
	gbml_dataset_free(&ds2, &env);
	gbml_dataset_free(&ev2, &env);
	CHECK(env.memory_used == 0);
}

/* Row i's features (a copy of row i % 700: duplicates), label, weight. */
static void
eval_row(int64_t i, float *x, gbml_row *row)
{
	int64_t		k = i % 700;

	for (int f = 0; f < 3; f++)
		x[f] = (float) ((k * 37 + f * 11) % 101) * 0.5f;
	*row = (gbml_row) {.x = x,.n_features = 3,.label = (float) (k % 7),.group_is_null = true,.weight = 1.0f};
}

/* The rows of an eval set as row ids (label * 1000 + the row's first feature's key), sorted. */
static int
eval_keys_sorted(const gbml_dataset *ev, int64_t *out)
{
	int			n = 0;

	for (int c = 0; c < ev->n_chunks; c++)
		for (int64_t r = 0; r < ev->chunks[c]->n_rows; r++)
		{
			const float *x = ev->chunks[c]->x + r * 3;
			int64_t		key = (int64_t) (x[0] * 2) * 1000000 + (int64_t) (x[1] * 2) * 1000 + (int64_t) (x[2] * 2);

			out[n++] = key * 10 + (int64_t) ev->chunks[c]->label[r];
		}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && out[j - 1] > out[j]; j--)
		{
			int64_t		t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

/*
 * Without group ids a row's side is its contents' (its hash): the same
 * rows appended in another order, or beside other rows, are held out the
 * same, and every copy of a row is on one side (no copy in both sets).
 */
TEST(eval_split_without_groups_is_by_row_contents)
{
	gbml_env	env;
	gbml_dataset a,
				ea,
				b,
				eb;
	static int64_t ka[2000],
				kb[3000];
	float		x[3];
	gbml_row	row;
	int			na,
				nb,
				j = 0;

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&a, false);
	gbml_dataset_init(&b, false);
	a.chunk_rows = b.chunk_rows = 128;
	for (int64_t i = 0; i < 1400; i++)
	{
		eval_row(i, x, &row);
		CHECK(gbml_dataset_append(&a, &env, &row, false) == GBML_OK);
	}
	/* b: the same 1400 rows backwards, with 600 more rows of other contents between them */
	for (int64_t i = 1399; i >= 0; i--)
	{
		eval_row(i, x, &row);
		CHECK(gbml_dataset_append(&b, &env, &row, false) == GBML_OK);
		if (i % 7 < 3)
		{
			x[0] = -1.0f - (float) i;
			CHECK(gbml_dataset_append(&b, &env, &row, false) == GBML_OK);
		}
	}
	gbml_dataset_finish_appends(&a, &env);
	gbml_dataset_finish_appends(&b, &env);
	CHECK(gbml_dataset_canonicalize(&a, &env) == GBML_OK);
	CHECK(gbml_dataset_canonicalize(&b, &env) == GBML_OK);
	CHECK(gbml_dataset_split_eval(&a, &ea, 0.25, 9, false, &env) == GBML_OK);
	CHECK(gbml_dataset_split_eval(&b, &eb, 0.25, 9, false, &env) == GBML_OK);
	CHECK(ea.n_rows > 200 && ea.n_rows < 500);
	CHECK(ea.n_rows % 2 == 0);	/* every row of a is there twice: both copies or neither */
	na = eval_keys_sorted(&ea, ka);
	nb = eval_keys_sorted(&eb, kb);
	/* a's held-out rows are exactly b's held-out rows that are a's */
	for (int i = 0; i < nb; i++)
		if (kb[i] >= 0)
		{
			CHECK(j < na && ka[j] == kb[i]);
			j++;
		}
	CHECK(j == na);
	gbml_dataset_free(&a, &env);
	gbml_dataset_free(&ea, &env);
	gbml_dataset_free(&b, &env);
	gbml_dataset_free(&eb, &env);
	CHECK(env.memory_used == 0);
}

static int
train_mean(gbml_env *env, gbml_dataset *ds, uint8_t **model, size_t *len, int64_t passes)
{
	gbml_param_value v = tu_num("passes", (double) passes);

	return gbml_train_values(env, "mean", &v, 1, ds, NULL, model, len);
}

TEST(mean_model_round_trip)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model;
	size_t		len;
	gbml_scorer sc;
	double		out;
	float		x[2] = {0, 0};
	gbml_strbuf info;

	gbml_env_init_malloc(&env, 2);
	gbml_dataset_init(&ds, false);
	{
		for (int i = 0; i < 4; i++)
		{
			float		xi[2] = {(float) i, 1};
			gbml_row	row = {.x = xi,.n_features = 2,.label = (float) i,.group_is_null = true,.weight_is_null = true};

			CHECK(gbml_dataset_append(&ds, &env, &row, true) == GBML_OK);
		}
	}
	CHECK(train_mean(&env, &ds, &model, &len, 1) == GBML_OK);
	CHECK(gbml_scorer_load(&sc, &env, model, len) == GBML_OK);
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_SCORE, &out) == GBML_OK);
	CHECK_NEAR(out, 1.5, 1e-12);
	CHECK(gbml_scorer_predict(&sc, &env, x, 1, GBML_OUT_SCORE, &out) == GBML_EINVAL);
	CHECK(gbml_scorer_predict(&sc, &env, x, 2, GBML_OUT_CLUSTER, &out) == GBML_EUNSUPPORTED);
	gbml_scorer_free(&sc, &env);
	gbml_sb_init(&info, &env);
	CHECK(gbml_model_info_json(&env, model, len, &info) == GBML_OK);
	CHECK(strstr(info.data, "\"algorithm\":\"mean\"") && strstr(info.data, "\"rows\":4") &&
		  strstr(info.data, "\"passes\":1") && strstr(info.data, "\"train_rmse\""));
	CHECK(strstr(info.data, "seconds") == NULL);	/* run-dependent figures stay out of the model */
	gbml_sb_free(&info);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(model_bytes_do_not_depend_on_threads_and_report_gets_timings)
{
	gbml_env	env1,
				env2;
	gbml_dataset a,
				b;
	uint8_t    *m1,
			   *m2;
	size_t		l1,
				l2;
	gbml_parsed_params pp;
	gbml_strbuf report;

	gbml_env_init_malloc(&env1, 1);
	gbml_env_init_malloc(&env2, 2);
	gbml_dataset_init(&a, false);
	gbml_dataset_init(&b, false);
	fill_dataset(&a, &env1, 500, 3, 4, false);
	fill_dataset(&b, &env2, 500, 3, 4, false);
	CHECK(gbml_parse_training_params(&env1, gbml_algorithm_by_name("mean"), NULL, 0, &pp) == GBML_OK);
	gbml_sb_init(&report, &env1);
	CHECK(gbml_train_report(&env1, &pp, &a, NULL, &m1, &l1, &report) == GBML_OK);
	CHECK(gbml_train(&env2, &pp, &b, NULL, &m2, &l2) == GBML_OK);
	CHECK(l1 == l2 && memcmp(m1, m2, l1) == 0);
	CHECK(report.data && strstr(report.data, "\"train_seconds\"") && strstr(report.data, "\"threads\":1"));
	gbml_sb_free(&report);
	gbml_free(&env1, m1);
	gbml_free(&env2, m2);
	gbml_parsed_params_free(&env1, &pp);
	gbml_dataset_free(&a, &env1);
	gbml_dataset_free(&b, &env2);
	CHECK(env1.memory_used == 0 && env2.memory_used == 0);
}

TEST(progress_callback_cancels_training)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model = NULL;
	size_t		len;
	tu_cancel	cancel = {.at_call = 3};

	gbml_env_init_malloc(&env, 1);
	env.progress_fn = tu_cancel_progress;
	env.progress_ctx = &cancel;
	gbml_dataset_init(&ds, false);
	fill_dataset(&ds, &env, 100, 2, 1, false);
	CHECK(train_mean(&env, &ds, &model, &len, 1000) == GBML_ECANCELLED);
	CHECK(cancel.calls == 3);
	CHECK(model == NULL);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(corrupted_models_are_rejected_not_crashed)
{
	gbml_env	env;
	gbml_dataset ds;
	uint8_t    *model;
	size_t		len;
	gbml_rng	rng;
	int			accepted = 0;

	gbml_env_init_malloc(&env, 1);
	gbml_dataset_init(&ds, false);
	fill_dataset(&ds, &env, 50, 3, 2, false);
	CHECK(train_mean(&env, &ds, &model, &len, 1) == GBML_OK);
	gbml_rng_seed(&rng, 42);
	for (int trial = 0; trial < 5000; trial++)
	{
		uint8_t    *bad = malloc(len);
		size_t		blen = len;
		gbml_scorer sc;
		int			kind = trial % 3;

		memcpy(bad, model, len);
		if (kind == 0)
			blen = gbml_rng_below(&rng, len);	/* truncation */
		else if (kind == 1)
			bad[gbml_rng_below(&rng, len)] ^= (uint8_t) (1u << gbml_rng_below(&rng, 8));	/* bit flip */
		else
			for (size_t i = GBML_MODEL_HEADER_SIZE; i < len; i++)
				bad[i] = (uint8_t) gbml_rng_next(&rng); /* foreign payload */
		if (gbml_scorer_load(&sc, &env, bad, blen) == GBML_OK)
		{
			accepted++;
			gbml_scorer_free(&sc, &env);
		}
		free(bad);
	}
	CHECK(accepted == 0);
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}
