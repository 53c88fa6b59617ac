/*
 * params.h — the one parameter parser every trainer shares.
 *
 * A trainer declares its parameters as a table of gbml_param_spec (name,
 * type, range, default, description) that maps each key onto a field of its
 * own params struct.  The glue turns the user's jsonb into a flat list of
 * gbml_param_value; gbml_params_parse() applies defaults, then the values,
 * rejecting unknown keys, wrong types and out-of-range values with a message
 * that names the key and the accepted range.  gbml_params_to_json() writes
 * the resolved parameters (defaults included) into the model.
 */
#ifndef GBML_PARAMS_H
#define GBML_PARAMS_H

#include <stddef.h>
#include "env.h"
#include "strbuf.h"

typedef enum gbml_param_type
{
	GBML_PARAM_INT,				/* int64_t field; JSON number that is integral */
	GBML_PARAM_REAL,			/* double field */
	GBML_PARAM_BOOL,			/* bool field */
	GBML_PARAM_ENUM,			/* int field: index into choices */
	GBML_PARAM_STRING,			/* char * field (allocated), NULL default allowed */
	GBML_PARAM_ENUM_OR_MATRIX,	/* gbml_enum_or_matrix field: a choice or a numeric array */
	GBML_PARAM_NAMES			/* gbml_names field: a JSON array of strings (or one string) */
} gbml_param_type;

/* A dense numeric matrix from a JSON array ([1,2] is 1 x 2; [[1,2],[3,4]] is 2 x 2). */
typedef struct gbml_matrix
{
	double	   *values;			/* rows * cols, row-major; NULL when absent */
	int64_t		rows;
	int64_t		cols;
} gbml_matrix;

/* A list of names (column names), allocated through env; n == 0 and names NULL when absent. */
typedef struct gbml_names
{
	char	  **names;
	int			n;
} gbml_names;

typedef struct gbml_enum_or_matrix
{
	int			choice;			/* index into choices, or -1 when matrix is given */
	gbml_matrix matrix;
} gbml_enum_or_matrix;

typedef struct gbml_param_spec
{
	const char *name;
	gbml_param_type type;
	size_t		offset;			/* offsetof(params struct, field) */
	double		min;			/* INT/REAL: inclusive bounds */
	double		max;
	double		default_number; /* INT/REAL/BOOL(0/1)/ENUM(index) */
	const char *default_string; /* STRING default (may be NULL) */
	const char *const *choices; /* ENUM / ENUM_OR_MATRIX: NULL-terminated */
	const char *doc;			/* one line for the README and errors */
} gbml_param_spec;

/* Terminates a spec table. */
#define GBML_PARAM_END {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL}

/* One key/value of the user's params jsonb, converted by the glue. */
typedef enum gbml_value_kind
{
	GBML_VALUE_NULL,
	GBML_VALUE_NUMBER,
	GBML_VALUE_STRING,
	GBML_VALUE_BOOL,
	GBML_VALUE_MATRIX,			/* numeric array or array of equal-length numeric arrays */
	GBML_VALUE_NAMES,			/* array of strings */
	GBML_VALUE_OTHER			/* object, or an array that is not numeric/rectangular */
} gbml_value_kind;

typedef struct gbml_param_value
{
	const char *key;
	gbml_value_kind kind;
	double		number;
	bool		boolean;
	const char *string;
	gbml_matrix matrix;
	const char *const *names;	/* GBML_VALUE_NAMES */
	int			n_names;
} gbml_param_value;

/*
 * Parses values against one or more spec tables (NULL-terminated array of
 * tables), writing each table's fields into the matching struct in `outs`.
 * `context` names the algorithm in messages ("boost").
 */
int			gbml_params_parse(gbml_env *env, const char *context,
							  const gbml_param_spec *const *tables, void *const *outs,
							  const gbml_param_value *values, int n_values);

/* Frees what gbml_params_parse allocated in the structs (strings, matrices). */
void		gbml_params_free(gbml_env *env, const gbml_param_spec *const *tables, void *const *outs);

/* Writes {"key": value, ...} for every parameter of the tables (resolved values). */
void		gbml_params_to_json(gbml_strbuf *sb, const gbml_param_spec *const *tables,
								const void *const *structs, bool *first);

#endif
