/* The shape family, part three: ops that pick elements by position (slice,
 * pad and pad's gradient, pad_grad) or through an index tensor (gather,
 * index_select, scatter_add, one_hot). The family table in shape.c lists
 * them.
 *
 * Index tensors come from data, so every index is checked when the kernel
 * runs (kernels/cpu/index.c), before anything is read or written through
 * it. */
#include <string.h>
#include "batch_rules.h"
#include "shape_grad.h"
#include "shape_internal.h"

_Static_assert(sizeof(nb_slice_params) <= NB_MAX_PARAMS_SIZE, "slice's parameters outgrow NB_MAX_PARAMS_SIZE");
_Static_assert(sizeof(nb_pad_params) <= NB_MAX_PARAMS_SIZE, "pad's parameters outgrow NB_MAX_PARAMS_SIZE");

/* ---- slice -------------------------------------------------------------------- */

/* Validates the attributes against Input and works out, for every dim of
 * Input, the first element taken, the step and the output size (-1 where
 * Input's dim is unknown). Dims not in axes are taken whole. */
static nb_status slice_plan(const nb_op_ctx *c, const nb_var_info *x, int64_t *first, int64_t *step, int64_t *out_shape)
{
    const nb_attr_value *axes = nb_attr_get(c, "axes"), *starts = nb_attr_get(c, "starts"),
                        *ends = nb_attr_get(c, "ends"), *strides = nb_attr_get(c, "strides");
    if (starts->n != axes->n || ends->n != axes->n || (strides->n && strides->n != axes->n))
        return nb_error(NB_ERR_ARG,
                        "%s: axes, starts, ends (and strides, if given) need the same length; got %d, %d, %d, %d",
                        c->label, axes->n, starts->n, ends->n, strides->n);
    for (int d = 0; d < x->ndim; d++) {
        first[d] = 0;
        step[d] = 1;
        out_shape[d] = x->shape[d];
    }
    bool seen[NB_MAX_DIMS] = {false};
    for (int k = 0; k < axes->n; k++) {
        int d;
        nb_status st = nb_shapeop_axis(c, "axes entry", axes->ints[k], x->ndim, "Input", x, &d);
        if (st) return st;
        if (seen[d]) return nb_error(NB_ERR_ARG, "%s: axes names dim %d twice", c->label, d);
        seen[d] = true;
        int64_t s = strides->n ? strides->ints[k] : 1;
        if (s <= 0) return nb_error(NB_ERR_ARG, "%s: strides[%d] = %lld must be positive", c->label, k, (long long)s);
        step[d] = s;
        if (x->shape[d] < 0) out_shape[d] = -1;
        else nb_shapeop_slice_range(x->shape[d], starts->ints[k], ends->ints[k], s, &first[d], &out_shape[d]);
    }
    return NB_OK;
}

static nb_status slice_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    int64_t first[NB_MAX_DIMS], step[NB_MAX_DIMS];
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *x;
    return slice_plan(c, x, first, step, o->shape);
}

/* Validates what does not depend on Input (inference checks the rest). A
 * list longer than NB_MAX_DIMS never passes inference, whose axes would
 * repeat or fall out of range, so the kernel never reads entries left out. */
static nb_status slice_params(const nb_op_ctx *c, void *params)
{
    nb_slice_params *p = params;
    const nb_attr_value *axes = nb_attr_get(c, "axes"), *starts = nb_attr_get(c, "starts"),
                        *ends = nb_attr_get(c, "ends"), *strides = nb_attr_get(c, "strides");
    if (starts->n != axes->n || ends->n != axes->n || (strides->n && strides->n != axes->n))
        return nb_error(NB_ERR_ARG,
                        "%s: axes, starts, ends (and strides, if given) need the same length; got %d, %d, %d, %d",
                        c->label, axes->n, starts->n, ends->n, strides->n);
    p->n = axes->n < NB_MAX_DIMS ? axes->n : NB_MAX_DIMS;
    for (int k = 0; k < p->n; k++) {
        int64_t s = strides->n ? strides->ints[k] : 1, a = axes->ints[k];
        if (s <= 0) return nb_error(NB_ERR_ARG, "%s: strides[%d] = %lld must be positive", c->label, k, (long long)s);
        /* Out of int32 range is out of range for any rank, clamped or not. */
        p->axes[k] = (int32_t)(a < INT32_MIN ? INT32_MIN : a > INT32_MAX ? INT32_MAX : a);
        p->starts[k] = starts->ints[k];
        p->ends[k] = ends->ints[k];
        p->strides[k] = s;
    }
    return NB_OK;
}

/* ---- pad ------------------------------------------------------------------------ */

static nb_status pad_mode(const nb_op_ctx *c, nb_pad_mode *mode)
{
    const char *m = nb_attr_string(c, "mode");
    if (!strcmp(m, "constant")) *mode = NB_PAD_CONSTANT;
    else if (!strcmp(m, "reflect")) *mode = NB_PAD_REFLECT;
    else if (!strcmp(m, "edge")) *mode = NB_PAD_EDGE;
    else return nb_error(NB_ERR_ARG, "%s: mode \"%s\" is not one of constant, reflect, edge", c->label, m);
    return NB_OK;
}

/* Checks paddings and mode against the unpadded shape x (dims may be -1)
 * and writes the padded shape to out. */
static nb_status pad_check(nb_op_ctx *c, const nb_var_info *x, const char *slot, int64_t *out)
{
    const nb_attr_value *p = nb_attr_get(c, "paddings");
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    nb_pad_mode mode = NB_PAD_CONSTANT;
    nb_status st = pad_mode(c, &mode);
    if (st) return st;
    if (p->n != 2 * x->ndim)
        return nb_error(NB_ERR_ARG,
                        "%s: paddings %s has %d entries but %s of shape %s needs %d (before and after each dim)",
                        c->label, nb_attr_value_str(b, sizeof b, p), p->n, slot, SHAPE_STR(a, x), 2 * x->ndim);
    for (int d = 0; d < x->ndim; d++) {
        int64_t before = p->ints[2 * d], after = p->ints[2 * d + 1], n = x->shape[d];
        if (before < 0 || after < 0 || before > INT64_MAX / 4 || after > INT64_MAX / 4)
            return nb_error(NB_ERR_ARG, "%s: paddings %s for dim %d must be >= 0 (and not absurdly large)", c->label,
                            nb_attr_value_str(b, sizeof b, p), d);
        if (n < 0) {
            out[d] = -1;
            continue;
        }
        if (mode == NB_PAD_REFLECT && ((before && before >= n) || (after && after >= n)))
            return nb_error(
                NB_ERR_SHAPE,
                "%s: reflect padding (%lld, %lld) of dim %d needs pads smaller than its size %lld (%s has shape %s)",
                c->label, (long long)before, (long long)after, d, (long long)n, slot, SHAPE_STR(a, x));
        if (mode == NB_PAD_EDGE && (before || after) && n == 0)
            return nb_error(NB_ERR_SHAPE, "%s: edge padding of dim %d has no edge to repeat (%s has shape %s)",
                            c->label, d, slot, SHAPE_STR(a, x));
        out[d] = n + before + after;
    }
    return NB_OK;
}

static nb_status pad_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *x;
    return pad_check(c, x, "X", o->shape);
}

/* pad_grad's parameters: mode and paddings (longer than 2 * NB_MAX_DIMS
 * never passes inference, so the entries left out are never read). */
static nb_status pad_grad_params(const nb_op_ctx *c, void *params)
{
    nb_pad_params *p = params;
    const nb_attr_value *pads = nb_attr_get(c, "paddings");
    nb_status st = pad_mode(c, &p->mode);
    if (st) return st;
    p->n = pads->n < 2 * NB_MAX_DIMS ? pads->n : 2 * NB_MAX_DIMS;
    for (int i = 0; i < p->n; i++) p->paddings[i] = pads->ints[i];
    return NB_OK;
}

/* pad's: pad_grad's and the constant border's value. */
static nb_status pad_params(const nb_op_ctx *c, void *params)
{
    ((nb_pad_params *)params)->value = nb_attr_float(c, "pad_value");
    return pad_grad_params(c, params);
}

/* ---- pad_grad ------------------------------------------------------------------- */

/* DX has the shape of DOut less the paddings; the unpadded shape must be
 * one that pad accepts with these paddings and mode. */
static nb_status pad_grad_infer(nb_op_ctx *c)
{
    const nb_var_info *dy = nb_in_info(c, 0, 0);
    const nb_attr_value *p = nb_attr_get(c, "paddings");
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (dy->dtype != NB_F32 && dy->dtype != NB_F64)
        return nb_error(NB_ERR_DTYPE, "%s: DOut is %s; pad_grad takes float32 or float64", c->label,
                        nb_dtype_name(dy->dtype));
    if (p->n != 2 * dy->ndim)
        return nb_error(NB_ERR_ARG,
                        "%s: paddings %s has %d entries but DOut of shape %s needs %d (before and after each dim)",
                        c->label, nb_attr_value_str(b, sizeof b, p), p->n, SHAPE_STR(a, dy), 2 * dy->ndim);
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *dy;
    for (int d = 0; d < dy->ndim; d++) {
        int64_t before = p->ints[2 * d], after = p->ints[2 * d + 1], n = dy->shape[d];
        if (n < 0 || before < 0 || after < 0 || before > INT64_MAX / 4 || after > INT64_MAX / 4) {
            o->shape[d] = -1;
            continue;
        }
        if (n - before - after < 0)
            return nb_error(NB_ERR_SHAPE, "%s: DOut of shape %s is smaller than paddings %s along dim %d", c->label,
                            SHAPE_STR(a, dy), nb_attr_value_str(b, sizeof b, p), d);
        o->shape[d] = n - before - after;
    }
    int64_t padded[NB_MAX_DIMS];
    return pad_check(c, o, "DX", padded);
}

/* ---- gather, index_select ------------------------------------------------------- */

static nb_status check_index_info(const nb_op_ctx *c, const nb_var_info *idx, const char *slot)
{
    char a[NB_SHAPE_STR_MAX];
    if (idx->dtype != NB_I32 && idx->dtype != NB_I64)
        return nb_error(NB_ERR_DTYPE, "%s: %s must be int32 or int64, got %s", c->label, slot,
                        nb_dtype_name(idx->dtype));
    if (idx->ndim != 1)
        return nb_error(NB_ERR_SHAPE, "%s: %s must be 1-D, got shape %s", c->label, slot, SHAPE_STR(a, idx));
    return NB_OK;
}

/* The indexed axis of X, read from attribute `attr` ("axis" or "dim"). */
static nb_status indexed_axis(const nb_op_ctx *c, const char *attr, int *axis)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    if (x->ndim == 0) return nb_error(NB_ERR_SHAPE, "%s: X is a scalar (shape []); it needs a dim to index", c->label);
    return nb_shapeop_axis(c, attr, nb_attr_int(c, attr), x->ndim, "X", x, axis);
}

static nb_status gather_infer_with(nb_op_ctx *c, const char *attr)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *idx = nb_in_info(c, 1, 0);
    int axis;
    nb_status st = check_index_info(c, idx, "Index");
    if (st || (st = indexed_axis(c, attr, &axis))) return st;
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *x;
    o->shape[axis] = idx->shape[0];
    return NB_OK;
}

static nb_status gather_infer(nb_op_ctx *c) { return gather_infer_with(c, "axis"); }
static nb_status index_select_infer(nb_op_ctx *c) { return gather_infer_with(c, "dim"); }

/* index_select's axis goes by its torch name. */
static nb_status index_select_params(const nb_op_ctx *c, void *params)
{
    nb_shape_axis_params *p = params;
    p->axis = nb_attr_int(c, "dim");
    return NB_OK;
}

/* ---- scatter_add ------------------------------------------------------------------ */

static nb_status scatter_add_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *idx = nb_in_info(c, 1, 0), *upd = nb_in_info(c, 2, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX], i[NB_SHAPE_STR_MAX];
    int axis;
    nb_status st = check_index_info(c, idx, "Index");
    if (st || (st = indexed_axis(c, "axis", &axis))) return st;
    if (x->dtype != NB_F32 && x->dtype != NB_F64 && x->dtype != NB_I32 && x->dtype != NB_I64)
        return nb_error(NB_ERR_DTYPE, "%s: X is %s; scatter_add takes float32, float64, int32 or int64", c->label,
                        nb_dtype_name(x->dtype));
    if (upd->dtype != x->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: Updates is %s but X is %s", c->label, nb_dtype_name(upd->dtype),
                        nb_dtype_name(x->dtype));
    bool ok = upd->ndim == x->ndim;
    for (int d = 0; d < x->ndim && ok; d++) {
        int64_t want = d == axis ? idx->shape[0] : x->shape[d], got = upd->shape[d];
        ok = want < 0 || got < 0 || want == got;
    }
    if (!ok)
        return nb_error(
            NB_ERR_SHAPE,
            "%s: Updates has shape %s but X has shape %s and Index %s: Updates must be X's shape with dim %d = len(Index)",
            c->label, SHAPE_STR(a, upd), SHAPE_STR(b, x), SHAPE_STR(i, idx), axis);
    *nb_out_info(c, 0, 0) = *x;
    return NB_OK;
}

/* ---- one_hot ------------------------------------------------------------------------ */

static nb_status one_hot_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    int64_t depth = nb_attr_int(c, "depth"), dt = nb_attr_int(c, "dtype");
    char a[NB_SHAPE_STR_MAX];
    if (x->dtype != NB_I32 && x->dtype != NB_I64)
        return nb_error(NB_ERR_DTYPE, "%s: X must be int32 or int64, got %s", c->label, nb_dtype_name(x->dtype));
    if (depth <= 0) return nb_error(NB_ERR_ARG, "%s: depth must be positive, got %lld", c->label, (long long)depth);
    if (dt < 0 || dt > INT32_MAX || !nb_dtype_valid((int)dt))
        return nb_error(NB_ERR_ARG, "%s: dtype %lld is not a valid nb_dtype", c->label, (long long)dt);
    if (x->ndim + 1 > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "%s: X of shape %s has no room for one more dim (at most %d)", c->label,
                        SHAPE_STR(a, x), NB_MAX_DIMS);
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *x;
    o->dtype = (nb_dtype)dt;
    o->shape[o->ndim++] = depth;
    return NB_OK;
}

static nb_status one_hot_params(const nb_op_ctx *c, void *params)
{
    nb_one_hot_params *p = params;
    p->depth = nb_attr_int(c, "depth");
    return NB_OK;
}

/* ---- definitions ------------------------------------------------------------------ */

const nb_op_def nb_op_slice = {
    .name = "slice",
    .batch = nb_batch_slice,
    .doc = "Input[starts:ends:strides] along axes (Python rules: negative bounds count from the end, clamped)",
    .inputs = {{"Input", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("axes", NB_ATTR_INTS), NB_ADEF_REQUIRED("starts", NB_ATTR_INTS),
              NB_ADEF_REQUIRED("ends", NB_ATTR_INTS), NB_ADEF_INTS_EMPTY("strides")},
    .infer = slice_infer,
    .params_size = sizeof(nb_slice_params),
    .params = slice_params,
    .grad_uses_inputs = 1u << 0,
    .vjp = nb_slice_vjp,
    .jvp = nb_shape_jvp,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def nb_op_pad = {
    .name = "pad",
    .batch = nb_batch_pad,
    .doc =
        "Pads every dim of X by paddings (before, after pairs) with pad_value, or by reflecting or repeating the edge",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("paddings", NB_ATTR_INTS), NB_ADEF_FLOAT("pad_value", 0.0),
              NB_ADEF_STRING("mode", "constant")},
    .infer = pad_infer,
    .params_size = sizeof(nb_pad_params),
    .params = pad_params,
    .vjp = nb_pad_vjp,
    .jvp = nb_shape_jvp,
};

const nb_op_def nb_op_pad_grad = {
    .name = "pad_grad",
    .batch = nb_batch_pad,
    .doc = "Gradient of pad: DX adds each element of DOut onto the element of X that pad copied it from",
    .inputs = {{"DOut", 0}},
    .outputs = {{"DX", 0}},
    .attrs = {NB_ADEF_REQUIRED("paddings", NB_ATTR_INTS), NB_ADEF_STRING("mode", "constant")},
    .infer = pad_grad_infer,
    .params_size = sizeof(nb_pad_params),
    .params = pad_grad_params,
    .vjp = nb_pad_grad_vjp,
    .jvp = nb_shape_jvp,
};

/* gather and index_select differ in their axis attribute's name alone. */
#define GATHER_LIKE                                                                                    \
    .batch = nb_batch_gather, .inputs = {{"X", 0}, {"Index", NB_SLOT_NO_GRAD}}, .outputs = {{"Out", 0}}, \
    .params_size = sizeof(nb_shape_axis_params), .grad_uses_inputs = (1u << 0) | (1u << 1),            \
    .vjp = nb_gather_vjp, .jvp = nb_shape_jvp

const nb_op_def nb_op_gather = {
    .name = "gather",
    .doc = "Takes the slices X[..., Index[i], ...] along axis (Index 1-D): dim axis of Out has len(Index)",
    GATHER_LIKE,
    .attrs = {NB_ADEF_INT("axis", 0)},
    .infer = gather_infer,
    .params = nb_shapeop_axis_params,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def nb_op_index_select = {
    .name = "index_select",
    .doc = "gather under its torch name: the slices of X at Index (1-D) along dim",
    GATHER_LIKE,
    .attrs = {NB_ADEF_INT("dim", 0)},
    .infer = index_select_infer,
    .params = index_select_params,
};

const nb_op_def nb_op_scatter_add = {
    .name = "scatter_add",
    .batch = nb_batch_scatter_add,
    .doc = "Out = X, then Out[..., Index[i], ...] += Updates[..., i, ...] along axis (the gradient of gather)",
    .inputs = {{"X", 0}, {"Index", NB_SLOT_NO_GRAD}, {"Updates", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0)},
    .infer = scatter_add_infer,
    .params_size = sizeof(nb_shape_axis_params),
    .params = nb_shapeop_axis_params,
    .grad_uses_inputs = 1u << 1,
    .vjp = nb_scatter_add_vjp,
    .jvp = nb_scatter_add_jvp,
};

const nb_op_def nb_op_one_hot = {
    .name = "one_hot",
    .batch = nb_batch_unary,
    .doc = "Out[..., k] = 1 where k = X[...], else 0; Out has X's shape plus a last dim of size depth",
    .inputs = {{"X", NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("depth", NB_ATTR_INT), NB_ADEF_INT("dtype", NB_F32)},
    .infer = one_hot_infer,
    .params_size = sizeof(nb_one_hot_params),
    .params = one_hot_params,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};
