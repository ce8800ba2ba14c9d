/* Program files: the public API of nabla/program_file.h over the encoder and
 * decoder, and the file handling around them (atomic writes, bounded reads). */
#include <errno.h>
#include "nabla/device.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "program_file_internal.h"

/* Far beyond any program; a bigger file is not one. */
#define MAX_FILE_BYTES ((size_t)1 << 30)

static nb_status read_file(const char *path, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return nb_error(errno == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "cannot open program file %s: %s", path,
                        strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = nb_malloc(cap);
    nb_status st = NB_OK;
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

/* Makes a rename durable by syncing the directory holding `path`. Some file
 * systems refuse to sync a directory; the file itself is synced already. */
static void sync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? nb_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : nb_strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    nb_free(dir);
}

/* Writes a temporary file beside `path`, syncs it and renames it over
 * `path`: readers see the old file or the new one, never part of one. */
static nb_status write_atomic(const char *path, const uint8_t *buf, size_t len)
{
    size_t size = strlen(path) + 48;
    char *tmp = nb_malloc(size);
    if (!tmp) return nb_error(NB_ERR_NOMEM, "saving %s: out of memory", path);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, size, "%s.tmp.%ld.%d", path, (long)getpid(), attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        nb_status st = nb_error(NB_ERR_IO, "cannot write program file %s: %s", path, strerror(errno));
        nb_free(tmp);
        return st;
    }
    nb_status st = NB_OK;
    for (size_t done = 0; done < len && !st;) {
        ssize_t w = write(fd, buf + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) st = nb_error(NB_ERR_IO, "cannot write program file %s: %s", path, w < 0 ? strerror(errno) : "no progress");
        else done += (size_t)w;
    }
    if (!st && fsync(fd)) st = nb_error(NB_ERR_IO, "cannot write program file %s: fsync: %s", path, strerror(errno));
    if (close(fd) && !st) st = nb_error(NB_ERR_IO, "cannot write program file %s: %s", path, strerror(errno));
    if (!st && rename(tmp, path))
        st = nb_error(NB_ERR_IO, "cannot write program file %s: rename: %s", path, strerror(errno));
    if (st) unlink(tmp);
    else sync_dir_of(path);
    nb_free(tmp);
    return st;
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
