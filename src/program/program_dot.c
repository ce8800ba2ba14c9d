/* Drawing a program with Graphviz. Node names are quoted DOT ids made from
 * the block index and the var name or op position, so any var name works. */
#include <stdio.h>
#include <string.h>
#include "program_internal.h"

static const char *role_colour(nb_op_role r)
{
    switch (r) {
    case NB_ROLE_FORWARD: return "#cfe2f3";
    case NB_ROLE_LOSS: return "#ffe599";
    case NB_ROLE_BACKWARD: return "#f4cccc";
    case NB_ROLE_OPTIMIZE: return "#d9ead3";
    case NB_ROLE_STARTUP: return "#eeeeee";
    }
    return "white";
}

/* Writes s as the body of a DOT quoted string. */
static void quoted(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
}

static void var_id(FILE *f, int block, const char *name)
{
    fprintf(f, "\"b%d:", block);
    quoted(f, name);
    fputc('"', f);
}

/* The block that holds var `name` as seen from block b. */
static int home_block(const nb_block *b, const char *name)
{
    while (b) {
        if (nb_block_find_var(b, name)) return b->idx;
        b = b->parent_idx >= 0 ? b->program->blocks[b->parent_idx] : NULL;
    }
    return 0;
}

/* Block 0's fused groups (group[i]: op i's, or -1) as clusters: a node
 * belongs to the cluster it first appears in. */
static void draw_groups(const nb_block *b, const int *group, FILE *f)
{
    int n_groups = 0;
    for (int i = 0; i < b->n_ops; i++)
        if (group[i] >= n_groups) n_groups = group[i] + 1;
    for (int g = 0; g < n_groups; g++) {
        fprintf(f, "  subgraph cluster_fused%d {\n    label=\"fused %d\"; style=dashed; color=\"#cc0000\";\n", g, g);
        for (int i = 0; i < b->n_ops; i++)
            if (group[i] == g) fprintf(f, "    \"b%d:op%d\";\n", b->idx, i);
        fputs("  }\n", f);
    }
}

static void draw_block(const nb_program *p, const nb_block *b, FILE *f)
{
    char shape[NB_SHAPE_STR_MAX];
    if (b->idx > 0) {
        fprintf(f,
                "  subgraph cluster_block%d {\n    label=\"block %d (parent %d)\"; style=rounded; color=\"#888888\";\n",
                b->idx, b->idx, b->parent_idx);
    }
    for (int i = 0; i < b->n_vars; i++) {
        const nb_var *v = b->vars[i];
        bool grad = strstr(v->name, "@GRAD") != NULL;
        fputs("    ", f);
        var_id(f, b->idx, v->name);
        fputs(" [label=\"", f);
        quoted(f, v->name);
        fprintf(f, "\\n%s\", shape=%s, style=filled, fillcolor=\"%s\"];\n",
                nb_shape_str(shape, sizeof shape, v->ndim, v->shape), v->is_parameter ? "doublecircle" : "ellipse",
                v->is_parameter  ? "#fff2cc"
                    : grad       ? "#fce5cd"
                    : v->is_data ? "#d9d2e9"
                                 : "white");
    }
    for (int i = 0; i < b->n_ops; i++) {
        const nb_op *op = b->ops[i];
        fprintf(f, "    \"b%d:op%d\" [label=\"%s\", shape=box, style=\"filled,rounded\", fillcolor=\"%s\"];\n", b->idx,
                i, op->def->name, role_colour(op->role));
        for (int k = 0; k < nb_op_n_inputs(op); k++) {
            fputs("    ", f);
            var_id(f, home_block(b, op->inputs[k]), op->inputs[k]);
            fprintf(f, " -> \"b%d:op%d\";\n", b->idx, i);
        }
        for (int k = 0; k < nb_op_n_outputs(op); k++) {
            fprintf(f, "    \"b%d:op%d\" -> ", b->idx, i);
            var_id(f, home_block(b, op->outputs[k]), op->outputs[k]);
            fputs(";\n", f);
        }
        /* An op that runs a sub-block points at its cluster. */
        for (int a = 0; a < NB_MAX_ATTRS && op->def->attrs[a].name; a++)
            if (op->attrs[a].type == NB_ATTR_BLOCK && op->attrs[a].block > 0 && op->attrs[a].block < p->n_blocks &&
                p->blocks[op->attrs[a].block]->n_ops > 0)
                fprintf(f, "    \"b%d:op%d\" -> \"b%d:op0\" [style=dashed, lhead=cluster_block%d];\n", b->idx, i,
                        op->attrs[a].block, op->attrs[a].block);
    }
    if (b->idx > 0) fputs("  }\n", f);
}

nb_status nb_program_dot_write(const nb_program *p, FILE *f, const int *group)
{
    if (!p || !f) return nb_error(NB_ERR_ARG, "to_dot: NULL program or file");
    fputs("digraph program {\n  compound=true; rankdir=TB;\n"
          "  node [fontname=\"Helvetica\", fontsize=10]; edge [color=\"#555555\"];\n",
          f);
    if (group && p->n_blocks > 0) draw_groups(p->blocks[0], group, f);
    for (int i = 0; i < p->n_blocks; i++) draw_block(p, p->blocks[i], f);
    fputs("  subgraph cluster_legend {\n    label=\"legend\"; style=dotted;\n"
          "    \"legend:f\" [label=\"forward op\", shape=box, style=\"filled,rounded\", fillcolor=\"#cfe2f3\"];\n"
          "    \"legend:l\" [label=\"loss op\", shape=box, style=\"filled,rounded\", fillcolor=\"#ffe599\"];\n"
          "    \"legend:b\" [label=\"backward op\", shape=box, style=\"filled,rounded\", fillcolor=\"#f4cccc\"];\n"
          "    \"legend:o\" [label=\"optimize op\", shape=box, style=\"filled,rounded\", fillcolor=\"#d9ead3\"];\n"
          "    \"legend:p\" [label=\"parameter\", shape=doublecircle, style=filled, fillcolor=\"#fff2cc\"];\n"
          "  }\n}\n",
          f);
    return ferror(f) ? nb_error(NB_ERR_IO, "to_dot: write failed") : NB_OK;
}

nb_status nb_program_to_dot(const nb_program *p, FILE *f) { return nb_program_dot_write(p, f, NULL); }
