/* The gate's outcome as JSON (verify_report.c): the steps array both the
 * tuner's report and the verify report carry. Internal to the tools
 * library; st_verify_report_json is the public face. */
#ifndef ST_VERIFY_REPORT_H
#define ST_VERIFY_REPORT_H

#include "strata/tools/verify.h"

#include <cjson/cJSON.h>

/* One object per token count measured, as both reports write it; NULL
 * when out of memory. */
cJSON *st_json_verify_steps(const st_verify_result *g);

#endif
