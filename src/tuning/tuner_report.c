#define _POSIX_C_SOURCE 200809L
/* The tuner's JSON report: identity (device index and model included),
 * command line, options (token mix, rounds, knobs), the last-level cache
 * the rotation covered, the memory check, every candidate's timings,
 * paired change and byte-compare result, each decision with its reason,
 * the gate's step timings per n_tokens, and where the table went. */
#include "strata/probe.h"
#include "tools_internal.h"
#include "file_write.h"
#include "strata/files.h"
#include "report_json.h"
#include "strata/tools/text.h"
#include "strata/table_meta.h"
#include "strata/tools/verify.h"
#include "strata/table.h"
#include "tuner_report.h"
#include "verify_report.h"
#include "verify_internal.h"

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
    st_json_add_text(o, "weights", s->w[0] ? s->source : "random valid blocks");
    cJSON_AddNumberToObject(o, "weight_copies", r->copies);
    cJSON_AddNumberToObject(o, "rotation_bytes", (double)r->rotation_bytes);
    cJSON_AddBoolToObject(o, "rotation_below_4x_llc", r->rotation_short);
    cJSON_AddNumberToObject(o, "rounds", r->n_rounds);
    cJSON *mix = cJSON_AddArrayToObject(o, "n_tokens_timed");
    for (int k = 0; k < r->n_nts; k++) cJSON_AddItemToArray(mix, cJSON_CreateNumber(r->nts[k]));
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
        if (!x->bytes_match) st_json_add_text(j, "mismatch", x->mismatch);
        cJSON_AddNumberToObject(j, "blended_median_us", x->blended_us);
        cJSON_AddNumberToObject(j, "blended_p25_us", x->blended_p25);
        cJSON_AddNumberToObject(j, "blended_p75_us", x->blended_p75);
        if (c > 0 && x->bytes_match && !x->same_launch) {
            /* the paired change the keep rule judged (+ = slower) */
            cJSON_AddNumberToObject(j, "change_vs_default", x->change);
            cJSON_AddNumberToObject(j, "change_lo", x->change_lo);
            cJSON_AddNumberToObject(j, "change_hi", x->change_hi);
        }
        cJSON *ts = cJSON_AddArrayToObject(j, "timings");
        for (int k = 0; k < r->n_nts; k++) cJSON_AddItemToArray(ts, timing_json(&x->t[k], r->nts[k]));
        cJSON_AddItemToArray(cands, j);
    }
    cJSON *d = cJSON_AddObjectToObject(o, "decision");
    cJSON_AddStringToObject(d, "kept", r->cand[r->best].name);
    cJSON_AddNumberToObject(d, "delta_pct", 100 * r->delta);
    cJSON_AddBoolToObject(d, "noisy", r->noisy);
    if (r->previous >= 0) cJSON_AddStringToObject(d, "previous_table", r->cand[r->previous].name);
    cJSON_AddStringToObject(d, "reason", r->reason);
    return o;
}

/* The provenance and settings the HTML report and tables.json show. */
static void add_campaign(cJSON *op, const st_provenance *p)
{
    if (!p) return;
    st_json_add_text(op, "model_name", p->model);
    cJSON_AddStringToObject(op, "model_sha256", p->model_sha256);
    cJSON_AddStringToObject(op, "token_mix", p->token_mix);
    cJSON_AddStringToObject(op, "expert_token_counts", p->expert_tokens);
    st_json_add_text(op, "report_files", p->report);
}

/* The gate's verdict and its step times per n_tokens (the token counts it
 * measured), with the paired change and its interval. */
static void add_gate(cJSON *root, const st_verify_result *g, const char *line)
{
    cJSON *gj = cJSON_AddObjectToObject(root, "gate");
    st_json_add_text(gj, "message", line ? line : "");
    st_json_add_text(gj, "verdict", line ? line : "");
    cJSON_AddBoolToObject(gj, "ran", g != NULL);
    if (!g) return;
    cJSON_AddStringToObject(gj, "outcome", st_gate_verdict_name(g->verdict));
    cJSON_AddBoolToObject(gj, "passed", g->passed);
    cJSON_AddBoolToObject(gj, "bytes_equal", g->bytes_equal);
    cJSON_AddBoolToObject(gj, "not_slower", g->not_slower);
    cJSON_AddNumberToObject(gj, "operations", g->n_ops);
    cJSON_AddNumberToObject(gj, "table_launches", g->table_launches);
    cJSON_AddNumberToObject(gj, "confidence", g->confidence);
    cJSON_AddNumberToObject(gj, "seconds", g->seconds);
    cJSON *steps = st_json_verify_steps(g);
    if (steps) cJSON_AddItemToObject(gj, "steps", steps);
}

char *st_tune_report_text(const st_ctx *ctx, const st_tune_options *opt, const st_tune_shape_result *r, int n,
                          const st_tune_result *res, const st_tune_report_extra *x)
{
    cJSON *root = cJSON_CreateObject();
    const st_identity *id = st_ctx_identity(ctx);
    st_json_report_header(root, "autotune", id, opt->command_line ? opt->command_line : "");
    cJSON *idj = cJSON_GetObjectItem(root, "identity");
    if (idj) cJSON_AddNumberToObject(idj, "device_index", st_ctx_backend(ctx) == ST_BACKEND_GPU ? st_ctx_device(ctx) : -1);
    cJSON *op = cJSON_AddObjectToObject(root, "options");
    cJSON_AddNumberToObject(op, "threshold_pct", 100 * opt->threshold);
    cJSON_AddBoolToObject(op, "quick", opt->quick);
    st_json_add_text(op, "model", opt->model_path ? opt->model_path : "");
    add_campaign(op, x->prov);
    cJSON_AddNumberToObject(op, "llc_bytes", (double)x->llc);
    cJSON *kl = cJSON_AddArrayToObject(op, "active_knobs");
    for (int k = 0; k < ST_KNOB_COUNT; k++)
        if (st_ctx_dispatch(ctx)->active[k]) cJSON_AddItemToArray(kl, cJSON_CreateString(st_knob_env((st_knob)k)));
    cJSON *mix = cJSON_AddArrayToObject(op, "ntok_mix");
    for (int i = 0; i < (opt->n_ntok_mix > 0 ? opt->n_ntok_mix : ST_DECODE_TOKENS); i++)
        cJSON_AddItemToArray(mix, cJSON_CreateNumber(opt->n_ntok_mix > 0 ? opt->ntok_mix[i] : i + 1));
    cJSON_AddNumberToObject(op, "rounds", n > 0 ? r[0].n_rounds : 0);
    cJSON *kn = cJSON_AddObjectToObject(op, "knobs");
    const st_dispatch_config *cfg = st_ctx_dispatch(ctx);
    for (int k = 0; k < ST_KNOB_COUNT; k++) cJSON_AddBoolToObject(kn, st_knob_label((st_knob)k), cfg->active[k]);
    cJSON *cache = cJSON_AddObjectToObject(root, "cache");
    cJSON_AddNumberToObject(cache, "llc_bytes", (double)x->llc);
    st_json_add_text(cache, "llc_source", x->llc_source ? x->llc_source : "");
    cJSON_AddNumberToObject(cache, "rotation_min_bytes", 4.0 * (double)x->llc);
    cJSON *mem = cJSON_AddObjectToObject(root, "memory");
    cJSON_AddNumberToObject(mem, "free_bytes", (double)x->free_bytes);
    cJSON_AddNumberToObject(mem, "total_bytes", (double)x->total_bytes);
    cJSON_AddNumberToObject(mem, "needed_bytes", (double)x->need_bytes);
    cJSON *shapes = cJSON_AddArrayToObject(root, "shapes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(shapes, shape_json(&r[i]));
    cJSON *tj = cJSON_AddObjectToObject(root, "table");
    st_json_add_text(tj, "path", res->table_path);
    cJSON_AddBoolToObject(tj, "written", res->table_written);
    cJSON_AddBoolToObject(tj, "engaged", res->engaged);
    st_json_add_text(tj, "engagement_line", x->engage_line ? x->engage_line : "");
    st_json_add_text(tj, "gate", x->verify_line ? x->verify_line : "");
    add_gate(root, x->gate, x->verify_line);
    cJSON *sm = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(sm, "shapes", res->shapes);
    cJSON_AddNumberToObject(sm, "kept_variants", res->kept_variants);
    cJSON_AddNumberToObject(sm, "mismatches", res->mismatches);
    cJSON_AddNumberToObject(sm, "noisy", res->noisy);
    cJSON_AddNumberToObject(sm, "changed_vs_previous_table", res->changed_vs_previous);
    cJSON *camp = cJSON_AddArrayToObject(sm, "campaign");
    for (int k = 0; k < 2; k++)
        if (x->campaign[k]) {
            char *v = st_text_utf8_dup(x->campaign[k]);
            cJSON_AddItemToArray(camp, cJSON_CreateString(v ? v : ""));
            free(v);
        }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

st_status st_tune_write_report(const char *path, const st_ctx *ctx, const st_tune_options *opt,
                               const st_tune_shape_result *r, int n, const st_tune_result *res,
                               const st_tune_report_extra *x)
{
    char *text = st_tune_report_text(ctx, opt, r, n, res, x);
    if (!text) return st_fail(ST_ERR_NOMEM, "report: out of memory");
    st_status s = st_file_write_atomic(path, text, strlen(text));
    free(text);
    return s;
}
