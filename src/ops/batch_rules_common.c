/* The helpers batching rules share, and the loop over the batch that
 * serves ops without a rule (see batch_rules.h). */
#include <string.h>
#include "nabla/device.h"
#include "nabla/ops.h"
#include "batch_rules.h"
#include "op_internal.h"

nb_value nb_batch_move(nb_builder *b, nb_value v, int from, int to)
{
    if (from == to || nb_is_none(v)) return v;
    int nd = nb_value_info(b, v).ndim;
    int64_t perm[NB_MAX_DIMS];
    for (int i = 0, j = 0; i < nd; i++) {
        if (i == to) {
            perm[i] = from;
            continue;
        }
        if (j == from) j++;
        perm[i] = j++;
    }
    return nb_transpose(b, v, nd, perm);
}

nb_value nb_batch_front(nb_builder *b, const nb_batch_ctx *c, int i)
{
    return c->x_bdim[i] > 0 ? nb_batch_move(b, c->x[i], c->x_bdim[i], 0) : c->x[i];
}

nb_value nb_batch_front_padded(nb_builder *b, const nb_batch_ctx *c, int i, int rank)
{
    nb_value v = nb_batch_front(b, c, i);
    int r = c->x_info[i].ndim;
    if (c->x_bdim[i] < 0 || r >= rank) return v;
    int64_t axes[NB_MAX_DIMS];
    for (int k = 0; k < rank - r; k++) axes[k] = 1 + k;
    return nb_unsqueeze(b, v, rank - r, axes);
}

nb_value nb_batch_materialize(nb_builder *b, const nb_batch_ctx *c, int i)
{
    if (c->x_bdim[i] >= 0 || nb_is_none(c->x[i])) return nb_batch_front(b, c, i);
    const nb_var_info *in = &c->x_info[i];
    if (c->batch < 0) {
        nb_builder_fail(b, NB_ERR_UNSUPPORTED, "vmap: %s: the batch size must be known to broadcast an unbatched input",
                        c->def->name);
        return NB_NONE;
    }
    int64_t shape[NB_MAX_DIMS];
    shape[0] = c->batch;
    for (int k = 0; k < in->ndim; k++) shape[k + 1] = -1; /* expand: -1 keeps the dim */
    return nb_expand(b, nb_unsqueeze(b, c->x[i], 1, (const int64_t[]){0}), in->ndim + 1, shape);
}

nb_status nb_batch_reemit(nb_builder *b, const nb_batch_ctx *c, const nb_value *in, int n_set, const nb_attr *set,
                          int n_out, nb_value *out)
{
    nb_attr attrs[NB_MAX_ATTRS];
    int m = 0;
    for (int k = 0; k < NB_MAX_ATTRS && c->def->attrs[k].name; k++) {
        if (c->attrs[k].type == NB_ATTR_NONE) continue;
        attrs[m] = (nb_attr){c->def->attrs[k].name, c->attrs[k]};
        for (int j = 0; j < n_set; j++)
            if (!strcmp(set[j].name, attrs[m].name)) attrs[m].value = set[j].value;
        m++;
    }
    return nb_emit(b, c->def->name, NB_VALUES_N(c->n_in, in), NB_ATTRS_N(m, attrs), n_out, out);
}

const nb_attr_value *nb_batch_attr(const nb_batch_ctx *c, const char *name)
{
    static const nb_attr_value none;
    for (int k = 0; k < NB_MAX_ATTRS && c->def->attrs[k].name; k++)
        if (!strcmp(c->def->attrs[k].name, name)) return &c->attrs[k];
    return &none;
}

void nb_batch_set_all(nb_batch_ctx *c, int bdim)
{
    for (int k = 0; k < c->n_out; k++) c->y_bdim[k] = nb_is_none(c->y[k]) ? -1 : bdim;
}

nb_status nb_batch_apply(nb_builder *b, nb_batch_ctx *c, nb_attr_value *av, nb_var_info *yi, int n_attrs,
                         const nb_attr *attrs, bool *checked)
{
    const nb_op_def *def = c->def;
    nb_status st = nb_resolve_attrs(def, n_attrs, attrs, av, def->name);
    /* Inference on the examples' shapes: the errors a user should see name
     * those, and the rule's outputs must match. */
    *checked = !(def->flags & NB_OP_CONTROL);
    memset(yi, 0, (size_t)c->n_out * sizeof *yi);
    if (!st && *checked) st = nb_op_infer(def->name, c->n_in, c->x_info, NB_ATTRS_N(n_attrs, attrs), c->n_out, yi);
    if (st) return nb_error_context(st, "vmap: %s, per example", def->name);
    c->attrs = av;
    c->y_info = yi;
    for (int k = 0; k < c->n_out; k++) c->y[k] = NB_NONE, c->y_bdim[k] = -1;
    st = def->batch ? def->batch(b, c) : nb_batch_loop(b, c);
    if (!st) st = nb_builder_status(b);
    if (st) {
        if (nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
        nb_builder_clear_error(b);
        return nb_error_context(st, "vmap: in the batching %s of %s", def->batch ? "rule" : "loop", def->name);
    }
    return NB_OK;
}

nb_status nb_batch_loop(nb_builder *b, nb_batch_ctx *c)
{
    if (c->batch < 0)
        return nb_builder_fail(b, NB_ERR_UNSUPPORTED,
                               "vmap: %s has no batching rule, and its loop over the batch "
                               "needs a known batch size",
                               c->def->name);
    int64_t n = c->batch;
    nb_value *res = nb_calloc((size_t)(n * c->n_out) + 1, sizeof *res);
    nb_value *in = nb_calloc((size_t)c->n_in + 1, sizeof *in);
    if (!res || !in) {
        nb_free(res);
        nb_free(in);
        return nb_builder_fail(b, NB_ERR_NOMEM, "vmap: %s: out of memory", c->def->name);
    }
    for (int64_t e = 0; e < n && !nb_builder_status(b); e++) {
        for (int i = 0; i < c->n_in; i++) {
            int d = c->x_bdim[i];
            if (d < 0) {
                in[i] = c->x[i];
                continue;
            }
            int64_t ax = d, lo = e, hi = e + 1;
            in[i] = nb_squeeze(b, nb_slice(b, c->x[i], 1, &ax, &lo, &hi), 1, &ax);
        }
        nb_batch_reemit(b, c, in, 0, NULL, c->n_out, res + e * c->n_out);
    }
    nb_value *col = nb_calloc((size_t)n + 1, sizeof *col);
    if (!col) nb_builder_fail(b, NB_ERR_NOMEM, "vmap: %s: out of memory", c->def->name);
    for (int k = 0; k < c->n_out && !nb_builder_status(b); k++) {
        bool none = false;
        for (int64_t e = 0; e < n; e++) none |= nb_is_none(col[e] = res[e * c->n_out + k]);
        c->y[k] = none ? NB_NONE : nb_stack(b, (int)n, col, 0);
        c->y_bdim[k] = none ? -1 : 0;
    }
    nb_free(col);
    nb_free(res);
    nb_free(in);
    return nb_builder_status(b);
}
