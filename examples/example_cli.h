/* What the character-level examples (char_rnn, char_gpt) share around
 * their command lines: reading a number flag, failing with nabla's error,
 * and a clock. Define EXAMPLE_NAME (the prefix of error lines) before
 * including it. */
#ifndef NABLA_EXAMPLES_EXAMPLE_CLI_H
#define NABLA_EXAMPLES_EXAMPLE_CLI_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "nabla/nabla.h"

/* The number s of flag `flag` into *out, if it lies in [lo, hi]; else a
 * message and false. */
static bool parse_number(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: expected a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

/* Exits with nabla's last error when st is one. */
static void die_on(nb_status st, const char *what)
{
    if (!st) return;
    fprintf(stderr, EXAMPLE_NAME ": %s: %s\n", what, nb_last_error());
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
