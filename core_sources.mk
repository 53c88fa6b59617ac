# core_sources.mk — the engine's source files (src/core), shared by the
# extension build (Makefile) and the unit-test build (tests/unit/Makefile).
# Add a file here only once it compiles, so the tree always builds.
CORE_SOURCES = \
	src/core/env.c \
	src/core/strbuf.c \
	src/core/dataset.c \
	src/core/params.c \
	src/core/model_format.c \
	src/core/algorithm.c \
	src/core/mean_model.c \
	src/core/backend_loader.c

# Unit tests (tests/unit); main.c and harness.h are always included.
UNIT_TEST_SOURCES = \
	tests/unit/test_core.c
