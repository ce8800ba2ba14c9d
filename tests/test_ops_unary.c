/* Elementwise unary ops: math and activations against libm in float32 and
 * float64, numerical stability, the fast float exp, tanh and erf family,
 * gelu's fused gradient, attributes and casts. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include "test.h"
#include "core/fpenv.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/fastmath.h"

static const nb_dtype FLOATS[] = {NB_F32, NB_F64};
static double tol_of(nb_dtype dt) { return dt == NB_F32 ? 2e-6 : 1e-13; }

/* Element-by-element check with a relative tolerance and a readable report. */
static void check_values(const char *what, const nb_tensor *t, int64_t n, const double *want, double tol)
{
    if (!t) return;
    CHECK(nb_tensor_numel(t) == n);
    for (int64_t i = 0; i < n && i < nb_tensor_numel(t); i++) {
        double got = nb_tensor_get(t, i);
        if (isnan(got) && isnan(want[i])) continue;
        if (got == want[i]) continue;
        if (!(fabs(got - want[i]) <= tol * (1 + fabs(want[i])))) {
            fprintf(stderr, "  %s: element %lld is %.12g, expected %.12g\n", what, (long long)i, got, want[i]);
            test_failures_in_current++;
            return;
        }
    }
}

/* ---- unary floats --------------------------------------------------------------- */

static double r_neg(double v) { return -v; }
static double r_sign(double v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }
static double r_square(double v) { return v * v; }
static double r_rsqrt(double v) { return 1 / sqrt(v); }
static double r_sigmoid(double v) { return 1 / (1 + exp(-v)); }
static double r_relu(double v) { return v > 0 ? v : 0; }
static double r_leaky(double v) { return v > 0 ? v : 0.01 * v; }
static double r_elu(double v) { return v > 0 ? v : exp(v) - 1; }
static double r_gelu(double v) { return 0.5 * v * (1 + erf(v / sqrt(2.0))); }
static double r_softplus(double v) { return v > 20 ? v : log(1 + exp(v)); }
static double r_silu(double v) { return v / (1 + exp(-v)); }
static double r_id(double v) { return v; }

static const struct {
    const char *name;
    double (*ref)(double);
    bool positive; /* domain: (0, 4] rather than [-3, 3] */
} UNARY[] = {
    {"neg", r_neg, false},         {"abs", fabs, false},        {"sign", r_sign, false},
    {"square", r_square, false},   {"sqrt", sqrt, true},        {"rsqrt", r_rsqrt, true},
    {"exp", exp, false},           {"log", log, true},          {"log1p", log1p, false},
    {"sin", sin, false},           {"cos", cos, false},         {"tan", tan, false},
    {"erf", erf, false},           {"atan", atan, false},       {"floor", floor, false},
    {"ceil", ceil, false},         {"round", nearbyint, false}, {"tanh", tanh, false},
    {"sigmoid", r_sigmoid, false}, {"relu", r_relu, false},     {"leaky_relu", r_leaky, false},
    {"elu", r_elu, false},         {"gelu", r_gelu, false},     {"softplus", r_softplus, false},
    {"silu", r_silu, false},       {"clip", r_id, false},       {"scale", r_id, false},
};

static void test_unary_values(void)
{
    enum { N = 13 };
    double xs[N], xp[N];
    for (int i = 0; i < N; i++) {
        xs[i] = -3 + 0.5 * i + 0.01 * (i % 3); /* avoids tan's poles and hits 0 only near it */
        xp[i] = 0.3 * (i + 1);
    }
    xs[6] = 0; /* sign(0), relu(0) */
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = FLOATS[d];
        nb_tensor *x = tt(dt, 1, S(N), xs), *p = tt(dt, 1, S(N), xp);
        for (size_t k = 0; k < sizeof UNARY / sizeof *UNARY; k++) {
            nb_tensor *src = UNARY[k].positive ? p : x;
            if (!strcmp(UNARY[k].name, "log1p")) src = p;
            nb_tensor *in[] = {src};
            nb_tensor *out = RUN1_NOATTR(UNARY[k].name, in);
            double want[N];
            for (int i = 0; i < N; i++) want[i] = UNARY[k].ref(nb_tensor_get(src, i));
            CHECK(out && out->dtype == dt);
            check_values(UNARY[k].name, out, N, want, tol_of(dt));
            nb_tensor_release(out);
        }
        release_all(x, p, NULL);
    }
}

/* round takes halves to the even neighbour, as ONNX's Round and numpy do;
 * floor and ceil keep infinities and NaN. */
static void test_rounding(void)
{
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = FLOATS[d];
        nb_tensor *x = T(dt, S(6), -2.5, -1.5, -0.5, 0.5, 1.5, 2.5), *e = T(dt, S(3), -INFINITY, INFINITY, NAN);
        nb_tensor *in[] = {x}, *ine[] = {e};
        nb_tensor *r = RUN1_NOATTR("round", in), *f = RUN1_NOATTR("floor", ine), *c = RUN1_NOATTR("ceil", ine);
        CHECK_TENSOR(r, S(6), 0, -2, -2, 0, 0, 2, 2);
        CHECK(f && nb_tensor_get(f, 0) == -INFINITY && nb_tensor_get(f, 1) == INFINITY && isnan(nb_tensor_get(f, 2)));
        CHECK(c && nb_tensor_get(c, 0) == -INFINITY && nb_tensor_get(c, 1) == INFINITY && isnan(nb_tensor_get(c, 2)));
        release_all(x, e, r, f, c, NULL);
    }
}

static void test_unary_rejects_ints(void)
{
    nb_tensor *x = T(NB_I32, S(2), 1, 2), *out = NULL;
    nb_tensor *in[] = {x};
    CHECK_ERR(nb_op_run("exp", NB_TENSORS_N(1, in), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "exp: X is int32 but it takes float32, float64");
    CHECK_ERR(nb_op_run("sigmoid", NB_TENSORS_N(1, in), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE, "sigmoid: X is int32");
    nb_tensor *b = T(NB_BOOL, S(2), 1, 0);
    nb_tensor *inb[] = {b};
    CHECK_ERR(nb_op_run("neg", NB_TENSORS_N(1, inb), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "neg: X is bool but it takes float32, float64, int32, int64");
    nb_tensor *in2[] = {x, x};
    CHECK_ERR(nb_op_run("pow", NB_TENSORS_N(2, in2), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "pow: X and Y are int32 but it takes float32, float64");
    release_all(x, b, NULL);
}

static void test_stability(void)
{
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = FLOATS[d];
        nb_tensor *x = T(dt, S(4), -1000, -40, 40, 1000);
        nb_tensor *in[] = {x};
        nb_tensor *sg = RUN1_NOATTR("sigmoid", in), *sp = RUN1_NOATTR("softplus", in);
        nb_tensor *si = RUN1_NOATTR("silu", in), *ge = RUN1_NOATTR("gelu", in);
        nb_attr approx[] = {NB_ATTR_BOOL("approximate", true)};
        nb_tensor *gt = RUN1("gelu", in, approx);
        CHECK_TENSOR(sg, S(4), 1e-12, 0, exp(-40) / (1 + exp(-40)), 1 / (1 + exp(-40)), 1);
        CHECK_TENSOR(sp, S(4), 1e-12, 0, log1p(exp(-40)), 40, 1000);
        CHECK_TENSOR(si, S(4), 1e-12, 0, -40 * exp(-40) / (1 + exp(-40)), 40 / (1 + exp(-40)), 1000);
        CHECK_TENSOR(ge, S(4), 1e-12, 0, 0, 40, 1000);
        CHECK_TENSOR(gt, S(4), 1e-12, 0, 0, 40, 1000);
        /* Tiny values keep their relative accuracy. */
        if (sg && dt == NB_F64) CHECK(fabs(nb_tensor_get(sg, 1) / exp(-40) - 1) < 1e-12);
        if (sp && dt == NB_F64) CHECK(fabs(nb_tensor_get(sp, 1) / exp(-40) - 1) < 1e-12);
        if (ge) CHECK(nb_tensor_get(ge, 1) <= 0 && isfinite(nb_tensor_get(ge, 0)));
        release_all(x, sg, sp, si, ge, gt, NULL);
        nb_tensor *t = T(dt, S(2), 1e-10, -1e-10), *in2[] = {t};
        nb_tensor *l = RUN1_NOATTR("log1p", in2);
        if (l) CHECK(fabs(nb_tensor_get(l, 0) / 1e-10 - 1) < 1e-6 && fabs(nb_tensor_get(l, 1) / -1e-10 - 1) < 1e-6);
        release_all(t, l, NULL);
    }
    /* NaN passes through sign, relu, clip and maximum/minimum. */
    nb_tensor *x = T(NB_F64, S(2), NAN, 1), *y = T(NB_F64, S(2), 0, NAN);
    nb_tensor *in[] = {x}, *in2[] = {x, y};
    nb_tensor *s = RUN1_NOATTR("sign", in), *r = RUN1_NOATTR("relu", in), *mx = RUN1_NOATTR("maximum", in2);
    nb_tensor *mn = RUN1_NOATTR("minimum", in2);
    nb_attr clip[] = {NB_ATTR_FLOAT("min", 0), NB_ATTR_FLOAT("max", 0.5)};
    nb_tensor *c = RUN1("clip", in, clip);
    CHECK_TENSOR(s, S(2), 0, NAN, 1);
    CHECK_TENSOR(r, S(2), 0, NAN, 1);
    CHECK_TENSOR(mx, S(2), 0, NAN, NAN);
    CHECK_TENSOR(mn, S(2), 0, NAN, NAN);
    CHECK_TENSOR(c, S(2), 0, NAN, 0.5);
    release_all(x, y, s, r, mx, mn, c, NULL);
}

/* Distance between a float result and the exact value, in units of the
 * float spacing at the exact value. */
static double ulps(float got, double want)
{
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got) ? 0 : 1e9;
    float w = (float)want;
    if (isinf(w) || isinf(got)) return got == w ? 0 : 1e9;
    double spacing = fabs(want) < FLT_MIN ? ldexp(1, -149) : nextafterf(fabsf(w), INFINITY) - fabsf(w);
    return fabs(got - want) / spacing;
}

static void test_fast_math(void)
{
    /* The vectorisable float exp and tanh against double libm. */
    double worst_exp = 0, worst_tanh = 0;
    for (int i = 0; i <= 400000; i++) {
        float x = (float)(-105 + 195.0 * i / 400000); /* through the subnormal range up to overflow */
        worst_exp = fmax(worst_exp, ulps(nb_fast_expf(x), exp((double)x)));
        float t = (float)(-12 + 24.0 * i / 400000);
        worst_tanh = fmax(worst_tanh, ulps(nb_fast_tanhf(t), tanh((double)t)));
        float tiny = (float)ldexp(1 + i / 400000.0, -(i % 140)); /* both sides of the 0.45 switch */
        worst_tanh = fmax(worst_tanh, ulps(nb_fast_tanhf(tiny), tanh((double)tiny)));
    }
    CHECK(worst_exp <= 1.5);
    CHECK(worst_tanh <= 2.5);
    CHECK(nb_fast_expf(INFINITY) == INFINITY && nb_fast_expf(-INFINITY) == 0 && isnan(nb_fast_expf(NAN)));
    CHECK(nb_fast_expf(89.0f) == INFINITY && nb_fast_expf(88.72f) < INFINITY && nb_fast_expf(0) == 1);
    CHECK(nb_fast_tanhf(INFINITY) == 1 && nb_fast_tanhf(-INFINITY) == -1 && isnan(nb_fast_tanhf(NAN)));
    CHECK(signbit(nb_fast_tanhf(-0.0f)) && nb_fast_tanhf(-0.0f) == 0);

    /* Through the ops, on enough elements for the threaded path. */
    enum { N = 50000 };
    double *xs = malloc(sizeof(double) * N), *want = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++) xs[i] = -30 + 60.0 * i / N;
    nb_tensor *x = tt(NB_F32, 1, S(N), xs);
    nb_tensor *in[] = {x};
    const char *ops[] = {"exp", "tanh", "sigmoid", "silu"};
    for (int k = 0; k < 4; k++) {
        nb_tensor *o = RUN1_NOATTR(ops[k], in);
        for (int i = 0; i < N; i++) {
            double v = nb_tensor_get(x, i);
            want[i] = k == 0 ? exp(v) : k == 1 ? tanh(v) : k == 2 ? 1 / (1 + exp(-v)) : v / (1 + exp(-v));
        }
        check_values(ops[k], o, N, want, 2e-6);
        nb_tensor_release(o);
    }
    nb_tensor_release(x);
    free(xs);
    free(want);
}

/* ---- the float erf family and gelu ---------------------------------------------- */

static double r_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double r_gelu_grad(double x) { return r_cdf(x) + x * exp(-0.5 * x * x) / sqrt(2 * acos(-1.0)); }
static double r_gelu_tanh_grad(double x)
{
    double c = sqrt(2 / acos(-1.0)), u = c * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}

typedef struct erf_worst {
    double erf, erf_abs, erfc, cdf;
    float at[4];
} erf_worst;

static void erf_at(erf_worst *w, float x)
{
    double d = x, u;
    float e = nb_fast_erff(x);
    if ((u = ulps(e, erf(d))) > w->erf) w->erf = u, w->at[0] = x;
    if ((u = fabs(e - erf(d))) > w->erf_abs) w->erf_abs = u, w->at[1] = x;
    if ((u = ulps(nb_fast_erfcf(x), erfc(d))) > w->erfc) w->erfc = u, w->at[2] = x;
    if ((u = ulps(nb_fast_normcdff(x), r_cdf(d))) > w->cdf) w->cdf = u, w->at[3] = x;
}

static void test_fast_erf(void)
{
    /* Against double libm: every 997th float (so all exponents, subnormals
     * included, both signs) and densely over [-8, 8], where the branches
     * switch (|x| = 3/4, 1, 3/4 sqrt 2) and the tails begin. The bounds sit
     * just above the worst cases of an exhaustive sweep (fastmath.h). */
    erf_worst w = {0};
    for (uint64_t b = 0; b < 0x100000000ull; b += 997) {
        float x = nb_bits_f32((uint32_t)b);
        if (!isnan(x)) erf_at(&w, x);
    }
    for (int i = 0; i <= 400000; i++) erf_at(&w, (float)(-8 + 16.0 * i / 400000));
    if (w.erf > 1.5 || w.erf_abs > 1e-7 || w.erfc > 6 || w.cdf > 6)
        fprintf(stderr, "  erf %.2f ulp at %.9g (abs %.3g at %.9g), erfc %.2f ulp at %.9g, Phi %.2f ulp at %.9g\n",
                w.erf, w.at[0], w.erf_abs, w.at[1], w.erfc, w.at[2], w.cdf, w.at[3]);
    CHECK(w.erf <= 1.5 && w.erf_abs <= 1e-7);
    CHECK(w.erfc <= 6 && w.cdf <= 6);
    /* Edges. */
    CHECK(nb_fast_erff(INFINITY) == 1 && nb_fast_erff(-INFINITY) == -1 && isnan(nb_fast_erff(NAN)));
    CHECK(nb_fast_erff(0) == 0 && signbit(nb_fast_erff(-0.0f)) && nb_fast_erff(4.5f) == 1);
    CHECK(ulps(nb_fast_erff(1e-30f), erf(1e-30f)) <= 1 && ulps(nb_fast_erff(-1e-40f), erf(-1e-40f)) <= 1);
    CHECK(nb_fast_erfcf(INFINITY) == 0 && nb_fast_erfcf(-INFINITY) == 2 && isnan(nb_fast_erfcf(NAN)));
    CHECK(nb_fast_erfcf(0) == 1 && nb_fast_erfcf(10.1f) == 0 && nb_fast_erfcf(9.5f) > 0);
    CHECK(nb_fast_normcdff(INFINITY) == 1 && nb_fast_normcdff(-INFINITY) == 0 && isnan(nb_fast_normcdff(NAN)));
    CHECK(nb_fast_normcdff(0) == 0.5f);

    /* Through the ops, on enough elements for the threaded path: erf, and
     * gelu relative to x Phi(x) far into the negative tail, where it is
     * subnormal from about x = -13.1 on: the ops run with subnormals kept here,
     * as kernels flush them by default (core/fpenv.h). */
    nb_fpmode_set_flush(false);
    enum { N = 60000 };
    double *xs = malloc(sizeof(double) * N), *want = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++) xs[i] = -14 + 20.0 * i / N;
    nb_tensor *x = tt(NB_F32, 1, S(N), xs);
    nb_tensor *in[] = {x};
    nb_tensor *e = RUN1_NOATTR("erf", in), *g = RUN1_NOATTR("gelu", in);
    for (int i = 0; i < N; i++) want[i] = erf(nb_tensor_get(x, i));
    check_values("erf float32", e, N, want, 2e-7);
    double worst = 0;
    for (int i = 0; g && i < N; i++) {
        double v = nb_tensor_get(x, i);
        worst = fmax(worst, ulps((float)nb_tensor_get(g, i), v * r_cdf(v)));
    }
    if (worst > 6) fprintf(stderr, "  gelu float32: %.2f ulp\n", worst);
    CHECK(g && worst <= 6);
    release_all(x, e, g, NULL);
    nb_fpmode_set_flush(true);
    /* gelu's edges: inf, -inf (its limit, 0), NaN. */
    nb_tensor *ed = T(NB_F32, S(3), INFINITY, -INFINITY, NAN), *ein[] = {ed};
    nb_tensor *ge = RUN1_NOATTR("gelu", ein);
    if (ge) CHECK(nb_tensor_get(ge, 0) == INFINITY && nb_tensor_get(ge, 1) == 0 && isnan(nb_tensor_get(ge, 2)));
    release_all(ed, ge, NULL);
    free(xs);
    free(want);
}

/* gelu_grad(X, DOut) = DOut * gelu'(X), both forms and dtypes, against
 * double references: contiguous (threaded, runs that start anywhere in the
 * tanh form's blocks of 256), in place over DOut, on a strided view, and at
 * the edges. */
static void test_gelu_grad(void)
{
    enum { N = 50001 };
    double *xs = malloc(sizeof(double) * N), *ds = malloc(sizeof(double) * N), *want = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++) {
        xs[i] = -12 + 20.0 * i / N;
        ds[i] = 0.5 + (i % 7) * 0.25 - (i % 2);
    }
    for (int d = 0; d < 2; d++)
        for (int approx = 0; approx < 2; approx++) {
            nb_dtype dt = FLOATS[d];
            nb_tensor *x = tt(dt, 1, S(N), xs), *dout = tt(dt, 1, S(N), ds);
            nb_tensor *in[] = {x, dout};
            nb_attr a[] = {NB_ATTR_BOOL("approximate", approx)};
            nb_tensor *dx = RUN1("gelu_grad", in, a);
            for (int i = 0; i < N; i++) {
                double v = nb_tensor_get(x, i);
                want[i] = nb_tensor_get(dout, i) * (approx ? r_gelu_tanh_grad(v) : r_gelu_grad(v));
            }
            const char *what = approx ? "gelu_grad approximate" : "gelu_grad";
            check_values(what, dx, N, want, dt == NB_F32 ? 1e-6 : 1e-13);
            /* In place over DOut, as the executor may run it. */
            CHECK_OK(nb_ew_gelu_grad(x, dout, dout, approx, "gelu_grad"));
            check_values(what, dout, N, want, dt == NB_F32 ? 1e-6 : 1e-13);
            release_all(x, dout, dx, NULL);
        }
    /* A transposed view: the strided loops. */
    for (int approx = 0; approx < 2; approx++) {
        nb_tensor *x = T(NB_F32, S(3, 2), -2.5, -0.5, 0, 0.75, 1.5, 4), *xt = NULL, *dout = NULL, *out = NULL;
        CHECK_OK(nb_tensor_transpose(&xt, x, 0, 1)); /* [[-2.5, 0, 1.5], [-0.5, 0.75, 4]] */
        CHECK_OK(nb_tensor_full(&dout, NB_F32, 2, S(2, 3), 2.0));
        CHECK_OK(nb_tensor_new(&out, NB_F32, 2, S(2, 3)));
        CHECK_OK(nb_ew_gelu_grad(xt, dout, out, approx, "gelu_grad"));
        const double v[6] = {-2.5, 0, 1.5, -0.5, 0.75, 4};
        double w6[6];
        for (int i = 0; i < 6; i++) w6[i] = 2 * (approx ? r_gelu_tanh_grad(v[i]) : r_gelu_grad(v[i]));
        check_values("gelu_grad strided", out, 6, w6, 1e-6);
        release_all(x, xt, dout, out, NULL);
    }
    /* Edges: gelu' is 1 at inf, 0 at -inf, NaN at NaN, in both forms and dtypes. */
    for (int d = 0; d < 2; d++)
        for (int approx = 0; approx < 2; approx++) {
            nb_tensor *x = T(FLOATS[d], S(5), INFINITY, -INFINITY, NAN, 1e30, -1e30), *ones = NULL;
            CHECK_OK(nb_tensor_full(&ones, FLOATS[d], 1, S(5), 1.0));
            nb_tensor *in[] = {x, ones};
            nb_attr a[] = {NB_ATTR_BOOL("approximate", approx)};
            nb_tensor *dx = RUN1("gelu_grad", in, a);
            if (dx)
                CHECK(nb_tensor_get(dx, 0) == 1 && nb_tensor_get(dx, 1) == 0 && isnan(nb_tensor_get(dx, 2)) &&
                      nb_tensor_get(dx, 3) == 1 && nb_tensor_get(dx, 4) == 0);
            release_all(x, ones, dx, NULL);
        }
    /* Shapes and dtypes must match. */
    nb_tensor *x = T(NB_F32, S(2), 1, 2), *y = T(NB_F32, S(3), 1, 2, 3), *z = T(NB_F64, S(2), 1, 2), *out = NULL;
    nb_tensor *bad_shape[] = {x, y}, *bad_dtype[] = {x, z};
    CHECK_ERR(nb_op_run("gelu_grad", NB_TENSORS_N(2, bad_shape), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "gelu_grad: DOut has shape [3] but X has shape [2]");
    CHECK_ERR(nb_op_run("gelu_grad", NB_TENSORS_N(2, bad_dtype), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "gelu_grad: DOut has dtype float64 but X has dtype float32");
    CHECK(out == NULL);
    release_all(x, y, z, NULL);
    free(xs);
    free(ds);
    free(want);
}

/* gelu's gradient is the one fused op, reading X only; gelu_grad has rules. */
static void test_gelu_backward_is_fused(void)
{
    const nb_op_def *g = nb_op_find("gelu"), *gg = nb_op_find("gelu_grad");
    CHECK(g && g->grad_uses_inputs == 1 && g->grad_uses_outputs == 0);
    CHECK(gg && gg->vjp && gg->jvp && gg->grad_uses_inputs == 3 && (gg->flags & NB_OP_INPLACE));
    for (int approx = 0; approx < 2; approx++) {
        nb_program *p = NULL;
        nb_builder *b = NULL;
        nb_backward_result r = {0};
        REQUIRE_OK(nb_program_new(&p));
        REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
        nb_value x = nb_layer_data(b, "x", NB_F32, 2, S(4, 3));
        nb_value y = nb_gelu(b, x, approx);
        const char *target = nb_value_name(y), *input = nb_value_name(x);
        CHECK_OK(nb_builder_status(b));
        int before = nb_program_global_block(p)->n_ops;
        CHECK_OK(nb_gradients(p, NB_NAMES_N(1, &target), NB_NAMES_N(1, &input), NULL, &r));
        const nb_block *blk = nb_program_global_block(p);
        int n_grad = 0;
        for (int i = before; i < blk->n_ops; i++) n_grad += !strcmp(blk->ops[i]->def->name, "gelu_grad");
        CHECK(n_grad == 1 && blk->n_ops - before <= 2); /* gelu_grad, and the seed of ones */
        nb_backward_result_free(&r);
        nb_builder_free(b);
        nb_program_free(p);
    }
}

static void test_attributes(void)
{
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = FLOATS[d];
        double tol = tol_of(dt);
        nb_tensor *x = T(dt, S(5), -2, -0.5, 0, 1.5, 3);
        nb_tensor *in[] = {x};
        nb_attr a1[] = {NB_ATTR_FLOAT("alpha", 0.2)};
        nb_tensor *lr = RUN1("leaky_relu", in, a1);
        CHECK_TENSOR(lr, S(5), tol, -0.4, -0.1, 0, 1.5, 3);
        nb_attr a2[] = {NB_ATTR_FLOAT("alpha", 0.5)};
        nb_tensor *el = RUN1("elu", in, a2);
        CHECK_TENSOR(el, S(5), tol, 0.5 * expm1(-2), 0.5 * expm1(-0.5), 0, 1.5, 3);
        nb_attr a3[] = {NB_ATTR_BOOL("approximate", true)};
        nb_tensor *gt = RUN1("gelu", in, a3);
        double want[5], xv[5] = {-2, -0.5, 0, 1.5, 3};
        for (int i = 0; i < 5; i++)
            want[i] = 0.5 * xv[i] * (1 + tanh(sqrt(2 / acos(-1.0)) * (xv[i] + 0.044715 * pow(xv[i], 3))));
        check_values("gelu tanh", gt, 5, want, tol);
        /* softplus with beta 2 and threshold 1: linear once 2x > 1. */
        nb_attr a4[] = {NB_ATTR_FLOAT("beta", 2), NB_ATTR_FLOAT("threshold", 1)};
        nb_tensor *sp = RUN1("softplus", in, a4);
        for (int i = 0; i < 5; i++) want[i] = 2 * xv[i] > 1 ? xv[i] : log1p(exp(2 * xv[i])) / 2;
        check_values("softplus beta", sp, 5, want, tol);
        nb_attr a5[] = {NB_ATTR_FLOAT("min", -1), NB_ATTR_FLOAT("max", 2)};
        nb_tensor *cl = RUN1("clip", in, a5);
        CHECK_TENSOR(cl, S(5), 0, -1, -0.5, 0, 1.5, 2);
        nb_attr a6[] = {NB_ATTR_FLOAT("max", 0)}; /* min left unbounded */
        nb_tensor *cl2 = RUN1("clip", in, a6);
        CHECK_TENSOR(cl2, S(5), 0, -2, -0.5, 0, 0, 0);
        nb_attr a7[] = {NB_ATTR_FLOAT("scale", 2), NB_ATTR_FLOAT("bias", 0.5)};
        nb_tensor *s1 = RUN1("scale", in, a7);
        CHECK_TENSOR(s1, S(5), tol, -3.5, -0.5, 0.5, 3.5, 6.5);
        nb_attr a8[] = {NB_ATTR_FLOAT("scale", 2), NB_ATTR_FLOAT("bias", 0.5), NB_ATTR_BOOL("bias_after_scale", false)};
        nb_tensor *s2 = RUN1("scale", in, a8);
        CHECK_TENSOR(s2, S(5), tol, -3, 0, 1, 4, 7);
        release_all(x, lr, el, gt, sp, cl, cl2, s1, s2, NULL);
    }
}

static void test_attribute_errors(void)
{
    nb_tensor *x = T(NB_F32, S(2), 1, 2), *out = NULL;
    nb_tensor *in[] = {x};
    nb_attr c[] = {NB_ATTR_FLOAT("min", 2), NB_ATTR_FLOAT("max", 1)};
    CHECK_ERR(nb_op_run("clip", NB_TENSORS_N(1, in), NB_ATTRS_N(2, c), 1, &out), NB_ERR_ARG,
              "clip: min (2) is greater than max (1)");
    nb_attr sp[] = {NB_ATTR_FLOAT("beta", 0)};
    CHECK_ERR(nb_op_run("softplus", NB_TENSORS_N(1, in), NB_ATTRS_N(1, sp), 1, &out), NB_ERR_ARG, "softplus: beta");
    CHECK_ERR(nb_op_run("cast", NB_TENSORS_N(1, in), NB_NO_ATTRS, 1, &out), NB_ERR_ARG,
              "missing required attribute 'dtype'");
    nb_attr bad[] = {NB_ATTR_INT("dtype", 42)};
    CHECK_ERR(nb_op_run("cast", NB_TENSORS_N(1, in), NB_ATTRS_N(1, bad), 1, &out), NB_ERR_ARG, "cast: dtype 42");
    CHECK(out == NULL);
    nb_tensor_release(x);
}

/* ---- cast --------------------------------------------------------------------- */

static void test_cast(void)
{
    nb_tensor *f = T(NB_F64, S(7), -2.7, -0.5, 0, 0.5, 2.7, 300.9, NAN);
    nb_tensor *in[] = {f};
    struct {
        nb_dtype to;
        double want[7];
    } cases[] = {
        {NB_F32, {(float)-2.7, -0.5, 0, 0.5, (float)2.7, (float)300.9, NAN}},
        {NB_I32, {-2, 0, 0, 0, 2, 300, 0}},
        {NB_I64, {-2, 0, 0, 0, 2, 300, 0}},
        {NB_U8, {0, 0, 0, 0, 2, 255, 0}}, /* saturates */
        {NB_BOOL, {1, 1, 0, 1, 1, 1, 1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        nb_attr a[] = {NB_ATTR_INT("dtype", cases[k].to)};
        nb_tensor *o = RUN1("cast", in, a);
        CHECK(o && o->dtype == cases[k].to);
        check_values(nb_dtype_name(cases[k].to), o, 7, cases[k].want, 0);
        nb_tensor_release(o);
    }
    /* Saturation at the integer limits and wrapping between integers. */
    nb_tensor *big = T(NB_F64, S(4), 1e300, -1e300, 3e9, -3e9);
    nb_tensor *inb[] = {big};
    nb_attr to32[] = {NB_ATTR_INT("dtype", NB_I32)}, to64[] = {NB_ATTR_INT("dtype", NB_I64)};
    nb_tensor *b32 = RUN1("cast", inb, to32), *b64 = RUN1("cast", inb, to64);
    CHECK_TENSOR(b32, S(4), 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN);
    if (b64) {
        const int64_t *p = nb_tensor_data(b64);
        CHECK(p[0] == INT64_MAX && p[1] == INT64_MIN && p[2] == 3000000000LL && p[3] == -3000000000LL);
    }
    nb_tensor *inw[] = {b64};
    nb_tensor *w32 = RUN1("cast", inw, to32);
    if (w32) CHECK(((const int32_t *)nb_tensor_data(w32))[2] == (int32_t)(uint32_t)3000000000LL);
    nb_tensor *i = T(NB_I32, S(4), -1, 0, 2, 257);
    nb_tensor *ini[] = {i};
    nb_attr tou8[] = {NB_ATTR_INT("dtype", NB_U8)}, tob[] = {NB_ATTR_INT("dtype", NB_BOOL)};
    nb_attr tof[] = {NB_ATTR_INT("dtype", NB_F32)};
    nb_tensor *u = RUN1("cast", ini, tou8), *bo = RUN1("cast", ini, tob), *fl = RUN1("cast", ini, tof);
    CHECK_TENSOR(u, S(4), 0, 255, 0, 2, 1);
    CHECK_TENSOR(bo, S(4), 0, 1, 0, 1, 1);
    CHECK_TENSOR(fl, S(4), 0, -1, 0, 2, 257);
    /* Every pair of dtypes round-trips small non-negative integers. */
    for (int from = 0; from < NB_DTYPE_COUNT; from++)
        for (int to = 0; to < NB_DTYPE_COUNT; to++) {
            nb_tensor *s = T((nb_dtype)from, S(2, 2), 0, 1, 1, 0), *ins[] = {s};
            nb_attr a[] = {NB_ATTR_INT("dtype", to)};
            nb_tensor *o = RUN1("cast", ins, a);
            CHECK(o && o->dtype == (nb_dtype)to);
            CHECK_TENSOR(o, S(2, 2), 0, 0, 1, 1, 0);
            release_all(s, o, NULL);
        }
    release_all(f, big, b32, b64, w32, i, u, bo, fl, NULL);
}

int main(void)
{
    RUN(test_unary_values);
    RUN(test_rounding);
    RUN(test_unary_rejects_ints);
    RUN(test_stability);
    RUN(test_fast_math);
    RUN(test_fast_erf);
    RUN(test_gelu_grad);
    RUN(test_gelu_backward_is_fused);
    RUN(test_attributes);
    RUN(test_attribute_errors);
    RUN(test_cast);
    return test_report();
}
