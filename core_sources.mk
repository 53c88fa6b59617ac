# core_sources.mk — the engine's source files (src/core), shared by the
# extension build (Makefile) and the unit-test build (tests/unit/Makefile).
# Add a file here only once it compiles, so the tree always builds.
CORE_SOURCES = \
	src/core/boost.c \
	src/core/boost_rows_local.c \
	src/core/boost_model.c \
	src/core/boost_multiclass.c \
	src/core/boost_node_split.c \
	src/core/boost_set_features.c \
	src/core/boost_shards.c \
	src/core/boost_shard.c \
	src/core/boost_shards_cat.c \
	src/core/boost_shard_cat.c \
	src/core/shard_order.c \
	src/core/boost_quantize.c \
	src/core/boost_bins_walk.c \
	src/core/boost_cat.c \
	src/core/boost_ctr.c \
	src/core/boost_histogram.c \
	src/core/boost_gpu.c \
	src/core/gpu_ctx.c \
	src/core/boost_predict.c \
	src/core/boost_predict_fast.c \
	src/core/boost_loss.c \
	src/core/metrics.c \
	src/core/env.c \
	src/core/rng_normal.c \
	src/core/strbuf.c \
	src/core/dataset.c \
	src/core/dataset_stored.c \
	src/core/dataset_renumber.c \
	src/core/chunk_store_gpu.c \
	src/core/chunk_store_file.c \
	src/core/chunk_store_permute.c \
	src/core/chunk_prefetch.c \
	src/core/row_pieces.c \
	src/core/write_behind.c \
	src/core/params.c \
	src/core/model_format.c \
	src/core/algorithm.c \
	src/core/mean_model.c \
	src/core/backend_loader.c \
	src/core/kmeans.c \
	src/core/kmeans_init.c \
	src/core/kmeans_kernels.c \
	src/core/kmeans_device.c \
	src/core/kmeans_balance.c \
	src/core/kmeans_model.c \
	src/core/kmeans_walk.c \
	src/core/kmeans_shards.c \
	src/core/kmeans_shard.c \
	src/core/shard_link.c \
	src/core/saga.c \
	src/core/saga_model.c \
	src/core/saga_gpu.c \
	src/core/saga_kernels.c \
	src/core/saga_plan.c \
	src/core/saga_slices.c \
	src/core/saga_shard.c \
	src/core/saga_shards.c \
	src/core/owlqn.c \
	src/core/schema.c \
	src/core/onehot.c \
	src/core/onehot_data.c \
	src/core/onehot_counts.c

# Unit tests (tests/unit); main.c, test_util.c, harness.h and test_util.h are always included.
UNIT_TEST_SOURCES = \
	tests/unit/test_rng.c \
	tests/unit/test_boost.c \
	tests/unit/test_boost_loss.c \
	tests/unit/test_metrics.c \
	tests/unit/test_core.c \
	tests/unit/test_stored_models.c \
	tests/unit/test_boost_fast.c \
	tests/unit/test_kmeans.c \
	tests/unit/test_kmeans_exact.c \
	tests/unit/test_kmeans_spill.c \
	tests/unit/test_kmeans_shards.c \
	tests/unit/test_saga_shards.c \
	tests/unit/test_boost_shards.c \
	tests/unit/test_shards_util.c \
	tests/unit/test_saga.c \
	tests/unit/test_saga_spill.c \
	tests/unit/test_saga_categorical.c \
	tests/unit/test_kmeans_categorical.c \
	tests/unit/test_chunk_store_file.c \
	tests/unit/test_boost_spill.c \
	tests/unit/test_boost_categorical.c \
	tests/unit/test_boost_shards_categorical.c \
	tests/unit/test_onehot_shards.c \
	tests/unit/test_boost_depthwise.c \
	tests/unit/test_boost_multiclass.c
