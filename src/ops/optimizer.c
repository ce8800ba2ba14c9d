/* The optimiser family: parameter updates (sgd, momentum, adam, adamw,
 * rmsprop, adagrad) and the learning-rate schedule. Kernels are in
 * src/kernels/cpu/optimizer.c; nb_minimize (src/optim) appends these ops.
 *
 * An update op reads a parameter, its gradient, its state and a one-element
 * LearningRate, and writes the new parameter and state. In programs every
 * *Out output names the same var as its input, so the op updates them in
 * place (hence NB_OP_STATEFUL); none is differentiable. */
#include <math.h>
#include <stddef.h>
#include "families.h"
#include "kernels/cpu/optimizer.h"

/* ---- shared validation ------------------------------------------------------------ */

static bool dims_match(const nb_var_info *a, const nb_var_info *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] && a->shape[i] != -1 && b->shape[i] != -1) return false;
    return true;
}

/* Input `slot` must have Param's dtype and shape (dims may be -1 at build time). */
static nb_status check_like_param(nb_op_ctx *ctx, int slot)
{
    const nb_var_info *p = nb_in_info(ctx, 0, 0), *x = nb_in_info(ctx, slot, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (x->dtype != p->dtype || !dims_match(x, p))
        return nb_error(x->dtype != p->dtype ? NB_ERR_DTYPE : NB_ERR_SHAPE, "%s: %s is %s %s but Param is %s %s",
                        ctx->label, ctx->def->inputs[slot].name, nb_dtype_name(x->dtype),
                        nb_shape_str(a, sizeof a, x->ndim, x->shape), nb_dtype_name(p->dtype),
                        nb_shape_str(b, sizeof b, p->ndim, p->shape));
    return NB_OK;
}

/* Input `slot` must be a float holding one element ([1] or 0-d). */
static nb_status check_scalar(nb_op_ctx *ctx, int slot, bool need_float)
{
    const nb_var_info *x = nb_in_info(ctx, slot, 0);
    char s[NB_SHAPE_STR_MAX];
    const char *name = ctx->def->inputs[slot].name;
    if (need_float ? !nb_dtype_is_float(x->dtype)
                   : !(nb_dtype_is_float(x->dtype) || x->dtype == NB_I32 || x->dtype == NB_I64))
        return nb_error(NB_ERR_DTYPE, "%s: %s is %s; it must be %s", ctx->label, name, nb_dtype_name(x->dtype),
                        need_float ? "float32 or float64" : "float32, float64, int32 or int64");
    for (int i = 0; i < x->ndim; i++)
        if (x->shape[i] != 1 && x->shape[i] != -1)
            return nb_error(NB_ERR_SHAPE, "%s: %s has shape %s but must hold exactly one element", ctx->label, name,
                            nb_shape_str(s, sizeof s, x->ndim, x->shape));
    return NB_OK;
}

/* Param float; Grad and the `n_state` state inputs after it shaped like
 * Param; LearningRate at `lr_slot` a float scalar. Output k takes the info
 * of input `out_src[k]`. */
static nb_status infer_update(nb_op_ctx *ctx, int n_like, const int *like, int lr_slot, int n_out, const int *out_src)
{
    const nb_var_info *p = nb_in_info(ctx, 0, 0);
    if (p->dtype != NB_F32 && p->dtype != NB_F64)
        return nb_error(NB_ERR_DTYPE, "%s: Param is %s; optimisers update float32 or float64 parameters", ctx->label,
                        nb_dtype_name(p->dtype));
    nb_status st = NB_OK;
    for (int i = 0; i < n_like && !st; i++)
        if (nb_has_in(ctx, like[i])) st = check_like_param(ctx, like[i]);
    if (!st) st = check_scalar(ctx, lr_slot, true);
    for (int k = 0; k < n_out && !st; k++) *nb_out_info(ctx, k, 0) = *nb_in_info(ctx, out_src[k], 0);
    return st;
}

/* A float attribute in [lo, hi] (hi_open: [lo, hi)). */
static nb_status check_range(nb_op_ctx *ctx, const char *name, double lo, double hi, bool hi_open)
{
    double v = nb_attr_float(ctx, name);
    if (!(v >= lo && (hi_open ? v < hi : v <= hi)))
        return nb_error(NB_ERR_ARG, "%s: attribute '%s' is %g; it must be in [%g, %g%s", ctx->label, name, v, lo, hi,
                        hi_open ? ")" : "]");
    return NB_OK;
}

/* The updates' parameters: whichever of the family's attributes the op has. */
static nb_status update_params(const nb_op_ctx *ctx, void *params)
{
    nb_update_params *p = params;
    static const struct {
        const char *name;
        size_t at;
    } fields[] = {{"mu", offsetof(nb_update_params, mu)},
                  {"beta1", offsetof(nb_update_params, beta1)},
                  {"beta2", offsetof(nb_update_params, beta2)},
                  {"epsilon", offsetof(nb_update_params, epsilon)},
                  {"weight_decay", offsetof(nb_update_params, weight_decay)},
                  {"rho", offsetof(nb_update_params, rho)},
                  {"momentum", offsetof(nb_update_params, momentum)}};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        int a = nb_op_attr_index(ctx->def, fields[i].name);
        if (a >= 0) *(double *)((char *)p + fields[i].at) = ctx->attrs[a].f;
    }
    int nest = nb_op_attr_index(ctx->def, "use_nesterov");
    p->use_nesterov = nest >= 0 && ctx->attrs[nest].b;
    return NB_OK;
}

/* ---- sgd --------------------------------------------------------------------------------- */

static nb_status infer_sgd(nb_op_ctx *ctx) { return infer_update(ctx, 1, (const int[]){1}, 2, 1, (const int[]){0}); }

static const nb_op_def op_sgd = {
    .name = "sgd",
    .doc = "ParamOut = Param - LearningRate * Grad.",
    .inputs = {{"Param", 0}, {"Grad", 0}, {"LearningRate", 0}},
    .outputs = {{"ParamOut", 0}},
    .infer = infer_sgd,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

/* ---- momentum ----------------------------------------------------------------------------- */

static nb_status infer_momentum(nb_op_ctx *ctx)
{
    nb_status st = check_range(ctx, "mu", 0, INFINITY, true);
    if (!st && nb_attr_bool(ctx, "use_nesterov") && nb_attr_float(ctx, "mu") == 0)
        st = nb_error(NB_ERR_ARG, "%s: Nesterov momentum needs mu > 0", ctx->label);
    if (st) return st;
    return infer_update(ctx, 2, (const int[]){1, 2}, 3, 2, (const int[]){0, 2});
}

static const nb_op_def op_momentum = {
    .name = "momentum",
    .doc = "torch.optim.SGD with momentum: v = mu*v + g; p -= lr*(g + mu*v) if use_nesterov else lr*v.",
    .inputs = {{"Param", 0}, {"Grad", 0}, {"Velocity", 0}, {"LearningRate", 0}},
    .outputs = {{"ParamOut", 0}, {"VelocityOut", 0}},
    .attrs = {NB_ADEF_FLOAT("mu", 0.9), NB_ADEF_BOOL("use_nesterov", false)},
    .infer = infer_momentum,
    .params_size = sizeof(nb_update_params),
    .params = update_params,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

/* ---- adam, adamw -------------------------------------------------------------------------- */

static nb_status infer_adam(nb_op_ctx *ctx)
{
    nb_status st = check_range(ctx, "beta1", 0, 1, true);
    if (!st) st = check_range(ctx, "beta2", 0, 1, true);
    if (!st) st = check_range(ctx, "epsilon", 0, INFINITY, true);
    if (!st) st = check_range(ctx, "weight_decay", 0, INFINITY, true);
    if (!st) st = check_scalar(ctx, 5, true);
    if (!st) st = check_scalar(ctx, 6, true);
    if (st) return st;
    return infer_update(ctx, 3, (const int[]){1, 2, 3}, 4, 5, (const int[]){0, 2, 3, 5, 6});
}

#define ADAM_SLOTS                                                                                   \
    .inputs = {{"Param", 0}, {"Grad", 0}, {"Moment1", 0}, {"Moment2", 0}, {"LearningRate", 0}, {"Beta1Pow", 0}, {"Beta2Pow", 0}}, \
    .outputs = {{"ParamOut", 0}, {"Moment1Out", 0}, {"Moment2Out", 0}, {"Beta1PowOut", 0}, {"Beta2PowOut", 0}}

static const nb_op_def op_adam = {
    .name = "adam",
    .doc = "torch.optim.Adam (AdamW's decoupled decay if weight_decay > 0); Beta1Pow/Beta2Pow hold beta^t.",
    ADAM_SLOTS,
    .attrs = {NB_ADEF_FLOAT("beta1", 0.9), NB_ADEF_FLOAT("beta2", 0.999), NB_ADEF_FLOAT("epsilon", 1e-8),
              NB_ADEF_FLOAT("weight_decay", 0.0)},
    .infer = infer_adam,
    .params_size = sizeof(nb_update_params),
    .params = update_params,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

static const nb_op_def op_adamw = {
    .name = "adamw",
    .doc = "torch.optim.AdamW: p -= lr*weight_decay*p, then the Adam step.",
    ADAM_SLOTS,
    .attrs = {NB_ADEF_FLOAT("beta1", 0.9), NB_ADEF_FLOAT("beta2", 0.999), NB_ADEF_FLOAT("epsilon", 1e-8),
              NB_ADEF_FLOAT("weight_decay", 0.01)},
    .infer = infer_adam,
    .params_size = sizeof(nb_update_params),
    .params = update_params,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

/* ---- rmsprop ------------------------------------------------------------------------------ */

/* Outputs are matched to slots by position, so MeanGradOut can only follow
 * MomentOut: a centered rmsprop carries a Moment buffer even without
 * momentum (with momentum 0 it holds g/avg and the step is unchanged). */
static nb_status infer_rmsprop(nb_op_ctx *ctx)
{
    nb_status st = check_range(ctx, "rho", 0, 1, false);
    if (!st) st = check_range(ctx, "epsilon", 0, INFINITY, true);
    if (!st) st = check_range(ctx, "momentum", 0, INFINITY, true);
    if (st) return st;
    bool has_mom = nb_has_in(ctx, 4), has_mg = nb_has_in(ctx, 5);
    if (nb_attr_float(ctx, "momentum") != 0 && !has_mom)
        return nb_error(NB_ERR_ARG, "%s: momentum is %g but no Moment input is given", ctx->label,
                        nb_attr_float(ctx, "momentum"));
    if (nb_attr_bool(ctx, "centered") != has_mg)
        return nb_error(NB_ERR_ARG, "%s: centered is %s but MeanGrad is %s", ctx->label,
                        nb_attr_bool(ctx, "centered") ? "true" : "false", has_mg ? "given" : "absent");
    if (has_mg && !has_mom)
        return nb_error(NB_ERR_ARG, "%s: a centered rmsprop needs a Moment input too (MeanGradOut follows MomentOut)",
                        ctx->label);
    int n_out = 2 + has_mom + has_mg;
    if (nb_out_count(ctx, 2) != has_mom || nb_out_count(ctx, 3) != has_mg)
        return nb_error(NB_ERR_ARG, "%s: %d outputs given but its inputs need %d (ParamOut, MeanSquareOut%s%s)",
                        ctx->label, ctx->out_begin[NB_MAX_SLOTS], n_out, has_mom ? ", MomentOut" : "",
                        has_mg ? ", MeanGradOut" : "");
    return infer_update(ctx, 4, (const int[]){1, 2, 4, 5}, 3, n_out, (const int[]){0, 2, 4, 5});
}

static const nb_op_def op_rmsprop = {
    .name = "rmsprop",
    .doc = "torch.optim.RMSprop (rho is torch's alpha); Moment for momentum, MeanGrad when centered.",
    .inputs = {{"Param", 0},
               {"Grad", 0},
               {"MeanSquare", 0},
               {"LearningRate", 0},
               {"Moment", NB_SLOT_OPTIONAL},
               {"MeanGrad", NB_SLOT_OPTIONAL}},
    .outputs = {{"ParamOut", 0},
                {"MeanSquareOut", 0},
                {"MomentOut", NB_SLOT_OPTIONAL},
                {"MeanGradOut", NB_SLOT_OPTIONAL}},
    .attrs = {NB_ADEF_FLOAT("rho", 0.99), NB_ADEF_FLOAT("epsilon", 1e-8), NB_ADEF_FLOAT("momentum", 0.0),
              NB_ADEF_BOOL("centered", false)},
    .infer = infer_rmsprop,
    .params_size = sizeof(nb_update_params),
    .params = update_params,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

/* ---- adagrad ------------------------------------------------------------------------------ */

static nb_status infer_adagrad(nb_op_ctx *ctx)
{
    nb_status st = check_range(ctx, "epsilon", 0, INFINITY, true);
    if (st) return st;
    return infer_update(ctx, 2, (const int[]){1, 2}, 3, 2, (const int[]){0, 2});
}

static const nb_op_def op_adagrad = {
    .name = "adagrad",
    .doc = "torch.optim.Adagrad: Moment += g^2; p -= lr * g / (sqrt(Moment) + epsilon).",
    .inputs = {{"Param", 0}, {"Grad", 0}, {"Moment", 0}, {"LearningRate", 0}},
    .outputs = {{"ParamOut", 0}, {"MomentOut", 0}},
    .attrs = {NB_ADEF_FLOAT("epsilon", 1e-10)},
    .infer = infer_adagrad,
    .params_size = sizeof(nb_update_params),
    .params = update_params,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

/* ---- lr_schedule -------------------------------------------------------------------------- */

static nb_status infer_lr_schedule(nb_op_ctx *ctx)
{
    nb_status st = check_scalar(ctx, 0, false);
    if (st) return st;
    const char *kind = nb_attr_string(ctx, "kind");
    nb_lr_kind k = nb_lr_kind_parse(kind);
    double base = nb_attr_float(ctx, "base_lr"), gamma = nb_attr_float(ctx, "gamma");
    double min_lr = nb_attr_float(ctx, "min_lr");
    int64_t step_size = nb_attr_int(ctx, "step_size"), total = nb_attr_int(ctx, "total_steps");
    int64_t warmup = nb_attr_int(ctx, "warmup_steps"), dt = nb_attr_int(ctx, "dtype");
    if (k == NB_LR_BAD)
        return nb_error(NB_ERR_ARG, "%s: kind \"%s\" is not one of constant, step, exponential, cosine", ctx->label,
                        kind);
    if (!(isfinite(base) && base >= 0))
        return nb_error(NB_ERR_ARG, "%s: base_lr is %g; it must be finite and >= 0", ctx->label, base);
    if ((k == NB_LR_STEP || k == NB_LR_EXPONENTIAL) && !(isfinite(gamma) && gamma > 0))
        return nb_error(NB_ERR_ARG, "%s: gamma is %g; a %s schedule needs a finite gamma > 0", ctx->label, gamma, kind);
    if (k == NB_LR_STEP && step_size < 1)
        return nb_error(NB_ERR_ARG, "%s: step_size is %lld; a step schedule needs step_size >= 1", ctx->label,
                        (long long)step_size);
    if (k == NB_LR_COSINE && total < 1)
        return nb_error(NB_ERR_ARG, "%s: total_steps is %lld; a cosine schedule needs total_steps >= 1", ctx->label,
                        (long long)total);
    if (k == NB_LR_COSINE && !(isfinite(min_lr) && min_lr >= 0))
        return nb_error(NB_ERR_ARG, "%s: min_lr is %g; it must be finite and >= 0", ctx->label, min_lr);
    if (warmup < 0)
        return nb_error(NB_ERR_ARG, "%s: warmup_steps is %lld; it must be >= 0", ctx->label, (long long)warmup);
    if (dt != NB_F32 && dt != NB_F64)
        return nb_error(NB_ERR_DTYPE, "%s: dtype is %lld; a learning rate is float32 (%d) or float64 (%d)", ctx->label,
                        (long long)dt, NB_F32, NB_F64);
    *nb_out_info(ctx, 0, 0) = (nb_var_info){.dtype = (nb_dtype)dt, .ndim = 1, .shape = {1}};
    return NB_OK;
}

static nb_status lr_schedule_params(const nb_op_ctx *ctx, void *params)
{
    *(nb_lr_params *)params = (nb_lr_params){
        .kind = nb_lr_kind_parse(nb_attr_string(ctx, "kind")),
        .base_lr = nb_attr_float(ctx, "base_lr"),
        .gamma = nb_attr_float(ctx, "gamma"),
        .min_lr = nb_attr_float(ctx, "min_lr"),
        .step_size = nb_attr_int(ctx, "step_size"),
        .total_steps = nb_attr_int(ctx, "total_steps"),
        .warmup_steps = nb_attr_int(ctx, "warmup_steps"),
    };
    return NB_OK;
}

static const nb_op_def op_lr_schedule = {
    .name = "lr_schedule",
    .doc = "LearningRate of update number Step (from 1): linear warm-up, then constant/step/exponential/cosine decay.",
    .inputs = {{"Step", NB_SLOT_NO_GRAD}},
    .outputs = {{"LearningRate", 0}},
    .attrs = {NB_ADEF_STRING("kind", "constant"), NB_ADEF_REQUIRED("base_lr", NB_ATTR_FLOAT),
              NB_ADEF_INT("step_size", 1), NB_ADEF_FLOAT("gamma", 0.1), NB_ADEF_INT("total_steps", 0),
              NB_ADEF_FLOAT("min_lr", 0.0), NB_ADEF_INT("warmup_steps", 0), NB_ADEF_INT("dtype", NB_F32)},
    .infer = infer_lr_schedule,
    .params_size = sizeof(nb_lr_params),
    .params = lr_schedule_params,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};

const nb_op_def *const nb_ops_optimizer[] = {
    &op_sgd, &op_momentum, &op_adam, &op_adamw, &op_rmsprop, &op_adagrad, &op_lr_schedule, NULL,
};
