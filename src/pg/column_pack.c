/*
 * column_pack.c — gbml._column_pack, how a row of more than 98 columns
 * reaches the columns forms of the row scoring functions (row_scoring.c).
 * A function takes at most 100 arguments, so the planner rewrite passes
 * such a row as gbml._column_pack(c1, ..., c100) calls nested in the
 * scoring call.
 *
 * A pack does not copy its columns: the executor has already evaluated
 * them into the pack call's own argument array, where they stay until the
 * call is evaluated again (the next row).  The pack returns a ticket, a
 * small bytea naming its call site and the call's serial number, and the
 * scoring function reads the columns from the site's arguments after
 * checking that the ticket is its own argument's current call.  So a row
 * costs a ticket, not a copy of every column (2 copies and about 0.5 us a
 * row at 100 columns before), and a wide value in a column the model does
 * not use is never touched.
 *
 * No memory address is ever in a ticket: a site is found in this backend's
 * table of live sites by index and a never-reused id, the table entry is
 * removed when the site's memory goes (a reset callback), and the reader
 * checks that the site is the very expression node of its argument, so a
 * stale, copied, materialized or hand-made ticket is an ERROR, not a
 * misread.  _column_pack stays IMMUTABLE (extension 0.5.0's declaration):
 * what the scoring call computes from the packs is a function of the
 * columns alone; a folded constant ticket would name a site that is gone.
 */
#include "glue.h"

#include "nodes/primnodes.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(gbml_column_pack);

/* A live pack call site: the executor's argument array of one _column_pack expression. */
typedef struct pack_site
{
	uint64		id;				/* never reused in this backend; 0: a free entry */
	uint64		serial;			/* the site's calls so far: its arguments hold call `serial`'s columns */
	FunctionCallInfo fcinfo;	/* where they are */
	Node	   *expr;			/* the _column_pack expression node the site evaluates */
} pack_site;

/* What a pack returns. */
typedef struct pack_ticket
{
	int32		vl_len_;
	int32		site;			/* the site's index in `sites` */
	uint64		id;				/* and its id */
	uint64		serial;			/* the call that made the ticket */
} pack_ticket;

/* Per call site (fn_extra): its entry, and the callback that frees it with the site's memory. */
typedef struct pack_state
{
	int			site;
	MemoryContextCallback free_site;
} pack_state;

static pack_site *sites;		/* in TopMemoryContext */
static int	n_sites;
static uint64 last_id;

static void
free_site(void *arg)
{
	pack_state *st = arg;

	sites[st->site].id = 0;
	sites[st->site].fcinfo = NULL;
	sites[st->site].expr = NULL;
}

/* A free entry for the site of fcinfo, freed when the site's memory goes. */
static pack_state *
register_site(FunctionCallInfo fcinfo)
{
	pack_state *st = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(pack_state));
	int			i = 0;

	while (i < n_sites && sites[i].id != 0)
		i++;
	if (i == n_sites)
	{
		int			grown = n_sites == 0 ? 8 : 2 * n_sites;

		sites = sites == NULL ? MemoryContextAllocZero(TopMemoryContext, sizeof(pack_site) * grown)
			: repalloc(sites, sizeof(pack_site) * grown);
		memset(sites + n_sites, 0, sizeof(pack_site) * (grown - n_sites));
		n_sites = grown;
	}
	sites[i].id = ++last_id;
	sites[i].serial = 0;
	sites[i].fcinfo = fcinfo;
	sites[i].expr = fcinfo->flinfo->fn_expr;
	st->site = i;
	st->free_site.func = free_site;
	st->free_site.arg = st;
	MemoryContextRegisterResetCallback(fcinfo->flinfo->fn_mcxt, &st->free_site);
	fcinfo->flinfo->fn_extra = st;
	return st;
}

Datum
gbml_column_pack(PG_FUNCTION_ARGS)
{
	pack_state *st = fcinfo->flinfo->fn_extra;
	pack_site  *site;
	pack_ticket *t;

	if (st == NULL)
		st = register_site(fcinfo);
	site = &sites[st->site];
	/* the executor evaluates a call site's arguments into one array, which the tickets point readers to */
	if (site->fcinfo != fcinfo)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("gbml._column_pack: called through another argument array than its first call's")));
	site->serial++;
	t = palloc(sizeof(pack_ticket));
	SET_VARSIZE(t, sizeof(pack_ticket));
	t->site = st->site;
	t->id = site->id;
	t->serial = site->serial;
	PG_RETURN_BYTEA_P((bytea *) t);
}

static void
not_a_pack(const char *fname, int arg, const char *why)
{
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("%s: argument %d is not a current gbml._column_pack result: %s", fname, arg + 1, why),
					errhint("Pass gbml._column_pack(...) calls directly as the arguments; "
							"their results cannot be stored or passed on.")));
}

/*
 * The n columns of the calling function's argument `arg`, a ticket of its
 * own _column_pack argument expression made for this row, read in place.
 */
const NullableDatum *
gbml_column_pack_args(FunctionCallInfo fcinfo, int arg, int n, const char *fname)
{
	const pack_ticket *t;
	const pack_site *site;
	List	   *args;

	if (PG_ARGISNULL(arg))
		not_a_pack(fname, arg, "it is NULL");
	t = (const pack_ticket *) PG_GETARG_BYTEA_P(arg);
	if (VARSIZE(t) != sizeof(pack_ticket))
		not_a_pack(fname, arg, "it is not a ticket");
	if (t->site < 0 || t->site >= n_sites || sites[t->site].id != t->id || t->id == 0)
		not_a_pack(fname, arg, "its call is over");
	site = &sites[t->site];
	args = fcinfo->flinfo->fn_expr != NULL && IsA(fcinfo->flinfo->fn_expr, FuncExpr)
		? ((FuncExpr *) fcinfo->flinfo->fn_expr)->args : NIL;
	if (arg >= list_length(args) || site->expr != list_nth(args, arg))
		not_a_pack(fname, arg, "it was made by another expression");
	if (site->serial != t->serial)
		not_a_pack(fname, arg, "it is from another row");
	if (site->fcinfo->nargs != n)
		not_a_pack(fname, arg, "its column count changed");
	return site->fcinfo->args;
}
