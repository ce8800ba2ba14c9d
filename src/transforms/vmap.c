/* nb_vmap and nb_vmap_emit on the eager builder: the inputs wrapped as
 * logical tensors of a new vmap level, the function run once on them, the
 * outputs unwrapped with their batch dims moved where out_axes says (an
 * output that does not depend on the batch broadcast along it). The
 * dispatch to batching rules is the eager backend's (src/eager/batched.c);
 * a record builder takes vmap_record.c. */
#include <string.h>
#include "nabla/device.h"
#include "nabla/ops.h"
#include "nabla/vmap.h"
#include "../builder/builder_internal.h"
#include "../eager/batched.h"
#include "../ops/batch_rules.h"
#include "vmap_internal.h"

static const nb_vmap_opts defaults;

nb_status nb_vmap_call(nb_builder *b, const nb_function *f, const nb_value *in, nb_value *out)
{
    /* Cleared so that a function failing without a message cannot pass on
     * an earlier failure's as its own; put back when it succeeds, since
     * nb_last_error keeps the last failure's text until the next one. */
    char *before = nb_last_error()[0] ? nb_strdup(nb_last_error()) : NULL;
    nb_clear_error();
    nb_status st = f->fn(b, in, out, f->ctx);
    if (st && !nb_last_error()[0] && !nb_builder_status(b))
        nb_error(st, "vmap: the mapped function failed (%s) and left no message", nb_status_name(st));
    else if (!st && before) nb_error(NB_OK, "%s", before);
    nb_free(before);
    return st;
}

nb_status nb_vmap_check_fn(const nb_function *f, const char *who)
{
    if (!f || !f->fn || f->n_in < 1 || f->n_out < 1 || f->n_in > NB_VMAP_MAX_IO || f->n_out > NB_VMAP_MAX_IO)
        return nb_error(NB_ERR_ARG, "%s: needs a function of 1..%d inputs and 1..%d outputs", who, NB_VMAP_MAX_IO,
                        NB_VMAP_MAX_IO);
    return NB_OK;
}

nb_status nb_vmap_in_axes(const nb_function *f, const nb_vmap_opts *opts, const nb_var_info *in, int *axes,
                          int64_t *batch)
{
    int first = -1;
    *batch = opts->batch_size > 0 ? opts->batch_size : -1;
    if (opts->batch_size < 0 || opts->chunk_size < 0)
        return nb_error(NB_ERR_ARG, "vmap: batch_size %lld and chunk_size %lld must not be negative",
                        (long long)opts->batch_size, (long long)opts->chunk_size);
    for (int i = 0; i < f->n_in; i++) {
        int a = opts->in_axes ? opts->in_axes[i] : 0;
        char s[NB_SHAPE_STR_MAX];
        axes[i] = -1;
        if (a == NB_NOT_BATCHED) continue;
        int nd = in[i].ndim;
        if (nd < 0) return nb_error(NB_ERR_ARG, "vmap: input %d is missing but in_axes batches it", i);
        if (a < -nd || a >= nd)
            return nb_error(NB_ERR_ARG, "vmap: in_axes[%d] is %d but input %d has shape %s (axes %d..%d)", i, a, i,
                            nb_shape_str(s, sizeof s, nd, in[i].shape), -nd, nd - 1);
        axes[i] = a < 0 ? a + nd : a;
        int64_t n = in[i].shape[axes[i]];
        if (first < 0 && opts->batch_size > 0 && n >= 0 && n != opts->batch_size)
            return nb_error(NB_ERR_SHAPE,
                            "vmap: input %d has batch size %lld (axis %d of shape %s) but batch_size is "
                            "%lld",
                            i, (long long)n, axes[i], nb_shape_str(s, sizeof s, nd, in[i].shape),
                            (long long)opts->batch_size);
        if (first >= 0 && n >= 0 && *batch >= 0 && n != *batch)
            return nb_error(NB_ERR_SHAPE,
                            "vmap: input %d has batch size %lld (axis %d of shape %s) but input %d has "
                            "%lld",
                            i, (long long)n, axes[i], nb_shape_str(s, sizeof s, nd, in[i].shape), first,
                            (long long)*batch);
        if (first < 0) first = i;
        if (n >= 0) *batch = n;
    }
    if (first < 0 && opts->batch_size <= 0)
        return nb_error(NB_ERR_ARG,
                        "vmap: no input is batched (every in_axes entry is NB_NOT_BATCHED): give "
                        "batch_size");
    return NB_OK;
}

nb_status nb_vmap_out_axis(const nb_vmap_opts *opts, int k, int phys_ndim, int *axis)
{
    int a = opts->out_axes ? opts->out_axes[k] : 0;
    if (a < -phys_ndim || a >= phys_ndim)
        return nb_error(NB_ERR_ARG, "vmap: out_axes[%d] is %d but output %d has %d dims with the batch (axes %d..%d)",
                        k, a, k, phys_ndim, -phys_ndim, phys_ndim - 1);
    *axis = a < 0 ? a + phys_ndim : a;
    return NB_OK;
}

nb_value nb_vmap_broadcast(nb_builder *b, nb_value v, int64_t batch, int axis)
{
    nb_var_info i = nb_value_info(b, v);
    int64_t shape[NB_MAX_DIMS];
    for (int d = 0, k = 0; d <= i.ndim; d++) shape[d] = d == axis ? batch : i.shape[k++];
    return nb_expand(b, nb_unsqueeze(b, v, 1, (const int64_t[]){axis}), i.ndim + 1, shape);
}

static nb_status check_value(nb_builder *b, const nb_function *f, const nb_value *in, nb_var_info *info)
{
    for (int i = 0; i < f->n_in; i++) {
        if (nb_is_none(in[i])) {
            info[i] = (nb_var_info){.ndim = -1};
            continue;
        }
        nb_status st = nb_builder_check_value(b, in[i], "vmap: an input");
        if (st) return st;
        info[i] = nb_value_info(b, in[i]);
    }
    return NB_OK;
}

static nb_status vmap_eager(nb_builder *b, const nb_function *f, const nb_vmap_opts *opts, const nb_value *in,
                            nb_value *out)
{
    nb_var_info info[NB_VMAP_MAX_IO];
    int axes[NB_VMAP_MAX_IO];
    int64_t batch;
    nb_status st = check_value(b, f, in, info);
    if (!st) st = nb_vmap_in_axes(f, opts, info, axes, &batch);
    if (st) return st;
    nb_value lin[NB_VMAP_MAX_IO], lout[NB_VMAP_MAX_IO];
    int level = nb_vmap_level_enter();
    for (int i = 0; i < f->n_in && !st; i++) {
        lin[i] = in[i];
        if (axes[i] < 0) continue;
        nb_tensor *t;
        if (!(st = nb_batched_wrap(&t, in[i].p, axes[i], level))) {
            lin[i] = nb_eager_value(b, t);
            nb_tensor_release(t);
            st = nb_builder_status(b);
        }
    }
    for (int k = 0; k < f->n_out; k++) lout[k] = NB_NONE;
    if (!st) st = nb_vmap_call(b, f, lin, lout);
    if (!st) st = nb_builder_status(b);
    nb_vmap_level_leave();
    for (int k = 0; k < f->n_out && !st; k++)
        if (nb_is_none(lout[k])) st = nb_error(NB_ERR_ARG, "vmap: the function left output %d unset", k);
    for (int k = 0; k < f->n_out && !st; k++) {
        nb_tensor *o = lout[k].p;
        const nb_batched *bt = nb_batched_of(o);
        int axis = 0;
        if (bt && bt->level == level) {
            if ((st = nb_vmap_out_axis(opts, k, bt->phys->ndim, &axis))) break;
            out[k] = nb_batch_move(b, nb_eager_value(b, bt->phys), bt->bdim, axis);
        } else {
            if ((st = nb_vmap_out_axis(opts, k, o->ndim + 1, &axis))) break;
            out[k] = nb_vmap_broadcast(b, lout[k], batch, axis);
        }
        st = nb_builder_status(b);
    }
    return st;
}

nb_status nb_vmap_emit(nb_builder *b, const nb_function *f, const nb_vmap_opts *opts, const nb_value *in, nb_value *out)
{
    if (!opts) opts = &defaults;
    nb_status st = nb_vmap_check_fn(f, "vmap");
    if (!st && (!b || !in || !out)) st = nb_error(NB_ERR_ARG, "vmap: the builder, inputs or outputs are NULL");
    if (st) return b ? nb_builder_record_error(b, st) : st;
    if (b->status) return b->status;
    for (int k = 0; k < f->n_out; k++) out[k] = NB_NONE;
    if (opts->chunk_size)
        return nb_builder_fail(b, NB_ERR_ARG, "vmap_emit: chunk_size is for nb_vmap; it must be 0 here");
    st = nb_builder_is_eager(b) ? vmap_eager(b, f, opts, in, out) : nb_vmap_record(b, f, opts, in, out);
    if (st) {
        for (int k = 0; k < f->n_out; k++) out[k] = NB_NONE;
        if (!b->status) nb_builder_record_error(b, st);
    }
    return b->status ? b->status : st;
}

/* Chunks of the batch one after the other, each output's chunks joined
 * along its batch axis. */
static nb_status vmap_chunks(nb_builder *b, const nb_function *f, const nb_vmap_opts *opts, const nb_value *in,
                             int64_t batch, const int *axes, nb_value *out)
{
    int64_t chunk = opts->chunk_size, n_chunks = (batch + chunk - 1) / chunk;
    nb_value *parts = nb_calloc((size_t)(n_chunks * f->n_out) + 1, sizeof *parts);
    nb_value *col = nb_calloc((size_t)n_chunks + 1, sizeof *col);
    if (!parts || !col) {
        nb_free(parts);
        nb_free(col);
        return nb_error(NB_ERR_NOMEM, "vmap: out of memory");
    }
    nb_vmap_opts one = *opts;
    one.chunk_size = 0;
    nb_status st = NB_OK;
    for (int64_t c = 0; c < n_chunks && !st; c++) {
        int64_t lo = c * chunk, hi = lo + chunk < batch ? lo + chunk : batch;
        nb_value sl[NB_VMAP_MAX_IO];
        for (int i = 0; i < f->n_in; i++) {
            int64_t ax = axes[i];
            sl[i] = axes[i] < 0 ? in[i] : nb_slice(b, in[i], 1, &ax, &lo, &hi);
        }
        one.batch_size = hi - lo;
        st = nb_vmap_emit(b, f, &one, sl, parts + c * f->n_out);
    }
    for (int k = 0; k < f->n_out && !st; k++) {
        for (int64_t c = 0; c < n_chunks; c++) col[c] = parts[c * f->n_out + k];
        int axis = 0;
        if (!(st = nb_vmap_out_axis(opts, k, nb_value_info(b, col[0]).ndim, &axis)))
            out[k] = nb_concat(b, (int)n_chunks, col, axis);
        if (!st) st = nb_builder_status(b);
    }
    nb_free(parts);
    nb_free(col);
    return st;
}

nb_status nb_vmap(const nb_function *f, const nb_vmap_opts *opts, nb_tensor *const *in, nb_tensor **out)
{
    if (!opts) opts = &defaults;
    nb_status st = nb_vmap_check_fn(f, "vmap");
    if (st) return st;
    if (!in || !out) return nb_error(NB_ERR_ARG, "vmap: the inputs or outputs are NULL");
    for (int k = 0; k < f->n_out; k++) out[k] = NULL;
    nb_builder *b;
    if ((st = nb_builder_new_eager(&b))) return st;
    nb_value vin[NB_VMAP_MAX_IO], vout[NB_VMAP_MAX_IO];
    nb_var_info info[NB_VMAP_MAX_IO];
    int axes[NB_VMAP_MAX_IO];
    int64_t batch = 0;
    for (int i = 0; i < f->n_in; i++) {
        vin[i] = in[i] ? nb_eager_value(b, in[i]) : NB_NONE;
        info[i] = in[i] ? nb_value_info(b, vin[i]) : (nb_var_info){.ndim = -1};
    }
    st = nb_builder_status(b);
    if (!st) st = nb_vmap_in_axes(f, opts, info, axes, &batch);
    if (!st && opts->chunk_size > 0 && opts->chunk_size < batch) st = vmap_chunks(b, f, opts, vin, batch, axes, vout);
    else if (!st) {
        nb_vmap_opts all = *opts;
        all.chunk_size = 0;
        st = nb_vmap_emit(b, f, &all, vin, vout);
    }
    if (!st) st = nb_builder_status(b);
    if (st && nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
    for (int k = 0; k < f->n_out && !st; k++) out[k] = nb_tensor_retain(vout[k].p);
    nb_builder_free(b);
    return st;
}
