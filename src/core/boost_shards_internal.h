/*
 * boost_shards_internal.h — the coordinator's state of a boosting training
 * across servers, shared by its row side and border sample
 * (boost_shards.c) and its categorical step (boost_shards_cat.c).
 */
#ifndef GBML_BOOST_SHARDS_INTERNAL_H
#define GBML_BOOST_SHARDS_INTERNAL_H

#include "boost_internal.h"

typedef struct boost_shards
{
	gbml_shard_channel ch;
	int64_t		pending;		/* bs_pending: what the next prediction-reading request carries */
	double		base;
	boost_grad_max gm;			/* the open tree's maxima over every shard */
	int64_t		tree_bytes_before;	/* the traffic's bytes when the open tree began */
	int64_t    *n_groups;		/* per shard: its queries (the hello's) */
	int64_t   **group_union;	/* per shard: its queries' indices among the union's (with group ids) */
	bool		queries_span;	/* some query has rows on two or more shards */
	/* the border sample: per shard its rows' local positions, ascending */
	int64_t   **sample_local;
	int64_t    *sample_count;
	int64_t    *sample_pos;		/* the sample's global positions, ascending */
	int64_t		sample_m;
	int64_t		sample_next;	/* the merge's next sample position to find */
	/*
	 * Categorical inputs: per shard, each of its rows' position in the
	 * union's training order (without query ids the canonical order, from
	 * the merge that drew the sample; with them by query id, then
	 * canonical: from the queries' sizes when every query is whole on a
	 * shard, else from the grouped merge); boost_shards_categories frees it.
	 */
	int64_t   **global_of;
} boost_shards;

/* B->global_of allocated, or freed (boost_shards_cat.c). */
int			boost_shards_alloc_positions(trainer *T);
void		boost_shards_free_positions(trainer *T);

#endif
