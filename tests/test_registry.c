/* The registry holds every op the core promises, each well formed, and every
 * differentiable one of them has a VJP rule. */
#include "test.h"

/* The ops of the core (issue 2), by family. */
static const char *const core_ops[] = {
    /* elementwise */
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "abs",
    "sign",
    "square",
    "sqrt",
    "rsqrt",
    "exp",
    "log",
    "log1p",
    "pow",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "relu",
    "leaky_relu",
    "elu",
    "gelu",
    "softplus",
    "silu",
    "maximum",
    "minimum",
    "clip",
    "where",
    "scale",
    "cast",
    /* comparison and logic */
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_not",
    /* reductions */
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "logsumexp",
    "argmax",
    "argmin",
    "sum",
    /* linear algebra */
    "matmul",
    "fc",
    /* shape */
    "reshape",
    "flatten",
    "transpose",
    "squeeze",
    "unsqueeze",
    "expand",
    "concat",
    "split",
    "stack",
    "slice",
    "pad",
    "gather",
    "index_select",
    "scatter_add",
    "one_hot",
    /* neural networks */
    "softmax",
    "log_softmax",
    "softmax_with_cross_entropy",
    "cross_entropy",
    "mse_loss",
    "bce_with_logits",
    "conv2d",
    "pool2d",
    "batch_norm",
    "layer_norm",
    "dropout",
    "embedding",
    "accuracy",
    /* creation and state */
    "fill_constant",
    "fill_zeros_like",
    "ones_like",
    "assign",
    "uniform_random",
    "gaussian_random",
    "increment",
};

static void test_every_core_op_is_registered(void)
{
    for (size_t i = 0; i < sizeof core_ops / sizeof *core_ops; i++) {
        if (!nb_op_find(core_ops[i])) {
            fprintf(stderr, "  missing op: %s\n", core_ops[i]);
            test_failures_in_current++;
        }
    }
}

static void test_definitions_are_well_formed(void)
{
    CHECK(nb_op_count() >= (int)(sizeof core_ops / sizeof *core_ops));
    for (int i = 0; i < nb_op_count(); i++) {
        const nb_op_def *d = nb_op_at(i);
        /* Every op runs on the CPU (a composite through the ops it expands
         * into, with no kernel or inference of its own), and a parameter
         * struct comes with the function that fills it. */
        bool runs = d->expand ? !d->infer && !nb_kernel_at(d->name, NB_DEVICE_CPU, 0)
                              : d->infer && nb_kernel_at(d->name, NB_DEVICE_CPU, 0);
        bool ok = d->name && runs && nb_op_num_outputs(d) > 0;
        ok &= !d->params_size == !d->params;
        for (int a = 0; a < NB_MAX_ATTRS && d->attrs[a].name; a++)
            ok &= d->attrs[a].required || d->attrs[a].def.type == d->attrs[a].type;
        /* A gradient may only read forward values of slots that exist. */
        ok &= (d->grad_uses_inputs >> nb_op_num_inputs(d)) == 0;
        ok &= (d->grad_uses_outputs >> nb_op_num_outputs(d)) == 0;
        if (!ok) {
            fprintf(stderr, "  malformed op definition: %s\n", d->name);
            test_failures_in_current++;
        }
        if (i > 0) CHECK(strcmp(nb_op_at(i - 1)->name, d->name) < 0);
    }
}

static void test_differentiable_core_ops_have_rules(void)
{
    for (size_t i = 0; i < sizeof core_ops / sizeof *core_ops; i++) {
        const nb_op_def *d = nb_op_find(core_ops[i]);
        if (d && !(d->flags & NB_OP_NOT_DIFFERENTIABLE) && !d->vjp) {
            fprintf(stderr, "  differentiable op without a VJP rule: %s\n", d->name);
            test_failures_in_current++;
        }
    }
}

/* nb_op_find remembers names by their address: a name in a buffer the
 * caller rewrites finds the op the buffer names now, and the def's own name
 * finds the def. */
static void test_find_follows_a_reused_buffer(void)
{
    char name[32];
    const nb_op_def *mul = nb_op_find("mul"), *add = nb_op_find("add");
    CHECK(mul && add && mul != add);
    if (!mul || !add) return;
    CHECK(nb_op_find(mul->name) == mul);
    for (int i = 0; i < 3; i++) {
        strcpy(name, "mul");
        CHECK(nb_op_find(name) == mul);
        strcpy(name, "add");
        CHECK(nb_op_find(name) == add);
        strcpy(name, "no_such_op");
        CHECK(nb_op_find(name) == NULL);
    }
    CHECK(nb_op_find(mul->name) == mul);
}

int main(void)
{
    RUN(test_every_core_op_is_registered);
    RUN(test_definitions_are_well_formed);
    RUN(test_differentiable_core_ops_have_rules);
    RUN(test_find_follows_a_reused_buffer);
    return test_report();
}
