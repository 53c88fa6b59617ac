#include "test_util.h"
#include "model_format.h"
#include "rng.h"

#include <dirent.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gbml_param_value
tu_num(const char *key, double v)
{
	return (gbml_param_value) {.key = key,.kind = GBML_VALUE_NUMBER,.number = v};
}

gbml_param_value
tu_str(const char *key, const char *v)
{
	return (gbml_param_value) {.key = key,.kind = GBML_VALUE_STRING,.string = v};
}

gbml_param_value
tu_bool(const char *key, bool v)
{
	return (gbml_param_value) {.key = key,.kind = GBML_VALUE_BOOL,.boolean = v};
}

uint8_t *
tu_serialize(const gbml_dataset *ds, size_t *len)
{
	uint8_t    *buf;

	*len = gbml_dataset_serialized_size(ds);
	buf = malloc(*len);
	gbml_dataset_serialize_into(ds, buf);
	return buf;
}

char *
tu_meta_text(gbml_env *env, const uint8_t *model, size_t len)
{
	gbml_model_reader r;
	const uint8_t *data;
	size_t		dlen;
	char	   *s;

	if (gbml_model_open(&r, env, model, len) != GBML_OK ||
		!gbml_model_find(&r, GBML_SECTION_META, &data, &dlen))
		return NULL;
	s = malloc(dlen + 1);
	memcpy(s, data, dlen);
	s[dlen] = 0;
	return s;
}

double
tu_json_number(const char *json, const char *key)
{
	char		pat[128];
	const char *p;
	char	   *end;
	double		v;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = json ? strstr(json, pat) : NULL;
	if (p == NULL)
		return NAN;
	p += strlen(pat);
	if (strncmp(p, "true", 4) == 0)
		return 1;
	if (strncmp(p, "false", 5) == 0)
		return 0;
	v = strtod(p, &end);
	return end == p ? NAN : v;
}

double
tu_meta_number(gbml_env *env, const uint8_t *model, size_t len, const char *key)
{
	char	   *meta = tu_meta_text(env, model, len);
	double		v = tu_json_number(meta, key);

	free(meta);
	return v;
}

bool
tu_same_sections(gbml_env *env, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
				 const uint32_t *tags, int n_tags)
{
	gbml_model_reader ra,
				rb;

	if (gbml_model_open(&ra, env, a, alen) != GBML_OK || gbml_model_open(&rb, env, b, blen) != GBML_OK)
		return false;
	for (int i = 0; i < n_tags; i++)
	{
		const uint8_t *da,
				   *db;
		size_t		la,
					lb;

		if (!gbml_model_find(&ra, tags[i], &da, &la) || !gbml_model_find(&rb, tags[i], &db, &lb) ||
			la != lb || memcmp(da, db, la) != 0)
			return false;
	}
	return true;
}

bool
tu_section_offset(gbml_env *env, const uint8_t *model, size_t len, uint32_t tag,
				  size_t *offset, size_t *section_len)
{
	gbml_model_reader r;
	const uint8_t *data;

	if (gbml_model_open(&r, env, model, len) != GBML_OK || !gbml_model_find(&r, tag, &data, section_len))
		return false;
	*offset = (size_t) (data - model);
	return true;
}

void
tu_fix_crc(uint8_t *m, size_t len)
{
	/* the checksum covers the header (less its own field) and the payload */
	uint32_t	crc = gbml_crc32c(0, m, 12);

	crc = gbml_crc32c(crc, m + 16, 8);
	crc = gbml_crc32c(crc, m + GBML_MODEL_HEADER_SIZE, len - GBML_MODEL_HEADER_SIZE);
	memcpy(m + 12, &crc, 4);
}

bool
tu_cancel_progress(void *ctx, const gbml_progress_info *info)
{
	tu_cancel  *c = ctx;

	++c->calls;
	return (c->at_call > 0 && c->calls >= c->at_call) ||
		(c->at_iteration > 0 && info->iteration >= c->at_iteration);
}

int
tu_open_fds(void)
{
	DIR		   *d = opendir("/proc/self/fd");
	int			n = 0;

	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

int64_t *
tu_shuffled(int64_t n, uint64_t seed)
{
	int64_t    *p = malloc(sizeof(int64_t) * (size_t) (n > 0 ? n : 1));
	gbml_rng	rng;

	for (int64_t i = 0; i < n; i++)
		p[i] = i;
	gbml_rng_seed(&rng, seed);
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) (gbml_rng_next(&rng) % (uint64_t) (i + 1)),
					t = p[i];

		p[i] = p[j];
		p[j] = t;
	}
	return p;
}

gbml_feature_schema *
tu_schema(int n, const char *const *names, const int *n_categories)
{
	gbml_feature_schema *s = calloc(1, sizeof(*s));

	s->n_features = n;
	s->features = calloc((size_t) n, sizeof(gbml_feature_def));
	for (int j = 0; j < n; j++)
	{
		gbml_feature_def *f = &s->features[j];

		f->name = strdup(names[j]);
		f->kind = n_categories[j] > 0 ? GBML_FEATURE_CATEGORICAL : GBML_FEATURE_NUMERIC;
		f->source_type = strdup(n_categories[j] > 0 ? "text" : "double precision");
		f->n_categories = n_categories[j] > 0 ? n_categories[j] : 0;
		f->categories = n_categories[j] > 0 ? calloc((size_t) n_categories[j], sizeof(char *)) : NULL;
		for (int c = 0; c < f->n_categories; c++)
		{
			f->categories[c] = malloc(16);
			snprintf(f->categories[c], 16, "v%03d", c);
		}
	}
	return s;
}

void
tu_schema_free(gbml_feature_schema *s)
{
	for (int j = 0; s && j < s->n_features; j++)
	{
		for (int c = 0; c < s->features[j].n_categories; c++)
			free(s->features[j].categories[c]);
		free(s->features[j].categories);
		free(s->features[j].name);
		free(s->features[j].source_type);
	}
	if (s)
		free(s->features);
	free(s);
}

int
tu_train(const char *algorithm, gbml_dataset *ds, gbml_env *env, const gbml_param_value *v, int nv,
		 uint8_t **model, size_t *len)
{
	return tu_train_eval(algorithm, ds, NULL, env, v, nv, model, len);
}

int
tu_train_eval(const char *algorithm, gbml_dataset *ds, gbml_dataset *eval, gbml_env *env,
			  const gbml_param_value *v, int nv, uint8_t **model, size_t *len)
{
	gbml_parsed_params pp;
	gbml_strbuf report;
	uint8_t    *m = NULL;
	int			rc;

	*model = NULL;
	*len = 0;
	if ((rc = gbml_parse_training_params(env, gbml_algorithm_by_name(algorithm), v, nv, &pp)) != GBML_OK)
		return rc;
	gbml_sb_init(&report, env);
	rc = gbml_train_report(env, &pp, ds, eval, &m, len, &report);
	if (rc == GBML_OK)
	{
		*model = memcpy(malloc(*len), m, *len);
		gbml_free(env, m);
	}
	gbml_sb_free(&report);
	gbml_parsed_params_free(env, &pp);
	return rc;
}

int
tu_rebuild(gbml_env *env, const gbml_model_reader *r, uint32_t tag, const uint8_t *body, size_t blen,
		   uint8_t **out, size_t *olen)
{
	gbml_model_writer w;

	gbml_model_writer_init(&w, env);
	for (int i = 0; i < r->n_sections; i++)
	{
		if (r->sections[i].tag != tag)
			gbml_model_add_section(&w, r->sections[i].tag, r->sections[i].data, r->sections[i].len);
		else if (body)
			gbml_model_add_section(&w, tag, body, blen);
	}
	return gbml_model_finish(&w, r->algorithm, r->flags, out, olen);
}

int
tu_score_dataset(gbml_scorer *sc, gbml_env *env, const gbml_dataset *ds, gbml_output what, double *out,
				 float *label)
{
	int64_t		i = 0;

	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, i++)
		{
			int			rc = gbml_scorer_predict(sc, env, gbml_dataset_row(ds, c, r), ds->n_features, what, &out[i]);

			if (rc != GBML_OK)
				return rc;
			if (label)
				label[i] = ds->chunks[c]->label[r];
		}
	return GBML_OK;
}
