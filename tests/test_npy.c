/* NumPy .npy and .npz files: round trips of every dtype and shape, the bytes
 * numpy.save writes, files laid out by hand from the format (Fortran order,
 * versions 2.0 and 3.0, float16 and the narrow integers, zip64 members as
 * numpy writes them), a program's state, and a reader that fails cleanly on
 * every damaged file (truncated at every length, bytes flipped, each
 * malformed structure named in its message). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>
#include "nabla/npy.h"
#include "file_test_util.h"
#include "test.h"

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

/* A .npy file: magic, version, header length, the header padded to 64 as
 * numpy does (or not, pad false), data. */
static size_t make_npy(unsigned char *out, int major, const char *dict, bool pad, const void *data, size_t n)
{
    size_t prefix = major == 1 ? 10 : 12, hlen = strlen(dict);
    size_t total = hlen + 1;
    if (pad) total += (64 - (prefix + hlen + 1) % 64) % 64;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++) out[8 + i] = (unsigned char)(total >> (8 * i));
    memcpy(out + prefix, dict, hlen);
    memset(out + prefix + hlen, ' ', total - hlen - 1);
    out[prefix + total - 1] = '\n';
    if (n) memcpy(out + prefix + total, data, n);
    return prefix + total + n;
}

static nb_tensor *load_npy_bytes(const unsigned char *p, size_t n, nb_status *st)
{
    const char *path = path_of("made.npy");
    write_file(path, p, n);
    nb_tensor *t = NULL;
    *st = nb_npy_load(&t, path);
    return t;
}

/* ---- round trips ---------------------------------------------------------- */

static nb_tensor **sample_tensors(int *n, nb_tensor **base)
{
    static nb_tensor *t[12];
    *base = T(NB_F32, S(2, 3, 2), 1, 2, 3, 4, 5, 6.5, 7, 8, 9, 10, 11, 12);
    nb_tensor *transposed, *big = T(NB_I64, S(2), 0, 0);
    if (nb_tensor_permute(&transposed, *base, (const int[]){2, 0, 1})) exit(2);
    ((int64_t *)nb_tensor_data(big))[0] = INT64_MAX; /* not a double: the bytes must survive */
    ((int64_t *)nb_tensor_data(big))[1] = INT64_MIN + 7;
    nb_tensor *list[] = {
        T(NB_F32, S(2, 2), 1.5, -2, 3e-7, 1e30),
        T(NB_F64, S(3), 0.1, -1e300, 2.5),
        T(NB_I32, S(2, 1, 2), -7, 0, 2147483647, -2147483647),
        big,
        T(NB_U8, S(4), 0, 1, 200, 255),
        T(NB_BOOL, S(3), 1, 0, 1),
        tscalar(NB_F64, 3.25),
        tscalar(NB_BOOL, 1),
        T(NB_F32, S(0, 3), 0),
        T(NB_I64, S(2, 0), 0),
        transposed,
        tscalar(NB_U8, 7),
    };
    memcpy(t, list, sizeof list);
    *n = (int)(sizeof list / sizeof *list);
    return t;
}

static const char *const sample_names[] = {"f32",    "f64",  "i32",   "i64",    "u8", "bool",
                                           "scalar", "flag", "empty", "empty2", "t",  "caf\xc3\xa9"};

static void test_npy_round_trip(void)
{
    int n;
    nb_tensor *base, **t = sample_tensors(&n, &base);
    for (int i = 0; i < n; i++) {
        const char *path = path_of("rt.npy");
        CHECK_OK(nb_npy_save(path, t[i]));
        nb_tensor *got = NULL;
        CHECK_OK(nb_npy_load(&got, path));
        if (!same_bytes(got, t[i])) {
            fprintf(stderr, "  %s differs after a .npy round trip\n", sample_names[i]);
            test_failures_in_current++;
        }
        /* numpy.save's layout: version 1.0, data at a multiple of 64. */
        size_t len;
        unsigned char *bytes = read_all(path, &len);
        size_t hlen = bytes[8] | (size_t)bytes[9] << 8;
        CHECK(bytes[6] == 1 && bytes[7] == 0 && (10 + hlen) % 64 == 0 && bytes[9 + hlen] == '\n');
        CHECK(len == 10 + hlen + (size_t)nb_tensor_numel(t[i]) * nb_dtype_size(t[i]->dtype));
        free(bytes);
        nb_tensor_release(got);
    }
    nb_tensor *got;
    CHECK_OK(nb_npy_load(&got, path_of("rt.npy")));
    nb_tensor_release(got);
    /* The transposed view is written in its own C order. */
    CHECK_OK(nb_npy_save(path_of("t.npy"), t[10]));
    CHECK_OK(nb_npy_load(&got, path_of("t.npy")));
    CHECK_TENSOR(got, S(2, 2, 3), 0, 1, 3, 5, 7, 9, 11, 2, 4, 6.5, 8, 10, 12);
    nb_tensor_release(got);
    for (int i = 0; i < n; i++) nb_tensor_release(t[i]);
    nb_tensor_release(base);
}

/* The exact bytes numpy.save writes (numpy 1.24: np.save(f, np.array([1, 2], np.float32))). */
static void test_npy_numpy_bytes(void)
{
    static const char want_header[] =
        "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    nb_tensor *t = T(NB_F32, S(2), 1, 2);
    const char *path = path_of("np.npy");
    REQUIRE_OK(nb_npy_save(path, t));
    size_t n;
    unsigned char *b = read_all(path, &n);
    CHECK(n == 128 + 8 && !memcmp(b, want_header, sizeof want_header - 1));
    for (size_t i = sizeof want_header - 1; i < 127; i++) CHECK(b[i] == ' ');
    CHECK(b[127] == '\n' && !memcmp(b + 128, "\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
    free(b);
    nb_tensor_release(t);
    /* A 0-d array: shape () and no growth padding. */
    t = tscalar(NB_I64, -3);
    REQUIRE_OK(nb_npy_save(path, t));
    b = read_all(path, &n);
    static const char scalar[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (), }";
    CHECK(n == 128 + 8 && !memcmp(b + 10, scalar, sizeof scalar - 1) && b[10 + sizeof scalar - 1] == ' ');
    free(b);
    nb_tensor_release(t);
}

static void test_npy_layouts(void)
{
    unsigned char buf[1024];
    nb_status st;
    /* Fortran order: a (2, 3) array stored column by column. */
    static const float fdata[] = {1, 4, 2, 5, 3, 6};
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", true, fdata, 24);
    nb_tensor *t = load_npy_bytes(buf, n, &st);
    CHECK_OK(st);
    CHECK_TENSOR(t, S(2, 3), 0, 1, 2, 3, 4, 5, 6);
    CHECK(t && nb_tensor_is_contiguous(t));
    nb_tensor_release(t);
    /* Fortran order in 3-d: element (i, j, k) at i + 2j + 6k. */
    int32_t f3[24], want[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                f3[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
                want[(i * 3 + j) * 4 + k] = 100 * i + 10 * j + k;
            }
    n = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", true, f3, sizeof f3);
    t = load_npy_bytes(buf, n, &st);
    CHECK_OK(st);
    CHECK(t && t->ndim == 3 && t->shape[2] == 4 && !memcmp(nb_tensor_data(t), want, sizeof want));
    nb_tensor_release(t);
    /* Versions 2.0 and 3.0 (4-byte header length), other spellings of the
     * dict: key order, double quotes, no trailing comma, spaces, no padding. */
    static const double d2[] = {0.5, -1};
    n = make_npy(buf, 2, "{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<f8\"}", false, d2, 16);
    t = load_npy_bytes(buf, n, &st);
    CHECK_OK(st);
    CHECK_TENSOR(t, S(2), 0, 0.5, -1);
    CHECK(t && t->dtype == NB_F64);
    nb_tensor_release(t);
    n = make_npy(buf, 3, "{ 'descr' : '|u1' , 'fortran_order' : False , 'shape' : ( 1 , 2 , ) , }", true, "\x05\x07",
                 2);
    t = load_npy_bytes(buf, n, &st);
    CHECK_OK(st);
    CHECK_TENSOR(t, S(1, 2), 0, 5, 7);
    nb_tensor_release(t);
    /* Fortran order of a 1-d and a 0-d array is C order. */
    n = make_npy(buf, 1, "{'descr': '|b1', 'fortran_order': True, 'shape': (), }", true, "\x01", 1);
    t = load_npy_bytes(buf, n, &st);
    CHECK_OK(st);
    CHECK(t && t->ndim == 0 && t->dtype == NB_BOOL && *(unsigned char *)nb_tensor_data(t) == 1);
    nb_tensor_release(t);
}

static void test_npy_converted_dtypes(void)
{
    unsigned char buf[1024];
    nb_status st;
    /* float16: subnormals (smallest, largest), the smallest normal, 1, -2,
     * the largest finite, infinities, NaN, -0. */
    static const uint16_t halves[] = {0x0001, 0x03ff, 0x0400, 0x3c00, 0xc000, 0x7bff,
                                      0x7c00, 0xfc00, 0x7e00, 0x8000, 0x3555};
    size_t n =
        make_npy(buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (11,), }", true, halves, sizeof halves);
    nb_tensor *t = load_npy_bytes(buf, n, &st);
    CHECK_OK(st);
    if (t) {
        const float *f = nb_tensor_data(t);
        CHECK(t->dtype == NB_F32 && t->shape[0] == 11);
        CHECK(f[0] == 0x1p-24f && f[1] == 0x3ffp-24f && f[2] == 0x1p-14f && f[3] == 1 && f[4] == -2);
        CHECK(f[5] == 65504 && isinf(f[6]) && f[6] > 0 && isinf(f[7]) && f[7] < 0 && isnan(f[8]));
        CHECK(f[9] == 0 && signbit(f[9]) && f[10] == 0x1.554p-2f);
    }
    nb_tensor_release(t);
    static const int8_t i1[] = {-128, 127, 0, -1};
    n = make_npy(buf, 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }", true, i1, 4);
    t = load_npy_bytes(buf, n, &st);
    CHECK_OK(st);
    CHECK(t && t->dtype == NB_I32);
    CHECK_TENSOR(t, S(4), 0, -128, 127, 0, -1);
    nb_tensor_release(t);
    static const unsigned char i2[] = {0x00, 0x80, 0xff, 0x7f, 0xff, 0xff};
    n = make_npy(buf, 1, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", true, i2, 6);
    t = load_npy_bytes(buf, n, &st);
    CHECK_TENSOR(t, S(3), 0, -32768, 32767, -1);
    nb_tensor_release(t);
    n = make_npy(buf, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", true, i2, 6);
    t = load_npy_bytes(buf, n, &st);
    CHECK(t && t->dtype == NB_I32);
    CHECK_TENSOR(t, S(3), 0, 32768, 32767, 65535);
    nb_tensor_release(t);
    static const unsigned char u4[] = {0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0};
    n = make_npy(buf, 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", true, u4, 8);
    t = load_npy_bytes(buf, n, &st);
    CHECK(t && t->dtype == NB_I64);
    CHECK_TENSOR(t, S(2), 0, 4294967295.0, 1);
    nb_tensor_release(t);
}

/* ---- errors --------------------------------------------------------------------- */

static void check_bad_npy(const char *dict, const void *data, size_t n, nb_status code, const char *needle)
{
    unsigned char buf[2048];
    size_t len = make_npy(buf, 1, dict, true, data, n);
    nb_status st;
    nb_tensor *t = load_npy_bytes(buf, len, &st);
    if (st != code || !strstr(nb_last_error(), needle) || !strstr(nb_last_error(), path_of("made.npy")) || t) {
        fprintf(stderr, "  header %s: got %s \"%s\", wanted %s containing \"%s\"\n", dict, nb_status_name(st),
                nb_last_error(), nb_status_name(code), needle);
        test_failures_in_current++;
    }
    nb_tensor_release(t);
}

static void test_npy_errors(void)
{
    static const unsigned char z[64] = {0}, two[2] = {1, 2};
    const char *path = path_of("raw.npy");
    nb_tensor *t;
    write_file(path, "\x93NUMP", 5);
    CHECK_ERR(nb_npy_load(&t, path), NB_ERR_FORMAT, "too short for a .npy array");
    write_file(path, "\x93NUMPZ\x01\x00\x00\x00", 10);
    CHECK_ERR(nb_npy_load(&t, path), NB_ERR_FORMAT, "magic");
    write_file(path, "\x93NUMPY\x04\x00\x00\x00", 10);
    CHECK_ERR(nb_npy_load(&t, path), NB_ERR_FORMAT, "version 4.0");
    write_file(path, "\x93NUMPY\x01\x00\x40\x00{}", 12);
    CHECK_ERR(nb_npy_load(&t, path), NB_ERR_FORMAT, "header length 64 is larger than the 2 bytes");
    write_file(path, "\x93NUMPY\x02\x00\xff\xff", 10);
    CHECK_ERR(nb_npy_load(&t, path), NB_ERR_FORMAT, "4-byte header length");
    unsigned char big[12 + 1000001];
    memcpy(big, "\x93NUMPY\x02\x00\x41\x42\x0f\x00", 12);
    memset(big + 12, ' ', sizeof big - 12);
    write_file(path, big, sizeof big);
    CHECK_ERR(nb_npy_load(&t, path), NB_ERR_FORMAT, "over the limit");
    CHECK_ERR(nb_npy_load(&t, path_of("nothing.npy")), NB_ERR_NOT_FOUND, "nothing.npy");
    CHECK_ERR(nb_npy_load(&t, dir), NB_ERR_IO, dir);
    /* The dict. */
    check_bad_npy("", z, 0, NB_ERR_FORMAT, "header ends where the dict's '{' was expected");
    check_bad_npy("[]", z, 0, NB_ERR_FORMAT, "'[' at byte 0 where the dict's '{'");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", z, 4, NB_ERR_FORMAT,
                  "text after the dict");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", z, 4, NB_ERR_FORMAT,
                  "ends where ',' or '}'");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,),, }", z, 4, NB_ERR_FORMAT,
                  "no string where a key");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False}", z, 4, NB_ERR_FORMAT, "no 'shape' key");
    check_bad_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", z, 4, NB_ERR_FORMAT,
                  "key 'descr' twice");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", z, 4, NB_ERR_FORMAT,
                  "unknown key 'x'");
    check_bad_npy("{'descr': '<f4' 'fortran_order': False, 'shape': ()}", z, 4, NB_ERR_FORMAT,
                  "',' or '}' after a value");
    check_bad_npy("{'descr' '<f4', 'fortran_order': False, 'shape': ()}", z, 4, NB_ERR_FORMAT, "':' after a key");
    check_bad_npy("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", z, 4, NB_ERR_FORMAT, "not True or False");
    check_bad_npy("{'descr': '<f4', 'fortran_order': Trueish, 'shape': ()}", z, 4, NB_ERR_FORMAT, "not True or False");
    check_bad_npy("{'descr': '<f\\x34', 'fortran_order': False, 'shape': ()}", z, 4, NB_ERR_FORMAT, "backslash");
    check_bad_npy("{descr: '<f4', 'fortran_order': False, 'shape': ()}", z, 4, NB_ERR_FORMAT, "no string where a key");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': '()'}", z, 4, NB_ERR_FORMAT, "shape tuple's '('");
    check_bad_npy("{'descr': '\x01', 'fortran_order': False, 'shape': ()}", z, 4, NB_ERR_FORMAT, "not printable ASCII");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': 'abc", z, 4, NB_ERR_FORMAT, "shape tuple");
    check_bad_npy("{'descr': 'abc", z, 4, NB_ERR_FORMAT, "not printable ASCII"); /* the final '\n' */
    write_file(path, "\x93NUMPY\x01\x00\x04\x00{'ab", 14);
    CHECK_ERR(nb_npy_load(&t, path), NB_ERR_FORMAT, "ends inside a string");
    /* Shapes. */
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1), }", z, 4, NB_ERR_FORMAT,
                  "a number, not a tuple");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", z, 4, NB_ERR_FORMAT,
                  "negative dimension");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (01,), }", z, 4, NB_ERR_FORMAT, "leading zero");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,), }", z, 4, NB_ERR_FORMAT,
                  "not a plain integer");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }", z, 4, NB_ERR_FORMAT,
                  "not a plain integer");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", z, 4, NB_ERR_FORMAT, "not an integer");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2), }", z, 4, NB_ERR_FORMAT,
                  "',' or ')' in the shape");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", z, 4, NB_ERR_FORMAT,
                  "too large for 64 bits");
    check_bad_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", z, 0, NB_ERR_FORMAT,
                  "too large (its size overflows)");
    check_bad_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }", z, 0,
                  NB_ERR_FORMAT, "too large");
    check_bad_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", z, 1, NB_ERR_UNSUPPORTED,
                  "more than 8 dimensions");
    /* Sizes of the data. */
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", z, 7, NB_ERR_FORMAT,
                  "shape [2] needs 8 bytes of data, but 7 follow the header");
    check_bad_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", z, 9, NB_ERR_FORMAT, "but 9 follow");
    check_bad_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (1000000,), }", z, 8, NB_ERR_FORMAT,
                  "but 8 follow");
    check_bad_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", two, 2, NB_ERR_FORMAT,
                  "holds byte 2 at element 1");
    /* Dtypes nabla does not read. */
    const char *unsupported[] = {">f4", "<c8", "|O", "<U3", "<u8", "|S5", "<M8[ns]", "=f4", "<f16", ""};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        char dict[128], want[64];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (), }", unsupported[i]);
        snprintf(want, sizeof want, "dtype '%s'", unsupported[i]);
        check_bad_npy(dict, z, 8, NB_ERR_UNSUPPORTED, want);
    }
    check_bad_npy("{'descr': '>i4', 'fortran_order': False, 'shape': (), }", z, 4, NB_ERR_UNSUPPORTED, "big-endian");
    check_bad_npy("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (), }", z, 8,
                  NB_ERR_UNSUPPORTED, "structured dtype");
    /* Saving. */
    CHECK_ERR(nb_npy_save(path, NULL), NB_ERR_ARG, "NULL");
    CHECK_ERR(nb_npy_save("", z == NULL ? NULL : (t = tscalar(NB_F32, 1))), NB_ERR_ARG, "empty file path");
    nb_tensor_release(t);
}

static void test_npy_damaged(void)
{
    nb_tensor *t = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6);
    const char *good = path_of("good.npy"), *bad = path_of("damaged.npy");
    REQUIRE_OK(nb_npy_save(good, t));
    size_t n;
    unsigned char *bytes = read_all(good, &n);
    int wrong = 0;
    for (size_t len = 0; len < n; len++) {
        write_file(bad, bytes, len);
        nb_tensor *got = NULL;
        nb_status st = nb_npy_load(&got, bad);
        if ((st != NB_ERR_FORMAT || !strstr(nb_last_error(), bad) || got) && !wrong++)
            fprintf(stderr, "  prefix of %zu bytes: %s %s\n", len, nb_status_name(st), nb_last_error());
        nb_tensor_release(got);
    }
    CHECK(wrong == 0);
    /* Every byte of the header flipped or replaced: a clean load or a clean
     * error naming the file. */
    static const unsigned char masks[] = {0x01, 0x02, 0x10, 0x40, 0x80, 0xff};
    static const unsigned char repl[] = {'\'', '"', '{', '}', '(', ')', ',', ':', '0', '9', '-', '\\', 0, ' ', '\n'};
    unsigned char *copy = malloc(n);
    int unnamed = 0, failed = 0, tried = 0;
    for (size_t pos = 0; pos < 128; pos++)
        for (size_t m = 0; m < sizeof masks + sizeof repl; m++) {
            memcpy(copy, bytes, n);
            if (m < sizeof masks) copy[pos] ^= masks[m];
            else copy[pos] = repl[m - sizeof masks];
            if (copy[pos] == bytes[pos]) continue;
            write_file(bad, copy, n);
            nb_tensor *got = NULL;
            nb_status st = nb_npy_load(&got, bad);
            tried++;
            if (st) {
                failed++;
                if ((!strstr(nb_last_error(), bad) || got) && !unnamed++) fprintf(stderr, "  %s\n", nb_last_error());
            }
            nb_tensor_release(got);
        }
    CHECK(unnamed == 0);
    CHECK(failed > tried / 2);
    free(copy);
    free(bytes);
    nb_tensor_release(t);
}

/* ---- .npz ------------------------------------------------------------------------ */

static void test_npz_round_trip(void)
{
    int n;
    nb_tensor *base, **t = sample_tensors(&n, &base);
    for (unsigned flags = 0; flags <= NB_NPZ_COMPRESSED; flags++) {
        const char *path = path_of(flags ? "rt_deflated.npz" : "rt_stored.npz");
        REQUIRE_OK(nb_npz_save(path, n, sample_names, t, flags));
        nb_npz *f;
        REQUIRE_OK(nb_npz_load(&f, path));
        CHECK(nb_npz_count(f) == n);
        for (int i = 0; i < n; i++) {
            CHECK_STR(nb_npz_name(f, i), sample_names[i]); /* in the order given */
            CHECK(nb_npz_tensor(f, i) == nb_npz_find(f, sample_names[i]));
            if (!same_bytes(nb_npz_tensor(f, i), t[i])) {
                fprintf(stderr, "  %s differs after a .npz round trip (flags %u)\n", sample_names[i], flags);
                test_failures_in_current++;
            }
        }
        CHECK(!nb_npz_find(f, "nope") && !nb_npz_name(f, n) && !nb_npz_tensor(f, -1));
        nb_npz_free(f);
        /* The same arrays give the same bytes. */
        size_t n1, n2;
        unsigned char *b1 = read_all(path, &n1);
        REQUIRE_OK(nb_npz_save(path_of("again.npz"), n, sample_names, t, flags));
        unsigned char *b2 = read_all(path_of("again.npz"), &n2);
        CHECK(n1 == n2 && !memcmp(b1, b2, n1));
        free(b1);
        free(b2);
    }
    /* Deflate shrinks a compressible array. */
    nb_tensor *zeros;
    REQUIRE_OK(nb_tensor_new(&zeros, NB_F32, 1, S(10000)));
    const char *zn[] = {"z"};
    size_t stored, deflated;
    REQUIRE_OK(nb_npz_save(path_of("z0.npz"), 1, zn, &zeros, 0));
    REQUIRE_OK(nb_npz_save(path_of("z1.npz"), 1, zn, &zeros, NB_NPZ_COMPRESSED));
    free(read_all(path_of("z0.npz"), &stored));
    free(read_all(path_of("z1.npz"), &deflated));
    CHECK(stored > 40000 && deflated < 1000);
    nb_npz *f;
    REQUIRE_OK(nb_npz_load(&f, path_of("z1.npz")));
    CHECK(same_bytes(nb_npz_find(f, "z"), zeros));
    nb_npz_free(f);
    /* An empty archive. */
    REQUIRE_OK(nb_npz_save(path_of("none.npz"), 0, NULL, NULL, 0));
    REQUIRE_OK(nb_npz_load(&f, path_of("none.npz")));
    CHECK(nb_npz_count(f) == 0);
    nb_npz_free(f);
    /* Bad arguments leave the file as it was. */
    const char *dup[] = {"a", "a"}, *empty[] = {""}, *bad_utf8[] = {"\xc3("};
    nb_tensor *two[] = {zeros, zeros}, *null_t = NULL;
    CHECK_ERR(nb_npz_save(path_of("z0.npz"), 2, dup, two, 0), NB_ERR_ARG, "'a' is given twice");
    CHECK_ERR(nb_npz_save(path_of("z0.npz"), 1, empty, two, 0), NB_ERR_ARG, "NULL or empty");
    CHECK_ERR(nb_npz_save(path_of("z0.npz"), 1, bad_utf8, two, 0), NB_ERR_ARG, "UTF-8");
    CHECK_ERR(nb_npz_save(path_of("z0.npz"), 1, zn, &null_t, 0), NB_ERR_ARG, "NULL");
    size_t after;
    free(read_all(path_of("z0.npz"), &after));
    CHECK(after == stored);
    nb_tensor_release(zeros);
    for (int i = 0; i < n; i++) nb_tensor_release(t[i]);
    nb_tensor_release(base);
}

/* ---- zip archives laid out by hand ------------------------------------------------- */

typedef struct member {
    const char *name;
    const unsigned char *data; /* the .npy bytes */
    size_t len;
    bool deflate;
    bool zip64_local;   /* numpy's force_zip64: 0xffffffff sizes and a zip64 extra in the local header */
    bool zip64_central; /* sizes and offset through the central directory's zip64 extra */
    uint32_t crc_xor;   /* damages the CRC */
    int64_t usize_delta;
} member;

static unsigned char *p16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}
static unsigned char *p32(unsigned char *p, uint32_t v) { return p16(p16(p, v & 0xffff), v >> 16); }
static unsigned char *p64(unsigned char *p, uint64_t v) { return p32(p32(p, (uint32_t)v), (uint32_t)(v >> 32)); }

/* Writes a zip archive of the members (and a zip64 end record when
 * `zip64_end`); returns its size. */
static size_t make_zip(unsigned char *out, const member *m, int n, bool zip64_end)
{
    unsigned char *p = out;
    uint64_t offsets[8], csizes[8];
    unsigned char *comp[8];
    for (int i = 0; i < n; i++) {
        offsets[i] = (uint64_t)(p - out);
        const unsigned char *data = m[i].data;
        uLongf clen = m[i].len;
        comp[i] = NULL;
        if (m[i].deflate) {
            z_stream zs = {0};
            comp[i] = malloc(m[i].len + 1024);
            deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
            zs.next_in = (unsigned char *)m[i].data;
            zs.avail_in = (uInt)m[i].len;
            zs.next_out = comp[i];
            zs.avail_out = (uInt)m[i].len + 1024;
            deflate(&zs, Z_FINISH);
            clen = zs.total_out;
            deflateEnd(&zs);
            data = comp[i];
        }
        csizes[i] = clen;
        uint32_t crc = (uint32_t)crc32(0, m[i].data, (uInt)m[i].len) ^ m[i].crc_xor;
        size_t nlen = strlen(m[i].name);
        p = p32(p, 0x04034b50);
        p = p16(p, m[i].zip64_local ? 45 : 20);
        p = p16(p, 0);
        p = p16(p, m[i].deflate ? 8 : 0);
        p = p32(p, 0x00210000);
        p = p32(p, crc);
        p = p32(p, m[i].zip64_local ? 0xffffffff : (uint32_t)clen);
        p = p32(p, m[i].zip64_local ? 0xffffffff : (uint32_t)m[i].len);
        p = p16(p, (uint32_t)nlen);
        p = p16(p, m[i].zip64_local ? 20 : 0);
        memcpy(p, m[i].name, nlen);
        p += nlen;
        if (m[i].zip64_local) p = p64(p64(p16(p16(p, 1), 16), m[i].len), clen);
        memcpy(p, data, clen);
        p += clen;
    }
    uint64_t cd = (uint64_t)(p - out);
    for (int i = 0; i < n; i++) {
        size_t nlen = strlen(m[i].name);
        uint32_t crc = (uint32_t)crc32(0, m[i].data, (uInt)m[i].len) ^ m[i].crc_xor;
        uint64_t usize = (uint64_t)((int64_t)m[i].len + m[i].usize_delta);
        bool z = m[i].zip64_central;
        p = p32(p, 0x02014b50);
        p = p16(p, 45);
        p = p16(p, 45);
        p = p16(p, 0);
        p = p16(p, m[i].deflate ? 8 : 0);
        p = p32(p, 0x00210000);
        p = p32(p, crc);
        p = p32(p, z ? 0xffffffff : (uint32_t)csizes[i]);
        p = p32(p, z ? 0xffffffff : (uint32_t)usize);
        p = p16(p, (uint32_t)nlen);
        p = p16(p, z ? 28 : 0);
        p = p16(p, 0);
        p = p16(p, 0);
        p = p16(p, 0);
        p = p32(p, 0);
        p = p32(p, z ? 0xffffffff : (uint32_t)offsets[i]);
        memcpy(p, m[i].name, nlen);
        p += nlen;
        if (z) p = p64(p64(p64(p16(p16(p, 1), 24), usize), csizes[i]), offsets[i]);
        free(comp[i]);
    }
    uint64_t cd_size = (uint64_t)(p - out) - cd, end64 = (uint64_t)(p - out);
    if (zip64_end) {
        p = p32(p, 0x06064b50);
        p = p64(p, 44);
        p = p16(p16(p, 45), 45);
        p = p32(p32(p, 0), 0);
        p = p64(p64(p, (uint64_t)n), (uint64_t)n);
        p = p64(p64(p, cd_size), cd);
        p = p32(p32(p, 0x07064b50), 0);
        p = p32(p64(p, end64), 1);
    }
    p = p32(p, 0x06054b50);
    p = p32(p, 0);
    p = p16(p16(p, zip64_end ? 0xffff : (uint32_t)n), zip64_end ? 0xffff : (uint32_t)n);
    p = p32(p32(p, zip64_end ? 0xffffffff : (uint32_t)cd_size), zip64_end ? 0xffffffff : (uint32_t)cd);
    p = p16(p, 0);
    return (size_t)(p - out);
}

static unsigned char npy_a[256], npy_b[256], npy_bomb[4096];
static size_t len_a, len_b, len_bomb;

static void make_members(void)
{
    static const float fa[] = {1, 2, 3};
    static const int64_t ib[] = {-5, 7};
    len_a = make_npy(npy_a, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", true, fa, 12);
    len_b = make_npy(npy_b, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 1), }", true, ib, 16);
    /* A header for 4 bytes of data, followed by 3000 more. */
    static unsigned char zeros[3004];
    len_bomb =
        make_npy(npy_bomb, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", true, zeros, sizeof zeros);
}

static nb_status load_zip(const member *m, int n, bool zip64_end, nb_npz **f)
{
    static unsigned char buf[16384];
    size_t len = make_zip(buf, m, n, zip64_end);
    const char *path = path_of("made.npz");
    write_file(path, buf, len);
    *f = NULL;
    return nb_npz_load(f, path);
}

static void check_archive(const member *m, int n, bool zip64_end)
{
    nb_npz *f;
    nb_status st = load_zip(m, n, zip64_end, &f);
    CHECK_OK(st);
    if (st) return;
    CHECK(nb_npz_count(f) == 2);
    CHECK_TENSOR(nb_npz_find(f, "a"), S(3), 0, 1, 2, 3);
    CHECK_TENSOR(nb_npz_find(f, "b"), S(2, 1), 0, -5, 7);
    nb_npz_free(f);
}

static void check_bad_zip(const member *m, int n, nb_status code, const char *needle)
{
    nb_npz *f;
    nb_status st = load_zip(m, n, false, &f);
    if (st != code || !strstr(nb_last_error(), needle) || !strstr(nb_last_error(), path_of("made.npz")) || f) {
        fprintf(stderr, "  got %s \"%s\", wanted %s containing \"%s\"\n", nb_status_name(st), nb_last_error(),
                nb_status_name(code), needle);
        test_failures_in_current++;
    }
    nb_npz_free(f);
}

static void test_npz_layouts(void)
{
    make_members();
    /* numpy.savez: zip64 local headers (force_zip64); numpy.savez_compressed:
     * the same, deflated; sizes and offsets through zip64 extras in the
     * central directory, and a zip64 end record. */
    check_archive(
        (member[]){{.name = "a.npy", .data = npy_a, .len = len_a}, {.name = "b.npy", .data = npy_b, .len = len_b}}, 2,
        false);
    check_archive((member[]){{.name = "a.npy", .data = npy_a, .len = len_a, .zip64_local = true},
                             {.name = "b.npy", .data = npy_b, .len = len_b, .zip64_local = true}},
                  2, false);
    check_archive((member[]){{.name = "a.npy", .data = npy_a, .len = len_a, .deflate = true, .zip64_local = true},
                             {.name = "b.npy", .data = npy_b, .len = len_b, .deflate = true, .zip64_local = true}},
                  2, false);
    check_archive(
        (member[]){
            {.name = "a.npy", .data = npy_a, .len = len_a, .deflate = true, .zip64_local = true, .zip64_central = true},
            {.name = "b.npy", .data = npy_b, .len = len_b, .zip64_central = true}},
        2, true);
}

static void test_npz_errors(void)
{
    make_members();
    member a = {.name = "a.npy", .data = npy_a, .len = len_a}, b = {.name = "b.npy", .data = npy_b, .len = len_b};
    member bad_crc = a, bad_crc_deflated = a, dup = b, txt = a, short_usize = a,
           bomb = {.name = "x.npy", .data = npy_bomb, .len = len_bomb, .deflate = true};
    bad_crc.crc_xor = bad_crc_deflated.crc_xor = 1;
    bad_crc_deflated.deflate = true;
    dup.name = "a.npy";
    txt.name = "a.txt";
    short_usize.deflate = true;
    short_usize.usize_delta = -1;
    check_bad_zip((member[]){a, bad_crc}, 2, NB_ERR_FORMAT, "two members are named 'a.npy'");
    check_bad_zip((member[]){bad_crc}, 1, NB_ERR_FORMAT, "member 'a.npy' fails its CRC-32 check");
    check_bad_zip((member[]){bad_crc_deflated}, 1, NB_ERR_FORMAT, "fails its CRC-32 check");
    check_bad_zip((member[]){a, dup}, 2, NB_ERR_FORMAT, "two members are named 'a.npy'");
    check_bad_zip((member[]){txt}, 1, NB_ERR_UNSUPPORTED, "member 'a.txt' is not a .npy array");
    /* The .npy header implies fewer bytes than the member holds: nothing past
     * them is inflated. */
    bomb.usize_delta = -3000;
    check_bad_zip((member[]){bomb}, 1, NB_ERR_FORMAT, "holds more than the 132 bytes it declares");
    check_bad_zip((member[]){short_usize}, 1, NB_ERR_FORMAT, "but 11 follow the header");
    bomb.usize_delta = 0;
    check_bad_zip((member[]){bomb}, 1, NB_ERR_FORMAT, "member 'x.npy': the shape [1] needs 4 bytes of data, but 3004");
    bomb.deflate = false;
    bomb.usize_delta = 10;
    check_bad_zip((member[]){bomb}, 1, NB_ERR_FORMAT,
                  "stored member 'x.npy' has 3132 bytes in the archive but declares 3142");

    /* Damage by hand: offsets, signatures, the deflate stream. */
    static unsigned char buf[4096];
    const char *path = path_of("hand.npz");
    nb_npz *f;
    size_t n = make_zip(buf, (member[]){a, b}, 2, false);
    size_t cd = n - 22 - 2 * (46 + 5); /* the central directory */
    unsigned char copy[4096];
#define DAMAGED(edit, code, needle)                                         \
    do {                                                                    \
        memcpy(copy, buf, n);                                               \
        edit;                                                               \
        write_file(path, copy, n);                                         \
        CHECK_ERR(nb_npz_load(&f, path), code, needle);                     \
        CHECK_ERR(nb_npz_load(&f, path), code, path);                       \
    } while (0)
    DAMAGED(p32(copy + cd + 46 + 5 + 42, 100000), NB_ERR_FORMAT, "local header at 100000, not before the central");
    DAMAGED(p32(copy + n - 6, 5), NB_ERR_FORMAT, "does not end where the end record begins");
    DAMAGED(p32(copy + n - 10, 99), NB_ERR_FORMAT, "does not end where the end record begins");
    DAMAGED((p16(copy + n - 14, 99), p16(copy + n - 12, 99)), NB_ERR_FORMAT, "counts 99 members");
    DAMAGED((p16(copy + n - 14, 1), p16(copy + n - 12, 1)), NB_ERR_FORMAT, "bytes after its 1 entries");
    DAMAGED(copy[n - 22] = 'Q', NB_ERR_FORMAT, "no end of central directory record");
    DAMAGED(copy[cd] = 'Q', NB_ERR_FORMAT, "no member header at offset 0");
    DAMAGED(copy[0] = 'Q', NB_ERR_FORMAT, "member 'a.npy' has no local header at offset 0");
    DAMAGED(copy[30] = 'b', NB_ERR_FORMAT, "another name in its local header");
    DAMAGED(p16(copy + 8, 8), NB_ERR_FORMAT, "method 8 in its local header but 0");
    DAMAGED(p16(copy + cd + 10, 12), NB_ERR_UNSUPPORTED, "compression method 12");
    DAMAGED(p16(copy + cd + 8, 1), NB_ERR_UNSUPPORTED, "is encrypted");
    DAMAGED(p32(copy + cd + 20, 5000), NB_ERR_FORMAT, "stored member 'a.npy' has 5000 bytes");
    DAMAGED((p32(copy + cd + 20, 5000), p32(copy + cd + 24, 5000)), NB_ERR_FORMAT, "runs into the central directory");
    DAMAGED(p32(copy + cd + 46 + 5 + 42, 10), NB_ERR_FORMAT, "no local header at offset 10");
    DAMAGED(p16(copy + cd + 28, 500), NB_ERR_FORMAT, "runs past its end");
    DAMAGED(p16(copy + n - 18, 1), NB_ERR_UNSUPPORTED, "several disks");
    DAMAGED((p16(copy + n - 12, 0xffff), p16(copy + n - 14, 0xffff)), NB_ERR_FORMAT,
            "zip64 end record that is not there");
    /* Two members pointing at the same bytes. */
    DAMAGED((p32(copy + cd + 46 + 5 + 42, 0), memcpy(copy + cd + 46 + 5 + 46, "a", 1)), NB_ERR_FORMAT, "overlap");
    /* A damaged deflate stream. */
    member ad = a;
    ad.deflate = true;
    n = make_zip(buf, &ad, 1, false);
    DAMAGED(copy[30 + 5] ^= 0xff, NB_ERR_FORMAT, "member 'a.npy'");
    DAMAGED(memset(copy + 30 + 5, 0xff, 8), NB_ERR_FORMAT, "deflated data of member 'a.npy' is damaged");
    /* A member that declares more than deflate can make of its bytes. */
    DAMAGED(p32(copy + n - 22 - 46 - 5 + 24, 4000000), NB_ERR_FORMAT, "more than deflate can give");
#undef DAMAGED
    write_file(path, "PK", 2);
    CHECK_ERR(nb_npz_load(&f, path), NB_ERR_FORMAT, "too short for a zip archive");
    CHECK_ERR(nb_npz_load(&f, path_of("nothing.npz")), NB_ERR_NOT_FOUND, "nothing.npz");
}

static void test_npz_damaged(void)
{
    nb_tensor *t[] = {T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), T(NB_BOOL, S(2), 1, 0), tscalar(NB_I64, 9)};
    const char *names[] = {"w", "mask", "step"};
    for (unsigned flags = 0; flags <= NB_NPZ_COMPRESSED; flags++) {
        const char *good = path_of("good.npz"), *bad = path_of("damaged.npz");
        REQUIRE_OK(nb_npz_save(good, 3, names, t, flags));
        size_t n;
        unsigned char *bytes = read_all(good, &n);
        int wrong = 0, unnamed = 0, failed = 0, tried = 0;
        for (size_t len = 0; len < n; len++) {
            write_file(bad, bytes, len);
            nb_npz *f = NULL;
            nb_status st = nb_npz_load(&f, bad);
            if ((st != NB_ERR_FORMAT || !strstr(nb_last_error(), bad) || f) && !wrong++)
                fprintf(stderr, "  prefix of %zu bytes: %s %s\n", len, nb_status_name(st), nb_last_error());
            nb_npz_free(f);
        }
        CHECK(wrong == 0);
        /* Every byte, flipped: a clean load or a clean error. */
        unsigned char *copy = malloc(n);
        for (size_t pos = 0; pos < n; pos++)
            for (unsigned mask = 0x01; mask <= 0x80; mask <<= 3) {
                memcpy(copy, bytes, n);
                copy[pos] ^= (unsigned char)mask;
                write_file(bad, copy, n);
                nb_npz *f = NULL;
                nb_status st = nb_npz_load(&f, bad);
                tried++;
                if (st) {
                    failed++;
                    if ((!strstr(nb_last_error(), bad) || f) && !unnamed++) fprintf(stderr, "  %s\n", nb_last_error());
                }
                nb_npz_free(f);
            }
        CHECK(unnamed == 0);
        CHECK(failed > tried / 2);
        free(copy);
        free(bytes);
    }
    release_all(t[0], t[1], t[2], NULL);
}

/* ---- a program's state ------------------------------------------------------------ */

static void test_npz_state(void)
{
    nb_program *p, *q;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_program_new(&q));
    nb_var *v;
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(p), "fc.w", NB_F32, 2, S(2, 3), &v));
    v->persistable = true;
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(p), "step", NB_I64, 0, NULL, &v));
    v->persistable = true;
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(p), "x", NB_F32, 2, S(-1, 3), &v));
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(q), "fc.w", NB_F64, 2, S(2, 3), &v));
    v->persistable = true;
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(q), "gone", NB_F32, 1, S(2), &v));
    v->persistable = true;
    nb_scope *scope, *fresh, *held;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    REQUIRE_OK(nb_scope_new(&held, NULL));
    nb_tensor *w = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *step = tscalar(NB_I64, 42),
              *hw = T(NB_F32, S(2, 3), 0, 0, 0, 0, 0, 0);
    const char *path = path_of("state.npz");
    CHECK_ERR(nb_npz_save_state(path, p, scope, 0), NB_ERR_NOT_FOUND, "npz save");
    CHECK_OK(nb_scope_set(scope, "fc.w", w));
    CHECK_OK(nb_scope_set(scope, "step", step));
    for (unsigned flags = 0; flags <= NB_NPZ_COMPRESSED; flags++) {
        REQUIRE_OK(nb_npz_save_state(path, p, scope, flags));
        nb_npz *f;
        REQUIRE_OK(nb_npz_load(&f, path));
        CHECK(nb_npz_count(f) == 2 && !nb_npz_find(f, "x")); /* persistable vars only */
        nb_npz_free(f);
        REQUIRE_OK(nb_npz_load_state(path, p, fresh));
        CHECK_TENSOR(nb_scope_find(fresh, "fc.w"), S(2, 3), 0, 1, 2, 3, 4, 5, 6);
        CHECK_SCALAR(nb_scope_find(fresh, "step"), 42, 0);
        CHECK_OK(nb_scope_set(held, "fc.w", hw));
        REQUIRE_OK(nb_npz_load_state(path, p, held));
        CHECK(nb_scope_find(held, "fc.w") == hw); /* copied into the tensor held */
        CHECK_TENSOR(hw, S(2, 3), 0, 1, 2, 3, 4, 5, 6);
    }
    CHECK_ERR(nb_npz_load_state(path, q, held), NB_ERR_FORMAT, "npz '");
    CHECK_ERR(nb_npz_load_state(path, q, held), NB_ERR_FORMAT,
              "(2 mismatches, the scope is unchanged): var 'fc.w': expected float64 [2, 3], found float32 [2, 3]; "
              "var 'gone': expected float32 [2], missing in the file");
    CHECK(nb_scope_find(held, "gone") == NULL);
    release_all(w, step, hw, NULL);
    nb_scope_free(scope);
    nb_scope_free(fresh);
    nb_scope_free(held);
    nb_program_free(p);
    nb_program_free(q);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/nabla-test-npy-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_npy_round_trip);
    RUN(test_npy_numpy_bytes);
    RUN(test_npy_layouts);
    RUN(test_npy_converted_dtypes);
    RUN(test_npy_errors);
    RUN(test_npy_damaged);
    RUN(test_npz_round_trip);
    RUN(test_npz_layouts);
    RUN(test_npz_errors);
    RUN(test_npz_damaged);
    RUN(test_npz_state);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return test_report();
}
