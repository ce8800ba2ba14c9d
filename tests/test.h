/* A small test harness: each test file is a program whose main() runs its
 * tests with RUN() and ends with test_report(), which prints
 * "N passed, M failed" and returns the exit status. */
#ifndef NABLA_TEST_H
#define NABLA_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"

extern int test_failures_in_current;
extern int tests_passed, tests_failed;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            test_failures_in_current++;                                               \
        }                                                                             \
    } while (0)

/* Asserts an nb_status is NB_OK, printing nb_last_error() if not. */
#define CHECK_OK(expr)                                                                        \
    do {                                                                                      \
        nb_status st_ = (expr);                                                               \
        if (st_ != NB_OK) {                                                                   \
            fprintf(stderr, "  %s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,       \
                    nb_status_name(st_), nb_last_error());                                   \
            test_failures_in_current++;                                                       \
        }                                                                                     \
    } while (0)

/* Like CHECK_OK, but ends the test at once when the call fails (for steps
 * that later ones depend on). */
#define REQUIRE_OK(expr)                                                                      \
    do {                                                                                      \
        nb_status st_ = (expr);                                                               \
        if (st_ != NB_OK) {                                                                   \
            fprintf(stderr, "  %s:%d: %s returned %s: %s (test stopped)\n", __FILE__, __LINE__, \
                    #expr, nb_status_name(st_), nb_last_error());                            \
            test_failures_in_current++;                                                       \
            return;                                                                           \
        }                                                                                     \
    } while (0)

/* Asserts a call fails with `code` and that the error text contains `needle`. */
#define CHECK_ERR(expr, code, needle)                                                          \
    do {                                                                                       \
        nb_status st_ = (expr);                                                                \
        if (st_ != (code) || !strstr(nb_last_error(), (needle))) {                             \
            fprintf(stderr, "  %s:%d: %s gave %s \"%s\", wanted %s containing \"%s\"\n",        \
                    __FILE__, __LINE__, #expr, nb_status_name(st_), nb_last_error(),           \
                    nb_status_name(code), (needle));                                          \
            test_failures_in_current++;                                                        \
        }                                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                  \
    do {                                                                                       \
        double a_ = (a), b_ = (b);                                                             \
        if (!(fabs(a_ - b_) <= (tol)) && !(isnan(a_) && isnan(b_))) {                           \
            fprintf(stderr, "  %s:%d: %s = %.10g, expected %.10g (tol %g)\n", __FILE__,         \
                    __LINE__, #a, a_, b_, (double)(tol));                                      \
            test_failures_in_current++;                                                        \
        }                                                                                      \
    } while (0)

#define CHECK_STR(a, b)                                                                          \
    do {                                                                                         \
        const char *a_ = (a), *b_ = (b);                                                         \
        if (!a_ || !b_ || strcmp(a_, b_)) {                                                      \
            fprintf(stderr, "  %s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
                    a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                    \
            test_failures_in_current++;                                                          \
        }                                                                                        \
    } while (0)

#define RUN(fn) test_run(#fn, fn)

void test_run(const char *name, void (*fn)(void));
int test_report(void);

/* ---- tensor helpers for tests ------------------------------------------ */

/* The largest |a - b| / (1 + |b|) over the elements (INFINITY if the shapes differ). */
static inline double max_rel_diff(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < nb_tensor_numel(a); i++) {
        double d = fabs(nb_tensor_get(a, i) - nb_tensor_get(b, i)) / (1 + fabs(nb_tensor_get(b, i)));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* A new tensor of dtype dt and shape (ndim, shape) filled from `values`
 * (converted from double); aborts the test program if allocation fails. */
nb_tensor *tt(nb_dtype dt, int ndim, const int64_t *shape, const double *values);
/* A shape literal: S(2, 3). Use tscalar() for 0-d tensors. */
#define S(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM_OF(shape) ((int)(sizeof(shape) / sizeof(int64_t)))
/* T(NB_F64, S(2, 2), 1, 2, 3, 4): a tensor with these values. */
#define T(dt, shape, ...) tt((dt), NDIM_OF(shape), (shape), (const double[]){__VA_ARGS__})
/* A scalar (0-d) tensor. */
nb_tensor *tscalar(nb_dtype dt, double v);
/* Checks shape and every element of t against `values` within tol. */
void check_tensor_(const char *file, int line, const nb_tensor *t, int ndim, const int64_t *shape, const double *values,
                   double tol);
/* CHECK_TENSOR(t, S(2, 2), 1e-6, 1, 2, 3, 4): shape and values (relative tol). */
#define CHECK_TENSOR(t, shape, tol, ...) \
    check_tensor_(__FILE__, __LINE__, (t), NDIM_OF(shape), (shape), (const double[]){__VA_ARGS__}, (tol))
/* CHECK_SCALAR(t, 3.5, 1e-6): a 0-d tensor holding this value. */
#define CHECK_SCALAR(t, v, tol) check_tensor_(__FILE__, __LINE__, (t), 0, NULL, (const double[]){(v)}, (tol))
/* Runs a single-output op; returns its output or NULL (the failure is counted). */
nb_tensor *run1_(const char *file, int line, const char *type, int n_in, nb_tensor *const *in, int n_attrs,
                 const nb_attr *attrs);
#define RUN1(type, ins, attrs) \
    run1_(__FILE__, __LINE__, (type), (int)(sizeof(ins) / sizeof(*(ins))), (ins), \
          (int)(sizeof(attrs) / sizeof(*(attrs))), (attrs))
#define RUN1_NOATTR(type, ins) \
    run1_(__FILE__, __LINE__, (type), (int)(sizeof(ins) / sizeof(*(ins))), (ins), 0, NULL)
/* Releases a NULL-terminated list of tensors. */
void release_all(nb_tensor *first, ...);

#endif
