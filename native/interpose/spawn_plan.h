/* posix_spawn file actions that open mount paths, done in the parent (spawn.c). */
#ifndef LDPFUSE_SPAWN_PLAN_H
#define LDPFUSE_SPAWN_PLAN_H
#include <spawn.h>

struct spawn_plan {
    int active;
    posix_spawn_file_actions_t fa;  /* the program's actions, mount opens made dup2s */
    int opened[64];                 /* fds opened here, closed after the spawn */
    int nopened;
    char *records;                  /* LDPFUSE_FDS records for the child's fd numbers */
    char *env_fds;
    char **env;
};

/* 0: nothing to change (use the program's actions); 1: use plan->fa, then
 * spawn_plan_done(); -1: posix_spawn must fail with errno (an open failed). */
#define SPAWN_HIDDEN __attribute__((visibility("hidden")))   /* not a libc name: not exported */
SPAWN_HIDDEN int spawn_plan_make(struct spawn_plan *plan, const posix_spawn_file_actions_t *fa);
/* env, with the records of the fds the plan hands the child */
SPAWN_HIDDEN char **spawn_plan_env(struct spawn_plan *plan, char **env);
SPAWN_HIDDEN void spawn_plan_done(struct spawn_plan *plan);

#endif
