/*
 * boost_multiclass.c — the MultiClass loss's pieces (boost_multiclass.h):
 * the class count from the labels, softmax probabilities, each class's
 * gradients, and the two metrics.
 */
#include "boost_multiclass.h"

#include <math.h>

int
gbml_boost_multiclass_count(const float *label, int64_t n, int64_t classes_count, const char *which,
							int *k_out, gbml_env *env)
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
			return gbml_error(env, GBML_EINVAL, "boost: %slabel %g is not below the class count %lld (classes_count, "
							  "or the training labels' largest + 1)", which, y, (long long) classes_count);
		if (y > top)
			top = y;
	}
	*k_out = classes_count > 0 ? (int) classes_count : (int) top + 1;
	if (*k_out < 2)
		return gbml_error(env, GBML_EINVAL,
						  "boost: MultiClass needs at least 2 classes; the labels have only class 0 (set classes_count "
						  "if the others are absent from these rows)");
	return GBML_OK;
}

void
gbml_boost_multiclass_base(const float *label, const float *weight, int64_t n, int k, double *base)
{
	double		total = 0;

	for (int c = 0; c < k; c++)
		base[c] = 0;
	for (int64_t r = 0; r < n; r++)
	{
		double		w = weight ? (double) weight[r] : 1.0;

		base[(int) label[r]] += w;
		total += w;
	}
	for (int c = 0; c < k; c++)
		base[c] = log(total > 0 ? fmin(1.0, fmax(1e-6, base[c] / total)) : 1.0 / k);
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
								int k, int c, double *grad, double *hess, int threads)
{
	const double *pc = prob + (size_t) c * (size_t) n;
	double		factor = (double) k / (double) (k - 1);

#pragma omp parallel for schedule(static) num_threads(threads)
	for (int64_t r = 0; r < n; r++)
	{
		double		w = weight ? (double) weight[r] : 1.0;
		double		p = pc[r];

		grad[r] = w * (p - (label[r] == (float) c ? 1.0 : 0.0));
		hess[r] = w * fmax(factor * p * (1 - p), 1e-16);
	}
}

double
gbml_boost_multiclass_logloss(const double *pred, const float *label, const float *weight, int64_t n, int k)
{
	double		loss = 0,
				sw = 0;

	for (int64_t r = 0; r < n; r++)
	{
		double		w = weight ? (double) weight[r] : 1.0;
		double		top = -INFINITY,
					sum = 0;

		for (int c = 0; c < k; c++)
			top = fmax(top, pred[(size_t) c * (size_t) n + (size_t) r]);
		for (int c = 0; c < k; c++)
			sum += exp(pred[(size_t) c * (size_t) n + (size_t) r] - top);
		/* -log p_y = log sum e^(s - top) - (s_y - top) */
		loss += w * (log(sum) - (pred[(size_t) label[r] * (size_t) n + (size_t) r] - top));
		sw += w;
	}
	return sw > 0 ? loss / sw : 0.0;
}

double
gbml_boost_multiclass_accuracy(const double *pred, const float *label, const float *weight, int64_t n, int k)
{
	double		hit = 0,
				sw = 0;

	for (int64_t r = 0; r < n; r++)
	{
		double		w = weight ? (double) weight[r] : 1.0;
		int			best = 0;

		for (int c = 1; c < k; c++)
			if (pred[(size_t) c * (size_t) n + (size_t) r] > pred[(size_t) best * (size_t) n + (size_t) r])
				best = c;
		hit += best == (int) label[r] ? w : 0;
		sw += w;
	}
	return sw > 0 ? hit / sw : 0.0;
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
