/* The kernels' thread team (src/kernels/cpu/team.h): every share of a run
 * runs once, share 0 on the caller; a worker that is not running (held in a
 * signal handler here, as the host would hold a descheduled one) holds
 * nothing up, its shares run elsewhere, and a gang goes without it; a gang's
 * shares run on threads of their own, and a barrier holds every one until
 * all have reached it; ranges cover [0, n) exactly once, and a thread that
 * finishes its part takes what is left of a slow one's; a run inside a
 * share, or from a second thread while the team is taken, runs on its
 * caller alone; a forked child gets a team of its own; the default size
 * follows the affinity mask, the cgroup quota and the MPI ranks per node. The team has three threads here
 * (NABLA_NUM_THREADS, set before its first use), more than this machine may
 * have cores, so that shares really interleave. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kernels/cpu/team.h"
#include "nabla/device.h"
#include "test.h"

#define SHARES 3

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

typedef struct who {
    _Atomic int calls[SHARES];
    pthread_t thread[SHARES];
    _Atomic int bad_nt;
} who;

static void record_share(void *arg, int t, int nt)
{
    who *w = arg;
    if (nt != SHARES || t < 0 || t >= nt) {
        atomic_fetch_add(&w->bad_nt, 1);
        return;
    }
    atomic_fetch_add(&w->calls[t], 1);
    w->thread[t] = pthread_self();
}

static void test_team_run(void)
{
    CHECK(nb_team_size() == SHARES);
    for (int rep = 0; rep < 1000; rep++) {
        who w;
        memset(&w, 0, sizeof w);
        nb_team_run(SHARES, record_share, &w);
        bool once = atomic_load(&w.bad_nt) == 0;
        for (int t = 0; t < SHARES; t++) once &= atomic_load(&w.calls[t]) == 1;
        CHECK(once);
        CHECK(pthread_equal(w.thread[0], pthread_self()));
        if (!once) break;
    }
    /* more shares than the team has: clipped to its size */
    who w;
    memset(&w, 0, sizeof w);
    nb_team_run(SHARES + 5, record_share, &w);
    CHECK(atomic_load(&w.bad_nt) == 0 && atomic_load(&w.calls[2]) == 1);
}

/* A gang that waits for every worker: every share on a thread of its own,
 * share 0 the caller's. */
typedef struct gang_seen {
    pthread_t thread[SHARES];
    _Atomic int k, calls;
} gang_seen;

static void gang_share(void *arg, int t, int nt)
{
    gang_seen *g = arg;
    atomic_store(&g->k, nt);
    atomic_fetch_add(&g->calls, 1);
    if (t < SHARES) g->thread[t] = pthread_self();
}

static void test_gang(void)
{
    nb_team_set_gang_wait(10000000000u); /* 10 s: every worker joins, however loaded the machine */
    int full = 0;
    for (int rep = 0; rep < 200; rep++) {
        gang_seen g;
        memset(&g, 0, sizeof g);
        nb_team_gang(SHARES, gang_share, &g);
        const int k = atomic_load(&g.k);
        CHECK(k >= 1 && k <= SHARES && atomic_load(&g.calls) == k);
        CHECK(pthread_equal(g.thread[0], pthread_self()));
        bool apart = true;
        for (int a = 0; a < k; a++)
            for (int b = a + 1; b < k; b++) apart &= !pthread_equal(g.thread[a], g.thread[b]);
        CHECK(apart);
        full += k == SHARES;
    }
    CHECK(full == 200);
    nb_team_set_gang_wait(0);
}

typedef struct cover {
    _Atomic int *hits;
    _Atomic int ranges;
} cover;

static void mark(void *arg, int64_t lo, int64_t hi)
{
    cover *c = arg;
    atomic_fetch_add(&c->ranges, 1);
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void test_for(void)
{
    const int64_t sizes[] = {0, 1, 2, 3, 7, 1000, 100003};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int par = 0; par < 2; par++) {
            int64_t n = sizes[k];
            cover c = {calloc((size_t)n + 1, sizeof(_Atomic int)), 0};
            nb_team_for(n, par, mark, &c);
            bool exact = true;
            for (int64_t i = 0; i < n; i++) exact &= atomic_load(&c.hits[i]) == 1;
            CHECK(exact);
            /* one range alone; in parallel, each thread's part in up to four
             * pieces (none for n == 0) */
            int want = n == 0 ? 0 : 1;
            if (par && n >= 2) {
                const int nt = n < SHARES ? (int)n : SHARES;
                want = 0;
                for (int p = 0; p < nt; p++) {
                    int64_t len = n * (p + 1) / nt - n * p / nt;
                    want += len < 4 ? (int)len : 4;
                }
            }
            CHECK(atomic_load(&c.ranges) == want);
            free((void *)c.hits);
        }
}

/* A share the host slows hands the rest of its part to the others: the
 * calling thread (share 0) waits in its first range until another thread
 * has run a range of its part, for five seconds at most. */
typedef struct slow {
    pthread_t caller;
    int64_t part0_end;
    _Atomic int taken_from_caller, caller_ranges;
} slow;

static void slow_mark(void *arg, int64_t lo, int64_t hi)
{
    slow *s = arg;
    (void)hi;
    if (!pthread_equal(pthread_self(), s->caller)) {
        if (lo < s->part0_end) atomic_fetch_add(&s->taken_from_caller, 1);
        return;
    }
    if (atomic_fetch_add(&s->caller_ranges, 1) == 0)
        for (int ms = 0; ms < 5000 && !atomic_load(&s->taken_from_caller); ms++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
}

static void test_for_hands_work_on(void)
{
    slow s = {.caller = pthread_self(), .part0_end = 1000 / SHARES};
    nb_team_for(1000, true, slow_mark, &s);
    CHECK(atomic_load(&s.taken_from_caller) >= 1);
    CHECK(atomic_load(&s.caller_ranges) + atomic_load(&s.taken_from_caller) == 4);
}

/* Each share writes its slot of a phase, waits, then checks every slot. */
typedef struct phases {
    _Atomic int slot[SHARES];
    _Atomic int wrong, shared; /* gangs of more than one */
} phases;

static void phased(void *arg, int t, int nt)
{
    phases *p = arg;
    if (t == 0 && nt > 1) atomic_fetch_add(&p->shared, 1);
    for (int phase = 1; phase <= 50; phase++) {
        atomic_store(&p->slot[t], phase);
        nb_team_barrier(nt);
        for (int u = 0; u < nt; u++)
            if (atomic_load(&p->slot[u]) != phase) atomic_fetch_add(&p->wrong, 1);
        nb_team_barrier(nt); /* nobody starts the next phase while others check */
    }
}

static void test_barrier(void)
{
    phases p;
    memset(&p, 0, sizeof p);
    nb_team_set_gang_wait(10000000000u);
    for (int rep = 0; rep < 20; rep++) nb_team_gang(SHARES, phased, &p);
    nb_team_set_gang_wait(0);
    if (atomic_load(&p.wrong) || atomic_load(&p.shared) != 20)
        printf("  wrong %d, shared gangs %d of 20\n", atomic_load(&p.wrong), atomic_load(&p.shared));
    CHECK(atomic_load(&p.wrong) == 0 && atomic_load(&p.shared) == 20);
}

typedef struct nested {
    _Atomic int inner_nt_sum;
    _Atomic int busy;
} nested;

static void inner_share(void *arg, int t, int nt)
{
    nested *n = arg;
    (void)t;
    atomic_fetch_add(&n->inner_nt_sum, nt);
}

static void outer_share(void *arg, int t, int nt)
{
    nested *n = arg;
    (void)t, (void)nt;
    if (nb_team_busy()) atomic_fetch_add(&n->busy, 1);
    nb_team_run(SHARES, inner_share, n); /* inside a share: on this thread alone */
}

static void test_nested(void)
{
    nested n;
    memset(&n, 0, sizeof n);
    CHECK(!nb_team_busy());
    nb_team_run(SHARES, outer_share, &n);
    CHECK(atomic_load(&n.busy) == SHARES);
    CHECK(atomic_load(&n.inner_nt_sum) == SHARES); /* each inner run had nt == 1 */
    CHECK(!nb_team_busy());
}

/* Two threads of the user's start runs at once: both complete, whichever
 * did not get the team on its own thread. */
static void *user_thread(void *arg)
{
    (void)arg;
    bool ok = true;
    for (int rep = 0; rep < 300 && ok; rep++) {
        int64_t n = 5000;
        cover c = {calloc((size_t)n, sizeof(_Atomic int)), 0};
        nb_team_for(n, true, mark, &c);
        for (int64_t i = 0; i < n; i++) ok &= atomic_load(&c.hits[i]) == 1;
        free((void *)c.hits);
    }
    return ok ? (void *)1 : NULL;
}

static void test_concurrent_callers(void)
{
    pthread_t a, b;
    void *ra = NULL, *rb = NULL;
    REQUIRE_OK(pthread_create(&a, NULL, user_thread, NULL) ? NB_ERR_STATE : NB_OK);
    REQUIRE_OK(pthread_create(&b, NULL, user_thread, NULL) ? NB_ERR_STATE : NB_OK);
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    CHECK(ra && rb);
}

static void count_share(void *arg, int t, int nt)
{
    (void)t;
    atomic_fetch_add((_Atomic int *)arg, nt);
}

/* The public knob resizes the team for the runs after it. */
static void test_set_num_threads(void)
{
    CHECK(nb_num_threads() == SHARES);
    nb_set_num_threads(2);
    _Atomic int sum = 0;
    nb_team_run(SHARES, count_share, &sum);
    CHECK(nb_num_threads() == 2 && atomic_load(&sum) == 2 * 2); /* two shares, each told nt == 2 */
    nb_set_num_threads(0);
    CHECK(nb_num_threads() == 1);
    nb_set_num_threads(SHARES);
    atomic_store(&sum, 0);
    nb_team_run(SHARES, count_share, &sum);
    CHECK(atomic_load(&sum) == SHARES * SHARES);
}

/* A worker held in a signal handler is, to the team, a thread the host has
 * not scheduled: runs and gangs complete without it, on the others. */
static _Atomic int frozen, held;

static void hold(int sig)
{
    (void)sig;
    atomic_fetch_add(&held, 1);
    while (atomic_load(&frozen)) nanosleep(&(struct timespec){0, 100000}, NULL);
    atomic_fetch_sub(&held, 1);
}

static void test_frozen_workers(void)
{
#ifdef UNDER_TSAN
    printf("  skipped under ThreadSanitizer: it delays signals until a thread makes a call it intercepts\n");
    return;
#endif
    /* The workers' ids, from a gang that has them all. */
    gang_seen g;
    memset(&g, 0, sizeof g);
    nb_team_set_gang_wait(10000000000u);
    nb_team_gang(SHARES, gang_share, &g);
    nb_team_set_gang_wait(0);
    CHECK(atomic_load(&g.k) == SHARES);
    if (atomic_load(&g.k) != SHARES) return;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hold;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &old);
    for (int n_frozen = 1; n_frozen <= 2; n_frozen++) {
        atomic_store(&frozen, 1);
        for (int f = 1; f <= n_frozen; f++) pthread_kill(g.thread[f], SIGUSR1);
        for (int ms = 0; ms < 5000 && atomic_load(&held) < n_frozen; ms++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        CHECK(atomic_load(&held) == n_frozen);
        for (int rep = 0; rep < 200; rep++) {
            who w;
            memset(&w, 0, sizeof w);
            nb_team_run(SHARES, record_share, &w);
            bool once = atomic_load(&w.bad_nt) == 0;
            for (int t = 0; t < SHARES; t++) once &= atomic_load(&w.calls[t]) == 1;
            for (int t = 0; t < SHARES; t++)
                for (int f = 1; f <= n_frozen; f++) once &= !pthread_equal(w.thread[t], g.thread[f]);
            CHECK(once);
            gang_seen h;
            memset(&h, 0, sizeof h);
            nb_team_gang(SHARES, gang_share, &h);
            CHECK(atomic_load(&h.k) >= 1 && atomic_load(&h.k) <= SHARES - n_frozen);
            if (!once) break;
        }
        atomic_store(&frozen, 0);
        for (int ms = 0; ms < 5000 && atomic_load(&held) > 0; ms++) nanosleep(&(struct timespec){0, 1000000}, NULL);
        CHECK(atomic_load(&held) == 0);
    }
    sigaction(SIGUSR1, &old, NULL);
}

/* The default size: the smallest of the mask, the quota and the rank's
 * part of the node; bound only when the launcher has not bound the rank. */
static void test_default_size(void)
{
    static const struct {
        nb_team_env e;
        nb_team_plan want;
    } cases[] = {
        {{0, 8, 8, 0, 0, -1}, {8, -1}},                                    /* the whole machine */
        {{0, 3, 8, 0, 0, -1}, {3, -1}},                                    /* an affinity mask */
        {{0, 8, 8, 2.0, 0, -1}, {2, -1}},                                  /* a container of two CPUs */
        {{0, 8, 8, 2.5, 0, -1}, {2, -1}},                                  /* part of a CPU is not a thread */
        {{0, 8, 8, 0.5, 0, -1}, {1, -1}}, {{0, 8, 8, 16, 0, -1}, {8, -1}}, /* a quota above the cores */
        {{4, 8, 8, 2, 2, 1}, {4, -1}},                                     /* NABLA_NUM_THREADS decides */
        {{0, 8, 8, 0, 2, 1}, {4, 4}},                                      /* two ranks: the second half */
        {{0, 8, 8, 0, 3, 2}, {2, 4}},                                      /* three ranks: two cores each */
        {{0, 2, 2, 0, 4, 3}, {1, -1}},  /* more ranks than cores: one each, unbound */
        {{0, 1, 8, 0, 2, 1}, {1, -1}},  /* bound by mpirun already */
        {{0, 8, 8, 4, 2, 0}, {2, 0}},   /* a quota shared by the ranks */
        {{0, 0, 0, 0, 0, -1}, {1, -1}}, /* nothing known */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        nb_team_plan p = nb_team_plan_for(&cases[i].e);
        if (p.n != cases[i].want.n || p.bind_first != cases[i].want.bind_first)
            printf("  case %zu: %d threads from %d, want %d from %d\n", i, p.n, p.bind_first, cases[i].want.n,
                   cases[i].want.bind_first);
        CHECK(p.n == cases[i].want.n && p.bind_first == cases[i].want.bind_first);
    }
}

static void test_fork(void)
{
#ifdef UNDER_TSAN
    printf("  skipped under ThreadSanitizer: it cannot start threads in a child forked from threads\n");
    return;
#endif
    pid_t pid = fork();
    if (pid == 0) { /* the parent's workers do not exist here */
        who w;
        memset(&w, 0, sizeof w);
        nb_team_run(SHARES, record_share, &w);
        _exit(atomic_load(&w.calls[1]) == 1 && atomic_load(&w.calls[2]) == 1 ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    setenv("NABLA_NUM_THREADS", "3", 1);
    RUN(test_team_run);
    RUN(test_gang);
    RUN(test_for);
    RUN(test_for_hands_work_on);
    RUN(test_barrier);
    RUN(test_nested);
    RUN(test_concurrent_callers);
    RUN(test_set_num_threads);
    RUN(test_frozen_workers);
    RUN(test_default_size);
    RUN(test_fork);
    return test_report();
}
