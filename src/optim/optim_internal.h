/* What the parts of nb_minimize share: the programs being extended, the
 * builder that emits the optimisation ops, and small helpers. */
#ifndef NABLA_OPTIM_INTERNAL_H
#define NABLA_OPTIM_INTERNAL_H

#include "nabla/builder.h"
#include "nabla/optimizer.h"

#define NB_OPTIM_NAME_MAX 512

typedef struct nb_optim_ctx {
    const nb_optimizer *opt;
    nb_program *main, *startup;
    nb_block *mb, *sb;            /* their global blocks */
    nb_builder *b;                /* records into mb with role NB_ROLE_OPTIMIZE */
    nb_dtype lr_dtype;            /* float64 if any parameter is, else float32 */
    char step[NB_OPTIM_NAME_MAX]; /* the step counter var */
    char lr[NB_OPTIM_NAME_MAX];   /* the learning-rate var */
} nb_optim_ctx;

/* Creates persistable var "<prefix>_<k>" (a fresh k) in main and startup,
 * and a fill_constant of `value` for it in startup. Its name goes to
 * name[NB_OPTIM_NAME_MAX]. */
nb_status nb_optim_create_state(nb_optim_ctx *c, const char *prefix, nb_dtype dtype, int ndim, const int64_t *shape,
                                double value, char *name);

/* Gives ops [from, end) of main's block 0 the optimise role and, if param is
 * not NULL, role_var = (param, grad). */
nb_status nb_optim_mark(nb_optim_ctx *c, int from, const char *param, const char *grad);

/* The lr_schedule attributes of a schedule; returns their count (at most 8). */
int nb_optim_schedule_attrs(const nb_lr_schedule *s, double base_lr, nb_dtype dtype, nb_attr attrs[8]);

/* schedule.c: the step counter and its increment, then the learning rate
 * (fills c->step and c->lr). */
nb_status nb_optim_append_lr(nb_optim_ctx *c);

/* clip.c: L2 regularisation and then clipping of the n gradients, whose
 * names (malloc'ed) are replaced by those of the results. */
nb_status nb_optim_transform_grads(nb_optim_ctx *c, int n, const char *const *params, char **grads);

/* The decoupled weight decay of a parameter of `ndim` dims: none below
 * opt->decay_min_ndim (nb_minimize and the eager optimiser alike). */
static inline double nb_optim_weight_decay(const nb_optimizer *o, int ndim)
{
    return ndim < o->decay_min_ndim ? 0.0 : o->weight_decay;
}

/* eager_optimizer.c: a step of o on the eager builder's parameters
 * idx[0 .. n) only (all of them when idx is NULL), at the learning rate of
 * the step under way; `last` ends the step, which counts once if it
 * updated anything. nb_ddp_step updates bucket by bucket through it. The
 * transforms run on the parameters given: refuse global-norm clipping
 * before updating in parts. */
nb_status nb_eager_optimizer_update(nb_eager_optimizer *o, nb_builder *eager, int n, const int *idx, bool last);
/* The options o was made with. */
const nb_optimizer *nb_eager_optimizer_options(const nb_eager_optimizer *o);
/* The nb_ddp that steps o, which then refuses nb_eager_optimizer_step
 * (NULL: none). */
const void *nb_eager_optimizer_stepper(const nb_eager_optimizer *o);
void nb_eager_optimizer_set_stepper(nb_eager_optimizer *o, const void *by);

/* zero_optimizer.c: nb_ddp_step of a sharded optimiser. */
struct nb_ddp;
nb_status nb_zero_step(struct nb_ddp *d);

#endif
