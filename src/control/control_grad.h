/* What the gradient rules of the control-flow ops share: differentiating a
 * sub-block into a grad block (as Fluid's backward pass does), and the
 * attributes that tell the gradient op which vars of that block to fill and
 * read. */
#ifndef NABLA_CONTROL_GRAD_H
#define NABLA_CONTROL_GRAD_H

#include "nabla/grad_rule.h"

typedef struct nb_sub_grad {
    int block;          /* the grad block */
    const char **seeds; /* per target: the grad-block var the gradient op fills */
    const char **grads; /* per input: the grad-block var holding its gradient, "" if none */
    int n_seeds, n_grads;
} nb_sub_grad;

/* Differentiates sub-block `fwd_block` of b's program: the gradients of
 * `targets` (vars it writes) with respect to `inputs` (its vars, or outer
 * vars it reads). Fails on an eager builder: there the helpers of
 * nabla/control.h run on the tape and these ops never appear. */
nb_status nb_ctl_sub_backward(nb_builder *b, const char *who, int fwd_block, int n_targets, const char *const *targets,
                              int n_inputs, const char *const *inputs, nb_sub_grad *out);
void nb_sub_grad_free(nb_sub_grad *g);

/* A rule's scratch arrays, freed together. take gives n zeroed elements of
 * `size` bytes (room for one more, so that n may be 0), or NULL once any
 * allocation has failed (failed is then set); free lets them all go. */
#define NB_CTL_SCRATCH_MAX 12
typedef struct nb_ctl_scratch {
    void *p[NB_CTL_SCRATCH_MAX];
    int n;
    bool failed;
} nb_ctl_scratch;
void *nb_ctl_scratch_take(nb_ctl_scratch *s, int n, size_t size);
void nb_ctl_scratch_free(nb_ctl_scratch *s);

/* The forward op's var name of value v (record builders only). */
const char *nb_ctl_name(nb_value v);

#endif
