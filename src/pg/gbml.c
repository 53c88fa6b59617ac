/*
 * gbml.c — the module's entry: PG_MODULE_MAGIC and _PG_init, which only
 * defines settings.  Nothing else starts here: no OpenMP, no CUDA (rule 2
 * of DESIGN.md) — both are initialised lazily in the backend that needs them.
 */
#include "glue.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	gbml_define_settings();
}
