/* The HTML reports: one self-contained page (inline CSS and SVG, no
 * scripts, nothing fetched) rendered from a report's JSON alone, so
 * `tune_decode report FILE.json` gives the same page the tuner wrote.
 * Three kinds of JSON are understood: the tuner's autotune report
 * (strata-<model>.autotune.json), and the verify and bench reports
 * (`"report": "verify"` / `"bench"`). */
#ifndef ST_REPORT_HTML_H
#define ST_REPORT_HTML_H

#include "strata/status.h"

#include <stddef.h>

/* Renders JSON[0..LEN) into a malloc'd page (*HTML, *HTML_LEN; the caller
 * frees). NAME is the JSON's file name, printed in the page. Input that is
 * not JSON or not one of the three reports is refused with one line
 * (st_last_error) and nothing is returned. */
st_status st_report_html_render(const char *json, size_t len, const char *name, char **html, size_t *html_len);

/* Reads JSON_PATH, renders it and writes HTML_PATH atomically (temporary
 * file, fsync, rename): a failed render leaves HTML_PATH as it was. */
st_status st_report_html_write(const char *json_path, const char *html_path);

/* JSON_PATH with its ".json" ending replaced by ".html" (".html" appended
 * when it has none). */
void st_report_html_path(const char *json_path, char *out, size_t n);

#endif
