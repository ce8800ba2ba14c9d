/* nabla onnx-export and nabla onnx-import: ONNX files to and from nabla's
 * program files and checkpoints (nabla/onnx.h does the work). */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "cli.h"

static int fail(const char *cmd, const char *what)
{
    fprintf(stderr, "nabla %s: %s%s%s\n", cmd, what ? what : "", what ? ": " : "", nb_last_error());
    return 1;
}

#define MAX_FETCHES 64

int cmd_onnx_export(int argc, char **argv)
{
    const char *files[2] = {0}, *out = NULL, *fetches[MAX_FETCHES];
    int n_files = 0, n_fetch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: nabla onnx-export PROGRAM_FILE CHECKPOINT --fetch VAR [--fetch VAR...] -o MODEL.onnx\n\n"
                   "Writes the inference part of the main program of PROGRAM_FILE (nb_programs_save)\n"
                   "that computes the fetched vars as an ONNX model (opset %d), with the values of\n"
                   "its parameters from CHECKPOINT (nb_checkpoint_save, or nb_train's checkpoint)\n"
                   "as initializers. The vars the user feeds become the model's inputs.\n",
                   NB_ONNX_OPSET);
            return 0;
        } else if (!strcmp(argv[i], "--fetch") && i + 1 < argc) {
            if (n_fetch == MAX_FETCHES) {
                fprintf(stderr, "nabla onnx-export: at most %d fetches\n", MAX_FETCHES);
                return 2;
            }
            fetches[n_fetch++] = argv[++i];
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if ((argv[i][0] == '-' && argv[i][1]) || n_files == 2) {
            fprintf(stderr, "nabla onnx-export: unexpected '%s' (try --help)\n", argv[i]);
            return 2;
        } else {
            files[n_files++] = argv[i];
        }
    }
    if (n_files != 2 || !n_fetch || !out) {
        fprintf(stderr, "usage: nabla onnx-export PROGRAM_FILE CHECKPOINT --fetch VAR -o MODEL.onnx (see --help)\n");
        return 2;
    }
    nb_program *main_p = NULL, *startup = NULL;
    nb_scope *scope = NULL;
    int rc = 0;
    if (nb_programs_load(&main_p, &startup, files[0])) rc = fail("onnx-export", NULL);
    else if (nb_scope_new(&scope, NULL)) rc = fail("onnx-export", NULL);
    else if (nb_checkpoint_load(files[1], main_p, scope, NULL)) rc = fail("onnx-export", NULL);
    else if (nb_onnx_export(main_p, scope, NB_NAMES_N(n_fetch, fetches), out)) rc = fail("onnx-export", NULL);
    else printf("wrote %s (ONNX opset %d)\n", out, NB_ONNX_OPSET);
    nb_scope_free(scope);
    nb_program_free(main_p);
    nb_program_free(startup);
    return rc;
}

int cmd_onnx_import(int argc, char **argv)
{
    const char *model = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: nabla onnx-import MODEL.onnx -o PROGRAM_FILE\n\n"
                   "Reads an ONNX model (opsets %d to %d) into a nabla program file: the main\n"
                   "program computes the model's outputs from data vars named as its inputs, and\n"
                   "the startup program sets its parameters to the model's initializers. Prints\n"
                   "the names of the inputs to feed and the outputs to fetch.\n",
                   NB_ONNX_MIN_OPSET, NB_ONNX_MAX_OPSET);
            return 0;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if ((argv[i][0] == '-' && argv[i][1]) || model) {
            fprintf(stderr, "nabla onnx-import: unexpected '%s' (try --help)\n", argv[i]);
            return 2;
        } else {
            model = argv[i];
        }
    }
    if (!model || !out) {
        fprintf(stderr, "usage: nabla onnx-import MODEL.onnx -o PROGRAM_FILE (see --help)\n");
        return 2;
    }
    nb_program *main_p = NULL, *startup = NULL;
    nb_builder *b = NULL;
    nb_value outs[MAX_FETCHES];
    int n_out = 0, rc = 0;
    if (nb_program_new(&main_p) || nb_program_new(&startup) || nb_builder_new_record(&b, main_p, startup))
        rc = fail("onnx-import", NULL);
    else if (nb_onnx_import(model, b, NB_NO_VALUES, MAX_FETCHES, outs, &n_out)) rc = fail("onnx-import", NULL);
    else if (nb_programs_save(out, main_p, startup)) rc = fail("onnx-import", NULL);
    if (!rc) {
        printf("wrote %s\ninputs:", out);
        const nb_block *g = nb_program_global_block(main_p);
        for (int i = 0; i < g->n_vars; i++)
            if (g->vars[i]->is_data) printf(" %s", g->vars[i]->name);
        printf("\noutputs:");
        for (int i = 0; i < n_out && i < MAX_FETCHES; i++) printf(" %s", nb_value_name(outs[i]));
        printf("\n");
    }
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
    return rc;
}
