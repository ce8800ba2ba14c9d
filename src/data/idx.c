/* The IDX loader. zlib's gzread reads gzip and plain files alike, so one
 * path serves both; what differs is how the payload length is checked
 * before memory is committed to it: a plain file's size is known (stat), a
 * gzip stream's is not, so a payload too large to trust is read into a
 * buffer that grows with the data actually there. */
#include <errno.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "../core/input_file.h"
#include "data_internal.h"

typedef struct {
    const char *path;
    gzFile gz;
    char dims[NB_SHAPE_STR_MAX]; /* the header's sizes, for messages */
} idx_file;

/* Reads up to len bytes; returns how many came, or -1 on a read error. */
static int64_t read_up_to(gzFile gz, void *buf, int64_t len)
{
    int64_t got = 0;
    while (got < len) {
        int64_t want = len - got > (1 << 30) ? (1 << 30) : len - got;
        int n = gzread(gz, (char *)buf + got, (unsigned)want);
        if (n < 0) return -1;
        if (n == 0) break;
        got += n;
    }
    return got;
}

static nb_status gz_failure(const idx_file *f)
{
    int code = Z_OK;
    const char *msg = gzerror(f->gz, &code);
    if (code == Z_ERRNO) return nb_error(NB_ERR_IO, "idx: %s: read error: %s", f->path, strerror(errno));
    if (!msg) msg = "?";
    size_t plen = strlen(f->path); /* zlib's text starts with the path, which the message already names */
    if (!strncmp(msg, f->path, plen) && !strncmp(msg + plen, ": ", 2)) msg += plen + 2;
    return nb_error(NB_ERR_FORMAT, "idx: %s: corrupt gzip data: %s", f->path, msg);
}

static nb_status truncated(const idx_file *f, int64_t expected, int64_t found)
{
    int code = Z_OK;
    gzerror(f->gz, &code);
    return nb_error(NB_ERR_FORMAT,
                    "idx: %s: truncated: the header's sizes %s need %lld payload bytes, the file has %lld%s", f->path,
                    f->dims, (long long)expected, (long long)found,
                    code == Z_BUF_ERROR ? " (its gzip stream is cut short)" : "");
}

static nb_status trailing(const idx_file *f, int64_t expected, int64_t extra, bool at_least)
{
    return nb_error(NB_ERR_FORMAT,
                    "idx: %s: %s%lld bytes after the %lld payload bytes that the header's sizes %s describe "
                    "(trailing data: %lld expected, %s%lld found)",
                    f->path, at_least ? "at least " : "", (long long)extra, (long long)expected, f->dims,
                    (long long)expected, at_least ? "at least " : "", (long long)(expected + extra));
}

/* After the payload of a gzip stream: there must be nothing more. Reading on
 * also makes zlib check the stream's CRC and length. */
static nb_status check_gz_end(const idx_file *f, int64_t expected)
{
    static const int64_t scan_max = (int64_t)64 << 20;
    char buf[4096];
    int64_t extra = 0;
    for (;;) {
        int n = gzread(f->gz, buf, sizeof buf);
        if (n < 0) return gz_failure(f);
        if (n == 0) break;
        extra += n;
        if (extra >= scan_max) return trailing(f, expected, extra, true);
    }
    int code = Z_OK;
    gzerror(f->gz, &code);
    if (code == Z_BUF_ERROR)
        return nb_error(NB_ERR_FORMAT, "idx: %s: the gzip stream is cut short after the payload", f->path);
    return extra ? trailing(f, expected, extra, false) : NB_OK;
}

/* A gzip payload of unknown true length: the buffer grows by doubling as
 * data arrives, up to `expected`, so a header claiming terabytes costs what
 * the stream really holds. */
static nb_status read_growing(const idx_file *f, int64_t expected, char **data)
{
    int64_t cap = expected < (1 << 20) ? expected : (1 << 20), got = 0;
    char *buf = nb_malloc(cap > 0 ? (size_t)cap : 1);
    if (!buf) return nb_error(NB_ERR_NOMEM, "idx: %s: out of memory", f->path);
    while (got < expected) {
        if (got == cap) {
            cap = cap > expected / 2 ? expected : 2 * cap;
            char *b = nb_realloc(buf, (size_t)cap);
            if (!b) {
                nb_free(buf);
                return nb_error(NB_ERR_NOMEM, "idx: %s: out of memory after %lld bytes", f->path, (long long)got);
            }
            buf = b;
        }
        int64_t n = read_up_to(f->gz, buf + got, cap - got);
        if (n < 0) {
            nb_free(buf);
            return gz_failure(f);
        }
        got += n;
        if (got < cap) break; /* the end of the stream */
    }
    if (got < expected) {
        nb_free(buf);
        return truncated(f, expected, got);
    }
    *data = buf;
    return NB_OK;
}

static bool host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void big_endian_to_host(void *data, int64_t n, size_t size)
{
    if (size == 1 || !host_is_little_endian()) return;
    uint8_t *p = data;
    for (int64_t i = 0; i < n; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

static nb_status element_type(const idx_file *f, uint8_t type, nb_dtype *dt)
{
    switch (type) {
    case 0x08: *dt = NB_U8; return NB_OK;
    case 0x0C: *dt = NB_I32; return NB_OK;
    case 0x0D: *dt = NB_F32; return NB_OK;
    case 0x0E: *dt = NB_F64; return NB_OK;
    case 0x09:
    case 0x0B:
        return nb_error(NB_ERR_UNSUPPORTED,
                        "idx: %s: element type 0x%02x (%s) is not supported: nabla has no such dtype", f->path, type,
                        type == 0x09 ? "signed byte" : "int16");
    default:
        return nb_error(NB_ERR_FORMAT,
                        "idx: %s: unknown element type 0x%02x in the magic number (IDX types are 0x08 unsigned byte, "
                        "0x09 signed byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)",
                        f->path, type);
    }
}

/* Reads the header: dtype, ndim and sizes; *payload is the byte count. */
static nb_status read_header(idx_file *f, nb_dtype *dt, int *ndim, int64_t *shape, int64_t *payload)
{
    uint8_t magic[4], raw[4 * NB_MAX_DIMS];
    int64_t n = read_up_to(f->gz, magic, 4);
    if (n < 0) return gz_failure(f);
    if (n < 4)
        return nb_error(NB_ERR_FORMAT, "idx: %s: %lld bytes, too short for an IDX header (a 4-byte magic number first)",
                        f->path, (long long)n);
    if (magic[0] || magic[1])
        return nb_error(NB_ERR_FORMAT,
                        "idx: %s: bad magic number 0x%02x%02x%02x%02x: an IDX file starts with two zero bytes, "
                        "the element type and the number of dimensions (is this an IDX file?)",
                        f->path, magic[0], magic[1], magic[2], magic[3]);
    nb_status st = element_type(f, magic[2], dt);
    if (st) return st;
    *ndim = magic[3];
    if (*ndim < 1 || *ndim > NB_MAX_DIMS)
        return nb_error(NB_ERR_FORMAT,
                        "idx: %s: %d dimensions in the magic number 0x%02x%02x%02x%02x (1 to %d allowed)", f->path,
                        *ndim, magic[0], magic[1], magic[2], magic[3], NB_MAX_DIMS);
    n = read_up_to(f->gz, raw, 4 * *ndim);
    if (n < 0) return gz_failure(f);
    if (n < 4 * *ndim)
        return nb_error(NB_ERR_FORMAT, "idx: %s: truncated header: %d dimensions need %d bytes of sizes, found %lld",
                        f->path, *ndim, 4 * *ndim, (long long)n);
    /* The tensor code's own limit on elements, in bytes here. The strides of
     * a tensor multiply every non-zero size, so those must stay under the
     * limit even when another size is 0 and the payload is empty. */
    const int64_t limit = INT64_MAX / 16;
    int64_t span = (int64_t)nb_dtype_size(*dt);
    bool too_big = false, empty = false;
    for (int i = 0; i < *ndim; i++) {
        const uint8_t *p = raw + 4 * i;
        shape[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
        if (!shape[i]) empty = true;
        else if (span > limit / shape[i]) too_big = true;
        else span *= shape[i];
    }
    int64_t bytes = empty ? 0 : span;
    nb_shape_str(f->dims, sizeof f->dims, *ndim, shape);
    if (too_big || (uint64_t)bytes > SIZE_MAX)
        return nb_error(NB_ERR_FORMAT, "idx: %s: the header's sizes %s describe more data than nabla can hold", f->path,
                        f->dims);
    *payload = bytes;
    return NB_OK;
}

static nb_status load(idx_file *f, uint64_t size, int64_t direct_max, nb_tensor **out)
{
    nb_dtype dt = NB_U8;
    int ndim = 0;
    int64_t shape[NB_MAX_DIMS] = {0}, payload = 0;
    nb_status st = read_header(f, &dt, &ndim, shape, &payload);
    if (st) return st;
    int64_t header = 4 + 4 * (int64_t)ndim;
    bool plain = gzdirect(f->gz);
    if (plain) {
        int64_t found = (int64_t)size - header;
        if (found < payload) return truncated(f, payload, found);
        if (found > payload) return trailing(f, payload, found - payload, false);
    }
    nb_tensor *t = NULL;
    if (plain || payload <= direct_max) {
        st = nb_tensor_new(&t, dt, ndim, shape);
        if (st) return nb_error_context(st, "idx: %s", f->path);
        int64_t got = read_up_to(f->gz, nb_tensor_data(t), payload);
        if (got < 0) st = gz_failure(f);
        else if (got < payload) st = truncated(f, payload, got);
    } else {
        char *data = NULL;
        st = read_growing(f, payload, &data);
        if (!st) {
            st = nb_tensor_from_data(&t, dt, ndim, shape, data);
            if (st) nb_error_context(st, "idx: %s", f->path);
        }
        nb_free(data);
    }
    if (!st && !plain) st = check_gz_end(f, payload);
    if (st) {
        nb_tensor_release(t);
        return st;
    }
    big_endian_to_host(nb_tensor_data(t), nb_tensor_numel(t), nb_dtype_size(dt));
    *out = t;
    return NB_OK;
}

nb_status nb_idx_load_with(const char *path, nb_tensor **out, int64_t direct_max)
{
    if (!out) return nb_error(NB_ERR_ARG, "idx: out is NULL");
    *out = NULL;
    uint64_t size;
    nb_status st = nb_input_file_check("idx", path, &size);
    if (st) return st;
    idx_file f = {.path = path};
    errno = 0;
    f.gz = gzopen(path, "rb");
    if (!f.gz)
        return nb_error(errno ? NB_ERR_IO : NB_ERR_NOMEM, "idx: cannot open %s: %s", path,
                        errno ? strerror(errno) : "out of memory");
    gzbuffer(f.gz, 1 << 17);
    st = load(&f, size, direct_max, out);
    gzclose(f.gz);
    return st;
}

nb_status nb_idx_load(nb_tensor **out, const char *path) { return nb_idx_load_with(path, out, NB_IDX_DIRECT_MAX); }
