/*
 * The audit library's environment: the variables the exec passed, as the process started
 * with them (/proc/self/environ; it has no libc, so no getenv). Read once, at the first
 * question: the new program's ldpfuse takes LDPFUSE_LIBRARY_FDS out of its environment
 * later, and a value here outlives it (the fds it names are then closed, which
 * library_fds.c sees by their device and inode).
 */
#include "sys.h"

static const char *const keys[] = { "LDPFUSE_MOUNTPOINTS=", "LDPFUSE_CWD=", "LDPFUSE_LIBRARY_FDS=" };
#define NKEYS (sizeof keys / sizeof keys[0])
#define VALUE_MAX 24576     /* > exec_libs.h's table, VPATH_MAX, the mount list */

static char values[NKEYS][VALUE_MAX];
static int set[NKEYS];
static char entry[VALUE_MAX];
static int read_once;

static void keep(size_t len)
{
    for (size_t k = 0; k < NKEYS; k++) {
        size_t kl = strlen(keys[k]);
        if (len >= kl && memcmp(entry, keys[k], kl) == 0) {
            memcpy(values[k], entry + kl, len - kl);
            values[k][len - kl] = '\0';
            set[k] = 1;
        }
    }
}

static void read_environ(void)
{
    read_once = 1;
    long fd = sys_open("/proc/self/environ");
    if (fd < 0)
        return;
    char buf[4096];
    size_t len = 0;
    int overflow = 0;
    long n;
    while ((n = sys_read((int)fd, buf, sizeof buf)) > 0)
        for (long i = 0; i < n; i++) {
            if (buf[i] == '\0') {
                if (!overflow)
                    keep(len);
                len = 0;
                overflow = 0;
            } else if (len < sizeof entry - 1) {
                entry[len++] = buf[i];
            } else {
                overflow = 1;   /* longer than any of ours */
            }
        }
    if (len > 0 && !overflow)
        keep(len);
    sys_close((int)fd);
}

const char *audit_env(const char *key)
{
    if (!read_once)
        read_environ();
    size_t kl = strlen(key);
    for (size_t k = 0; k < NKEYS; k++)
        if (memcmp(keys[k], key, kl) == 0 && keys[k][kl] == '=')
            return set[k] ? values[k] : NULL;
    return NULL;
}
