/*
 * fuzz_dataset.c — gbml_dataset_deserialize (the parallel aggregates'
 * partial state) on arbitrary bytes.
 *
 * When the bytes deserialize, the harness checks what the code promises:
 *   - serialize(deserialize(b)) has the same size as b and the same bytes,
 *     but for the flags word, of which only bits 0..2 are kept;
 *   - canonicalize succeeds (the memory budget aside) and keeps the row and
 *     feature counts; its serialized form deserializes again, and
 *     canonicalizing that gives the same bytes (the canonical order depends
 *     only on the rows' contents, so it is idempotent).
 * Everything is freed and the env must hold nothing afterwards.
 */
#include "fuzz_common.h"

#include "dataset.h"

#define FLAGS_OFFSET 16			/* magic u32 | n_features u32 | n_rows u64 | flags u32 ... */
#define KNOWN_FLAGS 7u

static uint8_t *
serialize(const gbml_dataset *ds, size_t *len)
{
	uint8_t    *b;

	*len = gbml_dataset_serialized_size(ds);
	b = malloc(*len ? *len : 1);
	FUZZ_CHECK(b != NULL, "malloc of %zu", *len);
	gbml_dataset_serialize_into(ds, b);
	return b;
}

static bool
same_but_flags(const uint8_t *a, const uint8_t *b, size_t len)
{
	uint32_t	fa,
				fb;

	if (len < FLAGS_OFFSET + 4)
		return memcmp(a, b, len) == 0;
	memcpy(&fa, a + FLAGS_OFFSET, 4);
	memcpy(&fb, b + FLAGS_OFFSET, 4);
	return (fa & KNOWN_FLAGS) == (fb & KNOWN_FLAGS) &&
		memcmp(a, b, FLAGS_OFFSET) == 0 &&
		memcmp(a + FLAGS_OFFSET + 4, b + FLAGS_OFFSET + 4, len - FLAGS_OFFSET - 4) == 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gbml_env	env;
	gbml_dataset ds,
				again;
	uint8_t    *b1,
			   *b2,
			   *b3;
	size_t		l1,
				l2,
				l3;
	int64_t		rows;
	int			nf,
				rc;

	fuzz_env_init(&env);
	if (gbml_dataset_deserialize(&ds, &env, data, size) != GBML_OK)
	{
		FUZZ_CHECK(env.error_code < 0 && env.error[0] != '\0', "deserialize failed without a message");
		fuzz_env_check_released(&env, "failed deserialize");
		return 0;
	}
	rows = ds.n_rows;
	nf = ds.n_features;

	/* round trip as is */
	b1 = serialize(&ds, &l1);
	FUZZ_CHECK(l1 == size, "serialized size %zu, input %zu", l1, size);
	FUZZ_CHECK(same_but_flags(b1, data, size), "round trip changed the bytes");
	free(b1);

	/* canonical order */
	rc = gbml_dataset_canonicalize(&ds, &env);
	if (rc != GBML_OK)
	{
		FUZZ_CHECK(rc == GBML_EBUDGET, "canonicalize failed: %s", env.error);
		gbml_dataset_free(&ds, &env);
		fuzz_env_check_released(&env, "failed canonicalize");
		return 0;
	}
	FUZZ_CHECK(ds.n_rows == rows && ds.n_features == nf, "canonicalize changed the shape");
	b2 = serialize(&ds, &l2);
	gbml_dataset_free(&ds, &env);
	fuzz_env_check_released(&env, "canonicalize+free");

	rc = gbml_dataset_deserialize(&again, &env, b2, l2);
	FUZZ_CHECK(rc == GBML_OK || rc == GBML_EBUDGET, "canonical bytes do not deserialize: %s", env.error);
	if (rc == GBML_OK)
	{
		rc = gbml_dataset_canonicalize(&again, &env);
		FUZZ_CHECK(rc == GBML_OK || rc == GBML_EBUDGET, "second canonicalize failed: %s", env.error);
		if (rc == GBML_OK)
		{
			b3 = serialize(&again, &l3);
			FUZZ_CHECK(l3 == l2 && memcmp(b2, b3, l2) == 0, "canonicalize is not idempotent");
			free(b3);
		}
		gbml_dataset_free(&again, &env);
	}
	free(b2);
	fuzz_env_check_released(&env, "second round");
	return 0;
}
