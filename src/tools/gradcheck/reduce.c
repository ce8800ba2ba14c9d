/* Gradient-check cases of the reduce family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_reduce[] = {
    {.op = NULL},
};
