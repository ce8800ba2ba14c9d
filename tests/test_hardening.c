/* Bad input gets a clear error, never a wrong answer or a crash: the cases
 * a hostile or unlucky user found (issue 19), each kept from coming back. */
#include <math.h>
#include "test.h"

/* fc's fused relu keeps NaN as relu does, so a step on NaN input cannot
 * report a finite loss. */
static void test_fused_relu_keeps_nan(void)
{
    nb_tensor *x = T(NB_F32, S(1, 2), NAN, 1), *w = T(NB_F32, S(2, 2), 1, 0, 0, 1), *fused = NULL, *plain = NULL;
    CHECK_OK(nb_op_run("fc", NB_TENSORS(x, w), NB_ATTRS(NB_ATTR_STRING("activation", "relu")), 1, &fused));
    CHECK_OK(nb_op_run("relu", NB_TENSORS(x), NB_NO_ATTRS, 1, &plain));
    CHECK(fused && isnan(nb_tensor_get(fused, 0)) && plain && isnan(nb_tensor_get(plain, 0)));
    release_all(x, w, fused, plain, NULL);
}

static void test_duplicate_attributes_are_refused(void)
{
    nb_tensor *x = T(NB_F32, S(2), 1, 2), *y = NULL;
    CHECK_ERR(nb_op_run("scale", NB_TENSORS(x), NB_ATTRS(NB_ATTR_FLOAT("scale", 2), NB_ATTR_FLOAT("scale", 3)), 1, &y),
              NB_ERR_ARG, "scale: attribute 'scale' is given twice");
    CHECK(y == NULL);
    nb_tensor_release(x);
}

/* An error that wraps another keeps its cause: the text is formatted aside
 * before it replaces the old one. */
static void test_wrapped_errors_keep_their_cause(void)
{
    nb_error(NB_ERR_DTYPE, "inner cause");
    nb_error(NB_ERR_ARG, "outer: %s", nb_last_error());
    CHECK_STR(nb_last_error(), "outer: inner cause");
}

static void test_null_builder_status_says_so(void)
{
    nb_clear_error();
    CHECK(nb_builder_status(NULL) == NB_ERR_ARG);
    CHECK(strstr(nb_last_error(), "builder is NULL"));
}

/* Paddings so large that the output size would overflow: an error naming
 * the op and the shapes, not "shape too large". */
static void test_conv_with_huge_paddings(void)
{
    nb_tensor *x = T(NB_F32, S(1, 1, 2, 2), 1, 2, 3, 4), *f = T(NB_F32, S(1, 1, 1, 1), 1), *y = NULL;
    const int64_t p = (int64_t)1 << 61;
    nb_status st = nb_op_run("conv2d", NB_TENSORS(x, f), NB_ATTRS(NB_ATTR_INTS("paddings", p, p)), 1, &y);
    CHECK(st != NB_OK && y == NULL);
    CHECK(strstr(nb_last_error(), "conv2d"));
    release_all(x, f, NULL);
}

int main(void)
{
    RUN(test_fused_relu_keeps_nan);
    RUN(test_duplicate_attributes_are_refused);
    RUN(test_wrapped_errors_keep_their_cause);
    RUN(test_null_builder_status_says_so);
    RUN(test_conv_with_huge_paddings);
    return test_report();
}
