/* Data parallelism in one process: the single-process communicator and the
 * rings; bucketing; what nb_data_parallel inserts, and that its program
 * trains exactly as the plain one on one rank (and averages over two);
 * program files keep the collective ops; nb_ddp on the single-process
 * communicator equals plain eager training; the post-accumulate hooks it
 * rests on. tests/test_mpi.sh runs the same models over several ranks. */
#include <stdlib.h>
#include "test.h"
#include "dp_test_util.h"
#include "comm/comm_internal.h"
#include "dist/dist_internal.h"

#define BATCH 8
#define STEPS 5
#define MAXP 512

/* ---- the communicator -------------------------------------------------------------- */

static void test_single_communicator(void)
{
    nb_comm *c;
    REQUIRE_OK(nb_comm_init_single(&c));
    CHECK(nb_comm_rank(c) == 0 && nb_comm_size(c) == 1);
    CHECK_STR(nb_comm_kind(c), "single");
    nb_tensor *t = T(NB_F32, S(3), 1, 2, 3);
    CHECK_OK(nb_comm_allreduce_sum(c, t));
    CHECK_TENSOR(t, S(3), 0, 1, 2, 3);
    nb_comm_request *r;
    bool done = false;
    CHECK_OK(nb_comm_allreduce_sum_async(c, t, &r));
    CHECK_OK(nb_comm_test(r, &done));
    CHECK(done);
    CHECK_OK(nb_comm_wait(r));
    CHECK_OK(nb_comm_broadcast(c, t, 0));
    CHECK_OK(nb_comm_barrier(c));
    CHECK_OK(nb_comm_check_same(c, "the models", 42));
    CHECK_ERR(nb_comm_broadcast(c, t, 1), NB_ERR_ARG, "broadcast from rank 1, but ranks are 0..0");
    nb_tensor *i = T(NB_I32, S(2), 1, 2);
    CHECK_ERR(nb_comm_allreduce_sum(c, i), NB_ERR_DTYPE, "all-reduce of int32; it sums float32 or float64");
    nb_tensor *col;
    REQUIRE_OK(nb_tensor_slice(&col, t, 0, 0, 3, 2));
    CHECK_ERR(nb_comm_allreduce_sum(c, col), NB_ERR_ARG, "non-contiguous");
    /* An empty tensor is contiguous: there is nothing to sum, and no error. */
    nb_tensor *empty;
    REQUIRE_OK(nb_tensor_new(&empty, NB_F32, 2, S(3, 0)));
    CHECK_OK(nb_comm_allreduce_sum(c, empty));
    CHECK_OK(nb_comm_broadcast(c, empty, 0));
    nb_tensor_release(empty);
    nb_comm_set_timeout(c, 2.5);
    CHECK(nb_comm_timeout(c) == 2.5);
    nb_comm_set_timeout(c, -1); /* ignored */
    CHECK(nb_comm_timeout(c) == 2.5);
    release_all(t, i, col, NULL);
    nb_comm_free(c);
    nb_comm_free(NULL);
    if (!nb_comm_have_mpi()) CHECK_ERR(nb_comm_init_mpi(&c, NULL), NB_ERR_UNSUPPORTED, "built without MPI");
}

static void test_rings(void)
{
    nb_comm *c0 = nb_comm_ring(0);
    CHECK(c0 && nb_comm_size(c0) == 1);
    CHECK(nb_comm_ring(3) == NULL);
    CHECK(strstr(nb_last_error(), "no communicator is set for ring 3"));
    CHECK_ERR(nb_comm_set_ring(NB_COMM_MAX_RINGS, c0), NB_ERR_ARG, "is not in [0, 16)");
    nb_comm *c;
    REQUIRE_OK(nb_comm_init_single(&c));
    CHECK_OK(nb_comm_set_ring(3, c));
    CHECK(nb_comm_ring(3) == c);
    CHECK_OK(nb_comm_set_ring(3, NULL));
    nb_comm_free(c);
}

/* The collective ops run eagerly too; an unset ring or a root outside it is
 * named. */
static void test_collective_ops_eager(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = T(NB_F64, S(2), 1.5, -2), *z = T(NB_F64, S(1), 7);
    nb_value out[2];
    CHECK_OK(nb_emit(b, "c_allreduce_sum", NB_VALUES(nb_eager_value(b, x), nb_eager_value(b, z)), NB_NO_ATTRS, 2, out));
    if (!nb_builder_status(b)) {
        CHECK_TENSOR(nb_eager_tensor(out[0]), S(2), 0, 1.5, -2);
        CHECK_TENSOR(nb_eager_tensor(out[1]), S(1), 0, 7);
    }
    CHECK(nb_emit(b, "c_broadcast", NB_VALUES(nb_eager_value(b, x)), NB_ATTRS(NB_ATTR_INT("root", 1)), 1, out) !=
          NB_OK);
    CHECK(strstr(nb_builder_error(b), "root 1, but ring 0 has ranks 0..0"));
    nb_builder_clear_error(b);
    CHECK(nb_emit(b, "c_allreduce_sum", NB_VALUES(nb_eager_value(b, x)), NB_ATTRS(NB_ATTR_INT("ring_id", 5)), 1, out) !=
          NB_OK);
    CHECK(strstr(nb_builder_error(b), "no communicator is set for ring 5"));
    nb_builder_clear_error(b);
    /* The started all-reduce works in place only, which eager outputs are not. */
    CHECK(nb_emit(b, "c_allreduce_start", NB_VALUES(nb_eager_value(b, x)), NB_NO_ATTRS, 1, out) != NB_OK);
    CHECK(strstr(nb_builder_error(b), "c_allreduce_start") &&
          strstr(nb_builder_error(b), "Out[0] must be X[0] itself"));
    nb_builder_clear_error(b);
    nb_tensor *i = T(NB_I64, S(1), 3);
    CHECK(nb_emit(b, "c_allreduce_sum", NB_VALUES(nb_eager_value(b, x), nb_eager_value(b, i)), NB_NO_ATTRS, 2, out) !=
          NB_OK);
    CHECK(strstr(nb_builder_error(b), "X[1] is int64; all-reduce sums float32 or float64"));
    release_all(x, z, i, NULL);
    nb_builder_free(b);
}

/* ---- buckets ------------------------------------------------------------------------- */

static void test_bucket_plan(void)
{
    size_t bytes[] = {40, 40, 40, 100, 8, 8, 8};
    nb_dtype dt[] = {NB_F32, NB_F32, NB_F32, NB_F32, NB_F64, NB_F64, NB_F32};
    int b[7];
    CHECK(nb_plan_buckets(7, bytes, dt, 80, b) == 5);
    int want[] = {0, 0, 1, 2, 3, 3, 4}; /* cap; too big alone; dtype change */
    for (int i = 0; i < 7; i++) CHECK(b[i] == want[i]);
    CHECK(nb_plan_buckets(7, bytes, dt, 0, b) == 3); /* the default cap: cut only by dtype */
    CHECK(nb_plan_buckets(7, bytes, dt, 1, b) == 7);
    CHECK(nb_plan_buckets(0, bytes, dt, 1, b) == 0);
}

/* ---- static programs ------------------------------------------------------------------ */

static int position_of(const nb_block *b, const char *type, int from)
{
    for (int i = from; i < b->n_ops; i++)
        if (!strcmp(b->ops[i]->def->name, type)) return i;
    return -1;
}

/* What the pass inserts and where. */
static void test_pass_inserts(void)
{
    nb_data_parallel_opts dp = {.nranks = 2, .bucket_bytes = 200};
    nb_optimizer opt = nb_sgd(0.1);
    opt.data_parallel = &dp;
    dp_static m;
    REQUIRE_OK(dp_static_new(&m, &opt, 16));
    const nb_block *b = nb_program_global_block(m.main);
    /* The loss gradient is scaled by 1/2. */
    int scale = -1;
    for (int i = 0; i < b->n_ops && scale < 0; i++)
        if (b->ops[i]->role == NB_ROLE_LOSS && !strcmp(b->ops[i]->def->name, "scale")) scale = i;
    REQUIRE_OK(scale < 0 ? NB_ERR_NOT_FOUND : NB_OK);
    CHECK(nb_op_attr(b->ops[scale], "scale")->f == 0.5);
    CHECK(!strcmp(b->ops[scale - 1]->def->name, "ones_like"));
    /* Every gradient in exactly one started all-reduce, after its last
     * writer, and in exactly one wait (the start's own vars), after the
     * start and before the update that reads it; buckets within 200 bytes
     * unless one gradient alone is bigger (the 8x16 weight). The updates of
     * the first bucket's parameters come before the last bucket's wait:
     * they run while its all-reduce is open. */
    int buckets = 0, waits = 0, last_wait = -1, first_update = -1;
    CHECK(position_of(b, "c_allreduce_sum", 0) < 0);
    for (int i = position_of(b, "c_allreduce_wait", 0); i >= 0; i = position_of(b, "c_allreduce_wait", i + 1)) {
        waits++;
        last_wait = i;
    }
    for (int i = 0; i < b->n_ops && first_update < 0; i++)
        if (b->ops[i]->role == NB_ROLE_OPTIMIZE && b->ops[i]->role_var[0]) first_update = i;
    CHECK(first_update >= 0 && first_update < last_wait);
    for (int p = 0; p < m.grads.n_pairs; p++) {
        const char *g = m.grads.pairs[p].grad;
        int found = 0, waited = 0, at = -1, wait = -1, last_write = -1, first_read = -1;
        for (int i = 0; i < b->n_ops; i++) {
            const nb_op *op = b->ops[i];
            bool is_ar = !strcmp(op->def->name, "c_allreduce_start"),
                 is_wait = !strcmp(op->def->name, "c_allreduce_wait");
            for (int k = 0; k < nb_op_n_outputs(op); k++)
                if (!strcmp(op->outputs[k], g)) {
                    CHECK(!strcmp(op->inputs[k], g) || !(is_ar || is_wait)); /* in place */
                    if (is_ar) {
                        found++;
                        at = i;
                    } else if (is_wait) {
                        waited++;
                        wait = i;
                    } else last_write = i;
                }
            for (int k = 0; k < nb_op_n_inputs(op) && first_read < 0; k++)
                if (op->role == NB_ROLE_OPTIMIZE && !strcmp(op->inputs[k], g)) first_read = i;
        }
        CHECK(found == 1 && waited == 1);
        CHECK(at > last_write && at < wait && wait < first_read);
    }
    for (int i = position_of(b, "c_allreduce_start", 0); i >= 0; i = position_of(b, "c_allreduce_start", i + 1)) {
        buckets++;
        size_t bytes = 0;
        for (int k = 0; k < nb_op_n_inputs(b->ops[i]); k++) {
            nb_var_info v = nb_var_info_of(nb_block_find_var(b, b->ops[i]->inputs[k]));
            int64_t n = 1;
            for (int d = 0; d < v.ndim; d++) n *= v.shape[d];
            bytes += (size_t)n * 8;
        }
        CHECK(bytes <= 200 || nb_op_n_inputs(b->ops[i]) == 1);
    }
    CHECK(buckets >= 2 && buckets < m.grads.n_pairs + 1 && waits == buckets);
    /* The startup program ends with one broadcast of the 4 parameters. */
    const nb_block *sb = nb_program_global_block(m.startup);
    int bc = position_of(sb, "c_broadcast", 0);
    REQUIRE_OK(bc < 0 ? NB_ERR_NOT_FOUND : NB_OK);
    CHECK(nb_op_n_inputs(sb->ops[bc]) == 4);
    CHECK(nb_op_attr(sb->ops[bc], "check")->i != 0);
    for (int i = 0; i < bc; i++) CHECK(sb->ops[i]->def != sb->ops[bc]->def);
    dp_static_free(&m);
}

/* With opts.synchronous, and for buckets that a later op reads (here the
 * updates, already in the program when the pass runs), the all-reduces are
 * c_allreduce_sum ops that complete where they stand: no start, no wait. */
static void test_pass_synchronous(void)
{
    for (int late = 0; late < 2; late++) {
        nb_data_parallel_opts dp = {.nranks = 2, .bucket_bytes = 200, .synchronous = !late};
        nb_optimizer opt = nb_sgd(0.1);
        if (!late) opt.data_parallel = &dp;
        dp_static m;
        REQUIRE_OK(dp_static_new(&m, &opt, 16));
        if (late) REQUIRE_OK(nb_data_parallel(m.main, m.startup, m.loss, &m.grads, &dp));
        const nb_block *b = nb_program_global_block(m.main);
        CHECK(position_of(b, "c_allreduce_start", 0) < 0);
        CHECK(position_of(b, "c_allreduce_wait", 0) < 0);
        int n = 0;
        for (int i = position_of(b, "c_allreduce_sum", 0); i >= 0; i = position_of(b, "c_allreduce_sum", i + 1))
            n += nb_op_n_inputs(b->ops[i]);
        CHECK(n == m.grads.n_pairs);
        dp_static_free(&m);
    }
}

/* A program that starts an all-reduce and fails before its wait still
 * completes it (the other ranks are in it) and lets its tensors go; the
 * next run starts afresh. The program: g = 2x; c_allreduce_start(g); a
 * reshape of x to [3], which a feed of 2 values fails; the wait. */
static void test_open_allreduce_failure(void)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    nb_value x = nb_data(b, "x", NB_F64, 1, (const int64_t[]){-1});
    const char *gn = nb_value_name(nb_scale(b, x, 2, 0));
    nb_block *blk = nb_program_global_block(main_p);
    nb_op *op;
    REQUIRE_OK(nb_block_append_op(blk, "c_allreduce_start", NB_NAMES_N(1, &gn), NB_NAMES_N(1, &gn), NB_NO_ATTRS, &op));
    nb_value r = nb_reshape(b, x, 1, (const int64_t[]){3});
    REQUIRE_OK(nb_builder_status(b));
    REQUIRE_OK(nb_block_append_op(blk, "c_allreduce_wait", NB_NAMES_N(1, &gn), NB_NAMES_N(1, &gn), NB_NO_ATTRS, &op));
    const char *xn = "x", *fetch[2] = {gn, nb_value_name(r)};
    nb_prepared *pp;
    nb_scope *scope;
    REQUIRE_OK(nb_prepare(&pp, main_p, 0, NB_NAMES_N(1, &xn), NB_NAMES_N(2, fetch)));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_comm_stats s0, s1;
    nb_comm_stats_get(nb_comm_ring(0), &s0);
    for (int k = 0; k < 3; k++) {
        nb_tensor *in = k == 1 ? T(NB_F64, S(2), 1, 2) : T(NB_F64, S(3), 1, 2, 3), *out[2] = {NULL, NULL};
        if (k == 1) CHECK_ERR(nb_prepared_run(pp, scope, &in, out), NB_ERR_SHAPE, "reshape");
        else {
            CHECK_OK(nb_prepared_run(pp, scope, &in, out));
            CHECK_TENSOR(out[0], S(3), 0, 2, 4, 6);
        }
        CHECK(nb_comm_ring(0)->n_open == 0);
        release_all(in, out[0], out[1], NULL);
    }
    nb_comm_stats_get(nb_comm_ring(0), &s1);
    CHECK(s1.allreduces - s0.allreduces == 3 && s1.bytes - s0.bytes == 8 * 8);
    nb_scope_free(scope);
    nb_prepared_free(pp);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
}

static void test_pass_errors(void)
{
    dp_static m;
    nb_optimizer opt = nb_sgd(0.1);
    REQUIRE_OK(dp_static_new(&m, &opt, 4));
    nb_data_parallel_opts dp = {.nranks = 0};
    CHECK_ERR(nb_data_parallel(m.main, m.startup, m.loss, &m.grads, &dp), NB_ERR_ARG, "nranks is 0; it must be >= 1");
    dp = (nb_data_parallel_opts){.nranks = 2, .root = 2};
    CHECK_ERR(nb_data_parallel(m.main, m.startup, m.loss, &m.grads, &dp), NB_ERR_ARG, "root 2 is not a rank of 2");
    dp = (nb_data_parallel_opts){.nranks = 2, .ring = -1};
    CHECK_ERR(nb_data_parallel(m.main, m.startup, m.loss, &m.grads, &dp), NB_ERR_ARG, "ring -1 is not in [0, 16)");
    dp = (nb_data_parallel_opts){.nranks = 2};
    CHECK_ERR(nb_data_parallel(m.main, m.startup, "x", &m.grads, &dp), NB_ERR_ARG, "'x' has no gradient");
    dp_static_free(&m);
}

/* Trains STEPS batches of BATCH with `opt` (plain when dp is NULL); the
 * final parameters in out. */
static void train_static(nb_optimizer opt, const nb_data_parallel_opts *dp, bool via_file, double *out, int *n)
{
    nb_tensor *x, *y;
    dp_data(64, &x, &y);
    opt.data_parallel = dp;
    dp_static m;
    REQUIRE_OK(dp_static_new(&m, &opt, 16));
    if (via_file) { /* the programs saved and loaded again keep the collective ops */
        uint8_t *buf;
        size_t len;
        nb_program *main2, *startup2;
        REQUIRE_OK(nb_programs_serialize(m.main, m.startup, &buf, &len));
        REQUIRE_OK(nb_programs_deserialize(&main2, &startup2, buf, len));
        nb_free(buf);
        CHECK(position_of(nb_program_global_block(main2), "c_allreduce_start", 0) >= 0);
        CHECK(position_of(nb_program_global_block(main2), "c_allreduce_wait", 0) >= 0);
        CHECK(position_of(nb_program_global_block(startup2), "c_broadcast", 0) >= 0);
        nb_program_free(m.main);
        nb_program_free(m.startup);
        m.main = main2;
        m.startup = startup2;
        CHECK_OK(nb_executor_run(m.ex, m.startup, m.scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    }
    nb_reader *r;
    REQUIRE_OK(dp_reader(&r, x, y, 0, 1, BATCH));
    for (int s = 0; s < STEPS; s++) {
        nb_tensor *rec[2];
        bool end;
        REQUIRE_OK(nb_reader_next(r, rec, &end));
        CHECK_OK(dp_static_step(&m, rec));
        release_all(rec[0], rec[1], NULL);
    }
    dp_static_params(&m, out, MAXP, n);
    nb_reader_free(r);
    dp_static_free(&m);
    release_all(x, y, NULL);
}

/* On one rank the data-parallel program is the plain one, whatever the
 * buckets, also after a trip through a program file; declared for two
 * ranks, it averages: SGD at lr moves exactly as plain SGD at lr/2.
 * Exactly: so the plain program runs its updates apart from the products
 * (NABLA_FOLD=0), as the data-parallel one, whose gradients an allreduce
 * reads, always does. */
static void test_static_one_rank(void)
{
    double plain[MAXP], got[MAXP];
    int n, n2;
    setenv("NABLA_FOLD", "0", 1);
    nb_optimizer kinds[] = {nb_sgd(0.1), nb_adam(0.01)};
    for (int k = 0; k < 2; k++) {
        train_static(kinds[k], NULL, false, plain, &n);
        CHECK(n == 8 * 16 + 16 + 16 * 3 + 3);
        size_t caps[] = {0, 64, 1};
        for (int c = 0; c < 3; c++) {
            nb_data_parallel_opts dp = {.nranks = 1, .bucket_bytes = caps[c]};
            train_static(kinds[k], &dp, c == 1, got, &n2);
            CHECK(n2 == n && dp_max_diff(plain, got, n) == 0);
        }
    }
    train_static(nb_sgd(0.05), NULL, false, plain, &n);
    nb_comm_stats before, after;
    nb_comm_stats_get(nb_comm_ring(0), &before);
    train_static(nb_sgd(0.1), &(nb_data_parallel_opts){.nranks = 2}, false, got, &n2);
    CHECK(n2 == n && dp_max_diff(plain, got, n) == 0);
    /* Each step all-reduced every gradient once: n values of float64. */
    nb_comm_stats_get(nb_comm_ring(0), &after);
    CHECK(after.bytes - before.bytes == (double)STEPS * n * 8);
    CHECK(after.allreduces - before.allreduces >= STEPS);
    CHECK(after.overlap_seconds <= after.comm_seconds && after.hidden_fraction <= 1);
    train_static(nb_sgd(0.1), &(nb_data_parallel_opts){.nranks = 2, .synchronous = true}, false, got, &n2);
    CHECK(n2 == n && dp_max_diff(plain, got, n) == 0);
    nb_comm_stats_get(nb_comm_ring(0), &before);
    CHECK(before.bytes - after.bytes == (double)STEPS * n * 8);
    unsetenv("NABLA_FOLD");
}

/* ---- eager ---------------------------------------------------------------------------------- */

static void train_eager(nb_optimizer opt, bool ddp, bool stepped, size_t bucket, double *out, int *n,
                        nb_ddp_stats *stats)
{
    nb_tensor *x, *y;
    dp_data(64, &x, &y);
    nb_comm *c = NULL;
    if (ddp) REQUIRE_OK(nb_comm_init_single(&c));
    dp_eager m;
    REQUIRE_OK(dp_eager_new(&m, &opt, 16, x, c, bucket));
    if (stepped) {
        REQUIRE_OK(nb_ddp_set_optimizer(m.ddp, m.o));
        m.stepped = true;
    }
    nb_reader *r;
    REQUIRE_OK(dp_reader(&r, x, y, 0, 1, BATCH));
    for (int s = 0; s < STEPS; s++) {
        nb_tensor *rec[2];
        bool end;
        REQUIRE_OK(nb_reader_next(r, rec, &end));
        CHECK_OK(dp_eager_step(&m, rec));
        release_all(rec[0], rec[1], NULL);
    }
    dp_eager_params(&m, out, MAXP, n);
    if (stats) nb_ddp_stats_get(m.ddp, stats);
    nb_reader_free(r);
    dp_eager_free(&m);
    nb_comm_free(c);
    release_all(x, y, NULL);
}

static void test_ddp_one_rank(void)
{
    double plain[MAXP], got[MAXP];
    int n, n2;
    nb_optimizer kinds[] = {nb_sgd(0.1), nb_adam(0.01)};
    for (int k = 0; k < 2; k++) {
        train_eager(kinds[k], false, false, 0, plain, &n, NULL);
        size_t caps[] = {0, 64, 1};
        for (int c = 0; c < 6; c++) { /* the last three: nb_ddp_step updates bucket by bucket */
            nb_ddp_stats s;
            train_eager(kinds[k], true, c >= 3, caps[c % 3], got, &n2, &s);
            CHECK(n2 == n && dp_max_diff(plain, got, n) == 0);
            CHECK(s.steps == STEPS && s.allreduces == (int64_t)STEPS * s.n_buckets);
            CHECK(s.n_buckets == (c % 3 == 0 ? 1 : 4));
            CHECK(s.bytes == (double)STEPS * n * 8);
        }
    }
}

/* nb_ddp_step with the ddp's own optimiser: one step per backward, no
 * plain step of that optimiser and no change of it in the middle of one,
 * and a backward after one whose step did not come refused. */
static void test_ddp_step_order(void)
{
    nb_tensor *x, *y;
    dp_data(8, &x, &y);
    nb_comm *c;
    REQUIRE_OK(nb_comm_init_single(&c));
    nb_optimizer adam = nb_adam(0.01);
    dp_eager m;
    REQUIRE_OK(dp_eager_new(&m, &adam, 4, x, c, 64));
    REQUIRE_OK(nb_ddp_set_optimizer(m.ddp, m.o));
    nb_tensor *rec[2] = {x, y};
    CHECK_ERR(nb_ddp_step(m.ddp), NB_ERR_STATE, "no nb_ddp_backward since the last step");
    m.stepped = true;
    CHECK_OK(dp_eager_step(&m, rec));
    CHECK(nb_eager_optimizer_steps(m.o) == 1);
    m.stepped = false; /* the plain eager step would read gradients not averaged yet */
    CHECK_ERR(dp_eager_step(&m, rec), NB_ERR_STATE, "call nb_ddp_step after nb_ddp_backward");
    nb_value cost = nb_layer_softmax_cross_entropy(m.b, dp_mlp(m.b, nb_eager_value(m.b, x), 4), nb_eager_value(m.b, y));
    CHECK_ERR(nb_ddp_backward(m.ddp, nb_eager_tensor(cost)), NB_ERR_STATE, "nb_ddp_step did not come");
    nb_eager_zero_grad(m.b);
    CHECK_OK(nb_ddp_backward(m.ddp, nb_eager_tensor(cost)));
    CHECK_ERR(nb_ddp_set_optimizer(m.ddp, NULL), NB_ERR_STATE, "a step is under way");
    CHECK_OK(nb_ddp_step(m.ddp));
    CHECK(nb_eager_optimizer_steps(m.o) == 2);
    CHECK_OK(nb_ddp_set_optimizer(m.ddp, NULL));
    CHECK_ERR(nb_ddp_step(m.ddp), NB_ERR_STATE, "has no optimizer");
    CHECK_OK(dp_eager_step(&m, rec)); /* unset: the plain step again */
    CHECK(nb_eager_optimizer_steps(m.o) == 3);
    nb_eager_zero_grad(m.b);
    nb_eager_release_values(m.b);
    dp_eager_free(&m);
    nb_comm_free(c);
    release_all(x, y, NULL);
}

/* Buckets run from the last-created parameter; one the loss does not
 * reach gets a zero gradient (the average of what the ranks saw); a plain
 * nb_backward is not synchronised, and freeing the DDP removes its hooks. */
static void test_ddp_buckets_and_unused(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_value w1 = nb_param(b, "w1", NB_F64, 1, S(3), nb_init_constant(1));
    nb_value w2 = nb_param(b, "w2", NB_F64, 1, S(3), nb_init_constant(2));
    nb_value unused = nb_param(b, "unused", NB_F64, 1, S(2), nb_init_constant(3));
    (void)unused;
    nb_comm *c;
    REQUIRE_OK(nb_comm_init_single(&c));
    nb_ddp *d;
    REQUIRE_OK(nb_ddp_new(&d, c, b, 24));
    CHECK(nb_ddp_bucket_count(d) == 3);
    CHECK(nb_ddp_bucket_of(d, 2) == 0 && nb_ddp_bucket_of(d, 1) == 1 && nb_ddp_bucket_of(d, 0) == 2);
    CHECK(nb_ddp_bucket_of(d, 3) == -1);
    nb_value loss = nb_reduce_sum(b, nb_mul(b, w1, nb_add(b, w2, w1)), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(b));
    CHECK_OK(nb_ddp_backward(d, nb_eager_tensor(loss)));
    CHECK_TENSOR(nb_tensor_grad(nb_eager_tensor(w1)), S(3), 0, 4, 4, 4); /* w2 + 2 w1 */
    CHECK_TENSOR(nb_tensor_grad(nb_eager_tensor(w2)), S(3), 0, 1, 1, 1);
    nb_tensor *gu = nb_tensor_grad(nb_eager_find_param(b, "unused"));
    CHECK(gu != NULL);
    if (gu) CHECK_TENSOR(gu, S(2), 0, 0, 0);
    nb_eager_zero_grad(b);
    nb_ddp_free(d);
    loss = nb_reduce_sum(b, nb_mul(b, w1, w2), 0, NULL, false);
    CHECK_OK(nb_backward(NB_TENSORS(nb_eager_tensor(loss)), NULL, 0));
    CHECK_TENSOR(nb_tensor_grad(nb_eager_tensor(w1)), S(3), 0, 2, 2, 2);
    CHECK(nb_tensor_grad(nb_eager_find_param(b, "unused")) == NULL);
    nb_builder_free(b);
    nb_builder *empty;
    REQUIRE_OK(nb_builder_new_eager(&empty));
    CHECK_ERR(nb_ddp_new(&d, c, empty, 0), NB_ERR_ARG, "the builder has no parameters yet");
    nb_builder_free(empty);
    nb_comm_free(c);
}

/* ---- the hooks under nb_ddp ---------------------------------------------------------------------- */

static nb_status count_ready(nb_tensor *leaf, void *ctx)
{
    int *calls = ctx;
    calls[0]++;
    calls[1] = (int)nb_tensor_get(nb_tensor_grad(leaf), 0);
    return NB_OK;
}

static void test_post_accumulate_hook(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *w = T(NB_F64, S(1), 3);
    REQUIRE_OK(nb_tensor_set_requires_grad(w, true));
    int calls[2] = {0, 0};
    CHECK_OK(nb_tensor_register_post_accumulate_hook(w, count_ready, calls));
    nb_value v = nb_eager_value(b, w);
    nb_value y = nb_add(b, nb_mul(b, v, v), nb_scale(b, v, 5, 0)); /* w^2 + 5w: two paths */
    CHECK_OK(nb_backward(NB_TENSORS(nb_eager_tensor(y)), NULL, NB_RETAIN_GRAPH));
    CHECK(calls[0] == 1 && calls[1] == 11); /* once, with the sum 2w + 5 */
    nb_tensor *dx;
    CHECK_OK(nb_autograd_grad(NB_TENSORS(nb_eager_tensor(y)), NULL, NB_TENSORS(w), NB_RETAIN_GRAPH, &dx));
    CHECK(calls[0] == 1); /* autograd_grad leaves .grad alone, and the hook */
    nb_tensor_release(dx);
    nb_tensor_remove_post_accumulate_hook(w, count_ready, calls);
    nb_tensor_remove_post_accumulate_hook(w, count_ready, calls); /* not there: nothing */
    nb_tensor *g = T(NB_F64, S(1), -1), *bad = T(NB_F64, S(2), 1, 2);
    CHECK_OK(nb_tensor_set_grad(w, g));
    CHECK(nb_tensor_grad(w) == g);
    CHECK_ERR(nb_tensor_set_grad(w, bad), NB_ERR_SHAPE, "the gradient is float64 [2] but the tensor is float64 [1]");
    CHECK_OK(nb_tensor_set_grad(w, NULL));
    CHECK(nb_tensor_grad(w) == NULL);
    CHECK_ERR(nb_tensor_register_post_accumulate_hook(nb_eager_tensor(y), count_ready, calls), NB_ERR_ARG,
              "not a leaf that requires grad");
    release_all(w, g, bad, NULL);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_single_communicator);
    RUN(test_rings);
    RUN(test_collective_ops_eager);
    RUN(test_bucket_plan);
    RUN(test_pass_inserts);
    RUN(test_pass_synchronous);
    RUN(test_open_allreduce_failure);
    RUN(test_pass_errors);
    RUN(test_static_one_rank);
    RUN(test_ddp_one_rank);
    RUN(test_ddp_step_order);
    RUN(test_ddp_buckets_and_unused);
    RUN(test_post_accumulate_hook);
    return test_report();
}
