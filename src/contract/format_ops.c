/* The one translation unit that compiles the formats' host parts (their
 * homes' ST_FORMAT_HOST sections): built with -ffp-contract=off, so the
 * dequantizers do every float operation as written, in the written order,
 * and match ggml-base (which x86-64 compiles without FMA) to the bit. */
#define ST_FORMAT_HOST 1
#include "format_ops.h"

#include "st_format_homes.h" /* generated: every home of ST_QTYPES */

const st_format_ops *st_format_ops_of(st_qtype t)
{
    switch (t) {
#define ST_OPS_CASE_(id, name, ggml, qk, bytes) \
    case ST_##id: return &st_format_##id;
        ST_QTYPES(ST_OPS_CASE_)
#undef ST_OPS_CASE_
    default: return NULL;
    }
}
