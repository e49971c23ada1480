/*
 * profmark - opens or closes the kernel profiler's window from a shell
 * (harness/profiler/README.md), for benchmarks that are not programs of
 * their own: test_vmalloc's insmod runs between the two.
 *
 *   profmark open
 *   profmark close OPS
 *   profmark exec OPS [-u UID] PROGRAM ARGS...
 *
 * OPS is the operations done inside the window (0: none counted; the
 * harness then reads the count from the program's output). `exec` opens
 * the window, runs PROGRAM with ARGS in /tmp (as UID, with its group, when
 * given), waits for it, closes the window and exits with its status (128 +
 * the signal that killed it). Without the plugin, or under KVM, the cpuid
 * leaves are unknown and harmless.
 */
#include "bench-common.h"

#include <grp.h>

static int run(unsigned long long ops, long uid, char **argv)
{
	pid_t pid;
	int st;

	bench_mark(BENCH_MARK_OPEN, 0);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "profmark: fork: %s\n", strerror(errno));
		return 2;
	}
	if (pid == 0) {
		if (chdir("/tmp") != 0)
			fprintf(stderr, "profmark: chdir /tmp: %s\n", strerror(errno));
		if (uid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0)) {
			fprintf(stderr, "profmark: run as uid %ld: %s\n", uid, strerror(errno));
			_exit(126);
		}
		execvp(argv[0], argv);
		fprintf(stderr, "profmark: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "profmark: wait: %s\n", strerror(errno));
			return 2;
		}
	}
	bench_mark(BENCH_MARK_CLOSE, ops);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

static int exec_mode(int argc, char **argv)
{
	unsigned long long ops;
	long uid = -1;
	char *end;
	int i = 3;

	ops = strtoull(argv[2], &end, 10);
	if (*argv[2] == '\0' || *end != '\0') {
		fprintf(stderr, "profmark: bad operation count '%s'\n", argv[2]);
		return 2;
	}
	if (i + 1 < argc && strcmp(argv[i], "-u") == 0) {
		uid = strtol(argv[i + 1], &end, 10);
		if (*argv[i + 1] == '\0' || *end != '\0' || uid <= 0) {
			fprintf(stderr, "profmark: bad uid '%s'\n", argv[i + 1]);
			return 2;
		}
		i += 2;
	}
	if (i >= argc) {
		fprintf(stderr, "profmark: exec needs a program\n");
		return 2;
	}
	return run(ops, uid, argv + i);
}

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
	if (argc >= 4 && strcmp(argv[1], "exec") == 0)
		return exec_mode(argc, argv);
	fprintf(stderr, "usage: profmark open | profmark close OPS | profmark exec OPS [-u UID] PROGRAM ARGS...\n");
	return 2;
}
