/* The autotune page: what `tune` measured and decided, from the JSON report
 * alone (tuner_report.c writes it). Byte-compare mismatches first, in red;
 * then the campaign verdict, the identity, the byte compares, the gate's
 * step times, and per kernel family one chart per shape. */
#include "report_page.h"
#include "file_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "expert iq3_s iq4_nl 2560 640 1" / "mmvq iq3_s 4096 14336": the tuner's key. */
static void shape_key(const cJSON *s, char *buf, size_t n)
{
    const char *kind = st_j_str(s, "kind", "?");
    if (!strcmp(kind, "mmvq"))
        snprintf(buf, n, "mmvq %s %.0f %.0f", st_j_str(s, "type", "?"), st_j_num(s, "n_rows", 0), st_j_num(s, "n_cols", 0));
    else
        snprintf(buf, n, "%s %s %s %.0f %.0f %.0f", kind, st_j_str(s, "type", "?"), st_j_str(s, "down_type", "?"),
                 st_j_num(s, "n_embd", 0), st_j_num(s, "n_ff", 0), st_j_num(s, "n_tokens", 0));
}

static bool is_mismatch(const cJSON *c) { return !strcmp(st_j_str(c, "byte_compare", ""), "MISMATCH"); }

/* The candidate's blended median and quartiles (sums over its timings when
 * the report predates the blended quartiles). */
static void blended(const cJSON *c, double *med, double *lo, double *hi)
{
    double p25 = 0, p75 = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, st_j_arr(c, "timings"))
    {
        p25 += st_j_num(t, "p25_us", 0);
        p75 += st_j_num(t, "p75_us", 0);
    }
    *med = st_j_num(c, "blended_median_us", NAN);
    *lo = st_j_num(c, "blended_p25_us", p25 > 0 ? p25 : *med);
    *hi = st_j_num(c, "blended_p75_us", p75 > 0 ? p75 : *med);
}

static void mismatch_alert(st_html *h, const cJSON *shapes)
{
    int n = 0;
    const cJSON *s, *c;
    cJSON_ArrayForEach(s, shapes) cJSON_ArrayForEach(c, st_j_arr(s, "candidates")) n += is_mismatch(c);
    if (!n) return;
    st_html_fmt(h, "<section class=\"alert\" id=\"mismatch\">\n<h2>Byte-compare MISMATCH: %d candidate%s differed from the default</h2>\n<ul>\n",
                n, n == 1 ? "" : "s");
    cJSON_ArrayForEach(s, shapes)
    {
        char key[200];
        shape_key(s, key, sizeof key);
        cJSON_ArrayForEach(c, st_j_arr(s, "candidates"))
        {
            if (!is_mismatch(c)) continue;
            st_html_raw(h, "<li><code>");
            st_html_text(h, key);
            st_html_raw(h, "</code>: ");
            st_html_text(h, st_j_str(c, "name", "?"));
            st_html_raw(h, ": ");
            st_html_text(h, st_j_str(c, "mismatch", "output bytes differ"));
            st_html_raw(h, "</li>\n");
        }
    }
    st_html_raw(h, "</ul>\n<p>Every variant must give the default's bytes (the exactness contract): a mismatch is a bug in "
                   "the kernels. The candidate was disqualified and the table written without it. Report it.</p>\n</section>\n");
}

/* "expert: 8 shapes, a variant kept on 7, the default on 1; default 198-250 µs" */
static void family_verdict(st_html *h, const cJSON *shapes, const char *kind, const char *title)
{
    int n = 0, kept = 0, noisy = 0;
    double lo = INFINITY, hi = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, shapes)
    {
        if (strcmp(st_j_str(s, "kind", ""), kind)) continue;
        n++;
        const cJSON *d = st_j_obj(s, "decision");
        kept += strcmp(st_j_str(d, "kept", "default"), "default") != 0;
        noisy += st_j_bool(d, "noisy", false);
        const cJSON *c0 = cJSON_GetArrayItem(st_j_arr(s, "candidates"), 0);
        const double m = st_j_num(c0, "blended_median_us", NAN);
        if (isfinite(m)) {
            if (m < lo) lo = m;
            if (m > hi) hi = m;
        }
    }
    if (!n) return;
    st_html_raw(h, "<li><b>");
    st_html_text(h, title);
    st_html_fmt(h, "</b>: %d shape%s, a variant kept on %d, the default on %d", n, n == 1 ? "" : "s", kept, n - kept);
    if (isfinite(lo)) st_html_textf(h, "; default %.1f-%.1f µs", lo, hi);
    if (noisy) st_html_fmt(h, "; <span class=\"warn\">%d decision%s noisy</span>", noisy, noisy == 1 ? "" : "s");
    st_html_raw(h, "</li>\n");
}

static void verdict(st_html *h, const cJSON *root, const cJSON *shapes)
{
    const cJSON *sm = st_j_obj(root, "summary"), *tb = st_j_obj(root, "table"), *gate = st_j_obj(root, "gate");
    const int mism = (int)st_j_num(sm, "mismatches", 0);
    const bool written = st_j_bool(tb, "written", false), engaged = st_j_bool(tb, "engaged", false);
    st_html_raw(h, "<section id=\"verdict\">\n<h2>Campaign verdict</h2>\n<p>");
    if (mism) st_html_raw(h, "<span class=\"bad\">FAILED: byte-compare mismatches (a kernel bug).</span> ");
    else if (!written) st_html_raw(h, "<span class=\"bad\">No table installed.</span> ");
    else if (engaged) st_html_raw(h, "<span class=\"ok\">Table installed and engaged.</span> ");
    else st_html_raw(h, "<span class=\"bad\">Table written but it does NOT engage here.</span> ");
    st_html_fmt(h, "%.0f shapes tuned: %.0f kept a variant, %.0f kept the default; %d mismatch%s; %.0f noisy decision%s.</p>\n<ul>\n",
                st_j_num(sm, "shapes", 0), st_j_num(sm, "kept_variants", 0),
                st_j_num(sm, "shapes", 0) - st_j_num(sm, "kept_variants", 0), mism, mism == 1 ? "" : "es",
                st_j_num(sm, "noisy", 0), st_j_num(sm, "noisy", 0) == 1 ? "" : "s");
    family_verdict(h, shapes, "expert", "expert_grouped");
    family_verdict(h, shapes, "mmvq", "iq_mmvq");
    st_html_raw(h, "</ul>\n<table>\n");
    st_page_kv(h, "table", st_path_base(st_j_str(tb, "path", "(none)")));
    st_page_kv(h, "load line", st_j_str(tb, "engagement_line", ""));
    const char *gline = st_j_str(gate, "message", st_j_str(tb, "gate", ""));
    st_page_kv(h, "end-to-end gate", gline);
    const double changed = st_j_num(sm, "changed_vs_previous_table", -1);
    if (changed >= 0) {
        char b[64];
        snprintf(b, sizeof b, "%.0f", changed);
        st_page_kv(h, "choices changed since the previous table", b);
    }
    st_html_raw(h, "</table>\n</section>\n");
}

static void byte_table(st_html *h, const cJSON *shapes)
{
    st_html_raw(h, "<section id=\"bytes\">\n<h2>Byte compares</h2>\n<p class=\"meta\">Each candidate's output, compared byte "
                   "for byte with the default's on the device, at every token count it was timed at.</p>\n"
                   "<table class=\"grid\">\n<tr><th>shape</th><th>compared</th><th>identical</th><th>mismatches</th></tr>\n");
    const cJSON *s, *c;
    cJSON_ArrayForEach(s, shapes)
    {
        int n = 0, same = 0, bad = 0;
        cJSON_ArrayForEach(c, st_j_arr(s, "candidates"))
        {
            const char *b = st_j_str(c, "byte_compare", "");
            if (!strcmp(b, "reference")) continue;
            n++;
            same += !strcmp(b, "identical");
            bad += is_mismatch(c);
        }
        char key[200];
        shape_key(s, key, sizeof key);
        st_html_raw(h, "<tr><td><code>");
        st_html_text(h, key);
        st_html_fmt(h, "</code></td><td class=\"num\">%d</td><td class=\"num\">%d</td><td class=\"num%s\">%d</td></tr>\n", n, same,
                    bad ? " mismatch" : "", bad);
    }
    st_html_raw(h, "</table>\n</section>\n");
}

/* Per-token-count medians of a shape's candidates (mmvq blends several). */
static void timings_table(st_html *h, const cJSON *cands)
{
    const cJSON *c0 = cJSON_GetArrayItem(cands, 0), *t, *c;
    if (cJSON_GetArraySize(st_j_arr(c0, "timings")) < 2) return;
    st_html_raw(h, "<details><summary class=\"meta\">medians per token count (µs)</summary>\n<table class=\"grid\">\n<tr><th>candidate</th>");
    cJSON_ArrayForEach(t, st_j_arr(c0, "timings")) st_html_fmt(h, "<th>n=%.0f</th>", st_j_num(t, "n_tokens", 0));
    st_html_raw(h, "</tr>\n");
    cJSON_ArrayForEach(c, cands)
    {
        st_html_raw(h, "<tr><td>");
        st_html_text(h, st_j_str(c, "name", "?"));
        st_html_raw(h, "</td>");
        cJSON_ArrayForEach(t, st_j_arr(c, "timings")) st_html_fmt(h, "<td class=\"num\">%.2f</td>", st_j_num(t, "median_us", NAN));
        st_html_raw(h, "</tr>\n");
    }
    st_html_raw(h, "</table>\n</details>\n");
}

static void shape_figure(st_html *h, const cJSON *s, int idx, double thr_pct)
{
    const cJSON *cands = st_j_arr(s, "candidates"), *d = st_j_obj(s, "decision");
    const int n = cJSON_GetArraySize(cands);
    char key[200];
    shape_key(s, key, sizeof key);
    const char *kept = st_j_str(d, "kept", "default");
    st_bar *bars = calloc(n > 0 ? (size_t)n : 1, sizeof *bars);
    if (!bars) {
        h->oom = true;
        return;
    }
    double dmed = NAN;
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cands)
    {
        if (k >= n) break;
        st_bar *b = &bars[k];
        b->label = st_j_str(c, "name", "?");
        blended(c, &b->median, &b->lo, &b->hi);
        const bool is_def = st_j_bool(c, "is_default", k == 0);
        if (is_def) {
            b->style = ST_BAR_DEFAULT;
            b->note = strcmp(kept, "default") ? "default" : "default, kept";
            dmed = b->median;
        } else if (is_mismatch(c)) {
            b->style = ST_BAR_BAD, b->note = "MISMATCH: disqualified";
        } else if (!strcmp(b->label, kept)) {
            b->style = ST_BAR_KEPT, b->note = "kept";
        } else if (st_j_bool(c, "same_launch_as_default", false)) {
            b->style = ST_BAR_SAME, b->note = "same launch as the default";
        } else {
            b->style = ST_BAR_PLAIN, b->note = "";
        }
        k++;
    }
    const double thr = thr_pct / 100;
    char band[96], caption[300];
    snprintf(band, sizeof band, "keep threshold %.1f%%", thr_pct);
    snprintf(caption, sizeof caption, "%s: blended median per candidate, interquartile whiskers", key);
    const bool mix = cJSON_GetArraySize(st_j_arr(cJSON_GetArrayItem(cands, 0), "timings")) > 1;
    st_chart ch = {caption, bars, k, mix ? "µs per call (sum of the medians over the token mix)" : "µs per call (median)",
                   isfinite(dmed), dmed * (1 - thr), dmed, band, isfinite(dmed), dmed};
    st_html_fmt(h, "<figure class=\"shape\" id=\"shape-%d\" data-candidates=\"%d\">\n<figcaption><h3>", idx, k);
    st_html_text(h, key);
    st_html_raw(h, "</h3><div class=\"meta\">");
    if (!strcmp(st_j_str(s, "kind", ""), "mmvq")) {
        const cJSON *c0 = cJSON_GetArrayItem(cands, 0), *t;
        st_html_raw(h, "token mix ");
        int i = 0;
        cJSON_ArrayForEach(t, st_j_arr(c0, "timings")) st_html_fmt(h, "%s%.0f", i++ ? "," : "", st_j_num(t, "n_tokens", 0));
        st_html_raw(h, " (sum of medians)");
    } else {
        st_html_textf(h, "n_tokens %.0f, %.0f experts, top-%.0f", st_j_num(s, "n_tokens", 0), st_j_num(s, "n_expert", 0),
                      st_j_num(s, "topk", 0));
    }
    st_html_raw(h, " · weights: ");
    st_html_text(h, st_j_str(s, "weights", "?"));
    st_html_textf(h, " · rotation %.1f MB over %.0f cop%s", st_j_num(s, "rotation_bytes", 0) / 1e6, st_j_num(s, "weight_copies", 0),
                  st_j_num(s, "weight_copies", 0) == 1 ? "y" : "ies");
    st_html_raw(h, "</div></figcaption>\n");
    st_svg_bar_chart(h, &ch);
    const bool kept_variant = strcmp(kept, "default") != 0;
    st_html_raw(h, "<p class=\"decision\"><b>Decision:</b> ");
    st_html_raw(h, kept_variant ? "<span class=\"ok\">" : "<span>");
    st_html_text(h, kept_variant ? kept : "default kept");
    st_html_raw(h, "</span>");
    if (kept_variant) st_html_textf(h, " (%.1f%% faster)", st_j_num(d, "delta_pct", 0));
    if (st_j_bool(d, "noisy", false)) st_html_raw(h, " <span class=\"warn\">[noisy]</span>");
    st_html_raw(h, " — ");
    st_html_text(h, st_j_str(d, "reason", ""));
    st_html_raw(h, "</p>\n");
    timings_table(h, cands);
    st_html_raw(h, "</figure>\n");
    free(bars);
}

static void family(st_html *h, const cJSON *shapes, const char *kind, const char *title, double thr_pct)
{
    int n = 0, i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, shapes) n += !strcmp(st_j_str(s, "kind", ""), kind);
    if (!n) return;
    st_html_fmt(h, "<section class=\"family\" id=\"family-%s\">\n<h2>", kind);
    st_html_text(h, title);
    st_html_raw(h, "</h2>\n<p class=\"legend meta\"><span><i class=\"sw default\"></i>default</span><span><i class=\"sw kept\"></i>kept"
                   "</span><span><i class=\"sw plain\"></i>other candidate</span><span><i class=\"sw same\"></i>the default's own "
                   "launch</span><span><i class=\"sw bad\"></i>bytes differ</span><span>shaded: the keep threshold (a variant "
                   "is kept only left of it, with spreads apart)</span><span>whiskers: p25-p75</span></p>\n");
    cJSON_ArrayForEach(s, shapes)
    {
        if (!strcmp(st_j_str(s, "kind", ""), kind)) shape_figure(h, s, i, thr_pct);
        i++;
    }
    st_html_raw(h, "</section>\n");
}

static const char *model_name(const cJSON *root)
{
    const cJSON *op = st_j_obj(root, "options");
    const char *m = st_j_str(op, "model_name", NULL);
    if (m && m[0]) return m;
    m = st_j_str(op, "model", "");
    return m[0] ? st_path_base(m) : "demo set";
}

void st_page_autotune(st_html *h, const cJSON *root)
{
    const cJSON *shapes = st_j_arr(root, "shapes"), *id = st_j_obj(root, "identity");
    char title[512];
    snprintf(title, sizeof title, "strata-tune autotune report: %s on %s", model_name(root), st_j_str(id, "arch", "?"));
    st_page_begin(h, title);
    st_html_raw(h, "<header><h1>Autotune report: ");
    st_html_text(h, model_name(root));
    st_html_raw(h, "</h1><p class=\"sub\">");
    st_html_textf(h, "%s (%s) · %s · %s %s", st_j_str(id, "device", "?"), st_j_str(id, "arch", "?"), st_j_str(root, "date", "?"),
                  st_j_str(root, "tool", "tune_decode"), st_j_str(root, "version", "?"));
    st_html_raw(h, "</p></header>\n");
    mismatch_alert(h, shapes);
    verdict(h, root, shapes);
    st_page_identity(h, root);
    byte_table(h, shapes);
    const cJSON *gate = st_j_obj(root, "gate");
    st_html_raw(h, "<section id=\"gate\">\n<h2>End-to-end gate</h2>\n<p>");
    st_html_text(h, st_j_str(gate, "message", st_j_str(st_j_obj(root, "table"), "gate", "(not recorded)")));
    st_html_raw(h, "</p>\n");
    if (st_j_arr(gate, "steps"))
        st_page_steps_chart(h, st_j_arr(gate, "steps"), "decode step time per n_tokens, without and with the table");
    else
        st_html_raw(h, "<p class=\"meta\">No step times: the gate did not run (no variant kept, or --no-verify).</p>\n");
    st_html_raw(h, "</section>\n");
    const double thr = st_j_num(st_j_obj(root, "options"), "threshold_pct", 1);
    family(h, shapes, "expert", "expert_grouped: the MoE feed-forward", thr);
    family(h, shapes, "mmvq", "iq_mmvq: dense matrices", thr);
}
