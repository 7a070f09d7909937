/* The gate (verify.c): the token counts a step is measured at, the timing
 * verdict for one token count, separated from the decode step so that its
 * rule is tested with scripted timings (tests/tuning/verify_test.c), and
 * the tuner's way in. Internal to the tools library. */
#ifndef STRATA_VERIFY_INTERNAL_H
#define STRATA_VERIFY_INTERNAL_H

#include "measure.h"
#include "strata/limits.h"
#include "strata/status.h"
#include "strata/tools/tuner.h"
#include "strata/tools/verify.h"
#include "tuner_decide.h"

#include <stdbool.h>

/* The token counts a whole decode step is measured at (the gate, bench):
 * 1..ST_DECODE_TOKENS and the common verify batches 16, 24, 32 up to
 * ST_MAX_TOKENS. Fills NTS (ST_MAX_TOKENS entries), returns the count. */
static inline int st_step_token_counts(int *nts)
{
    int n = 0;
    for (int i = 1; i <= ST_DECODE_TOKENS && i <= ST_MAX_TOKENS; i++) nts[n++] = i;
    for (int i = 16; i <= ST_MAX_TOKENS; i += 8) nts[n++] = i;
    return n;
}

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

/* The tuner's gate (verify.c): the model when one was given, else the
 * tuned shapes R[0..N) as a synthetic one-layer model, against the table
 * at TABLE_PATH. */
st_status st_tune_gate(st_ctx *ctx, const st_tune_options *o, const st_tune_shape_result *r, int n, const char *table_path,
                       st_verify_result *vr);

#endif
