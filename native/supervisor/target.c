/*
 * The caller of a notification: its memory (process_vm_readv/writev: the kernel checks
 * that we may, as it does for ptrace), who it is (/proc/PID/status), where its relative
 * paths start (/proc/PID/cwd, /proc/PID/fd/N), and whether the notification is still the
 * one we read (SECCOMP_IOCTL_NOTIF_ID_VALID: the pid may have ended and been reused, or
 * the call been interrupted, between the notification and our reading of its memory).
 */
#include "supervisor.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

int target_valid(struct sv_target *t)
{
    uint64_t id = t->n->id;
    return ioctl(t->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

int target_read(struct sv_target *t, uint64_t addr, void *out, size_t size)
{
    struct iovec local = { out, size }, remote = { (void *)(uintptr_t)addr, size };
    ssize_t r = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
    return r == (ssize_t)size ? 0 : -EFAULT;
}

int target_write(struct sv_target *t, uint64_t addr, const void *buf, size_t size)
{
    struct iovec local = { (void *)buf, size }, remote = { (void *)(uintptr_t)addr, size };
    ssize_t r = process_vm_writev(t->pid, &local, 1, &remote, 1, 0);
    return r == (ssize_t)size ? 0 : -EFAULT;
}

/* Read up to each page's end: the string may end just before an unmapped page. */
ssize_t target_read_string(struct sv_target *t, uint64_t addr, char *out, size_t size)
{
    if (addr == 0)
        return -EFAULT;
    size_t got = 0;
    while (got < size - 1) {
        uint64_t at = addr + got;
        size_t chunk = 4096 - (at & 4095);
        if (chunk > size - 1 - got)
            chunk = size - 1 - got;
        struct iovec local = { out + got, chunk }, remote = { (void *)(uintptr_t)at, chunk };
        ssize_t r = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
        if (r <= 0)
            return -EFAULT;
        char *nul = memchr(out + got, '\0', (size_t)r);
        if (nul)
            return nul - out;
        got += (size_t)r;
    }
    return -ENAMETOOLONG;
}

/* Our effective capabilities (the launcher's), read once. */
static uint64_t own_caps(void)
{
    static uint64_t caps = ~0ULL;       /* until read: more than anyone has */
    if (caps == ~0ULL) {
        struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) == 0)
            caps = d[0].effective | (uint64_t)d[1].effective << 32;
    }
    return caps;
}

/* Does the caller act with our fsuid and fsgid and at least our effective capabilities
 * (root with capabilities dropped is not the launcher's root: what we would do for it it
 * could not do itself)? Its umask into *umask_out. */
int target_is_us(struct sv_target *t, mode_t *umask_out)
{
    char name[64], buf[4096];
    snprintf(name, sizeof name, "/proc/%d/status", (int)t->pid);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long r, e, s, fsuid = (unsigned long)-1, fsgid = (unsigned long)-1, mask = 022;
    char *p;
    if ((p = strstr(buf, "\nUmask:")) != NULL)
        mask = strtoul(p + 7, NULL, 8);
    if ((p = strstr(buf, "\nUid:")) == NULL || sscanf(p + 5, "%lu %lu %lu %lu", &r, &e, &s, &fsuid) != 4)
        return 0;
    if ((p = strstr(buf, "\nGid:")) == NULL || sscanf(p + 5, "%lu %lu %lu %lu", &r, &e, &s, &fsgid) != 4)
        return 0;
    if ((p = strstr(buf, "\nCapEff:")) == NULL)
        return 0;
    uint64_t caps = strtoull(p + 8, NULL, 16);
    if (umask_out)
        *umask_out = (mode_t)(mask & 0777);
    return fsuid == (unsigned long)geteuid() && fsgid == (unsigned long)getegid() && (own_caps() & ~caps) == 0;
}

/* join base and rel, then resolve ".", ".." and "//" lexically (as the preload's
 * path_normalize: a mount's paths are the file system's, not the kernel's) */
static int normalize(const char *base, const char *rel, char *out, size_t size)
{
    char tmp[SV_PATH_MAX * 2];
    int n = rel[0] == '/' ? snprintf(tmp, sizeof tmp, "%s", rel) : snprintf(tmp, sizeof tmp, "%s/%s", base, rel);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return -ENAMETOOLONG;
    size_t len = 0;
    char *save = NULL;
    for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            while (len > 0 && out[len - 1] != '/')
                len--;
            if (len > 0)
                len--;
            continue;
        }
        size_t cl = strlen(c);
        if (len + 1 + cl + 1 > size)
            return -ENAMETOOLONG;
        out[len++] = '/';
        memcpy(out + len, c, cl);
        len += cl;
    }
    if (len == 0)
        out[len++] = '/';
    out[len] = '\0';
    return 0;
}

int target_resolve(struct sv_target *t, long dirfd, const char *path, char *out, size_t size)
{
    char base[SV_PATH_MAX] = "/";
    int virtual = 0;
    if (path[0] != '/' && (int)dirfd == AT_FDCWD && cwd_virtual(t->pid, base, sizeof base)) {
        virtual = 1;
    } else if (path[0] != '/') {
        char link[64];
        if ((int)dirfd == AT_FDCWD)
            snprintf(link, sizeof link, "/proc/%d/cwd", (int)t->pid);
        else if (dirfd >= 0 && dirfd <= INT32_MAX)
            snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)t->pid, (int)dirfd);
        else
            return -EBADF;
        ssize_t n = readlink(link, base, sizeof base - 1);
        if (n <= 0)
            return -EBADF;
        base[n] = '\0';
        if (base[0] != '/')
            return -ENOTDIR;    /* not a directory (a pipe, a socket): not ours */
        virtual = shadow_unmap(base, sizeof base);
    }
    int r = normalize(base, path, out, size);
    return r < 0 ? r : virtual;
}

int mount_of(const char *abs)
{
    for (int i = 0; i < sv_nmounts; i++) {
        size_t l = sv_mount_len[i];
        if (strncmp(abs, sv_mounts[i], l) == 0 && (abs[l] == '\0' || abs[l] == '/'))
            return i;
    }
    return -1;
}
