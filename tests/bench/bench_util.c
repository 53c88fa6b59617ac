/*
 * bench_util.c — see bench_util.h.
 */
#include "bench_util.h"
#include "model_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
bu_param_value(const char *key, const char *val, gbml_param_value *v)
{
	char	   *end;
	double		num = strtod(val, &end);

	memset(v, 0, sizeof(*v));
	v->key = key;
	v->string = val;
	if (*val && *end == '\0')
	{
		v->kind = GBML_VALUE_NUMBER;
		v->number = num;
	}
	else if (strcmp(val, "true") == 0 || strcmp(val, "false") == 0)
	{
		v->kind = GBML_VALUE_BOOL;
		v->boolean = val[0] == 't';
	}
	else
		v->kind = GBML_VALUE_STRING;
}

bool
bu_param(char *arg, gbml_param_value *v)
{
	char	   *eq = strchr(arg, '=');

	if (eq == NULL)
	{
		fprintf(stderr, "expected key=value, got %s\n", arg);
		return false;
	}
	*eq = '\0';
	bu_param_value(arg, eq + 1, v);
	return true;
}

/* True when p holds only the line's end: optional blanks / "\r", then "\n" or nothing. */
static bool
at_line_end(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r')
		p++;
	return *p == '\0' || (*p == '\n' && p[1] == '\0');
}

int
bu_load_csv(const char *path, gbml_dataset *ds, gbml_env *env, int group_col, int label_col, int lead)
{
	FILE	   *f = fopen(path, "r");
	char	   *line = NULL;
	size_t		cap = 0;
	float	   *x = NULL;
	int			ncols = 0,
				d = 0,
				rc = 0;
	long long	lineno = 0;

	if (f == NULL)
	{
		fprintf(stderr, "cannot open %s\n", path);
		return -1;
	}
	while (rc == 0 && getline(&line, &cap, f) > 0)
	{
		char	   *p = line;
		gbml_row	row;

		if (++lineno == 1)
		{
			/* header: count the columns */
			ncols = 1;
			for (const char *c = line; *c; c++)
				ncols += *c == ',';
			d = ncols - lead;
			if (d < 1)
			{
				fprintf(stderr, "%s: %d columns; needs %d leading column(s) and at least one feature\n",
						path, ncols, lead);
				rc = -1;
				break;
			}
			x = malloc(sizeof(float) * (size_t) d);
			continue;
		}
		memset(&row, 0, sizeof(row));
		for (int col = 0; col < ncols; col++)
		{
			char	   *end;

			if (col == group_col)
				row.group = (int64_t) strtoll(p, &end, 10);
			else if (col == label_col)
				row.label = strtof(p, &end);
			else if (col < lead)
				(void) strtod(p, &end);
			else
				x[col - lead] = strtof(p, &end);
			if (end == p)
			{
				fprintf(stderr, "%s:%lld: column %d is not a number\n", path, lineno, col + 1);
				rc = -1;
				break;
			}
			p = end;
			if (col + 1 < ncols ? *p != ',' : !at_line_end(p))
			{
				fprintf(stderr, "%s:%lld: expected %d columns\n", path, lineno, ncols);
				rc = -1;
				break;
			}
			p++;
		}
		if (rc != 0)
			break;
		row.x = x;
		row.n_features = d;
		row.label_is_null = label_col < 0;
		row.group_is_null = group_col < 0;
		row.weight_is_null = true;
		if (gbml_dataset_append(ds, env, &row, label_col >= 0) != GBML_OK)
		{
			fprintf(stderr, "%s:%lld: %s\n", path, lineno, env->error);
			rc = -1;
		}
	}
	free(line);
	free(x);
	fclose(f);
	return rc;
}

uint64_t
bu_fnv1a(const uint8_t *p, size_t n)
{
	uint64_t	h = 1469598103934665603ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

char *
bu_meta_text(gbml_env *env, const uint8_t *model, size_t len)
{
	gbml_model_reader r;
	const uint8_t *data;
	size_t		dlen;
	char	   *text;

	if (gbml_model_open(&r, env, model, len) != GBML_OK || !gbml_model_find(&r, GBML_SECTION_META, &data, &dlen))
		return NULL;
	if ((text = calloc(dlen + 1, 1)) != NULL)
		memcpy(text, data, dlen);
	return text;
}
