/* tune_decode bench: the benchmark of the tools library (st_bench_run,
 * strata/tools/bench.h), its lines printed as they come, or its JSON
 * document (--json), or its page (--html). */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char BENCH_HELP[] =
    "usage: tune_decode bench [--shape 'SPEC']... [--variant V]... [--ntok LIST] [--model M.gguf]\n"
    "                         [--layers N] [--quick] [--no-suite] [--html FILE.html]\n"
    "\n"
    "Measures, in one process: the read bandwidth (a streaming-read kernel over 1 GiB), the\n"
    "device-to-device copy bandwidth (bytes read + written), the launch overhead (back-to-back\n"
    "empty launches); then for each shape and token count the default chain (and --variant)\n"
    "round-robin with a streaming read of the same weight bytes: time per call (median and\n"
    "spread), weight GB/s, and that rate as a fraction of the big read and of the same-size read;\n"
    "on a GPU also, per mmvq shape, the loads-only ablation (the same weight loads, no decode) and\n"
    "the default chain as a capturing engine runs it (path \"graph\": 256 calls over the rotated\n"
    "copies captured once and replayed, time per call; its output, with the calls alternating two\n"
    "activation vectors, checked against a rows variant's bytes).\n"
    "Weights rotate over at least 4x the last-level cache (the per-arch table: a 7900 XTX's\n"
    "96 MB Infinity Cache, not only the L2 HIP reports) and at least 512 MiB (--quick 64 MiB);\n"
    "the first line prints the cache size used and where it comes from.\n"
    "Expert bytes count only the unique experts the routing reads. Whole decode steps: the\n"
    "model given (default tests/data/gguf/tiny-moe.gguf when present) and a synthetic model of\n"
    "--layers (default 48) MoE layers iq3_s/iq4_nl 2560/640, 64 experts, top-8.\n"
    "Without --shape: the suite (iq3_s/iq4_xs/iq4_nl 4096x14336 and 14336x4096, the K-quant\n"
    "matrices real quants keep beside their experts: q5_K and q6_K 4096x4096 (attention) and a\n"
    "q6_K 16384x4096 output-like slice, n_tokens 1 2 4 8 16 24 32; the expert pairs gate-up {iq3_s iq3_xxs\n"
    "iq2_s iq4_xs iq4_nl q8_0 q4_K} and the low-bit iq2_xxs x down iq4_nl at 2560/640, 64 experts,\n"
    "top-8: iq3_s at n_tokens 1..8, 16, 24, 32, the others at 1 and 2; an entry whose type this build lacks\n"
    "is left out). --no-suite runs only --shape (an mmvq --shape at n_tokens 1 2 4 8 16 24 32, an expert\n"
    "one at its N_TOKENS).\n"
    "SPEC: 'mmvq TYPE ROWS COLS' or 'expert GU DN N_EMBD N_FF N_TOKENS'.\n"
    "--variant V (up to 8, with --shape): also time variant V of the --shape rows in the same\n"
    "round-robin: R, mmaW, splitW or wideTxR (rows of 8192 values or more) for mmvq shapes, G/D\n"
    "for expert shapes (tune_decode variants); on a GPU an mmvq variant that the in-place layout\n"
    "has a kernel for (the matrix-unit ones) is timed there too, as path in-place/V.\n"
    "--ntok LIST (with an mmvq --shape): its token counts instead, e.g. 5,6,7 (distinct, 1..32),\n"
    "measured in increasing order; an expert --shape keeps its N_TOKENS.\n"
    "--html FILE.html: the figures as a page (one chart per shape), and their JSON beside it\n"
    "(FILE.json, the --json document; tune_decode report FILE.json renders it again).\n";

static void on_line(void *user, const char *line)
{
    (void)user;
    td_print("%s", line);
    fflush(stdout);
}

int cmd_bench(int argc, char **argv, const td_global *g)
{
    const char *specs[ST_BENCH_MAX_SHAPES], *variants[ST_BENCH_MAX_VARIANTS], *model = NULL, *html = NULL;
    int ns = 0, nv = 0, layers = 48, ntoks[ST_MAX_TOKENS], n_ntoks = 0;
    bool suite = true, quick = false, layers_given = false;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(BENCH_HELP, stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) {
            quick = true;
        } else if (!strcmp(a, "--no-suite")) {
            suite = false;
        } else if (!strcmp(a, "--shape")) {
            if (!(v = td_value(argc, argv, &i, "bench", &rc))) return rc;
            if (ns >= ST_BENCH_MAX_SHAPES) return td_usage_error("bench: at most %d --shape", ST_BENCH_MAX_SHAPES);
            specs[ns++] = v;
        } else if (!strcmp(a, "--model")) {
            if (!(v = td_value(argc, argv, &i, "bench", &rc))) return rc;
            model = v;
        } else if (!strcmp(a, "--html")) {
            if (!(v = td_value(argc, argv, &i, "bench", &rc))) return rc;
            html = v;
        } else if (!strcmp(a, "--layers")) {
            if (!(v = td_value(argc, argv, &i, "bench", &rc))) return rc;
            if ((rc = td_int_option("bench", a, v, 0, 512, &layers))) return rc;
            layers_given = true;
        } else if (!strcmp(a, "--ntok")) {
            if (!(v = td_value(argc, argv, &i, "bench", &rc))) return rc;
            if ((n_ntoks = td_ntok_list(v, ntoks, ST_MAX_TOKENS)) <= 0)
                return td_usage_error("bench: --ntok '%s': expected distinct token counts 1..%d like 5,6,7", v,
                                      ST_MAX_TOKENS);
        } else if (!strcmp(a, "--variant")) {
            if (!(v = td_value(argc, argv, &i, "bench", &rc))) return rc;
            if (nv >= ST_BENCH_MAX_VARIANTS) return td_usage_error("bench: at most %d --variant", ST_BENCH_MAX_VARIANTS);
            variants[nv++] = v;
        } else {
            return td_usage_error("bench: unknown %s '%s'", a[0] == '-' ? "option" : "argument", a);
        }
    }
    if (nv && !ns)
        return td_usage_error("bench: --variant applies to the --shape rows (the suite runs the default chain)");
    if (n_ntoks && !ns) return td_usage_error("bench: --ntok applies to the mmvq --shape rows (no --shape given)");
    if (layers_given && (ns || !suite))
        return td_usage_error("bench: --layers sets the suite's synthetic model (not run with --shape or --no-suite)");
    st_bench_options o;
    st_bench_options_default(&o);
    o.shapes = specs;
    o.n_shapes = ns;
    o.variants = variants;
    o.n_variants = nv;
    o.ntoks = n_ntoks ? ntoks : NULL;
    o.suite = suite && !ns;
    o.suite_model_path = "tests/data/gguf/tiny-moe.gguf";
    o.layers = layers;
    o.model_path = model;
    o.quick = quick;
    o.on_line = g->json ? NULL : on_line;
    /* what was named is checked before the minutes of probes: a shape that
     * does not parse is an error, a variant or token counts that do not
     * apply a usage one (the shapes and variants first, without the token
     * counts, so a refusal names the option it is about) */
    o.n_ntoks = 0;
    st_status s = st_bench_check(&o);
    if (s == ST_ERR_INVALID_ARG) return td_usage_error("bench: --variant %s", st_last_error());
    if (s != ST_OK) return td_fail("bench", s, 1);
    o.n_ntoks = n_ntoks;
    if (n_ntoks && st_bench_check(&o) != ST_OK) return td_usage_error("bench: --ntok: %s", st_last_error());
    /* where the page and its JSON go, before the minutes of probes */
    if (html && (s = st_report_write_check(html, &model, model ? 1 : 0)) != ST_OK) return td_fail("bench", s, 1);
    char *cl = html ? td_command_line(argc, argv) : NULL;
    o.command_line = cl;
    st_ctx *c = NULL;
    if (td_open_ctx(g, &c) != 0) {
        free(cl);
        return 1;
    }
    st_bench_result res;
    st_bench_result_init(&res);
    s = st_bench_run(c, &o, &res);
    st_ctx_destroy(c);
    free(cl);
    if (s == ST_OK && html && st_report_write(res.json, html) != ST_OK) rc = td_fail("bench", ST_ERR_IO, 1);
    else if (s == ST_OK && html && !g->quiet) td_eprint("bench: report: %s", html);
    if (g->json && res.json) puts(res.json);
    st_bench_result_clear(&res);
    if (s != ST_OK) return td_fail("bench", s, 1);
    return rc;
}
