/*
 * boost_loss.c — gradients, hessians, objective values and base scores of the
 * boosting losses (declared in boost_loss.h; user-facing description in
 * docs/boost_losses.md).
 *
 * Determinism whatever env->threads is: pointwise losses write row i from
 * row i only; query-wise losses run one query per OpenMP iteration and write
 * only that query's rows, accumulating its pairs in a fixed order.  Random
 * draws (YetiRank's noisy permutations, PairLogit's pair sample for huge
 * queries) come from a per-query stream gbml_rng_stream(mix(seed, iteration),
 * query), so which thread runs a query never matters.  Scratch for sorting is
 * allocated per thread before the parallel region (env allocator), never
 * inside it.
 *
 * The per-query kernels are plain C over (labels, scores, weights) arrays so
 * that a CUDA backend can later provide the same computation.
 */
#include "boost_loss.h"
#include "boost_histogram.h"
#include "rank_order.h"
#include "metrics.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

const char *const gbml_boost_loss_names[] = {
	"RMSE", "Logloss", "QueryRMSE", "PairLogit", "YetiRank", "LambdaMART", "MultiClass", NULL
};

/* Hessians are floored here so that the contract "hess > 0" holds even for
 * zero-weight rows and for documents that are in no pair. */
#define HESS_FLOOR 1e-16
/* CatBoost's YetiRank pair weight constant ("like in GPU"). */
#define YETIRANK_MAGIC 0.15
/* Logloss base score: the mean label is clamped so the log-odds stay finite. */
#define LOGLOSS_MEAN_CLAMP 1e-6
/* The NDCG cut-off of the YetiRank/LambdaMART loss value. */
#define RANK_VALUE_NDCG_K 10
/* Stream salt of PairLogit's pair sample, so it never coincides with YetiRank's. */
#define PAIRLOGIT_SALT 0x5041495273ULL

bool
gbml_boost_loss_is_ranking(gbml_boost_loss_kind kind)
{
	return kind == GBML_LOSS_QUERYRMSE || kind == GBML_LOSS_PAIRLOGIT ||
		kind == GBML_LOSS_YETIRANK || kind == GBML_LOSS_LAMBDAMART;
}

void
gbml_boost_loss_default_options(gbml_boost_loss_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->pairlogit_max_pairs = GBML_PAIRLOGIT_MAX_PAIRS;
	opt->yetirank_permutations = GBML_YETIRANK_PERMUTATIONS;
	opt->yetirank_decay = GBML_YETIRANK_DECAY;
	opt->yetirank_newton = true;
	opt->lambdamart_truncation = GBML_LAMBDAMART_TRUNCATION;
	opt->lambdamart_norm = true;
	opt->sigmoid = 1.0;
}

/* ---------------------------------------------------------------- helpers */

static inline double
row_weight(const gbml_boost_problem *p, int64_t i)
{
	return p->weight ? (double) p->weight[i] : 1.0;
}

static inline double
sigmoid(double x)
{
	if (x >= 0)
		return 1.0 / (1.0 + exp(-x));
	else
	{
		double		e = exp(x);

		return e / (1.0 + e);
	}
}

/* log(1 + e^x) without overflow. */
static inline double
softplus(double x)
{
	return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

/* (key, row) pairs sorted in the ranking order of rank_order.h. */
typedef gbml_keyed keyed;

#define KEYED_BEFORE(x, y) gbml_keyed_before(&(x), &(y))
#define U64_BEFORE(x, y) ((x) < (y))
GBML_DEFINE_MERGE_RUNS(merge_keyed_runs, keyed, KEYED_BEFORE)
GBML_DEFINE_MERGE_RUNS(merge_u64_runs, uint64_t, U64_BEFORE)

/* Insertion sort of a short run. */
static void
sort_keyed_small(keyed *a, int64_t m)
{
	for (int64_t i = 1; i < m; i++)
	{
		keyed		v = a[i];
		int64_t		j = i;

		while (j > 0 && gbml_keyed_before(&v, &a[j - 1]))
		{
			a[j] = a[j - 1];
			j--;
		}
		a[j] = v;
	}
}

/*
 * Sorts a[0..m) in the keyed order: insertion-sorted runs of 16 merged
 * bottom-up through tmp (m entries).  The comparisons are inlined, which is
 * several times faster than qsort on the short queries this runs on, ten
 * times per query and tree for YetiRank.
 */
static void
sort_keyed(keyed *a, keyed *tmp, int64_t m)
{
	const int64_t run = 16;

	for (int64_t s = 0; s < m; s += run)
		sort_keyed_small(a + s, (m - s < run) ? m - s : run);
	merge_keyed_runs(a, tmp, m, run);
}

/* A seed for (seed, iteration): every tree gets fresh, reproducible draws. */
static uint64_t
iteration_seed(uint64_t seed, int64_t iteration)
{
	uint64_t	x = seed ^ ((uint64_t) iteration * 0x9e3779b97f4a7c15ULL);

	return gbml_splitmix64(&x);
}

/* Query g's random stream: its index among every query of the training. */
static inline uint64_t
query_stream(const gbml_boost_problem *p, int64_t g)
{
	return (uint64_t) (p->group_stream ? p->group_stream[g] : g);
}

/* Groups must be contiguous, cover [0, n) and be non-decreasing. */
static bool
groups_valid(const gbml_boost_problem *p, int64_t *max_group)
{
	int64_t		mx = 0;

	/* no rows, no queries (a boosting shard whose every row eval_fraction held out) */
	if (p->n == 0 && p->n_groups == 0)
	{
		*max_group = 0;
		return true;
	}
	if (p->n_groups < 1 || p->group_offsets == NULL)
		return false;
	if (p->group_offsets[0] != 0 || p->group_offsets[p->n_groups] != p->n)
		return false;
	for (int64_t g = 0; g < p->n_groups; g++)
	{
		int64_t		m = p->group_offsets[g + 1] - p->group_offsets[g];

		if (m < 0)
			return false;
		if (m > mx)
			mx = m;
	}
	*max_group = mx;
	return true;
}

/*
 * Sorts packed keys ascending: runs of 4 by a sorting network, then
 * branch-free bottom-up merges through tmp.  YetiRank sorts each query ten times per
 * tree, which made the comparison sort its hot spot.
 */
static void
sort_u64(uint64_t *a, uint64_t *tmp, int64_t m)
{
	/* runs of 4 by a branch-free sorting network (5 compare-exchanges) */
#define CE(x, y) do { uint64_t lo_ = a[x] < a[y] ? a[x] : a[y], hi_ = a[x] < a[y] ? a[y] : a[x]; a[x] = lo_; a[y] = hi_; } while (0)
	for (int64_t s = 0; s + 4 <= m; s += 4)
	{
		CE(s, s + 1);
		CE(s + 2, s + 3);
		CE(s, s + 2);
		CE(s + 1, s + 3);
		CE(s + 1, s + 2);
	}
#undef CE
	for (int64_t i = m - m % 4 + 1; i < m; i++)
	{
		uint64_t	v = a[i];
		int64_t		j = i;

		while (j > m - m % 4 && v < a[j - 1])
		{
			a[j] = a[j - 1];
			j--;
		}
		a[j] = v;
	}
	merge_u64_runs(a, tmp, m, 4);
}

/*
 * A packed sort key: the float32 value mapped to an unsigned order (largest
 * first), then the row's position in its query, so ascending order is
 * "value descending, position ascending".  NaN sorts with -inf.
 */
static inline uint64_t
pack_desc_key(double v, int64_t pos)
{
	float		f = isnan(v) ? -INFINITY : (float) v;
	uint32_t	b;

	memcpy(&b, &f, sizeof(b));
	b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);	/* ascending order of f */
	return ((uint64_t) (~b) << 32) | (uint32_t) pos;
}

/*
 * Scratch one thread needs for a query of m rows: two keyed arrays (sort and
 * merge buffer), per-row exp(score - max) and gains, per-rank discounts, and
 * the prefix counts of PairLogit's pair sampler.
 */
typedef struct query_scratch
{
	keyed	   *ks;
	keyed	   *tmp;
	double	   *ex;
	double	   *gain;
	double	   *disc;
	int64_t    *prefix;
} query_scratch;

static size_t
scratch_bytes(int64_t m)
{
	return (size_t) m * (2 * sizeof(keyed) + 3 * sizeof(double)) + (size_t) (m + 1) * sizeof(int64_t);
}

static void
scratch_carve(void *block, int64_t m, query_scratch *q)
{
	char	   *p = block;

	q->ks = (keyed *) p;
	p += (size_t) m * sizeof(keyed);
	q->tmp = (keyed *) p;
	p += (size_t) m * sizeof(keyed);
	q->ex = (double *) p;
	p += (size_t) m * sizeof(double);
	q->gain = (double *) p;
	p += (size_t) m * sizeof(double);
	q->disc = (double *) p;
	p += (size_t) m * sizeof(double);
	q->prefix = (int64_t *) p;
}

/*
 * ex[i - b] = exp(scale * (pred[i] - max)) for the query's rows, so a pair's
 * sigmoid is one division instead of one exp (CatBoost's expApprox trick).
 */
static void
query_exp(const double *pred, int64_t b, int64_t e, double scale, double *ex)
{
	double		mx = -INFINITY;

	for (int64_t i = b; i < e; i++)
		if (pred[i] > mx)
			mx = pred[i];
	if (!isfinite(mx))
		mx = 0;
	for (int64_t i = b; i < e; i++)
		ex[i - b] = exp(scale * (pred[i] - mx));
}

/* sigmoid(scale * (s_lo - s_hi)) from the exps of the two rows; falls back to
 * the direct formula when both underflowed (scores far below the query's best). */
static inline double
pair_prob(double e_hi, double e_lo, double s_hi, double s_lo, double scale)
{
	double		den = e_hi + e_lo;

	if (den > 0 && isfinite(den))
		return e_lo / den;
	return sigmoid(scale * (s_lo - s_hi));
}

/*
 * Where a query kernel sends its pairs: gradient mode (grad/hess not NULL)
 * or objective mode (obj/wsum not NULL).  Rows are absolute indices.
 */
typedef struct pair_sink
{
	const double *pred;
	const double *ex;			/* gradient mode: query_exp of the query, or NULL */
	int64_t		base;			/* first row of the query (index origin of ex) */
	double	   *grad;
	double	   *hess;			/* NULL: no hessian accumulation */
	double		obj;
	double		wsum;
	bool		want_obj;
} pair_sink;

/* Pair (winner a, loser b) with weight pw of the logistic pair loss
 * pw * log(1 + exp(-(s_a - s_b))). */
static inline void
pair_visit(pair_sink *k, int64_t a, int64_t b, double pw)
{
	double		d = k->pred[a] - k->pred[b];

	if (k->want_obj)
	{
		k->obj += pw * softplus(-d);
		k->wsum += pw;
		return;
	}
	else
	{
		/* probability of the wrong order */
		double		q = k->ex ? pair_prob(k->ex[a - k->base], k->ex[b - k->base],
										  k->pred[a], k->pred[b], 1.0)
			: sigmoid(-d);

		k->grad[a] -= pw * q;
		k->grad[b] += pw * q;
		if (k->hess)
		{
			double		h = pw * q * (1.0 - q);

			k->hess[a] += h;
			k->hess[b] += h;
		}
	}
}

/* ------------------------------------------------------------- PairLogit */

/*
 * All pairs (i, j) of the query with label_i > label_j, pair weight the mean
 * of the two row weights.  Beyond max_pairs pairs, max_pairs pairs are drawn
 * uniformly with replacement from the rng (an unbiased estimate: each drawn
 * pair's weight is scaled by total / max_pairs).
 */
static void
pairlogit_query(const gbml_boost_problem *p, int64_t b, int64_t e, int64_t max_pairs,
				gbml_rng *rng, const query_scratch *qs, pair_sink *k)
{
	int64_t		m = e - b;
	keyed	   *ks = qs->ks;
	int64_t    *prefix = qs->prefix;
	int64_t		total;

	if (m < 2)
		return;
	if (m * (m - 1) / 2 <= max_pairs)
	{
		for (int64_t i = b; i < e; i++)
			for (int64_t j = i + 1; j < e; j++)
			{
				float		li = p->label[i],
							lj = p->label[j];
				double		pw;

				if (li == lj)
					continue;
				pw = 0.5 * (row_weight(p, i) + row_weight(p, j));
				if (li > lj)
					pair_visit(k, i, j, pw);
				else
					pair_visit(k, j, i, pw);
			}
		return;
	}

	/* Count pairs by sorting labels: rows with a lower label than the row at
	 * sorted position q are the sorted positions [m - lower_q, m). */
	for (int64_t q = 0; q < m; q++)
	{
		ks[q].key = p->label[b + q];
		ks[q].idx = b + q;
	}
	sort_keyed(ks, qs->tmp, m);
	prefix[0] = 0;
	for (int64_t s = 0; s < m;)
	{
		int64_t		t = s;

		while (t < m && ks[t].key == ks[s].key)
			t++;
		for (int64_t q = s; q < t; q++)
			prefix[q + 1] = prefix[q] + (m - t);
		s = t;
	}
	total = prefix[m];
	if (total == 0)
		return;
	if (total <= max_pairs)
	{
		for (int64_t q = 0; q < m; q++)
		{
			int64_t		lower = prefix[q + 1] - prefix[q];

			for (int64_t r = m - lower; r < m; r++)
			{
				int64_t		a = ks[q].idx,
							c = ks[r].idx;

				pair_visit(k, a, c, 0.5 * (row_weight(p, a) + row_weight(p, c)));
			}
		}
		return;
	}
	else
	{
		double		scale = (double) total / (double) max_pairs;

		for (int64_t s = 0; s < max_pairs; s++)
		{
			int64_t		u = (int64_t) gbml_rng_below(rng, (uint64_t) total);
			int64_t		lo = 0,
						hi = m - 1;
			int64_t		lower,
						r,
						a,
						c;

			/* the last q with prefix[q] <= u */
			while (lo < hi)
			{
				int64_t		mid = lo + (hi - lo + 1) / 2;

				if (prefix[mid] <= u)
					lo = mid;
				else
					hi = mid - 1;
			}
			lower = prefix[lo + 1] - prefix[lo];
			r = m - lower + (int64_t) gbml_rng_below(rng, (uint64_t) lower);
			a = ks[lo].idx;
			c = ks[r].idx;
			pair_visit(k, a, c, scale * 0.5 * (row_weight(p, a) + row_weight(p, c)));
		}
	}
}

/* -------------------------------------------------------------- YetiRank */

/*
 * CatBoost's YetiRank: `permutations` times, rank the query by the score plus
 * logistic noise (CatBoost multiplies exp(score) by u/(1.000001-u)); every
 * adjacent pair of that ranking with different labels becomes a pair with
 * weight 0.15 * decay^position * |label difference| / permutations (times the
 * mean row weight), and the pairs get the PairLogit gradient at the current
 * (noise-free) scores.
 */
static void
yetirank_query(const gbml_boost_problem *p, int64_t b, int64_t e,
			   const gbml_boost_loss_options *opt, gbml_rng *rng, const query_scratch *qs,
			   pair_sink *k)
{
	int64_t		m = e - b;
	uint64_t   *ks = (uint64_t *) qs->ks,
			   *tmp = (uint64_t *) qs->tmp;
	int			perms = opt->yetirank_permutations;

	if (m < 2)
		return;
	for (int perm = 0; perm < perms; perm++)
	{
		double		decay = 1.0;

		for (int64_t q = 0; q < m; q++)
		{
			double		u = gbml_rng_uniform(rng);

			/* u = 0 gives -inf: that row simply goes last.  The noisy key is
			 * sorted as a float32: the order is random anyway, and one integer
			 * comparison per step is what makes this sort cheap. */
			ks[q] = pack_desc_key(k->pred[b + q] + log(u / (1.000001 - u)), q);
		}
		sort_u64(ks, tmp, m);
		for (int64_t q = 1; q < m; q++)
		{
			int64_t		x = b + (int64_t) (uint32_t) ks[q - 1],
						y = b + (int64_t) (uint32_t) ks[q];
			float		lx = p->label[x],
						ly = p->label[y];

			if (lx != ly)
			{
				double		pw = YETIRANK_MAGIC * decay * fabs((double) lx - (double) ly) / perms
					* 0.5 * (row_weight(p, x) + row_weight(p, y));

				if (lx > ly)
					pair_visit(k, x, y, pw);
				else
					pair_visit(k, y, x, pw);
			}
			decay *= opt->yetirank_decay;
		}
	}
}

/* ------------------------------------------------------------ LambdaMART */

/*
 * LightGBM's lambdarank for one query (rank_objective.hpp semantics): sort by
 * score (stable), for every pair with at least one row in the top
 * `truncation` and different labels, lambda = sigma * |dNDCG| * sigmoid(-sigma
 * (s_hi - s_lo)), |dNDCG| divided by (0.01 + |s_hi - s_lo|) under norm; under
 * norm the query's lambdas are finally scaled by log2(1 + S) / S, S the sum of
 * |lambda|.  Gains 2^label - 1, discount 1/log2(2 + rank), normalised by the
 * ideal DCG at the truncation level; a query whose ideal DCG is 0 gets no
 * gradient.
 *
 * Objective mode (obj != NULL) returns sum |dNDCG| log(1 + exp(-sigma ds)),
 * the function whose gradient this is when norm is off.
 */
static void
lambdamart_query(const gbml_boost_problem *p, int64_t b, int64_t e,
				 const gbml_boost_loss_options *opt, const query_scratch *qs,
				 const double *pred, double *grad, double *hess, double *obj)
{
	int64_t		m = e - b;
	keyed	   *ks = qs->ks;
	double	   *gain = qs->gain,
			   *disc = qs->disc,
			   *ex = qs->ex;
	int64_t		trunc = opt->lambdamart_truncation;
	int64_t		kk = trunc < m ? trunc : m;
	double		sig = opt->sigmoid;
	double		maxdcg = 0,
				inv,
				best,
				worst,
				sum_lambdas = 0;

	if (m < 2)
		return;
	for (int64_t q = 0; q < m; q++)
	{
		ks[q].key = p->label[b + q];
		ks[q].idx = q;
		gain[q] = gbml_ndcg_gain(p->label[b + q]);
		disc[q] = gbml_ndcg_discount(q);
	}
	sort_keyed(ks, qs->tmp, m);
	for (int64_t r = 0; r < kk; r++)
		maxdcg += gbml_ndcg_gain(ks[r].key) * disc[r];
	if (!(maxdcg > 0))
		return;
	inv = 1.0 / maxdcg;

	for (int64_t q = 0; q < m; q++)
	{
		ks[q].key = pred[b + q];
		ks[q].idx = b + q;
	}
	sort_keyed(ks, qs->tmp, m);
	if (obj == NULL)
		query_exp(pred, b, e, sig, ex);
	best = ks[0].key;
	worst = ks[m - 1].key;

	for (int64_t i = 0; i < m - 1 && i < trunc; i++)
	{
		for (int64_t j = i + 1; j < m; j++)
		{
			int64_t		hr,
						lr,
						hi,
						lo;
			double		ds,
						delta,
						pl,
						ph;
			float		li = p->label[ks[i].idx],
						lj = p->label[ks[j].idx];

			if (li == lj)
				continue;
			if (li > lj)
			{
				hr = i;
				lr = j;
			}
			else
			{
				hr = j;
				lr = i;
			}
			hi = ks[hr].idx;
			lo = ks[lr].idx;
			ds = pred[hi] - pred[lo];
			delta = (gain[hi - b] - gain[lo - b]) * fabs(disc[hr] - disc[lr]) * inv;
			if (obj)
			{
				*obj += delta * softplus(-sig * ds);
				continue;
			}
			if (opt->lambdamart_norm && best != worst)
				delta /= (0.01 + fabs(ds));
			pl = pair_prob(ex[hi - b], ex[lo - b], pred[hi], pred[lo], sig);
			ph = pl * (1.0 - pl);
			pl *= -sig * delta;
			ph *= sig * sig * delta;
			grad[lo] -= pl;
			hess[lo] += ph;
			grad[hi] += pl;
			hess[hi] += ph;
			sum_lambdas -= 2 * pl;
		}
	}
	if (obj == NULL && opt->lambdamart_norm && sum_lambdas > 0)
	{
		double		f = log2(1.0 + sum_lambdas) / sum_lambdas;

		for (int64_t r = b; r < e; r++)
		{
			grad[r] *= f;
			hess[r] *= f;
		}
	}
}

/* -------------------------------------------------------------- QueryRMSE */

/* The query's weighted mean residual, which QueryRMSE removes. */
static double
query_shift(const gbml_boost_problem *p, const double *pred, int64_t b, int64_t e)
{
	double		sw = 0,
				sr = 0;

	for (int64_t i = b; i < e; i++)
	{
		double		w = row_weight(p, i);

		sw += w;
		sr += w * ((double) p->label[i] - pred[i]);
	}
	return sw > 0 ? sr / sw : 0.0;
}

/* ------------------------------------------------------------- gradients */

/* One row's Logloss derivatives at raw score f: weight w, label y (the hessian floored). */
static inline void
logloss_derivatives(double f, double w, double y, double *g, double *h)
{
	double		s = sigmoid(f);

	*g = w * (s - y);
	*h = fmax(w * fmax(s * (1.0 - s), 1e-16), HESS_FLOOR);
}

void
gbml_boost_logloss_leaf_sums(const gbml_boost_problem *p, const double *pred, const uint16_t *leaf, int64_t first,
							 int64_t n, const double *value, uint16_t mask, uint16_t skip, double scale,
							 int64_t *g, int64_t *h)
{
	for (int64_t r = first; r < first + n; r++)
	{
		int			l = leaf[r] & mask;
		double		gr,
					hr;

		if (leaf[r] & skip)
			continue;
		logloss_derivatives(pred[r] + value[l], row_weight(p, r), (double) p->label[r], &gr, &hr);
		g[l] += (int64_t) llrint(gr * scale);
		h[l] += (int64_t) llrint(hr * scale);
	}
}

double
gbml_boost_logloss_derivative_bound(double max_weight)
{
	/* |w (s - y)| <= w and w s (1 - s) <= w / 4, floored at HESS_FLOOR */
	return fmax(max_weight, HESS_FLOOR);
}

int
gbml_boost_loss_gradients(gbml_boost_loss_kind kind, const gbml_boost_problem *p,
						  const double *pred, uint64_t seed, int64_t iteration,
						  double *grad, double *hess, gbml_env *env)
{
	gbml_boost_loss_options opt;

	gbml_boost_loss_default_options(&opt);
	return gbml_boost_loss_gradients_ex(kind, p, pred, seed, iteration, &opt, grad, hess, env);
}

static int
check_options(const gbml_boost_loss_options *opt, gbml_env *env)
{
	if (opt->pairlogit_max_pairs < 1 || opt->yetirank_permutations < 1 ||
		!(opt->yetirank_decay > 0 && opt->yetirank_decay <= 1) ||
		opt->lambdamart_truncation < 1 || !(opt->sigmoid > 0 && isfinite(opt->sigmoid)))
		return gbml_error(env, GBML_EINVAL, "invalid boosting loss options");
	return GBML_OK;
}

/* The derivatives of the losses whose rows (RMSE, Logloss) or queries (QueryRMSE) are each their own. */
static void
pointwise_gradients(gbml_boost_loss_kind kind, const gbml_boost_problem *p, const double *pred, int threads,
					double *grad, double *hess)
{
	int64_t		n = p->n;

	switch (kind)
	{
		case GBML_LOSS_RMSE:
#pragma omp parallel for schedule(static) num_threads(threads)
			for (int64_t i = 0; i < n; i++)
			{
				double		w = row_weight(p, i);

				grad[i] = w * (pred[i] - (double) p->label[i]);
				hess[i] = fmax(w, HESS_FLOOR);
			}
			break;

		case GBML_LOSS_LOGLOSS:
#pragma omp parallel for schedule(static) num_threads(threads)
			for (int64_t i = 0; i < n; i++)
				logloss_derivatives(pred[i], row_weight(p, i), (double) p->label[i], &grad[i], &hess[i]);
			break;

		case GBML_LOSS_QUERYRMSE:
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
			for (int64_t g = 0; g < p->n_groups; g++)
			{
				int64_t		b = p->group_offsets[g],
							e = p->group_offsets[g + 1];
				double		shift = query_shift(p, pred, b, e);

				for (int64_t i = b; i < e; i++)
				{
					double		w = row_weight(p, i);

					grad[i] = w * (pred[i] + shift - (double) p->label[i]);
					hess[i] = fmax(w, HESS_FLOOR);
				}
			}
			break;

		default:
			break;
	}
}

/*
 * The pairwise losses' derivatives (PairLogit, YetiRank, LambdaMART): a
 * query at a time, in its thread's scratch, from its own random stream.
 */
static int
pairwise_gradients(gbml_boost_loss_kind kind, const gbml_boost_problem *p, const double *pred, uint64_t it_seed,
				   const gbml_boost_loss_options *opt, int64_t max_group, double *grad, double *hess,
				   gbml_env *env)
{
	int			threads = env->threads;
	size_t		per_thread = scratch_bytes(max_group);
	char	   *scratch = gbml_alloc_array(env, (size_t) threads, per_thread);

	if (scratch == NULL)
		return env->error_code;

#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
	for (int64_t g = 0; g < p->n_groups; g++)
	{
		int64_t		b = p->group_offsets[g],
					e = p->group_offsets[g + 1];
		int			tid = 0;
		query_scratch qs;
		gbml_rng	rng;
		pair_sink	sink = {pred, NULL, b, grad, NULL, 0, 0, false};

#ifdef _OPENMP
		tid = omp_get_thread_num();
#endif
		scratch_carve(scratch + (size_t) tid * per_thread, max_group, &qs);
		if (kind != GBML_LOSS_LAMBDAMART)
		{
			query_exp(pred, b, e, 1.0, qs.ex);
			sink.ex = qs.ex;
		}
		for (int64_t i = b; i < e; i++)
			grad[i] = hess[i] = 0;

		switch (kind)
		{
			case GBML_LOSS_PAIRLOGIT:
				gbml_rng_stream(&rng, it_seed ^ PAIRLOGIT_SALT, query_stream(p, g));
				sink.hess = hess;
				pairlogit_query(p, b, e, opt->pairlogit_max_pairs, &rng, &qs, &sink);
				break;
			case GBML_LOSS_YETIRANK:
				gbml_rng_stream(&rng, it_seed, query_stream(p, g));
				sink.hess = opt->yetirank_newton ? hess : NULL;
				yetirank_query(p, b, e, opt, &rng, &qs, &sink);
				if (!opt->yetirank_newton)
					for (int64_t i = b; i < e; i++)
						hess[i] = row_weight(p, i);
				break;
			case GBML_LOSS_LAMBDAMART:
				lambdamart_query(p, b, e, opt, &qs, pred, grad, hess, NULL);
				if (p->weight)
					for (int64_t i = b; i < e; i++)
					{
						grad[i] *= p->weight[i];
						hess[i] *= p->weight[i];
					}
				break;
			default:
				break;
		}
		for (int64_t i = b; i < e; i++)
			hess[i] = fmax(hess[i], HESS_FLOOR);
	}
	gbml_free(env, scratch);
	return GBML_OK;
}

int
gbml_boost_loss_gradients_ex(gbml_boost_loss_kind kind, const gbml_boost_problem *p,
							 const double *pred, uint64_t seed, int64_t iteration,
							 const gbml_boost_loss_options *opt,
							 double *grad, double *hess, gbml_env *env)
{
	int64_t		max_group = 0;
	int			rc;

	if ((rc = check_options(opt, env)) != GBML_OK)
		return rc;
	if ((int) kind < 0 || kind > GBML_LOSS_LAMBDAMART)
		return gbml_error(env, GBML_EINVAL, "unknown boosting loss %d", (int) kind);
	if (gbml_boost_loss_is_ranking(kind) && !groups_valid(p, &max_group))
		return gbml_error(env, GBML_EINVAL,
						  "loss %s needs a group id on every row (contiguous groups)",
						  gbml_boost_loss_names[kind]);
	if (kind == GBML_LOSS_RMSE || kind == GBML_LOSS_LOGLOSS || kind == GBML_LOSS_QUERYRMSE)
	{
		pointwise_gradients(kind, p, pred, env->threads, grad, hess);
		return GBML_OK;
	}
	return pairwise_gradients(kind, p, pred, iteration_seed(seed, iteration), opt, max_group, grad, hess, env);
}

/* ------------------------------------------------------ objective / value */

/*
 * Query g's part of a query loss's objective: *obj, and *wsum its weight
 * (QueryRMSE: 1/2 w r^2 and w; the pair losses: the pairs' loss and
 * weight, their draws from query g's stream).  qs: scratch for a query
 * of the largest size.
 */
static void
query_objective(gbml_boost_loss_kind kind, const gbml_boost_problem *p, const double *pred, int64_t g,
				uint64_t it_seed, const gbml_boost_loss_options *opt, const query_scratch *qs, double *obj,
				double *wsum)
{
	int64_t		b = p->group_offsets[g],
				e = p->group_offsets[g + 1];
	gbml_rng	rng;
	pair_sink	sink = {pred, NULL, b, NULL, NULL, 0, 0, true};

	if (kind == GBML_LOSS_QUERYRMSE)
	{
		double		shift = query_shift(p, pred, b, e);

		*obj = *wsum = 0;
		for (int64_t i = b; i < e; i++)
		{
			double		w = row_weight(p, i),
						r = (double) p->label[i] - pred[i] - shift;

			*obj += 0.5 * w * r * r;
			*wsum += w;
		}
		return;
	}
	if (kind == GBML_LOSS_PAIRLOGIT)
	{
		gbml_rng_stream(&rng, it_seed ^ PAIRLOGIT_SALT, query_stream(p, g));
		pairlogit_query(p, b, e, opt->pairlogit_max_pairs, &rng, qs, &sink);
	}
	else if (kind == GBML_LOSS_YETIRANK)
	{
		gbml_rng_stream(&rng, it_seed, query_stream(p, g));
		yetirank_query(p, b, e, opt, &rng, qs, &sink);
	}
	else
		lambdamart_query(p, b, e, opt, qs, pred, NULL, NULL, &sink.obj);
	*obj = sink.obj;
	*wsum = sink.wsum;
}

/*
 * Sum of the objective (want_mean false) or its natural mean (true).  Runs on
 * one thread; the scratch for the ranking losses (a few bytes per row of the
 * largest query) comes from env (the plain forms pass a malloc env).
 */
static double
objective_impl(gbml_env *env, gbml_boost_loss_kind kind, const gbml_boost_problem *p, const double *pred,
			   uint64_t seed, int64_t iteration, const gbml_boost_loss_options *opt,
			   bool want_mean)
{
	int64_t		max_group = 0;
	double		sum = 0,
				wsum = 0;
	uint64_t	it_seed = iteration_seed(seed, iteration);
	void	   *scratch;
	query_scratch qs;

	if (kind == GBML_LOSS_RMSE || kind == GBML_LOSS_LOGLOSS)
	{
		for (int64_t i = 0; i < p->n; i++)
		{
			double		w = row_weight(p, i),
						y = p->label[i];

			if (kind == GBML_LOSS_RMSE)
				sum += 0.5 * w * (pred[i] - y) * (pred[i] - y);
			else
				sum += w * (softplus(pred[i]) - y * pred[i]);
			wsum += w;
		}
		if (!want_mean)
			return sum;
		if (!(wsum > 0))
			return 0;
		return kind == GBML_LOSS_RMSE ? sqrt(2 * sum / wsum) : sum / wsum;
	}
	if (!groups_valid(p, &max_group))
		return NAN;
	if (want_mean && (kind == GBML_LOSS_YETIRANK || kind == GBML_LOSS_LAMBDAMART))
		return 1.0 - gbml_mean_ndcg_env(env, pred, p->label, p->n_groups, p->group_offsets,
									RANK_VALUE_NDCG_K, NULL);
	scratch = gbml_alloc(env, scratch_bytes(max_group > 0 ? max_group : 1));
	if (scratch == NULL)
		return NAN;
	scratch_carve(scratch, max_group, &qs);
	for (int64_t g = 0; g < p->n_groups; g++)
	{
		double		obj,
					w;

		query_objective(kind, p, pred, g, it_seed, opt, &qs, &obj, &w);
		sum += obj;
		wsum += w;
	}
	gbml_free(env, scratch);
	if (!want_mean)
		return sum;
	if (kind == GBML_LOSS_QUERYRMSE)
		return wsum > 0 ? sqrt(2 * sum / wsum) : 0;
	return wsum > 0 ? sum / wsum : 0;
}

double
gbml_boost_loss_objective_ex(gbml_boost_loss_kind kind, const gbml_boost_problem *p,
							 const double *pred, uint64_t seed, int64_t iteration,
							 const gbml_boost_loss_options *opt)
{
	if ((int) kind < 0 || kind > GBML_LOSS_LAMBDAMART)
		return NAN;
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	return objective_impl(&env, kind, p, pred, seed, iteration, opt, false);
}

double
gbml_boost_loss_value(gbml_boost_loss_kind kind, const gbml_boost_problem *p, const double *pred)
{
	gbml_env	env;

	gbml_env_init_malloc(&env, 1);
	return gbml_boost_loss_value_env(&env, kind, p, pred);
}

double
gbml_boost_loss_value_env(gbml_env *env, gbml_boost_loss_kind kind, const gbml_boost_problem *p,
						  const double *pred)
{
	gbml_boost_loss_options opt;

	if ((int) kind < 0 || kind > GBML_LOSS_LAMBDAMART)
		return NAN;
	gbml_boost_loss_default_options(&opt);
	return objective_impl(env, kind, p, pred, 0, 0, &opt, true);
}

/* Row i's terms (the last two 0 without predictions, each only `with` it). */
static inline void
row_terms(const gbml_boost_problem *p, const double *pred, unsigned with, int64_t i, double *term)
{
	double		w = row_weight(p, i),
				y = p->label[i];

	term[GBML_BOOST_TERM_W] = w;
	term[GBML_BOOST_TERM_WY] = w * y;
	term[GBML_BOOST_TERM_SQERR] = pred && (with & GBML_BOOST_WITH_SQERR) ? w * (pred[i] - y) * (pred[i] - y) : 0;
	term[GBML_BOOST_TERM_LOGLOSS] = pred && (with & GBML_BOOST_WITH_LOGLOSS) ? w * (softplus(pred[i]) - y * pred[i]) : 0;
}

void
gbml_boost_term_maxima(const gbml_boost_problem *p, const double *pred, unsigned with, double *max)
{
	for (int t = 0; t < GBML_BOOST_N_TERMS; t++)
		max[t] = 0;
	for (int64_t i = 0; i < p->n; i++)
	{
		double		term[GBML_BOOST_N_TERMS];

		row_terms(p, pred, with, i, term);
		for (int t = 0; t < GBML_BOOST_N_TERMS; t++)
			gbml_boost_term_max_fold(&max[t], term[t]);
	}
}

void
gbml_boost_term_scales(const double *max, int n_terms, int64_t n, double *scale)
{
	for (int t = 0; t < n_terms; t++)
		scale[t] = isfinite(max[t]) ? gbml_boost_fixed_scale(max[t], n) : 0.0;
}

void
gbml_boost_term_sums(const gbml_boost_problem *p, const double *pred, unsigned with, const double *scale,
					 int64_t *sum)
{
	for (int t = 0; t < GBML_BOOST_N_TERMS; t++)
		sum[t] = 0;
	for (int64_t i = 0; i < p->n; i++)
	{
		double		term[GBML_BOOST_N_TERMS];

		row_terms(p, pred, with, i, term);
		for (int t = 0; t < GBML_BOOST_N_TERMS; t++)
			sum[t] += gbml_boost_term_fixed(term[t], scale[t]);
	}
}

double
gbml_boost_term_value(const int64_t *sum, const double *scale, gbml_boost_term t)
{
	return scale[t] > 0 ? (double) sum[t] / scale[t] : NAN;
}

double
gbml_boost_base_from_sums(gbml_boost_loss_kind kind, const int64_t *sum, const double *scale)
{
	double		sw = gbml_boost_term_value(sum, scale, GBML_BOOST_TERM_W),
				sy = gbml_boost_term_value(sum, scale, GBML_BOOST_TERM_WY),
				mean;

	if (kind != GBML_LOSS_RMSE && kind != GBML_LOSS_LOGLOSS)
		return 0.0;
	if (!(sw > 0) || !isfinite(sy))
		return 0.0;
	mean = sy / sw;
	if (kind == GBML_LOSS_RMSE)
		return mean;
	mean = fmin(fmax(mean, LOGLOSS_MEAN_CLAMP), 1.0 - LOGLOSS_MEAN_CLAMP);
	return log(mean / (1.0 - mean));
}

double
gbml_boost_loss_base_score(gbml_boost_loss_kind kind, const gbml_boost_problem *p)
{
	double		max[GBML_BOOST_N_TERMS],
				scale[GBML_BOOST_N_TERMS];
	int64_t		sum[GBML_BOOST_N_TERMS];

	if (kind != GBML_LOSS_RMSE && kind != GBML_LOSS_LOGLOSS)
		return 0.0;
	gbml_boost_term_maxima(p, NULL, 0, max);
	gbml_boost_term_scales(max, GBML_BOOST_N_TERMS, p->n, scale);
	gbml_boost_term_sums(p, NULL, 0, scale, sum);
	return gbml_boost_base_from_sums(kind, sum, scale);
}

int
gbml_boost_group_terms(gbml_env *env, gbml_boost_loss_kind kind, int ndcg_k, const gbml_boost_problem *p,
					   const double *pred, const double *ideal, double *num, double *den)
{
	int64_t		max_group = 0;
	gbml_boost_loss_options opt;
	void	   *scratch;
	query_scratch qs;

	if (!groups_valid(p, &max_group))
		return gbml_error(env, GBML_EINVAL, "boost: the rows' query groups are not valid");
	if (ndcg_k > 0 || kind == GBML_LOSS_YETIRANK || kind == GBML_LOSS_LAMBDAMART)
	{
		/* NDCG, or the loss value 1 - NDCG@10 */
		gbml_ndcg_per_group_env(env, pred, p->label, p->n_groups, p->group_offsets,
								ndcg_k > 0 ? ndcg_k : RANK_VALUE_NDCG_K, ndcg_k > 0 ? ideal : NULL, num);
		for (int64_t g = 0; g < p->n_groups; g++)
			den[g] = 1.0;
		return GBML_OK;
	}
	if (kind != GBML_LOSS_QUERYRMSE && kind != GBML_LOSS_PAIRLOGIT)
		return gbml_error(env, GBML_EINVAL, "boost: %s has no per-query terms", gbml_boost_loss_names[kind]);
	/* the loss value's terms, as gbml_boost_loss_value_env sums them */
	gbml_boost_loss_default_options(&opt);
	if ((scratch = gbml_alloc(env, scratch_bytes(max_group > 0 ? max_group : 1))) == NULL)
		return env->error_code;
	scratch_carve(scratch, max_group, &qs);
	for (int64_t g = 0; g < p->n_groups; g++)
		query_objective(kind, p, pred, g, iteration_seed(0, 0), &opt, &qs, &num[g], &den[g]);
	gbml_free(env, scratch);
	return GBML_OK;
}

double
gbml_boost_group_value(gbml_boost_loss_kind kind, int ndcg_k, const int64_t *sum, const double *scale)
{
	double		num = gbml_boost_term_value(sum, scale, 0),
				den = gbml_boost_term_value(sum, scale, 1);

	if (ndcg_k > 0)
		return den > 0 ? num / den : NAN;
	if (kind == GBML_LOSS_YETIRANK || kind == GBML_LOSS_LAMBDAMART)
		return den > 0 ? 1.0 - num / den : NAN;
	if (kind == GBML_LOSS_QUERYRMSE)
		return den > 0 ? sqrt(2 * num / den) : 0;
	return den > 0 ? num / den : 0;
}
