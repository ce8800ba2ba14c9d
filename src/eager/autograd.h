/* Private structures of eager mode: the autograd state a tensor may carry,
 * backward nodes and their edges. */
#ifndef NABLA_AUTOGRAD_H
#define NABLA_AUTOGRAD_H

#include "nabla/eager.h"
#include "../core/strmap.h"
#include "nabla/op.h"

typedef struct nb_edge {
    nb_node *node; /* NULL: no gradient flows there */
    int nr;        /* which of that node's outputs (its input buffer slot) */
} nb_edge;

typedef struct hook_list {
    int n, cap;
    void **fns;
    void **ctxs;
} hook_list;

typedef enum { NODE_OP, NODE_ACCUMULATE, NODE_FN } node_kind;

/* A NODE_FN's backward (nb_checkpoint's): the gradients of its inputs
 * (dx[k] for want[k], new references or NULL) from those of its outputs
 * (dy entries may be NULL). create_graph: the backward is being recorded. */
typedef nb_status (*nb_node_fn)(void *ctx, int n_out, nb_tensor *const *dy, int n_in, const bool *want, nb_tensor **dx,
                                bool create_graph);
typedef struct nb_fn_part {
    nb_node_fn fn;
    void *ctx; /* freed with the saved values (NULL after) */
    void (*free)(void *);
    const char *name;
} nb_fn_part;

/* The node's hooks (nb_node_register_pre_hook, _post_hook), made on first
 * use: few nodes have any. */
typedef struct node_hooks {
    hook_list pre, post;
} node_hooks;

/* The fields the backward reads for every node come first, so that a node
 * it visits costs as few cache lines as possible: a tape longer than the
 * cache holds is read from memory, node by node. */
struct nb_node {
    int refcount;
    node_kind kind;
    int n_in, n_out;
    /* engine scratch, valid during one graph task */
    int deps;
    int index;     /* in the task's list of nodes */
    int capture;   /* nb_autograd_grad: index of the input captured here + 1, or 0 */
    bool needed;   /* nb_autograd_grad: on a path to a requested input */
    bool released; /* its saved values are gone */
    uint64_t task;
    nb_tensor **buffer; /* per output (one for accumulators); the task's, from its chunks */
    nb_edge *next;      /* per input; right after this struct (node_new) */
    /* NODE_OP */
    const nb_op_def *def;
    uint64_t seq;
    bool *wants;          /* per input: its gradient is needed */
    nb_tensor **saved_in; /* per input: kept for the rule, or NULL */
    uint64_t *saved_in_version;
    nb_tensor **saved_out; /* per output: detached data, or NULL */
    uint64_t *saved_out_version;
    nb_var_info *out_info; /* per output */
    nb_attr_value *attrs;  /* the def's attributes, in its order (in the node's block) */
    nb_tensor **retain;    /* per output: a tensor that retains its grad (weak) */
    hook_list *out_hooks;  /* per output: hooks of that output's tensor */
    uint8_t in_begin[NB_MAX_SLOTS + 1], out_begin[NB_MAX_SLOTS + 1]; /* as nb_grad_ctx's (at most 64 each) */
    node_hooks *hooks;
    size_t bytes; /* of its block, with the arrays below (nb_small_alloc) */
    /* NODE_FN: its function, apart so that op nodes do not carry it */
    struct nb_fn_part *fn;
    /* NODE_ACCUMULATE */
    nb_tensor *leaf; /* strong */
};

typedef struct nb_autograd {
    bool requires_grad;
    bool retains_grad;
    nb_node *grad_fn; /* strong; NULL for leaves */
    int output_nr;
    nb_tensor *grad;            /* accumulated gradient */
    nb_node *accumulator;       /* weak: the leaf's accumulate node, while one lives */
    hook_list hooks;            /* leaf hooks (a non-leaf's live in its node) */
    hook_list *accumulated;     /* leaf hooks run once .grad holds this backward pass's sum (made on first use) */
    struct nb_batched *batched; /* vmap: the physical batch of a logical tensor (batched.h), or NULL */
    bool in_room;               /* lives in its tensor's block (nb_tensor_room), not an allocation of its own */
} nb_autograd;

nb_autograd *nb_autograd_of(nb_tensor *t, bool create); /* NULL if none and !create */
void nb_node_retain(nb_node *n);
void nb_node_release(nb_node *n);
/* The edge a gradient for t travels along (its node, or its leaf's
 * accumulator, created on demand), a new reference in *e; {NULL} if t takes
 * no gradient. NB_ERR_NOMEM (with a message) if the accumulator could not be
 * made: never read as "no gradient". */
nb_status nb_edge_of(nb_tensor *t, nb_edge *e);
void nb_node_release_saved(nb_node *n);
nb_status hook_list_add(hook_list *h, void *fn, void *ctx);
void hook_list_free(hook_list *h);
uint64_t nb_next_sequence(void);

/* Records a node for an op just run eagerly; sets the outputs' history. */
nb_status nb_record_node(const nb_op_def *def, const nb_attr_value *attrs, const int *in_begin, const int *out_begin,
                         int n_in, nb_tensor *const *in, int n_out, nb_tensor *const *out);

/* Records a node whose backward is fn(ctx, ...), with edges to the inputs
 * that require grad, and makes it the history of the float outputs (which
 * must be fresh tensors without one). It owns ctx from the call on (freeing
 * it with free_fn, also when this fails). */
nb_status nb_record_fn_node(const char *name, nb_node_fn fn, void *ctx, void (*free_fn)(void *), int n_in,
                            nb_tensor *const *in, int n_out, nb_tensor *const *out);

/* ---- what nb_checkpoint needs of the eager builder (eager_builder.c) ---- */

/* The parameters looked up or created while a trace is set. */
typedef struct nb_param_trace {
    nb_tensor **t; /* strong */
    char **name;
    int n, cap;
    bool failed; /* out of memory while tracing */
} nb_param_trace;
/* Sets the trace (NULL: none) and returns the one it replaces. */
nb_param_trace *nb_eager_trace_params(nb_builder *b, nb_param_trace *trace);
/* Adds (name, t) to the trace, once (sets failed when out of memory). */
void nb_param_trace_add(nb_param_trace *tr, const char *name, nb_tensor *t);
void nb_param_trace_free(nb_param_trace *tr);
/* Puts t (retained) under an existing parameter's name and returns the
 * tensor that was there (the reference passes to the caller), or NULL. */
nb_tensor *nb_eager_swap_param(nb_builder *b, const char *name, nb_tensor *t);
/* The generator states a function's random ops started from, in order:
 * noted while it first runs (nb_eager_rng_record: pushes a tape, NULL pops
 * the last), replayed while it runs again (nb_eager_rng_replay: sets the
 * tape random ops take their states from, from pos on, or NULL for the
 * builder's generator; returns the one it replaces). Noting the states
 * rather than the generator's state at the start keeps the draws right when
 * the first run also drew for initialisers that the second does not. */
#define NB_RNG_TAPES_MAX 16
typedef struct nb_rng_tape {
    nb_rng *states;
    int n, cap, pos;
} nb_rng_tape;
nb_status nb_eager_rng_record(nb_builder *b, nb_rng_tape *tape);
nb_rng_tape *nb_eager_rng_replay(nb_builder *b, nb_rng_tape *tape);
/* The layer-name counters: a copy of the builder's (so that a function run
 * again names its layers as the first time, and finds their parameters),
 * and an exchange of the builder's with `names`. */
nb_status nb_eager_names_save(const nb_builder *b, nb_strmap *names);
void nb_eager_names_swap(nb_builder *b, nb_strmap *names);
/* The builder's count of held values, and dropping those held after it. */
int nb_eager_values_mark(const nb_builder *b);
void nb_eager_release_values_after(nb_builder *b, int mark);

/* An eager builder of the engine's own, used to run rules. */
nb_status nb_eager_builder_for_engine(nb_builder **out);
/* Whether b carries tangents (forward mode): then every op that makes a
 * gradient must go through it, sums of gradients included. */
bool nb_eager_carries_tangents(const nb_builder *b);

#endif
