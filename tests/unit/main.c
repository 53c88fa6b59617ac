/*
 * main.c — runs every registered unit test; prints one line per failure and
 * the closing "N passed, N failed" line.  Exit status 1 on any failure.
 * An optional argument runs only tests whose name contains it.
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TESTS 1024

static struct
{
	const char *name;
	void		(*fn) (void);
}			tests[MAX_TESTS];
static int	n_tests;
static int	current_failures;

void
gbml_test_register(const char *name, void (*fn) (void))
{
	if (n_tests < MAX_TESTS)
	{
		tests[n_tests].name = name;
		tests[n_tests].fn = fn;
		n_tests++;
	}
}

void
gbml_test_fail(const char *file, int line, const char *what)
{
	current_failures++;
	fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what);
}

int
main(int argc, char **argv)
{
	int			passed = 0,
				failed = 0;
	const char *filter = argc > 1 ? argv[1] : NULL;

	for (int i = 0; i < n_tests; i++)
	{
		if (filter && strstr(tests[i].name, filter) == NULL)
			continue;
		current_failures = 0;
		tests[i].fn();
		if (current_failures)
		{
			failed++;
			printf("not ok - %s\n", tests[i].name);
		}
		else
		{
			passed++;
			printf("ok - %s\n", tests[i].name);
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
