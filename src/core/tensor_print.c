/* Printing tensors the way PyTorch does (torch/_tensor_str.py with its
 * default options): one width for every element, four decimals, whole-number
 * floats as "1.", scientific notation when magnitudes call for it, lines
 * wrapped at 80 columns, and tensors of more than 1000 elements summarised to
 * the first and last 3 entries of each dimension around "...".
 *
 * One deliberate difference: the dtype suffix reads "dtype=float64" where
 * PyTorch writes "dtype=torch.float64". */
#include <math.h>
#include "nabla/device.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/tensor.h"
#include "tensor_internal.h"

#define PRECISION 4
#define THRESHOLD 1000
#define EDGE 3
#define LINEWIDTH 80
#define PREFIX "tensor("

/* ---- a growable string ---------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = nb_realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_repeat(strbuf *b, char c, int n)
{
    for (int i = 0; i < n; i++) sb_add(b, &c, 1);
}

/* ---- the formatter: one mode and one width for the whole tensor ----------- */

typedef struct {
    const nb_tensor *t;
    bool summarise;
    bool floating, int_mode, sci;
    int width;
    /* statistics of the nonzero finite values, gathered in a first pass */
    bool any;
    double min_abs, max_abs;
} printer;

/* Integers are read as integers so that int64 prints exactly. */
static int64_t load_int(const nb_tensor *t, int64_t off)
{
    const void *p = t->storage->data;
    switch (t->dtype) {
    case NB_I32: return ((const int32_t *)p)[off];
    case NB_I64: return ((const int64_t *)p)[off];
    case NB_U8: return ((const uint8_t *)p)[off];
    case NB_BOOL: return ((const uint8_t *)p)[off] != 0;
    default: return 0;
    }
}

/* The unpadded text of the element at storage offset `off`. */
static int format_raw(const printer *p, char *buf, size_t size, int64_t off)
{
    if (!p->floating) {
        int64_t v = load_int(p->t, off);
        if (p->t->dtype == NB_BOOL) return snprintf(buf, size, "%s", v ? "True" : "False");
        return snprintf(buf, size, "%lld", (long long)v);
    }
    double v = nb_load(p->t->dtype, p->t->storage->data, off);
    /* Python spells every NaN "nan"; C may write "-nan". */
    if (isnan(v)) return snprintf(buf, size, "nan");
    if (isinf(v)) return snprintf(buf, size, v > 0 ? "inf" : "-inf");
    if (p->sci) return snprintf(buf, size, "%.*e", PRECISION, v);
    if (p->int_mode) return snprintf(buf, size, "%.0f.", v);
    return snprintf(buf, size, "%.*f", PRECISION, v);
}

/* Calls fn on the storage offset of every element that will be shown. */
static void visit(printer *p, int d, int64_t off, void (*fn)(printer *, int64_t))
{
    const nb_tensor *t = p->t;
    if (d == t->ndim) {
        fn(p, off);
        return;
    }
    int64_t n = t->shape[d];
    bool cut = p->summarise && n > 2 * EDGE;
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == EDGE) i = n - EDGE;
        visit(p, d + 1, off + i * t->strides[d], fn);
    }
}

static void gather_stats(printer *p, int64_t off)
{
    if (!p->floating) {
        char buf[32];
        int w = format_raw(p, buf, sizeof buf, off);
        if (w > p->width) p->width = w;
        return;
    }
    double v = nb_load(p->t->dtype, p->t->storage->data, off);
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    if (!p->any || a < p->min_abs) p->min_abs = a;
    if (!p->any || a > p->max_abs) p->max_abs = a;
    p->any = true;
    if (v != ceil(v)) p->int_mode = false;
}

/* Only nonzero finite values set the width of a float tensor; zeros, NaNs
 * and infinities are padded to it (or overflow it) as in PyTorch. */
static void gather_width(printer *p, int64_t off)
{
    double v = nb_load(p->t->dtype, p->t->storage->data, off);
    if (!isfinite(v) || v == 0) return;
    char buf[64];
    int w = format_raw(p, buf, sizeof buf, off);
    if (w > p->width) p->width = w;
}

static void printer_init(printer *p, const nb_tensor *t)
{
    *p = (printer){.t = t, .floating = nb_dtype_is_float(t->dtype), .int_mode = true, .width = 1};
    p->summarise = nb_tensor_numel(t) > THRESHOLD;
    visit(p, 0, t->offset, gather_stats);
    if (!p->floating || !p->any) return;
    if (p->max_abs / p->min_abs > 1000.0 || p->max_abs > 1.0e8 || (!p->int_mode && p->min_abs < 1.0e-4)) p->sci = true;
    visit(p, 0, t->offset, gather_width);
}

static void put_elem(const printer *p, strbuf *b, int64_t off)
{
    char buf[64];
    int w = format_raw(p, buf, sizeof buf, off);
    sb_repeat(b, ' ', p->width - w);
    sb_str(b, buf);
}

/* ---- layout ------------------------------------------------------------------- */

static void put_vector(const printer *p, strbuf *b, int64_t off, int indent)
{
    const nb_tensor *t = p->t;
    int d = t->ndim - 1;
    int64_t n = t->shape[d], stride = t->strides[d];
    bool cut = p->summarise && n > 2 * EDGE;
    int64_t items = cut ? 2 * EDGE + 1 : n;
    int per_line = (LINEWIDTH - indent) / (p->width + 2);
    if (per_line < 1) per_line = 1;
    sb_str(b, "[");
    for (int64_t k = 0; k < items; k++) {
        if (k) {
            if (k % per_line == 0) {
                sb_str(b, ",\n");
                sb_repeat(b, ' ', indent + 1);
            } else {
                sb_str(b, ", ");
            }
        }
        if (cut && k == EDGE) {
            sb_str(b, " ...");
            continue;
        }
        int64_t i = cut && k > EDGE ? n - (items - k) : k;
        put_elem(p, b, off + i * stride);
    }
    sb_str(b, "]");
}

static void put_tensor(const printer *p, strbuf *b, int d, int64_t off, int indent)
{
    const nb_tensor *t = p->t;
    if (d == t->ndim - 1) {
        put_vector(p, b, off, indent);
        return;
    }
    int64_t n = t->shape[d];
    bool cut = p->summarise && n > 2 * EDGE;
    int rest = t->ndim - d; /* dimensions of this sub-tensor */
    sb_str(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i) {
            sb_str(b, ",");
            sb_repeat(b, '\n', rest - 1);
            sb_repeat(b, ' ', indent + 1);
        }
        if (cut && i == EDGE) {
            sb_str(b, "...");
            i = n - EDGE - 1;
            continue;
        }
        put_tensor(p, b, d + 1, off + i * t->strides[d], indent + 1);
    }
    sb_str(b, "]");
}

/* Appends ", suffix", or ",\n<indent>suffix" when it would pass the line
 * width (PyTorch's rule, including its count of the last line's length). */
static void add_suffix(strbuf *b, const char *suffix, size_t *last_line_len)
{
    size_t n = strlen(suffix);
    if (*last_line_len + n + 2 > LINEWIDTH) {
        sb_str(b, ",\n");
        sb_repeat(b, ' ', (int)strlen(PREFIX));
        *last_line_len = strlen(PREFIX) + n;
    } else {
        sb_str(b, ", ");
        *last_line_len += n + 2;
    }
    sb_str(b, suffix);
}

static char *tensor_text(const nb_tensor *t)
{
    strbuf b = {0};
    char suffixes[2][NB_SHAPE_STR_MAX + 16];
    int ns = 0;
    sb_str(&b, PREFIX);
    if (nb_tensor_numel(t) == 0) {
        /* Empty: PyTorch names the size unless it is (0,), and the dtype
         * unless it is the default float32. */
        sb_str(&b, "[]");
        if (t->ndim != 1) {
            size_t u = (size_t)snprintf(suffixes[ns], sizeof suffixes[ns], "size=(");
            for (int i = 0; i < t->ndim && u < sizeof suffixes[ns]; i++)
                u += (size_t)snprintf(suffixes[ns] + u, sizeof suffixes[ns] - u, i ? ", %lld" : "%lld",
                                      (long long)t->shape[i]);
            if (u < sizeof suffixes[ns]) snprintf(suffixes[ns] + u, sizeof suffixes[ns] - u, ")");
            ns++;
        }
        if (t->dtype != NB_F32) snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=%s", nb_dtype_name(t->dtype));
    } else {
        printer p;
        printer_init(&p, t);
        if (t->ndim == 0) put_elem(&p, &b, t->offset);
        else put_tensor(&p, &b, 0, t->offset, (int)strlen(PREFIX));
        if (t->dtype != NB_F32 && t->dtype != NB_I64 && t->dtype != NB_BOOL)
            snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=%s", nb_dtype_name(t->dtype));
    }
    if (!b.oom) {
        const char *nl = strrchr(b.s, '\n');
        size_t last_line_len = nl ? b.len - (size_t)(nl - b.s) + 1 : b.len + 2;
        for (int i = 0; i < ns; i++) add_suffix(&b, suffixes[i], &last_line_len);
    }
    sb_str(&b, ")\n");
    if (b.oom) {
        nb_free(b.s);
        return NULL;
    }
    return b.s;
}

char *nb_tensor_to_string(const nb_tensor *t)
{
    if (!t) {
        nb_error(NB_ERR_ARG, "print: tensor is NULL");
        return NULL;
    }
    if (!t->storage) {
        nb_error(NB_ERR_ARG, "print: the tensor is a batched (vmap) value, which holds no data of its own");
        return NULL;
    }
    char *s = tensor_text(t);
    if (!s) nb_error(NB_ERR_NOMEM, "print: out of memory");
    return s;
}

nb_status nb_tensor_print(const nb_tensor *t, FILE *f)
{
    if (!t || !f) return nb_error(NB_ERR_ARG, "print: tensor or file is NULL");
    if (!t->storage)
        return nb_error(NB_ERR_ARG, "print: the tensor is a batched (vmap) value, which holds no data of its own");
    char *s = tensor_text(t);
    if (!s) return nb_error(NB_ERR_NOMEM, "print: out of memory");
    int rc = fputs(s, f);
    nb_free(s);
    return rc == EOF ? nb_error(NB_ERR_IO, "print: writing failed") : NB_OK;
}
