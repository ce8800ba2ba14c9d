/* The all-reduce of ranks that share one machine, through memory they all
 * map (an MPI-3 shared window), for the MPI communicator (comm_mpi.c).
 *
 * Open MPI's shared-memory transport moves a large message with one
 * process_vm_readv, which pins and walks the pages in the kernel: 5 GB/s
 * between the two cores of the machine of issue 43, where a plain load of
 * the other rank's memory reads 32 GB/s. On a two-rank MLP step the ring's
 * messages took a core about a millisecond, a fifth of the step; here every
 * byte moves in user space.
 *
 * An all-reduce runs in chunks of the slot each rank has in the window.
 * For each chunk every rank copies its values into its slot and, once all
 * have, sums every slot, in rank order, into its own buffer, or the part
 * of it the rank asked for (ZeRO's reduce-scatter sums a shard). A bucket
 * of several gradients is read where they lie and its sums written into
 * the gradients themselves (a program's buckets) or into new ones (the
 * eager DDP's), with no bucket buffer between: the same
 * operands in the same order everywhere, so every rank ends with the very
 * same bits. (With two ranks each reads the other's values once, as much
 * as a ring moves, and the chunk takes one exchange of counters instead of
 * a ring's two.) A chunk starts only when every rank has finished reading
 * the slots of the one before; all-reduces run one after the other, in the
 * order they were started, which is the same on every rank.
 *
 * Nothing here blocks but a nap: a test moves the queue on as far as the
 * other ranks' counters allow and returns. A rank that is gone stops its
 * counters, and comm.c's timeout and census report it. */
#ifndef NABLA_COMM_MPI_SHM_H
#define NABLA_COMM_MPI_SHM_H

#include <stdbool.h>
#include <stdint.h>
#include <mpi.h>
#include "nabla/status.h"
#include "nabla/dtype.h"

typedef struct nb_shm nb_shm;
typedef struct nb_shm_op nb_shm_op;

/* Collective over `comm`: maps the shared window when every rank of comm
 * is on this machine, every rank can and none has NABLA_COMM_SHM=0; else
 * *out is NULL (the caller keeps its ring). */
nb_status nb_shm_new(MPI_Comm comm, nb_shm **out);
/* Frees the window; collectively unless `alone` (a rank is gone). */
void nb_shm_free(nb_shm *s, bool alone);

/* Queues an all-reduce (sum) of values of dt (float32 or float64) spread
 * over n parts: counts[i] values read from src[i], their sums written to
 * dst[i] (src[i] itself, or memory apart from every src). Each src is read
 * when its chunk starts, which may be after this returns, and each dst
 * written before the op completes: both stay valid till then. This rank
 * sums, and writes, only values [keep_lo, keep_hi) of the parts taken one
 * after another (all of them for an all-reduce; its own block for a
 * reduce-scatter, which every rank may choose for itself). */
nb_status nb_shm_allreduce(nb_shm *s, int n, const void *const *src, void *const *dst, const int64_t *counts,
                           nb_dtype dt, int64_t keep_lo, int64_t keep_hi, nb_shm_op **out);
/* Moves the queue on; true once op is complete, which frees it. */
bool nb_shm_test(nb_shm *s, nb_shm_op *op);
/* Sleeps until another rank has moved on, so that the queue may move, or
 * `seconds` have passed: a rank that waits for one whose core another job
 * holds leaves its own core idle, for the scheduler to move that rank
 * onto. */
void nb_shm_nap(nb_shm *s, double seconds);
/* Forgets an op that timed out (the window is not used again). */
void nb_shm_abandon(nb_shm *s, nb_shm_op *op);

#endif
