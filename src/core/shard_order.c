/*
 * shard_order.c — the union's canonical order across shards
 * (shard_order.h): the shards' row hashes, and the coordinator's merge of
 * their pages.
 */
#include "shard_order.h"
#include "chunk_prefetch.h"
#include "dataset_internal.h"

#include <stdlib.h>
#include <string.h>

uint64_t
gbml_shard_content_hash(const float *x, int d, float label, int64_t group, float weight)
{
	uint64_t	h = 0xcbf29ce484222325ULL;
	const uint8_t *p = (const uint8_t *) x;
	uint32_t	lw,
				ww;

	for (size_t i = 0; i < (size_t) d * sizeof(float); i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	h = (h ^ (uint64_t) group) * 0x100000001b3ULL;
	memcpy(&lw, &label, 4);
	memcpy(&ww, &weight, 4);
	h = (h ^ lw) * 0x100000001b3ULL;
	h = (h ^ ww) * 0x100000001b3ULL;
	return h ^ (h >> 31);
}

int
gbml_shard_hashes_build(gbml_shard_hashes *h, const gbml_dataset *ds, gbml_env *env)
{
	gbml_chunk_prefetch *pf;
	const float *x;
	int64_t		rows,
				at = 0;
	int			c,
				d = ds->n_features,
				rc;

	h->n = ds->n_rows;
	h->words = 2;
	if ((rc = gbml_budget_check(env, (size_t) (h->n > 0 ? h->n : 1) * 2 * sizeof(uint64_t),
								"the shard's row hashes for the union's order (16 bytes a row for %lld rows)",
								(long long) h->n)) != GBML_OK)
		return rc;
	h->hash = gbml_alloc_array(env, (size_t) (h->n > 0 ? h->n : 1) * 2, sizeof(uint64_t));
	if (h->hash == NULL)
		return env->error_code;
	if ((pf = gbml_chunk_prefetch_open(ds, env)) == NULL)
		return env->error_code;
	while ((rc = gbml_chunk_prefetch_next(pf, &x, &rows, &c)) > 0)
	{
		const gbml_chunk *ch = ds->chunks[c];
		uint64_t   *out = h->hash + 2 * at;

#pragma omp parallel for schedule(static) num_threads(env->threads)
		for (int64_t r = 0; r < rows; r++)
		{
			const float *xr = x + (size_t) r * (size_t) d;

			out[2 * r] = gbml_ds_hash_row(xr, (size_t) d, ch->label[r], ch->group[r], ch->weight[r]);
			out[2 * r + 1] = gbml_shard_content_hash(xr, d, ch->label[r], ch->group[r], ch->weight[r]);
		}
		at += rows;
	}
	gbml_chunk_prefetch_close(pf);
	return rc < 0 ? rc : GBML_OK;
}

int
gbml_shard_hashes_build_grouped(gbml_shard_hashes *h, const gbml_dataset *ds, gbml_env *env)
{
	gbml_group_order_key *rows;
	uint64_t   *triples;
	int64_t		at = 0;
	int			rc;

	if ((rc = gbml_shard_hashes_build(h, ds, env)) != GBML_OK)
		return rc;
	/* beside the pairs: the rows' groups to sort and the triples they become */
	if ((rc = gbml_budget_check(env, (size_t) (h->n > 0 ? h->n : 1) * (sizeof(gbml_group_order_key) +
																		3 * sizeof(uint64_t)),
								"the shard's rows ordered by group id for the union's order (%zu bytes a row for %lld rows)",
								sizeof(gbml_group_order_key) + 3 * sizeof(uint64_t), (long long) h->n)) != GBML_OK)
	{
		gbml_shard_hashes_free(h, env);
		return rc;
	}
	rows = gbml_alloc_array(env, (size_t) (h->n > 0 ? h->n : 1), sizeof(gbml_group_order_key));
	triples = gbml_alloc_array(env, (size_t) (h->n > 0 ? h->n : 1) * 3, sizeof(uint64_t));
	if (rows == NULL || triples == NULL)
	{
		gbml_free(env, rows);
		gbml_free(env, triples);
		gbml_shard_hashes_free(h, env);
		return env->error_code;
	}
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, at++)
		{
			rows[at].group = ds->chunks[c]->group[r];
			rows[at].pos = at;
		}
	qsort(rows, (size_t) h->n, sizeof(gbml_group_order_key), gbml_group_order_cmp);
	for (int64_t i = 0; i < h->n; i++)
	{
		/* the group id as an unsigned key that orders as the signed id does */
		triples[3 * i] = (uint64_t) rows[i].group ^ ((uint64_t) 1 << 63);
		triples[3 * i + 1] = h->hash[2 * rows[i].pos];
		triples[3 * i + 2] = h->hash[2 * rows[i].pos + 1];
	}
	gbml_free(env, rows);
	gbml_free(env, h->hash);
	h->hash = triples;
	h->words = 3;
	return GBML_OK;
}

void
gbml_shard_hashes_page(const gbml_shard_hashes *h, gbml_msg_reader *r, gbml_strbuf *reply)
{
	int64_t		offset = gbml_msg_get_count(r, h->n),
				count = gbml_msg_get_count(r, GBML_SHARD_ORDER_PAGE);

	if (!r->bad && h->hash == NULL && offset == h->n && count == 0)
	{
		/* the order is whole: the merge's later rounds ask for empty pages while other shards' go on */
		gbml_msg_put_i64(reply, 0);
		return;
	}
	if (r->bad || h->hash == NULL)
	{
		r->bad = true;
		return;
	}
	if (count > h->n - offset)
		count = h->n - offset;
	gbml_msg_put_i64(reply, count);
	gbml_msg_put(reply, h->hash + (size_t) h->words * (size_t) offset, sizeof(uint64_t) * (size_t) h->words * (size_t) count);
}

void
gbml_shard_hashes_free(gbml_shard_hashes *h, gbml_env *env)
{
	gbml_free(env, h->hash);
	h->hash = NULL;
}

/*
 * The merge's state per shard: a page of its keys being read, `words` a
 * row: (hash, content hash), or with the group id first.
 */
typedef struct order_cursor
{
	int			words;
	int64_t		page;			/* rows a page (order_page_rows) */
	uint64_t   *hash;			/* page x words */
	int64_t		have;			/* rows in the page */
	int64_t		at;				/* the next row of the page */
	int64_t		fetched;		/* the shard's rows fetched so far */
} order_cursor;

/* The next page of hashes of every shard whose page is used up (an empty request for the others). */
static int
fetch_pages(gbml_shard_channel *ch, order_cursor *o, int64_t op_hashes)
{
	bool		any = false;
	int			rc;

	for (int s = 0; s < ch->n_shards; s++)
		any |= o[s].at == o[s].have && o[s].fetched < ch->n_rows[s];
	if (!any)
		return GBML_OK;
	for (int s = 0; s < ch->n_shards; s++)
	{
		bool		need = o[s].at == o[s].have && o[s].fetched < ch->n_rows[s];
		gbml_strbuf *m = gbml_shard_request_to(ch, s, op_hashes);

		gbml_msg_put_i64(m, o[s].fetched);
		gbml_msg_put_i64(m, need ? o[s].page : 0);
	}
	if ((rc = gbml_shard_send_each(ch)) != GBML_OK)
		return rc;
	for (int s = 0; s < ch->n_shards; s++)
	{
		gbml_msg_reader r;
		int64_t		count;

		if (!gbml_shard_reply(ch, s, &r))
			continue;
		count = gbml_msg_get_count(&r, o[s].page);
		if (o[s].at == o[s].have && o[s].fetched < ch->n_rows[s] && count == 0)
			r.bad = true;		/* a page it owes: without it the merge would wait forever */
		if (count > 0 && !r.bad)
		{
			gbml_msg_get(&r, o[s].hash, sizeof(uint64_t) * (size_t) o[s].words * (size_t) count);
			o[s].have = count;
			o[s].at = 0;
			o[s].fetched += count;
		}
		if ((rc = gbml_shard_reply_done(ch, s, &r)) != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

/*
 * Merges the pages by hash until a shard's page is used up while it has
 * more rows, or the visitor asks for a flush (*paused); returns false at a
 * collision of two different rows.  *g: the next global index.
 */
static bool
merge_pages(gbml_shard_channel *ch, order_cursor *o, int64_t n_global, int64_t *g,
			gbml_shard_order_visit visit, void *arg, int *collided, bool *paused)
{
	*paused = false;
	for (; *g < n_global; (*g)++)
	{
		int			best = -1;
		const uint64_t *b = NULL;	/* the best row's keys */

		for (int s = 0; s < ch->n_shards; s++)
		{
			int			w = o[s].words;
			const uint64_t *h = o[s].hash + (size_t) w * (size_t) o[s].at;
			int			order;

			if (o[s].at == o[s].have)
			{
				if (o[s].fetched < ch->n_rows[s])
					return true;	/* its next page first */
				continue;
			}
			if (best < 0)
			{
				best = s;
				b = h;
				continue;
			}
			/* ordered by every word but the last, the content hash, which tells a duplicate from a collision */
			order = w == 3 && h[0] != b[0] ? (h[0] < b[0] ? -1 : 1) : 0;
			if (order == 0)
				order = h[w - 2] == b[w - 2] ? 0 : h[w - 2] < b[w - 2] ? -1 : 1;
			if (order == 0 && h[w - 1] != b[w - 1])
			{
				collided[0] = best;
				collided[1] = s;
				return false;
			}
			if (order < 0)
			{
				best = s;
				b = h;
			}
		}
		if (best < 0)
			return true;		/* the shards hold fewer rows than promised: the caller stops */
		if (!visit(arg, best, o[best].fetched - o[best].have + o[best].at, *g))
		{
			*paused = true;
			return true;
		}
		o[best].at++;
	}
	return true;
}

/*
 * Rows of the merge's pages: at most GBML_SHARD_ORDER_PAGE (the shards'
 * limit), fewer for small shards or a small budget; each shard's page of
 * `words` keys a row, and with ranks its page of global indices.
 */
static int64_t
order_page_rows(const gbml_shard_channel *ch, int words, bool ranks)
{
	return gbml_shard_page_rows(ch, sizeof(uint64_t) * (size_t) (words + ranks) * (size_t) ch->n_shards,
								GBML_SHARD_ORDER_PAGE);
}

/* The merge of pages of `words` keys a row (2, or 3 with the group id first), `page` rows each. */
static int
merge_order(gbml_shard_channel *ch, int64_t n_global, int64_t op_hashes, int words, int64_t page,
			gbml_shard_order_visit visit, gbml_shard_order_flush flush, void *arg)
{
	gbml_env   *env = ch->env;
	const gbml_shard_link *link = ch->link;
	order_cursor *o = gbml_alloc0(env, sizeof(order_cursor) * ch->n_shards);
	int64_t		g = 0;
	int			collided[2],
				rc = GBML_OK;
	bool		paused = false;

	if (o == NULL)
	{
		rc = env->error_code;
		goto done;
	}
	for (int s = 0; s < ch->n_shards; s++)
	{
		o[s].words = words;
		o[s].page = page;
		if (ch->n_rows[s] > 0 &&
			(o[s].hash = gbml_alloc_array(env, (size_t) page * (size_t) words,
										  sizeof(uint64_t))) == NULL)
		{
			rc = env->error_code;
			goto done;
		}
	}
	while (rc == GBML_OK && g < n_global)
	{
		gbml_progress_info info = {"order", g, n_global, NULL, 0};
		int64_t		before = g;

		if ((rc = fetch_pages(ch, o, op_hashes)) != GBML_OK)
			break;
		if (!merge_pages(ch, o, n_global, &g, visit, arg, collided, &paused))
			rc = gbml_error(env, GBML_EINVAL,
							"%s: shards %s and %s hold two different rows with the same 64-bit hash, "
							"whose order one server would take from their content; the training cannot "
							"promise the single-server model", ch->algo, link->name(link->ctx, collided[0]),
							link->name(link->ctx, collided[1]));
		else if (g == before && g < n_global && !paused)
			rc = gbml_error(env, GBML_EINVAL, "%s: the shards' row hashes ended before their rows", ch->algo);
		else if (flush && (rc = flush(arg)) != GBML_OK)
			break;
		else if (gbml_progress(env, &info))
			rc = gbml_error(env, GBML_ECANCELLED, "canceled");
	}
done:
	for (int s = 0; o && s < ch->n_shards; s++)
		gbml_free(env, o[s].hash);
	gbml_free(env, o);
	return rc;
}

int
gbml_shard_merge_order(gbml_shard_channel *ch, int64_t n_global, int64_t op_hashes,
					   gbml_shard_order_visit visit, gbml_shard_order_flush flush, void *arg)
{
	return merge_order(ch, n_global, op_hashes, 2, order_page_rows(ch, 2, false), visit, flush, arg);
}

/* The pages of global indices being sent back (gbml_shard_send_ranks). */
typedef struct rank_pages
{
	gbml_shard_channel *ch;
	int64_t		n_global;
	int64_t		op_ranks;
	int64_t		page;			/* the merge's rows a page */
	int64_t   **rank;			/* per shard: page */
	int64_t    *filled;
	int64_t    *sent;
	void		(*also_visit) (void *arg, int shard, int64_t local, int64_t global);
	void	   *arg;
} rank_pages;

/* The merge's visitor: the row's global index into its shard's page (full: send the pages first). */
static bool
rank_visit(void *arg, int shard, int64_t local, int64_t global)
{
	rank_pages *P = arg;

	if (P->filled[shard] == P->page)
		return false;
	P->rank[shard][P->filled[shard]++] = global;	/* the pages go in the shard's row order */
	if (P->also_visit)
		P->also_visit(P->arg, shard, local, global);
	return true;
}

/* Every shard's filled page of global indices (possibly empty) sent. */
static int
rank_flush(void *arg)
{
	rank_pages *P = arg;
	gbml_shard_channel *ch = P->ch;

	for (int s = 0; s < ch->n_shards; s++)
	{
		gbml_strbuf *m = gbml_shard_request_to(ch, s, P->op_ranks);

		gbml_msg_put_i64(m, P->n_global);
		gbml_msg_put_i64(m, P->sent[s]);
		gbml_msg_put_i64(m, P->filled[s]);
		gbml_msg_put(m, P->rank[s], sizeof(int64_t) * (size_t) P->filled[s]);
		P->sent[s] += P->filled[s];
		P->filled[s] = 0;
	}
	return gbml_shard_send_each(ch);
}

static int
send_ranks(gbml_shard_channel *ch, int64_t n_global, int64_t op_hashes, int words, int64_t op_ranks,
		   void (*also_visit) (void *arg, int shard, int64_t local, int64_t global), void *arg)
{
	gbml_env   *env = ch->env;
	int			S = ch->n_shards;
	rank_pages	P = {ch, n_global, op_ranks, order_page_rows(ch, words, true), NULL, NULL, NULL, also_visit, arg};
	int			rc = GBML_OK;

	P.rank = gbml_alloc0(env, sizeof(int64_t *) * (size_t) S);
	P.filled = gbml_alloc0(env, sizeof(int64_t) * (size_t) S);
	P.sent = gbml_alloc0(env, sizeof(int64_t) * (size_t) S);
	if (!P.rank || !P.filled || !P.sent)
		rc = env->error_code;
	for (int s = 0; rc == GBML_OK && s < S; s++)
	{
		if (ch->n_rows[s] > 0 &&
			(P.rank[s] = gbml_alloc_array(env, (size_t) P.page, sizeof(int64_t))) == NULL)
			rc = env->error_code;
	}
	if (rc == GBML_OK)
		rc = merge_order(ch, n_global, op_hashes, words, P.page, rank_visit, rank_flush, &P);
	for (int s = 0; P.rank && s < S; s++)
		gbml_free(env, P.rank[s]);
	gbml_free(env, P.rank);
	gbml_free(env, P.filled);
	gbml_free(env, P.sent);
	return rc;
}

int
gbml_shard_send_ranks(gbml_shard_channel *ch, int64_t n_global, int64_t op_hashes, int64_t op_ranks,
					  void (*also_visit) (void *arg, int shard, int64_t local, int64_t global), void *arg)
{
	return send_ranks(ch, n_global, op_hashes, 2, op_ranks, also_visit, arg);
}

int
gbml_shard_send_grouped_ranks(gbml_shard_channel *ch, int64_t n_global, int64_t op_grouped_hashes, int64_t op_ranks,
							  void (*also_visit) (void *arg, int shard, int64_t local, int64_t global), void *arg)
{
	return send_ranks(ch, n_global, op_grouped_hashes, 3, op_ranks, also_visit, arg);
}

int
gbml_shard_merge_grouped_order(gbml_shard_channel *ch, int64_t n_global, int64_t op_grouped_hashes,
							   gbml_shard_order_visit visit, gbml_shard_order_flush flush, void *arg)
{
	return merge_order(ch, n_global, op_grouped_hashes, 3, order_page_rows(ch, 3, false), visit, flush, arg);
}

bool
gbml_shard_ranks_trailing_page(const gbml_shard_ranks *o, gbml_msg_reader *r)
{
	gbml_msg_reader peek = *r;
	int64_t		n_global,
				offset,
				count;

	if (o->rank == NULL || o->ranked != o->n)
		return false;
	n_global = gbml_msg_get_i64(&peek);
	offset = gbml_msg_get_i64(&peek);
	count = gbml_msg_get_i64(&peek);
	if (peek.bad || n_global != o->n_global || offset != o->n || count != 0)
		return false;
	*r = peek;
	return true;
}

int
gbml_shard_ranks_receive(gbml_shard_ranks *o, int64_t n, gbml_msg_reader *r, gbml_env *env, bool *complete)
{
	int64_t		n_global = gbml_msg_get_count(r, INT64_MAX / 2),
				offset = gbml_msg_get_count(r, n),
				count = gbml_msg_get_count(r, GBML_SHARD_ORDER_PAGE);

	*complete = false;
	if (o->rank == NULL && !r->bad && n_global >= n)
	{
		o->n = n;
		o->n_global = n_global;
		o->ranked = 0;
		if ((o->rank = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(int64_t))) == NULL)
			return env->error_code;
	}
	if (r->bad || o->rank == NULL || n_global != o->n_global || offset != o->ranked || count > n - offset)
		r->bad = true;
	else
		gbml_msg_get(r, o->rank + offset, sizeof(int64_t) * (size_t) count);
	for (int64_t i = offset; i < offset + count && !r->bad; i++)
		if (o->rank[i] < 0 || o->rank[i] >= o->n_global || (i > 0 && o->rank[i] <= o->rank[i - 1]))
			r->bad = true;
	if (r->bad)
	{
		/* no order at all rather than a damaged one */
		gbml_shard_ranks_free(o, env);
		return GBML_OK;
	}
	o->ranked += count;
	*complete = o->ranked == n;
	return GBML_OK;
}

int64_t
gbml_shard_ranks_local(const gbml_shard_ranks *o, int64_t g)
{
	int64_t		lo = 0,
				hi = o->n;

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (o->rank[mid] < g)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < o->n && o->rank[lo] == g ? lo : -1;
}

void
gbml_shard_ranks_free(gbml_shard_ranks *o, gbml_env *env)
{
	gbml_free(env, o->rank);
	memset(o, 0, sizeof(*o));
}
