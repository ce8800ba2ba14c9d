/* The elementwise family's CPU kernels: one per line of
 * nabla/elementwise_ops.h, plus those written out in full. Each hands its
 * tensors and the op's parameters to the loops of elementwise.c, unary.c
 * and cast.c. */
#include "elementwise.h"
#include "../kernels.h"

#define BINARY_KERNEL(name, dt)                                                                 \
    static nb_status run_##name(const nb_kernel_ctx *k)                                        \
    {                                                                                           \
        return nb_ew_binary(NB_EW_##name, nb_kin(k, 0, 0), nb_kin(k, 1, 0), nb_kout(k, 0, 0), k->label); \
    }                                                                                           \
    static bool pw_##name(const void *params, nb_dtype t, nb_pointwise *f)                      \
    {                                                                                           \
        (void)params;                                                                           \
        return nb_ew_binary_pointwise(NB_EW_##name, t, f);                                      \
    }                                                                                           \
    static const nb_kernel_def kernel_##name = {.op = #name, .device = NB_DEVICE_CPU, .dtypes = NB_DT_##dt, \
                                                .provider = "nabla", .run = run_##name, .pointwise = pw_##name};
#define UNARY_KERNEL(name, dt)                                                                      \
    static nb_status run_##name(const nb_kernel_ctx *k)                                            \
    {                                                                                               \
        return nb_ew_unary(NB_EW_##name, nb_kin(k, 0, 0), nb_kout(k, 0, 0), k->params, k->label);   \
    }                                                                                               \
    static bool pw_##name(const void *params, nb_dtype t, nb_pointwise *f)                          \
    {                                                                                               \
        return nb_ew_unary_pointwise(NB_EW_##name, t, params, f);                                   \
    }                                                                                               \
    static const nb_kernel_def kernel_##name = {.op = #name, .device = NB_DEVICE_CPU, .dtypes = NB_DT_##dt, \
                                                .provider = "nabla", .run = run_##name, .pointwise = pw_##name};

#define NB_BINARY(name, dtypes, ...) BINARY_KERNEL(name, dtypes)
#define NB_UNARY(name, dtypes, ...) UNARY_KERNEL(name, dtypes)
#define NB_UNARY_A1(name, dtypes, ...) UNARY_KERNEL(name, dtypes)
#define NB_UNARY_A2(name, dtypes, ...) UNARY_KERNEL(name, dtypes)
#include "nabla/elementwise_ops.h"

static nb_status run_gelu(const nb_kernel_ctx *k)
{
    const nb_ew_params *p = k->params;
    return nb_ew_unary(p->approximate ? NB_EW_gelu_tanh : NB_EW_gelu, nb_kin(k, 0, 0), nb_kout(k, 0, 0), p, k->label);
}

static nb_status run_gelu_grad(const nb_kernel_ctx *k)
{
    const nb_ew_params *p = k->params;
    return nb_ew_gelu_grad(nb_kin(k, 0, 0), nb_kin(k, 1, 0), nb_kout(k, 0, 0), p->approximate, k->label);
}

static nb_status run_scale(const nb_kernel_ctx *k)
{
    const nb_ew_params *p = k->params;
    return nb_ew_unary(p->bias_after_scale ? NB_EW_scale : NB_EW_scale_first, nb_kin(k, 0, 0), nb_kout(k, 0, 0), p,
                       k->label);
}

static nb_status run_clip(const nb_kernel_ctx *k)
{
    return nb_ew_unary(NB_EW_clip, nb_kin(k, 0, 0), nb_kout(k, 0, 0), k->params, k->label);
}

static bool pw_gelu(const void *params, nb_dtype dt, nb_pointwise *f)
{
    const nb_ew_params *p = params;
    return nb_ew_unary_pointwise(p->approximate ? NB_EW_gelu_tanh : NB_EW_gelu, dt, p, f);
}

static bool pw_gelu_grad(const void *params, nb_dtype dt, nb_pointwise *f)
{
    return nb_ew_gelu_grad_pointwise(((const nb_ew_params *)params)->approximate, dt, f);
}

static bool pw_scale(const void *params, nb_dtype dt, nb_pointwise *f)
{
    const nb_ew_params *p = params;
    return nb_ew_unary_pointwise(p->bias_after_scale ? NB_EW_scale : NB_EW_scale_first, dt, p, f);
}

static bool pw_clip(const void *params, nb_dtype dt, nb_pointwise *f)
{
    return nb_ew_unary_pointwise(NB_EW_clip, dt, params, f);
}

static nb_status run_cast(const nb_kernel_ctx *k) { return nb_ew_cast(nb_kin(k, 0, 0), nb_kout(k, 0, 0), k->label); }

static const nb_kernel_def kernel_gelu = {"gelu", NB_DEVICE_CPU, NB_DT_FLOAT, "nabla", 0, run_gelu, NULL, pw_gelu};
static const nb_kernel_def kernel_gelu_grad = {.op = "gelu_grad",
                                               .device = NB_DEVICE_CPU,
                                               .dtypes = NB_DT_FLOAT,
                                               .provider = "nabla",
                                               .run = run_gelu_grad,
                                               .pointwise = pw_gelu_grad};
static const nb_kernel_def kernel_scale = {.op = "scale",
                                           .device = NB_DEVICE_CPU,
                                           .dtypes = NB_DT_NUMERIC,
                                           .provider = "nabla",
                                           .run = run_scale,
                                           .pointwise = pw_scale};
static const nb_kernel_def kernel_clip = {"clip", NB_DEVICE_CPU, NB_DT_NUMERIC, "nabla", 0, run_clip, NULL, pw_clip};
static const nb_kernel_def kernel_cast = {"cast", NB_DEVICE_CPU, NB_DT_ALL, "nabla", 0, run_cast, NULL, NULL};

const nb_kernel_def *const nb_cpu_kernels_elementwise[] = {
#define NB_BINARY(name, ...) &kernel_##name,
#define NB_UNARY(name, ...) &kernel_##name,
#define NB_UNARY_A1(name, ...) &kernel_##name,
#define NB_UNARY_A2(name, ...) &kernel_##name,
#include "nabla/elementwise_ops.h"
    &kernel_gelu, &kernel_gelu_grad, &kernel_scale, &kernel_clip, &kernel_cast, NULL,
};
