/*
 * san_stdio.c — linked only into the sanitizer builds (gbml_unit_san,
 * tests/gpu/gpu_check_san).  LeakSanitizer runs its check from an atexit
 * handler and, on a leak, leaves with _exit(), so whatever stdout still held
 * in its buffer (all of it when stdout is a pipe or a file: the "ok -" lines
 * and the closing "N passed, N failed") would be lost.  Line-buffering
 * stdout before main() makes every line reach the log, in order with the
 * sanitizer's own reports on stderr.
 */
#include <stdio.h>

__attribute__((constructor)) static void
san_line_buffered_stdout(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}
