/*
 * harness.h — a minimal unit-test harness for src/core (no PostgreSQL).
 *
 * TEST(name) { ... } registers a test at load time; CHECK(cond) and
 * CHECK_NEAR(a, b, tol) record failures without stopping the test.  main.c
 * runs every test and ends with "N passed, N failed".
 */
#ifndef GBML_TEST_HARNESS_H
#define GBML_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>

void		gbml_test_register(const char *name, void (*fn) (void));
void		gbml_test_fail(const char *file, int line, const char *what);

#define TEST(name) \
	static void name(void); \
	__attribute__((constructor)) static void register_##name(void) { gbml_test_register(#name, name); } \
	static void name(void)

#define CHECK(cond) do { if (!(cond)) gbml_test_fail(__FILE__, __LINE__, #cond); } while (0)

#define CHECK_NEAR(a, b, tol) do { \
		double a_ = (double) (a), b_ = (double) (b); \
		if (!(fabs(a_ - b_) <= (tol))) { \
			char msg_[256]; \
			snprintf(msg_, sizeof(msg_), "%s = %.10g, %s = %.10g, tol %g", #a, a_, #b, b_, (double) (tol)); \
			gbml_test_fail(__FILE__, __LINE__, msg_); \
		} \
	} while (0)

#endif
