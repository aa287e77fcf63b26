/* The race of stress-ng's dup stressor, N times: a forked child makes a clone that shares
 * its memory and fd table (CLONE_VM | CLONE_FILES, no thread: it shares the TLS too) and
 * dup2()s /dev/null over "the next free fd" while the child opens a FIFO that has no
 * writer, a 1 ms SIGALRM timer (handler without SA_RESTART) ending that open. Every open
 * must end (EINTR), none may hang: a child still there after 10 s counts as hung.
 * Prints "N eintr E hung H other O".  Usage: fifo_open_clone_race FIFO N.
 * Used by tests/test_fifo.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int next_fd;
static char clone_stack[65536] __attribute__((aligned(16)));

static void on_alarm(int sig)
{
    (void)sig;
}

static int clone_main(void *arg)
{
    (void)arg;
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0 && fd != next_fd)
        dup2(fd, next_fd);
    _exit(0);
}

static int child(const char *fifo)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    next_fd = open("/dev/null", O_RDONLY);
    close(next_fd);
    pid_t c = clone(clone_main, clone_stack + sizeof clone_stack, CLONE_VM | CLONE_FILES | SIGCHLD, NULL);
    struct itimerval t = { { 0, 1000 }, { 0, 1000 } };
    setitimer(ITIMER_REAL, &t, NULL);
    int fd = open(fifo, O_RDONLY);
    int e = errno;
    if (c > 0) {
        kill(c, SIGKILL);
        waitpid(c, NULL, __WCLONE);
    }
    return fd < 0 && e == EINTR ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int n = atoi(argv[2]), eintr = 0, hung = 0, other = 0;
    for (int i = 0; i < n; i++) {
        unlink(argv[1]);
        if (mkfifo(argv[1], 0600) < 0) {
            perror("mkfifo");
            return 2;
        }
        pid_t pid = fork();
        if (pid == 0)
            _exit(child(argv[1]));
        int st = 0, polls = 0;
        while (waitpid(pid, &st, WNOHANG) == 0) {
            if (++polls > 1000) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                hung++;
                st = -1;
                break;
            }
            usleep(10000);
        }
        if (st == -1)
            continue;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            eintr++;
        else
            other++;
    }
    unlink(argv[1]);
    printf("%d eintr %d hung %d other %d\n", n, eintr, hung, other);
    return 0;
}
