/* nabla/status.h: errors are values.
 *
 * Every fallible nabla function returns an nb_status. On failure the calling
 * thread's error text says what went wrong, naming the op, the vars and the
 * shapes involved; nb_last_error() returns it until the next failure. */
#ifndef NABLA_STATUS_H
#define NABLA_STATUS_H

#include "nabla/export.h"

NB_BEGIN_DECLS

typedef enum nb_status {
    NB_OK = 0,
    NB_ERR_ARG,         /* a bad argument: NULL, out of range, wrong count */
    NB_ERR_SHAPE,       /* shapes that do not fit together */
    NB_ERR_DTYPE,       /* a dtype the op does not take */
    NB_ERR_NOT_FOUND,   /* unknown op, var, attribute or file */
    NB_ERR_NOMEM,       /* an allocation failed */
    NB_ERR_IO,          /* reading or writing a file failed */
    NB_ERR_FORMAT,      /* a malformed or truncated file */
    NB_ERR_UNSUPPORTED, /* valid, but not something nabla does */
    NB_ERR_STATE        /* called at the wrong time (e.g. a freed graph) */
} nb_status;

/* The message of the calling thread's last failure ("" if none yet). */
NB_API const char *nb_last_error(void);

/* A short name for a status code: "shape error", "not found", ... */
NB_API const char *nb_status_name(nb_status s);

/* Records a failure and returns `s`, so that code can say
 *     return nb_error(NB_ERR_SHAPE, "matmul: X has shape %s ...", ...);
 * Custom ops and readers written by users report their errors with it too. */
NB_API nb_status nb_error(nb_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends context to the current error text ("while running op 3: ..."). */
NB_API nb_status nb_error_context(nb_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

NB_API void nb_clear_error(void);

NB_END_DECLS
#endif
