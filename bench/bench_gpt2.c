/* bench_gpt2: one training step of GPT-2 (examples/gpt2_model.h) as llm.c's
 * train_gpt2.c times it: forward, loss, backward and an AdamW update (lr
 * 1e-4, betas 0.9 and 0.999, eps 1e-8, no weight decay, no clipping), at
 * batch B and sequence T (4 and 64), on one fixed batch of token ids.
 *
 *     bench_gpt2 init FILE.safetensors [MODEL]   the model's first weights (seed 1; MODEL a preset
 *                                                or L,H,C,T,V; default 124M), for both sides
 *     bench_gpt2 static|eager FILE [STEPS] [B] [T]
 *
 * A run loads FILE (so that PyTorch, bench/bench_gpt2_torch.py, starts from
 * the same weights), takes three steps and prints their losses, then times
 * STEPS more (default 3) and prints one line,
 *
 *     case gpt2_static losses 10.973681 11.002391 10.983654 median_ms 3600.1 min_ms 3590.2 max_ms 3620.0
 *          steps 3 gflop 191.2 rss_mb 3130.5
 *
 * gflop is gpt2_step_flops (6 N B T for the N parameters that multiply,
 * plus attention's 12 L B T^2 C) and rss_mb the process's peak resident
 * set (getrusage), the model, its gradients and AdamW's moments included.
 * bench/run.sh gpt2 runs it beside PyTorch. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "bench_util.h"
#include "gpt2_io.h"
#include "gpt2_model.h"

static nb_optimizer optimizer(void) { return nb_adamw(1e-4, 0.0); }

/* The fixed batch: B * T + 1 tokens spread over the vocabulary. */
static void batch(const gpt2_config *c, int64_t B, int64_t T, nb_tensor **ids, nb_tensor **targets)
{
    bench_die_on(nb_tensor_new(ids, NB_I64, 2, (int64_t[]){B, T}), "tensor");
    bench_die_on(nb_tensor_new(targets, NB_I64, 2, (int64_t[]){B, T}), "tensor");
    int64_t *x = nb_tensor_data(*ids), *y = nb_tensor_data(*targets);
    for (int64_t i = 0; i < B * T; i++) {
        x[i] = (i * 7919 + i / 3) % c->vocab;
        y[i] = ((i + 1) * 7919 + (i + 1) / 3) % c->vocab;
    }
}

typedef struct runner {
    nb_tensor *ids, *targets;
    const gpt2_config *c;
    /* static */
    nb_program *main, *startup;
    nb_backward_result grads;
    bench_program bp;
    /* eager */
    nb_builder *b;
    nb_eager_optimizer *o;
} runner;

static double static_step(runner *r)
{
    nb_tensor *out;
    bench_die_on(nb_prepared_run(r->bp.pp, r->bp.scope, r->bp.in, &out), "run");
    double loss = nb_tensor_get(out, 0);
    nb_tensor_release(out);
    return loss;
}

static double eager_step(runner *r)
{
    nb_builder *b = r->b;
    nb_value loss = gpt2_loss(b, r->c, nb_eager_value(b, r->ids), nb_eager_value(b, r->targets));
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    nb_tensor *l = nb_eager_tensor(loss);
    double v = nb_tensor_get(l, 0);
    bench_die_on(nb_backward(NB_TENSORS(l), NULL, 0), "backward");
    bench_die_on(nb_eager_optimizer_step(r->o, b), "optimizer step");
    nb_eager_zero_grad(b);
    nb_eager_release_values(b);
    return v;
}

/* The training program over the fixed batch; the parameters are w's when
 * given, else the startup program's draw (seed 1). */
static void static_open(runner *r, const gpt2_weights *w)
{
    nb_builder *b;
    bench_die_on(nb_program_new(&r->main), "program");
    bench_die_on(nb_program_new(&r->startup), "program");
    nb_program_set_seed(r->startup, 1);
    bench_die_on(nb_builder_new_record(&b, r->main, r->startup), "builder");
    const int64_t *s = r->ids->shape;
    nb_value loss =
        gpt2_loss(b, r->c, nb_layer_data(b, "ids", NB_I64, 2, s), nb_layer_data(b, "targets", NB_I64, 2, s));
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    nb_optimizer opt = optimizer();
    bench_die_on(nb_minimize(&opt, r->main, r->startup, nb_value_name(loss), NULL, &r->grads), "minimize");
    const char *feeds[] = {"ids", "targets"};
    static nb_tensor *in[2];
    in[0] = r->ids;
    in[1] = r->targets;
    bench_program_init(&r->bp, r->main, r->startup, 2, feeds, nb_value_name(loss), in);
    for (int i = 0; w && i < w->n; i++)
        bench_die_on(nb_scope_set(r->bp.scope, gpt2_param_at(r->c, i).name, w->t[i]), "weights");
    nb_builder_free(b);
}

static void static_close(runner *r)
{
    bench_program_free(&r->bp);
    nb_backward_result_free(&r->grads);
    nb_program_free(r->startup);
    nb_program_free(r->main);
}

/* `MODEL`: a preset name or L,H,C,T,V. */
static gpt2_config parse_model(const char *s)
{
    gpt2_config c;
    long long v[5];
    if (gpt2_preset(s, &c)) return c;
    if (sscanf(s, "%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5) {
        fprintf(stderr, "bench_gpt2: model '%s': expected 124M, 350M, 774M, 1558M or L,H,C,T,V\n", s);
        exit(2);
    }
    c = (gpt2_config){.layers = v[0], .heads = v[1], .embed = v[2], .block = v[3], .vocab = v[4]};
    c.padded_vocab = gpt2_pad_vocab(c.vocab);
    bench_die_on(gpt2_config_check(&c, "bench_gpt2: model"), "model");
    return c;
}

/* Writes the startup program's draw of the model's weights to `path`. */
static int init(const char *path, const char *model)
{
    const gpt2_config c = parse_model(model);
    runner r = {.c = &c};
    batch(&c, 1, 1, &r.ids, &r.targets);
    static_open(&r, NULL);
    gpt2_weights w;
    bench_die_on(gpt2_weights_alloc(&w, &c), "weights");
    for (int i = 0; i < w.n; i++) w.t[i] = nb_tensor_retain(nb_scope_find(r.bp.scope, gpt2_param_at(&c, i).name));
    bench_die_on(gpt2_weights_save(&w, path), "save");
    gpt2_weights_free(&w);
    static_close(&r);
    nb_tensor_release(r.ids);
    nb_tensor_release(r.targets);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_gpt2 init FILE [MODEL] | bench_gpt2 static|eager FILE [STEPS] [B] [T]\n");
        return 2;
    }
    const char *mode = argv[1], *path = argv[2];
    if (!strcmp(mode, "init")) return init(path, argc > 3 ? argv[3] : "124M");
    const bool eager = !strcmp(mode, "eager");
    if (!eager && strcmp(mode, "static")) {
        fprintf(stderr, "bench_gpt2: mode '%s': expected init, static or eager\n", mode);
        return 2;
    }
    const int steps = argc > 3 ? atoi(argv[3]) : 3;
    const int64_t B = argc > 4 ? atoll(argv[4]) : 4, T = argc > 5 ? atoll(argv[5]) : 64;
    gpt2_weights w;
    bench_die_on(gpt2_weights_load(&w, path, 0), "load");
    const gpt2_config c = w.config;
    if (steps < 1 || B < 1 || T < 1 || T > c.block) {
        fprintf(stderr, "bench_gpt2: need STEPS >= 1, B >= 1 and 1 <= T <= %lld\n", (long long)c.block);
        return 2;
    }
    runner r = {.c = &c};
    batch(&c, B, T, &r.ids, &r.targets);
    if (eager) {
        bench_die_on(nb_builder_new_eager(&r.b), "eager builder");
        for (int i = 0; i < w.n; i++)
            bench_die_on(nb_eager_add_param(r.b, gpt2_param_at(&c, i).name, w.t[i]), "weights");
        nb_optimizer opt = optimizer();
        bench_die_on(nb_eager_optimizer_new(&r.o, &opt), "optimizer");
    } else {
        static_open(&r, &w);
    }
    gpt2_weights_free(&w);
    double losses[3], *ms = calloc((size_t)steps, sizeof *ms);
    if (!ms) bench_die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "timing");
    for (int i = 0; i < 3; i++) losses[i] = eager ? eager_step(&r) : static_step(&r);
    for (int i = 0; i < steps; i++) {
        double t0 = bench_now();
        if (eager) eager_step(&r);
        else static_step(&r);
        ms[i] = (bench_now() - t0) * 1e3;
    }
    qsort(ms, (size_t)steps, sizeof *ms, bench_cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf(
        "case gpt2_%s losses %.6f %.6f %.6f median_ms %.1f min_ms %.1f max_ms %.1f steps %d gflop %.2f rss_mb %.1f\n",
        mode, losses[0], losses[1], losses[2], ms[steps / 2], ms[0], ms[steps - 1], steps,
        gpt2_step_flops(&c, B, T) / 1e9, (double)ru.ru_maxrss / 1024.0);
    free(ms);
    if (eager) {
        nb_eager_optimizer_free(r.o);
        nb_builder_free(r.b);
    } else {
        static_close(&r);
    }
    nb_tensor_release(r.ids);
    nb_tensor_release(r.targets);
    return 0;
}
