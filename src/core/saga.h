/*
 * saga.h — SAGA linear models (logistic and squared loss with L2, L1 and
 * elastic-net penalties): the parameter struct and the model section layout.
 *
 * The algorithm table itself is `gbml_algorithm_saga` (algorithm.h).  The
 * objective, over n training rows with sample weights s_i, is
 *
 *     (1/n) sum_i s_i loss(x_i·w + b, y_i)
 *         + alpha ((1 - l1_ratio)/2 ||w||^2 + l1_ratio ||w||_1)
 *
 * with the intercept b unpenalized; with `standardize` x_i is the
 * standardized row and w the weights on that scale.  docs/saga.md is the user
 * reference.
 *
 * Categorical features (schema.h) are one-hot encoded (onehot.h): x_i is
 * then the encoded row — the numeric features, then per categorical
 * feature an indicator per kept category (at most max_categories, the most
 * frequent) and an "other" indicator — and `standardize` scales only the
 * numeric columns: the indicators stay 0/1.
 */
#ifndef GBML_SAGA_H
#define GBML_SAGA_H

#include "algorithm.h"

typedef struct gbml_saga_params
{
	int			loss;			/* 0 logistic, 1 squared (gbml_saga_loss) */
	double		alpha;			/* penalty strength */
	double		C;				/* > 0: alpha = 1 / (C n), scikit-learn's C */
	double		l1_ratio;		/* 0 = ridge, 1 = lasso */
	double		tol;			/* stop when max|dw| / max|w| over an epoch < tol */
	int64_t		max_iter;		/* epochs */
	double		step_size;		/* 0 = 1 / (3 L) */
	bool		fit_intercept;
	int64_t		random_seed;
	bool		standardize;
	int64_t		batch_size;		/* GPU: rows of one mini-batch step; 0 = automatic (saga_gpu.c) */
	int64_t		max_categories; /* one-hot: indicators per categorical feature at most (besides "other") */
} gbml_saga_params;

extern const gbml_param_spec gbml_saga_param_specs[];
extern const gbml_algorithm gbml_algorithm_saga;

/* How logistic labels were given, so predict answers in the same encoding. */
typedef enum gbml_saga_label_encoding
{
	GBML_SAGA_LABELS_NONE = 0,	/* squared loss: labels are numbers */
	GBML_SAGA_LABELS_01 = 1,	/* 0 / 1 (and booleans) */
	GBML_SAGA_LABELS_PM1 = 2	/* -1 / +1 */
} gbml_saga_label_encoding;

/* The classes of a training set's labels (logistic loss), as bits. */
enum
{
	GBML_SAGA_CLASS_POS = 1,	/* 1 */
	GBML_SAGA_CLASS_ZERO = 2,	/* 0 */
	GBML_SAGA_CLASS_NEG = 4,	/* -1 */
	GBML_SAGA_CLASS_OTHER = 8	/* anything else: not a class label */
};

/* The classes among ds's labels (host chunks); the first label outside them into *other. */
int			gbml_saga_label_classes(const gbml_dataset *ds, double *other);

/*
 * The labels' encoding from their classes, or an error naming `what`:
 * want 0 detects it (a training set: both classes needed) into *enc, else
 * checks an eval set's classes against the training encoding `want`.
 */
int			gbml_saga_encoding_of(int classes, double other, const char *what, int want, gbml_env *env, int *enc);

/*
 * Section 'SAGA' (little-endian), one per model:
 *   u32 layout version (1) | u32 loss | u32 label encoding |
 *   u32 flags (bit 0 fit_intercept, bit 1 standardized) | u32 d |
 *   f64 intercept | f64 w[d] | f64 feature_mean[d] | f64 feature_std[d]
 * w and the intercept are on the scale the solver worked on (standardized
 * features when bit 1 is set); feature_mean/std are the training rows'
 * (population) statistics, always stored: they define the standardization and
 * give the importance of each weight.
 *
 * With categorical features d counts the encoded columns, and the model
 * has an 'ONEH' section (onehot.h) saying what they are; the indicators'
 * mean and std are their training statistics too (a category's share of
 * the rows), used for importance but never to scale them.
 */
#define GBML_SAGA_SECTION GBML_TAG('S','A','G','A')
#define GBML_SAGA_LAYOUT_VERSION 1
#define GBML_SAGA_FLAG_INTERCEPT 1u
#define GBML_SAGA_FLAG_STANDARDIZED 2u

#endif
