/*
 * test_chunk_store_file.c — the temporary-file residence of dataset chunks
 * (chunk_store_file.h) over the malloc env's plain files: chunks of odd
 * sizes read back, rows fetched by address, the reorder in one window and
 * in several, missing-value flags, the memory budget, write failures (a
 * test env whose write hook fails part way), the read-ahead reader
 * (chunk_prefetch.h), and the canonical-order guarantee: a dataset streamed
 * to files gives the rows a host dataset gives, in the same order.
 */
#include "harness.h"
#include "chunk_prefetch.h"
#include "chunk_store_file.h"
#include "rng.h"
#include "test_util.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* Stored rows and their reference copy: row g of the store is ref[g * d ..]. */
typedef struct stored_rows
{
	gbml_chunk_store *s;
	int			d;
	int			n_chunks;
	int64_t		total;
	int64_t		chunk_start[64];
	int64_t		chunk_len[64];
	float	   *ref;
	bool		hashed;			/* put with random hashes (put_hashed): the store groups the rows */
	uint64_t   *hash;			/* hashed: row g's hash */
	bool		ascending;		/* hashed: every row in group 0, the hashes ascending as the rows arrive */
} stored_rows;

static int64_t
address_of(const stored_rows *t, int64_t g)
{
	int			c = 0;

	while (g >= t->chunk_start[c] + t->chunk_len[c])
		c++;
	return ((int64_t) c << 32) | (g - t->chunk_start[c]);
}

static int64_t
global_of(const stored_rows *t, int64_t a)
{
	return t->chunk_start[a >> 32] + (a & 0xffffffffLL);
}

/* Puts chunks of the given sizes (random values) through buffer(); returns put's last result. */
static int
put_chunks(stored_rows *t, gbml_env *env, const int64_t *sizes, int n, int d, uint64_t seed)
{
	gbml_rng	rng;
	int			rc = 0;

	gbml_rng_seed(&rng, seed);
	t->d = d;
	{
		int64_t		grown = t->total;	/* after rows put before, if any */

		for (int i = 0; i < n; i++)
			grown += sizes[i];
		t->ref = realloc(t->ref, sizeof(float) * (size_t) (grown > 0 ? grown : 1) * (size_t) d);
		t->hash = realloc(t->hash, sizeof(uint64_t) * (size_t) (grown > 0 ? grown : 1));
	}
	(void) env;
	for (int i = 0; i < n; i++)
	{
		float	   *x = t->s->buffer(t->s, sizes[i], d);

		CHECK(x != NULL);
		if (x == NULL)
			return 1;
		for (int64_t k = 0; k < sizes[i] * d; k++)
			x[k] = (float) gbml_rng_uniform(&rng);
		if (t->hashed)
		{
			uint64_t   *h = malloc(sizeof(uint64_t) * (size_t) sizes[i]);

			for (int64_t k = 0; k < sizes[i]; k++)
				t->hash[t->total + k] = h[k] = t->ascending ? (uint64_t) (t->total + k) : gbml_rng_next(&rng);
			rc = t->s->put_hashed(t->s, x, h, sizes[i], d);
			free(h);
		}
		else
			rc = t->s->put(t->s, x, sizes[i], d);
		if (rc != 0)
			return rc;
		memcpy(t->ref + (size_t) t->total * (size_t) d, x, sizeof(float) * (size_t) (sizes[i] * d));
		t->chunk_start[t->n_chunks] = t->total;
		t->chunk_len[t->n_chunks++] = sizes[i];
		t->total += sizes[i];
	}
	/* as the dataset's seal does: the last write done, reads may start on any thread */
	return t->s->flush(t->s);
}

/* Destroys t's store, which must leave nothing allocated in env, and frees the reference copy. */
static void
stored_rows_close(stored_rows *t, gbml_env *env)
{
	t->s->destroy(t->s);
	CHECK(env->memory_used == 0);
	free(t->ref);
	free(t->hash);
}

/* Every stored chunk reads back as the reference. */
static bool
chunks_match(const stored_rows *t)
{
	bool		ok = true;

	for (int c = 0; c < t->n_chunks; c++)
	{
		float	   *x = malloc(sizeof(float) * (size_t) (t->chunk_len[c] * t->d + 1));

		ok = ok && t->s->read_chunk(t->s, c, x) == 0 &&
			memcmp(x, t->ref + (size_t) t->chunk_start[c] * t->d, sizeof(float) * (size_t) (t->chunk_len[c] * t->d)) == 0;
		free(x);
	}
	return ok;
}

static const int64_t odd_sizes[] = {1, 7, 64, 1000, 3, 4097, 255, 65, 2};
#define N_ODD ((int) (sizeof(odd_sizes) / sizeof(odd_sizes[0])))

TEST(file_store_reads_back_chunks_of_odd_sizes)
{
	gbml_env	env;
	stored_rows t = {0};
	gbml_spill_stats st;

	gbml_env_init_malloc(&env, 1);
	t.s = gbml_chunk_store_file_open(&env);
	CHECK(t.s != NULL && strcmp(t.s->residence, "file") == 0 && t.s->read_any_thread);
	CHECK(put_chunks(&t, &env, odd_sizes, N_ODD, 13, 1) == 0);
	CHECK(chunks_match(&t));
	CHECK(gbml_chunk_store_file_stats(t.s, &st));
	CHECK(st.rows_spilled == t.total && st.chunks == N_ODD);
	CHECK(st.bytes_written == (uint64_t) t.total * 13 * sizeof(float));
	CHECK(st.bytes_read == st.bytes_written);
	CHECK(t.s->read_chunk(t.s, N_ODD, t.ref) != 0 && t.s->error_code(t.s) == GBML_EINVAL);
	stored_rows_close(&t, &env);
}

TEST(file_store_fetches_random_addresses)
{
	gbml_env	env;
	stored_rows t = {0};
	gbml_rng	rng;
	int64_t		n = 3000;
	int64_t    *addr = malloc(sizeof(int64_t) * (size_t) n);
	float	   *out;
	bool		ok = true;

	gbml_env_init_malloc(&env, 1);
	t.s = gbml_chunk_store_file_open(&env);
	CHECK(put_chunks(&t, &env, odd_sizes, N_ODD, 5, 2) == 0);
	out = malloc(sizeof(float) * (size_t) n * 5);
	gbml_rng_seed(&rng, 3);
	/* random rows, some twice, and a run of neighbours */
	for (int64_t i = 0; i < n; i++)
		addr[i] = address_of(&t, i < 100 ? 2000 + i : (int64_t) (gbml_rng_next(&rng) % (uint64_t) t.total));
	addr[n - 1] = addr[n - 2];
	CHECK(t.s->fetch(t.s, addr, n, out) == 0);
	for (int64_t i = 0; i < n; i++)
		ok = ok && memcmp(out + i * 5, t.ref + global_of(&t, addr[i]) * 5, 5 * sizeof(float)) == 0;
	CHECK(ok);
	addr[7] = ((int64_t) 3 << 32) | 1000;	/* chunk 4 has 1000 rows: 0..999 */
	CHECK(t.s->fetch(t.s, addr, n, out) != 0 && t.s->error_code(t.s) == GBML_EINVAL);
	CHECK(strstr(t.s->error(t.s), "not stored") != NULL);
	stored_rows_close(&t, &env);
	free(addr);
	free(out);
}

/*
 * A fetch of 80,000 addresses sorts their places with the radix sort (65,536
 * and more; fewer take qsort): a shuffled order with repeats, from rows in
 * chunk order and from rows grouped by hash, each row where it was asked.
 */
TEST(file_store_fetches_long_lists)
{
	static const int64_t sizes[] = {30000, 1, 29999, 20000};

	for (int hashed = 0; hashed < 2; hashed++)
	{
		gbml_env	env;
		stored_rows t = {0};
		int64_t		n = 80000;
		int64_t    *addr = malloc(sizeof(int64_t) * (size_t) n),
				   *g = tu_shuffled(n, 3 + hashed);
		float	   *out = malloc(sizeof(float) * 3 * (size_t) n);
		bool		ok = true;

		gbml_env_init_malloc(&env, 1);
		t.s = gbml_chunk_store_file_open(&env);
		t.hashed = hashed;
		CHECK(put_chunks(&t, &env, sizes, 4, 3, 12) == 0);
		for (int64_t i = 0; i < n; i++)
			addr[i] = address_of(&t, g[i] % t.total);	/* some rows twice */
		CHECK(t.s->fetch(t.s, addr, n, out) == 0);
		for (int64_t i = 0; i < n; i++)
			ok = ok && memcmp(out + i * 3, t.ref + (g[i] % t.total) * 3, sizeof(float) * 3) == 0;
		CHECK(ok);
		stored_rows_close(&t, &env);
		free(addr);
		free(g);
		free(out);
	}
}

/* Whether this system gives back a temporary file's blocks (punch hole): then permute does. */
static bool
discard_probe(void)
{
	gbml_env	env;
	gbml_temp_file f;
	char		page[8192] = {1};
	bool		ok;

	gbml_env_init_malloc(&env, 1);
	if (gbml_temp_create(&env, &f) != GBML_OK)
		return false;
	ok = gbml_temp_write(&env, &f, page, sizeof(page), 0) == GBML_OK && gbml_temp_discard(&f, 0, 4096);
	gbml_temp_close(&env, &f);
	return ok;
}

/*
 * Keeps a random n of the stored rows in random order, chunks of first_rows
 * then chunk_rows, within `budget` (0: the default); checks every row.
 */
static void
check_permute(size_t budget, int64_t first_rows, int64_t chunk_rows, int64_t dropped, size_t memory_limit,
			  bool hashed)
{
	gbml_env	env;
	stored_rows t = {0};
	gbml_rng	rng;
	gbml_spill_stats before,
				after;
	int64_t    *order,
			   *src,
				n;
	int			d = 9;
	bool		ok = true;

	gbml_env_init_malloc(&env, 1);
	env.memory_limit = memory_limit;
	t.s = gbml_chunk_store_file_open(&env);
	t.hashed = hashed;
	/* runs of 2 KB at most (56 rows; about 37 at 700 KB), under the 32 KB a budget needs to group */
	gbml_chunk_store_file_test_group_stage(2048);
	CHECK(put_chunks(&t, &env, odd_sizes, N_ODD, d, 4) == 0);
	gbml_chunk_store_file_test_group_stage(0);
	gbml_chunk_store_file_set_permute_budget(t.s, budget);
	/* grouped by hash: the rows are not in chunk order in the file, and only the main thread reads */
	CHECK(t.s->read_any_thread == !hashed);
	n = t.total - dropped;
	order = malloc(sizeof(int64_t) * (size_t) t.total);
	src = malloc(sizeof(int64_t) * (size_t) t.total);
	for (int64_t i = 0; i < t.total; i++)
		order[i] = i;
	gbml_rng_seed(&rng, 5 + budget);
	for (int64_t i = t.total - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) (gbml_rng_next(&rng) % (uint64_t) (i + 1)),
					tmp = order[i];

		order[i] = order[j];
		order[j] = tmp;
	}
	for (int64_t i = 0; i < n; i++)
		src[i] = address_of(&t, order[i]);
	gbml_chunk_store_file_stats(t.s, &before);
	CHECK(t.s->permute(t.s, src, n, first_rows, chunk_rows) == 0);
	gbml_chunk_store_file_stats(t.s, &after);
	/* the output layout, and every row where it belongs */
	CHECK(after.chunks == (n <= first_rows ? 1 : 1 + (n - first_rows + chunk_rows - 1) / chunk_rows));
	for (int64_t c = 0, p = 0; c < after.chunks; c++)
	{
		int64_t		rows = c == 0 ? first_rows : chunk_rows;
		float	   *x;

		rows = n - p < rows ? n - p : rows;
		x = malloc(sizeof(float) * (size_t) (rows * d));
		ok = ok && t.s->read_chunk(t.s, (int) c, x) == 0;
		for (int64_t r = 0; ok && r < rows; r++, p++)
			ok = memcmp(x + r * d, t.ref + order[p] * d, sizeof(float) * d) == 0;
		free(x);
	}
	CHECK(ok);
	/* grouped by hash or one window: the output written once; several: staged, then written back in place */
	CHECK(t.s->read_any_thread);
	if (hashed)					/* the staged rows' last runs are written by permute */
		CHECK(after.bytes_written == (uint64_t) ((t.total + n) * d) * sizeof(float));
	else if (budget >= (size_t) (n * d) * sizeof(float))
		CHECK(after.bytes_written - before.bytes_written == (uint64_t) (n * d) * sizeof(float));
	else if (budget > 0)
		CHECK(after.bytes_written - before.bytes_written == 2 * (uint64_t) (n * d) * sizeof(float));
	/* grouped rows are given back as they are read for the last time (all of them, or what is not kept) */
	if (after.reorders_in_place > 0)
		CHECK(hashed && after.bytes_discarded == 0);	/* in place: no second file, nothing to give back */
	else if (hashed && discard_probe())
		CHECK(after.bytes_discarded >= (uint64_t) (dropped > 0 ? 1 : t.total * d) * sizeof(float) / 2);
	else
		CHECK(after.bytes_discarded == 0);
	stored_rows_close(&t, &env);
	free(order);
	free(src);
}

TEST(file_store_permutes_in_one_window)
{
	check_permute(0, 37, 501, 0, 0, false);
	check_permute((size_t) 64 << 20, 501, 501, 100, 0, false);
}

TEST(file_store_permutes_in_several_windows)
{
	check_permute(3 * 501 * 9 * sizeof(float), 37, 501, 100, 0, false);
	check_permute(1, 37, 501, 5000, 0, false);	/* a window per output chunk, one row staged per window */
	check_permute(3 * 501 * 9 * sizeof(float), 5000, 100, 17, 0, false);
	/* the default budget: half of what the env's limit leaves free */
	check_permute(0, 64, 300, 10, 700 << 10, false);
}

/*
 * Rows put with their hashes go to 64 groups' staging buffers (an eighth of
 * the free budget, here at most 2 KB: at 700 KB, runs of about 37 rows), so
 * the file holds runs of groups, not chunks; permute still gives every row
 * its place, in one write of the output whatever the windows.
 */
TEST(file_store_groups_rows_by_hash)
{
	/* units of 100 bytes (rows are 36): a unit given back while a row in it is still to be read shows as zeros */
	gbml_chunk_store_file_test_discard_unit(100);
	check_permute(0, 37, 501, 0, 0, true);
	check_permute(3 * 501 * 9 * sizeof(float), 37, 501, 100, 700 << 10, true);
	check_permute(1, 37, 501, 5000, 700 << 10, true);
	gbml_chunk_store_file_test_discard_unit(0);
	check_permute(0, 37, 501, 0, 0, true);
	check_permute(0, 37, 501, 0, 700 << 10, true);
	check_permute(3 * 501 * 9 * sizeof(float), 37, 501, 100, 700 << 10, true);
	check_permute(1, 37, 501, 5000, 700 << 10, true);
	check_permute(3 * 501 * 9 * sizeof(float), 5000, 100, 17, 0, true);
}

/* Opens t's store and puts the odd sizes' rows (9 features) grouped by hash in runs of 56; ascending: see stored_rows. */
static void
put_grouped(stored_rows *t, gbml_env *env, uint64_t seed, bool ascending)
{
	t->s = gbml_chunk_store_file_open(env);
	t->hashed = true;
	t->ascending = ascending;
	gbml_chunk_store_file_test_group_stage(2048);
	CHECK(put_chunks(t, env, odd_sizes, N_ODD, 9, seed) == 0);
	gbml_chunk_store_file_test_group_stage(0);
}

/* The permute budget that gives a grouped reorder windows of `rows` rows of d features (0: the default). */
static size_t
window_budget(int64_t rows, int d)
{
	/* the window shares it with fetch's 1 MB span and its 32 bytes a row of places */
	return rows == 0 ? 0 : ((size_t) 1 << 20) + (size_t) rows * ((size_t) d * sizeof(float) + 32);
}

/* The stored rows' indices sorted by hash (the canonical order's first key), ties by index. */
static const stored_rows *by_hash_rows;

static int
cmp_by_hash(const void *a, const void *b)
{
	uint64_t	x = by_hash_rows->hash[*(const int64_t *) a],
				y = by_hash_rows->hash[*(const int64_t *) b];

	return x < y ? -1 : x > y ? 1 : (*(const int64_t *) a > *(const int64_t *) b) - (*(const int64_t *) a < *(const int64_t *) b);
}

static int64_t *
sorted_by_hash(const stored_rows *t)
{
	int64_t    *g = malloc(sizeof(int64_t) * (size_t) t->total);

	for (int64_t i = 0; i < t->total; i++)
		g[i] = i;
	by_hash_rows = t;
	qsort(g, (size_t) t->total, sizeof(int64_t), cmp_by_hash);
	return g;
}

/* Rows [first, first + n) of the output (chunks of `rows` rows after a first of first_rows) match ref at order. */
static bool
output_matches(const stored_rows *t, const int64_t *order, int64_t n, int64_t first_rows, int64_t chunk_rows)
{
	bool		ok = true;
	float	   *x = malloc(sizeof(float) * (size_t) ((first_rows > chunk_rows ? first_rows : chunk_rows) * t->d));

	for (int64_t c = 0, p = 0; ok && p < n; c++)
	{
		int64_t		rows = c == 0 ? first_rows : chunk_rows;

		rows = n - p < rows ? n - p : rows;
		ok = t->s->read_chunk(t->s, (int) c, x) == 0;
		for (int64_t r = 0; ok && r < rows; r++, p++)
			ok = memcmp(x + r * t->d, t->ref + order[p] * t->d, sizeof(float) * (size_t) t->d) == 0;
		/* and a range of rows of the chunk, through the middle */
		if (ok && rows > 2)
		{
			int64_t		a = rows / 3,
						m = rows / 2;

			ok = t->s->read_rows(t->s, (int) c, a, m, x) == 0 &&
				memcmp(x, t->ref + order[p - rows + a] * t->d, sizeof(float) * (size_t) t->d) == 0 &&
				memcmp(x + (m - 1) * t->d, t->ref + order[p - rows + a + m - 1] * t->d, sizeof(float) * (size_t) t->d) == 0;
		}
	}
	free(x);
	return ok;
}

/*
 * The canonical order sorts by hash, so rows grouped by hash (runs of 56
 * rows here) are reordered in place: each window written over its own
 * rows' places, in a few segments; nothing given back, no second file.
 * Whatever the windows (one; several, cut where the group changes; smaller
 * than a group, cut inside one), with rows dropped or not, every row reads
 * back where it belongs, by chunk, by range and by address, on any thread;
 * then a plain put adds a chunk, and a second reorder (into a new file)
 * reads the first one's segments.
 */
static void
check_in_place(int64_t window_rows, int64_t dropped, bool expect_in_place)
{
	gbml_env	env;
	stored_rows t = {0};
	gbml_spill_stats st;
	int64_t    *order,
			   *src,
			   *addr,
				n;
	float	   *x;
	bool		ok = true;
	static const int64_t more[] = {77};

	gbml_env_init_malloc(&env, 1);
	put_grouped(&t, &env, 21, false);
	gbml_chunk_store_file_set_permute_budget(t.s, window_budget(window_rows, 9));
	order = sorted_by_hash(&t);
	/* dropped rows: every k-th of the order */
	n = 0;
	for (int64_t i = 0; i < t.total; i++)
		if (dropped == 0 || i % (t.total / dropped) != 1)
			order[n++] = order[i];
	src = malloc(sizeof(int64_t) * (size_t) n);
	for (int64_t i = 0; i < n; i++)
		src[i] = address_of(&t, order[i]);
	CHECK(t.s->permute(t.s, src, n, 37, 501) == 0);
	gbml_chunk_store_file_stats(t.s, &st);
	CHECK(st.reorders_in_place == (expect_in_place ? 1 : 0));
	if (expect_in_place)
		CHECK(st.bytes_discarded == 0);
	/* windows cut where the group changes: a segment or two a group (its runs), one more per dropped row */
	if (expect_in_place)
		CHECK(st.segments >= 1 && st.segments <= 2 * 64 + dropped + 8);
	CHECK(st.bytes_written == (uint64_t) ((t.total + n) * 9) * sizeof(float));
	CHECK(t.s->read_any_thread);
	CHECK(output_matches(&t, order, n, 37, 501));
	/* by address: the output's rows, shuffled */
	addr = malloc(sizeof(int64_t) * (size_t) n);
	x = malloc(sizeof(float) * 9 * (size_t) n);
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		p = (i * 7919) % n;

		addr[i] = p < 37 ? p : ((1 + (p - 37) / 501) << 32) | ((p - 37) % 501);
	}
	CHECK(t.s->fetch(t.s, addr, n, x) == 0);
	for (int64_t i = 0; i < n; i++)
		ok = ok && memcmp(x + i * 9, t.ref + order[(i * 7919) % n] * 9, sizeof(float) * 9) == 0;
	CHECK(ok);
	/* a plain put after it: one more chunk, read back with the others */
	{
		float	   *y = t.s->buffer(t.s, more[0], 9);

		for (int64_t k = 0; k < more[0] * 9; k++)
			y[k] = (float) k;
		CHECK(t.s->put(t.s, y, more[0], 9) == 0);
		gbml_chunk_store_file_stats(t.s, &st);
		CHECK(t.s->read_chunk(t.s, (int) st.chunks - 1, x) == 0 && x[9 * more[0] - 1] == (float) (9 * more[0] - 1));
	}
	/* a second reorder, the output reversed: into a new file, from the segments */
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		p = n - 1 - i;

		src[i] = p < 37 ? p : ((1 + (p - 37) / 501) << 32) | ((p - 37) % 501);
		addr[i] = order[p];
	}
	CHECK(t.s->permute(t.s, src, n, 501, 501) == 0);
	gbml_chunk_store_file_stats(t.s, &st);
	CHECK(st.reorders_in_place == (expect_in_place ? 1 : 0));
	CHECK(output_matches(&t, addr, n, 501, 501));
	stored_rows_close(&t, &env);
	free(order);
	free(src);
	free(addr);
	free(x);
}

TEST(file_store_reorders_rows_grouped_by_hash_in_place)
{
	/* 5,494 rows in 64 groups of ~86 rows, runs of 56 at most */
	check_in_place(0, 0, true);	/* one window */
	check_in_place(0, 40, true);
	check_in_place(1100, 0, true);	/* windows of at most 1,100 rows, cut where the group changes */
	check_in_place(1100, 40, true);
	check_in_place(300, 40, true);
	/* windows smaller than a group cut every group: too scattered, a new file */
	check_in_place(45, 0, false);
}

/*
 * Rows whose hashes ascend as they arrive, all in one group: the file is
 * already in the output's order, so the windows (cut inside the group, as
 * there is no change of group) make one segment that runs on from window
 * to window, each window written at its own offset in it.
 */
TEST(file_store_in_place_segment_spans_windows)
{
	gbml_env	env;
	stored_rows t = {0};
	gbml_spill_stats st;
	int64_t    *order = malloc(sizeof(int64_t) * 6000),
			   *src = malloc(sizeof(int64_t) * 6000);

	gbml_env_init_malloc(&env, 1);
	put_grouped(&t, &env, 25, true);
	gbml_chunk_store_file_set_permute_budget(t.s, window_budget(700, 9));
	for (int64_t i = 0; i < t.total; i++)
	{
		order[i] = i;
		src[i] = address_of(&t, i);
	}
	CHECK(t.s->permute(t.s, src, t.total, 37, 501) == 0);
	gbml_chunk_store_file_stats(t.s, &st);
	CHECK(st.reorders_in_place == 1 && st.segments == 1);
	CHECK(output_matches(&t, order, t.total, 37, 501));
	stored_rows_close(&t, &env);
	free(order);
	free(src);
}

/* A progress hook that asks to stop once the in-place reorder plans its windows. */
static bool
cancel_in_plan(void *ctx, const gbml_progress_info *info)
{
	(void) ctx;
	return strcmp(info->phase, "spill reorder plan") == 0;
}

/*
 * Planning an in-place reorder walks every kept row (tens of ns each), so it
 * asks the progress hook every 65,536 rows: a cancel there is an error that
 * leaves the file as it was (nothing written yet), every row still readable.
 */
TEST(file_store_in_place_planning_sees_a_cancel)
{
	static const int64_t sizes[] = {70000, 1000};
	gbml_env	env;
	stored_rows t = {0};
	gbml_spill_stats st;
	int64_t    *order,
			   *src;

	gbml_env_init_malloc(&env, 1);
	t.s = gbml_chunk_store_file_open(&env);
	t.hashed = true;
	gbml_chunk_store_file_test_group_stage(2048);
	CHECK(put_chunks(&t, &env, sizes, 2, 2, 26) == 0);
	gbml_chunk_store_file_test_group_stage(0);
	order = sorted_by_hash(&t);
	src = malloc(sizeof(int64_t) * (size_t) t.total);
	for (int64_t i = 0; i < t.total; i++)
		src[i] = address_of(&t, order[i]);
	env.progress_fn = cancel_in_plan;
	CHECK(t.s->permute(t.s, src, t.total, 5000, 5000) != 0);
	CHECK(t.s->error_code(t.s) == GBML_ECANCELLED && strstr(t.s->error(t.s), "canceled") != NULL);
	env.progress_fn = NULL;
	CHECK(chunks_match(&t));
	/* and without the cancel, the same reorder runs in place */
	CHECK(t.s->permute(t.s, src, t.total, 5000, 5000) == 0);
	gbml_chunk_store_file_stats(t.s, &st);
	CHECK(st.reorders_in_place == 1);
	CHECK(output_matches(&t, order, t.total, 5000, 5000));
	stored_rows_close(&t, &env);
	free(order);
	free(src);
}

/* A row kept twice, or rows whose hash order is not the output's, are reordered into a new file instead. */
TEST(file_store_reorders_in_place_only_when_it_can)
{
	for (int twice = 0; twice < 2; twice++)
	{
		gbml_env	env;
		stored_rows t = {0};
		gbml_spill_stats st;
		int64_t    *order,
				   *src;

		gbml_env_init_malloc(&env, 1);
		put_grouped(&t, &env, 22, false);
		gbml_chunk_store_file_set_permute_budget(t.s, window_budget(1100, 9));
		order = twice ? sorted_by_hash(&t) : tu_shuffled(t.total, 23);
		if (twice)
			order[100] = order[99];
		src = malloc(sizeof(int64_t) * (size_t) t.total);
		for (int64_t i = 0; i < t.total; i++)
			src[i] = address_of(&t, order[i]);
		CHECK(t.s->permute(t.s, src, t.total, 37, 501) == 0);
		gbml_chunk_store_file_stats(t.s, &st);
		CHECK(st.reorders_in_place == 0);
		CHECK(output_matches(&t, order, t.total, 37, 501));
		stored_rows_close(&t, &env);
		free(order);
		free(src);
	}
}

/* A budget whose eighth leaves a group under 32 KB keeps the rows in arrival order. */
TEST(file_store_small_budget_does_not_group)
{
	gbml_env	env;
	stored_rows t = {0};

	gbml_env_init_malloc(&env, 1);
	env.memory_limit = 700 << 10;
	t.s = gbml_chunk_store_file_open(&env);
	t.hashed = true;
	CHECK(put_chunks(&t, &env, odd_sizes, N_ODD, 9, 8) == 0);
	CHECK(t.s->read_any_thread);
	CHECK(chunks_match(&t));
	stored_rows_close(&t, &env);
}

/* Rows grouped by hash read back by chunk, by row range and by address before any permute. */
TEST(file_store_grouped_rows_read_back)
{
	gbml_env	env;
	stored_rows t = {0};
	int64_t		n;
	int64_t    *addr;
	float	   *out;
	bool		ok = true;

	gbml_env_init_malloc(&env, 1);
	env.memory_limit = 700 << 10;
	t.s = gbml_chunk_store_file_open(&env);
	t.hashed = true;
	gbml_chunk_store_file_test_group_stage(2048);
	CHECK(put_chunks(&t, &env, odd_sizes, N_ODD, 9, 8) == 0);
	CHECK(!t.s->read_any_thread);
	CHECK(chunks_match(&t));
	/* a read settles the staging; rows put after it are grouped again */
	CHECK(put_chunks(&t, &env, odd_sizes, 4, 9, 9) == 0);
	CHECK(chunks_match(&t));
	/* a plain put among grouped ones is a run of its own */
	t.hashed = false;
	CHECK(put_chunks(&t, &env, odd_sizes + 4, 2, 9, 10) == 0);
	t.hashed = true;
	CHECK(put_chunks(&t, &env, odd_sizes + 6, 3, 9, 11) == 0);
	CHECK(chunks_match(&t));
	out = malloc(sizeof(float) * 9 * 100);
	CHECK(t.s->read_rows(t.s, 5, 1000, 100, out) == 0);
	CHECK(memcmp(out, t.ref + (t.chunk_start[5] + 1000) * 9, sizeof(float) * 9 * 100) == 0);
	n = t.total;
	addr = malloc(sizeof(int64_t) * (size_t) n);
	for (int64_t i = 0; i < n; i++)
		addr[i] = address_of(&t, (i * 7919) % n);
	free(out);
	out = malloc(sizeof(float) * 9 * (size_t) n);
	CHECK(t.s->fetch(t.s, addr, n, out) == 0);
	for (int64_t i = 0; i < n; i++)
		ok = ok && memcmp(out + i * 9, t.ref + ((i * 7919) % n) * 9, sizeof(float) * 9) == 0;
	CHECK(ok);
	gbml_chunk_store_file_test_group_stage(0);
	stored_rows_close(&t, &env);
	free(addr);
	free(out);
}

TEST(file_store_tracks_missing_values_through_permute)
{
	gbml_env	env;
	gbml_chunk_store *s;
	float		x[4 * 8];
	bool		miss[8];
	int64_t		keep[] = {3, 1, 0};

	gbml_env_init_malloc(&env, 1);
	s = gbml_chunk_store_file_open(&env);
	for (int i = 0; i < 4 * 8; i++)
		x[i] = (float) i;
	x[2 * 8 + 2] = NAN;
	x[1 * 8 + 4] = -INFINITY;
	x[3 * 8 + 6] = INFINITY;	/* +Infinity is a value, not a missing one */
	CHECK(s->put(s, x, 2, 8) == 0);
	CHECK(s->put(s, x + 16, 2, 8) == 0);
	CHECK(s->missing(s, miss) == 0);
	for (int j = 0; j < 8; j++)
		CHECK(miss[j] == (j == 2 || j == 4));
	/* without row 2 (chunk 1, row 0) the NaN is gone */
	keep[0] = ((int64_t) 1 << 32) | 1;
	CHECK(s->permute(s, keep, 3, 2, 2) == 0);
	CHECK(s->missing(s, miss) == 0);
	for (int j = 0; j < 8; j++)
		CHECK(miss[j] == (j == 4));
	s->destroy(s);
	CHECK(env.memory_used == 0);
}

/* A write hook that fails once `allowed` bytes were written, with the given code and message. */
typedef struct failing_writes
{
	int			(*write) (void *ctx, void *handle, const void *buf, size_t len, uint64_t offset,
						  char *msg, size_t msg_len);
	void	   *ctx;
	uint64_t	allowed;
	uint64_t	written;
	int			code;
	const char *why;
} failing_writes;

static int
failing_write(void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg, size_t msg_len)
{
	failing_writes *fw = ctx;

	if (fw->written + len > fw->allowed)
	{
		snprintf(msg, msg_len, "%s", fw->why);
		return fw->code;
	}
	fw->written += len;
	return fw->write(fw->ctx, handle, buf, len, offset, msg, msg_len);
}

static void
fail_writes_after(gbml_env *env, failing_writes *fw, uint64_t allowed, int code, const char *why)
{
	gbml_env_init_malloc(env, 1);
	fw->write = env->temp_write;
	fw->ctx = env->temp_ctx;
	fw->allowed = allowed;
	fw->code = code;
	fw->why = why;
	env->temp_write = failing_write;
	env->temp_write_start = NULL;	/* every write through temp_write, before put returns */
	env->temp_write_wait = NULL;
	env->temp_ctx = fw;			/* the plain hooks ignore their ctx */
}

TEST(file_store_write_failure_is_a_clear_error_and_leaks_nothing)
{
	gbml_env	env;
	failing_writes fw = {0};
	stored_rows t = {0};
	int			fds = tu_open_fds();
	int64_t		src[] = {((int64_t) 1 << 32) | 3, 0};
	gbml_spill_stats st;

	fail_writes_after(&env, &fw, (1 + 7) * 6 * sizeof(float), GBML_ETEMPLIMIT,
					  "temporary file size exceeds temp_file_limit (1kB)");
	t.s = gbml_chunk_store_file_open(&env);
	CHECK(put_chunks(&t, &env, odd_sizes, 3, 6, 6) != 0);
	CHECK(t.s->error_code(t.s) == GBML_ETEMPLIMIT);
	CHECK(strstr(t.s->error(t.s), "writing chunk 3 of 64 rows (0.0 MB) after 0.0 MB written") != NULL);
	CHECK(strstr(t.s->error(t.s), "temp_file_limit (1kB)") != NULL);
	CHECK(strstr(t.s->error(t.s), "MB written") != NULL);
	/* the chunks before it are intact, and a failed reorder leaves them so */
	gbml_chunk_store_file_stats(t.s, &st);
	CHECK(st.chunks == 2 && st.rows_spilled == 8);
	CHECK(chunks_match(&t));
	fw.code = GBML_EIO;
	fw.why = "could not write to a temporary file: No space left on device";
	CHECK(t.s->permute(t.s, src, 2, 1, 1) != 0 && t.s->error_code(t.s) == GBML_EIO);
	CHECK(strstr(t.s->error(t.s), "No space left") != NULL);
	CHECK(chunks_match(&t));
	stored_rows_close(&t, &env);
	CHECK(tu_open_fds() == fds);
}

/* Rows grouped by hash in runs of 56 (9 features), in a store whose writes will fail once fw->allowed is set. */
static void
grouped_rows_failing_later(gbml_env *env, failing_writes *fw, stored_rows *t, uint64_t seed)
{
	fail_writes_after(env, fw, UINT64_MAX, GBML_EIO, "could not write to a temporary file: No space left on device");
	put_grouped(t, env, seed, false);
}

/* A grouped reorder that fails after giving back rows: the old file reads as an ERROR, never as zeros. */
TEST(file_store_failed_reorder_after_giving_back_is_an_error)
{
	gbml_env	env;
	failing_writes fw = {0};
	stored_rows t = {0};
	gbml_spill_stats st;
	int64_t    *src;
	float	   *x;

	if (!discard_probe())
		return;					/* nothing is given back here: nothing to check */
	grouped_rows_failing_later(&env, &fw, &t, 12);
	src = malloc(sizeof(int64_t) * (size_t) t.total);
	for (int64_t i = 0; i < t.total; i++)
		src[i] = address_of(&t, i);
	/* windows of 501 rows; the output's first window written, the second one fails */
	gbml_chunk_store_file_set_permute_budget(t.s, 501 * 9 * sizeof(float));
	gbml_chunk_store_file_test_discard_unit(100);
	/* every row is written once as it is staged (the last runs at the reorder's start), then window 0 */
	fw.allowed = ((uint64_t) t.total + 501) * 9 * sizeof(float);
	CHECK(t.s->permute(t.s, src, t.total, 501, 501) != 0);
	gbml_chunk_store_file_test_discard_unit(0);
	CHECK(strstr(t.s->error(t.s), "No space left") != NULL);
	gbml_chunk_store_file_stats(t.s, &st);
	CHECK(st.bytes_discarded > 0);
	x = malloc(sizeof(float) * 9 * (size_t) t.chunk_len[0]);
	CHECK(t.s->read_chunk(t.s, 0, x) != 0);
	CHECK(strstr(t.s->error(t.s), "giving back some of its rows") != NULL);
	stored_rows_close(&t, &env);
	free(x);
	free(src);
}

/* An in-place reorder that fails part way: the rows are neither in the old layout nor the new, so reads are an ERROR. */
TEST(file_store_failed_in_place_reorder_is_an_error)
{
	gbml_env	env;
	failing_writes fw = {0};
	stored_rows t = {0};
	gbml_spill_stats st;
	int64_t    *order,
			   *src;
	float	   *x;

	grouped_rows_failing_later(&env, &fw, &t, 24);
	gbml_chunk_store_file_set_permute_budget(t.s, window_budget(1100, 9));
	order = sorted_by_hash(&t);
	src = malloc(sizeof(int64_t) * (size_t) t.total);
	for (int64_t i = 0; i < t.total; i++)
		src[i] = address_of(&t, order[i]);
	/* every row is written once as it is staged (the last runs at the reorder's start), then 500 in place */
	fw.allowed = ((uint64_t) t.total + 500) * 9 * sizeof(float);
	CHECK(t.s->permute(t.s, src, t.total, 37, 501) != 0);
	CHECK(strstr(t.s->error(t.s), "No space left") != NULL);
	gbml_chunk_store_file_stats(t.s, &st);
	CHECK(st.reorders_in_place == 0);
	x = malloc(sizeof(float) * 9 * (size_t) t.total);
	CHECK(t.s->read_chunk(t.s, 0, x) != 0);
	CHECK(strstr(t.s->error(t.s), "rewriting some of its rows in place") != NULL);
	CHECK(t.s->fetch(t.s, src, 3, x) != 0);
	stored_rows_close(&t, &env);
	free(x);
	free(src);
	free(order);
}

/*
 * A chunk put from one of the store's buffers is written in the background:
 * read_any_thread is false until the write is waited for, the next
 * buffer() is the other one, a read on the main thread waits for it, and a
 * chunk from the caller's own memory is written before put returns.
 */
TEST(file_store_writes_chunks_in_the_background)
{
	gbml_env	env;
	stored_rows t = {0};
	float	   *x,
			   *y,
			   *own = malloc(sizeof(float) * 5 * 4);
	float		back[4];

	gbml_env_init_malloc(&env, 1);
	t.s = gbml_chunk_store_file_open(&env);
	t.d = 4;
	x = t.s->buffer(t.s, 10, 4);
	for (int k = 0; k < 40; k++)
		x[k] = (float) k;
	CHECK(t.s->put(t.s, x, 10, 4) == 0);
	CHECK(!t.s->read_any_thread);
	/* the buffer in flight is not handed out again */
	y = t.s->buffer(t.s, 10, 4);
	CHECK(y != NULL && y != x);
	for (int k = 0; k < 40; k++)
		y[k] = (float) (100 + k);
	CHECK(t.s->put(t.s, y, 10, 4) == 0);
	CHECK(t.s->buffer(t.s, 10, 4) == x);
	/* a read waits for the write: on the main thread, then on any thread again */
	CHECK(t.s->read_rows(t.s, 1, 9, 1, back) == 0 && back[0] == 136.0f && back[3] == 139.0f);
	CHECK(t.s->read_any_thread);
	for (int k = 0; k < 20; k++)
		own[k] = (float) (200 + k);
	CHECK(t.s->put(t.s, own, 5, 4) == 0);
	CHECK(t.s->read_any_thread);	/* not our buffer: written already */
	free(own);
	CHECK(t.s->read_rows(t.s, 2, 4, 1, back) == 0 && back[0] == 216.0f);
	CHECK(t.s->read_rows(t.s, 0, 0, 1, back) == 0 && back[0] == 0.0f && back[3] == 3.0f);
	stored_rows_close(&t, &env);
}

/* With no budget for a second buffer, buffer() waits for the write and hands out the same one. */
TEST(file_store_small_budget_keeps_one_buffer)
{
	gbml_env	env;
	stored_rows t = {0};
	static const int64_t sizes[] = {1000, 1000, 1000};
	float	   *x;

	gbml_env_init_malloc(&env, 1);
	env.memory_limit = 60000;	/* a 1000 x 8 buffer is 32,000 bytes: no room for two */
	t.s = gbml_chunk_store_file_open(&env);
	x = t.s->buffer(t.s, 1000, 8);
	CHECK(t.s->put(t.s, x, 1000, 8) == 0 && !t.s->read_any_thread);
	CHECK(t.s->buffer(t.s, 1000, 8) == x);
	CHECK(t.s->read_any_thread);	/* buffer() waited for the write */
	CHECK(t.s->put(t.s, x, 1000, 8) == 0);
	stored_rows_close(&t, &env);
	/* the chunks read back as put */
	memset(&t, 0, sizeof(t));
	gbml_env_init_malloc(&env, 1);
	env.memory_limit = 60000;
	t.s = gbml_chunk_store_file_open(&env);
	CHECK(put_chunks(&t, &env, sizes, 3, 8, 5) == 0);
	CHECK(env.memory_peak < 60000);
	CHECK(chunks_match(&t));
	stored_rows_close(&t, &env);
}

/*
 * Background writes watched: each buffer's bytes hashed when its write
 * starts and again when it is waited for; the store must not touch a
 * buffer in between (a refill there would put other rows in the file).
 */
typedef struct watched_writes
{
	int			(*start) (void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg,
						  size_t msg_len);
	int			(*wait) (void *ctx, void *handle, char *msg, size_t msg_len);
	const unsigned char *buf;
	size_t		len;
	uint64_t	sum;
	int			writes;
	int			changed;
} watched_writes;

static uint64_t
bytes_hash(const unsigned char *p, size_t len)
{
	uint64_t	h = 1469598103934665603ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static int
watched_start(void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg, size_t msg_len)
{
	watched_writes *w = ctx;

	w->buf = buf;
	w->len = len;
	w->sum = bytes_hash(buf, len);
	w->writes++;
	return w->start(NULL, handle, buf, len, offset, msg, msg_len);
}

static int
watched_wait(void *ctx, void *handle, char *msg, size_t msg_len)
{
	watched_writes *w = ctx;
	int			rc = w->wait(NULL, handle, msg, msg_len);

	if (w->buf != NULL && bytes_hash(w->buf, w->len) != w->sum)
		w->changed++;
	w->buf = NULL;
	return rc;
}

TEST(file_store_leaves_buffers_alone_while_they_are_written)
{
	static const int64_t sizes[] = {2000, 3000, 500, 1200, 64};

	for (int hashed = 0; hashed <= 1; hashed++)
	{
		gbml_env	env;
		watched_writes w = {0};
		stored_rows t = {0};
		float	   *x = malloc(sizeof(float) * 3000 * 6);

		gbml_env_init_malloc(&env, 1);
		w.start = env.temp_write_start;
		w.wait = env.temp_write_wait;
		env.temp_write_start = watched_start;
		env.temp_write_wait = watched_wait;
		env.temp_ctx = &w;		/* the plain hooks ignore their ctx */
		t.s = gbml_chunk_store_file_open(&env);
		t.hashed = hashed;
		gbml_chunk_store_file_test_group_stage(2048);	/* 85 rows of 6 features a run */
		gbml_chunk_store_file_test_run_batch(3 * 2048); /* three runs a batch */
		CHECK(put_chunks(&t, &env, sizes, 5, 6, 9) == 0);
		gbml_chunk_store_file_test_group_stage(0);
		CHECK(chunks_match(&t));	/* grouped: settles, writing every group's last run */
		gbml_chunk_store_file_test_run_batch(0);
		/* grouped: runs go in batches, 6,764 rows of 24 bytes in 6,144 at most: 27 writes at least */
		CHECK(hashed ? w.writes >= 27 : w.writes == 5);
		CHECK(w.changed == 0);
		free(x);
		stored_rows_close(&t, &env);
	}
}

/* temp_write_wait failing for the write_fails-th background write, as a full disk would. */
typedef struct failing_waits
{
	int			(*wait) (void *ctx, void *handle, char *msg, size_t msg_len);
	int			waits;
	int			write_fails;
} failing_waits;

static int
failing_wait(void *ctx, void *handle, char *msg, size_t msg_len)
{
	failing_waits *fw = ctx;
	int			rc = fw->wait(NULL, handle, msg, msg_len);

	if (rc == GBML_OK && ++fw->waits == fw->write_fails)
	{
		snprintf(msg, msg_len, "could not write to a temporary file: No space left on device");
		return GBML_EIO;
	}
	return rc;
}

/*
 * A background write that fails: the next put says which chunk and why,
 * the file is not whole (every read after it an error), and nothing leaks.
 * A batch of groups' runs that fails as it is written (at once, with
 * these hooks) is reported by the put that writes it.
 */
TEST(file_store_background_write_failure_is_reported)
{
	gbml_env	env;
	failing_waits fw = {0};
	failing_writes fwr = {0};
	stored_rows t = {0};
	int			fds = tu_open_fds();
	static const int64_t sizes[] = {7, 64, 3},
				big_sizes[] = {2000, 3000, 500};
	float	   *x = malloc(sizeof(float) * 3000 * 6);

	gbml_env_init_malloc(&env, 1);
	fw.wait = env.temp_write_wait;
	fw.write_fails = 2;
	env.temp_write_wait = failing_wait;
	env.temp_ctx = &fw;			/* the plain hooks ignore their ctx */
	t.s = gbml_chunk_store_file_open(&env);
	CHECK(put_chunks(&t, &env, sizes, 1, 6, 6) == 0);
	CHECK(put_chunks(&t, &env, sizes + 1, 2, 6, 7) != 0);
	CHECK(t.s->error_code(t.s) == GBML_EIO);
	CHECK(strstr(t.s->error(t.s), "writing chunk 2 of 64 rows (0.0 MB) in the background") != NULL);
	CHECK(strstr(t.s->error(t.s), "No space left on device") != NULL);
	CHECK(t.s->read_chunk(t.s, 0, x) != 0);
	CHECK(strstr(t.s->error(t.s), "not whole (a background write failed)") != NULL);
	stored_rows_close(&t, &env);
	/* rows grouped by hash, two runs a batch: the second batch fails as it is written, its code kept */
	memset(&t, 0, sizeof(t));
	fail_writes_after(&env, &fwr, 2 * 85 * 6 * sizeof(float), GBML_EDISKFULL,
					  "could not write to a temporary file: No space left on device");
	t.s = gbml_chunk_store_file_open(&env);
	t.hashed = true;
	gbml_chunk_store_file_test_group_stage(2048);	/* 85 rows of 6 features a run */
	gbml_chunk_store_file_test_run_batch(2 * 2048);
	CHECK(put_chunks(&t, &env, big_sizes, 3, 6, 8) != 0);
	gbml_chunk_store_file_test_group_stage(0);
	gbml_chunk_store_file_test_run_batch(0);
	CHECK(fwr.written == 2 * 85 * 6 * sizeof(float) && t.s->error_code(t.s) == GBML_EDISKFULL);
	CHECK(strstr(t.s->error(t.s), "writing rows grouped by hash") != NULL);
	CHECK(strstr(t.s->error(t.s), "could not write to a temporary file: No space left") != NULL);
	free(x);
	stored_rows_close(&t, &env);
	CHECK(tu_open_fds() == fds);
}

TEST(file_store_open_failure_is_reported)
{
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	env.temp_create = NULL;
	CHECK(gbml_chunk_store_file_open(&env) == NULL);
	CHECK(env.error_code == GBML_EUNSUPPORTED && env.memory_used == 0);
}

/* ---- datasets streamed to files ---- */

#define DS_FEATURES 600
#define DS_CHUNK_ROWS 700		/* with 600 features the first chunk stops growing at 512 rows */

/* Row i's values: random, every 7th a copy of an earlier row, some NaN, groups of ~60 rows. */
static void
make_row(int64_t i, float *x, gbml_row *row)
{
	gbml_rng	rng;
	int64_t		g = i % 7 == 6 ? i / 2 : i;

	gbml_rng_seed(&rng, 1000 + (uint64_t) g);
	for (int j = 0; j < DS_FEATURES; j++)
		x[j] = (float) gbml_rng_uniform(&rng);
	if (g % 11 == 3)
		x[g % DS_FEATURES] = NAN;
	memset(row, 0, sizeof(*row));
	row->x = x;
	row->n_features = DS_FEATURES;
	row->label = (float) (g % 5);
	row->group = g % 50;
	row->weight = 1.0f + (float) (g % 3);
}

/* The rows 0..n-1, in the order perm gives (NULL: in order). */
static void
fill_rows(gbml_dataset *ds, gbml_env *env, int64_t n, const int64_t *perm)
{
	float	   *x = malloc(sizeof(float) * DS_FEATURES);
	gbml_row	row;

	for (int64_t i = 0; i < n; i++)
	{
		make_row(perm ? perm[i] : i, x, &row);
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	free(x);
}

/* Same rows, same order, same chunks: the per-row state and the features, wherever they are. */
static bool
same_rows(const gbml_dataset *a, const gbml_dataset *b, gbml_env *env)
{
	bool		ok = a->n_rows == b->n_rows && a->n_chunks == b->n_chunks;

	for (int c = 0; ok && c < a->n_chunks; c++)
	{
		const gbml_chunk *ca = a->chunks[c],
				   *cb = b->chunks[c];
		int64_t		m = ca->n_rows;
		int64_t    *addr = malloc(sizeof(int64_t) * (size_t) (m + 1));
		float	   *xa = malloc(sizeof(float) * (size_t) (m + 1) * DS_FEATURES),
				   *xb = malloc(sizeof(float) * (size_t) (m + 1) * DS_FEATURES);

		for (int64_t r = 0; r < m; r++)
			addr[r] = ((int64_t) c << 32) | r;
		ok = cb->n_rows == m &&
			memcmp(ca->label, cb->label, sizeof(float) * (size_t) m) == 0 &&
			memcmp(ca->group, cb->group, sizeof(int64_t) * (size_t) m) == 0 &&
			memcmp(ca->weight, cb->weight, sizeof(float) * (size_t) m) == 0 &&
			gbml_dataset_fetch_rows(a, addr, m, xa, env) == GBML_OK &&
			gbml_dataset_fetch_rows(b, addr, m, xb, env) == GBML_OK &&
			memcmp(xa, xb, sizeof(float) * (size_t) m * DS_FEATURES) == 0;
		free(addr);
		free(xa);
		free(xb);
	}
	return ok;
}

static void
init_ds(gbml_dataset *ds, bool to_files)
{
	gbml_dataset_init(ds, true);
	ds->chunk_rows = DS_CHUNK_ROWS;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
}

/* n rows in host memory, and the same rows shuffled by perm streamed to files (grouped by hash, in runs of 5, or not). */
static void
host_and_files(gbml_dataset *host, gbml_dataset *files, gbml_env *env, int64_t n, const int64_t *perm, bool grouped)
{
	init_ds(host, false);
	init_ds(files, true);
	files->spill_by_hash = grouped;
	gbml_chunk_store_file_test_group_stage(grouped ? 5 * DS_FEATURES * sizeof(float) : 0);
	fill_rows(host, env, n, NULL);
	fill_rows(files, env, n, perm);
	gbml_chunk_store_file_test_group_stage(0);
}

/* Frees the four datasets; nothing is left in env. */
static void
free_four(gbml_dataset *a, gbml_dataset *b, gbml_dataset *c, gbml_dataset *d, gbml_env *env)
{
	gbml_dataset_free(a, env);
	gbml_dataset_free(b, env);
	gbml_dataset_free(c, env);
	gbml_dataset_free(d, env);
	CHECK(env->memory_used == 0);
}

/*
 * An eval share split from rows read through a map (boosting's) with the
 * canonical order: the held-out rows are fetched in the order they were
 * written and given their canonical order afterwards, as a map of their
 * own: the host's training and eval rows, in the host's order.
 */
static void
check_split_through_a_map(gbml_dataset *host, gbml_dataset *files, gbml_dataset *host_eval, gbml_dataset *files_eval,
						  gbml_env *env)
{
	host->reorder_as_map = files->reorder_as_map = true;
	CHECK(gbml_dataset_canonicalize_split(host, host_eval, 0.2, 7, env) == GBML_OK);
	CHECK(gbml_dataset_canonicalize_split(files, files_eval, 0.2, 7, env) == GBML_OK);
	CHECK(host_eval->n_rows > 0 && files->stored_addr != NULL && files_eval->stored_addr != NULL);
	CHECK(same_rows(host, files, env));
	CHECK(same_rows(host_eval, files_eval, env));
}

/*
 * A dataset streamed to files (grouped by hash as it arrives, in runs of 5
 * rows, or not) gives the host's rows in the host's order, then the same
 * eval split (through_map: check_split_through_a_map instead).
 */
static void
check_canonical_order(bool grouped, bool through_map)
{
	gbml_env	env;
	gbml_dataset host,
				files,
				host_eval,
				files_eval;
	int64_t		n = 3001;
	int64_t    *perm = tu_shuffled(n, 9);

	gbml_env_init_malloc(&env, 2);
	host_and_files(&host, &files, &env, n, perm, grouped);
	if (through_map)
	{
		check_split_through_a_map(&host, &files, &host_eval, &files_eval, &env);
		free_four(&host, &files, &host_eval, &files_eval, &env);
		free(perm);
		return;
	}
	CHECK(files.store != NULL && strcmp(files.store->residence, "file") == 0);
	/* sealed (the last chunk stored, every write done): reads on any thread unless grouped */
	CHECK(gbml_dataset_seal(&files, &env) == GBML_OK);
	CHECK(files.store->read_any_thread == !grouped);
	/* the reorder in windows of one output chunk, the eval split in one window */
	gbml_chunk_store_file_set_permute_budget(files.store, 1);
	CHECK(gbml_dataset_canonicalize(&host, &env) == GBML_OK);
	CHECK(gbml_dataset_canonicalize(&files, &env) == GBML_OK);
	CHECK(host.chunks[0]->n_rows == 512 && host.chunks[1]->n_rows == DS_CHUNK_ROWS);
	CHECK(same_rows(&host, &files, &env));
	gbml_chunk_store_file_set_permute_budget(files.store, 0);
	CHECK(gbml_dataset_split_eval(&host, &host_eval, 0.2, 7, false, &env) == GBML_OK);
	CHECK(gbml_dataset_split_eval(&files, &files_eval, 0.2, 7, false, &env) == GBML_OK);
	CHECK(host.n_rows < n && host_eval.n_rows > 0);
	CHECK(same_rows(&host, &files, &env));
	/* a held-out share of rows in files goes to files of its own */
	CHECK(files_eval.store != NULL && strcmp(files_eval.store->residence, "file") == 0);
	CHECK(same_rows(&host_eval, &files_eval, &env));
	free_four(&host, &files, &host_eval, &files_eval, &env);
	free(perm);
}

TEST(file_store_dataset_keeps_the_canonical_order)
{
	check_canonical_order(false, false);
	check_canonical_order(true, false);
}

TEST(file_store_eval_split_through_a_map_keeps_the_canonical_order)
{
	check_canonical_order(false, true);
}

/*
 * Rows in files with one hash (3,000 copies of a row, 600 features) are
 * put in content order fetched together, 7 MB beside the sort's keys:
 * past the budget that is an ERROR naming the duplicate rows (it was the
 * plain "memory limit exceeded: 0.2 MB needed"), within it the host order.
 */
TEST(file_store_duplicate_rows_past_the_budget_are_named)
{
	gbml_env	env;
	gbml_dataset host,
				files;
	int64_t    *same = calloc(3000, sizeof(int64_t));	/* every row is row 0 */

	gbml_env_init_malloc(&env, 1);
	init_ds(&files, true);
	fill_rows(&files, &env, 3000, same);
	CHECK(gbml_dataset_seal(&files, &env) == GBML_OK);
	env.memory_limit = env.memory_used + ((size_t) 2 << 20);
	CHECK(gbml_dataset_canonicalize(&files, &env) == GBML_EBUDGET);
	CHECK(strstr(env.error, "3000 rows with the same hash (duplicate rows)") != NULL);
	CHECK(strstr(env.error, "HINT") == NULL && strstr(env.hint, "memory_limit_mb") != NULL);
	gbml_dataset_free(&files, &env);
	env.memory_limit = 0;
	init_ds(&host, false);
	init_ds(&files, true);
	fill_rows(&host, &env, 3000, same);
	fill_rows(&files, &env, 3000, same);
	CHECK(gbml_dataset_canonicalize(&host, &env) == GBML_OK);
	CHECK(gbml_dataset_canonicalize(&files, &env) == GBML_OK);
	CHECK(same_rows(&host, &files, &env));
	gbml_dataset_free(&host, &env);
	gbml_dataset_free(&files, &env);
	CHECK(env.memory_used == 0);
	free(same);
}

/*
 * Categorical ids numbered as first seen, then renumbered (the training
 * aggregates' whole rows): features 0 and 5 hold a category (5 sometimes
 * none: NaN) whose final id the row fixes; the rows arrive shuffled and get
 * first-seen ids, in memory or streamed to files, and are renumbered.
 */
#define CAT_A 13
#define CAT_B 29

static void
set_final_categories(int64_t i, float *x)
{
	int64_t		g = i % 7 == 6 ? i / 2 : i;	/* make_row's copies stay copies */

	x[0] = (float) (g % CAT_A);
	x[5] = g % 17 == 2 ? NAN : (float) ((g * 7) % CAT_B);
}

/* Rows in perm's order with first-seen ids; ids[j][first-seen] = final id for the renumbering. */
static void
fill_first_seen(gbml_dataset *ds, gbml_env *env, int64_t n, const int64_t *perm, int32_t **ids, int32_t *n_ids)
{
	float	   *x = malloc(sizeof(float) * DS_FEATURES);
	int32_t		seen[6][CAT_B];
	gbml_row	row;

	memset(seen, 0xff, sizeof(seen));
	n_ids[0] = n_ids[5] = 0;
	for (int64_t i = 0; i < n; i++)
	{
		make_row(perm[i], x, &row);
		set_final_categories(perm[i], x);
		for (int j = 0; j <= 5; j += 5)
		{
			int32_t		final = (int32_t) x[j];

			if (isnan(x[j]))
				continue;
			if (seen[j][final] < 0)
			{
				seen[j][final] = n_ids[j]++;
				ids[j][seen[j][final]] = final;
			}
			x[j] = (float) seen[j][final];
		}
		CHECK(gbml_dataset_append(ds, env, &row, true) == GBML_OK);
	}
	free(x);
}

/* The renumbering of features 0 and 5 that fill_first_seen records. */
typedef struct first_seen_ids
{
	int32_t		a[CAT_A],
				b[CAT_B];
	int32_t    *ids[DS_FEATURES];
	int32_t		n_ids[DS_FEATURES];
} first_seen_ids;

/* n rows shuffled by seed, with first-seen ids, into ds (initialised here: in files or not, grouped by hash or not). */
static void
first_seen_rows(gbml_dataset *ds, gbml_env *env, int64_t n, uint64_t seed, bool to_files, bool grouped,
				first_seen_ids *fs)
{
	int64_t    *perm = tu_shuffled(n, seed);

	memset(fs, 0, sizeof(*fs));
	fs->ids[0] = fs->a;
	fs->ids[5] = fs->b;
	init_ds(ds, to_files);
	ds->spill_by_hash = grouped;
	fill_first_seen(ds, env, n, perm, fs->ids, fs->n_ids);
	free(perm);
}

static int
renumber(gbml_dataset *ds, gbml_env *env, const first_seen_ids *fs)
{
	return gbml_dataset_renumber_categories(ds, env, (const int32_t *const *) fs->ids, fs->n_ids);
}

static void
check_renumbered(bool to_files)
{
	gbml_env	env;
	gbml_dataset final,
				renumbered,
				final_eval,
				renumbered_eval;
	int64_t		n = 3001;
	first_seen_ids fs;
	float	   *x = malloc(sizeof(float) * DS_FEATURES);
	gbml_row	row;

	gbml_env_init_malloc(&env, 2);
	init_ds(&final, false);
	for (int64_t i = 0; i < n; i++)
	{
		make_row(i, x, &row);
		set_final_categories(i, x);
		CHECK(gbml_dataset_append(&final, &env, &row, true) == GBML_OK);
	}
	first_seen_rows(&renumbered, &env, n, 5, to_files, false, &fs);
	CHECK(fs.n_ids[0] == CAT_A && fs.n_ids[5] == CAT_B && fs.a[0] != 0);	/* first seen is not sorted */
	CHECK(renumber(&renumbered, &env, &fs) == GBML_OK);
	CHECK((renumbered.store != NULL) == to_files);
	CHECK(gbml_dataset_canonicalize(&final, &env) == GBML_OK);
	CHECK(gbml_dataset_canonicalize(&renumbered, &env) == GBML_OK);
	CHECK(same_rows(&final, &renumbered, &env));
	CHECK(gbml_dataset_split_eval(&final, &final_eval, 0.2, 7, false, &env) == GBML_OK);
	CHECK(gbml_dataset_split_eval(&renumbered, &renumbered_eval, 0.2, 7, false, &env) == GBML_OK);
	CHECK(final_eval.n_rows > 0 && same_rows(&final, &renumbered, &env) && same_rows(&final_eval, &renumbered_eval, &env));
	gbml_dataset_free(&final, &env);
	gbml_dataset_free(&renumbered, &env);
	gbml_dataset_free(&final_eval, &env);
	gbml_dataset_free(&renumbered_eval, &env);
	CHECK(env.memory_used == 0);
	free(x);
}

TEST(dataset_renumbered_categories_give_the_final_ids_order)
{
	check_renumbered(false);
	check_renumbered(true);
}

/* Stops at the renumbering's k-th report (counting them in *ctx's second int). */
static bool
stop_renumbering_at(void *ctx, const gbml_progress_info *info)
{
	int		   *at = ctx;

	if (strcmp(info->phase, "renumbering categories") != 0)
		return false;
	at[1]++;
	return at[1] == at[0];
}

/* The renumbering reports each chunk read back and stops there when asked: canceled, nothing leaked. */
TEST(dataset_renumber_reports_progress_and_cancels)
{
	gbml_env	env;
	gbml_dataset ds;
	first_seen_ids fs;
	int			at[2] = {2, 0};

	gbml_env_init_malloc(&env, 1);
	first_seen_rows(&ds, &env, 3001, 4, true, false, &fs);
	env.progress_fn = stop_renumbering_at;
	env.progress_ctx = at;
	CHECK(renumber(&ds, &env, &fs) == GBML_ECANCELLED);
	CHECK(at[1] == 2 && ds.n_chunks > 2 && strstr(env.error, "canceled while renumbering categories") != NULL);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/* Rows grouped by hash as they came cannot be renumbered (their grouping follows the old ids): an error, not a wrong order. */
TEST(dataset_renumber_refuses_rows_grouped_by_hash)
{
	gbml_env	env;
	gbml_dataset ds;
	first_seen_ids fs;

	gbml_env_init_malloc(&env, 1);
	first_seen_rows(&ds, &env, 900, 3, true, true, &fs);
	CHECK(renumber(&ds, &env, &fs) == GBML_EUNSUPPORTED);
	CHECK(strstr(env.error, "grouped by hash") != NULL);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/* Walks ds with the prefetcher; every chunk must equal its own read (or its host rows). */
static bool
prefetch_matches_order(const gbml_dataset *ds, gbml_env *env, const int *order, int n)
{
	gbml_chunk_prefetch *p = order ? gbml_chunk_prefetch_open_order(ds, env, order, n)
		: gbml_chunk_prefetch_open(ds, env);
	const float *x;
	int64_t		rows;
	int			index,
				rc,
				expect = 0;
	bool		ok = p != NULL;
	float	   *want = malloc(sizeof(float) * (size_t) ds->chunk_rows * (size_t) ds->n_features);

	while (ok && (rc = gbml_chunk_prefetch_next(p, &x, &rows, &index)) == 1)
	{
		const gbml_chunk *c = ds->chunks[index];
		size_t		bytes = sizeof(float) * (size_t) rows * (size_t) ds->n_features;

		ok = index == (order ? order[expect] : expect) && rows == c->n_rows &&
			(c->x != NULL ? x == c->x : ds->store->read_chunk(ds->store, index, want) == 0 && memcmp(x, want, bytes) == 0);
		expect++;
	}
	ok = ok && rc == 0 && expect == (order ? n : ds->n_chunks);
	gbml_chunk_prefetch_close(p);
	free(want);
	return ok;
}

static bool
prefetch_matches(const gbml_dataset *ds, gbml_env *env)
{
	return prefetch_matches_order(ds, env, NULL, 0);
}

TEST(chunk_prefetch_returns_every_chunk_in_order)
{
	gbml_env	env;
	gbml_dataset ds,
				host;
	gbml_spill_stats st;

	gbml_env_init_malloc(&env, 1);
	init_ds(&ds, true);
	init_ds(&host, false);
	fill_rows(&ds, &env, 2500, NULL);
	fill_rows(&host, &env, 1000, NULL);
	/* the last chunk is still in the store's buffer: handed over as host rows */
	CHECK(ds.chunks[ds.n_chunks - 1]->x != NULL);
	CHECK(prefetch_matches(&ds, &env));
	CHECK(gbml_dataset_canonicalize(&ds, &env) == GBML_OK);
	CHECK(ds.chunks[ds.n_chunks - 1]->x == NULL);
	CHECK(prefetch_matches(&ds, &env));
	/* a store without reads from other threads: each chunk read when asked */
	ds.store->read_any_thread = false;
	CHECK(prefetch_matches(&ds, &env));
	ds.store->read_any_thread = true;
	/* a given order, repeats included (SAGA's shuffled epochs) */
	{
		int			order[] = {2, 0, 0, 3, 1, 2};
		int			bad[] = {1, 9};

		CHECK(ds.n_chunks == 4);
		CHECK(prefetch_matches_order(&ds, &env, order, 6));
		CHECK(prefetch_matches_order(&ds, &env, order, 0));
		CHECK(gbml_chunk_prefetch_open_order(&ds, &env, bad, 2) == NULL && env.error_code == GBML_EINVAL);
	}
	CHECK(prefetch_matches(&host, &env));
	CHECK(gbml_chunk_store_file_stats(ds.store, &st) && st.rows_spilled == 2500 && st.bytes_read > 0);
	gbml_dataset_free(&ds, &env);
	gbml_dataset_free(&host, &env);
	CHECK(env.memory_used == 0);
}

/* Rows [start, start + m) of ds, fetched by address: what a range visit must hand over. */
static bool
range_matches(const gbml_dataset *ds, gbml_env *env, int64_t start, int64_t m, const float *x)
{
	int64_t    *addr = malloc(sizeof(int64_t) * (size_t) m);
	float	   *want = malloc(sizeof(float) * (size_t) m * (size_t) ds->n_features);
	int64_t		row = 0;
	bool		ok;

	size_t		d = (size_t) ds->n_features;

	ok = true;
	/* a chunk still in the store's buffer is host rows: the store cannot fetch it yet */
	for (int c = 0, k = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, row++)
			if (row >= start && row < start + m)
			{
				addr[k] = ((int64_t) c << 32) | r;
				if (ds->chunks[c]->x)
					memcpy(want + k * d, ds->chunks[c]->x + r * d, d * sizeof(float));
				else
					ok = ok && gbml_dataset_fetch_rows(ds, addr + k, 1, want + k * d, env) == GBML_OK;
				k++;
			}
	ok = ok && memcmp(x, want, sizeof(float) * (size_t) m * d) == 0;
	free(addr);
	free(want);
	return ok;
}

TEST(range_reader_spans_chunks_wherever_they_are)
{
	gbml_env	env;
	gbml_dataset ds;
	/* chunks of 512 + 700 + 700 + 588 rows: inside one chunk, across two and three, whole, the last rows */
	int64_t		start[] = {0, 100, 500, 400, 512, 1212, 2400, 5},
				rows[] = {512, 50, 30, 1000, 700, 700, 100, 1};
	int			n = 8;
	gbml_chunk_prefetch *p;
	const float *x;
	int64_t		got;
	int			index,
				rc,
				seen = 0;

	gbml_env_init_malloc(&env, 1);
	init_ds(&ds, true);
	fill_rows(&ds, &env, 2500, NULL);
	for (int pass = 0; pass < 2; pass++)
	{
		/* pass 0: the last chunk still in the store's buffer (host rows); pass 1: all stored */
		if (pass == 1)
			CHECK(gbml_dataset_canonicalize(&ds, &env) == GBML_OK);
		CHECK((p = gbml_chunk_prefetch_open_ranges(&ds, &env, start, rows, n)) != NULL);
		seen = 0;
		while ((rc = gbml_chunk_prefetch_next(p, &x, &got, &index)) == 1)
		{
			CHECK(index == seen && got == rows[index]);
			CHECK(range_matches(&ds, &env, start[index], rows[index], x));
			seen++;
		}
		CHECK(rc == 0 && seen == n);
		gbml_chunk_prefetch_close(p);
	}
	{
		int64_t		bad_start[] = {2400},
					bad_rows[] = {101};

		CHECK(gbml_chunk_prefetch_open_ranges(&ds, &env, bad_start, bad_rows, 1) == NULL &&
			  env.error_code == GBML_EINVAL);
	}
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

TEST(chunk_prefetch_reports_a_failed_read)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_chunk_prefetch *p;
	const float *x;
	int64_t		rows;
	int			index;

	gbml_env_init_malloc(&env, 1);
	init_ds(&ds, true);
	fill_rows(&ds, &env, 1500, NULL);
	CHECK(gbml_dataset_canonicalize(&ds, &env) == GBML_OK);
	ds.store->release(ds.store);	/* the file and its chunks are gone: every read fails */
	p = gbml_chunk_prefetch_open(&ds, &env);
	CHECK(gbml_chunk_prefetch_next(p, &x, &rows, &index) < 0);
	CHECK(strstr(env.error, "reading chunk 1 (rows in temporary files)") != NULL);
	gbml_chunk_prefetch_close(p);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}
