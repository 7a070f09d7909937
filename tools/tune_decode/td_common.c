/* Helpers shared by the tune_decode commands. */
#include "commands.h"
#include "strata/decode.h"

#include <stdio.h>
#include <string.h>

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

int td_fail(const char *cmd, int s_, int code)
{
    const st_status s = (st_status)s_;
    const char *m = st_last_error()[0] ? st_last_error() : st_status_str(s);
    const size_t n = strlen(cmd);
    /* library messages may already name the command ("tune: ..."): one prefix */
    if (!strncmp(m, cmd, n) && m[n] == ':' && m[n + 1] == ' ')
        td_eprint("%s", m);
    else
        td_eprint("%s: %s", cmd, m);
    return code;
}
