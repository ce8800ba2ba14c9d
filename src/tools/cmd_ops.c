/* nabla ops [--kernels] [NAME...]: one line per registered op, with its
 * slots, its attributes, whether it has VJP and JVP rules and whether vmap
 * batches it by a rule or a loop over the batch (a composite op: by its
 * expansion); with
 * --kernels, the kernels registered for it, best first. */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "cli.h"
#include "ops/op_internal.h"

static const char *rule_state(const nb_op_def *d, bool has)
{
    if (d->expand) return "exp";
    if (d->flags & NB_OP_NOT_DIFFERENTIABLE) return "none";
    return has ? "yes" : "no";
}

/* "cpu:f32,f64,i32,i64 blas:f32" */
static void print_kernels(const nb_op_def *d)
{
    printf("%-32s kernels:", "");
    int n = 0;
    for (int dev = 0; dev < NB_DEVICE_COUNT; dev++)
        for (const nb_kernel_def *k; (k = nb_kernel_at(d->name, (nb_device)dev, n)); n++) {
            printf(" %s/%s:", k->provider ? k->provider : "?", nb_device_name((nb_device)dev));
            for (int t = 0, first = 1; t < NB_DTYPE_COUNT; t++)
                if (k->dtypes & NB_DT(t)) printf("%s%s", first ? "" : ",", nb_dtype_name((nb_dtype)t)), first = 0;
            if (k->priority) printf("(priority %d)", k->priority);
        }
    printf("%s\n", n ? "" : " none");
}

/* How vmap batches the op: its rule, a loop over the examples, by the
 * control-flow helpers (they record the op over batched sub-blocks, masked
 * where the examples' paths differ; its gradient op comes from the batched
 * program's backward pass), or never (an op without inputs never meets a
 * batch). */
static const char *vmap_state(const nb_op_def *d)
{
    if (d->expand) return "exp";
    if (d->batch) return "rule";
    if (d->flags & NB_OP_CONTROL) return "ctl";
    return nb_op_num_inputs(d) ? "loop" : "-";
}

static bool with_kernels;

static void print_op(const nb_op_def *d)
{
    char sig[512], attrs[512] = "";
    size_t u = 0;
    for (int i = 0; i < NB_MAX_ATTRS && d->attrs[i].name && u < sizeof attrs; i++)
        u += (size_t)snprintf(attrs + u, sizeof attrs - u, "%s%s", i ? "," : "", d->attrs[i].name);
    printf("%-32s vjp:%-4s jvp:%-4s vmap:%-4s %-56s %s\n", d->name, rule_state(d, d->vjp != NULL),
           rule_state(d, d->jvp != NULL), vmap_state(d), nb_op_signature(d, sig, sizeof sig), u ? attrs : "-");
    if (with_kernels) print_kernels(d);
}

int cmd_ops(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: nabla ops [--kernels] [NAME...]\n\n"
               "Lists registered ops: gradient rules (vjp, jvp: yes, no, or none for ops\n"
               "that have no gradient), how vmap batches it (vmap: rule, loop over the batch,\n"
               "ctl for control flow, which nabla/control.h's helpers record batched and\n"
               "masked, its gradient coming from the batched program's backward pass, or -\n"
               "for an op without inputs, which never meets a batch), slots (... variadic,\n"
               "? optional) and attributes. A composite op shows exp in all three columns:\n"
               "it is an expansion into other ops, whose rules, batching and kernels it takes.\n"
               "--kernels adds the kernels registered for each (provider/device: dtypes),\n"
               "best first.\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--kernels")) {
        with_kernels = true;
        argc--;
        argv++;
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
    int n = nb_op_count(), vjp = 0, jvp = 0, nondiff = 0, batch = 0, no_inputs = 0, control = 0, composite = 0;
    for (int i = 0; i < n; i++) {
        const nb_op_def *d = nb_op_at(i);
        print_op(d);
        vjp += d->vjp != NULL;
        jvp += d->jvp != NULL;
        batch += d->batch != NULL;
        no_inputs += !d->batch && !nb_op_num_inputs(d);
        control += !d->batch && (d->flags & NB_OP_CONTROL);
        nondiff += (d->flags & NB_OP_NOT_DIFFERENTIABLE) != 0;
        composite += d->expand != NULL;
    }
    printf("%d ops: %d differentiable (%d with a VJP rule, %d with a JVP rule), %d without gradient; %d with a "
           "batching rule, %d batched by a loop, %d control-flow ops not batched, %d without inputs; %d composite "
           "(rules and batching by their expansion)\n",
           n, n - nondiff, vjp, jvp, nondiff, batch, n - batch - no_inputs - control - composite, control, no_inputs,
           composite);
    return 0;
}
