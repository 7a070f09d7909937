/* Several devices into one folder: the pass plan, the groups, the list
 * (strata/tools/devices.h). */
#include "strata/tools/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void st_devices_plan_init(st_devices_plan *p, int n)
{
    memset(p, 0, sizeof *p);
    p->n = n > 0 ? n : 1;
    p->next = 0;
}

int st_devices_plan_step(st_devices_plan *p, int changed)
{
    if (p->next < 0) return -1;
    p->passes++;
    if (p->passes > 1 && changed > 0) {
        p->quiet = 0;
        p->changes += changed;
    } else if (p->passes > 1) {
        p->quiet++;
    }
    if (p->quiet >= p->n - 1) {
        p->agreed = true;
        p->next = -1;
    } else if (p->passes >= 2 * p->n) {
        p->agreed = false;
        p->next = -1;
    } else {
        p->next = p->passes % p->n;
    }
    return p->next;
}

static int exit_rank(int s)
{
    return s >= 128 ? 6 : s == 1 ? 5 : s == 2 ? 4 : s == 4 ? 3 : s == 5 ? 2 : s == 3 ? 1 : s == 0 ? 0 : 5;
}

int st_devices_worse_exit(int a, int b) { return exit_rank(b) > exit_rank(a) ? b : a; }

int st_devices_group(const st_identity *ids, int n, int *group)
{
    int groups = 0;
    for (int i = 0; i < n; i++) {
        group[i] = -1;
        for (int j = 0; j < i && group[i] < 0; j++)
            if (st_identity_same_device(&ids[i], &ids[j])) group[i] = group[j];
        if (group[i] < 0) group[i] = groups++;
    }
    return groups;
}

int st_devices_parse(const char *v, int *out, int max, bool *all, char *msg, size_t msglen)
{
    *all = false;
    if (!strcmp(v, "all")) {
        *all = true;
        return 0;
    }
    int n = 0;
    const char *p = v;
    for (;;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        int x = 0;
        bool ok = len > 0 && len <= 4;
        for (size_t k = 0; ok && k < len; k++) {
            ok = p[k] >= '0' && p[k] <= '9';
            x = 10 * x + (p[k] - '0');
        }
        if (!ok || x > 1023) {
            snprintf(msg, msglen, "'%.*s' is not a device number (0..1023)", (int)(len > 32 ? 32 : len), p);
            return -1;
        }
        for (int k = 0; k < n; k++)
            if (out[k] == x) {
                snprintf(msg, msglen, "device %d is named twice", x);
                return -1;
            }
        if (n >= max) {
            snprintf(msg, msglen, "more than %d devices", max);
            return -1;
        }
        out[n++] = x;
        if (!end) return n;
        p = end + 1;
    }
}

int st_devices_run(st_ctx *const *ctx, int n, st_tune_options *o, st_devices_plan *plan, st_devices_pass **passes,
                   void (*hook)(void *user, int member, int pass_no, bool before), void *user)
{
    *passes = NULL;
    st_devices_pass *pass = calloc((size_t)(n > 0 ? 2 * n : 1), sizeof *pass);
    if (!pass) {
        st_fail(ST_ERR_NOMEM, "tune: out of memory");
        return -1;
    }
    *passes = pass;
    st_devices_plan_init(plan, n);
    int done = 0;
    for (int k = plan->next; k >= 0 && done < 2 * n;) {
        st_devices_pass *p = &pass[done++];
        memset(p, 0, sizeof *p);
        st_tune_result_init(&p->res);
        p->device = st_ctx_device(ctx[k]);
        o->report_per_device = true;
        if (hook) hook(user, k, done, true);
        p->status = st_tune_run(ctx[k], o, &p->res);
        if (p->status != ST_OK) {
            const char *m = st_last_error()[0] ? st_last_error() : st_status_str(p->status);
            if (!strncmp(m, "tune: ", 6)) m += 6;
            snprintf(p->message, sizeof p->message, "%s", m);
        }
        struct stat st;
        p->report = p->res.report_path && stat(p->res.report_path, &st) == 0;
        if (hook) hook(user, k, done, false);
        if (p->status != ST_OK) break;
        k = st_devices_plan_step(plan, p->res.changed_vs_previous);
    }
    return done;
}

const st_devices_pass *st_devices_pass_at(const st_devices_pass *passes, int i)
{
    return passes && i >= 0 ? &passes[i] : NULL;
}

void st_devices_passes_free(st_devices_pass *pass, int n)
{
    for (int i = 0; pass && i < n; i++) st_tune_result_clear(&pass[i].res);
    free(pass);
}
