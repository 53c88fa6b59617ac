/*
 * shard_link.h — training across servers (issue 14), what every algorithm
 * shares: how a coordinator reaches its shards (gbml_shard_link: the glue
 * backs it with libpq connections, src/pg/shards.c; the unit tests with
 * calls in one process), what a shard answers with (gbml_shard_ops, one
 * table per algorithm that trains on shards), and the exchange that counts
 * the traffic.  Every shard's reply ends with the seconds it worked on the
 * request (gbml_shard_answer adds it, gbml_shard_exchange takes it off),
 * so a training's report tells the shards' work from the coordination.
 */
#ifndef GBML_SHARD_LINK_H
#define GBML_SHARD_LINK_H

#include "dataset.h"
#include "shard_msg.h"
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
	/* it trains with an eval set split from the shards' rows (eval_fraction: gbml_shard_split_eval) */
	bool		takes_eval_split;
	/*
	 * ... which its coordinator gathers (gbml_shards_gather_eval) and
	 * scores as an eval set of its own; its shards answer
	 * GBML_SHARD_OP_EVAL_ROWS
	 */
	bool		gathers_eval_split;
	/* ... or with the coordinator's own eval rows (eval_source), which the coordinator scores */
	bool		takes_eval_source;
	/* categorical columns (their categories the union's, which the coordinator gives every shard) */
	bool		takes_categorical;
	/*
	 * ... which its shards one-hot encode (onehot.h) by the union's rows per
	 * category: each shard's training rows' counts go to the coordinator
	 * first, the union's come back (onehot_counts.h; the glue's opening)
	 */
	bool		counts_categories;
	/*
	 * State over ds (the shard's rows) for a training with algo_params, and
	 * its eval rows (NULL: none); the hello appended to hello
	 */
	int			(*open) (const gbml_dataset *ds, const gbml_dataset *eval, const void *algo_params, gbml_env *env,
						 void **state, gbml_strbuf *hello);
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

/* ops->step, then the seconds it took (the trailer gbml_shard_exchange takes off). */
int			gbml_shard_answer(const gbml_shard_ops *ops, void *state, const uint8_t *req, size_t len,
							  gbml_strbuf *reply);

/*
 * A shard's answer to GBML_SHARD_OP_EVAL_ROWS (shard_msg.h): a page of its
 * eval rows (eval NULL: none), the request read from r (after its code).
 */
int			gbml_shard_eval_rows_page(const gbml_dataset *eval, int n_features, gbml_msg_reader *r,
									  gbml_strbuf *reply, gbml_env *env);

/*
 * The coordinator's side: every shard's eval rows, page by page, appended
 * to eval (initialised by the caller) as one server's eval split appends
 * them; the caller puts them in canonical order (the driver does).
 */
int			gbml_shards_gather_eval(const gbml_shard_link *link, uint32_t magic, const char *algo,
									gbml_dataset *eval, gbml_env *env);
/* ... pages of at most page_rows rows (0: about 64 MB; the tests' small pages) */
int			gbml_shards_gather_eval_paged(const gbml_shard_link *link, uint32_t magic, const char *algo,
										  gbml_dataset *eval, int64_t page_rows, gbml_env *env);

/* A hello's common head (shard_msg.h): the algorithm's magic, the version, rows and features. */
void		gbml_shard_hello_head(gbml_strbuf *hello, uint32_t magic, int64_t n_rows, int64_t n_features);

/* The features shard s's hello gives (0 from a shard that never saw a row); -1 for a malformed hello. */
int64_t		gbml_shard_hello_features(const gbml_shard_link *link, int s, uint32_t magic);

/* The union's rows and features from the shards' hellos (the coordinator's dataset). */
int			gbml_shards_describe(const gbml_shard_link *link, uint32_t magic, gbml_env *env,
								 int64_t *n_rows, int *n_features);

/*
 * A coordinator's side of one training: the link, each shard's row count
 * (a shard without rows is left out of the replies, unless the algorithm
 * says it answers: boosting's shard with eval rows only), a request being
 * built, the last replies, the traffic.  `algo` prefixes its messages.
 */
typedef struct gbml_shard_channel
{
	const gbml_shard_link *link;
	gbml_env   *env;
	const char *algo;
	int			n_shards;
	int64_t    *n_rows;			/* per shard, from its hello */
	bool	   *answers;		/* per shard: its replies are read (at first: it has rows) */
	gbml_strbuf msg;			/* the request for every shard (gbml_shard_request) */
	gbml_strbuf *each;			/* per shard: its own request (gbml_shard_request_to) */
	const uint8_t **req;		/* per shard: what the next exchange sends */
	size_t	   *req_len;
	const uint8_t **reply;		/* per shard: the last replies, trailers off */
	size_t	   *reply_len;
	gbml_shard_traffic traffic;
} gbml_shard_channel;

/* Over link, the hellos checked against magic (their rows, their features' count agreeing). */
int			gbml_shard_channel_open(gbml_shard_channel *ch, const gbml_shard_link *link, uint32_t magic,
									const char *algo, gbml_env *env);
void		gbml_shard_channel_close(gbml_shard_channel *ch);

/* A new request for every shard in ch->msg: its code first. */
gbml_strbuf *gbml_shard_request(gbml_shard_channel *ch, int64_t op);
/* ch->msg to every shard at once; the replies into ch->reply. */
int			gbml_shard_send(gbml_shard_channel *ch);
/* A new request for shard s alone in ch->each[s] (every shard gets one before gbml_shard_send_each). */
gbml_strbuf *gbml_shard_request_to(gbml_shard_channel *ch, int s, int64_t op);
/* ch->each[s] to every shard s at once; the replies into ch->reply. */
int			gbml_shard_send_each(gbml_shard_channel *ch);
/* ch->req[s] (each shard its own request) to every shard at once; the replies into ch->reply. */
int			gbml_shard_exchange(gbml_shard_channel *ch);

/* Shard s's reply to read into *r; false for a shard that does not answer (no reply to read). */
bool		gbml_shard_reply(const gbml_shard_channel *ch, int s, gbml_msg_reader *r);
/* GBML_OK when *r read shard s's reply to its end, else an error naming the shard. */
int			gbml_shard_reply_done(const gbml_shard_channel *ch, int s, const gbml_msg_reader *r);

/*
 * Every shard's n_rows rows in pages of at most `page`: each round trip
 * sends every shard its next page's request (op, i64 first, i64 count —
 * count 0 once its rows are all done — then what put adds, may be NULL),
 * and take (may be NULL: the replies are empty) reads shard s's reply to a
 * page of count > 0 rows from first; until every shard's rows are done.
 */
typedef void (*gbml_shard_page_put) (void *arg, gbml_strbuf *m, int s, int64_t first, int64_t count);
typedef int (*gbml_shard_page_take) (void *arg, int s, int64_t first, int64_t count, gbml_msg_reader *r);
/*
 * Rows of a page of row_bytes a row the coordinator holds while it is
 * exchanged: at most max_rows, no more than the largest shard's rows, and
 * within a sixteenth of the budget's room (its copies, and the other pages
 * beside it), at least one.  The model bytes do not depend on it.
 */
int64_t		gbml_shard_page_rows(const gbml_shard_channel *ch, size_t row_bytes, int64_t max_rows);
int			gbml_shard_pages(gbml_shard_channel *ch, int64_t op, int64_t page, gbml_shard_page_put put,
							 gbml_shard_page_take take, void *arg);

/* ch->msg to every shard; each reply is n int64 values, added into acc[n]. */
int			gbml_shard_send_sum_i64(gbml_shard_channel *ch, int64_t *acc, size_t n);
/* ... n doubles, added into acc[n] (in shard order). */
int			gbml_shard_send_sum_f64(gbml_shard_channel *ch, double *acc, size_t n);
/* ... n doubles, their largest into acc[n] (-inf when no shard has rows). */
int			gbml_shard_send_max_f64(gbml_shard_channel *ch, double *acc, size_t n);

#endif
