/*
 * forkexec - fork + execv(PROGRAM) + waitpid throughput microbenchmark
 * (the "fork-intensive /bin/true loop").
 *
 *   forkexec [-w WORKERS] [-d DURATION_S] [-m SAMPLE_MS] [-W WARMUP_S] [-p PROGRAM]
 *
 * WORKERS processes (default: online CPUs) each loop: fork(); the child
 * execv()s PROGRAM (default /bin/true) with argv {PROGRAM, NULL}; the worker
 * waitpid()s it. A completion counts if the child exited with status 0; any
 * other outcome (exec failure, non-zero exit, signal, fork failure) counts as
 * an error. Counters live in a MAP_SHARED|MAP_ANONYMOUS mapping, one
 * cache-line-padded slot per worker.
 *
 * The parent prints once per second
 *   sample metric=forkexecs_per_s value=<n/s> unit=forkexecs/s better=higher t=<i> [warmup=1]
 * then kills and reaps all workers (and their children), prints
 * `info workers=<n>` and `info errors=<n>`, and exits 1 if errors > 0.
 */
#include "bench-common.h"

#include <sys/mman.h>

struct slot {
	uint64_t done;
	uint64_t errors;
	uint32_t exec_failed; /* set by a child whose execv() failed */
	char pad[BENCH_CACHELINE - 2 * sizeof(uint64_t) - sizeof(uint32_t)];
} __attribute__((aligned(BENCH_CACHELINE)));

_Static_assert(sizeof(struct slot) == BENCH_CACHELINE, "slot must be one cache line");

struct state {
	int nworkers;
	struct slot *slots;
	size_t map_len;
	pid_t *pids;
	pid_t pgid;
};

static uint32_t *exec_err_reported; /* shared: print the first exec error only */

static uint64_t sum_done(void *ctx)
{
	struct state *st = ctx;
	uint64_t s = 0;
	int i;

	for (i = 0; i < st->nworkers; i++)
		s += __atomic_load_n(&st->slots[i].done, __ATOMIC_RELAXED);
	return s;
}

static uint64_t sum_errors(struct state *st)
{
	uint64_t s = 0;
	int i;

	for (i = 0; i < st->nworkers; i++)
		s += __atomic_load_n(&st->slots[i].errors, __ATOMIC_RELAXED);
	return s;
}

static __attribute__((noreturn)) void worker_loop(struct slot *slot, const char *prog)
{
	char *const cargv[] = { (char *)prog, NULL };

	for (;;) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			execv(prog, cargv);
			if (__atomic_exchange_n(exec_err_reported, 1, __ATOMIC_RELAXED) == 0) {
				char buf[256];
				int n = snprintf(buf, sizeof(buf), "forkexec: execv %s: %s\n",
						 prog, strerror(errno));

				if (n > 0)
					(void)!write(STDERR_FILENO, buf,
						     (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
			}
			_exit(127);
		}
		if (pid < 0) {
			if (__atomic_exchange_n(exec_err_reported, 1, __ATOMIC_RELAXED) == 0)
				bench_err("fork: %s", strerror(errno));
			__atomic_fetch_add(&slot->errors, 1, __ATOMIC_RELAXED);
			usleep(1000); /* do not spin on EAGAIN */
			continue;
		}
		while (waitpid(pid, &status, 0) < 0) {
			if (errno != EINTR)
				_exit(1); /* cannot happen; the parent will notice */
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			__atomic_fetch_add(&slot->done, 1, __ATOMIC_RELAXED);
		else
			__atomic_fetch_add(&slot->errors, 1, __ATOMIC_RELAXED);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [-w WORKERS] [-d DURATION_S] [-m SAMPLE_MS] [-W WARMUP_S] [-p PROGRAM]\n"
		"  -w WORKERS    worker processes (default: online CPUs)\n"
		"  -d DURATION_S measured samples, each a second by default (default 5)\n"
		"  -m SAMPLE_MS  length of each measured sample in ms (default 1000)\n"
		"  -W WARMUP_S   warmup seconds, reported with warmup=1 (default 1, 0 allowed)\n"
		"  -p PROGRAM    program to fork+exec (default /bin/true)\n",
		program_invocation_short_name);
}

int main(int argc, char **argv)
{
	struct state st;
	const char *prog = "/bin/true";
	int workers = 0, duration = 5, warmup = 1;
	long sample_ms = 1000;
	int opt, i, r;
	pid_t self = getpid();
	uint64_t total = 0, errors;
	sigset_t oldmask;

	while ((opt = getopt(argc, argv, "w:d:m:W:p:h")) != -1) {
		switch (opt) {
		case 'w':
			workers = (int)bench_parse_long('w', optarg, 1, BENCH_MAX_WORKERS);
			break;
		case 'd':
			duration = (int)bench_parse_long('d', optarg, 1, BENCH_MAX_SECONDS);
			break;
		case 'm':
			sample_ms = bench_parse_long('m', optarg, 1, BENCH_MAX_SECONDS * 1000L);
			break;
		case 'W':
			warmup = (int)bench_parse_long('W', optarg, 0, BENCH_MAX_SECONDS);
			break;
		case 'p':
			if (!*optarg) {
				bench_err("option -p: empty program path");
				return 2;
			}
			prog = optarg;
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
	if (!workers)
		workers = bench_online_cpus();

	/* Fail fast instead of measuring WORKERS x DURATION failed execs. */
	if (access(prog, X_OK) < 0) {
		bench_err("option -p: %s is not executable: %s", prog, strerror(errno));
		return 1;
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_install_signals();
	/* Orphaned PROGRAM children of killed workers get reparented to us and reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	memset(&st, 0, sizeof(st));
	st.nworkers = workers;
	st.map_len = (size_t)(workers + 1) * sizeof(struct slot);
	st.slots = mmap(NULL, st.map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (st.slots == MAP_FAILED) {
		bench_err("mmap: %s", strerror(errno));
		return 1;
	}
	exec_err_reported = &st.slots[workers].exec_failed; /* extra slot */
	st.pids = calloc((size_t)workers, sizeof(*st.pids));
	if (!st.pids) {
		bench_err("out of memory");
		return 1;
	}

	if (bench_gate_open() < 0) {
		bench_err("pipe: %s", strerror(errno));
		return 1;
	}
	for (i = 0; i < workers; i++) {
		pid_t pid;

		if (bench_stop_sig) {
			bench_gate_release();
			bench_kill_and_reap(st.pgid, st.pids, workers);
			return 128 + bench_stop_sig;
		}
		bench_block_signals(&oldmask);
		pid = fork();
		if (pid == 0) {
			bench_child_setup(st.pgid, self, 1);
			bench_gate_wait();
			worker_loop(&st.slots[i], prog);
		}
		if (pid < 0) {
			int e = errno;

			bench_restore_signals(&oldmask);
			bench_err("fork worker %d: %s", i, strerror(e));
			bench_gate_release();
			bench_kill_and_reap(st.pgid, st.pids, workers);
			return 1;
		}
		if (!st.pgid)
			st.pgid = pid;
		setpgid(pid, st.pgid);
		st.pids[i] = pid;
		bench_restore_signals(&oldmask);
	}

	bench_gate_release();
	r = bench_run_sampler("forkexecs_per_s", "forkexecs/s", warmup, duration, sample_ms, sum_done, &st, &total);
	bench_kill_and_reap(st.pgid, st.pids, workers);
	errors = sum_errors(&st);
	if (r > 0) {
		bench_err("interrupted by signal %d, workers killed", r);
		return 128 + r;
	}
	if (r < 0)
		return 1;
	printf("info workers=%d\n", workers);
	printf("info measured_forkexecs=%llu\n", (unsigned long long)total);
	printf("info errors=%llu\n", (unsigned long long)errors);
	if (fflush(stdout) != 0)
		return 1;
	if (errors) {
		bench_err("%llu fork/exec errors", (unsigned long long)errors);
		return 1;
	}
	return 0;
}
