/* bench_train: time of one training step (forward, backward, SGD update) of
 * the MNIST MLP (784-256-10) at several batch sizes and of the LeNet-like CNN
 * at batch 64, in the static-program executor. Prints one line per case:
 *
 *     case mlp_b64 median_ms 0.412 steps 200
 *
 * bench/run.sh runs this beside bench_torch.py and prints the ratios. */
#include "bench_util.h"

typedef nb_value (*model_fn)(nb_builder *b, nb_value x);

/* Median milliseconds per step over `reps` timings of `steps` steps. */
static double bench_case(model_fn model, int64_t batch, int steps, int reps)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    bench_die_on(nb_program_new(&main_p), "program");
    bench_die_on(nb_program_new(&startup), "program");
    nb_program_set_seed(startup, 1);
    bench_die_on(nb_builder_new_record(&b, main_p, startup), "builder");
    nb_value x = nb_layer_data(b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value l = nb_layer_data(b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value cost = nb_layer_softmax_cross_entropy(b, model(b, x), l);
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    nb_optimizer opt = nb_sgd(0.01);
    nb_backward_result r;
    bench_die_on(nb_minimize(&opt, main_p, startup, nb_value_name(cost), NULL, &r), "minimize");

    nb_tensor *xt, *lt;
    bench_die_on(nb_tensor_new(&xt, NB_F32, 2, (int64_t[]){batch, 784}), "tensor");
    bench_die_on(nb_tensor_new(&lt, NB_I64, 2, (int64_t[]){batch, 1}), "tensor");
    for (int64_t i = 0; i < batch * 784; i++) nb_tensor_set(xt, i, (double)((i * 7919) % 256) / 255.0);
    for (int64_t i = 0; i < batch; i++) nb_tensor_set(lt, i, (double)(i % 10));
    nb_tensor *in[2] = {xt, lt};
    bench_program bp;
    bench_program_init(&bp, main_p, startup, 2, (const char *[]){"images", "label"}, nb_value_name(cost), in);
    double median = bench_median_ms(bench_program_step, &bp, 3, steps, reps);
    bench_program_free(&bp);
    nb_tensor_release(xt);
    nb_tensor_release(lt);
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
    return median;
}

int main(int argc, char **argv)
{
    double scale = argc > 1 ? atof(argv[1]) : 1.0; /* fewer steps for a quick look */
    if (scale <= 0) scale = 1;
    static const struct {
        const char *name;
        model_fn model;
        int64_t batch;
        int steps;
    } cases[] = {
        {"mlp_b1", bench_mlp, 1, 400}, {"mlp_b16", bench_mlp, 16, 200}, {"mlp_b64", bench_mlp, 64, 100},
        {"mlp_b256", bench_mlp, 256, 40}, {"lenet_b64", bench_lenet, 64, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int steps = (int)(cases[i].steps * scale);
        if (steps < 1) steps = 1;
        double ms = bench_case(cases[i].model, cases[i].batch, steps, 7);
        printf("case %s median_ms %.4f steps %d\n", cases[i].name, ms, steps);
        fflush(stdout);
    }
    return 0;
}
