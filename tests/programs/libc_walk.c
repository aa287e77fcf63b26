/* Exercises the libc entry points that issue file syscalls internally
 * (stdio, directory streams, scandir, glob, nftw, fts, realpath, mkstemp)
 * and the fd-level calls that reach the kernel by other ways (dup2,
 * sendfile, copy_file_range, mmap), on the directory given as argv[1].
 * Prints paths relative to it, so its output can be compared with a
 * native run.  It first makes its own small tree with the primitives, so
 * it also runs on the in-memory example, whose state is per process.
 * Used by tests/test_libc.py. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;
static size_t rootlen;

static const char *rel(const char *p)
{
    if (strncmp(p, root, rootlen) == 0)
        return p[rootlen] ? p + rootlen + 1 : ".";
    return p;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *path(const char *name)
{
    static char buf[8][PATH_MAX];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, PATH_MAX, "%s/%s", root, name);
    return b;
}

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("FAILED %s: %s\n", what, strerror(errno));
        fflush(stdout);
    }
}

static int nftw_cb(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    static char *lines[256];
    static int n;
    char line[PATH_MAX + 64];
    if (p == NULL) { /* flush, sorted */
        qsort(lines, n, sizeof *lines, cmp);
        for (int i = 0; i < n; i++) { printf("nftw %s\n", lines[i]); free(lines[i]); }
        n = 0;
        return 0;
    }
    snprintf(line, sizeof line, "%s type=%d level=%d size=%lld", rel(p), type, ftw->level,
             S_ISDIR(st->st_mode) ? -1LL : (long long)st->st_size);
    if (n < 256)
        lines[n++] = strdup(line);
    return 0;
}

int main(int argc, char **argv)
{
    char line[256];
    if (argc < 2)
        return 2;
    root = argv[1];
    rootlen = strlen(root);
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* the tree, made with the primitives */
    check(mkdir(path("tree"), 0755) == 0, "mkdir tree");
    check(mkdir(path("tree/a"), 0755) == 0, "mkdir tree/a");
    check(mkdir(path("tree/b"), 0700) == 0, "mkdir tree/b");
    const char *files[] = {"f", "tree/a/y.txt", "tree/b/x.txt", "tree/b/z.dat"};
    for (int i = 0; i < 4; i++) {
        int fd = open(path(files[i]), O_WRONLY | O_CREAT | O_EXCL, 0644);
        check(fd >= 0, files[i]);
        check(write(fd, files[i], strlen(files[i])) == (ssize_t)strlen(files[i]), "write");
        check(write(fd, "\n", 1) == 1, "write nl");
        close(fd);
    }
    check(symlink("tree", path("link_to_tree")) == 0, "symlink");

    /* stdio write, append, read */
    FILE *f = fopen(path("stdio.txt"), "w");
    check(f != NULL, "fopen w");
    for (int i = 0; i < 100; i++)
        fprintf(f, "line %d %s\n", i, i % 2 ? "odd" : "even");
    check(fclose(f) == 0, "fclose w");
    f = fopen(path("stdio.txt"), "a+");
    fputs("appended\n", f);
    fseek(f, 0, SEEK_SET);
    check(fgets(line, sizeof line, f) != NULL, "fgets a+");
    printf("a+ first line: %s", line);
    fclose(f);
    f = fopen(path("stdio.txt"), "r");
    int count = 0;
    char *l = NULL;
    size_t cap = 0;
    while (getline(&l, &cap, f) > 0)
        count++;
    printf("getline count %d last %s", count, l);
    fseeko(f, 10, SEEK_SET);
    char buf[32] = {0};
    size_t got = fread(buf, 1, 12, f);
    printf("fread at 10: %zu [%s] ftell %ld\n", got, buf, ftell(f));
    rewind(f);
    int c = fgetc(f);
    printf("fgetc %c feof %d\n", c, feof(f));
    fclose(f);
    free(l);
    f = fopen(path("missing/x"), "r");
    printf("fopen missing: %s\n", f ? "opened" : strerror(errno));
    f = fdopen(open(path("stdio.txt"), O_RDONLY), "r");
    check(f != NULL && fgets(line, sizeof line, f), "fdopen");
    printf("fdopen: %s", line);
    f = freopen(path("f"), "r", f);
    check(f != NULL && fgets(line, sizeof line, f), "freopen");
    printf("freopen: %s", line);
    fclose(f);

    /* directory streams */
    DIR *d = opendir(root);
    check(d != NULL, "opendir");
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256)
        names[n++] = strdup(e->d_name);
    qsort(names, n, sizeof *names, cmp);
    printf("readdir:");
    for (int i = 0; i < n; i++) { printf(" %s", names[i]); free(names[i]); }
    printf("\n");
    rewinddir(d);
    int again = 0;
    while (readdir(d) != NULL)
        again++;
    printf("after rewinddir %d entries, dirfd valid %d\n", again, dirfd(d) >= 0);
    closedir(d);
    d = opendir(path("f"));
    printf("opendir file: %s\n", d ? "opened" : strerror(errno));

    struct dirent **list;
    n = scandir(path("tree"), &list, NULL, alphasort);
    printf("scandir %d:", n);
    for (int i = 0; i < n; i++) { printf(" %s", list[i]->d_name); free(list[i]); }
    printf("\n");
    free(n >= 0 ? list : NULL);

    glob_t g;
    char pattern[PATH_MAX];
    snprintf(pattern, sizeof pattern, "%s/tree/*/*.txt", root);
    int gr = glob(pattern, 0, NULL, &g);
    printf("glob %d:", gr);
    for (size_t i = 0; gr == 0 && i < g.gl_pathc; i++)
        printf(" %s", rel(g.gl_pathv[i]));
    printf("\n");
    if (gr == 0)
        globfree(&g);

    nftw(path("tree"), nftw_cb, 8, FTW_PHYS);
    nftw_cb(NULL, NULL, 0, NULL);

    char *const fts_paths[] = {path("tree"), NULL};
    FTS *fts = fts_open(fts_paths, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
    check(fts != NULL, "fts_open");
    int fts_count = 0, fts_files = 0;
    FTSENT *ent;
    while ((ent = fts_read(fts)) != NULL) {
        fts_count++;
        if (ent->fts_info == FTS_F)
            fts_files++;
    }
    fts_close(fts);
    printf("fts entries %d files %d\n", fts_count, fts_files);

    /* realpath, mkstemp */
    char resolved[PATH_MAX];
    check(realpath(path("tree/a/../b/./x.txt"), resolved) != NULL, "realpath");
    printf("realpath %s\n", rel(resolved));
    check(realpath(path("link_to_tree"), resolved) != NULL, "realpath link");
    printf("realpath link %s\n", rel(resolved));
    printf("realpath missing: %s\n", realpath(path("nope"), resolved) ? "resolved" : strerror(errno));
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/tmpXXXXXX", root);
    int tfd = mkstemp(tmpl);
    check(tfd >= 0, "mkstemp");
    printf("mkstemp write %zd\n", write(tfd, "temp\n", 5));
    struct stat st;
    fstat(tfd, &st);
    printf("mkstemp mode %o size %lld\n", st.st_mode & 07777, (long long)st.st_size);
    close(tfd);
    unlink(tmpl);

    /* dup2 onto stdout-like fds, sendfile, copy_file_range, mmap */
    int src = open(path("stdio.txt"), O_RDONLY);
    int dst = open(path("copy_sendfile"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    off_t off = 0;
    printf("sendfile %zd\n", sendfile(dst, src, &off, 1 << 20));
    close(dst);
    dst = open(path("copy_cfr"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    loff_t in_off = 0;
    printf("copy_file_range %zd\n", copy_file_range(src, &in_off, dst, NULL, 1 << 20, 0));
    close(dst);
    void *m = mmap(NULL, 64, PROT_READ, MAP_PRIVATE, src, 0);
    check(m != MAP_FAILED, "mmap");
    if (m != MAP_FAILED) {
        printf("mmap: %.7s\n", (char *)m);
        munmap(m, 64);
    }
    int saved = dup(1);
    int out = open(path("dup2_out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    fflush(stdout);
    dup2(out, 1);
    printf("written through dup2'd stdout\n");
    fflush(stdout);
    dup2(saved, 1);
    close(out);
    int dfd = fcntl(src, F_DUPFD_CLOEXEC, 100);
    printf("F_DUPFD_CLOEXEC >= 100: %d, cloexec %d\n", dfd >= 100, (fcntl(dfd, F_GETFD) & FD_CLOEXEC) != 0);
    lseek(src, 5, SEEK_SET);
    printf("dup shares offset: %ld\n", (long)lseek(dfd, 0, SEEK_CUR));
    close(dfd);
    close(src);
    f = fopen(path("dup2_out"), "r");
    check(f != NULL && fgets(line, sizeof line, f), "read dup2_out");
    printf("dup2_out: %s", line);
    fclose(f);
    printf("access W_OK %d, R_OK missing %d\n", access(path("f"), W_OK), access(path("nope"), R_OK));
    printf("done\n");
    return 0;
}
