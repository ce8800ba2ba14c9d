/* Dropout, embedding lookup and its gradient, top-k accuracy, and the label
 * checks the loss kernels share. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../kernels.h"
#include "nn.h"
#include "simd.h"
#include "team.h"

/* ---- shared helpers ------------------------------------------------------------ */

char *nb_nn_index_str(char *buf, size_t size, int ndim, const int64_t *shape, int64_t i)
{
    int64_t idx[NB_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
    size_t u = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && u < size; d++)
        u += (size_t)snprintf(buf + u, size - u, d ? ", %" PRId64 : "%" PRId64, idx[d]);
    if (u < size) snprintf(buf + u, size - u, "]");
    return buf;
}

nb_status nb_nn_check_labels(const char *op, const nb_tensor *label, int64_t C, const int64_t *ignore_index)
{
    const void *p = nb_tensor_data(label);
    int64_t n = nb_tensor_numel(label);
    for (int64_t i = 0; i < n; i++) {
        int64_t l = nb_nn_index_at(p, label->dtype, i);
        if ((l >= 0 && l < C) || (ignore_index && l == *ignore_index)) continue;
        char pos[NB_SHAPE_STR_MAX], ign[64] = "";
        if (ignore_index) snprintf(ign, sizeof ign, " or equal ignore_index (%" PRId64 ")", *ignore_index);
        return nb_error(NB_ERR_ARG,
                        "%s: Label value %" PRId64 " at position %s is out of range: labels must be in "
                        "[0, %" PRId64 ")%s",
                        op, l, nb_nn_index_str(pos, sizeof pos, label->ndim, label->shape, i), C, ign);
    }
    return NB_OK;
}

/* ---- dropout ------------------------------------------------------------------- */

/* Element i takes the i-th draw of the stream. The generator is counter
 * based, so that draw is computed directly from a copy of the generator
 * with its counter advanced by i: the threads need no shared state and the
 * result is the same as drawing one by one, whatever the thread count. */
#define DEFINE_DROPOUT(T, SUF)                                                             \
    typedef struct dropout_job_##SUF {                                                     \
        const T *x;                                                                        \
        T *out;                                                                            \
        uint8_t *mask;                                                                     \
        double p;                                                                          \
        T scale;                                                                           \
        const nb_rng *rng;                                                                 \
    } dropout_job_##SUF;                                                                   \
    static void dropout_range_##SUF(void *arg, int64_t lo, int64_t hi)                     \
    {                                                                                      \
        const dropout_job_##SUF *j = arg;                                                  \
        const T *x = j->x;                                                                 \
        const T scale = j->scale;                                                          \
        const double p = j->p;                                                             \
        const nb_rng rng = *j->rng;                                                        \
        T *out = j->out;                                                                   \
        uint8_t *mask = j->mask;                                                           \
        for (int64_t i = lo; i < hi; i++) {                                                \
            nb_rng r = rng;                                                                \
            r.counter += (uint64_t)i;                                                      \
            uint8_t keep = nb_rng_uniform(&r) >= p;                                        \
            mask[i] = keep;                                                                \
            out[i] = x[i] * (T)keep * scale;                                               \
        }                                                                                  \
    }                                                                                      \
    static void dropout_##SUF(const T *x, T *out, uint8_t *mask, int64_t n, double p,      \
                              T scale, const nb_rng *rng)                                  \
    {                                                                                      \
        dropout_job_##SUF j = {x, out, mask, p, scale, rng};                               \
        nb_team_for(n, n >= NB_NN_PAR_MIN, dropout_range_##SUF, &j);                       \
    }                                                                                      \
    NB_SIMD_CLONES static void scale_range_##SUF(void *arg, int64_t lo, int64_t hi)        \
    {                                                                                      \
        const dropout_job_##SUF *j = arg;                                                  \
        const T *x = j->x;                                                                 \
        const T scale = j->scale;                                                          \
        T *out = j->out;                                                                   \
        uint8_t *mask = j->mask;                                                           \
        for (int64_t i = lo; i < hi; i++) {                                                \
            out[i] = x[i] * scale;                                                         \
            mask[i] = 1;                                                                   \
        }                                                                                  \
    }                                                                                      \
    static void scale_##SUF(const T *x, T *out, uint8_t *mask, int64_t n, T scale)         \
    {                                                                                      \
        dropout_job_##SUF j = {x, out, mask, 0, scale, NULL};                              \
        nb_team_for(n, n >= NB_NN_PAR_MIN, scale_range_##SUF, &j);                         \
    }

DEFINE_DROPOUT(float, f32)
DEFINE_DROPOUT(double, f64)

static nb_status run_dropout(const nb_kernel_ctx *k)
{
    const nb_dropout_params *prm = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *out = nb_kout(k, 0, 0), *mask = nb_kout(k, 1, 0);
    double p = prm->prob;
    bool test = prm->is_test, upscale = prm->upscale;
    int64_t n = nb_tensor_numel(x);
    if (x->dtype != NB_F32 && x->dtype != NB_F64)
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(x->dtype));
    /* Upscaling in training and downgrading in inference keep the expected
     * value of Out equal to X's, in whichever phase carries the factor. */
    double scale = test ? (upscale ? 1.0 : 1.0 - p) : (upscale ? 1.0 / (1.0 - p) : 1.0);
    void *xd = nb_tensor_data(x), *od = nb_tensor_data(out);
    uint8_t *md = nb_tensor_data(mask);
    if (!test && !k->rng) return nb_error(NB_ERR_STATE, "%s: no random generator was given", k->label);
    if (test) {
        if (x->dtype == NB_F32) scale_f32(xd, od, md, n, (float)scale);
        else scale_f64(xd, od, md, n, scale);
        return NB_OK;
    }
    if (x->dtype == NB_F32) dropout_f32(xd, od, md, n, p, (float)scale, k->rng);
    else dropout_f64(xd, od, md, n, p, scale, k->rng);
    k->rng->counter += (uint64_t)n;
    return NB_OK;
}

/* ---- embedding ------------------------------------------------------------------- */

static nb_status check_ids(const char *op, const nb_tensor *ids, int64_t V)
{
    const void *p = nb_tensor_data(ids);
    int64_t n = nb_tensor_numel(ids);
    for (int64_t i = 0; i < n; i++) {
        int64_t id = nb_nn_index_at(p, ids->dtype, i);
        if (id >= 0 && id < V) continue;
        char pos[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_ARG,
                        "%s: Ids value %" PRId64 " at position %s is out of range: W has V = %" PRId64 " rows", op, id,
                        nb_nn_index_str(pos, sizeof pos, ids->ndim, ids->shape, i), V);
    }
    return NB_OK;
}

typedef struct embedding_job {
    const char *wd;
    char *od;
    const void *idp;
    nb_dtype idt;
    int64_t pad;
    size_t row;
} embedding_job;

static void embedding_range(void *arg, int64_t lo, int64_t hi)
{
    const embedding_job *j = arg;
    const char *wd = j->wd;
    char *od = j->od;
    const void *idp = j->idp;
    const nb_dtype idt = j->idt;
    const int64_t pad = j->pad;
    const size_t row = j->row;
    for (int64_t i = lo; i < hi; i++) {
        int64_t id = nb_nn_index_at(idp, idt, i);
        if (id == pad) memset(od + (size_t)i * row, 0, row);
        else memcpy(od + (size_t)i * row, wd + (size_t)id * row, row);
    }
}

/* Rows are copied as bytes, so any dtype of W works. */
static nb_status run_embedding(const nb_kernel_ctx *k)
{
    const nb_embedding_params *p = k->params;
    nb_tensor *w = nb_kin(k, 0, 0), *ids = nb_kin(k, 1, 0), *out = nb_kout(k, 0, 0);
    int64_t V = w->shape[0], n = nb_tensor_numel(ids), pad = p->padding_idx;
    size_t row = (size_t)w->shape[1] * nb_dtype_size(w->dtype);
    nb_status st;
    if ((st = check_ids(k->label, ids, V))) return st;
    embedding_job j = {nb_tensor_data(w), nb_tensor_data(out), nb_tensor_data(ids), ids->dtype, pad, row};
    nb_team_for(n, (int64_t)row * n >= 8 * NB_NN_PAR_MIN, embedding_range, &j);
    return NB_OK;
}

/* Repeated ids add into the same row, so threads split the columns rather
 * than the ids: each owns a band of columns of every row, and every element
 * receives its terms in the order of the ids, whatever the thread count. */
#define BAND 64
#define DEFINE_EMBEDDING_GRAD(T, SUF)                                                          \
    typedef struct embedding_grad_job_##SUF {                                                  \
        const void *idp;                                                                       \
        nb_dtype idt;                                                                          \
        int64_t n;                                                                             \
        const T *dout;                                                                         \
        T *dw;                                                                                 \
        int64_t D, pad;                                                                        \
    } embedding_grad_job_##SUF;                                                                \
    NB_SIMD_CLONES static void embedding_grad_bands_##SUF(void *arg, int64_t lo, int64_t hi)  \
    {                                                                                          \
        const embedding_grad_job_##SUF *jb = arg;                                              \
        const void *idp = jb->idp;                                                             \
        const nb_dtype idt = jb->idt;                                                          \
        const T *dout = jb->dout;                                                              \
        T *dw = jb->dw;                                                                        \
        const int64_t n = jb->n, D = jb->D, pad = jb->pad;                                     \
        for (int64_t b = lo; b < hi; b++) {                                                    \
            const int64_t j0 = b * BAND, j1 = j0 + BAND < D ? j0 + BAND : D;                   \
            for (int64_t i = 0; i < n; i++) {                                                  \
                int64_t id = nb_nn_index_at(idp, idt, i);                                      \
                if (id == pad) continue;                                                       \
                T *dst = dw + id * D;                                                          \
                const T *src = dout + i * D;                                                   \
                for (int64_t j = j0; j < j1; j++) dst[j] += src[j];                            \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    static void embedding_grad_##SUF(const void *idp, nb_dtype idt, int64_t n, const T *dout, \
                                     T *dw, int64_t D, int64_t pad)                            \
    {                                                                                          \
        const int64_t nband = (D + BAND - 1) / BAND;                                           \
        embedding_grad_job_##SUF jb = {idp, idt, n, dout, dw, D, pad};                         \
        nb_team_for(nband, n * D >= NB_NN_PAR_MIN, embedding_grad_bands_##SUF, &jb);           \
    }

DEFINE_EMBEDDING_GRAD(float, f32)
DEFINE_EMBEDDING_GRAD(double, f64)

static nb_status run_embedding_grad(const nb_kernel_ctx *k)
{
    const nb_embedding_params *p = k->params;
    nb_tensor *ids = nb_kin(k, 0, 0), *dout = nb_kin(k, 1, 0), *w = nb_kin(k, 2, 0), *dw = nb_kout(k, 0, 0);
    int64_t V = w->shape[0], D = w->shape[1], n = nb_tensor_numel(ids), pad = p->padding_idx;
    nb_status st;
    if (dw->dtype != NB_F32 && dw->dtype != NB_F64)
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(dw->dtype));
    if ((st = check_ids(k->label, ids, V))) return st;
    /* DW may be a caller's buffer, not a fresh zeroed one. */
    memset(nb_tensor_data(dw), 0, (size_t)nb_tensor_numel(dw) * nb_dtype_size(dw->dtype));
    if (dw->dtype == NB_F32)
        embedding_grad_f32(nb_tensor_data(ids), ids->dtype, n, nb_tensor_data(dout), nb_tensor_data(dw), D, pad);
    else embedding_grad_f64(nb_tensor_data(ids), ids->dtype, n, nb_tensor_data(dout), nb_tensor_data(dw), D, pad);
    return NB_OK;
}

/* ---- accuracy ------------------------------------------------------------------------ */

/* A row is correct when fewer than k classes beat its label. A class beats
 * it with a higher score, or an equal one and a lower index, which is the
 * order a stable top-k picks and makes ties deterministic. */
#define DEFINE_ACCURACY(T, SUF)                                                               \
    typedef struct accuracy_job_##SUF {                                                       \
        const T *x;                                                                           \
        const void *lab;                                                                      \
        nb_dtype ldt;                                                                         \
        int64_t N, C, k;                                                                      \
        int64_t *correct; /* one count per share */                                           \
    } accuracy_job_##SUF;                                                                     \
    static void accuracy_share_##SUF(void *arg, int t, int nt)                                \
    {                                                                                         \
        const accuracy_job_##SUF *j = arg;                                                    \
        const int64_t N = j->N, C = j->C, k = j->k;                                           \
        const int64_t lo = N * t / nt, hi = N * (t + 1) / nt;                                 \
        int64_t correct = 0;                                                                  \
        for (int64_t r = lo; r < hi; r++) {                                                   \
            const T *xr = j->x + r * C;                                                       \
            int64_t l = nb_nn_index_at(j->lab, j->ldt, r), above = 0;                         \
            T s = xr[l];                                                                      \
            for (int64_t c = 0; c < C && above < k; c++)                                      \
                above += xr[c] > s || (xr[c] == s && c < l);                                  \
            correct += above < k;                                                             \
        }                                                                                     \
        j->correct[t] = correct;                                                              \
    }                                                                                         \
    static int64_t correct_##SUF(const T *x, const void *lab, nb_dtype ldt, int64_t N,        \
                                 int64_t C, int64_t k)                                        \
    {                                                                                         \
        int nt = N * C >= NB_NN_PAR_MIN ? nb_team_size() : 1;                                 \
        if (nt > N) nt = N > 1 ? (int)N : 1;                                                  \
        /* Zeroed: shares the team does not run (busy, or fewer threads) count 0. */          \
        int64_t one = 0, *part = nt > 1 ? calloc((size_t)nt, sizeof *part) : &one;            \
        if (!part) part = &one, nt = 1;                                                       \
        accuracy_job_##SUF j = {x, lab, ldt, N, C, k, part};                                  \
        nb_team_run(nt, accuracy_share_##SUF, &j);                                            \
        int64_t correct = 0;                                                                  \
        for (int t = 0; t < nt; t++) correct += part[t];                                      \
        if (part != &one) free(part);                                                         \
        return correct;                                                                       \
    }

DEFINE_ACCURACY(float, f32)
DEFINE_ACCURACY(double, f64)

static nb_status run_accuracy(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *lab = nb_kin(k, 1, 0);
    int64_t N = x->shape[0], C = x->shape[1], topk = ((const nb_accuracy_params *)k->params)->k, correct;
    nb_status st;
    if ((st = nb_nn_check_labels(k->label, lab, C, NULL))) return st;
    switch (x->dtype) {
    case NB_F32: correct = correct_f32(nb_tensor_data(x), nb_tensor_data(lab), lab->dtype, N, C, topk); break;
    case NB_F64: correct = correct_f64(nb_tensor_data(x), nb_tensor_data(lab), lab->dtype, N, C, topk); break;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(x->dtype));
    }
    *(float *)nb_tensor_data(nb_kout(k, 0, 0)) = N ? (float)((double)correct / (double)N) : 0.0f;
    *(int64_t *)nb_tensor_data(nb_kout(k, 1, 0)) = correct;
    *(int64_t *)nb_tensor_data(nb_kout(k, 2, 0)) = N;
    return NB_OK;
}

/* ---- the table ------------------------------------------------------------------------ */

/* Each takes the dtypes its op's inference accepts for the first input:
 * float values, except embedding, which copies rows of a W of any dtype as
 * bytes, and embedding_grad, whose first input is Ids. */
#define NN_KERNEL(NAME, DTYPES, RUN)     \
    static const nb_kernel_def k_##NAME = { \
        .op = #NAME, .device = NB_DEVICE_CPU, .dtypes = (DTYPES), .provider = "nabla", .run = (RUN)}

NN_KERNEL(softmax, NB_DT_FLOAT, nb_cpu_softmax);
NN_KERNEL(log_softmax, NB_DT_FLOAT, nb_cpu_log_softmax);
NN_KERNEL(softmax_with_cross_entropy, NB_DT_FLOAT, nb_cpu_softmax_with_cross_entropy);
NN_KERNEL(softmax_with_cross_entropy_grad, NB_DT_FLOAT, nb_cpu_softmax_with_cross_entropy_grad);
NN_KERNEL(cross_entropy, NB_DT_FLOAT, nb_cpu_cross_entropy);
NN_KERNEL(mse_loss, NB_DT_FLOAT, nb_cpu_mse_loss);
NN_KERNEL(bce_with_logits, NB_DT_FLOAT, nb_cpu_bce_with_logits);
NN_KERNEL(dropout, NB_DT_FLOAT, run_dropout);
NN_KERNEL(embedding, NB_DT_ALL, run_embedding);
NN_KERNEL(embedding_grad, NB_DT_INT, run_embedding_grad);
NN_KERNEL(accuracy, NB_DT_FLOAT, run_accuracy);

const nb_kernel_def *const nb_cpu_kernels_nn[] = {
    &k_softmax,
    &k_log_softmax,
    &k_softmax_with_cross_entropy,
    &k_softmax_with_cross_entropy_grad,
    &k_cross_entropy,
    &k_mse_loss,
    &k_bce_with_logits,
    &k_dropout,
    &k_embedding,
    &k_embedding_grad,
    &k_accuracy,
    NULL,
};
