/* MNIST-style data sets: loading a folder's files, the training reader over
 * them, and finding the folder (the order of the places searched, and the
 * message when none has it). One test reads the real data set when the
 * search, or the build's data folder (NABLA_DATA_DIR), finds it, and is
 * skipped when neither does. */
#include <time.h>
#include "data/data_internal.h"
#include "data_test_util.h"
#include "nabla/data.h"
#include "test.h"

static char tmp[4096];

/* tmp/<rel>, in a rotation of buffers so a call can take several. */
static const char *at(const char *rel)
{
    static char p[6][4200];
    static int i;
    i = (i + 1) % 6;
    if (snprintf(p[i], sizeof p[i], "%s/%s", tmp, rel) >= (int)sizeof p[i]) exit(2);
    return p[i];
}

static void make_dirs(const char *rel)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    for (char *s = p + strlen(tmp) + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

/* A small MNIST-style split in tmp/<dir>: n images of 2x3 pixels (pixel j of
 * image i is 10*i + j) and the given labels. */
static void write_split(const char *dir, const char *split, int gz, uint32_t n_images, uint32_t n_labels,
                        const uint8_t *labels)
{
    uint8_t px[64 * 6];
    for (uint32_t i = 0; i < n_images * 6; i++) px[i] = (uint8_t)(10 * (i / 6) + i % 6);
    char rel[256];
    make_dirs(dir);
    snprintf(rel, sizeof rel, "%s/%s-images-idx3-ubyte%s", dir, split, gz ? ".gz" : "");
    write_idx(at(rel), gz, 0x08, 3, (uint32_t[]){n_images, 2, 3}, px, n_images * 6, 0);
    snprintf(rel, sizeof rel, "%s/%s-labels-idx1-ubyte%s", dir, split, gz ? ".gz" : "");
    write_idx(at(rel), gz, 0x08, 1, (uint32_t[]){n_labels}, labels, n_labels, 0);
}

static void test_mnist_load(void)
{
    write_split("ok", "train", 1, 5, 5, (uint8_t[]){7, 2, 1, 0, 4});
    write_split("ok", "t10k", 0, 3, 3, (uint8_t[]){9, 9, 3});
    nb_tensor *im = NULL, *lb = NULL;
    CHECK_OK(nb_mnist_load(&im, &lb, at("ok"), true));
    if (im) {
        CHECK(im->dtype == NB_U8 && nb_shape_equal(im->ndim, im->shape, 3, S(5, 2, 3)));
        CHECK(nb_tensor_get(im, 4 * 6 + 5) == 45);
    }
    CHECK_TENSOR(lb, S(5), 0, 7, 2, 1, 0, 4);
    release_all(im, lb, NULL);
    CHECK_OK(nb_mnist_load(&im, &lb, at("ok"), false));
    CHECK_TENSOR(lb, S(3), 0, 9, 9, 3);
    release_all(im, lb, NULL);
}

static void test_mnist_load_refuses_bad_sets(void)
{
    nb_tensor *im = NULL, *lb = NULL;
    write_split("count", "train", 0, 5, 4, (uint8_t[]){1, 2, 3, 4});
    CHECK_ERR(nb_mnist_load(&im, &lb, at("count"), true), NB_ERR_FORMAT, "has 5 images but");
    CHECK(strstr(nb_last_error(), "train-labels-idx1-ubyte has 4 labels"));
    CHECK(im == NULL && lb == NULL);
    write_split("label", "train", 1, 3, 3, (uint8_t[]){1, 9, 10});
    CHECK_ERR(nb_mnist_load(&im, &lb, at("label"), true), NB_ERR_FORMAT, "label 10 at index 2 (labels are 0 to 9)");
    CHECK_ERR(nb_mnist_load(&im, &lb, at("label"), false), NB_ERR_NOT_FOUND,
              "has neither t10k-images-idx3-ubyte nor t10k-images-idx3-ubyte.gz");
    /* images with the wrong rank */
    make_dirs("rank");
    write_idx(at("rank/train-images-idx3-ubyte"), 0, 0x08, 2, (uint32_t[]){2, 6}, "012345678901", 12, 0);
    write_idx(at("rank/train-labels-idx1-ubyte"), 0, 0x08, 1, (uint32_t[]){2}, "\1\2", 2, 0);
    CHECK_ERR(nb_mnist_load(&im, &lb, at("rank"), true), NB_ERR_FORMAT,
              "holds uint8 [2, 6]; images are uint8 [N, rows, cols]");
    CHECK(im == NULL && lb == NULL);
}

/* float32 [B, 6] pixels / 255 and int64 [B, 1] labels, the short last batch
 * kept; in order without shuffle, the same multiset with it. */
static void test_mnist_reader(void)
{
    write_split("rd", "train", 1, 5, 5, (uint8_t[]){7, 2, 1, 0, 4});
    for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
        nb_reader *r = NULL;
        REQUIRE_OK(nb_mnist_reader(&r, at("rd"), NB_MNIST_TRAIN, 2, 0, prefetch));
        CHECK(nb_reader_fields(r) == 2);
        nb_tensor *rec[2];
        bool end;
        int64_t seen = 0;
        for (int b = 0; b < 3; b++) {
            CHECK_OK(nb_reader_next(r, rec, &end));
            if (end || !rec[0]) {
                CHECK(!"batch missing");
                break;
            }
            int64_t rows = b < 2 ? 2 : 1;
            CHECK(rec[0]->dtype == NB_F32 && nb_shape_equal(rec[0]->ndim, rec[0]->shape, 2, S(rows, 6)));
            CHECK(rec[1]->dtype == NB_I64 && nb_shape_equal(rec[1]->ndim, rec[1]->shape, 2, S(rows, 1)));
            for (int64_t i = 0; i < rows; i++, seen++) {
                CHECK_NEAR(nb_tensor_get(rec[0], i * 6 + 5), (10.0 * (double)seen + 5) / 255.0, 1e-7);
                CHECK(nb_tensor_get(rec[1], i) == ((const double[]){7, 2, 1, 0, 4})[seen]);
            }
            release_all(rec[0], rec[1], NULL);
        }
        CHECK_OK(nb_reader_next(r, rec, &end));
        CHECK(end);
        nb_reader_free(r);
    }
    nb_reader *r = NULL;
    REQUIRE_OK(nb_mnist_reader(&r, at("rd"), NB_MNIST_TRAIN | NB_MNIST_SHUFFLE, 5, 42, 1));
    nb_tensor *rec[2];
    bool end;
    CHECK_OK(nb_reader_next(r, rec, &end));
    if (!end && rec[1]) {
        double sum = 0;
        for (int i = 0; i < 5; i++) sum += nb_tensor_get(rec[1], i);
        CHECK(sum == 14);
        /* each image still goes with its label: pixel 0 of image i is 10*i */
        for (int i = 0; i < 5; i++) {
            int img = (int)lround(nb_tensor_get(rec[0], i * 6) * 255.0) / 10;
            CHECK(nb_tensor_get(rec[1], i) == ((const double[]){7, 2, 1, 0, 4})[img]);
        }
        release_all(rec[0], rec[1], NULL);
    }
    nb_reader_free(r);
    CHECK_ERR(nb_mnist_reader(&r, at("rd"), NB_MNIST_TRAIN, 0, 0, 0), NB_ERR_ARG, "batch size 0");
    CHECK_ERR(nb_mnist_reader(&r, at("nowhere"), NB_MNIST_TRAIN, 8, 0, 0), NB_ERR_NOT_FOUND, "has neither");
    CHECK(r == NULL);
}

/* ---- finding the folder ------------------------------------------------------ */

static char cwd_saved[4096];

static void enter(const char *rel)
{
    make_dirs(rel);
    if (chdir(at(rel))) perror("chdir");
}

static void leave(void)
{
    if (chdir(cwd_saved)) perror("chdir");
    unsetenv("NABLA_DATA");
}

static void mark(const char *rel)
{
    char p[256];
    make_dirs(rel);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", rel);
    write_bytes(at(p), 0, "x", 1);
}

/* Each place in turn: every test below removes the one found before. */
static void test_find_order(void)
{
    char out[4200], want[4200], exe[4200];
    snprintf(exe, sizeof exe, "%s", at("f/tree/build/examples/prog"));
    make_dirs("f/tree/build/examples"); /* the program's folder: ".." needs it to exist */
    mark("f/cli/mnist");
    mark("f/env");
    mark("f/tree/build/run/data/mnist");
    mark("f/tree/build/data/mnist");          /* ../data from the current folder */
    mark("f/tree/build/examples/data/mnist"); /* beside the program */
    mark("f/tree/data/mnist");                /* two levels up: the source tree's data/ */
    mark("f/data/mnist");                     /* three up: a data/ folder next to the tree */
    enter("f/tree/build/run");
    setenv("NABLA_DATA", at("f/env"), 1);

    CHECK_OK(nb_data_find_from(at("f/cli"), "mnist", exe, out, sizeof out));
    CHECK_STR(out, at("f/cli/mnist"));
    CHECK_OK(nb_data_find_from(at("f/cli/mnist"), "mnist", exe, out, sizeof out));
    CHECK_STR(out, at("f/cli/mnist"));
    CHECK_OK(nb_data_find_from(at("f/cli/"), "mnist", exe, out, sizeof out)); /* no "//" */
    CHECK_STR(out, at("f/cli/mnist"));
    CHECK_OK(nb_data_find_from(NULL, "mnist", exe, out, sizeof out));
    CHECK_STR(out, at("f/env"));
    remove_tree(at("f/env"));
    CHECK_OK(nb_data_find_from(at("f/empty"), "mnist", exe, out, sizeof out));
    CHECK_STR(out, "./data/mnist");
    remove_tree(at("f/tree/build/run/data"));
    CHECK_OK(nb_data_find_from(NULL, "mnist", exe, out, sizeof out));
    CHECK_STR(out, "../data/mnist");
    remove_tree(at("f/tree/build/data"));
    CHECK_OK(nb_data_find_from(NULL, "mnist", exe, out, sizeof out));
    snprintf(want, sizeof want, "%s/data/mnist", at("f/tree/build/examples"));
    CHECK_STR(out, want);
    remove_tree(at("f/tree/build/examples/data"));
    CHECK_OK(nb_data_find_from(NULL, "mnist", exe, out, sizeof out));
    snprintf(want, sizeof want, "%s/../../data/mnist", at("f/tree/build/examples"));
    CHECK_STR(out, want);
    remove_tree(at("f/tree/data"));
    CHECK_OK(nb_data_find_from(NULL, "mnist", exe, out, sizeof out));
    snprintf(want, sizeof want, "%s/../../../data/mnist", at("f/tree/build/examples"));
    CHECK_STR(out, want);
    /* an uncompressed file qualifies a folder too */
    make_dirs("f/raw/mnist");
    write_bytes(at("f/raw/mnist/train-images-idx3-ubyte"), 0, "x", 1);
    CHECK_OK(nb_data_find_from(at("f/raw"), "mnist", exe, out, sizeof out));
    CHECK_STR(out, at("f/raw/mnist"));
    CHECK_ERR(nb_data_find_from(at("f/raw"), "mnist", exe, out, 8), NB_ERR_ARG, "out_dir has only 8 bytes");
    leave();
}

static void test_find_not_found(void)
{
    char out[4200], exe[4200];
    snprintf(exe, sizeof exe, "%s", at("g/build/examples/prog"));
    enter("g/run");
    setenv("NABLA_DATA", at("g/env"), 1);
    CHECK_ERR(nb_data_find_from(at("g/cli"), "mnist", exe, out, sizeof out), NB_ERR_NOT_FOUND,
              "the mnist data set was not found. Looked in: ");
    const char *msg = nb_last_error();
    char want[4200];
    const char *places[] = {at("g/cli"),       at("g/cli/mnist"), at("g/env"),
                            at("g/env/mnist"), "./data/mnist",    "../data/mnist"};
    for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
        snprintf(want, sizeof want, "%s, ", places[i]);
        if (!strstr(msg, want)) fprintf(stderr, "  missing place %s\n", places[i]);
        CHECK(strstr(msg, want));
    }
    const char *ups[] = {"", "/..", "/../..", "/../../.."};
    for (int up = 0; up <= 3; up++) {
        snprintf(want, sizeof want, "%s%s/data/mnist", at("g/build/examples"), ups[up]);
        CHECK(strstr(msg, want));
    }
    CHECK(!strstr(msg, "shared")); /* the library names no workspace of its own */
    CHECK(strstr(msg, "run scripts/get-mnist.sh DIR (downloads and checks the files"));
    CHECK(strstr(msg, "or pass --data DIR"));
    CHECK(out[0] == '\0');
    CHECK_ERR(nb_data_find_from(NULL, "fashion-mnist", exe, out, sizeof out), NB_ERR_NOT_FOUND,
              "run scripts/get-mnist.sh DIR fashion-mnist");
    CHECK_ERR(nb_data_find_from(NULL, "../etc", exe, out, sizeof out), NB_ERR_ARG, "is not a data set name");
    CHECK_ERR(nb_data_find_from(NULL, "", exe, out, sizeof out), NB_ERR_ARG, "is not a data set name");
    leave();
}

/* ---- the real data set, when it is there ------------------------------------------ */

static void count_classes(const nb_tensor *labels, int64_t *counts)
{
    const uint8_t *l = nb_tensor_data(labels);
    for (int c = 0; c < 10; c++) counts[c] = 0;
    for (int64_t i = 0; i < labels->shape[0]; i++) counts[l[i]]++;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Class counts of the published MNIST files, and the time of one training
 * epoch through the reader (printed, not asserted). */
static void test_real_mnist(void)
{
    char dir[4200];
    nb_status found = nb_data_find(NULL, "mnist", dir, sizeof dir);
#ifdef NABLA_DATA_DIR
    if (found) found = nb_data_find(NABLA_DATA_DIR, "mnist", dir, sizeof dir);
#endif
    if (found) {
        printf("     (skipped: %s)\n", "no MNIST data set here");
        nb_clear_error();
        return;
    }
    nb_tensor *im = NULL, *lb = NULL;
    int64_t counts[10];
    REQUIRE_OK(nb_mnist_load(&im, &lb, dir, true));
    CHECK(nb_shape_equal(im->ndim, im->shape, 3, S(60000, 28, 28)));
    count_classes(lb, counts);
    const int64_t train[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
    for (int c = 0; c < 10; c++) CHECK(counts[c] == train[c]);
    release_all(im, lb, NULL);
    REQUIRE_OK(nb_mnist_load(&im, &lb, dir, false));
    CHECK(nb_shape_equal(im->ndim, im->shape, 3, S(10000, 28, 28)));
    count_classes(lb, counts);
    const int64_t test[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    for (int c = 0; c < 10; c++) CHECK(counts[c] == test[c]);
    release_all(im, lb, NULL);

    for (int prefetch = 0; prefetch <= 4; prefetch += 4) {
        nb_reader *r = NULL;
        REQUIRE_OK(nb_mnist_reader(&r, dir, NB_MNIST_TRAIN | NB_MNIST_SHUFFLE, 64, 1, prefetch));
        nb_tensor *rec[2];
        bool end = false;
        int64_t batches = 0, examples = 0;
        double t0 = seconds();
        while (!nb_reader_next(r, rec, &end) && !end) {
            batches++;
            examples += rec[0]->shape[0];
            release_all(rec[0], rec[1], NULL);
        }
        double t1 = seconds();
        CHECK(batches == 938 && examples == 60000);
        printf("     one shuffled epoch of 60000 in batches of 64 (prefetch %d): %.1f ms\n", prefetch, 1e3 * (t1 - t0));
        nb_reader_free(r);
    }
}

int main(void)
{
    make_temp_dir(tmp, sizeof tmp);
    if (!getcwd(cwd_saved, sizeof cwd_saved)) return 2;
    RUN(test_mnist_load);
    RUN(test_mnist_load_refuses_bad_sets);
    RUN(test_mnist_reader);
    RUN(test_find_order);
    RUN(test_find_not_found);
    RUN(test_real_mnist);
    remove_tree(tmp);
    return test_report();
}
