/* libFuzzer harness for the strict JSON reader (src/io/json.h), which reads
 * safetensors headers. Build and run: `make fuzz` (fuzz/README). By hand:
 *     build-fuzz/fuzz/fuzz_json -max_total_time=60 build-fuzz/corpus/json build-fuzz/seeds/json
 *
 * Every token is read until the end or the first error. Keys and strings
 * must be valid UTF-8 (the reader promises it) and survive json_append_string;
 * a document read whole must have balanced containers. */
#include <stdint.h>
#include "fuzz_util.h"
#include "io/json.h"
#include "nabla/device.h"
#include "nabla/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_reader r;
    nb_clear_error();
    json_reader_init(&r, (const char *)data, size);
    char *out = NULL;
    size_t out_len = 0, out_cap = 0;
    int depth = 0, tokens = 0;
    nb_status st;
    json_token tok;
    while (!(st = json_next(&r, &tok)) && tok != JSON_END) {
        tokens++;
        size_t n = 0;
        const char *text;
        switch (tok) {
        case JSON_OBJECT_BEGIN:
        case JSON_ARRAY_BEGIN: FUZZ_CHECK(++depth <= JSON_MAX_DEPTH); break;
        case JSON_OBJECT_END:
        case JSON_ARRAY_END: FUZZ_CHECK(--depth >= 0); break;
        case JSON_KEY:
        case JSON_STRING:
            text = json_text(&r, &n);
            FUZZ_CHECK(text && json_utf8_valid(text, n));
            out_len = 0;
            FUZZ_CHECK(!json_append_string(&out, &out_len, &out_cap, text, n));
            FUZZ_CHECK(out_len >= n + 2 && out[0] == '"' && out[out_len - 1] == '"');
            break;
        case JSON_NUMBER: {
            text = json_text(&r, &n);
            uint64_t v;
            FUZZ_CHECK(text && n > 0);
            if (json_parse_uint(text, UINT64_MAX, &v)) FUZZ_CHECK(text[0] >= '0' && text[0] <= '9');
            break;
        }
        default: break;
        }
    }
    if (st) FUZZ_CHECK(*nb_last_error());
    else FUZZ_CHECK(depth == 0 && tokens > 0);
    (void)json_utf8_valid((const char *)data, size);
    nb_free(out);
    json_reader_free(&r);
    return 0;
}
