/* O_TMPFILE in a directory D (the argument): an unnamed file that the directory does not
 * list, written and read back, then named by linkat(AT_EMPTY_PATH) and by
 * linkat(/proc/self/fd/N, AT_SYMLINK_FOLLOW); with O_EXCL it cannot be named; bad flags and
 * a missing directory fail. Run natively and in a mount, the outputs must match. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[4096];

static const char *in(const char *name)
{
    static char buf[2][4200];
    static int which;
    which ^= 1;
    snprintf(buf[which], sizeof buf[which], "%s/%s", dir, name);
    return buf[which];
}

static void said(const char *what, long r)
{
    if (r < 0)
        printf("%s: -1 %s\n", what, strerror(errno));
    else
        printf("%s: ok\n", what);
}

static void list(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    printf("  the directory lists %d names\n", n);
}

static void show(const char *name)
{
    char buf[128] = "";
    struct stat st;
    int fd = open(in(name), O_RDONLY);
    if (fd < 0 || fstat(fd, &st) < 0) {
        printf("  %s: %s\n", name, strerror(errno));
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    printf("  %s: mode %o links %d: %s", name, st.st_mode & 07777, (int)st.st_nlink, buf);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    umask(022);
    int fd = open(dir, O_TMPFILE | O_RDWR, 0640);
    said("O_TMPFILE O_RDWR", fd);
    list();
    said("write", write(fd, "unnamed bytes\n", 14));
    char buf[64] = "";
    said("pread", pread(fd, buf, sizeof buf - 1, 0));
    printf("  read back: %s", buf);
    struct stat st;
    fstat(fd, &st);
    printf("  fstat: size %lld mode %o links %d\n", (long long)st.st_size, st.st_mode & 07777, (int)st.st_nlink);
    said("linkat AT_EMPTY_PATH", linkat(fd, "", AT_FDCWD, in("named"), AT_EMPTY_PATH));
    list();
    show("named");
    close(fd);

    fd = open(dir, O_TMPFILE | O_WRONLY, 0600);
    said("O_TMPFILE O_WRONLY", fd);
    said("write", write(fd, "second\n", 7));
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    said("linkat /proc/self/fd/N", linkat(AT_FDCWD, self, AT_FDCWD, in("second"), AT_SYMLINK_FOLLOW));
    said("linkat onto an existing name", linkat(fd, "", AT_FDCWD, in("named"), AT_EMPTY_PATH));
    close(fd);
    show("second");

    fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL, 0600);
    said("O_TMPFILE O_EXCL", fd);
    said("linkat of an O_EXCL one", linkat(fd, "", AT_FDCWD, in("never"), AT_EMPTY_PATH));
    close(fd);
    said("O_TMPFILE O_RDONLY", open(dir, O_TMPFILE | O_RDONLY, 0600));
    said("O_TMPFILE in a missing directory", open(in("missing"), O_TMPFILE | O_RDWR, 0600));
    said("O_TMPFILE on a file", open(in("named"), O_TMPFILE | O_RDWR, 0600));
    list();
    printf("done\n");
    return 0;
}
