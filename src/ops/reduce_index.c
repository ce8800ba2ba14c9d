/* Element-wise indexing along one axis, NumPy's take_along_axis and
 * put_along_axis (ONNX's GatherElements and ScatterElements): Index has
 * X's rank, and element e of Index names, along axis, the element of X that
 * sits where e sits in every other dim. Listed in reduce.c's table beside
 * topk, whose gradient they are; kernels in src/kernels/cpu/reduce_index.c.
 * Indices may be negative (from the end, as in ONNX); every one is checked
 * when the kernel runs. */
#include <string.h>
#include "batch_rules.h"
#include "kernels/cpu/reduce.h"
#include "nabla/ops.h"
#include "reduce_grad.h"

_Static_assert(sizeof(nb_elements_params) <= NB_MAX_PARAMS_SIZE,
               "gather_elements' parameters outgrow NB_MAX_PARAMS_SIZE");

nb_value nb_gather_elements(nb_builder *b, nb_value x, nb_value index, int axis)
{
    return nb_emit1(b, "gather_elements", NB_VALUES(x, index), NB_ATTRS(NB_ATTR_INT("axis", axis)));
}

nb_value nb_scatter_elements(nb_builder *b, nb_value x, nb_value index, nb_value updates, int axis,
                             const char *reduction)
{
    return nb_emit1(b, "scatter_elements", NB_VALUES(x, index, updates),
                    NB_ATTRS(NB_ATTR_INT("axis", axis), NB_ATTR_STRING("reduction", reduction)));
}

/* Index is int32 or int64, of X's rank, no longer than X in the dims other
 * than axis (which it may exceed: elements may repeat); *axis made
 * non-negative. */
static nb_status check_index(const nb_op_ctx *c, const nb_var_info *x, const nb_var_info *idx, int *axis)
{
    char xs[NB_SHAPE_STR_MAX], is[NB_SHAPE_STR_MAX];
    if (idx->dtype != NB_I32 && idx->dtype != NB_I64)
        return nb_error(NB_ERR_DTYPE, "%s: Index must be int32 or int64, got %s", c->label, nb_dtype_name(idx->dtype));
    int64_t a = nb_attr_int(c, "axis");
    if (x->ndim == 0 || a < -x->ndim || a >= x->ndim)
        return nb_error(NB_ERR_ARG, "%s: axis %lld is out of range for X of shape %s", c->label, (long long)a,
                        nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
    *axis = (int)(a < 0 ? a + x->ndim : a);
    bool ok = idx->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == *axis || idx->shape[d] < 0 || x->shape[d] < 0 || idx->shape[d] <= x->shape[d];
    if (!ok)
        return nb_error(NB_ERR_SHAPE,
                        "%s: Index of shape %s does not fit X of shape %s: it needs X's rank and at "
                        "most X's size in every dim but axis %d",
                        c->label, nb_shape_str(is, sizeof is, idx->ndim, idx->shape),
                        nb_shape_str(xs, sizeof xs, x->ndim, x->shape), *axis);
    return NB_OK;
}

static nb_status elements_params(const nb_op_ctx *c, void *params)
{
    nb_elements_params *p = params;
    p->axis = nb_attr_int(c, "axis");
    p->reduction = NB_SCATTER_NONE;
    if (nb_op_attr_index(c->def, "reduction") < 0) return NB_OK;
    const char *r = nb_attr_string(c, "reduction");
    if (!strcmp(r, "add")) p->reduction = NB_SCATTER_ADD;
    else if (!strcmp(r, "mul")) p->reduction = NB_SCATTER_MUL;
    else if (strcmp(r, "none"))
        return nb_error(NB_ERR_ARG, "%s: reduction \"%s\" is not one of none, add, mul", c->label, r);
    return NB_OK;
}

/* ---- gather_elements ------------------------------------------------------------ */

static nb_status gather_elements_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *idx = nb_in_info(c, 1, 0);
    int axis = 0;
    nb_status st = check_index(c, x, idx, &axis);
    if (st) return st;
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *idx;
    o->dtype = x->dtype;
    return NB_OK;
}

nb_status nb_rule_gathered_vjp(nb_builder *b, nb_grad_ctx *g, nb_value index)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    nb_value zeros = nb_fill_zeros_like(b, nb_grad_x(g, 0, 0));
    int axis = (int)nb_grad_attr(g, "axis")->i;
    nb_grad_set_dx(g, 0, 0, nb_scatter_elements(b, zeros, index, dy, axis, "add"));
    return nb_builder_status(b);
}

nb_status nb_rule_gathered_jvp(nb_builder *b, nb_grad_ctx *g, nb_value index)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, nb_gather_elements(b, t, index, (int)nb_grad_attr(g, "axis")->i));
    return nb_builder_status(b);
}

/* Each element of dOut goes back to the element of X it came from, summed
 * where several came from one. */
static nb_status gather_elements_vjp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_rule_gathered_vjp(b, g, nb_grad_x(g, 1, 0));
}

static nb_status gather_elements_jvp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_rule_gathered_jvp(b, g, nb_grad_x(g, 1, 0));
}

const nb_op_def nb_op_gather_elements = {
    .name = "gather_elements",
    .batch = nb_batch_cross_entropy,
    .doc = "Out[e] = X[e with its axis coordinate replaced by Index[e]] (Index of X's rank; Out has its shape)",
    .inputs = {{"X", 0}, {"Index", NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0)},
    .infer = gather_elements_infer,
    .params_size = sizeof(nb_elements_params),
    .params = elements_params,
    .grad_uses_inputs = (1u << 0) | (1u << 1),
    .vjp = gather_elements_vjp,
    .jvp = gather_elements_jvp,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- scatter_elements ------------------------------------------------------------- */

static nb_status scatter_elements_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *idx = nb_in_info(c, 1, 0), *upd = nb_in_info(c, 2, 0);
    char us[NB_SHAPE_STR_MAX], is[NB_SHAPE_STR_MAX];
    int axis = 0;
    nb_status st = check_index(c, x, idx, &axis);
    if (st) return st;
    const char *r = nb_attr_string(c, "reduction");
    bool numeric = x->dtype == NB_F32 || x->dtype == NB_F64 || x->dtype == NB_I32 || x->dtype == NB_I64;
    if (strcmp(r, "none") && strcmp(r, "add") && strcmp(r, "mul"))
        return nb_error(NB_ERR_ARG, "%s: reduction \"%s\" is not one of none, add, mul", c->label, r);
    if (strcmp(r, "none") && !numeric)
        return nb_error(NB_ERR_DTYPE, "%s: X is %s; reduction %s takes float32, float64, int32 or int64", c->label,
                        nb_dtype_name(x->dtype), r);
    if (upd->dtype != x->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: Updates is %s but X is %s", c->label, nb_dtype_name(upd->dtype),
                        nb_dtype_name(x->dtype));
    bool same = upd->ndim == idx->ndim;
    for (int d = 0; same && d < idx->ndim; d++)
        same = upd->shape[d] < 0 || idx->shape[d] < 0 || upd->shape[d] == idx->shape[d];
    if (!same)
        return nb_error(NB_ERR_SHAPE, "%s: Updates has shape %s but Index %s: they need one shape", c->label,
                        nb_shape_str(us, sizeof us, upd->ndim, upd->shape),
                        nb_shape_str(is, sizeof is, idx->ndim, idx->shape));
    *nb_out_info(c, 0, 0) = *x;
    return NB_OK;
}

/* none: the elements of X that an update replaced get no gradient, the
 * updates get dOut where they landed (with repeated indices the last update
 * wins, and the others' gradient is not zeroed). add: dX = dOut. mul: Out =
 * X * P with P the product of the updates landing there, so dX = dOut * P
 * (a mul scatter of dOut), and an update's share is dOut * Out / Update,
 * NaN or inf where an update is 0, as reduce_prod's rule. */
static nb_status scatter_elements_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0), idx = nb_grad_x(g, 1, 0), upd = nb_grad_x(g, 2, 0);
    if (nb_is_none(dy)) return nb_builder_status(b);
    int axis = (int)nb_grad_attr(g, "axis")->i;
    const char *r = nb_grad_attr(g, "reduction")->s;
    if (nb_grad_wants_dx(g, 0, 0)) {
        nb_value dx = dy;
        if (!strcmp(r, "none")) dx = nb_scatter_elements(b, dy, idx, nb_fill_zeros_like(b, upd), axis, "none");
        else if (!strcmp(r, "mul")) dx = nb_scatter_elements(b, dy, idx, upd, axis, "mul");
        nb_grad_set_dx(g, 0, 0, dx);
    }
    if (nb_grad_wants_dx(g, 2, 0)) {
        nb_value du;
        nb_value share = strcmp(r, "mul") ? dy : nb_mul(b, dy, nb_grad_y(g, 0, 0));
        du = nb_gather_elements(b, share, idx, axis);
        if (!strcmp(r, "mul")) du = nb_div(b, du, upd);
        nb_grad_set_dx(g, 2, 0, du);
    }
    return nb_builder_status(b);
}

/* none and add are linear in (X, Updates): the op on the tangents. mul:
 * tOut = scatter_mul(tX, Updates) + Out * scatter_add(0, tUpdates / Updates). */
static nb_status scatter_elements_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = nb_grad_tx(g, 0, 0), tu = nb_grad_tx(g, 2, 0), x = nb_grad_x(g, 0, 0), idx = nb_grad_x(g, 1, 0),
             upd = nb_grad_x(g, 2, 0);
    if (nb_is_none(tx) && nb_is_none(tu)) return nb_builder_status(b);
    int axis = (int)nb_grad_attr(g, "axis")->i;
    const char *r = nb_grad_attr(g, "reduction")->s;
    if (!strcmp(r, "mul")) {
        nb_value t = nb_is_none(tx) ? NB_NONE : nb_scatter_elements(b, tx, idx, upd, axis, "mul");
        if (!nb_is_none(tu)) {
            nb_value rel = nb_scatter_elements(b, nb_fill_zeros_like(b, x), idx, nb_div(b, tu, upd), axis, "add");
            nb_value part = nb_mul(b, nb_grad_y(g, 0, 0), rel);
            t = nb_is_none(t) ? part : nb_add(b, t, part);
        }
        nb_grad_set_ty(g, 0, 0, t);
        return nb_builder_status(b);
    }
    if (nb_is_none(tx)) tx = nb_fill_zeros_like(b, x);
    if (nb_is_none(tu)) tu = nb_fill_zeros_like(b, upd);
    nb_grad_set_ty(g, 0, 0, nb_scatter_elements(b, tx, idx, tu, axis, r));
    return nb_builder_status(b);
}

const nb_op_def nb_op_scatter_elements = {
    .name = "scatter_elements",
    .batch = nb_batch_cross_entropy,
    .doc = "Out = X, then each Updates[e] put at (e with its axis coordinate Index[e]), replacing (none), added or "
           "multiplied, in order",
    .inputs = {{"X", 0}, {"Index", NB_SLOT_NO_GRAD}, {"Updates", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0), NB_ADEF_STRING("reduction", "none")},
    .infer = scatter_elements_infer,
    .params_size = sizeof(nb_elements_params),
    .params = elements_params,
    .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 2),
    .grad_uses_outputs = 1u << 0,
    .vjp = scatter_elements_vjp,
    .jvp = scatter_elements_jvp,
    .flags = NB_OP_WRITES_ALL,
};
