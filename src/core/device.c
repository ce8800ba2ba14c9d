/* The allocator hook and the per-device allocators built on it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/device.h"

static void *libc_malloc(void *ud, size_t size) { (void)ud; return malloc(size); }
static void *libc_realloc(void *ud, void *p, size_t size) { (void)ud; return realloc(p, size); }
static void libc_free(void *ud, void *p) { (void)ud; free(p); }

static const nb_allocator libc = {libc_malloc, libc_realloc, libc_free, NULL};
/* Set once, before other threads use nabla (see nabla/device.h). */
static nb_allocator current = {libc_malloc, libc_realloc, libc_free, NULL};

void nb_set_allocator(const nb_allocator *a)
{
    current = a && a->malloc && a->realloc && a->free ? *a : libc;
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

char *nb_strdup(const char *s)
{
    return nb_strndup(s, strlen(s));
}

char *nb_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = nb_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

const char *nb_device_name(nb_device d)
{
    return d == NB_DEVICE_CPU ? "cpu" : "unknown";
}

/* CPU blocks are 64-byte aligned for the vector kernels: the hook's block is
 * over-allocated and the offset to its start kept in the byte before the
 * aligned address. */
#define ALIGN 64

void *nb_device_alloc(nb_device d, size_t size)
{
    if (d != NB_DEVICE_CPU || size > SIZE_MAX - 2 * ALIGN) return NULL;
    if (size < ALIGN) size = ALIGN;
    unsigned char *raw = nb_malloc(size + ALIGN);
    if (!raw) return NULL;
    unsigned char *p = (unsigned char *)(((uintptr_t)raw + ALIGN) & ~(uintptr_t)(ALIGN - 1));
    p[-1] = (unsigned char)(p - raw);
    return p;
}

void nb_device_free(nb_device d, void *p)
{
    (void)d;
    if (!p) return;
    unsigned char *a = p;
    nb_free(a - a[-1]);
}
