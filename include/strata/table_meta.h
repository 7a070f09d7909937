/* strata-tune: the table's comment vocabulary. A table's "# " lines carry
 * its provenance ("# tool: tune_decode 0.4.0", "# model sha256: ..."), the
 * token counts its tuner tuned ("# ntok-mix 1 2 4 8"), the shapes it
 * measured and kept the default for ("# tuned-default mmvq iq3_s 4096
 * 14336": covered, not gaps) and what a merge kept ("# merged: ..."). Every
 * word is defined in one place (src/runtime/table_meta.c): the tuner
 * writes them, and the loader, `table show`, `table list`, `coverage` and
 * the tables index read them, through these typed accessors only. Renaming
 * a word is that file. Other comments are free text, kept as they are. */
#ifndef STRATA_TABLE_META_H
#define STRATA_TABLE_META_H

#include "strata/version.h"

#include "strata/limits.h"
#include "strata/status.h"
#include "strata/table.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- provenance: one "# <key>: <value>" line per field ----------------- */

/* field, comment key, what it holds */
#define ST_PROVENANCE_FIELDS(X)                                                    \
    X(tool, "tool", "the tool and its version: tune_decode 0.4.0")                 \
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

/* A value type: its layout changes only with the SONAME. */
typedef struct {
#define ST_PROV_FIELD_(f, key, what) char f[ST_PROVENANCE_VALUE_MAX];
    ST_PROVENANCE_FIELDS(ST_PROV_FIELD_)
#undef ST_PROV_FIELD_
} st_provenance;

#define ST_PROV_COUNT_(f, key, what) +1
enum { ST_PROVENANCE_COUNT = 0 ST_PROVENANCE_FIELDS(ST_PROV_COUNT_) };
#undef ST_PROV_COUNT_

/* Key and value of field I (0 .. ST_PROVENANCE_COUNT - 1; "" outside). */
ST_API const char *st_provenance_key(int i);
ST_API const char *st_provenance_value(const st_provenance *p, int i);

/* The provenance of T (fields it lacks are empty; the first line of a key
 * counts). Tables made before these lines existed carry "# made by
 * tune_decode V on DATE, device D, driver R" and "# report: PATH;
 * threshold T%", which are read too. */
ST_API void st_provenance_from_table(const st_table *t, st_provenance *p);
/* Adds one comment per non-empty field of P to T, in the list's order. */
ST_API st_status st_provenance_to_table(st_table *t, const st_provenance *p);

/* ---- what each comment line is ------------------------------------------ */

typedef enum {
    ST_COMMENT_OTHER = 0,     /* free text */
    ST_COMMENT_PROVENANCE,    /* a provenance field (either form) */
    ST_COMMENT_NTOK_MIX,      /* the token counts tuned */
    ST_COMMENT_TUNED_DEFAULT, /* a shape measured and kept at the default */
    ST_COMMENT_MERGED         /* what a merge kept from an earlier campaign */
} st_comment_kind;

/* The kind of comment text C (a st_table_comment_at line). */
ST_API st_comment_kind st_table_comment_kind(const char *c);

/* ---- the token counts tuned ---------------------------------------------- */

/* Adds the line of the token counts NTS[0..N) (each 1..ST_MAX_TOKENS; in
 * increasing order, duplicates dropped): the counts `coverage` asks a
 * model's expert shapes for. */
ST_API st_status st_table_set_ntok_mix(st_table *t, const int *nts, int n);
/* The token counts T's first such line records, into IN_MIX[k - 1] for
 * count k (ST_MAX_TOKENS entries); returns how many, or 0 (IN_MIX all
 * false) when T records none, or -1 (IN_MIX all false, st_last_error says
 * why) when that line is not what st_table_set_ntok_mix writes: counts
 * 1..ST_MAX_TOKENS, each once, one space before each, at least one. */
ST_API int st_table_ntok_mix(const st_table *t, bool *in_mix);

/* ---- tuned defaults ------------------------------------------------------- */

/* Records that the tuner measured the shape and kept the default (a
 * comment the loader reads back: st_table_tuned_default_mmvq). */
ST_API st_status st_table_add_tuned_default_mmvq(st_table *t, const st_mmvq_key *key);
ST_API st_status st_table_add_tuned_default_expert(st_table *t, const st_expert_key *key);

/* ---- merges --------------------------------------------------------------- */

/* Adds the line that says a merge kept shapes of the campaign EARLIER
 * describes (its date, model and report). */
ST_API st_status st_table_add_merged_note(st_table *t, const st_provenance *earlier);

/* ---- shape keys, as rows and comments write them -------------------------- */

/* "mmvq iq3_s 4096 14336" and "expert iq3_s iq4_nl 2560 640 1" (the key
 * of a row, without its variant) into BUF; returns BUF. */
ST_API const char *st_mmvq_key_text(const st_mmvq_key *k, char *buf, size_t n);
ST_API const char *st_expert_key_text(const st_expert_key *k, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
