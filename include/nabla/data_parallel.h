/* nabla/data_parallel.h: data-parallel training, static and eager.
 *
 * N processes (ranks of a communicator, nabla/comm.h) each hold the whole
 * model and take 1/N of every batch (nb_reader_shard, nabla/reader.h). After
 * each backward pass the gradients are averaged over the ranks, so every
 * rank applies the same update and the parameters stay identical: N ranks
 * with batch B/N each compute what one process computes with batch B (for
 * models whose loss is a mean over the batch and that have no batch
 * statistics, such as batch norm, which sees only its rank's share).
 *
 * Gradients travel in buckets: consecutive gradients, in the order the
 * backward pass finishes them, packed together up to bucket_bytes, so that
 * one all-reduce carries many small ones. Every rank forms the same buckets
 * and reduces them in the same order. The first bucket is capped at 1 MiB
 * (as PyTorch's DDP does: the gradients of the last layers come first, and
 * a bucket's all-reduce can start only once it is full). With bucket_bytes
 * 0 the others are sized to the model, about a quarter of its gradient
 * bytes each (at least 256 KiB, at most NB_DEFAULT_BUCKET_BYTES), so that
 * a model of a few megabytes gets several all-reduces that run while the
 * gradients after them are computed; a nonzero bucket_bytes caps every
 * bucket. */
#ifndef NABLA_DATA_PARALLEL_H
#define NABLA_DATA_PARALLEL_H

#include "nabla/export.h"

#include "nabla/autodiff.h"
#include "nabla/comm.h"

NB_BEGIN_DECLS

/* PyTorch DDP's default bucket size. */
#define NB_DEFAULT_BUCKET_BYTES ((size_t)25 << 20)

/* ---- static programs (PaddlePaddle's collective mode) --------------------------
 *
 * nb_data_parallel rewrites a program that nb_append_backward has given
 * its gradient part (nb_minimize calls it when nb_optimizer.data_parallel is
 * set, between the two, so the optimiser reads averaged gradients):
 *  - the op seeding loss@GRAD is scaled by 1/nranks (its `value` attribute),
 *    so every gradient becomes this rank's share of the average;
 *  - right after the op that finishes the last gradient of each bucket, a
 *    c_allreduce_start op (role backward) starts the sum of the bucket's
 *    gradients over the ranks, in place, and the backward ops after it run
 *    while the ranks exchange; at the end of the backward part, one
 *    c_allreduce_wait per bucket, in bucket order, completes it before the
 *    optimiser reads its gradients (nb_minimize moves each parameter's
 *    update up to its bucket's wait, so the updates of the first buckets
 *    run while the last one's all-reduce is still open; not when clipping
 *    by global norm, which needs every gradient first). A
 *    bucket that a later op of the block reads or writes (or every bucket,
 *    with opts.synchronous) gets a c_allreduce_sum, which completes where
 *    it stands. nb_comm_stats_get (nabla/comm.h) on the ring's communicator
 *    says how much of the communication the backward pass hid;
 *  - at the end of `startup`, one c_broadcast op gives every parameter of
 *    `main` rank `root`'s initial values, after checking that all ranks
 *    have the same parameters (a hash of their names, dtypes and shapes): a
 *    rank whose model differs makes every rank fail with an error naming it.
 * The ops name their communicator by ring (nb_comm_set_ring), so the
 * rewritten programs can be saved and run later; on the single-process
 * communicator (ring 0's default) they run as one process.
 *
 * `grads` is nb_append_backward's result for `loss`. */
typedef struct nb_data_parallel_opts {
    int nranks;          /* how many ranks will run it (nb_comm_size): the gradients are averaged over them */
    int ring;            /* the ring of the collective ops (nb_comm_set_ring); 0 by default */
    size_t bucket_bytes; /* the most bytes of gradients one all-reduce carries; 0: NB_DEFAULT_BUCKET_BYTES */
    int root;            /* the rank whose initial parameters every rank takes; 0 by default */
    bool synchronous;    /* every all-reduce completes where it stands (no overlap with the backward pass) */
} nb_data_parallel_opts;

NB_API nb_status nb_data_parallel(nb_program *main, nb_program *startup, const char *loss,
                                  const nb_backward_result *grads, const nb_data_parallel_opts *opts);

/* ---- the eager tape (PyTorch's DistributedDataParallel) ------------------------
 *
 *     // the model's parameters exist (run it once, or create them with nb_param)
 *     nb_ddp *d;
 *     nb_ddp_new(&d, comm, eager, 0);            // broadcasts them from rank 0
 *     for (each batch of this rank's shard) {
 *         nb_value loss = model(eager, ...);
 *         nb_ddp_backward(d, nb_eager_tensor(loss)); // nb_backward, gradients averaged
 *         nb_eager_optimizer_step(o, eager);
 *         nb_eager_zero_grad(eager);
 *         nb_eager_release_values(eager);
 *     }
 *     nb_ddp_free(d);
 *
 * nb_ddp_new takes the builder's parameters as they are (nb_eager_param_at:
 * all of them, in creation order), checks that every rank has the same ones
 * (names, dtypes, shapes; a rank that differs makes every rank fail, naming
 * it), copies rank 0's values to every rank, and gives the builder's random
 * generator a stream of the rank's own (rank 0 keeps its stream), so that
 * dropout draws differently on each rank. Buckets are formed from the
 * parameters in reverse creation order (the order backward tends to finish
 * them).
 *
 * nb_ddp_backward runs nb_backward(loss), seeded with 1/N on N ranks (so
 * that the sums the all-reduces make are the averages, as the static
 * program scales its loss gradient), with a post-accumulate hook on
 * every parameter: when the last gradient of a bucket is ready, the bucket's
 * all-reduce starts, while the rest of the backward pass runs; buckets start
 * in order. At the end it starts the buckets left (a parameter the loss did
 * not reach contributes zeros), waits for all, and sets each parameter's
 * .grad to the average over the ranks (a new tensor: one that other code
 * still holds is not overwritten). Only nb_ddp_backward triggers the hooks:
 * a plain nb_backward is not synchronised.
 *
 * Open MPI moves a nonblocking collective on only inside MPI calls, so the
 * hooks also test every open all-reduce: the communication progresses on
 * the rank's own thread, between the backward ops, with no second thread
 * to compete with the compute for a core. */
typedef struct nb_ddp nb_ddp;

typedef struct nb_ddp_stats {
    int64_t steps;           /* nb_ddp_backward calls */
    int64_t allreduces;      /* bucket all-reduces started */
    int n_buckets;           /* per step */
    double bytes;            /* all-reduced, in all */
    double backward_seconds; /* inside nb_backward */
    double comm_seconds;     /* while at least one all-reduce was open (from its start to its completion) */
    double overlap_seconds;  /* the part of comm_seconds before the backward pass ended (in nb_ddp_step:
                                before each bucket's wait began, behind the earlier buckets' updates) */
    double wait_seconds;     /* blocked after the backward pass (or in nb_ddp_step), waiting for the all-reduces */
    /* How much of the communication the backward pass hid:
     * overlap_seconds / comm_seconds (0 before the first all-reduce). An
     * all-reduce's completion is seen at the next test (a hook, or the
     * wait), so comm_seconds can run a little long. */
    double hidden_fraction;
    /* ZeRO stage 1 (nb_ddp_shard_optimizer), 0 without it: the optimiser
     * state this rank holds (nb_eager_optimizer_state_bytes of its shard),
     * the values of its shard, and the seconds of nb_ddp_step's all-gather. */
    int64_t optimizer_state_bytes;
    int64_t shard_numel;
    double gather_seconds;
} nb_ddp_stats;

NB_API nb_status nb_ddp_new(nb_ddp **out, nb_comm *c, nb_builder *eager, size_t bucket_bytes);
NB_API nb_status nb_ddp_backward(nb_ddp *d, nb_tensor *loss);
NB_API void nb_ddp_stats_get(const nb_ddp *d, nb_ddp_stats *s);
NB_API int nb_ddp_bucket_count(const nb_ddp *d);
/* The bucket of the builder's i-th parameter (0 starts first). */
NB_API int nb_ddp_bucket_of(const nb_ddp *d, int param);
NB_API void nb_ddp_free(nb_ddp *d); /* removes the hooks; NULL is fine */

/* ---- the update while the last all-reduces run ----------------------------------
 *
 * After a plain nb_ddp_backward every all-reduce has completed, and the
 * last bucket's (the first layers' gradients, the last backward makes)
 * had nothing left to hide behind. Given the optimiser, nb_ddp steps it
 * itself, as the static program does:
 *
 *     nb_ddp_set_optimizer(d, o);                 // o: nb_eager_optimizer_new's
 *     for (each batch of this rank's shard) {
 *         nb_ddp_backward(d, nb_eager_tensor(loss)); // leaves the buckets open
 *         nb_ddp_step(d);                         // instead of nb_eager_optimizer_step
 *         nb_eager_zero_grad(eager);
 *         nb_eager_release_values(eager);
 *     }
 *
 * nb_ddp_backward then returns with the all-reduces started but not all
 * complete, and nb_ddp_step takes the buckets in order: it waits for each,
 * gives its parameters their averaged gradients and updates them with o
 * (the same update ops, learning rate and state as nb_eager_optimizer_step
 * after a plain nb_ddp_backward, so the same numbers, to the bit), while
 * the later buckets' all-reduces go on. Until nb_ddp_step returns, the
 * gradients of the buckets not reached yet are this rank's own: read them
 * after it. While set, nb_eager_optimizer_step(o) is refused (it would
 * read them). Clipping by global norm needs every gradient first and is
 * refused, and so are an optimiser for a sharded ddp, one another ddp
 * steps, and a change between a backward and its step. o stays the
 * caller's (nb_eager_optimizer_steps, _lr and _state_bytes read it as
 * before) and must outlive d, or be unset with NULL. A backward whose
 * step did not come makes the next nb_ddp_backward fail (after completing
 * its all-reduces, so that no rank is left in them; nb_ddp_free completes
 * them too). */
struct nb_eager_optimizer; /* nabla/optimizer.h, a layer above */
NB_API nb_status nb_ddp_set_optimizer(nb_ddp *d, struct nb_eager_optimizer *o);

/* ---- ZeRO stage 1: the optimiser's state sharded over the ranks ----------------
 *
 * As DeepSpeed's stage 1 and llm.c do: the model's parameters, in the
 * order of the buckets, form one vector of n values, cut into one
 * contiguous shard per rank (rank r: values [n*r/N, n*(r+1)/N)). Each rank
 * keeps the optimiser state (Adam's moments, ...) of its shard only, so
 * 1/N of it:
 *
 *     nb_ddp_new(&d, comm, eager, 0);
 *     nb_ddp_shard_optimizer(d, &opt);          // instead of nb_eager_optimizer_new
 *     for (each batch of this rank's shard) {
 *         nb_ddp_backward(d, nb_eager_tensor(loss));
 *         nb_ddp_step(d);                        // instead of nb_eager_optimizer_step
 *         nb_eager_zero_grad(eager);
 *         nb_eager_release_values(eager);
 *     }
 *
 * nb_ddp_backward then leaves the averages of its shard's gradients in its
 * buckets (each parameter's .grad keeps this rank's own, divided by N,
 * since backward is seeded with 1/N); nb_ddp_step updates its shard of
 * the parameters with an eager optimiser of `opt` (the same update ops,
 * so the same numbers as nb_eager_optimizer_step after a plain
 * nb_ddp_backward, to the bit), and
 * gathers the shards: every rank broadcasts its own, and every parameter
 * gets the updated values (its version bumped, as an in-place update).
 *
 * Needs every parameter of one dtype, at least N values in all, and an
 * optimiser whose update is elementwise: clipping by norm or global norm
 * needs whole gradients and is refused, and so is a parameter that does not
 * require grad (ZeRO would update it). Where the ranks share a machine
 * (nb_comm_transport "shared memory") the gradients are reduce-scattered:
 * every rank reads every rank's gradients but sums its shard's alone; over
 * the ring (ranks on several hosts) they are all-reduced, twice the bytes
 * a reduce-scatter would move. */
struct nb_optimizer; /* nabla/optimizer.h, a layer above */
NB_API nb_status nb_ddp_shard_optimizer(nb_ddp *d, const struct nb_optimizer *opt);
/* The update of a step, after nb_ddp_backward; collective: the sharded
 * one (nb_ddp_shard_optimizer), or the set optimiser's, bucket by bucket
 * (nb_ddp_set_optimizer). */
NB_API nb_status nb_ddp_step(nb_ddp *d);

NB_END_DECLS

#endif
