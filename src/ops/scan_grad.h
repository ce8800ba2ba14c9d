/* VJP and JVP rules of the scans (scan_grad.c), and what they share. */
#ifndef NABLA_OPS_SCAN_GRAD_H
#define NABLA_OPS_SCAN_GRAD_H

#include "nabla/grad_rule.h"
#include "nabla/ops.h"

/* The forward op's axis and flags (NB_SCAN_EXCLUSIVE, NB_SCAN_REVERSE), for
 * a rule that emits a scan along the same axis. */
static inline int nb_scan_axis(const nb_grad_ctx *g) { return (int)nb_grad_attr(g, "axis")->i; }
static inline unsigned nb_scan_flags(const nb_grad_ctx *g)
{
    return (nb_grad_attr(g, "exclusive")->b ? NB_SCAN_EXCLUSIVE : 0u) |
        (nb_grad_attr(g, "reverse")->b ? NB_SCAN_REVERSE : 0u);
}

/* The rules of every op in nabla/scan_ops.h: nb_<name>_vjp and
 * nb_<name>_jvp. */
#define NB_SCAN(name, ...)                                    \
    nb_status nb_##name##_vjp(nb_builder *b, nb_grad_ctx *g); \
    nb_status nb_##name##_jvp(nb_builder *b, nb_grad_ctx *g);
#include "nabla/scan_ops.h"

#endif
