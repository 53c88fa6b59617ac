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
#include "shard_order.h"
#include "kmeans_internal.h"
#include "kmeans_exact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct km_shards
{
	gbml_shard_channel ch;
	int64_t		n_blocks;		/* global blocks of KM_SHARD_BLOCK_ROWS rows */
	int64_t   **block_pot;		/* per shard: n_blocks x T of the last candidate pass */
	int64_t    *cur_block;		/* n_blocks: the taken candidate's potential */
} km_shards;

/* Shard s's largest row norm: its hello's one field past the common head (exactly there). */
static bool
km_hello_xnorm(const gbml_shard_link *link, int s, double *xnorm)
{
	gbml_msg_reader r = {link->hello[s] + GBML_SHARD_HELLO_HEAD, link->hello[s] + link->hello_len[s], false};

	*xnorm = gbml_msg_get_f64(&r);
	return link->hello_len[s] >= GBML_SHARD_HELLO_HEAD && !r.bad && r.p == r.end;
}

/* A new request for every shard: op first. */
static gbml_strbuf *
km_request(km_work *w, km_shard_op op)
{
	return gbml_shard_request(&w->shards->ch, op);
}

static int
km_send(km_work *w)
{
	return gbml_shard_send(&w->shards->ch);
}

static void
km_put_centroids(km_work *w, gbml_strbuf *m)
{
	gbml_msg_put(m, w->c, sizeof(double) * (size_t) w->k * w->d);
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
	if ((rc = gbml_shard_send_max_f64(&w->shards->ch, both, (size_t) 2 * d)) == GBML_OK)
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
	return gbml_shard_send_sum_i64(&w->shards->ch, sums, (size_t) w->d);
}

/* Rows g[0..n) from whichever shard holds each; every row exactly once. */
static int
km_remote_copy_rows(km_work *w, const int64_t *g, int n, double *out)
{
	gbml_shard_channel *ch = &w->shards->ch;
	gbml_strbuf *m = km_request(w, KM_OP_ROWS);
	uint8_t    *seen = gbml_alloc0(w->env, (size_t) (n > 0 ? n : 1));
	int			rc;

	if (seen == NULL)
		return w->env->error_code;
	gbml_msg_put_i64(m, n);
	gbml_msg_put(m, g, sizeof(int64_t) * (size_t) n);
	if ((rc = km_send(w)) != GBML_OK)
		goto done;
	for (int s = 0; s < ch->n_shards && rc == GBML_OK; s++)
	{
		gbml_msg_reader r;
		int64_t		found;

		if (!gbml_shard_reply(ch, s, &r))
			continue;
		found = gbml_msg_get_count(&r, n);
		for (int64_t i = 0; i < found && !r.bad; i++)
		{
			int64_t		pos = gbml_msg_get_count(&r, n - 1);

			gbml_msg_get(&r, out + (size_t) pos * w->d, sizeof(double) * w->d);
			if (seen[pos]++)
				r.bad = true;
		}
		rc = gbml_shard_reply_done(ch, s, &r);
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
		sh->cur_block = gbml_alloc_array(w->env, (size_t) sh->n_blocks, sizeof(int64_t));
		sh->block_pot = gbml_alloc0(w->env, sizeof(int64_t *) * sh->ch.n_shards);
		if (sh->cur_block == NULL || sh->block_pot == NULL)
			return w->env->error_code;
		for (int s = 0; s < sh->ch.n_shards; s++)
			if (sh->ch.n_rows[s] > 0 &&
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
	for (int s = 0; s < sh->ch.n_shards; s++)
	{
		gbml_msg_reader r;

		if (!gbml_shard_reply(&sh->ch, s, &r))
			continue;
		gbml_msg_get(&r, sh->block_pot[s], sizeof(int64_t) * cells);
		if ((rc = gbml_shard_reply_done(&sh->ch, s, &r)) != GBML_OK)
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
	for (int s = 0; s < sh->ch.n_shards; s++)
	{
		gbml_msg_reader r;
		float		mx;

		if (!gbml_shard_reply(&sh->ch, s, &r))
			continue;
		gbml_msg_get(&r, &mx, sizeof(mx));
		if ((rc = gbml_shard_reply_done(&sh->ch, s, &r)) != GBML_OK)
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
				want[GBML_KM_CAND_LANES],
				nt[GBML_KM_CAND_LANES] = {0};
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
	/* every shard's reply lists its terms of the wanted blocks in request order: into a bucket per block */
	terms = gbml_alloc_array(w->env, (size_t) n_want * KM_SHARD_BLOCK_ROWS, sizeof(km_term));
	if (terms == NULL)
		return w->env->error_code;
	for (int s = 0; s < sh->ch.n_shards && rc == GBML_OK; s++)
	{
		gbml_msg_reader r;

		if (!gbml_shard_reply(&sh->ch, s, &r))
			continue;
		for (int q = 0; q < n_want && !r.bad; q++)
		{
			int64_t		c = gbml_msg_get_count(&r, KM_SHARD_BLOCK_ROWS - nt[q]);

			gbml_msg_get(&r, terms + (size_t) q * KM_SHARD_BLOCK_ROWS + nt[q], sizeof(km_term) * (size_t) c);
			nt[q] += c;
		}
		rc = gbml_shard_reply_done(&sh->ch, s, &r);
	}
	for (int q = 0; q < n_want && rc == GBML_OK; q++)
	{
		km_term    *bt = terms + (size_t) q * KM_SHARD_BLOCK_ROWS;

		qsort(bt, (size_t) nt[q], sizeof(km_term), km_term_cmp);
		for (int i = 0; i < m; i++)
		{
			int64_t		cum = 0;

			if (blk[i] != want[q])
				continue;
			rows[i] = nt[q] > 0 ? bt[nt[q] - 1].row : w->n - 1;
			for (int64_t e = 0; e < nt[q]; e++)
			{
				cum += bt[e].term;
				if (cum > rem[i])
				{
					rows[i] = bt[e].row;
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
	traffic_before = w->shards->ch.traffic.bytes_sent + w->shards->ch.traffic.bytes_received;
	rc = gbml_shard_send_sum_i64(&w->shards->ch, acc, n);
	w->shards->ch.traffic.step_bytes = w->shards->ch.traffic.bytes_sent + w->shards->ch.traffic.bytes_received -
		traffic_before;
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
	for (int s = 0; s < sh->ch.n_shards; s++)
	{
		gbml_msg_reader r;
		int64_t		c;

		if (!gbml_shard_reply(&sh->ch, s, &r))
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
			for (at = kept; at > 0 && km_far_better(&f, &far[at - 1]); at--)
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
		if ((rc = gbml_shard_reply_done(&sh->ch, s, &r)) != GBML_OK)
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
	if ((rc = gbml_shard_send_max_f64(&w->shards->ch, mx, 1)) == GBML_OK && !(*mx > 0))
		*mx = 0;
	return rc;
}

static int
km_remote_dist_sum(km_work *w, double scale, int64_t *total)
{
	gbml_msg_put_f64(km_request(w, KM_OP_DIST_SUM), scale);
	return gbml_shard_send_sum_i64(&w->shards->ch, total, 1);
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

/*
 * The union's canonical order (shard_order.h), and each shard's rows'
 * global indices sent to it in pages, so that neither side holds more than
 * a few pages.
 */
static int
km_global_order(km_work *w)
{
	return gbml_shard_send_ranks(&w->shards->ch, w->n, KM_OP_HASHES, KM_OP_RANKS, NULL, NULL);
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
	sh->n_blocks = (w->n + KM_SHARD_BLOCK_ROWS - 1) / KM_SHARD_BLOCK_ROWS;
	if ((rc = gbml_shard_channel_open(&sh->ch, link, KM_SHARD_MAGIC, "kmeans", env)) != GBML_OK)
		return rc;
	w->c = gbml_alloc_array(env, kd, sizeof(double));
	w->cnew = gbml_alloc_array(env, kd, sizeof(double));
	w->fix_scale = gbml_alloc_array(env, (size_t) w->d, sizeof(double));
	w->sums = gbml_alloc_array(env, kd, sizeof(int64_t));
	w->counts = gbml_alloc_array(env, (size_t) w->k, sizeof(int64_t));
	if (!w->c || !w->cnew || !w->fix_scale || !w->sums || !w->counts)
		return env->error_code;
	for (int s = 0; s < sh->ch.n_shards; s++)
	{
		double		xn;

		if (!km_hello_xnorm(link, s, &xn))
			return gbml_error(env, GBML_EINVAL, "kmeans: shard %s answered its opening with a malformed message",
							  link->name(link->ctx, s));
		n_total += sh->ch.n_rows[s];
		w->xnorm_max = fmax(w->xnorm_max, xn);
	}
	if (n_total != w->n)
		return gbml_error(env, GBML_EINVAL, "kmeans: the shards hold %lld rows, the coordinator expected %lld",
						  (long long) n_total, (long long) w->n);
	if ((rc = km_global_order(w)) == GBML_OK)
		gbml_shard_traffic_mark_setup(&sh->ch.traffic);
	return rc;
}

void
km_shards_traffic(const km_work *w, gbml_shard_traffic *out)
{
	if (w->shards)
		*out = w->shards->ch.traffic;
}

void
km_shards_free(km_work *w)
{
	km_shards  *sh = w->shards;

	if (sh == NULL)
		return;
	for (int s = 0; sh->block_pot && s < sh->ch.n_shards; s++)
		gbml_free(w->env, sh->block_pot[s]);
	gbml_free(w->env, sh->block_pot);
	gbml_free(w->env, sh->cur_block);
	gbml_shard_channel_close(&sh->ch);
	gbml_free(w->env, sh);
	w->shards = NULL;
}
