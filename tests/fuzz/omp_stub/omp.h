/*
 * omp.h stand-in for building the engine without OpenMP (tests/fuzz,
 * OPENMP=0): the pragmas are ignored and the engine runs single-threaded,
 * which it supports (results never depend on the thread count).
 */
#ifndef GBML_FUZZ_OMP_STUB_H
#define GBML_FUZZ_OMP_STUB_H
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_max_threads(void) { return 1; }
static inline void omp_set_num_threads(int n) { (void) n; }
#endif
