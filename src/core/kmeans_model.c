/*
 * kmeans_model.c — the K-Means model: the training entry of the algorithm
 * table (a fit, its section and its metadata), the centroid section's
 * format, its loader, scoring (cluster, distance), the JSON dump and
 * feature importance.
 *
 * Categorical features (schema.h) need "one_hot": true: the training and
 * eval rows are then one-hot encoded (onehot.h: a 0/1 column per category
 * a training row has, NULL included, no cap and no "other" column), the
 * fit runs on the encoded rows, the model keeps the encoding ('ONEH'), and
 * scoring measures a raw row's distances as its encoded row's, with the
 * same arithmetic in the same order, without building it; a value
 * training never saw leaves its feature's columns all zero.
 */
#include "kmeans.h"
#include "kmeans_shards.h"
#include "kmeans_kernels.h"
#include "kmeans_internal.h"
#include "chunk_prefetch.h"
#include "onehot.h"

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
	double	   *c_t;			/* the centroids in groups of 4, transposed (gbml_km_sqdist_block's
								 * layout, zero-padded to a whole group), or NULL */
	uint64_t   *sizes;
	gbml_onehot *onehot;		/* categorical features' encoding (d = its columns), or NULL */
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
		return gbml_error_prefix(env, rc, "kmeans (eval set)");
	return rc < 0 ? rc : GBML_OK;
}

/* The fit on rows of plain numbers: the input's, or its one-hot encoding's (enc: the model keeps it). */
static int
km_train_rows(const gbml_dataset *ds, gbml_train_context *ctx, const gbml_onehot *enc)
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
	if ((rc = km_write_section(&res, ctx->writer, env)) != GBML_OK ||
		(enc && (rc = gbml_onehot_add_section(enc, ctx->writer, env)) != GBML_OK))
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
	if (res.traffic.shards > 0)
	{
		/* the exchanges with the shards: the coordination's cost beside the shards' own work */
		gbml_sb_append(m, ",", 1);
		gbml_shard_traffic_json(m, &res.traffic, "lloyd_pass");
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
	if (enc)
		gbml_sb_printf(m, ",\"one_hot_columns\":%d", enc->n_cols);
	rc = gbml_sb_status(m);
	gbml_kmeans_result_free(&res, env);
	return rc;
}

/* A categorical feature without one_hot: the error names the first one and says what to do. */
static int
km_refuse_categorical(const gbml_feature_schema *s, gbml_env *env)
{
	int			j = 0;

	while (!gbml_feature_is_categorical(s, j))
		j++;
	gbml_error(env, GBML_EINVAL, "kmeans: column \"%s\" (%s) is categorical, and K-Means measures distances between numbers",
			   s->features[j].name ? s->features[j].name : "?",
			   s->features[j].source_type ? s->features[j].source_type : "categorical");
	return gbml_hint(env, "Pass \"one_hot\": true to give each of its categories (NULL included) a 0/1 column, or leave the column out.");
}

int
km_one_hot(const gbml_dataset *ds, const gbml_dataset *eval, const gbml_kmeans_params *p, bool union_counts,
		   gbml_env *env, gbml_onehot **enc, gbml_dataset *xds, gbml_dataset *xeval)
{
	gbml_onehot_options o = {.algo = &gbml_algorithm_kmeans,.max_categories = 0,.other = false,
	.union_counts = union_counts};

	*enc = NULL;
	if (!p->one_hot)
		return km_refuse_categorical(ds->schema, env);
	if (p->init.choice < 0)
		return gbml_error(env, GBML_EINVAL, "kmeans: \"init\" as an array of centroids cannot go with one_hot: "
						  "the encoded columns are known only once the rows are read");
	return gbml_onehot_prepare(ds, eval, &o, env, enc, xds, xeval);
}

/* Categorical features with one_hot: the encoding learned from the training rows, the fit on the encoded rows. */
static int
km_train_encoded(const gbml_dataset *ds, gbml_train_context *ctx)
{
	gbml_train_context sub = *ctx;
	gbml_onehot *enc;
	gbml_dataset xds,
				xeval;
	int			rc;

	/* on shards, each encoded its rows by the union's counts (kmeans_shard.c), as this server does */
	if ((rc = km_one_hot(ds, ctx->eval, ctx->params, ds->shards != NULL, ctx->env, &enc, &xds, &xeval)) != GBML_OK)
		return rc;
	sub.eval = ctx->eval ? &xeval : NULL;
	rc = km_train_rows(&xds, &sub, enc);
	gbml_onehot_finish(enc, &xds, &xeval, ctx->env);
	return rc;
}

static int
kmeans_train(const gbml_dataset *ds, gbml_train_context *ctx)
{
	int			rc;

	if (gbml_schema_n_categorical(ds->schema) == 0)
	{
		/* with a schema, a NaN in a numeric column is an error naming it */
		if ((rc = gbml_onehot_check_numeric(ds, "kmeans", "the training set", ctx->env)) != GBML_OK)
			return rc;
		return km_train_rows(ds, ctx, NULL);
	}
	return km_train_encoded(ds, ctx);
}

static void
km_model_free(km_model *m, gbml_env *env)
{
	if (m == NULL)
		return;
	gbml_free(env, m->c);
	gbml_free(env, m->cnorm);
	gbml_free(env, m->c_t);
	gbml_free(env, m->sizes);
	gbml_onehot_free(m->onehot, env);
	gbml_free(env, m);
}

/* The centroid section's header, checked: d against the columns the model's input gives. */
static int
km_read_header(gbml_cursor *cur, const gbml_model_reader *model, const gbml_onehot *onehot, gbml_env *env,
			   uint32_t *k_out, uint32_t *d_out, uint32_t *flags_out)
{
	uint32_t	cols = onehot ? (uint32_t) onehot->n_cols : model->n_features;
	uint32_t	version = gbml_cursor_u32(cur),
				k = gbml_cursor_u32(cur),
				d = gbml_cursor_u32(cur),
				flags = gbml_cursor_u32(cur);

	if (!cur->ok || version != KM_SECTION_VERSION)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: unknown centroid section version");
	if (k < 1 || k > GBML_KM_MAX_K)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: k = %u is out of range", k);
	if (d != cols || d < 1)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: %u centroid features, the model has %u%s",
						  d, cols, onehot ? " one-hot encoded columns" : "");
	if ((flags & ~1u) != 0)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: unknown flags 0x%x", flags);
	/* Exact size: header, inertia, sizes, centroids. */
	if (gbml_cursor_remaining(cur) != 8 + 8 * (size_t) k + 8 * (size_t) k * d)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section has the wrong length");
	*k_out = k;
	*d_out = d;
	*flags_out = flags;
	return GBML_OK;
}

/* Inertia, sizes and centroids after the header, checked, and the centroids' norms. */
static int
km_read_values(gbml_cursor *cur, km_model *m, gbml_env *env)
{
	int			k = m->k,
				d = m->d;

	m->inertia = gbml_cursor_f64(cur);
	for (int j = 0; j < k; j++)
		m->sizes[j] = gbml_cursor_u64(cur);
	if (!gbml_cursor_f64_array(cur, m->c, (size_t) k * d) || !cur->ok)
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section is truncated");
	for (int j = 0; j < k; j++)
	{
		double		s = 0;

		for (int i = 0; i < d; i++)
		{
			double		v = m->c[(size_t) j * d + i];

			if (!isfinite(v) || fabs(v) > 1e150)
				return gbml_error(env, GBML_ECORRUPT, "kmeans model: centroid %d has a non-finite value", j + 1);
			s += v * v;
		}
		m->cnorm[j] = sqrt(s);
	}
	return GBML_OK;
}

/* An encoded row of at most this many columns is written out on the stack to be scored through the lanes. */
#define KM_ENCODED_ROW_MAX 512

/* m->c_t from m->c: the single-row scorer's layout (a row against 4 centroids at a time). */
static int
km_transpose_centroids(km_model *m, gbml_env *env)
{
	int			groups = (m->k + GBML_KM_ROW_LANES - 1) / GBML_KM_ROW_LANES;

	if ((m->c_t = gbml_alloc0(env, sizeof(double) * (size_t) groups * m->d * GBML_KM_ROW_LANES)) == NULL)
		return env->error_code;
	for (int j = 0; j < m->k; j++)
		for (int i = 0; i < m->d; i++)
			m->c_t[((size_t) (j / GBML_KM_ROW_LANES) * m->d + i) * GBML_KM_ROW_LANES + j % GBML_KM_ROW_LANES] =
				m->c[(size_t) j * m->d + i];
	return GBML_OK;
}

/* The model's one-hot encoding, or NULL; K-Means trains none with "other" columns. */
static int
km_load_onehot(const gbml_model_reader *model, gbml_env *env, gbml_onehot **out)
{
	int			rc = gbml_onehot_load(model, env, out);

	if (rc == GBML_OK && *out && (*out)->other)
	{
		gbml_onehot_free(*out, env);
		*out = NULL;
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: its one-hot encoding has \"other\" columns");
	}
	return rc;
}

static int
kmeans_load(const gbml_model_reader *model, gbml_env *env, void **handle)
{
	const uint8_t *data;
	size_t		len;
	gbml_cursor cur;
	uint32_t	k = 0,
				d = 0,
				flags = 0;
	gbml_onehot *onehot = NULL;
	km_model   *m;
	int			rc;

	if (!gbml_model_find(model, KM_SECTION, &data, &len))
		return gbml_error(env, GBML_ECORRUPT, "kmeans model: the centroid section is missing");
	if ((rc = km_load_onehot(model, env, &onehot)) != GBML_OK)
		return rc;
	gbml_cursor_init(&cur, data, len);
	if ((rc = km_read_header(&cur, model, onehot, env, &k, &d, &flags)) != GBML_OK ||
		(m = gbml_alloc0(env, sizeof(km_model))) == NULL)
	{
		rc = rc != GBML_OK ? rc : env->error_code;
		gbml_onehot_free(onehot, env);
		return rc;
	}
	m->k = (int) k;
	m->d = (int) d;
	m->spherical = (flags & 1u) != 0;
	m->onehot = onehot;
	m->c = gbml_alloc_array(env, (size_t) k * d, sizeof(double));
	m->cnorm = gbml_alloc_array(env, k, sizeof(double));
	m->sizes = gbml_alloc_array(env, k, sizeof(uint64_t));
	rc = m->c == NULL || m->cnorm == NULL || m->sizes == NULL ? env->error_code : km_read_values(&cur, m, env);
	if (rc == GBML_OK && (m->onehot == NULL || m->d <= KM_ENCODED_ROW_MAX))
		rc = km_transpose_centroids(m, env);
	if (rc != GBML_OK)
	{
		km_model_free(m, env);
		return rc;
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
 * The row's values the distance reads: every input of a plain row; only
 * the numeric inputs of an encoded one (a categorical value is an id, NaN
 * for NULL, or the unseen id, each of which encodes to 0/1 columns).
 */
static bool
km_row_finite(const km_model *m, const float *x)
{
	const gbml_onehot *e = m->onehot;

	for (int i = 0; i < (e ? e->n_numeric : m->d); i++)
		if (!isfinite(x[e ? e->col_input[i] : i]))
			return false;
	return true;
}

/*
 * |x - c|^2 of a raw row under the one-hot encoding, term by term in the
 * encoded row's column order (gbml_km_sqdist on the encoded row, the same
 * bits): the numeric inputs, then each block's columns, 1 where the value
 * falls and 0 elsewhere.
 */
static double
km_sqdist_encoded(const gbml_onehot *e, const float *x, const double *c)
{
	double		s = 0;

	for (int i = 0; i < e->n_numeric; i++)
	{
		double		t = (double) x[e->col_input[i]] - c[i];

		s += t * t;
	}
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];
		int			hit = gbml_onehot_hit(e, bl, x[bl->input]);

		for (int o = 0; o < bl->n_cols; o++)
		{
			double		t = (o == hit ? 1.0 : 0.0) - c[bl->first_col + o];

			s += t * t;
		}
	}
	return s;
}

static double
km_sqdist_row(const km_model *m, const float *x, const double *c)
{
	return m->onehot ? km_sqdist_encoded(m->onehot, x, c) : gbml_km_sqdist(x, 1.0, c, m->d);
}

/*
 * x.c, or x.x with c NULL, in the (encoded) row's column order: a zero
 * column adds nothing, so an encoded block adds only its hit's term.
 */
static double
km_dot_row(const km_model *m, const float *x, const double *c)
{
	const gbml_onehot *e = m->onehot;
	double		dot = 0;

	if (e == NULL)
	{
		for (int i = 0; i < m->d; i++)
			dot += c ? x[i] * c[i] : (double) x[i] * x[i];
		return dot;
	}
	for (int i = 0; i < e->n_numeric; i++)
		dot += c ? x[e->col_input[i]] * c[i] : (double) x[e->col_input[i]] * x[e->col_input[i]];
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];
		int			hit = gbml_onehot_hit(e, bl, x[bl->input]);

		if (hit >= 0)
			dot += c ? c[bl->first_col + hit] : 1.0;
	}
	return dot;
}

/*
 * Centroids j0 .. j0 + n - 1's sums for row x (n <= 32): |x - c|^2, or x.c
 * in the spherical mode.  Through the centroids' lanes when the model has
 * them (gbml_km_sqdist_block, gbml_km_dot_block: 32 side by side, each the
 * same double as one at a time; an encoded row written out first,
 * gbml_onehot_row, whose zero columns add (0 - c)^2 as km_sqdist_encoded
 * does, and 0 * c, an exact zero, to a dot product that km_dot_row skips
 * them in), else one centroid at a time.
 */
static void
km_centroid_sums(const km_model *m, const float *x, const float *encoded, int j0, int n, double *out)
{
	if (m->c_t != NULL)
	{
		const double *block = m->c_t + (size_t) (j0 / GBML_KM_ROW_LANES) * m->d * GBML_KM_ROW_LANES;
		int			groups = (n + GBML_KM_ROW_LANES - 1) / GBML_KM_ROW_LANES;

		if (m->spherical)
			gbml_km_dot_block(encoded ? encoded : x, block, m->d, groups, out);
		else
			gbml_km_sqdist_block(encoded ? encoded : x, block, m->d, groups, out);
		return;
	}
	for (int l = 0; l < n; l++)
	{
		const double *c = m->c + (size_t) (j0 + l) * m->d;

		out[l] = m->spherical ? km_dot_row(m, x, c) : km_sqdist_row(m, x, c);
	}
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
	double		sums[GBML_KM_ROW_GROUPS * GBML_KM_ROW_LANES],
				best = INFINITY,
				xn;
	int			arg = 0;
	float		encoded[KM_ENCODED_ROW_MAX];
	bool		write_encoded = m->c_t != NULL && m->onehot != NULL;

	if (!km_row_finite(m, x))
		return NAN;
	xn = m->spherical ? sqrt(km_dot_row(m, x, NULL)) : 0;
	if (write_encoded)
		gbml_onehot_row(m->onehot, x, encoded);
	for (int j0 = 0; j0 < m->k; j0 += GBML_KM_ROW_GROUPS * GBML_KM_ROW_LANES)
	{
		int			n = m->k - j0 < GBML_KM_ROW_GROUPS * GBML_KM_ROW_LANES ? m->k - j0
			: GBML_KM_ROW_GROUPS * GBML_KM_ROW_LANES;

		km_centroid_sums(m, x, write_encoded ? encoded : NULL, j0, n, sums);
		for (int l = 0; l < n; l++)
		{
			int			j = j0 + l;
			double		dist = !m->spherical ? sums[l]
				: (xn > 0 && m->cnorm[j] > 0) ? 1.0 - sums[l] / (xn * m->cnorm[j]) : 1.0;

			if (dist < best)
			{
				best = dist;
				arg = j;
			}
		}
	}
	if (what != GBML_OUT_DISTANCE)
		return (double) arg;
	return m->spherical ? best : sqrt(best);
}

/* With categorical features the centroids run over the encoded columns, which "columns" names. */
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
	if (m->onehot)
	{
		gbml_sb_append(out, ",", 1);
		gbml_onehot_json_columns(m->onehot, out);
	}
	return gbml_sb_status(out);
}

/* Column f's between-cluster dispersion: sum_j size_j (c_jf - mean_f)^2. */
static double
km_dispersion(const km_model *m, int f, double total_w)
{
	double		mean = 0,
				s = 0;

	if (total_w <= 0)
		return 0;
	for (int j = 0; j < m->k; j++)
		mean += (double) m->sizes[j] * m->c[(size_t) j * m->d + f];
	mean /= total_w;
	for (int j = 0; j < m->k; j++)
	{
		double		t = m->c[(size_t) j * m->d + f] - mean;

		s += (double) m->sizes[j] * t * t;
	}
	return s;
}

/*
 * Importance: each feature's share of the between-cluster dispersion,
 * sum_j size_j (c_jf - mean_f)^2 normalised to sum 1 — how much the feature
 * separates the clusters.  A categorical feature's is the sum over its
 * one-hot columns (the squared distance adds up over columns the same way).
 */
static int
kmeans_importance(const void *handle, double *out)
{
	const km_model *m = handle;
	int			n_out = m->onehot ? m->onehot->n_inputs : m->d;
	double		total_w = 0;

	for (int j = 0; j < m->k; j++)
		total_w += (double) m->sizes[j];
	for (int i = 0; i < n_out; i++)
		out[i] = 0;
	for (int f = 0; f < m->d; f++)
		out[m->onehot ? m->onehot->col_input[f] : f] += km_dispersion(m, f, total_w);
	gbml_importance_normalize(out, n_out);
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
	.shard = &gbml_kmeans_shard_ops,
	.reads_spilled_rows = true,
	.passes_in_any_order = true,
	.categorical_features = true,
	.train = kmeans_train,
	.load = kmeans_load,
	.unload = kmeans_unload,
	.predict = kmeans_predict,
	.to_json = kmeans_to_json,
	.importance = kmeans_importance,
};
