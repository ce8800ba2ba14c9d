/* Gradient-check cases of the norm family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_norm[] = {
    {.op = NULL},
};
