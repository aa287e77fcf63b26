/* Log lines go to LDPFUSE_LOG_FILE (opened per line, so no fd of ours lives in the
 * program's table) or to stderr, through the real libc functions only. */
#include "ldpfuse.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int ldp_log_level = LOG_WARNING;

void ldp_log_raw(const char *msg, size_t len)
{
    const char *file = getenv("LDPFUSE_LOG_FILE");
    int saved = errno;
    guard_enter();
    int fd = 2, opened = 0;
    if (file && *file) {
        int f = REAL(open)(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (f >= 0) {
            fd = f;
            opened = 1;
        }
    }
    while (len > 0) {
        ssize_t w = write(fd, msg, len);
        if (w <= 0)
            break;
        msg += w;
        len -= (size_t)w;
    }
    if (opened)
        REAL(close)(fd);
    guard_leave();
    errno = saved;
}

void ldp_log(int level, const char *fmt, ...)
{
    if (level > ldp_log_level)
        return;
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "ldpfuse[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
    buf[len++] = '\n';
    ldp_log_raw(buf, len);
}
