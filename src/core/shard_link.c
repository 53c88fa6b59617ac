/*
 * shard_link.c — what every training across servers shares
 * (shard_link.h): the hellos' head, the coordinator's channel (requests sent
 * to every shard at once through the link, the replies' trailers taken off
 * and counted, replies folded), and the shards' timed answers.
 */
#include "shard_link.h"
#include "shard_msg.h"

#include <math.h>
#include <string.h>

/* Eval rows a page carries at most: about 64 MB. */
#define EVAL_PAGE_BYTES ((size_t) 64 << 20)
#define EVAL_PAGE_MIN_ROWS 256	/* fewer rows a page under a small budget, not fewer than these */

int
gbml_shard_answer(const gbml_shard_ops *ops, void *state, const uint8_t *req, size_t len, gbml_strbuf *reply)
{
	double		t0 = gbml_now();
	int			rc = ops->step(state, req, len, reply);

	if (rc != GBML_OK)
		return rc;
	gbml_msg_put_f64(reply, gbml_now() - t0);
	return gbml_sb_status(reply);
}

void
gbml_shard_hello_head(gbml_strbuf *hello, uint32_t magic, int64_t n_rows, int64_t n_features)
{
	uint32_t	head[2] = {magic, GBML_SHARD_HELLO_VERSION};

	gbml_msg_put(hello, head, sizeof(head));
	gbml_msg_put_i64(hello, n_rows);
	gbml_msg_put_i64(hello, n_features);
}

/* Shard s's hello head: its rows and features, or false when it is not one of magic's version. */
static bool
read_hello_head(const gbml_shard_link *link, int s, uint32_t magic, int64_t *n, int64_t *d)
{
	gbml_msg_reader r = {link->hello[s], link->hello[s] + link->hello_len[s], false};
	uint32_t	head[2];

	gbml_msg_get(&r, head, sizeof(head));
	*n = gbml_msg_get_i64(&r);
	*d = gbml_msg_get_i64(&r);
	return !r.bad && head[0] == magic && head[1] == GBML_SHARD_HELLO_VERSION && *n >= 0 && *d >= 0 && *d <= INT32_MAX;
}

int64_t
gbml_shard_hello_features(const gbml_shard_link *link, int s, uint32_t magic)
{
	int64_t		n,
				d;

	return read_hello_head(link, s, magic, &n, &d) ? d : -1;
}

int
gbml_shards_describe(const gbml_shard_link *link, uint32_t magic, gbml_env *env, int64_t *n_rows, int *n_features)
{
	*n_rows = 0;
	*n_features = 0;
	for (int s = 0; s < link->n_shards; s++)
	{
		int64_t		n,
					d;

		if (!read_hello_head(link, s, magic, &n, &d))
			return gbml_error(env, GBML_EINVAL, "shard %s answered its opening with a malformed message "
							  "(is gbml the same version there?)", link->name(link->ctx, s));
		if (n == 0)
			continue;
		if (*n_features != 0 && d != *n_features)
			return gbml_error(env, GBML_EINVAL, "shard %s has %lld features, another shard %d",
							  link->name(link->ctx, s), (long long) d, *n_features);
		*n_features = (int) d;
		*n_rows += n;
	}
	return GBML_OK;
}

int
gbml_shard_channel_open(gbml_shard_channel *ch, const gbml_shard_link *link, uint32_t magic, const char *algo,
						gbml_env *env)
{
	int			S = link->n_shards;
	int64_t		n;
	int			d;
	int			rc;

	memset(ch, 0, sizeof(*ch));
	ch->link = link;
	ch->env = env;
	ch->algo = algo;
	ch->n_shards = S;
	gbml_sb_init(&ch->msg, env);
	if ((rc = gbml_shards_describe(link, magic, env, &n, &d)) != GBML_OK)
		return rc;
	ch->n_rows = gbml_alloc0(env, sizeof(int64_t) * S);
	ch->answers = gbml_alloc0(env, sizeof(bool) * S);
	ch->req = gbml_alloc0(env, sizeof(void *) * S);
	ch->req_len = gbml_alloc0(env, sizeof(size_t) * S);
	ch->reply = gbml_alloc0(env, sizeof(void *) * S);
	ch->reply_len = gbml_alloc0(env, sizeof(size_t) * S);
	ch->each = gbml_alloc0(env, sizeof(gbml_strbuf) * S);
	if (!ch->n_rows || !ch->answers || !ch->req || !ch->req_len || !ch->reply || !ch->reply_len || !ch->each)
		return env->error_code;
	for (int s = 0; s < S; s++)
		gbml_sb_init(&ch->each[s], env);
	for (int s = 0; s < S; s++)
	{
		int64_t		ds;

		(void) read_hello_head(link, s, magic, &ch->n_rows[s], &ds);	/* checked by describe */
		ch->answers[s] = ch->n_rows[s] > 0;
	}
	return GBML_OK;
}

void
gbml_shard_channel_close(gbml_shard_channel *ch)
{
	if (ch->env == NULL)
		return;
	gbml_sb_free(&ch->msg);
	for (int s = 0; ch->each && s < ch->n_shards; s++)
		gbml_sb_free(&ch->each[s]);
	gbml_free(ch->env, ch->each);
	gbml_free(ch->env, ch->n_rows);
	gbml_free(ch->env, ch->answers);
	gbml_free(ch->env, ch->req);
	gbml_free(ch->env, ch->req_len);
	gbml_free(ch->env, ch->reply);
	gbml_free(ch->env, ch->reply_len);
	ch->env = NULL;
}

gbml_strbuf *
gbml_shard_request(gbml_shard_channel *ch, int64_t op)
{
	ch->msg.len = 0;
	gbml_msg_put_i64(&ch->msg, op);
	return &ch->msg;
}

gbml_strbuf *
gbml_shard_request_to(gbml_shard_channel *ch, int s, int64_t op)
{
	ch->each[s].len = 0;
	gbml_msg_put_i64(&ch->each[s], op);
	return &ch->each[s];
}

int
gbml_shard_send_each(gbml_shard_channel *ch)
{
	int			rc;

	for (int s = 0; s < ch->n_shards; s++)
	{
		if ((rc = gbml_sb_status(&ch->each[s])) != GBML_OK)
			return rc;
		ch->req[s] = (const uint8_t *) ch->each[s].data;
		ch->req_len[s] = ch->each[s].len;
	}
	return gbml_shard_exchange(ch);
}

int
gbml_shard_exchange(gbml_shard_channel *ch)
{
	const gbml_shard_link *link = ch->link;
	gbml_shard_traffic *traffic = &ch->traffic;
	double		t0 = gbml_now(),
				busiest = 0;
	int			rc;

	for (int s = 0; s < link->n_shards; s++)
		traffic->bytes_sent += (int64_t) ch->req_len[s];
	rc = link->round_trip(link->ctx, ch->req, ch->req_len, ch->reply, ch->reply_len, ch->env);
	traffic->wait_seconds += gbml_now() - t0;
	traffic->round_trips++;
	traffic->shards = link->n_shards;
	if (rc != GBML_OK)
		return rc;
	for (int s = 0; s < link->n_shards; s++)
	{
		double		busy;

		if (ch->reply_len[s] < sizeof(double))
			return gbml_error(ch->env, GBML_EINVAL, "%s: shard %s sent a malformed reply", ch->algo,
							  link->name(link->ctx, s));
		traffic->bytes_received += (int64_t) ch->reply_len[s];
		ch->reply_len[s] -= sizeof(double);
		memcpy(&busy, ch->reply[s] + ch->reply_len[s], sizeof(double));
		busiest = busy > busiest ? busy : busiest;
	}
	traffic->shard_seconds += busiest;
	return GBML_OK;
}

int
gbml_shard_send(gbml_shard_channel *ch)
{
	int			rc;

	if ((rc = gbml_sb_status(&ch->msg)) != GBML_OK)
		return rc;
	for (int s = 0; s < ch->n_shards; s++)
	{
		ch->req[s] = (const uint8_t *) ch->msg.data;
		ch->req_len[s] = ch->msg.len;
	}
	return gbml_shard_exchange(ch);
}

bool
gbml_shard_reply(const gbml_shard_channel *ch, int s, gbml_msg_reader *r)
{
	r->p = ch->reply[s];
	r->end = ch->reply[s] + ch->reply_len[s];
	r->bad = false;
	return ch->answers[s];
}

int
gbml_shard_reply_done(const gbml_shard_channel *ch, int s, const gbml_msg_reader *r)
{
	if (!r->bad && r->p == r->end)
		return GBML_OK;
	return gbml_error(ch->env, GBML_EINVAL, "%s: shard %s sent a malformed reply", ch->algo,
					  ch->link->name(ch->link->ctx, s));
}

/* Rows of row_bytes within a sixteenth of the budget's room, at most max_rows (no budget: max_rows). */
static int64_t
budget_page_rows(const gbml_env *env, size_t row_bytes, int64_t max_rows)
{
	size_t		room;
	int64_t		fit;

	if (env->memory_limit == 0)
		return max_rows;
	room = env->memory_limit > env->memory_used ? env->memory_limit - env->memory_used : 0;
	fit = (int64_t) (room / 16 / (row_bytes > 0 ? row_bytes : 1));
	return fit < max_rows ? fit : max_rows;
}

int64_t
gbml_shard_page_rows(const gbml_shard_channel *ch, size_t row_bytes, int64_t max_rows)
{
	int64_t		rows = budget_page_rows(ch->env, row_bytes, max_rows),
				most = 1;

	for (int s = 0; s < ch->n_shards; s++)
		most = ch->n_rows[s] > most ? ch->n_rows[s] : most;
	rows = most < rows ? most : rows;
	return rows > 0 ? rows : 1;
}

int
gbml_shard_pages(gbml_shard_channel *ch, int64_t op, int64_t page, gbml_shard_page_put put,
				 gbml_shard_page_take take, void *arg)
{
	int64_t    *done = gbml_alloc0(ch->env, sizeof(int64_t) * (size_t) (ch->n_shards > 0 ? ch->n_shards : 1));
	bool		more = true;
	int			rc = GBML_OK;

	if (done == NULL)
		return ch->env->error_code;
	while (rc == GBML_OK && more)
	{
		more = false;
		for (int s = 0; s < ch->n_shards; s++)
		{
			int64_t		count = ch->n_rows[s] - done[s] < page ? ch->n_rows[s] - done[s] : page;
			gbml_strbuf *m = gbml_shard_request_to(ch, s, op);

			gbml_msg_put_i64(m, done[s]);
			gbml_msg_put_i64(m, count);
			if (put)
				put(arg, m, s, done[s], count);
		}
		if ((rc = gbml_shard_send_each(ch)) != GBML_OK)
			break;
		for (int s = 0; s < ch->n_shards && rc == GBML_OK; s++)
		{
			int64_t		count = ch->n_rows[s] - done[s] < page ? ch->n_rows[s] - done[s] : page;
			gbml_msg_reader r;

			if (take && count > 0 && gbml_shard_reply(ch, s, &r) &&
				(rc = take(arg, s, done[s], count, &r)) == GBML_OK)
				rc = gbml_shard_reply_done(ch, s, &r);
			done[s] += count;
			more |= done[s] < ch->n_rows[s];
		}
	}
	gbml_free(ch->env, done);
	return rc;
}

/* The fold of gbml_shard_send_sum_* and _max: each reply n values, into acc. */
typedef enum shard_fold
{
	FOLD_SUM_I64,
	FOLD_SUM_F64,
	FOLD_MAX_F64
} shard_fold;

static int
send_fold(gbml_shard_channel *ch, shard_fold fold, void *acc, size_t n)
{
	int			rc;

	if ((rc = gbml_shard_send(ch)) != GBML_OK)
		return rc;
	for (size_t i = 0; i < n; i++)
	{
		if (fold == FOLD_SUM_I64)
			((int64_t *) acc)[i] = 0;
		else
			((double *) acc)[i] = fold == FOLD_SUM_F64 ? 0 : -INFINITY;
	}
	for (int s = 0; s < ch->n_shards; s++)
	{
		gbml_msg_reader r;

		if (!gbml_shard_reply(ch, s, &r))
			continue;
		for (size_t i = 0; i < n; i++)
		{
			if (fold == FOLD_SUM_I64)
				((int64_t *) acc)[i] += gbml_msg_get_i64(&r);
			else if (fold == FOLD_SUM_F64)
				((double *) acc)[i] += gbml_msg_get_f64(&r);
			else
				((double *) acc)[i] = fmax(((double *) acc)[i], gbml_msg_get_f64(&r));
		}
		if ((rc = gbml_shard_reply_done(ch, s, &r)) != GBML_OK)
			return rc;
	}
	return GBML_OK;
}

int
gbml_shard_send_sum_i64(gbml_shard_channel *ch, int64_t *acc, size_t n)
{
	return send_fold(ch, FOLD_SUM_I64, acc, n);
}

int
gbml_shard_send_sum_f64(gbml_shard_channel *ch, double *acc, size_t n)
{
	return send_fold(ch, FOLD_SUM_F64, acc, n);
}

int
gbml_shard_send_max_f64(gbml_shard_channel *ch, double *acc, size_t n)
{
	return send_fold(ch, FOLD_MAX_F64, acc, n);
}

void
gbml_shard_traffic_mark_setup(gbml_shard_traffic *t)
{
	t->setup_round_trips = t->round_trips;
	t->setup_bytes = t->bytes_sent + t->bytes_received;
	t->setup_wait_seconds = t->wait_seconds;
	t->setup_shard_seconds = t->shard_seconds;
}

void
gbml_shard_traffic_json(gbml_strbuf *m, const gbml_shard_traffic *t, const char *step_name)
{
	gbml_sb_printf(m, "\"shards\":%d,\"shard_round_trips\":%lld,\"shard_bytes_sent\":%lld,"
				   "\"shard_bytes_received\":%lld,\"shard_wait_seconds\":%.6f,\"shard_busy_seconds\":%.6f,"
				   "\"coordination_seconds\":%.6f,\"%s_bytes\":%lld",
				   t->shards, (long long) t->round_trips, (long long) t->bytes_sent, (long long) t->bytes_received,
				   t->wait_seconds, t->shard_seconds, t->wait_seconds - t->shard_seconds, step_name,
				   (long long) t->step_bytes);
	if (t->setup_round_trips > 0)
		gbml_sb_printf(m, ",\"setup_round_trips\":%lld,\"setup_bytes\":%lld,\"setup_wait_seconds\":%.6f,"
					   "\"setup_shard_seconds\":%.6f", (long long) t->setup_round_trips, (long long) t->setup_bytes,
					   t->setup_wait_seconds, t->setup_shard_seconds);
}

/* ------------------------------------------------------------------ */
/* Eval rows gathered to the coordinator                              */
/* ------------------------------------------------------------------ */

/* Rows of n_features a page holds. */
static int64_t
eval_page_rows(int n_features)
{
	size_t		row = sizeof(float) * (size_t) n_features + 16;

	return (int64_t) (EVAL_PAGE_BYTES / row > 0 ? EVAL_PAGE_BYTES / row : 1);
}

int
gbml_shard_eval_rows_page(const gbml_dataset *eval, int n_features, gbml_msg_reader *r, gbml_strbuf *reply,
						  gbml_env *env)
{
	int64_t		first = gbml_msg_get_i64(r),
				count = gbml_msg_get_i64(r),
				n = eval ? eval->n_rows : 0,
				m,
				at = 0;
	int64_t    *addr;
	float	   *x;
	int			rc;

	if (r->bad || r->p != r->end || first < 0 || count < 1 || count > eval_page_rows(n_features))
	{
		r->bad = true;
		return GBML_OK;
	}
	m = first >= n ? 0 : (n - first < count ? n - first : count);
	/* the page's rows fetched, and their copy in the reply (a message that grows by doubling) */
	if (m > 0 && (rc = gbml_budget_check(env, (size_t) m * (sizeof(int64_t) + 3 * (sizeof(float) * (size_t) n_features + 16)),
										 "a page of %lld held-out rows for the coordinator", (long long) m)) != GBML_OK)
		return rc;
	gbml_msg_put_i64(reply, eval ? eval->group_state : 0);
	gbml_msg_put_i64(reply, n_features);
	gbml_msg_put_i64(reply, m);
	if (m == 0)
		return GBML_OK;
	addr = gbml_alloc_array(env, (size_t) m, sizeof(int64_t));
	x = gbml_alloc_array(env, (size_t) m * (size_t) (n_features > 0 ? n_features : 1), sizeof(float));
	if (addr == NULL || x == NULL)
	{
		gbml_free(env, addr);
		gbml_free(env, x);
		return env->error_code;
	}
	/* rows first .. first + m - 1 of the chunks, in order */
	for (int64_t c = 0, seen = 0; c < eval->n_chunks && at < m; c++)
	{
		int64_t		rows = eval->chunks[c]->n_rows;

		for (int64_t i = seen + rows > first ? (first > seen ? first - seen : 0) : rows; i < rows && at < m; i++)
			addr[at++] = (c << 32) | i;
		seen += rows;
	}
	rc = gbml_dataset_fetch_rows(eval, addr, m, x, env);
	for (int64_t i = 0; i < m && rc == GBML_OK; i++)
	{
		const gbml_chunk *ch = eval->chunks[addr[i] >> 32];
		int64_t		row = addr[i] & 0xffffffffLL;
		float		label = ch->label[row],
					weight = ch->weight[row];

		gbml_msg_put(reply, &label, sizeof(float));
		gbml_msg_put_i64(reply, ch->group[row]);
		gbml_msg_put(reply, &weight, sizeof(float));
		gbml_msg_put(reply, x + (size_t) i * (size_t) n_features, sizeof(float) * (size_t) n_features);
	}
	gbml_free(env, addr);
	gbml_free(env, x);
	return rc;
}

/*
 * Shard s's page (of at most page rows) into eval, its rows' width *d
 * (the first page's; every page's must agree); *more: it was full, the
 * shard may have more.
 */
static int
append_eval_page(const gbml_shard_channel *ch, int s, gbml_dataset *eval, int *d, int64_t page, bool *more)
{
	gbml_msg_reader r;
	int64_t		group_state,
				width,
				m;
	float	   *x = NULL;
	int			rc = GBML_OK;

	*more = false;
	if (!gbml_shard_reply(ch, s, &r))
		return GBML_OK;
	group_state = gbml_msg_get_i64(&r);
	width = gbml_msg_get_count(&r, GBML_MAX_FEATURES);
	m = gbml_msg_get_count(&r, page);
	if (m > 0 && *d >= 0 && width != *d)
		r.bad = true;			/* (a malformed reply, below) */
	if (m > 0 && !r.bad)
	{
		*d = (int) width;
		if ((x = gbml_alloc_array(ch->env, (size_t) (width > 0 ? width : 1), sizeof(float))) == NULL)
			return ch->env->error_code;
	}
	for (int64_t i = 0; i < m && !r.bad && rc == GBML_OK; i++)
	{
		gbml_row	row = {0};

		gbml_msg_get(&r, &row.label, sizeof(float));
		row.group = gbml_msg_get_i64(&r);
		gbml_msg_get(&r, &row.weight, sizeof(float));
		gbml_msg_get(&r, x, sizeof(float) * (size_t) width);
		if (r.bad)
			break;
		/* as the one-server split appends a held-out row (dataset.c) */
		row.x = x;
		row.n_features = (int) width;
		row.group_is_null = group_state <= 0;
		rc = gbml_dataset_append(eval, ch->env, &row, false);
	}
	gbml_free(ch->env, x);
	if (rc != GBML_OK)
		return rc;
	if ((rc = gbml_shard_reply_done(ch, s, &r)) != GBML_OK)
		return rc;
	*more = m == page;
	return GBML_OK;
}

int
gbml_shards_gather_eval(const gbml_shard_link *link, uint32_t magic, const char *algo, gbml_dataset *eval,
						gbml_env *env)
{
	return gbml_shards_gather_eval_paged(link, magic, algo, eval, 0, env);
}

int
gbml_shards_gather_eval_paged(const gbml_shard_link *link, uint32_t magic, const char *algo, gbml_dataset *eval,
							  int64_t page_rows, gbml_env *env)
{
	gbml_shard_channel ch;
	int64_t		page;
	int64_t    *next = NULL;
	bool	   *more = NULL,
				any = true;
	int			d,
				rows_d = -1,
				rc;

	if ((rc = gbml_shard_channel_open(&ch, link, magic, algo, env)) != GBML_OK)
	{
		gbml_shard_channel_close(&ch);
		return rc;
	}
	d = 0;
	for (int s = 0; s < ch.n_shards; s++)
	{
		int64_t		n,
					fd;

		if (ch.n_rows[s] > 0 && read_hello_head(link, s, magic, &n, &fd))
			d = (int) fd;
		/* every shard answers this request, one without training rows too: its held-out rows may be all it has */
		ch.answers[s] = true;
	}
	/* the rows the shards train on are at least as wide as their eval rows (raw, when they encode): a page fits */
	page = page_rows > 0 && page_rows < eval_page_rows(d) ? page_rows : eval_page_rows(d);
	/*
	 * Within a sixteenth of the budget's room (the shards' is the same
	 * limit, and a page is held there about three times: rows, reply and
	 * its growth), at least EVAL_PAGE_MIN_ROWS; a shard without training
	 * rows may hold only held-out ones, so its training rows do not bound it
	 */
	{
		int64_t		fit = budget_page_rows(env, sizeof(float) * (size_t) (d > 0 ? d : 1) + 16, page);

		fit = fit > EVAL_PAGE_MIN_ROWS ? fit : EVAL_PAGE_MIN_ROWS;
		page = fit < page ? fit : page;
	}
	next = gbml_alloc0(env, sizeof(int64_t) * (size_t) ch.n_shards);
	more = gbml_alloc0(env, sizeof(bool) * (size_t) ch.n_shards);
	if (next == NULL || more == NULL)
		rc = env->error_code;
	for (int s = 0; s < ch.n_shards && more; s++)
		more[s] = true;
	/* every shard a page a round trip, until each has sent a short one */
	while (rc == GBML_OK && any)
	{
		for (int s = 0; s < ch.n_shards; s++)
		{
			gbml_strbuf *m = gbml_shard_request_to(&ch, s, GBML_SHARD_OP_EVAL_ROWS);

			gbml_msg_put_i64(m, next[s]);
			gbml_msg_put_i64(m, page);
		}
		if ((rc = gbml_shard_send_each(&ch)) != GBML_OK)
			break;
		any = false;
		for (int s = 0; s < ch.n_shards && rc == GBML_OK; s++)
		{
			if (!more[s])
				continue;
			rc = append_eval_page(&ch, s, eval, &rows_d, page, &more[s]);
			next[s] += page;
			any |= more[s];
		}
	}
	gbml_free(env, next);
	gbml_free(env, more);
	gbml_shard_channel_close(&ch);
	return rc;
}
