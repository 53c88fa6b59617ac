/*
 * boost_multiclass.c — the MultiClass loss's pieces (boost_multiclass.h):
 * the class count from the labels, softmax probabilities, each class's
 * gradients, and the two metrics.
 */
#include "boost_multiclass.h"
#include "boost_loss.h"

#include <math.h>

int
gbml_boost_multiclass_count(const float *label, int64_t n, int64_t classes_count, const char *which,
							bool part, int *k_out, gbml_env *env)
{
	double		top = -1;

	for (int64_t r = 0; r < n; r++)
	{
		double		y = label[r];

		if (!(y >= 0 && y < GBML_BOOST_MAX_CLASSES && y == floor(y)))
			return gbml_error(env, GBML_EINVAL,
							  "boost: MultiClass needs %slabels that are class ids 0, 1, 2, ... (below %d); found %g",
							  which, GBML_BOOST_MAX_CLASSES, y);
		if (classes_count > 0 && y >= (double) classes_count)
		{
			gbml_error(env, GBML_EINVAL, "boost: %slabel %g is not below the class count %lld (classes_count)",
					   which, y, (long long) classes_count);
			return gbml_hint(env, "Set \"classes_count\" to the number of classes, or leave it out: the class "
							 "count is then the largest label of the training and eval rows + 1.");
		}
		if (y > top)
			top = y;
	}
	*k_out = classes_count > 0 ? (int) classes_count : (int) top + 1;
	if (*k_out < 2 && !part)
	{
		gbml_error(env, GBML_EINVAL, "boost: MultiClass needs at least 2 classes; the labels have only class 0");
		return gbml_hint(env, "Set \"classes_count\" if the other classes are absent from these rows.");
	}
	return GBML_OK;
}

void
gbml_boost_multiclass_base(const double *class_weight, int k, double *base)
{
	double		total = 0;

	for (int c = 0; c < k; c++)
		total += class_weight[c];
	for (int c = 0; c < k; c++)
		base[c] = log(total > 0 ? fmin(1.0, fmax(1e-6, class_weight[c] / total)) : 1.0 / k);
}

/* n terms' maxima (scale NULL) or sums, before the first row. */
static void
clear_terms(int n, const double *scale, double *max, int64_t *sum)
{
	for (int t = 0; t < n; t++)
		if (scale)
			sum[t] = 0;
		else
			max[t] = 0;
}

/* A term into its maximum (scale NULL) or its fixed-point sum at scale. */
static inline void
fold_term(double term, int t, const double *scale, double *max, int64_t *sum)
{
	if (scale)
		sum[t] += gbml_boost_term_fixed(term, scale[t]);
	else
		gbml_boost_term_max_fold(&max[t], term);
}

void
gbml_boost_class_terms(const float *label, const float *weight, int64_t n, int k, const double *scale,
					   double *max, int64_t *sum)
{
	clear_terms(k, scale, max, sum);
	for (int64_t r = 0; r < n; r++)
		if ((int) label[r] < k)
			fold_term(weight ? (double) weight[r] : 1.0, (int) label[r], scale, max, sum);
}

void
gbml_boost_class_count_max(const float *label, int64_t n, double *max)
{
	*max = 0;
	for (int64_t r = 0; r < n; r++)
		*max = fmax(*max, (double) label[r] + 1);
}

/* -log softmax(row r's scores)[y], from the scores less their largest (no overflow). */
static double
row_logloss(const double *pred, int64_t n, int k, int64_t r, int y)
{
	double		top = -INFINITY,
				sum = 0;

	for (int c = 0; c < k; c++)
		top = fmax(top, pred[(size_t) c * (size_t) n + (size_t) r]);
	for (int c = 0; c < k; c++)
		sum += exp(pred[(size_t) c * (size_t) n + (size_t) r] - top);
	/* -log p_y = log sum e^(s - top) - (s_y - top) */
	return log(sum) - (pred[(size_t) y * (size_t) n + (size_t) r] - top);
}

/* Row r's class of the highest score (ties: the lowest class). */
static int
row_best(const double *pred, int64_t n, int k, int64_t r)
{
	int			best = 0;

	for (int c = 1; c < k; c++)
		if (pred[(size_t) c * (size_t) n + (size_t) r] > pred[(size_t) best * (size_t) n + (size_t) r])
			best = c;
	return best;
}

void
gbml_boost_multiclass_terms(const double *pred, int64_t stride, const float *label, const float *weight, int64_t n,
							int k, const double *scale, double *max, int64_t *sum)
{
	clear_terms(GBML_BOOST_MULTICLASS_TERMS, scale, max, sum);
	for (int64_t r = 0; r < n; r++)
	{
		double		w = weight ? (double) weight[r] : 1.0;
		int			y = (int) label[r];

		fold_term(w, GBML_BOOST_MC_TERM_W, scale, max, sum);
		fold_term(w * row_logloss(pred, stride, k, r, y), GBML_BOOST_MC_TERM_LOSS, scale, max, sum);
		fold_term(row_best(pred, stride, k, r) == y ? w : 0.0, GBML_BOOST_MC_TERM_HIT, scale, max, sum);
	}
}

void
gbml_boost_multiclass_probs(const double *pred, int64_t n, int k, double *prob, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
	for (int64_t r = 0; r < n; r++)
	{
		double		top = -INFINITY,
					sum = 0;

		for (int c = 0; c < k; c++)
			top = fmax(top, pred[(size_t) c * (size_t) n + (size_t) r]);
		for (int c = 0; c < k; c++)
		{
			double		e = exp(pred[(size_t) c * (size_t) n + (size_t) r] - top);

			prob[(size_t) c * (size_t) n + (size_t) r] = e;
			sum += e;
		}
		for (int c = 0; c < k; c++)
			prob[(size_t) c * (size_t) n + (size_t) r] /= sum;
	}
}

void
gbml_boost_multiclass_gradients(const double *prob, const float *label, const float *weight, int64_t n,
								int k, int c, double hessian_factor, double *grad, double *hess, int threads)
{
	const double *pc = prob + (size_t) c * (size_t) n;
	double		factor = hessian_factor > 0 ? hessian_factor : (double) k / (double) (k - 1);

#pragma omp parallel for schedule(static) num_threads(threads)
	for (int64_t r = 0; r < n; r++)
	{
		double		w = weight ? (double) weight[r] : 1.0;
		double		p = pc[r];

		grad[r] = w * (p - (label[r] == (float) c ? 1.0 : 0.0));
		hess[r] = w * fmax(factor * p * (1 - p), 1e-16);
	}
}

int
gbml_boost_softmax_row(double *score, int k)
{
	double		top = score[0],
				sum = 0;
	int			best = 0;

	for (int c = 1; c < k; c++)
		if (score[c] > top)
		{
			top = score[c];
			best = c;
		}
	for (int c = 0; c < k; c++)
	{
		score[c] = exp(score[c] - top);
		sum += score[c];
	}
	for (int c = 0; c < k; c++)
		score[c] /= sum;
	return best;
}
