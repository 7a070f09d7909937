#define _POSIX_C_SOURCE 200809L
/* The tuner's JSON report: identity, command line, every candidate's
 * timings and byte-compare result, each decision with its delta, and where
 * the table went. */
#include "internal.h"
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

st_status st_tune_write_report(const char *path, const st_ctx *ctx, const st_tune_options *opt,
                               const st_tune_shape_result *r, int n, const st_tune_result *res,
                               const char *engage_line, const char *verify_line)
{
    cJSON *root = cJSON_CreateObject();
    const st_identity *id = st_ctx_identity(ctx);
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
    cJSON *shapes = cJSON_AddArrayToObject(root, "shapes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(shapes, shape_json(&r[i]));
    cJSON *tj = cJSON_AddObjectToObject(root, "table");
    cJSON_AddStringToObject(tj, "path", res->table_path);
    cJSON_AddBoolToObject(tj, "written", res->table_written);
    cJSON_AddBoolToObject(tj, "engaged", res->engaged);
    cJSON_AddStringToObject(tj, "engagement_line", engage_line ? engage_line : "");
    cJSON_AddStringToObject(tj, "gate", verify_line ? verify_line : "");
    cJSON *sm = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(sm, "shapes", res->shapes);
    cJSON_AddNumberToObject(sm, "kept_variants", res->kept_variants);
    cJSON_AddNumberToObject(sm, "mismatches", res->mismatches);
    cJSON_AddNumberToObject(sm, "noisy", res->noisy);
    cJSON_AddNumberToObject(sm, "changed_vs_previous_table", res->changed_vs_previous);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return st_fail(ST_ERR_NOMEM, "report: out of memory");
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    st_status s = ST_OK;
    if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0) s = st_fail(ST_ERR_IO, "report: cannot write %s", tmp);
    if (f && fclose(f) != 0 && s == ST_OK) s = st_fail(ST_ERR_IO, "report: cannot write %s", tmp);
    if (s == ST_OK && rename(tmp, path) != 0) s = st_fail(ST_ERR_IO, "report: cannot rename %s to %s", tmp, path);
    if (s != ST_OK) remove(tmp);
    free(text);
    return s;
}
