/*
 * shard_cancel.h — cancel requests to shards that cannot hold the backend
 * (shard_cancel.c).
 */
#ifndef GBML_SHARD_CANCEL_H
#define GBML_SHARD_CANCEL_H

#include "libpq-fe.h"

/*
 * Asks the server of each of conns (busy connections) to cancel its query,
 * all at once, and returns when each has been asked or after about two
 * seconds, whichever comes first.  Uses no PostgreSQL API off the calling
 * thread; callable while an ERROR is being cleaned up.
 */
void		gbml_cancel_shard_queries(PGconn *const *conns, int n);

#endif
