/*
 * shard_session.c — the shard's side of a training across servers
 * (issue 14): the functions a coordinator calls on its own connection.
 *
 *   gbml._shard_open(source, algorithm, params) -> bytea   reads the rows
 *   gbml._shard_step(request bytea) -> bytea                one step's answer
 *   gbml._shard_close()                                     drops the state
 *   gbml._shard_sessions() -> integer                       0 or 1 (tests)
 *
 * One state per backend, for one transaction: it lives in a memory context
 * under TopTransactionContext, and its temporary files belong to the
 * transaction's resource owner, so a ROLLBACK, a lost connection (the
 * coordinator closes it at the end, after an ERROR or a cancel) or the
 * backend's exit release everything; nothing is written on the shard.
 * The algorithm's shard side (its gbml_shard_ops, shard_link.h) answers
 * the requests.  An algorithm that one-hot encodes categorical columns by
 * the union's counts (counts_categories) answers _shard_open with its
 * training rows' counts instead of its hello, and opens its state when
 * the first _shard_step brings the union's (onehot_counts.h): its answer
 * is the hello.
 */
#include "glue.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "shard_link.h"
#include "onehot_counts.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

PG_FUNCTION_INFO_V1(gbml_shard_open);
PG_FUNCTION_INFO_V1(gbml_shard_step);
PG_FUNCTION_INFO_V1(gbml_shard_close);
PG_FUNCTION_INFO_V1(gbml_shard_sessions);

typedef struct shard_session
{
	MemoryContext mcxt;
	gbml_env	env;
	gbml_parsed_params pp;
	gbml_dataset *ds;
	gbml_dataset *eval;			/* the rows held out by eval_fraction, or NULL */
	gbml_column_plan *plan;		/* its columns (NULL: a features array); the schema the rows keep is its */
	const gbml_shard_ops *ops;	/* the algorithm's shard side */
	void	   *shard;
	bool		awaiting_counts;	/* sent its rows' category counts; opens on the union's */
	MemoryContextCallback forget;
} shard_session;

static shard_session *session = NULL;

/* The session's context is going away (gbml._shard_close, or the transaction's end). */
static void
forget_session(void *arg)
{
	shard_session *s = arg;

	if (session == s)
		session = NULL;
	if (s->shard)
		s->ops->close(s->shard);
	s->shard = NULL;
}

static bytea *
strbuf_to_bytea(gbml_strbuf *sb)
{
	bytea	   *out = palloc(VARHDRSZ + sb->len);

	SET_VARSIZE(out, VARHDRSZ + sb->len);
	if (sb->len)
		memcpy(VARDATA(out), sb->data, sb->len);
	return out;
}

/*
 * One member's value of "_columns" (the token after its key): an array
 * column's length (a number), or a categorical column's values (strings).
 */
static void
given_column(JsonbIterator **outer, gbml_given_columns *g, int at, const char *what)
{
	JsonbValue	v;
	JsonbIterator *it;
	JsonbIteratorToken tok = JsonbIteratorNext(outer, &v, true);
	int			cap = 16;

	g->width[at] = 0;
	g->n_values[at] = 0;
	g->values[at] = NULL;
	if (tok == WJB_VALUE && v.type == jbvNumeric)
	{
		g->width[at] = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v.val.numeric)));
		if (g->width[at] < 1)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: \"_columns\" gives \"%s\" a length below 1", what, g->names[at])));
		return;
	}
	if (tok != WJB_VALUE || v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s: \"_columns\" of \"%s\" is neither a length nor an array", what, g->names[at])));
	g->values[at] = palloc(sizeof(char *) * cap);
	it = JsonbIteratorInit(v.val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (v.type != jbvString)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: \"_columns\" of \"%s\" holds a value that is not a string", what,
								   g->names[at])));
		if (g->n_values[at] == cap)
			g->values[at] = repalloc(g->values[at], sizeof(char *) * (cap *= 2));
		g->values[at][g->n_values[at]++] = pnstrdup(v.val.string.val, v.val.string.len);
	}
}

/*
 * What a coordinator gives its shards about their columns (params'
 * "_columns": {"column": ["value", ...] or length, ...}: the union's
 * categories, sorted, and the arrays' lengths), taken out of params; NULL
 * without it.
 */
static gbml_given_columns *
take_given_columns(Jsonb **params, const char *what)
{
	JsonbValue *obj = *params ? getKeyJsonValueFromContainer(&(*params)->root, "_columns", 8, NULL) : NULL;
	gbml_given_columns *g;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			cap = 8;

	if (obj == NULL)
		return NULL;
	if (obj->type != jbvBinary || !JsonContainerIsObject(obj->val.binary.data))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s: \"_columns\" is not an object", what)));
	g = palloc0(sizeof(gbml_given_columns));
	g->names = palloc(sizeof(char *) * cap);
	g->width = palloc(sizeof(int) * cap);
	g->n_values = palloc(sizeof(int) * cap);
	g->values = palloc(sizeof(char **) * cap);
	it = JsonbIteratorInit(obj->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY)
			continue;
		if (g->n == cap)
		{
			cap *= 2;
			g->names = repalloc(g->names, sizeof(char *) * cap);
			g->width = repalloc(g->width, sizeof(int) * cap);
			g->n_values = repalloc(g->n_values, sizeof(int) * cap);
			g->values = repalloc(g->values, sizeof(char **) * cap);
		}
		g->names[g->n] = pnstrdup(v.val.string.val, v.val.string.len);
		given_column(&it, g, g->n++, what);
	}
	*params = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(*params),
												 CStringGetTextDatum("_columns")));
	return g;
}

/* Reads source into a new session's dataset (the session's context, the transaction's files). */
static void
open_session(shard_session *s, const gbml_algorithm *algo, const char *source, Jsonb *params, const char *what)
{
	unsigned	flags;
	gbml_given_columns *given;

	given = take_given_columns(&params, what);
	gbml_env_bind(&s->env, s->mcxt, what);
	gbml_parse_params_or_error(&s->env, algo, params, NULL, 0, &s->pp, what);
	gbml_env_configure(&s->env, &s->pp.common, what);
	/* a shard computes on its CPUs: the coordinator's steps are the same on every shard */
	s->env.device = GBML_DEVICE_CPU;
	flags = gbml_input_flags(&s->pp);
	s->ds = MemoryContextAllocZero(s->mcxt, sizeof(gbml_dataset));
	gbml_dataset_init(s->ds, (flags & GBML_INPUT_MISSING) != 0);
	gbml_dataset_guard(s->mcxt, s->ds);
	gbml_plan_spill(algo, &s->env, s->ds);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/*
	 * SPI_connect made its procedure context current, which SPI_finish
	 * deletes: the column plan and the schema the rows keep (ds->schema)
	 * must live as long as the session, so they go to its context.
	 */
	MemoryContextSwitchTo(s->mcxt);
	s->plan = gbml_read_source(&s->env, &s->pp, source, s->ds, flags, NULL, given, what);
	/*
	 * (Until stop 46 the plan was made after an SPI call, in SPI's context:
	 * freed here, then read by the session's steps, which trained from a
	 * garbled schema or refused their requests.)
	 */
	if (s->plan && (GetMemoryChunkContext(s->plan) != s->mcxt ||
					GetMemoryChunkContext((void *) gbml_column_plan_schema(s->plan)) != s->mcxt))
		elog(ERROR, "%s: the shard session's column plan is not in its memory context", what);
	SPI_finish();
	gbml_dataset_finish_appends(s->ds, &s->env);
	GBML_CHECK(&s->env, gbml_dataset_canonicalize(s->ds, &s->env), what);
	if (s->pp.common.eval_fraction > 0)
	{
		bool		has_eval;

		if (!s->ops->takes_eval_split)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("%s: %s does not take eval_fraction across servers", what, algo->name)));
		s->eval = MemoryContextAllocZero(s->mcxt, sizeof(gbml_dataset));
		gbml_dataset_init(s->eval, s->ds->allow_missing);
		gbml_dataset_guard(s->mcxt, s->eval);
		GBML_CHECK(&s->env, gbml_shard_split_eval(&s->pp, s->ds, s->eval, &has_eval, &s->env), what);
		if (!has_eval)
			s->eval = NULL;		/* (freed with the context) */
	}
}

/* The algorithm's shard state over the session's rows, its hello into *hello. */
static void
open_state(shard_session *s, gbml_strbuf *hello, const char *what)
{
	ResourceOwner owner = CurrentResourceOwner;

	/* temporary files (encoded rows past the budget) live until the transaction ends */
	CurrentResourceOwner = TopTransactionResourceOwner;
	PG_TRY();
	{
		GBML_CHECK(&s->env, s->ops->open(s->ds, s->eval, s->pp.algo_params, &s->env, &s->shard, hello), what);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
}

/*
 * The union's category counts (the coordinator's first step, req), into
 * the session's schema (its plan's, which its rows and eval rows share):
 * the state opens on them; *hello is its hello.
 */
static void
open_on_counts(shard_session *s, const uint8_t *req, size_t len, gbml_strbuf *hello, const char *what)
{
	int64	  **counts = gbml_column_plan_category_counts(s->plan);

	GBML_CHECK(&s->env, gbml_onehot_counts_add(s->ds->schema, req, len, (int64_t *const *) counts,
											   "the coordinator", &s->env), what);
	s->awaiting_counts = false;
	open_state(s, hello, what);
}

Datum
gbml_shard_open(PG_FUNCTION_ARGS)
{
	const char *what = "gbml._shard_open";
	const gbml_algorithm *algo;
	shard_session *s;
	MemoryContext mcxt,
				old;
	ResourceOwner owner = CurrentResourceOwner;
	gbml_strbuf hello;
	bytea	   *out;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s: source and algorithm must not be NULL", what)));
	if (session != NULL)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
						errmsg("%s: this session already holds a shard's training state", what),
						errhint("One training per connection: call gbml._shard_close() first.")));
	algo = gbml_algorithm_by_name(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	if (algo == NULL || algo->shard == NULL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: algorithm \"%s\" does not train across servers", what,
							   text_to_cstring(PG_GETARG_TEXT_PP(1))),
						errhint("Boosting (boost), K-Means (kmeans) and the linear models (saga) train across servers.")));

	mcxt = AllocSetContextCreate(TopTransactionContext, "gbml shard", ALLOCSET_DEFAULT_SIZES);
	s = MemoryContextAllocZero(mcxt, sizeof(shard_session));
	s->mcxt = mcxt;
	s->ops = algo->shard;
	s->forget.func = forget_session;
	s->forget.arg = s;
	old = MemoryContextSwitchTo(mcxt);
	/* temporary files live until the transaction ends, not only this statement */
	CurrentResourceOwner = TopTransactionResourceOwner;
	PG_TRY();
	{
		open_session(s, algo, text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2),
					 what);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	gbml_sb_init(&hello, &s->env);
	if (s->ops->counts_categories && gbml_schema_n_categorical(s->ds->schema) > 0)
	{
		/* the training rows' category counts first; the state opens on the union's */
		GBML_CHECK(&s->env, gbml_onehot_counts_of_rows(s->ds, algo->name, &s->env, &hello), what);
		s->awaiting_counts = true;
	}
	else
		open_state(s, &hello, what);
	MemoryContextRegisterResetCallback(mcxt, &s->forget);
	session = s;
	MemoryContextSwitchTo(old);
	out = strbuf_to_bytea(&hello);
	gbml_sb_free(&hello);
	PG_RETURN_BYTEA_P(out);
}

Datum
gbml_shard_step(PG_FUNCTION_ARGS)
{
	const char *what = "gbml._shard_step";
	bytea	   *req;
	gbml_strbuf reply;
	bytea	   *out;

	if (session == NULL)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("%s: this session holds no shard's training state", what),
						errhint("gbml._shard_open starts one; it lasts until the end of its transaction.")));
	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s: the request must not be NULL", what)));
	req = PG_GETARG_BYTEA_PP(0);
	gbml_sb_init(&reply, &session->env);
	if (session->awaiting_counts)
		open_on_counts(session, (const uint8_t *) VARDATA_ANY(req), VARSIZE_ANY_EXHDR(req), &reply, what);
	else
		GBML_CHECK(&session->env, gbml_shard_answer(session->ops, session->shard, (const uint8_t *) VARDATA_ANY(req),
													VARSIZE_ANY_EXHDR(req), &reply), what);
	out = strbuf_to_bytea(&reply);
	gbml_sb_free(&reply);
	PG_RETURN_BYTEA_P(out);
}

Datum
gbml_shard_close(PG_FUNCTION_ARGS)
{
	if (session != NULL)
		MemoryContextDelete(session->mcxt);
	PG_RETURN_VOID();
}

Datum
gbml_shard_sessions(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(session != NULL ? 1 : 0);
}
