/* Gradient checks by central differences. Every evaluation replays run 0 of
 * the program, so random ops (dropout) draw the same numbers each time. */
#include <math.h>
#include "nabla/device.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/autodiff.h"
#include "nabla/gradcheck.h"
#include "nabla/ops.h"
#include "../ops/op_internal.h"
#include "gradcheck_internal.h"

static nb_status prepare_feeds(nb_prepared **pp, nb_program *p, int n_feed, const nb_feed *feeds, int n_fetch,
                               const char *const *fetch, nb_tensor **tensors)
{
    const char *names[64];
    if (n_feed > 64) return nb_error(NB_ERR_ARG, "gradcheck: at most 64 feeds");
    for (int i = 0; i < n_feed; i++) {
        names[i] = feeds[i].name;
        tensors[i] = feeds[i].tensor;
    }
    return nb_prepare(pp, p, 0, NB_NAMES_N(n_feed, names), NB_NAMES_N(n_fetch, fetch));
}

/* Run 0 of pp, in a fresh empty scope when there is none (nb_gradcheck_op's
 * programs need none, and the executor wants one). */
static nb_status run_zero(nb_prepared *pp, nb_scope *scope, nb_tensor **tensors, nb_tensor **out)
{
    nb_scope *own = NULL;
    nb_status st = NB_OK;
    if (!scope && !(st = nb_scope_new(&own, NULL))) scope = own;
    nb_prepared_set_run_index(pp, 0);
    if (!st) st = nb_prepared_run(pp, scope, tensors, out);
    nb_scope_free(own);
    return st;
}

static nb_status run_once(nb_program *p, nb_scope *scope, int n_feed, const nb_feed *feeds, int n_fetch,
                          const char *const *fetch, nb_tensor **out)
{
    nb_tensor *tensors[64];
    nb_prepared *pp;
    nb_status st = prepare_feeds(&pp, p, n_feed, feeds, n_fetch, fetch, tensors);
    if (st) return st;
    st = run_zero(pp, scope, tensors, out);
    nb_prepared_free(pp);
    return st;
}

/* The loss of the forward program, prepared once for all the evaluations
 * of a check: preparing took most of a small op's check. */
static nb_status eval_loss(nb_prepared *pp, nb_scope *scope, nb_tensor **tensors, double *out)
{
    nb_tensor *t;
    nb_status st = run_zero(pp, scope, tensors, &t);
    if (st) return st;
    *out = nb_tensor_get(t, 0);
    nb_tensor_release(t);
    return NB_OK;
}

nb_status nb_gradcheck_program(nb_program *fwd, const char *loss, nb_names wrt_list, nb_scope *scope,
                               const nb_gradcheck_opts *opts, nb_gradcheck_report *rep)
{
    nb_gradcheck_opts o = opts ? *opts : (nb_gradcheck_opts){0};
    int n_wrt = wrt_list.n, n_feed = o.feeds.n;
    const char *const *wrt = wrt_list.v;
    const nb_feed *feeds = o.feeds.v;
    if (o.eps <= 0) o.eps = 1e-6;
    if (o.rtol <= 0) o.rtol = 1e-5;
    if (o.atol <= 0) o.atol = 1e-6;
    memset(rep, 0, sizeof *rep);
    nb_program *g;
    nb_status st = nb_program_clone(&g, fwd);
    if (st) return st;
    nb_backward_result res;
    nb_prepared *fwd_pp = NULL;
    nb_tensor *fwd_feeds[64];
    if ((st = nb_gradients(g, NB_NAMES_N(1, &loss), NB_NAMES_N(n_wrt, wrt),
                           &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &res))) {
        nb_program_free(g);
        return st;
    }
    const char **fetch = nb_calloc((size_t)n_wrt + 1, sizeof *fetch);
    nb_tensor **analytic = nb_calloc((size_t)n_wrt + 1, sizeof *analytic);
    int n_fetch = 0;
    if (!fetch || !analytic) {
        st = nb_error(NB_ERR_NOMEM, "gradcheck: out of memory");
        goto done;
    }
    for (int i = 0; i < n_wrt; i++)
        if (res.grads[i]) fetch[n_fetch++] = res.grads[i];
    nb_tensor **got = nb_calloc((size_t)n_fetch + 1, sizeof *got);
    if (!got || (st = run_once(g, scope, n_feed, feeds, n_fetch, fetch, got))) {
        nb_free(got);
        if (!st) st = nb_error(NB_ERR_NOMEM, "gradcheck: out of memory");
        goto done;
    }
    for (int i = 0, j = 0; i < n_wrt; i++) analytic[i] = res.grads[i] ? got[j++] : NULL;
    nb_free(got);
    if ((st = prepare_feeds(&fwd_pp, fwd, n_feed, feeds, 1, &loss, fwd_feeds))) goto done;

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
            st = eval_loss(fwd_pp, scope, fwd_feeds, &lp);
            nb_tensor_set(x, e, orig - o.eps);
            if (!st) st = eval_loss(fwd_pp, scope, fwd_feeds, &lm);
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
    nb_prepared_free(fwd_pp);
    for (int i = 0; analytic && i < n_wrt; i++) nb_tensor_release(analytic[i]);
    nb_free(analytic);
    nb_free(fetch);
    nb_backward_result_free(&res);
    nb_program_free(g);
    return st;
}

/* ---- op cases ----------------------------------------------------------- */

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
nb_value nb_gc_weighted_sum(nb_builder *b, int n, const nb_value *vals, const char *prefix, feeds *fs, nb_rng *rng)
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

void nb_gc_built_free(built_case *w)
{
    free_feeds(&w->fs);
    nb_builder_free(w->b);
    nb_program_free(w->p);
}

nb_status nb_gc_build(const nb_gradcheck_case *c, uint64_t seed, built_case *w)
{
    return nb_gc_build_as(c, seed, NB_F64, w);
}

nb_status nb_gc_build_as(const nb_gradcheck_case *c, uint64_t seed, nb_dtype float_dtype, built_case *w)
{
    memset(w, 0, sizeof *w);
    const nb_op_def *def = w->def = nb_op_find(c->op);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "gradcheck: unknown op '%s'", c->op);
    if (c->n_in > NB_MAX_SLOTS * 4) return nb_error(NB_ERR_ARG, "gradcheck %s: too many inputs", c->op);
    nb_rng_seed(&w->rng, seed);
    nb_status st = nb_program_new(&w->p);
    if (st || (st = nb_builder_new_record(&w->b, w->p, NULL))) return st;
    nb_builder *b = w->b;
    /* Which slot each flat input falls in, to honour NB_SLOT_NO_GRAD. */
    int slot_of[NB_MAX_SLOTS * 4], begin[NB_MAX_SLOTS + 1], pos[NB_MAX_SLOTS * 4];
    bool present[NB_MAX_SLOTS * 4];
    for (int k = 0; k < c->n_in; k++) present[k] = !c->in[k].absent, slot_of[k] = -1;
    if ((st = nb_assign_slots(def, true, c->n_in, present, begin, pos, c->op))) return st;
    for (int s = 0; s < NB_MAX_SLOTS; s++)
        for (int j = begin[s]; j < begin[s + 1]; j++) slot_of[pos[j]] = s;
    w->n_in = c->n_in;
    for (int k = 0; k < c->n_in; k++) {
        const nb_gc_input *gi = &c->in[k];
        if (gi->absent) {
            w->in[k] = NB_NONE;
            continue;
        }
        nb_dtype dt = nb_dtype_is_float(gi->dtype) ? float_dtype : gi->dtype;
        char name[32];
        snprintf(name, sizeof name, "x%d", k);
        w->in[k] = nb_data(b, name, dt, gi->ndim, gi->shape);
        nb_tensor *t;
        if ((st = nb_builder_status(b)) || (st = nb_tensor_new(&t, dt, gi->ndim, gi->shape))) return st;
        double lo = gi->lo, hi = gi->hi;
        if (lo == 0 && hi == 0) lo = -1, hi = 1;
        for (int64_t i = 0; i < nb_tensor_numel(t); i++) {
            double v = gi->fill == NB_GC_VALUES ? gi->values[i]
                : gi->fill == NB_GC_INTS        ? floor(lo + nb_rng_uniform(&w->rng) * (hi - lo + 1))
                                                : lo + nb_rng_uniform(&w->rng) * (hi - lo);
            nb_tensor_set(t, i, v);
        }
        if ((st = add_feed(&w->fs, name, t))) return st;
        bool no_grad = slot_of[k] >= 0 && (def->inputs[slot_of[k]].flags & NB_SLOT_NO_GRAD);
        if (nb_dtype_is_float(dt) && !no_grad) {
            w->wrt_index[w->n_wrt] = k;
            w->wrt[w->n_wrt++] = nb_value_name(w->in[k]);
        }
    }
    w->n_out = c->n_out ? c->n_out : nb_op_num_outputs(def);
    nb_block *g = nb_program_global_block(w->p);
    int first = g->n_ops;
    nb_emit(b, c->op, NB_VALUES_N(c->n_in, w->in), NB_ATTRS_N(c->n_attrs, c->attrs), w->n_out, w->out);
    if ((st = nb_builder_status(b))) return st;
    /* A composite op is the ops it expanded into: the first of them. */
    w->op = g->ops[first];
    for (int k = 0; k < w->n_out; k++)
        w->in_loss[k] = !c->loss_outputs || (k < 32 && (c->loss_outputs >> k & 1u)) ? w->out[k] : NB_NONE;
    w->loss = nb_gc_weighted_sum(b, w->n_out, w->in_loss, "w", &w->fs, &w->rng);
    if ((st = nb_builder_status(b))) return st;
    if (nb_is_none(w->loss) || w->n_wrt == 0)
        return nb_error(NB_ERR_ARG, "gradcheck %s (%s): nothing to differentiate", c->op, c->name ? c->name : "");
    return NB_OK;
}

nb_status nb_gradcheck_op(const nb_gradcheck_case *c, int order, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    nb_status st = nb_gc_build(c, seed, &w);
    nb_gradcheck_opts o = {.rtol = c->rtol};
    if (st) goto done;
    if (order == 1) {
        o.feeds = NB_FEEDS_N(w.fs.n, w.fs.f);
        st = nb_gradcheck_program(w.p, nb_value_name(w.loss), NB_NAMES_N(w.n_wrt, w.wrt), NULL, &o, rep);
    } else {
        /* Order k: the gradient of <grad, s> for random s, k - 1 times over
         * (order 3: <grad <grad L, s1>, s2>), checked by differences. */
        nb_value loss = w.loss;
        for (int k = 1; k < order && !st; k++) {
            nb_backward_result r;
            const char *ln = nb_value_name(loss);
            if ((st = nb_gradients(w.p, NB_NAMES_N(1, &ln), NB_NAMES_N(w.n_wrt, w.wrt),
                                   &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r)))
                break;
            nb_value gv[NB_MAX_SLOTS * 4];
            for (int i = 0; i < w.n_wrt; i++) gv[i] = r.grads[i] ? nb_value_by_name(w.b, r.grads[i]) : NB_NONE;
            nb_backward_result_free(&r);
            loss = nb_gc_weighted_sum(w.b, w.n_wrt, gv, k == 1 ? "s" : "u", &w.fs, &w.rng);
            if ((st = nb_builder_status(w.b))) break;
            if (nb_is_none(loss)) goto done; /* no gradient at all: nothing to check */
        }
        if (st) goto done;
        if (!o.rtol) o.rtol = order == 2 ? 1e-4 : 1e-3;
        o.feeds = NB_FEEDS_N(w.fs.n, w.fs.f);
        st = nb_gradcheck_program(w.p, nb_value_name(loss), NB_NAMES_N(w.n_wrt, w.wrt), NULL, &o, rep);
    }
done:
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    nb_gc_built_free(&w);
    return st;
}

nb_value nb_gc_random_input(built_case *w, const char *name, nb_var_info info, nb_tensor **value)
{
    nb_value v = nb_data(w->b, name, info.dtype, info.ndim, info.shape);
    nb_tensor *t = NULL;
    if (nb_builder_status(w->b) || random_tensor(&t, info.dtype, info.ndim, info.shape, &w->rng) ||
        add_feed(&w->fs, name, t))
        return NB_NONE;
    if (value) *value = t;
    return v;
}

nb_status nb_gc_run(built_case *w, int n, const char *const *fetches, nb_tensor **out)
{
    return run_once(w->p, NULL, w->fs.n, w->fs.f, n, fetches, out);
}

/* ---- forward mode ------------------------------------------------------------ */

static double dot(const nb_tensor *a, const nb_tensor *b)
{
    double s = 0;
    for (int64_t i = 0; i < nb_tensor_numel(a); i++) s += nb_tensor_get(a, i) * nb_tensor_get(b, i);
    return s;
}

static nb_tensor *feed_named(const feeds *fs, const char *name)
{
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].name, name)) return fs->f[i].tensor;
    return NULL;
}

/* Values of the loss outputs at x + h t (t the tangents). */
static nb_status outputs_at(built_case *w, const nb_tensor *const *tangents, double h, int n, const char *const *names,
                            nb_tensor **out)
{
    for (int j = 0; j < w->n_wrt; j++) {
        nb_tensor *x = feed_named(&w->fs, w->wrt[j]);
        for (int64_t i = 0; i < nb_tensor_numel(x); i++)
            nb_tensor_set(x, i, nb_tensor_get(x, i) + h * nb_tensor_get(tangents[j], i));
    }
    nb_status st = run_once(w->p, NULL, w->fs.n, w->fs.f, n, names, out);
    for (int j = 0; j < w->n_wrt; j++) {
        nb_tensor *x = feed_named(&w->fs, w->wrt[j]);
        for (int64_t i = 0; i < nb_tensor_numel(x); i++)
            nb_tensor_set(x, i, nb_tensor_get(x, i) - h * nb_tensor_get(tangents[j], i));
    }
    return st;
}

/* A composite op has no JVP rule: its outputs' tangents ty[k] are those of
 * the ops it expanded into, along the tangents t<j> of the inputs. */
static nb_status composite_tangents(built_case *w, nb_value *ty)
{
    const char *tn[NB_MAX_SLOTS * 4], *outs[NB_MAX_SLOTS * 4];
    char tbuf[NB_MAX_SLOTS * 4][32], *got[NB_MAX_SLOTS * 4] = {0};
    for (int j = 0; j < w->n_wrt; j++) {
        snprintf(tbuf[j], sizeof tbuf[j], "t%d", j);
        tn[j] = tbuf[j];
    }
    for (int k = 0; k < w->n_out; k++) outs[k] = nb_value_name(w->out[k]);
    nb_status st = nb_append_jvp(w->p, NB_NAMES_N(w->n_wrt, w->wrt), tn, NB_NAMES_N(w->n_out, outs), got);
    for (int k = 0; k < w->n_out; k++) {
        if (!st && got[k]) ty[k] = nb_value_by_name(w->b, got[k]);
        nb_free(got[k]);
    }
    return st;
}

nb_status nb_gradcheck_op_jvp(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    nb_status st = nb_gc_build(c, seed, &w);
    nb_tensor *tangents[NB_MAX_SLOTS * 4] = {0}, *num_p[64] = {0}, *num_m[64] = {0}, *got[128] = {0};
    const char *names[128];
    int n_y = 0, n_fetch = 0;
    if (st) goto done;
    if (!w.def->jvp && !w.def->expand) {
        st = nb_error(NB_ERR_UNSUPPORTED, "gradcheck %s: no JVP rule", c->op);
        goto done;
    }
    /* Random tangents for the inputs that take them; the op's JVP rule. */
    nb_value tx[NB_MAX_SLOTS * 4], ty[NB_MAX_SLOTS * 4], x[NB_MAX_SLOTS * 4], y[NB_MAX_SLOTS * 4];
    const nb_op *op = w.op;
    int n_x = nb_op_n_inputs(op), n_yall = nb_op_n_outputs(op);
    for (int k = 0; k < n_x; k++) {
        x[k] = nb_value_from_var(nb_block_find_var(nb_program_global_block(w.p), op->inputs[k]));
        tx[k] = NB_NONE;
    }
    for (int k = 0; k < n_yall; k++) {
        y[k] = nb_value_from_var(nb_block_find_var(nb_program_global_block(w.p), op->outputs[k]));
        ty[k] = NB_NONE;
    }
    for (int j = 0; j < w.n_wrt; j++) {
        nb_var_info info = nb_value_info(w.b, w.in[w.wrt_index[j]]);
        char name[32];
        snprintf(name, sizeof name, "t%d", j);
        nb_value t = nb_data(w.b, name, info.dtype, info.ndim, info.shape);
        nb_tensor *tv;
        if ((st = nb_builder_status(w.b)) || (st = random_tensor(&tv, info.dtype, info.ndim, info.shape, &w.rng)) ||
            (st = add_feed(&w.fs, name, tv)))
            goto done;
        tangents[j] = tv;
        for (int k = 0; k < n_x; k++)
            if (!strcmp(op->inputs[k], w.wrt[j])) tx[k] = t;
    }
    if (w.def->expand) {
        st = composite_tangents(&w, ty);
    } else {
        nb_grad_ctx g = {.def = w.def, .attrs = op->attrs, .x = x, .y = y, .tx = tx, .ty = ty};
        memcpy(g.in_begin, op->in_begin, sizeof g.in_begin);
        memcpy(g.out_begin, op->out_begin, sizeof g.out_begin);
        st = w.def->jvp(w.b, &g);
    }
    if (!st) st = nb_builder_status(w.b);
    if (st) goto done;
    /* The VJP of the same loss, for <JVP(t), w> = <t, VJP(w)>. */
    nb_backward_result r;
    const char *ln = nb_value_name(w.loss);
    if ((st = nb_gradients(w.p, NB_NAMES_N(1, &ln), NB_NAMES_N(w.n_wrt, w.wrt),
                           &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r)))
        goto done;
    int loss_out[64];
    for (int k = 0; k < w.n_out && k < 64; k++) {
        if (nb_is_none(w.in_loss[k]) || !nb_dtype_is_float(nb_value_info(w.b, w.out[k]).dtype)) continue;
        loss_out[n_y++] = k;
    }
    for (int i = 0; i < n_y; i++) names[n_fetch++] = nb_value_name(w.out[loss_out[i]]);
    int first_ty = n_fetch;
    for (int i = 0; i < n_y; i++)
        names[n_fetch++] =
            nb_is_none(ty[loss_out[i]]) ? nb_value_name(w.out[loss_out[i]]) : nb_value_name(ty[loss_out[i]]);
    int first_g = n_fetch;
    for (int j = 0; j < w.n_wrt; j++) names[n_fetch++] = r.grads[j] ? r.grads[j] : w.wrt[j];
    /* Forward mode derived from reverse mode: the pullback
     * w -> VJP(w) is linear in w, so the gradient of <VJP(w), t> with
     * respect to w is J t. Needs the pullback's own rules, which the fused
     * grad ops of skip_second_order cases lack. */
    int first_d = n_fetch, n_derived = 0;
    bool derived_zero[64] = {false};
    if (!c->skip_second_order) {
        nb_value terms[NB_MAX_SLOTS * 4];
        int m = 0;
        for (int j = 0; j < w.n_wrt; j++)
            if (r.grads[j]) {
                char tn[32];
                snprintf(tn, sizeof tn, "t%d", j);
                terms[m++] = nb_reduce_sum(
                    w.b, nb_mul(w.b, nb_value_by_name(w.b, r.grads[j]), nb_value_by_name(w.b, tn)), 0, NULL, false);
            }
        if (m > 0) {
            nb_value s = m == 1 ? terms[0] : nb_sum(w.b, m, terms);
            const char *sn = nb_value_name(s), *wn[64];
            char wbuf[64][32];
            for (int i = 0; i < n_y; i++) {
                snprintf(wbuf[i], sizeof wbuf[i], "w%d", loss_out[i]);
                wn[i] = wbuf[i];
            }
            nb_backward_result d;
            if ((st = nb_builder_status(w.b)) ||
                (st = nb_gradients(w.p, NB_NAMES_N(1, &sn), NB_NAMES_N(n_y, wn),
                                   &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &d))) {
                nb_backward_result_free(&r);
                goto done;
            }
            for (int i = 0; i < n_y; i++) names[n_fetch++] = d.grads[i] ? nb_strdup(d.grads[i]) : NULL;
            n_derived = n_y;
            nb_backward_result_free(&d);
            for (int i = 0; i < n_y; i++)
                if (!names[first_d + i]) { /* no path from w to it: the derived JVP is zero */
                    derived_zero[i] = true;
                    names[first_d + i] = nb_strdup(names[i]);
                }
        }
    }
    st = run_once(w.p, NULL, w.fs.n, w.fs.f, n_fetch, names, got);
    for (int i = first_d; i < first_d + n_derived; i++) nb_free((char *)names[i]);
    if (!st) st = outputs_at(&w, (const nb_tensor *const *)tangents, 1e-6, n_y, names, num_p);
    if (!st) st = outputs_at(&w, (const nb_tensor *const *)tangents, -1e-6, n_y, names, num_m);
    if (st) {
        nb_backward_result_free(&r);
        goto done;
    }
    double rtol = c->rtol ? c->rtol : 1e-5, atol = 1e-6, lhs = 0, rhs = 0;
    for (int i = 0; i < n_y; i++) {
        bool zero = nb_is_none(ty[loss_out[i]]);
        const nb_tensor *t = got[first_ty + i];
        for (int64_t e = 0; e < nb_tensor_numel(t); e++) {
            double ana = zero ? 0 : nb_tensor_get(t, e);
            double num = (nb_tensor_get(num_p[i], e) - nb_tensor_get(num_m[i], e)) / 2e-6, err = fabs(ana - num);
            rep->checked++;
            rep->failed += !(err <= atol + rtol * fabs(num));
            if (err > rep->max_abs_err || isnan(err)) {
                rep->max_abs_err = err;
                snprintf(rep->worst, sizeof rep->worst, "output %d [%lld]: jvp %.10g, numeric %.10g", loss_out[i],
                         (long long)e, ana, num);
            }
        }
        char wname[32];
        snprintf(wname, sizeof wname, "w%d", loss_out[i]);
        if (!zero) lhs += dot(t, feed_named(&w.fs, wname));
        /* The derived JVP agrees with the native one, element by element. */
        for (int64_t e = 0; i < n_derived && e < nb_tensor_numel(t); e++) {
            double nat = zero ? 0 : nb_tensor_get(t, e), der = derived_zero[i] ? 0 : nb_tensor_get(got[first_d + i], e);
            double err = fabs(nat - der);
            rep->checked++;
            if (!(err <= 1e-9 + 1e-7 * fabs(nat))) {
                rep->failed++;
                if (err > rep->max_abs_err) rep->max_abs_err = err;
                snprintf(rep->worst, sizeof rep->worst,
                         "output %d [%lld]: native jvp %.10g, derived from reverse %.10g", loss_out[i], (long long)e,
                         nat, der);
            }
        }
    }
    for (int j = 0; j < w.n_wrt; j++)
        if (r.grads[j]) rhs += dot(tangents[j], got[first_g + j]);
    nb_backward_result_free(&r);
    /* Tight unless the case says otherwise (a float32 output rounds its
     * tangent, and the case's rtol allows for that). */
    double ierr = fabs(lhs - rhs), irtol = c->rtol ? c->rtol : 1e-8;
    rep->checked++;
    if (!(ierr <= 1e-8 + irtol * fabs(rhs))) {
        rep->failed++;
        if (ierr > rep->max_abs_err) rep->max_abs_err = ierr;
        snprintf(rep->worst, sizeof rep->worst, "<JVP(t), w> = %.12g but <t, VJP(w)> = %.12g", lhs, rhs);
    }
done:
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    for (int i = 0; i < 64; i++) {
        nb_tensor_release(num_p[i]);
        nb_tensor_release(num_m[i]);
    }
    for (int i = 0; i < n_fetch; i++) nb_tensor_release(got[i]);
    nb_gc_built_free(&w);
    return st;
}
