/* ONNX's reductions and the ops that index into a tensor (Gather and its
 * kin) as nabla ops: compositions of differentiable ones wherever one
 * exists, so an imported model trains; cumsum, topk, gather_elements and
 * scatter_elements are nabla ops of their own (src/ops/scan.c,
 * reduce_topk.c, reduce_index.c). Inputs that must be known when the model is imported
 * (axes, k, depth, a condition) are read with ox_const_in. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

/* ---- helpers ---------------------------------------------------------------------- */

/* An int64 constant of the given shape and values. */
static nb_value int64_const(ox_import *im, int ndim, const int64_t *shape, const int64_t *values)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_I64, ndim, shape)) {
        ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        return NB_NONE;
    }
    int64_t n = nb_tensor_numel(t);
    if (n) memcpy(nb_tensor_data(t), values, (size_t)n * sizeof *values);
    nb_value v = nb_constant(B, t);
    nb_tensor_release(t);
    return v;
}

static nb_value int64_scalar(ox_import *im, int64_t v) { return int64_const(im, 0, NULL, &v); }

/* Input k as a constant tensor when it is one (an initializer or a Constant
 * output), with no error left behind when it is not. */
static const nb_tensor *known_const(ox_import *im, int k)
{
    if (!ox_has_in(im, k) || nb_strmap_get(&im->values, im->node->input[k], NULL)) return NULL;
    const char *name = im->node->input[k];
    if (!nb_strmap_get(&im->consts, name, NULL) && !nb_strmap_get(&im->protos, name, NULL)) return NULL;
    return ox_const_in(im, k);
}

/* Input k, an int scalar (or a one-element list) known at import time. */
static bool const_int(ox_import *im, int k, int64_t *out)
{
    int64_t v[2];
    int n = ox_const_ints(im, k, v, 2);
    if (n < -1) return false;
    if (n != 1) {
        ox_node_error(im, NB_ERR_FORMAT, "input %d holds %d values where one was expected", k, n);
        return false;
    }
    *out = v[0];
    return true;
}

/* axis of a rank-`rank` value made non-negative; false (with an error)
 * when out of range. */
static bool norm_axis(ox_import *im, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) {
        ox_node_error(im, NB_ERR_ARG, "axis %lld is out of range for a tensor of rank %d", (long long)axis, rank);
        return false;
    }
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

/* idx with n added to its negative entries (ONNX counts them from the
 * end), computed when the model runs. */
static nb_value wrap_negative(ox_import *im, nb_value idx, int64_t n)
{
    nb_var_info ii = nb_value_info(B, idx);
    nb_value zero = nb_cast(B, int64_scalar(im, 0), ii.dtype), size = nb_cast(B, int64_scalar(im, n), ii.dtype);
    nb_value neg = nb_cast(B, nb_less(B, idx, zero), ii.dtype);
    return nb_add(B, idx, nb_mul(B, neg, size));
}

/* The same for a constant index tensor: a copy with the negative entries
 * wrapped, or NB_NONE with an error for one out of [-n, n). */
static nb_value wrapped_const(ox_import *im, const nb_tensor *t, int64_t n)
{
    if (t->dtype != NB_I64 && t->dtype != NB_I32) return nb_constant(B, t); /* for the op to refuse by name */
    int64_t count = nb_tensor_numel(t);
    int64_t *v = nb_malloc((size_t)(count ? count : 1) * sizeof *v);
    if (!v) {
        ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        return NB_NONE;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t j = (int64_t)nb_tensor_get(t, i);
        if (n >= 0 && (j < -n || j >= n)) {
            nb_free(v);
            ox_node_error(im, NB_ERR_ARG, "index %lld is out of range [%lld, %lld)", (long long)j, (long long)-n,
                          (long long)n);
            return NB_NONE;
        }
        v[i] = j < 0 ? j + n : j;
    }
    nb_value r = int64_const(im, t->ndim, t->shape, v);
    nb_free(v);
    return r;
}

/* x gathered along axis by idx of any rank, ONNX's Gather: Out's shape is
 * x's with dim axis replaced by idx's shape. idx flattened, gathered, and the
 * result reshaped; idx is already wrapped. */
static nb_value gather_any(ox_import *im, nb_value x, nb_value idx, int axis)
{
    nb_var_info xi = nb_value_info(B, x), ii = nb_value_info(B, idx);
    if (ii.ndim == 1) return nb_gather(B, x, idx, axis);
    if (ii.ndim > 1 && xi.ndim == 2 && axis == 0) return nb_embedding(B, x, idx, -1);
    if (xi.ndim - 1 + ii.ndim > NB_MAX_DIMS) {
        ox_unsupported(im, "gathers into more dims than nabla has");
        return NB_NONE;
    }
    int64_t flat = -1, shape[NB_MAX_DIMS];
    int n = 0, unknown = 0;
    for (int d = 0; d < axis; d++) shape[n++] = 0; /* reshape's 0: dim d of the gathered value */
    for (int d = 0; d < ii.ndim; d++) unknown += (shape[n++] = ii.shape[d]) < 0;
    for (int d = axis + 1; d < xi.ndim; d++) unknown += (shape[n++] = xi.shape[d]) < 0;
    if (unknown > 1) {
        ox_unsupported(im, "gathers with indices and data of more than one dim whose size only a run knows");
        return NB_NONE;
    }
    nb_value g = nb_gather(B, x, nb_reshape(B, idx, 1, &flat), axis);
    return nb_reshape(B, g, n, shape);
}

/* ---- reductions ------------------------------------------------------------------- */

typedef enum red_kind {
    R_SUM,
    R_MEAN,
    R_MAX,
    R_MIN,
    R_PROD,
    R_L1,
    R_L2,
    R_LOG_SUM,
    R_LOG_SUM_EXP,
    R_SUM_SQUARE
} red_kind;

/* The axes: an input for ReduceSum from opset 13 and for every reduction
 * from opset 18, an attribute before; -1 when none are given (all dims),
 * -2 on an error. */
static int reduce_axes(ox_import *im, red_kind kind, int64_t *axes)
{
    bool input = im->opset >= 18 || (kind == R_SUM && im->opset >= 13);
    int n = input ? (ox_has_in(im, 1) ? ox_const_ints(im, 1, axes, NB_MAX_DIMS) : -1)
                  : ox_attr_list(im, "axes", axes, NB_MAX_DIMS);
    if (n > NB_MAX_DIMS) {
        ox_unsupported(im, "has more axes than nabla's dims");
        return -2;
    }
    return n;
}

static nb_status reduce(ox_import *im, red_kind kind)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = reduce_axes(im, kind, axes);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    /* Absent and empty axes alike are "none": all dims, or none at all. */
    if (n <= 0 && ox_attr_i(im, "noop_with_empty_axes", 0)) return ox_out(im, 0, x);
    if (n < 0) n = 0;
    nb_dtype dt = nb_value_info(B, x).dtype;
    bool needs_float = kind == R_MEAN || kind == R_L2 || kind == R_LOG_SUM || kind == R_LOG_SUM_EXP;
    if (!nb_dtype_is_float(dt) && (needs_float || (dt != NB_I32 && dt != NB_I64)))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "reduces a %s tensor; nabla computes this reduction only for %s",
                             nb_dtype_name(dt), needs_float ? "float32 and float64" : "numbers");
    bool keep = ox_attr_i(im, "keepdims", 1) != 0;
    nb_value y;
    switch (kind) {
    case R_SUM: y = nb_reduce_sum(B, x, n, axes, keep); break;
    case R_MEAN: y = nb_reduce_mean(B, x, n, axes, keep); break;
    case R_MAX: y = nb_reduce_max(B, x, n, axes, keep); break;
    case R_MIN: y = nb_reduce_min(B, x, n, axes, keep); break;
    case R_PROD: y = nb_reduce_prod(B, x, n, axes, keep); break;
    case R_L1: y = nb_reduce_sum(B, nb_abs(B, x), n, axes, keep); break;
    case R_L2: y = nb_sqrt(B, nb_reduce_sum(B, nb_square(B, x), n, axes, keep)); break;
    case R_LOG_SUM: y = nb_log(B, nb_reduce_sum(B, x, n, axes, keep)); break;
    case R_LOG_SUM_EXP: y = nb_logsumexp(B, x, n, axes, keep); break;
    default: y = nb_reduce_sum(B, nb_square(B, x), n, axes, keep); break;
    }
    return ox_out(im, 0, y);
}

static nb_status i_reduce_sum(ox_import *im) { return reduce(im, R_SUM); }
static nb_status i_reduce_mean(ox_import *im) { return reduce(im, R_MEAN); }
static nb_status i_reduce_max(ox_import *im) { return reduce(im, R_MAX); }
static nb_status i_reduce_min(ox_import *im) { return reduce(im, R_MIN); }
static nb_status i_reduce_prod(ox_import *im) { return reduce(im, R_PROD); }
static nb_status i_reduce_l1(ox_import *im) { return reduce(im, R_L1); }
static nb_status i_reduce_l2(ox_import *im) { return reduce(im, R_L2); }
static nb_status i_reduce_log_sum(ox_import *im) { return reduce(im, R_LOG_SUM); }
static nb_status i_reduce_log_sum_exp(ox_import *im) { return reduce(im, R_LOG_SUM_EXP); }
static nb_status i_reduce_sum_square(ox_import *im) { return reduce(im, R_SUM_SQUARE); }

/* ArgMax, ArgMin: keepdims (default 1) and, from opset 12, select_last_index. */
static nb_status arg_reduce(ox_import *im, const char *op)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_dtype dt = nb_value_info(B, x).dtype;
    if (!nb_dtype_is_float(dt) && dt != NB_I32 && dt != NB_I64)
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "takes a %s tensor; nabla's %s takes numbers", nb_dtype_name(dt),
                             op);
    return ox_out(im, 0,
                  nb_emit1(B, op, NB_VALUES(x),
                           NB_ATTRS(NB_ATTR_INT("axis", ox_attr_i(im, "axis", 0)),
                                    NB_ATTR_BOOL("keepdim", ox_attr_i(im, "keepdims", 1) != 0),
                                    NB_ATTR_BOOL("select_last", ox_attr_i(im, "select_last_index", 0) != 0))));
}

static nb_status i_argmax(ox_import *im) { return arg_reduce(im, "argmax"); }
static nb_status i_argmin(ox_import *im) { return arg_reduce(im, "argmin"); }

/* CumSum (opset 11): the axis is an input, a scalar known at import. */
static nb_status i_cumsum(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axis;
    if (nb_is_none(x) || !const_int(im, 1, &axis)) return nb_builder_status(B);
    return ox_out(
        im, 0,
        nb_emit1(B, "cumsum", NB_VALUES(x),
                 NB_ATTRS(NB_ATTR_INT("axis", axis), NB_ATTR_BOOL("exclusive", ox_attr_i(im, "exclusive", 0) != 0),
                          NB_ATTR_BOOL("reverse", ox_attr_i(im, "reverse", 0) != 0))));
}

/* TopK: k an attribute before opset 10, an input from it; largest and
 * sorted from opset 11. nabla always sorts, which sorted=0 allows. */
static nb_status i_topk(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t k;
    if (nb_is_none(x)) return nb_builder_status(B);
    if (im->opset < 10) {
        if (!ox_attr(im, "k")) return ox_node_error(im, NB_ERR_FORMAT, "has no attribute k");
        k = ox_attr_i(im, "k", 0);
    } else if (!const_int(im, 1, &k)) {
        return nb_builder_status(B);
    }
    nb_value out[2];
    nb_status st = nb_emit(B, "topk", NB_VALUES(x),
                           NB_ATTRS(NB_ATTR_INT("k", k), NB_ATTR_INT("axis", ox_attr_i(im, "axis", -1)),
                                    NB_ATTR_BOOL("largest", ox_attr_i(im, "largest", 1) != 0)),
                           2, out);
    if (st) return st;
    if ((st = ox_out(im, 0, out[0]))) return st;
    return ox_out(im, 1, out[1]);
}

/* ---- gathers ------------------------------------------------------------------------ */

/* Gather: indices of any rank, negative ones from the end (opset 11). */
static nb_status i_gather(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    int axis;
    if (!norm_axis(im, ox_attr_i(im, "axis", 0), xi.ndim, &axis)) return nb_builder_status(B);
    int64_t n = xi.shape[axis];
    const nb_tensor *t = known_const(im, 1);
    nb_value idx;
    if (t) {
        idx = wrapped_const(im, t, n);
    } else {
        idx = ox_in(im, 1);
        /* A dim whose size only a run knows keeps negative indices as
         * they are, for the kernel to refuse by name; indices that are not
         * ints are left for gather to refuse. */
        nb_dtype dt = nb_is_none(idx) ? NB_F32 : nb_value_info(B, idx).dtype;
        if (n >= 0 && (dt == NB_I32 || dt == NB_I64)) idx = wrap_negative(im, idx, n);
    }
    if (nb_is_none(idx)) return nb_builder_status(B);
    if (nb_value_info(B, idx).ndim == 0) {
        int64_t one = 1, ax = axis;
        return ox_out(im, 0, nb_squeeze(B, nb_gather(B, x, nb_reshape(B, idx, 1, &one), axis), 1, &ax));
    }
    return ox_out(im, 0, gather_any(im, x, idx, axis));
}

static nb_status i_gather_elements(ox_import *im)
{
    nb_value x = ox_in(im, 0), idx = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    return ox_out(
        im, 0,
        nb_emit1(B, "gather_elements", NB_VALUES(x, idx), NB_ATTRS(NB_ATTR_INT("axis", ox_attr_i(im, "axis", 0)))));
}

/* ScatterElements, and Scatter (opsets 9 and 10), its older name. */
static nb_status i_scatter_elements(ox_import *im)
{
    nb_value x = ox_in(im, 0), idx = ox_in(im, 1), upd = ox_in(im, 2);
    if (nb_builder_status(B)) return nb_builder_status(B);
    const char *r = ox_attr_s(im, "reduction", "none");
    if (strcmp(r, "none") && strcmp(r, "add") && strcmp(r, "mul"))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "has reduction '%s'; nabla scatters with none, add or mul", r);
    return ox_out(im, 0,
                  nb_emit1(B, "scatter_elements", NB_VALUES(x, idx, upd),
                           NB_ATTRS(NB_ATTR_INT("axis", ox_attr_i(im, "axis", 0)), NB_ATTR_STRING("reduction", r))));
}

/* GatherND and ScatterND address data by the m entries of the last dim of
 * indices: both become one flat index into data with its first m dims (after
 * the batch dims) merged, which needs those dims known at import. Negative
 * entries count from the end of their dim. Returns the flat index, shaped as
 * indices without its last dim; *slab is the product of the m dims. */
static nb_value flat_index(ox_import *im, nb_value idx, const nb_var_info *di, int batch, int *m_out, int64_t *slab)
{
    nb_var_info ii = nb_value_info(B, idx);
    if (ii.dtype != NB_I64 && ii.dtype != NB_I32) {
        ox_unsupported(im, "its indices are not int32 or int64");
        return NB_NONE;
    }
    int64_t m = ii.ndim ? ii.shape[ii.ndim - 1] : -1;
    if (ii.ndim < 1 || m < 1 || batch + m > di->ndim) {
        ox_unsupported(im, "its indices' last dim is not known, or not between 1 and data's rank");
        return NB_NONE;
    }
    int64_t dims[NB_MAX_DIMS], strides[NB_MAX_DIMS];
    *slab = 1;
    for (int64_t j = m - 1; j >= 0; j--) {
        dims[j] = di->shape[batch + j];
        if (dims[j] < 0) {
            ox_unsupported(im, "indexes a dim of data whose size only a run knows");
            return NB_NONE;
        }
        strides[j] = *slab;
        *slab *= dims[j];
    }
    *m_out = (int)m;
    nb_value i64 = ii.dtype == NB_I64 ? idx : nb_cast(B, idx, NB_I64);
    nb_value dimv = int64_const(im, 1, &m, dims), stridev = int64_const(im, 1, &m, strides);
    nb_value neg = nb_cast(B, nb_less(B, i64, int64_scalar(im, 0)), NB_I64);
    nb_value wrapped = nb_add(B, i64, nb_mul(B, neg, dimv));
    int64_t last = -1;
    return nb_reduce_sum(B, nb_mul(B, wrapped, stridev), 1, &last, false);
}

static nb_status i_gather_nd(ox_import *im)
{
    nb_value x = ox_in(im, 0), idx = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x), ii = nb_value_info(B, idx);
    int batch = (int)ox_attr_i(im, "batch_dims", 0), m;
    if (batch < 0 || batch >= ii.ndim || batch >= xi.ndim) return ox_unsupported(im, "has batch_dims out of range");
    int64_t slab, nbatch = 1;
    for (int d = 0; d < batch; d++) {
        if (xi.shape[d] < 0) return ox_unsupported(im, "has a batch dim whose size only a run knows");
        nbatch *= xi.shape[d];
    }
    nb_value flat = flat_index(im, idx, &xi, batch, &m, &slab);
    if (nb_is_none(flat)) return nb_builder_status(B);
    if (batch) {
        /* Example b's slabs come after those of the b examples before it:
         * b * slab added, b broadcast over the indices' other dims. */
        int64_t shape[NB_MAX_DIMS];
        int r = ii.ndim - 1;
        for (int d = 0; d < r; d++) shape[d] = d < batch ? ii.shape[d] : 1;
        int64_t *offs = nb_malloc((size_t)nbatch * sizeof *offs);
        if (!offs) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        for (int64_t b = 0; b < nbatch; b++) offs[b] = b * slab;
        nb_value off = int64_const(im, r, shape, offs);
        nb_free(offs);
        flat = nb_add(B, flat, off);
    }
    /* data as [batch * slab, rest...]. */
    int64_t shape[NB_MAX_DIMS];
    int n = 0, unknown = 0;
    shape[n++] = nbatch * slab;
    for (int d = batch + m; d < xi.ndim; d++) unknown += (shape[n++] = xi.shape[d]) < 0;
    if (unknown > 1) return ox_unsupported(im, "gathers slices of more than one dim whose size only a run knows");
    return ox_out(im, 0, gather_any(im, nb_reshape(B, x, n, shape), flat, 0));
}

/* ScatterND (reduction from opset 16): data as [slab, rest...], each update
 * slice written at its flat index by scatter_elements along dim 0. */
static nb_status i_scatter_nd(ox_import *im)
{
    nb_value x = ox_in(im, 0), idx = ox_in(im, 1), upd = ox_in(im, 2);
    if (nb_builder_status(B)) return nb_builder_status(B);
    const char *r = ox_attr_s(im, "reduction", "none");
    if (strcmp(r, "none") && strcmp(r, "add") && strcmp(r, "mul"))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "has reduction '%s'; nabla scatters with none, add or mul", r);
    nb_var_info xi = nb_value_info(B, x), ii = nb_value_info(B, idx);
    int m;
    int64_t slab, count = 1;
    nb_value flat = flat_index(im, idx, &xi, 0, &m, &slab);
    if (nb_is_none(flat)) return nb_builder_status(B);
    for (int d = 0; d < ii.ndim - 1; d++) count *= ii.shape[d];
    int64_t dshape[NB_MAX_DIMS], ushape[NB_MAX_DIMS], ishape[NB_MAX_DIMS];
    int n = 1;
    dshape[0] = slab, ushape[0] = ishape[0] = count;
    bool known = count >= 0;
    for (int d = m; d < xi.ndim; d++, n++) {
        dshape[n] = ushape[n] = xi.shape[d], ishape[n] = 1;
        known &= xi.shape[d] >= 0;
    }
    for (int d = 0; d < ii.ndim - 1; d++) known &= ii.shape[d] >= 0;
    if (!known) return ox_unsupported(im, "scatters into data or with indices whose sizes only a run knows");
    nb_value iv = nb_expand(B, nb_reshape(B, flat, n, ishape), n, ushape);
    nb_value x2 = nb_reshape(B, x, n, dshape), u2 = nb_reshape(B, upd, n, ushape);
    nb_value out = nb_emit1(B, "scatter_elements", NB_VALUES(x2, iv, u2),
                            NB_ATTRS(NB_ATTR_INT("axis", 0), NB_ATTR_STRING("reduction", r)));
    return ox_out(im, 0, nb_reshape(B, out, xi.ndim, xi.shape));
}

/* OneHot (opset 9): indices compared with 0..depth-1 along a new dim at
 * axis, picking values[1] where equal and values[0] elsewhere. Indices out
 * of [-depth, depth) match nothing, as ONNX wants; float ones are truncated. */
static nb_status i_one_hot(ox_import *im)
{
    nb_value idx = ox_in(im, 0), values = ox_in(im, 2);
    const nb_tensor *dt = ox_const_in(im, 1);
    if (!dt || nb_builder_status(B)) return nb_builder_status(B);
    if (nb_tensor_numel(dt) != 1)
        return ox_node_error(im, NB_ERR_FORMAT, "its depth holds %lld values, not one", (long long)nb_tensor_numel(dt));
    int64_t depth = (int64_t)nb_tensor_get(dt, 0);
    if (depth < 1) return ox_node_error(im, NB_ERR_ARG, "has depth %lld", (long long)depth);
    nb_var_info ii = nb_value_info(B, idx), vi = nb_value_info(B, values);
    if (vi.ndim != 1 || vi.shape[0] != 2) return ox_node_error(im, NB_ERR_FORMAT, "its values are not [off, on]");
    if (ii.ndim + 1 > NB_MAX_DIMS) return ox_unsupported(im, "makes more dims than nabla has");
    int axis;
    if (!norm_axis(im, ox_attr_i(im, "axis", -1), ii.ndim + 1, &axis)) return nb_builder_status(B);
    nb_value i64 = ii.dtype == NB_I64 ? idx : nb_cast(B, idx, NB_I64);
    i64 = wrap_negative(im, i64, depth);
    int64_t ax = axis, shape[NB_MAX_DIMS];
    for (int d = 0; d <= ii.ndim; d++) shape[d] = d == axis ? depth : 1;
    int64_t *iota = nb_malloc((size_t)depth * sizeof *iota);
    if (!iota) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < depth; j++) iota[j] = j;
    nb_value range = int64_const(im, ii.ndim + 1, shape, iota);
    nb_free(iota);
    nb_value hit = nb_equal(B, nb_unsqueeze(B, i64, 1, &ax), range);
    int64_t axes0[1] = {0}, off_s[1] = {0}, off_e[1] = {1}, on_s[1] = {1}, on_e[1] = {2};
    nb_value off = nb_reshape(B, nb_slice(B, values, 1, axes0, off_s, off_e), 0, NULL);
    nb_value on = nb_reshape(B, nb_slice(B, values, 1, axes0, on_s, on_e), 0, NULL);
    return ox_out(im, 0, nb_where(B, hit, on, off));
}

/* Input k's values, for ops whose output's shape depends on them: refused
 * with that reason when they are not known at import. */
static const nb_tensor *values_at_import(ox_import *im, int k)
{
    const nb_tensor *t = ox_const_in(im, k);
    if (t) return t;
    nb_builder_clear_error(B);
    ox_unsupported(im,
                   "its output's shape depends on the values of an input that is not known when the model is "
                   "imported, and a nabla program's shapes are fixed before it runs");
    return NULL;
}

/* NonZero: the coordinates of the nonzero elements, [rank, count] int64, a
 * constant made from its input's values. */
static nb_status i_nonzero(ox_import *im)
{
    const nb_tensor *t = values_at_import(im, 0);
    if (!t) return nb_builder_status(B);
    int64_t n = nb_tensor_numel(t), count = 0;
    for (int64_t i = 0; i < n; i++) count += nb_tensor_get(t, i) != 0;
    int64_t shape[2] = {t->ndim, count};
    int64_t cells = t->ndim * count;
    int64_t *v = nb_malloc((size_t)(cells > 0 ? cells : 1) * sizeof *v);
    if (!v) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    for (int64_t i = 0, c = 0; i < n; i++) {
        if (nb_tensor_get(t, i) == 0) continue;
        int64_t q = i;
        for (int d = t->ndim - 1; d >= 0; d--) {
            v[d * count + c] = q % t->shape[d];
            q /= t->shape[d];
        }
        c++;
    }
    nb_value y = int64_const(im, 2, shape, v);
    nb_free(v);
    return ox_out(im, 0, y);
}

/* Compress (opset 9): the slices along axis (of the flattened input when
 * there is none) where condition is true, a gather by the positions that
 * condition, known at import, names. */
static nb_status i_compress(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    const nb_tensor *c = values_at_import(im, 1);
    if (!c) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    int axis = 0;
    if (!ox_attr(im, "axis")) {
        int64_t flat = -1;
        x = nb_reshape(B, x, 1, &flat);
        xi = nb_value_info(B, x);
    } else if (!norm_axis(im, ox_attr_i(im, "axis", 0), xi.ndim, &axis)) {
        return nb_builder_status(B);
    }
    int64_t n = nb_tensor_numel(c);
    if (c->ndim != 1 || (xi.shape[axis] >= 0 && n > xi.shape[axis]))
        return ox_node_error(im, NB_ERR_ARG, "its condition is not 1-D or is longer than the dim it selects from");
    int64_t *pos = nb_malloc((size_t)(n ? n : 1) * sizeof *pos), count = 0;
    if (!pos) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        if (nb_tensor_get(c, i) != 0) pos[count++] = i;
    nb_value idx = int64_const(im, 1, &count, pos);
    nb_free(pos);
    return ox_out(im, 0, nb_gather(B, x, idx, axis));
}

/* Trilu (opset 14): x where the column less the row is at least k (upper)
 * or at most k (lower) in the last two dims, zeros elsewhere: a constant
 * mask, so those two dims must be known at import. */
static nb_status i_trilu(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t k = 0;
    if (nb_is_none(x) || (ox_has_in(im, 1) && !const_int(im, 1, &k))) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    if (xi.ndim < 2) return ox_node_error(im, NB_ERR_ARG, "takes a tensor of rank 2 or more, not %d", xi.ndim);
    int64_t rows = xi.shape[xi.ndim - 2], cols = xi.shape[xi.ndim - 1];
    if (rows < 0 || cols < 0) return ox_unsupported(im, "its last two dims' sizes are known only when it runs");
    bool upper = ox_attr_i(im, "upper", 1) != 0;
    int64_t shape[2] = {rows, cols};
    nb_tensor *m;
    if (nb_tensor_new(&m, NB_BOOL, 2, shape)) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    bool *keep = nb_tensor_data(m);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) keep[i * cols + j] = upper ? j - i >= k : j - i <= k;
    nb_value mask = nb_constant(B, m);
    nb_tensor_release(m);
    return ox_out(im, 0, nb_where(B, mask, x, nb_fill_zeros_like(B, x)));
}

/* clang-format off */
const ox_importer ox_imports_reduce[] = {
    OX_FN(ReduceSum, reduce_sum), OX_FN(ReduceMean, reduce_mean), OX_FN(ReduceMax, reduce_max),
    OX_FN(ReduceMin, reduce_min), OX_FN(ReduceProd, reduce_prod), OX_FN(ReduceL1, reduce_l1),
    OX_FN(ReduceL2, reduce_l2), OX_FN(ReduceLogSum, reduce_log_sum), OX_FN(ReduceLogSumExp, reduce_log_sum_exp),
    OX_FN(ReduceSumSquare, reduce_sum_square), OX_FN(ArgMax, argmax), OX_FN(ArgMin, argmin), OX_FN(CumSum, cumsum),
    OX_FN(TopK, topk), OX_FN(Gather, gather), OX_FN(GatherElements, gather_elements), OX_FN(GatherND, gather_nd),
    OX_FN(ScatterElements, scatter_elements), OX_FN(Scatter, scatter_elements), OX_FN(ScatterND, scatter_nd),
    OX_FN(OneHot, one_hot), OX_FN(NonZero, nonzero), OX_FN(Compress, compress), OX_FN(Trilu, trilu),
    {0},
};
/* clang-format on */

#endif
