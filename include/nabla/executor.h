/* nabla/executor.h: running a program, many times, fast.
 *
 * Preparing a program checks it, resolves every var name to a slot, infers
 * shapes and plans memory by liveness, so that temporaries whose lifetimes do
 * not overlap share buffers. A run then binds feeds, runs the ops in order and
 * hands out fetches; when the feed shapes are those of the last run it
 * allocates nothing.
 *
 * Persistable vars are read from and written to the scope given to the run.
 * A fetched tensor is a reference you own; if you still hold it when the
 * program runs again, that run writes to a fresh buffer instead of yours. */
#ifndef NABLA_EXECUTOR_H
#define NABLA_EXECUTOR_H

#include "nabla/export.h"

#include "nabla/program.h"
#include "nabla/scope.h"

NB_BEGIN_DECLS

typedef struct nb_feed {
    const char *name;
    nb_tensor *tensor;
} nb_feed;

/* A list of feeds: NB_FEEDS({"x", x}, {"label", y}) in C. */
typedef struct nb_feeds {
    int n;
    const nb_feed *v;
} nb_feeds;
/* The array behind the list is a compound literal, which lives only until
 * the end of the enclosing block: pass the list to a call, or keep it in a
 * variable used only inside that block (one made in an `if` and used after
 * it points at dead stack). */
#define NB_FEEDS(...) ((nb_feeds){(int)(sizeof((nb_feed[]){__VA_ARGS__}) / sizeof(nb_feed)), (nb_feed[]){__VA_ARGS__}})
#define NB_FEEDS_N(count, array) ((nb_feeds){(count), (array)})
#define NB_NO_FEEDS ((nb_feeds){0, 0})

typedef struct nb_prepared nb_prepared;

/* Prepares block `block_idx` of `p` for runs with the named feeds and
 * fetches. The program must not change while the prepared form is used. */
NB_API nb_status nb_prepare(nb_prepared **out, nb_program *p, int block_idx, nb_names feeds, nb_names fetches);
NB_API void nb_prepared_free(nb_prepared *pp);
/* Runs it: feeds[i] binds feed_names[i]; fetched[i] receives fetch_names[i]
 * (a new reference each). */
NB_API nb_status nb_prepared_run(nb_prepared *pp, nb_scope *scope, nb_tensor *const *feeds, nb_tensor **fetched);
/* Bytes of temporary buffers it holds, and how many it allocated over its
 * life (to show that steady-state runs allocate nothing). */
NB_API size_t nb_prepared_buffer_bytes(const nb_prepared *pp);
NB_API uint64_t nb_prepared_alloc_count(const nb_prepared *pp);
/* Where a prepared program's memory goes, read after at least one run, or
 * after nb_prepare where the program gives every temporary's shape in full
 * (no -1 dim): the sizes of temporaries are known then, and the buffers are
 * planned by them before the first run; before, they count as 0. The
 * temporaries (values no scope holds) live from the op that writes them to
 * the last op that reads them; the executor keeps them in buffers it plans by
 * that liveness and holds from run to run, so the bytes it holds for them
 * are planned_bytes. */
typedef struct nb_memory_report {
    size_t peak_bytes;        /* the most temporary bytes live at once during a run (a fused group's own
                              values take none: nb_fusion_groups) */
    int peak_op;              /* the position, in the block, of the op at that peak */
    const char *peak_vars[8]; /* the largest temporaries live there (valid while pp lives) */
    size_t peak_var_bytes[8];
    int n_peak_vars;
    size_t planned_bytes;    /* the planned buffers: what the executor holds for temporaries */
    size_t fetched_bytes;    /* fetched temporaries, in storage of their own */
    size_t unplanned_bytes;  /* what one buffer per temporary would take (no reuse) */
    size_t scope_bytes;      /* the scope values the block reads or writes (parameters, optimiser state) */
    size_t role_bytes[5];    /* temporaries by the role of the op that writes them (nb_op_role) */
    size_t activation_bytes; /* what the forward part leaves for the backward part: temporaries written
                                before the first backward op and read at or after it (what recomputation
                                trades for compute); 0 for a block without backward ops */
    int n_temporaries, n_buffers;
} nb_memory_report;
NB_API nb_status nb_prepared_memory(const nb_prepared *pp, nb_scope *scope, nb_memory_report *report);

/* Random ops (dropout, random initialisers) draw numbers that depend only on
 * their seed and the index of the run (0 for the first). Setting the index
 * replays a run: resuming training at step k, set it to k. */
NB_API uint64_t nb_prepared_run_index(const nb_prepared *pp);
NB_API void nb_prepared_set_run_index(nb_prepared *pp, uint64_t index);
/* A stream of random numbers of its own for block 0's random ops: stream 0
 * (the default) draws what is described above, every other stream
 * something else, as reproducibly. Data-parallel training gives rank r
 * stream r, so that dropout differs across ranks. */
NB_API void nb_prepared_set_stream(nb_prepared *pp, uint64_t stream);

/* Fusion. Consecutive elementwise ops over one shape (an activation and
 * the few ops of its gradient, a recurrent cell's gates) run as one pass
 * over slices of their elements that stay in cache; a value only they use
 * never takes memory of its own. Results are those of the ops run one by
 * one: each op still computes every element with its own kernel's loop. The
 * environment variable NABLA_FUSE=0, read when a program is prepared, turns
 * it off.
 *
 * nb_fusion_groups writes, for each op of block `block_idx`, the index of
 * the group it would run in, or -1 (group has one entry per op), and returns
 * the number of groups, or -1 with the error set. It judges by the vars'
 * declared shapes; a run whose shapes turn out to break a group (an input
 * broadcast along a dimension declared -1) runs its ops one by one.
 * nb_prepared_fused_steps says how many steps the last run ran fused. */
NB_API int nb_fusion_groups(const nb_program *p, int block_idx, int *group);
NB_API int nb_prepared_fused_steps(const nb_prepared *pp);
/* Update folding. Where plain sgd is the only reader of a weight gradient
 * that one matmul of matrices makes (a linear layer's dW = X^T @ dY), the
 * prepared program runs the two as one step, the op matmul_sgd: its GEMM
 * adds -lr * X^T @ dY onto the weight, and the gradient is never stored.
 * It folds only where no one can tell: the gradient is not fetched and has
 * no other reader, and no op between the product and the update touches
 * the weight or writes the learning rate. The weights differ from the
 * separate update's by float rounding. NABLA_FOLD=0, read when a program is
 * prepared, turns it off. nb_prepared_folded_updates says how many updates
 * a prepared program folds. */
NB_API int nb_prepared_folded_updates(const nb_prepared *pp);
/* nb_program_to_dot (nabla/program.h) with each group of block 0 drawn
 * as a dashed cluster named "fused N"; `nabla dot --fused` draws this. */
NB_API nb_status nb_program_to_dot_fused(const nb_program *p, FILE *f);

/* An executor caches prepared programs, keyed on the program, its version
 * and the feed and fetch names, so that calling nb_executor_run in a loop
 * prepares once. */
typedef struct nb_executor nb_executor;

NB_API nb_status nb_executor_new(nb_executor **out);
NB_API void nb_executor_free(nb_executor *e);
/* Runs block 0 of `p` (prepared on the first call for these names):
 * feeds.v[i].tensor binds the var feeds.v[i].name, and fetched[i], an array
 * of fetches.n that the caller provides (NULL only when fetches.n is 0),
 * receives a new reference to fetches.v[i]'s value, which the caller
 * releases. Returns NB_OK, or the status of the first failure (a bad
 * argument, a program that does not prepare, an op that fails) with
 * nb_last_error() saying what and where; then every fetched[i] is NULL. */
NB_API nb_status nb_executor_run(nb_executor *e, nb_program *p, nb_scope *scope, nb_feeds feeds, nb_names fetches,
                                 nb_tensor **fetched);

NB_END_DECLS

#endif
