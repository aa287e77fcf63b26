/* stat() of names in many directories, as filebench's file sets spread them (argv[2]
 * directories a/b of one file each, argv[3] rounds over them in a scrambled order), in a
 * program with a signal handler installed (Python and filebench have one). Made by the
 * program itself, before the stats. tests/test_backing.py counts its system calls. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void on_usr1(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    char p[4096];
    if (argc < 4)
        return 2;
    int dirs = atoi(argv[2]), rounds = atoi(argv[3]);
    for (int d = 0; d < dirs; d++) {
        snprintf(p, sizeof p, "%s/d%02d", argv[1], d / 20);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/d%02d/e%03d", argv[1], d / 20, d);
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return 3;
        snprintf(p, sizeof p, "%s/d%02d/e%03d/f", argv[1], d / 20, d);
        int fd = open(p, O_WRONLY | O_CREAT, 0644);
        if (fd < 0)
            return 3;
        close(fd);
    }
    signal(SIGUSR1, on_usr1);
    long failed = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < dirs; i++) {
            int d = (int)((i * 7919L + r) % dirs);
            struct stat st;
            snprintf(p, sizeof p, "%s/d%02d/e%03d/f", argv[1], d / 20, d);
            failed += stat(p, &st) != 0 || !S_ISREG(st.st_mode);
        }
    printf("failed %ld\n", failed);
    return 0;
}
