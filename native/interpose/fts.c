/* fts(3) for trees that reach into a mount. glibc's fts reads directories with its private
 * getdents and fstatat calls, which never reach our wrappers, so on a virtual directory it
 * finds nothing. When a root given to fts_open is inside a mount, or is an ancestor of a
 * mount point, the whole walk is done here on the public functions (opendir, readdir,
 * lstat, stat), which reach our wrappers; every other walk goes to glibc's fts.
 *
 * This follows glibc's fts.c (4.4BSD) step for step so that programs see the same entries
 * in the same order with the same fts_info, fts_errno and errno, with one difference: the
 * walk never changes the working directory (every walk behaves as FTS_NOCHDIR) and every
 * entry carries its own full path in fts_path and fts_accpath, where glibc shares one
 * buffer. Entries are glibc's own FTSENT layout, allocated with the name (and a stat
 * buffer and the path) after them, and freed at the same points glibc frees them. */
#include "../ldpfuse.h"
#include <fts.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The 64-bit names share the code: on LP64 the layouts are the same. */
_Static_assert(sizeof(FTS) == sizeof(FTS64), "FTS64 layout");
_Static_assert(sizeof(FTSENT) == sizeof(FTSENT64), "FTSENT64 layout");
_Static_assert(offsetof(FTSENT, fts_statp) == offsetof(FTSENT64, fts_statp), "FTSENT64 layout");
_Static_assert(offsetof(FTSENT, fts_name) == offsetof(FTSENT64, fts_name), "FTSENT64 layout");
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64 layout");
_Static_assert(sizeof(ino_t) == sizeof(ino64_t), "ino64_t");

#define ISSET(sp, opt) ((sp)->fts_options & (opt))
#define SET(sp, opt) ((sp)->fts_options |= (opt))
#define CLR(sp, opt) ((sp)->fts_options &= ~(opt))
#define ISDOT(a) ((a)[0] == '.' && (!(a)[1] || ((a)[1] == '.' && !(a)[2])))

/* fts_build's callers */
enum { BCHILD = 1, BNAMES = 2, BREAD = 3 };

/* ---- the streams that are ours */
static pthread_mutex_t ours_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork: taken across it (interpose/init.c), so the child never finds the table half
 * written by a thread it does not have; nothing else is locked under it */
void fts_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&ours_lock);
    else
        pthread_mutex_unlock(&ours_lock);
}
static FTS **ours;
static size_t nours, ours_cap;

static int is_ours(const FTS *sp)
{
    if (LIKELY(__atomic_load_n(&nours, __ATOMIC_ACQUIRE) == 0) || sp == NULL)
        return 0;
    int found = 0;
    pthread_mutex_lock(&ours_lock);
    for (size_t i = 0; i < nours; i++)
        if (ours[i] == sp) {
            found = 1;
            break;
        }
    pthread_mutex_unlock(&ours_lock);
    return found;
}

static int ours_add(FTS *sp)
{
    int ok = 1;
    pthread_mutex_lock(&ours_lock);
    if (nours == ours_cap) {
        size_t cap = ours_cap ? ours_cap * 2 : 8;
        FTS **n = realloc(ours, cap * sizeof *n);
        if (n == NULL)
            ok = 0;
        else
            ours = n, ours_cap = cap;
    }
    if (ok) {
        ours[nours] = sp;
        __atomic_store_n(&nours, nours + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ours_lock);
    return ok;
}

static void ours_remove(FTS *sp)
{
    pthread_mutex_lock(&ours_lock);
    for (size_t i = 0; i < nours; i++)
        if (ours[i] == sp) {
            ours[i] = ours[nours - 1];
            __atomic_store_n(&nours, nours - 1, __ATOMIC_RELEASE);
            break;
        }
    pthread_mutex_unlock(&ours_lock);
}

/* ---- should this walk be ours? */
static int reaches_mount(const char *root)
{
    struct vpath vp;
    const char *p = root;
    if (vfs_lookup(AT_FDCWD, &p, &vp))
        return 1;
    if (ldp_nmounts == 0 || ldp_guard || p == NULL || p[0] == '\0')
        return 0;
    /* an ancestor of a mount point: glibc would see only the directory standing in for it */
    char norm[PATH_MAX];
    const char *base = p[0] == '/' ? "/" : ldp_cwd;
    if (base == NULL || path_normalize(base, p, norm, sizeof norm, NULL) < 0)
        return 0;
    size_t nl = strlen(norm);
    for (int i = 0; i < ldp_nmounts; i++) {
        const struct mount *m = &ldp_mounts[i];
        if ((nl == 1 && norm[0] == '/') ||
            (m->len > nl && strncmp(m->point, norm, nl) == 0 && m->point[nl] == '/'))
            return 1;
    }
    return 0;
}

/* ---- entries: the FTSENT, its name, a stat buffer and its full path in one block */
static FTSENT *ent_alloc(const char *name, size_t namelen, const char *dir, size_t dirlen, int child)
{
    size_t pathlen = child ? dirlen + 1 + namelen : namelen;
    size_t statoff = offsetof(FTSENT, fts_name) + namelen + 1;
    statoff = (statoff + 15) & ~(size_t)15;
    size_t pathoff = statoff + sizeof(struct stat);
    size_t len = pathoff + pathlen + 1;
    if (len < sizeof(FTSENT))
        len = sizeof(FTSENT);
    FTSENT *p = calloc(1, len);
    if (p == NULL)
        return NULL;
    memcpy(p->fts_name, name, namelen);
    p->fts_name[namelen] = '\0';
    p->fts_namelen = (unsigned short)namelen;
    p->fts_statp = (struct stat *)((char *)p + statoff);
    char *path = (char *)p + pathoff;
    if (child) {
        memcpy(path, dir, dirlen);
        path[dirlen] = '/';
        memcpy(path + dirlen + 1, name, namelen);
    } else {
        memcpy(path, name, namelen);
    }
    path[pathlen] = '\0';
    p->fts_path = p->fts_accpath = path;
    p->fts_pathlen = (unsigned short)pathlen;
    p->fts_instr = FTS_NOINSTR;
    return p;
}

static void lfree(FTSENT *head)
{
    while (head) {
        FTSENT *p = head;
        head = head->fts_link;
        free(p);
    }
}

/* where a child's name goes after its parent's path: no doubled '/' after "dir/" */
static size_t nappend(const FTSENT *p)
{
    return p->fts_pathlen > 0 && p->fts_path[p->fts_pathlen - 1] == '/' ? p->fts_pathlen - 1u
                                                                        : p->fts_pathlen;
}

static unsigned short fts_stat_ent(FTS *sp, FTSENT *p, int follow)
{
    struct stat *sbp = p->fts_statp;
    if (ISSET(sp, FTS_LOGICAL) || follow) {
        if (stat(p->fts_accpath, sbp) != 0) {
            int saved = errno;
            if (lstat(p->fts_accpath, sbp) == 0) {
                errno = 0;
                return FTS_SLNONE;
            }
            p->fts_errno = saved;
            memset(sbp, 0, sizeof *sbp);
            return FTS_NS;
        }
    } else if (lstat(p->fts_accpath, sbp) != 0) {
        p->fts_errno = errno;
        memset(sbp, 0, sizeof *sbp);
        return FTS_NS;
    }
    p->fts_dev = sbp->st_dev;
    p->fts_ino = sbp->st_ino;
    p->fts_nlink = sbp->st_nlink;
    if (S_ISDIR(sbp->st_mode)) {
        if (ISDOT(p->fts_name))
            return FTS_DOT;
        for (FTSENT *t = p->fts_parent; t && t->fts_level >= FTS_ROOTLEVEL; t = t->fts_parent)
            if (p->fts_ino == t->fts_ino && p->fts_dev == t->fts_dev) {
                p->fts_cycle = t;
                return FTS_DC;
            }
        return FTS_D;
    }
    if (S_ISLNK(sbp->st_mode))
        return FTS_SL;
    if (S_ISREG(sbp->st_mode))
        return FTS_F;
    return FTS_DEFAULT;
}

static FTSENT *fts_sort_list(FTS *sp, FTSENT *head, int nitems)
{
    if (nitems > sp->fts_nitems) {
        FTSENT **a = realloc(sp->fts_array, (size_t)(nitems + 40) * sizeof *a);
        if (a == NULL)
            return head;    /* unsorted, as glibc does */
        sp->fts_array = a;
        sp->fts_nitems = nitems + 40;
    }
    FTSENT **ap = sp->fts_array;
    for (FTSENT *p = head; p; p = p->fts_link)
        *ap++ = p;
    qsort(sp->fts_array, (size_t)nitems, sizeof(FTSENT *), sp->fts_compar);
    ap = sp->fts_array;
    head = *ap;
    for (int i = 1; i < nitems; i++, ap++)
        ap[0]->fts_link = ap[1];
    ap[0]->fts_link = NULL;
    return head;
}

static FTSENT *fts_build(FTS *sp, int type)
{
    FTSENT *cur = sp->fts_cur;
    DIR *dirp = opendir(cur->fts_accpath);
    if (dirp == NULL) {
        if (type == BREAD) {
            cur->fts_info = FTS_DNR;
            cur->fts_errno = errno;
        }
        return NULL;
    }
    /* FTS_NOSTAT: a physical walk need not stat what readdir says is not a directory */
    int nostat = type != BNAMES && ISSET(sp, FTS_NOSTAT) && ISSET(sp, FTS_PHYSICAL);
    size_t len = nappend(cur);
    short level = (short)(cur->fts_level + 1);
    FTSENT *head = NULL, *tail = NULL;
    int nitems = 0;
    struct dirent *dp;
    int rderr;
    for (;;) {
        errno = 0;
        if ((dp = readdir(dirp)) == NULL) {
            rderr = errno;
            break;
        }
        if (!ISSET(sp, FTS_SEEDOT) && ISDOT(dp->d_name))
            continue;
        size_t namelen = strlen(dp->d_name);
        int err = 0;
        if (len + 1 + namelen >= USHRT_MAX)
            err = ENAMETOOLONG;
        FTSENT *p = err ? NULL : ent_alloc(dp->d_name, namelen, cur->fts_path, len, 1);
        if (p == NULL) {
            if (!err)
                err = errno;
            lfree(head);
            closedir(dirp);
            cur->fts_info = FTS_ERR;
            SET(sp, FTS_STOP);
            errno = err;
            return NULL;
        }
        p->fts_level = level;
        p->fts_parent = cur;
        if (type == BNAMES ||
            (nostat && dp->d_type != DT_DIR && dp->d_type != DT_UNKNOWN)) {
            p->fts_info = FTS_NSOK;
        } else {
            p->fts_info = fts_stat_ent(sp, p, 0);
        }
        p->fts_link = NULL;
        if (head == NULL)
            head = tail = p;
        else
            tail->fts_link = p, tail = p;
        nitems++;
    }
    closedir(dirp);
    /* A file system may open any directory and refuse only to list it (the kernel checks
     * permissions at open time, a FUSE-style FS at readdir): the same as failing to open. */
    if (nitems == 0 && rderr != 0) {
        if (type == BREAD) {
            cur->fts_info = FTS_DNR;
            cur->fts_errno = rderr;
        }
        errno = rderr;
        return NULL;
    }
    if (nitems == 0) {
        if (type == BREAD)
            cur->fts_info = FTS_DP;
        else
            errno = 0;      /* fts_children: an empty directory, not an error */
        return NULL;
    }
    if (sp->fts_compar && nitems > 1)
        head = fts_sort_list(sp, head, nitems);
    return head;
}

/* make a root the current entry: fts_name becomes its last component */
static void fts_load(FTS *sp, FTSENT *p)
{
    char *cp = strrchr(p->fts_name, '/');
    if (cp && (cp != p->fts_name || cp[1])) {
        size_t len = strlen(++cp);
        memmove(p->fts_name, cp, len + 1);
        p->fts_namelen = (unsigned short)len;
    }
    sp->fts_dev = p->fts_dev;
    sp->fts_path = p->fts_path;
}

/* ---- the five calls, on streams that are ours */
static FTS *my_open(char *const *argv, int options, int (*compar)(const FTSENT **, const FTSENT **))
{
    if (options & ~FTS_OPTIONMASK) {
        errno = EINVAL;
        return NULL;
    }
    FTS *sp = calloc(1, sizeof *sp);
    if (sp == NULL)
        return NULL;
    sp->fts_compar = (int (*)(const void *, const void *))compar;
    /* the working directory is never changed */
    sp->fts_options = options | FTS_NOCHDIR;
    sp->fts_rfd = -1;
    FTSENT *parent = ent_alloc("", 0, NULL, 0, 0), *root = NULL, *tmp = NULL;
    if (parent == NULL)
        goto fail;
    parent->fts_level = FTS_ROOTPARENTLEVEL;
    int nitems = 0;
    for (; *argv != NULL; argv++, nitems++) {
        size_t len = strlen(*argv);
        if (len == 0) {
            errno = ENOENT;
            goto fail_roots;
        }
        if (len >= USHRT_MAX) {
            errno = ENAMETOOLONG;
            goto fail_roots;
        }
        FTSENT *p = ent_alloc(*argv, len, NULL, 0, 0);
        if (p == NULL)
            goto fail_roots;
        p->fts_level = FTS_ROOTLEVEL;
        p->fts_parent = parent;
        p->fts_info = fts_stat_ent(sp, p, ISSET(sp, FTS_COMFOLLOW));
        /* roots "." and ".." are real directories */
        if (p->fts_info == FTS_DOT)
            p->fts_info = FTS_D;
        if (compar) {
            p->fts_link = root;
            root = p;
        } else {
            p->fts_link = NULL;
            if (root == NULL)
                tmp = root = p;
            else
                tmp->fts_link = p, tmp = p;
        }
    }
    if (compar && nitems > 1)
        root = fts_sort_list(sp, root, nitems);
    /* a dummy current entry, "just finished", whose next is the first root */
    sp->fts_cur = ent_alloc("", 0, NULL, 0, 0);
    if (sp->fts_cur == NULL)
        goto fail_roots;
    sp->fts_cur->fts_link = root;
    sp->fts_cur->fts_info = FTS_INIT;
    sp->fts_cur->fts_level = FTS_ROOTLEVEL;     /* fts_close walks from it to the roots */
    sp->fts_cur->fts_parent = parent;
    if (!ours_add(sp)) {
        free(sp->fts_cur);
        goto fail_roots;
    }
    return sp;

fail_roots:;
    int saved = errno;
    lfree(root);
    free(parent);
    free(sp->fts_array);
    free(sp);
    errno = saved;
    return NULL;
fail:
    free(sp);
    return NULL;
}

static FTSENT *my_read(FTS *sp)
{
    FTSENT *p, *tmp;
    if (sp->fts_cur == NULL || ISSET(sp, FTS_STOP))
        return NULL;
    p = sp->fts_cur;
    int instr = p->fts_instr;
    p->fts_instr = FTS_NOINSTR;

    /* any entry may be visited again: stat it again */
    if (instr == FTS_AGAIN) {
        p->fts_info = fts_stat_ent(sp, p, 0);
        return p;
    }
    /* follow a symlink (FTS_SLNONE too, so the program can see it and recover) */
    if (instr == FTS_FOLLOW && (p->fts_info == FTS_SL || p->fts_info == FTS_SLNONE)) {
        p->fts_info = fts_stat_ent(sp, p, 1);
        return p;
    }

    if (p->fts_info == FTS_D) {
        /* skipped, or across a device with FTS_XDEV: the postorder visit at once */
        if (instr == FTS_SKIP || (ISSET(sp, FTS_XDEV) && p->fts_dev != sp->fts_dev)) {
            if (sp->fts_child) {
                lfree(sp->fts_child);
                sp->fts_child = NULL;
            }
            p->fts_info = FTS_DP;
            return p;
        }
        /* fts_children read only the names: read them again, with stat */
        if (sp->fts_child != NULL && ISSET(sp, FTS_NAMEONLY)) {
            CLR(sp, FTS_NAMEONLY);
            lfree(sp->fts_child);
            sp->fts_child = NULL;
        }
        if (sp->fts_child == NULL && (sp->fts_child = fts_build(sp, BREAD)) == NULL) {
            if (ISSET(sp, FTS_STOP))
                return NULL;
            return p;       /* empty (FTS_DP) or unreadable (FTS_DNR) */
        }
        p = sp->fts_child;
        sp->fts_child = NULL;
        sp->fts_cur = p;
        sp->fts_path = p->fts_path;
        return p;
    }

next:
    tmp = p;
    if ((p = p->fts_link) != NULL) {
        sp->fts_cur = p;
        free(tmp);
        if (p->fts_level == FTS_ROOTLEVEL) {
            fts_load(sp, p);
            return p;
        }
        if (p->fts_instr == FTS_SKIP)
            goto next;
        if (p->fts_instr == FTS_FOLLOW) {
            p->fts_info = fts_stat_ent(sp, p, 1);
            p->fts_instr = FTS_NOINSTR;
        }
        sp->fts_path = p->fts_path;
        return p;
    }

    /* up to the parent */
    p = tmp->fts_parent;
    sp->fts_cur = p;
    free(tmp);
    if (p->fts_level == FTS_ROOTPARENTLEVEL) {
        /* done: errno 0 tells the end from an error */
        free(p);
        errno = 0;
        sp->fts_path = NULL;
        return sp->fts_cur = NULL;
    }
    sp->fts_path = p->fts_path;
    p->fts_info = p->fts_errno ? FTS_ERR : FTS_DP;
    return p;
}

static FTSENT *my_children(FTS *sp, int instr)
{
    if (instr != 0 && instr != FTS_NAMEONLY) {
        errno = EINVAL;
        return NULL;
    }
    FTSENT *p = sp->fts_cur;
    errno = 0;
    if (p == NULL || ISSET(sp, FTS_STOP))
        return NULL;
    /* before the first fts_read: the roots */
    if (p->fts_info == FTS_INIT)
        return p->fts_link;
    if (p->fts_info != FTS_D)
        return NULL;
    if (sp->fts_child != NULL)
        lfree(sp->fts_child);
    if (instr == FTS_NAMEONLY) {
        SET(sp, FTS_NAMEONLY);
        instr = BNAMES;
    } else {
        CLR(sp, FTS_NAMEONLY);
        instr = BCHILD;
    }
    return sp->fts_child = fts_build(sp, instr);
}

static int my_close(FTS *sp)
{
    ours_remove(sp);
    if (sp->fts_cur) {
        FTSENT *p, *freep;
        for (p = sp->fts_cur; p->fts_level >= FTS_ROOTLEVEL;) {
            freep = p;
            p = p->fts_link != NULL ? p->fts_link : p->fts_parent;
            free(freep);
        }
        free(p);
    }
    lfree(sp->fts_child);
    free(sp->fts_array);
    free(sp);
    return 0;
}

/* ---- the exported names */
static int any_root_reaches_mount(char *const *argv)
{
    if (LIKELY(ldp_nmounts == 0) || ldp_guard || argv == NULL)
        return 0;
    for (char *const *a = argv; *a; a++)
        if (reaches_mount(*a))
            return 1;
    return 0;
}

FTS *fts_open(char *const *argv, int options, int (*compar)(const FTSENT **, const FTSENT **))
{
    if (LIKELY(!any_root_reaches_mount(argv)))
        return REAL(fts_open)(argv, options, compar);
    return my_open(argv, options, compar);
}

FTSENT *fts_read(FTS *sp)
{
    if (LIKELY(!is_ours(sp)))
        return REAL(fts_read)(sp);
    return my_read(sp);
}

FTSENT *fts_children(FTS *sp, int instr)
{
    if (LIKELY(!is_ours(sp)))
        return REAL(fts_children)(sp, instr);
    return my_children(sp, instr);
}

int fts_set(FTS *sp, FTSENT *p, int instr)
{
    if (LIKELY(!is_ours(sp)))
        return REAL(fts_set)(sp, p, instr);
    if (instr != 0 && instr != FTS_AGAIN && instr != FTS_FOLLOW && instr != FTS_NOINSTR &&
        instr != FTS_SKIP) {
        errno = EINVAL;
        return 1;
    }
    p->fts_instr = (unsigned short)instr;
    return 0;
}

int fts_close(FTS *sp)
{
    if (LIKELY(!is_ours(sp)))
        return REAL(fts_close)(sp);
    return my_close(sp);
}

FTS64 *fts64_open(char *const *argv, int options, int (*compar)(const FTSENT64 **, const FTSENT64 **))
{
    if (LIKELY(!any_root_reaches_mount(argv)))
        return REAL(fts64_open)(argv, options, compar);
    return (FTS64 *)my_open(argv, options, (int (*)(const FTSENT **, const FTSENT **))compar);
}

FTSENT64 *fts64_read(FTS64 *sp)
{
    if (LIKELY(!is_ours((FTS *)sp)))
        return REAL(fts64_read)(sp);
    return (FTSENT64 *)my_read((FTS *)sp);
}

FTSENT64 *fts64_children(FTS64 *sp, int instr)
{
    if (LIKELY(!is_ours((FTS *)sp)))
        return REAL(fts64_children)(sp, instr);
    return (FTSENT64 *)my_children((FTS *)sp, instr);
}

int fts64_set(FTS64 *sp, FTSENT64 *p, int instr)
{
    if (LIKELY(!is_ours((FTS *)sp)))
        return REAL(fts64_set)(sp, p, instr);
    return fts_set((FTS *)sp, (FTSENT *)p, instr);
}

int fts64_close(FTS64 *sp)
{
    if (LIKELY(!is_ours((FTS *)sp)))
        return REAL(fts64_close)(sp);
    return my_close((FTS *)sp);
}
