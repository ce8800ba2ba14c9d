/* Initialisers: fans, gains and the draw each initialiser makes. Nothing
 * here knows about programs, so eager mode can reuse it as it is. */
#include <math.h>
#include <string.h>
#include "nabla/init.h"

const char *nb_init_kind_name(nb_init_kind kind)
{
    switch (kind) {
    case NB_INIT_DEFAULT: return "default";
    case NB_INIT_CONSTANT: return "constant";
    case NB_INIT_UNIFORM: return "uniform";
    case NB_INIT_NORMAL: return "normal";
    case NB_INIT_TRUNCATED_NORMAL: return "truncated_normal";
    case NB_INIT_XAVIER_UNIFORM: return "xavier_uniform";
    case NB_INIT_XAVIER_NORMAL: return "xavier_normal";
    case NB_INIT_KAIMING_UNIFORM: return "kaiming_uniform";
    case NB_INIT_KAIMING_NORMAL: return "kaiming_normal";
    }
    return "?";
}

nb_status nb_init_fans(int ndim, const int64_t *shape, int64_t *fan_in, int64_t *fan_out)
{
    char s[NB_SHAPE_STR_MAX];
    if (ndim < 2 || ndim > NB_MAX_DIMS || !shape)
        return nb_error(NB_ERR_SHAPE, "init: fan_in and fan_out need a tensor of at least 2 dimensions, got %d", ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return nb_error(NB_ERR_SHAPE, "init: shape %s has an unknown dimension; fans need known sizes",
                            nb_shape_str(s, sizeof s, ndim, shape));
    if (ndim == 2) {
        /* nabla's fc weight is [in, out], the transpose of torch's Linear. */
        *fan_in = shape[0];
        *fan_out = shape[1];
        return NB_OK;
    }
    int64_t receptive = 1;
    for (int i = 2; i < ndim; i++) receptive *= shape[i];
    *fan_in = shape[1] * receptive;
    *fan_out = shape[0] * receptive;
    return NB_OK;
}

nb_status nb_init_gain(const char *nl, double param, double *gain)
{
    static const char *const unit[] = {"linear", "conv1d", "conv2d", "conv3d", "sigmoid", "identity"};
    if (!nl || !gain) return nb_error(NB_ERR_ARG, "init gain: NULL argument");
    for (size_t i = 0; i < sizeof unit / sizeof *unit; i++)
        if (!strcmp(nl, unit[i])) return *gain = 1.0, NB_OK;
    if (!strcmp(nl, "tanh")) return *gain = 5.0 / 3.0, NB_OK;
    if (!strcmp(nl, "relu")) return *gain = sqrt(2.0), NB_OK;
    if (!strcmp(nl, "selu")) return *gain = 0.75, NB_OK;
    if (!strcmp(nl, "leaky_relu")) {
        double slope = param == 0 ? 0.01 : param;
        if (!isfinite(slope)) return nb_error(NB_ERR_ARG, "init gain: leaky_relu slope %g is not finite", slope);
        return *gain = sqrt(2.0 / (1.0 + slope * slope)), NB_OK;
    }
    return nb_error(NB_ERR_NOT_FOUND,
                    "init gain: unknown nonlinearity \"%s\" (known: linear, conv1d, conv2d, conv3d, sigmoid, "
                    "identity, tanh, relu, leaky_relu, selu)",
                    nl);
}

const char *nb_init_draw_op(nb_draw_kind kind)
{
    switch (kind) {
    case NB_DRAW_FILL: return "fill_constant";
    case NB_DRAW_UNIFORM: return "uniform_random";
    case NB_DRAW_NORMAL: return "gaussian_random";
    case NB_DRAW_TRUNCATED_NORMAL: return "truncated_gaussian_random";
    }
    return "?";
}

static nb_status draw(nb_init_draw *out, nb_draw_kind kind, double p0, double p1)
{
    *out = (nb_init_draw){kind, p0, p1};
    return NB_OK;
}

nb_status nb_init_resolve(nb_init init, int ndim, const int64_t *shape, nb_init_draw *out)
{
    const char *kind = nb_init_kind_name(init.kind);
    if (!out || (ndim > 0 && !shape) || ndim < 0 || ndim > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "init %s: bad shape or NULL output", kind);
    if (!isfinite(init.a) || !isfinite(init.b))
        return nb_error(NB_ERR_ARG, "init %s: numbers a = %g, b = %g must be finite", kind, init.a, init.b);
    bool empty = false;
    for (int i = 0; i < ndim; i++) empty |= shape[i] == 0;
    switch (init.kind) {
    case NB_INIT_DEFAULT:
        return nb_error(NB_ERR_ARG,
                        "init: NB_INIT_DEFAULT has no draw of its own; the layer picks its default "
                        "(give nb_param a real initialiser)");
    case NB_INIT_CONSTANT: return draw(out, NB_DRAW_FILL, init.a, 0);
    case NB_INIT_UNIFORM:
        if (init.a > init.b) return nb_error(NB_ERR_ARG, "init uniform: low %g is above high %g", init.a, init.b);
        return draw(out, NB_DRAW_UNIFORM, init.a, init.b);
    case NB_INIT_NORMAL:
    case NB_INIT_TRUNCATED_NORMAL:
        if (init.b < 0) return nb_error(NB_ERR_ARG, "init %s: std %g is negative", kind, init.b);
        return draw(out, init.kind == NB_INIT_NORMAL ? NB_DRAW_NORMAL : NB_DRAW_TRUNCATED_NORMAL, init.a, init.b);
    case NB_INIT_XAVIER_UNIFORM:
    case NB_INIT_XAVIER_NORMAL:
    case NB_INIT_KAIMING_UNIFORM:
    case NB_INIT_KAIMING_NORMAL: break;
    default: return nb_error(NB_ERR_ARG, "init: unknown initialiser kind %d", (int)init.kind);
    }

    int64_t fan_in, fan_out;
    nb_status st = nb_init_fans(ndim, shape, &fan_in, &fan_out);
    if (st) return nb_error_context(st, "init %s", kind);
    /* Torch leaves zero-element tensors alone; with nothing to draw, the
     * fans (possibly 0) need not make sense. */
    if (empty) return draw(out, NB_DRAW_FILL, 0, 0);
    double std;
    if (init.kind == NB_INIT_XAVIER_UNIFORM || init.kind == NB_INIT_XAVIER_NORMAL) {
        double gain = init.a == 0 ? 1.0 : init.a;
        std = gain * sqrt(2.0 / (double)(fan_in + fan_out));
    } else {
        std = sqrt(2.0 / (1.0 + init.a * init.a)) / sqrt((double)fan_in);
    }
    if (init.kind == NB_INIT_XAVIER_UNIFORM || init.kind == NB_INIT_KAIMING_UNIFORM) {
        /* U(-c, c) has std c / sqrt(3). */
        double bound = sqrt(3.0) * fabs(std);
        return draw(out, NB_DRAW_UNIFORM, -bound, bound);
    }
    return draw(out, NB_DRAW_NORMAL, 0, fabs(std));
}
