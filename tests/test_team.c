/* The kernels' thread team (src/kernels/cpu/team.h): every share of a run
 * runs once, on its own thread; ranges cover [0, n) exactly once, and a
 * thread that finishes its part takes what is left of a slow one's; a barrier
 * holds every share until all have reached it; a run inside a share, or
 * from a second thread while the team is taken, runs on its caller alone;
 * a forked child gets a team of its own. The team has three threads here
 * (NABLA_NUM_THREADS, set before its first use), more than this machine may
 * have cores, so that shares really interleave. */
#include <pthread.h>
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
        CHECK(!pthread_equal(w.thread[1], w.thread[2]) && !pthread_equal(w.thread[1], pthread_self()));
        if (!once) break;
    }
    /* more shares than the team has: clipped to its size */
    who w;
    memset(&w, 0, sizeof w);
    nb_team_run(SHARES + 5, record_share, &w);
    CHECK(atomic_load(&w.bad_nt) == 0 && atomic_load(&w.calls[2]) == 1);
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
        for (int ms = 0; ms < 5000 && !atomic_load(&s->taken_from_caller); ms++) nanosleep(&(struct timespec){0, 1000000}, NULL);
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
    _Atomic int wrong;
} phases;

static void phased(void *arg, int t, int nt)
{
    phases *p = arg;
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
    nb_team_run(SHARES, phased, &p);
    CHECK(atomic_load(&p.wrong) == 0);
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
    RUN(test_for);
    RUN(test_for_hands_work_on);
    RUN(test_barrier);
    RUN(test_nested);
    RUN(test_concurrent_callers);
    RUN(test_set_num_threads);
    RUN(test_fork);
    return test_report();
}
