/* char_gpt: a character-level GPT on tiny shakespeare, as Karpathy's
 * nanoGPT "shakespeare_char": token and learned position embeddings, N
 * pre-norm transformer blocks with causal self-attention, a final layer norm
 * and a linear map to the vocabulary (or the token embedding itself, tied),
 * softmax cross-entropy at every position. It trains by AdamW with global
 * norm clipping, a linear warm-up and a cosine decay, on random windows of
 * block + 1 characters from the first 90% of the text, reports the
 * validation loss in nats per character over fixed windows of the last 10%,
 * and then writes text sampled from the model.
 *
 *     build/examples/char_gpt                                  # the defaults below
 *     build/examples/char_gpt --checkpoint gpt.safetensors     # ... and keep the model
 *     build/examples/char_gpt --checkpoint gpt.safetensors --sample-only --sample 2000 --top-k 10
 *
 * The model is written once (gpt_logits in char_gpt_model.h, which
 * bench/bench_transformer.c times too) and trains as a static program (the
 * default) or on the eager tape (--eager). Sampling runs the same model
 * eagerly on the last `block` characters. --checkpoint saves the trained
 * parameters (and the model's shape and vocabulary, as metadata) through
 * nabla's checkpoint API, atomically; --sample-only loads such a file and
 * only samples. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "char_gpt_model.h"
#include "nabla/nabla.h"
#define EXAMPLE_NAME "char_gpt"
#include "example_cli.h"
#include "example_data.h"

typedef struct args {
    const char *data;       /* --data DIR or FILE */
    gpt_config model;       /* --layers, --embed, --heads, --block, --batch, --dropout, --tied */
    double lr, min_lr;      /* --lr, --min-lr: the cosine decays from lr to min_lr */
    int warmup;             /* --warmup: steps of linear warm-up */
    double weight_decay;    /* --weight-decay (AdamW's, on every parameter) */
    double clip;            /* --clip: global gradient norm */
    int64_t steps;          /* --steps */
    double minutes;         /* --minutes: training stops when this budget is spent */
    int eval_every;         /* --eval-every */
    uint64_t seed;          /* --seed */
    double temperature;     /* --temperature */
    int top_k;              /* --top-k: draw among the k likeliest (0: all) */
    int sample;             /* --sample: characters to write */
    const char *prime;      /* --prime: text the sample starts from */
    int threads;            /* --threads */
    const char *checkpoint; /* --checkpoint FILE */
    bool sample_only;       /* --sample-only */
    bool eager;             /* --eager */
    bool quiet;             /* --quiet */
} args;

static void usage(const char *prog, const args *d)
{
    printf("usage: %s [--data DIR|FILE] [--steps N] [--minutes M] [--layers L] [--embed E] [--heads H]\n"
           "       [--block T] [--batch B] [--lr X] [--min-lr X] [--warmup N] [--weight-decay X] [--clip C]\n"
           "       [--dropout P] [--tied] [--eval-every N] [--seed S] [--threads N] [--eager] [--quiet]\n"
           "       [--temperature X] [--top-k K] [--sample N] [--prime TEXT] [--checkpoint FILE [--sample-only]]\n\n"
           "Trains a character-level GPT on tiny shakespeare (the last 10%% held out), prints\n"
           "'validation loss: X nats/char', then N characters sampled at the temperature.\n"
           "Training stops after --steps or when --minutes are spent, whichever comes first; the\n"
           "learning rate warms up for --warmup steps, then decays along a cosine to --min-lr at\n"
           "--steps. --eager trains on the eager tape instead of a static program. --threads 0\n"
           "leaves the thread count to OpenMP. --checkpoint FILE saves the trained parameters to\n"
           "FILE; with --sample-only it loads them from FILE (the model's shape and vocabulary\n"
           "too, so no text is needed) and only samples.\n"
           "Defaults: --steps %lld --minutes %g --layers %d --embed %d --heads %d --block %d --batch %d\n"
           "--lr %g --min-lr %g --warmup %d --weight-decay %g --clip %g --dropout %g --eval-every %d\n"
           "--seed %llu --threads %d --temperature %g --top-k %d --sample %d --prime '%s'.\n"
           "The text is looked up in --data, then $NABLA_DATA, then data/ and ../data/ (here and\n"
           "beside the program), then the build's data folder (%s), as tinyshakespeare/input.txt.\n",
           prog, (long long)d->steps, d->minutes, (int)d->model.layers, (int)d->model.embed, (int)d->model.heads,
           (int)d->model.block, (int)d->model.batch, d->lr, d->min_lr, d->warmup, d->weight_decay, d->clip,
           d->model.dropout, d->eval_every, (unsigned long long)d->seed, d->threads, d->temperature, d->top_k,
           d->sample, d->prime, EXAMPLE_DATA_DIR_TEXT);
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
        else if (!strcmp(f, "--tied")) a->model.tied = true;
        else if (!strcmp(f, "--sample-only")) a->sample_only = true;
        else if (!strcmp(f, "--quiet")) a->quiet = true;
        else if (i + 1 >= argc) {
            fprintf(stderr, "%s: unknown flag or missing value (try --help)\n", f);
            exit(2);
        } else if (!strcmp(f, "--data")) a->data = argv[++i];
        else if (!strcmp(f, "--prime")) a->prime = argv[++i];
        else if (!strcmp(f, "--checkpoint")) a->checkpoint = argv[++i];
        else if (!strcmp(f, "--steps") && parse_number(f, argv[++i], 1, 1e9, &v)) a->steps = (int64_t)v;
        else if (!strcmp(f, "--minutes") && parse_number(f, argv[++i], 0.01, 1e6, &v)) a->minutes = v;
        else if (!strcmp(f, "--layers") && parse_number(f, argv[++i], 1, 1024, &v)) a->model.layers = (int64_t)v;
        else if (!strcmp(f, "--embed") && parse_number(f, argv[++i], 1, 65536, &v)) a->model.embed = (int64_t)v;
        else if (!strcmp(f, "--heads") && parse_number(f, argv[++i], 1, 65536, &v)) a->model.heads = (int64_t)v;
        else if (!strcmp(f, "--block") && parse_number(f, argv[++i], 1, 65536, &v)) a->model.block = (int64_t)v;
        else if (!strcmp(f, "--batch") && parse_number(f, argv[++i], 1, 65536, &v)) a->model.batch = (int64_t)v;
        else if (!strcmp(f, "--lr") && parse_number(f, argv[++i], 1e-9, 100, &v)) a->lr = v;
        else if (!strcmp(f, "--min-lr") && parse_number(f, argv[++i], 0, 100, &v)) a->min_lr = v;
        else if (!strcmp(f, "--warmup") && parse_number(f, argv[++i], 0, 1e9, &v)) a->warmup = (int)v;
        else if (!strcmp(f, "--weight-decay") && parse_number(f, argv[++i], 0, 100, &v)) a->weight_decay = v;
        else if (!strcmp(f, "--clip") && parse_number(f, argv[++i], 0, 1e9, &v)) a->clip = v;
        else if (!strcmp(f, "--dropout") && parse_number(f, argv[++i], 0, 0.99, &v)) a->model.dropout = v;
        else if (!strcmp(f, "--eval-every") && parse_number(f, argv[++i], 1, 1e9, &v)) a->eval_every = (int)v;
        else if (!strcmp(f, "--seed") && parse_number(f, argv[++i], 0, 1e18, &v)) a->seed = (uint64_t)v;
        else if (!strcmp(f, "--threads") && parse_number(f, argv[++i], 0, 1024, &v)) a->threads = (int)v;
        else if (!strcmp(f, "--temperature") && parse_number(f, argv[++i], 1e-3, 100, &v)) a->temperature = v;
        else if (!strcmp(f, "--top-k") && parse_number(f, argv[++i], 0, 256, &v)) a->top_k = (int)v;
        else if (!strcmp(f, "--sample") && parse_number(f, argv[++i], 0, 1e7, &v)) a->sample = (int)v;
        else {
            fprintf(stderr, "%s: unknown flag or bad value (try --help)\n", f);
            exit(2);
        }
    }
    if (a->model.embed % a->model.heads) {
        fprintf(stderr, "--heads %lld must divide --embed %lld\n", (long long)a->model.heads,
                (long long)a->model.embed);
        exit(2);
    }
    if (a->sample_only && !a->checkpoint) {
        fprintf(stderr, "--sample-only needs --checkpoint FILE (a model saved by char_gpt --checkpoint)\n");
        exit(2);
    }
}

static void die_on_builder(nb_builder *b, const char *what)
{
    if (!nb_builder_status(b)) return;
    fprintf(stderr, "char_gpt: %s: %s\n", what, nb_builder_error(b));
    exit(1);
}

/* ---- the optimiser (the model is gpt_logits and gpt_loss of char_gpt_model.h) ------------ */

/* AdamW, clipped by global norm, its rate warmed up linearly and then
 * decayed along a cosine to min_lr at the last step. */
static nb_optimizer gpt_optimizer(const args *a)
{
    nb_optimizer opt = nb_adamw(a->lr, a->weight_decay);
    opt.beta2 = 0.99; /* nanoGPT's for small models */
    if (a->clip > 0) {
        opt.clip = NB_CLIP_GLOBAL_NORM;
        opt.clip_value = a->clip;
    }
    int64_t decay = a->steps > a->warmup ? a->steps - a->warmup : 1;
    opt.schedule = (nb_lr_schedule){.kind = "cosine",
                                    .warmup_steps = a->warmup,
                                    .total_steps = decay,
                                    .min_lr = a->min_lr < a->lr ? a->min_lr : a->lr};
    return opt;
}

/* ---- what both modes share: data, progress, the time budget ----------------------------- */

typedef struct run {
    const args *a;
    nb_text text;
    int64_t cut;   /* ids [0, cut) train, [cut, length) validate */
    int64_t n_val; /* validation windows: at cut + k * block, k < n_val (whole batches) */
    nb_rng rng;    /* the training windows */
    int64_t step;
    double t0, t_last, loss_sum;
    int64_t loss_count;
} run;

static void run_open(run *r, const args *a)
{
    memset(r, 0, sizeof *r);
    r->a = a;
    char path[4096];
    die_on(example_data_find_file(a->data, "tinyshakespeare", "input.txt", path, sizeof path), "data");
    die_on(nb_text_load(&r->text, path), "data");
    r->cut = nb_text_split_point(&r->text, 0.1);
    const int64_t T = a->model.block;
    if (r->cut < T + 2) {
        fprintf(stderr,
                "char_gpt: data: %s: the training part (%lld characters) is shorter than a window of "
                "--block %lld + 1\n",
                path, (long long)r->cut, (long long)T);
        exit(1);
    }
    int64_t windows = (r->text.length - r->cut - 1) / T;
    r->n_val = windows / a->model.batch * a->model.batch;
    if (r->n_val < 1) {
        fprintf(stderr,
                "char_gpt: data: %s: the validation part (%lld characters) holds %lld windows of --block "
                "%lld + 1, fewer than one --batch of %lld\n",
                path, (long long)(r->text.length - r->cut), (long long)windows, (long long)T,
                (long long)a->model.batch);
        exit(1);
    }
    nb_rng_seed(&r->rng, a->seed);
    if (!a->quiet)
        printf("%s: %lld characters, %d distinct; %lld for training (random windows of %lld + 1), %lld for "
               "validation (%lld windows)\n",
               path, (long long)r->text.length, r->text.vocab_size, (long long)r->cut, (long long)T,
               (long long)(r->text.length - r->cut), (long long)r->n_val);
    r->t0 = r->t_last = now();
}

static nb_tensor *new_ids(const args *a, int64_t rows)
{
    nb_tensor *t;
    die_on(nb_tensor_new(&t, NB_I64, 2, (int64_t[]){rows, a->model.block}), "batch");
    return t;
}

/* Windows starting at starts[j]: ids [B, T] and the next characters. */
static void fill_batch(const run *r, const int64_t *starts, nb_tensor **ids, nb_tensor **targets)
{
    const args *a = r->a;
    const int64_t T = a->model.block;
    const uint8_t *text = nb_tensor_data(r->text.ids);
    *ids = new_ids(a, a->model.batch);
    *targets = new_ids(a, a->model.batch);
    int64_t *x = nb_tensor_data(*ids), *y = nb_tensor_data(*targets);
    for (int64_t j = 0; j < a->model.batch; j++)
        for (int64_t t = 0; t < T; t++) {
            x[j * T + t] = text[starts[j] + t];
            y[j * T + t] = text[starts[j] + t + 1];
        }
}

/* The next training batch: windows at random places of the training part. */
static void next_batch(run *r, nb_tensor **ids, nb_tensor **targets)
{
    int64_t *starts = malloc((size_t)r->a->model.batch * sizeof *starts);
    if (!starts) die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "batch");
    const int64_t places = r->cut - r->a->model.block; /* starts 0 .. cut - block - 1 */
    for (int64_t j = 0; j < r->a->model.batch; j++) {
        int64_t s = (int64_t)(nb_rng_uniform(&r->rng) * (double)places);
        starts[j] = s < places ? s : places - 1;
    }
    fill_batch(r, starts, ids, targets);
    free(starts);
}

/* Validation batch k: windows k * B ... (k + 1) * B - 1. */
static void val_batch(const run *r, int64_t k, nb_tensor **ids, nb_tensor **targets)
{
    int64_t *starts = malloc((size_t)r->a->model.batch * sizeof *starts);
    if (!starts) die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "batch");
    for (int64_t j = 0; j < r->a->model.batch; j++)
        starts[j] = r->cut + (k * r->a->model.batch + j) * r->a->model.block;
    fill_batch(r, starts, ids, targets);
    free(starts);
}

/* The mean loss over the validation windows. */
static double validate(const run *r, double (*batch_loss)(void *ctx, nb_tensor *ids, nb_tensor *targets), void *ctx)
{
    double sum = 0;
    const int64_t n = r->n_val / r->a->model.batch;
    for (int64_t k = 0; k < n; k++) {
        nb_tensor *ids, *targets;
        val_batch(r, k, &ids, &targets);
        sum += batch_loss(ctx, ids, targets);
        nb_tensor_release(ids);
        nb_tensor_release(targets);
    }
    return sum / (double)n;
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
    double t = now();
    printf("step %lld/%lld: train loss %.4f | %.0f ms/step, %.0f s\n", (long long)r->step, (long long)r->a->steps,
           r->loss_sum / (double)r->loss_count, 1e3 * (t - r->t_last) / (double)r->loss_count, t - r->t0);
    fflush(stdout);
    r->loss_sum = 0;
    r->loss_count = 0;
    r->t_last = t;
}

static bool eval_due(const run *r) { return r->step % r->a->eval_every == 0 && r->step < r->a->steps; }

static void print_validation(run *r, double val, bool final)
{
    if (final)
        printf("validation loss: %.4f nats/char (%.3f bits/char) after %lld steps, %.0f s\n", val, val / log(2.0),
               (long long)r->step, now() - r->t0);
    else if (!r->a->quiet) printf("step %lld: validation loss %.4f nats/char\n", (long long)r->step, val);
    fflush(stdout);
    r->t_last = now(); /* validation is not a training step */
}

/* ---- eager mode ------------------------------------------------------------------------------- */

static nb_value eager_loss(nb_builder *b, const run *r, nb_tensor *ids, nb_tensor *targets)
{
    nb_value loss = gpt_loss(b, &r->a->model, nb_eager_value(b, ids), nb_eager_value(b, targets));
    die_on_builder(b, "model");
    return loss;
}

typedef struct eager_eval {
    nb_builder *b;
    const run *r;
} eager_eval;

static double eager_eval_batch(void *ctx, nb_tensor *ids, nb_tensor *targets)
{
    eager_eval *e = ctx;
    double loss = nb_tensor_get(nb_eager_tensor(eager_loss(e->b, e->r, ids, targets)), 0);
    nb_eager_release_values(e->b);
    return loss;
}

static double eager_validate(nb_builder *b, const run *r)
{
    nb_grad_mode_push(false);
    nb_eager_set_test_mode(b, true);
    eager_eval e = {b, r};
    double loss = validate(r, eager_eval_batch, &e);
    nb_eager_set_test_mode(b, false);
    nb_grad_mode_pop();
    return loss;
}

static double train_eager(run *r, nb_builder *b)
{
    nb_optimizer opt = gpt_optimizer(r->a);
    nb_eager_optimizer *o;
    die_on(nb_eager_optimizer_new(&o, &opt), "optimizer");
    while (keep_training(r)) {
        nb_tensor *ids, *targets;
        next_batch(r, &ids, &targets);
        nb_tensor *loss = nb_eager_tensor(eager_loss(b, r, ids, targets));
        die_on(nb_backward(NB_TENSORS(loss), NULL, 0), "backward");
        die_on(nb_eager_optimizer_step(o, b), "optimizer step");
        nb_eager_zero_grad(b);
        after_step(r, nb_tensor_get(loss, 0));
        nb_tensor_release(ids);
        nb_tensor_release(targets);
        nb_eager_release_values(b);
        if (eval_due(r)) print_validation(r, eager_validate(b, r), false);
    }
    nb_eager_optimizer_free(o);
    return eager_validate(b, r);
}

/* ---- static mode -------------------------------------------------------------------------------- */

/* The training program (with its optimiser part) and its evaluation copy,
 * each run with feeds ids, targets and fetching the loss. */
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
    memset(m, 0, sizeof *m);
    die_on(nb_program_new(&m->main), "program");
    die_on(nb_program_new(&m->startup), "program");
    nb_program_set_seed(m->main, a->seed);
    nb_program_set_seed(m->startup, a->seed);
    die_on(nb_builder_new_record(&m->b, m->main, m->startup), "builder");
    nb_builder *b = m->b;
    nb_value ids = nb_layer_data(b, "ids", NB_I64, 2, (int64_t[]){a->model.batch, a->model.block});
    nb_value targets = nb_layer_data(b, "targets", NB_I64, 2, (int64_t[]){a->model.batch, a->model.block});
    nb_value loss = gpt_loss(b, &a->model, ids, targets);
    die_on_builder(b, "model");
    die_on(nb_program_clone_for_test(&m->test, m->main), "evaluation program");
    nb_optimizer opt = gpt_optimizer(a);
    die_on(nb_minimize(&opt, m->main, m->startup, nb_value_name(loss), NULL, &m->grads), "minimize");
    die_on(nb_scope_new(&m->scope, NULL), "scope");
    die_on(nb_executor_new(&m->ex), "executor");
    die_on(nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL), "startup");
    const char *feeds[] = {"ids", "targets"}, *fetch[] = {nb_value_name(loss)};
    die_on(nb_prepare(&m->train_step, m->main, 0, NB_NAMES_N(2, feeds), NB_NAMES_N(1, fetch)), "prepare");
    die_on(nb_prepare(&m->eval_step, m->test, 0, NB_NAMES_N(2, feeds), NB_NAMES_N(1, fetch)), "prepare");
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

static double static_step(nb_prepared *pp, nb_scope *scope, nb_tensor *ids, nb_tensor *targets)
{
    nb_tensor *in[2] = {ids, targets}, *out[1] = {NULL};
    die_on(nb_prepared_run(pp, scope, in, out), "run");
    double loss = nb_tensor_get(out[0], 0);
    nb_tensor_release(out[0]);
    return loss;
}

static double static_eval_batch(void *ctx, nb_tensor *ids, nb_tensor *targets)
{
    static_model *m = ctx;
    return static_step(m->eval_step, m->scope, ids, targets);
}

/* Trains the program; afterwards the eager builder `b` holds its
 * parameters (the same tensors), for sampling and saving. */
static double train_static(run *r, nb_builder *b)
{
    static_model m;
    static_build(&m, r);
    while (keep_training(r)) {
        nb_tensor *ids, *targets;
        next_batch(r, &ids, &targets);
        after_step(r, static_step(m.train_step, m.scope, ids, targets));
        nb_tensor_release(ids);
        nb_tensor_release(targets);
        if (eval_due(r)) print_validation(r, validate(r, static_eval_batch, &m), false);
    }
    double val = validate(r, static_eval_batch, &m);
    nb_block *g = nb_program_global_block(m.main);
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->is_parameter)
            die_on(nb_eager_add_param(b, g->vars[i]->name, nb_scope_find(m.scope, g->vars[i]->name)), "parameters");
    static_free(&m);
    return val;
}

/* ---- checkpoints ------------------------------------------------------------------------------ */

/* The model as a program over ids [1, block], for the checkpoint API: its
 * persistable vars are exactly the parameters. */
static void checkpoint_program(const gpt_config *c, nb_program **main, nb_program **startup)
{
    gpt_config inference = *c;
    inference.dropout = 0;
    nb_builder *b;
    die_on(nb_program_new(main), "checkpoint");
    die_on(nb_program_new(startup), "checkpoint");
    die_on(nb_builder_new_record(&b, *main, *startup), "checkpoint");
    gpt_logits(b, &inference, nb_layer_data(b, "ids", NB_I64, 2, (int64_t[]){1, c->block}));
    die_on_builder(b, "checkpoint model");
    nb_builder_free(b);
}

#define META_PREFIX "char_gpt."

/* Saves the parameters of `e` to a->checkpoint, with the model's shape and
 * vocabulary (as hex) as metadata. */
static void save_checkpoint(nb_builder *e, const args *a, const nb_text *text, int64_t steps, double val)
{
    const int V = text->vocab_size;
    nb_program *main, *startup;
    checkpoint_program(&a->model, &main, &startup);
    nb_scope *scope;
    die_on(nb_scope_new(&scope, NULL), "checkpoint");
    const nb_block *g = nb_program_global_block(main);
    for (int i = 0; i < g->n_vars; i++) {
        if (!g->vars[i]->persistable) continue;
        nb_tensor *t = nb_eager_find_param(e, g->vars[i]->name);
        if (!t)
            die_on(nb_error(NB_ERR_NOT_FOUND, "the trained model has no parameter %s", g->vars[i]->name), "checkpoint");
        die_on(nb_scope_set(scope, g->vars[i]->name, t), "checkpoint");
    }
    char vals[8][64], vocab[2 * 256 + 1];
    for (int i = 0; i < V; i++) snprintf(vocab + 2 * i, 3, "%02x", text->vocab[i]);
    snprintf(vals[0], sizeof vals[0], "%lld", (long long)a->model.layers);
    snprintf(vals[1], sizeof vals[1], "%lld", (long long)a->model.embed);
    snprintf(vals[2], sizeof vals[2], "%lld", (long long)a->model.heads);
    snprintf(vals[3], sizeof vals[3], "%lld", (long long)a->model.block);
    snprintf(vals[4], sizeof vals[4], "%d", a->model.tied ? 1 : 0);
    snprintf(vals[5], sizeof vals[5], "%lld", (long long)steps);
    snprintf(vals[6], sizeof vals[6], "%.4f", val);
    const char *keys[] = {META_PREFIX "layers",          META_PREFIX "embed", META_PREFIX "heads",
                          META_PREFIX "block",           META_PREFIX "tied",  META_PREFIX "steps",
                          META_PREFIX "validation_loss", META_PREFIX "vocab"};
    const char *values[] = {vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6], vocab};
    nb_meta meta = {8, keys, values};
    die_on(nb_checkpoint_save(a->checkpoint, main, scope, &meta), "--checkpoint");
    printf("saved the model to %s\n", a->checkpoint);
    nb_scope_free(scope);
    nb_program_free(startup);
    nb_program_free(main);
}

/* Refuses, before training, a checkpoint path whose directory cannot be
 * written. */
static void check_checkpoint_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= sizeof dir) n = sizeof dir - 1;
    memcpy(dir, path, n);
    dir[n] = 0;
    if (!slash) strcpy(dir, ".");
    else if (n == 0) strcpy(dir, "/");
    if (access(dir, W_OK | X_OK)) {
        fprintf(stderr, "char_gpt: --checkpoint: cannot write %s: directory %s: %s\n", path, dir, strerror(errno));
        exit(1);
    }
}

/* An integer of the checkpoint's metadata, in [lo, hi]. */
static int meta_int(const nb_safetensors *f, const char *path, const char *key, int lo, int hi)
{
    const char *s = nb_safetensors_meta(f, key);
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "char_gpt: --checkpoint: %s is not a char_gpt model: its metadata %s is %s%s%s\n", path, key,
                s ? "'" : "missing", s ? s : "", s ? "'" : "");
        exit(1);
    }
    return (int)v;
}

/* Loads a->checkpoint: the model's shape into *a, its vocabulary into
 * *text, its parameters into `e`. */
static void load_checkpoint(nb_builder *e, args *a, nb_text *text)
{
    nb_safetensors *f;
    die_on(nb_safetensors_load(&f, a->checkpoint), "--checkpoint");
    a->model.layers = meta_int(f, a->checkpoint, META_PREFIX "layers", 1, 1024);
    a->model.embed = meta_int(f, a->checkpoint, META_PREFIX "embed", 1, 65536);
    a->model.heads = meta_int(f, a->checkpoint, META_PREFIX "heads", 1, 65536);
    a->model.block = meta_int(f, a->checkpoint, META_PREFIX "block", 1, 65536);
    a->model.tied = meta_int(f, a->checkpoint, META_PREFIX "tied", 0, 1);
    const char *hex = nb_safetensors_meta(f, META_PREFIX "vocab");
    unsigned char bytes[256];
    size_t n = hex ? strlen(hex) / 2 : 0;
    bool ok = hex && n >= 1 && n <= 256 && strlen(hex) % 2 == 0;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned v;
        ok = sscanf(hex + 2 * i, "%2x", &v) == 1 && (i == 0 || v > bytes[i - 1]);
        bytes[i] = (unsigned char)v;
    }
    if (!ok || a->model.embed % a->model.heads) {
        fprintf(stderr, "char_gpt: --checkpoint: %s is not a char_gpt model: bad metadata %s\n", a->checkpoint,
                ok ? "heads" : META_PREFIX "vocab");
        exit(1);
    }
    nb_safetensors_free(f);
    die_on(nb_text_from_bytes(text, bytes, (int64_t)n), "--checkpoint");
    nb_program *main, *startup;
    a->model.vocab = text->vocab_size;
    checkpoint_program(&a->model, &main, &startup);
    nb_scope *scope;
    die_on(nb_scope_new(&scope, NULL), "checkpoint");
    die_on(nb_checkpoint_load(a->checkpoint, main, scope, NULL), "--checkpoint");
    const nb_block *g = nb_program_global_block(main);
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->is_parameter)
            die_on(nb_eager_add_param(e, g->vars[i]->name, nb_scope_find(scope, g->vars[i]->name)), "--checkpoint");
    const gpt_config *c = &a->model;
    printf("%s: %lld layers, embedding %lld, %lld heads, block %lld%s, %d characters\n", a->checkpoint,
           (long long)c->layers, (long long)c->embed, (long long)c->heads, (long long)c->block, c->tied ? ", tied" : "",
           text->vocab_size);
    nb_scope_free(scope);
    nb_program_free(startup);
    nb_program_free(main);
}

/* ---- sampling ------------------------------------------------------------------------------------ */

/* Draws an id from softmax(logits / temperature), among the top_k likeliest
 * (0: all). */
static int64_t draw(const nb_tensor *logits, int64_t row, int vocab, const args *a, nb_rng *rng)
{
    double p[256], top = -INFINITY, sum = 0;
    for (int k = 0; k < vocab; k++) {
        p[k] = nb_tensor_get(logits, row * vocab + k) / a->temperature;
        top = p[k] > top ? p[k] : top;
    }
    double floor_p = -INFINITY; /* the k-th largest: what is below it is out */
    if (a->top_k > 0 && a->top_k < vocab) {
        bool taken[256] = {false};
        for (int n = 0; n < a->top_k; n++) {
            int best = -1;
            for (int k = 0; k < vocab; k++)
                if (!taken[k] && (best < 0 || p[k] > p[best])) best = k;
            taken[best] = true;
            floor_p = p[best];
        }
    }
    for (int k = 0; k < vocab; k++) sum += p[k] = p[k] < floor_p ? 0 : exp(p[k] - top);
    double u = nb_rng_uniform(rng) * sum;
    for (int k = 0; k < vocab; k++)
        if ((u -= p[k]) < 0) return k;
    return vocab - 1;
}

/* Refuses a prime with characters the corpus lacks before training, not
 * after. */
static void check_prime(const nb_text *text, const char *prime)
{
    int64_t n = (int64_t)strlen(prime);
    int64_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids) die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "--prime");
    nb_status st = nb_text_encode(text, prime, n, ids);
    free(ids);
    die_on(st, "--prime");
}

/* Writes a->sample characters: the model reads the prime (or a newline),
 * then each character it draws, seeing the last `block` of them. */
static void sample_text(nb_builder *b, const args *a, const nb_text *text)
{
    const int V = text->vocab_size;
    const int64_t n_prime = (int64_t)strlen(a->prime), cap = (n_prime > 0 ? n_prime : 1) + a->sample;
    int64_t *ctx = malloc((size_t)cap * sizeof *ctx), len = n_prime;
    if (!ctx) die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "sample");
    if (n_prime > 0) die_on(nb_text_encode(text, a->prime, n_prime, ctx), "--prime");
    else ctx[len++] = text->id_of['\n'] >= 0 ? text->id_of['\n'] : 0;
    nb_rng rng;
    nb_rng_seed(&rng, a->seed);
    nb_grad_mode_push(false);
    nb_eager_set_test_mode(b, true);
    printf("sample (temperature %g%s", a->temperature, a->top_k ? "" : "):\n");
    if (a->top_k) printf(", top %d):\n", a->top_k);
    printf("%s", a->prime);
    for (int i = 0; i < a->sample; i++) {
        const int64_t T = len < a->model.block ? len : a->model.block;
        nb_tensor *ids;
        die_on(nb_tensor_new(&ids, NB_I64, 2, (int64_t[]){1, T}), "sample");
        memcpy(nb_tensor_data(ids), ctx + len - T, (size_t)T * sizeof *ctx);
        nb_value logits = gpt_logits(b, &a->model, nb_eager_value(b, ids));
        die_on_builder(b, "sample");
        int64_t next = draw(nb_eager_tensor(logits), T - 1, V, a, &rng);
        putchar(text->vocab[next]);
        ctx[len++] = next;
        nb_eager_release_values(b);
        nb_tensor_release(ids);
    }
    printf("\n");
    nb_eager_set_test_mode(b, false);
    nb_grad_mode_pop();
    free(ctx);
}

static int64_t count_params(nb_builder *b)
{
    int64_t n = 0;
    for (int i = 0; i < nb_eager_param_count(b); i++) n += nb_tensor_numel(nb_eager_param_at(b, i));
    return n;
}

int main(int argc, char **argv)
{
    args a = {.model = gpt_default_config(),
              .lr = 2e-3,
              .min_lr = 1e-4,
              .warmup = 100,
              .weight_decay = 0.1,
              .clip = 1,
              .steps = 3200,
              .minutes = 9.5,
              .eval_every = 500,
              .seed = 1,
              .temperature = 0.8,
              .sample = 500,
              .prime = "ROMEO:",
              .threads = 0};
    parse_args(argc, argv, &a);
    if (a.threads > 0) nb_set_num_threads(a.threads);
    nb_builder *b;
    die_on(nb_builder_new_eager(&b), "eager builder");
    nb_eager_set_seed(b, a.seed);
    if (a.sample_only) {
        nb_text vocab;
        load_checkpoint(b, &a, &vocab);
        check_prime(&vocab, a.prime);
        if (a.sample > 0) sample_text(b, &a, &vocab);
        nb_text_free(&vocab);
        nb_builder_free(b);
        return 0;
    }
    if (a.checkpoint) check_checkpoint_dir(a.checkpoint);
    run r;
    run_open(&r, &a);
    a.model.vocab = r.text.vocab_size;
    check_prime(&r.text, a.prime);
    double val = a.eager ? train_eager(&r, b) : train_static(&r, b);
    if (!a.quiet)
        printf("model: %lld layers, embedding %lld, %lld heads, block %lld%s: %lld parameters\n",
               (long long)a.model.layers, (long long)a.model.embed, (long long)a.model.heads, (long long)a.model.block,
               a.model.tied ? ", tied" : "", (long long)count_params(b));
    print_validation(&r, val, true);
    if (a.checkpoint) save_checkpoint(b, &a, &r.text, r.step, val);
    if (a.sample > 0) sample_text(b, &a, &r.text);
    nb_builder_free(b);
    nb_text_free(&r.text);
    return 0;
}
