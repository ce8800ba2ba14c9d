/* nabla/op.h: operator definitions and the op registry.
 *
 * An nb_op_def is the one place that knows an operator: its input and output
 * slots, its attributes and their defaults, how to infer output shapes and
 * dtypes, its CPU kernel, which forward values its gradient reads, and its
 * VJP and JVP rules. Static programs, the eager tape and the functional
 * transforms all go through the same definitions.
 *
 * Shape inference and the parameter function see an op through an
 * nb_op_ctx. Inputs and outputs are flat arrays; slot k owns indices
 * [in_begin[k], in_begin[k+1]), so a variadic slot holds several values and
 * an absent optional slot none. Kernels are registered apart, per (op,
 * device, dtype), and see only tensors and the op's parameter struct: see
 * nabla/kernel.h. A composite op has none of these: one function (`expand`)
 * that emits other ops through the builder (docs/adding-an-op.md). */
#ifndef NABLA_OP_H
#define NABLA_OP_H

#include "nabla/export.h"

#include "nabla/attr.h"
#include "nabla/builder.h"
#include "nabla/kernel.h"
#include "nabla/rng.h"
#include "nabla/tensor.h"

NB_BEGIN_DECLS

#ifndef NB_MAX_SLOTS
#define NB_MAX_SLOTS 8
#endif
/* The largest parameter struct an op may declare (params_size). */
#define NB_MAX_PARAMS_SIZE 256
#define NB_MAX_ATTRS 16

/* Slot flags. */
enum {
    NB_SLOT_VARIADIC = 1 << 0,  /* takes any number of values (at most one such slot per side) */
    NB_SLOT_OPTIONAL = 1 << 1,  /* may be absent */
    NB_SLOT_NO_GRAD = 1 << 2,   /* never takes a gradient (labels, indices, conditions) */
    NB_SLOT_SHAPE_ONLY = 1 << 3 /* reads only the value's dtype and shape, never its elements */
};

/* Op flags. */
enum {
    NB_OP_NOT_DIFFERENTIABLE = 1 << 0, /* comparisons, argmax, initialisers: no gradient */
    NB_OP_RANDOM = 1 << 1,             /* draws from ctx->rng */
    NB_OP_STATEFUL = 1 << 2,           /* writes an input in place (increment, optimisers) */
    NB_OP_CONTROL = 1 << 3,            /* runs sub-blocks; sizes its outputs itself (see src/exec/exec_env.h) */
    NB_OP_INPLACE = 1 << 4,            /* its kernels may write output 0 over an input of its dtype and size
                                          (elementwise ops, sum): the executor lets a dying input's buffer serve */
    NB_OP_WRITES_ALL = 1 << 5,         /* its kernels write every element of every output they are given, so
                                          the executor does not zero outputs first (NB_OP_INPLACE implies it) */
    NB_OP_VIEW = 1 << 6                /* output 0 is input 0's elements in their order under another shape
                                          (reshape and its kin): run eagerly (nb_op_run, eager builders), the
                                          output is a view sharing input 0's storage, and no kernel runs */
};

typedef struct nb_slot_def {
    const char *name;
    unsigned flags;
} nb_slot_def;

typedef struct nb_attr_def {
    const char *name;
    nb_attr_type type;
    bool required;     /* no default: the caller must give it */
    nb_attr_value def; /* the default (its type matches `type`) */
} nb_attr_def;

/* Attribute declarations for op tables. */
#define NB_ADEF_BOOL(nm, v)   {(nm), NB_ATTR_BOOL, false, {.type = NB_ATTR_BOOL, .b = (v)}}
#define NB_ADEF_INT(nm, v)    {(nm), NB_ATTR_INT, false, {.type = NB_ATTR_INT, .i = (v)}}
#define NB_ADEF_FLOAT(nm, v)  {(nm), NB_ATTR_FLOAT, false, {.type = NB_ATTR_FLOAT, .f = (v)}}
#define NB_ADEF_STRING(nm, v) {(nm), NB_ATTR_STRING, false, {.type = NB_ATTR_STRING, .s = (v)}}
#define NB_ADEF_INTS(nm, ...) {(nm), NB_ATTR_INTS, false, {.type = NB_ATTR_INTS, \
        .n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .ints = (const int64_t[]){__VA_ARGS__}}}
#define NB_ADEF_INTS_EMPTY(nm)   {(nm), NB_ATTR_INTS, false, {.type = NB_ATTR_INTS, .n = 0, .ints = 0}}
#define NB_ADEF_FLOATS_EMPTY(nm) {(nm), NB_ATTR_FLOATS, false, {.type = NB_ATTR_FLOATS, .n = 0, .floats = 0}}
#define NB_ADEF_STRINGS_EMPTY(nm) {(nm), NB_ATTR_STRINGS, false, {.type = NB_ATTR_STRINGS, .n = 0, .strs = 0}}
#define NB_ADEF_REQUIRED(nm, t) {(nm), (t), true, {.type = (t)}}

/* nb_var_info, the dtype and shape of a value, is in nabla/builder.h. */

struct nb_op_def;
struct nb_exec_env;

typedef struct nb_op_ctx {
    const struct nb_op_def *def;
    const char *label;          /* names the op in errors, e.g. "matmul (fc_0.tmp_0)" */
    const nb_attr_value *attrs; /* in the def's order, defaults filled in */
    int in_begin[NB_MAX_SLOTS + 1];
    int out_begin[NB_MAX_SLOTS + 1];
    const nb_var_info *in_info; /* infer: the inputs' dtypes and shapes (NULL for a params function) */
    nb_var_info *out_info;      /* infer writes these */
} nb_op_ctx;

/* Shape/dtype inference: fill ctx->out_info from ctx->in_info and attrs, and
 * validate everything (dtypes, ranks, attribute values). At build time
 * unknown dims are -1 and must be carried, not rejected; at run time all are
 * known. On failure, return nb_error(...) naming ctx->label and the shapes. */
typedef nb_status (*nb_infer_fn)(nb_op_ctx *ctx);
/* Fills the op's parameter struct (params_size bytes, zeroed) from
 * ctx->attrs; inputs are not known yet. Called once per prepared op. */
typedef nb_status (*nb_params_fn)(const nb_op_ctx *ctx, void *params);

/* Gradient rules emit ops through a builder; see nabla/grad_rule.h. */
struct nb_builder;
struct nb_grad_ctx;
typedef nb_status (*nb_vjp_fn)(struct nb_builder *b, struct nb_grad_ctx *g);
typedef nb_status (*nb_jvp_fn)(struct nb_builder *b, struct nb_grad_ctx *g);
/* Batching rules (vmap) emit the op's batched form on physical values; see
 * nabla/batch_rule.h. */
struct nb_batch_ctx;
typedef nb_status (*nb_batch_fn)(struct nb_builder *b, struct nb_batch_ctx *c);
/* A composite op's expansion: emits, through b, the ops that compute its
 * outputs out[k] (one per declared output slot) from its inputs in[k] (one
 * per declared input slot, NB_NONE for an absent optional one), with attrs
 * in the def's order, defaults filled in. Returns nb_builder_status(b). */
struct nb_value;
typedef nb_status (*nb_expand_fn)(struct nb_builder *b, const struct nb_value *in, const nb_attr_value *attrs,
                                  struct nb_value *out);

typedef struct nb_op_def {
    const char *name;
    const char *doc;                  /* one line */
    nb_slot_def inputs[NB_MAX_SLOTS]; /* ends at the first NULL name */
    nb_slot_def outputs[NB_MAX_SLOTS];
    nb_attr_def attrs[NB_MAX_ATTRS];
    nb_infer_fn infer;
    /* The parameter struct the op's kernels read (nabla/kernel.h): its size
     * (0: none) and the function that fills it from the attributes. */
    size_t params_size;
    nb_params_fn params;
    unsigned flags;
    /* Which forward values the gradient rule reads: bit k of grad_uses_inputs
     * is input slot k, bit k of grad_uses_outputs is output slot k. Eager mode
     * saves only these; the executor keeps only these alive. */
    unsigned grad_uses_inputs;
    unsigned grad_uses_outputs;
    nb_vjp_fn vjp; /* NULL: no rule yet (or NB_OP_NOT_DIFFERENTIABLE) */
    nb_jvp_fn jvp;
    /* Under vmap: the op on a batch, from its physical inputs and their batch
     * dims (NULL: a loop over the batch runs it once per example). */
    nb_batch_fn batch;
    /* A composite op (softsign, mish) sets only its name, doc, slots,
     * attributes and this: emitting it through any builder (eager, record,
     * vmap's) emits its expansion on that builder instead, so that kernels,
     * rules, batching, shapes and export are those of the ops it expands
     * into. It has no infer, params, rules or batch of its own, no variadic
     * slot, and nb_op_run and nb_op_infer refuse it (they see no builder). */
    nb_expand_fn expand;
} nb_op_def;

/* ---- context accessors for infer and params functions ------------------- */

static inline int nb_in_count(const nb_op_ctx *c, int slot) { return c->in_begin[slot + 1] - c->in_begin[slot]; }
static inline int nb_out_count(const nb_op_ctx *c, int slot) { return c->out_begin[slot + 1] - c->out_begin[slot]; }
static inline bool nb_has_in(const nb_op_ctx *c, int slot) { return nb_in_count(c, slot) > 0; }
static inline const nb_var_info *nb_in_info(const nb_op_ctx *c, int slot, int k)
{
    return &c->in_info[c->in_begin[slot] + k];
}
static inline nb_var_info *nb_out_info(const nb_op_ctx *c, int slot, int k)
{
    return &c->out_info[c->out_begin[slot] + k];
}

/* Attribute values by name (the def must declare the name). */
NB_API const nb_attr_value *nb_attr_get(const nb_op_ctx *c, const char *name);
NB_API bool nb_attr_bool(const nb_op_ctx *c, const char *name);
NB_API int64_t nb_attr_int(const nb_op_ctx *c, const char *name);
NB_API double nb_attr_float(const nb_op_ctx *c, const char *name);
NB_API const char *nb_attr_string(const nb_op_ctx *c, const char *name);

/* ---- the registry ---------------------------------------------------------- */

NB_API const nb_op_def *nb_op_find(const char *name);
NB_API int nb_op_count(void);
NB_API const nb_op_def *nb_op_at(int i); /* sorted by name */
/* Adds a user-defined op. `def` must stay valid for the process's lifetime.
 * NB_ERR_ARG if the name is taken or the definition is malformed. */
NB_API nb_status nb_op_register(const nb_op_def *def);

/* Index of a slot or attribute by name, or -1. */
NB_API int nb_op_input_index(const nb_op_def *def, const char *slot);
NB_API int nb_op_output_index(const nb_op_def *def, const char *slot);
NB_API int nb_op_attr_index(const nb_op_def *def, const char *attr);
NB_API int nb_op_num_inputs(const nb_op_def *def); /* declared slots */
NB_API int nb_op_num_outputs(const nb_op_def *def);

/* ---- inferring shapes without running ------------------------------------ */

/* The dtypes and shapes of op `type`'s n_out outputs, from those of its
 * inputs (dims may be -1), as building a program does. `in` lists inputs in
 * slot order as nb_op_run does; an entry with ndim < 0 marks an absent
 * optional input. */
NB_API nb_status nb_op_infer(const char *type, int n_in, const nb_var_info *in, nb_attrs attrs, int n_out,
                             nb_var_info *out);

/* ---- running one op on tensors --------------------------------------------- */

/* Runs op `type` once on tensors, as eager mode does: checks, infers shapes,
 * allocates outputs and calls the kernel.
 *
 * `in` lists the inputs in slot order: one per plain slot (NULL for an absent
 * optional one), and for the variadic slot, if any, all that remain. `out`
 * likewise; a NULL entry receives a new tensor (one reference, yours), a
 * non-NULL one is written in place and must have the inferred shape and
 * dtype. A random op draws from a generator seeded with its "seed"
 * attribute (0 if none):
 *
 *     nb_tensor *y = NULL;
 *     nb_op_run("scale", NB_TENSORS(x), NB_ATTRS(NB_ATTR_FLOAT("scale", 2)), 1, &y); */
NB_API nb_status nb_op_run(const char *type, nb_tensors in, nb_attrs attrs, int n_out, nb_tensor **out);

NB_END_DECLS

#endif
