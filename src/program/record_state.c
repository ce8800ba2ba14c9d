/* The record backend's state: parameters and persistent vars live in the
 * program's global block and are set once by an initialiser op in the
 * startup program (in main itself when there is none); an op that updates
 * state names the state var as its output, so it writes it in place. */
#include <stdio.h>
#include <string.h>
#include "nabla/device.h"
#include "../builder/builder_internal.h"
#include "program_internal.h"
#include "record.h"

/* Creates var `name` in the global block of `p` with the flags of state. */
static nb_status create_state(nb_program *p, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                              nb_var **out)
{
    nb_status st = nb_block_create_var(nb_program_global_block(p), name, dtype, ndim, shape, out);
    if (st) return st;
    (*out)->persistable = true;
    (*out)->stop_gradient = true;
    (*out)->is_parameter = (*out)->trainable = false;
    return NB_OK;
}

/* State that is not trained: var `name` in main's global block, set by op
 * `init_type` (attrs given, shape and dtype added) in the startup program. */
static nb_value untrained_state(nb_builder *b, const nb_state_spec *sp, const char *init_type, int n,
                                const nb_attr *init_attrs)
{
    nb_program *main = b->site->program;
    nb_program *init_prog = b->site->startup ? b->site->startup : main;
    const char *name = sp->name;
    for (int i = 0; i < sp->ndim; i++)
        if (sp->shape[i] < 0) {
            nb_builder_fail(b, NB_ERR_SHAPE, "%s %s: dimension %d is %lld; state needs known sizes", sp->what, name, i,
                            (long long)sp->shape[i]);
            return NB_NONE;
        }
    if (nb_block_find_var(nb_program_global_block(main), name) ||
        (init_prog != main && nb_block_find_var(nb_program_global_block(init_prog), name))) {
        nb_builder_fail(b, NB_ERR_ARG, "%s %s: a var of that name already exists", sp->what, name);
        return NB_NONE;
    }
    if (n + 2 > NB_MAX_ATTRS) {
        nb_builder_fail(b, NB_ERR_ARG, "%s %s: %d initialiser attributes are too many", sp->what, name, n);
        return NB_NONE;
    }
    nb_var *v, *iv = NULL;
    nb_status st = create_state(main, name, sp->dtype, sp->ndim, sp->shape, &v);
    if (!st && init_prog != main) st = create_state(init_prog, name, sp->dtype, sp->ndim, sp->shape, &iv);
    nb_attr attrs[NB_MAX_ATTRS];
    memcpy(attrs, init_attrs, (size_t)n * sizeof *attrs);
    attrs[n++] = NB_ATTR_INTS_N("shape", sp->ndim, sp->shape);
    attrs[n++] = NB_ATTR_INT("dtype", sp->dtype);
    nb_op *op = NULL;
    if (!st)
        st = nb_block_append_op(nb_program_global_block(init_prog), init_type, NB_NO_NAMES, NB_NAMES(name),
                                NB_ATTRS_N(n, attrs), &op);
    if (st) {
        nb_builder_fail(b, st, "%s %s: %s", sp->what, name, nb_last_error());
        return NB_NONE;
    }
    op->role = NB_ROLE_STARTUP;
    return nb_value_from_var(v);
}

static nb_value made_by(nb_builder *b, const nb_state_spec *sp, const char *init_type, int n, const nb_attr *attrs)
{
    return sp->trainable ? nb_create_parameter(b, sp->name, sp->dtype, sp->ndim, sp->shape, init_type, n, attrs)
                         : untrained_state(b, sp, init_type, n, attrs);
}

nb_value nb_record_state(nb_builder *b, const nb_state_spec *sp)
{
    if (!sp->value) return made_by(b, sp, sp->init_type, sp->n_attrs, sp->attrs);
    /* A copy of a tensor: its elements travel in an assign_value op. */
    void *vals;
    nb_attr values;
    nb_status st = nb_values_attr(sp->value, &vals, &values);
    if (st) {
        nb_builder_fail(b, st, "%s %s: %s", sp->what, sp->name, nb_last_error());
        return NB_NONE;
    }
    nb_value v = made_by(b, sp, "assign_value", 1, &values);
    nb_free(vals);
    return v;
}

/* Appends the op with each state output named after its state var, the
 * others as record_emit names outputs, so the scope's var is updated in
 * place when the op runs. */
nb_status nb_record_emit_into(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out,
                              const nb_value *into)
{
    enum { MAX_IO = 16, NAME_LEN = 256 };
    if (in.n > MAX_IO || n_out > MAX_IO) return nb_error(NB_ERR_ARG, "%s: too many inputs or outputs", type);
    char prefix[NAME_LEN - 16], fresh[MAX_IO][NAME_LEN];
    nb_status st = nb_program_unique_name(b->site->program, type, prefix, sizeof prefix);
    if (st) return st;
    const char *ins[MAX_IO], *outs[MAX_IO];
    for (int i = 0; i < in.n; i++) ins[i] = nb_is_none(in.v[i]) ? NULL : ((nb_var *)in.v[i].p)->name;
    for (int i = 0; i < n_out; i++) {
        snprintf(fresh[i], sizeof fresh[i], "%s.tmp_%d", prefix, i);
        outs[i] = nb_is_none(into[i]) ? fresh[i] : ((nb_var *)into[i].p)->name;
    }
    nb_op *op;
    if ((st = nb_block_append_op(b->site->block, type, NB_NAMES_N(in.n, ins), NB_NAMES_N(n_out, outs), attrs, &op)))
        return st;
    op->role = b->site->role;
    for (int i = 0; i < n_out; i++) out[i] = nb_value_from_var(nb_block_find_var_recursive(b->site->block, outs[i]));
    return NB_OK;
}

const char *nb_record_name_of(nb_value v) { return ((nb_var *)v.p)->name; }
