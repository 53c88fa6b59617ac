# Makefile — builds gbml with PGXS (PostgreSQL 15), the optional CUDA backend,
# and drives the two entry points of README.md: `make demo` and `make test`.
#
#   make            build gbml.so (+ gbml_cuda.so when nvcc is found)
#   make install    install into the PostgreSQL found by pg_config
#   make test       install what is missing, build, install, run every test
#                   (C unit tests, pg_regress, pgTAP) on a throwaway cluster
#   make demo       the same set-up, then the demo (tests/demo/demo.sql)
#   make NO_CUDA=1  skip the CUDA backend even when nvcc exists

EXTENSION  = gbml
EXTVERSION = 0.8.0
MODULE_big = gbml
# 0.1.0's script plus the update path: CREATE EXTENSION runs both, so the
# update path is what every install tests.
DATA       = gbml--0.1.0.sql gbml--0.1.0--0.2.0.sql gbml--0.2.0--0.3.0.sql gbml--0.3.0--0.4.0.sql gbml--0.4.0--0.5.0.sql gbml--0.5.0--0.6.0.sql gbml--0.6.0--0.7.0.sql gbml--0.7.0--0.8.0.sql
PGFILEDESC = "gbml - machine learning inside PostgreSQL"

include core_sources.mk
GLUE_SOURCES = $(wildcard src/pg/*.c)
OBJS = $(CORE_SOURCES:.c=.o) $(GLUE_SOURCES:.c=.o)

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --load-extension=gbml

PG_CONFIG ?= pg_config
# (before the PGXS include: its clean rule tests EXTRA_CLEAN when it is read)
EXTRA_CLEAN = gbml.map gbml_cuda.so gbml_cuda_emu.so tests/unit/gbml_unit tests/unit/obj tests/unit/obj_san tests/gpu/gpu_check tests/gpu/plants tools/param_docs $(OBJS:.o=.d)
# -Wdeclaration-after-statement comes with PostgreSQL's CFLAGS; the engine is C11.
PG_CFLAGS   = -std=gnu11 -fopenmp -Wall -Wextra -Werror -Wno-declaration-after-statement \
              -Wno-missing-field-initializers -Wno-unused-parameter -Wno-sign-compare \
              -Wno-cast-function-type -ffp-contract=off -MMD -MP
PG_CPPFLAGS = -I$(CURDIR)/src/core -I$(CURDIR)/src/pg -I$(libpq_srcdir)
SHLIB_LINK  = -fopenmp -ldl -lm
# libpq: the coordinator's connections to shards (src/pg/shards.c), as postgres_fdw links it
SHLIB_LINK_INTERNAL = $(libpq)

PGXS := $(shell $(PG_CONFIG) --pgxs)
# No LLVM bitcode: the JIT gains nothing on our C functions, and clang may be absent.
override with_llvm = no
include $(PGXS)

# gbml.so's dynamic symbol table holds only what PostgreSQL looks up: the
# magic block, _PG_init, and the SQL functions (PG_FUNCTION_INFO_V1 in
# src/pg) with their info records.  The engine's own functions (boost_load,
# km_init_centres, ...) stay local: a library another extension loads into
# the same backend cannot interpose on them, nor they on its, and calls
# between them bind directly.  tests/check_exports.sh checks the table.
gbml.map: $(GLUE_SOURCES) Makefile
	{ echo '{ global: Pg_magic_func; _PG_init;'; \
	  sed -n 's/^PG_FUNCTION_INFO_V1(\([A-Za-z0-9_]*\));.*/  \1; pg_finfo_\1;/p' $(GLUE_SOURCES); \
	  echo 'local: *; };'; } > $@
$(MODULE_big)$(DLSUFFIX): gbml.map
SHLIB_LINK += -Wl,--version-script=$(CURDIR)/gbml.map

# Header dependencies (-MMD above): a changed struct in a header rebuilds every
# object that includes it, never a mix of old and new layouts in one gbml.so.
-include $(OBJS:.o=.d)

# ---- CUDA backend (gbml_cuda.so) ----
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_SOURCES = $(wildcard cuda/*.cu)
CUDA_ARCH   ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
ifeq ($(NO_CUDA),)
ifneq ($(NVCC),)
ifneq ($(CUDA_SOURCES),)
CUDA_LIB = gbml_cuda.so
endif
endif
endif

all: $(CUDA_LIB)

gbml_cuda.so: $(CUDA_SOURCES) $(wildcard cuda/*.h src/core/*.h)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror -Werror all-warnings \
		--shared -cudart static -I$(CURDIR)/src/core -I$(CURDIR)/cuda -o $@ $(CUDA_SOURCES)

# ---- the emulated CUDA backend (gbml_cuda_emu.so) ----
# The same cuda/ sources compiled by the host C++ compiler against the CPU
# emulation of the CUDA runtime (cuda/emu): needs no nvcc and no GPU, is
# never loaded unless gbml.cuda_library = 'gbml_cuda_emu', and is what
# `make test` runs every GPU code path on.
CUDA_EMU_LIB = gbml_cuda_emu.so
CUDA_EMU_RUNTIME = $(wildcard cuda/emu/*.cpp)
all: $(CUDA_EMU_LIB)

$(CUDA_EMU_LIB): $(CUDA_SOURCES) $(CUDA_EMU_RUNTIME) $(wildcard cuda/*.h cuda/emu/*.h src/core/*.h)
	$(CXX) -std=c++17 -O2 -g -ffp-contract=off -fPIC -fvisibility=hidden -Wall -Wextra -Werror -DGBML_CUDA_EMU -Icuda -Isrc/core --shared -o $@ \
		-x c++ $(CUDA_SOURCES) -x none $(CUDA_EMU_RUNTIME) -pthread

install: install-cuda-emu
install-cuda-emu: $(CUDA_EMU_LIB)
	$(INSTALL_SHLIB) $(CUDA_EMU_LIB) '$(DESTDIR)$(pkglibdir)/$(CUDA_EMU_LIB)'
.PHONY: install-cuda-emu

ifneq ($(CUDA_LIB),)
install: install-cuda
install-cuda: $(CUDA_LIB)
	$(INSTALL_SHLIB) $(CUDA_LIB) '$(DESTDIR)$(pkglibdir)/$(CUDA_LIB)'
.PHONY: install-cuda
endif


# ---- tests ----
unit:
	$(MAKE) -C tests/unit -j$(CHECK_JOBS) run

# libFuzzer: each harness (model loader, params parser, dataset deserializer)
# for a few seconds, and the inputs of the bugs the fuzzers found, replayed.
# `make -C tests/fuzz long` is the benchmark-style run (10^6 executions each).
fuzz:
	$(MAKE) -C tests/fuzz smoke crashes

# The checks' independent builds (the fourteen planted backends, each one
# recompiled source linked with the others; the sanitized checker and backend)
# run up to CHECK_JOBS at once: the cores, at most 4.  On 2 cores the plants
# take about 1.1 min (built and checked; 3.5 min when each plant rebuilt the
# whole backend and ran the quick checks), a good part of `make test`'s
# margin under its 15 minutes.
CHECK_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$((n < 4 ? n : 4)))

# The engine's unit tests and the GPU checker (on an emulated backend built
# with the same sanitizers) under AddressSanitizer + UndefinedBehaviorSanitizer.
sanitize:
	$(MAKE) -C tests/unit -j$(CHECK_JOBS) run-sanitized
	$(MAKE) -C tests/gpu -j$(CHECK_JOBS) run-sanitized LIB=gbml_cuda_emu_san.so SAN_ARGS=--quick

# The GPU checker on the emulated backend, and the planted kernel bugs it must catch.
gpu-emu: $(CUDA_EMU_LIB)
	$(MAKE) -C tests/emu run
	$(MAKE) -C tests/gpu run LIB=$(CURDIR)/$(CUDA_EMU_LIB)
	$(MAKE) -C tests/gpu -j$(CHECK_JOBS) plants

# Everything `make test` runs, inside an already running cluster (PG* env set).
check-in-cluster: installcheck pgtap

pgtap:
	pg_prove --ext .sql -r tests/pgtap

test:
	tests/run_all.sh test

demo:
	tests/run_all.sh demo

.PHONY: unit fuzz sanitize gpu-emu pgtap test demo check-in-cluster

# ---- docs generated from code ----
docs: docs/params.md
docs/params.md: tools/param_docs.c $(addprefix ,$(CORE_SOURCES)) $(wildcard src/core/*.h)
	$(CC) -std=gnu11 -O1 -fopenmp -Isrc/core -o tools/param_docs tools/param_docs.c $(CORE_SOURCES) -lm -ldl
	mkdir -p docs && tools/param_docs > $@
.PHONY: docs
