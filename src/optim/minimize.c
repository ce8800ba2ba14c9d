/* nb_minimize: the gradient part, then the optimisation part, of a training
 * program; and the queries that find the optimiser's vars again. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/data_parallel.h"
#include "optim_internal.h"

nb_status nb_optim_create_state(nb_optim_ctx *c, const char *prefix, nb_dtype dtype, int ndim, const int64_t *shape,
                                double value, char *name)
{
    if (strlen(prefix) + 24 > NB_OPTIM_NAME_MAX)
        return nb_error(NB_ERR_ARG, "minimize: var name '%s...' is too long", prefix);
    nb_status st = nb_program_unique_name(c->main, prefix, name, NB_OPTIM_NAME_MAX);
    nb_var *v, *sv;
    if (!st) st = nb_block_create_var(c->mb, name, dtype, ndim, shape, &v);
    if (!st) st = nb_block_create_var(c->sb, name, dtype, ndim, shape, &sv);
    if (st) return st;
    v->persistable = sv->persistable = true;
    v->stop_gradient = sv->stop_gradient = true;
    const char *out = name;
    nb_attr attrs[] = {NB_ATTR_INTS_N("shape", ndim, shape), NB_ATTR_INT("dtype", dtype),
                       NB_ATTR_FLOAT("value", value)};
    nb_op *op;
    if ((st = nb_block_append_op(c->sb, "fill_constant", NB_NO_NAMES, NB_NAMES_N(1, &out), NB_ATTRS_N(3, attrs), &op)))
        return st;
    op->role = NB_ROLE_STARTUP;
    return NB_OK;
}

nb_status nb_optim_mark(nb_optim_ctx *c, int from, const char *param, const char *grad)
{
    for (int i = from; i < c->mb->n_ops; i++) {
        nb_op *op = c->mb->ops[i];
        op->role = NB_ROLE_OPTIMIZE;
        if (!param) continue;
        char *p = nb_strdup(param), *g = nb_strdup(grad);
        if (!p || !g) {
            nb_free(p);
            nb_free(g);
            return nb_error(NB_ERR_NOMEM, "minimize: out of memory");
        }
        nb_free(op->role_var[0]);
        nb_free(op->role_var[1]);
        op->role_var[0] = p;
        op->role_var[1] = g;
    }
    return NB_OK;
}

/* ---- the update op of one parameter -------------------------------------------------- */

typedef struct update {
    const char *type;
    const char *in[7];
    const char *out[5];
    int n_in, n_out;
    nb_attr attrs[4];
    int n_attrs;
    char state[4][NB_OPTIM_NAME_MAX];
} update;

/* A state var "<param>_<what>_<k>" shaped like the parameter. */
static nb_status state_like(nb_optim_ctx *c, const nb_var *p, const char *what, double value, char *name)
{
    char prefix[NB_OPTIM_NAME_MAX];
    if (snprintf(prefix, sizeof prefix, "%s_%s", p->name, what) >= (int)sizeof prefix)
        return nb_error(NB_ERR_ARG, "minimize: parameter name '%s' is too long", p->name);
    return nb_optim_create_state(c, prefix, p->dtype, p->ndim, p->shape, value, name);
}

static nb_status state_scalar(nb_optim_ctx *c, const nb_var *p, const char *what, double value, char *name)
{
    char prefix[NB_OPTIM_NAME_MAX];
    if (snprintf(prefix, sizeof prefix, "%s_%s", p->name, what) >= (int)sizeof prefix)
        return nb_error(NB_ERR_ARG, "minimize: parameter name '%s' is too long", p->name);
    return nb_optim_create_state(c, prefix, p->dtype, 1, (const int64_t[]){1}, value, name);
}

/* Fills u's slots: Param, Grad, then the kind's state and LearningRate in
 * the op's slot order; outputs are the same vars, in place. */
static nb_status plan_update(nb_optim_ctx *c, const nb_var *p, const char *grad, update *u)
{
    const nb_optimizer *o = c->opt;
    char(*s)[NB_OPTIM_NAME_MAX] = u->state;
    nb_status st = NB_OK;
    u->in[0] = u->out[0] = p->name;
    u->in[1] = grad;
    u->n_out = 1;
    switch (o->kind) {
    case NB_SGD:
        u->type = "sgd";
        u->in[2] = c->lr;
        u->n_in = 3;
        break;
    case NB_MOMENTUM:
        u->type = "momentum";
        st = state_like(c, p, "velocity", 0.0, s[0]);
        u->in[2] = u->out[1] = s[0];
        u->in[3] = c->lr;
        u->n_in = 4, u->n_out = 2;
        u->attrs[0] = NB_ATTR_FLOAT("mu", o->momentum);
        u->attrs[1] = NB_ATTR_BOOL("use_nesterov", o->nesterov);
        u->n_attrs = 2;
        break;
    case NB_ADAM:
    case NB_ADAMW:
        u->type = o->kind == NB_ADAM ? "adam" : "adamw";
        st = state_like(c, p, "moment1", 0.0, s[0]);
        if (!st) st = state_like(c, p, "moment2", 0.0, s[1]);
        /* beta^t of the current update t: beta at the first. */
        if (!st) st = state_scalar(c, p, "beta1_pow", o->beta1, s[2]);
        if (!st) st = state_scalar(c, p, "beta2_pow", o->beta2, s[3]);
        u->in[2] = u->out[1] = s[0];
        u->in[3] = u->out[2] = s[1];
        u->in[4] = c->lr;
        u->in[5] = u->out[3] = s[2];
        u->in[6] = u->out[4] = s[3];
        u->n_in = 7, u->n_out = 5;
        u->attrs[0] = NB_ATTR_FLOAT("beta1", o->beta1);
        u->attrs[1] = NB_ATTR_FLOAT("beta2", o->beta2);
        u->attrs[2] = NB_ATTR_FLOAT("epsilon", o->epsilon);
        u->attrs[3] = NB_ATTR_FLOAT("weight_decay", nb_optim_weight_decay(o, p->ndim));
        u->n_attrs = 4;
        break;
    case NB_RMSPROP: {
        u->type = "rmsprop";
        /* A centered rmsprop needs the Moment slot too (see the op). */
        bool mom = o->momentum != 0 || o->centered;
        st = state_like(c, p, "mean_square", 0.0, s[0]);
        if (!st && mom) st = state_like(c, p, "moment", 0.0, s[1]);
        if (!st && o->centered) st = state_like(c, p, "mean_grad", 0.0, s[2]);
        u->in[2] = u->out[1] = s[0];
        u->in[3] = c->lr;
        u->n_in = 4, u->n_out = 2;
        if (mom) u->in[u->n_in++] = u->out[u->n_out++] = s[1];
        if (o->centered) u->in[u->n_in++] = u->out[u->n_out++] = s[2];
        u->attrs[0] = NB_ATTR_FLOAT("rho", o->rho);
        u->attrs[1] = NB_ATTR_FLOAT("epsilon", o->epsilon);
        u->attrs[2] = NB_ATTR_FLOAT("momentum", o->momentum);
        u->attrs[3] = NB_ATTR_BOOL("centered", o->centered);
        u->n_attrs = 4;
        break;
    }
    case NB_ADAGRAD:
        u->type = "adagrad";
        st = state_like(c, p, "accumulator", o->initial_accumulator_value, s[0]);
        u->in[2] = u->out[1] = s[0];
        u->in[3] = c->lr;
        u->n_in = 4, u->n_out = 2;
        u->attrs[0] = NB_ATTR_FLOAT("epsilon", o->epsilon);
        u->n_attrs = 1;
        break;
    }
    return st;
}

static nb_status append_update(nb_optim_ctx *c, const char *param, const char *grad)
{
    const nb_var *p = nb_block_find_var(c->mb, param);
    if (!p) return nb_error(NB_ERR_NOT_FOUND, "minimize: no parameter named '%s' in block 0", param);
    update *u = nb_calloc(1, sizeof *u);
    if (!u) return nb_error(NB_ERR_NOMEM, "minimize: out of memory");
    int from = c->mb->n_ops;
    nb_status st = plan_update(c, p, grad, u);
    if (!st)
        st = nb_block_append_op(c->mb, u->type, NB_NAMES_N(u->n_in, u->in), NB_NAMES_N(u->n_out, u->out),
                                NB_ATTRS_N(u->n_attrs, u->attrs), NULL);
    if (!st) st = nb_optim_mark(c, from, param, grad);
    nb_free(u);
    return st;
}

/* ---- nb_minimize ------------------------------------------------------------------------ */

/* The optimisation part, once the gradients exist. */
static nb_status append_optimize(nb_optim_ctx *c, nb_backward_result *r)
{
    int n = r->n_pairs;
    const char **params = nb_calloc((size_t)n + 1, sizeof *params);
    char **grads = nb_calloc((size_t)n + 1, sizeof *grads);
    nb_status st = params && grads ? NB_OK : nb_error(NB_ERR_NOMEM, "minimize: out of memory");
    c->lr_dtype = NB_F32;
    for (int i = 0; i < n && !st; i++) {
        params[i] = r->pairs[i].param;
        if (!(grads[i] = nb_strdup(r->pairs[i].grad))) st = nb_error(NB_ERR_NOMEM, "minimize: out of memory");
        const nb_var *v = nb_block_find_var(c->mb, params[i]);
        if (v && v->dtype == NB_F64) c->lr_dtype = NB_F64;
    }
    if (!st) st = nb_builder_new_record(&c->b, c->main, c->startup);
    if (!st) {
        nb_builder_set_role(c->b, NB_ROLE_OPTIMIZE);
        st = nb_optim_append_lr(c);
    }
    if (!st) st = nb_optim_transform_grads(c, n, params, grads);
    for (int i = 0; i < n && !st; i++) st = append_update(c, params[i], grads[i]);
    /* The pairs now name the gradients the updates read. */
    for (int i = 0; i < n && !st; i++) {
        nb_free((char *)r->pairs[i].grad);
        r->pairs[i].grad = grads[i];
        grads[i] = NULL;
    }
    for (int i = 0; grads && i < n; i++) nb_free(grads[i]);
    nb_free(grads);
    nb_free(params);
    nb_builder_free(c->b);
    c->b = NULL;
    return st;
}

/* ---- updates as soon as their gradients are final ----------------------------------------
 *
 * Each parameter's optimisation ops (L2, its clipping, its update) need only
 * its own gradient, so they can run as soon as nothing before the
 * optimisation part reads the parameter or touches the gradient any more,
 * instead of after the whole backward pass. The executor then frees each
 * gradient right after its update, and the step never holds all gradients
 * at once (PyTorch keeps every .grad until optimizer.step()). The same ops
 * run on the same values: results do not change by a bit. Clipping by
 * global norm needs every gradient first, so it keeps the order as it is. */

typedef struct group {
    const char *param;
    int after; /* the last op before the optimisation part that touches its vars */
} group;

static bool op_touches(const nb_op *op, const nb_op *other)
{
    for (int i = 0; i < nb_op_n_inputs(other) + nb_op_n_outputs(other); i++) {
        const char *v = i < nb_op_n_inputs(other) ? other->inputs[i] : other->outputs[i - nb_op_n_inputs(other)];
        for (int k = 0; k < nb_op_n_inputs(op); k++)
            if (!strcmp(op->inputs[k], v)) return true;
        for (int k = 0; k < nb_op_n_outputs(op); k++)
            if (!strcmp(op->outputs[k], v)) return true;
    }
    return false;
}

static nb_status interleave_updates(nb_optim_ctx *c, int opt_begin)
{
    nb_block *b = c->mb;
    int n = b->n_ops, n_groups = 0;
    group *g = nb_calloc((size_t)(n - opt_begin) + 1, sizeof *g);
    nb_op **order = nb_calloc((size_t)n + 1, sizeof *order);
    if (!g || !order) {
        nb_free(g);
        nb_free(order);
        return nb_error(NB_ERR_NOMEM, "minimize: out of memory");
    }
    for (int j = opt_begin; j < n; j++) {
        const nb_op *op = b->ops[j];
        if (!op->role_var[0]) continue; /* the counter and the learning rate */
        int k = 0;
        while (k < n_groups && strcmp(g[k].param, op->role_var[0])) k++;
        if (k == n_groups) g[n_groups++] = (group){op->role_var[0], -1};
        for (int i = opt_begin - 1; i > g[k].after; i--)
            if (op_touches(b->ops[i], op)) {
                g[k].after = i;
                break;
            }
    }
    /* The new order: the ops before the optimisation part, with each
     * group's ops after its `after`, the counter and learning rate before
     * the first of them. */
    int first = opt_begin - 1, m = 0;
    for (int k = 0; k < n_groups; k++)
        if (g[k].after < first) first = g[k].after;
    for (int i = -1; i < opt_begin; i++) {
        if (i >= 0) order[m++] = b->ops[i];
        if (i == first)
            for (int j = opt_begin; j < n; j++)
                if (!b->ops[j]->role_var[0]) order[m++] = b->ops[j];
        for (int k = 0; k < n_groups; k++)
            if (g[k].after == i)
                for (int j = opt_begin; j < n; j++)
                    if (b->ops[j]->role_var[0] && !strcmp(b->ops[j]->role_var[0], g[k].param)) order[m++] = b->ops[j];
    }
    nb_status st = m == n ? NB_OK : nb_error(NB_ERR_STATE, "minimize: reordering lost ops (%d of %d)", m, n);
    if (!st) {
        memcpy(b->ops, order, (size_t)n * sizeof *order);
        c->main->version++;
    }
    nb_free(g);
    nb_free(order);
    return st;
}

/* The parameters to update: the caller's, less the frozen ones. */
static nb_status select_params(nb_block *mb, int n_params, const char *const *params, const char ***sel, int *n_sel)
{
    *sel = NULL;
    *n_sel = 0;
    if (n_params == 0) return NB_OK; /* nb_append_backward takes every trainable one */
    const char **s = nb_calloc((size_t)n_params, sizeof *s);
    if (!s) return nb_error(NB_ERR_NOMEM, "minimize: out of memory");
    int n = 0;
    for (int i = 0; i < n_params; i++) {
        const nb_var *v = params[i] ? nb_block_find_var(mb, params[i]) : NULL;
        if (!v) {
            nb_free(s);
            return nb_error(NB_ERR_NOT_FOUND, "minimize: no var named '%s' in block 0 to optimise",
                            params[i] ? params[i] : "(null)");
        }
        if (v->is_parameter && !v->trainable) continue;
        if (!v->persistable) {
            nb_free(s);
            return nb_error(NB_ERR_ARG, "minimize: '%s' is not persistable, so an update of it would not last",
                            v->name);
        }
        s[n++] = params[i];
    }
    if (n == 0) {
        nb_free(s);
        return nb_error(NB_ERR_ARG, "minimize: every parameter listed is frozen (trainable = false)");
    }
    *sel = s;
    *n_sel = n;
    return NB_OK;
}

nb_status nb_minimize(const nb_optimizer *opt, nb_program *main, nb_program *startup, const char *loss,
                      const nb_backward_opts *opts, nb_backward_result *out)
{
    static const nb_backward_opts defaults;
    if (!opts) opts = &defaults;
    int n_params = opts->params.n, n_no_grad = opts->no_grad.n;
    const char *const *params = opts->params.v, *const *no_grad = opts->no_grad.v;
    if (out) memset(out, 0, sizeof *out);
    if (!opt || !main || !startup || !loss || !out || n_params < 0 || (n_params && !params) || n_no_grad < 0 ||
        (n_no_grad && !no_grad))
        return nb_error(NB_ERR_ARG, "minimize: need an optimizer, main and startup programs, a loss and a result");
    if (main == startup) return nb_error(NB_ERR_ARG, "minimize: main and startup must be different programs");
    nb_status st = nb_optimizer_check(opt);
    if (st) return st;
    nb_optim_ctx c = {.opt = opt,
                      .main = main,
                      .startup = startup,
                      .mb = nb_program_global_block(main),
                      .sb = nb_program_global_block(startup)};
    const int main_ops = c.mb->n_ops, startup_ops = c.sb->n_ops;
    const char **sel;
    int n_sel;
    if ((st = select_params(c.mb, n_params, params, &sel, &n_sel))) return st;
    st = nb_append_backward(main, loss,
                            &(nb_backward_opts){.params = NB_NAMES_N(n_sel, sel),
                                                .no_grad = opts->no_grad,
                                                .checkpoints = opts->checkpoints,
                                                .recompute_segments = opts->recompute_segments},
                            out);
    nb_free(sel);
    if (st) return st;
    if (out->n_pairs == 0)
        st = nb_error(NB_ERR_ARG, "minimize: loss '%s' depends on none of the parameters to optimise", loss);
    if (!st && opt->data_parallel) st = nb_data_parallel(main, startup, loss, out, opt->data_parallel);
    const int opt_begin = c.mb->n_ops;
    if (!st) st = append_optimize(&c, out);
    if (!st && opt->clip != NB_CLIP_GLOBAL_NORM) st = interleave_updates(&c, opt_begin);
    if (st) {
        while (c.mb->n_ops > main_ops) nb_block_remove_op(c.mb, c.mb->n_ops - 1);
        while (c.sb->n_ops > startup_ops) nb_block_remove_op(c.sb, c.sb->n_ops - 1);
        nb_backward_result_free(out);
    }
    return st;
}

/* ---- finding the optimiser's vars ---------------------------------------------------------- */

nb_status nb_optimizer_state_vars(const nb_program *p, int *n, const char ***names)
{
    if (n) *n = 0;
    if (names) *names = NULL;
    if (!p || !n || !names) return nb_error(NB_ERR_ARG, "optimizer_state_vars: NULL argument");
    nb_block *b = p->n_blocks > 0 ? p->blocks[0] : NULL;
    if (!b) return NB_OK;
    const char **list = nb_calloc((size_t)b->n_vars + 1, sizeof *list);
    if (!list) return nb_error(NB_ERR_NOMEM, "optimizer_state_vars: out of memory");
    int k = 0;
    for (int i = 0; i < b->n_ops; i++) {
        const nb_op *op = b->ops[i];
        if (op->role != NB_ROLE_OPTIMIZE) continue;
        for (int j = 0; j < nb_op_n_outputs(op); j++) {
            const nb_var *v = nb_block_find_var(b, op->outputs[j]);
            if (!v || !v->persistable || v->is_parameter) continue;
            bool seen = false;
            for (int m = 0; m < k && !seen; m++) seen = !strcmp(list[m], v->name);
            if (!seen && k < b->n_vars) list[k++] = v->name;
        }
    }
    *n = k;
    *names = list;
    return NB_OK;
}

const char *nb_optimizer_lr_var(const nb_program *p)
{
    nb_block *b = p && p->n_blocks > 0 ? p->blocks[0] : NULL;
    for (int i = b ? b->n_ops - 1 : -1; i >= 0; i--)
        if (!strcmp(b->ops[i]->def->name, "lr_schedule") && nb_op_n_outputs(b->ops[i]) > 0)
            return b->ops[i]->outputs[0];
    return NULL;
}
