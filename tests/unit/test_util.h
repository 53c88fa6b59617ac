/*
 * test_util.h — helpers shared by the unit tests (built with main.c).
 */
#ifndef GBML_TEST_UTIL_H
#define GBML_TEST_UTIL_H

#include "algorithm.h"
#include "schema.h"

/* Param values for gbml_train_values(). */
gbml_param_value tu_num(const char *key, double v);
gbml_param_value tu_str(const char *key, const char *v);
gbml_param_value tu_bool(const char *key, bool v);

/*
 * Trains `algorithm` through the driver (canonical order, eval split) with
 * params v[0..nv); the model in a malloc'd *model of *len bytes.
 */
int			tu_train(const char *algorithm, gbml_dataset *ds, gbml_env *env, const gbml_param_value *v, int nv,
					 uint8_t **model, size_t *len);
/* ... with an eval set of its own (eval_source's; NULL: none). */
int			tu_train_eval(const char *algorithm, gbml_dataset *ds, gbml_dataset *eval, gbml_env *env,
						  const gbml_param_value *v, int nv, uint8_t **model, size_t *len);

/* The dataset's serialized bytes in a malloc'd buffer of *len bytes (caller frees). */
uint8_t    *tu_serialize(const gbml_dataset *ds, size_t *len);

/* The META section as a NUL-terminated malloc'd copy, or NULL (caller frees). */
char	   *tu_meta_text(gbml_env *env, const uint8_t *model, size_t len);
/* The value after the first "key": in json: a number, true = 1, false = 0; NaN if absent, not a number or json NULL. */
double		tu_json_number(const char *json, const char *key);
/* tu_json_number over the model's META. */
double		tu_meta_number(gbml_env *env, const uint8_t *model, size_t len, const char *key);

/* True when both models open and every tag's section is present in both with the same bytes. */
bool		tu_same_sections(gbml_env *env, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
							 const uint32_t *tags, int n_tags);
/* Offset of section tag's body in model and its length; false if the model does not open or lacks it. */
bool		tu_section_offset(gbml_env *env, const uint8_t *model, size_t len, uint32_t tag,
							  size_t *offset, size_t *section_len);
/*
 * The model r opened, with section `tag`'s body replaced by body (NULL:
 * the section dropped), as a valid container in *out (env's allocation).
 */
int			tu_rebuild(gbml_env *env, const gbml_model_reader *r, uint32_t tag, const uint8_t *body, size_t blen,
					   uint8_t **out, size_t *olen);
/*
 * Scores every row of ds (dataset order) with sc into out[] (`what`), and
 * their labels into label[] (NULL: not wanted); the first failure's status.
 */
int			tu_score_dataset(gbml_scorer *sc, gbml_env *env, const gbml_dataset *ds, gbml_output what, double *out,
							 float *label);
/* Recomputes the container checksum after the test patched the bytes (layout: model_format.h). */
void		tu_fix_crc(uint8_t *model, size_t len);

/* Progress callback: counts calls; cancels at call at_call or iteration at_iteration (0 = never). */
typedef struct tu_cancel
{
	int			calls;
	int			at_call;
	int64_t		at_iteration;
} tu_cancel;
bool		tu_cancel_progress(void *ctx, const gbml_progress_info *info);

/* Open descriptors of this process (-1 where /proc is not there): a leak check. */
int			tu_open_fds(void);
/* A seeded permutation of 0 .. n-1 (malloc'd; caller frees): rows appended in another order. */
int64_t    *tu_shuffled(int64_t n, uint64_t seed);

/*
 * A feature schema (malloc'd; tu_schema_free): feature j is named names[j]
 * and is categorical with n_categories[j] values "v000", "v001", ...
 * (sorted bytewise) when n_categories[j] > 0, else numeric.
 */
gbml_feature_schema *tu_schema(int n, const char *const *names, const int *n_categories);
void		tu_schema_free(gbml_feature_schema *s);

#endif
