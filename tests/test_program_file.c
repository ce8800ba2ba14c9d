/* Program files (nabla/program_file.h): a training setup saved and loaded
 * prints, runs and differentiates exactly as the original; ids, seeds,
 * blocks and name counters survive; saves are atomic; and hostile files
 * (each field the loader checks, every truncation, flipped bytes) give an
 * error naming the problem, never a crash or a leak. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test.h"
#include "nabla/program_file.h"
#include "nabla_program.pb-c.h"
#include "program/record.h"

static char tmpdir[64];

static void tmp_path(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }

/* nb_program_print's text, malloc'ed. */
static char *printed(const nb_program *p)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) return NULL;
    nb_program_print(p, f);
    fclose(f);
    return s;
}

static void check_same_print_(const char *file, int line, const nb_program *a, const nb_program *b)
{
    char *sa = printed(a), *sb = printed(b);
    if (!sa || !sb || strcmp(sa, sb)) {
        fprintf(stderr, "  %s:%d: programs print differently:\n--- original\n%s--- loaded\n%s", file, line,
                sa ? sa : "", sb ? sb : "");
        test_failures_in_current++;
    }
    free(sa);
    free(sb);
}
#define CHECK_SAME_PRINT(a, b) check_same_print_(__FILE__, __LINE__, (a), (b))

static bool same_bytes(const nb_tensor *a, const nb_tensor *b)
{
    return a && b && a->dtype == b->dtype && nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape) &&
        !memcmp(nb_tensor_data(a), nb_tensor_data(b), (size_t)nb_tensor_numel(a) * nb_dtype_size(a->dtype));
}

static bool any_nonzero(const nb_tensor *t)
{
    for (int64_t i = 0; t && i < nb_tensor_numel(t); i++)
        if (nb_tensor_get(t, i) != 0) return true;
    return false;
}

static nb_status run(nb_program *p, nb_scope *s, int n_feed, const nb_feed *feeds, int n_fetch,
                     const char *const *names, nb_tensor **out)
{
    nb_executor *e;
    nb_status st = nb_executor_new(&e);
    if (!st) st = nb_executor_run(e, p, s, NB_FEEDS_N(n_feed, feeds), NB_NAMES_N(n_fetch, names), out);
    nb_executor_free(e);
    return st;
}

/* ---- a training setup: data -> fc -> softmax_with_cross_entropy -> mean --- */

typedef struct train {
    nb_program *main, *startup;
    char loss[128];
} train;

static void train_free(train *t)
{
    nb_program_free(t->main);
    nb_program_free(t->startup);
}

static bool build_train(train *t)
{
    memset(t, 0, sizeof *t);
    if (nb_program_new(&t->main) || nb_program_new(&t->startup)) return false;
    nb_builder *b;
    if (nb_builder_new_record(&b, t->main, t->startup)) return false;
    nb_value x = nb_data(b, "x", NB_F64, 2, S(-1, 4));
    nb_value label = nb_data(b, "label", NB_I64, 2, S(-1, 1));
    nb_attr init[] = {NB_ATTR_FLOAT("min", -1), NB_ATTR_FLOAT("max", 1)};
    nb_value w = nb_create_parameter(b, "fc.w", NB_F64, 2, S(4, 3), "uniform_random", 2, init);
    nb_value bias = nb_create_parameter(b, "fc.b", NB_F64, 1, S(3), "uniform_random", 2, init);
    nb_value logits = nb_fc(b, x, w, bias, 1);
    nb_value cost = nb_reduce_mean(b, nb_softmax_with_cross_entropy(b, logits, label, NULL), 0, NULL, false);
    nb_status st = nb_builder_status(b);
    if (st) fprintf(stderr, "  build_train: %s\n", nb_builder_error(b));
    else snprintf(t->loss, sizeof t->loss, "%s", nb_value_name(cost));
    nb_builder_free(b);
    /* Random initialisers draw from (program seed, op id): both must survive. */
    nb_program_set_seed(t->startup, 1234);
    nb_backward_result r;
    if (!st && (st = nb_append_backward(t->main, t->loss, NULL, &r)))
        fprintf(stderr, "  build_train: %s\n", nb_last_error());
    if (!st) nb_backward_result_free(&r);
    return !st;
}

/* Runs startup then main once on fixed inputs; fetched: loss, dW, db. */
static void run_train(nb_program *main_p, nb_program *startup, nb_scope *s, const char *loss, nb_tensor *out[3])
{
    nb_tensor *x =
        T(NB_F64, S(5, 4), 0.5, -1, 2, 0.25, 1, 1, -0.5, 0, 3, -2, 0.1, 0.7, -1.5, 0.2, 0.4, 1.1, 0, 0, 2, -0.3);
    nb_tensor *label = T(NB_I64, S(5, 1), 0, 2, 1, 1, 0);
    if (startup) CHECK_OK(run(startup, s, 0, NULL, 0, NULL, NULL));
    nb_feed feeds[] = {{"x", x}, {"label", label}};
    const char *names[] = {loss, "fc.w@GRAD", "fc.b@GRAD"};
    CHECK_OK(run(main_p, s, 2, feeds, 3, names, out));
    release_all(x, label, NULL);
}

static void test_train_round_trip(void)
{
    train t;
    REQUIRE_OK(build_train(&t) ? NB_OK : NB_ERR_STATE);
    char path[128];
    tmp_path(path, sizeof path, "train.nbp");
    REQUIRE_OK(nb_programs_save(path, t.main, t.startup));
    nb_program *m2, *s2;
    REQUIRE_OK(nb_programs_load(&m2, &s2, path));
    REQUIRE_OK(s2 ? NB_OK : NB_ERR_STATE);
    CHECK_SAME_PRINT(t.main, m2);
    CHECK_SAME_PRINT(t.startup, s2);
    /* What print does not show: ids, the seed, the id counter. */
    CHECK(s2->random_seed == 1234);
    CHECK(m2->next_op_id == t.main->next_op_id && s2->next_op_id == t.startup->next_op_id);
    for (int i = 0; i < t.main->blocks[0]->n_ops; i++)
        CHECK(m2->blocks[0]->ops[i]->id == t.main->blocks[0]->ops[i]->id);
    /* Saving the loaded programs gives the same bytes. */
    uint8_t *b1, *b2;
    size_t n1, n2;
    CHECK_OK(nb_programs_serialize(t.main, t.startup, &b1, &n1));
    CHECK_OK(nb_programs_serialize(m2, s2, &b2, &n2));
    CHECK(n1 == n2 && !memcmp(b1, b2, n1));
    free(b1);
    free(b2);

    /* Each setup in its own scope: the loaded startup initialises the same
     * parameters, and the loaded main computes the same loss and gradients,
     * to the bit. Then the loaded main in the original's scope. */
    nb_scope *sa, *sb;
    CHECK_OK(nb_scope_new(&sa, NULL));
    CHECK_OK(nb_scope_new(&sb, NULL));
    nb_tensor *oa[3] = {0}, *ob[3] = {0}, *oc[3] = {0};
    run_train(t.main, t.startup, sa, t.loss, oa);
    run_train(m2, s2, sb, t.loss, ob);
    CHECK(same_bytes(nb_scope_find(sa, "fc.w"), nb_scope_find(sb, "fc.w")));
    CHECK(same_bytes(nb_scope_find(sa, "fc.b"), nb_scope_find(sb, "fc.b")));
    CHECK(any_nonzero(nb_scope_find(sa, "fc.b")));
    run_train(m2, NULL, sa, t.loss, oc);
    for (int i = 0; i < 3; i++) {
        CHECK(any_nonzero(oa[i]));
        CHECK(same_bytes(oa[i], ob[i]));
        CHECK(same_bytes(oa[i], oc[i]));
        release_all(oa[i], ob[i], oc[i], NULL);
    }
    nb_scope_free(sa);
    nb_scope_free(sb);
    nb_program_free(m2);
    nb_program_free(s2);
    train_free(&t);
}

/* An op's id seeds its random numbers when it has no seed of its own: ids
 * with a gap (an op removed) and the id counter must come back as they were. */
static void test_ids_and_seed_survive(void)
{
    nb_program *p, *q = NULL;
    REQUIRE_OK(nb_program_new(&p));
    nb_program_set_seed(p, 99);
    nb_block *g = nb_program_global_block(p);
    nb_attr shape[] = {NB_ATTR_INTS("shape", 3, 3)};
    CHECK_OK(nb_block_append_op(g, "fill_constant", NB_NO_NAMES, NB_NAMES("gone"), NB_ATTRS_N(1, shape), NULL));
    CHECK_OK(nb_block_append_op(g, "uniform_random", NB_NO_NAMES, NB_NAMES("r"), NB_ATTRS_N(1, shape), NULL));
    CHECK_OK(nb_block_remove_op(g, 0));
    uint8_t *buf;
    size_t len;
    REQUIRE_OK(nb_program_serialize(p, &buf, &len));
    CHECK_OK(nb_program_deserialize(&q, buf, len));
    free(buf);
    if (!q) {
        nb_program_free(p);
        return;
    }
    CHECK(q->blocks[0]->n_ops == 1 && q->blocks[0]->ops[0]->id == 1);
    CHECK(q->next_op_id == 2 && q->random_seed == 99);
    nb_scope *s;
    CHECK_OK(nb_scope_new(&s, NULL));
    nb_tensor *a = NULL, *b = NULL;
    const char *name = "r";
    CHECK_OK(run(p, s, 0, NULL, 1, &name, &a));
    CHECK_OK(run(q, s, 0, NULL, 1, &name, &b));
    CHECK(any_nonzero(a) && same_bytes(a, b));
    release_all(a, b, NULL);
    nb_scope_free(s);
    nb_program_free(q);
    nb_program_free(p);
}

/* ---- blocks ------------------------------------------------------------- */

static nb_status infer_same(nb_op_ctx *ctx)
{
    *nb_out_info(ctx, 0, 0) = *nb_in_info(ctx, 0, 0);
    return NB_OK;
}

/* No control-flow op exists yet; this one stands for them: it names a
 * sub-block in a block attribute. */
static const nb_op_def test_run_block = {
    .name = "test_run_block",
    .doc = "test op holding a sub-block",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("sub_block", NB_ATTR_BLOCK)},
    .infer = infer_same,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};

static void register_test_op(void)
{
    if (!nb_op_find("test_run_block") && nb_op_register(&test_run_block))
        fprintf(stderr, "  register: %s\n", nb_last_error());
}

/* Block 0 runs block 1 (which reads a var of block 0); block 2, empty, is
 * nested in block 1 and marked as differentiating it. Block 0 also holds
 * variadic slots (sum, split, concat) and an absent optional input (fc with
 * no bias). */
static nb_program *build_blocks(void)
{
    register_test_op();
    nb_program *p;
    if (nb_program_new(&p)) return NULL;
    nb_block *b0 = nb_program_global_block(p), *b1, *b2;
    nb_status st = nb_program_add_block(p, 0, &b1);
    if (!st) st = nb_program_add_block(p, 1, &b2);
    if (!st) {
        b2->forward_block_idx = 1;
        st = nb_block_create_var(b0, "x", NB_F64, 2, S(2, 3), NULL);
    }
    if (!st) st = nb_block_create_var(b0, "w", NB_F64, 2, S(3, 2), NULL);
    if (!st)
        st = nb_block_append_op(b1, "scale", NB_NAMES("x"), NB_NAMES("z"), NB_ATTRS(NB_ATTR_FLOAT("scale", 3)), NULL);
    if (!st)
        st = nb_block_append_op(b0, "test_run_block", NB_NAMES("x"), NB_NAMES("y"),
                                NB_ATTRS(NB_ATTR_BLOCK("sub_block", 1)), NULL);
    if (!st) st = nb_block_append_op(b0, "sum", NB_NAMES("x", "y", "x"), NB_NAMES("s"), NB_NO_ATTRS, NULL);
    if (!st)
        st = nb_block_append_op(b0, "split", NB_NAMES("s"), NB_NAMES("p0", "p1", "p2"),
                                NB_ATTRS(NB_ATTR_INT("axis", 1)), NULL);
    if (!st)
        st = nb_block_append_op(b0, "concat", NB_NAMES("p2", "p0", "p1"), NB_NAMES("c"),
                                NB_ATTRS(NB_ATTR_INT("axis", 1)), NULL);
    if (!st) st = nb_block_append_op(b0, "fc", NB_NAMES("c", "w", NULL), NB_NAMES("f"), NB_NO_ATTRS, NULL);
    if (st) {
        fprintf(stderr, "  build_blocks: %s\n", nb_last_error());
        nb_program_free(p);
        return NULL;
    }
    return p;
}

static void test_blocks_round_trip(void)
{
    nb_program *p = build_blocks(), *q = NULL;
    REQUIRE_OK(p ? NB_OK : NB_ERR_STATE);
    uint8_t *buf;
    size_t len;
    CHECK_OK(nb_program_serialize(p, &buf, &len));
    CHECK_OK(nb_program_deserialize(&q, buf, len));
    free(buf);
    if (q) {
        CHECK_SAME_PRINT(p, q);
        CHECK(q->n_blocks == 3);
        CHECK(q->blocks[0]->parent_idx == -1 && q->blocks[1]->parent_idx == 0 && q->blocks[2]->parent_idx == 1);
        CHECK(q->blocks[0]->forward_block_idx == -1 && q->blocks[1]->forward_block_idx == -1 &&
              q->blocks[2]->forward_block_idx == 1);
        CHECK(q->blocks[2]->n_ops == 0 && q->blocks[2]->n_vars == 0);
        CHECK(q->blocks[1]->n_ops == 1 && nb_block_find_var(q->blocks[1], "z") &&
              !nb_block_find_var(q->blocks[1], "x"));
        const nb_attr_value *sb = nb_op_attr(q->blocks[0]->ops[0], "sub_block");
        CHECK(sb && sb->type == NB_ATTR_BLOCK && sb->block == 1);
        const nb_op *split = q->blocks[0]->ops[2], *fc = q->blocks[0]->ops[4];
        CHECK(nb_op_out_count(split, 0) == 3 && !strcmp(nb_op_out_name(split, 0, 2), "p2"));
        CHECK(nb_op_in_count(fc, 2) == 0 && nb_op_in_count(fc, 1) == 1);
    }
    nb_program_free(q);
    nb_program_free(p);
}

/* The program API checks only that a block attribute is in range; a file
 * must also name a block nested in the op's own, or a control-flow op could
 * run its own block (or a sibling running it back) forever. */
static void test_block_attr_must_name_a_sub_block(void)
{
    register_test_op();
    static const struct {
        int op_block, target;
    } cases[] = {{0, 0}, {1, 0}, {1, 2}, {2, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        nb_program *p, *q = NULL;
        nb_block *b1, *b2;
        REQUIRE_OK(nb_program_new(&p));
        CHECK_OK(nb_program_add_block(p, 0, &b1));
        CHECK_OK(nb_program_add_block(p, 0, &b2));
        CHECK_OK(nb_block_create_var(p->blocks[0], "x", NB_F64, 1, S(2), NULL));
        CHECK_OK(nb_block_append_op(p->blocks[cases[c].op_block], "test_run_block", NB_NAMES("x"), NB_NAMES("y"),
                                    NB_ATTRS(NB_ATTR_BLOCK("sub_block", cases[c].target)), NULL));
        uint8_t *buf;
        size_t len;
        CHECK_OK(nb_program_serialize(p, &buf, &len));
        CHECK_ERR(nb_program_deserialize(&q, buf, len), NB_ERR_FORMAT, "which is not nested in block");
        CHECK(q == NULL);
        free(buf);
        nb_program_free(p);
    }
}

/* ---- hostile files: one field at a time -------------------------------- */

/* protobuf-c allocations for mutated messages come from this arena, so a
 * mutation may point fields at anything; all is freed at once. */
typedef struct arena {
    void **p;
    size_t n, cap;
} arena;
static arena the_arena;

static void *arena_alloc(void *data, size_t size)
{
    arena *a = data;
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->p = realloc(a->p, a->cap * sizeof *a->p);
        if (!a->p) abort();
    }
    void *m = calloc(1, size ? size : 1);
    if (!m) abort();
    return a->p[a->n++] = m;
}
static void arena_free_one(void *data, void *ptr) { (void)data, (void)ptr; }
static void arena_clear(arena *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
    *a = (arena){0};
}
static ProtobufCAllocator arena_allocator = {arena_alloc, arena_free_one, &the_arena};

static Nabla__ProgramFile *unpack(const uint8_t *buf, size_t len)
{
    Nabla__ProgramFile *pf = nabla__program_file__unpack(&arena_allocator, len, buf);
    if (!pf) {
        fprintf(stderr, "  unpack of a valid file failed\n");
        test_failures_in_current++;
    }
    return pf;
}

/* Packs a mutated message and loads it: both programs (or NULL). */
static nb_status load_mutated(Nabla__ProgramFile *pf, nb_program **main_p, nb_program **startup)
{
    size_t n = nabla__program_file__get_packed_size(pf);
    uint8_t *b = malloc(n + 1);
    nabla__program_file__pack(pf, b);
    nb_status st = nb_programs_deserialize(main_p, startup, b, n);
    free(b);
    return st;
}

static void expect_error_(int line, const char *what, Nabla__ProgramFile *pf, nb_status code, const char *needle)
{
    nb_program *m = NULL, *s = NULL;
    nb_status st = load_mutated(pf, &m, &s);
    if (st != code || !strstr(nb_last_error(), needle) || m || s) {
        fprintf(stderr, "  line %d: after `%s` loading gave %s \"%s\", wanted %s containing \"%s\"\n", line, what,
                nb_status_name(st), nb_last_error(), nb_status_name(code), needle);
        test_failures_in_current++;
    }
    nb_program_free(m);
    nb_program_free(s);
    arena_clear(&the_arena);
}

/* MUTATE(bytes, len, code, needle, statement on pf): unpack a valid file,
 * change it, and check that loading fails with `code` and `needle`. */
#define MUTATE(buf, len, code, needle, ...)                         \
    do {                                                            \
        Nabla__ProgramFile *pf = unpack((buf), (len));              \
        if (!pf) break;                                             \
        __VA_ARGS__;                                                \
        expect_error_(__LINE__, #__VA_ARGS__, pf, (code), (needle)); \
    } while (0)

static Nabla__VarDesc *var_of(const Nabla__BlockDesc *b, const char *name)
{
    for (size_t i = 0; i < b->n_vars; i++)
        if (!strcmp(b->vars[i]->name, name)) return b->vars[i];
    abort();
}

static Nabla__OpDesc *op_of(const Nabla__BlockDesc *b, const char *type)
{
    for (size_t i = 0; i < b->n_ops; i++)
        if (!strcmp(b->ops[i]->type, type)) return b->ops[i];
    abort();
}

static Nabla__OpDesc__Attr *attr_of(const Nabla__OpDesc *op, const char *name)
{
    for (size_t i = 0; i < op->n_attrs; i++)
        if (!strcmp(op->attrs[i]->name, name)) return op->attrs[i];
    abort();
}

#define B0 pf->main->blocks[0]
#define FC op_of(B0, "fc")
#define AMALLOC(n) arena_alloc(&the_arena, (n))

static void test_hostile_fields(void)
{
    train t;
    REQUIRE_OK(build_train(&t) ? NB_OK : NB_ERR_STATE);
    uint8_t *buf;
    size_t len;
    REQUIRE_OK(nb_programs_serialize(t.main, t.startup, &buf, &len));
    train_free(&t);
    /* Sanity: the unmutated file loads. */
    {
        Nabla__ProgramFile *pf = unpack(buf, len);
        nb_program *m = NULL, *s = NULL;
        if (pf) CHECK_OK(load_mutated(pf, &m, &s));
        nb_program_free(m);
        nb_program_free(s);
        arena_clear(&the_arena);
    }
    /* Versions. */
    MUTATE(buf, len, NB_ERR_UNSUPPORTED, "format version 2, newer than the 1", pf->version = 2);
    MUTATE(buf, len, NB_ERR_UNSUPPORTED, "main program has format version 7", pf->main->version = 7);
    MUTATE(buf, len, NB_ERR_UNSUPPORTED, "startup program has format version 9", pf->startup->version = 9);
    MUTATE(buf, len, NB_ERR_FORMAT, "not a nabla program file (the file has no format version)", pf->version = 0);
    MUTATE(buf, len, NB_ERR_FORMAT, "holds no main program", pf->main = NULL);
    /* Blocks. */
    MUTATE(buf, len, NB_ERR_FORMAT, "main program: it has no blocks", pf->main->n_blocks = 0);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 0 says it is block 3", B0->idx = 3);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 0 has parent 0", B0->parent_idx = 0);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 0 differentiates block 0", B0->forward_block_idx = 0);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 0 differentiates block 4", B0->forward_block_idx = 4);
    /* Vars. */
    MUTATE(buf, len, NB_ERR_FORMAT, "var 'x' has dtype 42", var_of(B0, "x")->dtype = 42);
    MUTATE(buf, len, NB_ERR_FORMAT, "var 'x' has dtype -1", var_of(B0, "x")->dtype = -1);
    MUTATE(buf, len, NB_ERR_FORMAT, "var 'x' has 9 dimensions (at most 8)", Nabla__VarDesc *v = var_of(B0, "x");
           v->shape = AMALLOC(9 * sizeof(int64_t)); v->n_shape = 9);
    MUTATE(buf, len, NB_ERR_FORMAT, "var 'x' has size -2 in dimension 1", var_of(B0, "x")->shape[1] = -2);
    MUTATE(buf, len, NB_ERR_FORMAT, "var 'x' has a shape too large", Nabla__VarDesc *v = var_of(B0, "x");
           v->shape[0] = (int64_t)1 << 40; v->shape[1] = (int64_t)1 << 40);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 0 lists var 'x' twice", var_of(B0, "label")->name = "x");
    MUTATE(buf, len, NB_ERR_FORMAT, "block 0: var 1 has no name", B0->vars[1]->name = "");
    MUTATE(buf, len, NB_ERR_FORMAT, "var 'fc.b' is float64[4] in the file, but the ops writing it make float64[3]",
           var_of(pf->startup->blocks[0], "fc.b")->shape[0] = 4);
    MUTATE(buf, len, NB_ERR_FORMAT, "in the file, but the ops writing it make float64[-1, 3]",
           var_of(B0, FC->outputs[0]->arguments[0])->dtype = NABLA__DTYPE__DTYPE_FLOAT32);
    /* Ops: types, slots, attributes. */
    MUTATE(buf, len, NB_ERR_NOT_FOUND, "main program: block 0, op 0 (no_such_op): unknown op type 'no_such_op'",
           B0->ops[0]->type = "no_such_op");
    MUTATE(buf, len, NB_ERR_NOT_FOUND, "startup program: block 0, op 1 (gaussian_rand): unknown op type",
           pf->startup->blocks[0]->ops[1]->type = "gaussian_rand");
    MUTATE(buf, len, NB_ERR_FORMAT, "op 0 (fc): no input slot 'Nope' in fc(Input, W, Bias?)",
           FC->inputs[0]->parameter = "Nope");
    MUTATE(buf, len, NB_ERR_FORMAT, "input slot 'Input' given twice", FC->inputs[1]->parameter = "Input");
    MUTATE(buf, len, NB_ERR_FORMAT, "output slot 'Out' holds 2 vars; it takes one",
           Nabla__OpDesc__Slot *s = FC->outputs[0];
           char **a = AMALLOC(2 * sizeof *a); a[0] = a[1] = s->arguments[0]; s->arguments = a; s->n_arguments = 2);
    MUTATE(buf, len, NB_ERR_FORMAT, "input slot 'W' holds 0 vars", FC->inputs[1]->n_arguments = 0);
    MUTATE(buf, len, NB_ERR_ARG, "missing input 'W'", FC->inputs[1] = FC->inputs[2]; FC->n_inputs = 2);
    MUTATE(buf, len, NB_ERR_FORMAT, "input slot 'Input' names a var with no name", FC->inputs[0]->arguments[0] = "");
    MUTATE(buf, len, NB_ERR_NOT_FOUND, "input var 'ghost' does not exist", FC->inputs[0]->arguments[0] = "ghost");
    MUTATE(buf, len, NB_ERR_FORMAT, "9 input slots given", Nabla__OpDesc *op = FC;
           Nabla__OpDesc__Slot **s = AMALLOC(9 * sizeof *s); for (int i = 0; i < 9; i++) s[i] = op->inputs[0];
           op->inputs = s; op->n_inputs = 9);
    MUTATE(buf, len, NB_ERR_ARG, "attribute 'in_num_col_dims' must be of type int, got string",
           attr_of(FC, "in_num_col_dims")->type = NABLA__ATTR_TYPE__ATTR_STRING);
    MUTATE(buf, len, NB_ERR_ARG, "unknown attribute 'bogus'", attr_of(FC, "activation")->name = "bogus");
    MUTATE(buf, len, NB_ERR_FORMAT, "attribute 'in_num_col_dims' has type 42",
           attr_of(FC, "in_num_col_dims")->type = 42);
    MUTATE(buf, len, NB_ERR_FORMAT, "attribute 'in_num_col_dims' given twice",
           attr_of(FC, "activation")->name = "in_num_col_dims");
    MUTATE(buf, len, NB_ERR_ARG, "op 0 (fc): fc (fc_0.tmp_0): in_num_col_dims is 5",
           attr_of(FC, "in_num_col_dims")->i = 5);
    MUTATE(buf, len, NB_ERR_FORMAT, "op 0 (fc): role 9", FC->role = 9);
    MUTATE(buf, len, NB_ERR_FORMAT, "1 role vars", FC->n_role_var = 1; FC->role_var = &FC->type);
    MUTATE(buf, len, NB_ERR_FORMAT, "a role var has no name", char **rv = AMALLOC(2 * sizeof *rv); rv[0] = "fc.w";
           rv[1] = ""; FC->role_var = rv; FC->n_role_var = 2);
    MUTATE(buf, len, NB_ERR_FORMAT, "id -5 is out of range", FC->id = -5);
    MUTATE(buf, len, NB_ERR_FORMAT, "two ops have id", B0->ops[2]->id = B0->ops[1]->id);
    MUTATE(buf, len, NB_ERR_FORMAT, "next op id -1 is negative", pf->main->next_op_id = -1);
    MUTATE(buf, len, NB_ERR_FORMAT, "a name counter has no prefix", pf->main->name_counters[0]->prefix = "");
    free(buf);

    /* Block structure, on a program with sub-blocks. */
    nb_program *p = build_blocks();
    REQUIRE_OK(p ? NB_OK : NB_ERR_STATE);
    REQUIRE_OK(nb_program_serialize(p, &buf, &len));
    nb_program_free(p);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 1 has parent 1 (a block's parent is an earlier block)",
           pf->main->blocks[1]->parent_idx = 1);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 1 has parent 2", pf->main->blocks[1]->parent_idx = 2);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 2 has parent -1", pf->main->blocks[2]->parent_idx = -1);
    MUTATE(buf, len, NB_ERR_FORMAT, "block 2 differentiates block 9", pf->main->blocks[2]->forward_block_idx = 9);
    MUTATE(buf, len, NB_ERR_FORMAT, "names block 0, which is not nested in block 0",
           attr_of(B0->ops[0], "sub_block")->block_idx = 0);
    MUTATE(buf, len, NB_ERR_ARG, "names block 7, which does not exist",
           attr_of(B0->ops[0], "sub_block")->block_idx = 7);
    MUTATE(buf, len, NB_ERR_ARG, "missing required attribute 'sub_block'", B0->ops[0]->n_attrs = 0);
    MUTATE(buf, len, NB_ERR_ARG, "'sub_block' must be of type block, got int",
           attr_of(B0->ops[0], "sub_block")->type = NABLA__ATTR_TYPE__ATTR_INT);
    /* A var the ops read, missing. */
    MUTATE(buf, len, NB_ERR_NOT_FOUND, "'w' does not exist in block 0", var_of(B0, "w")->name = "w_elsewhere");
    free(buf);

    /* Not protobuf at all, or nothing. */
    nb_program *q = NULL;
    CHECK_ERR(nb_program_deserialize(&q, (const uint8_t *)"", 0), NB_ERR_FORMAT, "empty, not a nabla program file");
    CHECK_ERR(nb_program_deserialize(&q, (const uint8_t *)"\xff\xff\xff\xff", 4), NB_ERR_FORMAT,
              "not a nabla program file (malformed or truncated protobuf data)");
    CHECK_ERR(nb_program_deserialize(&q, (const uint8_t *)"hello, world", 12), NB_ERR_FORMAT,
              "not a nabla program file");
    CHECK(q == NULL);
}

/* ---- hostile files: every truncation, flipped bytes --------------------- */

/* A file that loaded is a valid program: it saves and loads again, the
 * same. */
static void check_loaded_valid(nb_program *m, nb_program *s, int *bad_count)
{
    uint8_t *b;
    size_t n;
    nb_program *m2 = NULL, *s2 = NULL;
    bool ok = !nb_programs_serialize(m, s, &b, &n);
    if (ok) {
        ok = !nb_programs_deserialize(&m2, &s2, b, n) && (s2 != NULL) == (s != NULL);
        free(b);
    }
    char *a = printed(m), *c = m2 ? printed(m2) : NULL;
    ok = ok && a && c && !strcmp(a, c);
    free(a);
    free(c);
    nb_program_free(m2);
    nb_program_free(s2);
    *bad_count += !ok;
}

/* Loads n bytes; counts the outcome. */
static void try_load(const uint8_t *bytes, size_t n, int *loaded, int *refused, int *bad, int *silent)
{
    nb_program *m = NULL, *s = NULL;
    nb_clear_error();
    if (nb_programs_deserialize(&m, &s, bytes, n)) {
        (*refused)++;
        *silent += !*nb_last_error() || m || s;
    } else {
        (*loaded)++;
        check_loaded_valid(m, s, bad);
    }
    nb_program_free(m);
    nb_program_free(s);
}

/* Every truncation of a valid file, every byte flipped with several masks,
 * and random multi-byte damage: each loads a valid program or is refused
 * with a message, and nothing crashes or leaks (run under ASan). */
static void fuzz_file(const char *what, const uint8_t *buf, size_t len)
{
    int loaded = 0, refused = 0, bad = 0, silent = 0;
    for (size_t n = 0; n < len; n++) {
        /* A copy of exactly n bytes, so that ASan sees any read past them. */
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        try_load(cut, n, &loaded, &refused, &bad, &silent);
        free(cut);
    }
    printf("     %s, truncated: %d loaded, %d refused\n", what, loaded, refused);
    CHECK(refused > 0);
    loaded = refused = 0;
    uint8_t *copy = malloc(len);
    static const uint8_t masks[] = {0x01, 0x04, 0x20, 0x80, 0xff};
    for (size_t i = 0; i < len; i++)
        for (size_t k = 0; k < sizeof masks; k++) {
            memcpy(copy, buf, len);
            copy[i] ^= masks[k];
            try_load(copy, len, &loaded, &refused, &bad, &silent);
        }
    printf("     %s, one byte flipped: %d loaded, %d refused\n", what, loaded, refused);
    CHECK(refused > 0 && loaded > 0);
    loaded = refused = 0;
    nb_rng rng;
    nb_rng_seed(&rng, 7);
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, buf, len);
        int changes = 1 + (int)(nb_rng_u64(&rng) % 4);
        for (int c = 0; c < changes; c++) copy[nb_rng_u64(&rng) % len] = (uint8_t)nb_rng_u64(&rng);
        try_load(copy, len, &loaded, &refused, &bad, &silent);
    }
    printf("     %s, random damage: %d loaded, %d refused\n", what, loaded, refused);
    CHECK(bad == 0);    /* every program that loaded was valid */
    CHECK(silent == 0); /* every refusal said why and returned nothing */
    free(copy);
}

static void test_truncated_and_damaged(void)
{
    train t;
    REQUIRE_OK(build_train(&t) ? NB_OK : NB_ERR_STATE);
    uint8_t *buf;
    size_t len;
    REQUIRE_OK(nb_programs_serialize(t.main, t.startup, &buf, &len));
    train_free(&t);
    fuzz_file("training setup", buf, len);
    free(buf);
    nb_program *p = build_blocks();
    REQUIRE_OK(p ? NB_OK : NB_ERR_STATE);
    REQUIRE_OK(nb_program_serialize(p, &buf, &len));
    nb_program_free(p);
    fuzz_file("sub-blocks", buf, len);
    free(buf);
}

/* ---- files ----------------------------------------------------------------- */

static int count_temp_files(void)
{
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static void test_files(void)
{
    train t;
    REQUIRE_OK(build_train(&t) ? NB_OK : NB_ERR_STATE);
    char path[128], missing[160], dirpath[128];
    tmp_path(path, sizeof path, "one.nbp");
    tmp_path(missing, sizeof missing, "no/such/dir/p.nbp");
    tmp_path(dirpath, sizeof dirpath, "a_directory");
    nb_program *m = NULL, *s = NULL;

    /* One program: nb_programs_load says there is no startup program. */
    CHECK_OK(nb_program_save(path, t.startup));
    CHECK_OK(nb_programs_load(&m, &s, path));
    CHECK(m && !s);
    if (m) CHECK_SAME_PRINT(t.startup, m);
    nb_program_free(m);
    /* Saving again replaces the file atomically; nb_program_load of a file
     * of two programs gives the main one. */
    CHECK_OK(nb_programs_save(path, t.main, t.startup));
    CHECK_OK(nb_program_load(&m, path));
    if (m) CHECK_SAME_PRINT(t.main, m);
    nb_program_free(m);
    CHECK(count_temp_files() == 0);

    /* The format version is written in the file and in each program. */
    uint8_t *buf;
    size_t len;
    REQUIRE_OK(nb_programs_serialize(t.main, t.startup, &buf, &len));
    Nabla__ProgramFile *pf = unpack(buf, len);
    CHECK(pf && pf->version == NB_PROGRAM_FORMAT_VERSION && pf->main->version == NB_PROGRAM_FORMAT_VERSION &&
          pf->startup && pf->startup->version == NB_PROGRAM_FORMAT_VERSION);
    arena_clear(&the_arena);
    free(buf);

    /* Failures name the file and leave nothing behind. */
    CHECK_ERR(nb_program_load(&m, missing), NB_ERR_NOT_FOUND, "no/such/dir/p.nbp");
    CHECK(m == NULL);
    CHECK_ERR(nb_program_save(missing, t.main), NB_ERR_IO, "cannot write program file");
    CHECK(mkdir(dirpath, 0755) == 0);
    CHECK_ERR(nb_program_save(dirpath, t.main), NB_ERR_IO, "a_directory");
    CHECK_ERR(nb_program_load(&m, dirpath), NB_ERR_IO, "a_directory");
    CHECK(count_temp_files() == 0);
    rmdir(dirpath);
    /* A damaged file on disk: the error names it. */
    FILE *f = fopen(path, "r+b");
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        CHECK(ftruncate(fileno(f), n / 2) == 0);
        fclose(f);
    }
    CHECK_ERR(nb_program_load(&m, path), NB_ERR_FORMAT, "one.nbp");
    CHECK(m == NULL);
    unlink(path);

    CHECK_ERR(nb_program_save(path, NULL), NB_ERR_ARG, "NULL");
    CHECK_ERR(nb_program_serialize(NULL, &buf, &len), NB_ERR_ARG, "NULL");
    train_free(&t);
}

/* A loaded program keeps its unique-name counters, so layers added to it
 * later make new vars instead of writing over loaded ones; a file without
 * counters (written by another tool) gets them from its var names. */
static void test_names_after_load(void)
{
    train t;
    REQUIRE_OK(build_train(&t) ? NB_OK : NB_ERR_STATE);
    uint8_t *buf;
    size_t len;
    REQUIRE_OK(nb_programs_serialize(t.main, NULL, &buf, &len));
    for (int strip = 0; strip < 2; strip++) {
        nb_program *m = NULL;
        if (strip) {
            Nabla__ProgramFile *pf = unpack(buf, len);
            if (pf) {
                pf->main->n_name_counters = 0;
                CHECK_OK(load_mutated(pf, &m, NULL));
            }
            arena_clear(&the_arena);
        } else {
            CHECK_OK(nb_program_deserialize(&m, buf, len));
        }
        if (!m) continue;
        nb_builder *b;
        CHECK_OK(nb_builder_new_record(&b, m, NULL));
        int before = m->blocks[0]->n_vars;
        nb_value y = nb_fc(b, nb_value_by_name(b, "x"), nb_value_by_name(b, "fc.w"), nb_value_by_name(b, "fc.b"), 1);
        CHECK_OK(nb_builder_status(b));
        CHECK_STR(nb_value_name(y), "fc_1.tmp_0");
        CHECK(m->blocks[0]->n_vars == before + 1);
        nb_builder_free(b);
        nb_program_free(m);
    }
    free(buf);
    train_free(&t);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nabla_progfile_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_train_round_trip);
    RUN(test_ids_and_seed_survive);
    RUN(test_blocks_round_trip);
    RUN(test_block_attr_must_name_a_sub_block);
    RUN(test_hostile_fields);
    RUN(test_truncated_and_damaged);
    RUN(test_files);
    RUN(test_names_after_load);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_report();
}
