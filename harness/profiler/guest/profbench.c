/*
 * profbench - a guest test program for the harness-profiler plugin.
 *
 *   profbench getppid N     N getppid() syscalls inside one window
 *   profbench forkexec N [K] N fork + execve(self) + waitpid inside one window;
 *                           each child makes K getppid() calls first (default 0)
 *   profbench timed MS      getppid() until MS guest milliseconds have passed
 *                           (CLOCK_MONOTONIC), inside one window
 *
 * Each run opens the plugin's window with cpuid leaf 0x4b500001 just before
 * the loop and closes it with leaf 0x4b500002 (RCX = the op count) just after,
 * then prints
 *   result mode=<mode> ops=<n> guest_ns=<ns between the markers>
 * Without the plugin the markers are unknown cpuid leaves: harmless.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static inline void mark(uint32_t leaf, uint64_t ops)
{
	uint32_t a = leaf, b, d;
	uint64_t c = ops;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	uint64_t n, i, t0, t1, ops = 0;

	if (argc == 3 && strcmp(argv[1], "child") == 0) {
		for (n = strtoull(argv[2], NULL, 10); n > 0; n--)
			syscall(SYS_getppid);
		_exit(0);
	}
	if (argc != 3 && !(argc == 4 && strcmp(argv[1], "forkexec") == 0)) {
		fprintf(stderr, "usage: profbench getppid|forkexec|timed N [K]\n");
		return 2;
	}
	n = strtoull(argv[2], NULL, 10);
	if (strcmp(argv[1], "getppid") == 0) {
		t0 = now_ns();
		mark(0x4b500001, 0);
		for (i = 0; i < n; i++)
			syscall(SYS_getppid);
		ops = n;
		mark(0x4b500002, ops);
		t1 = now_ns();
	} else if (strcmp(argv[1], "forkexec") == 0) {
		static char *const cenv[] = { NULL };
		char *cargv[] = { "/profbench", "child", argc == 4 ? argv[3] : "0", NULL };

		t0 = now_ns();
		mark(0x4b500001, 0);
		for (i = 0; i < n; i++) {
			int st;
			pid_t p = fork();

			if (p == 0) {
				execve(cargv[0], cargv, cenv);
				_exit(127);
			}
			if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "profbench: child %lu failed\n", (unsigned long)i);
				return 1;
			}
		}
		ops = n;
		mark(0x4b500002, ops);
		t1 = now_ns();
	} else if (strcmp(argv[1], "timed") == 0) {
		uint64_t until;

		t0 = now_ns();
		until = t0 + n * 1000000ull;
		mark(0x4b500001, 0);
		while (now_ns() < until) {
			syscall(SYS_getppid);
			ops++;
		}
		mark(0x4b500002, ops);
		t1 = now_ns();
	} else {
		fprintf(stderr, "profbench: unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("result mode=%s ops=%llu guest_ns=%llu\n", argv[1], (unsigned long long)ops,
	       (unsigned long long)(t1 - t0));
	return 0;
}
