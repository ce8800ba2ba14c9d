/* Gradient checks by central differences. Every evaluation prepares the
 * program afresh, so random ops (dropout) draw the same numbers each time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/autodiff.h"
#include "nabla/gradcheck.h"
#include "nabla/ops.h"
#include "../ops/op_internal.h"

static nb_status run_once(nb_program *p, nb_scope *scope, int n_feed, const nb_feed *feeds, int n_fetch,
                          const char *const *fetch, nb_tensor **out)
{
    const char *names[64];
    nb_tensor *tensors[64];
    if (n_feed > 64) return nb_error(NB_ERR_ARG, "gradcheck: at most 64 feeds");
    for (int i = 0; i < n_feed; i++) {
        names[i] = feeds[i].name;
        tensors[i] = feeds[i].tensor;
    }
    nb_prepared *pp;
    nb_status st = nb_prepare(&pp, p, 0, n_feed, names, n_fetch, fetch);
    if (st) return st;
    /* Without a scope (nb_gradcheck_op's programs need none), run in a
     * fresh empty one: the executor wants one. */
    nb_scope *own = NULL;
    if (!scope && !(st = nb_scope_new(&own, NULL))) scope = own;
    if (!st) st = nb_prepared_run(pp, scope, tensors, out);
    nb_scope_free(own);
    nb_prepared_free(pp);
    return st;
}

static nb_status eval_loss(nb_program *p, const char *loss, nb_scope *scope, int n_feed, const nb_feed *feeds,
                           double *out)
{
    nb_tensor *t;
    nb_status st = run_once(p, scope, n_feed, feeds, 1, &loss, &t);
    if (st) return st;
    *out = nb_tensor_get(t, 0);
    nb_tensor_release(t);
    return NB_OK;
}

nb_status nb_gradcheck_program(nb_program *fwd, const char *loss, int n_wrt, const char *const *wrt, nb_scope *scope,
                               int n_feed, const nb_feed *feeds, const nb_gradcheck_opts *opts,
                               nb_gradcheck_report *rep)
{
    nb_gradcheck_opts o = opts ? *opts : (nb_gradcheck_opts){0};
    if (o.eps <= 0) o.eps = 1e-6;
    if (o.rtol <= 0) o.rtol = 1e-5;
    if (o.atol <= 0) o.atol = 1e-6;
    memset(rep, 0, sizeof *rep);
    nb_program *g;
    nb_status st = nb_program_clone(&g, fwd);
    if (st) return st;
    nb_backward_result res;
    if ((st = nb_gradients(g, 1, &loss, NULL, n_wrt, wrt, 0, NULL, true, &res))) {
        nb_program_free(g);
        return st;
    }
    const char **fetch = calloc((size_t)n_wrt + 1, sizeof *fetch);
    nb_tensor **analytic = calloc((size_t)n_wrt + 1, sizeof *analytic);
    int n_fetch = 0;
    if (!fetch || !analytic) {
        st = nb_error(NB_ERR_NOMEM, "gradcheck: out of memory");
        goto done;
    }
    for (int i = 0; i < n_wrt; i++)
        if (res.grads[i]) fetch[n_fetch++] = res.grads[i];
    nb_tensor **got = calloc((size_t)n_fetch + 1, sizeof *got);
    if (!got || (st = run_once(g, scope, n_feed, feeds, n_fetch, fetch, got))) {
        free(got);
        if (!st) st = nb_error(NB_ERR_NOMEM, "gradcheck: out of memory");
        goto done;
    }
    for (int i = 0, j = 0; i < n_wrt; i++) analytic[i] = res.grads[i] ? got[j++] : NULL;
    free(got);

    for (int i = 0; i < n_wrt && !st; i++) {
        nb_tensor *x = NULL;
        for (int f = 0; f < n_feed; f++)
            if (!strcmp(feeds[f].name, wrt[i])) x = feeds[f].tensor;
        if (!x && scope) x = nb_scope_find(scope, wrt[i]);
        if (!x) {
            st = nb_error(NB_ERR_NOT_FOUND, "gradcheck: '%s' is neither fed nor in the scope", wrt[i]);
            break;
        }
        int64_t n = nb_tensor_numel(x), step = 1;
        if (o.max_elements > 0 && n > o.max_elements) step = (n + o.max_elements - 1) / o.max_elements;
        for (int64_t e = 0; e < n && !st; e += step) {
            double orig = nb_tensor_get(x, e), lp, lm;
            nb_tensor_set(x, e, orig + o.eps);
            st = eval_loss(fwd, loss, scope, n_feed, feeds, &lp);
            nb_tensor_set(x, e, orig - o.eps);
            if (!st) st = eval_loss(fwd, loss, scope, n_feed, feeds, &lm);
            nb_tensor_set(x, e, orig);
            if (st) break;
            double num = (lp - lm) / (2 * o.eps), ana = analytic[i] ? nb_tensor_get(analytic[i], e) : 0.0;
            double err = fabs(ana - num);
            rep->checked++;
            bool bad = !(err <= o.atol + o.rtol * fabs(num));
            rep->failed += bad;
            if (err > rep->max_abs_err || (isnan(err) && !isnan(rep->max_abs_err))) {
                rep->max_abs_err = err;
                snprintf(rep->worst, sizeof rep->worst, "%s[%lld]: analytic %.10g, numeric %.10g", wrt[i], (long long)e,
                         ana, num);
            }
        }
    }
done:
    for (int i = 0; analytic && i < n_wrt; i++) nb_tensor_release(analytic[i]);
    free(analytic);
    free(fetch);
    nb_backward_result_free(&res);
    nb_program_free(g);
    return st;
}

/* ---- op cases ----------------------------------------------------------- */

typedef struct feeds {
    nb_feed f[64];
    char names[64][32];
    int n;
} feeds;

static nb_status add_feed(feeds *fs, const char *name, nb_tensor *t)
{
    if (fs->n == 64) {
        nb_tensor_release(t);
        return nb_error(NB_ERR_ARG, "gradcheck: too many feeds");
    }
    snprintf(fs->names[fs->n], sizeof fs->names[0], "%s", name);
    fs->f[fs->n] = (nb_feed){fs->names[fs->n], t};
    fs->n++;
    return NB_OK;
}

static void free_feeds(feeds *fs)
{
    for (int i = 0; i < fs->n; i++) nb_tensor_release(fs->f[i].tensor);
}

static nb_status random_tensor(nb_tensor **out, nb_dtype dt, int ndim, const int64_t *shape, nb_rng *rng)
{
    nb_status st = nb_tensor_new(out, dt, ndim, shape);
    for (int64_t i = 0; !st && i < nb_tensor_numel(*out); i++) nb_tensor_set(*out, i, 2 * nb_rng_uniform(rng) - 1);
    return st;
}

/* Adds a weighted sum of `vals` (each times a random fed weight) to the
 * builder and returns the scalar. */
static nb_value weighted_sum(nb_builder *b, int n, const nb_value *vals, const char *prefix, feeds *fs, nb_rng *rng)
{
    nb_value terms[64];
    int m = 0;
    for (int k = 0; k < n && m < 64; k++) {
        if (nb_is_none(vals[k])) continue;
        nb_var_info info = nb_value_info(b, vals[k]);
        if (!nb_dtype_is_float(info.dtype)) continue;
        char name[32];
        snprintf(name, sizeof name, "%s%d", prefix, k);
        nb_value w = nb_data(b, name, info.dtype, info.ndim, info.shape);
        nb_tensor *t;
        if (nb_builder_status(b) || random_tensor(&t, info.dtype, info.ndim, info.shape, rng) || add_feed(fs, name, t))
            return NB_NONE;
        terms[m++] = nb_reduce_sum(b, nb_mul(b, vals[k], w), 0, NULL, false);
    }
    if (m == 0) return NB_NONE;
    return m == 1 ? terms[0] : nb_sum(b, m, terms);
}

nb_status nb_gradcheck_op(const nb_gradcheck_case *c, int order, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    const nb_op_def *def = nb_op_find(c->op);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "gradcheck: unknown op '%s'", c->op);
    nb_rng rng;
    nb_rng_seed(&rng, seed);
    nb_program *p;
    nb_builder *b = NULL;
    feeds fs = {.n = 0};
    nb_status st = nb_program_new(&p);
    if (st) return st;
    if ((st = nb_builder_new_record(&b, p, NULL))) goto done;

    nb_value in[NB_MAX_SLOTS * 4];
    const char *wrt[NB_MAX_SLOTS * 4];
    int n_wrt = 0;
    /* Which slot each flat input falls in, to honour NB_SLOT_NO_GRAD. */
    int slot_of[NB_MAX_SLOTS * 4], begin[NB_MAX_SLOTS + 1], pos[NB_MAX_SLOTS * 4];
    bool present[NB_MAX_SLOTS * 4];
    if (c->n_in > NB_MAX_SLOTS * 4) {
        st = nb_error(NB_ERR_ARG, "gradcheck %s: too many inputs", c->op);
        goto done;
    }
    for (int k = 0; k < c->n_in; k++) present[k] = !c->in[k].absent, slot_of[k] = -1;
    if ((st = nb_assign_slots(def, true, c->n_in, present, begin, pos, c->op))) goto done;
    for (int s = 0; s < NB_MAX_SLOTS; s++)
        for (int j = begin[s]; j < begin[s + 1]; j++) slot_of[pos[j]] = s;
    for (int k = 0; k < c->n_in; k++) {
        const nb_gc_input *gi = &c->in[k];
        if (gi->absent) {
            in[k] = NB_NONE;
            continue;
        }
        nb_dtype dt = nb_dtype_is_float(gi->dtype) ? NB_F64 : gi->dtype;
        char name[32];
        snprintf(name, sizeof name, "x%d", k);
        in[k] = nb_data(b, name, dt, gi->ndim, gi->shape);
        nb_tensor *t;
        if ((st = nb_builder_status(b)) || (st = nb_tensor_new(&t, dt, gi->ndim, gi->shape))) goto done;
        double lo = gi->lo, hi = gi->hi;
        if (lo == 0 && hi == 0) lo = -1, hi = 1;
        for (int64_t i = 0; i < nb_tensor_numel(t); i++) {
            double v = gi->fill == NB_GC_VALUES ? gi->values[i]
                       : gi->fill == NB_GC_INTS ? floor(lo + nb_rng_uniform(&rng) * (hi - lo + 1))
                                                : lo + nb_rng_uniform(&rng) * (hi - lo);
            nb_tensor_set(t, i, v);
        }
        if ((st = add_feed(&fs, name, t))) goto done;
        bool no_grad = slot_of[k] >= 0 && (def->inputs[slot_of[k]].flags & NB_SLOT_NO_GRAD);
        if (nb_dtype_is_float(dt) && !no_grad) wrt[n_wrt++] = nb_value_name(in[k]);
    }
    int n_out = c->n_out ? c->n_out : nb_op_num_outputs(def);
    nb_value out[NB_MAX_SLOTS * 4];
    nb_emit(b, c->op, c->n_in, in, c->n_attrs, c->attrs, n_out, out);
    nb_value in_loss[NB_MAX_SLOTS * 4];
    for (int k = 0; k < n_out; k++)
        in_loss[k] = !c->loss_outputs || (k < 32 && (c->loss_outputs >> k & 1u)) ? out[k] : NB_NONE;
    nb_value loss = weighted_sum(b, n_out, in_loss, "w", &fs, &rng);
    if ((st = nb_builder_status(b))) goto done;
    if (nb_is_none(loss) || n_wrt == 0) {
        st = nb_error(NB_ERR_ARG, "gradcheck %s (%s): nothing to differentiate", c->op, c->name ? c->name : "");
        goto done;
    }
    nb_gradcheck_opts o = {.rtol = c->rtol};
    if (order == 1) {
        st = nb_gradcheck_program(p, nb_value_name(loss), n_wrt, wrt, NULL, fs.n, fs.f, &o, rep);
    } else {
        /* Second order: check the gradient of <grad, s> for random s. */
        nb_backward_result r;
        const char *ln = nb_value_name(loss);
        if ((st = nb_gradients(p, 1, &ln, NULL, n_wrt, wrt, 0, NULL, true, &r))) goto done;
        nb_value gv[NB_MAX_SLOTS * 4];
        for (int i = 0; i < n_wrt; i++) gv[i] = r.grads[i] ? nb_value_by_name(b, r.grads[i]) : NB_NONE;
        nb_backward_result_free(&r);
        nb_value loss2 = weighted_sum(b, n_wrt, gv, "s", &fs, &rng);
        if ((st = nb_builder_status(b))) goto done;
        if (nb_is_none(loss2)) goto done; /* no gradient at all: nothing to check */
        if (!o.rtol) o.rtol = 1e-4;
        st = nb_gradcheck_program(p, nb_value_name(loss2), n_wrt, wrt, NULL, fs.n, fs.f, &o, rep);
    }
done:
    if (st && b && nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
    free_feeds(&fs);
    nb_builder_free(b);
    nb_program_free(p);
    return st;
}
