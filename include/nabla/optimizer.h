/* nabla/optimizer.h: the optimisation part of a training program.
 *
 * nb_minimize() is Fluid's optimizer.minimize(loss): it appends the
 * gradient part of `main` (nb_append_backward) and then the ops that update
 * the parameters from their gradients, and puts the one-time initialisation
 * of the optimiser's state in `startup`. Run `startup` once, then `main` once
 * per step:
 *
 *     nb_optimizer opt = nb_adam(1e-3);
 *     opt.clip = NB_CLIP_GLOBAL_NORM;  opt.clip_value = 1.0;
 *     nb_backward_result r;
 *     nb_minimize(&opt, main, startup, nb_value_name(cost), NULL, &r);
 *     nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
 *     for (...) nb_executor_run(ex, main, scope, NB_FEEDS_N(2, feeds), NB_NAMES(loss_name), &loss);
 *     nb_backward_result_free(&r);
 *
 * What it appends to block 0 of `main`, all with role NB_ROLE_OPTIMIZE, in
 * this order:
 *  1. `increment` of the step counter "@LR_STEP@_<k>" (int64 [1], 0 after
 *     startup), so that it holds t, the number of the current update,
 *     counting from 1;
 *  2. `lr_schedule`, writing the learning rate of update t into
 *     "learning_rate_<k>" ([1], float64 if a parameter is float64, else
 *     float32);
 *  3. for each parameter with l2 != 0: grad + l2 * param (scale, add);
 *  4. clipping: by value (clip to [-c, c]), by norm (each gradient times
 *     c / max(||g||, c)), or by global norm (every gradient times
 *     c / max(sqrt(sum of all ||g||^2), c)), built from square, reduce_sum,
 *     sum, sqrt, maximum, div and mul;
 *  5. one update op per parameter, writing the parameter and its state in
 *     place.
 * Ops made for one parameter carry role_var = (param, gradient it reads).
 * Unless clipping is by global norm (which needs every gradient first),
 * each parameter's ops (3 to 5) are then moved up to right after the last
 * op of the gradient part that touches the parameter or its gradient, and
 * 1 and 2 to before the first of them: the executor frees each gradient as
 * soon as its update has run, instead of holding them all until the end.
 * The ops and their inputs are the same, so the results do not change.
 *
 * The optimiser's state (the counter, the learning rate, moments, velocity,
 * beta powers, mean squares, accumulators) lives in persistable vars named
 * "<param>_<what>_<k>" (moment1, moment2, beta1_pow, beta2_pow, velocity,
 * mean_square, moment, mean_grad, accumulator), shaped and typed like their
 * parameter (beta powers: [1]; a centered rmsprop keeps a moment even
 * without momentum, as its op needs), created in `main` and initialised in
 * `startup` by fill_constant, so a checkpoint of the persistable vars holds
 * everything needed to resume. nb_optimizer_state_vars() lists them.
 *
 * The update equations are those of torch.optim, with PyTorch's defaults:
 *   sgd       p -= lr * g
 *   momentum  v = mu*v + g;  p -= lr * (nesterov ? g + mu*v : v)
 *   adam      p -= lr*wd*p (AdamW only);  m = b1*m + (1-b1)*g;
 *             v = b2*v + (1-b2)*g^2;
 *             p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 *   rmsprop   s = rho*s + (1-rho)*g^2;  centered: a = rho*a + (1-rho)*g,
 *             d = sqrt(s - a^2) + eps, else d = sqrt(s) + eps;
 *             momentum: b = momentum*b + g/d, p -= lr*b;  else p -= lr*g/d
 *   adagrad   s += g^2;  p -= lr * g / (sqrt(s) + eps)
 * where g is the gradient after L2 and clipping. */
#ifndef NABLA_OPTIMIZER_H
#define NABLA_OPTIMIZER_H

#include "nabla/export.h"

#include "nabla/autodiff.h"

NB_BEGIN_DECLS

typedef enum nb_optimizer_kind { NB_SGD, NB_MOMENTUM, NB_ADAM, NB_ADAMW, NB_RMSPROP, NB_ADAGRAD } nb_optimizer_kind;

typedef enum nb_clip_kind {
    NB_CLIP_NONE,
    NB_CLIP_VALUE,      /* each element to [-clip_value, clip_value] */
    NB_CLIP_NORM,       /* each gradient to L2 norm <= clip_value */
    NB_CLIP_GLOBAL_NORM /* all gradients together to L2 norm <= clip_value */
} nb_clip_kind;

/* The learning rate of update t (1 for the first), with base_lr the
 * optimiser's lr. During a warm-up (warmup_steps > 0) it rises linearly:
 * base_lr * t / warmup_steps for t <= warmup_steps. Then, with s = t - 1 -
 * warmup_steps the updates made since the warm-up (0, 1, 2, ...):
 *   "constant"     base_lr                          (NULL means this)
 *   "step"         base_lr * gamma^floor(s / step_size)   (torch StepLR)
 *   "exponential"  base_lr * gamma^s                (torch ExponentialLR)
 *   "cosine"       min_lr + (base_lr - min_lr) * (1 + cos(pi * s / total_steps)) / 2
 *                  for s <= total_steps, then min_lr (torch
 *                  CosineAnnealingLR with T_max = total_steps, held at the end) */
typedef struct nb_lr_schedule {
    const char *kind;
    int64_t step_size, total_steps, warmup_steps;
    double gamma, min_lr;
} nb_lr_schedule;

typedef struct nb_optimizer {
    nb_optimizer_kind kind;
    double lr;
    double momentum;                  /* NB_MOMENTUM's mu; NB_RMSPROP's momentum */
    bool nesterov;                    /* NB_MOMENTUM */
    double beta1, beta2;              /* NB_ADAM, NB_ADAMW */
    double epsilon;                   /* NB_ADAM, NB_ADAMW, NB_RMSPROP, NB_ADAGRAD */
    double rho;                       /* NB_RMSPROP: torch's alpha */
    bool centered;                    /* NB_RMSPROP */
    double initial_accumulator_value; /* NB_ADAGRAD */
    double weight_decay;              /* NB_ADAM, NB_ADAMW: decoupled, p -= lr * weight_decay * p */
    /* NB_ADAM, NB_ADAMW: weight_decay applies only to parameters of at least
     * this many dims; the others (biases, norm gains) get none. 2 is GPT-2's
     * split (nanoGPT's configure_optimizers); 0 decays every parameter. */
    int decay_min_ndim;
    double l2; /* any kind: adds l2 * param to every gradient (torch's weight_decay of SGD, Adam...) */
    nb_clip_kind clip;
    double clip_value;
    nb_lr_schedule schedule;
    /* Static programs only: NULL, or data parallelism, applied by
     * nb_minimize between the gradient and the optimisation parts (see
     * nb_data_parallel in nabla/data_parallel.h). Eager mode uses nb_ddp. */
    const struct nb_data_parallel_opts *data_parallel;
} nb_optimizer;

/* Optimisers with PyTorch's defaults (and no L2, clipping or schedule). */
NB_API nb_optimizer nb_sgd(double lr);
NB_API nb_optimizer nb_momentum(double lr, double mu, bool nesterov);
NB_API nb_optimizer nb_adam(double lr);                       /* betas (0.9, 0.999), eps 1e-8 */
NB_API nb_optimizer nb_adamw(double lr, double weight_decay); /* torch's default weight_decay is 0.01 */
NB_API nb_optimizer nb_rmsprop(double lr);                    /* rho 0.99, eps 1e-8 */
NB_API nb_optimizer nb_adagrad(double lr);                    /* eps 1e-10, initial accumulator 0 */

/* Checks every field: NB_ERR_ARG naming the first bad one. */
NB_API nb_status nb_optimizer_check(const nb_optimizer *opt);

/* Appends the gradient and optimisation parts described above for the
 * scalar `loss`. opts->params (NULL opts, or none listed: every trainable
 * parameter of block 0) are the vars to update; a frozen parameter
 * (is_parameter with trainable false) is left out even when listed, and so
 * is a parameter the loss does not depend on. opts->no_grad is passed to
 * nb_append_backward. `startup` is required: it receives the initialisers.
 *
 * `out` receives nb_append_backward's result, except that pairs[i].grad is
 * the gradient the update op of pairs[i].param reads: after L2 and clipping
 * (fetch it to see what was applied). nb_backward_grad_of(out, param) still
 * gives the raw gradient. On failure both programs get their ops back as
 * they were and `out` is empty. */
NB_API nb_status nb_minimize(const nb_optimizer *opt, nb_program *main, nb_program *startup, const char *loss,
                             const nb_backward_opts *opts, nb_backward_result *out);

/* The optimiser-state vars of `p`: the persistable vars, other than
 * parameters, that its NB_ROLE_OPTIMIZE ops write, in program order.
 * *names is an array to release with nb_free (nabla/device.h; the strings belong to the program
 * and live while it is unchanged). */
NB_API nb_status nb_optimizer_state_vars(const nb_program *p, int *n, const char ***names);

/* The learning-rate var of `p` (the output of its last lr_schedule op), or
 * NULL if it has none. It holds the rate of the latest run; fetch it to log
 * it. */
NB_API const char *nb_optimizer_lr_var(const nb_program *p);

/* The learning rate a schedule gives update t (1 for the first), as the
 * lr_schedule op computes it. NB_ERR_ARG for a bad schedule. */
NB_API nb_status nb_lr_at(const nb_lr_schedule *s, double base_lr, int64_t t, double *out);

/* ---- eager mode -------------------------------------------------------------------------
 *
 * The same optimisers for the parameters of an eager builder (nabla/eager.h),
 * as torch.optim steps a module's parameters:
 *
 *     nb_eager_optimizer *o;
 *     nb_eager_optimizer_new(&o, &opt);            // the nb_optimizer of nb_minimize
 *     for (each batch) {
 *         nb_value loss = model(eager, nb_eager_value(eager, x), ...);
 *         nb_backward(NB_TENSORS(nb_eager_tensor(loss)), NULL, 0);
 *         nb_eager_optimizer_step(o, eager);
 *         nb_eager_zero_grad(eager);
 *         nb_eager_release_values(eager);
 *     }
 *     nb_eager_optimizer_free(o);
 *
 * A step does what the optimisation part of nb_minimize does, with the same
 * ops and so the same numbers: t = the optimiser's own step count (1 for
 * the first step), the learning rate nb_lr_at(schedule, lr, t) in a [1]
 * tensor (float64 if a parameter updated is, else float32), L2 and
 * clipping of the gradients (ops run on new tensors; .grad is left as it
 * is), then the update op of each parameter run with its outputs being the
 * parameter and its state tensors themselves, in place, in a no-grad block.
 * Each in-place write bumps the tensors' version, so a graph that saved a
 * parameter before the step refuses a later backward.
 *
 * The parameters updated are those of the builder that require grad and
 * have a .grad (state made by nb_persistable_var, and parameters the loss
 * did not reach, are left alone, as nb_minimize leaves them). The state
 * (velocity, moments, beta powers, mean squares, accumulators) is kept in
 * the optimiser by parameter name, made at a parameter's first update with
 * the values nb_minimize's startup gives it, so one optimiser serves one
 * builder. */

typedef struct nb_eager_optimizer nb_eager_optimizer;

/* Checks opt (nb_optimizer_check, and the schedule as nb_lr_at does) and
 * copies it (the schedule's kind string too). */
NB_API nb_status nb_eager_optimizer_new(nb_eager_optimizer **out, const nb_optimizer *opt);
/* One update of every parameter of `eager` that has a gradient. A step with
 * no gradient anywhere does nothing and is not counted. Every check (a
 * gradient that does not match its parameter's dtype and shape, a
 * parameter whose shape changed since its state was made) comes before the
 * first write, so a failed step changes nothing. */
NB_API nb_status nb_eager_optimizer_step(nb_eager_optimizer *o, nb_builder *eager);
/* Drops the .grad of every parameter of the builder (nb_tensor_zero_grad). */
NB_API void nb_eager_zero_grad(nb_builder *eager);
/* The steps taken, and the learning rate of the latest (0 before the first). */
NB_API int64_t nb_eager_optimizer_steps(const nb_eager_optimizer *o);
NB_API double nb_eager_optimizer_lr(const nb_eager_optimizer *o);
/* The bytes of the state it holds (moments, velocity, beta powers, ...),
 * over every parameter it has updated: what ZeRO-1 (nb_ddp_shard_optimizer)
 * divides by the rank count. 0 before the first step. */
NB_API int64_t nb_eager_optimizer_state_bytes(const nb_eager_optimizer *o);
NB_API void nb_eager_optimizer_free(nb_eager_optimizer *o); /* NULL is fine */

NB_END_DECLS

#endif
