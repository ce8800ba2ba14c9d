/* The eager backend of the builder: an emitted op runs at once on tensors
 * and, in grad mode, records its backward node; in forward mode, it also
 * runs its JVP rule at each level of tangents the builder carries. */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "batched.h"
#include "tangents.h"
#include "../core/strmap.h"
#include "../ops/op_internal.h"
#include "../ops/op_memo.h"
#include "../core/tensor_internal.h"
#include "../builder/builder_internal.h"
#include "nabla/grad_rule.h"
#include "eager_backend.h"

typedef struct eager_state {
    nb_tensor **values; /* references the builder holds */
    int n_values, cap_values;
    /* Forward mode: the chain of levels of tangents the builder carries
     * (strong), and how many sets at its front the builder made itself
     * (nb_eager_forward_mode_sets; 0 when it took the chain from the
     * thread's current level). */
    nb_tangents *level;
    int n_own;
    nb_strmap params; /* name -> tensor (strong) */
    nb_strmap names;  /* layer-name counters, restarted every step */
    nb_rng rng;
    bool is_test;
    nb_param_trace *trace; /* nb_checkpoint: the parameters its function reads */
    /* nb_checkpoint: the generator states random ops start from are noted
     * on every tape of `record` while its function first runs, and taken in
     * order from `replay` (not from rng) while it runs again. */
    nb_rng_tape *record[NB_RNG_TAPES_MAX];
    int n_record;
    nb_rng_tape *replay;
    nb_op_memo memo;
} eager_state;

static eager_state *state_of(const nb_builder *b) { return b->state; }

static nb_status hold(eager_state *s, nb_tensor *t)
{
    if (s->n_values == s->cap_values) {
        int cap = s->cap_values ? 2 * s->cap_values : 64;
        nb_tensor **v = nb_realloc(s->values, (size_t)cap * sizeof *v);
        if (!v) return nb_error(NB_ERR_NOMEM, "eager: out of memory");
        s->values = v;
        s->cap_values = cap;
    }
    s->values[s->n_values++] = t;
    return NB_OK;
}

#define MAX_ARGS 64

/* Forward mode, at level l: the op's JVP rule turns its inputs' tangents
 * into its outputs' (inputs without one have a zero tangent, which rules
 * skip). An output whose node saved a copy of it for the backward gives the
 * copy its tangent too: a VJP rule run under this level reads the copy. */
static nb_status propagate_tangents(nb_tangents *l, const nb_op_def *def, const nb_attr_value *attrs,
                                    const int *in_begin, const int *out_begin, nb_tensors ins, nb_tensors outs)
{
    int n_in = ins.n, n_out = outs.n;
    nb_tensor *const *in = ins.v, *const *out = outs.v;
    nb_value x[MAX_ARGS], y[MAX_ARGS], tx[MAX_ARGS], ty[MAX_ARGS];
    bool any = false;
    for (int k = 0; k < n_in; k++) {
        nb_tensor *t = nb_tangents_get(l, in[k]);
        x[k] = nb_value_make(in[k], NB_VALUE_TENSOR);
        tx[k] = nb_value_make(t, NB_VALUE_TENSOR);
        any |= t != NULL;
    }
    if (!any || (def->flags & NB_OP_NOT_DIFFERENTIABLE)) return NB_OK;
    if (!def->jvp) return nb_error(NB_ERR_UNSUPPORTED, "forward mode: %s has no JVP rule", def->name);
    for (int k = 0; k < n_out; k++) {
        y[k] = nb_value_make(out[k], NB_VALUE_TENSOR);
        ty[k] = NB_NONE;
    }
    nb_grad_ctx g = {.def = def, .attrs = attrs, .x = x, .y = y, .tx = tx, .ty = ty};
    memcpy(g.in_begin, in_begin, sizeof g.in_begin);
    memcpy(g.out_begin, out_begin, sizeof g.out_begin);
    nb_builder *tb = l->rules;
    nb_status st = def->jvp(tb, &g);
    if (!st) st = nb_builder_status(tb);
    if (st) {
        if (nb_builder_status(tb)) nb_error(st, "%s", nb_builder_error(tb));
        nb_builder_clear_error(tb);
        return nb_error_context(st, "forward mode: in the JVP rule of %s", def->name);
    }
    for (int k = 0; k < n_out && !st; k++) {
        if (nb_is_none(ty[k])) continue;
        st = nb_tangents_set(l, out[k], ty[k].p);
        nb_autograd *a = out[k]->autograd;
        nb_node *n = a ? a->grad_fn : NULL;
        if (!st && n && n->saved_out && n->saved_out[k]) st = nb_tangents_set(l, n->saved_out[k], ty[k].p);
    }
    return st;
}

/* The generator a random op draws from: the builder's (its state first
 * noted on the tapes being recorded), or, while a checkpointed function
 * runs again, the next state of the replayed tape in *replayed. */
static nb_status random_state(eager_state *s, const char *op, nb_rng *replayed, nb_rng **rng)
{
    nb_rng at = s->rng;
    if (s->replay) {
        if (s->replay->pos >= s->replay->n)
            return nb_error(NB_ERR_STATE,
                            "%s: a checkpointed function, run again, draws random numbers more times "
                            "than it did the first time",
                            op);
        at = *replayed = s->replay->states[s->replay->pos++];
        *rng = replayed;
    } else *rng = &s->rng;
    for (int i = 0; i < s->n_record; i++) {
        nb_rng_tape *t = s->record[i];
        if (t->n == t->cap) {
            int cap = t->cap ? 2 * t->cap : 8;
            nb_rng *v = nb_realloc(t->states, (size_t)cap * sizeof *v);
            if (!v) return nb_error(NB_ERR_NOMEM, "%s: out of memory noting the generator for a checkpoint", op);
            t->states = v;
            t->cap = cap;
        }
        t->states[t->n++] = at;
    }
    return NB_OK;
}

nb_status nb_eager_rng_record(nb_builder *b, nb_rng_tape *tape)
{
    eager_state *s = state_of(b);
    if (!tape) {
        if (s->n_record > 0) s->n_record--;
        return NB_OK;
    }
    if (s->n_record == NB_RNG_TAPES_MAX)
        return nb_error(NB_ERR_UNSUPPORTED, "checkpoint: checkpoints nest at most %d deep", NB_RNG_TAPES_MAX);
    s->record[s->n_record++] = tape;
    return NB_OK;
}

nb_rng_tape *nb_eager_rng_replay(nb_builder *b, nb_rng_tape *tape)
{
    eager_state *s = state_of(b);
    nb_rng_tape *was = s->replay;
    s->replay = tape;
    return was;
}

/* Slot ranges with value k in slot k, as nb_assign_slots gives them for
 * n values filling the first n slots: row n. */
static const int in_order[NB_MEMO_IN + 1][NB_MAX_SLOTS + 1] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 1, 1, 1, 1, 1, 1, 1}, {0, 1, 2, 2, 2, 2, 2, 2, 2},
    {0, 1, 2, 3, 3, 3, 3, 3, 3}, {0, 1, 2, 3, 4, 4, 4, 4, 4},
};

static bool is_in_order(const int begin[NB_MAX_SLOTS + 1], int n)
{
    return !memcmp(begin, in_order[n], sizeof in_order[n]);
}

nb_status nb_eager_emit(nb_builder *b, const char *type, int n_in, const nb_value *in, int n_attrs,
                        const nb_attr *attrs, int n_out, nb_value *out)
{
    const nb_op_def *def = nb_op_find(type);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "unknown op '%s'", type);
    if (def->expand) return nb_op_expand(b, def, n_in, in, n_attrs, attrs, n_out, out);
    if (n_out < 0) n_out = nb_op_default_outputs(def);
    eager_state *s = state_of(b);
    if (n_in > MAX_ARGS || n_out > MAX_ARGS || n_attrs >= NB_MAX_ATTRS * 2)
        return nb_error(NB_ERR_ARG, "%s: too many inputs, outputs or attributes", def->name);
    nb_tensor *ins[MAX_ARGS], *outs[MAX_ARGS]; /* the n_out used are cleared below, not all 64 */
    for (int i = 0; i < n_in; i++) ins[i] = in[i].p;
    for (int i = 0; i < n_out; i++) outs[i] = NULL;
    /* Inference mode reaches every op that has an is_test attribute, over
     * what the caller gave: layers pass is_test false, as they do to a
     * program, whose test clone turns it on. */
    nb_attr all[NB_MAX_ATTRS * 2 + 1];
    int m = 0;
    bool has_test = false;
    for (int i = 0; i < n_attrs; i++) {
        bool test = !strcmp(attrs[i].name, "is_test");
        has_test |= test;
        all[m++] = test && s->is_test ? NB_ATTR_BOOL("is_test", true) : attrs[i];
    }
    if (s->is_test && !has_test && nb_op_attr_index(def, "is_test") >= 0) all[m++] = NB_ATTR_BOOL("is_test", true);
    nb_rng replayed, *rng = NULL;
    nb_status st;
    /* Under vmap: inputs batched at the innermost level run the op's
     * batching rule on their physical values instead of its kernel. */
    int level = nb_batched_max_level(n_in, ins);
    if (level > 0) {
        st = nb_batched_run(b, def, level, NB_TENSORS_N(n_in, ins), NB_ATTRS_N(m, all), n_out, outs);
        if (st) return st;
    }
    /* Attributes resolved and values on their slots once, for the kernel
     * and the node alike. */
    nb_attr_value av[NB_MAX_ATTRS];
    bool present[MAX_ARGS];
    int in_begin[NB_MAX_SLOTS + 1], out_begin[NB_MAX_SLOTS + 1], order[MAX_ARGS];
    nb_tensor *compact[MAX_ARGS];
    /* A plain call (no attributes, every slot filled in order) of an op
     * last run here on inputs of the same dtypes and shapes takes its slots
     * and output infos from the memo. */
    bool plain = m == 0 && level == 0 && nb_op_memo_fits(n_in, n_out);
    nb_op_memo_entry *memo = plain ? nb_op_memo_find(&s->memo, def) : NULL;
    bool hit = memo && nb_op_memo_hit(memo, def, n_in, ins, n_out);
    const int *ib = in_begin, *ob = out_begin;
    nb_tensor **cin = compact;
    if (hit) {
        /* The defaults, for the attributes the def declares: nothing reads past them. */
        for (int i = 0; i < memo->n_attrs; i++) av[i] = def->attrs[i].def;
        ib = in_order[n_in];
        ob = in_order[n_out];
        cin = ins;
    } else if ((st = nb_resolve_attrs(def, m, all, av, def->name)) ||
               (st = nb_map_slots(def, n_in, ins, n_out, (nb_slot_scratch){present, order}, compact, in_begin,
                                  out_begin))) {
        goto done;
    } else {
        /* Optional or variadic slots filled otherwise are not a plain call. */
        plain = plain && is_in_order(in_begin, n_in) && is_in_order(out_begin, n_out);
        memo = plain ? nb_op_memo_claim(&s->memo, def) : NULL;
    }
    if (level == 0) {
        st = (def->flags & NB_OP_RANDOM) ? random_state(s, def->name, &replayed, &rng) : NB_OK;
        if (!st)
            st = nb_op_run_slots(def, av, &(nb_slotted){ib, ib[NB_MAX_SLOTS], cin}, &(nb_slotted){ob, n_out, outs}, rng,
                                 memo, hit);
        if (st) return st;
    }
    bool grad = nb_grad_mode_enabled();
    if ((s->level || grad) && !(def->flags & NB_OP_NOT_DIFFERENTIABLE)) {
        if (grad) st = nb_record_node(def, av, ib, ob, ib[NB_MAX_SLOTS], cin, n_out, outs);
        for (nb_tangents *l = s->level; l && !st; l = l->next)
            st = propagate_tangents(l, def, av, ib, ob, NB_TENSORS_N(ib[NB_MAX_SLOTS], cin), NB_TENSORS_N(n_out, outs));
    }
done:
    for (int i = 0; i < n_out; i++) {
        if (!st) st = hold(s, outs[i]);
        if (st) nb_tensor_release(outs[i]); /* not held: ours to drop */
        out[i] = st ? NB_NONE : nb_value_make(outs[i], NB_VALUE_TENSOR);
    }
    return st;
}

static nb_var_info eager_info(const nb_builder *b, nb_value v) { return nb_tensor_info(v.p); }

static void eager_destroy(nb_builder *b)
{
    eager_state *s = state_of(b);
    if (!s) return;
    nb_eager_release_values(b);
    nb_tangents_release(s->level);
    for (int i = 0; i < s->params.n; i++)
        if (s->params.keys[i]) nb_tensor_release(s->params.vals[i]);
    nb_strmap_free(&s->params);
    nb_strmap_free(&s->names);
    nb_free(s->values);
    nb_free(s);
}

static nb_status eager_unique_name(nb_builder *b, const char *prefix, char *buf, size_t size);

static const nb_builder_backend eager_backend = {
    .name = "eager",
    .kind = NB_VALUE_TENSOR,
    .emit = nb_eager_emit,
    .info = eager_info,
    .unique_name = eager_unique_name,
    .state = nb_eager_state,
    .emit_into = nb_eager_emit_into,
    .destroy = eager_destroy,
};

/* A builder carrying `level` (and the levels outside it). */
static nb_status new_eager_at(nb_builder **out, nb_tangents *level)
{
    nb_status st = nb_builder_init(out, &eager_backend);
    if (st) return st;
    eager_state *s = nb_calloc(1, sizeof *s);
    if (!s) {
        nb_free(*out);
        *out = NULL;
        return nb_error(NB_ERR_NOMEM, "eager: out of memory");
    }
    nb_strmap_init(&s->params);
    nb_strmap_init(&s->names);
    nb_rng_seed(&s->rng, 0);
    s->level = nb_tangents_retain(level);
    (*out)->state = s;
    return NB_OK;
}

nb_status nb_builder_new_eager(nb_builder **out) { return new_eager_at(out, nb_tangents_current()); }

/* The engine's builder carries the current level like any other: that is
 * what carries tangents through the backward (forward over reverse). */
nb_status nb_eager_builder_for_engine(nb_builder **out) { return nb_builder_new_eager(out); }

bool nb_eager_carries_tangents(const nb_builder *b) { return state_of(b)->level != NULL; }

nb_value nb_eager_value(nb_builder *b, nb_tensor *t)
{
    if (!b || b->status || !t || b->backend != &eager_backend) {
        if (b && !b->status) nb_builder_fail(b, NB_ERR_ARG, "eager value: needs an eager builder and a tensor");
        return NB_NONE;
    }
    if (nb_builder_record_error(b, hold(state_of(b), nb_tensor_retain(t)))) {
        nb_tensor_release(t);
        return NB_NONE;
    }
    return nb_value_make(t, NB_VALUE_TENSOR);
}

nb_tensor *nb_eager_tensor(nb_value v)
{
    if (v.kind == NB_VALUE_TENSOR) return v.p;
    if (!nb_is_none(v)) nb_error(NB_ERR_ARG, "nb_eager_tensor: the value is a var of a program, not an eager tensor");
    return NULL;
}

void nb_eager_release_values(nb_builder *b)
{
    eager_state *s = state_of(b);
    for (int i = 0; i < s->n_values; i++) nb_tensor_release_inline(s->values[i]);
    s->n_values = 0;
    if (s->names.keys || s->names.vals || s->names.table) { /* backward calls this after every node */
        nb_strmap_free(&s->names);
        nb_strmap_init(&s->names);
    }
}

static nb_status eager_unique_name(nb_builder *b, const char *prefix, char *buf, size_t size)
{
    eager_state *s = state_of(b);
    uintptr_t k = (uintptr_t)nb_strmap_get(&s->names, prefix, NULL);
    if (nb_strmap_put(&s->names, prefix, (void *)(k + 1))) return nb_error(NB_ERR_NOMEM, "eager: out of memory");
    snprintf(buf, size, "%s_%lu", prefix, (unsigned long)k);
    return NB_OK;
}

void nb_param_trace_add(nb_param_trace *tr, const char *name, nb_tensor *t)
{
    for (int i = 0; i < tr->n; i++)
        if (tr->t[i] == t) return;
    if (tr->n == tr->cap) {
        int cap = tr->cap ? 2 * tr->cap : 8;
        nb_tensor **v = nb_realloc(tr->t, (size_t)cap * sizeof *v);
        if (v) tr->t = v;
        char **nm = v ? nb_realloc(tr->name, (size_t)cap * sizeof *nm) : NULL;
        if (!nm) {
            tr->failed = true;
            return;
        }
        tr->name = nm;
        tr->cap = cap;
    }
    char *copy = nb_strdup(name);
    if (!copy) {
        tr->failed = true;
        return;
    }
    tr->name[tr->n] = copy;
    tr->t[tr->n++] = nb_tensor_retain(t);
}

nb_tensor *nb_eager_find_param(nb_builder *b, const char *name)
{
    eager_state *s = state_of(b);
    nb_tensor *t = nb_strmap_get(&s->params, name, NULL);
    if (t && s->trace) nb_param_trace_add(s->trace, name, t);
    return t;
}

nb_param_trace *nb_eager_trace_params(nb_builder *b, nb_param_trace *trace)
{
    nb_param_trace *was = state_of(b)->trace;
    state_of(b)->trace = trace;
    return was;
}

void nb_param_trace_free(nb_param_trace *tr)
{
    for (int i = 0; i < tr->n; i++) {
        nb_tensor_release(tr->t[i]);
        nb_free(tr->name[i]);
    }
    nb_free(tr->t);
    nb_free(tr->name);
    memset(tr, 0, sizeof *tr);
}

nb_tensor *nb_eager_swap_param(nb_builder *b, const char *name, nb_tensor *t)
{
    eager_state *s = state_of(b);
    int found;
    nb_tensor *old = nb_strmap_get(&s->params, name, &found);
    if (!found || nb_strmap_put(&s->params, name, nb_tensor_retain(t))) {
        nb_tensor_release(t);
        return NULL;
    }
    return old;
}

nb_status nb_eager_names_save(const nb_builder *b, nb_strmap *names)
{
    return nb_strmap_copy(names, &state_of(b)->names) ? nb_error(NB_ERR_NOMEM, "eager: out of memory") : NB_OK;
}

void nb_eager_names_swap(nb_builder *b, nb_strmap *names)
{
    eager_state *s = state_of(b);
    nb_strmap t = s->names;
    s->names = *names;
    *names = t;
}

int nb_eager_values_mark(const nb_builder *b) { return state_of(b)->n_values; }

void nb_eager_release_values_after(nb_builder *b, int mark)
{
    eager_state *s = state_of(b);
    for (int i = mark; i < s->n_values; i++) nb_tensor_release_inline(s->values[i]);
    if (mark < s->n_values) s->n_values = mark;
}
int nb_eager_param_count(const nb_builder *b)
{
    if (!b || b->backend != &eager_backend) {
        nb_error(NB_ERR_ARG, "eager parameters: %s", b ? "the builder is not an eager one" : "the builder is NULL");
        return -1;
    }
    return nb_strmap_size(&state_of(b)->params);
}

static int param_entry(const nb_builder *b, int i)
{
    const nb_strmap *m = &state_of(b)->params;
    for (int e = 0; e < m->n; e++)
        if (m->keys[e] && i-- == 0) return e;
    return -1;
}

const char *nb_eager_param_name(const nb_builder *b, int i)
{
    int e = param_entry(b, i);
    return e >= 0 ? state_of(b)->params.keys[e] : NULL;
}

nb_tensor *nb_eager_param_at(const nb_builder *b, int i)
{
    int e = param_entry(b, i);
    return e >= 0 ? state_of(b)->params.vals[e] : NULL;
}

nb_status nb_eager_add_param(nb_builder *b, const char *name, nb_tensor *t)
{
    eager_state *s = state_of(b);
    if (nb_strmap_get(&s->params, name, NULL))
        return nb_error(NB_ERR_ARG, "eager: a parameter named '%s' exists", name);
    /* An integer tensor (a step counter, a table of ids) is state that no
     * gradient reaches. */
    nb_status st = nb_dtype_is_float(t->dtype) ? nb_tensor_set_requires_grad(t, true) : NB_OK;
    if (st) return st;
    if (nb_strmap_put(&s->params, name, nb_tensor_retain(t))) {
        nb_tensor_release(t);
        return nb_error(NB_ERR_NOMEM, "eager: out of memory");
    }
    if (s->trace) nb_param_trace_add(s->trace, name, t);
    return NB_OK;
}

nb_rng *nb_eager_rng(nb_builder *b) { return &state_of(b)->rng; }
void nb_eager_set_seed(nb_builder *b, uint64_t seed) { nb_rng_seed(&state_of(b)->rng, seed); }
void nb_eager_set_test_mode(nb_builder *b, bool is_test) { state_of(b)->is_test = is_test; }

nb_status nb_eager_inplace(nb_builder *b, const char *type, nb_values values, nb_attrs as, int target)
{
    int n_in = values.n, n_attrs = as.n;
    const nb_value *in = values.v;
    const nb_attr *attrs = as.v;
    if (!b || b->backend != &eager_backend) return nb_error(NB_ERR_ARG, "inplace %s: needs an eager builder", type);
    if (target < 0 || target >= n_in || !in[target].p)
        return nb_error(NB_ERR_ARG, "inplace %s: target %d is not one of its %d inputs", type, target, n_in);
    nb_tensor *t = in[target].p;
    if (nb_grad_mode_enabled() && nb_tensor_requires_grad(t))
        return nb_error(NB_ERR_STATE,
                        "inplace %s: the tensor requires grad; in-place ops on it are allowed only in "
                        "no-grad mode (nb_grad_mode_push(false))",
                        type);
    if (n_in > MAX_ARGS) return nb_error(NB_ERR_ARG, "inplace %s: too many inputs", type);
    nb_tensor *ins[MAX_ARGS], *outs[1] = {t};
    for (int i = 0; i < n_in; i++) ins[i] = in[i].p;
    nb_status st = nb_op_run_rng(type, n_in, ins, n_attrs, attrs, 1, outs, &state_of(b)->rng);
    if (!st) {
        t->storage->version++;
        t->storage->last_writer = nb_op_find(type)->name;
    }
    return st;
}

#define MAX_SETS 4096

/* n sibling levels of the builder's own in front of the chain it carried:
 * the ops their JVP rules emit carry that outer chain (forward over
 * forward), not each other. */
nb_status nb_eager_forward_mode_sets(nb_builder *b, int n)
{
    if (!b || !nb_builder_is_eager(b)) return nb_error(NB_ERR_ARG, "forward mode: needs an eager builder");
    if (n < 1 || n > MAX_SETS)
        return nb_error(NB_ERR_ARG, "forward mode: %d tangent sets; 1..%d are allowed", n, MAX_SETS);
    eager_state *s = state_of(b);
    if (s->n_own)
        return s->n_own == n
            ? NB_OK
            : nb_error(NB_ERR_STATE, "forward mode: the builder has %d tangent sets already, not %d", s->n_own, n);
    nb_tangents *outer = s->level, *chain = nb_tangents_retain(outer);
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++) {
        nb_tangents *l;
        if ((st = nb_tangents_new(&l, chain, i))) break;
        nb_tangents_release(chain); /* l holds it */
        chain = l;
        st = new_eager_at(&l->rules, outer);
    }
    if (st) {
        nb_tangents_release(chain);
        return st;
    }
    nb_tangents_release(s->level);
    s->level = chain;
    s->n_own = n;
    return NB_OK;
}

nb_status nb_eager_forward_mode(nb_builder *b) { return nb_eager_forward_mode_sets(b, 1); }

nb_status nb_eager_forward_push(nb_builder *b)
{
    if (!b || !nb_builder_is_eager(b) || !state_of(b)->level)
        return nb_error(NB_ERR_STATE, "forward_push: the builder is not in forward mode (nb_eager_forward_mode)");
    return nb_tangents_push(state_of(b)->level);
}

void nb_eager_forward_pop(void) { nb_tangents_pop(); }

nb_status nb_eager_set_tangent(nb_builder *b, nb_tensor *t, nb_tensor *tangent)
{
    return nb_eager_set_tangent_in(b, 0, t, tangent);
}

nb_status nb_eager_set_tangent_in(nb_builder *b, int set, nb_tensor *t, nb_tensor *tangent)
{
    nb_tangents *l = nb_tangents_set_of(state_of(b)->level, set);
    if (!l && set == 0) return nb_error(NB_ERR_STATE, "set_tangent: the builder is not in forward mode");
    if (!l) return nb_error(NB_ERR_ARG, "set_tangent: the builder has no tangent set %d", set);
    if (!t || !tangent) return nb_error(NB_ERR_ARG, "set_tangent: the tensor or its tangent is NULL");
    if (!nb_shape_equal(t->ndim, t->shape, tangent->ndim, tangent->shape) || t->dtype != tangent->dtype) {
        char a[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "set_tangent: the tangent is %s %s but the value %s %s",
                        nb_dtype_name(tangent->dtype), nb_shape_str(a, sizeof a, tangent->ndim, tangent->shape),
                        nb_dtype_name(t->dtype), nb_shape_str(c, sizeof c, t->ndim, t->shape));
    }
    return nb_tangents_set(l, t, tangent);
}

nb_tensor *nb_eager_tangent(nb_builder *b, nb_value v) { return nb_eager_tangent_in(b, 0, v); }

nb_tensor *nb_eager_tangent_in(nb_builder *b, int set, nb_value v)
{
    return nb_tangents_get(nb_tangents_set_of(state_of(b)->level, set), v.p);
}

nb_status nb_eager_alias_tangent(nb_builder *b, nb_tensor *t, nb_tensor *alias)
{
    nb_status st = NB_OK;
    for (nb_tangents *l = state_of(b)->level; l && !st; l = l->next) {
        nb_tensor *tan = nb_tangents_get(l, t);
        if (tan) st = nb_tangents_set(l, alias, tan);
    }
    return st;
}
