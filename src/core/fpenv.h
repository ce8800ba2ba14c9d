/* The floating-point mode nabla's kernels run in.
 *
 * An operand or result below the smallest normal float (a subnormal, under
 * 1.2e-38 in float32) costs x86 cores a microcode assist of a hundred cycles
 * or more per instruction. Training makes them: a softmax whose logits have
 * spread by 90 gives probabilities of 1e-39, and its gradient carries them
 * into every product of the layer below. In the conv net's benchmark, steps
 * with such gradients took 40 to 120 ms in one 16384 x 10 x 64 weight update
 * that otherwise takes 1 ms.
 *
 * So kernels run with subnormals flushed to zero (x86: MXCSR's FTZ and DAZ;
 * AArch64: FPCR.FZ), as TensorFlow and XLA run theirs. The mode is set on
 * entry to nabla's runs (a prepared program, an op) and the caller's restored
 * on the way out; the team's workers take the caller's mode with each run.
 * NABLA_FLUSH_DENORMALS=0 keeps subnormals (IEEE 754 arithmetic throughout).
 * Elsewhere these calls do nothing. */
#ifndef NABLA_CORE_FPENV_H
#define NABLA_CORE_FPENV_H

#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define NB_FP_FLUSH 0x8040u /* FTZ (bit 15) and DAZ (bit 6) */
static inline unsigned nb_fpmode_get(void) { return _mm_getcsr(); }
static inline void nb_fpmode_set(unsigned m) { _mm_setcsr(m); }
#elif defined(__aarch64__)
#define NB_FP_FLUSH (1u << 24) /* FPCR.FZ */
static inline unsigned nb_fpmode_get(void)
{
    unsigned long v;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
    return (unsigned)v;
}
static inline void nb_fpmode_set(unsigned m)
{
    unsigned long v = m;
    __asm__ __volatile__("msr fpcr, %0" : : "r"(v));
}
#else
#define NB_FP_FLUSH 0u
static inline unsigned nb_fpmode_get(void) { return 0; }
static inline void nb_fpmode_set(unsigned m) { (void)m; }
#endif

/* Whether kernels flush subnormals: NABLA_FLUSH_DENORMALS, read once, unless
 * nb_fpmode_set_flush has said otherwise. */
bool nb_fpmode_flush(void);

/* Overrides NABLA_FLUSH_DENORMALS for the process (tests check both modes). */
void nb_fpmode_set_flush(bool flush);

/* Enters the kernels' mode and returns the caller's, for nb_fpmode_leave.
 * Nested entries cost a read of the control register and nothing more. */
static inline unsigned nb_fpmode_enter(void)
{
    unsigned old = nb_fpmode_get();
    if (NB_FP_FLUSH && (old & NB_FP_FLUSH) != NB_FP_FLUSH && nb_fpmode_flush()) nb_fpmode_set(old | NB_FP_FLUSH);
    return old;
}

static inline void nb_fpmode_leave(unsigned old)
{
    if (nb_fpmode_get() != old) nb_fpmode_set(old);
}

#endif
