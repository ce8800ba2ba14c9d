/* Program files: the public API of nabla/program_file.h over the encoder and
 * decoder, and the file handling around them (atomic writes, bounded reads). */
#include <errno.h>
#include "nabla/device.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/input_file.h"
#include "atomic_file.h"
#include "program_file_internal.h"

/* Far beyond any program; a bigger file is not one. */
#define MAX_FILE_BYTES ((size_t)1 << 30)

static nb_status read_file(const char *path, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f;
    nb_status st = nb_input_file_open("program file", path, &f, NULL);
    if (st) return st;
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = nb_malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= MAX_FILE_BYTES) {
            st = nb_error(NB_ERR_FORMAT, "%s: larger than %zu bytes, not a nabla program file", path, MAX_FILE_BYTES);
            break;
        }
        uint8_t *nb = nb_realloc(b, cap * 2);
        if (!nb) {
            nb_free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    if (!st && !b) st = nb_error(NB_ERR_NOMEM, "reading %s: out of memory", path);
    if (!st && ferror(f)) st = nb_error(NB_ERR_IO, "cannot read program file %s: %s", path, strerror(errno));
    fclose(f);
    if (st) {
        nb_free(b);
        return st;
    }
    *buf = b;
    *len = n;
    return NB_OK;
}

/* Replaces `path` through nb_atomic_open, as checkpoints are: readers see
 * the old file or the new one, never part of one; the file keeps its mode,
 * a link is written through, and temporary files left by writers killed
 * mid-save are cleaned up (atomic_file.h). */
static nb_status write_atomic(const char *path, const uint8_t *buf, size_t len)
{
    nb_atomic_file *af;
    nb_status st = nb_atomic_open(&af, path);
    if (!st) {
        st = nb_atomic_write(af, buf, len);
        if (!st) st = nb_atomic_commit(af);
        else nb_atomic_abort(af);
    }
    return st ? nb_error_context(st, "cannot write program file") : NB_OK;
}

nb_status nb_programs_serialize(const nb_program *main, const nb_program *startup, uint8_t **buf, size_t *len)
{
    if (!buf || !len) return nb_error(NB_ERR_ARG, "serialize program: NULL output");
    *buf = NULL;
    *len = 0;
    if (!main) return nb_error(NB_ERR_ARG, "serialize program: program is NULL");
    return nb_programs_encode(main, startup, buf, len);
}

nb_status nb_program_serialize(const nb_program *p, uint8_t **buf, size_t *len)
{
    return nb_programs_serialize(p, NULL, buf, len);
}

nb_status nb_programs_deserialize(nb_program **main, nb_program **startup, const uint8_t *buf, size_t len)
{
    if (!main) return nb_error(NB_ERR_ARG, "deserialize program: NULL output");
    return nb_programs_decode(buf, len, "program data", main, startup);
}

nb_status nb_program_deserialize(nb_program **out, const uint8_t *buf, size_t len)
{
    return nb_programs_deserialize(out, NULL, buf, len);
}

nb_status nb_programs_save(const char *path, const nb_program *main, const nb_program *startup)
{
    if (!path || !*path) return nb_error(NB_ERR_ARG, "save program: no file name");
    if (!main) return nb_error(NB_ERR_ARG, "save program %s: program is NULL", path);
    uint8_t *buf;
    size_t len;
    nb_status st = nb_programs_encode(main, startup, &buf, &len);
    if (st) return st;
    st = write_atomic(path, buf, len);
    nb_free(buf);
    return st;
}

nb_status nb_program_save(const char *path, const nb_program *p) { return nb_programs_save(path, p, NULL); }

nb_status nb_programs_load(nb_program **main, nb_program **startup, const char *path)
{
    if (!main) return nb_error(NB_ERR_ARG, "load program: NULL output");
    *main = NULL;
    if (startup) *startup = NULL;
    if (!path || !*path) return nb_error(NB_ERR_ARG, "load program: no file name");
    uint8_t *buf;
    size_t len;
    nb_status st = read_file(path, &buf, &len);
    if (st) return st;
    st = nb_programs_decode(buf, len, path, main, startup);
    nb_free(buf);
    return st;
}

nb_status nb_program_load(nb_program **out, const char *path) { return nb_programs_load(out, NULL, path); }
