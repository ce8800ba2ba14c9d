/* What tests/test_onnx_torch.sh asks of nabla for each PyTorch export that
 * tests/onnx_torch_gen.py wrote:
 *
 *   onnx_torch_check MODEL.onnx CASE.npz
 *
 * imports the model twice, on the inputs in<i> of CASE.npz: eagerly in test
 * mode (torch's eval mode), differentiating on the tape, and as a static
 * program whose graph inputs are data vars, run through its test copy with
 * nb_gradients appended. Each time it compares every output with out<j>
 * and the gradient of L = sum_j sum(out<j> * r<j>) with torch autograd's:
 * with respect to each float input (gin<i>) and to each parameter the
 * import made of an initializer (p:<name>). Prints, per mode,
 *
 *   result MODEL MODE import=1 eval=1 grad=1 (worst differences)
 *
 * with 0 for a stage that failed (and - for one not reached), and exits 1
 * unless all hold in both modes. A difference counts as |got - want| over
 * max(1, max |want|): the gradients of a sum over many outputs grow with it.
 *
 * For tests/test_onnx_ort.sh, which runs nabla's exports in ONNX Runtime:
 *
 *   onnx_torch_check --outputs MODEL.onnx INPUTS.npz DIR
 *   onnx_torch_check --export MODEL.onnx INPUTS.npz OUT.onnx DIR
 *
 * write the inputs (DIR/in<i>.npy) and the static import's eval outputs
 * (DIR/nabla_out<j>.npy); --export also exports the imported program to
 * OUT.onnx, exiting 3 (and saying why) where nb_onnx_export refuses it. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"

#define MAX_IO 16
#define TOLERANCE 2e-4

/* The largest difference between got and want, scaled as above; INFINITY
 * when their shapes differ. */
static double difference(const char *what, nb_tensor *got, nb_tensor *want)
{
    if (!got) return fprintf(stderr, "  %s: no value\n", what), INFINITY;
    if (!nb_shape_equal(got->ndim, got->shape, want->ndim, want->shape)) {
        char a[64], b[64];
        fprintf(stderr, "  %s: shape %s, torch's %s\n", what, nb_shape_str(a, sizeof a, got->ndim, got->shape),
                nb_shape_str(b, sizeof b, want->ndim, want->shape));
        return INFINITY;
    }
    int64_t n = nb_tensor_numel(want);
    double scale = 1, worst = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(nb_tensor_get(want, i)));
    nb_tensor *c;
    if (nb_tensor_contiguous(&c, got)) return INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(nb_tensor_get(c, i) - nb_tensor_get(want, i)) / scale;
        if (!(d <= worst)) worst = d;
    }
    nb_tensor_release(c);
    if (!(worst <= TOLERANCE)) fprintf(stderr, "  %s: differs from torch by %.3g\n", what, worst);
    return worst;
}

static nb_tensor *member(nb_npz *z, const char *prefix, int i)
{
    char name[32];
    snprintf(name, sizeof name, "%s%d", prefix, i);
    return nb_npz_find(z, name);
}

typedef struct outcome {
    int imported, eval, grad; /* 1 held, 0 failed, -1 not reached */
    double eval_diff, grad_diff;
    int n_grads;
} outcome;

/* What one way of running the import computed, to compare with torch:
 * outs[j], gin[i] (NULL where in<i> takes no gradient) and grads[k], the
 * gradient of the k-th "p:" member's parameter (NULL: none reached it). */
typedef struct computed {
    int n_out;
    nb_tensor *outs[MAX_IO], *gin[MAX_IO], **grads;
    bool *is_param; /* whether the k-th "p:" initializer became a parameter */
} computed;

static int count(nb_npz *z, const char *prefix)
{
    int n = 0;
    while (n < MAX_IO && member(z, prefix, n)) n++;
    return n;
}

static int n_param_grads(nb_npz *z)
{
    int n = 0;
    for (int k = 0; k < nb_npz_count(z); k++) n += !strncmp(nb_npz_name(z, k), "p:", 2);
    return n;
}

/* A gradient nothing reached is zero. */
static double grad_difference(const char *what, nb_tensor *got, nb_tensor *want)
{
    if (got) return difference(what, got, want);
    double worst = 0;
    for (int64_t i = 0; i < nb_tensor_numel(want); i++) worst = fmax(worst, fabs(nb_tensor_get(want, i)));
    if (worst > TOLERANCE) fprintf(stderr, "  %s: no gradient, torch's is not zero\n", what);
    return worst;
}

static void compare(nb_npz *z, const computed *c, outcome *o)
{
    int n_want = count(z, "out");
    if (c->n_out != n_want) fprintf(stderr, "  %d outputs, torch's %d\n", c->n_out, n_want), o->eval_diff = INFINITY;
    for (int j = 0; j < c->n_out && j < n_want; j++) {
        char what[32];
        snprintf(what, sizeof what, "out%d", j);
        o->eval_diff = fmax(o->eval_diff, difference(what, c->outs[j], member(z, "out", j)));
    }
    o->eval = o->eval_diff <= TOLERANCE;
    for (int i = 0, n_in = count(z, "in"); i < n_in; i++) {
        nb_tensor *want = member(z, "gin", i);
        if (!want) continue;
        char what[32];
        snprintf(what, sizeof what, "d/d in%d", i);
        o->grad_diff = fmax(o->grad_diff, grad_difference(what, c->gin[i], want));
        o->n_grads++;
    }
    for (int k = 0, q = 0; k < nb_npz_count(z); k++) {
        const char *name = nb_npz_name(z, k);
        if (strncmp(name, "p:", 2)) continue;
        char what[300];
        snprintf(what, sizeof what, "d/d %.280s", name + 2);
        if (!c->is_param[q]) {
            fprintf(stderr, "  initializer %s did not become a parameter\n", name + 2);
            o->grad_diff = INFINITY;
        } else {
            o->grad_diff = fmax(o->grad_diff, grad_difference(what, c->grads[q], nb_npz_tensor(z, k)));
        }
        q++, o->n_grads++;
    }
    o->grad = o->grad_diff <= TOLERANCE;
}

static void computed_free(computed *c, int n_params)
{
    for (int j = 0; j < MAX_IO; j++) nb_tensor_release(c->outs[j]), nb_tensor_release(c->gin[j]);
    for (int k = 0; k < n_params; k++) nb_tensor_release(c->grads[k]);
}

/* ---- eager: the tape of an eager builder in test mode ---------------------- */

static void run_eager(const char *model, nb_npz *z, computed *c, outcome *o)
{
    nb_builder *b;
    nb_tensor *in[MAX_IO];
    nb_value in_v[MAX_IO], out[MAX_IO], terms[MAX_IO];
    int n_in = count(z, "in"), n_r = count(z, "r");
    if (nb_builder_new_eager(&b)) return;
    nb_eager_set_test_mode(b, true);
    for (int i = 0; i < n_in; i++) {
        if (nb_tensor_clone(&in[i], member(z, "in", i))) return;
        if (in[i]->dtype == NB_F32) nb_tensor_set_requires_grad(in[i], true);
        in_v[i] = nb_eager_value(b, in[i]);
    }
    o->imported = !nb_onnx_import(model, b, NB_VALUES_N(n_in, in_v), MAX_IO, out, &c->n_out);
    if (!o->imported) {
        fprintf(stderr, "  eager import: %s\n", nb_last_error());
        goto done;
    }
    int n_terms = c->n_out < n_r ? c->n_out : n_r;
    for (int j = 0; j < c->n_out; j++) c->outs[j] = nb_tensor_retain(nb_eager_tensor(out[j]));
    for (int j = 0; j < n_terms; j++)
        terms[j] = nb_reduce_sum(b, nb_mul(b, out[j], nb_eager_value(b, member(z, "r", j))), 0, NULL, false);
    nb_tensor *l = nb_eager_tensor(nb_sum(b, n_terms, terms));
    if (nb_builder_status(b) || !l || nb_backward(NB_TENSORS(l), NULL, 0)) {
        fprintf(stderr, "  eager backward: %s\n", nb_last_error());
        o->grad = 0;
        goto done;
    }
    for (int i = 0; i < n_in; i++) c->gin[i] = nb_tensor_retain(nb_tensor_grad(in[i]));
    for (int k = 0, q = 0; k < nb_npz_count(z); k++) {
        if (strncmp(nb_npz_name(z, k), "p:", 2)) continue;
        nb_tensor *p = nb_eager_find_param(b, nb_npz_name(z, k) + 2);
        c->is_param[q] = p != NULL;
        c->grads[q++] = p ? nb_tensor_retain(nb_tensor_grad(p)) : NULL;
    }
    compare(z, c, o);
done:
    for (int i = 0; i < n_in; i++) nb_tensor_release(in[i]);
    nb_builder_free(b);
}

/* ---- static: a recorded program's test copy and nb_gradients --------------- */

typedef struct recorded {
    nb_program *main, *startup, *test;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *e;
    const char *names[2 * MAX_IO + 64]; /* fetches: the outputs, the loss, then the gradients */
    const char *inputs[MAX_IO];         /* the graph inputs' data vars, in order */
    int n_inputs;
    nb_feed feeds[2 * MAX_IO];
} recorded;

/* Records the import and the loss; the graph inputs become data vars. */
static nb_status record(recorded *r, const char *model, nb_npz *z, int *n_out)
{
    nb_status st;
    nb_value out[MAX_IO], terms[MAX_IO];
    if ((st = nb_program_new(&r->main)) || (st = nb_program_new(&r->startup)) ||
        (st = nb_builder_new_record(&r->b, r->main, r->startup)))
        return st;
    if ((st = nb_onnx_import(model, r->b, NB_NO_VALUES, MAX_IO, out, n_out))) return st;
    const nb_block *g = nb_program_global_block(r->main);
    for (int i = 0; i < g->n_vars && r->n_inputs < MAX_IO; i++)
        if (g->vars[i]->is_data) r->inputs[r->n_inputs++] = g->vars[i]->name;
    if (r->n_inputs != count(z, "in"))
        return nb_error(NB_ERR_ARG, "the model has %d inputs, the case %d", r->n_inputs, count(z, "in"));
    int n_terms = *n_out < count(z, "r") ? *n_out : count(z, "r");
    for (int j = 0; j < n_terms; j++) {
        nb_tensor *w = member(z, "r", j);
        char name[32];
        snprintf(name, sizeof name, "r%d", j);
        nb_value rv = nb_data(r->b, name, NB_F32, w->ndim, w->shape);
        terms[j] = nb_reduce_sum(r->b, nb_mul(r->b, out[j], rv), 0, NULL, false);
    }
    /* Without weights r<j> (--outputs) there is no loss. */
    nb_value loss = n_terms ? nb_sum(r->b, n_terms, terms) : NB_NONE;
    if ((st = nb_builder_status(r->b))) return st;
    for (int j = 0; j < *n_out; j++) r->names[j] = nb_value_name(out[j]);
    r->names[*n_out] = n_terms ? nb_value_name(loss) : NULL;
    return NB_OK;
}

/* The test copy with the gradients of the loss (fetch names after the loss). */
static nb_status differentiate(recorded *r, nb_npz *z, int n_out, computed *c, int *n_wrt, nb_backward_result *res)
{
    nb_status st = nb_program_clone_for_test(&r->test, r->main);
    if (st) return st;
    nb_block *g = nb_program_global_block(r->test);
    const char *wrt[MAX_IO + 64];
    int n = 0, n_params = n_param_grads(z);
    for (int i = 0; i < r->n_inputs; i++) {
        nb_var *v = nb_block_find_var(g, r->inputs[i]);
        if (!v) return nb_error(NB_ERR_NOT_FOUND, "the test copy has no input %s", r->inputs[i]);
        if (!member(z, "gin", i)) continue;
        v->stop_gradient = false;
        wrt[n++] = v->name;
    }
    for (int k = 0, q = 0; k < nb_npz_count(z) && q < n_params && n < MAX_IO + 64; k++) {
        if (strncmp(nb_npz_name(z, k), "p:", 2)) continue;
        nb_var *v = nb_block_find_var(g, nb_npz_name(z, k) + 2);
        c->is_param[q++] = v && v->is_parameter;
        if (v && v->is_parameter) wrt[n++] = v->name;
    }
    nb_gradients_opts opts = {.flags = NB_ALLOW_UNUSED};
    if ((st = nb_gradients(r->test, NB_NAMES(r->names[n_out]), NB_NAMES_N(n, wrt), &opts, res))) return st;
    *n_wrt = n;
    return NB_OK;
}

static nb_status run_recorded(recorded *r, nb_npz *z, int n_fetch, nb_tensor **fetched)
{
    nb_status st;
    int n_feeds = 0;
    char names[2 * MAX_IO][32];
    for (int i = 0; i < r->n_inputs; i++, n_feeds++) r->feeds[n_feeds] = (nb_feed){r->inputs[i], member(z, "in", i)};
    for (int j = 0, n = count(z, "r"); j < n; j++, n_feeds++) {
        snprintf(names[n_feeds], sizeof names[n_feeds], "r%d", j);
        r->feeds[n_feeds] = (nb_feed){names[n_feeds], member(z, "r", j)};
    }
    if ((st = nb_scope_new(&r->scope, NULL)) || (st = nb_executor_new(&r->e)) ||
        (st = nb_executor_run(r->e, r->startup, r->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL)))
        return st;
    return nb_executor_run(r->e, r->test, r->scope, NB_FEEDS_N(n_feeds, r->feeds), NB_NAMES_N(n_fetch, r->names),
                           fetched);
}

static void run_static(const char *model, nb_npz *z, computed *c, outcome *o)
{
    recorded r = {0};
    nb_backward_result res = {0};
    nb_tensor *fetched[2 * MAX_IO + 64] = {0};
    int n_wrt = 0, n_fetch = 0;
    o->imported = !record(&r, model, z, &c->n_out);
    if (!o->imported) {
        fprintf(stderr, "  static import: %s\n", nb_last_error());
        goto done;
    }
    if (differentiate(&r, z, c->n_out, c, &n_wrt, &res)) {
        fprintf(stderr, "  static gradients: %s\n", nb_last_error());
        o->grad = 0;
        goto done;
    }
    n_fetch = c->n_out + 1;
    int at[MAX_IO + 64];
    for (int k = 0; k < n_wrt; k++) {
        at[k] = res.grads[k] ? n_fetch : -1;
        if (res.grads[k]) r.names[n_fetch++] = res.grads[k];
    }
    if (run_recorded(&r, z, n_fetch, fetched)) {
        fprintf(stderr, "  static run: %s\n", nb_last_error());
        o->eval = o->grad = 0;
        goto done;
    }
    for (int j = 0; j < c->n_out; j++) c->outs[j] = nb_tensor_retain(fetched[j]);
    int k = 0;
    for (int i = 0, n_in = count(z, "in"); i < n_in; i++)
        if (member(z, "gin", i)) c->gin[i] = at[k] < 0 ? NULL : nb_tensor_retain(fetched[at[k]]), k++;
    for (int q = 0, n_params = n_param_grads(z); q < n_params; q++)
        if (c->is_param[q]) c->grads[q] = at[k] < 0 ? NULL : nb_tensor_retain(fetched[at[k]]), k++;
    compare(z, c, o);
done:
    for (int k = 0; k < n_fetch; k++) nb_tensor_release(fetched[k]);
    nb_backward_result_free(&res);
    nb_executor_free(r.e), nb_scope_free(r.scope), nb_builder_free(r.b);
    nb_program_free(r.test), nb_program_free(r.main), nb_program_free(r.startup);
}

static bool report(const char *model, const char *mode, nb_npz *z,
                   void (*run)(const char *, nb_npz *, computed *, outcome *))
{
    int n_params = n_param_grads(z);
    nb_tensor *grads[MAX_IO + 64] = {0};
    bool is_param[MAX_IO + 64] = {0};
    computed c = {.grads = grads, .is_param = is_param};
    outcome o = {.imported = -1, .eval = -1, .grad = -1};
    if (n_params > MAX_IO + 64) return fprintf(stderr, "onnx_torch_check: too many parameters\n"), false;
    run(model, z, &c, &o);
    computed_free(&c, n_params);
    const char *name = strrchr(model, '/');
    name = name ? name + 1 : model;
    char st[3][3];
    int v[3] = {o.imported, o.eval, o.grad};
    for (int k = 0; k < 3; k++) snprintf(st[k], sizeof st[k], "%s", v[k] < 0 ? "-" : v[k] ? "1" : "0");
    printf("result %-40s %-6s import=%s eval=%s grad=%s (outputs %.2g, %d gradients %.2g)\n", name, mode, st[0], st[1],
           st[2], o.eval_diff, o.n_grads, o.grad_diff);
    return o.imported == 1 && o.eval == 1 && o.grad == 1;
}

/* The outputs of the static import's test copy into DIR/in<i>.npy and
 * DIR/nabla_out<j>.npy; and, given `export_path`, its export. */
static int write_outputs(const char *model, nb_npz *z, const char *export_path, const char *dir)
{
    recorded r = {0};
    nb_tensor *fetched[MAX_IO] = {0};
    int n_out = 0, rc = 1;
    char path[4096];
    if (record(&r, model, z, &n_out) || nb_program_clone_for_test(&r.test, r.main) ||
        run_recorded(&r, z, n_out, fetched)) {
        fprintf(stderr, "onnx_torch_check: %s: %s\n", model, nb_last_error());
        goto done;
    }
    for (int i = 0, n = count(z, "in"); i < n; i++) {
        snprintf(path, sizeof path, "%.4000s/in%d.npy", dir, i);
        if (nb_npy_save(path, member(z, "in", i))) goto fail;
    }
    for (int j = 0; j < n_out; j++) {
        snprintf(path, sizeof path, "%.4000s/nabla_out%d.npy", dir, j);
        if (nb_npy_save(path, fetched[j])) goto fail;
    }
    if (export_path && nb_onnx_export(r.main, r.scope, NB_NAMES_N(n_out, r.names), export_path)) {
        printf("export refused %s: %s\n", model, nb_last_error());
        rc = 3;
        goto done;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "onnx_torch_check: %s\n", nb_last_error());
done:
    for (int j = 0; j < n_out; j++) nb_tensor_release(fetched[j]);
    nb_executor_free(r.e), nb_scope_free(r.scope), nb_builder_free(r.b);
    nb_program_free(r.test), nb_program_free(r.main), nb_program_free(r.startup);
    return rc;
}

int main(int argc, char **argv)
{
    bool outputs = argc == 5 && !strcmp(argv[1], "--outputs"), export = argc == 6 && !strcmp(argv[1], "--export");
    if (argc != 3 && !outputs && !export)
        return fprintf(stderr,
                       "usage: onnx_torch_check MODEL.onnx CASE.npz\n"
                       "       onnx_torch_check --outputs MODEL.onnx INPUTS.npz DIR\n"
                       "       onnx_torch_check --export MODEL.onnx INPUTS.npz OUT.onnx DIR\n"),
               2;
    nb_npz *z;
    if (nb_npz_load(&z, argv[argc == 3 ? 2 : 3])) return fprintf(stderr, "onnx_torch_check: %s\n", nb_last_error()), 2;
    int rc;
    if (argc == 3) {
        bool eager = report(argv[1], "eager", z, run_eager);
        bool recorded = report(argv[1], "static", z, run_static);
        rc = eager && recorded ? 0 : 1;
    } else {
        rc = write_outputs(argv[2], z, export ? argv[4] : NULL, argv[argc - 1]);
    }
    nb_npz_free(z);
    return rc;
}
