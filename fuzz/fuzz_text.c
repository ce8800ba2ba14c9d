/* libFuzzer harness for text corpora (nb_text_load; nabla/text.h).
 * Build and run: `make fuzz` (fuzz/README). By hand:
 *     build-fuzz/fuzz/fuzz_text -max_total_time=60 build-fuzz/corpus/text build-fuzz/seeds/text
 *
 * The file and the same bytes in memory give the same corpus; encoding the
 * bytes and decoding the ids gives them back; and a reader of batches over
 * the corpus (its shape taken from the first and last bytes) gives the
 * batches nb_text_batches counts, targets one id after inputs. */
#include <stdint.h>
#include "fuzz_util.h"
#include "nabla/device.h"
#include "nabla/status.h"
#include "nabla/text.h"

static void check_reader(const nb_text *t, int seq_len, int batch)
{
    int64_t n = nb_text_batches(t->length, seq_len, batch);
    nb_reader *r = NULL;
    nb_status st = nb_text_reader(&r, t, 0, t->length, seq_len, batch);
    FUZZ_CHECK(n > 0 ? !st : st == NB_ERR_ARG);
    if (st) return;
    int64_t got = 0, stream = t->length / batch;
    const uint8_t *ids = nb_tensor_data(t->ids);
    for (;;) {
        nb_tensor *rec[2] = {NULL, NULL};
        bool end = false;
        FUZZ_CHECK(!nb_reader_next(r, rec, &end));
        if (end) break;
        const int64_t *in = nb_tensor_data(rec[0]), *tg = nb_tensor_data(rec[1]);
        for (int s = 0; s < seq_len; s++)
            for (int j = 0; j < batch; j++) {
                int64_t at = j * stream + got * seq_len + s;
                FUZZ_CHECK(in[s * batch + j] == ids[at] && tg[s * batch + j] == ids[at + 1]);
            }
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
        got++;
    }
    FUZZ_CHECK(got == n);
    nb_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size);
    nb_text t, m;
    nb_clear_error();
    nb_status st = nb_text_load(&t, path), sm = nb_text_from_bytes(&m, data, (int64_t)size);
    FUZZ_CHECK(st == sm);
    if (st) {
        FUZZ_CHECK(size == 0 && st == NB_ERR_FORMAT && !t.ids && !m.ids);
        return 0;
    }
    FUZZ_CHECK(t.length == (int64_t)size && t.vocab_size == m.vocab_size && !memcmp(t.vocab, m.vocab, 256));
    FUZZ_CHECK(!memcmp(nb_tensor_data(t.ids), nb_tensor_data(m.ids), size));
    nb_text_free(&m);

    int64_t *ids = nb_malloc(size * sizeof *ids);
    char *back = nb_malloc(size);
    FUZZ_CHECK(ids && back);
    FUZZ_CHECK(!nb_text_encode(&t, (const char *)data, (int64_t)size, ids));
    FUZZ_CHECK(!nb_text_decode(&t, ids, (int64_t)size, back));
    FUZZ_CHECK(!memcmp(back, data, size));
    for (size_t i = 0; i < size; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < t.vocab_size);
    nb_free(ids);
    nb_free(back);

    int64_t cut = nb_text_split_point(&t, 0.1);
    FUZZ_CHECK(cut >= 0 && cut <= t.length);
    check_reader(&t, 1 + data[0] % 8, 1 + data[size - 1] % 4);
    nb_text_free(&t);
    return 0;
}
