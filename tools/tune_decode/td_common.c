/* Helpers shared by the tune_decode commands. */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
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

char *td_command_line(int argc, char **argv)
{
    size_t n = sizeof "tune_decode";
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
    char *s = malloc(n);
    if (!s) return NULL;
    size_t at = (size_t)snprintf(s, n, "tune_decode");
    for (int i = 0; i < argc && at < n; i++) at += (size_t)snprintf(s + at, n - at, " %s", argv[i]);
    return s;
}

int td_device_list(const td_global *g, int *out, int *backend)
{
    *backend = g->backend;
    if (g->backend == ST_BACKEND_AUTO) {
        int gpus = 0;
        if (st_device_count(ST_BACKEND_GPU, &gpus) != ST_OK) gpus = 0;
        *backend = gpus > 0 ? ST_BACKEND_GPU : ST_BACKEND_CPU;
    }
    int count = 0;
    if (st_device_count((st_backend)*backend, &count) != ST_OK) {
        td_eprint("tune_decode: --device: %s", st_last_error());
        return -1;
    }
    const char *what = *backend == ST_BACKEND_GPU ? "GPU" : "CPU";
    if (count == 0) {
        td_eprint("tune_decode: --device %s: this machine has no %s device (%s backend)", g->device_all ? "all" : "list",
                  what, st_gpu_backend_name());
        return -1;
    }
    if (g->device_all) {
        const int n = count < TD_MAX_DEVICES ? count : TD_MAX_DEVICES;
        if (n < count)
            td_eprint("tune_decode: --device all: %d %s devices; the first %d are used (name others with a list)",
                      count, what, n);
        for (int i = 0; i < n; i++) out[i] = i;
        return n;
    }
    for (int i = 0; i < g->n_devices; i++) {
        if (g->devices[i] >= count) {
            if (*backend == ST_BACKEND_CPU)
                td_eprint("tune_decode: --device %d: the CPU backend is one device, 0", g->devices[i]);
            else
                td_eprint("tune_decode: --device %d: this machine has %d GPU%s (0..%d)", g->devices[i], count,
                          count == 1 ? "" : "s", count - 1);
            return -1;
        }
        out[i] = g->devices[i];
    }
    return g->n_devices;
}
