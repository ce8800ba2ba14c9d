/* Gradient-check cases of the linalg family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_linalg[] = {
    {.op = NULL},
};
