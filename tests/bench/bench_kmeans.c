/*
 * bench_kmeans.c — command-line driver of the K-Means engine for
 * tests/bench/kmeans_bench.py: loads a float32 matrix (raw binary, row-major)
 * or a CSV, runs gbml_kmeans_fit() with the given threads and parameters
 * `repeat` times, and prints one JSON object with the timings of the fastest
 * run (per-iteration S1/S2 seconds), the iterations, the inertia and the stop
 * reason.  Optionally writes the labels (int32) and the centroids (float64).
 *
 * The rows are fed in file order and NOT canonicalised (gbml_train does that),
 * so labels line up with the input file; --canonical puts them in canonical
 * order first (labels then follow that order).  --spill streams the rows to
 * temporary files ($TMPDIR, as a table past the memory budget would) and
 * implies --canonical, which seals the last chunk into the files too; the
 * fit then reads every chunk back from them.
 *
 *   bench_kmeans --bin X.f32 --rows N --cols D | --csv F --skip-cols S
 *                --k K [--init k-means++|random|FILE.f64] [--n-init R]
 *                [--max-iter M] [--tol T] [--min-frac F] [--seed S]
 *                [--threads P] [--spherical] [--repeat R]
 *                [--canonical] [--spill]
 *                [--labels-out L.i32] [--centers-out C.f64]
 */
#include "bench_util.h"
#include "chunk_store_file.h"
#include "kmeans.h"
#include "kmeans_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void
die(const char *msg, const char *arg)
{
	fprintf(stderr, "bench_kmeans: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
	exit(2);
}

static void
append_row(gbml_dataset *ds, gbml_env *env, const float *x, int d)
{
	gbml_row	row;

	memset(&row, 0, sizeof(row));
	row.x = x;
	row.n_features = d;
	row.label_is_null = true;
	row.group_is_null = true;
	row.weight_is_null = true;
	if (gbml_dataset_append(ds, env, &row, false) != GBML_OK)
		die("append failed:", env->error);
}

static void
load_bin(gbml_dataset *ds, gbml_env *env, const char *path, long rows, int cols)
{
	FILE	   *f = fopen(path, "rb");
	float	   *x = malloc(sizeof(float) * cols);

	if (f == NULL || x == NULL)
		die("cannot open", path);
	for (long i = 0; i < rows; i++)
	{
		if (fread(x, sizeof(float), cols, f) != (size_t) cols)
			die("short read in", path);
		append_row(ds, env, x, cols);
	}
	fclose(f);
	free(x);
}

static double *
load_f64(const char *path, size_t n)
{
	FILE	   *f = fopen(path, "rb");
	double	   *v = malloc(sizeof(double) * n);

	if (f == NULL || v == NULL || fread(v, sizeof(double), n, f) != n)
		die("cannot read init centroids from", path);
	fclose(f);
	return v;
}

/* CPU seconds of the process so far (all threads, user and system): steadier than wall time on a busy machine. */
static double
cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double) ru.ru_stime.tv_sec +
		ru.ru_stime.tv_usec * 1e-6;
}

static void
print_array(const double *v, int n)
{
	printf("[");
	for (int i = 0; i < n; i++)
		printf(i ? ",%.9g" : "%.9g", v[i]);
	printf("]");
}

int
main(int argc, char **argv)
{
	const char *bin = NULL,
			   *csv = NULL,
			   *init = "k-means++",
			   *labels_out = NULL,
			   *centers_out = NULL;
	long		rows = 0;
	int			cols = 0,
				skip = 0,
				threads = 2,
				repeat = 1;
	bool		canonical = false,
				spill = false;
	gbml_kmeans_params p;
	gbml_env	env;
	gbml_dataset ds;
	gbml_kmeans_result best;
	double		best_time = 1e300,
				best_cpu = 1e300,
				t_load,
				data_mb;

	memset(&p, 0, sizeof(p));
	p.n_init = 1;
	p.max_iter = 300;
	p.tol = 1e-4;
	p.min_frac_changed = 0.001;
	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

#define ARG(name) (strcmp(a, name) == 0 && v && ++i)
		if (ARG("--bin"))
			bin = v;
		else if (ARG("--csv"))
			csv = v;
		else if (ARG("--rows"))
			rows = atol(v);
		else if (ARG("--cols"))
			cols = atoi(v);
		else if (ARG("--skip-cols"))
			skip = atoi(v);
		else if (ARG("--k"))
			p.k = atol(v);
		else if (ARG("--init"))
			init = v;
		else if (ARG("--n-init"))
			p.n_init = atol(v);
		else if (ARG("--max-iter"))
			p.max_iter = atol(v);
		else if (ARG("--tol"))
			p.tol = atof(v);
		else if (ARG("--min-frac"))
			p.min_frac_changed = atof(v);
		else if (ARG("--seed"))
			p.random_seed = atol(v);
		else if (ARG("--threads"))
			threads = atoi(v);
		else if (ARG("--repeat"))
			repeat = atoi(v);
		else if (ARG("--labels-out"))
			labels_out = v;
		else if (ARG("--centers-out"))
			centers_out = v;
		else if (ARG("--isa"))
			gbml_km_force_isa(v);
		else if (strcmp(a, "--spherical") == 0)
			p.spherical = true;
		else if (strcmp(a, "--canonical") == 0)
			canonical = true;
		else if (strcmp(a, "--spill") == 0)
			spill = canonical = true;
		else
			die("unknown argument", a);
#undef ARG
	}
	gbml_env_init_malloc(&env, threads);
	gbml_dataset_init(&ds, false);
	if (spill)
		gbml_dataset_stream_to(&ds, gbml_chunk_store_file_open, 0, false);
	t_load = gbml_now();
	if (bin)
		load_bin(&ds, &env, bin, rows, cols);
	else if (csv)
	{
		if (bu_load_csv(csv, &ds, &env, -1, -1, skip) != 0)	/* skip columns, then features */
			exit(2);
	}
	else
		die("need --bin or --csv", NULL);
	gbml_dataset_finish_appends(&ds, &env);
	if (canonical && gbml_dataset_canonicalize(&ds, &env) != GBML_OK)
		die("canonical order failed:", env.error);
	t_load = gbml_now() - t_load;
	if (strcmp(init, "k-means++") == 0)
		p.init.choice = GBML_KM_INIT_KMEANSPP;
	else if (strcmp(init, "random") == 0)
		p.init.choice = GBML_KM_INIT_RANDOM;
	else
	{
		p.init.choice = -1;
		p.init.matrix.rows = p.k;
		p.init.matrix.cols = ds.n_features;
		p.init.matrix.values = load_f64(init, (size_t) p.k * ds.n_features);
	}

	memset(&best, 0, sizeof(best));
	/* engine memory: the dataset as held, and the peak over the fits */
	data_mb = (double) env.memory_used / 1048576.0;
	env.memory_peak = env.memory_used;
	for (int r = 0; r < repeat; r++)
	{
		gbml_kmeans_result res;
		double		t = gbml_now(),
					cpu = cpu_seconds();

		if (gbml_kmeans_fit(&ds, &p, &env, labels_out != NULL, &res) != GBML_OK)
			die("fit failed:", env.error);
		t = gbml_now() - t;
		cpu = cpu_seconds() - cpu;
		if (cpu < best_cpu)
			best_cpu = cpu;
		if (t < best_time)
		{
			best_time = t;
			gbml_kmeans_result_free(&best, &env);
			best = res;
		}
		else
			gbml_kmeans_result_free(&res, &env);
	}
	if (labels_out)
	{
		FILE	   *f = fopen(labels_out, "wb");

		for (int c = 0; c < best.n_label_chunks; c++)
			fwrite(best.labels[c], sizeof(int32_t), ds.chunks[c]->n_rows, f);
		fclose(f);
	}
	if (centers_out)
	{
		FILE	   *f = fopen(centers_out, "wb");

		fwrite(best.centroids, sizeof(double), (size_t) best.k * best.d, f);
		fclose(f);
	}
	printf("{\"rows\":%lld,\"cols\":%d,\"k\":%d,\"threads\":%d,\"spilled\":%s,\"data_mb\":%.1f,\"fit_peak_mb\":%.1f,"
		   "\"kernel\":\"%s\",\"load_seconds\":%.6f,"
		   "\"fit_seconds\":%.6f,\"fit_cpu_seconds\":%.6f,\"init_seconds\":%.6f,\"lloyd_seconds\":%.6f,"
		   "\"iterations\":%d,\"stop_reason\":\"%s\",\"inertia\":%.17g,\"rechecked\":%lld,"
		   "\"empty_relocations\":%lld,\"s1_total\":%.6f,\"s2_total\":%.6f,\"s1\":",
		   (long long) ds.n_rows, ds.n_features, best.k, threads, ds.store ? "true" : "false",
		   data_mb, (double) env.memory_peak / 1048576.0, best.kernel, t_load,
		   best_time, best_cpu, best.init_seconds, best.lloyd_seconds, best.iterations, best.stop_reason,
		   best.inertia, (long long) best.rechecked, (long long) best.empty_relocations,
		   best.s1_total, best.s2_total);
	print_array(best.s1, best.n_timed);
	printf(",\"s2\":");
	print_array(best.s2, best.n_timed);
	printf("}\n");
	gbml_kmeans_result_free(&best, &env);
	gbml_dataset_free(&ds, &env);
	free(p.init.matrix.values);
	return 0;
}
