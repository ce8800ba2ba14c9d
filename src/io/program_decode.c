/* Protobuf to programs. protobuf-c's unpack rejects malformed wire data; what
 * it lets through is untrusted, so this file checks what the program API
 * does not (block structure, enum ranges, slot and attribute lists, ids) and
 * rebuilds each program through that API, which checks every op against its
 * definition and infers its output shapes again. */
#include <limits.h>
#include "nabla/device.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla_program.pb-c.h"
#include "program_file_internal.h"
#include "../core/strmap.h"
#include "../ops/op_internal.h"
#include "nabla/control.h"

/* Far beyond any real program; keeps counts inside int arithmetic. */
#define MAX_COUNT (INT_MAX / 4)

typedef struct loader {
    const char *source; /* the file, for messages */
    const char *which;  /* "main" or "startup" */
    const Nabla__ProgramDesc *pd;
    nb_program *p;
} loader;

static nb_status bad(const loader *L, nb_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static nb_status bad(const loader *L, nb_status code, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nb_error(code, "%s: %s program: %s", L->source, L->which, msg);
}

static const char *str(const char *s) { return s ? s : ""; }

/* ---- block structure ---------------------------------------------------- */

static nb_status check_blocks(const loader *L)
{
    const Nabla__ProgramDesc *pd = L->pd;
    if (pd->n_blocks == 0) return bad(L, NB_ERR_FORMAT, "it has no blocks (block 0 is always there)");
    if (pd->n_blocks > MAX_COUNT) return bad(L, NB_ERR_FORMAT, "%zu blocks is too many", pd->n_blocks);
    int n = (int)pd->n_blocks;
    for (int i = 0; i < n; i++) {
        const Nabla__BlockDesc *bd = pd->blocks[i];
        if (bd->idx != i) return bad(L, NB_ERR_FORMAT, "block %d says it is block %d", i, (int)bd->idx);
        /* Parents come before their children, which rules out cycles. */
        if (i == 0 && bd->parent_idx != -1)
            return bad(L, NB_ERR_FORMAT, "block 0 has parent %d (the global block has none: -1)", (int)bd->parent_idx);
        if (i > 0 && (bd->parent_idx < 0 || bd->parent_idx >= i))
            return bad(L, NB_ERR_FORMAT, "block %d has parent %d (a block's parent is an earlier block)", i,
                       (int)bd->parent_idx);
        if (bd->forward_block_idx != -1 &&
            (bd->forward_block_idx < 0 || bd->forward_block_idx >= n || bd->forward_block_idx == i))
            return bad(L, NB_ERR_FORMAT, "block %d differentiates block %d, which is not another block of the %d", i,
                       (int)bd->forward_block_idx, n);
        if (bd->n_vars > MAX_COUNT || bd->n_ops > MAX_COUNT)
            return bad(L, NB_ERR_FORMAT, "block %d has too many vars or ops", i);
    }
    return NB_OK;
}

/* Whether block `t` is nested (at any depth) in block `anc`. Parents have
 * lower indices, so the walk ends. */
static bool is_sub_block(const nb_program *p, int t, int anc)
{
    if (t == anc) return false;
    while (t >= 0) {
        if (t == anc) return true;
        t = p->blocks[t]->parent_idx;
    }
    return false;
}

/* ---- vars --------------------------------------------------------------- */

static nb_status load_vars(loader *L, nb_block *b, const Nabla__BlockDesc *bd)
{
    for (size_t k = 0; k < bd->n_vars; k++) {
        const Nabla__VarDesc *vd = bd->vars[k];
        const char *name = str(vd->name);
        if (!*name) return bad(L, NB_ERR_FORMAT, "block %d: var %zu has no name", b->idx, k);
        if (nb_block_find_var(b, name)) return bad(L, NB_ERR_FORMAT, "block %d lists var '%.200s' twice", b->idx, name);
        int dt = (int)vd->dtype;
        if (!nb_dtype_valid(dt))
            return bad(L, NB_ERR_FORMAT, "block %d: var '%.200s' has dtype %d, which nabla does not know", b->idx, name,
                       dt);
        if (vd->n_shape > NB_MAX_DIMS)
            return bad(L, NB_ERR_FORMAT, "block %d: var '%.200s' has %zu dimensions (at most %d)", b->idx, name,
                       vd->n_shape, NB_MAX_DIMS);
        int64_t numel = 1; /* of the known dims; bounded as tensors are, so inference cannot overflow */
        for (size_t d = 0; d < vd->n_shape; d++) {
            int64_t n = vd->shape[d];
            if (n < -1)
                return bad(L, NB_ERR_FORMAT,
                           "block %d: var '%.200s' has size %lld in dimension %zu (a size is >= 0, or -1 when known "
                           "only at run time)",
                           b->idx, name, (long long)n, d);
            if (n > 0 && numel > INT64_MAX / 16 / n)
                return bad(L, NB_ERR_FORMAT, "block %d: var '%.200s' has a shape too large for a tensor", b->idx, name);
            if (n > 0) numel *= n;
        }
        nb_var *v;
        nb_status st = nb_block_create_var(b, name, (nb_dtype)dt, (int)vd->n_shape, vd->shape, &v);
        if (st) return nb_error_context(st, "%s: %s program, block %d", L->source, L->which, b->idx);
        v->persistable = vd->persistable;
        v->stop_gradient = vd->stop_gradient;
        v->is_parameter = vd->is_parameter;
        v->trainable = vd->trainable;
        v->is_data = vd->is_data;
    }
    return NB_OK;
}

/* After the ops: each var's dtype and shape as the file states them must be
 * what the ops writing it make. */
static nb_status check_var_shapes(loader *L, nb_block *b, const Nabla__BlockDesc *bd)
{
    for (size_t k = 0; k < bd->n_vars; k++) {
        const Nabla__VarDesc *vd = bd->vars[k];
        const nb_var *v = nb_block_find_var(b, vd->name);
        if (!v) return bad(L, NB_ERR_STATE, "block %d: var '%.200s' vanished", b->idx, vd->name);
        bool same = (int)v->dtype == (int)vd->dtype && v->ndim == (int)vd->n_shape;
        for (int d = 0; same && d < v->ndim; d++) same = v->shape[d] == vd->shape[d];
        if (!same) {
            char a[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
            return bad(L, NB_ERR_FORMAT, "block %d: var '%.200s' is %s%s in the file, but the ops writing it make %s%s",
                       b->idx, v->name, nb_dtype_name((nb_dtype)vd->dtype),
                       nb_shape_str(a, sizeof a, (int)vd->n_shape, vd->shape), nb_dtype_name(v->dtype),
                       nb_shape_str(c, sizeof c, v->ndim, v->shape));
        }
    }
    return NB_OK;
}

/* ---- ops ---------------------------------------------------------------- */

/* One side (inputs or outputs) of an op as the file gives it: the slot
 * messages by declared slot, and the flat list nb_block_append_op takes
 * (each plain slot in declared order, NULL when absent; all the values of
 * the variadic slot in its place). */
typedef struct side {
    const Nabla__OpDesc__Slot *given[NB_MAX_SLOTS];
    const char **flat;
    int n;
} side;

static nb_status lay_out(const loader *L, const char *where, const nb_op_def *def, bool inputs,
                         Nabla__OpDesc__Slot *const *slots, size_t n_slots, side *out)
{
    const nb_slot_def *sd = inputs ? def->inputs : def->outputs;
    const char *kind = inputs ? "input" : "output";
    char sig[512];
    int nslots = 0;
    while (nslots < NB_MAX_SLOTS && sd[nslots].name) nslots++;
    if (n_slots > NB_MAX_SLOTS)
        return bad(L, NB_ERR_FORMAT, "%s: %zu %s slots given; it has %s", where, n_slots, kind,
                   nb_op_signature(def, sig, sizeof sig));
    size_t total = 0;
    for (size_t k = 0; k < n_slots; k++) {
        const Nabla__OpDesc__Slot *m = slots[k];
        const char *name = str(m->parameter);
        int s = inputs ? nb_op_input_index(def, name) : nb_op_output_index(def, name);
        if (s < 0)
            return bad(L, NB_ERR_FORMAT, "%s: no %s slot '%.100s' in %s", where, kind, name,
                       nb_op_signature(def, sig, sizeof sig));
        if (out->given[s]) return bad(L, NB_ERR_FORMAT, "%s: %s slot '%s' given twice", where, kind, sd[s].name);
        if (!(sd[s].flags & NB_SLOT_VARIADIC) && m->n_arguments != 1)
            return bad(L, NB_ERR_FORMAT, "%s: %s slot '%s' holds %zu vars; it takes one", where, kind, sd[s].name,
                       m->n_arguments);
        if (m->n_arguments > MAX_COUNT)
            return bad(L, NB_ERR_FORMAT, "%s: %s slot '%s' holds too many vars", where, kind, sd[s].name);
        for (size_t a = 0; a < m->n_arguments; a++)
            if (!m->arguments[a] || !*m->arguments[a])
                return bad(L, NB_ERR_FORMAT, "%s: %s slot '%s' names a var with no name", where, kind, sd[s].name);
        out->given[s] = m;
        total += m->n_arguments;
    }
    out->flat = nb_calloc(total + (size_t)nslots + 1, sizeof *out->flat);
    if (!out->flat) return bad(L, NB_ERR_NOMEM, "%s: out of memory", where);
    int n = 0;
    for (int s = 0; s < nslots; s++) {
        const Nabla__OpDesc__Slot *m = out->given[s];
        if (sd[s].flags & NB_SLOT_VARIADIC) {
            for (size_t a = 0; m && a < m->n_arguments; a++) out->flat[n++] = m->arguments[a];
        } else {
            out->flat[n++] = m ? m->arguments[0] : NULL;
        }
    }
    if (!inputs) {
        /* Only trailing optional outputs can be left out. */
        while (n > 0 && !out->flat[n - 1]) n--;
        for (int i = 0; i < n; i++)
            if (!out->flat[i])
                return bad(L, NB_ERR_FORMAT, "%s: an output slot before the last one given is missing (%s)", where,
                           nb_op_signature(def, sig, sizeof sig));
    }
    out->n = n;
    return NB_OK;
}

/* The op as built holds each var where the file put it. */
static bool same_layout(const nb_op *op, bool inputs, const side *sd)
{
    const int *begin = inputs ? op->in_begin : op->out_begin;
    char **names = inputs ? op->inputs : op->outputs;
    for (int s = 0; s < NB_MAX_SLOTS; s++) {
        const Nabla__OpDesc__Slot *m = sd->given[s];
        size_t count = (size_t)(begin[s + 1] - begin[s]);
        if (count != (m ? m->n_arguments : 0)) return false;
        for (size_t a = 0; a < count; a++)
            if (strcmp(names[begin[s] + (int)a], m->arguments[a])) return false;
    }
    return true;
}

static nb_status to_attrs(const loader *L, const char *where, const Nabla__OpDesc *od, nb_attr *attrs)
{
    if (od->n_attrs > NB_MAX_ATTRS)
        return bad(L, NB_ERR_FORMAT, "%s: %zu attributes given (an op has at most %d)", where, od->n_attrs,
                   NB_MAX_ATTRS);
    for (size_t k = 0; k < od->n_attrs; k++) {
        const Nabla__OpDesc__Attr *a = od->attrs[k];
        const char *name = str(a->name);
        for (size_t j = 0; j < k; j++)
            if (!strcmp(attrs[j].name, name))
                return bad(L, NB_ERR_FORMAT, "%s: attribute '%.100s' given twice", where, name);
        nb_attr_value v = {.type = (nb_attr_type)a->type};
        switch ((int)a->type) {
        case NB_ATTR_BOOL: v.b = a->b != 0; break;
        case NB_ATTR_INT: v.i = a->i; break;
        case NB_ATTR_FLOAT: v.f = a->f; break;
        case NB_ATTR_STRING: v.s = str(a->s); break;
        case NB_ATTR_INTS:
            if (a->n_ints > MAX_COUNT) return bad(L, NB_ERR_FORMAT, "%s: attribute '%.100s' is too long", where, name);
            v.n = (int)a->n_ints;
            v.ints = a->ints;
            break;
        case NB_ATTR_FLOATS:
            if (a->n_floats > MAX_COUNT)
                return bad(L, NB_ERR_FORMAT, "%s: attribute '%.100s' is too long", where, name);
            v.n = (int)a->n_floats;
            v.floats = a->floats;
            break;
        case NB_ATTR_BLOCK: v.block = a->block_idx; break;
        case NB_ATTR_STRINGS:
            if (a->n_strs > MAX_COUNT) return bad(L, NB_ERR_FORMAT, "%s: attribute '%.100s' is too long", where, name);
            v.n = (int)a->n_strs;
            v.strs = (const char *const *)a->strs;
            break;
        default:
            return bad(L, NB_ERR_FORMAT, "%s: attribute '%.100s' has type %d, which nabla does not know", where, name,
                       (int)a->type);
        }
        attrs[k] = (nb_attr){name, v};
    }
    return NB_OK;
}

static nb_status load_op(loader *L, nb_block *b, size_t oi, const Nabla__OpDesc *od)
{
    const char *type = str(od->type);
    char where[256];
    snprintf(where, sizeof where, "block %d, op %zu (%.100s)", b->idx, oi, type);
    const nb_op_def *def = nb_op_find(type);
    if (!def) return bad(L, NB_ERR_NOT_FOUND, "%s: unknown op type '%.100s'", where, type);
    side in = {0}, out = {0};
    nb_attr attrs[NB_MAX_ATTRS];
    nb_op *op = NULL;
    nb_status st = lay_out(L, where, def, true, od->inputs, od->n_inputs, &in);
    if (!st) st = lay_out(L, where, def, false, od->outputs, od->n_outputs, &out);
    if (!st) st = to_attrs(L, where, od, attrs);
    if (!st &&
        (st = nb_block_append_op(b, type, NB_NAMES_N(in.n, in.flat), NB_NAMES_N(out.n, out.flat),
                                 NB_ATTRS_N((int)od->n_attrs, attrs), &op)))
        nb_error_context(st, "%s: %s program, %s", L->source, L->which, where);
    if (!st && (!same_layout(op, true, &in) || !same_layout(op, false, &out)))
        st = bad(L, NB_ERR_FORMAT, "%s: its vars do not fit its slots", where);
    for (int a = 0; !st && a < NB_MAX_ATTRS; a++)
        if (op->attrs[a].type == NB_ATTR_BLOCK && !is_sub_block(L->p, op->attrs[a].block, b->idx))
            st = bad(L, NB_ERR_FORMAT,
                     "%s: attribute '%s' names block %d, which is not nested in block %d (an op runs only blocks "
                     "nested in its own)",
                     where, def->attrs[a].name, op->attrs[a].block, b->idx);
    if (!st && ((int)od->role < NB_ROLE_FORWARD || (int)od->role > NB_ROLE_STARTUP))
        st = bad(L, NB_ERR_FORMAT, "%s: role %d, which nabla does not know", where, (int)od->role);
    if (!st && od->n_role_var != 0 && od->n_role_var != 2)
        st = bad(L, NB_ERR_FORMAT, "%s: %zu role vars (none, or a parameter and its gradient)", where, od->n_role_var);
    if (!st && od->n_role_var == 2 && (!*str(od->role_var[0]) || !*str(od->role_var[1])))
        st = bad(L, NB_ERR_FORMAT, "%s: a role var has no name", where);
    if (!st && (od->id < 0 || od->id >= INT_MAX))
        st = bad(L, NB_ERR_FORMAT, "%s: id %d is out of range", where, (int)od->id);
    if (!st) {
        op->role = (nb_op_role)od->role;
        op->id = od->id;
        if (od->n_role_var == 2) {
            op->role_var[0] = nb_strdup(od->role_var[0]);
            op->role_var[1] = nb_strdup(od->role_var[1]);
            if (!op->role_var[0] || !op->role_var[1]) st = bad(L, NB_ERR_NOMEM, "%s: out of memory", where);
        }
    }
    nb_free(in.flat);
    nb_free(out.flat);
    return st;
}

/* ---- ids and names ------------------------------------------------------ */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Op ids are unique (they seed random ops); new ops get higher ones. */
static nb_status restore_ids(loader *L)
{
    nb_program *p = L->p;
    size_t n = 0;
    for (int bi = 0; bi < p->n_blocks; bi++) n += (size_t)p->blocks[bi]->n_ops;
    int *ids = nb_malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return bad(L, NB_ERR_NOMEM, "out of memory");
    n = 0;
    for (int bi = 0; bi < p->n_blocks; bi++)
        for (int i = 0; i < p->blocks[bi]->n_ops; i++) ids[n++] = p->blocks[bi]->ops[i]->id;
    qsort(ids, n, sizeof *ids, cmp_int);
    nb_status st = NB_OK;
    for (size_t i = 1; i < n && !st; i++)
        if (ids[i] == ids[i - 1]) st = bad(L, NB_ERR_FORMAT, "two ops have id %d", ids[i]);
    if (!st && L->pd->next_op_id < 0) st = bad(L, NB_ERR_FORMAT, "next op id %d is negative", (int)L->pd->next_op_id);
    if (!st) {
        int next = L->pd->next_op_id;
        if (n && ids[n - 1] >= next) next = ids[n - 1] + 1;
        p->next_op_id = next;
    }
    nb_free(ids);
    return st;
}

static nb_status raise_counter(nb_strmap *names, const char *key, uintptr_t k)
{
    if ((uintptr_t)nb_strmap_get(names, key, NULL) <= k) return nb_strmap_put(names, key, (void *)(k + 1));
    return NB_OK;
}

/* For a file without counters: raises the counter of `prefix` to k + 1 for a
 * name "prefix_k" or "prefix_k.anything" (what nb_program_unique_name hands
 * out), and that of op outputs for "prefix_k.tmp_i", so that names made later
 * skip it. */
static nb_status bump_counter(nb_strmap *names, const char *name)
{
    const char *dot = strchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name), u = len;
    while (u > 0 && name[u - 1] >= '0' && name[u - 1] <= '9') u--;
    if (u == len || len - u > 9 || u < 2 || name[u - 1] != '_') return NB_OK;
    uintptr_t k = (uintptr_t)strtoul(name + u, NULL, 10);
    char *prefix = nb_strndup(name, u - 1);
    if (!prefix) return NB_ERR_NOMEM;
    nb_status st = raise_counter(names, prefix, k);
    if (!st && dot && !strncmp(dot, ".tmp_", 5)) {
        char key[512];
        snprintf(key, sizeof key, "%s@output", prefix);
        st = raise_counter(names, key, k);
    }
    nb_free(prefix);
    return st;
}

static nb_status restore_names(loader *L)
{
    nb_strmap *names = L->p->names;
    for (size_t k = 0; k < L->pd->n_name_counters; k++) {
        const Nabla__ProgramDesc__NameCounter *c = L->pd->name_counters[k];
        if (!*str(c->prefix)) return bad(L, NB_ERR_FORMAT, "a name counter has no prefix");
        if (nb_strmap_put(names, c->prefix, (void *)(uintptr_t)c->next)) return bad(L, NB_ERR_NOMEM, "out of memory");
    }
    if (L->pd->n_name_counters > 0) return NB_OK; /* the file says where they are */
    for (int bi = 0; bi < L->p->n_blocks; bi++)
        for (int i = 0; i < L->p->blocks[bi]->n_vars; i++)
            if (bump_counter(names, L->p->blocks[bi]->vars[i]->name)) return bad(L, NB_ERR_NOMEM, "out of memory");
    return NB_OK;
}

/* ---- a program ---------------------------------------------------------- */

static nb_status check_version(const char *source, const char *what, uint32_t version)
{
    if (version == 0)
        return nb_error(NB_ERR_FORMAT, "%s: not a nabla program file (%s has no format version)", source, what);
    if (version > NB_PROGRAM_FORMAT_VERSION)
        return nb_error(NB_ERR_UNSUPPORTED,
                        "%s: %s has format version %u, newer than the %d this nabla reads (a newer nabla wrote it)",
                        source, what, (unsigned)version, NB_PROGRAM_FORMAT_VERSION);
    return NB_OK;
}

static nb_status load_program(const char *source, const char *which, const Nabla__ProgramDesc *pd, nb_program **out)
{
    *out = NULL;
    char what[64];
    snprintf(what, sizeof what, "its %s program", which);
    nb_status st = check_version(source, what, pd->version);
    if (st) return st;
    loader L = {.source = source, .which = which, .pd = pd};
    if ((st = check_blocks(&L))) return st;
    if ((st = nb_program_new(&L.p))) return st;
    nb_program *p = L.p;
    for (size_t i = 0; i < pd->n_blocks && !st; i++) {
        const Nabla__BlockDesc *bd = pd->blocks[i];
        nb_block *b = p->blocks[0];
        if (i > 0) st = nb_program_add_block(p, bd->parent_idx, &b);
        if (!st) {
            b->forward_block_idx = bd->forward_block_idx;
            st = load_vars(&L, b, bd);
        }
    }
    /* Ops after every block and var exists: an op may name a later block or
     * read a var of its parent block that a later op writes. */
    for (size_t i = 0; i < pd->n_blocks && !st; i++)
        for (size_t k = 0; k < pd->blocks[i]->n_ops && !st; k++)
            st = load_op(&L, p->blocks[i], k, pd->blocks[i]->ops[k]);
    for (size_t i = 0; i < pd->n_blocks && !st; i++) st = check_var_shapes(&L, p->blocks[i], pd->blocks[i]);
    if (!st) st = restore_ids(&L);
    if (!st) st = restore_names(&L);
    if (st) {
        nb_program_free(p);
        return st;
    }
    nb_program_set_seed(p, pd->random_seed);
    *out = p;
    return NB_OK;
}

nb_status nb_programs_decode(const uint8_t *buf, size_t len, const char *source, nb_program **main,
                             nb_program **startup)
{
    *main = NULL;
    if (startup) *startup = NULL;
    if (!buf && len) return nb_error(NB_ERR_ARG, "%s: NULL buffer of %zu bytes", source, len);
    if (len == 0) return nb_error(NB_ERR_FORMAT, "%s: empty, not a nabla program file", source);
    nb_status reg = nb_control_register_ops(); /* a file may hold loops and branches */
    if (reg) return reg;
    Nabla__ProgramFile *pf = nabla__program_file__unpack(NULL, len, buf);
    if (!pf)
        return nb_error(NB_ERR_FORMAT, "%s: not a nabla program file (malformed or truncated protobuf data)", source);
    nb_program *m = NULL, *s = NULL;
    nb_status st = check_version(source, "the file", pf->version);
    if (!st && !pf->main) st = nb_error(NB_ERR_FORMAT, "%s: the file holds no main program", source);
    if (!st) st = load_program(source, "main", pf->main, &m);
    if (!st && pf->startup) st = load_program(source, "startup", pf->startup, &s);
    nabla__program_file__free_unpacked(pf, NULL);
    if (st || !startup) nb_program_free(s);
    if (st) {
        nb_program_free(m);
        return st;
    }
    *main = m;
    if (startup) *startup = s;
    return NB_OK;
}
