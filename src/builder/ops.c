/* The typed op calls of nabla/ops.h: each packs its arguments for nb_emit. */
#include <stdint.h>
#include "builder_internal.h"
#include "nabla/device.h"
#include "nabla/ops.h"

#define IN NB_VALUES
#define ATTRS NB_ATTRS
#define NO_ATTRS NB_NO_ATTRS

#define UNARY(fn, op) \
    nb_value fn(nb_builder *b, nb_value x) { return nb_emit1(b, op, IN(x), NO_ATTRS); }
#define BINARY(fn, op) \
    nb_value fn(nb_builder *b, nb_value x, nb_value y) { return nb_emit1(b, op, IN(x, y), NO_ATTRS); }
#define REDUCE(fn, op)                                                                              \
    nb_value fn(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, bool keepdim)          \
    {                                                                                               \
        return nb_emit1(b, op, IN(x), ATTRS(NB_ATTR_INTS_N("axes", n_axes, axes), NB_ATTR_BOOL("keepdim", keepdim))); \
    }

/* The elementwise ops of nabla/elementwise_ops.h. */
#define NB_BINARY(name, dtypes, cost, uses_in, uses_out, doc) BINARY(nb_##name, #name)
#define NB_UNARY(name, dtypes, cost, uses_in, uses_out, doc) UNARY(nb_##name, #name)
#define NB_UNARY_A1(name, dtypes, cost, uses_in, uses_out, a, a_default, doc) \
    nb_value nb_##name(nb_builder *b, nb_value x, double a)                 \
    {                                                                       \
        return nb_emit1(b, #name, IN(x), ATTRS(NB_ATTR_FLOAT(#a, a)));       \
    }
#define NB_UNARY_A2(name, dtypes, cost, uses_in, uses_out, a, a_default, b_, b_default, doc) \
    nb_value nb_##name(nb_builder *b, nb_value x, double a, double b_)                    \
    {                                                                                     \
        return nb_emit1(b, #name, IN(x), ATTRS(NB_ATTR_FLOAT(#a, a), NB_ATTR_FLOAT(#b_, b_))); \
    }
#include "nabla/elementwise_ops.h"

nb_value nb_gelu(nb_builder *b, nb_value x, bool approximate)
{
    return nb_emit1(b, "gelu", IN(x), ATTRS(NB_ATTR_BOOL("approximate", approximate)));
}

nb_value nb_softsign(nb_builder *b, nb_value x) { return nb_emit1(b, "softsign", IN(x), NB_NO_ATTRS); }
nb_value nb_mish(nb_builder *b, nb_value x) { return nb_emit1(b, "mish", IN(x), NB_NO_ATTRS); }
nb_value nb_hardswish(nb_builder *b, nb_value x) { return nb_emit1(b, "hardswish", IN(x), NB_NO_ATTRS); }

nb_value nb_clip(nb_builder *b, nb_value x, double min, double max)
{
    return nb_emit1(b, "clip", IN(x), ATTRS(NB_ATTR_FLOAT("min", min), NB_ATTR_FLOAT("max", max)));
}

nb_value nb_scale(nb_builder *b, nb_value x, double scale, double bias)
{
    return nb_emit1(b, "scale", IN(x), ATTRS(NB_ATTR_FLOAT("scale", scale), NB_ATTR_FLOAT("bias", bias)));
}

nb_value nb_cast(nb_builder *b, nb_value x, nb_dtype dtype)
{
    return nb_emit1(b, "cast", IN(x), ATTRS(NB_ATTR_INT("dtype", dtype)));
}

BINARY(nb_equal, "equal")
BINARY(nb_not_equal, "not_equal")
BINARY(nb_less, "less")
BINARY(nb_less_equal, "less_equal")
BINARY(nb_greater, "greater")
BINARY(nb_greater_equal, "greater_equal")
BINARY(nb_logical_and, "logical_and")
BINARY(nb_logical_or, "logical_or")
UNARY(nb_logical_not, "logical_not")

BINARY(nb_logical_xor, "logical_xor")

nb_value nb_where(nb_builder *b, nb_value cond, nb_value x, nb_value y)
{
    return nb_emit1(b, "where", IN(cond, x, y), NO_ATTRS);
}

REDUCE(nb_reduce_sum, "reduce_sum")
REDUCE(nb_reduce_mean, "reduce_mean")
REDUCE(nb_reduce_max, "reduce_max")
REDUCE(nb_reduce_min, "reduce_min")
REDUCE(nb_reduce_prod, "reduce_prod")
REDUCE(nb_logsumexp, "logsumexp")

nb_value nb_argmax(nb_builder *b, nb_value x, int axis, bool keepdim)
{
    return nb_emit1(b, "argmax", IN(x), ATTRS(NB_ATTR_INT("axis", axis), NB_ATTR_BOOL("keepdim", keepdim)));
}

nb_value nb_argmin(nb_builder *b, nb_value x, int axis, bool keepdim)
{
    return nb_emit1(b, "argmin", IN(x), ATTRS(NB_ATTR_INT("axis", axis), NB_ATTR_BOOL("keepdim", keepdim)));
}

nb_value nb_sum(nb_builder *b, int n, const nb_value *xs) { return nb_emit1(b, "sum", NB_VALUES_N(n, xs), NO_ATTRS); }
BINARY(nb_sum_to, "sum_to")

/* The scans of nabla/scan_ops.h. */
#define NB_SCAN(name, ...)                                                                                  \
    nb_value nb_##name(nb_builder *b, nb_value x, int axis, unsigned flags)                                 \
    {                                                                                                       \
        return nb_emit1(b, #name, IN(x),                                                                    \
                        ATTRS(NB_ATTR_INT("axis", axis), NB_ATTR_BOOL("exclusive", (flags & NB_SCAN_EXCLUSIVE) != 0), \
                              NB_ATTR_BOOL("reverse", (flags & NB_SCAN_REVERSE) != 0)));                   \
    }
#include "nabla/scan_ops.h"

nb_value nb_topk(nb_builder *b, nb_value x, int64_t k, int axis, bool largest, nb_value *indices)
{
    nb_value outs[2] = {NB_NONE, NB_NONE};
    nb_emit(b, "topk", IN(x), ATTRS(NB_ATTR_INT("k", k), NB_ATTR_INT("axis", axis), NB_ATTR_BOOL("largest", largest)),
            2, outs);
    if (indices) *indices = outs[1];
    return outs[0];
}

nb_value nb_matmul(nb_builder *b, nb_value x, nb_value y, unsigned flags)
{
    return nb_emit1(b, "matmul", IN(x, y),
                    ATTRS(NB_ATTR_BOOL("transpose_x", (flags & NB_TRANSPOSE_X) != 0),
                          NB_ATTR_BOOL("transpose_y", (flags & NB_TRANSPOSE_Y) != 0)));
}

nb_value nb_fc(nb_builder *b, nb_value input, nb_value w, nb_value bias, int in_num_col_dims)
{
    return nb_emit1(b, "fc", IN(input, w, bias), ATTRS(NB_ATTR_INT("in_num_col_dims", in_num_col_dims)));
}

nb_value nb_reshape(nb_builder *b, nb_value x, int ndim, const int64_t *shape)
{
    return nb_emit1(b, "reshape", IN(x), ATTRS(NB_ATTR_INTS_N("shape", ndim, shape)));
}

nb_value nb_flatten(nb_builder *b, nb_value x, int start_axis, int stop_axis)
{
    return nb_emit1(b, "flatten", IN(x),
                    ATTRS(NB_ATTR_INT("start_axis", start_axis), NB_ATTR_INT("stop_axis", stop_axis)));
}

nb_value nb_transpose(nb_builder *b, nb_value x, int ndim, const int64_t *perm)
{
    return nb_emit1(b, "transpose", IN(x), ATTRS(NB_ATTR_INTS_N("perm", ndim, perm)));
}

nb_value nb_squeeze(nb_builder *b, nb_value x, int n_axes, const int64_t *axes)
{
    return nb_emit1(b, "squeeze", IN(x), ATTRS(NB_ATTR_INTS_N("axes", n_axes, axes)));
}

nb_value nb_unsqueeze(nb_builder *b, nb_value x, int n_axes, const int64_t *axes)
{
    return nb_emit1(b, "unsqueeze", IN(x), ATTRS(NB_ATTR_INTS_N("axes", n_axes, axes)));
}

nb_value nb_expand(nb_builder *b, nb_value x, int ndim, const int64_t *shape)
{
    return nb_emit1(b, "expand", IN(x), ATTRS(NB_ATTR_INTS_N("shape", ndim, shape)));
}

BINARY(nb_expand_as, "expand_as")
BINARY(nb_reshape_as, "reshape_as")

nb_value nb_concat(nb_builder *b, int n, const nb_value *xs, int axis)
{
    return nb_emit1(b, "concat", NB_VALUES_N(n, xs), ATTRS(NB_ATTR_INT("axis", axis)));
}

nb_value nb_stack(nb_builder *b, int n, const nb_value *xs, int axis)
{
    return nb_emit1(b, "stack", NB_VALUES_N(n, xs), ATTRS(NB_ATTR_INT("axis", axis)));
}

nb_value nb_lstm_cell(nb_builder *b, nb_value gates, nb_value c, nb_value *c_next)
{
    nb_value outs[2] = {NB_NONE, NB_NONE};
    nb_emit(b, "lstm_cell", IN(gates, c), NO_ATTRS, 2, outs);
    if (c_next) *c_next = outs[1];
    return outs[0];
}

nb_status nb_split(nb_builder *b, nb_value x, int axis, int n_out, nb_value *outs)
{
    return nb_emit(b, "split", IN(x), ATTRS(NB_ATTR_INT("axis", axis)), n_out, outs);
}

nb_value nb_slice(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, const int64_t *starts,
                  const int64_t *ends)
{
    return nb_emit1(b, "slice", IN(x),
                    ATTRS(NB_ATTR_INTS_N("axes", n_axes, axes), NB_ATTR_INTS_N("starts", n_axes, starts),
                          NB_ATTR_INTS_N("ends", n_axes, ends)));
}

nb_value nb_gather(nb_builder *b, nb_value x, nb_value index, int axis)
{
    return nb_emit1(b, "gather", IN(x, index), ATTRS(NB_ATTR_INT("axis", axis)));
}

nb_value nb_scatter_add(nb_builder *b, nb_value x, nb_value index, nb_value updates, int axis)
{
    return nb_emit1(b, "scatter_add", IN(x, index, updates), ATTRS(NB_ATTR_INT("axis", axis)));
}

nb_value nb_one_hot(nb_builder *b, nb_value x, int64_t depth)
{
    return nb_emit1(b, "one_hot", IN(x), ATTRS(NB_ATTR_INT("depth", depth)));
}

nb_value nb_index_select(nb_builder *b, nb_value x, nb_value index, int dim)
{
    return nb_emit1(b, "index_select", IN(x, index), ATTRS(NB_ATTR_INT("dim", dim)));
}

nb_value nb_pad(nb_builder *b, nb_value x, int n, const int64_t *paddings, double value, const char *mode)
{
    return nb_emit1(b, "pad", IN(x),
                    ATTRS(NB_ATTR_INTS_N("paddings", n, paddings), NB_ATTR_FLOAT("pad_value", value),
                          NB_ATTR_STRING("mode", mode ? mode : "constant")));
}

/* A (h, w) pair of conv2d_op_opts or pool2d_op_opts: 0 entries take `dflt`. */
static void pair_or(const int64_t v[2], const int64_t dflt[2], int64_t out[2])
{
    for (int i = 0; i < 2; i++) out[i] = v[i] ? v[i] : dflt[i];
}

nb_value nb_conv2d(nb_builder *b, nb_value input, nb_value filter, nb_value bias, const nb_conv2d_op_opts *opts)
{
    const nb_conv2d_op_opts o = opts ? *opts : (nb_conv2d_op_opts){0};
    static const int64_t ones[2] = {1, 1};
    int64_t strides[2], dilations[2];
    pair_or(o.strides, ones, strides);
    pair_or(o.dilations, ones, dilations);
    return nb_emit1(b, "conv2d", IN(input, filter, bias),
                    ATTRS(NB_ATTR_INTS_N("strides", 2, strides), NB_ATTR_INTS_N("paddings", 4, o.paddings),
                          NB_ATTR_INTS_N("dilations", 2, dilations), NB_ATTR_INT("groups", o.groups ? o.groups : 1)));
}

nb_value nb_pool2d(nb_builder *b, nb_value x, const char *type, const int64_t *ksize, const nb_pool2d_op_opts *opts)
{
    const nb_pool2d_op_opts o = opts ? *opts : (nb_pool2d_op_opts){0};
    static const int64_t ones[2] = {1, 1};
    if (b && !ksize && !o.global) {
        nb_builder_fail(b, NB_ERR_ARG, "pool2d: ksize is NULL; it is needed unless opts->global");
        return NB_NONE;
    }
    int64_t k[2], strides[2];
    pair_or(ksize ? ksize : ones, ones, k);
    pair_or(o.strides, k, strides);
    return nb_emit1(b, "pool2d", IN(x),
                    ATTRS(NB_ATTR_STRING("pooling_type", type ? type : "max"), NB_ATTR_INTS_N("ksize", 2, k),
                          NB_ATTR_INTS_N("strides", 2, strides), NB_ATTR_INTS_N("paddings", 4, o.paddings),
                          NB_ATTR_BOOL("global_pooling", o.global), NB_ATTR_BOOL("ceil_mode", o.ceil_mode),
                          NB_ATTR_BOOL("exclusive", !o.count_include_pad)));
}

nb_value nb_batch_norm(nb_builder *b, nb_value x, nb_value scale, nb_value bias, nb_batch_norm_stats *running,
                       const nb_batch_norm_op_opts *opts)
{
    const nb_batch_norm_op_opts o = opts ? *opts : (nb_batch_norm_op_opts){0};
    if (b && !running) {
        nb_builder_fail(b, NB_ERR_ARG, "batch_norm: the running statistics are NULL");
        return NB_NONE;
    }
    /* is_test only when asked, as nb_scaled_dot_product_attention. */
    const nb_attr attrs[4] = {NB_ATTR_FLOAT("momentum", o.momentum ? o.momentum : 0.9),
                              NB_ATTR_FLOAT("epsilon", o.epsilon ? o.epsilon : 1e-5),
                              NB_ATTR_BOOL("use_global_stats", o.use_global_stats), NB_ATTR_BOOL("is_test", true)};
    nb_value outs[5] = {NB_NONE, NB_NONE, NB_NONE, NB_NONE, NB_NONE};
    if (nb_emit(b, "batch_norm",
                IN(x, scale, bias, running ? running->mean : NB_NONE, running ? running->variance : NB_NONE),
                NB_ATTRS_N(o.is_test ? 4 : 3, attrs), 5, outs))
        return NB_NONE;
    running->mean = outs[1];
    running->variance = outs[2];
    return outs[0];
}

nb_value nb_layer_norm(nb_builder *b, nb_value x, nb_value scale, nb_value bias, int begin_norm_axis, double epsilon)
{
    return nb_emit1(
        b, "layer_norm", IN(x, scale, bias),
        ATTRS(NB_ATTR_INT("begin_norm_axis", begin_norm_axis), NB_ATTR_FLOAT("epsilon", epsilon ? epsilon : 1e-5)));
}

nb_value nb_softmax(nb_builder *b, nb_value x, int axis)
{
    return nb_emit1(b, "softmax", IN(x), ATTRS(NB_ATTR_INT("axis", axis)));
}

nb_value nb_log_softmax(nb_builder *b, nb_value x, int axis)
{
    return nb_emit1(b, "log_softmax", IN(x), ATTRS(NB_ATTR_INT("axis", axis)));
}

nb_value nb_softmax_with_cross_entropy(nb_builder *b, nb_value logits, nb_value label, nb_value *softmax_out)
{
    nb_value outs[2];
    if (nb_emit(b, "softmax_with_cross_entropy", IN(logits, label), NO_ATTRS, 2, outs)) return NB_NONE;
    if (softmax_out) *softmax_out = outs[0];
    return outs[1];
}

BINARY(nb_cross_entropy, "cross_entropy")

nb_value nb_mse_loss(nb_builder *b, nb_value x, nb_value label, const char *reduction)
{
    return nb_emit1(b, "mse_loss", IN(x, label), ATTRS(NB_ATTR_STRING("reduction", reduction ? reduction : "mean")));
}

nb_value nb_bce_with_logits(nb_builder *b, nb_value x, nb_value label, const char *reduction)
{
    return nb_emit1(b, "bce_with_logits", IN(x, label),
                    ATTRS(NB_ATTR_STRING("reduction", reduction ? reduction : "mean")));
}

nb_value nb_dropout(nb_builder *b, nb_value x, double p, bool is_test, uint64_t seed)
{
    return nb_emit1(
        b, "dropout", IN(x),
        ATTRS(NB_ATTR_FLOAT("dropout_prob", p), NB_ATTR_BOOL("is_test", is_test), NB_ATTR_INT("seed", (int64_t)seed)));
}

nb_value nb_embedding(nb_builder *b, nb_value w, nb_value ids, int64_t padding_idx)
{
    return nb_emit1(b, "embedding", IN(w, ids), ATTRS(NB_ATTR_INT("padding_idx", padding_idx)));
}

nb_value nb_accuracy(nb_builder *b, nb_value scores, nb_value label, int k)
{
    return nb_emit1(b, "accuracy", IN(scores, label), ATTRS(NB_ATTR_INT("k", k)));
}

nb_value nb_fill_constant(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double value)
{
    return nb_emit1(
        b, "fill_constant", NB_NO_VALUES,
        ATTRS(NB_ATTR_INTS_N("shape", ndim, shape), NB_ATTR_INT("dtype", dtype), NB_ATTR_FLOAT("value", value)));
}

nb_status nb_values_attr(const nb_tensor *value, void **vals, nb_attr *attr)
{
    *vals = NULL;
    int64_t n = nb_tensor_numel(value);
    if (n > INT32_MAX) return nb_error(NB_ERR_ARG, "%lld values are too many for an attribute", (long long)n);
    bool fp = nb_dtype_is_float(value->dtype);
    void *v = nb_calloc((size_t)n + 1, fp ? sizeof(double) : sizeof(int64_t));
    if (!v) return nb_error(NB_ERR_NOMEM, "out of memory for %lld values", (long long)n);
    /* value may be a view: read a contiguous copy. Integers are read in
     * their own type, since int64 does not survive a trip through double. */
    nb_tensor *c = NULL;
    nb_status st = nb_tensor_contiguous(&c, (nb_tensor *)value);
    if (st) {
        nb_free(v);
        return st;
    }
    const void *d = nb_tensor_data(c);
    for (int64_t i = 0; i < n; i++) switch (c->dtype) {
        case NB_F32: ((double *)v)[i] = ((const float *)d)[i]; break;
        case NB_F64: ((double *)v)[i] = ((const double *)d)[i]; break;
        case NB_I32: ((int64_t *)v)[i] = ((const int32_t *)d)[i]; break;
        case NB_I64: ((int64_t *)v)[i] = ((const int64_t *)d)[i]; break;
        default: ((int64_t *)v)[i] = ((const uint8_t *)d)[i]; break; /* u8, bool */
        }
    nb_tensor_release(c);
    *attr = fp ? NB_ATTR_FLOATS_N("fp_values", (int)n, v) : NB_ATTR_INTS_N("int_values", (int)n, v);
    *vals = v;
    return NB_OK;
}

nb_value nb_constant(nb_builder *b, const nb_tensor *value)
{
    if (!b) return NB_NONE;
    if (!value) {
        nb_builder_fail(b, NB_ERR_ARG, "constant: the tensor is NULL");
        return NB_NONE;
    }
    void *vals;
    nb_attr values;
    nb_status st = nb_values_attr(value, &vals, &values);
    if (st) {
        nb_builder_fail(b, st, "constant: %s", nb_last_error());
        return NB_NONE;
    }
    nb_value v =
        nb_emit1(b, "assign_value", NB_NO_VALUES,
                 ATTRS(NB_ATTR_INTS_N("shape", value->ndim, value->shape), NB_ATTR_INT("dtype", value->dtype), values));
    nb_free(vals);
    return v;
}

UNARY(nb_fill_zeros_like, "fill_zeros_like")
UNARY(nb_ones_like, "ones_like")
UNARY(nb_assign, "assign")

nb_value nb_uniform_random(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double min, double max)
{
    return nb_emit1(b, "uniform_random", NB_NO_VALUES,
                    ATTRS(NB_ATTR_INTS_N("shape", ndim, shape), NB_ATTR_INT("dtype", dtype), NB_ATTR_FLOAT("min", min),
                          NB_ATTR_FLOAT("max", max)));
}

nb_value nb_gaussian_random(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double mean, double std)
{
    return nb_emit1(b, "gaussian_random", NB_NO_VALUES,
                    ATTRS(NB_ATTR_INTS_N("shape", ndim, shape), NB_ATTR_INT("dtype", dtype),
                          NB_ATTR_FLOAT("mean", mean), NB_ATTR_FLOAT("std", std)));
}

nb_value nb_truncated_gaussian_random(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double mean,
                                      double std)
{
    return nb_emit1(b, "truncated_gaussian_random", NB_NO_VALUES,
                    ATTRS(NB_ATTR_INTS_N("shape", ndim, shape), NB_ATTR_INT("dtype", dtype),
                          NB_ATTR_FLOAT("mean", mean), NB_ATTR_FLOAT("std", std)));
}

nb_value nb_fill_constant_batch_size_like(nb_builder *b, nb_value like, nb_dtype dtype, int ndim, const int64_t *shape,
                                          double value)
{
    return nb_emit1(
        b, "fill_constant_batch_size_like", IN(like),
        ATTRS(NB_ATTR_INTS_N("shape", ndim, shape), NB_ATTR_INT("dtype", dtype), NB_ATTR_FLOAT("value", value)));
}

nb_value nb_increment(nb_builder *b, nb_value x, double step)
{
    return nb_emit1(b, "increment", IN(x), ATTRS(NB_ATTR_FLOAT("step", step)));
}

nb_value nb_scaled_dot_product_attention(nb_builder *b, nb_value q, nb_value k, nb_value v,
                                         const nb_attention_opts *opts)
{
    const nb_attention_opts o = opts ? *opts : (nb_attention_opts){0};
    /* is_test only when asked: left out, an eager builder in test mode sets
     * it (nb_eager_set_test_mode), and a program's test copy does. */
    const nb_attr attrs[6] = {NB_ATTR_FLOAT("scale", o.scale),
                              NB_ATTR_BOOL("causal", o.causal),
                              NB_ATTR_FLOAT("dropout_prob", o.dropout),
                              NB_ATTR_INT("seed", (int64_t)o.seed),
                              NB_ATTR_INT("heads", o.heads),
                              NB_ATTR_BOOL("is_test", true)};
    return nb_emit1(b, "scaled_dot_product_attention", IN(q, k, v, o.mask), NB_ATTRS_N(o.is_test ? 6 : 5, attrs));
}
