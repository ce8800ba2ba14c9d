/* What tests/test_onnx_python.sh asks of nabla beside Python's ONNX and
 * PyTorch:
 *
 *   onnx_check run PROGRAM_FILE CHECKPOINT FEED FETCH IN.f32 SHAPE OUT.f32
 *       the inference copy (nb_program_clone_for_test) of a saved program,
 *       its parameters from CHECKPOINT, on raw float32 input of SHAPE
 *       ("8,784"); writes the fetched output as raw float32
 *   onnx_check compare MODEL.onnx IN.f32 SHAPE WANT.f32 TOLERANCE
 *       imports the model, runs its inference copy on the input and compares
 *       with WANT (same element count); prints the largest difference
 *   onnx_check finetune MODEL.onnx SHAPE STEPS
 *       imports the model on MNIST images reshaped to [-1, SHAPE...] ("784"
 *       or "1,28,28"), adds softmax cross-entropy with the labels, and
 *       trains it with Adam for STEPS batches of 64; prints the mean loss of
 *       the first and the last ten steps and fails unless it fell by a
 *       quarter.
 *
 * Exit status 0 on success, 1 on a failed check, 2 on a usage error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/nabla.h"

static int die(const char *what)
{
    fprintf(stderr, "onnx_check: %s: %s\n", what, nb_last_error());
    return 1;
}

static int parse_shape(const char *s, int64_t *shape)
{
    int n = 0;
    while (*s && n < NB_MAX_DIMS) {
        char *end;
        shape[n++] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s) return -1;
    }
    return n;
}

static nb_tensor *read_f32(const char *path, int ndim, const int64_t *shape)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F32, ndim, shape)) return NULL;
    FILE *f = fopen(path, "rb");
    size_t n = (size_t)nb_tensor_numel(t);
    if (!f || fread(nb_tensor_data(t), sizeof(float), n, f) != n) {
        nb_error(NB_ERR_IO, "cannot read %zu floats from %s", n, path);
        nb_tensor_release(t);
        t = NULL;
    }
    if (f) fclose(f);
    return t;
}

static nb_status run_test_copy(nb_program *main_p, nb_scope *scope, const char *feed, nb_tensor *x, const char *fetch,
                               nb_tensor **out)
{
    nb_program *test;
    nb_executor *e;
    nb_status st = nb_program_clone_for_test(&test, main_p);
    if (st) return st;
    if (!(st = nb_executor_new(&e))) {
        st = nb_executor_run(e, test, scope, NB_FEEDS({feed, x}), NB_NAMES(fetch), out);
        nb_executor_free(e);
    }
    nb_program_free(test);
    return st;
}

static int cmd_run(char **a)
{
    int64_t shape[NB_MAX_DIMS];
    int nd = parse_shape(a[5], shape);
    nb_program *main_p, *startup;
    nb_scope *scope;
    nb_tensor *x = read_f32(a[4], nd, shape), *y = NULL;
    if (!x) return die("input");
    if (nb_programs_load(&main_p, &startup, a[0]) || nb_scope_new(&scope, NULL)) return die("program");
    if (nb_checkpoint_load(a[1], main_p, scope, NULL)) return die("checkpoint");
    if (run_test_copy(main_p, scope, a[2], x, a[3], &y)) return die("run");
    FILE *f = fopen(a[6], "wb");
    nb_tensor *c;
    nb_tensor_contiguous(&c, y);
    size_t n = (size_t)nb_tensor_numel(c);
    if (!f || fwrite(nb_tensor_data(c), sizeof(float), n, f) != n) return fprintf(stderr, "cannot write %s\n", a[6]), 1;
    fclose(f);
    printf("wrote %zu outputs\n", n);
    nb_tensor_release(c), nb_tensor_release(x), nb_tensor_release(y);
    nb_scope_free(scope), nb_program_free(main_p), nb_program_free(startup);
    return 0;
}

/* A record builder on fresh programs holding the imported model, startup run. */
typedef struct imported {
    nb_program *main, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_value y;
} imported;

static nb_status import_model(imported *m, const char *path, nb_values inputs)
{
    nb_status st;
    if ((st = nb_program_new(&m->main)) || (st = nb_program_new(&m->startup)) ||
        (st = nb_builder_new_record(&m->b, m->main, m->startup)) || (st = nb_scope_new(&m->scope, NULL)))
        return st;
    nb_program_set_seed(m->startup, 1);
    int n_out = 0;
    if ((st = nb_onnx_import(path, m->b, inputs, 1, &m->y, &n_out))) return st;
    if (n_out != 1) return nb_error(NB_ERR_ARG, "the model has %d outputs; one was expected", n_out);
    return NB_OK;
}

static void imported_free(imported *m)
{
    nb_builder_free(m->b);
    nb_scope_free(m->scope);
    nb_program_free(m->main);
    nb_program_free(m->startup);
}

static nb_status run_startup(imported *m)
{
    nb_executor *e;
    nb_status st = nb_executor_new(&e);
    if (!st) st = nb_executor_run(e, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    nb_executor_free(e);
    return st;
}

static int cmd_compare(char **a)
{
    int64_t shape[NB_MAX_DIMS];
    int nd = parse_shape(a[2], shape);
    nb_tensor *x = read_f32(a[1], nd, shape), *y = NULL;
    if (!x) return die("input");
    imported m = {0};
    if (import_model(&m, a[0], NB_NO_VALUES) || run_startup(&m)) return die("import");
    const nb_block *g = nb_program_global_block(m.main);
    const char *feed = NULL;
    for (int i = 0; i < g->n_vars && !feed; i++)
        if (g->vars[i]->is_data) feed = g->vars[i]->name;
    if (!feed || run_test_copy(m.main, m.scope, feed, x, nb_value_name(m.y), &y)) return die("run");
    int64_t n = nb_tensor_numel(y);
    nb_tensor *want = read_f32(a[3], 1, &n);
    if (!want) return die("expected output");
    double worst = 0, tol = atof(a[4]);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(nb_tensor_get(y, i) - nb_tensor_get(want, i));
        if (!(d <= worst)) worst = d;
    }
    printf("%s: %lld outputs, largest difference %.3g (tolerance %g)\n", a[0], (long long)n, worst, tol);
    nb_tensor_release(x), nb_tensor_release(y), nb_tensor_release(want);
    imported_free(&m);
    return worst <= tol ? 0 : 1;
}

static int cmd_finetune(char **a)
{
    int64_t shape[NB_MAX_DIMS + 1] = {-1};
    int nd = parse_shape(a[1], shape + 1) + 1, steps = atoi(a[2]);
    char dir[4096];
    nb_reader *train;
    if (nb_data_find(NULL, "mnist", dir, sizeof dir)) return die("data");
    if (nb_mnist_reader(&train, dir, NB_MNIST_TRAIN | NB_MNIST_SHUFFLE, 64, 1, 2)) return die("reader");
    imported m = {0};
    if (nb_program_new(&m.main) || nb_program_new(&m.startup) || nb_builder_new_record(&m.b, m.main, m.startup))
        return die("programs");
    nb_value images = nb_layer_data(m.b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value label = nb_layer_data(m.b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value x = nd == 2 ? images : nb_reshape(m.b, images, nd, shape);
    int n_out = 0;
    if (nb_onnx_import(a[0], m.b, NB_VALUES(x), 1, &m.y, &n_out)) return die("import");
    nb_value loss = nb_layer_softmax_cross_entropy(m.b, m.y, label);
    if (nb_builder_status(m.b)) return die("model");
    nb_optimizer opt = nb_adam(1e-3);
    nb_backward_result r;
    if (nb_minimize(&opt, m.main, m.startup, nb_value_name(loss), NULL, &r)) return die("minimize");
    if (nb_scope_new(&m.scope, NULL) || run_startup(&m)) return die("startup");
    nb_executor *e;
    nb_executor_new(&e);
    double first = 0, last = 0;
    const char *fetch = nb_value_name(loss);
    for (int s = 0; s < steps; s++) {
        nb_tensor *rec[2], *l = NULL;
        bool end;
        if (nb_reader_next(train, rec, &end) || end) return die("reading MNIST");
        if (nb_executor_run(e, m.main, m.scope, NB_FEEDS({"images", rec[0]}, {"label", rec[1]}), NB_NAMES(fetch), &l))
            return die("training step");
        double v = nb_tensor_get(l, 0);
        if (s < 10) first += v / 10;
        if (s >= steps - 10) last += v / 10;
        nb_tensor_release(l), nb_tensor_release(rec[0]), nb_tensor_release(rec[1]);
    }
    printf("%s: fine-tuned %d steps on MNIST: mean loss of the first ten %.4f, of the last ten %.4f\n", a[0], steps,
           first, last);
    nb_executor_free(e);
    nb_backward_result_free(&r);
    nb_reader_free(train);
    imported_free(&m);
    return last < 0.75 * first ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (nb_control_register_ops()) return die("registry");
    if (argc == 9 && !strcmp(argv[1], "run")) return cmd_run(argv + 2);
    if (argc == 7 && !strcmp(argv[1], "compare")) return cmd_compare(argv + 2);
    if (argc == 5 && !strcmp(argv[1], "finetune")) return cmd_finetune(argv + 2);
    fprintf(stderr, "usage: onnx_check run|compare|finetune ... (see tests/onnx_check.c)\n");
    return 2;
}
