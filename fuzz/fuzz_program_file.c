/* libFuzzer harness for program files (nb_programs_deserialize: the bytes
 * of a file holding a main program and perhaps its startup program).
 * Build and run: `make fuzz` (fuzz/README). By hand:
 *     build-fuzz/fuzz/fuzz_program_file -max_total_time=60 build-fuzz/corpus/program_file build-fuzz/seeds/program_file
 *
 * A refused file gives an error message and no program. A file that loads
 * gives a valid program: it prints, and written again and read back it
 * prints the same. */
#include <stdint.h>
#include <stdio.h>
#include "fuzz_util.h"
#include "nabla/device.h"
#include "nabla/program_file.h"
#include "nabla/status.h"

/* The printed form of p (malloc'ed by open_memstream: free it with free). */
static char *printed(const nb_program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_CHECK(f);
    FUZZ_CHECK(!nb_program_print(p, f));
    FUZZ_CHECK(!fclose(f));
    return text;
}

static void check_same(const nb_program *a, const nb_program *b)
{
    FUZZ_CHECK(!a == !b);
    if (!a) return;
    char *x = printed(a), *y = printed(b);
    FUZZ_CHECK(!strcmp(x, y));
    free(x);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_program *main_p = NULL, *startup = NULL;
    nb_clear_error();
    nb_status st = nb_programs_deserialize(&main_p, &startup, data, size);
    if (st) {
        FUZZ_CHECK(!main_p && !startup && *nb_last_error());
        return 0;
    }
    FUZZ_CHECK(main_p);
    uint8_t *buf = NULL;
    size_t len = 0;
    FUZZ_CHECK(!nb_programs_serialize(main_p, startup, &buf, &len));
    nb_program *main2 = NULL, *startup2 = NULL;
    FUZZ_CHECK(!nb_programs_deserialize(&main2, &startup2, buf, len));
    nb_free(buf);
    check_same(main_p, main2);
    check_same(startup, startup2);
    nb_program_free(main2);
    nb_program_free(startup2);
    nb_program_free(main_p);
    nb_program_free(startup);
    return 0;
}
