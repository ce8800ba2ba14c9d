/* Character-level corpora (nabla/text.h) on small files the test writes:
 * the sorted byte vocabulary, encoding and decoding (ASCII and UTF-8), the
 * train/validation split, the BPTT reader's layout (targets shifted by one,
 * batches continuing each stream), finding the corpus file, and the errors.
 * One test reads the real tiny shakespeare when it is there. */
#include "data/data_internal.h"
#include "data_test_util.h"
#include "nabla/data.h"
#include "nabla/text.h"
#include "test.h"

static char tmp[4096];

static const char *at(const char *rel)
{
    static char p[4][4200];
    static int i;
    i = (i + 1) % 4;
    if (snprintf(p[i], sizeof p[i], "%s/%s", tmp, rel) >= (int)sizeof p[i]) exit(2);
    return p[i];
}

static void test_vocabulary_and_ids(void)
{
    const char *s = "hello world\n";
    write_bytes(at("hello.txt"), 0, s, strlen(s));
    nb_text t;
    REQUIRE_OK(nb_text_load(&t, at("hello.txt")));
    CHECK(t.length == 12 && t.vocab_size == 9);
    CHECK(!memcmp(t.vocab, "\n dehlorw", 9)); /* sorted bytes */
    CHECK(t.id_of['\n'] == 0 && t.id_of[' '] == 1 && t.id_of['w'] == 8 && t.id_of['z'] == -1);
    CHECK(t.ids->dtype == NB_U8 && t.ids->ndim == 1 && t.ids->shape[0] == 12);
    const unsigned char *ids = nb_tensor_data(t.ids);
    for (int i = 0; i < 12; i++) CHECK(t.vocab[ids[i]] == (unsigned char)s[i]);
    int64_t enc[5];
    char dec[6] = {0};
    CHECK_OK(nb_text_encode(&t, "world", 5, enc));
    CHECK(enc[0] == 8 && enc[1] == 6 && enc[2] == 7 && enc[3] == 5 && enc[4] == 2);
    CHECK_OK(nb_text_decode(&t, enc, 5, dec));
    CHECK_STR(dec, "world");
    CHECK_ERR(nb_text_encode(&t, "hey", 3, enc), NB_ERR_ARG,
              "byte 121 ('y') at position 2 is not in the vocabulary of 9");
    CHECK_ERR(nb_text_decode(&t, (int64_t[]){3, 9}, 2, dec), NB_ERR_ARG,
              "id 9 at position 1 is outside the vocabulary of 9");
    CHECK(nb_text_split_point(&t, 0.25) == 9 && nb_text_split_point(&t, 0) == 12);
    nb_text_free(&t);
    CHECK(t.ids == NULL && t.length == 0);
    nb_text_free(&t); /* twice is fine */
}

/* UTF-8 is bytes: each byte of a character gets an id, and decoding gives
 * the bytes back. */
static void test_utf8_is_bytes(void)
{
    const char *s = "caf\xc3\xa9 \xe2\x82\xac"; /* "café €" */
    size_t n = strlen(s);
    nb_text t;
    REQUIRE_OK(nb_text_from_bytes(&t, s, (int64_t)n));
    CHECK(t.length == (int64_t)n && t.vocab_size == 9);
    CHECK(t.vocab[t.vocab_size - 1] == 0xe2 && t.id_of[0xc3] >= 0 && t.id_of[0xa9] >= 0);
    int64_t ids[16];
    char back[16] = {0};
    CHECK_OK(nb_text_encode(&t, s, (int64_t)n, ids));
    CHECK_OK(nb_text_decode(&t, ids, (int64_t)n, back));
    CHECK(!memcmp(back, s, n));
    nb_text_free(&t);
}

static void test_load_errors(void)
{
    nb_text t;
    CHECK_ERR(nb_text_load(&t, at("missing.txt")), NB_ERR_NOT_FOUND, "missing.txt': cannot open: No such file");
    CHECK(strstr(nb_last_error(), "missing.txt") && t.ids == NULL);
    write_bytes(at("empty.txt"), 0, "", 0);
    CHECK_ERR(nb_text_load(&t, at("empty.txt")), NB_ERR_FORMAT, "empty.txt is empty");
    CHECK_ERR(nb_text_load(&t, tmp), NB_ERR_IO, "is not a regular file");
    CHECK_ERR(nb_text_from_bytes(&t, "", 0), NB_ERR_FORMAT, "the corpus is empty");
    CHECK(t.ids == NULL);
}

/* A corpus whose id at position i is known: byte 'a' + i % 26. */
static void alphabet(nb_text *t, int64_t n)
{
    char *s = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) s[i] = (char)('a' + i % 26);
    CHECK_OK(nb_text_from_bytes(t, s, n));
    free(s);
}

/* inputs[s][j] = stream_j[k*T + s], targets one further; batches continue
 * the streams; the epoch ends after (L - 1) / T batches. */
static void test_bptt_batches(void)
{
    nb_text t;
    alphabet(&t, 100);
    const int64_t begin = 10, end = 81; /* 71 ids: 3 streams of 23 (2 left over) */
    const int T = 4, B = 3, L = 23;
    CHECK(nb_text_batches(end - begin, T, B) == 5); /* (23 - 1) / 4 */
    nb_reader *r;
    REQUIRE_OK(nb_text_reader(&r, &t, begin, end, T, B));
    CHECK(nb_reader_fields(r) == 2);
    const unsigned char *ids = nb_tensor_data(t.ids);
    for (int epoch = 0; epoch < 2; epoch++) {
        CHECK_OK(nb_reader_reset(r, (uint64_t)epoch));
        int k = 0;
        nb_tensor *rec[2];
        bool end_ = false;
        while (!nb_reader_next(r, rec, &end_) && !end_) {
            CHECK(rec[0]->dtype == NB_I64 && nb_shape_equal(rec[0]->ndim, rec[0]->shape, 2, S(T, B)));
            CHECK(rec[1]->dtype == NB_I64 && nb_shape_equal(rec[1]->ndim, rec[1]->shape, 2, S(T, B)));
            for (int s = 0; s < T; s++)
                for (int j = 0; j < B; j++) {
                    int64_t pos = begin + j * L + k * T + s;
                    CHECK(nb_tensor_get(rec[0], s * B + j) == ids[pos]);
                    CHECK(nb_tensor_get(rec[1], s * B + j) == ids[pos + 1]);
                }
            release_all(rec[0], rec[1], NULL);
            k++;
        }
        CHECK(k == 5);
    }
    /* skip, then the batch after the skipped ones */
    CHECK_OK(nb_reader_reset(r, 0));
    CHECK_OK(nb_reader_skip(r, 4));
    nb_tensor *rec[2];
    bool e = false;
    CHECK_OK(nb_reader_next(r, rec, &e));
    CHECK(!e && nb_tensor_get(rec[0], 0) == ids[begin + 4 * T]);
    if (!e) release_all(rec[0], rec[1], NULL);
    CHECK_OK(nb_reader_next(r, rec, &e));
    CHECK(e && rec[0] == NULL);
    nb_reader_free(r);

    /* Shuffled by batch: every batch once, in another order. */
    REQUIRE_OK(nb_text_reader(&r, &t, begin, end, T, B));
    REQUIRE_OK(nb_reader_shuffle(&r, r, 5));
    bool seen[5] = {false};
    int n = 0;
    while (!nb_reader_next(r, rec, &e) && !e) {
        int k = 0; /* which batch: the first ids of the five are distinct */
        while (k < 4 && nb_tensor_get(rec[0], 0) != ids[begin + k * T]) k++;
        seen[k] = true;
        CHECK(nb_tensor_get(rec[1], 0) == ids[begin + k * T + 1]);
        release_all(rec[0], rec[1], NULL);
        n++;
    }
    CHECK(n == 5 && seen[0] && seen[1] && seen[2] && seen[3] && seen[4]);
    nb_reader_free(r);

    /* The reader keeps the ids alive after the text is freed. */
    REQUIRE_OK(nb_text_reader(&r, &t, 0, 100, 3, 2));
    nb_text_free(&t);
    CHECK_OK(nb_reader_next(r, rec, &e));
    CHECK(!e && nb_tensor_get(rec[1], 0) == 1 && nb_tensor_get(rec[1], 1) == 50 % 26 + 1);
    if (!e) release_all(rec[0], rec[1], NULL);
    nb_reader_free(r);
}

static void test_bptt_errors(void)
{
    nb_text t;
    alphabet(&t, 20);
    nb_reader *r = (nb_reader *)&t;
    CHECK_ERR(nb_text_reader(&r, &t, 0, 20, 10, 2), NB_ERR_ARG,
              "20 ids cut into 2 streams of 10 are too few for one batch of 10 steps (each stream needs 11 ids");
    CHECK(r == NULL);
    CHECK_OK(nb_text_reader(&r, &t, 0, 20, 9, 2)); /* just enough */
    nb_reader_free(r);
    CHECK_ERR(nb_text_reader(&r, &t, 5, 21, 2, 2), NB_ERR_ARG, "span [5, 21) does not lie in the corpus of 20 ids");
    CHECK_ERR(nb_text_reader(&r, &t, 5, 5, 2, 2), NB_ERR_ARG, "span [5, 5)");
    CHECK_ERR(nb_text_reader(&r, &t, 0, 20, 0, 2), NB_ERR_ARG, "sequence length 0 and batch 2");
    CHECK_ERR(nb_text_reader(&r, NULL, 0, 20, 2, 2), NB_ERR_ARG, "no text");
    nb_text_free(&t);
}

/* --data DIR or FILE, $NABLA_DATA, and the message when none has it. */
static void test_find_corpus(void)
{
    char out[4200], want[4200];
    mkdir(at("d"), 0755);
    mkdir(at("d/tinyshakespeare"), 0755);
    write_bytes(at("d/tinyshakespeare/input.txt"), 0, "x\n", 2);
    const char *exe = at("nowhere/bin/prog");
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd) || chdir(tmp)) return; /* ./data and ../data hold nothing there */
    unsetenv("NABLA_DATA");
    snprintf(want, sizeof want, "%s", at("d/tinyshakespeare/input.txt"));
    CHECK_OK(nb_data_find_file_from(at("d"), "tinyshakespeare", "input.txt", exe, out, sizeof out));
    CHECK_STR(out, want);
    CHECK_OK(nb_data_find_file_from(at("d/tinyshakespeare"), "tinyshakespeare", "input.txt", exe, out, sizeof out));
    CHECK_STR(out, want);
    CHECK_OK(nb_data_find_file_from(want, "tinyshakespeare", "input.txt", exe, out, sizeof out)); /* the file */
    CHECK_STR(out, want);
    write_bytes(at("other.txt"), 0, "y\n", 2);
    CHECK_OK(nb_data_find_file_from(at("other.txt"), "tinyshakespeare", "input.txt", exe, out, sizeof out));
    CHECK_STR(out, at("other.txt"));
    setenv("NABLA_DATA", at("d"), 1);
    CHECK_OK(nb_data_find_file_from(NULL, "tinyshakespeare", "input.txt", exe, out, sizeof out));
    CHECK_STR(out, want);
    CHECK_ERR(nb_data_find_file_from(NULL, "tinyshakespeare", "input.txt", exe, out, 10), NB_ERR_ARG,
              "out_path has only 10 bytes");
    unsetenv("NABLA_DATA");
    CHECK_ERR(nb_data_find_file_from(at("e"), "tinyshakespeare", "input.txt", exe, out, sizeof out), NB_ERR_NOT_FOUND,
              "the tinyshakespeare data set was not found. Looked in: ");
    CHECK(strstr(nb_last_error(), "(a folder holds it when it has input.txt)"));
    CHECK(strstr(nb_last_error(), "karpathy/char-rnn") && strstr(nb_last_error(), "--data FILE"));
    CHECK(strstr(nb_last_error(), "../data/tinyshakespeare") && !strstr(nb_last_error(), "shared"));
    CHECK_ERR(nb_data_find_file_from(NULL, "tinyshakespeare", "a/b.txt", exe, out, sizeof out), NB_ERR_ARG,
              "is not a file name");
    if (chdir(cwd)) perror("chdir");
}

/* The real corpus, when the search or the build's data folder
 * (NABLA_DATA_DIR) finds it (karpathy/char-rnn's input.txt: 1,115,394 bytes,
 * 65 distinct characters, "First Citizen:" first). */
static void test_real_tinyshakespeare(void)
{
    char path[4200];
    nb_status found = nb_data_find_file(NULL, "tinyshakespeare", "input.txt", path, sizeof path);
#ifdef NABLA_DATA_DIR
    if (found) found = nb_data_find_file(NABLA_DATA_DIR, "tinyshakespeare", "input.txt", path, sizeof path);
#endif
    if (found) {
        printf("     skipped: tiny shakespeare is not here (%s)\n", nb_last_error());
        return;
    }
    nb_text t;
    REQUIRE_OK(nb_text_load(&t, path));
    CHECK(t.length == 1115394 && t.vocab_size == 65);
    char first[15] = {0};
    int64_t ids[14];
    const unsigned char *raw = nb_tensor_data(t.ids);
    for (int i = 0; i < 14; i++) ids[i] = raw[i];
    CHECK_OK(nb_text_decode(&t, ids, 14, first));
    CHECK_STR(first, "First Citizen:");
    int64_t cut = nb_text_split_point(&t, 0.1);
    CHECK(cut == 1115394 - 111539);
    CHECK(nb_text_batches(cut, 64, 32) == 490 && nb_text_batches(t.length - cut, 64, 32) == 54);
    nb_text_free(&t);
}

int main(void)
{
    make_temp_dir(tmp, sizeof tmp);
    RUN(test_vocabulary_and_ids);
    RUN(test_utf8_is_bytes);
    RUN(test_load_errors);
    RUN(test_bptt_batches);
    RUN(test_bptt_errors);
    RUN(test_find_corpus);
    RUN(test_real_tinyshakespeare);
    remove_tree(tmp);
    return test_report();
}
