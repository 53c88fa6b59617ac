# tests/bench/bench.mk — builds the C bench drivers, from the repository root:
#   make -s -f tests/bench/bench.mk tests/bench/bin/bench_boost   (or bench_rank, bench_saga, bench_kmeans)
#   make -s -f tests/bench/bench.mk                                (all of them)
# tests/bench/bin/bench_X is tests/bench/bench_X.c + bench_util.c + the engine's
# CORE_SOURCES (core_sources.mk, the list the extension and the unit tests
# build), compiled in one gcc call.  tests/bench/bin/ is git-ignored.  The
# benchmark scripts (tests/bench/*_bench.py) run this before they measure.
BENCH_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
include $(BENCH_DIR)/../../core_sources.mk

ifeq ($(wildcard core_sources.mk),)
$(error run from the repository root: make -f tests/bench/bench.mk tests/bench/bin/bench_X)
endif

ifeq ($(origin CC),default)
CC            = gcc
endif
BENCH_CFLAGS  = -std=gnu11 -O2 -ffp-contract=off -fopenmp -Wall -Wextra -Werror -Isrc/core
BENCH_LIBS    = -lm -ldl
BENCH_DRIVERS = $(patsubst tests/bench/%.c,tests/bench/bin/%,$(wildcard tests/bench/bench_*.c))
BENCH_DRIVERS := $(filter-out tests/bench/bin/bench_util,$(BENCH_DRIVERS))

# bench_kmeans keeps the debug info its former kmeans.mk gave it.
tests/bench/bin/bench_kmeans: BENCH_CFLAGS += -g

.PHONY: all
all: $(BENCH_DRIVERS)

tests/bench/bin/bench_%: tests/bench/bench_%.c tests/bench/bench_util.c tests/bench/bench_util.h \
		$(CORE_SOURCES) $(wildcard src/core/*.h) core_sources.mk tests/bench/bench.mk
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< tests/bench/bench_util.c $(CORE_SOURCES) $(BENCH_LIBS)

# The synthetic-rows generator of spill_bench.sh (a binary COPY stream; no engine code).
tests/bench/bin/gen_rows: tests/bench/gen_rows.c tests/bench/bench.mk
	@mkdir -p tests/bench/bin
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -o $@ $< -lm

# The page-cache rewrite measurement behind the file store's discard (no engine code).
tests/bench/bin/rewrite_pages: tests/bench/rewrite_pages.c tests/bench/bench.mk
	@mkdir -p tests/bench/bin
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -o $@ $<
