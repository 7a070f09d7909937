#include "cpu_unit.h"
#include "format_ops.h"

#include <string.h>

void st_unit_decode(st_qtype t, const uint8_t *row, int64_t u, st_unit *out)
{
    const st_format_ops *f = st_format_ops_of(t);
    out->M = 0.0f;
    out->mf[0] = out->mf[1] = 0;
    out->has_min = false;
    if (!f) {
        memset(out, 0, sizeof *out);
        return;
    }
    const int upb = f->qk / 32; /* units per block */
    f->unit(row + (size_t)(u / upb) * (size_t)f->bytes, (int)(u % upb), out);
}
