/* nabla/gradcheck.h: checking gradients against finite differences.
 *
 * nb_gradcheck_program() checks the gradients nabla builds for a scalar loss
 * of any program; nb_gradcheck_op() checks one op's VJP rule (first order)
 * or the gradient of its gradient (second order) on a described case. Both
 * work in float64 with central differences. `nabla gradcheck` runs the
 * built-in cases of every op; users check their own ops the same way. */
#ifndef NABLA_GRADCHECK_H
#define NABLA_GRADCHECK_H

#include "nabla/export.h"

#include "nabla/executor.h"

NB_BEGIN_DECLS

typedef struct nb_gradcheck_opts {
    double eps;  /* finite-difference step (default 1e-6) */
    double rtol; /* allowed |analytic - numeric| <= atol + rtol * |numeric| */
    double atol;
    int max_elements; /* per var: check at most this many elements (0: all) */
    nb_feeds feeds;   /* nb_gradcheck_program: values of the fed vars */
} nb_gradcheck_opts;

typedef struct nb_gradcheck_report {
    int checked; /* elements compared */
    int failed;  /* elements out of tolerance */
    double max_abs_err;
    char worst[256]; /* where the largest error is, e.g. "X[3]: analytic 0.5 numeric 0.51" */
} nb_gradcheck_report;

/* Checks d(loss)/d(v) for each v in `wrt` (vars of block 0 of `fwd` that are
 * fed, in opts->feeds, or found in `scope`), at the values given. `fwd` is not changed: the
 * gradient part is built on a clone. NB_OK means the check ran; look at
 * report->failed for its verdict. */
NB_API nb_status nb_gradcheck_program(nb_program *fwd, const char *loss, nb_names wrt, nb_scope *scope,
                                      const nb_gradcheck_opts *opts, nb_gradcheck_report *report);

/* How to fill one input of an op under test. */
typedef enum { NB_GC_UNIFORM = 0, NB_GC_INTS, NB_GC_VALUES } nb_gc_fill;

typedef struct nb_gc_input {
    nb_dtype dtype; /* default (0) float32 is promoted to float64 for float inputs */
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    nb_gc_fill fill;
    double lo, hi;        /* UNIFORM: real range; INTS: integer range [lo, hi] (both 0: [-1, 1]) */
    const double *values; /* VALUES: exactly these */
    bool absent;          /* an optional input left out */
} nb_gc_input;

typedef struct nb_gradcheck_case {
    const char *op;
    const char *name; /* what this case covers, e.g. "broadcast [2,3] + [3]" */
    int n_in;
    nb_gc_input in[NB_MAX_SLOTS];
    int n_out; /* outputs to request (0: one per declared slot) */
    int n_attrs;
    nb_attr attrs[NB_MAX_ATTRS];
    unsigned loss_outputs;  /* bit k: output k enters the loss (0: every float output); e.g. 1 leaves out
                               statistics outputs that carry no gradient by definition */
    bool skip_second_order; /* the rule's own gradient is not expected (e.g. fused grad ops without rules) */
    double rtol;            /* 0: the default */
} nb_gradcheck_case;

/* Runs one case: order 1 checks the VJP rule, order 2 the gradient of the
 * gradient (of <grad, s> for random s), order 3 one more pass (of <grad
 * <grad, s1>, s2>), and so on. The loss is a random weighted sum of the op's
 * float outputs (those in loss_outputs, when it is not 0). */
NB_API nb_status nb_gradcheck_op(const nb_gradcheck_case *c, int order, uint64_t seed, nb_gradcheck_report *report);

/* Checks one case of the op's JVP rule: its output tangents along random
 * input tangents t against central differences of the op along t, and
 * against its VJP by the identity <JVP(t), w> = <t, VJP(w)>. */
NB_API nb_status nb_gradcheck_op_jvp(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);

/* The other columns of the check matrix (`nabla gradcheck --all`), each one
 * quantity computed two ways on a case, differences counted in the report:
 *  - forward over reverse: the JVP of the op's gradient along random t
 *    equals the gradient of <gradient, t> (both are the loss's Hessian times
 *    t), to 1e-7 relative;
 *  - shapes: each gradient has its input's dtype and shape, as declared in
 *    the program and as computed;
 *  - float32: the op's outputs on float32 inputs agree with float64 within
 *    tol (relative and absolute);
 *  - eager: the op on an eager builder, on contiguous inputs and output
 *    gradients, then on transposed and on sliced views holding the same
 *    values (strided, with an offset), and with output gradients that are
 *    expanded views (stride 0; the weights made equal along dim 0), gives the
 *    static program's outputs and gradients (to 1e-10; random ops are not
 *    compared, their draws differ between the modes);
 *  - absent: for an op with two or more float outputs, a gradient through
 *    the first alone (the others' output gradients absent, NB_NONE in the
 *    rules) is the same on the tape as in a program, and no rule fails on
 *    the missing ones. An op with one output passes with nothing checked;
 *  - transforms: the op and its loss as a function, nb_grad of it
 *    (nabla/transforms.h), gives the program's gradients (to 1e-10);
 *  - vmap: the op mapped over a batch of 3 (nabla/vmap.h) by its batching
 *    rule equals the op run on each example, for every in_axes combination
 *    of its inputs (batched along axis 0, along the last axis, or shared;
 *    three combinations for ops of more than 4 inputs), to 1e-12. An op
 *    without a rule (its loop over the batch) or a random op passes with
 *    nothing checked. */
NB_API nb_status nb_gradcheck_fwd_over_rev(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);
NB_API nb_status nb_gradcheck_shapes(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);
NB_API nb_status nb_gradcheck_f32(const nb_gradcheck_case *c, uint64_t seed, double tol, nb_gradcheck_report *report);
NB_API nb_status nb_gradcheck_eager(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);
NB_API nb_status nb_gradcheck_absent(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);
NB_API nb_status nb_gradcheck_transforms(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);
NB_API nb_status nb_gradcheck_vmap(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);

/* Whether derivatives of the op can be taken again: it has a VJP and a JVP
 * rule, or is marked NB_OP_NOT_DIFFERENTIABLE (a zero derivative). */
NB_API bool nb_op_rules_closed(const nb_op_def *def);

/* The closure check of one case: the op differentiated in reverse mode,
 * its gradient differentiated again, and the op in forward mode; every op
 * those rules emit must be closed in the sense above, or "any order" breaks
 * there. report->checked counts the op types seen, report->failed those
 * that break the chain, and report->worst names them (and a pass that
 * stopped at one). */
NB_API nb_status nb_gradcheck_closure(const nb_gradcheck_case *c, uint64_t seed, nb_gradcheck_report *report);

NB_END_DECLS

#endif
