/* strata-tune: the dispatch configuration read from the knobs. */
#ifndef STRATA_KNOBS_H
#define STRATA_KNOBS_H

#include "strata/version.h"

#include "strata/status.h"
#include "strata/variants.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
#define ST_KNOB_ENUM_(id, env, when, what) ST_KNOB_##id,
    STRATA_DISPATCH_KNOBS(ST_KNOB_ENUM_)
#undef ST_KNOB_ENUM_
    ST_KNOB_COUNT
} st_knob;

/* Which knobs are active. Read once (st_dispatch_config_from_env) and then
 * owned by a decode context; the launchers consult only this struct. */
typedef struct {
    bool active[ST_KNOB_COUNT];
} st_dispatch_config;

/* Environment variable name of a knob ("STRATA_NO_SUB16_GU"). */
ST_API const char *st_knob_env(st_knob k);
/* Human description of the path a knob selects. */
ST_API const char *st_knob_what(st_knob k);
/* The reroute condition as text: "set (not empty, not 0)" or "=0" / "=1". */
ST_API const char *st_knob_when(st_knob k);
/* Whether VALUE (NULL = unset) activates knob K. */
ST_API bool st_knob_value_active(st_knob k, const char *value);

/* All knobs off (the default dispatch). */
ST_API void st_dispatch_config_default(st_dispatch_config *cfg);
/* Reads every knob from the process environment. */
ST_API void st_dispatch_config_from_env(st_dispatch_config *cfg);
/* The first active knob, or -1 when none is active. */
ST_API int st_dispatch_config_first_active(const st_dispatch_config *cfg);
/* Short name of the knob setting, as it appears in refusal messages:
 * "STRATA_NO_SUB16_GU" or "STRATA_IQ_STAGE_GRID=0". */
ST_API const char *st_knob_label(st_knob k);

#ifdef __cplusplus
}
#endif
#endif
