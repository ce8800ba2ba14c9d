/* bench_transforms: the functional transforms on MLP losses.
 *   jvp_mlp_ms   forward-mode JVP of a tanh MLP loss (784-256-10, batch 64)
 *                in its first-layer weights, along a random tangent
 *   hvp_mlp_ms   a Hessian-vector product of the same loss
 *   hessian_mlp_ms  the full Hessian of a 16-32-10 MLP loss in all 874
 *                parameters (one flat vector), batch 8
 *   jacrev_tanh_ms, jacfwd_tanh_ms  the 64 x 64 Jacobian of a 64-128-64
 *                tanh MLP at one input, by rows and by columns
 *   per_example_grads_ms  per-example gradients (vmap of grad) of a
 *                784-256-10 ReLU MLP's cross-entropy at batch 64
 * Medians; bench/run.sh transforms prints them beside torch.autograd.functional.
 * Second derivatives are by forward over reverse (nb_hvp, nb_hessian);
 * `bench_transforms by_reverse` times reverse over reverse instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nabla/nabla.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die_on(nb_status st)
{
    if (!st) return;
    fprintf(stderr, "bench_transforms: %s\n", nb_last_error());
    exit(1);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static nb_tensor *filled(int ndim, const int64_t *shape, double scale, int seed)
{
    nb_tensor *t;
    nb_rng r;
    nb_rng_seed(&r, (uint64_t)seed);
    die_on(nb_tensor_new(&t, NB_F32, ndim, shape));
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, scale * (2 * nb_rng_uniform(&r) - 1));
    return t;
}

typedef struct data {
    nb_tensor *x, *y, *w2;
} data;

/* mean((tanh(x W1) W2 - y)^2) */
static nb_status mlp_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    data *d = ctx;
    nb_value h = nb_tanh(b, nb_matmul(b, nb_eager_value(b, d->x), in[0], 0));
    nb_value r = nb_sub(b, nb_matmul(b, h, nb_eager_value(b, d->w2), 0), nb_eager_value(b, d->y));
    out[0] = nb_reduce_mean(b, nb_square(b, r), 0, NULL, false);
    return nb_builder_status(b);
}

/* The 16-32-10 MLP with its 874 parameters in one vector theta. */
static nb_status small_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    data *d = ctx;
    nb_value parts[4];
    die_on(nb_emit(b, "split", NB_VALUES_N(1, in), NB_ATTRS(NB_ATTR_INTS("sections", 512, 32, 320, 10)), 4, parts));
    nb_value w1 = nb_reshape(b, parts[0], 2, (int64_t[]){16, 32}), w2 = nb_reshape(b, parts[2], 2, (int64_t[]){32, 10});
    nb_value h = nb_tanh(b, nb_add(b, nb_matmul(b, nb_eager_value(b, d->x), w1, 0), parts[1]));
    nb_value r = nb_sub(b, nb_add(b, nb_matmul(b, h, w2, 0), parts[3]), nb_eager_value(b, d->y));
    out[0] = nb_reduce_mean(b, nb_square(b, r), 0, NULL, false);
    return nb_builder_status(b);
}

/* tanh(x A + b) C + d for one input x [64]. */
typedef struct tanh_mlp {
    nb_tensor *a, *b, *c, *d;
} tanh_mlp;

static nb_status tanh_mlp_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    tanh_mlp *m = ctx;
    nb_value x = nb_reshape(b, in[0], 2, (int64_t[]){1, 64});
    nb_value h = nb_tanh(b, nb_add(b, nb_matmul(b, x, nb_eager_value(b, m->a), 0), nb_eager_value(b, m->b)));
    nb_value y = nb_add(b, nb_matmul(b, h, nb_eager_value(b, m->c), 0), nb_eager_value(b, m->d));
    out[0] = nb_reshape(b, y, 1, (int64_t[]){64});
    return nb_builder_status(b);
}

typedef nb_status (*jacobian_fn)(const nb_function *, nb_tensor *const *, int, int, nb_tensor **);

static double time_jacobian(jacobian_fn jac, const nb_function *f, nb_tensor *x)
{
    double ms[7];
    for (int r = -1; r < 7; r++) {
        nb_tensor *j;
        double t0 = now();
        die_on(jac(f, &x, 0, 0, &j));
        if (r >= 0) ms[r] = (now() - t0) * 1e3;
        nb_tensor_release(j);
    }
    qsort(ms, 7, sizeof *ms, cmp);
    return ms[3];
}

/* One example's cross-entropy: in = W1, b1, W2, b2, x [784], label [1]. */
static nb_status example_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    const int64_t front[1] = {0};
    nb_value x = nb_unsqueeze(b, in[4], 1, front);
    nb_value h = nb_relu(b, nb_add(b, nb_matmul(b, x, in[0], 0), in[1]));
    nb_value logits = nb_add(b, nb_matmul(b, h, in[2], 0), in[3]);
    nb_value loss = nb_softmax_with_cross_entropy(b, logits, nb_unsqueeze(b, in[5], 1, front), NULL);
    out[0] = nb_reduce_sum(b, loss, 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status example_grads(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_function loss = {example_loss, 6, 1, NULL};
    nb_tensor *p[6], *g[4] = {0};
    for (int i = 0; i < 6; i++) p[i] = nb_eager_tensor(in[i]);
    nb_status st = nb_grad(&loss, p, &(nb_grad_opts){.n_argnums = 4, .argnums = (const int[]){0, 1, 2, 3}}, g, NULL);
    for (int k = 0; k < 4; k++) {
        out[k] = st ? NB_NONE : nb_eager_value(b, g[k]);
        nb_tensor_release(g[k]);
    }
    return st ? st : nb_builder_status(b);
}

static double time_per_example(void)
{
    nb_tensor *in[6] = {filled(2, (int64_t[]){784, 256}, 0.05, 14), filled(1, (int64_t[]){256}, 0.05, 15),
                        filled(2, (int64_t[]){256, 10}, 0.1, 16),   filled(1, (int64_t[]){10}, 0.1, 17),
                        filled(2, (int64_t[]){64, 784}, 1, 18),     NULL};
    die_on(nb_tensor_new(&in[5], NB_I64, 2, (int64_t[]){64, 1}));
    for (int64_t i = 0; i < 64; i++) nb_tensor_set(in[5], i, (double)((i * 7) % 10));
    nb_function f = {example_grads, 6, 4, NULL};
    const int in_axes[6] = {NB_NOT_BATCHED, NB_NOT_BATCHED, NB_NOT_BATCHED, NB_NOT_BATCHED, 0, 0};
    double ms[7];
    for (int r = -1; r < 7; r++) {
        nb_tensor *g[4];
        double t0 = now();
        die_on(nb_vmap(&f, &(nb_vmap_opts){.in_axes = in_axes}, in, g));
        if (r >= 0) ms[r] = (now() - t0) * 1e3;
        for (int k = 0; k < 4; k++) nb_tensor_release(g[k]);
    }
    for (int i = 0; i < 6; i++) nb_tensor_release(in[i]);
    qsort(ms, 7, sizeof *ms, cmp);
    return ms[3];
}

#define REPS 7

int main(int argc, char **argv)
{
    bool rev = argc > 1 && !strcmp(argv[1], "by_reverse");
    nb_status (*hvp)(const nb_function *, nb_tensor *const *, int, nb_tensor *, nb_tensor **) =
        rev ? nb_hvp_by_reverse : nb_hvp;
    nb_status (*hessian)(const nb_function *, nb_tensor *const *, int, nb_tensor **) =
        rev ? nb_hessian_by_reverse : nb_hessian;
    data d = {filled(2, (int64_t[]){64, 784}, 1, 1), filled(2, (int64_t[]){64, 10}, 1, 2),
              filled(2, (int64_t[]){256, 10}, 0.1, 3)};
    nb_tensor *w1 = filled(2, (int64_t[]){784, 256}, 0.05, 4), *t = filled(2, (int64_t[]){784, 256}, 1, 5);
    nb_function f = {mlp_loss, 1, 1, &d};
    double ms[REPS];
    for (int r = -1; r < REPS; r++) {
        nb_tensor *o, *ot;
        double t0 = now();
        die_on(nb_jvp(&f, &w1, &t, &o, &ot));
        if (r >= 0) ms[r] = (now() - t0) * 1e3;
        nb_tensor_release(o);
        nb_tensor_release(ot);
    }
    qsort(ms, REPS, sizeof *ms, cmp);
    printf("case jvp_mlp_ms %.4f\n", ms[REPS / 2]);
    for (int r = -1; r < REPS; r++) {
        nb_tensor *hv;
        double t0 = now();
        die_on(hvp(&f, &w1, 0, t, &hv));
        if (r >= 0) ms[r] = (now() - t0) * 1e3;
        nb_tensor_release(hv);
    }
    qsort(ms, REPS, sizeof *ms, cmp);
    printf("case hvp_mlp_ms %.4f\n", ms[REPS / 2]);
    fflush(stdout);

    data s = {filled(2, (int64_t[]){8, 16}, 1, 6), filled(2, (int64_t[]){8, 10}, 1, 7), NULL};
    nb_tensor *theta = filled(1, (int64_t[]){874}, 0.2, 8);
    nb_function g = {small_loss, 1, 1, &s};
    double hs[3];
    for (int r = 0; r < 3; r++) {
        nb_tensor *h;
        double t0 = now();
        die_on(hessian(&g, &theta, 0, &h));
        hs[r] = (now() - t0) * 1e3;
        nb_tensor_release(h);
    }
    qsort(hs, 3, sizeof *hs, cmp);
    printf("case hessian_mlp_ms %.4f\n", hs[1]);
    fflush(stdout);

    tanh_mlp m = {filled(2, (int64_t[]){64, 128}, 0.125, 9), filled(1, (int64_t[]){128}, 0.1, 10),
                  filled(2, (int64_t[]){128, 64}, 0.09, 11), filled(1, (int64_t[]){64}, 0.1, 12)};
    nb_tensor *jx = filled(1, (int64_t[]){64}, 1, 13);
    nb_function tf = {tanh_mlp_fn, 1, 1, &m};
    printf("case jacrev_tanh_ms %.4f\n", time_jacobian(nb_jacrev, &tf, jx));
    printf("case jacfwd_tanh_ms %.4f\n", time_jacobian(nb_jacfwd, &tf, jx));
    printf("case per_example_grads_ms %.4f\n", time_per_example());
    nb_tensor *all[] = {d.x, d.y, d.w2, w1, t, s.x, s.y, theta, m.a, m.b, m.c, m.d, jx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) nb_tensor_release(all[i]);
    return 0;
}
