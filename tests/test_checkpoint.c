/* Checkpoints of a program's state: a round trip through a fresh scope,
 * where loaded values go, every mismatch in one message with the scope left
 * as it was, and a save that fails half-way leaving the old file. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "nabla/checkpoint.h"
#include "file_test_util.h"
#include "test.h"
#include "program/record.h"

typedef struct model {
    nb_program *main, *startup;
    const char *y; /* the fc output */
} model;

typedef struct spec {
    int64_t w_rows, w_cols, b_size;
    nb_dtype lr_dtype;
    double step;
    bool extra;
} spec;

static const spec A = {4, 3, 3, NB_F32, 5, false};

/* y = fc(x, w, b) with parameters fc.w (uniform_random), fc.b, lr (fill_constant)
 * and a 0-d int64 step counter: the state a training program keeps. */
static bool build(model *m, spec s)
{
    nb_builder *b;
    if (nb_program_new(&m->main) || nb_program_new(&m->startup) || nb_builder_new_record(&b, m->main, m->startup))
        return false;
    nb_value x = nb_data(b, "x", NB_F32, 2, S(-1, s.w_rows));
    nb_attr seed = NB_ATTR_INT("seed", 7), half = NB_ATTR_FLOAT("value", 0.5), lr = NB_ATTR_FLOAT("value", 0.1),
            step = NB_ATTR_FLOAT("value", s.step);
    nb_value w = nb_create_parameter(b, "fc.w", NB_F32, 2, S(s.w_rows, s.w_cols), "uniform_random", 1, &seed);
    nb_value bias = nb_create_parameter(b, "fc.b", NB_F32, 1, S(s.b_size), "fill_constant", 1, &half);
    nb_create_parameter(b, "lr", s.lr_dtype, 1, S(1), "fill_constant", 1, &lr);
    nb_create_parameter(b, "step", NB_I64, 0, NULL, "fill_constant", 1, &step);
    if (s.extra) nb_create_parameter(b, "extra", NB_F32, 1, S(2), "fill_constant", 1, &lr);
    nb_value y = s.w_cols == s.b_size ? nb_fc(b, x, w, bias, 1) : NB_NONE;
    bool ok = !nb_builder_status(b);
    if (!ok) fprintf(stderr, "  build: %s\n", nb_builder_error(b));
    m->y = nb_is_none(y) ? NULL : nb_value_name(y);
    nb_builder_free(b);
    return ok;
}

static void model_free(model *m)
{
    nb_program_free(m->main);
    nb_program_free(m->startup);
}

/* A scope holding the program's initial state. */
static nb_scope *init_scope(model *m)
{
    nb_executor *ex;
    nb_scope *scope;
    if (nb_executor_new(&ex) || nb_scope_new(&scope, NULL)) return NULL;
    nb_status st = nb_executor_run(ex, m->startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    nb_executor_free(ex);
    if (st) {
        fprintf(stderr, "  startup: %s\n", nb_last_error());
        nb_scope_free(scope);
        return NULL;
    }
    return scope;
}

static bool same_bytes(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return false;
    return !memcmp(nb_tensor_data(a), nb_tensor_data(b), (size_t)nb_tensor_numel(a) * nb_dtype_size(a->dtype));
}

static nb_tensor *run_fc(model *m, nb_scope *scope)
{
    nb_executor *ex;
    nb_tensor *x = T(NB_F32, S(2, 4), 1, 2, 3, 4, -1, 0.5, 0, 2), *y = NULL;
    if (!nb_executor_new(&ex)) {
        CHECK_OK(nb_executor_run(ex, m->main, scope, NB_FEEDS({"x", x}), NB_NAMES_N(1, &m->y), &y));
        nb_executor_free(ex);
    }
    nb_tensor_release(x);
    return y;
}

static void test_round_trip(void)
{
    model m;
    REQUIRE_OK(build(&m, A) ? NB_OK : NB_ERR_STATE);
    nb_scope *scope = init_scope(&m), *fresh;
    REQUIRE_OK(scope ? NB_OK : NB_ERR_STATE);
    const char *keys[] = {"epoch", "step"}, *values[] = {"3", "1200"};
    const char *path = path_of("a.ckpt");
    REQUIRE_OK(nb_checkpoint_save(path, m.main, scope, &(nb_meta){2, keys, values}));

    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    nb_safetensors *meta;
    REQUIRE_OK(nb_checkpoint_load(path, m.main, fresh, &meta));
    const char *vars[] = {"fc.w", "fc.b", "lr", "step"};
    for (int i = 0; i < 4; i++) {
        if (!same_bytes(nb_scope_find(fresh, vars[i]), nb_scope_find(scope, vars[i]))) {
            fprintf(stderr, "  var %s differs after loading\n", vars[i]);
            test_failures_in_current++;
        }
    }
    CHECK(nb_scope_size(fresh) == 4);
    CHECK_SCALAR(nb_scope_find(fresh, "step"), 5, 0);
    CHECK(nb_scope_find(fresh, "step")->dtype == NB_I64);
    /* The file holds the persistable vars only (not the data var x), and the metadata. */
    CHECK(nb_safetensors_count(meta) == 4 && !nb_safetensors_find(meta, "x"));
    CHECK_STR(nb_safetensors_meta(meta, "epoch"), "3");
    CHECK_STR(nb_safetensors_meta(meta, "step"), "1200");
    nb_safetensors_free(meta);
    /* The restored scope runs the program as the original does. */
    nb_tensor *y1 = run_fc(&m, scope), *y2 = run_fc(&m, fresh);
    CHECK(y1 && y2 && nb_tensor_allclose(y1, y2, 0, 0));
    release_all(y1, y2, NULL);
    /* Saving the restored state gives the same file. */
    CHECK_OK(nb_checkpoint_save(path_of("b.ckpt"), m.main, fresh, &(nb_meta){2, keys, values}));
    nb_safetensors *a, *b;
    REQUIRE_OK(nb_safetensors_load(&a, path_of("a.ckpt")));
    REQUIRE_OK(nb_safetensors_load(&b, path_of("b.ckpt")));
    for (int i = 0; i < 4; i++) CHECK(same_bytes(nb_safetensors_find(a, vars[i]), nb_safetensors_find(b, vars[i])));
    nb_safetensors_free(a);
    nb_safetensors_free(b);
    nb_scope_free(fresh);
    nb_scope_free(scope);
    model_free(&m);
}

static void test_values_go_to_existing_tensors(void)
{
    model m;
    REQUIRE_OK(build(&m, A) ? NB_OK : NB_ERR_STATE);
    nb_scope *scope = init_scope(&m);
    REQUIRE_OK(scope ? NB_OK : NB_ERR_STATE);
    const char *path = path_of("c.ckpt");
    REQUIRE_OK(nb_checkpoint_save(path, m.main, scope, NULL));

    nb_scope *parent, *child;
    REQUIRE_OK(nb_scope_new(&parent, NULL));
    REQUIRE_OK(nb_scope_new(&child, parent));
    nb_tensor *w = T(NB_F32, S(4, 3), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0); /* same shape: filled in place */
    nb_tensor *b = T(NB_F32, S(3), 9, 9, 9);                               /* in the parent: filled there */
    nb_tensor *lr = tscalar(NB_F64, 0);                                    /* other dtype and shape: replaced */
    CHECK_OK(nb_scope_set(child, "fc.w", w));
    CHECK_OK(nb_scope_set(parent, "fc.b", b));
    CHECK_OK(nb_scope_set(parent, "lr", lr));
    REQUIRE_OK(nb_checkpoint_load(path, m.main, child, NULL));
    CHECK(nb_scope_find(child, "fc.w") == w && same_bytes(w, nb_scope_find(scope, "fc.w")));
    CHECK(nb_scope_find_local(child, "fc.b") == NULL && nb_scope_find(parent, "fc.b") == b);
    CHECK_TENSOR(b, S(3), 0, 0.5, 0.5, 0.5);
    CHECK(nb_scope_find_local(child, "lr") == NULL);
    nb_tensor *lr2 = nb_scope_find_local(parent, "lr");
    CHECK(lr2 && lr2 != lr && lr2->dtype == NB_F32);
    CHECK_TENSOR(lr2, S(1), 1e-7, 0.1);
    CHECK(nb_scope_find_local(child, "step") != NULL); /* new names go to the scope given */
    release_all(w, b, lr, NULL);
    nb_scope_free(child);
    nb_scope_free(parent);
    nb_scope_free(scope);
    model_free(&m);
}

/* The state of a scope, to check a failed load changed nothing. */
typedef struct snapshot {
    int n;
    const char *names[16];
    nb_tensor *ptr[16], *copy[16];
} snapshot;

static void snap(snapshot *s, nb_scope *scope)
{
    s->n = nb_scope_size(scope);
    for (int i = 0; i < s->n && i < 16; i++) {
        s->names[i] = nb_scope_name_at(scope, i);
        s->ptr[i] = nb_scope_tensor_at(scope, i);
        if (nb_tensor_clone(&s->copy[i], s->ptr[i])) s->copy[i] = NULL;
    }
}

static bool unchanged(snapshot *s, nb_scope *scope)
{
    bool same = nb_scope_size(scope) == s->n;
    for (int i = 0; i < s->n && i < 16; i++) {
        nb_tensor *t = nb_scope_find_local(scope, s->names[i]);
        same = same && t == s->ptr[i] && same_bytes(t, s->copy[i]);
        nb_tensor_release(s->copy[i]);
    }
    return same;
}

static void test_every_mismatch_reported(void)
{
    model a, b;
    REQUIRE_OK(build(&a, A) ? NB_OK : NB_ERR_STATE);
    /* fc.w and fc.b of other shapes, lr of another dtype, a var the file
     * lacks; step fits (and must not be loaded alone). */
    REQUIRE_OK(build(&b, (spec){3, 4, 5, NB_F64, 1, true}) ? NB_OK : NB_ERR_STATE);
    nb_scope *sa = init_scope(&a), *sb = init_scope(&b);
    REQUIRE_OK(sa && sb ? NB_OK : NB_ERR_STATE);
    const char *path = path_of("d.ckpt");
    const char *k[] = {"epoch"}, *v[] = {"1"};
    REQUIRE_OK(nb_checkpoint_save(path, a.main, sa, &(nb_meta){1, k, v}));
    snapshot s;
    snap(&s, sb);
    nb_safetensors *meta = (nb_safetensors *)&meta;
    nb_status st = nb_checkpoint_load(path, b.main, sb, &meta);
    CHECK(st == NB_ERR_FORMAT && meta == NULL);
    const char *msg = nb_last_error();
    const char *parts[] = {path,
                           "(4 mismatches",
                           "var 'fc.w': expected float32 [3, 4], found float32 [4, 3]",
                           "var 'fc.b': expected float32 [5], found float32 [3]",
                           "var 'lr': expected float64 [1], found float32 [1]",
                           "var 'extra': expected float32 [2], missing in the file"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (!strstr(msg, parts[i])) {
            fprintf(stderr, "  the message lacks \"%s\": %s\n", parts[i], msg);
            test_failures_in_current++;
        }
    CHECK(!strstr(msg, "'step'"));
    CHECK(unchanged(&s, sb));
    CHECK_SCALAR(nb_scope_find(sb, "step"), 1, 0);
    /* A fresh scope stays empty. */
    nb_scope *fresh;
    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    CHECK_ERR(nb_checkpoint_load(path, b.main, fresh, NULL), NB_ERR_FORMAT, "does not fit the program");
    CHECK(nb_scope_size(fresh) == 0);
    nb_scope_free(fresh);
    nb_scope_free(sa);
    nb_scope_free(sb);
    model_free(&a);
    model_free(&b);
}

/* Many mismatches still make a message that ends well. */
static void test_many_mismatches(void)
{
    nb_program *p, *q;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_program_new(&q));
    nb_scope *scope;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    char name[64];
    for (int i = 0; i < 200; i++) {
        nb_var *v, *u;
        snprintf(name, sizeof name, "layer_%03d.some_long_parameter_name", i);
        REQUIRE_OK(nb_block_create_var(nb_program_global_block(p), name, NB_F32, 1, S(2), &v));
        REQUIRE_OK(nb_block_create_var(nb_program_global_block(q), name, NB_F32, 1, S(3), &u));
        v->persistable = u->persistable = true;
        nb_tensor *t = T(NB_F32, S(2), i, i);
        CHECK_OK(nb_scope_set(scope, name, t));
        nb_tensor_release(t);
    }
    const char *path = path_of("e.ckpt");
    REQUIRE_OK(nb_checkpoint_save(path, p, scope, NULL));
    CHECK_ERR(nb_checkpoint_load(path, q, scope, NULL), NB_ERR_FORMAT, "(200 mismatches");
    CHECK(strstr(nb_last_error(), "more") && strstr(nb_last_error(), "layer_000"));
    nb_scope_free(scope);
    nb_program_free(p);
    nb_program_free(q);
}

static void test_shapes_with_unknown_sizes(void)
{
    nb_program *p;
    REQUIRE_OK(nb_program_new(&p));
    nb_var *v;
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(p), "table", NB_F32, 2, S(-1, 3), &v));
    v->persistable = true;
    nb_scope *scope, *fresh;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    nb_tensor *t = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *wrong = T(NB_F32, S(2, 2), 1, 2, 3, 4);
    CHECK_OK(nb_scope_set(scope, "table", t));
    CHECK_OK(nb_checkpoint_save(path_of("f.ckpt"), p, scope, NULL));
    CHECK_OK(nb_checkpoint_load(path_of("f.ckpt"), p, fresh, NULL));
    CHECK_TENSOR(nb_scope_find(fresh, "table"), S(2, 3), 0, 1, 2, 3, 4, 5, 6);
    CHECK_OK(nb_scope_set(scope, "table", wrong));
    CHECK_OK(nb_checkpoint_save(path_of("f.ckpt"), p, scope, NULL));
    CHECK_ERR(nb_checkpoint_load(path_of("f.ckpt"), p, fresh, NULL), NB_ERR_FORMAT,
              "var 'table': expected float32 [-1, 3], found float32 [2, 2]");
    release_all(t, wrong, NULL);
    nb_scope_free(scope);
    nb_scope_free(fresh);
    nb_program_free(p);
}

static void test_extra_tensors_in_file_are_ignored(void)
{
    model a;
    REQUIRE_OK(build(&a, A) ? NB_OK : NB_ERR_STATE);
    nb_scope *sa = init_scope(&a), *fresh;
    REQUIRE_OK(sa ? NB_OK : NB_ERR_STATE);
    REQUIRE_OK(nb_checkpoint_save(path_of("g.ckpt"), a.main, sa, NULL));
    nb_program *p;
    REQUIRE_OK(nb_program_new(&p));
    nb_var *v;
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(p), "fc.b", NB_F32, 1, S(3), &v));
    v->persistable = true;
    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    CHECK_OK(nb_checkpoint_load(path_of("g.ckpt"), p, fresh, NULL));
    CHECK(nb_scope_size(fresh) == 1);
    CHECK_TENSOR(nb_scope_find(fresh, "fc.b"), S(3), 0, 0.5, 0.5, 0.5);
    nb_scope_free(fresh);
    nb_scope_free(sa);
    nb_program_free(p);
    model_free(&a);
}

static void test_errors(void)
{
    model a;
    REQUIRE_OK(build(&a, A) ? NB_OK : NB_ERR_STATE);
    nb_scope *empty;
    REQUIRE_OK(nb_scope_new(&empty, NULL));
    const char *path = path_of("h.ckpt");
    CHECK_ERR(nb_checkpoint_save(path, a.main, empty, NULL), NB_ERR_NOT_FOUND,
              "4 persistable var(s) have no value in the scope (was the startup program run?): 'fc.w'; 'fc.b'; "
              "'lr'; 'step'");
    CHECK(access(path, F_OK) != 0);
    CHECK_ERR(nb_checkpoint_load(path, a.main, empty, NULL), NB_ERR_NOT_FOUND, "h.ckpt");
    CHECK_ERR(nb_checkpoint_load(NULL, a.main, empty, NULL), NB_ERR_ARG, "NULL");
    CHECK_ERR(nb_checkpoint_save(path, NULL, empty, NULL), NB_ERR_ARG, "NULL");
    /* A malformed file is reported as such. */
    FILE *f = fopen(path, "wb");
    fputs("garbage", f);
    fclose(f);
    CHECK_ERR(nb_checkpoint_load(path, a.main, empty, NULL), NB_ERR_FORMAT, "too short");
    CHECK(nb_scope_size(empty) == 0);
    unlink(path);
    nb_scope_free(empty);
    model_free(&a);
}

static int count_temp_files(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

/* A save that fails in the middle of writing (the file size limit makes
 * write fail with EFBIG) reports it, removes its temporary file and leaves
 * the previous checkpoint as it was. */
static void test_failed_write_keeps_old_file(void)
{
    nb_program *p;
    REQUIRE_OK(nb_program_new(&p));
    nb_var *v;
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(p), "big", NB_F32, 1, S(100000), &v));
    v->persistable = true;
    nb_scope *scope;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_tensor *t;
    REQUIRE_OK(nb_tensor_full(&t, NB_F32, 1, S(100000), 1.0));
    CHECK_OK(nb_scope_set(scope, "big", t));
    const char *path = path_of("i.ckpt");
    REQUIRE_OK(nb_checkpoint_save(path, p, scope, NULL));
    nb_tensor_set(t, 0, 2.0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {100000, 100000}; /* bytes; the file needs 400 KB */
        setrlimit(RLIMIT_FSIZE, &lim);
        nb_status st = nb_checkpoint_save(path, p, scope, NULL);
        int ok = st == NB_ERR_IO && strstr(nb_last_error(), "i.ckpt.tmp.") && strstr(nb_last_error(), "too large");
        if (!ok) fprintf(stderr, "  child: %s %s\n", nb_status_name(st), nb_last_error());
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE_OK(pid > 0 && waitpid(pid, &status, 0) == pid ? NB_OK : NB_ERR_STATE);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(count_temp_files() == 0);
    nb_scope *fresh;
    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    CHECK_OK(nb_checkpoint_load(path, p, fresh, NULL));
    nb_tensor *big = nb_scope_find(fresh, "big");
    CHECK(big && nb_tensor_get(big, 0) == 1.0 && nb_tensor_get(big, 99999) == 1.0);
    nb_tensor_release(t);
    nb_scope_free(fresh);
    nb_scope_free(scope);
    nb_program_free(p);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nabla_ckpt_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_round_trip);
    RUN(test_values_go_to_existing_tensors);
    RUN(test_every_mismatch_reported);
    RUN(test_many_mismatches);
    RUN(test_shapes_with_unknown_sizes);
    RUN(test_extra_tensors_in_file_are_ignored);
    RUN(test_errors);
    RUN(test_failed_write_keeps_old_file);
    const char *files[] = {"a.ckpt", "b.ckpt", "c.ckpt", "d.ckpt", "e.ckpt", "f.ckpt", "g.ckpt", "i.ckpt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(path_of(files[i]));
    if (rmdir(dir)) fprintf(stderr, "note: could not remove %s: %s\n", dir, strerror(errno));
    return test_report();
}
