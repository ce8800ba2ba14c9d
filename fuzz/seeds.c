/* Writes the seed corpora of the fuzzers into <dir>/<fuzzer>/: valid files
 * made by nabla itself (safetensors, checkpoints, program files) or, for the
 * formats nabla only reads (IDX, text, JSON), written here by the format's
 * rules. `make fuzz` runs it, so no binary corpus lives in the tree.
 *     build-fuzz/fuzz/fuzz_seeds build-fuzz/seeds */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "fuzz_util.h"
#include "nabla/checkpoint.h"
#include "nabla/control.h"
#include "nabla/init.h"
#include "nabla/npy.h"
#include "nabla/onnx.h"
#include "nabla/ops.h"
#include "nabla/layers.h"
#include "nabla/executor.h"
#include "nabla/optimizer.h"
#include "nabla/program_file.h"
#include "nabla/safetensors.h"
#include "nabla/scope.h"
#include "nabla/status.h"

static const char *root;
static int failures;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_seeds: %s: %s\n", what, *nb_last_error() ? nb_last_error() : strerror(errno));
    failures++;
}

static const char *path_of(const char *fuzzer, const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", root, fuzzer);
    if (mkdir(buf, 0777) && errno != EEXIST) fail(buf);
    snprintf(buf, sizeof buf, "%s/%s/%s", root, fuzzer, name);
    return buf;
}

static void write_bytes(const char *fuzzer, const char *name, const void *data, size_t n)
{
    FILE *f = fopen(path_of(fuzzer, name), "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) fail(name);
}

/* ---- IDX: a big-endian magic (0, 0, type, ndim), the sizes, the data ------------- */

static void idx_seed(const char *name, uint8_t type, int ndim, const uint32_t *dims, int elem_size)
{
    uint8_t buf[512];
    size_t n = 0, count = 1;
    buf[n++] = 0, buf[n++] = 0, buf[n++] = type, buf[n++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        for (int k = 3; k >= 0; k--) buf[n++] = (uint8_t)(dims[i] >> (8 * k));
        count *= dims[i];
    }
    for (size_t i = 0; i < count * (size_t)elem_size && n < sizeof buf; i++) buf[n++] = (uint8_t)(i * 37 + 1);
    write_bytes("idx", name, buf, n);
    char gz_name[256];
    snprintf(gz_name, sizeof gz_name, "%s.gz", name);
    gzFile gz = gzopen(path_of("idx", gz_name), "wb9");
    if (!gz || gzwrite(gz, buf, (unsigned)n) != (int)n || gzclose(gz) != Z_OK) fail(gz_name);
}

static void idx_seeds(void)
{
    idx_seed("labels-u8", 0x08, 1, (const uint32_t[]){10}, 1);
    idx_seed("images-u8", 0x08, 3, (const uint32_t[]){2, 3, 4}, 1);
    idx_seed("i32", 0x0C, 2, (const uint32_t[]){3, 2}, 4);
    idx_seed("f32", 0x0D, 1, (const uint32_t[]){4}, 4);
    idx_seed("f64", 0x0E, 2, (const uint32_t[]){2, 2}, 8);
    idx_seed("u8-4d", 0x08, 4, (const uint32_t[]){1, 2, 1, 3}, 1);
    idx_seed("empty-u8", 0x08, 2, (const uint32_t[]){0, 5}, 1);
}

/* ---- safetensors and checkpoints, written by nabla ---------------------------------- */

static nb_tensor *tensor(nb_dtype dtype, int ndim, const int64_t *shape)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dtype, ndim, shape)) return NULL;
    int64_t n = nb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) nb_tensor_set(t, i, dtype == NB_BOOL ? (double)(i % 2) : (double)i * 0.5 - 1);
    return t;
}

static void safetensors_seeds(void)
{
    nb_tensor *t[6] = {
        tensor(NB_F32, 2, (const int64_t[]){2, 3}),
        tensor(NB_F64, 1, (const int64_t[]){2}),
        tensor(NB_I32, 0, NULL),
        tensor(NB_I64, 1, (const int64_t[]){3}),
        tensor(NB_U8, 2, (const int64_t[]){2, 2}),
        tensor(NB_BOOL, 1, (const int64_t[]){3}),
    };
    nb_tensor *zero = tensor(NB_F32, 2, (const int64_t[]){0, 4});
    const char *names[] = {"w", "b", "scalar", "ids", "bytes", "mask"};
    const char *keys[] = {"format", "note"}, *values[] = {"pt", "caf\xc3\xa9 \"quoted\"\n"};
    nb_meta meta = {2, keys, values};
    if (nb_safetensors_save(path_of("safetensors", "all-dtypes.safetensors"), 6, names, t, &meta))
        fail("all-dtypes.safetensors");
    if (nb_safetensors_save(path_of("safetensors", "one.safetensors"), 1, names, t, NULL)) fail("one.safetensors");
    if (nb_safetensors_save(path_of("safetensors", "empty.safetensors"), 0, NULL, NULL, &meta))
        fail("empty.safetensors");
    if (nb_safetensors_save(path_of("safetensors", "zero-size.safetensors"), 1, (const char *[]){"z"}, &zero, NULL))
        fail("zero-size.safetensors");
    /* The float tensors narrowed to F16 and BF16 (they load as F32). */
    if (nb_safetensors_save_as(path_of("safetensors", "f16.safetensors"), 6, names, t, &meta, NB_STORE_F16))
        fail("f16.safetensors");
    if (nb_safetensors_save_as(path_of("safetensors", "bf16.safetensors"), 6, names, t, &meta, NB_STORE_BF16))
        fail("bf16.safetensors");
    for (int i = 0; i < 6; i++) nb_tensor_release(t[i]);
    nb_tensor_release(zero);
}

/* The safetensors headers, as seeds of the JSON reader. */
static void json_from_safetensors(const char *file, const char *name)
{
    FILE *f = fopen(path_of("safetensors", file), "rb");
    uint8_t len_le[8];
    if (!f || fread(len_le, 1, 8, f) != 8) {
        if (f) fclose(f);
        fail(file);
        return;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len_le[i];
    char buf[4096];
    if (n > sizeof buf || fread(buf, 1, (size_t)n, f) != n) fail(file);
    else write_bytes("json", name, buf, (size_t)n);
    fclose(f);
}

static void json_seeds(void)
{
    json_from_safetensors("all-dtypes.safetensors", "header-all-dtypes.json");
    json_from_safetensors("empty.safetensors", "header-empty.json");
    static const char *const docs[] = {
        "{\"a\": [1, -2.5e+10, 0, 0.125, 1E-3, true, false, null], \"b\": {\"c\": {}}, \"d\": []}",
        ("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\\ud83d\\ude00\",\n"
         " \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"]"),
        "  \"just a string\"  ",
        "18446744073709551615",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "{\"__metadata__\":{\"k\":\"v\"},\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "doc-%zu.json", i);
        write_bytes("json", name, docs[i], strlen(docs[i]));
    }
}

static void checkpoint_seeds(void)
{
    nb_program *p = fuzz_ckpt_program();
    nb_scope *scope;
    if (!p || nb_scope_new(&scope, NULL)) {
        fail("checkpoint program");
        nb_program_free(p);
        return;
    }
    for (int i = 0; i < FUZZ_CKPT_NVARS; i++) {
        const fuzz_var *v = &fuzz_ckpt_vars[i];
        int64_t shape[2] = {v->shape[0] < 0 ? 3 : v->shape[0], v->shape[1]};
        nb_tensor *t = tensor(v->dtype, v->ndim, shape);
        if (!t || nb_scope_set(scope, v->name, t)) fail(v->name);
        nb_tensor_release(t);
    }
    const char *keys[] = {"epoch", "step"}, *values[] = {"3", "1200"};
    nb_meta meta = {2, keys, values};
    if (nb_checkpoint_save(path_of("checkpoint", "state.ckpt"), p, scope, &meta)) fail("state.ckpt");
    /* A tensor that is no var of the program is allowed. */
    nb_var *extra;
    if (nb_block_create_var(nb_program_global_block(p), "extra", NB_F32, 1, (const int64_t[]){2}, &extra))
        fail("extra");
    extra->persistable = true;
    nb_tensor *t = tensor(NB_F32, 1, (const int64_t[]){2});
    if (nb_scope_set(scope, "extra", t)) fail("extra");
    nb_tensor_release(t);
    if (nb_checkpoint_save(path_of("checkpoint", "state-extra.ckpt"), p, scope, NULL)) fail("state-extra.ckpt");
    nb_scope_free(scope);
    nb_program_free(p);
}

/* ---- NumPy: .npy files and .npz archives written by nabla, and layouts
 * nabla does not write (Fortran order, version 2.0 and 3.0 headers, float16
 * and the narrow integers), by the format's rules ---------------------------- */

static void npy_bytes(const char *name, int major, const char *dict, const void *data, size_t n)
{
    uint8_t buf[1024];
    size_t prefix = major == 1 ? 10 : 12, hlen = strlen(dict), total = hlen + 1;
    total += (64 - (prefix + total) % 64) % 64;
    if (prefix + total + n > sizeof buf) {
        fail(name);
        return;
    }
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++) buf[8 + i] = (uint8_t)(total >> (8 * i));
    memcpy(buf + prefix, dict, hlen);
    memset(buf + prefix + hlen, ' ', total - hlen - 1);
    buf[prefix + total - 1] = '\n';
    memcpy(buf + prefix + total, data, n);
    write_bytes("npy", name, buf, prefix + total + n);
}

static void npy_seeds(void)
{
    nb_tensor *t[6] = {
        tensor(NB_F32, 2, (const int64_t[]){2, 3}),
        tensor(NB_F64, 1, (const int64_t[]){2}),
        tensor(NB_I32, 0, NULL),
        tensor(NB_I64, 1, (const int64_t[]){3}),
        tensor(NB_U8, 3, (const int64_t[]){2, 1, 2}),
        tensor(NB_BOOL, 1, (const int64_t[]){3}),
    };
    const char *names[] = {"w", "b", "scalar", "ids", "bytes", "mask"};
    for (int i = 0; i < 6; i++) {
        char file[64];
        snprintf(file, sizeof file, "%s.npy", names[i]);
        if (nb_npy_save(path_of("npy", file), t[i])) fail(file);
    }
    if (nb_npz_save(path_of("npy", "stored.npz"), 6, names, t, 0)) fail("stored.npz");
    if (nb_npz_save(path_of("npy", "deflated.npz"), 6, names, t, NB_NPZ_COMPRESSED)) fail("deflated.npz");
    if (nb_npz_save(path_of("npy", "one.npz"), 1, names, t, NB_NPZ_COMPRESSED)) fail("one.npz");
    if (nb_npz_save(path_of("npy", "empty.npz"), 0, NULL, NULL, 0)) fail("empty.npz");
    for (int i = 0; i < 6; i++) nb_tensor_release(t[i]);
    static const float fortran[] = {1, 4, 2, 5, 3, 6};
    npy_bytes("fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", fortran, 24);
    static const uint16_t halves[] = {0x0001, 0x03ff, 0x3c00, 0xc000, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x8000};
    npy_bytes("f16.npy", 2, "{'descr': '<f2', 'fortran_order': False, 'shape': (9,), }", halves, sizeof halves);
    npy_bytes("i16.npy", 3, "{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<i2\"}", "\x00\x80\xff\x7f", 4);
    npy_bytes("i8.npy", 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (2, 1), }", "\x80\x7f", 2);
    npy_bytes("u16.npy", 1, "{'descr': '<u2', 'fortran_order': True, 'shape': (1, 2), }", "\xff\xff\x01\x00", 4);
    npy_bytes("u32.npy", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (), }", "\xff\xff\xff\xff", 4);
}

/* ---- program files -------------------------------------------------------------------- */

/* A training setup: fc, softmax cross-entropy, mean, and Adam's update. */
static void train_seed(void)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    if (nb_program_new(&main_p) || nb_program_new(&startup) || nb_builder_new_record(&b, main_p, startup)) {
        fail("train program");
        return;
    }
    nb_value x = nb_data(b, "x", NB_F32, 2, (const int64_t[]){-1, 4});
    nb_value label = nb_data(b, "label", NB_I64, 2, (const int64_t[]){-1, 1});
    nb_value w = nb_param(b, "fc.w", NB_F32, 2, (const int64_t[]){4, 3}, nb_init_uniform(-1, 1));
    nb_value bias = nb_param(b, "fc.b", NB_F32, 1, (const int64_t[]){3}, nb_init_zeros());
    nb_value logits = nb_fc(b, x, w, bias, 1);
    nb_value cost = nb_reduce_mean(b, nb_softmax_with_cross_entropy(b, logits, label, NULL), 0, NULL, false);
    nb_status st = nb_builder_status(b);
    char loss[128] = "";
    if (!st) snprintf(loss, sizeof loss, "%s", nb_value_name(cost));
    nb_builder_free(b);
    nb_program_set_seed(startup, 1234);
    nb_optimizer opt = nb_adam(0.01);
    nb_backward_result r;
    if (st || nb_minimize(&opt, main_p, startup, loss, NULL, &r)) fail("train program");
    else nb_backward_result_free(&r);
    uint8_t *buf;
    size_t len;
    if (nb_programs_serialize(main_p, startup, &buf, &len)) fail("train.nbp");
    else {
        write_bytes("program_file", "train.nbp", buf, len);
        nb_free(buf);
    }
    if (nb_program_serialize(startup, &buf, &len)) fail("startup.nbp");
    else {
        write_bytes("program_file", "startup.nbp", buf, len);
        nb_free(buf);
    }
    nb_program_free(main_p);
    nb_program_free(startup);
}

static nb_status loop_cond(nb_builder *b, const nb_value *carry, nb_value *pred, void *ctx)
{
    (void)ctx;
    *pred = nb_less(b, carry[0], nb_fill_constant(b, NB_F32, 1, (const int64_t[]){1}, 10));
    return nb_builder_status(b);
}

static nb_status loop_body(nb_builder *b, const nb_value *carry, nb_value *next, void *ctx)
{
    (void)ctx;
    next[0] = nb_scale(b, carry[0], 2, 1);
    return nb_builder_status(b);
}

static nb_status then_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_scale(b, in[0], -1, 0);
    return nb_builder_status(b);
}

static nb_status else_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_scale(b, in[0], 3, 0);
    return nb_builder_status(b);
}

/* Blocks inside blocks: a while loop and a cond. */
static void control_seed(void)
{
    nb_program *p;
    nb_builder *b;
    if (nb_program_new(&p) || nb_builder_new_record(&b, p, NULL)) {
        fail("control program");
        return;
    }
    nb_value x = nb_data(b, "x", NB_F32, 1, (const int64_t[]){1}), final = NB_NONE, out = NB_NONE;
    nb_status st = nb_while_loop(b, loop_cond, loop_body, NULL, NB_VALUES(x), &final);
    nb_value pred = st ? NB_NONE : nb_greater(b, final, nb_fill_constant(b, NB_F32, 1, (const int64_t[]){1}, 20));
    nb_branches br = {then_fn, else_fn, NULL};
    if (!st) st = nb_cond(b, pred, &br, NB_VALUES(final), 1, &out);
    if (!st) st = nb_builder_status(b);
    nb_builder_free(b);
    uint8_t *buf;
    size_t len;
    if (st || nb_program_serialize(p, &buf, &len)) fail("control.nbp");
    else {
        write_bytes("program_file", "control.nbp", buf, len);
        nb_free(buf);
    }
    nb_program_free(p);
}

/* ---- text ----------------------------------------------------------------------------------- */

static void text_seeds(void)
{
    static const char *const texts[] = {
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x00\x01\xff binary too",
        "a",
    };
    static const size_t lens[] = {0, 29, 1}; /* 0: up to the NUL */
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "text-%zu.txt", i);
        write_bytes("text", name, texts[i], lens[i] ? lens[i] : strlen(texts[i]));
    }
}

/* ---- ONNX: models exported by nabla itself ---------------------------------------- */

static nb_value seed_mlp(nb_builder *b, nb_value x)
{
    return nb_softmax(b, nb_layer_fc(b, nb_layer_fc(b, x, 6, "relu", NULL), 3, NULL, NULL), 1);
}

static nb_value seed_cnn(nb_builder *b, nb_value x)
{
    nb_value h =
        nb_layer_conv2d(b, nb_reshape(b, x, 4, (const int64_t[]){-1, 1, 4, 4}), 2, 3, &(nb_conv2d_opts){.padding = 1});
    h = nb_layer_pool2d(b, nb_layer_batch_norm(b, h, NULL), "max", 2, NULL);
    h = nb_layer_layer_norm(b, nb_flatten(b, h, 1, -1), 1, 1e-5);
    return nb_gelu(b, nb_layer_fc(b, h, 2, "tanh", NULL), false);
}

static void onnx_seed(const char *name, nb_value (*model)(nb_builder *, nb_value))
{
    nb_program *main_p, *startup, *test = NULL;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *e;
    if (nb_program_new(&main_p) || nb_program_new(&startup) || nb_builder_new_record(&b, main_p, startup) ||
        nb_scope_new(&scope, NULL) || nb_executor_new(&e)) {
        fail(name);
        return;
    }
    nb_value y = model(b, nb_layer_data(b, "x", NB_F32, 2, (const int64_t[]){-1, 16}));
    if (nb_builder_status(b) || nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL) ||
        nb_program_clone_for_test(&test, main_p) ||
        nb_onnx_export(test, scope, NB_NAMES(nb_value_name(y)), path_of("onnx", name)))
        fail(name);
    nb_program_free(test);
    nb_executor_free(e);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
}

static void onnx_seeds(void)
{
    if (!nb_onnx_available()) return; /* the harness then checks the refusal on what it makes up */
    onnx_seed("mlp.onnx", seed_mlp);
    onnx_seed("cnn.onnx", seed_cnn);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <seed folder>\n", argv[0]);
        return 2;
    }
    root = argv[1];
    if (mkdir(root, 0777) && errno != EEXIST) {
        perror(root);
        return 1;
    }
    idx_seeds();
    safetensors_seeds();
    json_seeds();
    checkpoint_seeds();
    npy_seeds();
    train_seed();
    control_seed();
    text_seeds();
    onnx_seeds();
    return failures ? 1 : 0;
}
