/* ZeRO stage 1 (nb_ddp_shard_optimizer) over real processes, run by
 * tests/test_mpi.sh under `mpirun -np N` (N = 2 and 3):
 *
 *   - SGD with momentum, Adam and AdamW sharded give, after every step, the
 *     very parameters of nb_ddp with an unsharded eager optimiser, the same
 *     on every rank, and those of one process with the whole batch to
 *     rounding; with tiny buckets too, whose shards cut across buckets and
 *     parameters (to rounding: with 3 ranks the ring adds a bucket's
 *     values in an order that depends on where the bucket is cut);
 *   - each rank's optimiser state is 1/N of the unsharded optimiser's;
 *   - nb_ddp_step with an unsharded optimiser (nb_ddp_set_optimizer),
 *     bucket by bucket, gives nb_ddp's parameters then
 *     nb_eager_optimizer_step's, to the bit;
 *   - what ZeRO-1 cannot do is refused with a clear error.
 *
 * Each rank prints "rank R: ok NAME" per passed check and "rank R: FAIL
 * ..." per failure; the script counts them. */
#include <stdlib.h>
#include "dp_test_util.h"

#define B 12 /* the global batch: divisible by 1, 2, 3 */
#define STEPS 5
#define MAXP 512

static int rank, size, failures;
static nb_comm *comm;

static void die_on(nb_status st, const char *what)
{
    if (!st) return;
    printf("rank %d: FAIL %s: %s\n", rank, what, nb_last_error());
    fflush(stdout);
    exit(1);
}

static void check(bool cond, const char *what)
{
    printf("rank %d: %s %s\n", rank, cond ? "ok" : "FAIL", what);
    fflush(stdout);
    if (!cond) failures++;
}

typedef enum { ALONE, DDP, ZERO, STEPPED } how;

/* STEPS steps of dp_mlp: alone with batch B, or on this rank's shard with
 * batch B/size (nb_ddp with an unsharded optimiser, ZeRO-1, or nb_ddp
 * stepping the unsharded optimiser itself, bucket by bucket). The
 * parameters after each step go to out[step * MAXP ...], the optimiser
 * state this rank holds to *state_bytes. */
static void train(how h, nb_optimizer opt, size_t bucket, double *out, int *n, int64_t *state_bytes)
{
    nb_tensor *x, *y;
    dp_data(120, &x, &y);
    int s = h == ALONE ? 1 : size;
    nb_reader *rd;
    dp_eager m;
    die_on(dp_reader(&rd, x, y, h == ALONE ? 0 : rank, s, B / s), "reader");
    die_on(dp_eager_new(&m, &opt, 16, x, h == ALONE ? NULL : comm, bucket), "model");
    if (h == ZERO) die_on(nb_ddp_shard_optimizer(m.ddp, &opt), "shard");
    if (h == STEPPED) die_on(nb_ddp_set_optimizer(m.ddp, m.o), "set optimizer");
    for (int step = 0; step < STEPS; step++) {
        nb_tensor *rec[2];
        bool end;
        die_on(nb_reader_next(rd, rec, &end), "data");
        if (h == ALONE || h == DDP) die_on(dp_eager_step(&m, rec), "step");
        else {
            nb_value cost = nb_layer_softmax_cross_entropy(m.b, dp_mlp(m.b, nb_eager_value(m.b, rec[0]), 16),
                                                           nb_eager_value(m.b, rec[1]));
            die_on(nb_builder_status(m.b), "forward");
            die_on(nb_ddp_backward(m.ddp, nb_eager_tensor(cost)), "backward");
            die_on(nb_ddp_step(m.ddp), "ddp_step");
            nb_eager_zero_grad(m.b);
            nb_eager_release_values(m.b);
        }
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
        dp_eager_params(&m, out + step * MAXP, MAXP, n);
    }
    if (h == ZERO) {
        nb_ddp_stats st;
        nb_ddp_stats_get(m.ddp, &st);
        *state_bytes = st.optimizer_state_bytes;
    } else *state_bytes = nb_eager_optimizer_state_bytes(m.o);
    if (h == STEPPED && nb_eager_optimizer_steps(m.o) != STEPS) *state_bytes = -1; /* counted once a step */
    dp_eager_free(&m);
    nb_reader_free(rd);
    nb_tensor_release(x);
    nb_tensor_release(y);
}

/* The sum over the ranks of v. */
static double sum_ranks(double v)
{
    nb_tensor *t;
    die_on(nb_tensor_full(&t, NB_F64, 1, (const int64_t[]){1}, v), "tensor");
    die_on(nb_comm_allreduce_sum(comm, t), "all-reduce");
    double s = nb_tensor_get(t, 0);
    nb_tensor_release(t);
    return s;
}

static void check_equal(void)
{
    static const char *const names[] = {"momentum", "adam", "adamw"};
    nb_optimizer kinds[] = {nb_momentum(0.1, 0.9, false), nb_adam(0.02), nb_adamw(0.02, 0.1)};
    static double alone[STEPS * MAXP], ddp[STEPS * MAXP], zero[STEPS * MAXP], tiny[STEPS * MAXP];
    for (int k = 0; k < 3; k++) {
        int n1, n2, n3, n4;
        int64_t s_alone, s_ddp, s_zero, s_tiny;
        train(ALONE, kinds[k], 0, alone, &n1, &s_alone);
        train(DDP, kinds[k], 0, ddp, &n2, &s_ddp);
        train(ZERO, kinds[k], 0, zero, &n3, &s_zero);
        train(ZERO, kinds[k], 40, tiny, &n4, &s_tiny);
        double d_ddp = dp_max_diff(ddp, zero, STEPS * MAXP), d_tiny = dp_max_diff(zero, tiny, STEPS * MAXP);
        double d_alone = dp_max_diff(alone, zero, STEPS * MAXP), scale = 0;
        for (int i = 0; i < STEPS * MAXP; i++) scale = fmax(scale, fabs(alone[i]));
        double tol = 1e-12 * fmax(scale, 1);
        bool same = true;
        for (int st = 0; st < STEPS; st++) {
            const double *p = zero + st * MAXP;
            same = same &&
                nb_comm_check_same(comm, "parameters", nb_hash_bytes(NB_HASH_INIT, p, MAXP * sizeof *p)) == NB_OK;
        }
        char what[256];
        snprintf(what, sizeof what,
                 "%s: ZeRO-1 on %d ranks = nb_ddp (max diff %.1e), = buckets of 40 bytes (%.1e), "
                 "= 1 process (%.1e), the same on every rank after every step",
                 names[k], size, d_ddp, d_tiny, d_alone);
        check(n1 == n3 && n2 == n3 && n4 == n3 && n3 == 8 * 16 + 16 + 16 * 3 + 3 && d_ddp == 0 && d_tiny <= tol &&
                  d_alone <= tol && same,
              what);
        /* nb_ddp_step with the unsharded optimiser, in buckets of one and of
         * several parameters: nb_ddp's parameters, to the bit. */
        static double stepped[STEPS * MAXP], stepped_tiny[STEPS * MAXP], ddp_tiny[STEPS * MAXP];
        int n5, n6, n7;
        int64_t s_stepped, s_stepped_tiny, s_ddp_tiny;
        train(STEPPED, kinds[k], 0, stepped, &n5, &s_stepped);
        train(STEPPED, kinds[k], 40, stepped_tiny, &n6, &s_stepped_tiny);
        train(DDP, kinds[k], 40, ddp_tiny, &n7, &s_ddp_tiny);
        double d_stepped = dp_max_diff(stepped, ddp, STEPS * MAXP);
        double d_stepped_tiny = dp_max_diff(stepped_tiny, ddp_tiny, STEPS * MAXP);
        snprintf(what, sizeof what,
                 "%s: nb_ddp_step bucket by bucket = nb_ddp then nb_eager_optimizer_step (max diff %.1e; buckets "
                 "of 40 bytes %.1e), one step counted per step",
                 names[k], d_stepped, d_stepped_tiny);
        check(n5 == n2 && n6 == n2 && n7 == n2 && d_stepped == 0 && d_stepped_tiny == 0 && s_stepped == s_ddp &&
                  s_stepped_tiny == s_ddp_tiny,
              what);
        /* The moments of n values are cut N ways; each rank's beta powers
         * (two scalars, Adam) or nothing (momentum) are all that is added. */
        double total = sum_ranks((double)s_zero);
        double share = (double)s_alone / size;
        snprintf(what, sizeof what, "%s: optimizer state per rank %lld bytes, unsharded %lld (%.2f of it; %d ranks)",
                 names[k], (long long)s_zero, (long long)s_alone, (double)s_zero / (double)s_alone, size);
        check(s_ddp == s_alone && s_zero <= share * 1.1 && s_zero >= share * 0.8 && total <= s_alone + 16.0 * size &&
                  total >= s_alone * 0.9 && s_tiny == s_zero,
              what);
    }
}

/* What ZeRO-1 refuses, on every rank alike. */
static void check_refusals(void)
{
    nb_tensor *x, *y;
    dp_data(12, &x, &y);
    dp_eager m;
    nb_optimizer adam = nb_adam(0.01), clipped = nb_adam(0.01);
    clipped.clip = NB_CLIP_GLOBAL_NORM;
    clipped.clip_value = 1;
    die_on(dp_eager_new(&m, &adam, 16, x, comm, 0), "model");
    nb_status st = nb_ddp_step(m.ddp);
    check(st == NB_ERR_STATE && strstr(nb_last_error(), "has no optimizer"), "nb_ddp_step without an optimizer");
    nb_eager_optimizer *clipping;
    die_on(nb_eager_optimizer_new(&clipping, &clipped), "optimizer");
    st = nb_ddp_set_optimizer(m.ddp, clipping);
    check(st == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "global norm"),
          "nb_ddp_set_optimizer refuses clipping by global norm");
    nb_eager_optimizer_free(clipping);
    st = nb_ddp_shard_optimizer(m.ddp, &clipped);
    check(st == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "global norm"), "clipping by global norm is refused");
    die_on(nb_ddp_shard_optimizer(m.ddp, &adam), "shard");
    st = nb_ddp_shard_optimizer(m.ddp, &adam);
    check(st == NB_ERR_STATE && strstr(nb_last_error(), "sharded already"), "sharding twice is refused");
    st = nb_ddp_set_optimizer(m.ddp, m.o);
    check(st == NB_ERR_STATE && strstr(nb_last_error(), "is sharded"), "no optimizer of its own for a sharded ddp");
    st = nb_ddp_step(m.ddp);
    check(st == NB_ERR_STATE && strstr(nb_last_error(), "no nb_ddp_backward"), "a step without backward is refused");
    dp_eager_free(&m);
    nb_tensor_release(x);
    nb_tensor_release(y);
}

int main(void)
{
    bool mine;
    if (nb_comm_init_mpi(&comm, &mine)) {
        printf("rank ?: FAIL MPI: %s\n", nb_last_error());
        return 1;
    }
    rank = nb_comm_rank(comm);
    size = nb_comm_size(comm);
    check_equal();
    check_refusals();
    nb_comm_free(comm);
    return failures ? 1 : 0;
}
