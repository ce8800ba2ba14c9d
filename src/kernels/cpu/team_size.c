/* How many threads the team has by default, and, under MPI, which cores
 * they keep to (team.h).
 *
 * A count larger than the cores this process really gets makes threads
 * queue for them, and a team whose threads queue is slower than one thread.
 * So the count is the smallest of: the CPUs the affinity mask allows, the
 * CPU quota of the process's cgroup (a container given 2 CPUs of a 64-core
 * host), and, with several MPI ranks on the node, this rank's part of the
 * cores. The ranks are bound to parts of their own, unless the launcher has
 * bound them already (Open MPI binds each rank to a core when there are at
 * most two). NABLA_NUM_THREADS or OMP_NUM_THREADS, when set, is the count,
 * and nothing is bound. */
#define _GNU_SOURCE
#include "team.h"
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TEAM 256

#ifdef __linux__
static cpu_set_t bound; /* this rank's cores, when bound_n */
#endif
static int bound_n;

static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    long n = strtol(v, NULL, 10); /* "4,2" (nested OpenMP lists): the first */
    return n > 0 ? (int)(n < MAX_TEAM ? n : MAX_TEAM) : 0;
}

nb_team_plan nb_team_plan_for(const nb_team_env *e)
{
    nb_team_plan p = {e->explicit_n, -1};
    if (p.n > 0) return p;
    int n = e->cpus > 0 ? e->cpus : e->online > 0 ? e->online : 1;
    if (e->quota > 0 && e->quota < n) n = e->quota < 1 ? 1 : (int)floor(e->quota);
    /* Bound already when the mask leaves out CPUs that are online: the
     * launcher gave this rank its cores. */
    bool unbound = e->cpus <= 0 || e->cpus >= e->online;
    if (e->local_size > 1 && unbound) {
        int per = n / e->local_size;
        if (per < 1) per = 1;
        if (per * e->local_size <= n && e->local_rank >= 0 && e->local_rank < e->local_size)
            p.bind_first = e->local_rank * per;
        n = per;
    }
    p.n = n < 1 ? 1 : n > MAX_TEAM ? MAX_TEAM : n;
    return p;
}

/* The cgroup's CPU quota in CPUs (cgroup v2's cpu.max, else v1's
 * cfs_quota_us over cfs_period_us); 0 when there is none. */
static double cgroup_quota(void)
{
    char path[512] = "", line[512];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char v1[512] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "0::", 3) == 0) snprintf(path, sizeof path, "%.400s", line + 3);
        char *c = strchr(line, ':'), *d = c ? strchr(c + 1, ':') : NULL;
        if (c && d && (strncmp(c + 1, "cpu:", 4) == 0 || strncmp(c + 1, "cpu,", 4) == 0))
            snprintf(v1, sizeof v1, "%.400s", d + 1);
    }
    fclose(f);
    char file[700];
    double quota = 0, period = 0;
    snprintf(file, sizeof file, "/sys/fs/cgroup%.500s/cpu.max", path);
    if ((f = fopen(file, "r"))) {
        if (fscanf(f, "%lf %lf", &quota, &period) != 2) quota = 0; /* "max 100000": none */
        fclose(f);
        return quota > 0 && period > 0 ? quota / period : 0;
    }
    const char *dirs[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"};
    for (int i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s%.500s/cpu.cfs_quota_us", dirs[i], v1);
        if (!(f = fopen(file, "r"))) continue;
        if (fscanf(f, "%lf", &quota) != 1) quota = 0;
        fclose(f);
        snprintf(file, sizeof file, "%s%.500s/cpu.cfs_period_us", dirs[i], v1);
        if ((f = fopen(file, "r"))) {
            if (fscanf(f, "%lf", &period) != 1) period = 0;
            fclose(f);
        }
        return quota > 0 && period > 0 ? quota / period : 0;
    }
    return 0;
}

int nb_team_default_size(void)
{
    nb_team_env e = {0};
    e.explicit_n = env_int("NABLA_NUM_THREADS");
    if (!e.explicit_n) e.explicit_n = env_int("OMP_NUM_THREADS");
    e.online = (int)sysconf(_SC_NPROCESSORS_ONLN);
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) e.cpus = CPU_COUNT(&set);
#endif
    if (!e.explicit_n) e.quota = cgroup_quota();
    /* Open MPI's names, then MPICH's. */
    e.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    e.local_rank =
        e.local_size ? atoi(getenv("OMPI_COMM_WORLD_LOCAL_RANK") ? getenv("OMPI_COMM_WORLD_LOCAL_RANK") : "-1") : -1;
    if (!e.local_size) {
        e.local_size = env_int("MPI_LOCALNRANKS");
        e.local_rank = getenv("MPI_LOCALRANKID") ? atoi(getenv("MPI_LOCALRANKID")) : -1;
    }
    nb_team_plan p = nb_team_plan_for(&e);
#ifdef __linux__
    if (p.bind_first >= 0) { /* this rank's cores: the mask's CPUs bind_first .. bind_first + n - 1 */
        cpu_set_t mine;
        CPU_ZERO(&mine);
        for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && k < p.bind_first + p.n; cpu++)
            if (CPU_ISSET(cpu, &set) && k++ >= p.bind_first) CPU_SET(cpu, &mine);
        if (sched_setaffinity(0, sizeof mine, &mine) == 0) { /* the calling thread */
            bound = mine;
            bound_n = p.n;
        }
    }
#endif
    return p.n;
}

void nb_team_bind_self(void)
{
#ifdef __linux__
    if (bound_n) sched_setaffinity(0, sizeof bound, &bound);
#endif
}
