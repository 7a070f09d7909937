/* strata-tune: the end-to-end gate. A table may be installed only if a whole
 * decode step with it gives the same output bytes as without it, for every
 * layer and token count, and the measurement shows it is not slower than
 * the limit (2%): per token count, the interval of the median paired
 * change of the step time (rounds without and with the table, interleaved)
 * must lie within the limit, at 95% confidence for the whole verdict (split
 * over the step's 11 token counts, 1..8, 16, 24, 32, and the looks at the data). An interval beyond the limit refuses the
 * table; one that reaches both sides is measured further (more rounds,
 * within a time budget), and when the budget runs out the gate says it
 * cannot decide. */
#ifndef STRATA_VERIFY_H
#define STRATA_VERIFY_H

#include "strata/tools/base.h"

#include "strata/decode.h"
#include "strata/limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill with st_verify_options_default (which sets struct_size); the struct
 * grows as st_tune_options does. */
typedef struct {
    size_t struct_size;       /* sizeof(st_verify_options), set by st_verify_options_default */
    const char *model_path;   /* GGUF model; NULL = a synthetic model from SHAPES */
    const char *table_path;   /* the table under test */
    const char *const *shapes;/* synthetic model: "expert GU DN N_EMBD N_FF N_TOKENS" / "mmvq TYPE ROWS COLS" */
    int n_shapes;
    int n_layers;             /* synthetic model: repeat the shapes this many times (default 1) */
    int n_expert, topk;       /* synthetic expert layers (default 64, 8) */
    int rounds;               /* first batch of timed rounds per token count (default 21; at least the
                                 ~12 the confidence needs);
                                 more when the noise needs them, up to 4096 */
    double max_slowdown;      /* fraction, default 0.02 */
    double budget_s;          /* measuring time for all the token counts before "cannot decide"
                                 (default 60 s) */
    bool quiet;
    volatile int *stop;
    /* true: every matrix in the in-place layout (st_matrix_wrap over the
     * model's ggml blocks uploaded as an engine holds them), as
     * st_tune_options.in_place tunes it (verify --in-place) */
    bool in_place;
} st_verify_options;

ST_API void st_verify_options_init_size(st_verify_options *o, size_t size);
/* (sizeof *O is the caller's: the growth rule of docs/API.md) */
static inline void st_verify_options_default(st_verify_options *o) { st_verify_options_init_size(o, sizeof *o); }

typedef enum {
    ST_GATE_NOT_RUN = 0,
    ST_GATE_PASS,             /* bytes identical, every token count measured within the limit */
    ST_GATE_FAIL_BYTES,       /* output bytes differ with the table (a bug) */
    ST_GATE_FAIL_SLOWER,      /* a token count measured slower beyond the limit */
    ST_GATE_UNDECIDED         /* the noise stayed wider than the limit within the budget */
} st_gate_verdict;

/* One token count the gate measured: the medians of the step without and
 * with the table (us) and their interquartile spreads (fractions of the
 * median), the median paired change with/without - 1 and its interval, and
 * the rounds measured. */
typedef struct {
    int n_tokens;
    double base_us, table_us, base_spread, table_spread;
    double change, change_lo, change_hi;
    int rounds;
} st_verify_step;

#define ST_VERIFY_MESSAGE_MAX 640

/* Set up with st_verify_result_init; st_verify_result_clear frees STEPS. */
typedef struct {
    size_t struct_size;       /* sizeof(st_verify_result), set by st_verify_result_init */
    bool bytes_equal;         /* every layer, every token count */
    bool not_slower;          /* every token count measured within max_slowdown (false when undecided) */
    bool passed;              /* verdict == ST_GATE_PASS */
    st_gate_verdict verdict;
    int n_layers, n_ops;      /* expert layers, operations per step */
    st_verify_step *steps;    /* the token counts measured, increasing (malloc'd) */
    int n_steps;
    double confidence;        /* the intervals' coverage (the lowest of the token counts) */
    double seconds;           /* time the gate measured */
    int table_launches;       /* launches that came from the table over the compared steps */
    char message[ST_VERIFY_MESSAGE_MAX]; /* the verdict, one line: "PASS: ...", "FAIL: ..." or "cannot decide: ..." */
} st_verify_result;

/* The verdict in words: "not run", "pass", "fail: bytes differ", "fail:
 * slower", "cannot decide". */
ST_API const char *st_gate_verdict_name(st_gate_verdict v);

ST_API void st_verify_result_init_size(st_verify_result *res, size_t size);
static inline void st_verify_result_init(st_verify_result *res) { st_verify_result_init_size(res, sizeof *res); }
/* Frees STEPS (and zeroes the rest; struct_size stays). */
ST_API void st_verify_result_clear(st_verify_result *res);

/* Runs the gate on CTX (whose own engaged table, if any, is left as it was).
 * ST_OK with res->verdict (and res->passed) set; other statuses for errors
 * (bad model, table that does not engage here, ...). */
ST_API st_status st_verify_run(st_ctx *ctx, const st_verify_options *opt, st_verify_result *res);

/* The gate's outcome as a JSON document (malloc'd text, *JSON; the caller
 * frees): verdict, message, bytes, per token count the step times, the
 * paired change with its interval and the rounds. With COMMAND_LINE (not
 * NULL) it is a report (`verify --html`, rendered by st_report_write): the
 * header (tool, version, source commit, date, the command line, identity
 * ID) and the options O come first. */
ST_API st_status st_verify_report_json(const st_identity *id, const st_verify_options *o, const st_verify_result *res,
                                       const char *command_line, char **json);

#ifdef __cplusplus
}
#endif
#endif
