/* Typed body of the attention kernels; attention.c includes it once per
 * dtype with T (the element type), SFX (a name suffix), EXP (its exp) and
 * GEMM(...) (the GEMM of T, taking the named fields of its arguments)
 * defined.
 *
 * Both passes walk the [T, S] scores in blocks of BQ queries by BK keys and
 * never hold more than one block of them. The products of a block go
 * through the GEMM (GEMM, nb_gemm_f32 or _f64), single-threaded inside the
 * parallel loop over blocks; the softmax and masking between them are
 * elementwise loops over a block's rows. */
#define ATT_CAT_(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT_(a, b)
#define FN(name) ATT_CAT(name, SFX)

/* One thread's scratch: a block of scores and one of their gradients, the
 * output rows of a query block, and each row's running maximum and sum. */
typedef struct FN(scratch) {
    T *s, *dp, *acc, *m, *l;
} FN(scratch);

static T *FN(scratch_new)(const att_geom *g, FN(scratch) *w)
{
    const int64_t acc = BQ * (g->Dv > BK ? g->Dv : BK); /* backward's dropped weights use it too */
    const int64_t n = 2 * BQ * BK + acc + 2 * BQ;
    T *p = nb_malloc((size_t)n * sizeof(T));
    if (!p) return NULL;
    w->s = p;
    w->dp = w->s + BQ * BK;
    w->acc = w->dp + BQ * BK;
    w->m = w->acc + acc;
    w->l = w->m + BQ;
    return p;
}

/* Scores of block b's queries (rows qb) against its keys (rows kb) into s
 * (row stride BK), masked. */
static void FN(score_block)(const att_geom *g, const att_block *b, const T *qb, const T *kb, const T *mask, T *s)
{
    const int64_t bh = b->bh, i0 = b->i0, nq = b->nq, j0 = b->j0, nk = b->nk;
    GEMM(.tb = true, .M = nq, .N = nk, .K = g->D, .alpha = (T)g->scale, .A = qb, .lda = g->ldq, .B = kb, .ldb = g->ldq,
         .C = s, .ldc = BK);
    for (int64_t ii = 0; ii < nq; ii++) {
        T *row = s + ii * BK;
        if (mask) {
            const T *mr = mask + g->mask_off[bh] + (i0 + ii) * g->mask_t + j0 * g->mask_s;
            for (int64_t jj = 0; jj < nk; jj++) row[jj] += mr[jj * g->mask_s];
        }
        if (g->causal)
            for (int64_t jj = i0 + ii + 1 - j0 < 0 ? 0 : i0 + ii + 1 - j0; jj < nk; jj++) row[jj] = -(T)INFINITY;
    }
}

/* The dropout factor of weight (bh, i, j): the uniform draw at that
 * position of the stream, as attention_dropout_mask draws it. */
static void FN(drop_row)(const att_geom *g, int64_t bh, int64_t i, int64_t j0, int64_t nk, T *row)
{
    const T keep = (T)(1.0 / (1.0 - g->p));
    const uint64_t base = (uint64_t)((bh * g->Tq + i) * g->Sk + j0);
    for (int64_t jj = 0; jj < nk; jj++) {
        nb_rng r = {g->key, g->counter + base + (uint64_t)jj};
        row[jj] *= nb_rng_uniform(&r) >= g->p ? keep : 0;
    }
}

/* The keys that query block [i0, i0 + nq) sees: all, or up to its last
 * query when causal. */
static int64_t FN(key_end)(const att_geom *g, int64_t i0, int64_t nq)
{
    return g->causal && i0 + nq < g->Sk ? i0 + nq : g->Sk;
}

/* Out and LSE of query block [i0, i0 + nq) of pair bh (online softmax). */
NB_SIMD_CLONES static void FN(forward_block)(const att_geom *g, const att_fwd_tensors *t, int64_t bh, int64_t i0,
                                             int64_t nq, FN(scratch) *w)
{
    const T *q = t->q, *k = t->k, *v = t->v, *mask = t->mask;
    T *out = t->out, *lse = t->lse;
    const int64_t Dv = g->Dv;
    const T *qb = q + att_q_off(g, bh) + i0 * g->ldq;
    const T *kb = k + att_k_off(g, bh), *vb = v + att_v_off(g, bh);
    for (int64_t ii = 0; ii < nq; ii++) w->m[ii] = -(T)INFINITY, w->l[ii] = 0;
    for (int64_t x = 0; x < nq * Dv; x++) w->acc[x] = 0;
    const int64_t end = FN(key_end)(g, i0, nq);
    for (int64_t j0 = 0; j0 < end; j0 += BK) {
        const int64_t nk = end - j0 < BK ? end - j0 : BK;
        const att_block b = {bh, i0, nq, j0, nk};
        FN(score_block)(g, &b, qb, kb + j0 * g->ldq, mask, w->s);
        for (int64_t ii = 0; ii < nq; ii++) {
            T *row = w->s + ii * BK, *acc = w->acc + ii * Dv;
            T mx = w->m[ii];
            for (int64_t jj = 0; jj < nk; jj++) mx = row[jj] > mx ? row[jj] : mx;
            if (mx == -(T)INFINITY) { /* nothing seen yet in this row */
                for (int64_t jj = 0; jj < nk; jj++) row[jj] = 0;
                continue;
            }
            const T alpha = EXP(w->m[ii] - mx);
            T sum = 0;
            for (int64_t jj = 0; jj < nk; jj++) {
                const T e = EXP(row[jj] - mx);
                row[jj] = e;
                sum += e;
            }
            w->l[ii] = w->l[ii] * alpha + sum;
            w->m[ii] = mx;
            if (alpha != 1)
                for (int64_t c = 0; c < Dv; c++) acc[c] *= alpha;
            if (g->p > 0) FN(drop_row)(g, bh, i0 + ii, j0, nk, row);
        }
        GEMM(.M = nq, .N = Dv, .K = nk, .alpha = 1, .A = w->s, .lda = BK, .B = vb + j0 * g->ldv, .ldb = g->ldv,
             .beta = 1, .C = w->acc, .ldc = Dv);
    }
    /* A row that saw no key gives zeros and LSE +inf, so that backward's
     * exp(score - LSE) is 0 there too. */
    for (int64_t ii = 0; ii < nq; ii++) {
        T *o = out + att_o_off(g, bh) + (i0 + ii) * g->ldv;
        const T *acc = w->acc + ii * Dv;
        if (w->l[ii] == 0) {
            for (int64_t c = 0; c < Dv; c++) o[c] = 0;
            lse[bh * g->Tq + i0 + ii] = (T)INFINITY;
            continue;
        }
        const T inv = 1 / w->l[ii];
        for (int64_t c = 0; c < Dv; c++) o[c] = acc[c] * inv;
        lse[bh * g->Tq + i0 + ii] = w->m[ii] + (T)log((double)w->l[ii]);
    }
}

typedef struct FN(forward_job) {
    const att_geom *g;
    const att_fwd_tensors *t;
    int64_t nqb, tasks;
    _Atomic int64_t next_task;
    atomic_bool failed;
} FN(forward_job);

/* Query blocks are handed out one at a time: under a causal mask the later
 * ones see more keys and cost more. */
static void FN(forward_share)(void *arg, int t, int nt)
{
    FN(forward_job) *j = arg;
    FN(scratch) w = {0};
    T *mem = FN(scratch_new)(j->g, &w);
    if (!mem) {
        atomic_store(&j->failed, true);
        return;
    }
    const int64_t Tq = j->g->Tq;
    for (int64_t task; (task = atomic_fetch_add_explicit(&j->next_task, 1, memory_order_relaxed)) < j->tasks;) {
        const int64_t bh = task / j->nqb, i0 = (task % j->nqb) * BQ;
        FN(forward_block)(j->g, j->t, bh, i0, Tq - i0 < BQ ? Tq - i0 : BQ, &w);
    }
    nb_free(mem);
}

static bool FN(attention_forward)(const att_geom *g, const att_fwd_tensors *t)
{
    const int64_t nqb = (g->Tq + BQ - 1) / BQ, tasks = g->bh * nqb;
    const bool par = g->work >= ATT_PAR_MIN_WORK && tasks > 1;
    FN(forward_job) j = {g, t, nqb, tasks, 0, false};
    const int size = nb_team_size();
    nb_team_run(!par ? 1 : tasks < size ? (int)tasks : size, FN(forward_share), &j);
    return !atomic_load(&j.failed);
}

/* DQ, DK and DV of one pair bh. DK and DV gather over every query block, so
 * a pair is one task. */
NB_SIMD_CLONES static void FN(backward_pair)(const att_geom *g, const att_bwd_tensors *t, int64_t bh, FN(scratch) *w)
{
    const T *q = t->q, *k = t->k, *v = t->v, *mask = t->mask, *lse = t->lse, *dout = t->dout, *delta = t->delta;
    T *dq = t->dq, *dk = t->dk, *dv = t->dv;
    const int64_t D = g->D, Dv = g->Dv, T_ = g->Tq, S = g->Sk, ldq = g->ldq, ldv = g->ldv;
    const T scale = (T)g->scale;
    const T *kb = k + att_k_off(g, bh), *vb = v + att_v_off(g, bh);
    T *dkb = dk + att_k_off(g, bh), *dvb = dv + att_v_off(g, bh);
    for (int64_t j = 0; j < S; j++) {
        for (int64_t d = 0; d < D; d++) dkb[j * ldq + d] = 0;
        for (int64_t d = 0; d < Dv; d++) dvb[j * ldv + d] = 0;
    }
    for (int64_t i0 = 0; i0 < T_; i0 += BQ) {
        const int64_t nq = T_ - i0 < BQ ? T_ - i0 : BQ;
        const T *qb = q + att_q_off(g, bh) + i0 * ldq;
        const T *dob = dout + att_o_off(g, bh) + i0 * ldv;
        const T *lb = lse + bh * T_ + i0, *deb = delta + bh * T_ + i0;
        T *dqb = dq + att_q_off(g, bh) + i0 * ldq;
        for (int64_t ii = 0; ii < nq; ii++)
            for (int64_t d = 0; d < D; d++) dqb[ii * ldq + d] = 0;
        const int64_t end = FN(key_end)(g, i0, nq);
        for (int64_t j0 = 0; j0 < end; j0 += BK) {
            const int64_t nk = end - j0 < BK ? end - j0 : BK;
            T *p = w->s, *dp = w->dp;
            const att_block b = {bh, i0, nq, j0, nk};
            FN(score_block)(g, &b, qb, kb + j0 * ldq, mask, p);
            for (int64_t ii = 0; ii < nq; ii++) {
                T *row = p + ii * BK;
                const T l = lb[ii];
                for (int64_t jj = 0; jj < nk; jj++) row[jj] = EXP(row[jj] - l);
            }
            /* dp = DOut V^T: the gradient of the (dropped) weights. */
            GEMM(.tb = true, .M = nq, .N = nk, .K = Dv, .alpha = 1, .A = dob, .lda = ldv, .B = vb + j0 * ldv,
                 .ldb = ldv, .C = dp, .ldc = BK);
            if (g->p > 0) {
                /* Z = the dropout factors: DV takes (P Z)^T DOut, and the
                 * weights' gradient is dp Z. The block of dp makes room for
                 * P Z only after it is used, so P Z goes through the
                 * output rows' scratch, which backward does not need. */
                T *pz = w->acc;
                for (int64_t ii = 0; ii < nq; ii++) {
                    T *pr = pz + ii * BK;
                    for (int64_t jj = 0; jj < nk; jj++) pr[jj] = p[ii * BK + jj];
                    FN(drop_row)(g, bh, i0 + ii, j0, nk, pr);
                    FN(drop_row)(g, bh, i0 + ii, j0, nk, dp + ii * BK);
                }
                GEMM(.ta = true, .M = nk, .N = Dv, .K = nq, .alpha = 1, .A = pz, .lda = BK, .B = dob, .ldb = ldv,
                     .beta = 1, .C = dvb + j0 * ldv, .ldc = ldv);
            } else {
                GEMM(.ta = true, .M = nk, .N = Dv, .K = nq, .alpha = 1, .A = p, .lda = BK, .B = dob, .ldb = ldv,
                     .beta = 1, .C = dvb + j0 * ldv, .ldc = ldv);
            }
            /* The scores' gradient, scaled once for both DQ and DK. */
            for (int64_t ii = 0; ii < nq; ii++) {
                const T di = deb[ii];
                const T *pr = p + ii * BK;
                T *dr = dp + ii * BK;
                for (int64_t jj = 0; jj < nk; jj++) dr[jj] = pr[jj] * (dr[jj] - di) * scale;
            }
            GEMM(.M = nq, .N = D, .K = nk, .alpha = 1, .A = dp, .lda = BK, .B = kb + j0 * ldq, .ldb = ldq, .beta = 1,
                 .C = dqb, .ldc = ldq);
            GEMM(.ta = true, .M = nk, .N = D, .K = nq, .alpha = 1, .A = dp, .lda = BK, .B = qb, .ldb = ldq, .beta = 1,
                 .C = dkb + j0 * ldq, .ldc = ldq);
        }
    }
}

typedef struct FN(backward_job) {
    const att_geom *g;
    const att_bwd_tensors *t;
    atomic_bool failed;
} FN(backward_job);

/* Pairs cost the same, so each share takes an even range of them. */
static void FN(backward_share)(void *arg, int t, int nt)
{
    FN(backward_job) *j = arg;
    const int64_t lo = j->g->bh * t / nt, hi = j->g->bh * (t + 1) / nt;
    if (lo >= hi) return;
    FN(scratch) w = {0};
    T *mem = FN(scratch_new)(j->g, &w);
    if (!mem) {
        atomic_store(&j->failed, true);
        return;
    }
    for (int64_t bh = lo; bh < hi; bh++) FN(backward_pair)(j->g, j->t, bh, &w);
    nb_free(mem);
}

static bool FN(attention_backward)(const att_geom *g, const att_bwd_tensors *t)
{
    const bool par = g->work >= ATT_PAR_MIN_WORK && g->bh > 1;
    FN(backward_job) j = {g, t, false};
    const int size = nb_team_size();
    nb_team_run(!par ? 1 : g->bh < size ? (int)g->bh : size, FN(backward_share), &j);
    return !atomic_load(&j.failed);
}

/* attention_dropout_mask: the factor of every weight. */
static void FN(dropout_mask)(const att_geom *g, T *out)
{
    const T keep = (T)(1.0 / (1.0 - g->p));
    const int64_t n = g->bh * g->Tq * g->Sk;
    for (int64_t x = 0; x < n; x++) {
        nb_rng r = {g->key, g->counter + (uint64_t)x};
        out[x] = g->p > 0 && nb_rng_uniform(&r) < g->p ? 0 : keep;
    }
}

#undef FN
#undef ATT_CAT
#undef ATT_CAT_
