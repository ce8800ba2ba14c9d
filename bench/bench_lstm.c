/* bench_lstm: time of one training step of a character-level LSTM (the
 * model of examples/char_rnn.c: embedding 65 -> 64, LSTM with hidden 128,
 * linear to 65, softmax cross-entropy, Adam with gradient clipping by global
 * norm) on sequences of 64 steps, batch 32: forward, backward and the
 * optimiser step, eagerly and as a static program. Prints one line per
 * case, as bench_train:
 *
 *     case lstm_eager median_ms 123.4 steps 5
 *
 * bench/run.sh lstm runs this beside bench_lstm_torch.py (nn.LSTM). */
#include <string.h>
#include "bench_util.h"

enum { VOCAB = 65, EMBED = 64, HIDDEN = 128, SEQ = 64, BATCH = 32 };

/* The mean cross-entropy of predicting targets [T, B] from ids [T, B]. */
static nb_value char_lstm_loss(nb_builder *b, nb_value ids, nb_value targets)
{
    nb_value x = nb_layer_embedding(b, ids, VOCAB, EMBED, -1, NULL);
    nb_value ys = nb_layer_lstm(b, x, NULL, HIDDEN, NULL, NULL);
    nb_value logits = nb_layer_fc(b, ys, VOCAB, NULL, &(nb_fc_opts){.in_num_col_dims = 2});
    nb_value flat = nb_reshape(b, logits, 2, (int64_t[]){-1, VOCAB});
    return nb_layer_softmax_cross_entropy(b, flat, nb_reshape(b, targets, 1, (int64_t[]){-1}));
}

static nb_optimizer optimizer(void)
{
    nb_optimizer opt = nb_adam(2e-3);
    opt.clip = NB_CLIP_GLOBAL_NORM;
    opt.clip_value = 5.0;
    return opt;
}

/* Fixed batches: ids and the next character, from a little pseudo-text. */
static void make_batch(nb_tensor **ids, nb_tensor **targets)
{
    bench_die_on(nb_tensor_new(ids, NB_I64, 2, (int64_t[]){SEQ, BATCH}), "tensor");
    bench_die_on(nb_tensor_new(targets, NB_I64, 2, (int64_t[]){SEQ, BATCH}), "tensor");
    for (int64_t t = 0; t < SEQ; t++)
        for (int64_t j = 0; j < BATCH; j++) {
            int64_t k = t * BATCH + j, pos = j * 997 + t;
            nb_tensor_set(*ids, k, (double)((pos * 31 + pos / 7) % VOCAB));
            nb_tensor_set(*targets, k, (double)(((pos + 1) * 31 + (pos + 1) / 7) % VOCAB));
        }
}

/* One eager step: the model run at once on the tape, backward, update. */
typedef struct eager_bench {
    nb_builder *b;
    nb_eager_optimizer *o;
    nb_tensor *ids, *targets;
} eager_bench;

static void eager_step(void *ctx)
{
    eager_bench *e = ctx;
    nb_builder *b = e->b;
    nb_value loss = char_lstm_loss(b, nb_eager_value(b, e->ids), nb_eager_value(b, e->targets));
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    nb_tensor *l = nb_eager_tensor(loss);
    bench_die_on(nb_backward(NB_TENSORS(l), NULL, 0), "backward");
    bench_die_on(nb_eager_optimizer_step(e->o, b), "optimizer step");
    nb_eager_zero_grad(b);
    nb_eager_release_values(b);
}

static double bench_eager(int steps, int reps)
{
    eager_bench e;
    make_batch(&e.ids, &e.targets);
    bench_die_on(nb_builder_new_eager(&e.b), "eager builder");
    nb_eager_set_seed(e.b, 1);
    nb_optimizer opt = optimizer();
    bench_die_on(nb_eager_optimizer_new(&e.o, &opt), "optimizer");
    double ms = bench_median_ms(eager_step, &e, 2, steps, reps);
    nb_eager_optimizer_free(e.o);
    nb_builder_free(e.b);
    nb_tensor_release(e.ids);
    nb_tensor_release(e.targets);
    return ms;
}

/* The static program: the LSTM is one recurrent op. */
static double bench_static(int steps, int reps)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    bench_die_on(nb_program_new(&main_p), "program");
    bench_die_on(nb_program_new(&startup), "program");
    nb_program_set_seed(startup, 1);
    bench_die_on(nb_builder_new_record(&b, main_p, startup), "builder");
    nb_value ids = nb_layer_data(b, "ids", NB_I64, 2, (int64_t[]){SEQ, BATCH});
    nb_value targets = nb_layer_data(b, "targets", NB_I64, 2, (int64_t[]){SEQ, BATCH});
    nb_value cost = char_lstm_loss(b, ids, targets);
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    nb_optimizer opt = optimizer();
    nb_backward_result r;
    bench_die_on(nb_minimize(&opt, main_p, startup, nb_value_name(cost), NULL, &r), "minimize");
    nb_tensor *in[2];
    make_batch(&in[0], &in[1]);
    bench_program bp;
    bench_program_init(&bp, main_p, startup, 2, (const char *[]){"ids", "targets"}, nb_value_name(cost), in);
    double ms = bench_median_ms(bench_program_step, &bp, 2, steps, reps);
    bench_program_free(&bp);
    nb_tensor_release(in[0]);
    nb_tensor_release(in[1]);
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
    return ms;
}

int main(int argc, char **argv)
{
    double scale = argc > 1 ? atof(argv[1]) : 1.0; /* fewer steps for a quick look */
    if (scale <= 0) scale = 1;
    int steps = (int)(5 * scale);
    if (steps < 1) steps = 1;
    printf("case lstm_eager median_ms %.4f steps %d\n", bench_eager(steps, 7), steps);
    fflush(stdout);
    printf("case lstm_static median_ms %.4f steps %d\n", bench_static(steps, 7), steps);
    return 0;
}
