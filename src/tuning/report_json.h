/* The parts every JSON document of the tools shares (the tuner's report,
 * the verify and bench reports, the tables index, the CLI's --json): the
 * date, the identity object, the report header, strings made valid UTF-8.
 * One home each; internal to the tools library (st_identity_json and
 * st_source_commit are their public faces, strata/tools/report.h). */
#ifndef ST_REPORT_JSON_H
#define ST_REPORT_JSON_H

#include "strata/identity.h"
#include "strata/tools/report.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* Now, UTC, ISO 8601 ("2026-12-02T10:19:56Z"), into BUF (32 bytes hold it). */
void st_utc_now(char *buf, size_t n);

/* Adds S (NULL: "") to O as NAME, made valid UTF-8 (names and paths from
 * files and the command line), so the document is always valid JSON. */
void st_json_add_text(cJSON *o, const char *name, const char *s);

/* The identity object: header, arch, runtime, compiler, space, device,
 * device_model, compute_units, driver. NULL when out of memory. */
cJSON *st_json_identity(const st_identity *id);

/* The header a report starts with: "report": KIND, tool, version, source
 * commit, date, command line (NULL: none) and the identity. */
void st_json_report_header(cJSON *root, const char *kind, const st_identity *id, const char *command_line);

#endif
