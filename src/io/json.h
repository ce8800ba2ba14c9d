/* A small strict JSON reader (RFC 8259), for file headers that come from
 * anywhere (safetensors).
 *
 * It is a pull reader: each json_next() returns the next token, so the
 * caller checks the schema it expects as it goes and allocates only what it
 * keeps; a hostile header cannot make it build a large tree. It rejects
 * everything RFC 8259 does not allow: trailing commas, comments, single
 * quotes, leading zeros, control characters and invalid UTF-8 in strings
 * (overlong forms, surrogates, code points past U+10FFFF), unpaired \u
 * surrogates, trailing garbage, and nesting deeper than JSON_MAX_DEPTH.
 * Duplicate keys are legal JSON; callers that forbid them check. */
#ifndef NABLA_IO_JSON_H
#define NABLA_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nabla/status.h"

#define JSON_MAX_DEPTH 64

typedef enum json_token {
    JSON_END, /* the whole text is read (only whitespace followed) */
    JSON_OBJECT_BEGIN,
    JSON_OBJECT_END,
    JSON_ARRAY_BEGIN,
    JSON_ARRAY_END,
    JSON_KEY,    /* a member name: json_text() gives it */
    JSON_STRING, /* a string value: json_text() gives it */
    JSON_NUMBER, /* json_text() gives its literal text */
    JSON_TRUE,
    JSON_FALSE,
    JSON_NULL
} json_token;

typedef struct json_reader {
    const char *text;
    size_t len, pos;
    int depth;
    char stack[JSON_MAX_DEPTH]; /* '{' or '[' per open container */
    int expect;                 /* what may come next (private) */
    char *buf;                  /* the last key, string or number, NUL-terminated */
    size_t buf_len, buf_cap;
} json_reader;

void json_reader_init(json_reader *r, const char *text, size_t len);
void json_reader_free(json_reader *r);

/* The next token. A syntax error gives NB_ERR_FORMAT with a message naming
 * the byte offset and what was expected; after an error, stop reading. */
nb_status json_next(json_reader *r, json_token *tok);

/* The decoded text of the last JSON_KEY/JSON_STRING (escapes resolved; it may
 * hold NUL bytes, hence the length) or the literal of the last JSON_NUMBER. */
const char *json_text(const json_reader *r, size_t *len);

/* Reads a number literal as a non-negative integer: false if it has a sign,
 * a fraction or an exponent, or exceeds `max`. */
bool json_parse_uint(const char *literal, uint64_t max, uint64_t *out);

/* Whether bytes [s, s+n) are valid UTF-8 (as RFC 3629 defines it). */
bool json_utf8_valid(const char *s, size_t n);

/* Appends `s` (n bytes of valid UTF-8) as a JSON string literal, quotes
 * included, escaping as serde_json does (\" \\ \b \f \n \r \t, other control
 * characters as \u00xx, everything else verbatim), so that files written by
 * nabla match those of the reference safetensors writer byte for byte.
 * `*buf` grows with realloc; returns NB_ERR_NOMEM on failure. */
nb_status json_append_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n);
/* Appends raw bytes. */
nb_status json_append_raw(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

#endif
