/*
 * saga_shard_msg.h — the linear models' messages between a coordinator and
 * its shards (saga_shards.c, saga_shard.c): the request codes; the hello
 * is shard_msg.h's head, then the labels' classes (i64, GBML_SAGA_CLASS_*
 * bits) and the first label outside them (f64).
 *
 *   SG_OP_MOMENTS   centered (i64), center[d]  ->  sums[d] of x or (x - center)^2
 *   SG_OP_LOSS_GRAD w[d], b (raw scale)        ->  loss sum, statistic, d/db sum, d/dw[d] sums
 *   SG_OP_LOCAL     alpha, epochs              ->  solved (0/1), w[d], b: SAGA on the shard's rows alone
 */
#ifndef GBML_SAGA_SHARD_MSG_H
#define GBML_SAGA_SHARD_MSG_H

#include "shard_msg.h"

#define SG_SHARD_MAGIC 0x67736773u	/* "gsgs" */

enum
{
	SG_OP_MOMENTS = 1,
	SG_OP_LOSS_GRAD,
	SG_OP_LOCAL
};

#endif
