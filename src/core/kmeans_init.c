/*
 * kmeans_init.c — K-Means' initialisation: a run's first centroids by the
 * "init" parameter (greedy k-means++, k distinct random rows, or the given
 * k x n_features array), and k-means++'s row operations on this server's
 * rows (km_local_rows' kpp_start, cand_pass, cand_take and search;
 * kmeans_shards.c has the shards').
 *
 * It works on the fit's state (kmeans_internal.h) as the Lloyd loop does:
 * the candidates' distances go through kmeans_walk.c and the device's
 * blocks (kmeans_device.c), the potentials are fixed-point sums
 * (kmeans_exact.h) and every draw comes from the run's own random stream,
 * so the centroids are the same bytes whatever the threads, the device or
 * where the rows live.
 */
#include "kmeans_internal.h"
#include "kmeans_exact.h"
#include "rng.h"

#include <math.h>
#include <string.h>

/* k distinct rows uniformly at random (Floyd's sampling, then shuffled). */
static int
km_init_random(km_work *w, gbml_rng *rng, double *centers)
{
	int64_t		n = w->n;
	int			k = w->k;
	size_t		cap = 16;
	int64_t    *table;
	int64_t    *chosen;
	int			m = 0;
	int			rc;

	while (cap < (size_t) k * 2)
		cap *= 2;
	table = gbml_alloc_array(w->env, cap, sizeof(int64_t));
	chosen = gbml_alloc_array(w->env, (size_t) k, sizeof(int64_t));
	if (table == NULL || chosen == NULL)
	{
		gbml_free(w->env, table);
		gbml_free(w->env, chosen);
		return w->env->error_code;
	}
	for (size_t i = 0; i < cap; i++)
		table[i] = -1;
	for (int64_t j = n - k; j < n; j++)
	{
		int64_t		t = (int64_t) gbml_rng_below(rng, (uint64_t) j + 1);
		int64_t		pick = t;

		for (int pass = 0; pass < 2; pass++)
		{
			size_t		h = (size_t) ((uint64_t) pick * 0x9e3779b97f4a7c15ULL >> 20) & (cap - 1);
			bool		found = false;

			while (table[h] >= 0)
			{
				if (table[h] == pick)
				{
					found = true;
					break;
				}
				h = (h + 1) & (cap - 1);
			}
			if (!found)
			{
				table[h] = pick;
				chosen[m++] = pick;
				break;
			}
			pick = j;			/* t already taken: Floyd takes j, which is new */
		}
	}
	gbml_rng_shuffle_u64(rng, (uint64_t *) chosen, (uint64_t) m);
	rc = w->rows->copy_rows(w, chosen, k, centers);
	gbml_free(w->env, table);
	gbml_free(w->env, chosen);
	return rc;
}

/*
 * First global row whose running sum of closest[] exceeds u times the
 * total potential (numpy.searchsorted over the fixed-point terms of the
 * last taken candidate, so both devices find the same row).
 */
static int
km_search_one(km_work *w, double u, int64_t total, int64_t *row_out)
{
	int64_t		r = (int64_t) (u * (double) total),
				cum = 0;
	int			rc;

	if (r >= total)
		r = total - 1;
	*row_out = 0;
	if (total <= 0)
		return GBML_OK;			/* every row sits on a centre: any row will do */
	for (int b = 0; b < w->nblocks; b++)
	{
		const km_block *bl = &w->blocks[b];
		const float *cl = w->closest[bl->chunk] + bl->start;

		if (cum + w->cur_pot[b] <= r)
		{
			cum += w->cur_pot[b];
			continue;
		}
		if (b < w->gpu_blocks)
		{
			if ((rc = km_dev_read_closest(w, b, w->row_scratch)) != GBML_OK)
				return rc;
			cl = w->row_scratch;
		}
		for (int64_t i = 0; i < bl->count; i++)
		{
			cum += gbml_km_fix_term((double) cl[i], w->cur_scale);
			if (cum > r)
			{
				*row_out = bl->global + i;
				return GBML_OK;
			}
		}
		*row_out = bl->global + bl->count - 1;
		return GBML_OK;
	}
	*row_out = w->n - 1;
	return GBML_OK;
}

/* The candidate distances and per-task potentials of tasks [first, end); arg: T. */
static int
km_candidate_tasks(km_work *w, int first, int end, void *arg)
{
	int			T = *(const int *) arg;

#pragma omp parallel for schedule(static) num_threads(km_threads_for(w, 2.0 * km_task_rows(w, first, end) * w->d * T))
	for (int ti = first; ti < end; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		int64_t    *acc = w->task_pot + (size_t) ti * w->T;

		for (int t = 0; t < T; t++)
			acc[t] = 0;
		gbml_km_candidate_dist(km_task_x(w, tk), tk->count, w->d,
							   w->spherical ? w->scale[tk->chunk] + tk->start : NULL,
							   w->cand, T, w->closest[tk->chunk] + tk->start,
							   w->cand_out[tk->chunk] + (size_t) tk->start * w->T, w->pot_scale, acc);
	}
	return GBML_OK;
}

/*
 * One k-means++ pass: distances of every row to the T candidates in w->cand,
 * floored by closest[], on the grid w->pot_scale; per-block potentials into
 * w->block_pot[b*T + t].
 */
int
km_local_cand_pass(km_work *w, int T, int64_t *totals)
{
	int			rc;

	if ((rc = km_walk(w, km_cpu_first_task(w), w->ntasks, km_candidate_tasks, &T)) != GBML_OK)
		return rc;
	if (w->gpu_blocks > 0 && (rc = km_dev_cand_pass(w, T, w->block_pot)) != GBML_OK)
		return rc;
	for (int b = w->gpu_blocks; b < w->nblocks; b++)
		for (int t = 0; t < T; t++)
		{
			int64_t		s = 0;

			for (int ti = w->blocks[b].first_task; ti < w->blocks[b].end_task; ti++)
				s += w->task_pot[(size_t) ti * w->T + t];
			w->block_pot[(size_t) b * T + t] = s;
		}
	for (int t = 0; t < T; t++)
	{
		totals[t] = 0;
		for (int b = 0; b < w->nblocks; b++)
			totals[t] += w->block_pot[(size_t) b * T + t];
	}
	return GBML_OK;
}

/* Candidate t of the last pass becomes the floor closest[]; its largest value into *max_out. */
int
km_local_cand_take(km_work *w, int t, int T, float *max_out)
{
	float		mx = 0;
	int			rc;

	for (int ti = km_cpu_first_task(w); ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		float	   *cl = w->closest[tk->chunk] + tk->start;

		memcpy(cl, w->cand_out[tk->chunk] + (size_t) tk->start * w->T + (size_t) t * tk->count,
			   sizeof(float) * tk->count);
		for (int64_t i = 0; i < tk->count; i++)
			if (cl[i] > mx)
				mx = cl[i];
	}
	if (w->gpu_blocks > 0)
	{
		float		gm;

		if ((rc = km_dev_cand_take(w, t, &gm)) != GBML_OK)
			return rc;
		if (gm > mx)
			mx = gm;
	}
	for (int b = 0; b < w->nblocks; b++)
		w->cur_pot[b] = w->block_pot[(size_t) b * T + t];
	*max_out = mx;
	return GBML_OK;
}

/* Canonical positions per block of the ranked search's running sum. */
#define KM_RANK_BLOCK 4096

/*
 * km_search_one for rows kept in their written order (w->row_of_rank): the
 * same running sum, in canonical order.  One pass in the written order sums
 * the terms per block of canonical positions; each search then skips whole
 * blocks and walks one block's rows through row_of_rank.  The terms and the
 * order are the ones km_search_one adds, so it finds the same rows.  CPU
 * only (the device's blocks are not ranked).
 */
static int
km_search_ranked(km_work *w, const double *u, int m, int64_t total, int64_t *rows)
{
	int64_t		nb = (w->n + KM_RANK_BLOCK - 1) / KM_RANK_BLOCK;
	int64_t    *pot = gbml_alloc0(w->env, sizeof(int64_t) * (size_t) nb);

	if (pot == NULL)
		return w->env->error_code;
	for (int c = 0; c < w->ds->n_chunks; c++)
	{
		const float *cl = w->closest[c];
		const uint32_t *rank = w->rank_of_row + w->chunk_start[c];

		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			pot[rank[i] / KM_RANK_BLOCK] += gbml_km_fix_term((double) cl[i], w->cur_scale);
	}
	for (int q = 0; q < m; q++)
	{
		int64_t		r = (int64_t) (u[q] * (double) total),
					cum = 0,
					g = w->n - 1;

		if (r >= total)
			r = total - 1;
		for (int64_t b = 0; b < nb && total > 0; b++)
		{
			int64_t		end = (b + 1) * KM_RANK_BLOCK < w->n ? (b + 1) * KM_RANK_BLOCK : w->n;

			if (cum + pot[b] <= r)
			{
				cum += pot[b];
				continue;
			}
			for (g = b * KM_RANK_BLOCK; g < end; g++)
			{
				int			c;
				int64_t		i;

				km_locate(w, w->row_of_rank[g], &c, &i);
				cum += gbml_km_fix_term((double) w->closest[c][i], w->cur_scale);
				if (cum > r)
					break;
			}
			if (g == end)
				g = end - 1;
			break;
		}
		rows[q] = total > 0 ? g : 0;	/* every row on a centre: any row will do */
	}
	gbml_free(w->env, pot);
	return GBML_OK;
}

int
km_local_search(km_work *w, const double *u, int m, int64_t total, int64_t *rows)
{
	int			rc;

	if (w->row_of_rank)
		return km_search_ranked(w, u, m, total, rows);
	for (int i = 0; i < m; i++)
		if ((rc = km_search_one(w, u[i], total, &rows[i])) != GBML_OK)
			return rc;
	return GBML_OK;
}

/* k-means++ scratch, and every row's closest distance set to +inf. */
int
km_local_kpp_start(km_work *w, int T)
{
	gbml_env   *env = w->env;

	if (w->closest == NULL)
	{
		w->T = T;
		w->closest = km_alloc_chunks(w, sizeof(float), true);
		if (!km_chunks_ok(w, (void **) w->closest))
			return env->error_code;
		w->cand_out = km_alloc_chunks(w, sizeof(float) * (size_t) T, true);
		if (!km_chunks_ok(w, (void **) w->cand_out))
			return env->error_code;
		w->task_pot = gbml_alloc_array(env, (size_t) w->ntasks * T, sizeof(int64_t));
		w->block_pot = gbml_alloc_array(env, (size_t) w->nblocks * T, sizeof(int64_t));
		w->cur_pot = gbml_alloc_array(env, (size_t) w->nblocks, sizeof(int64_t));
		if (!w->task_pot || !w->block_pot || !w->cur_pot)
			return env->error_code;
	}
	for (int c = 0; c < w->ds->n_chunks; c++)
		for (int64_t i = 0; i < w->ds->chunks[c]->n_rows; i++)
			w->closest[c][i] = INFINITY;
	return w->gpu_blocks > 0 ? km_dev_cand_reset(w) : GBML_OK;
}

/* The driver's k-means++ scratch, the rows' side's, and the first grid. */
static int
km_kmeanspp_start(km_work *w, int T)
{
	double		bound;

	if (w->cand == NULL)
	{
		w->cand = gbml_alloc0(w->env, sizeof(float) * GBML_KM_CAND_LANES * (size_t) w->d);
		w->cand_rows = gbml_alloc_array(w->env, (size_t) T * (size_t) w->d, sizeof(double));
		if (!w->cand || !w->cand_rows)
			return w->env->error_code;
	}
	/*
	 * Before the first centre no distance is known: the grid comes from a
	 * bound (two rows are at most 2 max|x| apart; unit rows at most 2).
	 */
	bound = w->spherical ? 4.0 : 4.0 * w->xnorm_max * w->xnorm_max;
	w->closest_max = INFINITY;
	w->pot_scale = gbml_km_fix_scale(bound * 1.01, w->fix_bits);
	return w->rows->kpp_start(w, T);
}

/*
 * Candidate t of the last pass becomes every row's closest distance: the
 * taken values sit on the pass's grid; the next pass's grid follows their
 * maximum.
 */
static int
km_take_candidate(km_work *w, int t, int T)
{
	float		mx;
	int			rc;

	if ((rc = w->rows->cand_take(w, t, T, &mx)) != GBML_OK)
		return rc;
	w->cur_scale = w->pot_scale;
	w->closest_max = mx;
	w->pot_scale = gbml_km_fix_scale(mx, w->fix_bits);
	return GBML_OK;
}

/*
 * Greedy k-means++ (Arthur & Vassilvitskii; scikit-learn's variant): each new
 * centre is the best of 2 + ln k candidates drawn with probability
 * proportional to the squared distance to the nearest chosen centre.
 */
static int
km_init_kmeanspp(km_work *w, gbml_rng *rng, double *centers)
{
	gbml_env   *env = w->env;
	int			d = w->d;
	int			T = km_kpp_trials(w->k);
	int64_t		idx[GBML_KM_CAND_LANES],
				totals[GBML_KM_CAND_LANES];
	double		u[GBML_KM_CAND_LANES];
	int64_t		pot;
	int			rc;

	if (T > GBML_KM_CAND_LANES)
		T = GBML_KM_CAND_LANES;
	if ((rc = km_kmeanspp_start(w, T)) != GBML_OK)
		return rc;
	idx[0] = (int64_t) gbml_rng_below(rng, (uint64_t) w->n);
	if ((rc = w->rows->copy_rows(w, idx, 1, centers)) != GBML_OK)
		return rc;
	for (int j = 0; j < d; j++)
		w->cand[(size_t) j * GBML_KM_CAND_LANES] = (float) centers[j];
	if ((rc = w->rows->cand_pass(w, 1, totals)) != GBML_OK || (rc = km_take_candidate(w, 0, 1)) != GBML_OK)
		return rc;
	pot = totals[0];

	for (int c = 1; c < w->k; c++)
	{
		int			best = 0;

		w->progress.iteration = c;
		for (int t = 0; t < T; t++)
			u[t] = gbml_rng_uniform(rng);
		if ((rc = w->rows->search(w, u, T, pot, idx)) != GBML_OK)
			return rc;
		/* the candidates' rows in one fetch (a run of reads when they are in files) */
		if ((rc = w->rows->copy_rows(w, idx, T, w->cand_rows)) != GBML_OK)
			return rc;
		for (int t = 0; t < T; t++)
			for (int j = 0; j < d; j++)
				w->cand[(size_t) j * GBML_KM_CAND_LANES + t] = (float) w->cand_rows[(size_t) t * d + j];
		if ((rc = w->rows->cand_pass(w, T, totals)) != GBML_OK)
			return rc;
		for (int t = 1; t < T; t++)
			if (totals[t] < totals[best])
				best = t;
		if ((rc = km_take_candidate(w, best, T)) != GBML_OK)
			return rc;
		pot = totals[best];
		memcpy(centers + (size_t) c * d, w->cand_rows + (size_t) best * d, sizeof(double) * d);
		if ((c & 15) == 0)
		{
			gbml_progress_info info = {"init", c, w->k, NULL, 0};

			if (gbml_progress(env, &info))
				return gbml_error(env, GBML_ECANCELLED, "canceled");
		}
	}
	return GBML_OK;
}

static int
km_init_matrix(km_work *w, const gbml_matrix *m, double *centers)
{
	if (m->rows != w->k || m->cols != w->d)
		return gbml_error(w->env, GBML_EINVAL,
						  "kmeans: init has %lld x %lld values; it must be k x n_features = %d x %d",
						  (long long) m->rows, (long long) m->cols, w->k, w->d);
	for (int i = 0; i < w->k; i++)
	{
		double	   *c = centers + (size_t) i * w->d;
		double		s = 0;

		memcpy(c, m->values + (size_t) i * w->d, sizeof(double) * w->d);
		if (!w->spherical)
			continue;
		for (int j = 0; j < w->d; j++)
			s += c[j] * c[j];
		if (s == 0)
			return gbml_error(w->env, GBML_EINVAL,
							  "kmeans: initial centroid %d is all zeros, which the spherical mode cannot normalise", i + 1);
		s = 1.0 / sqrt(s);
		for (int j = 0; j < w->d; j++)
			c[j] *= s;
	}
	return GBML_OK;
}

/* Run r's first centres into w->c by p's init, from the run's own random stream. */
int
km_init_centres(km_work *w, const gbml_kmeans_params *p, int r)
{
	gbml_rng	rng;
	gbml_progress_info init = {"init", 0, w->k, NULL, 0};

	w->progress = init;
	gbml_rng_stream(&rng, (uint64_t) p->random_seed, (uint64_t) r);
	if (p->init.choice < 0)
		return km_init_matrix(w, &p->init.matrix, w->c);
	if (p->init.choice == GBML_KM_INIT_RANDOM)
		return km_init_random(w, &rng, w->c);
	return km_init_kmeanspp(w, &rng, w->c);
}
