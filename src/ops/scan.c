/* The scan family: the definitions of the ops of nabla/scan_ops.h, made
 * from the list, with their shape inference and parameters. Kernels in
 * kernels/cpu/scan.c, rules in scan_grad.c. */
#include "families.h"
#include "batch_rules.h"
#include "infer_check.h"
#include "kernels/params/scan.h"
#include "scan_grad.h"

_Static_assert(sizeof(nb_scan_params) <= NB_MAX_PARAMS_SIZE, "nb_scan_params outgrows NB_MAX_PARAMS_SIZE");

#define X (1u << 0)
#define OUT (1u << 0)
#define FLOAT NB_DT_FLOAT
#define NUMERIC NB_DT_NUMERIC

/* (Marked unused: a list with no line leaves these two unused.) */
__attribute__((unused)) static nb_status infer_scan(nb_op_ctx *c, unsigned dtypes)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    int axis = 0;
    nb_status st = nb_check_dtypes(c, "X", x, dtypes);
    if (st || (st = nb_check_axis(c, x, &axis))) return st;
    *nb_out_info(c, 0, 0) = *x;
    return NB_OK;
}

__attribute__((unused)) static nb_status params_scan(const nb_op_ctx *c, void *params)
{
    nb_scan_params *p = params;
    p->axis = nb_attr_int(c, "axis");
    p->exclusive = nb_attr_bool(c, "exclusive");
    p->reverse = nb_attr_bool(c, "reverse");
    return NB_OK;
}

/* Under vmap the scan runs on the batch with its axis moved past the batch
 * dim, which is what softmax's rule does for its axis. */
#define NB_SCAN(op, dtypes, identity, uses_in, uses_out, doc_)                                               \
    static nb_status infer_##op(nb_op_ctx *c) { return infer_scan(c, dtypes); }                              \
    static const nb_op_def op_##op = {                                                                       \
        .name = #op,                                                                                         \
        .doc = doc_,                                                                                         \
        .inputs = {{"X", 0}},                                                                                \
        .outputs = {{"Out", 0}},                                                                             \
        .attrs = {NB_ADEF_INT("axis", 0), NB_ADEF_BOOL("exclusive", false), NB_ADEF_BOOL("reverse", false)}, \
        .infer = infer_##op,                                                                                 \
        .params_size = sizeof(nb_scan_params),                                                               \
        .params = params_scan,                                                                               \
        .grad_uses_inputs = (uses_in),                                                                       \
        .grad_uses_outputs = (uses_out),                                                                     \
        .vjp = nb_##op##_vjp,                                                                                \
        .jvp = nb_##op##_jvp,                                                                                \
        .batch = nb_batch_softmax,                                                                           \
        .flags = NB_OP_WRITES_ALL};
#include "nabla/scan_ops.h"

const nb_op_def *const nb_ops_scan[] = {
#define NB_SCAN(name, ...) &op_##name,
#include "nabla/scan_ops.h"
    NULL,
};
