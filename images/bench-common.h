/*
 * bench-common.h - shared helpers for the guest microbenchmarks
 * (doexec, forkexec, forkprlimit).
 *
 * Output protocol (stdout, one record per line):
 *   sample metric=<name> value=<float> unit=<unit> better=<higher|lower> [t=<i>] [warmup=1]
 *   info <key>=<value>
 * Diagnostics go to stderr; failures exit non-zero.
 *
 * Everything here is `static inline` so that a program which does not use a
 * helper does not trip -Wunused-function under -Werror.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>

#define BENCH_CACHELINE 64
#define BENCH_MAX_WORKERS 65536
#define BENCH_MAX_SECONDS 86400

/* Exit status used when a run is stopped by SIGINT/SIGTERM: 128 + signo. */

static volatile sig_atomic_t bench_stop_sig;

static inline void bench_stop_handler(int sig)
{
	if (!bench_stop_sig)
		bench_stop_sig = sig;
}

/* Print "<prog>: <msg>" to stderr. */
static inline void __attribute__((format(printf, 1, 2))) bench_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * Parse a decimal integer option argument in [min, max]; on any error print
 * a message naming the option and exit with status 2.
 */
static inline long bench_parse_long(char opt, const char *arg, long min, long max)
{
	char *end;
	long v;

	if (!arg || !*arg)
		goto bad;
	/* strtol accepts leading whitespace and '+'; be strict. */
	if (arg[0] != '-' && (arg[0] < '0' || arg[0] > '9'))
		goto bad;
	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || *end != '\0')
		goto bad;
	if (v < min || v > max) {
		bench_err("option -%c: value %s out of range (must be an integer in [%ld, %ld])",
			  opt, arg, min, max);
		exit(2);
	}
	return v;
bad:
	bench_err("option -%c: invalid value '%s' (must be an integer in [%ld, %ld])",
		  opt, arg ? arg : "", min, max);
	exit(2);
}

static inline int bench_online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		n = 1;
	if (n > BENCH_MAX_WORKERS)
		n = BENCH_MAX_WORKERS;
	return (int)n;
}

static inline double bench_ts_to_s(const struct timespec *ts)
{
	return (double)ts->tv_sec + (double)ts->tv_nsec * 1e-9;
}

static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return bench_ts_to_s(&ts);
}

/* Install SIGINT/SIGTERM handlers (no SA_RESTART, so blocking calls see EINTR). */
static inline void bench_install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = bench_stop_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* The harness may close its end of a pipe; report EPIPE instead of dying silently. */
	signal(SIGPIPE, SIG_IGN);
}

/* Block SIGINT/SIGTERM around fork() so that children never run our handler. */
static inline void bench_block_signals(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, old);
}

static inline void bench_restore_signals(const sigset_t *old)
{
	sigprocmask(SIG_SETMASK, old, NULL);
}

/*
 * In a freshly forked child: restore default signal dispositions and an
 * empty signal mask (both survive into an exec'd image otherwise), join
 * process group `pgid` (0 = become leader of a new group), and arrange to be
 * SIGKILLed if the parent dies (the setting survives execve of non-setuid
 * binaries). `parent` is the parent's pid, used to close the race where the
 * parent died before prctl().
 */
static inline void bench_child_setup(pid_t pgid, pid_t parent, int pdeathsig)
{
	sigset_t empty;

	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&empty);
	sigprocmask(SIG_SETMASK, &empty, NULL);
	if (setpgid(0, pgid) < 0 && pgid != 0)
		setpgid(0, 0); /* group leader vanished; still keep out of the caller's group */
	if (pdeathsig) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
	}
}

/*
 * The start gate: workers forked one by one wait in bench_gate_wait() until
 * the parent has forked them all and calls bench_gate_release(), then start
 * together (as will-it-scale's do). Under the instruction-counting clock the
 * guest's time is every vCPU's instructions together, so workers already
 * running while the parent forks the rest make setup cost O(N^2): 19.9 guest
 * seconds before a 0.1 s window at 256 vCPUs, against 0.37 at 26
 * (docs/measurements/2026-12-07-icount-at-scale.md). Waiting workers sleep.
 */
static int bench_gate[2] = { -1, -1 };

/* Before the first fork; returns -1 with errno on failure. */
static inline int bench_gate_open(void)
{
	return pipe2(bench_gate, O_CLOEXEC);
}

/* In a worker right after fork: returns once the parent released the gate
 * (every write end closed: the read sees end of file). */
static inline void bench_gate_wait(void)
{
	char c;

	close(bench_gate[1]);
	while (read(bench_gate[0], &c, 1) < 0 && errno == EINTR)
		;
	close(bench_gate[0]);
}

/* In the parent once every worker is forked (or on failure). */
static inline void bench_gate_release(void)
{
	if (bench_gate[1] >= 0)
		close(bench_gate[1]);
	if (bench_gate[0] >= 0)
		close(bench_gate[0]);
	bench_gate[0] = bench_gate[1] = -1;
}

/*
 * Kill process group `pgid` and every pid in pids[0..n) with SIGKILL, then
 * reap children until none are left. The caller should be a child subreaper
 * (PR_SET_CHILD_SUBREAPER) so that orphaned grandchildren are reaped here too.
 */
static inline void bench_kill_and_reap(pid_t pgid, const pid_t *pids, int n)
{
	int i;

	if (pgid > 0)
		kill(-pgid, SIGKILL);
	for (i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	for (;;) {
		pid_t p = waitpid(-1, NULL, 0);

		if (p < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: nothing left */
		}
	}
}

static inline void bench_describe_status(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "status 0x%x", st);
}

/*
 * The kernel profiler's window (harness/profiler/README.md): cpuid with
 * EAX = 0x4b500001 opens it, cpuid with EAX = 0x4b500002 and RCX = the
 * operations done inside it closes it (RCX = 0: no count, so the harness
 * uses no profile of that window). Without the plugin, or under KVM, they
 * are unknown cpuid leaves: harmless, and the same instructions run.
 */
#define BENCH_MARK_OPEN 0x4b500001u
#define BENCH_MARK_CLOSE 0x4b500002u

static inline void bench_mark(uint32_t leaf, uint64_t ops)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t a = leaf, b, d;
	unsigned long c = (unsigned long)ops;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
#else
	(void)leaf;
	(void)ops;
#endif
}

/*
 * Per-second sampler shared by doexec and forkexec.
 *
 * Calls sum(ctx) at t0 and at absolute deadlines (clock_nanosleep
 * TIMER_ABSTIME on CLOCK_MONOTONIC): one second apart for the warmup
 * intervals, then sample_ms apart for the duration measured ones, and
 * prints, for each interval, the delta divided by the measured elapsed
 * time of that interval (a rate per second whatever its length). Between samples, any child that has exited is
 * treated as a failure (workers never exit on their own).
 *
 * The profiler's window opens at the start of the first measured
 * (non-warm-up) interval and closes after the last one with the measured
 * operation count; a sampler that stops early closes it with no count.
 *
 * Returns 0 on success, the signal number if SIGINT/SIGTERM arrived, or -1
 * if a child died unexpectedly (message already printed).
 */
static inline int bench_run_sampler(const char *metric, const char *unit,
				    int warmup, int duration, long sample_ms,
				    uint64_t (*sum)(void *), void *ctx,
				    uint64_t *total_out)
{
	struct timespec t0, deadline, now;
	uint64_t prev, cur, total = 0;
	double prev_t;
	int i, n = warmup + duration;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	prev = sum(ctx);
	prev_t = bench_ts_to_s(&t0);
	deadline = t0;
	if (warmup == 0 && n > 0)
		bench_mark(BENCH_MARK_OPEN, 0);

	for (i = 0; i < n; i++) {
		double now_s, rate;
		pid_t p;
		int st;

		if (i < warmup) {
			deadline.tv_sec += 1;
		} else {
			deadline.tv_sec += sample_ms / 1000;
			deadline.tv_nsec += (sample_ms % 1000) * 1000000L;
			if (deadline.tv_nsec >= 1000000000L) {
				deadline.tv_sec += 1;
				deadline.tv_nsec -= 1000000000L;
			}
		}
		for (;;) {
			int r;

			if (bench_stop_sig)
				goto stopped;
			r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
			if (r == 0)
				break;
			if (r != EINTR) {
				bench_err("clock_nanosleep: %s", strerror(r));
				goto failed;
			}
		}
		if (bench_stop_sig)
			goto stopped;

		clock_gettime(CLOCK_MONOTONIC, &now);
		cur = sum(ctx);
		if (i == n - 1)
			bench_mark(BENCH_MARK_CLOSE, total + (cur - prev));
		else if (i == warmup - 1)
			bench_mark(BENCH_MARK_OPEN, 0);
		now_s = bench_ts_to_s(&now);
		rate = (double)(cur - prev) / (now_s - prev_t);
		if (i >= warmup)
			total += cur - prev;
		prev = cur;
		prev_t = now_s;

		if (printf("sample metric=%s value=%.3f unit=%s better=higher t=%d%s\n",
			   metric, rate, unit, i, i < warmup ? " warmup=1" : "") < 0 ||
		    fflush(stdout) != 0) {
			bench_err("writing to stdout: %s", strerror(errno));
			goto failed;
		}

		p = waitpid(-1, &st, WNOHANG);
		if (p > 0) {
			char desc[96];

			bench_describe_status(st, desc, sizeof(desc));
			bench_err("worker process %d %s unexpectedly", (int)p, desc);
			goto failed;
		}
	}
	if (total_out)
		*total_out = total;
	return 0;
stopped:
	/* an open window closes with no count (a close while closed is ignored) */
	bench_mark(BENCH_MARK_CLOSE, 0);
	return bench_stop_sig;
failed:
	bench_mark(BENCH_MARK_CLOSE, 0);
	return -1;
}

#endif /* BENCH_COMMON_H */
