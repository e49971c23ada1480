/*
 * profmark - opens or closes the kernel profiler's window from a shell
 * (harness/profiler/README.md), for benchmarks that are not programs of
 * their own: test_vmalloc's insmod runs between the two.
 *
 *   profmark open
 *   profmark close OPS
 *
 * OPS is the operations done inside the window (0: none counted). Without
 * the plugin, or under KVM, the cpuid leaves are unknown and harmless.
 */
#include "bench-common.h"

int main(int argc, char **argv)
{
	char *end;
	unsigned long long ops;

	if (argc == 2 && strcmp(argv[1], "open") == 0) {
		bench_mark(BENCH_MARK_OPEN, 0);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "close") == 0) {
		ops = strtoull(argv[2], &end, 10);
		if (*argv[2] == '\0' || *end != '\0') {
			fprintf(stderr, "profmark: bad operation count '%s'\n", argv[2]);
			return 2;
		}
		bench_mark(BENCH_MARK_CLOSE, ops);
		return 0;
	}
	fprintf(stderr, "usage: profmark open | profmark close OPS\n");
	return 2;
}
