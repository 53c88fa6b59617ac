/*
 * columns.c — features from ordinary columns: which columns of a source are
 * features and of what kind (numeric, categorical, an array expanded into
 * one feature per element), the values a categorical column takes, and one
 * row turned into the engine's floats (schema.h says how categories and
 * NULLs are encoded).
 *
 * Training (gbml.train without a features array, the row aggregates) and
 * scoring by row convert every value through the same functions here, so a
 * value scores exactly as it trained: numbers are cast to float in C, a
 * categorical value is its text (the type's output function; text types
 * as they are, char(n) without its padding, as ::text does) looked up in the
 * sorted values.  Also the checks of the columns around the features: the
 * label, weight and group columns' types, and that feature_columns and
 * categorical_columns name features.
 */
#include "glue.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "parser/parse_coerce.h"
#include "parser/parse_type.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "schema.h"

/* How a column's values become features. */
typedef enum col_kind
{
	COL_UNSUPPORTED,
	COL_NUMERIC,				/* int2/4/8, float4/8, numeric, bool: one feature */
	COL_CATEGORICAL,			/* text types, enums, or named in categorical_columns: one feature (an id) */
	COL_ARRAY					/* real[], float8[], numeric[], int[] or pgvector's vector: one feature an element */
} col_kind;

typedef struct gbml_column
{
	char	   *name;
	int			attno;			/* 1-based position in the tuples this plan reads */
	Oid			typid;
	Oid			basetype;		/* typid without its domains */
	col_kind	kind;
	int			first;			/* its first feature */
	int			width;			/* its number of features (an array's length) */
	Oid			elemtype;		/* arrays: the element type; InvalidOid for a vector (cast) */
	Oid			castfunc;		/* pgvector's vector: the vector -> real[] cast function */
	FmgrInfo	cast;			/* ... looked up once (a per-row OidFunctionCall1 looked it up per value) */
	FmgrInfo	out;			/* categorical of a non-text type: its output function */
	bool		text_like;		/* text, varchar, name, char(n): the bytes are the value */
	int16		elem_len;		/* arrays: the element type's storage, looked up once */
	bool		elem_byval;
	char		elem_align;
	int32		n_categories;	/* a training plan's categorical column: its values, sorted */
	char	  **categories;
	bool		given;			/* ... given by the caller (a shard's: the coordinator's), not probed */
	struct category_memo_hash *memo;	/* a pass-by-value categorical column: ids by datum */
} gbml_column;

/*
 * A pass-by-value categorical column's (enums, integers) category ids by
 * datum: its output function (a catalog lookup for an enum) and the name
 * search run once per distinct value instead of once per row.  A
 * simplehash table in the plan's context; past CATEGORY_MEMO_MAX values new
 * ones are not kept.
 */
#define CATEGORY_MEMO_MAX 65536
typedef struct category_memo_entry
{
	Datum		key;
	int32		id;				/* as gbml_schema_category_id gave it (< 0: unseen) */
	char		status;			/* simplehash's */
} category_memo_entry;

#define SH_PREFIX category_memo
#define SH_ELEMENT_TYPE category_memo_entry
#define SH_KEY_TYPE Datum
#define SH_KEY key
#define SH_HASH_KEY(tb, k) murmurhash32((uint32) ((uint64) (k) ^ ((uint64) (k) >> 32)))
#define SH_EQUAL(tb, a, b) ((a) == (b))
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

struct gbml_column_plan
{
	int			n_columns;
	gbml_column *cols;
	int			n_features;
	gbml_feature_schema *schema;	/* palloc'd with the plan (for a row: the model's) */
	HTAB	  **dicts;			/* the row aggregates: each categorical column's values so far */
	bool		sorted;			/* gbml_column_plan_sort_categories ran (a final function may run twice) */
	MemoryContext mcxt;			/* the plan's context: collected values and row buffers live there */
	Datum	   *values;			/* gbml_column_plan_row: one deformed row (n_values attributes) */
	bool	   *nulls;
	int			n_values;
	/*
	 * A row plan whose columns are all numbers (column i is feature i): their
	 * base types packed, so scoring a row converts each argument without
	 * column_value's dispatch (NULL: some column is not a plain number).
	 */
	Oid		   *numeric_types;
	bool		all_float4;		/* and they are all real: no per-column type switch either */
};

int
gbml_attno(TupleDesc td, const char *name)
{
	for (int a = 0; a < td->natts; a++)
		if (!TupleDescAttr(td, a)->attisdropped && strcmp(NameStr(TupleDescAttr(td, a)->attname), name) == 0)
			return a + 1;
	return 0;
}

static bool
is_numeric_type(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID || t == FLOAT4OID || t == FLOAT8OID ||
		t == NUMERICOID || t == BOOLOID;
}

void
gbml_column_plan_check_source(const gbml_column_plan *p, TupleDesc td, const char *what)
{
	for (int i = 0; i < p->n_columns; i++)
		if (gbml_attno(td, p->cols[i].name) == 0)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
							errmsg("%s: the source has no column \"%s\", a feature of the training source", what,
								   p->cols[i].name),
							errhint("An eval source gives the training source's feature columns, by name (extra "
									"columns are ignored).")));
}

static bool
is_text_type(Oid t)
{
	return t == TEXTOID || t == VARCHAROID || t == BPCHAROID || t == NAMEOID;
}

/* pgvector's "vector": found by name, cast to real[] through its own cast function. */
static Oid
vector_cast(Oid t)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(t));
	bool		is_vector;
	Oid			func = InvalidOid;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	is_vector = strcmp(NameStr(((Form_pg_type) GETSTRUCT(tup))->typname), "vector") == 0;
	ReleaseSysCache(tup);
	if (!is_vector)
		return InvalidOid;
	if (find_coercion_pathway(FLOAT4ARRAYOID, t, COERCION_EXPLICIT, &func) != COERCION_PATH_FUNC)
		return InvalidOid;
	return func;
}

/* The kind of a column of type typid (categorical forced by categorical_columns). */
static col_kind
classify(gbml_column *c, bool forced_categorical)
{
	Oid			t = c->basetype;
	Oid			elem = get_element_type(t);

	c->text_like = is_text_type(t);
	if (forced_categorical || c->text_like || type_is_enum(t))
	{
		if (OidIsValid(elem))
			return COL_UNSUPPORTED;
		if (!c->text_like)
		{
			Oid			outfn;
			bool		varlena;

			getTypeOutputInfo(c->typid, &outfn, &varlena);
			fmgr_info(outfn, &c->out);
			/* in the plan's context: its columns were just allocated here */
			if (get_typbyval(c->typid))
				c->memo = category_memo_create(CurrentMemoryContext, 64, NULL);
		}
		return COL_CATEGORICAL;
	}
	if (is_numeric_type(t))
		return COL_NUMERIC;
	if (OidIsValid(elem) && is_numeric_type(getBaseType(elem)) && getBaseType(elem) != BOOLOID)
		c->elemtype = getBaseType(elem);
	else if (OidIsValid(c->castfunc = vector_cast(t)))
	{
		c->elemtype = FLOAT4OID;
		/* in the plan's context, as the output function above */
		fmgr_info(c->castfunc, &c->cast);
	}
	else
		return COL_UNSUPPORTED;
	get_typlenbyvalalign(OidIsValid(c->castfunc) ? FLOAT4OID : elem, &c->elem_len, &c->elem_byval, &c->elem_align);
	return COL_ARRAY;
}

static bool
in_names(const gbml_names *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

/* The target columns' types (base types, domains stripped). */
static bool
is_label_type(Oid t)
{
	return is_numeric_type(t);
}

static bool
is_weight_type(Oid t)
{
	return is_numeric_type(t) && t != BOOLOID;
}

static bool
is_group_type(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID || t == NUMERICOID;
}

/* One target column's type (when td has it), or an ERROR naming it. */
static void
check_target_type(TupleDesc td, const char *name, const char *role, bool (*fits) (Oid), const char *must,
				  const char *what)
{
	int			att = gbml_attno(td, name);
	Oid			typid;

	if (att == 0)
		return;
	typid = TupleDescAttr(td, att - 1)->atttypid;
	if (!fits(getBaseType(typid)))
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("%s: the %s column \"%s\" has type %s; %s", what, role, name, format_type_be(typid),
							   must)));
}

/* feature_columns must not name a column the training reads as the label, group or weight (a feature of the label leaks it). */
static void
check_not_a_feature(const gbml_common_params *cp, TupleDesc td, const char *name, const char *role, const char *what)
{
	if (gbml_attno(td, name) != 0 && in_names(&cp->feature_columns, name))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: feature_columns names \"%s\", the %s column", what, name, role)));
}

void
gbml_check_target_columns(const gbml_common_params *cp, TupleDesc td, bool with_label, const char *what)
{
	if (with_label)
	{
		check_not_a_feature(cp, td, cp->label_column, "label", what);
		check_target_type(td, cp->label_column, "label", is_label_type, "a label must be a number or boolean", what);
	}
	check_not_a_feature(cp, td, cp->weight_column, "weight", what);
	check_target_type(td, cp->weight_column, "weight", is_weight_type, "a weight must be a number", what);
	check_not_a_feature(cp, td, cp->group_column, "group", what);
	check_target_type(td, cp->group_column, "group", is_group_type,
					  "a group id must be an integer (smallint, integer, bigint or numeric)", what);
}

/* ---- values ---- */

/* A categorical value's text (palloc'd or pointing into d) and its length. */
static const char *
category_text(const gbml_column *c, Datum d, size_t *len)
{
	if (c->text_like)
	{
		const char *s;

		if (c->basetype == NAMEOID)
		{
			s = NameStr(*DatumGetName(d));
			*len = strlen(s);
			return s;
		}
		{
			text	   *t = DatumGetTextPP(d);

			s = VARDATA_ANY(t);
			*len = VARSIZE_ANY_EXHDR(t);
		}
		if (c->basetype == BPCHAROID)
			while (*len > 0 && s[*len - 1] == ' ')
				(*len)--;
		return s;
	}
	{
		char	   *s = OutputFunctionCall((FmgrInfo *) &c->out, d);

		*len = strlen(s);
		return s;
	}
}

/* An array column's elements into x[0 .. width): NULL elements are NaN. */
static void
array_values(const gbml_column *c, Datum d, float *x, const char *what, int64 rowno)
{
	ArrayType  *arr;
	Datum	   *vals;
	bool	   *nulls;
	int			n;
	char		where[64];

	if (OidIsValid(c->castfunc))
		d = FunctionCall1((FmgrInfo *) &c->cast, d);
	arr = DatumGetArrayTypeP(d);
	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						errmsg("%s: %scolumn \"%s\" is an array of %d dimensions; its features take a one-dimensional array",
							   what, gbml_row_prefix(where, sizeof(where), rowno), c->name, ARR_NDIM(arr))));
	if (n != c->width)
		ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						errmsg("%s: %scolumn \"%s\" has %d elements, the features take %d",
							   what, gbml_row_prefix(where, sizeof(where), rowno), c->name, n, c->width),
						errhint("Every row's \"%s\" must have the same length.", c->name)));
	if (c->elemtype == FLOAT4OID && !ARR_HASNULL(arr))
	{
		memcpy(x, ARR_DATA_PTR(arr), sizeof(float) * (size_t) n);
		return;
	}
	deconstruct_array(arr, ARR_ELEMTYPE(arr), c->elem_len, c->elem_byval, c->elem_align, &vals, &nulls, &n);
	for (int i = 0; i < n; i++)
		x[i] = nulls[i] ? NAN : gbml_column_number(vals[i], c->elemtype);
	pfree(vals);
	pfree(nulls);
}

/*
 * Column c's value (d, isnull) into x[c->first ..).  A categorical value is
 * looked up in feature f's categories: a value training never saw is
 * GBML_CATEGORY_UNSEEN (scoring, an eval set) or, with unseen_is_error,
 * an ERROR (the training source changed between its two scans).
 */
static void
column_value(const gbml_column *c, const gbml_feature_def *f, Datum d, bool isnull, float *x,
			 bool unseen_is_error, const char *what, int64 rowno)
{
	float	   *out = x + c->first;

	if (isnull)
	{
		for (int i = 0; i < c->width; i++)
			out[i] = NAN;
		return;
	}
	switch (c->kind)
	{
		case COL_NUMERIC:
			out[0] = gbml_column_number(d, c->basetype);
			break;
		case COL_ARRAY:
			array_values(c, d, out, what, rowno);
			break;
		case COL_CATEGORICAL:
			{
				size_t		len;
				const char *s;
				int32		id;

				if (c->memo != NULL)
				{
					category_memo_entry *e = category_memo_lookup(c->memo, d);

					if (e != NULL && (e->id >= 0 || !unseen_is_error))
					{
						out[0] = e->id < 0 ? GBML_CATEGORY_UNSEEN : (float) e->id;
						break;
					}
				}
				s = category_text(c, d, &len);
				id = gbml_schema_category_id(f, s, len);
				if (c->memo != NULL && c->memo->members < CATEGORY_MEMO_MAX)
				{
					bool		found;

					category_memo_insert(c->memo, d, &found)->id = id;
				}

				if (id < 0 && unseen_is_error)
					ereport(ERROR, (errcode(ERRCODE_DATA_EXCEPTION),
									errmsg("%s: row " INT64_FORMAT ": column \"%s\" has the value \"%.*s\", which the first scan of the source did not return",
										   what, rowno, c->name, (int) Min(len, 200), s),
									errhint("The source must return the same rows on each scan (no random() or LIMIT without ORDER BY).")));
				out[0] = id < 0 ? GBML_CATEGORY_UNSEEN : (float) id;
			}
			break;
		case COL_UNSUPPORTED:
			break;
	}
}

/*
 * For a trainer without missing values: a number column's NaN or infinity
 * (float columns hold them) is an ERROR naming it, as a NULL is.
 */
static void
check_finite(const gbml_column *c, const float *x, const char *what, int64 rowno)
{
	if (c->kind == COL_CATEGORICAL)
		return;
	for (int e = 0; e < c->width; e++)
		if (!isfinite(x[c->first + e]))
		{
			if (c->kind == COL_ARRAY)
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s: row " INT64_FORMAT ": element %d of column \"%s\" is NULL, NaN or infinite",
									   what, rowno, e + 1, c->name)));
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: row " INT64_FORMAT ": column \"%s\" is %s", what, rowno, c->name,
								   isnan(x[c->first]) ? "NaN" : "infinite"),
							errhint("This algorithm needs a finite number in every numeric feature.")));
		}
}

/* ---- the training plan ---- */

/* The source's feature columns, in order: feature_columns, or every column but the named and excluded ones. */
static List *
feature_columns(const gbml_common_params *cp, TupleDesc td, const char *what)
{
	List	   *cols = NIL;

	if (cp->feature_columns.n > 0)
	{
		for (int i = 0; i < cp->feature_columns.n; i++)
		{
			int			attno = gbml_attno(td, cp->feature_columns.names[i]);

			if (attno == 0)
				ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
								errmsg("%s: feature_columns names \"%s\", which the source does not have", what,
									   cp->feature_columns.names[i])));
			if (list_member_int(cols, attno - 1))
				ereport(ERROR, (errcode(ERRCODE_DUPLICATE_COLUMN),
								errmsg("%s: feature_columns names \"%s\" twice", what, cp->feature_columns.names[i])));
			cols = lappend_int(cols, attno - 1);
		}
		return cols;
	}
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);
		const char *name = NameStr(att->attname);

		if (att->attisdropped || strcmp(name, cp->label_column) == 0 || strcmp(name, cp->group_column) == 0 ||
			strcmp(name, cp->weight_column) == 0 || in_names(&cp->exclude_columns, name))
			continue;
		cols = lappend_int(cols, a);
	}
	return cols;
}

/* Feature attribute a's name is the source's only live column of that name (the select list names it). */
static void
check_one_column_named(TupleDesc td, int a, const char *what)
{
	const char *name = NameStr(TupleDescAttr(td, a)->attname);

	for (int b = 0; b < td->natts; b++)
		if (b != a && !TupleDescAttr(td, b)->attisdropped && strcmp(NameStr(TupleDescAttr(td, b)->attname), name) == 0)
			ereport(ERROR, (errcode(ERRCODE_DUPLICATE_COLUMN),
							errmsg("%s: the source has two columns named \"%s\"", what, name),
							errhint("Give each column its own name (AS ...) in the source query.")));
}

static bool
in_plan(const gbml_column_plan *p, const char *name)
{
	for (int i = 0; i < p->n_columns; i++)
		if (strcmp(p->cols[i].name, name) == 0)
			return true;
	return false;
}

static void
check_names_exist(const gbml_names *l, TupleDesc td, const char *param, const char *what)
{
	for (int i = 0; i < l->n; i++)
		if (gbml_attno(td, l->names[i]) == 0)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
							errmsg("%s: %s names \"%s\", which the source does not have", what, param, l->names[i])));
}

static int
cmp_cstring(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Column c's sorted, distinct values from an array of its non-NULL values. */
static void
set_categories(gbml_column *c, Datum arr_d, bool isnull, const char *what)
{
	ArrayType  *arr;
	int16		typlen;
	bool		byval;
	char		align;
	Datum	   *vals;
	bool	   *nulls;
	int			n,
				kept = 0;
	char	  **v;

	c->n_categories = 0;
	if (isnull)
		return;
	arr = DatumGetArrayTypeP(arr_d);
	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &byval, &align);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, byval, align, &vals, &nulls, &n);
	if (n > GBML_SCHEMA_MAX_CATEGORIES)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("%s: column \"%s\" has %d distinct values, more than the %d a categorical feature may have",
							   what, c->name, n, GBML_SCHEMA_MAX_CATEGORIES),
						errhint("Exclude it with \"exclude_columns\".")));
	v = palloc(sizeof(char *) * (n > 0 ? n : 1));
	for (int i = 0; i < n; i++)
	{
		size_t		len;
		const char *s = category_text(c, vals[i], &len);

		if (memchr(s, '\0', len) != NULL)
			len = strlen(s);
		v[i] = pnstrdup(s, len);
	}
	qsort(v, n, sizeof(char *), cmp_cstring);
	/* char(n) values that differ only in padding are one value, as with ::text */
	for (int i = 0; i < n; i++)
		if (kept == 0 || strcmp(v[kept - 1], v[i]) != 0)
			v[kept++] = v[i];
	c->categories = v;
	c->n_categories = kept;
}

/*
 * The query of one scan of `from` (a relation, or a query in parentheses
 * with no alias) for what the row loop needs to know first: each
 * categorical column's distinct values and each array column's length,
 * three columns each; NULL when no column needs it.  A column with given
 * categories (the shard of a training across servers) is not asked for.
 */
static char *
probe_query(const gbml_column_plan *p, const char *from)
{
	StringInfoData q;
	bool		any = false;

	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT ");
	for (int i = 0; i < p->n_columns; i++)
	{
		const gbml_column *c = &p->cols[i];
		const char *id = quote_identifier(c->name);

		if (c->kind == COL_CATEGORICAL && !c->given)
			appendStringInfo(&q, "%sarray_agg(DISTINCT s.%s) FILTER (WHERE s.%s IS NOT NULL), NULL::int, NULL::int",
							 any ? ", " : "", id, id);
		else if (c->kind == COL_ARRAY && !c->given)
			appendStringInfo(&q, "%sNULL::int[], min(cardinality(s.%s%s)), max(cardinality(s.%s%s))", any ? ", " : "",
							 id, OidIsValid(c->castfunc) ? "::real[]" : "", id, OidIsValid(c->castfunc) ? "::real[]" : "");
		else
			continue;
		any = true;
	}
	if (!any)
		return NULL;
	appendStringInfo(&q, " FROM %s AS s", from);
	return q.data;
}

/* Whether probe_query asks for column c. */
static bool
probed(const gbml_column *c)
{
	return (c->kind == COL_CATEGORICAL || c->kind == COL_ARRAY) && !c->given;
}

/* An array column's length from its rows' shortest and longest (null_min: it has no non-NULL value). */
static void
set_width(gbml_column *c, bool null_min, int lo, int hi, const char *what)
{
	if (null_min || lo != hi || lo < 1)
		ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						errmsg("%s: array column \"%s\" %s", what, c->name,
							   null_min ? "has no non-NULL, non-empty value" :
							   psprintf("has rows of %d and of %d elements", lo, hi)),
						errhint("Every row's array must have the same length; exclude the column with \"exclude_columns\" otherwise.")));
	c->width = lo;
}

/* One scan of the source (probe_query) for each categorical column's values and each array column's length. */
static void
probe_columns(gbml_column_plan *p, const char *base, const char *what)
{
	char	   *q = probe_query(p, psprintf("(%s)", base));
	MemoryContext plan_cxt = CurrentMemoryContext;

	if (q == NULL)
		return;
	if (SPI_execute(q, true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR, (errmsg("%s: could not read the categorical values and array lengths of the source", what)));
	/* the categories live with the plan, not in SPI's procedure context (current after the call) */
	MemoryContextSwitchTo(plan_cxt);
	for (int i = 0, k = 0; i < p->n_columns; i++)
	{
		gbml_column *c = &p->cols[i];
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	rtd = SPI_tuptable->tupdesc;
		bool		null_vals,
					null_min,
					null_max;
		Datum		vals,
					lo,
					hi;

		if (!probed(c))
			continue;
		vals = SPI_getbinval(tup, rtd, 3 * k + 1, &null_vals);
		lo = SPI_getbinval(tup, rtd, 3 * k + 2, &null_min);
		hi = SPI_getbinval(tup, rtd, 3 * k + 3, &null_max);
		k++;
		if (c->kind == COL_CATEGORICAL)
			set_categories(c, vals, null_vals, what);
		else
			set_width(c, null_min, null_min ? 0 : DatumGetInt32(lo), null_max ? 0 : DatumGetInt32(hi), what);
	}
}

/* The schema's entries for column c (its features start at c->first). */
static void
describe_column(gbml_column_plan *p, gbml_column *c)
{
	char	   *type = format_type_be(c->typid);

	for (int e = 0; e < c->width; e++)
	{
		gbml_feature_def *f = &p->schema->features[c->first + e];

		f->column = c->name;
		f->element = c->kind == COL_ARRAY ? e + 1 : 0;
		f->name = c->kind == COL_ARRAY ? psprintf("%s[%d]", c->name, e + 1) : c->name;
		f->source_type = type;
		f->kind = c->kind == COL_CATEGORICAL ? GBML_FEATURE_CATEGORICAL : GBML_FEATURE_NUMERIC;
		f->n_categories = c->n_categories;
		f->categories = c->categories;
	}
}

/* Once every column's width is known: where its features start, and the schema. */
static void
finish_schema(gbml_column_plan *p)
{
	int			next = 0;

	for (int i = 0; i < p->n_columns; i++)
	{
		p->cols[i].first = next;
		next += p->cols[i].width;
	}
	p->n_features = next;
	p->schema = palloc0(sizeof(gbml_feature_schema));
	p->schema->n_features = next;
	p->schema->features = palloc0(sizeof(gbml_feature_def) * next);
	for (int i = 0; i < p->n_columns; i++)
		describe_column(p, &p->cols[i]);
}

static void
unsupported_column(const gbml_column *c, bool forced, const char *what)
{
	ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
					errmsg("%s: column \"%s\" has type %s, which cannot be a %sfeature", what, c->name,
						   format_type_be(c->typid), forced ? "categorical " : ""),
					errhint("Features are numbers, booleans, text or enum categories, and arrays of numbers; "
							"leave the column out with \"exclude_columns\" or cast it in the source query.")));
}

/*
 * The feature columns of td and their kinds, each one feature wide for
 * now.  by_projection: the rows come from a query selecting these columns
 * first (gbml.train), else they are td's own rows (the aggregates).
 */
static gbml_column_plan *
plan_columns(const gbml_common_params *cp, TupleDesc td, bool by_projection, const char *what)
{
	gbml_column_plan *p = palloc0(sizeof(gbml_column_plan));
	List	   *atts;
	ListCell   *lc;
	int			i = 0;

	p->mcxt = CurrentMemoryContext;
	check_names_exist(&cp->exclude_columns, td, "exclude_columns", what);
	check_names_exist(&cp->categorical_columns, td, "categorical_columns", what);
	atts = feature_columns(cp, td, what);
	foreach(lc, atts)
		check_one_column_named(td, lfirst_int(lc), what);
	if (atts == NIL)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: the source has no feature columns", what),
						errhint("A source gives either a real[] column \"%s\" or feature columns besides the label, group and weight columns.",
								cp->features_column)));
	p->n_columns = list_length(atts);
	p->cols = palloc0(sizeof(gbml_column) * p->n_columns);
	foreach(lc, atts)
	{
		Form_pg_attribute att = TupleDescAttr(td, lfirst_int(lc));
		gbml_column *c = &p->cols[i++];
		bool		forced;

		c->name = pstrdup(NameStr(att->attname));
		c->typid = att->atttypid;
		c->basetype = getBaseType(att->atttypid);
		c->attno = by_projection ? i : lfirst_int(lc) + 1;
		forced = in_names(&cp->categorical_columns, c->name);
		if ((c->kind = classify(c, forced)) == COL_UNSUPPORTED)
			unsupported_column(c, forced, what);
		c->width = 1;
	}
	for (int k = 0; k < cp->categorical_columns.n; k++)
		if (!in_plan(p, cp->categorical_columns.names[k]))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: categorical_columns names \"%s\", which is not a feature column", what,
								   cp->categorical_columns.names[k]),
							errhint("It is excluded, left out of feature_columns, or the label, group or weight "
									"column.")));
	return p;
}

/*
 * Column c as given (a shard's, from its coordinator): an array's length,
 * or categories, which must be what set_categories makes, strictly
 * ascending by strcmp.
 */
static void
give_column(gbml_column *c, const gbml_given_columns *given, int g, const char *what)
{
	if (given->width[g] > 0)
	{
		if (c->kind != COL_ARRAY)
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
							errmsg("%s: column \"%s\" is an array on the coordinator but has type %s here", what,
								   c->name, format_type_be(c->typid))));
		c->width = given->width[g];
		c->given = true;
		return;
	}
	if (c->kind != COL_CATEGORICAL)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("%s: column \"%s\" is categorical on the coordinator but has type %s here", what,
							   c->name, format_type_be(c->typid))));
	for (int j = 1; j < given->n_values[g]; j++)
		if (strcmp(given->values[g][j - 1], given->values[g][j]) >= 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: the categories given for column \"%s\" are not sorted and distinct", what,
								   c->name)));
	if (given->n_values[g] > GBML_SCHEMA_MAX_CATEGORIES)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("%s: %d categories given for column \"%s\", more than %d", what,
							   given->n_values[g], c->name, GBML_SCHEMA_MAX_CATEGORIES)));
	c->categories = given->values[g];
	c->n_categories = given->n_values[g];
	c->given = true;
}

gbml_column_plan *
gbml_column_plan_for_source(const gbml_common_params *cp, TupleDesc td, const char *base,
							const gbml_given_columns *given, const char *what)
{
	gbml_column_plan *p = plan_columns(cp, td, true, what);

	for (int g = 0; given && g < given->n; g++)
	{
		int			i = 0;

		while (i < p->n_columns && strcmp(p->cols[i].name, given->names[g]) != 0)
			i++;
		if (i == p->n_columns)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
							errmsg("%s: the coordinator described \"%s\", which is not a feature column here", what,
								   given->names[g])));
		give_column(&p->cols[i], given, g, what);
	}
	for (int i = 0; given && i < p->n_columns; i++)
		if (probed(&p->cols[i]))
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
							errmsg("%s: column \"%s\" is %s here (type %s) but not on the coordinator", what,
								   p->cols[i].name, p->cols[i].kind == COL_ARRAY ? "an array" : "categorical",
								   format_type_be(p->cols[i].typid)),
							errhint("Declare the foreign table's column with the type the shard's column has.")));
	probe_columns(p, base, what);
	finish_schema(p);
	return p;
}

gbml_column_plan *
gbml_column_plan_for_shards(const gbml_common_params *cp, TupleDesc td, bool categorical_ok, const char *what)
{
	gbml_column_plan *p = plan_columns(cp, td, true, what);

	for (int i = 0; !categorical_ok && i < p->n_columns; i++)
		if (p->cols[i].kind == COL_CATEGORICAL)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("%s: column \"%s\" is categorical; across servers categorical columns train with "
								   "boosting only", what, p->cols[i].name),
							errhint("Leave it out with \"exclude_columns\", or train on one server.")));
	/* without categorical or array columns the schema is known now; else after the shards' probes */
	for (int i = 0; i < p->n_columns; i++)
		if (probed(&p->cols[i]))
			return p;
	finish_schema(p);
	return p;
}

char *
gbml_column_plan_shard_probe(const gbml_column_plan *p, const char *relation)
{
	return p->schema ? NULL : probe_query(p, relation);
}

/* Column c's categories: the distinct values of every shard's array (text, the column's type's array). */
static void
merge_shard_categories(gbml_column *c, int n_shards, char *const *const *texts, int field, const char *what)
{
	Datum	   *all = NULL;
	int			n_all = 0;
	int16		typlen;
	bool		byval;
	char		align;

	get_typlenbyvalalign(c->typid, &typlen, &byval, &align);
	for (int s = 0; s < n_shards; s++)
	{
		Datum		arr;
		Datum	   *vals;
		bool	   *nulls;
		int			n;

		if (texts[s][field] == NULL)
			continue;
		arr = OidInputFunctionCall(F_ARRAY_IN, texts[s][field], c->typid, -1);
		deconstruct_array(DatumGetArrayTypeP(arr), c->typid, typlen, byval, align, &vals, &nulls, &n);
		all = all ? repalloc(all, sizeof(Datum) * (n_all + n + 1)) : palloc(sizeof(Datum) * (n + 1));
		memcpy(all + n_all, vals, sizeof(Datum) * n);
		n_all += n;
	}
	/* the same values on several shards are one category: set_categories keeps each once */
	set_categories(c, n_all > 0 ? PointerGetDatum(construct_array(all, n_all, c->typid, typlen, byval, align)) : 0,
				   n_all == 0, what);
}

void
gbml_column_plan_take_shard_probes(gbml_column_plan *p, int n_shards, char *const *const *texts,
								   const char *const *shard_names, const char *what)
{
	int			k = 0;

	for (int i = 0; i < p->n_columns; i++)
	{
		gbml_column *c = &p->cols[i];
		int			width = 0;

		if (!probed(c))
			continue;
		if (c->kind == COL_CATEGORICAL)
			merge_shard_categories(c, n_shards, texts, 3 * k, what);
		for (int s = 0; c->kind == COL_ARRAY && s < n_shards; s++)
		{
			const char *lo = texts[s][3 * k + 1],
					   *hi = texts[s][3 * k + 2];

			if (lo == NULL)
				continue;		/* a shard without values of this column */
			set_width(c, false, pg_strtoint32(lo), hi ? pg_strtoint32(hi) : 0, what);
			if (width > 0 && c->width != width)
				ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
								errmsg("%s: array column \"%s\" has %d elements on shard \"%s\" and %d on an earlier one",
									   what, c->name, c->width, shard_names[s], width)));
			width = c->width;
		}
		if (c->kind == COL_ARRAY && width == 0)
			set_width(c, true, 0, 0, what);
		k++;
	}
	finish_schema(p);
}

void
gbml_column_plan_select(const gbml_column_plan *p, StringInfo q)
{
	/* cast to the training source's types: an eval source's columns are then read the same way */
	for (int i = 0; i < p->n_columns; i++)
		appendStringInfo(q, "%s(s.%s)::%s", i ? ", " : "", quote_identifier(p->cols[i].name),
						 format_type_be_qualified(p->cols[i].typid));
}

static float collected_category(gbml_column_plan *p, int i, Datum d, const char *what);

/*
 * A training row (values and nulls by attribute) into x: the checks a
 * trainer without missing values needs, named by column; categorical values
 * looked up in the plan's values (unseen: an ERROR with unseen_is_error,
 * else GBML_CATEGORY_UNSEEN), or collected (the aggregates' plans).
 */
static void
convert_training_row(gbml_column_plan *p, const Datum *values, const bool *nulls, float *x, bool allow_missing,
					 bool unseen_is_error, const char *what, int64 rowno)
{
	for (int i = 0; i < p->n_columns; i++)
	{
		const gbml_column *c = &p->cols[i];
		int			a = c->attno - 1;

		if (nulls[a] && !allow_missing && c->kind != COL_CATEGORICAL)
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							errmsg("%s: row " INT64_FORMAT ": column \"%s\" is NULL", what, rowno, c->name),
							errhint("This algorithm needs every numeric feature; filter the rows or use coalesce() in the source query.")));
		if (c->kind == COL_CATEGORICAL && p->dicts != NULL)
			x[c->first] = nulls[a] ? NAN : collected_category(p, i, values[a], what);
		else
			column_value(c, &p->schema->features[c->first], values[a], nulls[a], x, unseen_is_error, what, rowno);
		if (!allow_missing)
			check_finite(c, x, what, rowno);
	}
}

void
gbml_column_plan_row(gbml_column_plan *p, HeapTuple tup, TupleDesc td, float *x, bool allow_missing,
					 bool unseen_is_error, const char *what, int64 rowno)
{
	/* deform once (column after column with heap_getattr would walk the tuple again for each) */
	if (p->n_values < td->natts)
	{
		p->values = MemoryContextAlloc(p->mcxt, sizeof(Datum) * td->natts);
		p->nulls = MemoryContextAlloc(p->mcxt, sizeof(bool) * td->natts);
		p->n_values = td->natts;
	}
	heap_deform_tuple(tup, td, p->values, p->nulls);
	convert_training_row(p, p->values, p->nulls, x, allow_missing, unseen_is_error, what, rowno);
}

/* ---- scoring a whole row ---- */

/*
 * Whether the type named t (as format_type_be wrote it at training) gave
 * categories by their text: a text type or an enum, or a domain over one
 * (a model trained on a view's domain scores the table's plain text).
 */
static bool
text_or_enum_type_name(const char *t)
{
	Oid			typid;
	int32		typmod;

	parseTypeString(t, &typid, &typmod, true);
	if (!OidIsValid(typid))
		return false;
	typid = getBaseType(typid);
	return is_text_type(typid) || type_is_enum(typid);
}

/*
 * Whether a row's column can give a categorical feature's values: a text
 * type (or a domain over one) where the feature was trained from a text
 * type, an enum or a domain over either (the values are its labels; see
 * text_or_enum_type_name), else the type it was trained from
 * (categorical_columns on an integer column wants integers, not "3" from
 * some other type).
 */
static bool
category_type_fits(const gbml_column *c, const gbml_feature_def *f)
{
	const char *now = format_type_be(c->typid);

	if (c->kind != COL_CATEGORICAL)
		return false;
	if (strcmp(now, f->source_type) == 0)
		return true;
	return c->text_like && text_or_enum_type_name(f->source_type);
}

/*
 * Binds a model's features (its schema) to the attributes of a row type:
 * each source column by name, its type checked against the feature kind.
 * Extra attributes are ignored.
 */
gbml_column_plan *
gbml_column_plan_for_row(const gbml_feature_schema *schema, TupleDesc td, const char *what)
{
	gbml_column_plan *p = palloc0(sizeof(gbml_column_plan));

	p->schema = (gbml_feature_schema *) schema;
	p->n_features = schema->n_features;
	p->cols = palloc0(sizeof(gbml_column) * (schema->n_features > 0 ? schema->n_features : 1));
	for (int j = 0; j < schema->n_features;)
	{
		const gbml_feature_def *f = &schema->features[j];
		gbml_column *c = &p->cols[p->n_columns++];
		int			at;
		bool		want_cat = f->kind == GBML_FEATURE_CATEGORICAL;

		c->name = f->column;
		c->first = j;
		c->width = 1;
		while (f->element > 0 && j + c->width < schema->n_features &&
			   schema->features[j + c->width].element == f->element + c->width &&
			   strcmp(schema->features[j + c->width].column, f->column) == 0)
			c->width++;
		j += c->width;
		at = gbml_attno(td, f->column) - 1;
		if (at < 0)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
							errmsg("%s: the row has no column \"%s\", a feature of the model", what, f->column),
							errhint("The model was trained on columns %s...; score rows that have them (extra columns are ignored).",
									quote_identifier(schema->features[0].column))));
		c->attno = at + 1;
		c->typid = TupleDescAttr(td, at)->atttypid;
		c->basetype = getBaseType(c->typid);
		c->kind = classify(c, want_cat);
		if ((want_cat && !category_type_fits(c, f)) || (!want_cat && f->element > 0 && c->kind != COL_ARRAY) ||
			(!want_cat && f->element == 0 && c->kind != COL_NUMERIC))
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
							errmsg("%s: column \"%s\" has type %s, but the model trained it as %s (%s)", what, f->column,
								   format_type_be(c->typid),
								   want_cat ? "a categorical feature" : f->element > 0 ? "an array of numbers" : "a number",
								   f->source_type)));
	}
	p->numeric_types = palloc(sizeof(Oid) * (p->n_columns > 0 ? p->n_columns : 1));
	for (int i = 0; i < p->n_columns && p->numeric_types; i++)
		if (p->cols[i].kind == COL_NUMERIC && p->cols[i].first == i)
			p->numeric_types[i] = p->cols[i].basetype;
		else
		{
			pfree(p->numeric_types);
			p->numeric_types = NULL;
		}
	p->all_float4 = p->numeric_types != NULL;
	for (int i = 0; i < p->n_columns && p->all_float4; i++)
		p->all_float4 = p->numeric_types[i] == FLOAT4OID;
	return p;
}

void
gbml_column_plan_values(const gbml_column_plan *p, const Datum *values, const bool *nulls, float *x,
						const char *what)
{
	for (int i = 0; i < p->n_columns; i++)
	{
		const gbml_column *c = &p->cols[i];

		column_value(c, &p->schema->features[c->first], values[c->attno - 1], nulls[c->attno - 1], x, false,
					 what, 0);
	}
}

/*
 * The columns forms' path: plan column i's value is *col[i], numbers
 * converted inline (the per-row cost of scoring by row is mostly this loop).
 */
void
gbml_column_plan_args(const gbml_column_plan *p, const NullableDatum *const *col, float *x, const char *what)
{
	if (p->all_float4)
	{
		for (int i = 0; i < p->n_columns; i++)
			x[i] = col[i]->isnull ? NAN : DatumGetFloat4(col[i]->value);
		return;
	}
	if (p->numeric_types)
	{
		for (int i = 0; i < p->n_columns; i++)
			x[i] = col[i]->isnull ? NAN : gbml_column_number(col[i]->value, p->numeric_types[i]);
		return;
	}
	for (int i = 0; i < p->n_columns; i++)
	{
		const gbml_column *c = &p->cols[i];

		column_value(c, &p->schema->features[c->first], col[i]->value, col[i]->isnull, x, false, what, 0);
	}
}

void
gbml_column_plan_not_finite(const gbml_column_plan *p, const float *x, int j, const bool *column_null,
							const char *algo, const char *what)
{
	for (int i = 0; i < p->n_columns; i++)
	{
		const gbml_column *c = &p->cols[i];

		if (j < c->first || j >= c->first + c->width)
			continue;
		if (c->kind == COL_ARRAY)
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							errmsg("%s: element %d of column \"%s\" is NULL, NaN or infinite; a %s model needs "
								   "finite numbers", what, j - c->first + 1, c->name, algo)));
		ereport(ERROR, (errcode(column_null[i] ? ERRCODE_NULL_VALUE_NOT_ALLOWED : ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: column \"%s\" is %s; a %s model needs a finite number in every numeric feature",
							   what, c->name, column_null[i] ? "NULL" : isnan(x[j]) ? "NaN" : "infinite", algo)));
	}
	elog(ERROR, "%s: feature %d is in no column of the row's plan", what, j + 1);
}

int
gbml_column_plan_attno(const gbml_column_plan *p, int i)
{
	return p->cols[i].attno;
}

const gbml_feature_schema *
gbml_column_plan_schema(const gbml_column_plan *p)
{
	return p->schema;
}

int64 **
gbml_column_plan_category_counts(gbml_column_plan *p)
{
	gbml_feature_schema *schema = p->schema;
	int			n = gbml_schema_n_categorical(schema);
	int64	  **counts = MemoryContextAllocZero(p->mcxt, sizeof(int64 *) * (n > 0 ? n : 1));

	for (int j = 0, k = 0; j < schema->n_features; j++)
		if (gbml_feature_is_categorical(schema, j))
		{
			counts[k] = MemoryContextAllocZero(p->mcxt, sizeof(int64) * (schema->features[j].n_categories + 1));
			schema->features[j].category_counts = counts[k++];
		}
	return counts;
}

int
gbml_column_plan_n_features(const gbml_column_plan *p)
{
	return p->n_features;
}

int
gbml_column_plan_n_columns(const gbml_column_plan *p)
{
	return p->n_columns;
}

/* ---- the row aggregates: categories learned as rows arrive ---- */

typedef struct category_key
{
	const char *s;
	uint32		len;
} category_key;

typedef struct category_entry
{
	category_key key;
	int32		id;				/* first-seen id until gbml_column_plan_sort_categories */
} category_entry;

static uint32
category_hash(const void *key, Size keysize)
{
	const category_key *k = key;

	(void) keysize;
	return hash_bytes((const unsigned char *) k->s, (int) k->len);
}

static int
category_match(const void *a, const void *b, Size keysize)
{
	const category_key *x = a,
			   *y = b;

	(void) keysize;
	return x->len == y->len && memcmp(x->s, y->s, x->len) == 0 ? 0 : 1;
}

/*
 * A plan for rows of type td that arrive one by one (the aggregates' whole
 * row argument): no scan ahead, so an array column's length comes from the
 * first row and each categorical column collects its values as they come,
 * first-seen ids that gbml_column_plan_sort_categories turns into the
 * sorted ids before training.
 */
gbml_column_plan *
gbml_column_plan_for_rows(const gbml_common_params *cp, TupleDesc td, const Datum *values, const bool *nulls,
						  const char *what)
{
	gbml_column_plan *p = plan_columns(cp, td, false, what);

	p->dicts = palloc0(sizeof(HTAB *) * p->n_columns);
	for (int i = 0; i < p->n_columns; i++)
	{
		gbml_column *c = &p->cols[i];
		int			a = c->attno - 1;

		if (c->kind == COL_ARRAY)
		{
			Datum		d = values[a];

			if (nulls[a])
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s: array column \"%s\" is NULL in the first row, which sets its length", what, c->name),
								errhint("Filter out rows without it, or train with gbml.train, which reads the length ahead.")));
			if (OidIsValid(c->castfunc))
				d = FunctionCall1(&c->cast, d);
			c->width = ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(d)), ARR_DIMS(DatumGetArrayTypeP(d)));
			if (c->width < 1)
				ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
								errmsg("%s: array column \"%s\" is empty in the first row", what, c->name)));
		}
		if (c->kind == COL_CATEGORICAL)
		{
			HASHCTL		ctl;

			memset(&ctl, 0, sizeof(ctl));
			ctl.keysize = sizeof(category_key);
			ctl.entrysize = sizeof(category_entry);
			ctl.hash = category_hash;
			ctl.match = category_match;
			ctl.hcxt = CurrentMemoryContext;
			p->dicts[i] = hash_create("gbml categories", 64, &ctl, HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
		}
	}
	finish_schema(p);
	return p;
}

/* A categorical value's first-seen id in column i's dictionary (added when new). */
static float
collected_category(gbml_column_plan *p, int i, Datum d, const char *what)
{
	const gbml_column *c = &p->cols[i];
	gbml_feature_def *f = &p->schema->features[c->first];
	size_t		len;
	const char *s = category_text(c, d, &len);
	category_key key = {s, (uint32) len};
	bool		found;
	category_entry *e = hash_search(p->dicts[i], &key, HASH_ENTER, &found);

	if (!found)
	{
		if (f->n_categories >= GBML_SCHEMA_MAX_CATEGORIES)
			ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
							errmsg("%s: column \"%s\" has more than %d distinct values", what, c->name,
								   GBML_SCHEMA_MAX_CATEGORIES)));
		/* the key must outlive the row: in the state's context, not the per-row one */
		char	   *copy;

		copy = MemoryContextAlloc(p->mcxt, len + 1);
		memcpy(copy, s, len);
		copy[len] = '\0';
		e->key.s = copy;
		e->id = f->n_categories++;
	}
	return (float) e->id;
}

void
gbml_column_plan_collect(gbml_column_plan *p, const Datum *values, const bool *nulls, float *x, bool allow_missing,
						 const char *what, int64 rowno)
{
	convert_training_row(p, values, nulls, x, allow_missing, false, what, rowno);
}

static int
cmp_entry_text(const void *a, const void *b)
{
	return strcmp((*(category_entry *const *) a)->key.s, (*(category_entry *const *) b)->key.s);
}

/*
 * Gives every categorical column its values sorted bytewise (the ids
 * gbml.train would give) and has the engine renumber the collected
 * first-seen ids of ds's rows into them (rewritten in memory, renumbered as
 * read back from temporary files), before the rows' canonical order is
 * computed.
 */
void
gbml_column_plan_sort_categories(gbml_column_plan *p, gbml_dataset *ds, gbml_env *env, const char *what)
{
	int32	  **ids;
	int32	   *n_ids;

	if (p->sorted)
		return;
	p->sorted = true;
	ids = palloc0(sizeof(int32 *) * Max(ds->n_features, 1));
	n_ids = palloc0(sizeof(int32) * Max(ds->n_features, 1));
	for (int i = 0; i < p->n_columns; i++)
	{
		const gbml_column *c = &p->cols[i];
		gbml_feature_def *f = &p->schema->features[c->first];
		int32		n = f->n_categories;
		category_entry **sorted;
		HASH_SEQ_STATUS seq;
		category_entry *e;

		if (c->kind != COL_CATEGORICAL)
			continue;
		sorted = palloc(sizeof(category_entry *) * (n > 0 ? n : 1));
		ids[c->first] = palloc(sizeof(int32) * (n > 0 ? n : 1));
		n_ids[c->first] = n;
		hash_seq_init(&seq, p->dicts[i]);
		while ((e = hash_seq_search(&seq)) != NULL)
			sorted[e->id] = e;
		qsort(sorted, n, sizeof(category_entry *), cmp_entry_text);
		f->categories = palloc(sizeof(char *) * (n > 0 ? n : 1));
		for (int32 k = 0; k < n; k++)
		{
			f->categories[k] = (char *) sorted[k]->key.s;
			ids[c->first][sorted[k]->id] = k;
		}
	}
	GBML_CHECK(env, gbml_dataset_renumber_categories(ds, env, (const int32 *const *) ids, n_ids), what);
}
