/*
 * microbench.c - the micro-benchmarks of ldpfuse-py's bench suite.
 *
 * One program, run against one directory (a native directory, a kernel FUSE
 * mount, or an ldpfuse-py mount when started as the COMMAND of ldpfuse-run).
 * It uses only the libc calls real programs use (open, read, pread, stat,
 * opendir/readdir, ...), so an LD_PRELOAD file system sees what it would see
 * from any program.  bench/run.py compiles it with gcc -O2 and drives it.
 *
 *   microbench setup DIR [--large-mb N]          create the fixture in DIR
 *   microbench check DIR [--setup] [--large-mb N] verify the fixture's contents
 *   microbench run DIR [opts] WORKLOAD[:THREADS]...
 *       -d SECONDS   measured time per workload (default 1)
 *       -w SECONDS   warm-up before each workload (default 0.2)
 *       --setup      create the fixture first, in this process (for file
 *                    systems whose state lasts one command: ldpfuse memory,
 *                    in its server or, embedded, in the process)
 *       --large-mb N size of large.dat (default 256)
 *       --outside D  a native directory holding a fixture (nm-* and firstop)
 *       -n N         iterations of firstop (default 20)
 *       --root PATH  what firstop's child stats on the mount (default DIR)
 *       --handler    install a signal handler first (SIGUSR1, never sent), as
 *                    Python, git, make and filebench do: a preload that blocks
 *                    signals around its calls pays for it then
 *   microbench stat1 PATH                        one stat(), exit (firstop's child)
 *
 * Workloads (one output line each, "RESULT key=value ..."):
 *   stat       stat() of DIR/stat.dat
 *   orc        open + read 4 KiB + close of DIR/small/fNNNN (16 KiB files), round robin
 *   create     open(O_CREAT) + write 4 KiB + close + unlink in DIR/create/
 *   seqread    sequential 4 KiB read()s of DIR/large.dat, rewinding at EOF
 *   randread   4 KiB pread()s at random 4 KiB-aligned offsets of DIR/large.dat
 *   readdir    opendir + readdir to the end + closedir of DIR/list (1000 entries)
 *   nm-stat, nm-open, nm-pread
 *              the same calls on OUTSIDE/stat.dat (a path that is not on any
 *              mount): ns per call, to run with and without the preload
 *   firstop    fork+exec "microbench stat1 ROOT" (a stat on the mount root) and
 *              "microbench stat1 OUTSIDE" alternately; median wall times and
 *              their difference = the cost of the first mount operation in a
 *              fresh process
 * With :THREADS each thread works on its own files, descriptors and offsets.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IO_SIZE 4096
#define SMALL_SIZE (16 * 1024)
#define SMALL_FILES 1000
#define LIST_ENTRIES 1000
#define MAX_THREADS 64

static const char *bench_dir;
static const char *outside_dir;
static const char *firstop_path; /* what firstop's child stats: the mount root */
static long long large_size = 256LL << 20;
static double measure_secs = 1.0;
static double warmup_secs = 0.2;
static int firstop_iters = 20;
static char self_exe[PATH_MAX];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "microbench: %s %s: %s\n", what, path ? path : "",
		strerror(errno));
	exit(1);
}

/* Byte i of a fixture file whose pattern seed is `seed`; check() verifies it. */
static unsigned char pattern_byte(unsigned seed, long long off)
{
	return (unsigned char)((off / 7) * 31 + seed * 131 + (off >> 12));
}

static void fill_pattern(unsigned char *buf, size_t n, unsigned seed, long long off)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern_byte(seed, off + (long long)i);
}

static void path_small(char *out, size_t n, const char *dir, int i)
{
	snprintf(out, n, "%s/small/f%04d", dir, i);
}

/* ---- fixture ---------------------------------------------------------- */

static void make_dir(const char *path)
{
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("mkdir", path);
}

static void write_file(const char *path, long long size, unsigned seed)
{
	struct stat st;
	if (stat(path, &st) == 0 && st.st_size == size)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("open", path);
	static unsigned char buf[1 << 20];
	for (long long off = 0; off < size;) {
		size_t n = size - off < (long long)sizeof buf ? (size_t)(size - off) : sizeof buf;
		fill_pattern(buf, n, seed, off);
		ssize_t w = write(fd, buf, n);
		if (w <= 0)
			die("write", path);
		off += w;
	}
	if (close(fd) != 0)
		die("close", path);
}

static void setup(const char *dir)
{
	char p[PATH_MAX];
	make_dir(dir);
	snprintf(p, sizeof p, "%s/stat.dat", dir);
	write_file(p, IO_SIZE, 1);
	snprintf(p, sizeof p, "%s/small", dir);
	make_dir(p);
	for (int i = 0; i < SMALL_FILES; i++) {
		path_small(p, sizeof p, dir, i);
		write_file(p, SMALL_SIZE, 100 + i);
	}
	snprintf(p, sizeof p, "%s/list", dir);
	make_dir(p);
	for (int i = 0; i < LIST_ENTRIES; i++) {
		snprintf(p, sizeof p, "%s/list/e%04d", dir, i);
		write_file(p, 0, 0);
	}
	snprintf(p, sizeof p, "%s/create", dir);
	make_dir(p);
	snprintf(p, sizeof p, "%s/large.dat", dir);
	write_file(p, large_size, 7);
}

static int check_bytes(const char *path, int fd, long long off, size_t n, unsigned seed)
{
	unsigned char got[IO_SIZE], want[IO_SIZE];
	ssize_t r = pread(fd, got, n, off);
	if (r != (ssize_t)n) {
		printf("CHECK FAIL %s: pread(%zu @ %lld) returned %zd (%s)\n", path, n,
		       off, r, r < 0 ? strerror(errno) : "short");
		return 1;
	}
	fill_pattern(want, n, seed, off);
	if (memcmp(got, want, n) != 0) {
		printf("CHECK FAIL %s: wrong bytes at offset %lld\n", path, off);
		return 1;
	}
	return 0;
}

/* Reads back a sample of the fixture through the ordinary calls. */
static int check(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;
	int bad = 0;

	snprintf(p, sizeof p, "%s/stat.dat", dir);
	if (stat(p, &st) != 0 || st.st_size != IO_SIZE || !S_ISREG(st.st_mode)) {
		printf("CHECK FAIL stat %s: %s size=%lld\n", p, strerror(errno),
		       (long long)st.st_size);
		bad++;
	}
	for (int i = 0; i < SMALL_FILES; i += 97) {
		path_small(p, sizeof p, dir, i);
		int fd = open(p, O_RDONLY);
		if (fd < 0) {
			printf("CHECK FAIL open %s: %s\n", p, strerror(errno));
			bad++;
			continue;
		}
		unsigned char got[SMALL_SIZE], want[SMALL_SIZE];
		ssize_t r = read(fd, got, sizeof got);
		fill_pattern(want, sizeof want, 100 + i, 0);
		if (r != SMALL_SIZE || memcmp(got, want, sizeof got) != 0) {
			printf("CHECK FAIL read %s: got %zd bytes%s\n", p, r,
			       r == SMALL_SIZE ? ", wrong content" : "");
			bad++;
		}
		if (read(fd, got, 1) != 0) {
			printf("CHECK FAIL read %s: no EOF after %d bytes\n", p, SMALL_SIZE);
			bad++;
		}
		close(fd);
	}
	snprintf(p, sizeof p, "%s/large.dat", dir);
	int fd = open(p, O_RDONLY);
	if (fd < 0) {
		printf("CHECK FAIL open %s: %s\n", p, strerror(errno));
		bad++;
	} else {
		if (fstat(fd, &st) != 0 || st.st_size != large_size) {
			printf("CHECK FAIL fstat %s: size %lld, want %lld\n", p,
			       (long long)st.st_size, large_size);
			bad++;
		}
		for (long long off = 0; off < large_size; off += large_size / 13 + 4093)
			bad += check_bytes(p, fd, off, IO_SIZE < large_size - off ? IO_SIZE : (size_t)(large_size - off), 7);
		close(fd);
	}
	snprintf(p, sizeof p, "%s/list", dir);
	DIR *d = opendir(p);
	if (!d) {
		printf("CHECK FAIL opendir %s: %s\n", p, strerror(errno));
		bad++;
	} else {
		int n = 0;
		struct dirent *de;
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] == 'e')
				n++;
		closedir(d);
		if (n != LIST_ENTRIES) {
			printf("CHECK FAIL readdir %s: %d entries, want %d\n", p, n, LIST_ENTRIES);
			bad++;
		}
	}
	/* a create cycle, read back */
	snprintf(p, sizeof p, "%s/create/check.tmp", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		printf("CHECK FAIL create %s: %s\n", p, strerror(errno));
		bad++;
	} else {
		unsigned char buf[IO_SIZE];
		fill_pattern(buf, sizeof buf, 3, 0);
		if (write(fd, buf, sizeof buf) != IO_SIZE) {
			printf("CHECK FAIL write %s: %s\n", p, strerror(errno));
			bad++;
		}
		close(fd);
		fd = open(p, O_RDONLY);
		if (fd < 0 || check_bytes(p, fd, 0, IO_SIZE, 3))
			bad++;
		if (fd >= 0)
			close(fd);
		if (unlink(p) != 0 || stat(p, &st) == 0 || errno != ENOENT) {
			printf("CHECK FAIL unlink %s: file still there\n", p);
			bad++;
		}
	}
	printf("CHECK %s %s\n", bad ? "FAIL" : "OK", dir);
	return bad ? 1 : 0;
}

/* ---- timed workloads ---------------------------------------------------- */

enum wl { WL_STAT, WL_ORC, WL_CREATE, WL_SEQREAD, WL_RANDREAD, WL_READDIR,
	  WL_NM_STAT, WL_NM_OPEN, WL_NM_PREAD };

static const struct {
	const char *name;
	enum wl id;
	int bytes_per_op; /* > 0: also report MB/s */
	int nm;           /* report ns per call */
} workloads[] = {
	{"stat", WL_STAT, 0, 0},
	{"orc", WL_ORC, IO_SIZE, 0},
	{"create", WL_CREATE, IO_SIZE, 0},
	{"seqread", WL_SEQREAD, IO_SIZE, 0},
	{"randread", WL_RANDREAD, IO_SIZE, 0},
	{"readdir", WL_READDIR, 0, 0},
	{"nm-stat", WL_NM_STAT, 0, 1},
	{"nm-open", WL_NM_OPEN, 0, 1},
	{"nm-pread", WL_NM_PREAD, 0, 1},
};

struct worker {
	pthread_t tid;
	enum wl id;
	int index, nthreads;
	long long ops;
	double cpu;             /* this thread's CPU seconds while measured */
	double wall;            /* its wall-clock seconds while measured */
	double queued;          /* its seconds runnable but waiting for a CPU (schedstat) */
	long switches;          /* its voluntary context switches: times it slept */
	int failed;
	char err[PATH_MAX + 256];
};

static volatile int stop_flag;

/* CPU seconds this thread has used: what a call costs the calling process, which the
 * machine's load (time spent waiting for a core) leaves out, unlike ops_per_s */
static double thread_cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}
/* Seconds this thread was runnable but waited for a CPU (/proc/thread-self/schedstat's
 * second field; -1 where the kernel has no schedstat): with thread_cpu, where a slow round's
 * wall-clock went. What is neither is time asleep (a lock, a futex, the disk). */
static double thread_queued(void)
{
	char b[128];
	int f = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	ssize_t n = read(f, b, sizeof b - 1);
	close(f);
	unsigned long long run, wait;
	if (n <= 0)
		return -1;
	b[n] = 0;
	return sscanf(b, "%llu %llu", &run, &wait) == 2 ? wait * 1e-9 : -1;
}

static long thread_switches(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
}

static pthread_barrier_t start_barrier;

#define FAIL(w, ...) do { snprintf((w)->err, sizeof (w)->err, __VA_ARGS__); \
	(w)->failed = 1; return; } while (0)

static void run_worker(struct worker *w)
{
	char p[PATH_MAX];
	static __thread unsigned char buf[IO_SIZE];
	struct stat st;
	long long ops = 0;
	int fd = -1;
	uint64_t rng = 88172645463325252ULL ^ ((uint64_t)w->index * 0x9E3779B97F4A7C15ULL);
	long long nblocks = large_size / IO_SIZE;
	long long off = 0;

	switch (w->id) {
	case WL_SEQREAD:
	case WL_RANDREAD:
		snprintf(p, sizeof p, "%s/large.dat", bench_dir);
		fd = open(p, O_RDONLY);
		if (fd < 0)
			FAIL(w, "open %s: %s", p, strerror(errno));
		/* each thread starts in its own part of the file */
		off = (nblocks / w->nthreads) * w->index * IO_SIZE;
		if (lseek(fd, off, SEEK_SET) != off)
			FAIL(w, "lseek %s: %s", p, strerror(errno));
		break;
	case WL_NM_STAT:
	case WL_NM_OPEN:
	case WL_NM_PREAD:
		snprintf(p, sizeof p, "%s/stat.dat", outside_dir);
		if (w->id == WL_NM_PREAD && (fd = open(p, O_RDONLY)) < 0)
			FAIL(w, "open %s: %s", p, strerror(errno));
		break;
	default:
		break;
	}

	pthread_barrier_wait(&start_barrier);
	double q0 = thread_queued(), wall0 = now();
	long sw0 = thread_switches();
	double cpu0 = thread_cpu();
	int small_i = w->index;
	while (!stop_flag) {
		/* a batch between looks at the flag keeps the loop honest and cheap */
		for (int k = 0; k < 8; k++) {
			switch (w->id) {
			case WL_STAT:
				snprintf(p, sizeof p, "%s/stat.dat", bench_dir);
				if (stat(p, &st) != 0)
					FAIL(w, "stat %s: %s", p, strerror(errno));
				break;
			case WL_ORC: {
				path_small(p, sizeof p, bench_dir, small_i);
				small_i += w->nthreads;
				if (small_i >= SMALL_FILES)
					small_i = w->index;
				int f = open(p, O_RDONLY);
				if (f < 0)
					FAIL(w, "open %s: %s", p, strerror(errno));
				ssize_t r = read(f, buf, IO_SIZE);
				if (r != IO_SIZE)
					FAIL(w, "read %s: %zd %s", p, r, strerror(errno));
				if (close(f) != 0)
					FAIL(w, "close %s: %s", p, strerror(errno));
				break;
			}
			case WL_CREATE: {
				snprintf(p, sizeof p, "%s/create/t%d.%lld", bench_dir,
					 w->index, ops & 15);
				int f = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
				if (f < 0)
					FAIL(w, "create %s: %s", p, strerror(errno));
				ssize_t r = write(f, buf, IO_SIZE);
				if (r != IO_SIZE)
					FAIL(w, "write %s: %zd %s", p, r, strerror(errno));
				if (close(f) != 0)
					FAIL(w, "close %s: %s", p, strerror(errno));
				if (unlink(p) != 0)
					FAIL(w, "unlink %s: %s", p, strerror(errno));
				break;
			}
			case WL_SEQREAD: {
				ssize_t r = read(fd, buf, IO_SIZE);
				if (r == 0) {
					if (lseek(fd, 0, SEEK_SET) != 0)
						FAIL(w, "lseek: %s", strerror(errno));
					continue;
				}
				if (r != IO_SIZE)
					FAIL(w, "read large.dat: %zd %s", r, strerror(errno));
				break;
			}
			case WL_RANDREAD: {
				rng ^= rng << 13;
				rng ^= rng >> 7;
				rng ^= rng << 17;
				off = (long long)(rng % (uint64_t)nblocks) * IO_SIZE;
				ssize_t r = pread(fd, buf, IO_SIZE, off);
				if (r != IO_SIZE)
					FAIL(w, "pread large.dat @%lld: %zd %s", off, r, strerror(errno));
				break;
			}
			case WL_READDIR: {
				snprintf(p, sizeof p, "%s/list", bench_dir);
				DIR *d = opendir(p);
				if (!d)
					FAIL(w, "opendir %s: %s", p, strerror(errno));
				int n = 0;
				while (readdir(d) != NULL)
					n++;
				closedir(d);
				if (n < LIST_ENTRIES)
					FAIL(w, "readdir %s: %d entries", p, n);
				break;
			}
			case WL_NM_STAT:
				if (stat(p, &st) != 0)
					FAIL(w, "stat %s: %s", p, strerror(errno));
				break;
			case WL_NM_OPEN: {
				int f = open(p, O_RDONLY);
				if (f < 0)
					FAIL(w, "open %s: %s", p, strerror(errno));
				close(f);
				break;
			}
			case WL_NM_PREAD:
				if (pread(fd, buf, 1, 0) != 1)
					FAIL(w, "pread %s: %s", p, strerror(errno));
				break;
			}
			ops++;
		}
		w->ops = ops;
	}
	w->ops = ops;
	w->cpu = thread_cpu() - cpu0;
	w->switches = thread_switches() - sw0;
	w->wall = now() - wall0;
	w->queued = q0 < 0 ? -1 : thread_queued() - q0;
	if (fd >= 0)
		close(fd);
}

static void *worker_main(void *arg)
{
	run_worker(arg);
	return NULL;
}

/* Runs `nthreads` workers for `secs`; returns total ops and the elapsed time. */
struct totals {
	double cpu, queued, asleep;     /* the workers' seconds: on a CPU, waiting for one, neither */
	long switches;
};

static int run_timed(enum wl id, int nthreads, double secs, long long *ops, double *elapsed, struct totals *tot)
{
	struct worker w[MAX_THREADS];
	memset(w, 0, sizeof w);
	stop_flag = 0;
	pthread_barrier_init(&start_barrier, NULL, nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		w[i].id = id;
		w[i].index = i;
		w[i].nthreads = nthreads;
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "microbench: pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&start_barrier);
	double t0 = now();
	struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	stop_flag = 1;
	*ops = 0;
	memset(tot, 0, sizeof *tot);
	int failed = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(w[i].tid, NULL);
		*ops += w[i].ops;
		tot->cpu += w[i].cpu;
		tot->queued += w[i].queued < 0 ? 0 : w[i].queued;
		tot->asleep += w[i].wall - w[i].cpu - (w[i].queued < 0 ? 0 : w[i].queued);
		tot->switches += w[i].switches;
		if (w[i].failed) {
			fprintf(stderr, "microbench: thread %d: %s\n", i, w[i].err);
			failed = 1;
		}
	}
	*elapsed = now() - t0;
	pthread_barrier_destroy(&start_barrier);
	return failed ? -1 : 0;
}

static int run_workload(const char *spec)
{
	char name[64];
	int nthreads = 1;
	snprintf(name, sizeof name, "%s", spec);
	char *colon = strchr(name, ':');
	if (colon) {
		*colon = 0;
		nthreads = atoi(colon + 1);
		if (nthreads < 1 || nthreads > MAX_THREADS) {
			fprintf(stderr, "microbench: bad thread count in %s\n", spec);
			return 1;
		}
	}
	for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
		if (strcmp(workloads[i].name, name) != 0)
			continue;
		if (workloads[i].nm && !outside_dir) {
			fprintf(stderr, "microbench: %s needs --outside DIR\n", name);
			return 1;
		}
		long long ops;
		double el;
		struct totals tot;
		if (warmup_secs > 0 && run_timed(workloads[i].id, nthreads, warmup_secs, &ops, &el, &tot) != 0)
			goto failed;
		if (run_timed(workloads[i].id, nthreads, measure_secs, &ops, &el, &tot) != 0)
			goto failed;
		double per = 1e6 / (ops ? ops : 1);
		/* cpu_us_per_op: the workers' own CPU per operation (a server's, or a FUSE
		 * daemon's, is not counted: a figure for calls the process makes itself) */
		/* queued_us_per_op: the workers' time runnable but waiting for a CPU (the machine's
		 * load, or other threads of the command); asleep_us_per_op: off a CPU by their own
		 * call (a lock, a futex, the disk), sleeps_per_op the times they went to sleep.
		 * cpu + queued + asleep is the workers' wall-clock per operation. */
		printf("RESULT workload=%s threads=%d ops=%lld secs=%.4f ops_per_s=%.1f cpu_us_per_op=%.3f"
		       " queued_us_per_op=%.3f asleep_us_per_op=%.3f sleeps_per_op=%.4f",
		       name, nthreads, ops, el, ops / el, tot.cpu * per, tot.queued * per, tot.asleep * per,
		       tot.switches * per * 1e-6);
		if (workloads[i].bytes_per_op)
			printf(" mb_per_s=%.2f", ops * (double)workloads[i].bytes_per_op / el / 1e6);
		if (workloads[i].nm)
			printf(" ns_per_call=%.2f", el * 1e9 / (ops ? ops : 1));
		printf("\n");
		fflush(stdout);
		return 0;
failed:
		printf("RESULT workload=%s threads=%d error=1\n", name, nthreads);
		fflush(stdout);
		return 1;
	}
	fprintf(stderr, "microbench: unknown workload %s\n", name);
	return 1;
}

/* ---- first operation in a fresh process ------------------------------- */

static double spawn_stat1(const char *path)
{
	double t0 = now();
	pid_t pid = fork();
	if (pid < 0)
		die("fork", NULL);
	if (pid == 0) {
		execl(self_exe, self_exe, "stat1", path, (char *)NULL);
		_exit(127);
	}
	int status;
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid", NULL);
	double t = now() - t0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "microbench: child 'stat1 %s' failed (status %d)\n", path, status);
		return -1;
	}
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int firstop(void)
{
	if (!outside_dir) {
		fprintf(stderr, "microbench: firstop needs --outside DIR\n");
		return 1;
	}
	int n = firstop_iters;
	double *mnt = calloc(n, sizeof *mnt), *out = calloc(n, sizeof *out);
	if (spawn_stat1(firstop_path) < 0 || spawn_stat1(outside_dir) < 0) { /* warm the binary */
		printf("RESULT workload=firstop threads=1 error=1\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		mnt[i] = spawn_stat1(firstop_path);
		out[i] = spawn_stat1(outside_dir);
		if (mnt[i] < 0 || out[i] < 0) {
			printf("RESULT workload=firstop threads=1 error=1\n");
			return 1;
		}
	}
	double m = median(mnt, n), o = median(out, n);
	printf("RESULT workload=firstop threads=1 ops=%d mount_ms=%.3f outside_ms=%.3f first_op_ms=%.3f\n",
	       n, m * 1e3, o * 1e3, (m - o) * 1e3);
	fflush(stdout);
	return 0;
}

/* ---- command line ------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: microbench setup|check DIR [--large-mb N]\n"
		"       microbench run DIR [-d SECS] [-w SECS] [-n N] [--setup] [--large-mb N]\n"
		"                      [--outside DIR] [--root PATH] [--handler] WORKLOAD[:THREADS]...\n"
		"       microbench stat1 PATH\n");
	exit(2);
}

static void on_usr1(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		usage();
	const char *cmd = argv[1];
	if (strcmp(cmd, "stat1") == 0) {
		struct stat st;
		return stat(argv[2], &st) == 0 ? 0 : 1;
	}
	bench_dir = argv[2];
	ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
	if (len < 0)
		die("readlink", "/proc/self/exe");
	self_exe[len] = 0;

	int do_setup = 0, first_wl = argc;
	for (int i = 3; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-') {
			first_wl = i;
			break;
		}
		if (strcmp(a, "--handler") == 0) {
			signal(SIGUSR1, on_usr1);
			continue;
		}
		if (i + 1 >= argc && strcmp(a, "--setup") != 0)
			usage();
		if (strcmp(a, "-d") == 0)
			measure_secs = atof(argv[++i]);
		else if (strcmp(a, "-w") == 0)
			warmup_secs = atof(argv[++i]);
		else if (strcmp(a, "-n") == 0)
			firstop_iters = atoi(argv[++i]);
		else if (strcmp(a, "--large-mb") == 0)
			large_size = atoll(argv[++i]) << 20;
		else if (strcmp(a, "--outside") == 0)
			outside_dir = argv[++i];
		else if (strcmp(a, "--root") == 0)
			firstop_path = argv[++i];
		else if (strcmp(a, "--setup") == 0)
			do_setup = 1;
		else
			usage();
	}
	if (firstop_iters < 1)
		firstop_iters = 1;
	if (!firstop_path)
		firstop_path = bench_dir;

	if (strcmp(cmd, "setup") == 0) {
		setup(bench_dir);
		return 0;
	}
	if (strcmp(cmd, "check") != 0 && strcmp(cmd, "run") != 0)
		usage();
	int rc = 0;
	/* firstop first: fork's cost grows with the parent's memory (a fixture
	 * held in an in-process file system, an interpreter), which would blur
	 * the exec-to-exit times it compares */
	for (int i = first_wl; i < argc; i++)
		if (strcmp(argv[i], "firstop") == 0)
			rc |= firstop();
	if (do_setup) {
		double t0 = now();
		setup(bench_dir);
		printf("SETUP secs=%.3f\n", now() - t0);
	}
	if (strcmp(cmd, "check") == 0)
		return check(bench_dir);
	for (int i = first_wl; i < argc; i++)
		if (strcmp(argv[i], "firstop") != 0)
			rc |= run_workload(argv[i]);
	return rc;
}
