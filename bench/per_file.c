/*
 * per_file.c - where a small file's time goes: list a tree, then for each regular file
 * stat it, open it, read it whole and close it, timing each step (issue 34).
 *
 *   gcc -O2 -o bench/out/per_file bench/per_file.c
 *   bench/out/per_file [-d] DIR                 natively
 *   ldpfuse-run --stats --mountpoint /tmp/m examples/archive.py:Archive data.tar -- \
 *       bench/out/per_file /tmp/m               through the mount
 *
 * The listing is opendir/readdir of every directory (depth first, the names in the order
 * readdir gives them); the files are then read in that order (a data loader's way: the
 * whole tree is listed first), or with -d each directory's files right after its listing
 * (find's, ls -l's, du's way: within attr_timeout of it). Prints one line:
 *   RESULT files=N bytes=B list_us=L stat=S open=O read=R close=C total=T
 * with S, O, R, C, T in microseconds per file (T: the time outside the listing, over N).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char **names;
static size_t n_names, cap_names;
static int per_dir;
static double s_stat, s_open, s_read, s_close, s_files_time;
static long long bytes;
static size_t files;

static double now_us(void);

/* stat, open, read whole and close names[from..n_names) */
static void read_files(size_t from)
{
    static char buf[1 << 16];
    double t1 = now_us();
    for (size_t i = from; i < n_names; i++) {
        struct stat st;
        double a = now_us();
        if (stat(names[i], &st) < 0) {
            perror(names[i]);
            exit(1);
        }
        double b = now_us();
        if (!S_ISREG(st.st_mode)) {
            s_stat += b - a;
            continue;
        }
        int fd = open(names[i], O_RDONLY);
        if (fd < 0) {
            perror(names[i]);
            exit(1);
        }
        double c = now_us();
        ssize_t n, got = 0;
        while ((n = read(fd, buf, sizeof buf)) > 0)
            got += n;
        double d = now_us();
        close(fd);
        double e = now_us();
        if (n < 0 || got != st.st_size) {
            fprintf(stderr, "%s: read %zd bytes, stat said %lld\n", names[i], got, (long long)st.st_size);
            exit(1);
        }
        s_stat += b - a, s_open += c - b, s_read += d - c, s_close += e - d;
        bytes += got;
        files++;
    }
    s_files_time += now_us() - t1;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The server: the nearest ancestor whose comm is ldpfuse-run; 0 if none. */
static int server_pid(void)
{
    int pid = getppid();
    for (int depth = 0; pid > 1 && depth < 8; depth++) {
        char p[64], buf[512];
        snprintf(p, sizeof p, "/proc/%d/stat", pid);
        FILE *f = fopen(p, "r");
        if (!f)
            return 0;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (!open || !close)
            return 0;
        if (close - open - 1 == 11 && strncmp(open + 1, "ldpfuse-run", 11) == 0)
            return pid;
        pid = atoi(close + 4);      /* ") S PPID" */
    }
    return 0;
}

/* utime + stime of process pid, all threads, in clock ticks; -1 if unknown */
static long long cpu_ticks(int pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *c = strrchr(buf, ')');
    unsigned long long ut, st;
    /* after ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!c || sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

static void add(const char *path)
{
    if (n_names == cap_names) {
        cap_names = cap_names ? cap_names * 2 : 1024;
        names = realloc(names, cap_names * sizeof *names);
        if (!names)
            exit(2);
    }
    names[n_names++] = strdup(path);
}

static double list_pause;       /* time of read_files inside walk (-d) */

static void walk(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        exit(1);
    }
    struct dirent *e;
    char path[4096];
    size_t first = n_names;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR)
            walk(path);
        else if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN)
            add(path);
    }
    closedir(d);
    if (per_dir) {
        double t = now_us();
        read_files(first);
        while (n_names > first)         /* read: the tree's other names are not kept */
            free(names[--n_names]);
        list_pause += now_us() - t;
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "-d") == 0) {
        per_dir = 1;
        argv++, argc--;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: per_file [-d] DIR\n");
        return 2;
    }
    int srv = server_pid();
    long long srv0 = -1;
    double t0 = now_us();
    if (per_dir && srv)
        srv0 = cpu_ticks(srv);
    walk(argv[1]);
    double t_list = now_us() - t0 - list_pause;
    if (!per_dir) {
        if (srv)
            srv0 = cpu_ticks(srv);
        read_files(0);
    }
    long long srv1 = srv0 >= 0 ? cpu_ticks(srv) : -1;
    size_t k = files ? files : 1;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
    printf("RESULT files=%zu bytes=%lld list_us=%.0f stat=%.2f open=%.2f read=%.2f close=%.2f total=%.2f",
           files, bytes, t_list, s_stat / k, s_open / k, s_read / k, s_close / k, s_files_time / k);
    if (srv1 >= 0)
        printf(" srv_cpu=%.2f", (double)(srv1 - srv0) * 1e6 / (double)sysconf(_SC_CLK_TCK) / (double)k);
    printf(" cpu=%.2f\n", cpu / (double)k);
    return 0;
}
