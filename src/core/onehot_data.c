/*
 * onehot_data.c — the passes over rows the one-hot encoding needs
 * (onehot.h): counting each categorical feature's categories over the
 * training rows, checking every value on the way, and writing a training
 * and an eval set's encoded rows into datasets of their own.
 *
 * Why whole encoded datasets rather than encoding on the fly: the trainers
 * (SAGA's epochs and passes on the CPU and the GPU, K-Means' blocked
 * kernels on both) read plain float rows from wherever the chunks live;
 * encoded rows in a dataset reach every one of those paths unchanged, and
 * spill to temporary files under the memory budget like any rows.  The
 * cost is the encoded rows' memory (or file) beside the source's.
 */
#include "onehot.h"
#include "onehot_internal.h"
#include "chunk_prefetch.h"
#include "chunk_store_file.h"
#include "shard_link.h"

#include <stdio.h>
#include <string.h>

static const char *
feature_name(const gbml_feature_schema *s, int j)
{
	const char *name = gbml_schema_name(s, j);

	return name ? name : "?";
}

static const char *
feature_type(const gbml_feature_schema *s, int j)
{
	const char *t = s->features[j].source_type;

	return t && t[0] ? t : "numeric";
}

/* A numeric column that is not finite (NaN is SQL NULL): the error and its hint. */
static int
numeric_error(gbml_env *env, const char *algo, const gbml_feature_schema *s, int j, const char *what)
{
	gbml_error(env, GBML_EINVAL, "%s: column \"%s\" (%s) is NULL, NaN or infinite in a row of %s; %s needs finite numeric features",
			   algo, feature_name(s, j), feature_type(s, j), what, algo);
	return gbml_hint(env, "Filter those rows out or replace the missing values (coalesce) before training; only categorical columns may be NULL.");
}

/* A categorical value that is no category id of its feature: the glue and the schema disagree. */
static int
category_error(gbml_env *env, const char *algo, const gbml_feature_schema *s, int j, float v, const char *what)
{
	return gbml_error(env, GBML_EINVAL, "%s: column \"%s\" holds %g in a row of %s, which is not the id of one of its %d categories",
					  algo, feature_name(s, j), (double) v, what, s->features[j].n_categories);
}

/*
 * Checks one raw row: numeric inputs finite (only looked at when the set
 * has non-finite values), categorical ones category ids or NaN, and the
 * unseen id where allowed (eval rows).
 */
static int
check_row(const gbml_onehot *e, const float *x, bool numeric_too, bool allow_unseen, const char *algo,
		  const char *what, gbml_env *env)
{
	for (int i = 0; numeric_too && i < e->n_numeric; i++)
		if (!isfinite(x[e->col_input[i]]))
			return numeric_error(env, algo, e->schema, e->col_input[i], what);
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];
		float		v = x[bl->input];

		if (gbml_onehot_slot(bl, v) < 0 && !(allow_unseen && v == GBML_CATEGORY_UNSEEN))
			return category_error(env, algo, e->schema, bl->input, v, what);
	}
	return GBML_OK;
}

/* A cancel check between chunks: counting or encoding a big table takes a while. */
static int
chunk_progress(gbml_env *env, const gbml_dataset *ds, int c)
{
	gbml_progress_info info = {"one-hot encoding", c + 1, ds->n_chunks, NULL, 0};

	return gbml_progress(env, &info) ? gbml_error(env, GBML_ECANCELLED, "canceled") : GBML_OK;
}

/* Adds chunk rows x[0 .. rows) into the blocks' counts, checking each row. */
static int
count_rows(const gbml_dataset *ds, gbml_onehot *e, int64_t **counts, const float *x, int64_t rows,
		   const char *algo, gbml_env *env)
{
	for (int64_t r = 0; r < rows; r++)
	{
		const float *row = x + (size_t) r * (size_t) ds->n_features;
		int			rc = check_row(e, row, ds->has_missing, false, algo, "the training set", env);

		if (rc != GBML_OK)
			return rc;
		for (int k = 0; k < e->n_blocks; k++)
			counts[k][gbml_onehot_slot(&e->blocks[k], row[e->blocks[k].input])]++;
	}
	return GBML_OK;
}

/* Every training row's slot counted per block (counts exact: in any order the same). */
static int
count_pass(const gbml_dataset *ds, gbml_onehot *e, int64_t **counts, const char *algo, gbml_env *env)
{
	gbml_chunk_prefetch *rd = gbml_chunk_prefetch_open(ds, env);
	const float *x;
	int64_t		rows;
	int			c,
				rc;

	if (rd == NULL)
		return env->error_code;
	while ((rc = gbml_chunk_prefetch_next(rd, &x, &rows, &c)) > 0)
		if ((rc = count_rows(ds, e, counts, x, rows, algo, env)) != GBML_OK ||
			(rc = chunk_progress(env, ds, c)) != GBML_OK)
			break;
	gbml_chunk_prefetch_close(rd);
	return rc;
}

static void
free_counts(int64_t **counts, int n, gbml_env *env)
{
	for (int k = 0; counts && k < n; k++)
		gbml_free(env, counts[k]);
	gbml_free(env, counts);
}

/*
 * The schema's counts instead (the union's, across servers; checked as
 * they arrived, onehot_counts.c): every row is still checked as the
 * encoding writes it (encode_rows).
 */
static int
given_counts(const gbml_onehot *e, int64_t **counts, const char *algo, gbml_env *env)
{
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_feature_def *f = &e->schema->features[e->blocks[k].input];

		if (f->category_counts == NULL)
			return gbml_error(env, GBML_EINVAL, "%s: column \"%s\" has no category counts from the coordinator",
							  algo, feature_name(e->schema, e->blocks[k].input));
		memcpy(counts[k], f->category_counts, sizeof(int64_t) * ((size_t) f->n_categories + 1));
	}
	return GBML_OK;
}

/* Each block's input and categories: the schema's categorical features, in order. */
static void
set_block_inputs(gbml_onehot *e)
{
	for (int j = 0, k = 0; j < e->n_inputs; j++)
		if (gbml_feature_is_categorical(e->schema, j))
		{
			e->blocks[k].input = j;
			e->blocks[k++].n_categories = e->schema->features[j].n_categories;
		}
}

int
gbml_onehot_count(const gbml_dataset *ds, const char *algo, int64_t *const *counts, gbml_env *env)
{
	const gbml_feature_schema *s = ds->schema;
	gbml_onehot *e;
	int			rc;

	if (s == NULL || (ds->n_rows > 0 && s->n_features != ds->n_features))
		return gbml_error(env, GBML_EINVAL, "%s: the feature schema describes %d features, the rows have %d", algo,
						  s ? s->n_features : 0, ds->n_features);
	if ((e = gbml_onehot_new(s, gbml_schema_n_categorical(s), false, env)) == NULL)
		return env->error_code;
	set_block_inputs(e);
	for (int k = 0; k < e->n_blocks; k++)
		memset(counts[k], 0, sizeof(int64_t) * ((size_t) e->blocks[k].n_categories + 1));
	rc = count_pass(ds, e, (int64_t **) counts, algo, env);
	gbml_onehot_free(e, env);
	return rc;
}

/* The blocks' inputs, the counts, the kept slots and the layout. */
static int
learn_blocks(const gbml_dataset *ds, const gbml_onehot_options *o, gbml_onehot *e, gbml_env *env)
{
	int64_t   **counts = gbml_alloc0(env, sizeof(int64_t *) * (size_t) e->n_blocks);
	int			k,
				rc = GBML_OK;

	if (counts == NULL)
		return env->error_code;
	set_block_inputs(e);
	for (k = 0; k < e->n_blocks; k++)
		if ((counts[k] = gbml_alloc0(env, sizeof(int64_t) * ((size_t) e->blocks[k].n_categories + 1))) == NULL)
			rc = env->error_code;
	if (rc == GBML_OK)
		rc = o->union_counts ? given_counts(e, counts, o->algo->name, env) : count_pass(ds, e, counts, o->algo->name, env);
	for (k = 0; rc == GBML_OK && k < e->n_blocks; k++)
		rc = gbml_onehot_keep(&e->blocks[k], counts[k], o->max_categories, env);
	free_counts(counts, e->n_blocks, env);
	if (rc == GBML_OK && (rc = gbml_onehot_layout(e, env)) == GBML_EINVAL)
	{
		gbml_error(env, GBML_EINVAL, "%s: the one-hot encoding would have more than %d columns",
				   o->algo->name, GBML_MAX_FEATURES);
		rc = gbml_hint(env, o->max_categories > 0 ? "Lower \"max_categories\"." :
					   "Train on fewer categorical columns, or group rare categories in the query.");
	}
	return rc;
}

/* The encoding of ds's categorical features, learned from its rows. */
static int
learn(const gbml_dataset *ds, const gbml_onehot_options *o, gbml_env *env, gbml_onehot **out)
{
	const gbml_feature_schema *s = ds->schema;
	gbml_onehot *e;
	int			rc;

	*out = NULL;
	if (s == NULL || s->n_features != ds->n_features)
		return gbml_error(env, GBML_EINVAL, "%s: the feature schema describes %d features, the rows have %d",
						  o->algo->name, s ? s->n_features : 0, ds->n_features);
	if ((e = gbml_onehot_new(s, gbml_schema_n_categorical(s), o->other, env)) == NULL)
		return env->error_code;
	if ((rc = learn_blocks(ds, o, e, env)) != GBML_OK)
	{
		gbml_onehot_free(e, env);
		return rc;
	}
	*out = e;
	return GBML_OK;
}

/* Appends the encoded copies of chunk c's rows x[0 .. rows) of src to out. */
static int
encode_rows(const gbml_onehot *e, const gbml_dataset *src, int c, const float *x, int64_t rows, float *buf,
			const char *algo, const char *what, gbml_env *env, gbml_dataset *out)
{
	const gbml_chunk *ch = src->chunks[c];

	for (int64_t r = 0; r < rows; r++)
	{
		const float *raw = x + (size_t) r * (size_t) src->n_features;
		gbml_row	row = {.x = buf,.n_features = e->n_cols,.label = ch->label[r],.group = ch->group[r],
		.group_is_null = src->group_state <= 0,.weight = ch->weight[r]};
		int			rc = check_row(e, raw, src->has_missing, true, algo, what, env);

		if (rc != GBML_OK)
			return rc;
		gbml_onehot_row(e, raw, buf);
		if ((rc = gbml_dataset_append(out, env, &row, false)) != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

/* src's rows encoded into out (initialised here), in src's order; sealed for readers. */
static int
encode_set(const gbml_onehot *e, const gbml_dataset *src, const gbml_onehot_options *o, const char *what,
		   gbml_env *env, gbml_dataset *out)
{
	gbml_chunk_prefetch *rd;
	float	   *buf;
	const float *x;
	int64_t		rows;
	int			c,
				rc;
	char		step[64];

	gbml_dataset_init(out, false);
	gbml_plan_spill(o->algo, env, out);
	/* the rows keep src's canonical order as written (its ranks): grouped by hash, every read would be a gather */
	out->spill_by_hash = false;
	/*
	 * The plan's threshold is a share of the whole budget, but src's rows
	 * are still held: the encoded rows spill once they would take half of
	 * what is free now, and without room for a chunk of them, a named ERROR.
	 */
	snprintf(step, sizeof(step), "one-hot encoding %s", what);
	if ((rc = gbml_plan_spill_after(env, out, e->n_cols, step)) != GBML_OK)
		return rc;
	/* rows that went to files encode to more floats still: those go to files from the start */
	if (out->store_open == NULL && env->temp_create && src->store && strcmp(src->store->residence, "file") == 0)
		gbml_dataset_stream_to(out, gbml_chunk_store_file_open, 0, false);
	if ((buf = gbml_alloc_array(env, (size_t) e->n_cols, sizeof(float))) == NULL)
		return env->error_code;
	if ((rd = gbml_chunk_prefetch_open(src, env)) == NULL)
	{
		gbml_free(env, buf);
		return env->error_code;
	}
	while ((rc = gbml_chunk_prefetch_next(rd, &x, &rows, &c)) > 0)
		if ((rc = encode_rows(e, src, c, x, rows, buf, o->algo->name, what, env, out)) != GBML_OK ||
			(rc = chunk_progress(env, src, c)) != GBML_OK)
			break;
	gbml_chunk_prefetch_close(rd);
	gbml_free(env, buf);
	if (rc == GBML_OK && (rc = gbml_dataset_seal(out, env)) == GBML_OK)
		rc = gbml_dataset_copy_ranks(src, out, env);	/* rows kept as written: the same canonical order */
	return rc;
}

/*
 * The eval set's ids must index the training set's categories: an eval
 * set split from the training set shares its schema; one read apart must
 * have been given ids from the training schema (GBML_CATEGORY_UNSEEN for
 * the rest), which a schema of its own with other categories would break.
 */
static int
check_eval_schema(const gbml_onehot *e, const gbml_dataset *eval, const char *algo, gbml_env *env)
{
	const gbml_feature_schema *s = eval->schema;

	for (int k = 0; s && s != e->schema && k < e->n_blocks; k++)
	{
		const gbml_feature_def *t = &e->schema->features[e->blocks[k].input],
				   *v = e->blocks[k].input < s->n_features ? &s->features[e->blocks[k].input] : NULL;
		bool		same = v && v->kind == GBML_FEATURE_CATEGORICAL && v->n_categories == t->n_categories;

		for (int c = 0; same && c < t->n_categories; c++)
			same = strcmp(v->categories[c], t->categories[c]) == 0;
		if (!same)
			return gbml_error(env, GBML_EINVAL, "%s: column \"%s\" of the eval set does not have the training set's categories",
							  algo, feature_name(e->schema, e->blocks[k].input));
	}
	return GBML_OK;
}

/*
 * The coordinator's view of its shards' encoded rows: each shard encoded
 * its own with the same union counts, so their hellos must give the
 * encoding's width.
 */
static int
shards_encoded(const gbml_onehot *e, const gbml_dataset *ds, const gbml_onehot_options *o, gbml_env *env,
			   gbml_dataset *xds)
{
	int64_t		n;
	int			d,
				rc;

	if ((rc = gbml_shards_describe(ds->shards, o->algo->shard->hello_magic, env, &n, &d)) != GBML_OK)
		return rc;
	if (d != e->n_cols || n != ds->n_rows)
		return gbml_error(env, GBML_EINVAL, "%s: the shards encoded %lld rows into %d columns, the coordinator "
						  "expected %lld rows of %d", o->algo->name, (long long) n, d, (long long) ds->n_rows,
						  e->n_cols);
	xds->shards = ds->shards;
	xds->n_rows = ds->n_rows;
	xds->n_features = e->n_cols;
	return GBML_OK;
}

int
gbml_onehot_prepare(const gbml_dataset *ds, const gbml_dataset *eval, const gbml_onehot_options *o,
					gbml_env *env, gbml_onehot **enc, gbml_dataset *xds, gbml_dataset *xeval)
{
	int			rc;

	gbml_dataset_init(xds, false);
	gbml_dataset_init(xeval, false);
	if (ds->shards && !o->union_counts)
		return gbml_error(env, GBML_EINVAL, "%s: one-hot encoding rows on shards needs the union's counts", o->algo->name);
	if ((rc = learn(ds, o, env, enc)) != GBML_OK)
		return rc;
	if (ds->shards)
		rc = shards_encoded(*enc, ds, o, env, xds);
	else
		rc = encode_set(*enc, ds, o, "the training set", env, xds);
	if (rc == GBML_OK && eval && eval->n_rows > 0 &&
		(rc = check_eval_schema(*enc, eval, o->algo->name, env)) == GBML_OK)
		rc = encode_set(*enc, eval, o, "the eval set", env, xeval);
	if (rc != GBML_OK)
	{
		gbml_dataset_free(xds, env);
		gbml_dataset_free(xeval, env);
		gbml_onehot_free(*enc, env);
		*enc = NULL;
	}
	return rc;
}

void
gbml_onehot_finish(gbml_onehot *enc, gbml_dataset *xds, gbml_dataset *xeval, gbml_env *env)
{
	gbml_dataset *sets[2] = {xds, xeval};
	gbml_spill_stats st;

	for (int i = 0; i < 2; i++)
	{
		if (sets[i] == NULL)
			continue;
		if (gbml_chunk_store_file_stats(sets[i]->store, &st))
		{
			env->trainer_temp_written += (int64_t) st.bytes_written;
			env->trainer_temp_read += (int64_t) st.bytes_read;
			if (i == 0 && st.rows_spilled > env->trainer_temp_rows)
				env->trainer_temp_rows = st.rows_spilled;
		}
		gbml_dataset_free(sets[i], env);
	}
	gbml_onehot_free(enc, env);
}

/* The first numeric column of rows x[0 .. rows) holding a non-finite value, or -1. */
static int
first_bad_numeric(const gbml_feature_schema *s, const float *x, int64_t rows, int d)
{
	for (int64_t r = 0; r < rows; r++)
		for (int j = 0; j < d; j++)
			if (!gbml_feature_is_categorical(s, j) && !isfinite(x[(size_t) r * (size_t) d + j]))
				return j;
	return -1;
}

int
gbml_onehot_check_numeric(const gbml_dataset *ds, const char *algo, const char *what, gbml_env *env)
{
	const gbml_feature_schema *s = ds->schema;
	gbml_chunk_prefetch *rd;
	const float *x;
	int64_t		rows;
	int			c,
				bad = -1,
				rc;

	if (!ds->has_missing || s == NULL || s->n_features != ds->n_features)
		return GBML_OK;
	if ((rd = gbml_chunk_prefetch_open(ds, env)) == NULL)
		return env->error_code;
	while (bad < 0 && (rc = gbml_chunk_prefetch_next(rd, &x, &rows, &c)) > 0)
		bad = first_bad_numeric(s, x, rows, ds->n_features);
	gbml_chunk_prefetch_close(rd);
	if (bad >= 0)
		return numeric_error(env, algo, s, bad, what);
	return rc < 0 ? rc : GBML_OK;
}
