/* nabla/comm.h: communicators, for data-parallel training over processes.
 *
 * A communicator joins `size` processes, numbered 0..size-1 (the rank), that
 * run the same program on different data and meet in collective calls:
 * every rank must make the same calls, on buffers of the same dtype and
 * length, in the same order. Two kinds, behind one small interface:
 *
 *   - the single-process communicator, always built: rank 0 of 1, every
 *     collective is the identity. A program made for data parallelism runs
 *     on it unchanged.
 *   - MPI (MPI_COMM_WORLD), built when the MPI library was found at
 *     configure time (Debian: libopenmpi-dev; `nabla --version` lists "mpi"
 *     among the features). Run the processes with `mpirun -np N prog`.
 *
 *     nb_comm *c;
 *     bool mine;
 *     nb_comm_init_mpi(&c, &mine);         // or nb_comm_init_single(&c)
 *     nb_comm_allreduce_sum(c, grad);      // in place, on every rank
 *     nb_comm_free(c);                     // finalises MPI if `mine`
 *
 * Collectives never hang forever: each waits at most the communicator's
 * timeout (nb_comm_set_timeout; 300 s by default, or $NABLA_COMM_TIMEOUT
 * seconds), then fails with an error naming the call, since a rank that died
 * or took another path will never join. In the last quarter of the timeout
 * (at most its last 2 s) a waiting rank asks every other whether it is
 * there, and the ranks waiting in any collective answer; the error names
 * the ranks that did not ("rank 2 is lost": dead, stopped, or busy outside
 * nabla's collectives), or says that all answered (they are in different
 * collectives). So when a rank is killed, every other rank stops within the
 * timeout naming it, provided the launcher leaves them running (plain
 * mpirun ends the whole job itself at once; `mpirun --enable-recovery`
 * leaves it to nabla). After such a failure the communicator is unusable,
 * and nb_comm_free does not finalise MPI (MPI_Finalize would wait for the
 * lost rank): the process should exit. MPI's own errors come back as an
 * nb_status carrying MPI's message.
 *
 * Data parallelism builds on this: nb_data_parallel and nb_ddp
 * (nabla/data_parallel.h), nb_reader_shard (nabla/reader.h), nb_train_config.comm. */
#ifndef NABLA_COMM_H
#define NABLA_COMM_H

#include "nabla/export.h"

#include <stdbool.h>
#include <stdint.h>
#include "nabla/tensor.h"

NB_BEGIN_DECLS

typedef struct nb_comm nb_comm;
typedef struct nb_comm_request nb_comm_request;

/* Rank 0 of 1. */
NB_API nb_status nb_comm_init_single(nb_comm **out);
/* Whether this build has MPI. */
NB_API bool nb_comm_have_mpi(void);
/* MPI_COMM_WORLD. If the caller already initialised MPI, it is used as it is
 * and left initialised; otherwise this initialises it (MPI_Init_thread,
 * MPI_THREAD_FUNNELED: call nabla's collectives from one thread) and
 * nb_comm_free finalises it. *initialised_here (may be NULL) says which.
 * Errors of MPI calls on it are returned, not fatal (MPI_ERRORS_RETURN).
 * NB_ERR_UNSUPPORTED in a build without MPI. */
NB_API nb_status nb_comm_init_mpi(nb_comm **out, bool *initialised_here);
NB_API void nb_comm_free(nb_comm *c); /* NULL is fine */

NB_API int nb_comm_rank(const nb_comm *c);
NB_API int nb_comm_size(const nb_comm *c);
NB_API const char *nb_comm_kind(const nb_comm *c); /* "single" or "mpi" */
/* How its all-reduces travel: "none" (one process), "shared memory" (MPI
 * ranks that are all on one machine: the sums are read straight from each
 * other's memory; NABLA_COMM_SHM=0 on every rank turns it off) or "ring"
 * (MPI messages; ranks on several hosts). */
NB_API const char *nb_comm_transport(const nb_comm *c);
/* How long a collective waits for the other ranks (seconds > 0). */
NB_API void nb_comm_set_timeout(nb_comm *c, double seconds);
NB_API double nb_comm_timeout(const nb_comm *c);

/* Every rank's t (contiguous float32 or float64, the same shape everywhere)
 * becomes the elementwise sum over the ranks. */
NB_API nb_status nb_comm_allreduce_sum(nb_comm *c, nb_tensor *t);
/* The same, started: t must not be read or written until nb_comm_wait on
 * the request returns. Requests complete in any order but must be started
 * in the same order on every rank. */
NB_API nb_status nb_comm_allreduce_sum_async(nb_comm *c, nb_tensor *t, nb_comm_request **req);
/* Whether it has completed (it then still needs nb_comm_wait). */
NB_API nb_status nb_comm_test(nb_comm_request *req, bool *done);
/* Waits for it (at most the timeout) and frees it, also on failure. */
NB_API nb_status nb_comm_wait(nb_comm_request *req);
/* Every rank's t (contiguous, any dtype) becomes rank `root`'s. */
NB_API nb_status nb_comm_broadcast(nb_comm *c, nb_tensor *t, int root);
NB_API nb_status nb_comm_barrier(nb_comm *c);
/* Collective: whether every rank passed the same hash (of its model's
 * parameter names and shapes, say). If not, fails on every rank with an
 * error that names `what` and each rank whose hash differs from rank 0's. */
NB_API nb_status nb_comm_check_same(nb_comm *c, const char *what, uint64_t hash);
/* FNV-1a of n bytes, continuing from h (start with NB_HASH_INIT): the hash
 * nabla uses for nb_comm_check_same. */
#define NB_HASH_INIT 0xcbf29ce484222325ULL
NB_API uint64_t nb_hash_bytes(uint64_t h, const void *p, size_t n);

/* ---- rings: the communicators of collective ops ------------------------------
 *
 * The collective ops of static programs (c_allreduce_sum, c_allreduce_start
 * and c_allreduce_wait, c_broadcast) name
 * their communicator by a ring id (an int attribute, so that programs saved
 * to files keep it). Ring 0 is the single-process communicator until
 * something else is set: set the MPI one before running such a program. The
 * communicator is not owned; unset it (NULL) before freeing it. */
NB_API nb_status nb_comm_set_ring(int ring, nb_comm *c);
NB_API nb_comm *nb_comm_ring(int ring); /* NULL, with an error, for an unset ring other than 0 */
#define NB_COMM_MAX_RINGS 16

/* What the all-reduces of collective ops did on c since it was made.
 * c_allreduce_sum completes where it stands, so all of its time is waited;
 * c_allreduce_start leaves its all-reduce open while the ops after it run,
 * until c_allreduce_wait (how nb_data_parallel overlaps the gradients'
 * all-reduces with the rest of the backward pass). */
typedef struct nb_comm_stats {
    int64_t allreduces;     /* completed */
    double bytes;           /* all-reduced, in all */
    double comm_seconds;    /* while at least one all-reduce was open (from its start to its completion) */
    double overlap_seconds; /* the part of comm_seconds while other ops ran: hidden behind them */
    double wait_seconds;    /* blocked in c_allreduce_sum and c_allreduce_wait */
    /* overlap_seconds / comm_seconds (0 before the first all-reduce). An
     * open all-reduce's completion is seen between ops, so comm_seconds can
     * run a little long. */
    double hidden_fraction;
} nb_comm_stats;
NB_API void nb_comm_stats_get(const nb_comm *c, nb_comm_stats *s);

NB_END_DECLS

#endif
