/* Helpers for the data tests: a temporary folder, and small files written
 * plain or through zlib's gzip writer. */
#ifndef NABLA_DATA_TEST_UTIL_H
#define NABLA_DATA_TEST_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "nabla/reader.h"

/* A new folder under $TMPDIR (or /tmp); exits the test program on failure. */
static inline void make_temp_dir(char *out, size_t size)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, size, "%s/nabla_data_XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        exit(2);
    }
}

static inline void remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb)) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            char child[4096];
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) < (int)sizeof child) remove_tree(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Writes len bytes to path, gzip-compressed when gz is set. */
static inline void write_bytes(const char *path, int gz, const void *data, size_t len)
{
    if (gz) {
        gzFile g = gzopen(path, "wb");
        if (!g || (len && gzwrite(g, data, (unsigned)len) != (int)len) || gzclose(g) != Z_OK) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(2);
        }
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* Reads a whole file into a malloc'ed buffer (*len bytes). */
static inline unsigned char *read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    *len = b ? fread(b, 1, (size_t)n, f) : 0;
    fclose(f);
    return b;
}

/* An IDX header (magic type/ndims, big-endian sizes) followed by `payload`
 * bytes of data and `extra` more bytes, written plain or gzipped. */
static inline void write_idx(const char *path, int gz, uint8_t type, int ndims, const uint32_t *dims,
                             const void *payload, size_t payload_len, size_t extra)
{
    size_t header = 4 + 4 * (size_t)(ndims > 0 ? ndims : 0);
    size_t len = header + payload_len + extra;
    uint8_t *b = calloc(len ? len : 1, 1);
    b[2] = type;
    b[3] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++) {
        b[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
        b[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
        b[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
        b[7 + 4 * i] = (uint8_t)dims[i];
    }
    if (payload_len) memcpy(b + header, payload, payload_len);
    for (size_t i = 0; i < extra; i++) b[header + payload_len + i] = (uint8_t)(0xA0 + i);
    write_bytes(path, gz, b, len);
    free(b);
}

/* A reader of n numbered records, to follow them through decorators:
 * x float64 [n, 2] with row i = (i, 1000 + i), y int64 [n] with y[i] = i.
 * Exits the test program on failure. */
static inline nb_reader *numbered_source(int64_t n)
{
    nb_tensor *x, *y;
    if (nb_tensor_new(&x, NB_F64, 2, (const int64_t[]){n, 2}) || nb_tensor_new(&y, NB_I64, 1, (const int64_t[]){n}))
        exit(2);
    double *xd = nb_tensor_data(x);
    int64_t *yd = nb_tensor_data(y);
    for (int64_t i = 0; i < n; i++) {
        xd[2 * i] = (double)i;
        xd[2 * i + 1] = 1000.0 + (double)i;
        yd[i] = i;
    }
    nb_reader *r = NULL;
    nb_status st = nb_reader_from_tensors(&r, 2, (nb_tensor *[]){x, y});
    nb_tensor_release(x);
    nb_tensor_release(y);
    if (st) {
        fprintf(stderr, "source: %s\n", nb_last_error());
        exit(2);
    }
    return r;
}

#endif
