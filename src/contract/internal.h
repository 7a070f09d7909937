/* Internal helpers shared by the library's C sources (not installed). */
#ifndef STRATA_INTERNAL_H
#define STRATA_INTERNAL_H

#include "strata/status.h"

#include <stddef.h>

#if defined(__GNUC__)
#define ST_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ST_PRINTF(a, b)
#endif

/* Records a detailed message for st_last_error() and returns S. */
st_status st_fail(st_status s, const char *fmt, ...) ST_PRINTF(2, 3);
void st_clear_error(void);
/* One user-facing line through the st_set_log() sink. */
void st_log(const char *fmt, ...) ST_PRINTF(1, 2);

/* Propagate a failure: every error path is one line. */
#define ST_TRY(expr)                          \
    do {                                      \
        st_status st_try_s_ = (expr);         \
        if (st_try_s_ != ST_OK) return st_try_s_; \
    } while (0)

#define ST_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
