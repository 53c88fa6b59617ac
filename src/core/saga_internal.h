/*
 * saga_internal.h — what the SAGA trainer (saga.c) shares with the model's
 * loader and scorer (saga_model.c): the standardization and the weights on
 * the raw feature scale, the names of the losses and label encodings, the
 * weight-like vectors' allocation, and the trainer's entry in the algorithm
 * table (gbml_algorithm_saga, in saga_model.c); not part of saga.h's
 * interface.  The functions' comments are at their definitions (saga.c).
 */
#ifndef GBML_SAGA_INTERNAL_H
#define GBML_SAGA_INTERNAL_H

#include "saga.h"

/* The "loss" parameter's choices, by gbml_saga_loss; NULL-terminated. */
extern const char *const gbml_saga_loss_choices[];

void		gbml_saga_make_standardizer(int d, int n_scaled, const double *mean, const double *std,
										double *scale, double *shift);
void		gbml_saga_effective_weights(int d, const double *w, double b, const double *scale, const double *shift,
										double *w_eff, double *b_eff);
const char *gbml_saga_encoding_name(int enc);
double	   *gbml_saga_alloc_vec(gbml_env *env, int64_t dp);

int			gbml_saga_train(const gbml_dataset *ds, gbml_train_context *ctx);

#endif
