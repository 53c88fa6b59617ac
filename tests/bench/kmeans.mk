# tests/bench/kmeans.mk — builds the K-Means bench driver:
#   make -f tests/bench/kmeans.mk          (from the repository root)
# Only the engine files K-Means needs are linked, so the driver builds even
# while other trainers are being edited.  The binary goes to tests/bench/bin/
# (git-ignored).
KM_TOP ?= .
KM_CORE = env.c strbuf.c dataset.c model_format.c kmeans.c kmeans_kernels.c
KM_SRCS = $(addprefix $(KM_TOP)/src/core/,$(KM_CORE)) $(KM_TOP)/tests/bench/bench_kmeans.c
KM_BIN = $(KM_TOP)/tests/bench/bin/bench_kmeans

$(KM_BIN): $(KM_SRCS) $(wildcard $(KM_TOP)/src/core/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fopenmp -Wall -Wextra -Werror -I$(KM_TOP)/src/core -o $@ $(KM_SRCS) -lm

.PHONY: bench_kmeans
bench_kmeans: $(KM_BIN)
