/* Mapping values onto slots, running shape inference, and running one op on
 * tensors (the path of eager mode and of op tests). */
#include <stdint.h>
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "op_internal.h"
#include "op_memo.h"
#include "../kernels/kernels.h"
#include "../core/fpenv.h"
#include "../core/tensor_internal.h"

nb_status nb_assign_slots(const nb_op_def *def, bool inputs, int n, const bool *present, int begin[NB_MAX_SLOTS + 1],
                          int *order, const char *label)
{
    const nb_slot_def *slots = inputs ? def->inputs : def->outputs;
    const char *side = inputs ? "input" : "output";
    int nslots = 0, variadic = -1;
    while (nslots < NB_MAX_SLOTS && slots[nslots].name) {
        if (slots[nslots].flags & NB_SLOT_VARIADIC) variadic = nslots;
        nslots++;
    }
    if (variadic < 0 && n == nslots) {
        /* Every slot given, in order (an eager op's usual call): value k
         * fills slot k. */
        bool all = true;
        for (int s = 0; s < n; s++) all &= present[s];
        if (all) {
            for (int s = 0; s <= NB_MAX_SLOTS; s++) begin[s] = s < n ? s : n;
            for (int s = 0; s < n; s++) order[s] = s;
            return NB_OK;
        }
    }
    int count[NB_MAX_SLOTS] = {0}, first[NB_MAX_SLOTS] = {0};
    if (variadic < 0) {
        if (n > nslots)
            return nb_error(NB_ERR_ARG, "%s: %d %ss given but it has %d %s slot%s", label, n, side, nslots, side,
                            nslots == 1 ? "" : "s");
        for (int s = 0; s < nslots; s++) {
            first[s] = s;
            count[s] = s < n && present[s];
        }
    } else {
        int fixed = nslots - 1;
        int min = fixed + ((slots[variadic].flags & NB_SLOT_OPTIONAL) ? 0 : 1);
        if (n < min) return nb_error(NB_ERR_ARG, "%s: %d %ss given but it needs at least %d", label, n, side, min);
        for (int s = 0; s < variadic; s++) first[s] = s, count[s] = present[s];
        first[variadic] = variadic;
        count[variadic] = n - fixed;
        for (int s = variadic + 1; s < nslots; s++) {
            first[s] = n - (nslots - s);
            count[s] = present[first[s]];
        }
        for (int k = 0; k < count[variadic]; k++)
            if (!present[variadic + k])
                return nb_error(NB_ERR_ARG, "%s: %s %d of variadic slot %s is missing", label, side, k,
                                slots[variadic].name);
    }
    int pos = 0;
    for (int s = 0; s < NB_MAX_SLOTS; s++) {
        begin[s] = pos;
        if (s >= nslots) continue;
        if (!count[s] && !(slots[s].flags & NB_SLOT_OPTIONAL))
            return nb_error(NB_ERR_ARG, "%s: missing %s '%s'", label, side, slots[s].name);
        for (int k = 0; k < count[s]; k++) order[pos++] = first[s] + k;
    }
    begin[NB_MAX_SLOTS] = pos;
    return NB_OK;
}

nb_status nb_run_infer(nb_op_ctx *ctx)
{
    int n_out = ctx->out_begin[NB_MAX_SLOTS];
    for (int i = 0; i < n_out; i++) ctx->out_info[i] = (nb_var_info){.dtype = NB_DTYPE_COUNT, .ndim = -1};
    /* Every path that would run or record the op itself comes here first:
     * nb_op_run, nb_op_infer, a program's op appended by name. */
    if (ctx->def->expand)
        return nb_error(NB_ERR_UNSUPPORTED,
                        "%s: a composite op has no kernel and no shape inference of its own; emit it "
                        "through a builder (nb_emit), which emits the ops it expands into",
                        ctx->label);
    nb_status st = ctx->def->infer(ctx);
    if (st) return st;
    for (int i = 0; i < n_out; i++) {
        const nb_var_info *o = &ctx->out_info[i];
        if (!nb_dtype_valid(o->dtype) || o->ndim < 0 || o->ndim > NB_MAX_DIMS)
            return nb_error(NB_ERR_STATE, "%s: shape inference left output %d undefined (a bug in the op)", ctx->label,
                            i);
        /* An output with a 0 dim holds nothing, but its strides still
         * multiply the other dims: they must fit, for every op. */
        int64_t m = 1;
        for (int d = 0; d < o->ndim; d++) {
            int64_t e = o->shape[d] > 1 ? o->shape[d] : 1;
            if (m > INT64_MAX / 16 / e) {
                char sh[NB_SHAPE_STR_MAX];
                return nb_error(NB_ERR_SHAPE, "%s: output %d would have shape %s, too large for a tensor", ctx->label,
                                i, nb_shape_str(sh, sizeof sh, o->ndim, o->shape));
            }
            m *= e;
        }
    }
    return NB_OK;
}

nb_status nb_op_run(const char *type, nb_tensors in, nb_attrs attrs, int n_out, nb_tensor **out)
{
    return nb_op_run_rng(type, in.n, in.v, attrs.n, attrs.v, n_out, out, NULL);
}

nb_status nb_op_run_rng(const char *type, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs, int n_out,
                        nb_tensor **out, nb_rng *rng)
{
    const nb_op_def *def = nb_op_find(type);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "unknown op '%s'", type ? type : "(null)");
    return nb_op_run_def(def, n_in, in, n_attrs, attrs, n_out, out, rng);
}

nb_status nb_op_run_def(const nb_op_def *def, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs,
                        int n_out, nb_tensor **out, nb_rng *rng)
{
    if (n_in < 0 || n_out < 0 || (n_in && !in) || (n_out && !out) || (n_attrs && !attrs))
        return nb_error(NB_ERR_ARG, "%s: bad argument counts or NULL arrays", def->name);
    nb_attr_value av[NB_MAX_ATTRS];
    nb_status st = nb_resolve_attrs(def, n_attrs, attrs, av, def->name);
    if (st) return st;
    /* The usual few values live on the stack: six allocations an op were a
     * third of an eager op's cost. */
    enum { FEW = 8 };
    int n = n_in > n_out ? n_in : n_out;
    bool present_few[FEW + 1], *present = n <= FEW ? present_few : nb_calloc((size_t)n + 1, sizeof *present);
    int order_few[FEW + 1], *order = n <= FEW ? order_few : nb_calloc((size_t)n + 1, sizeof *order);
    nb_tensor *compact_few[FEW + 1], **compact = n <= FEW ? compact_few : nb_calloc((size_t)n + 1, sizeof *compact);
    int in_begin[NB_MAX_SLOTS + 1], out_begin[NB_MAX_SLOTS + 1];
    if (!present || !order || !compact) {
        st = nb_error(NB_ERR_NOMEM, "%s: out of memory", def->name);
        goto done;
    }
    if (!(st = nb_map_slots(def, n_in, in, n_out, (nb_slot_scratch){present, order}, compact, in_begin, out_begin)))
        st = nb_op_run_slots(def, av, &(nb_slotted){in_begin, in_begin[NB_MAX_SLOTS], compact},
                             &(nb_slotted){out_begin, n_out, out}, rng, NULL, false);
done:
    if (n > FEW) {
        nb_free(present);
        nb_free(order);
        nb_free(compact);
    }
    return st;
}

nb_status nb_op_run_slots(const nb_op_def *def, const nb_attr_value *av, const nb_slotted *in_s,
                          const nb_slotted *out_s, nb_rng *rng, nb_op_memo_entry *memo, bool hit)
{
    const char *label = def->name;
    const int *in_begin = in_s->begin, *out_begin = out_s->begin;
    nb_tensor *const *in = in_s->v, **out = out_s->v;
    const int n_in = in_s->n, n_out = out_s->n;
    nb_status st = NB_OK;
    enum { FEW = 8 };
    bool few = n_in <= FEW && n_out <= FEW;
    nb_tensor *ins_few[FEW + 1] = {0}, *outs_few[FEW + 1] = {0}; /* cleared inline: two memset calls cost more */
    nb_var_info in_info_few[FEW + 1], out_info_few[FEW + 1];
    nb_tensor **ins = few ? ins_few : nb_calloc((size_t)n_in + 1, sizeof *ins);
    nb_tensor **outs = few ? outs_few : nb_calloc((size_t)n_out + 1, sizeof *outs);
    nb_var_info *in_info = few ? in_info_few : nb_calloc((size_t)n_in + 1, sizeof *in_info);
    nb_var_info *out_info = few ? out_info_few : nb_calloc((size_t)n_out + 1, sizeof *out_info);
    if (few) {
        /* Infos are filled before they are read: an input's from its
         * tensor, an output's by the op's inference, which sets the dtype
         * and ndim and the shape up to it. A full clear of both (1.3 KiB)
         * was a tenth of an eager op's cost. */
        for (int i = 0; i <= n_out; i++) out_info[i].dtype = 0, out_info[i].ndim = 0;
    }
    nb_op_ctx ctx = {.def = def, .label = label, .attrs = av, .in_info = in_info, .out_info = out_info};
    memcpy(ctx.in_begin, in_begin, sizeof ctx.in_begin);
    memcpy(ctx.out_begin, out_begin, sizeof ctx.out_begin);
    nb_rng local_rng;
    int n_held = 0;
    if (!ins || !outs || !in_info || !out_info) {
        st = nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
        goto done;
    }
    for (; n_held < n_in; n_held++) {
        int i = n_held;
        if (!in[i]->storage) {
            st = nb_error(NB_ERR_ARG,
                          "%s: input %d is a batched (vmap) tensor, which holds no data of its own: "
                          "run the op through a builder (nb_emit) to map it over the batch",
                          label, i);
            goto done;
        }
        /* Kernels take contiguous inputs; views are copied here. */
        if (nb_is_contiguous_inline(in[i])) in[i]->refcount++, ins[i] = in[i]; /* nb_tensor_retain, inline */
        else if ((st = nb_tensor_contiguous(&ins[i], in[i]))) goto done;
        if (!hit || def->params_size) in_info[i] = nb_tensor_info(ins[i]); /* read by infer and params only */
    }
    if (hit)
        for (int i = 0; i < n_out; i++) out_info[i] = memo->out[i];
    else if ((st = nb_run_infer(&ctx))) goto done;
    else if (memo) nb_op_memo_put(memo, def, n_in, in, n_out, out_info);
    if ((def->flags & NB_OP_VIEW) && n_out == 1 && !out[0] && n_in >= 1) {
        /* The same elements in the same order: a view of input 0 (made contiguous above). */
        if (!(st = nb_tensor_reshape(&outs[0], ins[0], out_info[0].ndim, out_info[0].shape)))
            out[0] = nb_tensor_retain(outs[0]);
        goto done;
    }
    for (int i = 0; i < n_out; i++) {
        const nb_var_info *o = &out_info[i];
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        if (out[i] && !out[i]->storage) {
            st = nb_error(NB_ERR_ARG, "%s: output %d is a batched (vmap) tensor, which cannot be written", label, i);
            goto done;
        }
        if (out[i]) {
            if (out[i]->dtype != o->dtype || !nb_shape_equal(out[i]->ndim, out[i]->shape, o->ndim, o->shape) ||
                !nb_tensor_is_contiguous(out[i])) {
                st = nb_error(NB_ERR_SHAPE, "%s: output %d given as %s %s but the op makes %s %s", label, i,
                              nb_dtype_name(out[i]->dtype), nb_shape_str(a, sizeof a, out[i]->ndim, out[i]->shape),
                              nb_dtype_name(o->dtype), nb_shape_str(b, sizeof b, o->ndim, o->shape));
                goto done;
            }
            outs[i] = nb_tensor_retain(out[i]);
        } else if ((st = (def->flags & (NB_OP_INPLACE | NB_OP_WRITES_ALL) ? nb_tensor_new_uninit : nb_tensor_new)(
                        &outs[i], o->dtype, o->ndim, o->shape))) {
            goto done;
        }
    }
    if (!rng && (def->flags & NB_OP_RANDOM)) { /* only random ops' kernels read it */
        const nb_attr_value *seed = nb_attr_get(&ctx, "seed");
        nb_rng_seed(&local_rng, seed->type == NB_ATTR_INT ? (uint64_t)seed->i : 0);
        rng = &local_rng;
    }
    _Alignas(16) unsigned char params[NB_MAX_PARAMS_SIZE];
    nb_kernel_ctx k = {.params = def->params_size ? params : NULL, .label = label, .in = ins, .out = outs, .rng = rng};
    memcpy(k.in_begin, ctx.in_begin, sizeof k.in_begin);
    memcpy(k.out_begin, ctx.out_begin, sizeof k.out_begin);
    if (def->params_size) {
        memset(params, 0, def->params_size);
        if ((st = def->params(&ctx, params))) goto done;
    }
    nb_dtype dt = n_in ? ins[0]->dtype : out_info[0].dtype; /* part of a memo's signature */
    const nb_kernel_def *kern = NULL;
    if (hit && memo->kernel && memo->kernel_generation == nb_kernel_generation()) kern = memo->kernel;
    else {
        unsigned generation = memo ? nb_kernel_generation() : 0; /* before: a kernel registered now is seen next time */
        kern = nb_kernel_find(def->name, NB_DEVICE_CPU, dt, &k);
        if (memo && kern && nb_kernel_choice_is_fixed(def->name, NB_DEVICE_CPU, kern))
            memo->kernel = kern, memo->kernel_generation = generation;
    }
    if (kern) {
        unsigned fp = nb_fpmode_enter();
        st = kern->run(&k);
        nb_fpmode_leave(fp);
    } else {
        st = NB_ERR_UNSUPPORTED;
    }
    if (!st)
        for (int i = 0; i < n_out; i++)
            if (!out[i]) out[i] = nb_tensor_retain(outs[i]);
done:
    for (int i = 0; i < n_held; i++) nb_tensor_release_inline(ins[i]);
    for (int i = 0; outs && i < n_out; i++) nb_tensor_release_inline(outs[i]);
    if (!few) {
        nb_free(ins);
        nb_free(outs);
        nb_free(in_info);
        nb_free(out_info);
    }
    return st;
}

nb_status nb_op_infer(const char *type, int n_in, const nb_var_info *in, nb_attrs as, int n_out, nb_var_info *out)
{
    int n_attrs = as.n;
    const nb_attr *attrs = as.v;
    const nb_op_def *def = nb_op_find(type);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "unknown op '%s'", type ? type : "(null)");
    if (n_in < 0 || n_out < 1 || (n_in && !in) || !out || (n_attrs && !attrs))
        return nb_error(NB_ERR_ARG, "%s: bad argument counts or NULL arrays", type);
    nb_attr_value av[NB_MAX_ATTRS];
    nb_status st = nb_resolve_attrs(def, n_attrs, attrs, av, def->name);
    if (st) return st;
    int n = n_in > n_out ? n_in : n_out;
    bool *present = nb_calloc((size_t)n + 1, sizeof *present);
    int *order = nb_calloc((size_t)n + 1, sizeof *order);
    nb_var_info *compact = nb_calloc((size_t)n_in + 1, sizeof *compact);
    nb_op_ctx ctx = {.def = def, .label = def->name, .attrs = av, .in_info = compact, .out_info = out};
    if (!present || !order || !compact) {
        st = nb_error(NB_ERR_NOMEM, "%s: out of memory", type);
        goto done;
    }
    for (int i = 0; i < n_in; i++) present[i] = in[i].ndim >= 0;
    if ((st = nb_assign_slots(def, true, n_in, present, ctx.in_begin, order, def->name))) goto done;
    for (int i = 0; i < ctx.in_begin[NB_MAX_SLOTS]; i++) compact[i] = in[order[i]];
    for (int i = 0; i < n_out; i++) present[i] = true;
    if ((st = nb_assign_slots(def, false, n_out, present, ctx.out_begin, order, def->name))) goto done;
    st = nb_run_infer(&ctx);
done:
    nb_free(present);
    nb_free(order);
    nb_free(compact);
    return st;
}
