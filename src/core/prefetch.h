/* Software prefetch, for the eager tape: a tape longer than the cache holds
 * is read back from memory node by node, and its blocks come from a pool
 * whose free blocks went cold when the last backward freed them. */
#ifndef NABLA_PREFETCH_H
#define NABLA_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

/* Asks for the cache lines of [p, p + bytes), to be written soon. Asking
 * never faults, so the range may be a guess. The empty volatile asm keeps
 * GCC from judging a function that only prefetches to be pure and deleting
 * the calls to it, which it did, silently. */
static inline void nb_prefetch_lines(const void *p, size_t bytes)
{
    /* Addresses as integers: a guess may run past its object, where pointer
     * arithmetic would be undefined. */
    uintptr_t end = (uintptr_t)p + bytes;
    for (uintptr_t a = (uintptr_t)p; a < end; a += 64) __builtin_prefetch((const void *)a, 1, 3);
    __asm__ volatile("");
}

#endif
