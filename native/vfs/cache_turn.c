/*
 * The turn of a page cache: what orders the fills, writes and truncations of one cached
 * file between the threads and processes that share its memfd (vfs/pagecache.c).
 *
 * It is an OFD lock on one byte of a lock file of ours (the memfd's inode number is the
 * byte), never a lock on the memfd itself: a program's own byte-range locks live on the
 * memfd, and a whole-file lock (lockf(fd, F_LOCK, 0), Java's FileChannel.lock()) covers
 * every byte of it, so a lock of ours there would wait on the program forever. Nobody but
 * the preload library takes locks in the lock file.
 *
 * Each thread locks through an open file description of its own, so the OFD lock orders
 * the threads of one process too (two threads on one description would both own it). A
 * wait for the turn is made as the caller's thread stands (its signal mask untouched):
 * SIGTERM still ends a process that waits, and a handler may run. The holder keeps the
 * turn only across one FS call and the memfd calls around it.
 *
 * The file is per user (/dev/shm, else /tmp: .ldpfuse-turns-UID, 0600, ours or not used).
 * Two live memfds never share an inode number; should a number come back after it wrapped,
 * two files share a turn, which only orders them: nothing holds two turns at once.
 */
#include "../ldpfuse.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static TLS int turn_fd = -1;      /* this thread's description of the lock file */
static int turn_broken;           /* no lock file could be had: logged once */
static pthread_key_t turn_key;
static pthread_once_t turn_once = PTHREAD_ONCE_INIT;
static int turn_key_made;
/* every thread's fd, for a forked child to close (their threads are not in it) */
static int *turn_fds;
static int turn_nfds, turn_cap;
static pthread_mutex_t turn_fds_lock = PTHREAD_MUTEX_INITIALIZER;

static void forget_fd(int fd)
{
    pthread_mutex_lock(&turn_fds_lock);
    for (int i = 0; i < turn_nfds; i++)
        if (turn_fds[i] == fd) {
            turn_fds[i] = turn_fds[--turn_nfds];
            break;
        }
    pthread_mutex_unlock(&turn_fds_lock);
}

/* A thread that ends gives its description back. */
static void thread_gone(void *p)
{
    int fd = (int)(intptr_t)p - 1;
    if (fd >= 0) {
        forget_fd(fd);
        REAL(close)(fd);
    }
}

static void make_key(void)
{
    turn_key_made = pthread_key_create(&turn_key, thread_gone) == 0;
}

static int open_turns(void)
{
    static const char *const dirs[] = { "/dev/shm", "/tmp" };
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s/.ldpfuse-turns-%u", dirs[i], (unsigned)geteuid());
        int fd = REAL(open)(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            continue;
        struct stat st;
        if (REAL(fstat)(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            !(st.st_mode & 077))
            return fs_fd(fd);
        REAL(close)(fd);
    }
    return -1;
}

static int thread_fd(void)
{
    if (turn_fd >= 0 || __atomic_load_n(&turn_broken, __ATOMIC_RELAXED))
        return turn_fd;
    int e = errno;
    int fd = open_turns();
    if (fd < 0) {
        if (!__atomic_exchange_n(&turn_broken, 1, __ATOMIC_RELAXED))
            ldp_log(LOG_WARNING, "no lock file for page caches (/dev/shm, /tmp): processes sharing a cached "
                    "file are not ordered against each other");
        errno = e;
        return -1;
    }
    pthread_once(&turn_once, make_key);
    pthread_mutex_lock(&turn_fds_lock);
    if (turn_nfds == turn_cap) {
        int cap = turn_cap ? turn_cap * 2 : 16;
        int *n = realloc(turn_fds, (size_t)cap * sizeof *n);
        if (n) {
            turn_fds = n;
            turn_cap = cap;
        }
    }
    if (turn_nfds < turn_cap)
        turn_fds[turn_nfds++] = fd;
    pthread_mutex_unlock(&turn_fds_lock);
    if (turn_key_made)
        pthread_setspecific(turn_key, (void *)(intptr_t)(fd + 1));
    turn_fd = fd;
    errno = e;
    return fd;
}

uint64_t cache_turn_key(int mfd)
{
    struct stat st;
    int e = errno;
    uint64_t key = REAL(fstat)(mfd, &st) == 0 ? (uint64_t)st.st_ino : 0;
    errno = e;
    return key & ((1ull << 62) - 1);
}

static void set_lock(int fd, uint64_t key, short type)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)key, .l_len = 1 };
    while (REAL(fcntl)(fd, F_OFD_SETLKW, &fl) < 0 && errno == EINTR)
        ;
}

void cache_turn_take(uint64_t key)
{
    int fd = thread_fd();
    if (fd < 0)
        return;
    int e = errno;
    set_lock(fd, key, F_WRLCK);
    errno = e;
}

void cache_turn_give(uint64_t key)
{
    int fd = turn_fd;
    if (fd < 0)
        return;
    int e = errno;
    set_lock(fd, key, F_UNLCK);
    errno = e;
}

/* In a forked child: the parent's descriptions would make the child the same owner as its
 * parent. Each thread of the child opens its own again when it first needs it. */
void cache_turn_fork_child(void)
{
    for (int i = 0; i < turn_nfds; i++)
        REAL(close)(turn_fds[i]);
    turn_nfds = 0;
    turn_fd = -1;
    pthread_mutex_init(&turn_fds_lock, NULL);
    if (turn_key_made)
        pthread_setspecific(turn_key, NULL);
}
