/* The eager optimiser: nb_minimize's optimisation part (learning rate, L2,
 * clipping, update ops) run at once on the parameters of an eager builder.
 * It runs the very ops a training program runs, so a step gives the numbers
 * a static step gives. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "core/strmap.h"
#include "nabla/eager.h"
#include "nabla/ops.h"
#include "nabla/optimizer.h"
#include "optim_internal.h"
#include "../comm/comm_internal.h"

#define MAX_STATE 4

/* The state of one parameter, in the order of its update op's slots. */
typedef struct param_state {
    nb_tensor *s[MAX_STATE];
    int n;
} param_state;

struct nb_eager_optimizer {
    nb_optimizer opt;
    char *schedule_kind; /* opt.schedule.kind points here */
    nb_strmap state;     /* parameter name -> param_state */
    nb_builder *scratch; /* runs L2 and clipping; emptied after each step */
    int64_t steps;
    double lr;
    bool updated;           /* some parameter, in this step's parts so far */
    const void *stepped_by; /* the nb_ddp that steps it (nb_ddp_set_optimizer), or NULL */
};

nb_status nb_eager_optimizer_new(nb_eager_optimizer **out, const nb_optimizer *opt)
{
    if (out) *out = NULL;
    if (!out) return nb_error(NB_ERR_ARG, "eager optimizer: NULL result");
    nb_status st = nb_optimizer_check(opt);
    double lr;
    if (!st) st = nb_lr_at(&opt->schedule, opt->lr, 1, &lr);
    if (st) return st;
    nb_eager_optimizer *o = nb_calloc(1, sizeof *o);
    if (!o) return nb_error(NB_ERR_NOMEM, "eager optimizer: out of memory");
    o->opt = *opt;
    nb_strmap_init(&o->state);
    if (opt->schedule.kind && !(o->schedule_kind = nb_strdup(opt->schedule.kind))) {
        nb_eager_optimizer_free(o);
        return nb_error(NB_ERR_NOMEM, "eager optimizer: out of memory");
    }
    o->opt.schedule.kind = o->schedule_kind;
    if ((st = nb_builder_new_eager(&o->scratch))) {
        nb_eager_optimizer_free(o);
        return st;
    }
    *out = o;
    return NB_OK;
}

void nb_eager_optimizer_free(nb_eager_optimizer *o)
{
    if (!o) return;
    for (int i = 0; i < o->state.n; i++) {
        param_state *ps = o->state.vals[i];
        if (!o->state.keys[i] || !ps) continue;
        for (int k = 0; k < ps->n; k++) nb_tensor_release(ps->s[k]);
        nb_free(ps);
    }
    nb_strmap_free(&o->state);
    nb_builder_free(o->scratch);
    nb_free(o->schedule_kind);
    nb_free(o);
}

const nb_optimizer *nb_eager_optimizer_options(const nb_eager_optimizer *o) { return &o->opt; }
const void *nb_eager_optimizer_stepper(const nb_eager_optimizer *o) { return o->stepped_by; }
void nb_eager_optimizer_set_stepper(nb_eager_optimizer *o, const void *by) { o->stepped_by = by; }
int64_t nb_eager_optimizer_steps(const nb_eager_optimizer *o) { return o ? o->steps : 0; }
double nb_eager_optimizer_lr(const nb_eager_optimizer *o) { return o ? o->lr : 0; }

int64_t nb_eager_optimizer_state_bytes(const nb_eager_optimizer *o)
{
    int64_t bytes = 0;
    for (int i = 0; o && i < o->state.n; i++) {
        const param_state *ps = o->state.vals[i];
        if (!o->state.keys[i] || !ps) continue;
        for (int k = 0; k < ps->n; k++) bytes += nb_tensor_numel(ps->s[k]) * (int64_t)nb_dtype_size(ps->s[k]->dtype);
    }
    return bytes;
}

void nb_eager_zero_grad(nb_builder *eager)
{
    for (int i = 0, n = nb_eager_param_count(eager); i < n; i++) nb_tensor_zero_grad(nb_eager_param_at(eager, i));
}

/* ---- state ------------------------------------------------------------------------------ */

static nb_status add_state(param_state *ps, const nb_tensor *p, bool scalar, double value)
{
    const int64_t one = 1;
    return nb_tensor_full(&ps->s[ps->n++], p->dtype, scalar ? 1 : p->ndim, scalar ? &one : p->shape, value);
}

/* What nb_minimize's startup gives a parameter (see plan_update there). */
static nb_status make_state(const nb_optimizer *o, const nb_tensor *p, param_state *ps)
{
    nb_status st = NB_OK;
    switch (o->kind) {
    case NB_SGD: break;
    case NB_MOMENTUM: st = add_state(ps, p, false, 0.0); break;
    case NB_ADAM:
    case NB_ADAMW:
        /* Moments, then beta^t of the current update t: beta at the first. */
        if (!(st = add_state(ps, p, false, 0.0)) && !(st = add_state(ps, p, false, 0.0)) &&
            !(st = add_state(ps, p, true, o->beta1)))
            st = add_state(ps, p, true, o->beta2);
        break;
    case NB_RMSPROP:
        /* Mean square; a moment with momentum (a centered one needs it too); the mean gradient when centered. */
        st = add_state(ps, p, false, 0.0);
        if (!st && (o->momentum != 0 || o->centered)) st = add_state(ps, p, false, 0.0);
        if (!st && o->centered) st = add_state(ps, p, false, 0.0);
        break;
    case NB_ADAGRAD: st = add_state(ps, p, false, o->initial_accumulator_value); break;
    }
    return st;
}

/* The state of parameter `name`, made on first use; it must still fit p. */
static nb_status state_of(nb_eager_optimizer *o, const char *name, const nb_tensor *p, param_state **out)
{
    param_state *ps = nb_strmap_get(&o->state, name, NULL);
    if (ps) {
        const nb_tensor *s = ps->n ? ps->s[0] : NULL;
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        if (s && (s->dtype != p->dtype || !nb_shape_equal(s->ndim, s->shape, p->ndim, p->shape)))
            return nb_error(NB_ERR_SHAPE, "eager optimizer: parameter '%s' is %s %s, but its state was made for %s %s",
                            name, nb_dtype_name(p->dtype), nb_shape_str(a, sizeof a, p->ndim, p->shape),
                            nb_dtype_name(s->dtype), nb_shape_str(b, sizeof b, s->ndim, s->shape));
        *out = ps;
        return NB_OK;
    }
    if (!(ps = nb_calloc(1, sizeof *ps))) return nb_error(NB_ERR_NOMEM, "eager optimizer: out of memory");
    nb_status st = make_state(&o->opt, p, ps);
    if (!st && nb_strmap_put(&o->state, name, ps)) st = nb_error(NB_ERR_NOMEM, "eager optimizer: out of memory");
    if (st) {
        for (int k = 0; k < ps->n; k++) nb_tensor_release(ps->s[k]);
        nb_free(ps);
        return st;
    }
    *out = ps;
    return NB_OK;
}

/* v[0] + ... + v[n-1], overwriting v. An eager op takes at most 64
 * inputs, so a model with more parameters adds its parts up in groups. */
static nb_value sum_all(nb_builder *b, int n, nb_value *v)
{
    enum { GROUP = 32 };
    while (n > 1) {
        int m = 0;
        for (int i = 0; i < n; i += GROUP) {
            const int k = n - i < GROUP ? n - i : GROUP;
            v[m++] = k == 1 ? v[i] : nb_sum(b, k, v + i);
        }
        n = m;
    }
    return v[0];
}

/* ---- gradients: L2 and clipping, as clip.c builds them --------------------------------- */

typedef struct item {
    const char *name;
    nb_tensor *param;
    nb_value grad; /* in the scratch builder; after the transforms, what the update reads */
    param_state *state;
} item;

/* c / max(norm, c). */
static nb_value clip_factor(nb_builder *b, double c, nb_value norm, nb_dtype dt)
{
    nb_value bound = nb_fill_constant(b, dt, 0, NULL, c);
    return nb_div(b, bound, nb_maximum(b, norm, bound));
}

static nb_value sum_squares(nb_builder *b, nb_value g) { return nb_reduce_sum(b, nb_square(b, g), 0, NULL, false); }

static nb_status transform_grads(const nb_optimizer *opt, nb_builder *b, int n, item *it, nb_dtype lr_dtype)
{
    if (opt->l2 != 0)
        for (int i = 0; i < n; i++)
            it[i].grad = nb_add(b, it[i].grad, nb_scale(b, nb_eager_value(b, it[i].param), opt->l2, 0.0));
    switch (opt->clip) {
    case NB_CLIP_NONE: break;
    case NB_CLIP_VALUE:
        for (int i = 0; i < n; i++) it[i].grad = nb_clip(b, it[i].grad, -opt->clip_value, opt->clip_value);
        break;
    case NB_CLIP_NORM:
        for (int i = 0; i < n; i++) {
            nb_dtype dt = nb_value_info(b, it[i].grad).dtype;
            nb_value norm = nb_sqrt(b, sum_squares(b, it[i].grad));
            it[i].grad = nb_mul(b, it[i].grad, clip_factor(b, opt->clip_value, norm, dt));
        }
        break;
    case NB_CLIP_GLOBAL_NORM: {
        /* One norm over every gradient, summed in the learning rate's dtype. */
        nb_value *parts = nb_calloc((size_t)n, sizeof *parts);
        if (!parts) return nb_error(NB_ERR_NOMEM, "eager optimizer: out of memory");
        for (int i = 0; i < n; i++) {
            parts[i] = sum_squares(b, it[i].grad);
            if (nb_value_info(b, it[i].grad).dtype != lr_dtype) parts[i] = nb_cast(b, parts[i], lr_dtype);
        }
        nb_value total = sum_all(b, n, parts);
        nb_free(parts);
        nb_value factor = clip_factor(b, opt->clip_value, nb_sqrt(b, total), lr_dtype);
        for (int i = 0; i < n; i++) {
            nb_value f = factor;
            nb_dtype dt = nb_value_info(b, it[i].grad).dtype;
            if (dt != lr_dtype) f = nb_cast(b, f, dt);
            it[i].grad = nb_mul(b, it[i].grad, f);
        }
        break;
    }
    }
    nb_status st = nb_builder_status(b);
    return st ? nb_error(st, "eager optimizer: L2 or clipping: %s", nb_builder_error(b)) : NB_OK;
}

/* ---- the update ------------------------------------------------------------------------- */

static const char *update_op(nb_optimizer_kind k)
{
    static const char *const ops[] = {"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"};
    return ops[k];
}

/* The update op's attrs, as plan_update gives them. */
static int update_attrs(const nb_optimizer *o, int ndim, nb_attr *a)
{
    switch (o->kind) {
    case NB_SGD: return 0;
    case NB_MOMENTUM:
        a[0] = NB_ATTR_FLOAT("mu", o->momentum);
        a[1] = NB_ATTR_BOOL("use_nesterov", o->nesterov);
        return 2;
    case NB_ADAM:
    case NB_ADAMW:
        a[0] = NB_ATTR_FLOAT("beta1", o->beta1);
        a[1] = NB_ATTR_FLOAT("beta2", o->beta2);
        a[2] = NB_ATTR_FLOAT("epsilon", o->epsilon);
        a[3] = NB_ATTR_FLOAT("weight_decay", nb_optim_weight_decay(o, ndim));
        return 4;
    case NB_RMSPROP:
        a[0] = NB_ATTR_FLOAT("rho", o->rho);
        a[1] = NB_ATTR_FLOAT("epsilon", o->epsilon);
        a[2] = NB_ATTR_FLOAT("momentum", o->momentum);
        a[3] = NB_ATTR_BOOL("centered", o->centered);
        return 4;
    case NB_ADAGRAD: a[0] = NB_ATTR_FLOAT("epsilon", o->epsilon); return 1;
    }
    return 0;
}

/* Runs the update of one parameter with its outputs the parameter and state
 * themselves. Inputs in slot order: Param, Grad, then the state with
 * LearningRate at its place (after the velocity, the moments, the mean
 * square or the accumulator: index 2 + the state before it). */
static nb_status run_update(const nb_optimizer *o, item *it, nb_tensor *lr)
{
    nb_tensor *in[2 + MAX_STATE + 1], *out[1 + MAX_STATE];
    const int lr_at = o->kind == NB_SGD ? 2 : (o->kind == NB_ADAM || o->kind == NB_ADAMW) ? 4 : 3;
    int n_in = 0;
    in[n_in++] = it->param;
    in[n_in++] = nb_eager_tensor(it->grad);
    out[0] = it->param;
    for (int k = 0; k < it->state->n; k++) {
        if (n_in == lr_at) in[n_in++] = lr;
        in[n_in++] = it->state->s[k];
        out[1 + k] = it->state->s[k];
    }
    if (n_in == lr_at) in[n_in++] = lr;
    nb_attr attrs[4];
    const int n_attrs = update_attrs(o, it->param->ndim, attrs);
    const char *type = update_op(o->kind);
    nb_status st = nb_op_run(type, NB_TENSORS_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), 1 + it->state->n, out);
    if (st) return nb_error(st, "eager optimizer: updating '%s': %s", it->name, nb_last_error());
    for (int k = 0; k <= it->state->n; k++) {
        out[k]->storage->version++;
        out[k]->storage->last_writer = nb_op_find(type)->name;
    }
    return NB_OK;
}

/* Checks the gradient of parameter p before anything is written. */
static nb_status check_grad(const char *name, const nb_tensor *p, const nb_tensor *g)
{
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (g->dtype == p->dtype && nb_shape_equal(g->ndim, g->shape, p->ndim, p->shape)) return NB_OK;
    return nb_error(g->dtype != p->dtype ? NB_ERR_DTYPE : NB_ERR_SHAPE,
                    "eager optimizer: parameter '%s' is %s %s but its gradient is %s %s", name, nb_dtype_name(p->dtype),
                    nb_shape_str(a, sizeof a, p->ndim, p->shape), nb_dtype_name(g->dtype),
                    nb_shape_str(b, sizeof b, g->ndim, g->shape));
}

nb_status nb_eager_optimizer_update(nb_eager_optimizer *o, nb_builder *eager, int n_idx, const int *idx, bool last)
{
    const int n_params = o ? nb_eager_param_count(eager) : -1;
    if (n_params < 0) return nb_error(NB_ERR_ARG, "eager optimizer step: needs an optimizer and an eager builder");
    int n_all = idx ? n_idx : n_params;
    item *it = nb_calloc((size_t)n_all + 1, sizeof *it);
    if (!it) return nb_error(NB_ERR_NOMEM, "eager optimizer: out of memory");
    nb_builder *b = o->scratch;
    nb_grad_mode_push(false);
    nb_status st = NB_OK;
    nb_dtype lr_dtype = NB_F32;
    int n = 0;
    for (int j = 0; j < n_all && !st; j++) {
        int i = idx ? idx[j] : j;
        nb_tensor *p = nb_eager_param_at(eager, i), *g = nb_tensor_grad(p);
        if (!nb_tensor_requires_grad(p) || !g) continue;
        item *x = &it[n++];
        x->name = nb_eager_param_name(eager, i);
        x->param = p;
        if (p->dtype == NB_F64) lr_dtype = NB_F64;
        if (!(st = check_grad(x->name, p, g)) && !(st = state_of(o, x->name, p, &x->state))) {
            x->grad = nb_eager_value(b, g);
            if (!(st = nb_builder_status(b)) && (p->dtype != NB_F32 && p->dtype != NB_F64))
                st = nb_error(NB_ERR_DTYPE, "eager optimizer: parameter '%s' is %s; updates need float32 or float64",
                              x->name, nb_dtype_name(p->dtype));
        }
    }
    /* A step in parts reads the learning rate in the dtype the whole step
     * would (after nb_ddp_backward every parameter has a gradient). */
    for (int i = 0; idx && i < n_params; i++) {
        nb_tensor *p = nb_eager_param_at(eager, i);
        if (nb_tensor_requires_grad(p) && p->dtype == NB_F64) lr_dtype = NB_F64;
    }
    nb_tensor *lr = NULL;
    double lr_value = 0;
    if (!st && n > 0) st = transform_grads(&o->opt, b, n, it, lr_dtype);
    if (!st && n > 0) st = nb_lr_at(&o->opt.schedule, o->opt.lr, o->steps + 1, &lr_value);
    if (!st && n > 0) st = nb_tensor_full(&lr, lr_dtype, 1, (const int64_t[]){1}, lr_value);
    for (int i = 0; i < n && !st; i++) {
        st = run_update(&o->opt, &it[i], lr);
        nb_comm_progress(); /* an all-reduce nb_ddp_step left open */
    }
    if (!st && n > 0) {
        o->updated = true;
        o->lr = lr_value;
    }
    if (last) {
        if (o->updated) o->steps++;
        o->updated = false;
    }
    nb_tensor_release(lr);
    nb_eager_release_values(b);
    nb_builder_clear_error(b);
    nb_grad_mode_pop();
    nb_free(it);
    return st;
}

nb_status nb_eager_optimizer_step(nb_eager_optimizer *o, nb_builder *eager)
{
    if (o && o->stepped_by) /* the gradients of its last buckets may not be averaged yet */
        return nb_error(NB_ERR_STATE,
                        "eager optimizer step: an nb_ddp steps this optimizer (nb_ddp_set_optimizer); "
                        "call nb_ddp_step after nb_ddp_backward instead");
    return nb_eager_optimizer_update(o, eager, 0, NULL, true);
}
