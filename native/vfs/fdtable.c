/* fd -> struct vfile, for the fds whose kernel object is a placeholder (a memfd holding a
 * cached file, an O_PATH fd standing for a directory). Lookups take no lock: two levels of
 * arrays, chunks allocated once and never freed. Changes take one mutex. */
#include "../ldpfuse.h"
#include <pthread.h>
#include <stdlib.h>

#define CHUNK_BITS 10
#define CHUNK (1 << CHUNK_BITS)
#define NCHUNKS 1024            /* fds up to 1M */

static struct vfile **chunks[NCHUNKS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int ldp_nvfds;
int ldp_nvfds_passive;
static int max_fd = -1;

/* A read-only passthrough fd: the kernel's file, its entry only there to tell a change of
 * attributes made through it (vfs/passthrough.c); nothing a vfork child could do to it
 * leaves its parent wrong (interpose/vfork.c). */
static int passive(const struct vfile *v)
{
    return v->kind == VF_PASSTHROUGH && !vfile_writes(v);
}

struct vfile *fdtable_get(int fd)
{
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || fd < 0 || fd >= NCHUNKS * CHUNK)
        return NULL;
    struct vfile **c = __atomic_load_n(&chunks[fd >> CHUNK_BITS], __ATOMIC_ACQUIRE);
    if (c == NULL)
        return NULL;
    return __atomic_load_n(&c[fd & (CHUNK - 1)], __ATOMIC_ACQUIRE);
}

void fdtable_set(int fd, struct vfile *v)
{
    if (fd < 0 || fd >= NCHUNKS * CHUNK)
        return;
    guard_enter();      /* no signal handler may come back in while the lock is held */
    pthread_mutex_lock(&lock);
    struct vfile **c = chunks[fd >> CHUNK_BITS];
    if (c == NULL) {
        c = calloc(CHUNK, sizeof *c);
        __atomic_store_n(&chunks[fd >> CHUNK_BITS], c, __ATOMIC_RELEASE);
    }
    struct vfile *old = c[fd & (CHUNK - 1)];
    if (old == NULL && v != NULL)
        __atomic_add_fetch(&ldp_nvfds, 1, __ATOMIC_RELEASE);
    else if (old != NULL && v == NULL)
        __atomic_sub_fetch(&ldp_nvfds, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&ldp_nvfds_passive, (v && passive(v)) - (old && passive(old)), __ATOMIC_RELEASE);
    __atomic_store_n(&c[fd & (CHUNK - 1)], v, __ATOMIC_RELEASE);
    if (fd > max_fd)
        __atomic_store_n(&max_fd, fd, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    guard_leave();
}

struct vfile *fdtable_take(int fd)
{
    if (fdtable_get(fd) == NULL)
        return NULL;
    guard_enter();
    pthread_mutex_lock(&lock);
    struct vfile **c = chunks[fd >> CHUNK_BITS];
    struct vfile *v = c[fd & (CHUNK - 1)];
    if (v != NULL) {
        __atomic_store_n(&c[fd & (CHUNK - 1)], NULL, __ATOMIC_RELEASE);
        __atomic_sub_fetch(&ldp_nvfds, 1, __ATOMIC_RELEASE);
        if (passive(v))
            __atomic_sub_fetch(&ldp_nvfds_passive, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    guard_leave();
    return v;
}

int fdtable_max(void)
{
    return __atomic_load_n(&max_fd, __ATOMIC_ACQUIRE);
}

/* fork: no other thread may hold the table's lock at the instant of the fork */
void fdtable_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&lock);
    else
        pthread_mutex_unlock(&lock);
}
