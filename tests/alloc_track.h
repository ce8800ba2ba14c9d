/* A tracking allocator for tests of the allocation hook (nabla/device.h):
 * live blocks in an open-addressing set, so a test can see leaks (n_live)
 * and frees of blocks it never handed out (bad_frees). The including file
 * defines should_fail(k), asked before the k-th allocation (from 0, counted
 * in n_allocs), to make that allocation fail. */
#ifndef NABLA_TEST_ALLOC_TRACK_H
#define NABLA_TEST_ALLOC_TRACK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "nabla/device.h"

#define SLOTS (1 << 20)
static void **live;
static long n_live, n_allocs, bad_frees;

static bool should_fail(long k);

static size_t slot_of(const void *p) { return ((uintptr_t)p >> 4) * 2654435761u & (SLOTS - 1); }

static void track(void *p)
{
    size_t i = slot_of(p);
    while (live[i] && live[i] != (void *)1) i = (i + 1) & (SLOTS - 1);
    live[i] = p;
    n_live++;
}

static bool untrack(void *p)
{
    for (size_t i = slot_of(p); live[i]; i = (i + 1) & (SLOTS - 1))
        if (live[i] == p) {
            live[i] = (void *)1; /* a tombstone keeps later probes going */
            n_live--;
            return true;
        }
    return false;
}

static void *t_malloc(void *ud, size_t size)
{
    (void)ud;
    if (should_fail(n_allocs++)) return NULL;
    void *p = malloc(size);
    if (p) track(p);
    return p;
}

static void *t_realloc(void *ud, void *p, size_t size)
{
    (void)ud;
    if (should_fail(n_allocs++)) return NULL;
    if (p && !untrack(p)) bad_frees++;
    void *q = realloc(p, size);
    if (q) track(q);
    else if (p) track(p); /* realloc failed: p is still ours */
    return q;
}

static void t_free(void *ud, void *p)
{
    (void)ud;
    if (p && !untrack(p)) bad_frees++;
    free(p);
}

static const nb_allocator tracking = {t_malloc, t_realloc, t_free, NULL};

#endif
