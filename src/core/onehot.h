/*
 * onehot.h — one-hot encoding of categorical features (schema.h) for the
 * trainers that work on numbers: SAGA (a weight per category) and K-Means
 * with one_hot (a 0/1 coordinate per category).  The encoding is learned
 * from the training rows, trained on as plain numeric rows, stored in the
 * model ('ONEH') and applied again to the raw rows at scoring time, so a
 * row scores exactly as its encoded copy trained.
 *
 * Columns of an encoded row: the numeric input features first, in input
 * order, then one block per categorical feature, in input order: an
 * indicator (0/1) per kept category, ids ascending, NULL (when kept) last,
 * then, when the encoding has one, the "other" column.  Kept: every
 * category some training row has, at most max_categories of them (the most
 * frequent; ties to the smaller id, NULL counting as the largest).  Every
 * other value — a category past the cap, one no training row had, NULL
 * when not kept, and at scoring time a value training never saw
 * (GBML_CATEGORY_UNSEEN) — sets the other column, or, without one, leaves
 * the whole block at zero.  The counts are over all training rows, so the
 * columns depend neither on scan order nor on threads.
 *
 * Section 'ONEH' (little-endian):
 *   u32 layout version (1) | u32 flags (bit 0: an other column per block) |
 *   u32 input features | u32 columns | u32 blocks |
 *   per block: u32 input feature | u32 kept | u32 slot[kept]
 * where a slot is a category id, or the feature's n_categories for NULL,
 * strictly ascending.  A model with the section also has 'SCHM' (the
 * categories' values and names); the loader checks the two agree.
 */
#ifndef GBML_ONEHOT_H
#define GBML_ONEHOT_H

#include "algorithm.h"
#include "schema.h"

#include <math.h>

#define GBML_SECTION_ONEHOT GBML_TAG('O','N','E','H')
#define GBML_ONEHOT_LAYOUT_VERSION 1
#define GBML_ONEHOT_FLAG_OTHER 1u

/* One categorical feature's block of columns. */
typedef struct gbml_onehot_block
{
	int			input;			/* the input feature */
	int			n_categories;	/* the schema's; slot n_categories is NULL */
	int			first_col;		/* the block is columns [first_col, first_col + n_cols) */
	int			n_cols;			/* n_kept, plus the other column if the encoding has them */
	int			n_kept;
	int32_t    *kept;			/* n_kept slots, ascending */
	int32_t    *col_of;			/* n_categories + 1: slot -> its column in the block, or -1 */
} gbml_onehot_block;

typedef struct gbml_onehot
{
	int			n_inputs;		/* input features */
	int			n_cols;			/* encoded columns */
	int			n_numeric;		/* columns [0, n_numeric) are the numeric inputs (col_input says which) */
	int		   *col_input;		/* n_cols: each column's input feature */
	bool		other;			/* each block ends with an other column */
	int			n_blocks;
	gbml_onehot_block *blocks;
	const gbml_feature_schema *schema;	/* names and values (the dataset's, or own_schema) */
	gbml_feature_schema *own_schema;	/* a model loaded without a scorer: 'SCHM' parsed here (else borrowed) */
} gbml_onehot;

/* A raw value's slot in block b (NaN: NULL), or -1 when it is no category id of the feature. */
static inline int
gbml_onehot_slot(const gbml_onehot_block *b, float v)
{
	return gbml_category_slot(v, b->n_categories);
}

/* The column of block b (0-based inside it) a raw value sets, or -1: none (all zeros). */
static inline int
gbml_onehot_hit(const gbml_onehot *e, const gbml_onehot_block *b, float v)
{
	int			slot = gbml_onehot_slot(b, v);
	int			col = slot >= 0 ? b->col_of[slot] : -1;

	return col >= 0 ? col : e->other ? b->n_kept : -1;
}

/* The encoded row of raw row x (n_inputs values) into out (n_cols values). */
void		gbml_onehot_row(const gbml_onehot *e, const float *x, float *out);

/* What a trainer asks of the encoding it learns. */
typedef struct gbml_onehot_options
{
	const gbml_algorithm *algo; /* its name in messages; where its encoded rows may spill */
	int64_t		max_categories; /* kept per feature at most; 0 = no cap */
	bool		other;			/* an other column per block */
	/*
	 * Count the categories by the schema's category_counts (the union's,
	 * across servers: the rows are one shard's, or none on the coordinator)
	 * instead of by the rows; an error when a categorical feature has none.
	 */
	bool		union_counts;
} gbml_onehot_options;

/*
 * The encoding of ds (its schema has categorical features) learned from its
 * rows, and ds and eval (NULL: none) encoded into *xds and *xeval (both
 * initialised here, in canonical order: the source's, row for row).  The
 * eval set's ids are the training schema's (its schema, if it has one of
 * its own, must list the same categories: an error otherwise).  A
 * numeric value that is not finite, or a categorical one that is no
 * category id of its feature, is an error naming the column; in the eval
 * set GBML_CATEGORY_UNSEEN goes to the other column.  The encoded rows
 * spill to temporary files past the budget (gbml_plan_spill) like any
 * trainer's, and from the start when the source's rows are in files.  On
 * failure everything is freed and *enc is NULL.
 *
 * With union_counts and ds's rows on shards (the coordinator), *xds is the
 * shards' encoded rows as the trainer sees them (their link, rows, the
 * encoding's columns, checked against the shards' hellos) and only the
 * eval set is encoded here.
 */
int			gbml_onehot_prepare(const gbml_dataset *ds, const gbml_dataset *eval,
								const gbml_onehot_options *o, gbml_env *env, gbml_onehot **enc,
								gbml_dataset *xds, gbml_dataset *xeval);

/*
 * After the training on them: what the encoded sets' temporary files took
 * goes into env's trainer figures (the run report), and the sets and the
 * encoding are freed.
 */
void		gbml_onehot_finish(gbml_onehot *enc, gbml_dataset *xds, gbml_dataset *xeval, gbml_env *env);

/*
 * Each categorical feature's rows per category over ds's rows, by its
 * schema: counts[k] for the k-th categorical feature, n_categories + 1
 * values (NULL's last; the caller's arrays, set here), every row checked
 * as learning checks it.  What a shard counts of its training rows for
 * the union's counts (onehot_counts.h).
 */
int			gbml_onehot_count(const gbml_dataset *ds, const char *algo, int64_t *const *counts, gbml_env *env);

/*
 * With ds->has_missing and a schema: the error naming the first numeric
 * column holding NaN or an infinity, with a hint (GBML_OK when only
 * categorical columns are NaN, i.e. NULL).  Without a schema: GBML_OK (the
 * caller keeps its unnamed message).
 */
int			gbml_onehot_check_numeric(const gbml_dataset *ds, const char *algo, const char *what,
									  gbml_env *env);

/* The 'ONEH' section body. */
void		gbml_onehot_write(const gbml_onehot *e, gbml_strbuf *sb);
/* The 'ONEH' section, added to a model being written. */
int			gbml_onehot_add_section(const gbml_onehot *e, gbml_model_writer *w, gbml_env *env);

/*
 * The model's encoding into *out: NULL when it has no 'ONEH' section and
 * its schema (if any) no categorical feature.  GBML_ECORRUPT when the
 * section, the schema or their agreement is damaged, or a categorical
 * feature has no encoding.
 */
int			gbml_onehot_load(const gbml_model_reader *model, gbml_env *env, gbml_onehot **out);

void		gbml_onehot_free(gbml_onehot *e, gbml_env *env);

/*
 * JSON: "columns":[...], each encoded column as {"feature":name} (numeric),
 * {"feature":name,"category":value} (value null for NULL) or
 * {"feature":name,"other":true}.
 */
void		gbml_onehot_json_columns(const gbml_onehot *e, gbml_strbuf *out);
/* JSON: the category (string, or null for NULL) of column `col` of block b. */
void		gbml_onehot_json_category(const gbml_onehot_block *b, const gbml_feature_schema *s, int col,
									  gbml_strbuf *out);

#endif
