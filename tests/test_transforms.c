/* The functional transforms against closed forms and finite differences:
 * vjp with a reusable pullback, grad and value_and_grad (argnums, free
 * variables, auxiliary outputs), derivatives of any order by nesting, native
 * and derived forward mode, Jacobians both ways, Hessians and
 * Hessian-vector products by forward over reverse (checked against reverse
 * over reverse too), and a user's op with its own rules. */
#include <stdlib.h>
#include "test.h"

/* f(x, y) = (x * y, sin(x)), elementwise. */
static nb_status f_xy(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    out[0] = nb_mul(b, in[0], in[1]);
    out[1] = nb_sin(b, in[0]);
    return nb_builder_status(b);
}

static void test_vjp_and_reused_pullback(void)
{
    nb_function f = {f_xy, 2, 2, NULL};
    nb_tensor *x = T(NB_F64, S(2), 0.5, -1), *y = T(NB_F64, S(2), 2, 3), *out[2], *g[2];
    nb_pullback *pb;
    REQUIRE_OK(nb_vjp(&f, (nb_tensor *[]){x, y}, out, &pb));
    CHECK_TENSOR(out[0], S(2), 1e-12, 1, -3);
    nb_tensor *u0 = T(NB_F64, S(2), 1, 1), *u1 = T(NB_F64, S(2), 10, 100);
    for (int rep = 0; rep < 2; rep++) { /* the pullback is reusable */
        REQUIRE_OK(nb_pullback_apply(pb, (nb_tensor *[]){u0, u1}, g));
        CHECK_TENSOR(g[0], S(2), 1e-12, 2 + 10 * cos(0.5), 3 + 100 * cos(-1.0));
        CHECK_TENSOR(g[1], S(2), 1e-12, 0.5, -1);
        release_all(g[0], g[1], NULL);
    }
    nb_pullback_free(pb);
    release_all(x, y, u0, u1, out[0], out[1], NULL);
}

/* loss = sum(w * x^2) with w a free variable; aux = x + 1. */
static nb_status f_free(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value w = nb_eager_value(b, ctx);
    out[0] = nb_reduce_sum(b, nb_mul(b, w, nb_square(b, in[0])), 0, NULL, false);
    out[1] = nb_scale(b, in[0], 1, 1);
    return nb_builder_status(b);
}

static void test_value_and_grad_argnums_free_and_aux(void)
{
    nb_tensor *w = T(NB_F64, S(2), 3, 5), *x = T(NB_F64, S(2), 1, 2), *z = T(NB_F64, S(1), 7);
    REQUIRE_OK(nb_tensor_set_requires_grad(w, true));
    nb_function f = {f_free, 1, 2, w};
    nb_tensor *out[2], *g[1], *fg[1];
    REQUIRE_OK(nb_value_and_grad(&f, &x, &(nb_grad_opts){.free_vars = NB_TENSORS_N(1, &w), .free_grads = fg}, out, g));
    CHECK_SCALAR(out[0], 3 + 20, 1e-12);
    CHECK_TENSOR(out[1], S(2), 0, 2, 3); /* auxiliary output, as is */
    CHECK_TENSOR(g[0], S(2), 1e-12, 6, 20);
    CHECK_TENSOR(fg[0], S(2), 1e-12, 1, 4);
    release_all(out[0], out[1], g[0], fg[0], NULL);
    CHECK_ERR(nb_value_and_grad(&f, &x, &(nb_grad_opts){.n_argnums = 1, .argnums = (int[]){3}}, out, g), NB_ERR_ARG,
              "argnum 3");
    nb_function bad = {f_xy, 2, 2, NULL};
    nb_tensor *g2[2];
    CHECK_ERR(nb_value_and_grad(&bad, (nb_tensor *[]){x, x}, NULL, out, g2), NB_ERR_SHAPE, "must be a scalar");
    release_all(w, x, z, NULL);
}

/* Nesting: level k is the derivative of level k-1; level 0 is sum(sin(x)). */
typedef struct level {
    const nb_function *inner;
} level;

static nb_status f_sin(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    out[0] = nb_reduce_sum(b, nb_sin(b, in[0]), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status f_derivative(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const level *l = ctx;
    nb_tensor *x = nb_eager_tensor(in[0]), *o[1], *g[1];
    nb_status st = nb_value_and_grad(l->inner, &x, NULL, o, g);
    if (st) return st;
    out[0] = nb_reduce_sum(b, nb_eager_value(b, g[0]), 0, NULL, false);
    release_all(o[0], g[0], NULL);
    return nb_builder_status(b);
}

static void test_fourth_derivative_of_sin_by_nesting(void)
{
    nb_function f0 = {f_sin, 1, 1, NULL};
    level l1 = {&f0};
    nb_function f1 = {f_derivative, 1, 1, &l1};
    level l2 = {&f1};
    nb_function f2 = {f_derivative, 1, 1, &l2};
    level l3 = {&f2};
    nb_function f3 = {f_derivative, 1, 1, &l3};
    nb_tensor *x = T(NB_F64, S(3), 0.3, -1.2, 2.0), *o[1], *g[1];
    REQUIRE_OK(nb_value_and_grad(&f3, &x, NULL, o, g));
    /* d/dx of the third derivative (-cos) is sin. */
    CHECK_TENSOR(g[0], S(3), 1e-10, sin(0.3), sin(-1.2), sin(2.0));
    CHECK_SCALAR(o[0], -(cos(0.3) + cos(-1.2) + cos(2.0)), 1e-10);
    release_all(o[0], g[0], x, NULL);
}

/* f(x, y) = (sum(x^2 y), x + y, 2 y): one value, two auxiliary outputs. */
static nb_status f_aux(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    out[0] = nb_reduce_sum(b, nb_mul(b, nb_square(b, in[0]), in[1]), 0, NULL, false);
    out[1] = nb_add(b, in[0], in[1]);
    out[2] = nb_scale(b, in[1], 2, 0);
    return nb_builder_status(b);
}

static void test_grad_argnums_and_has_aux(void)
{
    nb_tensor *x = T(NB_F64, S(2), 1, -2), *y = T(NB_F64, S(2), 3, 0.5), *g[2], *aux[2];
    nb_function f = {f_aux, 2, 3, NULL};
    /* d/dx = 2 x y, d/dy = x^2. */
    REQUIRE_OK(nb_grad(&f, (nb_tensor *[]){x, y}, &(nb_grad_opts){.flags = NB_HAS_AUX}, g, aux));
    CHECK_TENSOR(g[0], S(2), 1e-12, 6, -2);
    CHECK_TENSOR(g[1], S(2), 1e-12, 1, 4);
    CHECK_TENSOR(aux[0], S(2), 0, 4, -1.5);
    CHECK_TENSOR(aux[1], S(2), 0, 6, 1);
    release_all(g[0], g[1], aux[0], aux[1], NULL);
    /* argnums picks and orders the inputs. */
    REQUIRE_OK(nb_grad(&f, (nb_tensor *[]){x, y},
                       &(nb_grad_opts){.n_argnums = 2, .argnums = (int[]){1, 0}, .flags = NB_HAS_AUX}, g, aux));
    CHECK_TENSOR(g[0], S(2), 1e-12, 1, 4);
    CHECK_TENSOR(g[1], S(2), 1e-12, 6, -2);
    release_all(g[0], g[1], aux[0], aux[1], NULL);
    /* A single output needs no has_aux. */
    nb_function s = {f_sin, 1, 1, NULL};
    REQUIRE_OK(nb_grad(&s, &x, NULL, g, NULL));
    CHECK_TENSOR(g[0], S(2), 1e-12, cos(1.0), cos(-2.0));
    nb_tensor_release(g[0]);
    CHECK_ERR(nb_grad(&f, (nb_tensor *[]){x, y}, NULL, g, NULL), NB_ERR_ARG, "pass NB_HAS_AUX");
    CHECK_ERR(nb_grad(&s, &x, &(nb_grad_opts){.flags = NB_HAS_AUX}, g, aux), NB_ERR_ARG,
              "NB_HAS_AUX needs a function of 2 or more outputs");
    CHECK_ERR(nb_grad(&f, (nb_tensor *[]){x, y},
                      &(nb_grad_opts){.n_argnums = 1, .argnums = (int[]){2}, .flags = NB_HAS_AUX}, g, aux),
              NB_ERR_ARG, "argnum 2");
    release_all(x, y, NULL);
}

/* g(x) = (x0 x1, sin(x2) + x0^2): R^3 -> R^2. */
static nb_status f_vec(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value parts[3];
    nb_split(b, in[0], 0, 3, parts);
    nb_value a = nb_mul(b, parts[0], parts[1]), c = nb_add(b, nb_sin(b, parts[2]), nb_square(b, parts[0]));
    out[0] = nb_concat(b, 2, (nb_value[]){a, c}, 0);
    return nb_builder_status(b);
}

static void test_forward_mode_and_jacobians(void)
{
    nb_function f = {f_vec, 1, 1, NULL};
    double x0 = 0.7, x1 = -0.4, x2 = 1.3;
    nb_tensor *x = T(NB_F64, S(3), x0, x1, x2), *t = T(NB_F64, S(3), 1, 2, 3);
    nb_tensor *o1[1], *t1[1], *o2[1], *t2[1], *jr, *jf;
    REQUIRE_OK(nb_jvp(&f, &x, &t, o1, t1));
    REQUIRE_OK(nb_jvp_by_reverse(&f, &x, &t, o2, t2));
    double want0 = x1 * 1 + x0 * 2, want1 = cos(x2) * 3 + 2 * x0 * 1;
    CHECK_TENSOR(t1[0], S(2), 1e-12, want0, want1);
    CHECK_TENSOR(t2[0], S(2), 1e-12, want0, want1);
    REQUIRE_OK(nb_jacrev(&f, &x, 0, 0, &jr));
    REQUIRE_OK(nb_jacfwd(&f, &x, 0, 0, &jf));
    CHECK_TENSOR(jr, S(2, 3), 1e-12, x1, x0, 0, 2 * x0, 0, cos(x2));
    CHECK(nb_tensor_allclose(jr, jf, 1e-12, 1e-14));
    release_all(x, t, o1[0], t1[0], o2[0], t2[0], jr, jf, NULL);
}

/* y = sin(x) * x0 on 150 elements: jacfwd takes several passes (32 columns
 * each), and agrees with jacrev. */
static nb_status f_wide(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value x0 = nb_slice(b, in[0], 1, (int64_t[]){0}, (int64_t[]){0}, (int64_t[]){1});
    out[0] = nb_mul(b, nb_sin(b, in[0]), x0);
    return nb_builder_status(b);
}

static void test_jacfwd_in_several_passes(void)
{
    nb_tensor *x, *jf, *jr;
    REQUIRE_OK(nb_tensor_new(&x, NB_F64, 1, (int64_t[]){150}));
    for (int i = 0; i < 150; i++) nb_tensor_set(x, i, 0.02 * i - 1);
    nb_function f = {f_wide, 1, 1, NULL};
    REQUIRE_OK(nb_jacfwd(&f, &x, 0, 0, &jf));
    REQUIRE_OK(nb_jacrev(&f, &x, 0, 0, &jr));
    CHECK(jf->ndim == 2 && jf->shape[0] == 150 && jf->shape[1] == 150);
    CHECK(nb_tensor_allclose(jf, jr, 1e-12, 1e-14));
    double x0 = -1, x149 = 0.02 * 149 - 1; /* dy149/dx149 = cos(x149) x0; dy149/dx0 = sin(x149) */
    CHECK_NEAR(nb_tensor_get(jf, 149 * 150 + 149), cos(x149) * x0, 1e-12);
    CHECK_NEAR(nb_tensor_get(jf, 149 * 150 + 0), sin(x149), 1e-12);
    CHECK_NEAR(nb_tensor_get(jf, 100 * 150 + 70), 0, 0);
    release_all(x, jf, jr, NULL);
}

/* f(x) = sum(x^3) + x0 x1: H = diag(6x) + [[0,1,..],[1,0,..],..]. */
static nb_status f_cubic(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value x = in[0], parts[3];
    nb_split(b, x, 0, 3, parts);
    out[0] = nb_add(b, nb_reduce_sum(b, nb_mul(b, nb_square(b, x), x), 0, NULL, false),
                    nb_reduce_sum(b, nb_mul(b, parts[0], parts[1]), 0, NULL, false));
    return nb_builder_status(b);
}

static void test_hessian_and_hvp(void)
{
    nb_function f = {f_cubic, 1, 1, NULL};
    nb_tensor *x = T(NB_F64, S(3), 1, -2, 0.5), *v = T(NB_F64, S(3), 1, 10, 100), *h, *hv;
    REQUIRE_OK(nb_hessian(&f, &x, 0, &h));
    CHECK_TENSOR(h, S(3, 3), 1e-12, 6, 1, 0, 1, -12, 0, 0, 0, 3);
    REQUIRE_OK(nb_hvp(&f, &x, 0, v, &hv));
    CHECK_TENSOR(hv, S(3), 1e-12, 6 + 10, 1 - 120, 300);
    release_all(h, hv, NULL);
    /* Reverse over reverse agrees. */
    REQUIRE_OK(nb_hessian_by_reverse(&f, &x, 0, &h));
    CHECK_TENSOR(h, S(3, 3), 1e-12, 6, 1, 0, 1, -12, 0, 0, 0, 3);
    REQUIRE_OK(nb_hvp_by_reverse(&f, &x, 0, v, &hv));
    CHECK_TENSOR(hv, S(3), 1e-12, 6 + 10, 1 - 120, 300);
    release_all(h, hv, NULL);
    nb_tensor *bad = T(NB_F64, S(2), 1, 1);
    CHECK_ERR(nb_hvp(&f, &x, 0, bad, &hv), NB_ERR_SHAPE, "hvp: the vector is float64 [2] but input 0 is float64 [3]");
    CHECK_ERR(nb_hessian(&f, &x, 1, &h), NB_ERR_ARG, "hessian: output 0 or input 1 out of range");
    release_all(x, v, bad, NULL);
}

/* The Hessian of a small MLP loss in its first-layer weights, against
 * central differences of the gradient. */
typedef struct mlp_data {
    nb_tensor *x, *w2, *y;
} mlp_data;

static nb_status f_mlp(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    mlp_data *d = ctx;
    nb_value h = nb_tanh(b, nb_matmul(b, nb_eager_value(b, d->x), in[0], 0));
    nb_value r = nb_sub(b, nb_matmul(b, h, nb_eager_value(b, d->w2), 0), nb_eager_value(b, d->y));
    out[0] = nb_reduce_mean(b, nb_square(b, r), 0, NULL, false);
    return nb_builder_status(b);
}

static void test_mlp_hessian_matches_finite_differences(void)
{
    mlp_data d = {T(NB_F64, S(4, 2), 0.5, -0.3, 0.8, 0.1, -0.6, 0.9, 0.2, -0.7), T(NB_F64, S(3, 1), 0.4, -0.5, 0.7),
                  T(NB_F64, S(4, 1), 0.1, -0.2, 0.3, 0.05)};
    nb_function f = {f_mlp, 1, 1, &d};
    nb_tensor *w = T(NB_F64, S(2, 3), 0.2, -0.4, 0.6, 0.3, 0.5, -0.1), *h;
    REQUIRE_OK(nb_hessian(&f, &w, 0, &h));
    CHECK(h->ndim == 4 && h->shape[0] == 2 && h->shape[3] == 3);
    double eps = 1e-5, worst = 0;
    for (int j = 0; j < 6; j++) {
        double orig = nb_tensor_get(w, j), gp[6], gm[6];
        for (int side = 0; side < 2; side++) {
            nb_tensor_set(w, j, orig + (side ? -eps : eps));
            nb_tensor *o[1], *g[1];
            REQUIRE_OK(nb_value_and_grad(&f, &w, NULL, o, g));
            for (int i = 0; i < 6; i++) (side ? gm : gp)[i] = nb_tensor_get(g[0], i);
            release_all(o[0], g[0], NULL);
        }
        nb_tensor_set(w, j, orig);
        for (int i = 0; i < 6; i++) {
            double num = (gp[i] - gm[i]) / (2 * eps), ana = nb_tensor_get(h, i * 6 + j);
            if (fabs(num - ana) > worst) worst = fabs(num - ana);
        }
    }
    CHECK(worst < 1e-7);
    nb_tensor *hr;
    REQUIRE_OK(nb_hessian_by_reverse(&f, &w, 0, &hr));
    CHECK(nb_tensor_allclose(h, hr, 1e-10, 1e-12));
    release_all(h, hr, w, d.x, d.w2, d.y, NULL);
}

/* A classifier's loss whose backward reads forward outputs (tanh, sigmoid,
 * softmax), runs a fused gradient op (softmax_with_cross_entropy_grad) and
 * sums gradients (a and h are each read twice):
 *   a = x W, h = tanh(a), s = sigmoid(h W2), z = s h + a,
 *   loss = mean(softmax_with_cross_entropy(z, label)) + sum(softmax(z) c). */
typedef struct cls_data {
    nb_tensor *x, *w2, *label, *c;
} cls_data;

static nb_status f_classifier(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    cls_data *d = ctx;
    nb_value a = nb_matmul(b, nb_eager_value(b, d->x), in[0], 0), h = nb_tanh(b, a);
    nb_value s = nb_sigmoid(b, nb_matmul(b, h, nb_eager_value(b, d->w2), 0));
    nb_value z = nb_add(b, nb_mul(b, s, h), a);
    nb_value ce =
        nb_reduce_mean(b, nb_softmax_with_cross_entropy(b, z, nb_eager_value(b, d->label), NULL), 0, NULL, false);
    nb_value sm = nb_reduce_sum(b, nb_mul(b, nb_softmax(b, z, 1), nb_eager_value(b, d->c)), 0, NULL, false);
    out[0] = nb_add(b, ce, sm);
    return nb_builder_status(b);
}

/* The worst difference between hv and central differences of f's gradient
 * along v. */
static double hvp_fd_error(const nb_function *f, nb_tensor *w, const nb_tensor *v, const nb_tensor *hv)
{
    int64_t n = nb_tensor_numel(w);
    double eps = 1e-5, worst = 0, *gp = calloc((size_t)n, sizeof *gp), *orig = calloc((size_t)n, sizeof *orig);
    for (int64_t i = 0; i < n; i++) orig[i] = nb_tensor_get(w, i);
    for (int side = 0; side < 2; side++) {
        for (int64_t i = 0; i < n; i++) nb_tensor_set(w, i, orig[i] + (side ? -eps : eps) * nb_tensor_get(v, i));
        nb_tensor *g[1];
        if (nb_grad(f, &w, NULL, g, NULL)) worst = INFINITY;
        for (int64_t i = 0; i < n && !isinf(worst); i++) {
            double gi = nb_tensor_get(g[0], i);
            if (!side) gp[i] = gi;
            else worst = fmax(worst, fabs((gp[i] - gi) / (2 * eps) - nb_tensor_get(hv, i)));
        }
        if (!isinf(worst)) nb_tensor_release(g[0]);
    }
    for (int64_t i = 0; i < n; i++) nb_tensor_set(w, i, orig[i]);
    free(gp);
    free(orig);
    return worst;
}

static void test_forward_over_reverse_through_saved_outputs_and_fused_grads(void)
{
    cls_data d = {T(NB_F64, S(5, 4), 0.5, -0.3, 0.8, 0.1, -0.6, 0.9, 0.2, -0.7, 0.3, 0.3, -0.2, 0.6, 0.1, -0.9, 0.4,
                    0.2, -0.5, 0.7, 0.6, -0.1),
                  T(NB_F64, S(3, 3), 0.4, -0.5, 0.7, 0.2, 0.9, -0.3, -0.6, 0.1, 0.5), T(NB_I64, S(5, 1), 0, 2, 1, 1, 0),
                  T(NB_F64, S(5, 3), 0.3, -0.2, 0.5, 0.1, 0.4, -0.6, -0.3, 0.2, 0.7, 0.5, -0.1, 0.2, 0.6, 0.3, -0.4)};
    nb_function f = {f_classifier, 1, 1, &d};
    nb_tensor *w = T(NB_F64, S(4, 3), 0.2, -0.4, 0.6, 0.3, 0.5, -0.1, -0.7, 0.8, 0.2, 0.1, -0.3, 0.4);
    nb_tensor *v = T(NB_F64, S(4, 3), 1, -2, 0.5, 0.3, 1.5, -1, 0.7, -0.2, 2, -1.1, 0.4, 0.9), *hv, *hvr, *h, *hr;
    REQUIRE_OK(nb_hvp(&f, &w, 0, v, &hv));
    REQUIRE_OK(nb_hvp_by_reverse(&f, &w, 0, v, &hvr));
    CHECK(nb_tensor_allclose(hv, hvr, 1e-10, 1e-12));
    double err = hvp_fd_error(&f, w, v, hv);
    CHECK(err < 1e-7);
    REQUIRE_OK(nb_hessian(&f, &w, 0, &h));
    REQUIRE_OK(nb_hessian_by_reverse(&f, &w, 0, &hr));
    CHECK(h->ndim == 4 && h->shape[0] == 4 && h->shape[1] == 3 && h->shape[2] == 4 && h->shape[3] == 3);
    CHECK(nb_tensor_allclose(h, hr, 1e-10, 1e-12));
    /* H v from the Hessian is the Hessian-vector product. */
    double worst = 0;
    for (int i = 0; i < 12; i++) {
        double acc = 0;
        for (int j = 0; j < 12; j++) acc += nb_tensor_get(h, i * 12 + j) * nb_tensor_get(v, j);
        worst = fmax(worst, fabs(acc - nb_tensor_get(hv, i)));
    }
    CHECK(worst < 1e-12);
    release_all(hv, hvr, h, hr, w, v, d.x, d.w2, d.label, d.c, NULL);
}

/* Through the normalisations, whose rules emit the fused batch_norm_grad and
 * layer_norm_grad: f(w) = sum(tanh(layer_norm(batch_norm(x w)))^2), with
 * the batch statistics of training. */
static nb_status f_norms(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_tensor **p = ctx; /* x [5, 4], scale [3], bias [3], running mean [3], running var [3] */
    nb_value h = nb_matmul(b, nb_eager_value(b, p[0]), in[0], 0), y[5];
    nb_value bn_in[5] = {h, nb_eager_value(b, p[1]), nb_eager_value(b, p[2]), nb_eager_value(b, p[3]),
                         nb_eager_value(b, p[4])};
    if (nb_emit(b, "batch_norm", NB_VALUES_N(5, bn_in), NB_NO_ATTRS, 5, y)) return nb_builder_status(b);
    nb_value ln_in[3] = {nb_tanh(b, y[0]), nb_eager_value(b, p[1]), nb_eager_value(b, p[2])}, z[3];
    if (nb_emit(b, "layer_norm", NB_VALUES_N(3, ln_in), NB_NO_ATTRS, 3, z)) return nb_builder_status(b);
    nb_value t = nb_tanh(b, nb_mul(b, z[0], nb_eager_value(b, p[1])));
    out[0] = nb_reduce_sum(b, nb_mul(b, t, t), 0, NULL, false);
    return nb_builder_status(b);
}

static void test_forward_over_reverse_through_normalisations(void)
{
    nb_tensor *p[5] = {T(NB_F64, S(5, 4), 0.5, -0.3, 0.8, 0.1, -0.6, 0.9, 0.2, -0.7, 0.3, 0.3, -0.2, 0.6, 0.1, -0.9,
                         0.4, 0.2, -0.5, 0.7, 0.6, -0.1),
                       T(NB_F64, S(3), 1.2, 0.7, -0.9), T(NB_F64, S(3), 0.1, -0.2, 0.3), T(NB_F64, S(3), 0, 0, 0),
                       T(NB_F64, S(3), 1, 1, 1)};
    nb_function f = {f_norms, 1, 1, p};
    nb_tensor *w = T(NB_F64, S(4, 3), 0.2, -0.4, 0.6, 0.3, 0.5, -0.1, -0.7, 0.8, 0.2, 0.1, -0.3, 0.4);
    nb_tensor *v = T(NB_F64, S(4, 3), 1, -2, 0.5, 0.3, 1.5, -1, 0.7, -0.2, 2, -1.1, 0.4, 0.9), *hv, *hvr;
    REQUIRE_OK(nb_hvp(&f, &w, 0, v, &hv));
    REQUIRE_OK(nb_hvp_by_reverse(&f, &w, 0, v, &hvr));
    CHECK(nb_tensor_allclose(hv, hvr, 1e-9, 1e-11));
    CHECK(hvp_fd_error(&f, w, v, hv) < 1e-6);
    release_all(hv, hvr, w, v, p[0], p[1], p[2], p[3], p[4], NULL);
}

/* Derivatives of forward over reverse by reverse: for f = sum(x^4) / 4,
 * H v = 3 x^2 v, and the gradient of sum(H v) in x is 6 x v. */
static nb_status f_quartic(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    out[0] = nb_scale(b, nb_reduce_sum(b, nb_square(b, nb_square(b, in[0])), 0, NULL, false), 0.25, 0);
    return nb_builder_status(b);
}

static nb_status f_sum_hvp(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_function q = {f_quartic, 1, 1, NULL};
    nb_tensor *x = nb_eager_tensor(in[0]), *hv;
    nb_status st = nb_hvp(&q, &x, 0, ctx, &hv);
    if (st) return st;
    out[0] = nb_reduce_sum(b, nb_eager_value(b, hv), 0, NULL, false);
    nb_tensor_release(hv);
    return nb_builder_status(b);
}

/* Forward over forward: the JVP of sum(sin x) along v is sum(cos(x) v); its
 * JVP along v again is -sum(sin(x) v^2). */
static nb_status f_jvp_sin(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_function s = {f_sin, 1, 1, NULL};
    nb_tensor *x = nb_eager_tensor(in[0]), *v = ctx, *o, *t;
    nb_status st = nb_jvp(&s, &x, &v, &o, &t);
    if (st) return st;
    out[0] = nb_eager_value(b, t);
    release_all(o, t, NULL);
    return nb_builder_status(b);
}

static void test_nesting_with_forward_mode(void)
{
    nb_tensor *x = T(NB_F64, S(3), 0.5, -1, 2), *v = T(NB_F64, S(3), 1, 3, -2), *g[1], *o[1], *t[1];
    nb_function f = {f_sum_hvp, 1, 1, v};
    REQUIRE_OK(nb_grad(&f, &x, NULL, g, NULL));
    CHECK_TENSOR(g[0], S(3), 1e-12, 6 * 0.5 * 1, 6 * -1.0 * 3, 6 * 2.0 * -2);
    nb_function j = {f_jvp_sin, 1, 1, v};
    REQUIRE_OK(nb_jvp(&j, &x, &v, o, t));
    CHECK_SCALAR(o[0], cos(0.5) + 3 * cos(-1.0) - 2 * cos(2.0), 1e-12);
    CHECK_SCALAR(t[0], -(sin(0.5) + 9 * sin(-1.0) + 4 * sin(2.0)), 1e-12);
    release_all(g[0], o[0], t[0], x, v, NULL);
}

/* A user's op with rules of its own: Out = X^3. */
static nb_status cube_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = *nb_in_info(c, 0, 0);
    return NB_OK;
}

static nb_status cube_cpu(const nb_kernel_ctx *k)
{
    for (int64_t i = 0; i < nb_tensor_numel(nb_kout(k, 0, 0)); i++) {
        double v = nb_tensor_get(nb_kin(k, 0, 0), i);
        nb_tensor_set(nb_kout(k, 0, 0), i, v * v * v);
    }
    return NB_OK;
}

static int vjp_calls, jvp_calls;

static nb_status cube_vjp(nb_builder *b, nb_grad_ctx *g)
{
    vjp_calls++;
    nb_grad_set_dx(g, 0, 0, nb_mul(b, nb_grad_dy(g, 0, 0), nb_scale(b, nb_square(b, nb_grad_x(g, 0, 0)), 3, 0)));
    return nb_builder_status(b);
}

static nb_status cube_jvp(nb_builder *b, nb_grad_ctx *g)
{
    jvp_calls++;
    nb_grad_set_ty(g, 0, 0, nb_mul(b, nb_grad_tx(g, 0, 0), nb_scale(b, nb_square(b, nb_grad_x(g, 0, 0)), 3, 0)));
    return nb_builder_status(b);
}

static const nb_op_def user_cube = {.name = "user_cube",
                                    .inputs = {{"X", 0}},
                                    .outputs = {{"Out", 0}},
                                    .infer = cube_infer,
                                    .grad_uses_inputs = 1,
                                    .vjp = cube_vjp,
                                    .jvp = cube_jvp};
static const nb_kernel_def user_cube_kernel = {
    .op = "user_cube", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "test", .run = cube_cpu};

static nb_status f_cube(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    out[0] = nb_reduce_sum(b, nb_emit1(b, "user_cube", NB_VALUES_N(1, in), NB_NO_ATTRS), 0, NULL, false);
    return nb_builder_status(b);
}

static void test_user_defined_rules(void)
{
    REQUIRE_OK(nb_op_register(&user_cube));
    REQUIRE_OK(nb_kernel_register(&user_cube_kernel));
    nb_function f = {f_cube, 1, 1, NULL};
    nb_tensor *x = T(NB_F64, S(2), 2, -1), *t = T(NB_F64, S(2), 1, 1), *o[1], *g[1], *ot[1];
    REQUIRE_OK(nb_value_and_grad(&f, &x, NULL, o, g));
    CHECK_TENSOR(g[0], S(2), 1e-12, 12, 3);
    CHECK(vjp_calls >= 1);
    release_all(o[0], g[0], NULL);
    REQUIRE_OK(nb_jvp(&f, &x, &t, o, ot));
    CHECK_SCALAR(ot[0], 12 + 3, 1e-12);
    CHECK(jvp_calls >= 1);
    /* Forward over reverse runs the user's JVP rule in the forward and the
     * JVP rules of what its VJP rule emits in the backward: H = diag(6 x). */
    nb_tensor *hv;
    REQUIRE_OK(nb_hvp(&f, &x, 0, t, &hv));
    CHECK_TENSOR(hv, S(2), 1e-12, 12, -6);
    release_all(o[0], ot[0], hv, x, t, NULL);
}

int main(void)
{
    RUN(test_forward_over_reverse_through_normalisations);
    RUN(test_vjp_and_reused_pullback);
    RUN(test_value_and_grad_argnums_free_and_aux);
    RUN(test_fourth_derivative_of_sin_by_nesting);
    RUN(test_grad_argnums_and_has_aux);
    RUN(test_forward_mode_and_jacobians);
    RUN(test_jacfwd_in_several_passes);
    RUN(test_hessian_and_hvp);
    RUN(test_mlp_hessian_matches_finite_differences);
    RUN(test_forward_over_reverse_through_saved_outputs_and_fused_grads);
    RUN(test_nesting_with_forward_mode);
    RUN(test_user_defined_rules);
    return test_report();
}
