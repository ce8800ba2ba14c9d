/* The kernel registry: for each op name and device, the kernels registered,
 * best first. nabla's own CPU kernels come from the tables of
 * kernels/cpu/; users and other providers add theirs with
 * nb_kernel_register. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include "nabla/device.h"
#include "nabla/kernel.h"
#include "kernels.h"
#include "../core/strmap.h"

#define MAX_VARIANTS 8 /* per op and device */

typedef struct kernel_list {
    const nb_kernel_def *k[NB_DEVICE_COUNT][MAX_VARIANTS];
    int n[NB_DEVICE_COUNT];
} kernel_list;

static const nb_kernel_def *const *const builtin[] = {
    nb_cpu_kernels_elementwise, nb_cpu_kernels_compare,    nb_cpu_kernels_reduce,    nb_cpu_kernels_scan,
    nb_cpu_kernels_linalg,      nb_cpu_kernels_shape,      nb_cpu_kernels_nn,        nb_cpu_kernels_conv,
    nb_cpu_kernels_norm,        nb_cpu_kernels_rnn,        nb_cpu_kernels_attention, nb_cpu_kernels_creation,
    nb_cpu_kernels_optimizer,   nb_cpu_kernels_collective,
};

static nb_strmap lists; /* op name -> kernel_list */
static atomic_bool ready;
static atomic_uint generation; /* kernels registered so far: a memo's choice stands while it holds */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static nb_status check(const nb_kernel_def *k)
{
    if (!k || !k->op || !*k->op) return nb_error(NB_ERR_ARG, "register kernel: no op name");
    if (!k->run) return nb_error(NB_ERR_ARG, "register kernel for %s: no run function", k->op);
    if ((unsigned)k->device >= NB_DEVICE_COUNT)
        return nb_error(NB_ERR_ARG, "register kernel for %s: device %d is not a device", k->op, (int)k->device);
    if (!k->dtypes || (k->dtypes & ~(unsigned)NB_DT_ALL))
        return nb_error(NB_ERR_ARG, "register kernel for %s: dtype set 0x%x names no dtype or an unknown one", k->op,
                        k->dtypes);
    return NB_OK;
}

/* Inserts k after the kernels of its priority or higher. */
static nb_status add(const nb_kernel_def *k)
{
    nb_status st = check(k);
    if (st) return st;
    kernel_list *l = nb_strmap_get(&lists, k->op, NULL);
    if (!l) {
        if (!(l = nb_calloc(1, sizeof *l)))
            return nb_error(NB_ERR_NOMEM, "register kernel for %s: out of memory", k->op);
        if (nb_strmap_put(&lists, k->op, l)) {
            nb_free(l);
            return nb_error(NB_ERR_NOMEM, "register kernel for %s: out of memory", k->op);
        }
    }
    int d = k->device, n = l->n[d];
    if (n == MAX_VARIANTS)
        return nb_error(NB_ERR_ARG, "register kernel for %s: %d kernels on %s already", k->op, n,
                        nb_device_name(k->device));
    int at = n;
    while (at > 0 && l->k[d][at - 1]->priority < k->priority) at--;
    memmove(&l->k[d][at + 1], &l->k[d][at], (size_t)(n - at) * sizeof l->k[d][0]);
    l->k[d][at] = k;
    l->n[d] = n + 1;
    atomic_fetch_add_explicit(&generation, 1, memory_order_release);
    return NB_OK;
}

static void free_lists(void)
{
    for (int i = 0; i < lists.n; i++)
        if (lists.keys[i]) nb_free(lists.vals[i]);
    nb_strmap_free(&lists);
}

/* True once the built-in kernels are in; false (with an error set) if
 * building the registry ran out of memory this time, in which case the next
 * call tries again rather than leaving the process without kernels. */
static bool ensure_built(void)
{
    if (atomic_load_explicit(&ready, memory_order_acquire)) return true;
    pthread_mutex_lock(&lock);
    nb_status st = NB_OK;
    if (!atomic_load_explicit(&ready, memory_order_relaxed)) {
        nb_strmap_init(&lists);
        for (size_t t = 0; t < sizeof builtin / sizeof *builtin && !st; t++)
            for (const nb_kernel_def *const *k = builtin[t]; *k && !st; k++) st = add(*k);
        if (st) free_lists();
        else atomic_store_explicit(&ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&lock);
    if (!st) return true;
    nb_error(st, "kernels: the registry could not be built (out of memory)");
    return false;
}

nb_status nb_kernel_register(const nb_kernel_def *k)
{
    if (!ensure_built()) return NB_ERR_NOMEM;
    pthread_mutex_lock(&lock);
    nb_status st = add(k);
    pthread_mutex_unlock(&lock);
    return st;
}

/* Ops are looked up by the address of their name (an op's definition keeps
 * it for the life of the process), so a thread's recent ops cost one
 * comparison rather than a hash of the string. */
static const kernel_list *list_of(const char *op)
{
    static _Thread_local struct {
        const char *name;
        const kernel_list *l;
    } cache[64];
    size_t h = ((uintptr_t)op >> 4) & 63;
    if (cache[h].name == op && cache[h].l) return cache[h].l;
    const kernel_list *l = nb_strmap_get(&lists, op, NULL);
    cache[h].name = op;
    cache[h].l = l;
    return l;
}

const nb_kernel_def *nb_kernel_at(const char *op, nb_device device, int i)
{
    if (!ensure_built() || !op || (unsigned)device >= NB_DEVICE_COUNT) return NULL;
    const kernel_list *l = list_of(op);
    return l && i >= 0 && i < l->n[device] ? l->k[device][i] : NULL;
}

unsigned nb_kernel_generation(void) { return atomic_load_explicit(&generation, memory_order_acquire); }

bool nb_kernel_choice_is_fixed(const char *op, nb_device device, const nb_kernel_def *chosen)
{
    if (!ensure_built() || (unsigned)device >= NB_DEVICE_COUNT) return false;
    const kernel_list *l = list_of(op);
    for (int i = 0; l && i < l->n[device]; i++) {
        if (l->k[device][i]->accepts) return false;
        if (l->k[device][i] == chosen) return true;
    }
    return false;
}

const nb_kernel_def *nb_kernel_find(const char *op, nb_device device, nb_dtype dt, const nb_kernel_ctx *k)
{
    if (!ensure_built()) return NULL;
    if (!op || (unsigned)device >= NB_DEVICE_COUNT || !nb_dtype_valid((int)dt)) {
        nb_error(NB_ERR_ARG, "kernel for %s: bad device or dtype", op ? op : "(null)");
        return NULL;
    }
    const kernel_list *l = list_of(op);
    int n = l ? l->n[device] : 0;
    for (int i = 0; i < n; i++) {
        const nb_kernel_def *c = l->k[device][i];
        if ((c->dtypes & NB_DT(dt)) && (!k || !c->accepts || c->accepts(k))) return c;
    }
    char have[256] = "";
    size_t u = 0;
    for (int t = 0; t < NB_DTYPE_COUNT && u < sizeof have; t++)
        for (int i = 0; i < n; i++)
            if (l->k[device][i]->dtypes & NB_DT(t)) {
                u += (size_t)snprintf(have + u, sizeof have - u, "%s%s", u ? ", " : "", nb_dtype_name((nb_dtype)t));
                break;
            }
    nb_error(NB_ERR_UNSUPPORTED, "%s: no %s kernel takes %s%s%s%s", op, nb_device_name(device), nb_dtype_name(dt),
             n ? " (it has kernels for " : "", have, n ? ")" : "");
    return NULL;
}
