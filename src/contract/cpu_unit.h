/* Decoding one unit (32 weights) of each block format into small integers
 * plus the unit's float scale factors, for the CPU reference. The integer
 * weights w[] already carry any integer sub-scale, so the unit's exact
 * integer dot is sum(w[j] * q[j]) and its contribution is
 *   acc = fma(st_fmul(W, da), (float)isum, acc)
 *   [Q4_K: acc = fma(-st_fmul(M, da), (float)sum(q), acc)]
 * as st_canon.h defines. Internal. */
#ifndef ST_CPU_UNIT_H
#define ST_CPU_UNIT_H

#include "strata/formats.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int16_t w[32];
    float W;
    float M;     /* Q4_K min factor; 0 otherwise */
    bool has_min;
} st_unit;

/* Decodes unit U (0-based, in units of 32 values) of a row of type T whose
 * ggml bytes start at ROW. */
void st_unit_decode(st_qtype t, const uint8_t *row, int64_t u, st_unit *out);

#endif
