/* per_example_grads: DP-SGD on MNIST (Abadi et al. 2016), which needs each
 * example's gradient: a 784-256-10 tanh MLP whose loss is written for one
 * example, nb_grad of it vmapped over the batch (nb_vmap: one batched pass,
 * no loop over the examples), each example's gradient clipped to norm
 * --clip, Gaussian noise of deviation --noise * --clip added to their sum,
 * the average taken as the step. It prints the test accuracy after each
 * epoch, and the time per step beside that of a plain SGD step (nb_grad of
 * the batch's mean loss) on the same batches. Ends with
 * 'test accuracy: 0.XXXX'. */
#define EXAMPLE_NAME "per_example_grads"
#include <math.h>
#include <string.h>
#include "example_cli.h"

#define N_PARAMS 4 /* W1 [784, 256], b1 [256], W2 [256, 10], b2 [10] */

typedef struct args {
    const char *data;
    int epochs, batch, steps;
    double lr, clip, noise;
    uint64_t seed;
} args;

/* logits of x [N, 784]: tanh(x W1 + b1) W2 + b2. */
static nb_value logits(nb_builder *b, const nb_value *p, nb_value x)
{
    nb_value h = nb_tanh(b, nb_add(b, nb_matmul(b, x, p[0], 0), p[1]));
    return nb_add(b, nb_matmul(b, h, p[2], 0), p[3]);
}

/* One example's loss: in = W1, b1, W2, b2, x [784], label [1]. */
static nb_status example_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value x = nb_unsqueeze(b, in[4], 1, (const int64_t[]){0}), label = nb_unsqueeze(b, in[5], 1, (const int64_t[]){0});
    out[0] = nb_reduce_sum(b, nb_softmax_with_cross_entropy(b, logits(b, in, x), label, NULL), 0, NULL, false);
    return nb_builder_status(b);
}

/* The batch's mean loss: x [N, 784], label [N, 1] (the plain step's). */
static nb_status batch_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_reduce_mean(b, nb_softmax_with_cross_entropy(b, logits(b, in, in[4]), in[5], NULL), 0, NULL, false);
    return nb_builder_status(b);
}

/* The four parameter gradients of one example's loss (vmapped below). */
static nb_status example_grads(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_function loss = {example_loss, 6, 1, ctx};
    nb_tensor *p[6], *g[N_PARAMS] = {0};
    for (int i = 0; i < 6; i++) p[i] = nb_eager_tensor(in[i]);
    nb_status st = nb_grad(&loss, p, &(nb_grad_opts){.n_argnums = N_PARAMS, .argnums = (int[]){0, 1, 2, 3}}, g, NULL);
    for (int k = 0; k < N_PARAMS; k++) {
        out[k] = st ? NB_NONE : nb_eager_value(b, g[k]);
        nb_tensor_release(g[k]);
    }
    return st ? st : nb_builder_status(b);
}

static float *data_of(nb_tensor *t) { return nb_tensor_data(t); }

/* The DP-SGD step from per-example gradients g[k] [B, ...]: each example's
 * (all four parameters together) clipped to norm `clip`, summed, noised,
 * averaged, applied. */
static void dp_step(const args *a, nb_tensor **params, nb_tensor **g, int64_t n, nb_rng *rng)
{
    double *scale = calloc((size_t)n, sizeof *scale);
    for (int k = 0; k < N_PARAMS; k++) {
        const float *d = data_of(g[k]);
        int64_t per = nb_tensor_numel(g[k]) / n;
        for (int64_t e = 0; e < n; e++)
            for (int64_t i = 0; i < per; i++) scale[e] += (double)d[e * per + i] * d[e * per + i];
    }
    for (int64_t e = 0; e < n; e++) scale[e] = fmin(1.0, a->clip / (sqrt(scale[e]) + 1e-12));
    for (int k = 0; k < N_PARAMS; k++) {
        const float *d = data_of(g[k]);
        float *p = data_of(params[k]);
        int64_t per = nb_tensor_numel(params[k]);
        float *sum = calloc((size_t)per, sizeof *sum);
        for (int64_t e = 0; e < n; e++) { /* row by row, in memory order */
            const float s = (float)scale[e], *row = d + e * per;
            for (int64_t i = 0; i < per; i++) sum[i] += s * row[i];
        }
        for (int64_t i = 0; i < per; i++)
            p[i] -= (float)(a->lr * (sum[i] + a->noise * a->clip * nb_rng_normal(rng)) / (double)n);
        free(sum);
    }
    free(scale);
}

static double accuracy(nb_tensor **params, nb_reader *test)
{
    nb_builder *b;
    die_on(nb_builder_new_eager(&b), "builder");
    die_on(nb_reader_reset(test, 0), "data");
    int64_t right = 0, total = 0;
    nb_grad_mode_push(false);
    for (;;) {
        nb_tensor *rec[2];
        bool end;
        die_on(nb_reader_next(test, rec, &end), "data");
        if (end) break;
        nb_value p[N_PARAMS];
        for (int k = 0; k < N_PARAMS; k++) p[k] = nb_eager_value(b, params[k]);
        nb_tensor *pred = nb_eager_tensor(nb_argmax(b, logits(b, p, nb_eager_value(b, rec[0])), -1, false));
        die_on(nb_builder_status(b), "evaluation");
        for (int64_t i = 0; i < nb_tensor_numel(pred); i++) right += nb_tensor_get(pred, i) == nb_tensor_get(rec[1], i);
        total += nb_tensor_numel(pred);
        nb_eager_release_values(b);
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
    }
    nb_grad_mode_pop();
    nb_builder_free(b);
    return total ? (double)right / (double)total : 0;
}

static void parse(int argc, char **argv, args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        double v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            printf("usage: %s [--data DIR] [--epochs N] [--steps N] [--batch B] [--lr X] [--clip C] [--noise S]\n"
                   "       [--seed S]\n\n"
                   "DP-SGD on MNIST with per-example gradients from nb_vmap of nb_grad: each example's\n"
                   "gradient clipped to norm C, noise N(0, (S*C)^2) added to their sum. Prints the time per\n"
                   "step beside a plain SGD step and ends with 'test accuracy: 0.XXXX'. --steps N stops\n"
                   "each epoch after N steps (0: the whole epoch).\n"
                   "Defaults: --epochs %d --batch %d --lr %g --clip %g --noise %g --seed %llu.\n",
                   argv[0], a->epochs, a->batch, a->lr, a->clip, a->noise, (unsigned long long)a->seed);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: unknown flag or missing value (try --help)\n", f);
            exit(2);
        }
        const char *s = argv[++i];
        if (!strcmp(f, "--data")) a->data = s;
        else if (!strcmp(f, "--epochs") && parse_number(f, s, 1, 1000, &v)) a->epochs = (int)v;
        else if (!strcmp(f, "--batch") && parse_number(f, s, 1, 4096, &v)) a->batch = (int)v;
        else if (!strcmp(f, "--steps") && parse_number(f, s, 0, 1e9, &v)) a->steps = (int)v;
        else if (!strcmp(f, "--lr") && parse_number(f, s, 0, 100, &v)) a->lr = v;
        else if (!strcmp(f, "--clip") && parse_number(f, s, 1e-6, 1e6, &v)) a->clip = v;
        else if (!strcmp(f, "--noise") && parse_number(f, s, 0, 100, &v)) a->noise = v;
        else if (!strcmp(f, "--seed") && parse_number(f, s, 0, 1e18, &v)) a->seed = (uint64_t)v;
        else {
            if (strcmp(f, "--data")) fprintf(stderr, "%s: unknown flag or bad value (try --help)\n", f);
            exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    args a = {.epochs = 4, .batch = 128, .lr = 4, .clip = 1.0, .noise = 0.1, .seed = 1};
    parse(argc, argv, &a);
    char dir[1024];
    die_on(nb_data_find(a.data, "mnist", dir, sizeof dir), "data");
    nb_reader *train, *test;
    die_on(nb_mnist_reader(&train, dir, NB_MNIST_TRAIN | NB_MNIST_SHUFFLE, a.batch, a.seed, 2), "training data");
    die_on(nb_mnist_reader(&test, dir, 0, 1000, 0, 2), "test data");
    nb_rng rng;
    nb_rng_seed(&rng, a.seed);
    const int64_t shapes[N_PARAMS][2] = {{784, 256}, {256}, {256, 10}, {10}};
    const int ndims[N_PARAMS] = {2, 1, 2, 1};
    nb_tensor *params[N_PARAMS];
    for (int k = 0; k < N_PARAMS; k++) {
        die_on(nb_tensor_new(&params[k], NB_F32, ndims[k], shapes[k]), "parameters");
        double bound = ndims[k] == 2 ? 1 / sqrt((double)shapes[k][0]) : 0;
        for (int64_t i = 0; i < nb_tensor_numel(params[k]); i++) nb_tensor_set(params[k], i, bound * (2 * nb_rng_uniform(&rng) - 1));
    }
    nb_function grads = {example_grads, 6, N_PARAMS, NULL}, plain = {batch_loss, 6, 1, NULL};
    const nb_vmap_opts per_example = {.in_axes = (int[]){NB_NOT_BATCHED, NB_NOT_BATCHED, NB_NOT_BATCHED, NB_NOT_BATCHED, 0, 0}};
    double dp_secs = 0, plain_secs = 0;
    int64_t steps = 0;
    for (int epoch = 0; epoch < a.epochs; epoch++) {
        die_on(nb_reader_reset(train, (uint64_t)epoch), "data");
        for (int step = 0; !a.steps || step < a.steps; step++) {
            nb_tensor *rec[2], *g[N_PARAMS] = {0}, *pg[N_PARAMS] = {0};
            bool end;
            die_on(nb_reader_next(train, rec, &end), "data");
            if (end) break;
            nb_tensor *in[6] = {params[0], params[1], params[2], params[3], rec[0], rec[1]};
            double t0 = now();
            die_on(nb_vmap(&grads, &per_example, in, g), "per-example gradients");
            dp_step(&a, params, g, rec[0]->shape[0], &rng);
            double t1 = now();
            /* a plain step's gradient (the batch's mean loss) on the same batch, timed beside it */
            die_on(nb_grad(&plain, in, &(nb_grad_opts){.n_argnums = N_PARAMS, .argnums = (int[]){0, 1, 2, 3}}, pg, NULL),
                   "plain gradient");
            double t2 = now();
            dp_secs += t1 - t0;
            plain_secs += t2 - t1;
            steps++;
            for (int k = 0; k < N_PARAMS; k++) nb_tensor_release(g[k]), nb_tensor_release(pg[k]);
            nb_tensor_release(rec[0]);
            nb_tensor_release(rec[1]);
        }
        printf("epoch %d: test accuracy %.4f, %.2f ms per DP-SGD step (per-example gradients by vmap), "
               "%.2f ms per plain gradient\n", epoch + 1, accuracy(params, test), 1e3 * dp_secs / (double)steps,
               1e3 * plain_secs / (double)steps);
        fflush(stdout);
    }
    printf("test accuracy: %.4f\n", accuracy(params, test));
    for (int k = 0; k < N_PARAMS; k++) nb_tensor_release(params[k]);
    nb_reader_free(train);
    nb_reader_free(test);
    return 0;
}
