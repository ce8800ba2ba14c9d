/* safetensors files: round trips of every dtype, deterministic bytes, the
 * bytes the format's reference writer produces (fixtures written out by hand
 * from the specification), and a reader that fails cleanly on every damaged
 * file (truncated at every length, bytes flipped everywhere in the header). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "io/json.h"
#include "nabla/safetensors.h"
#include "file_test_util.h"
#include "test.h"

/* A file made of the header size, `header` and `data`. */
static void make_file(const char *path, const char *header, const void *data, size_t data_len)
{
    size_t n = strlen(header);
    unsigned char *p = malloc(8 + n + data_len + 1);
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(p + 8, header, n);
    if (data_len) memcpy(p + 8 + n, data, data_len);
    write_file(path, p, 8 + n + data_len);
    free(p);
}

static bool contains(const unsigned char *p, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(p + i, needle, k)) return true;
    return false;
}

static bool same_bytes(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return false;
    nb_tensor *ca, *cb;
    if (nb_tensor_contiguous(&ca, (nb_tensor *)a) || nb_tensor_contiguous(&cb, (nb_tensor *)b)) return false;
    bool same = !memcmp(nb_tensor_data(ca), nb_tensor_data(cb), (size_t)nb_tensor_numel(a) * nb_dtype_size(a->dtype));
    nb_tensor_release(ca);
    nb_tensor_release(cb);
    return same;
}

static bool file_equals(const char *path, const void *bytes, size_t n)
{
    size_t m;
    unsigned char *p = read_all(path, &m);
    bool same = p && m == n && !memcmp(p, bytes, n);
    if (!same && p) {
        fprintf(stderr, "  %s: %zu bytes, expected %zu\n", path, m, n);
        for (size_t i = 0; i < m && i < n; i++)
            if (p[i] != ((const unsigned char *)bytes)[i]) {
                fprintf(stderr, "  first difference at byte %zu: %02x, expected %02x\n", i, p[i],
                        ((const unsigned char *)bytes)[i]);
                break;
            }
    }
    free(p);
    return same;
}

/* ---- round trips ---------------------------------------------------------- */

static void test_round_trip_all_dtypes(void)
{
    nb_tensor *base = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6.5), *transposed;
    REQUIRE_OK(nb_tensor_transpose(&transposed, base, 0, 1)); /* written in C order of the view */
    nb_tensor *big = T(NB_I64, S(2), 0, 0);
    int64_t *bp = nb_tensor_data(big);
    bp[0] = INT64_MAX; /* not representable as a double: bytes must survive */
    bp[1] = INT64_MIN + 7;
    nb_tensor *t[] = {
        T(NB_F32, S(2, 2), 1.5, -2, 3e-7, 1e30),
        T(NB_F64, S(3), 0.1, -1e300, 2.5),
        T(NB_I32, S(2, 1, 2), -7, 0, 2147483647, -2147483647),
        big,
        T(NB_U8, S(4), 0, 1, 200, 255),
        T(NB_BOOL, S(3), 1, 0, 1),
        tscalar(NB_F64, 3.25), /* 0-d */
        tscalar(NB_BOOL, 1),   /* 0-d, one byte */
        T(NB_F32, S(0, 3), 0), /* empty */
        T(NB_I64, S(2, 0), 0), /* empty */
        transposed,
    };
    const char *names[] = {"f32", "f64", "i32", "i64", "u8", "bool", "scalar", "flag", "empty", "empty2", "t"};
    int n = (int)(sizeof t / sizeof *t);
    const char *keys[] = {"epoch", "note"}, *values[] = {"3", "caf\xc3\xa9 \"quoted\"\n"};
    const char *path = path_of("all.safetensors");
    REQUIRE_OK(nb_safetensors_save(path, n, names, t, &(nb_meta){2, keys, values}));

    nb_safetensors *f;
    REQUIRE_OK(nb_safetensors_load(&f, path));
    CHECK(nb_safetensors_count(f) == n);
    for (int i = 0; i < n; i++) {
        nb_tensor *got = nb_safetensors_find(f, names[i]);
        if (!same_bytes(got, t[i])) {
            fprintf(stderr, "  tensor %s differs after the round trip\n", names[i]);
            test_failures_in_current++;
        }
    }
    CHECK_TENSOR(nb_safetensors_find(f, "t"), S(3, 2), 0, 1, 4, 2, 5, 3, 6.5);
    CHECK_SCALAR(nb_safetensors_find(f, "scalar"), 3.25, 0);
    CHECK(nb_safetensors_find(f, "scalar")->ndim == 0);
    CHECK_STR(nb_safetensors_meta(f, "epoch"), "3");
    CHECK_STR(nb_safetensors_meta(f, "note"), values[1]);
    CHECK(nb_safetensors_meta(f, "nope") == NULL);
    CHECK(nb_safetensors_meta_count(f) == 2);
    CHECK_STR(nb_safetensors_meta_key(f, 0), "epoch");
    CHECK(nb_safetensors_find(f, "nope") == NULL);
    CHECK(nb_safetensors_name(f, n) == NULL && nb_safetensors_tensor(f, -1) == NULL);
    /* File order: by dtype alignment (I64, F64, F32, I32, U8, BOOL), then name. */
    const char *order[] = {"empty2", "i64", "f64", "scalar", "empty", "f32", "t", "i32", "u8", "bool", "flag"};
    for (int i = 0; i < n; i++) CHECK_STR(nb_safetensors_name(f, i), order[i]);
    for (int i = 0; i < n; i++) CHECK(nb_safetensors_tensor(f, i) == nb_safetensors_find(f, order[i]));
    nb_safetensors_free(f);
    for (int i = 0; i < n; i++) nb_tensor_release(t[i]);
    nb_tensor_release(base);
}

static void test_deterministic_bytes(void)
{
    nb_tensor *a = T(NB_F32, S(2), 1, 2), *b = T(NB_U8, S(3), 1, 2, 3), *c = T(NB_I64, S(1), 9);
    const char *n1[] = {"a", "b", "c"}, *n2[] = {"c", "a", "b"};
    nb_tensor *t1[] = {a, b, c}, *t2[] = {c, a, b};
    const char *k1[] = {"x", "y"}, *v1[] = {"1", "2"}, *k2[] = {"y", "x"}, *v2[] = {"2", "1"};
    const char *p1 = path_of("det1.safetensors"), *p2 = path_of("det2.safetensors"), *p3 = path_of("det3.safetensors");
    REQUIRE_OK(nb_safetensors_save(p1, 3, n1, t1, &(nb_meta){2, k1, v1}));
    REQUIRE_OK(nb_safetensors_save(p2, 3, n2, t2, &(nb_meta){2, k2, v2}));
    size_t n;
    unsigned char *bytes = read_all(p1, &n);
    CHECK(file_equals(p2, bytes, n));
    /* The header is padded with spaces so that the data starts at a multiple of 8. */
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | bytes[i];
    CHECK(hn % 8 == 0 && bytes[8] == '{');
    /* Loading and saving again gives the same bytes. */
    nb_safetensors *f;
    REQUIRE_OK(nb_safetensors_load(&f, p1));
    const char *names[3];
    nb_tensor *ts[3];
    for (int i = 0; i < 3; i++) {
        names[i] = nb_safetensors_name(f, i);
        ts[i] = nb_safetensors_tensor(f, i);
    }
    CHECK_OK(nb_safetensors_save(p3, 3, names, ts, &(nb_meta){2, k1, v1}));
    CHECK(file_equals(p3, bytes, n));
    nb_safetensors_free(f);
    free(bytes);
    release_all(a, b, c, NULL);
}

/* ---- interoperability: bytes laid out by hand from the specification ------ */

/* Loads `bytes` from a file, checks it with `check`, saves what was loaded
 * and requires the same bytes back. */
static void check_fixture(const char *name, const unsigned char *bytes, size_t n, void (*check)(nb_safetensors *))
{
    const char *in = path_of("fixture.safetensors"), *out = path_of("fixture_out.safetensors");
    write_file(in, bytes, n);
    nb_safetensors *f;
    nb_status st = nb_safetensors_load(&f, in);
    if (st) {
        fprintf(stderr, "  fixture %s: %s\n", name, nb_last_error());
        test_failures_in_current++;
        return;
    }
    check(f);
    int count = nb_safetensors_count(f), nm = nb_safetensors_meta_count(f);
    const char *names[16], *keys[16], *values[16];
    nb_tensor *ts[16];
    for (int i = 0; i < count; i++) {
        names[i] = nb_safetensors_name(f, i);
        ts[i] = nb_safetensors_tensor(f, i);
    }
    for (int i = 0; i < nm; i++) {
        keys[i] = nb_safetensors_meta_key(f, i);
        values[i] = nb_safetensors_meta(f, keys[i]);
    }
    CHECK_OK(nb_safetensors_save(out, count, names, ts, &(nb_meta){nm, keys, values}));
    if (!file_equals(out, bytes, n)) {
        fprintf(stderr, "  fixture %s: nabla's bytes differ\n", name);
        test_failures_in_current++;
    }
    nb_safetensors_free(f);
}

static void check_w(nb_safetensors *f)
{
    CHECK(nb_safetensors_count(f) == 1 && nb_safetensors_meta_count(f) == 0);
    CHECK(nb_safetensors_find(f, "w") && nb_safetensors_find(f, "w")->dtype == NB_F32);
    CHECK_TENSOR(nb_safetensors_find(f, "w"), S(2, 2), 0, 1, 2, 3, 4);
}

static void check_empty(nb_safetensors *f) { CHECK(nb_safetensors_count(f) == 0 && nb_safetensors_meta_count(f) == 0); }

static void check_pt(nb_safetensors *f)
{
    CHECK(nb_safetensors_count(f) == 0);
    CHECK_STR(nb_safetensors_meta(f, "framework"), "pt");
}

static void check_attn0(nb_safetensors *f)
{
    CHECK_TENSOR(nb_safetensors_find(f, "attn0"), S(1, 1, 2, 3), 0, 0, 1, 2, 3, 4, 5);
}

static void check_mixed(nb_safetensors *f)
{
    CHECK(nb_safetensors_count(f) == 6);
    CHECK_STR(nb_safetensors_meta(f, "note"), "hi");
    CHECK_STR(nb_safetensors_meta(f, "step"), "10");
    nb_tensor *b = nb_safetensors_find(f, "b");
    CHECK(b && b->dtype == NB_I64 && b->ndim == 0 && *(int64_t *)nb_tensor_data(b) == -2);
    CHECK(nb_safetensors_find(f, "c") && nb_safetensors_find(f, "c")->dtype == NB_F64);
    CHECK_TENSOR(nb_safetensors_find(f, "c"), S(1), 0, 0.5);
    CHECK_TENSOR(nb_safetensors_find(f, "f"), S(2), 0, 1.5, -2);
    CHECK_TENSOR(nb_safetensors_find(f, "d"), S(2), 0, 7, -1);
    CHECK(nb_safetensors_find(f, "d")->dtype == NB_I32);
    nb_tensor *e = nb_safetensors_find(f, "e");
    CHECK(e && e->dtype == NB_U8 && e->ndim == 1 && e->shape[0] == 0);
    CHECK_TENSOR(nb_safetensors_find(f, "a"), S(3), 0, 1, 0, 1);
    CHECK(nb_safetensors_find(f, "a")->dtype == NB_BOOL);
}

static void test_reference_bytes(void)
{
    /* A 2x2 F32 tensor: N = 64 (57 bytes of JSON and 7 spaces of padding),
     * the values 1, 2, 3, 4 as little-endian IEEE singles. */
    static const unsigned char w[] = "\x40\0\0\0\0\0\0\0"
                                     "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}       "
                                     "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40";
    check_fixture("2x2", w, sizeof w - 1, check_w);
    /* The reference crate's own test vectors: no tensors; metadata only;
     * a tensor whose header needs padding. */
    static const unsigned char empty[] = "\x08\0\0\0\0\0\0\0{}      ";
    check_fixture("empty", empty, sizeof empty - 1, check_empty);
    static const unsigned char pt[] = "\x28\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ";
    check_fixture("metadata", pt, sizeof pt - 1, check_pt);
    static const unsigned char attn0[] = "\x48\0\0\0\0\0\0\0"
                                         "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}"
                                         "       "
                                         "\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
                                         "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40";
    check_fixture("attn0", attn0, sizeof attn0 - 1, check_attn0);
    /* Every dtype, a 0-d and an empty tensor, metadata: tensors ordered by
     * dtype alignment then name, metadata keys sorted. N = 368 = 0x170. */
    static const unsigned char mixed[] = "\x70\x01\0\0\0\0\0\0"
                                         "{\"__metadata__\":{\"note\":\"hi\",\"step\":\"10\"},"
                                         "\"b\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
                                         "\"c\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]},"
                                         "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                                         "\"d\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[24,32]},"
                                         "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[32,32]},"
                                         "\"a\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[32,35]}}"
                                         "\xfe\xff\xff\xff\xff\xff\xff\xff" /* b = -2 */
                                         "\x00\x00\x00\x00\x00\x00\xe0\x3f" /* c = 0.5 */
                                         "\x00\x00\xc0\x3f\x00\x00\x00\xc0" /* f = 1.5, -2 */
                                         "\x07\x00\x00\x00\xff\xff\xff\xff" /* d = 7, -1 */
                                         "\x01\x00\x01";                    /* a = true, false, true */
    check_fixture("mixed", mixed, sizeof mixed - 1, check_mixed);
}

/* Other writers' spellings that are valid JSON: whitespace, escapes, another
 * key order, data_offsets in any order in the header. */
static void test_reads_other_layouts(void)
{
    const char *path = path_of("layout.safetensors");
    static const unsigned char data[] = {1, 2, 3, 4, 0, 0, 0x80, 0x3f};
    make_file(path,
              "{ \"z\" : { \"data_offsets\" : [ 4 , 8 ] , \"shape\" : [ 1 ] , \"dtype\" : \"F32\" } ,\n"
              "\t\"\\u0061\\/\\ud83d\\ude00\\u00e9\" : {\"shape\":[4],\"dtype\":\"U8\",\"data_offsets\":[0,4]},"
              "\"__metadata__\":{\"k\\n\":\"v\\\"\"}}\r\n   ",
              data, sizeof data);
    nb_safetensors *f;
    REQUIRE_OK(nb_safetensors_load(&f, path));
    CHECK(nb_safetensors_count(f) == 2);
    CHECK_STR(nb_safetensors_name(f, 0), "a/\xf0\x9f\x98\x80\xc3\xa9"); /* file order: offset 0 first */
    CHECK_TENSOR(nb_safetensors_tensor(f, 0), S(4), 0, 1, 2, 3, 4);
    CHECK_TENSOR(nb_safetensors_find(f, "z"), S(1), 0, 1);
    CHECK_STR(nb_safetensors_meta(f, "k\n"), "v\"");
    /* Names and values with characters JSON escapes survive a round trip. */
    const char *names[] = {nb_safetensors_name(f, 0), "q\"\\\x01\t"};
    nb_tensor *ts[] = {nb_safetensors_tensor(f, 0), nb_safetensors_tensor(f, 1)};
    const char *out = path_of("layout2.safetensors");
    CHECK_OK(nb_safetensors_save(out, 2, names, ts, NULL));
    size_t n;
    unsigned char *bytes = read_all(out, &n);
    CHECK(bytes && contains(bytes, n, "\"q\\\"\\\\\\u0001\\t\""));
    free(bytes);
    nb_safetensors *g;
    REQUIRE_OK(nb_safetensors_load(&g, out));
    CHECK(same_bytes(nb_safetensors_find(g, "q\"\\\x01\t"), ts[1]));
    CHECK(same_bytes(nb_safetensors_find(g, names[0]), ts[0]));
    nb_safetensors_free(g);
    nb_safetensors_free(f);
}

/* ---- errors ------------------------------------------------------------- */

static void test_save_errors(void)
{
    nb_tensor *a = T(NB_F32, S(1), 1);
    const char *path = path_of("keep.safetensors");
    const char *good[] = {"a"};
    REQUIRE_OK(nb_safetensors_save(path, 1, good, &a, NULL));
    size_t n;
    unsigned char *before = read_all(path, &n);
    nb_tensor *two[] = {a, a};
    const char *dup[] = {"x", "x"}, *reserved[] = {"__metadata__"}, *bad_utf8[] = {"\xc3("}, *empty[] = {""};
    CHECK_ERR(nb_safetensors_save(path, 2, dup, two, NULL), NB_ERR_ARG, "'x' is given twice");
    CHECK_ERR(nb_safetensors_save(path, 1, reserved, &a, NULL), NB_ERR_ARG, "reserved");
    CHECK_ERR(nb_safetensors_save(path, 1, bad_utf8, &a, NULL), NB_ERR_ARG, "UTF-8");
    CHECK_ERR(nb_safetensors_save(path, 1, empty, &a, NULL), NB_ERR_ARG, "empty");
    nb_tensor *null_t = NULL;
    CHECK_ERR(nb_safetensors_save(path, 1, good, &null_t, NULL), NB_ERR_ARG, "NULL");
    const char *keys[] = {"k", "k"}, *values[] = {"1", "2"};
    CHECK_ERR(nb_safetensors_save(path, 1, good, &a, &(nb_meta){2, keys, values}), NB_ERR_ARG,
              "metadata key 'k' is given twice");
    CHECK_ERR(nb_safetensors_save(path, -1, good, &a, NULL), NB_ERR_ARG, path);
    CHECK(file_equals(path, before, n)); /* untouched by every failed save */
    /* A directory that does not exist: an i/o error, and no file anywhere. */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", dir);
    CHECK_ERR(nb_safetensors_save(missing, 1, good, &a, NULL), NB_ERR_IO, "no/such/dir/x.safetensors");
    free(before);
    nb_tensor_release(a);
}

/* Each malformed file gives NB_ERR_FORMAT (or UNSUPPORTED) naming the file
 * and the problem. */
static void check_bad(const char *header, const void *data, size_t data_len, nb_status code, const char *needle)
{
    const char *path = path_of("bad.safetensors");
    make_file(path, header, data, data_len);
    nb_safetensors *f = (nb_safetensors *)&f; /* must be reset to NULL */
    nb_status st = nb_safetensors_load(&f, path);
    if (st != code || !strstr(nb_last_error(), needle) || !strstr(nb_last_error(), path) || f) {
        fprintf(stderr, "  header %s: got %s \"%s\", wanted %s containing \"%s\"\n", header, nb_status_name(st),
                nb_last_error(), nb_status_name(code), needle);
        test_failures_in_current++;
    }
    if (!st) nb_safetensors_free(f);
}

static void test_load_errors(void)
{
    static const unsigned char d16[16] = {0}, bool2[3] = {1, 2, 0};
    const char *path = path_of("raw.safetensors");
    nb_safetensors *f;
    /* Sizes. */
    write_file(path, "\x02\0\0\0", 4);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "too short for the 8-byte header size");
    write_file(path, "\x20\0\0\0\0\0\0\0{}", 10);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "header size 32 is larger than the 2 bytes");
    write_file(path, "\0\0\0\0\0\x01\0\0{}", 10);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "over the limit");
    write_file(path, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "over the limit");
    write_file(path, "\0\0\0\0\0\0\0\0", 8);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "header is empty");
    CHECK_ERR(nb_safetensors_load(&f, path_of("nothing.safetensors")), NB_ERR_NOT_FOUND, "nothing.safetensors");
    CHECK_ERR(nb_safetensors_load(&f, dir), NB_ERR_IO, dir);
    /* JSON. */
    check_bad(" {}", NULL, 0, NB_ERR_FORMAT, "does not start with '{'");
    check_bad("[]", NULL, 0, NB_ERR_FORMAT, "does not start with '{'");
    check_bad("{", NULL, 0, NB_ERR_FORMAT, "invalid JSON");
    check_bad("{}x", NULL, 0, NB_ERR_FORMAT, "more text follows");
    check_bad("{}{}", NULL, 0, NB_ERR_FORMAT, "more text follows");
    check_bad("{\"__metadata__\":{\"a\":\"b\",}}", NULL, 0, NB_ERR_FORMAT, "invalid JSON");
    check_bad("{'a':1}", NULL, 0, NB_ERR_FORMAT, "invalid JSON");
    check_bad("{\"__metadata__\":{\"a\":\"\x01\"}}", NULL, 0, NB_ERR_FORMAT, "control characters");
    check_bad("{\"\xc3\x28\":{}}", NULL, 0, NB_ERR_FORMAT, "not valid UTF-8");
    check_bad("{\"\xed\xa0\x80\":{}}", NULL, 0, NB_ERR_FORMAT, "not valid UTF-8"); /* an encoded surrogate */
    check_bad("{\"\xc0\xaf\":{}}", NULL, 0, NB_ERR_FORMAT, "not valid UTF-8");     /* overlong '/' */
    check_bad("{\"\\ud800\":{}}", NULL, 0, NB_ERR_FORMAT, "surrogate");
    check_bad("{\"\\udc00\":{}}", NULL, 0, NB_ERR_FORMAT, "surrogate");
    check_bad("{\"\\x41\":{}}", NULL, 0, NB_ERR_FORMAT, "unknown escape");
    check_bad("{\"a\\u0000b\":{}}", NULL, 0, NB_ERR_FORMAT, "NUL");
    /* Structure. */
    check_bad("{\"__metadata__\":[]}", NULL, 0, NB_ERR_FORMAT, "__metadata__ is not a JSON object");
    check_bad("{\"__metadata__\":{\"a\":1}}", NULL, 0, NB_ERR_FORMAT, "metadata key 'a' is not a string");
    check_bad("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0, NB_ERR_FORMAT, "__metadata__ twice");
    check_bad("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", NULL, 0, NB_ERR_FORMAT, "metadata key 'k' appears twice");
    check_bad("{\"a\":1}", NULL, 0, NB_ERR_FORMAT, "entry of tensor 'a' is not a JSON object");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}", d16, 4, NB_ERR_FORMAT,
              "unknown field 'x'");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", d16, 4, NB_ERR_FORMAT, "has no 'shape' field");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", d16, 4, NB_ERR_FORMAT, "field 'dtype' twice");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]}}",
              d16, 8, NB_ERR_FORMAT, "tensor name 'a' appears twice");
    check_bad("{\"a\":{\"dtype\":\"Q8\",\"shape\":[],\"data_offsets\":[0,1]}}", d16, 1, NB_ERR_FORMAT,
              "unknown dtype 'Q8'");
    check_bad("{\"a\":{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[0,2]}}", d16, 2, NB_ERR_UNSUPPORTED,
              "dtype I16");
    check_bad("{\"a\":{\"dtype\":7,\"shape\":[],\"data_offsets\":[0,2]}}", d16, 2, NB_ERR_FORMAT, "not a string");
    /* Shapes. */
    check_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", d16, 1, NB_ERR_FORMAT,
              "dimension -1 that is negative");
    check_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", d16, 1, NB_ERR_FORMAT,
              "not an integer");
    check_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", d16, 1, NB_ERR_FORMAT,
              "not a number");
    check_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999],\"data_offsets\":[0,1]}}", d16, 1,
              NB_ERR_FORMAT, "fits in 64 bits");
    check_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", d16, 0,
              NB_ERR_FORMAT, "too large");
    check_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[0,4294967296,4294967296],\"data_offsets\":[0,0]}}", d16, 0,
              NB_ERR_FORMAT, "too large");
    check_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", d16, 1,
              NB_ERR_UNSUPPORTED, "more than 8 dimensions");
    /* Offsets. */
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", d16, 8, NB_ERR_FORMAT,
              "not two non-negative integers");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", d16, 8, NB_ERR_FORMAT,
              "not two non-negative integers");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", d16, 8, NB_ERR_FORMAT,
              "not a range within the 8-byte data buffer");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", d16, 8, NB_ERR_FORMAT, "not a range");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]}}", d16, 8,
              NB_ERR_FORMAT, "not a range");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", d16, 12, NB_ERR_FORMAT,
              "F32 [2], 8 bytes, but its data_offsets [0, 12] span 12");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
              d16, 12, NB_ERR_FORMAT, "overlaps that of 'a'");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]}}",
              d16, 16, NB_ERR_FORMAT, "bytes [8, 12) of the data buffer belong to no tensor");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d16, 12, NB_ERR_FORMAT,
              "bytes [0, 4)");
    check_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d16, 9, NB_ERR_FORMAT,
              "1 bytes after the data of the last tensor");
    check_bad("{}", d16, 1, NB_ERR_FORMAT, "1 bytes after");
    check_bad("{\"a\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}", bool2, 3, NB_ERR_FORMAT,
              "holds byte 2 at element 1");
}

/* ---- the JSON reader on its own ---------------------------------------- */

/* Reads all of `text`; returns the status and the tokens seen as letters. */
static nb_status scan(const char *text, char *tokens, size_t cap)
{
    static const char letters[] = "E{}[]ksntfz";
    json_reader r;
    json_reader_init(&r, text, strlen(text));
    nb_status st;
    size_t k = 0;
    json_token tok;
    do {
        st = json_next(&r, &tok);
        if (!st && k + 1 < cap) tokens[k++] = letters[tok];
    } while (!st && tok != JSON_END);
    tokens[k] = '\0';
    json_reader_free(&r);
    return st;
}

static void test_json_reader(void)
{
    char tok[128];
    CHECK_OK(scan(" {\"a\" : [1, -0, 2.5e-3, 1E+9, true, false, null, \"x\", {}, []]} ", tok, sizeof tok));
    CHECK_STR(tok, "{k[nnnntfzs{}[]]}E");
    CHECK_OK(scan("\"\\u00e9\\ud83d\\ude00\"", tok, sizeof tok));
    json_reader r;
    json_token t;
    const char *text = "\"\\u00e9\\ud83d\\ude00\\n\"";
    json_reader_init(&r, text, strlen(text));
    CHECK_OK(json_next(&r, &t));
    CHECK(t == JSON_STRING);
    CHECK_STR(json_text(&r, NULL), "\xc3\xa9\xf0\x9f\x98\x80\n");
    json_reader_free(&r);
    const char *bad[] = {"",
                         " ",
                         "01",
                         "1.",
                         ".5",
                         "-",
                         "1e",
                         "+1",
                         "tru",
                         "nul",
                         "[1,]",
                         "{\"a\":1,}",
                         "[1 2]",
                         "{\"a\" 1}",
                         "{1:2}",
                         "\"abc",
                         "\"\\",
                         "\"\t\"",
                         "[",
                         "]",
                         "{}}",
                         "\"\\u12\"",
                         "\"\\ud800\\u0041\"",
                         "/*c*/1",
                         "NaN",
                         "Infinity"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nb_status st = scan(bad[i], tok, sizeof tok);
        if (st != NB_ERR_FORMAT || !strstr(nb_last_error(), "invalid JSON")) {
            fprintf(stderr, "  '%s' gave %s %s\n", bad[i], nb_status_name(st), nb_last_error());
            test_failures_in_current++;
        }
    }
    /* Nesting: JSON_MAX_DEPTH levels are fine, one more is not. */
    char deep[2 * JSON_MAX_DEPTH + 4];
    for (int d = JSON_MAX_DEPTH; d <= JSON_MAX_DEPTH + 1; d++) {
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        deep[2 * d] = '\0';
        nb_status st = scan(deep, tok, sizeof tok);
        CHECK(d == JSON_MAX_DEPTH ? st == NB_OK : st == NB_ERR_FORMAT && strstr(nb_last_error(), "too deeply"));
    }
    uint64_t v;
    CHECK(json_parse_uint("18446744073709551615", UINT64_MAX, &v) && v == UINT64_MAX);
    CHECK(!json_parse_uint("18446744073709551616", UINT64_MAX, &v));
    CHECK(!json_parse_uint("9223372036854775808", INT64_MAX, &v));
    CHECK(json_parse_uint("0", 5, &v) && v == 0);
    CHECK(!json_parse_uint("6", 5, &v) && !json_parse_uint("-1", 5, &v) && !json_parse_uint("1e2", 500, &v));
    CHECK(json_utf8_valid("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10));
    CHECK(!json_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
    CHECK(!json_utf8_valid("\xe2\x82", 2));         /* cut short */
    CHECK(!json_utf8_valid("\x80", 1));
}

/* ---- damaged files never crash ------------------------------------------ */

static nb_status load_quietly(const char *path)
{
    nb_safetensors *f;
    nb_status st = nb_safetensors_load(&f, path);
    if (!st) nb_safetensors_free(f);
    return st;
}

static void test_truncated_and_flipped(void)
{
    nb_tensor *t[] = {T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), T(NB_I64, S(1), 7), T(NB_BOOL, S(2), 1, 0),
                      tscalar(NB_U8, 9), T(NB_F64, S(0), 0)};
    const char *names[] = {"w", "step", "mask", "u", "none"};
    const char *keys[] = {"epoch"}, *values[] = {"12"};
    const char *good = path_of("good.safetensors"), *bad = path_of("damaged.safetensors");
    REQUIRE_OK(nb_safetensors_save(good, 5, names, t, &(nb_meta){1, keys, values}));
    size_t n;
    unsigned char *bytes = read_all(good, &n);
    REQUIRE_OK(bytes ? NB_OK : NB_ERR_IO);
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | bytes[i];
    /* Every proper prefix is malformed. */
    int wrong = 0;
    for (size_t len = 0; len < n; len++) {
        write_file(bad, bytes, len);
        nb_status st = load_quietly(bad);
        if (st != NB_ERR_FORMAT || !strstr(nb_last_error(), bad)) {
            if (!wrong++) fprintf(stderr, "  prefix of %zu bytes: %s %s\n", len, nb_status_name(st), nb_last_error());
        }
    }
    CHECK(wrong == 0);
    /* Flipped bits and replaced bytes anywhere in the size and the header
     * load or fail cleanly (ASan checks the "cleanly"); most fail. */
    static const unsigned char masks[] = {0x01, 0x02, 0x04, 0x10, 0x20, 0x40, 0x80, 0xff};
    static const unsigned char repl[] = {'"', '{', '}', '[', ']', ',', ':', '0', '9', '-', '\\', 0, 0xc3, ' '};
    unsigned char *copy = malloc(n);
    int failed = 0, tried = 0, unnamed = 0;
    for (size_t pos = 0; pos < 8 + header; pos++) {
        for (size_t m = 0; m < sizeof masks + sizeof repl; m++) {
            memcpy(copy, bytes, n);
            if (m < sizeof masks) copy[pos] ^= masks[m];
            else copy[pos] = repl[m - sizeof masks];
            if (copy[pos] == bytes[pos]) continue;
            write_file(bad, copy, n);
            nb_status st = load_quietly(bad);
            tried++;
            if (st) {
                failed++;
                if (!strstr(nb_last_error(), bad) && !unnamed++)
                    fprintf(stderr, "  error without the file name: %s\n", nb_last_error());
            }
        }
    }
    CHECK(unnamed == 0);
    CHECK(failed > tried * 3 / 4);
    /* Random bytes anywhere, data included (a BOOL byte > 1 is caught). */
    uint64_t rng = 12345;
    for (int k = 0; k < 3000; k++) {
        memcpy(copy, bytes, n);
        for (int j = 0; j < 3; j++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            copy[(rng >> 33) % n] = (unsigned char)(rng >> 20);
        }
        write_file(bad, copy, n);
        nb_status st = load_quietly(bad);
        CHECK(st == NB_OK || st == NB_ERR_FORMAT || st == NB_ERR_UNSUPPORTED);
    }
    free(copy);
    free(bytes);
    for (int i = 0; i < 5; i++) nb_tensor_release(t[i]);
}

static void cleanup_dir(void)
{
    const char *names[] = {"all.safetensors",    "det1.safetensors",    "det2.safetensors",
                           "det3.safetensors",   "fixture.safetensors", "fixture_out.safetensors",
                           "layout.safetensors", "layout2.safetensors", "keep.safetensors",
                           "bad.safetensors",    "raw.safetensors",     "good.safetensors",
                           "damaged.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unlink(path_of(names[i]));
    if (rmdir(dir)) fprintf(stderr, "note: could not remove %s: %s\n", dir, strerror(errno));
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nabla_st_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_round_trip_all_dtypes);
    RUN(test_deterministic_bytes);
    RUN(test_reference_bytes);
    RUN(test_reads_other_layouts);
    RUN(test_save_errors);
    RUN(test_load_errors);
    RUN(test_json_reader);
    RUN(test_truncated_and_flipped);
    cleanup_dir();
    return test_report();
}
