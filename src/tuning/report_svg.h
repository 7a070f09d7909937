/* Inline SVG charts for the HTML reports: horizontal bars, one per
 * candidate (or step), each with its interquartile whisker, an optional
 * shaded band (the keep threshold) and an optional reference line (the
 * default's median). Every bar is one <rect class="bar ..."> and nothing
 * else in a chart has the class "bar", so a test can count them. */
#ifndef ST_REPORT_SVG_H
#define ST_REPORT_SVG_H

#include "html_out.h"

typedef enum {
    ST_BAR_PLAIN,   /* a candidate */
    ST_BAR_DEFAULT, /* the default chain */
    ST_BAR_KEPT,    /* the candidate the table keeps */
    ST_BAR_BAD,     /* disqualified: bytes differ from the default */
    ST_BAR_SAME,    /* the same launch as the default (not a candidate) */
    ST_BAR_ALT      /* the second series of a pair (with the table) */
} st_bar_style;

typedef struct {
    const char *label; /* left of the bar (untrusted: escaped) */
    double median, lo, hi; /* lo/hi: p25/p75; lo = hi = median when unknown */
    st_bar_style style;
    const char *note;  /* right of the value ("default", "kept"...; escaped) */
} st_bar;

typedef struct {
    const char *caption; /* aria-label of the chart (escaped) */
    const st_bar *bars;
    int n;
    const char *unit;    /* "µs", "GB/s" */
    bool band;           /* shaded [band_lo, band_hi] */
    double band_lo, band_hi;
    const char *band_label;
    bool ref;            /* dashed line at ref_x */
    double ref_x;
} st_chart;

void st_svg_bar_chart(st_html *h, const st_chart *c);

#endif
