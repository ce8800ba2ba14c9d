/* Each nabla op as ONNX nodes of opset 13 (NB_ONNX_OPSET): one table, a row
 * an op. Ops whose ONNX twin takes the same inputs in the same order need
 * only a name; the others have a function. An op's first output keeps its
 * var's name, so fetches are found by name; helper values get fresh names
 * (ox_tmp). */
#ifdef NABLA_HAVE_ONNX
#include <math.h>
#include <string.h>
#include "onnx_export_form.h"

/* ---- one op, several nodes ---------------------------------------------- */

/* x with its last two dims swapped. */
static const char *swap_last(ox_export *e, const char *x)
{
    int r = rank_of(e, x);
    int64_t perm[NB_MAX_DIMS];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 1] = r - 2, perm[r - 2] = r - 1;
    const char *t = ox_tmp(e, x);
    ox_attr_ints(e, NODE("Transpose", t, x), "perm", r, perm);
    return t;
}

/* Out = act(x) for fc's activation attribute, writing `out`. */
static nb_status activation(ox_export *e, const nb_op *op, const char *x, const char *out)
{
    const char *act = nb_op_attr(op, "activation")->s;
    if (!act || !*act) NODE("Identity", out, x);
    else if (!strcmp(act, "relu")) NODE("Relu", out, x);
    else if (!strcmp(act, "tanh")) NODE("Tanh", out, x);
    else if (!strcmp(act, "sigmoid")) NODE("Sigmoid", out, x);
    else return unsupported(op, "has an activation ONNX's Gemm lacks");
    return done(e);
}

/* fc: Input's leading in_num_col_dims dims kept, the rest flattened (a
 * Reshape with 0s that copy), times W [in, out], plus Bias, activated. */
static nb_status x_fc(ox_export *e, const nb_op *op)
{
    const char *x = IN(0);
    int k = (int)nb_op_attr(op, "in_num_col_dims")->i, r = rank_of(e, x);
    if (r != k + 1) {
        int64_t shape[NB_MAX_DIMS + 1] = {0};
        shape[k] = -1;
        const char *flat = ox_tmp(e, x);
        NODE("Reshape", flat, x, ox_int64s(e, k + 1, shape));
        x = flat;
    }
    const char *y = ox_tmp(e, OUT(0));
    NODE("MatMul", y, x, IN(1));
    if (HAS_IN(2)) {
        const char *yb = ox_tmp(e, OUT(0));
        NODE("Add", yb, y, IN(2));
        y = yb;
    }
    return activation(e, op, y, OUT(0));
}

static nb_status x_matmul(ox_export *e, const nb_op *op)
{
    const char *x = IN(0), *y = IN(1);
    if (rank_of(e, x) < 2 || rank_of(e, y) < 2) return unsupported(op, "multiplies a vector; only matrices export");
    if (nb_op_attr(op, "transpose_x")->b) x = swap_last(e, x);
    if (nb_op_attr(op, "transpose_y")->b) y = swap_last(e, y);
    double alpha = nb_op_attr(op, "alpha")->f;
    if (alpha == 1) {
        NODE("MatMul", OUT(0), x, y);
    } else {
        const char *p = ox_tmp(e, OUT(0));
        NODE("MatMul", p, x, y);
        NODE("Mul", OUT(0), p, ox_scalar(e, dtype_of(e, OUT(0)), alpha));
    }
    return done(e);
}

static nb_status x_conv2d(ox_export *e, const nb_op *op)
{
    const nb_attr_value *p = nb_op_attr(op, "paddings");
    int64_t pads[4]; /* ONNX: top, left, bottom, right; nabla: (h, w) or (top, bottom, left, right) */
    if (p->n == 2) pads[0] = pads[2] = p->ints[0], pads[1] = pads[3] = p->ints[1];
    else pads[0] = p->ints[0], pads[2] = p->ints[1], pads[1] = p->ints[2], pads[3] = p->ints[3];
    Onnx__NodeProto *n = HAS_IN(2) ? NODE("Conv", OUT(0), IN(0), IN(1), IN(2)) : NODE("Conv", OUT(0), IN(0), IN(1));
    ox_attr_ints(e, n, "strides", 2, nb_op_attr(op, "strides")->ints);
    ox_attr_ints(e, n, "dilations", 2, nb_op_attr(op, "dilations")->ints);
    ox_attr_ints(e, n, "pads", 4, pads);
    ox_attr_int(e, n, "group", nb_op_attr(op, "groups")->i);
    return done(e);
}

static nb_status x_pool2d(ox_export *e, const nb_op *op)
{
    bool max = !strcmp(nb_op_attr(op, "pooling_type")->s, "max");
    if (nb_op_attr(op, "global_pooling")->b) {
        NODE(max ? "GlobalMaxPool" : "GlobalAveragePool", OUT(0), IN(0));
        return done(e);
    }
    const nb_attr_value *p = nb_op_attr(op, "paddings"), *k = nb_op_attr(op, "ksize"), *s = nb_op_attr(op, "strides");
    int64_t pads[4], ks[2] = {k->ints[0], k->ints[k->n > 1]}, st[2] = {s->ints[0], s->ints[s->n > 1]};
    if (p->n == 2) pads[0] = pads[2] = p->ints[0], pads[1] = pads[3] = p->ints[1];
    else pads[0] = p->ints[0], pads[2] = p->ints[1], pads[1] = p->ints[2], pads[3] = p->ints[3];
    Onnx__NodeProto *n = NODE(max ? "MaxPool" : "AveragePool", OUT(0), IN(0));
    ox_attr_ints(e, n, "kernel_shape", 2, ks);
    ox_attr_ints(e, n, "strides", 2, st);
    ox_attr_ints(e, n, "pads", 4, pads);
    ox_attr_int(e, n, "ceil_mode", nb_op_attr(op, "ceil_mode")->b);
    if (!max) ox_attr_int(e, n, "count_include_pad", !nb_op_attr(op, "exclusive")->b);
    return done(e);
}

/* batch_norm in its inference form: Y from the running statistics. */
static nb_status x_batch_norm(ox_export *e, const nb_op *op)
{
    Onnx__NodeProto *n = NODE("BatchNormalization", OUT(0), IN(0), IN(1), IN(2), IN(3), IN(4));
    ox_attr_float(e, n, "epsilon", nb_op_attr(op, "epsilon")->f);
    ox_attr_float(e, n, "momentum", nb_op_attr(op, "momentum")->f);
    return done(e);
}

/* layer_norm as opset 13 can say it: (x - mean) / sqrt(var + eps) over the
 * dims from begin_norm_axis, then Scale and Bias in the normalised shape. */
static nb_status x_layer_norm(ox_export *e, const nb_op *op)
{
    const nb_var *xv = var(e, IN(0));
    int r = xv->ndim, a = (int)nb_op_attr(op, "begin_norm_axis")->i;
    if (a < 0) a += r;
    int64_t axes[NB_MAX_DIMS];
    for (int i = a; i < r; i++) {
        axes[i - a] = i;
        if (xv->shape[i] < 0 && (HAS_IN(1) || HAS_IN(2))) return unsupported(op, "normalises a dim of unknown size");
    }
    nb_dtype dt = xv->dtype;
    const char *base = OUT(0), *mean = ox_tmp(e, base), *d = ox_tmp(e, base), *d2 = ox_tmp(e, base),
               *var_ = ox_tmp(e, base), *ve = ox_tmp(e, base), *sd = ox_tmp(e, base);
    Onnx__NodeProto *m1 = NODE("ReduceMean", mean, IN(0));
    ox_attr_ints(e, m1, "axes", r - a, axes);
    NODE("Sub", d, IN(0), mean);
    NODE("Mul", d2, d, d);
    Onnx__NodeProto *m2 = NODE("ReduceMean", var_, d2);
    ox_attr_ints(e, m2, "axes", r - a, axes);
    NODE("Add", ve, var_, ox_scalar(e, dt, nb_op_attr(op, "epsilon")->f));
    NODE("Sqrt", sd, ve);
    const char *y = (HAS_IN(1) || HAS_IN(2)) ? ox_tmp(e, base) : OUT(0);
    NODE("Div", y, d, sd);
    for (int k = 1; k <= 2; k++) {
        if (!HAS_IN(k)) continue;
        const char *shaped = ox_tmp(e, base), *next = (k == 1 && HAS_IN(2)) ? ox_tmp(e, base) : OUT(0);
        NODE("Reshape", shaped, IN(k), ox_int64s(e, r - a, xv->shape + a));
        NODE(k == 1 ? "Mul" : "Add", next, y, shaped);
        y = next;
    }
    return done(e);
}

/* reshape: nabla's shape attribute means what ONNX's shape input does (0
 * copies a dim, -1 is inferred). */
static nb_status x_reshape(ox_export *e, const nb_op *op)
{
    const nb_attr_value *s = nb_op_attr(op, "shape");
    NODE("Reshape", OUT(0), IN(0), ox_int64s(e, s->n, s->ints));
    return done(e);
}

/* flatten(start, stop) as a Reshape: dims before start copied (0), the
 * merged ones inferred (-1), those after stop as the output has them. */
static nb_status x_flatten(ox_export *e, const nb_op *op)
{
    const nb_var *out = var(e, OUT(0));
    int r = rank_of(e, IN(0)), s = (int)nb_op_attr(op, "start_axis")->i;
    if (s < 0) s += r;
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < out->ndim; i++) {
        shape[i] = i < s ? 0 : i == s ? -1 : out->shape[i];
        if (shape[i] < -1 || (i > s && out->shape[i] < 0))
            return unsupported(op, "keeps a dim of unknown size after the flattened ones");
    }
    NODE("Reshape", OUT(0), IN(0), ox_int64s(e, out->ndim, shape));
    return done(e);
}

/* Ops whose axes are an attribute in nabla and an input in opset 13. */
static nb_status x_axes_input(ox_export *e, const nb_op *op, const char *type)
{
    const nb_attr_value *a = nb_op_attr(op, "axes");
    Onnx__NodeProto *n = a->n ? NODE(type, OUT(0), IN(0), ox_int64s(e, a->n, a->ints)) : NODE(type, OUT(0), IN(0));
    if (!strcmp(type, "ReduceSum")) ox_attr_int(e, n, "keepdims", nb_op_attr(op, "keepdim")->b);
    return done(e);
}
static nb_status x_squeeze(ox_export *e, const nb_op *op) { return x_axes_input(e, op, "Squeeze"); }
static nb_status x_unsqueeze(ox_export *e, const nb_op *op) { return x_axes_input(e, op, "Unsqueeze"); }
static nb_status x_reduce_sum(ox_export *e, const nb_op *op) { return x_axes_input(e, op, "ReduceSum"); }

static nb_status x_reduce_mean(ox_export *e, const nb_op *op)
{
    const nb_attr_value *a = nb_op_attr(op, "axes");
    Onnx__NodeProto *n = NODE("ReduceMean", OUT(0), IN(0));
    if (a->n) ox_attr_ints(e, n, "axes", a->n, a->ints);
    ox_attr_int(e, n, "keepdims", nb_op_attr(op, "keepdim")->b);
    return done(e);
}

static nb_status x_transpose(ox_export *e, const nb_op *op)
{
    const nb_attr_value *p = nb_op_attr(op, "perm");
    ox_attr_ints(e, NODE("Transpose", OUT(0), IN(0)), "perm", p->n, p->ints);
    return done(e);
}

static nb_status x_axis_op(ox_export *e, const nb_op *op, const char *type)
{
    int n_in = nb_op_n_inputs(op);
    ox_attr_int(e, ox_node(e, type, n_in, (const char *const *)op->inputs, OUT(0)), "axis", nb_op_attr(op, "axis")->i);
    return done(e);
}
static nb_status x_concat(ox_export *e, const nb_op *op) { return x_axis_op(e, op, "Concat"); }
static nb_status x_gather(ox_export *e, const nb_op *op) { return x_axis_op(e, op, "Gather"); }
static nb_status x_softmax(ox_export *e, const nb_op *op) { return x_axis_op(e, op, "Softmax"); }
static nb_status x_log_softmax(ox_export *e, const nb_op *op) { return x_axis_op(e, op, "LogSoftmax"); }

/* argmax and argmin: ONNX's ArgMax and ArgMin, select_last_index (opset 12
 * on) for nabla's select_last. */
static nb_status x_arg(ox_export *e, const nb_op *op, const char *type)
{
    Onnx__NodeProto *n = NODE(type, OUT(0), IN(0));
    ox_attr_int(e, n, "axis", nb_op_attr(op, "axis")->i);
    ox_attr_int(e, n, "keepdims", nb_op_attr(op, "keepdim")->b);
    ox_attr_int(e, n, "select_last_index", nb_op_attr(op, "select_last")->b);
    return done(e);
}
static nb_status x_argmax(ox_export *e, const nb_op *op) { return x_arg(e, op, "ArgMax"); }
static nb_status x_argmin(ox_export *e, const nb_op *op) { return x_arg(e, op, "ArgMin"); }

static nb_status x_embedding(ox_export *e, const nb_op *op)
{
    ox_attr_int(e, NODE("Gather", OUT(0), IN(0), IN(1)), "axis", 0);
    return done(e);
}

static nb_status x_alpha_op(ox_export *e, const nb_op *op, const char *type)
{
    ox_attr_float(e, NODE(type, OUT(0), IN(0)), "alpha", nb_op_attr(op, "alpha")->f);
    return done(e);
}
static nb_status x_leaky_relu(ox_export *e, const nb_op *op) { return x_alpha_op(e, op, "LeakyRelu"); }
static nb_status x_elu(ox_export *e, const nb_op *op) { return x_alpha_op(e, op, "Elu"); }

static nb_status x_softplus(ox_export *e, const nb_op *op)
{
    if (nb_op_attr(op, "beta")->f != 1) return unsupported(op, "has beta != 1, which ONNX's Softplus lacks");
    NODE("Softplus", OUT(0), IN(0));
    return done(e);
}

static nb_status x_scale(ox_export *e, const nb_op *op)
{
    nb_dtype dt = dtype_of(e, OUT(0));
    const char *s = ox_scalar(e, dt, nb_op_attr(op, "scale")->f), *b = ox_scalar(e, dt, nb_op_attr(op, "bias")->f);
    const char *t = ox_tmp(e, OUT(0));
    if (nb_op_attr(op, "bias_after_scale")->b) NODE("Mul", t, IN(0), s), NODE("Add", OUT(0), t, b);
    else NODE("Add", t, IN(0), b), NODE("Mul", OUT(0), t, s);
    return done(e);
}

static nb_status x_clip(ox_export *e, const nb_op *op)
{
    nb_dtype dt = dtype_of(e, OUT(0));
    NODE("Clip", OUT(0), IN(0), ox_scalar(e, dt, nb_op_attr(op, "min")->f), ox_scalar(e, dt, nb_op_attr(op, "max")->f));
    return done(e);
}

static nb_status x_cast(ox_export *e, const nb_op *op)
{
    ox_attr_int(e, NODE("Cast", OUT(0), IN(0)), "to", ox_onnx_type((nb_dtype)nb_op_attr(op, "dtype")->i));
    return done(e);
}

static nb_status x_sum(ox_export *e, const nb_op *op)
{
    ox_node(e, "Sum", nb_op_n_inputs(op), (const char *const *)op->inputs, OUT(0));
    return done(e);
}

/* gelu: x/2 (1 + erf(x/sqrt 2)), or the tanh approximation. */
static nb_status x_gelu(ox_export *e, const nb_op *op)
{
    nb_dtype dt = dtype_of(e, OUT(0));
    const char *x = IN(0), *o = OUT(0), *inner = ox_tmp(e, o), *f = ox_tmp(e, o), *one = ox_tmp(e, o),
               *half = ox_tmp(e, o);
    if (nb_op_attr(op, "approximate")->b) {
        const char *x3 = ox_tmp(e, o), *x2 = ox_tmp(e, o), *c = ox_tmp(e, o), *sum = ox_tmp(e, o);
        NODE("Mul", x2, x, x);
        NODE("Mul", x3, x2, x);
        NODE("Mul", c, x3, ox_scalar(e, dt, 0.044715));
        NODE("Add", sum, x, c);
        NODE("Mul", inner, sum, ox_scalar(e, dt, 0.7978845608028654 /* sqrt(2 / pi) */));
        NODE("Tanh", f, inner);
    } else {
        NODE("Mul", inner, x, ox_scalar(e, dt, 0.7071067811865476 /* 1 / sqrt 2 */));
        NODE("Erf", f, inner);
    }
    NODE("Add", one, f, ox_scalar(e, dt, 1));
    NODE("Mul", half, x, ox_scalar(e, dt, 0.5));
    NODE("Mul", o, half, one);
    return done(e);
}

static nb_status x_silu(ox_export *e, const nb_op *op)
{
    const char *s = ox_tmp(e, OUT(0));
    NODE("Sigmoid", s, IN(0));
    NODE("Mul", OUT(0), IN(0), s);
    return done(e);
}

static nb_status x_square(ox_export *e, const nb_op *op)
{
    NODE("Mul", OUT(0), IN(0), IN(0));
    return done(e);
}

static nb_status x_rsqrt(ox_export *e, const nb_op *op)
{
    const char *s = ox_tmp(e, OUT(0));
    NODE("Sqrt", s, IN(0));
    NODE("Reciprocal", OUT(0), s);
    return done(e);
}

/* dropout at inference, and assign: the identity. The mask is not made. */
static nb_status x_identity(ox_export *e, const nb_op *op)
{
    NODE("Identity", OUT(0), IN(0));
    return done(e);
}

/* Constants made in the program become initializers of their values. */
static nb_status x_assign_value(ox_export *e, const nb_op *op)
{
    const nb_attr_value *shape = nb_op_attr(op, "shape"), *fp = nb_op_attr(op, "fp_values"),
                        *iv = nb_op_attr(op, "int_values");
    nb_dtype dt = (nb_dtype)nb_op_attr(op, "dtype")->i;
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, shape->n, shape->ints)) return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    int64_t n = nb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        nb_tensor_set(t, i,
                      nb_dtype_is_float(dt) ? (i < fp->n ? fp->floats[i] : 0) : (double)(i < iv->n ? iv->ints[i] : 0));
    bool ok = ox_add_init(e, OUT(0), t);
    nb_tensor_release(t);
    return ok ? NB_OK : nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
}

static nb_status x_fill_constant(ox_export *e, const nb_op *op)
{
    const nb_attr_value *shape = nb_op_attr(op, "shape");
    for (int i = 0; i < shape->n; i++)
        if (shape->ints[i] < 0) return unsupported(op, "fills a shape of unknown size");
    nb_tensor *t;
    if (nb_tensor_full(&t, (nb_dtype)nb_op_attr(op, "dtype")->i, shape->n, shape->ints, nb_op_attr(op, "value")->f))
        return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    bool ok = ox_add_init(e, OUT(0), t);
    nb_tensor_release(t);
    return ok ? NB_OK : nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
}

/* pad: nabla's (before, after) per dim; ONNX's every start, then every end. */
static nb_status x_pad(ox_export *e, const nb_op *op)
{
    const nb_attr_value *p = nb_op_attr(op, "paddings");
    int r = p->n / 2;
    int64_t pads[2 * NB_MAX_DIMS];
    for (int d = 0; d < r && d < NB_MAX_DIMS; d++) pads[d] = p->ints[2 * d], pads[r + d] = p->ints[2 * d + 1];
    const char *mode = nb_op_attr(op, "mode")->s;
    Onnx__NodeProto *n = NODE("Pad", OUT(0), IN(0), ox_int64s(e, 2 * r, pads),
                              ox_scalar(e, dtype_of(e, OUT(0)), nb_op_attr(op, "pad_value")->f));
    if (strcmp(mode, "constant")) ox_attr_string(e, n, "mode", mode);
    return done(e);
}

/* ones_like and fill_zeros_like: a constant of x's shape, known at run time. */
static nb_status fill_like(ox_export *e, const nb_op *op, double v)
{
    nb_tensor *t;
    if (nb_tensor_full(&t, dtype_of(e, OUT(0)), 1, (int64_t[]){1}, v))
        return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    const char *shape = ox_tmp(e, OUT(0));
    NODE("Shape", shape, IN(0));
    ox_attr_tensor(e, NODE("ConstantOfShape", OUT(0), shape), "value", t);
    nb_tensor_release(t);
    return done(e);
}
static nb_status x_ones_like(ox_export *e, const nb_op *op) { return fill_like(e, op, 1); }
static nb_status x_zeros_like(ox_export *e, const nb_op *op) { return fill_like(e, op, 0); }

/* ---- the table ------------------------------------------------------------ */

typedef ox_exporter mapping;

static const mapping table[] = {
    /* one ONNX op each, by name */
    {"abs", "Abs", 0},
    {"add", "Add", 0},
    {"cos", "Cos", 0},
    {"div", "Div", 0},
    {"erf", "Erf", 0},
    {"exp", "Exp", 0},
    {"log", "Log", 0},
    {"maximum", "Max", 0},
    {"minimum", "Min", 0},
    {"mul", "Mul", 0},
    {"neg", "Neg", 0},
    {"pow", "Pow", 0},
    {"relu", "Relu", 0},
    {"sigmoid", "Sigmoid", 0},
    {"sin", "Sin", 0},
    {"sqrt", "Sqrt", 0},
    {"sub", "Sub", 0},
    {"tanh", "Tanh", 0},
    {"equal", "Equal", 0},
    {"less", "Less", 0},
    {"greater", "Greater", 0},
    {"less_equal", "LessOrEqual", 0},
    {"greater_equal", "GreaterOrEqual", 0},
    {"logical_and", "And", 0},
    {"logical_or", "Or", 0},
    {"logical_xor", "Xor", 0},
    {"logical_not", "Not", 0},
    {"where", "Where", 0},
    {"sign", "Sign", 0},
    /* written by a function of their own */
    {"fc", 0, x_fc},
    {"matmul", 0, x_matmul},
    {"recurrent", 0, ox_export_recurrent},
    {"fill_constant_batch_size_like", 0, ox_export_fill_batch_like},
    {"conv2d", 0, x_conv2d},
    {"pool2d", 0, x_pool2d},
    {"batch_norm", 0, x_batch_norm},
    {"layer_norm", 0, x_layer_norm},
    {"reshape", 0, x_reshape},
    {"flatten", 0, x_flatten},
    {"squeeze", 0, x_squeeze},
    {"unsqueeze", 0, x_unsqueeze},
    {"reduce_sum", 0, x_reduce_sum},
    {"reduce_mean", 0, x_reduce_mean},
    {"transpose", 0, x_transpose},
    {"concat", 0, x_concat},
    {"gather", 0, x_gather},
    {"softmax", 0, x_softmax},
    {"log_softmax", 0, x_log_softmax},
    {"embedding", 0, x_embedding},
    {"leaky_relu", 0, x_leaky_relu},
    {"elu", 0, x_elu},
    {"softplus", 0, x_softplus},
    {"scale", 0, x_scale},
    {"clip", 0, x_clip},
    {"cast", 0, x_cast},
    {"sum", 0, x_sum},
    {"gelu", 0, x_gelu},
    {"silu", 0, x_silu},
    {"square", 0, x_square},
    {"rsqrt", 0, x_rsqrt},
    {"dropout", 0, x_identity},
    {"assign", 0, x_identity},
    {"pad", 0, x_pad},
    {"ones_like", 0, x_ones_like},
    {"fill_zeros_like", 0, x_zeros_like},
    {"assign_value", 0, x_assign_value},
    {"fill_constant", 0, x_fill_constant},
    {"argmax", 0, x_argmax},
    {"argmin", 0, x_argmin},
};

/* The row of op `name`: this file's, or a family's. */
static const mapping *find(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(table[i].op, name)) return &table[i];
    static const ox_exporter *const families[] = {ox_exports_shape, ox_exports_nn};
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const ox_exporter *m = families[f]; m->op; m++)
            if (!strcmp(m->op, name)) return m;
    return NULL;
}

nb_status ox_export_op(ox_export *e, const nb_op *op)
{
    const mapping *m = find(op->def->name);
    if (!m) return unsupported(op, "has no ONNX form nabla knows");
    if (m->fn) return m->fn(e, op);
    ox_node(e, m->onnx, nb_op_n_inputs(op), (const char *const *)op->inputs, OUT(0));
    return done(e);
}

#endif
