/*
 * schema.h — what each input feature is: its name, numeric or categorical,
 * and a categorical feature's values.  The glue builds it from a source's
 * columns; trainers read it from the dataset; the training driver stores it
 * in the model ('SCHM') so scoring by row, model_json and feature_importance
 * speak in column names.
 *
 * How a categorical value reaches the engine: as its id, a float holding
 * an exact integer in [0, n_categories), where categories[id] is the value
 * (the values sorted bytewise, so the ids and hence the model bytes never
 * depend on scan order).  NaN is SQL NULL, a category of its own.  At
 * scoring time a value the training never saw arrives as
 * GBML_CATEGORY_UNSEEN (-1).  Numeric features are plain floats (NaN:
 * missing).
 *
 * A dataset without a schema (the real[] forms) has only numeric, unnamed
 * features; the model then has no 'SCHM' section and reports features by
 * index, as before.
 */
#ifndef GBML_SCHEMA_H
#define GBML_SCHEMA_H

#include "env.h"
#include "model_format.h"
#include "strbuf.h"

#include <stdbool.h>
#include <stdint.h>

#define GBML_SECTION_SCHEMA GBML_TAG('S','C','H','M')
#define GBML_CATEGORY_UNSEEN (-1.0f)
#define GBML_SCHEMA_MAX_CATEGORIES (1 << 24)	/* ids stay exact in a float */

typedef enum gbml_feature_kind
{
	GBML_FEATURE_NUMERIC = 0,
	GBML_FEATURE_CATEGORICAL = 1
} gbml_feature_kind;

typedef struct gbml_feature_def
{
	char	   *name;			/* the column's name; "col[3]" for an array column's 3rd element (1-based) */
	char	   *column;			/* the source column it comes from */
	int32_t		element;		/* 1-based element of an array column; 0 for a scalar column */
	char	   *source_type;	/* the SQL type it came from ("integer", "text", "real[]"), for messages */
	uint8_t		kind;			/* gbml_feature_kind */
	int32_t		n_categories;	/* categorical: ids 0 .. n_categories - 1 */
	char	  **categories;		/* categorical: the values, sorted bytewise; categories[id] */
	/*
	 * categorical, across servers (a shard's, and its coordinator's): the
	 * union's rows per category, n_categories + 1 (NULL's last), which the
	 * one-hot encoding keeps categories by; NULL elsewhere.  Never stored
	 * in a model.
	 */
	const int64_t *category_counts;
} gbml_feature_def;

typedef struct gbml_feature_schema
{
	int			n_features;
	gbml_feature_def *features;
} gbml_feature_schema;

static inline bool
gbml_feature_is_categorical(const gbml_feature_schema *s, int j)
{
	return s != NULL && j >= 0 && j < s->n_features && s->features[j].kind == GBML_FEATURE_CATEGORICAL;
}

/*
 * The slot of value v of a categorical feature with n categories: its id
 * (an exact integer in [0, n)), n for NaN (NULL), or -1 for anything else
 * (GBML_CATEGORY_UNSEEN, a value that is no id).  Every trainer's and
 * scorer's lookup goes through this one rule.
 */
static inline int32_t
gbml_category_slot(float v, int32_t n)
{
	if (v != v)
		return n;
	if (v >= 0.0f && v < (float) n && (float) (int32_t) v == v)
		return (int32_t) v;
	return -1;
}

/* How many features of s are categorical (0 for NULL). */
int			gbml_schema_n_categorical(const gbml_feature_schema *s);

/* Serializes s (the 'SCHM' section body) into sb. */
void		gbml_schema_write(const gbml_feature_schema *s, gbml_strbuf *sb);

/*
 * Reads a 'SCHM' body into *out (allocated through env; free with
 * gbml_schema_free).  GBML_OK, or GBML_ECORRUPT with env's error set when
 * the bytes are not a schema of n_features features.
 */
int			gbml_schema_read(const uint8_t *data, size_t len, int n_features, gbml_env *env,
							 gbml_feature_schema **out);

/*
 * A model's schema for its algorithm's loader: the one the scorer parsed
 * (r->schema), else parsed here into *owned (free it with
 * gbml_schema_free; NULL when borrowed).  *out NULL when the model has no
 * 'SCHM'.  GBML_OK or GBML_ECORRUPT.
 */
int			gbml_model_schema(const gbml_model_reader *r, gbml_env *env, const gbml_feature_schema **out,
							  gbml_feature_schema **owned);

/* A deep copy of s through env (NULL with env's error set). */
gbml_feature_schema *gbml_schema_copy(const gbml_feature_schema *s, gbml_env *env);

void		gbml_schema_free(gbml_feature_schema *s, gbml_env *env);

/* The id of value (len bytes) in feature j's categories, or -1 when it has none. */
int32_t		gbml_schema_category_id(const gbml_feature_def *f, const char *value, size_t len);

/*
 * "feature_schema":[{"name":..,"type":..,"kind":"numeric"|"categorical"
 * (,"categories":[..])},...] for model_json; "feature_names":[..] for
 * model_info.
 */
void		gbml_schema_json(const gbml_feature_schema *s, gbml_strbuf *sb);
void		gbml_schema_json_names(const gbml_feature_schema *s, gbml_strbuf *sb);

/* Feature j's name (0-based j), or NULL without a schema. */
static inline const char *
gbml_schema_name(const gbml_feature_schema *s, int j)
{
	return s != NULL && j >= 0 && j < s->n_features ? s->features[j].name : NULL;
}

#endif
