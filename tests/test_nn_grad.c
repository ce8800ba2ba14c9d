/* Gradient rules of the nn family, beyond what `nabla gradcheck` covers
 * (float64 programs with known shapes): shapes unknown when the gradient is
 * built, float32 programs, and which ops the rules emit. */
#include <stdlib.h>
#include "test.h"
#include "nabla/gradcheck.h"

/* Deterministic values in [lo, hi). */
static nb_tensor *filled(nb_dtype dt, int ndim, const int64_t *shape, double lo, double hi, unsigned seed)
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, dt, ndim, shape)) abort();
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) {
        s = s * 1664525u + 1013904223u;
        nb_tensor_set(t, i, lo + (hi - lo) * (double)(s >> 8) / (double)(1u << 24));
    }
    return t;
}

static int count_ops(const nb_program *p, const char *type)
{
    const nb_block *b = nb_program_global_block((nb_program *)p);
    int n = 0;
    for (int i = 0; i < b->n_ops; i++) n += !strcmp(b->ops[i]->def->name, type);
    return n;
}

/* "mean" divides by a count known only at run time when the batch is -1. */
static void test_mean_losses_with_unknown_batch(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_data(b, "x", NB_F64, 2, S(-1, 4));
    nb_value t = nb_data(b, "t", NB_F64, 2, S(-1, 4));
    nb_value q = nb_data(b, "q", NB_F64, 2, S(-1, 4));
    nb_value lab = nb_data(b, "lab", NB_I64, 2, S(-1, 1));
    nb_value terms[3] = {
        nb_mse_loss(b, x, t, "mean"),
        nb_bce_with_logits(b, x, q, "mean"),
        nb_reduce_sum(b, nb_cross_entropy(b, nb_softmax(b, x, -1), lab), 0, NULL, false),
    };
    nb_value loss = nb_sum(b, 3, terms);
    REQUIRE_OK(nb_builder_status(b));
    nb_feed feeds[4] = {
        {"x", filled(NB_F64, 2, S(3, 4), -2, 2, 1)},
        {"t", filled(NB_F64, 2, S(3, 4), -2, 2, 2)},
        {"q", filled(NB_F64, 2, S(3, 4), 0, 1, 3)},
        {"lab", T(NB_I64, S(3, 1), 2, -100, 0)},
    };
    nb_gradcheck_report rep;
    CHECK_OK(nb_gradcheck_program(p, nb_value_name(loss), NB_NAMES("x", "t"), NULL,
                                  &(nb_gradcheck_opts){.feeds = NB_FEEDS_N(4, feeds)}, &rep));
    CHECK(rep.checked == 24 && rep.failed == 0);
    if (rep.failed) fprintf(stderr, "  worst: %s\n", rep.worst);
    for (int i = 0; i < 4; i++) nb_tensor_release(feeds[i].tensor);
    nb_builder_free(b);
    nb_program_free(p);
}

/* The one-hot form of hard labels needs the class count. */
static void test_cross_entropy_needs_known_class_count(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_data(b, "x", NB_F64, 2, S(-1, -1));
    nb_value lab = nb_data(b, "lab", NB_I64, 2, S(-1, 1));
    nb_value loss = nb_reduce_sum(b, nb_cross_entropy(b, x, lab), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(b));
    const char *ln = nb_value_name(loss), *in = "x";
    nb_backward_result r;
    CHECK_ERR(nb_gradients(p, NB_NAMES_N(1, &ln), NB_NAMES_N(1, &in), NULL, &r), NB_ERR_SHAPE, "number of classes");
    nb_builder_free(b);
    nb_program_free(p);
}

/* Builds every differentiable nn op on x (and friends) in dtype `dt`, with
 * a weighted loss, and fetches the gradients of x, t and w. */
#define N_GRADS 3
static void grads_in(nb_dtype dt, nb_tensor **out)
{
    for (int i = 0; i < N_GRADS; i++) out[i] = NULL;
    nb_program *p;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_executor_new(&ex));
    nb_value x = nb_data(b, "x", dt, 2, S(3, 4));
    nb_value t = nb_data(b, "t", dt, 2, S(3, 4));
    nb_value q = nb_data(b, "q", dt, 2, S(3, 4));
    nb_value c = nb_data(b, "c", dt, 2, S(3, 4));
    nb_value w = nb_data(b, "w", dt, 2, S(5, 4));
    nb_value lab = nb_data(b, "lab", NB_I64, 2, S(3, 1));
    nb_value ids = nb_data(b, "ids", NB_I32, 1, S(3));
    nb_value sm, outs[10];
    int n = 0;
    outs[n++] = nb_softmax(b, x, 0);
    outs[n++] = nb_log_softmax(b, x, -1);
    nb_value swce = nb_softmax_with_cross_entropy(b, x, lab, &sm);
    outs[n++] = nb_mul(b, nb_ones_like(b, x), swce); /* [3,4] * [3,1] */
    outs[n++] = sm;
    outs[n++] = nb_mul(b, nb_ones_like(b, x), nb_cross_entropy(b, nb_softmax(b, x, -1), lab));
    outs[n++] = nb_mul(b, nb_ones_like(b, x), nb_mse_loss(b, x, t, "mean"));
    outs[n++] = nb_mul(b, nb_ones_like(b, x), nb_bce_with_logits(b, x, q, "sum"));
    outs[n++] = nb_dropout(b, x, 0.5, false, 5);
    outs[n++] = nb_embedding(b, w, ids, 2);
    for (int i = 0; i < n; i++) {
        nb_var_info vi = nb_value_info(b, outs[i]);
        if (vi.dtype != dt) outs[i] = nb_cast(b, outs[i], dt);
        outs[i] = nb_reduce_sum(b, nb_mul(b, outs[i], c), 0, NULL, false);
    }
    nb_value loss = nb_sum(b, n, outs);
    REQUIRE_OK(nb_builder_status(b));
    const char *ln = nb_value_name(loss), *wrt[N_GRADS] = {"x", "t", "w"};
    nb_backward_result r;
    REQUIRE_OK(nb_gradients(p, NB_NAMES_N(1, &ln), NB_NAMES_N(N_GRADS, wrt), NULL, &r));
    CHECK(count_ops(p, "softmax_with_cross_entropy_grad") == 1 && count_ops(p, "embedding_grad") == 1);
    nb_feed feeds[7] = {
        {"x", filled(dt, 2, S(3, 4), -2, 2, 1)}, {"t", filled(dt, 2, S(3, 4), -2, 2, 2)},
        {"q", filled(dt, 2, S(3, 4), 0, 1, 3)},  {"c", filled(dt, 2, S(3, 4), -1, 1, 4)},
        {"w", filled(dt, 2, S(5, 4), -1, 1, 5)}, {"lab", T(NB_I64, S(3, 1), 2, -100, 0)},
        {"ids", T(NB_I32, S(3), 1, 2, 1)},
    };
    CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS_N(7, feeds), NB_NAMES_N(N_GRADS, r.grads), out));
    for (int i = 0; i < N_GRADS; i++) CHECK(out[i] && out[i]->dtype == dt);
    for (int i = 0; i < 7; i++) nb_tensor_release(feeds[i].tensor);
    nb_backward_result_free(&r);
    nb_executor_free(ex);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(p);
}

/* The rules build float32 gradients for float32 programs (masks, one-hot
 * labels and constants take the input's dtype), equal to float64's. */
static void test_float32_gradients_match_float64(void)
{
    nb_tensor *g32[N_GRADS], *g64[N_GRADS];
    grads_in(NB_F32, g32);
    grads_in(NB_F64, g64);
    for (int i = 0; i < N_GRADS; i++) {
        if (!g32[i] || !g64[i]) continue;
        CHECK(nb_tensor_numel(g32[i]) == nb_tensor_numel(g64[i]));
        double worst = 0, norm = 0;
        for (int64_t e = 0; e < nb_tensor_numel(g64[i]); e++) {
            double d = fabs(nb_tensor_get(g32[i], e) - nb_tensor_get(g64[i], e));
            worst = d > worst ? d : worst;
            norm += fabs(nb_tensor_get(g64[i], e));
        }
        CHECK(norm > 0);
        CHECK_NEAR(worst, 0, 1e-4);
    }
    for (int i = 0; i < N_GRADS; i++) {
        nb_tensor_release(g32[i]);
        nb_tensor_release(g64[i]);
    }
}

int main(void)
{
    RUN(test_mean_losses_with_unknown_batch);
    RUN(test_cross_entropy_needs_known_class_count);
    RUN(test_float32_gradients_match_float64);
    return test_report();
}
