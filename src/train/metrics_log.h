/* Per-epoch metrics on disk: a CSV file, and a PNG plot of it drawn by
 * gnuplot when gnuplot is installed. */
#ifndef NABLA_METRICS_LOG_H
#define NABLA_METRICS_LOG_H

#include "nabla/train.h"

/* Appends one epoch's row, writing the header first when the file is new or
 * `fresh` (a run that does not resume starts the file over). */
nb_status metrics_csv_append(const char *path, const nb_epoch_stats *s, bool fresh);
/* Draws loss and accuracy curves from the CSV into a PNG. Returns NB_OK
 * without drawing when gnuplot is not installed (*drawn tells). */
nb_status metrics_plot(const char *csv_path, const char *png_path, const char *metric_name, bool *drawn);

#endif
