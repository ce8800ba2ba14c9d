/* Opening a file to load (input_file.h). */
#include "input_file.h"
#include "nabla/device.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static nb_status not_opened(const char *what, const char *path)
{
    return nb_error(errno == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "%s '%s': cannot open: %s", what, path,
                    strerror(errno));
}

/* Whether the stat describes a file a loader can read from start to end. */
static nb_status regular(const char *what, const char *path, const struct stat *sb, uint64_t *size)
{
    if (!S_ISREG(sb->st_mode)) return nb_error(NB_ERR_IO, "%s '%s' is not a regular file", what, path);
    if (size) *size = (uint64_t)sb->st_size;
    return NB_OK;
}

static nb_status named(const char *what, const char *path)
{
    if (!path || !*path) return nb_error(NB_ERR_ARG, "%s: empty file path", what);
    return NB_OK;
}

nb_status nb_input_file_check(const char *what, const char *path, uint64_t *size)
{
    nb_status st = named(what, path);
    if (st) return st;
    struct stat sb;
    if (stat(path, &sb)) return not_opened(what, path);
    return regular(what, path, &sb, size);
}

nb_status nb_input_file_open(const char *what, const char *path, FILE **f, uint64_t *size)
{
    *f = NULL;
    nb_status st = named(what, path);
    if (st) return st;
    FILE *fp = fopen(path, "rb");
    if (!fp) return not_opened(what, path);
    struct stat sb;
    if (fstat(fileno(fp), &sb))
        st = nb_error(NB_ERR_IO, "%s '%s': cannot stat the file: %s", what, path, strerror(errno));
    else st = regular(what, path, &sb, size);
    if (st) fclose(fp);
    else *f = fp;
    return st;
}

nb_status nb_input_file_load(const char *what, const char *path, size_t size, nb_input_loader load,
                             void (*destroy)(void *obj), void **out)
{
    *out = NULL;
    FILE *fp;
    uint64_t file_size = 0;
    nb_status st = nb_input_file_open(what, path, &fp, &file_size);
    if (st) return st;
    void *obj = nb_calloc(1, size);
    st = obj ? load(fp, file_size, obj) : nb_error(NB_ERR_NOMEM, "out of memory");
    fclose(fp);
    if (st) {
        if (obj) destroy(obj);
        return nb_error_context(st, "%s '%s'", what, path);
    }
    *out = obj;
    return NB_OK;
}
