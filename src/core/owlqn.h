/*
 * owlqn.h — OWL-QN (Andrew & Gao, 2007): limited-memory quasi-Newton
 * minimisation of f(x) + l1 * sum_{j < n_l1} |x_j| for a smooth convex f,
 * which is L-BFGS when l1 is 0.  The linear models train with it when
 * their rows are on other servers: each evaluation of f and its gradient is
 * one round trip to the shards (saga_shards.c), where SAGA would need a
 * round trip per row.
 */
#ifndef GBML_OWLQN_H
#define GBML_OWLQN_H

#include "env.h"

/* f(x) and its gradient g (n values each call); GBML_OK or an error (env's). */
typedef int (*gbml_owlqn_fn) (void *ctx, const double *x, double *f, double *g);
/* After each iteration: its number, the objective, the pseudo-gradient's largest entry; true stops. */
typedef bool (*gbml_owlqn_progress) (void *ctx, int64_t iteration, double objective, double pg_max);

#define OWLQN_WINDOW 10

typedef struct gbml_owlqn_params
{
	int			n;				/* variables */
	int			n_l1;			/* the first n_l1 carry the L1 penalty */
	double		l1;
	int			memory;			/* correction pairs kept (10) */
	int64_t		max_iter;
	double		gtol;			/* stop when every pseudo-gradient entry is at most this */
	double		ftol;			/* ... or the last OWLQN_WINDOW iterations together lowered the objective by
								 * less than this, relatively (or one iteration not at all) */
	/*
	 * With mu > 0, the objective's strong convexity: stop when the bound on
	 * the suboptimality, |pg|^2 / (2 mu), is at most `gap` times |objective|.
	 */
	double		mu;
	double		gap;
} gbml_owlqn_params;

typedef struct gbml_owlqn_result
{
	int64_t		iterations;
	int64_t		evaluations;	/* calls of f */
	double		objective;		/* f + the L1 term at the solution */
	double		pg_max;			/* the pseudo-gradient's largest entry there (0 at the optimum) */
	double		rel_change;		/* the last iteration's largest change over the largest |x| */
	const char *stop_reason;	/* "gap", "gtol", "ftol", "max_iter", "line_search" */
	bool		converged;		/* gap, gtol or ftol */
	double		gap_bound;		/* |pg|^2 / (2 mu) / |objective| at the solution (mu > 0), else NaN */
} gbml_owlqn_result;

/* Minimises from x (n values, the solution on return). */
int			gbml_owlqn(gbml_env *env, const gbml_owlqn_params *P, gbml_owlqn_fn fn, gbml_owlqn_progress progress,
					   void *ctx, double *x, gbml_owlqn_result *res);

#endif
