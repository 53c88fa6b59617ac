/*
 * boost_model.h — the trained "boost" model's entries of the algorithm table
 * (boost_model.c): loading its sections, scoring a row, the readable dump
 * and feature importance.  boost.c's gbml_algorithm_boost names them; the
 * contract of each is algorithm.h's.
 */
#ifndef GBML_BOOST_MODEL_H
#define GBML_BOOST_MODEL_H

#include "boost.h"

int			boost_load(const gbml_model_reader *r, gbml_env *env, void **handle);
void		boost_unload(void *handle, gbml_env *env);
double		boost_predict(const void *handle, const float *x, gbml_output what);
int			boost_classes(const void *handle, const float *x, double *prob);
bool		boost_gives_probability(const void *handle);
int			boost_to_json(const void *handle, gbml_strbuf *out);
int			boost_importance(const void *handle, double *out);

#endif
