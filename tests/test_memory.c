/* The memory report of a prepared program (nb_prepared_memory): its figures
 * hang together (peak <= planned buffers <= one buffer per temporary; the
 * largest temporary live at the peak), and the planned figure is what the
 * executor really holds: an allocator that counts live bytes sees the
 * prepared program grow by that much, plus its bookkeeping, over a first
 * training step, and not at all over a second. `nabla mem` prints it
 * (tests/test_cli_program_file.sh runs it). The tape's figure
 * (nb_autograd_saved_bytes) counts what a small graph saves, and nothing
 * after its backward pass. A loop kept for its gradient keeps in each
 * iteration's scope only what the gradient block reads (shapes alone where
 * only shapes are read). */
#include <stdlib.h>
#include "test.h"
#include "control/control_exec.h"
#include "exec/scope_internal.h"

/* Live bytes through the allocation hook: each block carries its size;
 * peak_bytes is the most live at once since it was last reset. */
static size_t live_bytes, peak_bytes;

static void note_peak(void)
{
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
}

static void *c_malloc(void *ud, size_t n)
{
    (void)ud;
    size_t *p = malloc(n + 16);
    if (!p) return NULL;
    *p = n;
    live_bytes += n;
    note_peak();
    return (char *)p + 16;
}

static void *c_realloc(void *ud, void *q, size_t n)
{
    (void)ud;
    size_t *p = q ? (size_t *)((char *)q - 16) : NULL, old = p ? *p : 0;
    size_t *r = realloc(p, n + 16);
    if (!r) return NULL;
    *r = n;
    live_bytes += n - old;
    note_peak();
    return (char *)r + 16;
}

static void c_free(void *ud, void *q)
{
    (void)ud;
    if (!q) return;
    size_t *p = (size_t *)((char *)q - 16);
    live_bytes -= *p;
    free(p);
}

static const nb_allocator counting = {c_malloc, c_realloc, c_free, NULL};

/* A training program over x [batch, width] and labels y, its parameters
 * set up by the startup program: the batch dim is -1 in the program unless
 * static_batch. */
typedef struct fixture {
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_backward_result r;
    nb_scope *scope;
    nb_executor *e;
    nb_tensor *xs, *ys;
} fixture;

static void fixture_open(fixture *f, nb_value (*model)(nb_builder *, nb_value), nb_optimizer opt, int64_t batch,
                         int64_t width, bool static_batch)
{
    REQUIRE_OK(nb_program_new(&f->main_p));
    REQUIRE_OK(nb_program_new(&f->startup));
    REQUIRE_OK(nb_builder_new_record(&f->b, f->main_p, f->startup));
    const int64_t rows = static_batch ? batch : -1;
    nb_value x = nb_layer_data(f->b, "x", NB_F32, 2, S(rows, width)),
             y = nb_layer_data(f->b, "y", NB_I64, 2, S(rows, 1));
    nb_value loss = nb_layer_softmax_cross_entropy(f->b, model(f->b, x), y);
    REQUIRE_OK(nb_builder_status(f->b));
    REQUIRE_OK(nb_minimize(&opt, f->main_p, f->startup, nb_value_name(loss), NULL, &f->r));
    REQUIRE_OK(nb_scope_new(&f->scope, NULL));
    REQUIRE_OK(nb_executor_new(&f->e));
    REQUIRE_OK(nb_executor_run(f->e, f->startup, f->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    REQUIRE_OK(nb_tensor_full(&f->xs, NB_F32, 2, S(batch, width), 0.5));
    REQUIRE_OK(nb_tensor_new(&f->ys, NB_I64, 2, S(batch, 1)));
}

static void fixture_close(fixture *f)
{
    nb_tensor_release(f->xs), nb_tensor_release(f->ys);
    nb_backward_result_free(&f->r);
    nb_executor_free(f->e);
    nb_scope_free(f->scope);
    nb_builder_free(f->b);
    nb_program_free(f->main_p);
    nb_program_free(f->startup);
}

static nb_value mlp_512(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, nb_layer_fc(b, x, 512, "relu", NULL), 512, "tanh", NULL);
    return nb_layer_fc(b, h, 10, NULL, NULL);
}

/* Widths that differ widely, so that a plan made without sizes pairs
 * buffers with temporaries of other sizes. */
static nb_value mlp_uneven(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, x, 1024, "relu", NULL);
    h = nb_layer_fc(b, nb_layer_fc(b, h, 8, "tanh", NULL), 2048, "relu", NULL);
    return nb_layer_fc(b, nb_layer_fc(b, h, 16, NULL, NULL), 10, NULL, NULL);
}

static void test_report_matches_what_the_executor_holds(void)
{
    nb_set_allocator(&counting);
    fixture f;
    fixture_open(&f, mlp_512, nb_adam(1e-3), 128, 256, false);
    nb_scope *scope = f.scope;
    nb_tensor *xs = f.xs, *ys = f.ys;

    size_t before = live_bytes;
    nb_prepared *pp;
    REQUIRE_OK(nb_prepare(&pp, f.main_p, 0, NB_NAMES("x", "y"), NB_NO_NAMES));
    nb_memory_report m;
    CHECK_OK(nb_prepared_memory(pp, scope, &m));
    CHECK(m.peak_bytes == 0 && m.planned_bytes == 0); /* nothing has run */
    REQUIRE_OK(nb_prepared_run(pp, scope, (nb_tensor *[]){xs, ys}, NULL));
    nb_device_empty_cache(); /* blocks freed during the step, kept for reuse, are not the executor's */
    size_t grown = live_bytes - before;
    REQUIRE_OK(nb_prepared_memory(pp, scope, &m));
    /* Hidden activations and their gradients: 128 x 512 floats each. */
    CHECK(m.planned_bytes >= 4 * 128 * 512 * 4);
    CHECK(m.peak_bytes <= m.planned_bytes && m.planned_bytes < m.unplanned_bytes);
    CHECK(m.n_peak_vars > 0 && m.peak_var_bytes[0] <= m.peak_bytes && m.peak_op >= 0);
    for (int i = 1; i < m.n_peak_vars; i++) CHECK(m.peak_var_bytes[i] <= m.peak_var_bytes[i - 1]);
    CHECK(m.role_bytes[NB_ROLE_FORWARD] > 0 && m.role_bytes[NB_ROLE_BACKWARD] > m.role_bytes[NB_ROLE_FORWARD]);
    /* Parameters (256*512 + 512*512 + 512*10 + biases) and Adam's two moments. */
    size_t params = (size_t)(256 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10) * 4;
    CHECK(m.scope_bytes >= 3 * params && m.scope_bytes < 3 * params + 4096);
    /* What the executor allocated and kept over the first step: the planned
     * buffers, and bookkeeping (tensor headers, kernel state) beside them. */
    if (!(grown >= m.planned_bytes && grown <= m.planned_bytes + 256 * 1024))
        fprintf(stderr, "  the first step kept %zu bytes; the plan says %zu\n", grown, m.planned_bytes);
    CHECK(grown >= m.planned_bytes && grown <= m.planned_bytes + 256 * 1024);
    size_t after_first = live_bytes;
    REQUIRE_OK(nb_prepared_run(pp, scope, (nb_tensor *[]){xs, ys}, NULL));
    nb_device_empty_cache();
    if (live_bytes != after_first) fprintf(stderr, "  second step: %zd bytes\n", (ssize_t)(live_bytes - after_first));
    CHECK(live_bytes == after_first); /* the second step allocates nothing it keeps */

    nb_prepared_free(pp);
    fixture_close(&f);
    nb_set_allocator(NULL);
}

/* A program whose every shape is known (no -1 batch) is planned by size
 * when it is prepared, so that the first step runs on that plan: the report
 * gives the plan before any run, the plan stays as it is, and the first step
 * keeps no more than it. (Planned only after the first step, that step ran
 * on the plan made without sizes, whose buffers, some paired with
 * temporaries of other sizes, set the process's peak: GPT-2 124M's went to
 * 2.82 GB, against 2.34 GB over the steps after it.) */
static void test_static_shapes_planned_at_prepare(void)
{
    nb_set_allocator(&counting);
    fixture f;
    fixture_open(&f, mlp_uneven, nb_sgd(0.1), 64, 32, true);
    nb_scope *scope = f.scope;
    nb_tensor *xs = f.xs, *ys = f.ys;
    nb_prepared *pp;
    REQUIRE_OK(nb_prepare(&pp, f.main_p, 0, NB_NAMES("x", "y"), NB_NO_NAMES));
    nb_memory_report before_run, after_run;
    CHECK_OK(nb_prepared_memory(pp, scope, &before_run));
    CHECK(before_run.planned_bytes >= 2 * 64 * 2048 * 4 && before_run.peak_bytes > 0);
    for (int step = 0; step < 2; step++) {
        nb_device_empty_cache();
        size_t at_start = live_bytes;
        REQUIRE_OK(nb_prepared_run(pp, scope, (nb_tensor *[]){xs, ys}, NULL));
        nb_device_empty_cache();
        size_t kept = live_bytes - at_start;
        /* The first step allocates the planned buffers (and 256 KiB of
         * bookkeeping at most); the second nothing it keeps. */
        CHECK(step ? kept == 0 : kept >= before_run.planned_bytes && kept <= before_run.planned_bytes + 256 * 1024);
    }
    CHECK_OK(nb_prepared_memory(pp, scope, &after_run));
    CHECK(after_run.planned_bytes == before_run.planned_bytes);
    nb_prepared_free(pp);
    fixture_close(&f);
    nb_set_allocator(NULL);
}

/* The tape: h = tanh(x W), y = sum(h^2) + sum(h reshape(W)). The first
 * matmul keeps x and W, tanh its output h, the square its input (h again),
 * the first sum its input (for its shape: a rule that could do with less),
 * the second matmul h and the view of W, the second sum its input, the add
 * its two scalars. W is a parameter, alive whatever the tape does, so
 * neither it nor its view counts: x, h, h^2, the second product and the
 * scalars do. A backward pass frees them all. */
static void test_eager_saved_bytes(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x, *W;
    REQUIRE_OK(nb_tensor_full(&x, NB_F32, 2, S(64, 256), 0.01));
    REQUIRE_OK(nb_tensor_full(&W, NB_F32, 2, S(256, 512), 0.01));
    REQUIRE_OK(nb_tensor_set_requires_grad(W, true));
    nb_value w = nb_eager_value(b, W);
    nb_value h = nb_tanh(b, nb_matmul(b, nb_eager_value(b, x), w, 0));
    nb_value m = nb_matmul(b, h, nb_reshape(b, w, 2, S(512, 256)), 0);
    nb_value y = nb_add(b, nb_reduce_sum(b, nb_mul(b, h, h), 0, NULL, false), nb_reduce_sum(b, m, 0, NULL, false));
    REQUIRE_OK(nb_builder_status(b));
    nb_tensor *yt = nb_eager_tensor(y);
    size_t bytes;
    int nodes;
    REQUIRE_OK(nb_autograd_saved_bytes(NB_TENSORS(yt), &bytes, &nodes));
    size_t want = (64 * 256 + 64 * 512 + 64 * 512 + 64 * 256 + 2) * 4;
    if (bytes != want || nodes != 8)
        fprintf(stderr, "  saved %zu bytes in %d nodes, expected %zu in 8\n", bytes, nodes, want);
    CHECK(bytes == want && nodes == 8);
    REQUIRE_OK(nb_backward(NB_TENSORS(yt), NULL, 0));
    REQUIRE_OK(nb_autograd_saved_bytes(NB_TENSORS(yt), &bytes, &nodes));
    CHECK(bytes == 0 && nodes == 0);
    CHECK_ERR(nb_autograd_saved_bytes(NB_TENSORS(yt), NULL, NULL), NB_ERR_ARG, "saved bytes");
    nb_tensor_release(x), nb_tensor_release(W);
    nb_builder_free(b);
}

static void test_report_errors(void)
{
    nb_memory_report m;
    CHECK_ERR(nb_prepared_memory(NULL, NULL, &m), NB_ERR_ARG, "memory report: needs a prepared program");
}

/* An LSTM's forward op, run as in training but without the gradient ops
 * that would free its step scopes: each keeps the values the gradient
 * block reads (the gates' activations), the shape alone of those it reads
 * through sum_to's Like (the matmuls and sums), and none of the rest (the
 * pre-activation sum and its split). */
static void test_step_scopes_trimmed(void)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    nb_value x = nb_data(b, "x", NB_F32, 3, S(5, -1, 8));
    nb_value ys = nb_layer_lstm(b, x, NULL, 16, NULL, NULL);
    nb_value loss = nb_reduce_mean(b, ys, 0, NULL, false);
    REQUIRE_OK(nb_builder_status(b));
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(main_p, nb_value_name(loss), NULL, &r));
    nb_block *g = nb_program_global_block(main_p);
    const char *steps_var = NULL;
    for (int i = 0; i < g->n_ops; i++)
        if (!strcmp(g->ops[i]->def->name, "recurrent")) steps_var = g->ops[i]->outputs[0];
    REQUIRE_OK(steps_var ? NB_OK : NB_ERR_NOT_FOUND);
    nb_scope *scope;
    nb_executor *e;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_executor_new(&e));
    REQUIRE_OK(nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *xs;
    REQUIRE_OK(nb_tensor_full(&xs, NB_F32, 3, S(5, 4, 8), 0.25));
    /* The forward ops alone: a copy of the program (its gradient blocks
     * included) without the gradient ops of block 0. */
    nb_program *fwd;
    REQUIRE_OK(nb_program_clone(&fwd, main_p));
    nb_block *fb = nb_program_global_block(fwd);
    for (int i = fb->n_ops - 1; i >= 0; i--)
        if (fb->ops[i]->role == NB_ROLE_BACKWARD || !strcmp(fb->ops[i]->def->name, "ones_like"))
            nb_block_remove_op(fb, i);
    nb_prepared *pp;
    REQUIRE_OK(nb_prepare(&pp, fwd, 0, NB_NAMES("x"), NB_NAMES(nb_value_name(loss))));
    nb_tensor *out;
    REQUIRE_OK(nb_prepared_run(pp, scope, &xs, &out));
    nb_step_scopes *ss = nb_scope_attachment(scope, steps_var);
    if (!ss || ss->n != 5) printf("  step scopes under %s: %p, %d\n", steps_var, (void *)ss, ss ? ss->n : -1);
    CHECK(ss && ss->n == 5);
    for (int i = 0; ss && i < ss->n; i++) {
        const nb_scope *st = ss->step[i];
        int full = 0, shape_only = 0;
        for (int k = 0; k < nb_scope_size(st); k++) {
            const nb_tensor *t = nb_scope_tensor_at(st, k);
            bool broadcast = t->ndim > 0 && t->strides[0] == 0;
            shape_only += broadcast;
            full += !broadcast;
        }
        if (i == 0) printf("  a step scope keeps %d values and %d shapes\n", full, shape_only);
        /* The gates' pre-activations (add_2, which lstm_cell_grad reads),
         * and c and h (carried); the two products and their bias adds as
         * shapes only. (Before the gates were one op: seven values and six
         * shapes.) */
        CHECK(full == 3 && shape_only == 4);
        const nb_tensor *gates = nb_scope_find_local(st, "add_2.tmp_0"), *bias = nb_scope_find_local(st, "add_1.tmp_0");
        CHECK(gates && gates->strides[gates->ndim - 1] == 1);
        CHECK(bias && bias->strides[0] == 0);
    }
    nb_tensor_release(out);
    nb_tensor_release(xs);
    nb_prepared_free(pp);
    nb_backward_result_free(&r);
    nb_executor_free(e);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(fwd);
    nb_program_free(main_p);
    nb_program_free(startup);
}

/* A chain of elementwise ops runs in one buffer once the executor knows
 * the sizes (each op writes over the input it reads last), with the
 * results of the first run. */
static void test_elementwise_chain_in_place(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_data(b, "x", NB_F64, 1, S(-1));
    nb_value y = nb_sigmoid(b, nb_tanh(b, nb_exp(b, nb_scale(b, x, 0.5, 0))));
    nb_value s = nb_reduce_sum(b, nb_mul(b, y, y), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(b));
    nb_scope *scope;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_prepared *pp;
    REQUIRE_OK(nb_prepare(&pp, p, 0, NB_NAMES("x"), NB_NAMES(nb_value_name(s))));
    nb_tensor *xs;
    REQUIRE_OK(nb_tensor_new(&xs, NB_F64, 1, S(1000)));
    double want = 0;
    for (int i = 0; i < 1000; i++) {
        double v = sin(0.01 * i), t = 1 / (1 + exp(-tanh(exp(0.5 * v))));
        nb_tensor_set(xs, i, v);
        want += t * t;
    }
    for (int run = 0; run < 3; run++) {
        nb_tensor *out;
        REQUIRE_OK(nb_prepared_run(pp, scope, &xs, &out));
        CHECK_NEAR(nb_tensor_get(out, 0), want, 1e-9);
        nb_tensor_release(out);
    }
    nb_memory_report m;
    REQUIRE_OK(nb_prepared_memory(pp, scope, &m));
    printf("  five elementwise ops on 8000 bytes: %d buffers, %zu bytes planned, peak %zu\n", m.n_buffers,
           m.planned_bytes, m.peak_bytes);
    CHECK(m.planned_bytes <= 8000 + 64); /* one buffer of the chain's size, and the scalar's */
    CHECK(m.peak_bytes <= 8000 + 8);
    nb_tensor_release(xs);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(p);
}

/* Runs a program of x ([1000] float64) to the scalar s three times,
 * checking s against the sum of f over x; returns the planned bytes. */
static size_t run_scalar_program(nb_program *p, nb_value s, double (*f)(double))
{
    nb_scope *scope;
    nb_prepared *pp;
    nb_tensor *xs;
    if (nb_scope_new(&scope, NULL)) return 0;
    CHECK_OK(nb_prepare(&pp, p, 0, NB_NAMES("x"), NB_NAMES(nb_value_name(s))));
    CHECK_OK(nb_tensor_new(&xs, NB_F64, 1, S(1000)));
    double want = 0;
    for (int i = 0; i < 1000; i++) {
        double v = sin(0.01 * i);
        nb_tensor_set(xs, i, v);
        want += f(v);
    }
    for (int run = 0; run < 3; run++) {
        nb_tensor *out = NULL;
        CHECK_OK(nb_prepared_run(pp, scope, &xs, &out));
        if (out) CHECK_NEAR(nb_tensor_get(out, 0), want, 1e-9);
        nb_tensor_release(out);
    }
    nb_memory_report m;
    CHECK_OK(nb_prepared_memory(pp, scope, &m));
    nb_tensor_release(xs);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    return m.planned_bytes;
}

static double tanh_sq(double v) { return tanh(v) * tanh(v); }
static double exp_tanh_times_tanh(double v) { return exp(tanh(v)) * tanh(v); }

/* A view (reshape) shares its input's buffer while the input lives on, and
 * an op then writes in place over that buffer only where every value in it
 * dies: exp(f) below, with f a view of h and h read after it, must not. */
static void test_views_share_buffers(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_data(b, "x", NB_F64, 1, S(1000));
    nb_value h = nb_tanh(b, x);
    nb_value f = nb_reshape(b, h, 2, S(10, 100));
    nb_value s = nb_reduce_sum(b, nb_mul(b, f, nb_reshape(b, h, 2, S(10, 100))), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(b));
    size_t bytes = run_scalar_program(p, s, tanh_sq);
    printf("  tanh, two views of it and their product on 8000 bytes: %zu bytes planned\n", bytes);
    CHECK(bytes <= 8000 + 64); /* h, its views and the product in one buffer, and the scalar */
    nb_builder_free(b);
    nb_program_free(p);

    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    x = nb_data(b, "x", NB_F64, 1, S(1000));
    h = nb_tanh(b, x);
    nb_value g = nb_exp(b, nb_reshape(b, h, 2, S(10, 100)));
    s = nb_reduce_sum(b, nb_mul(b, g, nb_reshape(b, h, 2, S(10, 100))), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(b));
    bytes = run_scalar_program(p, s, exp_tanh_times_tanh);
    CHECK(bytes <= 16000 + 64);
    nb_builder_free(b);
    nb_program_free(p);
}

int main(void)
{
    RUN(test_elementwise_chain_in_place);
    RUN(test_views_share_buffers);
    RUN(test_step_scopes_trimmed);
    RUN(test_report_matches_what_the_executor_holds);
    RUN(test_static_shapes_planned_at_prepare);
    RUN(test_eager_saved_bytes);
    RUN(test_report_errors);
    return test_report();
}
