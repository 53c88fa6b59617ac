/*
 * boost_cat.c — the 'BSTC' section of a boost model (see boost_cat.h):
 * writing it, reading it back with every count, index and value checked
 * against the section's size and the model's feature schema, and its
 * model_json description.
 */
#include "boost_cat.h"

#include <math.h>
#include <string.h>

const char *
gbml_boost_derived_kind_name(int kind)
{
	switch (kind)
	{
		case GBML_BOOST_ONE_HOT:
			return "one_hot";
		case GBML_BOOST_CTR_MEAN:
			return "ctr_mean";
		case GBML_BOOST_CTR_COUNTER:
			return "ctr_counter";
		case GBML_BOOST_CAT_SET:
			return "set";
		case GBML_BOOST_CAT_SLOT:
			return "slot";
	}
	return "?";
}

void
gbml_boost_inputs_write(const gbml_boost_inputs *in, gbml_strbuf *sb)
{
	gbml_sb_u32(sb, GBML_BOOST_CAT_LAYOUT_VERSION);
	gbml_sb_u32(sb, (uint32_t) in->n_inputs);
	gbml_sb_u32(sb, (uint32_t) in->n_derived);
	gbml_sb_f64(sb, in->prior);
	gbml_sb_f64(sb, in->prior_weight);
	for (int k = 0; k < in->n_derived; k++)
	{
		const gbml_boost_derived *e = &in->derived[k];

		gbml_sb_u32(sb, (uint32_t) e->source);
		gbml_sb_u32(sb, (uint32_t) e->kind);
		gbml_sb_u32(sb, (uint32_t) e->n_categories);
		if (e->kind == GBML_BOOST_ONE_HOT)
			gbml_sb_u32(sb, (uint32_t) e->category);
		else
			for (int32_t s = 0; s < e->n_categories + 2; s++)
				gbml_sb_f32(sb, e->table[s]);
	}
}

void
gbml_boost_inputs_free(gbml_boost_inputs *in, gbml_env *env)
{
	for (int k = 0; in->derived && k < in->n_derived; k++)
		gbml_free(env, in->derived[k].table);
	gbml_free(env, in->derived);
	memset(in, 0, sizeof(*in));
}

static int
corrupt(gbml_boost_inputs *in, gbml_env *env, const char *what)
{
	gbml_boost_inputs_free(in, env);
	return gbml_error(env, GBML_ECORRUPT, "boost model: categorical section: %s", what);
}

/* Reads derived feature e's fields after its source (validated against the schema); NULL when fine. */
static const char *
read_derived(gbml_cursor *c, const gbml_feature_schema *schema, int n_inputs, bool training,
			 gbml_boost_derived *e, gbml_env *env)
{
	uint32_t	source = gbml_cursor_u32(c),
				kind = gbml_cursor_u32(c),
				ncat = gbml_cursor_u32(c);

	if (!c->ok)
		return "truncated";
	if (source >= (uint32_t) n_inputs || !gbml_feature_is_categorical(schema, (int) source))
		return "a derived feature's source is not a categorical input";
	if (ncat != (uint32_t) schema->features[source].n_categories || ncat > GBML_SCHEMA_MAX_CATEGORIES)
		return "category count disagrees with the feature schema";
	e->source = (int32_t) source;
	e->kind = (int32_t) kind;
	e->n_categories = (int32_t) ncat;
	if (kind == GBML_BOOST_ONE_HOT)
	{
		uint32_t	cat = gbml_cursor_u32(c);

		if (!c->ok || cat > ncat)
			return "one-hot category out of range";
		e->category = (int32_t) cat;
		return NULL;
	}
	if (kind != GBML_BOOST_CTR_MEAN && kind != GBML_BOOST_CTR_COUNTER && kind != GBML_BOOST_CAT_SET &&
		!(training && kind == GBML_BOOST_CAT_SLOT))
		return "unknown derived feature kind";
	/* the table's bytes must be there before anything is allocated for them */
	if (gbml_cursor_remaining(c) / sizeof(float) < (size_t) ncat + 2)
		return "truncated";
	if ((e->table = gbml_alloc_array(env, (size_t) ncat + 2, sizeof(float))) == NULL)
		return "";
	gbml_cursor_f32_array(c, e->table, (size_t) ncat + 2);
	for (uint32_t s = 0; s < ncat + 2; s++)
		if (!isfinite(e->table[s]))
			return "a statistic is not finite";
	if (kind == GBML_BOOST_CAT_SET)
		for (uint32_t s = 0; s < ncat + 2; s++)
			if (e->table[s] != 0.0f && e->table[s] != 1.0f)
				return "a set feature's value is not 0 or 1";
	if (kind == GBML_BOOST_CAT_SLOT)
		for (uint32_t s = 0; s < ncat + 2; s++)
			if (e->table[s] != (float) s)
				return "a slot column's value is not its slot";
	return NULL;
}

static int
inputs_read(const uint8_t *data, size_t len, int n_inputs, const gbml_feature_schema *schema, bool training,
			gbml_boost_inputs *out, gbml_env *env)
{
	gbml_cursor c;
	uint32_t	version,
				ni,
				nd;

	memset(out, 0, sizeof(*out));
	gbml_cursor_init(&c, data, len);
	version = gbml_cursor_u32(&c);
	ni = gbml_cursor_u32(&c);
	nd = gbml_cursor_u32(&c);
	out->prior = gbml_cursor_f64(&c);
	out->prior_weight = gbml_cursor_f64(&c);
	if (!c.ok)
		return corrupt(out, env, "truncated");
	if (version != GBML_BOOST_CAT_LAYOUT_VERSION)
		return corrupt(out, env, "unknown layout version");
	if (schema == NULL)
		return corrupt(out, env, "the model has no feature schema to say which inputs are categorical");
	if (ni != (uint32_t) n_inputs || schema->n_features != n_inputs)
		return corrupt(out, env, "feature count disagrees with the model");
	if (!isfinite(out->prior) || !(isfinite(out->prior_weight) && out->prior_weight > 0))
		return corrupt(out, env, "prior is invalid");
	/* every derived feature takes at least 16 bytes */
	if ((size_t) nd > gbml_cursor_remaining(&c) / 16)
		return corrupt(out, env, "derived feature count exceeds the section");
	out->n_inputs = n_inputs;
	if ((out->derived = gbml_alloc0(env, sizeof(gbml_boost_derived) * ((size_t) nd + 1))) == NULL)
	{
		int			rc = env->error_code;

		gbml_boost_inputs_free(out, env);
		return rc;
	}
	out->n_derived = (int) nd;
	for (uint32_t k = 0; k < nd; k++)
	{
		const char *why = read_derived(&c, schema, n_inputs, training, &out->derived[k], env);

		if (why != NULL && why[0] == '\0')
		{
			int			rc = env->error_code;	/* an allocation failed */

			gbml_boost_inputs_free(out, env);
			return rc;
		}
		if (why != NULL)
			return corrupt(out, env, why);
	}
	if (gbml_cursor_remaining(&c) != 0)
		return corrupt(out, env, "trailing bytes");
	return GBML_OK;
}

int
gbml_boost_inputs_read(const uint8_t *data, size_t len, int n_inputs, const gbml_feature_schema *schema,
					   gbml_boost_inputs *out, gbml_env *env)
{
	return inputs_read(data, len, n_inputs, schema, false, out, env);
}

int
gbml_boost_inputs_read_training(const uint8_t *data, size_t len, int n_inputs, const gbml_feature_schema *schema,
								gbml_boost_inputs *out, gbml_env *env)
{
	return inputs_read(data, len, n_inputs, schema, true, out, env);
}

static void
json_float(gbml_strbuf *sb, float v)
{
	gbml_sb_printf(sb, "%.9g", (double) v);
}

/* The ctr table as {"category": value, ...} plus the NULL and unseen slots. */
static void
json_table(const gbml_boost_derived *e, const gbml_feature_def *f, gbml_strbuf *out)
{
	gbml_sb_append(out, ",\"values\":{", 11);
	for (int32_t s = 0; s < e->n_categories; s++)
	{
		if (s)
			gbml_sb_append(out, ",", 1);
		if (f && f->categories && f->categories[s])
			gbml_sb_json_string(out, f->categories[s]);
		else
			gbml_sb_printf(out, "\"%d\"", s);
		gbml_sb_append(out, ":", 1);
		json_float(out, e->table[s]);
	}
	gbml_sb_append(out, "},\"null_value\":", 15);
	json_float(out, e->table[e->n_categories]);
	gbml_sb_append(out, ",\"unseen_value\":", 16);
	json_float(out, e->table[e->n_categories + 1]);
}

void
gbml_boost_inputs_json(const gbml_boost_inputs *in, const gbml_feature_schema *schema, int classes,
					   gbml_strbuf *out)
{
	gbml_sb_append(out, ",\"categorical\":{\"ctr_prior\":", 28);
	gbml_sb_json_number(out, in->prior);
	gbml_sb_append(out, ",\"ctr_prior_weight\":", 20);
	gbml_sb_json_number(out, in->prior_weight);
	gbml_sb_append(out, ",\"model_features\":[", 19);
	for (int k = 0; k < in->n_derived; k++)
	{
		const gbml_boost_derived *e = &in->derived[k];
		const gbml_feature_def *f = schema ? &schema->features[e->source] : NULL;

		gbml_sb_printf(out, "%s{\"model_feature\":%d,\"feature\":%d,\"name\":", k ? "," : "",
					   in->n_inputs + k + 1, e->source + 1);
		gbml_sb_json_string(out, f && f->name ? f->name : "");
		gbml_sb_printf(out, ",\"transform\":\"%s\"", gbml_boost_derived_kind_name(e->kind));
		if (e->kind == GBML_BOOST_ONE_HOT)
		{
			gbml_sb_append(out, ",\"category\":", 12);
			if (e->category == e->n_categories)
				gbml_sb_append(out, "null", 4);
			else if (f && f->categories && f->categories[e->category])
				gbml_sb_json_string(out, f->categories[e->category]);
			else
				gbml_sb_printf(out, "\"%d\"", e->category);
		}
		else
		{
			if (e->kind == GBML_BOOST_CTR_MEAN && classes > 0)
			{
				/* a MultiClass model's statistics of a column are its classes', in order */
				int			earlier = 0;

				for (int j = 0; j < k; j++)
					earlier += in->derived[j].kind == GBML_BOOST_CTR_MEAN && in->derived[j].source == e->source;
				gbml_sb_printf(out, ",\"class\":%d", earlier % classes);
			}
			json_table(e, f, out);
		}
		gbml_sb_append(out, "}", 1);
	}
	gbml_sb_append(out, "]}", 2);
}
