/* A shape's candidates, their timings, and the rules that decide among
 * them (tuner_decide.c): the keep rule, the re-tune rule, the campaign
 * verdict. Tested with scripted timings (tests/tuning/decide_test.c).
 * Internal to the tools library. */
#ifndef ST_TUNER_DECIDE_H
#define ST_TUNER_DECIDE_H

#include "measure.h"
#include "strata/limits.h"
#include "strata/variants.h"
#include "tuner_shapes.h"

#include <stdbool.h>
#include <stddef.h>

#define ST_TUNE_MAX_CAND 24
_Static_assert(1 + STRATA_MMVQ_VARIANT_COUNT <= ST_TUNE_MAX_CAND && 1 + STRATA_EXPERT_VARIANT_COUNT <= ST_TUNE_MAX_CAND,
               "every variant and the default must fit a shape's candidates");
#define ST_TUNE_MAX_NT ST_MAX_TOKENS

typedef struct {
    char name[32];
    int rows, gu_rows, dn_rows; /* 0 = default chain */
    bool same_launch;           /* identical to the default's launch */
    bool bytes_match;           /* output bytes equal the default's (all token counts) */
    char mismatch[160];
    st_timing t[ST_TUNE_MAX_NT];  /* per token count of the mix (expert: [0]) */
    double blended_us;            /* sum of medians over the mix */
    double blended_p25, blended_p75;
    double round_us[ST_MEASURE_MAX_ROUNDS]; /* round r's times summed over the mix */
    /* The paired change of this candidate's time against the default's,
     * round by round (this/default - 1; + is slower): median and 95%
     * interval (st_tune_decide; the interval is split over the candidates compared). */
    double change, change_lo, change_hi;
} st_tune_cand;

typedef struct {
    st_tune_shape shape;
    int n_cand;
    st_tune_cand cand[ST_TUNE_MAX_CAND];
    int nts[ST_TUNE_MAX_NT];
    int n_nts;
    int n_rounds;    /* rounds measured per token count (round_us[0..n_rounds)) */
    int best;        /* index of the kept candidate (0 = default) */
    double delta;    /* (default - kept) / default, fraction */
    /* The best candidate measured faster than the default beyond the
     * threshold, but its interval reaches inside it: not told apart from
     * the noise, so the default is kept (a noisy decision never adopts). */
    bool noisy;
    int previous;    /* the previous table's choice (candidate index), -1 when it had none */
    char reason[320];
    size_t rotation_bytes; /* weights streamed per rotation cycle */
    int copies;
    bool rotation_short;   /* the rotation is below 4x the last-level cache (copies capped) */
} st_tune_shape_result;

/* The keep rule (tuner_decide.c), on R's per-round times: every eligible
 * candidate's paired change against the default (median and 95% interval);
 * the best is kept only when its whole interval is faster than the
 * threshold THR. Otherwise the default stays and the reason says why (the
 * noise, or a gain within the threshold). Sets best, delta, noisy, reason. */
void st_tune_decide(st_tune_shape_result *r, double thr);

/* The re-tune rule: R->previous is the choice of the table this run
 * replaces. An earlier choice is changed only when the new one is faster
 * than it beyond THR, with its whole paired interval; otherwise the
 * previous choice stays and the reason says why. Returns whether the final
 * choice differs from the previous one. */
bool st_tune_keep_previous(st_tune_shape_result *r, double thr);

/* The campaign verdict of one kernel family ("expert: 7 shapes, default
 * kept on all 7 (default 67.9-73.1 us, best rows 8/8 within 1.0%)") into
 * BUF; false when no shape is of KIND. */
bool st_tune_campaign(const st_tune_shape_result *r, int n, st_shape_kind kind, double thr, char *buf, size_t len);
#endif
