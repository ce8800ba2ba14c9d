/* The built-in kernel tables, one per op family and provider: each is a
 * NULL-terminated list that kernels/registry.c registers on first use. */
#ifndef NABLA_KERNELS_H
#define NABLA_KERNELS_H

#include "nabla/kernel.h"

extern const nb_kernel_def *const nb_cpu_kernels_elementwise[]; /* cpu/elementwise.c, unary.c, cast.c */
extern const nb_kernel_def *const nb_cpu_kernels_compare[];     /* cpu/compare.c */
extern const nb_kernel_def *const nb_cpu_kernels_reduce[];      /* cpu/reduce.c */
extern const nb_kernel_def *const nb_cpu_kernels_scan[];        /* cpu/scan.c */
extern const nb_kernel_def *const nb_cpu_kernels_linalg[];      /* cpu/linalg.c */
extern const nb_kernel_def *const nb_cpu_kernels_shape[];       /* cpu/shape.c, index.c */
extern const nb_kernel_def *const nb_cpu_kernels_nn[];          /* cpu/nn.c, nn_loss.c, nn_softmax.c */
extern const nb_kernel_def *const nb_cpu_kernels_conv[];        /* cpu/conv.c, pool.c */
extern const nb_kernel_def *const nb_cpu_kernels_norm[];        /* cpu/norm.c */
extern const nb_kernel_def *const nb_cpu_kernels_rnn[];         /* cpu/rnn.c */
extern const nb_kernel_def *const nb_cpu_kernels_attention[];   /* cpu/attention.c */
extern const nb_kernel_def *const nb_cpu_kernels_creation[];    /* cpu/creation.c */
extern const nb_kernel_def *const nb_cpu_kernels_optimizer[];   /* cpu/optimizer.c */
extern const nb_kernel_def *const nb_cpu_kernels_collective[];  /* cpu/collective.c */

/* For remembering a choice of kernel: the count of kernels registered so
 * far (a choice made at one count stands while the count does), and whether
 * nb_kernel_find chose `chosen` from the op's list without asking any
 * kernel's `accepts`, so that it chooses the same for every context of the
 * same dtype. */
unsigned nb_kernel_generation(void);
bool nb_kernel_choice_is_fixed(const char *op, nb_device device, const nb_kernel_def *chosen);

#endif
