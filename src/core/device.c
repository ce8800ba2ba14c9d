/* The allocator hook and the per-device allocators built on it. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/device.h"
#include "small_pool.h"

static void *libc_malloc(void *ud, size_t size)
{
    (void)ud;
    return malloc(size);
}
static void *libc_realloc(void *ud, void *p, size_t size)
{
    (void)ud;
    return realloc(p, size);
}
static void libc_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

static const nb_allocator libc = {libc_malloc, libc_realloc, libc_free, NULL};
/* Set once, before other threads use nabla (see nabla/device.h). */
static nb_allocator current = {libc_malloc, libc_realloc, libc_free, NULL};

void nb_device_empty_cache(void);

/* Read by the small-block pool on every eager op: a variable, not a call. */
bool nb_allocator_default = true;

void nb_set_allocator(const nb_allocator *a)
{
    nb_device_empty_cache(); /* its blocks go back through the hook that gave them */
    current = a && a->malloc && a->realloc && a->free ? *a : libc;
    nb_allocator_default = current.malloc == libc_malloc;
}

nb_allocator nb_get_allocator(void) { return current; }

void *nb_malloc(size_t size) { return current.malloc(current.ud, size ? size : 1); }
void *nb_realloc(void *p, size_t size) { return current.realloc(current.ud, p, size ? size : 1); }
void nb_free(void *p)
{
    if (p) current.free(current.ud, p);
}

void *nb_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = nb_malloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

char *nb_strdup(const char *s) { return nb_strndup(s, strlen(s)); }

char *nb_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = nb_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

const char *nb_device_name(nb_device d) { return d == NB_DEVICE_CPU ? "cpu" : "unknown"; }

/* CPU blocks are 64-byte aligned for the vector kernels: the hook's block is
 * over-allocated, the offset to its start kept in the byte before the
 * aligned address and the size asked for in the 8 bytes before that.
 *
 * Large blocks freed are kept for reuse, up to CACHE_BYTES in CACHE_SLOTS
 * blocks, and handed out again for a request of the same rounded size. A
 * training step allocates the same large tensors every time; through the C
 * library each would be a fresh mmap whose pages fault in and are zeroed by
 * the kernel, a fifth of an eager transformer step. nb_device_empty_cache
 * (and nb_set_allocator, before it switches) gives them back. */
#define ALIGN 64
#define HEADER 16
/* Under AddressSanitizer nothing is kept, so that it still sees every use
 * of a freed block. */
#if defined(__SANITIZE_ADDRESS__)
#define CACHE_MIN SIZE_MAX
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHE_MIN SIZE_MAX
#endif
#endif
#ifndef CACHE_MIN
#define CACHE_MIN ((size_t)256 << 10)
#endif
#define CACHE_ROUND ((size_t)4 << 10)
#define CACHE_SLOTS 64
#define CACHE_BYTES ((size_t)512 << 20)

typedef struct cached {
    size_t size;
    void *raw;
} cached;

static struct {
    pthread_mutex_t lock;
    cached slot[CACHE_SLOTS];
    int n;
    size_t bytes;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *cache_take(size_t size)
{
    void *raw = NULL;
    pthread_mutex_lock(&cache.lock);
    for (int i = cache.n - 1; i >= 0; i--)
        if (cache.slot[i].size == size) {
            raw = cache.slot[i].raw;
            cache.slot[i] = cache.slot[--cache.n];
            cache.bytes -= size;
            break;
        }
    pthread_mutex_unlock(&cache.lock);
    return raw;
}

/* Keeps raw for reuse; false when the cache is full. */
static bool cache_put(size_t size, void *raw)
{
    bool kept = false;
    pthread_mutex_lock(&cache.lock);
    if (cache.n < CACHE_SLOTS && cache.bytes + size <= CACHE_BYTES) {
        cache.slot[cache.n++] = (cached){size, raw};
        cache.bytes += size;
        kept = true;
    }
    pthread_mutex_unlock(&cache.lock);
    return kept;
}

void nb_device_empty_cache(void)
{
    nb_small_pool_flush();
    pthread_mutex_lock(&cache.lock);
    for (int i = 0; i < cache.n; i++) nb_free(cache.slot[i].raw);
    cache.n = 0;
    cache.bytes = 0;
    pthread_mutex_unlock(&cache.lock);
}

void *nb_device_alloc(nb_device d, size_t size)
{
    if (d != NB_DEVICE_CPU || size > SIZE_MAX - 2 * ALIGN - CACHE_ROUND) return NULL;
    if (size < ALIGN) size = ALIGN;
    if (size >= CACHE_MIN) size = (size + CACHE_ROUND - 1) / CACHE_ROUND * CACHE_ROUND;
    unsigned char *raw = size >= CACHE_MIN ? cache_take(size) : NULL;
    if (!raw && !(raw = nb_malloc(size + HEADER + ALIGN))) return NULL;
    unsigned char *p = (unsigned char *)(((uintptr_t)raw + HEADER + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    memcpy(p - HEADER, &size, sizeof size);
    p[-1] = (unsigned char)(p - raw);
    return p;
}

void nb_device_free(nb_device d, void *p)
{
    (void)d;
    if (!p) return;
    unsigned char *a = p, *raw = a - a[-1];
    size_t size;
    memcpy(&size, a - HEADER, sizeof size);
    if (size >= CACHE_MIN && cache_put(size, raw)) return;
    nb_free(raw);
}
