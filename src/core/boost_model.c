/*
 * boost_model.c — a trained "boost" model: its sections (boost.h; boost.c's
 * write_sections writes them) loaded and checked into a forest for the
 * scorers (boost_predict.h), one row's score, the readable dump
 * (model_json) and feature importance.  boost.c's algorithm table names
 * these entries (boost_model.h).
 *
 * A damaged model is an error naming what is wrong, never a crash: the
 * loader checks each section before the next step reads it.
 */
#include "boost_model.h"
#include "boost_histogram.h"
#include "boost_loss.h"
#include "boost_multiclass.h"
#include "boost_quantize.h"

#include <math.h>
#include <string.h>

static void
model_free(gbml_boost_model *m, gbml_env *env)
{
	if (m == NULL)
		return;
	gbml_free(env, m->gain);
	gbml_free(env, m->border_count);
	gbml_free(env, m->border_off);
	gbml_free(env, m->border_values);
	gbml_free(env, m->depth_buf);
	gbml_free(env, m->split_off_buf);
	gbml_free(env, m->leaf_off_buf);
	gbml_free(env, m->feature_buf);
	gbml_free(env, m->border_buf);
	gbml_free(env, m->leaf_buf);
	gbml_free(env, m->class_base);
	gbml_free(env, m->used_buf);
	gbml_free(env, m->pos_buf);
	gbml_boost_forest_free_fast(&m->forest, env);
	gbml_boost_inputs_free(&m->inputs, env);
	gbml_schema_free(m->own_schema, env);
	gbml_free(env, m);
}

static int
corrupt(gbml_boost_model *m, gbml_env *env, const char *what)
{
	model_free(m, env);
	return gbml_error(env, GBML_ECORRUPT, "boost model: %s", what);
}

/* A failed allocation while loading: free the partial model, keep env's error. */
static int
load_failed(gbml_boost_model *m, gbml_env *env)
{
	int			rc = env->error_code;

	model_free(m, env);
	return rc;
}

/*
 * The feature schema ('SCHM', when the model has one) and the categorical
 * transforms ('BSTC'): present together exactly when some input is
 * categorical.  Sets the forest's model feature count (inputs, then
 * derived features) and its transform.
 */
static int
load_inputs(const gbml_model_reader *r, gbml_boost_model *m, int nf, gbml_env *env)
{
	const uint8_t *data;
	size_t		len;
	int			rc;

	m->forest.n_features = nf;
	if ((rc = gbml_model_schema(r, env, &m->schema, &m->own_schema)) != GBML_OK)
	{
		model_free(m, env);
		return rc;
	}
	if (!gbml_model_find(r, GBML_SECTION_BOOST_CATEGORICAL, &data, &len))
	{
		if (gbml_schema_n_categorical(m->schema) > 0)
			return corrupt(m, env, "categorical features without their section");
		return GBML_OK;
	}
	if ((rc = gbml_boost_inputs_read(data, len, nf, m->schema, &m->inputs, env)) != GBML_OK)
	{
		model_free(m, env);
		return rc;
	}
	m->forest.n_features = gbml_boost_inputs_width(&m->inputs);
	m->forest.inputs = &m->inputs;
	return GBML_OK;
}

/* A tree's depth word (trees section): its depth, whether it splits per node, its split count. */
static uint32_t
tree_shape(uint32_t word, uint32_t *depth, bool *nodes)
{
	*depth = word & ~GBML_BOOST_TREE_NODE_SPLITS;
	*nodes = (word & GBML_BOOST_TREE_NODE_SPLITS) != 0;
	return *nodes && *depth <= GBML_BOOST_MAX_DEPTH ? (1u << *depth) - 1 : *depth;
}

/* What the header and the trees section say of the trees, for the steps after them. */
typedef struct load_counts
{
	uint32_t	n_trees;
	uint32_t	nf;				/* the input features */
	const uint8_t *trees;		/* the trees section, checked */
	size_t		trees_len;
	int64_t		n_splits;
	int64_t		n_leaves;
} load_counts;

/* The header section: layout version, loss, base score, tree and feature counts (MultiClass: the classes). */
static int
load_header(const gbml_model_reader *r, gbml_boost_model *m, load_counts *k, gbml_env *env)
{
	const uint8_t *data;
	size_t		len;
	gbml_cursor c;
	uint32_t	version,
				loss;
	double		base;

	if (!gbml_model_find(r, GBML_SECTION_BOOST_HEADER, &data, &len))
		return corrupt(m, env, "header section is missing");
	gbml_cursor_init(&c, data, len);
	version = gbml_cursor_u32(&c);
	loss = gbml_cursor_u32(&c);
	base = gbml_cursor_f64(&c);
	k->n_trees = gbml_cursor_u32(&c);
	k->nf = gbml_cursor_u32(&c);
	if (c.ok && loss == GBML_LOSS_MULTICLASS)
	{
		uint32_t	classes = gbml_cursor_u32(&c);

		if (c.ok && (classes < 2 || classes > GBML_BOOST_MAX_CLASSES || k->n_trees % classes != 0))
			return corrupt(m, env, "class count out of range, or the trees are not whole iterations of them");
		if (c.ok && (m->class_base = gbml_alloc_array(env, classes, sizeof(double))) == NULL)
			return load_failed(m, env);
		for (uint32_t j = 0; c.ok && j < classes; j++)
			if (!isfinite(m->class_base[j] = gbml_cursor_f64(&c)))
				return corrupt(m, env, "a class base score is not finite");
		m->forest.n_classes = (int) classes;
		m->forest.class_base = m->class_base;
	}
	if (!c.ok || gbml_cursor_remaining(&c) != 0)
		return corrupt(m, env, "header section has the wrong size");
	if (version != GBML_BOOST_LAYOUT_VERSION)
		return corrupt(m, env, "unknown layout version");
	if (loss > GBML_LOSS_MULTICLASS)
		return corrupt(m, env, "unknown loss");
	if (!isfinite(base))
		return corrupt(m, env, "base score is not finite");
	if (k->nf == 0 || k->nf != r->n_features || k->nf > GBML_MAX_FEATURES)
		return corrupt(m, env, "feature count disagrees with the container");
	m->loss = (int) loss;
	m->forest.base_score = base;
	return GBML_OK;
}

/* The trees section's validating pass: every tree checked, the splits and leaves counted. */
static int
check_trees(const gbml_model_reader *r, gbml_boost_model *m, load_counts *k, gbml_env *env)
{
	gbml_cursor c;
	uint32_t	n_model = (uint32_t) m->forest.n_features;	/* the model features splits index: nf, plus derived ones */

	if (!gbml_model_find(r, GBML_SECTION_BOOST_TREES, &k->trees, &k->trees_len))
		return corrupt(m, env, "trees section is missing");
	if ((uint64_t) k->n_trees > k->trees_len / (4 + 12 + 8))
		return corrupt(m, env, "tree count exceeds the trees section");
	gbml_cursor_init(&c, k->trees, k->trees_len);
	for (uint32_t t = 0; t < k->n_trees; t++)
	{
		uint32_t	d;
		bool		nodes;
		uint32_t	n_tree_splits = tree_shape(gbml_cursor_u32(&c), &d, &nodes);

		if (!c.ok || d < 1 || d > GBML_BOOST_MAX_DEPTH)
			return corrupt(m, env, "tree depth out of range 1..10");
		for (uint32_t l = 0; l < n_tree_splits; l++)
		{
			uint32_t	f = gbml_cursor_u32(&c);
			float		b = gbml_cursor_f32(&c);
			float		g = gbml_cursor_f32(&c);

			if (!c.ok)
				return corrupt(m, env, "trees section is truncated");
			if (f >= n_model)
				return corrupt(m, env, "split feature index out of range");
			if (gbml_feature_is_categorical(m->schema, (int) f))
				return corrupt(m, env, "a split on a categorical feature's raw id");
			if (isnan(b) || !(isfinite(g) && g >= 0))
				return corrupt(m, env, "split border or gain is invalid");
		}
		for (uint32_t l = 0; l < (1u << d); l++)
		{
			float		v = gbml_cursor_f32(&c);

			if (!c.ok)
				return corrupt(m, env, "trees section is truncated");
			if (!isfinite(v))
				return corrupt(m, env, "leaf value is not finite");
		}
		k->n_splits += n_tree_splits;
		k->n_leaves += (int64_t) 1 << d;
	}
	if (gbml_cursor_remaining(&c) != 0)
		return corrupt(m, env, "trees section has trailing bytes");
	return GBML_OK;
}

/* The trees section's filling pass (checked by check_trees) into the allocated arrays. */
static void
fill_trees(gbml_boost_model *m, const load_counts *k)
{
	gbml_cursor c;
	int64_t		so = 0,
				lo = 0;
	int			uniform = -2;	/* the trees' one depth; -1 when they differ */
	unsigned	kinds = 0;		/* 1: a symmetric tree seen, 2: a node-split one */

	gbml_cursor_init(&c, k->trees, k->trees_len);
	for (uint32_t t = 0; t < k->n_trees; t++)
	{
		uint32_t	d;
		bool		nodes;
		uint32_t	n_tree_splits = tree_shape(gbml_cursor_u32(&c), &d, &nodes);

		m->depth_buf[t] = (int32_t) d;
		m->split_off_buf[t] = so;
		m->leaf_off_buf[t] = lo;
		for (uint32_t l = 0; l < n_tree_splits; l++, so++)
		{
			m->feature_buf[so] = (int32_t) gbml_cursor_u32(&c);
			m->border_buf[so] = gbml_cursor_f32(&c);
			m->gain[so] = gbml_cursor_f32(&c);
		}
		gbml_cursor_f32_array(&c, m->leaf_buf + lo, (size_t) 1 << d);
		lo += (int64_t) 1 << d;
		kinds |= nodes ? 2u : 1u;
		uniform = uniform == -2 || uniform == (int) d ? (int) d : -1;
	}
	m->split_off_buf[k->n_trees] = so;
	m->leaf_off_buf[k->n_trees] = lo;
	/* one depth and one kind: the scorers' fast loops (symmetric, or node-split trees) */
	m->forest.uniform_depth = kinds == 1 && uniform > 0 ? uniform : -1;
	m->forest.node_depth = kinds == 2 && uniform > 0 ? uniform : -1;
}

/* The forest's arrays, filled from the checked trees section. */
static int
load_trees(gbml_boost_model *m, const load_counts *k, gbml_env *env)
{
	size_t		n_trees = k->n_trees;

	m->depth_buf = gbml_alloc_array(env, n_trees + 1, sizeof(int32_t));
	m->split_off_buf = gbml_alloc_array(env, n_trees + 1, sizeof(int64_t));
	m->leaf_off_buf = gbml_alloc_array(env, n_trees + 1, sizeof(int64_t));
	m->feature_buf = gbml_alloc_array(env, (size_t) k->n_splits + 1, sizeof(int32_t));
	m->pos_buf = gbml_alloc_array(env, (size_t) k->n_splits + 1, sizeof(int32_t));
	m->border_buf = gbml_alloc_array(env, (size_t) k->n_splits + 1, sizeof(float));
	m->gain = gbml_alloc_array(env, (size_t) k->n_splits + 1, sizeof(float));
	m->leaf_buf = gbml_alloc_array(env, (size_t) k->n_leaves + 1, sizeof(float));
	if (!m->depth_buf || !m->split_off_buf || !m->leaf_off_buf || !m->feature_buf || !m->pos_buf ||
		!m->border_buf || !m->gain || !m->leaf_buf)
		return load_failed(m, env);
	fill_trees(m, k);
	m->forest.n_trees = (int) k->n_trees;
	m->forest.depth = m->depth_buf;
	m->forest.split_off = m->split_off_buf;
	m->forest.leaf_off = m->leaf_off_buf;
	m->forest.feature = m->feature_buf;
	m->forest.border = m->border_buf;
	m->forest.leaf = m->leaf_buf;
	return GBML_OK;
}

/* The features the splits use, and each split's place among them, for the batch scorer. */
static int
load_used_features(gbml_boost_model *m, int64_t n_splits, gbml_env *env)
{
	uint32_t	n_model = (uint32_t) m->forest.n_features;
	int32_t    *map = gbml_alloc_array(env, n_model, sizeof(int32_t));
	int			n_used = 0;

	if (map == NULL)
		return load_failed(m, env);
	for (uint32_t f = 0; f < n_model; f++)
		map[f] = -1;
	for (int64_t s = 0; s < n_splits; s++)
		map[m->feature_buf[s]] = 0;
	for (uint32_t f = 0; f < n_model; f++)
		if (map[f] == 0)
			n_used++;
	m->used_buf = gbml_alloc_array(env, (size_t) n_used + 1, sizeof(int32_t));
	if (m->used_buf == NULL)
	{
		gbml_free(env, map);
		return load_failed(m, env);
	}
	n_used = 0;
	for (uint32_t f = 0; f < n_model; f++)
		if (map[f] == 0)
		{
			m->used_buf[n_used] = (int32_t) f;
			map[f] = n_used++;
		}
	for (int64_t s = 0; s < n_splits; s++)
		m->pos_buf[s] = map[m->feature_buf[s]];
	gbml_free(env, map);
	m->forest.n_used = n_used;
	m->forest.used_features = m->used_buf;
	m->forest.feature_pos = m->pos_buf;
	return GBML_OK;
}

/* The borders section's first pass: its feature count, then each feature's border count and offset. */
static int
load_border_counts(gbml_boost_model *m, const uint8_t *data, size_t len, gbml_env *env)
{
	gbml_cursor c;
	uint32_t	n_model = (uint32_t) m->forest.n_features;

	gbml_cursor_init(&c, data, len);
	if (gbml_cursor_u32(&c) != n_model || !c.ok)
		return corrupt(m, env, "borders section has the wrong feature count");
	m->border_count = gbml_alloc_array(env, n_model, sizeof(int));
	m->border_off = gbml_alloc_array(env, (size_t) n_model + 1, sizeof(int64_t));
	if (m->border_count == NULL || m->border_off == NULL)
		return load_failed(m, env);
	m->border_off[0] = 0;
	for (uint32_t f = 0; f < n_model; f++)
	{
		uint32_t	cnt = gbml_cursor_u32(&c);
		const void *vals;

		if (!c.ok || cnt > GBML_BOOST_MAX_BORDERS)
			return corrupt(m, env, "border count out of range 0..255");
		vals = gbml_cursor_bytes(&c, cnt, sizeof(float));
		if (vals == NULL)
			return corrupt(m, env, "borders section is truncated");
		m->border_count[f] = (int) cnt;
		m->border_off[f + 1] = m->border_off[f] + cnt;
	}
	if (gbml_cursor_remaining(&c) != 0)
		return corrupt(m, env, "borders section has trailing bytes");
	return GBML_OK;
}

/* The borders section's second pass (sized by load_border_counts): the values, strictly increasing. */
static int
load_border_values(gbml_boost_model *m, const uint8_t *data, size_t len, gbml_env *env)
{
	gbml_cursor c;
	uint32_t	n_model = (uint32_t) m->forest.n_features;

	m->border_values = gbml_alloc_array(env, (size_t) m->border_off[n_model] + 1, sizeof(float));
	if (m->border_values == NULL)
		return load_failed(m, env);
	gbml_cursor_init(&c, data, len);
	gbml_cursor_u32(&c);
	for (uint32_t f = 0; f < n_model; f++)
	{
		uint32_t	cnt = gbml_cursor_u32(&c);
		float	   *v = m->border_values + m->border_off[f];

		gbml_cursor_f32_array(&c, v, cnt);
		for (uint32_t j = 0; j < cnt; j++)
			if (isnan(v[j]) || (j > 0 && !(v[j] > v[j - 1])))
				return corrupt(m, env, "borders are not strictly increasing numbers");
	}
	return GBML_OK;
}

/* The borders section: per model feature, its borders as trained (for the dump). */
static int
load_borders(const gbml_model_reader *r, gbml_boost_model *m, gbml_env *env)
{
	const uint8_t *data;
	size_t		len;
	int			rc;

	if (!gbml_model_find(r, GBML_SECTION_BOOST_BORDERS, &data, &len))
		return corrupt(m, env, "borders section is missing");
	if ((rc = load_border_counts(m, data, len, env)) != GBML_OK)
		return rc;
	return load_border_values(m, data, len, env);
}

/*
 * The header, the inputs, the trees (checked, then filled), the features the
 * splits use, the borders, then the fast scorer's layout.  Each step checks
 * its part before the next reads it; on an error it frees the partial model
 * (corrupt, load_failed) and returns the error.
 */
int
boost_load(const gbml_model_reader *r, gbml_env *env, void **handle)
{
	gbml_boost_model *m;
	load_counts k = {0};
	int			rc;

	*handle = NULL;
	m = gbml_alloc0(env, sizeof(gbml_boost_model));
	if (m == NULL)
		return env->error_code;
	if ((rc = load_header(r, m, &k, env)) != GBML_OK ||
		(rc = load_inputs(r, m, (int) k.nf, env)) != GBML_OK ||
		(rc = check_trees(r, m, &k, env)) != GBML_OK ||
		(rc = load_trees(m, &k, env)) != GBML_OK ||
		(rc = load_used_features(m, k.n_splits, env)) != GBML_OK ||
		(rc = load_borders(r, m, env)) != GBML_OK)
		return rc;
	if ((rc = gbml_boost_forest_prepare_fast(&m->forest, env)) != GBML_OK)
	{
		model_free(m, env);
		return rc;
	}
	*handle = m;
	return GBML_OK;
}

void
boost_unload(void *handle, gbml_env *env)
{
	model_free(handle, env);
}

double
boost_predict(const void *handle, const float *x, gbml_output what)
{
	const gbml_boost_model *m = handle;
	double		s;

	if (m->forest.n_classes > 0)
	{
		/* MultiClass: predict is the most probable class (probabilities: boost_classes) */
		double		score[GBML_BOOST_MAX_CLASSES];

		gbml_boost_forest_class_scores(&m->forest, x, score);
		return what == GBML_OUT_SCORE ? (double) gbml_boost_softmax_row(score, m->forest.n_classes) : NAN;
	}
	s = gbml_boost_forest_predict(&m->forest, x);

	if (what == GBML_OUT_PROBA)
		return m->loss == GBML_LOSS_LOGLOSS ? 1.0 / (1.0 + exp(-s)) : NAN;
	return s;
}

/* Logloss's score is a log-odds; the other losses' are not. */
bool
boost_gives_probability(const void *handle)
{
	return ((const gbml_boost_model *) handle)->loss == GBML_LOSS_LOGLOSS;
}

int
boost_classes(const void *handle, const float *x, double *prob)
{
	const gbml_boost_model *m = handle;

	if (prob != NULL && m->forest.n_classes > 0)
	{
		gbml_boost_forest_class_scores(&m->forest, x, prob);
		(void) gbml_boost_softmax_row(prob, m->forest.n_classes);
	}
	return m->forest.n_classes;
}

static void
json_float(gbml_strbuf *sb, double v)
{
	if (isinf(v))
		gbml_sb_json_string(sb, v < 0 ? "-Infinity" : "Infinity");
	else
		gbml_sb_printf(sb, "%.9g", v);
}

/* The input feature model feature k comes from (itself, or a derived feature's source). */
static int
input_of(const gbml_boost_model *m, int k)
{
	return m->forest.inputs != NULL && k >= m->inputs.n_inputs ? m->inputs.derived[k - m->inputs.n_inputs].source : k;
}

int
boost_to_json(const void *handle, gbml_strbuf *out)
{
	const gbml_boost_model *m = handle;
	const gbml_boost_forest *f = &m->forest;

	gbml_sb_printf(out, "\"loss\":\"%s\",", gbml_boost_loss_names[m->loss]);
	if (f->n_classes > 0)
	{
		gbml_sb_printf(out, "\"classes\":%d,\"tree_class\":\"tree t scores class t mod classes\",\"class_base_scores\":[",
					   f->n_classes);
		for (int c = 0; c < f->n_classes; c++)
		{
			gbml_sb_printf(out, c ? "," : "");
			gbml_sb_json_number(out, f->class_base[c]);
		}
		gbml_sb_printf(out, "],");
	}
	gbml_sb_printf(out, "\"base_score\":");
	gbml_sb_json_number(out, f->base_score);
	gbml_sb_printf(out, ",\"n_trees\":%d,\"feature_numbering\":\"1-based\",\"trees\":[", f->n_trees);
	for (int t = 0; t < f->n_trees; t++)
	{
		int64_t		s0 = f->split_off[t];

		/* a Depthwise tree lists its nodes level by level (see GBML_BOOST_TREE_NODE_SPLITS) */
		gbml_sb_printf(out, "%s{\"depth\":%d,%s\"splits\":[", t ? "," : "", f->depth[t],
					   gbml_boost_tree_splits_nodes(f, t) ? "\"node_splits\":true," : "");
		for (int l = 0; l < f->split_off[t + 1] - s0; l++)
		{
			gbml_sb_printf(out, "%s{\"feature\":%d,", l ? "," : "", f->feature[s0 + l] + 1);
			if (m->forest.inputs != NULL && f->feature[s0 + l] >= m->inputs.n_inputs)
				gbml_sb_printf(out, "\"source_feature\":%d,\"transform\":\"%s\",",
							   input_of(m, f->feature[s0 + l]) + 1,
							   gbml_boost_derived_kind_name(m->inputs.derived[f->feature[s0 + l] - m->inputs.n_inputs].kind));
			gbml_sb_printf(out, "\"border\":");
			json_float(out, f->border[s0 + l]);
			gbml_sb_printf(out, ",\"gain\":");
			json_float(out, m->gain[s0 + l]);
			gbml_sb_append(out, "}", 1);
		}
		gbml_sb_append(out, "],\"leaf_values\":[", 17);
		for (int l = 0; l < (1 << f->depth[t]); l++)
		{
			if (l)
				gbml_sb_append(out, ",", 1);
			json_float(out, f->leaf[f->leaf_off[t] + l]);
		}
		gbml_sb_append(out, "]}", 2);
	}
	gbml_sb_append(out, "],\"borders\":[", 13);
	for (int j = 0; j < f->n_features; j++)
	{
		gbml_sb_append(out, j ? ",[" : "[", j ? 2 : 1);
		for (int b = 0; b < m->border_count[j]; b++)
		{
			if (b)
				gbml_sb_append(out, ",", 1);
			json_float(out, m->border_values[m->border_off[j] + b]);
		}
		gbml_sb_append(out, "]", 1);
	}
	gbml_sb_append(out, "]", 1);
	if (m->forest.inputs != NULL)
		gbml_boost_inputs_json(&m->inputs, m->schema, m->forest.n_classes, out);
	return gbml_sb_status(out);
}

/* Importance per input feature: a derived feature's gain goes to its categorical source. */
int
boost_importance(const void *handle, double *out)
{
	const gbml_boost_model *m = handle;
	const gbml_boost_forest *f = &m->forest;
	int			n = m->forest.inputs != NULL ? m->inputs.n_inputs : f->n_features;

	memset(out, 0, sizeof(double) * (size_t) n);
	for (int64_t s = 0; s < f->split_off[f->n_trees]; s++)
		out[input_of(m, f->feature[s])] += m->gain[s];
	gbml_importance_normalize(out, n);
	return GBML_OK;
}

