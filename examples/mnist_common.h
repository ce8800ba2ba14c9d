/* What the MNIST examples share: their flags, building the readers, the
 * optimiser, and the two ways to train one model function: as a static
 * program (nb_minimize, nb_train) or eagerly (--eager: the model runs at
 * once on each batch, nb_backward, nb_eager_optimizer_step). */
#ifndef NABLA_MNIST_COMMON_H
#define NABLA_MNIST_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include "example_data.h"
#include "nabla/nabla.h"

typedef struct mnist_args {
    const char *data;         /* --data DIR */
    int epochs;               /* --epochs N */
    int batch;                /* --batch B */
    double lr;                /* --lr X */
    uint64_t seed;            /* --seed S */
    const char *csv;          /* --csv FILE */
    const char *plot;         /* --plot FILE.png */
    const char *checkpoint;   /* --checkpoint FILE */
    const char *save_program; /* --save-program FILE */
    bool resume;              /* --resume */
    bool quiet;               /* --quiet */
    bool eager;               /* --eager */
    bool mpi;                 /* --mpi */
    nb_comm *comm;            /* with --mpi: MPI_COMM_WORLD; else NULL */
} mnist_args;

static void mnist_usage(const char *prog, const mnist_args *d)
{
    printf("usage: %s [--data DIR] [--epochs N] [--batch B] [--lr X] [--seed S]\n"
           "       [--csv FILE] [--plot FILE.png] [--checkpoint FILE [--resume]] [--save-program FILE]\n"
           "       [--quiet] [--eager] [--mpi]\n\n"
           "Trains on MNIST and ends with the line 'test accuracy: 0.XXXX'.\n"
           "--eager runs the same model in eager mode (no program; --csv, --plot and\n"
           "--checkpoint are for the static program only). --save-program writes the\n"
           "training programs (nb_programs_save), whose output var is named 'logits', so that\n"
           "with the checkpoint `nabla onnx-export FILE CKPT --fetch logits -o m.onnx` exports it.\n"
           "--mpi trains data-parallel over the processes of `mpirun -np N`: each rank takes\n"
           "its shard of every epoch and batch B/N, so that the N ranks together train with\n"
           "batch B; rank 0 reports.\n"
           "Defaults: --epochs %d --batch %d --lr %g --seed %llu. The data is looked up in\n"
           "--data DIR, then $NABLA_DATA, then data/ and ../data/ (here and beside the program),\n"
           "then the build's data folder (%s).\n",
           prog, d->epochs, d->batch, d->lr, (unsigned long long)d->seed, EXAMPLE_DATA_DIR_TEXT);
}

static bool parse_number(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: expected a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

/* Parses argv into *a (which holds the defaults); exits on --help or error. */
static void mnist_parse(int argc, char **argv, mnist_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        double v;
        bool has_value = i + 1 < argc;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            mnist_usage(argv[0], a);
            exit(0);
        } else if (!strcmp(f, "--resume")) a->resume = true;
        else if (!strcmp(f, "--eager")) a->eager = true;
        else if (!strcmp(f, "--mpi")) a->mpi = true;
        else if (!strcmp(f, "--quiet")) a->quiet = true;
        else if (!has_value) {
            fprintf(stderr, "%s: unknown flag or missing value (try --help)\n", f);
            exit(2);
        } else if (!strcmp(f, "--data")) a->data = argv[++i];
        else if (!strcmp(f, "--csv")) a->csv = argv[++i];
        else if (!strcmp(f, "--plot")) a->plot = argv[++i];
        else if (!strcmp(f, "--checkpoint")) a->checkpoint = argv[++i];
        else if (!strcmp(f, "--save-program")) a->save_program = argv[++i];
        else if (!strcmp(f, "--epochs") && parse_number(f, argv[++i], 1, 1000, &v)) a->epochs = (int)v;
        else if (!strcmp(f, "--batch") && parse_number(f, argv[++i], 1, 65536, &v)) a->batch = (int)v;
        else if (!strcmp(f, "--lr") && parse_number(f, argv[++i], 1e-9, 100, &v)) a->lr = v;
        else if (!strcmp(f, "--seed") && parse_number(f, argv[++i], 0, 1e18, &v)) a->seed = (uint64_t)v;
        else {
            fprintf(stderr, "%s: unknown flag or bad value (try --help)\n", f);
            exit(2);
        }
    }
    if (a->resume && !a->checkpoint) {
        fprintf(stderr, "--resume needs --checkpoint FILE\n");
        exit(2);
    }
    if (a->eager && (a->csv || a->plot || a->checkpoint || a->save_program)) {
        fprintf(stderr, "--eager: --csv, --plot, --checkpoint and --save-program work with the static program only\n");
        exit(2);
    }
}

/* Batches in an epoch of the 60000 training images (the last may be short). */
static int64_t mnist_steps_per_epoch(int batch) { return (60000 + batch - 1) / batch; }

/* Prints the failure and exits. */
static void die_on(nb_status st, const char *what)
{
    if (!st) return;
    fprintf(stderr, "%s: %s\n", what, nb_last_error());
    exit(1);
}

/* The training reader (shuffled by the seed) and the test reader. Neither
 * prefetches: MNIST lies decoded in memory, a batch is a copy of 200 KB,
 * and a producer thread's wake-ups cost more than they hide. (With another
 * process holding one of two cores, an epoch at the default thread count
 * took 1.16 times its one-thread time with prefetch_depth 2, 0.99 without;
 * at one thread the two were the same.) */
static void mnist_readers(const mnist_args *a, nb_reader **train, nb_reader **test)
{
    char dir[4096];
    die_on(example_data_find(a->data, "mnist", dir, sizeof dir), "data");
    const int rank = nb_comm_rank(a->comm), size = nb_comm_size(a->comm);
    nb_mnist_shard_opts shard = {.rank = rank, .size = size, .prefetch_depth = 0};
    die_on(nb_mnist_reader_shard(train, dir, NB_MNIST_TRAIN | NB_MNIST_SHUFFLE, a->batch / size, a->seed, &shard),
           "training data");
    if (a->comm)
        printf("rank %d of %d: %d of the 60000 training examples per epoch, batches of %d\n", rank, size,
               60000 / size + (rank < 60000 % size), a->batch / size);
    die_on(nb_mnist_reader(test, dir, 0, 1000, 0, 0), "test data");
}

/* Adam, its learning rate decayed to zero along a cosine over the run. */
static nb_optimizer mnist_optimizer(const mnist_args *a)
{
    nb_optimizer opt = nb_adam(a->lr);
    opt.schedule = (nb_lr_schedule){.kind = "cosine", .total_steps = a->epochs * mnist_steps_per_epoch(a->batch)};
    return opt;
}

/* Trains `main` on MNIST as the flags say and prints the test accuracy. */
static int mnist_train(const mnist_args *a, nb_program *main_p, nb_program *startup, const char *loss, const char *acc)
{
    nb_reader *train, *test;
    mnist_readers(a, &train, &test);
    nb_scope *scope;
    die_on(nb_scope_new(&scope, NULL), "scope");
    const char *feeds[] = {"images", "label"};
    nb_train_config cfg = {.epochs = a->epochs,
                           .n_feeds = 2,
                           .feeds = feeds,
                           .loss = loss,
                           .metric = acc,
                           .test = test,
                           .csv_path = a->csv,
                           .plot_path = a->plot,
                           .checkpoint_path = a->checkpoint,
                           .resume = a->resume,
                           .progress = a->quiet ? NB_PROGRESS_QUIET : NB_PROGRESS_AUTO,
                           .comm = a->comm};
    nb_train_result r;
    die_on(nb_train(&cfg, main_p, startup, scope, train, &r), "training");
    if (nb_comm_rank(a->comm) == 0) printf("test accuracy: %.4f\n", r.last.test_metric);
    nb_reader_free(train);
    nb_reader_free(test);
    nb_scope_free(scope);
    return 0;
}

/* The programs and builder an example builds its model with, seeded. */
typedef struct mnist_model {
    nb_program *main, *startup;
    nb_builder *b;
} mnist_model;

static void mnist_begin(const mnist_args *a, mnist_model *m)
{
    die_on(nb_program_new(&m->main), "program");
    die_on(nb_program_new(&m->startup), "program");
    nb_program_set_seed(m->main, a->seed);
    nb_program_set_seed(m->startup, a->seed);
    die_on(nb_builder_new_record(&m->b, m->main, m->startup), "builder");
}

/* Appends Adam (its learning rate decayed to zero along a cosine over the
 * run) to the model whose loss is `cost`, trains it and frees it. */
static int mnist_finish(const mnist_args *a, mnist_model *m, nb_value cost, nb_value acc)
{
    if (nb_builder_status(m->b)) {
        fprintf(stderr, "model: %s\n", nb_builder_error(m->b));
        return 1;
    }
    nb_optimizer opt = mnist_optimizer(a);
    /* With --mpi: gradients averaged over the ranks in buckets, parameters
     * broadcast from rank 0 by the startup program. */
    nb_data_parallel_opts dp = {.nranks = nb_comm_size(a->comm)};
    if (a->comm) opt.data_parallel = &dp;
    nb_backward_result grads;
    die_on(nb_minimize(&opt, m->main, m->startup, nb_value_name(cost), NULL, &grads), "minimize");
    if (a->save_program) die_on(nb_programs_save(a->save_program, m->main, m->startup), "saving the program");
    int rc = mnist_train(a, m->main, m->startup, nb_value_name(cost), nb_value_name(acc));
    nb_backward_result_free(&grads);
    nb_builder_free(m->b);
    nb_program_free(m->startup);
    nb_program_free(m->main);
    return rc;
}

/* ---- eager mode ------------------------------------------------------------------------ */

/* A model as a function of the builder and the images [B, 784]: the
 * logits [B, 10]. The same function builds the program or runs eagerly. */
typedef nb_value (*mnist_model_fn)(nb_builder *b, nb_value images);

/* The program of `model` with its loss and accuracy, trained by nb_train. */
static inline int mnist_run_static(const mnist_args *a, mnist_model_fn model)
{
    mnist_model m;
    mnist_begin(a, &m);
    nb_value x = nb_layer_data(m.b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value l = nb_layer_data(m.b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value y = model(m.b, x);
    /* A name to fetch the model's output by (nabla onnx-export --fetch logits). */
    if (!nb_builder_status(m.b))
        die_on(nb_block_rename_var(nb_builder_block(m.b), nb_value_name(y), "logits"), "naming the output");
    nb_value cost = nb_layer_softmax_cross_entropy(m.b, y, l);
    nb_value acc = nb_layer_accuracy(m.b, y, l, 1);
    return mnist_finish(a, &m, cost, acc);
}

static inline double mnist_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sums over an epoch: loss and accuracy weighted by the batch sizes. */
typedef struct mnist_sums {
    double loss, acc;
    int64_t samples;
} mnist_sums;

/* The model on one batch: loss and accuracy added to *s; with o, the
 * backward and the update too. The batch's tensors are released here. */
static inline void mnist_eager_batch(nb_builder *b, mnist_model_fn model, nb_tensor **rec, nb_eager_optimizer *o,
                                     nb_ddp *ddp, mnist_sums *s)
{
    nb_value l = nb_eager_value(b, rec[1]);
    nb_value y = model(b, nb_eager_value(b, rec[0]));
    nb_value cost = nb_layer_softmax_cross_entropy(b, y, l);
    nb_value acc = nb_layer_accuracy(b, y, l, 1);
    nb_tensor_release(rec[0]);
    nb_tensor_release(rec[1]);
    if (nb_builder_status(b)) {
        fprintf(stderr, "model: %s\n", nb_builder_error(b));
        exit(1);
    }
    nb_tensor *loss = nb_eager_tensor(cost);
    const int64_t n = nb_eager_tensor(y)->shape[0];
    s->loss += nb_tensor_get(loss, 0) * (double)n;
    s->acc += nb_tensor_get(nb_eager_tensor(acc), 0) * (double)n;
    s->samples += n;
    if (o) {
        die_on(ddp ? nb_ddp_backward(ddp, loss) : nb_backward(NB_TENSORS(loss), NULL, 0), "backward");
        die_on(ddp ? nb_ddp_step(ddp) : nb_eager_optimizer_step(o, b), "optimizer step");
        nb_eager_zero_grad(b);
    }
    nb_eager_release_values(b);
}

/* One pass over a reader: training (with o) or evaluation. */
static inline mnist_sums mnist_eager_epoch(nb_builder *b, mnist_model_fn model, nb_reader *r, uint64_t epoch,
                                           nb_eager_optimizer *o, nb_ddp *ddp)
{
    mnist_sums s = {0};
    die_on(nb_reader_reset(r, epoch), "data");
    for (;;) {
        nb_tensor *rec[2];
        bool end;
        die_on(nb_reader_next(r, rec, &end), "data");
        if (end) break;
        mnist_eager_batch(b, model, rec, o, ddp, &s);
    }
    return s;
}

/* Trains `model` eagerly: each batch runs the model at once, backward
 * fills the parameters' gradients and the optimiser (that of the static
 * path) updates them; evaluation runs in test mode without a tape. Prints
 * a line per epoch and the test accuracy. */
static inline int mnist_run_eager(const mnist_args *a, mnist_model_fn model)
{
    nb_reader *train, *test;
    mnist_readers(a, &train, &test);
    nb_builder *b;
    die_on(nb_builder_new_eager(&b), "eager builder");
    nb_eager_set_seed(b, a->seed);
    nb_optimizer opt = mnist_optimizer(a);
    nb_eager_optimizer *o;
    die_on(nb_eager_optimizer_new(&o, &opt), "optimizer");
    nb_ddp *ddp = NULL;
    if (a->comm) {
        /* DDP wraps parameters that exist: one forward pass (no tape) makes
         * them, then every rank takes rank 0's. */
        nb_tensor *rec[2];
        bool end;
        die_on(nb_reader_next(test, rec, &end), "data");
        nb_grad_mode_push(false);
        model(b, nb_eager_value(b, rec[0]));
        nb_grad_mode_pop();
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
        nb_eager_release_values(b);
        die_on(nb_ddp_new(&ddp, a->comm, b, 0), "ddp");
        /* nb_ddp_step updates each bucket's parameters while the later
         * buckets' all-reduces run. */
        die_on(nb_ddp_set_optimizer(ddp, o), "ddp optimizer");
    }
    mnist_sums te = {0};
    for (int epoch = 0; epoch < a->epochs; epoch++) {
        const double t0 = mnist_now();
        nb_eager_set_test_mode(b, false);
        mnist_sums tr = mnist_eager_epoch(b, model, train, (uint64_t)epoch, o, ddp);
        const double secs = mnist_now() - t0;
        nb_eager_set_test_mode(b, true);
        nb_grad_mode_push(false);
        te = mnist_eager_epoch(b, model, test, 0, NULL, NULL);
        nb_grad_mode_pop();
        if (a->comm) { /* the whole batch's figures: every rank's sums */
            double v[3] = {tr.loss, tr.acc, (double)tr.samples};
            nb_tensor *t;
            die_on(nb_tensor_wrap(&t, NB_F64, 1, (const int64_t[]){3}, v), "sums");
            die_on(nb_comm_allreduce_sum(a->comm, t), "summing over the ranks");
            nb_tensor_release(t);
            tr = (mnist_sums){v[0], v[1], (int64_t)v[2]};
        }
        const double ns = tr.samples ? (double)tr.samples : 1, nt = te.samples ? (double)te.samples : 1;
        if (!a->quiet && nb_comm_rank(a->comm) == 0)
            printf("epoch %d/%d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s, %.0f samples/s\n",
                   epoch + 1, a->epochs, tr.loss / ns, tr.acc / ns, te.loss / nt, te.acc / nt, secs,
                   (double)tr.samples / secs);
        fflush(stdout);
    }
    if (nb_comm_rank(a->comm) == 0) printf("test accuracy: %.4f\n", te.samples ? te.acc / (double)te.samples : 0.0);
    nb_ddp_free(ddp);
    nb_eager_optimizer_free(o);
    nb_builder_free(b);
    nb_reader_free(train);
    nb_reader_free(test);
    return 0;
}

/* Trains `model` the way the flags say. */
static inline int mnist_run(mnist_args *a, mnist_model_fn model)
{
    if (a->mpi) {
        die_on(nb_comm_init_mpi(&a->comm, NULL), "--mpi");
        if (a->batch % nb_comm_size(a->comm)) {
            fprintf(stderr, "--mpi: --batch %d is not a multiple of the %d ranks\n", a->batch, nb_comm_size(a->comm));
            exit(2);
        }
        die_on(nb_comm_set_ring(0, a->comm), "--mpi");
    }
    int rc = a->eager ? mnist_run_eager(a, model) : mnist_run_static(a, model);
    nb_comm_set_ring(0, NULL);
    nb_comm_free(a->comm);
    return rc;
}

#endif
