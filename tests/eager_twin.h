/* One model, both ways: a static program (record builder, startup, scope,
 * executor) and an eager builder running the same model function, with the
 * eager parameters set to the values the static startup drew. Used by the
 * eager layer, optimiser and training tests. */
#ifndef NABLA_EAGER_TWIN_H
#define NABLA_EAGER_TWIN_H

#include <stdlib.h>
#include "test.h"
#include "nabla/eager.h"
#include "nabla/layers.h"
#include "nabla/optimizer.h"

/* Ends the test when cond fails (for steps later ones depend on). */
#define REQUIRE(cond)         \
    do {                      \
        CHECK(cond);          \
        if (!(cond)) return;  \
    } while (0)

/* A model: the loss (or output) of inputs x and label (label may be NB_NONE). */
typedef nb_value (*twin_model_fn)(nb_builder *b, nb_value x, nb_value label);

typedef struct twin {
    nb_program *main, *startup;
    nb_builder *rec, *eager;
    nb_scope *scope;
    nb_executor *ex;
    nb_tensor *x, *label; /* the inputs (owned) */
    char out[128];        /* the model's result var in the program */
} twin;

/* Builds the program of fn (seeded), runs its startup, and makes an eager
 * builder whose parameters (and state) hold the same values. With opt, the
 * program gets nb_minimize's parts too (and *r their result); r alone asks
 * for nb_append_backward. */
static inline bool twin_init(twin *t, twin_model_fn fn, nb_tensor *x, nb_tensor *label, const nb_optimizer *opt,
                             nb_backward_result *r)
{
    memset(t, 0, sizeof *t);
    t->x = x;
    t->label = label;
    CHECK_OK(nb_program_new(&t->main));
    CHECK_OK(nb_program_new(&t->startup));
    nb_program_set_seed(t->startup, 11);
    nb_program_set_seed(t->main, 11);
    CHECK_OK(nb_builder_new_record(&t->rec, t->main, t->startup));
    CHECK_OK(nb_scope_new(&t->scope, NULL));
    CHECK_OK(nb_executor_new(&t->ex));
    CHECK_OK(nb_builder_new_eager(&t->eager));
    if (!t->main || !t->startup || !t->rec || !t->scope || !t->ex || !t->eager) return false;
    nb_eager_set_seed(t->eager, 11);
    int64_t xs[NB_MAX_DIMS], ls[NB_MAX_DIMS];
    memcpy(xs, x->shape, sizeof xs);
    xs[0] = -1;
    nb_value xv = nb_layer_data(t->rec, "x", x->dtype, x->ndim, xs), lv = NB_NONE;
    if (label) {
        memcpy(ls, label->shape, sizeof ls);
        ls[0] = -1;
        lv = nb_layer_data(t->rec, "label", label->dtype, label->ndim, ls);
    }
    nb_value out = fn(t->rec, xv, lv);
    if (nb_builder_status(t->rec)) {
        fprintf(stderr, "  static model: %s\n", nb_builder_error(t->rec));
        CHECK(false);
        return false;
    }
    snprintf(t->out, sizeof t->out, "%s", nb_value_name(out));
    nb_status st = NB_OK;
    if (opt) st = nb_minimize(opt, t->main, t->startup, t->out, NULL, r);
    else if (r) st = nb_append_backward(t->main, t->out, NULL, r);
    CHECK_OK(st);
    if (st) return false;
    CHECK_OK(st = nb_executor_run(t->ex, t->startup, t->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    if (st) return false;
    /* The eager model's first call makes its parameters; then they take the
     * static values, name by name. */
    fn(t->eager, nb_eager_value(t->eager, x), label ? nb_eager_value(t->eager, label) : NB_NONE);
    if (nb_builder_status(t->eager)) {
        fprintf(stderr, "  eager model: %s\n", nb_builder_error(t->eager));
        CHECK(false);
        return false;
    }
    nb_eager_release_values(t->eager);
    for (int i = 0; i < nb_eager_param_count(t->eager); i++) {
        const char *name = nb_eager_param_name(t->eager, i);
        nb_tensor *s = nb_scope_find(t->scope, name);
        CHECK(s != NULL);
        if (!s) return false;
        CHECK_OK(st = nb_tensor_copy_into(nb_eager_param_at(t->eager, i), s));
        if (st) return false;
    }
    return true;
}

static inline void twin_free(twin *t)
{
    nb_builder_free(t->eager);
    nb_executor_free(t->ex);
    nb_scope_free(t->scope);
    nb_builder_free(t->rec);
    nb_program_free(t->startup);
    nb_program_free(t->main);
    nb_tensor_release(t->x);
    nb_tensor_release(t->label);
}

/* One run of the static main program fetching n names (new references). */
static inline nb_status twin_run(twin *t, int n, const char *const *names, nb_tensor **out)
{
    nb_feed feeds[2] = {{"x", t->x}, {"label", t->label}};
    return nb_executor_run(t->ex, t->main, t->scope, NB_FEEDS_N(t->label ? 2 : 1, feeds), NB_NAMES_N(n, names), out);
}

/* The largest max_rel_diff between each eager parameter and its static var. */
static inline double twin_param_diff(twin *t)
{
    double m = 0;
    for (int i = 0; i < nb_eager_param_count(t->eager); i++) {
        double d =
            max_rel_diff(nb_eager_param_at(t->eager, i), nb_scope_find(t->scope, nb_eager_param_name(t->eager, i)));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* Deterministic inputs: x[i] = sin(1.3 i + phase). */
static inline nb_tensor *twin_input(nb_dtype dt, int ndim, const int64_t *shape, double phase)
{
    nb_tensor *t = NULL;
    CHECK_OK(nb_tensor_new(&t, dt, ndim, shape));
    for (int64_t i = 0; t && i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, sin(1.3 * (double)i + phase));
    return t;
}

#endif
