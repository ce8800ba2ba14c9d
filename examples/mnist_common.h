/* What the MNIST examples share: their flags, and building the readers. */
#ifndef NABLA_MNIST_COMMON_H
#define NABLA_MNIST_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/nabla.h"

typedef struct mnist_args {
    const char *data;     /* --data DIR */
    int epochs;           /* --epochs N */
    int batch;            /* --batch B */
    double lr;            /* --lr X */
    uint64_t seed;        /* --seed S */
    const char *csv;      /* --csv FILE */
    const char *plot;     /* --plot FILE.png */
    const char *checkpoint; /* --checkpoint FILE */
    bool resume;          /* --resume */
    bool quiet;           /* --quiet */
} mnist_args;

static void mnist_usage(const char *prog, const mnist_args *d)
{
    printf("usage: %s [--data DIR] [--epochs N] [--batch B] [--lr X] [--seed S]\n"
           "       [--csv FILE] [--plot FILE.png] [--checkpoint FILE [--resume]] [--quiet]\n\n"
           "Trains on MNIST and ends with the line 'test accuracy: 0.XXXX'.\n"
           "Defaults: --epochs %d --batch %d --lr %g --seed %llu. The data is looked up in\n"
           "--data DIR, then $NABLA_DATA, then data/, then ../shared/data/.\n",
           prog, d->epochs, d->batch, d->lr, (unsigned long long)d->seed);
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
        else if (!strcmp(f, "--quiet")) a->quiet = true;
        else if (!has_value) {
            fprintf(stderr, "%s: unknown flag or missing value (try --help)\n", f);
            exit(2);
        } else if (!strcmp(f, "--data")) a->data = argv[++i];
        else if (!strcmp(f, "--csv")) a->csv = argv[++i];
        else if (!strcmp(f, "--plot")) a->plot = argv[++i];
        else if (!strcmp(f, "--checkpoint")) a->checkpoint = argv[++i];
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

/* Trains `main` on MNIST as the flags say and prints the test accuracy. */
static int mnist_train(const mnist_args *a, nb_program *main_p, nb_program *startup, const char *loss, const char *acc)
{
    char dir[4096];
    die_on(nb_data_find(a->data, "mnist", dir, sizeof dir), "data");
    nb_reader *train, *test;
    die_on(nb_mnist_reader(&train, dir, true, a->batch, true, a->seed, 2), "training data");
    die_on(nb_mnist_reader(&test, dir, false, 1000, false, 0, 2), "test data");
    nb_scope *scope;
    die_on(nb_scope_new(&scope, NULL), "scope");
    const char *feeds[] = {"images", "label"};
    nb_train_config cfg = {.epochs = a->epochs, .n_feeds = 2, .feeds = feeds, .loss = loss, .metric = acc,
                           .csv_path = a->csv, .plot_path = a->plot, .checkpoint_path = a->checkpoint,
                           .resume = a->resume, .progress = a->quiet ? NB_PROGRESS_QUIET : NB_PROGRESS_AUTO};
    nb_train_result r;
    die_on(nb_train(&cfg, main_p, startup, scope, train, test, &r), "training");
    printf("test accuracy: %.4f\n", r.last.test_metric);
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
    nb_optimizer opt = nb_adam(a->lr);
    opt.schedule = (nb_lr_schedule){.kind = "cosine", .total_steps = a->epochs * mnist_steps_per_epoch(a->batch)};
    nb_backward_result grads;
    die_on(nb_minimize(&opt, m->main, m->startup, nb_value_name(cost), 0, NULL, 0, NULL, &grads), "minimize");
    int rc = mnist_train(a, m->main, m->startup, nb_value_name(cost), nb_value_name(acc));
    nb_backward_result_free(&grads);
    nb_builder_free(m->b);
    nb_program_free(m->startup);
    nb_program_free(m->main);
    return rc;
}

#endif
