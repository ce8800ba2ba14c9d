/* Parameter updates and learning-rate schedules. The update equations are
 * those of torch.optim (see nabla/optimizer.h); each kernel is written once
 * as a macro over the element type and instantiated for float and double. */

/* The update loops vectorise at -O3 (and their sqrt is one instruction:
 * the kernels are built with -fno-math-errno, see CMakeLists.txt). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <string.h>
#include <tgmath.h> /* sqrt of a float is sqrtf: the arithmetic stays in the parameter's dtype */
#include "../kernels.h"
#include "optimizer.h"
#include "simd.h"
#include "team.h"

/* An update reads each element once, mostly from the cache of the core that
 * computed its gradient: below this many elements the other thread spends
 * longer fetching its half than the split saves (the 784-256-10 MLP's
 * 200,960-element weight: a batch-1 step took 0.107 ms on two threads
 * against 0.075 on one). */
#define PAR_MIN 262144
#define PI 3.14159265358979323846

/* The update loops are range functions over [i0, i1) of the elements,
 * marked NB_SIMD_CLONES, with a promise to the compiler that iterations are
 * independent: an update in place (ParamOut = Param) reads and writes the
 * same element, and without the promise gcc gives up on proving that up to
 * seven pointers never overlap and leaves the loop scalar. (Clang checks
 * the overlap at run time itself.) */
#if defined(__GNUC__) && !defined(__clang__)
#define INDEPENDENT _Pragma("GCC ivdep")
#else
#define INDEPENDENT
#endif

/* The one element of a [1] or 0-d tensor, whatever its dtype. */
static nb_status scalar_in(const nb_kernel_ctx *ctx, int slot, const char *name, double *out)
{
    const nb_tensor *t = nb_kin(ctx, slot, 0);
    if (nb_tensor_numel(t) != 1)
        return nb_error(NB_ERR_SHAPE, "%s: %s must hold one element, it holds %lld", ctx->label, name,
                        (long long)nb_tensor_numel(t));
    *out = nb_tensor_get(t, 0);
    return NB_OK;
}

static nb_status bad_dtype(const nb_kernel_ctx *ctx, nb_dtype dt)
{
    return nb_error(NB_ERR_DTYPE, "%s: Param is %s; optimisers update float32 or float64 parameters", ctx->label,
                    nb_dtype_name(dt));
}

/* Runs the update range function of Param's dtype over its elements, split
 * among the team from PAR_MIN elements on. */
static nb_status run_update(const nb_kernel_ctx *ctx, nb_range_fn f32, nb_range_fn f64, void *args)
{
    const nb_tensor *param = nb_kin(ctx, 0, 0);
    const int64_t n = nb_tensor_numel(param);
    switch (param->dtype) {
    case NB_F32: nb_team_for(n, n >= PAR_MIN, f32, args); return NB_OK;
    case NB_F64: nb_team_for(n, n >= PAR_MIN, f64, args); return NB_OK;
    default: return bad_dtype(ctx, param->dtype);
    }
}

#define IN(slot) nb_tensor_data(nb_kin(ctx, (slot), 0))
#define OUT(slot) nb_tensor_data(nb_kout(ctx, (slot), 0))

/* ---- sgd: p -= lr * g ------------------------------------------------------------ */

typedef struct sgd_args {
    const void *p, *g;
    void *po;
    double lr;
} sgd_args;

#define SGD_LOOP(T, S)                                                                   \
    NB_SIMD_CLONES static void sgd_##S(void *arg, int64_t i0, int64_t i1)                 \
    {                                                                                    \
        const sgd_args *a = arg;                                                         \
        const T *p = a->p, *g = a->g;                                                    \
        T *po = a->po;                                                                   \
        const T lr = (T)a->lr;                                                           \
        INDEPENDENT                                                                      \
        for (int64_t i = i0; i < i1; i++) po[i] = p[i] - lr * g[i];                      \
    }
SGD_LOOP(float, f32)
SGD_LOOP(double, f64)

static nb_status run_sgd(const nb_kernel_ctx *ctx)
{
    double lrd = 0;
    nb_status st = scalar_in(ctx, 2, "LearningRate", &lrd);
    if (st) return st;
    sgd_args a = {.p = IN(0), .g = IN(1), .po = OUT(0), .lr = lrd};
    return run_update(ctx, sgd_f32, sgd_f64, &a);
}

/* ---- momentum (torch.optim.SGD, dampening 0) ---------------------------------------- */

typedef struct momentum_args {
    const void *p, *g, *v;
    void *po, *vo;
    double lr, mu;
    bool nesterov;
} momentum_args;

#define MOMENTUM_LOOP(T, S)                                                              \
    NB_SIMD_CLONES static void momentum_##S(void *arg, int64_t i0, int64_t i1)            \
    {                                                                                    \
        const momentum_args *a = arg;                                                    \
        const T *p = a->p, *g = a->g, *v = a->v;                                         \
        T *po = a->po, *vo = a->vo;                                                      \
        const T lr = (T)a->lr, mu = (T)a->mu;                                            \
        const bool nesterov = a->nesterov;                                               \
        INDEPENDENT                                                                      \
        for (int64_t i = i0; i < i1; i++) {                                              \
            T gi = g[i], vi = mu * v[i] + gi;                                            \
            vo[i] = vi;                                                                  \
            po[i] = p[i] - lr * (nesterov ? gi + mu * vi : vi);                          \
        }                                                                                \
    }
MOMENTUM_LOOP(float, f32)
MOMENTUM_LOOP(double, f64)

static nb_status run_momentum(const nb_kernel_ctx *ctx)
{
    double lrd = 0;
    nb_status st = scalar_in(ctx, 3, "LearningRate", &lrd);
    if (st) return st;
    const nb_update_params *P = ctx->params;
    momentum_args a = {.p = IN(0),
                       .g = IN(1),
                       .v = IN(2),
                       .po = OUT(0),
                       .vo = OUT(1),
                       .lr = lrd,
                       .mu = P->mu,
                       .nesterov = P->use_nesterov};
    return run_update(ctx, momentum_f32, momentum_f64, &a);
}

/* ---- adam / adamw -------------------------------------------------------------------- */

typedef struct adam_args {
    const void *p, *g, *m, *v;
    void *po, *mo, *vo;
    double b1, b2, eps, decay, step_size, bc2_sqrt;
} adam_args;

/* Elements [i0, i1) of the update, in the parameter's dtype. */
#define ADAM_LOOP(T, S)                                                                  \
    NB_SIMD_CLONES static void adam_##S(void *arg, int64_t i0, int64_t i1)                \
    {                                                                                    \
        const adam_args *a = arg;                                                        \
        const T *p = a->p, *g = a->g, *m = a->m, *v = a->v;                              \
        T *po = a->po, *mo = a->mo, *vo = a->vo;                                         \
        const T b2 = (T)a->b2, eps = (T)a->eps, decay = (T)a->decay;                     \
        const T one_m_b1 = (T)(1.0 - a->b1), one_m_b2 = (T)(1.0 - a->b2);                 \
        const T step_size = (T)a->step_size, bc2_sqrt = (T)a->bc2_sqrt;                  \
        INDEPENDENT                                                                      \
        for (int64_t i = i0; i < i1; i++) {                                              \
            T gi = g[i], pi = p[i] * decay; /* decay is 1 without weight decay */         \
            T mi = m[i] + one_m_b1 * (gi - m[i]);                                        \
            T vi = v[i] * b2 + one_m_b2 * gi * gi;                                       \
            mo[i] = mi;                                                                  \
            vo[i] = vi;                                                                  \
            po[i] = pi - step_size * (mi / (sqrt(vi) / bc2_sqrt + eps));                 \
        }                                                                                \
    }
ADAM_LOOP(float, f32)
ADAM_LOOP(double, f64)

/* Slots: in Param, Grad, Moment1, Moment2, LearningRate, Beta1Pow, Beta2Pow;
 * out ParamOut, Moment1Out, Moment2Out, Beta1PowOut, Beta2PowOut. The pows
 * hold beta^t of the current update t, and leave holding beta^(t+1). */
static nb_status run_adam(const nb_kernel_ctx *ctx)
{
    double lrd = 0, b1p = 0, b2p = 0;
    nb_status st = scalar_in(ctx, 4, "LearningRate", &lrd);
    if (!st) st = scalar_in(ctx, 5, "Beta1Pow", &b1p);
    if (!st) st = scalar_in(ctx, 6, "Beta2Pow", &b2p);
    if (st) return st;
    const nb_update_params *P = ctx->params;
    const double b1d = P->beta1, b2d = P->beta2;
    const double epsd = P->epsilon, wdd = P->weight_decay;
    if (!(b1p < 1.0) || !(b2p < 1.0))
        return nb_error(NB_ERR_ARG, "%s: Beta1Pow %g and Beta2Pow %g must be below 1 (they hold beta^t)", ctx->label,
                        b1p, b2p);
    adam_args a = {
        .p = IN(0),
        .g = IN(1),
        .m = IN(2),
        .v = IN(3),
        .po = OUT(0),
        .mo = OUT(1),
        .vo = OUT(2),
        .b1 = b1d,
        .b2 = b2d,
        .eps = epsd,
        .decay = 1.0 - lrd * wdd,
        .step_size = lrd / (1.0 - b1p),
        .bc2_sqrt = sqrt(1.0 - b2p),
    };
    st = run_update(ctx, adam_f32, adam_f64, &a);
    if (st) return st;
    nb_tensor_set(nb_kout(ctx, 3, 0), 0, b1p * b1d);
    nb_tensor_set(nb_kout(ctx, 4, 0), 0, b2p * b2d);
    return NB_OK;
}

/* ---- rmsprop ---------------------------------------------------------------------------- */

typedef struct rmsprop_args {
    const void *p, *g, *sq, *buf, *ga;
    void *po, *sqo, *bufo, *gao;
    double rho, eps, mom, lr;
    bool has_mom, centered;
} rmsprop_args;

#define RMSPROP_LOOP(T, S)                                                                  \
    NB_SIMD_CLONES static void rmsprop_##S(void *arg, int64_t i0, int64_t i1)                \
    {                                                                                       \
        const rmsprop_args *a = arg;                                                        \
        const T *p = a->p, *g = a->g, *sq = a->sq, *buf = a->buf, *ga = a->ga;              \
        T *po = a->po, *sqo = a->sqo, *bufo = a->bufo, *gao = a->gao;                       \
        const T rho = (T)a->rho, one_m_rho = (T)(1.0 - a->rho), eps = (T)a->eps;            \
        const T mom = (T)a->mom, lr = (T)a->lr;                                             \
        const bool has_mom = a->has_mom, centered = a->centered;                            \
        INDEPENDENT                                                                         \
        for (int64_t i = i0; i < i1; i++) {                                                 \
            T gi = g[i], si = sq[i] * rho + one_m_rho * gi * gi, avg;                       \
            sqo[i] = si;                                                                    \
            if (centered) {                                                                 \
                T gai = ga[i] + one_m_rho * (gi - ga[i]);                                   \
                gao[i] = gai;                                                               \
                avg = sqrt(si - gai * gai) + eps;                                           \
            } else {                                                                        \
                avg = sqrt(si) + eps;                                                       \
            }                                                                               \
            if (has_mom) {                                                                  \
                T bi = buf[i] * mom + gi / avg;                                             \
                bufo[i] = bi;                                                               \
                po[i] = p[i] - lr * bi;                                                     \
            } else {                                                                        \
                po[i] = p[i] - lr * (gi / avg);                                             \
            }                                                                               \
        }                                                                                   \
    }
RMSPROP_LOOP(float, f32)
RMSPROP_LOOP(double, f64)

/* Slots: in Param, Grad, MeanSquare, LearningRate, Moment?, MeanGrad?;
 * out ParamOut, MeanSquareOut, MomentOut?, MeanGradOut?. With a Moment
 * buffer the step goes through it (buf = momentum*buf + g/avg), which for
 * momentum 0 is the plain step. */
static nb_status run_rmsprop(const nb_kernel_ctx *ctx)
{
    double lrd = 0;
    nb_status st = scalar_in(ctx, 3, "LearningRate", &lrd);
    if (st) return st;
    const nb_update_params *P = ctx->params;
    const bool has_mom = nb_khas_in(ctx, 4), centered = nb_khas_in(ctx, 5);
    rmsprop_args a = {
        .p = IN(0),
        .g = IN(1),
        .sq = IN(2),
        .buf = has_mom ? IN(4) : NULL,
        .ga = centered ? IN(5) : NULL,
        .po = OUT(0),
        .sqo = OUT(1),
        .bufo = has_mom ? OUT(2) : NULL,
        .gao = centered ? OUT(3) : NULL,
        .rho = P->rho,
        .eps = P->epsilon,
        .mom = P->momentum,
        .lr = lrd,
        .has_mom = has_mom,
        .centered = centered,
    };
    return run_update(ctx, rmsprop_f32, rmsprop_f64, &a);
}

/* ---- adagrad ----------------------------------------------------------------------------- */

typedef struct adagrad_args {
    const void *p, *g, *acc;
    void *po, *acco;
    double eps, lr;
} adagrad_args;

#define ADAGRAD_LOOP(T, S)                                                               \
    NB_SIMD_CLONES static void adagrad_##S(void *arg, int64_t i0, int64_t i1)             \
    {                                                                                    \
        const adagrad_args *a = arg;                                                     \
        const T *p = a->p, *g = a->g, *acc = a->acc;                                     \
        T *po = a->po, *acco = a->acco;                                                  \
        const T eps = (T)a->eps, lr = (T)a->lr;                                          \
        INDEPENDENT                                                                      \
        for (int64_t i = i0; i < i1; i++) {                                              \
            T gi = g[i], ai = acc[i] + gi * gi;                                          \
            acco[i] = ai;                                                                \
            po[i] = p[i] - lr * (gi / (sqrt(ai) + eps));                                 \
        }                                                                                \
    }
ADAGRAD_LOOP(float, f32)
ADAGRAD_LOOP(double, f64)

static nb_status run_adagrad(const nb_kernel_ctx *ctx)
{
    double lrd = 0;
    nb_status st = scalar_in(ctx, 3, "LearningRate", &lrd);
    if (st) return st;
    adagrad_args a = {.p = IN(0),
                      .g = IN(1),
                      .acc = IN(2),
                      .po = OUT(0),
                      .acco = OUT(1),
                      .eps = ((const nb_update_params *)ctx->params)->epsilon,
                      .lr = lrd};
    return run_update(ctx, adagrad_f32, adagrad_f64, &a);
}

/* ---- learning-rate schedules ---------------------------------------------------------------- */

nb_lr_kind nb_lr_kind_parse(const char *s)
{
    if (!s || !strcmp(s, "constant")) return NB_LR_CONSTANT;
    if (!strcmp(s, "step")) return NB_LR_STEP;
    if (!strcmp(s, "exponential")) return NB_LR_EXPONENTIAL;
    if (!strcmp(s, "cosine")) return NB_LR_COSINE;
    return NB_LR_BAD;
}

double nb_lr_value(const nb_lr_params *p, double t)
{
    const double w = (double)p->warmup_steps;
    if (w > 0 && t <= w) return p->base_lr * (t > 0 ? t : 0) / w;
    double s = t - 1 - w;
    if (s < 0) s = 0;
    switch (p->kind) {
    case NB_LR_STEP: return p->base_lr * pow(p->gamma, floor(s / (double)p->step_size));
    case NB_LR_EXPONENTIAL: return p->base_lr * pow(p->gamma, s);
    case NB_LR_COSINE: {
        const double T = (double)p->total_steps;
        if (s > T) s = T;
        return p->min_lr + (p->base_lr - p->min_lr) * (1 + cos(PI * s / T)) / 2;
    }
    default: return p->base_lr;
    }
}

static nb_status run_lr_schedule(const nb_kernel_ctx *ctx)
{
    double t = 0;
    nb_status st = scalar_in(ctx, 0, "Step", &t);
    if (st) return st;
    nb_tensor_set(nb_kout(ctx, 0, 0), 0, nb_lr_value(ctx->params, t));
    return NB_OK;
}

/* ---- the family's kernels ------------------------------------------------------------ */

#define KERNEL(op, fn) static const nb_kernel_def kernel_##op = {#op, NB_DEVICE_CPU, NB_DT_FLOAT, "nabla", 0, fn, NULL, NULL};
KERNEL(sgd, run_sgd)
KERNEL(momentum, run_momentum)
KERNEL(adam, run_adam)
KERNEL(adamw, run_adam) /* adam with decoupled weight decay: the same update */
KERNEL(rmsprop, run_rmsprop)
KERNEL(adagrad, run_adagrad)
/* Step may be any numeric dtype. */
static const nb_kernel_def kernel_lr_schedule = {
    .op = "lr_schedule", .device = NB_DEVICE_CPU, .dtypes = NB_DT_NUMERIC, .provider = "nabla", .run = run_lr_schedule};

const nb_kernel_def *const nb_cpu_kernels_optimizer[] = {
    &kernel_sgd,     &kernel_momentum, &kernel_adam,        &kernel_adamw,
    &kernel_rmsprop, &kernel_adagrad,  &kernel_lr_schedule, NULL,
};
