/* A child that ended may have changed files this process has attributes of in its cache
 * (make waits for cc, then compares the times of what cc wrote): forget them. */
#include "../ldpfuse.h"
#include <sys/resource.h>
#include <sys/wait.h>

pid_t waitpid(pid_t pid, int *status, int options)
{
    pid_t r = REAL(waitpid)(pid, status, options);
    if (r > 0 && ldp_nmounts)
        attrcache_invalidate();
    return r;
}

pid_t wait(int *status)
{
    return waitpid(-1, status, 0);
}

pid_t wait3(int *status, int options, struct rusage *ru)
{
    pid_t r = REAL(wait4)(-1, status, options, ru);
    if (r > 0 && ldp_nmounts)
        attrcache_invalidate();
    return r;
}

pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
    pid_t r = REAL(wait4)(pid, status, options, ru);
    if (r > 0 && ldp_nmounts)
        attrcache_invalidate();
    return r;
}

int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
    int r = REAL(waitid)(idtype, id, info, options);
    if (r == 0 && ldp_nmounts)
        attrcache_invalidate();
    return r;
}
