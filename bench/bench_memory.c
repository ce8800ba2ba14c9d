/* bench_memory: the memory of one training step (forward, backward, SGD
 * update), one case per process so that the resident set is the case's own:
 *
 *     bench_memory CASE [--recompute]
 *     case mlp1024 rss_kb 10240 nabla_kb 9000 ms 12.3 act_kb 2048
 *
 * rss_kb: how far the resident set rose above what it was once the model,
 * its parameters and the batch existed: the peak of the second and third
 * steps (VmHWM, reset through /proc/self/clear_refs after the first step,
 * which allocates what lasts: gradients, buffers, optimiser state); nabla_kb: the
 * executor's own count, the peak of its temporaries (nb_prepared_memory);
 * ms: the median time of a step; act_kb: the activations the forward part
 * leaves for the backward part (nb_memory_report.activation_bytes). --recompute builds the program with
 * sqrt(n) recomputation segments (nb_backward_opts.recompute_segments).
 * bench_memory_torch.py measures PyTorch the same way; bench/run.sh memory
 * runs both. Cases: mlp1024 (784-1024-1024-10, batch 128), mlp12 (12
 * layers 784 wide, batch 256), lstm (char_rnn's: embedding 65 -> 64, LSTM
 * 128, 64 steps, batch 32), lenet (batch 64). */
#include <string.h>
#include "bench_util.h"

enum { VOCAB = 65, EMBED = 64, HIDDEN = 128, SEQ = 64 };

/* A field of /proc/self/status, in kB. */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f || fputs("5", f) < 0) bench_die_on(nb_error(NB_ERR_IO, "cannot reset VmHWM"), "/proc/self/clear_refs");
    fclose(f);
}

static nb_value mlp12(nb_builder *b, nb_value x)
{
    for (int i = 0; i < 12; i++) x = nb_layer_fc(b, x, 784, "relu", NULL);
    return nb_layer_fc(b, x, 10, NULL, NULL);
}

/* char_rnn's model as bench_lstm builds it, and a batch of pseudo-text:
 * feeds "ids" and "next", int64 [SEQ, batch]. */
static const char *char_lstm_program(const nb_optimizer *opt, const nb_backward_opts *bo, nb_program **main_p,
                                     nb_program **startup, nb_builder **b, nb_backward_result *r, int64_t batch,
                                     nb_tensor **in)
{
    bench_die_on(nb_program_new(main_p), "program");
    bench_die_on(nb_program_new(startup), "program");
    nb_program_set_seed(*startup, 1);
    bench_die_on(nb_builder_new_record(b, *main_p, *startup), "builder");
    nb_value ids = nb_layer_data(*b, "ids", NB_I64, 2, (int64_t[]){SEQ, -1});
    nb_value next = nb_layer_data(*b, "next", NB_I64, 2, (int64_t[]){SEQ, -1});
    nb_value ys = nb_layer_lstm(*b, nb_layer_embedding(*b, ids, VOCAB, EMBED, -1, NULL), NULL, HIDDEN, NULL, NULL);
    nb_value logits = nb_layer_fc(*b, ys, VOCAB, NULL, &(nb_fc_opts){.in_num_col_dims = 2});
    nb_value cost = nb_layer_softmax_cross_entropy(*b, nb_reshape(*b, logits, 2, (int64_t[]){-1, VOCAB}),
                                                   nb_reshape(*b, next, 1, (int64_t[]){-1}));
    bench_die_on(nb_builder_status(*b), nb_builder_error(*b));
    bench_die_on(nb_minimize(opt, *main_p, *startup, nb_value_name(cost), bo, r), "minimize");
    bench_die_on(nb_tensor_new(&in[0], NB_I64, 2, (int64_t[]){SEQ, batch}), "tensor");
    bench_die_on(nb_tensor_new(&in[1], NB_I64, 2, (int64_t[]){SEQ, batch}), "tensor");
    for (int64_t i = 0; i < SEQ * batch; i++) {
        nb_tensor_set(in[0], i, (double)((i * 31 + i / 7) % VOCAB));
        nb_tensor_set(in[1], i, (double)(((i + 1) * 31 + (i + 1) / 7) % VOCAB));
    }
    return nb_value_name(cost);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "mlp1024";
    bool recompute = argc > 2 && !strcmp(argv[2], "--recompute");
    bool lstm = !strcmp(which, "lstm");
    int64_t batch = !strcmp(which, "mlp1024") ? 128 : !strcmp(which, "mlp12") ? 256 : !strcmp(which, "lenet") ? 64 : 32;
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_tensor *in[2];
    nb_optimizer opt = nb_sgd(0.01);
    nb_backward_result r;
    nb_backward_opts bo = {.recompute_segments = recompute ? NB_RECOMPUTE_SQRT : 0};
    const char *loss, *feeds[2] = {"images", "label"};
    if (lstm) {
        feeds[0] = "ids", feeds[1] = "next";
        loss = char_lstm_program(&opt, &bo, &main_p, &startup, &b, &r, batch, in);
    } else {
        loss = bench_mnist_program(!strcmp(which, "lenet")       ? bench_lenet
                                       : !strcmp(which, "mlp12") ? mlp12
                                                                 : bench_mlp1024,
                                   &opt, &bo, &main_p, &startup, &b, &r);
        bench_mnist_batch(batch, 0, &in[0], &in[1]);
    }
    bench_program bp;
    bench_program_init(&bp, main_p, startup, 2, feeds, loss, in);

    /* The steady state: the first step makes what lasts (gradients, buffers),
     * then the peak of the next two over where the run began. */
    long rss0 = status_kb("VmRSS");
    bench_program_step(&bp);
    reset_peak();
    for (int i = 0; i < 2; i++) bench_program_step(&bp);
    long peak = status_kb("VmHWM") - rss0;
    nb_memory_report m;
    bench_die_on(nb_prepared_memory(bp.pp, bp.scope, &m), "memory report");
    int steps = !strcmp(which, "lenet") || lstm ? 3 : !strcmp(which, "mlp12") ? 5 : 10;
    double ms = bench_median_ms(bench_program_step, &bp, 1, steps, 5);
    printf("case %s%s rss_kb %ld nabla_kb %zu ms %.3f act_kb %zu\n", which, recompute ? "_recompute" : "", peak,
           m.peak_bytes / 1024, ms, m.activation_bytes / 1024);
    bench_program_free(&bp);
    nb_tensor_release(in[0]);
    nb_tensor_release(in[1]);
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
    return 0;
}
