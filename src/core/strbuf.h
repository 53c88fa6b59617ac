/*
 * strbuf.h — a growable byte buffer for model payloads and JSON text.
 *
 * Allocation failures are sticky: after one, every append is a no-op and
 * `failed` stays set, so callers check once at the end instead of after every
 * append.  The JSON helpers write compact, valid JSON (non-finite numbers
 * become null) that PostgreSQL's jsonb input accepts as is.
 */
#ifndef GBML_STRBUF_H
#define GBML_STRBUF_H

#include "env.h"

typedef struct gbml_strbuf
{
	gbml_env   *env;
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		failed;
} gbml_strbuf;

void		gbml_sb_init(gbml_strbuf *sb, gbml_env *env);
void		gbml_sb_free(gbml_strbuf *sb);
void		gbml_sb_append(gbml_strbuf *sb, const void *data, size_t len);
void		gbml_sb_printf(gbml_strbuf *sb, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));
void		gbml_sb_u32(gbml_strbuf *sb, uint32_t v);
void		gbml_sb_u64(gbml_strbuf *sb, uint64_t v);
void		gbml_sb_f32(gbml_strbuf *sb, float v);
void		gbml_sb_f64(gbml_strbuf *sb, double v);
/* Returns the status of the buffer: GBML_OK or the failure code. */
int			gbml_sb_status(const gbml_strbuf *sb);

/* JSON pieces. */
void		gbml_sb_json_string(gbml_strbuf *sb, const char *s);
void		gbml_sb_json_number(gbml_strbuf *sb, double v);
/* [v0,v1,...] with non-finite values as null */
void		gbml_sb_json_doubles(gbml_strbuf *sb, const double *v, int64_t n);
/* "key": — with a leading comma unless *first */
void		gbml_sb_json_key(gbml_strbuf *sb, const char *key, bool *first);

/* Bounded little-endian reader for validating model sections. */
typedef struct gbml_cursor
{
	const uint8_t *p;
	const uint8_t *end;
	bool		ok;
} gbml_cursor;

void		gbml_cursor_init(gbml_cursor *c, const void *data, size_t len);
uint32_t	gbml_cursor_u32(gbml_cursor *c);
uint64_t	gbml_cursor_u64(gbml_cursor *c);
float		gbml_cursor_f32(gbml_cursor *c);
double		gbml_cursor_f64(gbml_cursor *c);
/* Returns a pointer to n*elem bytes inside the buffer (unaligned!), or NULL. */
const void *gbml_cursor_bytes(gbml_cursor *c, size_t n, size_t elem);
/* Copies n floats out (handles alignment); false if out of bounds. */
bool		gbml_cursor_f32_array(gbml_cursor *c, float *out, size_t n);
bool		gbml_cursor_f64_array(gbml_cursor *c, double *out, size_t n);
size_t		gbml_cursor_remaining(const gbml_cursor *c);

#endif
