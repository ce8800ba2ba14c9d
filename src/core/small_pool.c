/* Per-thread free lists of small blocks, in classes of 64 bytes up to 1 KiB.
 *
 * An eager op makes a tensor block and a tape node and its backward frees
 * them; through the C library's malloc, whose own per-thread cache holds
 * seven blocks of a size, a chain of ten thousand ops spent a tenth of its
 * instructions in malloc and free. A block freed here is pushed on its
 * thread's list and popped by the next request of its class: a few
 * instructions, and a block still warm in the cache.
 *
 * A block may be freed on another thread than the one that made it; it then
 * joins that thread's list. Each thread keeps at most POOL_BYTES; the rest
 * goes back to the C library, and so does everything a thread keeps when it
 * exits. Under AddressSanitizer nothing is kept, so that it still sees every
 * use of a freed block. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include "nabla/device.h"
#include "prefetch.h"
#include "small_pool.h"

#define QUANTUM 64
#define CLASSES 16
#define POOL_BYTES ((size_t)16 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define POOL_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_OFF 1
#endif
#endif
#ifndef POOL_OFF
#define POOL_OFF 0
#endif

typedef struct free_block {
    struct free_block *next;
} free_block;

typedef struct pool {
    free_block *head[CLASSES];
    size_t bytes;
    bool registered; /* with the key whose destructor empties it at thread exit */
    bool exited;     /* emptied at thread exit: what other destructors free after goes back at once */
} pool;

static _Thread_local pool tl_pool;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;

static void pool_empty(pool *p)
{
    for (int c = 0; c < CLASSES; c++)
        for (free_block *b = p->head[c], *next; b; b = next) {
            next = b->next;
            free(b); /* kept only while the C library's allocator was in force */
        }
    *p = (pool){.registered = p->registered, .exited = p->exited};
}

static void on_thread_exit(void *arg)
{
    pool *p = arg;
    p->exited = true;
    pool_empty(p);
}
static void make_exit_key(void) { exit_key_ok = !pthread_key_create(&exit_key, on_thread_exit); }

/* The calling thread's pool, or NULL when blocks are not kept. */
static pool *my_pool(void)
{
    if (POOL_OFF || !nb_allocator_default) return NULL;
    pool *p = &tl_pool;
    if (p->exited) return NULL;
    if (!p->registered) {
        pthread_once(&exit_once, make_exit_key);
        if (!exit_key_ok || pthread_setspecific(exit_key, p)) return NULL;
        p->registered = true;
    }
    return p;
}

/* Sizes round up to their class's whatever the allocator, so that a block
 * is as large as any request of its class it may later serve. */
void *nb_small_alloc(size_t size)
{
    size_t c = size ? (size - 1) / QUANTUM : 0;
    if (c >= CLASSES) return nb_malloc(size);
    pool *p = my_pool();
    free_block *b = p ? p->head[c] : NULL;
    if (!b) return nb_malloc((c + 1) * QUANTUM);
    p->head[c] = b->next;
    p->bytes -= (c + 1) * QUANTUM;
    return b;
}

void nb_small_prefetch(size_t size)
{
    size_t c = size ? (size - 1) / QUANTUM : 0;
    pool *p = c < CLASSES ? my_pool() : NULL;
    if (p && p->head[c]) nb_prefetch_lines(p->head[c], (c + 1) * QUANTUM);
}

void nb_small_free(void *ptr, size_t size)
{
    if (!ptr) return;
    size_t c = size ? (size - 1) / QUANTUM : 0;
    pool *p = c < CLASSES ? my_pool() : NULL;
    if (!p || p->bytes + (c + 1) * QUANTUM > POOL_BYTES) {
        nb_free(ptr);
        return;
    }
    free_block *b = ptr;
    b->next = p->head[c];
    p->head[c] = b;
    p->bytes += (c + 1) * QUANTUM;
}

void nb_small_pool_flush(void) { pool_empty(&tl_pool); }
size_t nb_small_pool_bytes(void) { return tl_pool.bytes; }
bool nb_small_pool_keeps(void) { return my_pool() != NULL; }
