/* bench_transformer: one training step (forward, backward, AdamW update) of
 *
 *   block  a pre-norm transformer block (nb_layer_transformer_block): batch
 *          16, sequence 64, width 128, 4 heads, GELU MLP 512, loss mean(y^2)
 *          (PyTorch: nn.TransformerEncoderLayer, norm_first, batch_first)
 *   gpt    char_gpt's default model (examples/char_gpt_model.h) on a batch of
 *          token windows, softmax cross-entropy over every position
 *
 * each as a static program and on the eager tape. Prints one line per case:
 *
 *     case block_static median_ms 12.3 steps 5 gflop 1.23
 *
 * where gflop counts the step's multiply-adds twice (the dense products and
 * attention's two, forward and backward). bench/run.sh transformer runs it
 * beside bench_transformer_torch.py.
 *
 *     bench_transformer [block|gpt] [SCALE] [static|eager]   (default: both) */
#include <string.h>
#include "bench_util.h"
#include "../examples/char_gpt_model.h"

enum { B = 16, T = 64, E = 128, H = 4, M = 512 };

static nb_optimizer optimizer(void) { return nb_adamw(1e-3, 0.01); }

/* ---- the block ------------------------------------------------------------------ */

static nb_value block_loss(nb_builder *b, nb_value x)
{
    nb_value y = nb_layer_transformer_block(b, x, H, &(nb_transformer_block_opts){.mlp = M});
    return nb_reduce_mean(b, nb_square(b, y), 0, NULL, false);
}

/* Forward and backward multiply-adds: three times the forward's. */
static double block_gflop(void)
{
    const double tokens = (double)B * T;
    return 2 * 3 * tokens * (4.0 * E * E + 2.0 * E * M + 2.0 * T * E) / 1e9;
}

static void fill_input(nb_tensor **x)
{
    bench_die_on(nb_tensor_new(x, NB_F32, 3, (int64_t[]){B, T, E}), "tensor");
    for (int64_t i = 0; i < B * T * E; i++) nb_tensor_set(*x, i, (double)((i * 7919) % 1000) / 500.0 - 1.0);
}

/* ---- the GPT -------------------------------------------------------------------- */

static double gpt_gflop(const gpt_config *c)
{
    const double tokens = (double)c->batch * c->block, e = (double)c->embed;
    const double per_layer = 4 * e * e + 2 * e * 4 * e + 2.0 * c->block * e;
    return 2 * 3 * tokens * (c->layers * per_layer + e * c->vocab) / 1e9;
}

static void gpt_batch(const gpt_config *c, nb_tensor **ids, nb_tensor **targets)
{
    bench_die_on(nb_tensor_new(ids, NB_I64, 2, (int64_t[]){c->batch, c->block}), "tensor");
    bench_die_on(nb_tensor_new(targets, NB_I64, 2, (int64_t[]){c->batch, c->block}), "tensor");
    for (int64_t i = 0; i < c->batch * c->block; i++) {
        nb_tensor_set(*ids, i, (double)((i * 31 + i / 7) % c->vocab));
        nb_tensor_set(*targets, i, (double)(((i + 1) * 31 + (i + 1) / 7) % c->vocab));
    }
}

/* ---- steps ---------------------------------------------------------------------- */

typedef struct eager_bench {
    nb_builder *b;
    nb_eager_optimizer *o;
    nb_tensor *in[2];
    const gpt_config *gpt; /* NULL: the block */
} eager_bench;

static void eager_step(void *ctx)
{
    eager_bench *e = ctx;
    nb_builder *b = e->b;
    nb_value loss = e->gpt ? gpt_loss(b, e->gpt, nb_eager_value(b, e->in[0]), nb_eager_value(b, e->in[1]))
                           : block_loss(b, nb_eager_value(b, e->in[0]));
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    nb_tensor *l = nb_eager_tensor(loss);
    bench_die_on(nb_backward(NB_TENSORS(l), NULL, 0), "backward");
    bench_die_on(nb_eager_optimizer_step(e->o, b), "optimizer step");
    nb_eager_zero_grad(b);
    nb_eager_release_values(b);
}

static double bench_eager(const gpt_config *gpt, int steps, int reps)
{
    eager_bench e = {.gpt = gpt};
    if (gpt) gpt_batch(gpt, &e.in[0], &e.in[1]);
    else fill_input(&e.in[0]);
    bench_die_on(nb_builder_new_eager(&e.b), "eager builder");
    nb_eager_set_seed(e.b, 1);
    nb_optimizer opt = optimizer();
    bench_die_on(nb_eager_optimizer_new(&e.o, &opt), "optimizer");
    double ms = bench_median_ms(eager_step, &e, 2, steps, reps);
    nb_eager_optimizer_free(e.o);
    nb_builder_free(e.b);
    nb_tensor_release(e.in[0]);
    nb_tensor_release(e.in[1]);
    return ms;
}

static double bench_static(const gpt_config *gpt, int steps, int reps)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    bench_die_on(nb_program_new(&main_p), "program");
    bench_die_on(nb_program_new(&startup), "program");
    nb_program_set_seed(startup, 1);
    bench_die_on(nb_builder_new_record(&b, main_p, startup), "builder");
    nb_tensor *in[2] = {NULL, NULL};
    nb_value cost;
    const char *feeds[2] = {"x", "targets"};
    int n_feed = 1;
    if (gpt) {
        feeds[0] = "ids";
        n_feed = 2;
        nb_value ids = nb_layer_data(b, "ids", NB_I64, 2, (int64_t[]){gpt->batch, gpt->block});
        nb_value targets = nb_layer_data(b, "targets", NB_I64, 2, (int64_t[]){gpt->batch, gpt->block});
        cost = gpt_loss(b, gpt, ids, targets);
        gpt_batch(gpt, &in[0], &in[1]);
    } else {
        cost = block_loss(b, nb_layer_data(b, "x", NB_F32, 3, (int64_t[]){B, T, E}));
        fill_input(&in[0]);
    }
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    nb_optimizer opt = optimizer();
    nb_backward_result r;
    bench_die_on(nb_minimize(&opt, main_p, startup, nb_value_name(cost), NULL, &r), "minimize");
    bench_program bp;
    bench_program_init(&bp, main_p, startup, n_feed, feeds, nb_value_name(cost), in);
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
    const char *which = argc > 1 ? argv[1] : "block";
    double scale = argc > 2 ? atof(argv[2]) : 1.0;
    if (scale <= 0) scale = 1;
    int steps = (int)(5 * scale);
    if (steps < 1) steps = 1;
    const char *mode = argc > 3 ? argv[3] : "";
    const bool is_gpt = !strcmp(which, "gpt");
    if ((!is_gpt && strcmp(which, "block")) || (*mode && strcmp(mode, "static") && strcmp(mode, "eager"))) {
        fprintf(stderr, "usage: bench_transformer [block|gpt] [SCALE] [static|eager]\n");
        return 2;
    }
    const gpt_config c = gpt_default_config();
    const gpt_config *gpt = is_gpt ? &c : NULL;
    const double gflop = is_gpt ? gpt_gflop(&c) : block_gflop();
    if (strcmp(mode, "eager"))
        printf("case %s_static median_ms %.4f steps %d gflop %.4f\n", which, bench_static(gpt, steps, 7), steps, gflop);
    fflush(stdout);
    if (strcmp(mode, "static"))
        printf("case %s_eager median_ms %.4f steps %d gflop %.4f\n", which, bench_eager(gpt, steps, 7), steps, gflop);
    return 0;
}
