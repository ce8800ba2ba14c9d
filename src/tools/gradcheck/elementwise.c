/* Gradient-check cases of the elementwise family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_elementwise[] = {
    {.op = NULL},
};
