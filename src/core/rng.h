/*
 * rng.h — the engine's one random number generator (xoshiro256** seeded by
 * splitmix64).  Deterministic across platforms and thread counts: trainers
 * draw from it only on the main thread, or give each chunk its own stream
 * with gbml_rng_stream(seed, chunk_index).
 */
#ifndef GBML_RNG_H
#define GBML_RNG_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct gbml_rng
{
	uint64_t	s[4];
} gbml_rng;

static inline uint64_t
gbml_splitmix64(uint64_t *x)
{
	uint64_t	z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline void
gbml_rng_seed(gbml_rng *r, uint64_t seed)
{
	uint64_t	x = seed;

	for (int i = 0; i < 4; i++)
		r->s[i] = gbml_splitmix64(&x);
}

/* An independent stream for (seed, index), e.g. one per chunk. */
static inline void
gbml_rng_stream(gbml_rng *r, uint64_t seed, uint64_t index)
{
	uint64_t	x = seed ^ (index * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);

	gbml_rng_seed(r, gbml_splitmix64(&x));
}

static inline uint64_t
gbml_rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t
gbml_rng_next(gbml_rng *r)
{
	uint64_t   *s = r->s;
	uint64_t	result = gbml_rng_rotl(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = gbml_rng_rotl(s[3], 45);
	return result;
}

/* Uniform double in [0, 1). */
static inline double
gbml_rng_uniform(gbml_rng *r)
{
	return (double) (gbml_rng_next(r) >> 11) * 0x1.0p-53;
}

/* The ziggurat behind gbml_rng_normal (rng_normal.c): its layers, their right edges x and inner shares. */
#define GBML_NORMAL_LAYERS 128
#define GBML_NORMAL_TAIL 3.442619855899	/* x[1]: where the base layer's tail starts */
extern const double gbml_normal_layer_x[GBML_NORMAL_LAYERS + 1];
extern const double gbml_normal_layer_inner[GBML_NORMAL_LAYERS];
extern double gbml_rng_normal_slow(gbml_rng *r, double u, int layer);

/*
 * A ziggurat point: one output's top 53 bits give *u in [-1, 1), its low 7
 * bits the layer (returned); true when u is inside the layer's inner
 * rectangle (98.8% of points), where u x the layer's width is the draw.
 */
static inline bool
gbml_rng_normal_point(gbml_rng *r, double *u, int *layer)
{
	uint64_t	bits = gbml_rng_next(r);

	*u = 2.0 * ((double) (bits >> 11) * 0x1.0p-53) - 1.0;
	*layer = (int) (bits & (GBML_NORMAL_LAYERS - 1));
	return fabs(*u) < gbml_normal_layer_inner[*layer];
}

/* A standard normal draw (a ziggurat): a point inside its layer's rectangle, else the slow path. */
static inline double
gbml_rng_normal(gbml_rng *r)
{
	double		u;
	int			layer;

	if (gbml_rng_normal_point(r, &u, &layer))
		return u * gbml_normal_layer_x[layer];
	return gbml_rng_normal_slow(r, u, layer);
}

/* Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, unbiased enough for n < 2^32). */
static inline uint64_t
gbml_rng_below(gbml_rng *r, uint64_t n)
{
	return (uint64_t) (((unsigned __int128) gbml_rng_next(r) * n) >> 64);
}

/* Fisher-Yates shuffles of index arrays (one definition, two element types). */
#define GBML_RNG_SHUFFLE(name, type) \
static inline void \
name(gbml_rng *r, type *a, uint64_t n) \
{ \
	for (uint64_t i = n; i > 1; i--) \
	{ \
		uint64_t	j = gbml_rng_below(r, i); \
		type		t = a[i - 1]; \
 \
		a[i - 1] = a[j]; \
		a[j] = t; \
	} \
}
GBML_RNG_SHUFFLE(gbml_rng_shuffle_u32, uint32_t)
GBML_RNG_SHUFFLE(gbml_rng_shuffle_u64, uint64_t)
#undef GBML_RNG_SHUFFLE

#endif
