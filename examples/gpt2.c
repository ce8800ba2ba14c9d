/* gpt2: GPT-2 (124M by default; the family's other sizes by --model, any
 * shape by flags) trained by AdamW with GPT-2's weight-decay split, a
 * linear warm-up and a cosine decay, and clipping by global norm, as a
 * static program (the default) or on the eager tape (--eager).
 *
 *     build/examples/gpt2 --layers 4 --heads 4 --embed 128 --block 64 --steps 200   # bytes of tinyshakespeare
 *     build/examples/gpt2 --load gpt2_124M.bin --train tiny_shakespeare_train.bin --val tiny_shakespeare_val.bin
 *     build/examples/gpt2 --load model.safetensors --steps 0 --save gpt2_124M.bin  # convert
 *
 * It reads and writes llm.c's checkpoint (.bin) and Hugging Face's GPT-2
 * layout in safetensors (.safetensors), and trains on llm.c's token files
 * (--train, --val) or, without them, on the bytes of tinyshakespeare
 * (vocabulary 256), the last 10% held out. Batches are consecutive windows
 * of B * T + 1 tokens from the start of the training tokens, as llm.c's
 * loader takes them, so that a run is the same in every implementation that
 * starts from the same weights. It prints the training loss of every step
 * and the validation loss (the mean over --val-batches consecutive batches
 * of the held-out part). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpt2_io.h"
#include "gpt2_model.h"
#include "nabla/nabla.h"
#define EXAMPLE_NAME "gpt2"
#include "example_cli.h"
#include "example_data.h"

typedef struct args {
    const char *model;              /* --model: a preset of gpt2_preset */
    gpt2_config shape;              /* --layers, --heads, --embed, --block, --vocab (0: the preset's) */
    const char *load, *save;        /* --load, --save FILE (.bin or .safetensors) */
    const char *train, *val, *data; /* --train, --val token files; --data DIR|FILE of tinyshakespeare */
    int64_t steps, batch, seq;      /* --steps, --batch B, --seq T */
    double lr, min_lr, beta2;       /* --lr, --min-lr, --beta2 */
    int warmup;                     /* --warmup */
    double weight_decay, clip;      /* --weight-decay, --clip (0: none) */
    int eval_every, val_batches;    /* --eval-every (0: at the end only), --val-batches */
    uint64_t seed;
    int threads;
    bool eager, quiet;
} args;

static void usage(const char *prog, const args *d)
{
    printf("usage: %s [--model 124M|350M|774M|1558M] [--layers L] [--heads H] [--embed C] [--block T] [--vocab V]\n"
           "       [--load FILE] [--save FILE] [--train TOKENS.bin [--val TOKENS.bin] | --data DIR|FILE]\n"
           "       [--steps N] [--batch B] [--seq T] [--lr X] [--min-lr X] [--warmup N] [--beta2 X]\n"
           "       [--weight-decay X] [--clip C] [--eval-every N] [--val-batches N] [--seed S] [--threads N]\n"
           "       [--eager] [--quiet]\n\n"
           "Trains GPT-2 and prints 'step k/N: train loss X' and 'validation loss: X'. FILEs ending in .bin\n"
           "are llm.c checkpoints, in .safetensors Hugging Face's GPT-2 layout; --load takes the model's\n"
           "shape from the file (shape flags must agree with it, --heads also serves a safetensors file\n"
           "that does not say), --save writes the trained model (atomically). --steps 0 only converts.\n"
           "Without --train the tokens are the bytes of tinyshakespeare/input.txt (vocabulary 256), looked\n"
           "up in --data, $NABLA_DATA, data/ and ../data/, then %s; without --val the last 10%% of\n"
           "the tokens are held out. The rate warms up linearly for --warmup steps, then decays along a\n"
           "cosine to --min-lr at the last step; weight decay spares biases and layer-norm gains.\n"
           "Defaults: --model %s --steps %lld --batch %lld --seq %lld --lr %g --min-lr %g --warmup %d\n"
           "--beta2 %g --weight-decay %g --clip %g --val-batches %d --seed %llu.\n",
           prog, EXAMPLE_DATA_DIR_TEXT, d->model, (long long)d->steps, (long long)d->batch, (long long)d->seq, d->lr,
           d->min_lr, d->warmup, d->beta2, d->weight_decay, d->clip, d->val_batches, (unsigned long long)d->seed);
}

/* The flags that take a number: where each goes, and its range. */
static bool number_flag(const char *f, const char *s, args *a)
{
    const struct {
        const char *flag;
        int64_t *i;
        double *d;
        double lo, hi;
    } t[] = {
        {"--layers", &a->shape.layers, NULL, 1, 1024},
        {"--heads", &a->shape.heads, NULL, 1, 65536},
        {"--embed", &a->shape.embed, NULL, 1, 65536},
        {"--block", &a->shape.block, NULL, 1, 1 << 20},
        {"--vocab", &a->shape.vocab, NULL, 1, 65536},
        {"--steps", &a->steps, NULL, 0, 1e9},
        {"--batch", &a->batch, NULL, 1, 65536},
        {"--seq", &a->seq, NULL, 1, 1 << 20},
        {"--lr", NULL, &a->lr, 0, 100},
        {"--min-lr", NULL, &a->min_lr, 0, 100},
        {"--beta2", NULL, &a->beta2, 0, 0.999999},
        {"--weight-decay", NULL, &a->weight_decay, 0, 100},
        {"--clip", NULL, &a->clip, 0, 1e9},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        double v;
        if (strcmp(f, t[k].flag)) continue;
        if (!parse_number(f, s, t[k].lo, t[k].hi, &v)) exit(2);
        if (t[k].i) *t[k].i = (int64_t)v;
        else *t[k].d = v;
        return true;
    }
    double v;
    int *ip = !strcmp(f, "--warmup")  ? &a->warmup
        : !strcmp(f, "--eval-every")  ? &a->eval_every
        : !strcmp(f, "--val-batches") ? &a->val_batches
        : !strcmp(f, "--threads")     ? &a->threads
                                      : NULL;
    if (ip || !strcmp(f, "--seed")) {
        if (!parse_number(f, s, 0, ip ? 1e9 : 1e18, &v)) exit(2);
        if (ip) *ip = (int)v;
        else a->seed = (uint64_t)v;
        return true;
    }
    return false;
}

static void parse_args(int argc, char **argv, args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(argv[0], a);
            exit(0);
        } else if (!strcmp(f, "--eager")) a->eager = true;
        else if (!strcmp(f, "--quiet")) a->quiet = true;
        else if (i + 1 >= argc) {
            fprintf(stderr, "%s: unknown flag or missing value (try --help)\n", f);
            exit(2);
        } else if (!strcmp(f, "--model")) a->model = argv[++i];
        else if (!strcmp(f, "--load")) a->load = argv[++i];
        else if (!strcmp(f, "--save")) a->save = argv[++i];
        else if (!strcmp(f, "--train")) a->train = argv[++i];
        else if (!strcmp(f, "--val")) a->val = argv[++i];
        else if (!strcmp(f, "--data")) a->data = argv[++i];
        else if (!number_flag(f, argv[++i], a)) {
            fprintf(stderr, "%s: unknown flag (try --help)\n", f);
            exit(2);
        }
    }
    if (a->val && !a->train) {
        fprintf(stderr, "--val needs --train (token files go together)\n");
        exit(2);
    }
}

/* ---- the model's shape and its first weights ---------------------------------------- */

/* A shape flag that disagrees with the loaded file. */
static void agree(const char *flag, int64_t given, int64_t file, const char *path)
{
    if (given && given != file) {
        fprintf(stderr, "gpt2: %s %lld disagrees with %s, which holds %lld\n", flag, (long long)given, path,
                (long long)file);
        exit(1);
    }
}

/* The model: the file's (w filled) or the preset's with the flags. */
static gpt2_config model_config(const args *a, gpt2_weights *w, bool bytes)
{
    if (a->load) {
        die_on(gpt2_weights_load(w, a->load, a->shape.heads), "--load");
        const gpt2_config *c = &w->config;
        agree("--layers", a->shape.layers, c->layers, a->load);
        agree("--heads", a->shape.heads, c->heads, a->load);
        agree("--embed", a->shape.embed, c->embed, a->load);
        agree("--block", a->shape.block, c->block, a->load);
        agree("--vocab", a->shape.vocab, c->vocab, a->load);
        return *c;
    }
    gpt2_config c;
    if (!gpt2_preset(a->model, &c)) {
        fprintf(stderr, "gpt2: --model %s: expected 124M, 350M, 774M or 1558M\n", a->model);
        exit(2);
    }
    if (bytes) c.vocab = 256;
    if (a->shape.layers) c.layers = a->shape.layers;
    if (a->shape.heads) c.heads = a->shape.heads;
    if (a->shape.embed) c.embed = a->shape.embed;
    if (a->shape.block) c.block = a->shape.block;
    if (a->shape.vocab) c.vocab = a->shape.vocab;
    c.padded_vocab = gpt2_pad_vocab(c.vocab);
    die_on(gpt2_config_check(&c, "gpt2: model"), "model");
    return c;
}

/* ---- data ------------------------------------------------------------------------------ */

typedef struct data {
    gpt2_tokens train, val;
    int64_t pos; /* where the next training batch starts */
} data;

/* Bytes of the file as tokens. */
static void load_bytes(gpt2_tokens *t, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) die_on(nb_error(NB_ERR_NOT_FOUND, "cannot open %s", path), "data");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc(n > 0 ? (size_t)n : 1);
    t->ids = malloc((n > 0 ? (size_t)n : 1) * sizeof *t->ids);
    if (!bytes || !t->ids) die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "data");
    if (n < 0 || fread(bytes, 1, (size_t)n, f) != (size_t)n)
        die_on(nb_error(NB_ERR_IO, "cannot read %s", path), "data");
    fclose(f);
    for (long i = 0; i < n; i++) t->ids[i] = bytes[i];
    t->n = n;
    free(bytes);
}

/* The last 10% of `all` into val. */
static void hold_out(gpt2_tokens *all, gpt2_tokens *val)
{
    const int64_t cut = all->n - all->n / 10;
    val->n = all->n - cut;
    val->ids = malloc((size_t)(val->n > 0 ? val->n : 1) * sizeof *val->ids);
    if (!val->ids) die_on(nb_error(NB_ERR_NOMEM, "out of memory"), "data");
    memcpy(val->ids, all->ids + cut, (size_t)val->n * sizeof *val->ids);
    all->n = cut;
}

/* Every token must be one the model knows. */
static void check_tokens(const gpt2_tokens *t, int64_t vocab, const char *what)
{
    for (int64_t i = 0; i < t->n; i++)
        if (t->ids[i] >= vocab) {
            fprintf(stderr, "gpt2: %s: token %d at position %lld is outside the model's vocabulary of %lld\n", what,
                    (int)t->ids[i], (long long)i, (long long)vocab);
            exit(1);
        }
}

static void data_open(data *d, const args *a)
{
    memset(d, 0, sizeof *d);
    if (a->train) {
        die_on(gpt2_tokens_load(&d->train, a->train), "--train");
        if (a->val) die_on(gpt2_tokens_load(&d->val, a->val), "--val");
        else hold_out(&d->train, &d->val);
        return;
    }
    char path[4096];
    die_on(example_data_find_file(a->data, "tinyshakespeare", "input.txt", path, sizeof path), "data");
    load_bytes(&d->train, path);
    hold_out(&d->train, &d->val);
    if (!a->quiet)
        printf("%s: %lld bytes for training, %lld held out\n", path, (long long)d->train.n, (long long)d->val.n);
}

static void data_check(const data *d, const args *a, int64_t vocab)
{
    const int64_t need = a->batch * a->seq + 1;
    if (d->train.n < need || d->val.n < need) {
        fprintf(stderr,
                "gpt2: data: %lld training and %lld held-out tokens; a batch of --batch %lld x --seq %lld "
                "needs %lld\n",
                (long long)d->train.n, (long long)d->val.n, (long long)a->batch, (long long)a->seq, (long long)need);
        exit(1);
    }
    check_tokens(&d->train, vocab, a->train ? a->train : "data");
    check_tokens(&d->val, vocab, a->val ? a->val : a->train ? a->train : "data");
}

/* ids [B, T] = tokens[at ..], targets the tokens one later. */
static void make_batch(const gpt2_tokens *t, int64_t at, const args *a, nb_tensor **ids, nb_tensor **targets)
{
    const int64_t shape[2] = {a->batch, a->seq}, n = a->batch * a->seq;
    die_on(nb_tensor_new(ids, NB_I64, 2, shape), "batch");
    die_on(nb_tensor_new(targets, NB_I64, 2, shape), "batch");
    int64_t *x = nb_tensor_data(*ids), *y = nb_tensor_data(*targets);
    for (int64_t i = 0; i < n; i++) {
        x[i] = t->ids[at + i];
        y[i] = t->ids[at + i + 1];
    }
}

/* The next training batch: consecutive, back to the start at the end. */
static void next_batch(data *d, const args *a, nb_tensor **ids, nb_tensor **targets)
{
    const int64_t n = a->batch * a->seq;
    if (d->pos + n + 1 > d->train.n) d->pos = 0;
    make_batch(&d->train, d->pos, a, ids, targets);
    d->pos += n;
}

/* ---- training, as a program or eagerly ------------------------------------------------ */

/* One way of running the model: its step, its evaluation, its weights. */
typedef struct trainer {
    double (*step)(void *self, nb_tensor *ids, nb_tensor *targets);
    double (*eval)(void *self, nb_tensor *ids, nb_tensor *targets);
    nb_tensor *(*param)(void *self, const char *name);
    void *self;
} trainer;

static nb_optimizer optimizer(const args *a)
{
    nb_optimizer o = gpt2_adamw(a->lr, a->weight_decay);
    o.beta2 = a->beta2;
    if (a->clip > 0) {
        o.clip = NB_CLIP_GLOBAL_NORM;
        o.clip_value = a->clip;
    }
    const int64_t decay = a->steps > a->warmup ? a->steps - a->warmup : 1;
    o.schedule = (nb_lr_schedule){.kind = "cosine",
                                  .warmup_steps = a->warmup,
                                  .total_steps = decay,
                                  .min_lr = a->min_lr < a->lr ? a->min_lr : a->lr};
    return o;
}

typedef struct static_run {
    nb_program *main, *startup, *test;
    nb_scope *scope;
    nb_executor *ex;
    nb_prepared *train, *eval;
    nb_backward_result grads;
} static_run;

static double run_program(nb_prepared *pp, nb_scope *scope, nb_tensor *ids, nb_tensor *targets)
{
    nb_tensor *in[2] = {ids, targets}, *out[1] = {NULL};
    die_on(nb_prepared_run(pp, scope, in, out), "run");
    double loss = nb_tensor_get(out[0], 0);
    nb_tensor_release(out[0]);
    return loss;
}

static double static_step(void *self, nb_tensor *ids, nb_tensor *targets)
{
    static_run *s = self;
    return run_program(s->train, s->scope, ids, targets);
}

static double static_eval(void *self, nb_tensor *ids, nb_tensor *targets)
{
    static_run *s = self;
    return run_program(s->eval, s->scope, ids, targets);
}

static nb_tensor *static_param(void *self, const char *name)
{
    return nb_scope_find(((static_run *)self)->scope, name);
}

/* The training program and its evaluation copy; the parameters start as
 * `w` holds them (when loaded) or as the startup program draws them. */
static void static_open(static_run *s, const gpt2_config *c, const args *a, const gpt2_weights *w)
{
    memset(s, 0, sizeof *s);
    nb_builder *b;
    die_on(nb_program_new(&s->main), "program");
    die_on(nb_program_new(&s->startup), "program");
    nb_program_set_seed(s->startup, a->seed);
    die_on(nb_builder_new_record(&b, s->main, s->startup), "builder");
    nb_value ids = nb_layer_data(b, "ids", NB_I64, 2, (int64_t[]){a->batch, a->seq});
    nb_value targets = nb_layer_data(b, "targets", NB_I64, 2, (int64_t[]){a->batch, a->seq});
    nb_value loss = gpt2_loss(b, c, ids, targets);
    if (nb_builder_status(b)) die_on(nb_error(nb_builder_status(b), "%s", nb_builder_error(b)), "model");
    const char *loss_name = nb_value_name(loss);
    die_on(nb_program_clone_for_test(&s->test, s->main), "evaluation program");
    nb_optimizer opt = optimizer(a);
    die_on(nb_minimize(&opt, s->main, s->startup, loss_name, NULL, &s->grads), "minimize");
    die_on(nb_scope_new(&s->scope, NULL), "scope");
    die_on(nb_executor_new(&s->ex), "executor");
    die_on(nb_executor_run(s->ex, s->startup, s->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL), "startup");
    for (int i = 0; w->t && i < w->n; i++) die_on(nb_scope_set(s->scope, gpt2_param_at(c, i).name, w->t[i]), "--load");
    const char *feeds[] = {"ids", "targets"};
    die_on(nb_prepare(&s->train, s->main, 0, NB_NAMES_N(2, feeds), NB_NAMES_N(1, &loss_name)), "prepare");
    die_on(nb_prepare(&s->eval, s->test, 0, NB_NAMES_N(2, feeds), NB_NAMES_N(1, &loss_name)), "prepare");
    nb_builder_free(b);
}

static void static_close(static_run *s)
{
    nb_prepared_free(s->train);
    nb_prepared_free(s->eval);
    nb_executor_free(s->ex);
    nb_scope_free(s->scope);
    nb_backward_result_free(&s->grads);
    nb_program_free(s->test);
    nb_program_free(s->startup);
    nb_program_free(s->main);
}

typedef struct eager_run {
    nb_builder *b;
    nb_eager_optimizer *o;
    const gpt2_config *c;
} eager_run;

static double eager_step(void *self, nb_tensor *ids, nb_tensor *targets)
{
    eager_run *e = self;
    nb_value loss = gpt2_loss(e->b, e->c, nb_eager_value(e->b, ids), nb_eager_value(e->b, targets));
    if (nb_builder_status(e->b)) die_on(nb_error(nb_builder_status(e->b), "%s", nb_builder_error(e->b)), "model");
    nb_tensor *l = nb_eager_tensor(loss);
    double v = nb_tensor_get(l, 0);
    die_on(nb_backward(NB_TENSORS(l), NULL, 0), "backward");
    die_on(nb_eager_optimizer_step(e->o, e->b), "optimizer step");
    nb_eager_zero_grad(e->b);
    nb_eager_release_values(e->b);
    return v;
}

static double eager_eval(void *self, nb_tensor *ids, nb_tensor *targets)
{
    eager_run *e = self;
    nb_grad_mode_push(false);
    nb_value loss = gpt2_loss(e->b, e->c, nb_eager_value(e->b, ids), nb_eager_value(e->b, targets));
    if (nb_builder_status(e->b)) die_on(nb_error(nb_builder_status(e->b), "%s", nb_builder_error(e->b)), "model");
    double v = nb_tensor_get(nb_eager_tensor(loss), 0);
    nb_eager_release_values(e->b);
    nb_grad_mode_pop();
    return v;
}

static nb_tensor *eager_param(void *self, const char *name)
{
    return nb_eager_find_param(((eager_run *)self)->b, name);
}

/* The eager builder holds the loaded parameters before the model first
 * runs, which then finds them by name instead of drawing its own. */
static void eager_open(eager_run *e, const gpt2_config *c, const args *a, const gpt2_weights *w)
{
    memset(e, 0, sizeof *e);
    e->c = c;
    die_on(nb_builder_new_eager(&e->b), "eager builder");
    nb_eager_set_seed(e->b, a->seed);
    for (int i = 0; w->t && i < w->n; i++)
        die_on(nb_eager_add_param(e->b, gpt2_param_at(c, i).name, w->t[i]), "--load");
    if (!w->t) {
        /* One token through the model makes (draws) its parameters, so that
         * they exist before any step (for --save after --steps 0). */
        nb_tensor *one;
        die_on(nb_tensor_new(&one, NB_I64, 2, (int64_t[]){1, 1}), "model");
        nb_grad_mode_push(false);
        gpt2_logits(e->b, c, nb_eager_value(e->b, one));
        nb_grad_mode_pop();
        if (nb_builder_status(e->b)) die_on(nb_error(nb_builder_status(e->b), "%s", nb_builder_error(e->b)), "model");
        nb_eager_release_values(e->b);
        nb_tensor_release(one);
    }
    nb_optimizer opt = optimizer(a);
    die_on(nb_eager_optimizer_new(&e->o, &opt), "optimizer");
}

static void eager_close(eager_run *e)
{
    nb_eager_optimizer_free(e->o);
    nb_builder_free(e->b);
}

/* The mean loss over the first --val-batches batches of the held-out part. */
static double validate(const trainer *t, const data *d, const args *a)
{
    const int64_t n = a->batch * a->seq;
    int64_t batches = (d->val.n - 1) / n;
    if (batches > a->val_batches) batches = a->val_batches;
    double sum = 0;
    for (int64_t k = 0; k < batches; k++) {
        nb_tensor *ids, *targets;
        make_batch(&d->val, k * n, a, &ids, &targets);
        sum += t->eval(t->self, ids, targets);
        nb_tensor_release(ids);
        nb_tensor_release(targets);
    }
    return sum / (double)batches;
}

static void train(const trainer *t, data *d, const args *a)
{
    double t0 = now();
    for (int64_t s = 1; s <= a->steps; s++) {
        nb_tensor *ids, *targets;
        next_batch(d, a, &ids, &targets);
        double ts = now();
        double loss = t->step(t->self, ids, targets);
        printf("step %lld/%lld: train loss %.6f (%.0f ms)\n", (long long)s, (long long)a->steps, loss,
               1e3 * (now() - ts));
        nb_tensor_release(ids);
        nb_tensor_release(targets);
        if (a->eval_every > 0 && s % a->eval_every == 0 && s < a->steps)
            printf("step %lld: validation loss %.6f\n", (long long)s, validate(t, d, a));
        fflush(stdout);
    }
    printf("validation loss: %.6f after %lld steps, %.1f s\n", validate(t, d, a), (long long)a->steps, now() - t0);
}

/* The trained parameters, for --save. */
static void save(const trainer *t, const gpt2_config *c, const char *path)
{
    gpt2_weights w;
    die_on(gpt2_weights_alloc(&w, c), "--save");
    for (int i = 0; i < w.n; i++) {
        gpt2_param p = gpt2_param_at(c, i);
        nb_tensor *x = t->param(t->self, p.name);
        if (!x) die_on(nb_error(NB_ERR_NOT_FOUND, "the model has no parameter %s", p.name), "--save");
        w.t[i] = nb_tensor_retain(x);
    }
    die_on(gpt2_weights_save(&w, path), "--save");
    gpt2_weights_free(&w);
    printf("saved the model to %s\n", path);
}

int main(int argc, char **argv)
{
    args a = {.model = "124M",
              .steps = 20,
              .batch = 4,
              .seq = 64,
              .lr = 3e-4,
              .min_lr = 3e-5,
              .beta2 = 0.95,
              .warmup = 10,
              .weight_decay = 0.1,
              .clip = 1.0,
              .val_batches = 10,
              .seed = 1};
    parse_args(argc, argv, &a);
    if (a.threads > 0) nb_set_num_threads(a.threads);
    gpt2_weights w = {0};
    data d = {0};
    const bool convert_only = a.steps == 0;
    if (!convert_only) data_open(&d, &a);
    const gpt2_config c = model_config(&a, &w, !a.train);
    if (!convert_only) data_check(&d, &a, c.vocab);
    if (convert_only) a.batch = a.seq = 1; /* the program only holds the parameters */
    if (a.seq > c.block) {
        fprintf(stderr, "gpt2: --seq %lld is longer than the model's context of %lld\n", (long long)a.seq,
                (long long)c.block);
        return 1;
    }
    if (!a.quiet)
        printf("model: %lld layers, %lld heads, width %lld, context %lld, vocabulary %lld (padded %lld): %lld "
               "parameters%s\n",
               (long long)c.layers, (long long)c.heads, (long long)c.embed, (long long)c.block, (long long)c.vocab,
               (long long)c.padded_vocab, (long long)gpt2_param_numel(&c), a.load ? ", loaded" : "");
    static_run s;
    eager_run e;
    trainer t;
    if (a.eager) {
        eager_open(&e, &c, &a, &w);
        t = (trainer){eager_step, eager_eval, eager_param, &e};
    } else {
        static_open(&s, &c, &a, &w);
        t = (trainer){static_step, static_eval, static_param, &s};
    }
    gpt2_weights_free(&w);
    if (!convert_only) train(&t, &d, &a);
    if (a.save) save(&t, &c, a.save);
    if (a.eager) eager_close(&e);
    else static_close(&s);
    gpt2_tokens_free(&d.train);
    gpt2_tokens_free(&d.val);
    return 0;
}
