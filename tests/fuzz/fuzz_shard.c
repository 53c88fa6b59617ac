/*
 * fuzz_shard.c — a shard's answers (gbml._shard_step) to arbitrary
 * requests.  Any session may call gbml._shard_step, and a coordinator of
 * another version may send what this one does not expect: every request
 * must end in an answer or an error, never a crash, an out-of-bounds access
 * or a leak.
 *
 * The input's first byte picks the algorithm (K-Means, the linear models
 * or boosting, by its value mod 3; boosting's trees are Depthwise when its
 * value / 3 is 1 mod 6, its loss MultiClass when 2 mod 6, when 3 mod 6 it
 * holds out eval_fraction 0.3 of its rows as an eval set, and when 4 mod 6
 * its features 1 and 2 are categorical (11 and 3 categories, some NULL:
 * the categorical requests) with that eval set too, when 5 mod 6 the same
 * with Depthwise trees that split categories as sets (masks in the
 * splits); with an eval set, when its value / 18 is odd, every row of the
 * shard is held out (a small partition's: no training rows, the eval rows
 * only); when its value / 36 is odd, the rows have group ids (queries of
 * 10) and, but with MultiClass, the loss is RMSE with subsample 0.7 (the
 * grouped hashes' pages, the training order's ranks); K-Means' and
 * the linear models' shards hold one out when their value / 3 is odd, for
 * the coordinator to gather, and take features 1 and 2 as categorical
 * when their value / 6 is odd (K-Means with one_hot): the first request
 * is then read as the coordinator's category counts (onehot_counts.h),
 * and the shard opens on its rows' true counts whatever it held); the shard
 * opens on a small fixed dataset (300 rows x 3 features, labels 0/1); a
 * K-Means shard first gets
 * its rows' global indices (as
 * every coordinator sends first); then the rest of the input is a sequence
 * of requests, each a 16-bit length and that many bytes.  After the last
 * one the shard closes and the env must hold nothing.  FUZZ_SHARD_TRACE=1
 * prints each request's op and outcome (to check a seed's session is
 * answered to its end).
 */
#include "fuzz_common.h"

#include "algorithm.h"
#include "dataset.h"
#include "schema.h"
#include "shard_link.h"
#include "onehot_counts.h"
#include "strbuf.h"

#include <math.h>

#define FS_ROWS 300
#define FS_FEATURES 3

/* The categorical variant's schema: a number, then 11 and 3 categories. */
static char *fs_city[11] = {"c00", "c01", "c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09", "c10"};
static char *fs_tier[3] = {"t0", "t1", "t2"};
static gbml_feature_def fs_def[FS_FEATURES] = {
	{.name = "x", .kind = GBML_FEATURE_NUMERIC},
	{.name = "city", .kind = GBML_FEATURE_CATEGORICAL, .n_categories = 11, .categories = fs_city},
	{.name = "tier", .kind = GBML_FEATURE_CATEGORICAL, .n_categories = 3, .categories = fs_tier},
};
static gbml_feature_schema fs_schema = {.n_features = FS_FEATURES, .features = fs_def};

static void
fill(gbml_dataset *ds, gbml_env *env, bool categorical, bool groups)
{
	gbml_dataset_init(ds, categorical);
	ds->schema = categorical ? &fs_schema : NULL;
	for (int i = 0; i < FS_ROWS; i++)
	{
		float		x[FS_FEATURES] = {(float) (i % 7), (float) ((i * 13) % 11) - (categorical ? 0 : 5),
		categorical && i % 17 == 0 ? NAN : (float) (i % 3) * (categorical ? 1.0f : 0.5f)};
		gbml_row	row = {0};

		row.x = x;
		row.n_features = FS_FEATURES;
		row.label = (float) (i % 2);
		row.group = i / 10;
		row.group_is_null = !groups;
		row.weight_is_null = true;
		FUZZ_CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK, "append");
	}
	FUZZ_CHECK(gbml_dataset_canonicalize(ds, env) == GBML_OK, "canonicalize");
}

/*
 * The union's category counts a K-Means or linear-model shard opens on
 * (the glue's first step): the input's next request parsed as the
 * coordinator's counts message (which must not crash, whatever it holds),
 * then the rows' true counts given to the schema.
 */
static int64_t fs_city_counts[12],
			fs_tier_counts[4];

static void
give_counts(const gbml_dataset *ds, fuzz_reader *r, gbml_env *env)
{
	int64_t		scratch_city[12] = {0},
				scratch_tier[4] = {0};
	int64_t    *scratch[2] = {scratch_city, scratch_tier},
			   *counts[2] = {fs_city_counts, fs_tier_counts};
	uint8_t		lo = fr_u8(r),
				hi = fr_u8(r);
	size_t		len = (size_t) lo | (size_t) hi << 8;
	uint8_t    *req = malloc(len ? len : 1);
	gbml_strbuf msg;

	fr_bytes(r, req, len);
	(void) gbml_onehot_counts_add(&fs_schema, req, len, scratch, "the fuzzer", env);
	free(req);
	memset(fs_city_counts, 0, sizeof(fs_city_counts));
	memset(fs_tier_counts, 0, sizeof(fs_tier_counts));
	gbml_sb_init(&msg, env);
	FUZZ_CHECK(gbml_onehot_counts_of_rows(ds, "fuzz", env, &msg) == GBML_OK, "counts: %s", env->error);
	FUZZ_CHECK(gbml_onehot_counts_add(&fs_schema, (const uint8_t *) msg.data, msg.len, counts, "the rows", env) ==
			   GBML_OK, "counts back: %s", env->error);
	gbml_sb_free(&msg);
	fs_def[1].category_counts = fs_city_counts;
	fs_def[2].category_counts = fs_tier_counts;
}

/*
 * A shard whose every row eval_fraction holds out: its rows become the
 * rows the split held out, which the same split then holds out again.
 */
static void
hold_out_every_row(gbml_dataset *ds, gbml_dataset *eval, const gbml_parsed_params *pp, gbml_env *env,
				   bool *has_eval)
{
	const gbml_feature_schema *schema = ds->schema;
	bool		allow_missing = ds->allow_missing;

	gbml_dataset_free(ds, env);
	gbml_dataset_init(ds, allow_missing);
	ds->schema = schema;
	for (int c = 0; c < eval->n_chunks; c++)
	{
		const gbml_chunk *ch = eval->chunks[c];

		for (int64_t i = 0; i < ch->n_rows; i++)
		{
			gbml_row	row = {.x = ch->x + i * FS_FEATURES,.n_features = FS_FEATURES,.label = ch->label[i],
			.group = ch->group[i],.group_is_null = eval->group_state <= 0,.weight_is_null = true};

			FUZZ_CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK, "append");
		}
	}
	gbml_dataset_free(eval, env);
	FUZZ_CHECK(gbml_dataset_canonicalize(ds, env) == GBML_OK, "canonicalize");
	FUZZ_CHECK(gbml_shard_split_eval(pp, ds, eval, has_eval, env) == GBML_OK && ds->n_rows == 0 && *has_eval,
			   "every row held out: %s", env->error);
}

/* The global indices every K-Means coordinator sends first: this shard holds rows 0 .. n-1 (its training rows). */
static void
send_ranks(const gbml_shard_ops *ops, void *state, int64_t n, gbml_env *env)
{
	int64_t		msg[4 + FS_ROWS];
	gbml_strbuf reply;

	msg[0] = 1;					/* KM_OP_RANKS: the union's rows, the page's first row and its length */
	msg[1] = n;
	msg[2] = 0;
	msg[3] = n;
	for (int i = 0; i < n; i++)
		msg[4 + i] = i;
	gbml_sb_init(&reply, env);
	FUZZ_CHECK(gbml_shard_answer(ops, state, (const uint8_t *) msg, sizeof(int64_t) * (size_t) (4 + n), &reply) ==
			   GBML_OK, "ranks");
	gbml_sb_free(&reply);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_reader r = {data, size};
	uint8_t		first = fr_u8(&r);
	int			pick = first % 3;
	bool		kmeans = pick == 0;
	/*
	 * boosting's variants: symmetric trees, Depthwise (node splits in its
	 * requests), MultiClass (classes), an eval set (eval terms, the cut)
	 */
	int			variant = pick == 2 ? (first / 3) % 6 : (first / 3) % 2 ? 3 : 0,
				nv = variant == 5 ? 5 : variant == 4 ? 3 : variant ? 2 : 1;
	bool		categorical = pick == 2 ? variant >= 4 : (first / 6) % 2 == 1;
	bool		groups = pick == 2 && (first / 36) % 2 == 1;
	bool		trace = getenv("FUZZ_SHARD_TRACE") != NULL,
				has_eval = false;
	gbml_dataset eval;
	const gbml_algorithm *algo = gbml_algorithm_by_name(pick == 0 ? "kmeans" : pick == 1 ? "saga" : "boost");
	gbml_param_value v[8];
	gbml_parsed_params pp;
	gbml_env	env;
	gbml_dataset ds;
	gbml_strbuf hello;
	void	   *state = NULL;

	memset(v, 0, sizeof(v));
	fuzz_env_init(&env);
	fill(&ds, &env, categorical, groups);
	v[0].key = kmeans ? "k" : pick == 1 ? "loss" : "depth";
	v[0].kind = pick == 1 ? GBML_VALUE_STRING : GBML_VALUE_NUMBER;
	v[0].string = pick == 1 ? "logistic" : NULL;
	v[0].number = 3;
	v[1].key = variant == 1 ? "grow_policy" : variant == 2 ? "loss" : "eval_fraction";
	v[1].kind = variant >= 3 ? GBML_VALUE_NUMBER : GBML_VALUE_STRING;
	v[1].string = variant == 1 ? "Depthwise" : variant == 2 ? "MultiClass" : NULL;
	v[1].number = 0.3;
	/* the categorical variants: tier one-hot, city ordered statistics, or a set */
	v[2].key = "one_hot_max_size";
	v[2].kind = GBML_VALUE_NUMBER;
	v[2].number = 4;
	v[3].key = "grow_policy";
	v[3].kind = GBML_VALUE_STRING;
	v[3].string = "Depthwise";
	v[4].key = "categorical_split";
	v[4].kind = GBML_VALUE_STRING;
	v[4].string = "sets";
	if (groups)
	{
		/* a pointwise loss with group ids: subsample draws by the union's training order */
		v[nv].key = "subsample";
		v[nv].kind = GBML_VALUE_NUMBER;
		v[nv++].number = 0.7;
		if (variant != 2)
		{
			v[nv].key = "loss";
			v[nv].kind = GBML_VALUE_STRING;
			v[nv++].string = "RMSE";
		}
	}
	if (kmeans && categorical)
	{
		v[nv].key = "one_hot";
		v[nv].kind = GBML_VALUE_BOOL;
		v[nv++].boolean = true;
	}
	FUZZ_CHECK(gbml_parse_training_params(&env, algo, v, nv, &pp) == GBML_OK, "params: %s", env.error);
	FUZZ_CHECK(gbml_shard_split_eval(&pp, &ds, &eval, &has_eval, &env) == GBML_OK, "eval split: %s", env.error);
	if (pick == 2 && has_eval && (first / 18) % 2 == 1)
		hold_out_every_row(&ds, &eval, &pp, &env, &has_eval);
	if (categorical && pick < 2)
		give_counts(&ds, &r, &env);
	gbml_sb_init(&hello, &env);
	FUZZ_CHECK(algo->shard->open(&ds, has_eval ? &eval : NULL, pp.algo_params, &env, &state, &hello) == GBML_OK,
			   "open: %s", env.error);
	gbml_sb_free(&hello);
	if (kmeans)
		send_ranks(algo->shard, state, ds.n_rows, &env);
	while (r.left > 0)
	{
		uint8_t		lo = fr_u8(&r),
					hi = fr_u8(&r);
		size_t		len = (size_t) lo | (size_t) hi << 8;
		uint8_t    *req = malloc(len ? len : 1);
		gbml_strbuf reply;

		fr_bytes(&r, req, len);
		gbml_sb_init(&reply, &env);
		if (gbml_shard_answer(algo->shard, state, req, len, &reply) != GBML_OK && trace)
			fprintf(stderr, "request %lld: %s\n", (long long) (len >= 8 ? *(const int64_t *) req : -1), env.error);
		else if (trace)
			fprintf(stderr, "request %lld: answered\n", (long long) (len >= 8 ? *(const int64_t *) req : -1));
		gbml_sb_free(&reply);
		free(req);
	}
	algo->shard->close(state);
	fs_def[1].category_counts = fs_def[2].category_counts = NULL;
	gbml_parsed_params_free(&env, &pp);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&eval, &env);
	fuzz_env_check_released(&env, "shard");
	return 0;
}
