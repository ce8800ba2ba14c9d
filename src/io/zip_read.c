/* Reading zip archives (zip.h): the central directory, checked, and the
 * members' bytes as streams. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/device.h"
#include "zip.h"

#define EOCD_SIZE 22
#define LOCATOR_SIZE 20
#define EOCD64_SIZE 56
#define CENTRAL_SIZE 46
#define LOCAL_SIZE 30
/* Deflate turns at most 258 bytes into 2 bits: no stream inflates more
 * than 1032 times its size (plus a little for the block headers). */
#define MAX_DEFLATE_RATIO 1032

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) { return le16(p) | (uint32_t)le16(p + 2) << 16; }
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static nb_status oom(void) { return nb_error(NB_ERR_NOMEM, "out of memory"); }

static nb_status read_at(const zip_reader *z, uint64_t off, void *buf, size_t n, const char *what)
{
    if (off > z->size || n > z->size - off)
        return nb_error(NB_ERR_FORMAT, "%s at offset %llu (%zu bytes) is past the end of the %llu-byte file", what,
                        (unsigned long long)off, n, (unsigned long long)z->size);
    if (off > (uint64_t)LLONG_MAX || fseeko(z->fp, (off_t)off, SEEK_SET) || (n && fread(buf, 1, n, z->fp) != n))
        return nb_error(NB_ERR_FORMAT, "the file ended while reading %s (did it change while being read?)", what);
    return NB_OK;
}

void zip_close(zip_reader *z)
{
    for (int i = 0; i < z->n; i++) nb_free(z->e[i].name);
    nb_free(z->e);
    z->e = NULL;
    z->n = 0;
}

/* ---- the end records ---------------------------------------------------------- */

typedef struct dir_info {
    uint64_t count, cd_size, cd_offset;
    uint64_t end; /* where the central directory must end: the first end record */
} dir_info;

static nb_status read_zip64_end(const zip_reader *z, uint64_t locator, dir_info *d)
{
    unsigned char b[EOCD64_SIZE];
    nb_status st = read_at(z, locator, b, LOCATOR_SIZE, "the zip64 end locator");
    if (st) return st;
    uint64_t off = le64(b + 8);
    if (le32(b + 4) != 0 || le32(b + 16) > 1)
        return nb_error(NB_ERR_UNSUPPORTED, "the archive spans several disks (not supported)");
    if (off > locator || locator - off < EOCD64_SIZE)
        return nb_error(NB_ERR_FORMAT,
                        "the zip64 end record offset %llu does not leave room for it before the "
                        "locator at %llu",
                        (unsigned long long)off, (unsigned long long)locator);
    if ((st = read_at(z, off, b, EOCD64_SIZE, "the zip64 end record"))) return st;
    if (le32(b) != 0x06064b50) return nb_error(NB_ERR_FORMAT, "the zip64 end record has a wrong signature");
    if (le32(b + 16) != 0 || le32(b + 20) != 0 || le64(b + 24) != le64(b + 32))
        return nb_error(NB_ERR_UNSUPPORTED, "the archive spans several disks (not supported)");
    d->count = le64(b + 32);
    d->cd_size = le64(b + 40);
    d->cd_offset = le64(b + 48);
    d->end = off;
    return NB_OK;
}

static nb_status find_end(const zip_reader *z, dir_info *d)
{
    if (z->size < EOCD_SIZE)
        return nb_error(NB_ERR_FORMAT, "%llu bytes are too short for a zip archive", (unsigned long long)z->size);
    size_t tail = z->size < 0xffff + EOCD_SIZE ? (size_t)z->size : 0xffff + EOCD_SIZE;
    unsigned char *b = nb_malloc(tail);
    if (!b) return oom();
    nb_status st = read_at(z, z->size - tail, b, tail, "the end of central directory record");
    /* The last record whose comment reaches exactly to the end of the file. */
    size_t at = tail;
    for (size_t i = tail - EOCD_SIZE + 1; !st && i-- > 0;)
        if (le32(b + i) == 0x06054b50 && i + EOCD_SIZE + le16(b + i + 20) == tail) {
            at = i;
            break;
        }
    if (!st && at == tail)
        st = nb_error(NB_ERR_FORMAT, "it has no end of central directory record (not a zip archive, or cut short)");
    if (!st) {
        const unsigned char *e = b + at;
        uint64_t pos = z->size - tail + at;
        d->count = le16(e + 10);
        d->cd_size = le32(e + 12);
        d->cd_offset = le32(e + 16);
        d->end = pos;
        bool zip64 = pos >= LOCATOR_SIZE && at >= LOCATOR_SIZE && le32(e - LOCATOR_SIZE) == 0x07064b50;
        if (pos >= LOCATOR_SIZE && at < LOCATOR_SIZE) { /* the locator lies before the buffer */
            unsigned char sig[4];
            st = read_at(z, pos - LOCATOR_SIZE, sig, 4, "the zip64 end locator");
            zip64 = !st && le32(sig) == 0x07064b50;
        }
        if (!st && zip64) st = read_zip64_end(z, pos - LOCATOR_SIZE, d);
        else if (!st && (le16(e + 4) || le16(e + 6) || le16(e + 8) != le16(e + 10)))
            st = nb_error(NB_ERR_UNSUPPORTED, "the archive spans several disks (not supported)");
        else if (!st && (d->count == 0xffff || d->cd_size == 0xffffffff || d->cd_offset == 0xffffffff))
            st = nb_error(NB_ERR_FORMAT, "the end record defers to a zip64 end record that is not there");
    }
    nb_free(b);
    if (st) return st;
    if (d->cd_offset > d->end || d->cd_size != d->end - d->cd_offset)
        return nb_error(NB_ERR_FORMAT,
                        "the central directory (offset %llu, %llu bytes) does not end where the end "
                        "record begins (%llu)",
                        (unsigned long long)d->cd_offset, (unsigned long long)d->cd_size, (unsigned long long)d->end);
    if (d->count > d->cd_size / CENTRAL_SIZE || d->count > INT_MAX / 2)
        return nb_error(NB_ERR_FORMAT,
                        "the end record counts %llu members, more than the %llu-byte central directory "
                        "can hold",
                        (unsigned long long)d->count, (unsigned long long)d->cd_size);
    return NB_OK;
}

/* ---- the central directory ------------------------------------------------------ */

/* The zip64 extra field (id 1) supplies, in this order, each of usize,
 * csize, offset and disk whose 32-bit (16-bit) field is all ones. */
static nb_status read_extra(const unsigned char *x, size_t n, zip_entry *e, uint32_t *disk)
{
    bool need_u = e->usize == 0xffffffff, need_c = e->csize == 0xffffffff, need_o = e->offset == 0xffffffff,
         need_d = *disk == 0xffff;
    for (size_t i = 0; i < n;) {
        if (n - i < 4) return nb_error(NB_ERR_FORMAT, "member '%.100s' has a cut-short extra field", e->name);
        uint32_t id = le16(x + i), len = le16(x + i + 2);
        if (len > n - i - 4) return nb_error(NB_ERR_FORMAT, "member '%.100s' has an extra field past its end", e->name);
        const unsigned char *p = x + i + 4;
        if (id == 1) {
            size_t k = 0;
            uint64_t *fields[3] = {need_u ? &e->usize : NULL, need_c ? &e->csize : NULL, need_o ? &e->offset : NULL};
            for (int f = 0; f < 3; f++) {
                if (!fields[f]) continue;
                if (k + 8 > len)
                    return nb_error(NB_ERR_FORMAT,
                                    "member '%.100s' has a zip64 extra field too short "
                                    "for the sizes it stands for",
                                    e->name);
                *fields[f] = le64(p + k);
                k += 8;
            }
            if (need_d) {
                if (k + 4 > len)
                    return nb_error(NB_ERR_FORMAT,
                                    "member '%.100s' has a zip64 extra field too short "
                                    "for the sizes it stands for",
                                    e->name);
                *disk = le32(p + k);
            }
            need_u = need_c = need_o = need_d = false;
        }
        i += 4 + len;
    }
    if (need_u || need_c || need_o)
        return nb_error(NB_ERR_FORMAT, "member '%.100s' defers its sizes to a zip64 extra field that is not there",
                        e->name);
    return NB_OK;
}

static nb_status parse_central(const unsigned char *cd, size_t size, size_t *pos, zip_entry *e)
{
    const unsigned char *p = cd + *pos;
    if (size - *pos < CENTRAL_SIZE || le32(p) != 0x02014b50)
        return nb_error(NB_ERR_FORMAT, "the central directory has no member header at offset %zu", *pos);
    uint32_t flags = le16(p + 8), nlen = le16(p + 28), xlen = le16(p + 30), clen = le16(p + 32), disk = le16(p + 34);
    if (nlen + xlen + clen > size - *pos - CENTRAL_SIZE)
        return nb_error(NB_ERR_FORMAT, "the central directory entry at offset %zu runs past its end", *pos);
    if (memchr(p + CENTRAL_SIZE, 0, nlen)) return nb_error(NB_ERR_FORMAT, "a member name holds a NUL byte");
    if (!(e->name = nb_malloc(nlen + 1))) return oom();
    memcpy(e->name, p + CENTRAL_SIZE, nlen);
    e->name[nlen] = '\0';
    e->method = (int)le16(p + 10);
    e->crc = le32(p + 16);
    e->csize = le32(p + 20);
    e->usize = le32(p + 24);
    e->offset = le32(p + 42);
    nb_status st = read_extra(p + CENTRAL_SIZE + nlen, xlen, e, &disk);
    if (st) return st;
    *pos += CENTRAL_SIZE + nlen + xlen + clen;
    if (flags & (1u | 1u << 6 | 1u << 13))
        return nb_error(NB_ERR_UNSUPPORTED, "member '%.100s' is encrypted (not supported)", e->name);
    if (disk != 0) return nb_error(NB_ERR_UNSUPPORTED, "member '%.100s' is on another disk (not supported)", e->name);
    if (e->method != 0 && e->method != 8)
        return nb_error(NB_ERR_UNSUPPORTED,
                        "member '%.100s' uses compression method %d (nabla reads stored, 0, and "
                        "deflated, 8)",
                        e->name, e->method);
    if (e->method == 0 && e->csize != e->usize)
        return nb_error(NB_ERR_FORMAT, "stored member '%.100s' has %llu bytes in the archive but declares %llu",
                        e->name, (unsigned long long)e->csize, (unsigned long long)e->usize);
    if (e->method == 8 && e->usize / MAX_DEFLATE_RATIO > e->csize + 64)
        return nb_error(NB_ERR_FORMAT,
                        "member '%.100s' declares %llu bytes from %llu deflated ones, more than "
                        "deflate can give",
                        e->name, (unsigned long long)e->usize, (unsigned long long)e->csize);
    return NB_OK;
}

/* The local header of e: it must name e, use its method, and leave e's
 * bytes before the central directory. */
static nb_status check_local(const zip_reader *z, zip_entry *e, uint64_t cd_offset)
{
    unsigned char b[LOCAL_SIZE];
    if (e->offset > cd_offset || cd_offset - e->offset < LOCAL_SIZE)
        return nb_error(NB_ERR_FORMAT,
                        "member '%.100s' has its local header at %llu, not before the central "
                        "directory",
                        e->name, (unsigned long long)e->offset);
    nb_status st = read_at(z, e->offset, b, LOCAL_SIZE, "a local header");
    if (st) return st;
    size_t nlen = le16(b + 26), xlen = le16(b + 28), want = strlen(e->name);
    if (le32(b) != 0x04034b50)
        return nb_error(NB_ERR_FORMAT, "member '%.100s' has no local header at offset %llu", e->name,
                        (unsigned long long)e->offset);
    if ((int)le16(b + 8) != e->method)
        return nb_error(NB_ERR_FORMAT,
                        "member '%.100s' has compression method %u in its local header but %d in the "
                        "central directory",
                        e->name, le16(b + 8), e->method);
    char *name = nb_malloc(nlen + 1);
    if (!name) return oom();
    if (nlen == want) st = read_at(z, e->offset + LOCAL_SIZE, name, nlen, "a local header");
    if (!st && (nlen != want || memcmp(name, e->name, nlen)))
        st = nb_error(NB_ERR_FORMAT, "member '%.100s' has another name in its local header", e->name);
    nb_free(name);
    if (st) return st;
    e->data = e->offset + LOCAL_SIZE + nlen + xlen;
    if (e->data > cd_offset || e->csize > cd_offset - e->data)
        return nb_error(NB_ERR_FORMAT,
                        "member '%.100s' (%llu bytes at offset %llu) runs into the central directory "
                        "at %llu",
                        e->name, (unsigned long long)e->csize, (unsigned long long)e->data,
                        (unsigned long long)cd_offset);
    return NB_OK;
}

static int by_offset(const void *a, const void *b)
{
    const zip_entry *x = *(zip_entry *const *)a, *y = *(zip_entry *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(zip_entry *const *)a)->name, (*(zip_entry *const *)b)->name);
}

/* No two members share bytes (overlapping members are how a small archive
 * inflates to a huge one) or a name. */
static nb_status check_members(zip_reader *z)
{
    zip_entry **s = nb_malloc(((size_t)z->n + 1) * sizeof *s);
    if (!s) return oom();
    for (int i = 0; i < z->n; i++) s[i] = &z->e[i];
    nb_status st = NB_OK;
    qsort(s, (size_t)z->n, sizeof *s, by_offset);
    for (int i = 1; i < z->n && !st; i++)
        if (s[i]->offset < s[i - 1]->data + s[i - 1]->csize)
            st = nb_error(NB_ERR_FORMAT, "members '%.100s' and '%.100s' overlap", s[i - 1]->name, s[i]->name);
    qsort(s, (size_t)z->n, sizeof *s, by_name);
    for (int i = 1; i < z->n && !st; i++)
        if (!strcmp(s[i - 1]->name, s[i]->name))
            st = nb_error(NB_ERR_FORMAT, "two members are named '%.100s'", s[i]->name);
    nb_free(s);
    return st;
}

nb_status zip_open(zip_reader *z, FILE *fp, uint64_t size)
{
    *z = (zip_reader){.fp = fp, .size = size};
    dir_info d = {0};
    nb_status st = find_end(z, &d);
    if (st) return st;
    unsigned char *cd = nb_malloc((size_t)d.cd_size + 1);
    z->e = nb_calloc((size_t)d.count + 1, sizeof *z->e);
    if (!cd || !z->e) {
        nb_free(cd);
        return oom();
    }
    st = read_at(z, d.cd_offset, cd, (size_t)d.cd_size, "the central directory");
    size_t pos = 0;
    for (uint64_t i = 0; i < d.count && !st; i++) {
        z->n++;
        st = parse_central(cd, (size_t)d.cd_size, &pos, &z->e[i]);
    }
    nb_free(cd);
    if (!st && pos != d.cd_size)
        st = nb_error(NB_ERR_FORMAT, "the central directory has %llu bytes after its %llu entries",
                      (unsigned long long)(d.cd_size - pos), (unsigned long long)d.count);
    for (int i = 0; i < z->n && !st; i++) st = check_local(z, &z->e[i], d.cd_offset);
    if (!st) st = check_members(z);
    return st;
}

/* ---- a member's bytes ---------------------------------------------------------- */

static voidpf zalloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return nb_calloc(items, size);
}

static void zfree(voidpf opaque, voidpf p)
{
    (void)opaque;
    nb_free(p);
}

void zip_zlib_alloc(z_stream *zs)
{
    zs->zalloc = zalloc;
    zs->zfree = zfree;
    zs->opaque = Z_NULL;
}

nb_status zip_member_open(zip_member *m, const zip_reader *z, int i)
{
    m->z = z;
    m->e = &z->e[i];
    m->in_left = m->e->csize;
    m->out_done = 0;
    m->crc = (uint32_t)crc32(0, Z_NULL, 0);
    m->inflating = m->ended = false;
    if (m->e->data > (uint64_t)LLONG_MAX || fseeko(z->fp, (off_t)m->e->data, SEEK_SET))
        return nb_error(NB_ERR_FORMAT, "cannot seek to the data of member '%.100s'", m->e->name);
    if (m->e->method == 8) {
        memset(&m->zs, 0, sizeof m->zs);
        zip_zlib_alloc(&m->zs);
        int rc = inflateInit2(&m->zs, -MAX_WBITS);
        if (rc != Z_OK) return rc == Z_MEM_ERROR ? oom() : nb_error(NB_ERR_IO, "zlib's inflate would not start");
        m->inflating = true;
    }
    return NB_OK;
}

void zip_member_close(zip_member *m)
{
    if (m->inflating) inflateEnd(&m->zs);
    m->inflating = false;
}

static nb_status refill(zip_member *m)
{
    size_t k = m->in_left < sizeof m->in ? (size_t)m->in_left : sizeof m->in;
    if (fread(m->in, 1, k, m->z->fp) != k)
        return nb_error(NB_ERR_FORMAT, "the file ended inside member '%.100s' (did it change while being read?)",
                        m->e->name);
    m->in_left -= k;
    m->zs.next_in = m->in;
    m->zs.avail_in = (uInt)k;
    return NB_OK;
}

/* Inflates into buf[0..n) (n <= UINT_MAX); *got says how much came. */
static nb_status inflate_some(zip_member *m, unsigned char *buf, size_t n, size_t *got)
{
    m->zs.next_out = buf;
    m->zs.avail_out = (uInt)n;
    while (m->zs.avail_out && !m->ended) {
        nb_status st;
        if (!m->zs.avail_in && m->in_left && (st = refill(m))) return st;
        int rc = inflate(&m->zs, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) m->ended = true;
        else if (rc == Z_MEM_ERROR) return oom();
        else if (rc == Z_BUF_ERROR && !m->zs.avail_in && !m->in_left)
            return nb_error(NB_ERR_FORMAT, "the deflated data of member '%.100s' is cut short", m->e->name);
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return nb_error(NB_ERR_FORMAT, "the deflated data of member '%.100s' is damaged (%s)", m->e->name,
                            m->zs.msg ? m->zs.msg : "zlib error");
    }
    *got = n - m->zs.avail_out;
    return NB_OK;
}

nb_status zip_member_read(zip_member *m, void *buf, size_t n)
{
    const zip_entry *e = m->e;
    if (n > e->usize - m->out_done)
        return nb_error(NB_ERR_FORMAT, "member '%.100s' is read past the %llu bytes it declares", e->name,
                        (unsigned long long)e->usize);
    for (unsigned char *p = buf; n;) {
        size_t k = n < (1u << 30) ? n : (1u << 30), got = k;
        if (m->inflating) {
            nb_status st = inflate_some(m, p, k, &got);
            if (st) return st;
            if (got < k)
                return nb_error(NB_ERR_FORMAT,
                                "the deflated data of member '%.100s' ends after %llu bytes, but it "
                                "declares %llu",
                                e->name, (unsigned long long)(m->out_done + got), (unsigned long long)e->usize);
        } else if (fread(p, 1, k, m->z->fp) != k) {
            return nb_error(NB_ERR_FORMAT, "the file ended inside member '%.100s' (did it change while being read?)",
                            e->name);
        } else {
            m->in_left -= k;
        }
        m->crc = (uint32_t)crc32(m->crc, p, (uInt)k);
        m->out_done += k;
        p += k;
        n -= k;
    }
    return NB_OK;
}

nb_status zip_member_finish(zip_member *m)
{
    const zip_entry *e = m->e;
    if (m->inflating) {
        /* One byte more than declared is enough to know there is more. */
        unsigned char extra;
        size_t got = 0;
        nb_status st = m->ended ? NB_OK : inflate_some(m, &extra, 1, &got);
        if (st) return st;
        if (got)
            return nb_error(NB_ERR_FORMAT,
                            "the deflated data of member '%.100s' holds more than the %llu bytes it "
                            "declares",
                            e->name, (unsigned long long)e->usize);
        if (m->zs.avail_in || m->in_left)
            return nb_error(NB_ERR_FORMAT, "member '%.100s' has bytes after the end of its deflated data", e->name);
    }
    if (m->crc != e->crc)
        return nb_error(NB_ERR_FORMAT, "member '%.100s' fails its CRC-32 check (%08x, the directory says %08x)",
                        e->name, (unsigned)m->crc, (unsigned)e->crc);
    return NB_OK;
}
