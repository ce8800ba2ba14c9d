/* Creation and state ops: constant fills, copies, random initialisers and
 * the step counter. Kernels are in src/kernels/cpu/creation.c; they read the
 * parameter structs (kernels/params/creation.h) that the params functions
 * here fill from the attributes, which inference has checked. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include "families.h"
#include "batch_rules.h"
#include "creation_grad.h"
#include "kernels/params/creation.h"

/* ---- shared validation ------------------------------------------------------ */

/* Out's shape from the "shape" attribute. Every entry must be >= 0, except
 * the one at `free_dim` (-1 for none), which the caller overwrites. */
static nb_status shape_attr(nb_op_ctx *ctx, nb_var_info *o, int free_dim)
{
    const nb_attr_value *a = nb_attr_get(ctx, "shape");
    char s[NB_SHAPE_STR_MAX];
    if (a->n > NB_MAX_DIMS)
        return nb_error(NB_ERR_SHAPE, "%s: attribute 'shape' %s has %d dimensions (at most %d are supported)",
                        ctx->label, nb_shape_str(s, sizeof s, a->n, a->ints), a->n, NB_MAX_DIMS);
    for (int i = 0; i < a->n; i++)
        if (i != free_dim && a->ints[i] < 0)
            return nb_error(NB_ERR_SHAPE, "%s: attribute 'shape' %s has a negative dimension", ctx->label,
                            nb_shape_str(s, sizeof s, a->n, a->ints));
    o->ndim = a->n;
    for (int i = 0; i < a->n; i++) o->shape[i] = a->ints[i];
    return NB_OK;
}

/* The "dtype" attribute; -1 means `like` (pass -1 where no default applies). */
static nb_status dtype_attr(nb_op_ctx *ctx, int like, nb_dtype *out)
{
    int64_t d = nb_attr_int(ctx, "dtype");
    if (d == -1 && like >= 0) d = like;
    if (d < 0 || d >= NB_DTYPE_COUNT)
        return nb_error(NB_ERR_DTYPE, "%s: attribute 'dtype' is %lld, which is not a dtype", ctx->label, (long long)d);
    *out = (nb_dtype)d;
    return NB_OK;
}

/* A fill value must be representable in the output dtype (integers are
 * truncated towards zero, as a cast would). */
static nb_status check_fill_value(nb_op_ctx *ctx, nb_dtype dt, double v)
{
    bool ok = true;
    switch (dt) {
    case NB_F32: ok = !isfinite(v) || fabs(v) <= FLT_MAX; break;
    case NB_I32: ok = isfinite(v) && v > -2147483649.0 && v < 2147483648.0; break;
    case NB_I64: ok = isfinite(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0; break;
    case NB_U8: ok = isfinite(v) && v > -1.0 && v < 256.0; break;
    default: break;
    }
    if (!ok) return nb_error(NB_ERR_ARG, "%s: value %g does not fit in %s", ctx->label, v, nb_dtype_name(dt));
    return NB_OK;
}

/* ---- fills -------------------------------------------------------------------- */

static nb_status fill_constant_params(const nb_op_ctx *ctx, void *params)
{
    ((nb_fill_constant_params *)params)->value = nb_attr_float(ctx, "value");
    return NB_OK;
}

static nb_status infer_fill_constant(nb_op_ctx *ctx)
{
    nb_var_info *o = nb_out_info(ctx, 0, 0);
    nb_status st = shape_attr(ctx, o, -1);
    if (!st) st = dtype_attr(ctx, -1, &o->dtype);
    if (!st) st = check_fill_value(ctx, o->dtype, nb_attr_float(ctx, "value"));
    return st;
}

static const nb_op_def op_fill_constant = {
    .name = "fill_constant",
    .doc = "Out: a tensor of the given shape and dtype with every element equal to value.",
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS), NB_ADEF_INT("dtype", NB_F32), NB_ADEF_FLOAT("value", 0.0)},
    .infer = infer_fill_constant,
    .params_size = sizeof(nb_fill_constant_params),
    .params = fill_constant_params,
    .flags = NB_OP_NOT_DIFFERENTIABLE | NB_OP_WRITES_ALL,
};

/* assign_value: a constant whose values the program holds, so that nothing
 * needs to feed it. Floats keep float64 exactly (fp_values); integers and
 * bools go in int_values, int64 exactly. */
static nb_status infer_assign_value(nb_op_ctx *ctx)
{
    nb_var_info *o = nb_out_info(ctx, 0, 0);
    nb_status st = shape_attr(ctx, o, -1);
    if (!st) st = dtype_attr(ctx, -1, &o->dtype);
    if (st) return st;
    for (int d = 0; d < o->ndim; d++)
        if (o->shape[d] < 0)
            return nb_error(NB_ERR_SHAPE, "%s: a constant needs a known shape; dim %d is %lld", ctx->label, d,
                            (long long)o->shape[d]);
    bool fp = nb_dtype_is_float(o->dtype);
    const nb_attr_value *vals = nb_attr_get(ctx, fp ? "fp_values" : "int_values");
    int64_t n = nb_shape_numel(o->ndim, o->shape);
    char s[NB_SHAPE_STR_MAX];
    if (vals->n != n)
        return nb_error(NB_ERR_ARG, "%s: a %s constant of shape %s has %lld elements, but %s holds %d", ctx->label,
                        nb_dtype_name(o->dtype), nb_shape_str(s, sizeof s, o->ndim, o->shape), (long long)n,
                        fp ? "fp_values" : "int_values", vals->n);
    return NB_OK;
}

static nb_status assign_value_params(const nb_op_ctx *ctx, void *params)
{
    nb_assign_value_params *p = params;
    const nb_attr_value *fp = nb_attr_get(ctx, "fp_values"), *ints = nb_attr_get(ctx, "int_values");
    p->n = fp->n ? fp->n : ints->n;
    p->fp_values = fp->floats;
    p->int_values = ints->ints;
    return NB_OK;
}

static const nb_op_def op_assign_value = {
    .name = "assign_value",
    .doc = "Out: a constant of the given shape and dtype whose values the program holds (fp_values or int_values)",
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS), NB_ADEF_INT("dtype", NB_F32), NB_ADEF_FLOATS_EMPTY("fp_values"),
              NB_ADEF_INTS_EMPTY("int_values")},
    .infer = infer_assign_value,
    .params_size = sizeof(nb_assign_value_params),
    .params = assign_value_params,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};

static nb_status infer_fill_constant_batch_size_like(nb_op_ctx *ctx)
{
    const nb_var_info *in = nb_in_info(ctx, 0, 0);
    nb_var_info *o = nb_out_info(ctx, 0, 0);
    const nb_attr_value *shape = nb_attr_get(ctx, "shape");
    int64_t in_idx = nb_attr_int(ctx, "input_dim_idx"), out_idx = nb_attr_int(ctx, "output_dim_idx");
    char s[NB_SHAPE_STR_MAX];
    if (in_idx < 0 || in_idx >= in->ndim)
        return nb_error(NB_ERR_ARG, "%s: input_dim_idx %lld is out of range for Input of shape %s", ctx->label,
                        (long long)in_idx, nb_shape_str(s, sizeof s, in->ndim, in->shape));
    if (out_idx < 0 || out_idx >= shape->n)
        return nb_error(NB_ERR_ARG, "%s: output_dim_idx %lld is out of range for attribute 'shape' %s", ctx->label,
                        (long long)out_idx, nb_shape_str(s, sizeof s, shape->n, shape->ints));
    nb_status st = shape_attr(ctx, o, (int)out_idx);
    if (st) return st;
    /* Carries -1 (an unknown batch size) through at build time. */
    o->shape[out_idx] = in->shape[in_idx];
    if ((st = dtype_attr(ctx, -1, &o->dtype))) return st;
    return check_fill_value(ctx, o->dtype, nb_attr_float(ctx, "value"));
}

static const nb_op_def op_fill_constant_batch_size_like = {
    .name = "fill_constant_batch_size_like",
    .batch = nb_batch_shape_like,
    .doc = "Out: like fill_constant, but dim output_dim_idx of Out takes dim input_dim_idx of Input.",
    .inputs = {{"Input", NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS), NB_ADEF_INT("dtype", NB_F32), NB_ADEF_FLOAT("value", 0.0),
              NB_ADEF_INT("input_dim_idx", 0), NB_ADEF_INT("output_dim_idx", 0)},
    .infer = infer_fill_constant_batch_size_like,
    .params_size = sizeof(nb_fill_constant_params),
    .params = fill_constant_params,
    .flags = NB_OP_NOT_DIFFERENTIABLE | NB_OP_WRITES_ALL,
};

/* fill_zeros_like, ones_like: X's shape, and X's dtype unless told. */
static nb_status infer_fill_like(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    nb_var_info *o = nb_out_info(ctx, 0, 0);
    *o = *x;
    return dtype_attr(ctx, x->dtype, &o->dtype);
}

static const nb_op_def op_fill_zeros_like = {
    .name = "fill_zeros_like",
    .batch = nb_batch_unary,
    .doc = "Out: zeros with X's shape, and X's dtype unless dtype says otherwise.",
    .inputs = {{"X", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("dtype", -1)},
    .infer = infer_fill_like,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};

static const nb_op_def op_ones_like = {
    .name = "ones_like",
    .batch = nb_batch_unary,
    .doc = "Out: ones with X's shape, and X's dtype unless dtype says otherwise.",
    .inputs = {{"X", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("dtype", -1)},
    .infer = infer_fill_like,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};

/* ---- assign -------------------------------------------------------------------- */

static nb_status infer_same(nb_op_ctx *ctx)
{
    *nb_out_info(ctx, 0, 0) = *nb_in_info(ctx, 0, 0);
    return NB_OK;
}

/* Identity: its gradient passes dOut through and needs no forward value. */
static const nb_op_def op_assign = {
    .name = "assign",
    .batch = nb_batch_unary,
    .doc = "Out = X (a copy, any dtype).",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .infer = infer_same,
    .vjp = nb_assign_vjp,
    .jvp = nb_assign_jvp,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- random initialisers --------------------------------------------------------- */

static nb_status infer_random(nb_op_ctx *ctx)
{
    nb_var_info *o = nb_out_info(ctx, 0, 0);
    nb_status st = shape_attr(ctx, o, -1);
    if (!st) st = dtype_attr(ctx, -1, &o->dtype);
    if (st) return st;
    if (!nb_dtype_is_float(o->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: dtype is %s but random values are float32 or float64", ctx->label,
                        nb_dtype_name(o->dtype));
    return NB_OK;
}

static nb_status infer_uniform_random(nb_op_ctx *ctx)
{
    nb_status st = infer_random(ctx);
    if (st) return st;
    double lo = nb_attr_float(ctx, "min"), hi = nb_attr_float(ctx, "max");
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(hi - lo) || lo > hi)
        return nb_error(NB_ERR_ARG, "%s: min %g and max %g do not make a finite range (min <= max)", ctx->label, lo,
                        hi);
    return NB_OK;
}

static nb_status uniform_random_params(const nb_op_ctx *ctx, void *params)
{
    nb_uniform_random_params *p = params;
    p->min = nb_attr_float(ctx, "min");
    p->max = nb_attr_float(ctx, "max");
    return NB_OK;
}

static nb_status infer_gaussian_random(nb_op_ctx *ctx)
{
    nb_status st = infer_random(ctx);
    if (st) return st;
    double mean = nb_attr_float(ctx, "mean"), std = nb_attr_float(ctx, "std");
    if (!isfinite(mean) || !isfinite(std) || std < 0)
        return nb_error(NB_ERR_ARG, "%s: mean %g and std %g must be finite, with std >= 0", ctx->label, mean, std);
    return NB_OK;
}

/* gaussian_random and truncated_gaussian_random. */
static nb_status gaussian_random_params(const nb_op_ctx *ctx, void *params)
{
    nb_gaussian_random_params *p = params;
    p->mean = nb_attr_float(ctx, "mean");
    p->std = nb_attr_float(ctx, "std");
    return NB_OK;
}

/* "seed" is read by the executor (and nb_op_run) to seed the generator; the
 * kernels themselves only ever draw from it (nb_kernel_ctx.rng). */
static const nb_op_def op_uniform_random = {
    .name = "uniform_random",
    .doc = "Out: values drawn uniformly from [min, max).",
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS), NB_ADEF_INT("dtype", NB_F32), NB_ADEF_FLOAT("min", -1.0),
              NB_ADEF_FLOAT("max", 1.0), NB_ADEF_INT("seed", 0)},
    .infer = infer_uniform_random,
    .params_size = sizeof(nb_uniform_random_params),
    .params = uniform_random_params,
    .flags = NB_OP_RANDOM | NB_OP_NOT_DIFFERENTIABLE | NB_OP_WRITES_ALL,
};

static const nb_op_def op_gaussian_random = {
    .name = "gaussian_random",
    .doc = "Out: values drawn from a normal distribution N(mean, std^2).",
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS), NB_ADEF_INT("dtype", NB_F32), NB_ADEF_FLOAT("mean", 0.0),
              NB_ADEF_FLOAT("std", 1.0), NB_ADEF_INT("seed", 0)},
    .infer = infer_gaussian_random,
    .params_size = sizeof(nb_gaussian_random_params),
    .params = gaussian_random_params,
    .flags = NB_OP_RANDOM | NB_OP_NOT_DIFFERENTIABLE | NB_OP_WRITES_ALL,
};

static const nb_op_def op_truncated_gaussian_random = {
    .name = "truncated_gaussian_random",
    .doc = "Out: normal values N(mean, std^2), redrawn until within 2 std of the mean.",
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS), NB_ADEF_INT("dtype", NB_F32), NB_ADEF_FLOAT("mean", 0.0),
              NB_ADEF_FLOAT("std", 1.0), NB_ADEF_INT("seed", 0)},
    .infer = infer_gaussian_random,
    .params_size = sizeof(nb_gaussian_random_params),
    .params = gaussian_random_params,
    .flags = NB_OP_RANDOM | NB_OP_NOT_DIFFERENTIABLE,
};

/* ---- increment ------------------------------------------------------------------- */

static nb_status infer_increment(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    char s[NB_SHAPE_STR_MAX];
    if (x->dtype != NB_F32 && x->dtype != NB_F64 && x->dtype != NB_I32 && x->dtype != NB_I64)
        return nb_error(NB_ERR_DTYPE, "%s: X is %s; increment takes float32, float64, int32 or int64", ctx->label,
                        nb_dtype_name(x->dtype));
    /* An unknown (-1) dim may still turn out to be 1; any known dim other
     * than 1 cannot. */
    for (int i = 0; i < x->ndim; i++)
        if (x->shape[i] != 1 && x->shape[i] != -1)
            return nb_error(NB_ERR_SHAPE, "%s: X has shape %s but must hold exactly one element", ctx->label,
                            nb_shape_str(s, sizeof s, x->ndim, x->shape));
    double step = nb_attr_float(ctx, "step");
    if (!nb_dtype_is_float(x->dtype) && (step != trunc(step) || check_fill_value(ctx, x->dtype, step)))
        return nb_error(NB_ERR_ARG, "%s: step %g is not a whole number that fits X's dtype %s", ctx->label, step,
                        nb_dtype_name(x->dtype));
    *nb_out_info(ctx, 0, 0) = *x;
    return NB_OK;
}

static nb_status increment_params(const nb_op_ctx *ctx, void *params)
{
    ((nb_increment_params *)params)->step = nb_attr_float(ctx, "step");
    return NB_OK;
}

static const nb_op_def op_increment = {
    .name = "increment",
    .doc = "Out = X + step for a one-element counter X; Out may be X itself.",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_FLOAT("step", 1.0)},
    .infer = infer_increment,
    .params_size = sizeof(nb_increment_params),
    .params = increment_params,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

const nb_op_def *const nb_ops_creation[] = {
    &op_fill_constant,
    &op_assign_value,
    &op_fill_constant_batch_size_like,
    &op_fill_zeros_like,
    &op_ones_like,
    &op_assign,
    &op_uniform_random,
    &op_gaussian_random,
    &op_truncated_gaussian_random,
    &op_increment,
    NULL,
};
