/* 2-D pooling on the CPU. Planes (one channel of one image) are independent,
 * so the batch and channels are split across OpenMP threads; the typed code
 * lives in pool_impl.h, included once per dtype. */
#include <math.h>
#include <string.h>
#include "pool.h"
#ifdef NABLA_HAVE_OPENMP
#define NB_PRAGMA(x) _Pragma(#x)
#define OMP_FOR_IF(cond) NB_PRAGMA(omp parallel for schedule(static) if(cond))
#else
#define OMP_FOR_IF(cond) (void)(cond);
#endif

#define PAR_MIN_WORK 32768.0

/* The window of output index o along one axis, clipped to the image. */
static inline void window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size, int64_t *lo,
                          int64_t *hi)
{
    int64_t s = o * stride - pad, e = s + k;
    *lo = s < 0 ? 0 : s;
    *hi = e > size ? size : e;
}

#define T float
#define SFX f32
#include "pool_impl.h"
#undef T
#undef SFX

#define T double
#define SFX f64
#include "pool_impl.h"
#undef T
#undef SFX

nb_status nb_cpu_pool2d(const char *label, nb_dtype dt, const nb_pool2d_geom *g, const void *x, void *out)
{
    switch (dt) {
    case NB_F32: pool2d_f32(g, x, out); return NB_OK;
    case NB_F64: pool2d_f64(g, x, out); return NB_OK;
    default: return nb_error(NB_ERR_DTYPE, "%s: no CPU kernel for %s (float32 and float64 only)", label,
                             nb_dtype_name(dt));
    }
}

nb_status nb_cpu_pool2d_grad(const char *label, nb_dtype dt, const nb_pool2d_geom *g, const void *x,
                             const void *out, const void *dout, void *dx)
{
    switch (dt) {
    case NB_F32: pool2d_grad_f32(g, x, out, dout, dx); return NB_OK;
    case NB_F64: pool2d_grad_f64(g, x, out, dout, dx); return NB_OK;
    default: return nb_error(NB_ERR_DTYPE, "%s: no CPU kernel for %s (float32 and float64 only)", label,
                             nb_dtype_name(dt));
    }
}
