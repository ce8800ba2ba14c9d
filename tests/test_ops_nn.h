/* Helpers shared by the nn-family tests (test_ops_nn.c, test_ops_softmax.c,
 * test_ops_loss.c): build-time shape inference with unknown dims, running
 * multi-output ops, and central finite differences. */
#ifndef NABLA_TEST_OPS_NN_H
#define NABLA_TEST_OPS_NN_H

#include <stdlib.h>
#include "test.h"
#include "ops/op_internal.h"

#define NATTR(a) ((int)(sizeof(a) / sizeof(*(a))))
#define NIN(a) ((int)(sizeof(a) / sizeof(*(a))))

static inline nb_var_info vinfo(nb_dtype dt, int ndim, const int64_t *shape)
{
    nb_var_info v = {.dtype = dt, .ndim = ndim};
    for (int d = 0; d < ndim; d++) v.shape[d] = shape[d];
    return v;
}
/* INFO(NB_F32, S(-1, 10)): a var info with these dims. */
#define INFO(dt, shape) vinfo((dt), NDIM_OF(shape), (shape))
#define INFO0(dt) vinfo((dt), 0, NULL)

/* Runs op `type`'s shape inference on `in` (every slot given, in order), as
 * a program builder would at build time, where dims may be -1. */
static inline nb_status infer_op(const char *type, int n_in, const nb_var_info *in, int n_attrs, const nb_attr *attrs,
                                 int n_out, nb_var_info *out)
{
    return nb_op_infer(type, n_in, in, NB_ATTRS_N(n_attrs, attrs), n_out, out);
}

static inline bool info_is(const nb_var_info *v, nb_dtype dt, int ndim, const int64_t *shape)
{
    return v->dtype == dt && nb_shape_equal(v->ndim, v->shape, ndim, shape);
}
#define INFO_IS(v, dt, shape) info_is(&(v), (dt), NDIM_OF(shape), (shape))

/* Runs an op with n_out outputs into fresh tensors (out[] is set to NULL
 * first); the caller releases them. */
static inline nb_status run_op(const char *type, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs,
                               int n_out, nb_tensor **out)
{
    for (int i = 0; i < n_out; i++) out[i] = NULL;
    return nb_op_run(type, NB_TENSORS_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), n_out, out);
}

/* sum(w * output o) of op `type` run on `in`; NAN if the op fails. */
static inline double weighted_output(const char *type, int n_in, nb_tensor *const *in, int n_attrs,
                                     const nb_attr *attrs, int n_out, int o, const nb_tensor *w)
{
    nb_tensor *out[8];
    if (run_op(type, n_in, in, n_attrs, attrs, n_out, out)) return NAN;
    double s = 0;
    int64_t n = nb_tensor_numel(out[o]);
    for (int64_t i = 0; i < n; i++) s += nb_tensor_get(w, i) * nb_tensor_get(out[o], i);
    for (int i = 0; i < n_out; i++) nb_tensor_release(out[i]);
    return s;
}

/* The central-difference gradient of sum(w * output o) with respect to
 * input `wrt` (a float64 tensor, perturbed in place and restored). */
static inline nb_tensor *numeric_grad(const char *type, int n_in, nb_tensor *const *in, int n_attrs,
                                      const nb_attr *attrs, int n_out, int o, const nb_tensor *w, int wrt)
{
    const double h = 1e-6;
    nb_tensor *x = in[wrt], *g = NULL;
    if (nb_tensor_new(&g, NB_F64, x->ndim, x->shape)) exit(2);
    int64_t n = nb_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        double v = nb_tensor_get(x, i);
        nb_tensor_set(x, i, v + h);
        double fp = weighted_output(type, n_in, in, n_attrs, attrs, n_out, o, w);
        nb_tensor_set(x, i, v - h);
        double fm = weighted_output(type, n_in, in, n_attrs, attrs, n_out, o, w);
        nb_tensor_set(x, i, v);
        nb_tensor_set(g, i, (fp - fm) / (2 * h));
    }
    return g;
}

/* Checks two tensors agree elementwise within atol + rtol*|b|. */
#define CHECK_CLOSE(a, b, rtol, atol)                                                           \
    do {                                                                                        \
        const nb_tensor *ca_ = (a), *cb_ = (b);                                                 \
        if (!ca_ || !cb_ || !nb_tensor_allclose(ca_, cb_, (rtol), (atol))) {                   \
            char *sa_ = ca_ ? nb_tensor_to_string(ca_) : NULL, *sb_ = cb_ ? nb_tensor_to_string(cb_) : NULL; \
            fprintf(stderr, "  %s:%d: %s\n    differs from %s\n  %s\n    vs\n  %s\n", __FILE__, __LINE__, #a, #b, \
                    sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                                \
            free(sa_);                                                                          \
            free(sb_);                                                                          \
            test_failures_in_current++;                                                         \
        }                                                                                       \
    } while (0)

/* Checks t is 0-d and holds v (relative tol). */
#define CHECK_SCALAR(t, v, tol) check_tensor_(__FILE__, __LINE__, (t), 0, NULL, (const double[]){(v)}, (tol))

/* A deterministic pseudo-random fill in [lo, hi), so big tests need no data. */
static inline void fill_pattern(nb_tensor *t, double lo, double hi, unsigned seed)
{
    uint64_t s = seed * 2654435761u + 12345;
    int64_t n = nb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        nb_tensor_set(t, i, lo + (hi - lo) * (double)(s >> 11) * 0x1.0p-53);
    }
}

static inline nb_tensor *new_tensor(nb_dtype dt, int ndim, const int64_t *shape)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, ndim, shape)) exit(2);
    return t;
}
#define NEW(dt, shape) new_tensor((dt), NDIM_OF(shape), (shape))

#endif
