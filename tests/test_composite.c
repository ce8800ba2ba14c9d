/* Composite ops (nb_op_def.expand): softsign, mish and hardswish against
 * their formulas in float64; each, and an op a test declares, under every
 * column of the gradient checker (reverse to third order, forward mode,
 * forward over reverse, the tape, nb_grad, vmap); a static program holding
 * the expansion, with shapes carried through it; vmap; ONNX export; and the
 * errors, which name the composite. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include "test.h"
#include "vmap_util.h"

static double softsign_ref(double x) { return x / (1 + fabs(x)); }
static double mish_ref(double x) { return x * tanh(log1p(exp(x))); }
static double hardswish_ref(double x) { return x * fmin(fmax(x + 3, 0), 6) / 6; }

static const struct {
    const char *op;
    nb_value (*call)(nb_builder *, nb_value);
    double (*ref)(double);
} unary[] = {
    {"softsign", nb_softsign, softsign_ref}, {"mish", nb_mish, mish_ref}, {"hardswish", nb_hardswish, hardswish_ref}};
#define N_UNARY (int)(sizeof unary / sizeof *unary)

/* Away from the kinks (abs at 0, hardswish's at +-3), both signs, far out too. */
static const double xs[] = {-7.5, -3.4, -1.3, -0.45, -0.05, 0.1, 0.6, 1.7, 2.6, 3.5, 8.0, 21.0};

static nb_tensor *xs_tensor(void) { return tt(NB_F64, 2, S(3, 4), xs); }

static void test_values_against_formulas(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = xs_tensor();
    for (int i = 0; i < N_UNARY; i++) {
        nb_tensor *y = nb_eager_tensor(unary[i].call(b, nb_eager_value(b, x)));
        CHECK_OK(nb_builder_status(b));
        double want[12];
        for (int k = 0; k < 12; k++) want[k] = unary[i].ref(xs[k]);
        if (y) check_tensor_(__FILE__, __LINE__, y, 2, S(3, 4), want, 1e-14);
        /* nb_emit reaches it by name as well as by its typed call. */
        nb_tensor *z = nb_eager_tensor(nb_emit1(b, unary[i].op, NB_VALUES(nb_eager_value(b, x)), NB_NO_ATTRS));
        CHECK(z && max_rel_diff(z, y) == 0);
    }
    nb_tensor_release(x);
    nb_builder_free(b);
}

/* Every column of `nabla gradcheck --all` on one case; derivatives up to
 * max_order are nonzero (a linear op's second one is zero, checking
 * nothing). */
static void check_every_mode(const nb_gradcheck_case *c, int max_order)
{
    nb_gradcheck_report r;
    for (int order = 1; order <= 3; order++) {
        CHECK_OK(nb_gradcheck_op(c, order, 11, &r));
        if (r.failed || (!r.checked && order <= max_order))
            fprintf(stderr, "  %s order %d: %s\n", c->op, order, r.worst);
        CHECK(r.failed == 0 && (r.checked > 0 || order > max_order));
    }
    nb_status (*const cols[])(const nb_gradcheck_case *, uint64_t, nb_gradcheck_report *) = {
        nb_gradcheck_op_jvp, nb_gradcheck_fwd_over_rev, nb_gradcheck_shapes, nb_gradcheck_eager,
        nb_gradcheck_absent, nb_gradcheck_transforms,   nb_gradcheck_vmap,   nb_gradcheck_closure};
    const char *names[] = {"jvp", "fwd_over_rev", "shapes", "eager", "absent", "transforms", "vmap", "closure"};
    for (size_t k = 0; k < sizeof cols / sizeof *cols; k++) {
        CHECK_OK(cols[k](c, 11, &r));
        if (r.failed) fprintf(stderr, "  %s %s: %s\n", c->op, names[k], r.worst);
        CHECK(r.failed == 0);
        /* absent checks nothing on a one-output op, forward over reverse
         * nothing on a linear one; every other column must look. */
        bool looks = strcmp(names[k], "absent") ? strcmp(names[k], "fwd_over_rev") || max_order > 1
                                                : nb_op_num_outputs(nb_op_find(c->op)) > 1;
        if (looks && !r.checked) fprintf(stderr, "  %s %s: checked nothing\n", c->op, names[k]);
        CHECK(r.checked > 0 || !looks);
    }
    CHECK_OK(nb_gradcheck_f32(c, 11, 1e-4, &r));
    CHECK(r.failed == 0);
}

static void test_gradcheck_every_mode(void)
{
    for (int i = 0; i < N_UNARY; i++) {
        nb_gradcheck_case c = {
            .op = unary[i].op,
            .name = "[3,4]",
            .n_in = 1,
            .in = {{.dtype = NB_F64, .ndim = 2, .shape = {3, 4}, .fill = NB_GC_VALUES, .values = xs}}};
        check_every_mode(&c, 3);
    }
}

/* ---- a composite a user declares ------------------------------------------------ */

/* lerp(X, Y; weight) -> Out = X + weight * (Y - X), Diff = Y - X: two
 * inputs, an attribute, two outputs. */
static nb_status lerp_expand(nb_builder *b, const nb_value *in, const nb_attr_value *attrs, nb_value *out)
{
    out[1] = nb_sub(b, in[1], in[0]);
    out[0] = nb_add(b, in[0], nb_scale(b, out[1], attrs[0].f, 0));
    return nb_builder_status(b);
}

static const nb_op_def lerp_def = {.name = "test_lerp",
                                   .doc = "X + weight * (Y - X), and Y - X",
                                   .inputs = {{"X", 0}, {"Y", 0}},
                                   .outputs = {{"Out", 0}, {"Diff", 0}},
                                   .attrs = {NB_ADEF_FLOAT("weight", 0.5)},
                                   .expand = lerp_expand};

/* One that fails inside: matmul of mismatched shapes. */
static nb_status bad_expand(nb_builder *b, const nb_value *in, const nb_attr_value *attrs, nb_value *out)
{
    (void)attrs;
    out[0] = nb_matmul(b, in[0], in[0], 0);
    return nb_builder_status(b);
}
static const nb_op_def bad_def = {.name = "test_bad_composite",
                                  .doc = "matmul(X, X)",
                                  .inputs = {{"X", 0}},
                                  .outputs = {{"Out", 0}},
                                  .expand = bad_expand};

/* One that forgets an output. */
static nb_status lazy_expand(nb_builder *b, const nb_value *in, const nb_attr_value *attrs, nb_value *out)
{
    (void)attrs;
    out[0] = nb_neg(b, in[0]);
    return nb_builder_status(b);
}
static const nb_op_def lazy_def = {.name = "test_lazy_composite",
                                   .doc = "-X, and nothing",
                                   .inputs = {{"X", 0}},
                                   .outputs = {{"Out", 0}, {"Other", 0}},
                                   .expand = lazy_expand};

static void register_test_ops(void)
{
    static bool done;
    if (done) return;
    done = true;
    CHECK_OK(nb_op_register(&lerp_def));
    CHECK_OK(nb_op_register(&bad_def));
    CHECK_OK(nb_op_register(&lazy_def));
}

static void test_user_composite(void)
{
    register_test_ops();
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = T(NB_F64, S(3), 1, 2, 3), *y = T(NB_F64, S(2, 3), 3, 2, 1, 0, 0, 0);
    nb_value out[2];
    CHECK_OK(nb_emit(b, "test_lerp", NB_VALUES(nb_eager_value(b, x), nb_eager_value(b, y)),
                     NB_ATTRS(NB_ATTR_FLOAT("weight", 0.25)), 2, out));
    nb_tensor *o = nb_eager_tensor(out[0]), *d = nb_eager_tensor(out[1]);
    if (o) CHECK_TENSOR(o, S(2, 3), 1e-15, 1.5, 2, 2.5, 0.75, 1.5, 2.25); /* broadcast through the expansion */
    if (d) CHECK_TENSOR(d, S(2, 3), 1e-15, 2, 0, -2, -1, -2, -3);
    /* The default weight, and nb_emit1's one value per output slot. */
    nb_tensor *o2 =
        nb_eager_tensor(nb_emit1(b, "test_lerp", NB_VALUES(nb_eager_value(b, x), nb_eager_value(b, y)), NB_NO_ATTRS));
    if (o2) CHECK_TENSOR(o2, S(2, 3), 1e-15, 2, 2, 2, 0.5, 1, 1.5);
    release_all(x, y, NULL);
    nb_builder_free(b);

    nb_gradcheck_case c = {
        .op = "test_lerp",
        .name = "[2,3] with [3]",
        .n_in = 2,
        .in = {{.dtype = NB_F64, .ndim = 2, .shape = {2, 3}}, {.dtype = NB_F64, .ndim = 1, .shape = {3}}},
        .n_attrs = 1,
        .attrs = {NB_ATTR_FLOAT("weight", 0.3)}};
    check_every_mode(&c, 1);
}

/* ---- static programs ------------------------------------------------------------- */

static void test_static_program(void)
{
    nb_program *p;
    REQUIRE_OK(nb_program_new(&p));
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_data(b, "x", NB_F64, 2, S(-1, 4));
    nb_value y = nb_mish(b, nb_softsign(b, x));
    CHECK_OK(nb_builder_status(b));
    /* Shapes come through the expansion, the unknown dim carried. */
    nb_var_info i = nb_value_info(b, y);
    CHECK(i.dtype == NB_F64 && i.ndim == 2 && i.shape[0] == -1 && i.shape[1] == 4);
    /* The program holds the ops they expand into, never the composites. */
    nb_block *g = nb_program_global_block(p);
    CHECK(g->n_ops == 6);
    for (int k = 0; k < g->n_ops; k++) CHECK(!g->ops[k]->def->expand);
    nb_executor *e;
    nb_scope *scope;
    REQUIRE_OK(nb_executor_new(&e));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_tensor *xt = xs_tensor(), *got = NULL;
    const char *yn = nb_value_name(y);
    CHECK_OK(nb_executor_run(e, p, scope, NB_FEEDS({"x", xt}), NB_NAMES(yn), &got));
    double want[12];
    for (int k = 0; k < 12; k++) want[k] = mish_ref(softsign_ref(xs[k]));
    if (got) check_tensor_(__FILE__, __LINE__, got, 2, S(3, 4), want, 1e-14);

    /* ONNX export sees only ops it knows; the import computes the same. */
    char path[] = "/tmp/nabla_composite_XXXXXX";
    int fd = mkstemp(path);
    if (nb_onnx_available() && fd >= 0) {
        close(fd);
        CHECK_OK(nb_onnx_export(p, scope, NB_NAMES(yn), path));
        nb_builder *eb;
        REQUIRE_OK(nb_builder_new_eager(&eb));
        nb_value in = nb_eager_value(eb, xt), out = NB_NONE;
        CHECK_OK(nb_onnx_import(path, eb, NB_VALUES(in), 1, &out, NULL));
        nb_tensor *back = nb_eager_tensor(out);
        CHECK(back && max_rel_diff(back, got) < 1e-14);
        nb_builder_free(eb);
        unlink(path);
    } else if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    release_all(xt, got, NULL);
    nb_executor_free(e);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(p);
}

/* ---- vmap -------------------------------------------------------------------------- */

static nb_status f_acts(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_hardswish(b, nb_mul(b, nb_mish(b, in[0]), nb_softsign(b, in[1])));
    return nb_builder_status(b);
}

static nb_status f_lerp(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value y[2];
    nb_emit(b, "test_lerp", NB_VALUES(in[0], in[1]), NB_ATTRS(NB_ATTR_FLOAT("weight", 0.7)), 2, y);
    out[0] = y[0];
    out[1] = y[1];
    return nb_builder_status(b);
}

static void test_vmap(void)
{
    register_test_ops();
    nb_function f = {f_acts, 2, 1, NULL}, g = {f_lerp, 2, 2, NULL};
    nb_tensor *x = R(1, 5, 3), *y = R(2, 5, 3), *w = R(3, 3), *xt = R(4, 3, 5);
    check_vmap(&f, (nb_tensor *[]){x, y}, (int[]){0, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, w}, (int[]){0, NB}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){xt, x}, (int[]){-1, 0}, 1, 1e-12);
    check_vmap(&g, (nb_tensor *[]){x, w}, (int[]){0, NB}, 0, 1e-12);
    check_vmap(&g, (nb_tensor *[]){w, xt}, (int[]){NB, 1}, 0, 1e-12);
    release_all(x, y, w, xt, NULL);

    /* In a program: the batching builder expands it, and batches the expansion. */
    nb_program *p;
    REQUIRE_OK(nb_program_new(&p));
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value in[2] = {nb_data(b, "x", NB_F64, 2, S(5, 3)), nb_data(b, "w", NB_F64, 1, S(3))}, out = NB_NONE;
    CHECK_OK(nb_vmap_emit(b, &f, &(nb_vmap_opts){.in_axes = (int[]){0, NB}}, in, &out));
    nb_var_info i = nb_value_info(b, out);
    CHECK(i.ndim == 2 && i.shape[0] == 5 && i.shape[1] == 3);
    nb_builder_free(b);
    nb_program_free(p);
}

/* ---- errors ------------------------------------------------------------------------ */

static void test_errors(void)
{
    register_test_ops();
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6), *xi = NULL;
    REQUIRE_OK(nb_tensor_new(&xi, NB_I64, 1, S(3)));
    /* A failure inside the expansion names the composite, then the op that failed. */
    nb_value v = nb_emit1(b, "test_bad_composite", NB_VALUES(nb_eager_value(b, x)), NB_NO_ATTRS);
    CHECK(nb_is_none(v));
    CHECK_ERR(nb_builder_status(b), NB_ERR_SHAPE, "test_bad_composite (a composite op): matmul");
    CHECK(strstr(nb_builder_error(b), "test_bad_composite (a composite op): matmul") != NULL);
    nb_builder_clear_error(b);
    nb_value two[2];
    CHECK_ERR(nb_emit(b, "test_lazy_composite", NB_VALUES(nb_eager_value(b, x)), NB_NO_ATTRS, 2, two), NB_ERR_STATE,
              "test_lazy_composite (a composite op): its expansion left output 'Other' unset");
    nb_builder_clear_error(b);
    nb_softsign(b, nb_eager_value(b, xi));
    CHECK_ERR(nb_builder_status(b), NB_ERR_DTYPE, "softsign (a composite op): X must be a float tensor, not int64");
    nb_builder_clear_error(b);
    /* Its attributes and slots are checked as any op's. */
    nb_emit1(b, "test_lerp", NB_VALUES(nb_eager_value(b, x)), NB_NO_ATTRS);
    CHECK_ERR(nb_builder_status(b), NB_ERR_ARG, "test_lerp: missing input 'Y'");
    nb_builder_clear_error(b);
    nb_emit1(b, "mish", NB_VALUES(nb_eager_value(b, x)), NB_ATTRS(NB_ATTR_FLOAT("beta", 2)));
    CHECK_ERR(nb_builder_status(b), NB_ERR_ARG, "mish: unknown attribute 'beta'");
    nb_builder_clear_error(b);
    nb_builder_free(b);

    /* Without a builder there is nothing to expand into. */
    nb_tensor *y = NULL;
    CHECK_ERR(nb_op_run("mish", NB_TENSORS(x), NB_NO_ATTRS, 1, &y), NB_ERR_UNSUPPORTED,
              "mish: a composite op has no kernel");
    nb_var_info in = {.dtype = NB_F64, .ndim = 1, .shape = {3}}, out;
    CHECK_ERR(nb_op_infer("softsign", 1, &in, NB_NO_ATTRS, 1, &out), NB_ERR_UNSUPPORTED, "emit it through a builder");
    nb_program *p;
    REQUIRE_OK(nb_program_new(&p));
    nb_var *pv;
    CHECK_OK(nb_block_create_var(nb_program_global_block(p), "x", NB_F64, 1, S(3), &pv));
    CHECK_ERR(
        nb_block_append_op(nb_program_global_block(p), "softsign", NB_NAMES("x"), NB_NAMES("y"), NB_NO_ATTRS, NULL),
        NB_ERR_UNSUPPORTED, "softsign (y): a composite op");
    nb_program_free(p);

    /* A composite takes everything else from its expansion. */
    nb_op_def with_rule = lerp_def;
    with_rule.name = "test_lerp_with_rule";
    with_rule.vjp = (nb_vjp_fn)1;
    CHECK_ERR(nb_op_register(&with_rule), NB_ERR_ARG, "register test_lerp_with_rule: a composite op (expand)");
    nb_op_def variadic = bad_def;
    variadic.name = "test_variadic_composite";
    variadic.inputs[0].flags = NB_SLOT_VARIADIC;
    CHECK_ERR(nb_op_register(&variadic), NB_ERR_ARG, "a composite op has no variadic slot");
    CHECK(nb_op_find("test_lerp_with_rule") == NULL && nb_op_find("test_variadic_composite") == NULL);
    release_all(x, xi, NULL);
}

int main(void)
{
    RUN(test_values_against_formulas);
    RUN(test_gradcheck_every_mode);
    RUN(test_user_composite);
    RUN(test_static_program);
    RUN(test_vmap);
    RUN(test_errors);
    return test_report();
}
