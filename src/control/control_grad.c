/* Gradient rules' side of the control-flow ops (see control_grad.h). */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "control_grad.h"
#include "../autodiff/backward_internal.h"

const char *nb_ctl_name(nb_value v) { return nb_is_none(v) ? "" : nb_value_name(v); }

void nb_sub_grad_free(nb_sub_grad *g)
{
    for (int i = 0; i < g->n_seeds; i++) nb_free((char *)g->seeds[i]);
    for (int i = 0; i < g->n_grads; i++) nb_free((char *)g->grads[i]);
    nb_free(g->seeds);
    nb_free(g->grads);
    memset(g, 0, sizeof *g);
}

nb_status nb_ctl_sub_backward(nb_builder *b, const char *who, int fwd_block, int n_targets, const char *const *targets,
                              int n_inputs, const char *const *inputs, nb_sub_grad *out)
{
    memset(out, 0, sizeof *out);
    nb_program *p = nb_builder_program(b);
    if (!p)
        return nb_builder_fail(b, NB_ERR_UNSUPPORTED,
                               "%s: its gradient rule needs a static program (eagerly, the helpers of nabla/control.h "
                               "run on the tape instead)",
                               who);
    out->seeds = nb_calloc((size_t)n_targets + 1, sizeof *out->seeds);
    out->grads = nb_calloc((size_t)n_inputs + 1, sizeof *out->grads);
    if (!out->seeds || !out->grads) {
        nb_sub_grad_free(out);
        return nb_builder_fail(b, NB_ERR_NOMEM, "%s: out of memory", who);
    }
    nb_status st = NB_OK;
    for (int i = 0; i < n_targets && !st; i++) {
        char name[512];
        /* One seed per target position: a var may be two results at once
         * (an RNN's new state is its memory and its output). */
        snprintf(name, sizeof name, "%s@GRAD@SEED@%d", targets[i], i);
        if (!(out->seeds[out->n_seeds++] = nb_strdup(name))) st = NB_ERR_NOMEM;
    }
    nb_backward_result r = {0};
    if (!st)
        st = nb_backward_sub_block(p, fwd_block, NB_NAMES_N(n_targets, targets), out->seeds,
                                   NB_NAMES_N(n_inputs, inputs), &out->block, &r);
    for (int i = 0; i < n_inputs && !st; i++) {
        const char *g = i < r.n_grads && r.grads[i] ? r.grads[i] : "";
        if (!(out->grads[out->n_grads++] = nb_strdup(g))) st = NB_ERR_NOMEM;
    }
    nb_backward_result_free(&r);
    if (st) {
        nb_sub_grad_free(out);
        if (st == NB_ERR_NOMEM) nb_error(st, "%s: out of memory", who);
        else nb_error_context(st, "%s: differentiating its block %d", who, fwd_block);
        return nb_builder_fail(b, st, "%s", nb_last_error()); /* formats before it records */
    }
    return NB_OK;
}

void *nb_ctl_scratch_take(nb_ctl_scratch *s, int n, size_t size)
{
    void *p = s->failed || s->n == NB_CTL_SCRATCH_MAX ? NULL : nb_calloc((size_t)n + 1, size);
    if (!p) s->failed = true;
    else s->p[s->n++] = p;
    return p;
}

void nb_ctl_scratch_free(nb_ctl_scratch *s)
{
    for (int i = 0; i < s->n; i++) nb_free(s->p[i]);
    s->n = 0;
}
