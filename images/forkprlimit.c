/*
 * forkprlimit - fork/kill/wait + setpriority/getpriority/getrlimit
 * tasklist_lock microbenchmark (after the program in Barret Rhoden's
 * "prlimit and set/getpriority tasklist_lock optimizations" series).
 *
 *   forkprlimit [-f FANOUT=6] [-i ITERATIONS=5000] [-u USLEEP_US=1000]
 *
 * The top process forks the root of a process tree; the root forks FANOUT
 * times in sequence like the original (every process continues the loop), so
 * 2^FANOUT processes run the benchmark loop ITERATIONS times:
 *     child = fork();
 *     child:  for (;;) { setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0));
 *                        getrlimit(RLIMIT_CPU, &rl); }
 *     parent: usleep(USLEEP_US); kill(child, SIGTERM); waitpid(child);
 *
 * The tree runs in its own process group. The top process is a child
 * subreaper, so every tree process (orphaned or not) ends up being reaped by
 * it; waitpid(-1) returning ECHILD therefore means every fan-out process is
 * done. Any non-zero exit in the tree (e.g. a fork failure) makes the top
 * process kill the whole group and exit 1. Wall time is measured from before
 * the first fork until the last tree process has been reaped.
 *
 * Output:
 *   sample metric=wall_s value=<s> unit=s better=lower
 *   sample metric=iterations_per_s value=<2^FANOUT*ITERATIONS/wall> unit=iter/s better=higher
 *   info processes=<2^FANOUT> iterations=<ITERATIONS>
 */
#include "bench-common.h"

#include <sys/resource.h>

#define MAX_FANOUT 16

static volatile pid_t tree_pgid;

/* SIGINT/SIGTERM: record the signal and kill the tree right away (async-signal-safe). */
static void stop_handler(int sig)
{
	bench_stop_handler(sig);
	if (tree_pgid > 0)
		kill(-tree_pgid, SIGKILL);
}

static __attribute__((noreturn)) void spinner(void)
{
	struct rlimit rlim[1];

	for (;;) {
		setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0));
		getrlimit(RLIMIT_CPU, rlim);
	}
}

/* Runs in the tree root (already in its own process group). */
static __attribute__((noreturn)) void tree_main(int fanout, long iterations, unsigned usleep_us)
{
	long i;
	int k;

	for (k = 0; k < fanout; k++) {
		if (fork() < 0) {
			bench_err("fan-out fork failed: %s", strerror(errno));
			_exit(1);
		}
	}
	for (i = 0; i < iterations; i++) {
		pid_t child = fork();

		if (child < 0) {
			bench_err("fork failed at iteration %ld: %s", i, strerror(errno));
			_exit(1);
		}
		if (child == 0)
			spinner();
		usleep(usleep_us);
		kill(child, SIGTERM);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	_exit(0);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [-f FANOUT] [-i ITERATIONS] [-u USLEEP_US]\n"
		"  -f FANOUT     fork FANOUT times: 2^FANOUT processes (default 6, max %d)\n"
		"  -i ITERATIONS fork/usleep/kill/wait iterations per process (default 5000)\n"
		"  -u USLEEP_US  parent sleep per iteration in microseconds (default 1000)\n",
		program_invocation_short_name, MAX_FANOUT);
}

int main(int argc, char **argv)
{
	int fanout = 6, opt, failed = 0, killed = 0, st;
	long iterations = 5000, nproc;
	unsigned usleep_us = 1000;
	struct timespec t0, t1;
	pid_t self = getpid(), root;
	sigset_t oldmask;
	double wall;

	while ((opt = getopt(argc, argv, "f:i:u:h")) != -1) {
		switch (opt) {
		case 'f':
			fanout = (int)bench_parse_long('f', optarg, 1, MAX_FANOUT);
			break;
		case 'i':
			iterations = bench_parse_long('i', optarg, 1, 1000000000L);
			break;
		case 'u':
			usleep_us = (unsigned)bench_parse_long('u', optarg, 1, 10000000L);
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (optind != argc) {
		bench_err("unexpected argument '%s'", argv[optind]);
		usage();
		return 2;
	}
	nproc = 1L << fanout;

	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_install_signals();
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = stop_handler;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		bench_err("prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
		return 1;
	}

	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* the profiler's window: the whole tree, processes x iterations operations */
	bench_mark(BENCH_MARK_OPEN, 0);
	bench_block_signals(&oldmask);
	root = fork();
	if (root == 0) {
		/* New process group; no pdeathsig: the tree finishes on its own. */
		bench_child_setup(0, self, 0);
		tree_main(fanout, iterations, usleep_us);
	}
	if (root < 0) {
		bench_mark(BENCH_MARK_CLOSE, 0);
		bench_restore_signals(&oldmask);
		bench_err("fork failed: %s", strerror(errno));
		return 1;
	}
	setpgid(root, root);
	tree_pgid = root;
	bench_restore_signals(&oldmask); /* a pending SIGINT/SIGTERM now kills the tree */

	/* Reap the whole tree (descendants are reparented to us as they orphan). */
	for (;;) {
		pid_t p = waitpid(-1, &st, 0);

		if (p < 0) {
			if (errno == EINTR) {
				if (bench_stop_sig)
					killed = 1; /* the handler already killed the tree */
				continue;
			}
			break; /* ECHILD: everything is done */
		}
		if (bench_stop_sig)
			killed = 1;
		if (!killed && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			char desc[96];

			bench_describe_status(st, desc, sizeof(desc));
			bench_err("tree process %d %s; killing the tree", (int)p, desc);
			failed = 1;
			kill(-root, SIGKILL);
			killed = 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	bench_mark(BENCH_MARK_CLOSE, bench_stop_sig || failed ? 0 : (uint64_t)nproc * (uint64_t)iterations);

	if (bench_stop_sig) {
		bench_err("interrupted by signal %d, process tree killed", (int)bench_stop_sig);
		return 128 + bench_stop_sig;
	}
	if (failed)
		return 1;

	wall = bench_ts_to_s(&t1) - bench_ts_to_s(&t0);
	printf("sample metric=wall_s value=%.6f unit=s better=lower\n", wall);
	printf("sample metric=iterations_per_s value=%.3f unit=iter/s better=higher\n",
	       (double)nproc * (double)iterations / wall);
	printf("info processes=%ld iterations=%ld\n", nproc, iterations);
	return fflush(stdout) == 0 ? 0 : 1;
}
