/*
 * test_kmeans_spill.c — K-Means from a dataset whose features are in
 * temporary files (a chunk store of residence "file", the malloc env's
 * plain files): the same rows appended in a shuffled order to a stored
 * dataset, kept in that order with their canonical ranks (rewritten in
 * canonical order when an eval share is split off), train to the same
 * model bytes as in memory (k-means++ and random
 * init, the spherical mode, n_init, an eval share in files of its own,
 * empty-cluster relocation, 1 and 3 threads); a stored dataset not yet
 * sealed (its last chunk still in host memory) fits like the host one; a
 * fit holds a fraction of the features; a read that fails in the middle of
 * the Lloyd loop or while the eval set is measured, and a cancel between
 * chunks, end the fit with a clear error, leaving no memory or descriptor
 * behind.
 */
#include "harness.h"
#include "chunk_store_file.h"
#include "kmeans.h"
#include "rng.h"
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SP_CHUNK_ROWS 700		/* several chunks of a few thousand rows */

/* A data set: row p's values depend on p only, so any order holds the same rows. */
typedef struct sp_data
{
	int64_t		n;
	int			d;
	int			distinct;		/* > 0: rows repeat this many points (empty clusters) */
} sp_data;

static void
row_values(const sp_data *s, int64_t i, float *x)
{
	int64_t		p = s->distinct > 0 ? i % s->distinct : i;
	gbml_rng	rng;

	gbml_rng_seed(&rng, 4242 + (uint64_t) p);
	for (int j = 0; j < s->d; j++)
		x[j] = (float) ((p % 6 == j % 6 ? 3.0 : 0.0) + gbml_rng_uniform(&rng) * 2 - 1);
}

/* ds with the rows of s (in perm's order; NULL: in order), in files when to_files. */
static void
fill(gbml_dataset *ds, gbml_env *env, const sp_data *s, const int64_t *perm, bool to_files)
{
	float	   *x = malloc(sizeof(float) * (size_t) s->d);

	gbml_dataset_init(ds, false);
	ds->chunk_rows = SP_CHUNK_ROWS;
	if (to_files)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < s->n; i++)
	{
		gbml_row	row = {0};

		row_values(s, perm ? perm[i] : i, x);
		row.x = x;
		row.n_features = s->d;
		row.label_is_null = row.group_is_null = row.weight_is_null = true;
		CHECK(gbml_dataset_append(ds, env, &row, false) == GBML_OK);
	}
	CHECK(!to_files || (ds->store != NULL && strcmp(ds->store->residence, "file") == 0));
	free(x);
}

/* The same rows in memory (in order) and in files (shuffled) give the same bytes with 1 and 3 threads. */
static void
check_same_bytes(const char *name, const sp_data *s, const gbml_param_value *v, int nv)
{
	int64_t    *perm = tu_shuffled(s->n, 77);
	uint8_t    *ref = NULL;
	size_t		ref_len = 0;
	bool		eval_split = false;

	for (int i = 0; i < nv; i++)
		eval_split |= strcmp(v[i].key, "eval_fraction") == 0;

	for (int run = 0; run < 3; run++)
	{
		gbml_env	env;
		gbml_dataset ds;
		uint8_t    *m;
		size_t		len;
		bool		files = run > 0;
		int			rc;

		gbml_env_init_malloc(&env, run == 2 ? 3 : 1);
		fill(&ds, &env, s, files ? perm : NULL, files);
		rc = tu_train("kmeans", &ds, &env, v, nv, &m, &len);
		CHECK(rc == GBML_OK);
		if (rc != GBML_OK)
			fprintf(stderr, "%s (%s, %d threads): %s\n", name, files ? "files" : "memory", env.threads, env.error);
		CHECK(!files || ds.chunks[0]->x == NULL);	/* trained from the files */
		/* in the order written (ranks, no rewrite) unless an eval split reordered them */
		CHECK(!files || eval_split == (ds.rank_of_row == NULL));
		if (run == 0)
		{
			ref = m;
			ref_len = len;
		}
		else
		{
			bool		same = m != NULL && len == ref_len && memcmp(m, ref, len) == 0;

			CHECK(same);
			if (!same)
				fprintf(stderr, "%s: files with %d threads give other bytes than memory\n", name, env.threads);
			free(m);
		}
		gbml_dataset_free(&ds, &env);
		CHECK(env.memory_used == 0);
	}
	free(ref);
	free(perm);
}

TEST(kmeans_spill_kmeanspp_n_init_same_bytes)
{
	sp_data		s = {3100, 7, 0};
	gbml_param_value v[] = {tu_num("k", 6), tu_num("n_init", 2), tu_num("random_seed", 3)};

	check_same_bytes("k-means++, n_init 2", &s, v, 3);
}

TEST(kmeans_spill_random_spherical_same_bytes)
{
	sp_data		s = {2900, 9, 0};
	gbml_param_value v[] = {tu_num("k", 5), tu_str("init", "random"), tu_bool("spherical", true),
	tu_num("n_init", 3)};

	check_same_bytes("random, spherical, n_init 3", &s, v, 4);
}

/*
 * Wide rows: the eval set's first chunk stops growing at 512 rows (1 MB),
 * so its ~825 rows go to files of their own in two chunks, which the eval
 * inertia reads back.
 */
TEST(kmeans_spill_eval_share_same_bytes)
{
	sp_data		s = {3300, 600, 0};
	gbml_param_value v[] = {tu_num("k", 7), tu_num("eval_fraction", 0.25), tu_num("random_seed", 5),
	tu_bool("spherical", false)};

	check_same_bytes("k-means++, eval_fraction 0.25", &s, v, 4);
}

TEST(kmeans_spill_empty_cluster_relocation_same_bytes)
{
	/* 5 distinct points, k 8: random init picks duplicates, so clusters empty and take far rows */
	sp_data		s = {2500, 4, 5};
	gbml_param_value v[] = {tu_num("k", 8), tu_str("init", "random"), tu_num("random_seed", 2),
	tu_num("min_frac_changed", 0)};
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_params p;
	gbml_kmeans_result r;

	check_same_bytes("empty clusters", &s, v, 4);
	/* the case does relocate, from the files too */
	gbml_env_init_malloc(&env, 2);
	fill(&ds, &env, &s, NULL, true);
	CHECK(gbml_dataset_canonicalize(&ds, &env) == GBML_OK);
	memset(&p, 0, sizeof(p));
	p.k = 8;
	p.init.choice = GBML_KM_INIT_RANDOM;
	p.n_init = 1;
	p.max_iter = 300;
	p.tol = 1e-4;
	p.random_seed = 2;
	CHECK(gbml_kmeans_fit(&ds, &p, &env, false, &r) == GBML_OK);
	CHECK(r.empty_relocations > 0);
	gbml_kmeans_result_free(&r, &env);
	gbml_dataset_free(&ds, &env);
	CHECK(env.memory_used == 0);
}

/*
 * Before canonical order the last chunk of a stored dataset is still in
 * host memory: a fit walks files and memory in one pass and fetches rows
 * from both, and gives what the host dataset in the same order gives.  It
 * holds the per-row state and two chunk buffers, not the features.
 */
TEST(kmeans_spill_mixed_residence_fits_like_memory)
{
	sp_data		s = {12000, 120, 0};
	gbml_env	env;
	gbml_dataset host,
				files;
	gbml_kmeans_params p;
	gbml_kmeans_result a,
				b;
	size_t		before;

	gbml_env_init_malloc(&env, 2);
	fill(&host, &env, &s, NULL, false);
	fill(&files, &env, &s, NULL, true);
	CHECK(files.chunks[0]->x == NULL && files.chunks[files.n_chunks - 1]->x != NULL);
	memset(&p, 0, sizeof(p));
	p.k = 9;
	p.init.choice = GBML_KM_INIT_KMEANSPP;
	p.n_init = 2;
	p.max_iter = 50;
	p.tol = 1e-4;
	p.min_frac_changed = 0.001;
	CHECK(gbml_kmeans_fit(&host, &p, &env, true, &a) == GBML_OK);
	before = env.memory_used;
	env.memory_peak = before;
	CHECK(gbml_kmeans_fit(&files, &p, &env, true, &b) == GBML_OK);
	CHECK(env.memory_peak - before < (size_t) s.n * s.d * sizeof(float) / 2);
	CHECK(memcmp(a.centroids, b.centroids, sizeof(double) * 9 * s.d) == 0);
	CHECK(memcmp(a.sizes, b.sizes, sizeof(int64_t) * 9) == 0);
	CHECK(a.inertia == b.inertia && a.iterations == b.iterations);
	CHECK(a.tol_scaled == b.tol_scaled && a.tol_scaled > 0);	/* the variances' double sums too */
	CHECK(a.n_label_chunks == b.n_label_chunks);
	for (int c = 0; c < a.n_label_chunks; c++)
		CHECK(memcmp(a.labels[c], b.labels[c], sizeof(int32_t) * (size_t) host.chunks[c]->n_rows) == 0);
	gbml_kmeans_result_free(&a, &env);
	gbml_kmeans_result_free(&b, &env);
	gbml_dataset_free(&host, &env);
	gbml_dataset_free(&files, &env);
	CHECK(env.memory_used == 0);
}

/* ---- failures ---- */

/*
 * Temporary files whose descriptors a test can break: the malloc env's
 * hooks, recording each file's descriptor and inode.  break_reads() points
 * every one still open (of at most break_bytes, when not 0) at an empty
 * file (an atomic dup2: a read on the helper thread sees the old file or
 * the empty one), so each read after it comes up short, as a failing disk
 * would make it.
 */
#define MAX_TRACKED 32
typedef struct tracked_files
{
	void	   *(*create) (void *ctx, int *read_fd, char *msg, size_t msg_len);
	int			n;
	int			fd[MAX_TRACKED];
	ino_t		ino[MAX_TRACKED];
	int			broken;
	const char *break_phase;	/* break_reads() from the progress hook in this phase ... */
	int64_t		break_iteration;	/* ... at this iteration */
	off_t		break_bytes;	/* 0, or only files up to this size (the eval set's, not the training set's) */
	int			cancel_phase_calls;	/* progress calls between chunks seen (metric_name NULL) */
	const char *cancel_phase;	/* cancel at the first call between chunks in this phase */
} tracked_files;

static tracked_files tracked;

static void *
tracking_create(void *ctx, int *read_fd, char *msg, size_t msg_len)
{
	void	   *h = tracked.create(ctx, read_fd, msg, msg_len);
	struct stat st;

	if (h != NULL && tracked.n < MAX_TRACKED && fstat(*read_fd, &st) == 0)
	{
		tracked.fd[tracked.n] = *read_fd;
		tracked.ino[tracked.n++] = st.st_ino;
	}
	return h;
}

static void
break_reads(void)
{
	int			empty = open("/dev/null", O_RDONLY);

	for (int i = 0; i < tracked.n && empty >= 0; i++)
	{
		struct stat st;

		if (fstat(tracked.fd[i], &st) == 0 && st.st_ino == tracked.ino[i] &&
			(tracked.break_bytes == 0 || st.st_size <= tracked.break_bytes) && dup2(empty, tracked.fd[i]) >= 0)
			tracked.broken++;
	}
	if (empty >= 0)
		close(empty);
}

static bool
failing_progress(void *ctx, const gbml_progress_info *info)
{
	(void) ctx;
	if (tracked.break_phase && strcmp(info->phase, tracked.break_phase) == 0 &&
		info->iteration == tracked.break_iteration && tracked.broken == 0)
		break_reads();
	if (tracked.cancel_phase && info->metric_name == NULL && strcmp(info->phase, tracked.cancel_phase) == 0)
		return ++tracked.cancel_phase_calls == 1;
	return false;
}

static void
tracking_env(gbml_env *env, int threads)
{
	gbml_env_init_malloc(env, threads);
	memset(&tracked, 0, sizeof(tracked));
	tracked.create = env->temp_create;
	env->temp_create = tracking_create;
	env->progress_fn = failing_progress;
}

/* A fit that must fail: the error, and nothing held afterwards. */
static void
check_failed_fit(gbml_env *env, int rc, int want, const char *message, int fds)
{
	CHECK(rc == want);
	CHECK(strstr(env->error, message) != NULL);
	if (strstr(env->error, message) == NULL)
		fprintf(stderr, "error: %s\n", env->error);
	CHECK(tu_open_fds() == fds);
}

/*
 * Reads break at Lloyd iteration 2 (1 and 2 threads); then only the eval
 * set's file breaks (at iteration 1: ~750 wide rows in files of their own,
 * 1.8 MB against the training set's 5.4 MB), so the fit ends and measuring
 * the eval inertia fails.
 */
TEST(kmeans_spill_read_failure_mid_training_is_a_clear_error)
{
	sp_data		s = {3000, 600, 0};
	gbml_param_value v[] = {tu_num("k", 6), tu_num("tol", 0), tu_num("min_frac_changed", 0),
	tu_num("max_iter", 20), tu_num("eval_fraction", 0.25)};
	int			fds = tu_open_fds();

	for (int i = 0; i < 3; i++)
	{
		gbml_env	env;
		gbml_dataset ds;
		uint8_t    *m;
		size_t		len;
		int			rc;

		tracking_env(&env, i == 1 ? 2 : 1);
		tracked.break_phase = "train";
		tracked.break_iteration = i < 2 ? 2 : 1;
		tracked.break_bytes = i < 2 ? 0 : 1500 * 600 * sizeof(float);
		fill(&ds, &env, &s, NULL, true);
		rc = tu_train("kmeans", &ds, &env, v, i < 2 ? 4 : 5, &m, &len);
		CHECK(tracked.broken > 0);
		CHECK(m == NULL);
		gbml_dataset_free(&ds, &env);
		check_failed_fit(&env, rc, GBML_EIO, "(rows in temporary files)", fds);
		CHECK(strncmp(env.error, i < 2 ? "kmeans: reading chunk" : "kmeans (eval set): reading chunk",
					  i < 2 ? 21 : 32) == 0);
		CHECK(env.memory_used == 0);
	}
}

TEST(kmeans_spill_cancel_between_chunks)
{
	sp_data		s = {3000, 8, 0};
	const char *phases[] = {"init", "train"};
	gbml_param_value v[] = {tu_num("k", 20), tu_num("tol", 0), tu_num("min_frac_changed", 0)};
	int			fds = tu_open_fds();

	for (int i = 0; i < 2; i++)
	{
		gbml_env	env;
		gbml_dataset ds;
		uint8_t    *m;
		size_t		len;
		int			rc;

		tracking_env(&env, 2);
		tracked.cancel_phase = phases[i];
		fill(&ds, &env, &s, NULL, true);
		rc = tu_train("kmeans", &ds, &env, v, 3, &m, &len);
		CHECK(tracked.cancel_phase_calls == 1);
		gbml_dataset_free(&ds, &env);
		check_failed_fit(&env, rc, GBML_ECANCELLED, "canceled", fds);
		CHECK(env.memory_used == 0);
	}
}
