/* Small blocks that the eager tape makes and frees by the thousand (a
 * tensor with its storage, a tape node), kept per thread for reuse.
 *
 * Only while the C library's allocator is in force: a program that sets its
 * own (to count or cap memory, or to fail the k-th allocation) sees every
 * block come and go through it, as nabla/device.h promises. The caller
 * passes the size again when it frees, so the blocks carry no header. */
#ifndef NABLA_SMALL_POOL_H
#define NABLA_SMALL_POOL_H

#include <stdbool.h>
#include <stddef.h>

/* A block of at least `size` bytes, 16-byte aligned (nb_malloc's), or NULL. */
void *nb_small_alloc(size_t size);
/* Brings into the cache, for writing, the block that the next request of
 * `size` will get. */
void nb_small_prefetch(size_t size);
/* Frees p, which nb_small_alloc(size) returned (NULL is ignored). */
void nb_small_free(void *p, size_t size);
/* Hands the calling thread's kept blocks back to the C library. */
void nb_small_pool_flush(void);
/* Bytes the calling thread keeps now (at most 16 MiB), and whether it would
 * keep a block freed now (not under AddressSanitizer or another allocator). */
size_t nb_small_pool_bytes(void);
bool nb_small_pool_keeps(void);
/* Whether the C library's allocator is in force (device.c; only
 * nb_set_allocator writes it). */
extern bool nb_allocator_default;

#endif
