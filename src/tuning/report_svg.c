/* Horizontal bar charts in inline SVG (report_svg.h). The axis may start
 * above zero when every value is far from it: candidates usually differ by
 * a few percent, which a zero-based axis would hide; the axis label says
 * where it starts. */
#include "report_svg.h"

#include <math.h>
#include <stdio.h>

enum { LABEL_W = 150, PLOT_X = 160, PLOT_W = 440, TEXT_W = 250, ROW_H = 24, BAR_H = 14, TOP = 22, AXIS_H = 30 };

static const char *const STYLE_CLASS[] = {"bar-plain", "bar-default", "bar-kept", "bar-bad", "bar-same", "bar-alt"};

static double nice_step(double span)
{
    if (!(span > 0)) return 1;
    const double raw = span / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static bool finite_pos(double v) { return isfinite(v) && v >= 0; }

/* The x of value V, clamped to the plot (a value off the axis sits at its end). */
static double xpos(double v, double x0, double scale)
{
    if (!finite_pos(v) || v < x0) return PLOT_X;
    const double x = PLOT_X + (v - x0) * scale;
    return x > PLOT_X + PLOT_W ? PLOT_X + PLOT_W : x;
}

void st_svg_bar_chart(st_html *h, const st_chart *c)
{
    double hi = 0, lo = INFINITY;
    for (int i = 0; i < c->n; i++) {
        const st_bar *b = &c->bars[i];
        const double v[3] = {b->median, b->lo, b->hi};
        for (int k = 0; k < 3; k++)
            if (finite_pos(v[k])) {
                if (v[k] > hi) hi = v[k];
                if (v[k] < lo) lo = v[k];
            }
    }
    if (c->band && finite_pos(c->band_lo) && finite_pos(c->band_hi)) {
        if (c->band_hi > hi) hi = c->band_hi;
        if (c->band_lo < lo) lo = c->band_lo;
    }
    if (!(hi > 0)) hi = 1;
    if (hi > 1e12) hi = 1e12; /* no report measures past this; keeps the arithmetic finite */
    if (!isfinite(lo)) lo = 0;
    double x0 = 0, step = nice_step(hi);
    if (lo > 0.4 * hi) { /* zoom: all values far from zero */
        step = nice_step(hi - lo * 0.9);
        x0 = floor(lo * 0.9 / step) * step;
    }
    double x1 = ceil(hi * 1.02 / step) * step;
    if (x1 <= x0) x1 = x0 + step;
    const double scale = PLOT_W / (x1 - x0);
#define XPOS(v) xpos((v), x0, scale)
    const int width = PLOT_X + PLOT_W + TEXT_W, height = TOP + c->n * ROW_H + AXIS_H;
    st_html_fmt(h, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
                width, height, width, height);
    st_html_text(h, c->caption);
    st_html_raw(h, "\">\n");
    /* grid and axis */
    for (int k = 0; k <= 12; k++) { /* bounded: a hostile report cannot spin here */
        const double t = x0 + k * step;
        if (!(t <= x1 + step * 1e-6)) break;
        const double x = XPOS(t);
        st_html_fmt(h, "<line class=\"grid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>", x, TOP - 4, x, TOP + c->n * ROW_H);
        st_html_fmt(h, "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, TOP + c->n * ROW_H + 13, t);
    }
    st_html_fmt(h, "<text class=\"axis\" x=\"%d\" y=\"%d\">", PLOT_X, TOP + c->n * ROW_H + 27);
    st_html_text(h, c->unit);
    if (x0 > 0) st_html_textf(h, " (axis starts at %g, not 0)", x0);
    st_html_raw(h, "</text>\n");
    if (c->band && finite_pos(c->band_lo) && finite_pos(c->band_hi) && c->band_hi > c->band_lo) {
        const double a = XPOS(c->band_lo), b = XPOS(c->band_hi);
        st_html_fmt(h, "<rect class=\"band\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", a, TOP - 4, b - a > 1 ? b - a : 1,
                    c->n * ROW_H + 4);
        st_html_fmt(h, "<text class=\"band-label\" x=\"%.1f\" y=\"%d\" text-anchor=\"end\">", b, TOP - 8);
        st_html_text(h, c->band_label);
        st_html_raw(h, "</text>\n");
    }
    for (int i = 0; i < c->n; i++) {
        const st_bar *b = &c->bars[i];
        const int y = TOP + i * ROW_H, yc = y + ROW_H / 2;
        st_html_fmt(h, "<text class=\"label\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL_W, yc + 4);
        st_html_text(h, b->label);
        st_html_raw(h, "</text>");
        const double xm = XPOS(b->median);
        st_html_fmt(h, "<rect class=\"bar %s\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", STYLE_CLASS[b->style], PLOT_X,
                    yc - BAR_H / 2, xm - PLOT_X > 1 ? xm - PLOT_X : 1, BAR_H);
        if (finite_pos(b->lo) && finite_pos(b->hi) && b->hi > b->lo) {
            const double a = XPOS(b->lo), z = XPOS(b->hi);
            st_html_fmt(h, "<path class=\"iqr\" d=\"M%.1f %dV%dM%.1f %dH%.1fM%.1f %dV%d\"/>", a, yc - 5, yc + 5, a, yc, z, z, yc - 5,
                        yc + 5);
        }
        st_html_fmt(h, "<text class=\"value\" x=\"%d\" y=\"%d\">", PLOT_X + PLOT_W + 8, yc + 4);
        if (finite_pos(b->median)) st_html_textf(h, "%.2f", b->median);
        else st_html_raw(h, "-");
        if (b->note && b->note[0]) {
            st_html_raw(h, " <tspan class=\"note\">");
            st_html_text(h, b->note);
            st_html_raw(h, "</tspan>");
        }
        st_html_raw(h, "</text>\n");
    }
    if (c->ref && finite_pos(c->ref_x)) {
        const double x = XPOS(c->ref_x);
        st_html_fmt(h, "<line class=\"ref\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x, TOP - 4, x, TOP + c->n * ROW_H);
    }
#undef XPOS
    st_html_raw(h, "</svg>\n");
}
