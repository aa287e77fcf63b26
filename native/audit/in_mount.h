/* The audit library's view of the mounts (in_mount.c). */
#ifndef LDPFUSE_AUDIT_IN_MOUNT_H
#define LDPFUSE_AUDIT_IN_MOUNT_H

/* 1 if name (absolute, or relative to the working directory the exec passed) is in a mount */
__attribute__((visibility("hidden"))) int audit_in_mount(const char *name);

#endif
