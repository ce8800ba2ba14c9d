/* The shape family, part one: ops that change how elements are laid out
 * (reshape, flatten, squeeze, unsqueeze, reshape_as, transpose, expand,
 * expand_as), and the helpers the family shares. Joining and cutting
 * (concat, stack, split) are in join.c, slicing, padding and the index ops
 * in index.c; the family table at the end lists them all. Gradient rules
 * are in shape_grad.c and shape_grad_index.c, the CPU kernels in
 * kernels/cpu/shape_kernels.c and index.c.
 *
 * Every op copies into its output: views belong to the tensor API, while op
 * outputs own contiguous storage that later ops may overwrite in place. */
#include "families.h"
#include "batch_rules.h"
#include "kernels/cpu/shape.h"
#include "shape_grad.h"
#include "shape_internal.h"

/* ---- helpers shared with join.c and index.c ---------------------------------------- */

nb_status nb_shapeop_axis(const nb_op_ctx *c, const char *attr, int64_t axis, int rank, const char *slot,
                          const nb_var_info *x, int *out)
{
    if (axis < -rank || axis >= rank) {
        char a[NB_SHAPE_STR_MAX];
        if (rank != x->ndim)
            return nb_error(NB_ERR_ARG,
                            "%s: %s %lld is out of range [%d, %d) for the rank-%d output from %s of shape %s", c->label,
                            attr, (long long)axis, -rank, rank, rank, slot, SHAPE_STR(a, x));
        return nb_error(NB_ERR_ARG, "%s: %s %lld is out of range [%d, %d) for %s of shape %s", c->label, attr,
                        (long long)axis, -rank, rank, slot, SHAPE_STR(a, x));
    }
    *out = (int)(axis < 0 ? axis + rank : axis);
    return NB_OK;
}

nb_status nb_shapeop_axis_params(const nb_op_ctx *c, void *params)
{
    nb_shape_axis_params *p = params;
    p->axis = nb_attr_int(c, "axis");
    return NB_OK;
}

static nb_var_info *set_out(nb_op_ctx *c, const nb_var_info *x)
{
    nb_var_info *o = nb_out_info(c, 0, 0);
    o->dtype = x->dtype;
    return o;
}

/* ---- reshape, flatten, squeeze, unsqueeze, reshape_as: same elements, new shape */

static nb_status reshape_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    const nb_attr_value *sa = nb_attr_get(c, "shape");
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (sa->n > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "%s: shape %s has %d entries, more than the %d dims nabla supports", c->label,
                        nb_attr_value_str(b, sizeof b, sa), sa->n, NB_MAX_DIMS);
    nb_var_info *o = set_out(c, x);
    o->ndim = sa->n;
    /* Dims copied from X by a 0 appear on both sides, so they cancel out of
     * the element count; this is what lets [-1, 28, 28] -> [0, -1] resolve the
     * -1 to 784 even though the batch size is unknown. */
    bool copied[NB_MAX_DIMS] = {false};
    int infer_at = -1;
    int64_t out_count = 1;
    for (int i = 0; i < sa->n; i++) {
        int64_t v = sa->ints[i];
        if (v == -1) {
            if (infer_at >= 0)
                return nb_error(NB_ERR_ARG, "%s: shape %s has more than one -1", c->label,
                                nb_attr_value_str(b, sizeof b, sa));
            infer_at = i;
        } else if (v == 0) {
            if (i >= x->ndim)
                return nb_error(NB_ERR_ARG, "%s: shape[%d] = 0 copies dim %d of X, but X has shape %s", c->label, i, i,
                                SHAPE_STR(a, x));
            o->shape[i] = x->shape[i];
            copied[i] = true;
        } else if (v < 0) {
            return nb_error(NB_ERR_ARG, "%s: shape[%d] = %lld is invalid (-1 infers a dim, 0 copies X's)", c->label, i,
                            (long long)v);
        } else {
            if (out_count > INT64_MAX / v)
                return nb_error(NB_ERR_ARG, "%s: shape %s has too many elements", c->label,
                                nb_attr_value_str(b, sizeof b, sa));
            o->shape[i] = v;
            out_count *= v;
        }
    }
    bool x_unknown = false;
    int64_t x_count = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < sa->n && copied[d]) continue;
        if (x->shape[d] < 0) x_unknown = true;
        else x_count *= x->shape[d];
    }
    if (x_unknown) {
        if (infer_at >= 0) o->shape[infer_at] = -1;
        return NB_OK;
    }
    if (infer_at >= 0 ? x_count % out_count != 0 : x_count != out_count)
        return nb_error(NB_ERR_SHAPE, "%s: cannot reshape X of shape %s (%lld elements) into %s", c->label,
                        SHAPE_STR(a, x), (long long)nb_shape_numel(x->ndim, x->shape),
                        nb_attr_value_str(b, sizeof b, sa));
    if (infer_at >= 0) o->shape[infer_at] = x_count / out_count;
    return NB_OK;
}

static nb_status flatten_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    int rank = x->ndim ? x->ndim : 1, s = 0, e = 0;
    nb_status st;
    if ((st = nb_shapeop_axis(c, "start_axis", nb_attr_int(c, "start_axis"), rank, "X", x, &s)) ||
        (st = nb_shapeop_axis(c, "stop_axis", nb_attr_int(c, "stop_axis"), rank, "X", x, &e)))
        return st;
    if (s > e) {
        char a[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_ARG, "%s: start_axis (dim %d) comes after stop_axis (dim %d) for X of shape %s",
                        c->label, s, e, SHAPE_STR(a, x));
    }
    nb_var_info *o = set_out(c, x);
    if (x->ndim == 0) {
        o->ndim = 1;
        o->shape[0] = 1;
        return NB_OK;
    }
    int k = 0;
    for (int d = 0; d < s; d++) o->shape[k++] = x->shape[d];
    o->shape[k++] = nb_cpu_shape_product(x->shape, s, e + 1);
    for (int d = e + 1; d < x->ndim; d++) o->shape[k++] = x->shape[d];
    o->ndim = k;
    return NB_OK;
}

static nb_status squeeze_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    const nb_attr_value *axes = nb_attr_get(c, "axes");
    bool drop[NB_MAX_DIMS] = {false};
    for (int d = 0; d < x->ndim && !axes->n; d++) drop[d] = x->shape[d] == 1;
    for (int i = 0; i < axes->n; i++) {
        int d = 0;
        nb_status st = nb_shapeop_axis(c, "axes entry", axes->ints[i], x->ndim, "X", x, &d);
        if (st) return st;
        /* A named dim of unknown size is taken to be 1: naming it says so. At
         * run time a dim that is not 1 stays, as in torch.squeeze. */
        drop[d] = x->shape[d] == 1 || x->shape[d] < 0;
    }
    nb_var_info *o = set_out(c, x);
    o->ndim = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!drop[d]) o->shape[o->ndim++] = x->shape[d];
    return NB_OK;
}

static nb_status unsqueeze_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    const nb_attr_value *axes = nb_attr_get(c, "axes");
    char a[NB_SHAPE_STR_MAX];
    int rank = x->ndim + axes->n;
    if (rank > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "%s: inserting %d dims into X of shape %s gives more than %d dims", c->label,
                        axes->n, SHAPE_STR(a, x), NB_MAX_DIMS);
    bool inserted[NB_MAX_DIMS] = {false};
    for (int i = 0; i < axes->n; i++) {
        int d = 0;
        nb_status st = nb_shapeop_axis(c, "axes entry", axes->ints[i], rank, "X", x, &d);
        if (st) return st;
        if (inserted[d]) return nb_error(NB_ERR_ARG, "%s: axes names output dim %d twice", c->label, d);
        inserted[d] = true;
    }
    nb_var_info *o = set_out(c, x);
    o->ndim = rank;
    for (int d = 0, k = 0; d < rank; d++) o->shape[d] = inserted[d] ? 1 : x->shape[k++];
    return NB_OK;
}

/* reshape_as: Out takes the shape of Like. One unknown dim of Like is
 * worked out from X's element count when the rest are known. */
static nb_status reshape_as_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *like = nb_in_info(c, 1, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    nb_var_info *o = set_out(c, x);
    o->ndim = like->ndim;
    int unknown_at = -1, n_unknown = 0;
    int64_t rest = 1;
    for (int d = 0; d < like->ndim; d++) {
        o->shape[d] = like->shape[d];
        if (like->shape[d] < 0) {
            unknown_at = d;
            n_unknown++;
        } else {
            rest *= like->shape[d];
        }
    }
    int64_t xn = nb_cpu_shape_product(x->shape, 0, x->ndim);
    if (xn < 0 || n_unknown > 1) return NB_OK;
    if (n_unknown == 1 && rest > 0 && xn % rest == 0) {
        o->shape[unknown_at] = xn / rest;
        return NB_OK;
    }
    if ((n_unknown == 1 && (rest > 0 || xn > 0)) || (n_unknown == 0 && rest != xn))
        return nb_error(NB_ERR_SHAPE, "%s: X of shape %s (%lld elements) cannot take the shape %s of Like", c->label,
                        SHAPE_STR(a, x), (long long)xn, SHAPE_STR(b, like));
    return NB_OK;
}

/* ---- transpose ---------------------------------------------------------------- */

static nb_status transpose_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    const nb_attr_value *perm = nb_attr_get(c, "perm");
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (perm->n != x->ndim)
        return nb_error(NB_ERR_ARG, "%s: perm %s has %d entries but X has shape %s", c->label,
                        nb_attr_value_str(b, sizeof b, perm), perm->n, SHAPE_STR(a, x));
    bool seen[NB_MAX_DIMS] = {false};
    nb_var_info *o = set_out(c, x);
    o->ndim = x->ndim;
    for (int i = 0; i < perm->n; i++) {
        int64_t p = perm->ints[i];
        if (p < 0) p += x->ndim;
        if (p < 0 || p >= x->ndim || seen[p])
            return nb_error(NB_ERR_ARG, "%s: perm %s is not a permutation of the %d dims of X (shape %s)", c->label,
                            nb_attr_value_str(b, sizeof b, perm), x->ndim, SHAPE_STR(a, x));
        seen[p] = true;
        o->shape[i] = x->shape[p];
    }
    return NB_OK;
}

/* A perm longer than NB_MAX_DIMS never passes inference (X has fewer
 * dims), so the kernel never reads the entries left out. */
static nb_status transpose_params(const nb_op_ctx *c, void *params)
{
    nb_transpose_params *p = params;
    const nb_attr_value *perm = nb_attr_get(c, "perm");
    p->n = perm->n < NB_MAX_DIMS ? perm->n : NB_MAX_DIMS;
    for (int i = 0; i < p->n; i++) p->perm[i] = perm->ints[i];
    return NB_OK;
}

/* ---- expand, expand_as ----------------------------------------------------------- */

static nb_status expand_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    const nb_attr_value *sa = nb_attr_get(c, "shape");
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (sa->n < x->ndim || sa->n > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "%s: shape %s must have between %d (the rank of X, shape %s) and %d entries",
                        c->label, nb_attr_value_str(b, sizeof b, sa), x->ndim, SHAPE_STR(a, x), NB_MAX_DIMS);
    nb_var_info *o = set_out(c, x);
    o->ndim = sa->n;
    int lead = sa->n - x->ndim;
    for (int i = 0; i < sa->n; i++) {
        int64_t t = sa->ints[i], xd = i >= lead ? x->shape[i - lead] : 1;
        if (t < -1 || (t == -1 && i < lead))
            return nb_error(NB_ERR_ARG, "%s: shape[%d] = %lld is invalid in %s for X of shape %s (-1 keeps a dim of X)",
                            c->label, i, (long long)t, nb_attr_value_str(b, sizeof b, sa), SHAPE_STR(a, x));
        if (t == -1) o->shape[i] = xd;
        else if (xd == t || xd == 1 || xd == -1 || i < lead) o->shape[i] = t;
        else
            return nb_error(NB_ERR_SHAPE, "%s: X of shape %s cannot expand to %s: dim %d has size %lld, not 1 or %lld",
                            c->label, SHAPE_STR(a, x), nb_attr_value_str(b, sizeof b, sa), i - lead, (long long)xd,
                            (long long)t);
    }
    return NB_OK;
}

static nb_status expand_as_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *like = nb_in_info(c, 1, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    nb_var_info *o = set_out(c, x);
    o->ndim = like->ndim;
    int lead = like->ndim - x->ndim;
    for (int i = 0; i < like->ndim && lead >= 0; i++) {
        int64_t l = like->shape[i], xd = i >= lead ? x->shape[i - lead] : 1;
        if (l == -1) o->shape[i] = xd > 1 ? xd : -1;
        else if (xd == l || xd == 1 || xd == -1) o->shape[i] = l;
        else lead = -1;
    }
    if (lead < 0)
        return nb_error(NB_ERR_SHAPE, "%s: X of shape %s cannot broadcast to the shape %s of Like", c->label,
                        SHAPE_STR(a, x), SHAPE_STR(b, like));
    return NB_OK;
}

/* ---- definitions ------------------------------------------------------------------ *
 *
 * The ops that keep the element order (reshape, flatten, squeeze, unsqueeze,
 * reshape_as) are NB_OP_INPLACE: their kernel is a copy that does nothing
 * when the executor gives the output the buffer of an input that dies there,
 * as a gradient flattened for a weight's product usually does. Run eagerly
 * they are views (NB_OP_VIEW), as torch's reshape of a contiguous tensor:
 * vmap's rules reshape at almost every op, and copied each time. */

/* What the view ops share: the elements of X in another shape, so that
 * reshape's VJP serves them all, and written in place or as a view. */
#define VIEW_OP_SLOTS .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}
#define VIEW_OP_RULES \
    .grad_uses_inputs = 1u << 0, .vjp = nb_reshape_vjp, .jvp = nb_shape_jvp, .flags = NB_OP_INPLACE | NB_OP_VIEW

static const nb_op_def op_reshape = {
    .name = "reshape",
    .batch = nb_batch_reshape,
    .doc = "X with a new shape: one entry of shape may be -1 (inferred), 0 copies that dim of X",
    VIEW_OP_SLOTS,
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS)},
    .infer = reshape_infer,
    VIEW_OP_RULES,
};

static const nb_op_def op_flatten = {
    .name = "flatten",
    .batch = nb_batch_flatten,
    .doc = "Merges dims start_axis..stop_axis of X into one (torch.flatten)",
    VIEW_OP_SLOTS,
    .attrs = {NB_ADEF_INT("start_axis", 1), NB_ADEF_INT("stop_axis", -1)},
    .infer = flatten_infer,
    VIEW_OP_RULES,
};

static const nb_op_def op_squeeze = {
    .name = "squeeze",
    .batch = nb_batch_squeeze,
    .doc = "Drops size-1 dims of X: those in axes (others are left alone), or all when axes is empty",
    VIEW_OP_SLOTS,
    .attrs = {NB_ADEF_INTS_EMPTY("axes")},
    .infer = squeeze_infer,
    VIEW_OP_RULES,
};

static const nb_op_def op_unsqueeze = {
    .name = "unsqueeze",
    .batch = nb_batch_unsqueeze,
    .doc = "Inserts size-1 dims into X at the output positions listed in axes",
    VIEW_OP_SLOTS,
    .attrs = {NB_ADEF_REQUIRED("axes", NB_ATTR_INTS)},
    .infer = unsqueeze_infer,
    VIEW_OP_RULES,
};

static const nb_op_def op_reshape_as = {
    .name = "reshape_as",
    .batch = nb_batch_reshape,
    .doc = "X with the shape of Like (same element count): reshape to a shape known only at run time",
    .inputs = {{"X", 0}, {"Like", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY}},
    .outputs = {{"Out", 0}},
    .infer = reshape_as_infer,
    .grad_uses_inputs = 1u << 0,
    .vjp = nb_reshape_vjp,
    .jvp = nb_shape_jvp,
    .flags = NB_OP_INPLACE | NB_OP_VIEW,
};

static const nb_op_def op_transpose = {
    .name = "transpose",
    .batch = nb_batch_transpose,
    .doc = "Permutes the dims of X: dim i of Out is dim perm[i] of X",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("perm", NB_ATTR_INTS)},
    .infer = transpose_infer,
    .params_size = sizeof(nb_transpose_params),
    .params = transpose_params,
    .vjp = nb_transpose_vjp,
    .jvp = nb_shape_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_expand = {
    .name = "expand",
    .batch = nb_batch_expand,
    .doc = "Broadcasts X to shape (NumPy rules); -1 in shape keeps that dim of X",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS)},
    .infer = expand_infer,
    .grad_uses_inputs = 1u << 0,
    .vjp = nb_expand_vjp,
    .jvp = nb_shape_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_expand_as = {
    .name = "expand_as",
    .batch = nb_batch_expand,
    .doc = "Broadcasts X to the shape of Like (NumPy rules)",
    .inputs = {{"X", 0}, {"Like", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY}},
    .outputs = {{"Out", 0}},
    .infer = expand_as_infer,
    .grad_uses_inputs = 1u << 0,
    .vjp = nb_expand_vjp,
    .jvp = nb_shape_jvp,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def *const nb_ops_shape[] = {
    &op_reshape, &op_flatten,     &op_squeeze,   &op_unsqueeze,       &op_reshape_as,     &op_transpose,
    &op_expand,  &op_expand_as,   &nb_op_concat, &nb_op_split,        &nb_op_stack,       &nb_op_slice,
    &nb_op_pad,  &nb_op_pad_grad, &nb_op_gather, &nb_op_index_select, &nb_op_scatter_add, &nb_op_one_hot,
    NULL,
};
