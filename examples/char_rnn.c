/* char_rnn: a character-level language model on tiny shakespeare, as
 * Karpathy's char-rnn: embedding, LSTM, linear to the vocabulary, softmax
 * cross-entropy, trained by Adam with gradients clipped by their global
 * norm, on sequences cut from B contiguous streams of the text (truncated
 * backpropagation through time, the state carried from one batch to the
 * next). It reports the validation loss in nats per character and then
 * writes text sampled from the model.
 *
 *     build/examples/char_rnn                      # the defaults below
 *     build/examples/char_rnn --temperature 0.5 --sample 1000 --prime "ROMEO:"
 *
 * The model is written once (char_model) and trains as a static program,
 * whose LSTM is one `recurrent` op (the default: a fifth faster), or on the
 * eager tape (--eager). With the defaults it reaches a validation loss of
 * about 1.63 nats/char in about 100 seconds on two cores. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nabla/nabla.h"
#define EXAMPLE_NAME "char_rnn"
#include "example_cli.h"
#include "example_data.h"

typedef struct args {
    const char *data;   /* --data DIR or FILE */
    int hidden, embed;  /* --hidden, --embed */
    int seq, batch;     /* --seq, --batch */
    double lr, clip;    /* --lr, --clip (global norm) */
    int64_t steps;      /* --steps */
    double minutes;     /* --minutes: training stops when this budget is spent */
    int eval_every;     /* --eval-every */
    uint64_t seed;      /* --seed */
    double temperature; /* --temperature */
    int sample;         /* --sample: characters to write */
    const char *prime;  /* --prime: text the sample starts from */
    int threads;        /* --threads */
    bool no_carry;      /* --no-carry: zeros as every batch's initial state */
    bool eager;         /* --eager */
    bool quiet;         /* --quiet */
} args;

static void usage(const char *prog, const args *d)
{
    printf("usage: %s [--data DIR|FILE] [--steps N] [--minutes M] [--hidden H] [--embed E] [--seq T]\n"
           "       [--batch B] [--lr X] [--clip C] [--eval-every N] [--seed S] [--threads N] [--no-carry]\n"
           "       [--temperature X] [--sample N] [--prime TEXT] [--eager] [--quiet]\n\n"
           "Trains a character-level LSTM on tiny shakespeare (the last 10%% held out), prints\n"
           "'validation loss: X nats/char', then N characters sampled at the temperature.\n"
           "Training stops after --steps or when --minutes are spent, whichever comes first.\n"
           "--eager trains on the eager tape instead of a static program. --threads 0 leaves\n"
           "the thread count to OpenMP.\n"
           "Defaults: --steps %lld --minutes %g --hidden %d --embed %d --seq %d --batch %d --lr %g\n"
           "--clip %g --eval-every %d --seed %llu --threads %d --temperature %g --sample %d --prime '%s'.\n"
           "The text is looked up in --data, then $NABLA_DATA, then data/ and ../data/ (here and\n"
           "beside the program), then the build's data folder (%s), as tinyshakespeare/input.txt.\n",
           prog, (long long)d->steps, d->minutes, d->hidden, d->embed, d->seq, d->batch, d->lr, d->clip, d->eval_every,
           (unsigned long long)d->seed, d->threads, d->temperature, d->sample, d->prime, EXAMPLE_DATA_DIR_TEXT);
}

static void parse_args(int argc, char **argv, args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        double v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(argv[0], a);
            exit(0);
        } else if (!strcmp(f, "--eager")) a->eager = true;
        else if (!strcmp(f, "--no-carry")) a->no_carry = true;
        else if (!strcmp(f, "--quiet")) a->quiet = true;
        else if (i + 1 >= argc) {
            fprintf(stderr, "%s: unknown flag or missing value (try --help)\n", f);
            exit(2);
        } else if (!strcmp(f, "--data")) a->data = argv[++i];
        else if (!strcmp(f, "--prime")) a->prime = argv[++i];
        else if (!strcmp(f, "--steps") && parse_number(f, argv[++i], 1, 1e9, &v)) a->steps = (int64_t)v;
        else if (!strcmp(f, "--minutes") && parse_number(f, argv[++i], 0.01, 1e6, &v)) a->minutes = v;
        else if (!strcmp(f, "--hidden") && parse_number(f, argv[++i], 1, 65536, &v)) a->hidden = (int)v;
        else if (!strcmp(f, "--embed") && parse_number(f, argv[++i], 1, 65536, &v)) a->embed = (int)v;
        else if (!strcmp(f, "--seq") && parse_number(f, argv[++i], 1, 65536, &v)) a->seq = (int)v;
        else if (!strcmp(f, "--batch") && parse_number(f, argv[++i], 1, 65536, &v)) a->batch = (int)v;
        else if (!strcmp(f, "--lr") && parse_number(f, argv[++i], 1e-9, 100, &v)) a->lr = v;
        else if (!strcmp(f, "--clip") && parse_number(f, argv[++i], 0, 1e9, &v)) a->clip = v;
        else if (!strcmp(f, "--eval-every") && parse_number(f, argv[++i], 1, 1e9, &v)) a->eval_every = (int)v;
        else if (!strcmp(f, "--seed") && parse_number(f, argv[++i], 0, 1e18, &v)) a->seed = (uint64_t)v;
        else if (!strcmp(f, "--threads") && parse_number(f, argv[++i], 0, 1024, &v)) a->threads = (int)v;
        else if (!strcmp(f, "--temperature") && parse_number(f, argv[++i], 1e-3, 100, &v)) a->temperature = v;
        else if (!strcmp(f, "--sample") && parse_number(f, argv[++i], 0, 1e7, &v)) a->sample = (int)v;
        else {
            fprintf(stderr, "%s: unknown flag or bad value (try --help)\n", f);
            exit(2);
        }
    }
}

/* ---- the model, written once ------------------------------------------------------------ */

/* Logits [T, B, V] of the next character after each of ids [T, B], from
 * the LSTM state (h0, c0) (NB_NONE: zeros); the state after the last step
 * goes to *h_n, *c_n. The layers are named, so an eager builder finds their
 * parameters again on every call, whatever the batch size. */
static nb_value char_model(nb_builder *b, const args *a, int vocab, nb_value ids, nb_value h0, nb_value c0,
                           nb_value *h_n, nb_value *c_n)
{
    nb_value x = nb_layer_embedding(b, ids, vocab, a->embed, -1, &(nb_embedding_opts){.name = "embed"});
    nb_value fin[2];
    nb_value ys = nb_layer_lstm(b, x, (nb_value[]){h0, c0}, a->hidden, &(nb_rnn_opts){.name = "lstm"}, fin);
    if (h_n) *h_n = fin[0];
    if (c_n) *c_n = fin[1];
    return nb_layer_fc(b, ys, vocab, NULL, &(nb_fc_opts){.name = "out", .in_num_col_dims = 2});
}

/* The mean cross-entropy, in nats, of logits [T, B, V] against targets [T, B]. */
static nb_value char_loss(nb_builder *b, int vocab, nb_value logits, nb_value targets)
{
    nb_value flat = nb_reshape(b, logits, 2, (int64_t[]){-1, vocab});
    return nb_layer_softmax_cross_entropy(b, flat, nb_reshape(b, targets, 1, (int64_t[]){-1}));
}

/* Adam, clipped by global norm, its rate decayed along a cosine to a tenth. */
static nb_optimizer char_optimizer(const args *a)
{
    nb_optimizer opt = nb_adam(a->lr);
    if (a->clip > 0) {
        opt.clip = NB_CLIP_GLOBAL_NORM;
        opt.clip_value = a->clip;
    }
    opt.schedule = (nb_lr_schedule){.kind = "cosine", .total_steps = a->steps, .min_lr = a->lr / 10};
    return opt;
}

/* ---- what both modes share: data, progress, the time budget ----------------------------- */

typedef struct run {
    const args *a;
    nb_text text;
    nb_reader *train, *val;
    int64_t step;
    uint64_t epoch;
    double t0, loss_sum;
    int64_t loss_count;
} run;

static void run_open(run *r, const args *a)
{
    memset(r, 0, sizeof *r);
    r->a = a;
    char path[4096];
    die_on(example_data_find_file(a->data, "tinyshakespeare", "input.txt", path, sizeof path), "data");
    die_on(nb_text_load(&r->text, path), "data");
    int64_t cut = nb_text_split_point(&r->text, 0.1);
    die_on(nb_text_reader(&r->train, &r->text, 0, cut, a->seq, a->batch), "training data");
    die_on(nb_text_reader(&r->val, &r->text, cut, r->text.length, a->seq, a->batch), "validation data");
    if (!a->quiet)
        printf("%s: %lld characters, %d distinct; %lld for training (%lld batches of %d x %d per epoch), %lld for "
               "validation\n",
               path, (long long)r->text.length, r->text.vocab_size, (long long)cut,
               (long long)nb_text_batches(cut, a->seq, a->batch), a->seq, a->batch, (long long)(r->text.length - cut));
    r->t0 = now();
}

static void run_close(run *r)
{
    nb_reader_free(r->train);
    nb_reader_free(r->val);
    nb_text_free(&r->text);
}

/* The next training batch (inputs, targets); *new_epoch says that the
 * streams start again (so the carried state must be dropped). */
static void next_batch(run *r, nb_tensor **rec, bool *new_epoch)
{
    bool end = false;
    *new_epoch = r->step == 0;
    die_on(nb_reader_next(r->train, rec, &end), "training data");
    if (end) {
        die_on(nb_reader_reset(r->train, ++r->epoch), "training data");
        die_on(nb_reader_next(r->train, rec, &end), "training data");
        *new_epoch = true;
    }
}

/* Whether training goes on: steps left and time left. */
static bool keep_training(const run *r)
{
    if (r->step >= r->a->steps) return false;
    if (now() - r->t0 < r->a->minutes * 60) return true;
    printf("time budget of %g minutes spent after %lld of %lld steps\n", r->a->minutes, (long long)r->step,
           (long long)r->a->steps);
    return false;
}

/* After a step with loss `loss`: a progress line now and then. */
static void after_step(run *r, double loss)
{
    r->step++;
    r->loss_sum += loss;
    r->loss_count++;
    const int every = r->a->eval_every < 50 ? r->a->eval_every : 50;
    if (r->a->quiet || (r->step % every && r->step != r->a->steps)) return;
    double secs = now() - r->t0;
    printf("step %lld/%lld: train loss %.4f | %.0f s, %.2f steps/s\n", (long long)r->step, (long long)r->a->steps,
           r->loss_sum / (double)r->loss_count, secs, (double)r->step / secs);
    fflush(stdout);
    r->loss_sum = 0;
    r->loss_count = 0;
}

/* The mean of batch_loss over the validation batches, in order (so that
 * batch_loss may carry the state from one to the next). */
static double validate(run *r, double (*batch_loss)(void *ctx, nb_tensor **rec), void *ctx)
{
    double sum = 0;
    int64_t n = 0;
    die_on(nb_reader_reset(r->val, 0), "validation data");
    for (;;) {
        nb_tensor *rec[2];
        bool end;
        die_on(nb_reader_next(r->val, rec, &end), "validation data");
        if (end) break;
        sum += batch_loss(ctx, rec);
        n++;
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
    }
    return n ? sum / (double)n : NAN;
}

static bool eval_due(const run *r) { return r->step % r->a->eval_every == 0; }

static void print_validation(const run *r, double val, bool final)
{
    if (final)
        printf("validation loss: %.4f nats/char (%.3f bits/char) after %lld steps, %.0f s\n", val, val / log(2.0),
               (long long)r->step, now() - r->t0);
    else if (!r->a->quiet) printf("step %lld: validation loss %.4f nats/char\n", (long long)r->step, val);
    fflush(stdout);
}

/* ---- eager mode ------------------------------------------------------------------------------- */

/* The model's carried state: tensors of ours, or NULL for zeros. */
typedef struct carried {
    nb_tensor *h, *c;
} carried;

static void carried_drop(carried *s)
{
    nb_tensor_release(s->h);
    nb_tensor_release(s->c);
    s->h = s->c = NULL;
}

/* Keeps h_n and c_n for the next batch, cut from the graph that made them
 * (truncated backpropagation: the next backward stops here). */
static void carried_keep(carried *s, nb_value h_n, nb_value c_n)
{
    nb_tensor *h, *c;
    die_on(nb_tensor_detach(&h, nb_eager_tensor(h_n)), "state");
    die_on(nb_tensor_detach(&c, nb_eager_tensor(c_n)), "state");
    carried_drop(s);
    s->h = h, s->c = c;
}

static nb_value state_value(nb_builder *b, nb_tensor *t) { return t ? nb_eager_value(b, t) : NB_NONE; }

/* One pass of the model over ids [T, B] from the state; returns the loss. */
static nb_value eager_forward(nb_builder *b, const run *r, nb_tensor **rec, carried *s, nb_value *h_n, nb_value *c_n)
{
    const int V = r->text.vocab_size;
    nb_value logits =
        char_model(b, r->a, V, nb_eager_value(b, rec[0]), state_value(b, s->h), state_value(b, s->c), h_n, c_n);
    nb_value loss = char_loss(b, V, logits, nb_eager_value(b, rec[1]));
    if (nb_builder_status(b)) {
        fprintf(stderr, "char_rnn: model: %s\n", nb_builder_error(b));
        exit(1);
    }
    return loss;
}

/* One validation batch: its loss, the state carried to the next batch. */
typedef struct eager_eval {
    nb_builder *b;
    const run *r;
    carried s;
} eager_eval;

static double eager_eval_batch(void *ctx, nb_tensor **rec)
{
    eager_eval *e = ctx;
    nb_value h_n, c_n;
    double loss = nb_tensor_get(nb_eager_tensor(eager_forward(e->b, e->r, rec, &e->s, &h_n, &c_n)), 0);
    carried_keep(&e->s, h_n, c_n);
    nb_eager_release_values(e->b);
    return loss;
}

static double eager_validate(nb_builder *b, run *r)
{
    nb_grad_mode_push(false);
    eager_eval e = {b, r, {0}};
    double loss = validate(r, eager_eval_batch, &e);
    carried_drop(&e.s);
    nb_grad_mode_pop();
    return loss;
}

static double train_eager(run *r, nb_builder *b)
{
    const args *a = r->a;
    nb_optimizer opt = char_optimizer(a);
    nb_eager_optimizer *o;
    die_on(nb_eager_optimizer_new(&o, &opt), "optimizer");
    carried s = {0};
    while (keep_training(r)) {
        nb_tensor *rec[2];
        bool new_epoch;
        next_batch(r, rec, &new_epoch);
        if (new_epoch || a->no_carry) carried_drop(&s);
        nb_value h_n, c_n;
        nb_tensor *loss = nb_eager_tensor(eager_forward(b, r, rec, &s, &h_n, &c_n));
        die_on(nb_backward(NB_TENSORS(loss), NULL, 0), "backward");
        die_on(nb_eager_optimizer_step(o, b), "optimizer step");
        nb_eager_zero_grad(b);
        carried_keep(&s, h_n, c_n);
        after_step(r, nb_tensor_get(loss, 0));
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
        nb_eager_release_values(b);
        if (eval_due(r) && r->step < a->steps) print_validation(r, eager_validate(b, r), false);
    }
    carried_drop(&s);
    nb_eager_optimizer_free(o);
    return eager_validate(b, r);
}

/* ---- static mode -------------------------------------------------------------------------------- */

/* The training program (with its optimiser part) and its evaluation copy,
 * each run with feeds ids, targets, h0, c0 and fetches loss, h_n, c_n. */
typedef struct static_model {
    nb_program *main, *startup, *test;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
    nb_prepared *train_step, *eval_step;
    nb_backward_result grads;
} static_model;

static void static_build(static_model *m, const run *r)
{
    const args *a = r->a;
    const int V = r->text.vocab_size;
    memset(m, 0, sizeof *m);
    die_on(nb_program_new(&m->main), "program");
    die_on(nb_program_new(&m->startup), "program");
    nb_program_set_seed(m->main, a->seed);
    nb_program_set_seed(m->startup, a->seed);
    die_on(nb_builder_new_record(&m->b, m->main, m->startup), "builder");
    nb_builder *b = m->b;
    nb_value ids = nb_layer_data(b, "ids", NB_I64, 2, (int64_t[]){a->seq, a->batch});
    nb_value targets = nb_layer_data(b, "targets", NB_I64, 2, (int64_t[]){a->seq, a->batch});
    nb_value h0 = nb_layer_data(b, "h0", NB_F32, 2, (int64_t[]){a->batch, a->hidden});
    nb_value c0 = nb_layer_data(b, "c0", NB_F32, 2, (int64_t[]){a->batch, a->hidden});
    nb_value h_n = NB_NONE, c_n = NB_NONE;
    nb_value loss = char_loss(b, V, char_model(b, a, V, ids, h0, c0, &h_n, &c_n), targets);
    if (nb_builder_status(b)) {
        fprintf(stderr, "char_rnn: model: %s\n", nb_builder_error(b));
        exit(1);
    }
    die_on(nb_program_clone_for_test(&m->test, m->main), "evaluation program");
    nb_optimizer opt = char_optimizer(a);
    die_on(nb_minimize(&opt, m->main, m->startup, nb_value_name(loss), NULL, &m->grads), "minimize");
    die_on(nb_scope_new(&m->scope, NULL), "scope");
    die_on(nb_executor_new(&m->ex), "executor");
    die_on(nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL), "startup");
    const char *feeds[] = {"ids", "targets", "h0", "c0"};
    const char *fetch[] = {nb_value_name(loss), nb_value_name(h_n), nb_value_name(c_n)};
    die_on(nb_prepare(&m->train_step, m->main, 0, NB_NAMES_N(4, feeds), NB_NAMES_N(3, fetch)), "prepare");
    die_on(nb_prepare(&m->eval_step, m->test, 0, NB_NAMES_N(4, feeds), NB_NAMES_N(3, fetch)), "prepare");
}

static void static_free(static_model *m)
{
    nb_prepared_free(m->train_step);
    nb_prepared_free(m->eval_step);
    nb_executor_free(m->ex);
    nb_scope_free(m->scope);
    nb_backward_result_free(&m->grads);
    nb_builder_free(m->b);
    nb_program_free(m->test);
    nb_program_free(m->startup);
    nb_program_free(m->main);
}

/* A state of zeros [batch, hidden]. */
static nb_tensor *zeros_state(const args *a)
{
    nb_tensor *t;
    die_on(nb_tensor_new(&t, NB_F32, 2, (int64_t[]){a->batch, a->hidden}), "state");
    memset(nb_tensor_data(t), 0, (size_t)a->batch * (size_t)a->hidden * sizeof(float));
    return t;
}

/* Runs one step of pp on the batch from state (h, c): returns the loss;
 * the state becomes the step's final one (or zeros again with no_carry). */
static double static_step(nb_prepared *pp, nb_scope *scope, nb_tensor **rec, nb_tensor **h, nb_tensor **c, bool carry)
{
    nb_tensor *in[4] = {rec[0], rec[1], *h, *c}, *out[3] = {NULL, NULL, NULL};
    die_on(nb_prepared_run(pp, scope, in, out), "run");
    double loss = nb_tensor_get(out[0], 0);
    nb_tensor_release(out[0]);
    if (carry) {
        nb_tensor_release(*h);
        nb_tensor_release(*c);
        *h = out[1], *c = out[2];
    } else {
        nb_tensor_release(out[1]);
        nb_tensor_release(out[2]);
    }
    return loss;
}

typedef struct static_eval {
    static_model *m;
    nb_tensor *h, *c;
} static_eval;

static double static_eval_batch(void *ctx, nb_tensor **rec)
{
    static_eval *e = ctx;
    return static_step(e->m->eval_step, e->m->scope, rec, &e->h, &e->c, true);
}

static double static_validate(static_model *m, run *r)
{
    static_eval e = {m, zeros_state(r->a), zeros_state(r->a)};
    double loss = validate(r, static_eval_batch, &e);
    nb_tensor_release(e.h);
    nb_tensor_release(e.c);
    return loss;
}

/* Trains the program; afterwards the eager builder `b` holds its
 * parameters (the same tensors), for sampling. */
static double train_static(run *r, nb_builder *b)
{
    static_model m;
    static_build(&m, r);
    nb_tensor *h = zeros_state(r->a), *c = zeros_state(r->a);
    while (keep_training(r)) {
        nb_tensor *rec[2];
        bool new_epoch;
        next_batch(r, rec, &new_epoch);
        if (new_epoch && r->step > 0) {
            nb_tensor_release(h);
            nb_tensor_release(c);
            h = zeros_state(r->a), c = zeros_state(r->a);
        }
        after_step(r, static_step(m.train_step, m.scope, rec, &h, &c, !r->a->no_carry));
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
        if (eval_due(r) && r->step < r->a->steps) print_validation(r, static_validate(&m, r), false);
    }
    double val = static_validate(&m, r);
    nb_tensor_release(h);
    nb_tensor_release(c);
    nb_block *g = nb_program_global_block(m.main);
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->is_parameter)
            die_on(nb_eager_add_param(b, g->vars[i]->name, nb_scope_find(m.scope, g->vars[i]->name)), "parameters");
    static_free(&m);
    return val;
}

/* ---- sampling ------------------------------------------------------------------------------------ */

/* Draws an id from softmax(logits / temperature). */
static int64_t draw(const nb_tensor *logits, int64_t row, int vocab, double temperature, nb_rng *rng)
{
    double p[256], top = -INFINITY, sum = 0;
    for (int k = 0; k < vocab; k++) {
        p[k] = nb_tensor_get(logits, row * vocab + k) / temperature;
        top = p[k] > top ? p[k] : top;
    }
    for (int k = 0; k < vocab; k++) sum += p[k] = exp(p[k] - top);
    double u = nb_rng_uniform(rng) * sum;
    for (int k = 0; k < vocab; k++)
        if ((u -= p[k]) < 0) return k;
    return vocab - 1;
}

/* Refuses a prime with characters the corpus lacks before training, not
 * after. */
static void check_prime(const run *r)
{
    int64_t n = (int64_t)strlen(r->a->prime);
    int64_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids) die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "--prime");
    nb_status st = nb_text_encode(&r->text, r->a->prime, n, ids);
    free(ids);
    die_on(st, "--prime");
}

/* Writes a->sample characters: the model reads the prime, then each
 * character it draws. */
static void sample_text(nb_builder *b, const run *r)
{
    const args *a = r->a;
    const int V = r->text.vocab_size;
    int64_t n_prime = (int64_t)strlen(a->prime);
    nb_tensor *ids;
    die_on(nb_tensor_new(&ids, NB_I64, 2, (int64_t[]){n_prime > 0 ? n_prime : 1, 1}), "sample");
    if (n_prime > 0) die_on(nb_text_encode(&r->text, a->prime, n_prime, nb_tensor_data(ids)), "--prime");
    else nb_tensor_set(ids, 0, r->text.id_of['\n'] >= 0 ? r->text.id_of['\n'] : 0);
    nb_rng rng;
    nb_rng_seed(&rng, a->seed);
    nb_grad_mode_push(false);
    carried s = {0};
    printf("sample (temperature %g):\n%s", a->temperature, a->prime);
    for (int i = 0; i < a->sample; i++) {
        nb_value h_n, c_n;
        nb_value logits =
            char_model(b, a, V, nb_eager_value(b, ids), state_value(b, s.h), state_value(b, s.c), &h_n, &c_n);
        die_on(nb_builder_status(b), "sample");
        nb_tensor *lt = nb_eager_tensor(logits);
        int64_t next = draw(lt, lt->shape[0] - 1, V, a->temperature, &rng);
        putchar(r->text.vocab[next]);
        carried_keep(&s, h_n, c_n);
        nb_eager_release_values(b);
        nb_tensor_release(ids);
        die_on(nb_tensor_new(&ids, NB_I64, 2, (int64_t[]){1, 1}), "sample");
        nb_tensor_set(ids, 0, (double)next);
    }
    printf("\n");
    carried_drop(&s);
    nb_tensor_release(ids);
    nb_grad_mode_pop();
}

int main(int argc, char **argv)
{
    args a = {.hidden = 128,
              .embed = 64,
              .seq = 64,
              .batch = 32,
              .lr = 5e-3,
              .clip = 5,
              .steps = 2000,
              .minutes = 9,
              .eval_every = 250,
              .seed = 1,
              .temperature = 0.8,
              .sample = 500,
              .prime = "ROMEO:",
              .threads = 1};
    parse_args(argc, argv, &a);
    if (a.threads > 0) nb_set_num_threads(a.threads);
    run r;
    run_open(&r, &a);
    check_prime(&r);
    nb_builder *b;
    die_on(nb_builder_new_eager(&b), "eager builder");
    nb_eager_set_seed(b, a.seed);
    double val = a.eager ? train_eager(&r, b) : train_static(&r, b);
    print_validation(&r, val, true);
    if (a.sample > 0) sample_text(b, &r);
    nb_builder_free(b);
    run_close(&r);
    return 0;
}
