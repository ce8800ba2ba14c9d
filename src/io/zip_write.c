/* Writing zip archives (zip.h). Every member is dated 1980-01-01 00:00 (the
 * earliest date zip can say), so that the same members give the same bytes. */
#include <string.h>
#include "nabla/device.h"
#include "zip.h"

#define DOS_DATE ((0 << 9) | (1 << 5) | 1) /* 1980-01-01 */
#define NEED_ZIP64(v) ((v) >= 0xffffffffu)

typedef struct wentry {
    char *name;
    bool deflate, zip64;
    uint32_t crc;
    uint64_t csize, usize, offset;
} wentry;

struct zip_writer {
    nb_atomic_file *af;
    uint64_t pos;
    int n, cap;
    wentry *e;
    /* The member being written. */
    bool open, deflating;
    z_stream zs;
    uint64_t in, out;
    uint32_t crc;
    unsigned char buf[16384];
};

static nb_status oom(void) { return nb_error(NB_ERR_NOMEM, "out of memory"); }

static unsigned char *put16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}
static unsigned char *put32(unsigned char *p, uint32_t v) { return put16(put16(p, v & 0xffff), v >> 16); }
static unsigned char *put64(unsigned char *p, uint64_t v) { return put32(put32(p, (uint32_t)v), (uint32_t)(v >> 32)); }
static uint32_t cap32(uint64_t v) { return NEED_ZIP64(v) ? 0xffffffffu : (uint32_t)v; }

static nb_status out(zip_writer *w, const void *p, size_t n)
{
    w->pos += n;
    return nb_atomic_write(w->af, p, n);
}

nb_status zip_writer_new(zip_writer **res, nb_atomic_file *af)
{
    zip_writer *w = nb_calloc(1, sizeof *w);
    if (!w) return oom();
    w->af = af;
    *res = w;
    return NB_OK;
}

void zip_writer_free(zip_writer *w)
{
    if (!w) return;
    if (w->deflating) deflateEnd(&w->zs);
    for (int i = 0; i < w->n; i++) nb_free(w->e[i].name);
    nb_free(w->e);
    nb_free(w);
}

/* Bit 11: the name is UTF-8 (set only when it is not plain ASCII, as
 * Python's zipfile does). */
static uint32_t name_flag(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p >= 0x80) return 1u << 11;
    return 0;
}

nb_status zip_member_begin(zip_writer *w, const char *name, uint64_t usize, bool deflate, uint32_t crc)
{
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 8;
        wentry *e = nb_realloc(w->e, (size_t)cap * sizeof *e);
        if (!e) return oom();
        w->e = e;
        w->cap = cap;
    }
    size_t nlen = strlen(name);
    wentry *e = &w->e[w->n];
    *e = (wentry){.name = nb_strdup(name), .deflate = deflate, .crc = crc, .usize = usize, .offset = w->pos};
    if (!e->name) return oom();
    w->n++;
    /* A deflated member may come out a little larger than it went in:
     * zip64 where it might not fit, as Python's zipfile decides. */
    e->zip64 = deflate ? NEED_ZIP64(usize + usize / 16 + 1024) : NEED_ZIP64(usize);
    if (!deflate) e->csize = usize;
    if (deflate) {
        memset(&w->zs, 0, sizeof w->zs);
        zip_zlib_alloc(&w->zs);
        int rc = deflateInit2(&w->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        if (rc != Z_OK) return rc == Z_MEM_ERROR ? oom() : nb_error(NB_ERR_IO, "zlib's deflate would not start");
        w->deflating = true;
    }
    w->open = true;
    w->in = w->out = 0;
    w->crc = (uint32_t)crc32(0, Z_NULL, 0);
    /* The local header; a deflated member's CRC and sizes follow its data
     * (flag bit 3), as they are known only then. */
    unsigned char h[30 + 20], *p = h;
    p = put32(p, 0x04034b50);
    p = put16(p, e->zip64 ? 45 : 20);
    p = put16(p, (deflate ? 1u << 3 : 0) | name_flag(name));
    p = put16(p, deflate ? 8 : 0);
    p = put16(p, 0);
    p = put16(p, DOS_DATE);
    p = put32(p, deflate ? 0 : crc);
    p = put32(p, e->zip64 ? 0xffffffffu : deflate ? 0 : (uint32_t)usize);
    p = put32(p, e->zip64 ? 0xffffffffu : deflate ? 0 : (uint32_t)usize);
    p = put16(p, (uint32_t)nlen);
    p = put16(p, e->zip64 ? 20 : 0);
    nb_status st = out(w, h, 30);
    if (!st) st = out(w, name, nlen);
    if (!st && e->zip64) {
        p = put16(put16(h, 1), 16);
        p = put64(put64(p, deflate ? 0 : usize), deflate ? 0 : usize);
        st = out(w, h, 20);
    }
    return st;
}

/* Runs deflate over what zs holds, writing what comes out. */
static nb_status deflate_run(zip_writer *w, int flush)
{
    for (;;) {
        w->zs.next_out = w->buf;
        w->zs.avail_out = sizeof w->buf;
        int rc = deflate(&w->zs, flush);
        if (rc == Z_STREAM_ERROR) return nb_error(NB_ERR_IO, "zlib's deflate failed");
        size_t k = sizeof w->buf - w->zs.avail_out;
        w->out += k;
        nb_status st = k ? out(w, w->buf, k) : NB_OK;
        if (st) return st;
        if (flush == Z_FINISH ? rc == Z_STREAM_END : w->zs.avail_out != 0) return NB_OK;
    }
}

nb_status zip_member_write(zip_writer *w, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        size_t k = n < (1u << 30) ? n : (1u << 30);
        w->crc = (uint32_t)crc32(w->crc, b, (uInt)k);
        w->in += k;
        nb_status st;
        if (w->deflating) {
            w->zs.next_in = (unsigned char *)b;
            w->zs.avail_in = (uInt)k;
            st = deflate_run(w, Z_NO_FLUSH);
        } else {
            st = out(w, b, k);
        }
        if (st) return st;
        b += k;
        n -= k;
    }
    return NB_OK;
}

nb_status zip_member_end(zip_writer *w)
{
    wentry *e = &w->e[w->n - 1];
    w->open = false;
    if (w->in != e->usize || (!e->deflate && w->crc != e->crc))
        return nb_error(NB_ERR_STATE, "member '%.100s' changed while being written", e->name);
    if (!e->deflate) return NB_OK;
    nb_status st = deflate_run(w, Z_FINISH);
    deflateEnd(&w->zs);
    w->deflating = false;
    if (st) return st;
    e->crc = w->crc;
    e->csize = w->out;
    if (!e->zip64 && NEED_ZIP64(e->csize))
        return nb_error(NB_ERR_STATE, "member '%.100s' deflated to more than 4 GiB unexpectedly", e->name);
    unsigned char d[24], *p = put32(put32(d, 0x08074b50), e->crc);
    p = e->zip64 ? put64(put64(p, e->csize), e->usize) : put32(put32(p, (uint32_t)e->csize), (uint32_t)e->usize);
    return out(w, d, (size_t)(p - d));
}

static nb_status central_entry(zip_writer *w, const wentry *e)
{
    unsigned char h[46], x[4 + 24], *p = h, *q = x + 4;
    if (NEED_ZIP64(e->usize)) q = put64(q, e->usize);
    if (NEED_ZIP64(e->csize)) q = put64(q, e->csize);
    if (NEED_ZIP64(e->offset)) q = put64(q, e->offset);
    size_t xlen = q == x + 4 ? 0 : (size_t)(q - x);
    put16(put16(x, 1), (uint32_t)(xlen ? xlen - 4 : 0));
    size_t nlen = strlen(e->name);
    p = put32(p, 0x02014b50);
    p = put16(p, 3u << 8 | (e->zip64 ? 45 : 20)); /* made by: Unix */
    p = put16(p, e->zip64 ? 45 : 20);
    p = put16(p, (e->deflate ? 1u << 3 : 0) | name_flag(e->name));
    p = put16(p, e->deflate ? 8 : 0);
    p = put16(p, 0);
    p = put16(p, DOS_DATE);
    p = put32(p, e->crc);
    p = put32(p, cap32(e->csize));
    p = put32(p, cap32(e->usize));
    p = put16(p, (uint32_t)nlen);
    p = put16(p, (uint32_t)xlen);
    p = put16(p, 0);              /* comment */
    p = put16(p, 0);              /* disk */
    p = put16(p, 0);              /* internal attributes */
    p = put32(p, 0100644u << 16); /* a regular file, rw-r--r-- */
    put32(p, cap32(e->offset));
    nb_status st = out(w, h, sizeof h);
    if (!st) st = out(w, e->name, nlen);
    if (!st && xlen) st = out(w, x, xlen);
    return st;
}

nb_status zip_writer_finish(zip_writer *w)
{
    uint64_t cd_offset = w->pos;
    nb_status st = NB_OK;
    for (int i = 0; i < w->n && !st; i++) st = central_entry(w, &w->e[i]);
    if (st) return st;
    uint64_t cd_size = w->pos - cd_offset, count = (uint64_t)w->n;
    unsigned char b[56 + 20 + 22], *p = b;
    if (count >= 0xffff || NEED_ZIP64(cd_offset) || NEED_ZIP64(cd_size)) {
        uint64_t at = w->pos;
        p = put32(p, 0x06064b50);
        p = put64(p, 44); /* the size of the rest of the record */
        p = put16(p, 3u << 8 | 45);
        p = put16(p, 45);
        p = put32(p, 0);
        p = put32(p, 0);
        p = put64(put64(p, count), count);
        p = put64(put64(p, cd_size), cd_offset);
        p = put32(p, 0x07064b50); /* the locator */
        p = put32(p, 0);
        p = put64(p, at);
        p = put32(p, 1);
    }
    p = put32(p, 0x06054b50);
    p = put32(p, 0); /* disks */
    p = put16(put16(p, count >= 0xffff ? 0xffff : (uint32_t)count), count >= 0xffff ? 0xffff : (uint32_t)count);
    p = put32(put32(p, cap32(cd_size)), cap32(cd_offset));
    p = put16(p, 0); /* comment */
    return out(w, b, (size_t)(p - b));
}
