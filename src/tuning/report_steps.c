/* The verify page (the end-to-end gate on its own: step times without and
 * with the table, the byte check, the verdict) and the bench page (probes,
 * then per shape the time per call of each path and token count). Both are
 * rendered from the JSON that `verify --html` and `bench --html` write. */
#include "report_page.h"
#include "file_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void header(st_html *h, const cJSON *root, const char *what, const char *subject)
{
    const cJSON *id = st_j_obj(root, "identity");
    char title[512];
    snprintf(title, sizeof title, "strata-tune %s report: %s on %s", what, subject, st_j_str(id, "arch", "?"));
    st_page_begin(h, title);
    st_html_raw(h, "<header><h1>");
    st_html_textf(h, "%c%s report: %s", what[0] - 32, what + 1, subject);
    st_html_raw(h, "</h1><p class=\"sub\">");
    st_html_textf(h, "%s (%s) · %s · %s %s", st_j_str(id, "device", "?"), st_j_str(id, "arch", "?"), st_j_str(root, "date", "?"),
                  st_j_str(root, "tool", "tune_decode"), st_j_str(root, "version", "?"));
    st_html_raw(h, "</p></header>\n");
}

void st_page_verify(st_html *h, const cJSON *root)
{
    const cJSON *op = st_j_obj(root, "options");
    header(h, root, "verify", st_path_base(st_j_str(op, "table", "?")));
    const bool bytes = st_j_bool(root, "bytes_equal", false), passed = st_j_bool(root, "passed", false);
    if (!bytes)
        st_html_raw(h, "<section class=\"alert\" id=\"mismatch\">\n<h2>Byte-compare MISMATCH: the decode step gives other "
                       "bytes with the table</h2>\n<p>A table must never change results. This is a bug in the kernels; the "
                       "table must not be installed.</p>\n</section>\n");
    st_html_raw(h, "<section id=\"verdict\">\n<h2>Verdict</h2>\n<p>");
    st_html_raw(h, passed ? "<span class=\"ok\">" : "<span class=\"bad\">");
    st_html_text(h, st_j_str(root, "message", passed ? "PASS" : "FAIL"));
    st_html_raw(h, "</span></p>\n<table>\n");
    st_page_kv(h, "bytes identical", bytes ? "yes, every layer and token count" : "NO");
    st_page_kv(h, "not slower than the limit", st_j_bool(root, "not_slower", false) ? "yes" : "no");
    char b[96];
    snprintf(b, sizeof b, "%.0f operations per step, %.0f expert layers", st_j_num(root, "n_ops", 0), st_j_num(root, "n_layers", 0));
    st_page_kv(h, "model", b);
    snprintf(b, sizeof b, "%.0f", st_j_num(root, "table_launches", 0));
    st_page_kv(h, "launches from the table (8 steps)", b);
    st_html_raw(h, "</table>\n</section>\n");
    st_page_identity(h, root);
    st_html_raw(h, "<section id=\"gate\">\n<h2>Decode step times</h2>\n");
    st_page_steps_chart(h, st_j_arr(root, "steps"), "decode step time per n_tokens, without and with the table");
    st_html_raw(h, "</section>\n");
}

/* Rows of one shape are consecutive in the bench JSON. */
static bool same_group(const cJSON *a, const cJSON *b)
{
    return a && b && !strcmp(st_j_str(a, "kind", ""), st_j_str(b, "kind", "")) &&
           !strcmp(st_j_str(a, "shape", ""), st_j_str(b, "shape", ""));
}

static void bench_group(st_html *h, const cJSON *first, int n, int idx)
{
    st_bar *bars = calloc((size_t)n, sizeof *bars);
    char (*labels)[64] = calloc((size_t)n, sizeof *labels), (*notes)[64] = calloc((size_t)n, sizeof *notes);
    if (!bars || !labels || !notes) {
        h->oom = true;
        free(bars), free(labels), free(notes);
        return;
    }
    const cJSON *r = first;
    for (int i = 0; i < n && r; i++, r = r->next) {
        snprintf(labels[i], sizeof labels[0], "n=%.0f %s", st_j_num(r, "n_tokens", 0), st_j_str(r, "path", "?"));
        snprintf(notes[i], sizeof notes[0], "%.1f GB/s, %.0f%% of read", st_j_num(r, "gb_per_s", 0),
                 100 * st_j_num(r, "fraction_of_read", 0));
        const double m = st_j_num(r, "median_us", NAN);
        const bool def = !strcmp(st_j_str(r, "path", ""), "default");
        bars[i] = (st_bar){labels[i], m, st_j_num(r, "p25_us", m), st_j_num(r, "p75_us", m), def ? ST_BAR_DEFAULT : ST_BAR_ALT, notes[i]};
    }
    st_html_fmt(h, "<figure class=\"shape\" id=\"shape-%d\" data-candidates=\"%d\">\n<figcaption><h3>", idx, n);
    st_html_textf(h, "%s %s", st_j_str(first, "kind", "?"), st_j_str(first, "shape", "?"));
    st_html_raw(h, "</h3></figcaption>\n");
    char caption[300];
    snprintf(caption, sizeof caption, "%s %s: time per call", st_j_str(first, "kind", "?"), st_j_str(first, "shape", "?"));
    st_chart c = {caption, bars, n, "µs per call (median)", false, 0, 0, NULL, false, 0};
    st_svg_bar_chart(h, &c);
    st_html_raw(h, "</figure>\n");
    free(bars);
    free(labels);
    free(notes);
}

void st_page_bench(st_html *h, const cJSON *root)
{
    const cJSON *id = st_j_obj(root, "identity");
    header(h, root, "bench", st_j_str(id, "device", "?"));
    st_html_raw(h, "<section id=\"verdict\">\n<h2>Probes</h2>\n<table>\n");
    char b[128];
    snprintf(b, sizeof b, "%.1f GB/s (streaming read)", st_j_num(root, "read_gb_per_s", 0));
    st_page_kv(h, "read bandwidth", b);
    snprintf(b, sizeof b, "%.1f GB/s (read + write)", st_j_num(root, "copy_gb_per_s", 0));
    st_page_kv(h, "copy bandwidth", b);
    snprintf(b, sizeof b, "%.2f µs", st_j_num(root, "launch_overhead_us", 0));
    st_page_kv(h, "launch overhead", b);
    snprintf(b, sizeof b, "%.1f MB", st_j_num(root, "llc_bytes", 0) / 1e6);
    st_page_kv(h, "last-level cache (rotation past it)", b);
    st_html_raw(h, "</table>\n</section>\n");
    st_page_identity(h, root);
    st_html_raw(h, "<section class=\"family\" id=\"family-bench\">\n<h2>Kernels and decode steps</h2>\n"
                   "<p class=\"legend meta\"><span><i class=\"sw default\"></i>default</span><span><i class=\"sw alt\"></i>"
                   "other path (variant, ablation)</span><span>whiskers: p25-p75</span></p>\n");
    const cJSON *rows = st_j_arr(root, "rows");
    const cJSON *r = rows ? rows->child : NULL;
    int g = 0;
    while (r) {
        const cJSON *first = r;
        int n = 0;
        while (r && same_group(first, r) && n < 64) r = r->next, n++;
        if (!cJSON_IsObject(first)) { /* a hostile row: skip it */
            r = first->next;
            continue;
        }
        bench_group(h, first, n, g++);
    }
    st_html_raw(h, "</section>\n");
}
