/* posix_spawn and posix_spawnp with file actions that open paths in a directory D (given
 * as the argument): stdin from a file, stdout to a new file, stderr appended, a relative
 * path after a chdir action to D's parent, and opens that must fail. Prints what each spawn
 * answered and what the child wrote; run natively and in a mount, the outputs must match. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static char dir[4096];

static const char *in(const char *name)
{
    static char buf[4][4200];
    static int which;
    which = (which + 1) % 4;
    snprintf(buf[which], sizeof buf[which], "%s/%s", dir, name);
    return buf[which];
}

static void spawn(const char *what, int usep, const char *prog, char *const argv[],
                  posix_spawn_file_actions_t *fa)
{
    pid_t pid;
    int r = usep ? posix_spawnp(&pid, prog, fa, NULL, argv, environ)
                 : posix_spawn(&pid, prog, fa, NULL, argv, environ);
    if (r != 0) {
        printf("%s: posix_spawn %s\n", what, strerror(r));
        return;
    }
    int status;
    waitpid(pid, &status, 0);
    printf("%s: exit %d\n", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void show(const char *name)
{
    char buf[512];
    FILE *f = fopen(in(name), "r");
    if (f == NULL) {
        printf("  %s: %s\n", name, strerror(errno));
        return;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    printf("  %s: %s", name, buf);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    FILE *f = fopen(in("input"), "w");
    fputs("line one\nline two\n", f);
    fclose(f);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in("input"), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, in("out"), O_WRONLY | O_CREAT | O_TRUNC, 0640);
    posix_spawn_file_actions_addopen(&fa, 2, in("err"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    char *cat[] = { "cat", "-", "/nonexistent-file", NULL };
    spawn("cat stdin to a new file", 0, "/bin/cat", cat, &fa);
    spawn("again, appending to err", 1, "cat", cat, &fa);
    posix_spawn_file_actions_destroy(&fa);
    show("out");
    show("err");

    /* a relative path after a chdir action to D's parent */
    char parent[4096], base[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    snprintf(base, sizeof base, "%s", dir);
    char rel[4300];
    snprintf(rel, sizeof rel, "%s/input", basename(base));
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, dirname(parent));
    posix_spawn_file_actions_addopen(&fa, 0, rel, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, in("counted"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char *wc[] = { "wc", "-l", NULL };
    spawn("wc -l of a relative path after chdir", 1, "wc", wc, &fa);
    posix_spawn_file_actions_destroy(&fa);
    show("counted");

    /* opens that fail: the spawn fails with the open's errno */
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in("missing"), O_RDONLY, 0);
    spawn("stdin from a missing file", 0, "/bin/cat", cat, &fa);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, in("out"), O_WRONLY | O_CREAT | O_EXCL, 0644);
    spawn("O_EXCL on an existing file", 0, "/bin/cat", cat, &fa);
    posix_spawn_file_actions_destroy(&fa);

    /* a dup2 and a close among the actions keep their places */
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 5, in("both"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 5, 1);
    posix_spawn_file_actions_adddup2(&fa, 5, 2);
    posix_spawn_file_actions_addclose(&fa, 5);
    char *sh[] = { "sh", "-c", "echo to stdout; echo to stderr >&2; ls /proc/self/fd/5 2>/dev/null || echo fd 5 closed", NULL };
    spawn("sh with stdout and stderr to one file", 0, "/bin/sh", sh, &fa);
    posix_spawn_file_actions_destroy(&fa);
    show("both");
    printf("done\n");
    return 0;
}
