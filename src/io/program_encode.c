/* Programs to protobuf. The ProgramFile message is built over the program's
 * own strings and arrays (only the message structs are allocated, from a
 * pool freed at once), packed, and dropped. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla_program.pb-c.h"
#include "program_file_internal.h"
#include "../core/strmap.h"

/* The schema numbers its enums as nabla does, so values convert by cast. */
_Static_assert((int)NABLA__DTYPE__DTYPE_FLOAT32 == NB_F32 && (int)NABLA__DTYPE__DTYPE_FLOAT64 == NB_F64 &&
                   (int)NABLA__DTYPE__DTYPE_INT32 == NB_I32 && (int)NABLA__DTYPE__DTYPE_INT64 == NB_I64 &&
                   (int)NABLA__DTYPE__DTYPE_UINT8 == NB_U8 && (int)NABLA__DTYPE__DTYPE_BOOL == NB_BOOL &&
                   NB_DTYPE_COUNT == 6,
               "proto DType out of step with nb_dtype");
_Static_assert((int)NABLA__ATTR_TYPE__ATTR_BOOL == NB_ATTR_BOOL && (int)NABLA__ATTR_TYPE__ATTR_INT == NB_ATTR_INT &&
                   (int)NABLA__ATTR_TYPE__ATTR_FLOAT == NB_ATTR_FLOAT &&
                   (int)NABLA__ATTR_TYPE__ATTR_STRING == NB_ATTR_STRING &&
                   (int)NABLA__ATTR_TYPE__ATTR_INTS == NB_ATTR_INTS &&
                   (int)NABLA__ATTR_TYPE__ATTR_FLOATS == NB_ATTR_FLOATS &&
                   (int)NABLA__ATTR_TYPE__ATTR_BLOCK == NB_ATTR_BLOCK &&
                   (int)NABLA__ATTR_TYPE__ATTR_STRINGS == NB_ATTR_STRINGS,
               "proto AttrType out of step with nb_attr_type");
_Static_assert((int)NABLA__ROLE__ROLE_FORWARD == NB_ROLE_FORWARD &&
                   (int)NABLA__ROLE__ROLE_BACKWARD == NB_ROLE_BACKWARD &&
                   (int)NABLA__ROLE__ROLE_OPTIMIZE == NB_ROLE_OPTIMIZE && (int)NABLA__ROLE__ROLE_LOSS == NB_ROLE_LOSS &&
                   (int)NABLA__ROLE__ROLE_STARTUP == NB_ROLE_STARTUP,
               "proto Role out of step with nb_op_role");

typedef struct pool {
    void **ptrs;
    size_t n, cap;
    bool failed;
} pool;

/* Zeroed memory for `count` items (at least one), owned by the pool. */
static void *pool_alloc(pool *pl, size_t count, size_t size)
{
    if (pl->failed) return NULL;
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? 2 * pl->cap : 64;
        void **p = nb_realloc(pl->ptrs, cap * sizeof *p);
        if (!p) {
            pl->failed = true;
            return NULL;
        }
        pl->ptrs = p;
        pl->cap = cap;
    }
    void *m = nb_calloc(count ? count : 1, size);
    if (!m) {
        pl->failed = true;
        return NULL;
    }
    pl->ptrs[pl->n++] = m;
    return m;
}

static void pool_free(pool *pl)
{
    for (size_t i = 0; i < pl->n; i++) nb_free(pl->ptrs[i]);
    nb_free(pl->ptrs);
}

static Nabla__VarDesc *enc_var(pool *pl, const nb_var *v)
{
    Nabla__VarDesc *m = pool_alloc(pl, 1, sizeof *m);
    if (!m) return NULL;
    nabla__var_desc__init(m);
    m->name = v->name;
    m->dtype = (Nabla__DType)v->dtype;
    m->n_shape = (size_t)v->ndim;
    m->shape = (int64_t *)v->shape;
    m->persistable = v->persistable;
    m->stop_gradient = v->stop_gradient;
    m->is_parameter = v->is_parameter;
    m->trainable = v->trainable;
    m->is_data = v->is_data;
    return m;
}

/* The op's present slots (absent optional ones are left out). */
static bool enc_slots(pool *pl, const nb_op *op, bool inputs, Nabla__OpDesc__Slot ***out, size_t *n_out)
{
    const nb_slot_def *sd = inputs ? op->def->inputs : op->def->outputs;
    const int *begin = inputs ? op->in_begin : op->out_begin;
    char **names = inputs ? op->inputs : op->outputs;
    Nabla__OpDesc__Slot **slots = pool_alloc(pl, NB_MAX_SLOTS, sizeof *slots);
    if (!slots) return false;
    size_t n = 0;
    for (int s = 0; s < NB_MAX_SLOTS && sd[s].name; s++) {
        if (begin[s + 1] == begin[s]) continue;
        Nabla__OpDesc__Slot *m = pool_alloc(pl, 1, sizeof *m);
        if (!m) return false;
        nabla__op_desc__slot__init(m);
        m->parameter = (char *)sd[s].name;
        m->n_arguments = (size_t)(begin[s + 1] - begin[s]);
        m->arguments = names + begin[s];
        slots[n++] = m;
    }
    *out = slots;
    *n_out = n;
    return true;
}

static Nabla__OpDesc__Attr *enc_attr(pool *pl, const char *name, const nb_attr_value *v)
{
    Nabla__OpDesc__Attr *m = pool_alloc(pl, 1, sizeof *m);
    if (!m) return NULL;
    nabla__op_desc__attr__init(m);
    m->name = (char *)name;
    m->type = (Nabla__AttrType)v->type;
    switch (v->type) {
    case NB_ATTR_BOOL: m->b = v->b; break;
    case NB_ATTR_INT: m->i = v->i; break;
    case NB_ATTR_FLOAT: m->f = v->f; break;
    case NB_ATTR_STRING: m->s = (char *)(v->s ? v->s : ""); break;
    case NB_ATTR_INTS:
        m->n_ints = (size_t)v->n;
        m->ints = (int64_t *)v->ints;
        break;
    case NB_ATTR_FLOATS:
        m->n_floats = (size_t)v->n;
        m->floats = (double *)v->floats;
        break;
    case NB_ATTR_BLOCK: m->block_idx = v->block; break;
    case NB_ATTR_STRINGS:
        m->n_strs = (size_t)v->n;
        m->strs = (char **)v->strs;
        break;
    case NB_ATTR_NONE: break;
    }
    return m;
}

static Nabla__OpDesc *enc_op(pool *pl, const nb_op *op)
{
    Nabla__OpDesc *m = pool_alloc(pl, 1, sizeof *m);
    Nabla__OpDesc__Attr **attrs = pool_alloc(pl, NB_MAX_ATTRS, sizeof *attrs);
    if (!m || !attrs) return NULL;
    nabla__op_desc__init(m);
    m->type = (char *)op->def->name;
    if (!enc_slots(pl, op, true, &m->inputs, &m->n_inputs) || !enc_slots(pl, op, false, &m->outputs, &m->n_outputs))
        return NULL;
    /* Every attribute, defaults included, so that a file means the same
     * thing even if a later nabla changes a default. */
    size_t n = 0;
    for (int a = 0; a < NB_MAX_ATTRS && op->def->attrs[a].name; a++) {
        if (op->attrs[a].type == NB_ATTR_NONE) continue;
        if (!(attrs[n++] = enc_attr(pl, op->def->attrs[a].name, &op->attrs[a]))) return NULL;
    }
    m->attrs = attrs;
    m->n_attrs = n;
    m->role = (Nabla__Role)op->role;
    if (op->role_var[0] && op->role_var[1]) {
        m->n_role_var = 2;
        m->role_var = (char **)op->role_var;
    }
    m->id = op->id;
    return m;
}

static Nabla__BlockDesc *enc_block(pool *pl, const nb_block *b)
{
    Nabla__BlockDesc *m = pool_alloc(pl, 1, sizeof *m);
    Nabla__VarDesc **vars = pool_alloc(pl, (size_t)b->n_vars, sizeof *vars);
    Nabla__OpDesc **ops = pool_alloc(pl, (size_t)b->n_ops, sizeof *ops);
    if (!m || !vars || !ops) return NULL;
    nabla__block_desc__init(m);
    m->idx = b->idx;
    m->parent_idx = b->parent_idx;
    m->forward_block_idx = b->forward_block_idx;
    for (int i = 0; i < b->n_vars; i++)
        if (!(vars[i] = enc_var(pl, b->vars[i]))) return NULL;
    for (int i = 0; i < b->n_ops; i++)
        if (!(ops[i] = enc_op(pl, b->ops[i]))) return NULL;
    m->vars = vars;
    m->n_vars = (size_t)b->n_vars;
    m->ops = ops;
    m->n_ops = (size_t)b->n_ops;
    return m;
}

static Nabla__ProgramDesc *enc_program(pool *pl, const nb_program *p)
{
    const nb_strmap *names = p->names;
    Nabla__ProgramDesc *m = pool_alloc(pl, 1, sizeof *m);
    Nabla__BlockDesc **blocks = pool_alloc(pl, (size_t)p->n_blocks, sizeof *blocks);
    Nabla__ProgramDesc__NameCounter **counters = pool_alloc(pl, (size_t)names->n, sizeof *counters);
    if (!m || !blocks || !counters) return NULL;
    nabla__program_desc__init(m);
    m->version = NB_PROGRAM_FORMAT_VERSION;
    for (int i = 0; i < p->n_blocks; i++)
        if (!(blocks[i] = enc_block(pl, p->blocks[i]))) return NULL;
    m->blocks = blocks;
    m->n_blocks = (size_t)p->n_blocks;
    m->random_seed = p->random_seed;
    m->next_op_id = p->next_op_id;
    size_t n = 0;
    for (int i = 0; i < names->n; i++) {
        if (!names->keys[i]) continue;
        Nabla__ProgramDesc__NameCounter *c = pool_alloc(pl, 1, sizeof *c);
        if (!c) return NULL;
        nabla__program_desc__name_counter__init(c);
        c->prefix = names->keys[i];
        c->next = (uint64_t)(uintptr_t)names->vals[i];
        counters[n++] = c;
    }
    m->name_counters = counters;
    m->n_name_counters = n;
    return m;
}

nb_status nb_programs_encode(const nb_program *main, const nb_program *startup, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    pool pl = {0};
    Nabla__ProgramFile file = NABLA__PROGRAM_FILE__INIT;
    file.version = NB_PROGRAM_FORMAT_VERSION;
    file.main = enc_program(&pl, main);
    if (startup) file.startup = enc_program(&pl, startup);
    nb_status st = NB_OK;
    if (!file.main || (startup && !file.startup)) {
        st = nb_error(NB_ERR_NOMEM, "saving a program: out of memory");
    } else {
        size_t n = nabla__program_file__get_packed_size(&file);
        uint8_t *b = nb_malloc(n ? n : 1);
        if (!b) {
            st = nb_error(NB_ERR_NOMEM, "saving a program: out of memory for %zu bytes", n);
        } else {
            *len = nabla__program_file__pack(&file, b);
            *buf = b;
        }
    }
    pool_free(&pl);
    return st;
}
