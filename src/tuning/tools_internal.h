/* What every source of the tools library includes: the public status
 * calls (st_fail, st_log: the one st_last_error of both libraries) and the
 * shared macros. The tools library sees the engine library through its
 * public headers only. */
#ifndef ST_TOOLS_INTERNAL_H
#define ST_TOOLS_INTERNAL_H

#include "strata/status.h"
#include "st_macros.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The growth rule of the public structs (docs/API.md, "Structs that
 * grow"): each starts with size_t struct_size, set by its _default or
 * _init function to the size the caller was compiled with.
 *
 * st_struct_in: the caller's options IN over the defaults already in OUT
 * (OUT_SIZE bytes): only the first IN->struct_size bytes are the caller's,
 * so a caller built against an older, smaller struct gets the defaults for
 * what it lacks. A struct_size of 0 (never set up) is refused, naming WHAT. */
static inline st_status st_struct_in(void *out, size_t out_size, const void *in, const char *what)
{
    size_t n = 0;
    if (in) memcpy(&n, in, sizeof n);
    if (!in || n < sizeof n) return st_fail(ST_ERR_INVALID_ARG, "%s: not set up (its _default or _init function sets struct_size)", what);
    memcpy(out, in, n < out_size ? n : out_size);
    memcpy(out, &out_size, sizeof out_size);
    return ST_OK;
}

/* st_struct_zero: zeroes the caller's struct P (FULL bytes in this build)
 * as far as its struct_size covers, keeping it; INIT first sets it to FULL
 * (what the _init functions do; the _clear functions free first). */
static inline void st_struct_zero(void *p, size_t full, bool init)
{
    size_t n = full;
    if (!init) memcpy(&n, p, sizeof n);
    memset(p, 0, n < full ? n : full);
    memcpy(p, &n, sizeof n);
}

/* Whether the caller's result P was set up (its struct_size set); else
 * ST_ERR_INVALID_ARG naming WHAT and the init function. */
static inline st_status st_struct_ready(const void *p, const char *what)
{
    size_t n = 0;
    if (p) memcpy(&n, p, sizeof n);
    return p && n >= sizeof n ? ST_OK : st_fail(ST_ERR_INVALID_ARG, "%s: the result is not set up (its _init function)", what);
}

/* st_struct_out: the result IN (IN_SIZE bytes, this build's) into the
 * caller's OUT, as far as OUT->struct_size covers it; OUT's struct_size
 * stays. */
static inline void st_struct_out(void *out, const void *in, size_t in_size)
{
    size_t n = 0;
    memcpy(&n, out, sizeof n);
    if (n > in_size) n = in_size;
    if (n > sizeof n) memcpy((char *)out + sizeof n, (const char *)in + sizeof n, n - sizeof n);
}

#endif
