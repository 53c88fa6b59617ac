/*
 * strbuf.c — growable buffer, JSON writers and the bounded reader.
 * All multi-byte values are little-endian on disk (we only build on
 * little-endian hosts; the static assert below keeps that honest).
 */
#include "strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "gbml model format assumes a little-endian host");

void
gbml_sb_init(gbml_strbuf *sb, gbml_env *env)
{
	memset(sb, 0, sizeof(*sb));
	sb->env = env;
}

void
gbml_sb_free(gbml_strbuf *sb)
{
	gbml_free(sb->env, sb->data);
	sb->data = NULL;
	sb->len = sb->cap = 0;
}

static bool
sb_reserve(gbml_strbuf *sb, size_t extra)
{
	size_t		need;
	size_t		cap;
	char	   *p;

	if (sb->failed)
		return false;
	if (extra > SIZE_MAX / 2 - sb->len)
	{
		sb->failed = true;
		gbml_error(sb->env, GBML_ENOMEM, "buffer too large");
		return false;
	}
	need = sb->len + extra + 1;
	if (need <= sb->cap)
		return true;
	cap = sb->cap ? sb->cap : 256;
	while (cap < need)
		cap *= 2;
	p = gbml_realloc(sb->env, sb->data, cap);
	if (p == NULL)
	{
		sb->failed = true;
		return false;
	}
	sb->data = p;
	sb->cap = cap;
	return true;
}

void
gbml_sb_append(gbml_strbuf *sb, const void *data, size_t len)
{
	if (!sb_reserve(sb, len))
		return;
	if (len)
		memcpy(sb->data + sb->len, data, len);
	sb->len += len;
	sb->data[sb->len] = '\0';
}

void
gbml_sb_printf(gbml_strbuf *sb, const char *fmt,...)
{
	va_list		ap;
	char		small[256];
	int			n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t) n < sizeof(small))
	{
		gbml_sb_append(sb, small, (size_t) n);
		return;
	}
	if (!sb_reserve(sb, (size_t) n))
		return;
	va_start(ap, fmt);
	vsnprintf(sb->data + sb->len, (size_t) n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t) n;
}

void
gbml_sb_u32(gbml_strbuf *sb, uint32_t v)
{
	gbml_sb_append(sb, &v, 4);
}

void
gbml_sb_u64(gbml_strbuf *sb, uint64_t v)
{
	gbml_sb_append(sb, &v, 8);
}

void
gbml_sb_f32(gbml_strbuf *sb, float v)
{
	gbml_sb_append(sb, &v, 4);
}

void
gbml_sb_f64(gbml_strbuf *sb, double v)
{
	gbml_sb_append(sb, &v, 8);
}

int
gbml_sb_status(const gbml_strbuf *sb)
{
	return sb->failed ? GBML_ENOMEM : GBML_OK;
}

void
gbml_sb_json_string(gbml_strbuf *sb, const char *s)
{
	gbml_sb_append(sb, "\"", 1);
	for (; *s; s++)
	{
		unsigned char ch = (unsigned char) *s;

		if (ch == '"' || ch == '\\')
		{
			char		esc[2] = {'\\', (char) ch};

			gbml_sb_append(sb, esc, 2);
		}
		else if (ch < 0x20)
			gbml_sb_printf(sb, "\\u%04x", ch);
		else
			gbml_sb_append(sb, s, 1);
	}
	gbml_sb_append(sb, "\"", 1);
}

void
gbml_sb_json_number(gbml_strbuf *sb, double v)
{
	if (!isfinite(v))
		gbml_sb_append(sb, "null", 4);
	else if (v == floor(v) && fabs(v) < 1e15)
		gbml_sb_printf(sb, "%.0f", v);
	else
		gbml_sb_printf(sb, "%.17g", v);
}

void
gbml_sb_json_doubles(gbml_strbuf *sb, const double *v, int64_t n)
{
	gbml_sb_append(sb, "[", 1);
	for (int64_t i = 0; i < n; i++)
	{
		if (i)
			gbml_sb_append(sb, ",", 1);
		gbml_sb_json_number(sb, v[i]);
	}
	gbml_sb_append(sb, "]", 1);
}

void
gbml_sb_json_key(gbml_strbuf *sb, const char *key, bool *first)
{
	if (!*first)
		gbml_sb_append(sb, ",", 1);
	*first = false;
	gbml_sb_json_string(sb, key);
	gbml_sb_append(sb, ":", 1);
}

void
gbml_cursor_init(gbml_cursor *c, const void *data, size_t len)
{
	c->p = data;
	c->end = c->p + len;
	c->ok = true;
}

size_t
gbml_cursor_remaining(const gbml_cursor *c)
{
	return c->ok ? (size_t) (c->end - c->p) : 0;
}

const void *
gbml_cursor_bytes(gbml_cursor *c, size_t n, size_t elem)
{
	const void *r;

	if (!c->ok || (elem != 0 && n > SIZE_MAX / elem) || n * elem > (size_t) (c->end - c->p))
	{
		c->ok = false;
		return NULL;
	}
	r = c->p;
	c->p += n * elem;
	return r;
}

uint32_t
gbml_cursor_u32(gbml_cursor *c)
{
	uint32_t	v = 0;
	const void *p = gbml_cursor_bytes(c, 1, 4);

	if (p)
		memcpy(&v, p, 4);
	return v;
}

uint64_t
gbml_cursor_u64(gbml_cursor *c)
{
	uint64_t	v = 0;
	const void *p = gbml_cursor_bytes(c, 1, 8);

	if (p)
		memcpy(&v, p, 8);
	return v;
}

float
gbml_cursor_f32(gbml_cursor *c)
{
	float		v = 0;
	const void *p = gbml_cursor_bytes(c, 1, 4);

	if (p)
		memcpy(&v, p, 4);
	return v;
}

double
gbml_cursor_f64(gbml_cursor *c)
{
	double		v = 0;
	const void *p = gbml_cursor_bytes(c, 1, 8);

	if (p)
		memcpy(&v, p, 8);
	return v;
}

bool
gbml_cursor_f32_array(gbml_cursor *c, float *out, size_t n)
{
	const void *p = gbml_cursor_bytes(c, n, 4);

	if (p == NULL)
		return false;
	memcpy(out, p, n * 4);
	return true;
}

bool
gbml_cursor_f64_array(gbml_cursor *c, double *out, size_t n)
{
	const void *p = gbml_cursor_bytes(c, n, 8);

	if (p == NULL)
		return false;
	memcpy(out, p, n * 8);
	return true;
}
