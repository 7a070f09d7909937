/* What a tune writes besides its table (tuner_outputs.c): the campaign's
 * provenance, the report's page and the folder's tables.json. Internal to
 * the tools library. */
#ifndef ST_TUNER_OUTPUTS_H
#define ST_TUNER_OUTPUTS_H

#include "strata/table_meta.h"
#include "strata/tools/tuner.h"

/* The campaign's provenance (tuner_outputs.c): tool, source commit, date,
 * device, model name, file and SHA-256, token mix, threshold, report names. */
st_status st_tune_provenance(st_ctx *ctx, const st_tune_options *o, const char *model_name, const char *report_path,
                             st_provenance *p);
/* After the JSON report: renders the HTML page beside it when PAGE (the
 * install writes it itself, with the table: tune_out.h) and updates DIR's
 * tables.json (saying which tables this one supersedes); with PAGE, then
 * writes the run's manifest (out_manifest.h) listing the report, the page
 * and the index. */
st_status st_tune_outputs(st_ctx *ctx, const st_tune_options *o, const char *dir, const char *report_path,
                          const char *table_path, bool page);
#endif
