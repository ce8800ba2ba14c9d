/* Helpers shared by the shape-family tests: build-time shape inference on
 * var infos (where dims may be -1), as a program builder runs it. */
#ifndef NABLA_SHAPE_TEST_UTIL_H
#define NABLA_SHAPE_TEST_UTIL_H

#include <stdlib.h>
#include "ops/op_internal.h"
#include "test.h"

/* A var info literal: VI(NB_F32, -1, 28, 28). */
#define VI(dt, ...) ((nb_var_info){.dtype = (dt), .ndim = NDIM_OF(S(__VA_ARGS__)), .shape = {__VA_ARGS__}})
#define VI0(dt) ((nb_var_info){.dtype = (dt), .ndim = 0})

/* Runs the infer function of op `type` on n_in input infos and n_out outputs. */
static inline nb_status infer_op(const char *type, int n_in, const nb_var_info *in, int n_attrs, const nb_attr *attrs,
                                 int n_out, nb_var_info *out)
{
    return nb_op_infer(type, n_in, in, NB_ATTRS_N(n_attrs, attrs), n_out, out);
}

#define INFER1(type, ins, attrs, out) \
    infer_op((type), (int)(sizeof(ins) / sizeof(*(ins))), (ins), (int)(sizeof(attrs) / sizeof(*(attrs))), (attrs), 1, (out))

static inline void check_info_(const char *file, int line, const nb_var_info *v, nb_dtype dt, int ndim,
                               const int64_t *shape)
{
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (v->dtype != dt || !nb_shape_equal(v->ndim, v->shape, ndim, shape)) {
        fprintf(stderr, "  %s:%d: inferred %s %s, expected %s %s\n", file, line, nb_dtype_name(v->dtype),
                nb_shape_str(a, sizeof a, v->ndim, v->shape), nb_dtype_name(dt),
                nb_shape_str(b, sizeof b, ndim, shape));
        test_failures_in_current++;
    }
}
/* CHECK_INFO(info, NB_F32, S(-1, 784)) */
#define CHECK_INFO(v, dt, shape) check_info_(__FILE__, __LINE__, &(v), (dt), NDIM_OF(shape), (shape))

/* A tensor holding 0, 1, 2, ... */
static inline nb_tensor *iota(nb_dtype dt, int ndim, const int64_t *shape)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, ndim, shape)) exit(2);
    int64_t n = nb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) nb_tensor_set(t, i, (double)i);
    return t;
}
#define IOTA(dt, shape) iota((dt), NDIM_OF(shape), (shape))

/* RUN1 for a single input tensor x. */
#define RUN1X(type, x, attrs) \
    run1_(__FILE__, __LINE__, (type), 1, &(x), (int)(sizeof(attrs) / sizeof(*(attrs))), (attrs))
#define RUN1X_NOATTR(type, x) run1_(__FILE__, __LINE__, (type), 1, &(x), 0, NULL)

static const nb_dtype float_dtypes[] = {NB_F32, NB_F64};

#endif
