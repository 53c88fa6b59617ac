/*
 * registry.c — gbml.train(name, algorithm, source, params): reads `source`
 * (a table name or a query) through a cursor in batches into the chunked
 * dataset, trains, records a new version in gbml.models and deploys it per
 * policy.  This is the form pg_cron calls.  gbml.deploy and the table itself
 * are plain SQL in the install script.
 */
#include "glue.h"
#include "schema.h"

#include <math.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "parser/parser.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(gbml_train_registry);

#define FETCH_BATCH 10000

bool
gbml_source_is_name(const char *source, LOCKMODE lock, Oid *relid)
{
	List	   *parts = NIL;
	List	   *names = NIL;
	ListCell   *lc;

	*relid = InvalidOid;
	/* (the parts point into the copy, unquoted and folded as the parser folds names) */
	if (!SplitIdentifierString(pstrdup(source), '.', &parts) || parts == NIL || list_length(parts) > 3)
		return false;
	foreach(lc, parts)
		names = lappend(names, makeString((char *) lfirst(lc)));
	*relid = RangeVarGetRelid(makeRangeVarFromNameList(names), lock, true);
	return true;
}

/* A syntax error's position in a source query, shown under that query rather than the caller's statement. */
static void
source_error_position(void *arg)
{
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery((const char *) arg);
	}
}

/*
 * A source query's text, parsed here: one query that returns rows, without
 * a trailing semicolon (or what follows it).  gbml runs it as a subquery,
 * where a semicolon, a second statement or a DELETE ... RETURNING failed
 * with a syntax error in gbml's own query.
 */
static char *
source_query(const char *source, const char *what)
{
	ErrorContextCallback cb = {.previous = error_context_stack,.callback = source_error_position,.arg = (void *) source};
	List	   *stmts;
	RawStmt    *rs;

	error_context_stack = &cb;
	stmts = raw_parser(source, RAW_PARSE_DEFAULT);
	error_context_stack = cb.previous;
	if (list_length(stmts) != 1)
		ereport(ERROR, (errcode(ERRCODE_SYNTAX_ERROR),
						errmsg("%s: the source must be one query; it has %d statements", what, list_length(stmts))));
	rs = linitial(stmts);
	if (!IsA(rs->stmt, SelectStmt))
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
						errmsg("%s: the source must be a query that returns rows (SELECT, VALUES, TABLE or WITH ... "
							   "SELECT), not %s", what, GetCommandTagName(CreateCommandTag(rs->stmt)))));
	/* a length of 0: the statement runs to the end of the string */
	return rs->stmt_len > 0 ? pnstrdup(source + rs->stmt_location, rs->stmt_len) : pstrdup(source + rs->stmt_location);
}

/* A named source must be something rows are read from: not an index, a composite type, a TOAST table. */
static void
check_readable_relation(Oid relid, const char *source, const char *what)
{
	const char *kind;

	switch (get_rel_relkind(relid))
	{
		case RELKIND_INDEX:
		case RELKIND_PARTITIONED_INDEX:
			kind = "an index";
			break;
		case RELKIND_COMPOSITE_TYPE:
			kind = "a composite type";
			break;
		case RELKIND_TOASTVALUE:
			kind = "a TOAST table";
			break;
		default:
			return;
	}
	ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
					errmsg("%s: source \"%s\" is %s, not a table, view or query", what, source, kind)));
}

/*
 * "SELECT ... FROM <table>" when source names a relation, else the query as
 * a subquery (its own line: a trailing -- comment ends before the closing
 * parenthesis).
 */
static char *
source_sql(const char *source, const char *what)
{
	Oid			relid;

	if (gbml_source_is_name(source, NoLock, &relid))
	{
		if (!OidIsValid(relid))
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
							errmsg("%s: source \"%s\" is neither a table nor a query", what, source)));
		check_readable_relation(relid, source, what);
		return psprintf("SELECT * FROM %s", quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
																	 get_rel_name(relid)));
	}
	return psprintf("SELECT * FROM (%s\n) AS gbml_source", source_query(source, what));
}

/* The label, group and weight columns after the features of the projection q builds. */
static void
select_targets(const gbml_common_params *cp, TupleDesc td, unsigned input_flags, StringInfo q)
{
	int			lcol = gbml_attno(td, cp->label_column),
				gcol = gbml_attno(td, cp->group_column),
				wcol = gbml_attno(td, cp->weight_column);

	if (lcol && (input_flags & GBML_INPUT_LABEL))
	{
		Oid			lt = TupleDescAttr(td, lcol - 1)->atttypid;

		if (lt == BOOLOID)
			appendStringInfo(q, ", (s.%s)::int::real", quote_identifier(cp->label_column));
		else
			appendStringInfo(q, ", (s.%s)::real", quote_identifier(cp->label_column));
	}
	else
		appendStringInfoString(q, ", NULL::real");
	if (gcol)
		appendStringInfo(q, ", (s.%s)::bigint", quote_identifier(cp->group_column));
	else
		appendStringInfoString(q, ", NULL::bigint");
	if (wcol)
		appendStringInfo(q, ", (s.%s)::real", quote_identifier(cp->weight_column));
	else
		appendStringInfoString(q, ", NULL::real");
}

/* The array form's features column (features_column) must be an array: else an ERROR naming it, not a cast's. */
static void
check_features_array(TupleDesc td, const char *column, const char *what)
{
	Oid			typid = TupleDescAttr(td, gbml_attno(td, column) - 1)->atttypid;

	if (!OidIsValid(get_element_type(getBaseType(typid))))
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("%s: column \"%s\" has type %s; a source's \"%s\" column is the features array (real[])",
							   what, column, format_type_be(typid), column),
						errhint("Rename the column, or name the feature columns with \"feature_columns\".")));
}

/* How gbml_read_source turns its cursor's rows into dataset rows. */
typedef struct source_reader
{
	gbml_column_plan *columns;	/* the feature columns, or NULL: one real[] column */
	float	   *x;				/* a row's features, converted from its columns */
	int			n_feature_cols; /* the SELECT's columns before label, group and weight */
	bool		own_plan;		/* the plan came from this source's own first scan */
	unsigned	input_flags;
	const char *what;
} source_reader;

/* Row rowno of the cursor (tup) as a dataset row: its features, then label, group and weight. */
static void
source_row(const source_reader *sr, HeapTuple tup, TupleDesc rtd, int64 rowno, gbml_row *row)
{
	const char *what = sr->what;
	int			n = sr->n_feature_cols;
	bool		isnull;
	Datum		d;

	memset(row, 0, sizeof(*row));
	if (sr->columns)
	{
		/* the source's own values were all seen by its first scan; an eval source's may be new */
		gbml_column_plan_row(sr->columns, tup, rtd, sr->x, (sr->input_flags & GBML_INPUT_MISSING) != 0,
							 sr->own_plan, what, rowno);
		row->x = sr->x;
		row->n_features = gbml_column_plan_n_features(sr->columns);
	}
	else
	{
		d = SPI_getbinval(tup, rtd, 1, &isnull);
		if (isnull)
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							errmsg("%s: row " INT64_FORMAT ": features is NULL", what, rowno)));
		row->x = gbml_float_array(DatumGetArrayTypeP(d), &row->n_features, what, rowno);
		if (row->n_features == 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("%s: row " INT64_FORMAT ": features is empty", what, rowno)));
	}
	d = SPI_getbinval(tup, rtd, n + 1, &row->label_is_null);
	if (!row->label_is_null)
		row->label = DatumGetFloat4(d);
	d = SPI_getbinval(tup, rtd, n + 2, &row->group_is_null);
	if (!row->group_is_null)
		row->group = DatumGetInt64(d);
	d = SPI_getbinval(tup, rtd, n + 3, &row->weight_is_null);
	if (!row->weight_is_null)
		row->weight = DatumGetFloat4(d);
}

/*
 * Reads `source` into ds.  With a features array column the projection
 * casts it to real[] (features may be real[], float8[] or numeric[]);
 * otherwise the features are the source's columns (columns.c), through
 * `columns` when the caller has a plan (the eval source uses the training
 * source's), else through one made here and returned.  Labels may be any
 * number or boolean.
 */
gbml_column_plan *
gbml_read_source(gbml_env *env, const gbml_parsed_params *pp, const char *source, gbml_dataset *ds,
			unsigned input_flags, gbml_column_plan *columns, const gbml_given_columns *given,
			const char *what)
{
	const gbml_common_params *cp = &pp->common;
	char	   *base = source_sql(source, what);
	char	   *probe = psprintf("%s LIMIT 0", base);
	TupleDesc	td;
	StringInfoData q;
	Portal		portal;
	SPIPlanPtr	plan;
	MemoryContext batch_cxt;
	int64		rowno = 0;
	source_reader sr = {.n_feature_cols = 1,.own_plan = columns == NULL,.input_flags = input_flags,.what = what};
	bool		by_columns;
	MemoryContext caller = CurrentMemoryContext;

	if (SPI_execute(probe, true, 0) != SPI_OK_SELECT)
		ereport(ERROR, (errmsg("%s: could not read source", what)));
	/*
	 * An SPI call returns in SPI's procedure context, which SPI_finish
	 * deletes: the column plan and its schema made here are the caller's
	 * (a shard's session keeps them past SPI_finish, for its later steps)
	 */
	MemoryContextSwitchTo(caller);
	td = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	by_columns = columns != NULL || cp->feature_columns.n > 0 || gbml_attno(td, cp->features_column) == 0;
	if (!by_columns)
		check_features_array(td, cp->features_column, what);
	if ((input_flags & GBML_INPUT_LABEL) && gbml_attno(td, cp->label_column) == 0)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
						errmsg("%s: source has no column \"%s\"", what, cp->label_column),
						errhint("Name the label column \"label\" or pass {\"label_column\": \"...\"}.")));
	gbml_check_target_columns(cp, td, (input_flags & GBML_INPUT_LABEL) != 0, what);

	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT ");
	if (by_columns)
	{
		if (columns == NULL)
			columns = gbml_column_plan_for_source(cp, td, base, given, what);
		else
			gbml_column_plan_check_source(columns, td, what);
		gbml_column_plan_select(columns, &q);
		sr.columns = columns;
		sr.n_feature_cols = gbml_column_plan_n_columns(columns);
		sr.x = palloc(sizeof(float) * gbml_column_plan_n_features(columns));
		ds->schema = gbml_column_plan_schema(columns);
		/* a NULL category arrives as NaN, its own category (numbers are checked here, by column) */
		if (gbml_schema_n_categorical(ds->schema) > 0)
			ds->allow_missing = true;
	}
	else
		appendStringInfo(&q, "(s.%s)::real[]", quote_identifier(cp->features_column));
	select_targets(cp, td, input_flags, &q);
	appendStringInfo(&q, " FROM (%s) AS s", base);

	plan = SPI_prepare(q.data, 0, NULL);
	if (plan == NULL)
		ereport(ERROR, (errmsg("%s: could not plan the source query: %s", what, SPI_result_code_string(SPI_result))));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	/*
	 * Wide (compressed) feature arrays are detoasted into a copy per row: keep
	 * those copies in a context reset after every batch, not in SPI's, which
	 * would grow with the table.
	 */
	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "gbml.train batch", ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext spi_cxt;

		SPI_cursor_fetch(portal, true, FETCH_BATCH);
		if (SPI_processed == 0)
			break;
		spi_cxt = MemoryContextSwitchTo(batch_cxt);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			gbml_row	row;

			source_row(&sr, SPI_tuptable->vals[i], SPI_tuptable->tupdesc, ++rowno, &row);
			GBML_CHECK(env, gbml_dataset_append(ds, env, &row, (input_flags & GBML_INPUT_LABEL) != 0), what);
		}
		MemoryContextSwitchTo(spi_cxt);
		MemoryContextReset(batch_cxt);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextDelete(batch_cxt);
	SPI_cursor_close(portal);
	return sr.columns;
}

/*
 * Reads source (and the eval source) on this server and trains: the model
 * bytes.  Leaves SPI connected, the current context train_mcxt.
 */
static bytea *
train_here(gbml_env *env, gbml_parsed_params *pp, const gbml_algorithm *algo, const char *source,
		   MemoryContext train_mcxt, const char *what)
{
	unsigned	flags = gbml_input_flags(pp);
	gbml_column_plan *columns;
	gbml_dataset *ds,
			   *eval;
	bytea	   *model;

	/*
	 * The datasets live in train_mcxt, not on the stack: the guard callback
	 * that stops their helper thread runs when the context is deleted, which
	 * after an ERROR happens once this frame is gone.
	 */
	ds = MemoryContextAllocZero(train_mcxt, sizeof(gbml_dataset));
	eval = MemoryContextAllocZero(train_mcxt, sizeof(gbml_dataset));
	gbml_dataset_init(ds, (flags & GBML_INPUT_MISSING) != 0);
	gbml_dataset_init(eval, (flags & GBML_INPUT_MISSING) != 0);
	gbml_dataset_guard(train_mcxt, ds);
	gbml_dataset_guard(train_mcxt, eval);
	gbml_stream_setup(env, pp, ds, false);
	gbml_plan_spill(algo, env, eval);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/* SPI_connect switched to its own context; the dataset lives in train_mcxt through env */
	columns = gbml_read_source(env, pp, source, ds, flags, NULL, NULL, what);
	if (pp->common.eval_source)
	{
		/* its rows have the training rows' width (the same columns) */
		GBML_CHECK(env, gbml_plan_spill_after(env, eval, ds->n_features,
											  "reading the eval set (eval_source) after the training rows"),
				   "gbml.train (eval_source)");
		gbml_read_source(env, pp, pp->common.eval_source, eval, flags, columns, NULL, "gbml.train (eval_source)");
		if (eval->n_rows == 0)
			ereport(ERROR, (errcode(ERRCODE_NO_DATA), errmsg("gbml.train: eval_source returned no rows"),
						errhint("An eval set needs rows; leave eval_source out to train without one.")));
	}
	MemoryContextSwitchTo(train_mcxt);
	model = gbml_train_to_bytea(env, pp, ds, pp->common.eval_source ? eval : NULL, what);
	gbml_dataset_free(ds, env);
	gbml_dataset_free(eval, env);
	return model;
}

/*
 * Runs gbml._record_model.  It numbers the version under an advisory lock,
 * which serializes trainings of a name under READ COMMITTED; a transaction
 * with one snapshot (REPEATABLE READ, SERIALIZABLE) cannot see a version
 * committed after it began, so its INSERT may meet that version's number:
 * that is a serialization failure (which clients retry), said so, not the
 * unique index's message.
 */
static int
record_model(Datum *values, Oid *argtypes, const char *nulls, const char *name)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = 0;

	PG_TRY();
	{
		rc = SPI_execute_with_args("SELECT gbml._record_model($1, $2, $3, $4, $5)", 5, argtypes, values, nulls,
								   false, 1);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION || !IsolationUsesXactSnapshot() ||
			edata->constraint_name == NULL || strcmp(edata->constraint_name, "models_name_version_key") != 0)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("gbml.train: another session recorded a version of \"%s\" after this transaction's snapshot was taken", name),
				 errdetail("%s", edata->detail ? edata->detail : edata->message),
				 errhint("Retry the transaction, or train under READ COMMITTED, where trainings of one name take their turns.")));
	}
	PG_END_TRY();
	return rc;
}

Datum
gbml_train_registry(PG_FUNCTION_ARGS)
{
	char	   *name,
			   *algo_name,
			   *source;
	Jsonb	   *params = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	const gbml_algorithm *algo;
	MemoryContext train_mcxt,
				old;
	gbml_env   *env;
	gbml_parsed_params pp;
	gbml_shard_set *shards;
	bytea	   *model;
	int64		id;
	const char *what = "gbml.train";

	gbml_forget_last_report();

	/*
	 * gbml.train records a version: say at once that this server cannot,
	 * rather than after the scan and the training, deep in an INSERT.
	 */
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("gbml.train: the server is read-only (a standby in recovery): a new model version cannot be recorded here"),
				 errhint("Run gbml.train on the primary. Scoring (gbml.predict by name or bytea) and the training aggregates, which return the model as bytea, work on a standby.")));
	if (XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("gbml.train: the transaction is read-only: a new model version cannot be recorded"),
				 errhint("Run it in a read-write transaction (default_transaction_read_only is on, or the transaction was started READ ONLY).")));
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("gbml.train: name, algorithm and source must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	algo_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	source = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (name[0] == '\0')
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("gbml.train: name must not be empty")));
	if (source[strspn(source, " \t\r\n")] == '\0')
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("gbml.train: source must not be empty"),
						errhint("Name a table or give a query.")));
	algo = gbml_algorithm_by_name(algo_name);
	if (algo == NULL)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("gbml.train: unknown algorithm \"%s\"", algo_name),
						errhint("Use one of 'boost', 'kmeans', 'saga'.")));

	train_mcxt = AllocSetContextCreate(CurrentMemoryContext, "gbml.train", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(train_mcxt);

	/*
	 * The env lives in train_mcxt, not in this frame: a dataset's temporary
	 * file store keeps a pointer to it, and after an ERROR the store is
	 * closed by train_mcxt's reset callback, when this frame is long gone.
	 */
	env = MemoryContextAllocZero(train_mcxt, sizeof(gbml_env));
	gbml_env_bind(env, train_mcxt, what);
	gbml_parse_params_or_error(env, algo, params, NULL, 0, &pp, what);
	gbml_env_configure(env, &pp.common, what);
	if ((shards = gbml_sharded_source(source, what)) != NULL)
	{
		/* a partitioned table of postgres_fdw partitions: the shards train where the rows are */
		model = gbml_shards_train(env, &pp, shards, params, what);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
	}
	else
		model = train_here(env, &pp, algo, source, train_mcxt, what);

	/* Record the version and deploy it per policy, in SQL. */
	{
		Oid			argtypes[5] = {TEXTOID, TEXTOID, BYTEAOID, TEXTOID, JSONBOID};
		Datum		values[5];
		bool		nulls_any = gbml_last_report() == NULL;
		char		nulls[5] = {' ', ' ', ' ', ' ', nulls_any ? 'n' : ' '};
		bool		isnull;
		static const char *const policies[] = {"always", "if_better", "never"};

		values[0] = CStringGetTextDatum(name);
		values[1] = CStringGetTextDatum(algo->name);
		values[2] = PointerGetDatum(model);
		values[3] = CStringGetTextDatum(policies[pp.common.deploy]);
		values[4] = nulls_any ? (Datum) 0 : DirectFunctionCall1(jsonb_in, CStringGetDatum(gbml_last_report()));
		if (record_model(values, argtypes, nulls, name) != SPI_OK_SELECT || SPI_processed != 1)
			ereport(ERROR, (errmsg("gbml.train: could not record the model")));
		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(train_mcxt);
	PG_RETURN_INT64(id);
}
