/* nb_vmap_emit on a record builder: a batching builder in front of it,
 * whose values are the physical vars (a side table holds their batch
 * dims), whose info gives their logical (per-example) shapes, and whose
 * emit runs the op's batching rule (or the loop over the batch) against the
 * builder behind it, so the program receives the batched ops. The same
 * rules serve the eager backend. Batching builders stack: a vmap inside
 * the mapped function puts one in front of this one. */
#include <stdio.h>
#include <string.h>
#include "nabla/device.h"
#include "nabla/ops.h"
#include "../builder/builder_internal.h"
#include "../core/strmap.h"
#include "../ops/batch_rules.h"
#include "../ops/op_internal.h"
#include "../program/record.h"
#include "vmap_internal.h"
#include "nabla/program.h"

#define MAX_ARGS 64

typedef struct vmap_state {
    nb_builder *inner;
    int64_t batch;
    nb_strmap bdims; /* var name -> its batch dim + 1 */
    nb_value ref;    /* a batched input, whose batch dim gives the size where it is not known */
    int ref_bdim;
} vmap_state;

static vmap_state *state_of(const nb_builder *b) { return b->state; }

static int bdim_of(const nb_builder *b, nb_value v)
{
    if (nb_is_none(v)) return -1;
    return (int)(intptr_t)nb_strmap_get(&state_of(b)->bdims, ((nb_var *)v.p)->name, NULL) - 1;
}

int nb_vmap_bdim(const nb_builder *b, nb_value v) { return bdim_of(b, v); }
nb_builder *nb_vmap_inner(const nb_builder *b) { return state_of(b)->inner; }
int64_t nb_vmap_batch(const nb_builder *b) { return state_of(b)->batch; }

nb_value nb_vmap_broadcast_front(nb_builder *vb, nb_value v)
{
    vmap_state *s = state_of(vb);
    if (s->batch >= 0) return nb_vmap_broadcast(s->inner, v, s->batch, 0);
    nb_var_info i = nb_value_info(s->inner, v);
    int64_t shape[NB_MAX_DIMS + 1] = {1};
    bool known = !nb_is_none(s->ref);
    for (int d = 0; d < i.ndim; d++) known &= (shape[d + 1] = i.shape[d]) >= 0;
    if (!known) {
        nb_builder_fail(vb, NB_ERR_UNSUPPORTED,
                        "vmap: a value shared by the examples, of shape with unknown dims, "
                        "cannot be broadcast along a batch of unknown size");
        return NB_NONE;
    }
    nb_value like = NB_NONE;
    nb_attr attrs[] = {NB_ATTR_INTS_N("shape", i.ndim + 1, shape), NB_ATTR_INT("input_dim_idx", s->ref_bdim)};
    nb_emit(s->inner, "fill_constant_batch_size_like", NB_VALUES(s->ref), NB_ATTRS_N(2, attrs), 1, &like);
    return nb_expand_as(s->inner, nb_unsqueeze(s->inner, v, 1, (const int64_t[]){0}), like);
}

static nb_status set_bdim(nb_builder *b, nb_value v, int bdim)
{
    if (nb_strmap_put(&state_of(b)->bdims, ((nb_var *)v.p)->name, (void *)(intptr_t)(bdim + 1)))
        return nb_error(NB_ERR_NOMEM, "vmap: out of memory");
    return NB_OK;
}

nb_status nb_vmap_set_bdim(nb_builder *b, nb_value v, int bdim) { return set_bdim(b, v, bdim); }

static nb_var_info vmap_info(const nb_builder *b, nb_value v)
{
    nb_var_info i = nb_value_info(state_of(b)->inner, v);
    int d = bdim_of(b, v);
    if (d < 0) return i;
    for (int k = d; k + 1 < i.ndim; k++) i.shape[k] = i.shape[k + 1];
    i.ndim--;
    return i;
}

static nb_status emit_batched(nb_builder *b, const nb_op_def *def, int n_in, const nb_value *in, int n_attrs,
                              const nb_attr *attrs, int n_out, nb_value *out);

/* Ops go where the batching builder is (a control-flow op's sub-block,
 * while its body is recorded), with its role. */
static nb_status vmap_emit(nb_builder *b, const char *type, int n_in, const nb_value *in, int n_attrs,
                           const nb_attr *attrs, int n_out, nb_value *out)
{
    const nb_op_def *def = nb_op_find(type);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "unknown op '%s'", type);
    if (def->expand) return nb_op_expand(b, def, n_in, in, n_attrs, attrs, n_out, out);
    if (n_out < 0) n_out = nb_op_default_outputs(def);
    nb_builder *inner = state_of(b)->inner;
    nb_block *block = nb_builder_block(inner);
    nb_op_role role = nb_builder_role(inner);
    nb_builder_set_block(inner, nb_builder_block(b));
    nb_builder_set_role(inner, nb_builder_role(b));
    nb_status st = emit_batched(b, def, n_in, in, n_attrs, attrs, n_out, out);
    nb_builder_set_block(inner, block);
    nb_builder_set_role(inner, role);
    return st;
}

static nb_status emit_batched(nb_builder *b, const nb_op_def *def, int n_in, const nb_value *in, int n_attrs,
                              const nb_attr *attrs, int n_out, nb_value *out)
{
    const char *type = def->name;
    vmap_state *s = state_of(b);
    if (n_in > MAX_ARGS || n_out > MAX_ARGS) return nb_error(NB_ERR_ARG, "vmap: %s: too many inputs or outputs", type);
    int xb[MAX_ARGS], yb[MAX_ARGS];
    nb_var_info xi[MAX_ARGS], yi[MAX_ARGS];
    bool any = false;
    for (int i = 0; i < n_in; i++) {
        xb[i] = bdim_of(b, in[i]);
        xi[i] = nb_is_none(in[i]) ? (nb_var_info){.ndim = -1} : vmap_info(b, in[i]);
        any |= xb[i] >= 0;
    }
    if (!any) { /* the same for every example: as it is */
        nb_status st = nb_emit(s->inner, type, NB_VALUES_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), n_out, out);
        if (st) nb_builder_clear_error(s->inner), nb_error(st, "%s", nb_last_error());
        return st;
    }
    if (def->flags & NB_OP_CONTROL) /* nb_while_loop and the others come through vmap_control.c */
        return nb_error(NB_ERR_UNSUPPORTED,
                        "vmap: %s emitted directly on batched values: record loops and branches "
                        "with nabla/control.h's helpers, which batch them (a gradient op of control flow comes from "
                        "the batched program's backward pass)",
                        type);
    nb_attr_value av[NB_MAX_ATTRS];
    nb_batch_ctx c = {.def = def,
                      .n_in = n_in,
                      .x = in,
                      .x_bdim = xb,
                      .x_info = xi,
                      .batch = s->batch,
                      .n_out = n_out,
                      .y = out,
                      .y_bdim = yb};
    bool checked;
    nb_status st = nb_batch_apply(s->inner, &c, av, yi, n_attrs, attrs, &checked);
    for (int k = 0; k < n_out && !st; k++)
        if (!nb_is_none(out[k]) && yb[k] >= 0) st = set_bdim(b, out[k], yb[k]);
    return st;
}

static nb_status vmap_unique_name(nb_builder *b, const char *prefix, char *buf, size_t size)
{
    return nb_builder_unique_name(state_of(b)->inner, prefix, buf, size);
}

/* The model's state is the same for every example: the builder behind
 * keeps it. An error there becomes this builder's. */
static nb_value vmap_state_var(nb_builder *b, const nb_state_spec *spec)
{
    nb_builder *inner = state_of(b)->inner;
    nb_value v = nb_builder_state(inner, spec);
    if (nb_builder_status(inner)) {
        nb_builder_fail(b, nb_builder_status(inner), "%s", nb_builder_error(inner));
        nb_builder_clear_error(inner);
    }
    return v;
}

static nb_status vmap_emit_into(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out,
                                const nb_value *into)
{
    for (int i = 0; i < in.n; i++)
        if (bdim_of(b, in.v[i]) >= 0)
            return nb_error(NB_ERR_UNSUPPORTED,
                            "vmap: %s updates state shared by every example (input %d is "
                            "batched): one update per example cannot be written back into one var",
                            type, i);
    nb_builder *inner = state_of(b)->inner;
    nb_status st = nb_emit_into(inner, type, in, attrs, n_out, out, into);
    if (st) nb_builder_clear_error(inner), nb_error(st, "%s", nb_last_error());
    return st;
}

static void vmap_destroy(nb_builder *b)
{
    nb_record_site_free(b);
    vmap_state *s = state_of(b);
    if (!s) return;
    nb_strmap_free(&s->bdims);
    nb_free(s);
}

static const nb_builder_backend vmap_backend = {
    .name = "vmap",
    .kind = NB_VALUE_VAR,
    .emit = vmap_emit,
    .info = vmap_info,
    .unique_name = vmap_unique_name,
    .state = vmap_state_var,
    .emit_into = vmap_emit_into,
    .name_of = nb_record_name_of,
    .destroy = vmap_destroy,
};

static nb_status new_vmap_builder(nb_builder **out, nb_builder *inner, int64_t batch)
{
    nb_status st = nb_builder_init(out, &vmap_backend);
    if (st) return st;
    vmap_state *s = nb_calloc(1, sizeof *s);
    if (!s) {
        nb_free(*out);
        *out = NULL;
        return nb_error(NB_ERR_NOMEM, "vmap: out of memory");
    }
    s->inner = inner;
    s->batch = batch;
    nb_strmap_init(&s->bdims);
    (*out)->state = s;
    (*out)->control = &nb_vmap_control_forms;
    /* In front of a record builder, it records where that one does, with
     * a block and role of its own. */
    if (inner->site && (st = nb_record_site_new(*out, inner->site))) {
        nb_builder_free(*out);
        *out = NULL;
    }
    return st;
}

nb_status nb_vmap_record(nb_builder *b, const nb_function *f, const nb_vmap_opts *opts, const nb_value *in,
                         nb_value *out)
{
    nb_var_info info[NB_VMAP_MAX_IO];
    int axes[NB_VMAP_MAX_IO];
    int64_t batch;
    for (int i = 0; i < f->n_in; i++) info[i] = nb_is_none(in[i]) ? (nb_var_info){.ndim = -1} : nb_value_info(b, in[i]);
    nb_status st = nb_vmap_in_axes(f, opts, info, axes, &batch);
    if (st) return st;
    nb_builder *vb;
    if ((st = new_vmap_builder(&vb, b, batch))) return st;
    nb_value lin[NB_VMAP_MAX_IO], lout[NB_VMAP_MAX_IO];
    for (int i = 0; i < f->n_in && !st; i++) {
        lin[i] = in[i];
        if (axes[i] < 0) continue;
        /* A var passed twice, batched and not (or along two axes), needs a
         * batched copy of its own. */
        bool twice = false;
        for (int j = 0; j < f->n_in; j++) twice |= j != i && in[j].p == in[i].p;
        if (twice) lin[i] = nb_assign(b, in[i]);
        if (!(st = nb_builder_status(b))) st = set_bdim(vb, lin[i], axes[i]);
        if (nb_is_none(state_of(vb)->ref)) state_of(vb)->ref = lin[i], state_of(vb)->ref_bdim = axes[i];
    }
    for (int k = 0; k < f->n_out; k++) lout[k] = NB_NONE;
    if (!st) st = nb_vmap_call(vb, f, lin, lout);
    if (!st) st = nb_builder_status(vb);
    if (st && nb_builder_status(vb)) nb_error(st, "%s", nb_builder_error(vb));
    for (int k = 0; k < f->n_out && !st; k++)
        if (nb_is_none(lout[k])) st = nb_error(NB_ERR_ARG, "vmap: the function left output %d unset", k);
    for (int k = 0; k < f->n_out && !st; k++) {
        int d = bdim_of(vb, lout[k]), axis = 0;
        int nd = nb_value_info(b, lout[k]).ndim;
        if ((st = nb_vmap_out_axis(opts, k, d >= 0 ? nd : nd + 1, &axis))) break;
        if (d >= 0) out[k] = nb_batch_move(b, lout[k], d, axis);
        else if (batch < 0)
            st = nb_error(NB_ERR_SHAPE,
                          "vmap: output %d does not depend on the batch, and the batch "
                          "size is not known to broadcast it",
                          k);
        else out[k] = nb_vmap_broadcast(b, lout[k], batch, axis);
        if (!st) st = nb_builder_status(b);
    }
    nb_builder_free(vb);
    return st;
}
