/*
 * shard_cancel.c — asks shards to cancel their running queries without
 * letting a shard that does not answer hold the coordinator's backend.
 *
 * A cancel request (PQcancel: libpq 15 has no non-blocking one) connects
 * to the shard's postmaster, sends the request and waits for the
 * postmaster to close that connection.  A shard whose host is gone, or
 * whose postmaster is stopped, holds it inside libpq for minutes or for
 * ever, where no interrupt is seen, and it runs while a cancel, timeout or
 * ERROR of the training is being cleaned up.  So each request goes out on
 * a thread of its own (libpq's cancel touches no PostgreSQL state and
 * blocks every signal here), and the backend waits for them together at
 * most SHARD_CANCEL_WAIT_MS; a request still waiting then is left to its
 * thread, which frees what it holds when libpq returns (or goes with the
 * process).  Closing the connection, which the caller does next, also
 * ends a shard's work at its next reply.
 */
#include "postgres.h"

#include <pthread.h>
#include <time.h>

#include "env.h"
#include "libpq-fe.h"
#include "shard_cancel.h"

#define SHARD_CANCEL_WAIT_MS 2000

/*
 * What the backend and the request threads share: freed by whichever lets
 * go last, the backend (done waiting) or the last thread to return.
 */
typedef struct cancel_round
{
	pthread_mutex_t lock;
	pthread_cond_t done;
	int			pending;		/* threads whose request has not returned */
	bool		backend_gone;	/* the backend stopped waiting */
} cancel_round;

typedef struct cancel_request
{
	cancel_round *round;
	PGcancel   *cancel;
} cancel_request;

/* Called with r->lock held, which it releases. */
static void
let_go(cancel_round *r)
{
	bool		last = r->pending == 0 && r->backend_gone;

	pthread_mutex_unlock(&r->lock);
	if (last)
	{
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->done);
		free(r);
	}
}

static void *
send_cancel(void *arg)
{
	cancel_request *req = arg;
	cancel_round *r = req->round;
	char		errbuf[256];

	(void) PQcancel(req->cancel, errbuf, sizeof(errbuf));
	PQfreeCancel(req->cancel);
	free(req);
	pthread_mutex_lock(&r->lock);
	r->pending--;
	pthread_cond_signal(&r->done);
	let_go(r);
	return NULL;
}

void
gbml_cancel_shard_queries(PGconn *const *conns, int n)
{
	cancel_round *r = malloc(sizeof(cancel_round));
	pthread_condattr_t attr;
	struct timespec until;

	if (r == NULL)
		return;
	pthread_mutex_init(&r->lock, NULL);
	/* the wait's deadline on the monotonic clock: a change of the wall clock neither cuts nor stretches it */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&r->done, &attr);
	pthread_condattr_destroy(&attr);
	r->pending = 0;
	r->backend_gone = false;
	for (int i = 0; i < n; i++)
	{
		cancel_request *req = malloc(sizeof(cancel_request));
		pthread_t	thread;

		if (req == NULL || (req->cancel = PQgetCancel(conns[i])) == NULL)
		{
			free(req);
			continue;
		}
		req->round = r;
		pthread_mutex_lock(&r->lock);
		r->pending++;
		pthread_mutex_unlock(&r->lock);
		if (gbml_thread_start(&thread, send_cancel, req))
		{
			pthread_detach(thread);
			continue;
		}
		/* no thread: this request is not sent; the closed connection ends that shard's work */
		PQfreeCancel(req->cancel);
		free(req);
		pthread_mutex_lock(&r->lock);
		r->pending--;
		pthread_mutex_unlock(&r->lock);
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += SHARD_CANCEL_WAIT_MS / 1000;
	until.tv_nsec += (long) (SHARD_CANCEL_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L)
	{
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->lock);
	while (r->pending > 0)
		if (pthread_cond_timedwait(&r->done, &r->lock, &until) != 0)
			break;
	r->backend_gone = true;
	let_go(r);
}
