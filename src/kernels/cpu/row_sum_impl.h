/* Typed: an _impl.h includes it with T (the element type) and FN (its name
 * suffixing) defined, once per dtype.
 *
 * The sum of a contiguous row in double, kept in sixteen independent lanes
 * so that the loop vectorises without reassociating one running total (and
 * is a little more accurate for it). One serial double add per element, the
 * way these sums were first written, runs at the add's latency: a twentieth
 * of what the core can do. Sixteen lanes are four chains of 256-bit adds,
 * enough to cover a four-cycle latency; with eight, batch norm's statistics
 * over planes already in L1 took as long as the pass that read them from
 * memory. */
#ifndef ROW_LANES
#define ROW_LANES 16
#endif

static inline double FN(lanes_total8)(const double *a)
{
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

static inline double FN(lanes_total)(const double *a)
{
    double h[8];
    for (int u = 0; u < 8; u++) h[u] = a[u] + a[u + 8];
    return FN(lanes_total8)(h);
}

static inline double FN(row_sum)(const T *x, int64_t n)
{
    double a[ROW_LANES] = {0};
    int64_t j = 0;
    for (; j + ROW_LANES <= n; j += ROW_LANES)
        for (int u = 0; u < ROW_LANES; u++) a[u] += x[j + u];
    for (; j < n; j++) a[0] += x[j];
    return FN(lanes_total)(a);
}
