/* Saving files keeps its promises, for program files (nb_program_save) and
 * checkpoints (nb_safetensors_save, under nb_checkpoint_save) alike:
 *  - a save removes the temporary files that writers killed mid-save left
 *    beside the same file (and none of a live process);
 *  - a file replaced keeps its permissions; a new one gets 0666 & ~umask;
 *  - saving through a symbolic link writes the file it points to (through
 *    a chain of links, relative or absolute, or one pointing nowhere yet)
 *    and leaves the link in place;
 *  - a file name as long as the file system allows can be saved, and a
 *    writer killed while saving it leaves a temporary file that the next
 *    save finds and removes;
 *  - a path too long for the error text is shortened there, so that the
 *    reason a save failed is always in it. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "nabla/program_file.h"
#include "nabla/safetensors.h"
#include "test.h"

static char dir[256];

static const char *path_of(const char *name)
{
    static char buf[4][1300];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* The two kinds of file: each writes a file that holds the number k, and
 * reads it back (-1 when the file is missing or unreadable). */
typedef struct kind {
    const char *name;
    nb_status (*save)(const char *path, int k);
    int (*read)(const char *path);
} kind;

static nb_status save_program(const char *path, int k)
{
    nb_program *p;
    nb_status st = nb_program_new(&p);
    if (st) return st;
    nb_program_set_seed(p, (uint64_t)k);
    st = nb_program_save(path, p);
    nb_program_free(p);
    return st;
}

static int read_program(const char *path)
{
    nb_program *p;
    if (nb_program_load(&p, path)) return -1;
    int k = (int)p->random_seed;
    nb_program_free(p);
    return k;
}

static nb_status save_tensors(const char *path, int k)
{
    nb_tensor *t;
    nb_status st = nb_tensor_full(&t, NB_I64, 1, S(3), k);
    if (st) return st;
    const char *names[] = {"k"};
    st = nb_safetensors_save(path, 1, names, &t, NULL);
    nb_tensor_release(t);
    return st;
}

static int read_tensors(const char *path)
{
    nb_safetensors *f;
    if (nb_safetensors_load(&f, path)) return -1;
    nb_tensor *t = nb_safetensors_find(f, "k");
    int k = t ? (int)nb_tensor_get(t, 2) : -1;
    nb_safetensors_free(f);
    return k;
}

static const kind kinds[] = {{"program file", save_program, read_program}, {"safetensors", save_tensors, read_tensors}};
#define N_KINDS (int)(sizeof kinds / sizeof *kinds)

static int count_temp_files(const char *d_path)
{
    DIR *d = opendir(d_path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void remove_all(const char *d_path)
{
    DIR *d = opendir(d_path);
    struct dirent *e;
    char p[1200];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", d_path, e->d_name);
        struct stat sb;
        if (!lstat(p, &sb) && S_ISDIR(sb.st_mode)) {
            remove_all(p);
            rmdir(p);
        } else {
            unlink(p);
        }
    }
    if (d) closedir(d);
}

static bool exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static void touch(const char *p)
{
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs("half a file", f);
        fclose(f);
    }
}

/* A forked child that dies with the test process, so that a stopped one
 * never outlives it. */
static pid_t fork_child(void)
{
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent) _exit(3);
    }
    return pid;
}

/* The id of a process that has ended (and been reaped). */
static pid_t dead_pid(void)
{
    pid_t pid = fork_child();
    if (pid == 0) _exit(0);
    int status;
    if (pid > 0) waitpid(pid, &status, 0);
    return pid;
}

/* Temporary files named as a dead writer's would be (with and without the
 * attempt number a writer adds when its first name is taken) are removed by
 * the next save of the same file; one of a live process is left alone, and
 * so are files that only look similar. */
static void test_stale_temporaries_removed(void)
{
    for (int i = 0; i < N_KINDS; i++) {
        const kind *K = &kinds[i];
        const char *path = path_of("stale.bin");
        char dead1[1400], dead2[1400], live[1400], other[1400], notpid[1400];
        pid_t dead = dead_pid();
        REQUIRE_OK(dead > 0 ? NB_OK : NB_ERR_STATE);
        snprintf(dead1, sizeof dead1, "%s.tmp.%ld", path, (long)dead);
        snprintf(dead2, sizeof dead2, "%s.tmp.%ld.3", path, (long)dead);
        snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
        snprintf(other, sizeof other, "%s/other.bin.tmp.%ld", dir, (long)dead);
        snprintf(notpid, sizeof notpid, "%s.tmp.%ldx", path, (long)dead);
        touch(dead1);
        touch(dead2);
        touch(live);
        touch(other);
        touch(notpid);
        CHECK_OK(K->save(path, 7));
        CHECK(K->read(path) == 7);
        if (exists(dead1) || exists(dead2)) fprintf(stderr, "  %s: a dead writer's temporary file is left\n", K->name);
        CHECK(!exists(dead1) && !exists(dead2));
        CHECK(exists(live) && exists(other) && exists(notpid));
        remove_all(dir);
    }
}

/* A writer killed mid-save (SIGKILL while it is stopped half-way through
 * writing) leaves the previous file whole and its temporary file behind;
 * the next save removes that. Once with a short name, once with a name of
 * 250 bytes, whose temporary names must be shortened to fit. */
static void test_killed_save(void)
{
    char long_name[251];
    memset(long_name, 'n', 250);
    long_name[250] = '\0';
    const char *names[] = {"killed.bin", long_name};
    for (int i = 0; i < N_KINDS; i++)
        for (int n = 0; n < 2; n++) {
            const kind *K = &kinds[i];
            char path[1300];
            snprintf(path, sizeof path, "%s", path_of(names[n]));
            REQUIRE_OK(K->save(path, 1));
            pid_t pid = fork_child();
            if (pid == 0) {
                setenv("NABLA_TEST_STOP_AFTER_BYTES", "5", 1);
                nb_status st = K->save(path, 2);
                _exit(st ? 1 : 0);
            }
            int status;
            REQUIRE_OK(pid > 0 && waitpid(pid, &status, WUNTRACED) == pid ? NB_OK : NB_ERR_STATE);
            bool stopped = WIFSTOPPED(status);
            if (!stopped)
                fprintf(stderr, "  %s (name of %zu bytes): the writer did not stop mid-save\n", K->name,
                        strlen(names[n]));
            CHECK(stopped);
            CHECK(count_temp_files(dir) == (stopped ? 1 : 0));
            if (stopped) {
                kill(pid, SIGKILL);
                REQUIRE_OK(waitpid(pid, &status, 0) == pid ? NB_OK : NB_ERR_STATE);
                CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
            }
            CHECK(K->read(path) == (stopped ? 1 : 2));
            CHECK(count_temp_files(dir) == (stopped ? 1 : 0));
            CHECK_OK(K->save(path, 3));
            CHECK(K->read(path) == 3);
            int left = count_temp_files(dir);
            if (left)
                fprintf(stderr, "  %s (name of %zu bytes): %d temporary file(s) left\n", K->name, strlen(names[n]),
                        left);
            CHECK(left == 0);
            remove_all(dir);
        }
}

/* Writers saving in a loop, killed at arbitrary moments (the report: 133
 * temporary files left after 200 kills of program-file saves): at most the
 * last one's temporary file is ever left, and the next save removes it. */
static void test_killed_at_arbitrary_moments(void)
{
    for (int i = 0; i < N_KINDS; i++) {
        const kind *K = &kinds[i];
        const char *path = path_of("loop.bin");
        REQUIRE_OK(K->save(path, 1));
        for (int round = 0; round < 20; round++) {
            pid_t pid = fork_child();
            if (pid == 0) {
                for (int k = 2;; k++)
                    if (K->save(path, k)) _exit(1);
            }
            REQUIRE_OK(pid > 0 ? NB_OK : NB_ERR_STATE);
            struct timespec delay = {0, (round % 4 + 1) * 500000L}; /* 0.5 to 2 ms */
            nanosleep(&delay, NULL);
            kill(pid, SIGKILL);
            int status;
            REQUIRE_OK(waitpid(pid, &status, 0) == pid ? NB_OK : NB_ERR_STATE);
            CHECK(WIFSIGNALED(status));
            CHECK(K->read(path) >= 1);
            CHECK(count_temp_files(dir) <= 1);
        }
        CHECK_OK(K->save(path, 1));
        CHECK(count_temp_files(dir) == 0);
        remove_all(dir);
    }
}

static unsigned mode_of(const char *p)
{
    struct stat sb;
    return stat(p, &sb) ? 0u : (unsigned)(sb.st_mode & 07777);
}

/* A file replaced keeps its mode; a new one gets 0666 less the umask. */
static void test_mode_kept(void)
{
    mode_t old_mask = umask(022);
    for (int i = 0; i < N_KINDS; i++) {
        const kind *K = &kinds[i];
        const char *path = path_of("mode.bin");
        CHECK_OK(K->save(path, 1));
        CHECK(mode_of(path) == 0644);
        const unsigned modes[] = {0600, 0640, 0444, 0755};
        for (int m = 0; m < 4; m++) {
            CHECK(chmod(path, modes[m]) == 0);
            CHECK_OK(K->save(path, 2 + m));
            CHECK(K->read(path) == 2 + m);
            if (mode_of(path) != modes[m])
                fprintf(stderr, "  %s: a %04o file became %04o\n", K->name, modes[m], mode_of(path));
            CHECK(mode_of(path) == modes[m]);
        }
        unlink(path);
        umask(027);
        CHECK_OK(K->save(path, 1));
        CHECK(mode_of(path) == 0640);
        umask(022);
        CHECK(count_temp_files(dir) == 0);
        remove_all(dir);
    }
    umask(old_mask);
}

static bool is_link(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode);
}

/* Saving through a link writes its target, in the target's directory, and
 * leaves the link (and a chain of them) as it was. */
static void test_through_symlinks(void)
{
    for (int i = 0; i < N_KINDS; i++) {
        const kind *K = &kinds[i];
        char sub[1300], real[1300], abs_link1[1300];
        snprintf(sub, sizeof sub, "%s", path_of("sub"));
        snprintf(real, sizeof real, "%s", path_of("sub/real.bin"));
        snprintf(abs_link1, sizeof abs_link1, "%s", path_of("link1"));
        REQUIRE_OK(mkdir(sub, 0755) == 0 ? NB_OK : NB_ERR_IO);
        CHECK_OK(K->save(real, 1));
        CHECK(chmod(real, 0600) == 0);
        /* link1 -> sub/real.bin (relative to link1's directory);
         * link2 -> /.../link1 (absolute); sub/link3 -> ../link2 */
        CHECK(symlink("sub/real.bin", path_of("link1")) == 0);
        CHECK(symlink(abs_link1, path_of("link2")) == 0);
        CHECK(symlink("../link2", path_of("sub/link3")) == 0);
        const char *links[] = {"link1", "link2", "sub/link3"};
        for (int l = 0; l < 3; l++) {
            CHECK_OK(K->save(path_of(links[l]), 10 + l));
            bool ok = is_link(path_of("link1")) && is_link(path_of("link2")) && is_link(path_of("sub/link3"));
            if (!ok) fprintf(stderr, "  %s: saving through %s replaced a link\n", K->name, links[l]);
            CHECK(ok);
            CHECK(K->read(real) == 10 + l);
            CHECK(mode_of(real) == 0600);
        }
        /* A link to a file not there yet: the file is made, the link stays. */
        CHECK(symlink("sub/new.bin", path_of("dangling")) == 0);
        CHECK_OK(K->save(path_of("dangling"), 20));
        CHECK(is_link(path_of("dangling")));
        CHECK(K->read(path_of("sub/new.bin")) == 20);
        /* A loop of links is an error naming the file. */
        CHECK(symlink("loop_b", path_of("loop_a")) == 0);
        CHECK(symlink("loop_a", path_of("loop_b")) == 0);
        nb_status st = K->save(path_of("loop_a"), 30);
        CHECK(st == NB_ERR_IO && strstr(nb_last_error(), "loop_a"));
        CHECK(is_link(path_of("loop_a")) && is_link(path_of("loop_b")));
        CHECK(count_temp_files(dir) == 0 && count_temp_files(sub) == 0);
        remove_all(dir);
    }
}

/* A name of 250 bytes, and one of the most the file system takes: saved and
 * read back, nothing left beside them; one byte more is an error that names
 * the file. */
static void test_long_names(void)
{
    long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0 || name_max > 1000) name_max = 255;
    char name[1002];
    for (int i = 0; i < N_KINDS; i++) {
        const kind *K = &kinds[i];
        const long lengths[] = {250, name_max};
        for (int n = 0; n < 2; n++) {
            memset(name, 'a' + n, (size_t)lengths[n]);
            name[lengths[n]] = '\0';
            nb_status st = K->save(path_of(name), 4 + n);
            if (st) fprintf(stderr, "  %s, name of %ld bytes: %s\n", K->name, lengths[n], nb_last_error());
            CHECK(st == NB_OK);
            CHECK(K->read(path_of(name)) == 4 + n);
            CHECK_OK(K->save(path_of(name), 6 + n)); /* replacing it */
            CHECK(K->read(path_of(name)) == 6 + n);
        }
        memset(name, 'z', (size_t)name_max + 1);
        name[name_max + 1] = '\0';
        CHECK_ERR(K->save(path_of(name), 1), NB_ERR_IO, "zzzz");
        CHECK(count_temp_files(dir) == 0);
        remove_all(dir);
    }
}

/* Over 2,000 bytes of path, once as one name (too long a name) and once as
 * directories that are not there: the message keeps the path's start and
 * its end, and the reason after them. */
static void test_long_path_messages(void)
{
    char name[2101], deep[2600];
    memset(name, 'y', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    char part[62] = "/";
    memset(part + 1, 'd', 60);
    part[61] = '\0';
    int n = snprintf(deep, sizeof deep, "%s", dir);
    while (n < 2400) n += snprintf(deep + n, sizeof deep - (size_t)n, "%s", part);
    snprintf(deep + n, sizeof deep - (size_t)n, "/end.bin");
    for (int i = 0; i < N_KINDS; i++) {
        const kind *K = &kinds[i];
        char long_name[sizeof dir + sizeof name + 1];
        snprintf(long_name, sizeof long_name, "%s/%s", dir, name);
        CHECK_ERR(K->save(long_name, 1), NB_ERR_IO, strerror(ENAMETOOLONG));
        CHECK(strstr(nb_last_error(), dir) && strstr(nb_last_error(), "yyy...yyy"));
        CHECK_ERR(K->save(deep, 1), NB_ERR_IO, strerror(ENOENT));
        CHECK(strstr(nb_last_error(), "...") && strstr(nb_last_error(), "ddd/end.bin"));
        CHECK(count_temp_files(dir) == 0);
    }
    printf("  %s\n", nb_last_error());
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nabla_atomic_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_stale_temporaries_removed);
    RUN(test_killed_save);
    RUN(test_killed_at_arbitrary_moments);
    RUN(test_mode_kept);
    RUN(test_through_symlinks);
    RUN(test_long_names);
    RUN(test_long_path_messages);
    remove_all(dir);
    if (rmdir(dir)) fprintf(stderr, "note: could not remove %s: %s\n", dir, strerror(errno));
    return test_report();
}
