/* Gradient-check cases of the shape family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_shape[] = {
    {.op = NULL},
};
