/* The tuner's shape list, per-shape results and report (internal). */
#ifndef ST_TUNER_INTERNAL_H
#define ST_TUNER_INTERNAL_H

#include "measure.h"
#include "provenance.h"
#include "strata/verify.h"
#include "strata/model.h"
#include "strata/tuner.h"

#define ST_TUNE_MAX_CAND 16
#define ST_TUNE_MAX_NT ST_MAX_TOKENS

/* The token counts a whole decode step is measured at (the gate, bench):
 * 1..ST_DECODE_TOKENS and the common verify batches 16, 24, 32 up to
 * ST_MAX_TOKENS. Fills NTS (ST_MAX_TOKENS entries), returns the count. */
static inline int st_step_token_counts(int *nts)
{
    int n = 0;
    for (int i = 1; i <= ST_DECODE_TOKENS && i <= ST_MAX_TOKENS; i++) nts[n++] = i;
    for (int i = 16; i <= ST_MAX_TOKENS; i += 8) nts[n++] = i;
    return n;
}

typedef enum { ST_SHAPE_MMVQ = 0, ST_SHAPE_EXPERT = 1 } st_shape_kind;

typedef struct {
    st_shape_kind kind;
    st_qtype type, down_type;   /* mmvq: type; expert: gate-up type, down type */
    int rows, cols;             /* mmvq */
    int n_embd, n_ff, n_tokens; /* expert (n_tokens is part of the key) */
    int n_expert, topk;
    const void *w[3];           /* the model's weights, or NULL: random valid blocks */
    char source[96];            /* "blk.0.attn_q.weight", "demo", "--shape" */
} st_tune_shape;

typedef struct {
    char name[32];
    int rows, gu_rows, dn_rows; /* 0 = default chain */
    bool same_launch;           /* identical to the default's launch */
    bool bytes_match;           /* output bytes equal the default's (all token counts) */
    char mismatch[160];
    st_timing t[ST_TUNE_MAX_NT];  /* per token count of the mix (expert: [0]) */
    double blended_us;            /* sum of medians over the mix */
    double blended_p25, blended_p75;
} st_tune_cand;

typedef struct {
    st_tune_shape shape;
    int n_cand;
    st_tune_cand cand[ST_TUNE_MAX_CAND];
    int nts[ST_TUNE_MAX_NT];
    int n_nts;
    int best;        /* index of the kept candidate (0 = default) */
    double delta;    /* (default - kept) / default, fraction */
    bool noisy;      /* spreads larger than the threshold */
    char reason[200];
    size_t rotation_bytes; /* weights streamed per rotation cycle */
    int copies;
} st_tune_shape_result;

/* Builds the shape list for OPT (model, hand-given shapes or demo set). */
st_status st_tune_shapes(const st_tune_options *opt, const st_model *model, st_tune_shape **out, int *n);
/* Parses "expert GU DN N_EMBD N_FF N_TOKENS" / "mmvq TYPE ROWS COLS". */
st_status st_tune_parse_shape(const char *text, int n_expert, int topk, st_tune_shape *s);

/* Writes the JSON report atomically. PROV (may be NULL) adds the
 * campaign's provenance and settings; GATE (NULL when the gate did not run)
 * its step times per n_tokens. */
st_status st_tune_write_report(const char *path, st_ctx *ctx, const st_tune_options *opt,
                               const st_tune_shape_result *r, int n, const st_tune_result *res,
                               const char *engage_line, const char *verify_line, const st_provenance *prov,
                               const st_verify_result *gate);

/* The campaign's provenance (tuner_outputs.c): tool, source commit, date,
 * device, model name, file and SHA-256, token mix, threshold, report names. */
st_status st_tune_provenance(st_ctx *ctx, const st_tune_options *o, const char *model_name, const char *report_path,
                             st_provenance *p);
/* After the JSON report: renders the HTML page beside it and updates DIR's
 * tables.json (saying which tables this one supersedes). */
st_status st_tune_outputs(st_ctx *ctx, const st_tune_options *o, const char *dir, const char *report_path,
                          const char *table_path);

#endif
