/* ONNX's ops that make a tensor from a shape or a size alone (EyeLike, the
 * spectral windows): constants of the import, since the shape or size is
 * known when the model is (always eagerly). */
#ifdef NABLA_HAVE_ONNX
#include <math.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)
#define TWO_PI 6.28318530717958647692

/* EyeLike: ones where the column is the row + k, of the input's shape. */
static nb_status i_eye_like(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info info = nb_value_info(B, x);
    nb_dtype dt = info.dtype;
    if (ox_attr(im, "dtype") && !ox_nabla_dtype((int)ox_attr_i(im, "dtype", 0), &dt))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "makes %s, which nabla has no dtype for",
                             ox_type_name((int)ox_attr_i(im, "dtype", 0)));
    if (info.ndim != 2) return ox_node_error(im, NB_ERR_SHAPE, "its input has %d dims, not 2", info.ndim);
    if (info.shape[0] < 0 || info.shape[1] < 0) return ox_unsupported(im, "copies a shape that only a run knows");
    nb_tensor *t;
    nb_status st = nb_tensor_new(&t, dt, 2, info.shape);
    if (st) return ox_node_error(im, st, "out of memory");
    int64_t k = ox_attr_i(im, "k", 0);
    for (int64_t r = 0; r < info.shape[0]; r++)
        for (int64_t c = 0; c < info.shape[1]; c++) nb_tensor_set(t, r * info.shape[1] + c, c - r == k);
    return ox_set_const(im, 0, t);
}

/* The cosine-sum windows: sum of a[j] cos(2 pi j n / D) over j, D the size
 * (periodic) or the size - 1 (symmetric). */
static nb_status window(ox_import *im, int n_terms, const double *a)
{
    const nb_tensor *size_t_ = ox_const_in(im, 0);
    if (!size_t_) return nb_builder_status(B);
    if (nb_tensor_numel(size_t_) != 1) return ox_node_error(im, NB_ERR_FORMAT, "its size is not one number");
    int64_t n = (int64_t)nb_tensor_get(size_t_, 0);
    nb_dtype dt = NB_F32;
    int to = (int)ox_attr_i(im, "output_datatype", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    if (!ox_nabla_dtype(to, &dt)) return ox_node_error(im, NB_ERR_UNSUPPORTED, "makes %s", ox_type_name(to));
    if (n < 0) return ox_node_error(im, NB_ERR_ARG, "its size is %lld", (long long)n);
    nb_tensor *t;
    nb_status st = nb_tensor_new(&t, dt, 1, &n);
    if (st) return ox_node_error(im, st, "out of memory");
    double d = ox_attr_i(im, "periodic", 1) ? (double)n : (double)(n - 1);
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        for (int j = 0; j < n_terms; j++) v += a[j] * cos(TWO_PI * j * (double)i / d);
        nb_tensor_set(t, i, v);
    }
    return ox_set_const(im, 0, t);
}

static nb_status i_hann(ox_import *im) { return window(im, 2, (const double[]){0.5, -0.5}); }
static nb_status i_hamming(ox_import *im) { return window(im, 2, (const double[]){25.0 / 46, -21.0 / 46}); }
static nb_status i_blackman(ox_import *im) { return window(im, 3, (const double[]){0.42, -0.5, 0.08}); }

/* clang-format off */
const ox_importer ox_imports_make[] = {
    OX_FN(EyeLike, eye_like), OX_FN(HannWindow, hann), OX_FN(HammingWindow, hamming), OX_FN(BlackmanWindow, blackman),
    {0},
};
/* clang-format on */

#endif
