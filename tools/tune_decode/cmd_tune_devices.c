/* tune_decode tune --device LIST|all: every named device tuned into one
 * folder, one table per device model (the rule: include/strata/tools/devices.h). */
#include "commands.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

typedef st_devices_pass td_pass;

static bool exists(const char *path)
{
    struct stat st;
    return path && path[0] && stat(path, &st) == 0;
}

static const char *model_of(const st_identity *id) { return id->model[0] ? id->model : id->device_name; }

typedef struct {
    int members[TD_MAX_DEVICES]; /* indices into the device list */
    int n;
    st_devices_plan plan;
    td_pass *pass;
    int n_pass;
    int rc; /* the exit status of the group (0, 1, 3, 4, 5, 128+N) */
} td_group;

/* The exit status of one pass, as tune's (cmd_tune). */
static int pass_rc(const td_pass *p)
{
    if (p->status == ST_OK) return 0;
    if (p->status == ST_ERR_INTERRUPTED) {
        const int sig = td_signals_caught();
        return 128 + (sig ? sig : SIGINT);
    }
    if (p->status == ST_ERR_UNDECIDED) return 3;
    if (p->status == ST_ERR_REFUSED && p->res.gate == ST_GATE_FAIL_SLOWER) return 4;
    return 1;
}

static void list_devices(const td_group *gr, const int *devs, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < gr->n && at < n; k++) {
        const int w = snprintf(buf + at, n - at, "%s%d", k ? "," : "", devs[gr->members[k]]);
        if (w < 0) break;
        at += (size_t)w;
    }
}

typedef struct {
    st_ctx **ctx;
    const td_group *gr;
    bool quiet;
} td_hook;

/* Before a pass: its opening line, and the device on every library line. */
static void on_pass(void *user, int member, int pass_no, bool before)
{
    const td_hook *h = user;
    if (!before) {
        td_log_prefix(NULL);
        return;
    }
    st_ctx *c = h->ctx[h->gr->members[member]];
    const int d = st_ctx_device(c);
    if (!h->quiet)
        td_eprint("[device %d] tune: pass %d of at most %d for %s (%d device%s of this model)", d, pass_no,
                  2 * h->gr->n, model_of(st_ctx_identity(c)), h->gr->n, h->gr->n == 1 ? "" : "s");
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[device %d] ", d);
    td_log_prefix(prefix);
}

/* One group: passes by the plan until it is done or a pass fails. */
static void run_group(td_group *gr, st_ctx **ctx, st_tune_options *o)
{
    st_ctx *mine[TD_MAX_DEVICES];
    for (int k = 0; k < gr->n; k++) mine[k] = ctx[gr->members[k]];
    td_hook h = {ctx, gr, o->quiet};
    gr->n_pass = st_devices_run(mine, gr->n, o, &gr->plan, &gr->pass, on_pass, &h);
    if (gr->n_pass < 0) {
        gr->n_pass = 0;
        gr->rc = 1;
        td_eprint("tune: %s", st_last_error());
        return;
    }
    const td_pass *last = gr->n_pass ? st_devices_pass_at(gr->pass, gr->n_pass - 1) : NULL;
    gr->rc = last && last->status != ST_OK ? pass_rc(last) : gr->plan.agreed ? 0 : 5;
}

static void print_group(const td_group *gr, const int *devs, st_ctx **ctx)
{
    char list[TD_MAX_DEVICES * 6];
    list_devices(gr, devs, list, sizeof list);
    const st_identity *id = st_ctx_identity(ctx[gr->members[0]]);
    for (int i = 0; i < gr->n_pass; i++) {
        const td_pass *p = st_devices_pass_at(gr->pass, i);
        char what[128];
        if (p->status != ST_OK)
            snprintf(what, sizeof what, "%s: nothing installed", p->status == ST_ERR_INTERRUPTED ? "stopped" : "refused");
        else if (p->res.changed_vs_previous < 0)
            snprintf(what, sizeof what, "made the table");
        else
            snprintf(what, sizeof what, "changed %d of the %s choices", p->res.changed_vs_previous,
                     i == 0 ? "folder's earlier table's" : "table's");
        printf("device %d: pass %d: %d shapes, %d kept a variant, %s; gate %s\n", p->device, i + 1, p->res.shapes,
               p->res.kept_variants, what, st_gate_verdict_name(p->res.gate));
        if (p->report) td_print("device %d: report %s", p->device, td_s(p->res.report_path));
    }
    const td_pass *last = gr->n_pass ? st_devices_pass_at(gr->pass, gr->n_pass - 1) : NULL;
    const char *model = model_of(id);
    const char *dv = gr->n == 1 ? "device" : "devices";
    if (!last) return;
    if (gr->rc == 0 && gr->n == 1)
        td_print("device %s (%s): its table %s", list, model, td_s(last->res.table_path));
    else if (gr->rc == 0)
        td_print("devices %s (%s): agree within the noise: one table, every device's last pass installed it with "
                 "these choices: %s",
                 list, model, td_s(last->res.table_path));
    else if (gr->rc == 5)
        td_print("devices %s (%s): DISAGREE beyond the noise: after %d passes a device still changed a choice (%d "
                 "changes in all); the table holds device %d's choices, gated on device %d only: %s. One table cannot "
                 "tell these devices apart: tune them into separate folders (--device N --out DIR)",
                 list, model, gr->n_pass, gr->plan.changes, last->device, last->device, td_s(last->res.table_path));
    else
        td_print("%s %s (%s): stopped at device %d's pass %d (exit %d): %s%s", dv, list, model, last->device,
                 gr->n_pass, gr->rc, last->message,
                 exists(last->res.table_path) ? "; the folder's table is as the passes before left it" : "");
}

static cJSON *group_json(const td_group *gr, const int *devs, st_ctx **ctx)
{
    cJSON *j = cJSON_CreateObject();
    const st_identity *id = st_ctx_identity(ctx[gr->members[0]]);
    td_json_add_string(j, "device_model", model_of(id));
    td_json_add_string(j, "device", id->device_name);
    cJSON *dl = cJSON_AddArrayToObject(j, "devices");
    for (int k = 0; k < gr->n; k++) cJSON_AddItemToArray(dl, cJSON_CreateNumber(devs[gr->members[k]]));
    cJSON_AddStringToObject(j, "outcome", gr->rc == 0 ? (gr->n == 1 ? "one device" : "agree")
                                          : gr->rc == 5 ? "disagree" : "stopped");
    cJSON_AddNumberToObject(j, "exit", gr->rc);
    cJSON_AddNumberToObject(j, "changes", gr->plan.changes);
    const char *table = gr->n_pass ? td_s(st_devices_pass_at(gr->pass, gr->n_pass - 1)->res.table_path) : "";
    td_json_add_string(j, "table", exists(table) ? table : "");
    cJSON *pl = cJSON_AddArrayToObject(j, "passes");
    for (int i = 0; i < gr->n_pass; i++) {
        const td_pass *p = st_devices_pass_at(gr->pass, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", p->device);
        cJSON_AddStringToObject(o, "status", st_status_name(p->status));
        td_json_add_string(o, "message", p->message);
        cJSON_AddNumberToObject(o, "shapes", p->res.shapes);
        cJSON_AddNumberToObject(o, "kept_variants", p->res.kept_variants);
        cJSON_AddNumberToObject(o, "changed_vs_previous", p->res.changed_vs_previous);
        cJSON_AddStringToObject(o, "gate", st_gate_verdict_name(p->res.gate));
        cJSON_AddBoolToObject(o, "engaged", p->res.engaged);
        cJSON_AddBoolToObject(o, "table_written", p->res.table_written);
        td_json_add_string(o, "report", p->report ? p->res.report_path : "");
        char html[ST_TUNE_PATH_MAX + 8] = "";
        if (p->report) st_report_html_path(p->res.report_path, html, sizeof html);
        td_json_add_string(o, "report_html", html);
        cJSON_AddItemToArray(pl, o);
    }
    return j;
}

int td_tune_devices(st_tune_options *o, const td_global *g)
{
    int devs[TD_MAX_DEVICES], backend = 0;
    const int n = td_device_list(g, devs, &backend);
    if (n < 0) return 1;
    st_ctx *ctx[TD_MAX_DEVICES] = {0};
    st_identity ids[TD_MAX_DEVICES];
    int group[TD_MAX_DEVICES];
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        st_status s = st_ctx_create((st_backend)backend, devs[i], &ctx[i]);
        if (s != ST_OK) {
            td_eprint("tune_decode: cannot open device %d: %s", devs[i], st_last_error()[0] ? st_last_error() : st_status_str(s));
            rc = 1;
        } else {
            ids[i] = *st_ctx_identity(ctx[i]);
        }
    }
    const int ng = rc == 0 ? st_devices_group(ids, n, group) : 0;
    td_group *gr = ng ? calloc((size_t)ng, sizeof *gr) : NULL;
    if (rc == 0 && !gr) {
        td_eprint("tune_decode: out of memory");
        rc = 1;
    }
    for (int k = 0; k < ng && rc == 0; k++) {
        for (int i = 0; i < n; i++)
            if (group[i] == k) gr[k].members[gr[k].n++] = i;
    }
    if (rc == 0 && !g->quiet) {
        td_eprint("tune: %d device%s, %d model%s (one table each; devices of one model take turns and must agree):",
                  n, n == 1 ? "" : "s", ng, ng == 1 ? "" : "s");
        for (int i = 0; i < n; i++)
            td_eprint("tune:   device %d: %s (%s%s%s)", devs[i], ids[i].device_name, ids[i].arch, ids[i].model[0] ? ", " : "",
                      ids[i].model);
    }
    if (rc == 0) {
        td_signals_begin(o->stop);
        for (int k = 0; k < ng; k++) {
            run_group(&gr[k], ctx, o);
            if (gr[k].rc >= 128) break; /* stopped: no other device is started */
        }
        td_signals_end();
        cJSON *all = g->json ? cJSON_CreateArray() : NULL;
        for (int k = 0; k < ng; k++) {
            if (!gr[k].n_pass) {
                rc = st_devices_worse_exit(rc, gr[k].rc); /* a group that could not start */
                continue;
            }
            if (all) cJSON_AddItemToArray(all, group_json(&gr[k], devs, ctx));
            else print_group(&gr[k], devs, ctx);
            rc = st_devices_worse_exit(rc, gr[k].rc);
        }
        if (all) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "exit", rc);
            cJSON_AddItemToObject(j, "groups", all);
            td_json_put(j);
        }
        for (int k = 0; k < ng; k++) {
            const td_pass *last = gr[k].n_pass ? st_devices_pass_at(gr[k].pass, gr[k].n_pass - 1) : NULL;
            if (last && last->status != ST_OK && !g->json) td_eprint("tune: device %d: %s", last->device, last->message);
        }
        if (rc >= 128) td_eprint("tune: interrupted; the pass that was running wrote nothing");
    }
    for (int k = 0; k < ng && gr; k++) st_devices_passes_free(gr[k].pass, gr[k].n_pass);
    free(gr);
    for (int i = 0; i < n; i++) st_ctx_destroy(ctx[i]);
    return rc;
}
