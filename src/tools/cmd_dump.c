/* nabla dump FILE: prints the program(s) of a program file readably. */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "nabla/program_file.h"
#include "cli.h"

int cmd_dump(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: nabla dump FILE\n\n"
                   "Prints the programs of a program file (written by nb_program_save or\n"
                   "nb_programs_save): its main program and, when it holds one, the startup\n"
                   "program, with every block, var and op. `nabla dot --example --save FILE`\n"
                   "writes an example file.\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "nabla dump: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "nabla dump: one file at a time ('%s' and '%s' given)\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: nabla dump FILE (see --help)\n");
        return 2;
    }
    nb_program *main_p, *startup;
    nb_status st = nb_programs_load(&main_p, &startup, path);
    if (st) {
        fprintf(stderr, "nabla dump: %s\n", nb_last_error());
        return 1;
    }
    printf("%s: nabla program file, %s\n\n== main program ==\n", path,
           startup ? "main and startup programs" : "one program");
    st = nb_program_print(main_p, stdout);
    if (!st && startup) {
        printf("\n== startup program ==\n");
        st = nb_program_print(startup, stdout);
    }
    if (!st && (fflush(stdout) || ferror(stdout))) st = nb_error(NB_ERR_IO, "cannot write to standard output");
    nb_program_free(main_p);
    nb_program_free(startup);
    if (st) {
        fprintf(stderr, "nabla dump: %s\n", nb_last_error());
        return 1;
    }
    return 0;
}
