/* The shape family, part one: ops that change how elements are laid out
 * (reshape, flatten, squeeze, unsqueeze, transpose, expand, expand_as) and
 * ops that join or cut tensors (concat, split, stack). Slicing, padding and
 * the index ops are in index.c; the family table at the end lists both.
 *
 * Every op copies into its output: views belong to the tensor API, while op
 * outputs own contiguous storage that later ops may overwrite in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/tensor_internal.h"
#include "families.h"
#include "kernels/cpu/shape.h"
#include "shape_internal.h"

/* ---- helpers shared with index.c ------------------------------------------- */

nb_status nb_shape_axis(const nb_op_ctx *c, const char *attr, int64_t axis, int rank, const char *slot,
                        const nb_var_info *x, int *out)
{
    if (axis < -rank || axis >= rank) {
        char a[NB_SHAPE_STR_MAX];
        if (rank != x->ndim)
            return nb_error(NB_ERR_ARG, "%s: %s %lld is out of range [%d, %d) for the rank-%d output from %s of shape %s",
                            c->label, attr, (long long)axis, -rank, rank, rank, slot, SHAPE_STR(a, x));
        return nb_error(NB_ERR_ARG, "%s: %s %lld is out of range [%d, %d) for %s of shape %s", c->label, attr,
                        (long long)axis, -rank, rank, slot, SHAPE_STR(a, x));
    }
    *out = (int)(axis < 0 ? axis + rank : axis);
    return NB_OK;
}

static size_t tensor_bytes(const nb_tensor *t)
{
    return (size_t)nb_tensor_numel(t) * nb_dtype_size(t->dtype);
}

bool nb_shape_overlap(const nb_tensor *a, const nb_tensor *b)
{
    const char *pa = nb_tensor_data(a), *pb = nb_tensor_data(b);
    size_t na = tensor_bytes(a), nbytes = tensor_bytes(b);
    return na && nbytes && pa < pb + nbytes && pb < pa + na;
}

nb_status nb_shape_out_begin(const nb_op_ctx *c, nb_tensor *out, nb_out_buf *b)
{
    *b = (nb_out_buf){.t = out, .data = nb_tensor_data(out)};
    int n = c->in_begin[NB_MAX_SLOTS];
    for (int i = 0; i < n; i++) {
        if (!c->in[i] || !nb_shape_overlap(out, c->in[i])) continue;
        if (!(b->scratch = malloc(tensor_bytes(out))))
            return nb_error(NB_ERR_NOMEM, "%s: out of memory for a scratch copy of the output", c->label);
        b->data = b->scratch;
        break;
    }
    return NB_OK;
}

void nb_shape_out_end(nb_out_buf *b)
{
    if (!b->scratch) return;
    memcpy(nb_tensor_data(b->t), b->scratch, tensor_bytes(b->t));
    free(b->scratch);
    b->scratch = NULL;
}

static nb_var_info *set_out(nb_op_ctx *c, const nb_var_info *x)
{
    nb_var_info *o = nb_out_info(c, 0, 0);
    o->dtype = x->dtype;
    return o;
}

/* Product of dims, -1 if any is unknown. */
static int64_t dims_product(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) {
        if (shape[d] < 0) return -1;
        p *= shape[d];
    }
    return p;
}

/* ---- reshape, flatten, squeeze, unsqueeze: same elements, new shape ---------- */

/* These ops keep the element order, so the whole tensor is one run. */
static nb_status copy_kernel(nb_op_ctx *c)
{
    nb_tensor *x = nb_in(c, 0, 0), *o = nb_out(c, 0, 0);
    void *s = nb_tensor_data(x), *d = nb_tensor_data(o);
    size_t bytes = tensor_bytes(x);
    if (d != s && bytes) memmove(d, s, bytes);
    return NB_OK;
}

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
                return nb_error(NB_ERR_ARG, "%s: shape[%d] = 0 copies dim %d of X, but X has shape %s", c->label, i,
                                i, SHAPE_STR(a, x));
            o->shape[i] = x->shape[i];
            copied[i] = true;
        } else if (v < 0) {
            return nb_error(NB_ERR_ARG, "%s: shape[%d] = %lld is invalid (-1 infers a dim, 0 copies X's)", c->label,
                            i, (long long)v);
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
    int rank = x->ndim ? x->ndim : 1, s, e;
    nb_status st;
    if ((st = nb_shape_axis(c, "start_axis", nb_attr_int(c, "start_axis"), rank, "X", x, &s)) ||
        (st = nb_shape_axis(c, "stop_axis", nb_attr_int(c, "stop_axis"), rank, "X", x, &e)))
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
    o->shape[k++] = dims_product(x->shape, s, e + 1);
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
        int d;
        nb_status st = nb_shape_axis(c, "axes entry", axes->ints[i], x->ndim, "X", x, &d);
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
        int d;
        nb_status st = nb_shape_axis(c, "axes entry", axes->ints[i], rank, "X", x, &d);
        if (st) return st;
        if (inserted[d])
            return nb_error(NB_ERR_ARG, "%s: axes names output dim %d twice", c->label, d);
        inserted[d] = true;
    }
    nb_var_info *o = set_out(c, x);
    o->ndim = rank;
    for (int d = 0, k = 0; d < rank; d++) o->shape[d] = inserted[d] ? 1 : x->shape[k++];
    return NB_OK;
}

/* ---- transpose ---------------------------------------------------------------- */

/* Reads perm after infer has validated it. */
static int perm_at(const nb_op_ctx *c, int i, int ndim)
{
    int64_t p = nb_attr_get(c, "perm")->ints[i];
    return (int)(p < 0 ? p + ndim : p);
}

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
            return nb_error(NB_ERR_ARG, "%s: perm %s is not a permutation of the %d dims of X (shape %s)",
                            c->label, nb_attr_value_str(b, sizeof b, perm), x->ndim, SHAPE_STR(a, x));
        seen[p] = true;
        o->shape[i] = x->shape[p];
    }
    return NB_OK;
}

static nb_status transpose_kernel(nb_op_ctx *c)
{
    nb_tensor *x = nb_in(c, 0, 0), *o = nb_out(c, 0, 0);
    int64_t xs[NB_MAX_DIMS], st[NB_MAX_DIMS];
    nb_contiguous_strides(x->ndim, x->shape, xs);
    for (int i = 0; i < x->ndim; i++) st[i] = xs[perm_at(c, i, x->ndim)];
    nb_out_buf ob;
    nb_status s = nb_shape_out_begin(c, o, &ob);
    if (s) return s;
    nb_cpu_strided_copy(ob.data, nb_tensor_data(x), o->ndim, o->shape, st, nb_dtype_size(x->dtype));
    nb_shape_out_end(&ob);
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

/* Broadcast dims read the same element again: stride 0. */
static nb_status expand_kernel(nb_op_ctx *c)
{
    nb_tensor *x = nb_in(c, 0, 0), *o = nb_out(c, 0, 0);
    int64_t xs[NB_MAX_DIMS], st[NB_MAX_DIMS];
    nb_contiguous_strides(x->ndim, x->shape, xs);
    int lead = o->ndim - x->ndim;
    for (int i = 0; i < o->ndim; i++) st[i] = i < lead || x->shape[i - lead] == 1 ? 0 : xs[i - lead];
    nb_out_buf ob;
    nb_status s = nb_shape_out_begin(c, o, &ob);
    if (s) return s;
    nb_cpu_strided_copy(ob.data, nb_tensor_data(x), o->ndim, o->shape, st, nb_dtype_size(x->dtype));
    nb_shape_out_end(&ob);
    return NB_OK;
}

/* ---- concat, stack, split -------------------------------------------------------- */

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
        return nb_error(NB_ERR_SHAPE, "%s: X[%d] has shape %s but X[0] has shape %s: %s", c->label, k,
                        SHAPE_STR(a, xk), SHAPE_STR(b, x0), rule);
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
        return nb_error(NB_ERR_SHAPE, "%s: X[0] is a scalar (shape []); concat joins tensors of rank >= 1",
                        c->label);
    return nb_shape_axis(c, "axis", nb_attr_int(c, "axis"), x0->ndim, "X[0]", x0, axis);
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

/* Views every input as [outer, its rows], the dims before `axis` against
 * the rest, and joins the rows. Stack is the case where each input brings a
 * new dim of size 1 at axis. */
static nb_status join_kernel(nb_op_ctx *c, int axis)
{
    int n = nb_in_count(c, 0);
    nb_tensor *o = nb_out(c, 0, 0), *x0 = nb_in(c, 0, 0);
    size_t el = nb_dtype_size(o->dtype);
    const void **src = malloc((size_t)n * sizeof *src);
    size_t *row_bytes = malloc((size_t)n * sizeof *row_bytes);
    nb_out_buf ob;
    nb_status st = !src || !row_bytes ? nb_error(NB_ERR_NOMEM, "%s: out of memory", c->label)
                                      : nb_shape_out_begin(c, o, &ob);
    if (!st) {
        int64_t outer = dims_product(x0->shape, 0, axis);
        for (int k = 0; k < n; k++) {
            nb_tensor *x = nb_in(c, 0, k);
            src[k] = nb_tensor_data(x);
            row_bytes[k] = (size_t)dims_product(x->shape, axis, x->ndim) * el;
        }
        nb_cpu_concat(ob.data, n, src, row_bytes, outer);
        nb_shape_out_end(&ob);
    }
    free(src);
    free(row_bytes);
    return st;
}

static nb_status concat_kernel(nb_op_ctx *c)
{
    int axis;
    nb_status st = concat_axis(c, &axis);
    return st ? st : join_kernel(c, axis);
}

static nb_status stack_infer(nb_op_ctx *c)
{
    const nb_var_info *x0 = nb_in_info(c, 0, 0);
    int n = nb_in_count(c, 0), axis, from[NB_MAX_DIMS] = {0};
    char a[NB_SHAPE_STR_MAX];
    if (x0->ndim + 1 > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "%s: stacking X of shape %s gives more than %d dims", c->label,
                        SHAPE_STR(a, x0), NB_MAX_DIMS);
    nb_status st = nb_shape_axis(c, "axis", nb_attr_int(c, "axis"), x0->ndim + 1, "X[0]", x0, &axis);
    if (st) return st;
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    for (int k = 0; k < n; k++)
        if ((st = merge_input(c, k, -1, shape, from, "stack needs equal shapes"))) return st;
    nb_var_info *o = set_out(c, x0);
    o->ndim = x0->ndim + 1;
    for (int d = 0, k = 0; d < o->ndim; d++) o->shape[d] = d == axis ? n : shape[k++];
    return NB_OK;
}

static nb_status stack_kernel(nb_op_ctx *c)
{
    int64_t axis = nb_attr_int(c, "axis");
    int rank = nb_in(c, 0, 0)->ndim + 1;
    return join_kernel(c, (int)(axis < 0 ? axis + rank : axis));
}

static nb_status split_axis(nb_op_ctx *c, int *axis)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    if (x->ndim == 0)
        return nb_error(NB_ERR_SHAPE, "%s: X is a scalar (shape []); split cuts tensors of rank >= 1", c->label);
    return nb_shape_axis(c, "axis", nb_attr_int(c, "axis"), x->ndim, "X", x, axis);
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
            return nb_error(NB_ERR_SHAPE, "%s: dim %d of X (shape %s) has size %lld, which does not split into %d equal parts",
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

static nb_status split_kernel(nb_op_ctx *c)
{
    int n = nb_out_count(c, 0), axis, k = 0;
    nb_status st = split_axis(c, &axis);
    if (st) return st;
    nb_tensor *x = nb_in(c, 0, 0);
    size_t el = nb_dtype_size(x->dtype);
    void **dst = malloc((size_t)n * sizeof *dst);
    size_t *row_bytes = malloc((size_t)n * sizeof *row_bytes);
    nb_out_buf *ob = calloc((size_t)n, sizeof *ob);
    if (!dst || !row_bytes || !ob) st = nb_error(NB_ERR_NOMEM, "%s: out of memory", c->label);
    for (; !st && k < n; k++) {
        nb_tensor *o = nb_out(c, 0, k);
        if ((st = nb_shape_out_begin(c, o, &ob[k]))) break;
        dst[k] = ob[k].data;
        row_bytes[k] = (size_t)dims_product(o->shape, axis, o->ndim) * el;
    }
    if (!st) nb_cpu_split(dst, n, nb_tensor_data(x), row_bytes, dims_product(x->shape, 0, axis));
    /* Scratch copies go back only once the source has been read in full. */
    for (int j = 0; j < k; j++) {
        if (st) free(ob[j].scratch);
        else nb_shape_out_end(&ob[j]);
    }
    free(dst);
    free(row_bytes);
    free(ob);
    return st;
}

/* ---- definitions ------------------------------------------------------------------ */

static const nb_op_def op_reshape = {
    .name = "reshape",
    .doc = "X with a new shape: one entry of shape may be -1 (inferred), 0 copies that dim of X",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS)},
    .infer = reshape_infer,
    .cpu = copy_kernel,
    .grad_uses_inputs = 1u << 0,
};

static const nb_op_def op_flatten = {
    .name = "flatten",
    .doc = "Merges dims start_axis..stop_axis of X into one (torch.flatten)",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("start_axis", 1), NB_ADEF_INT("stop_axis", -1)},
    .infer = flatten_infer,
    .cpu = copy_kernel,
    .grad_uses_inputs = 1u << 0,
};

static const nb_op_def op_squeeze = {
    .name = "squeeze",
    .doc = "Drops size-1 dims of X: those in axes (others are left alone), or all when axes is empty",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INTS_EMPTY("axes")},
    .infer = squeeze_infer,
    .cpu = copy_kernel,
    .grad_uses_inputs = 1u << 0,
};

static const nb_op_def op_unsqueeze = {
    .name = "unsqueeze",
    .doc = "Inserts size-1 dims into X at the output positions listed in axes",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("axes", NB_ATTR_INTS)},
    .infer = unsqueeze_infer,
    .cpu = copy_kernel,
    .grad_uses_inputs = 1u << 0,
};

static const nb_op_def op_transpose = {
    .name = "transpose",
    .doc = "Permutes the dims of X: dim i of Out is dim perm[i] of X",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("perm", NB_ATTR_INTS)},
    .infer = transpose_infer,
    .cpu = transpose_kernel,
};

static const nb_op_def op_expand = {
    .name = "expand",
    .doc = "Broadcasts X to shape (NumPy rules); -1 in shape keeps that dim of X",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS)},
    .infer = expand_infer,
    .cpu = expand_kernel,
    .grad_uses_inputs = 1u << 0,
};

static const nb_op_def op_expand_as = {
    .name = "expand_as",
    .doc = "Broadcasts X to the shape of Like (NumPy rules)",
    .inputs = {{"X", 0}, {"Like", NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}},
    .infer = expand_as_infer,
    .cpu = expand_kernel,
    .grad_uses_inputs = 1u << 0,
};

static const nb_op_def op_concat = {
    .name = "concat",
    .doc = "Joins the tensors X along an existing axis; all other dims must match",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0)},
    .infer = concat_infer,
    .cpu = concat_kernel,
    .grad_uses_inputs = 1u << 0,
};

static const nb_op_def op_split = {
    .name = "split",
    .doc = "Cuts X along axis into the given outputs: sizes from sections, or equal parts",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", NB_SLOT_VARIADIC}},
    .attrs = {NB_ADEF_INT("axis", 0), NB_ADEF_INTS_EMPTY("sections")},
    .infer = split_infer,
    .cpu = split_kernel,
};

static const nb_op_def op_stack = {
    .name = "stack",
    .doc = "Joins equally shaped tensors X along a new dim at axis",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("axis", 0)},
    .infer = stack_infer,
    .cpu = stack_kernel,
};

const nb_op_def *const nb_ops_shape[] = {
    &op_reshape, &op_flatten, &op_squeeze, &op_unsqueeze, &op_transpose, &op_expand, &op_expand_as,
    &op_concat, &op_split, &op_stack, &nb_op_slice, &nb_op_pad, &nb_op_gather, &nb_op_index_select,
    &nb_op_scatter_add, &nb_op_one_hot, NULL,
};
