/* Helpers shared by test_ops_conv.c and test_ops_norm.c: random tensors,
 * build-time shape inference with unknown dims, and finite-difference
 * checks of fused gradient ops. */
#ifndef NABLA_TEST_CONVNORM_UTIL_H
#define NABLA_TEST_CONVNORM_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include "test.h"
#include "ops/op_internal.h"

/* Uniform in [-1, 1) from a xorshift state; the tests stay reproducible. */
static inline double urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0 * 2 - 1;
}

static inline nb_tensor *trand_(nb_dtype dt, int ndim, const int64_t *shape, uint64_t *seed, double lo, double hi)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, ndim, shape)) {
        fprintf(stderr, "trand: %s\n", nb_last_error());
        exit(2);
    }
    int64_t n = nb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) nb_tensor_set(t, i, lo + (urand(seed) + 1) / 2 * (hi - lo));
    return t;
}
/* TR(NB_F64, &seed, S(2, 3)): uniform in [-1, 1). */
#define TR(dt, seed, shape) trand_((dt), NDIM_OF(shape), (shape), (seed), -1, 1)
/* Uniform in [lo, hi). */
#define TRU(dt, seed, shape, lo, hi) trand_((dt), NDIM_OF(shape), (shape), (seed), (lo), (hi))

static inline nb_tensor *tcast(const nb_tensor *t, nb_dtype dt)
{
    nb_tensor *r = NULL;
    if (t && nb_tensor_cast(&r, t, dt)) {
        fprintf(stderr, "tcast: %s\n", nb_last_error());
        exit(2);
    }
    return r;
}

/* Runs op into n_out fresh outputs (out[] is overwritten). */
static inline nb_status run_op(const char *op, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs,
                               int n_out, nb_tensor **out)
{
    for (int i = 0; i < n_out; i++) out[i] = NULL;
    return nb_op_run(op, NB_TENSORS_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), n_out, out);
}

static inline void release_n(int n, nb_tensor **t)
{
    for (int i = 0; i < n; i++) {
        nb_tensor_release(t[i]);
        t[i] = NULL;
    }
}

/* Releases every tensor listed, NULL or not (release_all stops at a NULL). */
#define RELEASE(...) \
    release_n((int)(sizeof((nb_tensor *[]){__VA_ARGS__}) / sizeof(nb_tensor *)), (nb_tensor *[]){__VA_ARGS__})

static inline double weighted_sum(const nb_tensor *a, const nb_tensor *w)
{
    double s = 0;
    int64_t n = nb_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) s += nb_tensor_get(a, i) * nb_tensor_get(w, i);
    return s;
}

/* max |a - b| / (1 + |b|) over all elements; 1e300 if the shapes differ. */
static inline double rel_diff(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return 1e300;
    double worst = 0;
    int64_t n = nb_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = nb_tensor_get(a, i), y = nb_tensor_get(b, i), d = fabs(x - y) / (1 + fabs(y));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* sum(out[which] * R) of op on `in` (n_out outputs). */
static inline double fd_loss(const char *op, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs,
                             int n_out, int which, const nb_tensor *R)
{
    nb_tensor *out[8];
    nb_status st = run_op(op, n_in, in, n_attrs, attrs, n_out, out);
    if (st) {
        fprintf(stderr, "  fd_loss: %s failed: %s\n", op, nb_last_error());
        return NAN;
    }
    double s = weighted_sum(out[which], R);
    release_n(n_out, out);
    return s;
}

/* Compares `analytic` with central differences of sum(out[which] * R)
 * with respect to every element of in[slot] (a float64 tensor, perturbed
 * in place and restored). Returns the worst relative error. */
static inline double fd_check(const char *op, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs,
                              int n_out, int which, const nb_tensor *R, int slot, const nb_tensor *analytic)
{
    const double h = 1e-5;
    nb_tensor *x = in[slot];
    if (!analytic || !nb_shape_equal(x->ndim, x->shape, analytic->ndim, analytic->shape)) return 1e300;
    double worst = 0;
    int64_t n = nb_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        double v = nb_tensor_get(x, i);
        nb_tensor_set(x, i, v + h);
        double lp = fd_loss(op, n_in, in, n_attrs, attrs, n_out, which, R);
        nb_tensor_set(x, i, v - h);
        double lm = fd_loss(op, n_in, in, n_attrs, attrs, n_out, which, R);
        nb_tensor_set(x, i, v);
        double num = (lp - lm) / (2 * h), a = nb_tensor_get(analytic, i);
        double d = fabs(a - num) / (1 + fabs(num));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

#define CHECK_FD(err)                                                                                \
    do {                                                                                             \
        double e_ = (err);                                                                           \
        if (!(e_ <= 1e-6)) {                                                                         \
            fprintf(stderr, "  %s:%d: finite differences differ by %g (%s)\n", __FILE__, __LINE__, e_, #err); \
            test_failures_in_current++;                                                              \
        }                                                                                            \
    } while (0)

/* A var info literal: VI(NB_F32, S(-1, 3, 8, 8)). */
#define VI(dt, shape)                                                                  \
    vi_make((dt), NDIM_OF(shape), (shape))
static inline nb_var_info vi_make(nb_dtype dt, int ndim, const int64_t *shape)
{
    nb_var_info v = {.dtype = dt, .ndim = ndim};
    for (int i = 0; i < ndim; i++) v.shape[i] = shape[i];
    return v;
}

/* Build-time shape inference, as a program builder runs it: in[i] NULL is an
 * absent optional input. */
static inline nb_status infer_shapes(const char *op, int n_in, const nb_var_info *const *in, int n_attrs,
                                     const nb_attr *attrs, int n_out, nb_var_info *out)
{
    nb_var_info flat[16];
    for (int i = 0; i < n_in && i < 16; i++) flat[i] = in[i] ? *in[i] : (nb_var_info){.ndim = -1};
    return nb_op_infer(op, n_in, flat, NB_ATTRS_N(n_attrs, attrs), n_out, out);
}

#define CHECK_INFO(info, dt, want)                                                                       \
    do {                                                                                                  \
        const nb_var_info *i_ = &(info);                                                                  \
        if (i_->dtype != (dt) || !nb_shape_equal(i_->ndim, i_->shape, NDIM_OF(want), (want))) {         \
            char a_[NB_SHAPE_STR_MAX], b_[NB_SHAPE_STR_MAX];                                              \
            fprintf(stderr, "  %s:%d: inferred %s %s, expected %s %s\n", __FILE__, __LINE__,              \
                    nb_dtype_name(i_->dtype), nb_shape_str(a_, sizeof a_, i_->ndim, i_->shape),           \
                    nb_dtype_name(dt), nb_shape_str(b_, sizeof b_, NDIM_OF(want), (want)));             \
            test_failures_in_current++;                                                                   \
        }                                                                                                 \
    } while (0)

#endif
