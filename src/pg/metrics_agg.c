/*
 * metrics_agg.c — evaluation aggregates gbml.ndcg(score, label, k),
 * gbml.auc(score, label) and gbml.rmse(score, label): the pairs are
 * collected in the aggregate's memory context (parallel safe through
 * combine/serialize), then src/core/metrics.c computes the figure.
 *
 * NDCG is per query: use GROUP BY query id, then avg() over the groups.
 * Rows are sorted by (score desc, label asc) first, so tied scores rank
 * worst-first and the figure never depends on row order.
 */
#include "glue.h"

#include <math.h>

#include "metrics.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(gbml_metric_trans);
PG_FUNCTION_INFO_V1(gbml_metric_combine);
PG_FUNCTION_INFO_V1(gbml_metric_serialize);
PG_FUNCTION_INFO_V1(gbml_metric_deserialize);
PG_FUNCTION_INFO_V1(gbml_ndcg_final);
PG_FUNCTION_INFO_V1(gbml_auc_final);
PG_FUNCTION_INFO_V1(gbml_rmse_final);

typedef struct metric_pair
{
	double		score;
	float		label;
} metric_pair;

typedef struct metric_state
{
	int64		n;
	int64		cap;
	int32		k;				/* ndcg cutoff; 0 = all */
	metric_pair *pairs;
} metric_state;

static metric_state *
state_new(MemoryContext aggctx, int32 k)
{
	metric_state *st = MemoryContextAllocZero(aggctx, sizeof(metric_state));

	st->k = k;
	st->cap = 64;
	st->pairs = MemoryContextAlloc(aggctx, sizeof(metric_pair) * st->cap);
	return st;
}

static void
state_reserve(metric_state *st, int64 extra)
{
	if (st->n + extra > st->cap)
	{
		while (st->n + extra > st->cap)
			st->cap *= 2;
		st->pairs = repalloc_huge(st->pairs, sizeof(metric_pair) * st->cap);
	}
}

/* (score, label [, k]) — NULL scores or labels are skipped, like other aggregates. */
Datum
gbml_metric_trans(PG_FUNCTION_ARGS)
{
	MemoryContext aggctx;
	metric_state *st;
	/* gbml.ndcg's k (NULL: every document), one per query */
	int32		k = PG_NARGS() > 3 && !PG_ARGISNULL(3) ? PG_GETARG_INT32(3) : 0;

	if (!AggCheckCallContext(fcinfo, &aggctx))
		elog(ERROR, "gbml metric aggregate called in a non-aggregate context");
	st = PG_ARGISNULL(0) ? NULL : (metric_state *) PG_GETARG_POINTER(0);
	if (st == NULL)
	{
		if (PG_NARGS() > 3 && !PG_ARGISNULL(3) && k < 1)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("gbml.ndcg: k must be at least 1, got %d", k)));
		st = state_new(aggctx, k);
	}
	else if (k != st->k)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("gbml.ndcg: k differs between rows of one query (%d, then %d)", st->k, k)));
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_POINTER(st);
	state_reserve(st, 1);
	st->pairs[st->n].score = PG_GETARG_FLOAT8(1);
	st->pairs[st->n].label = PG_GETARG_FLOAT4(2);
	if (isnan(st->pairs[st->n].score) || !isfinite(st->pairs[st->n].label))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("gbml metric: %s", isnan(st->pairs[st->n].score) ? "a score is NaN"
							   : "a label is NaN or infinite")));
	st->n++;
	PG_RETURN_POINTER(st);
}

Datum
gbml_metric_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggctx;
	metric_state *a = PG_ARGISNULL(0) ? NULL : (metric_state *) PG_GETARG_POINTER(0);
	metric_state *b = PG_ARGISNULL(1) ? NULL : (metric_state *) PG_GETARG_POINTER(1);

	if (!AggCheckCallContext(fcinfo, &aggctx))
		elog(ERROR, "gbml metric combine called in a non-aggregate context");
	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (a == NULL)
	{
		a = state_new(aggctx, b->k);
	}
	if (a->k != b->k)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("gbml.ndcg: k differs between rows of one query (%d, then %d)", a->k, b->k)));
	state_reserve(a, b->n);
	memcpy(a->pairs + a->n, b->pairs, sizeof(metric_pair) * b->n);
	a->n += b->n;
	PG_RETURN_POINTER(a);
}

Datum
gbml_metric_serialize(PG_FUNCTION_ARGS)
{
	metric_state *st = (metric_state *) PG_GETARG_POINTER(0);
	Size		len = sizeof(int64) + sizeof(int32) + sizeof(metric_pair) * st->n;
	bytea	   *out;

	if (len > MaxAllocSize - VARHDRSZ)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("gbml metric: partial state too large for parallel query"),
						errhint("SET max_parallel_workers_per_gather = 0.")));
	out = palloc(VARHDRSZ + len);
	SET_VARSIZE(out, VARHDRSZ + len);
	memcpy(VARDATA(out), &st->n, sizeof(int64));
	memcpy(VARDATA(out) + sizeof(int64), &st->k, sizeof(int32));
	memcpy(VARDATA(out) + sizeof(int64) + sizeof(int32), st->pairs, sizeof(metric_pair) * st->n);
	PG_RETURN_BYTEA_P(out);
}

Datum
gbml_metric_deserialize(PG_FUNCTION_ARGS)
{
	MemoryContext aggctx;
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	const char *p = VARDATA_ANY(in);
	Size		len = VARSIZE_ANY_EXHDR(in);
	int64		n;
	int32		k;
	metric_state *st;

	if (!AggCheckCallContext(fcinfo, &aggctx))
		elog(ERROR, "gbml metric deserialize called in a non-aggregate context");
	if (len < sizeof(int64) + sizeof(int32))
		elog(ERROR, "gbml metric: corrupt partial state");
	memcpy(&n, p, sizeof(int64));
	memcpy(&k, p + sizeof(int64), sizeof(int32));
	if (n < 0 || (Size) n != (len - sizeof(int64) - sizeof(int32)) / sizeof(metric_pair))
		elog(ERROR, "gbml metric: corrupt partial state");
	st = state_new(aggctx, k);
	state_reserve(st, n);
	memcpy(st->pairs, p + sizeof(int64) + sizeof(int32), sizeof(metric_pair) * n);
	st->n = n;
	PG_RETURN_POINTER(st);
}

static int
cmp_score_desc_label_asc(const void *a, const void *b)
{
	const metric_pair *x = a;
	const metric_pair *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->label != y->label)
		return x->label < y->label ? -1 : 1;
	return 0;
}

/*
 * The state a final function works on, or NULL when no row came (the
 * metric is then NULL).
 */
static metric_state *
final_state(FunctionCallInfo fcinfo)
{
	metric_state *st = PG_ARGISNULL(0) ? NULL : (metric_state *) PG_GETARG_POINTER(0);

	return st != NULL && st->n > 0 ? st : NULL;
}

/*
 * Splits the pairs into arrays for src/core/metrics.c, sorted (score
 * descending, label ascending) when the metric's value depends on the order
 * they come in: then any plan gives the same bits.
 */
static void
unpack(metric_state *st, bool sort, double **score, float **label)
{
	if (sort)
		qsort(st->pairs, st->n, sizeof(metric_pair), cmp_score_desc_label_asc);
	*score = palloc_extended(sizeof(double) * Max(st->n, 1), MCXT_ALLOC_HUGE);
	*label = palloc_extended(sizeof(float) * Max(st->n, 1), MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < st->n; i++)
	{
		(*score)[i] = st->pairs[i].score;
		(*label)[i] = st->pairs[i].label;
	}
}

Datum
gbml_ndcg_final(PG_FUNCTION_ARGS)
{
	metric_state *st = final_state(fcinfo);
	double	   *score;
	float	   *label;

	if (st == NULL)
		PG_RETURN_NULL();
	for (int64 i = 0; i < st->n; i++)
		if (!(st->pairs[i].label >= 0 && st->pairs[i].label <= GBML_NDCG_MAX_LABEL))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("gbml.ndcg: relevance labels must be in [0, %d] (the gain 2^label - 1), got %g",
								   GBML_NDCG_MAX_LABEL, st->pairs[i].label)));
	unpack(st, true, &score, &label);
	{
		gbml_env	env;

		gbml_env_bind(&env, CurrentMemoryContext, "gbml.ndcg");
		PG_RETURN_FLOAT8(gbml_ndcg_at_k_env(&env, score, label, st->n, st->k));
	}
}

Datum
gbml_auc_final(PG_FUNCTION_ARGS)
{
	metric_state *st = final_state(fcinfo);
	double	   *score;
	float	   *label;
	double		auc;

	if (st == NULL)
		PG_RETURN_NULL();
	/* gbml_auc_env sorts its own copy: the input order does not matter */
	unpack(st, false, &score, &label);
	{
		gbml_env	env;

		gbml_env_bind(&env, CurrentMemoryContext, "gbml.auc");
		auc = gbml_auc_env(&env, score, label, NULL, st->n);
	}
	if (isnan(auc))
		PG_RETURN_NULL();		/* one class only: AUC is undefined */
	PG_RETURN_FLOAT8(auc);
}

Datum
gbml_rmse_final(PG_FUNCTION_ARGS)
{
	metric_state *st = final_state(fcinfo);
	double	   *score;
	float	   *label;

	if (st == NULL)
		PG_RETURN_NULL();
	unpack(st, true, &score, &label);	/* the sum's order */
	PG_RETURN_FLOAT8(gbml_rmse(score, label, NULL, st->n));
}
