/* The timing method the tuner and the benchmark share: candidates measured
 * round-robin (the order rotated each round so drift hits all alike), each
 * round a batch of launches between two device events (weights rotated by
 * the caller through the launch index), warm-up first, median of rounds with
 * the quartiles and extremes kept. Internal. */
#ifndef ST_MEASURE_H
#define ST_MEASURE_H

#include "strata/decode.h"

#include <stdbool.h>

#define ST_MEASURE_MAX_ROUNDS 64

/* Launches candidate CAND once; ITER counts launches (use it to rotate
 * weight copies). */
typedef st_status (*st_launch_fn)(void *user, int cand, long iter);

typedef struct {
    int n_cand;
    int rounds;  /* timed rounds per candidate (<= ST_MEASURE_MAX_ROUNDS) */
    int batch;   /* launches per timed round; 0 = chosen from a probe so a round lasts >= ~1 ms */
    int warmup;  /* untimed launches per candidate first */
    st_launch_fn fn;
    void *user;
    volatile int *stop;
    double *samples; /* optional: every round's time per launch, [n_cand][rounds] */
} st_measure_spec;

typedef struct {
    double median_us, p25_us, p75_us, min_us, max_us; /* per launch */
    double spread;                                     /* (p75 - p25) / median */
    int rounds, batch;
} st_timing;

/* Fills OUT[0..n_cand). ST_ERR_INTERRUPTED when *stop became non-zero. */
st_status st_measure(st_ctx *ctx, const st_measure_spec *spec, st_timing *out);

/* Median/quartiles of N samples (sorted in place). */
void st_timing_from_samples(double *us, int n, st_timing *t);

/* The distribution-free confidence interval of the median of N samples
 * (sorted in place): [x(k), x(n+1-k)] of the order statistics, with the
 * largest k whose two-sided coverage, from the binomial distribution, is at
 * least CONF. *MEDIAN is the sample median. Returns the coverage reached:
 * below CONF only when N is too small for it (then the interval is
 * [min, max]); 0 for N < 1. */
double st_median_ci(double *x, int n, double conf, double *median, double *lo, double *hi);

/* The copies of a matrix set of ONE bytes a timing rotates over, so that
 * every launch reads its weights from memory: a pass over them streams at
 * least FLOOR bytes and at least 4 times LLC (the last-level cache), with
 * at least MIN_COPIES, at most ST_ROTATION_MAX_COPIES copies and 6 GiB;
 * *SHORT (may be NULL) tells when those caps leave it below 4 x LLC (a
 * matrix smaller than 4 x LLC / ST_ROTATION_MAX_COPIES). */
#define ST_ROTATION_MAX_COPIES 65536
int st_rotation_copies(size_t one, size_t llc, size_t floor, int min_copies, bool *short_of_rule);

#endif
