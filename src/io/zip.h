/* Zip archives, as much of them as .npz files need (PKWARE's APPNOTE.TXT):
 * members stored or deflated, zip64 sizes and offsets, CRC-32 checked.
 *
 * Reading (zip_read.c) goes through the central directory, checks every
 * number against the file before using it (the members must lie in the
 * file, before the central directory, without overlapping, each behind a
 * local header that names it), and hands out a member's bytes as a stream
 * that inflates on the way when the member is deflated, never produces more
 * than the member declares, and checks its CRC-32 at the end.
 *
 * Writing (zip_write.c) appends members to an atomic file: a stored member
 * is written with its CRC-32 known in advance (the caller computes it); a
 * deflated one is streamed and followed by a data descriptor. Zip64 fields
 * are written only where a size or offset needs them.
 *
 * Error texts name the problem, and the member; the caller adds the file. */
#ifndef NABLA_IO_ZIP_H
#define NABLA_IO_ZIP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>
#include "atomic_file.h"
#include "nabla/status.h"

/* ---- reading ---- */

typedef struct zip_entry {
    char *name; /* NUL-free, as stored */
    int method; /* 0 stored, 8 deflated */
    uint32_t crc;
    uint64_t csize, usize;
    uint64_t offset; /* of the local header */
    uint64_t data;   /* of the member's bytes */
} zip_entry;

typedef struct zip_reader {
    FILE *fp;
    uint64_t size;
    int n;
    zip_entry *e; /* in central-directory order */
} zip_reader;

/* Reads and checks the directory of the archive open as fp (its size in
 * bytes: `size`). zip_close frees what it made (and not fp), also after a
 * failure. */
nb_status zip_open(zip_reader *z, FILE *fp, uint64_t size);
void zip_close(zip_reader *z);

/* A member's bytes. */
typedef struct zip_member {
    const zip_reader *z;
    const zip_entry *e;
    uint64_t in_left, out_done;
    uint32_t crc;
    bool inflating, ended;
    z_stream zs;
    unsigned char in[16384];
} zip_member;

nb_status zip_member_open(zip_member *m, const zip_reader *z, int i);
/* Exactly n more bytes of the member, or an error. */
nb_status zip_member_read(zip_member *m, void *buf, size_t n);
/* After the last read: the member ends here (no more bytes, a deflate
 * stream that ends, all its compressed bytes used) and its CRC-32 matches. */
nb_status zip_member_finish(zip_member *m);
void zip_member_close(zip_member *m);

/* ---- writing ---- */

typedef struct zip_writer zip_writer;

nb_status zip_writer_new(zip_writer **out, nb_atomic_file *af);
/* Starts a member of `usize` bytes; a stored one (deflate false) needs its
 * CRC-32 now. */
nb_status zip_member_begin(zip_writer *w, const char *name, uint64_t usize, bool deflate, uint32_t crc);
nb_status zip_member_write(zip_writer *w, const void *p, size_t n);
nb_status zip_member_end(zip_writer *w);
/* Writes the central directory and the end records. */
nb_status zip_writer_finish(zip_writer *w);
/* Frees w (not the atomic file); NULL is fine. */
void zip_writer_free(zip_writer *w);

/* zlib's allocations through nb_malloc, so that a failure is NB_ERR_NOMEM
 * like any other. */
void zip_zlib_alloc(z_stream *zs);

#endif
