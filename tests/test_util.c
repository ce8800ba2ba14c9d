#include <stdarg.h>
#include <stdlib.h>
#include "test.h"

int test_failures_in_current;
int tests_passed, tests_failed;

void test_run(const char *name, void (*fn)(void))
{
    test_failures_in_current = 0;
    nb_clear_error();
    fn();
    if (test_failures_in_current) {
        tests_failed++;
        fprintf(stderr, "FAIL %s\n", name);
    } else {
        tests_passed++;
        printf("ok   %s\n", name);
    }
}

int test_report(void)
{
    printf("%d passed, %d failed\n", tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}

nb_tensor *tt(nb_dtype dt, int ndim, const int64_t *shape, const double *values)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, ndim, shape)) {
        fprintf(stderr, "tt: %s\n", nb_last_error());
        exit(2);
    }
    int64_t n = nb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) nb_tensor_set(t, i, values[i]);
    return t;
}

nb_tensor *tscalar(nb_dtype dt, double v) { return tt(dt, 0, NULL, &v); }

void check_tensor_(const char *file, int line, const nb_tensor *t, int ndim, const int64_t *shape, const double *values,
                   double tol)
{
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (!t) {
        fprintf(stderr, "  %s:%d: tensor is NULL\n", file, line);
        test_failures_in_current++;
        return;
    }
    if (!nb_shape_equal(t->ndim, t->shape, ndim, shape)) {
        fprintf(stderr, "  %s:%d: shape %s, expected %s\n", file, line, nb_shape_str(a, sizeof a, t->ndim, t->shape),
                nb_shape_str(b, sizeof b, ndim, shape));
        test_failures_in_current++;
        return;
    }
    int64_t n = nb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double x = nb_tensor_get(t, i), y = values[i];
        if (isnan(x) && isnan(y)) continue;
        if (x == y) continue;
        if (!(fabs(x - y) <= tol * (1 + fabs(y)))) {
            fprintf(stderr, "  %s:%d: element %lld is %.10g, expected %.10g\n", file, line, (long long)i, x, y);
            test_failures_in_current++;
            return;
        }
    }
}

nb_tensor *run1_(const char *file, int line, const char *type, int n_in, nb_tensor *const *in, int n_attrs,
                 const nb_attr *attrs)
{
    nb_tensor *out = NULL;
    nb_status st = nb_op_run(type, NB_TENSORS_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), 1, &out);
    if (st) {
        fprintf(stderr, "  %s:%d: %s failed: %s\n", file, line, type, nb_last_error());
        test_failures_in_current++;
        return NULL;
    }
    return out;
}

void release_all(nb_tensor *first, ...)
{
    va_list ap;
    va_start(ap, first);
    for (nb_tensor *t = first; t; t = va_arg(ap, nb_tensor *)) nb_tensor_release(t);
    va_end(ap);
}
