/* The CPU kernels' own thread team. A run's shares are claimed by
 * whichever thread comes first, the caller included, so a run never waits
 * for a worker that is not running: on a machine whose other cores are
 * taken, the caller does the shares itself. Idle workers spin briefly when
 * a run ends, then sleep on a futex until the next one, so that an idle team
 * costs nothing and a busy one starts its next run at once. (GNU OpenMP's
 * idle threads spin with `pause` for milliseconds, which on a virtual
 * machine that traps pause loops cost the step up to half its time.)
 *
 * The team has nb_team_size() threads, the caller counted (team_size.c says
 * how many by default). One run at a time: a run started inside a run, or
 * from a second thread while another holds the team, runs on its caller
 * alone (fn sees nt == 1). */
#ifndef NABLA_KERNELS_CPU_TEAM_H
#define NABLA_KERNELS_CPU_TEAM_H

#include <stdbool.h>
#include <stdint.h>

int nb_team_size(void);
/* Whether the calling thread is running a share of a team run. */
bool nb_team_busy(void);

/* Runs fn(ctx, t, nt) once for each t in [0, nt) and returns when every
 * share has returned; the caller runs t = 0 and every share no worker has
 * claimed, so two shares may run on one thread one after the other, and a
 * share must never wait for another (no nb_team_barrier). nt is clipped to
 * the team's size. */
typedef void (*nb_team_fn)(void *ctx, int t, int nt);
void nb_team_run(int nt, nb_team_fn fn, void *ctx);
/* The same for shares that wait for each other: fn(ctx, t, k) for t in
 * [0, k), each on its own thread, all running at once, where k <= nt is the
 * number of threads that joined within a few microseconds (k == 1: the
 * caller alone, as a worker that is late would hold up every barrier). */
void nb_team_gang(int nt, nb_team_fn fn, void *ctx);
/* How long a gang waits for workers to join (0: the default, 10 us, or
 * 100 us when it had to wake them on a machine not found busy). For tests,
 * which need full gangs on a loaded machine. */
void nb_team_set_gang_wait(uint64_t ns);
/* Inside a share of nb_team_gang: waits until all nt shares have reached it. */
void nb_team_barrier(int nt);

/* The team's size when nb_set_num_threads has not set it, read once, on
 * first use (team_size.c says how); under MPI it may bind the calling
 * thread to this rank's cores, and nb_team_bind_self binds a worker to the
 * same. */
int nb_team_default_size(void);
void nb_team_bind_self(void);

/* What the default size is decided from, and what it decides (a pure
 * function, so that tests can give it any machine). */
typedef struct nb_team_env {
    int explicit_n; /* NABLA_NUM_THREADS, else OMP_NUM_THREADS; 0: unset */
    int cpus;       /* in the affinity mask; 0: unknown */
    int online;     /* CPUs online */
    double quota;   /* the cgroup's CPU quota in CPUs; 0: none */
    int local_size; /* MPI ranks on this node; 0: not under MPI */
    int local_rank; /* this rank among them */
} nb_team_env;
typedef struct nb_team_plan {
    int n;          /* threads */
    int bind_first; /* bind to the mask's CPUs bind_first .. + n - 1; -1: do not bind */
} nb_team_plan;
nb_team_plan nb_team_plan_for(const nb_team_env *e);

/* fn(ctx, lo, hi) over [0, n) in contiguous ranges, run by the team when
 * `par` (and the team is free), else as fn(ctx, 0, n). Each thread has a
 * part of [0, n) and runs it in a few pieces; one that finishes its own
 * takes the pieces left of the others', so fn may see several ranges on
 * one thread, in any order, and must not depend on which thread runs
 * which. */
typedef void (*nb_range_fn)(void *ctx, int64_t lo, int64_t hi);
void nb_team_for(int64_t n, bool par, nb_range_fn fn, void *ctx);

#endif
