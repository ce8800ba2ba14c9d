/* The shape family, part two: ops that join tensors (concat, stack) or cut
 * one apart (split). The family table in shape.c lists them; their one
 * parameter is the axis (nb_shapeop_axis_params). */
#include <stdio.h>
#include <string.h>
#include "batch_rules.h"
#include "shape_grad.h"
#include "shape_internal.h"

/* Checks that input k has the dtype and rank of input 0 and, except along
 * `skip` (-1: none), the dims seen so far in `shape`, which it refines where
 * earlier inputs left a dim unknown; from[d] is the input that fixed dim d. */
static nb_status merge_input(nb_op_ctx *c, int k, int skip, int64_t *shape, int *from, const char *rule)
{
    const nb_var_info *x0 = nb_in_info(c, 0, 0), *xk = nb_in_info(c, 0, k);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (xk->dtype != x0->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: X[%d] is %s but X[0] is %s", c->label, k, nb_dtype_name(xk->dtype),
                        nb_dtype_name(x0->dtype));
    if (xk->ndim != x0->ndim)
        return nb_error(NB_ERR_SHAPE, "%s: X[%d] has shape %s but X[0] has shape %s: %s", c->label, k, SHAPE_STR(a, xk),
                        SHAPE_STR(b, x0), rule);
    for (int d = 0; d < xk->ndim; d++) {
        if (d == skip || xk->shape[d] < 0) continue;
        if (shape[d] < 0) {
            shape[d] = xk->shape[d];
            from[d] = k;
        } else if (shape[d] != xk->shape[d]) {
            const nb_var_info *xj = nb_in_info(c, 0, from[d]);
            return nb_error(NB_ERR_SHAPE, "%s: X[%d] has shape %s but X[%d] has shape %s: %s", c->label, k,
                            SHAPE_STR(a, xk), from[d], SHAPE_STR(b, xj), rule);
        }
    }
    return NB_OK;
}

static nb_status concat_axis(nb_op_ctx *c, int *axis)
{
    const nb_var_info *x0 = nb_in_info(c, 0, 0);
    if (x0->ndim == 0)
        return nb_error(NB_ERR_SHAPE, "%s: X[0] is a scalar (shape []); concat joins tensors of rank >= 1", c->label);
    return nb_shapeop_axis(c, "axis", nb_attr_int(c, "axis"), x0->ndim, "X[0]", x0, axis);
}

static nb_status concat_infer(nb_op_ctx *c)
{
    int axis, n = nb_in_count(c, 0), from[NB_MAX_DIMS] = {0};
    nb_status st = concat_axis(c, &axis);
    if (st) return st;
    const nb_var_info *x0 = nb_in_info(c, 0, 0);
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *x0;
    char rule[64];
    snprintf(rule, sizeof rule, "all dims but axis %d must match", axis);
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        if ((st = merge_input(c, k, axis, o->shape, from, rule))) return st;
        int64_t len = nb_in_info(c, 0, k)->shape[axis];
        total = total < 0 || len < 0 ? -1 : total + len;
    }
    o->shape[axis] = total;
    return NB_OK;
}

static nb_status stack_infer(nb_op_ctx *c)
{
    const nb_var_info *x0 = nb_in_info(c, 0, 0);
    int n = nb_in_count(c, 0), axis, from[NB_MAX_DIMS] = {0};
    char a[NB_SHAPE_STR_MAX];
    if (x0->ndim + 1 > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "%s: stacking X of shape %s gives more than %d dims", c->label, SHAPE_STR(a, x0),
                        NB_MAX_DIMS);
    nb_status st = nb_shapeop_axis(c, "axis", nb_attr_int(c, "axis"), x0->ndim + 1, "X[0]", x0, &axis);
    if (st) return st;
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    for (int k = 0; k < n; k++)
        if ((st = merge_input(c, k, -1, shape, from, "stack needs equal shapes"))) return st;
    nb_var_info *o = nb_out_info(c, 0, 0);
    o->dtype = x0->dtype;
    o->ndim = x0->ndim + 1;
    for (int d = 0, k = 0; d < o->ndim; d++) o->shape[d] = d == axis ? n : shape[k++];
    return NB_OK;
}

static nb_status split_axis(nb_op_ctx *c, int *axis)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    if (x->ndim == 0)
        return nb_error(NB_ERR_SHAPE, "%s: X is a scalar (shape []); split cuts tensors of rank >= 1", c->label);
    return nb_shapeop_axis(c, "axis", nb_attr_int(c, "axis"), x->ndim, "X", x, axis);
}

static nb_status split_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    const nb_attr_value *sec = nb_attr_get(c, "sections");
    int n = nb_out_count(c, 0), axis;
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    nb_status st = split_axis(c, &axis);
    if (st) return st;
    int64_t len = x->shape[axis];
    for (int k = 0; k < n; k++) {
        nb_var_info *o = nb_out_info(c, 0, k);
        *o = *x;
    }
    if (!sec->n) {
        if (len >= 0 && len % n)
            return nb_error(NB_ERR_SHAPE,
                            "%s: dim %d of X (shape %s) has size %lld, which does not split into %d equal parts",
                            c->label, axis, SHAPE_STR(a, x), (long long)len, n);
        for (int k = 0; k < n; k++) nb_out_info(c, 0, k)->shape[axis] = len < 0 ? -1 : len / n;
        return NB_OK;
    }
    if (sec->n != n)
        return nb_error(NB_ERR_ARG, "%s: sections %s has %d entries but %d outputs were given", c->label,
                        nb_attr_value_str(b, sizeof b, sec), sec->n, n);
    int infer_at = -1;
    int64_t sum = 0;
    for (int k = 0; k < n; k++) {
        int64_t s = sec->ints[k];
        if (s < -1 || (s == -1 && infer_at >= 0))
            return nb_error(NB_ERR_ARG, "%s: sections %s: sizes must be >= 0, with at most one -1 to infer", c->label,
                            nb_attr_value_str(b, sizeof b, sec));
        if (s == -1) infer_at = k;
        else sum += s;
        nb_out_info(c, 0, k)->shape[axis] = s;
    }
    if (len < 0) return NB_OK;
    if (infer_at >= 0 ? sum > len : sum != len)
        return nb_error(NB_ERR_SHAPE, "%s: sections %s do not add up to %lld, the size of dim %d of X (shape %s)",
                        c->label, nb_attr_value_str(b, sizeof b, sec), (long long)len, axis, SHAPE_STR(a, x));
    if (infer_at >= 0) nb_out_info(c, 0, infer_at)->shape[axis] = len - sum;
    return NB_OK;
}

/* ---- definitions ------------------------------------------------------------------ */

const nb_op_def nb_op_concat = {
    .name = "concat",
    .batch = nb_batch_concat,
    .doc = "Joins the tensors X along an existing axis; all other dims must match",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0)},
    .infer = concat_infer,
    .params_size = sizeof(nb_shape_axis_params),
    .params = nb_shapeop_axis_params,
    .grad_uses_inputs = 1u << 0,
    .vjp = nb_concat_vjp,
    .jvp = nb_join_jvp,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def nb_op_split = {
    .name = "split",
    .batch = nb_batch_split,
    .doc = "Cuts X along axis into the given outputs: sizes from sections, or equal parts",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", NB_SLOT_VARIADIC}},
    .attrs = {NB_ADEF_INT("axis", 0), NB_ADEF_INTS_EMPTY("sections")},
    .infer = split_infer,
    .params_size = sizeof(nb_shape_axis_params),
    .params = nb_shapeop_axis_params,
    .grad_uses_outputs = 1u << 0, /* the shapes of pieces that get no gradient */
    .vjp = nb_split_vjp,
    .jvp = nb_shape_jvp,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def nb_op_stack = {
    .name = "stack",
    .batch = nb_batch_stack,
    .doc = "Joins equally shaped tensors X along a new dim at axis",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0)},
    .infer = stack_infer,
    .params_size = sizeof(nb_shape_axis_params),
    .params = nb_shapeop_axis_params,
    .vjp = nb_stack_vjp,
    .jvp = nb_join_jvp,
    .flags = NB_OP_WRITES_ALL,
};
