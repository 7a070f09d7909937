/* Decoding one unit (32 weights) of any block format into small integers
 * plus the unit's float scale factors, for the CPU reference (st_unit and
 * the per-unit contract: format_home.h; each format's decoder is in its
 * home). Internal. */
#ifndef ST_CPU_UNIT_H
#define ST_CPU_UNIT_H

#include "format_home.h"

/* Decodes unit U (0-based, in units of 32 values) of a row of type T whose
 * ggml bytes start at ROW. An unknown type gives an all-zero unit. */
void st_unit_decode(st_qtype t, const uint8_t *row, int64_t u, st_unit *out);

#endif
