/* The reduction family's ops along one axis that keep it: cumsum (a running
 * sum) and topk (the k largest or smallest, with where they were). Listed
 * in reduce.c's table; kernels in src/kernels/cpu/reduce_scan.c.
 *
 * Both rules are linear maps of the tangent: cumsum's transpose is cumsum
 * run the other way, and topk's values are a gather_elements of X at its
 * indices, whose transpose is a scatter_elements that adds. */
#include <string.h>
#include "batch_rules.h"
#include "kernels/cpu/reduce.h"
#include "nabla/ops.h"
#include "reduce_grad.h"

_Static_assert(sizeof(nb_cumsum_params) <= NB_MAX_PARAMS_SIZE, "cumsum's parameters outgrow NB_MAX_PARAMS_SIZE");
_Static_assert(sizeof(nb_topk_params) <= NB_MAX_PARAMS_SIZE, "topk's parameters outgrow NB_MAX_PARAMS_SIZE");

/* X's dtype is a number and axis is one of its dims; the axis made
 * non-negative into *axis. */
static nb_status check_axis(const nb_op_ctx *c, const nb_var_info *x, int *axis)
{
    char xs[NB_SHAPE_STR_MAX];
    if (x->dtype != NB_F32 && x->dtype != NB_F64 && x->dtype != NB_I32 && x->dtype != NB_I64)
        return nb_error(NB_ERR_DTYPE, "%s: X has dtype %s but it takes float32, float64, int32 or int64", c->label,
                        nb_dtype_name(x->dtype));
    int64_t a = nb_attr_int(c, "axis");
    if (x->ndim == 0 || a < -x->ndim || a >= x->ndim)
        return nb_error(NB_ERR_ARG, "%s: axis %lld is out of range for X of shape %s", c->label, (long long)a,
                        nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
    *axis = (int)(a < 0 ? a + x->ndim : a);
    return NB_OK;
}

/* ---- cumsum ---------------------------------------------------------------------- */

static nb_status cumsum_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    int axis = 0;
    nb_status st = check_axis(c, x, &axis);
    if (st) return st;
    *nb_out_info(c, 0, 0) = *x;
    return NB_OK;
}

static nb_status cumsum_params(const nb_op_ctx *c, void *params)
{
    nb_cumsum_params *p = params;
    p->axis = nb_attr_int(c, "axis");
    p->exclusive = nb_attr_bool(c, "exclusive");
    p->reverse = nb_attr_bool(c, "reverse");
    return NB_OK;
}

static nb_value cumsum_of(nb_builder *b, const nb_grad_ctx *g, nb_value v, bool flip)
{
    bool reverse = nb_grad_attr(g, "reverse")->b;
    return nb_emit1(b, "cumsum", NB_VALUES(v),
                    NB_ATTRS(NB_ATTR_INT("axis", nb_grad_attr(g, "axis")->i),
                             NB_ATTR_BOOL("exclusive", nb_grad_attr(g, "exclusive")->b),
                             NB_ATTR_BOOL("reverse", flip ? !reverse : reverse)));
}

/* Out_i sums X_j over j <= i (j < i when exclusive), so dX_j sums dOut_i
 * over i >= j (i > j): the same running sum from the other end. */
static nb_status cumsum_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (!nb_is_none(dy) && nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, cumsum_of(b, g, dy, true));
    return nb_builder_status(b);
}

static nb_status cumsum_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, cumsum_of(b, g, t, false));
    return nb_builder_status(b);
}

const nb_op_def nb_op_cumsum = {
    .name = "cumsum", .batch = nb_batch_softmax,
    .doc = "Running sum of X along axis (exclusive: without the element itself; reverse: from the end)",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0), NB_ADEF_BOOL("exclusive", false), NB_ADEF_BOOL("reverse", false)},
    .infer = cumsum_infer,
    .params_size = sizeof(nb_cumsum_params),
    .params = cumsum_params,
    .vjp = cumsum_vjp,
    .jvp = cumsum_jvp,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- topk ------------------------------------------------------------------------------ */

static nb_status topk_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    int axis = 0;
    nb_status st = check_axis(c, x, &axis);
    if (st) return st;
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
    .name = "topk", .batch = nb_batch_softmax,
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
