/*
 * bench_util.h — helpers shared by the C bench drivers (tests/bench/bench_*.c):
 * key=value training parameters, CSV files read into a gbml_dataset, and
 * what a driver prints of a model (a hash of its bytes, its meta text).
 * Built into every driver by tests/bench/bench.mk.
 */
#ifndef GBML_BENCH_UTIL_H
#define GBML_BENCH_UTIL_H

#include "dataset.h"
#include "params.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * "key=value" -> *v.  The '=' in arg is overwritten with '\0': v->key and
 * v->string point into arg.  The value is a NUMBER when strtod reads all of
 * it, a BOOL for "true"/"false", else a STRING (v->string is set in every
 * case).  Returns false, with a message on stderr, when arg has no '='.
 */
bool		bu_param(char *arg, gbml_param_value *v);

/* The same for a key and a value given apart (v points at both). */
void		bu_param_value(const char *key, const char *val, gbml_param_value *v);

/*
 * Appends the rows of a CSV file to ds.  The first line is a header (only its
 * columns are counted).  The first `lead` columns of a row are not features:
 * among them, column group_col (or none: -1) is an int64 group id, column
 * label_col (or none: -1) the label; the others are read and dropped.  Every
 * following column is a float32 feature.  Every field must be a whole number
 * (no empty fields), and every row must have exactly the header's columns.
 * Returns 0, or -1 after a message "path:line: ..." on stderr.
 */
int			bu_load_csv(const char *path, gbml_dataset *ds, gbml_env *env,
						int group_col, int label_col, int lead);

/* FNV-1a of p[0 .. n): a model's bytes as one printable figure. */
uint64_t	bu_fnv1a(const uint8_t *p, size_t n);

/* The model's meta section as a NUL-terminated string (free() it); NULL when the model has none. */
char	   *bu_meta_text(gbml_env *env, const uint8_t *model, size_t len);

#endif							/* GBML_BENCH_UTIL_H */
