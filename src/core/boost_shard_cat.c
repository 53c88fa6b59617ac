/*
 * boost_shard_cat.c — a boosting shard's categorical inputs (the shard's
 * half of boost_shards_cat.c): its rows' kept category ids and labels
 * answered in pages, its queries' sizes, then the coordinator's derived
 * features taken in — the model's section and the derived borders, with
 * which the shard bins its eval rows itself (the final statistics, as
 * scoring uses them), and every training row's derived bins, which only
 * the coordinator can compute (the ordered statistics run along the
 * union's permutation).  Once every training row's bins are in, the row
 * side's arrays are made (boost_trainer_arrays) and training can start.
 *
 * Each request is read and checked whole before it changes anything.
 */
#include "boost_internal.h"

#include <math.h>
#include <string.h>

/* The kept ids of categorical input k. */
static inline const float *
kept_ids(const gbml_boost_keep *keep, int k)
{
	return keep->out + (size_t) k * (size_t) keep->n_rows;
}

int
boost_cat_rows_page(const trainer *T, gbml_msg_reader *r, gbml_strbuf *reply)
{
	const gbml_boost_keep *keep = &T->cat.keep;
	int64_t		n = T->train.n,
				first = gbml_msg_get_count(r, n),
				count = gbml_msg_get_count(r, INT64_MAX / 4),
				m;

	if (r->bad || r->p != r->end || keep->out == NULL)
	{
		r->bad = true;
		return GBML_OK;
	}
	m = n - first < count ? n - first : count;
	gbml_msg_put_i64(reply, m);
	for (int k = 0; k < T->cat.n_cat; k++)
		gbml_msg_put(reply, kept_ids(keep, k) + first, sizeof(float) * (size_t) m);
	gbml_msg_put(reply, T->train.label + first, sizeof(float) * (size_t) m);
	return GBML_OK;
}

int
boost_cat_group_sizes(const trainer *T, gbml_strbuf *reply)
{
	const boost_data *d = &T->train;

	gbml_msg_put_i64(reply, d->n_groups);
	for (int64_t g = 0; g < d->n_groups; g++)
		gbml_msg_put_i64(reply, d->group_off[g + 1] - d->group_off[g]);
	return GBML_OK;
}

/* A derived feature's borders: at most the maximum, finite and ascending. */
static void
read_derived_borders(gbml_msg_reader *r, int *count, float *values)
{
	int64_t		c = gbml_msg_get_count(r, GBML_BOOST_MAX_BORDERS);

	gbml_msg_get(r, values, sizeof(float) * (size_t) c);
	for (int64_t j = 0; j < c && !r->bad; j++)
		r->bad = !isfinite(values[j]) || (j > 0 && !(values[j] > values[j - 1]));
	*count = (int) c;
}

/* The eval rows' bin column of derived feature d: its value from the final statistics. */
static int
bin_eval_column(trainer *T, const gbml_boost_inputs *in, int d, float *values)
{
	const gbml_boost_derived *e = &in->derived[d];
	int			column = T->n_inputs + d,
				k = 0;
	const float *ids;

	while (k < T->cat.n_cat && T->cat.col[k] != e->source)
		k++;
	if (k == T->cat.n_cat)
		return gbml_error(T->env, GBML_EINVAL, "boost shard: a derived feature of input %d, not categorical", e->source);
	ids = kept_ids(&T->cat.eval_keep, k);
	for (int64_t i = 0; i < T->eval.n; i++)
		values[i] = gbml_boost_derived_value(e, ids[i]);
	gbml_boost_bins_fill_column(&T->eval_bins, column, values,
								T->borders.values + T->borders.offset[column], T->borders.count[column], T->threads);
	return GBML_OK;
}

/* The section and borders taken in: T's borders, width and eval bins grow; the kept ids go. */
static int
take_inputs(trainer *T, gbml_boost_inputs *in, const int *count, const float *values)
{
	gbml_env   *env = T->env;
	int			nd = in->n_derived,
				width = T->n_inputs + nd,
				rc;
	float	   *eval_values = NULL;

	if ((rc = gbml_boost_borders_append(&T->borders, T->n_inputs, nd, count, values, GBML_BOOST_MAX_BORDERS,
										env)) != GBML_OK ||
		(rc = gbml_boost_bins_widen(&T->bins, T->n_inputs, width, env)) != GBML_OK)
		return rc;
	if (T->has_eval && T->eval.n > 0)
	{
		if ((rc = gbml_boost_bins_widen(&T->eval_bins, T->n_inputs, width, env)) != GBML_OK)
			return rc;
		if ((eval_values = gbml_alloc_array(env, (size_t) T->eval.n, sizeof(float))) == NULL)
			return env->error_code;
		for (int d = 0; d < nd && rc == GBML_OK; d++)
			rc = bin_eval_column(T, in, d, eval_values);
		gbml_free(env, eval_values);
		if (rc != GBML_OK)
			return rc;
	}
	gbml_boost_inputs_free(&T->cat.model, env);
	T->cat.model = *in;
	memset(in, 0, sizeof(*in));
	/* the kinds' counts, as the coordinator's plan made them (slot columns split as sets) */
	T->cat.n_one_hot = T->cat.n_ctr = T->cat.n_slot = 0;
	for (int d = 0; d < nd; d++)
	{
		int			kind = T->cat.model.derived[d].kind;

		T->cat.n_one_hot += kind == GBML_BOOST_ONE_HOT;
		T->cat.n_ctr += kind == GBML_BOOST_CTR_MEAN || kind == GBML_BOOST_CTR_COUNTER;
		T->cat.n_slot += kind == GBML_BOOST_CAT_SLOT;
	}
	T->n_features = width;
	/* the coordinator has the training ids now, and the eval rows' are binned */
	gbml_free(env, T->cat.keep.out);
	gbml_free(env, T->cat.eval_keep.out);
	T->cat.keep.out = T->cat.eval_keep.out = NULL;
	return GBML_OK;
}

int
boost_cat_take_inputs(trainer *T, const gbml_feature_schema *schema, gbml_msg_reader *r)
{
	gbml_env   *env = T->env;
	int64_t		len = gbml_msg_get_i64(r),
				nd;
	const uint8_t *section = r->p;
	gbml_boost_inputs in;
	int		   *count = NULL;
	float	   *values = NULL;
	int			rc = GBML_OK;

	memset(&in, 0, sizeof(in));
	/* the section's length against what is left after it was read (not before: 8 bytes more) */
	if (r->bad || len < 0 || len > (int64_t) (r->end - r->p) || T->cat.keep.out == NULL)
	{
		r->bad = true;
		return GBML_OK;
	}
	r->p += len;
	/* a damaged section is an error of its own (GBML_ECORRUPT, saying what is wrong) */
	if ((rc = gbml_boost_inputs_read_training(section, (size_t) len, T->n_inputs, schema, &in, env)) != GBML_OK)
		return rc;
	nd = gbml_msg_get_i64(r);
	r->bad |= nd != in.n_derived || in.n_inputs != T->n_inputs || nd < 0 || nd > INT32_MAX - T->n_inputs;
	if (!r->bad)
	{
		count = gbml_alloc0(env, sizeof(int) * (size_t) (nd > 0 ? nd : 1));
		values = gbml_alloc_array(env, (size_t) (nd > 0 ? nd : 1) * GBML_BOOST_MAX_BORDERS, sizeof(float));
		if (count == NULL || values == NULL)
			rc = env->error_code;
	}
	for (int64_t d = 0; rc == GBML_OK && d < nd && !r->bad; d++)
		read_derived_borders(r, &count[d], values + (size_t) d * GBML_BOOST_MAX_BORDERS);
	if (rc == GBML_OK && (r->bad || r->p != r->end))
		r->bad = true;
	else if (rc == GBML_OK)
		rc = take_inputs(T, &in, count, values);
	gbml_boost_inputs_free(&in, env);
	gbml_free(env, count);
	gbml_free(env, values);
	return rc;
}

int
boost_cat_take_bins(trainer *T, gbml_msg_reader *r, int64_t *filled)
{
	int			nd = T->cat.model.n_derived;
	int64_t		first = gbml_msg_get_i64(r),
				count = gbml_msg_get_count(r, T->train.n - *filled);
	const uint8_t *page = r->p;
	gbml_boost_bins *b = &T->bins;

	r->bad |= nd < 1 || first != *filled || count < 1 || (int64_t) (r->end - r->p) != (int64_t) nd * count;
	for (int d = 0; d < nd && !r->bad; d++)
	{
		int			top = T->borders.count[T->n_inputs + d];

		for (int64_t i = 0; i < count && !r->bad; i++)
			r->bad = page[(size_t) d * (size_t) count + (size_t) i] > top;
	}
	if (r->bad)
		return GBML_OK;
	r->p = r->end;
	for (int d = 0; d < nd; d++)
		for (int64_t i = 0; i < count; i++)
		{
			int64_t		row = first + i,
						blk = row / b->block_rows;
			int64_t		len = gbml_boost_block_len(b, blk);

			b->blocks[blk][(size_t) (T->n_inputs + d) * (size_t) len + (size_t) (row - blk * b->block_rows)] =
				page[(size_t) d * (size_t) count + (size_t) i];
		}
	*filled += count;
	return GBML_OK;
}
