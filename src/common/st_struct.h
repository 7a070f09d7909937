/* The growth rule of the public structs (docs/API.md, "Structs that
 * grow"), for both libraries: each options or result struct starts with
 * size_t struct_size, the size the CALLER was compiled with. Its init
 * function is a static inline in the public header that passes sizeof of
 * the caller's struct to the library's st_X_init_size; the library then
 * reads and writes only that many bytes: a caller built against an older,
 * smaller struct gets the defaults for what it lacks, and a newer caller's
 * members this library does not know stay zero. Stateless helpers. */
#ifndef ST_STRUCT_H
#define ST_STRUCT_H

#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* No struct of the API comes near this: a larger struct_size is garbage
 * (a struct never set up). */
#define ST_STRUCT_SIZE_MAX ((size_t)1 << 20)

/* The size P says it has, 0 when it is no plausible size. */
static inline size_t st_struct_size_of(const void *p)
{
    size_t n = 0;
    if (p) memcpy(&n, p, sizeof n);
    return n >= sizeof n && n <= ST_STRUCT_SIZE_MAX ? n : 0;
}

/* An init function: the first SIZE bytes of P get this build's DEFAULTS
 * (FULL bytes), the rest of SIZE zeros, and struct_size SIZE. */
static inline void st_struct_init(void *p, size_t size, const void *defaults, size_t full)
{
    if (!p || size < sizeof size || size > ST_STRUCT_SIZE_MAX) return;
    memset(p, 0, size);
    memcpy(p, defaults, size < full ? size : full);
    memcpy(p, &size, sizeof size);
}

/* An init function whose defaults are all zeros: SIZE bytes of P zeroed,
 * struct_size SIZE. */
static inline void st_struct_init_zeros(void *p, size_t size)
{
    if (!p || size < sizeof size || size > ST_STRUCT_SIZE_MAX) return;
    memset(p, 0, size);
    memcpy(p, &size, sizeof size);
}

/* The caller's options IN over the defaults already in OUT (FULL bytes):
 * only the first IN->struct_size bytes are the caller's. A struct never set
 * up is refused, naming WHAT. OUT's struct_size becomes FULL. */
static inline st_status st_struct_in(void *out, size_t full, const void *in, const char *what)
{
    const size_t n = st_struct_size_of(in);
    if (!n) return st_fail(ST_ERR_INVALID_ARG, "%s: not set up (its _default or _init function sets struct_size)", what);
    memcpy(out, in, n < full ? n : full);
    memcpy(out, &full, sizeof full);
    return ST_OK;
}

/* Whether the caller's result P was set up; else ST_ERR_INVALID_ARG naming
 * WHAT. */
static inline st_status st_struct_ready(const void *p, const char *what)
{
    return st_struct_size_of(p) ? ST_OK
                                : st_fail(ST_ERR_INVALID_ARG, "%s: the result is not set up (its _init function)", what);
}

/* Whether the caller's struct P (set up) has room for the member that ends
 * at END bytes (offsetof + sizeof). */
static inline bool st_struct_has(const void *p, size_t end) { return st_struct_size_of(p) >= end; }

/* The result IN (FULL bytes, this build's) into the caller's OUT, as far
 * as OUT's struct_size covers it; OUT's struct_size stays. */
static inline void st_struct_out(void *out, const void *in, size_t full)
{
    size_t n = st_struct_size_of(out);
    if (n > full) n = full;
    if (n > sizeof n) memcpy((char *)out + sizeof n, (const char *)in + sizeof n, n - sizeof n);
}

/* A _clear function: zeroes P as far as its struct_size covers (at most
 * FULL), keeping struct_size. */
static inline void st_struct_zero(void *p, size_t full)
{
    const size_t n = st_struct_size_of(p);
    if (n > sizeof n) memset((char *)p + sizeof n, 0, (n < full ? n : full) - sizeof n);
}

#endif
