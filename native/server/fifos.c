/*
 * FIFOs in the mount: the kernel gives a FIFO inode of a FUSE mount a pipe of its own and
 * never calls the FS's open; here each one is a real FIFO in a private directory (mkdtemp,
 * 0711, the launcher's, inside the command's private directory: run_dir.h), with the FS's
 * owner and mode, that the client opens itself (blocking it, not the server). The embedded
 * mode's launcher uses the command's FIFO directory instead, which other users write:
 * owner and mode are set through the FIFO's fd (fifo_dir_settle), never by name.
 */
#include "server.h"
#include "../backend/fifo_dir.h"
#include "../run_dir.h"
#include <stdio.h>

struct sfifo {
    struct sfifo *next;
    int mnt;
    char *path;
    char real[128];
};
static struct sfifo *sfifos;
static pthread_mutex_t sfifo_lock = PTHREAD_MUTEX_INITIALIZER;
static char fifo_dir[PATH_MAX];

int sfifo_get(int mnt, const char *path, mode_t mode, uid_t uid, gid_t gid, char *out, size_t outsz)
{
    int r = 0;
    pthread_mutex_lock(&sfifo_lock);
    struct sfifo *f = sfifos, named = { .mnt = mnt };
    const char *command_dir = fifo_dir_of_command();
    if (command_dir) {
        /* the embedded mode's launcher: the FIFO the command's other processes use */
        f = &named;
        if (fifo_dir_name(f->real, sizeof f->real, command_dir, mnt, path) < 0) {
            r = -ENAMETOOLONG;
            goto out;
        }
    }
    for (; f && f != &named; f = f->next)
        if (f->mnt == mnt && strcmp(f->path, path) == 0)
            break;
    if (f == NULL) {
        if (fifo_dir[0] == '\0') {
            /* in the command's private directory (run_dir.h), searchable by the command's
             * other users (each FIFO has the owner and mode the FS gives it) */
            if (run_dir_get(fifo_dir, sizeof fifo_dir - 16) < 0) {
                r = -errno;
                fifo_dir[0] = '\0';
                goto out;
            }
            strcat(fifo_dir, "/fifos-XXXXXX");
            if (mkdtemp(fifo_dir) == NULL || chmod(fifo_dir, 0711) < 0) {
                r = -errno;
                fifo_dir[0] = '\0';
                goto out;
            }
        }
        static unsigned serial;
        f = calloc(1, sizeof *f);
        if (f == NULL || (f->path = strdup(path)) == NULL) {
            free(f);
            r = -ENOMEM;
            goto out;
        }
        snprintf(f->real, sizeof f->real, "%s/%u", fifo_dir, ++serial);
        if (mkfifo(f->real, 0600) < 0) {
            r = -errno;
            free(f->path);
            free(f);
            goto out;
        }
        f->mnt = mnt;
        f->next = sfifos;
        sfifos = f;
    }
    /* who may open it is what the FS says now: set through the FIFO's own fd, never by a
     * name another user of the command's FIFO directory may have swapped (fifo_dir.h) */
    struct stat want = { .st_mode = mode, .st_uid = uid, .st_gid = gid };
    r = fifo_dir_settle(f->real, &want);
    if (r == 0)
        snprintf(out, outsz, "%s", f->real);
out:
    pthread_mutex_unlock(&sfifo_lock);
    return r;
}

/* unlink (from NULL) or rename: the pipe follows its name, as an inode would */
void sfifo_renamed(int mnt, const char *from, const char *to)
{
    if (fifo_dir_of_command())
        return;     /* the embedded backend's unlink and rename move the command's FIFOs */
    pthread_mutex_lock(&sfifo_lock);
    for (struct sfifo **p = &sfifos; *p;) {
        struct sfifo *f = *p;
        if (f->mnt == mnt && strcmp(f->path, to) == 0) {
            *p = f->next;
            unlink(f->real);
            free(f->path);
            free(f);
            continue;
        }
        p = &f->next;
    }
    for (struct sfifo *f = sfifos; from && f; f = f->next)
        if (f->mnt == mnt && strcmp(f->path, from) == 0) {
            char *np = strdup(to);
            if (np) {
                free(f->path);
                f->path = np;
            }
        }
    pthread_mutex_unlock(&sfifo_lock);
}

/* What the server left on disk (the FIFOs and their directory), at the end. */
void sfifo_cleanup(void)
{
    pthread_mutex_lock(&sfifo_lock);
    for (struct sfifo *f = sfifos; f; f = f->next)
        unlink(f->real);
    if (fifo_dir[0])
        rmdir(fifo_dir);
    pthread_mutex_unlock(&sfifo_lock);
}
