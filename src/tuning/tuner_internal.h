/* The tuner's shape list, per-shape results and report (internal). */
#ifndef ST_TUNER_INTERNAL_H
#define ST_TUNER_INTERNAL_H

#include "measure.h"
#include "strata/table_meta.h"
#include "strata/tools/verify.h"
#include "strata/tools/model.h"
#include "strata/tools/tuner.h"
#include "strata/tools/verify.h"

#define ST_TUNE_MAX_CAND 24
_Static_assert(1 + STRATA_MMVQ_VARIANT_COUNT <= ST_TUNE_MAX_CAND && 1 + STRATA_EXPERT_VARIANT_COUNT <= ST_TUNE_MAX_CAND,
               "every variant and the default must fit a shape's candidates");
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
    double round_us[ST_MEASURE_MAX_ROUNDS]; /* round r's times summed over the mix */
    /* The paired change of this candidate's time against the default's,
     * round by round (this/default - 1; + is slower): median and 95%
     * interval (st_tune_decide; the interval is split over the candidates compared). */
    double change, change_lo, change_hi;
} st_tune_cand;

typedef struct {
    st_tune_shape shape;
    int n_cand;
    st_tune_cand cand[ST_TUNE_MAX_CAND];
    int nts[ST_TUNE_MAX_NT];
    int n_nts;
    int n_rounds;    /* rounds measured per token count (round_us[0..n_rounds)) */
    int best;        /* index of the kept candidate (0 = default) */
    double delta;    /* (default - kept) / default, fraction */
    /* The best candidate measured faster than the default beyond the
     * threshold, but its interval reaches inside it: not told apart from
     * the noise, so the default is kept (a noisy decision never adopts). */
    bool noisy;
    int previous;    /* the previous table's choice (candidate index), -1 when it had none */
    char reason[320];
    size_t rotation_bytes; /* weights streamed per rotation cycle */
    int copies;
    bool rotation_short;   /* the rotation is below 4x the last-level cache (copies capped) */
} st_tune_shape_result;

/* Builds the shape list for OPT (model, hand-given shapes or demo set). */
st_status st_tune_shapes(const st_tune_options *opt, const st_model *model, st_tune_shape **out, int *n);
/* The shape's key as a table row writes it ("mmvq iq3_s 4096 14336",
 * "expert iq3_s iq4_nl 2560 640 1": st_mmvq_key_text, st_expert_key_text). */
const char *st_tune_shape_key(const st_tune_shape *s, char *buf, size_t n);
/* Parses "expert GU DN N_EMBD N_FF N_TOKENS" / "mmvq TYPE ROWS COLS". */
st_status st_tune_parse_shape(const char *text, int n_expert, int topk, st_tune_shape *s);

/* ---- sizes against memory (mem_fit.c) ---- */
/* Weight bytes of a shape (mmvq: the matrix; expert: gate, up and down of
 * every expert) and of its activations and outputs for ST_MAX_TOKENS;
 * SIZE_MAX when the product overflows. */
size_t st_tune_shape_weight_bytes(const st_tune_shape *s);
size_t st_tune_shape_io_bytes(const st_tune_shape *s);
/* Refuses (ST_ERR_NOMEM, one line giving the bytes) when HOST bytes of host
 * memory and DEV bytes of the context's memory (the same memory on the CPU
 * backend) exceed what is available now. WHAT starts the message. */
st_status st_mem_fit(st_ctx *c, const char *what, size_t host, size_t dev);
/* Every shape's set-up in the tuner (st_mem_fit). */
st_status st_tune_shapes_fit(st_ctx *c, const st_tune_shape *s, int n, const st_tune_options *o);

/* The keep rule (tuner_decide.c), on R's per-round times: every eligible
 * candidate's paired change against the default (median and 95% interval);
 * the best is kept only when its whole interval is faster than the
 * threshold THR. Otherwise the default stays and the reason says why (the
 * noise, or a gain within the threshold). Sets best, delta, noisy, reason. */
void st_tune_decide(st_tune_shape_result *r, double thr);

/* The re-tune rule: R->previous is the choice of the table this run
 * replaces. An earlier choice is changed only when the new one is faster
 * than it beyond THR, with its whole paired interval; otherwise the
 * previous choice stays and the reason says why. Returns whether the final
 * choice differs from the previous one. */
bool st_tune_keep_previous(st_tune_shape_result *r, double thr);

/* The campaign verdict of one kernel family ("expert: 7 shapes, default
 * kept on all 7 (default 67.9-73.1 us, best rows 8/8 within 1.0%)") into
 * BUF; false when no shape is of KIND. */
bool st_tune_campaign(const st_tune_shape_result *r, int n, st_shape_kind kind, double thr, char *buf, size_t len);

/* The free-memory check before the sweep: ST_OK when NEED bytes fit in
 * FREE_B, else the one line with both numbers (and what NEED is made of). */
st_status st_tune_check_memory(size_t need, size_t rot_max, size_t gate, size_t free_b, size_t total_b, bool gpu);

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

/* The campaign's provenance (tuner_outputs.c): tool, source commit, date,
 * device, model name, file and SHA-256, token mix, threshold, report names. */
st_status st_tune_provenance(st_ctx *ctx, const st_tune_options *o, const char *model_name, const char *report_path,
                             st_provenance *p);
/* After the JSON report: renders the HTML page beside it and updates DIR's
 * tables.json (saying which tables this one supersedes). */
st_status st_tune_outputs(st_ctx *ctx, const st_tune_options *o, const char *dir, const char *report_path,
                          const char *table_path);

#endif
