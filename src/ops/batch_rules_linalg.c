/* Batching rules of matmul and fc. Where one operand is batched against a
 * plain matrix, the batch folds into one GEMM: X's rows ([B*m, k] @ Y), or
 * Y's columns (X @ [k, B*n], the batch then at dim 1 of the result). Else
 * matmul broadcasts batch dims as NumPy does, so a batched operand gets its
 * batch dim first and enough size-1 dims after it that the other's batch
 * dims cannot take its place. fc with only Input batched is fc with one
 * more row dim; a batched W or Bias makes it a batched matmul, an add and
 * the activation. */
#include <string.h>
#include "nabla/ops.h"
#include "batch_rules.h"

static nb_value pad_after_batch(nb_builder *b, nb_value v, int have, int want)
{
    int64_t axes[NB_MAX_DIMS];
    if (have >= want) return v;
    for (int k = 0; k < want - have; k++) axes[k] = 1 + k;
    return nb_unsqueeze(b, v, want - have, axes);
}

/* One GEMM for the batch, wherever its dim is: X (not transposed) against
 * a matrix Y with all its dims but the last (k) as rows; or a matrix X
 * against Y as [k, B*n] or, with transpose_y, as [B*n, k] (the batch moved
 * only when it sits where k must be). The result keeps the batch where the
 * folded operand had it. False where neither form fits. */
static bool folded_matmul(nb_builder *b, nb_batch_ctx *c, int rx, int ry, bool tx, bool ty)
{
    bool bx = nb_batch_is(c, 0), by = nb_batch_is(c, 1);
    nb_value in[2], out;
    int64_t shape[NB_MAX_DIMS];
    if (bx && !by && rx >= 2 && ry == 2 && !tx) {
        int d = c->x_bdim[0];
        nb_value x = d == rx ? nb_batch_front(b, c, 0) : c->x[0]; /* the batch where k is: first */
        if (d == rx) d = 0;
        nb_var_info i = nb_value_info(b, x);
        for (int k = 0; k < i.ndim; k++)
            if (i.shape[k] < 0) return false;
        in[0] = nb_reshape(b, x, 2, (const int64_t[]){-1, i.shape[rx]});
        in[1] = c->x[1];
        nb_batch_reemit(b, c, in, 0, NULL, 1, &out);
        memcpy(shape, i.shape, (size_t)rx * sizeof *shape);
        shape[rx] = -1;
        c->y[0] = nb_reshape(b, out, rx + 1, shape);
        c->y_bdim[0] = d;
        return true;
    }
    if (!bx && by && rx == 2 && ry == 2) {
        int d = c->x_bdim[1];
        nb_value y = c->x[1];
        /* k must lead (or, with transpose_y, end) the physical Y */
        if (!ty && d == 0) y = nb_batch_move(b, y, 0, 1), d = 1;
        if (ty && d == 2) y = nb_batch_move(b, y, 2, 0), d = 0;
        nb_var_info i = nb_value_info(b, y);
        for (int k = 0; k < 3; k++)
            if (i.shape[k] < 0) return false;
        in[0] = c->x[0];
        in[1] = ty ? nb_reshape(b, y, 2, (const int64_t[]){-1, i.shape[2]})
                   : nb_reshape(b, y, 2, (const int64_t[]){i.shape[0], -1});
        nb_batch_reemit(b, c, in, 0, NULL, 1, &out);
        /* [m, a, b]: the two dims of Y besides k, in their order */
        int64_t a = ty ? i.shape[0] : i.shape[1], bb = ty ? i.shape[1] : i.shape[2];
        c->y[0] = nb_reshape(b, out, 3, (const int64_t[]){0, a, bb});
        c->y_bdim[0] = ty ? d + 1 : d;
        return true;
    }
    return false;
}

nb_status nb_batch_matmul(nb_builder *b, nb_batch_ctx *c)
{
    int rx = c->x_info[0].ndim, ry = c->x_info[1].ndim;
    bool bx = nb_batch_is(c, 0), by = nb_batch_is(c, 1);
    bool tx = nb_batch_attr(c, "transpose_x")->b, ty = nb_batch_attr(c, "transpose_y")->b;
    if (folded_matmul(b, c, rx, ry, tx, ty)) return nb_builder_status(b);
    if ((rx == 1 && tx) || (ry == 1 && ty) || rx + 2 > NB_MAX_DIMS || ry + 2 > NB_MAX_DIMS) return nb_batch_loop(b, c);
    nb_value x = nb_batch_front(b, c, 0), y = nb_batch_front(b, c, 1);
    /* A batched 1-D operand as a matrix: [B, 1, K] and [B, K, 1]. */
    bool squeeze_m = bx && rx == 1, squeeze_n = by && ry == 1;
    if (squeeze_m) x = nb_unsqueeze(b, x, 1, (const int64_t[]){1}), rx = 2;
    if (squeeze_n) y = nb_unsqueeze(b, y, 1, (const int64_t[]){2}), ry = 2;
    int target = 2;
    if (rx >= 2 && rx > target) target = rx;
    if (ry >= 2 && ry > target) target = ry;
    if (bx) x = pad_after_batch(b, x, rx, target);
    if (by) y = pad_after_batch(b, y, ry, target);
    nb_value in[2] = {x, y}, out;
    nb_batch_reemit(b, c, in, 0, NULL, 1, &out);
    int nd = nb_value_info(b, out).ndim;
    if (squeeze_n) out = nb_squeeze(b, out, 1, (const int64_t[]){--nd});
    if (squeeze_m) {
        bool no_n = squeeze_n || (c->x_info[1].ndim == 1 && !by);
        out = nb_squeeze(b, out, 1, (const int64_t[]){no_n ? nd - 1 : nd - 2});
    }
    c->y[0] = out;
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}

nb_status nb_batch_fc(nb_builder *b, nb_batch_ctx *c)
{
    int64_t ncd = nb_batch_attr(c, "in_num_col_dims")->i;
    const char *act = nb_batch_attr(c, "activation")->s;
    bool has_bias = c->n_in > 2 && !nb_is_none(c->x[2]);
    if (!nb_batch_is(c, 1) && !(has_bias && nb_batch_is(c, 2))) {
        nb_value in[3] = {nb_batch_front(b, c, 0), c->x[1], has_bias ? c->x[2] : NB_NONE};
        nb_status st = nb_batch_reemit(b, c, in, 1, (nb_attr[]){NB_ATTR_INT("in_num_col_dims", ncd + 1)}, 1, c->y);
        c->y_bdim[0] = 0;
        return st;
    }
    /* [B, rows..., K] @ W ([K, N] or [B, 1.., K, N]) + Bias, then act. */
    const nb_var_info *in = &c->x_info[0];
    if (ncd + 2 > NB_MAX_DIMS) return nb_batch_loop(b, c);
    int64_t shape[NB_MAX_DIMS];
    shape[0] = 0;
    for (int k = 0; k < ncd; k++) shape[k + 1] = in->shape[k];
    shape[ncd + 1] = -1;
    nb_value x = nb_reshape(b, nb_batch_materialize(b, c, 0), (int)ncd + 2, shape);
    nb_value w = nb_batch_is(c, 1) ? pad_after_batch(b, nb_batch_front(b, c, 1), 2, (int)ncd + 1) : c->x[1];
    nb_value out = nb_matmul(b, x, w, 0);
    if (has_bias) {
        nb_value bias = c->x[2];
        if (nb_batch_is(c, 2)) bias = pad_after_batch(b, nb_batch_front(b, c, 2), c->x_info[2].ndim, (int)ncd + 1);
        out = nb_add(b, out, bias);
    }
    if (act && *act) out = nb_emit1(b, act, NB_VALUES(out), NB_NO_ATTRS);
    c->y[0] = out;
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}
