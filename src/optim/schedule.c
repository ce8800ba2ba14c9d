/* The step counter and the learning-rate schedule of a training program. */
#include <string.h>
#include "optim_internal.h"
#include "kernels/cpu/optimizer.h"

int nb_optim_schedule_attrs(const nb_lr_schedule *s, double base_lr, nb_dtype dtype, nb_attr attrs[8])
{
    attrs[0] = NB_ATTR_STRING("kind", s->kind ? s->kind : "constant");
    attrs[1] = NB_ATTR_FLOAT("base_lr", base_lr);
    attrs[2] = NB_ATTR_INT("step_size", s->step_size);
    attrs[3] = NB_ATTR_FLOAT("gamma", s->gamma);
    attrs[4] = NB_ATTR_INT("total_steps", s->total_steps);
    attrs[5] = NB_ATTR_FLOAT("min_lr", s->min_lr);
    attrs[6] = NB_ATTR_INT("warmup_steps", s->warmup_steps);
    attrs[7] = NB_ATTR_INT("dtype", dtype);
    return 8;
}

nb_status nb_lr_at(const nb_lr_schedule *s, double base_lr, int64_t t, double *out)
{
    if (!s || !out) return nb_error(NB_ERR_ARG, "lr_at: NULL schedule or result");
    /* The op's own checks, so that both say the same. */
    nb_attr attrs[8];
    int n = nb_optim_schedule_attrs(s, base_lr, NB_F64, attrs);
    nb_var_info step = {.dtype = NB_I64, .ndim = 1, .shape = {1}}, lr;
    nb_status st = nb_op_infer("lr_schedule", 1, &step, NB_ATTRS_N(n, attrs), 1, &lr);
    if (st) return st;
    nb_lr_params p = {
        .kind = nb_lr_kind_parse(s->kind),
        .base_lr = base_lr,
        .gamma = s->gamma,
        .min_lr = s->min_lr,
        .step_size = s->step_size,
        .total_steps = s->total_steps,
        .warmup_steps = s->warmup_steps,
    };
    *out = nb_lr_value(&p, (double)t);
    return NB_OK;
}

nb_status nb_optim_append_lr(nb_optim_ctx *c)
{
    nb_status st = nb_optim_create_state(c, "@LR_STEP@", NB_I64, 1, (const int64_t[]){1}, 0.0, c->step);
    if (!st) st = nb_optim_create_state(c, "learning_rate", c->lr_dtype, 1, (const int64_t[]){1}, c->opt->lr, c->lr);
    if (st) return st;
    int from = c->mb->n_ops;
    const char *step = c->step, *lr = c->lr;
    /* The counter is incremented first, so it holds t = 1 on the first run. */
    st = nb_block_append_op(c->mb, "increment", NB_NAMES_N(1, &step), NB_NAMES_N(1, &step),
                            NB_ATTRS(NB_ATTR_FLOAT("step", 1.0)), NULL);
    if (st) return st;
    nb_attr attrs[8];
    int n = nb_optim_schedule_attrs(&c->opt->schedule, c->opt->lr, c->lr_dtype, attrs);
    if ((st = nb_block_append_op(c->mb, "lr_schedule", NB_NAMES_N(1, &step), NB_NAMES_N(1, &lr), NB_ATTRS_N(n, attrs),
                                 NULL)))
        return st;
    return nb_optim_mark(c, from, NULL, NULL);
}
