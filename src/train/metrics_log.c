#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "metrics_log.h"

#define CSV_HEADER "epoch,train_loss,train_metric,test_loss,test_metric,seconds,samples_per_second\n"

nb_status metrics_csv_append(const char *path, const nb_epoch_stats *s, bool fresh)
{
    bool exists = access(path, F_OK) == 0;
    FILE *f = fopen(path, fresh ? "w" : "a");
    if (!f) return nb_error(NB_ERR_IO, "metrics: cannot write %s", path);
    if (fresh || !exists) fputs(CSV_HEADER, f);
    fprintf(f, "%d,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f\n", s->epoch, s->train_loss, s->train_metric, s->test_loss,
            s->test_metric, s->seconds, s->samples_per_second);
    if (fclose(f)) return nb_error(NB_ERR_IO, "metrics: cannot write %s", path);
    return NB_OK;
}

static bool have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path) return false;
    char *copy = nb_strdup(path), *save = NULL;
    bool found = false;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char full[4096];
        snprintf(full, sizeof full, "%s/gnuplot", dir);
        found = access(full, X_OK) == 0;
    }
    nb_free(copy);
    return found;
}

/* Writes s as a single-quoted gnuplot string (quotes doubled). */
static void gp_string(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

nb_status metrics_plot(const char *csv_path, const char *png_path, const char *metric_name, bool *drawn)
{
    *drawn = false;
    if (!have_gnuplot()) return NB_OK;
    FILE *gp = popen("gnuplot 2>/dev/null", "w");
    if (!gp) return nb_error(NB_ERR_IO, "plot: cannot start gnuplot");
    fputs("set datafile separator ','\nset terminal png size 900,400\nset output ", gp);
    gp_string(gp, png_path);
    fputs("\nset multiplot layout 1,2\nset xlabel 'epoch'\nset key top right\nset title 'loss'\nplot ", gp);
    gp_string(gp, csv_path);
    fputs(" using 1:2 with linespoints title 'train', '' using 1:4 with linespoints title 'test'\n", gp);
    fputs("set key bottom right\nset title ", gp);
    gp_string(gp, metric_name);
    fputs("\nplot ", gp);
    gp_string(gp, csv_path);
    fputs(" using 1:3 with linespoints title 'train', '' using 1:5 with linespoints title 'test'\nunset multiplot\n",
          gp);
    int rc = pclose(gp);
    if (rc != 0) return nb_error(NB_ERR_IO, "plot: gnuplot failed drawing %s", png_path);
    *drawn = true;
    return NB_OK;
}
