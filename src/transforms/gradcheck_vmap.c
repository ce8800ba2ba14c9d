/* The vmap column of the check matrix (nabla/gradcheck.h): the case's op
 * mapped over a batch by its batching rule equals the op run on each
 * example, for every in_axes combination of its inputs. */
#include <stdio.h>
#include <string.h>
#include "nabla/gradcheck.h"
#include "nabla/ops.h"
#include "nabla/vmap.h"
#include "../autodiff/gradcheck_internal.h"

#define BATCH 3
#define MAX_IN (NB_MAX_SLOTS * 4)

typedef struct op_fn {
    const nb_gradcheck_case *c;
    int n_in, n_out;
} op_fn;

static nb_status run_op(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const op_fn *o = ctx;
    nb_emit(b, o->c->op, NB_VALUES_N(o->n_in, in), NB_ATTRS_N(o->c->n_attrs, o->c->attrs), o->n_out, out);
    return nb_builder_status(b);
}

/* Example e of input x: float values scaled by 1 + e/8 (so that the
 * examples differ), others as they are. */
static nb_status example_of(nb_tensor *x, int e, nb_tensor **out)
{
    nb_status st = nb_tensor_clone(out, x);
    if (st || !nb_dtype_is_float(x->dtype)) return st;
    for (int64_t i = 0; i < nb_tensor_numel(*out); i++) nb_tensor_set(*out, i, nb_tensor_get(x, i) * (1 + e / 8.0));
    return NB_OK;
}

/* The examples of x stacked along axis 0 or its last axis. */
static nb_status batch_of(nb_tensor *x, bool last, nb_tensor **out)
{
    int64_t shape[NB_MAX_DIMS], n = nb_tensor_numel(x);
    if (x->ndim + 1 > NB_MAX_DIMS) return nb_error(NB_ERR_SHAPE, "vmap check: too many dims");
    shape[0] = BATCH;
    memcpy(shape + 1, x->shape, (size_t)x->ndim * sizeof *shape);
    nb_tensor *s;
    nb_status st = nb_tensor_new(&s, x->dtype, x->ndim + 1, shape);
    for (int e = 0; e < BATCH && !st; e++) {
        nb_tensor *ex;
        if ((st = example_of(x, e, &ex))) break;
        for (int64_t i = 0; i < n; i++) nb_tensor_set(s, e * n + i, nb_tensor_get(ex, i));
        nb_tensor_release(ex);
    }
    if (st || !last) {
        *out = st ? NULL : s;
        if (st) nb_tensor_release(s);
        return st;
    }
    int perm[NB_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) perm[d] = d + 1;
    perm[x->ndim] = 0;
    st = nb_tensor_permute(out, s, perm);
    nb_tensor_release(s);
    return st;
}

static nb_status run_once(const nb_function *f, nb_tensor *const *in, nb_tensor **out)
{
    nb_builder *b;
    nb_status st = nb_builder_new_eager(&b);
    if (st) return st;
    nb_value vin[MAX_IN], vout[MAX_IN];
    for (int i = 0; i < f->n_in; i++) vin[i] = in[i] ? nb_eager_value(b, in[i]) : NB_NONE;
    for (int k = 0; k < f->n_out; k++) vout[k] = NB_NONE;
    st = nb_builder_status(b);
    if (!st) st = f->fn(b, vin, vout, f->ctx);
    if (st && nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
    for (int k = 0; k < f->n_out; k++) out[k] = st ? NULL : nb_tensor_retain(nb_eager_tensor(vout[k]));
    nb_builder_free(b);
    return st;
}

/* One in_axes combination: axis[i] is 0, -1 or NB_NOT_BATCHED. */
static nb_status check_combo(const nb_function *f, nb_tensor *const *x, const int *axes, nb_gradcheck_report *rep)
{
    nb_tensor *bx[MAX_IN] = {0}, *out[MAX_IN] = {0};
    nb_status st = NB_OK;
    for (int i = 0; i < f->n_in && !st; i++)
        if (x[i] && axes[i] != NB_NOT_BATCHED) st = batch_of(x[i], axes[i] < 0, &bx[i]);
        else bx[i] = x[i] ? nb_tensor_retain(x[i]) : NULL;
    char combo[128];
    size_t u = 0;
    for (int i = 0; i < f->n_in && u < sizeof combo; i++)
        u += (size_t)snprintf(combo + u, sizeof combo - u, "%s%s", i ? ", " : "",
                              !x[i]                           ? "-"
                                  : axes[i] == NB_NOT_BATCHED ? "shared"
                                  : axes[i]                   ? "last"
                                                              : "0");
    if (!st && (st = nb_vmap(f, &(nb_vmap_opts){.in_axes = axes}, bx, out)))
        nb_error_context(st, "vmap check, in_axes (%s)", combo);
    for (int e = 0; e < BATCH && !st; e++) {
        nb_tensor *ex[MAX_IN] = {0}, *want[MAX_IN] = {0};
        for (int i = 0; i < f->n_in && !st; i++)
            if (x[i])
                st = axes[i] == NB_NOT_BATCHED ? (ex[i] = nb_tensor_retain(x[i]), NB_OK) : example_of(x[i], e, &ex[i]);
        if (!st) st = run_once(f, ex, want);
        for (int k = 0; k < f->n_out && !st; k++) {
            nb_tensor *got = NULL;
            if ((st = nb_tensor_slice(&got, out[k], 0, e, e + 1, 1))) break;
            int64_t n = nb_tensor_numel(want[k]);
            rep->checked += (int)n;
            bool bad = nb_tensor_numel(got) != n;
            for (int64_t j = 0; j < n && !bad; j++) {
                double a = nb_tensor_get(got, j), b = nb_tensor_get(want[k], j), err = a > b ? a - b : b - a;
                if (!(err <= 1e-12 + 1e-12 * (b < 0 ? -b : b)) && !(a != a && b != b)) {
                    bad = true;
                    if (err > rep->max_abs_err) rep->max_abs_err = err;
                }
            }
            if (bad) {
                rep->failed++;
                snprintf(rep->worst, sizeof rep->worst,
                         "in_axes (%s): example %d of output %d differs from the op "
                         "run on that example",
                         combo, e, k);
            }
            nb_tensor_release(got);
        }
        for (int i = 0; i < f->n_in; i++) nb_tensor_release(ex[i]);
        for (int k = 0; k < f->n_out; k++) nb_tensor_release(want[k]);
    }
    for (int i = 0; i < f->n_in; i++) nb_tensor_release(bx[i]);
    for (int k = 0; k < f->n_out; k++) nb_tensor_release(out[k]);
    return st;
}

nb_status nb_gradcheck_vmap(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    const nb_op_def *def = nb_op_find(c->op);
    /* The loop, or draws that differ; a composite is batched by the rules of its expansion. */
    if (!def || (!def->batch && !def->expand) || (def->flags & NB_OP_RANDOM)) return NB_OK;
    built_case w;
    nb_status st = nb_gc_build(c, seed, &w);
    nb_tensor *x[MAX_IN] = {0};
    int present[MAX_IN], p = 0;
    for (int i = 0; !st && i < w.n_in; i++) {
        if (nb_is_none(w.in[i])) continue;
        const char *name = nb_value_name(w.in[i]);
        for (int f = 0; f < w.fs.n; f++)
            if (!strcmp(w.fs.f[f].name, name)) x[i] = w.fs.f[f].tensor;
        if (x[i]) present[p++] = i;
    }
    op_fn o = {c, w.n_in, w.n_out};
    nb_function f = {run_op, w.n_in, w.n_out, &o};
    /* 3^p combinations (but all shared) up to 4 inputs; else all 0, all
     * last, and alternating. */
    int combos = 1;
    for (int i = 0; i < p && p <= 4; i++) combos *= 3;
    if (p > 4) combos = 3;
    for (int m = 0; m < combos && !st && p > 0; m++) {
        int axes[MAX_IN], code = m;
        bool any = false;
        for (int i = 0; i < w.n_in; i++) axes[i] = NB_NOT_BATCHED;
        for (int j = 0; j < p; j++) {
            int k = p > 4 ? (m == 2 ? (j % 2 ? 2 : 0) : m) : code % 3;
            code /= 3;
            axes[present[j]] = k == 0 ? 0 : k == 1 ? -1 : NB_NOT_BATCHED;
            any |= k != 2;
        }
        if (any) st = check_combo(&f, x, axes, rep);
    }
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    nb_gc_built_free(&w);
    return st;
}
