/*
 * boost_ctr.c — categorical features at training time (see boost_ctr.h):
 * checking the kept ids, choosing each input's derived features, the
 * ordered and final statistics, and the derived features' borders and bin
 * columns for the training and eval rows.
 *
 * Everything here runs on the main thread in a fixed order over the
 * training positions (the permutation is drawn from the seed alone), except
 * the binning of a finished column, where each byte depends on its row
 * only: the result does not depend on the thread count.
 */
#include "boost_ctr.h"
#include "rng.h"

#include <math.h>
#include <string.h>

/* Border slots reserved per derived feature (a ctr's are quantiles, at most 255). */
#define BORDER_STRIDE GBML_BOOST_MAX_BORDERS

static inline double
ctr_target(float label, int target)
{
	if (target == GBML_CTR_LABEL)
		return (double) label;
	if (target == GBML_CTR_BINARY)
		return label > 0.5f ? 1.0 : 0.0;
	return label == (float) target ? 1.0 : 0.0;
}

int
gbml_boost_ctr_begin(gbml_boost_ctr_fit *fit, const gbml_feature_schema *schema, int n_inputs, int64_t n,
					 int64_t n_eval, gbml_env *env)
{
	int			k = 0;

	memset(fit, 0, sizeof(*fit));
	fit->schema = schema;
	fit->n_inputs = n_inputs;
	/* the model stores the schema for these rows: one that does not fit them would not load */
	if (schema && schema->n_features != n_inputs)
		return gbml_error(env, GBML_EINVAL, "boost: the feature schema describes %d features, the rows have %d",
						  schema->n_features, n_inputs);
	for (int j = 0; j < n_inputs; j++)
		fit->n_cat += gbml_feature_is_categorical(schema, j);
	if (fit->n_cat == 0)
		return GBML_OK;
	fit->col = gbml_alloc_array(env, (size_t) fit->n_cat, sizeof(int));
	fit->keep.out = gbml_alloc_array(env, (size_t) fit->n_cat * (size_t) (n > 0 ? n : 1), sizeof(float));
	if (n_eval > 0)
		fit->eval_keep.out = gbml_alloc_array(env, (size_t) fit->n_cat * (size_t) n_eval, sizeof(float));
	if (fit->col == NULL || fit->keep.out == NULL || (n_eval > 0 && fit->eval_keep.out == NULL))
		return env->error_code;
	for (int j = 0; j < n_inputs; j++)
		if (gbml_feature_is_categorical(schema, j))
			fit->col[k++] = j;
	fit->keep.n = fit->eval_keep.n = fit->n_cat;
	fit->keep.col = fit->eval_keep.col = fit->col;
	fit->keep.n_rows = n;
	fit->eval_keep.n_rows = n_eval;
	return GBML_OK;
}

void
gbml_boost_ctr_free(gbml_boost_ctr_fit *fit, gbml_env *env)
{
	gbml_free(env, fit->col);
	gbml_free(env, fit->keep.out);
	gbml_free(env, fit->eval_keep.out);
	gbml_boost_inputs_free(&fit->model, env);
	memset(fit, 0, sizeof(*fit));
}

int
gbml_boost_ctr_clear_borders(const gbml_boost_ctr_fit *fit, gbml_boost_borders *borders, gbml_env *env)
{
	bool	   *clear = gbml_alloc0(env, sizeof(bool) * (size_t) (fit->n_inputs > 0 ? fit->n_inputs : 1));

	if (clear == NULL)
		return env->error_code;
	for (int k = 0; k < fit->n_cat; k++)
		clear[fit->col[k]] = true;
	gbml_boost_borders_clear(borders, fit->n_inputs, clear);
	gbml_free(env, clear);
	return GBML_OK;
}

/* The kept ids of categorical input k (n rows). */
static inline const float *
ids_of(const gbml_boost_keep *keep, int k)
{
	return keep->out + (size_t) k * (size_t) keep->n_rows;
}

static int32_t
n_categories_of(const gbml_boost_ctr_fit *fit, int k)
{
	return fit->schema->features[fit->col[k]].n_categories;
}

/*
 * Every kept id is a category id or NaN; the eval rows may also hold
 * GBML_CATEGORY_UNSEEN (a value the training never saw).
 */
static int
check_ids(const gbml_boost_ctr_fit *fit, const gbml_boost_keep *keep, bool eval, gbml_env *env)
{
	for (int k = 0; k < fit->n_cat; k++)
	{
		const float *ids = ids_of(keep, k);
		int32_t		nc = n_categories_of(fit, k);

		for (int64_t i = 0; i < keep->n_rows; i++)
			if (gbml_boost_cat_slot(ids[i], nc) == nc + 1 && !(eval && ids[i] == GBML_CATEGORY_UNSEEN))
				return gbml_error(env, GBML_EINVAL,
								  "boost: categorical feature \"%s\" has %g in %s row, not a category id "
								  "(0 .. %d, NaN for NULL)", fit->schema->features[fit->col[k]].name,
								  (double) ids[i], eval ? "an eval" : "a training", nc - 1);
	}
	return GBML_OK;
}

/* Rows per slot of input k (n_categories + 2 slots). */
static void
count_slots(const gbml_boost_ctr_fit *fit, int k, int64_t *count)
{
	const float *ids = ids_of(&fit->keep, k);
	int32_t		nc = n_categories_of(fit, k);

	memset(count, 0, sizeof(int64_t) * ((size_t) nc + 2));
	for (int64_t i = 0; i < fit->keep.n_rows; i++)
		count[gbml_boost_cat_slot(ids[i], nc)]++;
}

/* Slots input k's training rows use. */
static int64_t
slots_used(const int64_t *count, int32_t nc)
{
	int64_t		used = 0;

	for (int32_t s = 0; s < nc + 2; s++)
		used += count[s] > 0;
	return used;
}

/* Appends input k's derived features (see boost_ctr.h) to fit->model.derived (room for them is there). */
static void
plan_input(gbml_boost_ctr_fit *fit, const gbml_boost_ctr_params *p, int k, const int64_t *count)
{
	gbml_boost_inputs *m = &fit->model;
	int32_t		nc = n_categories_of(fit, k);
	int64_t		used = slots_used(count, nc);
	gbml_boost_derived e = {fit->col[k], 0, nc, 0, NULL};

	if (used <= 1)
		return;
	if (used <= p->one_hot_max_size)
	{
		e.kind = GBML_BOOST_ONE_HOT;
		for (int32_t s = 0; s <= nc; s++)
			if (count[s] > 0)
			{
				e.category = s;
				m->derived[m->n_derived++] = e;
				fit->n_one_hot++;
			}
		return;
	}
	if (p->sets && nc <= GBML_BOOST_MAX_SET_CATEGORIES)
	{
		e.kind = GBML_BOOST_CAT_SLOT;
		m->derived[m->n_derived++] = e;
		fit->n_slot++;
		return;
	}
	e.kind = GBML_BOOST_CTR_MEAN;
	for (int c = 0; c < (p->classes > 0 ? p->classes : 1); c++)
	{
		e.category = c;			/* (MultiClass: the statistic's class) */
		m->derived[m->n_derived++] = e;
		fit->n_ctr++;
	}
	e.category = 0;
	if (p->counter)
	{
		e.kind = GBML_BOOST_CTR_COUNTER;
		m->derived[m->n_derived++] = e;
		fit->n_ctr++;
	}
}

/* Chooses the derived features of every categorical input. */
static int
plan(gbml_boost_ctr_fit *fit, const gbml_boost_ctr_params *p, gbml_env *env)
{
	int64_t		room = 0;
	int32_t		largest = 0;
	int64_t    *count;

	for (int k = 0; k < fit->n_cat; k++)
	{
		int32_t		nc = n_categories_of(fit, k);

		largest = nc > largest ? nc : largest;
		/* one-hot features, or the statistics (one, or one a class) and a counter */
		room += (p->one_hot_max_size > 1 + (p->classes > 1 ? p->classes : 1) ? p->one_hot_max_size
				 : 1 + (p->classes > 1 ? p->classes : 1));
	}
	count = gbml_alloc_array(env, (size_t) largest + 2, sizeof(int64_t));
	fit->model.derived = gbml_alloc0(env, sizeof(gbml_boost_derived) * (size_t) (room > 0 ? room : 1));
	if (count == NULL || fit->model.derived == NULL)
	{
		gbml_free(env, count);
		return env->error_code;
	}
	fit->model.n_inputs = fit->n_inputs;
	for (int k = 0; k < fit->n_cat; k++)
	{
		count_slots(fit, k, count);
		plan_input(fit, p, k, count);
	}
	gbml_free(env, count);
	return GBML_OK;
}

int
gbml_boost_ctr_permutation(int64_t n, int64_t n_groups, const int64_t *group_off, uint64_t seed,
						   int64_t *perm, gbml_env *env)
{
	gbml_rng	rng;
	uint64_t   *order;
	int64_t		units = n_groups > 0 ? n_groups : n,
				at = 0;

	gbml_rng_stream(&rng, seed ^ 0x6374726f72646572ULL, 0);	/* "ctrorder" */
	if ((order = gbml_alloc_array(env, (size_t) (units > 0 ? units : 1), sizeof(uint64_t))) == NULL)
		return env->error_code;
	for (int64_t u = 0; u < units; u++)
		order[u] = (uint64_t) u;
	gbml_rng_shuffle_u64(&rng, order, (uint64_t) units);
	for (int64_t u = 0; u < units; u++)
	{
		if (n_groups <= 0)
			perm[at++] = (int64_t) order[u];
		else
			for (int64_t r = group_off[order[u]]; r < group_off[order[u] + 1]; r++)
				perm[at++] = r;
	}
	gbml_free(env, order);
	return GBML_OK;
}

int
gbml_boost_ctr_ordered(const float *ids, int32_t n_categories, const float *label, int target,
					   const int64_t *perm, int64_t n, double prior, double prior_weight,
					   float *value, float *table, gbml_env *env)
{
	size_t		slots = (size_t) n_categories + 2;
	double	   *sum = gbml_alloc0(env, sizeof(double) * slots);
	int64_t    *count = gbml_alloc0(env, sizeof(int64_t) * slots);
	double		pw = prior * prior_weight;

	if (sum == NULL || count == NULL)
	{
		gbml_free(env, sum);
		gbml_free(env, count);
		return env->error_code;
	}
	for (int64_t k = 0; k < n; k++)
	{
		int64_t		i = perm[k];
		int32_t		s = gbml_boost_cat_slot(ids[i], n_categories);

		/* the rows before this one only: its own target joins afterwards */
		if (value)
			value[i] = (float) ((sum[s] + pw) / ((double) count[s] + prior_weight));
		sum[s] += ctr_target(label[i], target);
		count[s]++;
	}
	for (size_t s = 0; s < slots; s++)
		table[s] = (float) ((sum[s] + pw) / ((double) count[s] + prior_weight));
	gbml_free(env, sum);
	gbml_free(env, count);
	return GBML_OK;
}

/* CatBoost's Counter: count / (largest count + 1) per slot, over the training rows. */
static int
counter_table(const gbml_boost_ctr_fit *fit, int k, float *table, gbml_env *env)
{
	int32_t		nc = n_categories_of(fit, k);
	int64_t    *count = gbml_alloc_array(env, (size_t) nc + 2, sizeof(int64_t));
	int64_t		most = 0;

	if (count == NULL)
		return env->error_code;
	count_slots(fit, k, count);
	for (int32_t s = 0; s < nc + 2; s++)
		most = count[s] > most ? count[s] : most;
	for (int32_t s = 0; s < nc + 2; s++)
		table[s] = (float) ((double) count[s] / ((double) most + 1.0));
	gbml_free(env, count);
	return GBML_OK;
}

/* The mean target (the default prior). */
static double
mean_target(const float *label, int64_t n, bool binary)
{
	double		s = 0;

	for (int64_t i = 0; i < n; i++)
		s += ctr_target(label[i], binary ? GBML_CTR_BINARY : GBML_CTR_LABEL);
	return n > 0 ? s / (double) n : 0;
}

/* Everything the derived features' loop shares. */
typedef struct ctr_work
{
	const gbml_boost_ctr_params *p;
	const float *label;
	int64_t    *perm;			/* NULL without a ctr_mean feature */
	float	   *values;			/* n (training) */
	float	   *eval_values;	/* n_eval */
	int		   *border_count;	/* per derived feature */
	float	   *border_values;	/* per derived feature, BORDER_STRIDE each */
} ctr_work;

/* Index of categorical input `source` in fit->col. */
static int
cat_index(const gbml_boost_ctr_fit *fit, int source)
{
	for (int k = 0; k < fit->n_cat; k++)
		if (fit->col[k] == source)
			return k;
	return -1;
}

/* Derived feature d's table (ctr) and its value for each training row. */
static int
training_values(gbml_boost_ctr_fit *fit, ctr_work *w, int d, gbml_env *env)
{
	gbml_boost_derived *e = &fit->model.derived[d];
	int			k = cat_index(fit, e->source);
	const float *ids = ids_of(&fit->keep, k);
	int64_t		n = fit->keep.n_rows;
	int			rc = GBML_OK;

	if (e->kind != GBML_BOOST_ONE_HOT &&
		(e->table = gbml_alloc_array(env, (size_t) e->n_categories + 2, sizeof(float))) == NULL)
		return env->error_code;
	if (e->kind == GBML_BOOST_CTR_MEAN)
		return gbml_boost_ctr_ordered(ids, e->n_categories, w->label,
									  w->p->classes > 0 ? e->category :
									  w->p->binary_target ? GBML_CTR_BINARY : GBML_CTR_LABEL, w->perm, n,
									  fit->model.prior, fit->model.prior_weight, w->values, e->table, env);
	if (e->kind == GBML_BOOST_CTR_COUNTER)
		rc = counter_table(fit, k, e->table, env);
	if (e->kind == GBML_BOOST_CAT_SLOT)
		for (int32_t s = 0; s < e->n_categories + 2; s++)
			e->table[s] = (float) s;
	for (int64_t i = 0; rc == GBML_OK && i < n; i++)
		w->values[i] = gbml_boost_derived_value(e, ids[i]);
	return rc;
}

/*
 * Derived feature d's borders: 0.5 for one-hot (its training rows hold
 * both values: two slots at least are used), else quantiles of a sample of
 * the training values, drawn like the inputs' border sample.
 */
static int
derived_borders(const gbml_boost_ctr_fit *fit, ctr_work *w, int d, gbml_env *env)
{
	int64_t		n = fit->keep.n_rows,
				m = n < w->p->border_sample_size ? n : w->p->border_sample_size,
				taken = 0;
	float	   *out = w->border_values + (size_t) d * BORDER_STRIDE;
	float	   *sample;
	gbml_rng	rng;
	int			rc;

	if (fit->model.derived[d].kind == GBML_BOOST_ONE_HOT)
	{
		out[0] = 0.5f;
		w->border_count[d] = 1;
		return GBML_OK;
	}
	if (fit->model.derived[d].kind == GBML_BOOST_CAT_SLOT)
	{
		/* a border below every slot but the first, unseen (n + 1) included: bin = slot */
		for (int32_t s = 0; s <= fit->model.derived[d].n_categories; s++)
			out[s] = (float) s + 0.5f;
		w->border_count[d] = fit->model.derived[d].n_categories + 1;
		return GBML_OK;
	}
	if ((sample = gbml_alloc_array(env, (size_t) (m > 0 ? m : 1), sizeof(float))) == NULL)
		return env->error_code;
	gbml_rng_stream(&rng, w->p->seed ^ 0x63747262ULL, (uint64_t) d);	/* "ctrb" */
	for (int64_t i = 0; i < n && taken < m; i++)
		if (m == n || (double) (n - i) * gbml_rng_uniform(&rng) < (double) (m - taken))
			sample[taken++] = w->values[i];
	rc = gbml_boost_value_borders(sample, taken, w->p->border_count, w->p->border_type, out, &w->border_count[d], env);
	gbml_free(env, sample);
	return rc;
}

/* The eval rows' values of derived feature d: the final statistics, as scoring uses them. */
static void
eval_values(const gbml_boost_ctr_fit *fit, ctr_work *w, int d)
{
	const gbml_boost_derived *e = &fit->model.derived[d];
	const float *ids = ids_of(&fit->eval_keep, cat_index(fit, e->source));

	for (int64_t i = 0; i < fit->eval_keep.n_rows; i++)
		w->eval_values[i] = gbml_boost_derived_value(e, ids[i]);
}

static void
work_free(ctr_work *w, gbml_env *env)
{
	gbml_free(env, w->perm);
	gbml_free(env, w->values);
	gbml_free(env, w->eval_values);
	gbml_free(env, w->border_count);
	gbml_free(env, w->border_values);
}

static int
work_alloc(gbml_boost_ctr_fit *fit, ctr_work *w, int64_t n_groups, const int64_t *group_off, gbml_env *env)
{
	int64_t		n = fit->keep.n_rows,
				ne = fit->eval_keep.n_rows;
	int			nd = fit->model.n_derived;

	w->values = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(float));
	w->eval_values = gbml_alloc_array(env, (size_t) (ne > 0 ? ne : 1), sizeof(float));
	w->border_count = gbml_alloc0(env, sizeof(int) * (size_t) (nd > 0 ? nd : 1));
	w->border_values = gbml_alloc_array(env, (size_t) (nd > 0 ? nd : 1) * BORDER_STRIDE, sizeof(float));
	if (!w->values || !w->eval_values || !w->border_count || !w->border_values)
		return env->error_code;
	for (int d = 0; d < nd; d++)
		if (fit->model.derived[d].kind == GBML_BOOST_CTR_MEAN)
		{
			if ((w->perm = gbml_alloc_array(env, (size_t) (n > 0 ? n : 1), sizeof(int64_t))) == NULL)
				return env->error_code;
			return gbml_boost_ctr_permutation(n, n_groups, group_off, w->p->seed, w->perm, env);
		}
	return GBML_OK;
}

/* Derived feature d: statistics, borders, and its bin column in the training and eval bins. */
static int
add_derived(gbml_boost_ctr_fit *fit, ctr_work *w, int d, gbml_boost_bins *bins, int bins_first,
			gbml_boost_bins *eval_bins, int threads, gbml_env *env)
{
	int			column = bins_first + d;
	const float *b = w->border_values + (size_t) d * BORDER_STRIDE;
	int			rc;

	if ((rc = training_values(fit, w, d, env)) != GBML_OK ||
		(rc = derived_borders(fit, w, d, env)) != GBML_OK)
		return rc;
	gbml_boost_bins_fill_column(bins, column, w->values, b, w->border_count[d], threads);
	if (eval_bins && fit->eval_keep.n_rows > 0)
	{
		eval_values(fit, w, d);
		gbml_boost_bins_fill_column(eval_bins, fit->n_inputs + d, w->eval_values, b, w->border_count[d], threads);
	}
	return GBML_OK;
}

/*
 * What the derived columns add before they are made, past the budget said
 * so: a byte a row for each in the training bins and the eval bins (which
 * stay in memory), a block's old copy as it is widened, and the working arrays (each row's value, the ordered
 * statistics' permutation and its shuffle, a border sample and its sort).
 */
static int
check_budget(const gbml_boost_ctr_fit *fit, const gbml_boost_bins *train_bins, int eval_columns, gbml_env *env)
{
	int64_t		n = fit->keep.n_rows,
				ne = fit->eval_keep.n_rows;
	int			nd = fit->model.n_derived;
	size_t		bins = (size_t) n * (size_t) nd + (size_t) ne * (size_t) eval_columns,
				/* a block is widened by a realloc: its old copy lives until the new one is filled */
				block = (size_t) train_bins->block_rows * (size_t) (train_bins->n_features + nd),
				work = (size_t) (n + ne) * sizeof(float) + (size_t) n * (2 * sizeof(int64_t) + 2 * sizeof(float));

	return gbml_budget_check(env, bins + block + work,
							 "the categorical features' %d derived columns of bins (a byte a row each, for %lld rows "
							 "and %lld eval rows: %.1f MB) and the working arrays that make them",
							 nd, (long long) n, (long long) ne, (double) bins / 1048576.0);
}

int
gbml_boost_ctr_finish(gbml_boost_ctr_fit *fit, const gbml_boost_ctr_params *p, const float *label,
					  int64_t n_groups, const int64_t *group_off, gbml_boost_bins *bins,
					  int bins_first, gbml_boost_bins *eval_bins, gbml_boost_borders *borders, int threads,
					  gbml_env *env)
{
	ctr_work	w;
	int			width;
	int			rc;

	memset(&w, 0, sizeof(w));
	w.p = p;
	w.label = label;
	if ((rc = check_ids(fit, &fit->keep, false, env)) != GBML_OK ||
		(fit->eval_keep.n_rows > 0 && (rc = check_ids(fit, &fit->eval_keep, true, env)) != GBML_OK) ||
		(rc = plan(fit, p, env)) != GBML_OK)
		return rc;
	fit->model.prior = !isnan(p->prior) ? p->prior : p->classes > 0 ? 1.0 / p->classes :
		mean_target(label, fit->keep.n_rows, p->binary_target);
	fit->model.prior_weight = p->prior_weight;
	width = gbml_boost_inputs_width(&fit->model);
	if ((rc = check_budget(fit, bins, eval_bins ? width - fit->n_inputs : 0, env)) != GBML_OK ||
		(rc = work_alloc(fit, &w, n_groups, group_off, env)) != GBML_OK ||
		(rc = gbml_boost_bins_widen(bins, bins_first, bins_first + fit->model.n_derived, env)) != GBML_OK ||
		(eval_bins && (rc = gbml_boost_bins_widen(eval_bins, fit->n_inputs, width, env)) != GBML_OK))
		goto done;
	for (int d = 0; d < fit->model.n_derived && rc == GBML_OK; d++)
		rc = add_derived(fit, &w, d, bins, bins_first, eval_bins, threads, env);
	if (rc == GBML_OK)
		rc = gbml_boost_borders_append(borders, fit->n_inputs, fit->model.n_derived, w.border_count,
									   w.border_values, BORDER_STRIDE, env);
done:
	work_free(&w, env);
	/* the ids are in the bins now (as derived features): the boosting loop does not need them */
	gbml_free(env, fit->keep.out);
	gbml_free(env, fit->eval_keep.out);
	fit->keep.out = fit->eval_keep.out = NULL;
	return rc;
}
