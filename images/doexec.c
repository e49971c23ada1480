/*
 * doexec - execve() throughput microbenchmark.
 *
 *   doexec [-w WORKERS] [-d DURATION_S] [-m SAMPLE_MS] [-W WARMUP_S] [-t DIR]
 *
 * The parent copies its own executable (/proc/self/exe) to WORKERS separate
 * files DIR/doexec.<pid>.<i> (mode 0755), so that every worker execs its own
 * binary (separate inodes: no shared i_mmap/page-cache contention on the
 * executable itself; a dynamically linked build still shares ld.so and libc).
 *
 * Each worker is a process that execve()s its copy in a loop: the exec'd image
 * recognises the worker argv, increments its counter and execs itself again.
 *
 * Counters: one small file per worker (DIR/doexec.<pid>.ctr.<i>, unlinked
 * right after creation) mapped MAP_SHARED by both the parent and the worker;
 * the fd is inherited across execve and its number passed in argv. One file
 * per worker keeps the counters on separate pages and separate inodes, so the
 * per-exec mmap() of the counter does not contend between workers.
 *
 * The parent samples the counters once per second and prints
 *   sample metric=execs_per_s value=<execs/s> unit=execs/s better=higher t=<i> [warmup=1]
 * then kills the workers (one process group + per-pid SIGKILL), reaps them,
 * removes the copies and prints `info workers=<n>`.
 */
#include "bench-common.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define WORKER_MAGIC "--doexec-worker"
#define CTR_FILE_SIZE 4096

/* ---------------------------------------------------------------------- */
/* Worker side: runs in every exec'd image. Keep it minimal.              */

static __attribute__((noreturn)) void worker_fail(const char *what, int err)
{
	/* Avoid stdio: keep the worker path small. */
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "doexec worker: %s: %s\n", what, strerror(err));

	if (n > 0)
		(void)!write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	_exit(126);
}

static __attribute__((noreturn)) void worker_main(char **argv)
{
	static char *const empty_env[] = { NULL };
	const char *s = argv[2];
	volatile uint64_t *ctr;
	int fd = 0;

	if (!*s)
		worker_fail("bad counter fd argument", EINVAL);
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || fd > 1000000)
			worker_fail("bad counter fd argument", EINVAL);
		fd = fd * 10 + (*s - '0');
	}
	ctr = mmap(NULL, CTR_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ctr == MAP_FAILED)
		worker_fail("mmap counter", errno);
	__atomic_fetch_add(ctr, 1, __ATOMIC_RELAXED);
	execve(argv[0], argv, empty_env);
	worker_fail("execve", errno);
}

/* ---------------------------------------------------------------------- */
/* Parent side.                                                           */

struct state {
	int nworkers;
	char **copies;           /* paths of the binary copies (NULL if not created) */
	volatile uint64_t **ctr; /* parent's mapping of each worker counter */
	pid_t *pids;
	pid_t pgid;
};

static uint64_t sum_counters(void *ctx)
{
	struct state *st = ctx;
	uint64_t s = 0;
	int i;

	for (i = 0; i < st->nworkers; i++)
		if (st->ctr[i])
			s += __atomic_load_n(st->ctr[i], __ATOMIC_RELAXED);
	return s;
}

static void cleanup(struct state *st)
{
	int i;

	bench_gate_release();
	bench_kill_and_reap(st->pgid, st->pids, st->nworkers);
	for (i = 0; i < st->nworkers; i++) {
		if (st->copies[i]) {
			unlink(st->copies[i]);
			free(st->copies[i]);
			st->copies[i] = NULL;
		}
		if (st->ctr[i]) {
			munmap((void *)st->ctr[i], CTR_FILE_SIZE);
			st->ctr[i] = NULL;
		}
	}
}

static __attribute__((noreturn)) void die_cleanup(struct state *st, int status)
{
	cleanup(st);
	exit(status);
}

/* Copy the file open on `src` to a new file `path` (mode 0755). */
static int copy_binary(int src, const char *path)
{
	static char buf[1 << 16];
	off_t off = 0;
	int dst;

	dst = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (dst < 0) {
		bench_err("create %s: %s", path, strerror(errno));
		return -1;
	}
	for (;;) {
		ssize_t n = pread(src, buf, sizeof(buf), off), w = 0;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			bench_err("read own executable: %s", strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		while (w < n) {
			ssize_t r = write(dst, buf + w, (size_t)(n - w));

			if (r < 0) {
				if (errno == EINTR)
					continue;
				bench_err("write %s: %s", path, strerror(errno));
				goto fail;
			}
			w += r;
		}
		off += n;
	}
	if (fchmod(dst, 0755) < 0) {
		bench_err("chmod %s: %s", path, strerror(errno));
		goto fail;
	}
	if (close(dst) < 0) {
		bench_err("close %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
fail:
	close(dst);
	return -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [-w WORKERS] [-d DURATION_S] [-m SAMPLE_MS] [-W WARMUP_S] [-t DIR]\n"
		"  -w WORKERS    worker processes (default: online CPUs)\n"
		"  -d DURATION_S measured samples, each a second by default (default 5)\n"
		"  -m SAMPLE_MS  length of each measured sample in ms (default 1000)\n"
		"  -W WARMUP_S   warmup seconds, reported with warmup=1 (default 1, 0 allowed)\n"
		"  -t DIR        directory for binary copies/counter files (default /tmp)\n",
		program_invocation_short_name);
}

int main(int argc, char **argv)
{
	struct state st;
	const char *dir = "/tmp";
	int workers = 0, duration = 5, warmup = 1;
	long sample_ms = 1000;
	int exe_fd, opt, i, r;
	pid_t self = getpid();
	uint64_t total = 0;
	sigset_t oldmask;
	size_t plen;

	/* Fast path: we are an exec'd worker image. */
	if (argc == 3 && strcmp(argv[1], WORKER_MAGIC) == 0)
		worker_main(argv);

	while ((opt = getopt(argc, argv, "w:d:m:W:t:h")) != -1) {
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
		case 't':
			if (!*optarg) {
				bench_err("option -t: empty directory");
				return 2;
			}
			dir = optarg;
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

	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_install_signals();
	/* Reap anything orphaned below us (workers never fork, but be safe). */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	memset(&st, 0, sizeof(st));
	st.nworkers = workers;
	st.copies = calloc((size_t)workers, sizeof(*st.copies));
	st.ctr = calloc((size_t)workers, sizeof(*st.ctr));
	st.pids = calloc((size_t)workers, sizeof(*st.pids));
	if (!st.copies || !st.ctr || !st.pids) {
		bench_err("out of memory");
		return 1;
	}

	exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (exe_fd < 0 && strchr(argv[0], '/')) /* /proc not mounted: fall back to argv[0] */
		exe_fd = open(argv[0], O_RDONLY | O_CLOEXEC);
	if (exe_fd < 0) {
		bench_err("cannot open own executable (/proc/self/exe or argv[0]): %s", strerror(errno));
		return 1;
	}

	plen = strlen(dir) + 64;
	for (i = 0; i < workers; i++) {
		if (bench_stop_sig)
			die_cleanup(&st, 128 + bench_stop_sig);
		st.copies[i] = malloc(plen);
		if (!st.copies[i]) {
			bench_err("out of memory");
			die_cleanup(&st, 1);
		}
		snprintf(st.copies[i], plen, "%s/doexec.%d.%d", dir, (int)self, i);
		if (copy_binary(exe_fd, st.copies[i]) < 0) {
			unlink(st.copies[i]);
			die_cleanup(&st, 1);
		}
	}
	close(exe_fd);

	if (bench_gate_open() < 0) {
		bench_err("pipe: %s", strerror(errno));
		die_cleanup(&st, 1);
	}
	for (i = 0; i < workers; i++) {
		char ctrpath[PATH_MAX], fdstr[16];
		char *wargv[4];
		void *m;
		int fd;
		pid_t pid;

		if (bench_stop_sig)
			die_cleanup(&st, 128 + bench_stop_sig);

		/* Counter file: create, unlink at once (nothing left behind), map. */
		snprintf(ctrpath, sizeof(ctrpath), "%s/doexec.%d.ctr.%d", dir, (int)self, i);
		fd = open(ctrpath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			bench_err("create %s: %s", ctrpath, strerror(errno));
			die_cleanup(&st, 1);
		}
		unlink(ctrpath);
		if (ftruncate(fd, CTR_FILE_SIZE) < 0) {
			bench_err("ftruncate %s: %s", ctrpath, strerror(errno));
			close(fd);
			die_cleanup(&st, 1);
		}
		m = mmap(NULL, CTR_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			bench_err("mmap %s: %s", ctrpath, strerror(errno));
			close(fd);
			die_cleanup(&st, 1);
		}
		st.ctr[i] = m;

		snprintf(fdstr, sizeof(fdstr), "%d", fd);
		wargv[0] = st.copies[i];
		wargv[1] = (char *)WORKER_MAGIC;
		wargv[2] = fdstr;
		wargv[3] = NULL;

		bench_block_signals(&oldmask);
		pid = fork();
		if (pid == 0) {
			static char *const empty_env[] = { NULL };

			bench_child_setup(st.pgid, self, 1);
			bench_gate_wait();
			/* Our counter fd must survive execve; all others are O_CLOEXEC. */
			if (fcntl(fd, F_SETFD, 0) < 0)
				worker_fail("fcntl", errno);
			execve(wargv[0], wargv, empty_env);
			worker_fail("execve", errno);
		}
		if (pid < 0) {
			int e = errno;

			bench_restore_signals(&oldmask);
			bench_err("fork worker %d: %s", i, strerror(e));
			close(fd);
			die_cleanup(&st, 1);
		}
		if (!st.pgid)
			st.pgid = pid;
		setpgid(pid, st.pgid); /* also done in the child; EACCES after exec is fine */
		st.pids[i] = pid;
		bench_restore_signals(&oldmask);
		close(fd);
	}

	bench_gate_release();
	r = bench_run_sampler("execs_per_s", "execs/s", warmup, duration, sample_ms, sum_counters, &st, &total);
	cleanup(&st);
	if (r > 0) {
		bench_err("interrupted by signal %d, workers killed", r);
		return 128 + r;
	}
	if (r < 0)
		return 1;
	printf("info workers=%d\n", workers);
	printf("info measured_execs=%llu\n", (unsigned long long)total);
	return fflush(stdout) == 0 ? 0 : 1;
}
