#define _POSIX_C_SOURCE 200809L
/* tune_decode tune / verify / coverage. */
#include "commands.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char TUNE_HELP[] =
    "usage: tune_decode tune [MODEL.gguf] [options]\n"
    "\n"
    "Tunes the decode kernels for this machine: for every shape the model needs, or the demo\n"
    "set (the expert pairs gate-up {iq3_xxs iq3_s iq2_s iq4_xs iq4_nl q8_0 q4_K iq2_xxs} x down\n"
    "iq4_nl at n_embd 2560, n_ff 640, 64 experts, top-8; dense iq3_s, iq4_xs and iq4_nl shapes of\n"
    "4096/14336 and 2560 models, q5_K and q6_K 4096x4096, a q6_K 16384x4096 output-like slice; a type\n"
    "this build lacks is left out), it byte-compares the default and every compiled-in variant\n"
    "on the device and times them round-robin, with the weights rotated over at least 4x the\n"
    "last-level cache (a per-arch table: the 96 MB Infinity Cache of a 7900 XTX, not only its\n"
    "L2). The keep rule: per round, each variant's time against the default's that round; a\n"
    "variant is kept only when the whole interval of the median of that paired change (95% for\n"
    "the shape, split over the candidates) is faster than the threshold. A decision the interval\n"
    "cannot make (noise) keeps the default and says so. When DIR already holds a table for this\n"
    "device, a choice of it changes only when the new one is faster than it in the same way.\n"
    "Then the end-to-end gate (tune_decode verify) decides whether the table is installed:\n"
    "DIR/strata-<model>-<arch>[-<device model>]-<runtime>.table, written atomically (its comments\n"
    "carry the provenance: tool, source commit, date, device, model file and SHA-256, token mix,\n"
    "report names) and loaded back; the report DIR/strata-<model>.autotune.json records every\n"
    "measurement and decision, its page DIR/strata-<model>.autotune.html shows them (charts per\n"
    "shape; tune_decode report renders it again), and DIR/tables.json, the folder's index, is\n"
    "updated (tune_decode table list DIR).\n"
    "Refused before any measuring: a dispatch knob set (STRATA_...), or a run that does not fit\n"
    "in the device's free memory. Percentages with a sign are time changes: + slower, - faster.\n"
    "\n"
    "Options:\n"
    "  --out DIR            where the table, the reports and tables.json go (default .; created if\n"
    "                       missing, its parent must exist)\n"
    "  --threshold P%       keep threshold (default 1%)\n"
    "  --ntok-mix LIST      token counts, e.g. 1,2,4,8 (default 1..8, at most 32): the blend timed for\n"
    "                       mmvq shapes and the token counts tuned for expert shapes (the table\n"
    "                       records them; coverage asks for these)\n"
    "  --shapes LIST        expert,mmvq (default both)\n"
    "  --shape 'SPEC'       tune this shape instead (repeatable): 'expert GU DN N_EMBD N_FF N_TOKENS'\n"
    "                       or 'mmvq TYPE ROWS COLS'\n"
    "  --experts N --topk K experts (1.." TD_STR(ST_MAX_EXPERTS) ") and top-k (1.." TD_STR(ST_MAX_TOPK) ") for the demo\n"
    "                       set and --shape (default 64, 8)\n"
    "  --rounds N           timed rounds per candidate and token count, 6..64 (default 15;\n"
    "                       --quick 9)\n"
    "  --gate-budget S      the gate's measuring time before it says it cannot decide\n"
    "                       (default 60 s; --quick 20 s)\n"
    "  --quick              fewer rounds and a smaller floor for the weight rotation (smoke runs,\n"
    "                       CI; the rotation still covers 4x the last-level cache)\n"
    "  --no-verify          skip the end-to-end gate (not recommended)\n"
    "  --in-place           tune for an engine that keeps its ggml weights (st_matrix_wrap, as the\n"
    "                       llama.cpp integration runs them): the mmvq shapes measured and gated in\n"
    "                       the in-place layout, among the variants it has kernels for; the expert\n"
    "                       shapes are not tuned (that layout's MoE calls run the default)\n"
    "  --force              overwrite a table made for another identity, or this identity's\n"
    "                       table in DIR when it does not parse\n"
    "  (global: --backend auto|cpu|gpu, --device N|LIST|all, -q, --json)\n"
    "\n"
    "Several devices (--device 0,1 or --device all): every device is tuned into DIR, one after\n"
    "the other (never two at once, so no run times the host while another loads it); every\n"
    "line carries its device ([device 1]) and each device writes its own report\n"
    "(strata-<model>.devN.autotune.json). Devices of one model share one table: the first\n"
    "makes it, the others measure every shape again and, by the re-tune rule above, change a\n"
    "choice only when another candidate is faster than the table's beyond the threshold with\n"
    "its whole interval; each pass gates what it installs on its own device. They agree when,\n"
    "after the last change, every other device had a pass that changed nothing; after two\n"
    "passes per device without that they disagree (exit 5: the table holds the last pass's\n"
    "choices, gated on its device only; tune such devices into separate folders). Devices of\n"
    "different models get tables of their own (the name carries the model).\n"
    "\n"
    "Output folder: checked before the sweep (a folder, writable, room for the outputs) and\n"
    "locked while the tune runs (DIR/.strata-tune.lock): a second tune of the same folder is\n"
    "refused at once. One table per identity: when DIR already holds this machine's table\n"
    "(from another model or --shape set), this run's shapes are merged into it; its other rows\n"
    "stay. The table is installed only together with its report.\n"
    "\n"
    "Exit status: 0 the table is installed (or every shape kept the default); 1 error, or a\n"
    "candidate or the gate found different bytes (reported as a bug); 2 usage; 3 the gate could\n"
    "not decide (nothing installed); 4 the gate measured the table slower (nothing installed);\n"
    "5 (--device LIST|all) devices of one model disagree beyond the noise; with several device\n"
    "models the worst of theirs (in this order: a signal, 1, 2, 4, 5, 3, 0); 128+N stopped by\n"
    "signal N (130: Ctrl-C; nothing written by the run it stopped).\n";

static volatile int g_stop;

/* "expert", "mmvq" or both, comma-separated. */
static bool parse_kinds(const char *s, bool *expert, bool *mmvq)
{
    *expert = *mmvq = false;
    if (!strcmp(s, "expert")) *expert = true;
    else if (!strcmp(s, "mmvq")) *mmvq = true;
    else if (!strcmp(s, "expert,mmvq") || !strcmp(s, "mmvq,expert")) *expert = *mmvq = true;
    else return false;
    return true;
}

static bool is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }

int cmd_tune(int argc, char **argv, const td_global *g)
{
    st_tune_options o;
    st_tune_options_default(&o);
    int mix[ST_MAX_TOKENS];
    const char *shapes[64];
    int ns = 0;
    int rc = 0;
    bool given_kinds = false, given_experts = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (is_help(a)) {
            fputs(TUNE_HELP, stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) {
            o.quick = true;
        } else if (!strcmp(a, "--no-verify")) {
            o.no_verify = true;
        } else if (!strcmp(a, "--in-place")) {
            o.in_place = true;
        } else if (!strcmp(a, "--force")) {
            o.force = true;
        } else if (!strcmp(a, "--out")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if (!v[0]) return td_usage_error("tune: --out needs a folder name");
            o.out_dir = v;
        } else if (!strcmp(a, "--threshold")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if ((rc = td_percent_option("tune", a, v, 0, 99, &o.threshold))) return rc;
        } else if (!strcmp(a, "--ntok-mix")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            o.n_ntok_mix = td_ntok_list(v, mix, ST_MAX_TOKENS);
            o.ntok_mix = mix;
            if (o.n_ntok_mix <= 0)
                return td_usage_error("tune: --ntok-mix '%s': expected distinct token counts 1..%d like 1,2,4,8", v,
                                      ST_MAX_TOKENS);
        } else if (!strcmp(a, "--shapes")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if (!parse_kinds(v, &o.do_expert, &o.do_mmvq))
                return td_usage_error("tune: --shapes '%s': expected expert, mmvq or expert,mmvq", v);
            given_kinds = true;
        } else if (!strcmp(a, "--shape")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if (ns >= 64) return td_usage_error("tune: at most 64 --shape");
            shapes[ns++] = v;
        } else if (!strcmp(a, "--gate-budget")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if ((rc = td_seconds_option("tune", a, v, 0, 86400, true, &o.gate_budget_s))) return rc;
        } else if (!strcmp(a, "--experts")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if ((rc = td_int_option("tune", a, v, 1, ST_MAX_EXPERTS, &o.n_expert))) return rc;
            given_experts = true;
        } else if (!strcmp(a, "--topk")) {
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if ((rc = td_int_option("tune", a, v, 1, ST_MAX_TOPK, &o.topk))) return rc;
            given_experts = true;
        } else if (!strcmp(a, "--rounds")) {
            /* fewer than 6 cannot give a 95% interval, more than 64 are not kept */
            if (!(v = td_value(argc, argv, &i, "tune", &rc))) return rc;
            if ((rc = td_int_option("tune", a, v, 6, ST_TUNE_MAX_ROUNDS, &o.rounds))) return rc;
        } else if (a[0] == '-' && a[1]) {
            return td_usage_error("tune: unknown option '%s'", a);
        } else if (!o.model_path) {
            o.model_path = a;
        } else {
            return td_usage_error("tune: more than one model given ('%s')", a);
        }
    }
    /* options that would be ignored are refused: nothing is silently dropped */
    if (o.model_path && ns)
        return td_usage_error("tune: give a model or --shape, not both (--shape tunes the given shapes instead)");
    if (ns && given_kinds)
        return td_usage_error("tune: --shapes picks among a model's or the demo set's shapes; with --shape, list "
                              "only the shapes to tune");
    if (o.model_path && given_experts)
        return td_usage_error("tune: --experts and --topk are for --shape and the demo set; a model's come from the "
                              "model");
    if (o.in_place && given_kinds && o.do_expert)
        return td_usage_error("tune: --in-place tunes mmvq shapes only (the in-place layout's MoE calls run the "
                              "default): --shapes mmvq");
    if (o.in_place) o.do_expert = false;
    o.shapes = shapes;
    o.n_shapes = ns;
    o.quiet = g->quiet;
    o.stop = &g_stop;
    char *cl = td_command_line(argc, argv);
    o.command_line = cl;
    if (td_many_devices(g)) {
        const int rc_all = td_tune_devices(&o, g);
        free(cl);
        return rc_all;
    }
    st_ctx *ctx = NULL;
    if (td_open_ctx(g, &ctx) != 0) {
        free(cl);
        return 1;
    }
    td_signals_begin(&g_stop);
    st_tune_result res;
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    td_signals_end();
    st_ctx_destroy(ctx);
    free(cl);
    if (g->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "status", st_status_name(s));
        td_json_add_string(j, "message", s == ST_OK ? "" : st_last_error());
        cJSON_AddNumberToObject(j, "shapes", res.shapes);
        cJSON_AddNumberToObject(j, "kept_variants", res.kept_variants);
        cJSON_AddNumberToObject(j, "mismatches", res.mismatches);
        td_json_add_string(j, "table", res.table_written ? td_s(res.table_path) : "");
        cJSON_AddBoolToObject(j, "engaged", res.engaged);
        cJSON_AddStringToObject(j, "gate", st_gate_verdict_name(res.gate));
        td_json_add_string(j, "report", td_s(res.report_path));
        char html[ST_TUNE_PATH_MAX + 8] = "";
        if (res.report_path) st_report_html_path(res.report_path, html, sizeof html);
        td_json_add_string(j, "report_html", html);
        td_json_put(j);
    } else if (res.shapes > 0 && s != ST_ERR_INTERRUPTED) {
        printf("tuned %d shapes: %d kept a variant, %d kept the default%s\n", res.shapes, res.kept_variants,
               res.shapes - res.kept_variants,
               res.noisy ? " (the noise kept the default on some: see the report)" : "");
        char html[ST_TUNE_PATH_MAX + 8];
        st_report_html_path(td_s(res.report_path), html, sizeof html);
        if (res.table_written)
            td_print("table:  %s (installed%s; %s)", td_s(res.table_path),
                     res.gate == ST_GATE_PASS ? " after the gate passed" : res.kept_variants ? " without the gate" : "",
                     res.engaged ? "engages here" : "DOES NOT ENGAGE");
        else
            td_print("table:  not installed (%s)", td_s(res.table_path));
        if (res.report_path) {
            td_print("report: %s", td_s(res.report_path));
            td_print("        %s", html);
        } else {
            td_print("report: not written (the outputs failed: the line below says why)");
        }
    }
    const st_gate_verdict gate = res.gate;
    st_tune_result_clear(&res);
    if (s == ST_ERR_INTERRUPTED) {
        const int sig = td_signals_caught();
        td_eprint("tune: interrupted%s%s; no table was written", sig ? " by " : "", sig ? strsignal(sig) : "");
        return 128 + (sig ? sig : SIGINT);
    }
    if (td_signals_caught() && s == ST_OK) {
        /* a stop after the install's commit point (its journal): the new set
         * was completed rather than left half-moved, and the exit says what
         * the folder holds (0: installed) */
        const int sig = td_signals_caught();
        td_eprint("tune: %s arrived after the install's commit point: the install was completed, not stopped",
                  strsignal(sig));
    }
    if (s == ST_ERR_UNDECIDED) return td_fail("tune", s, 3);
    if (s == ST_ERR_REFUSED && gate == ST_GATE_FAIL_SLOWER) return td_fail("tune", s, 4);
    if (s != ST_OK) return td_fail("tune", s, 1);
    return 0;
}

static const char VERIFY_HELP[] =
    "usage: tune_decode verify MODEL.gguf|--synthetic SPEC TABLE [--rounds N] [--max-slowdown P%] [--budget S]\n"
    "                          [--layers N] [--in-place] [--html FILE.html]\n"
    "\n"
    "The end-to-end gate: runs a whole synthetic decode step of the model (every expert layer\n"
    "through expert_grouped with routing from the model's router, every dense matrix, shared\n"
    "experts included, through iq_mmvq) for n_tokens 1..8, 16, 24, 32, without and with the table,\n"
    "interleaved in one process; what no kernel runs is skipped with one line each.\n"
    "PASS only if every output byte is identical and, for every token count, the interval of\n"
    "the median paired change of the step time (with/without - 1, round by round; + means\n"
    "slower) lies within the limit (--max-slowdown, default 2%); 95% confidence for the whole\n"
    "verdict, split over the token counts and the looks at the data. FAIL when the bytes\n"
    "differ or an interval lies beyond the limit. When an interval reaches both sides, the gate\n"
    "measures 3x as many rounds again (from --rounds, default 21 and at least the ~12 the\n"
    "confidence needs, up to 4096 per token count) while the time budget lasts (--budget,\n"
    "default 60 s for all token counts); then it says 'cannot decide' with the figures and\n"
    "what would help.\n"
    "--synthetic 'SPEC' (repeatable) builds the model from shapes instead ('expert GU DN N_EMBD\n"
    "N_FF 1' / 'mmvq TYPE ROWS COLS'), repeated --layers times, with --experts N (1.." TD_STR(ST_MAX_EXPERTS) ")\n"
    "and --topk K (1.." TD_STR(ST_MAX_TOPK) ") per expert layer (default 64, 8).\n"
    "--in-place runs every matrix in the in-place layout (ggml's blocks wrapped, as an engine that\n"
    "keeps its weights runs them; a table made by tune --in-place is gated so).\n"
    "--html FILE.html writes the verdict and the step times as a page, and its JSON beside it\n"
    "(FILE.json; tune_decode report FILE.json renders it again).\n"
    "Exit status: 0 pass; 1 fail or error; 2 usage; 3 cannot decide; 128+N stopped by signal N.\n"
    "--device LIST|all (global): the gate on each device in turn, after a line naming it; the\n"
    "exit status is the worst (a signal, 1, 2, 3, 0: a failure is not hidden by 'cannot\n"
    "decide'; no --json or --html then).\n";

int cmd_verify(int argc, char **argv, const td_global *g)
{
    st_verify_options o;
    st_verify_options_default(&o);
    const char *pos[2], *syn[32], *html = NULL;
    int np = 0, ns = 0;
    int rc = 0;
    bool synthetic_only = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (is_help(a)) {
            fputs(VERIFY_HELP, stdout);
            return 0;
        }
        if (!strcmp(a, "--rounds") || !strcmp(a, "--layers") || !strcmp(a, "--experts") || !strcmp(a, "--topk")) {
            if (!(v = td_value(argc, argv, &i, "verify", &rc))) return rc;
            synthetic_only |= strcmp(a, "--rounds") != 0;
            if (!strcmp(a, "--rounds")) rc = td_int_option("verify", a, v, 6, 4096, &o.rounds);
            else if (!strcmp(a, "--layers")) rc = td_int_option("verify", a, v, 1, 255, &o.n_layers);
            else if (!strcmp(a, "--experts")) rc = td_int_option("verify", a, v, 1, ST_MAX_EXPERTS, &o.n_expert);
            else rc = td_int_option("verify", a, v, 1, ST_MAX_TOPK, &o.topk);
            if (rc) return rc;
        } else if (!strcmp(a, "--budget")) {
            if (!(v = td_value(argc, argv, &i, "verify", &rc))) return rc;
            if ((rc = td_seconds_option("verify", a, v, 0, 86400, false, &o.budget_s))) return rc;
        } else if (!strcmp(a, "--in-place")) {
            o.in_place = true;
        } else if (!strcmp(a, "--max-slowdown")) {
            if (!(v = td_value(argc, argv, &i, "verify", &rc))) return rc;
            if ((rc = td_percent_option("verify", a, v, 0, 1000, &o.max_slowdown))) return rc;
        } else if (!strcmp(a, "--html")) {
            if (!(v = td_value(argc, argv, &i, "verify", &rc))) return rc;
            html = v;
        } else if (!strcmp(a, "--synthetic")) {
            if (!(v = td_value(argc, argv, &i, "verify", &rc))) return rc;
            if (ns >= 32) return td_usage_error("verify: at most 32 --synthetic");
            syn[ns++] = v;
        } else if (a[0] == '-' && a[1]) {
            return td_usage_error("verify: unknown option '%s'", a);
        } else if (np < 2) {
            pos[np++] = a;
        } else {
            return td_usage_error("verify: unexpected argument '%s'", a);
        }
    }
    if (np != (ns ? 1 : 2)) return td_usage_error("verify: expected MODEL.gguf TABLE (or --synthetic SPEC... TABLE)");
    if (!ns && synthetic_only)
        return td_usage_error("verify: --layers, --experts and --topk shape the --synthetic model; a model's come from "
                              "the model");
    o.model_path = ns ? NULL : pos[0];
    o.table_path = pos[np - 1];
    /* where the page and its JSON go, before the gate's minutes */
    const char *inputs[2] = {o.table_path, o.model_path};
    if (html && st_report_write_check(html, inputs, o.model_path ? 2 : 1) != ST_OK) return td_fail("verify", ST_ERR_IO, 1);
    o.shapes = syn;
    o.n_shapes = ns;
    o.quiet = g->quiet;
    o.stop = &g_stop;
    st_ctx *ctx = NULL;
    if (td_open_ctx(g, &ctx) != 0) return 1;
    td_signals_begin(&g_stop);
    st_verify_result r;
    st_verify_result_init(&r);
    st_status s = st_verify_run(ctx, &o, &r);
    td_signals_end();
    const st_identity id = *st_ctx_identity(ctx);
    st_ctx_destroy(ctx);
    if (s == ST_ERR_INTERRUPTED) {
        st_verify_result_clear(&r);
        const int sig = td_signals_caught();
        td_eprint("verify: interrupted%s%s", sig ? " by " : "", sig ? strsignal(sig) : "");
        return 128 + (sig ? sig : SIGINT);
    }
    if (s != ST_OK) {
        st_verify_result_clear(&r);
        return td_fail("verify", s, 1);
    }
    rc = r.passed ? 0 : r.verdict == ST_GATE_UNDECIDED ? 3 : 1;
    if (g->json || html) {
        char *cl = html ? td_command_line(argc, argv) : NULL, *json = NULL;
        if ((html && !cl) || st_verify_report_json(&id, &o, &r, cl, &json) != ST_OK) {
            rc = td_fail("verify", ST_ERR_NOMEM, 1);
        } else if (html && st_report_write(json, html) != ST_OK) {
            rc = td_fail("verify", ST_ERR_IO, 1);
        } else if (html && !g->quiet) {
            td_eprint("verify: report: %s", html);
        }
        /* --json with --html: the report's document, header included */
        if (g->json && json) puts(json);
        free(json);
        free(cl);
    }
    if (!g->json) td_print("verify: %s", r.message);
    st_verify_result_clear(&r);
    return rc;
}

static const char COVERAGE_HELP[] =
    "usage: tune_decode coverage MODEL.gguf TABLE|DIR\n"
    "\n"
    "Lists the decode shapes the model needs that the table lacks, and says whether the table\n"
    "would engage in this process. What the decode step leaves out (an expert layer or a matrix\n"
    "whose type no kernel runs, a per-head weight) is listed, one 'skipped:' line each, and\n"
    "needs no shape. Expert shapes are asked for at the token counts the tuner\n"
    "tuned (its --ntok-mix, recorded in the table as '# ntok-mix ...'; 1..8 for a table that\n"
    "records none; a damaged '# ntok-mix' line is refused, one line, exit 1). Shapes the tuner\n"
    "measured and kept the default for count as covered (its '# tuned-default ...' comments).\n"
    "A directory is searched as the loader does: the one table made for this process. Exit\n"
    "status 0 when every shape is covered and the table engages; 1 when shapes are missing or\n"
    "the table would not engage, or (one line, no listing) when\n"
    "the path does not exist or cannot be read, or a directory holds no table for this process;\n"
    "2 usage. --device LIST|all (global): on each device in turn, the worst status (no --json).\n";

/* The token counts the table's tuner tuned (st_table_ntok_mix), else the
 * tuner's default mix 1..ST_DECODE_TOKENS (what a tune without --ntok-mix
 * tunes, as --help and the guide say). *RECORDED: whether the table said. */
static int table_mix(const st_table *t, bool *in_mix, bool *recorded)
{
    const int n = st_table_ntok_mix(t, in_mix);
    *recorded = n > 0;
    if (n != 0) return n; /* -1: a damaged line, st_last_error says which */
    for (int i = 0; i < ST_MAX_TOKENS; i++) in_mix[i] = i < ST_DECODE_TOKENS;
    return ST_DECODE_TOKENS;
}

int cmd_coverage(int argc, char **argv, const td_global *g)
{
    const char *pos[2];
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(COVERAGE_HELP, stdout);
            return 0;
        }
        if (argv[i][0] == '-') return td_usage_error("coverage: unknown option '%s'", argv[i]);
        if (np >= 2) return td_usage_error("coverage: unexpected argument '%s'", argv[i]);
        pos[np++] = argv[i];
    }
    if (np != 2) return td_usage_error("coverage: expected MODEL.gguf TABLE|DIR");
    struct stat sb;
    if (stat(pos[1], &sb) != 0) {
        td_eprint("coverage: %s: %s", pos[1], strerror(errno));
        return 1;
    }
    st_model *m = NULL;
    if (st_model_open(pos[0], &m) != ST_OK) {
        td_eprint("coverage: %s: %s", pos[0], st_last_error());
        return 1;
    }
    st_ctx *ctx = NULL;
    if (td_open_ctx(g, &ctx) != 0) {
        st_model_close(m);
        return 1;
    }
    char line[ST_TABLE_MSG_MAX] = "";
    st_table *t = NULL;
    st_status s = st_table_load_msg(pos[1], st_ctx_identity(ctx), st_ctx_dispatch(ctx), &t, line, sizeof line);
    const bool engages = s == ST_OK;
    if (!t && S_ISDIR(sb.st_mode)) {
        /* no table of the directory is for this process (or several are):
         * there is nothing to list coverage of */
        td_eprint("coverage: %s", line);
        st_ctx_destroy(ctx);
        st_model_close(m);
        return 1;
    }
    if (!t) {
        /* a file made elsewhere: show its coverage too, parsed without the
         * identity checks; a file that is no table at all is an error */
        char *buf = NULL, why[ST_TABLE_MSG_MAX] = "";
        size_t len = 0;
        st_status ps = st_read_file(pos[1], &buf, &len);
        if (ps == ST_OK) ps = st_table_parse_any(buf, len, pos[1], &t, why, sizeof why);
        else snprintf(why, sizeof why, "%s", line);
        free(buf);
        if (ps != ST_OK) {
            td_eprint("coverage: %s", why);
            st_ctx_destroy(ctx);
            st_model_close(m);
            return 1;
        }
    }
    bool in_mix[ST_MAX_TOKENS], recorded = false;
    if (table_mix(t, in_mix, &recorded) < 0) {
        td_eprint("coverage: %s: %s", pos[1], st_last_error());
        st_table_destroy(t);
        st_ctx_destroy(ctx);
        st_model_close(m);
        return 1;
    }
    int need = 0, missing = 0;
    cJSON *arr = cJSON_CreateArray();
    const int used = st_model_expert_used(m);
    char key[160];
    for (size_t i = 0; i < st_model_expert_shape_count(m); i++) {
        const st_model_expert_shape *es = st_model_expert_shape_at(m, i);
        for (int nt = 1; nt <= ST_MAX_TOKENS; nt++) {
            if (!in_mix[nt - 1]) continue;
            st_expert_key k = {es->gu_type, es->down_type, es->n_embd, es->n_ff, nt};
            int a, b;
            st_expert_key_text(&k, key, sizeof key);
            const bool have = st_table_lookup_expert(t, &k, &a, &b) || st_table_tuned_default_expert(t, &k);
            need++;
            if (!have) {
                missing++;
                cJSON_AddItemToArray(arr, cJSON_CreateString(key));
                if (!g->json) printf("missing: %s  (%d layers, top-%d)\n", key, es->n_layers, used);
            }
        }
    }
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *ms = st_model_mmvq_shape_at(m, i);
        st_mmvq_key k = {ms->type, ms->n_rows, ms->n_cols};
        int rws;
        st_mmvq_key_text(&k, key, sizeof key);
        const bool have = st_table_lookup_mmvq(t, &k, &rws) || st_table_tuned_default_mmvq(t, &k);
        need++;
        if (!have) {
            missing++;
            cJSON_AddItemToArray(arr, cJSON_CreateString(key));
            if (!g->json) printf("missing: %s  (%d matrices)\n", key, ms->n_matrices);
        }
    }
    cJSON *skips = cJSON_CreateArray();
    char skip[320];
    for (size_t i = 0; i < st_model_omitted_count(m); i++) {
        snprintf(skip, sizeof skip, "%s: %s", st_model_omitted_at(m, i)->name, st_model_omitted_at(m, i)->reason);
        cJSON_AddItemToArray(skips, cJSON_CreateString(skip));
    }
    for (size_t i = 0; i < st_model_matrix_count(m); i++) {
        const st_model_matrix *x = st_model_matrix_at(m, i);
        if (x->type != ST_QTYPE_NONE) continue;
        snprintf(skip, sizeof skip, "%s: type %s has no decode kernel", x->name, x->type_name);
        cJSON_AddItemToArray(skips, cJSON_CreateString(skip));
    }
    if (!g->json)
        for (int i = 0; i < cJSON_GetArraySize(skips); i++) td_print("skipped: %s", cJSON_GetArrayItem(skips, i)->valuestring);
    if (g->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "shapes_needed", need);
        cJSON_AddNumberToObject(j, "shapes_missing", missing);
        cJSON *mix = cJSON_AddArrayToObject(j, "ntok_mix");
        for (int i = 0; i < ST_MAX_TOKENS; i++)
            if (in_mix[i]) cJSON_AddItemToArray(mix, cJSON_CreateNumber(i + 1));
        cJSON_AddItemToObject(j, "missing", arr);
        cJSON_AddItemToObject(j, "skipped", skips);
        skips = NULL;
        cJSON_AddBoolToObject(j, "engages", engages);
        td_json_add_string(j, "load_line", line);
        td_json_put(j);
    } else {
        cJSON_Delete(arr);
        /* every count up to ST_MAX_TOKENS fits: at most 3 digits and a comma each */
        char mixs[4 * ST_MAX_TOKENS + 1] = "";
        size_t at = 0;
        for (int i = 0; i < ST_MAX_TOKENS && at < sizeof mixs; i++)
            if (in_mix[i]) {
                const int w = snprintf(mixs + at, sizeof mixs - at, "%s%d", at ? "," : "", i + 1);
                if (w < 0) break;
                at += (size_t)w;
            }
        printf("coverage: %d of %d shapes the model needs are in the table (expert shapes at n_tokens %s%s); %s\n",
               need - missing, need, mixs, recorded ? ", the tuner's mix" : ", the default mix: the table records none",
               engages ? "the table engages here" : "the table would NOT engage here");
        td_print("%s", line);
    }
    cJSON_Delete(skips);
    st_table_destroy(t);
    st_ctx_destroy(ctx);
    st_model_close(m);
    return (missing == 0 && engages) ? 0 : 1;
}
