/* The op registry: the built-in families plus ops that users register. It is
 * built on first use, and sorted by name. A build that runs out of memory is
 * undone and tried again by the next call, so that one failed allocation at
 * start-up never loses an op for the life of the process. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "families.h"
#include "op_internal.h"
#include "../core/strmap.h"

static const nb_op_def *const *const families[] = {
    nb_ops_elementwise, nb_ops_compare,  nb_ops_reduce,    nb_ops_scan,       nb_ops_linalg,
    nb_ops_shape,       nb_ops_nn,       nb_ops_conv,      nb_ops_norm,       nb_ops_rnn,
    nb_ops_attention,   nb_ops_creation, nb_ops_optimizer, nb_ops_collective, nb_ops_composite,
};

static struct {
    nb_strmap by_name;
    const nb_op_def **sorted;
    int n, cap;
} reg;

static atomic_bool ready;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int by_name_cmp(const void *a, const void *b)
{
    return strcmp((*(const nb_op_def *const *)a)->name, (*(const nb_op_def *const *)b)->name);
}

static nb_status add(const nb_op_def *def)
{
    if (reg.n == reg.cap) {
        int cap = reg.cap ? 2 * reg.cap : 256;
        const nb_op_def **s = nb_realloc(reg.sorted, (size_t)cap * sizeof *s);
        if (!s) return NB_ERR_NOMEM;
        reg.sorted = s;
        reg.cap = cap;
    }
    if (nb_strmap_put(&reg.by_name, def->name, (void *)def)) return NB_ERR_NOMEM;
    reg.sorted[reg.n++] = def;
    return NB_OK;
}

/* True once the built-in ops are in; false (with an error set) if building
 * the registry ran out of memory this time. */
static bool ensure_built(void)
{
    if (atomic_load_explicit(&ready, memory_order_acquire)) return true;
    pthread_mutex_lock(&lock);
    if (!atomic_load_explicit(&ready, memory_order_relaxed)) {
        nb_strmap_init(&reg.by_name);
        nb_status st = NB_OK;
        for (size_t f = 0; f < sizeof families / sizeof *families && !st; f++)
            for (const nb_op_def *const *d = families[f]; *d && !st; d++) st = add(*d);
        if (st) {
            nb_strmap_free(&reg.by_name);
            nb_free(reg.sorted);
            memset(&reg, 0, sizeof reg);
        } else {
            qsort(reg.sorted, (size_t)reg.n, sizeof *reg.sorted, by_name_cmp);
            atomic_store_explicit(&ready, true, memory_order_release);
        }
    }
    pthread_mutex_unlock(&lock);
    if (atomic_load_explicit(&ready, memory_order_acquire)) return true;
    nb_error(NB_ERR_NOMEM, "ops: out of memory building the op registry");
    return false;
}

/* The last definitions found, by the address of the name asked for: an
 * eager program asks for the same few op names, string literals, op after
 * op, and hashing one cost more than running a one-element op's kernel. The
 * name is compared too, as a caller's buffer may hold another name at the
 * same address next time. Definitions are never removed, so an entry never
 * dangles. */
enum { FIND_CACHE = 64 };
static _Thread_local struct {
    const char *key;
    const nb_op_def *def;
} find_cache[FIND_CACHE];

const nb_op_def *nb_op_find(const char *name)
{
    if (!name) return NULL;
    size_t h = ((uintptr_t)name >> 3) % FIND_CACHE;
    /* The name may sit in a buffer the caller reuses, so a hit compares the
     * text, unless it is the def's own (string literals are often merged). */
    if (find_cache[h].key == name && (find_cache[h].def->name == name || !strcmp(find_cache[h].def->name, name)))
        return find_cache[h].def;
    if (!ensure_built()) return NULL;
    const nb_op_def *def = nb_strmap_get(&reg.by_name, name, NULL);
    if (def && !strcmp(def->name, name)) find_cache[h].key = name, find_cache[h].def = def;
    return def;
}

int nb_op_count(void)
{
    if (!ensure_built()) return 0;
    return reg.n;
}

const nb_op_def *nb_op_at(int i)
{
    if (!ensure_built()) return NULL;
    return i >= 0 && i < reg.n ? reg.sorted[i] : NULL;
}

static nb_status check_def(const nb_op_def *def)
{
    if (!def || !def->name || !*def->name) return nb_error(NB_ERR_ARG, "register: op has no name");
    if (def->expand &&
        (def->infer || def->params_size || def->params || def->vjp || def->jvp || def->batch || def->grad_uses_inputs ||
         def->grad_uses_outputs || (def->flags & (NB_OP_CONTROL | NB_OP_VIEW))))
        return nb_error(NB_ERR_ARG,
                        "register %s: a composite op (expand) takes everything else from the ops it "
                        "expands into: no infer, params, rules, batch, grad_uses or control/view flags of its own",
                        def->name);
    if (!def->infer && !def->expand) return nb_error(NB_ERR_ARG, "register %s: no infer function", def->name);
    if (def->params_size > NB_MAX_PARAMS_SIZE || (def->params_size && !def->params))
        return nb_error(NB_ERR_ARG, "register %s: params_size %zu needs a params function and at most %d bytes",
                        def->name, def->params_size, NB_MAX_PARAMS_SIZE);
    for (int side = 0; side < 2; side++) {
        const nb_slot_def *slots = side ? def->outputs : def->inputs;
        int variadic = 0;
        for (int i = 0; i < NB_MAX_SLOTS && slots[i].name; i++) variadic += (slots[i].flags & NB_SLOT_VARIADIC) != 0;
        if (variadic && def->expand)
            return nb_error(NB_ERR_ARG, "register %s: a composite op has no variadic slot", def->name);
        if (variadic > 1)
            return nb_error(NB_ERR_ARG, "register %s: more than one variadic %s slot", def->name,
                            side ? "output" : "input");
    }
    for (int i = 0; i < NB_MAX_ATTRS && def->attrs[i].name; i++)
        if (!def->attrs[i].required && def->attrs[i].def.type != def->attrs[i].type)
            return nb_error(NB_ERR_ARG, "register %s: default of attribute '%s' has the wrong type", def->name,
                            def->attrs[i].name);
    return NB_OK;
}

nb_status nb_op_register(const nb_op_def *def)
{
    if (!ensure_built()) return NB_ERR_NOMEM;
    nb_status st = check_def(def);
    if (st) return st;
    pthread_mutex_lock(&lock);
    if (nb_strmap_get(&reg.by_name, def->name, NULL)) {
        pthread_mutex_unlock(&lock);
        return nb_error(NB_ERR_ARG, "register: an op named '%s' already exists", def->name);
    }
    st = add(def);
    if (!st) {
        /* Keep the list sorted: move the new entry down into place. */
        for (int i = reg.n - 1; i > 0 && strcmp(reg.sorted[i - 1]->name, def->name) > 0; i--) {
            const nb_op_def *t = reg.sorted[i];
            reg.sorted[i] = reg.sorted[i - 1];
            reg.sorted[i - 1] = t;
        }
    }
    pthread_mutex_unlock(&lock);
    return st ? nb_error(st, "register %s: out of memory", def->name) : NB_OK;
}

static int slot_index(const nb_slot_def *slots, const char *name)
{
    for (int i = 0; i < NB_MAX_SLOTS && slots[i].name; i++)
        if (!strcmp(slots[i].name, name)) return i;
    return -1;
}

int nb_op_input_index(const nb_op_def *def, const char *slot) { return slot_index(def->inputs, slot); }
int nb_op_output_index(const nb_op_def *def, const char *slot) { return slot_index(def->outputs, slot); }

int nb_op_attr_index(const nb_op_def *def, const char *attr)
{
    for (int i = 0; i < NB_MAX_ATTRS && def->attrs[i].name; i++)
        if (!strcmp(def->attrs[i].name, attr)) return i;
    return -1;
}

static int count_slots(const nb_slot_def *slots)
{
    int n = 0;
    while (n < NB_MAX_SLOTS && slots[n].name) n++;
    return n;
}

int nb_op_num_inputs(const nb_op_def *def) { return count_slots(def->inputs); }
int nb_op_num_outputs(const nb_op_def *def) { return count_slots(def->outputs); }

int nb_op_default_outputs(const nb_op_def *def)
{
    int n = nb_op_num_outputs(def);
    return n < 1 ? 1 : n;
}

char *nb_op_signature(const nb_op_def *def, char *buf, size_t size)
{
    size_t u = (size_t)snprintf(buf, size, "%s(", def->name);
    for (int side = 0; side < 2; side++) {
        const nb_slot_def *s = side ? def->outputs : def->inputs;
        for (int i = 0; i < NB_MAX_SLOTS && s[i].name && u < size; i++)
            u += (size_t)snprintf(buf + u, size - u, "%s%s%s%s", i ? ", " : "", s[i].name,
                                  s[i].flags & NB_SLOT_VARIADIC ? "..." : "", s[i].flags & NB_SLOT_OPTIONAL ? "?" : "");
        if (!side && u < size) u += (size_t)snprintf(buf + u, size - u, ") -> (");
    }
    if (u < size) snprintf(buf + u, size - u, ")");
    return buf;
}
