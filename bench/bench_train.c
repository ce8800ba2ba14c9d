/* bench_train: time of one training step (forward, backward, SGD update) of
 * the MNIST MLP (784-256-10) at several batch sizes, of the LeNet-like CNN
 * at batch 64, of a 784-1024-1024-10 MLP at batch 128 and of a small conv
 * net with batch norm on 3x32x32 images at batch 64 (bench_util.h), in the
 * static-program executor. Prints one line per case:
 *
 *     case mlp_b64 median_ms 0.412 steps 200 gflop 0.0781
 *
 * gflop is the step's multiply-adds, times two, of its matrix products and
 * convolutions: the forward pass, the weight gradients, and the input
 * gradients of every layer but the first (whose input needs none).
 *
 * bench/run.sh runs this beside bench_torch.py and prints the ratios. */
#include <string.h>
#include "bench_util.h"

typedef nb_value (*model_fn)(nb_builder *b, nb_value x);

/* Median milliseconds per step over `reps` timings of `steps` steps. */
static double bench_case(model_fn model, int64_t features, int64_t batch, int steps, int reps)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_optimizer opt = nb_sgd(0.01);
    nb_backward_result r;
    const char *loss = bench_classifier_program(model, features, &opt, NULL, &main_p, &startup, &b, &r);
    nb_tensor *xt, *lt;
    bench_classifier_batch(batch, features, 0, &xt, &lt);
    nb_tensor *in[2] = {xt, lt};
    bench_program bp;
    bench_program_init(&bp, main_p, startup, 2, (const char *[]){"images", "label"}, loss, in);
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

/* A layer's multiply-adds per example: a linear layer's in * out, a
 * convolution's cout * ho * wo * cin * k * k. */
static double step_gflop(const double *macs, int n_layers, int64_t batch)
{
    double f = 0;
    for (int i = 0; i < n_layers; i++) f += (i == 0 ? 2 : 3) * macs[i]; /* forward, dW, dX */
    return 2 * f * (double)batch * 1e-9;
}

static const double MLP_MACS[] = {784 * 256, 256 * 10};
static const double MLP1024_MACS[] = {784 * 1024, 1024 * 1024, 1024 * 10};
static const double LENET_MACS[] = {20.0 * 24 * 24 * 1 * 25, 50.0 * 8 * 8 * 20 * 25, 800 * 500, 500 * 10};
static const double CONVBN_MACS[] = {32.0 * 32 * 32 * 3 * 9, 64.0 * 32 * 32 * 32 * 9, 64 * 16 * 16 * 10};
#define LAYERS(m) m, (int)(sizeof m / sizeof *m)

int main(int argc, char **argv)
{
    double scale = argc > 1 ? atof(argv[1]) : 1.0; /* fewer steps for a quick look */
    if (scale <= 0) scale = 1;
    const char *only = argc > 2 ? argv[2] : NULL; /* one case, by name */
    static const struct {
        const char *name;
        model_fn model;
        int64_t features, batch;
        int steps;
        const double *macs;
        int n_layers;
    } cases[] = {
        {"mlp_b1", bench_mlp, 784, 1, 400, LAYERS(MLP_MACS)},
        {"mlp_b16", bench_mlp, 784, 16, 200, LAYERS(MLP_MACS)},
        {"mlp_b64", bench_mlp, 784, 64, 100, LAYERS(MLP_MACS)},
        {"mlp_b256", bench_mlp, 784, 256, 40, LAYERS(MLP_MACS)},
        {"lenet_b64", bench_lenet, 784, 64, 10, LAYERS(LENET_MACS)},
        {"mlp1024_b128", bench_mlp1024, 784, 128, 20, LAYERS(MLP1024_MACS)},
        {"convbn_b64", bench_convbn, 3072, 64, 5, LAYERS(CONVBN_MACS)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (only && strcmp(only, cases[i].name)) continue;
        int steps = (int)(cases[i].steps * scale);
        if (steps < 1) steps = 1;
        double ms = bench_case(cases[i].model, cases[i].features, cases[i].batch, steps, 7);
        printf("case %s median_ms %.4f steps %d gflop %.4f\n", cases[i].name, ms, steps,
               step_gflop(cases[i].macs, cases[i].n_layers, cases[i].batch));
        fflush(stdout);
    }
    return 0;
}
