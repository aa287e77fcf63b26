/* A vfork child that does what shells, gcc and Python's subprocess do between vfork and
 * exec, then the parent's view of its own state afterwards.
 *   vfork_child DIR PROG [ARGS...]
 * The child: umask(077), chdir(DIR), execv(PROG, ARGS). The parent, after waiting:
 * the child's status, its own cwd and umask (both unchanged by the child), and a stat of
 * a relative name in its cwd.
 *   vfork_child --stat PATH
 * The child: stat(PATH), and _exit with 0 or the errno. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: vfork_child DIR PROG [ARGS...]\n");
        return 2;
    }
    char before[4096];
    if (getcwd(before, sizeof before) == NULL)
        return 2;
    umask(022);
    pid_t pid = vfork();
    if (pid < 0) {
        perror("vfork");
        return 1;
    }
    if (pid == 0 && strcmp(argv[1], "--stat") == 0) {
        struct stat sb;
        _exit(stat(argv[2], &sb) == 0 ? 0 : errno);
    }
    if (pid == 0) {
        umask(077);
        if (chdir(argv[1]) < 0)
            _exit(100 + errno);
        execv(argv[2], argv + 2);
        _exit(50 + errno);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 1;
    fflush(stdout);
    printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    char after[4096];
    if (getcwd(after, sizeof after) == NULL)
        return 1;
    printf("parent cwd %s\n", strcmp(before, after) == 0 ? "unchanged" : after);
    mode_t m = umask(022);
    printf("parent umask %03o\n", (unsigned)m);
    struct stat sb;
    printf("parent stat f: %s\n", stat("f", &sb) == 0 ? "ok" : strerror(errno));
    return 0;
}
