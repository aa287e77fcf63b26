/*
 * --stats: how many calls of each operation, and how their times spread, kept in a
 * histogram of a few hundred counters per operation (log-linear buckets: 8 per power of
 * two, so a quantile read from it is within 9% of the true one). Adding a sample is three
 * relaxed atomic adds: nothing to lock, cheap enough to leave on for a whole run.
 */
#ifndef LDPFUSE_STATS_H
#define LDPFUSE_STATS_H
#include <stdint.h>

#define STATS_SUB 8                 /* buckets per power of two */
#define STATS_BUCKETS (64 * STATS_SUB)

struct op_stats {
    uint64_t count;
    uint64_t total_ns;
    uint64_t hist[STATS_BUCKETS];
};

static inline unsigned stats_bucket(uint64_t ns)
{
    if (ns < STATS_SUB)
        return (unsigned)ns;
    unsigned top = 63 - (unsigned)__builtin_clzll(ns);          /* ns in [2^top, 2^(top+1)) */
    unsigned sub = (unsigned)((ns >> (top - 3)) & (STATS_SUB - 1));  /* the next 3 bits */
    unsigned b = (top - 2) * STATS_SUB + sub;
    return b < STATS_BUCKETS ? b : STATS_BUCKETS - 1;
}

/* The smallest value of bucket b (what a quantile reports: a lower bound within 1/8). */
static inline uint64_t stats_bucket_floor(unsigned b)
{
    if (b < STATS_SUB)
        return b;
    unsigned top = b / STATS_SUB + 2, sub = b % STATS_SUB;
    return ((uint64_t)STATS_SUB + sub) << (top - 3);
}

static inline void stats_add(struct op_stats *s, uint64_t ns)
{
    __atomic_add_fetch(&s->count, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->total_ns, ns, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->hist[stats_bucket(ns)], 1, __ATOMIC_RELAXED);
}

/* The q-quantile (0 < q <= 1) of what s holds, in ns; 0 if it holds nothing. */
static inline uint64_t stats_quantile(const struct op_stats *s, double q)
{
    uint64_t n = __atomic_load_n(&s->count, __ATOMIC_RELAXED), seen = 0;
    if (n == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)n + 0.5);
    if (rank < 1)
        rank = 1;
    for (unsigned b = 0; b < STATS_BUCKETS; b++) {
        seen += __atomic_load_n(&s->hist[b], __ATOMIC_RELAXED);
        if (seen >= rank)
            return stats_bucket_floor(b);
    }
    return stats_bucket_floor(STATS_BUCKETS - 1);
}
#endif
