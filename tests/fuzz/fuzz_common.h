/*
 * fuzz_common.h — shared by the libFuzzer harnesses in tests/fuzz.
 *
 * Every harness runs the engine through a malloc-backed gbml_env with a
 * memory budget, so an absurd size in the input is a budget error
 * (GBML_EBUDGET), never an OOM of the fuzzer process.  After each input the
 * harness checks the engine's own accounting: every byte allocated through
 * the env must have been given back (memory_used == 0).  LeakSanitizer
 * catches the same leaks; this check names the input's path more clearly.
 */
#ifndef GBML_FUZZ_COMMON_H
#define GBML_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

#define FUZZ_MEMORY_LIMIT ((size_t) 256 << 20)

static inline void
fuzz_env_init(gbml_env *env)
{
	gbml_env_init_malloc(env, 1);
	env->memory_limit = FUZZ_MEMORY_LIMIT;
}

/* A property the engine promises does not hold: report and abort (libFuzzer keeps the input). */
#define FUZZ_CHECK(cond, ...) do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			abort(); \
		} \
	} while (0)

static inline void
fuzz_env_check_released(const gbml_env *env, const char *where)
{
	FUZZ_CHECK(env->memory_used == 0, "%s: %zu bytes still held through the env (a leak)",
			   where, env->memory_used);
}

/* A little reader over the fuzzer's bytes: past the end it yields zeros. */
typedef struct fuzz_reader
{
	const uint8_t *p;
	size_t		left;
} fuzz_reader;

static inline uint8_t
fr_u8(fuzz_reader *r)
{
	if (r->left == 0)
		return 0;
	r->left--;
	return *r->p++;
}

static inline void
fr_bytes(fuzz_reader *r, void *out, size_t n)
{
	size_t		k = n < r->left ? n : r->left;

	memcpy(out, r->p, k);
	memset((uint8_t *) out + k, 0, n - k);
	r->p += k;
	r->left -= k;
}

static inline double
fr_f64(fuzz_reader *r)
{
	double		v;

	fr_bytes(r, &v, sizeof(v));
	return v;
}

/*
 * A strict JSON syntax check (RFC 8259; UTF-8 not checked): the engine's
 * JSON text (params, to_json, model info) goes to PostgreSQL's jsonb input,
 * which rejects anything else.  Also rejects \u0000, which jsonb refuses.
 * Returns NULL when valid, else a pointer near the first error.
 */
typedef struct fuzz_json
{
	const char *p;
	const char *end;
	int			depth;
} fuzz_json;

static bool fj_value(fuzz_json *j);
static inline const char *fuzz_json_error(const char *text, size_t len);

static inline void
fj_ws(fuzz_json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static inline bool
fj_lit(fuzz_json *j, const char *lit)
{
	size_t		n = strlen(lit);

	if ((size_t) (j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
		return false;
	j->p += n;
	return true;
}

static inline bool
fj_string(fuzz_json *j)
{
	if (j->p >= j->end || *j->p != '"')
		return false;
	j->p++;
	while (j->p < j->end)
	{
		unsigned char c = (unsigned char) *j->p++;

		if (c == '"')
			return true;
		if (c < 0x20)
			return false;
		if (c == '\\')
		{
			if (j->p >= j->end)
				return false;
			c = (unsigned char) *j->p++;
			if (c == 'u')
			{
				if (j->end - j->p < 4)
					return false;
				for (int i = 0; i < 4; i++)
					if (!((j->p[i] >= '0' && j->p[i] <= '9') || (j->p[i] >= 'a' && j->p[i] <= 'f') ||
						  (j->p[i] >= 'A' && j->p[i] <= 'F')))
						return false;
				if (memcmp(j->p, "0000", 4) == 0)
					return false;
				j->p += 4;
			}
			else if (!strchr("\"\\/bfnrt", c) || c == 0)
				return false;
		}
	}
	return false;
}

static inline bool
fj_digits(fuzz_json *j)
{
	const char *s = j->p;

	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s;
}

static inline bool
fj_number(fuzz_json *j)
{
	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;
	else if (j->p >= j->end || *j->p < '1' || *j->p > '9' || !fj_digits(j))
		return false;
	if (j->p < j->end && *j->p == '.')
	{
		j->p++;
		if (!fj_digits(j))
			return false;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E'))
	{
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (!fj_digits(j))
			return false;
	}
	return true;
}

static bool
fj_value(fuzz_json *j)
{
	bool		ok = false;

	fj_ws(j);
	if (j->p >= j->end || ++j->depth > 1000)
		return false;
	switch (*j->p)
	{
		case '{':
			j->p++;
			fj_ws(j);
			if (j->p < j->end && *j->p == '}')
			{
				j->p++;
				ok = true;
				break;
			}
			for (;;)
			{
				fj_ws(j);
				if (!fj_string(j))
					break;
				fj_ws(j);
				if (j->p >= j->end || *j->p++ != ':' || !fj_value(j))
					break;
				fj_ws(j);
				if (j->p < j->end && *j->p == ',')
				{
					j->p++;
					continue;
				}
				if (j->p < j->end && *j->p == '}')
				{
					j->p++;
					ok = true;
				}
				break;
			}
			break;
		case '[':
			j->p++;
			fj_ws(j);
			if (j->p < j->end && *j->p == ']')
			{
				j->p++;
				ok = true;
				break;
			}
			for (;;)
			{
				if (!fj_value(j))
					break;
				fj_ws(j);
				if (j->p < j->end && *j->p == ',')
				{
					j->p++;
					continue;
				}
				if (j->p < j->end && *j->p == ']')
				{
					j->p++;
					ok = true;
				}
				break;
			}
			break;
		case '"':
			ok = fj_string(j);
			break;
		case 't':
			ok = fj_lit(j, "true");
			break;
		case 'f':
			ok = fj_lit(j, "false");
			break;
		case 'n':
			ok = fj_lit(j, "null");
			break;
		default:
			ok = fj_number(j);
			break;
	}
	j->depth--;
	return ok;
}

/* NULL if text[0..len) is one valid JSON value, else where it went wrong. */
static inline const char *
fuzz_json_error(const char *text, size_t len)
{
	fuzz_json	j = {text, text + len, 0};

	FUZZ_CHECK(text != NULL, "JSON text is NULL");
	if (fj_value(&j))
	{
		fj_ws(&j);
		if (j.p == j.end)
			return NULL;
	}
	return j.p;
}

#define FUZZ_CHECK_JSON(text, len, what) do { \
		const char *e_ = fuzz_json_error((text), (len)); \
		FUZZ_CHECK(e_ == NULL, "%s is not valid JSON near offset %td: %.*s", (what), \
				   e_ ? e_ - (const char *) (text) : 0, (int) ((len) < 300 ? (len) : 300), (const char *) (text)); \
	} while (0)

#endif
