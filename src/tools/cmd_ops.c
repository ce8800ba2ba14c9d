/* nabla ops [NAME...]: one line per registered op, with its slots, its
 * attributes and whether it has VJP and JVP rules. */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "cli.h"
#include "ops/op_internal.h"

static const char *rule_state(const nb_op_def *d, bool has)
{
    if (d->flags & NB_OP_NOT_DIFFERENTIABLE) return "none";
    return has ? "yes" : "no";
}

static void print_op(const nb_op_def *d)
{
    char sig[512], attrs[512] = "";
    size_t u = 0;
    for (int i = 0; i < NB_MAX_ATTRS && d->attrs[i].name && u < sizeof attrs; i++)
        u += (size_t)snprintf(attrs + u, sizeof attrs - u, "%s%s", i ? "," : "", d->attrs[i].name);
    printf("%-32s vjp:%-4s jvp:%-4s %-56s %s\n", d->name, rule_state(d, d->vjp != NULL), rule_state(d, d->jvp != NULL),
           nb_op_signature(d, sig, sizeof sig), u ? attrs : "-");
}

int cmd_ops(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: nabla ops [NAME...]\n\n"
               "Lists registered ops: gradient rules (vjp, jvp: yes, no, or none for ops\n"
               "that have no gradient), slots (... variadic, ? optional) and attributes.\n");
        return 0;
    }
    if (argc > 1) {
        int bad = 0;
        for (int i = 1; i < argc; i++) {
            const nb_op_def *d = nb_op_find(argv[i]);
            if (d) print_op(d);
            else fprintf(stderr, "nabla ops: no op named '%s'\n", argv[i]), bad = 1;
        }
        return bad;
    }
    int n = nb_op_count(), vjp = 0, jvp = 0, nondiff = 0;
    for (int i = 0; i < n; i++) {
        const nb_op_def *d = nb_op_at(i);
        print_op(d);
        vjp += d->vjp != NULL;
        jvp += d->jvp != NULL;
        nondiff += (d->flags & NB_OP_NOT_DIFFERENTIABLE) != 0;
    }
    printf("%d ops: %d differentiable (%d with a VJP rule, %d with a JVP rule), %d without gradient\n", n, n - nondiff,
           vjp, jvp, nondiff);
    return 0;
}
