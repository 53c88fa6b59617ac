/*
 * guc.c — the gbml.* settings.  Every setting is also a key of a trainer's
 * params (device, threads, gpu_id, memory_limit_mb), which wins over it.
 */
#include "glue.h"

#include <limits.h>

#include "utils/guc.h"

int			gbml_setting_device = GBML_DEVICE_AUTO;
int			gbml_setting_threads = 2;
int			gbml_setting_gpu_id = 0;
int			gbml_setting_memory_limit_kb = 2 * 1024 * 1024;
int			gbml_setting_progress_interval_s = 10;
int			gbml_setting_gpu_memory_limit_mb = 0;
char	   *gbml_setting_cuda_library = NULL;

static const struct config_enum_entry device_options[] = {
	{"auto", GBML_DEVICE_AUTO, false},
	{"cpu", GBML_DEVICE_CPU, false},
	{"gpu", GBML_DEVICE_GPU, false},
	{"hybrid", GBML_DEVICE_HYBRID, false},
	{NULL, 0, false}
};

/* A plain file name: the setting picks a library in $libdir, never a path. */
static bool
check_cuda_library(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;

	if (v == NULL || v[0] == '\0' || strlen(v) > 64 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(v))
	{
		GUC_check_errdetail("gbml.cuda_library must be a library name such as gbml_cuda or gbml_cuda_emu.");
		return false;
	}
	return true;
}

void
gbml_define_settings(void)
{
	DefineCustomEnumVariable("gbml.device",
							 "Where gbml trains: auto (a GPU if one is usable, else the CPU), cpu, gpu or hybrid.",
							 "gpu or hybrid with no usable GPU is an error; auto falls back to the CPU; hybrid shares K-Means iterations between the GPU and the CPU threads.",
							 &gbml_setting_device, GBML_DEVICE_AUTO, device_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.threads",
							"CPU threads a gbml training or scoring call may use in this backend.",
							"Each backend has its own pool; keep it small on busy servers. Boosting's trees take one per 131,072 bins of their rows (rows x features); a \"threads\" param is used as given.",
							&gbml_setting_threads, 2, 1, 1024,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.gpu_id",
							"Which GPU gbml uses when training on a GPU.",
							NULL, &gbml_setting_gpu_id, 0, 0, 1023,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.memory_limit",
							"Memory budget of one gbml training (rows held plus the trainer's work space).",
							"Past it rows go to temporary files (boosting and K-Means); what still does not fit is an ERROR with a hint, never an out-of-memory kill.",
							&gbml_setting_memory_limit_kb, 2 * 1024 * 1024, 1024, INT_MAX,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.progress_interval",
							"Seconds between progress NOTICEs of a long training (0 = none).",
							NULL, &gbml_setting_progress_interval_s, 10, 0, 86400,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.gpu_memory_limit",
							"GPU memory budget of one gbml training (0 = 80% of the card's free memory).",
							"Going over it is an ERROR with a hint; under device auto the training falls back to the CPU.",
							&gbml_setting_gpu_memory_limit_mb, 0, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomStringVariable("gbml.cuda_library",
							   "The CUDA backend library a backend loads: gbml_cuda (a card) or gbml_cuda_emu (the CPU emulation, for tests).",
							   "A file name in the PostgreSQL library directory, without .so.",
							   &gbml_setting_cuda_library, "gbml_cuda",
							   PGC_SUSET, 0, check_cuda_library, NULL, NULL);
	MarkGUCPrefixReserved("gbml");
}
