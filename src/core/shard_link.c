/*
 * shard_link.c — the exchange every training across servers makes
 * (shard_link.h): hellos read, requests sent to every shard at once through
 * the link, the replies' trailers taken off and counted.
 */
#include "shard_link.h"
#include "shard_msg.h"

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

int
gbml_shards_describe(const gbml_shard_link *link, uint32_t magic, gbml_env *env, int64_t *n_rows, int *n_features)
{
	*n_rows = 0;
	*n_features = 0;
	for (int s = 0; s < link->n_shards; s++)
	{
		gbml_msg_reader r = {link->hello[s], link->hello[s] + link->hello_len[s], false};
		uint32_t	head[2];
		int64_t		n,
					d;

		gbml_msg_get(&r, head, sizeof(head));
		n = gbml_msg_get_i64(&r);
		d = gbml_msg_get_i64(&r);
		if (r.bad || head[0] != magic || head[1] != GBML_SHARD_HELLO_VERSION || n < 0 || d < 0 || d > INT32_MAX)
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
gbml_shards_exchange(const gbml_shard_link *link, const uint8_t *const *req, const size_t *req_len,
					 const uint8_t **reply, size_t *reply_len, gbml_shard_traffic *traffic, gbml_env *env)
{
	double		t0 = gbml_now(),
				busiest = 0;
	int			rc;

	for (int s = 0; s < link->n_shards; s++)
		traffic->bytes_sent += (int64_t) req_len[s];
	rc = link->round_trip(link->ctx, req, req_len, reply, reply_len, env);
	traffic->wait_seconds += gbml_now() - t0;
	traffic->round_trips++;
	traffic->shards = link->n_shards;
	if (rc != GBML_OK)
		return rc;
	for (int s = 0; s < link->n_shards; s++)
	{
		double		busy;

		if (reply_len[s] < sizeof(double))
			return gbml_error(env, GBML_EINVAL, "shard %s sent a malformed reply", link->name(link->ctx, s));
		traffic->bytes_received += (int64_t) reply_len[s];
		reply_len[s] -= sizeof(double);
		memcpy(&busy, reply[s] + reply_len[s], sizeof(double));
		busiest = busy > busiest ? busy : busiest;
	}
	traffic->shard_seconds += busiest;
	return GBML_OK;
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
