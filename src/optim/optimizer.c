/* Optimiser settings: constructors with PyTorch's defaults, and their check. */
#include <math.h>
#include "optim_internal.h"

nb_optimizer nb_sgd(double lr) { return (nb_optimizer){.kind = NB_SGD, .lr = lr}; }

nb_optimizer nb_momentum(double lr, double mu, bool nesterov)
{
    return (nb_optimizer){.kind = NB_MOMENTUM, .lr = lr, .momentum = mu, .nesterov = nesterov};
}

nb_optimizer nb_adam(double lr)
{
    return (nb_optimizer){.kind = NB_ADAM, .lr = lr, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8};
}

nb_optimizer nb_adamw(double lr, double weight_decay)
{
    nb_optimizer o = nb_adam(lr);
    o.kind = NB_ADAMW;
    o.weight_decay = weight_decay;
    return o;
}

nb_optimizer nb_rmsprop(double lr)
{
    return (nb_optimizer){.kind = NB_RMSPROP, .lr = lr, .rho = 0.99, .epsilon = 1e-8};
}

nb_optimizer nb_adagrad(double lr) { return (nb_optimizer){.kind = NB_ADAGRAD, .lr = lr, .epsilon = 1e-10}; }

static bool nonneg(double v) { return isfinite(v) && v >= 0; }

static nb_status bad(const char *field, double v, const char *want)
{
    return nb_error(NB_ERR_ARG, "optimizer: %s is %g; it must be %s", field, v, want);
}

nb_status nb_optimizer_check(const nb_optimizer *o)
{
    if (!o) return nb_error(NB_ERR_ARG, "optimizer: NULL");
    if (o->kind < NB_SGD || o->kind > NB_ADAGRAD)
        return nb_error(NB_ERR_ARG, "optimizer: kind %d is not an nb_optimizer_kind", (int)o->kind);
    if (!nonneg(o->lr)) return bad("lr", o->lr, "finite and >= 0");
    if (!nonneg(o->l2)) return bad("l2", o->l2, "finite and >= 0");
    if (!nonneg(o->weight_decay)) return bad("weight_decay", o->weight_decay, "finite and >= 0");
    bool adam = o->kind == NB_ADAM || o->kind == NB_ADAMW;
    if (o->weight_decay != 0 && !adam)
        return nb_error(NB_ERR_ARG,
                        "optimizer: weight_decay (decoupled, AdamW's) applies to adam and adamw; "
                        "use l2 to add l2 * param to the gradients");
    if (o->decay_min_ndim < 0)
        return nb_error(NB_ERR_ARG, "optimizer: decay_min_ndim is %d; it must be >= 0", o->decay_min_ndim);
    if (o->clip < NB_CLIP_NONE || o->clip > NB_CLIP_GLOBAL_NORM)
        return nb_error(NB_ERR_ARG, "optimizer: clip %d is not an nb_clip_kind", (int)o->clip);
    if (o->clip != NB_CLIP_NONE && !(isfinite(o->clip_value) && o->clip_value > 0))
        return bad("clip_value", o->clip_value, "finite and > 0 when clipping");
    switch (o->kind) {
    case NB_MOMENTUM:
        if (!nonneg(o->momentum)) return bad("momentum", o->momentum, "finite and >= 0");
        if (o->nesterov && o->momentum == 0)
            return nb_error(NB_ERR_ARG, "optimizer: Nesterov momentum needs momentum > 0");
        break;
    case NB_ADAM:
    case NB_ADAMW:
        if (!(o->beta1 >= 0 && o->beta1 < 1)) return bad("beta1", o->beta1, "in [0, 1)");
        if (!(o->beta2 >= 0 && o->beta2 < 1)) return bad("beta2", o->beta2, "in [0, 1)");
        if (!nonneg(o->epsilon)) return bad("epsilon", o->epsilon, "finite and >= 0");
        break;
    case NB_RMSPROP:
        if (!(o->rho >= 0 && o->rho <= 1)) return bad("rho", o->rho, "in [0, 1]");
        if (!nonneg(o->epsilon)) return bad("epsilon", o->epsilon, "finite and >= 0");
        if (!nonneg(o->momentum)) return bad("momentum", o->momentum, "finite and >= 0");
        break;
    case NB_ADAGRAD:
        if (!nonneg(o->epsilon)) return bad("epsilon", o->epsilon, "finite and >= 0");
        if (!nonneg(o->initial_accumulator_value))
            return bad("initial_accumulator_value", o->initial_accumulator_value, "finite and >= 0");
        break;
    default: break;
    }
    double lr;
    return nb_lr_at(&o->schedule, o->lr, 1, &lr);
}
