/*
 * rank_order.h — the one ranking order gbml uses for NDCG and the ranking
 * losses, and a bottom-up merge sort to build sorts on.
 *
 * The order: score descending, NaN scores last, ties by original position
 * (the stable sort LightGBM and XGBoost use), a total order on (key, index)
 * pairs.  metrics.c ranks with it; boost_loss.c sorts queries by it.
 */
#ifndef GBML_RANK_ORDER_H
#define GBML_RANK_ORDER_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct gbml_keyed
{
	double		key;
	int64_t		idx;
} gbml_keyed;

/* Is (sa, ia) ranked before (sb, ib)?  Score desc, NaN last, index asc. */
static inline bool
gbml_ranks_before(double sa, int64_t ia, double sb, int64_t ib)
{
	bool		na = isnan(sa),
				nb = isnan(sb);

	if (na != nb)
		return nb;
	if (!na && sa != sb)
		return sa > sb;
	return ia < ib;
}

static inline bool
gbml_keyed_before(const gbml_keyed *a, const gbml_keyed *b)
{
	return gbml_ranks_before(a->key, a->idx, b->key, b->idx);
}

/*
 * Defines `static void NAME(TYPE *a, TYPE *tmp, int64_t m, int64_t run)`:
 * merges a[0..m), already sorted in runs of `run` elements, bottom-up
 * through tmp (m elements) into one sorted run in a.  BEFORE(x, y) (two
 * TYPE values) says x goes strictly before y; the merge is branch-free
 * (the keys are usually random, a branch would mispredict) and stable.
 */
#define GBML_DEFINE_MERGE_RUNS(NAME, TYPE, BEFORE) \
static void \
NAME(TYPE *a, TYPE *tmp, int64_t m, int64_t run) \
{ \
	TYPE	   *src = a, \
			   *dst = tmp; \
 \
	for (int64_t w = run; w < m; w *= 2) \
	{ \
		for (int64_t lo = 0; lo < m; lo += 2 * w) \
		{ \
			int64_t		mid = lo + w < m ? lo + w : m, \
						hi = lo + 2 * w < m ? lo + 2 * w : m, \
						i = lo, \
						j = mid, \
						o = lo; \
 \
			while (i < mid && j < hi) \
			{ \
				TYPE		x = src[i], \
							y = src[j]; \
				bool		tj = BEFORE(y, x); \
 \
				dst[o++] = tj ? y : x; \
				j += tj; \
				i += !tj; \
			} \
			while (i < mid) \
				dst[o++] = src[i++]; \
			while (j < hi) \
				dst[o++] = src[j++]; \
		} \
		{ \
			TYPE	   *t_ = src; \
 \
			src = dst; \
			dst = t_; \
		} \
	} \
	if (src != a) \
		memcpy(a, src, sizeof(TYPE) * (size_t) m); \
}

#endif
