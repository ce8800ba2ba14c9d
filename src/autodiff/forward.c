/* The forward-mode part of a static program: each op's JVP rule, in program
 * order, on the tangents that reach it. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/autodiff.h"
#include "../core/strmap.h"
#include "../program/program_internal.h"
#include "forward_internal.h"

nb_status nb_jvp_block(nb_program *p, nb_block *blk, int n_ops, const bool *needed, nb_strmap *tan)
{
    nb_builder *b = NULL;
    nb_status st = nb_builder_new_record(&b, p, NULL);
    if (!st) nb_builder_set_block(b, blk);
    for (int i = 0; i < n_ops && !st; i++) {
        const nb_op *op = blk->ops[i];
        if (op->role == NB_ROLE_OPTIMIZE || (op->def->flags & NB_OP_NOT_DIFFERENTIABLE) || (needed && !needed[i]))
            continue;
        int n_in = nb_op_n_inputs(op), n_out = nb_op_n_outputs(op);
        nb_value *x = nb_calloc((size_t)(2 * n_in + 2 * n_out) + 1, sizeof *x);
        if (!x) {
            st = nb_error(NB_ERR_NOMEM, "append_jvp: out of memory");
            break;
        }
        nb_value *tx = x + n_in, *y = tx + n_in, *ty = y + n_out;
        bool any = false;
        for (int k = 0; k < n_in; k++) {
            x[k] = nb_value_from_var(nb_block_find_var_recursive(blk, op->inputs[k]));
            tx[k] = nb_value_from_var(nb_strmap_get(tan, op->inputs[k], NULL));
            any |= !nb_is_none(tx[k]);
        }
        char label[256];
        nb_op_label(op, label, sizeof label);
        if (any && !op->def->jvp)
            st = nb_error(NB_ERR_UNSUPPORTED, "append_jvp: a tangent reaches %s, which has no JVP rule", label);
        if (any && !st) {
            for (int k = 0; k < n_out; k++) {
                y[k] = nb_value_from_var(nb_block_find_var_recursive(blk, op->outputs[k]));
                ty[k] = NB_NONE;
            }
            nb_grad_ctx g = {.def = op->def, .attrs = op->attrs, .x = x, .y = y, .tx = tx, .ty = ty};
            memcpy(g.in_begin, op->in_begin, sizeof g.in_begin);
            memcpy(g.out_begin, op->out_begin, sizeof g.out_begin);
            st = op->def->jvp(b, &g);
            if (!st) st = nb_builder_status(b);
            if (st) {
                if (nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
                nb_error_context(st, "append_jvp: in the JVP rule of %s", label);
            }
            for (int k = 0; k < n_out && !st; k++)
                if (!nb_is_none(ty[k]) && nb_strmap_put(tan, op->outputs[k], nb_value_var(ty[k])))
                    st = nb_error(NB_ERR_NOMEM, "append_jvp: out of memory");
        }
        nb_free(x);
    }
    nb_builder_free(b);
    return st;
}

nb_status nb_append_jvp(nb_program *p, nb_names input_list, const char *const *tangents, nb_names output_list,
                        char **out_tangents)
{
    int n_inputs = input_list.n, n_outputs = output_list.n;
    const char *const *inputs = input_list.v, *const *outputs = output_list.v;
    for (int i = 0; i < n_outputs && out_tangents; i++) out_tangents[i] = NULL;
    if (!p || n_inputs < 1 || !inputs || !tangents || n_outputs < 1 || !outputs || !out_tangents)
        return nb_error(NB_ERR_ARG, "append_jvp: need a program, inputs with tangents and outputs");
    nb_block *blk = nb_program_global_block(p);
    nb_strmap tan; /* var name -> its tangent's nb_var */
    nb_strmap_init(&tan);
    int n_ops = blk->n_ops;
    nb_status st = NB_OK;
    for (int i = 0; i < n_inputs && !st; i++) {
        nb_var *x = nb_block_find_var(blk, inputs[i]), *t = nb_block_find_var(blk, tangents[i]);
        if (!x || !t) st = nb_error(NB_ERR_NOT_FOUND, "append_jvp: no var '%s'", !x ? inputs[i] : tangents[i]);
        else if (!nb_shape_equal(x->ndim, x->shape, t->ndim, t->shape) || x->dtype != t->dtype)
            st = nb_error(NB_ERR_SHAPE, "append_jvp: tangent '%s' does not match '%s' in dtype and shape", tangents[i],
                          inputs[i]);
        else if (nb_strmap_put(&tan, inputs[i], t)) st = nb_error(NB_ERR_NOMEM, "append_jvp: out of memory");
    }
    /* Only the ops the outputs depend on: a tangent that reaches others
     * (a later gradient pass, say) has nothing to give the outputs. */
    bool *needed = st ? NULL : nb_calloc((size_t)n_ops + 1, sizeof *needed);
    nb_strmap want;
    nb_strmap_init(&want);
    if (!st && !needed) st = nb_error(NB_ERR_NOMEM, "append_jvp: out of memory");
    for (int i = 0; i < n_outputs && !st; i++)
        if (nb_strmap_put(&want, outputs[i], (void *)1)) st = nb_error(NB_ERR_NOMEM, "append_jvp: out of memory");
    for (int i = n_ops - 1; i >= 0 && !st; i--) {
        const nb_op *op = blk->ops[i];
        for (int k = 0; k < nb_op_n_outputs(op) && !needed[i]; k++)
            needed[i] = nb_strmap_get(&want, op->outputs[k], NULL) != NULL;
        for (int k = 0; needed[i] && k < nb_op_n_inputs(op) && !st; k++)
            if (nb_strmap_put(&want, op->inputs[k], (void *)1))
                st = nb_error(NB_ERR_NOMEM, "append_jvp: out of memory");
    }
    nb_strmap_free(&want);
    if (!st) st = nb_jvp_block(p, blk, n_ops, needed, &tan);
    nb_free(needed);
    for (int i = 0; i < n_outputs && !st; i++) {
        nb_var *t = nb_strmap_get(&tan, outputs[i], NULL);
        if (t && !(out_tangents[i] = nb_strdup(t->name))) st = nb_error(NB_ERR_NOMEM, "append_jvp: out of memory");
    }
    if (st) {
        while (blk->n_ops > n_ops) nb_block_remove_op(blk, blk->n_ops - 1);
        for (int i = 0; i < n_outputs; i++) {
            nb_free(out_tangents[i]);
            out_tangents[i] = NULL;
        }
    }
    nb_strmap_free(&tan);
    return st;
}
