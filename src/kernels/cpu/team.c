/* The thread team (team.h).
 *
 * Nobody waits for a thread that is not running. A run is published by
 * bumping `gen`; its shares are claimed one at a time, through `claim`, by
 * whichever thread arrives first, and the caller, having run share 0,
 * claims the rest itself. So a worker the host has not scheduled costs
 * nothing: it finds every share taken when it does run. The caller waits
 * only for the shares workers did claim, and waits by sleeping once a short
 * spin is over, which hands its core to the worker it waits for (a spinning
 * caller kept the core that a preempted worker needed, and a run took a
 * scheduler quantum: with one core of two held by another process, an MNIST
 * epoch took 4-5 times as long at two threads as at one).
 *
 * `claim` holds the run's generation in its high half, so a worker that
 * wakes late, after its run is over and the next one published, cannot
 * take a share of a run it never saw. Workers live as long as the process.
 * Between runs a worker watches `gen` for a while, then sleeps on it (a
 * futex), and a run wakes it only if someone sleeps; on a machine found
 * busy (a wait that lost its core for a millisecond) the watch is short,
 * so that idle workers do not take time from threads that have work. */
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
#define IDLE_SPIN_NS 100000     /* 0.1 ms: a step's next kernel usually comes sooner */
#define BUSY_IDLE_SPIN_NS 5000  /* the same when the machine is busy */
#define WAIT_SPIN_NS 20000      /* a caller or barrier waiting, before it sleeps */
#define LOST_CORE_NS 1000000    /* a gap this long inside a spin: the core was taken */
#define LOST_AGAIN_NS 50000000  /* two such signs this close: the machine is busy... */
#define BUSY_HOLD_NS 200000000  /* ... for this long */
#define SHORT_GANGS 3           /* gangs in a row short of a spinning worker: one sign */
#define GANG_SPIN_NS 10000      /* how long a gang waits for spinning workers */
#define GANG_WAKE_NS 100000     /* ... and for sleeping ones it has woken */
#define CLOSED 0x80000000u      /* in claim's low half: a gang has closed */

static struct {
    pthread_once_t once;
    _Atomic int size;
    pthread_mutex_t lock; /* held by the caller of a run */
    int started;          /* workers running */
    _Atomic unsigned gen; /* bumped once per run; idle workers sleep on it */
    _Atomic int sleepers;
    _Atomic uint64_t claim; /* gen << 32 | the next share to take (| CLOSED, the gang's size) */
    _Atomic unsigned done;  /* shares run by workers in this run; the caller sleeps on it */
    _Atomic int caller_sleeps;
    /* The current run, written before claim and gen are. Atomic only so
     * that a late worker's read of a run it will not join is no race. */
    _Atomic(nb_team_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int nt;
    _Atomic unsigned fpmode; /* the caller's floating-point mode, which the workers take */
    _Atomic bool gang;
    _Atomic int bar_count;
    _Atomic unsigned bar_gen;
    _Atomic int bar_sleepers;
    _Atomic uint64_t busy_until; /* now_ns() before which the machine counts as busy */
    _Atomic uint64_t lost_at;    /* when a thread last found its core taken */
    int short_gangs;             /* gangs in a row short of a spinning worker (under lock) */
    _Atomic uint64_t gang_wait;  /* nb_team_set_gang_wait's; 0: GANG_SPIN_NS or GANG_WAKE_NS */
} team = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local bool in_share;
static unsigned start_gen[MAX_TEAM]; /* gen when worker t was created */

/* A child of fork() has only the thread that forked: it starts with no
 * workers (the parent's would never answer) and a free team. */
static void forget_workers(void)
{
    team.started = 0;
    atomic_store(&team.sleepers, 0);
    atomic_store(&team.caller_sleeps, 0);
    atomic_store(&team.bar_sleepers, 0);
    pthread_mutex_init(&team.lock, NULL);
    in_share = false;
}

static void init_size(void)
{
    pthread_atfork(NULL, NULL, forget_workers);
    team.size = nb_team_default_size();
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
    /* Workers beyond a smaller size stay, taking no shares. */
    atomic_store(&team.size, n < 1 ? 1 : n > MAX_TEAM ? MAX_TEAM : n);
}

bool nb_team_busy(void) { return in_share; }

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool machine_busy(void) { return now_ns() < atomic_load_explicit(&team.busy_until, memory_order_relaxed); }

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
 * a spinning vCPU burns its slice while that one waits for the host. */
static inline void spin_turn(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* A sign that another process holds a core: a spin that lost its own, or
 * gangs a spinning worker did not join. One sign alone is not enough: a
 * host takes an idle guest's vCPU away now and then, and on an idle machine
 * each false mark cost BUSY_HOLD_NS at one thread (the MLP step at batch 256
 * ran at 1.9 ms median at two threads, between 1.2 and 2.1, against 2.1 at
 * one). Under a busy loop the signs come every few milliseconds. */
static void lost_core(uint64_t now)
{
    uint64_t prev = atomic_exchange_explicit(&team.lost_at, now, memory_order_relaxed);
    if (prev && now - prev < LOST_AGAIN_NS)
        atomic_store_explicit(&team.busy_until, now + BUSY_HOLD_NS, memory_order_relaxed);
}

/* Waits for *word to differ from `seen`: a spin of up to spin_ns, then
 * sleep, counted in *sleepers so that the writer knows to wake. A spin that
 * lost its core for LOST_CORE_NS is a sign of a busy machine. Returns the
 * new value. */
static unsigned await_change(_Atomic unsigned *word, unsigned seen, _Atomic int *sleepers, uint64_t spin_ns)
{
    uint64_t start = now_ns(), last = start;
    for (unsigned k = 1;; k++) {
        unsigned v = atomic_load_explicit(word, memory_order_acquire);
        if (v != seen) return v;
        spin_turn();
        if (k % 128 == 0) {
            uint64_t now = now_ns();
            if (now - last > LOST_CORE_NS) lost_core(now);
            if (now - start > spin_ns) break;
            last = now;
        }
    }
    for (;;) {
        atomic_fetch_add(sleepers, 1);
        unsigned v = atomic_load(word);
        if (v == seen) sleep_on(word, seen);
        atomic_fetch_sub(sleepers, 1);
        v = atomic_load_explicit(word, memory_order_acquire);
        if (v != seen) return v;
    }
}

/* The run a share belongs to. */
typedef struct share {
    nb_team_fn fn;
    void *ctx;
    int t, nt;
    bool gang;
} share;

/* Takes the next share of run g, if g is still the current run and a share
 * is left. */
static bool claim_share(unsigned g, share *s)
{
    uint64_t w = atomic_load_explicit(&team.claim, memory_order_acquire);
    for (;;) {
        unsigned low = (unsigned)w;
        if ((unsigned)(w >> 32) != g || (low & CLOSED)) return false;
        /* Read before the claim: a claim that succeeds proves the run was
         * still g's when they were read. */
        s->nt = atomic_load_explicit(&team.nt, memory_order_relaxed);
        if ((int)low >= s->nt) return false;
        s->fn = atomic_load_explicit(&team.fn, memory_order_relaxed);
        s->ctx = atomic_load_explicit(&team.ctx, memory_order_relaxed);
        s->gang = atomic_load_explicit(&team.gang, memory_order_relaxed);
        s->t = (int)low;
        if (atomic_compare_exchange_weak_explicit(&team.claim, &w, w + 1, memory_order_acq_rel, memory_order_acquire))
            return true;
    }
}

/* A gang member learns the gang's size once the caller has closed it,
 * which the caller does soon after opening it. */
static int gang_size(unsigned g)
{
    for (unsigned k = 1;; k++) {
        uint64_t w = atomic_load_explicit(&team.claim, memory_order_acquire);
        if ((unsigned)(w >> 32) == g && ((unsigned)w & CLOSED)) return (int)((unsigned)w & ~CLOSED);
        spin_turn();
        if (k % 1024 == 0) sched_yield(); /* the caller lost its core */
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    in_share = true; /* a kernel a worker runs never starts a run of its own */
    nb_team_bind_self();
    /* Not gen now: the run that created this thread may have begun already. */
    unsigned seen = start_gen[t];
    for (;;) {
        seen = await_change(&team.gen, seen, &team.sleepers, machine_busy() ? BUSY_IDLE_SPIN_NS : IDLE_SPIN_NS);
        share s;
        while (claim_share(seen, &s)) {
            if (s.gang) s.nt = gang_size(seen);
            unsigned fp = atomic_load_explicit(&team.fpmode, memory_order_relaxed);
            if (nb_fpmode_get() != fp) nb_fpmode_set(fp);
            s.fn(s.ctx, s.t, s.nt);
            atomic_fetch_add(&team.done, 1); /* seq_cst: ordered before reading caller_sleeps */
            if (atomic_load(&team.caller_sleeps)) wake_all(&team.done);
            if (s.gang) break; /* a gang member has one share */
        }
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

/* Takes the team for a run of nt shares; returns the shares it may have
 * (0: run on the caller alone, the team not taken). */
static int take_team(int nt)
{
    int size = nb_team_size();
    if (nt > size) nt = size;
    if (nt <= 1 || in_share || pthread_mutex_trylock(&team.lock) != 0) return 0;
    int have = start_workers(size);
    if (nt > have) nt = have;
    if (nt <= 1) {
        pthread_mutex_unlock(&team.lock);
        return 0;
    }
    return nt;
}

/* How a run found the workers. */
typedef struct arrival {
    bool woke;  /* some were asleep and were woken */
    bool awake; /* some were not asleep */
} arrival;

/* Publishes a run whose share 0 the caller has taken; returns its
 * generation. On a busy machine sleeping workers stay asleep: woken, one
 * would take the caller's own core more often than a free one (an MNIST
 * epoch took twice as long as on one thread), and the busy mark lapses
 * within BUSY_HOLD_NS, after which a run wakes them again and their spins
 * find out whether the machine is still busy. */
static unsigned publish(int nt, nb_team_fn fn, void *ctx, bool gang, arrival *a)
{
    unsigned g = atomic_load_explicit(&team.gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&team.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&team.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&team.nt, nt, memory_order_relaxed);
    atomic_store_explicit(&team.gang, gang, memory_order_relaxed);
    atomic_store_explicit(&team.fpmode, nb_fpmode_get(), memory_order_relaxed);
    atomic_store_explicit(&team.done, 0, memory_order_relaxed);
    atomic_store_explicit(&team.bar_count, 0, memory_order_relaxed);
    atomic_store_explicit(&team.claim, (uint64_t)g << 32 | 1u, memory_order_release);
    atomic_store(&team.gen, g); /* seq_cst: ordered before reading sleepers */
    int asleep = atomic_load(&team.sleepers);
    a->awake = asleep < team.started;
    /* (A gang told to wait for its workers wakes them whatever.) */
    a->woke = asleep > 0 && (!machine_busy() || (gang && atomic_load_explicit(&team.gang_wait, memory_order_relaxed)));
    if (a->woke) wake_all(&team.gen);
    return g;
}

/* Waits until workers have run `need` shares of the current run. */
static void await_done(unsigned need)
{
    uint64_t spin = machine_busy() ? BUSY_IDLE_SPIN_NS : WAIT_SPIN_NS;
    for (unsigned d; (d = atomic_load_explicit(&team.done, memory_order_acquire)) < need;)
        await_change(&team.done, d, &team.caller_sleeps, spin);
}

void nb_team_run(int nt, nb_team_fn fn, void *ctx)
{
    nt = take_team(nt);
    if (!nt) {
        fn(ctx, 0, 1);
        return;
    }
    arrival a;
    unsigned g = publish(nt, fn, ctx, false, &a);
    in_share = true;
    fn(ctx, 0, nt);
    unsigned mine = 1;
    for (share s; claim_share(g, &s); mine++) fn(ctx, s.t, nt);
    in_share = false;
    await_done((unsigned)nt - mine);
    pthread_mutex_unlock(&team.lock);
}

/* Closes the gang: the shares claimed by now are its members. */
static int close_gang(unsigned g, int nt, arrival a)
{
    /* Workers woken from sleep take tens of microseconds to come; with none
     * awake or woken, none will. */
    uint64_t wait = atomic_load_explicit(&team.gang_wait, memory_order_relaxed);
    if (!wait) wait = a.woke ? GANG_WAKE_NS : a.awake ? GANG_SPIN_NS : 0;
    uint64_t deadline = now_ns() + wait;
    uint64_t w = atomic_load_explicit(&team.claim, memory_order_acquire);
    for (unsigned k = 0;; k++) {
        unsigned have = (unsigned)w;
        bool late = k % 64 == 0 && now_ns() >= deadline;
        if ((int)have >= nt || late) {
            if (atomic_compare_exchange_weak_explicit(&team.claim, &w, (uint64_t)g << 32 | CLOSED | have,
                                                      memory_order_acq_rel, memory_order_acquire)) {
                /* Gangs short of a worker that was spinning: it lost its core
                 * (once may be a worker still returning from the last run). */
                if ((int)have >= nt) team.short_gangs = 0;
                else if (a.awake && !a.woke && ++team.short_gangs >= SHORT_GANGS) {
                    team.short_gangs = 0;
                    lost_core(now_ns());
                }
                return (int)have;
            }
            continue;
        }
        spin_turn();
        w = atomic_load_explicit(&team.claim, memory_order_acquire);
    }
}

void nb_team_gang(int nt, nb_team_fn fn, void *ctx)
{
    nt = take_team(nt);
    if (!nt) {
        fn(ctx, 0, 1);
        return;
    }
    arrival a;
    unsigned g = publish(nt, fn, ctx, true, &a);
    int k = close_gang(g, nt, a);
    in_share = true;
    fn(ctx, 0, k);
    in_share = false;
    await_done((unsigned)k - 1);
    pthread_mutex_unlock(&team.lock);
}

void nb_team_set_gang_wait(uint64_t ns) { atomic_store(&team.gang_wait, ns); }

void nb_team_barrier(int nt)
{
    if (nt <= 1) return;
    unsigned g = atomic_load_explicit(&team.bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&team.bar_count, 1, memory_order_acq_rel) == nt - 1) {
        atomic_store_explicit(&team.bar_count, 0, memory_order_relaxed);
        atomic_fetch_add(&team.bar_gen, 1); /* seq_cst: ordered before reading bar_sleepers */
        if (atomic_load(&team.bar_sleepers)) wake_all(&team.bar_gen);
        return;
    }
    await_change(&team.bar_gen, g, &team.bar_sleepers, WAIT_SPIN_NS);
}

/* nb_team_for: part p of [0, n) is share p's, in FOR_PIECES pieces taken
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
