/*
 * gpu_ctx.c — see gpu_ctx.h.
 */
#include "gpu_ctx.h"

gbml_gpu_ctx *
gbml_gpu_ctx_open(gbml_env *env)
{
	gbml_gpu_ctx *ctx = env->gpu->ctx_create(env->gpu_id, env->gpu_memory_limit);

	if (ctx == NULL)
	{
		gbml_error(env, GBML_EDEVICE, "GPU context: %s", env->gpu->last_error());
		return NULL;
	}
	if (env->gpu_ctx_fn)
		env->gpu_ctx_fn(env->gpu_ctx_hook_ctx, env->gpu, ctx, true);
	return ctx;
}

void
gbml_gpu_ctx_record(gbml_env *env, const gbml_gpu_ctx *ctx)
{
	env->gpu_memory_peak = (double) env->gpu->ctx_memory_peak(ctx);
	env->gpu->ctx_transfer_stats(ctx, &env->gpu_h2d_bytes, &env->gpu_wait_seconds);
}

void
gbml_gpu_ctx_close(gbml_env *env, gbml_gpu_ctx *ctx)
{
	if (ctx == NULL)
		return;
	gbml_gpu_ctx_record(env, ctx);
	if (env->gpu_ctx_fn)
		env->gpu_ctx_fn(env->gpu_ctx_hook_ctx, env->gpu, ctx, false);
	env->gpu->ctx_destroy(ctx);
}

int
gbml_gpu_ctx_status(const gbml_env *env, const gbml_gpu_ctx *ctx)
{
	return ctx && env->gpu->ctx_over_budget(ctx) ? GBML_EGPUBUDGET : GBML_EDEVICE;
}
