/*
 * test_shards_util.h — training across servers with the shards in this
 * process (the unit tests of kmeans_shards.c and saga_shards.c): each shard
 * its own env and dataset, answering through its algorithm's shard side
 * (shard_link.h) as a server would, the coordinator's link calling them in
 * turn.
 */
#ifndef GBML_TEST_SHARDS_UTIL_H
#define GBML_TEST_SHARDS_UTIL_H

#include "shard_link.h"
#include "test_util.h"

#define TU_MAX_SHARDS 3

/* Fills ds with the rows of shard `shard` of n_shards (files: in a file store); shard -1: every row. */
typedef void (*tu_fill_fn) (gbml_dataset *ds, gbml_env *env, int shard, int n_shards, bool files, void *arg);

/*
 * Trains `algorithm` with params v[0..nv) on rows dealt to n_shards
 * in-process shards (shard 2's in files): the model (malloc'd, *len bytes),
 * or NULL with the coordinator's error in error.  fail_at > 0: shard 2
 * fails at that round trip.  Checks that nothing stays allocated anywhere.
 */
uint8_t    *tu_train_sharded(const char *algorithm, tu_fill_fn fill, void *arg, int n_shards,
							 const gbml_param_value *v, int nv, int fail_at, size_t *len, char *error,
							 size_t error_size);
/* ... with the coordinator's own eval rows (eval_source's): eval_fill(shard -1) fills them (NULL: none). */
uint8_t    *tu_train_sharded_eval(const char *algorithm, tu_fill_fn fill, void *arg, tu_fill_fn eval_fill,
								  void *eval_arg, int n_shards, const gbml_param_value *v, int nv, int fail_at,
								  size_t *len, char *error, size_t error_size);

/*
 * Trains `algorithm` on every row on one server, then on the rows dealt to
 * 2 and 3 in-process shards (fill: shard -1 is every row), and checks the
 * model bytes are the same; `name` labels a failure.
 */
void		tu_check_same_bytes(const char *algorithm, const char *name, tu_fill_fn fill, void *arg,
								const gbml_param_value *v, int nv);
/* ... with an eval set of the coordinator's own (eval_source's), filled by eval_fill. */
void		tu_check_same_bytes_eval(const char *algorithm, const char *name, tu_fill_fn fill, void *arg,
									 tu_fill_fn eval_fill, void *eval_arg, const gbml_param_value *v, int nv);

/* What a test checks of a sharded model against one server's (ref); name and n_shards label a failure. */
typedef void (*tu_compare_fn) (void *arg, const char *name, int n_shards, const uint8_t *model, size_t len,
							   const uint8_t *ref, size_t ref_len);

/*
 * `algorithm` on every row on one server with v[0 .. nv) (the reference),
 * then on the rows dealt to 2 and 3 in-process shards with v[0 ..
 * n_sharded) (a prefix: the reference's tight tolerances left out), each
 * sharded model handed to compare with the reference; a sharded training
 * that fails is a failure, its error printed with name.
 */
void		tu_check_sharded(const char *algorithm, const char *name, tu_fill_fn fill, void *arg,
							 const gbml_param_value *v, int nv, int n_sharded, tu_compare_fn compare,
							 void *compare_arg);

/*
 * The first row from index `from` on (in fill's order, shard -1) that
 * `algorithm` with params v[0 .. nv) holds out of a shard holding it alone
 * (gbml_shard_split_eval, as the glue splits a shard's rows), or -1: a row
 * to put alone on a shard whose every row is held out.
 */
int64_t		tu_first_held_out(const char *algorithm, const gbml_param_value *v, int nv, tu_fill_fn fill, void *arg,
							  int64_t from);

#endif
