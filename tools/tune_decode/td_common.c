/* Helpers shared by the tune_decode commands. */
#include "commands.h"
#include "strata/decode.h"

#include <stdio.h>

int td_open_ctx(const td_global *g, st_ctx **out)
{
    st_status s = st_ctx_create((st_backend)g->backend, g->device, out);
    if (s != ST_OK) {
        fprintf(stderr, "tune_decode: cannot open the %s backend: %s\n",
                g->backend == ST_BACKEND_GPU ? "GPU" : "requested", st_last_error()[0] ? st_last_error() : st_status_str(s));
        return 1;
    }
    return 0;
}
