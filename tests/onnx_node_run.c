/* Runs ONNX's backend node tests (written by tests/onnx_node_gen.py) through
 * nabla's import, each model twice: eagerly, and as a static program's
 * inference copy run by the executor. Each run is a child process of its
 * own, with a time limit, so that a crash or a hang is counted, not fatal.
 *
 *   onnx_node_run SUITE_DIR [--only NAME] [--min-pass EAGER,STATIC] [--verbose]
 *
 * A run passes when every output has the expected shape and kind (float,
 * integer or boolean) and values within rtol 1e-3 / atol 1e-5 (floats;
 * NaN where NaN is expected) or equal (integers, booleans and float16, which
 * nabla holds as float32). It is refused
 * when the import or the run returns an error with a message: nabla said
 * what it cannot do. It fails when it gives a wrong result, an error without
 * a message, crashes or hangs. Prints a table by op and the totals; exits 1
 * when anything failed, or when fewer runs passed than the floor given for
 * the mode (the suite's score at the last change: a lost op fails). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "nabla/nabla.h"

#define MAX_IO 32
#define TIME_LIMIT_S 60

typedef struct io {
    char name[256];
    char dtype[16]; /* NumPy's name, "-" for a value that is not a tensor */
} io;

typedef struct test_case {
    char name[256], op[64];
    int opset, n_in, n_out;
    io in[MAX_IO], out[MAX_IO];
} test_case;

enum outcome { PASS, REFUSED, WRONG, CRASH, HANG, N_OUTCOMES };
static const char *outcome_name[] = {"pass", "refused", "wrong", "crash", "hang"};

/* ---- one run (in the child) ------------------------------------------------ */

static int kind_of(nb_dtype dt) { return dt == NB_BOOL ? 'b' : nb_dtype_is_float(dt) ? 'f' : 'i'; }

static int kind_of_numpy(const char *dtype) { return dtype[0] == 'b' ? 'b' : dtype[0] == 'f' ? 'f' : 'i'; }

/* Compares one output; a description of the first difference into why. */
static bool same(const nb_tensor *got, const nb_tensor *want, const char *want_dtype, char *why, size_t n)
{
    if (kind_of(got->dtype) != kind_of_numpy(want_dtype)) {
        snprintf(why, n, "dtype %s where %s was expected", nb_dtype_name(got->dtype), want_dtype);
        return false;
    }
    bool shape_ok = got->ndim == want->ndim;
    for (int d = 0; shape_ok && d < got->ndim; d++) shape_ok = got->shape[d] == want->shape[d];
    if (!shape_ok) {
        char a[128] = "", b[128] = "";
        for (int d = 0; d < got->ndim; d++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "," : "", (long long)got->shape[d]);
        for (int d = 0; d < want->ndim; d++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "", (long long)want->shape[d]);
        snprintf(why, n, "shape [%s] where [%s] was expected", a, b);
        return false;
    }
    /* float16 values are held as float32: a run that gave them must give
     * them exactly, as the tolerance would pass a value never rounded to
     * half precision (whose steps are 2^-11 relative, inside 1e-3). */
    bool exact = kind_of(got->dtype) != 'f' || !strcmp(want_dtype, "float16");
    for (int64_t i = 0; i < nb_tensor_numel(want); i++) {
        double g = nb_tensor_get(got, i), w = nb_tensor_get(want, i);
        bool ok = exact ? g == w : (isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= 1e-5 + 1e-3 * fabs(w));
        if (!ok) {
            snprintf(why, n, "element %lld is %.9g where %.9g was expected", (long long)i, g, w);
            return false;
        }
    }
    return true;
}

static nb_status load_io(const char *dir, const char *kind, int k, nb_tensor **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/%s_%d.npy", dir, kind, k);
    return nb_npy_load(out, path);
}

/* Imports and runs the case; NB_OK with the outputs in got[], or an error. */
static nb_status run_eager(const char *dir, const test_case *c, nb_tensor **in, nb_tensor **got)
{
    nb_builder *b;
    nb_status st = nb_builder_new_eager(&b);
    if (st) return st;
    nb_eager_set_test_mode(b, true);
    nb_value vin[MAX_IO], vout[MAX_IO];
    for (int k = 0; k < c->n_in; k++) vin[k] = nb_eager_value(b, in[k]);
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/model.onnx", dir);
    int n_out = 0;
    st = nb_onnx_import(path, b, (nb_values){c->n_in, vin}, MAX_IO, vout, &n_out);
    if (!st && n_out != c->n_out)
        st = nb_error(NB_ERR_ARG, "the import gave %d outputs; the model has %d", n_out, c->n_out);
    for (int k = 0; !st && k < c->n_out; k++) {
        nb_tensor *t = nb_eager_tensor(vout[k]);
        if (!t) st = nb_error(NB_ERR_ARG, "output %d has no tensor", k);
        else got[k] = nb_tensor_retain(t);
    }
    nb_builder_free(b);
    return st;
}

static nb_status run_static(const char *dir, const test_case *c, nb_tensor **in, nb_tensor **got)
{
    nb_program *main_p = NULL, *startup = NULL, *test = NULL;
    nb_builder *b = NULL;
    nb_scope *scope = NULL;
    nb_executor *e = NULL;
    nb_value vout[MAX_IO];
    int n_out = 0;
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/model.onnx", dir);
    nb_status st;
    if ((st = nb_program_new(&main_p)) || (st = nb_program_new(&startup)) ||
        (st = nb_builder_new_record(&b, main_p, startup)) || (st = nb_scope_new(&scope, NULL)) ||
        (st = nb_executor_new(&e)))
        goto out;
    /* The inputs' values are known when the program is built, as a user
     * importing a model for the feeds at hand knows them: shapes, axes and
     * bounds computed from them become constants the program is fixed to. */
    nb_feed feeds[MAX_IO];
    for (int k = 0; k < c->n_in; k++) feeds[k] = (nb_feed){c->in[k].name, in[k]};
    if ((st = nb_onnx_import_known(path, b, (nb_feeds){c->n_in, feeds}, MAX_IO, vout, &n_out))) goto out;
    if (n_out != c->n_out) {
        st = nb_error(NB_ERR_ARG, "the import gave %d outputs; the model has %d", n_out, c->n_out);
        goto out;
    }
    if ((st = nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL))) goto out;
    if ((st = nb_program_clone_for_test(&test, main_p))) goto out;
    /* An input the import read by value is a constant now, not a feed. */
    const char *fetch[MAX_IO];
    int n_feed = 0;
    for (int k = 0; k < c->n_in; k++) {
        const nb_var *v = nb_block_find_var(nb_program_block(test, 0), c->in[k].name);
        if (!v || v->is_data) feeds[n_feed++] = feeds[k];
    }
    for (int k = 0; k < c->n_out; k++) fetch[k] = nb_value_name(vout[k]);
    st = nb_executor_run(e, test, scope, (nb_feeds){n_feed, feeds}, (nb_names){c->n_out, fetch}, got);
out:
    nb_executor_free(e);
    nb_builder_free(b);
    nb_scope_free(scope);
    nb_program_free(test);
    nb_program_free(startup);
    nb_program_free(main_p);
    return st;
}

/* The child's whole job: one line "OUTCOME\tmessage" on fd. */
static void run_case(const char *suite, const test_case *c, bool eager, int fd)
{
    char dir[4096], msg[2048] = "";
    snprintf(dir, sizeof dir, "%.3800s/%s", suite, c->name);
    nb_tensor *in[MAX_IO] = {0}, *want[MAX_IO] = {0}, *got[MAX_IO] = {0};
    enum outcome r = PASS;
    nb_status st = NB_OK;
    for (int k = 0; k < c->n_in && !st; k++)
        if (!strcmp(c->in[k].dtype, "-"))
            st = nb_error(NB_ERR_UNSUPPORTED, "input '%s' is not a tensor", c->in[k].name);
        else st = load_io(dir, "in", k, &in[k]);
    if (!st) st = eager ? run_eager(dir, c, in, got) : run_static(dir, c, in, got);
    if (st) {
        const char *e = nb_last_error();
        r = e && *e ? REFUSED : WRONG;
        snprintf(msg, sizeof msg, "%s", e && *e ? e : "an error without a message");
    }
    for (int k = 0; k < c->n_out && r == PASS; k++) {
        if (!strcmp(c->out[k].dtype, "-")) {
            r = REFUSED;
            snprintf(msg, sizeof msg, "output '%s' is not a tensor", c->out[k].name);
        } else if (load_io(dir, "out", k, &want[k])) {
            r = REFUSED;
            snprintf(msg, sizeof msg, "cannot read the expected output: %s", nb_last_error());
        } else {
            char why[512];
            if (!same(got[k], want[k], c->out[k].dtype, why, sizeof why)) {
                r = WRONG;
                snprintf(msg, sizeof msg, "output '%s': %s", c->out[k].name, why);
            }
        }
    }
    for (int k = 0; k < MAX_IO; k++) nb_tensor_release(in[k]), nb_tensor_release(want[k]), nb_tensor_release(got[k]);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\t') *p = ' ';
    dprintf(fd, "%d\t%s\n", (int)r, msg);
}

/* ---- the parent ------------------------------------------------------------ */

static enum outcome run_isolated(const char *suite, const test_case *c, bool eager, char *msg, size_t n)
{
    int fds[2];
    *msg = 0;
    if (pipe(fds)) return snprintf(msg, n, "pipe failed"), CRASH;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(TIME_LIMIT_S);
        if (nb_control_register_ops()) _exit(3);
        run_case(suite, c, eager, fds[1]);
        exit(0); /* not _exit: LeakSanitizer checks the run at exit */
    }
    close(fds[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf - 1 && (got = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
    buf[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return snprintf(msg, n, "over %d s", TIME_LIMIT_S), HANG;
    if (WIFSIGNALED(status)) return snprintf(msg, n, "signal %d", WTERMSIG(status)), CRASH;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || len == 0)
        return snprintf(msg, n, "exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1), CRASH;
    char *tab = strchr(buf, '\t');
    if (tab) {
        char *nl = strchr(tab + 1, '\n');
        if (nl) *nl = 0;
        snprintf(msg, n, "%s", tab + 1);
    }
    int r = atoi(buf);
    return r >= 0 && r < N_OUTCOMES ? (enum outcome)r : CRASH;
}

static int parse_io(char *field, io *list)
{
    int n = 0;
    if (!strcmp(field, ".")) return 0;
    for (char *tok = strtok(field, " "); tok && n < MAX_IO; tok = strtok(NULL, " ")) {
        char *colon = strrchr(tok, ':');
        if (!colon) continue;
        *colon = 0;
        snprintf(list[n].name, sizeof list[n].name, "%.255s", tok);
        snprintf(list[n].dtype, sizeof list[n].dtype, "%.15s", colon + 1);
        n++;
    }
    return n;
}

static int read_cases(const char *suite, test_case **out)
{
    char path[4096], line[16384];
    snprintf(path, sizeof path, "%.4000s/cases.tsv", suite);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, cap = 0;
    test_case *cs = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *fields[5];
        int nf = 0;
        for (char *p = line; nf < 5; nf++) {
            fields[nf] = p;
            char *t = strchr(p, '\t');
            if (!t) {
                nf++;
                break;
            }
            *t = 0, p = t + 1;
        }
        if (nf != 5) continue;
        if (n == cap) {
            test_case *grown = realloc(cs, (size_t)(cap = cap ? 2 * cap : 1024) * sizeof *cs);
            if (!grown) break;
            cs = grown;
        }
        test_case *c = &cs[n++];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%.255s", fields[0]);
        snprintf(c->op, sizeof c->op, "%.63s", fields[1]);
        c->opset = atoi(fields[2]);
        c->n_in = parse_io(fields[3], c->in);
        c->n_out = parse_io(fields[4], c->out);
    }
    fclose(f);
    *out = cs;
    return n;
}

typedef struct op_row {
    char op[64];
    int n, count[2][N_OUTCOMES];
    char why[200]; /* the first refusal, or the first failure */
    bool why_fails;
} op_row;

static op_row *row_for(op_row *rows, int *n_rows, const char *op)
{
    for (int i = 0; i < *n_rows; i++)
        if (!strcmp(rows[i].op, op)) return &rows[i];
    op_row *r = &rows[(*n_rows)++];
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", op);
    return r;
}

static int by_op(const void *a, const void *b) { return strcmp(((const op_row *)a)->op, ((const op_row *)b)->op); }

int main(int argc, char **argv)
{
    const char *suite = NULL, *only = NULL;
    int min_pass[2] = {0, 0};
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--min-pass") && i + 1 < argc) {
            const char *v = argv[++i], *comma = strchr(v, ',');
            min_pass[0] = atoi(v), min_pass[1] = comma ? atoi(comma + 1) : min_pass[0];
        } else if (!strcmp(argv[i], "--verbose")) verbose = true;
        else suite = argv[i];
    }
    if (!suite) {
        fprintf(stderr, "usage: onnx_node_run SUITE_DIR [--only NAME] [--min-pass EAGER,STATIC] [--verbose]\n");
        return 2;
    }
    test_case *cs;
    int n = read_cases(suite, &cs);
    if (n <= 0) {
        fprintf(stderr, "onnx_node_run: no cases in %s/cases.tsv\n", suite);
        return 2;
    }
    op_row *rows = calloc((size_t)n, sizeof *rows);
    int n_rows = 0, total[2][N_OUTCOMES] = {{0}}, ran = 0;
    for (int i = 0; i < n; i++) {
        const test_case *c = &cs[i];
        if (only && strcmp(only, c->name)) continue;
        ran++;
        op_row *r = row_for(rows, &n_rows, c->op);
        r->n++;
        for (int mode = 0; mode < 2; mode++) {
            char msg[2048];
            enum outcome o = run_isolated(suite, c, mode == 0, msg, sizeof msg);
            r->count[mode][o]++;
            total[mode][o]++;
            /* A failure's reason wins over a refusal's. */
            if (o != PASS && (!r->why[0] || (o > REFUSED && !r->why_fails))) {
                snprintf(r->why, sizeof r->why, "%s%.190s", o > REFUSED ? "FAILS: " : "", msg);
                r->why_fails = o > REFUSED;
            }
            if (o > REFUSED || verbose || only)
                printf("%-7s %-6s %s: %s\n", outcome_name[o], mode == 0 ? "eager" : "static", c->name, msg);
        }
    }
    qsort(rows, (size_t)n_rows, sizeof *rows, by_op);
    printf("\n%-28s %5s %7s %7s %7s %s\n", "op", "tests", "eager", "static", "failed",
           "first reason it was not passed");
    for (int i = 0; i < n_rows; i++) {
        const op_row *r = &rows[i];
        int failed = 0;
        for (int m = 0; m < 2; m++) failed += r->count[m][WRONG] + r->count[m][CRASH] + r->count[m][HANG];
        printf("%-28s %5d %7d %7d %7d %.110s\n", r->op, r->n, r->count[0][PASS], r->count[1][PASS], failed, r->why);
    }
    bool bad = false;
    for (int m = 0; m < 2; m++) {
        int failed = total[m][WRONG] + total[m][CRASH] + total[m][HANG];
        printf("%s: %d passed, %d failed, %d refused (of %d; wrong %d, crashed %d, hung %d)\n",
               m == 0 ? "eager" : "static", total[m][PASS], failed, total[m][REFUSED], ran, total[m][WRONG],
               total[m][CRASH], total[m][HANG]);
        bad |= failed > 0 || total[m][PASS] < min_pass[m];
        if (total[m][PASS] < min_pass[m])
            printf("%s: fewer than the %d passes this suite had\n", m == 0 ? "eager" : "static", min_pass[m]);
    }
    free(rows);
    free(cs);
    return bad ? 1 : 0;
}
