/* The gate's timing verdict for one token count, separated from the decode
 * step so that its rule is tested with scripted timings
 * (tests/tuning/verify_test.c). */
#ifndef STRATA_VERIFY_INTERNAL_H
#define STRATA_VERIFY_INTERNAL_H

#include "measure.h"
#include "strata/status.h"

#include <stdbool.h>

/* The most rounds the gate measures for one token count. */
#define ST_GATE_MAX_ROUNDS 4096

/* One batch of ROUNDS interleaved rounds: BASE[i] and WITH[i] are round i's
 * step times (us) without and with the table, *SECONDS the wall time the
 * batch took. */
typedef st_status (*st_gate_measure_fn)(void *user, int rounds, double *base, double *with, double *seconds);

typedef struct {
    double max_slowdown; /* fraction */
    int rounds;          /* the first batch (at least 6) */
    int max_rounds;      /* in all, at most ST_GATE_MAX_ROUNDS */
    double budget_s;     /* no further batch once this much time was measured */
    double confidence;   /* of the interval, e.g. 0.95 */
} st_gate_rule;

typedef enum { ST_STEP_WITHIN, ST_STEP_SLOWER, ST_STEP_UNDECIDED } st_step_verdict;

typedef struct {
    st_step_verdict verdict;
    /* The paired per-round change of the step time with the table,
     * with/without - 1: the median over the rounds and its interval. */
    double change, lo, hi;
    double confidence; /* the interval's coverage */
    st_timing base, with;
    int rounds;
    double seconds;
} st_gate_step;

/* The rule: measures a first batch, then judges the interval of the median
 * paired change: WITHIN when its upper end is within MAX_SLOWDOWN, SLOWER
 * when its lower end is beyond it, else (the noise is wider than what is to
 * be told) measures as many rounds again, while the rounds and the time
 * budget allow; UNDECIDED when they run out first. Logs each extension
 * unless QUIET. */
st_status st_gate_judge(st_gate_measure_fn measure, void *user, const st_gate_rule *rule, int nt, bool quiet,
                        st_gate_step *out);

/* The steps array of a gate's result (verify_report.c): one object per
 * token count measured, as the tuner's report and the verify report
 * write it. */
#include <cjson/cJSON.h>
#include "strata/tools/verify.h"
cJSON *st_json_verify_steps(const st_verify_result *g);

#endif
