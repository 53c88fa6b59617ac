/*
 * bench_saga_gpu.c — the 1e-6 claim of mini-batch SAGA on the GPU, on the
 * real data sets: a9a (logistic, C = 1) and spambase (standardized, elastic
 * net l1_ratio 0.5, C = 1), each trained by the CPU solver and by the GPU
 * solver (a backend library: the emulated one by default, so it runs
 * anywhere; a card's gbml_cuda.so gives the same figures, the timings
 * aside), at the default tol (1e-4) and at 1e-8.  Prints each training's
 * epochs, stop reason, relative suboptimality (F - F*)/F* and seconds.
 *
 * The reference optimum F*: an exact Newton method on a9a (L2 only; the
 * intercept unpenalized, a full (d+1)^2 Hessian, backtracking, until the
 * gradient's max-norm is below 1e-13), FISTA with function-value restart on
 * spambase (until the proximal-gradient step is below 1e-13).  Every
 * objective here is this file's: (1/n) sum loss + alpha ((1 - r)/2 |w|^2 +
 * r |w|_1), alpha = 1/(C n), in long double from the model's weights on the
 * float32 data; standardized models on their own stored mean and std.
 *
 *   make -s -f tests/bench/bench.mk tests/bench/bin/bench_saga_gpu
 *   tests/bench/bin/bench_saga_gpu [--lib gbml_cuda_emu.so] [--data ../shared/data] [--threads N]
 *                                  [--chunk-rows R] [--cpu-only]
 *
 * --chunk-rows cuts the rows into chunks of R (the epoch plan then mixes
 * several chunks, as a spilled table's); --cpu-only skips the GPU solver.
 */
#include "algorithm.h"
#include "backend.h"
#include "bench_util.h"
#include "saga.h"
#include "saga_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A data set as dense doubles with the standardization the solvers use. */
typedef struct dense
{
	int64_t		n;
	int			d;
	double	   *x;				/* n x d */
	double	   *y;				/* 0 / 1 */
} dense;

static void
to_dense(const gbml_dataset *ds, dense *D)
{
	int64_t		at = 0;

	D->n = ds->n_rows;
	D->d = ds->n_features;
	D->x = malloc(sizeof(double) * (size_t) D->n * (size_t) D->d);
	D->y = malloc(sizeof(double) * (size_t) D->n);
	for (int c = 0; c < ds->n_chunks; c++)
		for (int64_t r = 0; r < ds->chunks[c]->n_rows; r++, at++)
		{
			for (int j = 0; j < D->d; j++)
				D->x[at * D->d + j] = ds->chunks[c]->x[r * D->d + j];
			D->y[at] = ds->chunks[c]->label[r] > 0;
		}
}

/* z = x scale + shift, as saga.c's standardizer (population std). */
static void
standardize(dense *D)
{
	for (int j = 0; j < D->d; j++)
	{
		long double s = 0,
					q = 0;
		double		mean,
					sd,
					scale;

		for (int64_t i = 0; i < D->n; i++)
			s += D->x[i * D->d + j];
		mean = (double) (s / D->n);
		for (int64_t i = 0; i < D->n; i++)
			q += (D->x[i * D->d + j] - mean) * (D->x[i * D->d + j] - mean);
		sd = sqrt((double) (q / D->n));
		scale = sd > 0 ? 1.0 / sd : 1.0;
		for (int64_t i = 0; i < D->n; i++)
			D->x[i * D->d + j] = D->x[i * D->d + j] * scale - mean * scale;
	}
}

/* The objective at theta = (w, b) on D. */
static double
objective(const dense *D, const double *th, double alpha, double l1)
{
	long double loss = 0,
				l2s = 0,
				l1s = 0;

	for (int64_t i = 0; i < D->n; i++)
	{
		long double m = th[D->d];
		long double z;

		for (int j = 0; j < D->d; j++)
			m += (long double) th[j] * D->x[i * D->d + j];
		z = D->y[i] > 0 ? -m : m;
		loss += z > 0 ? z + log1pl(expl(-z)) : log1pl(expl(z));
	}
	for (int j = 0; j < D->d; j++)
	{
		l2s += (long double) th[j] * th[j];
		l1s += fabsl((long double) th[j]);
	}
	return (double) (loss / D->n + alpha * ((1 - l1) * 0.5L * l2s + l1 * l1s));
}

/* The gradient of the smooth part (loss + the L2 share of the penalty) at th. */
static void
gradient(const dense *D, const double *th, double alpha_l2, double *g, double *hw)
{
	int			d1 = D->d + 1;

	memset(g, 0, sizeof(double) * (size_t) d1);
	for (int64_t i = 0; i < D->n; i++)
	{
		const double *x = D->x + i * D->d;
		double		m = th[D->d],
					p,
					r;

		for (int j = 0; j < D->d; j++)
			m += th[j] * x[j];
		p = 0.5 * (1 + tanh(0.5 * m));
		r = (p - D->y[i]) / (double) D->n;
		for (int j = 0; j < D->d; j++)
			g[j] += r * x[j];
		g[D->d] += r;
		if (hw)
			hw[i] = p * (1 - p) / (double) D->n;
	}
	for (int j = 0; j < D->d; j++)
		g[j] += alpha_l2 * th[j];
}

/* Solves the SPD system H x = b in place (Cholesky); H is d1 x d1. */
static void
cholesky_solve(double *H, double *b, int d1)
{
	for (int j = 0; j < d1; j++)
	{
		double		s = H[j * d1 + j];

		for (int k = 0; k < j; k++)
			s -= H[j * d1 + k] * H[j * d1 + k];
		H[j * d1 + j] = sqrt(s > 1e-300 ? s : 1e-300);
		for (int i = j + 1; i < d1; i++)
		{
			double		t = H[i * d1 + j];

			for (int k = 0; k < j; k++)
				t -= H[i * d1 + k] * H[j * d1 + k];
			H[i * d1 + j] = t / H[j * d1 + j];
		}
	}
	for (int i = 0; i < d1; i++)
	{
		for (int k = 0; k < i; k++)
			b[i] -= H[i * d1 + k] * b[k];
		b[i] /= H[i * d1 + i];
	}
	for (int i = d1 - 1; i >= 0; i--)
	{
		for (int k = i + 1; k < d1; k++)
			b[i] -= H[k * d1 + i] * b[k];
		b[i] /= H[i * d1 + i];
	}
}

/* Exact Newton on the L2-logistic objective; returns F*. */
static double
newton_l2(const dense *D, double alpha, double *gmax_out)
{
	int			d1 = D->d + 1;
	double	   *th = calloc((size_t) d1, sizeof(double)),
			   *g = malloc(sizeof(double) * (size_t) d1),
			   *step = malloc(sizeof(double) * (size_t) d1),
			   *cand = malloc(sizeof(double) * (size_t) d1),
			   *H = malloc(sizeof(double) * (size_t) d1 * (size_t) d1),
			   *hw = malloc(sizeof(double) * (size_t) D->n);
	double		f = objective(D, th, alpha, 0),
				gmax = INFINITY;

	for (int it = 0; it < 100; it++)
	{
		double		slope = 0,
					t = 1,
					fc;

		gradient(D, th, alpha, g, hw);
		gmax = 0;
		for (int j = 0; j < d1; j++)
			gmax = fmax(gmax, fabs(g[j]));
		if (gmax < 1e-13)
			break;
		memset(H, 0, sizeof(double) * (size_t) d1 * (size_t) d1);
		for (int64_t i = 0; i < D->n; i++)
		{
			const double *x = D->x + i * D->d;

			for (int a = 0; a < d1; a++)
			{
				double		xa = a < D->d ? x[a] : 1.0;

				if (xa == 0)
					continue;
				for (int b = 0; b <= a; b++)
					H[a * d1 + b] += hw[i] * xa * (b < D->d ? x[b] : 1.0);
			}
		}
		for (int a = 0; a < d1; a++)
		{
			H[a * d1 + a] += a < D->d ? alpha : 0;
			for (int b = 0; b < a; b++)
				H[b * d1 + a] = H[a * d1 + b];
		}
		memcpy(step, g, sizeof(double) * (size_t) d1);
		cholesky_solve(H, step, d1);
		for (int j = 0; j < d1; j++)
			slope -= g[j] * step[j];
		for (;;)
		{
			for (int j = 0; j < d1; j++)
				cand[j] = th[j] - t * step[j];
			fc = objective(D, cand, alpha, 0);
			if (fc <= f + 1e-4 * t * slope || t < 1e-12)
				break;
			t *= 0.5;
		}
		if (fc > f)
			break;
		memcpy(th, cand, sizeof(double) * (size_t) d1);
		f = fc;
	}
	*gmax_out = gmax;
	free(th);
	free(g);
	free(step);
	free(cand);
	free(H);
	free(hw);
	return f;
}

/* FISTA with function-value restart for logistic + elastic net; returns F*. */
static double
fista_enet(const dense *D, double alpha, double l1, double *res_out)
{
	int			d1 = D->d + 1;
	double	   *x = calloc((size_t) d1, sizeof(double)),
			   *yk = calloc((size_t) d1, sizeof(double)),
			   *xn = malloc(sizeof(double) * (size_t) d1),
			   *g = malloc(sizeof(double) * (size_t) d1),
			   *v = malloc(sizeof(double) * (size_t) d1),
			   *u = malloc(sizeof(double) * (size_t) d1);
	double		L = 0,
				step,
				t = 1,
				fx,
				res = INFINITY;

	/* L = 1/4 lambda_max(Xa'Xa / n) + the L2 share, by power iteration */
	for (int j = 0; j < d1; j++)
		v[j] = 1.0 / sqrt(d1);
	for (int it = 0; it < 200; it++)
	{
		double		nu = 0;

		memset(u, 0, sizeof(double) * (size_t) d1);
		for (int64_t i = 0; i < D->n; i++)
		{
			const double *xi = D->x + i * D->d;
			double		m = v[D->d];

			for (int j = 0; j < D->d; j++)
				m += xi[j] * v[j];
			for (int j = 0; j < D->d; j++)
				u[j] += m * xi[j] / (double) D->n;
			u[D->d] += m / (double) D->n;
		}
		for (int j = 0; j < d1; j++)
			nu += u[j] * u[j];
		nu = sqrt(nu);
		L = nu;
		for (int j = 0; j < d1; j++)
			v[j] = u[j] / nu;
	}
	L = 0.25 * L * 1.01 + alpha * (1 - l1);
	step = 1.0 / L;
	fx = objective(D, x, alpha, l1);
	for (int it = 0; it < 200000 && res > 1e-13; it++)
	{
		double		fn,
					tn;

		gradient(D, yk, alpha * (1 - l1), g, NULL);
		for (int j = 0; j < d1; j++)
		{
			double		z = yk[j] - step * g[j],
						thr = j < D->d ? step * alpha * l1 : 0;

			xn[j] = fabs(z) > thr ? copysign(fabs(z) - thr, z) : 0;
		}
		fn = objective(D, xn, alpha, l1);
		if (fn > fx)
		{
			/* restart the momentum from x */
			t = 1;
			memcpy(yk, x, sizeof(double) * (size_t) d1);
			continue;
		}
		res = 0;
		for (int j = 0; j < d1; j++)
			res = fmax(res, fabs(xn[j] - yk[j]) / step);
		tn = 0.5 * (1 + sqrt(1 + 4 * t * t));
		for (int j = 0; j < d1; j++)
		{
			double		nx = xn[j] + (t - 1) / tn * (xn[j] - x[j]);

			x[j] = xn[j];
			yk[j] = nx;
		}
		t = tn;
		fx = fn;
	}
	*res_out = res;
	free(x);
	free(yk);
	free(xn);
	free(g);
	free(v);
	free(u);
	return fx;
}

/* A model's objective on the raw data set, on its own standardization (saga.h's section layout). */
static double
model_objective(gbml_env *env, const uint8_t *model, size_t len, const dense *raw, double alpha, double l1)
{
	gbml_model_reader r;
	const uint8_t *data;
	size_t		dlen;
	uint32_t	head[5];
	int			d = raw->d;
	double	   *v,
			   *th;
	dense		Z = *raw;
	double		f;

	if (gbml_model_open(&r, env, model, len) != GBML_OK || !gbml_model_find(&r, GBML_SAGA_SECTION, &data, &dlen))
		return NAN;
	memcpy(head, data, sizeof(head));
	v = malloc(sizeof(double) * (1 + 3 * (size_t) d));
	th = malloc(sizeof(double) * ((size_t) d + 1));
	memcpy(v, data + 20, sizeof(double) * (1 + 3 * (size_t) d));
	memcpy(th, v + 1, sizeof(double) * (size_t) d);
	th[d] = v[0];
	if (head[3] & GBML_SAGA_FLAG_STANDARDIZED)
	{
		Z.x = malloc(sizeof(double) * (size_t) raw->n * (size_t) d);
		for (int64_t i = 0; i < raw->n; i++)
			for (int j = 0; j < d; j++)
			{
				double		sd = v[1 + 2 * d + j],
							scale = sd > 0 ? 1.0 / sd : 1.0;

				Z.x[i * d + j] = raw->x[i * d + j] * scale - v[1 + d + j] * scale;
			}
	}
	f = objective(&Z, th, alpha, l1);
	if (Z.x != raw->x)
		free(Z.x);
	free(v);
	free(th);
	return f;
}

/* The META section of a model as text (malloc), or NULL. */

/* The number after "key": in a JSON text, NaN if absent. */
static double
json_number(const char *text, const char *key)
{
	char		pat[64];
	const char *at;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	at = text ? strstr(text, pat) : NULL;
	return at ? strtod(at + strlen(pat), NULL) : NAN;
}

/* One training (base params, tol, up to 20,000 epochs) and its line of the table. */
static void
run(gbml_dataset *ds, const dense *raw, const gbml_backend *gpu, int threads, double tol, double alpha, double l1,
	double f_star, const gbml_param_value *base, int nb)
{
	gbml_env	env;
	gbml_param_value p[8];
	uint8_t    *model = NULL;
	size_t		len = 0;
	double		t,
				f;
	char	   *meta;

	memcpy(p, base, sizeof(gbml_param_value) * (size_t) nb);
	p[nb] = (gbml_param_value) {.key = "tol",.kind = GBML_VALUE_NUMBER,.number = tol};
	p[nb + 1] = (gbml_param_value) {.key = "max_iter",.kind = GBML_VALUE_NUMBER,.number = 20000};
	gbml_env_init_malloc(&env, threads);
	if (gpu)
	{
		env.device = GBML_DEVICE_GPU;
		env.gpu = gpu;
	}
	t = gbml_now();
	if (gbml_train_values(&env, "saga", p, nb + 2, ds, NULL, &model, &len) != GBML_OK)
	{
		printf("| %s | | %g | failed: %s |\n", gpu ? "GPU" : "CPU", tol, env.error);
		return;
	}
	t = gbml_now() - t;
	meta = bu_meta_text(&env, model, len);
	f = model_objective(&env, model, len, raw, alpha, l1);
	printf("| %s | %.0f | %g | %.0f | %s | %.2e | %.0f | %.2f |\n", gpu ? "GPU mini-batch" : "CPU",
		   gpu ? json_number(meta, "batch_size") : 1.0, tol, json_number(meta, "epochs"),
		   meta && strstr(meta, "\"stop_reason\":\"tol\"") ? "tol" : "max_iter", (f - f_star) / fabs(f_star),
		   json_number(meta, "n_nonzero"), t);
	fflush(stdout);
	free(meta);
	gbml_free(&env, model);
}

int
main(int argc, char **argv)
{
	const char *lib = "gbml_cuda_emu.so",
			   *data = "../shared/data";
	int			threads = 2;
	int64_t		chunk_rows = 0;
	bool		cpu_only = false;
	char		path[1024],
				err[300];
	const gbml_backend *gpu;

	for (int i = 1; i < argc; i += 2)
	{
		if (strcmp(argv[i], "--cpu-only") == 0)
		{
			cpu_only = true;
			i--;
		}
		else if (i + 1 >= argc)
			break;
		else if (strcmp(argv[i], "--chunk-rows") == 0)
			chunk_rows = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--lib") == 0)
			lib = argv[i + 1];
		else if (strcmp(argv[i], "--data") == 0)
			data = argv[i + 1];
		else if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
	}
	if (cpu_only)
		gpu = NULL;
	else if ((gpu = gbml_backend_load(lib, err, sizeof(err))) == NULL || gpu->device_count() < 1)
	{
		fprintf(stderr, "no GPU backend at %s: %s\n", lib, gpu ? gpu->last_error() : err);
		return 1;
	}
	printf("# backend %s (%s)%s\n", cpu_only ? "none" : lib, gpu ? gpu->name : "CPU only",
		   chunk_rows > 0 ? ", chunks of at most the given rows" : "");
	for (int exp = 0; exp < 2; exp++)
	{
		gbml_env	env;
		gbml_dataset ds;
		dense		raw,
					Z;
		double		alpha,
					f_star,
					prec,
					l1 = exp == 0 ? 0 : 0.5;
		gbml_param_value base[3];
		int			nb = 0;
		const double tols[2] = {1e-4, 1e-8};

		gbml_env_init_malloc(&env, threads);
		gbml_dataset_init(&ds, false);
		if (chunk_rows > 0)
			ds.chunk_rows = chunk_rows;
		snprintf(path, sizeof(path), "%s/%s", data, exp == 0 ? "a9a/train.csv" : "spambase/spambase.csv");
		if (bu_load_csv(path, &ds, &env, -1, 0, 1) != 0)
			return 1;
		to_dense(&ds, &raw);
		Z = raw;
		alpha = 1.0 / (double) raw.n;
		base[nb++] = (gbml_param_value) {.key = "C",.kind = GBML_VALUE_NUMBER,.number = 1};
		if (exp == 0)
			f_star = newton_l2(&raw, alpha, &prec);
		else
		{
			Z.x = malloc(sizeof(double) * (size_t) raw.n * (size_t) raw.d);
			memcpy(Z.x, raw.x, sizeof(double) * (size_t) raw.n * (size_t) raw.d);
			standardize(&Z);
			f_star = fista_enet(&Z, alpha, l1, &prec);
			base[nb++] = (gbml_param_value) {.key = "l1_ratio",.kind = GBML_VALUE_NUMBER,.number = l1};
			base[nb++] = (gbml_param_value) {.key = "standardize",.kind = GBML_VALUE_BOOL,.boolean = true};
		}
		printf("\n## %s: %lld rows x %d features, %s; F* = %.15f (%s, %s %.1e)\n\n"
			   "| solver | batch | tol | epochs | stop | (F - F*)/F* | non-zero weights | seconds |\n"
			   "|---|---|---|---|---|---|---|---|\n",
			   exp == 0 ? "a9a" : "spambase", (long long) raw.n, raw.d,
			   exp == 0 ? "logistic, C = 1" : "logistic, standardized, elastic net l1_ratio 0.5, C = 1", f_star,
			   exp == 0 ? "Newton" : "FISTA", exp == 0 ? "gradient max-norm" : "prox-gradient step", prec);
		fflush(stdout);
		for (int k = 0; k < 2; k++)
		{
			run(&ds, &raw, NULL, threads, tols[k], alpha, l1, f_star, base, nb);
			if (gpu)
				run(&ds, &raw, gpu, threads, tols[k], alpha, l1, f_star, base, nb);
		}
		fflush(stdout);
		if (Z.x != raw.x)
			free(Z.x);
		free(raw.x);
		free(raw.y);
		gbml_dataset_free(&ds, &env);
	}
	return 0;
}
