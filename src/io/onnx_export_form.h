/* What the files that turn nabla ops into ONNX nodes share
 * (onnx_export_ops.c and onnx_export_<family>.c): the op's names, node
 * making, and the error naming the op. Included only where NABLA_HAVE_ONNX
 * is defined. */
#ifndef NABLA_IO_ONNX_EXPORT_FORM_H
#define NABLA_IO_ONNX_EXPORT_FORM_H

#include "onnx_internal.h"

#define IN(k) nb_op_in_name(op, (k), 0)
#define OUT(k) nb_op_out_name(op, (k), 0)
#define HAS_IN(k) (nb_op_in_count(op, (k)) > 0)
#define NODE(type, out, ...)                                                                \
    ox_node(e, (type), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
            (const char *[]){__VA_ARGS__}, (out))

static inline nb_status unsupported(const nb_op *op, const char *why)
{
    char label[256];
    return nb_error(NB_ERR_UNSUPPORTED, "onnx export: %s %s", nb_op_label(op, label, sizeof label), why);
}

static inline const nb_var *var(ox_export *e, const char *name) { return nb_block_find_var(e->blk, name); }

static inline int rank_of(ox_export *e, const char *name)
{
    const nb_var *v = var(e, name);
    return v ? v->ndim : -1;
}

static inline nb_dtype dtype_of(ox_export *e, const char *name)
{
    const nb_var *v = var(e, name);
    return v ? v->dtype : NB_F32;
}

/* Every node an op makes reports failure through the arena. */
static inline nb_status done(ox_export *e)
{
    return e->a.failed ? nb_error(NB_ERR_NOMEM, "onnx export: out of memory") : NB_OK;
}

#endif
