/*
 * shards.c — the coordinator's side of a training across servers
 * (issue 14): gbml.train on a partitioned table whose partitions are
 * postgres_fdw foreign tables trains on the shards where the rows live.
 *
 * For each partition it connects (libpq, its own connections: their
 * sessions must end with the training) with the conninfo postgres_fdw
 * would build from the foreign server's options and the caller's user
 * mapping, under postgres_fdw's rule that a non-superuser's connection
 * must use a password.  Each shard opens a read-only transaction and
 * reads its partition's remote table (gbml._shard_open, shard_session.c);
 * then the engine (shard_link.h) drives the training, every step one
 * query sent to every shard at once and waited for together with the
 * latch, so a cancel or statement_timeout is seen at once.  Whatever way
 * the training ends, every connection is closed (busy ones cancelled
 * first), which ends the shards' transactions and frees their state.
 */
#include "glue.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "shard_cancel.h"
#include "shard_link.h"
#include "onehot_counts.h"
#include "schema.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/varlena.h"
#include "utils/rel.h"
#include "utils/wait_event.h"

typedef struct shard_conn
{
	char	   *server;			/* the foreign server's name, for messages */
	char	   *remote;			/* what the shard reads: the partition's table there, or a query on it (remote_rows) */
	List	   *options;		/* the server's and the user mapping's options (DefElem) */
	PGconn	   *conn;
	bool		busy;			/* a query sent, its result not all read */
	bool		flushing;		/* ... and part of the query still in libpq's buffer (non-blocking) */
	PGresult   *result;			/* the last query's result (a step's reply points into it) */
	PGresult   *hello;			/* _shard_open's result: the engine reads its hello to the end */
	char	   *error;			/* the last query's failure (palloc'd), or NULL */
	char	   *hint;			/* ... its HINT, or NULL: the coordinator's error carries it */
	char		sqlstate[6];	/* ... its SQLSTATE, or "" */
} shard_conn;

typedef struct gbml_shard_set
{
	Oid			relid;			/* the partitioned table */
	const char *source;			/* as the caller named it */
	int			n;
	shard_conn *shards;
	gbml_shard_link link;
	const uint8_t **hello;
	size_t	   *hello_len;
} gbml_shard_set;

/* ------------------------------------------------------------------ */
/* The partitions                                                      */
/* ------------------------------------------------------------------ */

static const char *
option_value(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, name) == 0)
			return defGetString(d);
	}
	return NULL;
}

/* Whether the server's "extensions" option lists gbml (postgres_fdw's list of shippable extensions). */
static bool
lists_gbml(const char *extensions)
{
	char	   *copy = pstrdup(extensions ? extensions : "");
	List	   *names;
	ListCell   *lc;

	if (!SplitIdentifierString(copy, ',', &names))
		return false;
	foreach(lc, names)
		if (strcmp(lfirst(lc), "gbml") == 0)
			return true;
	return false;
}

/*
 * What the shard reads for partition relid: its table there, or where a
 * column of the partition has a "column_name" option, the remote columns
 * postgres_fdw would read for the partition's, under the partition's names
 * (which the training's column plan uses).  Without a renamed column the
 * table itself, so that a column the remote table lacks fails only if the
 * training reads it, as through postgres_fdw.
 */
static char *
remote_rows(Oid relid, const char *table)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	td = RelationGetDescr(rel);
	StringInfoData q;
	bool		any = false,
				renamed = false;

	initStringInfo(&q);
	appendStringInfoString(&q, "(SELECT ");
	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);
		const char *name = NameStr(att->attname),
				   *remote;

		if (att->attisdropped)
			continue;
		remote = option_value(GetForeignColumnOptions(relid, att->attnum), "column_name");
		renamed |= remote != NULL;
		appendStringInfo(&q, "%ss.%s AS %s", any ? ", " : "", quote_identifier(remote ? remote : name),
						 quote_identifier(name));
		any = true;
	}
	appendStringInfo(&q, " FROM %s AS s)", table);
	relation_close(rel, AccessShareLock);
	return renamed ? q.data : pstrdup(table);
}

/* One partition's shard: its server, the caller's user mapping, the rows it reads. */
static void
describe_shard(Oid relid, shard_conn *sc, const char *what)
{
	ForeignTable *ft = GetForeignTable(relid);
	ForeignServer *srv = GetForeignServer(ft->serverid);
	ForeignDataWrapper *fdw = GetForeignDataWrapper(srv->fdwid);
	UserMapping *um;
	const char *nsp = option_value(ft->options, "schema_name"),
			   *rel = option_value(ft->options, "table_name");

	if (strcmp(fdw->fdwname, "postgres_fdw") != 0)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: partition \"%s\" is a foreign table of %s; training across servers reaches "
							   "postgres_fdw servers", what, get_rel_name(relid), fdw->fdwname)));
	if (!lists_gbml(option_value(srv->options, "extensions")))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: foreign server \"%s\" does not list gbml in its \"extensions\" option",
							   what, srv->servername),
						errhint("Install gbml on that server, then: ALTER SERVER %s OPTIONS (ADD extensions 'gbml').",
								quote_identifier(srv->servername))));
	um = GetUserMapping(GetUserId(), srv->serverid);
	sc->server = pstrdup(srv->servername);
	sc->remote = remote_rows(relid, psprintf("%s.%s",
											 quote_identifier(nsp ? nsp : get_namespace_name(get_rel_namespace(relid))),
											 quote_identifier(rel ? rel : get_rel_name(relid))));
	sc->options = list_concat(list_copy(srv->options), um->options);
}

gbml_shard_set *
gbml_sharded_source(const char *source, const char *what)
{
	Oid			relid;
	List	   *all;
	ListCell   *lc;
	gbml_shard_set *ss;
	int			foreign = 0,
				local = 0;

	if (!gbml_source_is_name(source, AccessShareLock, &relid))
		return NULL;			/* a query */
	if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return NULL;
	all = find_all_inheritors(relid, AccessShareLock, NULL);
	foreach(lc, all)
	{
		char		kind = get_rel_relkind(lfirst_oid(lc));

		if (kind == RELKIND_FOREIGN_TABLE)
			foreign++;
		else if (kind != RELKIND_PARTITIONED_TABLE)
			local++;
	}
	if (foreign == 0)
		return NULL;
	if (local > 0)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: \"%s\" has %d foreign and %d local partitions; training across servers needs "
							   "every partition on a shard", what, source, foreign, local),
						errhint("Train on a query instead (the rows then come to this server), or move the local "
								"partitions to a shard.")));
	ss = palloc0(sizeof(gbml_shard_set));
	ss->shards = palloc0(sizeof(shard_conn) * foreign);
	foreach(lc, all)
		if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_FOREIGN_TABLE)
			describe_shard(lfirst_oid(lc), &ss->shards[ss->n++], what);
	ss->relid = relid;
	ss->source = pstrdup(source);
	return ss;
}

/* ------------------------------------------------------------------ */
/* Connections                                                         */
/* ------------------------------------------------------------------ */

/* Whether name is a libpq connection option (postgres_fdw passes only those on). */
static bool
is_libpq_option(const char *name)
{
	static PQconninfoOption *defaults = NULL;

	if (defaults == NULL && (defaults = PQconndefaults()) == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	for (PQconninfoOption *o = defaults; o->keyword; o++)
		if (strcmp(o->keyword, name) == 0 && strchr(o->dispchar, 'D') == NULL)
			return true;
	return false;
}

/*
 * Opens sc->conn with libpq's non-blocking steps, waiting on its socket and
 * the latch: PQconnectdbParams would wait inside libpq, deaf to a cancel,
 * statement_timeout or termination, for as long as a server that accepts
 * the connection and says nothing keeps it (for ever).  An interrupt ends
 * the wait with its ERROR; the caller's cleanup closes the connection.
 */
static void
start_connection(shard_conn *sc, const char *const *keys, const char *const *vals)
{
	PostgresPollingStatusType state = PGRES_POLLING_WRITING;

	sc->conn = PQconnectStartParams(keys, vals, false);
	if (sc->conn == NULL || PQstatus(sc->conn) == CONNECTION_BAD)
		return;
	while (state != PGRES_POLLING_OK && state != PGRES_POLLING_FAILED)
	{
		int			io = state == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		int			rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | io, PQsocket(sc->conn), -1L,
										   PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if (rc & io)
			state = PQconnectPoll(sc->conn);
	}
}

/*
 * postgres_fdw's rule for a non-superuser: the connection must use a
 * password unless a superuser gave the user mapping password_required
 * 'false' (only a superuser may set it).
 */
static bool
password_required(List *options)
{
	const char *v = option_value(options, "password_required");
	bool		required = true;

	if (v != NULL && !parse_bool(v, &required))
		required = true;
	return required;
}

static void
connect_shard(shard_conn *sc, const char *what)
{
	int			n = list_length(sc->options) + 3,
				i = 0;
	const char **keys = palloc0(sizeof(char *) * n),
			  **vals = palloc0(sizeof(char *) * n);
	ListCell   *lc;

	foreach(lc, sc->options)
	{
		DefElem    *d = lfirst(lc);

		if (!is_libpq_option(d->defname))
			continue;
		keys[i] = d->defname;
		vals[i++] = defGetString(d);
	}
	keys[i] = "fallback_application_name";
	vals[i++] = "gbml shard";
	keys[i] = "client_encoding";
	vals[i++] = GetDatabaseEncodingName();
	start_connection(sc, keys, vals);
	if (sc->conn == NULL || PQstatus(sc->conn) != CONNECTION_OK)
		ereport(ERROR, (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						errmsg("%s: could not connect to shard \"%s\": %s", what, sc->server,
							   sc->conn ? pchomp(PQerrorMessage(sc->conn)) : "out of memory")));
	/*
	 * Queries are sent without blocking (sent_to_shard, wait_shards): a shard
	 * that stops reading would otherwise hold a request larger than the
	 * socket's buffer inside libpq's send, deaf to interrupts.
	 */
	if (PQsetnonblocking(sc->conn, 1) != 0)
		ereport(ERROR, (errmsg("%s: shard \"%s\": %s", what, sc->server, pchomp(PQerrorMessage(sc->conn)))));
	if (!superuser() && password_required(sc->options) && !PQconnectionUsedPassword(sc->conn))
		ereport(ERROR, (errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
						errmsg("%s: the connection to shard \"%s\" did not use a password", what, sc->server),
						errhint("As with postgres_fdw, a non-superuser's user mapping must give a password the shard asks for "
								"(or a superuser sets password_required 'false' on it).")));
}

/* Every connection closed; a shard still at work is told to cancel first (shard_cancel.c). */
static void
close_shards(gbml_shard_set *ss)
{
	/* malloc: this runs while any ERROR is cleaned up, out of memory too (then no shard is asked) */
	PGconn	  **busy = malloc(sizeof(PGconn *) * (ss->n > 0 ? ss->n : 1));
	int			n_busy = 0;

	for (int s = 0; busy != NULL && s < ss->n; s++)
		if (ss->shards[s].conn != NULL && ss->shards[s].busy)
			busy[n_busy++] = ss->shards[s].conn;
	if (n_busy > 0)
		gbml_cancel_shard_queries(busy, n_busy);
	free(busy);
	for (int s = 0; s < ss->n; s++)
	{
		shard_conn *sc = &ss->shards[s];

		if (sc->result)
			PQclear(sc->result);
		if (sc->hello)
			PQclear(sc->hello);
		sc->result = sc->hello = NULL;
		if (sc->conn)
			PQfinish(sc->conn);
		sc->conn = NULL;
		sc->busy = false;
	}
}

/* Reads what shard sc has sent; its query is done when busy turns false. */
static void
read_shard(shard_conn *sc)
{
	if (!PQconsumeInput(sc->conn))
	{
		sc->error = pchomp(PQerrorMessage(sc->conn));
		sc->busy = false;
		return;
	}
	while (sc->busy && !PQisBusy(sc->conn))
	{
		PGresult   *r = PQgetResult(sc->conn);

		if (r == NULL)
		{
			sc->busy = false;
			break;
		}
		if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK && sc->error == NULL)
		{
			const char *m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY),
					   *h = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT),
					   *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

			sc->error = pstrdup(m ? m : pchomp(PQerrorMessage(sc->conn)));
			sc->hint = h ? pstrdup(h) : NULL;
			strlcpy(sc->sqlstate, state ? state : "", sizeof(sc->sqlstate));
		}
		if (sc->result)
			PQclear(sc->result);
		sc->result = r;
	}
}

/*
 * Sends what libpq still holds of shard sc's query, as much as the socket
 * takes now; the rest when wait_shards sees the socket writable.
 */
static void
flush_shard(shard_conn *sc)
{
	int			r = PQflush(sc->conn);

	if (r == 0)
		sc->flushing = false;
	else if (r < 0)
	{
		sc->error = pchomp(PQerrorMessage(sc->conn));
		sc->busy = sc->flushing = false;
	}
}

/*
 * Waits until every shard has answered its query, the latch watched too:
 * returns GBML_OK, GBML_ECANCELLED on a cancel or timeout here (the caller
 * closes the connections, which cancels the shards' work), or GBML_EIO
 * with env's error naming the first shard that failed.
 */
static int
wait_shards(gbml_shard_set *ss, gbml_env *env)
{
	WaitEvent  *events = palloc(sizeof(WaitEvent) * (ss->n + 2));

	for (;;)
	{
		WaitEventSet *set;
		int			busy = 0,
					got;

		for (int s = 0; s < ss->n; s++)
			busy += ss->shards[s].busy;
		if (busy == 0)
			break;
		if (QueryCancelPending || ProcDiePending)
			return gbml_error(env, GBML_ECANCELLED, "canceled");
		set = CreateWaitEventSet(CurrentMemoryContext, busy + 2);
		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		for (int s = 0; s < ss->n; s++)
			if (ss->shards[s].busy)
				AddWaitEventToSet(set, WL_SOCKET_READABLE | (ss->shards[s].flushing ? WL_SOCKET_WRITEABLE : 0),
								  PQsocket(ss->shards[s].conn), NULL, &ss->shards[s]);
		got = WaitEventSetWait(set, -1, events, busy + 2, PG_WAIT_EXTENSION);
		FreeWaitEventSet(set);
		for (int e = 0; e < got; e++)
		{
			shard_conn *sc = events[e].user_data;

			if (events[e].events & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if ((events[e].events & WL_SOCKET_WRITEABLE) && sc->flushing)
				flush_shard(sc);
			if ((events[e].events & WL_SOCKET_READABLE) && sc->busy)
				read_shard(sc);
		}
	}
	pfree(events);
	for (int s = 0; s < ss->n; s++)
		if (ss->shards[s].error)
		{
			int			rc = gbml_error(env, GBML_EIO, "shard \"%s\": %s", ss->shards[s].server,
										ss->shards[s].error);

			/* what the user can do is the shard's to say (its rows, its refusal) */
			return ss->shards[s].hint ? gbml_hint(env, "%s", ss->shards[s].hint) : rc;
		}
	return GBML_OK;
}

/* Shard sc's last result let go before the next query; `sent` says whether libpq took the query. */
static void
sent_to_shard(shard_conn *sc, bool sent)
{
	sc->busy = sent;
	sc->flushing = sent;
	sc->error = sent ? NULL : pchomp(PQerrorMessage(sc->conn));
	sc->hint = NULL;
	sc->sqlstate[0] = '\0';
	if (sent)
		flush_shard(sc);
}

static void
clear_shard(shard_conn *sc)
{
	if (sc->result)
		PQclear(sc->result);
	sc->result = NULL;
}

/* Sends query (binary parameters and result) to shard sc; a failure to send is the shard's error. */
static void
send_shard(shard_conn *sc, const char *query, int nparams, const Oid *types, const char *const *values,
		   const int *lengths, const int *formats)
{
	clear_shard(sc);
	sent_to_shard(sc, PQsendQueryParams(sc->conn, query, nparams, types, values, lengths, formats, 1) == 1);
}

/*
 * The step's statement, prepared once per connection: a step is then
 * executed without being parsed and planned again (part of every round
 * trip's coordination cost).
 */
#define STEP_STATEMENT "gbml_shard_step"

static void
prepare_step(shard_conn *sc)
{
	Oid			types[1] = {BYTEAOID};

	clear_shard(sc);
	sent_to_shard(sc, PQsendPrepare(sc->conn, STEP_STATEMENT, "SELECT gbml._shard_step($1)", 1, types) == 1);
}

static void
send_step(shard_conn *sc, const uint8_t *req, size_t len)
{
	const char *values[1] = {(const char *) req};
	int			lengths[1] = {(int) len},
				formats[1] = {1};

	clear_shard(sc);
	sent_to_shard(sc, PQsendQueryPrepared(sc->conn, STEP_STATEMENT, 1, values, lengths, formats, 1) == 1);
}

/* One binary bytea from a shard's last result, or an error. */
static int
shard_bytea(shard_conn *sc, gbml_env *env, const uint8_t **data, size_t *len)
{
	if (sc->result == NULL || PQresultStatus(sc->result) != PGRES_TUPLES_OK || PQntuples(sc->result) != 1 ||
		PQnfields(sc->result) != 1 || PQgetisnull(sc->result, 0, 0))
		return gbml_error(env, GBML_EIO, "shard \"%s\": the answer is not one bytea", sc->server);
	*data = (const uint8_t *) PQgetvalue(sc->result, 0, 0);
	*len = (size_t) PQgetlength(sc->result, 0, 0);
	return GBML_OK;
}

/* ------------------------------------------------------------------ */
/* The engine's link                                                   */
/* ------------------------------------------------------------------ */

static const char *
link_name(void *ctx, int s)
{
	return ((gbml_shard_set *) ctx)->shards[s].server;
}

static int
link_round_trip(void *ctx, const uint8_t *const *req, const size_t *req_len, const uint8_t **reply,
				size_t *reply_len, gbml_env *env)
{
	gbml_shard_set *ss = ctx;
	int			rc;

	for (int s = 0; s < ss->n; s++)
	{
		if (req_len[s] > (size_t) (MaxAllocSize - VARHDRSZ))
			return gbml_error(env, GBML_EINVAL, "a request to shard \"%s\" is %zu bytes, more than a bytea holds",
							  ss->shards[s].server, req_len[s]);
		send_step(&ss->shards[s], req[s], req_len[s]);
	}
	if ((rc = wait_shards(ss, env)) != GBML_OK)
		return rc;
	for (int s = 0; s < ss->n; s++)
		if ((rc = shard_bytea(&ss->shards[s], env, &reply[s], &reply_len[s])) != GBML_OK)
			return rc;
	return GBML_OK;
}

/* Every shard connected, in a read-only transaction of one snapshot, its step statement prepared. */
static void
connect_shards(gbml_shard_set *ss, gbml_env *env, const char *what)
{
	int			rc;

	for (int s = 0; s < ss->n; s++)
		connect_shard(&ss->shards[s], what);
	for (int s = 0; s < ss->n; s++)
		send_shard(&ss->shards[s], "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, NULL, NULL, NULL);
	GBML_CHECK(env, wait_shards(ss, env), what);
	for (int s = 0; s < ss->n; s++)
		prepare_step(&ss->shards[s]);
	rc = wait_shards(ss, env);
	/* the step function, or the gbml schema, is missing there: the extension is */
	for (int s = 0; rc != GBML_OK && s < ss->n; s++)
		if (strcmp(ss->shards[s].sqlstate, unpack_sql_state(ERRCODE_UNDEFINED_FUNCTION)) == 0 ||
			strcmp(ss->shards[s].sqlstate, unpack_sql_state(ERRCODE_INVALID_SCHEMA_NAME)) == 0)
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
							errmsg("%s: shard \"%s\" has no gbml extension (%s)", what, ss->shards[s].server,
								   ss->shards[s].error),
							errhint("Run CREATE EXTENSION gbml in the database that foreign server's \"dbname\" "
									"option names.")));
	GBML_CHECK(env, rc, what);
}

/*
 * The plan's categorical columns' values and array columns' lengths, from
 * every shard's partition (in the snapshot its training then reads): the
 * union's categories, which every shard is given.
 */
static void
probe_shards(gbml_shard_set *ss, gbml_env *env, gbml_column_plan *plan, const char *what)
{
	char	 ***texts = palloc0(sizeof(char **) * ss->n);
	const char **names = palloc0(sizeof(char *) * ss->n);

	for (int s = 0; s < ss->n; s++)
	{
		char	   *q = gbml_column_plan_shard_probe(plan, ss->shards[s].remote);

		if (q == NULL)
			return;
		clear_shard(&ss->shards[s]);
		/* text results: the arrays' values are read with this server's input functions */
		sent_to_shard(&ss->shards[s], PQsendQueryParams(ss->shards[s].conn, q, 0, NULL, NULL, NULL, NULL, 0) == 1);
	}
	GBML_CHECK(env, wait_shards(ss, env), what);
	for (int s = 0; s < ss->n; s++)
	{
		PGresult   *r = ss->shards[s].result;

		if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
			ereport(ERROR, (errmsg("%s: shard \"%s\" did not describe its categorical and array columns", what,
								   ss->shards[s].server)));
		names[s] = ss->shards[s].server;
		texts[s] = palloc0(sizeof(char *) * (PQnfields(r) > 0 ? PQnfields(r) : 1));
		for (int f = 0; f < PQnfields(r); f++)
			texts[s][f] = PQgetisnull(r, 0, f) ? NULL : pstrdup(PQgetvalue(r, 0, f));
		clear_shard(&ss->shards[s]);
	}
	gbml_column_plan_take_shard_probes(plan, ss->n, (char *const *const *) texts, names, what);
}

/*
 * The shards answered their opening with their training rows' category
 * counts (onehot_counts.h): the union's, summed here, go to the schema
 * (this server's encoding keeps categories by them) and back to every
 * shard, whose answer is then its hello.
 */
static void
exchange_counts(gbml_shard_set *ss, gbml_env *env, gbml_column_plan *plan, const char *what)
{
	const gbml_feature_schema *schema = gbml_column_plan_schema(plan);
	int64	  **counts = gbml_column_plan_category_counts(plan);
	gbml_strbuf req;

	for (int s = 0; s < ss->n; s++)
		GBML_CHECK(env, gbml_onehot_counts_add(schema, ss->hello[s], ss->hello_len[s], (int64_t *const *) counts,
											   psprintf("shard \"%s\"", ss->shards[s].server), env), what);
	gbml_sb_init(&req, env);
	gbml_onehot_counts_of_schema(schema, &req);
	GBML_CHECK(env, gbml_sb_status(&req), what);
	for (int s = 0; s < ss->n; s++)
		send_step(&ss->shards[s], (const uint8_t *) req.data, req.len);
	GBML_CHECK(env, wait_shards(ss, env), what);
	gbml_sb_free(&req);
	for (int s = 0; s < ss->n; s++)
	{
		GBML_CHECK(env, shard_bytea(&ss->shards[s], env, &ss->hello[s], &ss->hello_len[s]), what);
		PQclear(ss->shards[s].hello);
		ss->shards[s].hello = ss->shards[s].result;
		ss->shards[s].result = NULL;
	}
}

/*
 * Every shard's training state opened (gbml._shard_open; with the union's
 * category counts first where it asks for them), its hello kept; the
 * engine's link set up.
 */
static void
start_shards(gbml_shard_set *ss, gbml_env *env, const char *algorithm, const char *params_json,
			 gbml_column_plan *plan, const char *what)
{
	Oid			types[3] = {TEXTOID, TEXTOID, JSONBOID};
	int			formats[3] = {0, 0, 0},
				counted = 0;

	for (int s = 0; s < ss->n; s++)
	{
		const char *values[3] = {ss->shards[s].remote, algorithm, params_json};

		send_shard(&ss->shards[s], "SELECT gbml._shard_open($1, $2, $3)", 3, types, values, NULL, formats);
	}
	GBML_CHECK(env, wait_shards(ss, env), what);
	ss->hello = palloc0(sizeof(uint8_t *) * ss->n);
	ss->hello_len = palloc0(sizeof(size_t) * ss->n);
	for (int s = 0; s < ss->n; s++)
	{
		GBML_CHECK(env, shard_bytea(&ss->shards[s], env, &ss->hello[s], &ss->hello_len[s]), what);
		/* the hello stays with its result: the next query on this shard would free it */
		ss->shards[s].hello = ss->shards[s].result;
		ss->shards[s].result = NULL;
		counted += gbml_onehot_counts_is(ss->hello[s], ss->hello_len[s]);
	}
	if (counted > 0 && (counted < ss->n || plan == NULL))
		ereport(ERROR, (errmsg("%s: %d of %d shards answered with category counts", what, counted, ss->n)));
	if (counted > 0)
		exchange_counts(ss, env, plan, what);
	ss->link.n_shards = ss->n;
	ss->link.ctx = ss;
	ss->link.name = link_name;
	ss->link.round_trip = link_round_trip;
	ss->link.hello = ss->hello;
	ss->link.hello_len = ss->hello_len;
}

/* ------------------------------------------------------------------ */
/* Training                                                            */
/* ------------------------------------------------------------------ */

/*
 * What the coordinator's probe read of the schema's columns, as the shards
 * take it ("_columns": each categorical column's union of values, each
 * array column's length), so that no shard scans its partition for them.
 * Given always, if empty: a shard then refuses a column that is
 * categorical or an array there but not here (a remote column of another
 * type than the foreign table's).
 */
static void
append_given_columns(StringInfo out, const gbml_feature_schema *schema)
{
	bool		any = false;

	appendStringInfoString(out, ", \"_columns\": {");
	for (int j = 0; j < schema->n_features; j++)
	{
		const gbml_feature_def *f = &schema->features[j];
		int			width = 0;

		if (f->kind != GBML_FEATURE_CATEGORICAL && f->element != 1)
			continue;			/* a number, or an array's later element */
		if (any)
			appendStringInfoString(out, ", ");
		escape_json(out, f->column);
		any = true;
		if (f->element == 1)
		{
			while (j + width < schema->n_features && schema->features[j + width].element == width + 1 &&
				   strcmp(schema->features[j + width].column, f->column) == 0)
				width++;
			appendStringInfo(out, ": %d", width);
			continue;
		}
		appendStringInfoString(out, ": [");
		for (int c = 0; c < f->n_categories; c++)
		{
			if (c > 0)
				appendStringInfoString(out, ", ");
			escape_json(out, f->categories[c]);
		}
		appendStringInfoString(out, "]");
	}
	appendStringInfoString(out, "}");
}

/*
 * The params the shards get: the caller's, with the feature columns named
 * in the coordinator's order (each array column once, no exclusions), what its probe read
 * of their categories and array lengths, and with an eval set of the
 * coordinator's own (eval_source) no eval_fraction (one server ignores it
 * then too).
 */
static char *
shard_params(Jsonb *params, const gbml_feature_schema *schema, bool eval_here)
{
	Jsonb	   *out = params;

	if (schema != NULL || eval_here)
	{
		StringInfoData cols;
		Datum		named;

		initStringInfo(&cols);
		appendStringInfoString(&cols, eval_here ? "{\"eval_fraction\": 0" : "{");
		if (schema != NULL)
		{
			bool		any = false;

			appendStringInfoString(&cols, eval_here ? ", \"feature_columns\": [" : "\"feature_columns\": [");
			for (int j = 0; j < schema->n_features; j++)
			{
				if (schema->features[j].element > 1)
					continue;	/* an array column's later elements */
				if (any)
					appendStringInfoString(&cols, ", ");
				escape_json(&cols, schema->features[j].column);
				any = true;
			}
			/* the features are named: the caller's exclusions, made here, are not the shards' to check */
			appendStringInfoString(&cols, "], \"exclude_columns\": []");
			append_given_columns(&cols, schema);
		}
		appendStringInfoString(&cols, "}");
		named = DirectFunctionCall1(jsonb_in, CStringGetDatum(cols.data));
		/* jsonb's || : the right side's key replaces one the caller gave */
		out = DatumGetJsonbP(params ? DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(params), named) : named);
	}
	return out ? JsonbToCString(NULL, &out->root, VARSIZE(out)) : pstrdup("{}");
}

/*
 * An eval set on this server, empty: in the current (the training's)
 * context, guarded (its helper thread and files go with the context), its
 * rows to temporary files past the budget as any training's.
 */
static gbml_dataset *
new_eval_here(gbml_env *env, gbml_parsed_params *pp)
{
	gbml_dataset *eval = palloc0(sizeof(gbml_dataset));

	gbml_dataset_init(eval, (gbml_input_flags(pp) & GBML_INPUT_MISSING) != 0);
	gbml_dataset_guard(CurrentMemoryContext, eval);
	gbml_plan_spill(pp->algo, env, eval);
	return eval;
}

/*
 * The eval source's rows, read on this server (through the training
 * source's column plan, or its features array): the coordinator scores them
 * itself.
 */
static gbml_dataset *
read_eval_here(gbml_env *env, gbml_parsed_params *pp, gbml_column_plan *plan)
{
	MemoryContext here = CurrentMemoryContext;
	gbml_dataset *eval = new_eval_here(env, pp);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	gbml_read_source(env, pp, pp->common.eval_source, eval, gbml_input_flags(pp), plan, NULL,
					 "gbml.train (eval_source)");
	SPI_finish();
	MemoryContextSwitchTo(here);
	if (eval->n_rows == 0)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA), errmsg("gbml.train: eval_source returned no rows"),
						errhint("An eval set needs rows; leave eval_source out to train without one.")));
	return eval;
}

/*
 * The rows the shards held out for eval_fraction, gathered here (K-Means and
 * the linear models score them on the coordinator, as an eval_source).
 */
static gbml_dataset *
gather_eval_here(gbml_env *env, gbml_parsed_params *pp, const gbml_shard_link *link,
				 const gbml_feature_schema *schema, const char *what)
{
	gbml_dataset *eval = new_eval_here(env, pp);

	/* as one server's split: the training rows' schema, a NULL category a NaN */
	eval->schema = schema;
	if (gbml_schema_n_categorical(schema) > 0)
		eval->allow_missing = true;
	GBML_CHECK(env, gbml_shards_gather_eval(link, pp->algo->shard->hello_magic, pp->algo->name, eval, env), what);
	gbml_dataset_finish_appends(eval, env);
	return eval->n_rows > 0 ? eval : NULL;
}

bytea *
gbml_shards_train(gbml_env *env, gbml_parsed_params *pp, gbml_shard_set *ss, Jsonb *params, const char *what)
{
	const gbml_common_params *cp = &pp->common;
	Oid			relid = ss->relid;
	Relation	rel;
	TupleDesc	td;
	/* set before PG_TRY, or in it and read after: volatile across its longjmp */
	const gbml_feature_schema *volatile schema = NULL;
	gbml_column_plan *volatile plan = NULL;
	gbml_dataset *ds,
			   *volatile eval = NULL;
	bytea	   *volatile model = NULL;

	if (pp->algo->shard == NULL)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: %s cannot train on a table sharded across servers yet (boost, kmeans and saga can)", what,
							   pp->algo->name)));
	if ((cp->eval_source && !pp->algo->shard->takes_eval_source) ||
		(!cp->eval_source && cp->eval_fraction > 0 && !pp->algo->shard->takes_eval_split))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("%s: %s is not supported on a table sharded across servers for %s", what,
							   cp->eval_source ? "eval_source" : "eval_fraction", pp->algo->name),
						errhint("Boosting takes eval_source and eval_fraction across servers.")));
	/* the caller reads the table: the shards then read it as the user mappings say */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
	rel = relation_open(relid, AccessShareLock);
	td = CreateTupleDescCopy(RelationGetDescr(rel));
	relation_close(rel, AccessShareLock);
	if (cp->feature_columns.n > 0 || gbml_attno(td, cp->features_column) == 0)
		plan = gbml_column_plan_for_shards(cp, td, pp->algo->shard->takes_categorical, what);

	ds = palloc0(sizeof(gbml_dataset));
	gbml_dataset_init(ds, false);
	PG_TRY();
	{
		connect_shards(ss, env, what);
		if (plan)
		{
			/* the union's categories and array lengths, from the snapshot the shards then train on */
			probe_shards(ss, env, plan, what);
			schema = gbml_column_plan_schema(plan);
		}
		/* an eval set of its own: read here, before any shard is asked to work */
		if (cp->eval_source)
			eval = read_eval_here(env, pp, plan);
		start_shards(ss, env, pp->algo->name, shard_params(params, schema, eval != NULL), plan, what);
		GBML_CHECK(env, gbml_shards_describe(&ss->link, pp->algo->shard->hello_magic, env, &ds->n_rows, &ds->n_features), what);
		if (ds->n_rows == 0)
			ereport(ERROR, (errcode(ERRCODE_NO_DATA), errmsg("%s: the shards of \"%s\" hold no rows", what, ss->source)));
		if (!cp->eval_source && cp->eval_fraction > 0 && pp->algo->shard->gathers_eval_split)
			eval = gather_eval_here(env, pp, &ss->link, schema, what);
		ds->shards = &ss->link;
		ds->schema = schema;
		/* the shards may train on their rows one-hot encoded (wider): the coordinator's dataset is the raw rows' */
		if (schema && ds->n_features != schema->n_features &&
			!(pp->algo->shard->counts_categories && gbml_schema_n_categorical(schema) > 0))
			ereport(ERROR, (errmsg("%s: the shards hold rows of %d features, the columns give %d", what,
								   ds->n_features, schema->n_features)));
		if (schema)
			ds->n_features = schema->n_features;
		model = gbml_train_to_bytea(env, pp, ds, eval, what);
	}
	PG_FINALLY();
	{
		close_shards(ss);
	}
	PG_END_TRY();
	return model;
}
