/* Private machinery shared by the registry, programs, builders and the executor. */
#ifndef NABLA_OP_INTERNAL_H
#define NABLA_OP_INTERNAL_H

#include "nabla/op.h"

/* Fills `out` with the def's defaults, then the given attrs, checking names
 * and types. Values are shallow: they point into `attrs` and the def. */
nb_status nb_resolve_attrs(const nb_op_def *def, int n, const nb_attr *attrs, nb_attr_value out[NB_MAX_ATTRS],
                           const char *label);

/* Maps a flat list of n values onto the def's input (or output) slots.
 * present[i] says whether value i is given (an absent optional slot is not).
 * Writes the compacted slot ranges to begin[] (only present values count)
 * and, for each compacted position, the index of its value in `order`
 * (which must hold n entries). */
nb_status nb_assign_slots(const nb_op_def *def, bool inputs, int n, const bool *present, int begin[NB_MAX_SLOTS + 1],
                          int *order, const char *label);

/* Maps n_in tensors (NULL where absent) onto def's input slots and n_out
 * outputs onto its output slots: in_begin and out_begin as nb_assign_slots
 * gives them, compact[k] the input at compacted position k. The scratch
 * arrays hold at least max(n_in, n_out) entries. Inline: it is on every
 * eager op's path, where a call cost 28 instructions more. */
typedef struct nb_slot_scratch {
    bool *present;
    int *order;
} nb_slot_scratch;
static inline nb_status nb_map_slots(const nb_op_def *def, int n_in, nb_tensor *const *in, int n_out,
                                     nb_slot_scratch scratch, nb_tensor **compact, int in_begin[NB_MAX_SLOTS + 1],
                                     int out_begin[NB_MAX_SLOTS + 1])
{
    bool *present = scratch.present;
    int *order = scratch.order;
    for (int i = 0; i < n_in; i++) present[i] = in[i] != NULL;
    nb_status st = nb_assign_slots(def, true, n_in, present, in_begin, order, def->name);
    if (st) return st;
    for (int i = 0; i < in_begin[NB_MAX_SLOTS]; i++) compact[i] = in[order[i]];
    for (int i = 0; i < n_out; i++) present[i] = true;
    return nb_assign_slots(def, false, n_out, present, out_begin, order, def->name);
}

/* t's dtype and shape as a var info. Spelled element by element: built with
 * a memcpy into a returned struct, GCC assembled it on the stack with loads
 * that straddle its own stores, which stall (5% of an eager step's time in
 * the builder's info query). */
static inline nb_var_info nb_tensor_info(const nb_tensor *t)
{
    _Static_assert(NB_MAX_DIMS == 8, "nb_tensor_info lists the dims");
    const int64_t *s = t->shape;
    return (nb_var_info){.dtype = t->dtype, .ndim = t->ndim, .shape = {s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]}};
}

/* Runs `infer` and checks what it produced (valid dtypes, ranks). */
nb_status nb_run_infer(nb_op_ctx *ctx);

/* nb_op_run with the random generator `rng` (NULL: one seeded from the
 * op's "seed" attribute), as the eager backend runs ops. */
nb_status nb_op_run_rng(const char *type, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs, int n_out,
                        nb_tensor **out, nb_rng *rng);
/* The same for a definition already found (the eager builder has it). */
nb_status nb_op_run_def(const nb_op_def *def, int n_in, nb_tensor *const *in, int n_attrs, const nb_attr *attrs,
                        int n_out, nb_tensor **out, nb_rng *rng);
/* The same after its first two steps: attributes resolved (av), inputs
 * mapped onto their slots and outputs assigned, for a caller that needs those
 * too (the eager builder records them in the op's node). `memo` (NULL:
 * none) is the op's entry in a memo (op_memo.h) for a plain call: with
 * `hit`, its output infos and kernel are taken; without, this run's are
 * noted in it. */
struct nb_op_memo_entry;
/* Tensors on an op's slots: v[begin[s]] to v[begin[s + 1] - 1] are slot
 * s's (present values only, in slot order), n in all. */
typedef struct nb_slotted {
    const int *begin; /* NB_MAX_SLOTS + 1 entries */
    int n;
    nb_tensor **v;
} nb_slotted;
nb_status nb_op_run_slots(const nb_op_def *def, const nb_attr_value *av, const nb_slotted *in, const nb_slotted *out,
                          nb_rng *rng, struct nb_op_memo_entry *memo, bool hit);

/* A backend's emit of a composite op (def->expand set): its expansion on b,
 * whose outputs go to out (n_out < 0: one per output slot). An error in the
 * expansion comes back naming the op. */
struct nb_builder;
struct nb_value;
nb_status nb_op_expand(struct nb_builder *b, const nb_op_def *def, int n_in, const struct nb_value *in, int n_attrs,
                       const nb_attr *attrs, int n_out, struct nb_value *out);

/* How many outputs a builder gives an op when the caller did not say (n_out
 * < 0 in a backend's emit): one per declared output slot, at least one. */
int nb_op_default_outputs(const nb_op_def *def);

/* "name(X, Y) -> (Out)": a def's slots, for messages and `nabla ops`. */
char *nb_op_signature(const nb_op_def *def, char *buf, size_t size);

#endif
