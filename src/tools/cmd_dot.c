/* nabla dot FILE [--fused] [-o OUT]: writes Graphviz DOT of the main program
 * of a program file; --fused draws the executor's fused groups as clusters.
 *
 * nabla dot --example [--forward] [-o OUT] [--save FILE]: the same for the
 * example program, an fc layer and its mean squared error:
 *
 *     x = layer.data("images"); l = layer.data("label"); y = layer.fc(x)
 *     cost = layer.mse(y, l)
 *
 * with the backward part nabla appends to it (unless --forward); --save also
 * writes it, with its startup program, to a program file. */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "nabla/program_file.h"
#include "cli.h"
#include "program/record.h"

static nb_status build_example(nb_program *main_p, nb_program *startup, bool backward)
{
    nb_builder *b;
    nb_status st = nb_builder_new_record(&b, main_p, startup);
    if (st) return st;
    nb_value x = nb_data(b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value l = nb_data(b, "label", NB_F32, 2, (int64_t[]){-1, 10});
    nb_value w = nb_create_parameter(b, "fc.w", NB_F32, 2, (int64_t[]){784, 10}, "uniform_random", 0, NULL);
    nb_value bias = nb_create_parameter(b, "fc.b", NB_F32, 1, (int64_t[]){10}, "fill_constant", 0, NULL);
    nb_value y = nb_fc(b, x, w, bias, 1);
    nb_value cost = nb_mse_loss(b, y, l, "mean");
    st = nb_builder_status(b);
    if (st) nb_error(st, "%s", nb_builder_error(b));
    if (!st && backward) {
        nb_backward_result r;
        st = nb_append_backward(main_p, nb_value_name(cost), NULL, &r);
        nb_backward_result_free(&r);
    }
    nb_builder_free(b);
    return st;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nabla dot FILE [--fused] [-o OUT]\n"
            "       nabla dot --example [--forward] [--fused] [-o OUT] [--save FILE]\n\n"
            "Writes Graphviz DOT of the main program of a program file (written by\n"
            "nb_program_save or nb_programs_save), or with --example of the design\n"
            "documents' example program (data, fc, mse) and the backward part nabla\n"
            "appends to it (--forward: without it). --save FILE also writes the\n"
            "example's main and startup programs to the program file FILE, for\n"
            "`nabla dump FILE` and `nabla dot FILE`. --fused draws the groups of\n"
            "elementwise ops the executor runs as one pass (unless NABLA_FUSE=0) as\n"
            "dashed clusters named \"fused N\". Render a drawing with\n"
            "  nabla dot --example | dot -Tpng -o program.png\n");
}

int cmd_dot(int argc, char **argv)
{
    bool example = false, backward = true, fused = false;
    const char *out_path = NULL, *save_path = NULL, *in_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--example")) example = true;
        else if (!strcmp(argv[i], "--forward")) backward = false;
        else if (!strcmp(argv[i], "--fused")) fused = true;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--save") && i + 1 < argc) save_path = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !in_path) {
            in_path = argv[i];
        } else {
            fprintf(stderr, "nabla dot: unexpected argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (example == (in_path != NULL)) {
        fprintf(stderr,
                example ? "nabla dot: give a FILE or --example, not both (see --help)\n"
                        : "nabla dot: give a program FILE or --example (see --help)\n");
        return 2;
    }
    if (!example && (save_path || !backward)) {
        fprintf(stderr, "nabla dot: --save and --forward go with --example (see --help)\n");
        return 2;
    }
    nb_program *main_p = NULL, *startup = NULL;
    nb_status st;
    if (example) {
        st = nb_program_new(&main_p);
        if (!st) st = nb_program_new(&startup);
        if (!st) st = build_example(main_p, startup, backward);
        if (!st && save_path) st = nb_programs_save(save_path, main_p, startup);
    } else {
        st = nb_program_load(&main_p, in_path);
    }
    FILE *f = stdout;
    if (!st && out_path && !(f = fopen(out_path, "w"))) st = nb_error(NB_ERR_IO, "cannot write %s", out_path);
    if (!st) st = fused ? nb_program_to_dot_fused(main_p, f) : nb_program_to_dot(main_p, f);
    if (f && f != stdout && fclose(f) && !st) st = nb_error(NB_ERR_IO, "cannot write %s", out_path);
    nb_program_free(main_p);
    nb_program_free(startup);
    if (st) {
        fprintf(stderr, "nabla dot: %s\n", nb_last_error());
        return 1;
    }
    return 0;
}
