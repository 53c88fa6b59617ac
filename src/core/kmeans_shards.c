/*
 * kmeans_shards.c — K-Means across servers, the coordinator's side
 * (kmeans_shards.h): the row operations (km_remote_rows) the Lloyd driver
 * calls, each one round trip to every shard (their answers:
 * kmeans_shard.c), and the global order that makes them agree.
 *
 * Global order.  Each shard's rows are in its canonical order (sorted by
 * content hash); the union's canonical order is their merge by hash, so
 * the coordinator merges the shards' sorted hashes once, page by page, and
 * sends each shard its rows' global indices (ascending on every shard).  Rows with
 * equal hashes on two shards are duplicates (a second, independent hash
 * says so), whose order changes nothing; two different rows with equal
 * hashes (odds about n^2 / 2^64) are refused rather than ordered
 * differently from one server.
 *
 * k-means++ needs a running sum of per-row potentials in global order: the
 * shards return per-candidate potentials per global block of
 * KM_SHARD_BLOCK_ROWS indices, the coordinator finds the block where the
 * drawn value falls, and fetches that block's per-row terms from every
 * shard (one round trip for all candidates of a step).
 */
#include "kmeans_shards.h"
#include "kmeans_shard_msg.h"
#include "kmeans_internal.h"
#include "kmeans_exact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct km_shards
{
	const gbml_shard_link *link;
	int			S;
	int64_t    *n_rows;			/* per shard */
	int64_t		n_blocks;		/* global blocks of KM_SHARD_BLOCK_ROWS rows */
	int			T;
	int64_t   **block_pot;		/* per shard: n_blocks x T of the last candidate pass */
	int64_t    *cur_block;		/* n_blocks: the taken candidate's potential */
	const uint8_t **req;
	size_t	   *req_len;
	const uint8_t **reply;
	size_t	   *reply_len;
	gbml_strbuf msg;
	gbml_shard_traffic traffic;
} km_shards;

/* The hello of shard s: its rows, features and largest row norm. */
static bool
km_read_hello(const gbml_shard_link *link, int s, int64_t *n, int64_t *d, double *xnorm)
{
	gbml_msg_reader	r = {link->hello[s], link->hello[s] + link->hello_len[s], false};
	uint32_t	head[2];

	gbml_msg_get(&r, head, sizeof(head));
	*n = gbml_msg_get_i64(&r);
	*d = gbml_msg_get_i64(&r);
	*xnorm = gbml_msg_get_f64(&r);
	return !r.bad && head[0] == KM_SHARD_MAGIC && head[1] == GBML_SHARD_HELLO_VERSION && *n >= 0 && *d >= 0 &&
		*d <= INT32_MAX && r.p == r.end;
}

/*
 * The requests in sh->req to every shard at once; the replies into
 * sh->reply, each without its trailer (the seconds the shard worked),
 * which goes into the traffic figures with the bytes and the wait.
 */
static int
km_exchange(km_work *w)
{
	km_shards  *sh = w->shards;

	return gbml_shards_exchange(sh->link, sh->req, sh->req_len, sh->reply, sh->reply_len, &sh->traffic, w->env);
}

/* msg to every shard at once; the replies into sh->reply. */
static int
km_send(km_work *w)
{
	km_shards  *sh = w->shards;
	int			rc;

	if ((rc = gbml_sb_status(&sh->msg)) != GBML_OK)
		return rc;
	for (int s = 0; s < sh->S; s++)
	{
		sh->req[s] = (const uint8_t *) sh->msg.data;
		sh->req_len[s] = sh->msg.len;
	}
	return km_exchange(w);
}

/* A new request: op first. */
static gbml_strbuf *
km_request(km_work *w, km_shard_op op)
{
	km_shards  *sh = w->shards;

	sh->msg.len = 0;
	gbml_msg_put_i64(&sh->msg, op);
	return &sh->msg;
}

static gbml_msg_reader
km_reply(const km_shards *sh, int s)
{
	gbml_msg_reader	r = {sh->reply[s], sh->reply[s] + sh->reply_len[s], false};

	return r;
}

/* A reply read to its end, or an error naming the shard. */
static int
km_reply_done(km_work *w, int s, const gbml_msg_reader *r)
{
	if (!r->bad && r->p == r->end)
		return GBML_OK;
	return gbml_error(w->env, GBML_EINVAL, "kmeans: shard %s sent a malformed reply",
					  w->shards->link->name(w->shards->link->ctx, s));
}

static void
km_put_centroids(km_work *w, gbml_strbuf *m)
{
	gbml_msg_put(m, w->c, sizeof(double) * (size_t) w->k * w->d);
}

/* Sends the request; every shard's reply is n int64 values, added into acc[n]. */
static int
km_send_sum(km_work *w, int64_t *acc, size_t n)
{
	km_shards  *sh = w->shards;
	int			rc;

	if ((rc = km_send(w)) != GBML_OK)
		return rc;
	memset(acc, 0, sizeof(int64_t) * n);
	for (int s = 0; s < sh->S; s++)
	{
		gbml_msg_reader	r = km_reply(sh, s);

		if (sh->n_rows[s] == 0)
			continue;
		for (size_t i = 0; i < n; i++)
			acc[i] += gbml_msg_get_i64(&r);
		if ((rc = km_reply_done(w, s, &r)) != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

/* Sends the request; every shard's reply is n doubles, folded into acc[n] by min (lower) or max. */
static int
km_send_extremes(km_work *w, double *acc, size_t n, bool lower)
{
	km_shards  *sh = w->shards;
	int			rc;

	if ((rc = km_send(w)) != GBML_OK)
		return rc;
	for (size_t i = 0; i < n; i++)
		acc[i] = lower ? INFINITY : -INFINITY;
	for (int s = 0; s < sh->S; s++)
	{
		gbml_msg_reader	r = km_reply(sh, s);

		if (sh->n_rows[s] == 0)
			continue;
		for (size_t i = 0; i < n; i++)
		{
			double		v = gbml_msg_get_f64(&r);

			acc[i] = lower ? fmin(acc[i], v) : fmax(acc[i], v);
		}
		if ((rc = km_reply_done(w, s, &r)) != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

/* Each shard replies its minima negated, then its maxima: one fold by max. */
static int
km_remote_extents(km_work *w, double *mn, double *mx)
{
	int			d = w->d;
	double	   *both = gbml_alloc_array(w->env, (size_t) 2 * d, sizeof(double));
	int			rc;

	if (both == NULL)
		return w->env->error_code;
	km_request(w, KM_OP_EXTENTS);
	if ((rc = km_send_extremes(w, both, (size_t) 2 * d, false)) == GBML_OK)
		for (int j = 0; j < d; j++)
		{
			mn[j] = -both[j];
			mx[j] = both[d + j];
		}
	gbml_free(w->env, both);
	return rc;
}

static int
km_remote_grid_set(km_work *w)
{
	gbml_strbuf *m = km_request(w, KM_OP_GRID);

	gbml_msg_put(m, w->fix_scale, sizeof(double) * w->d);
	gbml_msg_put_f64(m, w->xnorm_max);
	return km_send(w);
}

static int
km_remote_feature_sums(km_work *w, const double *mean, const double *scale, int64_t *sums)
{
	gbml_strbuf *m = km_request(w, KM_OP_FEATURE_SUMS);

	gbml_msg_put_i64(m, mean != NULL);
	for (int j = 0; j < w->d; j++)
		gbml_msg_put_f64(m, mean ? mean[j] : 0);
	gbml_msg_put(m, scale, sizeof(double) * w->d);
	return km_send_sum(w, sums, (size_t) w->d);
}

/* Rows g[0..n) from whichever shard holds each; every row exactly once. */
static int
km_remote_copy_rows(km_work *w, const int64_t *g, int n, double *out)
{
	km_shards  *sh = w->shards;
	gbml_strbuf *m = km_request(w, KM_OP_ROWS);
	uint8_t    *seen = gbml_alloc0(w->env, (size_t) (n > 0 ? n : 1));
	int			rc;

	if (seen == NULL)
		return w->env->error_code;
	gbml_msg_put_i64(m, n);
	gbml_msg_put(m, g, sizeof(int64_t) * (size_t) n);
	if ((rc = km_send(w)) != GBML_OK)
		goto done;
	for (int s = 0; s < sh->S && rc == GBML_OK; s++)
	{
		gbml_msg_reader	r = km_reply(sh, s);
		int64_t		found;

		if (sh->n_rows[s] == 0)
			continue;
		found = gbml_msg_get_count(&r, n);
		for (int64_t i = 0; i < found && !r.bad; i++)
		{
			int64_t		pos = gbml_msg_get_count(&r, n - 1);

			gbml_msg_get(&r, out + (size_t) pos * w->d, sizeof(double) * w->d);
			if (seen[pos]++)
				r.bad = true;
		}
		rc = km_reply_done(w, s, &r);
	}
	for (int i = 0; i < n && rc == GBML_OK; i++)
		if (!seen[i])
			rc = gbml_error(w->env, GBML_EINVAL, "kmeans: no shard holds row %lld of the union", (long long) g[i]);
done:
	gbml_free(w->env, seen);
	return rc;
}

static int
km_remote_kpp_start(km_work *w, int T)
{
	km_shards  *sh = w->shards;
	gbml_strbuf *m;

	if (sh->cur_block == NULL)
	{
		sh->T = T;
		sh->cur_block = gbml_alloc_array(w->env, (size_t) sh->n_blocks, sizeof(int64_t));
		sh->block_pot = gbml_alloc0(w->env, sizeof(int64_t *) * sh->S);
		if (sh->cur_block == NULL || sh->block_pot == NULL)
			return w->env->error_code;
		for (int s = 0; s < sh->S; s++)
			if (sh->n_rows[s] > 0 &&
				(sh->block_pot[s] = gbml_alloc_array(w->env, (size_t) sh->n_blocks * T, sizeof(int64_t))) == NULL)
				return w->env->error_code;
	}
	m = km_request(w, KM_OP_KPP_START);
	gbml_msg_put_i64(m, T);
	return km_send(w);
}

static int
km_remote_cand_pass(km_work *w, int T, int64_t *totals)
{
	km_shards  *sh = w->shards;
	gbml_strbuf *m = km_request(w, KM_OP_CAND);
	size_t		cells = (size_t) sh->n_blocks * T;
	int			rc;

	gbml_msg_put_i64(m, T);
	gbml_msg_put_f64(m, w->pot_scale);
	gbml_msg_put(m, w->cand, sizeof(float) * GBML_KM_CAND_LANES * (size_t) w->d);
	if ((rc = km_send(w)) != GBML_OK)
		return rc;
	for (int t = 0; t < T; t++)
		totals[t] = 0;
	for (int s = 0; s < sh->S; s++)
	{
		gbml_msg_reader	r = km_reply(sh, s);

		if (sh->n_rows[s] == 0)
			continue;
		gbml_msg_get(&r, sh->block_pot[s], sizeof(int64_t) * cells);
		if ((rc = km_reply_done(w, s, &r)) != GBML_OK)
			return rc;
		for (size_t c = 0; c < cells; c++)
			totals[c % T] += sh->block_pot[s][c];
	}
	return GBML_OK;
}

static int
km_remote_cand_take(km_work *w, int t, int T, float *max_out)
{
	km_shards  *sh = w->shards;
	gbml_strbuf *m = km_request(w, KM_OP_TAKE);
	int			rc;

	gbml_msg_put_i64(m, t);
	gbml_msg_put_i64(m, T);
	if ((rc = km_send(w)) != GBML_OK)
		return rc;
	*max_out = 0;
	memset(sh->cur_block, 0, sizeof(int64_t) * sh->n_blocks);
	for (int s = 0; s < sh->S; s++)
	{
		gbml_msg_reader	r = km_reply(sh, s);
		float		mx;

		if (sh->n_rows[s] == 0)
			continue;
		gbml_msg_get(&r, &mx, sizeof(mx));
		if ((rc = km_reply_done(w, s, &r)) != GBML_OK)
			return rc;
		*max_out = mx > *max_out ? mx : *max_out;
		for (int64_t b = 0; b < sh->n_blocks; b++)
			sh->cur_block[b] += sh->block_pot[s][(size_t) b * T + t];
	}
	return GBML_OK;
}

/* A (global row, potential term) pair of a block's terms. */
typedef struct km_term
{
	int64_t		row;
	int64_t		term;
} km_term;

static int
km_term_cmp(const void *a, const void *b)
{
	int64_t		x = ((const km_term *) a)->row,
				y = ((const km_term *) b)->row;

	return x < y ? -1 : x > y;
}

/*
 * The block of each drawn value (whole blocks' potentials skipped, as the
 * local search skips its blocks), then the blocks' per-row terms from
 * every shard in one round trip, merged into global order and walked.
 */
static int
km_remote_search(km_work *w, const double *u, int m, int64_t total, int64_t *rows)
{
	km_shards  *sh = w->shards;
	int64_t		blk[GBML_KM_CAND_LANES],
				rem[GBML_KM_CAND_LANES],
				want[GBML_KM_CAND_LANES];
	int			n_want = 0;
	km_term    *terms = NULL;
	gbml_strbuf *msg;
	int			rc;

	for (int i = 0; i < m; i++)
	{
		int64_t		r = (int64_t) (u[i] * (double) total),
					cum = 0;
		bool		dup = false;

		blk[i] = -1;
		rows[i] = total <= 0 ? 0 : w->n - 1;
		if (total <= 0)
			continue;			/* every row sits on a centre: any row will do */
		if (r >= total)
			r = total - 1;
		for (int64_t b = 0; b < sh->n_blocks; b++)
		{
			if (cum + sh->cur_block[b] <= r)
			{
				cum += sh->cur_block[b];
				continue;
			}
			blk[i] = b;
			rem[i] = r - cum;
			break;
		}
		for (int q = 0; q < n_want; q++)
			dup |= want[q] == blk[i];
		if (blk[i] >= 0 && !dup)
			want[n_want++] = blk[i];
	}
	if (n_want == 0)
		return GBML_OK;
	msg = km_request(w, KM_OP_TERMS);
	gbml_msg_put_f64(msg, w->cur_scale);
	gbml_msg_put_i64(msg, n_want);
	gbml_msg_put(msg, want, sizeof(int64_t) * n_want);
	if ((rc = km_send(w)) != GBML_OK)
		return rc;
	terms = gbml_alloc_array(w->env, KM_SHARD_BLOCK_ROWS, sizeof(km_term));
	if (terms == NULL)
		return w->env->error_code;
	for (int q = 0; q < n_want && rc == GBML_OK; q++)
	{
		int64_t		nt = 0;

		/* block q's terms from every shard (each reply lists its blocks in request order) */
		for (int s = 0; s < sh->S && rc == GBML_OK; s++)
		{
			gbml_msg_reader	r = km_reply(sh, s);

			if (sh->n_rows[s] == 0)
				continue;
			for (int qq = 0; qq <= q && !r.bad; qq++)
			{
				int64_t		c = gbml_msg_get_count(&r, qq < q ? KM_SHARD_BLOCK_ROWS : KM_SHARD_BLOCK_ROWS - nt);

				if (qq < q)
					r.p += (size_t) c * sizeof(km_term) <= (size_t) (r.end - r.p) ? (size_t) c * sizeof(km_term) : 0;
				else
					gbml_msg_get(&r, terms + nt, sizeof(km_term) * (size_t) c), nt += c;
			}
			if (r.bad)
				rc = km_reply_done(w, s, &r);
		}
		qsort(terms, (size_t) nt, sizeof(km_term), km_term_cmp);
		for (int i = 0; i < m; i++)
		{
			int64_t		cum = 0;

			if (blk[i] != want[q])
				continue;
			rows[i] = nt > 0 ? terms[nt - 1].row : w->n - 1;
			for (int64_t e = 0; e < nt; e++)
			{
				cum += terms[e].term;
				if (cum > rem[i])
				{
					rows[i] = terms[e].row;
					break;
				}
			}
		}
	}
	gbml_free(w->env, terms);
	return rc;
}

static int
km_remote_reset_labels(km_work *w)
{
	km_request(w, KM_OP_RESET_LABELS);
	return km_send(w);
}

/* Each shard replies changed, rechecked, counts[k] (and sums[k][d] when updating): one integer sum. */
static int
km_remote_pass(km_work *w, bool update, km_pass_stats *st)
{
	gbml_strbuf *m = km_request(w, KM_OP_PASS);
	size_t		kd = (size_t) w->k * w->d,
				n = 2 + (size_t) w->k + (update ? kd : 0);
	int64_t    *acc = gbml_alloc_array(w->env, n, sizeof(int64_t));
	int64_t		traffic_before;
	double		t0 = gbml_now();
	int			rc;

	memset(st, 0, sizeof(*st));
	if (acc == NULL)
		return w->env->error_code;
	gbml_msg_put_i64(m, update);
	km_put_centroids(w, m);
	traffic_before = w->shards->traffic.bytes_sent + w->shards->traffic.bytes_received;
	rc = km_send_sum(w, acc, n);
	w->shards->traffic.step_bytes = w->shards->traffic.bytes_sent + w->shards->traffic.bytes_received - traffic_before;
	if (rc == GBML_OK)
	{
		st->changed = acc[0];
		st->rechecked = acc[1];
		memcpy(w->counts, acc + 2, sizeof(int64_t) * w->k);
		if (update)
			memcpy(w->sums, acc + 2 + w->k, sizeof(int64_t) * kd);
	}
	gbml_free(w->env, acc);
	st->s1 = st->cpu_seconds = gbml_now() - t0;
	return rc;
}

static bool
km_far_before(const km_far *a, const km_far *b)
{
	return a->dist > b->dist || (a->dist == b->dist && a->row < b->row);
}

/* Every shard's m farthest rows, merged: the union's m farthest (farther first, then lower row). */
static int
km_remote_farthest(km_work *w, km_far *far, int *m_io, double *out)
{
	km_shards  *sh = w->shards;
	int			m = *m_io,
				d = w->d,
				kept = 0;
	gbml_strbuf *msg = km_request(w, KM_OP_FAR);
	int			rc;

	gbml_msg_put_i64(msg, m);
	km_put_centroids(w, msg);
	if ((rc = km_send(w)) != GBML_OK)
		return rc;
	for (int s = 0; s < sh->S; s++)
	{
		gbml_msg_reader	r = km_reply(sh, s);
		int64_t		c;

		if (sh->n_rows[s] == 0)
			continue;
		c = gbml_msg_get_count(&r, m);
		for (int64_t e = 0; e < c && !r.bad; e++)
		{
			km_far		f;
			int			at;

			f.dist = gbml_msg_get_f64(&r);
			f.row = gbml_msg_get_i64(&r);
			f.label = (int32_t) gbml_msg_get_count(&r, w->k - 1);
			/* insertion into the sorted top m (m is the number of empty clusters: small) */
			for (at = kept; at > 0 && km_far_before(&f, &far[at - 1]); at--)
				;
			if (at >= m)
			{
				r.p += sizeof(double) * d <= (size_t) (r.end - r.p) ? sizeof(double) * d : 0;
				continue;
			}
			if (kept < m)
				kept++;
			memmove(far + at + 1, far + at, sizeof(km_far) * (size_t) (kept - 1 - at));
			memmove(out + (size_t) (at + 1) * d, out + (size_t) at * d, sizeof(double) * d * (size_t) (kept - 1 - at));
			far[at] = f;
			gbml_msg_get(&r, out + (size_t) at * d, sizeof(double) * d);
		}
		if ((rc = km_reply_done(w, s, &r)) != GBML_OK)
			return rc;
	}
	*m_io = kept;
	return GBML_OK;
}

static int
km_remote_dist_max(km_work *w, double *mx)
{
	int			rc;

	km_put_centroids(w, km_request(w, KM_OP_DIST_MAX));
	if ((rc = km_send_extremes(w, mx, 1, false)) == GBML_OK && !(*mx > 0))
		*mx = 0;
	return rc;
}

static int
km_remote_dist_sum(km_work *w, double scale, int64_t *total)
{
	gbml_msg_put_f64(km_request(w, KM_OP_DIST_SUM), scale);
	return km_send_sum(w, total, 1);
}

static const km_rows_ops km_remote_rows = {
	.extents = km_remote_extents,
	.grid_set = km_remote_grid_set,
	.feature_sums = km_remote_feature_sums,
	.copy_rows = km_remote_copy_rows,
	.kpp_start = km_remote_kpp_start,
	.cand_pass = km_remote_cand_pass,
	.cand_take = km_remote_cand_take,
	.search = km_remote_search,
	.reset_labels = km_remote_reset_labels,
	.pass = km_remote_pass,
	.farthest = km_remote_farthest,
	.dist_max = km_remote_dist_max,
	.dist_sum = km_remote_dist_sum,
};

/* The merge's state per shard: a page of its hashes being read, a page of global indices being filled. */
typedef struct km_order_shard
{
	uint64_t   *hash;			/* KM_ORDER_PAGE x 2 */
	int64_t		have;			/* rows in the page */
	int64_t		at;				/* the next row of the page */
	int64_t		fetched;		/* the shard's rows fetched so far */
	int64_t    *rank;			/* KM_ORDER_PAGE */
	int64_t		filled;			/* global indices in the page */
	int64_t		sent;			/* the shard's rows whose indices were sent */
} km_order_shard;

/* The next pages of hashes of every shard whose page is used up (an empty request for the others). */
static int
km_order_fetch(km_work *w, km_order_shard *o, gbml_strbuf *msgs)
{
	km_shards  *sh = w->shards;
	int			rc;

	for (int s = 0; s < sh->S; s++)
	{
		bool		need = o[s].at == o[s].have && o[s].fetched < sh->n_rows[s];

		msgs[s].len = 0;
		gbml_msg_put_i64(&msgs[s], KM_OP_HASHES);
		gbml_msg_put_i64(&msgs[s], o[s].fetched);
		gbml_msg_put_i64(&msgs[s], need ? KM_ORDER_PAGE : 0);
		if ((rc = gbml_sb_status(&msgs[s])) != GBML_OK)
			return rc;
		sh->req[s] = (const uint8_t *) msgs[s].data;
		sh->req_len[s] = msgs[s].len;
	}
	if ((rc = km_exchange(w)) != GBML_OK)
		return rc;
	for (int s = 0; s < sh->S; s++)
	{
		gbml_msg_reader r = {sh->reply[s], sh->reply[s] + sh->reply_len[s], false};
		int64_t		count;

		if (sh->n_rows[s] == 0)
			continue;
		count = gbml_msg_get_count(&r, KM_ORDER_PAGE);
		if (o[s].at == o[s].have && o[s].fetched < sh->n_rows[s] && count == 0)
			r.bad = true;		/* a page it owes: without it the merge would wait forever */
		if (count > 0 && !r.bad)
		{
			gbml_msg_get(&r, o[s].hash, sizeof(uint64_t) * 2 * (size_t) count);
			o[s].have = count;
			o[s].at = 0;
			o[s].fetched += count;
		}
		if ((rc = km_reply_done(w, s, &r)) != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

/* Every shard's filled page of global indices (possibly empty) sent. */
static int
km_order_send(km_work *w, km_order_shard *o, gbml_strbuf *msgs)
{
	km_shards  *sh = w->shards;
	int			rc;

	for (int s = 0; s < sh->S; s++)
	{
		msgs[s].len = 0;
		gbml_msg_put_i64(&msgs[s], KM_OP_RANKS);
		gbml_msg_put_i64(&msgs[s], w->n);
		gbml_msg_put_i64(&msgs[s], o[s].sent);
		gbml_msg_put_i64(&msgs[s], o[s].filled);
		gbml_msg_put(&msgs[s], o[s].rank, sizeof(int64_t) * (size_t) o[s].filled);
		if ((rc = gbml_sb_status(&msgs[s])) != GBML_OK)
			return rc;
		sh->req[s] = (const uint8_t *) msgs[s].data;
		sh->req_len[s] = msgs[s].len;
		o[s].sent += o[s].filled;
		o[s].filled = 0;
	}
	return km_exchange(w);
}

/*
 * Merges the pages by hash until a shard's page of hashes is used up (it
 * has more) or a page of indices is full; returns false at a collision of
 * two different rows, *g the next global index.
 */
static bool
km_order_merge(km_work *w, km_order_shard *o, int64_t *g, int *collided)
{
	km_shards  *sh = w->shards;

	for (; *g < w->n; (*g)++)
	{
		int			best = -1;

		for (int s = 0; s < sh->S; s++)
		{
			const uint64_t *h = o[s].hash + 2 * o[s].at;

			if (o[s].at == o[s].have)
			{
				if (o[s].fetched < sh->n_rows[s])
					return true;	/* its next page first */
				continue;
			}
			if (best >= 0 && h[0] == o[best].hash[2 * o[best].at] && h[1] != o[best].hash[2 * o[best].at + 1])
			{
				collided[0] = best;
				collided[1] = s;
				return false;
			}
			if (best < 0 || h[0] < o[best].hash[2 * o[best].at])
				best = s;
		}
		if (o[best].filled == KM_ORDER_PAGE)
			return true;		/* its page of indices goes first */
		o[best].rank[o[best].filled++] = *g;
		o[best].at++;
	}
	return true;
}

/*
 * The union's canonical order: the shards' hash-sorted rows merged by
 * hash (duplicates across shards in shard order), and each shard's rows'
 * global indices sent to it, both in pages of KM_ORDER_PAGE rows so that
 * neither side holds more than a few pages.
 */
static int
km_global_order(km_work *w)
{
	km_shards  *sh = w->shards;
	const gbml_shard_link *link = sh->link;
	km_order_shard *o = gbml_alloc0(w->env, sizeof(km_order_shard) * sh->S);
	gbml_strbuf *msgs = gbml_alloc0(w->env, sizeof(gbml_strbuf) * sh->S);
	int64_t		g = 0;
	int			collided[2],
				rc = GBML_OK;

	if (o == NULL || msgs == NULL)
	{
		rc = w->env->error_code;
		goto done;
	}
	for (int s = 0; s < sh->S; s++)
	{
		gbml_sb_init(&msgs[s], w->env);
		if (sh->n_rows[s] > 0 &&
			((o[s].hash = gbml_alloc_array(w->env, (size_t) KM_ORDER_PAGE * 2, sizeof(uint64_t))) == NULL ||
			 (o[s].rank = gbml_alloc_array(w->env, (size_t) KM_ORDER_PAGE, sizeof(int64_t))) == NULL))
		{
			rc = w->env->error_code;
			goto done;
		}
	}
	while (rc == GBML_OK)
	{
		gbml_progress_info info = {"order", g, w->n, NULL, 0};

		if ((rc = km_order_fetch(w, o, msgs)) != GBML_OK)
			break;
		if (!km_order_merge(w, o, &g, collided))
		{
			rc = gbml_error(w->env, GBML_EINVAL,
							"kmeans: shards %s and %s hold two different rows with the same 64-bit hash, "
							"whose order one server would take from their content; the training cannot "
							"promise the single-server model", link->name(link->ctx, collided[0]),
							link->name(link->ctx, collided[1]));
			break;
		}
		if ((rc = km_order_send(w, o, msgs)) != GBML_OK || g == w->n)
			break;
		if (gbml_progress(w->env, &info))
			rc = gbml_error(w->env, GBML_ECANCELLED, "canceled");
	}
done:
	for (int s = 0; o && msgs && s < sh->S; s++)
	{
		gbml_sb_free(&msgs[s]);
		gbml_free(w->env, o[s].hash);
		gbml_free(w->env, o[s].rank);
	}
	gbml_free(w->env, msgs);
	gbml_free(w->env, o);
	return rc;
}

int
km_shards_setup(km_work *w, const gbml_dataset *ds, const gbml_kmeans_params *p, gbml_env *env)
{
	const gbml_shard_link *link = ds->shards;
	km_shards  *sh;
	size_t		kd;
	int64_t		n_total = 0;
	int			rc;

	km_work_init(w, ds, p, env, &km_remote_rows);
	w->fix_bits = gbml_km_fix_bits(w->n);
	kd = (size_t) w->k * w->d;
	sh = w->shards = gbml_alloc0(env, sizeof(km_shards));
	if (sh == NULL)
		return env->error_code;
	sh->link = link;
	sh->S = link->n_shards;
	sh->n_blocks = (w->n + KM_SHARD_BLOCK_ROWS - 1) / KM_SHARD_BLOCK_ROWS;
	gbml_sb_init(&sh->msg, env);
	sh->n_rows = gbml_alloc0(env, sizeof(int64_t) * sh->S);
	sh->req = gbml_alloc0(env, sizeof(void *) * sh->S);
	sh->req_len = gbml_alloc0(env, sizeof(size_t) * sh->S);
	sh->reply = gbml_alloc0(env, sizeof(void *) * sh->S);
	sh->reply_len = gbml_alloc0(env, sizeof(size_t) * sh->S);
	w->c = gbml_alloc_array(env, kd, sizeof(double));
	w->cnew = gbml_alloc_array(env, kd, sizeof(double));
	w->fix_scale = gbml_alloc_array(env, (size_t) w->d, sizeof(double));
	w->sums = gbml_alloc_array(env, kd, sizeof(int64_t));
	w->counts = gbml_alloc_array(env, (size_t) w->k, sizeof(int64_t));
	if (!sh->n_rows || !sh->req || !sh->req_len || !sh->reply || !sh->reply_len || !w->c || !w->cnew ||
		!w->fix_scale || !w->sums || !w->counts)
		return env->error_code;
	for (int s = 0; s < sh->S; s++)
	{
		int64_t		d;
		double		xn;

		if (!km_read_hello(link, s, &sh->n_rows[s], &d, &xn))
			return gbml_error(env, GBML_EINVAL, "kmeans: shard %s answered its opening with a malformed message",
							  link->name(link->ctx, s));
		if (sh->n_rows[s] > 0 && d != w->d)
			return gbml_error(env, GBML_EINVAL, "kmeans: shard %s has %lld features, the union %d",
							  link->name(link->ctx, s), (long long) d, w->d);
		n_total += sh->n_rows[s];
		w->xnorm_max = fmax(w->xnorm_max, xn);
	}
	if (n_total != w->n)
		return gbml_error(env, GBML_EINVAL, "kmeans: the shards hold %lld rows, the coordinator expected %lld",
						  (long long) n_total, (long long) w->n);
	if ((rc = km_global_order(w)) == GBML_OK)
		gbml_shard_traffic_mark_setup(&sh->traffic);
	return rc;
}

void
km_shards_traffic(const km_work *w, gbml_shard_traffic *out)
{
	if (w->shards)
		*out = w->shards->traffic;
}

void
km_shards_free(km_work *w)
{
	km_shards  *sh = w->shards;

	if (sh == NULL)
		return;
	for (int s = 0; sh->block_pot && s < sh->S; s++)
		gbml_free(w->env, sh->block_pot[s]);
	gbml_free(w->env, sh->block_pot);
	gbml_free(w->env, sh->cur_block);
	gbml_free(w->env, sh->n_rows);
	gbml_free(w->env, sh->req);
	gbml_free(w->env, sh->req_len);
	gbml_free(w->env, sh->reply);
	gbml_free(w->env, sh->reply_len);
	gbml_sb_free(&sh->msg);
	gbml_free(w->env, sh);
	w->shards = NULL;
}
