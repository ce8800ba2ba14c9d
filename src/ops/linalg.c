/* The linear-algebra family: matmul (NumPy semantics, batched, with
 * transposes) and fc (Paddle's fully connected layer with a fused bias and
 * activation). Kernels: src/kernels/cpu/linalg.c on the shared GEMM; their
 * parameter structs: src/kernels/params/linalg.h. */
#include <stddef.h>
#include <string.h>
#include "families.h"
#include "batch_rules.h"
#include "kernels/cpu/linalg.h"
#include "kernels/params/linalg.h"
#include "linalg_grad.h"

static bool is_float(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64; }

/* ---- matmul ------------------------------------------------------------------ */

static nb_status infer_matmul(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *y = nb_in_info(ctx, 1, 0);
    if (!is_float(x->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: X has dtype %s but it takes float32 or float64", ctx->label,
                        nb_dtype_name(x->dtype));
    if (y->dtype != x->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: X has dtype %s but Y has dtype %s", ctx->label, nb_dtype_name(x->dtype),
                        nb_dtype_name(y->dtype));
    nb_matmul_dims d;
    nb_status st =
        nb_matmul_dims_of(ctx->label, x, y, nb_attr_bool(ctx, "transpose_x"), nb_attr_bool(ctx, "transpose_y"), &d);
    if (st) return st;
    nb_var_info *out = nb_out_info(ctx, 0, 0);
    out->dtype = x->dtype;
    nb_matmul_out_shape(&d, &out->ndim, out->shape);
    return NB_OK;
}

static nb_status params_matmul(const nb_op_ctx *ctx, void *params)
{
    nb_matmul_params *p = params;
    p->transpose_x = nb_attr_bool(ctx, "transpose_x");
    p->transpose_y = nb_attr_bool(ctx, "transpose_y");
    p->alpha = nb_attr_float(ctx, "alpha");
    return NB_OK;
}

/* The gradient of a product needs both factors. */
static const nb_op_def op_matmul = {
    .name = "matmul",
    .batch = nb_batch_matmul,
    .doc = "Matrix product alpha * op(X) @ op(Y) as numpy.matmul: 1-D operands, broadcast batch dims",
    .inputs = {{"X", 0}, {"Y", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_BOOL("transpose_x", false), NB_ADEF_BOOL("transpose_y", false), NB_ADEF_FLOAT("alpha", 1.0)},
    .infer = infer_matmul,
    .params_size = sizeof(nb_matmul_params),
    .params = params_matmul,
    .grad_uses_inputs = (1u << 0) | (1u << 1),
    .vjp = nb_vjp_matmul,
    .jvp = nb_jvp_matmul,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- fc ---------------------------------------------------------------------------- */

static nb_status infer_fc(nb_op_ctx *ctx)
{
    const nb_var_info *in = nb_in_info(ctx, 0, 0), *w = nb_in_info(ctx, 1, 0);
    const nb_var_info *bias = nb_has_in(ctx, 2) ? nb_in_info(ctx, 2, 0) : NULL;
    char is[NB_SHAPE_STR_MAX], ws[NB_SHAPE_STR_MAX], bs[NB_SHAPE_STR_MAX];
    nb_shape_str(is, sizeof is, in->ndim, in->shape);
    nb_shape_str(ws, sizeof ws, w->ndim, w->shape);
    if (!is_float(in->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: Input has dtype %s but it takes float32 or float64", ctx->label,
                        nb_dtype_name(in->dtype));
    if (w->dtype != in->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: Input has dtype %s but W has dtype %s", ctx->label, nb_dtype_name(in->dtype),
                        nb_dtype_name(w->dtype));
    if (bias && bias->dtype != in->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: Input has dtype %s but Bias has dtype %s", ctx->label,
                        nb_dtype_name(in->dtype), nb_dtype_name(bias->dtype));
    nb_fc_act act;
    const char *act_name = nb_attr_string(ctx, "activation");
    if (!nb_fc_act_parse(act_name, &act))
        return nb_error(NB_ERR_ARG, "%s: unknown activation \"%s\" (it takes \"\", \"relu\", \"sigmoid\", \"tanh\")",
                        ctx->label, act_name);
    if (w->ndim != 2) return nb_error(NB_ERR_SHAPE, "%s: W has shape %s but it must be 2-D", ctx->label, ws);
    int64_t ncd = nb_attr_int(ctx, "in_num_col_dims");
    if (ncd < 1 || ncd >= in->ndim)
        return nb_error(NB_ERR_ARG, "%s: in_num_col_dims is %lld but Input has shape %s: it must be in [1, %d)",
                        ctx->label, (long long)ncd, is, in->ndim > 1 ? in->ndim : 1);
    /* Input is a matrix of rows = dims [0, ncd) and columns = the rest. */
    int64_t K = 1;
    for (int d = (int)ncd; d < in->ndim; d++) K = in->shape[d] < 0 || K < 0 ? -1 : K * in->shape[d];
    if (K != -1 && w->shape[0] != -1 && K != w->shape[0])
        return nb_error(NB_ERR_SHAPE,
                        "%s: Input has shape %s (%lld columns with in_num_col_dims=%lld) but W has shape %s: "
                        "inner dimensions differ",
                        ctx->label, is, (long long)K, (long long)ncd, ws);
    int64_t N = w->shape[1];
    if (bias) {
        int64_t bn = bias->ndim == 1 ? bias->shape[0] : bias->ndim == 2 && bias->shape[0] == 1 ? bias->shape[1] : -2;
        if (bn == -2 || (bn != -1 && N != -1 && bn != N))
            return nb_error(NB_ERR_SHAPE, "%s: Bias has shape %s but W has shape %s: it must be [%lld] or [1, %lld]",
                            ctx->label, nb_shape_str(bs, sizeof bs, bias->ndim, bias->shape), ws, (long long)N,
                            (long long)N);
    }
    nb_var_info *out = nb_out_info(ctx, 0, 0);
    out->dtype = in->dtype;
    out->ndim = (int)ncd + 1;
    memcpy(out->shape, in->shape, (size_t)ncd * sizeof *out->shape);
    out->shape[ncd] = N;
    return NB_OK;
}

/* Inference has checked the activation; a program whose attributes were
 * changed since fails here, before its kernel runs. */
static nb_status params_fc(const nb_op_ctx *ctx, void *params)
{
    nb_fc_params *p = params;
    const char *act = nb_attr_string(ctx, "activation");
    if (!nb_fc_act_parse(act, &p->act)) return nb_error(NB_ERR_ARG, "%s: unknown activation \"%s\"", ctx->label, act);
    p->in_num_col_dims = nb_attr_int(ctx, "in_num_col_dims");
    return NB_OK;
}

/* The gradient needs Input and W for the product, Out to undo the
 * activation (relu, sigmoid and tanh derivatives are functions of Out) and
 * Bias's rank (dBias is [N] or [1, N]). */
static const nb_op_def op_fc = {
    .name = "fc",
    .batch = nb_batch_fc,
    .doc = "Fully connected: act(flatten(Input, in_num_col_dims) @ W + Bias), activation \"\"|relu|sigmoid|tanh",
    .inputs = {{"Input", 0}, {"W", 0}, {"Bias", NB_SLOT_OPTIONAL}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("in_num_col_dims", 1), NB_ADEF_STRING("activation", "")},
    .infer = infer_fc,
    .params_size = sizeof(nb_fc_params),
    .params = params_fc,
    .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 2),
    .grad_uses_outputs = 1u << 0,
    .vjp = nb_vjp_fc,
    .jvp = nb_jvp_fc,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- matmul_sgd -------------------------------------------------------------- */

/* ParamOut = Param - LearningRate * alpha * op(X) @ op(Y), both factors
 * matrices: an sgd update whose gradient is that product, taken as one GEMM
 * that adds onto Param, so the gradient is never stored and read back. The
 * executor forms it (src/exec/fold.c) from a matmul and the sgd that is its
 * only reader. */
static nb_status infer_matmul_sgd(nb_op_ctx *ctx)
{
    nb_status st = infer_matmul(ctx);
    if (st) return st;
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *y = nb_in_info(ctx, 1, 0), *p = nb_in_info(ctx, 2, 0);
    const nb_var_info *lr = nb_in_info(ctx, 3, 0);
    nb_var_info *out = nb_out_info(ctx, 0, 0);
    char ps[NB_SHAPE_STR_MAX], os[NB_SHAPE_STR_MAX];
    if (x->ndim != 2 || y->ndim != 2)
        return nb_error(NB_ERR_SHAPE, "%s: X and Y must be matrices; they have %d and %d dims", ctx->label, x->ndim,
                        y->ndim);
    bool dims_differ = false;
    for (int d = 0; p->ndim == 2 && d < 2; d++)
        dims_differ |= p->shape[d] != out->shape[d] && p->shape[d] >= 0 && out->shape[d] >= 0;
    if (p->dtype != out->dtype || p->ndim != 2 || dims_differ)
        return nb_error(p->dtype != out->dtype ? NB_ERR_DTYPE : NB_ERR_SHAPE,
                        "%s: Param is %s %s but the product is %s %s", ctx->label, nb_dtype_name(p->dtype),
                        nb_shape_str(ps, sizeof ps, p->ndim, p->shape), nb_dtype_name(out->dtype),
                        nb_shape_str(os, sizeof os, out->ndim, out->shape));
    if (!is_float(lr->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: LearningRate has dtype %s", ctx->label, nb_dtype_name(lr->dtype));
    *out = *p;
    return NB_OK;
}

static const nb_op_def op_matmul_sgd = {
    .name = "matmul_sgd",
    .doc = "ParamOut = Param - LearningRate * alpha * op(X) @ op(Y) for matrices: sgd on a product, as one GEMM",
    .inputs = {{"X", 0}, {"Y", 0}, {"Param", 0}, {"LearningRate", 0}},
    .outputs = {{"ParamOut", 0}},
    .attrs = {NB_ADEF_BOOL("transpose_x", false), NB_ADEF_BOOL("transpose_y", false), NB_ADEF_FLOAT("alpha", 1.0)},
    .infer = infer_matmul_sgd,
    .params_size = sizeof(nb_matmul_params),
    .params = params_matmul,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

const nb_op_def *const nb_ops_linalg[] = {&op_matmul, &op_matmul_sgd, &op_fc, NULL};
