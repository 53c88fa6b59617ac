/*
 * test_rng.c — the engine's normal draws (rng.h, rng_normal.c): the
 * ziggurat's constant tables are the ones its recursion gives, and the
 * draws are standard normal (moments, the tail past the base layer, and a
 * chi-square test of 2 million draws against the normal CDF, which a wrong
 * table entry, wedge test or tail fails), the same from the same stream.
 */
#include "harness.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>

/* The tables' recursion, as rng_normal.c's header gives it. */
TEST(rng_normal_tables_are_the_ziggurat)
{
	const double R = GBML_NORMAL_TAIL,
				V = 9.91256303526217e-3;
	double		x[GBML_NORMAL_LAYERS + 1],
				f = exp(-0.5 * R * R);
	double		worst = 0;

	x[0] = V / f;
	x[1] = R;
	x[GBML_NORMAL_LAYERS] = 0;
	for (int i = 2; i < GBML_NORMAL_LAYERS; i++)
	{
		x[i] = sqrt(-2 * log(V / x[i - 1] + f));
		f = exp(-0.5 * x[i] * x[i]);
	}
	for (int i = 0; i <= GBML_NORMAL_LAYERS; i++)
		worst = fmax(worst, fabs(x[i] - gbml_normal_layer_x[i]));
	for (int i = 0; i < GBML_NORMAL_LAYERS; i++)
		worst = fmax(worst, fabs(x[i + 1] / x[i] - gbml_normal_layer_inner[i]));
	CHECK(worst < 1e-13);
	CHECK(gbml_normal_layer_x[GBML_NORMAL_LAYERS] == 0);
	/* each layer's area is V: the top layer's x is small, not negative or NaN */
	CHECK(gbml_normal_layer_x[GBML_NORMAL_LAYERS - 1] > 0.2 && gbml_normal_layer_x[GBML_NORMAL_LAYERS - 1] < 0.35);
}

TEST(rng_normal_draws_are_standard_normal)
{
	enum
	{
		N = 2000000, BINS = 64
	};
	const double lo = -4, hi = 4;
	gbml_rng	r;
	double		sum = 0,
				sq = 0,
				four = 0,
				chi = 0;
	int64_t		count[BINS + 2] = {0},
				past_tail = 0;

	gbml_rng_stream(&r, 20261207, 3);
	for (int i = 0; i < N; i++)
	{
		double		z = gbml_rng_normal(&r);
		int			b = z < lo ? 0 : z >= hi ? BINS + 1 : 1 + (int) ((z - lo) / (hi - lo) * BINS);

		sum += z;
		sq += z * z;
		four += z * z * z * z;
		past_tail += fabs(z) > GBML_NORMAL_TAIL;
		count[b]++;
	}
	CHECK(fabs(sum / N) < 0.004);			/* 5.7 standard errors */
	CHECK(fabs(sq / N - 1) < 0.006);		/* sd of the mean square: sqrt(2 / N) = 0.001 */
	CHECK(fabs(four / N - 3) < 0.06);		/* sd: sqrt(96 / N) = 0.007 */
	/* P(|z| > 3.4426) = 5.76e-4: 1152 expected, sd 34 */
	CHECK(past_tail > 1152 - 200 && past_tail < 1152 + 200);
	for (int b = 0; b < BINS + 2; b++)
	{
		double		a = b == 0 ? -INFINITY : lo + (b - 1) * (hi - lo) / BINS,
					c = b == BINS + 1 ? INFINITY : lo + b * (hi - lo) / BINS,
					p = 0.5 * (erfc(-c / sqrt(2)) - erfc(-a / sqrt(2))),
					e = p * N;

		chi += (count[b] - e) * (count[b] - e) / e;
	}
	/* 65 degrees of freedom: the 99.99th percentile is about 115 */
	CHECK(chi < 115);
}

TEST(rng_normal_same_stream_same_draws)
{
	gbml_rng	a,
				b;
	int			differ = 0;

	gbml_rng_stream(&a, 7, 11);
	gbml_rng_stream(&b, 7, 11);
	for (int i = 0; i < 100000; i++)
		differ += gbml_rng_normal(&a) != gbml_rng_normal(&b);
	CHECK(differ == 0);
}
