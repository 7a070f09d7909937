/* What every source of the tools library includes: the public status
 * calls (st_fail, st_log: the one st_last_error of both libraries) and the
 * shared macros. The tools library sees the engine library through its
 * public headers only. */
#ifndef ST_TOOLS_INTERNAL_H
#define ST_TOOLS_INTERNAL_H

#include "strata/status.h"
#include "st_macros.h"
#include "st_struct.h"

#include <stdio.h>
#include <string.h>
#include <stdbool.h>

/* Whether S ends with END. */
static inline bool st_ends_with(const char *s, const char *end)
{
    const size_t a = strlen(s), b = strlen(end);
    return a >= b && !memcmp(s + a - b, end, b);
}

/* S with st_last_error() prefixed by "WHO: " (a copy first: st_fail
 * formats into the buffer st_last_error() returns); a message that begins
 * with "WHO: " already keeps its one prefix. */
static inline st_status st_fail_prefixed(st_status s, const char *who)
{
    char why[4096];
    snprintf(why, sizeof why, "%s", st_last_error());
    const size_t n = strlen(who);
    if (!strncmp(why, who, n) && !strncmp(why + n, ": ", 2)) return st_fail(s, "%s", why);
    return st_fail(s, "%s: %s", who, why);
}


#endif
