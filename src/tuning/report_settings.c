/* The settings report: its JSON (strata-settings-<model>.json, "report":
 * "settings") and its page, the same kind as the kernel reports: the
 * verdict and the command line that applies it, the identity the profile
 * holds for, an overview chart (tokens per second of every setting), then
 * one chart per setting against the defaults with the spread over its
 * samples; a refused setting is marked with why (the prompt and position
 * of its first differing token), a failed one with the engine's words. */
#include "report_page.h"
#include "settings_internal.h"
#include "strata/identity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *state_name(st_point_state s)
{
    return s == ST_POINT_REFUSED ? "refused" : s == ST_POINT_FAILED ? "failed" : "measured";
}

cJSON *st_settings_report_json(const st_settings_run_state *s)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "report", "settings");
    cJSON_AddStringToObject(j, "tool", "tune_decode");
    cJSON_AddStringToObject(j, "version", st_version());
    cJSON_AddStringToObject(j, "date", s->date);
    if (s->o->command_line) cJSON_AddStringToObject(j, "command_line", s->o->command_line);
    cJSON *id = cJSON_AddObjectToObject(j, "identity");
    cJSON_AddStringToObject(id, "engine", s->o->engine);
    cJSON_AddStringToObject(id, "engine_version", s->engine_version);
    cJSON_AddStringToObject(id, "engine_sha256", s->engine_sha);
    cJSON_AddStringToObject(id, "model", s->model_name);
    cJSON_AddStringToObject(id, "model_sha256", s->model_sha);
    cJSON_AddStringToObject(id, "device", s->device);
    cJSON_AddStringToObject(id, "strata_table", s->table);
    cJSON_AddStringToObject(id, "strata_log", s->strata_log);
    cJSON *op = cJSON_AddObjectToObject(j, "options");
    cJSON_AddNumberToObject(op, "rounds", s->rounds);
    cJSON_AddNumberToObject(op, "prompts", s->n_prompts);
    cJSON_AddNumberToObject(op, "n_predict", s->n_predict);
    cJSON_AddNumberToObject(op, "threshold", s->threshold);
    cJSON_AddStringToObject(j, "decision", s->best ? "adopted" : s->undecided ? "cannot decide" : "defaults kept");
    cJSON_AddStringToObject(j, "verdict", s->verdict);
    cJSON_AddStringToObject(j, "command", s->command);
    cJSON *pts = cJSON_AddArrayToObject(j, "settings");
    for (int i = 0; i < s->n_points; i++) {
        const st_settings_point *p = &s->p[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(pts, o);
        cJSON_AddStringToObject(o, "label", p->label);
        cJSON *fl = cJSON_AddArrayToObject(o, "flags");
        for (int f = 0; f < p->n_flags; f++) cJSON_AddItemToArray(fl, cJSON_CreateString(p->flags[f]));
        cJSON_AddStringToObject(o, "state", state_name(p->state));
        cJSON_AddStringToObject(o, "why", p->why);
        cJSON_AddBoolToObject(o, "kept", i == s->best);
        cJSON_AddBoolToObject(o, "noisy", p->noisy);
        if (p->state == ST_POINT_REFUSED) {
            cJSON *d = cJSON_AddObjectToObject(o, "first_difference");
            cJSON_AddNumberToObject(d, "prompt", p->diff_prompt + 1);
            cJSON_AddNumberToObject(d, "position", p->diff_pos);
            cJSON_AddNumberToObject(d, "token", p->diff_got);
            cJSON_AddNumberToObject(d, "defaults_token", p->diff_want);
        }
        if (p->n_ms) {
            cJSON_AddNumberToObject(o, "tok_s", p->tps);
            cJSON_AddNumberToObject(o, "tok_s_p25", p->tps_p25);
            cJSON_AddNumberToObject(o, "tok_s_p75", p->tps_p75);
            cJSON *ms = cJSON_AddArrayToObject(o, "ms_per_token");
            for (int k = 0; k < p->n_ms; k++) cJSON_AddItemToArray(ms, cJSON_CreateNumber(p->ms[k]));
        }
        if (i > 0 && p->state == ST_POINT_MEASURED) {
            cJSON_AddNumberToObject(o, "time_change", p->change);
            cJSON_AddNumberToObject(o, "time_change_lo", p->change_lo);
            cJSON_AddNumberToObject(o, "time_change_hi", p->change_hi);
        }
        if (p->draft_n) {
            cJSON_AddNumberToObject(o, "draft_n", (double)p->draft_n);
            cJSON_AddNumberToObject(o, "draft_accepted", (double)p->draft_accepted);
        }
    }
    return j;
}

static st_bar_style style_of(const cJSON *p, int i)
{
    if (i == 0) return ST_BAR_DEFAULT;
    if (strcmp(st_j_str(p, "state", ""), "measured")) return ST_BAR_BAD;
    return st_j_bool(p, "kept", false) ? ST_BAR_KEPT : ST_BAR_PLAIN;
}

/* One setting against the defaults: two bars of tokens per second with
 * the interquartile spread of its samples, or a refused/failed mark. */
static void setting_figure(st_html *h, const cJSON *def, const cJSON *p, int i)
{
    const char *label = st_j_str(p, "label", "?"), *state = st_j_str(p, "state", "?");
    st_html_fmt(h, "<figure class=\"shape setting\" id=\"setting-%d\">\n<figcaption><h3>", i);
    st_html_text(h, label);
    st_html_raw(h, "</h3><p class=\"meta\">");
    if (strcmp(state, "measured")) st_html_raw(h, "<span class=\"bad\">");
    st_html_text(h, st_j_str(p, "why", ""));
    if (strcmp(state, "measured")) st_html_raw(h, "</span>");
    const double dn = st_j_num(p, "draft_n", 0);
    if (dn > 0) st_html_textf(h, " · drafts accepted %.0f of %.0f", st_j_num(p, "draft_accepted", 0), dn);
    st_html_raw(h, "</p></figcaption>\n");
    const double dm = st_j_num(def, "tok_s", NAN), m = st_j_num(p, "tok_s", NAN);
    st_bar bars[2] = {
        {"defaults", dm, st_j_num(def, "tok_s_p25", dm), st_j_num(def, "tok_s_p75", dm), ST_BAR_DEFAULT, "defaults"},
        {label, isfinite(m) ? m : 0, st_j_num(p, "tok_s_p25", isfinite(m) ? m : 0),
         st_j_num(p, "tok_s_p75", isfinite(m) ? m : 0), style_of(p, i), state},
    };
    char caption[400];
    snprintf(caption, sizeof caption, "%s: tokens per second against the defaults", label);
    st_chart c = {caption, bars, 2, "tokens/s (median)", false, 0, 0, NULL, isfinite(dm), dm};
    st_svg_bar_chart(h, &c);
    st_html_raw(h, "</figure>\n");
}

void st_page_settings(st_html *h, const cJSON *root)
{
    const cJSON *id = st_j_obj(root, "identity");
    char title[512];
    snprintf(title, sizeof title, "strata-tune settings report: %s", st_j_str(id, "model", "?"));
    st_page_begin(h, title);
    st_html_raw(h, "<header><h1>");
    st_html_textf(h, "Settings report: %s", st_j_str(id, "model", "?"));
    st_html_raw(h, "</h1><p class=\"sub\">");
    st_html_textf(h, "%s · %s · %s · %s %s", st_j_str(id, "engine_version", "?"), st_j_str(id, "device", "?"),
                  st_j_str(root, "date", "?"), st_j_str(root, "tool", "tune_decode"), st_j_str(root, "version", "?"));
    st_html_raw(h, "</p></header>\n<section id=\"verdict\">\n<h2>Verdict</h2>\n<p>");
    const char *dec = st_j_str(root, "decision", "?");
    st_html_raw(h, !strcmp(dec, "adopted") ? "<span class=\"ok\">" : "<span>");
    st_html_text(h, st_j_str(root, "verdict", ""));
    st_html_raw(h, "</span></p>\n<p>The engine command line that applies it:</p>\n<pre>");
    st_html_text(h, st_j_str(root, "command", ""));
    st_html_raw(h, "</pre>\n<p class=\"meta\">A setting is adopted only when its greedy tokens equal the defaults' on "
                   "every prompt and its whole interval of the time change is beyond the threshold.</p>\n</section>\n"
                   "<section id=\"identity\">\n<h2>Identity</h2>\n<table>\n");
    static const char *const KEYS[][2] = {{"engine", "engine"},
                                          {"engine_version", "engine build"},
                                          {"engine_sha256", "engine sha256 (binary and libraries)"},
                                          {"model", "model"},
                                          {"model_sha256", "model sha256"},
                                          {"device", "device"},
                                          {"strata_table", "strata table (STRATA_DECODE_TUNING)"},
                                          {"strata_log", "what the engine said of strata-tune"}};
    for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++) st_page_kv(h, KEYS[k][1], st_j_str(id, KEYS[k][0], ""));
    const cJSON *op = st_j_obj(root, "options");
    char b[160];
    snprintf(b, sizeof b, "%.0f rounds × %.0f prompts, %.0f tokens each, threshold %.1f%%", st_j_num(op, "rounds", 0),
             st_j_num(op, "prompts", 0), st_j_num(op, "n_predict", 0), 100 * st_j_num(op, "threshold", 0));
    st_page_kv(h, "measurement", b);
    st_page_kv(h, "command", st_j_str(root, "command_line", ""));
    st_html_raw(h, "</table>\n</section>\n");
    const cJSON *pts = st_j_arr(root, "settings");
    const int n = pts ? cJSON_GetArraySize(pts) : 0;
    st_bar *bars = calloc((size_t)(n > 0 ? n : 1), sizeof *bars);
    if (!bars) {
        h->oom = true;
        return;
    }
    int i = 0;
    const cJSON *p, *def = n ? cJSON_GetArrayItem(pts, 0) : NULL;
    cJSON_ArrayForEach(p, pts)
    {
        if (i >= n) break;
        const double m = st_j_num(p, "tok_s", 0);
        bars[i] = (st_bar){st_j_str(p, "label", "?"), m, st_j_num(p, "tok_s_p25", m), st_j_num(p, "tok_s_p75", m),
                           style_of(p, i), st_j_str(p, "state", "?")};
        i++;
    }
    st_html_raw(h, "<section id=\"overview\">\n<h2>Every setting</h2>\n");
    st_chart c = {"tokens per second of every setting", bars, i, "tokens/s (median)", false, 0, 0, NULL, false, 0};
    st_svg_bar_chart(h, &c);
    st_html_raw(h, "<p class=\"legend meta\"><span><i class=\"sw default\"></i>defaults</span><span><i class=\"sw "
                   "kept\"></i>adopted</span><span><i class=\"sw bad\"></i>refused: tokens differ, or the engine "
                   "failed</span><span>whiskers: the interquartile spread over rounds and prompts</span></p>\n"
                   "</section>\n<section id=\"settings\">\n<h2>Each setting against the defaults</h2>\n");
    i = 0;
    cJSON_ArrayForEach(p, pts)
    {
        if (i > 0) setting_figure(h, def, p, i);
        i++;
    }
    st_html_raw(h, "</section>\n");
    free(bars);
}
