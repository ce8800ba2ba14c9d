/* The optimiser ops: each update over three steps, in place (Param and
 * ParamOut the same tensor, as in programs), in float32 and float64,
 * against values worked out from torch.optim's update equations; the
 * learning-rate schedules at chosen steps; and the errors. */
#include "nabla/optimizer.h"
#include "test.h"

/* Every update starts from P0 and takes the gradients G[0], G[1], G[2]
 * with learning rate 0.1. */
static const double P0[2] = {1.0, -0.5};
static const double G[3][2] = {{0.5, -1.0}, {0.25, 2.0}, {-1.5, 0.5}};
#define LR 0.1

static double tol_of(nb_dtype dt) { return dt == NB_F32 ? 3e-6 : 1e-12; }

/* Runs op `type` three times. in[] lists its inputs, with in[grad_slot]
 * filled with G[s] at step s; out[] its outputs, the same tensors as the
 * inputs they update. After step s, tensor check[k] must hold
 * want[s][2k], want[s][2k+1]. */
static void run3(const char *type, nb_dtype dt, int n_in, nb_tensor **in, int grad_slot, int n_out, nb_tensor **out,
                 int n_attrs, const nb_attr *attrs, int n_check, nb_tensor *const *check, const double want[3][8])
{
    for (int s = 0; s < 3; s++) {
        in[grad_slot] = T(dt, S(2), G[s][0], G[s][1]);
        CHECK_OK(nb_op_run(type, NB_TENSORS_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), n_out, out));
        nb_tensor_release(in[grad_slot]);
        in[grad_slot] = NULL;
        for (int k = 0; k < n_check; k++) CHECK_TENSOR(check[k], S(2), tol_of(dt), want[s][2 * k], want[s][2 * k + 1]);
    }
}

static nb_tensor *param(nb_dtype dt) { return T(dt, S(2), P0[0], P0[1]); }
static nb_tensor *zeros2(nb_dtype dt) { return T(dt, S(2), 0, 0); }

static void test_registered(void)
{
    const char *updates[] = {"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"};
    for (int i = 0; i < 6; i++) {
        const nb_op_def *d = nb_op_find(updates[i]);
        CHECK(d && d->flags == (NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE) && !d->vjp);
        CHECK(d && !strcmp(d->inputs[0].name, "Param") && !strcmp(d->outputs[0].name, "ParamOut"));
    }
    const nb_op_def *d = nb_op_find("lr_schedule");
    CHECK(d && d->flags == NB_OP_NOT_DIFFERENTIABLE);
    CHECK(nb_op_find("adamw") &&
          nb_kernel_at("adamw", NB_DEVICE_CPU, 0)->run == nb_kernel_at("adam", NB_DEVICE_CPU, 0)->run);
}

/* p -= 0.1 g: 1 - 0.05 - 0.025 + 0.15 = 1.075; -0.5 + 0.1 - 0.2 - 0.05 = -0.65. */
static void test_sgd(void)
{
    static const double want[3][8] = {{0.95, -0.4}, {0.925, -0.6}, {1.075, -0.65}};
    for (int dt = NB_F32; dt <= NB_F64; dt++) {
        nb_tensor *p = param(dt), *lr = tscalar(dt, LR); /* a 0-d rate */
        nb_tensor *in[3] = {p, NULL, lr}, *out[1] = {p};
        run3("sgd", dt, 3, in, 1, 1, out, 0, NULL, 1, &p, want);
        CHECK(out[0] == p);
        release_all(p, lr, NULL);
    }
}

/* Outputs that are not the inputs: Param stays as it was. */
static void test_sgd_fresh_output(void)
{
    nb_tensor *p = param(NB_F64), *g = T(NB_F64, S(2), 0.5, -1.0), *lr = T(NB_F64, S(1), LR);
    nb_tensor *out[1] = {NULL};
    CHECK_OK(nb_op_run("sgd", NB_TENSORS(p, g, lr), NB_NO_ATTRS, 1, out));
    CHECK_TENSOR(out[0], S(2), 1e-15, 0.95, -0.4);
    CHECK_TENSOR(p, S(2), 0, 1.0, -0.5);
    release_all(p, g, lr, out[0], NULL);
}

/* v = 0.9 v + g; p -= 0.1 v (or 0.1 (g + 0.9 v)): step 1 has v = g, so p =
 * 1 - 0.05 = 0.95, or 1 - 0.1 (0.5 + 0.45) = 0.905. Columns: p, v. */
static void test_momentum(void)
{
    static const double plain[3][8] = {{0.95, -0.4, 0.5, -1}, {0.88, -0.51, 0.7, 1.1}, {0.967, -0.659, -0.87, 1.49}};
    static const double nesterov[3][8] = {
        {0.905, -0.31, 0.5, -1}, {0.817, -0.609, 0.7, 1.1}, {1.0453, -0.7931, -0.87, 1.49}};
    for (int dt = NB_F32; dt <= NB_F64; dt++)
        for (int nest = 0; nest < 2; nest++) {
            nb_tensor *p = param(dt), *v = zeros2(dt), *lr = T(dt, S(1), LR);
            nb_tensor *in[4] = {p, NULL, v, lr}, *out[2] = {p, v};
            nb_attr a[] = {NB_ATTR_FLOAT("mu", 0.9), NB_ATTR_BOOL("use_nesterov", nest)};
            run3("momentum", dt, 4, in, 1, 2, out, 2, a, 2, (nb_tensor *[]){p, v}, nest ? nesterov : plain);
            release_all(p, v, lr, NULL);
        }
}

/* The expected values of adam, rmsprop and adagrad were computed in Python
 * (double precision) with the update equations of nabla/optimizer.h, which
 * are torch.optim's:
 *   for t, g in enumerate(G, 1):
 *       p *= 1 - lr*wd; m += (1-b1)*(g-m); v = v*b2 + (1-b2)*g*g
 *       p -= lr/(1-b1**t) * (m / (sqrt(v)/sqrt(1-b2**t) + eps))
 * and likewise for the others. Columns: p, then each state. */
static void test_adam(void)
{
    static const double adam[3][8] = {
        {0.90000000199999997, -0.40000000099999999, 0.05, -0.1, 0.00025, 0.001},
        {0.80678204047746238, -0.43661035347207483, 0.07, 0.11, 0.00031225, 0.004999},
        {0.84150439079818218, -0.47817547314677378, -0.087, 0.149, 0.00256193775, 0.005244001}};
    static const double adamw[3][8] = {
        {0.89000000199999996, -0.39500000099999999, 0.05, -0.1, 0.00025, 0.001},
        {0.78788204045746224, -0.42766035346207482, 0.07, 0.11, 0.00031225, 0.004999},
        {0.81472557037360738, -0.46494886960215304, -0.087, 0.149, 0.00256193775, 0.005244001}};
    for (int dt = NB_F32; dt <= NB_F64; dt++)
        for (int w = 0; w < 3; w++) {
            /* w = 0: adam; 1: adam with weight_decay; 2: adamw with its default weight_decay 0.01 */
            nb_tensor *p = param(dt), *m = zeros2(dt), *v = zeros2(dt), *lr = T(dt, S(1), LR);
            nb_tensor *b1p = T(dt, S(1), 0.9), *b2p = T(dt, S(1), 0.999);
            nb_tensor *in[7] = {p, NULL, m, v, lr, b1p, b2p}, *out[5] = {p, m, v, b1p, b2p};
            nb_attr a[] = {NB_ATTR_FLOAT("weight_decay", 0.1)};
            if (w < 2) {
                run3("adam", dt, 7, in, 1, 5, out, w, a, 3, (nb_tensor *[]){p, m, v}, w ? adamw : adam);
            } else {
                /* 0.01 instead of 0.1: only the first step is easy to state. */
                in[1] = T(dt, S(2), G[0][0], G[0][1]);
                CHECK_OK(nb_op_run("adamw", NB_TENSORS_N(7, in), NB_NO_ATTRS, 5, out));
                CHECK_TENSOR(p, S(2), tol_of(dt), 1 * (1 - LR * 0.01) - 0.099999998,
                             -0.5 * (1 - LR * 0.01) + 0.099999999);
                nb_tensor_release(in[1]);
            }
            /* The pows leave holding beta^(t+1). */
            if (w < 2) {
                CHECK_TENSOR(b1p, S(1), tol_of(dt), 0.6561);
                CHECK_TENSOR(b2p, S(1), tol_of(dt), 0.999 * 0.999 * 0.999 * 0.999);
            }
            release_all(p, m, v, lr, b1p, b2p, NULL);
        }
}

/* rho 0.99, eps 1e-8; momentum 0.5 through a Moment buffer; centered adds
 * MeanGrad. Columns: p, mean square, moment, mean grad. */
static void test_rmsprop(void)
{
    static const double plain[3][8] = {{1.9999996059283376e-07, 0.49999990000000971, 0.0025, 0.01},
                                       {-0.44901297442182964, -0.39532302199152181, 0.0031, 0.0499},
                                       {0.48905510990785306, -0.61479653863255501, 0.025569, 0.051901}};
    static const double mom[3][8] = {
        {1.9999996059283376e-07, 0.49999990000000971, 0.0025, 0.01, 9.9999980000003941, -9.9999990000000967},
        {-0.94901287442184934, 0.10467692800848305, 0.0031, 0.0499, 9.4901307442180993, 3.9532297199152664},
        {-0.48545132730307167, -0.31245807462831349, 0.025569, 0.051901, -4.6356154711877764, 4.171350026367965}};
    static const double centered[3][8] = {{-0.0050376132390501649, 0.50503771424912069, 0.0025, 0.01,
                                           10.050376132390502, -10.050377142491207, 0.005, -0.01},
                                          {-0.96064395977741746, 0.11131709469566209, 0.0031, 0.0499,
                                           9.5560634653836729, 3.9372061955345856, 0.00745, 0.0101},
                                          {-0.49931084359768357, -0.30549394846705724, 0.025569, 0.051901,
                                           -4.6133311617973387, 4.1681104316271931, -0.0076245, 0.014999}};
    for (int dt = NB_F32; dt <= NB_F64; dt++)
        for (int kind = 0; kind < 3; kind++) {
            nb_tensor *p = param(dt), *sq = zeros2(dt), *buf = zeros2(dt), *mg = zeros2(dt), *lr = T(dt, S(1), LR);
            nb_tensor *in[6] = {p, NULL, sq, lr, buf, mg}, *out[4] = {p, sq, buf, mg};
            nb_attr a[] = {NB_ATTR_FLOAT("momentum", kind ? 0.5 : 0.0), NB_ATTR_BOOL("centered", kind == 2)};
            int n = 4 + (kind >= 1) + (kind == 2);
            run3("rmsprop", dt, n, in, 1, n - 2, out, 2, a, n - 2, (nb_tensor *[]){p, sq, buf, mg},
                 kind == 0       ? plain
                     : kind == 1 ? mom
                                 : centered);
            release_all(p, sq, buf, mg, lr, NULL);
        }
}

/* The accumulator starts at 0.1 (initial_accumulator_value); eps 1e-10.
 * Step 1: s = 0.1 + 0.25, p = 1 - 0.1 * 0.5 / sqrt(0.35). */
static void test_adagrad(void)
{
    static const double want[3][8] = {{0.91548457454143406, -0.40465374108453167, 0.35, 1.1},
                                      {0.8765596273394185, -0.49321522963461961, 0.4125, 5.1},
                                      {0.96848733928916908, -0.51483211469204093, 2.6625, 5.35}};
    for (int dt = NB_F32; dt <= NB_F64; dt++) {
        nb_tensor *p = param(dt), *s = T(dt, S(2), 0.1, 0.1), *lr = T(dt, S(1), LR);
        nb_tensor *in[4] = {p, NULL, s, lr}, *out[2] = {p, s};
        run3("adagrad", dt, 4, in, 1, 2, out, 0, NULL, 2, (nb_tensor *[]){p, s}, want);
        release_all(p, s, lr, NULL);
    }
}

/* A float32 learning rate drives a float64 parameter (the rate is read as
 * a number); 0.25 is exact in both. */
static void test_lr_dtype_independent(void)
{
    nb_tensor *p = param(NB_F64), *g = T(NB_F64, S(2), 1, 2), *lr = T(NB_F32, S(1), 0.25);
    CHECK_OK(nb_op_run("sgd", NB_TENSORS(p, g, lr), NB_NO_ATTRS, 1, (nb_tensor *[]){p}));
    CHECK_TENSOR(p, S(2), 0, 0.75, -1.0);
    release_all(p, g, lr, NULL);
}

static void test_update_errors(void)
{
    nb_tensor *p = param(NB_F64), *g3 = T(NB_F64, S(3), 1, 2, 3), *g32 = T(NB_F32, S(2), 1, 2);
    nb_tensor *lr2 = T(NB_F64, S(2), 0.1, 0.1), *lr = T(NB_F64, S(1), 0.1), *g = T(NB_F64, S(2), 1, 2);
    nb_tensor *pi = T(NB_I64, S(2), 1, 2), *gi = T(NB_I64, S(2), 1, 2), *z = zeros2(NB_F64);
    nb_tensor *out = NULL;
    CHECK_ERR(nb_op_run("sgd", NB_TENSORS(p, g3, lr), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE, "Grad is float64 [3]");
    CHECK_ERR(nb_op_run("sgd", NB_TENSORS(p, g32, lr), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE, "Grad is float32");
    CHECK_ERR(nb_op_run("sgd", NB_TENSORS(p, g, lr2), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "LearningRate has shape [2]");
    CHECK_ERR(nb_op_run("sgd", NB_TENSORS(pi, gi, lr), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE, "Param is int64");
    CHECK_ERR(nb_op_run("momentum", NB_TENSORS(p, g, z, lr), NB_ATTRS(NB_ATTR_FLOAT("mu", -1)), 2,
                        (nb_tensor *[]){NULL, NULL}),
              NB_ERR_ARG, "'mu' is -1");
    CHECK_ERR(nb_op_run("momentum", NB_TENSORS(p, g, z, lr),
                        NB_ATTRS(NB_ATTR_FLOAT("mu", 0), NB_ATTR_BOOL("use_nesterov", true)), 2,
                        (nb_tensor *[]){NULL, NULL}),
              NB_ERR_ARG, "Nesterov");
    nb_tensor *b1p = T(NB_F64, S(1), 0.9), *one = T(NB_F64, S(1), 1.0), *outs[5] = {0};
    CHECK_ERR(nb_op_run("adam", NB_TENSORS(p, g, z, z, lr, b1p, b1p), NB_ATTRS(NB_ATTR_FLOAT("beta1", 1.0)), 5, outs),
              NB_ERR_ARG, "'beta1' is 1");
    CHECK_ERR(nb_op_run("adam", NB_TENSORS(p, g, z, z, lr, one, b1p), NB_NO_ATTRS, 5, outs), NB_ERR_ARG, "Beta1Pow 1");
    CHECK_ERR(nb_op_run("rmsprop", NB_TENSORS(p, g, z, lr), NB_ATTRS(NB_ATTR_FLOAT("momentum", 0.5)), 2, outs),
              NB_ERR_ARG, "no Moment input");
    CHECK_ERR(nb_op_run("rmsprop", NB_TENSORS(p, g, z, lr, NULL, z), NB_ATTRS(NB_ATTR_BOOL("centered", true)), 3, outs),
              NB_ERR_ARG, "needs a Moment input too");
    CHECK_ERR(nb_op_run("rmsprop", NB_TENSORS(p, g, z, lr, z), NB_NO_ATTRS, 2, outs), NB_ERR_ARG,
              "2 outputs given but its inputs need 3");
    /* Writing in place into a tensor of the wrong shape is refused. */
    CHECK_ERR(nb_op_run("sgd", NB_TENSORS(p, g, lr), NB_NO_ATTRS, 1, (nb_tensor *[]){g3}), NB_ERR_SHAPE, "output 0");
    CHECK(!out && !outs[0]);
    CHECK_TENSOR(p, S(2), 0, 1.0, -0.5);
    release_all(p, g3, g32, lr2, lr, g, pi, gi, z, b1p, one, NULL);
}

/* ---- lr_schedule ---------------------------------------------------------------------- */

/* The rate the op gives update t, with the schedule's attributes. */
static double lr_at(int64_t t, nb_dtype step_dt, int n_attrs, const nb_attr *attrs)
{
    nb_tensor *step = T(step_dt, S(1), (double)t), *out = NULL;
    double v = NAN;
    CHECK_OK(nb_op_run("lr_schedule", NB_TENSORS(step), NB_ATTRS_N(n_attrs, attrs), 1, &out));
    if (out) {
        CHECK(out->dtype == NB_F32 && out->ndim == 1 && out->shape[0] == 1);
        v = nb_tensor_get(out, 0);
    }
    release_all(step, out, NULL);
    return v;
}

#define LR_AT(t, ...) lr_at((t), NB_I64, (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), (nb_attr[]){__VA_ARGS__})

static void test_schedule_values(void)
{
    const double tol = 1e-7; /* float32 output */
    CHECK_NEAR(LR_AT(1, NB_ATTR_FLOAT("base_lr", 0.1)), 0.1, tol);
    CHECK_NEAR(LR_AT(1000, NB_ATTR_FLOAT("base_lr", 0.1)), 0.1, tol);
    /* step: s = t - 1 updates made; gamma^floor(s / 2). */
    nb_attr step[] = {NB_ATTR_STRING("kind", "step"), NB_ATTR_FLOAT("base_lr", 1), NB_ATTR_INT("step_size", 2),
                      NB_ATTR_FLOAT("gamma", 0.5)};
    const double step_want[] = {1, 1, 0.5, 0.5, 0.25};
    for (int t = 1; t <= 5; t++) CHECK_NEAR(lr_at(t, NB_I64, 4, step), step_want[t - 1], tol);
    /* exponential: gamma^s. */
    nb_attr ex[] = {NB_ATTR_STRING("kind", "exponential"), NB_ATTR_FLOAT("base_lr", 1), NB_ATTR_FLOAT("gamma", 0.9)};
    CHECK_NEAR(lr_at(1, NB_I64, 3, ex), 1.0, tol);
    CHECK_NEAR(lr_at(3, NB_I64, 3, ex), 0.81, tol);
    /* cosine over 4 updates from 1 to 0.1: s = 2 is half way, s >= 4 stays at 0.1. */
    nb_attr cs[] = {NB_ATTR_STRING("kind", "cosine"), NB_ATTR_FLOAT("base_lr", 1), NB_ATTR_INT("total_steps", 4),
                    NB_ATTR_FLOAT("min_lr", 0.1)};
    CHECK_NEAR(lr_at(1, NB_I64, 4, cs), 1.0, tol);
    CHECK_NEAR(lr_at(2, NB_I64, 4, cs), 0.1 + 0.9 * (1 + sqrt(0.5)) / 2, tol);
    CHECK_NEAR(lr_at(3, NB_I64, 4, cs), 0.55, tol);
    CHECK_NEAR(lr_at(5, NB_I64, 4, cs), 0.1, tol);
    CHECK_NEAR(lr_at(9, NB_I64, 4, cs), 0.1, tol);
    /* The step may be a float counter too. */
    CHECK_NEAR(lr_at(3, NB_F32, 4, cs), 0.55, tol);
    CHECK_NEAR(lr_at(3, NB_F64, 4, cs), 0.55, tol);
}

static void test_schedule_warmup(void)
{
    const double tol = 1e-7;
    /* Constant 0.2 after 4 warm-up updates: 0.05, 0.1, 0.15, 0.2, then 0.2. */
    nb_attr c[] = {NB_ATTR_FLOAT("base_lr", 0.2), NB_ATTR_INT("warmup_steps", 4)};
    const double cw[] = {0.05, 0.1, 0.15, 0.2, 0.2, 0.2};
    for (int t = 1; t <= 6; t++) CHECK_NEAR(lr_at(t, NB_I64, 2, c), cw[t - 1], tol);
    CHECK_NEAR(lr_at(0, NB_I64, 2, c), 0.0, tol);
    /* Halving every update after 2 warm-up updates: the schedule starts when
     * the warm-up ends. */
    nb_attr s[] = {NB_ATTR_STRING("kind", "step"), NB_ATTR_FLOAT("base_lr", 1), NB_ATTR_INT("step_size", 1),
                   NB_ATTR_FLOAT("gamma", 0.5), NB_ATTR_INT("warmup_steps", 2)};
    const double sw[] = {0.5, 1, 1, 0.5, 0.25};
    for (int t = 1; t <= 5; t++) CHECK_NEAR(lr_at(t, NB_I64, 5, s), sw[t - 1], tol);
}

static void test_schedule_dtype_and_errors(void)
{
    nb_tensor *step = T(NB_I64, S(1), 3), *out = NULL;
    nb_attr a[] = {NB_ATTR_STRING("kind", "exponential"), NB_ATTR_FLOAT("base_lr", 0.1), NB_ATTR_FLOAT("gamma", 0.9),
                   NB_ATTR_INT("dtype", NB_F64)};
    CHECK_OK(nb_op_run("lr_schedule", NB_TENSORS(step), NB_ATTRS_N(4, a), 1, &out));
    CHECK(out && out->dtype == NB_F64);
    if (out) CHECK_TENSOR(out, S(1), 1e-15, 0.1 * 0.81);
    nb_tensor_release(out);
    out = NULL;
    nb_tensor *two = T(NB_I64, S(2), 1, 2), *b = T(NB_BOOL, S(1), 1);
    CHECK_ERR(nb_op_run("lr_schedule", NB_TENSORS(two), NB_ATTRS(NB_ATTR_FLOAT("base_lr", 1)), 1, &out), NB_ERR_SHAPE,
              "Step has shape [2]");
    CHECK_ERR(nb_op_run("lr_schedule", NB_TENSORS(b), NB_ATTRS(NB_ATTR_FLOAT("base_lr", 1)), 1, &out), NB_ERR_DTYPE,
              "Step is bool");
    CHECK_ERR(nb_op_run("lr_schedule", NB_TENSORS(step), NB_NO_ATTRS, 1, &out), NB_ERR_ARG, "base_lr");
    CHECK_ERR(nb_op_run("lr_schedule", NB_TENSORS(step),
                        NB_ATTRS(NB_ATTR_STRING("kind", "linear"), NB_ATTR_FLOAT("base_lr", 1)), 1, &out),
              NB_ERR_ARG, "kind \"linear\"");
    CHECK_ERR(
        nb_op_run("lr_schedule", NB_TENSORS(step),
                  NB_ATTRS(NB_ATTR_STRING("kind", "step"), NB_ATTR_FLOAT("base_lr", 1), NB_ATTR_FLOAT("gamma", 0)), 1,
                  &out),
        NB_ERR_ARG, "gamma is 0");
    CHECK_ERR(
        nb_op_run("lr_schedule", NB_TENSORS(step),
                  NB_ATTRS(NB_ATTR_STRING("kind", "step"), NB_ATTR_FLOAT("base_lr", 1), NB_ATTR_INT("step_size", 0)), 1,
                  &out),
        NB_ERR_ARG, "step_size is 0");
    CHECK_ERR(nb_op_run("lr_schedule", NB_TENSORS(step),
                        NB_ATTRS(NB_ATTR_STRING("kind", "cosine"), NB_ATTR_FLOAT("base_lr", 1)), 1, &out),
              NB_ERR_ARG, "total_steps");
    CHECK_ERR(nb_op_run("lr_schedule", NB_TENSORS(step),
                        NB_ATTRS(NB_ATTR_FLOAT("base_lr", 1), NB_ATTR_INT("dtype", NB_I32)), 1, &out),
              NB_ERR_DTYPE, "dtype");
    CHECK(!out);
    release_all(step, two, b, NULL);
}

/* nb_lr_at gives what the op gives, and refuses what the op refuses. */
static void test_lr_at(void)
{
    double v = 0;
    nb_lr_schedule s = {.kind = "step", .step_size = 2, .gamma = 0.5, .warmup_steps = 1};
    CHECK_OK(nb_lr_at(&s, 1.0, 1, &v));
    CHECK_NEAR(v, 1.0, 0);
    CHECK_OK(nb_lr_at(&s, 1.0, 4, &v)); /* s = 2 */
    CHECK_NEAR(v, 0.5, 0);
    nb_lr_schedule none = {0};
    CHECK_OK(nb_lr_at(&none, 0.3, 77, &v));
    CHECK_NEAR(v, 0.3, 0);
    nb_lr_schedule bad = {.kind = "cosine"};
    CHECK_ERR(nb_lr_at(&bad, 1.0, 1, &v), NB_ERR_ARG, "total_steps");
    CHECK_ERR(nb_lr_at(&none, -1.0, 1, &v), NB_ERR_ARG, "base_lr is -1");
}

int main(void)
{
    RUN(test_registered);
    RUN(test_sgd);
    RUN(test_sgd_fresh_output);
    RUN(test_momentum);
    RUN(test_adam);
    RUN(test_rmsprop);
    RUN(test_adagrad);
    RUN(test_lr_dtype_independent);
    RUN(test_update_errors);
    RUN(test_schedule_values);
    RUN(test_schedule_warmup);
    RUN(test_schedule_dtype_and_errors);
    RUN(test_lr_at);
    return test_report();
}
