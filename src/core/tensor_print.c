/* Printing tensors the way PyTorch does: nested brackets, aligned columns,
 * four decimals (or scientific notation when magnitudes call for it), long
 * dimensions summarised with "...". */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/tensor.h"

#define SUMMARY_THRESHOLD 1000
#define EDGE 3

typedef struct {
    FILE *f;
    const nb_tensor *t;
    bool summarise, sci, integral;
    int width;
} printer;

static void format_value(const printer *p, char *buf, size_t size, double v)
{
    nb_dtype dt = p->t->dtype;
    if (dt == NB_BOOL) snprintf(buf, size, "%s", v != 0 ? "True" : "False");
    else if (!nb_dtype_is_float(dt)) snprintf(buf, size, "%lld", (long long)v);
    else if (isnan(v)) snprintf(buf, size, "nan");
    else if (isinf(v)) snprintf(buf, size, v > 0 ? "inf" : "-inf");
    else if (p->sci) snprintf(buf, size, "%.4e", v);
    else if (p->integral) snprintf(buf, size, "%.0f.", v);
    else snprintf(buf, size, "%.4f", v);
}

static bool shown(const printer *p, int64_t i, int64_t n)
{
    return !p->summarise || n <= 2 * EDGE || i < EDGE || i >= n - EDGE;
}

/* Prints the sub-array at dimension d starting at storage offset off. */
static void print_dim(const printer *p, int d, int64_t off, int indent)
{
    const nb_tensor *t = p->t;
    char buf[64];
    if (d == t->ndim) {
        format_value(p, buf, sizeof buf, nb_tensor_get(&(nb_tensor){.dtype = t->dtype, .ndim = 0,
                                                                    .storage = t->storage, .offset = off}, 0));
        fprintf(p->f, "%*s", p->width, buf);
        return;
    }
    int64_t n = t->shape[d];
    fputc('[', p->f);
    for (int64_t i = 0; i < n; i++) {
        if (!shown(p, i, n)) {
            if (i == EDGE) {
                if (d == t->ndim - 1) fputs("...", p->f);
                else fprintf(p->f, "...");
                fputs(d == t->ndim - 1 ? ", " : ",\n", p->f);
                if (d != t->ndim - 1) fprintf(p->f, "%*s", indent + 1, "");
            }
            continue;
        }
        print_dim(p, d + 1, off + i * t->strides[d], indent + 1);
        if (i < n - 1) {
            if (d == t->ndim - 1) {
                fputs(", ", p->f);
            } else {
                fputc(',', p->f);
                for (int k = d; k < t->ndim - 1; k++) fputc('\n', p->f);
                fprintf(p->f, "%*s", indent + 1, "");
            }
        }
    }
    fputc(']', p->f);
}

nb_status nb_tensor_print(const nb_tensor *t, FILE *f)
{
    if (!t || !f) return nb_error(NB_ERR_ARG, "print: tensor or file is NULL");
    printer p = {.f = f, .t = t, .summarise = nb_tensor_numel(t) > SUMMARY_THRESHOLD, .integral = true};
    int64_t n = nb_tensor_numel(t);
    double maxabs = 0, minabs = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = nb_tensor_get(t, i);
        if (!isfinite(v)) continue;
        if (v != floor(v)) p.integral = false;
        double a = fabs(v);
        if (a > maxabs) maxabs = a;
        if (a > 0 && a < minabs) minabs = a;
    }
    if (nb_dtype_is_float(t->dtype) && (maxabs >= 1e8 || (minabs < 1e-4 && !p.integral) ||
                                        (maxabs / minabs > 1e3 && !p.integral && minabs < 1e-2)))
        p.sci = true, p.integral = false;
    char buf[64];
    for (int64_t i = 0; i < n; i++) {
        format_value(&p, buf, sizeof buf, nb_tensor_get(t, i));
        int w = (int)strlen(buf);
        if (w > p.width) p.width = w;
    }
    fputs("tensor(", f);
    if (t->ndim == 0) {
        format_value(&p, buf, sizeof buf, nb_tensor_get(t, 0));
        fputs(buf, f);
    } else if (n == 0) {
        char s[NB_SHAPE_STR_MAX];
        fprintf(f, "[], size=%s", nb_shape_str(s, sizeof s, t->ndim, t->shape));
    } else {
        print_dim(&p, 0, t->offset, (int)strlen("tensor("));
    }
    if (t->dtype != NB_F32 && t->dtype != NB_I64) fprintf(f, ", dtype=%s", nb_dtype_name(t->dtype));
    fputs(")\n", f);
    return NB_OK;
}

char *nb_tensor_to_string(const nb_tensor *t)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return NULL;
    nb_tensor_print(t, f);
    fclose(f);
    return buf;
}
