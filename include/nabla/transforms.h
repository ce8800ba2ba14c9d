/* nabla/transforms.h: functional transforms (JAX's grad, vjp, jvp, jacrev,
 * jacfwd and hessian are the reference for the API). A function is C code
 * against a builder:
 *
 *     nb_status f(nb_builder *b, const nb_value *in, nb_value *out, void *ctx);
 *
 * and the transforms run it eagerly and differentiate it: reverse mode
 * (nb_vjp, nb_grad, nb_value_and_grad, nb_jacrev), forward mode (nb_jvp,
 * from each op's JVP rule; nb_jvp_by_reverse, derived from reverse mode;
 * nb_jacfwd), and second derivatives (nb_hessian, nb_hvp: forward over
 * reverse). Results are differentiable themselves, so a function may call a
 * transform inside another: derivatives of any order come by nesting. */
#ifndef NABLA_TRANSFORMS_H
#define NABLA_TRANSFORMS_H

#include "nabla/export.h"

#include "nabla/eager.h"

NB_BEGIN_DECLS

typedef nb_status (*nb_fn)(nb_builder *b, const nb_value *in, nb_value *out, void *ctx);

/* A function with its arity and context. */
typedef struct nb_function {
    nb_fn fn;
    int n_in, n_out;
    void *ctx;
} nb_function;

/* Outputs of f at primals (new references in outputs) and a pullback that
 * maps cotangents of the outputs to gradients of the inputs, as many times
 * as asked. */
typedef struct nb_pullback nb_pullback;
NB_API nb_status nb_vjp(const nb_function *f, nb_tensor *const *primals, nb_tensor **outputs, nb_pullback **pullback);
/* grads[i] for each input (NULL where the outputs do not depend on it). */
NB_API nb_status nb_pullback_apply(nb_pullback *pb, nb_tensor *const *cotangents, nb_tensor **grads);
NB_API void nb_pullback_free(nb_pullback *pb);

/* What nb_grad and nb_value_and_grad differentiate. NULL, or a zeroed
 * struct: every input, no auxiliary outputs, no free tensors. */
typedef struct nb_grad_opts {
    int n_argnums; /* the inputs to differentiate, by index (none: all) */
    const int *argnums;
    unsigned flags;         /* NB_HAS_AUX (nb_grad) */
    nb_tensors free_vars;   /* nb_value_and_grad: tensors f reads from its context (they must require grad) */
    nb_tensor **free_grads; /* ... and where their gradients go, one each */
} nb_grad_opts;

/* JAX's grad: the gradients of f's first output (a one-element tensor)
 * with respect to the inputs listed in opts->argnums (grads has one entry
 * per listed input; an input the output does not depend on gets zeros).
 * With NB_HAS_AUX, f's other outputs come back in aux (n_out - 1 new
 * references), undifferentiated; without it f must have one output. The
 * gradients are differentiable again: nest for higher derivatives. (The
 * engine's torch.autograd.grad is nb_autograd_grad, in nabla/eager.h.)
 *
 *     nb_grad(&f, &x, NULL, &dx, NULL); */
NB_API nb_status nb_grad(const nb_function *f, nb_tensor *const *primals, const nb_grad_opts *opts, nb_tensor **grads,
                         nb_tensor **aux);

/* The same with f's outputs: the value first, then the auxiliary ones
 * (outputs holds all n_out), and also the gradients with respect to
 * opts->free_vars, into opts->free_grads. */
NB_API nb_status nb_value_and_grad(const nb_function *f, nb_tensor *const *primals, const nb_grad_opts *opts,
                                   nb_tensor **outputs, nb_tensor **grads);

/* Forward mode: outputs of f and their tangents along `tangents` (NULL
 * entries: zero), by each op's JVP rule, zero tangents skipped. */
NB_API nb_status nb_jvp(const nb_function *f, nb_tensor *const *primals, nb_tensor *const *tangents,
                        nb_tensor **outputs, nb_tensor **out_tangents);
/* The same derived from reverse mode: the pullback is linear in its
 * cotangent u, so the gradient of <VJP(u), t> with respect to u is J t. */
NB_API nb_status nb_jvp_by_reverse(const nb_function *f, nb_tensor *const *primals, nb_tensor *const *tangents,
                                   nb_tensor **outputs, nb_tensor **out_tangents);

/* The Jacobian of output `out` with respect to input `arg`, shaped
 * out.shape + arg.shape: a row per output element (jacrev: the pullback
 * vmapped over the rows, one batched backward) or a column per input
 * element (jacfwd: the JVP vmapped over the columns, one batched forward
 * pass; see nabla/vmap.h). The Jacobian is differentiable, and inside a
 * function that nb_vmap maps it is each example's, as are the Hessians
 * below. */
NB_API nb_status nb_jacrev(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac);
NB_API nb_status nb_jacfwd(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac);
/* Second derivatives of f's first output (a scalar) with respect to input
 * `arg`: the Hessian shaped arg.shape + arg.shape, and Hessian-vector
 * products (v shaped as the input). Both by forward over reverse: H v is the
 * JVP of the gradient along v (nb_jvp of a function that runs
 * nb_value_and_grad: the backward carries the tangents), and the Hessian is
 * the gradient's jacfwd: every column in one batched forward and backward
 * (vmap). */
NB_API nb_status nb_hessian(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor **hess);
NB_API nb_status nb_hvp(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor *v, nb_tensor **hv);
/* The same by reverse over reverse: the gradient's pullback of v is H v (H
 * is symmetric), and the Hessian takes one pullback per row (jacrev of the
 * gradient). A check on the above, and a way for ops without JVP rules. */
NB_API nb_status nb_hessian_by_reverse(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor **hess);
NB_API nb_status nb_hvp_by_reverse(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor *v,
                                   nb_tensor **hv);

NB_END_DECLS

#endif
