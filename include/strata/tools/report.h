/* strata-tune tools library: the reports. The HTML reports: one self-contained page (inline CSS and SVG, no
 * scripts, nothing fetched) rendered from a report's JSON alone, so
 * `tune_decode report FILE.json` gives the same page the tuner wrote.
 * Four kinds of JSON are understood: the tuner's autotune report
 * (strata-<model>.autotune.json), the verify and bench reports
 * (`"report": "verify"` / `"bench"`) and the settings report
 * (`"report": "settings"`, strata/tools/settings.h). */
#ifndef STRATA_TOOLS_REPORT_H
#define STRATA_TOOLS_REPORT_H

#include "strata/tools/base.h"

#include "strata/identity.h"
#include "strata/status.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Renders JSON[0..LEN) into a malloc'd page (*HTML, *HTML_LEN; the caller
 * frees). NAME is the JSON's file name, printed in the page. Input that is
 * not JSON or not one of the four reports is refused with one line
 * (st_last_error) and nothing is returned. */
ST_API st_status st_report_html_render(const char *json, size_t len, const char *name, char **html, size_t *html_len);

/* Reads JSON_PATH, renders it and writes HTML_PATH atomically (temporary
 * file, fsync, rename): a failed render leaves HTML_PATH as it was.
 * Refused with one line, HTML_PATH untouched: HTML_PATH is JSON_PATH
 * itself (any spelling of one file), or a folder, FIFO, device or socket
 * stands there (only a regular file is written over). */
ST_API st_status st_report_html_write(const char *json_path, const char *html_path);

/* JSON_PATH with its ".json" ending replaced by ".html" (".html" appended
 * when it has none). When it does not fit in N bytes OUT is "" (a path is
 * never cut: a cut one would name another file). */
ST_API void st_report_html_path(const char *json_path, char *out, size_t n);

/* Writes the report document JSON (text) as HTML_PATH minus ".html" plus
 * ".json", then the page rendered from it as HTML_PATH, each atomically
 * (what verify --html and bench --html write). HTML_PATH must end in
 * ".html" (ST_ERR_INVALID_ARG otherwise). */
ST_API st_status st_report_write(const char *json, const char *html_path);

/* What st_report_write would refuse, checked before a long run: HTML_PATH
 * must end in ".html", and at HTML_PATH and at its JSON beside it nothing
 * or a regular file may stand (never a folder, FIFO, device or socket),
 * and neither may be one of the N_INPUTS files INPUTS names (the model, the
 * table: any spelling of one file); and the folder must have room for the
 * pair (256 KiB written beside the page as a temporary file, synced and
 * removed). ST_OK, or the status with one line. */
ST_API st_status st_report_write_check(const char *html_path, const char *const *inputs, int n_inputs);

/* The JSON object every report and --json output gives for an identity
 * (header, arch, runtime, compiler, space, device, device_model,
 * compute_units, driver), malloc'd text the caller frees; NULL when out of
 * memory. */
ST_API char *st_identity_json(const st_identity *id);

/* The source commit the tools library was configured from ("unknown"
 * outside a git checkout): recorded in reports and table provenance. */
ST_API const char *st_source_commit(void);

#ifdef __cplusplus
}
#endif
#endif
