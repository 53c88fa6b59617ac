/*
 * params.c — the shared parameter parser: defaults, type and range checks,
 * unknown-key errors that list what is accepted, and the JSON record of the
 * resolved values that goes into every model.
 */
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void *
field_ptr(void *base, const gbml_param_spec *spec)
{
	return (char *) base + spec->offset;
}

static const void *
field_cptr(const void *base, const gbml_param_spec *spec)
{
	return (const char *) base + spec->offset;
}

static int
choice_index(const gbml_param_spec *spec, const char *s)
{
	for (int i = 0; spec->choices && spec->choices[i]; i++)
		if (strcmp(spec->choices[i], s) == 0)
			return i;
	return -1;
}

static void
append_choices(char *buf, size_t len, const gbml_param_spec *spec)
{
	size_t		used = strlen(buf);

	for (int i = 0; spec->choices && spec->choices[i]; i++)
	{
		int			n = snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "", spec->choices[i]);

		if (n < 0 || (size_t) n >= len - used)
			break;
		used += (size_t) n;
	}
}

static int
set_defaults(gbml_env *env, const gbml_param_spec *table, void *out)
{
	for (const gbml_param_spec *s = table; s->name; s++)
	{
		void	   *f = field_ptr(out, s);

		switch (s->type)
		{
			case GBML_PARAM_INT:
				*(int64_t *) f = (int64_t) s->default_number;
				break;
			case GBML_PARAM_REAL:
				*(double *) f = s->default_number;
				break;
			case GBML_PARAM_BOOL:
				*(bool *) f = s->default_number != 0;
				break;
			case GBML_PARAM_ENUM:
				*(int *) f = (int) s->default_number;
				break;
			case GBML_PARAM_STRING:
				*(char **) f = NULL;
				if (s->default_string && (*(char **) f = gbml_strdup(env, s->default_string)) == NULL)
					return env->error_code;
				break;
			case GBML_PARAM_NAMES:
				memset(f, 0, sizeof(gbml_names));
				break;
			case GBML_PARAM_ENUM_OR_MATRIX:
				{
					gbml_enum_or_matrix *em = f;

					memset(em, 0, sizeof(*em));
					em->choice = (int) s->default_number;
				}
				break;
		}
	}
	return GBML_OK;
}

static const char *
kind_name(gbml_value_kind k)
{
	switch (k)
	{
		case GBML_VALUE_NULL:
			return "null";
		case GBML_VALUE_NUMBER:
			return "a number";
		case GBML_VALUE_STRING:
			return "a string";
		case GBML_VALUE_BOOL:
			return "a boolean";
		case GBML_VALUE_MATRIX:
			return "an array";
		case GBML_VALUE_NAMES:
			return "an array of strings";
		default:
			return "an object or non-numeric array";
	}
}

static int
range_error(gbml_env *env, const char *context, const gbml_param_spec *s, const gbml_param_value *v)
{
	const char *what = s->type == GBML_PARAM_INT ? "an integer" : "a number";

	if (v->kind != GBML_VALUE_NUMBER)
		return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be %s between %g and %g, got %s",
						  context, s->name, what, s->min, s->max, kind_name(v->kind));
	return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be %s between %g and %g, got %g",
					  context, s->name, what, s->min, s->max, v->number);
}

static void
free_names(gbml_env *env, gbml_names *l)
{
	for (int i = 0; i < l->n; i++)
		gbml_free(env, l->names[i]);
	gbml_free(env, l->names);
	l->names = NULL;
	l->n = 0;
}

/* A list of names from an array of strings, or one string as a list of one. */
static int
set_names(gbml_env *env, const char *context, const gbml_param_spec *s, gbml_names *l, const gbml_param_value *v)
{
	const char *one = v->kind == GBML_VALUE_STRING ? v->string : NULL;
	int			n = one ? 1 : v->n_names;

	if (v->kind != GBML_VALUE_NAMES && v->kind != GBML_VALUE_STRING &&
		!(v->kind == GBML_VALUE_MATRIX && v->matrix.rows * v->matrix.cols == 0))
		return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be an array of column names, got %s",
						  context, s->name, kind_name(v->kind));
	if (v->kind == GBML_VALUE_MATRIX)
		n = 0;					/* [] */
	free_names(env, l);
	if (n > 0 && (l->names = gbml_alloc0(env, sizeof(char *) * (size_t) n)) == NULL)
		return env->error_code;
	for (int i = 0; i < n; i++)
	{
		if ((l->names[i] = gbml_strdup(env, one ? one : v->names[i])) == NULL)
			return env->error_code;
		l->n = i + 1;
	}
	return GBML_OK;
}

static int
set_value(gbml_env *env, const char *context, const gbml_param_spec *s, void *out,
		  const gbml_param_value *v)
{
	void	   *f = field_ptr(out, s);
	char		choices[400] = "";

	switch (s->type)
	{
		case GBML_PARAM_INT:
			if (v->kind != GBML_VALUE_NUMBER || !isfinite(v->number) || v->number != floor(v->number) ||
				v->number < s->min || v->number > s->max)
				return range_error(env, context, s, v);
			*(int64_t *) f = (int64_t) v->number;
			return GBML_OK;
		case GBML_PARAM_REAL:
			if (v->kind != GBML_VALUE_NUMBER || !isfinite(v->number) ||
				v->number < s->min || v->number > s->max)
				return range_error(env, context, s, v);
			*(double *) f = v->number;
			return GBML_OK;
		case GBML_PARAM_BOOL:
			if (v->kind != GBML_VALUE_BOOL)
				return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be true or false, got %s",
								  context, s->name, kind_name(v->kind));
			*(bool *) f = v->boolean;
			return GBML_OK;
		case GBML_PARAM_ENUM:
			{
				int			idx = v->kind == GBML_VALUE_STRING ? choice_index(s, v->string) : -1;

				if (idx < 0)
				{
					append_choices(choices, sizeof(choices), s);
					if (v->kind == GBML_VALUE_STRING)
						return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be one of %s, got \"%s\"",
										  context, s->name, choices, v->string);
					return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be one of %s, got %s",
									  context, s->name, choices, kind_name(v->kind));
				}
				*(int *) f = idx;
				return GBML_OK;
			}
		case GBML_PARAM_NAMES:
			return set_names(env, context, s, f, v);
		case GBML_PARAM_STRING:
			if (v->kind != GBML_VALUE_STRING)
				return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be a string, got %s",
								  context, s->name, kind_name(v->kind));
			gbml_free(env, *(char **) f);
			if ((*(char **) f = gbml_strdup(env, v->string)) == NULL)
				return env->error_code;
			return GBML_OK;
		case GBML_PARAM_ENUM_OR_MATRIX:
			{
				gbml_enum_or_matrix *em = f;

				if (v->kind == GBML_VALUE_MATRIX)
				{
					size_t		n = (size_t) v->matrix.rows * (size_t) v->matrix.cols;

					for (size_t i = 0; i < n; i++)
						if (!isfinite(v->matrix.values[i]))
							return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" has a non-finite value",
											  context, s->name);
					em->choice = -1;
					em->matrix.rows = v->matrix.rows;
					em->matrix.cols = v->matrix.cols;
					em->matrix.values = gbml_alloc_array(env, n ? n : 1, sizeof(double));
					if (em->matrix.values == NULL)
						return env->error_code;
					memcpy(em->matrix.values, v->matrix.values, n * sizeof(double));
					return GBML_OK;
				}
				if (v->kind == GBML_VALUE_STRING && choice_index(s, v->string) >= 0)
				{
					em->choice = choice_index(s, v->string);
					return GBML_OK;
				}
				append_choices(choices, sizeof(choices), s);
				return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" must be one of %s or an array of arrays of numbers",
								  context, s->name, choices);
			}
	}
	return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" has an unknown type", context, s->name);
}

int
gbml_params_parse(gbml_env *env, const char *context,
				  const gbml_param_spec *const *tables, void *const *outs,
				  const gbml_param_value *values, int n_values)
{
	int			rc;

	for (int t = 0; tables[t]; t++)
		if ((rc = set_defaults(env, tables[t], outs[t])) != GBML_OK)
			return rc;

	for (int i = 0; i < n_values; i++)
	{
		const gbml_param_value *v = &values[i];
		bool		found = false;

		for (int j = 0; j < i; j++)
			if (strcmp(values[j].key, v->key) == 0)
				return gbml_error(env, GBML_EINVAL, "%s: parameter \"%s\" is given twice", context, v->key);

		for (int t = 0; tables[t] && !found; t++)
			for (const gbml_param_spec *s = tables[t]; s->name; s++)
				if (strcmp(s->name, v->key) == 0)
				{
					found = true;
					/* JSON null means "the default" */
					if (v->kind != GBML_VALUE_NULL &&
						(rc = set_value(env, context, s, outs[t], v)) != GBML_OK)
						return rc;
					break;
				}
		if (!found)
		{
			char		accepted[1500] = "";
			size_t		used = 0;

			for (int t = 0; tables[t]; t++)
				for (const gbml_param_spec *s = tables[t]; s->name; s++)
				{
					int			n = snprintf(accepted + used, sizeof(accepted) - used, "%s%s",
											 used ? ", " : "", s->name);

					if (n < 0 || (size_t) n >= sizeof(accepted) - used)
						break;
					used += (size_t) n;
				}
			return gbml_error(env, GBML_EINVAL, "%s: unknown parameter \"%s\"; accepted: %s",
							  context, v->key, accepted);
		}
	}
	return GBML_OK;
}

void
gbml_params_free(gbml_env *env, const gbml_param_spec *const *tables, void *const *outs)
{
	for (int t = 0; tables[t]; t++)
		for (const gbml_param_spec *s = tables[t]; s->name; s++)
		{
			void	   *f = field_ptr(outs[t], s);

			if (s->type == GBML_PARAM_STRING)
			{
				gbml_free(env, *(char **) f);
				*(char **) f = NULL;
			}
			else if (s->type == GBML_PARAM_NAMES)
				free_names(env, f);
			else if (s->type == GBML_PARAM_ENUM_OR_MATRIX)
			{
				gbml_free(env, ((gbml_enum_or_matrix *) f)->matrix.values);
				((gbml_enum_or_matrix *) f)->matrix.values = NULL;
			}
		}
}

void
gbml_params_to_json(gbml_strbuf *sb, const gbml_param_spec *const *tables,
					const void *const *structs, bool *first)
{
	for (int t = 0; tables[t]; t++)
		for (const gbml_param_spec *s = tables[t]; s->name; s++)
		{
			const void *f = field_cptr(structs[t], s);

			gbml_sb_json_key(sb, s->name, first);
			switch (s->type)
			{
				case GBML_PARAM_INT:
					gbml_sb_printf(sb, "%lld", (long long) *(const int64_t *) f);
					break;
				case GBML_PARAM_REAL:
					gbml_sb_json_number(sb, *(const double *) f);
					break;
				case GBML_PARAM_BOOL:
					gbml_sb_printf(sb, "%s", *(const bool *) f ? "true" : "false");
					break;
				case GBML_PARAM_ENUM:
					gbml_sb_json_string(sb, s->choices[*(const int *) f]);
					break;
				case GBML_PARAM_STRING:
					if (*(char *const *) f)
						gbml_sb_json_string(sb, *(char *const *) f);
					else
						gbml_sb_append(sb, "null", 4);
					break;
				case GBML_PARAM_NAMES:
					{
						const gbml_names *l = f;

						gbml_sb_append(sb, "[", 1);
						for (int i = 0; i < l->n; i++)
						{
							if (i)
								gbml_sb_append(sb, ",", 1);
							gbml_sb_json_string(sb, l->names[i]);
						}
						gbml_sb_append(sb, "]", 1);
					}
					break;
				case GBML_PARAM_ENUM_OR_MATRIX:
					{
						const gbml_enum_or_matrix *em = f;

						if (em->choice >= 0)
							gbml_sb_json_string(sb, s->choices[em->choice]);
						else
						{
							gbml_sb_append(sb, "[", 1);
							for (int64_t r = 0; r < em->matrix.rows; r++)
							{
								gbml_sb_append(sb, r ? ",[" : "[", r ? 2 : 1);
								for (int64_t c = 0; c < em->matrix.cols; c++)
								{
									if (c)
										gbml_sb_append(sb, ",", 1);
									gbml_sb_json_number(sb, em->matrix.values[r * em->matrix.cols + c]);
								}
								gbml_sb_append(sb, "]", 1);
							}
							gbml_sb_append(sb, "]", 1);
						}
					}
					break;
			}
		}
}
