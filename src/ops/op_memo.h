/* What running an op last worked out, kept for its next run.
 *
 * An eager program runs the same few ops on inputs of the same shapes over
 * and over. Between the op's name and its kernel, each run maps its values
 * onto the slots and runs shape inference, and both depend on nothing but
 * the def, the attributes and the inputs' dtypes and shapes. A memo keeps,
 * per op, the signature of its last plain run (every slot filled in order,
 * no attributes given) and the output infos inference made of it; the next
 * run with that signature takes them instead of working them out again,
 * and the kernel chosen for them when no kernel's `accepts` had a say.
 *
 * Inference reads nothing else (nb_op_ctx has no tensors and no state), so
 * a hit gives exactly what inference would; the kernel stands while no
 * kernel is registered (nb_kernel_generation). A miss costs the comparison. */
#ifndef NABLA_OP_MEMO_H
#define NABLA_OP_MEMO_H

#include <stdint.h>
#include <string.h>
#include "nabla/kernel.h"
#include "nabla/op.h"
#include "nabla/tensor.h"

enum { NB_MEMO_SETS = 16, NB_MEMO_IN = 4, NB_MEMO_OUT = 2 };

typedef struct nb_op_memo_entry {
    const nb_op_def *def;         /* NULL: empty */
    uint8_t n_in, n_out, n_attrs; /* n_attrs: the def's, whose defaults a plain call takes */
    int8_t in_ndim[NB_MEMO_IN];
    uint8_t in_dtype[NB_MEMO_IN];
    int64_t in_shape[NB_MEMO_IN][NB_MAX_DIMS];
    nb_var_info out[NB_MEMO_OUT];
    const nb_kernel_def *kernel; /* NULL: ask the registry */
    unsigned kernel_generation;
} nb_op_memo_entry;

/* Entries for a few dozen ops: a set of two per hash of the def's address,
 * so that two ops of a model that land in one set take turns without
 * evicting each other (direct-mapped, they did on every call). */
typedef struct nb_op_memo {
    nb_op_memo_entry e[NB_MEMO_SETS][2];
} nb_op_memo;

static inline nb_op_memo_entry *nb_op_memo_set(nb_op_memo *m, const nb_op_def *def)
{
    _Static_assert(NB_MEMO_SETS == 16, "the hash keeps 4 bits");
    return m->e[(uint64_t)(uintptr_t)def * 0x9E3779B97F4A7C15u >> 60];
}

/* def's entry, or NULL. */
static inline nb_op_memo_entry *nb_op_memo_find(nb_op_memo *m, const nb_op_def *def)
{
    nb_op_memo_entry *set = nb_op_memo_set(m, def);
    return set[0].def == def ? &set[0] : set[1].def == def ? &set[1] : NULL;
}

/* An entry to note a plain call of def in: its own, or the set's first,
 * whose last op moves to the second (and the second's goes). */
static inline nb_op_memo_entry *nb_op_memo_claim(nb_op_memo *m, const nb_op_def *def)
{
    nb_op_memo_entry *set = nb_op_memo_set(m, def), *own = nb_op_memo_find(m, def);
    if (own) return own;
    set[1] = set[0];
    set[0].def = NULL;
    return &set[0];
}

/* Whether a run of def on these n_in inputs and n_out outputs (all given, no
 * attributes) can be memoised at all. */
static inline bool nb_op_memo_fits(int n_in, int n_out)
{
    return n_in <= NB_MEMO_IN && n_out <= NB_MEMO_OUT && n_out > 0;
}

/* Whether the run that left *e had this one's signature. */
static inline bool nb_op_memo_hit(const nb_op_memo_entry *e, const nb_op_def *def, int n_in, nb_tensor *const *in,
                                  int n_out)
{
    if (e->def != def || e->n_in != n_in || e->n_out != n_out) return false;
    for (int i = 0; i < n_in; i++) {
        const nb_tensor *t = in[i];
        if (!t || t->ndim != e->in_ndim[i] || t->dtype != e->in_dtype[i]) return false;
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] != e->in_shape[i][d]) return false;
    }
    return true;
}

/* Notes a run whose slots were filled in order and whose inference gave
 * out[0..n_out). */
static inline void nb_op_memo_put(nb_op_memo_entry *e, const nb_op_def *def, int n_in, nb_tensor *const *in, int n_out,
                                  const nb_var_info *out)
{
    int n_attrs = 0;
    while (n_attrs < NB_MAX_ATTRS && def->attrs[n_attrs].name) n_attrs++;
    e->def = def;
    e->n_in = (uint8_t)n_in;
    e->n_out = (uint8_t)n_out;
    e->n_attrs = (uint8_t)n_attrs;
    e->kernel = NULL;
    for (int i = 0; i < n_in; i++) {
        e->in_ndim[i] = (int8_t)in[i]->ndim;
        e->in_dtype[i] = (uint8_t)in[i]->dtype;
        memcpy(e->in_shape[i], in[i]->shape, (size_t)in[i]->ndim * sizeof(int64_t));
    }
    memcpy(e->out, out, (size_t)n_out * sizeof *out);
}

#endif
