/* What the C benchmarks beside PyTorch share: a clock, failing loudly, the
 * median time of a step, and a static program prepared to be run as one. */
#ifndef NABLA_BENCH_UTIL_H
#define NABLA_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "nabla/nabla.h"

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void bench_die_on(nb_status st, const char *what)
{
    if (!st) return;
    fprintf(stderr, "bench: %s: %s\n", what, nb_last_error());
    exit(1);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median milliseconds per step over `reps` timings of `steps` calls of
 * step(ctx), after `warmup` calls (buffers, caches, threads). */
static inline double bench_median_ms(void (*step)(void *ctx), void *ctx, int warmup, int steps, int reps)
{
    for (int i = 0; i < warmup; i++) step(ctx);
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) bench_die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "timing");
    for (int k = 0; k < reps; k++) {
        double t0 = bench_now();
        for (int s = 0; s < steps; s++) step(ctx);
        t[k] = (bench_now() - t0) * 1e3 / steps;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    double median = t[reps / 2];
    free(t);
    return median;
}

/* A training program with its startup run, prepared to run with feeds
 * in[0..n) and to fetch one var; a step is one run. */
typedef struct bench_program {
    nb_scope *scope;
    nb_executor *ex;
    nb_prepared *pp;
    nb_tensor *const *in;
} bench_program;

static inline void bench_program_init(bench_program *bp, nb_program *main_p, nb_program *startup, int n_feed,
                                      const char *const *feeds, const char *fetch, nb_tensor *const *in)
{
    bench_die_on(nb_scope_new(&bp->scope, NULL), "scope");
    bench_die_on(nb_executor_new(&bp->ex), "executor");
    bench_die_on(nb_executor_run(bp->ex, startup, bp->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL), "startup");
    bench_die_on(nb_prepare(&bp->pp, main_p, 0, NB_NAMES_N(n_feed, feeds), NB_NAMES_N(1, &fetch)), "prepare");
    bp->in = in;
}

static inline void bench_program_step(void *ctx)
{
    bench_program *bp = ctx;
    nb_tensor *out;
    bench_die_on(nb_prepared_run(bp->pp, bp->scope, bp->in, &out), "run");
    nb_tensor_release(out);
}

static inline void bench_program_free(bench_program *bp)
{
    nb_prepared_free(bp->pp);
    nb_executor_free(bp->ex);
    nb_scope_free(bp->scope);
}

/* The two MNIST models of the benchmarks: the 784-256-10 MLP and LeNet. */
static inline nb_value bench_mlp(nb_builder *b, nb_value x)
{
    return nb_layer_fc(b, nb_layer_fc(b, x, 256, "relu", NULL), 10, NULL, NULL);
}

static inline nb_value bench_lenet(nb_builder *b, nb_value x)
{
    nb_value img = nb_reshape(b, x, 4, (int64_t[]){-1, 1, 28, 28});
    nb_conv2d_opts c = {.act = "relu"};
    nb_value h = nb_layer_pool2d(b, nb_layer_conv2d(b, img, 20, 5, &c), "max", 2, &(nb_pool2d_opts){.stride = 2});
    h = nb_layer_pool2d(b, nb_layer_conv2d(b, h, 50, 5, &c), "max", 2, &(nb_pool2d_opts){.stride = 2});
    h = nb_layer_fc(b, nb_flatten(b, h, 1, -1), 500, "relu", NULL);
    return nb_layer_fc(b, h, 10, NULL, NULL);
}

/* 784-1024-1024-10 with ReLUs. */
static inline nb_value bench_mlp1024(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, nb_layer_fc(b, x, 1024, "relu", NULL), 1024, "relu", NULL);
    return nb_layer_fc(b, h, 10, NULL, NULL);
}

/* On 3x32x32 images (fed flat, 3072 wide): two 3x3 convolutions (32 and 64
 * channels, padding 1), each followed by batch norm and ReLU, a 2x2 max
 * pooling and a linear layer to 10 classes. */
static inline nb_value bench_convbn(nb_builder *b, nb_value x)
{
    nb_value h = nb_reshape(b, x, 4, (int64_t[]){-1, 3, 32, 32});
    nb_norm_opts bn = {.act = "relu"};
    h = nb_layer_batch_norm(b, nb_layer_conv2d(b, h, 32, 3, &(nb_conv2d_opts){.padding = 1}), &bn);
    h = nb_layer_batch_norm(b, nb_layer_conv2d(b, h, 64, 3, &(nb_conv2d_opts){.padding = 1}), &bn);
    h = nb_layer_pool2d(b, h, "max", 2, &(nb_pool2d_opts){.stride = 2});
    return nb_layer_fc(b, nb_flatten(b, h, 1, -1), 10, NULL, NULL);
}

/* The training program of `model` on batches of `features` wide rows
 * (feeds "images" float32 [B, features] and "label" int64 [B, 1]),
 * softmax cross-entropy minimised by `opt` (with `bo`, which may be NULL);
 * returns the loss var. The caller frees b, the programs and r. */
static inline const char *bench_classifier_program(nb_value (*model)(nb_builder *, nb_value), int64_t features,
                                                   const nb_optimizer *opt, const nb_backward_opts *bo,
                                                   nb_program **main_p, nb_program **startup, nb_builder **b,
                                                   nb_backward_result *r)
{
    bench_die_on(nb_program_new(main_p), "program");
    bench_die_on(nb_program_new(startup), "program");
    nb_program_set_seed(*startup, 1);
    bench_die_on(nb_builder_new_record(b, *main_p, *startup), "builder");
    nb_value x = nb_layer_data(*b, "images", NB_F32, 2, (int64_t[]){-1, features});
    nb_value l = nb_layer_data(*b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value cost = nb_layer_softmax_cross_entropy(*b, model(*b, x), l);
    bench_die_on(nb_builder_status(*b), nb_builder_error(*b));
    bench_die_on(nb_minimize(opt, *main_p, *startup, nb_value_name(cost), bo, r), "minimize");
    return nb_value_name(cost);
}

/* The same on MNIST-shaped batches (784 wide). */
static inline const char *bench_mnist_program(nb_value (*model)(nb_builder *, nb_value), const nb_optimizer *opt,
                                              const nb_backward_opts *bo, nb_program **main_p, nb_program **startup,
                                              nb_builder **b, nb_backward_result *r)
{
    return bench_classifier_program(model, 784, opt, bo, main_p, startup, b, r);
}

/* A batch of synthetic data, `features` wide; `shift` varies it (a rank). */
static inline void bench_classifier_batch(int64_t batch, int64_t features, int shift, nb_tensor **x, nb_tensor **l)
{
    bench_die_on(nb_tensor_new(x, NB_F32, 2, (int64_t[]){batch, features}), "tensor");
    bench_die_on(nb_tensor_new(l, NB_I64, 2, (int64_t[]){batch, 1}), "tensor");
    for (int64_t i = 0; i < batch * features; i++)
        nb_tensor_set(*x, i, (double)((i * 7919 + shift * 31) % 256) / 255.0);
    for (int64_t i = 0; i < batch; i++) nb_tensor_set(*l, i, (double)((i + shift) % 10));
}

static inline void bench_mnist_batch(int64_t batch, int shift, nb_tensor **x, nb_tensor **l)
{
    bench_classifier_batch(batch, 784, shift, x, l);
}

#endif
