/* Each ONNX node as nabla ops, one table row an op type: those whose nabla
 * twin takes the same inputs in the same order need only its name; the
 * others have a function. The differences between opsets 11 and 17 that
 * matter here: Squeeze, Unsqueeze and ReduceSum take their axes as an input
 * from opset 13 (an attribute before), and Softmax and LogSoftmax work on
 * one axis from 13 (before, on the dims from `axis` flattened together). */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"
#include "../layers/layer_internal.h"

#define B (im->b)

static nb_status unsupported(ox_import *im, const char *why) { return ox_node_error(im, NB_ERR_UNSUPPORTED, "%s", why); }

static int rank(ox_import *im, nb_value v) { return nb_value_info(B, v).ndim; }

/* Reads ints (an attribute, or a constant int tensor) into out[0..max). */
static int attr_ints(ox_import *im, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = ox_attr(im, name);
    if (!a) return -1;
    int n = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
    if (n) memcpy(out, a->ints, (size_t)n * sizeof *out); /* an empty list has no array */
    return (int)a->n_ints > max ? max + 1 : n;
}

static int const_ints(ox_import *im, int k, int64_t *out, int max)
{
    const nb_tensor *t = ox_const_in(im, k);
    if (!t) return -2;
    if (t->dtype != NB_I64 && t->dtype != NB_I32) {
        unsupported(im, "its shape or axes input is not an integer tensor");
        return -2;
    }
    if (!nb_tensor_is_contiguous(t)) {
        unsupported(im, "its shape or axes input is not a contiguous tensor");
        return -2;
    }
    /* Read as integers: through a double, a value beyond 2^63 would not
     * convert back (a file may hold any int64). */
    int64_t n = nb_tensor_numel(t);
    const void *d = nb_tensor_data(t);
    for (int64_t i = 0; i < n && i < max; i++)
        out[i] = t->dtype == NB_I64 ? ((const int64_t *)d)[i] : ((const int32_t *)d)[i];
    return n > max ? max + 1 : (int)n;
}

/* The axes of Squeeze, Unsqueeze and ReduceSum: an input from opset 13, an
 * attribute before; -1 when there are none (all dims). */
static int axes_of(ox_import *im, int64_t *axes)
{
    int n = im->opset >= 13 ? (ox_has_in(im, 1) ? const_ints(im, 1, axes, NB_MAX_DIMS) : -1)
                            : attr_ints(im, "axes", axes, NB_MAX_DIMS);
    if (n > NB_MAX_DIMS) {
        unsupported(im, "has more axes than nabla's dims");
        return -2;
    }
    return n;
}

static nb_status same1(ox_import *im, const char *op, int n_in)
{
    nb_value in[4];
    for (int k = 0; k < n_in; k++)
        if (nb_is_none(in[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, nb_emit1(B, op, NB_VALUES_N(n_in, in), NB_NO_ATTRS));
}

/* ---- the ops -------------------------------------------------------------- */

static nb_status i_gemm(ox_import *im)
{
    nb_value a = ox_in(im, 0), b = ox_in(im, 1);
    unsigned flags = (ox_attr_i(im, "transA", 0) ? NB_TRANSPOSE_X : 0) | (ox_attr_i(im, "transB", 0) ? NB_TRANSPOSE_Y : 0);
    nb_value y = nb_matmul(B, a, b, flags);
    double alpha = ox_attr_f(im, "alpha", 1), beta = ox_attr_f(im, "beta", 1);
    if (alpha != 1) y = nb_scale(B, y, alpha, 0);
    if (ox_has_in(im, 2) && beta != 0) {
        nb_value c = ox_in(im, 2);
        if (beta != 1) c = nb_scale(B, c, beta, 0);
        y = nb_add(B, y, c);
    }
    return ox_out(im, 0, y);
}

static nb_status i_matmul(ox_import *im)
{
    nb_value a = ox_in(im, 0), b = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    if (rank(im, a) < 2 || rank(im, b) < 2) return unsupported(im, "multiplies a vector; nabla's matmul takes matrices");
    return ox_out(im, 0, nb_matmul(B, a, b, 0));
}

/* ONNX pads are (top, left, bottom, right); nabla's (top, bottom, left, right). */
static bool pads_of(ox_import *im, int64_t out[4])
{
    const char *auto_pad = ox_attr_s(im, "auto_pad", "NOTSET");
    if (strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID")) {
        unsupported(im, "has auto_pad SAME_*; nabla takes explicit pads");
        return false;
    }
    int64_t p[4] = {0, 0, 0, 0};
    int n = attr_ints(im, "pads", p, 4);
    if (n != -1 && n != 4) {
        unsupported(im, "is not 2-D (pads)");
        return false;
    }
    out[0] = p[0], out[1] = p[2], out[2] = p[1], out[3] = p[3];
    return true;
}

static bool pair_attr(ox_import *im, const char *name, int64_t out[2], int64_t def)
{
    out[0] = out[1] = def;
    int n = attr_ints(im, name, out, 2);
    if (n == -1 || n == 2) return true;
    ox_node_error(im, NB_ERR_UNSUPPORTED, "attribute %s has %d values; nabla's op is 2-D", name, n);
    return false;
}

static nb_status i_conv(ox_import *im)
{
    int64_t pads[4], strides[2], dil[2];
    nb_value in[3] = {ox_in(im, 0), ox_in(im, 1), ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE};
    if (nb_builder_status(B)) return nb_builder_status(B);
    if (rank(im, in[0]) != 4) return unsupported(im, "is not a 2-D convolution (X must be [N, C, H, W])");
    if (!pads_of(im, pads) || !pair_attr(im, "strides", strides, 1) || !pair_attr(im, "dilations", dil, 1))
        return nb_builder_status(B);
    nb_attr attrs[] = {NB_ATTR_INTS_N("strides", 2, strides), NB_ATTR_INTS_N("paddings", 4, pads),
                       NB_ATTR_INTS_N("dilations", 2, dil), NB_ATTR_INT("groups", ox_attr_i(im, "group", 1))};
    return ox_out(im, 0, nb_emit1(B, "conv2d", NB_VALUES_N(3, in), NB_ATTRS_N(4, attrs)));
}

static nb_status pool(ox_import *im, const char *type)
{
    nb_value x = ox_in(im, 0);
    int64_t pads[4], strides[2], ks[2], dil[2];
    if (nb_is_none(x)) return nb_builder_status(B);
    if (im->node->n_output > 1 && *im->node->output[1]) return unsupported(im, "asks for MaxPool's Indices");
    if (!pads_of(im, pads) || !pair_attr(im, "strides", strides, 1) || !pair_attr(im, "dilations", dil, 1) ||
        !pair_attr(im, "kernel_shape", ks, -1))
        return nb_builder_status(B);
    if (dil[0] != 1 || dil[1] != 1) return unsupported(im, "has dilations, which nabla's pool2d lacks");
    if (ks[0] < 0) return ox_node_error(im, NB_ERR_FORMAT, "has no kernel_shape");
    nb_attr attrs[] = {NB_ATTR_STRING("pooling_type", type), NB_ATTR_INTS_N("ksize", 2, ks),
                       NB_ATTR_INTS_N("strides", 2, strides), NB_ATTR_INTS_N("paddings", 4, pads),
                       NB_ATTR_BOOL("ceil_mode", ox_attr_i(im, "ceil_mode", 0) != 0),
                       NB_ATTR_BOOL("exclusive", ox_attr_i(im, "count_include_pad", 0) == 0)};
    return ox_out(im, 0, nb_emit1(B, "pool2d", NB_VALUES(x), NB_ATTRS_N(6, attrs)));
}
static nb_status i_maxpool(ox_import *im) { return pool(im, "max"); }
static nb_status i_avgpool(ox_import *im) { return pool(im, "avg"); }

static nb_status global_pool(ox_import *im, const char *type)
{
    nb_value x = ox_in(im, 0);
    nb_attr attrs[] = {NB_ATTR_STRING("pooling_type", type), NB_ATTR_INTS("ksize", 1, 1),
                       NB_ATTR_BOOL("global_pooling", true)};
    return ox_out(im, 0, nb_emit1(B, "pool2d", NB_VALUES(x), NB_ATTRS_N(3, attrs)));
}
static nb_status i_global_avg(ox_import *im) { return global_pool(im, "avg"); }
static nb_status i_global_max(ox_import *im) { return global_pool(im, "max"); }

/* BatchNormalization: ONNX's momentum weighs the running value, as nabla's. */
static nb_status i_batch_norm(ox_import *im)
{
    if (ox_attr_i(im, "training_mode", 0)) return unsupported(im, "is in training mode");
    nb_value in[5];
    for (int k = 0; k < 5; k++)
        if (nb_is_none(in[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, nb_batch_norm_of(B, in, ox_attr_f(im, "momentum", 0.9), ox_attr_f(im, "epsilon", 1e-5), false));
}

static nb_status i_layer_norm(ox_import *im)
{
    nb_value in[3] = {ox_in(im, 0), ox_has_in(im, 1) ? ox_in(im, 1) : NB_NONE, ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE};
    if (im->node->n_output > 1) return unsupported(im, "asks for the mean or inverse deviation outputs");
    nb_attr attrs[] = {NB_ATTR_INT("begin_norm_axis", ox_attr_i(im, "axis", -1)),
                       NB_ATTR_FLOAT("epsilon", ox_attr_f(im, "epsilon", 1e-5))};
    return ox_out(im, 0, nb_emit1(B, "layer_norm", NB_VALUES_N(3, in), NB_ATTRS_N(2, attrs)));
}

static nb_status i_reshape(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t shape[NB_MAX_DIMS];
    const ox_shape *rs = ox_shape_in(im, 1);
    if (rs && !nb_is_none(x)) {
        /* A dim of x that only a run knows can stay where it is (0: copy). */
        if (rs->n > NB_MAX_DIMS) return unsupported(im, "reshapes to more dims than nabla has");
        for (int i = 0; i < rs->n; i++) {
            if (rs->dim[i] < 0) shape[i] = rs->value[i];
            else if (rs->of[i].p == x.p && rs->dim[i] == i) shape[i] = 0;
            else return unsupported(im, "reshapes to a shape whose size a run decides and that moves a dim");
        }
        return ox_out(im, 0, nb_reshape(B, x, rs->n, shape));
    }
    int n = const_ints(im, 1, shape, NB_MAX_DIMS);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    if (n > NB_MAX_DIMS) return unsupported(im, "reshapes to more dims than nabla has");
    if (ox_attr_i(im, "allowzero", 0)) return unsupported(im, "has allowzero=1");
    return ox_out(im, 0, nb_reshape(B, x, n, shape));
}

/* Flatten(axis): the dims before axis into one, and those from axis into
 * another, always 2-D. */
static nb_status i_flatten(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = rank(im, x), axis = (int)ox_attr_i(im, "axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) return ox_node_error(im, NB_ERR_ARG, "axis %d is out of range for rank %d", axis, r);
    nb_value y;
    if (axis == 0) y = nb_reshape(B, x, 2, (int64_t[]){1, -1});
    else if (axis == r) y = nb_unsqueeze(B, r > 1 ? nb_flatten(B, x, 0, -1) : x, 1, (int64_t[]){1});
    else y = nb_flatten(B, axis > 1 ? nb_flatten(B, x, 0, axis - 1) : x, 1, -1);
    return ox_out(im, 0, y);
}

static nb_status i_transpose(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int64_t perm[NB_MAX_DIMS];
    int r = rank(im, x), n = attr_ints(im, "perm", perm, NB_MAX_DIMS);
    if (n == -1)
        for (int i = 0; i < (n = r); i++) perm[i] = r - 1 - i;
    return ox_out(im, 0, nb_transpose(B, x, n, perm));
}

static nb_status i_squeeze(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = axes_of(im, axes);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    return ox_out(im, 0, nb_squeeze(B, x, n < 0 ? 0 : n, axes));
}

static nb_status i_unsqueeze(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = axes_of(im, axes);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    if (n < 1) return ox_node_error(im, NB_ERR_FORMAT, "has no axes");
    return ox_out(im, 0, nb_unsqueeze(B, x, n, axes));
}

static nb_status i_reduce_sum(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = axes_of(im, axes);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    if (n < 0 && ox_attr_i(im, "noop_with_empty_axes", 0)) return ox_out(im, 0, x);
    return ox_out(im, 0, nb_reduce_sum(B, x, n < 0 ? 0 : n, axes, ox_attr_i(im, "keepdims", 1) != 0));
}

static nb_status i_reduce_mean(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = attr_ints(im, "axes", axes, NB_MAX_DIMS);
    if (n > NB_MAX_DIMS || nb_is_none(x)) return n > NB_MAX_DIMS ? unsupported(im, "has too many axes") : nb_builder_status(B);
    return ox_out(im, 0, nb_reduce_mean(B, x, n < 0 ? 0 : n, axes, ox_attr_i(im, "keepdims", 1) != 0));
}

static nb_status i_concat(ox_import *im)
{
    int n = (int)im->node->n_input;
    nb_value xs[64];
    if (n > 64) return unsupported(im, "joins more than 64 tensors");
    for (int k = 0; k < n; k++)
        if (nb_is_none(xs[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, nb_concat(B, n, xs, (int)ox_attr_i(im, "axis", 0)));
}

static nb_status i_sum(ox_import *im)
{
    int n = (int)im->node->n_input;
    nb_value xs[64];
    if (n > 64 || n < 1) return unsupported(im, "sums more than 64 tensors, or none");
    for (int k = 0; k < n; k++)
        if (nb_is_none(xs[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, n == 1 ? xs[0] : nb_sum(B, n, xs));
}

/* Gather: nabla's gather takes 1-D indices; a table [V, D] gathered along
 * axis 0 by indices of any shape is an embedding lookup. */
static nb_status i_gather(ox_import *im)
{
    nb_value x = ox_in(im, 0), idx = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    int axis = (int)ox_attr_i(im, "axis", 0), ri = rank(im, idx);
    if (ri == 1) return ox_out(im, 0, nb_gather(B, x, idx, axis));
    if (rank(im, x) == 2 && (axis == 0 || axis == -2) && ri > 1) return ox_out(im, 0, nb_embedding(B, x, idx, -1));
    return unsupported(im, "gathers with indices that are not 1-D from a tensor that is not a [V, D] table");
}

/* Softmax and LogSoftmax: one axis from opset 13; before, the dims from
 * axis flattened, which is the same thing when axis is the last one. */
static nb_status softmax(ox_import *im, bool log)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = rank(im, x), axis = (int)ox_attr_i(im, "axis", im->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += r;
    if (im->opset < 13 && axis != r - 1) return unsupported(im, "normalises over several dims (opset < 13, axis not last)");
    return ox_out(im, 0, log ? nb_log_softmax(B, x, axis) : nb_softmax(B, x, axis));
}
static nb_status i_softmax(ox_import *im) { return softmax(im, false); }
static nb_status i_log_softmax(ox_import *im) { return softmax(im, true); }

static nb_status alpha_op(ox_import *im, const char *op, double def)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_emit1(B, op, NB_VALUES(x), NB_ATTRS(NB_ATTR_FLOAT("alpha", ox_attr_f(im, "alpha", def)))));
}
static nb_status i_leaky_relu(ox_import *im) { return alpha_op(im, "leaky_relu", 0.01); }
static nb_status i_elu(ox_import *im) { return alpha_op(im, "elu", 1.0); }

static nb_status i_softplus(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_emit1(B, "softplus", NB_VALUES(x), NB_ATTRS(NB_ATTR_FLOAT("beta", 1), NB_ATTR_FLOAT("threshold", 1e30))));
}

static nb_status i_cast(ox_import *im)
{
    nb_dtype dt;
    int to = (int)ox_attr_i(im, "to", 0);
    if (!ox_nabla_dtype(to, &dt) || to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || to == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16)
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "casts to %s, which nabla has no dtype for", ox_type_name(to));
    return ox_out(im, 0, nb_cast(B, ox_in(im, 0), dt));
}

/* Clip: bounds as attributes before opset 11, optional constant inputs since. */
static nb_status i_clip(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    double lo = -DBL_MAX, hi = DBL_MAX;
    for (int k = 1; k <= 2; k++) {
        if (!ox_has_in(im, k)) continue;
        const nb_tensor *t = ox_const_in(im, k);
        if (!t) return nb_builder_status(B);
        *(k == 1 ? &lo : &hi) = nb_tensor_get(t, 0);
    }
    return ox_out(im, 0, nb_clip(B, x, lo, hi));
}

static nb_status i_reciprocal(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    nb_tensor *one;
    if (nb_tensor_scalar(&one, xi.dtype, 1)) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    nb_value c = nb_constant(B, one);
    nb_tensor_release(one);
    return ox_out(im, 0, nb_div(B, c, x));
}

/* Identity, and Dropout at inference: the same value under a new name. */
static nb_status i_identity(ox_import *im)
{
    if (!strcmp(im->node->op_type, "Dropout") && im->node->n_output > 1 && *im->node->output[1])
        return unsupported(im, "asks for Dropout's mask");
    return ox_out(im, 0, ox_in(im, 0));
}

static nb_status i_constant(ox_import *im)
{
    const Onnx__AttributeProto *a = ox_attr(im, "value");
    if (!a || !a->t) return unsupported(im, "has no tensor 'value' (value_float, value_ints, ... are not read)");
    nb_tensor *t;
    char what[256];
    snprintf(what, sizeof what, "constant '%.200s'", im->node->output[0]);
    nb_status st = ox_tensor_from_proto(a->t, ".", what, &t);
    if (st) return ox_node_error(im, st, "%s", nb_last_error());
    return ox_set_const(im, 0, t);
}

/* Pad: ONNX's pads list every dim's start, then every dim's end; nabla's
 * (before, after) per dim. Opset 11 on, pads and the value are inputs. */
static nb_status i_pad(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = rank(im, x);
    int64_t pads[2 * NB_MAX_DIMS], pairs[2 * NB_MAX_DIMS];
    int n = const_ints(im, 1, pads, 2 * NB_MAX_DIMS);
    if (n < 0) return nb_builder_status(B);
    if (n != 2 * r) return ox_node_error(im, NB_ERR_FORMAT, "has %d pads for a rank-%d input", n, r);
    bool any = false;
    for (int d = 0; d < r; d++) {
        pairs[2 * d] = pads[d], pairs[2 * d + 1] = pads[r + d];
        if (pads[d] < 0 || pads[r + d] < 0) return unsupported(im, "has negative pads (a crop)");
        any |= pads[d] || pads[r + d];
    }
    double value = 0;
    if (ox_has_in(im, 2)) {
        const nb_tensor *v = ox_const_in(im, 2);
        if (!v) return nb_builder_status(B);
        value = nb_tensor_get(v, 0);
    }
    const char *mode = ox_attr_s(im, "mode", "constant");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "has mode '%s'", mode);
    if (!any) return ox_out(im, 0, x);
    nb_attr attrs[] = {NB_ATTR_INTS_N("paddings", 2 * r, pairs), NB_ATTR_FLOAT("pad_value", value),
                       NB_ATTR_STRING("mode", mode)};
    return ox_out(im, 0, nb_emit1(B, "pad", NB_VALUES(x), NB_ATTRS_N(3, attrs)));
}

static nb_status i_shape(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info info = nb_value_info(B, x);
    ox_shape s = {.n = info.ndim, .whole = x};
    for (int d = 0; d < info.ndim; d++) {
        s.dim[d] = info.shape[d] >= 0 ? -1 : d;
        s.value[d] = info.shape[d];
        s.of[d] = x;
    }
    return ox_set_shape(im, &s);
}

/* Whether input k is an int constant of at most a shape's entries, 0-d or
 * 1-d, with no error left behind when it is not. */
static bool small_int_const(ox_import *im, int k)
{
    if (!ox_has_in(im, k) || nb_strmap_get(&im->values, im->node->input[k], NULL)) return false;
    const char *name = im->node->input[k];
    if (!nb_strmap_get(&im->consts, name, NULL) && !nb_strmap_get(&im->protos, name, NULL)) return false;
    const nb_tensor *t = ox_const_in(im, k);
    return t && (t->dtype == NB_I64 || t->dtype == NB_I32) && t->ndim <= 1 && nb_tensor_numel(t) <= 2 * NB_MAX_DIMS;
}

/* Input k as a run-time shape: one, or an int constant made one. */
static bool shape_or_const(ox_import *im, int k, ox_shape *out)
{
    const ox_shape *s = ox_shape_in(im, k);
    if (s) {
        *out = *s;
        return true;
    }
    const nb_tensor *t = ox_const_in(im, k);
    if (!t || (t->dtype != NB_I64 && t->dtype != NB_I32) || t->ndim > 1 || nb_tensor_numel(t) > 2 * NB_MAX_DIMS) return false;
    *out = (ox_shape){.n = (int)nb_tensor_numel(t), .scalar = t->ndim == 0};
    for (int i = 0; i < out->n; i++) out->dim[i] = -1, out->value[i] = (int64_t)nb_tensor_get(t, i);
    return true;
}

/* Gather, Unsqueeze, Concat and Cast on run-time shapes. Returns false when
 * the node's inputs are no run-time shape (the node is imported as usual). */
static bool shape_node(ox_import *im, nb_status *st)
{
    const char *type = im->node->op_type;
    bool known = !strcmp(type, "Cast") || !strcmp(type, "Unsqueeze") || !strcmp(type, "Gather") || !strcmp(type, "Concat");
    int n_in = !strcmp(type, "Concat") ? (int)im->node->n_input : 1;
    bool any = false, all_small = known;
    for (int k = 0; k < n_in; k++) {
        any |= ox_shape_in(im, k) != NULL;
        all_small &= ox_shape_in(im, k) || small_int_const(im, k);
    }
    /* Int constants through these ops fold into constants (the -1 of
     * x.view(x.size(0), -1) arrives as Unsqueeze of a Constant): a scalar
     * unsqueezed, a cast between ints, a gather or a concat of int lists. */
    bool fold = !any && all_small;
    int64_t to = ox_attr_i(im, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    if (!strcmp(type, "Cast") && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
        fold = false;
    if (fold && !strcmp(type, "Unsqueeze")) {
        const nb_tensor *t = ox_const_in(im, 0);
        fold = t && t->ndim == 0;
    }
    if (!any && !fold) return false;
    ox_shape c0, r = {0};
    const ox_shape *s0 = ox_shape_in(im, 0);
    if (!s0 && shape_or_const(im, 0, &c0)) s0 = &c0;
    *st = NB_OK;
    if (!strcmp(type, "Cast")) {
        r = *s0;
    } else if (!strcmp(type, "Unsqueeze")) {
        if (!s0->scalar) *st = unsupported(im, "unsqueezes a run-time shape of more than one entry");
        r = *s0;
        r.scalar = false;
    } else if (!strcmp(type, "Gather")) {
        const nb_tensor *idx = ox_const_in(im, 1);
        if (!idx || ox_attr_i(im, "axis", 0) != 0 || nb_tensor_numel(idx) > 2 * NB_MAX_DIMS) {
            *st = idx ? unsupported(im, "gathers from a run-time shape with other than constant indices on axis 0")
                      : nb_builder_status(B);
            return true;
        }
        r.scalar = idx->ndim == 0;
        r.n = (int)nb_tensor_numel(idx);
        for (int i = 0; i < r.n && !*st; i++) {
            int64_t j = (int64_t)nb_tensor_get(idx, i);
            if (j < 0) j += s0->n;
            if (j < 0 || j >= s0->n) *st = ox_node_error(im, NB_ERR_ARG, "index %lld is out of the shape's %d entries", (long long)j, s0->n);
            else r.value[i] = s0->value[j], r.dim[i] = s0->dim[j], r.of[i] = s0->of[j];
        }
    } else if (!strcmp(type, "Concat")) {
        for (int k = 0; k < (int)im->node->n_input && !*st; k++) {
            ox_shape part;
            if (!shape_or_const(im, k, &part)) *st = unsupported(im, "joins a run-time shape with what is not an int constant");
            else if (r.n + part.n > 2 * NB_MAX_DIMS) *st = unsupported(im, "makes a shape of too many entries");
            else {
                memcpy(r.value + r.n, part.value, (size_t)part.n * sizeof *r.value);
                memcpy(r.dim + r.n, part.dim, (size_t)part.n * sizeof *r.dim);
                memcpy(r.of + r.n, part.of, (size_t)part.n * sizeof *r.of);
                r.n += part.n;
            }
        }
    } else {
        *st = unsupported(im, "uses a shape computed at run time, which nabla follows only through Gather, Unsqueeze, "
                              "Concat and Cast into Reshape and ConstantOfShape");
        return true;
    }
    if (*st) return true;
    if (!fold) {
        *st = ox_set_shape(im, &r);
        return true;
    }
    nb_tensor *t;
    int64_t n = r.n;
    if ((*st = nb_tensor_new(&t, NB_I64, r.scalar ? 0 : 1, &n))) return true;
    for (int i = 0; i < r.n; i++) ((int64_t *)nb_tensor_data(t))[i] = r.value[i];
    *st = ox_set_const(im, 0, t);
    return true;
}

/* ConstantOfShape: of a Shape node's value, a fill like that value; of a
 * constant shape, fill_constant. */
static nb_status i_constant_of_shape(ox_import *im)
{
    const Onnx__AttributeProto *a = ox_attr(im, "value");
    nb_tensor *v = NULL;
    double fill = 0;
    nb_dtype dt = NB_F32;
    if (a && a->t) {
        nb_status st = ox_tensor_from_proto(a->t, ".", "ConstantOfShape's value", &v);
        if (st) return ox_node_error(im, st, "%s", nb_last_error());
        if (nb_tensor_numel(v) != 1) {
            nb_tensor_release(v);
            return ox_node_error(im, NB_ERR_FORMAT, "its value holds %lld elements, not one", (long long)nb_tensor_numel(v));
        }
        fill = nb_tensor_get(v, 0), dt = v->dtype;
        nb_tensor_release(v);
    }
    const ox_shape *rs = ox_shape_in(im, 0);
    nb_value like = rs ? rs->whole : NB_NONE;
    if (rs && nb_is_none(like)) return unsupported(im, "fills a shape pieced together at run time");
    if (!nb_is_none(like)) {
        nb_value y = fill == 0 ? nb_fill_zeros_like(B, like) : nb_ones_like(B, like);
        if (fill != 0 && fill != 1) y = nb_scale(B, y, fill, 0);
        if (nb_value_info(B, like).dtype != dt) y = nb_cast(B, y, dt);
        return ox_out(im, 0, y);
    }
    int64_t shape[NB_MAX_DIMS];
    int n = const_ints(im, 0, shape, NB_MAX_DIMS);
    if (n < 0) return nb_builder_status(B);
    if (n > NB_MAX_DIMS) return unsupported(im, "makes more dims than nabla has");
    return ox_out(im, 0, nb_fill_constant(B, dt, n, shape, fill));
}

/* ---- the table -------------------------------------------------------------- */

typedef struct importer {
    const char *onnx;
    const char *op; /* same inputs, same order: the nabla op */
    int n_in;
    nb_status (*fn)(ox_import *im); /* or this */
} importer;

static const importer table[] = {
    {"Abs", "abs", 1, 0},         {"Add", "add", 2, 0},           {"Cos", "cos", 1, 0},
    {"Div", "div", 2, 0},         {"Erf", "erf", 1, 0},           {"Exp", "exp", 1, 0},
    {"Log", "log", 1, 0},         {"Max", "maximum", 2, 0},       {"Min", "minimum", 2, 0},
    {"Mul", "mul", 2, 0},         {"Neg", "neg", 1, 0},           {"Pow", "pow", 2, 0},
    {"Relu", "relu", 1, 0},       {"Sigmoid", "sigmoid", 1, 0},   {"Sin", "sin", 1, 0},
    {"Sqrt", "sqrt", 1, 0},       {"Sub", "sub", 2, 0},           {"Tanh", "tanh", 1, 0},
    {"Gemm", 0, 0, i_gemm},       {"MatMul", 0, 0, i_matmul},     {"Conv", 0, 0, i_conv},
    {"MaxPool", 0, 0, i_maxpool}, {"AveragePool", 0, 0, i_avgpool}, {"GlobalAveragePool", 0, 0, i_global_avg},
    {"GlobalMaxPool", 0, 0, i_global_max},                        {"BatchNormalization", 0, 0, i_batch_norm},
    {"LayerNormalization", 0, 0, i_layer_norm},                   {"Reshape", 0, 0, i_reshape},
    {"Flatten", 0, 0, i_flatten}, {"Transpose", 0, 0, i_transpose}, {"Squeeze", 0, 0, i_squeeze},
    {"Unsqueeze", 0, 0, i_unsqueeze},                             {"ReduceSum", 0, 0, i_reduce_sum},
    {"ReduceMean", 0, 0, i_reduce_mean},                          {"Concat", 0, 0, i_concat},
    {"Sum", 0, 0, i_sum},         {"Gather", 0, 0, i_gather},     {"Softmax", 0, 0, i_softmax},
    {"LogSoftmax", 0, 0, i_log_softmax},                          {"LeakyRelu", 0, 0, i_leaky_relu},
    {"Elu", 0, 0, i_elu},         {"Softplus", 0, 0, i_softplus}, {"Cast", 0, 0, i_cast},
    {"Clip", 0, 0, i_clip},       {"Reciprocal", 0, 0, i_reciprocal}, {"Identity", 0, 0, i_identity},
    {"Dropout", 0, 0, i_identity}, {"Constant", 0, 0, i_constant}, {"Shape", 0, 0, i_shape},
    {"ConstantOfShape", 0, 0, i_constant_of_shape}, {"Pad", 0, 0, i_pad},
};

bool ox_reads_state(const char *op_type) { return op_type && !strcmp(op_type, "BatchNormalization"); }

nb_status ox_import_node(ox_import *im)
{
    nb_status sst;
    if (strcmp(im->node->op_type, "Reshape") && strcmp(im->node->op_type, "ConstantOfShape") && shape_node(im, &sst))
        return sst;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        const importer *m = &table[i];
        if (strcmp(m->onnx, im->node->op_type)) continue;
        if (!m->fn && (int)im->node->n_input != m->n_in)
            return ox_node_error(im, NB_ERR_UNSUPPORTED, "has %zu inputs; nabla's %s takes %d", im->node->n_input,
                                 m->op, m->n_in);
        nb_status st = m->fn ? m->fn(im) : same1(im, m->op, m->n_in);
        nb_status bst = nb_builder_status(B);
        if (!bst && !st) return NB_OK;
        /* An op's own error (a shape that does not fit, say) gets the node's name. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", bst ? nb_builder_error(B) : nb_last_error());
        if (strncmp(msg, "onnx import:", 12)) {
            nb_builder_clear_error(B);
            return ox_node_error(im, bst ? bst : st, "%s", msg);
        }
        return bst ? bst : st;
    }
    return unsupported(im, "nabla has no import for this op type");
}

#endif
