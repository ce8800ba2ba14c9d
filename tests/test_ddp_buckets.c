/* Gradient buckets sized for overlap (src/dist/bucket.c): a small first
 * bucket, the rest sized to the model, in nb_ddp and in the static
 * data-parallel pass; and the part of the communication hidden that
 * nb_ddp_stats_get reports. */
#include <stdlib.h>
#include "test.h"
#include "dist/dist_internal.h"
#include "nabla/nabla.h"

static void test_caps(void)
{
    size_t first, rest;
    nb_bucket_caps(2718760, 0, &first, &rest); /* the 784-512-512-10 MLP's gradients */
    CHECK(first == NB_FIRST_BUCKET_BYTES && rest == 2718760 / 4);
    nb_bucket_caps(4000, 0, &first, &rest); /* a tiny model: one bucket, not many tiny all-reduces */
    CHECK(first == NB_FIRST_BUCKET_BYTES && rest == NB_MIN_BUCKET_BYTES);
    nb_bucket_caps((size_t)400 << 20, 0, &first, &rest);
    CHECK(rest == NB_DEFAULT_BUCKET_BYTES);
    nb_bucket_caps(2718760, 200, &first, &rest); /* the caller's cap bounds both */
    CHECK(first == 200 && rest == 200);
    nb_bucket_caps(2718760, (size_t)4 << 20, &first, &rest);
    CHECK(first == NB_FIRST_BUCKET_BYTES && rest == (size_t)4 << 20);
}

static void test_plan_first(void)
{
    size_t bytes[] = {40, 40, 100, 100, 100};
    nb_dtype dt[] = {NB_F32, NB_F32, NB_F32, NB_F32, NB_F32};
    int b[5];
    CHECK(nb_plan_buckets_first(5, bytes, dt, 50, 300, b) == 3);
    int want[] = {0, 1, 1, 1, 2};
    for (int i = 0; i < 5; i++) CHECK(b[i] == want[i]);
    CHECK(nb_plan_buckets_first(5, bytes, dt, 0, 300, b) == 2); /* first 0: the cap */
}

static nb_value mlp(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, nb_layer_fc(b, x, 512, "relu", NULL), 512, "relu", NULL);
    return nb_layer_fc(b, h, 10, NULL, NULL);
}

static void batch(nb_tensor **x, nb_tensor **y)
{
    REQUIRE_OK(nb_tensor_new(x, NB_F32, 2, (const int64_t[]){4, 784}));
    REQUIRE_OK(nb_tensor_new(y, NB_I64, 2, (const int64_t[]){4, 1}));
    float *xd = nb_tensor_data(*x);
    for (int i = 0; i < 4 * 784; i++) xd[i] = (float)((i * 37 % 101) / 101.0);
    int64_t *yd = nb_tensor_data(*y);
    for (int i = 0; i < 4; i++) yd[i] = i * 3 % 10;
}

/* The 2.7 MB MLP gets several buckets: the last layer (created last, its
 * gradients first) alone in the first, the first layer's weight in the
 * last; a step starts each once and reports what part was hidden. */
static void test_ddp_mlp(void)
{
    nb_builder *b;
    nb_tensor *x, *y;
    REQUIRE_OK(nb_builder_new_eager(&b));
    batch(&x, &y);
    nb_grad_mode_push(false);
    mlp(b, nb_eager_value(b, x));
    nb_grad_mode_pop();
    nb_eager_release_values(b);
    REQUIRE_OK(nb_builder_status(b));
    CHECK(nb_eager_param_count(b) == 6);
    nb_comm *c;
    REQUIRE_OK(nb_comm_init_single(&c));
    nb_ddp *d;
    REQUIRE_OK(nb_ddp_new(&d, c, b, 0));
    int nb = nb_ddp_bucket_count(d);
    CHECK(nb >= 3);
    CHECK(nb_ddp_bucket_of(d, 5) == 0 && nb_ddp_bucket_of(d, 4) == 0);
    CHECK(nb_ddp_bucket_of(d, 2) > 0 && nb_ddp_bucket_of(d, 0) == nb - 1);
    nb_value loss = nb_layer_softmax_cross_entropy(b, mlp(b, nb_eager_value(b, x)), nb_eager_value(b, y));
    REQUIRE_OK(nb_builder_status(b));
    CHECK_OK(nb_ddp_backward(d, nb_eager_tensor(loss)));
    nb_ddp_stats s;
    nb_ddp_stats_get(d, &s);
    CHECK(s.steps == 1 && s.allreduces == nb && s.n_buckets == nb);
    CHECK(s.hidden_fraction >= 0 && s.hidden_fraction <= 1 && s.optimizer_state_bytes == 0);
    nb_ddp_free(d);
    nb_comm_free(c);
    nb_eager_release_values(b);
    nb_builder_free(b);
    nb_tensor_release(x);
    nb_tensor_release(y);
}

/* The static pass cuts the same model as several c_allreduce_sum ops, the
 * first (in program order) within the first bucket's cap. */
static void test_static_mlp(void)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    nb_value x = nb_data(b, "x", NB_F32, 2, (const int64_t[]){-1, 784});
    nb_value y = nb_data(b, "y", NB_I64, 2, (const int64_t[]){-1, 1});
    nb_value cost = nb_layer_softmax_cross_entropy(b, mlp(b, x), y);
    REQUIRE_OK(nb_builder_status(b));
    nb_data_parallel_opts dp = {.nranks = 2};
    nb_optimizer opt = nb_sgd(0.1);
    opt.data_parallel = &dp;
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&opt, main_p, startup, nb_value_name(cost), NULL, &r));
    const nb_block *blk = nb_program_global_block(main_p);
    int n_ar = 0;
    for (int i = 0; i < blk->n_ops; i++) {
        const nb_op *op = blk->ops[i];
        if (strcmp(op->def->name, "c_allreduce_start")) continue;
        size_t bytes = 0;
        for (int k = 0; k < nb_op_n_inputs(op); k++) {
            nb_var_info v = nb_var_info_of(nb_block_find_var(blk, op->inputs[k]));
            int64_t n = 1;
            for (int dd = 0; dd < v.ndim; dd++) n *= v.shape[dd];
            bytes += (size_t)n * 4;
        }
        if (n_ar++ == 0) CHECK(bytes <= NB_FIRST_BUCKET_BYTES);
    }
    CHECK(n_ar >= 3);
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
}

int main(void)
{
    RUN(test_caps);
    RUN(test_plan_first);
    RUN(test_ddp_mlp);
    RUN(test_static_mlp);
    return test_report();
}
