/* Fine-tunes an ONNX model in C and writes it back as ONNX: the path from a
 * model file (a torchvision network exported by torch.onnx.export, say) to
 * training without Python.
 *
 *   onnx_finetune MODEL.onnx OUT.onnx [--steps N] [--lr LR] [--batch B]
 *                 [--size S] [--classes K] [--data IMAGES.npy LABELS.npy]
 *
 * The model is imported into a static program (its float initializers
 * become trainable parameters, its batch norms train on batch statistics),
 * given softmax cross-entropy on its first output and plain SGD
 * (nb_minimize), and trained for N steps (default 5) on batches of B
 * images [B, 3, S, S] (defaults 2 and 64). The images come from --data
 * (float32 or float64 [n, 3, S, S], in the model's own precision, and int64
 * labels [n], taken in order and wrapping around), or else are made here: noise with a bright square whose corner
 * gives the label (K classes, default 4). Each step's loss, computed before
 * that step's update as torch does, is printed as "step k loss x"; then the
 * inference part (running statistics, no loss) is exported to OUT.onnx. */
#define EXAMPLE_NAME "onnx_finetune"
#include <string.h>
#include "example_cli.h"

typedef struct options {
    const char *model, *out, *images, *labels;
    int steps, batch, size, classes;
    double lr;
} options;

static void usage(void)
{
    fprintf(stderr,
            "usage: onnx_finetune MODEL.onnx OUT.onnx [--steps N] [--lr LR] [--batch B] [--size S]"
            " [--classes K] [--data IMAGES.npy LABELS.npy]\n");
    exit(2);
}

static options parse(int argc, char **argv)
{
    options o = {.steps = 5, .batch = 2, .size = 64, .classes = 4, .lr = 0.01};
    double v;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--data") && i + 2 < argc) o.images = argv[++i], o.labels = argv[++i];
        else if (!strcmp(a, "--lr") && has && parse_number(a, argv[++i], 0, 10, &o.lr)) continue;
        else if (!strcmp(a, "--steps") && has && parse_number(a, argv[++i], 1, 1e6, &v)) o.steps = (int)v;
        else if (!strcmp(a, "--batch") && has && parse_number(a, argv[++i], 1, 4096, &v)) o.batch = (int)v;
        else if (!strcmp(a, "--size") && has && parse_number(a, argv[++i], 8, 1024, &v)) o.size = (int)v;
        else if (!strcmp(a, "--classes") && has && parse_number(a, argv[++i], 2, 1000, &v)) o.classes = (int)v;
        else if (a[0] != '-' && n == 0) o.model = a, n++;
        else if (a[0] != '-' && n == 1) o.out = a, n++;
        else usage();
    }
    if (n != 2) usage();
    return o;
}

/* Noise in [0, 0.5) with a square of 1s in the corner of the image's class
 * (a corner per class, round the four), from a fixed linear congruence. */
static void make_data(const options *o, nb_tensor **images, nb_tensor **labels)
{
    int64_t n = 4LL * o->batch, s = o->size, half = s / 2;
    die_on(nb_tensor_new(images, NB_F32, 4, (int64_t[]){n, 3, s, s}), "images");
    die_on(nb_tensor_new(labels, NB_I64, 1, &n), "labels");
    float *x = nb_tensor_data(*images);
    int64_t *y = nb_tensor_data(*labels);
    uint64_t state = 42;
    for (int64_t i = 0; i < n; i++) {
        int64_t label = i % o->classes, corner = label % 4;
        y[i] = label;
        for (int64_t c = 0; c < 3; c++)
            for (int64_t r = 0; r < s; r++)
                for (int64_t q = 0; q < s; q++) {
                    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
                    bool in_square = (r < half) == (corner < 2) && (q < half) == (corner % 2 == 0);
                    x[((i * 3 + c) * s + r) * s + q] = in_square ? 1.0f : (float)(state >> 40) / (1 << 25);
                }
    }
}

static void load_data(const options *o, nb_tensor **images, nb_tensor **labels)
{
    die_on(nb_npy_load(images, o->images), "images");
    die_on(nb_npy_load(labels, o->labels), "labels");
    nb_tensor *x = *images, *y = *labels;
    if ((x->dtype != NB_F32 && x->dtype != NB_F64) || x->ndim != 4 || x->shape[1] != 3 || x->shape[2] != o->size ||
        x->shape[3] != o->size || y->dtype != NB_I64 || y->ndim != 1 || y->shape[0] != x->shape[0] ||
        x->shape[0] < o->batch) {
        fprintf(stderr,
                "onnx_finetune: --data needs float32 or float64 images [n, 3, %d, %d] and int64 labels [n], n >= %d\n",
                o->size, o->size, o->batch);
        exit(1);
    }
}

/* Batch k of the data, wrapping round (whole batches only). */
static void batch_at(const options *o, nb_tensor *images, nb_tensor *labels, int k, nb_tensor **x, nb_tensor **y)
{
    int64_t per = images->shape[0] / o->batch, start = (int64_t)(k % per) * o->batch;
    die_on(nb_tensor_slice(x, images, 0, start, start + o->batch, 1), "batch");
    die_on(nb_tensor_slice(y, labels, 0, start, start + o->batch, 1), "batch");
}

int main(int argc, char **argv)
{
    options o = parse(argc, argv);
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_scope *scope;
    die_on(nb_program_new(&main_p), "program");
    die_on(nb_program_new(&startup), "program");
    die_on(nb_scope_new(&scope, NULL), "scope");
    die_on(nb_builder_new_record(&b, main_p, startup), "builder");
    nb_tensor *all_x, *all_y;
    if (o.images) load_data(&o, &all_x, &all_y);
    else make_data(&o, &all_x, &all_y);
    nb_value images = nb_layer_data(b, "images", all_x->dtype, 4, (int64_t[]){-1, 3, o.size, o.size});
    nb_value label = nb_layer_data(b, "label", NB_I64, 1, (int64_t[]){-1});
    nb_value logits;
    int n_out = 0;
    die_on(nb_onnx_import(o.model, b, NB_VALUES(images), 1, &logits, &n_out), "import");
    if (n_out < 1) die_on(nb_error(NB_ERR_ARG, "%s has no output", o.model), "import");
    nb_value loss = nb_layer_softmax_cross_entropy(b, logits, label);
    die_on(nb_builder_status(b), "loss");
    char logits_name[256];
    snprintf(logits_name, sizeof logits_name, "%s", nb_value_name(logits));
    nb_optimizer sgd = nb_sgd(o.lr);
    nb_backward_result grads;
    die_on(nb_minimize(&sgd, main_p, startup, nb_value_name(loss), NULL, &grads), "minimize");
    nb_backward_result_free(&grads);

    nb_executor *e;
    die_on(nb_executor_new(&e), "executor");
    die_on(nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL), "startup");
    double t0 = now();
    for (int k = 0; k < o.steps; k++) {
        nb_tensor *x, *y, *l;
        batch_at(&o, all_x, all_y, k, &x, &y);
        die_on(
            nb_executor_run(e, main_p, scope, NB_FEEDS({"images", x}, {"label", y}), NB_NAMES(nb_value_name(loss)), &l),
            "training step");
        printf("step %d loss %.9f\n", k, nb_tensor_get(l, 0));
        nb_tensor_release(l), nb_tensor_release(x), nb_tensor_release(y);
    }
    fprintf(stderr, "onnx_finetune: %d steps of %d images in %.2f s\n", o.steps, o.batch, now() - t0);
    die_on(nb_onnx_export(main_p, scope, NB_NAMES(logits_name), o.out), "export");
    printf("wrote %s\n", o.out);
    nb_tensor_release(all_x), nb_tensor_release(all_y);
    nb_executor_free(e), nb_builder_free(b), nb_scope_free(scope);
    nb_program_free(main_p), nb_program_free(startup);
    return 0;
}
