/* strata-tune: the on-device tuner behind `tune_decode tune`.
 *
 * For each decode shape: the candidates are the true default entry point
 * (no table) and every variant expanded from the X-macro lists. Each
 * candidate's output is byte-compared with the default's on the device (on
 * the model's own weights when a model is given); a mismatch disqualifies it
 * and is reported as a bug. Candidates are timed round-robin with device
 * events, weights rotated over buffers larger than the last-level cache,
 * median of rounds with the spread recorded. A variant is kept only when it
 * is faster than the default beyond the threshold with the whole interval
 * of its paired (round by round) change (95% for the shape, split over the
 * candidates), and is not the very
 * launch the default makes; a decision the interval cannot make keeps the
 * default and says why. A re-tune changes an earlier table's choice only
 * when the new one is faster than it in the same way. The tuner refuses to
 * run while a dispatch knob is set, and before the sweep when the model and
 * the gate's buffers do not fit in the free memory. The table is gated
 * (strata/tools/verify.h), written atomically (its comment lines carry the
 * provenance: tool, source commit, date, device, model file and SHA-256,
 * token mix, report names), loaded back through the guarded loader, a JSON
 * report records every measurement and decision, an HTML page is rendered
 * from that JSON beside it, and the output folder's index tables.json is
 * updated. */
#ifndef STRATA_TUNER_H
#define STRATA_TUNER_H

#include "strata/tools/base.h"

#include "strata/decode.h"
#include "strata/limits.h"
#include "strata/status.h"
#include "strata/tools/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most timed rounds per candidate and token count a tune keeps. */
#define ST_TUNE_MAX_ROUNDS 64

/* Fill with st_tune_options_default (which sets struct_size), then change
 * what you need. The struct may grow: new members are appended and a
 * caller built against a smaller one gets the defaults for what it lacks
 * (docs/API.md, "Structs that grow"). Arrays and strings are the caller's,
 * read during st_tune_run only. */
typedef struct {
    size_t struct_size;     /* sizeof(st_tune_options), set by st_tune_options_default */
    const char *model_path; /* GGUF model, or NULL for the demo set */
    const char *out_dir;    /* where the table and report go ("." if NULL) */
    double threshold;       /* keep threshold, fraction (0.01 = 1%) */
    const int *ntok_mix;    /* decode mix for mmvq shapes: token counts 1..ST_MAX_TOKENS */
    int n_ntok_mix;         /* 0 = 1..ST_DECODE_TOKENS */
    const int *expert_ntok; /* token counts tuned for expert shapes */
    int n_expert_ntok;      /* 0 = same as the mix */
    bool do_expert, do_mmvq;
    bool quick;             /* fewer rounds and smaller rotation (for CI / smoke runs) */
    bool quiet;             /* no progress lines */
    bool force;             /* overwrite a table made for another identity */
    bool no_verify;         /* skip the end-to-end gate before installing */
    int rounds;             /* timed rounds per candidate, 6..ST_TUNE_MAX_ROUNDS (0 = 15; --quick 9) */
    double gate_budget_s;   /* the gate's time budget (0 = 60 s; --quick 20 s) */
    /* Hand-given shapes (replace the model's / demo set): each string is
     * "expert GU DN N_EMBD N_FF N_TOKENS" or "mmvq TYPE ROWS COLS". */
    const char *const *shapes;
    int n_shapes;
    int n_expert;           /* experts for demo / hand-given expert shapes (default 64) */
    int topk;               /* top-k for demo / hand-given expert shapes (default 8) */
    const char *command_line; /* recorded in the report */
    volatile int *stop;     /* set non-zero (e.g. by SIGINT) to stop cleanly; no table is written */
    /* false (the default): the report is DIR/strata-<model>.autotune.json; true: it is
     * DIR/strata-<model>.devN.autotune.json with N = st_ctx_device of the context, so
     * the tunes of several devices into one folder each keep their own report
     * (tune_decode tune --device LIST|all) */
    bool report_per_device;
    /* true: the iq_mmvq shapes are measured on matrices in the in-place
     * layout (st_matrix_wrap over ggml's blocks, as an engine that keeps
     * its weights runs them), their candidates the variants that layout
     * has kernels for (st_mmvq_in_place_variant), and the gate runs the
     * model in that layout too. Such a table serves both layouts (its
     * rows run on either); it is tuned for the in-place one. The expert
     * shapes are not tuned in place (do_expert must be false): the
     * in-place layout's MoE calls run the default. (tune --in-place) */
    bool in_place;
} st_tune_options;

ST_API void st_tune_options_init_size(st_tune_options *o, size_t size);
/* (sizeof *O is the caller's: the growth rule of docs/API.md) */
static inline void st_tune_options_default(st_tune_options *o) { st_tune_options_init_size(o, sizeof *o); }

/* The longest output path (folder included) a tune writes; a longer one is
 * refused before the sweep (the system's own limit, PATH_MAX on Linux). */
#define ST_TUNE_PATH_MAX 4096

/* Set up with st_tune_result_init; the library writes only the members
 * struct_size covers, and st_tune_result_clear frees the paths. */
typedef struct {
    size_t struct_size;  /* sizeof(st_tune_result), set by st_tune_result_init */
    int shapes;          /* shapes tuned */
    int kept_variants;   /* shapes where a variant beat the default */
    int mismatches;      /* candidates disqualified by the byte compare (bugs) */
    int noisy;           /* decisions the noise made: the best measured beyond the threshold, its
                            interval did not (the default was kept) */
    char *table_path;    /* this identity's table in the folder (malloc'd; NULL before the folder was set up) */
    char *report_path;   /* the JSON (malloc'd); the HTML page is the same name ending in .html;
                            NULL when the run wrote no report (its outputs failed) */
    bool table_written;  /* false when every shape kept the default... still written with provenance */
    bool engaged;        /* the written table loaded back and engaged */
    int changed_vs_previous; /* choices that differ from the table this run replaced (-1: none for this identity) */
    st_gate_verdict gate;    /* the gate's verdict (ST_GATE_NOT_RUN when not needed or skipped) */
} st_tune_result;

ST_API void st_tune_result_init_size(st_tune_result *res, size_t size);
static inline void st_tune_result_init(st_tune_result *res) { st_tune_result_init_size(res, sizeof *res); }
/* Frees the paths (and zeroes the rest; struct_size stays). */
ST_API void st_tune_result_clear(st_tune_result *res);

/* Runs the whole tune on context CTX. Prints progress through the log sink
 * unless quiet. Returns ST_ERR_MISMATCH if any candidate disagreed with the
 * default (the table is still written without it), ST_ERR_INTERRUPTED when
 * stopped (nothing written), ST_ERR_REFUSED when a knob is set or the gate
 * measured the table slower, ST_ERR_UNDECIDED when the gate could not
 * decide, ST_ERR_NOMEM when the run does not fit in the free memory (in
 * these cases nothing is installed; st_last_error() says why in one line). */
ST_API st_status st_tune_run(st_ctx *ctx, const st_tune_options *opt, st_tune_result *res);

#ifdef __cplusplus
}
#endif
#endif
