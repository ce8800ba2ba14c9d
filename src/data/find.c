/* Finding a data set's folder: the places a user is likely to have put it,
 * in a fixed order, and an error listing all of them when none has it. A
 * folder holds the data set when it has one of the data set's marker files
 * (MNIST's training images, a text corpus's file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "data_internal.h"

#define PATH_CAP 4096
#define LOOKED_CAP 1400 /* leaves room in the error text for the advice after the list */

#define MAX_MARKERS 2

typedef struct {
    const char *dataset;
    const char *markers[MAX_MARKERS]; /* files that qualify a folder (NULL ends the list) */
    char *out;
    size_t size;
    bool found;
    nb_status st;
    char looked[LOOKED_CAP];
    size_t looked_len;
} search;

static bool has_file(const char *dir, const char *name)
{
    char p[PATH_CAP];
    int n = snprintf(p, sizeof p, "%s/%s", dir, name);
    return n > 0 && (size_t)n < sizeof p && access(p, R_OK) == 0;
}

static bool qualifies(const search *s, const char *dir)
{
    for (int i = 0; i < MAX_MARKERS && s->markers[i]; i++)
        if (has_file(dir, s->markers[i])) return true;
    return false;
}

static void note_looked(search *s, const char *dir)
{
    if (s->looked_len >= sizeof s->looked - 1) return;
    int n =
        snprintf(s->looked + s->looked_len, sizeof s->looked - s->looked_len, "%s%s", s->looked_len ? ", " : "", dir);
    if (n < 0 || (size_t)n >= sizeof s->looked - s->looked_len) {
        strcpy(s->looked + sizeof s->looked - 5, "...");
        s->looked_len = sizeof s->looked - 1;
        return;
    }
    s->looked_len += (size_t)n;
}

/* Tries base/rest (or base alone when rest is NULL). */
static void try_dir(search *s, const char *base, const char *rest)
{
    if (s->found || s->st) return;
    char dir[PATH_CAP];
    size_t blen = strlen(base);
    while (rest && blen > 1 && base[blen - 1] == '/') blen--; /* no "//" when joining */
    int n = rest ? snprintf(dir, sizeof dir, "%.*s/%s", (int)blen, base, rest) : snprintf(dir, sizeof dir, "%s", base);
    if (n < 0 || (size_t)n >= sizeof dir) return;
    note_looked(s, dir);
    if (!qualifies(s, dir)) return;
    if ((size_t)n >= s->size) {
        s->st = nb_error(NB_ERR_ARG, "data find: the %s data set is in %s, but out_dir has only %zu bytes", s->dataset,
                         dir, s->size);
        return;
    }
    memcpy(s->out, dir, (size_t)n + 1);
    s->found = true;
}

static bool valid_name(const char *name)
{
    if (!name[0] || !strcmp(name, ".") || !strcmp(name, "..")) return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.'))
            return false;
    return true;
}

static const char *advice(const char *dataset)
{
    if (!strcmp(dataset, "tinyshakespeare"))
        return "put input.txt of karpathy/char-rnn (data/tinyshakespeare/input.txt) into DIR/tinyshakespeare and "
               "pass --data DIR, or pass --data FILE";
    if (!strcmp(dataset, "mnist"))
        return "run scripts/get-mnist.sh DIR (downloads and checks the files into DIR/mnist) or pass --data DIR";
    if (!strcmp(dataset, "fashion-mnist"))
        return "run scripts/get-mnist.sh DIR fashion-mnist (downloads and checks the files into DIR/fashion-mnist) "
               "or pass --data DIR";
    return "put its files in one of these folders or pass --data DIR";
}

/* Looks for a folder of `dataset` holding one of s->markers in every place,
 * in order; *s says what was found (and where it looked). */
static nb_status find_folder(search *s, const char *cli_dir, const char *exe_path)
{
    if (!s->dataset || !s->out || s->size == 0) return nb_error(NB_ERR_ARG, "data find: dataset or out_dir is NULL");
    s->out[0] = '\0';
    if (!valid_name(s->dataset))
        return nb_error(NB_ERR_ARG, "data find: \"%s\" is not a data set name (a folder name such as mnist)",
                        s->dataset);
    const char *dataset = s->dataset;
    if (cli_dir && cli_dir[0]) {
        try_dir(s, cli_dir, NULL);
        try_dir(s, cli_dir, dataset);
    }
    const char *env = getenv("NABLA_DATA");
    if (env && env[0]) {
        try_dir(s, env, NULL);
        try_dir(s, env, dataset);
    }
    try_dir(s, "./data", dataset);
    try_dir(s, "../data", dataset);
    if (exe_path && exe_path[0]) {
        char base[PATH_CAP], rel[PATH_CAP];
        const char *slash = strrchr(exe_path, '/');
        if (slash && (size_t)(slash - exe_path) < sizeof base - 16) {
            size_t len = slash == exe_path ? 1 : (size_t)(slash - exe_path);
            memcpy(base, exe_path, len);
            base[len] = '\0';
            snprintf(rel, sizeof rel, "data/%s", dataset);
            for (int up = 0; up <= 3; up++) { /* the program's folder and the three above it */
                try_dir(s, base, rel);
                if (strlen(base) + 4 < sizeof base) strcat(base, "/..");
            }
        }
    }
    if (s->st) return s->st;
    if (s->found) return NB_OK;
    char markers[256];
    snprintf(markers, sizeof markers, "%s%s%s", s->markers[0], s->markers[1] ? " or " : "",
             s->markers[1] ? s->markers[1] : "");
    return nb_error(NB_ERR_NOT_FOUND,
                    "the %s data set was not found. Looked in: %s (a folder holds it when it has %s). To get it, %s",
                    dataset, s->looked, markers, advice(dataset));
}

nb_status nb_data_find_from(const char *cli_dir, const char *dataset, const char *exe_path, char *out_dir, size_t size)
{
    search s = {.dataset = dataset,
                .markers = {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"},
                .out = out_dir,
                .size = size};
    return find_folder(&s, cli_dir, exe_path);
}

static bool is_regular_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, R_OK) == 0;
}

nb_status nb_data_find_file_from(const char *cli, const char *dataset, const char *file, const char *exe_path,
                                 char *out_path, size_t size)
{
    if (!file || !file[0] || strchr(file, '/'))
        return nb_error(NB_ERR_ARG, "data find: \"%s\" is not a file name (one without folders, such as input.txt)",
                        file ? file : "(null)");
    if (out_path && size) out_path[0] = '\0';
    if (cli && cli[0] && is_regular_file(cli)) { /* --data FILE */
        if (!out_path || strlen(cli) >= size)
            return nb_error(NB_ERR_ARG, "data find: the path %s does not fit in out_path (%zu bytes)", cli, size);
        memcpy(out_path, cli, strlen(cli) + 1);
        return NB_OK;
    }
    char dir[PATH_CAP];
    search s = {.dataset = dataset, .markers = {file, NULL}, .out = dir, .size = sizeof dir};
    nb_status st = find_folder(&s, cli, exe_path);
    if (st) return st;
    int n = snprintf(out_path, size, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= size) {
        if (size) out_path[0] = '\0';
        return nb_error(NB_ERR_ARG, "data find: the %s data set is in %s, but out_path has only %zu bytes", dataset,
                        dir, size);
    }
    return NB_OK;
}

nb_status nb_data_find(const char *cli_dir, const char *dataset, char *out_dir, size_t size)
{
    char exe[PATH_CAP];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = '\0';
    return nb_data_find_from(cli_dir, dataset, n > 0 ? exe : NULL, out_dir, size);
}

nb_status nb_data_find_file(const char *cli, const char *dataset, const char *file, char *out_path, size_t size)
{
    char exe[PATH_CAP];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = '\0';
    return nb_data_find_file_from(cli, dataset, file, n > 0 ? exe : NULL, out_path, size);
}
