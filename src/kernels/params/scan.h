/* Parameters of the scans' kernels (nabla/scan_ops.h), filled from the
 * attributes by the op definitions (src/ops/scan.c). Device independent. */
#ifndef NABLA_KERNELS_PARAMS_SCAN_H
#define NABLA_KERNELS_PARAMS_SCAN_H

#include <stdbool.h>
#include <stdint.h>

/* The axis as given (negative: from the end); exclusive leaves each
 * element's own value out, reverse runs from the end. */
typedef struct nb_scan_params {
    int64_t axis;
    bool exclusive, reverse;
} nb_scan_params;

#endif
