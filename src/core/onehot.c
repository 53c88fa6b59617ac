/*
 * onehot.c — the one-hot encoding itself (onehot.h): which categories get
 * a column (from counts), the columns' layout, one row encoded, the 'ONEH'
 * section's bytes and their validation, and the columns as JSON.  The
 * passes over datasets (counting, encoding rows) are onehot_data.c's.
 */
#include "onehot.h"
#include "onehot_internal.h"

#include <stdlib.h>
#include <string.h>

void
gbml_onehot_free(gbml_onehot *e, gbml_env *env)
{
	if (e == NULL)
		return;
	for (int b = 0; b < e->n_blocks && e->blocks; b++)
	{
		gbml_free(env, e->blocks[b].kept);
		gbml_free(env, e->blocks[b].col_of);
	}
	gbml_free(env, e->blocks);
	gbml_free(env, e->col_input);
	gbml_schema_free(e->own_schema, env);
	gbml_free(env, e);
}

gbml_onehot *
gbml_onehot_new(const gbml_feature_schema *s, int n_blocks, bool other, gbml_env *env)
{
	gbml_onehot *e = gbml_alloc0(env, sizeof(gbml_onehot));

	if (e == NULL)
		return NULL;
	e->n_inputs = s->n_features;
	e->schema = s;
	e->other = other;
	e->n_blocks = n_blocks;
	if (n_blocks > 0 && (e->blocks = gbml_alloc0(env, sizeof(gbml_onehot_block) * (size_t) n_blocks)) == NULL)
	{
		gbml_free(env, e);
		return NULL;
	}
	return e;
}

/*
 * The columns from the blocks' inputs and kept slots (set by the caller):
 * the numeric inputs, each block's first column and size, the slot ->
 * column tables.  GBML_EINVAL (the caller says why) when there are more
 * columns than a dataset may have.
 */
int
gbml_onehot_layout(gbml_onehot *e, gbml_env *env)
{
	int64_t		cols;
	int			b = 0,
				i = 0;

	e->n_numeric = e->n_inputs - e->n_blocks;
	cols = e->n_numeric;
	for (int k = 0; k < e->n_blocks; k++)
	{
		gbml_onehot_block *bl = &e->blocks[k];

		bl->first_col = (int) cols;
		bl->n_cols = bl->n_kept + (e->other ? 1 : 0);
		cols += bl->n_cols;
		if (cols > GBML_MAX_FEATURES)
			return GBML_EINVAL;
	}
	e->n_cols = (int) cols;
	if ((e->col_input = gbml_alloc_array(env, (size_t) (cols > 0 ? cols : 1), sizeof(int))) == NULL)
		return env->error_code;
	for (int j = 0; j < e->n_inputs; j++)
	{
		if (b < e->n_blocks && e->blocks[b].input == j)
		{
			b++;
			continue;
		}
		e->col_input[i] = j;
		i++;
	}
	for (int k = 0; k < e->n_blocks; k++)
	{
		gbml_onehot_block *bl = &e->blocks[k];

		for (int c = 0; c < bl->n_cols; c++)
			e->col_input[bl->first_col + c] = bl->input;
		if ((bl->col_of = gbml_alloc_array(env, (size_t) bl->n_categories + 1, sizeof(int32_t))) == NULL)
			return env->error_code;
		for (int s = 0; s <= bl->n_categories; s++)
			bl->col_of[s] = -1;
		for (int c = 0; c < bl->n_kept; c++)
			bl->col_of[bl->kept[c]] = c;
	}
	return GBML_OK;
}

/* Orders slots by count, most frequent first, ties to the smaller slot. */
typedef struct slot_count
{
	int64_t		count;
	int32_t		slot;
} slot_count;

static int
by_count(const void *a, const void *b)
{
	const slot_count *x = a,
			   *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

static int
by_slot(const void *a, const void *b)
{
	int32_t		x = *(const int32_t *) a,
				y = *(const int32_t *) b;

	return x < y ? -1 : x > y;
}

int
gbml_onehot_keep(gbml_onehot_block *bl, const int64_t *counts, int64_t max_categories, gbml_env *env)
{
	int			n_seen = 0;
	slot_count *order;

	for (int s = 0; s <= bl->n_categories; s++)
		n_seen += counts[s] > 0;
	if ((order = gbml_alloc_array(env, (size_t) (n_seen > 0 ? n_seen : 1), sizeof(slot_count))) == NULL)
		return env->error_code;
	n_seen = 0;
	for (int s = 0; s <= bl->n_categories; s++)
		if (counts[s] > 0)
			order[n_seen++] = (slot_count) {counts[s], s};
	bl->n_kept = n_seen;
	if (max_categories > 0 && n_seen > max_categories)
	{
		/* a total order on (count, slot): the kept set is a function of the counts alone */
		qsort(order, (size_t) n_seen, sizeof(slot_count), by_count);
		bl->n_kept = (int) max_categories;
	}
	if ((bl->kept = gbml_alloc_array(env, (size_t) (bl->n_kept > 0 ? bl->n_kept : 1), sizeof(int32_t))) == NULL)
	{
		gbml_free(env, order);
		return env->error_code;
	}
	for (int c = 0; c < bl->n_kept; c++)
		bl->kept[c] = order[c].slot;
	qsort(bl->kept, (size_t) bl->n_kept, sizeof(int32_t), by_slot);
	gbml_free(env, order);
	return GBML_OK;
}

void
gbml_onehot_row(const gbml_onehot *e, const float *x, float *out)
{
	for (int i = 0; i < e->n_numeric; i++)
		out[i] = x[e->col_input[i]];
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];
		int			hit = gbml_onehot_hit(e, bl, x[bl->input]);
		float	   *o = out + bl->first_col;

		memset(o, 0, sizeof(float) * (size_t) bl->n_cols);
		if (hit >= 0)
			o[hit] = 1.0f;
	}
}

/* ---- the section ---- */

void
gbml_onehot_write(const gbml_onehot *e, gbml_strbuf *sb)
{
	gbml_sb_u32(sb, GBML_ONEHOT_LAYOUT_VERSION);
	gbml_sb_u32(sb, e->other ? GBML_ONEHOT_FLAG_OTHER : 0);
	gbml_sb_u32(sb, (uint32_t) e->n_inputs);
	gbml_sb_u32(sb, (uint32_t) e->n_cols);
	gbml_sb_u32(sb, (uint32_t) e->n_blocks);
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];

		gbml_sb_u32(sb, (uint32_t) bl->input);
		gbml_sb_u32(sb, (uint32_t) bl->n_kept);
		for (int c = 0; c < bl->n_kept; c++)
			gbml_sb_u32(sb, (uint32_t) bl->kept[c]);
	}
}

int
gbml_onehot_add_section(const gbml_onehot *e, gbml_model_writer *w, gbml_env *env)
{
	gbml_strbuf sb;
	int			rc;

	gbml_sb_init(&sb, env);
	gbml_onehot_write(e, &sb);
	if ((rc = gbml_sb_status(&sb)) == GBML_OK)
		gbml_model_add_sb(w, GBML_SECTION_ONEHOT, &sb);
	gbml_sb_free(&sb);
	return rc;
}

static int
corrupt(gbml_env *env, gbml_onehot *e, const char *why)
{
	gbml_onehot_free(e, env);
	return gbml_error(env, GBML_ECORRUPT, "model's one-hot encoding: %s", why);
}

/*
 * Block k from the cursor: a categorical input after the previous block's,
 * at most n_categories + 1 kept slots, strictly ascending, in range.
 * GBML_ECORRUPT, or the allocator's code.
 */
static int
read_block(gbml_cursor *c, const gbml_onehot *e, int k, gbml_env *env)
{
	gbml_onehot_block *bl = &e->blocks[k];
	uint32_t	input = gbml_cursor_u32(c),
				kept = gbml_cursor_u32(c);

	if (!c->ok || input >= (uint32_t) e->n_inputs || !gbml_feature_is_categorical(e->schema, (int) input) ||
		(k > 0 && (int) input <= e->blocks[k - 1].input))
		return GBML_ECORRUPT;
	bl->input = (int) input;
	bl->n_categories = e->schema->features[input].n_categories;
	/* each slot takes 4 bytes: a count the bytes cannot hold is corrupt before any allocation */
	if (kept > (uint32_t) bl->n_categories + 1 || (size_t) kept * 4 > gbml_cursor_remaining(c))
		return GBML_ECORRUPT;
	bl->n_kept = (int) kept;
	if ((bl->kept = gbml_alloc_array(env, kept > 0 ? kept : 1, sizeof(int32_t))) == NULL)
		return env->error_code;
	for (uint32_t i = 0; i < kept; i++)
	{
		uint32_t	slot = gbml_cursor_u32(c);

		if (!c->ok || slot > (uint32_t) bl->n_categories || (i > 0 && (int32_t) slot <= bl->kept[i - 1]))
			return GBML_ECORRUPT;
		bl->kept[i] = (int32_t) slot;
	}
	return GBML_OK;
}

/* Frees e and passes on an allocator's error (env's already set). */
static int
failed(gbml_env *env, gbml_onehot *e)
{
	int			rc = env->error_code;

	gbml_onehot_free(e, env);
	return rc;
}

/*
 * The section's bytes against the model's schema s; owned (s when the
 * loader parsed it, else NULL: the scorer's) goes to the result, or is
 * freed on failure.
 */
static int
read_section(const uint8_t *data, size_t len, const gbml_feature_schema *s, gbml_feature_schema *owned,
			 gbml_env *env, gbml_onehot **out)
{
	gbml_cursor c;
	gbml_onehot *e;
	uint32_t	version,
				flags,
				n_inputs,
				n_cols,
				n_blocks;
	int			rc;

	gbml_cursor_init(&c, data, len);
	version = gbml_cursor_u32(&c);
	flags = gbml_cursor_u32(&c);
	n_inputs = gbml_cursor_u32(&c);
	n_cols = gbml_cursor_u32(&c);
	n_blocks = gbml_cursor_u32(&c);
	if (!c.ok || version != GBML_ONEHOT_LAYOUT_VERSION || (flags & ~GBML_ONEHOT_FLAG_OTHER) ||
		n_inputs != (uint32_t) s->n_features || n_blocks != (uint32_t) gbml_schema_n_categorical(s))
	{
		int			n = s->n_features;

		gbml_schema_free(owned, env);
		return gbml_error(env, GBML_ECORRUPT, "model's one-hot encoding: the header does not fit the model's %d features",
						  n);
	}
	if ((e = gbml_onehot_new(s, (int) n_blocks, (flags & GBML_ONEHOT_FLAG_OTHER) != 0, env)) == NULL)
	{
		gbml_schema_free(owned, env);
		return env->error_code;
	}
	e->own_schema = owned;
	for (uint32_t k = 0; k < n_blocks; k++)
		if ((rc = read_block(&c, e, (int) k, env)) != GBML_OK)
			return rc == GBML_ECORRUPT ? corrupt(env, e, "a feature's categories are damaged") : failed(env, e);
	if (gbml_cursor_remaining(&c) != 0)
		return corrupt(env, e, "bytes after the last feature");
	if ((rc = gbml_onehot_layout(e, env)) != GBML_OK)
		return rc == GBML_EINVAL ? corrupt(env, e, "more columns than a model may have") : failed(env, e);
	if ((uint32_t) e->n_cols != n_cols)
		return corrupt(env, e, "the column count does not add up");
	*out = e;
	return GBML_OK;
}

int
gbml_onehot_load(const gbml_model_reader *model, gbml_env *env, gbml_onehot **out)
{
	const uint8_t *data;
	size_t		len;
	const gbml_feature_schema *s;
	gbml_feature_schema *owned;
	bool		has_section = gbml_model_find(model, GBML_SECTION_ONEHOT, &data, &len);
	int			rc;

	*out = NULL;
	if ((rc = gbml_model_schema(model, env, &s, &owned)) != GBML_OK)
		return rc;
	if (s == NULL)
		return has_section ? gbml_error(env, GBML_ECORRUPT, "model's one-hot encoding: the feature schema is missing")
			: GBML_OK;
	if (!has_section)
	{
		bool		needs = gbml_schema_n_categorical(s) > 0;

		gbml_schema_free(owned, env);
		return needs ? gbml_error(env, GBML_ECORRUPT, "model's one-hot encoding: categorical features without one")
			: GBML_OK;
	}
	return read_section(data, len, s, owned, env, out);
}

/* ---- JSON ---- */

static void
json_name(gbml_strbuf *out, const gbml_feature_schema *s, int j)
{
	const char *name = gbml_schema_name(s, j);

	gbml_sb_json_string(out, name ? name : "");
}

void
gbml_onehot_json_category(const gbml_onehot_block *b, const gbml_feature_schema *s, int col, gbml_strbuf *out)
{
	int32_t		slot = b->kept[col];

	if (slot == b->n_categories)
		gbml_sb_append(out, "null", 4);
	else
		gbml_sb_json_string(out, s->features[b->input].categories[slot]);
}

void
gbml_onehot_json_columns(const gbml_onehot *e, gbml_strbuf *out)
{
	const gbml_feature_schema *s = e->schema;

	gbml_sb_append(out, "\"columns\":[", 11);
	for (int i = 0; i < e->n_numeric; i++)
	{
		gbml_sb_append(out, i ? ",{\"feature\":" : "{\"feature\":", i ? 12 : 11);
		json_name(out, s, e->col_input[i]);
		gbml_sb_append(out, "}", 1);
	}
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];

		for (int c = 0; c < bl->n_cols; c++)
		{
			gbml_sb_append(out, bl->first_col + c ? ",{\"feature\":" : "{\"feature\":", bl->first_col + c ? 12 : 11);
			json_name(out, s, bl->input);
			if (c < bl->n_kept)
			{
				gbml_sb_append(out, ",\"category\":", 12);
				gbml_onehot_json_category(bl, s, c, out);
			}
			else
				gbml_sb_append(out, ",\"other\":true", 13);
			gbml_sb_append(out, "}", 1);
		}
	}
	gbml_sb_append(out, "]", 1);
}
