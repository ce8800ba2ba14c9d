/* A process killed in the middle of saving a checkpoint leaves the previous
 * checkpoint whole.
 *
 * A child process saves a 4 MB checkpoint with NABLA_TEST_STOP_AFTER_BYTES
 * set to half the file's size: the writer flushes that many bytes to its
 * temporary file and stops itself (SIGSTOP). The parent, seeing it stopped,
 * checks the half-written temporary file is there and the checkpoint is
 * still the old one, kills the child (SIGKILL), and loads the checkpoint:
 * it must be the previous one, every value intact. The kill lands mid-save
 * every time, with no timing involved. A last test kills children saving in
 * a loop at arbitrary moments: every load must find one whole checkpoint. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "nabla/checkpoint.h"
#include "test.h"

#define N_WEIGHTS (1 << 20)

static char dir[256], path[512];
static nb_program *prog;
static nb_scope *state;

/* The program's state: "w" (4 MB) and "step", all holding the value k. */
static void fill(double k)
{
    float *w = nb_tensor_data(nb_scope_find(state, "w"));
    for (int i = 0; i < N_WEIGHTS; i++) w[i] = (float)k;
    nb_tensor_set(nb_scope_find(state, "step"), 0, k);
}

/* Loads the checkpoint into a fresh scope; its value k if every element
 * agrees, or -1. */
static double load_k(void)
{
    nb_scope *s;
    if (nb_scope_new(&s, NULL)) return -1;
    double k = -1;
    if (nb_checkpoint_load(path, prog, s, NULL)) {
        fprintf(stderr, "  load: %s\n", nb_last_error());
    } else {
        const float *w = nb_tensor_data(nb_scope_find(s, "w"));
        k = nb_tensor_get(nb_scope_find(s, "step"), 0);
        for (int i = 0; i < N_WEIGHTS; i++)
            if (w[i] != (float)k) {
                fprintf(stderr, "  w[%d] = %g but step = %g\n", i, w[i], k);
                k = -1;
                break;
            }
    }
    nb_scope_free(s);
    return k;
}

static long file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) ? -1 : (long)sb.st_size;
}

static char *temp_of(pid_t pid)
{
    static char buf[600];
    snprintf(buf, sizeof buf, "%s.tmp.%ld", path, (long)pid);
    return buf;
}

static int count_temp_files(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

/* A forked child: if the test process dies (a failed check that aborts,
 * under the sanitizers), a child left stopped must not outlive it, or it
 * would hold the test's output open forever. */
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

/* A child that saves the state with value k, stopping itself after `stop`
 * bytes when stop > 0. */
static pid_t save_in_child(double k, long stop)
{
    pid_t pid = fork_child();
    if (pid == 0) {
        char s[32];
        snprintf(s, sizeof s, "%ld", stop);
        if (stop > 0) setenv("NABLA_TEST_STOP_AFTER_BYTES", s, 1);
        fill(k);
        nb_status st = nb_checkpoint_save(path, prog, state, NULL);
        if (st) fprintf(stderr, "  child: %s\n", nb_last_error());
        _exit(st ? 1 : 0);
    }
    return pid;
}

static void test_kill_in_the_middle_of_a_save(void)
{
    fill(1);
    REQUIRE_OK(nb_checkpoint_save(path, prog, state, NULL));
    long full = file_size(path), half = full / 2;
    CHECK(full > 4 * N_WEIGHTS);

    pid_t pid = save_in_child(2, half);
    int status;
    REQUIRE_OK(pid > 0 && waitpid(pid, &status, WUNTRACED) == pid ? NB_OK : NB_ERR_STATE);
    CHECK(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP);
    /* Stopped mid-save: half the new file is written, the old one is in place. */
    CHECK(file_size(temp_of(pid)) == half);
    CHECK(file_size(path) == full);
    CHECK(load_k() == 1);
    kill(pid, SIGKILL);
    REQUIRE_OK(waitpid(pid, &status, 0) == pid ? NB_OK : NB_ERR_STATE);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    /* The previous checkpoint, whole; the dead writer's temporary file is
     * still there, and loading pays it no attention. */
    CHECK(load_k() == 1);
    CHECK(file_size(temp_of(pid)) == half);
    /* The next save removes it. */
    fill(3);
    CHECK_OK(nb_checkpoint_save(path, prog, state, NULL));
    CHECK(file_size(temp_of(pid)) == -1);
    CHECK(count_temp_files() == 0);
    CHECK(load_k() == 3);
}

/* A writer stopped in the middle and then let go finishes the save. */
static void test_stopped_save_goes_on(void)
{
    fill(4);
    REQUIRE_OK(nb_checkpoint_save(path, prog, state, NULL));
    pid_t pid = save_in_child(5, file_size(path) / 3);
    int status;
    REQUIRE_OK(pid > 0 && waitpid(pid, &status, WUNTRACED) == pid ? NB_OK : NB_ERR_STATE);
    CHECK(WIFSTOPPED(status));
    CHECK(load_k() == 4);
    kill(pid, SIGCONT);
    REQUIRE_OK(waitpid(pid, &status, 0) == pid ? NB_OK : NB_ERR_STATE);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(load_k() == 5);
    CHECK(count_temp_files() == 0);
}

/* Children saving new values in a loop, killed at arbitrary moments: the
 * file always holds one whole checkpoint. */
static void test_kill_at_arbitrary_moments(void)
{
    fill(100);
    REQUIRE_OK(nb_checkpoint_save(path, prog, state, NULL));
    for (int round = 0; round < 8; round++) {
        pid_t pid = fork_child();
        if (pid == 0) {
            for (int k = 1000 * (round + 1);; k++) {
                fill(k);
                if (nb_checkpoint_save(path, prog, state, NULL)) _exit(1);
            }
        }
        REQUIRE_OK(pid > 0 ? NB_OK : NB_ERR_STATE);
        struct timespec delay = {0, (round * 7919 % 40 + 1) * 1000000L}; /* 1 to 40 ms */
        nanosleep(&delay, NULL);
        kill(pid, SIGKILL);
        int status;
        REQUIRE_OK(waitpid(pid, &status, 0) == pid ? NB_OK : NB_ERR_STATE);
        CHECK(WIFSIGNALED(status));
        double k = load_k();
        CHECK(k == 100 || k >= 1000);
    }
    CHECK(count_temp_files() <= 1);
    CHECK_OK(nb_checkpoint_save(path, prog, state, NULL));
    CHECK(count_temp_files() == 0);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nabla_crash_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(path, sizeof path, "%s/state.safetensors", dir);
    nb_var *w, *step;
    nb_tensor *tw, *ts;
    if (nb_program_new(&prog) || nb_scope_new(&state, NULL) ||
        nb_block_create_var(nb_program_global_block(prog), "w", NB_F32, 1, S(N_WEIGHTS), &w) ||
        nb_block_create_var(nb_program_global_block(prog), "step", NB_I64, 0, NULL, &step) ||
        nb_tensor_new(&tw, NB_F32, 1, S(N_WEIGHTS)) || nb_tensor_new(&ts, NB_I64, 0, NULL) ||
        nb_scope_set(state, "w", tw) || nb_scope_set(state, "step", ts)) {
        fprintf(stderr, "setup: %s\n", nb_last_error());
        return 2;
    }
    w->persistable = step->persistable = true;
    nb_tensor_release(tw);
    nb_tensor_release(ts);

    RUN(test_kill_in_the_middle_of_a_save);
    RUN(test_stopped_save_goes_on);
    RUN(test_kill_at_arbitrary_moments);

    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    if (rmdir(dir)) fprintf(stderr, "note: could not remove %s: %s\n", dir, strerror(errno));
    nb_scope_free(state);
    nb_program_free(prog);
    return test_report();
}
