/* The comparison family: comparisons and logic, giving bool tensors, and
 * where. Definitions and shape inference; the kernels are in
 * kernels/cpu/compare.c. */
#include "families.h"
#include "batch_rules.h"
#include "broadcast_infer.h"
#include "compare_grad.h"

/* ---- comparisons: X, Y of one dtype, broadcast -> bool ------------------------- */

static nb_status infer_compare(nb_op_ctx *c)
{
    nb_status st = nb_infer_same_dtype(c, 0, 1);
    if (st) return st;
    nb_var_info *out = nb_out_info(c, 0, 0);
    out->dtype = NB_BOOL;
    return nb_infer_broadcast(c, 2, (const int[]){0, 1}, out);
}

#define COMPARE_OP(id, DOC)                                                                \
    static const nb_op_def op_##id = {                                                     \
        .name = #id, .doc = DOC, .inputs = {{"X", 0}, {"Y", 0}}, .outputs = {{"Out", 0}},  \
        .infer = infer_compare, .batch = nb_batch_broadcast, .flags = NB_OP_NOT_DIFFERENTIABLE};

COMPARE_OP(equal, "X == Y, broadcasting, as bool")
COMPARE_OP(not_equal, "X != Y, broadcasting, as bool (true where either is NaN)")
COMPARE_OP(less, "X < Y, broadcasting, as bool")
COMPARE_OP(less_equal, "X <= Y, broadcasting, as bool")
COMPARE_OP(greater, "X > Y, broadcasting, as bool")
COMPARE_OP(greater_equal, "X >= Y, broadcasting, as bool")

/* ---- logic: any dtypes, nonzero is true -> bool ------------------------------------ */

static nb_status infer_logic_binary(nb_op_ctx *c)
{
    nb_var_info *out = nb_out_info(c, 0, 0);
    out->dtype = NB_BOOL;
    return nb_infer_broadcast(c, 2, (const int[]){0, 1}, out);
}

static nb_status infer_logic_not(nb_op_ctx *c)
{
    nb_var_info *out = nb_out_info(c, 0, 0);
    *out = *nb_in_info(c, 0, 0);
    out->dtype = NB_BOOL;
    return NB_OK;
}

#define LOGIC_OP(id, DOC)                                                                  \
    static const nb_op_def op_##id = {                                                     \
        .name = #id, .doc = DOC, .inputs = {{"X", 0}, {"Y", 0}}, .outputs = {{"Out", 0}},  \
        .infer = infer_logic_binary, .batch = nb_batch_broadcast, .flags = NB_OP_NOT_DIFFERENTIABLE};

LOGIC_OP(logical_and, "X and Y, broadcasting; nonzero values are true")
LOGIC_OP(logical_or, "X or Y, broadcasting; nonzero values are true")
LOGIC_OP(logical_xor, "Exactly one of X and Y, broadcasting; nonzero values are true")

static const nb_op_def op_logical_not = {.name = "logical_not",
                                         .batch = nb_batch_unary,
                                         .doc = "Not X, as bool; nonzero values are true",
                                         .inputs = {{"X", 0}},
                                         .outputs = {{"Out", 0}},
                                         .infer = infer_logic_not,
                                         .flags = NB_OP_NOT_DIFFERENTIABLE};

/* ---- where ------------------------------------------------------------------------ */

static nb_status infer_where(nb_op_ctx *c)
{
    nb_dtype cd = nb_in_info(c, 0, 0)->dtype;
    if (cd != NB_BOOL)
        return nb_error(NB_ERR_DTYPE, "%s: Condition must be bool, not %s (compare, or cast it)", c->label,
                        nb_dtype_name(cd));
    nb_status st = nb_infer_same_dtype(c, 1, 2);
    if (st) return st;
    nb_var_info *out = nb_out_info(c, 0, 0);
    out->dtype = nb_in_info(c, 1, 0)->dtype;
    return nb_infer_broadcast(c, 3, (const int[]){0, 1, 2}, out);
}

static const nb_op_def op_where = {.name = "where",
                                   .batch = nb_batch_broadcast,
                                   .doc = "X where Condition is true, else Y; all three broadcast",
                                   .inputs = {{"Condition", NB_SLOT_NO_GRAD}, {"X", 0}, {"Y", 0}},
                                   .outputs = {{"Out", 0}},
                                   .infer = infer_where,
                                   .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 2),
                                   .vjp = nb_where_vjp,
                                   .jvp = nb_where_jvp,
                                   .flags = NB_OP_WRITES_ALL};

const nb_op_def *const nb_ops_compare[] = {
    &op_equal,       &op_not_equal,  &op_less,        &op_less_equal,  &op_greater, &op_greater_equal,
    &op_logical_and, &op_logical_or, &op_logical_xor, &op_logical_not, &op_where,   NULL,
};
