/* Gradient-check cases of the compare family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_compare[] = {
    {.op = NULL},
};
