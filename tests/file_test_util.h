/* What the tests of file formats share: a folder of their own (made by
 * make_temp_dir into `dir` at the start of main), paths in it, and whole
 * files written and read back as bytes. */
#ifndef NABLA_FILE_TEST_UTIL_H
#define NABLA_FILE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "data_test_util.h"

static char dir[256];

/* dir/name, in one of four rotating buffers (so a call can take two). */
static inline const char *path_of(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Writes a new file (exits the test on failure: nothing after it means
 * anything then). */
static inline void write_file(const char *path, const void *p, size_t n)
{
    unlink(path); /* a new file: ext4 makes rewriting a truncated one slow */
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

/* The whole file, malloc'ed (free it), its size in *n; NULL if unreadable. */
static inline unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    unsigned char *p = NULL;
    size_t cap = 0;
    for (;;) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 4096;
            p = realloc(p, cap);
        }
        size_t k = fread(p + *n, 1, cap - *n, f);
        if (!k) break;
        *n += k;
    }
    fclose(f);
    return p;
}

#endif
