/*
 * saga_check.c — mini-batch SAGA on the GPU backend (saga_backend.h,
 * cuda/saga_device.cu) against the CPU solver, as whole trainings: on small
 * generated sets the GPU reaches the CPU solver's optimum (relative
 * suboptimality <= 1e-6, both objectives computed here by one host function
 * from the model bytes) for every loss and penalty, with weights, without an
 * intercept and standardized; the same bytes on a second run, with 1 or 2
 * threads, with the rows streamed from the host instead of resident, and
 * with the rows in temporary files (resident or streamed); and what must
 * not leak or crash: the budget, injected CUDA failures, cancels.
 */
#include "gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "chunk_store_file.h"
#include "rng.h"
#include "saga.h"
#include "saga_kernels.h"
#include "../unit/test_util.h"

typedef struct saga_data
{
	int64_t		n;
	int			d;
	bool		logistic;
	bool		weights;
	bool		skewed;			/* features on very different scales and offsets (standardization matters) */
	int64_t		chunk_rows;		/* 0: the default */
	bool		stored;			/* the rows go to temporary files from the first chunk on */
} saga_data;

/* A random dataset (deterministic in seed): a linear signal in two features of three, plus noise. */
static void
make_data(gbml_dataset *ds, gbml_env *env, const saga_data *s, uint64_t seed)
{
	gbml_rng	rng;
	float	   *x = malloc(sizeof(float) * (size_t) s->d);

	gbml_rng_seed(&rng, seed);
	gbml_dataset_init(ds, false);
	if (s->chunk_rows > 0)
		ds->chunk_rows = s->chunk_rows;
	if (s->stored)
		gbml_dataset_stream_to(ds, gbml_chunk_store_file_open, 0, false);
	for (int64_t i = 0; i < s->n; i++)
	{
		gbml_row	row;
		double		y = 0.3;

		for (int j = 0; j < s->d; j++)
		{
			double		u = gbml_rng_uniform(&rng) * 2 - 1;

			x[j] = (float) (s->skewed ? u * (1 + 3 * j) + 0.5 * j : u);
			y += u * (j % 3 == 0 ? 1.5 : j % 3 == 1 ? -0.7 : 0.0);	/* every third feature is noise */
		}
		y += 0.4 * (gbml_rng_uniform(&rng) * 2 - 1);
		memset(&row, 0, sizeof(row));
		row.x = x;
		row.n_features = s->d;
		row.label = s->logistic ? (y > 0 ? 1.0f : 0.0f) : (float) y;
		row.group_is_null = true;
		row.weight = (float) (0.25 + 1.5 * gbml_rng_uniform(&rng));
		row.weight_is_null = !s->weights;
		if (gbml_dataset_append(ds, env, &row, true) != GBML_OK)
			printf("# append: %s\n", env->error);
	}
	free(x);
}

/*
 * The objective (1/n) sum s loss + alpha ((1 - r)/2 |w|^2 + r |w|_1) of a
 * SAGA model on ds, from its section (saga.h's layout), in long double:
 * the one function that judges both solvers.
 */
static double
model_objective(const uint8_t *model, size_t len, const gbml_dataset *ds, double alpha, double l1_ratio)
{
	gbml_env	env;
	gbml_model_reader r;
	const uint8_t *data;
	size_t		dlen;
	uint32_t	head[5];
	double	   *v;
	int			d = ds->n_features;
	long double loss = 0,
				l2 = 0,
				l1 = 0;

	gbml_env_init_malloc(&env, 1);
	if (model == NULL || gbml_model_open(&r, &env, model, len) != GBML_OK ||
		!gbml_model_find(&r, GBML_SAGA_SECTION, &data, &dlen) || dlen != 20 + sizeof(double) * (1 + 3 * (size_t) d))
		return NAN;
	memcpy(head, data, sizeof(head));
	v = malloc(sizeof(double) * (1 + 3 * (size_t) d));
	memcpy(v, data + 20, sizeof(double) * (1 + 3 * (size_t) d));
	for (int c = 0; c < ds->n_chunks; c++)
	{
		const gbml_chunk *ch = ds->chunks[c];

		for (int64_t i = 0; i < ch->n_rows; i++)
		{
			long double m = v[0];
			double		s = ds->has_weight ? ch->weight[i] : 1.0;

			for (int j = 0; j < d; j++)
			{
				double		x = ch->x[(size_t) i * d + j];
				double		sd = v[1 + 2 * d + j],
							scale = sd > 0 ? 1.0 / sd : 1.0;

				m += (long double) v[1 + j] * ((head[3] & GBML_SAGA_FLAG_STANDARDIZED) ? x * scale - v[1 + d + j] * scale : x);
			}
			if (head[1] == GBML_SAGA_LOSS_LOGISTIC)
			{
				long double z = ch->label[i] > 0 ? -m : m;

				loss += s * (z > 0 ? z + log1pl(expl(-z)) : log1pl(expl(z)));
			}
			else
				loss += s * 0.5L * (m - ch->label[i]) * (m - ch->label[i]);
		}
	}
	for (int j = 0; j < d; j++)
	{
		l2 += (long double) v[1 + j] * v[1 + j];
		l1 += fabsl((long double) v[1 + j]);
	}
	free(v);
	return (double) (loss / ds->n_rows + alpha * ((1 - l1_ratio) * 0.5L * l2 + l1_ratio * l1));
}

typedef struct saga_run
{
	int			rc;
	uint8_t    *model;
	size_t		len;
	char	   *report;			/* the run report (JSON), or NULL */
	char		error[512];
	int			device;			/* what env->device said afterwards */
} saga_run;

static void
run_free(saga_run *r)
{
	free(r->model);
	free(r->report);
	memset(r, 0, sizeof(*r));
}

typedef struct saga_setup
{
	bool		gpu;
	bool		automatic;
	int			threads;
	size_t		budget;			/* GPU bytes, 0 = the backend's default */
	bool		(*progress) (void *ctx, const gbml_progress_info *info);
	int			reads_before_failure;	/* stored rows: chunk reads that succeed (0: all) */
} saga_setup;

/*
 * A file store's reads (whole chunks and row ranges), failing after a count
 * (from any thread: the readers read ahead).
 */
static struct
{
	int			(*read_chunk) (gbml_chunk_store *s, int index, float *out);
	int			(*read_rows) (gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out);
	int			reads;
	int			allowed;
} failing;

static int
failing_read(gbml_chunk_store *s, int index, float *out)
{
	if (__atomic_add_fetch(&failing.reads, 1, __ATOMIC_SEQ_CST) > failing.allowed)
		return 1;
	return failing.read_chunk(s, index, out);
}

static int
failing_rows(gbml_chunk_store *s, int index, int64_t first, int64_t n, float *out)
{
	if (__atomic_add_fetch(&failing.reads, 1, __ATOMIC_SEQ_CST) > failing.allowed)
		return 1;
	return failing.read_rows(s, index, first, n, out);
}

static const char *
failing_error(gbml_chunk_store *s)
{
	(void) s;
	return "could not read from a temporary file: Input/output error";
}

static int
failing_code(gbml_chunk_store *s)
{
	(void) s;
	return GBML_EIO;
}

/* Sends ds's stored chunk reads through failing_read (canonical order first: the last chunk is sealed). */
static void
fail_reads(gbml_dataset *ds, gbml_env *env, int allowed)
{
	if (gbml_dataset_canonicalize(ds, env) != GBML_OK || ds->store == NULL)
	{
		printf("# no stored rows to fail: %s\n", env->error);
		return;
	}
	failing.read_chunk = ds->store->read_chunk;
	failing.read_rows = ds->store->read_rows;
	failing.reads = 0;
	failing.allowed = allowed;
	ds->store->read_chunk = failing_read;
	ds->store->read_rows = failing_rows;
	ds->store->error = failing_error;
	ds->store->error_code = failing_code;
}

/* One training of ds's data with params; the model and report copied into r (malloc). */
static void
train(const saga_data *data, uint64_t seed, const gbml_param_value *params, int n_params, const saga_setup *su,
	  saga_run *r)
{
	gbml_env	env;
	gbml_dataset ds;
	gbml_parsed_params pp;
	gbml_strbuf report;
	uint8_t    *model = NULL;
	size_t		len = 0;

	memset(r, 0, sizeof(*r));
	gbml_env_init_malloc(&env, su->threads);
	if (su->gpu)
	{
		env.device = GBML_DEVICE_GPU;
		env.device_auto = su->automatic;
		env.gpu = gc_backend;
		env.gpu_memory_limit = su->budget;
	}
	env.progress_fn = su->progress;
	make_data(&ds, &env, data, seed);
	if (su->reads_before_failure > 0)
		fail_reads(&ds, &env, su->reads_before_failure);
	gbml_sb_init(&report, &env);
	memset(&pp, 0, sizeof(pp));
	r->rc = gbml_parse_training_params(&env, gbml_algorithm_by_name("saga"), params, n_params, &pp);
	if (r->rc == GBML_OK)
		r->rc = gbml_train_report(&env, &pp, &ds, NULL, &model, &len, &report);
	if (r->rc == GBML_OK)
	{
		r->model = malloc(len);
		memcpy(r->model, model, len);
		r->len = len;
		r->report = calloc(report.len + 1, 1);
		memcpy(r->report, report.data, report.len);
	}
	snprintf(r->error, sizeof(r->error), "%s", env.error);
	r->device = env.device;
	gbml_free(&env, model);
	gbml_sb_free(&report);
	if (pp.algo_params)
		gbml_parsed_params_free(&env, &pp);
	gbml_dataset_free(&ds, &env);
}

/* ---- convergence to the CPU solver's optimum ---- */

typedef struct optimum_case
{
	const char *name;
	saga_data	data;
	const char *loss;
	double		C;				/* > 0: alpha = 1 / (C n) */
	double		alpha;
	double		l1_ratio;
	bool		intercept;
	bool		standardize;
	int			batch;
} optimum_case;

static const optimum_case optimum_cases[] = {
	{"logistic, C = 1", {3000, 10, true, false, false, 0}, "logistic", 1, 0, 0, true, false, 32},
	{"squared, elastic net, standardized", {2500, 9, false, false, true, 0}, "squared", 0, 0.02, 0.5, true, true, 32},
	{"logistic, sample weights, standardized", {2500, 8, true, true, true, 0}, "logistic", 0, 1e-3, 0, true, true, 64},
	{"squared lasso, sample weights, no intercept", {2000, 7, false, true, false, 0}, "squared", 0, 0.01, 1, false, false, 16},
};

static int
case_params(const optimum_case *c, bool gpu, gbml_param_value *p)
{
	int			k = 0;

	p[k++] = tu_str("loss", c->loss);
	if (c->C > 0)
		p[k++] = tu_num("C", c->C);
	else
		p[k++] = tu_num("alpha", c->alpha);
	p[k++] = tu_num("l1_ratio", c->l1_ratio);
	p[k++] = tu_bool("fit_intercept", c->intercept);
	p[k++] = tu_bool("standardize", c->standardize);
	p[k++] = tu_num("random_seed", 7);
	if (gpu)
	{
		/* the stop rule as a user would set it for a tight optimum */
		p[k++] = tu_num("tol", 1e-7);
		p[k++] = tu_num("max_iter", 1000);
		p[k++] = tu_num("batch_size", c->batch);
	}
	else
	{
		/* the reference: far past the GPU's precision */
		p[k++] = tu_num("tol", 1e-13);
		p[k++] = tu_num("max_iter", 3000);
	}
	return k;
}

static void
optimum_checks(bool quick)
{
	int			n = (int) (sizeof(optimum_cases) / sizeof(optimum_cases[0]));

	for (int i = 0; i < n; i++)
	{
		const optimum_case *c = &optimum_cases[i];
		gbml_param_value p[12];
		saga_setup	cpu = {false, false, 2, 0, NULL},
					gpu = {true, false, 2, 0, NULL};
		saga_run	rc,
					rg;
		gbml_env	env;
		gbml_dataset ds;
		double		alpha,
					fc,
					fg,
					rel;

		if (quick && i >= 2)
			continue;			/* quick: one L2 and one elastic-net case */
		train(&c->data, 100 + i, p, case_params(c, false, p), &cpu, &rc);
		train(&c->data, 100 + i, p, case_params(c, true, p), &gpu, &rg);
		gbml_env_init_malloc(&env, 1);
		make_data(&ds, &env, &c->data, 100 + i);
		alpha = c->C > 0 ? 1.0 / (c->C * (double) ds.n_rows) : c->alpha;
		fc = model_objective(rc.model, rc.len, &ds, alpha, c->l1_ratio);
		fg = model_objective(rg.model, rg.len, &ds, alpha, c->l1_ratio);
		rel = (fg - fc) / fabs(fc);
		if (rg.rc != GBML_OK)
			printf("# GPU training: %s\n", rg.error);
		gc_check(rc.rc == GBML_OK && rg.rc == GBML_OK && rg.device == GBML_DEVICE_GPU && rel <= 1e-6,
				 "SAGA on the GPU reaches the CPU's optimum: %s (relative suboptimality %.2e, %g epochs of batch %d, "
				 "converged %g; the CPU's %g epochs)",
				 c->name, rel, rg.model ? tu_meta_number(&env, rg.model, rg.len, "epochs") : NAN, c->batch,
				 rg.model ? tu_meta_number(&env, rg.model, rg.len, "converged") : NAN,
				 rc.model ? tu_meta_number(&env, rc.model, rc.len, "epochs") : NAN);
		if (c->l1_ratio == 1)
		{
			/* the lasso's exact zeros: the noise features */
			int64_t		zc = (int64_t) tu_meta_number(&env, rc.model, rc.len, "n_nonzero"),
						zg = (int64_t) tu_meta_number(&env, rg.model, rg.len, "n_nonzero");

			gc_check(zg == zc && zg < c->data.d, "the GPU's lasso zeroes the CPU's weights (%lld of %d non-zero)",
					 (long long) zg, c->data.d);
		}
		gbml_dataset_free(&ds, &env);
		run_free(&rc);
		run_free(&rg);
	}
	gc_check(gc_no_resources(), "no GPU resources left after the SAGA trainings");
}

/* ---- the same bytes: again, any thread count, streamed ---- */

static const saga_data same_data = {4000, 12, true, true, true, 500};
static const saga_data same_data_stored = {4000, 12, true, true, true, 500, true};
/* the same rows in other chunks (in memory, and in files as a small budget cuts them) */
static const saga_data same_data_other_chunks = {4000, 12, true, true, true, 700};
static const saga_data same_data_small_chunks = {4000, 12, true, true, true, 333, true};

static int
same_params(gbml_param_value *p, int epochs)
{
	p[0] = tu_num("C", 1);
	p[1] = tu_bool("standardize", true);
	p[2] = tu_num("batch_size", 48);	/* not a divisor of the row count: a short last step */
	p[3] = tu_num("max_iter", epochs);
	p[4] = tu_num("tol", 0);
	p[5] = tu_num("random_seed", 3);
	return 6;
}

/* A GPU budget that holds the solver state and two staging buffers, but not the rows. */
static size_t
streaming_budget(const saga_data *s)
{
	size_t		per_row = 4 + 4 + 8 + 8;	/* label, weight, stored gradient, order */
	size_t		stage = 2 * sizeof(float) * (size_t) s->chunk_rows * (size_t) s->d;

	return per_row * (size_t) s->n + stage + 32768;
}

static void
determinism_checks(void)
{
	gbml_param_value p[8];
	int			np = same_params(p, 6);
	saga_setup	two = {true, false, 2, 0, NULL},
				one = {true, false, 1, 0, NULL},
				small = {true, false, 2, streaming_budget(&same_data), NULL};
	saga_run	a,
				b,
				c,
				s,
				fr,
				fs,
				o7,
				o3;

	train(&same_data, 9, p, np, &two, &a);
	train(&same_data, 9, p, np, &two, &b);
	train(&same_data, 9, p, np, &one, &c);
	train(&same_data, 9, p, np, &small, &s);
	train(&same_data_stored, 9, p, np, &two, &fr);
	train(&same_data_stored, 9, p, np, &small, &fs);
	train(&same_data_other_chunks, 9, p, np, &two, &o7);
	train(&same_data_small_chunks, 9, p, np, &small, &o3);
	if (fr.rc != GBML_OK || fs.rc != GBML_OK)
		printf("# trainings from temporary files: %s / %s\n", fr.error, fs.error);
	if (s.rc != GBML_OK)
		printf("# streamed training: %s\n", s.error);
	gc_check(a.rc == GBML_OK && b.rc == GBML_OK && a.len == b.len && memcmp(a.model, b.model, a.len) == 0,
			 "SAGA on the GPU: the same bytes on a second run");
	gc_check(c.rc == GBML_OK && a.len == c.len && memcmp(a.model, c.model, a.len) == 0,
			 "SAGA on the GPU: the same bytes with 1 and 2 threads");
	gc_check(a.report && strstr(a.report, "\"rows_on_device\":\"resident\"") && strstr(a.report, "\"device\":\"gpu\"") &&
			 strstr(a.report, "\"batch_size\":48") && strstr(a.report, "\"step_size\":") && strstr(a.report, "\"epochs\":6"),
			 "the run report says device gpu, resident rows, batch size, step size and epochs");
	gc_check(s.rc == GBML_OK && s.report && strstr(s.report, "\"rows_on_device\":\"streamed\"") &&
			 a.len == s.len && memcmp(a.model, s.model, a.len) == 0,
			 "SAGA on the GPU: rows streamed from the host (a budget of %zu bytes) give the resident bytes",
			 streaming_budget(&same_data));
	gc_check(s.report && a.report && tu_json_number(s.report, "gpu_h2d_mb") > 5 * tu_json_number(a.report, "gpu_h2d_mb"),
			 "streamed rows cross the bus every pass (%.2f MB against %.2f MB resident)",
			 s.report ? tu_json_number(s.report, "gpu_h2d_mb") : NAN, a.report ? tu_json_number(a.report, "gpu_h2d_mb") : NAN);
	gc_check(fr.rc == GBML_OK && fr.report && strstr(fr.report, "\"rows_on_device\":\"resident\"") &&
			 a.len == fr.len && memcmp(a.model, fr.model, a.len) == 0,
			 "SAGA on the GPU: rows in temporary files, uploaded through the reader, give the bytes of rows in memory");
	gc_check(fs.rc == GBML_OK && fs.report && strstr(fs.report, "\"rows_on_device\":\"streamed\"") &&
			 a.len == fs.len && memcmp(a.model, fs.model, a.len) == 0,
			 "SAGA on the GPU: rows in temporary files, streamed a group of slices at a time, give the same bytes");
	gc_check(o7.rc == GBML_OK && o3.rc == GBML_OK && a.len == o7.len && memcmp(a.model, o7.model, a.len) == 0 &&
			 a.len == o3.len && memcmp(a.model, o3.model, a.len) == 0,
			 "SAGA on the GPU: the same rows in chunks of 700, or of 333 in temporary files and streamed, give the "
			 "bytes of chunks of 500 (the device's chunks are cut every 256 rows)");
	run_free(&a);
	run_free(&b);
	run_free(&c);
	run_free(&s);
	run_free(&fr);
	run_free(&fs);
	run_free(&o7);
	run_free(&o3);
	gc_check(gc_no_resources(), "no GPU resources left after the streamed trainings");
	{
		/* a clean run counts the streamed training's chunk reads; then they fail half way */
		saga_setup	bad = {true, false, 2, streaming_budget(&same_data), NULL, 1 << 30};
		int			reads;

		train(&same_data_stored, 9, p, np, &bad, &fs);
		reads = failing.reads;
		run_free(&fs);
		/*
		 * half way: a power-iteration pass (8 chunks); 12 reads before the
		 * end: the last epoch's slices (16 or 17, more reads where one
		 * straddles two chunks; then the objective's 8 chunks)
		 */
		for (int k = 0; k < 2; k++)
		{
			bad.reads_before_failure = k == 0 ? reads / 2 : reads - 12;
			train(&same_data_stored, 9, p, np, &bad, &fs);
			gc_check(reads > 6 * 8 && fs.rc == GBML_EIO && fs.model == NULL && strstr(fs.error, "reading chunk") != NULL &&
					 strstr(fs.error, "Input/output error") != NULL && gc_no_resources(),
					 "SAGA on the GPU, rows streamed from temporary files: read %d of %d failing is an error (%s) "
					 "and leaves nothing held", bad.reads_before_failure + 1, reads, fs.error);
			if (k == 0)
				run_free(&fs);
		}
		run_free(&fs);
	}
}

/* ---- budget, device choice, parameters ---- */

static void
choice_checks(void)
{
	gbml_param_value p[8];
	int			np = same_params(p, 2);
	saga_setup	tiny = {true, false, 2, 4096, NULL},
				automatic = {true, true, 2, 0, NULL},
				cpu = {false, false, 2, 0, NULL};
	saga_run	a,
				b,
				c;

	train(&same_data, 9, p, np, &tiny, &a);
	gc_check(a.rc == GBML_EGPUBUDGET && strstr(a.error, "budget") != NULL,
			 "SAGA, device gpu over the GPU budget: an error (%s)", a.error);
	train(&same_data, 9, p, np, &automatic, &b);
	train(&same_data, 9, p, np, &cpu, &c);
	gc_check(b.rc == GBML_OK && b.device == GBML_DEVICE_CPU && b.len == c.len && memcmp(b.model, c.model, b.len) == 0 &&
			 strstr(b.report, "under the GPU threshold") != NULL,
			 "SAGA, device auto on a small set: the CPU trains, and the report says why");
	run_free(&a);
	run_free(&b);
	run_free(&c);
	{
		gbml_env	env;
		gbml_parsed_params pp;
		gbml_param_value bad[1] = {tu_num("batch_size", -4)};

		gbml_env_init_malloc(&env, 1);
		gc_check(gbml_parse_training_params(&env, gbml_algorithm_by_name("saga"), bad, 1, &pp) == GBML_EINVAL &&
				 strstr(env.error, "batch_size") != NULL, "a negative batch_size is an error: %s", env.error);
		gbml_parsed_params_free(&env, &pp);
	}
	gc_check(gc_no_resources(), "no GPU resources left after the budget checks");
}

/* ---- faults and cancels ---- */

static int
attempt(gbml_env *e, bool streamed)
{
	saga_data	s = {2000, 20, true, false, false, 256};
	gbml_param_value p[8];
	int			np = same_params(p, 2);
	saga_setup	su = {true, false, 2, streamed ? streaming_budget(&s) : 0, NULL};
	saga_run	r;
	int			rc;

	train(&s, 4, p, np, &su, &r);
	gbml_env_init_malloc(e, 1);
	snprintf(e->error, sizeof(e->error), "%s", r.error);
	if (r.rc == GBML_OK && streamed && (r.report == NULL || strstr(r.report, "streamed") == NULL))
		printf("# the fault attempt did not stream\n");
	rc = r.rc;
	run_free(&r);
	return rc;
}

static int
attempt_resident(gbml_env *e)
{
	return attempt(e, false);
}

static int
attempt_streamed(gbml_env *e)
{
	return attempt(e, true);
}

static bool
cancel_at_third(void *ctx, const gbml_progress_info *info)
{
	(void) ctx;
	return info->iteration >= 3;
}

static void
cancel_checks(void)
{
	gbml_param_value p[8];
	int			np = same_params(p, 10);
	saga_data	s = {800, 5, true, false, false, 0};
	saga_setup	su = {true, false, 2, 0, cancel_at_third};
	saga_run	r;

	train(&s, 5, p, np, &su, &r);
	gc_check(r.rc == GBML_ECANCELLED && gc_no_resources(), "a SAGA training cancelled in its third epoch leaves nothing held");
	run_free(&r);
}

/* ---- categorical features: one-hot encoded, the indicators left unscaled on the device too ---- */

/* Trains the rows of (a, color, b) under schema s, on the GPU or the CPU; the model (malloc) and its length. */
static uint8_t *
train_categorical(const gbml_feature_schema *s, bool gpu, size_t *len_out)
{
	static const double effect[7] = {0, 2, -1, 0.5, 3, -2, 1};	/* per color, the last for NULL */
	gbml_param_value p[] = {tu_str("loss", "squared"), tu_bool("standardize", true), tu_num("alpha", 1e-2),
		tu_num("random_seed", 7), tu_num("tol", gpu ? 1e-7 : 1e-13), tu_num("max_iter", gpu ? 1000 : 3000),
	tu_num("batch_size", 32)};
	gbml_env	env;
	gbml_dataset ds;
	gbml_rng	rng;
	uint8_t    *model = NULL,
			   *out = NULL;
	size_t		len = 0;

	gbml_env_init_malloc(&env, 2);
	if (gpu)
	{
		env.device = GBML_DEVICE_GPU;
		env.gpu = gc_backend;
	}
	gbml_rng_seed(&rng, 31);
	gbml_dataset_init(&ds, true);
	ds.schema = s;
	for (int64_t i = 0; i < 2000; i++)
	{
		int			c = (int) (i % 7);
		float		x[3] = {(float) (50 + 30 * gbml_rng_uniform(&rng)), c == 6 ? NAN : (float) c,
		(float) (gbml_rng_uniform(&rng) * 2 - 1)};
		gbml_row	row = {.x = x,.n_features = 3,.group_is_null = true,.weight_is_null = true};

		row.label = (float) (0.05 * x[0] + effect[c] + x[2] + 0.3 * (gbml_rng_uniform(&rng) - 0.5));
		gbml_dataset_append(&ds, &env, &row, true);
	}
	if (gbml_train_values(&env, "saga", p, gpu ? 7 : 6, &ds, NULL, &model, &len) != GBML_OK)
		printf("# categorical SAGA (%s): %s\n", gpu ? "gpu" : "cpu", env.error);
	else if (gpu && env.device != GBML_DEVICE_GPU)
		printf("# categorical SAGA did not train on the GPU\n");
	else
	{
		out = malloc(len);
		memcpy(out, model, len);
		*len_out = len;
	}
	gbml_free(&env, model);
	gbml_dataset_free(&ds, &env);
	return out;
}

static void
categorical_checks(void)
{
	static const char *const names[] = {"a", "color", "b"};
	int			ncat[] = {0, 6, 0};
	gbml_feature_schema *s = tu_schema(3, names, ncat);
	size_t		lc = 0,
				lg = 0;
	uint8_t    *mc = train_categorical(s, false, &lc),
			   *mg = train_categorical(s, true, &lg);
	gbml_env	env;
	double		fc = NAN,
				fg = NAN;

	gbml_env_init_malloc(&env, 1);
	if (mc && mg)
	{
		fc = tu_meta_number(&env, mc, lc, "objective");
		fg = tu_meta_number(&env, mg, lg, "objective");
	}
	/* the same problem on both: had the device standardized the indicators, its optimum would be another */
	gc_check(fabs(fg - fc) <= 1e-6 * fabs(fc) &&
			 tu_meta_number(&env, mg, lg, "one_hot_columns") == tu_meta_number(&env, mc, lc, "one_hot_columns"),
			 "SAGA with a categorical feature, standardized: the GPU reaches the CPU's optimum (objectives %.12g, %.12g)",
			 fg, fc);
	free(mc);
	free(mg);
	tu_schema_free(s);
	gc_check(gc_no_resources(), "no GPU resources left after the categorical SAGA trainings");
}

void
gc_saga_checks(bool quick)
{
	optimum_checks(quick);
	categorical_checks();
	determinism_checks();
	choice_checks();
	cancel_checks();
	/* up to just past each one's last call (1,326 and 4,033): every phase fails once somewhere */
	gc_inject_faults("a SAGA training, rows resident", attempt_resident, 12, quick ? 61 : 23, 1450);
	gc_inject_faults("a SAGA training, rows streamed", attempt_streamed, 12, quick ? 151 : 47, 4400);
}
