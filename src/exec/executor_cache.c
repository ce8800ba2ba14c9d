/* nb_executor_run: a cache of prepared programs so that a training loop that
 * calls run with the same program, feeds and fetches prepares once. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/executor.h"

#define CACHE_SIZE 16

typedef struct entry {
    nb_program *program;
    uint64_t version;
    char *key; /* feed and fetch names, joined */
    nb_prepared *prepared;
    uint64_t last_used;
} entry;

struct nb_executor {
    entry entries[CACHE_SIZE];
    uint64_t clock;
};

nb_status nb_executor_new(nb_executor **out)
{
    *out = nb_calloc(1, sizeof **out);
    return *out ? NB_OK : nb_error(NB_ERR_NOMEM, "executor: out of memory");
}

static void entry_clear(entry *e)
{
    nb_prepared_free(e->prepared);
    nb_free(e->key);
    memset(e, 0, sizeof *e);
}

void nb_executor_free(nb_executor *e)
{
    if (!e) return;
    for (int i = 0; i < CACHE_SIZE; i++) entry_clear(&e->entries[i]);
    nb_free(e);
}

static char *make_key(int n_feed, const nb_feed *feeds, int n_fetch, const char *const *fetch)
{
    size_t len = 4;
    for (int i = 0; i < n_feed; i++) len += strlen(feeds[i].name ? feeds[i].name : "") + 1;
    for (int i = 0; i < n_fetch; i++) len += strlen(fetch[i] ? fetch[i] : "") + 1;
    char *k = nb_malloc(len), *p = k;
    if (!k) return NULL;
    for (int i = 0; i < n_feed; i++) p += sprintf(p, "%s\x1f", feeds[i].name ? feeds[i].name : "");
    *p++ = '\x1e';
    for (int i = 0; i < n_fetch; i++) p += sprintf(p, "%s\x1f", fetch[i] ? fetch[i] : "");
    *p = '\0';
    return k;
}

/* Which of the lists is unusable, said so that the caller need not guess. */
static nb_status check_lists(nb_feeds feeds, nb_names fetches, nb_tensor **fetched)
{
    if (feeds.n < 0 || fetches.n < 0)
        return nb_error(NB_ERR_ARG, "executor run: %d feeds and %d fetches: a count cannot be negative", feeds.n,
                        fetches.n);
    if (feeds.n && !feeds.v)
        return nb_error(NB_ERR_ARG, "executor run: %d feed%s but no array of them (NULL)", feeds.n,
                        feeds.n == 1 ? "" : "s");
    if (fetches.n && !fetches.v)
        return nb_error(NB_ERR_ARG, "executor run: %d fetch%s but no array of their names (NULL)", fetches.n,
                        fetches.n == 1 ? "" : "es");
    if (fetches.n && !fetched)
        return nb_error(NB_ERR_ARG,
                        "executor run: %d fetch%s ('%s'%s) but nowhere to put the result: the output "
                        "array is NULL",
                        fetches.n, fetches.n == 1 ? "" : "es", fetches.v[0] ? fetches.v[0] : "(null)",
                        fetches.n > 1 ? ", ..." : "");
    return NB_OK;
}

nb_status nb_executor_run(nb_executor *e, nb_program *p, nb_scope *scope, nb_feeds feed_list, nb_names fetch_list,
                          nb_tensor **fetched)
{
    int n_feed = feed_list.n, n_fetch = fetch_list.n;
    const nb_feed *feeds = feed_list.v;
    const char *const *fetch_names = fetch_list.v;
    nb_status st = check_lists(feed_list, fetch_list, fetched);
    if (st) return st;
    for (int i = 0; i < n_fetch; i++) fetched[i] = NULL;
    if (!e || !p || !scope) return nb_error(NB_ERR_ARG, "executor run: NULL executor, program or scope");
    char *key = make_key(n_feed, feeds, n_fetch, fetch_names);
    if (!key) return nb_error(NB_ERR_NOMEM, "executor: out of memory");
    entry *hit = NULL, *victim = &e->entries[0];
    for (int i = 0; i < CACHE_SIZE; i++) {
        entry *en = &e->entries[i];
        if (en->prepared && en->program == p && en->version == p->version && !strcmp(en->key, key)) {
            hit = en;
            break;
        }
        if (!en->prepared || en->last_used < victim->last_used) victim = en;
    }
    if (!hit) {
        const char **feed_names = nb_calloc((size_t)n_feed + 1, sizeof *feed_names);
        if (!feed_names) {
            nb_free(key);
            return nb_error(NB_ERR_NOMEM, "executor: out of memory");
        }
        for (int i = 0; i < n_feed; i++) feed_names[i] = feeds[i].name;
        nb_prepared *pp;
        st = nb_prepare(&pp, p, 0, NB_NAMES_N(n_feed, feed_names), NB_NAMES_N(n_fetch, fetch_names));
        nb_free(feed_names);
        if (st) {
            nb_free(key);
            return st;
        }
        entry_clear(victim);
        *victim = (entry){.program = p, .version = p->version, .key = key, .prepared = pp};
        hit = victim;
        key = NULL;
    }
    nb_free(key);
    hit->last_used = ++e->clock;
    nb_tensor *stack_feeds[16], **tensors = n_feed <= 16 ? stack_feeds : nb_calloc((size_t)n_feed, sizeof *tensors);
    if (!tensors) return nb_error(NB_ERR_NOMEM, "executor: out of memory");
    for (int i = 0; i < n_feed; i++) tensors[i] = feeds[i].tensor;
    st = nb_prepared_run(hit->prepared, scope, tensors, fetched);
    if (tensors != stack_feeds) nb_free(tensors);
    return st;
}
