/* nabla/scan_ops.h: the list of scans, one line each.
 *
 * A scan runs along one axis of X and keeps X's shape: element i of Out
 * combines the elements j <= i of X (j < i when exclusive; counted from the
 * end when reverse) by one associative operation. This is the one place a
 * scan is declared. Its line gives the typed call of nabla/ops.h, the op's
 * definition (attributes axis, exclusive and reverse; shape inference,
 * dtype and axis checks; batching under vmap), its parameters, its CPU
 * kernel's loop and table entry, and the prototypes of its VJP and JVP
 * rules; what remains to write is its combine (src/kernels/cpu/scan.c) and
 * its rules (src/ops/scan_grad.c). See docs/adding-an-op.md.
 *
 * It is an X-macro list: define NB_SCAN, include this file, and it
 * undefines it again.
 *
 *   NB_SCAN(name, dtypes, identity, uses_in, uses_out, doc)
 *       nb_value nb_<name>(nb_builder *b, nb_value x, int axis, unsigned flags),
 *       flags NB_SCAN_EXCLUSIVE and NB_SCAN_REVERSE (nabla/ops.h).
 *
 *   dtypes    FLOAT (float32, float64) or NUMERIC (float32, float64, int32, int64)
 *   identity  the value that combining with leaves unchanged, which an
 *             exclusive scan puts first (a C constant: 0 for a sum)
 *   uses_in   whether the rules read X: 0 or X
 *   uses_out  whether the rules read Out: 0 or OUT */

#ifndef NB_SCAN
#define NB_SCAN(name, dtypes, identity, uses_in, uses_out, doc)
#endif

NB_SCAN(cumsum, NUMERIC, 0, 0, 0,
        "Running sum of X along axis (exclusive: without the element itself; reverse: from the end)")
NB_SCAN(cumprod, NUMERIC, 1, X, OUT,
        "Running product of X along axis (exclusive, reverse: as cumsum); its gradient divides by X, "
        "so is not defined where X is 0")

#undef NB_SCAN
