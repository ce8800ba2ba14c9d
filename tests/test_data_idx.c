/* IDX files: round trips, plain and gzipped, and every malformed file the
 * loader must refuse with a message saying what is wrong. */
#include "data/data_internal.h"
#include "data_test_util.h"
#include "nabla/data.h"
#include "test.h"

static char tmp[4096];

static const char *at(const char *name)
{
    static char p[4][4200];
    static int i;
    i = (i + 1) % 4;
    if (snprintf(p[i], sizeof p[i], "%s/%s", tmp, name) >= (int)sizeof p[i]) exit(2);
    return p[i];
}

static void test_u8_round_trip_plain_and_gz(void)
{
    uint8_t px[2 * 3 * 4];
    for (int i = 0; i < 24; i++) px[i] = (uint8_t)(i * 11);
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = at(gz ? "img.idx.gz" : "img.idx");
        write_idx(p, gz, 0x08, 3, (uint32_t[]){2, 3, 4}, px, sizeof px, 0);
        /* direct_max 0 forces the growing buffer; the default reads straight into the tensor */
        for (int direct = 0; direct <= 1; direct++) {
            nb_tensor *t = NULL;
            CHECK_OK(nb_idx_load_with(p, &t, direct ? NB_IDX_DIRECT_MAX : 0));
            if (!t) continue;
            CHECK(t->dtype == NB_U8);
            CHECK(nb_shape_equal(t->ndim, t->shape, 3, S(2, 3, 4)));
            CHECK(!memcmp(nb_tensor_data(t), px, sizeof px));
            nb_tensor_release(t);
        }
    }
    nb_tensor *t = NULL;
    write_idx(at("lab.idx"), 0, 0x08, 1, (uint32_t[]){5}, (uint8_t[]){3, 1, 4, 1, 5}, 5, 0);
    CHECK_OK(nb_idx_load(&t, at("lab.idx")));
    CHECK_TENSOR(t, S(5), 0, 3, 1, 4, 1, 5);
    nb_tensor_release(t);
}

static void test_zero_rows(void)
{
    nb_tensor *t = NULL;
    write_idx(at("empty.idx.gz"), 1, 0x08, 3, (uint32_t[]){0, 28, 28}, NULL, 0, 0);
    CHECK_OK(nb_idx_load(&t, at("empty.idx.gz")));
    if (t) CHECK(nb_shape_equal(t->ndim, t->shape, 3, S(0, 28, 28)));
    nb_tensor_release(t);
}

/* Wider types are stored big-endian. */
static void test_wide_types_are_big_endian(void)
{
    const uint8_t i32[] = {0x00, 0x00, 0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE};
    const uint8_t f32[] = {0x3F, 0xC0, 0x00, 0x00, 0xC1, 0x20, 0x00, 0x00}; /* 1.5, -10 */
    const uint8_t f64[] = {0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18}; /* pi */
    nb_tensor *t = NULL;
    write_idx(at("i32.idx"), 1, 0x0C, 1, (uint32_t[]){2}, i32, sizeof i32, 0);
    CHECK_OK(nb_idx_load(&t, at("i32.idx")));
    if (t) CHECK(t->dtype == NB_I32);
    CHECK_TENSOR(t, S(2), 0, 258, -2);
    nb_tensor_release(t);
    write_idx(at("f32.idx"), 0, 0x0D, 2, (uint32_t[]){1, 2}, f32, sizeof f32, 0);
    CHECK_OK(nb_idx_load(&t, at("f32.idx")));
    if (t) CHECK(t->dtype == NB_F32);
    CHECK_TENSOR(t, S(1, 2), 0, 1.5, -10);
    nb_tensor_release(t);
    write_idx(at("f64.idx"), 0, 0x0E, 1, (uint32_t[]){1}, f64, sizeof f64, 0);
    CHECK_OK(nb_idx_load(&t, at("f64.idx")));
    if (t) CHECK(t->dtype == NB_F64);
    CHECK_TENSOR(t, S(1), 0, 3.141592653589793);
    nb_tensor_release(t);
}

static void test_bad_magic(void)
{
    nb_tensor *t = NULL;
    uint8_t junk[16] = {0x89, 'P', 'N', 'G', 1, 2, 3};
    write_bytes(at("png.idx"), 0, junk, sizeof junk);
    CHECK_ERR(nb_idx_load(&t, at("png.idx")), NB_ERR_FORMAT, "bad magic number 0x89504e47");
    CHECK(t == NULL);
    write_bytes(at("png.idx.gz"), 1, junk, sizeof junk);
    CHECK_ERR(nb_idx_load(&t, at("png.idx.gz")), NB_ERR_FORMAT, "png.idx.gz: bad magic");
    write_bytes(at("short.idx"), 0, "\0\0", 2);
    CHECK_ERR(nb_idx_load(&t, at("short.idx")), NB_ERR_FORMAT, "2 bytes, too short for an IDX header");
    write_bytes(at("nothing.idx"), 0, "", 0);
    CHECK_ERR(nb_idx_load(&t, at("nothing.idx")), NB_ERR_FORMAT, "0 bytes, too short");
}

static void test_wrong_type(void)
{
    nb_tensor *t = NULL;
    write_idx(at("i8.idx"), 0, 0x09, 1, (uint32_t[]){2}, "ab", 2, 0);
    CHECK_ERR(nb_idx_load(&t, at("i8.idx")), NB_ERR_UNSUPPORTED, "element type 0x09 (signed byte) is not supported");
    write_idx(at("t07.idx"), 1, 0x07, 1, (uint32_t[]){2}, "ab", 2, 0);
    CHECK_ERR(nb_idx_load(&t, at("t07.idx")), NB_ERR_FORMAT, "unknown element type 0x07");
    CHECK(t == NULL);
}

static void test_bad_ndims(void)
{
    nb_tensor *t = NULL;
    write_idx(at("nd0.idx"), 0, 0x08, 0, NULL, NULL, 0, 0);
    CHECK_ERR(nb_idx_load(&t, at("nd0.idx")), NB_ERR_FORMAT, "0 dimensions in the magic number 0x00000800");
    uint32_t ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    write_idx(at("nd9.idx.gz"), 1, 0x08, 9, ones, "x", 1, 0);
    CHECK_ERR(nb_idx_load(&t, at("nd9.idx.gz")), NB_ERR_FORMAT, "9 dimensions in the magic number 0x00000809 (1 to 8");
    /* the sizes themselves cut short */
    write_bytes(at("hdr.idx"), 0, (uint8_t[]){0, 0, 8, 3, 0, 0, 0, 2, 0, 0}, 10);
    CHECK_ERR(nb_idx_load(&t, at("hdr.idx")), NB_ERR_FORMAT,
              "truncated header: 3 dimensions need 12 bytes of sizes, found 6");
    CHECK(t == NULL);
}

static void test_truncated_payload(void)
{
    nb_tensor *t = NULL;
    uint8_t px[12] = {0};
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = at(gz ? "cut.idx.gz" : "cut.idx");
        write_idx(p, gz, 0x08, 2, (uint32_t[]){3, 4}, px, 10, 0);
        CHECK_ERR(nb_idx_load(&t, p), NB_ERR_FORMAT,
                  "truncated: the header's sizes [3, 4] need 12 payload bytes, the file has 10");
        CHECK_ERR(nb_idx_load_with(p, &t, 0), NB_ERR_FORMAT, "need 12 payload bytes, the file has 10");
        CHECK(strstr(nb_last_error(), p) != NULL); /* names the file */
        CHECK(t == NULL);
    }
}

static void test_trailing_bytes(void)
{
    nb_tensor *t = NULL;
    uint8_t px[12] = {0};
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = at(gz ? "long.idx.gz" : "long.idx");
        write_idx(p, gz, 0x08, 2, (uint32_t[]){3, 4}, px, 12, 3);
        CHECK_ERR(nb_idx_load(&t, p), NB_ERR_FORMAT,
                  "3 bytes after the 12 payload bytes that the header's sizes [3, 4] describe");
        CHECK_ERR(nb_idx_load_with(p, &t, 0), NB_ERR_FORMAT, "(trailing data: 12 expected, 15 found)");
        CHECK(t == NULL);
    }
}

/* A gzip file whose deflate data, CRC or length are damaged, or which is cut
 * in the middle of its stream. */
static void test_corrupt_gzip(void)
{
    uint8_t px[4000];
    for (int i = 0; i < 4000; i++) px[i] = (uint8_t)(i * 7 % 251);
    write_idx(at("good.idx.gz"), 1, 0x08, 2, (uint32_t[]){40, 100}, px, sizeof px, 0);
    size_t n;
    unsigned char *good = read_bytes(at("good.idx.gz"), &n), *bad = malloc(n);
    if (!good || !bad || n < 40) {
        CHECK(!"could not read back the gzip file");
        free(good);
        free(bad);
        return;
    }
    nb_tensor *t = NULL;
    memcpy(bad, good, n);
    bad[n - 6] ^= 0xFF; /* in the CRC-32 */
    write_bytes(at("crc.idx.gz"), 0, bad, n);
    CHECK_ERR(nb_idx_load(&t, at("crc.idx.gz")), NB_ERR_FORMAT, "crc.idx.gz: corrupt gzip data: incorrect data check");
    memcpy(bad, good, n);
    bad[n - 2] ^= 0xFF; /* in the length */
    write_bytes(at("len.idx.gz"), 0, bad, n);
    CHECK_ERR(nb_idx_load(&t, at("len.idx.gz")), NB_ERR_FORMAT, "incorrect length check");
    memcpy(bad, good, n);
    memset(bad + 12, 0xFF, 24); /* in the deflate data */
    write_bytes(at("bits.idx.gz"), 0, bad, n);
    CHECK_ERR(nb_idx_load(&t, at("bits.idx.gz")), NB_ERR_FORMAT, "bits.idx.gz: corrupt gzip data");
    write_bytes(at("half.idx.gz"), 0, good, n / 2);
    CHECK_ERR(nb_idx_load(&t, at("half.idx.gz")), NB_ERR_FORMAT, "(its gzip stream is cut short)");
    CHECK(strstr(nb_last_error(), "need 4000 payload bytes"));
    write_bytes(at("tail.idx.gz"), 0, good, n - 3); /* all the data, part of the trailer */
    CHECK_ERR(nb_idx_load(&t, at("tail.idx.gz")), NB_ERR_FORMAT, "the gzip stream is cut short after the payload");
    CHECK(t == NULL);
    free(good);
    free(bad);
}

/* A header claiming 2^40 bytes over a tiny file: refused without allocating
 * it (under AddressSanitizer an allocation that size would fail loudly). */
static void test_lying_header(void)
{
    nb_tensor *t = NULL;
    uint32_t dims[4] = {1024, 1024, 1024, 1024};
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = at(gz ? "huge.idx.gz" : "huge.idx");
        write_idx(p, gz, 0x08, 4, dims, "0123456789", 10, 0);
        CHECK_ERR(nb_idx_load(&t, p), NB_ERR_FORMAT, "need 1099511627776 payload bytes, the file has 10");
        CHECK(t == NULL);
    }
    uint32_t big[8] = {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF};
    write_idx(at("overflow.idx"), 0, 0x0E, 8, big, "x", 1, 0);
    CHECK_ERR(nb_idx_load(&t, at("overflow.idx")), NB_ERR_FORMAT, "describe more data than nabla can hold");
    /* No element at all, but dims whose strides overflow: refused, not
     * undefined arithmetic. */
    uint32_t empty_huge[4] = {0, 0x80000000u, 0x80000000u, 0x80000000u};
    write_idx(at("empty_huge.idx"), 0, 0x08, 4, empty_huge, "", 0, 0);
    CHECK(nb_idx_load(&t, at("empty_huge.idx")) != NB_OK && t == NULL);
    CHECK(strstr(nb_last_error(), "too large") || strstr(nb_last_error(), "more data than nabla can hold"));
}

/* Found by fuzz/fuzz_idx: a 0 size made the payload empty and hid the other
 * sizes, whose product (what the tensor's strides multiply) overflowed:
 * undefined behaviour in nb_tensor_new. The file is the fuzzer's input. */
static void test_zero_size_hides_overflow(void)
{
    static const uint8_t input[] = {0x00, 0x00, 0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
                                    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x95, 0x41, 0xba};
    FILE *f = fopen(at("zero-overflow.idx"), "wb");
    REQUIRE_OK(f && fwrite(input, 1, sizeof input, f) == sizeof input && !fclose(f) ? NB_OK : NB_ERR_IO);
    nb_tensor *t = NULL;
    CHECK_ERR(nb_idx_load(&t, at("zero-overflow.idx")), NB_ERR_FORMAT,
              "sizes [0, 16777216, 16777216, 43336122] describe more data than nabla can hold");
    CHECK(t == NULL);
    /* Large sizes beside a 0 are fine while their product fits. */
    write_idx(at("zero-wide.idx"), 0, 0x08, 3, (uint32_t[]){0, 1u << 20, 1u << 20}, NULL, 0, 0);
    CHECK_OK(nb_idx_load(&t, at("zero-wide.idx")));
    if (t) CHECK(nb_tensor_numel(t) == 0);
    nb_tensor_release(t);
}

static void test_missing_and_odd_paths(void)
{
    nb_tensor *t = NULL;
    CHECK_ERR(nb_idx_load(&t, at("no-such-file")), NB_ERR_NOT_FOUND, "no-such-file': cannot open: No such file");
    CHECK_ERR(nb_idx_load(&t, tmp), NB_ERR_IO, "is not a regular file");
    CHECK_ERR(nb_idx_load(&t, NULL), NB_ERR_ARG, "idx: empty file path");
    CHECK_ERR(nb_idx_load(NULL, at("x")), NB_ERR_ARG, "out is NULL");
}

int main(void)
{
    make_temp_dir(tmp, sizeof tmp);
    RUN(test_u8_round_trip_plain_and_gz);
    RUN(test_zero_rows);
    RUN(test_wide_types_are_big_endian);
    RUN(test_bad_magic);
    RUN(test_wrong_type);
    RUN(test_bad_ndims);
    RUN(test_truncated_payload);
    RUN(test_trailing_bytes);
    RUN(test_corrupt_gzip);
    RUN(test_lying_header);
    RUN(test_zero_size_hides_overflow);
    RUN(test_missing_and_odd_paths);
    remove_tree(tmp);
    return test_report();
}
