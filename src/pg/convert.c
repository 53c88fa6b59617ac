/*
 * convert.c — jsonb params to engine values, real[] validation, the shared
 * parse-and-train steps used by the aggregates and by gbml.train, and the
 * per-query scorer cache of the scoring functions.
 */
#include "glue.h"

#include <math.h>

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

static double
jbv_number(JsonbValue *v)
{
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, NumericGetDatum(v->val.numeric)));
}

/* Converts a jsonb array into a matrix, or returns false if it is not numeric/rectangular. */
static bool
jsonb_array_to_matrix(JsonbContainer *arr, gbml_matrix *m)
{
	JsonbIterator *it = JsonbIteratorInit(arr);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;
	int64		rows = 0,
				cols = -1,
				cur_cols = 0,
				n = 0,
				cap = 64;
	bool		nested = false,
				flat = false;
	double	   *vals = palloc(sizeof(double) * cap);

	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
				depth++;
				if (depth == 2)
				{
					nested = true;
					cur_cols = 0;
				}
				if (depth > 2)
					return false;
				break;
			case WJB_END_ARRAY:
				if (depth == 2)
				{
					if (cols >= 0 && cur_cols != cols)
						return false;
					cols = cur_cols;
					rows++;
				}
				depth--;
				break;
			case WJB_ELEM:
				if (v.type != jbvNumeric)
					return false;
				if (depth == 1)
					flat = true;
				else
					cur_cols++;
				if (n == cap)
				{
					cap *= 2;
					vals = repalloc_huge(vals, sizeof(double) * cap);
				}
				vals[n++] = jbv_number(&v);
				break;
			default:
				return false;
		}
	}
	if (nested && flat)
		return false;
	m->values = vals;
	if (nested)
	{
		m->rows = rows;
		m->cols = cols < 0 ? 0 : cols;
	}
	else
	{
		m->rows = 1;
		m->cols = n;
	}
	return true;
}

/* An array of strings (column names) into pv's names; false for any other array. */
static bool
jsonb_array_to_names(JsonbContainer *arr, gbml_param_value *pv)
{
	int			n = JsonContainerSize(arr);
	const char **names = palloc0(sizeof(char *) * (n > 0 ? n : 1));

	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

		if (e == NULL || e->type != jbvString)
			return false;
		names[i] = pnstrdup(e->val.string.val, e->val.string.len);
	}
	pv->names = names;
	pv->n_names = n;
	return true;
}

int
gbml_jsonb_to_params(Jsonb *params, const char *what, gbml_param_value **values)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0,
				cap;
	gbml_param_value *out;

	*values = NULL;
	if (params == NULL)
		return 0;
	if (!JB_ROOT_IS_OBJECT(params))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: params must be a JSON object like '{\"iterations\": 100}'", what)));
	cap = JB_ROOT_COUNT(params) + 1;
	out = palloc0(sizeof(gbml_param_value) * cap);
	it = JsonbIteratorInit(&params->root);
	tok = JsonbIteratorNext(&it, &v, false);	/* WJB_BEGIN_OBJECT */
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		gbml_param_value *pv;

		if (tok != WJB_KEY)
			continue;
		pv = &out[n++];
		pv->key = pnstrdup(v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		switch (v.type)
		{
			case jbvNull:
				pv->kind = GBML_VALUE_NULL;
				break;
			case jbvNumeric:
				pv->kind = GBML_VALUE_NUMBER;
				pv->number = jbv_number(&v);
				break;
			case jbvString:
				pv->kind = GBML_VALUE_STRING;
				pv->string = pnstrdup(v.val.string.val, v.val.string.len);
				break;
			case jbvBool:
				pv->kind = GBML_VALUE_BOOL;
				pv->boolean = v.val.boolean;
				break;
			case jbvBinary:
				pv->kind = GBML_VALUE_OTHER;
				if (JsonContainerIsArray(v.val.binary.data) &&
					jsonb_array_to_matrix(v.val.binary.data, &pv->matrix))
					pv->kind = GBML_VALUE_MATRIX;
				else if (JsonContainerIsArray(v.val.binary.data) &&
						 jsonb_array_to_names(v.val.binary.data, pv))
					pv->kind = GBML_VALUE_NAMES;
				break;
			default:
				pv->kind = GBML_VALUE_OTHER;
		}
	}
	*values = out;
	return n;
}

/*
 * Rows arrive one call at a time, each usually straight from a heap page in
 * shared buffers and not yet in cache, and gbml reads every byte of the
 * array (a scan that only counts elements touches one cache line of it).
 * Consecutive rows of a scan sit at a nearly constant stride (tuples back to
 * back in a page), so the stride from the previous array predicts the next
 * two; prefetching them is only a hint (it never faults), and a wrong guess
 * at a page boundary wastes a few prefetches.  Measured: the scorer had
 * waited on the row's first loads for a third of its time.
 */
static void
prefetch_next_rows(const char *here, size_t bytes)
{
	static const char *previous;
	ptrdiff_t	stride = here - previous;

	previous = here;
	if (stride == 0 || stride > 65536 || stride < -65536)
		return;
	for (size_t off = 0; off < bytes; off += 64)
	{
		__builtin_prefetch(here + stride + off);
		__builtin_prefetch(here + 2 * stride + off);
	}
}

/* (built only on error) */
const char *
gbml_row_prefix(char *buf, size_t size, int64 rowno)
{
	buf[0] = '\0';
	if (rowno > 0)
		snprintf(buf, size, "row " INT64_FORMAT ": ", rowno);
	return buf;
}

const float *
gbml_float_array(ArrayType *arr, int *n, const char *what, int64 rowno)
{
	char		where[64];

	if (ARR_ELEMTYPE(arr) != FLOAT4OID)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("%s: %sfeatures must be real[]", what, gbml_row_prefix(where, sizeof(where), rowno))));
	if (ARR_NDIM(arr) == 0)
	{
		*n = 0;
		return NULL;
	}
	if (ARR_NDIM(arr) != 1)
		ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						errmsg("%s: %sfeatures must be a one-dimensional array, got %d dimensions",
							   what, gbml_row_prefix(where, sizeof(where), rowno), ARR_NDIM(arr))));
	if (ARR_HASNULL(arr))
	{
		int			len = ARR_DIMS(arr)[0];
		bits8	   *bitmap = ARR_NULLBITMAP(arr);

		for (int i = 0; i < len; i++)
			if (!(bitmap[i / 8] & (1 << (i % 8))))
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s: %sfeature %d is NULL", what, gbml_row_prefix(where, sizeof(where), rowno), i + 1),
								errhint("Use 'NaN' for a missing value (boosting treats it as missing) or filter the row out.")));
	}
	*n = ARR_DIMS(arr)[0];
	prefetch_next_rows(ARR_DATA_PTR(arr), (size_t) *n * sizeof(float));
	return (const float *) ARR_DATA_PTR(arr);
}

void
gbml_parse_params_or_error(gbml_env *env, const gbml_algorithm *algo, Jsonb *params,
						   const gbml_param_value *extra, int n_extra,
						   gbml_parsed_params *out, const char *what)
{
	gbml_param_value *values;
	int			n = gbml_jsonb_to_params(params, what, &values);
	gbml_param_value *all = palloc(sizeof(gbml_param_value) * (n + n_extra + 1));

	if (n)
		memcpy(all, values, sizeof(gbml_param_value) * n);
	if (n_extra)
		memcpy(all + n, extra, sizeof(gbml_param_value) * n_extra);
	for (int i = 0; i < n + n_extra; i++)
		if (all[i].kind == GBML_VALUE_OTHER)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: parameter \"%s\" must be a number, string, boolean or numeric array",
								   what, all[i].key)));
	GBML_CHECK(env, gbml_parse_training_params(env, algo, all, n + n_extra, out), what);
}

/* Raises a NOTICE when the model's metadata says training did not converge. */
static void
notice_from_meta(gbml_env *env, const uint8_t *model, size_t len, const char *what)
{
	gbml_model_reader r;
	const uint8_t *meta;
	size_t		mlen;

	if (gbml_model_open(&r, env, model, len) != GBML_OK ||
		!gbml_model_find(&r, GBML_SECTION_META, &meta, &mlen))
		return;
	if (memmem(meta, mlen, "\"converged\":false", 17) != NULL)
		ereport(NOTICE,
				(errmsg("%s: training stopped at max_iter without converging", what),
				 errhint("Raise \"max_iter\", loosen \"tol\" or standardize the features; gbml.model_info shows the final objective.")));
}

/* The last training's report in this backend (gbml.last_training_report()). */
static char *last_report;

const char *
gbml_last_report(void)
{
	return last_report;
}

void
gbml_forget_last_report(void)
{
	if (last_report)
		pfree(last_report);
	last_report = NULL;
}

bytea *
gbml_train_to_bytea(gbml_env *env, const gbml_parsed_params *params,
					gbml_dataset *ds, gbml_dataset *eval, const char *what)
{
	uint8_t    *model = NULL;
	size_t		len = 0;
	bytea	   *result;
	gbml_strbuf report;

	if (ds->n_rows == 0)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA), errmsg("%s: no input rows to train on", what)));
	gbml_sb_init(&report, env);
	GBML_CHECK(env, gbml_train_report(env, params, ds, eval, &model, &len, &report), what);
	if (report.data && !report.failed)
	{
		if (last_report)
			pfree(last_report);
		last_report = MemoryContextStrdup(TopMemoryContext, report.data);
	}
	gbml_sb_free(&report);
	if (len > MaxAllocSize - VARHDRSZ)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("%s: the model is %zu bytes, more than a bytea can hold", what, len)));
	notice_from_meta(env, model, len, what);
	result = palloc(VARHDRSZ + len);
	SET_VARSIZE(result, VARHDRSZ + len);
	memcpy(VARDATA(result), model, len);
	gbml_free(env, model);
	return result;
}

/* ---- scorer cache ---- */

typedef struct scorer_cache
{
	MemoryContext mcxt;
	gbml_env	env;
	gbml_scorer scorer;
	bool		loaded;
	uint32		len;
	uint8		header[GBML_MODEL_HEADER_SIZE];
	/* a model stored out of line is known by its TOAST pointer: no fetch per row */
	bool		ondisk;
	Oid			toastrelid;
	Oid			valueid;
	/* a model compressed in line is known by its packed bytes (a copy, < a page) */
	struct varlena *packed;
} scorer_cache;

static void
scorer_cache_reset(void *arg)
{
	scorer_cache *c = arg;

	c->loaded = false;
}

/*
 * Is the argument the model already loaded?  Called once per row, so it must
 * not fetch, decompress or allocate: a TOAST pointer is compared by its value
 * id, a model compressed in line by its packed bytes, a plain in-memory model
 * by its header (length, algorithm and CRC-32C of the whole payload).  Other
 * forms (expanded, indirect) simply reload.
 */
static bool
same_model(const scorer_cache *c, Datum d)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);

	if (!c->loaded)
		return false;
	if (VARATT_IS_EXTERNAL_ONDISK(v))
	{
		struct varatt_external ext;

		VARATT_EXTERNAL_GET_POINTER(ext, v);
		return c->ondisk && ext.va_toastrelid == c->toastrelid && ext.va_valueid == c->valueid;
	}
	if (VARATT_IS_COMPRESSED(v))
		return c->packed != NULL && VARSIZE(v) == VARSIZE(c->packed) &&
			memcmp(v, c->packed, VARSIZE(v)) == 0;
	if (!VARATT_IS_EXTERNAL(v))
		return VARSIZE_ANY_EXHDR(v) == c->len && c->len >= GBML_MODEL_HEADER_SIZE &&
			memcmp(VARDATA_ANY(v), c->header, GBML_MODEL_HEADER_SIZE) == 0;
	return false;
}

/*
 * A model that does not load.  When the bytes are too short to be a model
 * and read as text, the caller almost certainly meant a registered name
 * that PostgreSQL cast to bytea ('live' is a valid bytea literal): say so.
 */
static void
raise_load_error(gbml_env *env, int rc, const char *bytes, size_t len)
{
	if (rc == GBML_ECORRUPT && len < GBML_MODEL_HEADER_SIZE && len > 0 &&
		pg_verifymbstr(bytes, (int) len, true) && memchr(bytes, '\0', len) == NULL)
	{
		char	   *text = pnstrdup(bytes, len);

		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("gbml scoring: invalid model: %s", env->error),
				 errhint("To score with the deployed model named \"%s\", pass the name as text: '%s'::text.",
						 text, text)));
	}
	gbml_raise(env, rc, "gbml scoring");
}

const gbml_scorer *
gbml_cached_scorer(FunctionCallInfo fcinfo, int argno)
{
	return gbml_cached_scorer_in(fcinfo, argno, &fcinfo->flinfo->fn_extra, NULL);
}

const gbml_scorer *
gbml_cached_scorer_in(FunctionCallInfo fcinfo, int argno, void **slot, bool *reloaded)
{
	scorer_cache *c = *slot;
	Datum		d = PG_GETARG_DATUM(argno);

	if (reloaded)
		*reloaded = false;
	if (c == NULL)
	{
		c = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(scorer_cache));
		c->mcxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "gbml scorer", ALLOCSET_DEFAULT_SIZES);
		*slot = c;
	}
	if (same_model(c, d))
		return &c->scorer;
	if (reloaded)
		*reloaded = true;

	/* Load (or reload) in the cache's context. */
	{
		struct varlena *v = (struct varlena *) DatumGetPointer(d);
		bytea	   *model;
		size_t		mlen;
		MemoryContextCallback *cb;

		c->loaded = false;
		c->ondisk = VARATT_IS_EXTERNAL_ONDISK(v);
		if (c->ondisk)
		{
			struct varatt_external ext;

			VARATT_EXTERNAL_GET_POINTER(ext, v);
			c->toastrelid = ext.va_toastrelid;
			c->valueid = ext.va_valueid;
		}
		MemoryContextReset(c->mcxt);
		c->packed = NULL;
		if (VARATT_IS_COMPRESSED(v))
		{
			c->packed = MemoryContextAlloc(c->mcxt, VARSIZE(v));
			memcpy(c->packed, v, VARSIZE(v));
		}
		/* the reset dropped the callback: (re-)register it */
		cb = MemoryContextAllocZero(c->mcxt, sizeof(MemoryContextCallback));
		cb->func = scorer_cache_reset;
		cb->arg = c;
		MemoryContextRegisterResetCallback(c->mcxt, cb);
		model = PG_GETARG_BYTEA_PP(argno);
		mlen = VARSIZE_ANY_EXHDR(model);
		gbml_env_bind(&c->env, c->mcxt, "gbml scoring");
		c->env.memory_limit = 0;	/* a model that loaded once fits */
		{
			int			rc = gbml_scorer_load(&c->scorer, &c->env, VARDATA_ANY(model), mlen);

			if (rc != GBML_OK)
				raise_load_error(&c->env, rc, VARDATA_ANY(model), mlen);
		}
		c->len = (uint32) mlen;
		memcpy(c->header, VARDATA_ANY(model), Min(mlen, GBML_MODEL_HEADER_SIZE));
		c->loaded = true;
	}
	return &c->scorer;
}
