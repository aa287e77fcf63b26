/*
 * Lazy resolution of the real libc functions. Other libraries' constructors may call a
 * wrapped function before ours has run, so nothing is resolved up front.
 * real_resolve must never become a tail call into dlsym (the build passes
 * -fno-optimize-sibling-calls): dlsym(RTLD_NEXT) looks at its caller to know where "next" is.
 */
#include "real.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define REAL_SYM(name, ret, params) ret (*real_##name) params;
#include "real_symbols.h"
#undef REAL_SYM

__attribute__((noinline)) void *real_resolve(const char *name, void **slot)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p == NULL) {
        /* Only reachable when a program calls a function its libc lacks, which the
         * dynamic linker would already have refused; say which one instead of jumping to 0. */
        static const char msg[] = "ldpfuse: libc has no ";
        (void)!write(2, msg, sizeof msg - 1);
        (void)!write(2, name, strlen(name));
        (void)!write(2, "\n", 1);
        abort();
    }
    __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return p;
}
