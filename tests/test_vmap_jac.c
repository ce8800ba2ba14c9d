/* Per-example Jacobians and Hessians: nb_vmap of nb_jacrev, nb_jacfwd,
 * nb_hessian and nb_hessian_by_reverse (functorch's vmap(jacrev(f))), each
 * against another way of computing the same thing run on the examples one by
 * one, and against the analytic value of y = c x^3; in_axes and out_axes
 * variants, chunks, f32 and f64, and gradients through the result. */
#include <stdlib.h>
#include "test.h"

#include "vmap_util.h"

typedef enum { JACREV, JACFWD, HESSIAN, HESSIAN_BY_REVERSE } kind;
static const char *const kind_name[] = {"jacrev", "jacfwd", "hessian", "hessian_by_reverse"};

/* What the mapped function differentiates: f, output `out`, input `arg`. */
typedef struct {
    kind k;
    const nb_function *f;
    int out, arg;
} jac_ctx;

static nb_status transform(const jac_ctx *c, nb_tensor *const *p, nb_tensor **r)
{
    switch (c->k) {
    case JACREV: return nb_jacrev(c->f, p, c->out, c->arg, r);
    case JACFWD: return nb_jacfwd(c->f, p, c->out, c->arg, r);
    case HESSIAN: return nb_hessian(c->f, p, c->arg, r);
    default: return nb_hessian_by_reverse(c->f, p, c->arg, r);
    }
}

/* The function vmap maps: the transform of c->f at in. */
static nb_status f_transform(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const jac_ctx *c = ctx;
    nb_tensor *p[8], *r = NULL;
    for (int i = 0; i < c->f->n_in; i++) p[i] = nb_eager_tensor(in[i]);
    nb_status st = transform(c, p, &r);
    if (st) return st;
    out[0] = nb_eager_value(b, r);
    nb_tensor_release(r);
    return nb_builder_status(b);
}

/* nb_vmap of transform `k` (inputs batched along in_axes, the result's
 * batch axis at out_axis, chunk_size chunk) equals transform `ref` run on
 * each example. */
static void check_per_example(kind k, kind ref, const nb_function *f, int out, int arg, nb_tensor *const *in,
                              const int *in_axes, int out_axis, int64_t chunk, double tol)
{
    jac_ctx c = {k, f, out, arg}, cr = {ref, f, out, arg};
    nb_function g = {f_transform, f->n_in, 1, &c};
    nb_tensor *got = NULL;
    nb_vmap_opts o = {.in_axes = in_axes, .out_axes = (int[]){out_axis}, .chunk_size = chunk};
    REQUIRE_OK(nb_vmap(&g, &o, in, &got));
    int64_t n = -1;
    for (int i = 0; i < f->n_in; i++)
        if (in_axes[i] != NB) n = in[i]->shape[in_axes[i] < 0 ? in_axes[i] + in[i]->ndim : in_axes[i]];
    for (int64_t e = 0; e < n; e++) {
        nb_tensor *ex[8], *want = NULL, *one = example(got, out_axis, e);
        for (int i = 0; i < f->n_in; i++)
            ex[i] = in_axes[i] == NB ? nb_tensor_retain(in[i]) : example(in[i], in_axes[i], e);
        CHECK_OK(transform(&cr, ex, &want));
        bool ok = one && want && one->dtype == want->dtype && nb_tensor_allclose(one, want, tol, tol);
        if (!ok)
            fprintf(stderr, "  vmap of %s, example %lld, differs from %s\n", kind_name[k], (long long)e,
                    kind_name[ref]);
        CHECK(ok);
        for (int i = 0; i < f->n_in; i++) nb_tensor_release(ex[i]);
        release_all(want, one, NULL);
    }
    nb_tensor_release(got);
}

static nb_tensor *as(nb_tensor *t, nb_dtype dt)
{
    nb_tensor *c = NULL;
    if (t && nb_tensor_cast(&c, t, dt)) c = NULL;
    nb_tensor_release(t);
    return c;
}

/* ---- an MLP layer: Jacobians of a matrix output and Hessians of a scalar ------------ */

/* y = tanh(x @ W + b) [2, 3] and s = sum(y^2 sigmoid(y)), a scalar: x [2, 4],
 * W [4, 3], b [3]. Outputs (y, s), or with ctx (s, y), for the Hessians of s. */
static nb_status f_mlp(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value y = nb_tanh(b, nb_add(b, nb_matmul(b, in[0], in[1], 0), in[2]));
    nb_value s = nb_reduce_sum(b, nb_mul(b, nb_square(b, y), nb_sigmoid(b, y)), 0, NULL, false);
    out[ctx ? 1 : 0] = y;
    out[ctx ? 0 : 1] = s;
    return nb_builder_status(b);
}

static void check_mlp(nb_dtype dt, double tol)
{
    nb_function f = {f_mlp, 3, 2, NULL}, s = {f_mlp, 3, 2, (void *)1};
    /* the batch of 5 along axis 0, 1 and -1 of x, per-example weights too */
    nb_tensor *x0 = as(R(1, 5, 2, 4), dt), *x1 = as(R(2, 2, 5, 4), dt), *xl = as(R(3, 2, 4, 5), dt);
    nb_tensor *w = as(R(4, 4, 3), dt), *ws = as(R(5, 5, 4, 3), dt), *bias = as(R(6, 3), dt);
    struct {
        nb_tensor *in[3];
        int axes[3], out_axis;
        int64_t chunk;
    } cases[] = {
        {{x0, w, bias}, {0, NB, NB}, 0, 0},   {{x1, w, bias}, {1, NB, NB}, 0, 0},
        {{xl, w, bias}, {-1, NB, NB}, -1, 0}, /* batch last in and out */
        {{x0, ws, bias}, {0, 0, NB}, 1, 0},   /* per-example weights, batch axis 1 of the result */
        {{x0, ws, bias}, {0, 0, NB}, 0, 2},   /* in chunks of 2 */
        {{xl, ws, bias}, {2, 0, NB}, -2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int arg = 0; arg < 3; arg++) {
            nb_tensor *const *in = cases[i].in;
            const int *ax = cases[i].axes;
            int oa = cases[i].out_axis;
            int64_t ch = cases[i].chunk;
            for (int out = 0; out < 2; out++) {
                check_per_example(JACREV, JACFWD, &f, out, arg, in, ax, oa, ch, tol);
                check_per_example(JACFWD, JACREV, &f, out, arg, in, ax, oa, ch, tol);
            }
            check_per_example(HESSIAN, HESSIAN_BY_REVERSE, &s, 0, arg, in, ax, oa, ch, tol);
            check_per_example(HESSIAN_BY_REVERSE, HESSIAN, &s, 0, arg, in, ax, oa, ch, tol);
        }
    release_all(x0, x1, xl, w, ws, bias, NULL);
}

static void test_mlp_f64(void) { check_mlp(NB_F64, 1e-10); }
static void test_mlp_f32(void) { check_mlp(NB_F32, 2e-5); }

/* ---- y = c x^3: the analytic Jacobian diag(3 c x^2) and Hessian diag(6 c x) -------- */

static nb_status f_cube(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_mul(b, in[1], nb_mul(b, in[0], nb_square(b, in[0])));
    return nb_builder_status(b);
}

static nb_status f_cube_sum(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_status st = f_cube(b, in, out, ctx);
    out[0] = nb_reduce_sum(b, out[0], 0, NULL, false);
    return st ? st : nb_builder_status(b);
}

/* x [B, n] per example, c [n] shared: result [B, n, n] against diag(scale c x^power). */
static void check_diagonal(kind k, nb_tensor *x, nb_tensor *c, double scale, int power, double tol)
{
    nb_function f = {f_cube, 2, 1, NULL}, s = {f_cube_sum, 2, 1, NULL};
    jac_ctx jc = {k, k == JACREV || k == JACFWD ? &f : &s, 0, 0};
    nb_function g = {f_transform, 2, 1, &jc};
    nb_tensor *got = NULL;
    REQUIRE_OK(nb_vmap(&g, &(nb_vmap_opts){.in_axes = (int[]){0, NB}}, (nb_tensor *[]){x, c}, &got));
    int64_t B = x->shape[0], n = x->shape[1];
    CHECK(got->ndim == 3 && got->shape[0] == B && got->shape[1] == n && got->shape[2] == n && got->dtype == x->dtype);
    for (int64_t e = 0; e < B; e++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                double xi = nb_tensor_get(x, e * n + i);
                double want = i == j ? scale * nb_tensor_get(c, i) * pow(xi, power) : 0;
                CHECK_NEAR(nb_tensor_get(got, (e * n + i) * n + j), want, tol);
            }
    nb_tensor_release(got);
}

static void test_analytic(void)
{
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F32 : NB_F64;
        double tol = d ? 1e-5 : 1e-12;
        nb_tensor *x = as(R(1, 4, 3), dt), *c = as(T(NB_F64, S(3), 0.5, -2, 3), dt);
        check_diagonal(JACREV, x, c, 3, 2, tol);
        check_diagonal(JACFWD, x, c, 3, 2, tol);
        check_diagonal(HESSIAN, x, c, 6, 1, tol);
        check_diagonal(HESSIAN_BY_REVERSE, x, c, 6, 1, tol);
        release_all(x, c, NULL);
    }
}

/* ---- the per-example Jacobian is differentiable: d/dc sum(vmap(jacrev)) ------------- */

typedef struct {
    nb_tensor *x;
    kind k;
} sum_ctx;

/* sum over examples and entries of the per-example Jacobian of c x^3 with
 * respect to x: sum_e sum_i 3 c_i x_ei^2, so its gradient in c is
 * sum_e 3 x_ei^2. */
static nb_status f_sum_jac(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const sum_ctx *s = ctx;
    nb_function f = {f_cube, 2, 1, NULL};
    jac_ctx jc = {s->k, &f, 0, 0};
    nb_function g = {f_transform, 2, 1, &jc};
    nb_tensor *jac = NULL;
    nb_status st =
        nb_vmap(&g, &(nb_vmap_opts){.in_axes = (int[]){0, NB}}, (nb_tensor *[]){s->x, nb_eager_tensor(in[0])}, &jac);
    if (st) return st;
    out[0] = nb_reduce_sum(b, nb_eager_value(b, jac), 0, NULL, false);
    nb_tensor_release(jac);
    return nb_builder_status(b);
}

static void test_grad_through(void)
{
    nb_tensor *x = R(1, 5, 3), *c = T(NB_F64, S(3), 0.5, -2, 3);
    for (int k = JACREV; k <= JACFWD; k++) {
        sum_ctx s = {x, (kind)k};
        nb_function f = {f_sum_jac, 1, 1, &s};
        nb_tensor *g = NULL;
        REQUIRE_OK(nb_grad(&f, &c, NULL, &g, NULL));
        for (int64_t i = 0; i < 3; i++) {
            double want = 0;
            for (int64_t e = 0; e < 5; e++) want += 3 * pow(nb_tensor_get(x, e * 3 + i), 2);
            CHECK_NEAR(nb_tensor_get(g, i), want, 1e-12);
        }
        nb_tensor_release(g);
    }
    release_all(x, c, NULL);
}

/* ---- an empty input or output: an empty Jacobian of the right shape ------------------ */

static nb_status f_sums(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_add(b, nb_reduce_sum(b, in[0], 0, NULL, false), nb_reduce_sum(b, nb_square(b, in[1]), 0, NULL, false));
    return nb_builder_status(b);
}

static void test_empty(void)
{
    nb_function f = {f_sums, 2, 1, NULL}, cube = {f_cube, 2, 1, NULL};
    nb_tensor *x = NULL, *y = R(1, 4, 2), *c = R(2, 0);
    REQUIRE_OK(nb_tensor_new(&x, NB_F64, 2, S(4, 0)));
    for (int k = JACREV; k <= JACFWD; k++) {
        jac_ctx jx = {(kind)k, &f, 0, 0}, jy = {(kind)k, &f, 0, 1}, jc = {(kind)k, &cube, 0, 0};
        nb_function gx = {f_transform, 2, 1, &jx}, gy = {f_transform, 2, 1, &jy}, gc = {f_transform, 2, 1, &jc};
        nb_tensor *dx = NULL, *dy = NULL, *dc = NULL;
        REQUIRE_OK(nb_vmap(&gx, NULL, (nb_tensor *[]){x, y}, &dx));
        REQUIRE_OK(nb_vmap(&gy, NULL, (nb_tensor *[]){x, y}, &dy));
        REQUIRE_OK(nb_vmap(&gc, &(nb_vmap_opts){.in_axes = (int[]){0, NB}}, (nb_tensor *[]){x, c}, &dc));
        CHECK(dx->ndim == 2 && dx->shape[0] == 4 && dx->shape[1] == 0);
        CHECK(dc->ndim == 3 && dc->shape[0] == 4 && dc->shape[1] == 0 && dc->shape[2] == 0);
        CHECK(dy->ndim == 2 && dy->shape[0] == 4 && dy->shape[1] == 2);
        for (int64_t i = 0; i < 8; i++) CHECK_NEAR(nb_tensor_get(dy, i), 2 * nb_tensor_get(y, i), 1e-12);
        release_all(dx, dy, dc, NULL);
    }
    release_all(x, y, c, NULL);
}

/* ---- errors inside the mapped function reach the caller ------------------------------ */

static void test_errors(void)
{
    nb_function f = {f_cube, 2, 1, NULL};
    jac_ctx jc = {JACREV, &f, 3, 0};
    nb_function g = {f_transform, 2, 1, &jc};
    nb_tensor *x = R(1, 4, 3), *c = R(2, 3), *got = NULL;
    nb_vmap_opts o = {.in_axes = (int[]){0, NB}};
    CHECK_ERR(nb_vmap(&g, &o, (nb_tensor *[]){x, c}, &got), NB_ERR_ARG, "jacrev: output 3 or input 0 out of range");
    CHECK(!got);
    jc.k = HESSIAN; /* f's output is not a scalar */
    CHECK_ERR(nb_vmap(&g, &o, (nb_tensor *[]){x, c}, &got), NB_ERR_SHAPE, "first output has shape [3]");
    CHECK(!got);
    release_all(x, c, NULL);
}

int main(void)
{
    RUN(test_mlp_f64);
    RUN(test_mlp_f32);
    RUN(test_analytic);
    RUN(test_grad_through);
    RUN(test_empty);
    RUN(test_errors);
    return test_report();
}
