/*
 * kmeans_model.c — the K-Means model: the training entry of the algorithm
 * table (a fit, its section and its metadata), the centroid section's
 * format, its loader, scoring (cluster, distance) and the JSON dump.
 */
#include "kmeans.h"
#include "kmeans_kernels.h"
#include "chunk_prefetch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define KM_SECTION GBML_TAG('K','M','N','S')
#define KM_SECTION_VERSION 1

/* ------------------------------------------------------------------ */
/* Model: section, loader, scoring, JSON                               */
/* ------------------------------------------------------------------ */

typedef struct km_model
{
	int			k;
	int			d;
	bool		spherical;
	double		inertia;
	double	   *c;				/* k x d */
	double	   *cnorm;			/* k: |c| */
	uint64_t   *sizes;
} km_model;

/*
 * Section KMNS: u32 version | u32 k | u32 d | u32 flags (bit 0 spherical) |
 * f64 inertia | u64 sizes[k] | f64 centroids[k*d].
 */
static int
km_write_section(const gbml_kmeans_result *res, gbml_model_writer *wr, gbml_env *env)
{
	gbml_strbuf sb;
	int			rc;

	gbml_sb_init(&sb, env);
	gbml_sb_u32(&sb, KM_SECTION_VERSION);
	gbml_sb_u32(&sb, (uint32_t) res->k);
	gbml_sb_u32(&sb, (uint32_t) res->d);
	gbml_sb_u32(&sb, res->spherical ? 1u : 0u);
	gbml_sb_f64(&sb, res->inertia);
	for (int j = 0; j < res->k; j++)
		gbml_sb_u64(&sb, (uint64_t) res->sizes[j]);
	gbml_sb_append(&sb, res->centroids, sizeof(double) * (size_t) res->k * res->d);
	rc = gbml_sb_status(&sb);
	if (rc == GBML_OK)
		gbml_model_add_sb(wr, KM_SECTION, &sb);
	gbml_sb_free(&sb);
	return rc;
}

/* Squared distance (1 - cosine when spherical) of row x to its nearest centroid (exact double). */
static double
km_eval_row(const float *x, const gbml_kmeans_result *res)
{
	int			d = res->d;
	double		best = INFINITY;

	if (res->spherical)
	{
		double		xn = 0;

		for (int j = 0; j < d; j++)
			xn += (double) x[j] * x[j];
		xn = xn > 0 ? 1.0 / sqrt(xn) : 0;
		for (int j = 0; j < res->k; j++)
		{
			double		dot = 0;

			for (int t = 0; t < d; t++)
				dot += x[t] * res->centroids[(size_t) j * d + t];
			if (1.0 - dot * xn < best)
				best = 1.0 - dot * xn;
		}
	}
	else
		for (int j = 0; j < res->k; j++)
		{
			double		s = gbml_km_sqdist(x, 1.0, res->centroids + (size_t) j * d, d);

			if (s < best)
				best = s;
		}
	return best;
}

/*
 * Inertia of a held-out set under the model's rule (exact double
 * assignment), chunk by chunk from wherever its rows are (an eval set split
 * from rows in files is in files too): the rows' distances in parallel,
 * their sum in row order, so the figure is the same bits for any thread
 * count and residence.  A cancel is checked between stored chunks.
 */
static int
km_eval_inertia(const gbml_dataset *ev, const gbml_kmeans_result *res, gbml_env *env, double *out)
{
	gbml_chunk_prefetch *p = gbml_chunk_prefetch_open(ev, env);
	double	   *best = NULL;
	double		total = 0;
	const float *x;
	int64_t		rows,
				most = 1;
	int			c,
				rc;

	if (p == NULL)
		return env->error_code;
	for (c = 0; c < ev->n_chunks; c++)
		most = ev->chunks[c]->n_rows > most ? ev->chunks[c]->n_rows : most;
	if ((best = gbml_alloc_array(env, (size_t) most, sizeof(double))) == NULL)
	{
		gbml_chunk_prefetch_close(p);
		return env->error_code;
	}
	while ((rc = gbml_chunk_prefetch_next(p, &x, &rows, &c)) == 1)
	{
		gbml_progress_info info = {"eval", c + 1, ev->n_chunks, NULL, 0};

#pragma omp parallel for schedule(static) num_threads(rows * res->k * res->d >= (1 << 20) ? env->threads : 1)
		for (int64_t i = 0; i < rows; i++)
			best[i] = km_eval_row(x + (size_t) i * res->d, res);
		for (int64_t i = 0; i < rows; i++)
			total += best[i];
		if (ev->chunks[c]->x == NULL && c + 1 < ev->n_chunks && gbml_progress(env, &info))
		{
			rc = gbml_error(env, GBML_ECANCELLED, "canceled");
			break;
		}
	}
	gbml_chunk_prefetch_close(p);
	gbml_free(env, best);
	*out = total;
	if (rc < 0 && rc != GBML_ECANCELLED)
	{
		char		why[sizeof(env->error)];

		snprintf(why, sizeof(why), "%s", env->error);
		return gbml_error(env, rc, "kmeans (eval set): %s", why);
	}
	return rc < 0 ? rc : GBML_OK;
}

static int
kmeans_train(const gbml_dataset *ds, gbml_train_context *ctx)
{
	const gbml_kmeans_params *p = ctx->params;
	gbml_env   *env = ctx->env;
	gbml_strbuf *m = ctx->meta;
	gbml_kmeans_result res;
	double		eval_value;
	bool		first = true;
	int			rc;

	if ((rc = gbml_kmeans_fit(ds, p, env, false, &res)) != GBML_OK)
		return rc;
	if ((rc = km_write_section(&res, ctx->writer, env)) != GBML_OK)
	{
		gbml_kmeans_result_free(&res, env);
		return rc;
	}
	eval_value = res.inertia;
	if (ctx->eval && ctx->eval->n_rows > 0 && (rc = km_eval_inertia(ctx->eval, &res, env, &eval_value)) != GBML_OK)
	{
		gbml_kmeans_result_free(&res, env);
		return rc;
	}

	gbml_sb_json_key(m, "metrics", &first);
	gbml_sb_append(m, "{\"inertia\":", 11);
	gbml_sb_json_number(m, res.inertia);
	gbml_sb_append(m, ",\"mean_inertia\":", 16);
	gbml_sb_json_number(m, res.inertia / (double) ds->n_rows);
	if (ctx->eval && ctx->eval->n_rows > 0)
	{
		gbml_sb_append(m, ",\"eval_inertia\":", 16);
		gbml_sb_json_number(m, eval_value);
	}
	gbml_sb_printf(m, ",\"eval_metric\":\"%s\",\"eval_value\":",
				   ctx->eval && ctx->eval->n_rows > 0 ? "eval_inertia" : "inertia");
	gbml_sb_json_number(m, eval_value);
	gbml_sb_append(m, ",\"higher_is_better\":false}", 26);

	/* Run-dependent figures (times, kernel variant) only inside "timings": the driver moves them to the report. */
	gbml_sb_json_key(m, "timings", &first);
	gbml_sb_append(m, "{\"init_seconds\":", 16);
	gbml_sb_json_number(m, res.init_seconds);
	gbml_sb_append(m, ",\"lloyd_seconds\":", 17);
	gbml_sb_json_number(m, res.lloyd_seconds);
	gbml_sb_append(m, ",\"s1_seconds_total\":", 20);
	gbml_sb_json_number(m, res.s1_total);
	gbml_sb_append(m, ",\"s2_seconds_total\":", 20);
	gbml_sb_json_number(m, res.s2_total);
	gbml_sb_append(m, ",\"s1_s2_ratio\":", 15);
	gbml_sb_json_number(m, res.s2_total > 0 ? res.s1_total / res.s2_total : 0);
	gbml_sb_append(m, ",\"seconds_per_iteration\":", 25);
	gbml_sb_json_number(m, res.iterations > 0 ? (res.s1_total + res.s2_total) / res.iterations : 0);
	gbml_sb_append(m, ",\"all_runs_seconds\":", 20);
	gbml_sb_json_number(m, res.total_seconds);
	gbml_sb_printf(m, ",\"kernel\":\"%s\",\"rechecked_rows\":%lld,\"device\":\"%s\",\"row_blocks\":%d,"
				   "\"gpu_seconds\":%.6f,\"cpu_seconds\":%.6f",
				   res.kernel, (long long) res.rechecked, res.device, res.n_blocks, res.gpu_seconds,
				   res.cpu_seconds);
	if (strcmp(res.device, "hybrid") == 0)
	{
		/* the split of every iteration: the GPU's share of the rows */
		gbml_sb_printf(m, ",\"blocks_moved\":%lld,\"gpu_row_share\":", (long long) res.blocks_moved);
		gbml_sb_json_doubles(m, res.split, res.n_split);
	}
	gbml_sb_append(m, ",\"s1_seconds\":", 14);
	gbml_sb_json_doubles(m, res.s1, res.n_timed);
	gbml_sb_append(m, ",\"s2_seconds\":", 14);
	gbml_sb_json_doubles(m, res.s2, res.n_timed);
	gbml_sb_append(m, "}", 1);

	gbml_sb_printf(m, ",\"k\":%d,\"iterations\":%d,\"stop_reason\":\"%s\",\"inertia\":",
				   res.k, res.iterations, res.stop_reason);
	gbml_sb_json_number(m, res.inertia);
	gbml_sb_append(m, ",\"frac_changed\":", 16);
	gbml_sb_json_number(m, res.last_frac_changed);
	gbml_sb_append(m, ",\"tol_scaled\":", 14);
	gbml_sb_json_number(m, res.tol_scaled);
	gbml_sb_printf(m, ",\"n_init\":%d,\"best_init\":%d,\"spherical\":%s,\"empty_relocations\":%lld,\"cluster_sizes\":[",
				   res.n_init, res.best_init, res.spherical ? "true" : "false",
				   (long long) res.empty_relocations);
	for (int j = 0; j < res.k; j++)
		gbml_sb_printf(m, j ? ",%lld" : "%lld", (long long) res.sizes[j]);
	gbml_sb_append(m, "]", 1);
	rc = gbml_sb_status(m);
	gbml_kmeans_result_free(&res, env);
	return rc;
}

static void
km_model_free(km_model *m, gbml_env *env)
{
	if (m == NULL)
		return;
	gbml_free(env, m->c);
	gbml_free(env, m->cnorm);
	gbml_free(env, m->sizes);
	gbml_free(env, m);
}

static int
kmeans_load(const gbml_model_reader *model, gbml_env *env, void **handle)
{
	const uint8_t *data;
	size_t		len;
	gbml_cursor cur;
	uint32_t	version,
				k,
				d,
				flags;
	km_model   *m;

	if (!gbml_model_find(model, KM_SECTION, &data, &len))
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section is missing");
	gbml_cursor_init(&cur, data, len);
	version = gbml_cursor_u32(&cur);
	k = gbml_cursor_u32(&cur);
	d = gbml_cursor_u32(&cur);
	flags = gbml_cursor_u32(&cur);
	if (!cur.ok || version != KM_SECTION_VERSION)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: unknown centroid section version");
	if (k < 1 || k > GBML_KM_MAX_K)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: k = %u is out of range", k);
	if (d != model->n_features || d < 1)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: %u centroid features, the model has %u",
						  d, model->n_features);
	if ((flags & ~1u) != 0)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: unknown flags 0x%x", flags);
	/* Exact size: header, inertia, sizes, centroids. */
	if (gbml_cursor_remaining(&cur) != 8 + 8 * (size_t) k + 8 * (size_t) k * d)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section has the wrong length");

	m = gbml_alloc0(env, sizeof(km_model));
	if (m == NULL)
		return env->error_code;
	m->k = (int) k;
	m->d = (int) d;
	m->spherical = (flags & 1u) != 0;
	m->c = gbml_alloc_array(env, (size_t) k * d, sizeof(double));
	m->cnorm = gbml_alloc_array(env, k, sizeof(double));
	m->sizes = gbml_alloc_array(env, k, sizeof(uint64_t));
	if (m->c == NULL || m->cnorm == NULL || m->sizes == NULL)
	{
		int			rc = env->error_code;

		km_model_free(m, env);
		return rc;
	}
	m->inertia = gbml_cursor_f64(&cur);
	for (uint32_t j = 0; j < k; j++)
		m->sizes[j] = gbml_cursor_u64(&cur);
	if (!gbml_cursor_f64_array(&cur, m->c, (size_t) k * d) || !cur.ok)
	{
		km_model_free(m, env);
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section is truncated");
	}
	for (uint32_t j = 0; j < k; j++)
	{
		double		s = 0;

		for (uint32_t i = 0; i < d; i++)
		{
			double		v = m->c[(size_t) j * d + i];

			if (!isfinite(v) || fabs(v) > 1e150)
			{
				km_model_free(m, env);
				return gbml_error(env, GBML_ECORRUPT, "kmeans model: centroid %u has a non-finite value", j + 1);
			}
			s += v * v;
		}
		m->cnorm[j] = sqrt(s);
	}
	*handle = m;
	return GBML_OK;
}

static void
kmeans_unload(void *handle, gbml_env *env)
{
	km_model_free(handle, env);
}

/*
 * Nearest centroid of one row, in double: Euclidean (|x - c|^2 directly, not
 * the expanded form) or cosine.  Ties go to the lower cluster index.  A zero
 * row in the spherical mode has cosine 0 with every centroid: cluster 0 at
 * distance 1.
 */
static double
kmeans_predict(const void *handle, const float *x, gbml_output what)
{
	const km_model *m = handle;
	int			d = m->d;
	double		best = INFINITY;
	int			arg = 0;

	for (int i = 0; i < d; i++)
		if (!isfinite(x[i]))
			return NAN;
	if (m->spherical)
	{
		double		xn = 0;

		for (int i = 0; i < d; i++)
			xn += (double) x[i] * x[i];
		xn = sqrt(xn);
		for (int j = 0; j < m->k; j++)
		{
			const double *c = m->c + (size_t) j * d;
			double		dot = 0,
						dist;

			for (int i = 0; i < d; i++)
				dot += x[i] * c[i];
			dist = (xn > 0 && m->cnorm[j] > 0) ? 1.0 - dot / (xn * m->cnorm[j]) : 1.0;
			if (dist < best)
			{
				best = dist;
				arg = j;
			}
		}
		return what == GBML_OUT_DISTANCE ? best : (double) arg;
	}
	for (int j = 0; j < m->k; j++)
	{
		double		s = gbml_km_sqdist(x, 1.0, m->c + (size_t) j * d, d);

		if (s < best)
		{
			best = s;
			arg = j;
		}
	}
	return what == GBML_OUT_DISTANCE ? sqrt(best) : (double) arg;
}

static int
kmeans_to_json(const void *handle, gbml_strbuf *out)
{
	const km_model *m = handle;

	gbml_sb_printf(out, "\"k\":%d,\"n_features\":%d,\"spherical\":%s,\"inertia\":",
				   m->k, m->d, m->spherical ? "true" : "false");
	gbml_sb_json_number(out, m->inertia);
	gbml_sb_append(out, ",\"cluster_sizes\":[", 18);
	for (int j = 0; j < m->k; j++)
		gbml_sb_printf(out, j ? ",%llu" : "%llu", (unsigned long long) m->sizes[j]);
	gbml_sb_append(out, "],\"centroids\":[", 15);
	for (int j = 0; j < m->k; j++)
	{
		if (j)
			gbml_sb_append(out, ",", 1);
		gbml_sb_json_doubles(out, m->c + (size_t) j * m->d, m->d);
	}
	gbml_sb_append(out, "]", 1);
	return gbml_sb_status(out);
}

/*
 * Importance: each feature's share of the between-cluster dispersion,
 * sum_j size_j (c_jf - mean_f)^2 normalised to sum 1 — how much the feature
 * separates the clusters.
 */
static int
kmeans_importance(const void *handle, double *out)
{
	const km_model *m = handle;
	int			d = m->d;
	double		total_w = 0;

	for (int j = 0; j < m->k; j++)
		total_w += (double) m->sizes[j];
	for (int f = 0; f < d; f++)
	{
		double		mean = 0,
					s = 0;

		if (total_w <= 0)
		{
			out[f] = 0;
			continue;
		}
		for (int j = 0; j < m->k; j++)
			mean += (double) m->sizes[j] * m->c[(size_t) j * d + f];
		mean /= total_w;
		for (int j = 0; j < m->k; j++)
		{
			double		t = m->c[(size_t) j * d + f] - mean;

			s += (double) m->sizes[j] * t * t;
		}
		out[f] = s;
	}
	gbml_importance_normalize(out, d);
	return GBML_OK;
}

const gbml_algorithm gbml_algorithm_kmeans = {
	.id = GBML_ALGO_KMEANS,
	.name = "kmeans",
	.params = gbml_kmeans_param_specs,
	.params_size = sizeof(gbml_kmeans_params),
	.input_flags = 0,
	.outputs = GBML_OUT_CLUSTER | GBML_OUT_DISTANCE | GBML_OUT_SCORE,
	.gpu_trains = true,
	.hybrid_trains = true,
	.reads_spilled_rows = true,
	.train = kmeans_train,
	.load = kmeans_load,
	.unload = kmeans_unload,
	.predict = kmeans_predict,
	.to_json = kmeans_to_json,
	.importance = kmeans_importance,
};
