/* The training loop: epochs over a reader, evaluation with the inference
 * copy of the program, metrics, checkpoints and exact resumption.
 *
 * Resuming is exact because everything a run depends on is restored: the
 * persistable vars (parameters and optimiser state) from the checkpoint, the
 * reader's order (epoch e is shuffled from the seed and e), and the random
 * ops' streams (they depend on the run index, set to the step count). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nabla/checkpoint.h"
#include "nabla/comm.h"
#include "nabla/train.h"
#include "metrics_log.h"
#include "progress.h"

#define MAX_FIELDS 16

static int64_t batch_size_of(nb_tensor *const *record) { return record[0]->ndim > 0 ? record[0]->shape[0] : 1; }

static void release_record(nb_tensor **record, int n)
{
    for (int i = 0; i < n; i++) {
        nb_tensor_release(record[i]);
        record[i] = NULL;
    }
}

/* An epoch's fetched scalars, summed weighted by batch size, and its samples. */
typedef struct epoch_sums {
    double loss, metric;
    int64_t samples;
} epoch_sums;

/* Runs `pp` over one epoch of `reader` (already reset) into *sums. */
static nb_status run_epoch(nb_prepared *pp, nb_scope *scope, nb_reader *reader, int n_feeds, bool has_metric,
                           progress *prog, int64_t *steps, epoch_sums *sums)
{
    nb_tensor *record[MAX_FIELDS] = {0};
    nb_tensor *out[2] = {0};
    *sums = (epoch_sums){0};
    for (;;) {
        bool end = false;
        nb_status st = nb_reader_next(reader, record, &end);
        if (st || end) return st;
        if ((st = nb_prepared_run(pp, scope, record, out))) {
            release_record(record, n_feeds);
            return st;
        }
        int64_t bs = batch_size_of(record);
        double loss = nb_tensor_get(out[0], 0), metric = has_metric ? nb_tensor_get(out[1], 0) : 0;
        release_record(record, n_feeds);
        release_record(out, has_metric ? 2 : 1);
        sums->loss += loss * (double)bs;
        sums->metric += metric * (double)bs;
        sums->samples += bs;
        if (steps) ++*steps;
        if (prog) progress_step(prog, bs, loss, metric);
    }
}

/* Sums the epoch's figures over the ranks, so that every rank reports the
 * whole batch's. */
static nb_status sum_over_ranks(nb_comm *comm, epoch_sums *sums)
{
    if (!comm || nb_comm_size(comm) == 1) return NB_OK;
    double v[3] = {sums->loss, sums->metric, (double)sums->samples};
    nb_tensor *t;
    nb_status st = nb_tensor_wrap(&t, NB_F64, 1, (const int64_t[]){3}, v);
    if (st) return st;
    st = nb_comm_allreduce_sum(comm, t);
    nb_tensor_release(t);
    if (st) return nb_error_context(st, "train: summing the epoch's loss over the ranks");
    *sums = (epoch_sums){v[0], v[1], (int64_t)v[2]};
    return NB_OK;
}

static nb_status prepare_for(nb_prepared **pp, nb_program *p, int n_feeds, const char *const *feeds, const char *loss,
                             const char *metric)
{
    const char *fetch[2] = {loss, metric};
    return nb_prepare(pp, p, 0, NB_NAMES_N(n_feeds, feeds), NB_NAMES_N(metric ? 2 : 1, fetch));
}

nb_status nb_evaluate(const nb_train_config *cfg, nb_program *main, nb_scope *scope, nb_reader *reader,
                      double *mean_loss, double *mean_metric)
{
    if (!cfg || cfg->n_feeds < 1 || cfg->n_feeds > MAX_FIELDS || !cfg->feeds || !cfg->loss || !reader || !mean_loss)
        return nb_error(NB_ERR_ARG, "evaluate: need 1..%d feeds, a loss, a reader and room for the mean loss",
                        MAX_FIELDS);
    int n_feeds = cfg->n_feeds;
    const char *const *feeds = cfg->feeds;
    const char *loss = cfg->loss, *metric = cfg->metric;
    nb_program *test;
    nb_prepared *pp = NULL;
    nb_status st = nb_program_clone_for_test(&test, main);
    if (st) return st;
    epoch_sums e = {0};
    if (!(st = prepare_for(&pp, test, n_feeds, feeds, loss, metric)) && !(st = nb_reader_reset(reader, 0)))
        st = run_epoch(pp, scope, reader, n_feeds, metric != NULL, NULL, NULL, &e);
    if (!st) {
        *mean_loss = e.samples ? e.loss / (double)e.samples : 0;
        if (mean_metric) *mean_metric = e.samples ? e.metric / (double)e.samples : 0;
    }
    nb_prepared_free(pp);
    nb_program_free(test);
    return st;
}

static nb_status check_config(const nb_train_config *cfg, nb_reader *train, nb_reader *test)
{
    if (!cfg || cfg->epochs < 1 || cfg->n_feeds < 1 || cfg->n_feeds > MAX_FIELDS || !cfg->feeds || !cfg->loss)
        return nb_error(NB_ERR_ARG, "train: need epochs >= 1, 1..%d feeds and a loss", MAX_FIELDS);
    if (nb_reader_fields(train) != cfg->n_feeds)
        return nb_error(NB_ERR_ARG, "train: the training reader yields %d fields but %d feeds are named",
                        nb_reader_fields(train), cfg->n_feeds);
    if (test && nb_reader_fields(test) != cfg->n_feeds)
        return nb_error(NB_ERR_ARG, "train: the test reader yields %d fields but %d feeds are named",
                        nb_reader_fields(test), cfg->n_feeds);
    if (cfg->resume && !cfg->checkpoint_path) return nb_error(NB_ERR_ARG, "train: resume needs a checkpoint path");
    return NB_OK;
}

/* Restores parameters and optimiser state; *epochs_done and *steps say where
 * the checkpointed run was. */
static nb_status restore(const char *path, nb_program *main, nb_scope *scope, int *epochs_done, int64_t *steps)
{
    nb_safetensors *meta = NULL;
    nb_status st = nb_checkpoint_load(path, main, scope, &meta);
    if (st) return nb_error_context(st, "train: resuming from %s", path);
    const char *e = nb_safetensors_meta(meta, "epoch"), *s = nb_safetensors_meta(meta, "step");
    if (!e || !s) st = nb_error(NB_ERR_FORMAT, "train: checkpoint %s has no epoch/step metadata", path);
    else {
        *epochs_done = atoi(e);
        *steps = strtoll(s, NULL, 10);
    }
    nb_safetensors_free(meta);
    return st;
}

/* With ranks, rank 0 alone reads the checkpoint and sends the others
 * where it was and every persistable var, so that the file need only be on
 * rank 0's file system and every rank resumes from the very same state
 * (whatever the number of ranks that wrote it: the state is replicated). */
static nb_status restore_over_ranks(const char *path, nb_comm *comm, nb_program *main, nb_scope *scope, bool *resuming,
                                    int *epochs_done, int64_t *steps)
{
    bool root = nb_comm_rank(comm) == 0;
    nb_status mine = NB_OK;
    double v[3] = {0, 0, 0}; /* 1 resumed, -1 failed, 0 no checkpoint; the epoch; the step */
    if (root && access(path, F_OK) == 0) {
        mine = restore(path, main, scope, epochs_done, steps);
        v[0] = mine ? -1 : 1;
        v[1] = *epochs_done;
        v[2] = (double)*steps;
    }
    nb_tensor *t;
    nb_status st = nb_tensor_wrap(&t, NB_F64, 1, (const int64_t[]){3}, v);
    if (st) return st;
    st = nb_comm_broadcast(comm, t, 0);
    nb_tensor_release(t);
    if (st) return nb_error_context(st, "train: resuming from rank 0's checkpoint %s", path);
    if (v[0] < 0)
        return root ? mine : nb_error(NB_ERR_STATE, "train: rank 0 could not resume from %s (it says why)", path);
    *resuming = v[0] > 0;
    *epochs_done = (int)v[1];
    *steps = (int64_t)v[2];
    const nb_block *b = *resuming ? nb_program_global_block(main) : NULL;
    for (int i = 0; b && i < b->n_vars && !st; i++) {
        if (!b->vars[i]->persistable) continue;
        nb_tensor *var = nb_scope_find(scope, b->vars[i]->name);
        st = var ? nb_comm_broadcast(comm, var, 0)
                 : nb_error(NB_ERR_NOT_FOUND, "train: resuming: persistable var '%s' has no value on rank %d",
                            b->vars[i]->name, nb_comm_rank(comm));
    }
    return st ? nb_error_context(st, "train: sending rank 0's checkpoint %s to the ranks", path) : NB_OK;
}

static nb_status save(const char *path, nb_program *main, nb_scope *scope, int epochs_done, int64_t steps)
{
    char e[32], s[32];
    snprintf(e, sizeof e, "%d", epochs_done);
    snprintf(s, sizeof s, "%" PRId64, steps);
    const char *keys[] = {"epoch", "step", "format"}, *values[] = {e, s, "nabla checkpoint 1"};
    return nb_checkpoint_save(path, main, scope, &(nb_meta){3, keys, values});
}

nb_status nb_train(const nb_train_config *cfg, nb_program *main, nb_program *startup, nb_scope *scope, nb_reader *train,
                   nb_train_result *result)
{
    nb_reader *test = cfg ? cfg->test : NULL;
    nb_status st = check_config(cfg, train, test);
    if (st) return st;
    memset(result, 0, sizeof *result);
    nb_executor *ex = NULL;
    nb_prepared *pp = NULL, *tp = NULL;
    nb_program *test_prog = NULL;
    int epochs_done = 0;
    int64_t steps = 0;
    bool resuming = cfg->resume && access(cfg->checkpoint_path, F_OK) == 0;
    int rank = cfg->comm ? nb_comm_rank(cfg->comm) : 0;
    bool root = rank == 0;

    /* The startup program creates every persistable var; a checkpoint then
     * overwrites them. */
    if ((st = nb_executor_new(&ex)) ||
        (startup && (st = nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL))))
        goto done;
    if (cfg->resume && cfg->comm && nb_comm_size(cfg->comm) > 1)
        st = restore_over_ranks(cfg->checkpoint_path, cfg->comm, main, scope, &resuming, &epochs_done, &steps);
    else if (resuming) st = restore(cfg->checkpoint_path, main, scope, &epochs_done, &steps);
    if (st) goto done;
    if ((st = prepare_for(&pp, main, cfg->n_feeds, cfg->feeds, cfg->loss, cfg->metric))) goto done;
    nb_prepared_set_run_index(pp, (uint64_t)steps);
    nb_prepared_set_stream(pp, (uint64_t)rank);
    if (test) {
        if ((st = nb_program_clone_for_test(&test_prog, main)) ||
            (st = prepare_for(&tp, test_prog, cfg->n_feeds, cfg->feeds, cfg->loss, cfg->metric)))
            goto done;
    }
    progress prog;
    progress_init(&prog, cfg, cfg->epochs);
    if (!root) prog.mode = NB_PROGRESS_QUIET;
    int ran = 0;
    for (int e = epochs_done; e < cfg->epochs; e++) {
        if (cfg->stop_after_epochs && ran == cfg->stop_after_epochs) break;
        progress_epoch_start(&prog, e + 1);
        double t0 = nb_now_seconds();
        epoch_sums tr;
        if ((st = nb_reader_reset(train, (uint64_t)e)) ||
            (st = run_epoch(pp, scope, train, cfg->n_feeds, cfg->metric != NULL, &prog, &steps, &tr)) ||
            (st = sum_over_ranks(cfg->comm, &tr)))
            goto done;
        double secs = nb_now_seconds() - t0, n = (double)tr.samples;
        nb_epoch_stats s = {.epoch = e + 1,
                            .train_loss = n ? tr.loss / n : 0,
                            .train_metric = n ? tr.metric / n : 0,
                            .seconds = secs,
                            .samples_per_second = n / (secs > 0 ? secs : 1e-9)};
        if (tp) {
            epoch_sums te;
            if ((st = nb_reader_reset(test, 0)) ||
                (st = run_epoch(tp, scope, test, cfg->n_feeds, cfg->metric != NULL, NULL, NULL, &te)))
                goto done;
            s.test_loss = te.samples ? te.loss / (double)te.samples : 0;
            s.test_metric = te.samples ? te.metric / (double)te.samples : 0;
        }
        progress_epoch_end(&prog, &s, tp != NULL);
        result->last = s;
        result->epochs_done = e + 1;
        result->steps = steps;
        ran++;
        if (!root) continue;
        if (cfg->checkpoint_path && (st = save(cfg->checkpoint_path, main, scope, e + 1, steps))) goto done;
        if (cfg->csv_path && (st = metrics_csv_append(cfg->csv_path, &s, e == 0))) goto done;
        if (cfg->csv_path && cfg->plot_path) {
            bool drawn;
            if ((st = metrics_plot(cfg->csv_path, cfg->plot_path, prog.metric_name, &drawn))) goto done;
        }
    }
    if (result->epochs_done == 0) {
        result->epochs_done = epochs_done;
        result->steps = steps;
    }
done:
    nb_prepared_free(tp);
    nb_prepared_free(pp);
    nb_program_free(test_prog);
    nb_executor_free(ex);
    return st;
}
