/* Emitting a composite op (nb_op_def.expand): the expansion runs on the
 * builder the op was emitted on, so each backend (eager, record, vmap's
 * batching builder) takes the ops it expands into as its own, and the
 * composite needs no kernel, rule, batching rule or shape inference. */
#include <stdio.h>
#include "nabla/builder.h"
#include "op_internal.h"

/* The expansion's first error, which the builder now holds, cleared there
 * and set again naming the composite: the builder keeps its first error
 * only, and that one would not say which op it was expanding. */
static nb_status name_the_op(nb_builder *b, const nb_op_def *def, nb_status st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", nb_builder_status(b) ? nb_builder_error(b) : nb_last_error());
    if (!st) st = nb_builder_status(b);
    nb_builder_clear_error(b);
    return nb_error(st, "%s (a composite op): %s", def->name, msg);
}

nb_status nb_op_expand(nb_builder *b, const nb_op_def *def, int n_in, const nb_value *in, int n_attrs,
                       const nb_attr *attrs, int n_out, nb_value *out)
{
    int n_x = nb_op_num_inputs(def), n_y = nb_op_num_outputs(def);
    if (n_out < 0) n_out = n_y;
    if (n_in > n_x)
        return nb_error(NB_ERR_ARG, "%s: %d inputs given but it has %d input slot%s", def->name, n_in, n_x,
                        n_x == 1 ? "" : "s");
    if (n_out > n_y)
        return nb_error(NB_ERR_ARG, "%s: %d outputs asked for but it has %d output slot%s", def->name, n_out, n_y,
                        n_y == 1 ? "" : "s");
    bool present[NB_MAX_SLOTS];
    int begin[NB_MAX_SLOTS + 1], order[NB_MAX_SLOTS];
    for (int i = 0; i < n_in; i++) present[i] = !nb_is_none(in[i]);
    nb_status st = nb_assign_slots(def, true, n_in, present, begin, order, def->name);
    nb_attr_value av[NB_MAX_ATTRS];
    if (!st) st = nb_resolve_attrs(def, n_attrs, attrs, av, def->name);
    if (st) return st;
    /* Composites have fixed slots (nb_op_register checks): one value each. */
    nb_value x[NB_MAX_SLOTS], y[NB_MAX_SLOTS];
    for (int s = 0; s < n_x; s++) x[s] = begin[s + 1] > begin[s] ? in[order[begin[s]]] : NB_NONE;
    for (int k = 0; k < NB_MAX_SLOTS; k++) y[k] = NB_NONE;
    st = def->expand(b, x, av, y);
    if (st || nb_builder_status(b)) return name_the_op(b, def, st);
    for (int k = 0; k < n_y; k++)
        if (nb_is_none(y[k]))
            return nb_error(NB_ERR_STATE, "%s (a composite op): its expansion left output '%s' unset", def->name,
                            def->outputs[k].name);
    for (int k = 0; k < n_out; k++) out[k] = y[k];
    return NB_OK;
}
