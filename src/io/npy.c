/* .npy arrays: read from any byte stream (npy_read, which npz.c uses for
 * zip members too), written to any sink, and the .npy file calls of
 * nabla/npy.h. The header's grammar is in npy_header.c.
 *
 * Every size in the file is checked against the bytes there are before
 * anything is allocated, so a hostile header costs no more memory than the
 * file (twice that for dtypes converted on the way in). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "../core/input_file.h"
#include "atomic_file.h"
#include "nabla/device.h"
#include "npy_internal.h"
#include "safetensors_internal.h"

/* ---- reading --------------------------------------------------------------- */

/* IEEE half to single, exactly: every half is a single. */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* inf, or NaN with its payload */
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (mant << 13); /* rebias 15 -> 127 */
    } else if (!mant) {
        bits = sign; /* +-0 */
    } else {
        /* A subnormal mant * 2^-24 is a normal single: shift the leading
         * one up to the implicit bit. */
        uint32_t shift = 0;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            shift++;
        }
        bits = sign | ((113 - shift) << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Converts n elements of kind k (little-endian bytes at p) into dst, the
 * tensor's data, starting at element `at`. */
static void convert(npy_kind k, const unsigned char *p, size_t n, void *dst, size_t at)
{
    for (size_t i = 0; i < n; i++, p += npy_kind_size(k)) {
        uint32_t v = k == NPY_I1 ? p[0]
            : k == NPY_U4        ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                                 : (uint32_t)p[0] | (uint32_t)p[1] << 8;
        switch (k) {
        case NPY_F2: ((float *)dst)[at + i] = half_to_float((uint16_t)v); break;
        case NPY_I1: ((int32_t *)dst)[at + i] = (int8_t)(uint8_t)v; break;
        case NPY_I2: ((int32_t *)dst)[at + i] = (int16_t)(uint16_t)v; break;
        case NPY_U2: ((int32_t *)dst)[at + i] = (int32_t)v; break;
        default: ((int64_t *)dst)[at + i] = (int64_t)v; break; /* NPY_U4 */
        }
    }
}

static nb_status read_data(npy_source *src, npy_kind k, nb_tensor *t, size_t count)
{
    unsigned char *dst = nb_tensor_data(t);
    size_t es = npy_kind_size(k);
    nb_status st;
    if (es == nb_dtype_size(t->dtype)) { /* nabla's own dtype: straight in */
        if (count && (st = src->read(src->ctx, dst, count * es))) return st;
        if (!nb_st_host_is_little_endian() && es > 1) nb_st_swap_bytes(dst, count, es);
        if (k == NPY_B1)
            for (size_t i = 0; i < count; i++)
                if (dst[i] > 1)
                    return nb_error(NB_ERR_FORMAT, "the bool array holds byte %u at element %zu (not 0 or 1)", dst[i],
                                    i);
        return NB_OK;
    }
    unsigned char chunk[4096];
    for (size_t done = 0; done < count;) {
        size_t m = count - done < sizeof chunk / es ? count - done : sizeof chunk / es;
        if ((st = src->read(src->ctx, chunk, m * es))) return st;
        convert(k, chunk, m, dst, done);
        done += m;
    }
    return NB_OK;
}

/* The element count of a header's shape, refusing shapes whose sizes (or
 * strides) overflow, as the safetensors reader does. */
static nb_status shape_numel(const npy_header *h, uint64_t *numel)
{
    int64_t span = 1, n = 1;
    for (int i = 0; i < h->ndim; i++) {
        int64_t d = h->shape[i];
        if (d > 1 && span > INT64_MAX / 16 / d) {
            char s[NB_SHAPE_STR_MAX];
            return nb_error(NB_ERR_FORMAT, "the shape %s is too large (its size overflows)",
                            nb_shape_str(s, sizeof s, h->ndim, h->shape));
        }
        if (d > 1) span *= d;
        n *= d;
    }
    *numel = (uint64_t)n;
    return NB_OK;
}

/* Reads the array of header h (data: the rest of src) into a C-order tensor. */
static nb_status read_array(npy_source *src, const npy_header *h, uint64_t data_bytes, nb_tensor **out)
{
    uint64_t numel = 0;
    nb_status st = shape_numel(h, &numel);
    if (st) return st;
    size_t es = npy_kind_size(h->kind);
    if (numel * es != data_bytes) {
        char s[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_FORMAT, "the shape %s needs %llu bytes of data, but %llu follow the header",
                        nb_shape_str(s, sizeof s, h->ndim, h->shape), (unsigned long long)(numel * es),
                        (unsigned long long)data_bytes);
    }
    if (data_bytes > SIZE_MAX) return nb_error(NB_ERR_NOMEM, "the array does not fit in memory");
    /* Fortran order is C order of the reversed shape: read that, then
     * transpose it back. */
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < h->ndim; i++) shape[i] = h->fortran ? h->shape[h->ndim - 1 - i] : h->shape[i];
    nb_tensor *t;
    if ((st = nb_tensor_new(&t, npy_kind_dtype(h->kind), h->ndim, shape))) return nb_error_context(st, "the array");
    if ((st = read_data(src, h->kind, t, (size_t)numel))) {
        nb_tensor_release(t);
        return st;
    }
    if (h->fortran && h->ndim > 1) {
        int perm[NB_MAX_DIMS];
        for (int i = 0; i < h->ndim; i++) perm[i] = h->ndim - 1 - i;
        nb_tensor *view = NULL, *c = NULL;
        st = nb_tensor_permute(&view, t, perm);
        if (!st) st = nb_tensor_clone(&c, view);
        nb_tensor_release(view);
        nb_tensor_release(t);
        if (st) return nb_error_context(st, "transposing the Fortran-order array");
        t = c;
    }
    *out = t;
    return NB_OK;
}

nb_status npy_read(npy_source *src, nb_tensor **out)
{
    unsigned char pre[12];
    if (src->size < 10)
        return nb_error(NB_ERR_FORMAT, "%llu bytes are too short for a .npy array (the magic and the header length)",
                        (unsigned long long)src->size);
    nb_status st = src->read(src->ctx, pre, 10);
    if (st) return st;
    if (memcmp(pre, "\x93NUMPY", 6)) return nb_error(NB_ERR_FORMAT, "it does not start with the .npy magic \\x93NUMPY");
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0)
        return nb_error(NB_ERR_FORMAT, "it has .npy format version %u.%u (nabla reads 1.0, 2.0 and 3.0)", pre[6],
                        pre[7]);
    uint64_t prefix = 10, hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
    if (pre[6] > 1) {
        if (src->size < 12) return nb_error(NB_ERR_FORMAT, "it ends inside the 4-byte header length");
        if ((st = src->read(src->ctx, pre + 10, 2))) return st;
        prefix = 12;
        hlen |= (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
    }
    if (hlen > src->size - prefix)
        return nb_error(NB_ERR_FORMAT, "the header length %llu is larger than the %llu bytes that follow it",
                        (unsigned long long)hlen, (unsigned long long)(src->size - prefix));
    if (hlen > NB_NPY_MAX_HEADER)
        return nb_error(NB_ERR_FORMAT, "the header length %llu is over the limit of %d bytes", (unsigned long long)hlen,
                        NB_NPY_MAX_HEADER);
    char *text = nb_malloc((size_t)hlen + 1);
    if (!text) return nb_error(NB_ERR_NOMEM, "out of memory");
    npy_header h;
    st = src->read(src->ctx, text, (size_t)hlen);
    if (!st) st = npy_header_parse(text, (size_t)hlen, &h);
    nb_free(text);
    if (!st) st = read_array(src, &h, src->size - prefix - hlen, out);
    return st;
}

/* ---- writing ---------------------------------------------------------------- */

uint64_t npy_size(const nb_tensor *t)
{
    unsigned char buf[NPY_PREFIX_MAX];
    size_t n;
    npy_header_format(t->dtype, t->ndim, t->shape, buf, &n);
    return n + (uint64_t)nb_tensor_numel(t) * nb_dtype_size(t->dtype);
}

nb_status npy_write(const npy_sink *sink, const nb_tensor *t)
{
    unsigned char buf[NPY_PREFIX_MAX];
    size_t n;
    npy_header_format(t->dtype, t->ndim, t->shape, buf, &n);
    nb_status st = sink->write(sink->ctx, buf, n);
    size_t es = nb_dtype_size(t->dtype), count = (size_t)nb_tensor_numel(t);
    const unsigned char *p = nb_tensor_data(t);
    if (st || !count) return st;
    if (nb_st_host_is_little_endian() || es == 1) return sink->write(sink->ctx, p, count * es);
    unsigned char chunk[4096];
    for (size_t done = 0; done < count && !st;) {
        size_t k = count - done < sizeof chunk / es ? count - done : sizeof chunk / es;
        memcpy(chunk, p + done * es, k * es);
        nb_st_swap_bytes(chunk, k, es);
        st = sink->write(sink->ctx, chunk, k * es);
        done += k;
    }
    return st;
}

/* ---- .npy files ------------------------------------------------------------- */

static nb_status atomic_write(void *ctx, const void *p, size_t n) { return nb_atomic_write(ctx, p, n); }

nb_status nb_npy_save(const char *path, nb_tensor *t)
{
    if (!path || !*path) return nb_error(NB_ERR_ARG, "npy save: empty file path");
    if (!t || !nb_dtype_valid(t->dtype))
        return nb_error(NB_ERR_ARG, "npy save '%s': the tensor is NULL or has no valid dtype", path);
    nb_tensor *c;
    nb_status st = nb_tensor_contiguous(&c, t);
    if (st) return nb_error_context(st, "npy save '%s'", path);
    nb_atomic_file *af;
    st = nb_atomic_open(&af, path);
    if (!st) {
        npy_sink sink = {atomic_write, af};
        st = npy_write(&sink, c);
        if (!st) st = nb_atomic_commit(af);
        else nb_atomic_abort(af);
    }
    nb_tensor_release(c);
    return st;
}

static nb_status file_read(void *ctx, void *buf, size_t n)
{
    if (fread(buf, 1, n, ctx) != n)
        return nb_error(NB_ERR_FORMAT, "the file ended early (did it change while being read?)");
    return NB_OK;
}

nb_status nb_npy_load(nb_tensor **out, const char *path)
{
    if (!out) return nb_error(NB_ERR_ARG, "npy load: out is NULL");
    *out = NULL;
    FILE *fp;
    uint64_t size;
    nb_status st = nb_input_file_open("npy", path, &fp, &size);
    if (st) return st;
    st = npy_read(&(npy_source){file_read, fp, size}, out);
    fclose(fp);
    return st ? nb_error_context(st, "npy '%s'", path) : NB_OK;
}
