/* Helpers shared by test_init.c and test_layers.c: a main/startup program
 * pair with a record builder, a scope and an executor, and small readers of
 * what the layers built. */
#ifndef NABLA_LAYER_TEST_UTIL_H
#define NABLA_LAYER_TEST_UTIL_H

#include <stdlib.h>
#include "test.h"
#include "nabla/init.h"
#include "nabla/layers.h"

typedef struct model {
    nb_program *main, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
} model;

static inline void model_init(model *m)
{
    memset(m, 0, sizeof *m);
    CHECK_OK(nb_program_new(&m->main));
    CHECK_OK(nb_program_new(&m->startup));
    CHECK_OK(nb_builder_new_record(&m->b, m->main, m->startup));
    CHECK_OK(nb_scope_new(&m->scope, NULL));
    CHECK_OK(nb_executor_new(&m->ex));
}

static inline void model_free(model *m)
{
    nb_executor_free(m->ex);
    nb_scope_free(m->scope);
    nb_builder_free(m->b);
    nb_program_free(m->startup);
    nb_program_free(m->main);
}

static inline nb_status model_startup(model *m)
{
    return nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
}

/* Runs main with the feeds and fetches one var (NULL on failure, counted). */
static inline nb_tensor *model_fetch(model *m, nb_program *p, int n_feed, const nb_feed *feeds, const char *name)
{
    nb_tensor *t = NULL;
    CHECK_OK(nb_executor_run(m->ex, p ? p : m->main, m->scope, NB_FEEDS_N(n_feed, feeds), NB_NAMES_N(1, &name), &t));
    return t;
}

/* Index of the first op of `type` at or after `from` in block 0, or -1. */
static inline int find_op_from(const nb_program *p, const char *type, int from)
{
    const nb_block *b = p->blocks[0];
    for (int i = from; i < b->n_ops; i++)
        if (!strcmp(b->ops[i]->def->name, type)) return i;
    return -1;
}

static inline int count_ops_of(const nb_program *p, const char *type)
{
    int n = 0;
    const nb_block *b = p->blocks[0];
    for (int i = 0; i < b->n_ops; i++) n += !strcmp(b->ops[i]->def->name, type);
    return n;
}

static inline nb_op *op_at(const nb_program *p, int i) { return i >= 0 ? p->blocks[0]->ops[i] : NULL; }

/* The startup op writing `name`, or NULL. */
static inline nb_op *init_op_of(const nb_program *startup, const char *name)
{
    const nb_block *b = startup->blocks[0];
    for (int i = 0; i < b->n_ops; i++)
        if (nb_op_n_outputs(b->ops[i]) == 1 && !strcmp(b->ops[i]->outputs[0], name)) return b->ops[i];
    return NULL;
}

static inline double op_float(const nb_op *op, const char *attr)
{
    const nb_attr_value *a = op ? nb_op_attr(op, attr) : NULL;
    return a && a->type == NB_ATTR_FLOAT ? a->f : NAN;
}

static inline int64_t op_int(const nb_op *op, const char *attr)
{
    const nb_attr_value *a = op ? nb_op_attr(op, attr) : NULL;
    return a && (a->type == NB_ATTR_INT) ? a->i : -999;
}

static inline const char *op_string(const nb_op *op, const char *attr)
{
    const nb_attr_value *a = op ? nb_op_attr(op, attr) : NULL;
    return a && a->type == NB_ATTR_STRING ? a->s : "(none)";
}

static inline nb_var *main_var(model *m, const char *name)
{
    return nb_block_find_var(nb_program_global_block(m->main), name);
}

/* Checks a var of main: shape and its flags. */
static inline void check_var_(const char *file, int line, model *m, const char *name, int ndim, const int64_t *shape,
                              bool param, bool persistable)
{
    nb_var *v = main_var(m, name);
    if (!v) {
        fprintf(stderr, "  %s:%d: no var %s in main\n", file, line, name);
        test_failures_in_current++;
        return;
    }
    bool ok = nb_shape_equal(v->ndim, v->shape, ndim, shape) && v->is_parameter == param && v->trainable == param &&
        v->persistable == persistable && (!persistable || param || v->stop_gradient);
    if (!ok) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        fprintf(stderr, "  %s:%d: var %s: shape %s (wanted %s), param %d trainable %d persistable %d stop_grad %d\n",
                file, line, name, nb_shape_str(a, sizeof a, v->ndim, v->shape), nb_shape_str(b, sizeof b, ndim, shape),
                v->is_parameter, v->trainable, v->persistable, v->stop_gradient);
        test_failures_in_current++;
    }
}
#define CHECK_PARAM(m, name, shape) check_var_(__FILE__, __LINE__, (m), (name), NDIM_OF(shape), (shape), true, true)
#define CHECK_STATE(m, name, shape) check_var_(__FILE__, __LINE__, (m), (name), NDIM_OF(shape), (shape), false, true)

#endif
