/* Lexical path normalisation: what the kernel would do with ".", ".." and "//" if no
 * component were a symlink. Symlinks inside a mount are followed by vfs_follow. */
#include "../ldpfuse.h"
#include <string.h>

int path_normalize(const char *base, const char *rel, char *out, size_t size, int *trailing)
{
    return path_normalize_probe(base, rel, out, size, trailing, NULL, NULL);
}

int path_normalize_probe(const char *base, const char *rel, char *out, size_t size, int *trailing,
                         int (*probe)(const char *), int *visited)
{
    size_t n = 0;
    if (size < 2)
        return -1;
    if (rel[0] != '/') {
        size_t bl = strlen(base);
        if (bl >= size)
            return -1;
        memcpy(out, base, bl);
        n = bl;
        while (n > 1 && out[n - 1] == '/')
            n--;
        if (n == 1 && out[0] == '/')
            n = 0;              /* root is the empty prefix */
        if (probe && n > 0) {
            out[n] = '\0';
            *visited = probe(out);
        }
    }
    const char *p = rel;
    size_t rl = strlen(rel);
    if (trailing)
        *trailing = rl > 0 && (rel[rl - 1] == '/' ||
                               (rl >= 2 && rel[rl - 1] == '.' && rel[rl - 2] == '/') ||
                               (rl >= 3 && rel[rl - 1] == '.' && rel[rl - 2] == '.' && rel[rl - 3] == '/') ||
                               strcmp(rel, ".") == 0 || strcmp(rel, "..") == 0);
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        size_t cl = (size_t)(e - p);
        if (cl == 1 && p[0] == '.') {
            /* nothing */
        } else if (cl == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--;            /* drop the '/' too */
        } else {
            if (n + 1 + cl >= size)
                return -1;
            out[n++] = '/';
            memcpy(out + n, p, cl);
            n += cl;
            if (probe && !*visited) {
                out[n] = '\0';
                *visited = probe(out);
            }
        }
        p = e;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    return (int)n;
}

/* The kernel will not remove or rename a path whose last component is "." or "..": 1 for
 * ".", 2 for "..", 0 for a name (trailing slashes ignored, as the kernel ignores them). */
int path_last_is_dot(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/')
        s--;
    size_t cl = n - s;
    if (cl == 1 && path[s] == '.')
        return 1;
    if (cl == 2 && path[s] == '.' && path[s + 1] == '.')
        return 2;
    return 0;
}
