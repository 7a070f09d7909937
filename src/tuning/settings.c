/* The settings layer's run (strata/tools/settings.h): the grid from the
 * --sweep axes, the engine started with each point in rounds (the order
 * rotated each round, so drift that hits a round hits every point alike),
 * every prompt's tokens compared with the defaults' and its decode time
 * kept, then the kernel tuner's keep rule (st_tune_decide) on the paired
 * samples. A round is one engine start per point: the points differ in
 * flags the engine reads at start, and two engines at once would share the
 * machine's memory and cores. The samples a point gives are one per round
 * and prompt, each paired with the defaults' sample of the same round and
 * prompt. */
#define _GNU_SOURCE
#include "file_write.h"
#include "out_manifest.h"
#include "settings_engine.h"
#include "settings_internal.h"
#include "sha256.h"
#include "strata/tools/output.h"
#include "strata/table.h"
#include "strata/tools/report.h"
#include "tuner_decide.h"
#include "tune_out.h"
#include "report_page.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PREDICT 4096

typedef struct {
    char name[64];
    char flag[96];
    char *values[ST_SETTINGS_MAX_VALUES];
    int n_values;
} axis;

/* The short names of the speculative settings and threads, and the flags
 * of llama.cpp (its common_arg option table, in the tree of ../shared/engines) they
 * stand for; any other name is the engine's own flag without its dashes. */
static const char *const FLAG_MAP[][2] = {
    {"spec-type", "--spec-type"},
    {"draft-max", "--spec-draft-n-max"},
    {"draft-min", "--spec-draft-n-min"},
    {"draft-p-min", "--spec-draft-p-min"},
    {"threads", "--threads"},
    {"ngram-n", "--spec-ngram-simple-size-n"},
    {"ngram-m", "--spec-ngram-simple-size-m"},
    {"ngram-min-hits", "--spec-ngram-simple-min-hits"},
};

void st_settings_flag_of(const char *name, char *out, size_t n)
{
    for (size_t i = 0; i < ST_ARRAY_LEN(FLAG_MAP); i++)
        if (!strcmp(name, FLAG_MAP[i][0])) {
            snprintf(out, n, "%s", FLAG_MAP[i][1]);
            return;
        }
    snprintf(out, n, "--%s", name);
}

static bool name_ok(const char *s, size_t n)
{
    if (!n || n >= 64 || s[0] == '-') return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '-' || s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

static void free_axes(axis *a, int n)
{
    for (int i = 0; i < n; i++)
        for (int v = 0; v < a[i].n_values; v++) free(a[i].values[v]);
}

static st_status parse_axis(const char *spec, axis *a)
{
    memset(a, 0, sizeof *a);
    const char *eq = strchr(spec, '=');
    if (!eq || !name_ok(spec, (size_t)(eq - spec)))
        return st_fail(ST_ERR_INVALID_ARG, "--sweep '%s': expected NAME=V1,V2,... (NAME: letters, digits, '-')", spec);
    memcpy(a->name, spec, (size_t)(eq - spec));
    st_settings_flag_of(a->name, a->flag, sizeof a->flag);
    for (const char *p = eq + 1;;) {
        const char *c = strchr(p, ',');
        const size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!len) {
            free_axes(a, 1);
            return st_fail(ST_ERR_INVALID_ARG, "--sweep '%s': an empty value", spec);
        }
        if (a->n_values == ST_SETTINGS_MAX_VALUES) {
            free_axes(a, 1);
            return st_fail(ST_ERR_INVALID_ARG, "--sweep '%s': more than %d values", spec, ST_SETTINGS_MAX_VALUES);
        }
        a->values[a->n_values] = strndup(p, len);
        if (!a->values[a->n_values]) {
            free_axes(a, 1);
            return st_fail(ST_ERR_NOMEM, "--sweep: out of memory");
        }
        a->n_values++;
        if (!c) break;
        p = c + 1;
    }
    return ST_OK;
}

static void free_points(st_settings_run_state *s)
{
    for (int i = 0; i < s->n_points; i++)
        for (int f = 0; f < s->p[i].n_flags; f++) free(s->p[i].flags[f]);
}

static st_status add_flag(st_settings_point *p, const char *v)
{
    if (p->n_flags >= ST_SETTINGS_MAX_FLAGS) return st_fail(ST_ERR_INVALID_ARG, "settings: too many flags in one point");
    if (!(p->flags[p->n_flags] = strdup(v))) return st_fail(ST_ERR_NOMEM, "settings: out of memory");
    p->n_flags++;
    return ST_OK;
}

/* The grid: every combination of the axes' values, in order, without the
 * all-"default" one (that is the defaults, point 0). */
static st_status make_grid(st_settings_run_state *s, axis *ax, int n_ax, const char *draft_model)
{
    s->n_points = 1;
    snprintf(s->p[0].label, sizeof s->p[0].label, "defaults");
    long total = 1;
    for (int i = 0; i < n_ax; i++) total *= ax[i].n_values;
    for (long k = 0; k < total; k++) {
        int idx[ST_SETTINGS_MAX_AXES];
        long rest = k;
        for (int i = n_ax - 1; i >= 0; i--) {
            idx[i] = (int)(rest % ax[i].n_values);
            rest /= ax[i].n_values;
        }
        bool any = false, draft = false;
        for (int i = 0; i < n_ax; i++) any |= strcmp(ax[i].values[idx[i]], "default") != 0;
        if (!any) continue;
        if (s->n_points > ST_SETTINGS_MAX_POINTS)
            return st_fail(ST_ERR_INVALID_ARG,
                           "settings: the grid has %ld points, more than %d: sweep fewer values (the defaults are "
                           "measured against each point in every round)",
                           total, ST_SETTINGS_MAX_POINTS);
        st_settings_point *p = &s->p[s->n_points++];
        size_t at = 0;
        for (int i = 0; i < n_ax; i++) {
            const char *v = ax[i].values[idx[i]];
            if (!strcmp(v, "default")) continue;
            at += (size_t)snprintf(p->label + at, at < sizeof p->label ? sizeof p->label - at : 0, "%s%s=%s",
                                   at ? " " : "", ax[i].name, v);
            if (at >= sizeof p->label) at = sizeof p->label - 1;
            ST_TRY(add_flag(p, ax[i].flag));
            ST_TRY(add_flag(p, v));
            if (!strcmp(ax[i].flag, "--spec-type") && !strncmp(v, "draft", 5)) draft = true;
        }
        if (draft && draft_model) {
            ST_TRY(add_flag(p, "--spec-draft-model"));
            ST_TRY(add_flag(p, draft_model));
        }
    }
    if (s->n_points < 2) return st_fail(ST_ERR_INVALID_ARG, "settings: the sweep has no point besides the defaults");
    return ST_OK;
}

static st_status read_prompts(const char *path, char **prompts, int *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return st_fail(ST_ERR_NOT_FOUND, "--prompts %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    st_status s = ST_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (!len) continue;
        if ((size_t)len != strlen(line)) {
            s = st_fail(ST_ERR_INVALID_ARG, "--prompts %s: prompt %d holds a NUL byte", path, *n + 1);
            break;
        }
        if (*n == ST_SETTINGS_MAX_PROMPTS) {
            s = st_fail(ST_ERR_INVALID_ARG, "--prompts %s: more than %d prompts", path, ST_SETTINGS_MAX_PROMPTS);
            break;
        }
        if (!(prompts[(*n)++] = strdup(line))) {
            s = st_fail(ST_ERR_NOMEM, "--prompts: out of memory");
            break;
        }
    }
    free(line);
    fclose(f);
    if (s == ST_OK && *n == 0) s = st_fail(ST_ERR_INVALID_ARG, "--prompts %s: no prompt (one a line)", path);
    return s;
}

void st_settings_command(const st_settings_run_state *s, int i, char *out, size_t n)
{
    size_t at = 0;
    out[0] = '\0';
    st_settings_put_arg(out, n, &at, s->o->engine);
    st_settings_put_arg(out, n, &at, "-m");
    st_settings_put_arg(out, n, &at, s->o->model);
    for (int a = 0; a < s->o->n_engine_args; a++) st_settings_put_arg(out, n, &at, s->o->engine_args[a]);
    for (int f = 0; f < s->p[i].n_flags; f++) st_settings_put_arg(out, n, &at, s->p[i].flags[f]);
}

static void progress(const st_settings_run_state *s, const char *fmt, ...) ST_PRINTF(2, 3);
static void progress(const st_settings_run_state *s, const char *fmt, ...)
{
    if (!s->o->progress) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->o->progress(s->o->progress_user, line);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fmt_eta(double sec, char *buf, size_t n)
{
    if (sec < 0) sec = 0;
    const long t = (long)(sec + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%lds", t);
}

typedef struct {
    char **prompts;
    int *ref;  /* the defaults' tokens of round 0, [prompt][n_predict] */
    int *ref_n;
    int *toks; /* scratch, n_predict */
    char log[4200];
} run_io;

/* Point I in round R: one engine start, a warm-up completion, then every
 * prompt. A failure of the defaults ends the run (returned); a failure of
 * another point marks it failed (ST_OK). */
static st_status run_point(st_settings_run_state *s, run_io *io, int i, int r)
{
    const st_settings_options *o = s->o;
    st_settings_point *p = &s->p[i];
    const char *args[ST_SETTINGS_MAX_ENGINE_ARGS + ST_SETTINGS_MAX_FLAGS + 2];
    int na = 0;
    args[na++] = "-m";
    args[na++] = o->model;
    for (int a = 0; a < o->n_engine_args; a++) args[na++] = o->engine_args[a];
    for (int f = 0; f < p->n_flags; f++) args[na++] = p->flags[f];
    st_engine e;
    const double t_start = o->start_timeout_s > 0 ? o->start_timeout_s : 600;
    const double t_req = o->request_timeout_s > 0 ? o->request_timeout_s : 600;
    st_status st = st_engine_start(&e, o->engine, args, na, io->log, t_start, o->stop);
    st_engine_reply rep = {io->toks, s->n_predict, 0, 0, 0, 0, 0};
    /* an untimed completion first: the first one after a start pays for
     * the engine's lazy set-up (buffers, graphs) */
    if (st == ST_OK) st = st_engine_complete(&e, io->prompts[0], s->n_predict < 8 ? s->n_predict : 8, t_req, o->stop, &rep);
    for (int q = 0; st == ST_OK && q < s->n_prompts; q++) {
        st = st_engine_complete(&e, io->prompts[q], s->n_predict, t_req, o->stop, &rep);
        if (st != ST_OK) break;
        int *ref = io->ref + (size_t)q * (size_t)s->n_predict;
        if (i == 0 && r == 0) {
            memcpy(ref, rep.tokens, (size_t)rep.n_tokens * sizeof *ref);
            io->ref_n[q] = rep.n_tokens;
        } else {
            int pos = -1;
            const int m = rep.n_tokens < io->ref_n[q] ? rep.n_tokens : io->ref_n[q];
            for (int t = 0; t < m && pos < 0; t++)
                if (rep.tokens[t] != ref[t]) pos = t;
            if (pos < 0 && rep.n_tokens != io->ref_n[q]) pos = m;
            if (pos >= 0) {
                const int want = pos < io->ref_n[q] ? ref[pos] : -1, got = pos < rep.n_tokens ? rep.tokens[pos] : -1;
                if (i == 0) {
                    st_engine_stop(&e);
                    return st_fail(ST_ERR_MISMATCH,
                                   "the engine's defaults gave other tokens in round %d than in round 1 (prompt %d, "
                                   "position %d: %d, then %d): its greedy output does not repeat here, so no setting "
                                   "can be judged",
                                   r + 1, q + 1, pos, want, got);
                }
                p->state = ST_POINT_REFUSED;
                p->diff_prompt = q;
                p->diff_pos = pos;
                p->diff_want = want;
                p->diff_got = got;
                snprintf(p->why, sizeof p->why,
                         "refused: its tokens differ from the defaults' on prompt %d at position %d (token %d, the "
                         "defaults' %d)",
                         q + 1, pos, got, want);
                break;
            }
        }
        p->ms[r * s->n_prompts + q] = rep.decode_ms / rep.n_decoded;
        p->draft_n += rep.draft_n;
        p->draft_accepted += rep.draft_accepted;
    }
    st_engine_stop(&e);
    if (i == 0 && r == 0) { /* an engine with strata-tune inside says whether its table engaged */
        st_engine_log_lines(io->log, "ggml_strata: strata-tune", s->strata_log, sizeof s->strata_log);
        st_engine_log_lines(io->log, ST_TABLE_MSG_PREFIX, s->strata_log, sizeof s->strata_log);
    }
    if (st == ST_ERR_INTERRUPTED) return st;
    if (st != ST_OK) {
        if (i == 0) return st; /* the defaults must run: the message carries the engine's last words */
        p->state = ST_POINT_FAILED;
        snprintf(p->why, sizeof p->why, "failed: %s", st_last_error());
        st_clear_error();
    } else if (p->state == ST_POINT_MEASURED)
        p->n_ms = (r + 1) * s->n_prompts;
    return ST_OK;
}

/* The kernel tuner's keep rule on the points' paired samples, and each
 * point's verdict. */
static st_status decide(st_settings_run_state *s)
{
    st_tune_shape_result *r = calloc(1, sizeof *r);
    if (!r) return st_fail(ST_ERR_NOMEM, "settings: out of memory");
    r->n_cand = s->n_points;
    r->n_rounds = s->rounds * s->n_prompts;
    r->previous = -1;
    for (int i = 0; i < s->n_points; i++) {
        st_settings_point *p = &s->p[i];
        /* the tuner's name field is short; the verdicts here name the full label */
        const size_t ln = strlen(p->label) < sizeof r->cand[i].name - 1 ? strlen(p->label) : sizeof r->cand[i].name - 1;
        memcpy(r->cand[i].name, p->label, ln);
        r->cand[i].name[ln] = '\0';
        r->cand[i].bytes_match = p->state == ST_POINT_MEASURED && p->n_ms == r->n_rounds;
        for (int k = 0; k < p->n_ms; k++) r->cand[i].round_us[k] = p->ms[k];
        if (p->n_ms) {
            double tps[ST_SETTINGS_MAX_SAMPLES];
            for (int k = 0; k < p->n_ms; k++) tps[k] = 1000.0 / p->ms[k];
            st_timing t;
            st_timing_from_samples(tps, p->n_ms, &t);
            p->tps = t.median_us;
            p->tps_p25 = t.p25_us;
            p->tps_p75 = t.p75_us;
        }
    }
    st_tune_decide(r, s->threshold);
    s->best = r->best;
    const double thr = 100 * s->threshold;
    /* the confidence st_tune_decide asks of each interval (95% split over
     * the points compared), and whether N samples can reach it at all: the
     * widest interval, [min, max], covers the median with 1 - 2^(1-N) */
    int m = 0;
    for (int i = 1; i < s->n_points; i++) m += r->cand[i].bytes_match;
    const double conf = 1 - 0.05 / (m > 0 ? m : 1);
    const bool few = 1 - ldexp(1.0, 1 - r->n_rounds) < conf;
    char few_why[200];
    snprintf(few_why, sizeof few_why, "%d samples are too few for a %.4g%% interval (%d setting%s compared): run more "
             "--rounds", r->n_rounds, 100 * conf, m, m == 1 ? "" : "s");
    int best_alt = -1;
    for (int i = 1; i < s->n_points; i++) {
        st_settings_point *p = &s->p[i];
        if (p->state != ST_POINT_MEASURED) continue;
        p->change = r->cand[i].change;
        p->change_lo = r->cand[i].change_lo;
        p->change_hi = r->cand[i].change_hi;
        if (best_alt < 0 || p->change < s->p[best_alt].change) best_alt = i;
        const double c = 100 * p->change, lo = 100 * p->change_lo, hi = 100 * p->change_hi;
        p->kept = i == r->best;
        if (p->kept)
            snprintf(p->why, sizeof p->why,
                     "adopted: %.1f%% faster than the defaults (time change %+.1f%%, interval %+.1f%%..%+.1f%%: all of "
                     "it beyond the %.1f%% threshold)",
                     -c, c, lo, hi, thr);
        else if (p->change < -s->threshold && few) {
            p->noisy = true;
            snprintf(p->why, sizeof p->why, "cannot decide: measured %.1f%% faster, but %s", -c, few_why);
        } else if (p->change_hi < -s->threshold)
            snprintf(p->why, sizeof p->why,
                     "faster than the defaults beyond the threshold (time change %+.1f%%, interval %+.1f%%..%+.1f%%), "
                     "not the fastest",
                     c, lo, hi);
        else if (p->change < -s->threshold) {
            p->noisy = true;
            snprintf(p->why, sizeof p->why,
                     "cannot decide: measured %.1f%% faster, but its interval %+.1f%%..%+.1f%% reaches inside the "
                     "%.1f%% threshold (the noise is wider)",
                     -c, lo, hi, thr);
        } else
            snprintf(p->why, sizeof p->why,
                     "kept out: time change %+.1f%% (interval %+.1f%%..%+.1f%%), not faster beyond the %.1f%% threshold",
                     c, lo, hi, thr);
    }
    s->undecided = r->best == 0 && r->noisy;
    int refused = 0, failed = 0;
    for (int i = 1; i < s->n_points; i++) {
        refused += s->p[i].state == ST_POINT_REFUSED;
        failed += s->p[i].state == ST_POINT_FAILED;
    }
    char tail[96] = "";
    if (refused || failed)
        snprintf(tail, sizeof tail, " (%d refused: tokens differ; %d failed)", refused, failed);
    if (r->best)
        snprintf(s->verdict, sizeof s->verdict, "adopted %s: %s%s", s->p[r->best].label, s->p[r->best].why + 9, tail);
    else if (s->undecided && few)
        snprintf(s->verdict, sizeof s->verdict, "cannot decide: %s measured %.1f%% faster, but %s; the defaults are "
                 "kept%s", s->p[best_alt].label, -100 * s->p[best_alt].change, few_why, tail);
    else if (s->undecided)
        snprintf(s->verdict, sizeof s->verdict, "cannot decide: %s measured %.1f%% faster, but its interval "
                 "%+.1f%%..%+.1f%% (%d samples) reaches inside the %.1f%% threshold; the defaults are kept%s",
                 s->p[best_alt].label, -100 * s->p[best_alt].change, 100 * s->p[best_alt].change_lo,
                 100 * s->p[best_alt].change_hi, r->n_rounds, thr, tail);
    else if (best_alt > 0)
        snprintf(s->verdict, sizeof s->verdict, "defaults kept: the best, %s, changes the time %+.1f%% (interval "
                 "%+.1f%%..%+.1f%%), not beyond the %.1f%% threshold%s",
                 s->p[best_alt].label, 100 * s->p[best_alt].change, 100 * s->p[best_alt].change_lo,
                 100 * s->p[best_alt].change_hi, thr, tail);
    else
        snprintf(s->verdict, sizeof s->verdict, "defaults kept: no setting kept the defaults' tokens and ran%s", tail);
    snprintf(s->p[0].why, sizeof s->p[0].why, "%s", r->best ? "the reference" : "kept");
    free(r);
    return ST_OK;
}

static void safe_name(const char *model, char *out, size_t n)
{
    const char *b = strrchr(model, '/');
    b = b ? b + 1 : model;
    size_t k = 0;
    /* a dot too becomes '_': a model named M with ".profile" added must
     * not name its report after the profile of the model M */
    for (; *b && k + 1 < n; b++) out[k++] = (strchr("-_", *b) || (*b >= '0' && *b <= '9') || (*b >= 'a' && *b <= 'z') ||
                                             (*b >= 'A' && *b <= 'Z')) ? *b : '_';
    out[k] = '\0';
    if (k > 5 && !strcmp(out + k - 5, "_gguf")) out[k - 5] = '\0';
}

/* The output folder ("." when none is given: output_paths then names the
 * files bare, relative to it). */
static const char *out_dir(const st_settings_run_state *s)
{
    return s->o->out_dir && s->o->out_dir[0] ? s->o->out_dir : ".";
}

/* The three paths, in SUM. */
static void output_paths(const st_settings_run_state *s, st_settings_summary *sum)
{
    const char *dir = s->o->out_dir ? s->o->out_dir : "", *sep = dir[0] ? "/" : "";
    char base[300];
    safe_name(s->o->model, base, sizeof base);
    snprintf(sum->profile_path, sizeof sum->profile_path, "%s%sstrata-settings-%s.profile.json", dir, sep, base);
    snprintf(sum->json_path, sizeof sum->json_path, "%s%sstrata-settings-%s.json", dir, sep, base);
    snprintf(sum->html_path, sizeof sum->html_path, "%s%sstrata-settings-%s.html", dir, sep, base);
}

/* Every output path checked before the engine runs (issue 26): a folder,
 * FIFO, device or socket there, or the model itself, is refused in one
 * line now, not after the whole sweep. */
static st_status check_outputs(const st_settings_run_state *s)
{
    st_settings_summary *sum = calloc(1, sizeof *sum);
    if (!sum) return st_fail(ST_ERR_NOMEM, "settings: out of memory");
    output_paths(s, sum);
    char *mf = st_manifest_path_for(sum->json_path);
    const char *paths[4] = {sum->json_path, sum->html_path, sum->profile_path, mf};
    st_status st = mf ? ST_OK : st_fail(ST_ERR_NOMEM, "settings: out of memory");
    for (int i = 0; i < 4 && st == ST_OK; i++) {
        st = st_out_target_check(paths[i]);
        if (st == ST_OK) st = st_out_not_input(paths[i], s->o->model);
        if (st == ST_OK) st = st_manifest_not_others(paths[i], mf); /* not another run's set (a tune's report) */
        if (st != ST_OK) st = st_fail_prefixed(st, "settings");
    }
    free(mf);
    free(sum);
    return st;
}

/* What the four outputs take at most, reserved before the engine starts
 * (the probe), each file rounded up to whole blocks of the folder's file
 * system: the set is written to temporary files beside the old files
 * before any is renamed in, so this is what the write adds at its peak.
 * Measured with settings_cli_test.sh's fake engine: its runs (2 to 5
 * points, 3 to 9 samples) wrote a page of 4.7 KB + 2.2 KB a point, a
 * report of 1.2 KB + 0.45 KB a point, a profile of 1.2 KB and a manifest
 * of 0.4 KB; the worst grid (23 points besides the defaults, 64 samples,
 * labels at their 255-byte cap made of characters both formats escape)
 * a page of 177 KB (7.3 KB a point) and a report of 35 KB (1.4 KB a
 * point; the fake's samples print short, a real one's take up to 26
 * bytes each). Reserved: 32 KiB a file for what every run has (the page's
 * head, the identity, the verdict, at their caps and escaped), 12 KiB a
 * point for the page, 8 KiB a point and 32 bytes a sample for the report
 * (the label and the why at their caps, escaped), 4 KiB for the manifest,
 * and six times (escaping makes one byte at most six) the text the user
 * gives, which has no cap, in each file it goes into: the command line,
 * the table's path, the engine, model and engine arguments (in every
 * file), every point's flags (the report), the longest point's flags (the
 * page's and profile's command line). About 200 KiB for the test's runs,
 * 0.7 MiB for the worst grid. */
static size_t output_room(const st_settings_run_state *s, const char *dir)
{
    const st_settings_options *o = s->o;
    const char *tab = getenv("STRATA_DECODE_TUNING");
    size_t user = (o->command_line ? strlen(o->command_line) : 0) + (tab ? strlen(tab) : 0) + strlen(o->engine) +
                  strlen(o->model);
    for (int a = 0; a < o->n_engine_args; a++) user += strlen(o->engine_args[a]);
    size_t flags = 0, most = 0;
    for (int i = 0; i < s->n_points; i++) {
        size_t f = 0;
        for (int k = 0; k < s->p[i].n_flags; k++) f += strlen(s->p[i].flags[k]) + 1;
        flags += f;
        if (f > most) most = f;
    }
    const size_t n = (size_t)s->n_points, samples = (size_t)s->rounds * (size_t)s->n_prompts, fixed = (size_t)32 << 10;
    const size_t report = fixed + 6 * (user + flags) + n * (((size_t)8 << 10) + 32 * samples);
    const size_t page = fixed + 6 * (user + most) + n * ((size_t)12 << 10);
    const size_t profile = fixed + 6 * (user + most);
    return st_out_blocks(dir, report) + st_out_blocks(dir, page) + st_out_blocks(dir, profile) +
           st_out_blocks(dir, (size_t)4 << 10);
}

/* The output folder, before the engine starts (issue 26): made when
 * missing, locked (the folder's lock, st_folder_lock: a second settings
 * run or a tune of it is refused at once, so no two runs mix their sets;
 * held by the caller until the set is written), settled under the lock
 * (st_tune_out_recover: an install a killed tune left completed or rolled
 * back, the temporary files and probes of dead runs removed, and only
 * those), every output path checked, and the room the four outputs take
 * probed: a folder that cannot be made, is read-only or too full is one
 * line now, with nothing left in it. */
static st_status open_outputs(const st_settings_run_state *s, st_folder_lock_t *lk)
{
    const char *dir = out_dir(s);
    ST_TRY(st_out_dir_make(dir, "settings"));
    ST_TRY(st_folder_lock(dir, "settings", lk));
    int settled = 0;
    st_status st = st_tune_out_recover("settings", dir, NULL, s->o->model, &settled);
    if (st != ST_OK) return st_fail_prefixed(st, "settings");
    ST_TRY(check_outputs(s));
    return st_out_probe(dir, "settings", output_room(s, dir));
}

/* The report, its page, the profile and the manifest that lists them
 * (out_manifest.h: the file rule's record of what this run wrote) as one
 * set, through the tune's journal (st_out_install_set, under the folder's
 * lock this run holds: all written to temporary files first, a full disk
 * stops there before any changes; a kill at any instant leaves the old
 * set or the new one, which the next run of the folder settles). */
static st_status write_outputs(st_settings_run_state *s, st_settings_summary *sum)
{
    output_paths(s, sum);
    cJSON *rep = st_settings_report_json(s);
    cJSON *prof = st_settings_profile_json(s);
    char *rt = rep ? cJSON_Print(rep) : NULL, *pt = prof ? cJSON_Print(prof) : NULL, *page = NULL;
    char *mf = st_manifest_path_for(sum->json_path);
    size_t page_len = 0;
    cJSON_Delete(rep);
    cJSON_Delete(prof);
    st_status st = rt && pt && mf ? ST_OK : st_fail(ST_ERR_NOMEM, "settings: out of memory for the report");
    if (st == ST_OK) st = check_outputs(s);
    if (st == ST_OK) st = st_report_html_render(rt, strlen(rt), st_path_base(sum->json_path), &page, &page_len);
    const char *path[3] = {sum->json_path, sum->html_path, sum->profile_path};
    const char *text[3] = {rt, page, pt};
    const size_t len[3] = {rt ? strlen(rt) : 0, page_len, pt ? strlen(pt) : 0};
    const st_mf_role role[3] = {ST_MF_REPORT, ST_MF_PAGE, ST_MF_PROFILE};
    if (st == ST_OK) st = st_out_install_set(out_dir(s), mf, 3, path, role, text, len, s->o->stop);
    free(rt);
    free(pt);
    free(page);
    free(mf);
    return st;
}

static st_status check_options(const st_settings_options *o)
{
    if (!o || o->struct_size < sizeof *o) return st_fail(ST_ERR_INVALID_ARG, "settings: options of another build");
    if (!o->model || !o->engine || !o->prompts)
        return st_fail(ST_ERR_INVALID_ARG, "settings: a model, an engine (--engine) and prompts (--prompts) are needed");
    if (o->n_sweeps < 1 || o->n_sweeps > ST_SETTINGS_MAX_AXES)
        return st_fail(ST_ERR_INVALID_ARG, "settings: 1 to %d --sweep options are needed", ST_SETTINGS_MAX_AXES);
    if (o->n_engine_args < 0 || o->n_engine_args > ST_SETTINGS_MAX_ENGINE_ARGS)
        return st_fail(ST_ERR_INVALID_ARG, "settings: at most %d engine arguments", ST_SETTINGS_MAX_ENGINE_ARGS);
    if (o->n_predict < 0 || o->n_predict > MAX_PREDICT)
        return st_fail(ST_ERR_INVALID_ARG, "settings: --n-predict must be 1..%d", MAX_PREDICT);
    if (o->rounds < 0 || o->rounds > ST_SETTINGS_MAX_SAMPLES)
        return st_fail(ST_ERR_INVALID_ARG, "settings: --rounds must be 1..%d", ST_SETTINGS_MAX_SAMPLES);
    if (!(o->threshold >= 0 && o->threshold < 1)) return st_fail(ST_ERR_INVALID_ARG, "settings: --threshold out of range");
    struct stat st;
    if (stat(o->model, &st) != 0 || !S_ISREG(st.st_mode))
        return st_fail(ST_ERR_NOT_FOUND, "settings: model %s: %s", o->model, stat(o->model, &st) ? strerror(errno) : "not a file");
    if (o->draft_model && stat(o->draft_model, &st) != 0)
        return st_fail(ST_ERR_NOT_FOUND, "settings: draft model %s: %s", o->draft_model, strerror(errno));
    return ST_OK;
}

/* Everything after the options are known: the output folder (locked in
 * LK), identity, the rounds, the decision, the files. */
static st_status run(st_settings_run_state *s, run_io *io, st_settings_summary *sum, st_folder_lock_t *lk)
{
    const st_settings_options *o = s->o;
    const char *b = strrchr(o->model, '/');
    snprintf(s->model_name, sizeof s->model_name, "%s", b ? b + 1 : o->model);
    ST_TRY(open_outputs(s, lk));
    ST_TRY(st_engine_identity(o->engine, s->engine_version, sizeof s->engine_version, s->engine_sha));
    progress(s, "settings: hashing the model %s", s->model_name);
    ST_TRY(st_sha256_file(o->model, s->model_sha));
    snprintf(s->device, sizeof s->device, "%s", o->device ? o->device : "cpu");
    const char *tab = getenv("STRATA_DECODE_TUNING");
    snprintf(s->table, sizeof s->table, "%s", tab ? tab : "");
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(s->date, sizeof s->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const int units = s->rounds * s->n_points;
    int done = 0;
    const double t0 = now_s();
    for (int r = 0; r < s->rounds; r++)
        for (int k = 0; k < s->n_points; k++) {
            const int i = (k + r) % s->n_points; /* rotated: round 1 starts with the defaults */
            done++;
            if (s->p[i].state != ST_POINT_MEASURED) continue;
            ST_TRY(run_point(s, io, i, r));
            const st_settings_point *p = &s->p[i];
            char eta[32], what[700];
            const double el = now_s() - t0;
            fmt_eta(el / done * (units - done), eta, sizeof eta);
            if (p->state == ST_POINT_MEASURED) {
                double sum_ms = 0;
                for (int q = 0; q < s->n_prompts; q++) sum_ms += p->ms[r * s->n_prompts + q];
                snprintf(what, sizeof what, "%.1f tok/s", 1000.0 * s->n_prompts / sum_ms);
            } else
                snprintf(what, sizeof what, "%s", p->why);
            progress(s, "settings: round %d/%d, %d/%d %s: %s; ETA %s", r + 1, s->rounds, k + 1, s->n_points, p->label,
                     what, eta);
        }
    ST_TRY(decide(s));
    st_settings_command(s, s->best, s->command, sizeof s->command);
    ST_TRY(write_outputs(s, sum));
    snprintf(sum->verdict, sizeof sum->verdict, "%s", s->verdict);
    snprintf(sum->command, sizeof sum->command, "%s", s->command);
    sum->n_points = s->n_points - 1;
    for (int i = 1; i < s->n_points; i++) {
        sum->n_refused += s->p[i].state == ST_POINT_REFUSED;
        sum->n_failed += s->p[i].state == ST_POINT_FAILED;
    }
    sum->adopted = s->best > 0;
    sum->undecided = s->undecided;
    return ST_OK;
}

st_status st_settings_run(const st_settings_options *o, st_settings_summary *sum)
{
    if (!sum || sum->struct_size < sizeof *sum) return st_fail(ST_ERR_INVALID_ARG, "settings: summary of another build");
    const size_t ss = sum->struct_size;
    memset(sum, 0, sizeof *sum);
    sum->struct_size = ss;
    ST_TRY(check_options(o));
    st_settings_run_state *s = calloc(1, sizeof *s);
    if (!s) return st_fail(ST_ERR_NOMEM, "settings: out of memory");
    s->o = o;
    s->n_predict = o->n_predict ? o->n_predict : 64;
    s->rounds = o->rounds ? o->rounds : 3;
    s->threshold = o->threshold > 0 ? o->threshold : 0.01;
    axis ax[ST_SETTINGS_MAX_AXES];
    int n_ax = 0;
    st_status st = ST_OK;
    const char *draft_axis = "spec-type=default,draft-simple";
    bool has_spec = false;
    for (int i = 0; i < o->n_sweeps && st == ST_OK; i++) {
        st = parse_axis(o->sweeps[i], &ax[n_ax]);
        if (st == ST_OK) has_spec |= !strcmp(ax[n_ax++].flag, "--spec-type");
    }
    /* a draft model without a spec-type axis: the draft is one more axis */
    if (st == ST_OK && o->draft_model && !has_spec) {
        if (n_ax == ST_SETTINGS_MAX_AXES)
            st = st_fail(ST_ERR_INVALID_ARG, "settings: --draft-model needs a spec-type axis: at most %d --sweep",
                         ST_SETTINGS_MAX_AXES - 1);
        else if ((st = parse_axis(draft_axis, &ax[n_ax])) == ST_OK)
            n_ax++;
    }
    if (st == ST_OK) st = make_grid(s, ax, n_ax, o->draft_model);
    free_axes(ax, n_ax);
    char *prompts[ST_SETTINGS_MAX_PROMPTS] = {0};
    if (st == ST_OK) st = read_prompts(o->prompts, prompts, &s->n_prompts);
    if (st == ST_OK && s->rounds * s->n_prompts > ST_SETTINGS_MAX_SAMPLES)
        st = st_fail(ST_ERR_INVALID_ARG, "settings: %d rounds of %d prompts are more than %d samples a setting",
                     s->rounds, s->n_prompts, ST_SETTINGS_MAX_SAMPLES);
    run_io io = {prompts, NULL, NULL, NULL, ""};
    char tmpdir[] = "/tmp/strata-settings.XXXXXX";
    bool have_dir = false;
    if (st == ST_OK) {
        io.ref = calloc((size_t)s->n_prompts * (size_t)s->n_predict, sizeof *io.ref);
        io.ref_n = calloc((size_t)s->n_prompts, sizeof *io.ref_n);
        io.toks = calloc((size_t)s->n_predict, sizeof *io.toks);
        if (!io.ref || !io.ref_n || !io.toks) st = st_fail(ST_ERR_NOMEM, "settings: out of memory");
    }
    if (st == ST_OK) {
        have_dir = mkdtemp(tmpdir) != NULL;
        if (!have_dir) st = st_fail(ST_ERR_IO, "settings: cannot make a folder for the engine's log: %s", strerror(errno));
        snprintf(io.log, sizeof io.log, "%s/engine.log", tmpdir);
    }
    st_folder_lock_t lk = {NULL, -1, -1};
    if (st == ST_OK) st = run(s, &io, sum, &lk);
    st_folder_unlock(&lk); /* held from the output check to the end of the write */
    if (have_dir) {
        unlink(io.log);
        rmdir(tmpdir);
    }
    for (int i = 0; i < ST_SETTINGS_MAX_PROMPTS; i++) free(prompts[i]);
    free(io.ref);
    free(io.ref_n);
    free(io.toks);
    free_points(s);
    free(s);
    return st;
}
