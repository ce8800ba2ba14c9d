/* Gradient-check cases of the conv family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_conv[] = {
    {.op = NULL},
};
