/* nabla/init.h: parameter initialisers, as torch.nn.init defines them, and
 * the calls that create initialised parameters and state through a builder.
 *
 * An nb_init names a distribution and its two numbers:
 *
 *   kind                       a                       b
 *   NB_INIT_DEFAULT            (the layer's default: torch's for that layer)
 *   NB_INIT_CONSTANT           the value               -
 *   NB_INIT_UNIFORM            low                     high      U(a, b)
 *   NB_INIT_NORMAL             mean                    std       N(a, b^2)
 *   NB_INIT_TRUNCATED_NORMAL   mean                    std       N(a, b^2) redrawn outside
 *                              [a - 2b, a + 2b] (torch's trunc_normal_(mean=a, std=b,
 *                              a=a-2b, b=a+2b); the values' own std is about 0.88 b)
 *   NB_INIT_XAVIER_UNIFORM     gain (0 means 1)        -         U(-g*sqrt(6/(fan_in+fan_out)), +...)
 *   NB_INIT_XAVIER_NORMAL      gain (0 means 1)        -         N(0, (g*sqrt(2/(fan_in+fan_out)))^2)
 *   NB_INIT_KAIMING_UNIFORM    negative slope of a     -         U(-sqrt(3)*s, sqrt(3)*s)
 *                              leaky relu (0: relu)
 *   NB_INIT_KAIMING_NORMAL     as above                -         N(0, s^2)
 *
 * where, for Kaiming (torch's kaiming_*_(a, mode="fan_in",
 * nonlinearity="leaky_relu")), s = sqrt(2 / (1 + a^2)) / sqrt(fan_in).
 * Kaiming uniform with a = sqrt(5) is torch's default for nn.Linear and
 * nn.Conv2d weights: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
 *
 * NB_INIT_DEFAULT is 0, so a zeroed nb_init (a zeroed options struct) asks
 * for the layer's default, while nb_init_constant(0) really means zeros.
 *
 * Fans follow torch's rule, read in nabla's layouts (nb_init_fans): an fc
 * weight W is [in, out] (fan_in = in, fan_out = out); a tensor of 3 or more
 * dims is a conv filter [out, in/groups, k...] (fan_in = in/groups * prod(k),
 * fan_out = out * prod(k)). Xavier and Kaiming need at least 2 dims, as in
 * torch. A tensor with no elements needs no draw: it is filled with 0.
 *
 * Random draws are seeded by the program: the initialiser ops carry seed 0,
 * so nb_program_set_seed(startup, s) decides every parameter, and one seed
 * makes a whole run reproducible. A prepared program's random ops also
 * depend on its run index, so a second run of the same startup through one
 * executor draws new values; a fresh executor (or nb_prepared_set_run_index
 * to 0) replays the first. */
#ifndef NABLA_INIT_H
#define NABLA_INIT_H

#include "nabla/export.h"

#include "nabla/builder.h"

NB_BEGIN_DECLS

typedef enum nb_init_kind {
    NB_INIT_DEFAULT = 0,
    NB_INIT_CONSTANT,
    NB_INIT_UNIFORM,
    NB_INIT_NORMAL,
    NB_INIT_TRUNCATED_NORMAL,
    NB_INIT_XAVIER_UNIFORM,
    NB_INIT_XAVIER_NORMAL,
    NB_INIT_KAIMING_UNIFORM,
    NB_INIT_KAIMING_NORMAL
} nb_init_kind;

typedef struct nb_init {
    nb_init_kind kind;
    double a, b; /* see the table above */
} nb_init;

/* One initialiser from its kind and parameters (written without compound
 * literals, so that C++ takes this header too). */
static inline nb_init nb_init_of(nb_init_kind kind, double a, double b)
{
    nb_init i;
    i.kind = kind;
    i.a = a;
    i.b = b;
    return i;
}
static inline nb_init nb_init_constant(double v) { return nb_init_of(NB_INIT_CONSTANT, v, 0); }
static inline nb_init nb_init_zeros(void) { return nb_init_constant(0); }
static inline nb_init nb_init_ones(void) { return nb_init_constant(1); }
static inline nb_init nb_init_uniform(double lo, double hi) { return nb_init_of(NB_INIT_UNIFORM, lo, hi); }
static inline nb_init nb_init_normal(double mean, double std) { return nb_init_of(NB_INIT_NORMAL, mean, std); }
static inline nb_init nb_init_truncated_normal(double mean, double std)
{
    return nb_init_of(NB_INIT_TRUNCATED_NORMAL, mean, std);
}
static inline nb_init nb_init_xavier_uniform(void) { return nb_init_of(NB_INIT_XAVIER_UNIFORM, 1, 0); }
static inline nb_init nb_init_xavier_uniform_gain(double gain) { return nb_init_of(NB_INIT_XAVIER_UNIFORM, gain, 0); }
static inline nb_init nb_init_xavier_normal(void) { return nb_init_of(NB_INIT_XAVIER_NORMAL, 1, 0); }
static inline nb_init nb_init_xavier_normal_gain(double gain) { return nb_init_of(NB_INIT_XAVIER_NORMAL, gain, 0); }
/* For relu; the _slope forms take leaky relu's negative slope. */
static inline nb_init nb_init_kaiming_uniform(void) { return nb_init_of(NB_INIT_KAIMING_UNIFORM, 0, 0); }
static inline nb_init nb_init_kaiming_uniform_slope(double a) { return nb_init_of(NB_INIT_KAIMING_UNIFORM, a, 0); }
static inline nb_init nb_init_kaiming_normal(void) { return nb_init_of(NB_INIT_KAIMING_NORMAL, 0, 0); }
static inline nb_init nb_init_kaiming_normal_slope(double a) { return nb_init_of(NB_INIT_KAIMING_NORMAL, a, 0); }

/* "kaiming_uniform", ... ("default" for NB_INIT_DEFAULT, "?" if unknown). */
NB_API const char *nb_init_kind_name(nb_init_kind kind);

/* fan_in and fan_out of a tensor of this shape, by the rule above.
 * NB_ERR_SHAPE for fewer than 2 dims or an unknown (negative) dim. */
NB_API nb_status nb_init_fans(int ndim, const int64_t *shape, int64_t *fan_in, int64_t *fan_out);

/* torch.nn.init.calculate_gain: "linear", "conv1d", "conv2d", "conv3d",
 * "sigmoid" (1), "tanh" (5/3), "relu" (sqrt 2), "leaky_relu" (sqrt(2/(1+p^2)),
 * p = negative slope, 0.01 when p is 0), "selu" (3/4). NB_ERR_NOT_FOUND for
 * other names. */
NB_API nb_status nb_init_gain(const char *nonlinearity, double param, double *gain);

/* ---- what an initialiser draws ------------------------------------------- */

/* Every initialiser comes down to one of four draws from a distribution
 * whose numbers are known once the shape is: this is the part that a static
 * program (an op in the startup program) and eager mode (the same op run at
 * once) share. */
typedef enum nb_draw_kind {
    NB_DRAW_FILL,            /* p0 = value               op fill_constant */
    NB_DRAW_UNIFORM,         /* [p0, p1)                 op uniform_random */
    NB_DRAW_NORMAL,          /* mean p0, std p1          op gaussian_random */
    NB_DRAW_TRUNCATED_NORMAL /* mean p0, std p1, +-2 std op truncated_gaussian_random */
} nb_draw_kind;

typedef struct nb_init_draw {
    nb_draw_kind kind;
    double p0, p1;
} nb_init_draw;

/* The draw that `init` makes for a tensor of this shape. NB_ERR_ARG for
 * NB_INIT_DEFAULT (a layer resolves its default first), an unknown kind, a
 * non-finite number, low > high or a negative std; NB_ERR_SHAPE where the
 * fans are needed and cannot be had (see nb_init_fans). */
NB_API nb_status nb_init_resolve(nb_init init, int ndim, const int64_t *shape, nb_init_draw *out);
/* The op that makes a draw ("fill_constant", "uniform_random", ...). */
NB_API const char *nb_init_draw_op(nb_draw_kind kind);

/* ---- creating initialised vars through a builder -------------------------- */

/* A trainable parameter `name` (NULL: a fresh "param_k") of this dtype and
 * shape (all dims known), created in the main program's global block and
 * initialised by `init` in the builder's startup program (in main itself
 * when the builder has none) with seed 0, so that the startup program's seed
 * decides it. Random initialisers need a float dtype. Errors (also a name
 * already taken) go to the builder; the result is then NB_NONE.
 *
 * In an eager builder: the tensor nb_eager_find_param(b, name) when there
 * is one (it must have this dtype and shape: NB_ERR_ARG otherwise), else a
 * new one, drawn at once by the same op the startup program would run
 * (uniform_random, gaussian_random, truncated_gaussian_random or
 * fill_constant) from the builder's generator (nb_eager_rng), and added
 * with nb_eager_add_param (a leaf that requires grad). So one seed
 * (nb_eager_set_seed) decides every eager parameter, though not with the
 * values a static program's startup draws for the same seed. */
NB_API nb_value nb_param(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape, nb_init init);

/* Persistable state that is not a parameter (batch norm's running mean and
 * variance, counters): as nb_param, but neither trainable nor a parameter,
 * and stop_gradient. In an eager builder it goes into the same store as the
 * parameters (nb_eager_find_param and nb_eager_param_at list it, as torch's
 * state dict lists buffers) with requires_grad off, so optimisers and
 * backward leave it alone; the name must not be a parameter's. */
NB_API nb_value nb_persistable_var(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                                   nb_init init);

/* A trainable parameter (nb_param_from) or persistable state
 * (nb_persistable_from) `name` holding a copy of `value` (any dtype, any
 * strides): pretrained weights, or a model read from another format. A
 * record builder sets it in the startup program by an assign_value op that
 * carries the values, so the program file holds them too; an eager builder
 * copies the tensor into its store, or, when it already holds a tensor of
 * that name (the next step of a training loop), returns that one unchanged,
 * as nb_param does. Errors go to the builder, as for nb_param. The caller's
 * tensor stays the caller's; to make a tensor itself an eager parameter,
 * shared and not copied, use nb_eager_add_param (nabla/eager.h). */
NB_API nb_value nb_param_from(nb_builder *b, const char *name, const nb_tensor *value);
NB_API nb_value nb_persistable_from(nb_builder *b, const char *name, const nb_tensor *value);

NB_END_DECLS

#endif
