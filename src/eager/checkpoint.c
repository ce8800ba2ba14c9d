/* nb_checkpoint: recomputation on the tape (torch.utils.checkpoint). The
 * function runs without recording, so the tape keeps none of its
 * intermediates; one node stands for it, keeping its inputs and the
 * parameters it read. That node's backward runs the function again, with
 * recording on, its random ops starting from the generator states they
 * started from the first time, the layer names as they were, and fresh
 * stand-ins for the inputs and parameters, then takes the gradients
 * of the outputs with respect to the stand-ins (a backward pass nested in
 * the running one: the engine keeps each task's state apart). */
#include <string.h>
#include "nabla/device.h"
#include "nabla/ops.h"
#include "autograd.h"

typedef struct ckpt {
    nb_builder *b;
    nb_checkpoint_fn f;
    void *ctx;
    int n_in, n_out;
    nb_tensor **in;        /* the inputs (strong): what the checkpoint saves */
    nb_param_trace params; /* the parameters f read, and their names */
    nb_strmap names;       /* the layer names before f */
    nb_rng_tape draws;     /* the generator states f's random ops started from */
} ckpt;

static void ckpt_free(void *p)
{
    ckpt *c = p;
    for (int i = 0; c->in && i < c->n_in; i++) nb_tensor_release(c->in[i]);
    nb_free(c->in);
    nb_param_trace_free(&c->params);
    nb_strmap_free(&c->names);
    nb_free(c->draws.states);
    nb_free(c);
}

/* A stand-in for src: a fresh leaf on the same data (or, when the backward
 * is recorded, an identity op on it, so that the gradients it gives stay
 * connected to src for derivatives of higher order). */
static nb_status stand_in(nb_builder *b, nb_tensor *src, bool create_graph, nb_tensor **out)
{
    if (create_graph) {
        nb_value v = nb_assign(b, nb_eager_value(b, src));
        if (nb_builder_status(b)) return nb_error(nb_builder_status(b), "%s", nb_builder_error(b));
        *out = nb_tensor_retain(nb_eager_tensor(v));
        return NB_OK;
    }
    nb_status st = nb_tensor_detach(out, src);
    if (!st) st = nb_tensor_set_requires_grad(*out, true);
    return st;
}

static nb_status ckpt_backward(void *p, int n_out, nb_tensor *const *dy, int n_all, const bool *want, nb_tensor **dx,
                               bool create_graph)
{
    ckpt *c = p;
    nb_builder *b = c->b;
    int n_in = c->n_in, n_par = c->params.n;

    nb_tensor **alias = nb_calloc((size_t)n_all + 1, sizeof *alias),
              **swapped = nb_calloc((size_t)n_par + 1, sizeof *swapped);
    nb_value *in = nb_calloc((size_t)n_in + 1, sizeof *in), *out = nb_calloc((size_t)n_out + 1, sizeof *out);
    nb_tensor **outs = nb_calloc((size_t)n_out + 1, sizeof *outs),
              **gouts = nb_calloc((size_t)n_out + 1, sizeof *gouts);
    nb_tensor **ins = nb_calloc((size_t)n_all + 1, sizeof *ins), **grads = nb_calloc((size_t)n_all + 1, sizeof *grads);
    int *where = nb_calloc((size_t)n_all + 1, sizeof *where);
    nb_status st = alias && swapped && in && out && outs && gouts && ins && grads && where
        ? NB_OK
        : nb_error(NB_ERR_NOMEM, "checkpoint: out of memory");
    int mark = nb_eager_values_mark(b), n_want = 0, n_y = 0;
    nb_grad_mode_push(true);
    for (int i = 0; i < n_all && !st; i++) {
        nb_tensor *src = i < n_in ? c->in[i] : c->params.t[i - n_in];
        if (want[i]) st = stand_in(b, src, create_graph, &alias[i]);
        else alias[i] = nb_tensor_retain(src);
    }
    /* f finds the stand-ins where it finds its parameters. */
    for (int j = 0; j < n_par && !st; j++) {
        if (!(swapped[j] = nb_eager_swap_param(b, c->params.name[j], alias[n_in + j])))
            st = nb_error(NB_ERR_STATE, "checkpoint: parameter '%s' is gone from the builder", c->params.name[j]);
    }
    /* Each run of f starts from a copy of the state before the first:
     * a node may be run again (retain_graph, a second derivative). */
    nb_strmap run;
    if (!st && nb_strmap_copy(&run, &c->names)) st = nb_error(NB_ERR_NOMEM, "checkpoint: out of memory");
    else if (!st) {
        nb_eager_names_swap(b, &run);
        c->draws.pos = 0;
        nb_rng_tape *outer = nb_eager_rng_replay(b, &c->draws);
        for (int i = 0; i < n_in; i++) in[i] = nb_eager_value(b, alias[i]);
        st = c->f(b, c->ctx, n_in, in, n_out, out);
        if (!st) st = nb_builder_status(b);
        if (st && nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
        nb_eager_rng_replay(b, outer);
        nb_eager_names_swap(b, &run);
        nb_strmap_free(&run);
    }
    /* The registry takes its parameters back (and a reference of its own). */
    for (int j = 0; swapped && j < n_par; j++)
        if (swapped[j]) {
            nb_tensor_release(nb_eager_swap_param(b, c->params.name[j], swapped[j]));
            nb_tensor_release(swapped[j]);
        }
    for (int k = 0; k < n_out && !st; k++) {
        nb_tensor *y = nb_eager_tensor(out[k]);
        if (!dy[k] || !y || !nb_tensor_requires_grad(y)) continue;
        outs[n_y] = y;
        gouts[n_y++] = dy[k];
    }
    for (int i = 0; i < n_all && !st; i++)
        if (want[i]) {
            where[n_want] = i;
            ins[n_want++] = alias[i];
        }
    if (!st && n_y > 0 && n_want > 0)
        st = nb_autograd_grad(NB_TENSORS_N(n_y, outs), gouts, NB_TENSORS_N(n_want, ins),
                              NB_ALLOW_UNUSED | (create_graph ? NB_CREATE_GRAPH : 0), grads);
    for (int k = 0; k < n_want; k++) {
        if (!st) dx[where[k]] = grads[k];
        else nb_tensor_release(grads[k]);
    }
    nb_grad_mode_pop();
    nb_eager_release_values_after(b, mark);
    for (int i = 0; alias && i < n_all; i++) nb_tensor_release(alias[i]);
    nb_free(alias);
    nb_free(swapped);
    nb_free(in);
    nb_free(out);
    nb_free(outs);
    nb_free(gouts);
    nb_free(ins);
    nb_free(grads);
    nb_free(where);
    return st;
}

nb_status nb_checkpoint(nb_builder *b, nb_checkpoint_fn f, void *ctx, nb_values ins, int n_out, nb_value *out)
{
    int n_in = ins.n;
    const nb_value *in = ins.v;
    if (!b || !f || n_in < 0 || n_out < 1 || (n_in && !in) || !out || !nb_builder_is_eager(b))
        return nb_error(NB_ERR_ARG,
                        "checkpoint: needs an eager builder, a function, its inputs and room for its "
                        "outputs");
    for (int k = 0; k < n_out; k++) out[k] = NB_NONE;
    for (int i = 0; i < n_in; i++)
        if (!nb_eager_tensor(in[i])) return nb_error(NB_ERR_ARG, "checkpoint: input %d is not an eager value", i);
    ckpt *c = nb_calloc(1, sizeof *c);
    if (!c) return nb_error(NB_ERR_NOMEM, "checkpoint: out of memory");
    *c = (ckpt){.b = b, .f = f, .ctx = ctx, .n_in = n_in, .n_out = n_out};
    nb_status st = (c->in = nb_calloc((size_t)n_in + 1, sizeof *c->in))
        ? NB_OK
        : nb_error(NB_ERR_NOMEM, "checkpoint: out of memory");
    for (int i = 0; i < n_in && !st; i++) c->in[i] = nb_tensor_retain(nb_eager_tensor(in[i]));
    if (!st) st = nb_eager_names_save(b, &c->names);
    bool record = nb_grad_mode_enabled();
    if (!st) {
        /* f runs without a tape; the parameters it reads are noted. */
        nb_param_trace *outer = nb_eager_trace_params(b, &c->params);
        st = nb_eager_rng_record(b, &c->draws);
        bool recording = !st;
        nb_grad_mode_push(false);
        if (!st) st = f(b, ctx, n_in, in, n_out, out);
        nb_grad_mode_pop();
        if (recording) nb_eager_rng_record(b, NULL);
        nb_eager_trace_params(b, outer);
        /* A checkpoint around this one reads what this one read. */
        for (int j = 0; outer && j < c->params.n; j++) nb_param_trace_add(outer, c->params.name[j], c->params.t[j]);
        if (!st) st = nb_builder_status(b);
        if (st && nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
        if (!st && c->params.failed) st = nb_error(NB_ERR_NOMEM, "checkpoint: out of memory noting parameters");
    }
    int n_all = n_in + c->params.n;
    bool any = false;
    for (int i = 0; i < n_all && !st; i++) any |= nb_tensor_requires_grad(i < n_in ? c->in[i] : c->params.t[i - n_in]);
    nb_tensor **all = NULL, **outs = NULL;
    if (!st && record && any) {
        all = nb_calloc((size_t)n_all + 1, sizeof *all);
        outs = nb_calloc((size_t)n_out + 1, sizeof *outs);
        if (!all || !outs) st = nb_error(NB_ERR_NOMEM, "checkpoint: out of memory");
        for (int i = 0; !st && i < n_all; i++) all[i] = i < n_in ? c->in[i] : c->params.t[i - n_in];
        for (int k = 0; !st && k < n_out; k++) {
            nb_tensor *y = nb_eager_tensor(out[k]);
            if (!y) {
                st = nb_error(NB_ERR_ARG, "checkpoint: the function left output %d unset", k);
                break;
            }
            /* An output must be a tensor of its own to take the node as its
             * history: one that is an input or a parameter is copied. */
            bool taken = nb_tensor_requires_grad(y);
            for (int i = 0; i < n_all && !taken; i++) taken = all[i] == y;
            if (taken) {
                nb_grad_mode_push(false);
                out[k] = nb_assign(b, out[k]);
                nb_grad_mode_pop();
                if ((st = nb_builder_status(b))) {
                    nb_error(st, "%s", nb_builder_error(b));
                    break;
                }
                y = nb_eager_tensor(out[k]);
            }
            outs[k] = y;
        }
        if (!st) {
            st = nb_record_fn_node("checkpoint", ckpt_backward, c, ckpt_free, n_all, all, n_out, outs);
            c = NULL; /* the node owns it now */
        }
    }
    nb_free(all);
    nb_free(outs);
    if (c) ckpt_free(c);
    if (st)
        for (int k = 0; k < n_out; k++) out[k] = NB_NONE;
    return st;
}
