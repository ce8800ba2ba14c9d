/* A readable text form of a program (used by `nabla dump` and in tests). */
#include <stdio.h>
#include <string.h>
#include "program_internal.h"

static const char *role_name(nb_op_role r)
{
    switch (r) {
    case NB_ROLE_FORWARD: return "forward";
    case NB_ROLE_BACKWARD: return "backward";
    case NB_ROLE_OPTIMIZE: return "optimize";
    case NB_ROLE_LOSS: return "loss";
    case NB_ROLE_STARTUP: return "startup";
    }
    return "?";
}

static void print_slots(FILE *f, const nb_op *op, bool inputs)
{
    const nb_slot_def *slots = inputs ? op->def->inputs : op->def->outputs;
    const int *begin = inputs ? op->in_begin : op->out_begin;
    char *const *names = inputs ? op->inputs : op->outputs;
    fputc('(', f);
    for (int s = 0; s < NB_MAX_SLOTS && slots[s].name; s++) {
        fprintf(f, "%s%s=[", s ? ", " : "", slots[s].name);
        for (int k = begin[s]; k < begin[s + 1]; k++) fprintf(f, "%s%s", k > begin[s] ? ", " : "", names[k]);
        fputc(']', f);
    }
    fputc(')', f);
}

/* An attribute as text; a dtype attribute by its dtype's name. */
static const char *attr_str(char *buf, size_t size, const char *name, const nb_attr_value *v)
{
    if (!strcmp(name, "dtype") && v->type == NB_ATTR_INT && nb_dtype_valid((int)v->i))
        return nb_dtype_name((nb_dtype)v->i);
    return nb_attr_value_str(buf, size, v);
}

nb_status nb_program_print(const nb_program *p, FILE *f)
{
    char buf[512];
    fprintf(f, "program: %d block%s, random seed %llu\n", p->n_blocks, p->n_blocks == 1 ? "" : "s",
            (unsigned long long)p->random_seed);
    for (int bi = 0; bi < p->n_blocks; bi++) {
        const nb_block *b = p->blocks[bi];
        fprintf(f, "block %d (parent %d):\n  vars:\n", b->idx, b->parent_idx);
        for (int i = 0; i < b->n_vars; i++) {
            const nb_var *v = b->vars[i];
            fprintf(f, "    %s: %s%s%s%s%s%s%s\n", v->name, nb_dtype_name(v->dtype),
                    nb_shape_str(buf, sizeof buf, v->ndim, v->shape), v->persistable ? " persistable" : "",
                    v->is_parameter ? " parameter" : "", v->is_parameter && !v->trainable ? " frozen" : "",
                    v->stop_gradient ? " stop_gradient" : "", v->is_data ? " data" : "");
        }
        fprintf(f, "  ops:\n");
        for (int i = 0; i < b->n_ops; i++) {
            const nb_op *op = b->ops[i];
            fprintf(f, "    %d: %s", i, op->def->name);
            print_slots(f, op, true);
            fputs(" -> ", f);
            print_slots(f, op, false);
            bool first = true;
            for (int a = 0; a < NB_MAX_ATTRS && op->def->attrs[a].name; a++) {
                fprintf(f, "%s%s=%s", first ? " {" : ", ", op->def->attrs[a].name,
                        attr_str(buf, sizeof buf, op->def->attrs[a].name, &op->attrs[a]));
                first = false;
            }
            if (!first) fputc('}', f);
            fprintf(f, " [%s", role_name(op->role));
            if (op->role_var[0]) fprintf(f, " %s -> %s", op->role_var[0], op->role_var[1]);
            fputs("]\n", f);
        }
    }
    return NB_OK;
}
