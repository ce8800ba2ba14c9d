/* Gradient rules of the elementwise family and of where, beyond what
 * `nabla gradcheck` covers (which works in float64 on generic values):
 *  - each rule reads only the forward values its op declares in
 *    grad_uses_inputs / grad_uses_outputs (the others are NB_NONE, as an
 *    eager tape that saved only those would give them);
 *  - float32 gradients agree with float64 ones (dtypes of masks and
 *    constants, thresholds beyond float's range);
 *  - the documented values at kinks, ties and domain edges;
 *  - relu's rule stays two ops. */
#include <float.h>
#include <stdlib.h>
#include "test.h"
#include "nabla/autodiff.h"
#include "nabla/ops.h"

#define A_F(nm, v) {.name = (nm), .value = {.type = NB_ATTR_FLOAT, .f = (v)}}
#define A_B(nm, v) {.name = (nm), .value = {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_I(nm, v) {.name = (nm), .value = {.type = NB_ATTR_INT, .i = (v)}}

typedef struct in_spec {
    bool is_bool;
    int ndim;
    int64_t shape[3];
    double lo, hi; /* values spread over [lo, hi] */
} in_spec;

typedef struct op_spec {
    const char *op;
    int n_in;
    in_spec in[3];
    int n_attrs;
    nb_attr attrs[3];
} op_spec;

#define F23(l_, h_) {.ndim = 2, .shape = {2, 3}, .lo = (l_), .hi = (h_)}
#define F3(l_, h_) {.ndim = 1, .shape = {3}, .lo = (l_), .hi = (h_)}
#define F21(l_, h_) {.ndim = 2, .shape = {2, 1}, .lo = (l_), .hi = (h_)}
#define B23 {.is_bool = true, .ndim = 2, .shape = {2, 3}}

static const op_spec SPECS[] = {
    {.op = "add", .n_in = 2, .in = {F23(-1, 1), F3(-1, 1)}},
    {.op = "sub", .n_in = 2, .in = {F21(-1, 1), F3(-1, 1)}},
    {.op = "mul", .n_in = 2, .in = {F23(-1, 1), F21(-1, 1)}},
    {.op = "div", .n_in = 2, .in = {F23(-1, 1), F3(0.5, 2)}},
    {.op = "pow", .n_in = 2, .in = {F23(0.5, 2), F3(-1.5, 2.5)}},
    {.op = "maximum", .n_in = 2, .in = {F23(-1, 1), F3(-1, 1)}},
    {.op = "minimum", .n_in = 2, .in = {F23(-1, 1), F21(-1, 1)}},
    {.op = "neg", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "abs", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "sign", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "square", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "sqrt", .n_in = 1, .in = {F23(0.5, 2)}},
    {.op = "rsqrt", .n_in = 1, .in = {F23(0.5, 2)}},
    {.op = "exp", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "log", .n_in = 1, .in = {F23(0.5, 2)}},
    {.op = "log1p", .n_in = 1, .in = {F23(-0.5, 1)}},
    {.op = "sin", .n_in = 1, .in = {F23(-3, 3)}},
    {.op = "cos", .n_in = 1, .in = {F23(-3, 3)}},
    {.op = "tan", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "tanh", .n_in = 1, .in = {F23(-2, 2)}},
    {.op = "sigmoid", .n_in = 1, .in = {F23(-3, 3)}},
    {.op = "relu", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "leaky_relu", .n_in = 1, .in = {F23(-1, 1)}, .n_attrs = 1, .attrs = {A_F("alpha", 0.2)}},
    {.op = "elu", .n_in = 1, .in = {F23(-2, 2)}, .n_attrs = 1, .attrs = {A_F("alpha", 0.7)}},
    {.op = "gelu", .n_in = 1, .in = {F23(-3, 3)}},
    {.op = "gelu", .n_in = 1, .in = {F23(-3, 3)}, .n_attrs = 1, .attrs = {A_B("approximate", true)}},
    {.op = "softplus", .n_in = 1, .in = {F23(-1, 1)}, .n_attrs = 2, .attrs = {A_F("beta", 3.0), A_F("threshold", 1.0)}},
    {.op = "softplus", .n_in = 1, .in = {F23(-3, 3)}, .n_attrs = 1, .attrs = {A_F("threshold", 1e300)}},
    {.op = "silu", .n_in = 1, .in = {F23(-3, 3)}},
    {.op = "clip", .n_in = 1, .in = {F23(-1, 1)}, .n_attrs = 2, .attrs = {A_F("min", -0.4), A_F("max", 0.3)}},
    {.op = "clip", .n_in = 1, .in = {F23(-1, 1)}},
    {.op = "scale",
     .n_in = 1,
     .in = {F23(-1, 1)},
     .n_attrs = 3,
     .attrs = {A_F("scale", -2.0), A_F("bias", 1.0), A_B("bias_after_scale", false)}},
    {.op = "cast", .n_in = 1, .in = {F23(-1, 1)}, .n_attrs = 1, .attrs = {A_I("dtype", NB_F64)}},
    {.op = "cast", .n_in = 1, .in = {F23(-1, 1)}, .n_attrs = 1, .attrs = {A_I("dtype", NB_F32)}},
    {.op = "where", .n_in = 3, .in = {B23, F3(-1, 1), F21(-1, 1)}},
};
#define N_SPECS (int)(sizeof SPECS / sizeof *SPECS)

static int64_t numel(const in_spec *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    return n;
}

/* Deterministic values spread over [lo, hi] (bools alternate). */
static double value_at(const in_spec *s, int k, int64_t i)
{
    if (s->is_bool) return (double)((i + k) % 2);
    double f = fmod(0.6180339887 * (double)(i + 1) + 0.31 * k, 1.0);
    return s->lo + (s->hi - s->lo) * f;
}

/* A program computing the op on data inputs of float dtype `dt`, with the
 * gradients of its inputs for the fed output gradient "dy". */
typedef struct built {
    nb_program *p;
    nb_builder *b;
    nb_value in[3], out, dy;
    const char *wrt[3];
    int n_wrt;
    nb_backward_result res;
} built;

static nb_status build(built *w, const op_spec *s, nb_dtype dt)
{
    memset(w, 0, sizeof *w);
    nb_status st = nb_program_new(&w->p);
    if (!st) st = nb_builder_new_record(&w->b, w->p, NULL);
    if (st) return st;
    for (int k = 0; k < s->n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", k);
        w->in[k] = nb_data(w->b, name, s->in[k].is_bool ? NB_BOOL : dt, s->in[k].ndim, s->in[k].shape);
        if (!s->in[k].is_bool) w->wrt[w->n_wrt++] = nb_value_name(w->in[k]);
    }
    nb_emit(w->b, s->op, NB_VALUES_N(s->n_in, w->in), NB_ATTRS_N(s->n_attrs, s->attrs), 1, &w->out);
    if ((st = nb_builder_status(w->b))) return st;
    nb_var_info oi = nb_value_info(w->b, w->out);
    w->dy = nb_data(w->b, "dy", oi.dtype, oi.ndim, oi.shape);
    if ((st = nb_builder_status(w->b))) return st;
    const char *target = nb_value_name(w->out), *tg = nb_value_name(w->dy);
    return nb_gradients(w->p, NB_NAMES_N(1, &target), NB_NAMES_N(w->n_wrt, w->wrt),
                        &(nb_gradients_opts){.target_grads = &tg}, &w->res);
}

static void built_free(built *w)
{
    nb_backward_result_free(&w->res);
    nb_builder_free(w->b);
    nb_program_free(w->p);
}

static nb_tensor *tensor_of(nb_dtype dt, int ndim, const int64_t *shape, const double *vals)
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, dt, ndim, shape)) return NULL;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, vals[i]);
    return t;
}

/* Runs w with inputs `x` (vals per input) and output gradient `dy`;
 * grads[k] receives the gradient of the k-th float input (caller frees). */
static nb_status run(built *w, const op_spec *s, nb_dtype dt, const double *const *x, const double *dy,
                     nb_tensor **grads)
{
    const char *names[4];
    nb_tensor *feeds[4] = {0};
    int n = 0;
    nb_status st = NB_OK;
    for (int k = 0; k < s->n_in; k++) {
        names[n] = nb_value_name(w->in[k]);
        feeds[n++] = tensor_of(s->in[k].is_bool ? NB_BOOL : dt, s->in[k].ndim, s->in[k].shape, x[k]);
    }
    nb_var_info oi = nb_value_info(w->b, w->dy);
    names[n] = "dy";
    feeds[n++] = tensor_of(oi.dtype, oi.ndim, oi.shape, dy);
    nb_scope *scope = NULL;
    nb_prepared *pp = NULL;
    if (!(st = nb_scope_new(&scope, NULL)) &&
        !(st = nb_prepare(&pp, w->p, 0, NB_NAMES_N(n, names), NB_NAMES_N(w->n_wrt, (const char *const *)w->res.grads))))
        st = nb_prepared_run(pp, scope, feeds, grads);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    for (int i = 0; i < n; i++) nb_tensor_release(feeds[i]);
    return st;
}

/* ---- rules read only the declared forward values -------------------------------- */

static void check_masked(const op_spec *s, nb_dtype dt)
{
    built w;
    memset(&w, 0, sizeof w);
    REQUIRE_OK(nb_program_new(&w.p));
    REQUIRE_OK(nb_builder_new_record(&w.b, w.p, NULL));
    const nb_op_def *def = nb_op_find(s->op);
    for (int k = 0; k < s->n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", k);
        w.in[k] = nb_data(w.b, name, s->in[k].is_bool ? NB_BOOL : dt, s->in[k].ndim, s->in[k].shape);
    }
    nb_emit(w.b, s->op, NB_VALUES_N(s->n_in, w.in), NB_ATTRS_N(s->n_attrs, s->attrs), 1, &w.out);
    REQUIRE_OK(nb_builder_status(w.b));
    nb_var_info oi = nb_value_info(w.b, w.out);
    nb_value dy = nb_data(w.b, "dy", oi.dtype, oi.ndim, oi.shape);
    REQUIRE_OK(nb_builder_status(w.b));

    /* A context as backward.c makes it, with undeclared values left out. */
    nb_value x[3], y[1] = {(def->grad_uses_outputs & 1u) ? w.out : NB_NONE}, dx[3] = {NB_NONE, NB_NONE, NB_NONE};
    bool want[3];
    nb_attr_value attrs[NB_MAX_ATTRS];
    for (int a = 0; a < NB_MAX_ATTRS && def->attrs[a].name; a++) {
        attrs[a] = def->attrs[a].def;
        for (int j = 0; j < s->n_attrs; j++)
            if (!strcmp(s->attrs[j].name, def->attrs[a].name)) attrs[a] = s->attrs[j].value;
    }
    for (int k = 0; k < s->n_in; k++) {
        x[k] = (def->grad_uses_inputs >> k & 1u) ? w.in[k] : NB_NONE;
        want[k] = !(def->inputs[k].flags & NB_SLOT_NO_GRAD);
    }
    nb_grad_ctx g = {.def = def, .attrs = attrs, .x = x, .y = y, .dy = &dy, .dx = dx, .want_dx = want};
    for (int i = 0; i <= NB_MAX_SLOTS; i++) {
        g.in_begin[i] = i < s->n_in ? i : s->n_in;
        g.out_begin[i] = i < 1 ? i : 1;
    }
    nb_status st = def->vjp(w.b, &g);
    if (st || nb_builder_status(w.b)) {
        fprintf(stderr, "  %s (%s): rule failed with only its declared forward values: %s\n", s->op, nb_dtype_name(dt),
                nb_builder_error(w.b));
        test_failures_in_current++;
    }
    for (int k = 0; k < s->n_in && !st; k++) {
        if (!want[k]) {
            CHECK(nb_is_none(dx[k]));
            continue;
        }
        if (!strcmp(s->op, "sign") && nb_is_none(dx[k])) continue;
        CHECK(!nb_is_none(dx[k]));
        if (nb_is_none(dx[k])) continue;
        nb_var_info gi = nb_value_info(w.b, dx[k]), xi = nb_value_info(w.b, w.in[k]);
        CHECK(gi.dtype == xi.dtype);
        CHECK(nb_shape_equal(gi.ndim, gi.shape, xi.ndim, xi.shape));
    }
    nb_builder_free(w.b);
    nb_program_free(w.p);
}

static void test_rules_read_only_declared_values(void)
{
    for (int i = 0; i < N_SPECS; i++) {
        check_masked(&SPECS[i], NB_F32);
        check_masked(&SPECS[i], NB_F64);
    }
}

/* ---- float32 agrees with float64 ---------------------------------------------------- */

static void check_f32_vs_f64(const op_spec *s)
{
    double *vals[3] = {0}, *dy = NULL;
    for (int k = 0; k < s->n_in; k++) {
        vals[k] = malloc(sizeof(double) * (size_t)numel(&s->in[k]));
        for (int64_t i = 0; i < numel(&s->in[k]); i++) vals[k][i] = value_at(&s->in[k], k, i);
        /* Round to float so that both runs see the same inputs. */
        if (!s->in[k].is_bool)
            for (int64_t i = 0; i < numel(&s->in[k]); i++) vals[k][i] = (float)vals[k][i];
    }
    built w32 = {0}, w64 = {0};
    nb_tensor *g32[3] = {0}, *g64[3] = {0};
    nb_status st = build(&w32, s, NB_F32);
    if (!st) st = build(&w64, s, NB_F64);
    if (st) {
        fprintf(stderr, "  %s: building its gradient failed: %s\n", s->op, nb_last_error());
        test_failures_in_current++;
        goto done;
    }
    nb_var_info oi = nb_value_info(w64.b, w64.dy);
    int64_t n_out = nb_shape_numel(oi.ndim, oi.shape);
    dy = malloc(sizeof(double) * (size_t)n_out);
    for (int64_t i = 0; i < n_out; i++) dy[i] = (float)(0.5 + 0.25 * (double)(i % 5));
    if ((st = run(&w32, s, NB_F32, (const double *const *)vals, dy, g32)) ||
        (st = run(&w64, s, NB_F64, (const double *const *)vals, dy, g64))) {
        fprintf(stderr, "  %s: running its gradient failed: %s\n", s->op, nb_last_error());
        test_failures_in_current++;
        goto done;
    }
    for (int k = 0; k < w64.n_wrt; k++) {
        CHECK(g32[k] && g64[k] && nb_tensor_numel(g32[k]) == nb_tensor_numel(g64[k]));
        if (!g32[k] || !g64[k]) continue;
        CHECK(g32[k]->dtype == NB_F32);
        for (int64_t i = 0; i < nb_tensor_numel(g64[k]); i++) {
            double a = nb_tensor_get(g32[k], i), e = nb_tensor_get(g64[k], i);
            if (!(fabs(a - e) <= 1e-4 * (1 + fabs(e)))) {
                fprintf(stderr, "  %s: gradient %d element %lld is %.8g in float32, %.8g in float64\n", s->op, k,
                        (long long)i, a, e);
                test_failures_in_current++;
                break;
            }
        }
    }
done:
    for (int k = 0; k < 3; k++) {
        nb_tensor_release(g32[k]);
        nb_tensor_release(g64[k]);
        free(vals[k]);
    }
    free(dy);
    built_free(&w32);
    built_free(&w64);
}

static void test_float32_matches_float64(void)
{
    for (int i = 0; i < N_SPECS; i++) check_f32_vs_f64(&SPECS[i]);
}

/* ---- documented values at kinks, ties and edges -------------------------------------- */

/* The gradient of input k of `op` at n elements per input (1-d), dy = 1. */
static void grad_at(const char *op, nb_dtype dt, int n_in, const double *const *x, int n, int n_attrs,
                    const nb_attr *attrs, int k, double *out)
{
    op_spec s = {.op = op, .n_in = n_in, .n_attrs = n_attrs};
    for (int j = 0; j < n_in; j++) s.in[j] = (in_spec){.ndim = 1, .shape = {n}};
    for (int j = 0; j < n_attrs; j++) s.attrs[j] = attrs[j];
    double ones[16];
    for (int i = 0; i < n; i++) ones[i] = 1;
    built w = {0};
    nb_tensor *g[3] = {0};
    nb_status st = build(&w, &s, dt);
    if (!st) st = run(&w, &s, dt, x, ones, g);
    if (st) {
        fprintf(stderr, "  %s: %s\n", op, nb_last_error());
        test_failures_in_current++;
    }
    for (int i = 0; i < n; i++) out[i] = g[k] ? nb_tensor_get(g[k], i) : NAN;
    for (int j = 0; j < 3; j++) nb_tensor_release(g[j]);
    built_free(&w);
}

static void test_values_at_edges(void)
{
    static const nb_dtype dts[] = {NB_F32, NB_F64};
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = dts[t];
        double out[4];
        /* relu: 0 at 0; leaky_relu: the mean of the slopes at 0. */
        grad_at("relu", dt, 1, (const double *[]){(double[]){0, -1, 2}}, 3, 0, NULL, 0, out);
        CHECK(out[0] == 0 && out[1] == 0 && out[2] == 1);
        grad_at("leaky_relu", dt, 1, (const double *[]){(double[]){0, -1, 2}}, 3, 1,
                (nb_attr[]){NB_ATTR_FLOAT("alpha", 0.5)}, 0, out);
        CHECK_NEAR(out[0], 0.75, 1e-7);
        CHECK_NEAR(out[1], 0.5, 1e-7);
        CHECK_NEAR(out[2], 1.0, 1e-7);
        /* abs: 0 at 0. */
        grad_at("abs", dt, 1, (const double *[]){(double[]){0, -3}}, 2, 0, NULL, 0, out);
        CHECK(out[0] == 0 && out[1] == -1);
        /* gelu: Phi(0) = 1/2 exactly at 0, and near it. */
        grad_at("gelu", dt, 1, (const double *[]){(double[]){0, 1e-35, -1e-20, 1.0}}, 4, 0, NULL, 0, out);
        CHECK_NEAR(out[0], 0.5, 1e-7);
        CHECK_NEAR(out[1], 0.5, 1e-7);
        CHECK_NEAR(out[2], 0.5, 1e-7);
        CHECK_NEAR(out[3], 1.0833154705876864, 1e-6); /* Phi(1) + phi(1) */
        /* elu far out: no overflow on either side. */
        grad_at("elu", dt, 1, (const double *[]){(double[]){100, 1000, -100}}, 3, 0, NULL, 0, out);
        CHECK(out[0] == 1 && out[1] == 1);
        CHECK_NEAR(out[2], 0, 1e-30);
        /* maximum/minimum tie: all to X. */
        grad_at("maximum", dt, 2, (const double *[]){(double[]){1, 2}, (double[]){1, 3}}, 2, 0, NULL, 0, out);
        CHECK(out[0] == 1 && out[1] == 0);
        grad_at("maximum", dt, 2, (const double *[]){(double[]){1, 2}, (double[]){1, 3}}, 2, 0, NULL, 1, out);
        CHECK(out[0] == 0 && out[1] == 1);
        grad_at("minimum", dt, 2, (const double *[]){(double[]){1, 2}, (double[]){1, 3}}, 2, 0, NULL, 1, out);
        CHECK(out[0] == 0 && out[1] == 0);
        /* clip: passes at its bounds, not beyond. */
        grad_at("clip", dt, 1, (const double *[]){(double[]){0.5, -0.5, 0.7, -0.7}}, 4, 2,
                (nb_attr[]){NB_ATTR_FLOAT("min", -0.5), NB_ATTR_FLOAT("max", 0.5)}, 0, out);
        CHECK(out[0] == 1 && out[1] == 1 && out[2] == 0 && out[3] == 0);
        /* pow: X = 0 gives finite gradients; negative X with a whole exponent. */
        const double *px[] = {(double[]){0, -2, 0}, (double[]){2, 3, 1}};
        grad_at("pow", dt, 2, px, 3, 0, NULL, 0, out);
        CHECK(out[0] == 0);
        CHECK_NEAR(out[1], 12, 1e-5);
        CHECK_NEAR(out[2], 1, 1e-7);
        grad_at("pow", dt, 2, px, 3, 0, NULL, 1, out);
        CHECK(out[0] == 0 && out[2] == 0);
        /* softplus: above the threshold, 1; with a threshold beyond float's range, sigmoid. */
        grad_at("softplus", dt, 1, (const double *[]){(double[]){3, 0}}, 2, 2,
                (nb_attr[]){NB_ATTR_FLOAT("beta", 1), NB_ATTR_FLOAT("threshold", 2)}, 0, out);
        CHECK(out[0] == 1);
        CHECK_NEAR(out[1], 0.5, 1e-7);
        grad_at("softplus", dt, 1, (const double *[]){(double[]){30, 0}}, 2, 1,
                (nb_attr[]){NB_ATTR_FLOAT("threshold", 1e300)}, 0, out);
        CHECK_NEAR(out[0], 1, 1e-7);
        CHECK_NEAR(out[1], 0.5, 1e-7);
        /* sign: a zero gradient. */
        grad_at("sign", dt, 1, (const double *[]){(double[]){-2, 3}}, 2, 0, NULL, 0, out);
        CHECK(out[0] == 0 && out[1] == 0);
    }
}

/* ---- relu stays lean ------------------------------------------------------------------- */

static void test_relu_rule_is_two_ops(void)
{
    op_spec s = {.op = "relu", .n_in = 1, .in = {F23(-1, 1)}};
    built w = {0};
    REQUIRE_OK(build(&w, &s, NB_F32));
    const nb_block *blk = nb_program_global_block(w.p);
    /* relu, then its gradient: sign(Out) * dy. */
    CHECK(blk->n_ops == 3);
    if (blk->n_ops == 3) {
        CHECK_STR(blk->ops[1]->def->name, "sign");
        CHECK_STR(blk->ops[2]->def->name, "mul");
    }
    built_free(&w);
}

int main(void)
{
    RUN(test_rules_read_only_declared_values);
    RUN(test_float32_matches_float64);
    RUN(test_values_at_edges);
    RUN(test_relu_rule_is_two_ops);
    return test_report();
}
