/* The gate's outcome as JSON: the steps array both the tuner's report and
 * the verify report carry, and the verify report itself
 * (strata/tools/verify.h). */
#include "report_json.h"
#include "strata/tools/verify.h"
#include "tools_internal.h"
#include "verify_internal.h"
#include "verify_report.h"

#include <stdlib.h>

const char *st_gate_verdict_name(st_gate_verdict v)
{
    static const char *const names[] = {"not run", "pass", "fail: bytes differ", "fail: slower", "cannot decide"};
    return names[v >= ST_GATE_NOT_RUN && v <= ST_GATE_UNDECIDED ? v : 0];
}

cJSON *st_json_verify_steps(const st_verify_result *g)
{
    cJSON *steps = cJSON_CreateArray();
    for (int i = 0; steps && g && i < g->n_steps; i++) {
        const st_verify_step *x = &g->steps[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "n_tokens", x->n_tokens);
        cJSON_AddNumberToObject(e, "without_us", x->base_us);
        cJSON_AddNumberToObject(e, "with_us", x->table_us);
        cJSON_AddNumberToObject(e, "spread_without", x->base_spread);
        cJSON_AddNumberToObject(e, "spread_with", x->table_spread);
        cJSON_AddNumberToObject(e, "change", x->change);
        cJSON_AddNumberToObject(e, "change_lo", x->change_lo);
        cJSON_AddNumberToObject(e, "change_hi", x->change_hi);
        cJSON_AddNumberToObject(e, "rounds", x->rounds);
        cJSON_AddItemToArray(steps, e);
    }
    return steps;
}

st_status st_verify_report_json(const st_identity *id, const st_verify_options *o, const st_verify_result *r,
                                const char *command_line, char **json)
{
    if (!json) return st_fail(ST_ERR_INVALID_ARG, "verify report: NULL argument");
    *json = NULL;
    if (!r || (command_line && (!id || !o))) return st_fail(ST_ERR_INVALID_ARG, "verify report: NULL argument");
    cJSON *j = cJSON_CreateObject();
    if (!j) return st_fail(ST_ERR_NOMEM, "verify report: out of memory");
    if (command_line) {
        st_json_report_header(j, "verify", id, command_line);
        cJSON *op = cJSON_AddObjectToObject(j, "options");
        st_json_add_text(op, "model", o->model_path ? o->model_path : "(synthetic)");
        st_json_add_text(op, "table", o->table_path);
        cJSON_AddNumberToObject(op, "rounds", o->rounds);
        cJSON_AddNumberToObject(op, "max_slowdown_pct", 100 * o->max_slowdown);
        cJSON_AddNumberToObject(j, "n_layers", r->n_layers);
        cJSON_AddNumberToObject(j, "n_ops", r->n_ops);
        cJSON_AddNumberToObject(j, "table_launches", r->table_launches);
    }
    cJSON_AddBoolToObject(j, "passed", r->passed);
    cJSON_AddStringToObject(j, "verdict",
                            r->verdict == ST_GATE_PASS ? "pass" : r->verdict == ST_GATE_UNDECIDED ? "cannot decide" : "fail");
    cJSON_AddBoolToObject(j, "bytes_equal", r->bytes_equal);
    cJSON_AddBoolToObject(j, "not_slower", r->not_slower);
    st_json_add_text(j, "message", r->message);
    cJSON_AddNumberToObject(j, "confidence", r->confidence);
    cJSON_AddNumberToObject(j, "seconds", r->seconds);
    cJSON *steps = st_json_verify_steps(r);
    if (steps) cJSON_AddItemToObject(j, "steps", steps);
    *json = cJSON_Print(j);
    cJSON_Delete(j);
    return *json ? ST_OK : st_fail(ST_ERR_NOMEM, "verify report: out of memory");
}
