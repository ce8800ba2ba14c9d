/* What the gradient checks of one op share (gradcheck.c builds the case;
 * gradcheck_closure.c looks at what its rules emit). */
#ifndef NABLA_AUTODIFF_GRADCHECK_INTERNAL_H
#define NABLA_AUTODIFF_GRADCHECK_INTERNAL_H

#include "nabla/gradcheck.h"
#include "nabla/rng.h"

typedef struct feeds {
    nb_feed f[64];
    char names[64][32];
    int n;
} feeds;

/* A case built into a program: fed inputs, the op, and a loss that is a
 * random weighted sum of the op's outputs the case puts in it. */
typedef struct built_case {
    const nb_op_def *def;
    nb_program *p;
    nb_builder *b;
    feeds fs;
    nb_rng rng;
    nb_value in[NB_MAX_SLOTS * 4], out[NB_MAX_SLOTS * 4], in_loss[NB_MAX_SLOTS * 4], loss;
    int n_in, n_out;
    const char *wrt[NB_MAX_SLOTS * 4]; /* the inputs that take gradients */
    int wrt_index[NB_MAX_SLOTS * 4];   /* their positions in `in` */
    int n_wrt;
    nb_op *op; /* the op under test */
} built_case;

/* The case as a program (its op in it, a loss of its outputs); free it
 * with nb_gc_built_free. */
nb_status nb_gc_build(const nb_gradcheck_case *c, uint64_t seed, built_case *w);
/* The same with the float inputs in float_dtype (float32 for the check of
 * float32 values against float64 ones). */
nb_status nb_gc_build_as(const nb_gradcheck_case *c, uint64_t seed, nb_dtype float_dtype, built_case *w);
/* A new fed input `name` of this dtype and shape with random values (its
 * tensor, held by the feeds, in *value when value is not NULL). */
nb_value nb_gc_random_input(built_case *w, const char *name, nb_var_info info, nb_tensor **value);
/* Runs program p on the case's feeds: fetches[0..n) into out. */
nb_status nb_gc_run(built_case *w, int n, const char *const *fetches, nb_tensor **out);
void nb_gc_built_free(built_case *w);
/* A random weighted sum of the float values vals[0..n), its weights fed. */
nb_value nb_gc_weighted_sum(nb_builder *b, int n, const nb_value *vals, const char *prefix, feeds *fs, nb_rng *rng);

#endif
