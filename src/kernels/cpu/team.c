/* The thread team (team.h). Workers are created on the first run that
 * wants them and live as long as the process. A run is published by
 * bumping `gen`; a worker that sees it runs its share and counts itself
 * done. Between runs a worker watches `gen` for SPIN_NS, then sleeps on it
 * (a futex), and the next run wakes it only if someone sleeps. */
#define _GNU_SOURCE
#include "team.h"
#include "../../core/fpenv.h"
#include "nabla/device.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#define MAX_TEAM 256
#define SPIN_NS 100000 /* 0.1 ms: a step's next kernel usually comes sooner */

static struct {
    pthread_once_t once;
    _Atomic int size;
    pthread_mutex_t lock; /* held by the caller of a run */
    int started;          /* workers running */
    _Atomic unsigned gen; /* bumped once per run */
    _Atomic int sleepers;
    _Atomic int pending;  /* workers not yet done with the current run */
    nb_team_fn fn;        /* the current run, written before gen is bumped */
    unsigned fpmode;      /* the caller's floating-point mode, which the workers take */
    void *ctx;
    int nt;
    _Atomic int bar_count;
    _Atomic unsigned bar_gen;
} team = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local bool in_share;
static unsigned start_gen[MAX_TEAM]; /* gen when worker t was created */

static int env_threads(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    long n = strtol(v, NULL, 10); /* "4,2" (nested OpenMP lists): the first */
    return n > 0 ? (int)(n < MAX_TEAM ? n : MAX_TEAM) : 0;
}

/* A child of fork() has only the thread that forked: it starts with no
 * workers (the parent's would never answer) and a free team. */
static void forget_workers(void)
{
    team.started = 0;
    atomic_store(&team.sleepers, 0);
    atomic_store(&team.pending, 0);
    pthread_mutex_init(&team.lock, NULL);
    in_share = false;
}

static void init_size(void)
{
    pthread_atfork(NULL, NULL, forget_workers);
    int n = env_threads("NABLA_NUM_THREADS");
    if (!n) n = env_threads("OMP_NUM_THREADS");
#ifdef __linux__
    cpu_set_t set;
    if (!n && sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (!n) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    team.size = n < 1 ? 1 : n > MAX_TEAM ? MAX_TEAM : n;
}

int nb_team_size(void)
{
    pthread_once(&team.once, init_size);
    return atomic_load_explicit(&team.size, memory_order_relaxed);
}

int nb_num_threads(void) { return nb_team_size(); }

void nb_set_num_threads(int n)
{
    pthread_once(&team.once, init_size);
    /* Workers beyond a smaller size stay, answering runs without a share. */
    atomic_store(&team.size, n < 1 ? 1 : n > MAX_TEAM ? MAX_TEAM : n);
}

bool nb_team_busy(void) { return in_share; }

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_on(_Atomic unsigned *word, unsigned seen)
{
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    (void)word, (void)seen;
    sched_yield();
#endif
}

static void wake_all(_Atomic unsigned *word)
{
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, MAX_TEAM, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* One turn of a spin-wait. The pause lets a hypervisor see the spin (KVM's
 * pause-loop exiting) and run the vCPU we wait for in our place; without it
 * a spinning vCPU burns its slice while that one waits for the host. (On a
 * Xeon VM whose host was busy, with half a second of steal time a second,
 * two threads took up to 2.4 times as long as one. On a quiet host the pause
 * costs nothing measurable; how much it gives back on a busy one was not
 * measured, the host being quiet when the two were compared.) */
static inline void spin_turn(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Waits for gen to move past `seen`: a spin, then sleep. Returns the new
 * gen. */
static unsigned await_run(unsigned seen)
{
    uint64_t start = now_ns();
    for (unsigned k = 1;; k++) {
        unsigned g = atomic_load_explicit(&team.gen, memory_order_acquire);
        if (g != seen) return g;
        spin_turn();
        if (k % 256 == 0 && now_ns() - start > SPIN_NS) break;
    }
    for (;;) {
        atomic_fetch_add(&team.sleepers, 1);
        unsigned g = atomic_load(&team.gen);
        if (g == seen) sleep_on(&team.gen, seen);
        atomic_fetch_sub(&team.sleepers, 1);
        g = atomic_load_explicit(&team.gen, memory_order_acquire);
        if (g != seen) return g;
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    in_share = true; /* a kernel a worker runs never starts a run of its own */
    /* Not gen now: the run that created this thread may have begun already. */
    unsigned seen = start_gen[t];
    for (;;) {
        seen = await_run(seen);
        if (nb_fpmode_get() != team.fpmode) nb_fpmode_set(team.fpmode);
        if (t < team.nt) team.fn(team.ctx, t, team.nt);
        /* Every worker answers every run, its share or not: the next run
         * must not rewrite the job while one still reads it. */
        atomic_fetch_sub_explicit(&team.pending, 1, memory_order_release);
    }
    return NULL;
}

/* Starts workers 1 .. want-1 that are not running yet; returns how many
 * threads the team has now. */
static int start_workers(int want)
{
    while (team.started + 1 < want) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        start_gen[team.started + 1] = atomic_load(&team.gen);
        int err = pthread_create(&th, &attr, worker, (void *)(intptr_t)(team.started + 1));
        pthread_attr_destroy(&attr);
        if (err) break; /* run with the threads there are */
        team.started++;
    }
    return team.started + 1;
}

void nb_team_run(int nt, nb_team_fn fn, void *ctx)
{
    int size = nb_team_size();
    if (nt > size) nt = size;
    if (nt <= 1 || in_share || pthread_mutex_trylock(&team.lock) != 0) {
        fn(ctx, 0, 1);
        return;
    }
    int have = start_workers(size); /* all of them: every worker answers every run */
    if (nt > have) nt = have;
    if (nt <= 1) {
        pthread_mutex_unlock(&team.lock);
        fn(ctx, 0, 1);
        return;
    }
    team.fn = fn;
    team.ctx = ctx;
    team.nt = nt;
    team.fpmode = nb_fpmode_get();
    atomic_store_explicit(&team.bar_count, 0, memory_order_relaxed);
    atomic_store_explicit(&team.pending, team.started, memory_order_relaxed);
    atomic_fetch_add(&team.gen, 1); /* seq_cst: ordered before reading sleepers */
    if (atomic_load(&team.sleepers) > 0) wake_all(&team.gen);
    in_share = true;
    fn(ctx, 0, nt);
    in_share = false;
    while (atomic_load_explicit(&team.pending, memory_order_acquire) > 0) spin_turn();
    pthread_mutex_unlock(&team.lock);
}

void nb_team_barrier(int nt)
{
    if (nt <= 1) return;
    unsigned g = atomic_load_explicit(&team.bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&team.bar_count, 1, memory_order_acq_rel) == nt - 1) {
        atomic_store_explicit(&team.bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&team.bar_gen, 1, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&team.bar_gen, memory_order_acquire) == g) spin_turn();
}

/* nb_team_for: part p of [0, n) is thread p's, in FOR_PIECES pieces taken
 * in order through taken[p]. A thread takes its own part's pieces first,
 * so that consecutive kernels over the same data find it in the same
 * core's cache, and then what is left of the others': with fixed parts, a
 * thread the host slowed kept the other waiting at the end of every
 * kernel. */
#define FOR_PIECES 4

typedef struct range_job {
    int64_t n;
    nb_range_fn fn;
    void *ctx;
    _Atomic int64_t taken[MAX_TEAM];
} range_job;

static void range_share(void *arg, int t, int nt)
{
    range_job *j = arg;
    for (int k = 0; k < nt; k++) {
        const int p = (t + k) % nt;
        const int64_t lo = j->n * p / nt, len = j->n * (p + 1) / nt - lo;
        const int64_t pieces = len < FOR_PIECES ? len : FOR_PIECES;
        for (int64_t c; (c = atomic_fetch_add_explicit(&j->taken[p], 1, memory_order_relaxed)) < pieces;)
            j->fn(j->ctx, lo + len * c / pieces, lo + len * (c + 1) / pieces);
    }
}

void nb_team_for(int64_t n, bool par, nb_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    const int nt = n < nb_team_size() ? (int)n : nb_team_size();
    if (!par || nt < 2) { /* one range; on a team of one, pieces would only cost calls */
        fn(ctx, 0, n);
        return;
    }
    range_job j; /* no initialiser: it would clear all MAX_TEAM counters, not the nt in use */
    j.n = n;
    j.fn = fn;
    j.ctx = ctx;
    for (int p = 0; p < nt; p++) atomic_init(&j.taken[p], 0);
    nb_team_run(nt, range_share, &j);
}
