/* The control-flow ops: each runs a sub-block; their gradient ops run the
 * grad blocks that nb_append_backward writes for those sub-blocks. */
#ifndef NABLA_CONTROL_OPS_H
#define NABLA_CONTROL_OPS_H

#include "nabla/op.h"

extern const nb_op_def nb_op_while, nb_op_while_grad;         /* while_op.c */
extern const nb_op_def nb_op_cond, nb_op_cond_grad;           /* branch_ops.c */
extern const nb_op_def nb_op_net, nb_op_net_grad;             /* branch_ops.c */
extern const nb_op_def nb_op_recurrent, nb_op_recurrent_grad; /* recurrent_op.c */

/* The slots the definitions share. A control op writes the scopes of its
 * steps first (StepScopes, which its gradient op replays), then Out; a
 * gradient op reads those scopes and values (X) and writes the gradients
 * asked for (XGrad). The gradient ops of the loops have the same rules. */
#define NB_CTL_OUTPUTS(out_flags) .outputs = {{"StepScopes", 0}, {"Out", NB_SLOT_VARIADIC | (out_flags)}}
#define NB_CTL_GRAD_SLOTS                                                                 \
    .inputs = {{"StepScopes", NB_SLOT_NO_GRAD}, {"X", NB_SLOT_VARIADIC}},                 \
    .outputs = {{"XGrad", NB_SLOT_VARIADIC | NB_SLOT_OPTIONAL}}, .flags = NB_OP_CONTROL
#define NB_CTL_LOOP_GRAD_RULES .vjp = nb_ctl_loop_grad_vjp, .jvp = nb_ctl_loop_grad_jvp

/* Their kernels, registered with them (nb_control_register_ops). */
extern const nb_kernel_def nb_kernel_while, nb_kernel_while_grad, nb_kernel_cond, nb_kernel_cond_grad;
extern const nb_kernel_def nb_kernel_net, nb_kernel_net_grad, nb_kernel_recurrent, nb_kernel_recurrent_grad;

/* Their JVP rules (control_jvp.c). */
nb_status nb_ctl_while_jvp(struct nb_builder *b, struct nb_grad_ctx *g);
nb_status nb_ctl_recurrent_jvp(struct nb_builder *b, struct nb_grad_ctx *g);
nb_status nb_ctl_cond_jvp(struct nb_builder *b, struct nb_grad_ctx *g);
nb_status nb_ctl_net_jvp(struct nb_builder *b, struct nb_grad_ctx *g);

/* The rules of cond_grad and net_grad (replay_grad.c): those of a cond or
 * net op replaying the forward block and its grad block. */
nb_status nb_ctl_net_grad_vjp(struct nb_builder *b, struct nb_grad_ctx *g);
nb_status nb_ctl_net_grad_jvp(struct nb_builder *b, struct nb_grad_ctx *g);
nb_status nb_ctl_cond_grad_vjp(struct nb_builder *b, struct nb_grad_ctx *g);
nb_status nb_ctl_cond_grad_jvp(struct nb_builder *b, struct nb_grad_ctx *g);
/* ... and of while_grad and recurrent_grad, through the loop's JVP rule. */
nb_status nb_ctl_loop_grad_vjp(struct nb_builder *b, struct nb_grad_ctx *g);
nb_status nb_ctl_loop_grad_jvp(struct nb_builder *b, struct nb_grad_ctx *g);

/* The error of a control-flow kernel run outside an executor (nb_op_run). */
nb_status nb_ctl_needs_executor(const nb_kernel_ctx *k);

/* Output infos recorded at build time (the blocks decide them): attrs
 * out_dtypes and out_shapes (each rank, then the dims) into out[0..n). */
nb_status nb_ctl_recorded_infos(const nb_op_ctx *ctx, int n, nb_var_info *out);

/* Shape inference of the gradient ops: (StepScopes, X = [forward inputs...,
 * n_tail output gradients...]) -> XGrad, one per x_grad_pos entry, shaped
 * like the forward input at that position. */
nb_status nb_ctl_grad_infer(nb_op_ctx *ctx, int n_tail);

#endif
