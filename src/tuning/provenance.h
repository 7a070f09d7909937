/* Provenance of a table: who made it, from what, with which settings, and
 * where its report is. The tuner writes each field as one comment line
 * "# <key>: <value>" after the header; `table show`, tables.json and
 * `table list` read them back. Tables made before these lines existed carry
 * "# made by tune_decode V on DATE, device D, driver R" and
 * "# report: PATH; threshold T%", which are read too. */
#ifndef ST_PROVENANCE_H
#define ST_PROVENANCE_H

#include "strata/status.h"
#include "strata/table.h"

#include <stdbool.h>

/* field, comment key, what it holds */
#define ST_PROVENANCE_FIELDS(X)                                                    \
    X(tool, "tool", "the tool and its version: tune_decode 0.2.0")                 \
    X(source_commit, "source commit", "git commit of the source, or unknown")      \
    X(date, "campaign date", "when the tune ran, UTC, ISO 8601")                   \
    X(device, "device", "the device model the tune measured")                      \
    X(driver, "driver", "the driver version")                                      \
    X(model, "model", "the model name (demo, shapes, or the GGUF's name)")         \
    X(model_file, "model file", "the GGUF file name")                              \
    X(model_sha256, "model sha256", "SHA-256 of the GGUF file (sha256sum)")        \
    X(token_mix, "token mix", "token counts blended for iq_mmvq shapes")           \
    X(expert_tokens, "expert n_tokens", "token counts tuned for expert shapes")    \
    X(threshold, "threshold", "the keep threshold")                                \
    X(report, "report", "report file names (JSON, HTML), in the table's folder")

#define ST_PROVENANCE_VALUE_MAX 320

typedef struct {
#define ST_PROV_FIELD_(f, key, what) char f[ST_PROVENANCE_VALUE_MAX];
    ST_PROVENANCE_FIELDS(ST_PROV_FIELD_)
#undef ST_PROV_FIELD_
} st_provenance;

/* The source commit this library was configured from ("unknown" outside a
 * git checkout). */
const char *st_source_commit(void);

/* The provenance comments of T (fields it lacks are empty strings). */
void st_provenance_from_table(const st_table *t, st_provenance *p);

/* Adds one comment per non-empty field of P to T, in the list's order. */
st_status st_provenance_to_table(st_table *t, const st_provenance *p);

/* Whether comment text C is a provenance line (new or old form). */
bool st_provenance_is_comment(const char *c);

/* Key and value of field I (0 .. ST_PROVENANCE_COUNT-1), for printing. */
#define ST_PROV_COUNT_(f, key, what) +1
enum { ST_PROVENANCE_COUNT = 0 ST_PROVENANCE_FIELDS(ST_PROV_COUNT_) };
#undef ST_PROV_COUNT_
const char *st_provenance_key(int i);
const char *st_provenance_value(const st_provenance *p, int i);

#endif
