/* OpDescs: appending an op to a block (checked against its definition, with
 * shape inference), removing, cloning and describing ops. */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "program_internal.h"

void nb_op_free(nb_op *op)
{
    if (!op) return;
    /* The slot counts can be set before the arrays exist (a clone that ran
     * out of memory half-way). */
    for (int i = 0; op->inputs && i < nb_op_n_inputs(op); i++) nb_free(op->inputs[i]);
    for (int i = 0; op->outputs && i < nb_op_n_outputs(op); i++) nb_free(op->outputs[i]);
    nb_free(op->inputs);
    nb_free(op->outputs);
    for (int i = 0; i < NB_MAX_ATTRS; i++) nb_attr_value_free(&op->attrs[i]);
    nb_free(op->role_var[0]);
    nb_free(op->role_var[1]);
    nb_free(op);
}

static char **copy_names(char *const *names, int n)
{
    char **c = nb_calloc((size_t)n + 1, sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < n; i++)
        if (!(c[i] = nb_strdup(names[i]))) {
            for (int j = 0; j < i; j++) nb_free(c[j]);
            nb_free(c);
            return NULL;
        }
    return c;
}

nb_op *nb_op_clone(const nb_op *src)
{
    nb_op *op = nb_calloc(1, sizeof *op);
    if (!op) return NULL;
    *op = *src;
    op->inputs = copy_names(src->inputs, nb_op_n_inputs(src));
    op->outputs = copy_names(src->outputs, nb_op_n_outputs(src));
    memset(op->attrs, 0, sizeof op->attrs);
    op->role_var[0] = src->role_var[0] ? nb_strdup(src->role_var[0]) : NULL;
    op->role_var[1] = src->role_var[1] ? nb_strdup(src->role_var[1]) : NULL;
    bool ok =
        op->inputs && op->outputs && (op->role_var[0] || !src->role_var[0]) && (op->role_var[1] || !src->role_var[1]);
    for (int i = 0; i < NB_MAX_ATTRS && ok; i++) ok = !nb_attr_value_copy(&op->attrs[i], &src->attrs[i]);
    if (!ok) {
        nb_op_free(op);
        return NULL;
    }
    return op;
}

nb_status nb_block_push_op(nb_block *b, int pos, nb_op *op)
{
    if (b->n_ops == b->cap_ops) {
        int cap = b->cap_ops ? 2 * b->cap_ops : 16;
        nb_op **ops = nb_realloc(b->ops, (size_t)cap * sizeof *ops);
        if (!ops) return NB_ERR_NOMEM;
        b->ops = ops;
        b->cap_ops = cap;
    }
    memmove(&b->ops[pos + 1], &b->ops[pos], (size_t)(b->n_ops - pos) * sizeof *b->ops);
    b->ops[pos] = op;
    b->n_ops++;
    b->program->version++;
    return NB_OK;
}

uint64_t nb_mix_seed(uint64_t a, uint64_t b)
{
    uint64_t z = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    return z ^ (z >> 27);
}

uint64_t nb_op_seed(const nb_program *p, const nb_op *op)
{
    const nb_attr_value *seed = nb_op_attr(op, "seed");
    return seed && seed->type == NB_ATTR_INT && seed->i != 0 ? (uint64_t)seed->i
                                                             : nb_mix_seed(p->random_seed, (uint64_t)op->id);
}

const nb_attr_value *nb_op_attr(const nb_op *op, const char *name)
{
    int i = nb_op_attr_index(op->def, name);
    return i >= 0 ? &op->attrs[i] : NULL;
}

const char *nb_op_label(const nb_op *op, char *buf, size_t size)
{
    if (nb_op_n_outputs(op) > 0) snprintf(buf, size, "%s (%s)", op->def->name, op->outputs[0]);
    else snprintf(buf, size, "%s (op %d)", op->def->name, op->id);
    return buf;
}

nb_status nb_block_infer_op(nb_block *b, nb_op *op)
{
    char label[256];
    nb_op_label(op, label, sizeof label);
    int n_in = nb_op_n_inputs(op), n_out = nb_op_n_outputs(op);
    nb_var_info *in_info = nb_calloc((size_t)n_in + 1, sizeof *in_info);
    nb_var_info *out_info = nb_calloc((size_t)n_out + 1, sizeof *out_info);
    nb_status st = NB_OK;
    if (!in_info || !out_info) {
        st = nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        nb_var *v = nb_block_find_var_recursive(b, op->inputs[i]);
        if (!v) {
            st = nb_error(NB_ERR_NOT_FOUND, "%s: input var '%s' does not exist in block %d or its parents", label,
                          op->inputs[i], b->idx);
            goto done;
        }
        in_info[i] = nb_var_info_of(v);
    }
    nb_op_ctx ctx = {.def = op->def, .label = label, .attrs = op->attrs, .in_info = in_info, .out_info = out_info};
    memcpy(ctx.in_begin, op->in_begin, sizeof ctx.in_begin);
    memcpy(ctx.out_begin, op->out_begin, sizeof ctx.out_begin);
    if ((st = nb_run_infer(&ctx))) goto done;
    for (int i = 0; i < n_out; i++) {
        nb_var *v = nb_block_find_var_recursive(b, op->outputs[i]);
        if (!v) {
            if ((st = nb_block_create_var(b, op->outputs[i], out_info[i].dtype, out_info[i].ndim, out_info[i].shape,
                                          &v)))
                goto done;
        } else {
            nb_var_set_shape(v, out_info[i].dtype, out_info[i].ndim, out_info[i].shape);
        }
    }
done:
    nb_free(in_info);
    nb_free(out_info);
    return st;
}

static nb_status make_op(nb_block *b, const char *type, nb_names ins, nb_names outs, nb_attrs as, nb_op **op_out)
{
    int n_in = ins.n, n_out = outs.n, n_attrs = as.n;
    const char *const *in = ins.v, *const *out = outs.v;
    const nb_attr *attrs = as.v;
    *op_out = NULL;
    const nb_op_def *def = nb_op_find(type);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "unknown op '%s'", type ? type : "(null)");
    char label[256];
    snprintf(label, sizeof label, "%s (%s)", type, n_out > 0 && out && out[0] ? out[0] : "no outputs");
    if (n_in < 0 || n_out < 0 || (n_in && !in) || (n_out && !out) || (n_attrs && !attrs))
        return nb_error(NB_ERR_ARG, "%s: bad argument counts or NULL arrays", label);
    for (int i = 0; i < n_out; i++)
        if (!out[i] || !*out[i]) return nb_error(NB_ERR_ARG, "%s: output %d has no var name", label, i);

    nb_attr_value av[NB_MAX_ATTRS];
    nb_status st = nb_resolve_attrs(def, n_attrs, attrs, av, label);
    if (st) return st;
    for (int i = 0; i < NB_MAX_ATTRS; i++)
        if (av[i].type == NB_ATTR_BLOCK && (av[i].block < 0 || av[i].block >= b->program->n_blocks))
            return nb_error(NB_ERR_ARG, "%s: attribute '%s' names block %d, which does not exist", label,
                            def->attrs[i].name, av[i].block);

    int n = n_in > n_out ? n_in : n_out;
    bool *present = nb_calloc((size_t)n + 1, sizeof *present);
    int *order = nb_calloc((size_t)n + 1, sizeof *order);
    nb_op *op = nb_calloc(1, sizeof *op);
    if (!present || !order || !op) {
        st = nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
        goto fail;
    }
    op->def = def;
    for (int i = 0; i < n_in; i++) present[i] = in[i] && *in[i];
    if ((st = nb_assign_slots(def, true, n_in, present, op->in_begin, order, label))) goto fail;
    int m = op->in_begin[NB_MAX_SLOTS];
    if (!(op->inputs = nb_calloc((size_t)m + 1, sizeof *op->inputs))) goto nomem;
    for (int i = 0; i < m; i++)
        if (!(op->inputs[i] = nb_strdup(in[order[i]]))) goto nomem;
    for (int i = 0; i < n_out; i++) present[i] = true;
    if ((st = nb_assign_slots(def, false, n_out, present, op->out_begin, order, label))) goto fail;
    if (!(op->outputs = nb_calloc((size_t)n_out + 1, sizeof *op->outputs))) goto nomem;
    for (int i = 0; i < n_out; i++)
        if (!(op->outputs[i] = nb_strdup(out[i]))) goto nomem;
    for (int i = 0; i < NB_MAX_ATTRS; i++)
        if (nb_attr_value_copy(&op->attrs[i], &av[i])) goto nomem;
    if ((st = nb_block_infer_op(b, op))) goto fail;
    op->id = b->program->next_op_id++;
    nb_free(present);
    nb_free(order);
    *op_out = op;
    return NB_OK;
nomem:
    st = nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
fail:
    nb_free(present);
    nb_free(order);
    nb_op_free(op);
    return st;
}

nb_status nb_block_insert_op(nb_block *b, int pos, const char *type, nb_names in, nb_names out, nb_attrs attrs,
                             nb_op **op_out)
{
    if (op_out) *op_out = NULL;
    if (!b) return nb_error(NB_ERR_ARG, "insert op: block is NULL");
    if (pos < 0 || pos > b->n_ops)
        return nb_error(NB_ERR_ARG, "insert op %s: position %d outside block %d of %d ops", type ? type : "?", pos,
                        b->idx, b->n_ops);
    nb_op *op;
    nb_status st = make_op(b, type, in, out, attrs, &op);
    if (st) return st;
    if (nb_block_push_op(b, pos, op)) {
        nb_op_free(op);
        return nb_error(NB_ERR_NOMEM, "insert op %s: out of memory", type);
    }
    if (op_out) *op_out = op;
    return NB_OK;
}

nb_status nb_block_append_op(nb_block *b, const char *type, nb_names in, nb_names out, nb_attrs attrs, nb_op **op_out)
{
    return nb_block_insert_op(b, b ? b->n_ops : 0, type, in, out, attrs, op_out);
}

nb_status nb_block_move_op(nb_block *b, int from, int to)
{
    if (!b) return nb_error(NB_ERR_ARG, "move op: block is NULL");
    if (from < 0 || from >= b->n_ops || to < 0 || to >= b->n_ops)
        return nb_error(NB_ERR_ARG, "move op: positions %d and %d must lie in [0, %d) (block %d)", from, to, b->n_ops,
                        b->idx);
    nb_op *op = b->ops[from];
    if (from < to) memmove(&b->ops[from], &b->ops[from + 1], (size_t)(to - from) * sizeof *b->ops);
    else memmove(&b->ops[to + 1], &b->ops[to], (size_t)(from - to) * sizeof *b->ops);
    b->ops[to] = op;
    b->program->version++;
    return NB_OK;
}

nb_status nb_block_remove_op(nb_block *b, int pos)
{
    if (pos < 0 || pos >= b->n_ops)
        return nb_error(NB_ERR_ARG, "remove op: position %d outside block %d of %d ops", pos, b->idx, b->n_ops);
    nb_op_free(b->ops[pos]);
    memmove(&b->ops[pos], &b->ops[pos + 1], (size_t)(b->n_ops - pos - 1) * sizeof *b->ops);
    b->n_ops--;
    b->program->version++;
    return NB_OK;
}
