/* The strict JSON pull reader and the string writer of json.h. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "json.h"

enum {
    EXPECT_VALUE,
    EXPECT_VALUE_OR_ARRAY_END, /* just after '[' */
    EXPECT_KEY,                /* after ',' in an object: no trailing comma */
    EXPECT_KEY_OR_OBJECT_END,  /* just after '{' */
    EXPECT_COMMA_OR_END,       /* after a value inside a container */
    EXPECT_EOF,                /* the top-level value is complete */
    EXPECT_NOTHING             /* JSON_END was returned */
};

void json_reader_init(json_reader *r, const char *text, size_t len)
{
    memset(r, 0, sizeof *r);
    r->text = text;
    r->len = len;
    r->expect = EXPECT_VALUE;
}

void json_reader_free(json_reader *r)
{
    nb_free(r->buf);
    r->buf = NULL;
    r->buf_len = r->buf_cap = 0;
}

const char *json_text(const json_reader *r, size_t *len)
{
    if (len) *len = r->buf_len;
    return r->buf ? r->buf : "";
}

static nb_status syntax(const json_reader *r, const char *what)
{
    if (r->pos >= r->len) return nb_error(NB_ERR_FORMAT, "invalid JSON: the text ends early (%s)", what);
    unsigned char c = (unsigned char)r->text[r->pos];
    if (c >= 0x20 && c < 0x7f) return nb_error(NB_ERR_FORMAT, "invalid JSON at byte %zu ('%c'): %s", r->pos, c, what);
    return nb_error(NB_ERR_FORMAT, "invalid JSON at byte %zu (0x%02x): %s", r->pos, c, what);
}

static void skip_ws(json_reader *r)
{
    while (r->pos < r->len) {
        char c = r->text[r->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        r->pos++;
    }
}

static nb_status buf_put(json_reader *r, const char *s, size_t n)
{
    if (r->buf_len + n + 1 > r->buf_cap) {
        size_t cap = r->buf_cap ? r->buf_cap : 64;
        while (cap < r->buf_len + n + 1) cap *= 2;
        char *b = nb_realloc(r->buf, cap);
        if (!b) return nb_error(NB_ERR_NOMEM, "JSON: out of memory");
        r->buf = b;
        r->buf_cap = cap;
    }
    memcpy(r->buf + r->buf_len, s, n);
    r->buf_len += n;
    r->buf[r->buf_len] = '\0';
    return NB_OK;
}

/* Length of the UTF-8 sequence at s (at most n bytes), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;      /* no overlong forms */
        else if (c == 0xed) hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        else if (c == 0xf4) hi = 0x8f; /* nothing past U+10FFFF */
    } else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}

bool json_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

static int hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
            : c >= 'a' && c <= 'f'   ? c - 'a' + 10
            : c >= 'A' && c <= 'F'   ? c - 'A' + 10
                                     : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static nb_status put_code_point(json_reader *r, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return buf_put(r, u, n);
}

/* A \uXXXX escape at r->pos (just after the backslash and 'u'), with its
 * low surrogate when it is a high one. */
static nb_status unicode_escape(json_reader *r)
{
    if (r->len - r->pos < 4 || hex4(r->text + r->pos) < 0) return syntax(r, "expected 4 hex digits after \\u");
    unsigned cp = (unsigned)hex4(r->text + r->pos);
    r->pos += 4;
    if (cp >= 0xdc00 && cp <= 0xdfff) return syntax(r, "a \\u escape is a low surrogate with no high one before it");
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (r->len - r->pos < 6 || r->text[r->pos] != '\\' || r->text[r->pos + 1] != 'u')
            return syntax(r, "a high surrogate \\u escape must be followed by a low one");
        int lo = hex4(r->text + r->pos + 2);
        if (lo < 0xdc00 || lo > 0xdfff) return syntax(r, "a high surrogate \\u escape must be followed by a low one");
        r->pos += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
    }
    return put_code_point(r, cp);
}

/* A string starting at the opening quote; its decoded text goes to r->buf. */
static nb_status read_string(json_reader *r)
{
    r->buf_len = 0;
    nb_status st = buf_put(r, "", 0);
    if (st) return st;
    r->pos++;
    for (;;) {
        if (r->pos >= r->len) return syntax(r, "a string is not closed");
        unsigned char c = (unsigned char)r->text[r->pos];
        if (c == '"') {
            r->pos++;
            return NB_OK;
        }
        if (c < 0x20) return syntax(r, "control characters must be escaped in strings");
        if (c == '\\') {
            if (++r->pos >= r->len) return syntax(r, "a string is not closed");
            char e = r->text[r->pos++], out;
            switch (e) {
            case '"': out = '"'; break;
            case '\\': out = '\\'; break;
            case '/': out = '/'; break;
            case 'b': out = '\b'; break;
            case 'f': out = '\f'; break;
            case 'n': out = '\n'; break;
            case 'r': out = '\r'; break;
            case 't': out = '\t'; break;
            case 'u':
                st = unicode_escape(r);
                if (st) return st;
                continue;
            default: r->pos--; return syntax(r, "unknown escape in a string");
            }
            st = buf_put(r, &out, 1);
        } else {
            size_t k = utf8_seq((const unsigned char *)r->text + r->pos, r->len - r->pos);
            if (!k) return syntax(r, "a string is not valid UTF-8");
            st = buf_put(r, r->text + r->pos, k);
            r->pos += k;
        }
        if (st) return st;
    }
}

static bool is_digit(const json_reader *r)
{
    return r->pos < r->len && r->text[r->pos] >= '0' && r->text[r->pos] <= '9';
}

static nb_status read_number(json_reader *r)
{
    size_t start = r->pos;
    if (r->text[r->pos] == '-') r->pos++;
    if (!is_digit(r)) return syntax(r, "expected a digit");
    if (r->text[r->pos] == '0') r->pos++;
    else
        while (is_digit(r)) r->pos++;
    if (r->pos < r->len && r->text[r->pos] == '.') {
        r->pos++;
        if (!is_digit(r)) return syntax(r, "expected a digit after the decimal point");
        while (is_digit(r)) r->pos++;
    }
    if (r->pos < r->len && (r->text[r->pos] == 'e' || r->text[r->pos] == 'E')) {
        r->pos++;
        if (r->pos < r->len && (r->text[r->pos] == '+' || r->text[r->pos] == '-')) r->pos++;
        if (!is_digit(r)) return syntax(r, "expected a digit in the exponent");
        while (is_digit(r)) r->pos++;
    }
    r->buf_len = 0;
    return buf_put(r, r->text + start, r->pos - start);
}

static bool literal(json_reader *r, const char *word)
{
    size_t n = strlen(word);
    if (r->len - r->pos < n || memcmp(r->text + r->pos, word, n)) return false;
    r->pos += n;
    return true;
}

static void value_done(json_reader *r) { r->expect = r->depth ? EXPECT_COMMA_OR_END : EXPECT_EOF; }

static nb_status open_container(json_reader *r, char c)
{
    if (r->depth == JSON_MAX_DEPTH) return syntax(r, "arrays and objects are nested too deeply");
    r->stack[r->depth++] = c;
    r->pos++;
    r->expect = c == '{' ? EXPECT_KEY_OR_OBJECT_END : EXPECT_VALUE_OR_ARRAY_END;
    return NB_OK;
}

static void close_container(json_reader *r)
{
    r->depth--;
    r->pos++;
    value_done(r);
}

static nb_status read_value(json_reader *r, json_token *tok)
{
    if (r->pos >= r->len) return syntax(r, "a value was expected");
    char c = r->text[r->pos];
    nb_status st = NB_OK;
    switch (c) {
    case '{': *tok = JSON_OBJECT_BEGIN; return open_container(r, '{');
    case '[': *tok = JSON_ARRAY_BEGIN; return open_container(r, '[');
    case '"':
        *tok = JSON_STRING;
        st = read_string(r);
        break;
    case 't':
        *tok = JSON_TRUE;
        if (!literal(r, "true")) return syntax(r, "expected a value");
        break;
    case 'f':
        *tok = JSON_FALSE;
        if (!literal(r, "false")) return syntax(r, "expected a value");
        break;
    case 'n':
        *tok = JSON_NULL;
        if (!literal(r, "null")) return syntax(r, "expected a value");
        break;
    default:
        if (c != '-' && (c < '0' || c > '9')) return syntax(r, "expected a value");
        *tok = JSON_NUMBER;
        st = read_number(r);
    }
    if (!st) value_done(r);
    return st;
}

static nb_status read_key(json_reader *r, json_token *tok)
{
    if (r->pos >= r->len || r->text[r->pos] != '"') return syntax(r, "expected a member name (a string)");
    nb_status st = read_string(r);
    if (st) return st;
    skip_ws(r);
    if (r->pos >= r->len || r->text[r->pos] != ':') return syntax(r, "expected ':' after a member name");
    r->pos++;
    *tok = JSON_KEY;
    r->expect = EXPECT_VALUE;
    return NB_OK;
}

nb_status json_next(json_reader *r, json_token *tok)
{
    *tok = JSON_END;
    skip_ws(r);
    switch (r->expect) {
    case EXPECT_NOTHING: return NB_OK;
    case EXPECT_EOF:
        if (r->pos < r->len) return syntax(r, "more text follows the JSON value");
        r->expect = EXPECT_NOTHING;
        return NB_OK;
    case EXPECT_VALUE: return read_value(r, tok);
    case EXPECT_KEY: return read_key(r, tok);
    case EXPECT_VALUE_OR_ARRAY_END:
        if (r->pos < r->len && r->text[r->pos] == ']') {
            *tok = JSON_ARRAY_END;
            close_container(r);
            return NB_OK;
        }
        return read_value(r, tok);
    case EXPECT_KEY_OR_OBJECT_END:
        if (r->pos < r->len && r->text[r->pos] == '}') {
            *tok = JSON_OBJECT_END;
            close_container(r);
            return NB_OK;
        }
        return read_key(r, tok);
    default: /* EXPECT_COMMA_OR_END */ {
        bool object = r->stack[r->depth - 1] == '{';
        char end = object ? '}' : ']';
        if (r->pos < r->len && r->text[r->pos] == end) {
            *tok = object ? JSON_OBJECT_END : JSON_ARRAY_END;
            close_container(r);
            return NB_OK;
        }
        if (r->pos >= r->len || r->text[r->pos] != ',')
            return syntax(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
        r->pos++;
        skip_ws(r);
        return object ? read_key(r, tok) : read_value(r, tok);
    }
    }
}

bool json_parse_uint(const char *literal, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!*literal) return false;
    for (const char *p = literal; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        unsigned d = (unsigned)(*p - '0');
        if (d > max || v > (max - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

nb_status json_append_raw(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *b = nb_realloc(*buf, c);
        if (!b) return nb_error(NB_ERR_NOMEM, "JSON: out of memory");
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return NB_OK;
}

nb_status json_append_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    nb_status st = json_append_raw(buf, len, cap, "\"", 1);
    size_t run = 0; /* bytes of s[run..i) not yet appended */
    for (size_t i = 0; i < n && !st; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        default:
            if (c < 0x20) {
                static const char hex[] = "0123456789abcdef";
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                esc[6] = '\0';
                e = esc;
            }
        }
        if (!e) continue;
        st = json_append_raw(buf, len, cap, s + run, i - run);
        if (!st) st = json_append_raw(buf, len, cap, e, strlen(e));
        run = i + 1;
    }
    if (!st) st = json_append_raw(buf, len, cap, s + run, n - run);
    if (!st) st = json_append_raw(buf, len, cap, "\"", 1);
    return st;
}
