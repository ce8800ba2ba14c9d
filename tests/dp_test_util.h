/* What the data-parallel tests share (tests/test_comm.c in one process,
 * tests/mpi_check.c under mpirun): a small float64 classifier, its data,
 * readers that shard it, and a static and an eager trainer of it, so that a
 * run on N ranks can be compared with one process. */
#ifndef NABLA_DP_TEST_UTIL_H
#define NABLA_DP_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"

#define DP_FEATURES 8
#define DP_CLASSES 3

/* n samples: features in [-1, 1], labels in [0, 3) that depend on them. */
static inline void dp_data(int n, nb_tensor **x, nb_tensor **y)
{
    nb_tensor_new(x, NB_F64, 2, (const int64_t[]){n, DP_FEATURES});
    nb_tensor_new(y, NB_I64, 2, (const int64_t[]){n, 1});
    double *xd = nb_tensor_data(*x);
    int64_t *yd = nb_tensor_data(*y);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < DP_FEATURES; j++) {
            xd[i * DP_FEATURES + j] = sin(0.7 * (i + 1) * (j + 1) + 0.3 * j);
            s += xd[i * DP_FEATURES + j] * (j % 3 - 1);
        }
        yd[i] = s < -0.3 ? 0 : s < 0.3 ? 1 : 2;
    }
}

/* Shuffled by `seed` every epoch, rank's shard of it, batches of `batch`. */
static inline nb_status dp_reader(nb_reader **r, nb_tensor *x, nb_tensor *y, int rank, int size, int batch)
{
    nb_status st = nb_reader_from_tensors(r, 2, (nb_tensor *[]){x, y});
    if (!st) st = nb_reader_shuffle(r, *r, 11);
    if (!st && size > 1) st = nb_reader_shard(r, *r, rank, size);
    if (!st) st = nb_reader_batch(r, *r, batch, false);
    return st;
}

/* The model: 8 -> hidden (tanh) -> 3. */
static inline nb_value dp_mlp(nb_builder *b, nb_value x, int hidden)
{
    return nb_layer_fc(b, nb_layer_fc(b, x, hidden, "tanh", NULL), DP_CLASSES, NULL, NULL);
}

/* ---- static ---------------------------------------------------------------------------- */

typedef struct dp_static {
    nb_program *main, *startup;
    nb_scope *scope;
    nb_executor *ex;
    nb_backward_result grads;
    char loss[64];
} dp_static;

/* Builds and minimises the program (data-parallel when opt->data_parallel
 * is set) and runs its startup. */
static inline nb_status dp_static_new(dp_static *m, const nb_optimizer *opt, int hidden)
{
    memset(m, 0, sizeof *m);
    nb_builder *b = NULL;
    nb_status st = nb_program_new(&m->main);
    if (!st) st = nb_program_new(&m->startup);
    if (!st) st = nb_builder_new_record(&b, m->main, m->startup);
    if (st) return st;
    nb_program_set_seed(m->startup, 5);
    nb_value x = nb_data(b, "x", NB_F64, 2, (const int64_t[]){-1, DP_FEATURES});
    nb_value y = nb_data(b, "y", NB_I64, 2, (const int64_t[]){-1, 1});
    nb_value cost = nb_layer_softmax_cross_entropy(b, dp_mlp(b, x, hidden), y);
    if ((st = nb_builder_status(b))) {
        st = nb_error(st, "%s", nb_builder_error(b));
        nb_builder_free(b);
        return st;
    }
    snprintf(m->loss, sizeof m->loss, "%s", nb_value_name(cost));
    nb_builder_free(b);
    if (!st) st = nb_minimize(opt, m->main, m->startup, m->loss, NULL, &m->grads);
    if (!st) st = nb_scope_new(&m->scope, NULL);
    if (!st) st = nb_executor_new(&m->ex);
    if (!st) st = nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    return st;
}

static inline nb_status dp_static_step(dp_static *m, nb_tensor **rec)
{
    return nb_executor_run(m->ex, m->main, m->scope, NB_FEEDS({"x", rec[0]}, {"y", rec[1]}), NB_NO_NAMES, NULL);
}

/* Every parameter's values, in the program's var order, into out[0..*n). */
static inline void dp_static_params(const dp_static *m, double *out, int cap, int *n)
{
    const nb_block *b = nb_program_global_block(m->main);
    *n = 0;
    for (int i = 0; i < b->n_vars; i++) {
        if (!b->vars[i]->is_parameter) continue;
        const nb_tensor *t = nb_scope_find(m->scope, b->vars[i]->name);
        for (int64_t k = 0; t && k < nb_tensor_numel(t) && *n < cap; k++) out[(*n)++] = nb_tensor_get(t, k);
    }
}

static inline void dp_static_free(dp_static *m)
{
    nb_backward_result_free(&m->grads);
    nb_executor_free(m->ex);
    nb_scope_free(m->scope);
    nb_program_free(m->startup);
    nb_program_free(m->main);
}

/* ---- eager ------------------------------------------------------------------------------- */

typedef struct dp_eager {
    nb_builder *b;
    nb_eager_optimizer *o;
    nb_ddp *ddp;
    int hidden;
    bool stepped; /* the ddp steps o (nb_ddp_set_optimizer, nb_ddp_step) */
} dp_eager;

/* The model's parameters are made by one forward pass without a tape over
 * x; with a communicator, nb_ddp wraps them. */
static inline nb_status dp_eager_new(dp_eager *m, const nb_optimizer *opt, int hidden, nb_tensor *x, nb_comm *c,
                                     size_t bucket_bytes)
{
    memset(m, 0, sizeof *m);
    m->hidden = hidden;
    nb_status st = nb_builder_new_eager(&m->b);
    if (st) return st;
    nb_eager_set_seed(m->b, 5);
    nb_grad_mode_push(false);
    dp_mlp(m->b, nb_eager_value(m->b, x), hidden);
    nb_grad_mode_pop();
    if ((st = nb_builder_status(m->b))) return nb_error(st, "%s", nb_builder_error(m->b));
    nb_eager_release_values(m->b);
    st = nb_eager_optimizer_new(&m->o, opt);
    if (!st && c) st = nb_ddp_new(&m->ddp, c, m->b, bucket_bytes);
    return st;
}

static inline nb_status dp_eager_step(dp_eager *m, nb_tensor **rec)
{
    nb_builder *b = m->b;
    nb_value cost =
        nb_layer_softmax_cross_entropy(b, dp_mlp(b, nb_eager_value(b, rec[0]), m->hidden), nb_eager_value(b, rec[1]));
    nb_status st = nb_builder_status(b);
    if (st) return nb_error(st, "%s", nb_builder_error(b));
    nb_tensor *loss = nb_eager_tensor(cost);
    st = m->ddp ? nb_ddp_backward(m->ddp, loss) : nb_backward(NB_TENSORS(loss), NULL, 0);
    if (!st) st = m->stepped ? nb_ddp_step(m->ddp) : nb_eager_optimizer_step(m->o, b);
    nb_eager_zero_grad(b);
    nb_eager_release_values(b);
    return st;
}

static inline void dp_eager_params(const dp_eager *m, double *out, int cap, int *n)
{
    *n = 0;
    for (int i = 0; i < nb_eager_param_count(m->b); i++) {
        const nb_tensor *t = nb_eager_param_at(m->b, i);
        for (int64_t k = 0; k < nb_tensor_numel(t) && *n < cap; k++) out[(*n)++] = nb_tensor_get(t, k);
    }
}

static inline void dp_eager_free(dp_eager *m)
{
    nb_ddp_free(m->ddp);
    nb_eager_optimizer_free(m->o);
    nb_builder_free(m->b);
}

static inline double dp_max_diff(const double *a, const double *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

#endif
