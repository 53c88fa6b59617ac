/*
 * boost_cat.h — how a boost model turns a row's categorical features into
 * the float features its trees split on, as the model stores it ('BSTC'):
 * the one definition the trainer (for its eval set) and every scorer use,
 * so training and scoring agree bit for bit.
 *
 * The trees of a model with categorical features split on "model
 * features": first the n_inputs input features themselves (a categorical
 * one has no borders, so no tree splits on its raw id), then n_derived
 * features, each computed from one categorical input:
 *
 *   one-hot      1.0 when the value is category `category` (n_categories:
 *                NULL), else 0.0 — split at 0.5, "feature == category";
 *   ctr_mean     the category's target statistic over all training rows,
 *                (sum of targets + prior * prior_weight) / (count +
 *                prior_weight), a table lookup;
 *   ctr_counter  the category's frequency, count / (largest count + 1)
 *                (CatBoost's Counter), a table lookup;
 *   set          1.0 when the value's slot is in a set of categories, else
 *                0.0 (a table of 0s and 1s) — split at 0.5, "feature in
 *                set": the set splits of Depthwise trees (categorical_split
 *                sets), one such feature per distinct set.
 *
 * While training, a categorical input split as sets has a column of its
 * own, kind slot (the value is the slot number, so its bins are the slots);
 * no model stores that kind: each set split becomes a set feature.
 *
 * A value is looked up by its slot: the category id (an exact integer in
 * [0, n_categories)), n_categories for NULL (NaN), n_categories + 1 for
 * anything else (GBML_CATEGORY_UNSEEN, -1, or a value no id can be): a
 * ctr's unseen slot holds the prior, and no one-hot feature matches it.
 * The tables hold the floats the trainer computed, so a scorer adds no
 * rounding of its own.
 *
 * Section body (little-endian): u32 layout version, u32 n_inputs, u32
 * n_derived, f64 prior, f64 prior_weight, then per derived feature: u32
 * source input, u32 kind, u32 n_categories (the source's, as trained),
 * and for one-hot u32 category (slot 0 .. n_categories), for a ctr
 * n_categories + 2 f32 (the slots' values).  A model whose inputs have no
 * categorical feature has no such section (and the bytes it had before
 * categorical features existed).
 */
#ifndef GBML_BOOST_CAT_H
#define GBML_BOOST_CAT_H

#include "env.h"
#include "schema.h"
#include "strbuf.h"

#include <stdint.h>

#define GBML_SECTION_BOOST_CATEGORICAL GBML_TAG('B','S','T','C')
#define GBML_BOOST_CAT_LAYOUT_VERSION 1
/* Categories of an input split as sets at most: its slots (and NULL, unseen) are bins, <= 256. */
#define GBML_BOOST_MAX_SET_CATEGORIES 254

typedef enum gbml_boost_derived_kind
{
	GBML_BOOST_ONE_HOT = 1,
	GBML_BOOST_CTR_MEAN = 2,
	GBML_BOOST_CTR_COUNTER = 3,
	GBML_BOOST_CAT_SET = 4,
	GBML_BOOST_CAT_SLOT = 5		/* training only: the slot as the value */
} gbml_boost_derived_kind;

typedef struct gbml_boost_derived
{
	int32_t		source;			/* the categorical input feature (0-based) */
	int32_t		kind;			/* gbml_boost_derived_kind */
	int32_t		n_categories;	/* the source's, as trained */
	int32_t		category;		/* one-hot: the slot that gives 1.0; a MultiClass ctr_mean in training: its class */
	float	   *table;			/* ctr, set, slot: n_categories + 2 values, by slot */
} gbml_boost_derived;

typedef struct gbml_boost_inputs
{
	int			n_inputs;		/* the row's features */
	int			n_derived;
	gbml_boost_derived *derived;
	double		prior;			/* of the ctr_mean tables (for model_json) */
	double		prior_weight;
} gbml_boost_inputs;

/* The slot of value x of a categorical feature with n categories (see above). */
static inline int32_t
gbml_boost_cat_slot(float x, int32_t n_categories)
{
	int32_t		s = gbml_category_slot(x, n_categories);

	return s >= 0 ? s : n_categories + 1;
}

/* Derived feature e's value for its source's value x. */
static inline float
gbml_boost_derived_value(const gbml_boost_derived *e, float x)
{
	int32_t		s = gbml_boost_cat_slot(x, e->n_categories);

	if (e->kind == GBML_BOOST_ONE_HOT)
		return s == e->category ? 1.0f : 0.0f;
	return e->table[s];
}

/* Model feature k of row x (n_inputs floats). */
static inline float
gbml_boost_input_value(const gbml_boost_inputs *in, int k, const float *x)
{
	const gbml_boost_derived *e;

	if (k < in->n_inputs)
		return x[k];
	e = &in->derived[k - in->n_inputs];
	return gbml_boost_derived_value(e, x[e->source]);
}

/* The model features: inputs and derived ones. */
static inline int
gbml_boost_inputs_width(const gbml_boost_inputs *in)
{
	return in->n_inputs + in->n_derived;
}

/* Serializes in (the 'BSTC' body) into sb. */
void		gbml_boost_inputs_write(const gbml_boost_inputs *in, gbml_strbuf *sb);

/*
 * Reads a 'BSTC' body into *out (tables allocated through env; free with
 * gbml_boost_inputs_free) for a model of n_inputs features whose schema is
 * `schema` (each source must be one of its categorical features, with its
 * category count).  GBML_ECORRUPT with env's error set on any
 * inconsistency.
 */
int			gbml_boost_inputs_read(const uint8_t *data, size_t len, int n_inputs,
								   const gbml_feature_schema *schema, gbml_boost_inputs *out, gbml_env *env);
/* ... as a training's (a coordinator's to its shards): slot columns (GBML_BOOST_CAT_SLOT) too. */
int			gbml_boost_inputs_read_training(const uint8_t *data, size_t len, int n_inputs,
											const gbml_feature_schema *schema, gbml_boost_inputs *out,
											gbml_env *env);
void		gbml_boost_inputs_free(gbml_boost_inputs *in, gbml_env *env);

/*
 * Appends a model_json member "categorical":{...} describing the transforms
 * (classes > 0, a MultiClass model: each ctr_mean's class too).
 */
void		gbml_boost_inputs_json(const gbml_boost_inputs *in, const gbml_feature_schema *schema, int classes,
								   gbml_strbuf *out);

/* "one_hot", "ctr_mean", "ctr_counter", "set", "slot". */
const char *gbml_boost_derived_kind_name(int kind);

#endif
