#define _POSIX_C_SOURCE 200809L
/* tables.json as text (strata/tools/tables.h): the index to JSON and back. The
 * parser takes nothing on trust: a field of the wrong type, a string longer
 * than its place or an unknown status makes the whole index "damaged", and
 * it is then rebuilt from the tables. */
#include "strata/tools/tables.h"
#include "tools_internal.h"

#include "strata/tools/text.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tables.json text ------------------------------------------------------ */


/* Names, lines and provenance come from table files anyone can write:
 * each string is made valid UTF-8 (text.h), so tables.json stays JSON. */
static void add_str(cJSON *o, const char *name, const char *v)
{
    char *u = st_text_utf8_dup(v ? v : "");
    cJSON_AddStringToObject(o, name, u ? u : "");
    free(u);
}

#define ST_PROV_JSON_(f, key, what) add_str(pj, #f, e->prov.f);

st_status st_tables_index_format(const st_tables_index *ix, char **text, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    add_str(root, "format", ST_TABLES_INDEX_FORMAT);
    cJSON_AddNumberToObject(root, "version", ST_TABLES_INDEX_VERSION);
    cJSON *w = cJSON_AddObjectToObject(root, "written");
    add_str(w, "date", ix->date);
    add_str(w, "tool", ix->tool);
    add_str(w, "source_commit", ix->source_commit);
    add_str(w, "identity", ix->writer);
    add_str(w, "device", ix->writer_device);
    add_str(w, "folder_line", ix->dir_line);
    add_str(w, "engages", ix->engages);
    cJSON *arr = cJSON_AddArrayToObject(root, "tables");
    for (int i = 0; i < ix->n; i++) {
        const st_tables_entry *e = &ix->e[i];
        cJSON *o = cJSON_CreateObject();
        add_str(o, "file", e->file);
        add_str(o, "sha256", e->sha256);
        cJSON_AddNumberToObject(o, "bytes", e->bytes);
        cJSON_AddBoolToObject(o, "readable", e->readable);
        cJSON *idj = cJSON_AddObjectToObject(o, "identity");
        add_str(idj, "arch", e->id.arch);
        add_str(idj, "runtime", e->id.runtime);
        add_str(idj, "compiler", e->id.compiler);
        cJSON_AddNumberToObject(idj, "space", e->id.space);
        add_str(idj, "device", e->id.device_name);
        cJSON *pj = cJSON_AddObjectToObject(o, "provenance");
        ST_PROVENANCE_FIELDS(ST_PROV_JSON_)
        cJSON_AddNumberToObject(o, "rows", e->n_rows);
        cJSON *sh = cJSON_AddArrayToObject(o, "shapes");
        for (int k = 0; k < e->n_shapes; k++) {
            cJSON *x = cJSON_CreateObject();
            add_str(x, "shape", e->shapes[k].key);
            add_str(x, "choice", e->shapes[k].choice);
            cJSON_AddItemToArray(sh, x);
        }
        add_str(o, "status", st_table_status_text(e->status));
        add_str(o, "status_line", e->status_line);
        add_str(o, "superseded_by", e->superseded_by);
        cJSON *rp = cJSON_AddArrayToObject(o, "reports");
        for (int k = 0; k < e->n_reports; k++) {
            cJSON *x = cJSON_CreateObject();
            add_str(x, "file", e->reports[k].file);
            add_str(x, "status", e->reports[k].status);
            cJSON_AddItemToArray(rp, x);
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *t = cJSON_Print(root);
    cJSON_Delete(root);
    if (!t) return st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    const size_t n = strlen(t);
    char *p = realloc(t, n + 2);
    if (!p) {
        free(t);
        return st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    }
    p[n] = '\n';
    p[n + 1] = '\0';
    *text = p;
    *len = n + 1;
    return ST_OK;
}
#undef ST_PROV_JSON_

/* Copies string field KEY of O into DST[N]; false when absent, not a
 * string, or too long. */
static bool get_str(const cJSON *o, const char *key, char *dst, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= n) return false;
    memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
    return true;
}

static bool get_num(const cJSON *o, const char *key, double *dst)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return false;
    *dst = v->valuedouble;
    return true;
}

#define ST_PROV_PARSE_(f, key, what) ok = ok && get_str(pj, #f, e->prov.f, sizeof e->prov.f);

static bool parse_entry(const cJSON *o, st_tables_entry *e)
{
    memset(e, 0, sizeof *e);
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(o, "identity"), *pj = cJSON_GetObjectItemCaseSensitive(o, "provenance");
    const cJSON *rd = cJSON_GetObjectItemCaseSensitive(o, "readable");
    double space = 0, rows = 0;
    char status[32];
    bool ok = cJSON_IsObject(o) && cJSON_IsObject(idj) && cJSON_IsObject(pj) && cJSON_IsBool(rd) &&
              get_str(o, "file", e->file, sizeof e->file) && get_str(o, "sha256", e->sha256, sizeof e->sha256) &&
              get_num(o, "bytes", &e->bytes) && get_str(idj, "arch", e->id.arch, sizeof e->id.arch) &&
              get_str(idj, "runtime", e->id.runtime, sizeof e->id.runtime) &&
              get_str(idj, "compiler", e->id.compiler, sizeof e->id.compiler) && get_num(idj, "space", &space) &&
              get_str(idj, "device", e->id.device_name, sizeof e->id.device_name) && get_num(o, "rows", &rows) &&
              get_str(o, "status", status, sizeof status) && get_str(o, "status_line", e->status_line, sizeof e->status_line) &&
              get_str(o, "superseded_by", e->superseded_by, sizeof e->superseded_by);
    ST_PROVENANCE_FIELDS(ST_PROV_PARSE_)
    if (!ok) return false;
    e->readable = cJSON_IsTrue(rd);
    e->id.space = (int)space;
    memcpy(e->id.driver, e->prov.driver, strnlen(e->prov.driver, sizeof e->id.driver - 1)); /* zeroed: stays terminated */
    if (!st_table_status_from_text(status, &e->status)) return false;
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shapes"), *rp = cJSON_GetObjectItemCaseSensitive(o, "reports"), *x;
    if (!cJSON_IsArray(sh) || !cJSON_IsArray(rp) || cJSON_GetArraySize(rp) > 2) return false;
    const int ns = cJSON_GetArraySize(sh);
    e->shapes = calloc((size_t)ns + 1, sizeof *e->shapes);
    if (!e->shapes) return false;
    cJSON_ArrayForEach(x, sh)
    {
        st_index_shape *s = &e->shapes[e->n_shapes++];
        if (!get_str(x, "shape", s->key, sizeof s->key) || !get_str(x, "choice", s->choice, sizeof s->choice)) return false;
    }
    e->n_rows = (int)rows;
    if (e->n_rows < 0 || e->n_rows > e->n_shapes) return false;
    cJSON_ArrayForEach(x, rp)
    {
        st_index_report *r = &e->reports[e->n_reports++];
        if (!get_str(x, "file", r->file, sizeof r->file) || !get_str(x, "status", r->status, sizeof r->status)) return false;
    }
    return true;
}
#undef ST_PROV_PARSE_

st_status st_tables_index_parse(const char *text, size_t len, st_tables_index **out)
{
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "written"), *arr = cJSON_GetObjectItemCaseSensitive(root, "tables");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format"), *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    st_tables_index *ix = calloc(1, sizeof *ix);
    bool ok = ix && cJSON_IsString(fmt) && !strcmp(fmt->valuestring, ST_TABLES_INDEX_FORMAT) && cJSON_IsNumber(ver) &&
              ver->valuedouble == ST_TABLES_INDEX_VERSION && cJSON_IsObject(w) && cJSON_IsArray(arr) &&
              get_str(w, "date", ix->date, sizeof ix->date) && get_str(w, "tool", ix->tool, sizeof ix->tool) &&
              get_str(w, "source_commit", ix->source_commit, sizeof ix->source_commit) &&
              get_str(w, "identity", ix->writer, sizeof ix->writer) &&
              get_str(w, "device", ix->writer_device, sizeof ix->writer_device) &&
              get_str(w, "folder_line", ix->dir_line, sizeof ix->dir_line) &&
              get_str(w, "engages", ix->engages, sizeof ix->engages);
    if (ok) {
        const int n = cJSON_GetArraySize(arr);
        ix->e = calloc((size_t)n + 1, sizeof *ix->e);
        ok = ix->e != NULL;
        const cJSON *o;
        cJSON_ArrayForEach(o, arr)
        {
            if (!ok) break;
            ok = parse_entry(o, &ix->e[ix->n]);
            ix->n++; /* counted even when it failed, so its shapes are freed */
        }
    }
    cJSON_Delete(root);
    if (!ok) {
        st_tables_index_free(ix);
        return st_fail(ST_ERR_PARSE, "tables.json: not a well-formed index (format %s version %d)", ST_TABLES_INDEX_FORMAT,
                       ST_TABLES_INDEX_VERSION);
    }
    *out = ix;
    return ST_OK;
}

