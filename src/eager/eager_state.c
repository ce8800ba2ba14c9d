/* The eager backend's state: parameters and persistent tensors live in the
 * builder by name, made at once by the initialiser op (drawing from the
 * builder's generator) on their first request and handed back on every
 * later one. State shares the parameters' store with requires_grad off, as
 * torch's buffers sit beside the parameters in a state dict. */
#include <stdio.h>
#include "nabla/device.h"
#include "nabla/eager.h"
#include "autograd.h"
#include "eager_backend.h"
#include "../ops/op_internal.h"

/* The builder's tensor of the spec's name, checked against what is asked;
 * NULL (with *failed false) when there is none. */
static nb_tensor *existing(nb_builder *b, const nb_state_spec *sp, bool *failed)
{
    char want[NB_SHAPE_STR_MAX], have[NB_SHAPE_STR_MAX];
    nb_tensor *t = nb_eager_find_param(b, sp->name);
    *failed = false;
    if (t &&
        (t->dtype != sp->dtype || !nb_shape_equal(t->ndim, t->shape, sp->ndim, sp->shape) ||
         nb_tensor_requires_grad(t) != sp->trainable)) {
        nb_builder_fail(b, NB_ERR_ARG,
                        "%s %s: the builder already holds a %s %s %s of that name; asked for a %s %s %s (two layers "
                        "given one name?)",
                        sp->what, sp->name, nb_dtype_name(t->dtype), nb_shape_str(have, sizeof have, t->ndim, t->shape),
                        nb_tensor_requires_grad(t) ? "parameter" : "state var", nb_dtype_name(sp->dtype),
                        nb_shape_str(want, sizeof want, sp->ndim, sp->shape),
                        sp->trainable ? "parameter" : "state var");
        *failed = true;
        return NULL;
    }
    return t;
}

/* The first value of the spec's var: a copy of its tensor, or what its
 * initialiser op draws now. */
static nb_status first_value(nb_builder *b, const nb_state_spec *sp, nb_tensor **out)
{
    *out = NULL;
    if (sp->value) return nb_tensor_clone(out, sp->value);
    char s[NB_SHAPE_STR_MAX];
    for (int i = 0; i < sp->ndim; i++)
        if (sp->shape[i] < 0)
            return nb_error(NB_ERR_SHAPE, "shape %s has an unknown dimension; eager tensors need sizes",
                            nb_shape_str(s, sizeof s, sp->ndim, sp->shape));
    if (sp->n_attrs + 2 > NB_MAX_ATTRS)
        return nb_error(NB_ERR_ARG, "%d initialiser attributes are too many", sp->n_attrs);
    nb_attr attrs[NB_MAX_ATTRS];
    int n = 0;
    for (int i = 0; i < sp->n_attrs; i++) attrs[n++] = sp->attrs[i];
    attrs[n++] = NB_ATTR_INTS_N("shape", sp->ndim, sp->shape);
    attrs[n++] = NB_ATTR_INT("dtype", sp->dtype);
    return nb_op_run_rng(sp->init_type, 0, NULL, n, attrs, 1, out, nb_eager_rng(b));
}

nb_value nb_eager_state(nb_builder *b, const nb_state_spec *sp)
{
    bool failed;
    nb_tensor *t = existing(b, sp, &failed);
    if (failed) return NB_NONE;
    if (t) return nb_eager_value(b, t);
    nb_tensor *made;
    nb_status st = first_value(b, sp, &made);
    if (!st) st = nb_eager_add_param(b, sp->name, made);
    if (!st && !sp->trainable && nb_dtype_is_float(made->dtype)) st = nb_tensor_set_requires_grad(made, false);
    if (st) {
        nb_tensor_release(made);
        nb_builder_fail(b, st, "%s %s: %s", sp->what, sp->name, nb_last_error());
        return NB_NONE;
    }
    nb_value v = nb_eager_value(b, made);
    nb_tensor_release(made); /* the store holds it */
    return v;
}

/* The op runs with all its outputs, then the state tensors take theirs.
 * The copy bumps no version: batch_norm's node saved its running
 * statistics, but its rule reads them only with global statistics, where
 * the outputs written back equal them (the kernel copies them through), so
 * no gradient can see a changed value. An op whose rule reads state it
 * also updates otherwise must not come this way. */
nb_status nb_eager_emit_into(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out,
                             const nb_value *into)
{
    nb_status st = nb_eager_emit(b, type, in.n, in.v, attrs.n, attrs.v, n_out, out);
    if (st) return st;
    nb_grad_mode_push(false);
    int i = 0;
    for (; i < n_out && !st; i++)
        if (!nb_is_none(into[i])) st = nb_tensor_copy_into(into[i].p, out[i].p);
    nb_grad_mode_pop();
    if (st) return nb_error(st, "%s: writing output %d back into its state: %s", type, i - 1, nb_last_error());
    return NB_OK;
}
