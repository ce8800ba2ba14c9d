/* nabla npy FILE [-o OUT [--compress]]: prints the arrays of a NumPy .npy or
 * .npz file (name, dtype, shape, every value), and writes them again with
 * -o, which is how tests/test_npy_numpy.sh checks nabla against NumPy both
 * ways. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "cli.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* One line of header and one of values, exactly (floats to their shortest
 * round-trip digits: %.9g for float32, %.17g for float64). */
static void print_array(const char *name, const nb_tensor *t)
{
    char s[NB_SHAPE_STR_MAX];
    printf("%s %s %s\n", name, nb_dtype_name(t->dtype), nb_shape_str(s, sizeof s, t->ndim, t->shape));
    int64_t n = nb_tensor_numel(t);
    const void *p = nb_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        if (i) putchar(' ');
        double v = t->dtype == NB_F32 ? ((const float *)p)[i] : t->dtype == NB_F64 ? ((const double *)p)[i] : 0;
        switch (t->dtype) {
        case NB_F32:
        case NB_F64:
            if (isnan(v)) printf("nan");
            else printf(t->dtype == NB_F32 ? "%.9g" : "%.17g", v);
            break;
        case NB_I32: printf("%d", (int)((const int32_t *)p)[i]); break;
        case NB_I64: printf("%lld", (long long)((const int64_t *)p)[i]); break;
        default: printf("%u", (unsigned)((const unsigned char *)p)[i]); break;
        }
    }
    putchar('\n');
}

int cmd_npy(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    bool compress = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: nabla npy FILE [-o OUT [--compress]]\n\n"
                   "Prints the arrays of a NumPy .npy or .npz file: for each, a line with its\n"
                   "name ('-' for a .npy file), dtype and shape, then a line with every value in\n"
                   "C order. With -o, writes them to OUT: a .npy file from a .npy file, a .npz\n"
                   "archive from a .npz archive (deflated with --compress).\n");
            return 0;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--compress")) {
            compress = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "nabla npy: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "nabla npy: one file at a time ('%s' and '%s' given)\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: nabla npy FILE [-o OUT [--compress]] (see --help)\n");
        return 2;
    }
    nb_status st;
    if (ends_with(path, ".npz")) {
        nb_npz *f;
        st = nb_npz_load(&f, path);
        if (!st) {
            int n = nb_npz_count(f);
            for (int i = 0; i < n; i++) print_array(nb_npz_name(f, i), nb_npz_tensor(f, i));
            const char **names = out ? nb_malloc(((size_t)n + 1) * sizeof *names) : NULL;
            nb_tensor **tensors = out ? nb_malloc(((size_t)n + 1) * sizeof *tensors) : NULL;
            if (out && (!names || !tensors)) st = nb_error(NB_ERR_NOMEM, "out of memory");
            for (int i = 0; i < n && !st && out; i++) {
                names[i] = nb_npz_name(f, i);
                tensors[i] = nb_npz_tensor(f, i);
            }
            if (!st && out) st = nb_npz_save(out, n, names, tensors, compress ? NB_NPZ_COMPRESSED : 0);
            nb_free(names);
            nb_free(tensors);
            nb_npz_free(f);
        }
    } else {
        nb_tensor *t;
        st = nb_npy_load(&t, path);
        if (!st) {
            print_array("-", t);
            if (out) st = nb_npy_save(out, t);
            nb_tensor_release(t);
        }
    }
    if (!st && (fflush(stdout) || ferror(stdout))) st = nb_error(NB_ERR_IO, "cannot write to standard output");
    if (st) {
        fprintf(stderr, "nabla npy: %s\n", nb_last_error());
        return 1;
    }
    return 0;
}
