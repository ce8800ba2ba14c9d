/* nb_checkpoint, recomputation on the tape: gradients equal those without
 * it to the bit (dropout included, and parameters created inside the
 * checkpointed function, whose initialisers draw from the same generator),
 * nested too, and differentiated again with NB_CREATE_GRAPH; the tape keeps
 * less (nb_autograd_saved_bytes); a second backward without retain_graph
 * and bad arguments are refused. */
#include <stdlib.h>
#include "test.h"
#include "nabla/nabla.h"

#define B 32
#define W 48
#define BLOCKS 4

/* Two tanh layers and dropout: one block of the model. */
static nb_status block(nb_builder *b, void *ctx, int n_in, const nb_value *in, int n_out, nb_value *out)
{
    nb_value h = nb_layer_fc(b, in[0], W, "tanh", NULL);
    h = nb_layer_dropout(b, h, 0.2);
    out[0] = nb_layer_fc(b, h, W, "tanh", NULL);
    return nb_builder_status(b);
}

/* Two blocks, the inner ones checkpointed again when ctx says so. */
static nb_status two_blocks(nb_builder *b, void *ctx, int n_in, const nb_value *in, int n_out, nb_value *out)
{
    nb_value h;
    nb_status st =
        *(int *)ctx ? nb_checkpoint(b, block, NULL, NB_VALUES_N(1, in), 1, &h) : block(b, NULL, 1, in, 1, &h);
    if (!st)
        st = *(int *)ctx ? nb_checkpoint(b, block, NULL, NB_VALUES_N(1, &h), 1, out) : block(b, NULL, 1, &h, 1, out);
    return st;
}

/* mode 0: plain; 1: each block checkpointed; 2: pairs of blocks, nested. */
static nb_value model(nb_builder *b, nb_value x, int mode)
{
    nb_value h = x;
    int yes = 1;
    for (int i = 0; i < BLOCKS && !nb_builder_status(b); i++) {
        nb_value o;
        if (mode == 0) block(b, NULL, 1, &h, 1, &o);
        else if (mode == 1) nb_checkpoint(b, block, NULL, NB_VALUES_N(1, &h), 1, &o);
        else if (i % 2 == 0) {
            nb_checkpoint(b, two_blocks, &yes, NB_VALUES_N(1, &h), 1, &o);
            i++;
        } else continue;
        h = o;
    }
    return nb_reduce_mean(b, nb_mul(b, h, h), 0, NULL, false);
}

static nb_tensor *input(bool requires_grad)
{
    nb_tensor *x;
    if (nb_tensor_new(&x, NB_F64, 2, S(B, W))) exit(2);
    for (int i = 0; i < B * W; i++) nb_tensor_set(x, i, sin(0.11 * i));
    if (requires_grad && nb_tensor_set_requires_grad(x, true)) exit(2);
    return x;
}

typedef struct run {
    nb_builder *b;
    nb_tensor *x;
    size_t saved;
} run;

/* Two steps (the second draws new dropout masks); the gradients of the
 * second are left in the parameters and x. */
static void train(run *r, int mode)
{
    REQUIRE_OK(nb_builder_new_eager(&r->b));
    nb_eager_set_seed(r->b, 9);
    r->x = input(true);
    for (int step = 0; step < 2; step++) {
        nb_eager_zero_grad(r->b);
        nb_tensor_zero_grad(r->x);
        nb_value loss = model(r->b, nb_eager_value(r->b, r->x), mode);
        REQUIRE_OK(nb_builder_status(r->b));
        nb_tensor *l = nb_eager_tensor(loss);
        int nodes;
        CHECK_OK(nb_autograd_saved_bytes(NB_TENSORS(l), &r->saved, &nodes));
        CHECK_OK(nb_backward(NB_TENSORS(l), NULL, 0));
        nb_eager_release_values(r->b);
    }
}

static bool same(const nb_tensor *a, const nb_tensor *b)
{
    return a && b && nb_tensor_numel(a) == nb_tensor_numel(b) &&
        !memcmp(nb_tensor_data(a), nb_tensor_data(b), (size_t)nb_tensor_numel(a) * 8);
}

static void test_equal_gradients(void)
{
    run plain, each, nested;
    train(&plain, 0);
    train(&each, 1);
    train(&nested, 2);
    int n = nb_eager_param_count(plain.b);
    CHECK(n == 2 * BLOCKS * 2 && nb_eager_param_count(each.b) == n && nb_eager_param_count(nested.b) == n);
    for (int i = 0; i < n; i++) {
        const nb_tensor *g = nb_tensor_grad(nb_eager_param_at(plain.b, i));
        CHECK(same(g, nb_tensor_grad(nb_eager_param_at(each.b, i))));
        CHECK(same(g, nb_tensor_grad(nb_eager_param_at(nested.b, i))));
    }
    CHECK(same(nb_tensor_grad(plain.x), nb_tensor_grad(each.x)));
    CHECK(same(nb_tensor_grad(plain.x), nb_tensor_grad(nested.x)));
    /* What the tape holds at the end of the forward pass (the parameters
     * not counted): every layer's values without checkpoints; the blocks'
     * inputs with them. */
    printf("  saved at the end of the forward pass: %zu bytes plain, %zu checkpointed, %zu nested\n", plain.saved,
           each.saved, nested.saved);
    CHECK(each.saved < plain.saved / 2);
    CHECK(nested.saved < each.saved);
    run *rs[] = {&plain, &each, &nested};
    for (int i = 0; i < 3; i++) {
        nb_tensor_release(rs[i]->x);
        nb_builder_free(rs[i]->b);
    }
}

/* The gradient of the squared norm of the gradient (double backward). */
static void second_order(int mode, nb_tensor **out, int *n)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_eager_set_seed(b, 4);
    nb_tensor *x = input(true);
    nb_value loss = model(b, nb_eager_value(b, x), mode);
    REQUIRE_OK(nb_builder_status(b));
    int np = nb_eager_param_count(b);
    nb_tensor *ps[64], *gs[64];
    for (int i = 0; i < np; i++) ps[i] = nb_eager_param_at(b, i);
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS(nb_eager_tensor(loss)), NULL, NB_TENSORS_N(np, ps), NB_CREATE_GRAPH, gs));
    nb_value s = NB_NONE;
    for (int i = 0; i < np; i++) {
        nb_value g = nb_eager_value(b, gs[i]);
        nb_value t = nb_reduce_sum(b, nb_mul(b, g, g), 0, NULL, false);
        s = nb_is_none(s) ? t : nb_add(b, s, t);
        nb_tensor_release(gs[i]);
    }
    REQUIRE_OK(nb_builder_status(b));
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS(nb_eager_tensor(s)), NULL, NB_TENSORS_N(np, ps), 0, out));
    *n = np;
    nb_tensor_release(x);
    nb_builder_free(b);
}

static void test_create_graph(void)
{
    nb_tensor *a[64], *c[64];
    int n, m;
    second_order(0, a, &n);
    second_order(1, c, &m);
    CHECK(n == m);
    for (int i = 0; i < n; i++) {
        if (!nb_tensor_allclose(a[i], c[i], 1e-12, 1e-15)) {
            double d = 0, m = 0;
            for (int64_t k = 0; k < nb_tensor_numel(a[i]); k++) {
                d = fmax(d, fabs(nb_tensor_get(a[i], k) - nb_tensor_get(c[i], k)));
                m = fmax(m, fabs(nb_tensor_get(a[i], k)));
            }
            printf("  parameter %d: second derivatives differ by %.3g (largest %.3g)\n", i, d, m);
        }
        CHECK(nb_tensor_allclose(a[i], c[i], 1e-12, 1e-15));
        release_all(a[i], c[i], NULL);
    }
}

static void test_errors(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = input(true);
    nb_value xv = nb_eager_value(b, x), o;
    CHECK_ERR(nb_checkpoint(b, block, NULL, NB_VALUES_N(1, &xv), 0, &o), NB_ERR_ARG,
              "checkpoint: needs an eager builder");
    REQUIRE_OK(nb_checkpoint(b, block, NULL, NB_VALUES_N(1, &xv), 1, &o));
    nb_tensor *l = nb_eager_tensor(nb_reduce_sum(b, o, 0, NULL, false));
    CHECK_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    CHECK_ERR(nb_backward(NB_TENSORS(l), NULL, 0), NB_ERR_STATE, "a second time");
    /* Without grad mode it only runs the function. */
    nb_grad_mode_push(false);
    CHECK_OK(nb_checkpoint(b, block, NULL, NB_VALUES_N(1, &xv), 1, &o));
    CHECK(!nb_tensor_requires_grad(nb_eager_tensor(o)));
    nb_grad_mode_pop();
    nb_tensor_release(x);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_equal_gradients);
    RUN(test_create_graph);
    RUN(test_errors);
    return test_report();
}
