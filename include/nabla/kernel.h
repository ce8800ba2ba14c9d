/* nabla/kernel.h: kernels, registered per (op, device, dtype).
 *
 * An op's definition (nabla/op.h) says what the op is; a kernel computes it
 * on one device for some dtypes. Kernels are registered apart from ops, so a
 * second provider (a BLAS, oneDNN, a GPU backend) adds variants of its own
 * and touches no op definition. Among the kernels registered for an op, a
 * device and the dtype of the op's first input (of its first output, for an
 * op without inputs), the one of highest priority whose `accepts` takes the
 * instance runs. The executor picks it when it prepares an op (again only if
 * the shapes change); the eager backend picks it per call.
 *
 * A kernel never sees attributes: it reads the op's parameter struct, which
 * the op's `params` function fills from the attributes once, when a program
 * is prepared (nb_op_def.params_size and .params). Its inputs are
 * contiguous; its outputs arrive allocated, contiguous and shaped as the
 * op's inference said (control-flow ops bind theirs). They arrive
 * zero-filled only for ops without NB_OP_WRITES_ALL and NB_OP_INPLACE
 * (nabla/op.h): those kernels promise to write every element, so the
 * executor and nb_op_run skip the fill and the outputs hold whatever the
 * memory held (NABLA_POISON=1 fills fresh ones with NaN bytes, so that a
 * skipped element shows). An output may be the very tensor of an input (in-place ops), so a
 * kernel reads an element before it writes it. Kernels run with subnormal numbers
 * flushed to zero, results and operands alike (nabla/device.h). */
#ifndef NABLA_KERNEL_H
#define NABLA_KERNEL_H

#include "nabla/export.h"

#include "nabla/device.h"
#include "nabla/rng.h"
#include "nabla/tensor.h"

NB_BEGIN_DECLS

#ifndef NB_MAX_SLOTS
#define NB_MAX_SLOTS 8
#endif

struct nb_exec_env;

/* What a kernel sees. Slot k's values are [in_begin[k], in_begin[k+1]). */
typedef struct nb_kernel_ctx {
    const void *params; /* the op's parameter struct (NULL if it has none) */
    const char *label;  /* names the op in errors, e.g. "matmul (fc_0.tmp_0)" */
    int in_begin[NB_MAX_SLOTS + 1];
    int out_begin[NB_MAX_SLOTS + 1];
    nb_tensor *const *in;
    nb_tensor *const *out;
    nb_rng *rng;              /* for ops flagged NB_OP_RANDOM */
    struct nb_exec_env *exec; /* control-flow kernels: the executor running them */
} nb_kernel_ctx;

static inline int nb_kin_count(const nb_kernel_ctx *k, int slot) { return k->in_begin[slot + 1] - k->in_begin[slot]; }
static inline int nb_kout_count(const nb_kernel_ctx *k, int slot)
{
    return k->out_begin[slot + 1] - k->out_begin[slot];
}
static inline bool nb_khas_in(const nb_kernel_ctx *k, int slot) { return nb_kin_count(k, slot) > 0; }
static inline nb_tensor *nb_kin(const nb_kernel_ctx *k, int slot, int i) { return k->in[k->in_begin[slot] + i]; }
static inline nb_tensor *nb_kout(const nb_kernel_ctx *k, int slot, int i) { return k->out[k->out_begin[slot] + i]; }

typedef nb_status (*nb_kernel_fn)(const nb_kernel_ctx *k);

/* An elementwise kernel's inner loop over n elements: ptr[k] is operand k's
 * first element (the inputs in slot order, then the output), stride[k] its
 * step in elements (1, or 0 for an input of one element repeated); aux is
 * what nb_kernel_def.pointwise gave. It reads each element before it writes
 * the element of the same index, so an output may be an input. */
typedef void (*nb_pointwise_loop)(int64_t n, char *const ptr[], const int64_t stride[], const void *aux);

typedef struct nb_pointwise {
    nb_pointwise_loop loop;
    const void *aux; /* the kernel's own data for the loop, often the op's parameter struct */
    bool math;       /* many cycles per element (exp, erf, a division): threads pay off sooner */
} nb_pointwise;

/* The dtypes a kernel takes, as a bit set. */
#define NB_DT(dt) (1u << (dt))
#define NB_DT_FLOAT (NB_DT(NB_F32) | NB_DT(NB_F64))
#define NB_DT_INT (NB_DT(NB_I32) | NB_DT(NB_I64))
#define NB_DT_NUMERIC (NB_DT_FLOAT | NB_DT_INT)
#define NB_DT_ALL ((1u << NB_DTYPE_COUNT) - 1)

typedef struct nb_kernel_def {
    const char *op; /* the op it computes */
    nb_device device;
    unsigned dtypes;      /* NB_DT_... bits: the dtypes it takes */
    const char *provider; /* "nabla" (its own kernels), "onednn", ...: for `nabla ops --kernels` */
    int priority;         /* the highest that accepts runs; nabla's own kernels are 0 */
    nb_kernel_fn run;
    /* NULL, or whether this variant takes this instance (it may look at the
     * inputs' shapes and at the parameters; outputs are not bound yet). */
    bool (*accepts)(const nb_kernel_ctx *k);
    /* NULL, or for an op whose one output's element i depends only on
     * element i of each input: fills `f` with the loop for dtype `dt` and
     * the op's parameter struct `params`, or returns false where this
     * instance cannot run that way. The executor then may run a chain of
     * such ops together over slices that stay in cache (NABLA_FUSE=0 turns
     * that off; src/exec/fuse.c). */
    bool (*pointwise)(const void *params, nb_dtype dt, nb_pointwise *f);
} nb_kernel_def;

/* Adds a kernel. `k` must stay valid for the life of the process; the op
 * need not be registered yet. NB_ERR_ARG if it is malformed. */
NB_API nb_status nb_kernel_register(const nb_kernel_def *k);

/* The kernel that runs op `op` on `device` for dtype `dt` and the instance
 * `k` (NULL: ignore `accepts`), or NULL, with an error naming the op, the
 * device and the dtype. */
NB_API const nb_kernel_def *nb_kernel_find(const char *op, nb_device device, nb_dtype dt, const nb_kernel_ctx *k);

/* The kernels registered for `op` on `device`, best first: the i-th, or
 * NULL past the last. */
NB_API const nb_kernel_def *nb_kernel_at(const char *op, nb_device device, int i);

NB_END_DECLS

#endif
