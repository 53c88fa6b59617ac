/*
 * fuzz_model.c — the model loader of every algorithm, through the scorer.
 *
 * Input: one control byte, then the model bytes (container: model_format.h).
 *   control & 0x80: use the bytes as they are (exercises the container's
 *                   own checks: magic, version, length, CRC-32C);
 *   otherwise      the harness sets payload_length and recomputes the
 *                   CRC-32C, so mutated sections reach each algorithm's
 *                   section parsers instead of dying at the checksum;
 *   control & 0x07: when non-zero, overrides the header's algorithm id
 *                   (1 mean, 2 boost, 3 kmeans, 4 saga, 5..7 unknown), so
 *                   one algorithm's sections are fed to another's loader.
 *
 * When the model loads: predict (every output kind the model answers, on
 * feature vectors with zeros, mixed extremes, NaN/Inf and bytes from the
 * input; and once with the wrong feature count), to_json, importance and
 * gbml_model_info_json; then everything is freed and the env must hold
 * nothing.  Importance must be non-negative and sum to 1 or be all 0
 * (algorithm.h).
 */
#include "fuzz_common.h"

#include <math.h>

#include "algorithm.h"
#include "model_format.h"
#include "strbuf.h"

static void
fix_header(uint8_t *m, size_t len)
{
	uint64_t	plen = len - GBML_MODEL_HEADER_SIZE;
	uint32_t	crc;

	memcpy(m + 16, &plen, 8);
	crc = gbml_crc32c(0, m, 12);
	crc = gbml_crc32c(crc, m + 16, 8);
	crc = gbml_crc32c(crc, m + GBML_MODEL_HEADER_SIZE, len - GBML_MODEL_HEADER_SIZE);
	memcpy(m + 12, &crc, 4);
}

static void
fill_vector(float *x, int n, int kind, const uint8_t *src, size_t src_len)
{
	static const float mixed[] = {0.5f, -1.0f, NAN, 1e30f, -INFINITY, 3.0f, 1e-40f, INFINITY, -0.0f, 7.25f};

	for (int j = 0; j < n; j++)
	{
		switch (kind)
		{
			case 0:
				x[j] = 0;
				break;
			case 1:
				x[j] = mixed[j % (int) (sizeof(mixed) / sizeof(mixed[0]))];
				break;
			case 2:
				x[j] = NAN;
				break;
			default:
				if (src_len >= 4)
				{
					size_t		off = ((size_t) j * 4) % (src_len - 3);

					memcpy(&x[j], src + off, 4);
				}
				else
					x[j] = (float) j;
				break;
		}
	}
}

static void
exercise(gbml_scorer *s, gbml_env *env, const uint8_t *bytes, size_t len)
{
	static const gbml_output kinds[] = {GBML_OUT_SCORE, GBML_OUT_PROBA, GBML_OUT_CLUSTER, GBML_OUT_DISTANCE};
	int			n = s->n_features;
	float	   *x = malloc(((size_t) n + 1) * sizeof(float));
	double		out;
	gbml_strbuf sb;

	FUZZ_CHECK(n >= 1 && n <= GBML_MAX_FEATURES, "loaded model has %d features", n);
	FUZZ_CHECK(x != NULL, "malloc");
	for (int v = 0; v < 4; v++)
	{
		fill_vector(x, n, v, bytes + GBML_MODEL_HEADER_SIZE, len - GBML_MODEL_HEADER_SIZE);
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		{
			int			rc = gbml_scorer_predict(s, env, x, n, kinds[k], &out);

			/*
			 * predict_proba refuses a model with classes (one probability per
			 * class, not one) and one whose loss gives none (a regression)
			 */
			if ((s->algo->outputs & kinds[k]) && (kinds[k] != GBML_OUT_PROBA || s->probability))
				FUZZ_CHECK(rc == GBML_OK, "predict kind %d failed: %s", (int) kinds[k], env->error);
			else
				FUZZ_CHECK(rc == GBML_EUNSUPPORTED, "predict kind %d of %s: rc %d", (int) kinds[k],
						   s->algo->name, rc);
		}
		if (s->n_classes > 0)
		{
			/* every class's probability: in [0, 1], the most probable one is predict's class */
			double	   *prob = malloc(sizeof(double) * (size_t) s->n_classes);
			int			best = 0;
			bool		any_nan = false;

			FUZZ_CHECK(prob != NULL, "malloc");
			FUZZ_CHECK(gbml_scorer_classes(s, env, x, n, prob) == GBML_OK, "predict_classes failed: %s", env->error);
			FUZZ_CHECK(gbml_scorer_predict(s, env, x, n, GBML_OUT_SCORE, &out) == GBML_OK, "predict failed");
			for (int c = 0; c < s->n_classes; c++)
			{
				FUZZ_CHECK(isnan(prob[c]) || (prob[c] >= 0 && prob[c] <= 1), "class %d probability %g", c, prob[c]);
				any_nan |= isnan(prob[c]);
				if (prob[c] > prob[best])
					best = c;
			}
			FUZZ_CHECK(out >= 0 && out < s->n_classes, "predicted class %g of %d", out, s->n_classes);
			FUZZ_CHECK(any_nan || prob[(int) out] == prob[best], "predicted class %g is not the most probable", out);
			free(prob);
		}
	}
	/* the wrong feature count is an error, not a read past the vector */
	FUZZ_CHECK(gbml_scorer_predict(s, env, x, n + 1, GBML_OUT_SCORE, &out) == GBML_EINVAL, "n + 1 features accepted");
	free(x);

	if (s->algo->to_json)
	{
		gbml_sb_init(&sb, env);
		gbml_sb_append(&sb, "{", 1);
		if (s->algo->to_json(s->handle, &sb) == GBML_OK && gbml_sb_status(&sb) == GBML_OK)
		{
			gbml_sb_append(&sb, "}", 1);
			FUZZ_CHECK(gbml_sb_status(&sb) == GBML_OK, "to_json buffer: %s", env->error);
			FUZZ_CHECK_JSON(sb.data, sb.len, "to_json");
		}
		gbml_sb_free(&sb);
	}
	if (s->algo->importance)
	{
		double	   *imp = malloc((size_t) n * sizeof(double));

		FUZZ_CHECK(imp != NULL, "malloc");
		if (s->algo->importance(s->handle, imp) == GBML_OK)
		{
			double		total = 0;

			for (int j = 0; j < n; j++)
			{
				FUZZ_CHECK(imp[j] >= 0 && isfinite(imp[j]), "%s importance[%d] = %g", s->algo->name, j, imp[j]);
				total += imp[j];
			}
			FUZZ_CHECK(total == 0 || fabs(total - 1) < 1e-6, "%s importances sum to %.17g", s->algo->name, total);
		}
		free(imp);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gbml_env	env;
	gbml_scorer s;
	gbml_strbuf info;
	uint8_t    *m;
	uint8_t		control;
	size_t		len;
	int			rc;
	static int	verbose = -1;	/* FUZZ_VERBOSE set: print each load's result */

	if (size < 1)
		return 0;
	control = data[0];
	len = size - 1;
	/* an exact-size copy, so ASan sees any read past the model's end */
	m = malloc(len ? len : 1);
	if (m == NULL)
		return 0;
	memcpy(m, data + 1, len);
	if (len >= GBML_MODEL_HEADER_SIZE)
	{
		if (control & 0x07)
		{
			uint16_t	algo = control & 0x07;

			memcpy(m + 6, &algo, 2);
		}
		if (!(control & 0x80))
			fix_header(m, len);
	}

	fuzz_env_init(&env);
	rc = gbml_scorer_load(&s, &env, m, len);
	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (verbose)
		fprintf(stderr, "load: rc %d%s%s\n", rc, rc ? ": " : "", rc ? env.error : "");
	if (rc == GBML_OK)
	{
		FUZZ_CHECK(s.algo != NULL, "loaded without an algorithm");
		exercise(&s, &env, m, len);
		gbml_scorer_free(&s, &env);
	}
	else
	{
		FUZZ_CHECK(rc < 0 && env.error[0] != '\0', "load failed with rc %d and no message", rc);
	}
	fuzz_env_check_released(&env, rc == GBML_OK ? "load+unload" : "failed load");

	gbml_sb_init(&info, &env);
	/*
	 * Not checked as JSON: model_info_json copies the PRMS and META sections
	 * as they are (it checks only their braces), so a section mutated under a
	 * valid CRC gives invalid JSON, which jsonb input then rejects cleanly.
	 */
	(void) gbml_model_info_json(&env, m, len, &info);
	gbml_sb_free(&info);
	fuzz_env_check_released(&env, "model_info_json");

	free(m);
	return 0;
}
