/* CPU kernels of the optimiser family: the parameter updates (sgd,
 * momentum, adam/adamw, rmsprop, adagrad) and the learning-rate schedule.
 * The op definitions and the validation of their inputs and attributes live
 * in src/ops/optimizer.c; these kernels trust that `infer` has run.
 *
 * Every update writes its outputs in place: ParamOut is Param's tensor,
 * each state output its state input's, in programs. Element i of every
 * output is computed from element i of the inputs only, read before any
 * write, so an output may alias its input (or be a fresh tensor). The
 * arithmetic is done in the parameter's dtype; scalar factors (learning
 * rate, bias corrections) are worked out in double and then rounded to it,
 * as PyTorch does with Python floats. */
#ifndef NABLA_KERNELS_CPU_OPTIMIZER_H
#define NABLA_KERNELS_CPU_OPTIMIZER_H

#include <stdint.h>
#include "nabla/tensor.h"
#include "../params/optimizer.h"

/* ---- learning-rate schedules, shared with nb_lr_at() ----------------------- */

/* "constant", "step", "exponential", "cosine"; NB_LR_BAD otherwise. */
nb_lr_kind nb_lr_kind_parse(const char *s);

/* The learning rate of update number t (1 for the first): t/warmup_steps
 * of base_lr during the warm-up, then the schedule of the s = t - 1 -
 * warmup_steps updates made since it ended. */
double nb_lr_value(const nb_lr_params *p, double t);

#endif
