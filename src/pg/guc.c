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

static const struct config_enum_entry device_options[] = {
	{"auto", GBML_DEVICE_AUTO, false},
	{"cpu", GBML_DEVICE_CPU, false},
	{"gpu", GBML_DEVICE_GPU, false},
	{NULL, 0, false}
};

void
gbml_define_settings(void)
{
	DefineCustomEnumVariable("gbml.device",
							 "Where gbml trains: auto (a GPU if one is usable, else the CPU), cpu or gpu.",
							 "gpu with no usable GPU is an error; auto falls back to the CPU.",
							 &gbml_setting_device, GBML_DEVICE_AUTO, device_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.threads",
							"CPU threads a gbml training or scoring call may use in this backend.",
							"Each backend has its own pool; keep it small on busy servers.",
							&gbml_setting_threads, 2, 1, 1024,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.gpu_id",
							"Which GPU gbml uses when training on a GPU.",
							NULL, &gbml_setting_gpu_id, 0, 0, 1023,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.memory_limit",
							"Memory budget of one gbml training (rows held plus the trainer's work space).",
							"Going over it is an ERROR with a hint, never an out-of-memory kill.",
							&gbml_setting_memory_limit_kb, 2 * 1024 * 1024, 1024, INT_MAX,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("gbml.progress_interval",
							"Seconds between progress NOTICEs of a long training (0 = none).",
							NULL, &gbml_setting_progress_interval_s, 10, 0, 86400,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	MarkGUCPrefixReserved("gbml");
}
