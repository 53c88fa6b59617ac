/*
 * clang_compat.h — force-included (-include) into the engine sources when
 * they are built with clang for fuzzing.
 *
 * src/core/kmeans_kernels.c uses GCC's __builtin_shuffle(v, mask) with a
 * run-time mask (KM_HMIN, KM_HMIN_I); clang has no such builtin (its
 * __builtin_shufflevector takes constant indices only).  This is the same
 * operation written lane by lane: r[i] = v[mask[i] % lanes], GCC's
 * definition.  Slower than GCC's, identical in result.
 *
 * clang 14 gets target_clones wrong for functions called from another
 * file: it names the dispatcher "f.ifunc" while callers reference "f", so
 * the link fails (fixed in clang 15).  Before 15 the attribute is dropped:
 * the fuzzed engine runs the "default" (baseline ISA) clone of those
 * kernels.  The engine's own target("avx2") kernels (kmeans_kernels.c)
 * are unaffected.
 */
#ifndef GBML_FUZZ_CLANG_COMPAT_H
#define GBML_FUZZ_CLANG_COMPAT_H
#if defined(__clang__) && !__has_builtin(__builtin_shuffle)
#define __builtin_shuffle(v, m) __extension__ ({ \
		__typeof__(v) v_ = (v), r_; \
		__typeof__(m) m_ = (m); \
		for (unsigned i_ = 0; i_ < sizeof(v_) / sizeof(v_[0]); i_++) \
			r_[i_] = v_[m_[i_] & (sizeof(v_) / sizeof(v_[0]) - 1)]; \
		r_; \
	})
#endif
#if defined(__clang__) && __clang_major__ < 15
#define target_clones(...) __unused__
#endif
#endif
