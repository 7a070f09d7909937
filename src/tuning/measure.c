#include "measure.h"
#include "strata/probe.h"
#include "tools_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *s, int n, double q)
{
    if (n == 1) return s[0];
    double pos = q * (n - 1);
    int i = (int)pos;
    double f = pos - i;
    return i + 1 < n ? s[i] * (1 - f) + s[i + 1] * f : s[n - 1];
}

void st_timing_from_samples(double *us, int n, st_timing *t)
{
    memset(t, 0, sizeof *t);
    if (n <= 0) return;
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    t->median_us = quantile(us, n, 0.5);
    t->p25_us = quantile(us, n, 0.25);
    t->p75_us = quantile(us, n, 0.75);
    t->min_us = us[0];
    t->max_us = us[n - 1];
    t->spread = t->median_us > 0 ? (t->p75_us - t->p25_us) / t->median_us : 0;
    t->rounds = n;
}

double st_median_ci(double *x, int n, double conf, double *median, double *lo, double *hi)
{
    *median = *lo = *hi = 0;
    if (n < 1) return 0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    *median = quantile(x, n, 0.5);
    /* P(B <= j) for B ~ Binomial(n, 1/2), summed in log space so that any n
     * works; the interval [x(k), x(n+1-k)] covers the median with
     * probability 1 - 2 P(B <= k-1). */
    const double ln2n = n * log(2.0), lgn = lgamma(n + 1.0);
    double tail = exp(-ln2n); /* P(B <= 0) */
    double reached = 1 - 2 * tail;
    int k = 1;
    for (int kk = 2; 2 * kk <= n + 1; kk++) {
        tail += exp(lgn - lgamma(kk) - lgamma(n - kk + 2.0) - ln2n); /* P(B = kk - 1) */
        const double cover = 1 - 2 * tail;
        if (cover < conf) break;
        k = kk;
        reached = cover;
    }
    *lo = x[k - 1];
    *hi = x[n - k];
    return reached;
}

static st_status timed_batch(st_ctx *ctx, const st_measure_spec *s, int cand, int batch, long *iter, double *us)
{
    double ms = 0;
    ST_TRY(st_ctx_timer_start(ctx));
    for (int b = 0; b < batch; b++) ST_TRY(s->fn(s->user, cand, (*iter)++));
    ST_TRY(st_ctx_timer_stop(ctx, &ms));
    *us = ms * 1000.0 / batch;
    return ST_OK;
}

st_status st_measure(st_ctx *ctx, const st_measure_spec *s, st_timing *out)
{
    const int rounds = s->rounds < 1 ? 1 : s->rounds > ST_MEASURE_MAX_ROUNDS ? ST_MEASURE_MAX_ROUNDS : s->rounds;
    long iter = 0;
    for (int c = 0; c < s->n_cand; c++)
        for (int w = 0; w < s->warmup; w++) ST_TRY(s->fn(s->user, c, iter++));
    /* Batch size: enough launches that a timed round lasts about 1 ms, so
     * event resolution and launch gaps do not dominate small shapes. */
    int batch = s->batch;
    if (batch <= 0) {
        double us = 0;
        ST_TRY(timed_batch(ctx, s, 0, 4, &iter, &us));
        batch = us > 0 ? (int)(1000.0 / us) : 64;
        if (batch < 2) batch = 2;
        if (batch > 256) batch = 256;
    }
    double *samples = calloc((size_t)s->n_cand * (size_t)rounds, sizeof *samples);
    if (!samples) return st_fail(ST_ERR_NOMEM, "measure: out of memory");
    st_status st = ST_OK;
    for (int r = 0; r < rounds && st == ST_OK; r++) {
        for (int k = 0; k < s->n_cand && st == ST_OK; k++) {
            if (s->stop && *s->stop) {
                st = st_fail(ST_ERR_INTERRUPTED, "interrupted");
                break;
            }
            const int c = (k + r) % s->n_cand; /* rotate the order each round */
            st = timed_batch(ctx, s, c, batch, &iter, &samples[(size_t)c * rounds + r]);
        }
    }
    if (st == ST_OK)
        for (int c = 0; c < s->n_cand; c++) {
            if (s->samples) memcpy(s->samples + (size_t)c * rounds, samples + (size_t)c * rounds, sizeof *samples * (size_t)rounds);
            st_timing_from_samples(samples + (size_t)c * rounds, rounds, &out[c]);
            out[c].batch = batch;
        }
    free(samples);
    return st;
}

int st_rotation_copies(size_t one, size_t llc, size_t floor, int min_copies, bool *short_of_rule)
{
    const size_t cap = (size_t)6 << 30;
    size_t want = floor > 4 * llc ? floor : 4 * llc;
    if (one == 0) one = 1;
    size_t copies = (want + one - 1) / one;
    if (copies < (size_t)(min_copies > 0 ? min_copies : 1)) copies = (size_t)(min_copies > 0 ? min_copies : 1);
    if (copies > ST_ROTATION_MAX_COPIES) copies = ST_ROTATION_MAX_COPIES;
    while (copies > 1 && copies * one > cap) copies--;
    if (short_of_rule) *short_of_rule = copies * one < 4 * llc;
    return (int)copies;
}
