/* The training loop: it learns a small synthetic task, writes its metrics,
 * and a run stopped after some epochs and resumed from its checkpoint ends
 * with exactly the parameters of an uninterrupted run, dropout, shuffling
 * and Adam's state included. */
#include <stdlib.h>
#include <unistd.h>
#include "test.h"

#define N 256

/* Two interleaved classes on a plane: label = (x0 * x1 > 0), as float
 * features [N, 2] and int64 labels [N, 1]. */
static nb_reader *toy_reader(uint64_t seed, bool shuffle, int batch)
{
    nb_tensor *x, *y;
    if (nb_tensor_new(&x, NB_F32, 2, S(N, 2)) || nb_tensor_new(&y, NB_I64, 2, S(N, 1))) return NULL;
    nb_rng rng;
    nb_rng_seed(&rng, 99);
    for (int i = 0; i < N; i++) {
        double a = 2 * nb_rng_uniform(&rng) - 1, b = 2 * nb_rng_uniform(&rng) - 1;
        nb_tensor_set(x, 2 * i, a);
        nb_tensor_set(x, 2 * i + 1, b);
        nb_tensor_set(y, i, a * b > 0);
    }
    nb_reader *r = NULL;
    nb_tensor *fields[] = {x, y};
    nb_status st = nb_reader_from_tensors(&r, 2, fields);
    nb_tensor_release(x);
    nb_tensor_release(y);
    if (!st && shuffle) st = nb_reader_shuffle(&r, r, seed);
    if (!st) st = nb_reader_batch(&r, r, batch, false);
    return st ? NULL : r;
}

typedef struct setup {
    nb_program *main, *startup;
    nb_builder *b;
    nb_scope *scope;
    const char *loss, *acc;
    nb_backward_result grads;
} setup;

static nb_status build(setup *s, bool dropout)
{
    memset(s, 0, sizeof *s);
    nb_status st;
    if ((st = nb_program_new(&s->main)) || (st = nb_program_new(&s->startup)) ||
        (st = nb_builder_new_record(&s->b, s->main, s->startup)) || (st = nb_scope_new(&s->scope, NULL)))
        return st;
    nb_program_set_seed(s->main, 5);
    nb_program_set_seed(s->startup, 5);
    nb_value x = nb_layer_data(s->b, "x", NB_F32, 2, S(-1, 2));
    nb_value y = nb_layer_data(s->b, "y", NB_I64, 2, S(-1, 1));
    nb_value h = nb_layer_fc(s->b, x, 32, "tanh", NULL);
    if (dropout) h = nb_layer_dropout(s->b, h, 0.1);
    nb_value logits = nb_layer_fc(s->b, h, 2, NULL, NULL);
    nb_value loss = nb_layer_softmax_cross_entropy(s->b, logits, y);
    nb_value acc = nb_layer_accuracy(s->b, logits, y, 1);
    if ((st = nb_builder_status(s->b))) return nb_error(st, "%s", nb_builder_error(s->b));
    s->loss = nb_value_name(loss);
    s->acc = nb_value_name(acc);
    nb_optimizer opt = nb_adam(0.05);
    return nb_minimize(&opt, s->main, s->startup, s->loss, NULL, &s->grads);
}

static void teardown(setup *s)
{
    nb_backward_result_free(&s->grads);
    nb_builder_free(s->b);
    nb_scope_free(s->scope);
    nb_program_free(s->startup);
    nb_program_free(s->main);
}

static const char *const feeds[] = {"x", "y"};

static void test_learns_and_writes_metrics(void)
{
    char dir[] = "/tmp/nabla_train_XXXXXX", csv[256], png[256];
    REQUIRE_OK(mkdtemp(dir) ? NB_OK : NB_ERR_IO);
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    snprintf(png, sizeof png, "%s/curves.png", dir);
    setup s;
    REQUIRE_OK(build(&s, false));
    nb_reader *train = toy_reader(1, true, 16), *test = toy_reader(0, false, 64);
    REQUIRE_OK(train && test ? NB_OK : NB_ERR_NOMEM);
    nb_train_config cfg = {.epochs = 30,
                           .n_feeds = 2,
                           .feeds = feeds,
                           .loss = s.loss,
                           .metric = s.acc,
                           .test = test,
                           .csv_path = csv,
                           .plot_path = png,
                           .progress = NB_PROGRESS_QUIET};
    nb_train_result r;
    REQUIRE_OK(nb_train(&cfg, s.main, s.startup, s.scope, train, &r));
    CHECK(r.epochs_done == 30 && r.steps == 30 * (N / 16));
    CHECK(r.last.test_metric >= 0.95);
    CHECK(r.last.train_loss < 0.2);
    /* The CSV: a header and one row per epoch. */
    FILE *f = fopen(csv, "r");
    int lines = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) lines++;
    if (f) fclose(f);
    CHECK(lines == 31);
    /* The plot exists where gnuplot does (make test installs it). */
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) CHECK(access(png, F_OK) == 0);
    double loss, acc;
    CHECK_OK(nb_evaluate(&cfg, s.main, s.scope, test, &loss, &acc));
    CHECK_NEAR(acc, r.last.test_metric, 1e-12);
    nb_reader_free(train);
    nb_reader_free(test);
    teardown(&s);
    unlink(csv);
    unlink(png);
    rmdir(dir);
}

/* Parameters after `epochs` epochs, trained in one go or in pieces through a
 * checkpoint (each piece in a fresh scope and fresh programs, as a new
 * process would). */
static nb_status train_in_pieces(const int *pieces, int n_pieces, const char *ckpt, nb_tensor **w_out)
{
    unlink(ckpt);
    int total = 0;
    for (int p = 0; p < n_pieces; p++) total += pieces[p];
    nb_status st = NB_OK;
    int done = 0;
    for (int p = 0; p < n_pieces && !st; p++) {
        setup s;
        nb_reader *train = NULL;
        if (!(st = build(&s, true))) {
            train = toy_reader(3, true, 10);
            nb_train_config cfg = {.epochs = total,
                                   .n_feeds = 2,
                                   .feeds = feeds,
                                   .loss = s.loss,
                                   .checkpoint_path = ckpt,
                                   .resume = true,
                                   .stop_after_epochs = pieces[p],
                                   .progress = NB_PROGRESS_QUIET};
            nb_train_result r;
            st = train ? nb_train(&cfg, s.main, s.startup, s.scope, train, &r) : NB_ERR_NOMEM;
            done += pieces[p];
            if (!st && r.epochs_done != done)
                st = nb_error(NB_ERR_STATE, "epochs_done %d, expected %d", r.epochs_done, done);
            if (!st && p == n_pieces - 1) st = nb_tensor_clone(w_out, nb_scope_find(s.scope, "fc_0.w_0"));
        }
        nb_reader_free(train);
        teardown(&s);
    }
    unlink(ckpt);
    return st;
}

static void test_resumed_training_equals_uninterrupted(void)
{
    char ckpt[] = "/tmp/nabla_resume_XXXXXX";
    int fd = mkstemp(ckpt);
    REQUIRE_OK(fd >= 0 ? NB_OK : NB_ERR_IO);
    close(fd);
    nb_tensor *whole = NULL, *pieces = NULL, *other = NULL;
    REQUIRE_OK(train_in_pieces((const int[]){4}, 1, ckpt, &whole));
    REQUIRE_OK(train_in_pieces((const int[]){1, 2, 1}, 3, ckpt, &pieces));
    /* Bit for bit: same updates, same dropout masks, same batch order. */
    CHECK(nb_tensor_allclose(whole, pieces, 0, 0));
    /* And the check can fail: two epochs fewer differ. */
    REQUIRE_OK(train_in_pieces((const int[]){2}, 1, ckpt, &other));
    CHECK(!nb_tensor_allclose(whole, other, 0, 0));
    release_all(whole, pieces, other, NULL);
}

static void test_config_errors(void)
{
    setup s;
    REQUIRE_OK(build(&s, false));
    nb_reader *train = toy_reader(1, false, 8);
    nb_train_result r;
    nb_train_config cfg = {.epochs = 1, .n_feeds = 1, .feeds = feeds, .loss = s.loss, .progress = NB_PROGRESS_QUIET};
    CHECK_ERR(nb_train(&cfg, s.main, s.startup, s.scope, train, &r), NB_ERR_ARG, "yields 2 fields but 1 feeds");
    cfg.n_feeds = 2;
    cfg.resume = true;
    CHECK_ERR(nb_train(&cfg, s.main, s.startup, s.scope, train, &r), NB_ERR_ARG, "resume needs a checkpoint");
    nb_reader_free(train);
    teardown(&s);
}

int main(void)
{
    RUN(test_learns_and_writes_metrics);
    RUN(test_resumed_training_equals_uninterrupted);
    RUN(test_config_errors);
    return test_report();
}
