/* The floating-point mode kernels run in (src/core/fpenv.h): subnormal
 * results and operands are flushed to zero inside nabla's runs, an op's and
 * a prepared program's, on every thread of the team; the caller's own mode
 * is left as it was; NABLA_FLUSH_DENORMALS=0 (here nb_fpmode_set_flush)
 * keeps IEEE 754 arithmetic. The team has two threads (NABLA_NUM_THREADS,
 * set before its first use) so that a worker computes part of each run. */
#include <float.h>
#include <stdlib.h>
#include "core/fpenv.h"
#include "test.h"

enum { N = 200000 }; /* enough elements for the threaded path */

/* x * y over N elements, x = a and y = b everywhere, by one op. */
static nb_tensor *product_op(float a, float b)
{
    nb_tensor *x, *y;
    if (nb_tensor_full(&x, NB_F32, 1, (int64_t[]){N}, a) || nb_tensor_full(&y, NB_F32, 1, (int64_t[]){N}, b))
        return NULL;
    nb_tensor *in[] = {x, y};
    nb_tensor *out = RUN1_NOATTR("mul", in);
    release_all(x, y, NULL);
    return out;
}

/* The same through a prepared program. */
static nb_tensor *product_program(float a, float b)
{
    nb_program *p;
    nb_builder *bld;
    nb_scope *scope;
    nb_prepared *pp;
    nb_tensor *x, *y, *out = NULL;
    if (nb_program_new(&p)) return NULL;
    CHECK_OK(nb_builder_new_record(&bld, p, NULL));
    nb_value xv = nb_data(bld, "x", NB_F32, 1, S(N)), yv = nb_data(bld, "y", NB_F32, 1, S(N));
    nb_value prod = nb_mul(bld, xv, yv);
    CHECK_OK(nb_builder_status(bld));
    CHECK_OK(nb_scope_new(&scope, NULL));
    CHECK_OK(nb_prepare(&pp, p, 0, NB_NAMES("x", "y"), NB_NAMES(nb_value_name(prod))));
    CHECK_OK(nb_tensor_full(&x, NB_F32, 1, (int64_t[]){N}, a));
    CHECK_OK(nb_tensor_full(&y, NB_F32, 1, (int64_t[]){N}, b));
    nb_tensor *feeds[] = {x, y};
    CHECK_OK(nb_prepared_run(pp, scope, feeds, &out));
    release_all(x, y, NULL);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    nb_builder_free(bld);
    nb_program_free(p);
    return out;
}

/* Whether every element of t is `want`. */
static bool all_equal(const nb_tensor *t, float want)
{
    if (!t || nb_tensor_numel(t) != N) return false;
    const float *d = nb_tensor_data(t);
    for (int64_t i = 0; i < N; i++)
        if (d[i] != want) return false;
    return true;
}

static volatile float tiny = 1e-20f, sub = 1e-40f; /* volatile: computed at run time, not folded */

static void check_both_paths(bool flush)
{
    nb_fpmode_set_flush(flush);
    const float sq = tiny * tiny; /* 1e-40, a subnormal, in the caller's mode */
    CHECK(sq > 0 && sq < FLT_MIN);
    nb_tensor *(*paths[])(float, float) = {product_op, product_program};
    for (int i = 0; i < 2; i++) {
        unsigned before = nb_fpmode_get();
        nb_tensor *r = paths[i](tiny, tiny), *d = paths[i](sub, 1.0f);
        CHECK(nb_fpmode_get() == before); /* the caller's mode is back */
        /* A subnormal result (FTZ) and a subnormal operand (DAZ). */
        CHECK(all_equal(r, flush ? 0.0f : sq));
        CHECK(all_equal(d, flush ? 0.0f : (float)sub));
        release_all(r, d, NULL);
    }
    CHECK(tiny * tiny == sq); /* the caller's own arithmetic keeps subnormals */
}

static void test_flushed_by_default(void) { CHECK(nb_fpmode_flush()); }

static void test_flush(void) { check_both_paths(true); }

static void test_keep(void) { check_both_paths(false); }

/* A caller that flushes of its own accord keeps doing so. */
static void test_caller_mode_kept(void)
{
    unsigned mine = nb_fpmode_get();
    nb_fpmode_set(mine | NB_FP_FLUSH);
    nb_fpmode_set_flush(false);
    nb_tensor *r = product_op(tiny, tiny);
    CHECK(nb_fpmode_get() == (mine | NB_FP_FLUSH));
    CHECK(all_equal(r, 0.0f));
    nb_tensor_release(r);
    nb_fpmode_set(mine);
    nb_fpmode_set_flush(true);
}

int main(void)
{
    if (!NB_FP_FLUSH) {
        printf("test_fpenv: skipped (no flush-to-zero control on this architecture)\n");
        return 0;
    }
    setenv("NABLA_NUM_THREADS", "2", 1);
    unsetenv("NABLA_FLUSH_DENORMALS");
    RUN(test_flushed_by_default);
    RUN(test_flush);
    RUN(test_keep);
    RUN(test_caller_mode_kept);
    return test_report();
}
