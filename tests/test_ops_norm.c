/* Tests of batch_norm, layer_norm and their gradient ops: hand-computed
 * cases, straightforward references, finite differences for the gradients,
 * in-place running statistics, build-time inference and errors. */
#include "convnorm_util.h"

static const nb_dtype dtypes[] = {NB_F32, NB_F64};

/* ---- batch_norm -------------------------------------------------------------- */

typedef struct bn_ref {
    nb_tensor *y, *mean_out, *var_out, *saved_mean, *saved_inv;
} bn_ref;

static nb_tensor *new_f64(int ndim, const int64_t *shape)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F64, ndim, shape)) exit(2);
    return t;
}

/* Batch norm from its definition. */
static bn_ref ref_bn(const nb_tensor *x, const nb_tensor *scale, const nb_tensor *bias, const nb_tensor *mean,
                     const nb_tensor *var, double momentum, double eps, bool global)
{
    int64_t n = x->shape[0], c = x->shape[1], s = nb_tensor_numel(x) / (n * c), m = n * s;
    bn_ref r = {new_f64(x->ndim, x->shape), new_f64(1, S(c)), new_f64(1, S(c)), new_f64(1, S(c)), new_f64(1, S(c))};
    for (int64_t ch = 0; ch < c; ch++) {
        double mu = 0, v = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) mu += nb_tensor_get(x, (i * c + ch) * s + j);
        mu /= (double)m;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) v += pow(nb_tensor_get(x, (i * c + ch) * s + j) - mu, 2);
        v /= (double)m;
        double rm = nb_tensor_get(mean, ch), rv = nb_tensor_get(var, ch);
        double use_mu = global ? rm : mu, use_v = global ? rv : v;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) {
                int64_t k = (i * c + ch) * s + j;
                nb_tensor_set(r.y, k,
                              (nb_tensor_get(x, k) - use_mu) / sqrt(use_v + eps) * nb_tensor_get(scale, ch) +
                                  nb_tensor_get(bias, ch));
            }
        nb_tensor_set(r.mean_out, ch, global ? rm : momentum * rm + (1 - momentum) * mu);
        nb_tensor_set(r.var_out, ch, global ? rv : momentum * rv + (1 - momentum) * v * m / (m - 1));
        nb_tensor_set(r.saved_mean, ch, use_mu);
        nb_tensor_set(r.saved_inv, ch, 1 / sqrt(use_v + eps));
    }
    return r;
}

static void check_bn(const char *what, nb_tensor **out, const bn_ref *r, double tol)
{
    const nb_tensor *want[] = {r->y, r->mean_out, r->var_out, r->saved_mean, r->saved_inv};
    static const char *names[] = {"Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"};
    for (int i = 0; i < 5; i++) {
        double e = rel_diff(out[i], want[i]);
        if (!(e <= tol)) {
            fprintf(stderr, "  %s: %s differs from the reference by %g\n", what, names[i], e);
            test_failures_in_current++;
        }
    }
}

static void release_ref(bn_ref *r) { RELEASE(r->y, r->mean_out, r->var_out, r->saved_mean, r->saved_inv); }

static void test_batch_norm_hand(void)
{
    const double eps = 1e-5, inv0 = 1 / sqrt(1.25 + eps), inv1 = 1 / sqrt(1 + eps);
    for (int d = 0; d < 2; d++) {
        nb_tensor *x = T(dtypes[d], S(4, 2), 1, 0, 2, 0, 3, 2, 4, 2);
        nb_tensor *scale = T(dtypes[d], S(2), 2, 0.5), *bias = T(dtypes[d], S(2), 0.1, -1);
        nb_tensor *mean = T(dtypes[d], S(2), 0, 1), *var = T(dtypes[d], S(2), 1, 2);
        nb_tensor *in[] = {x, scale, bias, mean, var}, *out[5];
        CHECK_OK(run_op("batch_norm", 5, in, 0, NULL, 5, out));
        CHECK_TENSOR(out[0], S(4, 2), 1e-6, -1.5 * inv0 * 2 + 0.1, -1 * inv1 * 0.5 - 1, -0.5 * inv0 * 2 + 0.1,
                     -1 * inv1 * 0.5 - 1, 0.5 * inv0 * 2 + 0.1, 1 * inv1 * 0.5 - 1, 1.5 * inv0 * 2 + 0.1,
                     1 * inv1 * 0.5 - 1);
        CHECK_TENSOR(out[1], S(2), 1e-6, 0.25, 1.0);
        /* The running variance takes the unbiased batch variance. */
        CHECK_TENSOR(out[2], S(2), 1e-6, 0.9 + 0.1 * 5.0 / 3, 1.8 + 0.1 * 4.0 / 3);
        CHECK_TENSOR(out[3], S(2), 1e-6, 2.5, 1);
        CHECK_TENSOR(out[4], S(2), 1e-6, inv0, inv1);
        for (int i = 0; i < 5; i++) CHECK(out[i] && out[i]->dtype == dtypes[d]);
        release_n(5, out);

        /* Test mode normalises with the running statistics and leaves them. */
        nb_attr t[] = {NB_ATTR_BOOL("is_test", true)};
        CHECK_OK(run_op("batch_norm", 5, in, 1, t, 5, out));
        double r1 = 1 / sqrt(1 + eps), r2 = 1 / sqrt(2 + eps);
        CHECK_TENSOR(out[0], S(4, 2), 1e-6, 1 * r1 * 2 + 0.1, -1 * r2 * 0.5 - 1, 2 * r1 * 2 + 0.1, -1 * r2 * 0.5 - 1,
                     3 * r1 * 2 + 0.1, 1 * r2 * 0.5 - 1, 4 * r1 * 2 + 0.1, 1 * r2 * 0.5 - 1);
        CHECK_TENSOR(out[1], S(2), 0, 0, 1);
        CHECK_TENSOR(out[2], S(2), 0, 1, 2);
        CHECK_TENSOR(out[3], S(2), 0, 0, 1);
        CHECK_TENSOR(out[4], S(2), 1e-6, r1, r2);
        release_n(5, out);
        RELEASE(x, scale, bias, mean, var);
    }
}

static void test_batch_norm_reference(void)
{
    static const int64_t shapes[][4] = {{5, 3, 1, 1}, {3, 2, 2, 3}, {2, 4, 3, 1}};
    static const int ndims[] = {2, 4, 3};
    uint64_t seed = 3;
    for (int si = 0; si < 3; si++) {
        const int64_t c = shapes[si][1];
        nb_tensor *x = trand_(NB_F64, ndims[si], shapes[si], &seed, -2, 3);
        nb_tensor *scale = TR(NB_F64, &seed, S(c)), *bias = TR(NB_F64, &seed, S(c));
        nb_tensor *mean = TR(NB_F64, &seed, S(c)), *var = TRU(NB_F64, &seed, S(c), 0.5, 2);
        for (int mode = 0; mode < 3; mode++) {
            /* training, is_test, use_global_stats */
            nb_attr a[] = {NB_ATTR_FLOAT("momentum", 0.7), NB_ATTR_FLOAT("epsilon", 1e-3),
                           NB_ATTR_BOOL(mode == 2 ? "use_global_stats" : "is_test", mode != 0)};
            bn_ref r = ref_bn(x, scale, bias, mean, var, 0.7, 1e-3, mode != 0);
            for (int d = 0; d < 2; d++) {
                nb_tensor *in[] = {tcast(x, dtypes[d]), tcast(scale, dtypes[d]), tcast(bias, dtypes[d]),
                                   tcast(mean, dtypes[d]), tcast(var, dtypes[d])};
                nb_tensor *out[5];
                CHECK_OK(run_op("batch_norm", 5, in, 3, a, 5, out));
                char what[64];
                snprintf(what, sizeof what, "shape %d mode %d %s", si, mode, nb_dtype_name(dtypes[d]));
                check_bn(what, out, &r, d ? 1e-12 : 1e-5);
                release_n(5, out);
                release_n(5, in);
            }
            release_ref(&r);
        }
        RELEASE(x, scale, bias, mean, var);
    }
}

/* Float activations far from zero, each plane about a mean of its own: the
 * variance is a centred sum pooled over planes, so it keeps float's relative
 * accuracy where a sum of x^2 would lose all of it. */
static void test_batch_norm_offset_planes(void)
{
    uint64_t seed = 17;
    nb_tensor *u = TR(NB_F64, &seed, S(4, 2, 8, 8));
    for (int64_t i = 0; i < 512; i++) /* plane p = i / 64 sits at 1000 + 0.5 p */
        nb_tensor_set(u, i, (double)(float)(1000 + 0.5 * (double)(i / 64) + nb_tensor_get(u, i)));
    double want[2];
    for (int ch = 0; ch < 2; ch++) {
        double sum = 0, sq = 0;
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 64; j++) sum += nb_tensor_get(u, (n * 2 + ch) * 64 + j);
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 64; j++) {
                double d = nb_tensor_get(u, (n * 2 + ch) * 64 + j) - sum / 256;
                sq += d * d;
            }
        want[ch] = sq / 255; /* VarianceOut is unbiased */
    }
    nb_tensor *x = tcast(u, NB_F32), *scale, *bias, *mean, *var;
    CHECK_OK(nb_tensor_full(&scale, NB_F32, 1, S(2), 1));
    CHECK_OK(nb_tensor_full(&bias, NB_F32, 1, S(2), 0));
    CHECK_OK(nb_tensor_full(&mean, NB_F32, 1, S(2), 0));
    CHECK_OK(nb_tensor_full(&var, NB_F32, 1, S(2), 1));
    nb_attr a[] = {NB_ATTR_FLOAT("momentum", 0)};
    nb_tensor *in[] = {x, scale, bias, mean, var}, *out[5];
    CHECK_OK(run_op("batch_norm", 5, in, 1, a, 5, out));
    for (int ch = 0; ch < 2; ch++) CHECK(fabs(nb_tensor_get(out[2], ch) - want[ch]) < 1e-5 * want[ch]);
    release_n(5, out);
    RELEASE(u, x, scale, bias, mean, var);
}

/* In a program MeanOut and VarianceOut are the very Mean and Variance vars. */
static void test_batch_norm_inplace(void)
{
    nb_tensor *x = T(NB_F64, S(4, 2), 1, 0, 2, 0, 3, 2, 4, 2);
    nb_tensor *scale = T(NB_F64, S(2), 1, 1), *bias = T(NB_F64, S(2), 0, 0);
    nb_tensor *mean = T(NB_F64, S(2), 0, 1), *var = T(NB_F64, S(2), 1, 2);
    nb_tensor *in[] = {x, scale, bias, mean, var};
    nb_tensor *out[5] = {NULL, mean, var, NULL, NULL};
    CHECK_OK(nb_op_run("batch_norm", NB_TENSORS_N(5, in), NB_NO_ATTRS, 5, out));
    CHECK_TENSOR(mean, S(2), 1e-12, 0.25, 1.0);
    CHECK_TENSOR(var, S(2), 1e-12, 0.9 + 0.1 * 5.0 / 3, 1.8 + 0.1 * 4.0 / 3);
    CHECK(out[1] == mean && out[2] == var);
    /* Y written over X. */
    nb_tensor *out2[5] = {x, NULL, NULL, NULL, NULL};
    CHECK_OK(nb_op_run("batch_norm", NB_TENSORS_N(5, in), NB_NO_ATTRS, 5, out2));
    const double inv0 = 1 / sqrt(1.25 + 1e-5);
    CHECK_NEAR(nb_tensor_get(x, 0), -1.5 * inv0, 1e-12);
    CHECK_NEAR(nb_tensor_get(x, 6), 1.5 * inv0, 1e-12);
    RELEASE(out[0], out[3], out[4], out2[1], out2[2], out2[3], out2[4]);
    RELEASE(x, scale, bias, mean, var);
}

static void bn_grad_case(const char *what, int ndim, const int64_t *shape, int mode, bool pass_running, uint64_t *seed)
{
    const int64_t c = shape[1];
    nb_attr a[] = {NB_ATTR_FLOAT("epsilon", 1e-3), NB_ATTR_BOOL(mode == 2 ? "use_global_stats" : "is_test", mode != 0)};
    nb_tensor *x = trand_(NB_F64, ndim, shape, seed, -2, 2);
    nb_tensor *scale = TRU(NB_F64, seed, S(c), 0.5, 1.5), *bias = TR(NB_F64, seed, S(c));
    nb_tensor *mean = TR(NB_F64, seed, S(c)), *var = TRU(NB_F64, seed, S(c), 0.5, 2);
    nb_tensor *dy = trand_(NB_F64, ndim, shape, seed, -1, 1);
    nb_tensor *fin[] = {x, scale, bias, mean, var}, *fout[5];
    CHECK_OK(run_op("batch_norm", 5, fin, 2, a, 5, fout));
    nb_tensor *gin[] = {x, scale, fout[3], fout[4], dy, pass_running ? mean : NULL, pass_running ? var : NULL};
    nb_tensor *g[3];
    CHECK_OK(run_op("batch_norm_grad", pass_running ? 7 : 5, gin, 2, a, 3, g));
    double ex = fd_check("batch_norm", 5, fin, 2, a, 5, 0, dy, 0, g[0]);
    double es = fd_check("batch_norm", 5, fin, 2, a, 5, 0, dy, 1, g[1]);
    double eb = fd_check("batch_norm", 5, fin, 2, a, 5, 0, dy, 2, g[2]);
    if (!(ex <= 1e-6 && es <= 1e-6 && eb <= 1e-6)) {
        fprintf(stderr, "  batch_norm_grad %s: finite differences differ by %g (DX), %g (DScale), %g (DBias)\n", what,
                ex, es, eb);
        test_failures_in_current++;
    }
    /* float32 against float64, and DX on its own. */
    nb_tensor *gin32[7], *g32[3];
    for (int i = 0; i < 7; i++) gin32[i] = tcast(gin[i], NB_F32);
    CHECK_OK(run_op("batch_norm_grad", pass_running ? 7 : 5, gin32, 2, a, 3, g32));
    for (int i = 0; i < 3; i++) CHECK(g32[i] && g32[i]->dtype == NB_F32 && rel_diff(g32[i], g[i]) < 1e-4);
    nb_tensor *dx_only = NULL;
    CHECK_OK(nb_op_run("batch_norm_grad", NB_TENSORS_N(pass_running ? 7 : 5, gin), NB_ATTRS_N(2, a), 1, &dx_only));
    CHECK(rel_diff(dx_only, g[0]) == 0);
    nb_tensor_release(dx_only);
    release_n(7, gin32);
    release_n(3, g32);
    release_n(3, g);
    release_n(5, fout);
    RELEASE(x, scale, bias, mean, var, dy);
}

static void test_batch_norm_grad(void)
{
    uint64_t seed = 17;
    bn_grad_case("train 2-D", 2, S(5, 3), 0, false, &seed);
    bn_grad_case("train 4-D", 4, S(2, 3, 2, 2), 0, false, &seed);
    bn_grad_case("is_test, saved stats", 4, S(2, 3, 2, 2), 1, false, &seed);
    bn_grad_case("is_test, running stats", 2, S(4, 3), 1, true, &seed);
    bn_grad_case("use_global_stats", 4, S(2, 2, 3, 1), 2, true, &seed);
}

/* ---- layer_norm -------------------------------------------------------------- */

static nb_tensor *ref_ln(const nb_tensor *x, int axis, const nb_tensor *scale, const nb_tensor *bias, double eps,
                         nb_tensor **mean, nb_tensor **var)
{
    int64_t rows = 1;
    for (int i = 0; i < axis; i++) rows *= x->shape[i];
    int64_t cols = nb_tensor_numel(x) / rows;
    nb_tensor *y = new_f64(x->ndim, x->shape);
    *mean = new_f64(1, S(rows));
    *var = new_f64(1, S(rows));
    for (int64_t r = 0; r < rows; r++) {
        double mu = 0, v = 0;
        for (int64_t j = 0; j < cols; j++) mu += nb_tensor_get(x, r * cols + j);
        mu /= (double)cols;
        for (int64_t j = 0; j < cols; j++) v += pow(nb_tensor_get(x, r * cols + j) - mu, 2);
        v /= (double)cols;
        nb_tensor_set(*mean, r, mu);
        nb_tensor_set(*var, r, v);
        for (int64_t j = 0; j < cols; j++) {
            double t = (nb_tensor_get(x, r * cols + j) - mu) / sqrt(v + eps);
            if (scale) t *= nb_tensor_get(scale, j);
            if (bias) t += nb_tensor_get(bias, j);
            nb_tensor_set(y, r * cols + j, t);
        }
    }
    return y;
}

static void test_layer_norm_hand(void)
{
    const double eps = 1e-5, i0 = 1 / sqrt(2.0 / 3 + eps);
    for (int d = 0; d < 2; d++) {
        nb_tensor *x = T(dtypes[d], S(2, 3), 1, 2, 3, 4, 4, 4);
        nb_tensor *scale = T(dtypes[d], S(3), 1, 2, 3), *bias = T(dtypes[d], S(3), 0, 0, 1);
        nb_tensor *in[] = {x, scale, bias}, *out[3];
        CHECK_OK(run_op("layer_norm", 3, in, 0, NULL, 3, out));
        CHECK_TENSOR(out[0], S(2, 3), 1e-5, -i0, 0, 3 * i0 + 1, 0, 0, 1);
        CHECK_TENSOR(out[1], S(2), 1e-6, 2, 4);
        CHECK_TENSOR(out[2], S(2), 1e-6, 2.0 / 3, 0);
        CHECK(out[0] && out[0]->dtype == dtypes[d]);
        release_n(3, out);
        nb_tensor *plain[] = {x, NULL, NULL};
        CHECK_OK(run_op("layer_norm", 3, plain, 0, NULL, 3, out));
        CHECK_TENSOR(out[0], S(2, 3), 1e-5, -i0, 0, i0, 0, 0, 0);
        release_n(3, out);
        RELEASE(x, scale, bias);
    }
}

typedef struct ln_case {
    int axis;
    int sc_ndim; /* 0: no Scale; 1: [cols]; 2: the normalised dims */
    bool bias;
} ln_case;

static const ln_case ln_cases[] = {
    {1, 1, true}, {1, 2, true}, {1, 0, false}, {2, 1, true}, {2, 0, true}, {1, 2, false}, {-1, 1, true}, {0, 1, true},
};

static void ln_params(const ln_case *k, uint64_t *seed, nb_tensor **scale, nb_tensor **bias)
{
    /* X is [2, 3, 4]. */
    int axis = k->axis < 0 ? k->axis + 3 : k->axis;
    int64_t cols = axis == 0 ? 24 : axis == 1 ? 12 : 4;
    *scale = NULL;
    if (k->sc_ndim == 1) *scale = TRU(NB_F64, seed, S(cols), 0.5, 1.5);
    else if (k->sc_ndim == 2 && axis == 1) *scale = TRU(NB_F64, seed, S(3, 4), 0.5, 1.5);
    *bias = k->bias ? (k->sc_ndim == 2 ? TR(NB_F64, seed, S(3, 4)) : TR(NB_F64, seed, S(cols))) : NULL;
}

static void test_layer_norm_reference(void)
{
    uint64_t seed = 23;
    for (size_t ci = 0; ci < sizeof ln_cases / sizeof *ln_cases; ci++) {
        const ln_case *k = &ln_cases[ci];
        nb_tensor *x = TRU(NB_F64, &seed, S(2, 3, 4), -2, 3), *scale, *bias, *rm, *rv;
        ln_params(k, &seed, &scale, &bias);
        int axis = k->axis < 0 ? k->axis + 3 : k->axis;
        nb_tensor *want = ref_ln(x, axis, scale, bias, 1e-3, &rm, &rv);
        nb_attr a[] = {NB_ATTR_INT("begin_norm_axis", k->axis), NB_ATTR_FLOAT("epsilon", 1e-3)};
        for (int d = 0; d < 2; d++) {
            nb_tensor *in[] = {tcast(x, dtypes[d]), tcast(scale, dtypes[d]), tcast(bias, dtypes[d])}, *out[3];
            CHECK_OK(run_op("layer_norm", 3, in, 2, a, 3, out));
            double tol = d ? 1e-12 : 1e-5;
            double e0 = rel_diff(out[0], want), e1 = rel_diff(out[1], rm), e2 = rel_diff(out[2], rv);
            if (!(e0 <= tol && e1 <= tol && e2 <= tol)) {
                fprintf(stderr, "  layer_norm case %zu %s: off by %g (Y), %g (Mean), %g (Variance)\n", ci,
                        nb_dtype_name(dtypes[d]), e0, e1, e2);
                test_failures_in_current++;
            }
            release_n(3, out);
            release_n(3, in);
        }
        RELEASE(x, scale, bias, want, rm, rv);
    }
}

static void test_layer_norm_grad(void)
{
    uint64_t seed = 29;
    for (size_t ci = 0; ci < sizeof ln_cases / sizeof *ln_cases; ci++) {
        const ln_case *k = &ln_cases[ci];
        nb_tensor *x = TRU(NB_F64, &seed, S(2, 3, 4), -2, 3), *scale, *bias;
        ln_params(k, &seed, &scale, &bias);
        nb_tensor *dy = TR(NB_F64, &seed, S(2, 3, 4));
        nb_attr a[] = {NB_ATTR_INT("begin_norm_axis", k->axis), NB_ATTR_FLOAT("epsilon", 1e-3)};
        nb_tensor *fin[] = {x, scale, bias}, *fout[3], *g[3];
        CHECK_OK(run_op("layer_norm", 3, fin, 2, a, 3, fout));
        nb_tensor *gin[] = {x, scale, fout[1], fout[2], dy};
        CHECK_OK(run_op("layer_norm_grad", 5, gin, 2, a, 3, g));
        double ex = fd_check("layer_norm", 3, fin, 2, a, 3, 0, dy, 0, g[0]);
        double es = scale ? fd_check("layer_norm", 3, fin, 2, a, 3, 0, dy, 1, g[1]) : 0;
        double eb = bias ? fd_check("layer_norm", 3, fin, 2, a, 3, 0, dy, 2, g[2]) : 0;
        if (!(ex <= 1e-6 && es <= 1e-6 && eb <= 1e-6)) {
            fprintf(stderr,
                    "  layer_norm_grad case %zu: finite differences differ by %g (DX), %g (DScale), %g (DBias)\n", ci,
                    ex, es, eb);
            test_failures_in_current++;
        }
        /* DScale and DBias take Scale's shape (or [cols] without Scale). */
        if (scale) CHECK(g[1] && nb_shape_equal(g[1]->ndim, g[1]->shape, scale->ndim, scale->shape));
        nb_tensor *gin32[5], *g32[3];
        for (int i = 0; i < 5; i++) gin32[i] = tcast(gin[i], NB_F32);
        CHECK_OK(run_op("layer_norm_grad", 5, gin32, 2, a, 3, g32));
        for (int i = 0; i < 3; i++) CHECK(g32[i] && g32[i]->dtype == NB_F32 && rel_diff(g32[i], g[i]) < 1e-4);
        release_n(5, gin32);
        release_n(3, g32);
        release_n(3, g);
        release_n(3, fout);
        RELEASE(x, scale, bias, dy);
    }
}

/* Bigger than the parallel threshold: rows split across threads. */
static void test_layer_norm_large(void)
{
    uint64_t seed = 31;
    nb_tensor *x = TR(NB_F64, &seed, S(96, 384)), *scale = TR(NB_F64, &seed, S(384)), *bias = TR(NB_F64, &seed, S(384));
    nb_tensor *rm, *rv, *want = ref_ln(x, 1, scale, bias, 1e-5, &rm, &rv);
    nb_tensor *in[] = {x, scale, bias}, *out[3];
    CHECK_OK(run_op("layer_norm", 3, in, 0, NULL, 3, out));
    CHECK(rel_diff(out[0], want) < 1e-12);
    CHECK(rel_diff(out[1], rm) < 1e-12);
    CHECK(rel_diff(out[2], rv) < 1e-12);
    /* DBias is the column sum of DY, whatever the rest. */
    nb_tensor *dy = TR(NB_F64, &seed, S(96, 384)), *gin[] = {x, scale, out[1], out[2], dy}, *g[3];
    CHECK_OK(run_op("layer_norm_grad", 5, gin, 0, NULL, 3, g));
    double worst = 0;
    for (int64_t j = 0; j < 384; j++) {
        double s = 0;
        for (int64_t r = 0; r < 96; r++) s += nb_tensor_get(dy, r * 384 + j);
        worst = fmax(worst, fabs(s - nb_tensor_get(g[2], j)));
    }
    CHECK(worst < 1e-10);
    release_n(3, g);
    release_n(3, out);
    RELEASE(x, scale, bias, want, rm, rv, dy);
}

/* ---- inference and errors ------------------------------------------------------ */

static void test_norm_infer(void)
{
    nb_var_info x = VI(NB_F32, S(-1, 3, 4, 4)), p = VI(NB_F32, S(3)), out[5];
    const nb_var_info *in[] = {&x, &p, &p, &p, &p};
    CHECK_OK(infer_shapes("batch_norm", 5, in, 0, NULL, 5, out));
    CHECK_INFO(out[0], NB_F32, S(-1, 3, 4, 4));
    for (int i = 1; i < 5; i++) CHECK_INFO(out[i], NB_F32, S(3));
    /* Unknown channels come from the per-channel inputs. */
    nb_var_info x2 = VI(NB_F32, S(-1, -1));
    const nb_var_info *in2[] = {&x2, &p, &p, &p, &p};
    CHECK_OK(infer_shapes("batch_norm", 5, in2, 0, NULL, 5, out));
    CHECK_INFO(out[1], NB_F32, S(3));
    const nb_var_info *gin[] = {&x, &p, &p, &p, &x};
    CHECK_OK(infer_shapes("batch_norm_grad", 5, gin, 0, NULL, 3, out));
    CHECK_INFO(out[0], NB_F32, S(-1, 3, 4, 4));
    CHECK_INFO(out[2], NB_F32, S(3));

    nb_var_info lx = VI(NB_F64, S(-1, 5, 6)), s30 = VI(NB_F64, S(30)), s6 = VI(NB_F64, S(6));
    const nb_var_info *lin[] = {&lx, &s30, &s30};
    CHECK_OK(infer_shapes("layer_norm", 3, lin, 0, NULL, 3, out));
    CHECK_INFO(out[0], NB_F64, S(-1, 5, 6));
    CHECK_INFO(out[1], NB_F64, S(-1));
    CHECK_INFO(out[2], NB_F64, S(-1));
    nb_attr ax2[] = {NB_ATTR_INT("begin_norm_axis", 2)};
    const nb_var_info *lin2[] = {&lx, &s6, NULL};
    CHECK_OK(infer_shapes("layer_norm", 3, lin2, 1, ax2, 3, out));
    CHECK_INFO(out[1], NB_F64, S(-1));
    nb_var_info lx2 = VI(NB_F64, S(4, -1, 6));
    const nb_var_info *lin3[] = {&lx2, &s6, &s6};
    CHECK_OK(infer_shapes("layer_norm", 3, lin3, 1, ax2, 3, out));
    CHECK_INFO(out[1], NB_F64, S(-1));
    CHECK_OK(infer_shapes("layer_norm", 3, lin3, 0, NULL, 3, out));
    CHECK_INFO(out[1], NB_F64, S(4));
    nb_var_info rows = VI(NB_F64, S(-1));
    const nb_var_info *lgin[] = {&lx, NULL, &rows, &rows, &lx};
    CHECK_OK(infer_shapes("layer_norm_grad", 5, lgin, 0, NULL, 3, out));
    CHECK_INFO(out[0], NB_F64, S(-1, 5, 6));
    CHECK_INFO(out[1], NB_F64, S(30));
}

static void test_norm_errors(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *c3 = T(NB_F32, S(3), 1, 1, 1), *c2 = T(NB_F32, S(2), 1, 1);
    nb_tensor *out[5] = {NULL};
    nb_tensor *bad_c[] = {x, c3, c2, c3, c3};
    CHECK_ERR(nb_op_run("batch_norm", NB_TENSORS_N(5, bad_c), NB_NO_ATTRS, 5, out), NB_ERR_SHAPE,
              "batch_norm: Bias has shape [2] but X's channels need [3]");
    nb_tensor *one = T(NB_F32, S(1, 3), 1, 2, 3), *single[] = {one, c3, c3, c3, c3};
    CHECK_ERR(nb_op_run("batch_norm", NB_TENSORS_N(5, single), NB_NO_ATTRS, 5, out), NB_ERR_SHAPE,
              "more than one value per channel");
    nb_attr t[] = {NB_ATTR_BOOL("is_test", true)};
    CHECK_OK(nb_op_run("batch_norm", NB_TENSORS_N(5, single), NB_ATTRS_N(1, t), 5, out));
    release_n(5, out);
    nb_tensor *d64 = T(NB_F64, S(3), 1, 1, 1), *mixed[] = {x, c3, c3, d64, c3};
    CHECK_ERR(nb_op_run("batch_norm", NB_TENSORS_N(5, mixed), NB_NO_ATTRS, 5, out), NB_ERR_DTYPE,
              "batch_norm: Mean has dtype float64");
    nb_tensor *flat[] = {c3, c3, c3, c3, c3};
    CHECK_ERR(nb_op_run("batch_norm", NB_TENSORS_N(5, flat), NB_NO_ATTRS, 5, out), NB_ERR_SHAPE,
              "batch_norm: X has shape [3]");
    nb_attr mom[] = {NB_ATTR_FLOAT("momentum", 1.5)};
    nb_tensor *ok[] = {x, c3, c3, c3, c3};
    CHECK_ERR(nb_op_run("batch_norm", NB_TENSORS_N(5, ok), NB_ATTRS_N(1, mom), 5, out), NB_ERR_ARG,
              "batch_norm: momentum");
    nb_tensor *gin[] = {x, c3, c3, c3, x, c3, NULL};
    CHECK_ERR(nb_op_run("batch_norm_grad", NB_TENSORS_N(7, gin), NB_NO_ATTRS, 3, out), NB_ERR_ARG,
              "batch_norm_grad: Mean and Variance");
    nb_tensor *dy_bad[] = {x, c3, c3, c3, one};
    CHECK_ERR(nb_op_run("batch_norm_grad", NB_TENSORS_N(5, dy_bad), NB_NO_ATTRS, 3, out), NB_ERR_SHAPE,
              "batch_norm_grad: DY has shape [1, 3]");

    nb_attr ax[] = {NB_ATTR_INT("begin_norm_axis", 2)};
    nb_tensor *ln[] = {x, c3, c3};
    CHECK_ERR(nb_op_run("layer_norm", NB_TENSORS_N(3, ln), NB_ATTRS_N(1, ax), 3, out), NB_ERR_ARG,
              "layer_norm: begin_norm_axis 2 is out of range");
    nb_tensor *ln_bad[] = {x, c2, NULL};
    CHECK_ERR(nb_op_run("layer_norm", NB_TENSORS_N(3, ln_bad), NB_NO_ATTRS, 3, out), NB_ERR_SHAPE,
              "layer_norm: Scale has shape [2]");
    nb_tensor *x3 = T(NB_F32, S(1, 2, 3), 1, 2, 3, 4, 5, 6), *s6 = T(NB_F32, S(6), 1, 1, 1, 1, 1, 1);
    nb_tensor *s23 = T(NB_F32, S(2, 3), 1, 1, 1, 1, 1, 1), *forms[] = {x3, s6, s23};
    CHECK_ERR(nb_op_run("layer_norm", NB_TENSORS_N(3, forms), NB_NO_ATTRS, 3, out), NB_ERR_SHAPE,
              "layer_norm: Scale has shape [6] but Bias has shape [2, 3]");
    RELEASE(x3, s6, s23);
    nb_tensor *xi = NULL;
    CHECK_OK(nb_tensor_new(&xi, NB_I32, 2, S(2, 3)));
    nb_tensor *ln_int[] = {xi, NULL, NULL};
    CHECK_ERR(nb_op_run("layer_norm", NB_TENSORS_N(3, ln_int), NB_NO_ATTRS, 3, out), NB_ERR_DTYPE,
              "layer_norm: X has dtype int32");
    nb_tensor *lg_bad[] = {x, NULL, c3, c2, x};
    CHECK_ERR(nb_op_run("layer_norm_grad", NB_TENSORS_N(5, lg_bad), NB_NO_ATTRS, 3, out), NB_ERR_SHAPE,
              "layer_norm_grad: Mean has shape [3]");
    nb_attr neg_eps[] = {NB_ATTR_FLOAT("epsilon", -1)};
    nb_tensor *plain[] = {x};
    CHECK_ERR(nb_op_run("layer_norm", NB_TENSORS_N(1, plain), NB_ATTRS_N(1, neg_eps), 3, out), NB_ERR_ARG,
              "layer_norm: epsilon");
    for (int i = 0; i < 5; i++) CHECK(out[i] == NULL);
    RELEASE(x, c3, c2, one, d64, xi);
}

int main(void)
{
    RUN(test_batch_norm_hand);
    RUN(test_batch_norm_reference);
    RUN(test_batch_norm_offset_planes);
    RUN(test_batch_norm_inplace);
    RUN(test_batch_norm_grad);
    RUN(test_layer_norm_hand);
    RUN(test_layer_norm_reference);
    RUN(test_layer_norm_grad);
    RUN(test_layer_norm_large);
    RUN(test_norm_infer);
    RUN(test_norm_errors);
    return test_report();
}
