/* Private structures of eager mode: the autograd state a tensor may carry,
 * backward nodes and their edges. */
#ifndef NABLA_AUTOGRAD_H
#define NABLA_AUTOGRAD_H

#include "nabla/eager.h"
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

typedef enum { NODE_OP, NODE_ACCUMULATE } node_kind;

struct nb_node {
    int refcount;
    node_kind kind;
    uint64_t seq;
    /* NODE_OP */
    const nb_op_def *def;
    nb_attr_value attrs[NB_MAX_ATTRS];
    int in_begin[NB_MAX_SLOTS + 1], out_begin[NB_MAX_SLOTS + 1];
    int n_in, n_out;
    nb_edge *next;              /* per input */
    bool *wants;                /* per input: its gradient is needed */
    nb_tensor **saved_in;       /* per input: kept for the rule, or NULL */
    nb_tensor **saved_out;      /* per output: detached data, or NULL */
    uint64_t *saved_in_version, *saved_out_version;
    nb_var_info *out_info;      /* per output */
    nb_tensor **retain;         /* per output: a tensor that retains its grad (weak) */
    hook_list *out_hooks;       /* per output: hooks of that output's tensor */
    bool released;
    /* NODE_ACCUMULATE */
    nb_tensor *leaf;            /* strong */
    hook_list pre, post;
    /* engine scratch, valid during one graph task */
    uint64_t task;
    int deps;
    nb_tensor **buffer;         /* per output (one for accumulators) */
    bool needed;                /* nb_autograd_grad: on a path to a requested input */
    int capture;                /* nb_autograd_grad: index of the input captured here + 1, or 0 */
};

typedef struct nb_autograd {
    bool requires_grad;
    bool retains_grad;
    nb_node *grad_fn;      /* strong; NULL for leaves */
    int output_nr;
    nb_tensor *grad;       /* accumulated gradient */
    nb_node *accumulator;  /* weak: the leaf's accumulate node, while one lives */
    hook_list hooks;       /* leaf hooks (a non-leaf's live in its node) */
    hook_list accumulated; /* leaf hooks run once .grad holds this backward pass's sum */
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

/* An eager builder of the engine's own, used to run rules. */
nb_status nb_eager_builder_for_engine(nb_builder **out);
/* Whether b carries tangents (forward mode): then every op that makes a
 * gradient must go through it, sums of gradients included. */
bool nb_eager_carries_tangents(const nb_builder *b);

#endif
