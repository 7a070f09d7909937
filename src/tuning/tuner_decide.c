/* The tuner's decisions (tuner_decide.h): the keep rule, the re-tune
 * rule and the campaign verdict per kernel family. Every comparison is
 * paired round by round (the candidates of one round ran back to back, in
 * an order rotated each round), so drift that hits a whole round cancels,
 * and judged by the 95% interval of the median paired change: a decision
 * that interval cannot make keeps what is there and says why. */
#include "tools_internal.h"
#include "tuner_decide.h"

#include <stdio.h>
#include <string.h>

#define CONF 0.95

/* The paired change of candidate A against B: median and CONF interval of
 * A[r]/B[r] - 1 over the rounds. Returns the interval's coverage. */
static double paired(const st_tune_shape_result *r, int a, int b, double conf, double *med, double *lo, double *hi)
{
    double x[ST_MEASURE_MAX_ROUNDS];
    const int n = r->n_rounds < ST_MEASURE_MAX_ROUNDS ? r->n_rounds : ST_MEASURE_MAX_ROUNDS;
    for (int i = 0; i < n; i++) {
        const double base = r->cand[b].round_us[i];
        x[i] = base > 0 ? r->cand[a].round_us[i] / base - 1 : 0;
    }
    return st_median_ci(x, n, conf, med, lo, hi);
}

static bool eligible(const st_tune_cand *c) { return c->bytes_match && !c->same_launch; }

/* R->reason = TEXT, cut to fit. */
static void set_reason(st_tune_shape_result *r, const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof r->reason) n = sizeof r->reason - 1;
    memmove(r->reason, text, n);
    r->reason[n] = '\0';
}

void st_tune_decide(st_tune_shape_result *r, double thr)
{
    /* The best of several candidates is the one the noise favoured most: the
     * 95% is split over the candidates compared (Bonferroni), so that a
     * shape where all are equal adopts one with at most 5% chance. */
    int m = 0;
    for (int c = 1; c < r->n_cand; c++) m += eligible(&r->cand[c]);
    const double conf = 1 - (1 - CONF) / (m > 0 ? m : 1);
    int best = -1;
    double cover = 0;
    for (int c = 1; c < r->n_cand; c++) {
        st_tune_cand *x = &r->cand[c];
        x->change = x->change_lo = x->change_hi = 0;
        if (!eligible(x)) continue;
        const double cv = paired(r, c, 0, conf, &x->change, &x->change_lo, &x->change_hi);
        if (best < 0 || x->change < r->cand[best].change) {
            best = c;
            cover = cv;
        }
    }
    r->best = 0;
    r->delta = 0;
    r->noisy = false;
    if (best < 0) {
        snprintf(r->reason, sizeof r->reason, "default kept: no other candidate ran bit-exact and distinct");
        return;
    }
    const st_tune_cand *b = &r->cand[best];
    const double lo = 100 * b->change_lo, hi = 100 * b->change_hi, t = 100 * thr;
    if (cover >= conf && b->change_hi < -thr) {
        r->best = best;
        r->delta = -b->change;
        snprintf(r->reason, sizeof r->reason,
                 "%s is %.1f%% faster than the default (time change %+.1f%%, %.4g%% interval %+.1f%%..%+.1f%%: all of "
                 "it beyond the %.1f%% threshold)",
                 b->name, -100 * b->change, 100 * b->change, 100 * cover, lo, hi, t);
    } else if (b->change < -thr) {
        r->noisy = true;
        snprintf(r->reason, sizeof r->reason,
                 "default kept: %s measured %.1f%% faster, but its %.4g%% interval %+.1f%%..%+.1f%% (time change, %d "
                 "rounds) reaches inside the %.1f%% threshold: not told apart from the noise",
                 b->name, -100 * b->change, 100 * cover, lo, hi, r->n_rounds, t);
    } else {
        snprintf(r->reason, sizeof r->reason,
                 "default kept: the best, %s, changes the time %+.1f%% (interval %+.1f%%..%+.1f%%), not beyond the "
                 "%.1f%% threshold",
                 b->name, 100 * b->change, lo, hi, t);
    }
}

bool st_tune_keep_previous(st_tune_shape_result *r, double thr)
{
    const int p = r->previous, n = r->best;
    if (p < 0 || p == n) return false;
    char why[2 * sizeof r->reason];
    if (p > 0 && !eligible(&r->cand[p])) {
        snprintf(why, sizeof why, "%s (the previous table's %s %s)", r->reason, r->cand[p].name,
                 r->cand[p].bytes_match ? "is the default's own launch now" : "now differs from the default");
        set_reason(r, why);
        return true;
    }
    double med, lo, hi;
    const double cover = paired(r, n, p, CONF, &med, &lo, &hi);
    if (cover >= CONF && hi < -thr) {
        snprintf(why, sizeof why, "%s; changed from the previous table's %s: %.1f%% faster than it (interval "
                 "%+.1f%%..%+.1f%%)", r->reason, r->cand[p].name, -100 * med, 100 * lo, 100 * hi);
        set_reason(r, why);
        return true;
    }
    snprintf(why, sizeof why,
             "kept the previous table's %s: this run's choice, %s, changes the time %+.1f%% against it (%.4g%% interval "
             "%+.1f%%..%+.1f%%), not beyond the %.1f%% threshold and the noise",
             r->cand[p].name, r->cand[n].name, 100 * med, 100 * cover, 100 * lo, 100 * hi, 100 * thr);
    set_reason(r, why);
    r->best = p;
    r->delta = p ? -r->cand[p].change : 0;
    r->noisy = false;
    return false;
}

bool st_tune_campaign(const st_tune_shape_result *r, int n, st_shape_kind kind, double thr, char *buf, size_t len)
{
    int shapes = 0, kept = 0;
    double dmin = 0, dmax = 0, gain_max = 0; /* default times; the largest gain a kept default left */
    int counts[ST_TUNE_MAX_CAND] = {0};      /* per candidate: how often it was the best alternative where the default stayed */
    int noisy = 0;
    char vars[160] = "";
    for (int i = 0; i < n; i++) {
        if (r[i].shape.kind != kind) continue;
        const double d = r[i].cand[0].blended_us;
        if (shapes++ == 0 || d < dmin) dmin = d;
        if (shapes == 1 || d > dmax) dmax = d;
        if (r[i].best) {
            kept++;
            const size_t at = strlen(vars);
            if (at + 40 < sizeof vars)
                snprintf(vars + at, sizeof vars - at, "%s%s %.1f%% faster", at ? ", " : "", r[i].cand[r[i].best].name,
                         100 * r[i].delta);
            continue;
        }
        noisy += r[i].noisy;
        int best = -1;
        for (int c = 1; c < r[i].n_cand; c++)
            if (eligible(&r[i].cand[c]) && (best < 0 || r[i].cand[c].change < r[i].cand[best].change)) best = c;
        if (best < 0) continue;
        counts[best]++;
        if (-r[i].cand[best].change > gain_max) gain_max = -r[i].cand[best].change;
    }
    if (!shapes) return false;
    const char *fam = kind == ST_SHAPE_EXPERT ? "expert" : "mmvq";
    int top = -1;
    for (int c = 1; c < ST_TUNE_MAX_CAND; c++)
        if (counts[c] && (top < 0 || counts[c] > counts[top])) top = c;
    const int dflt = shapes - kept;
    char tail[240] = "";
    if (dflt && top > 0) {
        const char *name = NULL;
        for (int i = 0; i < n && !name; i++)
            if (r[i].shape.kind == kind && top < r[i].n_cand) name = r[i].cand[top].name;
        if (gain_max <= thr)
            snprintf(tail, sizeof tail, ", best %s (on %d of %d) within %.1f%%", name, counts[top], dflt, 100 * thr);
        else
            snprintf(tail, sizeof tail, ", best %s (on %d of %d) up to %.1f%% faster, not beyond the %.1f%% threshold and "
                     "the noise", name, counts[top], dflt, 100 * gain_max, 100 * thr);
        if (noisy) snprintf(tail + strlen(tail), sizeof tail - strlen(tail), "; the noise kept %d", noisy);
    }
    if (!kept)
        snprintf(buf, len, "%s: %d shapes, default kept on all %d (default %.1f-%.1f us%s)", fam, shapes, shapes, dmin, dmax,
                 tail);
    else if (!dflt)
        snprintf(buf, len, "%s: %d shapes, a variant kept on all %d (%s; default %.1f-%.1f us)", fam, shapes, shapes,
                 vars, dmin, dmax);
    else
        snprintf(buf, len, "%s: %d shapes, a variant kept on %d (%s), default kept on %d (default %.1f-%.1f us%s)", fam,
                 shapes, kept, vars, dflt, dmin, dmax, tail);
    return true;
}
