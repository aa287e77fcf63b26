/*
 * The working directory of a supervised process that is in a mount (docs/supervisor.md).
 * The kernel cannot make a directory of a mount a process's cwd, and the supervisor cannot
 * change another process's cwd. Two ways keep one:
 *
 *   - the kernel's cwd is a directory's shadow (shadow.c): the preload enters it before it
 *     execs a supervised program from a working directory in a mount
 *     (interpose/supervise.c), and a program's fchdir to a directory fd we gave lands
 *     there; target_resolve maps it back. The kernel carries it across fork and exec.
 *   - a process's own chdir into a mount (busybox sh's `cd`, `tar -C`, Go's exec with
 *     cmd.Dir): answered here, and kept in a table of *virtual cwds*, by thread group,
 *     with the kernel's cwd seen then. It holds while the kernel's cwd is still that one
 *     (a pid used again by another process in another directory is not fooled), and
 *     goes at the process's exit; a child forked before its first call inherits it
 *     (its nearest ancestor's entry, same kernel cwd; given to it when its parent's
 *     changes or goes before it is seen). At the process's execve the entry is written to RUN_DIR/supervisor/cwd/PID,
 *     where a preloaded program it becomes takes it (interpose/supervise.c).
 *
 * A relative name from a virtual cwd or a shadow is served even when it leads outside the
 * mounts (`cd ..` from the mount's root): the kernel would resolve it elsewhere.
 */
#include "supervisor.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CWD_MAX 256

struct vcwd {
    pid_t tgid;
    char *dir;      /* the virtual cwd */
    char *real;     /* the kernel's cwd when it was set */
};
static struct vcwd table[CWD_MAX];
static int used;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static pid_t field(pid_t pid, const char *name)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strstr(buf, name);
    return p ? (pid_t)atoi(p + strlen(name)) : -1;
}

static int kernel_cwd(pid_t pid, char *out, size_t size)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)pid);
    ssize_t n = readlink(link, out, size - 1);
    if (n <= 0)
        return -1;
    out[n] = '\0';
    return 0;
}

static int find(pid_t tgid)
{
    for (int i = 0; i < used; i++)
        if (table[i].tgid == tgid)
            return i;
    return -1;
}

static void drop(int i)
{
    free(table[i].dir);
    free(table[i].real);
    table[i] = table[--used];
}

static void put(pid_t tgid, const char *dir, const char *real)
{
    int i = find(tgid);
    if (i < 0) {
        if (used == CWD_MAX)
            drop(0);
        i = used++;
        table[i].tgid = tgid;
    } else {
        free(table[i].dir);
        free(table[i].real);
    }
    table[i].dir = strdup(dir);
    table[i].real = strdup(real);
}

/* Before tgid's entry i changes or goes (its chdir, fchdir or exit): its children forked
 * since it was set, not seen yet, and still in the same kernel cwd get it as their own
 * (they were in that directory at their fork). Locked. */
static void hand_to_children(pid_t tgid, int i)
{
    char path[64], list[4096], real[SV_PATH_MAX];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)tgid, (int)tgid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, list, sizeof list - 1);
    close(fd);
    list[n > 0 ? n : 0] = '\0';
    char *dir = strdup(table[i].dir), *was = strdup(table[i].real);
    for (char *p = list, *end; dir && was && *p; p = end) {
        pid_t child = (pid_t)strtol(p, &end, 10);
        if (end == p)
            break;
        if (find(child) < 0 && kernel_cwd(child, real, sizeof real) == 0 && strcmp(real, was) == 0)
            put(child, dir, was);
    }
    free(dir);
    free(was);
}

/* The virtual cwd of tid's process (locked): its own entry, or the nearest ancestor's
 * that has the same kernel cwd (a child forked since), which becomes its own. */
static int lookup(pid_t tid, char *out, size_t size)
{
    if (used == 0)
        return 0;
    char real[SV_PATH_MAX];
    pid_t tgid = field(tid, "\nTgid:");
    if (tgid <= 0 || kernel_cwd(tgid, real, sizeof real) < 0)
        return 0;
    int i = find(tgid);
    if (i >= 0 && strcmp(table[i].real, real) != 0) {
        drop(i);        /* not the process that set it, or its cwd changed since */
        i = -1;
    }
    for (pid_t a = tgid; i < 0 && a > 1;) {
        a = field(a, "\nPPid:");
        int j = a > 1 ? find(a) : -1;
        if (j >= 0 && strcmp(table[j].real, real) == 0) {
            put(tgid, table[j].dir, real);
            i = find(tgid);
        } else if (j >= 0) {
            break;
        }
    }
    if (i < 0 || strlen(table[i].dir) >= size)
        return 0;
    strcpy(out, table[i].dir);
    return 1;
}

int cwd_virtual(pid_t tid, char *out, size_t size)
{
    pthread_mutex_lock(&lock);
    int r = lookup(tid, out, size);
    pthread_mutex_unlock(&lock);
    return r;
}

void cwd_enter(pid_t tid, const char *dir)
{
    char real[SV_PATH_MAX];
    pid_t tgid = field(tid, "\nTgid:");
    if (tgid <= 0 || kernel_cwd(tgid, real, sizeof real) < 0)
        return;
    pthread_mutex_lock(&lock);
    int i = find(tgid);
    if (i >= 0)
        hand_to_children(tgid, i);
    put(tgid, dir, real);
    pthread_mutex_unlock(&lock);
}

void cwd_leave(pid_t tid)
{
    pthread_mutex_lock(&lock);
    if (used > 0) {
        pid_t tgid = field(tid, "\nTgid:");
        int i = find(tgid);
        if (i >= 0) {
            hand_to_children(tgid, i);
            drop(find(tgid));
        }
    }
    pthread_mutex_unlock(&lock);
}

void cwd_hand_down(pid_t tid)
{
    char dir[SV_PATH_MAX], real[SV_PATH_MAX];
    pid_t tgid = field(tid, "\nTgid:");
    pthread_mutex_lock(&lock);
    int i = lookup(tid, dir, sizeof dir) ? find(tgid) : -1;
    if (i >= 0)
        snprintf(real, sizeof real, "%s", table[i].real);
    pthread_mutex_unlock(&lock);
    if (i < 0)
        return;
    char name[PATH_MAX + 32], tmp[PATH_MAX + 40];
    snprintf(name, sizeof name, "%s/cwd", sv_shadow_root);
    mkdir(name, 0700);
    snprintf(name, sizeof name, "%s/cwd/%d", sv_shadow_root, (int)tgid);
    snprintf(tmp, sizeof tmp, "%s.new", name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    dprintf(fd, "%s\n%s", dir, real);
    close(fd);
    rename(tmp, name);
}
