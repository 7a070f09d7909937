/* The tuner's JSON report (tuner_report.c). Internal to the tools
 * library. */
#ifndef ST_TUNER_REPORT_H
#define ST_TUNER_REPORT_H

#include "strata/table_meta.h"
#include "strata/tools/tuner.h"
#include "strata/tools/verify.h"
#include "tuner_decide.h"

/* What the report records of the gate and the cache. */
typedef struct {
    const char *engage_line, *verify_line;
    const st_provenance *prov;    /* the campaign's provenance (may be NULL) */
    const st_verify_result *gate; /* NULL when it did not run */
    size_t llc;
    const char *llc_source;
    size_t free_bytes, total_bytes, need_bytes;
    const char *campaign[2];
} st_tune_report_extra;

/* The JSON report as malloc'd text (what st_tune_write_report writes);
 * NULL when out of memory. */
char *st_tune_report_text(const st_ctx *ctx, const st_tune_options *opt, const st_tune_shape_result *r, int n,
                          const st_tune_result *res, const st_tune_report_extra *x);
/* Writes the JSON report atomically (st_tune_report_text). */
st_status st_tune_write_report(const char *path, const st_ctx *ctx, const st_tune_options *opt,
                               const st_tune_shape_result *r, int n, const st_tune_result *res,
                               const st_tune_report_extra *x);
#endif
