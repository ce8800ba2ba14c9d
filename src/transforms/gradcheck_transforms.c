/* The transforms column of the check matrix (nabla/gradcheck.h): the
 * case's op and loss written as a function, differentiated by nb_grad, give
 * the static program's gradients. It sits here, above the checker of
 * autodiff/, because it calls the transforms. */
#include <string.h>
#include "nabla/autodiff.h"
#include "nabla/gradcheck.h"
#include "nabla/ops.h"
#include "nabla/transforms.h"
#include "../autodiff/gradcheck_internal.h"

typedef struct case_fn {
    built_case *w;
    const nb_gradcheck_case *c;
} case_fn;

static nb_tensor *fed(const built_case *w, const char *name)
{
    for (int f = 0; f < w->fs.n; f++)
        if (!strcmp(w->fs.f[f].name, name)) return w->fs.f[f].tensor;
    return NULL;
}

/* The loss as a function of the inputs that take gradients; the other
 * inputs and the weights are constants of the function. */
static nb_status loss_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    case_fn *cf = ctx;
    built_case *w = cf->w;
    nb_value x[NB_MAX_SLOTS * 4], y[NB_MAX_SLOTS * 4], terms[NB_MAX_SLOTS * 4];
    for (int k = 0; k < w->n_in; k++)
        x[k] = nb_is_none(w->in[k]) ? NB_NONE : nb_eager_value(b, fed(w, nb_value_name(w->in[k])));
    for (int j = 0; j < w->n_wrt; j++) x[w->wrt_index[j]] = in[j];
    nb_status st =
        nb_emit(b, cf->c->op, NB_VALUES_N(w->n_in, x), NB_ATTRS_N(cf->c->n_attrs, cf->c->attrs), w->n_out, y);
    int m = 0;
    for (int k = 0; !st && k < w->n_out; k++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", k);
        nb_tensor *wt = nb_is_none(w->in_loss[k]) ? NULL : fed(w, name);
        if (wt) terms[m++] = nb_reduce_sum(b, nb_mul(b, y[k], nb_eager_value(b, wt)), 0, NULL, false);
    }
    if (st) return st;
    out[0] = m == 1 ? terms[0] : nb_sum(b, m, terms);
    return nb_builder_status(b);
}

nb_status nb_gradcheck_transforms(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    nb_backward_result r = {0};
    bool have = false;
    nb_tensor *sg[NB_MAX_SLOTS * 4] = {0}, *tg[NB_MAX_SLOTS * 4] = {0}, *primals[NB_MAX_SLOTS * 4];
    nb_status st = nb_gc_build(c, seed, &w);
    if (!st && (w.def->flags & NB_OP_RANDOM)) goto done; /* its draws differ between the modes */
    const char *ln = st ? NULL : nb_value_name(w.loss);
    if (!st)
        st = nb_gradients(w.p, NB_NAMES_N(1, &ln), NB_NAMES_N(w.n_wrt, w.wrt),
                          &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r);
    have = ln && !st;
    const char *fetch[NB_MAX_SLOTS * 4];
    int gi[NB_MAX_SLOTS * 4], m = 0;
    for (int i = 0; !st && i < w.n_wrt; i++)
        if (r.grads[i]) gi[m] = i, fetch[m++] = r.grads[i];
    if (!st && m) st = nb_gc_run(&w, m, fetch, sg);
    for (int j = 0; !st && j < w.n_wrt; j++) primals[j] = fed(&w, w.wrt[j]);
    case_fn cf = {&w, c};
    nb_function f = {loss_fn, w.n_wrt, 1, &cf};
    if (!st) st = nb_grad(&f, primals, NULL, tg, NULL);
    for (int k = 0; !st && k < m; k++) {
        char what[64];
        snprintf(what, sizeof what, "nb_grad of %s", w.wrt[gi[k]]);
        const nb_tensor *t = tg[gi[k]], *s = sg[k];
        if (!t || nb_tensor_numel(t) != nb_tensor_numel(s)) {
            rep->checked++, rep->failed++;
            snprintf(rep->worst, sizeof rep->worst, "%s: missing or of another size", what);
            continue;
        }
        for (int64_t e = 0; e < nb_tensor_numel(s); e++) {
            double a = nb_tensor_get(t, e), b = nb_tensor_get(s, e), err = a > b ? a - b : b - a;
            rep->checked++;
            if (!(err <= 1e-12 + 1e-10 * (b < 0 ? -b : b))) {
                rep->failed++;
                snprintf(rep->worst, sizeof rep->worst, "%s[%lld]: %.10g against the program's %.10g", what,
                         (long long)e, a, b);
            }
        }
    }
done:
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    for (int k = 0; k < NB_MAX_SLOTS * 4; k++) nb_tensor_release(sg[k]), nb_tensor_release(tg[k]);
    if (have) nb_backward_result_free(&r);
    nb_gc_built_free(&w);
    return st;
}
