/* nb_optimizer.decay_min_ndim, GPT-2's weight-decay split (examples/gpt2
 * trains with it): with a gradient of exactly zero, an AdamW step only
 * decays, p *= 1 - lr * weight_decay, so after one step a matrix has
 * decayed and, with decay_min_ndim 2, a bias has not; with 0 both have.
 * The same in a static program (nb_minimize) and on the tape; a negative
 * value is refused. */
#include "test.h"

#define LR 0.5
#define WD 0.1

/* sum(0 * (x W + b)): every gradient zero, but there. */
static nb_value zero_loss(nb_builder *b, nb_value x)
{
    nb_value w = nb_param(b, "w", NB_F32, 2, (int64_t[]){2, 2}, nb_init_ones());
    nb_value bias = nb_param(b, "bias", NB_F32, 1, (int64_t[]){2}, nb_init_ones());
    return nb_reduce_sum(b, nb_scale(b, nb_fc(b, x, w, bias, 1), 0.0, 0.0), 0, NULL, false);
}

static void check_decayed(nb_tensor *w, nb_tensor *bias, int min_ndim)
{
    CHECK(w && bias);
    if (!w || !bias) return;
    CHECK_NEAR(nb_tensor_get(w, 3), 1 - LR * WD, 1e-7);
    CHECK_NEAR(nb_tensor_get(bias, 1), min_ndim >= 2 ? 1.0 : 1 - LR * WD, 1e-7);
}

static void static_step(int min_ndim)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    nb_value loss = zero_loss(b, nb_layer_data(b, "x", NB_F32, 2, (int64_t[]){1, 2}));
    CHECK_OK(nb_builder_status(b));
    nb_optimizer opt = nb_adamw(LR, WD);
    opt.decay_min_ndim = min_ndim;
    nb_backward_result r;
    CHECK_OK(nb_minimize(&opt, main_p, startup, nb_value_name(loss), NULL, &r));
    nb_scope *scope;
    nb_executor *ex;
    nb_tensor *x;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_executor_new(&ex));
    REQUIRE_OK(nb_tensor_full(&x, NB_F32, 2, (int64_t[]){1, 2}, 1.0));
    CHECK_OK(nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    CHECK_OK(nb_executor_run(ex, main_p, scope, NB_FEEDS({"x", x}), NB_NO_NAMES, NULL));
    check_decayed(nb_scope_find(scope, "w"), nb_scope_find(scope, "bias"), min_ndim);
    nb_tensor_release(x);
    nb_executor_free(ex);
    nb_scope_free(scope);
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
}

static void eager_step(int min_ndim)
{
    nb_builder *b;
    nb_tensor *x;
    REQUIRE_OK(nb_builder_new_eager(&b));
    REQUIRE_OK(nb_tensor_full(&x, NB_F32, 2, (int64_t[]){1, 2}, 1.0));
    nb_tensor *loss = nb_eager_tensor(zero_loss(b, nb_eager_value(b, x)));
    CHECK_OK(nb_builder_status(b));
    CHECK_OK(nb_backward(NB_TENSORS(loss), NULL, 0));
    nb_optimizer opt = nb_adamw(LR, WD);
    opt.decay_min_ndim = min_ndim;
    nb_eager_optimizer *o;
    REQUIRE_OK(nb_eager_optimizer_new(&o, &opt));
    CHECK_OK(nb_eager_optimizer_step(o, b));
    check_decayed(nb_eager_find_param(b, "w"), nb_eager_find_param(b, "bias"), min_ndim);
    nb_eager_optimizer_free(o);
    nb_eager_release_values(b);
    nb_tensor_release(x);
    nb_builder_free(b);
}

static void test_split(void)
{
    for (int m = 0; m <= 2; m += 2) {
        static_step(m);
        eager_step(m);
    }
}

static void test_refused(void)
{
    nb_optimizer opt = nb_adamw(LR, WD);
    opt.decay_min_ndim = -1;
    CHECK_ERR(nb_optimizer_check(&opt), NB_ERR_ARG, "decay_min_ndim is -1");
}

int main(void)
{
    RUN(test_split);
    RUN(test_refused);
    return test_report();
}
