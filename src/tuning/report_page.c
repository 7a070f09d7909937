#define _POSIX_C_SOURCE 200809L
/* The HTML report: entry points (strata/tools/report.h), the page skeleton, the
 * identity block and the gate's step chart shared by the pages. */
#include "strata/tools/report.h"
#include "report_page.h"
#include "out_manifest.h"
#include "strata/table.h"
#include "strata/tools/output.h"
#include "file_write.h"

#include <stdbool.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *st_j_str(const cJSON *o, const char *key, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : dflt;
}

double st_j_num(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : dflt;
}

bool st_j_bool(const cJSON *o, const char *key, bool dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

const cJSON *st_j_obj(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsObject(v) ? v : NULL;
}

const cJSON *st_j_arr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsArray(v) ? v : NULL;
}

static const char CSS[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1d2530;"
    "background:#f6f7f9;margin:0;padding:24px 32px;max-width:1100px}\n"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5dae1;"
    "padding-bottom:4px}h3{font-size:15px;margin:0;font-family:ui-monospace,Menlo,Consolas,monospace}\n"
    ".sub{color:#5a6675;margin:0 0 16px}\n"
    "section{background:#fff;border:1px solid #dde2e8;border-radius:6px;padding:12px 18px;margin:14px 0}\n"
    ".alert{background:#fdecec;border:2px solid #c62828;color:#8e0000}.alert h2{color:#c62828;border-color:#f3b4b4}\n"
    ".ok{color:#1b7a3a;font-weight:600}.bad{color:#c62828;font-weight:600}.warn{color:#a15c00;font-weight:600}\n"
    "table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px 3px 0;text-align:left;vertical-align:top}"
    "th{color:#5a6675;font-weight:600}table.grid td,table.grid th{border-bottom:1px solid #eceff3;padding:3px 12px 3px 4px}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}td.mismatch{background:#fdecec;color:#c62828;font-weight:600}\n"
    "code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}\n"
    "figure{margin:14px 0 22px;padding:0}figcaption{margin-bottom:4px}.meta{color:#5a6675;font-size:12px}\n"
    ".decision{margin:2px 0 0}.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;"
    "width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:4px}\n"
    "svg.chart{display:block;max-width:100%;height:auto;font-family:system-ui,Helvetica,Arial,sans-serif}\n"
    "svg .label{font-size:12px;fill:#1d2530}svg .value{font-size:12px;fill:#1d2530}svg .note{fill:#5a6675;font-style:italic}\n"
    "svg .tick,svg .axis{font-size:11px;fill:#5a6675}svg .grid{stroke:#e6e9ee;stroke-width:1}\n"
    "svg .iqr{stroke:#1d2530;stroke-width:1.4;fill:none}svg .ref{stroke:#455a64;stroke-width:1.2;stroke-dasharray:4 3}\n"
    "svg .band{fill:#ffb300;fill-opacity:.22}svg .band-label{font-size:11px;fill:#8a5a00}\n"
    ".bar-plain,.sw.plain{fill:#7fa7d9;background:#7fa7d9}.bar-default,.sw.default{fill:#546e7a;background:#546e7a}"
    ".bar-kept,.sw.kept{fill:#2e9d5a;background:#2e9d5a}.bar-bad,.sw.bad{fill:#d32f2f;background:#d32f2f}"
    ".bar-same,.sw.same{fill:#cfd8dc;background:#cfd8dc}.bar-alt,.sw.alt{fill:#ef8a3a;background:#ef8a3a}\n"
    "footer{color:#5a6675;font-size:12px;margin-top:24px}\n";

void st_page_begin(st_html *h, const char *title)
{
    st_html_raw(h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    st_html_text(h, title);
    st_html_raw(h, "</title>\n<style>\n");
    st_html_raw(h, CSS);
    st_html_raw(h, "</style>\n</head>\n<body>\n");
}

void st_page_end(st_html *h, const char *name)
{
    st_html_raw(h, "<footer>Rendered from <code>");
    st_html_text(h, name);
    st_html_raw(h, "</code> (<code>tune_decode report ");
    st_html_text(h, name);
    st_html_raw(h, "</code> renders it again). Self-contained: no scripts, nothing fetched.</footer>\n</body>\n</html>\n");
}

void st_page_kv(st_html *h, const char *key, const char *value)
{
    st_html_raw(h, "<tr><th>");
    st_html_text(h, key);
    st_html_raw(h, "</th><td>");
    st_html_text(h, value);
    st_html_raw(h, "</td></tr>\n");
}

/* A scalar or an array of scalars as text ("1, 2, 4, 8"). */
static void value_text(const cJSON *v, char *buf, size_t n)
{
    buf[0] = '\0';
    if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring ? v->valuestring : "");
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.10g", v->valuedouble);
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "yes" : "no");
    else if (cJSON_IsArray(v)) {
        size_t at = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v)
        {
            char one[128];
            value_text(cJSON_IsArray(e) || cJSON_IsObject(e) ? NULL : e, one, sizeof one);
            if (at < n) at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? ", " : "", one);
        }
        if (!at) snprintf(buf, n, "(none)");
    }
}

/* Every scalar (or list) field of object O as key/value rows, skipping
 * the keys in SKIP (NULL-terminated). */
static void object_rows(st_html *h, const cJSON *o, const char *prefix, const char *const *skip)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, o)
    {
        if (!v->string || cJSON_IsObject(v)) continue;
        bool skipped = false;
        for (int i = 0; skip && skip[i]; i++) skipped |= !strcmp(skip[i], v->string);
        if (skipped) continue;
        char key[160], val[1024];
        snprintf(key, sizeof key, "%s%s", prefix, v->string);
        value_text(v, val, sizeof val);
        st_page_kv(h, key, val);
    }
}

void st_page_identity(st_html *h, const cJSON *root)
{
    const cJSON *id = st_j_obj(root, "identity");
    st_html_raw(h, "<section id=\"identity\">\n<h2>Identity and device</h2>\n<table>\n");
    char hdr[512];
    snprintf(hdr, sizeof hdr, "%s %s %s %.0f", st_j_str(id, "arch", "?"), st_j_str(id, "runtime", "?"),
             st_j_str(id, "compiler", "?"), st_j_num(id, "space", -1));
    st_page_kv(h, "table header", hdr);
    static const char *const known[] = {"arch", "runtime", "compiler", "space", NULL};
    if (id) {
        st_page_kv(h, "arch", st_j_str(id, "arch", "?"));
        st_page_kv(h, "runtime", st_j_str(id, "runtime", "?"));
        st_page_kv(h, "compiler", st_j_str(id, "compiler", "?"));
        object_rows(h, id, "", known);
    }
    char tool[256];
    snprintf(tool, sizeof tool, "%s %s", st_j_str(root, "tool", "tune_decode"), st_j_str(root, "version", "?"));
    st_page_kv(h, "tool", tool);
    st_page_kv(h, "source commit", st_j_str(root, "source_commit", "(not recorded)"));
    st_page_kv(h, "date", st_j_str(root, "date", "(not recorded)"));
    if (st_j_str(root, "command_line", NULL)) st_page_kv(h, "command line", st_j_str(root, "command_line", ""));
    const cJSON *op = st_j_obj(root, "options");
    if (op) object_rows(h, op, "option ", NULL);
    st_html_raw(h, "</table>\n</section>\n");
}

void st_page_steps_chart(st_html *h, const cJSON *steps, const char *caption)
{
    const int n = cJSON_GetArraySize(steps);
    if (n <= 0) return;
    st_bar *bars = calloc((size_t)n * 2, sizeof *bars);
    char (*labels)[48] = calloc((size_t)n * 2, sizeof *labels);
    char (*notes)[48] = calloc((size_t)n * 2, sizeof *notes);
    if (!bars || !labels || !notes) {
        h->oom = true;
        free(bars), free(labels), free(notes);
        return;
    }
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, steps)
    {
        if (k >= 2 * n) break;
        const int nt = (int)st_j_num(e, "n_tokens", 0);
        const double a = st_j_num(e, "without_us", NAN), b = st_j_num(e, "with_us", NAN);
        const double sa = st_j_num(e, "spread_without", 0), sb = st_j_num(e, "spread_with", 0);
        /* quartiles when recorded, else the interquartile width around the median */
        snprintf(labels[k], sizeof labels[0], "n_tokens %d, without", nt);
        bars[k] = (st_bar){labels[k], a, st_j_num(e, "without_p25_us", a * (1 - sa / 2)),
                           st_j_num(e, "without_p75_us", a * (1 + sa / 2)), ST_BAR_DEFAULT, ""};
        k++;
        snprintf(labels[k], sizeof labels[0], "with the table");
        if (a > 0 && isfinite(b)) snprintf(notes[k], sizeof notes[0], "%+.1f%%", 100 * (b - a) / a);
        bars[k] = (st_bar){labels[k], b, st_j_num(e, "with_p25_us", b * (1 - sb / 2)), st_j_num(e, "with_p75_us", b * (1 + sb / 2)),
                           ST_BAR_ALT, notes[k]};
        k++;
    }
    st_chart c = {caption, bars, k, "µs per decode step", false, 0, 0, NULL, false, 0};
    st_svg_bar_chart(h, &c);
    st_html_raw(h, "<p class=\"legend meta\"><span><i class=\"sw default\"></i>without the table</span>"
                   "<span><i class=\"sw alt\"></i>with the table</span><span>whiskers: the interquartile spread</span></p>\n");
    free(bars);
    free(labels);
    free(notes);
}

st_status st_report_html_render(const char *json, size_t len, const char *name, char **html, size_t *html_len)
{
    *html = NULL;
    *html_len = 0;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return st_fail(ST_ERR_PARSE, "report: %s: not JSON (or not a JSON object)", name);
    }
    const char *kind = st_j_str(root, "report", NULL);
    if (!kind) kind = st_j_arr(root, "shapes") ? "autotune" : st_j_arr(root, "steps") ? "verify" : st_j_arr(root, "rows") ? "bench" : "";
    void (*body)(st_html *, const cJSON *) = !strcmp(kind, "autotune") ? st_page_autotune
                                             : !strcmp(kind, "verify")  ? st_page_verify
                                             : !strcmp(kind, "bench")   ? st_page_bench
                                             : !strcmp(kind, "settings") ? st_page_settings
                                                                        : NULL;
    if (!body) {
        cJSON_Delete(root);
        return st_fail(ST_ERR_PARSE, "report: %s: not a strata-tune report (no shapes, steps or rows)", name);
    }
    st_html h;
    st_html_init(&h);
    body(&h, root);
    st_page_end(&h, name);
    cJSON_Delete(root);
    return st_html_take(&h, html, html_len);
}

void st_report_html_path(const char *json_path, char *out, size_t n)
{
    const size_t l = strlen(json_path);
    const bool json = l >= 5 && !strcmp(json_path + l - 5, ".json");
    const size_t need = (json ? l - 5 : l) + 6;
    if (!n) return;
    if (need > n) { /* a cut path would name another file: none at all */
        out[0] = '\0';
        return;
    }
    if (json)
        snprintf(out, n, "%.*s.html", (int)(l - 5), json_path);
    else
        snprintf(out, n, "%s.html", json_path);
}

st_status st_report_html_write(const char *json_path, const char *html_path)
{
    char *json = NULL, *html = NULL;
    size_t len = 0, hl = 0;
    if (!json_path || !html_path || !html_path[0])
        return st_fail(ST_ERR_INVALID_ARG, "report: no page path (a path too long for its buffer is refused, never cut)");
    ST_TRY(st_out_not_input(html_path, json_path));
    ST_TRY(st_out_not_tool_file(html_path));
    ST_TRY(st_manifest_not_others(html_path, NULL));
    ST_TRY(st_out_target_check(html_path)); /* before the render: a FIFO or a folder there is refused at once */
    ST_TRY(st_read_file(json_path, &json, &len));
    st_status s = st_report_html_render(json, len, st_path_base(json_path), &html, &hl);
    free(json);
    if (s == ST_OK) s = st_file_write_atomic(html_path, html, hl);
    free(html);
    return s;
}
