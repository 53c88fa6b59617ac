/*
 * kmeans_shard.c — a K-Means shard (gbml_kmeans_shard_ops): its rows, their
 * global indices, and its answers to the coordinator's requests, each from
 * the local row operations (km_local_rows) on its own rows, in memory or
 * in temporary files.  Every figure it returns is an extreme or an integer
 * sum, or rows and terms tagged with their global index, so the
 * coordinator's merge does not depend on how the rows were dealt.
 */
#include "kmeans_shards.h"
#include "kmeans_shard_msg.h"
#include "shard_order.h"
#include "kmeans_internal.h"
#include "kmeans_exact.h"
#include "onehot.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct km_shard
{
	gbml_env   *env;
	const gbml_dataset *ds;
	/* the rows eval_fraction held out, raw (the coordinator gathers and encodes them), or NULL */
	const gbml_dataset *eval;
	int			eval_d;			/* their width */
	/* categorical inputs (one_hot): the encoding by the union's counts, the rows trained on (ds) */
	gbml_onehot *onehot;
	gbml_dataset xds;
	km_work		w;
	gbml_shard_ranks ranks;		/* per local row (canonical order): its global index, ascending */
	gbml_shard_hashes hashes;	/* per local row: canonical hash, content hash, until ranked */
	int64_t    *block_pot;		/* global blocks x T: the last candidate pass */
	int64_t		n_blocks;
	bool		grid_set;		/* the coordinator's grid arrived (GRID) */
	bool		labeled;		/* every row has a label (a PASS since the last RESET_LABELS) */
	double	   *mn,				/* d: this shard's per-feature extremes (normalised when spherical) */
			   *mx;
	double		xnorm_local;	/* this shard's largest row norm */
	double		far_max;		/* the largest distance of the last DIST_MAX, -1 when stale */
	double		closest_max;	/* the largest closest distance (TAKE's), +inf before the first */
} km_shard;

/*
 * Whether a grid the coordinator sent keeps every term of values up to
 * vmax below 2^(fix_bits - 1), as a grid from the union's extremes does
 * (those are at least this shard's): then no sum of the shard's terms can
 * overflow.  A request with a finer grid is malformed, not undefined.
 */
static bool
km_grid_fits(const km_shard *sh, double scale, double vmax)
{
	return isfinite(scale) && scale > 0 && isfinite(vmax) && scale * vmax < ldexp(1.0, sh->w.fix_bits - 1);
}

/* Whether v[0..n) are finite, and > 0 when positive: a request's numbers before any work with them. */
static bool
km_finite(const double *v, int64_t n, bool positive)
{
	for (int64_t i = 0; i < n; i++)
		if (!isfinite(v[i]) || (positive && !(v[i] > 0)))
			return false;
	return true;
}

static void km_shard_close(void *state);

/*
 * The shard over ds (canonical order), its rows' hashes for the global
 * order, its categorical inputs one-hot encoded by the union's counts
 * (one_hot); the hello.
 */
static int
km_shard_open(const gbml_dataset *ds, const gbml_dataset *eval, const void *algo_params, gbml_env *env, void **out,
			  gbml_strbuf *hello)
{
	const gbml_kmeans_params *p = algo_params;
	km_shard   *sh;
	int			rc;

	*out = NULL;
	if (p->k <= 0 || p->k > GBML_KM_MAX_K)
		return gbml_error(env, GBML_EINVAL, "kmeans: parameter \"k\" is required (the number of clusters, at least 1)");
	if (gbml_schema_n_categorical(ds->schema) == 0 && ds->has_missing)
		return gbml_error(env, GBML_EINVAL, "kmeans: features must be finite (NaN or infinity found)");
	sh = gbml_alloc0(env, sizeof(*sh));
	if (sh == NULL)
		return env->error_code;
	sh->env = env;
	sh->ds = ds;
	sh->eval = eval;
	sh->eval_d = ds->n_features;
	sh->far_max = -1;
	gbml_dataset_init(&sh->xds, false);
	/* the global order is the raw rows' (one server's is too: it encodes them in their canonical order) */
	if (ds->n_rows > 0 && (rc = gbml_shard_hashes_build(&sh->hashes, ds, env)) != GBML_OK)
		goto fail;
	if (gbml_schema_n_categorical(ds->schema) > 0 && ds->n_rows > 0)
	{
		gbml_dataset no_eval;	/* (the eval rows stay raw) */

		if ((rc = km_one_hot(ds, NULL, p, true, env, &sh->onehot, &sh->xds, &no_eval)) != GBML_OK)
			goto fail;
		sh->ds = ds = &sh->xds;
	}
	if (ds->n_rows > 0 && (rc = km_setup(&sh->w, ds, p, env)) != GBML_OK)
		goto fail;
	gbml_shard_hello_head(hello, KM_SHARD_MAGIC, ds->n_rows, ds->n_features);
	gbml_msg_put_f64(hello, ds->n_rows > 0 ? sh->w.xnorm_max : 0);
	if ((rc = gbml_sb_status(hello)) != GBML_OK)
		goto fail;
	*out = sh;
	return GBML_OK;
fail:
	km_shard_close(sh);
	return rc;
}

static void
km_shard_close(void *state)
{
	km_shard   *sh = state;
	gbml_env   *env;

	if (sh == NULL)
		return;
	env = sh->env;
	km_work_free(&sh->w);
	gbml_shard_ranks_free(&sh->ranks, env);
	gbml_shard_hashes_free(&sh->hashes, env);
	gbml_onehot_free(sh->onehot, env);
	gbml_dataset_free(&sh->xds, env);
	gbml_free(env, sh->block_pot);
	gbml_free(env, sh->mn);
	gbml_free(env, sh->mx);
	gbml_free(env, sh);
}

/* The order is whole: the extremes every later grid is checked against, the union's row count's grid. */
static int
km_shard_ranked(km_shard *sh)
{
	int			rc;

	gbml_shard_hashes_free(&sh->hashes, sh->env);
	sh->mn = gbml_alloc_array(sh->env, (size_t) sh->w.d, sizeof(double));
	sh->mx = gbml_alloc_array(sh->env, (size_t) sh->w.d, sizeof(double));
	if (sh->mn == NULL || sh->mx == NULL)
		return sh->env->error_code;
	if ((rc = km_local_rows.extents(&sh->w, sh->mn, sh->mx)) != GBML_OK)
		return rc;
	sh->xnorm_local = sh->w.xnorm_max;
	/* the grid's precision follows the union's row count, as on one server */
	sh->w.n = sh->ranks.n_global;
	sh->w.fix_bits = gbml_km_fix_bits(sh->ranks.n_global);
	sh->n_blocks = (sh->ranks.n_global + KM_SHARD_BLOCK_ROWS - 1) / KM_SHARD_BLOCK_ROWS;
	return GBML_OK;
}

/* A page of global indices (gbml_shard_ranks_receive); the order whole: km_shard_ranked. */
static int
km_shard_ranks(km_shard *sh, gbml_msg_reader *r)
{
	bool		complete;
	int			rc;

	if (sh->hashes.hash == NULL && gbml_shard_ranks_trailing_page(&sh->ranks, r))
		return GBML_OK;
	if (sh->hashes.hash == NULL)
		return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: the global row order arrived twice");
	if ((rc = gbml_shard_ranks_receive(&sh->ranks, sh->ds->n_rows, r, sh->env, &complete)) != GBML_OK)
		return rc;
	return complete ? km_shard_ranked(sh) : GBML_OK;
}

/* This shard's per-feature extremes (found once the order was whole): minima negated, then maxima. */
static int
km_shard_extents(km_shard *sh, gbml_strbuf *reply)
{
	for (int j = 0; j < sh->w.d; j++)
		gbml_msg_put_f64(reply, -sh->mn[j]);	/* the coordinator folds both halves by max */
	gbml_msg_put(reply, sh->mx, sizeof(double) * (size_t) sh->w.d);
	return GBML_OK;
}

static int
km_shard_feature_sums(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	int			d = sh->ds->n_features;
	bool		sqdev = gbml_msg_get_i64(r) != 0;
	double	   *mean = gbml_alloc_array(sh->env, (size_t) d, sizeof(double)),
			   *scale = gbml_alloc_array(sh->env, (size_t) d, sizeof(double));
	int64_t    *sums = gbml_alloc0(sh->env, sizeof(int64_t) * (size_t) d);
	int			rc = GBML_OK;

	if (mean == NULL || scale == NULL || sums == NULL)
		rc = sh->env->error_code;
	else
	{
		gbml_msg_get(r, mean, sizeof(double) * d);
		gbml_msg_get(r, scale, sizeof(double) * d);
		r->bad |= !km_finite(mean, d, false);
		for (int j = 0; j < d && !r->bad; j++)
		{
			double		dev = fmax(sh->mx[j] - mean[j], mean[j] - sh->mn[j]);

			r->bad = !km_grid_fits(sh, scale[j], sqdev ? dev * dev : fmax(fabs(sh->mn[j]), fabs(sh->mx[j])));
		}
		if (!r->bad)
			rc = km_local_rows.feature_sums(&sh->w, sqdev ? mean : NULL, scale, sums);
		gbml_msg_put(reply, sums, sizeof(int64_t) * d);
	}
	gbml_free(sh->env, mean);
	gbml_free(sh->env, scale);
	gbml_free(sh->env, sums);
	return rc;
}

/* The requested global rows this shard holds: (request position, row) each. */
static int
km_shard_rows(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	int			d = sh->ds->n_features;
	int64_t		m = gbml_msg_get_count(r, 1 << 20),
				found = 0;
	int64_t    *g = gbml_alloc_array(sh->env, (size_t) (m > 0 ? m : 1), sizeof(int64_t));
	int64_t    *pos = gbml_alloc_array(sh->env, (size_t) (m > 0 ? m : 1), sizeof(int64_t));
	double	   *x = NULL;
	int			rc = GBML_OK;

	if (g == NULL || pos == NULL)
	{
		rc = sh->env->error_code;
		goto done;
	}
	for (int64_t i = 0; i < m; i++)
	{
		int64_t		local = gbml_shard_ranks_local(&sh->ranks, gbml_msg_get_i64(r));

		if (local >= 0 && !r->bad)
		{
			g[found] = local;
			pos[found++] = i;
		}
	}
	gbml_msg_put_i64(reply, found);
	if (found == 0)
		goto done;
	x = gbml_alloc_array(sh->env, (size_t) found * d, sizeof(double));
	if (x == NULL || (rc = km_copy_rows(&sh->w, g, (int) found, x)) != GBML_OK)
	{
		rc = x == NULL ? sh->env->error_code : rc;
		goto done;
	}
	for (int64_t i = 0; i < found; i++)
	{
		gbml_msg_put_i64(reply, pos[i]);
		gbml_msg_put(reply, x + (size_t) i * d, sizeof(double) * d);
	}
done:
	gbml_free(sh->env, g);
	gbml_free(sh->env, pos);
	gbml_free(sh->env, x);
	return rc;
}

static int
km_shard_kpp_start(km_shard *sh, gbml_msg_reader *r)
{
	km_work    *w = &sh->w;
	int			T = (int) gbml_msg_get_count(r, GBML_KM_CAND_LANES);

	if (r->bad || T < 1)
		return GBML_OK;
	if (w->cand == NULL)
	{
		w->cand = gbml_alloc0(sh->env, sizeof(float) * GBML_KM_CAND_LANES * (size_t) w->d);
		sh->block_pot = gbml_alloc_array(sh->env, (size_t) (sh->n_blocks > 0 ? sh->n_blocks : 1) * T,
										 sizeof(int64_t));
		if (w->cand == NULL || sh->block_pot == NULL)
			return sh->env->error_code;
	}
	sh->closest_max = INFINITY;
	return km_local_rows.kpp_start(w, T);
}

/*
 * A bound on every value a candidate pass sums here: its closest distance,
 * or before the first centre the distance to the farthest candidate,
 * (|x| + |c|)^2.
 */
static double
km_shard_potential_bound(const km_shard *sh, int T)
{
	double		cmax = 0;

	for (int t = 0; t < T; t++)
	{
		double		s = 0;

		for (int j = 0; j < sh->w.d; j++)
			s += (double) sh->w.cand[(size_t) j * GBML_KM_CAND_LANES + t] * sh->w.cand[(size_t) j * GBML_KM_CAND_LANES + t];
		cmax = fmax(cmax, sqrt(s));
	}
	/* spherical: the rows count at unit norm (their scale), as the coordinator's first grid assumes */
	double		xnorm = sh->w.spherical ? 1.0 : sh->xnorm_local;

	return fmin(sh->closest_max, (xnorm + cmax) * (xnorm + cmax) * 1.0001);
}

/* A candidate pass's grid: its terms fit (km_grid_fits) and its float distances cannot overflow. */
static bool
km_shard_potential_grid_ok(const km_shard *sh, int T)
{
	double		bound = km_shard_potential_bound(sh, T);

	return bound < FLT_MAX / 4 && km_grid_fits(sh, sh->w.pot_scale, bound);
}

/*
 * Distances to the candidates; per global block and candidate, the
 * fixed-point potential of this shard's rows in it (the terms the local
 * pass summed per task, summed again by global block).
 */
static int
km_shard_cand(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	km_work    *w = &sh->w;
	int			T = (int) gbml_msg_get_count(r, GBML_KM_CAND_LANES);
	int64_t		totals[GBML_KM_CAND_LANES];
	size_t		cells;
	int			rc;

	w->pot_scale = gbml_msg_get_f64(r);
	if (w->cand != NULL)
		gbml_msg_get(r, w->cand, sizeof(float) * GBML_KM_CAND_LANES * (size_t) w->d);
	for (size_t i = 0; w->cand != NULL && i < GBML_KM_CAND_LANES * (size_t) w->d; i++)
		r->bad |= !isfinite(w->cand[i]);
	if (r->bad || T < 1 || T > w->T)
		return GBML_OK;
	r->bad = !km_shard_potential_grid_ok(sh, T);
	if (r->bad)
		return GBML_OK;
	cells = (size_t) sh->n_blocks * T;
	memset(sh->block_pot, 0, sizeof(int64_t) * cells);
	if ((rc = km_local_rows.cand_pass(w, T, totals)) != GBML_OK)
		return rc;
	for (int ti = 0; ti < w->ntasks; ti++)
	{
		const km_task *tk = &w->tasks[ti];
		const float *co = w->cand_out[tk->chunk] + (size_t) tk->start * w->T;

		for (int64_t i = 0; i < tk->count; i++)
		{
			int64_t		b = sh->ranks.rank[tk->global + i] / KM_SHARD_BLOCK_ROWS;

			for (int t = 0; t < T; t++)
				sh->block_pot[(size_t) b * T + t] += gbml_km_fix_term((double) co[(size_t) t * tk->count + i],
																	  w->pot_scale);
		}
	}
	gbml_msg_put(reply, sh->block_pot, sizeof(int64_t) * cells);
	return GBML_OK;
}

static int
km_shard_take(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	int			t = (int) gbml_msg_get_count(r, GBML_KM_CAND_LANES - 1),
				T = (int) gbml_msg_get_count(r, GBML_KM_CAND_LANES);
	float		mx = 0;
	int			rc = GBML_OK;

	r->bad |= !(t < T && T <= sh->w.T);
	if (!r->bad && (rc = km_local_rows.cand_take(&sh->w, t, T, &mx)) == GBML_OK)
		sh->closest_max = mx;
	gbml_msg_put(reply, &mx, sizeof(mx));
	return rc;
}

/* Per requested global block: (global row, potential term on grid cur_scale) of this shard's rows in it. */
static int
km_shard_terms(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	km_work    *w = &sh->w;
	double		cur_scale = gbml_msg_get_f64(r);
	int64_t		m = gbml_msg_get_count(r, GBML_KM_CAND_LANES);

	r->bad |= !km_grid_fits(sh, cur_scale, sh->closest_max);

	for (int64_t q = 0; q < m && !r->bad; q++)
	{
		int64_t		b = gbml_msg_get_count(r, sh->n_blocks),
					lo = 0,
					hi = sh->ds->n_rows,
					end = (b + 1) * KM_SHARD_BLOCK_ROWS,
					count = 0;
		size_t		at;

		while (lo < hi)
		{
			int64_t		mid = lo + (hi - lo) / 2;

			if (sh->ranks.rank[mid] < b * KM_SHARD_BLOCK_ROWS)
				lo = mid + 1;
			else
				hi = mid;
		}
		at = reply->len;
		gbml_msg_put_i64(reply, 0);
		for (int64_t i = lo; i < sh->ds->n_rows && sh->ranks.rank[i] < end; i++, count++)
		{
			int			c;
			int64_t		row;

			km_locate(w, i, &c, &row);
			gbml_msg_put_i64(reply, sh->ranks.rank[i]);
			gbml_msg_put_i64(reply, gbml_km_fix_term((double) w->closest[c][row], cur_scale));
		}
		if (!reply->failed)
			memcpy(reply->data + at, &count, sizeof(count));
	}
	return GBML_OK;
}

/* The centroids a request carries into w->c. */
static void
km_shard_centroids(km_shard *sh, gbml_msg_reader *r)
{
	gbml_msg_get(r, sh->w.c, sizeof(double) * (size_t) sh->w.k * sh->w.d);
	/* centroids are means of float rows: a value past float's range is no centroid */
	for (int64_t i = 0; i < (int64_t) sh->w.k * sh->w.d && !r->bad; i++)
		r->bad = !(fabs(sh->w.c[i]) <= FLT_MAX);
}

static int
km_shard_pass(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	km_work    *w = &sh->w;
	bool		update = gbml_msg_get_i64(r) != 0;
	km_pass_stats st;
	int			rc;

	memset(&st, 0, sizeof(st));
	km_shard_centroids(sh, r);
	if (r->bad)
		return GBML_OK;
	if ((rc = km_local_rows.pass(w, update, &st)) != GBML_OK)
		return rc;
	sh->labeled = true;
	gbml_msg_put_i64(reply, st.changed);
	gbml_msg_put_i64(reply, st.rechecked);
	gbml_msg_put(reply, w->counts, sizeof(int64_t) * w->k);
	if (update)
		gbml_msg_put(reply, w->sums, sizeof(int64_t) * (size_t) w->k * w->d);
	return GBML_OK;
}

static int
km_shard_far(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	km_work    *w = &sh->w;
	int			m = (int) gbml_msg_get_count(r, GBML_KM_MAX_K);
	km_far	   *far;
	double	   *x;
	int			rc;

	km_shard_centroids(sh, r);
	if (r->bad || m < 1)
		return GBML_OK;
	if (m > sh->ds->n_rows)
		m = (int) sh->ds->n_rows;
	far = gbml_alloc_array(sh->env, (size_t) m, sizeof(km_far));
	x = gbml_alloc_array(sh->env, (size_t) m * w->d, sizeof(double));
	if (far == NULL || x == NULL)
		rc = sh->env->error_code;
	else if ((sh->far_max = -1, rc = km_local_rows.farthest(w, far, &m, x)) == GBML_OK)
	{
		gbml_msg_put_i64(reply, m);
		for (int e = 0; e < m; e++)
		{
			gbml_msg_put_f64(reply, far[e].dist);
			gbml_msg_put_i64(reply, sh->ranks.rank[far[e].row]);
			gbml_msg_put_i64(reply, far[e].label);
			gbml_msg_put(reply, x + (size_t) e * w->d, sizeof(double) * w->d);
		}
	}
	gbml_free(sh->env, far);
	gbml_free(sh->env, x);
	return rc;
}

static int
km_shard_dist_max(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	double		mx = 0;
	int			rc = GBML_OK;

	km_shard_centroids(sh, r);
	if (!r->bad)
		rc = km_local_rows.dist_max(&sh->w, &mx);
	sh->far_max = r->bad ? -1 : mx;
	gbml_msg_put_f64(reply, mx);
	return rc;
}

static int
km_shard_dist_sum(km_shard *sh, gbml_msg_reader *r, gbml_strbuf *reply)
{
	double		scale = gbml_msg_get_f64(r);
	int64_t		total = 0;
	int			rc = GBML_OK;

	r->bad |= sh->far_max < 0 || !km_grid_fits(sh, scale, sh->far_max);
	if (!r->bad)
		rc = km_local_rows.dist_sum(&sh->w, scale, &total);
	gbml_msg_put_i64(reply, total);
	return rc;
}

static int
km_shard_grid(km_shard *sh, gbml_msg_reader *r)
{
	gbml_msg_get(r, sh->w.fix_scale, sizeof(double) * sh->w.d);
	sh->w.xnorm_max = gbml_msg_get_f64(r);
	if (!km_finite(&sh->w.xnorm_max, 1, false) || sh->w.xnorm_max < sh->xnorm_local)
		r->bad = true;
	for (int j = 0; j < sh->w.d && !r->bad; j++)
		r->bad = !km_grid_fits(sh, sh->w.fix_scale[j], fmax(fabs(sh->mn[j]), fabs(sh->mx[j])));
	sh->grid_set = !r->bad;
	return GBML_OK;
}

static int
km_shard_step(void *state, const uint8_t *req, size_t len, gbml_strbuf *reply)
{
	km_shard   *sh = state;
	gbml_msg_reader r = {req, req + len, false};
	int64_t		op = gbml_msg_get_i64(&r);
	int			rc;

	if (op == GBML_SHARD_OP_EVAL_ROWS)
	{
		/* (any time: the coordinator gathers them before the training begins; its only rows, maybe) */
		if ((rc = gbml_shard_eval_rows_page(sh->eval, sh->eval_d, &r, reply, sh->env)) != GBML_OK)
			return rc;
		return r.bad ? gbml_error(sh->env, GBML_EINVAL, "kmeans shard: malformed request %lld", (long long) op)
			: gbml_sb_status(reply);
	}
	/* a shard without training rows is left out of every step (the coordinator skips its replies) */
	if (sh->ds->n_rows == 0)
		return GBML_OK;
	if (op != KM_OP_RANKS && op != KM_OP_HASHES && sh->hashes.hash != NULL)
		return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: a request before the global row order");
	if ((op == KM_OP_PASS || op == KM_OP_FAR || op == KM_OP_DIST_MAX || op == KM_OP_DIST_SUM) && !sh->grid_set)
		return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: request %lld before the grid", (long long) op);
	if ((op == KM_OP_FAR || op == KM_OP_DIST_MAX || op == KM_OP_DIST_SUM) && !sh->labeled)
		return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: request %lld before the rows have labels",
						  (long long) op);
	if ((op == KM_OP_DIST_SUM && sh->w.far == NULL) ||
		((op == KM_OP_TAKE || op == KM_OP_TERMS) && sh->w.closest == NULL))
		return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: request %lld out of order", (long long) op);
	switch (op)
	{
		case KM_OP_HASHES:
			/* (an empty page is answered after the order too: gbml_shard_hashes_page) */
			gbml_shard_hashes_page(&sh->hashes, &r, reply);
			if (r.bad && sh->hashes.hash == NULL)
				return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: row hashes asked for after the global row order");
			rc = GBML_OK;
			break;
		case KM_OP_RANKS:
			rc = km_shard_ranks(sh, &r);
			break;
		case KM_OP_EXTENTS:
			rc = km_shard_extents(sh, reply);
			break;
		case KM_OP_GRID:
			rc = km_shard_grid(sh, &r);
			break;
		case KM_OP_FEATURE_SUMS:
			rc = km_shard_feature_sums(sh, &r, reply);
			break;
		case KM_OP_ROWS:
			rc = km_shard_rows(sh, &r, reply);
			break;
		case KM_OP_KPP_START:
			rc = km_shard_kpp_start(sh, &r);
			break;
		case KM_OP_CAND:
			rc = km_shard_cand(sh, &r, reply);
			break;
		case KM_OP_TAKE:
			rc = km_shard_take(sh, &r, reply);
			break;
		case KM_OP_TERMS:
			rc = km_shard_terms(sh, &r, reply);
			break;
		case KM_OP_RESET_LABELS:
			rc = km_local_rows.reset_labels(&sh->w);
			sh->labeled = false;
			break;
		case KM_OP_PASS:
			rc = km_shard_pass(sh, &r, reply);
			break;
		case KM_OP_FAR:
			rc = km_shard_far(sh, &r, reply);
			break;
		case KM_OP_DIST_MAX:
			rc = km_shard_dist_max(sh, &r, reply);
			break;
		case KM_OP_DIST_SUM:
			rc = km_shard_dist_sum(sh, &r, reply);
			break;
		default:
			return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: unknown request %lld", (long long) op);
	}
	if (rc != GBML_OK)
		return rc;
	if (r.bad || r.p != r.end)
		return gbml_error(sh->env, GBML_EINVAL, "kmeans shard: malformed request %lld", (long long) op);
	return gbml_sb_status(reply);
}

const gbml_shard_ops gbml_kmeans_shard_ops = {
	.hello_magic = KM_SHARD_MAGIC,
	.takes_eval_source = true,	/* (the coordinator scores it: its inertia under the model) */
	.takes_eval_split = true,
	.gathers_eval_split = true,
	.takes_categorical = true,
	.counts_categories = true,
	.open = km_shard_open,
	.step = km_shard_step,
	.close = km_shard_close,
};
