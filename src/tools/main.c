/* nabla: the command-line tool. */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"ops", cmd_ops, "list every registered op: slots, attributes, gradient rules"},
    {"gradcheck", cmd_gradcheck, "check every gradient rule against finite differences"},
    {"dot", cmd_dot, "draw a program (a program file, or the example) as Graphviz DOT"},
    {"dump", cmd_dump, "print the programs of a program file"},
    {"npy", cmd_npy, "print the arrays of a NumPy .npy or .npz file (and write them again)"},
    {"mem", cmd_mem, "where one step of a program's memory goes: its peak, its buffers"},
    {"onnx-export", cmd_onnx_export, "write a trained program's inference part as an ONNX model"},
    {"onnx-import", cmd_onnx_import, "read an ONNX model into a program file"},
};

static void usage(FILE *f)
{
    fprintf(f, "nabla %s: differentiable computation in C\n\nusage: nabla COMMAND [ARGS]\n\ncommands:\n",
            NABLA_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (nb_control_register_ops()) {
        fprintf(stderr, "nabla: %s\n", nb_last_error());
        return 1;
    }
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("nabla %s\nfeatures: %s\n", NABLA_VERSION, NABLA_FEATURES[0] ? NABLA_FEATURES : "(none)");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nabla: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
