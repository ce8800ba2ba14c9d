/* nabla mem PROGRAM_FILE [--batch N]: where the memory of one training step
 * goes (nb_prepared_memory): the programs of a program file run once, with
 * zeros of batch N fed to every data var, and the main program's plan is
 * printed: its peak, the vars live there, the planned buffers against one
 * buffer per temporary, the parameters and state, and bytes by op role. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/nabla.h"
#include "cli.h"

static void print_bytes(const char *what, size_t n)
{
    printf("  %-34s %12zu bytes (%.2f MiB)\n", what, n, (double)n / (1024.0 * 1024.0));
}

int cmd_mem(int argc, char **argv)
{
    const char *path = NULL;
    long batch = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: nabla mem PROGRAM_FILE [--batch N]\n\n"
                   "Runs the startup program of a program file (nb_programs_save; the MNIST\n"
                   "examples write one with --save-program), then one step of its main program\n"
                   "with zeros of batch N (default 64) fed to every data var, and prints where\n"
                   "the step's memory goes: the peak of the temporaries and the vars live at\n"
                   "it, the buffers the executor plans against one buffer per temporary, the\n"
                   "parameters and optimiser state, and the temporaries by op role.\n");
            return 0;
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            batch = strtol(argv[++i], NULL, 10);
            if (batch < 1 || batch > 1 << 20) {
                fprintf(stderr, "nabla mem: --batch wants a number from 1 to %d\n", 1 << 20);
                return 2;
            }
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "nabla mem: unexpected '%s' (try --help)\n", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: nabla mem PROGRAM_FILE [--batch N] (see --help)\n");
        return 2;
    }
    nb_program *main_p = NULL, *startup = NULL;
    nb_scope *scope = NULL;
    nb_executor *e = NULL;
    nb_prepared *pp = NULL;
    const char *feeds[64];
    nb_tensor *vals[64];
    int n_feed = 0, rc = 0;
    nb_status st = nb_programs_load(&main_p, &startup, path);
    if (!st) st = nb_scope_new(&scope, NULL);
    if (!st) st = nb_executor_new(&e);
    if (!st && startup) st = nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    const nb_block *g = st ? NULL : nb_program_global_block(main_p);
    for (int i = 0; g && i < g->n_vars && !st; i++) {
        const nb_var *v = g->vars[i];
        if (!v->is_data) continue;
        if (n_feed == 64) st = nb_error(NB_ERR_ARG, "more than 64 data vars");
        int64_t shape[NB_MAX_DIMS];
        for (int d = 0; d < v->ndim; d++) shape[d] = v->shape[d] < 0 ? batch : v->shape[d];
        if (!st) st = nb_tensor_new(&vals[n_feed], v->dtype, v->ndim, shape);
        if (!st) feeds[n_feed++] = v->name;
    }
    if (!st) st = nb_prepare(&pp, main_p, 0, NB_NAMES_N(n_feed, feeds), NB_NO_NAMES);
    if (!st) st = nb_prepared_run(pp, scope, vals, NULL);
    nb_memory_report r;
    if (!st) st = nb_prepared_memory(pp, scope, &r);
    /* Without an optimiser a run computes nothing it is not asked for: then
     * the step is the parameters' gradients, fetched. */
    const char *grads[64];
    char names[64][256];
    nb_tensor *got[64] = {0};
    int n_grads = 0;
    for (int i = 0; !st && !r.n_temporaries && i < g->n_vars && n_grads < 64; i++) {
        const nb_var *v = g->vars[i];
        if (!v->is_parameter) continue;
        snprintf(names[n_grads], sizeof names[0], "%s@GRAD", v->name);
        if (nb_block_find_var(g, names[n_grads])) grads[n_grads] = names[n_grads], n_grads++;
    }
    if (n_grads) {
        printf("(the main program updates nothing: measuring the step that fetches its %d parameter gradients)\n",
               n_grads);
        nb_prepared_free(pp);
        pp = NULL;
        st = nb_prepare(&pp, main_p, 0, NB_NAMES_N(n_feed, feeds), NB_NAMES_N(n_grads, grads));
        if (!st) st = nb_prepared_run(pp, scope, vals, got);
        if (!st) st = nb_prepared_memory(pp, scope, &r);
        for (int i = 0; i < n_grads; i++) nb_tensor_release(got[i]);
    }
    if (st) {
        fprintf(stderr, "nabla mem: %s\n", nb_last_error());
        rc = 1;
    } else {
        char label[256] = "(none)";
        if (r.peak_op >= 0) nb_op_label(g->ops[r.peak_op], label, sizeof label);
        printf("%s: one step of the main program at batch %ld\n", path, batch);
        print_bytes("peak of temporaries", r.peak_bytes);
        printf("    at op %d, %s; the largest live there:\n", r.peak_op, label);
        for (int i = 0; i < r.n_peak_vars; i++)
            printf("      %-40s %12zu bytes\n", r.peak_vars[i], r.peak_var_bytes[i]);
        if (r.activation_bytes) print_bytes("activations kept for backward", r.activation_bytes);
        print_bytes("planned buffers (held)", r.planned_bytes);
        printf("    %d buffers for %d temporaries\n", r.n_buffers, r.n_temporaries);
        print_bytes("one buffer per temporary", r.unplanned_bytes);
        if (r.fetched_bytes) print_bytes("fetched (storage of their own)", r.fetched_bytes);
        print_bytes("parameters and state (scope)", r.scope_bytes);
        static const char *const roles[5] = {"forward", "backward", "optimiser", "loss", "startup"};
        for (int k = 0; k < 5; k++)
            if (r.role_bytes[k]) {
                char what[64];
                snprintf(what, sizeof what, "temporaries of %s ops", roles[k]);
                print_bytes(what, r.role_bytes[k]);
            }
    }
    for (int i = 0; i < n_feed; i++) nb_tensor_release(vals[i]);
    nb_prepared_free(pp);
    nb_executor_free(e);
    nb_scope_free(scope);
    nb_program_free(main_p);
    nb_program_free(startup);
    return rc;
}
