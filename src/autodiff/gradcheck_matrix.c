/* The columns of the check matrix beyond finite differences (gradcheck.c)
 * and the closure (gradcheck_closure.c): each computes one thing two ways
 * and compares.
 *
 *   forward over reverse  the JVP of the VJP along t equals the gradient of
 *                         <VJP, t> (both are the Hessian of the loss times t)
 *   shapes                gradients have their inputs' dtypes and shapes, and
 *                         tangents their outputs'
 *   float32               the op's values in float32 agree with float64
 *   eager                 the op run on the tape, on contiguous inputs and on
 *                         strided views of the same values, gives the static
 *                         program's outputs and gradients */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nabla/autodiff.h"
#include "nabla/device.h"
#include "nabla/eager.h"
#include "nabla/gradcheck.h"
#include "nabla/ops.h"
#include "gradcheck_internal.h"

/* Compares a and b element by element into rep (|a - b| <= atol + rtol |b|). */
static void compare(nb_gradcheck_report *rep, const char *what, const nb_tensor *a, const nb_tensor *b, double rtol,
                    double atol)
{
    if (!a || !b || nb_tensor_numel(a) != nb_tensor_numel(b)) {
        rep->checked++, rep->failed++;
        snprintf(rep->worst, sizeof rep->worst, "%s: %s", what, !a || !b ? "missing" : "element counts differ");
        return;
    }
    for (int64_t i = 0; i < nb_tensor_numel(a); i++) {
        double x = nb_tensor_get(a, i), y = nb_tensor_get(b, i), err = fabs(x - y);
        rep->checked++;
        bool bad = !(err <= atol + rtol * fabs(y)) && !(isnan(x) && isnan(y));
        rep->failed += bad;
        if (bad && (err > rep->max_abs_err || !rep->worst[0])) {
            rep->max_abs_err = err;
            snprintf(rep->worst, sizeof rep->worst, "%s[%lld]: %.10g against %.10g", what, (long long)i, x, y);
        }
    }
}

nb_status nb_gradcheck_fwd_over_rev(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    nb_backward_result r1 = {0}, r2 = {0};
    bool have1 = false, have2 = false;
    nb_status st = nb_gc_build(c, seed, &w);
    const char *ln = st ? NULL : nb_value_name(w.loss);
    if (!st)
        st = nb_gradients(w.p, NB_NAMES_N(1, &ln), NB_NAMES_N(w.n_wrt, w.wrt),
                          &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r1);
    have1 = ln && !st;
    const char *tangents[NB_MAX_SLOTS * 4], *grads[NB_MAX_SLOTS * 4], *wrt[NB_MAX_SLOTS * 4];
    char tn[NB_MAX_SLOTS * 4][32];
    nb_value terms[NB_MAX_SLOTS * 4];
    int n = 0;
    for (int i = 0; !st && i < w.n_wrt; i++) {
        if (!r1.grads[i]) continue;
        snprintf(tn[n], sizeof tn[n], "tangent%d", i);
        nb_value t = nb_gc_random_input(&w, tn[n], nb_value_info(w.b, w.in[w.wrt_index[i]]), NULL);
        terms[n] = nb_reduce_sum(w.b, nb_mul(w.b, nb_value_by_name(w.b, r1.grads[i]), t), 0, NULL, false);
        tangents[n] = tn[n], grads[n] = r1.grads[i], wrt[n++] = w.wrt[i];
    }
    if (!st) st = nb_builder_status(w.b);
    if (st || n == 0) goto done; /* no gradient at all: nothing to compare */
    /* Reverse over reverse: the gradient of sum_i <grad_i, t_i>. */
    const char *l2 = nb_value_name(n == 1 ? terms[0] : nb_sum(w.b, n, terms));
    if (!(st = nb_builder_status(w.b)))
        st = nb_gradients(w.p, NB_NAMES_N(1, &l2), NB_NAMES_N(n, wrt), &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED},
                          &r2);
    have2 = !st;
    /* Forward over reverse: the JVP of the gradients along the same t. */
    char *jg[NB_MAX_SLOTS * 4] = {0};
    if (!st) st = nb_append_jvp(w.p, NB_NAMES_N(n, wrt), tangents, NB_NAMES_N(n, grads), jg);
    /* Pairs to compare; where one mode knows the result is zero and gives
     * none, the other's must be zeros. */
    const char *fetch[2 * NB_MAX_SLOTS * 4];
    int m = 0;
    for (int i = 0; !st && i < n; i++) {
        fetch[m++] = jg[i] ? jg[i] : r2.grads[i];
        fetch[m++] = r2.grads[i] ? r2.grads[i] : jg[i];
        if (!fetch[m - 1]) m -= 2;
    }
    nb_tensor *got[2 * NB_MAX_SLOTS * 4] = {0};
    if (!st && m) st = nb_gc_run(&w, m, fetch, got);
    for (int k = 0; !st && k < m; k += 2) {
        if (fetch[k] != fetch[k + 1]) {
            compare(rep, fetch[k + 1], got[k], got[k + 1], 1e-7, 1e-9);
            continue;
        }
        nb_tensor *zero = NULL; /* one mode gave nothing: a zero */
        if ((st = nb_tensor_new(&zero, got[k]->dtype, got[k]->ndim, got[k]->shape))) break;
        compare(rep, fetch[k], got[k], zero, 0, 1e-12);
        nb_tensor_release(zero);
    }
    for (int k = 0; k < m; k++) nb_tensor_release(got[k]);
    for (int i = 0; i < n; i++) nb_free(jg[i]);
done:
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    if (have2) nb_backward_result_free(&r2);
    if (have1) nb_backward_result_free(&r1);
    nb_gc_built_free(&w);
    return st;
}

nb_status nb_gradcheck_shapes(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    nb_backward_result r = {0};
    bool have = false;
    nb_status st = nb_gc_build(c, seed, &w);
    const char *ln = st ? NULL : nb_value_name(w.loss);
    if (!st)
        st = nb_gradients(w.p, NB_NAMES_N(1, &ln), NB_NAMES_N(w.n_wrt, w.wrt),
                          &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r);
    have = ln && !st;
    const char *fetch[NB_MAX_SLOTS * 4];
    int idx[NB_MAX_SLOTS * 4], m = 0;
    for (int i = 0; !st && i < w.n_wrt; i++)
        if (r.grads[i]) idx[m] = i, fetch[m++] = r.grads[i];
    nb_tensor *got[NB_MAX_SLOTS * 4] = {0};
    if (!st && m) st = nb_gc_run(&w, m, fetch, got);
    for (int k = 0; !st && k < m; k++) {
        nb_var_info want = nb_value_info(w.b, w.in[w.wrt_index[idx[k]]]);
        nb_var_info decl = nb_value_info(w.b, nb_value_by_name(w.b, fetch[k]));
        bool ok = got[k] && got[k]->dtype == want.dtype &&
            nb_shape_equal(got[k]->ndim, got[k]->shape, want.ndim, want.shape) && decl.dtype == want.dtype &&
            decl.ndim == want.ndim;
        rep->checked++;
        if (!ok) {
            rep->failed++;
            char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
            snprintf(rep->worst, sizeof rep->worst, "gradient of %s is %s %s; the input is %s %s", w.wrt[idx[k]],
                     got[k] ? nb_dtype_name(got[k]->dtype) : "?",
                     got[k] ? nb_shape_str(a, sizeof a, got[k]->ndim, got[k]->shape) : "?", nb_dtype_name(want.dtype),
                     nb_shape_str(b, sizeof b, want.ndim, want.shape));
        }
        nb_tensor_release(got[k]);
    }
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    if (have) nb_backward_result_free(&r);
    nb_gc_built_free(&w);
    return st;
}

/* The outputs of the case's op, run as built (fetching every float output). */
static nb_status op_outputs(built_case *w, nb_tensor **out, int *n)
{
    const char *fetch[NB_MAX_SLOTS * 4];
    *n = 0;
    for (int k = 0; k < w->n_out; k++)
        if (!nb_is_none(w->in_loss[k])) fetch[(*n)++] = nb_value_name(w->in_loss[k]);
    return *n ? nb_gc_run(w, *n, fetch, out) : NB_OK;
}

nb_status nb_gradcheck_f32(const nb_gradcheck_case *c, uint64_t seed, double tol, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w64, w32;
    nb_tensor *o64[NB_MAX_SLOTS * 4] = {0}, *o32[NB_MAX_SLOTS * 4] = {0};
    int n64 = 0, n32 = 0;
    nb_status st = nb_gc_build(c, seed, &w64);
    nb_status st32 = nb_gc_build_as(c, seed, NB_F32, &w32);
    if (!st) st = st32;
    if (!st) st = op_outputs(&w64, o64, &n64);
    if (!st) st = op_outputs(&w32, o32, &n32);
    for (int k = 0; !st && k < n64 && k < n32; k++) compare(rep, "output", o32[k], o64[k], tol, tol);
    for (int k = 0; k < NB_MAX_SLOTS * 4; k++) nb_tensor_release(o64[k]), nb_tensor_release(o32[k]);
    nb_gc_built_free(&w64);
    nb_gc_built_free(&w32);
    return st;
}

/* A copy of t that is a strided view holding the same values: kind 1 stores
 * it transposed (reversed dims) and reads it through a permutation; kind 2
 * stores it every other element of a larger tensor, from an offset, and
 * reads it through a slice. */
static nb_status strided_copy(nb_tensor **out, const nb_tensor *t, int kind)
{
    *out = NULL;
    if (kind == 3) {
        /* Every row along dim 0 the same (the caller made them so): row 0
         * expanded, stride 0 along dim 0. */
        if (t->ndim < 1 || t->shape[0] < 2) return nb_tensor_clone(out, t);
        nb_tensor *row, *one;
        int64_t shape1[NB_MAX_DIMS];
        memcpy(shape1, t->shape, sizeof shape1);
        shape1[0] = 1;
        nb_status st = nb_tensor_slice(&row, (nb_tensor *)t, 0, 0, 1, 1);
        if (!st) st = nb_tensor_clone(&one, row);
        nb_tensor_release(row);
        if (!st) {
            st = nb_tensor_expand(out, one, t->ndim, t->shape);
            nb_tensor_release(one);
        }
        return st;
    }
    if (t->ndim < (kind == 1 ? 2 : 1)) return nb_tensor_clone(out, t);
    int64_t big[NB_MAX_DIMS];
    int perm[NB_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        big[d] = kind == 1 ? t->shape[t->ndim - 1 - d] : t->shape[d], perm[d] = t->ndim - 1 - d;
    if (kind == 2) big[t->ndim - 1] = 2 * t->shape[t->ndim - 1] + 1;
    nb_tensor *store, *view;
    nb_status st = nb_tensor_new(&store, t->dtype, t->ndim, big);
    if (st) return st;
    st = kind == 1 ? nb_tensor_permute(&view, store, perm)
                   : nb_tensor_slice(&view, store, t->ndim - 1, 1, big[t->ndim - 1], 2);
    if (!st && (st = nb_tensor_copy_into(view, t))) nb_tensor_release(view);
    nb_tensor_release(store);
    if (!st) *out = view;
    return st;
}

/* The op on an eager builder with the case's inputs, and the gradients of
 * the case's wrt inputs given each loss output's weight "w<k>" as its
 * output gradient (torch.autograd.grad's grad_outputs). With views, the
 * inputs and the output gradients are strided views holding the same values.
 * With first_only, only the first loss output gets a gradient: the others'
 * are absent. */
static nb_status eager_run(built_case *w, const nb_gradcheck_case *c, int views, bool first_only, nb_tensor **outs,
                           int *n_outs, nb_tensor **grads)
{
    nb_builder *b;
    nb_status st = nb_builder_new_eager(&b);
    if (st) return st;
    nb_tensor *leaf[NB_MAX_SLOTS * 4] = {0}, *ys[NB_MAX_SLOTS * 4], *dys[NB_MAX_SLOTS * 4] = {0};
    nb_value in[NB_MAX_SLOTS * 4], out[NB_MAX_SLOTS * 4];
    for (int k = 0; !st && k < w->n_in; k++) {
        in[k] = NB_NONE;
        if (nb_is_none(w->in[k])) continue;
        const nb_tensor *fed = NULL;
        for (int f = 0; f < w->fs.n; f++)
            if (!strcmp(w->fs.f[f].name, nb_value_name(w->in[k]))) fed = w->fs.f[f].tensor;
        if (!fed) st = nb_error(NB_ERR_NOT_FOUND, "gradcheck: no value for input %d", k);
        else st = views == 1 || views == 2 ? strided_copy(&leaf[k], fed, views) : nb_tensor_clone(&leaf[k], fed);
        for (int j = 0; !st && j < w->n_wrt; j++)
            if (w->wrt_index[j] == k) st = nb_tensor_set_requires_grad(leaf[k], true);
        if (!st) in[k] = nb_eager_value(b, leaf[k]);
    }
    if (!st) st = nb_emit(b, c->op, NB_VALUES_N(w->n_in, in), NB_ATTRS_N(c->n_attrs, c->attrs), w->n_out, out);
    int m = 0;
    *n_outs = 0;
    for (int k = 0; !st && k < w->n_out && !(first_only && m == 1); k++) {
        if (nb_is_none(w->in_loss[k]) || !nb_dtype_is_float(nb_value_info(b, out[k]).dtype)) continue;
        char name[32];
        snprintf(name, sizeof name, "w%d", k);
        nb_tensor *wt = NULL;
        for (int f = 0; f < w->fs.n; f++)
            if (!strcmp(w->fs.f[f].name, name)) wt = w->fs.f[f].tensor;
        if (!wt) continue;
        outs[(*n_outs)++] = nb_tensor_retain(nb_eager_tensor(out[k]));
        ys[m] = nb_eager_tensor(out[k]);
        st = views ? strided_copy(&dys[m], wt, views) : nb_tensor_clone(&dys[m], wt);
        m++;
    }
    if (!st) st = nb_builder_status(b);
    nb_tensor *wrt[NB_MAX_SLOTS * 4];
    for (int j = 0; j < w->n_wrt; j++) wrt[j] = leaf[w->wrt_index[j]];
    if (!st && m) st = nb_autograd_grad(NB_TENSORS_N(m, ys), dys, NB_TENSORS_N(w->n_wrt, wrt), NB_ALLOW_UNUSED, grads);
    if (st && nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
    for (int k = 0; k < m; k++) nb_tensor_release(dys[k]);
    for (int k = 0; k < w->n_in; k++) nb_tensor_release(leaf[k]);
    nb_builder_free(b);
    return st;
}

/* Static outputs and gradients of a built case (gi: which wrt each is). */
static nb_status static_run(built_case *w, nb_backward_result *r, bool *have, nb_tensor **so, int *n_so, nb_tensor **sg,
                            int *gi, int *m)
{
    const char *ln = nb_value_name(w->loss);
    nb_status st = nb_gradients(w->p, NB_NAMES_N(1, &ln), NB_NAMES_N(w->n_wrt, w->wrt),
                                &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, r);
    *have = !st;
    if (!st) st = op_outputs(w, so, n_so);
    const char *fetch[NB_MAX_SLOTS * 4];
    *m = 0;
    for (int i = 0; !st && i < w->n_wrt; i++)
        if (r->grads[i]) gi[*m] = i, fetch[(*m)++] = r->grads[i];
    if (!st && *m) st = nb_gc_run(w, *m, fetch, sg);
    return st;
}

/* Eager (first_only or not, views or not) against static, into rep. */
static nb_status against_static(built_case *w, const nb_gradcheck_case *c, bool first_only, nb_gradcheck_report *rep)
{
    nb_backward_result r = {0};
    bool have = false;
    nb_tensor *so[NB_MAX_SLOTS * 4] = {0}, *sg[NB_MAX_SLOTS * 4] = {0};
    int n_so = 0, m = 0, gi[NB_MAX_SLOTS * 4];
    nb_status st = static_run(w, &r, &have, so, &n_so, sg, &gi[0], &m);
    for (int views = 0; !st && views < 3; views++) {
        nb_tensor *eo[NB_MAX_SLOTS * 4] = {0}, *eg[NB_MAX_SLOTS * 4] = {0};
        int n_eo = 0;
        st = eager_run(w, c, views, first_only, eo, &n_eo, eg);
        static const char *const modes[2][3] = {
            {"eager", "eager, transposed inputs and output gradients", "eager, sliced inputs and output gradients"},
            {"absent output gradients", "absent output gradients, transposed", "absent output gradients, sliced"}};
        const char *mode = modes[first_only][views];
        for (int k = 0; !st && k < n_eo && k < n_so; k++) compare(rep, mode, eo[k], so[k], 1e-12, 1e-12);
        for (int k = 0; !st && k < m; k++) {
            char what[128];
            snprintf(what, sizeof what, "%s: gradient of %s", mode, w->wrt[gi[k]]);
            compare(rep, what, eg[gi[k]], sg[k], 1e-10, 1e-12);
        }
        for (int k = 0; k < NB_MAX_SLOTS * 4; k++) nb_tensor_release(eo[k]), nb_tensor_release(eg[k]);
    }
    for (int k = 0; k < NB_MAX_SLOTS * 4; k++) nb_tensor_release(so[k]), nb_tensor_release(sg[k]);
    if (have) nb_backward_result_free(&r);
    return st;
}

/* Output gradients given as expanded views (stride 0 along dim 0): the
 * weights are first made the same in every row, so that the program (which
 * reads them whole) and the tape (which reads row 0 expanded) see the same
 * values. */
static nb_status expanded_cotangents(built_case *w, const nb_gradcheck_case *c, nb_gradcheck_report *rep)
{
    for (int f = 0; f < w->fs.n; f++) {
        nb_tensor *t = w->fs.f[f].tensor;
        if (w->fs.f[f].name[0] != 'w' || t->ndim < 1 || t->shape[0] < 2) continue;
        int64_t row = nb_tensor_numel(t) / t->shape[0];
        for (int64_t i = row; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, nb_tensor_get(t, i % row));
    }
    nb_backward_result r = {0};
    bool have = false;
    nb_tensor *so[NB_MAX_SLOTS * 4] = {0}, *sg[NB_MAX_SLOTS * 4] = {0}, *eo[NB_MAX_SLOTS * 4] = {0},
                                 *eg[NB_MAX_SLOTS * 4] = {0};
    int n_so = 0, n_eo = 0, m = 0, gi[NB_MAX_SLOTS * 4];
    nb_status st = static_run(w, &r, &have, so, &n_so, sg, gi, &m);
    if (!st) st = eager_run(w, c, 3, false, eo, &n_eo, eg);
    for (int k = 0; !st && k < m; k++) {
        char what[128];
        snprintf(what, sizeof what, "eager, expanded output gradients: gradient of %s", w->wrt[gi[k]]);
        compare(rep, what, eg[gi[k]], sg[k], 1e-10, 1e-12);
    }
    for (int k = 0; k < NB_MAX_SLOTS * 4; k++)
        nb_tensor_release(so[k]), nb_tensor_release(sg[k]), nb_tensor_release(eo[k]), nb_tensor_release(eg[k]);
    if (have) nb_backward_result_free(&r);
    return st;
}

nb_status nb_gradcheck_eager(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    nb_status st = nb_gc_build(c, seed, &w);
    /* A random op's draws differ between the modes. */
    if (!st && !(w.def->flags & NB_OP_RANDOM)) st = against_static(&w, c, false, rep);
    /* Last: it changes the weights. */
    if (!st && !(w.def->flags & NB_OP_RANDOM)) st = expanded_cotangents(&w, c, rep);
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    nb_gc_built_free(&w);
    return st;
}

nb_status nb_gradcheck_absent(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    /* The case with only its first loss output in the loss: a program whose
     * other outputs get no gradient, the same as the tape given none. */
    nb_gradcheck_case first = *c;
    nb_status st = nb_gc_build(c, seed, &w);
    int first_k = -1, n_float = 0;
    for (int k = 0; !st && k < w.n_out; k++)
        if (!nb_is_none(w.in_loss[k]) && nb_dtype_is_float(nb_value_info(w.b, w.out[k]).dtype)) {
            if (first_k < 0) first_k = k;
            n_float++;
        }
    nb_gc_built_free(&w);
    if (st || n_float < 2 || (w.def && (w.def->flags & NB_OP_RANDOM))) return st; /* nothing to leave out */
    first.loss_outputs = 1u << first_k;
    st = nb_gc_build(&first, seed, &w);
    if (!st) st = against_static(&w, &first, true, rep);
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    nb_gc_built_free(&w);
    return st;
}
