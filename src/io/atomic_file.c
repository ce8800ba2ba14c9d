/* Atomic file replacement: temporary file, fsync, rename, fsync of the
 * directory (see atomic_file.h). */
#include <dirent.h>
#include "nabla/device.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "atomic_file.h"

#ifndef NAME_MAX
#define NAME_MAX 255
#endif

/* As many links as Linux follows before ELOOP. */
#define MAX_LINKS 40

/* What a temporary name adds to its prefix, at most: ".tmp." (5), a pid
 * (pid_t is 32 bits: 10 digits) and ".NN" (3) for a name already taken.
 * Reserved whole whatever the pid, so that the prefix of a file's temporary
 * names is the same in every process and a later save finds them. */
#define TMP_SUFFIX_MAX 20

/* Attempts at a free temporary name: "<prefix>.tmp.<pid>", then ".1" ... */
#define MAX_ATTEMPTS 100

struct nb_atomic_file {
    FILE *f;
    char *path;   /* as the caller named it, for messages */
    char *target; /* the file replaced: `path` with its symbolic links followed */
    char *tmp;
    size_t written;
    unsigned long long stop_after; /* the test hook; 0 when off */
};

/* Paths as messages print them. The error text holds 2,048 bytes
 * (src/core/status.c) and a message may name two paths: a long one would
 * crowd out the reason that follows it, which is what the reader needs
 * (a name too long, say). A longer path keeps its start and its end (the
 * file's name) around "...", each cut at a UTF-8 character boundary. */
#define SHOWN_MAX 400
typedef struct shown_path {
    char s[SHOWN_MAX + 1];
} shown_path;

/* Returned by value: nb_error(..., shown(p).s) reads a temporary that
 * lives until the call ends (C11 6.2.4). */
static shown_path shown(const char *path)
{
    shown_path p;
    size_t n = strlen(path), head = SHOWN_MAX / 2, tail = SHOWN_MAX - head - 3;
    if (n <= SHOWN_MAX) {
        memcpy(p.s, path, n + 1);
        return p;
    }
    while (head > 0 && ((unsigned char)path[head] & 0xC0) == 0x80) head--;
    const char *end = path + n - tail;
    while (((unsigned char)*end & 0xC0) == 0x80) end++;
    memcpy(p.s, path, head);
    memcpy(p.s + head, "...", 3);
    memcpy(p.s + head + 3, end, strlen(end) + 1);
    return p;
}

/* The directory holding `path` ("." for a bare name), malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return nb_strdup(".");
    return nb_strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* The last component of `path` (borrowed). */
static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The target of the link `link` (st_size bytes long, as lstat said), as a
 * path usable from here: a relative target is relative to the link's
 * directory. malloc'ed; NULL with errno set on failure. */
static char *follow(const char *link, off_t st_size)
{
    size_t cap = st_size > 0 ? (size_t)st_size + 1 : 256;
    char *t = NULL;
    for (;;) {
        char *nt = nb_realloc(t, cap);
        if (!nt) {
            nb_free(t);
            errno = ENOMEM;
            return NULL;
        }
        t = nt;
        ssize_t n = readlink(link, t, cap);
        if (n < 0) {
            int err = errno;
            nb_free(t);
            errno = err;
            return NULL;
        }
        if ((size_t)n < cap) {
            t[n] = '\0';
            break;
        }
        cap *= 2; /* the link changed since lstat, or st_size was 0 */
    }
    const char *slash = strrchr(link, '/');
    if (t[0] == '/' || !slash) return t;
    size_t d = (size_t)(slash - link) + 1, n = strlen(t);
    char *full = nb_malloc(d + n + 1);
    if (full) {
        memcpy(full, link, d);
        memcpy(full + d, t, n + 1);
    } else {
        errno = ENOMEM;
    }
    nb_free(t);
    return full;
}

/* `path` with its final symbolic links followed, so that saving through a
 * link writes the file it points to (which need not exist yet) and leaves
 * the link in place: renaming over the link itself would replace it. Links
 * in the directories above are the kernel's to follow. */
static nb_status resolve_links(const char *path, char **out)
{
    *out = NULL;
    char *cur = nb_strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat sb;
        /* Anything but a link (or nothing yet, or a path we cannot look
         * at: creating the temporary file reports that) is the target. */
        if (lstat(cur, &sb) || !S_ISLNK(sb.st_mode)) {
            *out = cur;
            return NB_OK;
        }
        if (hops == MAX_LINKS) {
            nb_free(cur);
            return nb_error(NB_ERR_IO, "save '%s': more than %d symbolic links to follow (a loop?)", shown(path).s,
                            MAX_LINKS);
        }
        char *next = follow(cur, sb.st_size);
        if (!next) {
            int err = errno;
            nb_status st = err == ENOMEM ? nb_error(NB_ERR_NOMEM, "save '%s': out of memory", shown(path).s)
                                         : nb_error(NB_ERR_IO, "save '%s': cannot read the symbolic link '%s': %s",
                                                    shown(path).s, shown(cur).s, strerror(err));
            nb_free(cur);
            return st;
        }
        nb_free(cur);
        cur = next;
    }
    return nb_error(NB_ERR_NOMEM, "save '%s': out of memory", shown(path).s);
}

/* The part of a temporary name before ".tmp.<pid>": the file's name, or,
 * when that would make the temporary name longer than the directory allows,
 * its start (cut at a UTF-8 character boundary) and "~" and a hash of the
 * whole name, so that long names sharing a start still differ. The same in
 * every process for the same file. malloc'ed. */
static char *temp_prefix(const char *dir, const char *base)
{
    long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0) name_max = NAME_MAX;
    size_t n = strlen(base);
    if (n + TMP_SUFFIX_MAX <= (size_t)name_max) return nb_strdup(base);
    long room = name_max - TMP_SUFFIX_MAX - 9; /* 9: "~" and 8 hex digits */
    size_t keep = room > 0 ? (size_t)room : 0;
    while (keep > 0 && ((unsigned char)base[keep] & 0xC0) == 0x80) keep--;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)base[i]) * 16777619u;
    char *p = nb_malloc(keep + 10);
    if (!p) return NULL;
    memcpy(p, base, keep);
    snprintf(p + keep, 10, "~%08x", (unsigned)h);
    return p;
}

/* Whether `s` is one or more decimal digits. */
static bool all_digits(const char *s, const char *end)
{
    if (s == end) return false;
    for (; s < end; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* Removes "<prefix>.tmp.<pid>" and "<prefix>.tmp.<pid>.<n>" files in `dir`
 * whose process is gone: they are what a writer killed mid-save left. A pid
 * that has been reused keeps its file until that process ends; that only
 * costs disk space. */
static void remove_stale_temps(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return;
    size_t np = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        if (strncmp(name, prefix, np) || strncmp(name + np, ".tmp.", 5)) continue;
        const char *digits = name + np + 5, *dot = strchr(digits, '.');
        const char *pid_end = dot ? dot : digits + strlen(digits);
        if (!all_digits(digits, pid_end) || (dot && !all_digits(dot + 1, dot + 1 + strlen(dot + 1)))) continue;
        if (pid_end - digits > 10) continue;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (errno || pid <= 0 || pid > INT32_MAX || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        size_t n = strlen(dir) + strlen(name) + 2;
        char *full = nb_malloc(n);
        if (!full) break;
        snprintf(full, n, "%s/%s", dir, name);
        unlink(full);
        nb_free(full);
    }
    closedir(d);
}

/* Creates a free temporary file "<dir part of target><prefix>.tmp.<pid>[.n]"
 * with the permissions the new file is to have: those of the file it
 * replaces (and its owner, where we may set it), or 0666 less the umask for
 * a new one. The fd, or -1 with errno set; a->tmp names the last name tried. */
static int create_temp(nb_atomic_file *a, const char *prefix)
{
    size_t dir_len = (size_t)(base_of(a->target) - a->target), n = dir_len + strlen(prefix) + 32;
    a->tmp = nb_malloc(n);
    if (!a->tmp) {
        errno = ENOMEM;
        return -1;
    }
    struct stat old;
    bool replacing = stat(a->target, &old) == 0 && S_ISREG(old.st_mode);
    /* Until fchmod below, no one but us may read what we write. */
    mode_t mode = replacing ? (old.st_mode & 0700) : 0666;
    int fd = -1;
    for (int attempt = 0; attempt < MAX_ATTEMPTS && fd < 0; attempt++) {
        int k = snprintf(a->tmp, n, "%.*s%s.tmp.%ld", (int)dir_len, a->target, prefix, (long)getpid());
        if (attempt) snprintf(a->tmp + k, n - (size_t)k, ".%d", attempt);
        fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0 || !replacing) return fd;
    /* The owner first, since a change of owner drops the set-id bits; a
     * file we may not give away stays ours. */
    if (old.st_uid != geteuid() || old.st_gid != getegid()) {
        if (fchown(fd, old.st_uid, old.st_gid)) (void)!fchown(fd, (uid_t)-1, old.st_gid);
    }
    if (fchmod(fd, old.st_mode & 07777)) {
        int err = errno;
        close(fd);
        unlink(a->tmp);
        errno = err;
        return -1;
    }
    return fd;
}

nb_status nb_atomic_open(nb_atomic_file **out, const char *path)
{
    if (!out) return nb_error(NB_ERR_ARG, "save: NULL result");
    *out = NULL;
    if (!path || !*path) return nb_error(NB_ERR_ARG, "save: empty file path");
    nb_atomic_file *a = nb_calloc(1, sizeof *a);
    if (a) a->path = nb_strdup(path);
    if (!a || !a->path) {
        nb_atomic_abort(a);
        return nb_error(NB_ERR_NOMEM, "save '%s': out of memory", shown(path).s);
    }
    nb_status st = resolve_links(path, &a->target);
    if (st) {
        nb_atomic_abort(a);
        return st;
    }
    const char *base = base_of(a->target);
    if (!*base) {
        nb_atomic_abort(a);
        return nb_error(NB_ERR_IO, "save '%s': the path names a directory, not a file", shown(path).s);
    }
    char *dir = dir_of(a->target);
    char *prefix = dir ? temp_prefix(dir, base) : NULL;
    if (!prefix) {
        nb_free(dir);
        nb_atomic_abort(a);
        return nb_error(NB_ERR_NOMEM, "save '%s': out of memory", shown(path).s);
    }
    remove_stale_temps(dir, prefix);
    nb_free(dir);

    int fd = create_temp(a, prefix);
    nb_free(prefix);
    if (fd >= 0) a->f = fdopen(fd, "wb");
    if (!a->f) {
        int err = errno;
        if (fd >= 0) close(fd);
        if (!a->tmp) {
            nb_atomic_abort(a);
            return nb_error(NB_ERR_NOMEM, "save '%s': out of memory", shown(path).s);
        }
        st = nb_error(NB_ERR_IO, "save '%s': cannot create the temporary file '%s': %s", shown(path).s, shown(a->tmp).s,
                      strerror(err));
        if (fd >= 0) unlink(a->tmp);
        nb_free(a->tmp);
        a->tmp = NULL; /* nothing of ours to remove */
        nb_atomic_abort(a);
        return st;
    }
    const char *hook = getenv("NABLA_TEST_STOP_AFTER_BYTES");
    if (hook) a->stop_after = strtoull(hook, NULL, 10);
    *out = a;
    return NB_OK;
}

static nb_status write_bytes(nb_atomic_file *a, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, a->f) != n)
        return nb_error(NB_ERR_IO, "save '%s': writing '%s' failed: %s", shown(a->path).s, shown(a->tmp).s,
                        strerror(errno));
    a->written += n;
    return NB_OK;
}

nb_status nb_atomic_write(nb_atomic_file *a, const void *data, size_t n)
{
    if (!a || (n && !data)) return nb_error(NB_ERR_ARG, "save: atomic write needs a file and data");
    if (a->stop_after && a->written < a->stop_after && a->written + n >= a->stop_after) {
        size_t first = (size_t)(a->stop_after - a->written);
        nb_status st = write_bytes(a, data, first);
        if (st) return st;
        fflush(a->f);
        raise(SIGSTOP);
        data = (const char *)data + first;
        n -= first;
    }
    return write_bytes(a, data, n);
}

static nb_status sync_dir(const nb_atomic_file *a)
{
    char *dir = dir_of(a->target);
    if (!dir) return nb_error(NB_ERR_NOMEM, "save '%s': out of memory", shown(a->path).s);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    nb_status st = NB_OK;
    /* Some file systems cannot sync a directory (EINVAL); there is nothing
     * more to do on those. */
    if (fd < 0 || (fsync(fd) && errno != EINVAL))
        st = nb_error(NB_ERR_IO, "save '%s': the file was replaced, but syncing directory '%s' failed: %s",
                      shown(a->path).s, shown(dir).s, strerror(errno));
    if (fd >= 0) close(fd);
    nb_free(dir);
    return st;
}

nb_status nb_atomic_commit(nb_atomic_file *a)
{
    if (!a) return nb_error(NB_ERR_ARG, "save: atomic commit needs a file");
    nb_status st = NB_OK;
    const char *step = NULL;
    if (fflush(a->f)) step = "writing";
    else if (fsync(fileno(a->f))) step = "syncing";
    int err = errno;
    if (fclose(a->f) && !step) {
        step = "closing";
        err = errno;
    }
    a->f = NULL;
    if (!step && rename(a->tmp, a->target)) {
        step = "renaming";
        err = errno;
    }
    if (step) {
        st = nb_error(NB_ERR_IO, "save '%s': %s '%s' failed: %s", shown(a->path).s, step, shown(a->tmp).s,
                      strerror(err));
        nb_atomic_abort(a);
        return st;
    }
    st = sync_dir(a);
    nb_free(a->tmp);
    a->tmp = NULL; /* renamed: nothing to remove */
    nb_atomic_abort(a);
    return st;
}

void nb_atomic_abort(nb_atomic_file *a)
{
    if (!a) return;
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    nb_free(a->tmp);
    nb_free(a->target);
    nb_free(a->path);
    nb_free(a);
}
