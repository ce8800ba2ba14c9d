/* Parameters of the optimiser family's kernels, filled from the attributes
 * by the op definitions (src/ops/optimizer.c). Device independent. */
#ifndef NABLA_KERNELS_PARAMS_OPTIMIZER_H
#define NABLA_KERNELS_PARAMS_OPTIMIZER_H

#include <stdbool.h>
#include <stdint.h>

/* The updates: each reads the fields named after its attributes. */
typedef struct nb_update_params {
    double mu;            /* momentum */
    bool use_nesterov;    /* momentum */
    double beta1, beta2;  /* adam, adamw */
    double epsilon;       /* adam, adamw, rmsprop, adagrad */
    double weight_decay;  /* adamw (decoupled; 0 for adam) */
    double rho, momentum; /* rmsprop */
} nb_update_params;

/* Learning-rate schedules (lr_schedule, and nb_lr_at). */
typedef enum nb_lr_kind { NB_LR_BAD = -1, NB_LR_CONSTANT, NB_LR_STEP, NB_LR_EXPONENTIAL, NB_LR_COSINE } nb_lr_kind;

typedef struct nb_lr_params {
    nb_lr_kind kind;
    double base_lr, gamma, min_lr;
    int64_t step_size, total_steps, warmup_steps;
} nb_lr_params;

#endif
