/* The kernel registry: a second provider registers a variant of a built-in
 * op, and the executor and the eager path pick it where it accepts the
 * instance and nabla's own kernel elsewhere; lookups that find nothing and
 * malformed registrations are clear errors. */
#include "test.h"

/* A "provider" whose relu writes 7 everywhere, so that a test can tell which
 * kernel ran. It takes only inputs of at least 4 elements. */
static int fake_runs;

static nb_status fake_relu(const nb_kernel_ctx *k)
{
    fake_runs++;
    nb_tensor *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, 7);
    return NB_OK;
}

static bool fake_accepts(const nb_kernel_ctx *k) { return nb_tensor_numel(nb_kin(k, 0, 0)) >= 4; }

static const nb_kernel_def fake = {.op = "relu",
                                   .device = NB_DEVICE_CPU,
                                   .dtypes = NB_DT(NB_F32),
                                   .provider = "fake",
                                   .priority = 10,
                                   .run = fake_relu,
                                   .accepts = fake_accepts};

static void register_fake(void)
{
    static int done;
    if (!done++) CHECK_OK(nb_kernel_register(&fake));
}

static void test_variants_are_listed_best_first(void)
{
    register_fake();
    const nb_kernel_def *first = nb_kernel_at("relu", NB_DEVICE_CPU, 0),
                        *second = nb_kernel_at("relu", NB_DEVICE_CPU, 1);
    CHECK(first == &fake);
    CHECK(second && !strcmp(second->provider, "nabla") && second->priority == 0);
    CHECK(nb_kernel_at("relu", NB_DEVICE_CPU, 2) == NULL);
    /* The dtype chooses too: the fake one takes float32 only. */
    CHECK(nb_kernel_find("relu", NB_DEVICE_CPU, NB_F64, NULL) == second);
    CHECK(nb_kernel_find("relu", NB_DEVICE_CPU, NB_F32, NULL) == &fake);
}

static void test_eager_picks_per_call(void)
{
    register_fake();
    nb_tensor *big = T(NB_F32, S(4), -1, 2, -3, 4), *small = T(NB_F32, S(2), -1, 2), *d = T(NB_F64, S(4), -1, 2, -3, 4);
    nb_tensor *o = NULL;
    int before = fake_runs;
    CHECK_OK(nb_op_run("relu", NB_TENSORS(big), NB_NO_ATTRS, 1, &o));
    CHECK_TENSOR(o, S(4), 0, 7, 7, 7, 7);
    nb_tensor_release(o), o = NULL;
    CHECK(fake_runs == before + 1);
    CHECK_OK(nb_op_run("relu", NB_TENSORS(small), NB_NO_ATTRS, 1, &o)); /* not accepted: nabla's own */
    CHECK_TENSOR(o, S(2), 0, 0, 2);
    nb_tensor_release(o), o = NULL;
    CHECK_OK(nb_op_run("relu", NB_TENSORS(d), NB_NO_ATTRS, 1, &o)); /* float64: nabla's own */
    CHECK_TENSOR(o, S(4), 0, 0, 2, 0, 4);
    CHECK(fake_runs == before + 1);
    release_all(o, big, small, d, NULL);
}

static void test_executor_picks_again_when_shapes_change(void)
{
    register_fake();
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value y = nb_relu(b, nb_data(b, "x", NB_F32, 1, S(-1)));
    REQUIRE_OK(nb_builder_status(b));
    nb_prepared *pp;
    nb_scope *scope;
    const char *fetch = nb_value_name(y);
    REQUIRE_OK(nb_prepare(&pp, p, 0, NB_NAMES("x"), NB_NAMES_N(1, &fetch)));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_tensor *big = T(NB_F32, S(4), -1, 2, -3, 4), *small = T(NB_F32, S(2), -1, 2), *o;
    int before = fake_runs;
    CHECK_OK(nb_prepared_run(pp, scope, &big, &o));
    CHECK_TENSOR(o, S(4), 0, 7, 7, 7, 7);
    nb_tensor_release(o);
    CHECK_OK(nb_prepared_run(pp, scope, &small, &o));
    CHECK_TENSOR(o, S(2), 0, 0, 2);
    nb_tensor_release(o);
    CHECK_OK(nb_prepared_run(pp, scope, &big, &o));
    CHECK_TENSOR(o, S(4), 0, 7, 7, 7, 7);
    CHECK(fake_runs == before + 2);
    release_all(o, big, small, NULL);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(p);
}

/* An op registered without a kernel builds, and fails to run with an error
 * that names it, the device and the dtype. */
static nb_status same_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = *nb_in_info(c, 0, 0);
    return NB_OK;
}
static const nb_op_def bare = {.name = "test_bare",
                               .inputs = {{"X", 0}},
                               .outputs = {{"Out", 0}},
                               .infer = same_infer,
                               .flags = NB_OP_NOT_DIFFERENTIABLE};

static void test_missing_kernels_are_named(void)
{
    if (!nb_op_find("test_bare")) CHECK_OK(nb_op_register(&bare));
    nb_tensor *x = T(NB_F64, S(2), 1, 2), *o = NULL, *flag = T(NB_BOOL, S(1), 1);
    CHECK_ERR(nb_op_run("test_bare", NB_TENSORS(x), NB_NO_ATTRS, 1, &o), NB_ERR_UNSUPPORTED,
              "test_bare: no cpu kernel takes float64");
    CHECK_ERR(nb_op_run("relu", NB_TENSORS(flag), NB_NO_ATTRS, 1, &o), NB_ERR_DTYPE, "relu: X is bool");
    CHECK(nb_kernel_find("relu", NB_DEVICE_CPU, NB_BOOL, NULL) == NULL);
    CHECK(
        strstr(nb_last_error(), "relu: no cpu kernel takes bool (it has kernels for float32, float64, int32, int64)"));
    release_all(x, flag, NULL);
}

static void test_malformed_kernels_are_refused(void)
{
    CHECK_ERR(nb_kernel_register(NULL), NB_ERR_ARG, "no op name");
    CHECK_ERR(nb_kernel_register(&(nb_kernel_def){.op = "relu", .dtypes = NB_DT_FLOAT}), NB_ERR_ARG,
              "register kernel for relu: no run function");
    CHECK_ERR(nb_kernel_register(&(nb_kernel_def){.op = "relu", .run = fake_relu}), NB_ERR_ARG, "names no dtype");
    CHECK_ERR(nb_kernel_register(
                  &(nb_kernel_def){.op = "relu", .device = NB_DEVICE_COUNT, .dtypes = NB_DT_FLOAT, .run = fake_relu}),
              NB_ERR_ARG, "is not a device");
}

/* The eager builder remembers the kernel it chose for an op's plain call
 * (src/ops/op_memo.h). A kernel registered after that call is chosen by the
 * next one, and a kernel with an `accepts` is asked on every call, inputs
 * of the same shape included. */
static bool first_is_positive(const nb_kernel_ctx *k) { return nb_tensor_get(nb_kin(k, 0, 0), 0) > 0; }

static const nb_kernel_def late = {.op = "neg",
                                   .device = NB_DEVICE_CPU,
                                   .dtypes = NB_DT(NB_F32),
                                   .provider = "late",
                                   .priority = 10,
                                   .run = fake_relu,
                                   .accepts = first_is_positive};

static void test_eager_sees_kernels_registered_later(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *xt = T(NB_F32, S(4), 1, 2, 3, 4), *yt = T(NB_F32, S(4), -1, 2, 3, 4);
    nb_value x = nb_eager_value(b, xt), y = nb_eager_value(b, yt);
    CHECK_TENSOR(nb_eager_tensor(nb_neg(b, x)), S(4), 0, -1, -2, -3, -4);
    CHECK_TENSOR(nb_eager_tensor(nb_neg(b, x)), S(4), 0, -1, -2, -3, -4);
    CHECK_OK(nb_kernel_register(&late));
    CHECK_TENSOR(nb_eager_tensor(nb_neg(b, x)), S(4), 0, 7, 7, 7, 7);
    CHECK_TENSOR(nb_eager_tensor(nb_neg(b, y)), S(4), 0, 1, -2, -3, -4); /* not accepted: nabla's own */
    CHECK_TENSOR(nb_eager_tensor(nb_neg(b, x)), S(4), 0, 7, 7, 7, 7);
    CHECK_OK(nb_builder_status(b));
    nb_builder_free(b);
    release_all(xt, yt, NULL);
}

int main(void)
{
    RUN(test_variants_are_listed_best_first);
    RUN(test_eager_picks_per_call);
    RUN(test_executor_picks_again_when_shapes_change);
    RUN(test_missing_kernels_are_named);
    RUN(test_malformed_kernels_are_refused);
    RUN(test_eager_sees_kernels_registered_later);
    return test_report();
}
