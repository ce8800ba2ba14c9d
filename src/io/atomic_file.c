/* Atomic file replacement: temporary file, fsync, rename, fsync of the
 * directory (see atomic_file.h). */
#include <dirent.h>
#include "nabla/device.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "atomic_file.h"

struct nb_atomic_file {
    FILE *f;
    char *path, *tmp;
    size_t written;
    unsigned long long stop_after; /* the test hook; 0 when off */
};

/* The directory holding `path` ("." for a bare name), malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return nb_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = nb_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

/* Removes "<base>.tmp.<pid>" files in `dir` whose process is gone: they are
 * what a writer killed mid-save left. A pid that has been reused keeps its
 * file until that process ends; that only costs disk space. */
static void remove_stale_temps(const char *dir, const char *base)
{
    DIR *d = opendir(dir);
    if (!d) return;
    size_t nb = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        if (strncmp(name, base, nb) || strncmp(name + nb, ".tmp.", 5)) continue;
        const char *digits = name + nb + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (!*digits || *end || errno || pid <= 0 || pid == (long)getpid()) continue;
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

nb_status nb_atomic_open(nb_atomic_file **out, const char *path)
{
    *out = NULL;
    if (!path || !*path) return nb_error(NB_ERR_ARG, "save: empty file path");
    nb_atomic_file *a = nb_calloc(1, sizeof *a);
    size_t n = strlen(path) + 32;
    char *dir = dir_of(path);
    if (a) a->path = nb_strdup(path);
    if (a) a->tmp = nb_malloc(n);
    if (!a || !a->path || !a->tmp || !dir) {
        nb_free(dir);
        nb_atomic_abort(a);
        return nb_error(NB_ERR_NOMEM, "save '%s': out of memory", path);
    }
    snprintf(a->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    const char *slash = strrchr(path, '/');
    remove_stale_temps(dir, slash ? slash + 1 : path);
    nb_free(dir);

    int fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd >= 0) a->f = fdopen(fd, "wb");
    if (!a->f) {
        int err = errno;
        if (fd >= 0) close(fd);
        nb_status st = nb_error(NB_ERR_IO, "save '%s': cannot create the temporary file '%s': %s", path, a->tmp,
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
        return nb_error(NB_ERR_IO, "save '%s': writing '%s' failed: %s", a->path, a->tmp, strerror(errno));
    a->written += n;
    return NB_OK;
}

nb_status nb_atomic_write(nb_atomic_file *a, const void *data, size_t n)
{
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

static nb_status sync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return nb_error(NB_ERR_NOMEM, "save '%s': out of memory", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    nb_status st = NB_OK;
    /* Some file systems cannot sync a directory (EINVAL); there is nothing
     * more to do on those. */
    if (fd < 0 || (fsync(fd) && errno != EINVAL))
        st = nb_error(NB_ERR_IO, "save '%s': the file was replaced, but syncing directory '%s' failed: %s", path,
                      dir, strerror(errno));
    if (fd >= 0) close(fd);
    nb_free(dir);
    return st;
}

nb_status nb_atomic_commit(nb_atomic_file *a)
{
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
    if (!step && rename(a->tmp, a->path)) {
        step = "renaming";
        err = errno;
    }
    if (step) {
        st = nb_error(NB_ERR_IO, "save '%s': %s '%s' failed: %s", a->path, step, a->tmp, strerror(err));
        nb_atomic_abort(a);
        return st;
    }
    st = sync_dir(a->path);
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
    nb_free(a->path);
    nb_free(a);
}
