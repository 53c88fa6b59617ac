/*
 * model_format.c — CRC-32C, the section writer and the validating reader of
 * the model container (layout in model_format.h).
 */
#include "model_format.h"

#include <string.h>

static uint32_t crc32c_table[8][256];
static bool crc32c_ready;

/* Slicing-by-8 tables for the Castagnoli polynomial (reflected 0x82F63B78). */
static void
crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++)
	{
		uint32_t	c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc32c_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc32c_table[t][i] = (crc32c_table[t - 1][i] >> 8) ^ crc32c_table[0][crc32c_table[t - 1][i] & 0xff];
	crc32c_ready = true;
}

uint32_t
gbml_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!crc32c_ready)
		crc32c_init();
	crc = ~crc;
	while (len >= 8)
	{
		uint64_t	w;

		memcpy(&w, p, 8);
		w ^= crc;
		crc = crc32c_table[7][w & 0xff] ^ crc32c_table[6][(w >> 8) & 0xff] ^
			crc32c_table[5][(w >> 16) & 0xff] ^ crc32c_table[4][(w >> 24) & 0xff] ^
			crc32c_table[3][(w >> 32) & 0xff] ^ crc32c_table[2][(w >> 40) & 0xff] ^
			crc32c_table[1][(w >> 48) & 0xff] ^ crc32c_table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

/* CRC-32C over the header (all but the checksum field itself) and the payload. */
static uint32_t
model_checksum(const uint8_t *bytes, size_t payload_len)
{
	uint32_t	crc = gbml_crc32c(0, bytes, 12);

	crc = gbml_crc32c(crc, bytes + 16, 8);
	return gbml_crc32c(crc, bytes + GBML_MODEL_HEADER_SIZE, payload_len);
}

void
gbml_model_writer_init(gbml_model_writer *w, gbml_env *env)
{
	gbml_sb_init(&w->payload, env);
}

void
gbml_model_writer_free(gbml_model_writer *w)
{
	gbml_sb_free(&w->payload);
}

void
gbml_model_add_section(gbml_model_writer *w, uint32_t tag, const void *data, size_t len)
{
	gbml_sb_u32(&w->payload, tag);
	gbml_sb_u64(&w->payload, (uint64_t) len);
	gbml_sb_append(&w->payload, data, len);
}

void
gbml_model_add_sb(gbml_model_writer *w, uint32_t tag, const gbml_strbuf *body)
{
	if (body->failed)
		w->payload.failed = true;
	gbml_model_add_section(w, tag, body->data ? body->data : "", body->len);
}

int
gbml_model_finish(gbml_model_writer *w, uint16_t algorithm, uint32_t flags,
				  uint8_t **bytes, size_t *len)
{
	gbml_env   *env = w->payload.env;
	size_t		payload_len = w->payload.len;
	uint8_t    *out;
	uint16_t	version = GBML_MODEL_FORMAT_VERSION;
	uint32_t	crc;
	uint64_t	plen = payload_len;

	if (w->payload.failed)
	{
		gbml_model_writer_free(w);
		return env->error_code ? env->error_code : GBML_ENOMEM;
	}
	out = gbml_alloc(env, GBML_MODEL_HEADER_SIZE + payload_len);
	if (out == NULL)
	{
		gbml_model_writer_free(w);
		return env->error_code;
	}
	memcpy(out, GBML_MODEL_MAGIC, 4);
	memcpy(out + 4, &version, 2);
	memcpy(out + 6, &algorithm, 2);
	memcpy(out + 8, &flags, 4);
	memcpy(out + 16, &plen, 8);
	if (payload_len)
		memcpy(out + GBML_MODEL_HEADER_SIZE, w->payload.data, payload_len);
	crc = model_checksum(out, payload_len);
	memcpy(out + 12, &crc, 4);
	gbml_model_writer_free(w);
	*bytes = out;
	*len = GBML_MODEL_HEADER_SIZE + payload_len;
	return GBML_OK;
}

int
gbml_model_open(gbml_model_reader *r, gbml_env *env, const void *bytes, size_t len)
{
	const uint8_t *b = bytes;
	uint32_t	crc;
	uint64_t	plen;
	gbml_cursor cur;
	const uint8_t *data;
	size_t		nlen;

	memset(r, 0, sizeof(*r));
	if (len < GBML_MODEL_HEADER_SIZE)
		return gbml_error(env, GBML_ECORRUPT, "model is too short (%zu bytes) to be a gbml model", len);
	if (memcmp(b, GBML_MODEL_MAGIC, 4) != 0)
		return gbml_error(env, GBML_ECORRUPT, "not a gbml model (bad magic)");
	memcpy(&r->format_version, b + 4, 2);
	memcpy(&r->algorithm, b + 6, 2);
	memcpy(&r->flags, b + 8, 4);
	memcpy(&crc, b + 12, 4);
	memcpy(&plen, b + 16, 8);
	if (r->format_version == 0 || r->format_version > GBML_MODEL_FORMAT_VERSION)
		return gbml_error(env, GBML_ECORRUPT, "model format version %u is not supported (this build reads 1 to %d)",
						  r->format_version, GBML_MODEL_FORMAT_VERSION);
	if (plen != len - GBML_MODEL_HEADER_SIZE)
		return gbml_error(env, GBML_ECORRUPT, "model is truncated or padded: payload says %llu bytes, %zu present",
						  (unsigned long long) plen, len - GBML_MODEL_HEADER_SIZE);
	if (model_checksum(b, (size_t) plen) != crc)
		return gbml_error(env, GBML_ECORRUPT, "model checksum mismatch: the model bytes are corrupted");

	gbml_cursor_init(&cur, b + GBML_MODEL_HEADER_SIZE, (size_t) plen);
	while (gbml_cursor_remaining(&cur) > 0)
	{
		uint32_t	tag = gbml_cursor_u32(&cur);
		uint64_t	slen = gbml_cursor_u64(&cur);
		const uint8_t *sdata = gbml_cursor_bytes(&cur, (size_t) slen, 1);

		if (!cur.ok || (slen > 0 && sdata == NULL))
			return gbml_error(env, GBML_ECORRUPT, "model section %d overruns the payload", r->n_sections + 1);
		if (r->n_sections == GBML_MODEL_MAX_SECTIONS)
			return gbml_error(env, GBML_ECORRUPT, "model has more than %d sections", GBML_MODEL_MAX_SECTIONS);
		for (int i = 0; i < r->n_sections; i++)
			if (r->sections[i].tag == tag)
				return gbml_error(env, GBML_ECORRUPT, "model has a duplicate section");
		r->sections[r->n_sections].tag = tag;
		r->sections[r->n_sections].data = sdata;
		r->sections[r->n_sections].len = (size_t) slen;
		r->n_sections++;
	}
	if (!gbml_model_find(r, GBML_SECTION_NFEATURES, &data, &nlen) || nlen != 4)
		return gbml_error(env, GBML_ECORRUPT, "model has no feature-count section");
	memcpy(&r->n_features, data, 4);
	if (r->n_features == 0 || r->n_features > 1000000)
		return gbml_error(env, GBML_ECORRUPT, "model feature count %u is out of range", r->n_features);
	return GBML_OK;
}

bool
gbml_model_find(const gbml_model_reader *r, uint32_t tag, const uint8_t **data, size_t *len)
{
	for (int i = 0; i < r->n_sections; i++)
		if (r->sections[i].tag == tag)
		{
			*data = r->sections[i].data;
			*len = r->sections[i].len;
			return true;
		}
	return false;
}
