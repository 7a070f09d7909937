/* tune_decode settings MODEL.gguf --engine PATH --prompts FILE --sweep ...:
 * the settings layer (strata/tools/settings.h) from the command line, and
 * tune_decode settings apply PROFILE MODEL.gguf --engine PATH: the command
 * line a profile stands for, refused for another engine build or model. */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SETTINGS_HELP[] =
    "usage: tune_decode settings MODEL.gguf --engine PATH --prompts FILE --sweep NAME=V1,V2,...\n"
    "                            [--sweep ...] [--draft-model M.gguf] [--n-predict N] [--rounds N]\n"
    "                            [--threshold 1%] [--engine-args 'ARGS'] [--device-name TEXT]\n"
    "                            [--start-timeout SECONDS] [--out DIR]\n"
    "       tune_decode settings apply PROFILE MODEL.gguf --engine PATH\n"
    "\n"
    "Sweeps the settings an engine runs with and adopts only what keeps every token. The\n"
    "engine is llama.cpp's llama-server (--engine: your build's binary), started on a loopback\n"
    "port with the defaults and with each point of the grid (the product of the --sweep axes),\n"
    "in rounds whose order rotates; each prompt (one a line of FILE) is completed greedily\n"
    "(temperature 0, top-k 1, seed 42, N tokens, end-of-generation ignored). A setting whose\n"
    "token ids differ from the defaults' on any prompt is refused (the first differing prompt and\n"
    "position named); the others are compared with the defaults pairwise (same round, same\n"
    "prompt) and the fastest is adopted only when its whole 95% interval of the time change is\n"
    "beyond the threshold; when only its median is, the run cannot decide and keeps the defaults.\n"
    "\n"
    "Sweep names: spec-type (none, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod,\n"
    "ngram-cache, draft-simple...), draft-max, draft-min, draft-p-min, threads, ngram-n,\n"
    "ngram-m, ngram-min-hits; any other NAME is the engine flag --NAME (cache-type-k=q8_0,q4_0).\n"
    "The value 'default' leaves the flag out. --draft-model is given to the draft-* points (and\n"
    "adds spec-type=draft-simple when no spec-type is swept). --engine-args: arguments for every\n"
    "run, the defaults' too (-ngl 99 -c 4096).\n"
    "\n"
    "Writes into --out (default .): strata-settings-MODEL.profile.json (the profile: engine build,\n"
    "model sha256, device, the strata table if STRATA_DECODE_TUNING is set, the settings and\n"
    "figures), strata-settings-MODEL.json and .html (the report) and their .manifest, as one set;\n"
    "prints the engine command line that applies the result. Before the engine starts, --out is\n"
    "made if missing, locked (a second settings run or a tune of it is refused at once), cleared of\n"
    "what dead runs left, and checked for room (a read-only or full folder: one line, nothing run).\n"
    "Nothing is written when it is stopped (Ctrl-C ends the engine too). Defaults: --n-predict 64,\n"
    "--rounds 3, --threshold 1%.\n"
    "\n"
    "settings apply checks PROFILE against the engine build and the model and prints the command\n"
    "line, or refuses with one line when either is another.\n"
    "\n"
    "Exit status: 0 decided (a setting adopted, or the defaults kept); 1 error (a missing or\n"
    "failing engine: its last words), or apply refused; 2 usage; 3 cannot decide; 128+N stopped\n"
    "by signal N.\n";

static volatile int g_stop;

static void progress_line(void *user, const char *line)
{
    (void)user;
    td_eprint("%s", line);
}

/* The next argument, whatever it looks like (engine arguments start with
 * '-'); NULL after a usage error. */
static const char *raw_value(int argc, char **argv, int *i, const char *opt, int *rc)
{
    if (*i + 1 >= argc) {
        *rc = td_usage_error("settings: %s needs a value", opt);
        return NULL;
    }
    return argv[++*i];
}

static int cmd_apply(int argc, char **argv, const td_global *g)
{
    const char *prof = NULL, *model = NULL, *engine = NULL;
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--engine")) {
            if (!(engine = td_value(argc, argv, &i, "settings apply", &rc))) return rc;
        } else if (argv[i][0] == '-' && argv[i][1])
            return td_usage_error("settings apply: unknown option '%s'", argv[i]);
        else if (!prof)
            prof = argv[i];
        else if (!model)
            model = argv[i];
        else
            return td_usage_error("settings apply: unexpected argument '%s'", argv[i]);
    }
    if (!prof || !model || !engine) return td_usage_error("settings apply: expected PROFILE MODEL.gguf --engine PATH");
    char cmd[8192];
    const st_status s = st_settings_profile_apply(prof, engine, model, cmd, sizeof cmd);
    if (s != ST_OK) return td_fail("settings apply", s, 1);
    if (g->json) {
        cJSON *j = cJSON_CreateObject();
        td_json_add_string(j, "command", cmd);
        td_json_put(j);
    } else
        td_print("%s", cmd);
    return 0;
}

/* Splits the --engine-args text at spaces into ARGS (pointers into BUF). */
static int split_args(char *buf, const char **args, int cap)
{
    int n = 0;
    for (char *t = strtok(buf, " \t"); t; t = strtok(NULL, " \t")) {
        if (n == cap) return -1;
        args[n++] = t;
    }
    return n;
}

int cmd_settings(int argc, char **argv, const td_global *g)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(SETTINGS_HELP, stdout);
            return 0;
        }
    if (argc >= 2 && !strcmp(argv[1], "apply")) return cmd_apply(argc, argv, g);
    st_settings_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    const char *sweeps[ST_SETTINGS_MAX_AXES];
    const char *eargs[ST_SETTINGS_MAX_ENGINE_ARGS];
    char *eargs_buf = NULL;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--engine")) {
            if (!(o.engine = td_value(argc, argv, &i, "settings", &rc))) return rc;
        } else if (!strcmp(a, "--prompts")) {
            if (!(o.prompts = td_value(argc, argv, &i, "settings", &rc))) return rc;
        } else if (!strcmp(a, "--sweep")) {
            if (!(v = td_value(argc, argv, &i, "settings", &rc))) return rc;
            if (o.n_sweeps == ST_SETTINGS_MAX_AXES)
                return td_usage_error("settings: at most %d --sweep", ST_SETTINGS_MAX_AXES);
            sweeps[o.n_sweeps++] = v;
        } else if (!strcmp(a, "--draft-model")) {
            if (!(o.draft_model = td_value(argc, argv, &i, "settings", &rc))) return rc;
        } else if (!strcmp(a, "--n-predict")) {
            if (!(v = td_value(argc, argv, &i, "settings", &rc))) return rc;
            if ((rc = td_int_option("settings", a, v, 1, 4096, &o.n_predict))) return rc;
        } else if (!strcmp(a, "--rounds")) {
            if (!(v = td_value(argc, argv, &i, "settings", &rc))) return rc;
            if ((rc = td_int_option("settings", a, v, 1, ST_SETTINGS_MAX_SAMPLES, &o.rounds))) return rc;
        } else if (!strcmp(a, "--threshold")) {
            if (!(v = td_value(argc, argv, &i, "settings", &rc))) return rc;
            if ((rc = td_percent_option("settings", a, v, 0, 99, &o.threshold))) return rc;
        } else if (!strcmp(a, "--out")) {
            if (!(o.out_dir = td_value(argc, argv, &i, "settings", &rc))) return rc;
        } else if (!strcmp(a, "--device-name")) {
            if (!(o.device = td_value(argc, argv, &i, "settings", &rc))) return rc;
        } else if (!strcmp(a, "--start-timeout")) {
            if (!(v = td_value(argc, argv, &i, "settings", &rc))) return rc;
            if ((rc = td_seconds_option("settings", a, v, 0, 86400, true, &o.start_timeout_s))) return rc;
        } else if (!strcmp(a, "--engine-args")) {
            if (!(v = raw_value(argc, argv, &i, a, &rc))) return rc;
            free(eargs_buf);
            if (!(eargs_buf = strdup(v))) return td_usage_error("settings: out of memory");
            o.n_engine_args = split_args(eargs_buf, eargs, ST_SETTINGS_MAX_ENGINE_ARGS);
            if (o.n_engine_args < 0) {
                free(eargs_buf);
                return td_usage_error("settings: --engine-args: more than %d arguments", ST_SETTINGS_MAX_ENGINE_ARGS);
            }
        } else if (a[0] == '-' && a[1]) {
            free(eargs_buf);
            return td_usage_error("settings: unknown option '%s'", a);
        } else if (o.model) {
            free(eargs_buf);
            return td_usage_error("settings: unexpected argument '%s'", a);
        } else
            o.model = a;
    }
    if (!o.model || !o.engine || !o.prompts || !o.n_sweeps) {
        free(eargs_buf);
        return td_usage_error("settings: expected MODEL.gguf --engine PATH --prompts FILE --sweep NAME=V1,V2,...");
    }
    o.sweeps = sweeps;
    o.engine_args = eargs;
    o.stop = &g_stop;
    if (!g->quiet) o.progress = progress_line;
    char *cl = td_command_line(argc, argv);
    o.command_line = cl;
    st_settings_summary sum;
    memset(&sum, 0, sizeof sum);
    sum.struct_size = sizeof sum;
    td_signals_begin(&g_stop);
    const st_status s = st_settings_run(&o, &sum);
    td_signals_end();
    free(cl);
    free(eargs_buf);
    if (s == ST_ERR_INTERRUPTED) {
        const int sig = td_signals_caught();
        td_eprint("settings: interrupted%s%s; the engine was ended, nothing was written", sig ? " by " : "",
                  sig ? strsignal(sig) : "");
        return 128 + (sig ? sig : SIGINT);
    }
    if (s != ST_OK) return td_fail("settings", s, 1);
    if (g->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "decision", sum.adopted ? "adopted" : sum.undecided ? "cannot decide" : "defaults kept");
        td_json_add_string(j, "verdict", sum.verdict);
        td_json_add_string(j, "command", sum.command);
        cJSON_AddNumberToObject(j, "points", sum.n_points);
        cJSON_AddNumberToObject(j, "refused", sum.n_refused);
        cJSON_AddNumberToObject(j, "failed", sum.n_failed);
        td_json_add_string(j, "profile", sum.profile_path);
        td_json_add_string(j, "report", sum.json_path);
        td_json_add_string(j, "report_html", sum.html_path);
        td_json_put(j);
    } else {
        td_print("settings: %s", sum.verdict);
        td_print("command: %s", sum.command);
        td_print("profile: %s", sum.profile_path);
        td_print("report:  %s", sum.json_path);
        td_print("         %s", sum.html_path);
    }
    if (td_signals_caught())
        /* a stop after the install's commit point (its journal): the set was
         * completed rather than left half-moved */
        td_eprint("settings: %s arrived after the install's commit point: the files were written, not stopped",
                  strsignal(td_signals_caught()));
    return sum.undecided ? 3 : 0;
}
