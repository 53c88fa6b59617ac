/*
 * saga_shards.h — the linear models across servers (issue 14).  SAGA's
 * order is its algorithm (a step per row), so across servers the same
 * objective is minimised with OWL-QN (owlqn.h) instead: each iteration
 * needs the loss and its gradient over every row, which each shard sums
 * over its own rows in one round trip (saga_shard.c), and the coordinator
 * adds.  The feature statistics (standardize) come the same way.  The model
 * is the single-server model's form, at the same optimum (to the solvers'
 * tolerance), not its bytes.
 */
#ifndef GBML_SAGA_SHARDS_H
#define GBML_SAGA_SHARDS_H

#include "saga.h"
#include "shard_link.h"

/* The solution and its figures; the arrays are the caller's (d values each, traces trace_cap). */
typedef struct gbml_saga_shards_result
{
	double	   *w;				/* standardized scale when standardizing */
	int			n_scaled;		/* in: columns [0, n_scaled) are standardized (the rest: one-hot indicators) */
	double	   *mean;
	double	   *std;
	double	   *trace_iter;
	double	   *trace_obj;
	double	   *trace_time;
	double	   *trace_rel;
	int64_t		trace_cap;
	int64_t		n_trace;
	int			label_encoding; /* GBML_SAGA_LABELS_* */
	double		b;
	double		objective;
	double		metric;			/* accuracy (logistic) or RMSE (squared) */
	double		pg_max;			/* the objective's pseudo-gradient at the solution (0 at the optimum) */
	double		gap_bound;		/* |pg|^2 / (2 alpha (1 - l1_ratio)) / objective: the suboptimality's bound */
	double		rel;
	int64_t		iterations;
	int64_t		evaluations;
	const char *stop_reason;
	bool		converged;
	double		t_stats;
	double		t_solver;
	gbml_shard_traffic traffic;
} gbml_saga_shards_result;

/*
 * saga.c: categorical inputs' one-hot encoding (an indicator per kept
 * category, an other column per input; onehot.h), ds and eval encoded;
 * union_counts: by the union's counts across servers (a shard, or its
 * coordinator).
 */
struct gbml_onehot;
int			gbml_saga_one_hot(const gbml_dataset *ds, const gbml_dataset *eval, const gbml_saga_params *p,
							  bool union_counts, gbml_env *env, struct gbml_onehot **enc, gbml_dataset *xds,
							  gbml_dataset *xeval);

/* Trains on the rows behind ds->shards with params p (alpha resolved); the solution into out. */
int			gbml_saga_shards_train(const gbml_dataset *ds, gbml_env *env, const gbml_saga_params *p, double alpha,
								   double t_start, gbml_saga_shards_result *out);

/*
 * saga.c: SAGA on ds alone (a shard's rows) with params p and penalty
 * alpha; the solution at the raw scale (w_eff, d values, and b_eff): the
 * shards' local solutions, averaged, are where OWL-QN starts.
 */
int			gbml_saga_local_weights(const gbml_dataset *ds, gbml_env *env, const gbml_saga_params *p, double alpha,
									double *w_eff, double *b_eff);

/* The shard's side (the algorithm table's entry for SAGA). */
extern const gbml_shard_ops gbml_saga_shard_ops;

#endif
