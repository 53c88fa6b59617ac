/*
 * gen_rows.c — synthetic training rows as a PostgreSQL binary COPY stream,
 * for the benchmarks that need millions of wide rows (building them in SQL
 * costs minutes per million; COPY FROM STDIN (FORMAT binary) loads this at
 * disk speed).
 *
 *     gen_rows N D [seed] | psql -c "COPY t FROM STDIN (FORMAT binary)"
 *
 * into CREATE TABLE t (id bigint, query bigint, f real[], relevance real,
 * clicked real).  Rows come from 16 Gaussian blobs (so K-Means has clusters
 * to find); relevance (0..4) grows with a fixed linear score of the features
 * plus noise, per query of 20 rows; clicked = relevance >= 2.  Deterministic
 * in (N, D, seed).
 */
#include <arpa/inet.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOBS 16
#define QUERY_ROWS 20
#define FLOAT4OID 700

static uint64_t rng_state;

static uint64_t
next_u64(void)
{
	/* splitmix64 */
	uint64_t	z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double
uniform(void)
{
	return (double) (next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

static double
gaussian(void)
{
	double		u = uniform(),
				v = uniform();

	return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

static void
put_u32(FILE *out, uint32_t v)
{
	v = htonl(v);
	fwrite(&v, 4, 1, out);
}

static void
put_u16(FILE *out, uint16_t v)
{
	v = htons(v);
	fwrite(&v, 2, 1, out);
}

static void
put_i64(FILE *out, int64_t v)
{
	put_u32(out, (uint32_t) ((uint64_t) v >> 32));
	put_u32(out, (uint32_t) v);
}

static void
put_f32(FILE *out, float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	put_u32(out, u);
}

int
main(int argc, char **argv)
{
	int64_t		n = argc > 1 ? atoll(argv[1]) : 0;
	int			d = argc > 2 ? atoi(argv[2]) : 0;
	uint64_t	seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
	double	   *centre,
			   *coef;
	float	   *x;
	static char iobuf[1 << 20];

	if (n <= 0 || d <= 0)
	{
		fprintf(stderr, "usage: gen_rows N D [seed] | psql -c \"COPY t FROM STDIN (FORMAT binary)\"\n");
		return 2;
	}
	setvbuf(stdout, iobuf, _IOFBF, sizeof(iobuf));
	rng_state = seed * 0x2545f4914f6cdd1dULL + 1;
	centre = malloc(sizeof(double) * BLOBS * (size_t) d);
	coef = malloc(sizeof(double) * (size_t) d);
	x = malloc(sizeof(float) * (size_t) d);
	for (int i = 0; i < BLOBS * d; i++)
		centre[i] = 4.0 * gaussian();
	for (int j = 0; j < d; j++)
		coef[j] = gaussian() / sqrt((double) d);

	fwrite("PGCOPY\n\377\r\n\0", 11, 1, stdout);
	put_u32(stdout, 0);			/* flags */
	put_u32(stdout, 0);			/* header extension */
	for (int64_t i = 0; i < n; i++)
	{
		int			blob = (int) (next_u64() % BLOBS);
		double		score = 0;
		float		relevance;

		for (int j = 0; j < d; j++)
		{
			x[j] = (float) (centre[blob * d + j] + gaussian());
			score += coef[j] * x[j];
		}
		score += 0.5 * gaussian();
		relevance = (float) (score < -1.5 ? 0 : score < -0.5 ? 1 : score < 0.5 ? 2 : score < 1.5 ? 3 : 4);

		put_u16(stdout, 5);
		put_u32(stdout, 8);
		put_i64(stdout, i + 1);
		put_u32(stdout, 8);
		put_i64(stdout, i / QUERY_ROWS);
		/* real[]: ndim, has-nulls, element type, then the one dimension's size and lower bound */
		put_u32(stdout, 20 + 8 * (uint32_t) d);
		put_u32(stdout, 1);
		put_u32(stdout, 0);
		put_u32(stdout, FLOAT4OID);
		put_u32(stdout, (uint32_t) d);
		put_u32(stdout, 1);
		for (int j = 0; j < d; j++)
		{
			put_u32(stdout, 4);
			put_f32(stdout, x[j]);
		}
		put_u32(stdout, 4);
		put_f32(stdout, relevance);
		put_u32(stdout, 4);
		put_f32(stdout, relevance >= 2 ? 1.0f : 0.0f);
	}
	put_u16(stdout, 0xffff);
	fflush(stdout);
	free(centre);
	free(coef);
	free(x);
	return 0;
}
