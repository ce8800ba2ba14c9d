/* The CPU kernels' own thread team: threads that spin briefly when a run
 * ends, then sleep on a futex until the next one, so that an idle team
 * costs nothing and a busy one starts its next run at once. (GNU OpenMP's
 * idle threads spin with `pause` for milliseconds, which on a virtual
 * machine that traps pause loops cost the step up to half its time.)
 *
 * The team has nb_team_size() threads, the caller counted: NABLA_NUM_THREADS,
 * else OMP_NUM_THREADS, else the CPUs this process may run on. One run at a
 * time: a run started inside a run, or from a second thread while another
 * holds the team, runs on its caller alone (fn sees nt == 1). */
#ifndef NABLA_KERNELS_CPU_TEAM_H
#define NABLA_KERNELS_CPU_TEAM_H

#include <stdbool.h>
#include <stdint.h>

int nb_team_size(void);
/* Whether the calling thread is running a share of a team run. */
bool nb_team_busy(void);

/* Runs fn(ctx, t, nt) for t in [0, nt) on nt threads (the caller takes
 * t = 0) and returns when every share has returned. nt is clipped to the
 * team's size. */
typedef void (*nb_team_fn)(void *ctx, int t, int nt);
void nb_team_run(int nt, nb_team_fn fn, void *ctx);
/* Inside a share: waits until all nt shares of the run have reached it. */
void nb_team_barrier(int nt);

/* fn(ctx, lo, hi) over [0, n) in contiguous ranges, run by the team when
 * `par` (and the team is free), else as fn(ctx, 0, n). Each thread has a
 * part of [0, n) and runs it in a few pieces; one that finishes its own
 * takes the pieces left of the others', so fn may see several ranges on
 * one thread, in any order, and must not depend on which thread runs
 * which. */
typedef void (*nb_range_fn)(void *ctx, int64_t lo, int64_t hi);
void nb_team_for(int64_t n, bool par, nb_range_fn fn, void *ctx);

#endif
