/* .npz archives: .npy arrays as the members of a zip archive (zip.h), and
 * the state of a program in one (through checkpoint_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../core/input_file.h"
#include "checkpoint_internal.h"
#include "json.h"
#include "nabla/device.h"
#include "npy_internal.h"
#include "zip.h"

struct nb_npz {
    int n;
    char **names; /* without ".npy", in central-directory order */
    nb_tensor **tensors;
    int *by_name; /* indices sorted by name, for lookups */
};

static nb_status oom(void) { return nb_error(NB_ERR_NOMEM, "out of memory"); }

/* ---- saving ------------------------------------------------------------------ */

static int by_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static nb_status check_args(const char *path, int n, const char *const *names, nb_tensor *const *tensors)
{
    if (!path || !*path) return nb_error(NB_ERR_ARG, "npz save: empty file path");
    if (n < 0 || (n > 0 && (!names || !tensors)))
        return nb_error(NB_ERR_ARG, "npz save '%s': %d arrays but no names or tensors", path, n);
    for (int i = 0; i < n; i++) {
        if (!names[i] || !*names[i]) return nb_error(NB_ERR_ARG, "npz save '%s': name %d is NULL or empty", path, i);
        if (!json_utf8_valid(names[i], strlen(names[i])))
            return nb_error(NB_ERR_ARG, "npz save '%s': name %d is not valid UTF-8", path, i);
        if (strlen(names[i]) > 0xffff - 4)
            return nb_error(NB_ERR_ARG, "npz save '%s': name %d is longer than a zip member name can be", path, i);
        if (!tensors[i] || !nb_dtype_valid(tensors[i]->dtype))
            return nb_error(NB_ERR_ARG, "npz save '%s': tensor '%s' is NULL or has no valid dtype", path, names[i]);
    }
    const char **sorted = nb_malloc(((size_t)n + 1) * sizeof *sorted);
    if (!sorted) return nb_error(NB_ERR_NOMEM, "npz save '%s': out of memory", path);
    if (n) memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_str);
    nb_status st = NB_OK;
    for (int i = 1; i < n && !st; i++)
        if (!strcmp(sorted[i - 1], sorted[i]))
            st = nb_error(NB_ERR_ARG, "npz save '%s': name '%s' is given twice", path, sorted[i]);
    nb_free(sorted);
    return st;
}

static nb_status crc_write(void *ctx, const void *p, size_t n)
{
    uint32_t *crc = ctx;
    for (const unsigned char *b = p; n;) {
        size_t k = n < (1u << 30) ? n : (1u << 30);
        *crc = (uint32_t)crc32(*crc, b, (uInt)k);
        b += k;
        n -= k;
    }
    return NB_OK;
}

static nb_status zip_write(void *ctx, const void *p, size_t n) { return zip_member_write(ctx, p, n); }

static nb_status write_member(zip_writer *w, const char *name, nb_tensor *t, bool deflate)
{
    nb_tensor *c;
    nb_status st = nb_tensor_contiguous(&c, t);
    if (st) return st;
    char *member = nb_malloc(strlen(name) + 5);
    if (!member) {
        nb_tensor_release(c);
        return oom();
    }
    strcpy(member, name);
    strcat(member, ".npy");
    /* A stored member's CRC goes before its data: one pass to compute it. */
    uint32_t crc = (uint32_t)crc32(0, Z_NULL, 0);
    if (!deflate) npy_write(&(npy_sink){crc_write, &crc}, c);
    st = zip_member_begin(w, member, npy_size(c), deflate, crc);
    if (!st) st = npy_write(&(npy_sink){zip_write, w}, c);
    if (!st) st = zip_member_end(w);
    nb_free(member);
    nb_tensor_release(c);
    return st;
}

nb_status nb_npz_save(const char *path, int n, const char *const *names, nb_tensor *const *tensors, unsigned flags)
{
    nb_status st = check_args(path, n, names, tensors);
    if (st) return st;
    nb_atomic_file *af;
    if ((st = nb_atomic_open(&af, path))) return st;
    zip_writer *w = NULL;
    st = zip_writer_new(&w, af);
    for (int i = 0; i < n && !st; i++) {
        st = write_member(w, names[i], tensors[i], flags & NB_NPZ_COMPRESSED);
        if (st) st = nb_error_context(st, "npz save '%s': array '%s'", path, names[i]);
    }
    if (!st) st = zip_writer_finish(w);
    zip_writer_free(w);
    if (!st) return nb_atomic_commit(af);
    nb_atomic_abort(af);
    return st;
}

/* ---- loading ------------------------------------------------------------------ */

void nb_npz_free(nb_npz *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        if (f->names) nb_free(f->names[i]);
        if (f->tensors) nb_tensor_release(f->tensors[i]);
    }
    nb_free(f->names);
    nb_free(f->tensors);
    nb_free(f->by_name);
    nb_free(f);
}

static nb_status member_read(void *ctx, void *buf, size_t n) { return zip_member_read(ctx, buf, n); }

static nb_status load_member(const zip_reader *z, int i, nb_tensor **out)
{
    zip_member *m = nb_malloc(sizeof *m);
    if (!m) return oom();
    nb_status st = zip_member_open(m, z, i);
    if (!st) st = npy_read(&(npy_source){member_read, m, z->e[i].usize}, out);
    if (!st) st = zip_member_finish(m);
    zip_member_close(m);
    nb_free(m);
    if (st && *out) {
        nb_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

typedef struct sort_item {
    const char *name;
    int idx;
} sort_item;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const sort_item *)a)->name, ((const sort_item *)b)->name);
}

/* f->by_name: the indices sorted by name (qsort has no context argument,
 * so the names travel along). */
static nb_status index_names(nb_npz *f)
{
    sort_item *items = nb_malloc(((size_t)f->n + 1) * sizeof *items);
    if (!items) return oom();
    for (int i = 0; i < f->n; i++) items[i] = (sort_item){f->names[i], i};
    qsort(items, (size_t)f->n, sizeof *items, by_name);
    for (int i = 0; i < f->n; i++) f->by_name[i] = items[i].idx;
    nb_free(items);
    return NB_OK;
}

static nb_status load_from(FILE *fp, uint64_t size, nb_npz *f)
{
    zip_reader z;
    nb_status st = zip_open(&z, fp, size);
    if (!st) {
        f->names = nb_calloc((size_t)z.n + 1, sizeof *f->names);
        f->tensors = nb_calloc((size_t)z.n + 1, sizeof *f->tensors);
        f->by_name = nb_calloc((size_t)z.n + 1, sizeof *f->by_name);
        if (!f->names || !f->tensors || !f->by_name) st = oom();
    }
    for (int i = 0; i < z.n && !st; i++) {
        const char *name = z.e[i].name;
        size_t len = strlen(name);
        if (len < 4 || strcmp(name + len - 4, ".npy")) {
            st = nb_error(NB_ERR_UNSUPPORTED, "member '%.100s' is not a .npy array (its name does not end in .npy)",
                          name);
            break;
        }
        if (!(f->names[i] = nb_malloc(len - 3))) {
            st = oom();
            break;
        }
        memcpy(f->names[i], name, len - 4);
        f->names[i][len - 4] = '\0';
        f->n++;
        st = load_member(&z, i, &f->tensors[i]);
        if (st) st = nb_error_context(st, "member '%.100s'", name);
    }
    zip_close(&z);
    if (st) return st;
    return index_names(f); /* unique: zip_open refused repeated member names */
}

static nb_status load_any(FILE *fp, uint64_t size, void *f) { return load_from(fp, size, f); }
static void free_any(void *f) { nb_npz_free(f); }

nb_status nb_npz_load(nb_npz **out, const char *path)
{
    if (!out) return nb_error(NB_ERR_ARG, "npz load: out is NULL");
    void *f;
    nb_status st = nb_input_file_load("npz", path, sizeof **out, load_any, free_any, &f);
    *out = f;
    return st;
}

int nb_npz_count(const nb_npz *f) { return f ? f->n : 0; }

const char *nb_npz_name(const nb_npz *f, int i) { return f && i >= 0 && i < f->n ? f->names[i] : NULL; }

nb_tensor *nb_npz_tensor(const nb_npz *f, int i) { return f && i >= 0 && i < f->n ? f->tensors[i] : NULL; }

nb_tensor *nb_npz_find(const nb_npz *f, const char *name)
{
    if (!f || !name) return NULL;
    for (int lo = 0, hi = f->n - 1; lo <= hi;) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, f->names[f->by_name[mid]]);
        if (!c) return f->tensors[f->by_name[mid]];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

/* ---- the state of a program ------------------------------------------------------ */

nb_status nb_npz_save_state(const char *path, const nb_program *program, nb_scope *scope, unsigned flags)
{
    if (!path || !program || !scope) return nb_error(NB_ERR_ARG, "npz save: NULL path, program or scope");
    int n;
    const char **names;
    nb_tensor **tensors;
    nb_status st = nb_ckpt_collect("npz", path, program, scope, &n, &names, &tensors);
    if (st) return st;
    st = nb_npz_save(path, n, names, tensors, flags);
    nb_free(names);
    nb_free(tensors);
    return st;
}

static nb_tensor *find_in_npz(const void *file, const char *name) { return nb_npz_find(file, name); }

nb_status nb_npz_load_state(const char *path, const nb_program *program, nb_scope *scope)
{
    if (!path || !program || !scope) return nb_error(NB_ERR_ARG, "npz load: NULL path, program or scope");
    nb_npz *f;
    nb_status st = nb_npz_load(&f, path);
    if (st) return st;
    st = nb_ckpt_restore("npz", path, program, scope, find_in_npz, f);
    nb_npz_free(f);
    return st;
}
