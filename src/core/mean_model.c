/*
 * mean_model.c — the trivial "mean" model kind: predicts the (weighted) mean
 * label and records the feature means.  It exists to exercise the whole
 * machinery (aggregates, parallel combine, registry, model container,
 * progress and cancel, GPU backend dispatch) independently of the real
 * trainers; the parameter `passes` repeats the computation so tests can make
 * training long enough to cancel.
 */
#include "algorithm.h"
#include "chunk_prefetch.h"
#include "backend.h"

#include <math.h>
#include <string.h>

#define SECTION_MEAN GBML_TAG('M','E','A','N')

typedef struct mean_params
{
	int64_t		passes;
} mean_params;

static const gbml_param_spec mean_param_specs[] = {
	{"passes", GBML_PARAM_INT, offsetof(mean_params, passes), 1, 1e9, 1, NULL, NULL,
	"how many times to recompute the means (a test knob for long training)"},
	GBML_PARAM_END
};

typedef struct mean_model
{
	int			n_features;
	double		label_mean;
	double	   *feature_means;
} mean_model;

/* Weighted label mean and feature sums of one pass; chunk by chunk, wherever the chunks live. */
static int
mean_pass(const gbml_dataset *ds, gbml_env *env, double *label_mean, double *feature_means,
		  int64_t pass, int64_t passes)
{
	double		wsum = 0,
				lsum = 0;
	int			d = ds->n_features;
	gbml_chunk_prefetch *reader = gbml_chunk_prefetch_open(ds, env);
	const float *x;
	int64_t		rows;
	int			c,
				got,
				rc = GBML_OK;

	if (reader == NULL)
		return env->error_code;
	memset(feature_means, 0, sizeof(double) * d);
	while ((got = gbml_chunk_prefetch_next(reader, &x, &rows, &c)) == 1)
	{
		const gbml_chunk *ch = ds->chunks[c];
		gbml_progress_info info = {"train", pass, passes, NULL, 0};

		for (int64_t r = 0; r < ch->n_rows; r++)
		{
			wsum += ch->weight[r];
			lsum += (double) ch->weight[r] * ch->label[r];
		}
		if (env->device == GBML_DEVICE_GPU && env->gpu && env->gpu->column_sums)
		{
			if (env->gpu->column_sums(env->gpu_id, x, rows, d, feature_means) != 0)
			{
				rc = gbml_error(env, GBML_EDEVICE, "GPU column sums failed: %s", env->gpu->last_error());
				break;
			}
		}
		else
			gbml_cpu_column_sums(x, rows, d, feature_means);
		if (gbml_progress(env, &info))
		{
			rc = gbml_error(env, GBML_ECANCELLED, "canceled");
			break;
		}
	}
	gbml_chunk_prefetch_close(reader);
	if (got < 0)
		return got;
	if (rc != GBML_OK)
		return rc;
	*label_mean = wsum > 0 ? lsum / wsum : 0;
	for (int j = 0; j < d; j++)
		feature_means[j] /= (double) ds->n_rows;
	return GBML_OK;
}

static double
rmse_of_constant(const gbml_dataset *ds, double c)
{
	double		se = 0,
				w = 0;

	for (int k = 0; k < ds->n_chunks; k++)
		for (int64_t r = 0; r < ds->chunks[k]->n_rows; r++)
		{
			double		e = ds->chunks[k]->label[r] - c;

			se += ds->chunks[k]->weight[r] * e * e;
			w += ds->chunks[k]->weight[r];
		}
	return w > 0 ? sqrt(se / w) : 0;
}

static int
mean_train(const gbml_dataset *ds, gbml_train_context *ctx)
{
	const mean_params *p = ctx->params;
	gbml_env   *env = ctx->env;
	double	   *means = gbml_alloc_array(env, (size_t) ds->n_features, sizeof(double));
	double		label_mean = 0,
				train_rmse,
				eval_rmse;
	gbml_strbuf body;
	int			rc = GBML_OK;

	if (means == NULL)
		return env->error_code;
	for (int64_t pass = 1; pass <= p->passes && rc == GBML_OK; pass++)
		rc = mean_pass(ds, env, &label_mean, means, pass, p->passes);
	if (rc != GBML_OK)
	{
		gbml_free(env, means);
		return rc;
	}
	gbml_sb_init(&body, env);
	gbml_sb_f64(&body, label_mean);
	gbml_sb_append(&body, means, sizeof(double) * ds->n_features);
	gbml_model_add_sb(ctx->writer, SECTION_MEAN, &body);
	gbml_sb_free(&body);

	train_rmse = rmse_of_constant(ds, label_mean);
	eval_rmse = ctx->eval ? rmse_of_constant(ctx->eval, label_mean) : train_rmse;
	gbml_sb_printf(ctx->meta, "\"passes\":%lld,\"metrics\":{\"train_rmse\":", (long long) p->passes);
	gbml_sb_json_number(ctx->meta, train_rmse);
	gbml_sb_printf(ctx->meta, ",\"eval_metric\":\"%s\",\"eval_value\":", ctx->eval ? "eval_rmse" : "train_rmse");
	gbml_sb_json_number(ctx->meta, eval_rmse);
	gbml_sb_printf(ctx->meta, ",\"higher_is_better\":false},\"timings\":{}");
	gbml_free(env, means);
	return GBML_OK;
}

static int
mean_load(const gbml_model_reader *model, gbml_env *env, void **handle)
{
	const uint8_t *data;
	size_t		len;
	gbml_cursor cur;
	mean_model *m;

	if (!gbml_model_find(model, SECTION_MEAN, &data, &len) ||
		len != sizeof(double) * (1 + (size_t) model->n_features))
		return gbml_error(env, GBML_ECORRUPT, "mean model section is missing or has the wrong size");
	m = gbml_alloc0(env, sizeof(mean_model));
	if (m == NULL)
		return env->error_code;
	m->n_features = (int) model->n_features;
	m->feature_means = gbml_alloc_array(env, (size_t) m->n_features, sizeof(double));
	if (m->feature_means == NULL)
	{
		gbml_free(env, m);
		return env->error_code;
	}
	gbml_cursor_init(&cur, data, len);
	m->label_mean = gbml_cursor_f64(&cur);
	gbml_cursor_f64_array(&cur, m->feature_means, (size_t) m->n_features);
	if (!cur.ok || !isfinite(m->label_mean))
	{
		gbml_free(env, m->feature_means);
		gbml_free(env, m);
		return gbml_error(env, GBML_ECORRUPT, "mean model section is corrupt");
	}
	*handle = m;
	return GBML_OK;
}

static void
mean_unload(void *handle, gbml_env *env)
{
	mean_model *m = handle;

	gbml_free(env, m->feature_means);
	gbml_free(env, m);
}

static double
mean_predict(const void *handle, const float *x, gbml_output what)
{
	(void) x;
	(void) what;
	return ((const mean_model *) handle)->label_mean;
}

static int
mean_to_json(const void *handle, gbml_strbuf *out)
{
	const mean_model *m = handle;

	gbml_sb_append(out, "\"label_mean\":", 13);
	gbml_sb_json_number(out, m->label_mean);
	gbml_sb_append(out, ",\"feature_means\":[", 18);
	for (int j = 0; j < m->n_features; j++)
	{
		if (j)
			gbml_sb_append(out, ",", 1);
		gbml_sb_json_number(out, m->feature_means[j]);
	}
	gbml_sb_append(out, "]", 1);
	return gbml_sb_status(out);
}

static int
mean_importance(const void *handle, double *out)
{
	memset(out, 0, sizeof(double) * ((const mean_model *) handle)->n_features);
	return GBML_OK;
}

const gbml_algorithm gbml_algorithm_mean = {
	.id = GBML_ALGO_MEAN,
	.name = "mean",
	.params = mean_param_specs,
	.params_size = sizeof(mean_params),
	.input_flags = GBML_INPUT_LABEL,
	.outputs = GBML_OUT_SCORE,
	.gpu_trains = true,
	.reads_spilled_rows = true,
	.train = mean_train,
	.load = mean_load,
	.unload = mean_unload,
	.predict = mean_predict,
	.to_json = mean_to_json,
	.importance = mean_importance,
};
