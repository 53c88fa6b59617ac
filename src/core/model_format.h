/*
 * model_format.h — the model container every algorithm's bytes live in.
 *
 * Layout (little-endian):
 *   header  : magic "GBML" | u16 format_version | u16 algorithm | u32 flags |
 *             u32 crc32c | u64 payload_length                      (24 bytes)
 *             (the CRC-32C covers the header but its own field, then the payload)
 *   payload : sections, each u32 tag | u64 length | bytes
 *
 * Common sections written by the shared training driver:
 *   'PRMS' resolved parameters (JSON text), 'META' training metadata (JSON
 *   text: {"metrics": {...}, "timings": {...}, ...}), 'NFEA' u32 feature count.
 * Each algorithm adds its own sections and validates them in its loader.
 *
 * gbml_model_open() checks everything the container promises (magic,
 * version, algorithm id, length, checksum, every section inside the payload)
 * before anyone reads a byte of content.
 */
#ifndef GBML_MODEL_FORMAT_H
#define GBML_MODEL_FORMAT_H

#include "env.h"
#include "strbuf.h"

#define GBML_MODEL_MAGIC "GBML"
#define GBML_MODEL_FORMAT_VERSION 1
#define GBML_MODEL_HEADER_SIZE 24
#define GBML_MODEL_MAX_SECTIONS 64

#define GBML_TAG(a,b,c,d) ((uint32_t)(a) | ((uint32_t)(b) << 8) | ((uint32_t)(c) << 16) | ((uint32_t)(d) << 24))
#define GBML_SECTION_PARAMS GBML_TAG('P','R','M','S')
#define GBML_SECTION_META	GBML_TAG('M','E','T','A')
#define GBML_SECTION_NFEATURES GBML_TAG('N','F','E','A')

uint32_t	gbml_crc32c(uint32_t crc, const void *data, size_t len);

/* Writer: collects sections, then wraps them with the header. */
typedef struct gbml_model_writer
{
	gbml_strbuf payload;
} gbml_model_writer;

void		gbml_model_writer_init(gbml_model_writer *w, gbml_env *env);
void		gbml_model_add_section(gbml_model_writer *w, uint32_t tag, const void *data, size_t len);
/* Section whose body the caller builds in a strbuf (e.g. JSON text, without the NUL). */
void		gbml_model_add_sb(gbml_model_writer *w, uint32_t tag, const gbml_strbuf *body);
/* Produces the final bytes (allocated through env) and frees the writer. */
int			gbml_model_finish(gbml_model_writer *w, uint16_t algorithm, uint32_t flags,
							  uint8_t **bytes, size_t *len);
void		gbml_model_writer_free(gbml_model_writer *w);

typedef struct gbml_model_section
{
	uint32_t	tag;
	const uint8_t *data;
	size_t		len;
} gbml_model_section;

typedef struct gbml_model_reader
{
	uint16_t	format_version;
	uint16_t	algorithm;
	uint32_t	flags;
	int			n_sections;
	gbml_model_section sections[GBML_MODEL_MAX_SECTIONS];
	uint32_t	n_features;		/* from 'NFEA' */
	/*
	 * 'SCHM' parsed (schema.h), set by gbml_scorer_load before the
	 * algorithm's load, which borrows it: one parse of a model's category
	 * values per load.  NULL from gbml_model_open.
	 */
	const struct gbml_feature_schema *schema;
} gbml_model_reader;

/* Validates the container; on failure returns GBML_ECORRUPT with env->error saying why. */
int			gbml_model_open(gbml_model_reader *r, gbml_env *env, const void *bytes, size_t len);
/* Finds a section; false if absent. */
bool		gbml_model_find(const gbml_model_reader *r, uint32_t tag, const uint8_t **data, size_t *len);

#endif
