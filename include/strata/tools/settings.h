/* strata-tune tools library: the settings layer (`tune_decode settings`).
 *
 * The kernel layer (tables) makes one decode step fast and exact; this
 * layer tunes the settings an engine runs with: speculative decoding on or
 * off and its kind (a draft model, n-gram lookups), the draft length and
 * confidence floor, CPU threads, any other flag of the engine. The engine
 * is llama.cpp's llama-server, the user's own build: it is started on a
 * loopback port with each setting of the grid in turn, in rounds (the
 * order rotated each round so drift hits every setting alike), and asked
 * for greedy completions (temperature 0, top-k 1, a fixed seed, n_predict
 * tokens, end-of-generation ignored) of the user's prompts; the generated
 * token ids and the decode time of each are recorded.
 *
 * The rules are the kernel tuner's (tuner_decide.h): a setting whose
 * tokens differ from the defaults' on ANY prompt is refused, named with
 * the first differing position; the others are compared with the defaults
 * pairwise (same round, same prompt) and the best is adopted only when the
 * whole 95% interval of its time change is beyond the threshold; when its
 * median is but the interval is not, the run "cannot decide" and keeps the
 * defaults. The run writes a profile (its identity: the engine build, the
 * model's name and sha256, the device, the strata table if one engaged;
 * the settings; the figures) beside the kernel tables, and a JSON and an
 * HTML report; nothing is written when it is stopped.
 *
 * A profile names its identity and refuses to apply to another engine
 * build or model (st_settings_profile_apply), as tables do. */
#ifndef STRATA_TOOLS_SETTINGS_H
#define STRATA_TOOLS_SETTINGS_H

#include "strata/tools/base.h"

#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_SETTINGS_MAX_AXES 8     /* --sweep options */
#define ST_SETTINGS_MAX_VALUES 16  /* values of one --sweep */
#define ST_SETTINGS_MAX_POINTS 23  /* grid points besides the defaults (the tuner's candidate limit) */
#define ST_SETTINGS_MAX_PROMPTS 16 /* prompts read from the file */
#define ST_SETTINGS_MAX_SAMPLES 64 /* rounds x prompts: the paired samples of one setting */
#define ST_SETTINGS_MAX_ENGINE_ARGS 32

/* A progress line ("settings: round 2/3, 5 of 7 ...: ETA 1m10s"). */
typedef void (*st_settings_progress_fn)(void *user, const char *line);

typedef struct {
    size_t struct_size;         /* sizeof(st_settings_options) */
    const char *model;          /* the model GGUF the engine loads */
    const char *engine;         /* the llama-server binary */
    const char *prompts;        /* a file: one prompt a line, empty lines skipped */
    /* "NAME=V1,V2,...": one axis of the grid each (the product is swept).
     * NAME is one of spec-type, draft-max, draft-min, draft-p-min,
     * threads, ngram-n, ngram-m, ngram-min-hits (mapped to the engine's
     * flags: st_settings_flag_of) or any other flag of the engine without
     * its dashes (cache-type-k=q8_0,q4_0). The value "default" leaves the
     * flag out. */
    const char *const *sweeps;
    int n_sweeps;
    const char *draft_model;    /* passed to every point whose spec-type is draft-* (NULL: none) */
    const char *const *engine_args; /* given to every run, the defaults too (-ngl 99, -c 2048) */
    int n_engine_args;
    int n_predict;              /* tokens per prompt; 0: 64 */
    int rounds;                 /* 0: 3 */
    double threshold;           /* fraction; 0: 0.01 */
    const char *out_dir;        /* where the profile and reports go; NULL: "." */
    const char *device;         /* the device recorded in the profile; NULL: "cpu" */
    double start_timeout_s;     /* engine start (model load) limit; 0: 600 */
    double request_timeout_s;   /* one completion's limit; 0: 600 */
    volatile int *stop;         /* polled; non-zero: the engine is stopped, nothing written */
    st_settings_progress_fn progress;
    void *progress_user;
    const char *command_line;   /* recorded in the report (NULL: none) */
} st_settings_options;

typedef struct {
    size_t struct_size;       /* sizeof(st_settings_summary) */
    char profile_path[4096];
    char json_path[4096];
    char html_path[4096];
    /* The engine command line that applies the adopted setting (the
     * defaults when none is adopted), without host and port. */
    char command[8192];
    /* One line: "adopted spec-type=ngram-mod: 23.1% faster (...)",
     * "defaults kept: ...", "cannot decide: ...". */
    char verdict[640];
    int n_points;             /* grid points besides the defaults */
    int n_refused;            /* points whose tokens differ */
    int n_failed;             /* points the engine failed on */
    bool adopted;
    bool undecided;           /* the best was faster, but the noise is wider than the threshold */
} st_settings_summary;

/* Runs the sweep (above) and writes, into O->out_dir,
 * strata-settings-<model>.profile.json (the profile),
 * strata-settings-<model>.json and .html (the report) and their
 * .manifest, as one set. Before the engine first starts the folder is
 * made if missing, locked (the tune's folder lock, held to the end of the
 * write: ST_ERR_EXISTS at once while another run holds it), cleared of
 * what dead runs left, its output paths checked and the room the outputs
 * take probed (ST_ERR_IO, one line, when it cannot be made, is read-only
 * or too full; nothing is left in it).
 * ST_ERR_INVALID_ARG for a bad sweep, prompts file or option;
 * ST_ERR_NOT_FOUND / ST_ERR_IO when the engine is missing or fails on the
 * defaults (one line with the engine's own last words);
 * ST_ERR_INTERRUPTED when *O->stop was set (the engine ended, nothing
 * written). A "cannot decide" is ST_OK with SUM->undecided set. */
ST_API st_status st_settings_run(const st_settings_options *o, st_settings_summary *sum);

/* The engine flag a sweep NAME stands for ("draft-max" ->
 * "--spec-draft-n-max"; any other NAME -> "--NAME"), into OUT. */
ST_API void st_settings_flag_of(const char *name, char *out, size_t n);

/* Checks the profile at PROFILE against ENGINE (its build: the version
 * it prints and the sha256 of the binary and of the libraries beside it)
 * and MODEL (its sha256) and writes the command line that applies the
 * profile's settings into CMD. ST_ERR_REFUSED with one line when the
 * profile was made for another engine build or model; ST_ERR_PARSE for a
 * file that is not a profile. */
ST_API st_status st_settings_profile_apply(const char *profile, const char *engine, const char *model, char *cmd,
                                           size_t n);

/* The report's page is rendered by st_report_html_render
 * (strata/tools/report.h) from the JSON, "report": "settings". */
#ifdef __cplusplus
}
#endif
#endif
