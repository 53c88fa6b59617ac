/*
 * row_scoring.c — gbml.predict, predict_proba, kmeans_assign and
 * kmeans_distance on a whole row (`ORDER BY gbml.predict('churn', c)` with
 * c a table's alias), for models trained from columns.  The model's
 * features are matched to the row's columns by name once per query and row
 * type (columns.c), then every row is deformed once and converted with the
 * functions training used.
 *
 * A whole-row argument costs PostgreSQL a new tuple per row (it deforms the
 * scanned row and forms a composite datum of every column, 2-3 us for 100
 * columns, more than scoring 100 trees).  So the record forms have a planner
 * support function that rewrites gbml.predict(m, t), t a table's whole row,
 * into gbml._predict_columns(m, 't'::regtype, t.c1, t.c2, ...): the columns
 * go as separate arguments straight from the scan slot.  A function takes at
 * most FUNC_MAX_ARGS (100) arguments, so a row of more than 98 columns goes
 * in packs of up to 100: gbml._predict_columns(m, 't'::regtype,
 * gbml._column_pack(t.c1, ..., t.c100), gbml._column_pack(t.c101, ...)),
 * each pack a bytea of the columns' values (by-reference ones copied, never
 * a pointer), unpacked per row into the record path's conversion.  Records
 * that are not a table's rows keep the record path.
 */
#include "glue.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "parser/parse_func.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "schema.h"

PG_FUNCTION_INFO_V1(gbml_predict_row_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_proba_row_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_row_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_row_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_row_name);
PG_FUNCTION_INFO_V1(gbml_predict_proba_row_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_row_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_row_name);
PG_FUNCTION_INFO_V1(gbml_row_support);
PG_FUNCTION_INFO_V1(gbml_predict_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_proba_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_columns_name);
PG_FUNCTION_INFO_V1(gbml_predict_proba_columns_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_assign_columns_name);
PG_FUNCTION_INFO_V1(gbml_kmeans_distance_columns_name);
PG_FUNCTION_INFO_V1(gbml_column_pack);
PG_FUNCTION_INFO_V1(gbml_predict_classes_row_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_classes_row_name);
PG_FUNCTION_INFO_V1(gbml_predict_classes_columns_bytea);
PG_FUNCTION_INFO_V1(gbml_predict_classes_columns_name);

/* What one call site keeps across rows: the model's cache, and the binding to the row type. */
typedef struct row_cache
{
	void	   *model_slot;		/* convert.c's or scoring.c's model cache */
	MemoryContext bind_mcxt;
	Oid			row_type;		/* the bound row type and typmod (InvalidOid: none) */
	int32		row_typmod;
	gbml_column_plan *plan;
	TupleDesc	td;				/* a copy of the row type's descriptor, to deform rows with */
	int			natts;
	int		   *src;			/* the columns forms: plan column i's argument */
	int			n_args;			/* the columns forms: 2 + the row type's live attributes */
	bool		args_checked;	/* the columns forms: the call's argument types match the row type */
	bool		packed;			/* the columns forms: the columns come in gbml._column_pack arguments */
	int		   *pack_first;		/* packed: argument i's first live column (0-based) */
	int		   *pack_n;			/* packed: argument i's number of columns */
	const char **flags;			/* packed: this row's packs' NULL flags, by argument */
	const Datum **slots;		/* packed: and their slots */
	Size	   *pack_size;		/* packed: and their sizes */
	int		   *col_pack;		/* packed: plan column c's pack (its argument position) */
	int		   *col_k;			/* packed: and its index in that pack */
	bool	   *col_byval;		/* packed: plan column c is by value */
	NullableDatum *vargs;		/* packed: the plan's columns at the columns form's argument positions */
	Datum	   *values;
	bool	   *nulls;
	float	   *x;
	Datum		classes;		/* GBML_OUT_CLASSES: this row's probabilities (a float8[] of the row's context) */
} row_cache;

static row_cache *
cache_of(FunctionCallInfo fcinfo)
{
	row_cache  *rc = fcinfo->flinfo->fn_extra;

	if (rc == NULL)
	{
		rc = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(row_cache));
		rc->bind_mcxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "gbml row binding", ALLOCSET_SMALL_SIZES);
		fcinfo->flinfo->fn_extra = rc;
	}
	return rc;
}

/* (Re)binds the model's features to a row type when the model or the row type changed. */
static void
bind_row(row_cache *rc, const gbml_scorer *sc, bool reloaded, Oid type, int32 typmod, const char *fname)
{
	TupleDesc	td;
	MemoryContext old;

	if (!reloaded && rc->plan != NULL && rc->row_type == type && rc->row_typmod == typmod)
		return;
	if (sc->schema == NULL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: the model was trained on a features array, not on named columns", fname),
						errhint("Score it with the array form: %s(model, features real[]).", fname)));
	MemoryContextReset(rc->bind_mcxt);
	rc->plan = NULL;
	td = lookup_rowtype_tupdesc(type, typmod);
	old = MemoryContextSwitchTo(rc->bind_mcxt);
	rc->td = CreateTupleDescCopy(td);
	MemoryContextSwitchTo(old);
	ReleaseTupleDesc(td);
	old = MemoryContextSwitchTo(rc->bind_mcxt);
	rc->plan = gbml_column_plan_for_row(sc->schema, rc->td, fname);
	rc->natts = rc->td->natts;
	rc->values = palloc(sizeof(Datum) * (rc->natts > 0 ? rc->natts : 1));
	rc->nulls = palloc(sizeof(bool) * (rc->natts > 0 ? rc->natts : 1));
	rc->x = palloc(sizeof(float) * (sc->n_features > 0 ? sc->n_features : 1));
	{
		/* the columns forms pass every live attribute in order after the model and the row type */
		int		   *arg_of_att = palloc(sizeof(int) * (rc->natts > 0 ? rc->natts : 1));
		int			n = gbml_column_plan_n_columns(rc->plan);

		rc->n_args = 2;
		for (int a = 0; a < rc->natts; a++)
			arg_of_att[a] = TupleDescAttr(rc->td, a)->attisdropped ? -1 : rc->n_args++;
		rc->src = palloc(sizeof(int) * (n > 0 ? n : 1));
		for (int i = 0; i < n; i++)
			rc->src[i] = arg_of_att[gbml_column_plan_attno(rc->plan, i) - 1];
	}
	MemoryContextSwitchTo(old);
	rc->row_type = type;
	rc->row_typmod = typmod;
	rc->args_checked = false;
	rc->packed = false;
}

/* The model of this call site, with an ERROR when it does not give `what`. */
static const gbml_scorer *
model_of(FunctionCallInfo fcinfo, row_cache *rc, bool by_name, gbml_output what, const char *fname, bool *reloaded)
{
	const gbml_scorer *sc = by_name ? gbml_named_scorer_in(fcinfo, fname, &rc->model_slot, reloaded)
		: gbml_cached_scorer_in(fcinfo, 0, &rc->model_slot, reloaded);
	gbml_env	env;

	if (!gbml_scorer_gives(sc, what))
	{
		/* (the check's message) */
		gbml_env_init_malloc(&env, 1);
		(void) gbml_scorer_check_output(sc, &env, what);
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("%s: %s", fname, env.error)));
	}
	return sc;
}

/* rc->x (converted by the caller) scored. */
static double
score_bound(const gbml_scorer *sc, row_cache *rc, gbml_output what, const char *fname)
{
	if (!(sc->algo->input_flags & GBML_INPUT_MISSING))
		for (int j = 0; j < sc->n_features; j++)
			if (isnan(rc->x[j]) && !gbml_feature_is_categorical(sc->schema, j))
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s: feature \"%s\" is NULL; a %s model needs every numeric feature", fname,
									   sc->schema->features[j].name, sc->algo->name)));
	if (what == GBML_OUT_CLASSES)
	{
		rc->classes = gbml_class_probabilities(sc, rc->x);
		return 0;
	}
	return sc->algo->predict(sc->handle, rc->x, what);
}

static double
score_record(FunctionCallInfo fcinfo, bool by_name, gbml_output what, const char *fname)
{
	row_cache  *rc = cache_of(fcinfo);
	bool		reloaded;
	const gbml_scorer *sc = model_of(fcinfo, rc, by_name, what, fname, &reloaded);
	HeapTupleHeader th = PG_GETARG_HEAPTUPLEHEADER(1);
	HeapTupleData tup;

	bind_row(rc, sc, reloaded, HeapTupleHeaderGetTypeId(th), HeapTupleHeaderGetTypMod(th), fname);
	tup.t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&tup.t_self);
	tup.t_tableOid = InvalidOid;
	tup.t_data = th;
	heap_deform_tuple(&tup, rc->td, rc->values, rc->nulls);
	gbml_column_plan_values(rc->plan, rc->values, rc->nulls, rc->x, fname);
	return score_bound(sc, rc, what, fname);
}

/*
 * A pack (gbml._column_pack): a bytea of n columns' values, each readable
 * on its own.  After the varlena header, n flag bytes (1: NULL), then from
 * the next multiple of 8 (counted from the header's start) n slots of 8
 * bytes: a by-value column's Datum, or a by-reference one's offset in the
 * pack of its length (8 bytes) and bytes (packed_size), each such copy at a
 * multiple of 8.  No memory address is ever packed.
 */
#define PACK_NULL 1

static inline Size
pack_slots(int n)
{
	return MAXALIGN(VARHDRSZ + n);
}

/* Per call site of gbml._column_pack: its arguments' storage. */
typedef struct pack_types
{
	int			n;
	bool		all_byval;
	int16	   *typlen;
	bool	   *byval;
	/* per row, for the by-reference values: where their bytes are and how many (no palloc a row) */
	Pointer    *ref;
	Size	   *len;
} pack_types;

static const pack_types *
pack_types_of(FunctionCallInfo fcinfo)
{
	pack_types *t = fcinfo->flinfo->fn_extra;

	if (t != NULL)
		return t;
	t = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(pack_types));
	t->n = PG_NARGS();
	t->all_byval = true;
	t->typlen = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(int16) * (t->n > 0 ? t->n : 1));
	t->byval = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(bool) * (t->n > 0 ? t->n : 1));
	t->ref = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(Pointer) * (t->n > 0 ? t->n : 1));
	t->len = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(Size) * (t->n > 0 ? t->n : 1));
	for (int i = 0; i < t->n; i++)
	{
		Oid			type = get_fn_expr_argtype(fcinfo->flinfo, i);

		if (!OidIsValid(type))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("gbml._column_pack: cannot tell argument %d's type", i + 1)));
		get_typlenbyval(type, &t->typlen[i], &t->byval[i]);
		t->all_byval = t->all_byval && t->byval[i];
	}
	fcinfo->flinfo->fn_extra = t;
	return t;
}

/*
 * The bytes a by-reference value takes in a pack, at *v.  A varlena stored
 * out of line or compressed is packed as it is (its TOAST pointer or its
 * compressed bytes hold no memory address): the model's converters detoast
 * what they read, so a wide value in a column the model does not use costs
 * a copy of a few bytes, not a fetch.  Any other varlena is detoasted.
 */
static Size
packed_size(int16 typlen, Datum d, Pointer *v)
{
	if (typlen == -1)
	{
		struct varlena *stored = (struct varlena *) DatumGetPointer(d);

		*v = VARATT_IS_EXTERNAL_ONDISK(stored) || VARATT_IS_COMPRESSED(stored) ? (Pointer) stored
			: (Pointer) PG_DETOAST_DATUM_PACKED(d);
		return VARSIZE_ANY(*v);
	}
	*v = DatumGetPointer(d);
	return typlen == -2 ? strlen(*v) + 1 : (Size) typlen;
}

Datum
gbml_column_pack(PG_FUNCTION_ARGS)
{
	const pack_types *t = pack_types_of(fcinfo);
	Size		slots = pack_slots(t->n),
				size = slots + sizeof(Datum) * (Size) t->n;
	Pointer    *ref = t->ref;
	Size	   *len = t->len;
	char	   *p;
	Datum	   *slot;

	if (!t->all_byval)
	{
		for (int i = 0; i < t->n; i++)
			if (!t->byval[i] && !PG_ARGISNULL(i))
				size += sizeof(uint64) + MAXALIGN(len[i] = packed_size(t->typlen[i], PG_GETARG_DATUM(i), &ref[i]));
	}
	p = palloc(size);
	SET_VARSIZE(p, size);
	slot = (Datum *) (p + slots);
	for (int i = 0; i < t->n; i++)
	{
		p[VARHDRSZ + i] = PG_ARGISNULL(i) ? PACK_NULL : 0;
		slot[i] = PG_ARGISNULL(i) || !t->byval[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
	if (!t->all_byval)
	{
		Size		at = slots + sizeof(Datum) * (Size) t->n;

		for (int i = 0; i < t->n; i++)
			if (!t->byval[i] && !PG_ARGISNULL(i))
			{
				uint64		l = len[i];

				slot[i] = (Datum) at;
				memcpy(p + at, &l, sizeof(uint64));
				memcpy(p + at + sizeof(uint64), ref[i], len[i]);
				at += sizeof(uint64) + MAXALIGN(len[i]);
			}
	}
	PG_RETURN_BYTEA_P((bytea *) p);
}

/*
 * Where the plan's columns are in the packs (bind time, from the call's
 * expression): each pack argument's first live column and count, then per
 * plan column its pack, its index there and whether it is by value.
 */
static void
bind_packs(FunctionCallInfo fcinfo, row_cache *rc)
{
	List	   *args = ((FuncExpr *) fcinfo->flinfo->fn_expr)->args;
	MemoryContext old = MemoryContextSwitchTo(rc->bind_mcxt);
	int			n = gbml_column_plan_n_columns(rc->plan);
	int			first = 0;
	bool	   *byval = palloc(sizeof(bool) * rc->n_args);	/* by columns form argument position */

	rc->pack_first = palloc(sizeof(int) * PG_NARGS());
	rc->pack_n = palloc(sizeof(int) * PG_NARGS());
	rc->flags = palloc(sizeof(char *) * PG_NARGS());
	rc->slots = palloc(sizeof(Datum *) * PG_NARGS());
	rc->pack_size = palloc(sizeof(Size) * PG_NARGS());
	rc->vargs = palloc0(sizeof(NullableDatum) * rc->n_args);
	rc->col_pack = palloc(sizeof(int) * (n > 0 ? n : 1));
	rc->col_k = palloc(sizeof(int) * (n > 0 ? n : 1));
	rc->col_byval = palloc(sizeof(bool) * (n > 0 ? n : 1));
	MemoryContextSwitchTo(old);

	for (int i = 2; i < PG_NARGS(); i++)
	{
		rc->pack_first[i] = first;
		rc->pack_n[i] = list_length(((FuncExpr *) list_nth(args, i))->args);
		first += rc->pack_n[i];
	}
	for (int a = 0, arg = 2; a < rc->natts; a++)
		if (!TupleDescAttr(rc->td, a)->attisdropped)
			byval[arg++] = TupleDescAttr(rc->td, a)->attbyval;
	for (int c = 0; c < n; c++)
	{
		int			i = 2,
					live = rc->src[c] - 2;

		while (i < PG_NARGS() - 1 && live >= rc->pack_first[i] + rc->pack_n[i])
			i++;
		rc->col_pack[c] = i;
		rc->col_k[c] = live - rc->pack_first[i];
		rc->col_byval[c] = byval[rc->src[c]];
	}
}

static void
damaged_pack(const char *fname)
{
	ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("%s: a column pack is damaged", fname)));
}

/* A by-reference value of pack p (size bytes) from its slot, checked to lie inside the pack. */
static Datum
packed_reference(const char *p, Size size, Datum slot, const char *fname)
{
	uint64		l;

	if (slot % MAXIMUM_ALIGNOF != 0 || slot > size - sizeof(uint64))
		damaged_pack(fname);
	memcpy(&l, p + slot, sizeof(uint64));
	if (l > size - slot - sizeof(uint64))
		damaged_pack(fname);
	return PointerGetDatum(p + slot + sizeof(uint64));
}

/*
 * The plan's columns from the packs into rc->vargs (at the columns form's
 * argument positions, so gbml_column_plan_args converts them).  Only the
 * plan's columns are read; a pack that does not hold what it should is an
 * ERROR, never a misread.
 */
static void
unpack_columns(FunctionCallInfo fcinfo, row_cache *rc, const char *fname)
{
	int			n = gbml_column_plan_n_columns(rc->plan);

	for (int i = 2; i < PG_NARGS(); i++)
	{
		const char *p;

		if (PG_ARGISNULL(i))
			damaged_pack(fname);
		p = (const char *) PG_GETARG_BYTEA_P(i);
		if (pack_slots(rc->pack_n[i]) + sizeof(Datum) * (Size) rc->pack_n[i] > VARSIZE(p) ||
			(uintptr_t) p % MAXIMUM_ALIGNOF != 0)
			damaged_pack(fname);
		rc->flags[i] = p + VARHDRSZ;
		rc->slots[i] = (const Datum *) (p + pack_slots(rc->pack_n[i]));
		rc->pack_size[i] = VARSIZE(p);
	}
	for (int c = 0; c < n; c++)
	{
		int			i = rc->col_pack[c],
					k = rc->col_k[c];
		NullableDatum *out = &rc->vargs[rc->src[c]];
		Datum		d = rc->slots[i][k];

		out->isnull = rc->flags[i][k] == PACK_NULL;
		if (!out->isnull && !rc->col_byval[c])
			d = packed_reference(rc->flags[i] - VARHDRSZ, rc->pack_size[i], d, fname);
		out->value = d;
	}
}

/* gbml._column_pack(VARIADIC "any"), InvalidOid before the extension has it (0.5.0). */
static Oid
column_pack_function(void)
{
	Oid			argtypes[1] = {ANYOID};

	return LookupFuncName(list_make2(makeString("gbml"), makeString("_column_pack")), 1, argtypes, true);
}

/*
 * The packed columns form: true when every argument after the row type is
 * a gbml._column_pack call and, together, their arguments are the row
 * type's live columns with its types (then the packs hold those values, in
 * that order); false when no argument is a pack.  A mix is an ERROR.
 */
static bool
check_packed_args(FunctionCallInfo fcinfo, row_cache *rc, const char *fname)
{
	Node	   *call = fcinfo->flinfo->fn_expr;
	Oid			pack = column_pack_function();
	List	   *columns = NIL;
	int			a = 0;
	ListCell   *lc;

	if (call == NULL || !IsA(call, FuncExpr) || !OidIsValid(pack))
		return false;
	for (int i = 2; i < list_length(((FuncExpr *) call)->args); i++)
	{
		Node	   *arg = list_nth(((FuncExpr *) call)->args, i);

		if (!IsA(arg, FuncExpr) || ((FuncExpr *) arg)->funcid != pack)
		{
			if (i == 2)
				return false;
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: argument %d is not a gbml._column_pack call like the ones before it", fname,
								   i + 1)));
		}
		columns = list_concat(columns, ((FuncExpr *) arg)->args);
	}
	foreach(lc, columns)
	{
		while (a < rc->natts && TupleDescAttr(rc->td, a)->attisdropped)
			a++;
		if (a == rc->natts || exprType(lfirst(lc)) != TupleDescAttr(rc->td, a)->atttypid)
			break;
		a++;
	}
	while (a < rc->natts && TupleDescAttr(rc->td, a)->attisdropped)
		a++;
	if (lc != NULL || a != rc->natts || list_length(columns) != rc->n_args - 2)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("%s: the packed columns are not row type %s's %d columns with their types", fname,
							   format_type_be(rc->row_type), rc->n_args - 2)));
	rc->packed = true;
	rc->args_checked = true;
	bind_packs(fcinfo, rc);
	return true;
}

/*
 * The columns forms are callable by hand too: their arguments must be the
 * row type's live columns with its types, or a value would be read as
 * another type's datum.  Checked once per binding, from the call's
 * expression.
 */
static void
check_column_args(FunctionCallInfo fcinfo, row_cache *rc, const char *fname)
{
	if (PG_NARGS() != rc->n_args && check_packed_args(fcinfo, rc, fname))
		return;
	if (PG_NARGS() != rc->n_args)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: %d columns passed for row type %s of %d columns", fname, PG_NARGS() - 2,
							   format_type_be(rc->row_type), rc->n_args - 2)));
	for (int a = 0, arg = 2; a < rc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(rc->td, a);

		if (att->attisdropped)
			continue;
		if (get_fn_expr_argtype(fcinfo->flinfo, arg) != att->atttypid)
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
							errmsg("%s: argument %d is not of column \"%s\"'s type %s", fname, arg + 1,
								   NameStr(att->attname), format_type_be(att->atttypid))));
		arg++;
	}
	rc->args_checked = true;
}

/*
 * The columns forms (the support function's rewrite): argument 1 is the row
 * type, then one argument per column of it that is not dropped.
 */
static double
score_columns(FunctionCallInfo fcinfo, bool by_name, gbml_output what, const char *fname)
{
	row_cache  *rc = cache_of(fcinfo);
	bool		reloaded;
	const gbml_scorer *sc = model_of(fcinfo, rc, by_name, what, fname, &reloaded);

	bind_row(rc, sc, reloaded, PG_GETARG_OID(1), -1, fname);
	if (!rc->args_checked)
		check_column_args(fcinfo, rc, fname);
	if (rc->packed)
		unpack_columns(fcinfo, rc, fname);
	gbml_column_plan_args(rc->plan, rc->packed ? rc->vargs : fcinfo->args, rc->src, rc->x, fname);
	return score_bound(sc, rc, what, fname);
}

Datum
gbml_predict_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, false, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, false, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32((int32) score_record(fcinfo, false, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_row_bytea(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, false, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

Datum
gbml_predict_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, true, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, true, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32((int32) score_record(fcinfo, true, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_row_name(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(score_record(fcinfo, true, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

Datum
gbml_predict_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, false, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, false, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) score_columns(fcinfo, false, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, false, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

Datum
gbml_predict_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, true, GBML_OUT_SCORE, "gbml.predict"));
}

Datum
gbml_predict_proba_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, true, GBML_OUT_PROBA, "gbml.predict_proba"));
}

Datum
gbml_kmeans_assign_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) score_columns(fcinfo, true, GBML_OUT_CLUSTER, "gbml.kmeans_assign"));
}

Datum
gbml_kmeans_distance_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(score_columns(fcinfo, true, GBML_OUT_DISTANCE, "gbml.kmeans_distance"));
}

/* gbml.predict_classes on a whole row: the record and columns forms (element c + 1: class c's probability). */
Datum
gbml_predict_classes_row_bytea(PG_FUNCTION_ARGS)
{
	(void) score_record(fcinfo, false, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
}

Datum
gbml_predict_classes_row_name(PG_FUNCTION_ARGS)
{
	(void) score_record(fcinfo, true, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
}

Datum
gbml_predict_classes_columns_bytea(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	(void) score_columns(fcinfo, false, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
}

Datum
gbml_predict_classes_columns_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	(void) score_columns(fcinfo, true, GBML_OUT_CLASSES, "gbml.predict_classes");
	PG_RETURN_DATUM(cache_of(fcinfo)->classes);
}

/*
 * gbml._<function>_columns(model, row type, VARIADIC "any") for a record
 * form called on a table's whole row; InvalidOid when there is none.
 */
static Oid
columns_function(Oid funcid, Oid model_type)
{
	char	   *proname = get_func_name(funcid);
	Oid			argtypes[3] = {model_type, REGTYPEOID, ANYOID};

	if (proname == NULL)
		return InvalidOid;
	return LookupFuncName(list_make2(makeString("gbml"), makeString(psprintf("_%s_columns", proname))), 3, argtypes,
						  true);
}

/* Vars of td's live columns, in order, for the whole-row Var row. */
static List *
column_vars(TupleDesc td, const Var *row)
{
	List	   *vars = NIL;

	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (!att->attisdropped)
			vars = lappend(vars, makeVar(row->varno, att->attnum, att->atttypid, att->atttypmod, att->attcollation,
										 row->varlevelsup));
	}
	return vars;
}

/* columns in gbml._column_pack calls of FUNC_MAX_ARGS each at most (NIL: the extension has no such function). */
static List *
pack_columns(List *columns)
{
	Oid			pack = column_pack_function();
	List	   *packs = NIL;

	if (!OidIsValid(pack))
		return NIL;
	for (int from = 0; from < list_length(columns); from += FUNC_MAX_ARGS)
	{
		int			to = Min(from + FUNC_MAX_ARGS, list_length(columns));
		List	   *part = list_copy_tail(list_truncate(list_copy(columns), to), from);

		packs = lappend(packs, makeFuncExpr(pack, BYTEAOID, part, InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL));
	}
	return packs;
}

/*
 * Planner support for the record forms: a whole-row Var of a table's row
 * type becomes that table's columns, one argument each (see the top).
 */
Datum
gbml_row_support(PG_FUNCTION_ARGS)
{
	Node	   *req = (Node *) PG_GETARG_POINTER(0);
	FuncExpr   *f;
	Var		   *row;
	TupleDesc	td;
	List	   *args;
	Oid			target;
	int			live = 0;

	if (!IsA(req, SupportRequestSimplify))
		PG_RETURN_POINTER(NULL);
	f = ((SupportRequestSimplify *) req)->fcall;
	if (list_length(f->args) != 2 || !IsA(lsecond(f->args), Var))
		PG_RETURN_POINTER(NULL);
	row = lsecond(f->args);
	if (row->varattno != 0 || !OidIsValid(get_typ_typrelid(row->vartype)))
		PG_RETURN_POINTER(NULL);
	target = columns_function(f->funcid, exprType(linitial(f->args)));
	if (!OidIsValid(target))
		PG_RETURN_POINTER(NULL);
	td = lookup_rowtype_tupdesc(row->vartype, -1);
	for (int a = 0; a < td->natts; a++)
		live += !TupleDescAttr(td, a)->attisdropped;
	args = list_make2(linitial(f->args),
					  makeConst(REGTYPEOID, -1, InvalidOid, sizeof(Oid), ObjectIdGetDatum(row->vartype), false, true));
	if (live + 2 <= FUNC_MAX_ARGS)
		args = list_concat(args, column_vars(td, row));
	else
	{
		List	   *packs = pack_columns(column_vars(td, row));

		if (packs == NIL)
		{
			ReleaseTupleDesc(td);
			PG_RETURN_POINTER(NULL);	/* an extension before 0.5.0: the record path */
		}
		args = list_concat(args, packs);
	}
	ReleaseTupleDesc(td);
	{
		FuncExpr   *n = makeFuncExpr(target, f->funcresulttype, args, InvalidOid, f->inputcollid, COERCE_EXPLICIT_CALL);

		n->location = f->location;
		PG_RETURN_POINTER(n);
	}
}
