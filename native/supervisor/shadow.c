/*
 * Directories of a mount, for a supervised caller. getdents64 runs on an fd, in the
 * kernel, and is not trapped: a caller that opens a mount directory gets an fd of a real
 * directory that stands for it, its *shadow*, in the run directory
 * (RUN_DIR/supervisor/MOUNT/PATH): one empty entry per name the file system lists, of the
 * same type (a directory, a symlink, a file), made again at each open. The kernel lists
 * it; the names the caller then uses relative to that fd (fstatat, openat, readlinkat) are
 * trapped and mapped back to the mount path (shadow_unmap), so that what they name is
 * the file system's. fstat of the directory fd itself describes the shadow.
 */
#include "supervisor.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char sv_shadow_root[PATH_MAX];

static int shadow_path(const char *abs, char *out, size_t size)
{
    int m = mount_of(abs);
    if (m < 0)
        return -ENOENT;
    int n = snprintf(out, size, "%s/%d%s", sv_shadow_root, m, abs + sv_mount_len[m]);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int shadow_unmap(char *path, size_t size)
{
    size_t rl = strlen(sv_shadow_root);
    if (rl == 0 || strncmp(path, sv_shadow_root, rl) != 0 || path[rl] != '/')
        return 0;
    char *end;
    long m = strtol(path + rl + 1, &end, 10);
    if (end == path + rl + 1 || m < 0 || m >= sv_nmounts || (*end != '/' && *end != '\0'))
        return 0;
    char out[SV_PATH_MAX];
    int n = snprintf(out, sizeof out, "%s%s", sv_mounts[m], end);
    if (n < 0 || (size_t)n >= size)
        return 0;
    memcpy(path, out, (size_t)n + 1);
    return 1;
}

static void remove_tree(int at, const char *name)
{
    if (unlinkat(at, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
        return;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                remove_tree(dirfd(d), e->d_name);
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    unlinkat(at, name, AT_REMOVEDIR);
}

static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

/* the type of an entry as a shadow can hold it */
static int kind(unsigned char t)
{
    return t == DT_DIR ? DT_DIR : t == DT_LNK ? DT_LNK : DT_REG;
}

int shadow_open(const char *abs, int cloexec)
{
    char sp[SV_PATH_MAX];
    int r = shadow_path(abs, sp, sizeof sp);
    if (r < 0)
        return r;
    DIR *fs = opendir(abs);     /* the preload lists the mount directory */
    if (fs == NULL)
        return -errno;
    if ((r = mkdirs(sp)) < 0) {
        closedir(fs);
        return r;
    }
    int sfd = open(sp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0) {
        r = -errno;
        closedir(fs);
        return r;
    }
    /* what the file system lists, by name */
    size_t n = 0, cap = 64;
    struct ent { char *name; int type; } *ents = malloc(cap * sizeof *ents);
    struct dirent *e;
    while (ents && (e = readdir(fs)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int t = e->d_type;
        if (t == DT_UNKNOWN) {
            char full[SV_PATH_MAX];
            struct stat st;
            snprintf(full, sizeof full, "%s/%s", abs, e->d_name);
            t = lstat(full, &st) == 0 ? IFTODT(st.st_mode) : DT_REG;
        }
        if (n == cap) {
            void *p = realloc(ents, (cap *= 2) * sizeof *ents);
            if (p == NULL)
                break;
            ents = p;
        }
        ents[n].name = strdup(e->d_name);
        ents[n++].type = kind((unsigned char)t);
    }
    closedir(fs);
    /* the shadow's entries that are no longer there, or of another type, go */
    int dfd = dup(sfd);
    DIR *sh = dfd >= 0 ? fdopendir(dfd) : NULL;
    while (sh && (e = readdir(sh)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int keep = 0;
        for (size_t i = 0; i < n && !keep; i++)
            keep = ents[i].name && strcmp(ents[i].name, e->d_name) == 0 && ents[i].type == kind(e->d_type);
        if (!keep)
            remove_tree(sfd, e->d_name);
    }
    if (sh)
        closedir(sh);
    for (size_t i = 0; i < n; i++) {
        if (ents[i].name == NULL)
            continue;
        if (ents[i].type == DT_DIR)
            mkdirat(sfd, ents[i].name, 0700);
        else if (ents[i].type == DT_LNK)
            symlinkat(".", sfd, ents[i].name);
        else
            close(openat(sfd, ents[i].name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
        free(ents[i].name);
    }
    free(ents);
    lseek(sfd, 0, SEEK_SET);
    if (!cloexec)
        fcntl(sfd, F_SETFD, 0);
    return sfd;
}
