/*
 * onehot_internal.h — what onehot.c (the encoding, its bytes) and
 * onehot_data.c (the passes over rows) share: building an encoding.
 */
#ifndef GBML_ONEHOT_INTERNAL_H
#define GBML_ONEHOT_INTERNAL_H

#include "onehot.h"

/* An encoding of schema s's features with n_blocks blocks (their fields zero); NULL with env's error set. */
gbml_onehot *gbml_onehot_new(const gbml_feature_schema *s, int n_blocks, bool other, gbml_env *env);

/*
 * Block bl's kept slots from counts[n_categories + 1] (slot n_categories:
 * NULL): every slot counted, or the max_categories most frequent (ties to
 * the smaller slot) when there are more and max_categories > 0; ascending.
 */
int			gbml_onehot_keep(gbml_onehot_block *bl, const int64_t *counts, int64_t max_categories, gbml_env *env);

/*
 * The columns, once every block's input and kept slots are set: numeric
 * inputs, each block's place, the slot -> column tables.  GBML_EINVAL
 * (nothing said: the caller knows the context) past GBML_MAX_FEATURES
 * columns; the allocator's code with env's error set.
 */
int			gbml_onehot_layout(gbml_onehot *e, gbml_env *env);

#endif
