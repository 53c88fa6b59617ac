/*
 * boost_predict_fast.c — the single-row scorer's fast path (the SQL
 * `ORDER BY gbml.predict(...)` case): SIMD over trees instead of rows.
 *
 * At load time every split (feature, border) becomes (position of the
 * feature among the used ones, index of the border among that feature's
 * sorted split borders), laid out 64 trees at a time as bytes.  Per row:
 *   1. quantize: bin[u] = how many of feature u's split borders x[u] exceeds
 *      (AVX-512 compares; NaN exceeds none, exactly like `x > border`);
 *   2. per block of 64 trees and per level, one VPERMI2B fetches the 64
 *      trees' bins, one byte compare against the border indices gives the
 *      level's bit for all 64 trees;
 *   3. leaf values are loaded per tree (independent loads overlap);
 *   4. the sum uses the four fixed accumulators of gbml_boost_combine, as
 *      every scorer does, so the score is bit-identical to the scalar one.
 * Needs AVX-512 VBMI (Ice Lake, Zen 4 and later), or AVX2 (Haswell, Zen 1
 * and later: the same layout, 8 features a compare, and each level's 64
 * bins fetched 32 at a time by PSHUFB from the bins' 16-byte pieces);
 * other CPUs keep the scalar path.  GBML_FAST_SCORER=avx2 takes the AVX2
 * kernel on an AVX-512 CPU too (the tests check both against the scalar
 * scorer), GBML_NO_FAST_SCORER the scalar path.  x > border  <=>  bin >
 * border index, because the borders are sorted and unique.
 */
#include "boost_predict.h"
#include "boost_cat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_FAST_PATH 1
#endif

#define BLOCK_TREES 64
#define MAX_USED 128
#define MAX_DEPTH 8

typedef enum fast_kernel
{
	FAST_AVX512,
	FAST_AVX2
} fast_kernel;

typedef struct gbml_boost_fast
{
	fast_kernel kernel;
	int			depth;
	int			n_blocks;
	int			stride;			/* borders per feature, padded to a multiple of 16 */
	float	   *borders;		/* n_used * stride, +inf padded */
	int			n_used16;		/* n_used rounded up to 16 */
	float	   *borders_t;		/* stride * n_used16: border k of feature u at [k * n_used16 + u] */
	float	   *coarse;			/* n_used * 16: the last border of each 16-border segment, +inf padded */
	int32_t    *feature_of;		/* n_used16: the row position of used feature u (0 for padding) */
	int32_t    *run8;			/* n_used16 / 8: where used features 8g .. 8g + 7 lie in a row one after
								 * another (a load, not a gather), or -1 */
	uint8_t    *pos;			/* n_blocks * depth * 64 */
	uint8_t    *thr;			/* n_blocks * depth * 64 */
	uint8_t    *level_pieces;	/* n_blocks * depth: the 16-feature pieces a block's level reads
								 * (its largest position's piece + 1; the AVX2 kernel's lookups) */
} gbml_boost_fast;

static int
cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return x < y ? -1 : x > y;
}

void
gbml_boost_forest_free_fast(gbml_boost_forest *f, gbml_env *env)
{
	gbml_boost_fast *fast = (gbml_boost_fast *) f->fast;

	if (fast == NULL)
		return;
	gbml_free(env, fast->borders);
	gbml_free(env, fast->borders_t);
	gbml_free(env, fast->coarse);
	gbml_free(env, fast->feature_of);
	gbml_free(env, fast->run8);
	gbml_free(env, fast->pos);
	gbml_free(env, fast->thr);
	gbml_free(env, fast->level_pieces);
	gbml_free(env, fast);
	f->fast = NULL;
}

#ifdef HAVE_FAST_PATH
/*
 * What only the AVX2 kernel reads, from the layout built so far: each
 * 16-border segment's last border (its two-level search), where 8 used
 * features lie one after another in the row (a load, not a gather), and
 * the pieces each block's level reads.
 */
static int
prepare_avx2(const gbml_boost_forest *f, gbml_boost_fast *fast, gbml_env *env)
{
	const int	d = fast->depth;

	/* each segment's last border: the AVX2 kernel's first level of a two-level search */
	if ((fast->coarse = gbml_alloc_array(env, (size_t) f->n_used * 16, sizeof(float))) == NULL)
		return env->error_code;
	for (int u = 0; u < f->n_used; u++)
		for (int j = 0; j < 16; j++)
			fast->coarse[(size_t) u * 16 + j] =
				16 * j < fast->stride ? fast->borders[(size_t) u * fast->stride + 16 * j + 15] : INFINITY;
	/* groups of 8 used features in consecutive row positions, 8 floats inside the row: loaded, not gathered */
	if ((fast->run8 = gbml_alloc_array(env, (size_t) fast->n_used16 / 8, sizeof(int32_t))) == NULL)
		return env->error_code;
	for (int g = 0; g < fast->n_used16; g += 8)
	{
		int			first = fast->feature_of[g];
		bool		run = first + 8 <= (f->inputs ? f->n_used : f->n_features);

		for (int i = 1; i < 8 && run; i++)
			run = g + i >= f->n_used ? !f->inputs : fast->feature_of[g + i] == first + i;
		fast->run8[g / 8] = run ? first : -1;
	}
	/* a model's later trees often split on a few features: a level whose splits use the first pieces only reads those */
	if ((fast->level_pieces = gbml_alloc_array(env, (size_t) fast->n_blocks * d, 1)) == NULL)
		return env->error_code;
	for (size_t bl = 0; bl < (size_t) fast->n_blocks * d; bl++)
	{
		int			top = 0;

		for (int j = 0; j < BLOCK_TREES; j++)
			top = fast->pos[bl * BLOCK_TREES + j] > top ? fast->pos[bl * BLOCK_TREES + j] : top;
		fast->level_pieces[bl] = (uint8_t) (top / 16 + 1);
	}
	return GBML_OK;
}
#endif

int
gbml_boost_forest_prepare_fast(gbml_boost_forest *f, gbml_env *env)
{
#ifdef HAVE_FAST_PATH
	gbml_boost_fast *fast;
	int			d = f->uniform_depth;
	int64_t		n_splits;
	int			max_m = 0;
	float	   *tmp;
	int64_t    *off;
	const char *force = getenv("GBML_FAST_SCORER");
	bool		avx512 = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw") &&
		!(force && strcmp(force, "avx2") == 0);

	f->fast = NULL;
	if (getenv("GBML_NO_FAST_SCORER") || (!avx512 && !__builtin_cpu_supports("avx2")) || d < 1 || d > MAX_DEPTH ||
		f->n_used < 1 || f->n_used > MAX_USED || f->n_trees < 1 || f->n_classes > 0)
		return GBML_OK;
	n_splits = (int64_t) f->n_trees * d;

	/*
	 * Distinct split borders per used feature, sorted, packed in tmp: feature
	 * u's at tmp[off[u] .. off[u + 1]) (gathered there, sorted, then
	 * de-duplicated in place; the packed total never exceeds n_splits).
	 */
	off = gbml_alloc_array(env, (size_t) f->n_used + 1, sizeof(int64_t));
	tmp = gbml_alloc_array(env, (size_t) n_splits, sizeof(float));
	fast = gbml_alloc0(env, sizeof(gbml_boost_fast));
	if (off == NULL || tmp == NULL || fast == NULL)
		goto oom;
	off[0] = 0;
	for (int u = 0; u < f->n_used; u++)
	{
		float	   *seg = tmp + off[u];
		int			m = 0,
					uniq = 0;

		for (int64_t s = 0; s < n_splits; s++)
			if (f->feature_pos[s] == u)
				seg[m++] = f->border[s];
		qsort(seg, (size_t) m, sizeof(float), cmp_float);
		for (int i = 0; i < m; i++)
			if (uniq == 0 || seg[i] != seg[uniq - 1])
				seg[uniq++] = seg[i];
		off[u + 1] = off[u] + uniq;
		if (uniq > max_m)
			max_m = uniq;
	}
	if (max_m > 255)
	{
		gbml_free(env, off);
		gbml_free(env, tmp);
		gbml_free(env, fast);
		return GBML_OK;			/* border indices would not fit a byte */
	}
	fast->kernel = avx512 ? FAST_AVX512 : FAST_AVX2;
	fast->depth = d;
	fast->n_blocks = (f->n_trees + BLOCK_TREES - 1) / BLOCK_TREES;
	fast->stride = (max_m + 15) / 16 * 16;
	fast->borders = gbml_alloc_array(env, (size_t) f->n_used * fast->stride, sizeof(float));
	fast->pos = gbml_alloc_array(env, (size_t) fast->n_blocks * d * BLOCK_TREES, 1);
	fast->thr = gbml_alloc_array(env, (size_t) fast->n_blocks * d * BLOCK_TREES, 1);
	if (fast->borders == NULL || fast->pos == NULL || fast->thr == NULL)
		goto oom;
	for (int u = 0; u < f->n_used; u++)
	{
		float	   *ub = fast->borders + (size_t) u * fast->stride;
		int			uniq = (int) (off[u + 1] - off[u]);

		memcpy(ub, tmp + off[u], sizeof(float) * (size_t) uniq);
		for (int i = uniq; i < fast->stride; i++)
			ub[i] = INFINITY;
	}
	/* transposed borders: 16 features compared at once, one border rank at a time */
	fast->n_used16 = (f->n_used + 15) / 16 * 16;
	fast->borders_t = gbml_alloc_array(env, (size_t) fast->stride * fast->n_used16, sizeof(float));
	fast->feature_of = gbml_alloc_array(env, (size_t) fast->n_used16, sizeof(int32_t));
	if (fast->borders_t == NULL || fast->feature_of == NULL)
		goto oom;
	for (int u = 0; u < fast->n_used16; u++)
	{
		/* with categorical inputs the used features are computed into a buffer first: gathered from there */
		fast->feature_of[u] = u >= f->n_used ? 0 : f->inputs ? u : f->used_features[u];
		for (int k = 0; k < fast->stride; k++)
			fast->borders_t[(size_t) k * fast->n_used16 + u] =
				u < f->n_used ? fast->borders[(size_t) u * fast->stride + k] : INFINITY;
	}
	/* padding trees: feature 0, threshold 255 (never exceeded) */
	memset(fast->pos, 0, (size_t) fast->n_blocks * d * BLOCK_TREES);
	memset(fast->thr, 255, (size_t) fast->n_blocks * d * BLOCK_TREES);
	for (int t = 0; t < f->n_trees; t++)
	{
		int			b = t / BLOCK_TREES,
					j = t % BLOCK_TREES;

		for (int l = 0; l < d; l++)
		{
			int64_t		s = f->split_off[t] + l;
			int			u = f->feature_pos[s];
			const float *ub = fast->borders + (size_t) u * fast->stride;
			int			k = 0;

			while (ub[k] != f->border[s])
				k++;
			fast->pos[((size_t) b * d + l) * BLOCK_TREES + j] = (uint8_t) u;
			fast->thr[((size_t) b * d + l) * BLOCK_TREES + j] = (uint8_t) k;
		}
	}
	if (fast->kernel == FAST_AVX2 && prepare_avx2(f, fast, env) != GBML_OK)
		goto oom;
	gbml_free(env, off);
	gbml_free(env, tmp);
	f->fast = fast;
	return GBML_OK;
oom:
	gbml_free(env, off);
	gbml_free(env, tmp);
	f->fast = fast;				/* NULL or partly filled: free_fast releases what is there */
	gbml_boost_forest_free_fast(f, env);
	return env->error_code;
#else
	(void) env;
	f->fast = NULL;
	return GBML_OK;
#endif
}

#ifdef HAVE_FAST_PATH
/*
 * The row the quantizer reads: with categorical inputs, the used model
 * features computed into out[0 .. n_used) (boost_cat.h); else x itself,
 * all its cache lines asked for at once (the row usually comes straight
 * from a heap page: better than missing on them gather by gather).
 */
static const float *
quantizer_row(const gbml_boost_forest *f, const float *x, float *out)
{
	if (f->inputs == NULL)
	{
		for (int i = 0; i < f->n_features; i += 16)
			__builtin_prefetch(x + i);
		return x;
	}
	for (int u = 0; u < f->n_used; u++)
		out[u] = gbml_boost_input_value(f->inputs, f->used_features[u], x);
	return out;
}

/* The score from the four accumulators' lanes, as every scorer combines them. */
__attribute__((target("avx")))
static double
lanes_score(const gbml_boost_forest *f, __m256d acc4)
{
	double		acc[GBML_BOOST_LANES];

	_mm256_storeu_pd(acc, acc4);
	return gbml_boost_combine(f->base_score, acc);
}

/*
 * Leaf values of the block of trees from `first` (n of them, their leaf
 * indices in idx_bytes) into acc4's lanes: tree first + j into lane j mod 4
 * (first is a multiple of 64), in tree order, as every scorer sums them.
 */
__attribute__((target("avx,avx2")))
static __m256d
add_block_leaves(const gbml_boost_forest *f, int d, int first, int n, const uint8_t *idx_bytes, __m256d acc4)
{
	const float *leaf = f->leaf + ((size_t) first << d);
	double		acc[GBML_BOOST_LANES];
	int			j = 0;

	for (; j + 4 <= n; j += 4, leaf += (size_t) 4 << d)
	{
		__m128		v = _mm_setr_ps(leaf[idx_bytes[j]], leaf[((size_t) 1 << d) + idx_bytes[j + 1]],
									leaf[((size_t) 2 << d) + idx_bytes[j + 2]],
									leaf[((size_t) 3 << d) + idx_bytes[j + 3]]);

		acc4 = _mm256_add_pd(acc4, _mm256_cvtps_pd(v));
	}
	if (j < n)
	{
		_mm256_storeu_pd(acc, acc4);
		for (; j < n; j++, leaf += (size_t) 1 << d)
			acc[j & 3] += (double) leaf[idx_bytes[j]];
		acc4 = _mm256_loadu_pd(acc);
	}
	return acc4;
}

__attribute__((target("avx,avx512f,avx512bw,avx512vl,avx512vbmi")))
static double
predict_avx512(const gbml_boost_forest *f, const float *x)
{
	const gbml_boost_fast *fast = f->fast;
	uint8_t		bins[MAX_USED] __attribute__((aligned(64)));
	uint8_t		idx_bytes[BLOCK_TREES] __attribute__((aligned(64)));
	const int	d = fast->depth;
	float		computed[MAX_USED];
	__m256d		acc4 = _mm256_setzero_pd();
	__m512i		tbl_lo,
				tbl_hi;

	/* 1. quantize the used features, 16 at a time: count the borders each exceeds */
	x = quantizer_row(f, x, computed);
	memset(bins, 0, sizeof(bins));
	for (int g = 0; g < fast->n_used16; g += 16)
	{
		__m512		xv = _mm512_i32gather_ps(_mm512_loadu_si512(fast->feature_of + g), x, 4);
		__m512i		even = _mm512_setzero_si512(),
					odd = _mm512_setzero_si512();
		const __m512i one = _mm512_set1_epi32(1);
		const float *bt = fast->borders_t + g;
		const size_t step = (size_t) fast->n_used16;

		/* two independent counters (stride is a multiple of 16, so even) */
		for (int k = 0; k < fast->stride; k += 2)
		{
			__mmask16	gt0 = _mm512_cmp_ps_mask(xv, _mm512_loadu_ps(bt + (size_t) k * step), _CMP_GT_OQ);
			__mmask16	gt1 = _mm512_cmp_ps_mask(xv, _mm512_loadu_ps(bt + (size_t) (k + 1) * step), _CMP_GT_OQ);

			even = _mm512_mask_add_epi32(even, gt0, even, one);
			odd = _mm512_mask_add_epi32(odd, gt1, odd, one);
		}
		_mm_storeu_si128((__m128i *) (bins + g), _mm512_cvtepi32_epi8(_mm512_add_epi32(even, odd)));
	}
	tbl_lo = _mm512_load_si512(bins);
	tbl_hi = _mm512_load_si512(bins + 64);

	for (int b = 0; b < fast->n_blocks; b++)
	{
		__m512i		idx = _mm512_setzero_si512();
		int			first = b * BLOCK_TREES;
		int			n = f->n_trees - first < BLOCK_TREES ? f->n_trees - first : BLOCK_TREES;

		/* 2. leaf index of 64 trees, one level at a time */
		for (int l = 0; l < d; l++)
		{
			size_t		o = ((size_t) b * d + l) * BLOCK_TREES;
			__m512i		pos = _mm512_loadu_si512(fast->pos + o);
			__m512i		thr = _mm512_loadu_si512(fast->thr + o);
			__m512i		tb = _mm512_permutex2var_epi8(tbl_lo, pos, tbl_hi);
			__mmask64	bit = _mm512_cmpgt_epu8_mask(tb, thr);

			idx = _mm512_mask_add_epi8(idx, bit, idx, _mm512_set1_epi8((char) (1 << l)));
		}
		/*
		 * 3.-4. leaf values by plain loads (measured faster than 16-lane
		 * gathers here: the 128 KB leaf table sits in L2, and independent
		 * loads overlap), into accumulator t mod 4 in tree order.
		 */
		_mm512_store_si512(idx_bytes, idx);
		acc4 = add_block_leaves(f, d, first, n, idx_bytes, acc4);
	}
	return lanes_score(f, acc4);
}

/* 1. (AVX2) bins[u] = how many of used feature u's split borders x[u] exceeds, 8 features a compare. */
__attribute__((target("avx,avx2")))
static void
quantize_avx2(const gbml_boost_fast *fast, const float *x, uint8_t *bins)
{
	const size_t step = (size_t) fast->n_used16;

	for (int g = 0; g < fast->n_used16; g += 8)
	{
		__m256		xv = fast->run8[g / 8] >= 0 ? _mm256_loadu_ps(x + fast->run8[g / 8])
			: _mm256_i32gather_ps(x, _mm256_loadu_si256((const __m256i *) (fast->feature_of + g)), 4);
		__m256i		even = _mm256_setzero_si256(),
					odd = _mm256_setzero_si256();
		const float *bt = fast->borders_t + g;
		int32_t		count[8];

		/* a compare's true lanes are -1: subtracting counts them (stride is even) */
		for (int k = 0; k < fast->stride; k += 2)
		{
			__m256		gt0 = _mm256_cmp_ps(xv, _mm256_loadu_ps(bt + (size_t) k * step), _CMP_GT_OQ);
			__m256		gt1 = _mm256_cmp_ps(xv, _mm256_loadu_ps(bt + (size_t) (k + 1) * step), _CMP_GT_OQ);

			even = _mm256_sub_epi32(even, _mm256_castps_si256(gt0));
			odd = _mm256_sub_epi32(odd, _mm256_castps_si256(gt1));
		}
		_mm256_storeu_si256((__m256i *) count, _mm256_add_epi32(even, odd));
		for (int i = 0; i < 8; i++)
			bins[g + i] = (uint8_t) count[i];
	}
}

/* The borders of the 16 at seg that are below x (x > border; none for NaN). */
__attribute__((target("avx,avx2,popcnt")))
static inline int
count_below16(const float *seg, __m256 xv)
{
	return __builtin_popcount((unsigned) _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(seg), xv, _CMP_LT_OQ))) +
		__builtin_popcount((unsigned) _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(seg + 8), xv, _CMP_LT_OQ)));
}

/*
 * 1. (AVX2, many borders a feature) the same counts by a two-level search:
 * the segments of 16 borders wholly below x (their last border below it:
 * the borders are sorted, so a prefix of segments), then the borders below
 * x in the next segment.  Four compares a feature whatever the borders.
 */
__attribute__((target("avx,avx2,popcnt")))
static void
quantize_avx2_search(const gbml_boost_fast *fast, int n_used, const float *x, uint8_t *bins)
{
	memset(bins, 0, (size_t) fast->n_used16);
	for (int u = 0; u < n_used; u++)
	{
		__m256		xv = _mm256_set1_ps(x[fast->feature_of[u]]);
		int			below = 16 * count_below16(fast->coarse + (size_t) u * 16, xv);

		/* (below == stride: x is above every border of a feature with stride borders) */
		if (below < fast->stride)
			below += count_below16(fast->borders + (size_t) u * fast->stride + below, xv);
		bins[u] = (uint8_t) below;
	}
}

/*
 * 2. (AVX2) one level's bins of a block's 64 trees, 32 in each of *out0
 * and *out1: bins[pos[j]] for each byte of pos0 and pos1, from the bins'
 * 16-byte pieces (PSHUFB looks up 16 entries; the piece is the index's
 * high nibble).  Both halves in one pass: two independent chains.
 */
__attribute__((target("avx,avx2")))
static inline void
level_bins_avx2(const __m256i *pieces, int n_pieces, __m256i pos0, __m256i pos1, __m256i *out0, __m256i *out1)
{
	const __m256i below_top = _mm256_set1_epi8(0x70),
				piece = _mm256_set1_epi8(0x10);
	__m256i		q0 = pos0,
				q1 = pos1,
				o0 = _mm256_setzero_si256(),
				o1 = _mm256_setzero_si256();

	/*
	 * q = pos - 16 c (bytes, wrapping): in [0, 16) exactly for the
	 * positions in piece c, which adding 0x70 with unsigned saturation keeps
	 * below 0x80 with the low nibble intact; every other position ends at
	 * 0x80 or more (pos < 128), where PSHUFB gives 0.  So each piece is an
	 * add, a lookup and an OR, no compare or blend chained through `out`.
	 */
	for (int c = 0; c < n_pieces; c++)
	{
		o0 = _mm256_or_si256(o0, _mm256_shuffle_epi8(pieces[c], _mm256_adds_epu8(q0, below_top)));
		o1 = _mm256_or_si256(o1, _mm256_shuffle_epi8(pieces[c], _mm256_adds_epu8(q1, below_top)));
		q0 = _mm256_sub_epi8(q0, piece);
		q1 = _mm256_sub_epi8(q1, piece);
	}
	*out0 = o0;
	*out1 = o1;
}

/*
 * idx with bit l set in the bytes where the bin exceeds the border index
 * (unsigned: bin <= thr iff max(bin, thr) == thr).
 */
__attribute__((target("avx,avx2")))
static inline __m256i
add_level_bit(__m256i idx, __m256i bins, __m256i thr, int l)
{
	__m256i		not_above = _mm256_cmpeq_epi8(_mm256_max_epu8(bins, thr), thr);

	return _mm256_or_si256(idx, _mm256_andnot_si256(not_above, _mm256_set1_epi8((char) (1 << l))));
}

__attribute__((target("avx,avx2")))
static double
predict_avx2(const gbml_boost_forest *f, const float *x)
{
	const gbml_boost_fast *fast = f->fast;
	uint8_t		bins[MAX_USED] __attribute__((aligned(32)));
	uint8_t		idx_bytes[BLOCK_TREES] __attribute__((aligned(32)));
	const int	d = fast->depth,
				n_pieces = fast->n_used16 / 16;
	float		computed[MAX_USED];
	__m256i		pieces[MAX_USED / 16];
	__m256d		acc4 = _mm256_setzero_pd();

	x = quantizer_row(f, x, computed);
	/* counting every border (8 features a compare) or searching (four compares a feature): fewer compares */
	if (fast->stride > 32)
		quantize_avx2_search(fast, f->n_used, x, bins);
	else
		quantize_avx2(fast, x, bins);
	/* each 16-byte piece of the bins in both 128-bit lanes (PSHUFB looks up within a lane) */
	for (int c = 0; c < n_pieces; c++)
		pieces[c] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) (bins + 16 * c)));

	for (int b = 0; b < fast->n_blocks; b++)
	{
		int			first = b * BLOCK_TREES;
		int			n = f->n_trees - first < BLOCK_TREES ? f->n_trees - first : BLOCK_TREES;
		__m256i		idx0 = _mm256_setzero_si256(),
					idx1 = _mm256_setzero_si256();

		/* 2. leaf index of 64 trees (32 in each half), one level at a time */
		for (int l = 0; l < d; l++)
		{
			const size_t o = ((size_t) b * d + l) * BLOCK_TREES;
			__m256i		tb0,
						tb1;

			level_bins_avx2(pieces, fast->level_pieces[(size_t) b * d + l],
							_mm256_loadu_si256((const __m256i *) (fast->pos + o)),
							_mm256_loadu_si256((const __m256i *) (fast->pos + o + 32)), &tb0, &tb1);
			idx0 = add_level_bit(idx0, tb0, _mm256_loadu_si256((const __m256i *) (fast->thr + o)), l);
			idx1 = add_level_bit(idx1, tb1, _mm256_loadu_si256((const __m256i *) (fast->thr + o + 32)), l);
		}
		_mm256_store_si256((__m256i *) idx_bytes, idx0);
		_mm256_store_si256((__m256i *) (idx_bytes + 32), idx1);
		/* 3.-4. leaf values */
		acc4 = add_block_leaves(f, d, first, n, idx_bytes, acc4);
	}
	return lanes_score(f, acc4);
}

double
gbml_boost_forest_predict_fast(const gbml_boost_forest *f, const float *x)
{
	return ((const gbml_boost_fast *) f->fast)->kernel == FAST_AVX2 ? predict_avx2(f, x) : predict_avx512(f, x);
}
#else
double
gbml_boost_forest_predict_fast(const gbml_boost_forest *f, const float *x)
{
	(void) f;
	(void) x;
	return NAN;
}
#endif
