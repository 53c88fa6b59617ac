/*
 * gpu_ctx.h — one training's device context as the engine holds it: opened
 * on env's GPU with env's budget and announced to the glue (which destroys
 * it if an ERROR leaves it open), its figures recorded in env for the run
 * report, and a backend failure's status code (the budget, or a device
 * error).  Shared by the boosting trainer (boost_gpu.c) and the GPU chunk
 * store (chunk_store_gpu.c), which each own a context.
 */
#ifndef GBML_GPU_CTX_H
#define GBML_GPU_CTX_H

#include "backend.h"
#include "env.h"

/* A context on env->gpu / env->gpu_id within env->gpu_memory_limit; NULL with env's error set. */
gbml_gpu_ctx *gbml_gpu_ctx_open(gbml_env *env);

/* Its peak memory, bytes copied up and seconds waited, into env (the run report). */
void		gbml_gpu_ctx_record(gbml_env *env, const gbml_gpu_ctx *ctx);

/* Records its figures, tells the glue it is closed, and destroys it (NULL: nothing). */
void		gbml_gpu_ctx_close(gbml_env *env, gbml_gpu_ctx *ctx);

/* The engine's code for the backend's last failure on ctx: GBML_EGPUBUDGET or GBML_EDEVICE. */
int			gbml_gpu_ctx_status(const gbml_env *env, const gbml_gpu_ctx *ctx);

#endif
