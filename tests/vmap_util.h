/* What the vmap tests share: examples cut out of a batch, a function run on
 * one example, nb_vmap checked against the examples one by one, and the
 * per-example gradients of a loss. */
#ifndef NABLA_TEST_VMAP_UTIL_H
#define NABLA_TEST_VMAP_UTIL_H

#include <stdlib.h>
#include "test.h"

/* Example e of t along axis (a contiguous copy without that dim). */
static inline nb_tensor *example(nb_tensor *t, int axis, int64_t e)
{
    nb_tensor *s = NULL, *c = NULL, *r = NULL;
    int64_t shape[NB_MAX_DIMS];
    if (axis < 0) axis += t->ndim;
    for (int d = 0, k = 0; d < t->ndim; d++)
        if (d != axis) shape[k++] = t->shape[d];
    if (nb_tensor_slice(&s, t, axis, e, e + 1, 1) || nb_tensor_clone(&c, s) ||
        nb_tensor_reshape(&r, c, t->ndim - 1, shape))
        r = NULL;
    release_all(s, c, NULL);
    return r;
}

/* Runs f on one example's inputs; outputs are new references. */
static inline nb_status run_once(const nb_function *f, nb_tensor *const *in, nb_tensor **out)
{
    nb_builder *b;
    nb_status st = nb_builder_new_eager(&b);
    if (st) return st;
    nb_value vin[8], vout[8] = {{0}};
    for (int i = 0; i < f->n_in; i++) vin[i] = nb_eager_value(b, in[i]);
    st = f->fn(b, vin, vout, f->ctx);
    if (!st) st = nb_builder_status(b);
    for (int k = 0; k < f->n_out; k++) out[k] = st ? NULL : nb_tensor_retain(nb_eager_tensor(vout[k]));
    nb_builder_free(b);
    return st;
}

/* nb_vmap(f) with in_axes (out_axes all out_axis) equals f run on each
 * example. */
static inline void check_vmap(const nb_function *f, nb_tensor *const *in, const int *in_axes, int out_axis, double tol)
{
    nb_tensor *out[8] = {0};
    int out_axes[8];
    for (int k = 0; k < f->n_out; k++) out_axes[k] = out_axis;
    nb_vmap_opts o = {.in_axes = in_axes, .out_axes = out_axes};
    REQUIRE_OK(nb_vmap(f, &o, in, out));
    int64_t n = -1;
    for (int i = 0; i < f->n_in; i++)
        if (in_axes[i] != NB_NOT_BATCHED) n = in[i]->shape[in_axes[i] < 0 ? in_axes[i] + in[i]->ndim : in_axes[i]];
    for (int64_t e = 0; e < n; e++) {
        nb_tensor *ex[8], *want[8] = {0};
        for (int i = 0; i < f->n_in; i++)
            ex[i] = in_axes[i] == NB_NOT_BATCHED ? nb_tensor_retain(in[i]) : example(in[i], in_axes[i], e);
        CHECK_OK(run_once(f, ex, want));
        for (int k = 0; k < f->n_out; k++) {
            nb_tensor *got = example(out[k], out_axis, e);
            bool ok = got && want[k] && nb_tensor_allclose(got, want[k], tol, tol);
            if (!ok) {
                fprintf(stderr, "  example %lld output %d differs:\n", (long long)e, k);
                if (got) nb_tensor_print(got, stderr);
                if (want[k]) nb_tensor_print(want[k], stderr);
            }
            CHECK(ok);
            nb_tensor_release(got);
        }
        for (int i = 0; i < f->n_in; i++) nb_tensor_release(ex[i]);
        for (int k = 0; k < f->n_out; k++) nb_tensor_release(want[k]);
    }
    for (int k = 0; k < f->n_out; k++) nb_tensor_release(out[k]);
}

/* out[0..n_grads) = the gradients of loss (a function of n_in inputs) with
 * respect to its first n_grads inputs, at in: the function vmap maps for
 * per-example gradients. */
static inline nb_status grads_of(nb_builder *b, nb_fn loss, int n_in, int n_grads, const nb_value *in, nb_value *out,
                                 void *ctx)
{
    nb_function f = {loss, n_in, 1, ctx};
    nb_tensor *p[8], *g[8] = {0};
    int args[8];
    for (int i = 0; i < n_in; i++) p[i] = nb_eager_tensor(in[i]), args[i] = i;
    nb_status st = nb_grad(&f, p, &(nb_grad_opts){.n_argnums = n_grads, .argnums = args}, g, NULL);
    for (int k = 0; k < n_grads; k++) {
        out[k] = st ? NB_NONE : nb_eager_value(b, g[k]);
        nb_tensor_release(g[k]);
    }
    return st ? st : nb_builder_status(b);
}

static inline nb_tensor *rand_t(int ndim, const int64_t *shape, unsigned seed)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F64, ndim, shape)) return NULL;
    srand(seed);
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, (double)rand() / RAND_MAX * 2 - 1);
    return t;
}
#define R(seed, ...) rand_t(NDIM_OF(S(__VA_ARGS__)), S(__VA_ARGS__), (seed))

#define NB NB_NOT_BATCHED

#endif
