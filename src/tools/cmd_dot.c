/* nabla dot --example [--forward] [-o FILE]: writes Graphviz DOT of the
 * program of the design documents (seed 001):
 *
 *     x = layer.data("images"); l = layer.data("label"); y = layer.fc(x)
 *     cost = layer.mse(y, l)
 *
 * with the backward part nabla appends to it (unless --forward). */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "cli.h"

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
        st = nb_append_backward(main_p, nb_value_name(cost), 0, NULL, 0, NULL, &r);
        nb_backward_result_free(&r);
    }
    nb_builder_free(b);
    return st;
}

int cmd_dot(int argc, char **argv)
{
    bool example = false, backward = true;
    const char *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--example")) example = true;
        else if (!strcmp(argv[i], "--forward")) backward = false;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: nabla dot --example [--forward] [-o FILE]\n\n"
                   "Writes Graphviz DOT of the design documents' example program (data, fc,\n"
                   "mse) and the backward part nabla appends to it. Render it with\n"
                   "  nabla dot --example | dot -Tpng -o program.png\n");
            return 0;
        } else {
            fprintf(stderr, "nabla dot: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (!example) {
        fprintf(stderr, "nabla dot: say --example (see --help)\n");
        return 2;
    }
    nb_program *main_p = NULL, *startup = NULL;
    nb_status st = nb_program_new(&main_p);
    if (!st) st = nb_program_new(&startup);
    if (!st) st = build_example(main_p, startup, backward);
    FILE *f = stdout;
    if (!st && out_path && !(f = fopen(out_path, "w"))) st = nb_error(NB_ERR_IO, "cannot write %s", out_path);
    if (!st) st = nb_program_to_dot(main_p, f);
    if (f && f != stdout && fclose(f) && !st) st = nb_error(NB_ERR_IO, "cannot write %s", out_path);
    nb_program_free(main_p);
    nb_program_free(startup);
    if (st) {
        fprintf(stderr, "nabla dot: %s\n", nb_last_error());
        return 1;
    }
    return 0;
}
