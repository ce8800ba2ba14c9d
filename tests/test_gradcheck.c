/* The gradient checker checks what it says: correct rules pass, and a wrong
 * VJP or JVP rule is caught; the closure check passes rules that emit only
 * ops with rules and names an op a rule emits that has none. Uses ops
 * registered here: Out = X^3. */
#include <math.h>
#include "test.h"
#include "nabla/gradcheck.h"

static nb_status cube_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = *nb_in_info(c, 0, 0);
    return NB_OK;
}

static nb_status cube_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) {
        double v = nb_tensor_get(x, i);
        nb_tensor_set(o, i, v * v * v);
    }
    return NB_OK;
}

/* 3 x^2 * v, for both rules. */
static nb_value three_x2_times(nb_builder *b, nb_grad_ctx *g, nb_value v, double k)
{
    return nb_mul(b, v, nb_scale(b, nb_square(b, nb_grad_x(g, 0, 0)), k, 0));
}

static nb_status cube_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, three_x2_times(b, g, nb_grad_dy(g, 0, 0), 3));
    return nb_builder_status(b);
}

static nb_status cube_jvp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_is_none(nb_grad_tx(g, 0, 0))) nb_grad_set_ty(g, 0, 0, three_x2_times(b, g, nb_grad_tx(g, 0, 0), 3));
    return nb_builder_status(b);
}

static nb_status cube_jvp_wrong(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_is_none(nb_grad_tx(g, 0, 0))) nb_grad_set_ty(g, 0, 0, three_x2_times(b, g, nb_grad_tx(g, 0, 0), 2));
    return nb_builder_status(b);
}

static nb_status cube_vjp_wrong(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, three_x2_times(b, g, nb_grad_dy(g, 0, 0), 2.5));
    return nb_builder_status(b);
}

#define CUBE(nm, v, j) {.name = nm, .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}, .infer = cube_infer, \
                        .grad_uses_inputs = 1, .vjp = v, .jvp = j}
static const nb_op_def cube = CUBE("test_cube", cube_vjp, cube_jvp);
static const nb_op_def cube_bad_jvp = CUBE("test_cube_bad_jvp", cube_vjp, cube_jvp_wrong);
static const nb_op_def cube_bad_vjp = CUBE("test_cube_bad_vjp", cube_vjp_wrong, cube_jvp);
#define CUBE_KERNEL(nm) {nm, NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, cube_cpu, NULL, NULL}
static const nb_kernel_def cube_kernels[] = {CUBE_KERNEL("test_cube"), CUBE_KERNEL("test_cube_bad_jvp"),
                                             CUBE_KERNEL("test_cube_bad_vjp")};

static nb_gradcheck_case case_of(const char *op)
{
    return (nb_gradcheck_case){.op = op,
                               .name = "2x3",
                               .n_in = 1,
                               .in = {{.dtype = NB_F64, .ndim = 2, .shape = {2, 3}, .lo = 0.5, .hi = 1.5}}};
}

static void test_checker_passes_right_rules_and_catches_wrong_ones(void)
{
    CHECK_OK(nb_op_register(&cube));
    CHECK_OK(nb_op_register(&cube_bad_jvp));
    CHECK_OK(nb_op_register(&cube_bad_vjp));
    for (int i = 0; i < 3; i++) CHECK_OK(nb_kernel_register(&cube_kernels[i]));
    nb_gradcheck_report r;
    nb_gradcheck_case c = case_of("test_cube");
    CHECK_OK(nb_gradcheck_op(&c, 1, 7, &r));
    CHECK(r.checked == 6 && r.failed == 0);
    CHECK_OK(nb_gradcheck_op(&c, 2, 7, &r));
    CHECK(r.checked == 6 && r.failed == 0);
    CHECK_OK(nb_gradcheck_op_jvp(&c, 7, &r));
    CHECK(r.checked == 13 && r.failed == 0); /* 6 elements, the identity, 6 derived from reverse */

    nb_gradcheck_case bad_jvp = case_of("test_cube_bad_jvp");
    CHECK_OK(nb_gradcheck_op_jvp(&bad_jvp, 7, &r));
    CHECK(r.checked == 13 && r.failed == 13); /* every element, the identity, every derived element */
    nb_gradcheck_case bad_vjp = case_of("test_cube_bad_vjp");
    CHECK_OK(nb_gradcheck_op(&bad_vjp, 1, 7, &r));
    CHECK(r.failed == 6);
    /* The JVP is right but disagrees with the (wrong) VJP: the identity and
     * the JVP derived from it fail, the finite differences pass. */
    CHECK_OK(nb_gradcheck_op_jvp(&bad_vjp, 7, &r));
    CHECK(r.checked == 13 && r.failed == 7);
}

/* A cube whose rules multiply by 3 x^2 through an op with no rules of its
 * own, and not marked as having a zero derivative. */
static nb_status times_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = *nb_in_info(c, 0, 0);
    return NB_OK;
}
static const nb_op_def ruleless = {
    .name = "test_ruleless_mul", .inputs = {{"X", 0}, {"Y", 0}}, .outputs = {{"Out", 0}}, .infer = times_infer};

static nb_value via_ruleless(nb_builder *b, nb_grad_ctx *g, nb_value v)
{
    nb_value k = nb_scale(b, nb_square(b, nb_grad_x(g, 0, 0)), 3, 0);
    return nb_emit1(b, "test_ruleless_mul", NB_VALUES(v, k), NB_NO_ATTRS);
}
static nb_status leaky_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, via_ruleless(b, g, nb_grad_dy(g, 0, 0)));
    return nb_builder_status(b);
}
static nb_status leaky_jvp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_is_none(nb_grad_tx(g, 0, 0))) nb_grad_set_ty(g, 0, 0, via_ruleless(b, g, nb_grad_tx(g, 0, 0)));
    return nb_builder_status(b);
}
static const nb_op_def cube_leaky = CUBE("test_cube_leaky", leaky_vjp, leaky_jvp);

static void test_closure_names_the_op_that_breaks_the_chain(void)
{
    CHECK_OK(nb_op_register(&ruleless));
    CHECK_OK(nb_op_register(&cube_leaky));
    CHECK(nb_op_rules_closed(nb_op_find("test_cube")));
    CHECK(nb_op_rules_closed(nb_op_find("less"))); /* a zero derivative, marked */
    CHECK(!nb_op_rules_closed(nb_op_find("test_ruleless_mul")));
    nb_gradcheck_report r;
    nb_gradcheck_case good = case_of("test_cube"), leaky = case_of("test_cube_leaky");
    CHECK_OK(nb_gradcheck_closure(&good, 7, &r));
    CHECK(r.checked > 3 && r.failed == 0 && !r.worst[0]);
    CHECK_OK(nb_gradcheck_closure(&leaky, 7, &r));
    CHECK(r.failed >= 1 && strstr(r.worst, "test_ruleless_mul"));
    if (!strstr(r.worst, "test_ruleless_mul")) fprintf(stderr, "  closure said: %s\n", r.worst);
}

/* ---- the other columns catch what they check ------------------------------------ */

/* Out = X^4 / 4, whose gradient X^3 goes through test_cube_bad_jvp: right
 * in reverse mode at any order, wrong when forward mode meets the gradient. */
static nb_status quartic_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, pow(nb_tensor_get(x, i), 4) / 4);
    return NB_OK;
}
static nb_status quartic_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value c = nb_emit1(b, "test_cube_bad_jvp", NB_VALUES(nb_grad_x(g, 0, 0)), NB_NO_ATTRS);
    nb_grad_set_dx(g, 0, 0, nb_mul(b, nb_grad_dy(g, 0, 0), c));
    return nb_builder_status(b);
}
static nb_status quartic_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value c = nb_emit1(b, "test_cube", NB_VALUES(nb_grad_x(g, 0, 0)), NB_NO_ATTRS);
    if (!nb_is_none(nb_grad_tx(g, 0, 0))) nb_grad_set_ty(g, 0, 0, nb_mul(b, nb_grad_tx(g, 0, 0), c));
    return nb_builder_status(b);
}

/* Ops with a flaw each: an identity whose float32 kernel is off by 1e-2;
 * Out = exp(X) whose VJP reads Out without declaring it (grad_uses_outputs),
 * which a static program has at hand but the tape does not keep; an
 * identity whose VJP gives the gradient back flattened. */
static nb_status copy_rules_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, nb_assign(b, nb_grad_dy(g, 0, 0)));
    return nb_builder_status(b);
}
static nb_status copy_rules_jvp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_is_none(nb_grad_tx(g, 0, 0))) nb_grad_set_ty(g, 0, 0, nb_assign(b, nb_grad_tx(g, 0, 0)));
    return nb_builder_status(b);
}
static nb_status flat_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, nb_reshape(b, nb_grad_dy(g, 0, 0), 1, (int64_t[]){-1}));
    return nb_builder_status(b);
}
static nb_status f32_off_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++)
        nb_tensor_set(o, i, nb_tensor_get(x, i) + (x->dtype == NB_F32 ? 1e-2 : 0));
    return NB_OK;
}
static nb_status exp_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, exp(nb_tensor_get(x, i)));
    return NB_OK;
}
static nb_status exp_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, nb_mul(b, nb_grad_dy(g, 0, 0), nb_grad_y(g, 0, 0)));
    return nb_builder_status(b);
}
static nb_status exp_jvp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_is_none(nb_grad_tx(g, 0, 0))) nb_grad_set_ty(g, 0, 0, nb_mul(b, nb_grad_tx(g, 0, 0), nb_grad_y(g, 0, 0)));
    return nb_builder_status(b);
}

/* The same quartic whose gradient goes through test_cube_bad_vjp instead:
 * right at first order, wrong from the second on. */
static nb_status quartic2_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value c = nb_emit1(b, "test_cube_bad_vjp", NB_VALUES(nb_grad_x(g, 0, 0)), NB_NO_ATTRS);
    nb_grad_set_dx(g, 0, 0, nb_mul(b, nb_grad_dy(g, 0, 0), c));
    return nb_builder_status(b);
}

/* x^5 / 20, whose gradient x^4 / 4 is test_quartic2: right at the first and
 * second order, wrong at the third (where cube_bad_vjp's rule is met). */
static nb_status quintic_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, pow(nb_tensor_get(x, i), 5) / 20);
    return NB_OK;
}
static nb_status quintic_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value c = nb_emit1(b, "test_quartic2", NB_VALUES(nb_grad_x(g, 0, 0)), NB_NO_ATTRS);
    nb_grad_set_dx(g, 0, 0, nb_mul(b, nb_grad_dy(g, 0, 0), c));
    return nb_builder_status(b);
}
static nb_status quintic_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value c = nb_emit1(b, "test_quartic2", NB_VALUES(nb_grad_x(g, 0, 0)), NB_NO_ATTRS);
    if (!nb_is_none(nb_grad_tx(g, 0, 0))) nb_grad_set_ty(g, 0, 0, nb_mul(b, nb_grad_tx(g, 0, 0), c));
    return nb_builder_status(b);
}

/* Two outputs, X and 2X, whose VJP assumes both output gradients are there. */
static nb_status pair_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = *nb_out_info(c, 1, 0) = *nb_in_info(c, 0, 0);
    return NB_OK;
}
static nb_status pair_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *a = nb_kout(k, 0, 0), *d = nb_kout(k, 1, 0);
    for (int64_t i = 0; i < nb_tensor_numel(x); i++)
        nb_tensor_set(a, i, nb_tensor_get(x, i)), nb_tensor_set(d, i, 2 * nb_tensor_get(x, i));
    return NB_OK;
}
static nb_status pair_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, nb_add(b, nb_grad_dy(g, 0, 0), nb_scale(b, nb_grad_dy(g, 1, 0), 2, 0)));
    return nb_builder_status(b);
}
static nb_status pair_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, nb_assign(b, t)), nb_grad_set_ty(g, 1, 0, nb_scale(b, t, 2, 0));
    return nb_builder_status(b);
}
static const nb_op_def pair = {.name = "test_pair",
                               .inputs = {{"X", 0}},
                               .outputs = {{"A", 0}, {"B", 0}},
                               .infer = pair_infer,
                               .vjp = pair_vjp,
                               .jvp = pair_jvp};

static const nb_op_def quartic = CUBE("test_quartic", quartic_vjp, quartic_jvp);
static const nb_op_def quartic2 = CUBE("test_quartic2", quartic2_vjp, quartic_jvp);
static const nb_op_def quintic = CUBE("test_quintic", quintic_vjp, quintic_jvp);
static const nb_op_def f32_off = CUBE("test_f32_off", copy_rules_vjp, copy_rules_jvp);
static const nb_op_def undeclared = CUBE("test_exp_undeclared", exp_vjp, exp_jvp); /* declares inputs only */
static const nb_op_def flat_grad = CUBE("test_flat_grad", flat_vjp, copy_rules_jvp);
static const nb_kernel_def column_kernels[] = {
    {"test_quartic", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, quartic_cpu, NULL, NULL},
    {"test_f32_off", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, f32_off_cpu, NULL, NULL},
    {"test_exp_undeclared", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, exp_cpu, NULL, NULL},
    {"test_flat_grad", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, f32_off_cpu, NULL, NULL}, /* an identity in float64 */
    {"test_quartic2", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, quartic_cpu, NULL, NULL},
    {"test_pair", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, pair_cpu, NULL, NULL},
    {"test_quintic", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, quintic_cpu, NULL, NULL},
};

static void test_each_column_catches_its_flaw(void)
{
    const nb_op_def *defs[] = {&quartic, &f32_off, &undeclared, &flat_grad, &quartic2, &pair, &quintic};
    for (int i = 0; i < 7; i++) CHECK_OK(nb_op_register(defs[i]));
    for (int i = 0; i < 7; i++) CHECK_OK(nb_kernel_register(&column_kernels[i]));
    nb_gradcheck_report r;
    nb_gradcheck_case c = case_of("test_cube");
    /* The right cube passes every column. */
    CHECK_OK(nb_gradcheck_fwd_over_rev(&c, 7, &r));
    CHECK(r.checked == 6 && r.failed == 0);
    CHECK_OK(nb_gradcheck_shapes(&c, 7, &r));
    CHECK(r.checked == 1 && r.failed == 0);
    CHECK_OK(nb_gradcheck_f32(&c, 7, 1e-4, &r));
    CHECK(r.checked == 6 && r.failed == 0);
    CHECK_OK(nb_gradcheck_eager(&c, 7, &r));
    CHECK(r.checked == 42 &&
          r.failed == 0); /* outputs and gradients three ways, gradients with expanded output gradients */
    CHECK_OK(nb_gradcheck_transforms(&c, 7, &r));
    CHECK(r.checked == 6 && r.failed == 0);
    CHECK_OK(nb_gradcheck_op(&c, 3, 7, &r));
    CHECK(r.checked == 6 && r.failed == 0);

    nb_gradcheck_case q2 = case_of("test_quartic2");
    CHECK_OK(nb_gradcheck_op(&q2, 1, 7, &r));
    CHECK(r.failed == 0);
    CHECK_OK(nb_gradcheck_op(&q2, 2, 7, &r));
    CHECK(r.failed == 6);
    nb_gradcheck_case q5 = case_of("test_quintic");
    CHECK_OK(nb_gradcheck_op(&q5, 2, 7, &r));
    CHECK(r.failed == 0);
    CHECK_OK(nb_gradcheck_op(&q5, 3, 7, &r));
    CHECK(r.failed > 0);

    nb_gradcheck_case pr = case_of("test_pair");
    CHECK_OK(nb_gradcheck_op(&pr, 1, 7, &r)); /* both outputs in the loss: right */
    CHECK(r.failed == 0);
    nb_status ast = nb_gradcheck_absent(&pr, 7, &r);
    CHECK(ast != NB_OK && strstr(nb_last_error(), "in the gradient rule of test_pair"));
    if (ast == NB_OK) fprintf(stderr, "  absent said: %s\n", nb_last_error());
    CHECK_OK(nb_gradcheck_absent(&c, 7, &r)); /* one output: nothing to leave out */
    CHECK(r.checked == 0);

    nb_gradcheck_case q = case_of("test_quartic");
    CHECK_OK(nb_gradcheck_op(&q, 2, 7, &r)); /* reverse over reverse is right */
    CHECK(r.failed == 0);
    CHECK_OK(nb_gradcheck_fwd_over_rev(&q, 7, &r));
    CHECK(r.failed == 6);

    nb_gradcheck_case f = case_of("test_f32_off");
    CHECK_OK(nb_gradcheck_f32(&f, 7, 1e-4, &r));
    CHECK(r.checked == 6 && r.failed == 6);

    nb_gradcheck_case u = case_of("test_exp_undeclared");
    CHECK_OK(nb_gradcheck_op(&u, 1, 7, &r)); /* right in a program */
    CHECK(r.failed == 0);
    nb_status est = nb_gradcheck_eager(&u, 7, &r);
    CHECK(est != NB_OK || r.failed > 0);
    est = nb_gradcheck_transforms(&u, 7, &r);
    CHECK(est != NB_OK || r.failed > 0);

    nb_gradcheck_case g = case_of("test_flat_grad");
    nb_status st = nb_gradcheck_shapes(&g, 7, &r);
    CHECK(st != NB_OK || (r.failed == 1 && strstr(r.worst, "gradient of x0 is float64 [6]")));
    if (!st && !strstr(r.worst, "[6]")) fprintf(stderr, "  shapes said: %s\n", r.worst);
}

int main(void)
{
    RUN(test_checker_passes_right_rules_and_catches_wrong_ones);
    RUN(test_closure_names_the_op_that_breaks_the_chain);
    RUN(test_each_column_catches_its_flaw);
    return test_report();
}
