/* The settings layer's run (settings.c) as the profile and the reports see
 * it (settings_profile.c, report_settings.c). Internal to the tools
 * library. */
#ifndef ST_SETTINGS_INTERNAL_H
#define ST_SETTINGS_INTERNAL_H

#include "strata/tools/settings.h"
#include "tools_internal.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

#define ST_SETTINGS_MAX_FLAGS (2 * ST_SETTINGS_MAX_AXES + 2)

typedef enum {
    ST_POINT_MEASURED, /* tokens identical to the defaults' on every prompt */
    ST_POINT_REFUSED,  /* a token differs */
    ST_POINT_FAILED    /* the engine failed with it */
} st_point_state;

typedef struct {
    char label[256];                         /* "spec-type=ngram-mod draft-max=8"; "defaults" */
    char *flags[ST_SETTINGS_MAX_FLAGS];      /* the engine flags (and values) this point adds */
    int n_flags;
    st_point_state state;
    char why[640];                           /* refused/failed: why; measured: the verdict */
    int diff_prompt, diff_pos, diff_want, diff_got; /* refused: the first difference */
    double ms[ST_SETTINGS_MAX_SAMPLES];      /* ms per decoded token, [round * n_prompts + prompt] */
    int n_ms;
    long draft_n, draft_accepted;
    double tps, tps_p25, tps_p75;            /* tokens per second: median and quartiles */
    double change, change_lo, change_hi;     /* the paired time change against the defaults */
    bool kept, noisy;
} st_settings_point;

typedef struct {
    const st_settings_options *o;
    char model_name[256], model_sha[65];
    char engine_version[512], engine_sha[65];
    char device[256];
    char table[4096];                        /* STRATA_DECODE_TUNING when set ("" otherwise) */
    char strata_log[1024];                   /* what the engine said of strata-tune and its table */
    char date[32];
    int n_prompts, n_predict, rounds;
    double threshold;
    int n_points;                            /* [0] the defaults, then the grid */
    st_settings_point p[ST_SETTINGS_MAX_POINTS + 1];
    int best;                                /* the adopted point, 0: the defaults */
    bool undecided;
    char verdict[640];
    char command[8192];
} st_settings_run_state;

/* The engine command line of point I (the model, the user's engine
 * arguments, the point's flags), shell-quoted, into OUT. */
void st_settings_command(const st_settings_run_state *s, int i, char *out, size_t n);

/* ARG onto the command line OUT (N bytes) at *AT, after a space, in
 * single quotes unless it is plain (settings_profile.c: the one home of
 * the quoting of the command lines the layer prints). */
void st_settings_put_arg(char *out, size_t n, size_t *at, const char *arg);

/* The profile document (settings_profile.c). */
cJSON *st_settings_profile_json(const st_settings_run_state *s);
/* The report document (report_settings.c). */
cJSON *st_settings_report_json(const st_settings_run_state *s);

#endif
