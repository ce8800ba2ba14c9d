/* Batched (logical) tensors and the eager dispatch to batching rules (see
 * batched.h). */
#include <string.h>
#include "nabla/device.h"
#include "nabla/batch_rule.h"
#include "autograd.h"
#include "batched.h"
#include "../builder/builder_internal.h"
#include "../core/tensor_internal.h"
#include "../ops/batch_rules.h"

#define MAX_ARGS 64

static _Thread_local int vmap_depth;

int nb_vmap_level(void) { return vmap_depth; }
int nb_vmap_level_enter(void) { return ++vmap_depth; }
void nb_vmap_level_leave(void)
{
    if (vmap_depth > 0) vmap_depth--;
}

const nb_batched *nb_batched_of(const nb_tensor *t)
{
    const nb_autograd *a = t ? t->autograd : NULL;
    return a ? a->batched : NULL;
}

int nb_batched_level(const nb_tensor *t)
{
    const nb_batched *bt = nb_batched_of(t);
    return bt ? bt->level : 0;
}

void nb_batched_free(nb_batched *bt)
{
    if (!bt) return;
    nb_tensor_release(bt->phys);
    nb_free(bt);
}

static nb_status attach(nb_tensor *t, nb_tensor *phys, int bdim, int level)
{
    nb_autograd *a = nb_autograd_of(t, true);
    nb_batched *bt = a ? nb_malloc(sizeof *bt) : NULL;
    if (!bt) return nb_error(NB_ERR_NOMEM, "vmap: out of memory");
    *bt = (nb_batched){nb_tensor_retain(phys), bdim, level};
    a->batched = bt;
    return NB_OK;
}

nb_status nb_batched_wrap(nb_tensor **out, nb_tensor *phys, int bdim, int level)
{
    *out = NULL;
    if (bdim < 0 || bdim >= phys->ndim)
        return nb_error(NB_ERR_ARG, "vmap: batch dim %d of a %d-dim tensor", bdim, phys->ndim);
    nb_tensor *t = nb_calloc(1, sizeof *t);
    if (!t) return nb_error(NB_ERR_NOMEM, "vmap: out of memory");
    t->refcount = 1;
    t->dtype = phys->dtype;
    t->ndim = phys->ndim - 1;
    for (int d = 0, k = 0; d < phys->ndim; d++)
        if (d != bdim) t->shape[k++] = phys->shape[d];
    nb_contiguous_strides(t->ndim, t->shape, t->strides);
    nb_status st = attach(t, phys, bdim, level);
    if (st) {
        nb_tensor_release(t);
        return st;
    }
    *out = t;
    return NB_OK;
}

nb_status nb_batched_copy(nb_tensor *dst, const nb_tensor *src)
{
    const nb_batched *bt = nb_batched_of(src);
    return bt ? attach(dst, bt->phys, bt->bdim, bt->level) : NB_OK;
}

int nb_batched_max_level(int n, nb_tensor *const *t)
{
    int level = 0;
    for (int i = 0; i < n; i++) {
        int l = nb_batched_level(t[i]);
        if (l > level) level = l;
    }
    return level;
}

static const char *shape_of(char *buf, const nb_var_info *v)
{
    return nb_shape_str(buf, NB_SHAPE_STR_MAX, v->ndim, v->shape);
}

/* The physical values, their batch dims and the batch size they agree on. */
static nb_status unwrap_inputs(const nb_op_def *def, int level, int n_in, nb_tensor *const *in, nb_value *x, int *bdim,
                               nb_var_info *info, int64_t *batch)
{
    int first = -1;
    *batch = -1;
    for (int i = 0; i < n_in; i++) {
        const nb_batched *bt = nb_batched_of(in[i]);
        bool here = bt && bt->level == level;
        x[i] = nb_value_make(here ? bt->phys : in[i], NB_VALUE_TENSOR);
        bdim[i] = here ? bt->bdim : -1;
        info[i] = (nb_var_info){.ndim = -1};
        if (in[i]) {
            info[i] = (nb_var_info){.dtype = in[i]->dtype, .ndim = in[i]->ndim};
            memcpy(info[i].shape, in[i]->shape, sizeof info[i].shape);
        }
        if (!here) continue;
        int64_t n = bt->phys->shape[bt->bdim];
        if (first < 0) {
            first = i;
            *batch = n;
        } else if (n != *batch)
            return nb_error(NB_ERR_SHAPE, "vmap: %s: input %d is batched with size %lld but input %d with size %lld",
                            def->name, first, (long long)*batch, i, (long long)n);
    }
    return NB_OK;
}

/* What the rule made: physical outputs, checked against the logical shapes
 * inference gave, and wrapped. */
static nb_status wrap_outputs(const nb_op_def *def, int level, nb_batch_ctx *c, bool check, nb_tensor **out)
{
    nb_status st = NB_OK;
    for (int k = 0; k < c->n_out && !st; k++) {
        nb_tensor *p = nb_eager_tensor(c->y[k]);
        int d = c->y_bdim[k];
        if (!p) {
            st = nb_error(NB_ERR_STATE, "vmap: the batching rule of %s made no output %d", def->name, k);
            break;
        }
        if (d < 0) out[k] = nb_tensor_retain(p);
        else st = nb_batched_wrap(&out[k], p, d, level);
        if (st || !check) continue;
        const nb_var_info *want = &c->y_info[k];
        if (!nb_shape_equal(out[k]->ndim, out[k]->shape, want->ndim, want->shape) || out[k]->dtype != want->dtype) {
            char a[NB_SHAPE_STR_MAX], w[NB_SHAPE_STR_MAX];
            st = nb_error(NB_ERR_STATE,
                          "vmap: the batching rule of %s made output %d of shape %s (%s) per example, "
                          "but the op gives %s (%s)",
                          def->name, k, nb_shape_str(a, sizeof a, out[k]->ndim, out[k]->shape),
                          nb_dtype_name(out[k]->dtype), shape_of(w, want), nb_dtype_name(want->dtype));
        }
    }
    if (st)
        for (int k = 0; k < c->n_out; k++) {
            nb_tensor_release(out[k]);
            out[k] = NULL;
        }
    return st;
}

nb_status nb_batched_run(nb_builder *b, const nb_op_def *def, int level, nb_tensors ins, nb_attrs as, int n_out,
                         nb_tensor **out)
{
    int n_in = ins.n, n_attrs = as.n;
    nb_tensor *const *in = ins.v;
    const nb_attr *attrs = as.v;
    nb_value x[MAX_ARGS], y[MAX_ARGS];
    int xb[MAX_ARGS], yb[MAX_ARGS];
    nb_var_info xi[MAX_ARGS], yi[MAX_ARGS];
    nb_attr_value av[NB_MAX_ATTRS];
    int64_t batch;
    if (n_in > MAX_ARGS || n_out > MAX_ARGS)
        return nb_error(NB_ERR_ARG, "vmap: %s: too many inputs or outputs", def->name);
    nb_status st = unwrap_inputs(def, level, n_in, in, x, xb, xi, &batch);
    if (st) return st;
    nb_batch_ctx c = {.def = def,
                      .n_in = n_in,
                      .x = x,
                      .x_bdim = xb,
                      .x_info = xi,
                      .batch = batch,
                      .n_out = n_out,
                      .y = y,
                      .y_bdim = yb};
    bool check;
    if ((st = nb_batch_apply(b, &c, av, yi, n_attrs, attrs, &check))) return st;
    return wrap_outputs(def, level, &c, check, out);
}
