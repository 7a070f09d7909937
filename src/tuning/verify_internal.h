/* The gate's timing verdict for one token count, separated from the decode
 * step so that its rule is tested with scripted timings
 * (tests/verify_test.c). */
#ifndef STRATA_VERIFY_INTERNAL_H
#define STRATA_VERIFY_INTERNAL_H

#include "measure.h"
#include "strata/status.h"

#include <stdbool.h>

/* One interleaved measurement of the step without (BASE) and with (WITH)
 * the table. */
typedef st_status (*st_gate_measure_fn)(void *user, st_timing *base, st_timing *with);

/* Measures once; when that says slower (the median beyond MAX_SLOWDOWN, a
 * fraction, AND the interquartile ranges apart: a difference inside the
 * noise is not evidence), logs "measuring again to confirm" (unless QUIET)
 * and measures again. *SLOWER is the second measurement's verdict then (a
 * slowdown is refused only when seen twice), else false. BASE/WITH hold
 * the measurement the verdict rests on. */
st_status st_gate_judge(st_gate_measure_fn measure, void *user, double max_slowdown, int nt, bool quiet,
                        st_timing *base, st_timing *with, bool *slower);

#endif
