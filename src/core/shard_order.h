/*
 * shard_order.h — the union's canonical row order across shards (issue
 * 14), for what a trainer draws by canonical position (boosting's border
 * sample).  Each shard's rows are in its canonical order, sorted by
 * content hash (gbml_dataset_canonicalize); the union's is their merge by
 * hash.  The shard side hashes its rows and answers pages of hashes; the
 * coordinator merges the pages, calling a visitor with each row's shard,
 * local index and global index.  Equal hashes on two shards are either
 * the same row (duplicates: ordered by shard, which changes nothing) or
 * two different rows (odds about n^2 / 2^64): those are refused, since one
 * server would order them by content, which the hashes cannot tell.
 */
#ifndef GBML_SHARD_ORDER_H
#define GBML_SHARD_ORDER_H

#include "shard_link.h"

/*
 * Rows of a page of hashes; the unit tests' pages are small, so that their
 * few thousand rows take many pages.
 */
#ifdef GBML_UNIT_TEST
#define GBML_SHARD_ORDER_PAGE ((int64_t) 700)
#else
#define GBML_SHARD_ORDER_PAGE ((int64_t) 1 << 20)
#endif

/* A second hash of a row's content, independent of the canonical one (duplicates vs collisions). */
uint64_t	gbml_shard_content_hash(const float *x, int d, float label, int64_t group, float weight);

/*
 * A shard's side: every row's (canonical hash, content hash), in canonical
 * order; or (grouped) every row's (group id, canonical hash, content hash)
 * in the training order with group ids: by group id, then canonical.
 */
typedef struct gbml_shard_hashes
{
	int64_t		n;
	int			words;			/* a row's: 2, or 3 grouped */
	uint64_t   *hash;			/* words x n */
} gbml_shard_hashes;

/* The hashes of ds's rows (in memory or in a chunk store). */
int			gbml_shard_hashes_build(gbml_shard_hashes *h, const gbml_dataset *ds, gbml_env *env);
/* ... grouped: the group id (as an unsigned key in the signed order) first, in the training order with groups. */
int			gbml_shard_hashes_build_grouped(gbml_shard_hashes *h, const gbml_dataset *ds, gbml_env *env);
/*
 * The answer to a request's (offset, count): count, then count rows' hashes (h->words each);
 * after the hashes were freed (the order whole), an empty page at the end still gets count 0.
 */
void		gbml_shard_hashes_page(const gbml_shard_hashes *h, gbml_msg_reader *r, gbml_strbuf *reply);
void		gbml_shard_hashes_free(gbml_shard_hashes *h, gbml_env *env);

/*
 * The coordinator's merge: op_hashes is the shards' request code for a
 * page (followed by offset and count); visit(arg, shard, local, global) is
 * called for every row in global order, and may answer false to have
 * flush(arg) run first (a page of its own is full; the row comes again
 * after it); flush, when not NULL, also runs after every batch the pages
 * in hand allowed.  Returns an error naming the two shards at a collision.
 */
typedef bool (*gbml_shard_order_visit) (void *arg, int shard, int64_t local, int64_t global);
typedef int (*gbml_shard_order_flush) (void *arg);
int			gbml_shard_merge_order(gbml_shard_channel *ch, int64_t n_global, int64_t op_hashes,
								   gbml_shard_order_visit visit, gbml_shard_order_flush flush, void *arg);

/*
 * The union's order sent back: every shard gets its rows' global indices
 * (op_ranks: i64 n_global, i64 offset, i64 count, i64 x count), in pages,
 * while the merge runs; also_visit (or NULL) sees every row as the merge's
 * visitor does.
 */
int			gbml_shard_send_ranks(gbml_shard_channel *ch, int64_t n_global, int64_t op_hashes, int64_t op_ranks,
								  void (*also_visit) (void *arg, int shard, int64_t local, int64_t global),
								  void *arg);

/*
 * ... in the union's training order with group ids (by group id, then
 * canonical: a query may span shards): the shards answer op_grouped_hashes
 * with grouped pages, and each gets its rows' indices in its own training
 * order (ascending).
 */
int			gbml_shard_send_grouped_ranks(gbml_shard_channel *ch, int64_t n_global, int64_t op_grouped_hashes,
										  int64_t op_ranks,
										  void (*also_visit) (void *arg, int shard, int64_t local, int64_t global),
										  void *arg);

/* The union's training order with group ids merged (the grouped pages), every row to visit; nothing sent back. */
int			gbml_shard_merge_grouped_order(gbml_shard_channel *ch, int64_t n_global, int64_t op_grouped_hashes,
										   gbml_shard_order_visit visit, gbml_shard_order_flush flush, void *arg);

/* A shard's side: its rows' global indices, ascending, as the pages arrive. */
typedef struct gbml_shard_ranks
{
	int64_t		n;				/* this shard's rows */
	int64_t		n_global;
	int64_t		ranked;			/* rows whose index has arrived */
	int64_t    *rank;			/* n, once the first page came */
} gbml_shard_ranks;

/*
 * One page (the request after its op code): pages in order, ascending
 * within and across them, below the union's row count (the same in every
 * page).  A damaged page drops the whole order (r->bad); *complete when
 * every row has its index.
 */
int			gbml_shard_ranks_receive(gbml_shard_ranks *o, int64_t n, gbml_msg_reader *r, gbml_env *env,
									 bool *complete);
/*
 * Whether *r is an empty page after the order was whole (read then): the
 * coordinator sends every shard a page each round, and a shard whose rows
 * were all placed gets empty ones while the others' pages go on.
 */
bool		gbml_shard_ranks_trailing_page(const gbml_shard_ranks *o, gbml_msg_reader *r);
/* The local row whose global index is g, or -1. */
int64_t		gbml_shard_ranks_local(const gbml_shard_ranks *o, int64_t g);
void		gbml_shard_ranks_free(gbml_shard_ranks *o, gbml_env *env);

#endif
