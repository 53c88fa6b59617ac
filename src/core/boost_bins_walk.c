/*
 * boost_bins_walk.c — see boost_bins_walk.h.  One helper thread per run
 * read ahead (about 20 µs to start, against milliseconds to read a run),
 * so there is no thread to park or wake between runs, and nothing outlives
 * a walk.
 */
#include "boost_bins_walk.h"

#include <stdio.h>
#include <string.h>

/* Bytes of a run at most: whole blocks, at least one (gbml_boost_bins_test_sizes changes it). */
static size_t run_bytes_max = (size_t) 16 << 20;

typedef struct gbml_boost_bins_reader
{
	uint8_t    *buf[2];			/* runs land here in turn */
	size_t		buf_bytes;
	const uint8_t **view;		/* n_blocks: each block of the runs in hand */
	int64_t		run_blocks;		/* blocks per run */
	/* the read in flight */
	const gbml_boost_bins *bins;
	int64_t		pending_run;
	int			pending_buf;
	int			pending_rc;		/* the read's errno, 0 when it went through, DAMAGED */
	/* DAMAGED: where */
	int64_t		bad_block;
	int			bad_feature;
	int			bad_bin;
} gbml_boost_bins_reader;

/* pending_rc of a run read whole whose bytes hold a bin past its feature's borders */
#define DAMAGED (-1)

static int64_t
run_first(const gbml_boost_bins_reader *rd, int64_t run)
{
	return run * rd->run_blocks;
}

static int64_t
run_end(const gbml_boost_bins_reader *rd, int64_t run)
{
	int64_t		e = (run + 1) * rd->run_blocks;

	return e < rd->bins->n_blocks ? e : rd->bins->n_blocks;
}

/* The run's bytes: its blocks lie one after the other in the file. */
static size_t
run_bytes(const gbml_boost_bins_reader *rd, int64_t run)
{
	const gbml_boost_bins *b = rd->bins;
	int64_t		last = run_end(rd, run) - 1;

	return (size_t) (gbml_boost_block_offset(b, last) - gbml_boost_block_offset(b, run_first(rd, run)) +
					 (uint64_t) gbml_boost_block_len(b, last) * (uint64_t) b->n_features);
}

#define MAX_LANES 64

/*
 * The largest of len bytes.  Tiles of MAX_LANES bytes into as many running
 * maxima, a loop of constant length the compiler turns into vector maxima
 * at -O2 (the plain loop stays a byte at a time, which costs a stored
 * training as much as its histograms).
 */
__attribute__((target_clones("avx2", "default")))
static uint8_t
largest(const uint8_t *p, int64_t len)
{
	uint8_t		lane[MAX_LANES] = {0},
				m = 0;
	int64_t		i = 0;

	for (; i + MAX_LANES <= len; i += MAX_LANES)
		for (int j = 0; j < MAX_LANES; j++)
			lane[j] = p[i + j] > lane[j] ? p[i + j] : lane[j];
	for (int j = 0; j < MAX_LANES; j++)
		m = lane[j] > m ? lane[j] : m;
	for (; i < len; i++)
		m = p[i] > m ? p[i] : m;
	return m;
}

/*
 * Reads a run into buf and checks every bin against its feature's largest
 * (the histograms index by bin: a damaged file must not send a pass out of
 * bounds).  0, an errno, or DAMAGED with where in rd.  No env: may run on
 * the helper thread.
 */
static int
read_run(gbml_boost_bins_reader *rd, int64_t run, uint8_t *buf)
{
	const gbml_boost_bins *b = rd->bins;
	uint64_t	base = gbml_boost_block_offset(b, run_first(rd, run));
	int			rc = gbml_temp_read(&b->file, buf, run_bytes(rd, run), base);

	for (int64_t k = run_first(rd, run); rc == 0 && k < run_end(rd, run); k++)
	{
		int64_t		len = gbml_boost_block_len(b, k);
		const uint8_t *blk = buf + (gbml_boost_block_offset(b, k) - base);

		for (int f = 0; f < b->n_features; f++)
		{
			uint8_t		m = largest(blk + (size_t) f * (size_t) len, len);

			if (m > b->limit[f])
			{
				rd->bad_block = k;
				rd->bad_feature = f;
				rd->bad_bin = m;
				return DAMAGED;
			}
		}
	}
	return rc;
}

static void *
read_main(void *arg)
{
	gbml_boost_bins_reader *rd = arg;

	rd->pending_rc = read_run(rd, rd->pending_run, rd->buf[rd->pending_buf]);
	return NULL;
}

static gbml_boost_bins_reader *
reader_open(gbml_boost_bins *bins, gbml_env *env)
{
	gbml_boost_bins_reader *rd;
	size_t		block_bytes = (size_t) bins->block_rows * (size_t) (bins->n_features > 0 ? bins->n_features : 1);

	if (bins->reader)
		return bins->reader;
	if ((rd = gbml_alloc0(env, sizeof(gbml_boost_bins_reader))) == NULL)
		return NULL;
	rd->bins = bins;
	/* two runs in hand: at most an eighth each of what the budget has left */
	rd->run_blocks = (int64_t) (run_bytes_max / block_bytes);
	if (env->memory_limit > 0 && env->memory_limit > env->memory_used &&
		(int64_t) ((env->memory_limit - env->memory_used) / 8 / block_bytes) < rd->run_blocks)
		rd->run_blocks = (int64_t) ((env->memory_limit - env->memory_used) / 8 / block_bytes);
	if (rd->run_blocks > bins->n_blocks)
		rd->run_blocks = bins->n_blocks;
	if (rd->run_blocks < 1)
		rd->run_blocks = 1;
	rd->buf_bytes = (size_t) rd->run_blocks * block_bytes;
	rd->buf[0] = gbml_alloc(env, rd->buf_bytes);
	rd->buf[1] = gbml_alloc(env, rd->buf_bytes);
	rd->view = gbml_alloc0(env, sizeof(uint8_t *) * (size_t) (bins->n_blocks > 0 ? bins->n_blocks : 1));
	bins->reader = rd;
	if (rd->buf[0] == NULL || rd->buf[1] == NULL || rd->view == NULL)
	{
		gbml_boost_bins_reader_free(bins, env);
		return NULL;
	}
	return rd;
}

void
gbml_boost_bins_reader_free(gbml_boost_bins *bins, gbml_env *env)
{
	gbml_boost_bins_reader *rd = bins->reader;

	if (rd == NULL)
		return;
	gbml_free(env, rd->buf[0]);
	gbml_free(env, rd->buf[1]);
	gbml_free(env, rd->view);
	gbml_free(env, rd);
	bins->reader = NULL;
}

/*
 * The stored blocks run by run: run r + 1 is read on a helper thread (or,
 * when no thread starts, right away) while fn works on run r.
 */
static int
walk_stored(gbml_boost_bins *bins, gbml_env *env, const gbml_progress_info *info, gbml_boost_blocks_fn fn,
			void *arg)
{
	gbml_boost_bins_reader *rd = reader_open(bins, env);
	int64_t		n_runs;
	pthread_t	thread;
	bool		running = false;

	if (rd == NULL)
		return env->error_code;
	n_runs = (bins->n_blocks + rd->run_blocks - 1) / rd->run_blocks;
	rd->pending_rc = n_runs > 0 ? read_run(rd, 0, rd->buf[0]) : 0;
	for (int64_t run = 0; run < n_runs; run++)
	{
		int			cur = (int) (run & 1);
		uint64_t	base = gbml_boost_block_offset(bins, run_first(rd, run));

		if (running)
			pthread_join(thread, NULL);
		running = false;
		if (rd->pending_rc == DAMAGED)
			return gbml_error(env, GBML_EIO, "boost: the bins read back from a temporary file are damaged: block %lld, feature %d has bin %d, past its %d borders",
							  (long long) rd->bad_block + 1, rd->bad_feature + 1, rd->bad_bin,
							  (int) bins->limit[rd->bad_feature]);
		if (rd->pending_rc != 0)
			return gbml_error(env, GBML_EIO, "boost: reading bins of blocks %lld to %lld from a temporary file: %s",
							  (long long) run_first(rd, run) + 1, (long long) run_end(rd, run),
							  strerror(rd->pending_rc));
		bins->bytes_read += (int64_t) run_bytes(rd, run);
		if (run + 1 < n_runs)
		{
			rd->pending_run = run + 1;
			rd->pending_buf = 1 - cur;
			rd->pending_rc = 0;
			if (!(running = gbml_thread_start(&thread, read_main, rd)))
				rd->pending_rc = read_run(rd, run + 1, rd->buf[1 - cur]);	/* no thread: read now, no overlap */
		}
		for (int64_t b = run_first(rd, run); b < run_end(rd, run); b++)
			rd->view[b] = rd->buf[cur] + (gbml_boost_block_offset(bins, b) - base);
		fn(arg, rd->view, run_first(rd, run), run_end(rd, run));
		if (gbml_progress(env, info))
		{
			if (running)
				pthread_join(thread, NULL);
			return gbml_error(env, GBML_ECANCELLED, "canceled");
		}
	}
	return GBML_OK;
}

size_t
gbml_boost_bins_test_sizes(size_t run_bytes)
{
	size_t		was = run_bytes_max;

	run_bytes_max = run_bytes > 0 ? run_bytes : was;
	return was;
}

int
gbml_boost_bins_walk(gbml_boost_bins *bins, gbml_env *env, const gbml_progress_info *info,
					 gbml_boost_blocks_fn fn, void *arg)
{
	gbml_progress_info some = {"train", 0, 0, NULL, 0};

	if (!bins->stored)
	{
		fn(arg, (const uint8_t *const *) bins->blocks, 0, bins->n_blocks);
		return GBML_OK;
	}
	return walk_stored(bins, env, info && info->phase ? info : &some, fn, arg);
}
