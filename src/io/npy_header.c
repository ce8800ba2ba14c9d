/* The header of a .npy file: a Python dict literal, parsed by hand (NumPy
 * evaluates it with ast.literal_eval; we accept the subset that can
 * describe an array nabla reads, and nothing else), and formatted as
 * numpy.save formats it. */
#include <stdio.h>
#include <string.h>
#include "npy_internal.h"

static const struct {
    const char *descr;
    size_t size;
    nb_dtype dtype;
} kinds[] = {
    [NPY_F4] = {"<f4", 4, NB_F32}, [NPY_F8] = {"<f8", 8, NB_F64}, [NPY_I4] = {"<i4", 4, NB_I32},
    [NPY_I8] = {"<i8", 8, NB_I64}, [NPY_U1] = {"|u1", 1, NB_U8},  [NPY_B1] = {"|b1", 1, NB_BOOL},
    [NPY_F2] = {"<f2", 2, NB_F32}, [NPY_I1] = {"|i1", 1, NB_I32}, [NPY_I2] = {"<i2", 2, NB_I32},
    [NPY_U2] = {"<u2", 2, NB_I32}, [NPY_U4] = {"<u4", 4, NB_I64},
};
#define N_KINDS ((int)(sizeof kinds / sizeof *kinds))

size_t npy_kind_size(npy_kind k) { return kinds[k].size; }
nb_dtype npy_kind_dtype(npy_kind k) { return kinds[k].dtype; }

/* ---- parsing ------------------------------------------------------------- */

typedef struct lexer {
    const char *start, *p, *end;
    char str[64]; /* the last string literal (longer ones are never a key or a descr we know) */
    bool str_cut;
} lexer;

static nb_status bad(const char *what) { return nb_error(NB_ERR_FORMAT, "the header %s", what); }

static void skip_space(lexer *lx)
{
    while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r')) lx->p++;
}

/* Takes the character c (after optional spaces), or fails saying what was expected. */
static nb_status expect(lexer *lx, char c, const char *what)
{
    skip_space(lx);
    if (lx->p < lx->end && *lx->p == c) {
        lx->p++;
        return NB_OK;
    }
    if (lx->p == lx->end) return nb_error(NB_ERR_FORMAT, "the header ends where %s was expected", what);
    return nb_error(NB_ERR_FORMAT, "the header has '%c' at byte %zu where %s was expected",
                    (*lx->p >= 0x20 && *lx->p < 0x7f) ? *lx->p : '?', (size_t)(lx->p - lx->start), what);
}

static bool peek(lexer *lx, char c)
{
    skip_space(lx);
    return lx->p < lx->end && *lx->p == c;
}

/* A string literal in single or double quotes, printable ASCII without
 * backslashes (no key or dtype of an array needs more). */
static nb_status string_lit(lexer *lx, const char *what)
{
    skip_space(lx);
    if (lx->p == lx->end || (*lx->p != '\'' && *lx->p != '"'))
        return nb_error(NB_ERR_FORMAT, "the header has no string where %s was expected", what);
    char q = *lx->p++;
    size_t n = 0;
    lx->str_cut = false;
    for (;;) {
        if (lx->p == lx->end) return bad("ends inside a string");
        char c = *lx->p++;
        if (c == q) break;
        if (c == '\\') return bad("has a backslash escape in a string (not supported)");
        if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
            return bad("has a byte that is not printable ASCII in a string");
        if (n + 1 < sizeof lx->str) lx->str[n++] = c;
        else lx->str_cut = true;
    }
    lx->str[n] = '\0';
    return NB_OK;
}

static nb_status parse_descr(lexer *lx, npy_header *h)
{
    if (peek(lx, '['))
        return nb_error(NB_ERR_UNSUPPORTED,
                        "the array has a structured dtype (a list descr), which nabla does not have");
    nb_status st = string_lit(lx, "the descr");
    if (st) return st;
    for (int k = 0; k < N_KINDS; k++)
        if (!lx->str_cut && !strcmp(lx->str, kinds[k].descr)) {
            h->kind = (npy_kind)k;
            return NB_OK;
        }
    return nb_error(NB_ERR_UNSUPPORTED,
                    "the array has dtype '%s%s'%s, which nabla does not read (it reads <f4 <f8 "
                    "<i4 <i8 |u1 |b1 <f2 |i1 <i2 <u2 <u4)",
                    lx->str, lx->str_cut ? "..." : "", lx->str[0] == '>' ? " (big-endian)" : "");
}

static nb_status parse_bool(lexer *lx, bool *out)
{
    skip_space(lx);
    size_t left = (size_t)(lx->end - lx->p);
    if (left >= 4 && !memcmp(lx->p, "True", 4)) {
        *out = true;
        lx->p += 4;
    } else if (left >= 5 && !memcmp(lx->p, "False", 5)) {
        *out = false;
        lx->p += 5;
    } else {
        return bad("has a fortran_order that is not True or False");
    }
    /* "Trueish" is a name, not True. */
    if (lx->p < lx->end &&
        ((*lx->p >= 'a' && *lx->p <= 'z') || (*lx->p >= 'A' && *lx->p <= 'Z') || (*lx->p >= '0' && *lx->p <= '9') ||
         *lx->p == '_'))
        return bad("has a fortran_order that is not True or False");
    return NB_OK;
}

/* A non-negative decimal integer as Python 3 writes one (no sign, no
 * leading zeros, no underscores, no L). */
static nb_status parse_dim(lexer *lx, int64_t *out)
{
    skip_space(lx);
    if (lx->p < lx->end && *lx->p == '-') return bad("has a negative dimension in its shape");
    if (lx->p == lx->end || *lx->p < '0' || *lx->p > '9') return bad("has a shape dimension that is not an integer");
    const char *start = lx->p;
    uint64_t v = 0;
    while (lx->p < lx->end && *lx->p >= '0' && *lx->p <= '9') {
        unsigned d = (unsigned)(*lx->p++ - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) return bad("has a shape dimension too large for 64 bits");
        v = v * 10 + d;
    }
    if (lx->p - start > 1 && *start == '0') return bad("has a shape dimension with a leading zero");
    if (lx->p < lx->end &&
        (*lx->p == '.' || *lx->p == 'e' || *lx->p == 'E' || *lx->p == 'L' || *lx->p == '_' || *lx->p == 'x' ||
         *lx->p == 'j'))
        return bad("has a shape dimension that is not a plain integer");
    *out = (int64_t)v;
    return NB_OK;
}

/* () or (n,) or (a, b[, ...][,]) */
static nb_status parse_shape(lexer *lx, npy_header *h)
{
    nb_status st = expect(lx, '(', "the shape tuple's '('");
    if (st) return st;
    h->ndim = 0;
    if (peek(lx, ')')) {
        lx->p++;
        return NB_OK;
    }
    for (;;) {
        int64_t d = 0;
        if ((st = parse_dim(lx, &d))) return st;
        if (h->ndim == NB_MAX_DIMS)
            return nb_error(NB_ERR_UNSUPPORTED, "the array has more than %d dimensions, nabla's limit", NB_MAX_DIMS);
        h->shape[h->ndim++] = d;
        if (peek(lx, ')')) {
            if (h->ndim == 1) return bad("has a shape '(n)', which is a number, not a tuple");
            lx->p++;
            return NB_OK;
        }
        if ((st = expect(lx, ',', "',' or ')' in the shape"))) return st;
        if (peek(lx, ')')) {
            lx->p++;
            return NB_OK;
        }
    }
}

nb_status npy_header_parse(const char *text, size_t n, npy_header *h)
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    lexer lx = {.start = text, .p = text, .end = text + n};
    bool seen[3] = {false, false, false};
    *h = (npy_header){0};
    nb_status st = expect(&lx, '{', "the dict's '{'");
    while (!st && !peek(&lx, '}')) {
        if ((st = string_lit(&lx, "a key"))) break;
        int k = 0;
        while (k < 3 && (lx.str_cut || strcmp(lx.str, keys[k]))) k++;
        if (k == 3) {
            st = nb_error(NB_ERR_FORMAT, "the header has an unknown key '%s%s'", lx.str, lx.str_cut ? "..." : "");
            break;
        }
        if (seen[k]) {
            st = nb_error(NB_ERR_FORMAT, "the header has the key '%s' twice", keys[k]);
            break;
        }
        seen[k] = true;
        if ((st = expect(&lx, ':', "':' after a key"))) break;
        st = k == 0 ? parse_descr(&lx, h) : k == 1 ? parse_bool(&lx, &h->fortran) : parse_shape(&lx, h);
        if (st) break;
        if (peek(&lx, '}')) break;
        st = expect(&lx, ',', "',' or '}' after a value");
    }
    if (st) return st;
    lx.p++; /* the '}' */
    skip_space(&lx);
    if (lx.p != lx.end) return bad("has text after the dict");
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return nb_error(NB_ERR_FORMAT, "the header has no '%s' key", keys[k]);
    return NB_OK;
}

/* ---- formatting, as numpy.save (numpy/lib/format.py) ----------------------- */

void npy_header_format(nb_dtype dtype, int ndim, const int64_t *shape, unsigned char *buf, size_t *len)
{
    const char *descr = "<f4";
    for (int k = 0; k < N_KINDS; k++)
        if (kinds[k].dtype == dtype) {
            descr = kinds[k].descr; /* the first of each dtype is its own kind */
            break;
        }
    char dict[NPY_PREFIX_MAX], *p = dict;
    p += sprintf(p, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++) p += sprintf(p, i ? ", %lld" : "%lld", (long long)shape[i]);
    p += sprintf(p, ndim == 1 ? ",), }" : "), }");
    /* Room for the first dimension to grow to 21 digits in place, as numpy
     * leaves it (GROWTH_AXIS_MAX_DIGITS). */
    if (ndim > 0) {
        int digits = snprintf(NULL, 0, "%lld", (long long)shape[0]);
        for (int i = digits; i < 21; i++) *p++ = ' ';
    }
    size_t n = (size_t)(p - dict);
    /* Spaces and a '\n' to make magic + version + length + header a
     * multiple of 64 (1 to 64 of them, as numpy pads). */
    size_t prefix = 10, pad = 64 - (prefix + n + 1) % 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t hlen = n + pad + 1;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + prefix, dict, n);
    memset(buf + prefix + n, ' ', pad);
    buf[prefix + n + pad] = '\n';
    *len = prefix + hlen;
}
