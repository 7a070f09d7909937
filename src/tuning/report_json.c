#define _POSIX_C_SOURCE 200809L
/* The shared parts of the tools' JSON documents (report_json.h) and their
 * public faces (strata/tools/report.h). */
#include "report_json.h"
#include "file_write.h"
#include "report_page.h"
#include "out_manifest.h"
#include "tmpfiles.h"
#include "strata/tools/report.h"
#include "st_source_commit.h"
#include "strata/tools/text.h"
#include "tools_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *st_source_commit(void) { return ST_SOURCE_COMMIT; }

void st_utc_now(char *buf, size_t n)
{
    const time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    if (!strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tmv) && n) buf[0] = '\0';
}

void st_json_add_text(cJSON *o, const char *name, const char *s)
{
    char *v = st_text_utf8_dup(s ? s : "");
    cJSON_AddStringToObject(o, name, v ? v : "");
    free(v);
}

cJSON *st_json_identity(const st_identity *id)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    char hdr[4 * ST_TOKEN_MAX + 16];
    st_identity_header(id, hdr, sizeof hdr);
    st_json_add_text(o, "header", hdr);
    st_json_add_text(o, "arch", id->arch);
    st_json_add_text(o, "runtime", id->runtime);
    st_json_add_text(o, "compiler", id->compiler);
    cJSON_AddNumberToObject(o, "space", id->space);
    st_json_add_text(o, "device", id->device_name);
    st_json_add_text(o, "device_model", id->model);
    cJSON_AddNumberToObject(o, "compute_units", id->compute_units);
    st_json_add_text(o, "driver", id->driver);
    return o;
}

void st_json_report_header(cJSON *root, const char *kind, const st_identity *id, const char *command_line)
{
    char date[32];
    st_utc_now(date, sizeof date);
    cJSON_AddStringToObject(root, "report", kind);
    cJSON_AddStringToObject(root, "tool", "tune_decode");
    cJSON_AddStringToObject(root, "version", st_version());
    cJSON_AddStringToObject(root, "source_commit", st_source_commit());
    cJSON_AddStringToObject(root, "date", date);
    if (command_line) st_json_add_text(root, "command_line", command_line);
    cJSON *idj = st_json_identity(id);
    if (idj) cJSON_AddItemToObject(root, "identity", idj);
}

char *st_identity_json(const st_identity *id)
{
    if (!id) return NULL;
    cJSON *o = st_json_identity(id);
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return text;
}

/* The page and its JSON are at least this big together: reserved before a
 * long run (a verify of 14 token counts writes a JSON and page of tens of
 * KB; the rounds it records make it grow). */
#define REPORT_RESERVE ((size_t)256 << 10)

static st_status check_paths(const char *html_path, const char *const *inputs, int n_inputs);

st_status st_report_write_check(const char *html_path, const char *const *inputs, int n_inputs)
{
    ST_TRY(check_paths(html_path, inputs, n_inputs));
    /* room for the pair, before the run: a probe beside the page (a
     * temporary file of the file rule), written, synced and removed */
    static const char zeros[REPORT_RESERVE];
    char *tmp = NULL;
    int slot = -1;
    const st_status s = st_file_write_temp(html_path, zeros, sizeof zeros, &tmp, &slot);
    if (s != ST_OK) {
        char why[4096];
        snprintf(why, sizeof why, "%s", st_last_error());
        return st_fail(s, "%s (the room its page and JSON need, checked before the run)", why);
    }
    unlink(tmp);
    st_tmpfile_untrack(slot);
    free(tmp);
    return ST_OK;
}

static st_status check_paths(const char *html_path, const char *const *inputs, int n_inputs)
{
    if (!html_path || (n_inputs > 0 && !inputs)) return st_fail(ST_ERR_INVALID_ARG, "report: NULL argument");
    const size_t l = strlen(html_path);
    if (l < 6 || strcmp(html_path + l - 5, ".html"))
        return st_fail(ST_ERR_INVALID_ARG, "%s: the page's name must end in .html (its JSON goes beside it)", html_path);
    char *json_path = malloc(l + 1);
    if (!json_path) return st_fail(ST_ERR_NOMEM, "report: out of memory");
    snprintf(json_path, l + 1, "%.*s.json", (int)(l - 5), html_path);
    const char *outs[2] = {html_path, json_path};
    st_status s = ST_OK;
    for (int k = 0; k < 2 && s == ST_OK; k++) {
        s = st_out_not_tool_file(outs[k]);
        if (s == ST_OK) s = st_manifest_not_others(outs[k], NULL);
        if (s == ST_OK) s = st_out_target_check(outs[k]);
        for (int i = 0; i < n_inputs && s == ST_OK; i++)
            if (inputs[i]) s = st_out_not_input(outs[k], inputs[i]);
    }
    free(json_path);
    return s;
}

st_status st_report_write(const char *json, const char *html_path)
{
    if (!json || !html_path) return st_fail(ST_ERR_INVALID_ARG, "report: NULL argument");
    ST_TRY(check_paths(html_path, NULL, 0));
    const size_t l = strlen(html_path);
    char *json_path = malloc(l + 1);
    if (!json_path) return st_fail(ST_ERR_NOMEM, "report: out of memory");
    snprintf(json_path, l + 1, "%.*s.json", (int)(l - 5), html_path);
    /* the JSON and its page as one pair: both written to temporary files
     * first (a full disk stops here, before either changes), then renamed
     * in; never a new JSON without its page */
    char *page = NULL;
    size_t page_len = 0;
    st_status s = st_report_html_render(json, strlen(json), st_path_base(json_path), &page, &page_len);
    const char *path[2] = {json_path, html_path};
    const char *text[2] = {json, page};
    const size_t len[2] = {strlen(json), page_len};
    if (s == ST_OK) s = st_file_write_set(2, path, text, len);
    free(page);
    free(json_path);
    return s;
}
