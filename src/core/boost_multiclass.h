/*
 * boost_multiclass.h — boosting's MultiClass loss (softmax cross-entropy
 * over K classes), the way XGBoost and LightGBM train it: K trees an
 * iteration, tree k fitted to class k's gradients, all K taken at the
 * predictions the iteration started from.  Tree t of a model belongs to
 * class t mod K; a row's K sums (from each class's base score, the log of
 * its share) are its class scores, their softmax its class probabilities.
 *
 * Predictions are class-major: class k's score of row r is pred[k * n + r].
 * Labels are class ids 0 .. K - 1 (integer-valued floats).
 *
 * Everything here is deterministic whatever the thread count: rows are
 * independent, the eval metrics sum in row order on one thread, and the
 * base scores' and train metrics' terms sum exactly in fixed point (the
 * same bits from shards' partial sums).
 */
#ifndef GBML_BOOST_MULTICLASS_H
#define GBML_BOOST_MULTICLASS_H

#include <stdint.h>
#include "env.h"

/* The most classes a MultiClass model may have. */
#define GBML_BOOST_MAX_CLASSES 1024

/*
 * The class count of labels label[0 .. n): classes_count when > 0 (then
 * every label must be below it), else the largest label + 1.  An ERROR when
 * a label is not an integer in [0, GBML_BOOST_MAX_CLASSES) or, unless the
 * rows are a shard's part of the training (part: the union's count comes
 * later), there are fewer than 2 classes; `which` names the rows in it ("",
 * "eval ").
 */
int			gbml_boost_multiclass_count(const float *label, int64_t n, int64_t classes_count, const char *which,
										bool part, int *k_out, gbml_env *env);

/*
 * Each class's first score from the classes' weights (class_weight, k):
 * the log of its weight share (clamped to [1e-6, 1]), as LightGBM starts
 * its multiclass models: the softmax of the base scores is the class
 * distribution.
 */
void		gbml_boost_multiclass_base(const double *class_weight, int k, double *base);

/*
 * The exact sums behind the base scores and the train metrics (boost_loss.h's
 * fixed-point terms: the same bits from shards' partial sums as from one
 * server's rows).  scale NULL: each term's largest |term| into max; else
 * its fixed-point sum at scale into sum.  gbml_boost_class_terms: k terms,
 * class c's weight w [y = c]; gbml_boost_multiclass_terms: the
 * GBML_BOOST_MULTICLASS_TERMS terms below at the class-major scores pred
 * (class c's of row r at pred[c * stride + r]: a block of rows from r0
 * passes pred + r0, label + r0 and the whole set's row count as stride).
 * gbml_boost_class_count_max: the largest label + 1 (the class count).
 */
typedef enum gbml_boost_multiclass_term
{
	GBML_BOOST_MC_TERM_W,		/* w */
	GBML_BOOST_MC_TERM_LOSS,	/* w (-log softmax(pred)[y]) */
	GBML_BOOST_MC_TERM_HIT,		/* w [the highest score is y's] */
	GBML_BOOST_MULTICLASS_TERMS
} gbml_boost_multiclass_term;
void		gbml_boost_class_terms(const float *label, const float *weight, int64_t n, int k, const double *scale,
								   double *max, int64_t *sum);
void		gbml_boost_multiclass_terms(const double *pred, int64_t stride, const float *label, const float *weight,
										int64_t n, int k, const double *scale, double *max, int64_t *sum);
void		gbml_boost_class_count_max(const float *label, int64_t n, double *max);

/* Row-wise softmax of pred (class-major, k classes, n rows) into prob (same layout). */
void		gbml_boost_multiclass_probs(const double *pred, int64_t n, int k, double *prob, int threads);

/*
 * Class c's gradient and hessian of every row from the iteration's
 * probabilities: g = w (p_c - [y = c]), h = w f p_c (1 - p_c) (at least
 * 1e-16 w), f = hessian_factor, or when that is 0 K/(K-1): the diagonal
 * Newton step with Friedman's (K-1)/K factor, as LightGBM takes it
 * (XGBoost's softmax takes f = 2).
 */
void		gbml_boost_multiclass_gradients(const double *prob, const float *label, const float *weight, int64_t n,
											int k, int c, double hessian_factor, double *grad, double *hess,
											int threads);

/* One row's class scores (k) into probabilities, in place; returns the most probable class (ties: lowest). */
int			gbml_boost_softmax_row(double *score, int k);

#endif
