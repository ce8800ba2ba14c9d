/* nb_ddp's insides, shared by ddp.c (buckets during backward) and
 * src/optim/zero_optimizer.c (ZeRO stage 1: the sharded optimiser step).
 *
 * The buckets lie one after the other in one flat buffer, in the order
 * their parameters are in order[] (reverse creation order), each at an
 * offset aligned to its dtype: for a model of one dtype the gradients of
 * all parameters form one contiguous vector, which ZeRO cuts into the
 * ranks' shards. */
#ifndef NABLA_DDP_INTERNAL_H
#define NABLA_DDP_INTERNAL_H

#include "nabla/data_parallel.h"
#include "../comm/comm_internal.h"

typedef struct bucket {
    int first, count; /* its parameters: order[first .. first+count) */
    int64_t numel;
    nb_dtype dtype;
    size_t offset;          /* of buf in the flat buffer, in bytes */
    char *buf;              /* packed gradients: its part of the flat buffer */
    int pending;            /* parameters not ready yet this step */
    nb_comm_request *req;   /* while its all-reduce runs */
    bool started, finished; /* this step */
    double t_start, t_done;
} bucket;

typedef struct param_hook {
    struct nb_ddp *d;
    int param;
} param_hook;

typedef struct nb_zero nb_zero; /* src/optim/zero_optimizer.c */

struct nb_ddp {
    nb_comm *comm;
    nb_builder *b;
    int n_params;
    nb_tensor **params; /* retained, in creation order */
    param_hook *hooks;  /* one per parameter: the hook's ctx */
    int *order;         /* parameter indices, reverse creation order */
    int *bucket_of;     /* per parameter */
    bucket *buckets;
    int n_buckets;
    char *flat; /* every bucket's buffer */
    /* Per parameter, in order[]'s order, for a transport that all-reduces
     * gradients where they lie (nb_comm_allreduce_parts): a bucket's
     * sources (its gradients, retained in held, or its part of flat), the
     * new gradients the sums go to (fresh; ZeRO: its part of flat), and
     * their sizes. */
    const void **src;
    void **dst;
    int64_t *counts;
    nb_tensor **held, **fresh;
    int next;         /* the next bucket to start */
    bool active;      /* inside nb_ddp_backward */
    nb_status failed; /* a hook's failure, reported at the end */
    double t_backward_end;
    nb_comm_spans spans; /* this step's all-reduces, as they finish */
    /* nb_ddp_set_optimizer's (the caller's), NULL unless set: then
     * nb_ddp_backward leaves the buckets open (deferred) and nb_ddp_step
     * finishes each and updates its parameters. */
    struct nb_eager_optimizer *step_opt;
    void (*step_opt_release)(struct nb_eager_optimizer *); /* nb_ddp_free lets it go through this */
    bool deferred;
    nb_zero *zero;                  /* NULL unless nb_ddp_shard_optimizer */
    void (*zero_free)(nb_zero *);   /* frees it: optim sits above dist */
    int64_t shard_begin, shard_end; /* ZeRO: the flat values whose sums this rank updates */
    nb_ddp_stats stats;
};

/* Waits for bucket k's all-reduce (started) and gives its parameters
 * their averaged gradients (ZeRO: leaves them in the bucket). */
nb_status nb_ddp_finish_bucket(nb_ddp *d, int k);
/* Starts the buckets not started yet and finishes those from `from` on
 * not finished yet; after a failure completes every open all-reduce
 * before returning it. */
nb_status nb_ddp_finish(nb_ddp *d, int from);

#endif
