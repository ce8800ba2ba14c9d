/* Update folding (fold.h). The weight gradient of a linear layer is one
 * matmul, dW = X^T @ dY, and plain sgd then reads it once: W -= lr * dW.
 * Folded, the GEMM adds -lr * X^T @ dY onto W itself (beta = 1), and dW is
 * never written and read back: for a 784 x 256 layer at batch 1 that is
 * 0.8 MB written and 1.6 MB read less per step, most of the update's cost.
 *
 * The folded step runs where the sgd ran, so W and the learning rate are
 * read and written when they were; the matmul's step is skipped, and its
 * factors are read later than they were. A pair folds where that changes
 * nothing:
 *   - dW is a temporary that is not fetched, written by the matmul alone and
 *     read by the sgd alone;
 *   - the factors are matrices by their declarations, W is neither, and no
 *     step between the two writes them (their buffers are kept to the
 *     update: the price is that memory, held a little longer).
 * Other optimisers keep state that needs the gradient itself; they are left
 * as they are.
 *
 * The result differs from the separate update by rounding only: the GEMM
 * adds its K slices onto W one after another, where the update added their
 * sum. */
#include <stdlib.h>
#include <string.h>
#include "fold.h"
#include "../program/program_internal.h"

static bool is_op(const step *st, const char *name) { return strcmp(st->op->def->name, name) == 0; }

static bool reads(const step *st, int v)
{
    for (int k = 0; k < st->n_in; k++)
        if (st->in[k] == v) return true;
    return false;
}

static bool writes(const step *st, int v)
{
    for (int k = 0; k < st->n_out; k++)
        if (st->out[k] == v) return true;
    return false;
}

static bool is_matrix(const value *v) { return v->var && v->var->ndim == 2; }

/* The matmul step that makes sgd step s's gradient, if the pair folds; -1
 * otherwise. */
static int foldable(const nb_prepared *pp, int s)
{
    const step *u = &pp->steps[s];
    if (!is_op(u, "sgd") || u->n_in != 3 || u->n_out != 1 || u->run_once) return -1;
    const int w = u->in[0], g = u->in[1];
    const value *gv = &pp->values[g];
    if (u->out[0] != w || gv->kind != V_TEMP || gv->fetched || pp->values[w].kind != V_SCOPE) return -1;
    int m = -1;
    for (int i = 0; i < pp->n_steps; i++) {
        if (i == s) continue;
        const step *t = &pp->steps[i];
        if (writes(t, g)) {
            if (m >= 0 || i > s) return -1;
            m = i;
        }
        if (reads(t, g)) return -1;
    }
    if (m < 0) return -1;
    const step *mm = &pp->steps[m];
    if (!is_op(mm, "matmul") || mm->n_in != 2 || mm->n_out != 1 || mm->run_once || mm->folded) return -1;
    const int x = mm->in[0], y = mm->in[1];
    if (x == w || y == w || !is_matrix(&pp->values[x]) || !is_matrix(&pp->values[y]) || !is_matrix(&pp->values[w]))
        return -1;
    for (int i = m + 1; i < s; i++)
        if (writes(&pp->steps[i], x) || writes(&pp->steps[i], y)) return -1;
    return m;
}

/* The matmul's product as a matmul_sgd onto W with rate lr, in the sgd's
 * place: an op of our own, which the prepared block owns. */
static nb_op *folded_op(const nb_op *matmul, const nb_op *sgd, const char *w, const char *lr)
{
    nb_op *op = nb_calloc(1, sizeof *op);
    char **in = nb_calloc(4, sizeof *in), **out = nb_calloc(1, sizeof *out);
    if (!op || !in || !out) {
        nb_free(op), nb_free(in), nb_free(out);
        return NULL;
    }
    *op = *sgd; /* role and id: reports name the sgd's place */
    op->def = nb_op_find("matmul_sgd");
    memcpy(op->attrs, matmul->attrs, sizeof op->attrs); /* transpose_x, transpose_y, alpha: matmul's order */
    in[0] = matmul->inputs[0], in[1] = matmul->inputs[1], in[2] = (char *)w, in[3] = (char *)lr;
    out[0] = (char *)w;
    op->inputs = in, op->outputs = out;
    for (int k = 0; k <= NB_MAX_SLOTS; k++) {
        op->in_begin[k] = k < 4 ? k : 4;
        op->out_begin[k] = k < 1 ? k : 1;
    }
    return op;
}

bool nb_fold_enabled(void)
{
    const char *e = getenv("NABLA_FOLD");
    return !e || strcmp(e, "0") != 0;
}

nb_status nb_fold_plan(nb_prepared *pp, const nb_block *b)
{
    if (!nb_fold_enabled() || !nb_op_find("matmul_sgd")) return NB_OK;
    for (int s = 0; s < pp->n_steps; s++) {
        int m = foldable(pp, s);
        if (m < 0) continue;
        step *mm = &pp->steps[m], *u = &pp->steps[s];
        nb_op **ops = nb_realloc(pp->folded_ops, (size_t)(pp->n_folded + 1) * sizeof *ops);
        if (!ops) return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
        pp->folded_ops = ops;
        nb_op *op = folded_op(mm->op, u->op, pp->values[u->in[0]].name, pp->values[u->in[2]].name);
        if (!op) return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
        pp->folded_ops[pp->n_folded++] = op;
        /* Re-preparing the step marks what it touches as last used at s,
         * which keeps the factors' buffers to s; a later use stays later. */
        const int ids[4] = {mm->in[0], mm->in[1], u->in[0], u->in[2]};
        int last[4];
        for (int k = 0; k < 4; k++) last[k] = pp->values[ids[k]].last_use;
        nb_exec_step_clear(u);
        nb_status st = nb_exec_prepare_step(pp, b, op, s);
        if (st) return st;
        for (int k = 0; k < 4; k++)
            if (pp->values[ids[k]].last_use < last[k]) pp->values[ids[k]].last_use = last[k];
        mm->folded = true;
    }
    return NB_OK;
}

void nb_fold_free(nb_prepared *pp)
{
    for (int i = 0; i < pp->n_folded; i++) {
        nb_free(pp->folded_ops[i]->inputs);
        nb_free(pp->folded_ops[i]->outputs);
        nb_free(pp->folded_ops[i]);
    }
    nb_free(pp->folded_ops);
    pp->folded_ops = NULL;
    pp->n_folded = 0;
}
