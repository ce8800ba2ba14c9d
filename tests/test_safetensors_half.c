/* 16-bit floats: the f16 and bf16 conversions (core/half.h) against a slow
 * reference written here from the formats' definitions, exhaustively where
 * that is cheap (every 16-bit pattern), at every halfway point and around it
 * otherwise; and F16/BF16 tensors in safetensors files and checkpoints: files
 * laid out by hand as the reference writer lays them out load with the right
 * values, saving as F16/BF16 gives those exact bytes, malformed half tensors
 * are refused. With --convert DIR it only runs the conversions on the values
 * tests/test_safetensors_half_torch.sh writes there, for PyTorch to judge. */
#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "core/half.h"
#include "nabla/checkpoint.h"
#include "nabla/safetensors.h"
#include "file_test_util.h"
#include "test.h"

static bool file_equals(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char buf[1024];
    size_t m = fread(buf, 1, sizeof buf, f);
    fclose(f);
    bool same = m == n && !memcmp(buf, bytes, n);
    if (!same) {
        fprintf(stderr, "  %s: %zu bytes, expected %zu\n", path, m, n);
        for (size_t i = 0; i < m && i < n; i++)
            if (buf[i] != ((const unsigned char *)bytes)[i]) {
                fprintf(stderr, "  first difference at byte %zu: %02x, expected %02x\n", i, buf[i],
                        ((const unsigned char *)bytes)[i]);
                break;
            }
    }
    return same;
}

static uint32_t bits32(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float from_bits32(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* ---- the reference: the formats by their definitions ---------------------- */

/* A 16-bit format: `frac` fraction bits, exponent bias `bias`. */
typedef struct format {
    const char *name;
    int frac, bias;
    uint16_t quiet;        /* the quiet-NaN bit */
    double values[0x7f80]; /* every non-negative finite value, by bit pattern */
    int n;                 /* how many: the largest finite pattern + 1 */
} format;

static format f16 = {"f16", 10, 15, 0x200, {0}, 0}, bf16 = {"bf16", 7, 127, 0x40, {0}, 0};

/* The value of a non-negative pattern: (-1)^s 2^(e-bias) 1.m, or, with e = 0,
 * 2^(1-bias) 0.m. */
static double decode(const format *fm, unsigned bits)
{
    unsigned e = bits >> fm->frac, m = bits & ((1u << fm->frac) - 1);
    if (e == 0) return ldexp((double)m, 1 - fm->bias - fm->frac);
    return ldexp((double)((1u << fm->frac) | m), (int)e - fm->bias - fm->frac);
}

static void build_table(format *fm)
{
    unsigned inf = (unsigned)(2 * fm->bias + 1) << fm->frac;
    fm->n = (int)inf;
    for (unsigned b = 0; b < inf; b++) fm->values[b] = decode(fm, b);
}

/* The pattern nearest to x (not NaN), ties to the even pattern; past the
 * largest finite value by half an ulp or more, infinity. The midpoints of
 * neighbouring values are exact doubles, so comparing with them is exact. */
static uint16_t ref_round(const format *fm, double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0; /* bit 15 in both formats */
    double a = fabs(x);
    int top = fm->n - 1;
    double last_half_ulp = (fm->values[top] - fm->values[top - 1]) / 2;
    if (a >= fm->values[top] + last_half_ulp) return (uint16_t)(sign | fm->n); /* infinity */
    int lo = 0, hi = top;                                                      /* largest lo with values[lo] <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (fm->values[mid] <= a) lo = mid;
        else hi = mid - 1;
    }
    if (lo == top || fm->values[lo] == a) return (uint16_t)(sign | lo);
    double midpoint = (fm->values[lo] + fm->values[lo + 1]) / 2;
    int r = a < midpoint ? lo : a > midpoint ? lo + 1 : (lo % 2 ? lo + 1 : lo);
    return (uint16_t)(sign | r);
}

/* Compares the conversions of x with the reference; counts and shows the
 * first few differences. */
static int mismatches;

static void check_round(const char *what, double x, uint16_t got, uint16_t want)
{
    if (got == want) return;
    if (mismatches++ < 8) fprintf(stderr, "  %s(%.17g = %a) = 0x%04x, reference 0x%04x\n", what, x, x, got, want);
    test_failures_in_current++;
}

static void check_f32(float x)
{
    check_round("nb_f32_to_f16", x, nb_f32_to_f16(x), ref_round(&f16, x));
    check_round("nb_f32_to_bf16", x, nb_f32_to_bf16(x), ref_round(&bf16, x));
}

static void check_f64(double x)
{
    check_round("nb_f64_to_f16", x, nb_f64_to_f16(x), ref_round(&f16, x));
    check_round("nb_f64_to_bf16", x, nb_f64_to_bf16(x), ref_round(&bf16, x));
}

/* ---- conversions ----------------------------------------------------------- */

/* Every 16-bit pattern widens to its value and narrows back to itself; NaNs
 * stay NaNs, with their payload and the quiet bit set. */
static void exhaustive(const format *fm, float (*widen)(uint16_t), uint16_t (*narrow32)(float),
                       uint16_t (*narrow64)(double))
{
    int wrong = 0;
    unsigned inf = (unsigned)fm->n;
    for (unsigned h = 0; h < 0x10000; h++) {
        float f = widen((uint16_t)h);
        unsigned mag = h & 0x7fff;
        bool ok;
        if (mag > inf) { /* NaN */
            uint16_t quiet = (uint16_t)(h | fm->quiet);
            ok = isnan(f) && !!signbit(f) == !!(h & 0x8000) && narrow32(f) == quiet && narrow64(f) == quiet &&
                (bits32(f) & 0x7fffff) >> (23 - fm->frac) == (h & ((1u << fm->frac) - 1));
        } else {
            double want = mag == inf ? INFINITY : fm->values[mag];
            if (h & 0x8000) want = -want;
            ok = (double)f == want && !!signbit(f) == !!(h & 0x8000) && narrow32(f) == h && narrow64(f) == h;
        }
        if (!ok && wrong++ < 5)
            fprintf(stderr, "  %s 0x%04x: widened to %a, narrowed back to 0x%04x / 0x%04x\n", fm->name, h, (double)f,
                    narrow32(f), narrow64(f));
    }
    CHECK(wrong == 0);
}

static void test_exhaustive(void)
{
    exhaustive(&f16, nb_f16_to_f32, nb_f32_to_f16, nb_f64_to_f16);
    exhaustive(&bf16, nb_bf16_to_f32, nb_f32_to_bf16, nb_f64_to_bf16);
}

/* Every halfway point between neighbouring values, and the floats and
 * doubles just either side of it, both signs. */
static void halfway_points(const format *fm)
{
    for (int k = 0; k + 1 < fm->n + 1; k++) {
        double lo = fm->values[k], hi = k + 1 < fm->n ? fm->values[k + 1] : 2 * fm->values[k] - fm->values[k - 1];
        double mid = (lo + hi) / 2; /* beyond the top: the overflow threshold */
        for (int s = 0; s < 2; s++) {
            double m = s ? -mid : mid;
            float mf = (float)m;
            check_f32(mf);
            check_f32(nextafterf(mf, INFINITY));
            check_f32(nextafterf(mf, -INFINITY));
            check_f64(m);
            check_f64(nextafter(m, INFINITY));
            check_f64(nextafter(m, -INFINITY));
        }
    }
}

static void test_rounding_against_reference(void)
{
    mismatches = 0;
    halfway_points(&f16);
    halfway_points(&bf16);
    /* Random floats over every exponent, and random doubles over the range
     * that matters (beyond it all are zeros or infinities). */
    uint64_t rng = 88172645463325252ULL;
    for (int i = 0; i < 1000000; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        float f = from_bits32((uint32_t)rng);
        if (!isnan(f)) check_f32(f);
        double d = ldexp((double)(rng >> 11) * 0x1p-53 + 1.0, (int)(rng % 300) - 160);
        check_f64(rng & (1ULL << 40) ? -d : d);
    }
    /* Special values. */
    const double specials[] = {0.0,           -0.0,    INFINITY, -INFINITY,    DBL_MAX, -DBL_MAX, DBL_MIN, DBL_TRUE_MIN,
                               -DBL_TRUE_MIN, FLT_MAX, FLT_MIN,  FLT_TRUE_MIN, 65504,   65519.99, 65520,   1e300};
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) {
        check_f64(specials[i]);
        if (fabs(specials[i]) <= FLT_MAX || isinf(specials[i])) check_f32((float)specials[i]);
    }
}

/* The cases by name: ties to even, overflow, the subnormal boundaries, and
 * rounding straight from a double (never twice). */
static void test_named_cases(void)
{
    /* f16: 1 + 2^-11 is halfway between 1 (even) and 1 + 2^-10 (odd). */
    CHECK(nb_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(nb_f32_to_f16(1.0f + 0x3p-11f) == 0x3c02);
    CHECK(nb_f32_to_f16(-1.0f - 0x1p-11f) == 0xbc00);
    CHECK(nb_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(nb_f32_to_f16(65519.996f) == 0x7bff);
    CHECK(nb_f32_to_f16(65520.0f) == 0x7c00); /* the halfway point to 2^16 ties to "even" infinity */
    CHECK(nb_f32_to_f16(-1e10f) == 0xfc00);
    CHECK(nb_f32_to_f16(0x1p-24f) == 0x0001); /* the smallest subnormal */
    CHECK(nb_f32_to_f16(0x1p-25f) == 0x0000); /* half of it: ties to zero */
    CHECK(nb_f32_to_f16(nextafterf(0x1p-25f, 1)) == 0x0001);
    CHECK(nb_f32_to_f16(0x3p-25f) == 0x0002);            /* 1.5 ulp: ties to 2 */
    CHECK(nb_f32_to_f16(0x1p-14f - 0x1p-25f) == 0x0400); /* the largest subnormal rounds up to the smallest normal */
    CHECK(nb_f32_to_f16(0x1p-14f - 0x1p-24f) == 0x03ff);
    CHECK(nb_f32_to_f16(-0.0f) == 0x8000 && nb_f32_to_f16(-1e-30f) == 0x8000 && nb_f32_to_f16(1e-30f) == 0);
    CHECK(nb_f16_to_f32(0x0001) == 0x1p-24f && nb_f16_to_f32(0x03ff) == 0x3ffp-24f);
    CHECK(nb_f16_to_f32(0x7bff) == 65504.0f && nb_f16_to_f32(0xfc00) == -INFINITY);
    /* bf16. */
    CHECK(nb_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
    CHECK(nb_f32_to_bf16(1.0f + 0x3p-8f) == 0x3f82);
    CHECK(nb_f32_to_bf16(FLT_MAX) == 0x7f80 && nb_f32_to_bf16(-FLT_MAX) == 0xff80);
    CHECK(nb_f32_to_bf16(0x1p-133f) == 0x0001 && nb_f32_to_bf16(0x1p-134f) == 0x0000);
    CHECK(nb_f32_to_bf16(FLT_TRUE_MIN) == 0x0000 && nb_f32_to_bf16(-FLT_TRUE_MIN) == 0x8000);
    CHECK(nb_bf16_to_f32(0x3f80) == 1.0f && nb_bf16_to_f32(0xc020) == -2.5f && nb_bf16_to_f32(0x0001) == 0x1p-133f);
    /* From double: just past a halfway point, the double rounds up; the same
     * value as a float is the halfway point itself, which ties to even. */
    double past = 1.0 + 0x1p-11 + 0x1p-40;
    CHECK(nb_f64_to_f16(past) == 0x3c01 && nb_f32_to_f16((float)past) == 0x3c00);
    past = 1.0 + 0x1p-8 + 0x1p-40;
    CHECK(nb_f64_to_bf16(past) == 0x3f81 && nb_f32_to_bf16((float)past) == 0x3f80);
    CHECK(nb_f64_to_f16(1e300) == 0x7c00 && nb_f64_to_bf16(-1e300) == 0xff80);
    CHECK(nb_f64_to_bf16(DBL_TRUE_MIN) == 0 && nb_f64_to_f16(-DBL_TRUE_MIN) == 0x8000);
    /* NaNs: the sign and the payload's top bits kept, the quiet bit set. */
    float snan = from_bits32(0x7fa00000); /* signalling, payload bit 21 */
    CHECK(nb_f32_to_f16(snan) == 0x7f00 && nb_f32_to_bf16(snan) == 0x7fe0);
    CHECK(nb_f32_to_f16(-NAN) == 0xfe00 && nb_f32_to_bf16(-NAN) == 0xffc0);
    CHECK(nb_f64_to_f16(NAN) == 0x7e00 && nb_f64_to_bf16(NAN) == 0x7fc0);
    CHECK(isnan(nb_f16_to_f32(0x7c01)) && isnan(nb_bf16_to_f32(0xff81)));
}

static void test_bulk(void)
{
    enum { N = 1000 };
    uint16_t h[N], out16[N], out16b[N];
    float f[N], back[N];
    double d[N];
    for (int i = 0; i < N; i++) {
        h[i] = (uint16_t)(i * 65.537);
        f[i] = (float)(i - 500) * 131.07f + 0.3f;
        d[i] = (double)f[i] + 0x1p-30;
    }
    nb_f16_to_f32_n(h, back, N);
    nb_f32_to_f16_n(f, out16, N);
    nb_f64_to_f16_n(d, out16b, N);
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        float w = nb_f16_to_f32(h[i]);
        wrong +=
            !(bits32(back[i]) == bits32(w)) + (out16[i] != nb_f32_to_f16(f[i])) + (out16b[i] != nb_f64_to_f16(d[i]));
    }
    nb_bf16_to_f32_n(h, back, N);
    nb_f32_to_bf16_n(f, out16, N);
    nb_f64_to_bf16_n(d, out16b, N);
    for (int i = 0; i < N; i++)
        wrong += (bits32(back[i]) != bits32(nb_bf16_to_f32(h[i]))) + (out16[i] != nb_f32_to_bf16(f[i])) +
            (out16b[i] != nb_f64_to_bf16(d[i]));
    CHECK(wrong == 0);
    nb_f16_to_f32_n(h, back, 0); /* n = 0 touches nothing */
}

/* ---- files ------------------------------------------------------------------ */

/* As the reference writer lays it out: F32 first, then BF16, then F16 (the
 * crate's dtype order, descending), metadata first. N = 200 = 0xc8 (197
 * bytes of JSON, 3 spaces). */
static const unsigned char half_file[] = "\xc8\0\0\0\0\0\0\0"
                                         "{\"__metadata__\":{\"format\":\"pt\"},"
                                         "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                         "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[4,10]},"
                                         "\"h\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[10,18]}}   "
                                         "\x00\x00\x00\x3f"                  /* w = 0.5 */
                                         "\x80\x3f\x20\xc0\x01\x00"          /* b = 1, -2.5, 2^-133 */
                                         "\x00\x3c\x00\xc0\xff\x7b\x01\x00"; /* h = 1, -2, 65504, 2^-24 */

static void test_load_reference_layout(void)
{
    const char *path = path_of("half.safetensors");
    write_file(path, half_file, sizeof half_file - 1);
    nb_safetensors *f;
    REQUIRE_OK(nb_safetensors_load(&f, path));
    CHECK(nb_safetensors_count(f) == 3);
    CHECK_STR(nb_safetensors_meta(f, "format"), "pt");
    CHECK_STR(nb_safetensors_name(f, 1), "b");
    CHECK_STR(nb_safetensors_stored_dtype(f, 0), "F32");
    CHECK_STR(nb_safetensors_stored_dtype(f, 1), "BF16");
    CHECK_STR(nb_safetensors_stored_dtype(f, 2), "F16");
    CHECK(nb_safetensors_stored_dtype(f, 3) == NULL && nb_safetensors_stored_dtype(f, -1) == NULL &&
          nb_safetensors_stored_dtype(NULL, 0) == NULL);
    nb_tensor *b = nb_safetensors_find(f, "b"), *h = nb_safetensors_find(f, "h");
    CHECK(b && b->dtype == NB_F32 && h && h->dtype == NB_F32);
    CHECK_TENSOR(nb_safetensors_find(f, "w"), S(1), 0, 0.5);
    CHECK_TENSOR(b, S(3), 0, 1, -2.5, 0x1p-133);
    CHECK_TENSOR(h, S(2, 2), 0, 1, -2, 65504, 0x1p-24);
    if (b) CHECK(((const float *)nb_tensor_data(b))[2] == 0x1p-133f); /* exactly, not within a tolerance */
    nb_safetensors_free(f);
    /* Every proper prefix is malformed, cut inside the 16-bit data too. */
    int wrong = 0;
    for (size_t len = 0; len + 1 < sizeof half_file; len++) {
        write_file(path, half_file, len);
        nb_status st = nb_safetensors_load(&f, path);
        if (st != NB_ERR_FORMAT || f) wrong++;
        if (!st) nb_safetensors_free(f);
    }
    CHECK(wrong == 0);
}

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

static void test_malformed_half(void)
{
    static const unsigned char d[16] = {0};
    const char *path = path_of("bad.safetensors");
    nb_safetensors *f;
    make_file(path, "{\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,4]}}", d, 4);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT,
              "tensor 'a' is F16 [3], 6 bytes, but its data_offsets [0, 4] span 4");
    make_file(path, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT,
              "tensor 'a' is BF16 [2], 4 bytes, but its data_offsets [0, 8] span 8");
    make_file(path, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,1]}}", d, 1);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "BF16 [1], 2 bytes");
    make_file(path, "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", d, 6);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "2 bytes after the data of the last tensor");
    CHECK(strstr(nb_last_error(), path) != NULL);
    /* The other 8- and 16-bit dtypes of the format stay refused, by name. */
    make_file(path, "{\"a\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[0,2]}}", d, 2);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_UNSUPPORTED, "tensor 'a' has dtype U16");
    make_file(path, "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", d, 1);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_UNSUPPORTED, "dtype F8_E4M3");
    make_file(path, "{\"a\":{\"dtype\":\"f16\",\"shape\":[1],\"data_offsets\":[0,2]}}", d, 2);
    CHECK_ERR(nb_safetensors_load(&f, path), NB_ERR_FORMAT, "unknown dtype 'f16'");
    /* An empty F16 tensor is fine. */
    make_file(path, "{\"a\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[0,0]}}", d, 0);
    REQUIRE_OK(nb_safetensors_load(&f, path));
    CHECK(nb_safetensors_tensor(f, 0)->dtype == NB_F32 && nb_tensor_numel(nb_safetensors_tensor(f, 0)) == 0);
    nb_safetensors_free(f);
}

/* Saving as F16: the F32 and F64 tensors narrowed, the I32 one as it is;
 * I32 first, then the F16 tensors by name. N = 168 = 0xa8. */
static const unsigned char f16_file[] =
    "\xa8\0\0\0\0\0\0\0"
    "{\"i\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"d\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[12,20]}}   "
    "\x07\x00\x00\x00\xff\xff\xff\xff"  /* i = 7, -1 */
    "\x01\x3c\x00\xfc"                  /* d = 1 + 2^-11 + 2^-40 (rounded up, from the double), -70000 (-inf) */
    "\x66\x2e\xff\x7b\x00\x00\x02\x00"; /* h = 0.1, 65519, 2^-25 (tie to 0), 3 * 2^-25 (tie to 2) */

/* Saving as BF16: BF16 (by name), U8, BOOL. N = 224 = 0xe0. */
static const unsigned char bf16_file[] =
    "\xe0\0\0\0\0\0\0\0"
    "{\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
    "\"z\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[6,8]},"
    "\"u\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[8,10]},"
    "\"m\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[10,11]}}       "
    "\x80\x3f\x82\x3f\x80\x7f" /* w = 1 + 2^-8 (tie to 1), 1 + 3 * 2^-8, FLT_MAX (inf) */
    "\x81\x3f"                 /* z = 1 + 2^-8 + 2^-40, rounded up from the double */
    "\x03\xfa"                 /* u = 3, 250 */
    "\x01";                    /* m = true */

static void test_save_exact_bytes(void)
{
    nb_tensor *base = T(NB_F32, S(2, 2), 0.1, 0x1p-25, 65519, 0x3p-25), *h;
    REQUIRE_OK(nb_tensor_transpose(&h, base, 0, 1)); /* written in C order of the view */
    nb_tensor *i = T(NB_I32, S(2), 7, -1), *d = T(NB_F64, S(2), 1.0 + 0x1p-11 + 0x1p-40, -70000);
    const char *names[] = {"h", "i", "d"};
    nb_tensor *ts[] = {h, i, d};
    const char *path = path_of("f16.safetensors");
    REQUIRE_OK(nb_safetensors_save_as(path, 3, names, ts, NULL, NB_STORE_F16));
    CHECK(file_equals(path, f16_file, sizeof f16_file - 1));
    /* And it loads back as F32 tensors of the rounded values. */
    nb_safetensors *f;
    REQUIRE_OK(nb_safetensors_load(&f, path));
    CHECK_TENSOR(nb_safetensors_find(f, "h"), S(2, 2), 0, nb_f16_to_f32(0x2e66), 65504, 0, 0x2p-24);
    CHECK_TENSOR(nb_safetensors_find(f, "d"), S(2), 0, 1.0 + 0x1p-10, -INFINITY);
    CHECK(nb_safetensors_find(f, "i")->dtype == NB_I32 && nb_safetensors_find(f, "d")->dtype == NB_F32);
    CHECK_STR(nb_safetensors_stored_dtype(f, 2), "F16");
    nb_safetensors_free(f);

    nb_tensor *w = T(NB_F32, S(3), 1.0 + 0x1p-8, 1.0 + 0x3p-8, FLT_MAX), *z = tscalar(NB_F64, 1.0 + 0x1p-8 + 0x1p-40),
              *u = T(NB_U8, S(2), 3, 250), *m = T(NB_BOOL, S(1), 1);
    const char *names2[] = {"m", "u", "z", "w"};
    nb_tensor *ts2[] = {m, u, z, w};
    path = path_of("bf16.safetensors");
    REQUIRE_OK(nb_safetensors_save_as(path, 4, names2, ts2, NULL, NB_STORE_BF16));
    CHECK(file_equals(path, bf16_file, sizeof bf16_file - 1));
    /* NB_STORE_NATIVE is nb_safetensors_save. */
    const char *p1 = path_of("native1.safetensors"), *p2 = path_of("native2.safetensors");
    REQUIRE_OK(nb_safetensors_save_as(p1, 4, names2, ts2, NULL, NB_STORE_NATIVE));
    REQUIRE_OK(nb_safetensors_save(p2, 4, names2, ts2, NULL));
    FILE *a = fopen(p1, "rb"), *b = fopen(p2, "rb");
    unsigned char ba[512], bb[512];
    size_t na = a ? fread(ba, 1, sizeof ba, a) : 0, nbb = b ? fread(bb, 1, sizeof bb, b) : 1;
    CHECK(na > 0 && na == nbb && !memcmp(ba, bb, na));
    if (a) fclose(a);
    if (b) fclose(b);
    /* A bad storage value: an argument error, nothing written. */
    CHECK_ERR(nb_safetensors_save_as(path_of("x.safetensors"), 4, names2, ts2, NULL, (nb_float_storage)7), NB_ERR_ARG,
              "7 is no nb_float_storage");
    CHECK(access(path_of("x.safetensors"), F_OK) != 0);
    release_all(base, h, i, d, w, z, u, m, NULL);
}

/* A model's weights saved in BF16 and loaded back into F32 (and F64) vars. */
static void test_checkpoint_bf16(void)
{
    nb_program *p, *q;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_program_new(&q));
    nb_block *blk = nb_program_global_block(p);
    nb_var *v;
    REQUIRE_OK(nb_block_create_var(blk, "fc.w", NB_F32, 2, S(2, 3), &v));
    v->persistable = true;
    REQUIRE_OK(nb_block_create_var(blk, "fc.b", NB_F64, 1, S(-1), &v));
    v->persistable = true;
    REQUIRE_OK(nb_block_create_var(blk, "step", NB_I64, 0, NULL, &v));
    v->persistable = true;
    nb_scope *scope, *fresh, *held;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    REQUIRE_OK(nb_scope_new(&held, NULL));
    nb_tensor *w = T(NB_F32, S(2, 3), 0.1, -2, 3.14159265, 1e-3, 1e30, 65536 + 256),
              *bias = T(NB_F64, S(2), 1.0 / 3, -1e-40), *step = tscalar(NB_I64, 123456789);
    CHECK_OK(nb_scope_set(scope, "fc.w", w));
    CHECK_OK(nb_scope_set(scope, "fc.b", bias));
    CHECK_OK(nb_scope_set(scope, "step", step));
    const char *keys[] = {"epoch"}, *values[] = {"4"};
    const char *path = path_of("model.ckpt");
    REQUIRE_OK(nb_checkpoint_save_as(path, p, scope, &(nb_meta){1, keys, values}, NB_STORE_BF16));
    nb_safetensors *f;
    REQUIRE_OK(nb_safetensors_load(&f, path));
    CHECK_STR(nb_safetensors_stored_dtype(f, 0), "I64"); /* the step, exact */
    CHECK_STR(nb_safetensors_stored_dtype(f, 1), "BF16");
    CHECK_STR(nb_safetensors_stored_dtype(f, 2), "BF16");
    nb_safetensors_free(f);

    /* Into a fresh scope: new tensors of the vars' dtypes. */
    nb_safetensors *meta;
    REQUIRE_OK(nb_checkpoint_load(path, p, fresh, &meta));
    CHECK_STR(nb_safetensors_meta(meta, "epoch"), "4");
    nb_safetensors_free(meta);
    const float *wv = nb_tensor_data(w);
    nb_tensor *got = nb_scope_find(fresh, "fc.w");
    REQUIRE_OK(got && got->dtype == NB_F32 ? NB_OK : NB_ERR_STATE);
    int wrong = 0;
    for (int k = 0; k < 6; k++)
        wrong += ((const float *)nb_tensor_data(got))[k] != nb_bf16_to_f32(nb_f32_to_bf16(wv[k]));
    CHECK(wrong == 0);
    CHECK_TENSOR(got, S(2, 3), 0, 0x1.9ap-4, -2, 3.140625, 0x1.06p-10, 0x1.94p+99, 65536); /* the last a tie */
    got = nb_scope_find(fresh, "fc.b");
    CHECK(got && got->dtype == NB_F64);
    CHECK_TENSOR(got, S(2), 0, nb_bf16_to_f32(nb_f64_to_bf16(1.0 / 3)), nb_bf16_to_f32(nb_f64_to_bf16(-1e-40)));
    got = nb_scope_find(fresh, "step");
    CHECK(got && got->dtype == NB_I64 && *(const int64_t *)nb_tensor_data(got) == 123456789);

    /* Into tensors already held: the values copied into them. */
    nb_tensor *hw = T(NB_F32, S(2, 3), 0, 0, 0, 0, 0, 0), *hb = T(NB_F64, S(2), 0, 0);
    CHECK_OK(nb_scope_set(held, "fc.w", hw));
    CHECK_OK(nb_scope_set(held, "fc.b", hb));
    CHECK_OK(nb_checkpoint_load(path, p, held, NULL));
    CHECK(nb_scope_find(held, "fc.w") == hw && nb_scope_find(held, "fc.b") == hb);
    CHECK_TENSOR(hw, S(2, 3), 0, 0x1.9ap-4, -2, 3.140625, 0x1.06p-10, 0x1.94p+99, 65536);
    CHECK(((const double *)nb_tensor_data(hb))[0] == (double)nb_bf16_to_f32(nb_f64_to_bf16(1.0 / 3)));

    /* A half tensor does not fit an integer var. */
    REQUIRE_OK(nb_block_create_var(nb_program_global_block(q), "fc.w", NB_I32, 2, S(2, 3), &v));
    v->persistable = true;
    CHECK_ERR(nb_checkpoint_load(path, q, fresh, NULL), NB_ERR_FORMAT,
              "var 'fc.w': expected int32 [2, 3], found float32 [2, 3]");

    /* F16 too, and the native save is unchanged. */
    CHECK_OK(nb_checkpoint_save_as(path, p, scope, NULL, NB_STORE_F16));
    CHECK_OK(nb_checkpoint_load(path, p, fresh, NULL));
    CHECK_TENSOR(nb_scope_find(fresh, "fc.w"), S(2, 3), 0, nb_f16_to_f32(nb_f32_to_f16(0.1f)), -2,
                 nb_f16_to_f32(nb_f32_to_f16(3.14159265f)), nb_f16_to_f32(nb_f32_to_f16(1e-3f)), INFINITY, INFINITY);
    CHECK_OK(nb_checkpoint_save(path, p, scope, NULL));
    CHECK_OK(nb_checkpoint_load(path, p, fresh, NULL));
    CHECK(!memcmp(nb_tensor_data(nb_scope_find(fresh, "fc.w")), wv, 6 * sizeof(float)));
    CHECK_ERR(nb_checkpoint_save_as(path, p, scope, NULL, (nb_float_storage)-1), NB_ERR_ARG, "no nb_float_storage");

    release_all(w, bias, step, hw, hb, NULL);
    nb_scope_free(scope);
    nb_scope_free(fresh);
    nb_scope_free(held);
    nb_program_free(p);
    nb_program_free(q);
}

static void cleanup_dir(void)
{
    const char *names[] = {"half.safetensors",    "bad.safetensors",     "f16.safetensors", "bf16.safetensors",
                           "native1.safetensors", "native2.safetensors", "model.ckpt"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unlink(path_of(names[i]));
    if (rmdir(dir)) fprintf(stderr, "note: could not remove %s: %s\n", dir, strerror(errno));
}

/* ---- for tests/test_safetensors_half_torch.sh ------------------------------ */

static void *read_raw(const char *dirname, const char *name, size_t *n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dirname, name);
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END)) return NULL;
    long len = ftell(f);
    rewind(f);
    void *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

static void write_raw(const char *dirname, const char *name, const void *p, size_t n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dirname, name);
    write_file(path, p, n);
}

/* --convert DIR: the script's values through nabla's conversions, as raw
 * host-order arrays: x.f32 -> x.f16, x.bf16; d.f64 -> d.f16, d.bf16; and
 * every 16-bit pattern widened: all.f16.f32, all.bf16.f32. */
static int convert(const char *d)
{
    size_t nx, nd;
    float *x = read_raw(d, "x.f32", &nx);
    double *dv = read_raw(d, "d.f64", &nd);
    if (!x || !dv) {
        fprintf(stderr, "cannot read %s/x.f32 or %s/d.f64\n", d, d);
        return 2;
    }
    nx /= sizeof *x;
    nd /= sizeof *dv;
    size_t most = nx > nd ? nx : nd;
    uint16_t *h = malloc((most > 65536 ? most : 65536) * sizeof *h);
    float *w = malloc(65536 * sizeof *w);
    if (!h || !w) return 2;
    nb_f32_to_f16_n(x, h, nx);
    write_raw(d, "x.f16", h, nx * 2);
    nb_f32_to_bf16_n(x, h, nx);
    write_raw(d, "x.bf16", h, nx * 2);
    nb_f64_to_f16_n(dv, h, nd);
    write_raw(d, "d.f16", h, nd * 2);
    nb_f64_to_bf16_n(dv, h, nd);
    write_raw(d, "d.bf16", h, nd * 2);
    for (unsigned i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    nb_f16_to_f32_n(h, w, 65536);
    write_raw(d, "all.f16.f32", w, 65536 * 4);
    nb_bf16_to_f32_n(h, w, 65536);
    write_raw(d, "all.bf16.f32", w, 65536 * 4);
    free(x);
    free(dv);
    free(h);
    free(w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--convert")) return convert(argv[2]);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nabla_half_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    build_table(&f16);
    build_table(&bf16);
    RUN(test_exhaustive);
    RUN(test_rounding_against_reference);
    RUN(test_named_cases);
    RUN(test_bulk);
    RUN(test_load_reference_layout);
    RUN(test_malformed_half);
    RUN(test_save_exact_bytes);
    RUN(test_checkpoint_bf16);
    cleanup_dir();
    return test_report();
}
