/* Helpers for tests that compare gradients computed two ways (declared
 * shapes against unknown ones, float32 against float64). */
#ifndef NABLA_GRAD_COMPARE_H
#define NABLA_GRAD_COMPARE_H

#include <stdint.h>
#include "test.h"

/* Deterministic inputs, the same in float32 and float64 up to rounding:
 * element i of input `input`, uniform-looking in [lo, hi] ([-1, 1] if both 0). */
static inline double gc_value_at(int input, int64_t i, double lo, double hi)
{
    if (lo == 0 && hi == 0) lo = -1, hi = 1;
    uint64_t h = (uint64_t)(input + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 7) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    return lo + (hi - lo) * (double)(h >> 11) / 9007199254740992.0;
}

/* A new tensor filled with gc_value_at, or NULL. */
static inline nb_tensor *gc_filled(nb_dtype dt, int ndim, const int64_t *shape, int input, double lo, double hi)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, ndim, shape)) return NULL;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, gc_value_at(input, i, lo, hi));
    return t;
}

/* Checks that two gradients (either may be NULL: then both must be) agree
 * to a relative tolerance; `name` and `what` label a failure. */
static inline void gc_check_same(const char *name, int k, const nb_tensor *want, const nb_tensor *got, double tol,
                                 const char *what)
{
    if (!want || !got) {
        CHECK(!want == !got);
        return;
    }
    CHECK(nb_shape_equal(want->ndim, want->shape, got->ndim, got->shape));
    double worst = 0;
    for (int64_t i = 0; i < nb_tensor_numel(want) && i < nb_tensor_numel(got); i++) {
        double d = fabs(nb_tensor_get(want, i) - nb_tensor_get(got, i)) / (1 + fabs(nb_tensor_get(want, i)));
        if (d > worst) worst = d;
    }
    if (worst > tol) fprintf(stderr, "  %s: gradient of x%d differs by %g (%s)\n", name, k, worst, what);
    CHECK(worst <= tol);
}

#endif
