/*
 * The exec side of the supervisor (docs/supervisor.md). A program the preload cannot
 * reach (statically linked: the loader loads nothing into it; Go: its runtime calls the
 * kernel itself) is served from outside:
 * right before its execve, this process installs a seccomp filter that turns the path
 * calls of supervisor/calls.h into user notifications (SECCOMP_RET_USER_NOTIF), hands
 * the filter's listener to the run's supervisor (ldpfuse-supervisor, which the launcher
 * started) over its socket, where it proved first that it holds the run's secret, and
 * execs. Every other call, and every
 * call of another architecture, is let through by the filter itself.
 *
 * LDPFUSE_SUPERVISE=auto supervises statically linked programs and Go programs (whose
 * runtime makes its own system calls), =all every program
 * (to measure what supervision costs: bench/supervise_cost.py); the launcher sets =auto
 * unless --no-supervise and names the socket in LDPFUSE_SUPERVISOR. A process already under a
 * listener (an ancestor was supervised: filters are inherited across fork and exec)
 * is covered: the kernel allows one listener per filter chain (EBUSY).
 *
 * Stack and raw system calls only: this runs in vfork children too.
 */
#include "../ldpfuse.h"
#include "../supervisor/calls.h"
#include "escape.h"
#include "supervise.h"
#include <elf.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/time.h>

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Does a note segment hold Go's build ID (name "Go", type 4: .note.go.buildid)? head: the
 * file's first bytes (got of them), where the notes of most programs lie. */
static int go_note(int fd, const Elf64_Phdr *ph, const unsigned char *head, size_t got)
{
    unsigned char own[4096];
    const unsigned char *buf = head + ph->p_offset;
    if (ph->p_filesz > sizeof own || ph->p_filesz < 12)
        return 0;
    if (ph->p_offset + ph->p_filesz > got) {
        if (syscall(SYS_pread64, fd, own, ph->p_filesz, (off_t)ph->p_offset) != (long)ph->p_filesz)
            return 0;
        buf = own;
    }
    for (size_t at = 0; at + 12 <= ph->p_filesz;) {
        Elf64_Nhdr nh;
        memcpy(&nh, buf + at, sizeof nh);
        size_t name = at + 12, desc = name + ((nh.n_namesz + 3) & ~3u);
        if ((nh.n_namesz == 3 || nh.n_namesz == 4) && name + 3 <= ph->p_filesz && memcmp(buf + name, "Go", 3) == 0 && nh.n_type == 4)
            return 1;
        at = desc + ((nh.n_descsz + 3) & ~3u);
    }
    return 0;
}

/* A program the preload cannot serve alone: an ELF executable without PT_INTERP
 * (statically linked: nothing loads us), or a Go program (its runtime makes its own system
 * calls, cgo or not). Set-ID programs are not: no_new_privs would drop what they run as.
 * Asked at every exec of the command: one read of the file's first page answers it for
 * most programs (the header, the program headers and the notes lie there). */
static int needs_supervision(const char *path)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int needs = 0;
    unsigned char head[4096] __attribute__((aligned(8)));
    Elf64_Ehdr eh;
    Elf64_Phdr phs[64];
    const Elf64_Phdr *ph = phs;
    struct stat st;
    long got = syscall(SYS_pread64, fd, head, sizeof head, 0);
    if (got >= (long)sizeof eh)
        memcpy(&eh, head, sizeof eh);
    size_t table = got >= (long)sizeof eh ? sizeof(Elf64_Phdr) * eh.e_phnum : 0;
    if (got >= (long)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum <= 64 &&
        syscall(SYS_fstat, fd, &st) == 0 && !(st.st_mode & (S_ISUID | S_ISGID)) &&
        (eh.e_phoff + table <= (size_t)got ? (memcpy(phs, head + eh.e_phoff, table), 1)
                                           : syscall(SYS_pread64, fd, phs, table, (off_t)eh.e_phoff) == (long)table)) {
        int interp = 0;
        for (int i = 0; i < eh.e_phnum; i++)
            interp |= ph[i].p_type == PT_INTERP;
        needs = !interp;
        for (int i = 0; i < eh.e_phnum && !needs; i++)
            needs = ph[i].p_type == PT_NOTE && go_note(fd, &ph[i], head, (size_t)got);
    }
    syscall(SYS_close, fd);
    return needs;
}

/* Calls made from at or above this address are let through: the mmap area, where the
 * loader maps shared libraries (libc, ld.so) and the vDSO lie (from 0x7exx... up, under the
 * kernel's default layout), while a statically linked or non-PIE program's code (0x400000)
 * and a PIE program's (0x55..., 0x56...) lie below. A dynamically linked program that
 * loaded the preload (every one the command starts) has its libc calls on mount paths
 * served in-process already: under a filter it inherited (the children of a supervised
 * shell, make or `go build`) they pay the filter's few instructions, not a trip to the
 * supervisor, and the calls its own code makes with inline `syscall` instructions (Go's
 * runtime, cgo or not) are trapped. docs/supervisor.md says what this leaves out. */
#define SV_LIBRARIES_FROM_HI 0x7000u    /* 0x7000_0000_0000 >> 32 */

/* The filter: x86-64 calls of the table made from a program's own code wait for the
 * supervisor, everything else runs. The call's number is looked at first: for every other
 * call the answer depends on nothing else, so the kernel's cache of constant answers
 * (Linux >= 5.11) lets it through without running the filter at all. */
static long install_filter(void)
{
    struct sock_filter f[10 + SV_NCALLS];
    unsigned n = 0;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (unsigned i = 0; i < SV_NCALLS; i++)    /* a match jumps past the ALLOW below */
        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)sv_calls[i].nr,
                                              (unsigned char)(SV_NCALLS - i), 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    /* the high half of the instruction pointer (little-endian: at offset + 4) */
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, SV_LIBRARIES_FROM_HI, 0, 1);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
    struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0 && errno == EACCES) {
        /* without CAP_SYS_ADMIN the kernel wants no_new_privs (the program is not set-ID:
         * needs_supervision() said so; its descendants keep it too: docs/supervisor.md) */
        syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    }
    return fd;
}

/* The secret, then one byte back: 1 = the supervisor will take a listener from us (our
 * uid, the run's secret). Asked before the filter is installed: it cannot be taken back. */
static int greet(int sock, const unsigned char *secret)
{
    if (syscall(SYS_sendto, sock, secret, SV_SECRET_LEN, MSG_NOSIGNAL, NULL, 0) != SV_SECRET_LEN)
        return -1;
    char ok = 0;
    return syscall(SYS_recvfrom, sock, &ok, 1, 0, NULL, NULL) == 1 && ok == 1 ? 0 : -1;
}

/* Hand the listener over (SCM_RIGHTS), then wait for the byte that says the supervisor
 * holds it. 0, or -1. */
static int hand_over(int sock, int listener)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    char one = 1;
    struct iovec iov = { &one, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &listener, sizeof(int));
    if (syscall(SYS_sendmsg, sock, &m, MSG_NOSIGNAL) != 1)
        return -1;
    char ok = 0;
    return syscall(SYS_recvfrom, sock, &ok, 1, 0, NULL, NULL) == 1 && ok == 1 ? 0 : -1;
}

/* The shadow (supervisor/shadow.c) of mount path abs: RUN_DIR/supervisor/INDEX/REST, INDEX
 * the mount's place in LDPFUSE_MOUNTPOINTS (the supervisor's order too). 0, or -1. */
static int shadow_of(const char *abs, char *out, size_t size)
{
    const char *rd = getenv("LDPFUSE_RUN_DIR");
    for (int i = 0; rd && *rd && i < ldp_nmounts; i++) {
        const struct mount *m = &ldp_mounts[i];
        if (strncmp(abs, m->point, m->len) == 0 && (abs[m->len] == '/' || abs[m->len] == '\0')) {
            int n = snprintf(out, size, "%s/supervisor/%d%s", rd, i, abs + m->len);
            return n > 0 && (size_t)n < size ? 0 : -1;
        }
    }
    return -1;
}

/* A program about to be supervised whose working directory is in a mount (ours: the
 * kernel's is elsewhere): the kernel's becomes the directory's shadow, which the
 * supervisor maps back to the mount path for the program's relative names, getcwd and
 * its preloaded children (cwd_init). Made here if need be (the supervisor fills it when it
 * is opened). A failed exec leaves the kernel's cwd there: ours stays the virtual one. */
static void enter_shadow_cwd(void)
{
    char sp[PATH_MAX];
    if (!ldp_cwd_virtual || ldp_cwd == NULL || shadow_of(ldp_cwd, sp, sizeof sp) < 0)
        return;
    for (char *p = sp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        syscall(SYS_mkdirat, AT_FDCWD, sp, 0700);
        *p = '/';
    }
    syscall(SYS_mkdirat, AT_FDCWD, sp, 0700);
    if (syscall(SYS_chdir, sp) != 0)
        ldp_log(LOG_WARNING, "%s: the shadow of the working directory %s cannot be entered (%s): a supervised "
                "program's relative names will not reach it", sp, ldp_cwd, strerror(errno));
}

int supervise_cwd_inherited(char *out, size_t size)
{
    const char *rd = getenv("LDPFUSE_RUN_DIR");
    char real[PATH_MAX];
    if (rd == NULL || *rd == '\0' || getenv("LDPFUSE_SUPERVISOR") == NULL ||
        syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) != 2 || syscall(SYS_getcwd, real, sizeof real) <= 0)
        return 0;
    /* a supervised parent that chdir'd into a mount itself: the supervisor left its
     * directory for us (supervisor/cwd.c), valid while the kernel's cwd is the one it saw */
    char name[PATH_MAX], buf[2 * PATH_MAX + 2];
    snprintf(name, sizeof name, "%s/supervisor/cwd/%d", rd, (int)syscall(SYS_getpid));
    int fd = (int)syscall(SYS_openat, AT_FDCWD, name, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
        syscall(SYS_close, fd);
        syscall(SYS_unlinkat, AT_FDCWD, name, 0);
        buf[n > 0 ? n : 0] = '\0';
        char *nl = strchr(buf, '\n');
        if (nl && strcmp(nl + 1, real) == 0 && buf[0] == '/' && (size_t)(nl - buf) < size) {
            memcpy(out, buf, (size_t)(nl - buf));
            out[nl - buf] = '\0';
            return 1;
        }
    }
    /* the kernel's cwd is a shadow: the mount path it stands for */
    size_t rl = strlen(rd);
    if (strncmp(real, rd, rl) != 0 || strncmp(real + rl, "/supervisor/", 12) != 0)
        return 0;
    char *end;
    const char *at = real + rl + 12;
    long i = strtol(at, &end, 10);
    if (end == at || i < 0 || i >= ldp_nmounts || (*end != '/' && *end != '\0'))
        return 0;
    int n = snprintf(out, size, "%s%s", ldp_mounts[i].point, end);
    return n > 0 && (size_t)n < size;
}

int supervise_exec(const char *path)
{
    const char *mode = getenv("LDPFUSE_SUPERVISE");
    const char *where = getenv("LDPFUSE_SUPERVISOR");
    const char *s = getenv("LDPFUSE_SECRET");
    if (mode == NULL || where == NULL || s == NULL || path == NULL || strlen(s) != 2 * SV_SECRET_LEN)
        return 0;
    int all = strcmp(mode, "all") == 0;
    /* every program: the launcher's command was supervised at its start (the supervisor's
     * exec role set LDPFUSE_SUPERVISED), and its filter came down to us */
    if (all && getenv("LDPFUSE_SUPERVISED") && syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) == 2) {
        enter_shadow_cwd();
        return 1;
    }
    if (!all && (strcmp(mode, "auto") != 0 || !needs_supervision(path)))
        return 0;
    int saved = errno;
    unsigned char secret[SV_SECRET_LEN];
    for (int i = 0; i < SV_SECRET_LEN; i++)
        secret[i] = (unsigned char)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
    /* reach the supervisor first: a filter cannot be taken back */
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(where) >= sizeof sa.sun_path)
        return 0;
    strcpy(sa.sun_path, where);
    int sock = (int)syscall(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct timeval tv = { 10, 0 };
    if (sock < 0 || syscall(SYS_setsockopt, sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        syscall(SYS_connect, sock, &sa, sizeof sa) < 0 || greet(sock, secret) < 0) {
        ldp_log(LOG_WARNING, "%s: the supervisor cannot be reached (%s): it runs unsupervised", path,
                strerror(errno));
        if (sock >= 0)
            syscall(SYS_close, sock);
        errno = saved;
        return 0;
    }
    int covered = 0;
    const char *pid = getenv("LDPFUSE_SUPERVISOR_PID");
    if (pid)    /* Yama's ptrace_scope=1: let the supervisor read and write our memory */
        syscall(SYS_prctl, PR_SET_PTRACER, (unsigned long)atol(pid), 0, 0, 0);
    long listener = install_filter();
    if (listener >= 0) {
        if (hand_over(sock, (int)listener) == 0)
            covered = 1;
        else    /* the filter is in place and nobody holds its listener: every trapped call
                 * of this process will fail with ENOSYS */
            ldp_log(LOG_ERROR, "%s: the supervisor did not take the listener: its path calls will fail "
                    "(ENOSYS)", path);
        syscall(SYS_close, listener);
    } else if (errno == EBUSY) {
        covered = 1;    /* an ancestor's listener covers us already */
    } else {
        ldp_log(LOG_WARNING, "%s: the seccomp filter could not be installed (%s): it runs unsupervised", path,
                strerror(errno));
    }
    syscall(SYS_close, sock);
    if (covered)
        enter_shadow_cwd();
    errno = saved;
    return covered;
}

char **supervise_spawn_argv(const char *path, char *const argv[], int search)
{
    const char *mode = getenv("LDPFUSE_SUPERVISE");
    const char *helper = getenv("LDPFUSE_SUPERVISOR_HELPER");
    if (mode == NULL || helper == NULL || helper[0] != '/' || path == NULL || *path == '\0' ||
        getenv("LDPFUSE_SUPERVISOR") == NULL)
        return NULL;
    int all = strcmp(mode, "all") == 0;
    if (!all && strcmp(mode, "auto") != 0)
        return NULL;
    if (all && getenv("LDPFUSE_SUPERVISED") && syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) == 2)
        return NULL;    /* covered already */
    size_t n = 0;
    while (argv && argv[n])
        n++;
    char **out = malloc(sizeof *out * (n + 4) + PATH_MAX);
    if (out == NULL)
        return NULL;
    char *found = (char *)(out + n + 4);
    if (strchr(path, '/') || !search) {
        snprintf(found, PATH_MAX, "%s", path);
    } else {    /* posix_spawnp of a bare name: the program PATH leads to, as execvp finds it */
        const char *dirs = getenv("PATH");
        found[0] = '\0';
        for (const char *d = dirs ? dirs : "/bin:/usr/bin"; d && !found[0];) {
            const char *e = strchr(d, ':');
            size_t len = e ? (size_t)(e - d) : strlen(d);
            int w = snprintf(found, PATH_MAX, "%.*s%s%s", (int)len, d, len ? "/" : "", path);
            if (w <= 0 || w >= PATH_MAX || syscall(SYS_faccessat, AT_FDCWD, found, X_OK) != 0)
                found[0] = '\0';
            d = e ? e + 1 : NULL;
        }
    }
    if (!found[0] || (!all && !needs_supervision(found))) {
        free(out);
        return NULL;
    }
    /* ldpfuse-supervisor exec-as PATH ARGV0 ARG...: its execv, through this library,
     * installs the filter (supervise_exec) in the child */
    out[0] = (char *)helper;
    out[1] = (char *)"exec-as";
    out[2] = found;
    out[3] = n > 0 ? argv[0] : found;
    for (size_t i = 1; i < n; i++)
        out[i + 3] = argv[i];
    out[n > 0 ? n + 3 : 4] = NULL;
    return out;
}
