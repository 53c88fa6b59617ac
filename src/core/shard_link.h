/*
 * shard_link.h — training across servers (issue 14), what every algorithm
 * shares: how a coordinator reaches its shards (gbml_shard_link: the glue
 * backs it with libpq connections, src/pg/shards.c; the unit tests with
 * calls in one process), what a shard answers with (gbml_shard_ops, one
 * table per algorithm that trains on shards), and the exchange that counts
 * the traffic.  Every shard's reply ends with the seconds it worked on the
 * request (gbml_shard_answer adds it, gbml_shards_exchange takes it off),
 * so a training's report tells the shards' work from the coordination.
 */
#ifndef GBML_SHARD_LINK_H
#define GBML_SHARD_LINK_H

#include "dataset.h"
#include "strbuf.h"

typedef struct gbml_shard_link
{
	int			n_shards;
	void	   *ctx;
	/* the shard's name, for messages */
	const char *(*name) (void *ctx, int shard);

	/*
	 * Sends req[s] (req_len[s] bytes) to every shard s at once and waits for
	 * every reply; reply[s] stays valid until the next call.  Returns GBML_OK
	 * or an error (env) that names the shard.
	 */
	int			(*round_trip) (void *ctx, const uint8_t *const *req, const size_t *req_len,
							   const uint8_t **reply, size_t *reply_len, gbml_env *env);
	/* each shard's answer to its open (the algorithm's hello, shard_msg.h's head first) */
	const uint8_t **hello;
	const size_t *hello_len;
} gbml_shard_link;

/* What went between a coordinator and its shards. */
typedef struct gbml_shard_traffic
{
	int			shards;			/* 0: the rows were on this server */
	int64_t		round_trips;	/* steps, each one request to every shard at once */
	int64_t		bytes_sent;		/* requests' payload, all shards */
	int64_t		bytes_received; /* replies' payload, all shards */
	double		wait_seconds;	/* the coordinator's time waiting on its shards */
	double		shard_seconds;	/* per step, the busiest shard's work, summed */
	int64_t		step_bytes;		/* the algorithm's main step (a Lloyd pass, a gradient), requests and replies */
	/* of which the setting-up exchanges (K-Means: the global order), so the steps' own cost can be told */
	int64_t		setup_round_trips;
	int64_t		setup_bytes;
	double		setup_wait_seconds;
	double		setup_shard_seconds;
} gbml_shard_traffic;

/* What *t counts so far becomes its setting-up part. */
void		gbml_shard_traffic_mark_setup(gbml_shard_traffic *t);

/* A shard's side of an algorithm: its rows (canonical order) in, answers out. */
typedef struct gbml_shard_ops
{
	uint32_t	hello_magic;	/* the first 4 bytes of the algorithm's hello */
	/* state over ds (the shard's rows) for a training with algo_params; the hello appended to hello */
	int			(*open) (const gbml_dataset *ds, const void *algo_params, gbml_env *env, void **state,
						 gbml_strbuf *hello);
	/* one request of the coordinator's, its answer appended to reply */
	int			(*step) (void *state, const uint8_t *req, size_t len, gbml_strbuf *reply);
	void		(*close) (void *state);
} gbml_shard_ops;

/*
 * The traffic as JSON members (no braces, no comma around them) for a
 * training's timings: step_name names the algorithm's main step
 * ("lloyd_pass", "gradient"), whose bytes step_bytes counts.
 */
void		gbml_shard_traffic_json(gbml_strbuf *m, const gbml_shard_traffic *t, const char *step_name);

/* ops->step, then the seconds it took (the trailer gbml_shards_exchange takes off). */
int			gbml_shard_answer(const gbml_shard_ops *ops, void *state, const uint8_t *req, size_t len,
							  gbml_strbuf *reply);

/* The union's rows and features from the shards' hellos (the coordinator's dataset). */
int			gbml_shards_describe(const gbml_shard_link *link, uint32_t magic, gbml_env *env,
								 int64_t *n_rows, int *n_features);

/*
 * req[s] to every shard s at once through link; the replies without their
 * trailers, the bytes, the wait and the busiest shard's work into *traffic.
 */
int			gbml_shards_exchange(const gbml_shard_link *link, const uint8_t *const *req, const size_t *req_len,
								 const uint8_t **reply, size_t *reply_len, gbml_shard_traffic *traffic,
								 gbml_env *env);

#endif
