/*
 * gpu_check.c — the GPU checker's main and its kernel checks: every kernel
 * of the CUDA backend against the CPU code it mirrors, on random data of
 * odd sizes with poisoned outputs (src/core/boost_histogram.h defines the
 * arithmetic; the device must give the same integers).
 *
 *   gpu_check LIBRARY [--quick] [--kernels-only] [--bench MAX_ROWS]
 *
 * LIBRARY is gbml_cuda.so (a card) or gbml_cuda_emu.so (the CPU emulation,
 * which `make test` uses).  Prints "N passed, N failed" last and exits
 * non-zero on any failure.
 */
#include "gpu_check.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boost_histogram.h"
#include "boost_quantize.h"
#include "dataset.h"
#include "rng.h"

const gbml_backend *gc_backend;
void	   *gc_library;
bool		gc_emulated;
static int	passed,
			failed;

void
gc_check(bool ok, const char *fmt,...)
{
	va_list		ap;

	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

gc_emu_fail_after_fn
gc_emu_fail_after(void)
{
	return gc_library ? (gc_emu_fail_after_fn) dlsym(gc_library, "gbml_emu_fail_after") : NULL;
}

bool
gc_no_resources(void)
{
	gbml_gpu_resources r;

	gc_backend->resources(&r);
	return r.contexts == 0 && r.device_bytes == 0 && r.device_allocations == 0 && r.pinned_bytes == 0 &&
		r.pinned_allocations == 0 && r.streams == 0 && r.events == 0;
}

/* ---- one random histogram problem ---- */

typedef struct hist_case
{
	int64_t		n;
	int			n_features;
	int64_t		block_rows;
	int			max_borders;	/* borders per feature drawn in 0..max_borders */
	int			level;			/* leaves 0 .. 2^level - 1 */
	int			n_slots;
	bool		packed;
	double		unsampled;		/* share of rows left out */
} hist_case;

typedef struct hist_data
{
	hist_case	c;
	int64_t		n_blocks;
	int64_t    *feat_off;
	int		   *n_borders;
	int64_t		total_bins;
	uint8_t   **blocks;
	uint16_t   *leaf;
	int64_t    *gq,
			   *hq;
	int16_t		slot_of[GBML_BOOST_SLOT_TABLE];
} hist_data;

static int64_t
block_len(const hist_data *h, int64_t b)
{
	int64_t		left = h->c.n - b * h->c.block_rows;

	return left < h->c.block_rows ? left : h->c.block_rows;
}

static void
hist_data_make(hist_data *h, const hist_case *c, uint64_t seed)
{
	gbml_rng	rng;

	memset(h, 0, sizeof(*h));
	h->c = *c;
	gbml_rng_seed(&rng, seed);
	h->n_blocks = (c->n + c->block_rows - 1) / c->block_rows;
	h->feat_off = calloc((size_t) c->n_features + 1, sizeof(int64_t));
	h->n_borders = calloc((size_t) c->n_features, sizeof(int));
	for (int f = 0; f < c->n_features; f++)
	{
		/* the first feature gets the most borders, so the widest case is covered */
		h->n_borders[f] = f == 0 ? c->max_borders : (int) gbml_rng_below(&rng, (uint64_t) c->max_borders + 1);
		h->feat_off[f + 1] = h->feat_off[f] + h->n_borders[f] + 1;
	}
	h->total_bins = h->feat_off[c->n_features];
	h->blocks = calloc((size_t) h->n_blocks, sizeof(uint8_t *));
	for (int64_t b = 0; b < h->n_blocks; b++)
	{
		int64_t		len = block_len(h, b);

		h->blocks[b] = malloc((size_t) len * (size_t) c->n_features);
		for (int f = 0; f < c->n_features; f++)
			for (int64_t r = 0; r < len; r++)
				h->blocks[b][f * len + r] = (uint8_t) gbml_rng_below(&rng, (uint64_t) h->n_borders[f] + 1);
	}
	h->leaf = malloc(sizeof(uint16_t) * (size_t) c->n);
	h->gq = malloc(sizeof(int64_t) * (size_t) c->n);
	h->hq = malloc(sizeof(int64_t) * (size_t) c->n);
	for (int64_t r = 0; r < c->n; r++)
	{
		h->leaf[r] = gbml_rng_uniform(&rng) < c->unsampled ? GBML_BOOST_UNSAMPLED
			: (uint16_t) gbml_rng_below(&rng, (uint64_t) 1 << c->level);
		h->gq[r] = (int64_t) gbml_rng_below(&rng, (uint64_t) 1 << 41) - ((int64_t) 1 << 40);
		h->hq[r] = (int64_t) gbml_rng_below(&rng, (uint64_t) 1 << 30);
	}
	for (int i = 0; i < GBML_BOOST_SLOT_TABLE; i++)
		h->slot_of[i] = -1;
	/* leaves to slots as the trainer maps them: each slot one leaf, some leaves none */
	for (int l = 0; l < (1 << c->level) && l < c->n_slots; l++)
		h->slot_of[l] = (int16_t) ((l * 7 + 3) % c->n_slots);
}

static void
hist_data_free(hist_data *h)
{
	for (int64_t b = 0; b < h->n_blocks; b++)
		free(h->blocks[b]);
	free(h->blocks);
	free(h->feat_off);
	free(h->n_borders);
	free(h->leaf);
	free(h->gq);
	free(h->hq);
}

/* The CPU's histograms of every block (the reference). */
static void
cpu_histograms(const hist_data *h, const uint16_t *leaf, gbml_boost_hist_bin *hist)
{
	int64_t    *seg = calloc((size_t) h->c.n_slots + 1, sizeof(int64_t));
	uint16_t   *idx = malloc(sizeof(uint16_t) * (size_t) h->c.block_rows);
	int64_t    *G = malloc(sizeof(int64_t) * (size_t) h->c.block_rows);
	int64_t    *H = malloc(sizeof(int64_t) * (size_t) h->c.block_rows);

	memset(hist, 0, sizeof(gbml_boost_hist_bin) * (size_t) h->c.n_slots * (size_t) h->total_bins);
	for (int64_t b = 0; b < h->n_blocks; b++)
	{
		int64_t		start = b * h->c.block_rows;
		int64_t		len = block_len(h, b);

		gbml_boost_partition_block(leaf + start, len, h->slot_of, h->c.n_slots, seg, idx);
		if (seg[h->c.n_slots] > 0)
			gbml_boost_hist_block(h->blocks[b], len, h->c.n_features, h->feat_off, h->total_bins, idx, seg,
								  h->c.n_slots, h->gq + start, h->c.packed ? NULL : h->hq + start, G, H, hist);
	}
	free(seg);
	free(idx);
	free(G);
	free(H);
}

static void
cpu_leaf_update(const hist_data *h, uint16_t *leaf, int feature, int border, int level)
{
	for (int64_t b = 0; b < h->n_blocks; b++)
	{
		int64_t		len = block_len(h, b);

		gbml_boost_leaf_update(h->blocks[b] + (size_t) feature * (size_t) len, len, border, level,
							   leaf + b * h->c.block_rows);
	}
}

static gbml_gpu_ctx *
open_case(const hist_data *h)
{
	gbml_gpu_boost_shape shape;
	gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 0);

	if (ctx == NULL)
		return NULL;
	memset(&shape, 0, sizeof(shape));
	shape.n_rows = h->c.n;
	shape.n_features = h->c.n_features;
	shape.block_rows = h->c.block_rows;
	shape.n_blocks = h->n_blocks;
	shape.feat_off = h->feat_off;
	shape.total_bins = h->total_bins;
	shape.max_slots = h->c.n_slots;
	if (gc_backend->boost_begin(ctx, &shape) != 0)
		goto fail;
	{
		/* every block through one reused host buffer: the ring must copy before it returns */
		uint8_t    *scratch = malloc((size_t) h->c.block_rows * (size_t) h->c.n_features);

		for (int64_t b = 0; b < h->n_blocks; b++)
		{
			int64_t		len = block_len(h, b);

			memcpy(scratch, h->blocks[b], (size_t) len * (size_t) h->c.n_features);
			if (gc_backend->boost_put_bins(ctx, b, scratch, len) != 0)
			{
				free(scratch);
				goto fail;
			}
			memset(scratch, 0xEE, (size_t) len * (size_t) h->c.n_features);
		}
		free(scratch);
	}
	return ctx;
fail:
	printf("# backend error: %s\n", gc_backend->last_error());
	gc_backend->ctx_destroy(ctx);
	return NULL;
}

/*
 * One case: histograms at `level` (after a leaf update when level > 0),
 * the last split's leaf update, and a whole tree's leaves, against the CPU.
 */
static void
run_hist_case(const hist_case *c, uint64_t seed)
{
	hist_data	h;
	gbml_gpu_ctx *ctx;
	size_t		nh;
	gbml_boost_hist_bin *want,
			   *got;
	uint16_t   *cpu_leaf,
			   *gpu_leaf;
	char		name[200];
	int			pf,
				pb;
	bool		ok;

	hist_data_make(&h, c, seed);
	snprintf(name, sizeof(name), "%lld rows x %d features (<= %d borders), blocks of %lld, level %d, %d slots%s%s",
			 (long long) c->n, c->n_features, c->max_borders, (long long) c->block_rows, c->level, c->n_slots,
			 c->packed ? ", packed" : "", c->unsampled > 0 ? ", subsampled" : "");
	nh = (size_t) c->n_slots * (size_t) h.total_bins;
	want = malloc(sizeof(gbml_boost_hist_bin) * nh);
	got = malloc(sizeof(gbml_boost_hist_bin) * nh);
	cpu_leaf = malloc(sizeof(uint16_t) * (size_t) c->n);
	gpu_leaf = malloc(sizeof(uint16_t) * (size_t) c->n);
	memcpy(cpu_leaf, h.leaf, sizeof(uint16_t) * (size_t) c->n);
	pf = c->n_features - 1;
	pb = h.n_borders[pf] / 2;
	if (c->level > 0)
	{
		/* the pass first applies the previous level's split to bit level - 1 */
		for (int64_t r = 0; r < c->n; r++)
			cpu_leaf[r] &= (uint16_t) ~(1u << (c->level - 1));
		cpu_leaf_update(&h, cpu_leaf, pf, pb, c->level - 1);
	}
	cpu_histograms(&h, cpu_leaf, want);

	ctx = open_case(&h);
	if (ctx == NULL)
	{
		gc_check(false, "histograms: %s: context", name);
		goto done;
	}
	memset(got, 0x5A, sizeof(gbml_boost_hist_bin) * nh);	/* poison: every entry must be written */
	{
		uint16_t   *start_leaf = malloc(sizeof(uint16_t) * (size_t) c->n);

		memcpy(start_leaf, h.leaf, sizeof(uint16_t) * (size_t) c->n);
		if (c->level > 0)
			for (int64_t r = 0; r < c->n; r++)
				start_leaf[r] &= (uint16_t) ~(1u << (c->level - 1));
		ok = gc_backend->boost_begin_tree(ctx, start_leaf, h.gq, c->packed ? NULL : h.hq) == 0 &&
			gc_backend->boost_level(ctx, c->level, pf, pb, h.slot_of, c->n_slots, got) == 0;
		free(start_leaf);
	}
	if (!ok)
		printf("# backend error: %s\n", gc_backend->last_error());
	gc_check(ok && memcmp(want, got, sizeof(gbml_boost_hist_bin) * nh) == 0, "histograms: %s", name);

	/* the last split: leaf update of bit `level` on the device's leaf indices, copied back */
	if (c->level < GBML_BOOST_MAX_DEPTH - 1)
	{
		int			f2 = 0,
					b2 = h.n_borders[0] > 0 ? h.n_borders[0] - 1 : 0;

		cpu_leaf_update(&h, cpu_leaf, f2, b2, c->level);
		memset(gpu_leaf, 0x77, sizeof(uint16_t) * (size_t) c->n);
		ok = gc_backend->boost_end_tree(ctx, c->level, f2, b2, gpu_leaf) == 0;
		gc_check(ok && memcmp(cpu_leaf, gpu_leaf, sizeof(uint16_t) * (size_t) c->n) == 0, "leaf update: %s", name);
	}

	/* a whole tree's leaf index from the bins */
	{
		int			depth = 1 + (int) (seed % GBML_BOOST_MAX_DEPTH);
		int32_t		feat[GBML_BOOST_MAX_DEPTH],
					bord[GBML_BOOST_MAX_DEPTH];
		bool		same = true;

		for (int l = 0; l < depth; l++)
		{
			feat[l] = (int32_t) ((seed + (uint64_t) l * 5) % (uint64_t) c->n_features);
			bord[l] = h.n_borders[feat[l]] > 0 ? (int32_t) ((seed + (uint64_t) l) % (uint64_t) h.n_borders[feat[l]]) : 0;
		}
		memset(gpu_leaf, 0x77, sizeof(uint16_t) * (size_t) c->n);
		ok = gc_backend->boost_tree_leaves(ctx, depth, feat, bord, gpu_leaf) == 0;
		for (int64_t b = 0; b < h.n_blocks && same; b++)
		{
			int64_t		len = block_len(&h, b);

			for (int64_t r = 0; r < len && same; r++)
			{
				int			idx = 0;

				for (int l = 0; l < depth; l++)
					idx |= (h.blocks[b][(size_t) feat[l] * (size_t) len + (size_t) r] > bord[l]) << l;
				same = gpu_leaf[b * c->block_rows + r] == idx;
			}
		}
		gc_check(ok && same, "tree leaves (depth %d): %s", depth, name);
	}
	gc_backend->ctx_destroy(ctx);
	gc_check(gc_no_resources(), "no resources left: %s", name);
done:
	free(want);
	free(got);
	free(cpu_leaf);
	free(gpu_leaf);
	hist_data_free(&h);
}

/* ---- trees with a split per node (grow_policy Depthwise) ---- */

#define CHECK_NODES ((1 << GBML_BOOST_MAX_DEPTH) - 1)

/* A random Depthwise tree's node splits, in the forest's layout: borders, nodes that do not split, sets. */
typedef struct node_splits
{
	int32_t		feature[CHECK_NODES];
	int32_t		border[CHECK_NODES];
	uint8_t		mask[CHECK_NODES * GBML_BOOST_SET_MASK_BYTES];
} node_splits;

static void
node_splits_make(const hist_data *h, uint64_t seed, node_splits *ns)
{
	gbml_rng	rng;

	gbml_rng_seed(&rng, seed);
	for (int k = 0; k < CHECK_NODES; k++)
	{
		int			f = (int) gbml_rng_below(&rng, (uint64_t) h->c.n_features);
		uint64_t	kind = gbml_rng_below(&rng, 6);

		ns->feature[k] = f;
		ns->border[k] = kind == 0 ? GBML_BOOST_NO_SPLIT : kind <= 2 ? GBML_BOOST_SET_SPLIT
			: (int32_t) gbml_rng_below(&rng, (uint64_t) (h->n_borders[f] > 0 ? h->n_borders[f] : 1));
		for (int i = 0; i < GBML_BOOST_SET_MASK_BYTES; i++)
			ns->mask[k * GBML_BOOST_SET_MASK_BYTES + i] = (uint8_t) gbml_rng_below(&rng, 256);
	}
}

/* The CPU's leaf update of bit `level` by each row's node (the reference). */
static void
cpu_leaf_update_nodes(const hist_data *h, uint16_t *leaf, const node_splits *ns, int level)
{
	size_t		first = ((size_t) 1 << level) - 1;

	for (int64_t b = 0; b < h->n_blocks; b++)
		gbml_boost_leaf_update_nodes(h->blocks[b], block_len(h, b), level, ns->feature + first, ns->border + first,
									 ns->mask + first * GBML_BOOST_SET_MASK_BYTES, leaf + b * h->c.block_rows);
}

/*
 * One Depthwise case against the CPU: histograms at `level` after the
 * previous level's node splits, the last level's node update, a whole
 * tree's leaves walked from its root, and a level whose nodes were never
 * uploaded refused.
 */
static void
run_node_case(const hist_case *c, uint64_t seed)
{
	hist_data	h;
	node_splits ns;
	gbml_gpu_ctx *ctx;
	size_t		nh = 0;
	gbml_boost_hist_bin *want = NULL,
			   *got = NULL;
	uint16_t   *cpu_leaf = malloc(sizeof(uint16_t) * (size_t) c->n),
			   *gpu_leaf = malloc(sizeof(uint16_t) * (size_t) c->n);
	int			depth = 1 + (int) (seed % GBML_BOOST_MAX_DEPTH);
	char		name[200];
	bool		ok;

	hist_data_make(&h, c, seed);
	node_splits_make(&h, seed * 31 + 7, &ns);
	snprintf(name, sizeof(name), "%lld rows x %d features, level %d, %d slots%s", (long long) c->n, c->n_features,
			 c->level, c->n_slots, c->unsampled > 0 ? ", subsampled" : "");
	if ((ctx = open_case(&h)) == NULL)
	{
		gc_check(false, "node splits: %s: context", name);
		goto done;
	}
	nh = (size_t) c->n_slots * (size_t) h.total_bins;
	want = malloc(sizeof(gbml_boost_hist_bin) * nh);
	got = malloc(sizeof(gbml_boost_hist_bin) * nh);
	for (int64_t r = 0; r < c->n; r++)
		h.leaf[r] &= (uint16_t) ~(1u << (c->level - 1));
	memcpy(cpu_leaf, h.leaf, sizeof(uint16_t) * (size_t) c->n);
	cpu_leaf_update_nodes(&h, cpu_leaf, &ns, c->level - 1);
	cpu_histograms(&h, cpu_leaf, want);
	memset(got, 0x5A, sizeof(gbml_boost_hist_bin) * nh);
	ok = gc_backend->boost_begin_tree(ctx, h.leaf, h.gq, c->packed ? NULL : h.hq) == 0 &&
		gc_backend->boost_nodes(ctx, c->level, ns.feature, ns.border, ns.mask) == 0 &&
		gc_backend->boost_level(ctx, c->level, GBML_GPU_SPLIT_BY_NODE, 0, h.slot_of, c->n_slots, got) == 0;
	gc_check(ok && memcmp(want, got, sizeof(gbml_boost_hist_bin) * nh) == 0,
			 "histograms after a split per node: %s", name);

	if (c->level < GBML_BOOST_MAX_DEPTH - 1)
	{
		/* a level whose nodes were not uploaded is refused; then the tree's last level by node */
		ok = gc_backend->boost_end_tree(ctx, c->level, GBML_GPU_SPLIT_BY_NODE, 0, gpu_leaf) != 0;
		gc_check(ok && strstr(gc_backend->last_error(), "not uploaded") != NULL,
				 "a level's node splits must be uploaded first (%s)", gc_backend->last_error());
		cpu_leaf_update_nodes(&h, cpu_leaf, &ns, c->level);
		memset(gpu_leaf, 0x77, sizeof(uint16_t) * (size_t) c->n);
		ok = gc_backend->boost_nodes(ctx, c->level + 1, ns.feature, ns.border, ns.mask) == 0 &&
			gc_backend->boost_end_tree(ctx, c->level, GBML_GPU_SPLIT_BY_NODE, 0, gpu_leaf) == 0;
		gc_check(ok && memcmp(cpu_leaf, gpu_leaf, sizeof(uint16_t) * (size_t) c->n) == 0,
				 "leaf update by node: %s", name);
	}

	/* a whole tree's leaves from its nodes */
	memset(cpu_leaf, 0, sizeof(uint16_t) * (size_t) c->n);
	for (int l = 0; l < depth; l++)
		cpu_leaf_update_nodes(&h, cpu_leaf, &ns, l);
	memset(gpu_leaf, 0x77, sizeof(uint16_t) * (size_t) c->n);
	ok = gc_backend->boost_nodes(ctx, depth, ns.feature, ns.border, ns.mask) == 0 &&
		gc_backend->boost_tree_leaves(ctx, depth, NULL, NULL, gpu_leaf) == 0;
	gc_check(ok && memcmp(cpu_leaf, gpu_leaf, sizeof(uint16_t) * (size_t) c->n) == 0,
			 "tree leaves by node (depth %d): %s", depth, name);
	gc_backend->ctx_destroy(ctx);
	gc_check(gc_no_resources(), "no resources left: node splits, %s", name);
done:
	free(want);
	free(got);
	free(cpu_leaf);
	free(gpu_leaf);
	hist_data_free(&h);
}

/* Column sums (the mean model's kernel): double sums in another order, so within rounding. */
static void
column_sums_check(void)
{
	int64_t		n = 10007;
	int			d = 37;
	float	   *x = malloc(sizeof(float) * (size_t) n * (size_t) d);
	double	   *cpu = calloc((size_t) d, sizeof(double));
	double	   *gpu = calloc((size_t) d, sizeof(double));
	double		worst = 0;
	gbml_rng	rng;
	int			rc;

	gbml_rng_seed(&rng, 1);
	for (int64_t i = 0; i < n * d; i++)
		x[i] = (float) (gbml_rng_uniform(&rng) * 2 - 1);
	gbml_cpu_column_sums(x, n, d, cpu);
	rc = gc_backend->column_sums(0, x, n, d, gpu);
	for (int j = 0; j < d; j++)
	{
		double		rel = fabs(cpu[j] - gpu[j]) / fmax(1.0, fabs(cpu[j]));

		worst = fmax(worst, rel);
	}
	gc_check(rc == 0 && worst < 1e-9, "column sums %lld x %d within 1e-9 of the CPU (%.2e)", (long long) n, d, worst);
	free(x);
	free(cpu);
	free(gpu);
}

/*
 * The chunk store: chunks put through the pinned ring (more chunks than
 * ring slots) and from plain memory come back intact, a random reordering
 * and the missing-value scan match the host, and bins made from stored
 * rows equal gbml_boost_bins_build's.
 */
static void
chunk_store_checks(void)
{
	const int	d = 7;
	const int64_t rows[] = {100, 1000, 1, 777, 1000, 64};
	const int	n_chunks = 6;
	int64_t		n = 0;
	float	   *all,
			   *back;
	int64_t    *addr,
			   *perm;
	gbml_rng	rng;
	gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 0);
	bool		ok = ctx != NULL;
	int64_t		at = 0;

	for (int c = 0; c < n_chunks; c++)
		n += rows[c];
	all = malloc(sizeof(float) * (size_t) n * d);
	back = malloc(sizeof(float) * (size_t) n * d);
	addr = malloc(sizeof(int64_t) * (size_t) n);
	perm = malloc(sizeof(int64_t) * (size_t) n);
	gbml_rng_seed(&rng, 77);
	for (int64_t i = 0; i < n * d; i++)
		all[i] = gbml_rng_uniform(&rng) < 0.01 ? NAN : (float) (gbml_rng_uniform(&rng) * 10 - 5);
	/* feature 3: neighbouring floats, so some borders equal a value (border_between's rounding) */
	for (int64_t i = 0; i < n; i++)
		if (!isnan(all[i * d + 3]))
			all[i * d + 3] = 1.0f + (float) gbml_rng_below(&rng, 4) * 0x1p-23f;
	for (int c = 0; c < n_chunks && ok; c++)
	{
		/* the first four through the ring's two buffers (each reused), the rest from plain memory */
		bool		plain = c >= 4;
		float	   *buf = plain ? malloc(sizeof(float) * (size_t) rows[c] * d) : gc_backend->chunk_buffer(ctx, rows[c], d);

		ok = buf != NULL;
		if (ok)
		{
			memcpy(buf, all + (size_t) at * d, sizeof(float) * (size_t) rows[c] * d);
			ok = gc_backend->chunk_put(ctx, buf, rows[c], d) == 0;
			if (plain)
			{
				memset(buf, 0x7f, sizeof(float) * (size_t) rows[c] * d);
				free(buf);
			}
		}
		for (int64_t r = 0; r < rows[c]; r++)
			addr[at + r] = ((int64_t) c << 32) | r;
		at += rows[c];
	}
	ok = ok && gc_backend->chunk_fetch(ctx, addr, n, back) == 0;
	gc_check(ok && memcmp(all, back, sizeof(float) * (size_t) n * d) == 0,
			 "chunk store: %d chunks (through the pinned ring and from plain memory) fetched back intact", n_chunks);

	/* a random order, in chunks of 300 after a first of 50 */
	for (int64_t i = 0; i < n; i++)
		perm[i] = i;
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) gbml_rng_below(&rng, (uint64_t) i + 1),
					t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	{
		int64_t    *src = malloc(sizeof(int64_t) * (size_t) n);
		bool		same = true;

		for (int64_t i = 0; i < n; i++)
			src[i] = addr[perm[i]];
		ok = ok && gc_backend->chunk_permute(ctx, src, n, 50, 300) == 0;
		for (int64_t i = 0; i < n; i++)
			addr[i] = i < 50 ? i : ((1 + (i - 50) / 300) << 32) | ((i - 50) % 300);
		ok = ok && gc_backend->chunk_fetch(ctx, addr, n, back) == 0;
		for (int64_t i = 0; i < n && same; i++)
			same = memcmp(back + (size_t) i * d, all + (size_t) perm[i] * d, sizeof(float) * d) == 0;
		gc_check(ok && same, "chunk store: a random reordering into chunks of 50, then 300 rows");
		free(src);
	}
	{
		uint8_t		flags[7];
		bool		want[7] = {false};

		for (int64_t i = 0; i < n * d; i++)
			if (isnan(all[i]))
				want[i % d] = true;
		ok = ok && gc_backend->chunk_missing(ctx, flags) == 0;
		for (int f = 0; f < d; f++)
			ok = ok && (flags[f] != 0) == want[f];
		gc_check(ok, "chunk store: the missing-value scan matches the host's");
	}
	{
		/* bins of the stored rows (now in perm order) for training order = reversed */
		gbml_env	env;
		gbml_dataset tmp;
		gbml_boost_borders borders;
		gbml_boost_bins want;
		const float **ptrs = malloc(sizeof(float *) * (size_t) n);
		int64_t    *src = malloc(sizeof(int64_t) * (size_t) n);
		int64_t		feat_off[8];
		gbml_gpu_boost_shape shape;
		uint16_t   *leaf = calloc((size_t) n, sizeof(uint16_t));
		int32_t		feat[1] = {3},
					bord[1] = {0};
		bool		same = true;
		gbml_gpu_ctx *bctx = ctx;

		gbml_env_init_malloc(&env, 1);
		gbml_dataset_init(&tmp, true);
		for (int64_t i = 0; i < n; i++)
		{
			gbml_row	row = {.x = all + (size_t) i * d,.n_features = d,.group_is_null = true,.weight_is_null = true};

			gbml_dataset_append(&tmp, &env, &row, false);
		}
		gbml_boost_borders_build(&tmp, 20, GBML_BORDER_MEDIAN, 100000, 1, &borders, &env);
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		k = n - 1 - i;	/* training row i is stored row k, which holds all[perm[k]] */

			src[i] = addr[k];
			ptrs[i] = all + (size_t) perm[k] * d;
		}
		gbml_boost_bins_build(ptrs, n, d, &borders, 512, &want, &env);
		for (int f = 0; f <= d; f++)
			feat_off[f] = f == 0 ? 0 : feat_off[f - 1] + borders.count[f - 1] + 1;
		memset(&shape, 0, sizeof(shape));
		shape.n_rows = n;
		shape.n_features = d;
		shape.block_rows = 512;
		shape.n_blocks = want.n_blocks;
		shape.feat_off = feat_off;
		shape.total_bins = feat_off[d];
		shape.max_slots = 1;
		ok = ok && gc_backend->boost_begin(bctx, &shape) == 0 &&
			gc_backend->boost_bin_rows(bctx, src, borders.count, borders.offset, borders.values) == 0;
		/* read the device bins back one feature-border split at a time: leaf = (bin > j) */
		for (int j = 0; ok && same && j < borders.count[3]; j++)
		{
			bord[0] = j;
			ok = gc_backend->boost_tree_leaves(bctx, 1, feat, bord, leaf) == 0;
			for (int64_t b = 0; ok && same && b < want.n_blocks; b++)
			{
				int64_t		len = gbml_boost_block_len(&want, b);

				for (int64_t r = 0; r < len && same; r++)
					same = leaf[b * 512 + r] == (want.blocks[b][3 * len + r] > j);
			}
		}
		gc_check(ok && same, "chunk store: bins made from stored rows equal the host's (%d borders)", borders.count[3]);
		gbml_boost_bins_free(&want, &env);
		gbml_boost_borders_free(&borders, &env);
		gbml_dataset_free(&tmp, &env);
		free(ptrs);
		free(src);
		free(leaf);
	}
	if (!ok)
		printf("# backend error: %s\n", gc_backend->last_error());
	gc_backend->ctx_destroy(ctx);
	gc_check(gc_no_resources(), "chunk store: nothing held after the context is destroyed");
	free(all);
	free(back);
	free(addr);
	free(perm);
}

void
gc_kernel_checks(void)
{
	chunk_store_checks();
	column_sums_check();
	static const hist_case cases[] = {
		/* n, features, block rows, borders, level, slots, packed, unsampled */
		{1, 1, 8192, 3, 0, 1, false, 0},
		{7, 3, 8192, 32, 1, 1, true, 0},
		{8192, 5, 8192, 32, 0, 1, false, 0},
		{8193, 37, 8192, 255, 3, 4, false, 0.3},
		{20000, 10, 8192, 32, 5, 16, true, 0.1},
		{5000, 4, 1000, 64, 4, 8, false, 0},	/* bin blocks that are not a multiple of a tile */
		{3000, 3, 8192, 255, 7, 64, false, 0.2},
		{3000, 2, 8192, 255, 8, 128, false, 0},	/* too wide for shared memory: the global kernel */
		{40000, 2, 8192, 8, 2, 2, true, 0.5},	/* more blocks than the staging ring */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_hist_case(&cases[i], 1000 + i);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (cases[i].level > 0)
			run_node_case(&cases[i], 2000 + i);

	/* misuse is an error, not a crash */
	{
		gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 0);
		gbml_boost_hist_bin h[4];
		int16_t		slot_of[GBML_BOOST_SLOT_TABLE];

		bool		failed_call;

		memset(slot_of, 0xff, sizeof(slot_of));
		failed_call = ctx != NULL && gc_backend->boost_level(ctx, 0, 0, 0, slot_of, 1, h) != 0;
		gc_check(failed_call && strstr(gc_backend->last_error(), "boost_begin") != NULL,
				 "a level before boost_begin is an error (%s)", gc_backend->last_error());
		gc_backend->ctx_destroy(ctx);
	}
	/* the budget: a context of 1 KB cannot hold any training */
	{
		hist_data	h;
		hist_case	c = {1000, 4, 8192, 32, 0, 1, false, 0};
		gbml_gpu_boost_shape shape;
		gbml_gpu_ctx *ctx = gc_backend->ctx_create(0, 1024);

		hist_data_make(&h, &c, 7);
		memset(&shape, 0, sizeof(shape));
		shape.n_rows = c.n;
		shape.n_features = c.n_features;
		shape.block_rows = c.block_rows;
		shape.n_blocks = h.n_blocks;
		shape.feat_off = h.feat_off;
		shape.total_bins = h.total_bins;
		shape.max_slots = 1;
		gc_check(ctx != NULL && gc_backend->boost_begin(ctx, &shape) != 0 && gc_backend->ctx_over_budget(ctx) &&
				 strstr(gc_backend->last_error(), "budget") != NULL,
				 "over the context's budget: %s", gc_backend->last_error());
		gc_backend->ctx_destroy(ctx);
		hist_data_free(&h);
		gc_check(gc_no_resources(), "no resources left after the budget error");
	}
}

int
main(int argc, char **argv)
{
	const char *lib = argc > 1 ? argv[1] : "./gbml_cuda.so";
	char		err[300] = "";
	gbml_device_info info;
	bool		quick = false,
				kernels_only = false;
	int64_t		bench_rows = 0;

	for (int i = 2; i < argc; i++)
	{
		if (strcmp(argv[i], "--quick") == 0)
			quick = true;
		else if (strcmp(argv[i], "--kernels-only") == 0)
			kernels_only = true;
		else if (strcmp(argv[i], "--bench") == 0 && i + 1 < argc)
			bench_rows = atoll(argv[++i]);
	}
	gc_backend = gbml_backend_load(lib, err, sizeof(err));
	if (gc_backend == NULL)
	{
		printf("no CUDA backend: %s\n0 passed, 1 failed\n", err);
		return 1;
	}
	gc_library = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	printf("backend: %s, devices: %d\n", gc_backend->name, gc_backend->device_count());
	if (gc_backend->device_count() < 1)
	{
		printf("no GPU: %s\n0 passed, 1 failed\n", gc_backend->last_error());
		return 1;
	}
	if (gc_backend->device_info(0, &info) == 0)
	{
		gc_emulated = info.emulated;
		printf("device 0: %s, %zu MB (%zu MB free), sm_%d%d, %d SMs, shared %zu / %zu KB per block%s\n",
			   info.name, info.total_memory >> 20, info.free_memory >> 20, info.compute_major, info.compute_minor,
			   info.multiprocessors, info.shared_per_block >> 10, info.shared_per_block_optin >> 10,
			   info.emulated ? " (emulated)" : "");
	}
	gc_kernel_checks();
	gc_kmeans_checks(quick);
	if (!kernels_only)
	{
		gc_training_checks(quick);
		gc_saga_checks(quick);
		gc_kmeans_training_checks(quick);
	}
	if (bench_rows > 0)
	{
		gc_bench(bench_rows);
		gc_kmeans_bench(bench_rows);
		gc_kmeans_fit_bench(bench_rows);
		gc_saga_bench(bench_rows);
	}
	printf("\n%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
