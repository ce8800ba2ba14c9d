/* Broadcasting iteration: planning (stride 0 on broadcast dims, dropping and
 * merging dims) and the possibly parallel walk over the output. */
#include <string.h>
#include "broadcast.h"
#include "core/tensor_internal.h"
#include "team.h"

/* The flat case as a plan. An eager op on small tensors spent a twentieth
 * of its time in the general planning. */
static bool plan_flat(nb_bcast_plan *p, int n_in, const nb_tensor *const *in, const nb_tensor *out)
{
    char *ptr[NB_BCAST_MAX_OPERANDS];
    int64_t step[NB_BCAST_MAX_OPERANDS];
    if (!nb_bcast_flat_operands(n_in, in, out, ptr, step)) return false;
    for (int k = 0; k <= n_in; k++) {
        const nb_tensor *t = k < n_in ? in[k] : out;
        p->elsize[k] = (int64_t)nb_dtype_bytes(t->dtype);
        p->base[k] = ptr[k];
        p->strides[k][0] = step[k];
    }
    p->nops = n_in + 1;
    p->numel = nb_shape_numel_inline(out->ndim, out->shape);
    p->ndim = 1;
    p->shape[0] = p->numel;
    return true;
}

nb_status nb_bcast_plan_init(nb_bcast_plan *p, const char *label, int n_in, const nb_tensor *const *in,
                             const nb_tensor *out)
{
    if (n_in < 1 || n_in >= NB_BCAST_MAX_OPERANDS)
        return nb_error(NB_ERR_ARG, "%s: broadcasting takes 1 to %d inputs, not %d", label, NB_BCAST_MAX_OPERANDS - 1,
                        n_in);
    if (plan_flat(p, n_in, in, out)) return NB_OK;
    memset(p, 0, sizeof *p);
    int nd = out->ndim, nops = n_in + 1;
    int64_t full[NB_BCAST_MAX_OPERANDS][NB_MAX_DIMS];
    for (int k = 0; k < n_in; k++) {
        const nb_tensor *t = in[k];
        int lead = nd - t->ndim;
        bool ok = lead >= 0;
        for (int d = 0; ok && d < nd; d++) {
            int j = d - lead;
            if (j < 0 || (t->shape[j] == 1 && out->shape[d] != 1)) full[k][d] = 0;
            else if (t->shape[j] == out->shape[d]) full[k][d] = t->strides[j];
            else ok = false;
        }
        if (!ok) {
            char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
            return nb_error(NB_ERR_SHAPE, "%s: input %d of shape %s does not broadcast to the output shape %s", label,
                            k, nb_shape_str(a, sizeof a, t->ndim, t->shape), nb_shape_str(b, sizeof b, nd, out->shape));
        }
        p->elsize[k] = (int64_t)nb_dtype_size(t->dtype);
        p->base[k] = nb_tensor_data(t);
    }
    for (int d = 0; d < nd; d++) full[n_in][d] = out->strides[d];
    p->elsize[n_in] = (int64_t)nb_dtype_size(out->dtype);
    p->base[n_in] = nb_tensor_data(out);
    p->nops = nops;
    p->numel = nb_shape_numel(nd, out->shape);

    /* Size-1 dims contribute nothing; a dim merges into the one outside it
     * when every operand steps over the inner one exactly as far as one step
     * of the outer one (true of contiguous runs and of broadcast runs alike). */
    int m = 0;
    for (int d = 0; d < nd; d++) {
        int64_t n = out->shape[d];
        if (n == 1) continue;
        bool merge = m > 0;
        for (int k = 0; merge && k < nops; k++) merge = p->strides[k][m - 1] == full[k][d] * n;
        if (merge) {
            p->shape[m - 1] *= n;
            for (int k = 0; k < nops; k++) p->strides[k][m - 1] = full[k][d];
        } else {
            p->shape[m] = n;
            for (int k = 0; k < nops; k++) p->strides[k][m] = full[k][d];
            m++;
        }
    }
    if (m == 0) {
        p->shape[0] = 1;
        for (int k = 0; k < nops; k++) p->strides[k][0] = 0;
        m = 1;
    }
    p->ndim = m;
    return NB_OK;
}

/* Walks output elements [start, end) in row-major order, one call of `loop`
 * per stretch of the innermost dimension. */
static void run_range(const nb_bcast_plan *p, int64_t start, int64_t end, nb_bcast_loop loop, const void *aux)
{
    int last = p->ndim - 1, nops = p->nops;
    int64_t idx[NB_MAX_DIMS], rem = start;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % p->shape[d];
        rem /= p->shape[d];
    }
    char *row[NB_BCAST_MAX_OPERANDS], *ptr[NB_BCAST_MAX_OPERANDS];
    int64_t step[NB_BCAST_MAX_OPERANDS];
    for (int k = 0; k < nops; k++) {
        int64_t off = 0;
        for (int d = 0; d < last; d++) off += idx[d] * p->strides[k][d];
        row[k] = p->base[k] + off * p->elsize[k];
        step[k] = p->strides[k][last];
    }
    int64_t inner = p->shape[last];
    for (int64_t pos = start; pos < end;) {
        int64_t n = inner - idx[last];
        if (n > end - pos) n = end - pos;
        for (int k = 0; k < nops; k++) ptr[k] = row[k] + idx[last] * step[k] * p->elsize[k];
        loop(n, ptr, step, aux);
        pos += n;
        if (pos >= end) break;
        idx[last] = 0;
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < p->shape[d]) {
                for (int k = 0; k < nops; k++) row[k] += p->strides[k][d] * p->elsize[k];
                break;
            }
            for (int k = 0; k < nops; k++) row[k] -= (p->shape[d] - 1) * p->strides[k][d] * p->elsize[k];
            idx[d] = 0;
        }
    }
}

typedef struct bcast_job {
    const nb_bcast_plan *plan;
    nb_bcast_loop loop;
    const void *aux;
    int64_t total;
} bcast_job;

static void bcast_share(void *arg, int t, int nt)
{
    const bcast_job *j = arg;
    const int64_t total = j->total;
    /* Boundaries on multiples of 16 elements keep threads off each other's
     * cache lines in the output. */
    int64_t a = t == 0 ? 0 : (total / nt * t) & ~(int64_t)15;
    int64_t b = t == nt - 1 ? total : (total / nt * (t + 1)) & ~(int64_t)15;
    if (a < b) run_range(j->plan, a, b, j->loop, j->aux);
}

void nb_bcast_run(const nb_bcast_plan *p, nb_bcast_loop loop, const void *aux, int64_t grain)
{
    int64_t total = p->numel;
    if (total <= 0) return;
    if (grain < 1) grain = 1;
    int64_t want = total / grain;
    int max_threads = want >= 2 ? nb_team_size() : 1; /* small work asks the team nothing */
    if (max_threads > 1 && !nb_team_busy()) {
        int nt = want < max_threads ? (int)want : max_threads;
        bcast_job j = {p, loop, aux, total};
        nb_team_run(nt, bcast_share, &j);
        return;
    }
    if (p->ndim == 1) { /* one run: no walk (a flat plan, an eager op's usual) */
        char *ptr[NB_BCAST_MAX_OPERANDS];
        int64_t step[NB_BCAST_MAX_OPERANDS];
        for (int k = 0; k < p->nops; k++) ptr[k] = p->base[k], step[k] = p->strides[k][0];
        loop(total, ptr, step, aux);
        return;
    }
    run_range(p, 0, total, loop, aux);
}
