/* The closure check: "to any order" holds only if every op that a VJP or JVP
 * rule emits has rules of its own (or is marked as having a zero derivative,
 * NB_OP_NOT_DIFFERENTIABLE). A case's op is differentiated in reverse mode,
 * then its gradient again (the ops the first pass's rules emitted now meet
 * their own rules), and in forward mode; every op type that appears is
 * checked. */
#include <stdio.h>
#include <string.h>
#include "nabla/autodiff.h"
#include "nabla/device.h"
#include "nabla/gradcheck.h"
#include "nabla/ops.h"
#include "gradcheck_internal.h"

bool nb_op_rules_closed(const nb_op_def *def)
{
    /* A composite op's derivatives are those of the ops it expands into. */
    return def && ((def->flags & NB_OP_NOT_DIFFERENTIABLE) || (def->vjp && def->jvp) || def->expand);
}

/* Notes each op of `p` after the first `from` of block 0 (and every op of
 * the other blocks): one more checked, and those without rules in `rep`. */
static void look_at(const nb_program *p, int from, nb_gradcheck_report *rep, const char **seen, int *n_seen)
{
    for (int k = 0; k < p->n_blocks; k++)
        for (int i = k ? 0 : from; i < p->blocks[k]->n_ops; i++) {
            const nb_op_def *def = p->blocks[k]->ops[i]->def;
            bool known = false;
            for (int j = 0; j < *n_seen && !known; j++) known = !strcmp(seen[j], def->name);
            if (known || *n_seen == 256) continue;
            seen[(*n_seen)++] = def->name;
            rep->checked++;
            if (nb_op_rules_closed(def)) continue;
            rep->failed++;
            size_t u = strlen(rep->worst);
            snprintf(rep->worst + u, sizeof rep->worst - u, "%s%s (%s)", u ? ", " : "", def->name,
                     !def->vjp && !def->jvp ? "no VJP or JVP rule"
                         : !def->vjp        ? "no VJP rule"
                                            : "no JVP rule");
        }
}

/* A pass that stopped at an op without a rule is a finding, not a failure
 * to check: noted in rep, and NB_OK. */
static nb_status broken_chain(nb_status st, nb_gradcheck_report *rep)
{
    if (st != NB_ERR_UNSUPPORTED) return st;
    rep->failed++;
    size_t u = strlen(rep->worst);
    snprintf(rep->worst + u, sizeof rep->worst - u, "%s%s", u ? "; " : "", nb_last_error());
    return NB_OK;
}

nb_status nb_gradcheck_closure(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *rep)
{
    memset(rep, 0, sizeof *rep);
    built_case w;
    nb_status st = nb_gc_build(c, seed, &w);
    const char *seen[256];
    int n_seen = 0;
    if (st) goto done;
    const nb_block *g0 = nb_program_global_block(w.p);
    int from = g0->n_ops - 1;
    while (from > 0 && g0->ops[from] != w.op) from--; /* the op under test, then the loss */
    /* Reverse, then reverse again on <grad, s>. */
    nb_backward_result r1 = {0}, r2 = {0};
    const char *ln = nb_value_name(w.loss);
    if ((st = nb_gradients(w.p, NB_NAMES_N(1, &ln), NB_NAMES_N(w.n_wrt, w.wrt),
                           &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r1)))
        goto done;
    nb_value gv[NB_MAX_SLOTS * 4];
    for (int i = 0; i < w.n_wrt; i++) gv[i] = r1.grads[i] ? nb_value_by_name(w.b, r1.grads[i]) : NB_NONE;
    nb_value loss2 = nb_gc_weighted_sum(w.b, w.n_wrt, gv, "s", &w.fs, &w.rng);
    if ((st = nb_builder_status(w.b))) goto free_r1;
    const char *l2 = nb_value_name(loss2);
    bool have_r2 = false;
    if (!nb_is_none(loss2)) {
        st = nb_gradients(w.p, NB_NAMES_N(1, &l2), NB_NAMES_N(w.n_wrt, w.wrt),
                          &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r2);
        have_r2 = !st;
        st = broken_chain(st, rep);
        if (st) goto free_r1;
    }
    /* Forward mode from every input that takes a gradient. */
    const char *tangents[NB_MAX_SLOTS * 4];
    char names[NB_MAX_SLOTS * 4][32];
    for (int i = 0; i < w.n_wrt; i++) {
        nb_var_info info = nb_value_info(w.b, w.in[w.wrt_index[i]]);
        snprintf(names[i], sizeof names[i], "tangent%d", i);
        nb_data(w.b, names[i], info.dtype, info.ndim, info.shape);
        tangents[i] = names[i];
    }
    char *out = NULL;
    if (!(st = nb_builder_status(w.b)))
        st = broken_chain(nb_append_jvp(w.p, NB_NAMES_N(w.n_wrt, w.wrt), tangents, NB_NAMES_N(1, &ln), &out), rep);
    nb_free(out);
    if (!st) look_at(w.p, from, rep, seen, &n_seen);
    if (have_r2) nb_backward_result_free(&r2);
free_r1:
    nb_backward_result_free(&r1);
done:
    if (st && w.b && nb_builder_status(w.b)) nb_error(st, "%s", nb_builder_error(w.b));
    nb_gc_built_free(&w);
    return st;
}
