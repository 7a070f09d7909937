#define _POSIX_C_SOURCE 200809L
/* The tuner's JSON report: identity, command line, every candidate's
 * timings and byte-compare result, each decision with its delta, and where
 * the table went. */
#include "internal.h"
#include "file_io.h"
#include "text.h"
#include "tuner_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Strings from files and the command line (tensor names, paths) made
 * valid UTF-8, so the report is always valid JSON. */
static void add_str(cJSON *o, const char *name, const char *s)
{
    char *v = st_text_utf8_dup(s ? s : "");
    cJSON_AddStringToObject(o, name, v ? v : "");
    free(v);
}

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
    add_str(o, "weights", s->w[0] ? s->source : "random valid blocks");
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
        if (!x->bytes_match) add_str(j, "mismatch", x->mismatch);
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

char *st_tune_report_text(const st_ctx *ctx, const st_tune_options *opt, const st_tune_shape_result *r, int n,
                          const st_tune_result *res, const char *engage_line, const char *verify_line)
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
    add_str(root, "command_line", opt->command_line ? opt->command_line : "");
    cJSON *idj = cJSON_AddObjectToObject(root, "identity");
    cJSON_AddStringToObject(idj, "arch", id->arch);
    cJSON_AddStringToObject(idj, "runtime", id->runtime);
    cJSON_AddStringToObject(idj, "compiler", id->compiler);
    cJSON_AddNumberToObject(idj, "space", id->space);
    add_str(idj, "device", id->device_name);
    add_str(idj, "driver", id->driver);
    cJSON *op = cJSON_AddObjectToObject(root, "options");
    cJSON_AddNumberToObject(op, "threshold_pct", 100 * opt->threshold);
    cJSON_AddBoolToObject(op, "quick", opt->quick);
    add_str(op, "model", opt->model_path ? opt->model_path : "");
    cJSON *shapes = cJSON_AddArrayToObject(root, "shapes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(shapes, shape_json(&r[i]));
    cJSON *tj = cJSON_AddObjectToObject(root, "table");
    add_str(tj, "path", res->table_path);
    cJSON_AddBoolToObject(tj, "written", res->table_written);
    cJSON_AddBoolToObject(tj, "engaged", res->engaged);
    add_str(tj, "engagement_line", engage_line ? engage_line : "");
    add_str(tj, "gate", verify_line ? verify_line : "");
    cJSON *sm = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(sm, "shapes", res->shapes);
    cJSON_AddNumberToObject(sm, "kept_variants", res->kept_variants);
    cJSON_AddNumberToObject(sm, "mismatches", res->mismatches);
    cJSON_AddNumberToObject(sm, "noisy", res->noisy);
    cJSON_AddNumberToObject(sm, "changed_vs_previous_table", res->changed_vs_previous);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    const size_t n_text = text ? strlen(text) : 0;
    char *line = text ? realloc(text, n_text + 2) : NULL;
    if (!line) {
        free(text);
        return NULL;
    }
    memcpy(line + n_text, "\n", 2);
    return line;
}

st_status st_tune_write_report(const char *path, const st_ctx *ctx, const st_tune_options *opt,
                               const st_tune_shape_result *r, int n, const st_tune_result *res,
                               const char *engage_line, const char *verify_line)
{
    char *text = st_tune_report_text(ctx, opt, r, n, res, engage_line, verify_line), *tmp = NULL;
    if (!text) return st_fail(ST_ERR_NOMEM, "report: out of memory");
    int slot = -1;
    st_status s = st_file_write_temp(path, text, strlen(text), &tmp, &slot);
    if (s == ST_OK) s = st_file_commit(path, tmp, slot, NULL);
    free(tmp);
    free(text);
    return s;
}
