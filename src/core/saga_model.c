/*
 * saga_model.c — the SAGA model: the loader of the 'SAGA' section (saga.h;
 * saga.c writes it), scoring, the JSON dump and the importance, and the
 * algorithm table gbml_algorithm_saga (its train is saga.c's).
 *
 * With categorical features the model keeps the one-hot encoding ('ONEH',
 * onehot.h), and scoring applies it to the raw row, without building the
 * encoded one.
 */
#include "saga_internal.h"
#include "saga_shards.h"
#include "saga_kernels.h"
#include "onehot.h"

#include <math.h>

typedef struct saga_model
{
	int			d;				/* weights: the input features, or the encoded columns */
	int			loss;
	int			enc;
	uint32_t	flags;
	double		b;				/* solver scale */
	double		b_eff;			/* raw-feature scale */
	double	   *w;				/* solver scale, d */
	double	   *w_eff;			/* raw-feature scale, padded */
	double	   *mean;
	double	   *std;
	gbml_onehot *onehot;		/* categorical features' encoding, or NULL */
} saga_model;

static void
saga_unload(void *handle, gbml_env *env)
{
	saga_model *m = handle;

	if (m == NULL)
		return;
	gbml_free(env, m->w);
	gbml_free(env, m->w_eff);
	gbml_free(env, m->mean);
	gbml_free(env, m->std);
	gbml_onehot_free(m->onehot, env);
	gbml_free(env, m);
}

/* The section's header fields, read and checked (d against the columns the model's input gives). */
typedef struct saga_header
{
	uint32_t	version,
				loss,
				enc,
				flags,
				d;
} saga_header;

static int
read_header(gbml_cursor *cur, const gbml_model_reader *model, const gbml_onehot *onehot, gbml_env *env,
			saga_header *h)
{
	uint32_t	cols = onehot ? (uint32_t) onehot->n_cols : model->n_features;

	h->version = gbml_cursor_u32(cur);
	h->loss = gbml_cursor_u32(cur);
	h->enc = gbml_cursor_u32(cur);
	h->flags = gbml_cursor_u32(cur);
	h->d = gbml_cursor_u32(cur);
	if (!cur->ok)
		return gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section is truncated");
	if (h->version != GBML_SAGA_LAYOUT_VERSION)
		return gbml_error(env, GBML_ECORRUPT, "saga model: unknown section layout %u", h->version);
	if (h->loss > GBML_SAGA_LOSS_SQUARED)
		return gbml_error(env, GBML_ECORRUPT, "saga model: unknown loss %u", h->loss);
	if ((h->loss == GBML_SAGA_LOSS_LOGISTIC && h->enc != GBML_SAGA_LABELS_01 && h->enc != GBML_SAGA_LABELS_PM1) ||
		(h->loss == GBML_SAGA_LOSS_SQUARED && h->enc != GBML_SAGA_LABELS_NONE))
		return gbml_error(env, GBML_ECORRUPT, "saga model: label encoding %u does not fit loss %u", h->enc, h->loss);
	if (h->flags & ~(GBML_SAGA_FLAG_INTERCEPT | GBML_SAGA_FLAG_STANDARDIZED))
		return gbml_error(env, GBML_ECORRUPT, "saga model: unknown flags 0x%x", h->flags);
	if (h->d != cols || h->d > GBML_MAX_FEATURES)
		return gbml_error(env, GBML_ECORRUPT, "saga model: %u weights for %u %s", h->d, cols,
						  onehot ? "one-hot encoded columns" : "features");
	if (gbml_cursor_remaining(cur) != sizeof(double) * (1 + 3 * (size_t) h->d))
		return gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section has %zu bytes of values, expected %zu",
						  gbml_cursor_remaining(cur), sizeof(double) * (1 + 3 * (size_t) h->d));
	return GBML_OK;
}

/* The weights and statistics after the header, checked; then the raw-scale weights. */
static int
read_values(gbml_cursor *cur, saga_model *m, double *scale, double *shift, gbml_env *env)
{
	int			d = m->d;

	m->b = gbml_cursor_f64(cur);
	gbml_cursor_f64_array(cur, m->w, (size_t) d);
	gbml_cursor_f64_array(cur, m->mean, (size_t) d);
	gbml_cursor_f64_array(cur, m->std, (size_t) d);
	if (!cur->ok || !isfinite(m->b))
		return gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section is corrupt");
	for (int j = 0; j < d; j++)
		if (!isfinite(m->w[j]) || !isfinite(m->mean[j]) || !isfinite(m->std[j]) || m->std[j] < 0)
			return gbml_error(env, GBML_ECORRUPT, "saga model: weight or statistic %d is not a valid number", j + 1);
	if (m->flags & GBML_SAGA_FLAG_STANDARDIZED)
	{
		gbml_saga_make_standardizer(d, m->onehot ? m->onehot->n_numeric : d, m->mean, m->std, scale, shift);
		gbml_saga_effective_weights(d, m->w, m->b, scale, shift, m->w_eff, &m->b_eff);
	}
	else
		gbml_saga_effective_weights(d, m->w, m->b, NULL, NULL, m->w_eff, &m->b_eff);
	for (int j = 0; j < d; j++)
		if (!isfinite(m->w_eff[j]))
			return gbml_error(env, GBML_ECORRUPT, "saga model: weight %d overflows on the raw feature scale", j + 1);
	if (!isfinite(m->b_eff))
		return gbml_error(env, GBML_ECORRUPT, "saga model: the intercept overflows on the raw feature scale");
	return GBML_OK;
}

static int
saga_load(const gbml_model_reader *model, gbml_env *env, void **handle)
{
	const uint8_t *data;
	size_t		len;
	gbml_cursor cur;
	saga_header h;
	gbml_onehot *onehot = NULL;
	saga_model *m;
	double	   *scale = NULL,
			   *shift = NULL;
	int			rc;

	if (!gbml_model_find(model, GBML_SAGA_SECTION, &data, &len))
		return gbml_error(env, GBML_ECORRUPT, "saga model: the SAGA section is missing");
	if ((rc = gbml_onehot_load(model, env, &onehot)) != GBML_OK)
		return rc;
	if (onehot && !onehot->other)
	{
		/* SAGA always trains an other column per feature: scoring counts on it */
		gbml_onehot_free(onehot, env);
		return gbml_error(env, GBML_ECORRUPT, "saga model: its one-hot encoding has no \"other\" columns");
	}
	gbml_cursor_init(&cur, data, len);
	if ((rc = read_header(&cur, model, onehot, env, &h)) != GBML_OK ||
		(m = gbml_alloc0(env, sizeof(saga_model))) == NULL)
	{
		rc = rc != GBML_OK ? rc : env->error_code;
		gbml_onehot_free(onehot, env);
		return rc;
	}
	m->d = (int) h.d;
	m->loss = (int) h.loss;
	m->enc = (int) h.enc;
	m->flags = h.flags;
	m->onehot = onehot;
	if ((m->w = gbml_saga_alloc_vec(env, gbml_saga_padded(h.d))) == NULL ||
		(m->w_eff = gbml_saga_alloc_vec(env, gbml_saga_padded(h.d))) == NULL ||
		(m->mean = gbml_saga_alloc_vec(env, gbml_saga_padded(h.d))) == NULL ||
		(m->std = gbml_saga_alloc_vec(env, gbml_saga_padded(h.d))) == NULL ||
		(scale = gbml_saga_alloc_vec(env, gbml_saga_padded(h.d))) == NULL ||
		(shift = gbml_saga_alloc_vec(env, gbml_saga_padded(h.d))) == NULL)
		rc = env->error_code;
	else
		rc = read_values(&cur, m, scale, shift, env);
	gbml_free(env, scale);
	gbml_free(env, shift);
	if (rc != GBML_OK)
	{
		saga_unload(m, env);
		return rc;
	}
	*handle = m;
	return GBML_OK;
}

/*
 * x·w_eff for a raw row under the one-hot encoding: the numeric inputs'
 * terms, then per categorical feature the weight of the one column its
 * value sets (the other columns are 0), as the encoded row would give.
 */
static double
encoded_dot(const gbml_onehot *e, const double *w, const float *x)
{
	double		s = 0;

	for (int i = 0; i < e->n_numeric; i++)
		s += w[i] * (double) x[e->col_input[i]];
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];
		int			hit = gbml_onehot_hit(e, bl, x[bl->input]);

		if (hit >= 0)
			s += w[bl->first_col + hit];
	}
	return s;
}

/* The logistic loss's score is a log-odds; squared loss's is not (its predict_proba: an ERROR). */
static bool
saga_gives_probability(const void *handle)
{
	return ((const saga_model *) handle)->loss == GBML_SAGA_LOSS_LOGISTIC;
}

/*
 * SCORE: the linear score x·w + b for squared loss; for logistic the
 * predicted class in the user's encoding (1 when x·w + b > 0, else 0 or -1).
 * PROBA: P(class 1) for logistic (the scorer asks only such a model).
 */
static double
saga_predict(const void *handle, const float *x, gbml_output what)
{
	const saga_model *m = handle;
	double		p = (m->onehot ? encoded_dot(m->onehot, m->w_eff, x) : gbml_saga_dot(m->w_eff, x, m->d)) + m->b_eff;

	if (m->loss == GBML_SAGA_LOSS_SQUARED)
		return what == GBML_OUT_SCORE ? p : NAN;
	if (what == GBML_OUT_PROBA)
		return p >= 0 ? 1.0 / (1.0 + exp(-p)) : exp(p) / (1.0 + exp(p));
	return p > 0 ? 1.0 : (m->enc == GBML_SAGA_LABELS_PM1 ? -1.0 : 0.0);
}

/*
 * "categorical":[{"feature":name,"categories":[...],"coef":[...],
 * "other_coef":w}]: each categorical feature's kept categories (null for
 * NULL) and their weights (raw scale: indicators are never standardized).
 */
static void
json_categorical(const saga_model *m, gbml_strbuf *out)
{
	const gbml_onehot *e = m->onehot;

	gbml_onehot_json_columns(e, out);
	gbml_sb_append(out, ",\"categorical\":[", 16);
	for (int k = 0; k < e->n_blocks; k++)
	{
		const gbml_onehot_block *bl = &e->blocks[k];

		gbml_sb_append(out, k ? ",{\"feature\":" : "{\"feature\":", k ? 12 : 11);
		gbml_sb_json_string(out, gbml_schema_name(e->schema, bl->input));
		gbml_sb_append(out, ",\"categories\":[", 15);
		for (int c = 0; c < bl->n_kept; c++)
		{
			if (c)
				gbml_sb_append(out, ",", 1);
			gbml_onehot_json_category(bl, e->schema, c, out);
		}
		gbml_sb_append(out, "],\"coef\":", 9);
		gbml_sb_json_doubles(out, m->w_eff + bl->first_col, bl->n_kept);
		gbml_sb_append(out, ",\"other_coef\":", 14);
		gbml_sb_json_number(out, m->w_eff[bl->first_col + bl->n_kept]);
		gbml_sb_append(out, "}", 1);
	}
	gbml_sb_append(out, "]", 1);
}

/*
 * With categorical features, "coef", "feature_mean" and the others run
 * over the encoded columns ("columns" names them), and "categorical" gives
 * each feature's categories with their weights.
 */
static int
saga_to_json(const void *handle, gbml_strbuf *out)
{
	const saga_model *m = handle;
	bool		first = true;
	int64_t		nnz = 0;

	for (int j = 0; j < m->d; j++)
		nnz += m->w[j] != 0;
	gbml_sb_json_key(out, "loss", &first);
	gbml_sb_json_string(out, gbml_saga_loss_choices[m->loss]);
	gbml_sb_json_key(out, "label_encoding", &first);
	if (m->enc == GBML_SAGA_LABELS_NONE)
		gbml_sb_append(out, "null", 4);
	else
		gbml_sb_json_string(out, gbml_saga_encoding_name(m->enc));
	gbml_sb_json_key(out, "fit_intercept", &first);
	gbml_sb_append(out, (m->flags & GBML_SAGA_FLAG_INTERCEPT) ? "true" : "false",
				   (m->flags & GBML_SAGA_FLAG_INTERCEPT) ? 4 : 5);
	gbml_sb_json_key(out, "standardized", &first);
	gbml_sb_append(out, (m->flags & GBML_SAGA_FLAG_STANDARDIZED) ? "true" : "false",
				   (m->flags & GBML_SAGA_FLAG_STANDARDIZED) ? 4 : 5);
	gbml_sb_json_key(out, "n_nonzero", &first);
	gbml_sb_json_number(out, (double) nnz);
	gbml_sb_json_key(out, "intercept", &first);
	gbml_sb_json_number(out, m->b_eff);
	gbml_sb_json_key(out, "coef", &first);
	gbml_sb_json_doubles(out, m->w_eff, m->d);
	if (m->flags & GBML_SAGA_FLAG_STANDARDIZED)
	{
		gbml_sb_json_key(out, "intercept_standardized", &first);
		gbml_sb_json_number(out, m->b);
		gbml_sb_json_key(out, "coef_standardized", &first);
		gbml_sb_json_doubles(out, m->w, m->d);
	}
	gbml_sb_json_key(out, "feature_mean", &first);
	gbml_sb_json_doubles(out, m->mean, m->d);
	gbml_sb_json_key(out, "feature_std", &first);
	gbml_sb_json_doubles(out, m->std, m->d);
	if (m->onehot)
	{
		gbml_sb_append(out, ",", 1);
		json_categorical(m, out);
	}
	return gbml_sb_status(out);
}

/*
 * The standard deviation over the training rows of a categorical
 * feature's term in the score: its block's weights, each taken with its
 * category's share of the rows (the indicator's mean; the shares add up to
 * 1, the other column included).  For a numeric feature the same figure is
 * |w| std.
 */
static double
block_spread(const saga_model *m, const gbml_onehot_block *bl)
{
	const double *w = m->w_eff + bl->first_col,
			   *share = m->mean + bl->first_col;
	double		mu = 0,
				var = 0;

	for (int c = 0; c < bl->n_cols; c++)
		mu += share[c] * w[c];
	for (int c = 0; c < bl->n_cols; c++)
		var += share[c] * (w[c] - mu) * (w[c] - mu);
	return sqrt(var);
}

/*
 * Per input feature, the spread of its term in the score over the training
 * rows: |coefficient| times the feature's standard deviation (numeric), or
 * block_spread (categorical); normalized to sum 1.
 */
static int
saga_importance(const void *handle, double *out)
{
	const saga_model *m = handle;
	const gbml_onehot *e = m->onehot;

	if (e == NULL)
	{
		for (int j = 0; j < m->d; j++)
			out[j] = fabs(m->w_eff[j]) * m->std[j];
		gbml_importance_normalize(out, m->d);
		return GBML_OK;
	}
	for (int i = 0; i < e->n_numeric; i++)
		out[e->col_input[i]] = fabs(m->w_eff[i]) * m->std[i];
	for (int k = 0; k < e->n_blocks; k++)
		out[e->blocks[k].input] = block_spread(m, &e->blocks[k]);
	gbml_importance_normalize(out, e->n_inputs);
	return GBML_OK;
}

const gbml_algorithm gbml_algorithm_saga = {
	.id = GBML_ALGO_SAGA,
	.name = "saga",
	.params = gbml_saga_param_specs,
	.params_size = sizeof(gbml_saga_params),
	.input_flags = GBML_INPUT_LABEL,
	.outputs = GBML_OUT_SCORE | GBML_OUT_PROBA,
	.gpu_trains = true,
	.reads_spilled_rows = true,
	.shard = &gbml_saga_shard_ops,
	.categorical_features = true,
	.train = gbml_saga_train,
	.load = saga_load,
	.unload = saga_unload,
	.predict = saga_predict,
	.gives_probability = saga_gives_probability,
	.to_json = saga_to_json,
	.importance = saga_importance,
};
