/* What the harnesses of fuzz/ share: a temporary file for the loaders that
 * take a path, and the small program the checkpoint harness loads into
 * (seeds.c writes checkpoints of the same program, so that the seeds load). */
#ifndef NABLA_FUZZ_UTIL_H
#define NABLA_FUZZ_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nabla/program.h"

/* Stops the harness: a wrong result is a finding as much as a crash is. */
#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

static char fuzz_path_buf[4096];

static inline void fuzz_remove_file(void) { unlink(fuzz_path_buf); }

/* Writes the input to this process's temporary file (made on the first
 * call, removed at exit) and returns its path. The loaders under test read
 * files, and nabla has no in-memory entry for them: a file in $TMPDIR (a
 * tmpfs on most systems) costs little next to the loading. */
static inline const char *fuzz_write_file(const uint8_t *data, size_t size)
{
    if (!fuzz_path_buf[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_path_buf, sizeof fuzz_path_buf, "%s/nabla-fuzz-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(fuzz_path_buf);
        FUZZ_CHECK(fd >= 0);
        close(fd);
        atexit(fuzz_remove_file);
    }
    FILE *f = fopen(fuzz_path_buf, "wb");
    FUZZ_CHECK(f);
    FUZZ_CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    FUZZ_CHECK(fclose(f) == 0);
    return fuzz_path_buf;
}

/* The state of a small training program: its persistable vars, of several
 * dtypes and ranks, one 0-d and one with a size left open (-1). */
typedef struct fuzz_var {
    const char *name;
    nb_dtype dtype;
    int ndim;
    int64_t shape[2];
} fuzz_var;

static const fuzz_var fuzz_ckpt_vars[] = {
    {"fc.w", NB_F32, 2, {4, 3}},   {"fc.b", NB_F32, 1, {3}},  {"lr", NB_F64, 1, {1}},   {"step", NB_I64, 0, {0}},
    {"table", NB_I32, 2, {-1, 2}}, {"mask", NB_BOOL, 1, {2}}, {"bytes", NB_U8, 1, {5}},
};
#define FUZZ_CKPT_NVARS ((int)(sizeof fuzz_ckpt_vars / sizeof fuzz_ckpt_vars[0]))

static inline nb_program *fuzz_ckpt_program(void)
{
    nb_program *p;
    if (nb_program_new(&p)) return NULL;
    for (int i = 0; i < FUZZ_CKPT_NVARS; i++) {
        const fuzz_var *v = &fuzz_ckpt_vars[i];
        nb_var *var;
        if (nb_block_create_var(nb_program_global_block(p), v->name, v->dtype, v->ndim, v->shape, &var)) {
            nb_program_free(p);
            return NULL;
        }
        var->persistable = true;
    }
    /* A var that is not persistable: a checkpoint never touches it. */
    nb_var *x;
    if (nb_block_create_var(nb_program_global_block(p), "x", NB_F32, 2, (const int64_t[]){-1, 4}, &x)) {
        nb_program_free(p);
        return NULL;
    }
    return p;
}
#endif
