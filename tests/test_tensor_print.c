/* Tests of tensor printing against PyTorch's format: the expected strings
 * are what torch.tensor(...) prints under the default print options, except
 * that nabla writes "dtype=float64" where torch writes "dtype=torch.float64". */
#include <stdint.h>
#include <stdlib.h>
#include "test.h"

/* Checks the text of t and releases t. */
static void check_print_(int line, nb_tensor *t, const char *want)
{
    char *got = nb_tensor_to_string(t);
    if (!got || strcmp(got, want)) {
        fprintf(stderr, "  %s:%d: printed\n%s\n  expected\n%s\n", __FILE__, line, got ? got : "(null)", want);
        test_failures_in_current++;
    }
    free(got);
    nb_tensor_release(t);
}
#define CHECK_PRINT(t, want) check_print_(__LINE__, (t), (want))

/* A tensor of shape `shape` with element i equal to f(i). */
static nb_tensor *gen(nb_dtype dt, int ndim, const int64_t *shape, double (*f)(int64_t))
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, dt, ndim, shape)) return NULL;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, f(i));
    return t;
}
#define GEN(dt, shape, f) gen((dt), NDIM_OF(shape), (shape), (f))

static double f_index(int64_t i) { return (double)i; }
static double f_sevenths(int64_t i) { return 1 + (double)(i % 7) * 0.25; }
static double f_tenths(int64_t i) { return (double)i * 0.1 + 0.05; }
static double f_halves(int64_t i) { return (double)i * 1.5; }
static double f_rows(int64_t i) { return (double)(i % 1000) * 0.5 + (double)(i / 1000); }

static void test_print_brief_cases(void)
{
    CHECK_PRINT(T(NB_F32, S(2, 2), 1, 2, 3, 4), "tensor([[1., 2.],\n        [3., 4.]])\n");
    CHECK_PRINT(T(NB_F32, S(2), 1.5, 2.25), "tensor([1.5000, 2.2500])\n");
    CHECK_PRINT(T(NB_F64, S(2), 1.5, 2.25), "tensor([1.5000, 2.2500], dtype=float64)\n");
    CHECK_PRINT(T(NB_I64, S(3), 1, 2, 3), "tensor([1, 2, 3])\n");
    CHECK_PRINT(tscalar(NB_F32, 3.5), "tensor(3.5000)\n");
    CHECK_PRINT(T(NB_BOOL, S(2), 1, 0), "tensor([ True, False])\n");
}

static void test_print_summarised(void)
{
    CHECK_PRINT(GEN(NB_F32, S(2000), f_sevenths), "tensor([1.0000, 1.2500, 1.5000,  ..., 1.5000, 1.7500, 2.0000])\n");
    /* The formatter sees only the shown values: here all whole, but spanning
     * more than three decades, hence scientific notation. */
    CHECK_PRINT(GEN(NB_F32, S(2000), f_index),
                "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
                "        1.9990e+03])\n");
    CHECK_PRINT(GEN(NB_I64, S(2000), f_index), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])\n");
    CHECK_PRINT(GEN(NB_I64, S(1000, 3), f_index),
                "tensor([[   0,    1,    2],\n"
                "        [   3,    4,    5],\n"
                "        [   6,    7,    8],\n"
                "        ...,\n"
                "        [2991, 2992, 2993],\n"
                "        [2994, 2995, 2996],\n"
                "        [2997, 2998, 2999]])\n");
    CHECK_PRINT(GEN(NB_I64, S(2, 1000), f_index),
                "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n"
                "        [1000, 1001, 1002,  ..., 1997, 1998, 1999]])\n");
    CHECK_PRINT(GEN(NB_I64, S(10, 2, 100), f_index),
                "tensor([[[   0,    1,    2,  ...,   97,   98,   99],\n"
                "         [ 100,  101,  102,  ...,  197,  198,  199]],\n"
                "\n"
                "        [[ 200,  201,  202,  ...,  297,  298,  299],\n"
                "         [ 300,  301,  302,  ...,  397,  398,  399]],\n"
                "\n"
                "        [[ 400,  401,  402,  ...,  497,  498,  499],\n"
                "         [ 500,  501,  502,  ...,  597,  598,  599]],\n"
                "\n"
                "        ...,\n"
                "\n"
                "        [[1400, 1401, 1402,  ..., 1497, 1498, 1499],\n"
                "         [1500, 1501, 1502,  ..., 1597, 1598, 1599]],\n"
                "\n"
                "        [[1600, 1601, 1602,  ..., 1697, 1698, 1699],\n"
                "         [1700, 1701, 1702,  ..., 1797, 1798, 1799]],\n"
                "\n"
                "        [[1800, 1801, 1802,  ..., 1897, 1898, 1899],\n"
                "         [1900, 1901, 1902,  ..., 1997, 1998, 1999]]])\n");
    CHECK_PRINT(GEN(NB_F32, S(3, 1000), f_rows),
                "tensor([[0.0000e+00, 5.0000e-01, 1.0000e+00,  ..., 4.9850e+02, 4.9900e+02,\n"
                "         4.9950e+02],\n"
                "        [1.0000e+00, 1.5000e+00, 2.0000e+00,  ..., 4.9950e+02, 5.0000e+02,\n"
                "         5.0050e+02],\n"
                "        [2.0000e+00, 2.5000e+00, 3.0000e+00,  ..., 5.0050e+02, 5.0100e+02,\n"
                "         5.0150e+02]])\n");
    /* 1000 elements is not above the threshold: printed in full. */
    nb_tensor *t = GEN(NB_I64, S(1000), f_index);
    char *s = nb_tensor_to_string(t);
    CHECK(s && !strstr(s, "...") && strstr(s, " 500, ") && strstr(s, " 999])\n"));
    free(s);
    nb_tensor_release(t);
}

static void test_print_layout(void)
{
    CHECK_PRINT(GEN(NB_F32, S(2, 2, 2), f_index),
                "tensor([[[0., 1.],\n"
                "         [2., 3.]],\n"
                "\n"
                "        [[4., 5.],\n"
                "         [6., 7.]]])\n");
    CHECK_PRINT(T(NB_F32, S(1, 1, 1), 5), "tensor([[[5.]]])\n");
    /* Columns share one width. */
    CHECK_PRINT(T(NB_F32, S(2, 2), -1.5, 2, 3, 4),
                "tensor([[-1.5000,  2.0000],\n"
                "        [ 3.0000,  4.0000]])\n");
    CHECK_PRINT(T(NB_I64, S(3), 1, -10, 100), "tensor([  1, -10, 100])\n");
    CHECK_PRINT(T(NB_BOOL, S(2, 2), 1, 0, 0, 1),
                "tensor([[ True, False],\n"
                "        [False,  True]])\n");
    /* Rows wrap at 80 columns. */
    CHECK_PRINT(GEN(NB_F32, S(20), f_index),
                "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
                "        14., 15., 16., 17., 18., 19.])\n");
    CHECK_PRINT(GEN(NB_F64, S(40), f_tenths),
                "tensor([0.0500, 0.1500, 0.2500, 0.3500, 0.4500, 0.5500, 0.6500, 0.7500, 0.8500,\n"
                "        0.9500, 1.0500, 1.1500, 1.2500, 1.3500, 1.4500, 1.5500, 1.6500, 1.7500,\n"
                "        1.8500, 1.9500, 2.0500, 2.1500, 2.2500, 2.3500, 2.4500, 2.5500, 2.6500,\n"
                "        2.7500, 2.8500, 2.9500, 3.0500, 3.1500, 3.2500, 3.3500, 3.4500, 3.5500,\n"
                "        3.6500, 3.7500, 3.8500, 3.9500], dtype=float64)\n");
    CHECK_PRINT(GEN(NB_F64, S(2, 20), f_halves),
                "tensor([[ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
                "         12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
                "         24.0000, 25.5000, 27.0000, 28.5000],\n"
                "        [30.0000, 31.5000, 33.0000, 34.5000, 36.0000, 37.5000, 39.0000, 40.5000,\n"
                "         42.0000, 43.5000, 45.0000, 46.5000, 48.0000, 49.5000, 51.0000, 52.5000,\n"
                "         54.0000, 55.5000, 57.0000, 58.5000]], dtype=float64)\n");
    /* The dtype moves to its own line when the last one is full. */
    CHECK_PRINT(GEN(NB_F64, S(12), f_index),
                "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11.],\n"
                "       dtype=float64)\n");
}

static void test_print_number_formats(void)
{
    CHECK_PRINT(T(NB_F32, S(2), 1e-5, 1), "tensor([1.0000e-05, 1.0000e+00])\n");
    CHECK_PRINT(T(NB_F32, S(2), 1e9, 1), "tensor([1.0000e+09, 1.0000e+00])\n");
    CHECK_PRINT(T(NB_F32, S(2), -1e-5, 2e3), "tensor([-1.0000e-05,  2.0000e+03])\n");
    CHECK_PRINT(T(NB_F64, S(2, 2), 1e10, 2, -3.5, 0),
                "tensor([[ 1.0000e+10,  2.0000e+00],\n"
                "        [-3.5000e+00,  0.0000e+00]], dtype=float64)\n");
    CHECK_PRINT(T(NB_F32, S(4), NAN, INFINITY, -INFINITY, 1.5), "tensor([   nan,    inf,   -inf, 1.5000])\n");
    CHECK_PRINT(T(NB_F32, S(3), -NAN, 1, 2), "tensor([nan, 1., 2.])\n");
    CHECK_PRINT(T(NB_F32, S(2), 0, 0), "tensor([0., 0.])\n");
    CHECK_PRINT(T(NB_F32, S(1), 0.1), "tensor([0.1000])\n");
    CHECK_PRINT(T(NB_F32, S(3), -0.0, 1.5, 2), "tensor([-0.0000, 1.5000, 2.0000])\n");
    CHECK_PRINT(T(NB_I32, S(2), 1, -2), "tensor([ 1, -2], dtype=int32)\n");
    CHECK_PRINT(T(NB_U8, S(3), 0, 128, 255), "tensor([  0, 128, 255], dtype=uint8)\n");
    /* int64 prints exactly, not through double. */
    int64_t ext[2] = {INT64_MAX, INT64_MIN};
    nb_tensor *t = NULL;
    CHECK_OK(nb_tensor_from_data(&t, NB_I64, 1, S(2), ext));
    CHECK_PRINT(t, "tensor([ 9223372036854775807, -9223372036854775808])\n");
}

static void test_print_scalars_and_empty(void)
{
    CHECK_PRINT(tscalar(NB_I64, 7), "tensor(7)\n");
    CHECK_PRINT(tscalar(NB_BOOL, 1), "tensor(True)\n");
    CHECK_PRINT(tscalar(NB_F64, -0.5), "tensor(-0.5000, dtype=float64)\n");
    CHECK_PRINT(tscalar(NB_F32, 0), "tensor(0.)\n");
    nb_tensor *t = NULL;
    CHECK_OK(nb_tensor_new(&t, NB_F32, 1, S(0)));
    CHECK_PRINT(t, "tensor([])\n");
    CHECK_OK(nb_tensor_new(&t, NB_F64, 2, S(2, 0)));
    CHECK_PRINT(t, "tensor([], size=(2, 0), dtype=float64)\n");
    CHECK_OK(nb_tensor_new(&t, NB_I64, 1, S(0)));
    CHECK_PRINT(t, "tensor([], dtype=int64)\n");
    CHECK_OK(nb_tensor_new(&t, NB_BOOL, 3, S(3, 0, 2)));
    CHECK_PRINT(t, "tensor([], size=(3, 0, 2), dtype=bool)\n");
}

static void test_print_views(void)
{
    nb_tensor *t = T(NB_F32, S(2, 2), 1, 2, 3, 4), *v = NULL;
    CHECK_OK(nb_tensor_transpose(&v, t, 0, 1));
    CHECK_PRINT(v, "tensor([[1., 3.],\n        [2., 4.]])\n");
    CHECK_OK(nb_tensor_slice(&v, t, 0, 1, 2, 1));
    CHECK_PRINT(v, "tensor([[3., 4.]])\n");
    CHECK_OK(nb_tensor_expand(&v, t, 3, S(2, 2, 2)));
    CHECK_PRINT(v, "tensor([[[1., 2.],\n         [3., 4.]],\n\n        [[1., 2.],\n         [3., 4.]]])\n");
    /* A summarised view reads the right elements. */
    nb_tensor *big = GEN(NB_I64, S(3, 1000), f_index), *bt = NULL;
    CHECK_OK(nb_tensor_transpose(&bt, big, 0, 1));
    CHECK_PRINT(bt,
                "tensor([[   0, 1000, 2000],\n        [   1, 1001, 2001],\n        [   2, 1002, 2002],\n"
                "        ...,\n        [ 997, 1997, 2997],\n        [ 998, 1998, 2998],\n"
                "        [ 999, 1999, 2999]])\n");
    release_all(t, big, NULL);
}

static void test_print_file_and_errors(void)
{
    nb_tensor *t = T(NB_F64, S(2), 1.5, 2.25);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(nb_tensor_print(t, f));
        rewind(f);
        char buf[128] = "";
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        CHECK_STR(buf, "tensor([1.5000, 2.2500], dtype=float64)\n");
        CHECK_ERR(nb_tensor_print(NULL, f), NB_ERR_ARG, "print");
        fclose(f);
    }
    CHECK_ERR(nb_tensor_print(t, NULL), NB_ERR_ARG, "print");
    nb_clear_error();
    CHECK(nb_tensor_to_string(NULL) == NULL && strstr(nb_last_error(), "print"));
    nb_tensor_release(t);
}

int main(void)
{
    RUN(test_print_brief_cases);
    RUN(test_print_summarised);
    RUN(test_print_layout);
    RUN(test_print_number_formats);
    RUN(test_print_scalars_and_empty);
    RUN(test_print_views);
    RUN(test_print_file_and_errors);
    return test_report();
}
