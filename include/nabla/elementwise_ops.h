/* nabla/elementwise_ops.h: the list of elementwise ops, one line each.
 *
 * This is the one place an elementwise op is declared. Its line gives the
 * typed call of nabla/ops.h, the op's definition and shape inference, its
 * kernel's dtypes and threading grain, and the prototypes of its VJP and JVP
 * rules; what remains to write is its math (src/kernels/cpu/unary.c or
 * elementwise.c) and its rules (src/ops/elementwise_grad*.c). See
 * docs/adding-an-op.md.
 *
 * It is an X-macro list: define the entries you need, include this file, and
 * it undefines them again.
 *
 *   NB_BINARY(name, dtypes, cost, uses_in, uses_out, doc)
 *       nb_value nb_<name>(nb_builder *b, nb_value x, nb_value y): X and Y of
 *       one dtype, broadcast as NumPy does.
 *   NB_UNARY(name, dtypes, cost, uses_in, uses_out, doc)
 *       nb_value nb_<name>(nb_builder *b, nb_value x)
 *   NB_UNARY_A1(name, dtypes, cost, uses_in, uses_out, a, a_default, doc)
 *   NB_UNARY_A2(name, dtypes, cost, uses_in, uses_out, a, a_default, b, b_default, doc)
 *       with one or two float attributes, which are also the call's last
 *       arguments and fields of the family's parameter struct.
 *
 *   dtypes    FLOAT (float32, float64) or NUMERIC (float32, float64, int32, int64)
 *   cost      CHEAP or MATH: the work per element (threads pay off sooner for MATH)
 *   uses_in   the inputs the rules read: 0, X, or X | Y
 *   uses_out  whether the rules read the output: 0 or OUT
 *
 * A few elementwise ops take more than this form says and are written out in
 * full (src/ops/elementwise.c): gelu (and its fused gradient gelu_grad),
 * clip, scale, cast. */

#ifndef NB_BINARY
#define NB_BINARY(name, dtypes, cost, uses_in, uses_out, doc)
#endif
#ifndef NB_UNARY
#define NB_UNARY(name, dtypes, cost, uses_in, uses_out, doc)
#endif
#ifndef NB_UNARY_A1
#define NB_UNARY_A1(name, dtypes, cost, uses_in, uses_out, a, a_default, doc)
#endif
#ifndef NB_UNARY_A2
#define NB_UNARY_A2(name, dtypes, cost, uses_in, uses_out, a, a_default, b, b_default, doc)
#endif

NB_BINARY(add, NUMERIC, CHEAP, X | Y, 0, "X + Y, broadcasting")
NB_BINARY(sub, NUMERIC, CHEAP, X | Y, 0, "X - Y, broadcasting")
NB_BINARY(mul, NUMERIC, CHEAP, X | Y, 0, "X * Y, broadcasting")
NB_BINARY(div, NUMERIC, CHEAP, X | Y, OUT,
          "X / Y, broadcasting; integers truncate toward zero and reject a zero divisor")
NB_BINARY(pow, FLOAT, MATH, X | Y, OUT, "X raised to the power Y, broadcasting")
NB_BINARY(maximum, NUMERIC, CHEAP, X | Y, 0, "Larger of X and Y, broadcasting; NaN if either is NaN")
NB_BINARY(minimum, NUMERIC, CHEAP, X | Y, 0, "Smaller of X and Y, broadcasting; NaN if either is NaN")

NB_UNARY(neg, NUMERIC, CHEAP, 0, 0, "-X")
NB_UNARY(abs, NUMERIC, CHEAP, X, 0, "|X|")
NB_UNARY(sign, NUMERIC, CHEAP, 0, 0, "-1, 0 or 1 by the sign of X (NaN stays NaN)")
NB_UNARY(floor, FLOAT, CHEAP, 0, 0, "The largest whole number not above X (gradient 0)")
NB_UNARY(ceil, FLOAT, CHEAP, 0, 0, "The smallest whole number not below X (gradient 0)")
NB_UNARY(round, FLOAT, CHEAP, 0, 0, "X rounded to the nearest whole number, halves to even (gradient 0)")
NB_UNARY(square, NUMERIC, CHEAP, X, 0, "X * X")
NB_UNARY(sqrt, FLOAT, MATH, 0, OUT, "Square root of X")
NB_UNARY(rsqrt, FLOAT, MATH, 0, OUT, "1 / sqrt(X)")
NB_UNARY(exp, FLOAT, MATH, 0, OUT, "e to the power X")
NB_UNARY(log, FLOAT, MATH, X, 0, "Natural logarithm of X")
NB_UNARY(log1p, FLOAT, MATH, X, 0, "log(1 + X), accurate for small X")
NB_UNARY(sin, FLOAT, MATH, X, 0, "Sine of X (radians)")
NB_UNARY(cos, FLOAT, MATH, X, 0, "Cosine of X (radians)")
NB_UNARY(tan, FLOAT, MATH, 0, OUT, "Tangent of X (radians)")
NB_UNARY(atan, FLOAT, MATH, X, 0, "Arctangent of X, in (-pi/2, pi/2)")
NB_UNARY(erf, FLOAT, MATH, X, 0, "The error function of X: 2/sqrt(pi) times the integral of exp(-t^2) from 0 to X")
NB_UNARY(tanh, FLOAT, MATH, 0, OUT, "Hyperbolic tangent of X")
NB_UNARY(sigmoid, FLOAT, MATH, 0, OUT, "1 / (1 + exp(-X)), computed without overflow")
NB_UNARY(relu, NUMERIC, CHEAP, 0, OUT, "max(X, 0)")
NB_UNARY(silu, FLOAT, MATH, X, 0, "X * sigmoid(X) (swish)")
NB_UNARY_A1(leaky_relu, FLOAT, CHEAP, X, 0, alpha, 0.01, "X if X > 0, else alpha * X")
NB_UNARY_A1(elu, FLOAT, MATH, X, OUT, alpha, 1.0, "X if X > 0, else alpha * (exp(X) - 1)")
NB_UNARY_A2(softplus, FLOAT, MATH, X, 0, beta, 1.0, threshold, 20.0,
            "log(1 + exp(beta * X)) / beta; X itself where beta * X > threshold (beta finite and nonzero)")

#undef NB_BINARY
#undef NB_UNARY
#undef NB_UNARY_A1
#undef NB_UNARY_A2
