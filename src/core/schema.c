/*
 * schema.c — the feature schema's bytes ('SCHM') and lookups; see schema.h.
 *
 * Section body: u32 n_features, then per feature: u8 kind, the name, the
 * column, u32 element, the source type, u32 n_categories, then each
 * category (sorted bytewise); every text is a u32 length and its bytes.
 */
#include "schema.h"

#include <string.h>

int
gbml_schema_n_categorical(const gbml_feature_schema *s)
{
	int			n = 0;

	for (int j = 0; s != NULL && j < s->n_features; j++)
		n += s->features[j].kind == GBML_FEATURE_CATEGORICAL;
	return n;
}

static void
write_text(gbml_strbuf *sb, const char *text)
{
	size_t		len = text ? strlen(text) : 0;

	gbml_sb_u32(sb, (uint32_t) len);
	gbml_sb_append(sb, text, len);
}

void
gbml_schema_write(const gbml_feature_schema *s, gbml_strbuf *sb)
{
	gbml_sb_u32(sb, (uint32_t) s->n_features);
	for (int j = 0; j < s->n_features; j++)
	{
		const gbml_feature_def *f = &s->features[j];
		uint8_t		kind = f->kind;

		gbml_sb_append(sb, &kind, 1);
		write_text(sb, f->name);
		write_text(sb, f->column);
		gbml_sb_u32(sb, (uint32_t) f->element);
		write_text(sb, f->source_type);
		gbml_sb_u32(sb, f->kind == GBML_FEATURE_CATEGORICAL ? (uint32_t) f->n_categories : 0);
		for (int c = 0; f->kind == GBML_FEATURE_CATEGORICAL && c < f->n_categories; c++)
			write_text(sb, f->categories[c]);
	}
}

/* A length-prefixed text as a fresh NUL-terminated string; NULL when the bytes run out. */
static char *
read_text(gbml_cursor *c, gbml_env *env)
{
	uint32_t	len = gbml_cursor_u32(c);
	const char *bytes;
	char	   *out;

	if (len > gbml_cursor_remaining(c) || (bytes = gbml_cursor_bytes(c, len, 1)) == NULL)
		return NULL;
	if ((out = gbml_alloc(env, (size_t) len + 1)) == NULL)
		return NULL;
	memcpy(out, bytes, len);
	out[len] = '\0';
	return out;
}

static int
corrupt(gbml_env *env, gbml_feature_schema *s, const char *why)
{
	gbml_schema_free(s, env);
	return gbml_error(env, GBML_ECORRUPT, "model's feature schema: %s", why);
}

static int
read_feature(gbml_cursor *c, gbml_env *env, gbml_feature_def *f)
{
	const uint8_t *kind = gbml_cursor_bytes(c, 1, 1);
	uint32_t	n;

	if (kind == NULL || *kind > GBML_FEATURE_CATEGORICAL)
		return GBML_ECORRUPT;
	f->kind = *kind;
	if ((f->name = read_text(c, env)) == NULL || (f->column = read_text(c, env)) == NULL)
		return GBML_ECORRUPT;
	f->element = (int32_t) gbml_cursor_u32(c);
	if (f->element < 0 || (f->source_type = read_text(c, env)) == NULL)
		return GBML_ECORRUPT;
	n = gbml_cursor_u32(c);
	/* each category takes at least its 4-byte length: a count the bytes cannot hold is corrupt */
	if (n > GBML_SCHEMA_MAX_CATEGORIES || (size_t) n * 4 > gbml_cursor_remaining(c) ||
		(f->kind != GBML_FEATURE_CATEGORICAL && n != 0))
		return GBML_ECORRUPT;
	f->n_categories = (int32_t) n;
	if (n > 0 && (f->categories = gbml_alloc0(env, sizeof(char *) * n)) == NULL)
		return GBML_ECORRUPT;
	for (uint32_t i = 0; i < n; i++)
		if ((f->categories[i] = read_text(c, env)) == NULL ||
			(i > 0 && strcmp(f->categories[i - 1], f->categories[i]) >= 0))
			return GBML_ECORRUPT;
	return GBML_OK;
}

int
gbml_schema_read(const uint8_t *data, size_t len, int n_features, gbml_env *env, gbml_feature_schema **out)
{
	gbml_cursor c;
	gbml_feature_schema *s;
	uint32_t	n;

	*out = NULL;
	gbml_cursor_init(&c, data, len);
	n = gbml_cursor_u32(&c);
	if (n != (uint32_t) n_features || (size_t) n > gbml_cursor_remaining(&c))
		return gbml_error(env, GBML_ECORRUPT, "model's feature schema: %u features for a model of %d", n,
						  n_features);
	if ((s = gbml_alloc0(env, sizeof(*s))) == NULL ||
		(n > 0 && (s->features = gbml_alloc0(env, sizeof(gbml_feature_def) * n)) == NULL))
	{
		gbml_free(env, s);
		return env->error_code;
	}
	s->n_features = (int) n;
	for (uint32_t j = 0; j < n; j++)
		if (read_feature(&c, env, &s->features[j]) != GBML_OK)
			return corrupt(env, s, "a feature's bytes are damaged");
	if (gbml_cursor_remaining(&c) != 0)
		return corrupt(env, s, "bytes after the last feature");
	*out = s;
	return GBML_OK;
}

gbml_feature_schema *
gbml_schema_copy(const gbml_feature_schema *s, gbml_env *env)
{
	gbml_strbuf sb;
	gbml_feature_schema *copy = NULL;

	gbml_sb_init(&sb, env);
	gbml_schema_write(s, &sb);
	if (gbml_sb_status(&sb) == GBML_OK)
		(void) gbml_schema_read((const uint8_t *) sb.data, sb.len, s->n_features, env, &copy);
	gbml_sb_free(&sb);
	return copy;
}

void
gbml_schema_free(gbml_feature_schema *s, gbml_env *env)
{
	if (s == NULL)
		return;
	for (int j = 0; j < s->n_features && s->features; j++)
	{
		gbml_feature_def *f = &s->features[j];

		for (int c = 0; c < f->n_categories && f->categories; c++)
			gbml_free(env, f->categories[c]);
		gbml_free(env, f->categories);
		gbml_free(env, f->name);
		gbml_free(env, f->column);
		gbml_free(env, f->source_type);
	}
	gbml_free(env, s->features);
	gbml_free(env, s);
}

int32_t
gbml_schema_category_id(const gbml_feature_def *f, const char *value, size_t len)
{
	int32_t		lo = 0,
				hi = f->n_categories - 1;

	while (lo <= hi)
	{
		int32_t		mid = lo + (hi - lo) / 2;
		const char *c = f->categories[mid];
		size_t		clen = strlen(c);
		int			cmp = memcmp(c, value, clen < len ? clen : len);

		if (cmp == 0)
			cmp = clen < len ? -1 : clen > len ? 1 : 0;
		if (cmp == 0)
			return mid;
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

void
gbml_schema_json(const gbml_feature_schema *s, gbml_strbuf *sb)
{
	gbml_sb_append(sb, "\"feature_schema\":[", 18);
	for (int j = 0; j < s->n_features; j++)
	{
		const gbml_feature_def *f = &s->features[j];
		bool		cat = f->kind == GBML_FEATURE_CATEGORICAL;

		gbml_sb_append(sb, j ? ",{\"name\":" : "{\"name\":", j ? 9 : 8);
		gbml_sb_json_string(sb, f->name);
		gbml_sb_append(sb, ",\"type\":", 8);
		gbml_sb_json_string(sb, f->source_type ? f->source_type : "");
		gbml_sb_printf(sb, ",\"kind\":\"%s\"", cat ? "categorical" : "numeric");
		if (cat)
		{
			gbml_sb_append(sb, ",\"categories\":[", 15);
			for (int c = 0; c < f->n_categories; c++)
			{
				if (c)
					gbml_sb_append(sb, ",", 1);
				gbml_sb_json_string(sb, f->categories[c]);
			}
			gbml_sb_append(sb, "]", 1);
		}
		gbml_sb_append(sb, "}", 1);
	}
	gbml_sb_append(sb, "]", 1);
}

void
gbml_schema_json_names(const gbml_feature_schema *s, gbml_strbuf *sb)
{
	gbml_sb_append(sb, "\"feature_names\":[", 17);
	for (int j = 0; j < s->n_features; j++)
	{
		if (j)
			gbml_sb_append(sb, ",", 1);
		gbml_sb_json_string(sb, s->features[j].name);
	}
	gbml_sb_append(sb, "]", 1);
}

int
gbml_model_schema(const gbml_model_reader *r, gbml_env *env, const gbml_feature_schema **out,
				  gbml_feature_schema **owned)
{
	const uint8_t *data;
	size_t		len;
	int			rc;

	*out = r->schema;
	*owned = NULL;
	if (r->schema != NULL || !gbml_model_find(r, GBML_SECTION_SCHEMA, &data, &len))
		return GBML_OK;
	if ((rc = gbml_schema_read(data, len, (int) r->n_features, env, owned)) != GBML_OK)
		return rc;
	*out = *owned;
	return GBML_OK;
}
