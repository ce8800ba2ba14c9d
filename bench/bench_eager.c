/* bench_eager: what the eager tape costs. A chain of tiny ops y = y * c on a
 * one-element tensor that requires grad, so that the time is the tape's, not
 * the arithmetic's:
 *
 *     case chain10k_forward_us_per_op ...    (recording one op)
 *     case chain10k_backward_us_per_node ... (running one backward node)
 *     case chain100k_total_ms ...            (forward + backward of 100,000 ops)
 *     case chain100k_peak_mb ...             (peak resident memory of that run)
 *
 * Medians of 7 runs; the 100k case runs in a child process so that its peak
 * memory is its own. bench/run_eager.sh prints these beside PyTorch's. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "nabla/nabla.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die_on(nb_status st)
{
    if (!st) return;
    fprintf(stderr, "bench_eager: %s\n", nb_last_error());
    exit(1);
}

/* One chain of n ops: forward and backward seconds. */
static void chain(int n, double *fwd, double *bwd)
{
    nb_builder *b;
    die_on(nb_builder_new_eager(&b));
    nb_tensor *x, *c;
    die_on(nb_tensor_full(&x, NB_F32, 1, (int64_t[]){1}, 1.0));
    die_on(nb_tensor_full(&c, NB_F32, 1, (int64_t[]){1}, 1.0001));
    die_on(nb_tensor_set_requires_grad(x, true));
    nb_value y = nb_eager_value(b, x), cv = nb_eager_value(b, c);
    double t0 = now();
    for (int i = 0; i < n; i++) y = nb_mul(b, y, cv);
    double t1 = now();
    die_on(nb_builder_status(b));
    nb_tensor *root = nb_tensor_retain(nb_eager_tensor(y));
    nb_eager_release_values(b);
    double t2 = now();
    die_on(nb_backward(NB_TENSORS(root), NULL, 0));
    double t3 = now();
    nb_tensor_release(root);
    nb_builder_free(b);
    nb_tensor_release(x);
    nb_tensor_release(c);
    *fwd = t1 - t0;
    *bwd = t3 - t2;
}

int main(void)
{
    double f[7], g[7], tot[7], f1, b1;
    chain(1000, &f1, &b1); /* warm up */
    for (int r = 0; r < 7; r++) chain(10000, &f[r], &g[r]);
    qsort(f, 7, sizeof *f, cmp);
    qsort(g, 7, sizeof *g, cmp);
    printf("case chain10k_forward_us_per_op %.4f\n", f[3] / 10000 * 1e6);
    printf("case chain10k_backward_us_per_node %.4f\n", g[3] / 10000 * 1e6);
    for (int r = 0; r < 7; r++) {
        chain(100000, &f1, &b1);
        tot[r] = f1 + b1;
    }
    qsort(tot, 7, sizeof *tot, cmp);
    printf("case chain100k_total_ms %.4f\n", tot[3] * 1e3);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        chain(100000, &f1, &b1);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("case chain100k_peak_mb %.1f\n", ru.ru_maxrss / 1024.0);
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    return 0;
}
