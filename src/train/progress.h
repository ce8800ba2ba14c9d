/* What the training loop shows while it runs: a progress bar on a terminal,
 * plain log lines otherwise. */
#ifndef NABLA_PROGRESS_H
#define NABLA_PROGRESS_H

#include <stdio.h>
#include "nabla/train.h"

typedef struct progress {
    FILE *out;
    nb_progress_mode mode;
    const char *metric_name;
    int epoch, epochs;
    int64_t batches_per_epoch; /* -1 until the first epoch has been counted */
    int64_t batch, samples;
    double loss_sum, metric_sum;
    double start, last_draw;
    bool has_metric;
} progress;

double nb_now_seconds(void);
void progress_init(progress *p, const nb_train_config *cfg, int epochs);
void progress_epoch_start(progress *p, int epoch);
void progress_step(progress *p, int64_t batch_size, double loss, double metric);
/* Ends the epoch's bar and prints its summary line. */
void progress_epoch_end(progress *p, const nb_epoch_stats *s, bool has_test);

#endif
