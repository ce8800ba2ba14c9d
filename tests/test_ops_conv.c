/* Tests of conv2d, pool2d and their gradient ops: hand-computed cases, a
 * naive direct convolution and pooling as references, finite differences
 * for the gradients, build-time inference and errors. */
#include "convnorm_util.h"
#include "kernels/cpu/gemm.h"

static const nb_dtype dtypes[] = {NB_F32, NB_F64};

/* ---- conv2d reference ------------------------------------------------------ */

typedef struct conv_case {
    int64_t n, c, h, w, m, kh, kw;
    int64_t stride[2];
    int npad;
    int64_t pad[4]; /* as given: 2 or 4 values */
    int64_t dil[2];
    int64_t groups;
    bool bias;
} conv_case;

static void pads4(const conv_case *k, int64_t p[4])
{
    if (k->npad == 2) p[0] = p[1] = k->pad[0], p[2] = p[3] = k->pad[1];
    else memcpy(p, k->pad, 4 * sizeof *p);
}

static int conv_attrs(const conv_case *k, nb_attr a[4])
{
    a[0] = NB_ATTR_INTS_N("strides", 2, k->stride);
    a[1] = NB_ATTR_INTS_N("paddings", k->npad, k->pad);
    a[2] = NB_ATTR_INTS_N("dilations", 2, k->dil);
    a[3] = NB_ATTR_INT("groups", k->groups);
    return 4;
}

static void conv_out_hw(const conv_case *k, int64_t *ho, int64_t *wo)
{
    int64_t p[4];
    pads4(k, p);
    *ho = (k->h + p[0] + p[1] - (k->dil[0] * (k->kh - 1) + 1)) / k->stride[0] + 1;
    *wo = (k->w + p[2] + p[3] - (k->dil[1] * (k->kw - 1) + 1)) / k->stride[1] + 1;
}

/* Every multiply of the direct convolution: visit(ctx, x index, y index,
 * filter index) for each input element that meets a filter tap in a window. */
typedef void (*tap_fn)(void *ctx, int64_t xi, int64_t yi, int64_t fi);
static void conv_taps(const conv_case *k, tap_fn visit, void *ctx)
{
    int64_t p[4], ho, wo;
    pads4(k, p);
    conv_out_hw(k, &ho, &wo);
    const int64_t cg = k->c / k->groups, mg = k->m / k->groups;
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t m = 0; m < k->m; m++)
            for (int64_t oh = 0; oh < ho; oh++)
                for (int64_t ow = 0; ow < wo; ow++)
                    for (int64_t cc = 0; cc < cg; cc++)
                        for (int64_t i = 0; i < k->kh; i++)
                            for (int64_t j = 0; j < k->kw; j++) {
                                int64_t ih = oh * k->stride[0] - p[0] + i * k->dil[0];
                                int64_t iw = ow * k->stride[1] - p[2] + j * k->dil[1];
                                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                                visit(ctx, ((n * k->c + (m / mg) * cg + cc) * k->h + ih) * k->w + iw,
                                      ((n * k->m + m) * ho + oh) * wo + ow, ((m * cg + cc) * k->kh + i) * k->kw + j);
                            }
}

/* acc[a] += u[b] * f[fi]: with (a, b) = (y, x) the convolution, with
 * (dx, dy) its gradient for the input. */
typedef struct tap_sum {
    nb_tensor *acc;
    const nb_tensor *u, *f;
    bool to_x; /* acc is indexed like x (the input gradient) */
} tap_sum;

static void add_tap(void *ctx, int64_t xi, int64_t yi, int64_t fi)
{
    tap_sum *t = ctx;
    int64_t a = t->to_x ? xi : yi, b = t->to_x ? yi : xi;
    nb_tensor_set(t->acc, a, nb_tensor_get(t->acc, a) + nb_tensor_get(t->u, b) * nb_tensor_get(t->f, fi));
}

/* dw[fi] += dy[yi] * x[xi]: the gradient for the filter. */
typedef struct tap_dw {
    nb_tensor *dw;
    const nb_tensor *dy, *x;
} tap_dw;

static void add_tap_dw(void *ctx, int64_t xi, int64_t yi, int64_t fi)
{
    tap_dw *t = ctx;
    nb_tensor_set(t->dw, fi, nb_tensor_get(t->dw, fi) + nb_tensor_get(t->dy, yi) * nb_tensor_get(t->x, xi));
}

/* Direct convolution, straight from the definition. */
static nb_tensor *ref_conv(const conv_case *k, const nb_tensor *x, const nb_tensor *f, const nb_tensor *b)
{
    int64_t ho, wo;
    conv_out_hw(k, &ho, &wo);
    nb_tensor *y;
    if (nb_tensor_new(&y, NB_F64, 4, S(k->n, k->m, ho, wo))) return NULL;
    for (int64_t i = 0; b && i < nb_tensor_numel(y); i++) nb_tensor_set(y, i, nb_tensor_get(b, i / (ho * wo) % k->m));
    conv_taps(k, add_tap, &(tap_sum){y, x, f, false});
    return y;
}

static const conv_case conv_cases[] = {
    /* n  c  h  w  m kh kw  stride  npad pad           dil    groups bias */
    {2, 3, 7, 6, 4, 3, 3, {1, 1}, 2, {0, 0}, {1, 1}, 1, true},
    {2, 3, 7, 6, 4, 3, 3, {2, 2}, 2, {1, 1}, {1, 1}, 1, false},
    {1, 2, 6, 7, 3, 3, 2, {2, 1}, 4, {0, 2, 1, 0}, {1, 1}, 1, true},
    {2, 2, 7, 7, 2, 3, 3, {1, 1}, 2, {2, 2}, {2, 2}, 1, true},
    {2, 4, 5, 6, 6, 3, 3, {1, 2}, 2, {1, 0}, {1, 1}, 2, true},
    {2, 3, 5, 5, 3, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 3, false},      /* depthwise */
    {1, 3, 5, 5, 6, 3, 3, {2, 2}, 4, {1, 1, 0, 2}, {1, 2}, 3, true}, /* depthwise, multiplier 2 */
    {2, 4, 3, 4, 6, 1, 1, {1, 1}, 2, {0, 0}, {1, 1}, 2, true},       /* pointwise: no im2col */
    {2, 4, 3, 4, 5, 1, 1, {1, 1}, 2, {0, 0}, {1, 1}, 1, false},
    {2, 3, 5, 5, 2, 1, 1, {2, 2}, 2, {0, 0}, {1, 1}, 1, false},  /* 1x1 but strided */
    {4, 4, 10, 10, 8, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 1, true}, /* big enough to split the batch */
};
#define N_CONV_CASES ((int)(sizeof conv_cases / sizeof *conv_cases))

static void test_conv2d_hand(void)
{
    for (int d = 0; d < 2; d++) {
        nb_tensor *x = T(dtypes[d], S(1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9);
        nb_tensor *f = T(dtypes[d], S(1, 1, 2, 2), 1, 0, 0, 1);
        nb_tensor *b = T(dtypes[d], S(1), 0.5);
        nb_tensor *in1[] = {x, f};
        nb_tensor *y = RUN1_NOATTR("conv2d", in1);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 6, 8, 12, 14);
        CHECK(y && y->dtype == dtypes[d]);
        nb_tensor_release(y);
        nb_tensor *in2[] = {x, f, b};
        y = RUN1_NOATTR("conv2d", in2);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 6.5, 8.5, 12.5, 14.5);
        nb_tensor_release(y);
        /* 3x3 ones, padding 1, stride 2: the four corner 2x2 sums. */
        nb_tensor *ones = T(dtypes[d], S(1, 1, 3, 3), 1, 1, 1, 1, 1, 1, 1, 1, 1);
        nb_tensor *in3[] = {x, ones};
        nb_attr a[] = {NB_ATTR_INTS("strides", 2, 2), NB_ATTR_INTS("paddings", 1, 1)};
        y = RUN1("conv2d", in3, a);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 12, 16, 24, 28);
        nb_tensor_release(y);
        /* Asymmetric padding: only the top row and the right column. */
        nb_attr a4[] = {NB_ATTR_INTS("paddings", 1, 0, 0, 1)};
        y = RUN1("conv2d", in3, a4);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 21, 16, 45, 33);
        nb_tensor_release(y);
        RELEASE(x, f, b, ones);
    }
}

static nb_tensor *ref_conv_dx(const conv_case *k, const nb_tensor *dy, const nb_tensor *f);

/* The gradient of ref_conv for its filter. */
static nb_tensor *ref_conv_dw(const conv_case *k, const nb_tensor *dy, const nb_tensor *x)
{
    nb_tensor *dw;
    if (nb_tensor_new(&dw, NB_F64, 4, S(k->m, k->c / k->groups, k->kh, k->kw))) return NULL;
    conv_taps(k, add_tap_dw, &(tap_dw){dw, dy, x});
    return dw;
}

/* Runs each case in float32 and float64, on each variant of the GEMM from
 * isa_lo up to the widest this CPU runs and through the BLAS where nabla has
 * one (isa widest + 1), against the direct convolution; with grad,
 * conv2d_grad's DInput and DFilter too. */
static void check_against_direct(const char *what, const conv_case *cases, int n, uint64_t seed, int isa_lo, bool grad)
{
    const int widest = nb_gemm_isa();
    for (int ci = 0; ci < n; ci++) {
        const conv_case *k = &cases[ci];
        int64_t ho, wo;
        conv_out_hw(k, &ho, &wo);
        nb_tensor *x = TR(NB_F64, &seed, S(k->n, k->c, k->h, k->w));
        nb_tensor *f = TR(NB_F64, &seed, S(k->m, k->c / k->groups, k->kh, k->kw));
        nb_tensor *b = k->bias ? TR(NB_F64, &seed, S(k->m)) : NULL;
        nb_tensor *dy = grad ? TR(NB_F64, &seed, S(k->n, k->m, ho, wo)) : NULL;
        nb_tensor *want = ref_conv(k, x, f, b);
        nb_tensor *want_dx = grad ? ref_conv_dx(k, dy, f) : NULL, *want_dw = grad ? ref_conv_dw(k, dy, x) : NULL;
        nb_attr a[4];
        int na = conv_attrs(k, a);
        for (int isa = isa_lo < widest ? isa_lo : widest; isa <= widest + 1; isa++) {
            if (!nb_gemm_use_blas(isa > widest ? NB_GEMM_BLAS_ON : NB_GEMM_BLAS_OFF) && isa > widest) break;
            nb_gemm_limit_isa(isa > widest ? widest : isa);
            for (int d = 0; d < 2; d++) {
                nb_tensor *in[] = {tcast(x, dtypes[d]), tcast(f, dtypes[d]), tcast(b, dtypes[d])};
                nb_tensor *y = NULL;
                CHECK_OK(nb_op_run("conv2d", NB_TENSORS_N(k->bias ? 3 : 2, in), NB_ATTRS_N(na, a), 1, &y));
                double err = rel_diff(y, want), err_dx = 0, err_dw = 0;
                if (grad) {
                    nb_tensor *gin[] = {in[0], in[1], tcast(dy, dtypes[d])}, *g[3] = {NULL, NULL, NULL};
                    CHECK_OK(run_op("conv2d_grad", 3, gin, na, a, 3, g));
                    err_dx = rel_diff(g[0], want_dx);
                    err_dw = rel_diff(g[1], want_dw);
                    release_n(3, g);
                    nb_tensor_release(gin[2]);
                }
                /* (a float32 filter gradient sums up to 4096 products) */
                const double tol = d ? 1e-12 : 1e-5, tol_dw = d ? 1e-12 : 1e-4;
                if (!(err <= tol) || !(err_dx <= tol) || !(err_dw <= tol_dw)) {
                    fprintf(stderr,
                            "  %s case %d (%s, isa %d): output, DInput and DFilter differ from the direct "
                            "convolution's by %g, %g and %g\n",
                            what, ci, nb_dtype_name(dtypes[d]), isa, err, err_dx, err_dw);
                    test_failures_in_current++;
                }
                CHECK(!y || y->dtype == dtypes[d]);
                RELEASE(y, in[0], in[1], in[2]);
            }
        }
        RELEASE(x, f, b, dy, want, want_dx, want_dw);
    }
    nb_gemm_limit_isa(NB_ISA_AVX512);
    nb_gemm_use_blas(NB_GEMM_BLAS_AUTO);
}

static void test_conv2d_reference(void)
{
    check_against_direct("conv", conv_cases, N_CONV_CASES, 42, NB_ISA_AVX512, false);
}

/* Products the blocked GEMM runs with the column matrix packed straight
 * from the image (pack_cols: output rows of 32 or more, more than 32
 * filters a group; pack_cols_t, the filter gradient's: unit stride
 * across): strips that straddle output rows, padding on
 * every side, strides, dilation and groups, one image (whose products
 * three threads split by columns), several, and more than the gradient's
 * chunks of images (conv.c, grad_chunks), under every instruction set
 * the machine runs (strips of 8, 16 and 32). */
static const conv_case packed_cases[] = {
    /* n  c  h   w   m  kh kw  stride  npad pad           dil    groups bias */
    {2, 4, 13, 35, 40, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 1, true},
    {2, 3, 15, 70, 36, 3, 3, {2, 2}, 4, {1, 0, 2, 1}, {1, 1}, 1, false},
    {1, 4, 12, 36, 33, 3, 3, {1, 1}, 2, {2, 2}, {2, 2}, 1, true},
    {2, 4, 6, 40, 68, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 2, true},
    {1, 2, 5, 70, 40, 5, 5, {1, 2}, 2, {2, 2}, {1, 1}, 1, true},
    {2, 3, 32, 32, 40, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 1, true},
    {1, 8, 64, 64, 40, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 1, true},   /* one image, split by columns */
    {1, 24, 40, 40, 40, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 1, false}, /* and its filter gradient too */
    {2, 3, 20, 21, 8, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 1, true},    /* few filters: the gradient's packer only */
    {30, 2, 4, 33, 36, 3, 3, {1, 1}, 2, {1, 1}, {1, 1}, 1, true},   /* more images than chunks: some take two */
};

static void test_conv2d_packed_columns(void)
{
    int threads = nb_num_threads();
    nb_set_num_threads(3);
    check_against_direct("packed", packed_cases, (int)(sizeof packed_cases / sizeof *packed_cases), 5, NB_ISA_GENERIC,
                         true);
    nb_set_num_threads(threads);
}

/* The gradient of ref_conv for its input: each output's dy back onto the
 * input elements it read. */
static nb_tensor *ref_conv_dx(const conv_case *k, const nb_tensor *dy, const nb_tensor *f)
{
    nb_tensor *dx;
    if (nb_tensor_new(&dx, NB_F64, 4, S(k->n, k->c, k->h, k->w))) return NULL;
    conv_taps(k, add_tap, &(tap_sum){dx, dy, f, true});
    return dx;
}

/* im2col copies each row of an image's window in fixed-size pieces chosen
 * by the row's byte length (conv.c, copy_row): widths that land on every
 * piece size and across the 128-byte limit, both dtypes, with and without
 * padding, against the direct convolution; and col2im adds rows back the
 * same way (conv_impl.h, add_runs), so the input gradient too. */
static void test_conv2d_row_widths(void)
{
    static const int64_t widths[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 40};
    uint64_t seed = 7;
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (int pad = 0; pad < 2; pad++) {
            int64_t w = widths[wi] + 2 - 2 * pad; /* output width widths[wi] */
            conv_case k = {2, 2, 4, w, 3, 3, 3, {1, 1}, 2, {pad, pad}, {1, 1}, 1, false};
            nb_tensor *x = TR(NB_F64, &seed, S(k.n, k.c, k.h, k.w));
            nb_tensor *f = TR(NB_F64, &seed, S(k.m, k.c, k.kh, k.kw));
            nb_tensor *want = ref_conv(&k, x, f, NULL);
            int64_t ho, wo;
            conv_out_hw(&k, &ho, &wo);
            nb_tensor *dy = TR(NB_F64, &seed, S(k.n, k.m, ho, wo));
            nb_tensor *want_dx = ref_conv_dx(&k, dy, f);
            nb_attr a[4];
            int na = conv_attrs(&k, a);
            for (int d = 0; d < 2; d++) {
                nb_tensor *in[] = {tcast(x, dtypes[d]), tcast(f, dtypes[d]), tcast(dy, dtypes[d])};
                nb_tensor *y = NULL, *dx = NULL;
                CHECK_OK(nb_op_run("conv2d", NB_TENSORS_N(2, in), NB_ATTRS_N(na, a), 1, &y));
                CHECK_OK(nb_op_run("conv2d_grad", NB_TENSORS_N(3, in), NB_ATTRS_N(na, a), 1, &dx));
                double err = rel_diff(y, want), err_dx = rel_diff(dx, want_dx);
                if (!(err <= (d ? 1e-12 : 1e-5)) || !(err_dx <= (d ? 1e-12 : 1e-5))) {
                    fprintf(stderr,
                            "  output width %lld, pad %d (%s): output and input gradient differ from the "
                            "direct convolution's by %g and %g\n",
                            (long long)widths[wi], pad, nb_dtype_name(dtypes[d]), err, err_dx);
                    test_failures_in_current++;
                }
                RELEASE(y, dx, in[0], in[1], in[2]);
            }
            RELEASE(x, f, want, dy, want_dx);
        }
}

/* conv2d_grad against finite differences of conv2d (float64), and the
 * float32 kernel against the float64 one. */
static void test_conv2d_grad(void)
{
    uint64_t seed = 7;
    for (int ci = 0; ci < N_CONV_CASES - 1; ci++) {
        const conv_case *k = &conv_cases[ci];
        int64_t ho, wo;
        conv_out_hw(k, &ho, &wo);
        nb_tensor *x = TR(NB_F64, &seed, S(k->n, k->c, k->h, k->w));
        nb_tensor *f = TR(NB_F64, &seed, S(k->m, k->c / k->groups, k->kh, k->kw));
        nb_tensor *b = TR(NB_F64, &seed, S(k->m));
        nb_tensor *dy = TR(NB_F64, &seed, S(k->n, k->m, ho, wo));
        nb_attr a[4];
        int na = conv_attrs(k, a);
        nb_tensor *gin[] = {x, f, dy}, *g[3];
        CHECK_OK(run_op("conv2d_grad", 3, gin, na, a, 3, g));
        nb_tensor *fin[] = {x, f, b};
        CHECK_FD(fd_check("conv2d", 3, fin, na, a, 1, 0, dy, 0, g[0]));
        CHECK_FD(fd_check("conv2d", 3, fin, na, a, 1, 0, dy, 1, g[1]));
        CHECK_FD(fd_check("conv2d", 3, fin, na, a, 1, 0, dy, 2, g[2]));

        nb_tensor *gin32[] = {tcast(x, NB_F32), tcast(f, NB_F32), tcast(dy, NB_F32)}, *g32[3];
        CHECK_OK(run_op("conv2d_grad", 3, gin32, na, a, 3, g32));
        for (int i = 0; i < 3; i++) {
            CHECK(g32[i] && g32[i]->dtype == NB_F32);
            CHECK(rel_diff(g32[i], g[i]) < 1e-5);
        }
        /* Only some outputs: DInput alone. */
        nb_tensor *only = NULL;
        CHECK_OK(nb_op_run("conv2d_grad", NB_TENSORS_N(3, gin), NB_ATTRS_N(na, a), 1, &only));
        CHECK(rel_diff(only, g[0]) == 0);
        nb_tensor_release(only);
        release_n(3, g);
        release_n(3, g32);
        release_n(3, gin32);
        RELEASE(x, f, b, dy);
    }
}

/* A batch split across threads gives what the images give one at a time. */
static void test_conv2d_grad_batch_split(void)
{
    uint64_t seed = 99;
    const conv_case *k = &conv_cases[N_CONV_CASES - 1];
    int64_t ho, wo;
    conv_out_hw(k, &ho, &wo);
    nb_attr a[4];
    int na = conv_attrs(k, a);
    nb_tensor *x = TR(NB_F64, &seed, S(k->n, k->c, k->h, k->w));
    nb_tensor *f = TR(NB_F64, &seed, S(k->m, k->c, k->kh, k->kw));
    nb_tensor *dy = TR(NB_F64, &seed, S(k->n, k->m, ho, wo));
    nb_tensor *gin[] = {x, f, dy}, *g[3];
    CHECK_OK(run_op("conv2d_grad", 3, gin, na, a, 3, g));
    nb_tensor *dw_sum, *db_sum;
    CHECK_OK(nb_tensor_new(&dw_sum, NB_F64, 4, f->shape));
    CHECK_OK(nb_tensor_new(&db_sum, NB_F64, 1, S(k->m)));
    double worst = 0;
    for (int64_t n = 0; n < k->n; n++) {
        nb_tensor *xn, *dyn, *gn[3];
        CHECK_OK(nb_tensor_slice(&xn, x, 0, n, n + 1, 1));
        CHECK_OK(nb_tensor_slice(&dyn, dy, 0, n, n + 1, 1));
        nb_tensor *in[] = {xn, f, dyn};
        CHECK_OK(run_op("conv2d_grad", 3, in, na, a, 3, gn));
        int64_t per = nb_tensor_numel(gn[0]);
        for (int64_t i = 0; i < per; i++) {
            double d = fabs(nb_tensor_get(gn[0], i) - nb_tensor_get(g[0], n * per + i));
            if (d > worst) worst = d;
        }
        for (int64_t i = 0; i < nb_tensor_numel(f); i++)
            nb_tensor_set(dw_sum, i, nb_tensor_get(dw_sum, i) + nb_tensor_get(gn[1], i));
        for (int64_t i = 0; i < k->m; i++) nb_tensor_set(db_sum, i, nb_tensor_get(db_sum, i) + nb_tensor_get(gn[2], i));
        release_n(3, gn);
        RELEASE(xn, dyn);
    }
    CHECK(worst < 1e-12);
    CHECK(rel_diff(g[1], dw_sum) < 1e-12);
    CHECK(rel_diff(g[2], db_sum) < 1e-12);
    release_n(3, g);
    RELEASE(x, f, dy, dw_sum, db_sum);
}

static void test_conv2d_infer(void)
{
    nb_var_info x = VI(NB_F32, S(-1, 3, 8, 8)), f = VI(NB_F32, S(4, 3, 3, 3)), b = VI(NB_F32, S(4)), out[3];
    const nb_var_info *in[] = {&x, &f, &b};
    nb_attr a[] = {NB_ATTR_INTS("strides", 2, 2), NB_ATTR_INTS("paddings", 1, 1)};
    CHECK_OK(infer_shapes("conv2d", 3, in, 2, a, 1, out));
    CHECK_INFO(out[0], NB_F32, S(-1, 4, 4, 4));
    nb_var_info xh = VI(NB_F64, S(-1, 3, -1, 9)), f64 = VI(NB_F64, S(4, 3, 3, 3));
    const nb_var_info *in2[] = {&xh, &f64, NULL};
    CHECK_OK(infer_shapes("conv2d", 3, in2, 0, NULL, 1, out));
    CHECK_INFO(out[0], NB_F64, S(-1, 4, -1, 7));
    /* Unknown channels cannot be checked yet and pass. */
    nb_var_info xc = VI(NB_F32, S(2, -1, 8, 8));
    const nb_var_info *in3[] = {&xc, &f};
    CHECK_OK(infer_shapes("conv2d", 2, in3, 0, NULL, 1, out));
    CHECK_INFO(out[0], NB_F32, S(2, 4, 6, 6));

    nb_var_info dy = VI(NB_F32, S(-1, 4, 4, 4));
    const nb_var_info *gin[] = {&x, &f, &dy};
    CHECK_OK(infer_shapes("conv2d_grad", 3, gin, 2, a, 3, out));
    CHECK_INFO(out[0], NB_F32, S(-1, 3, 8, 8));
    CHECK_INFO(out[1], NB_F32, S(4, 3, 3, 3));
    CHECK_INFO(out[2], NB_F32, S(4));
    nb_var_info bad_dy = VI(NB_F32, S(-1, 4, 5, 4));
    const nb_var_info *gin2[] = {&x, &f, &bad_dy};
    CHECK_ERR(infer_shapes("conv2d_grad", 3, gin2, 2, a, 3, out), NB_ERR_SHAPE, "conv2d_grad: DOutput");
}

static void test_conv2d_errors(void)
{
    nb_tensor *x = NULL, *y = NULL;
    CHECK_OK(nb_tensor_new(&x, NB_F32, 4, S(1, 3, 4, 4)));
    nb_tensor *f2 = NULL, *f3 = NULL, *big = NULL, *b5 = NULL, *f_odd = NULL, *xi = NULL, *x4 = NULL;
    CHECK_OK(nb_tensor_new(&f2, NB_F32, 4, S(4, 2, 3, 3)));
    CHECK_OK(nb_tensor_new(&f3, NB_F32, 4, S(4, 3, 3, 3)));
    CHECK_OK(nb_tensor_new(&big, NB_F32, 4, S(4, 3, 5, 5)));
    CHECK_OK(nb_tensor_new(&b5, NB_F32, 1, S(5)));
    CHECK_OK(nb_tensor_new(&f_odd, NB_F32, 4, S(3, 2, 3, 3)));
    CHECK_OK(nb_tensor_new(&xi, NB_I32, 4, S(1, 3, 4, 4)));
    CHECK_OK(nb_tensor_new(&x4, NB_F32, 4, S(1, 4, 4, 4)));

    nb_tensor *mismatch[] = {x, f2};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, mismatch), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE,
              "conv2d: Input has shape [1, 3, 4, 4]");
    CHECK(strstr(nb_last_error(), "[4, 2, 3, 3]") != NULL);
    nb_attr g2[] = {NB_ATTR_INT("groups", 2)};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, mismatch), NB_ATTRS_N(1, g2), 1, &y), NB_ERR_SHAPE,
              "not divisible by groups 2");
    nb_tensor *odd[] = {x4, f_odd};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, odd), NB_ATTRS_N(1, g2), 1, &y), NB_ERR_SHAPE,
              "conv2d: Filter has shape [3, 2, 3, 3]");
    nb_tensor *too_big[] = {x, big};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, too_big), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE,
              "bigger than the padded input");
    nb_attr pad1[] = {NB_ATTR_INTS("paddings", 1, 1)};
    CHECK_OK(nb_op_run("conv2d", NB_TENSORS_N(2, too_big), NB_ATTRS_N(1, pad1), 1, &y));
    CHECK(y && y->shape[2] == 2);
    nb_tensor_release(y);
    y = NULL;
    nb_attr dil[] = {NB_ATTR_INTS("dilations", 2, 2)};
    nb_tensor *ok[] = {x, f3};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, ok), NB_ATTRS_N(1, dil), 1, &y), NB_ERR_SHAPE, "dilated kernel (5)");
    nb_tensor *bias_bad[] = {x, f3, b5};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(3, bias_bad), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE,
              "conv2d: Bias has shape [5]");
    nb_tensor *ints[] = {xi, f3};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, ints), NB_NO_ATTRS, 1, &y), NB_ERR_DTYPE,
              "conv2d: Input has dtype int32");
    nb_attr pad3[] = {NB_ATTR_INTS("paddings", 1, 1, 1)};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, ok), NB_ATTRS_N(1, pad3), 1, &y), NB_ERR_ARG,
              "conv2d: attribute paddings");
    nb_attr s0[] = {NB_ATTR_INTS("strides", 0, 1)};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, ok), NB_ATTRS_N(1, s0), 1, &y), NB_ERR_ARG,
              "conv2d: attribute strides");
    nb_tensor *rank[] = {b5, f3};
    CHECK_ERR(nb_op_run("conv2d", NB_TENSORS_N(2, rank), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE,
              "conv2d: Input has shape [5]");
    CHECK(y == NULL);
    RELEASE(x, f2, f3, big, b5, f_odd, xi, x4);
}

/* ---- pool2d ----------------------------------------------------------------- */

typedef struct pool_case {
    int64_t n, c, h, w;
    int64_t ksize[2], stride[2];
    int npad;
    int64_t pad[4];
    bool is_max, exclusive, ceil_mode, global;
} pool_case;

static int pool_attrs(const pool_case *k, nb_attr a[7])
{
    a[0] = NB_ATTR_STRING("pooling_type", k->is_max ? "max" : "avg");
    a[1] = NB_ATTR_INTS_N("ksize", 2, k->ksize);
    a[2] = NB_ATTR_INTS_N("strides", 2, k->stride);
    a[3] = NB_ATTR_INTS_N("paddings", k->npad, k->pad);
    a[4] = NB_ATTR_BOOL("exclusive", k->exclusive);
    a[5] = NB_ATTR_BOOL("ceil_mode", k->ceil_mode);
    a[6] = NB_ATTR_BOOL("global_pooling", k->global);
    return 7;
}

/* Pooling straight from the definition. */
static nb_tensor *ref_pool(const pool_case *k, const nb_tensor *x)
{
    int64_t p[4], kh = k->ksize[0], kw = k->ksize[1], sh = k->stride[0], sw = k->stride[1], ho, wo;
    if (k->npad == 2) p[0] = p[1] = k->pad[0], p[2] = p[3] = k->pad[1];
    else memcpy(p, k->pad, sizeof p);
    if (k->global) {
        kh = k->h, kw = k->w, sh = sw = 1;
        memset(p, 0, sizeof p);
    }
    int64_t ins[2] = {k->h, k->w}, ks[2] = {kh, kw}, ss[2] = {sh, sw}, outs[2];
    for (int i = 0; i < 2; i++) {
        int64_t padded = ins[i] + p[2 * i] + p[2 * i + 1];
        outs[i] = k->ceil_mode ? (padded - ks[i] + ss[i] - 1) / ss[i] + 1 : (padded - ks[i]) / ss[i] + 1;
        if (k->ceil_mode && (outs[i] - 1) * ss[i] >= ins[i] + p[2 * i]) outs[i]--;
    }
    ho = outs[0], wo = outs[1];
    nb_tensor *y;
    if (nb_tensor_new(&y, NB_F64, 4, S(k->n, k->c, ho, wo))) return NULL;
    for (int64_t pl = 0; pl < k->n * k->c; pl++)
        for (int64_t oh = 0; oh < ho; oh++)
            for (int64_t ow = 0; ow < wo; ow++) {
                double best = -INFINITY, sum = 0;
                int count = 0;
                for (int64_t i = 0; i < kh; i++)
                    for (int64_t j = 0; j < kw; j++) {
                        int64_t ih = oh * sh - p[0] + i, iw = ow * sw - p[2] + j;
                        if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                        double v = nb_tensor_get(x, (pl * k->h + ih) * k->w + iw);
                        best = v > best ? v : best;
                        sum += v;
                        count++;
                    }
                double r = k->is_max ? best : sum / (k->exclusive ? count : (double)(kh * kw));
                nb_tensor_set(y, (pl * ho + oh) * wo + ow, r);
            }
    return y;
}

static const pool_case pool_cases[] = {
    /* n c h w kh kw stride npad pad   max excl ceil global */
    {2, 3, 6, 6, {2, 2}, {2, 2}, 2, {0, 0}, true, true, false, false},
    {2, 3, 6, 6, {2, 2}, {2, 2}, 2, {0, 0}, false, true, false, false},
    {1, 2, 5, 6, {3, 3}, {2, 2}, 2, {1, 1}, true, true, false, false},
    {1, 2, 5, 6, {3, 3}, {2, 2}, 2, {1, 1}, false, true, false, false},
    {1, 2, 5, 6, {3, 3}, {2, 2}, 2, {1, 1}, false, false, false, false},
    {1, 2, 5, 5, {2, 2}, {2, 2}, 2, {1, 1}, true, true, true, false}, /* ceil, last window dropped */
    {1, 2, 5, 7, {2, 3}, {2, 2}, 2, {0, 0}, false, true, true, false},
    {1, 2, 5, 7, {2, 3}, {2, 2}, 2, {0, 0}, false, false, true, false},
    {2, 2, 5, 5, {3, 2}, {1, 2}, 4, {1, 0, 0, 1}, true, true, false, false},
    {2, 2, 5, 5, {3, 2}, {1, 2}, 4, {1, 0, 0, 1}, false, true, false, false},
    {2, 3, 3, 4, {1, 1}, {1, 1}, 2, {0, 0}, true, true, false, true},
    {2, 3, 3, 4, {1, 1}, {1, 1}, 2, {0, 0}, false, true, false, true},
    /* Rows wide enough that the windows inside go together (pool_row), at
     * stride 1, 2 and 3 (the last one not a compile-time constant). */
    {2, 2, 7, 23, {3, 3}, {1, 1}, 2, {1, 1}, true, true, false, false},
    {2, 2, 7, 23, {3, 3}, {1, 1}, 2, {1, 1}, false, true, false, false},
    {2, 2, 9, 23, {3, 3}, {2, 2}, 2, {1, 1}, true, true, false, false},
    {2, 2, 9, 23, {3, 3}, {2, 2}, 2, {1, 1}, false, false, false, false},
    {1, 2, 11, 29, {5, 4}, {3, 3}, 4, {2, 1, 1, 2}, true, true, true, false},
    {1, 2, 11, 29, {5, 4}, {3, 3}, 4, {2, 1, 1, 2}, false, true, true, false},
};
#define N_POOL_CASES ((int)(sizeof pool_cases / sizeof *pool_cases))

static void test_pool2d_hand(void)
{
    for (int d = 0; d < 2; d++) {
        nb_tensor *x = T(dtypes[d], S(1, 1, 4, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
        nb_tensor *in[] = {x};
        nb_attr mx[] = {NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_INTS("strides", 2, 2)};
        nb_tensor *y = RUN1("pool2d", in, mx);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 6, 8, 14, 16);
        nb_tensor_release(y);
        nb_attr av[] = {NB_ATTR_STRING("pooling_type", "avg"), NB_ATTR_INTS("ksize", 2, 2),
                        NB_ATTR_INTS("strides", 2, 2)};
        y = RUN1("pool2d", in, av);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 3.5, 5.5, 11.5, 13.5);
        nb_tensor_release(y);
        /* 3x3 windows, padding 1, stride 2. */
        nb_attr mp[] = {NB_ATTR_INTS("ksize", 3, 3), NB_ATTR_INTS("strides", 2, 2), NB_ATTR_INTS("paddings", 1, 1)};
        y = RUN1("pool2d", in, mp);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 6, 8, 14, 16);
        nb_tensor_release(y);
        nb_attr ap[] = {NB_ATTR_STRING("pooling_type", "avg"), NB_ATTR_INTS("ksize", 3, 3),
                        NB_ATTR_INTS("strides", 2, 2), NB_ATTR_INTS("paddings", 1, 1)};
        y = RUN1("pool2d", in, ap);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 3.5, 5, 9.5, 11);
        nb_tensor_release(y);
        nb_attr ai[] = {NB_ATTR_STRING("pooling_type", "avg"), NB_ATTR_INTS("ksize", 3, 3),
                        NB_ATTR_INTS("strides", 2, 2), NB_ATTR_INTS("paddings", 1, 1),
                        NB_ATTR_BOOL("exclusive", false)};
        y = RUN1("pool2d", in, ai);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 14.0 / 9, 30.0 / 9, 57.0 / 9, 11);
        nb_tensor_release(y);
        /* ceil_mode keeps the partial windows at the end. */
        nb_attr cm[] = {NB_ATTR_INTS("ksize", 3, 3), NB_ATTR_INTS("strides", 2, 2), NB_ATTR_BOOL("ceil_mode", true)};
        y = RUN1("pool2d", in, cm);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 11, 12, 15, 16);
        nb_tensor_release(y);
        nb_attr cm2[] = {NB_ATTR_INTS("ksize", 3, 3), NB_ATTR_INTS("strides", 2, 2)};
        y = RUN1("pool2d", in, cm2);
        CHECK_TENSOR(y, S(1, 1, 1, 1), 1e-6, 11);
        nb_tensor_release(y);
        nb_attr cm3[] = {NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_INTS("strides", 3, 3), NB_ATTR_BOOL("ceil_mode", true)};
        y = RUN1("pool2d", in, cm3);
        CHECK_TENSOR(y, S(1, 1, 2, 2), 1e-6, 6, 8, 14, 16);
        nb_tensor_release(y);
        nb_attr gl[] = {NB_ATTR_STRING("pooling_type", "avg"), NB_ATTR_INTS("ksize", 1, 1),
                        NB_ATTR_BOOL("global_pooling", true)};
        y = RUN1("pool2d", in, gl);
        CHECK_TENSOR(y, S(1, 1, 1, 1), 1e-6, 8.5);
        nb_tensor_release(y);
        RELEASE(x);
    }
}

static void test_pool2d_reference(void)
{
    uint64_t seed = 5;
    for (int ci = 0; ci < N_POOL_CASES; ci++) {
        const pool_case *k = &pool_cases[ci];
        nb_tensor *x = TR(NB_F64, &seed, S(k->n, k->c, k->h, k->w));
        nb_tensor *want = ref_pool(k, x);
        nb_attr a[7];
        int na = pool_attrs(k, a);
        for (int d = 0; d < 2; d++) {
            nb_tensor *in[] = {tcast(x, dtypes[d])};
            nb_tensor *y = NULL;
            CHECK_OK(nb_op_run("pool2d", NB_TENSORS_N(1, in), NB_ATTRS_N(na, a), 1, &y));
            double err = rel_diff(y, want);
            if (!(err <= (d ? 1e-14 : 1e-6))) {
                fprintf(stderr, "  pool case %d (%s): differs from the reference by %g\n", ci, nb_dtype_name(dtypes[d]),
                        err);
                test_failures_in_current++;
            }
            RELEASE(y, in[0]);
        }
        RELEASE(x, want);
    }
}

static void test_pool2d_grad(void)
{
    uint64_t seed = 11;
    for (int ci = 0; ci < N_POOL_CASES; ci++) {
        const pool_case *k = &pool_cases[ci];
        nb_attr a[7];
        int na = pool_attrs(k, a);
        nb_tensor *x = TR(NB_F64, &seed, S(k->n, k->c, k->h, k->w)), *out = NULL;
        nb_tensor *fin[] = {x};
        CHECK_OK(nb_op_run("pool2d", NB_TENSORS_N(1, fin), NB_ATTRS_N(na, a), 1, &out));
        if (!out) {
            nb_tensor_release(x);
            continue;
        }
        nb_tensor *dout = TR(NB_F64, &seed, S(out->shape[0], out->shape[1], out->shape[2], out->shape[3]));
        nb_tensor *gin[] = {x, out, dout}, *dx = NULL;
        CHECK_OK(nb_op_run("pool2d_grad", NB_TENSORS_N(3, gin), NB_ATTRS_N(na, a), 1, &dx));
        double err = fd_check("pool2d", 1, fin, na, a, 1, 0, dout, 0, dx);
        if (!(err <= 1e-6)) {
            fprintf(stderr, "  pool case %d: gradient differs from finite differences by %g\n", ci, err);
            test_failures_in_current++;
        }
        nb_tensor *gin32[] = {tcast(x, NB_F32), tcast(out, NB_F32), tcast(dout, NB_F32)}, *dx32 = NULL;
        CHECK_OK(nb_op_run("pool2d_grad", NB_TENSORS_N(3, gin32), NB_ATTRS_N(na, a), 1, &dx32));
        CHECK(rel_diff(dx32, dx) < 1e-6);
        release_n(3, gin32);
        RELEASE(x, out, dout, dx, dx32);
    }
}

static void test_pool2d_grad_ties(void)
{
    /* Equal values: the whole gradient goes to the first maximum. */
    nb_tensor *x = T(NB_F64, S(1, 1, 2, 2), 3, 3, 1, 3), *in[] = {x};
    nb_attr a[] = {NB_ATTR_INTS("ksize", 2, 2)};
    nb_tensor *out = RUN1("pool2d", in, a);
    nb_tensor *dout = T(NB_F64, S(1, 1, 1, 1), 2);
    nb_tensor *gin[] = {x, out, dout};
    nb_tensor *dx = RUN1("pool2d_grad", gin, a);
    CHECK_TENSOR(dx, S(1, 1, 2, 2), 0, 2, 0, 0, 0);
    RELEASE(x, out, dout, dx);
}

/* The 2 x 2 stride-2 fast path (windows that tile the image) against the
 * general window loop, which an extra row and column that no window reaches
 * selects: ties (the first maximum takes the gradient, and gives the output
 * its sign of zero), NaNs, an Out with values of no window's maximum (its
 * gradient falls back to the first maximum, or the first equal element),
 * both dtypes, and widths that the gradient's eight-column vectors cover
 * whole, in part, and not at all. */
static void test_pool2d_max2x2(void)
{
    static const double values[4] = {-0.0, 0.0, 1, 2};
    static const int64_t widths[] = {4, 8, 12, 20};
    for (int f = 0; f < 2; f++)
        for (int wi = 0; wi < 4; wi++) {
            const int64_t W = widths[wi], WO = W / 2;
            nb_dtype dt = f ? NB_F64 : NB_F32;
            nb_tensor *x, *xg, *dout;
            REQUIRE_OK(nb_tensor_new(&x, dt, 4, S(2, 3, 6, W)));
            REQUIRE_OK(nb_tensor_new(&xg, dt, 4, S(2, 3, 7, W + 1)));
            REQUIRE_OK(nb_tensor_new(&dout, dt, 4, S(2, 3, 3, WO)));
            for (int64_t i = 0; i < nb_tensor_numel(xg); i++) /* many ties, in every position */
                nb_tensor_set(xg, i, values[(((uint64_t)i * 2654435761u) >> 7) % 4]);
            for (int64_t i = 0; i < nb_tensor_numel(dout); i++) nb_tensor_set(dout, i, 1 + (double)i);
            nb_tensor_set(xg, 1, NAN);
            nb_tensor_set(xg, W + 1, NAN);
            nb_tensor_set(xg, 3 * (W + 1) + 3, NAN);
            for (int64_t p = 0; p < 6; p++)
                for (int64_t h = 0; h < 6; h++)
                    for (int64_t w = 0; w < W; w++)
                        nb_tensor_set(x, (p * 6 + h) * W + w, nb_tensor_get(xg, (p * 7 + h) * (W + 1) + w));
            nb_attr a[] = {NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_INTS("strides", 2, 2)};
            nb_tensor *in[] = {x}, *ing[] = {xg};
            nb_tensor *y = RUN1("pool2d", in, a), *yg = RUN1("pool2d", ing, a);
            CHECK(y && yg && nb_tensor_numel(y) == nb_tensor_numel(yg));
            bool same = y && yg;
            for (int64_t i = 0; same && i < nb_tensor_numel(y); i++) {
                double u = nb_tensor_get(y, i), v = nb_tensor_get(yg, i);
                same &= (u == v && signbit(u) == signbit(v)) || (isnan(u) && isnan(v));
            }
            CHECK(same);
            if (!same) fprintf(stderr, "  max2x2 forward, %s, width %lld\n", nb_dtype_name(dt), (long long)W);
            /* Outputs that no window has as its maximum: 7 is no element, 0 is one in most. */
            for (int64_t i = 2; y && yg && i < nb_tensor_numel(y); i += 5) {
                nb_tensor_set(y, i, i % 2 ? 7 : 0);
                nb_tensor_set(yg, i, i % 2 ? 7 : 0);
            }
            nb_tensor *gin[] = {x, y, dout}, *ging[] = {xg, yg, dout};
            nb_tensor *dx = RUN1("pool2d_grad", gin, a), *dxg = RUN1("pool2d_grad", ging, a);
            same = dx && dxg;
            double total = 0;
            for (int64_t p = 0; same && p < 6; p++)
                for (int64_t h = 0; h < 7; h++)
                    for (int64_t w = 0; w < W + 1; w++) {
                        double g = nb_tensor_get(dxg, (p * 7 + h) * (W + 1) + w);
                        same &= h < 6 && w < W ? nb_tensor_get(dx, (p * 6 + h) * W + w) == g : g == 0;
                        total += g;
                    }
            CHECK(same);
            if (!same) fprintf(stderr, "  max2x2 gradient, %s, width %lld\n", nb_dtype_name(dt), (long long)W);
            const double n_out = 18.0 * (double)WO;
            CHECK_NEAR(total, n_out * (n_out + 1) / 2, 1e-9); /* every window's gradient landed once */
            RELEASE(x, xg, dout, y, yg, dx, dxg);
        }
}

static void test_pool2d_infer(void)
{
    nb_var_info x = VI(NB_F32, S(-1, 3, 8, 8)), out[1];
    const nb_var_info *in[] = {&x};
    nb_attr a[] = {NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_INTS("strides", 2, 2)};
    CHECK_OK(infer_shapes("pool2d", 1, in, 2, a, 1, out));
    CHECK_INFO(out[0], NB_F32, S(-1, 3, 4, 4));
    nb_var_info xh = VI(NB_F64, S(-1, 3, -1, -1));
    const nb_var_info *in2[] = {&xh};
    nb_attr g[] = {NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_BOOL("global_pooling", true)};
    CHECK_OK(infer_shapes("pool2d", 1, in2, 2, g, 1, out));
    CHECK_INFO(out[0], NB_F64, S(-1, 3, 1, 1));
    CHECK_OK(infer_shapes("pool2d", 1, in2, 2, a, 1, out));
    CHECK_INFO(out[0], NB_F64, S(-1, 3, -1, -1));
    nb_var_info o = VI(NB_F32, S(-1, 3, 4, 4)), xg[1];
    const nb_var_info *gin[] = {&x, &o, &o};
    CHECK_OK(infer_shapes("pool2d_grad", 3, gin, 2, a, 1, xg));
    CHECK_INFO(xg[0], NB_F32, S(-1, 3, 8, 8));
}

static void test_pool2d_errors(void)
{
    nb_tensor *x = T(NB_F32, S(1, 1, 2, 2), 1, 2, 3, 4), *in[] = {x}, *y = NULL;
    CHECK_ERR(nb_op_run("pool2d", NB_TENSORS_N(1, in), NB_NO_ATTRS, 1, &y), NB_ERR_ARG,
              "pool2d: missing required attribute 'ksize'");
    nb_attr big[] = {NB_ATTR_INTS("ksize", 3, 3)};
    CHECK_ERR(nb_op_run("pool2d", NB_TENSORS_N(1, in), NB_ATTRS_N(1, big), 1, &y), NB_ERR_SHAPE,
              "pool2d: X has shape [1, 1, 2, 2]: ksize 3 is bigger");
    nb_attr bad_type[] = {NB_ATTR_STRING("pooling_type", "min"), NB_ATTR_INTS("ksize", 2, 2)};
    CHECK_ERR(nb_op_run("pool2d", NB_TENSORS_N(1, in), NB_ATTRS_N(2, bad_type), 1, &y), NB_ERR_ARG,
              "pool2d: pooling_type");
    nb_attr wide_pad[] = {NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_INTS("paddings", 2, 0)};
    CHECK_ERR(nb_op_run("pool2d", NB_TENSORS_N(1, in), NB_ATTRS_N(2, wide_pad), 1, &y), NB_ERR_ARG,
              "smaller than ksize");
    nb_attr k1[] = {NB_ATTR_INTS("ksize", 1)};
    CHECK_ERR(nb_op_run("pool2d", NB_TENSORS_N(1, in), NB_ATTRS_N(1, k1), 1, &y), NB_ERR_ARG,
              "pool2d: attribute ksize");
    nb_tensor *x3 = T(NB_F32, S(1, 2, 2), 1, 2, 3, 4), *in3[] = {x3};
    nb_attr k2[] = {NB_ATTR_INTS("ksize", 2, 2)};
    CHECK_ERR(nb_op_run("pool2d", NB_TENSORS_N(1, in3), NB_ATTRS_N(1, k2), 1, &y), NB_ERR_SHAPE,
              "pool2d: X has shape [1, 2, 2]");
    nb_tensor *xi = NULL;
    CHECK_OK(nb_tensor_new(&xi, NB_I64, 4, S(1, 1, 2, 2)));
    nb_tensor *ini[] = {xi};
    CHECK_ERR(nb_op_run("pool2d", NB_TENSORS_N(1, ini), NB_ATTRS_N(1, k2), 1, &y), NB_ERR_DTYPE,
              "pool2d: X has dtype int64");
    nb_tensor *o = T(NB_F32, S(1, 1, 2, 2), 0, 0, 0, 0), *gin[] = {x, o, o};
    CHECK_ERR(nb_op_run("pool2d_grad", NB_TENSORS_N(3, gin), NB_ATTRS_N(1, k2), 1, &y), NB_ERR_SHAPE,
              "pool2d_grad: Out has shape [1, 1, 2, 2]");
    CHECK(y == NULL);
    RELEASE(x, x3, xi, o);
}

int main(void)
{
    RUN(test_conv2d_hand);
    RUN(test_conv2d_reference);
    RUN(test_conv2d_packed_columns);
    RUN(test_conv2d_row_widths);
    RUN(test_conv2d_grad);
    RUN(test_conv2d_grad_batch_split);
    RUN(test_conv2d_infer);
    RUN(test_conv2d_errors);
    RUN(test_pool2d_hand);
    RUN(test_pool2d_reference);
    RUN(test_pool2d_grad);
    RUN(test_pool2d_grad_ties);
    RUN(test_pool2d_max2x2);
    RUN(test_pool2d_infer);
    RUN(test_pool2d_errors);
    return test_report();
}
