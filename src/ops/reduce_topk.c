/* topk, the reduction family's op that keeps the k largest or smallest
 * along one axis, with where they were. Listed in reduce.c's table; kernel
 * in src/kernels/cpu/reduce_topk.c.
 *
 * Its rules are linear maps of the tangent: the values are a
 * gather_elements of X at the indices, whose transpose is a
 * scatter_elements that adds. */
#include <string.h>
#include "batch_rules.h"
#include "infer_check.h"
#include "kernels/cpu/reduce.h"
#include "nabla/ops.h"
#include "reduce_grad.h"

_Static_assert(sizeof(nb_topk_params) <= NB_MAX_PARAMS_SIZE, "topk's parameters outgrow NB_MAX_PARAMS_SIZE");

/* ---- topk ------------------------------------------------------------------------------ */

static nb_status topk_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    int axis = 0;
    nb_status st = nb_check_dtypes(c, "X", x, NB_DT_NUMERIC);
    if (st || (st = nb_check_axis(c, x, &axis))) return st;
    int64_t k = nb_attr_int(c, "k"), n = x->shape[axis];
    if (k < 0 || (n >= 0 && k > n)) {
        char xs[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_ARG, "%s: k = %lld is not in [0, %lld], the size of axis %d of X (shape %s)", c->label,
                        (long long)k, (long long)n, axis, nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
    }
    nb_var_info *v = nb_out_info(c, 0, 0), *i = nb_out_info(c, 1, 0);
    *v = *x;
    v->shape[axis] = k;
    *i = *v;
    i->dtype = NB_I64;
    return NB_OK;
}

static nb_status topk_params(const nb_op_ctx *c, void *params)
{
    nb_topk_params *p = params;
    p->k = nb_attr_int(c, "k");
    p->axis = nb_attr_int(c, "axis");
    p->largest = nb_attr_bool(c, "largest");
    return NB_OK;
}

/* Values = gather_elements(X, Indices): dX puts dValues back where they came
 * from, zeros elsewhere (indices along one slice never repeat). */
static nb_status topk_vjp(nb_builder *b, nb_grad_ctx *g) { return nb_rule_gathered_vjp(b, g, nb_grad_y(g, 1, 0)); }

static nb_status topk_jvp(nb_builder *b, nb_grad_ctx *g) { return nb_rule_gathered_jvp(b, g, nb_grad_y(g, 1, 0)); }

const nb_op_def nb_op_topk = {
    .name = "topk",
    .batch = nb_batch_softmax,
    .doc = "The k largest (or smallest) values of X along axis, sorted, and their indices (int64); the lower index "
           "first among equals",
    .inputs = {{"X", 0}},
    .outputs = {{"Values", 0}, {"Indices", NB_SLOT_NO_GRAD}},
    .attrs = {NB_ADEF_REQUIRED("k", NB_ATTR_INT), NB_ADEF_INT("axis", -1), NB_ADEF_BOOL("largest", true)},
    .infer = topk_infer,
    .params_size = sizeof(nb_topk_params),
    .params = topk_params,
    .grad_uses_inputs = 1u << 0,
    .grad_uses_outputs = 1u << 1,
    .vjp = topk_vjp,
    .jvp = topk_jvp,
    .flags = NB_OP_WRITES_ALL,
};
