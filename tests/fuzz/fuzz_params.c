/*
 * fuzz_params.c — the shared params parser, through
 * gbml_parse_training_params for every algorithm's table (common + own).
 *
 * Input encoding (also written by make_seeds.c):
 *   u8 algorithm selector (% 4: boost, kmeans, saga, mean)
 *   then up to MAX_VALUES records, until the input ends:
 *     u8 t: t & 7 = value kind, t & 0x80 = key given by index
 *     key : indexed: u8 index into the common table then the algorithm's
 *                    table (one past the end: an unknown key "?x")
 *           literal: u8 length + bytes (a C string: stops at a NUL)
 *     value by kind:
 *       0 null
 *       1 number: 8 bytes (a raw double: NaN, Inf, anything)
 *       2 string: u8 length + bytes
 *       3 bool: u8 (low bit)
 *       4 matrix: u8 rows (1 + b % 16), u8 cols (b % 17), then
 *                 rows*cols doubles, each u8 0xff + 8 raw bytes or u8 index
 *                 into the table of interesting numbers
 *       5 other (a JSON object or a non-numeric array)
 *       6 number: u8 index into the table of interesting numbers
 *       7 string: u8 index into the key's choices (else a fixed string)
 * The glue (src/pg/convert.c) builds matrices with rows >= 1 and cols >= 0;
 * the harness does the same.
 *
 * On success the harness also takes the input flags and writes the resolved
 * params as JSON (what the trainer stores in the model), then frees; the env
 * must hold nothing afterwards.
 */
#include "fuzz_common.h"

#include <math.h>

#include "algorithm.h"
#include "params.h"
#include "strbuf.h"

#define MAX_VALUES 24
#define MAX_STR 64

static const char *const algo_names[] = {"boost", "kmeans", "saga", "mean"};

static const double interesting[] = {
	0, 1, -1, 0.5, 2, 3, 10, 100, 0.9, 0.999, 1.5, -0.5, 1023, 1024, 1025, 1e6, 1e9, 1e12,
	9007199254740991.0, 9007199254740992.0, 9.3e18, -9.3e18, 1e300, -1e300, 1e-300, 5e-324,
	2147483647.0, 2147483648.0, -2147483649.0, 4294967296.0, 0.1, 1e-4, 64, 255, 256, 65536,
	NAN, INFINITY, -INFINITY, -0.0
};
#define N_INTERESTING ((int) (sizeof(interesting) / sizeof(interesting[0])))

static double
interesting_or_raw(fuzz_reader *r)
{
	uint8_t		b = fr_u8(r);

	if (b == 0xff)
		return fr_f64(r);
	return interesting[b % N_INTERESTING];
}

static const gbml_param_spec *
spec_at(const gbml_algorithm *algo, int idx, int *count)
{
	int			n = 0;

	for (const gbml_param_spec *s = gbml_common_param_specs; s->name; s++, n++)
		if (n == idx)
			return s;
	for (const gbml_param_spec *s = algo->params; s && s->name; s++, n++)
		if (n == idx)
			return s;
	if (count)
		*count = n;
	return NULL;
}

static const gbml_param_spec *
spec_named(const gbml_algorithm *algo, const char *name)
{
	for (const gbml_param_spec *s = gbml_common_param_specs; s->name; s++)
		if (strcmp(s->name, name) == 0)
			return s;
	for (const gbml_param_spec *s = algo->params; s && s->name; s++)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

typedef struct decoded
{
	gbml_param_value values[MAX_VALUES];
	char		keys[MAX_VALUES][MAX_STR + 1];
	char		strings[MAX_VALUES][MAX_STR + 1];
	double	   *matrices[MAX_VALUES];
	int			n;
} decoded;

static void
read_string(fuzz_reader *r, char *out)
{
	size_t		len = fr_u8(r) % (MAX_STR + 1);

	fr_bytes(r, out, len);
	out[len] = '\0';
}

static void
decode(fuzz_reader *r, const gbml_algorithm *algo, decoded *d)
{
	int			n_specs = 0;

	(void) spec_at(algo, -1, &n_specs);
	memset(d->matrices, 0, sizeof(d->matrices));
	d->n = 0;
	while (r->left > 0 && d->n < MAX_VALUES)
	{
		int			i = d->n++;
		gbml_param_value *v = &d->values[i];
		uint8_t		t = fr_u8(r);
		const gbml_param_spec *spec;

		memset(v, 0, sizeof(*v));
		if (t & 0x80)
		{
			const gbml_param_spec *s = spec_at(algo, fr_u8(r) % (n_specs + 1), NULL);

			snprintf(d->keys[i], sizeof(d->keys[i]), "%s", s ? s->name : "?x");
		}
		else
			read_string(r, d->keys[i]);
		v->key = d->keys[i];
		spec = spec_named(algo, v->key);
		switch (t & 7)
		{
			case 0:
				v->kind = GBML_VALUE_NULL;
				break;
			case 1:
				v->kind = GBML_VALUE_NUMBER;
				v->number = fr_f64(r);
				break;
			case 2:
				v->kind = GBML_VALUE_STRING;
				read_string(r, d->strings[i]);
				v->string = d->strings[i];
				break;
			case 3:
				v->kind = GBML_VALUE_BOOL;
				v->boolean = fr_u8(r) & 1;
				break;
			case 4:
				{
					int64_t		rows = 1 + fr_u8(r) % 16,
								cols = fr_u8(r) % 17;
					size_t		cells = (size_t) (rows * cols);
					double	   *m = malloc((cells ? cells : 1) * sizeof(double));

					if (m == NULL)
						abort();
					for (size_t c = 0; c < cells; c++)
						m[c] = interesting_or_raw(r);
					d->matrices[i] = m;
					v->kind = GBML_VALUE_MATRIX;
					v->matrix.values = m;
					v->matrix.rows = rows;
					v->matrix.cols = cols;
				}
				break;
			case 5:
				v->kind = GBML_VALUE_OTHER;
				break;
			case 6:
				v->kind = GBML_VALUE_NUMBER;
				v->number = interesting[fr_u8(r) % N_INTERESTING];
				break;
			case 7:
				{
					uint8_t		b = fr_u8(r);
					int			nc = 0;

					while (spec && spec->choices && spec->choices[nc])
						nc++;
					v->kind = GBML_VALUE_STRING;
					snprintf(d->strings[i], sizeof(d->strings[i]), "%s",
							 nc ? spec->choices[b % nc] : (b & 1) ? "" : "auto");
					v->string = d->strings[i];
				}
				break;
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static decoded d;
	fuzz_reader r = {data, size};
	const gbml_algorithm *algo;
	gbml_parsed_params pp;
	gbml_env	env;
	int			rc;

	if (size < 1)
		return 0;
	algo = gbml_algorithm_by_name(algo_names[fr_u8(&r) % 4]);
	FUZZ_CHECK(algo != NULL, "algorithm missing from the build");
	decode(&r, algo, &d);

	fuzz_env_init(&env);
	rc = gbml_parse_training_params(&env, algo, d.values, d.n, &pp);
	if (rc == GBML_OK)
	{
		const gbml_param_spec *tables[3] = {gbml_common_param_specs, algo->params, NULL};
		const void *structs[2] = {&pp.common, pp.algo_params};
		gbml_strbuf sb;
		bool		first = true;

		(void) gbml_input_flags(&pp);
		gbml_sb_init(&sb, &env);
		gbml_sb_append(&sb, "{", 1);
		gbml_params_to_json(&sb, tables, structs, &first);
		gbml_sb_append(&sb, "}", 1);
		FUZZ_CHECK(gbml_sb_status(&sb) == GBML_OK, "params JSON: %s", env.error);
		FUZZ_CHECK_JSON(sb.data, sb.len, "params JSON");
		gbml_sb_free(&sb);
	}
	else
		FUZZ_CHECK(rc < 0 && env.error[0] != '\0', "parse failed with rc %d and no message", rc);
	gbml_parsed_params_free(&env, &pp);
	fuzz_env_check_released(&env, rc == GBML_OK ? "parse+free" : "failed parse+free");

	for (int i = 0; i < d.n; i++)
		free(d.matrices[i]);
	return 0;
}
