/* GPT-2's checkpoint and token files (see gpt2_io.h). */
#include "gpt2_io.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { HEADER_INTS = 256, HEADER_BYTES = HEADER_INTS * 4 };
#define LLMC_MAGIC 20240326
#define LLMC_VERSION 3
#define TOKENS_MAGIC 20240520
#define TOKENS_VERSION 1

nb_status gpt2_weights_alloc(gpt2_weights *w, const gpt2_config *c)
{
    memset(w, 0, sizeof *w);
    w->config = *c;
    w->n = gpt2_param_count(c);
    w->t = calloc((size_t)w->n, sizeof *w->t);
    return w->t ? NB_OK : nb_error(NB_ERR_NOMEM, "gpt2: out of memory");
}

void gpt2_weights_free(gpt2_weights *w)
{
    for (int i = 0; w->t && i < w->n; i++) nb_tensor_release(w->t[i]);
    free(w->t);
    memset(w, 0, sizeof *w);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

nb_status gpt2_weights_load(gpt2_weights *w, const char *path, int64_t heads)
{
    memset(w, 0, sizeof *w);
    if (ends_with(path, ".bin")) return gpt2_llmc_load(w, path);
    if (ends_with(path, ".safetensors")) return gpt2_hf_load(w, path, heads);
    return nb_error(NB_ERR_ARG, "'%s': expected a .bin (llm.c) or .safetensors (Hugging Face) file", path);
}

nb_status gpt2_weights_save(const gpt2_weights *w, const char *path)
{
    if (ends_with(path, ".bin")) return gpt2_llmc_save(w, path);
    if (ends_with(path, ".safetensors")) return gpt2_hf_save(w, path);
    return nb_error(NB_ERR_ARG, "'%s': expected a .bin (llm.c) or .safetensors (Hugging Face) file", path);
}

/* Refuses weights whose tensors are not the config's parameters. */
static nb_status check_weights(const gpt2_weights *w, const char *path)
{
    if (w->n != gpt2_param_count(&w->config))
        return nb_error(NB_ERR_ARG, "save '%s': %d tensors for a model of %d parameters", path, w->n,
                        gpt2_param_count(&w->config));
    for (int i = 0; i < w->n; i++) {
        gpt2_param p = gpt2_param_at(&w->config, i);
        const nb_tensor *t = w->t[i];
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        if (!t || t->dtype != NB_F32 || !nb_tensor_is_contiguous(t) ||
            !nb_shape_equal(t->ndim, t->shape, p.ndim, p.shape))
            return nb_error(NB_ERR_ARG, "save '%s': parameter %s is %s %s; the model needs a contiguous float32 %s",
                            path, p.name, t ? nb_dtype_name(t->dtype) : "missing",
                            t ? nb_shape_str(a, sizeof a, t->ndim, t->shape) : "",
                            nb_shape_str(b, sizeof b, p.ndim, p.shape));
    }
    return NB_OK;
}

/* ---- reading raw files ---------------------------------------------------------------- */

/* Opens `path` for reading, its size in *size; `what` names the format. */
static nb_status open_sized(FILE **f, int64_t *size, const char *path, const char *what)
{
    *f = fopen(path, "rb");
    if (!*f)
        return nb_error(errno == ENOENT ? NB_ERR_NOT_FOUND : NB_ERR_IO, "%s '%s': cannot open: %s", what, path,
                        strerror(errno));
    struct stat sb;
    if (fstat(fileno(*f), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(*f);
        *f = NULL;
        return nb_error(NB_ERR_IO, "%s '%s': not a regular file", what, path);
    }
    *size = (int64_t)sb.st_size;
    return NB_OK;
}

static nb_status read_exact(FILE *f, void *p, size_t n, const char *path, const char *what)
{
    if (fread(p, 1, n, f) == n) return NB_OK;
    return nb_error(NB_ERR_IO, "%s '%s': reading failed%s", what, path, feof(f) ? ": the file shrank" : "");
}

/* The 256-int header, after checking the file holds one. */
static nb_status read_header(FILE *f, int64_t size, int32_t *h, const char *path, const char *what)
{
    if (size < HEADER_BYTES)
        return nb_error(NB_ERR_FORMAT, "%s '%s': truncated: %lld bytes, shorter than the %d-byte header", what, path,
                        (long long)size, HEADER_BYTES);
    return read_exact(f, h, HEADER_BYTES, path, what);
}

static nb_status check_magic(const int32_t *h, int32_t magic, int32_t version, const char *path, const char *what)
{
    if (h[0] != magic) {
        const char *hint = h[0] == LLMC_MAGIC ? " (that of an llm.c checkpoint)"
            : h[0] == TOKENS_MAGIC            ? " (that of an llm.c token file)"
                                              : "";
        return nb_error(NB_ERR_FORMAT, "%s '%s': bad magic %d%s; expected %d", what, path, (int)h[0], hint, (int)magic);
    }
    if (h[1] != version)
        return nb_error(NB_ERR_FORMAT, "%s '%s': version %d; only version %d is read", what, path, (int)h[1],
                        (int)version);
    return NB_OK;
}

/* Opens `path` and checks its header's magic and version; on success f is
 * open past the header, h holds it and size is the file's. */
static nb_status open_checked(FILE **f, int64_t *size, int32_t *h, const char *path, const char *what, int32_t magic,
                              int32_t version)
{
    nb_status st = open_sized(f, size, path, what);
    if (st) return st;
    if (!(st = read_header(*f, *size, h, path, what))) st = check_magic(h, magic, version, path, what);
    if (st) {
        fclose(*f);
        *f = NULL;
    }
    return st;
}

static nb_status size_matches(int64_t size, int64_t want, const char *path, const char *what, const char *header)
{
    if (size == want) return NB_OK;
    return nb_error(NB_ERR_FORMAT, "%s '%s': %s: %lld bytes, but its header (%s) needs %lld", what, path,
                    size < want ? "truncated" : "bytes after the data", (long long)size, header, (long long)want);
}

/* ---- llm.c's checkpoint ---------------------------------------------------------------- */

static const char *const LLMC = "llm.c checkpoint";

/* Rows the file stores for parameter p (wte: Vp). */
static int64_t file_rows(const gpt2_config *c, const gpt2_param *p)
{
    return p->kind == GPT2_WTE ? c->padded_vocab : p->shape[0];
}

static int64_t llmc_file_bytes(const gpt2_config *c)
{
    return HEADER_BYTES + 4 * (gpt2_param_numel(c) + (c->padded_vocab - c->vocab) * c->embed);
}

/* dst [cols, rows] = src [rows, cols]^T. */
static void transpose(float *dst, const float *src, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++) dst[k * rows + r] = src[r * cols + k];
}

/* Reads parameter p into a new tensor: as stored, or transposed from
 * [out, in]; wte's padding rows are skipped. */
static nb_status llmc_read_param(FILE *f, const gpt2_config *c, const gpt2_param *p, float *scratch, nb_tensor **out,
                                 const char *path)
{
    nb_status st = nb_tensor_new(out, NB_F32, p->ndim, p->shape);
    if (st) return st;
    float *d = nb_tensor_data(*out);
    const int64_t n = nb_tensor_numel(*out);
    if (gpt2_kind_transposed(p->kind)) {
        st = read_exact(f, scratch, (size_t)n * 4, path, LLMC);
        if (!st) transpose(d, scratch, p->shape[1], p->shape[0]);
    } else {
        st = read_exact(f, d, (size_t)n * 4, path, LLMC);
    }
    const int64_t pad = (file_rows(c, p) - p->shape[0]) * (p->ndim == 2 ? p->shape[1] : 1);
    if (!st && pad > 0 && fseek(f, (long)(pad * 4), SEEK_CUR))
        st = nb_error(NB_ERR_IO, "%s '%s': seeking failed: %s", LLMC, path, strerror(errno));
    return st;
}

/* The largest matrix of c, for the transposes. */
static int64_t largest_matrix(const gpt2_config *c) { return 4 * c->embed * c->embed; }

nb_status gpt2_llmc_load(gpt2_weights *w, const char *path)
{
    memset(w, 0, sizeof *w);
    FILE *f;
    int64_t size;
    int32_t h[HEADER_INTS] = {0};
    nb_status st = open_checked(&f, &size, h, path, LLMC, LLMC_MAGIC, LLMC_VERSION);
    if (st) return st;
    gpt2_config c = {.block = h[2], .vocab = h[3], .layers = h[4], .heads = h[5], .embed = h[6], .padded_vocab = h[7]};
    char what[4200], header[160];
    snprintf(what, sizeof what, "%s '%.4000s': header", LLMC, path);
    if (!st) st = gpt2_config_check(&c, what);
    snprintf(header, sizeof header, "maxT %lld, V %lld, L %lld, NH %lld, C %lld, Vp %lld", (long long)c.block,
             (long long)c.vocab, (long long)c.layers, (long long)c.heads, (long long)c.embed,
             (long long)c.padded_vocab);
    if (!st) st = size_matches(size, llmc_file_bytes(&c), path, LLMC, header);
    float *scratch = NULL;
    if (!st) st = gpt2_weights_alloc(w, &c);
    if (!st && !(scratch = malloc((size_t)largest_matrix(&c) * 4))) st = nb_error(NB_ERR_NOMEM, "gpt2: out of memory");
    for (int i = 0; !st && i < w->n; i++) {
        gpt2_param p = gpt2_param_at(&c, i);
        st = llmc_read_param(f, &c, &p, scratch, &w->t[i], path);
    }
    free(scratch);
    fclose(f);
    if (st) gpt2_weights_free(w);
    return st;
}

/* Writes n floats, then `zeros` zero floats. */
static nb_status write_floats(nb_atomic_file *af, const float *d, int64_t n, int64_t zeros)
{
    nb_status st = nb_atomic_write(af, d, (size_t)n * 4);
    static const float z[1024];
    for (int64_t left = zeros; !st && left > 0; left -= 1024)
        st = nb_atomic_write(af, z, (size_t)(left < 1024 ? left : 1024) * 4);
    return st;
}

nb_status gpt2_llmc_save(const gpt2_weights *w, const char *path)
{
    const gpt2_config *c = &w->config;
    nb_status st = check_weights(w, path);
    if (st) return st;
    int32_t h[HEADER_INTS] = {LLMC_MAGIC,         LLMC_VERSION,      (int32_t)c->block, (int32_t)c->vocab,
                              (int32_t)c->layers, (int32_t)c->heads, (int32_t)c->embed, (int32_t)c->padded_vocab};
    float *scratch = malloc((size_t)largest_matrix(c) * 4);
    if (!scratch) return nb_error(NB_ERR_NOMEM, "gpt2: out of memory");
    nb_atomic_file *af;
    if ((st = nb_atomic_open(&af, path))) {
        free(scratch);
        return st;
    }
    st = nb_atomic_write(af, h, sizeof h);
    for (int i = 0; !st && i < w->n; i++) {
        gpt2_param p = gpt2_param_at(c, i);
        const float *d = nb_tensor_data(w->t[i]);
        const int64_t n = nb_tensor_numel(w->t[i]), cols = p.ndim == 2 ? p.shape[1] : 1;
        if (gpt2_kind_transposed(p.kind)) {
            transpose(scratch, d, p.shape[0], p.shape[1]);
            d = scratch;
        }
        st = write_floats(af, d, n, (file_rows(c, &p) - p.shape[0]) * cols);
    }
    free(scratch);
    if (st) {
        nb_atomic_abort(af);
        return st;
    }
    return nb_atomic_commit(af);
}

/* ---- Hugging Face's safetensors -------------------------------------------------------- */

static const char *const HF = "GPT-2 safetensors";

/* The name without Hugging Face's "transformer." prefix. */
static const char *bare(const char *name)
{
    static const char prefix[] = "transformer.";
    return strncmp(name, prefix, sizeof prefix - 1) ? name : name + sizeof prefix - 1;
}

/* Whether a tensor of the file is no parameter: attention-mask buffers and
 * the output layer tied to wte. */
static bool skipped(const char *name)
{
    return !strcmp(name, "lm_head.weight") ||
        (!strncmp(name, "h.", 2) && (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias")));
}

/* The tensor `name` of the file, with or without the prefix. */
static nb_tensor *find(const nb_safetensors *f, const char *name)
{
    for (int i = 0; i < nb_safetensors_count(f); i++)
        if (!strcmp(bare(nb_safetensors_name(f, i)), name)) return nb_safetensors_tensor(f, i);
    return NULL;
}

static nb_status need_matrix(const nb_safetensors *f, const char *name, const char *path, const int64_t **shape)
{
    const nb_tensor *t = find(f, name);
    if (!t) return nb_error(NB_ERR_FORMAT, "%s '%s': no tensor '%s'", HF, path, name);
    if (t->ndim != 2) return nb_error(NB_ERR_FORMAT, "%s '%s': '%s' is not a matrix", HF, path, name);
    *shape = t->shape;
    return NB_OK;
}

/* An integer of the metadata, or 0 without one. */
static int64_t meta_int(const nb_safetensors *f, const char *key)
{
    const char *s = nb_safetensors_meta(f, key);
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    return s && end != s && !*end ? (int64_t)v : 0;
}

/* The model's shape from the tensors: V and C of wte, maxT of wpe, L of the
 * highest layer named; the heads from the caller, the metadata or C / 64. */
static nb_status hf_config(const nb_safetensors *f, const char *path, int64_t heads, gpt2_config *c)
{
    const int64_t *wte, *wpe;
    nb_status st = need_matrix(f, "wte.weight", path, &wte);
    if (!st) st = need_matrix(f, "wpe.weight", path, &wpe);
    if (st) return st;
    if (wpe[1] != wte[1])
        return nb_error(NB_ERR_FORMAT, "%s '%s': wte.weight is %lld wide but wpe.weight %lld", HF, path,
                        (long long)wte[1], (long long)wpe[1]);
    *c = (gpt2_config){.vocab = wte[0], .embed = wte[1], .block = wpe[0]};
    for (int i = 0; i < nb_safetensors_count(f); i++) {
        const char *name = bare(nb_safetensors_name(f, i));
        char *end;
        long l = strncmp(name, "h.", 2) ? -1 : strtol(name + 2, &end, 10);
        if (l >= 0 && l < 1024 && end != name + 2 && *end == '.' && l + 1 > c->layers) c->layers = l + 1;
    }
    const int64_t padded = meta_int(f, "padded_vocab_size");
    c->padded_vocab = padded >= c->vocab ? padded : gpt2_pad_vocab(c->vocab);
    c->heads = heads > 0 ? heads : meta_int(f, "n_head");
    if (c->heads <= 0 && c->embed % 64)
        return nb_error(NB_ERR_FORMAT,
                        "%s '%s': width %lld; the heads are not in the file and width / 64 is no "
                        "count: give them (--heads)",
                        HF, path, (long long)c->embed);
    if (c->heads <= 0) c->heads = c->embed / 64;
    char what[4200];
    snprintf(what, sizeof what, "%s '%.4000s'", HF, path);
    return gpt2_config_check(c, what);
}

/* Every tensor of the file is a parameter of c or a skipped one. */
static nb_status hf_no_strangers(const nb_safetensors *f, const gpt2_config *c, const char *path)
{
    for (int i = 0; i < nb_safetensors_count(f); i++) {
        const char *name = bare(nb_safetensors_name(f, i));
        if (skipped(name)) continue;
        bool known = false;
        for (int k = 0; k < gpt2_param_count(c) && !known; k++) known = !strcmp(gpt2_param_at(c, k).name, name);
        if (!known)
            return nb_error(NB_ERR_FORMAT, "%s '%s': unexpected tensor '%s' (no parameter of a %lld-layer GPT-2)", HF,
                            path, nb_safetensors_name(f, i), (long long)c->layers);
    }
    return NB_OK;
}

nb_status gpt2_hf_load(gpt2_weights *w, const char *path, int64_t heads)
{
    memset(w, 0, sizeof *w);
    nb_safetensors *f;
    nb_status st = nb_safetensors_load(&f, path);
    if (st) return st;
    gpt2_config c;
    if (!(st = hf_config(f, path, heads, &c)) && !(st = hf_no_strangers(f, &c, path))) st = gpt2_weights_alloc(w, &c);
    for (int i = 0; !st && i < w->n; i++) {
        gpt2_param p = gpt2_param_at(&c, i);
        nb_tensor *t = find(f, p.name);
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        if (!t) st = nb_error(NB_ERR_FORMAT, "%s '%s': no tensor '%s'", HF, path, p.name);
        else if (!nb_shape_equal(t->ndim, t->shape, p.ndim, p.shape))
            st = nb_error(NB_ERR_FORMAT, "%s '%s': '%s' is %s; a model of width %lld needs %s", HF, path, p.name,
                          nb_shape_str(a, sizeof a, t->ndim, t->shape), (long long)c.embed,
                          nb_shape_str(b, sizeof b, p.ndim, p.shape));
        else if (t->dtype != NB_F32)
            st = nb_error(NB_ERR_FORMAT, "%s '%s': '%s' is %s; GPT-2's parameters are float32 (or F16, BF16)", HF, path,
                          p.name, nb_dtype_name(t->dtype));
        else w->t[i] = nb_tensor_retain(t);
    }
    nb_safetensors_free(f);
    if (st) gpt2_weights_free(w);
    return st;
}

nb_status gpt2_hf_save(const gpt2_weights *w, const char *path)
{
    nb_status st = check_weights(w, path);
    if (st) return st;
    const gpt2_config *c = &w->config;
    const char **names = calloc((size_t)w->n, sizeof *names);
    gpt2_param *p = calloc((size_t)w->n, sizeof *p);
    if (!names || !p) {
        free(names);
        free(p);
        return nb_error(NB_ERR_NOMEM, "gpt2: out of memory");
    }
    for (int i = 0; i < w->n; i++) {
        p[i] = gpt2_param_at(c, i);
        names[i] = p[i].name;
    }
    /* Hugging Face's config names, so that the file tells its own shape. */
    char v[6][24];
    const int64_t vals[6] = {c->heads, c->layers, c->embed, c->block, c->vocab, c->padded_vocab};
    for (int i = 0; i < 6; i++) snprintf(v[i], sizeof v[i], "%lld", (long long)vals[i]);
    const char *keys[] = {"format", "n_head", "n_layer", "n_embd", "n_positions", "vocab_size", "padded_vocab_size"};
    const char *values[] = {"pt", v[0], v[1], v[2], v[3], v[4], v[5]};
    nb_meta meta = {7, keys, values};
    st = nb_safetensors_save(path, w->n, names, w->t, &meta);
    free(names);
    free(p);
    return st;
}

/* ---- llm.c's token files --------------------------------------------------------------- */

static const char *const TOKENS = "llm.c token file";

nb_status gpt2_tokens_load(gpt2_tokens *t, const char *path)
{
    memset(t, 0, sizeof *t);
    FILE *f;
    int64_t size;
    int32_t h[HEADER_INTS] = {0};
    nb_status st = open_checked(&f, &size, h, path, TOKENS, TOKENS_MAGIC, TOKENS_VERSION);
    if (st) return st;
    if (h[2] < 1)
        st = nb_error(NB_ERR_FORMAT, "%s '%s': header count %d; it must be at least 1", TOKENS, path, (int)h[2]);
    char header[64];
    snprintf(header, sizeof header, "%d tokens", (int)h[2]);
    if (!st) st = size_matches(size, HEADER_BYTES + 2 * (int64_t)h[2], path, TOKENS, header);
    if (!st && !(t->ids = malloc((size_t)h[2] * 2))) st = nb_error(NB_ERR_NOMEM, "gpt2: out of memory");
    if (!st) st = read_exact(f, t->ids, (size_t)h[2] * 2, path, TOKENS);
    fclose(f);
    if (st) gpt2_tokens_free(t);
    else t->n = h[2];
    return st;
}

void gpt2_tokens_free(gpt2_tokens *t)
{
    free(t->ids);
    memset(t, 0, sizeof *t);
}
