/* nabla/program.h: static programs, as in PaddlePaddle Fluid.
 *
 * A program is a list of blocks; block 0 is the global block, and a block
 * made for a while/cond/recurrent op names its parent. A block holds its ops
 * in execution order and a table of the vars they read and write. An op
 * (OpDesc) names its type, the var names in each input and output slot, and
 * its attribute values. A var (VarDesc) is a name with a dtype and a shape
 * (-1 for a size not known until run time) and flags.
 *
 * The structs are readable by anyone (they are the documentation of a
 * program); change them only through these functions, which keep the var
 * tables and the program version consistent. */
#ifndef NABLA_PROGRAM_H
#define NABLA_PROGRAM_H

#include "nabla/export.h"

#include <stdio.h>
#include "nabla/builder.h"
#include "nabla/op.h"

NB_BEGIN_DECLS

/* A list of var names (feeds, fetches, parameters, targets): NB_NAMES("x",
 * "y") in C, nb_names{n, array} in C++. */
typedef struct nb_names {
    int n;
    const char *const *v;
} nb_names;
/* The array behind the list is a compound literal, which lives only until
 * the end of the enclosing block: pass the list to a call, or keep it in a
 * variable used only inside that block (one made in an `if` and used after
 * it points at dead stack). */
#define NB_NAMES(...) ((nb_names){(int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__}})
#define NB_NAMES_N(count, array) ((nb_names){(count), (array)})
#define NB_NO_NAMES ((nb_names){0, 0})

typedef struct nb_program nb_program;
typedef struct nb_block nb_block;

/* The part of a training program an op belongs to is an nb_op_role
 * (nabla/builder.h), as Fluid's op_role. */

typedef struct nb_var {
    char *name;
    nb_dtype dtype;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    bool persistable;   /* lives in the scope across runs (parameters, optimiser state) */
    bool stop_gradient; /* no gradient flows into or through it */
    bool is_parameter;  /* a model parameter (drawn as a double circle) */
    bool trainable;     /* a parameter the optimiser updates */
    bool is_data;       /* fed by the user at run time */
} nb_var;

typedef struct nb_op {
    const nb_op_def *def;
    char **inputs; /* var names, flat; slot k is [in_begin[k], in_begin[k+1]) */
    char **outputs;
    int in_begin[NB_MAX_SLOTS + 1];
    int out_begin[NB_MAX_SLOTS + 1];
    nb_attr_value attrs[NB_MAX_ATTRS]; /* in the def's order, defaults filled in */
    nb_op_role role;
    char *role_var[2]; /* for an op producing a parameter's gradient: (param, grad) */
    int id;            /* unique within the program, in creation order */
} nb_op;

struct nb_block {
    nb_program *program;
    int idx;
    int parent_idx;        /* -1 for block 0 */
    int forward_block_idx; /* for a grad block, the block it differentiates; else -1 */
    nb_op **ops;
    int n_ops, cap_ops;
    nb_var **vars;
    int n_vars, cap_vars;
    void *var_index; /* name -> var, private */
};

struct nb_program {
    nb_block **blocks;
    int n_blocks, cap_blocks;
    uint64_t random_seed; /* seeds every random op without its own seed */
    uint64_t version;     /* bumped on every change; executors re-prepare on change */
    int next_op_id;
    void *names; /* unique-name counters, private */
};

/* ---- programs and blocks ------------------------------------------------ */

NB_API nb_status nb_program_new(nb_program **out);
NB_API void nb_program_free(nb_program *p);
NB_API nb_block *nb_program_block(nb_program *p, int idx); /* NULL if out of range */
NB_API nb_block *nb_program_global_block(nb_program *p);
/* Appends a new empty block whose parent is `parent_idx`. */
NB_API nb_status nb_program_add_block(nb_program *p, int parent_idx, nb_block **out);
/* A deep copy of the whole program. */
NB_API nb_status nb_program_clone(nb_program **out, const nb_program *p);
/* A copy for evaluation (Fluid's clone(for_test=True)): the backward and
 * optimisation parts dropped, and every op that has an "is_test" attribute
 * (dropout, batch_norm) switched to inference. */
NB_API nb_status nb_program_clone_for_test(nb_program **out, const nb_program *p);
/* "fc" -> "fc_0", "fc_1", ...: a name not yet given out by this program. */
NB_API nb_status nb_program_unique_name(nb_program *p, const char *prefix, char *buf, size_t size);
NB_API void nb_program_set_seed(nb_program *p, uint64_t seed);

/* ---- vars -------------------------------------------------------------- */

/* Creates var `name` in block `b`; NB_ERR_ARG if the block already has one of
 * that name with a different dtype or rank. */
NB_API nb_status nb_block_create_var(nb_block *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                                     nb_var **out);
/* Looks up a var in `b` only; NULL if absent. */
NB_API nb_var *nb_block_find_var(const nb_block *b, const char *name);
/* Looks up a var in `b` and then its ancestors. */
NB_API nb_var *nb_block_find_var_recursive(const nb_block *b, const char *name);
/* Renames a var of block `b` and every reference to it in b's ops. The var
 * keeps its identity (values pointing at it stay valid). NB_ERR_ARG if
 * `new_name` is taken in b or an ancestor. */
NB_API nb_status nb_block_rename_var(nb_block *b, const char *old_name, const char *new_name);
/* Updates a var's dtype and shape (shape inference of later passes). */
NB_API void nb_var_set_shape(nb_var *v, nb_dtype dtype, int ndim, const int64_t *shape);
NB_API nb_var_info nb_var_info_of(const nb_var *v);

/* ---- ops --------------------------------------------------------------- */

/* Appends an op after checking it against its definition: known type, slot
 * counts, attr names and types (defaults filled in), every input var present
 * in the block or an ancestor. Output vars that do not exist are created,
 * and shapes and dtypes of all outputs are inferred. op_out may be NULL.
 *
 *     nb_block_append_op(b, "mul", NB_NAMES("x", "w"), NB_NAMES("y"), NB_NO_ATTRS, NULL); */
NB_API nb_status nb_block_append_op(nb_block *b, const char *type, nb_names in, nb_names out, nb_attrs attrs,
                                    nb_op **op_out);
/* Moves the op at position `from` to position `to`, shifting those between. */
NB_API nb_status nb_block_move_op(nb_block *b, int from, int to);
/* Removes op at `pos` (its vars stay). */
NB_API nb_status nb_block_remove_op(nb_block *b, int pos);

/* Var names of slot `slot`, and their count. */
static inline int nb_op_in_count(const nb_op *op, int slot) { return op->in_begin[slot + 1] - op->in_begin[slot]; }
static inline int nb_op_out_count(const nb_op *op, int slot) { return op->out_begin[slot + 1] - op->out_begin[slot]; }
static inline const char *nb_op_in_name(const nb_op *op, int slot, int k) { return op->inputs[op->in_begin[slot] + k]; }
static inline const char *nb_op_out_name(const nb_op *op, int slot, int k)
{
    return op->outputs[op->out_begin[slot] + k];
}
static inline int nb_op_n_inputs(const nb_op *op) { return op->in_begin[NB_MAX_SLOTS]; }
static inline int nb_op_n_outputs(const nb_op *op) { return op->out_begin[NB_MAX_SLOTS]; }
NB_API const nb_attr_value *nb_op_attr(const nb_op *op, const char *name);
/* "matmul (fc_0.tmp_0)": the op's type and first output, for messages. */
NB_API const char *nb_op_label(const nb_op *op, char *buf, size_t size);
/* Re-runs shape inference on one op, updating its output vars. */
NB_API nb_status nb_block_infer_op(nb_block *b, nb_op *op);

/* ---- building a program through a builder ------------------------------ */

/* A builder that records into `main` (block 0 to start with). `startup`, which
 * may be NULL, receives parameter initialisers. Neither is owned. */
NB_API nb_status nb_builder_new_record(nb_builder **out, nb_program *main, nb_program *startup);
/* The program a record builder records into (NULL for an eager builder),
 * its startup program (NULL if none) and the block ops go to now. */
NB_API nb_program *nb_builder_program(nb_builder *b);
NB_API nb_program *nb_builder_startup(nb_builder *b);
NB_API nb_block *nb_builder_block(nb_builder *b);
NB_API void nb_builder_set_block(nb_builder *b, nb_block *block);
/* A var fed at run time (Fluid's layer.data). Marked stop_gradient. */
NB_API nb_value nb_data(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape);
/* The var named `name` in the current block or its ancestors, or NB_NONE
 * (and an error) if there is none. */
NB_API nb_value nb_value_by_name(nb_builder *b, const char *name);
NB_API nb_value nb_value_from_var(nb_var *v);
/* The var of a record builder's value, or its name; NULL (and an error that
 * says so) for NB_NONE or an eager value. */
NB_API nb_var *nb_value_var(nb_value v);
NB_API const char *nb_value_name(nb_value v);

/* ---- reading a program ------------------------------------------------- */

/* Prints every block, var and op in a readable text form. */
NB_API nb_status nb_program_print(const nb_program *p, FILE *f);

/* Writes the program as a Graphviz graph: ops as boxes coloured by role
 * (forward, loss, backward, optimize), vars as ellipses, parameters as double
 * circles, gradients shaded, and each sub-block as a cluster. Render with
 * `dot -Tpng`. */
NB_API nb_status nb_program_to_dot(const nb_program *p, FILE *f);

NB_END_DECLS

#endif
