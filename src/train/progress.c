/* Progress display: a bar redrawn at most ten times a second on a terminal,
 * a log line every tenth of an epoch elsewhere. */
#include <time.h>
#include <unistd.h>
#include "progress.h"

double nb_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_init(progress *p, const nb_train_config *cfg, int epochs)
{
    *p = (progress){.out = cfg->log ? cfg->log : stderr,
                    .mode = cfg->progress,
                    .epochs = epochs,
                    .metric_name = cfg->metric_name ? cfg->metric_name : "acc",
                    .batches_per_epoch = -1,
                    .has_metric = cfg->metric != NULL};
    if (p->mode == NB_PROGRESS_AUTO) p->mode = isatty(fileno(p->out)) ? NB_PROGRESS_BAR : NB_PROGRESS_LOG;
}

void progress_epoch_start(progress *p, int epoch)
{
    p->epoch = epoch;
    p->batch = p->samples = 0;
    p->loss_sum = p->metric_sum = 0;
    p->start = p->last_draw = nb_now_seconds();
}

static void format_time(char *buf, size_t size, double s)
{
    long t = (long)(s + 0.5);
    snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

static void draw_bar(progress *p, double now)
{
    double rate = p->samples / (now - p->start + 1e-9);
    fprintf(p->out, "\repoch %d/%d ", p->epoch, p->epochs);
    if (p->batches_per_epoch > 0) {
        int width = 24, filled = (int)(width * p->batch / p->batches_per_epoch);
        if (filled > width) filled = width;
        fputc('[', p->out);
        for (int i = 0; i < width; i++) fputc(i < filled ? '#' : ' ', p->out);
        fprintf(p->out, "] %lld/%lld", (long long)p->batch, (long long)p->batches_per_epoch);
    } else {
        fprintf(p->out, "step %lld", (long long)p->batch);
    }
    fprintf(p->out, "  loss %.4f", p->loss_sum / (double)(p->samples ? p->samples : 1));
    if (p->has_metric)
        fprintf(p->out, "  %s %.4f", p->metric_name, p->metric_sum / (double)(p->samples ? p->samples : 1));
    fprintf(p->out, "  %.0f samples/s", rate);
    if (p->batches_per_epoch > 0 && p->batch > 0) {
        char eta[32];
        double per_batch = (now - p->start) / (double)p->batch;
        format_time(eta, sizeof eta, per_batch * (double)(p->batches_per_epoch - p->batch));
        fprintf(p->out, "  ETA %s", eta);
    }
    fputs("   ", p->out);
    fflush(p->out);
}

void progress_step(progress *p, int64_t batch_size, double loss, double metric)
{
    p->batch++;
    p->samples += batch_size;
    p->loss_sum += loss * (double)batch_size;
    p->metric_sum += metric * (double)batch_size;
    if (p->mode == NB_PROGRESS_QUIET) return;
    double now = nb_now_seconds();
    if (p->mode == NB_PROGRESS_BAR) {
        if (now - p->last_draw >= 0.1) {
            draw_bar(p, now);
            p->last_draw = now;
        }
        return;
    }
    int64_t every = p->batches_per_epoch > 0 ? (p->batches_per_epoch + 9) / 10 : 100;
    if (p->batch % every == 0) {
        fprintf(p->out, "epoch %d/%d step %lld", p->epoch, p->epochs, (long long)p->batch);
        if (p->batches_per_epoch > 0) fprintf(p->out, "/%lld", (long long)p->batches_per_epoch);
        fprintf(p->out, ": loss %.4f", p->loss_sum / (double)p->samples);
        if (p->has_metric) fprintf(p->out, " %s %.4f", p->metric_name, p->metric_sum / (double)p->samples);
        fprintf(p->out, ", %.0f samples/s\n", p->samples / (now - p->start + 1e-9));
        fflush(p->out);
    }
}

void progress_epoch_end(progress *p, const nb_epoch_stats *s, bool has_test)
{
    if (p->batches_per_epoch < 0) p->batches_per_epoch = p->batch;
    if (p->mode == NB_PROGRESS_QUIET) return;
    if (p->mode == NB_PROGRESS_BAR) fputs("\r\033[K", p->out);
    fprintf(p->out, "epoch %d/%d: train loss %.4f", s->epoch, p->epochs, s->train_loss);
    if (p->has_metric) fprintf(p->out, " %s %.4f", p->metric_name, s->train_metric);
    if (has_test) {
        fprintf(p->out, " | test loss %.4f", s->test_loss);
        if (p->has_metric) fprintf(p->out, " %s %.4f", p->metric_name, s->test_metric);
    }
    fprintf(p->out, " | %.1f s, %.0f samples/s\n", s->seconds, s->samples_per_second);
    fflush(p->out);
}
