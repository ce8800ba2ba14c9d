/* nabla/train.h: the training loop, the last line of a Fluid-style model,
 *
 *     train(cost, reader=mnist.train())
 *
 * Runs epochs of a program over a reader, evaluates on a test reader with the
 * program's inference copy, shows progress, writes per-epoch metrics (CSV and,
 * where gnuplot is installed, a PNG plot), and saves and resumes checkpoints
 * so that a resumed run continues exactly as an uninterrupted one. */
#ifndef NABLA_TRAIN_H
#define NABLA_TRAIN_H

#include "nabla/export.h"

#include "nabla/data.h"
#include "nabla/executor.h"

NB_BEGIN_DECLS

typedef enum { NB_PROGRESS_AUTO = 0, NB_PROGRESS_BAR, NB_PROGRESS_LOG, NB_PROGRESS_QUIET } nb_progress_mode;

typedef struct nb_train_config {
    int epochs;
    int n_feeds;
    const char *const *feeds;    /* the var fed by each reader field, in field order */
    const char *loss;            /* scalar loss var */
    const char *metric;          /* scalar metric var (e.g. accuracy), or NULL */
    const char *metric_name;     /* how to print it ("acc" when NULL) */
    const char *csv_path;        /* per-epoch metrics, or NULL */
    const char *plot_path;       /* PNG of the curves through gnuplot, or NULL */
    nb_reader *test;             /* evaluated after every epoch, or NULL */
    const char *checkpoint_path; /* saved after every epoch, or NULL */
    bool resume;                 /* continue from checkpoint_path when it exists */
    int stop_after_epochs;       /* stop (as if killed) after this many epochs of this call; 0: never */
    nb_progress_mode progress;
    FILE *log; /* where progress goes (stderr when NULL) */
    /* Data parallelism (nabla/data_parallel.h): NULL for one process. With
     * a communicator, `main` is one made data-parallel and `train` reads
     * this rank's shard. Every rank runs the same epochs and steps and
     * resumes from the checkpoint: rank 0 reads it and sends its state to
     * the others, so it need only be on rank 0's file system, and it may
     * have been written by another number of ranks. With the same global
     * batch (the per-rank batch times the ranks) the resumed run is the
     * uninterrupted one: exactly on the same number of ranks, to rounding
     * on another (the gradients are summed in another order), since the
     * shards of batch k together are batch k of one process. The
     * checkpoint is written after each epoch, so a run killed in the
     * middle of one resumes at its start. The epoch's training loss, metric and
     * sample count are summed over the ranks (so the figures are the whole
     * batch's); only rank 0 shows progress and writes the CSV, the plot and
     * the checkpoint; each rank's random ops draw from stream `rank`
     * (nb_prepared_set_stream). */
    struct nb_comm *comm;
} nb_train_config;

typedef struct nb_epoch_stats {
    int epoch; /* 1-based */
    double train_loss, train_metric;
    double test_loss, test_metric;
    double seconds;
    double samples_per_second;
} nb_epoch_stats;

typedef struct nb_train_result {
    int epochs_done; /* counting epochs restored from a checkpoint */
    int64_t steps;
    nb_epoch_stats last;
} nb_train_result;

/* Trains `main` (which holds its backward and optimisation parts) with the
 * parameters in `scope` on the batches of `train`, after running `startup`
 * once (unless resuming), evaluating on cfg->test after every epoch. */
NB_API nb_status nb_train(const nb_train_config *cfg, nb_program *main, nb_program *startup, nb_scope *scope,
                          nb_reader *train, nb_train_result *result);

/* Runs the inference copy of `main` over `reader`, feeding cfg->feeds: the
 * batch-size-weighted means of cfg->loss and cfg->metric (if not NULL). */
NB_API nb_status nb_evaluate(const nb_train_config *cfg, nb_program *main, nb_scope *scope, nb_reader *reader,
                             double *mean_loss, double *mean_metric);

NB_END_DECLS

#endif
