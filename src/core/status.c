/* Thread-local error text. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "nabla/status.h"

#define ERROR_MAX 2048

static _Thread_local char last_error[ERROR_MAX];

const char *nb_last_error(void) { return last_error; }

void nb_clear_error(void) { last_error[0] = '\0'; }

const char *nb_status_name(nb_status s)
{
    switch (s) {
    case NB_OK: return "ok";
    case NB_ERR_ARG: return "invalid argument";
    case NB_ERR_SHAPE: return "shape error";
    case NB_ERR_DTYPE: return "dtype error";
    case NB_ERR_NOT_FOUND: return "not found";
    case NB_ERR_NOMEM: return "out of memory";
    case NB_ERR_IO: return "i/o error";
    case NB_ERR_FORMAT: return "malformed data";
    case NB_ERR_UNSUPPORTED: return "unsupported";
    case NB_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}

nb_status nb_error(nb_status s, const char *fmt, ...)
{
    /* Formatted aside first: an argument may be nb_last_error() itself, as
     * when a caller wraps the error of a call it made. */
    char text[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    memcpy(last_error, text, sizeof last_error);
    return s;
}

nb_status nb_error_context(nb_status s, const char *fmt, ...)
{
    char prefix[ERROR_MAX], old[ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n > ERROR_MAX - 3) n = ERROR_MAX - 3;
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    size_t rest = ERROR_MAX - n - 3;
    size_t m = strlen(old);
    if (m > rest) m = rest;
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return s;
}
