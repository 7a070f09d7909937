#define _POSIX_C_SOURCE 200809L
/* The tuner's JSON report: identity, command line, every candidate's
 * timings and byte-compare result, each decision with its delta, and where
 * the table went. */
#include "ctx_internal.h"
#include "internal.h"
#include "provenance.h"
#include "strata/verify.h"
#include "table_internal.h"
#include "tuner_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static cJSON *timing_json(const st_timing *t, int nt)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n_tokens", nt);
    cJSON_AddNumberToObject(o, "median_us", t->median_us);
    cJSON_AddNumberToObject(o, "p25_us", t->p25_us);
    cJSON_AddNumberToObject(o, "p75_us", t->p75_us);
    cJSON_AddNumberToObject(o, "min_us", t->min_us);
    cJSON_AddNumberToObject(o, "max_us", t->max_us);
    cJSON_AddNumberToObject(o, "spread", t->spread);
    cJSON_AddNumberToObject(o, "rounds", t->rounds);
    cJSON_AddNumberToObject(o, "batch", t->batch);
    return o;
}

static cJSON *shape_json(const st_tune_shape_result *r)
{
    const st_tune_shape *s = &r->shape;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", s->kind == ST_SHAPE_MMVQ ? "mmvq" : "expert");
    cJSON_AddStringToObject(o, "type", st_qtype_name(s->type));
    if (s->kind == ST_SHAPE_MMVQ) {
        cJSON_AddNumberToObject(o, "n_rows", s->rows);
        cJSON_AddNumberToObject(o, "n_cols", s->cols);
    } else {
        cJSON_AddStringToObject(o, "down_type", st_qtype_name(s->down_type));
        cJSON_AddNumberToObject(o, "n_embd", s->n_embd);
        cJSON_AddNumberToObject(o, "n_ff", s->n_ff);
        cJSON_AddNumberToObject(o, "n_tokens", s->n_tokens);
        cJSON_AddNumberToObject(o, "n_expert", s->n_expert);
        cJSON_AddNumberToObject(o, "topk", s->topk);
    }
    cJSON_AddStringToObject(o, "weights", s->w[0] ? s->source : "random valid blocks");
    cJSON_AddNumberToObject(o, "weight_copies", r->copies);
    cJSON_AddNumberToObject(o, "rotation_bytes", (double)r->rotation_bytes);
    cJSON *cands = cJSON_AddArrayToObject(o, "candidates");
    for (int c = 0; c < r->n_cand; c++) {
        const st_tune_cand *x = &r->cand[c];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", x->name);
        if (s->kind == ST_SHAPE_MMVQ)
            cJSON_AddNumberToObject(j, "rows", x->rows);
        else {
            cJSON_AddNumberToObject(j, "gu_rows", x->gu_rows);
            cJSON_AddNumberToObject(j, "down_rows", x->dn_rows);
        }
        cJSON_AddBoolToObject(j, "is_default", c == 0);
        cJSON_AddBoolToObject(j, "same_launch_as_default", x->same_launch);
        cJSON_AddStringToObject(j, "byte_compare", c == 0 ? "reference" : x->bytes_match ? "identical" : "MISMATCH");
        if (!x->bytes_match) cJSON_AddStringToObject(j, "mismatch", x->mismatch);
        cJSON_AddNumberToObject(j, "blended_median_us", x->blended_us);
        cJSON_AddNumberToObject(j, "blended_p25_us", x->blended_p25);
        cJSON_AddNumberToObject(j, "blended_p75_us", x->blended_p75);
        cJSON *ts = cJSON_AddArrayToObject(j, "timings");
        for (int k = 0; k < r->n_nts; k++) cJSON_AddItemToArray(ts, timing_json(&x->t[k], r->nts[k]));
        cJSON_AddItemToArray(cands, j);
    }
    cJSON *d = cJSON_AddObjectToObject(o, "decision");
    cJSON_AddStringToObject(d, "kept", r->cand[r->best].name);
    cJSON_AddNumberToObject(d, "delta_pct", 100 * r->delta);
    cJSON_AddBoolToObject(d, "noisy", r->noisy);
    cJSON_AddStringToObject(d, "reason", r->reason);
    return o;
}

/* The provenance and settings the HTML report and tables.json show. */
static void add_campaign(cJSON *root, cJSON *op, const st_provenance *p, const st_tune_options *opt, st_ctx *ctx)
{
    cJSON_AddStringToObject(root, "source_commit", st_source_commit());
    if (!p) return;
    cJSON_AddStringToObject(op, "model_name", p->model);
    cJSON_AddStringToObject(op, "model_sha256", p->model_sha256);
    cJSON_AddStringToObject(op, "token_mix", p->token_mix);
    cJSON_AddStringToObject(op, "expert_token_counts", p->expert_tokens);
    cJSON_AddNumberToObject(op, "rounds", opt->rounds > 0 ? opt->rounds : opt->quick ? 5 : 15);
    cJSON_AddNumberToObject(op, "llc_bytes", (double)st_ctx_llc_bytes(ctx));
    cJSON *kn = cJSON_AddArrayToObject(op, "active_knobs");
    const st_dispatch_config *cfg = st_ctx_dispatch(ctx);
    for (int k = 0; cfg && k < ST_KNOB_COUNT; k++)
        if (cfg->active[k]) cJSON_AddItemToArray(kn, cJSON_CreateString(st_knob_env((st_knob)k)));
    cJSON_AddStringToObject(op, "report_files", p->report);
}

/* The gate's verdict and its step times per n_tokens. */
static void add_gate(cJSON *root, const st_verify_result *g, const char *line)
{
    cJSON *gj = cJSON_AddObjectToObject(root, "gate");
    cJSON_AddStringToObject(gj, "message", line ? line : "");
    cJSON_AddBoolToObject(gj, "ran", g != NULL);
    if (!g) return;
    cJSON_AddBoolToObject(gj, "passed", g->passed);
    cJSON_AddBoolToObject(gj, "bytes_equal", g->bytes_equal);
    cJSON_AddBoolToObject(gj, "not_slower", g->not_slower);
    cJSON *steps = cJSON_AddArrayToObject(gj, "steps");
    for (int nt = 0; nt < ST_MAX_TOKENS; nt++) {
        if (!(g->base_us[nt] > 0)) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "n_tokens", nt + 1);
        cJSON_AddNumberToObject(e, "without_us", g->base_us[nt]);
        cJSON_AddNumberToObject(e, "with_us", g->table_us[nt]);
        cJSON_AddNumberToObject(e, "spread_without", g->base_spread[nt]);
        cJSON_AddNumberToObject(e, "spread_with", g->table_spread[nt]);
        cJSON_AddItemToArray(steps, e);
    }
}

st_status st_tune_write_report(const char *path, st_ctx *ctx, const st_tune_options *opt,
                               const st_tune_shape_result *r, int n, const st_tune_result *res,
                               const char *engage_line, const char *verify_line, const st_provenance *prov,
                               const st_verify_result *gate)
{
    cJSON *root = cJSON_CreateObject();
    const st_identity *id = st_ctx_identity(ctx);
    cJSON_AddStringToObject(root, "report", "autotune");
    cJSON_AddStringToObject(root, "tool", "tune_decode");
    cJSON_AddStringToObject(root, "version", st_version());
    char date[32];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    cJSON_AddStringToObject(root, "date", date);
    cJSON_AddStringToObject(root, "command_line", opt->command_line ? opt->command_line : "");
    cJSON *idj = cJSON_AddObjectToObject(root, "identity");
    cJSON_AddStringToObject(idj, "arch", id->arch);
    cJSON_AddStringToObject(idj, "runtime", id->runtime);
    cJSON_AddStringToObject(idj, "compiler", id->compiler);
    cJSON_AddNumberToObject(idj, "space", id->space);
    cJSON_AddStringToObject(idj, "device", id->device_name);
    cJSON_AddStringToObject(idj, "driver", id->driver);
    cJSON *op = cJSON_AddObjectToObject(root, "options");
    cJSON_AddNumberToObject(op, "threshold_pct", 100 * opt->threshold);
    cJSON_AddBoolToObject(op, "quick", opt->quick);
    cJSON_AddStringToObject(op, "model", opt->model_path ? opt->model_path : "");
    add_campaign(root, op, prov, opt, ctx);
    cJSON *shapes = cJSON_AddArrayToObject(root, "shapes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(shapes, shape_json(&r[i]));
    cJSON *tj = cJSON_AddObjectToObject(root, "table");
    cJSON_AddStringToObject(tj, "path", res->table_path);
    cJSON_AddBoolToObject(tj, "written", res->table_written);
    cJSON_AddBoolToObject(tj, "engaged", res->engaged);
    cJSON_AddStringToObject(tj, "engagement_line", engage_line ? engage_line : "");
    cJSON_AddStringToObject(tj, "gate", verify_line ? verify_line : "");
    add_gate(root, gate, verify_line);
    cJSON *sm = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(sm, "shapes", res->shapes);
    cJSON_AddNumberToObject(sm, "kept_variants", res->kept_variants);
    cJSON_AddNumberToObject(sm, "mismatches", res->mismatches);
    cJSON_AddNumberToObject(sm, "noisy", res->noisy);
    cJSON_AddNumberToObject(sm, "changed_vs_previous_table", res->changed_vs_previous);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return st_fail(ST_ERR_NOMEM, "report: out of memory");
    st_status s = st_file_write_atomic(path, text, strlen(text));
    free(text);
    return s;
}
