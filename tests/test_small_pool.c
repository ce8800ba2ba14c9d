/* The per-thread pool of small blocks (src/core/small_pool.c) that tensor
 * blocks and tape nodes come from: a freed block serves the next request of
 * its class, blocks are as large as their class, a thread keeps at most
 * 16 MiB and gives back what it keeps when it exits, and under another
 * allocator every block goes through that allocator's hook. Under
 * AddressSanitizer the pool keeps nothing, and the tests that need it to
 * keep say they are skipped. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include "core/small_pool.h"
#include "test.h"

#define POOL_LIMIT ((size_t)16 << 20)

static bool pool_off(const char *test)
{
    if (nb_small_pool_keeps()) return false;
    printf("  %s: skipped (the pool keeps nothing in this build: AddressSanitizer)\n", test);
    return true;
}

static void test_freed_block_serves_its_class(void)
{
    if (pool_off("freed block reused")) return;
    nb_small_pool_flush();
    void *p = nb_small_alloc(300);
    REQUIRE_OK(p ? NB_OK : NB_ERR_NOMEM);
    nb_small_free(p, 300);
    CHECK(nb_small_pool_bytes() == 320); /* 300 rounds up to its class, 5 x 64 */
    void *q = nb_small_alloc(257);       /* the same class */
    CHECK(q == p);
    CHECK(nb_small_pool_bytes() == 0);
    void *r = nb_small_alloc(256); /* the class below: a block of its own */
    CHECK(r != p);
    nb_small_free(q, 257);
    nb_small_free(r, 256);
    CHECK(nb_small_pool_bytes() == 320 + 256);
    nb_small_pool_flush();
    CHECK(nb_small_pool_bytes() == 0);
}

/* Prefetching the block a request would get changes nothing: the same
 * block still comes next, and the pool keeps what it kept. */
static void test_prefetch_leaves_the_pool_alone(void)
{
    if (pool_off("prefetch")) return;
    nb_small_pool_flush();
    void *p = nb_small_alloc(448);
    REQUIRE_OK(p ? NB_OK : NB_ERR_NOMEM);
    nb_small_free(p, 448);
    nb_small_prefetch(448);
    nb_small_prefetch(64);   /* an empty class */
    nb_small_prefetch(4096); /* past the classes */
    CHECK(nb_small_pool_bytes() == 448);
    void *q = nb_small_alloc(400);
    CHECK(q == p);
    nb_small_free(q, 400);
    nb_small_pool_flush();
}

/* Every byte of the class is the caller's, whatever size it asked for: the
 * block may later serve the class's largest request. AddressSanitizer, which
 * sees each block (the pool is off there), checks this most closely. */
static void test_block_holds_its_class(void)
{
    for (size_t size = 1; size <= 1024; size += 37) {
        unsigned char *p = nb_small_alloc(size);
        REQUIRE_OK(p ? NB_OK : NB_ERR_NOMEM);
        size_t class_bytes = (size + 63) / 64 * 64;
        memset(p, 0xab, class_bytes);
        CHECK(((uintptr_t)p & 15) == 0);
        nb_small_free(p, size);
    }
    /* Past 1 KiB blocks are the allocator's, as asked. */
    unsigned char *big = nb_small_alloc(5000);
    REQUIRE_OK(big ? NB_OK : NB_ERR_NOMEM);
    memset(big, 1, 5000);
    size_t before = nb_small_pool_bytes();
    nb_small_free(big, 5000);
    CHECK(nb_small_pool_bytes() == before);
    nb_small_pool_flush();
}

static void test_thread_keeps_at_most_its_limit(void)
{
    if (pool_off("pool limit")) return;
    nb_small_pool_flush();
    enum { N = 24 * 1024 }; /* 24 MiB of 1 KiB blocks */
    void **v = malloc(N * sizeof *v);
    REQUIRE_OK(v ? NB_OK : NB_ERR_NOMEM);
    for (int i = 0; i < N; i++) v[i] = nb_small_alloc(1024);
    for (int i = 0; i < N; i++) nb_small_free(v[i], 1024);
    CHECK(nb_small_pool_bytes() == POOL_LIMIT);
    free(v);
    nb_small_pool_flush();
    CHECK(nb_small_pool_bytes() == 0);
}

/* ---- threads ---------------------------------------------------------------- */

typedef struct thread_job {
    void **blocks;
    int n;
    size_t kept; /* what the thread's pool held before it exited */
} thread_job;

static void *free_on_this_thread(void *arg)
{
    thread_job *j = arg;
    for (int i = 0; i < j->n; i++) nb_small_free(j->blocks[i], 512);
    j->kept = nb_small_pool_bytes();
    return NULL;
}

/* Blocks made on one thread and freed on another join the other's pool,
 * and go back to the C library when it exits. */
static void test_blocks_freed_on_another_thread(void)
{
    if (pool_off("freed on another thread")) return;
    enum { N = 4096 }; /* 2 MiB */
    thread_job j = {malloc(N * sizeof(void *)), N, 0};
    REQUIRE_OK(j.blocks ? NB_OK : NB_ERR_NOMEM);
    nb_small_pool_flush();
#if defined(__GLIBC__)
    size_t in_use = mallinfo2().uordblks;
#endif
    for (int i = 0; i < N; i++) j.blocks[i] = nb_small_alloc(512);
    pthread_t th;
    REQUIRE_OK(pthread_create(&th, NULL, free_on_this_thread, &j) ? NB_ERR_STATE : NB_OK);
    pthread_join(th, NULL);
    CHECK(j.kept == (size_t)N * 512);
    CHECK(nb_small_pool_bytes() == 0); /* none came back to this thread */
#if defined(__GLIBC__)
    /* The thread's pool was emptied when it exited: the 2 MiB are free. */
    size_t now = mallinfo2().uordblks;
    if (!(now < in_use + (256 << 10))) fprintf(stderr, "  %zu bytes in use before, %zu after\n", in_use, now);
    CHECK(now < in_use + (256 << 10));
#endif
    free(j.blocks);
}

/* ---- another allocator -------------------------------------------------------- */

static long hook_allocs, hook_frees;
static void *count_malloc(void *ud, size_t n)
{
    (void)ud;
    hook_allocs++;
    return malloc(n);
}
static void *count_realloc(void *ud, void *p, size_t n)
{
    (void)ud;
    return realloc(p, n);
}
static void count_free(void *ud, void *p)
{
    (void)ud;
    if (p) hook_frees++;
    free(p);
}

static void test_other_allocator_sees_every_block(void)
{
    void *kept = nb_small_alloc(200);
    nb_small_free(kept, 200); /* the default allocator's, now in the pool (if it keeps) */
    nb_set_allocator(&(nb_allocator){count_malloc, count_realloc, count_free, NULL});
    CHECK(nb_small_pool_bytes() == 0); /* switching gave it back */
    CHECK(!nb_small_pool_keeps());
    hook_allocs = hook_frees = 0;
    for (int i = 0; i < 3; i++) {
        void *p = nb_small_alloc(200);
        CHECK(p != NULL);
        nb_small_free(p, 200);
    }
    CHECK(hook_allocs == 3 && hook_frees == 3);
    nb_set_allocator(NULL);
    /* test_allocator runs whole jobs, eager training included, under a hook
     * set first thing, and finds every block freed through it. */
}

int main(void)
{
    RUN(test_freed_block_serves_its_class);
    RUN(test_block_holds_its_class);
    RUN(test_prefetch_leaves_the_pool_alone);
    RUN(test_thread_keeps_at_most_its_limit);
    RUN(test_blocks_freed_on_another_thread);
    RUN(test_other_allocator_sees_every_block);
    return test_report();
}
