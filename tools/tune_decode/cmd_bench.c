/* tune_decode bench: the card's read and copy bandwidth and launch overhead,
 * then iq_mmvq, expert_grouped and whole decode steps, each as time per call
 * (median, spread), weight bytes per second and that rate as a fraction of
 * the read bandwidth measured in the same run. Same timing method as the
 * tuner (measure.h): round-robin, device events, weights rotated past the
 * last-level cache. */
#include "commands.h"
#include "ctx_internal.h"
#include "internal.h"
#include "measure.h"
#include "randgen.h"
#include "strata/strata.h"
#include "tuner_internal.h"
#include "vmodel.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char BENCH_HELP[] =
    "usage: tune_decode bench [--shape 'SPEC']... [--variant R|G/D] [--model M.gguf] [--layers N]\n"
    "                         [--quick] [--no-suite]\n"
    "\n"
    "Measures, in one process: the read bandwidth (a streaming-read kernel over 1 GiB), the\n"
    "device-to-device copy bandwidth (bytes read + written), the launch overhead (back-to-back\n"
    "empty launches); then for each shape and token count the default chain (and --variant)\n"
    "round-robin with a streaming read of the same weight bytes: time per call (median and\n"
    "spread), weight GB/s, and that rate as a fraction of the big read and of the same-size read.\n"
    "Expert bytes count only the unique experts the routing reads. Whole decode steps: the\n"
    "model given (default tests/data/gguf/tiny-moe.gguf when present) and a synthetic model of\n"
    "--layers (default 48) MoE layers iq3_s/iq4_nl 2560/640, 64 experts, top-8.\n"
    "Without --shape: the suite (iq3_s/iq4_xs/iq4_nl 4096x14336 and 14336x4096, n_tokens 1 2 4 8;\n"
    "the expert pairs gate-up iq3_s iq3_xxs iq2_s iq4_xs iq4_nl q8_0 q4_K x down iq4_nl at\n"
    "2560/640, n_tokens 1..8). --no-suite runs only --shape.\n"
    "SPEC: 'mmvq TYPE ROWS COLS' or 'expert GU DN N_EMBD N_FF N_TOKENS'.\n";

typedef struct {
    st_ctx *ctx;
    st_matrix **m; /* copies (x3 for experts) */
    int copies;
    bool expert;
    int n_expert, topk, nt;
    float *x, *y, *wts, *sink;
    int32_t *ids;
    int variant[2];
} bench_run;

static st_status bench_launch(void *user, int c, long iter)
{
    bench_run *b = user;
    const int k = (int)(iter % b->copies);
    if (c == 0) { /* the same bytes, read by the streaming-read probe */
        st_status s = ST_OK;
        for (int j = 0; j < (b->expert ? 3 : 1) && s == ST_OK; j++) {
            const st_matrix *m = b->m[(b->expert ? 3 : 1) * k + j];
            s = st_ctx_probe_read(b->ctx, st_matrix_data(m), st_matrix_bytes(m), b->sink);
        }
        return s;
    }
    if (c == 3) return st_ctx_probe_loads(b->ctx, b->m[k], b->sink);
    const int rows = c == 2 ? b->variant[0] : 0, dn = c == 2 ? b->variant[1] : 0;
    if (!b->expert) return st_iq_mmvq_variant(b->ctx, b->m[k], b->x, b->nt, b->y, rows);
    st_experts ex = {b->m[3 * k], b->m[3 * k + 1], b->m[3 * k + 2], b->n_expert};
    return st_expert_grouped_variant(b->ctx, &ex, b->x, b->ids, b->wts, b->nt, b->topk, b->y, rows, dn);
}

typedef struct {
    double read_gbs, copy_gbs, launch_us;
    size_t llc;
    bool quick;
    cJSON *rows;
    bool json;
} bench_env;

static void emit(bench_env *e, const char *kind, const char *shape, int nt, const char *path, const st_timing *t,
                 double bytes, const st_timing *same, double nt1_us)
{
    const double gbs = bytes / (t->median_us * 1e3);
    const double same_gbs = same ? bytes / (same->median_us * 1e3) : 0;
    if (!e->json) {
        printf("%-6s %-32s %2d %-9s %9.2f %5.1f%% %8.1f %6.1f%%", kind, shape, nt, path, t->median_us, 100 * t->spread, gbs,
               100 * gbs / e->read_gbs);
        if (same) printf(" %6.1f%%", 100 * gbs / same_gbs); else printf(" %7s", "-");
        if (nt1_us > 0) printf(" %5.2fx", t->median_us / nt1_us); else printf(" %6s", "-");
        printf("\n");
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", kind);
    cJSON_AddStringToObject(o, "shape", shape);
    cJSON_AddNumberToObject(o, "n_tokens", nt);
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddNumberToObject(o, "median_us", t->median_us);
    cJSON_AddNumberToObject(o, "p25_us", t->p25_us);
    cJSON_AddNumberToObject(o, "p75_us", t->p75_us);
    cJSON_AddNumberToObject(o, "spread", t->spread);
    cJSON_AddNumberToObject(o, "weight_bytes", bytes);
    cJSON_AddNumberToObject(o, "gb_per_s", gbs);
    cJSON_AddNumberToObject(o, "fraction_of_read", gbs / e->read_gbs);
    if (same) cJSON_AddNumberToObject(o, "fraction_of_same_size_read", gbs / same_gbs);
    if (nt1_us > 0) cJSON_AddNumberToObject(o, "cost_vs_n_tokens_1", t->median_us / nt1_us);
    cJSON_AddItemToArray(e->rows, o);
}

static st_status probes(st_ctx *c, bench_env *e)
{
    const size_t big = e->quick ? (64u << 20) : (1u << 30);
    void *a = NULL, *b = NULL;
    float *sink = NULL;
    st_status s = st_ctx_alloc(c, big, &a);
    if (s == ST_OK) s = st_ctx_alloc(c, big, &b);
    if (s == ST_OK) s = st_ctx_alloc(c, 4096 * sizeof(float), (void **)&sink);
    if (s == ST_OK) {
        /* fill with non-zero bytes: never time zeros */
        uint8_t *h = malloc(1 << 20);
        for (int i = 0; i < (1 << 20); i++) h[i] = (uint8_t)(i * 131 + 7);
        for (size_t off = 0; off < big && s == ST_OK; off += 1 << 20) s = st_ctx_upload(c, (uint8_t *)a + off, h, 1 << 20);
        free(h);
    }
    double ms, rd[9], cp[9], ln[9];
    const int rounds = e->quick ? 3 : 9;
    for (int r = 0; r < rounds && s == ST_OK; r++) {
        s = st_ctx_timer_start(c);
        if (s == ST_OK) s = st_ctx_probe_read(c, a, big, sink);
        if (s == ST_OK) s = st_ctx_timer_stop(c, &ms);
        rd[r] = (double)big / (ms * 1e6);
        if (s == ST_OK) s = st_ctx_timer_start(c);
        if (s == ST_OK) s = st_ctx_probe_copy(c, b, a, big);
        if (s == ST_OK) s = st_ctx_timer_stop(c, &ms);
        cp[r] = 2.0 * (double)big / (ms * 1e6);
        if (s == ST_OK) s = st_ctx_timer_start(c);
        for (int k = 0; k < 200 && s == ST_OK; k++) s = st_ctx_probe_empty(c);
        if (s == ST_OK) s = st_ctx_timer_stop(c, &ms);
        ln[r] = ms * 1000.0 / 200;
    }
    if (s == ST_OK) {
        st_timing t;
        st_timing_from_samples(rd, rounds, &t);
        e->read_gbs = t.median_us; /* (samples are GB/s here) */
        st_timing_from_samples(cp, rounds, &t);
        e->copy_gbs = t.median_us;
        st_timing_from_samples(ln, rounds, &t);
        e->launch_us = t.median_us;
    }
    st_ctx_free(c, a);
    st_ctx_free(c, b);
    st_ctx_free(c, sink);
    return s;
}

static st_status bench_shape(st_ctx *c, bench_env *e, const st_tune_shape *s, const int *nts, int nn, const int *variant)
{
    bench_run b;
    memset(&b, 0, sizeof b);
    b.ctx = c;
    b.expert = s->kind == ST_SHAPE_EXPERT;
    b.n_expert = s->n_expert;
    b.topk = s->topk;
    if (variant) memcpy(b.variant, variant, sizeof b.variant);
    st_rng r;
    st_rng_seed(&r, 99);
    const int64_t r0 = b.expert ? (int64_t)s->n_expert * s->n_ff : s->rows, c0 = b.expert ? s->n_embd : s->cols;
    const int64_t r2 = (int64_t)s->n_expert * s->n_embd, c2 = s->n_ff;
    const size_t b0 = (size_t)r0 * st_qtype_row_bytes(s->type, c0);
    const size_t b2 = b.expert ? (size_t)r2 * st_qtype_row_bytes(s->down_type, c2) : 0;
    const size_t one = b.expert ? 2 * b0 + b2 : b0;
    size_t rot = e->quick ? (64u << 20) : (512u << 20);
    if (rot < 4 * e->llc) rot = 4 * e->llc;
    b.copies = (int)((rot + one - 1) / one);
    if (b.copies < 2) b.copies = 2;
    if (b.copies > 128) b.copies = 128;
    void *h0 = malloc(b0), *h1 = b.expert ? malloc(b0) : NULL, *h2 = b.expert ? malloc(b2) : NULL;
    st_status st = h0 && (!b.expert || (h1 && h2)) ? ST_OK : ST_ERR_NOMEM;
    if (st == ST_OK) {
        st_random_blocks(&r, s->type, r0, c0, h0);
        if (b.expert) {
            st_random_blocks(&r, s->type, r0, c0, h1);
            st_random_blocks(&r, s->down_type, r2, c2, h2);
        }
    }
    b.m = calloc((size_t)b.copies * 3, sizeof *b.m);
    for (int k = 0; k < b.copies && st == ST_OK; k++) {
        if (!b.expert) {
            st = st_matrix_create(c, s->type, r0, c0, h0, &b.m[k]);
            continue;
        }
        st = st_matrix_create(c, s->type, r0, c0, h0, &b.m[3 * k]);
        if (st == ST_OK) st = st_matrix_create(c, s->type, r0, c0, h1, &b.m[3 * k + 1]);
        if (st == ST_OK) st = st_matrix_create(c, s->down_type, r2, c2, h2, &b.m[3 * k + 2]);
    }
    free(h0);
    free(h1);
    free(h2);
    const int in = b.expert ? s->n_embd : s->cols, out = b.expert ? s->n_embd : s->rows;
    float *hx = malloc(sizeof(float) * ST_MAX_TOKENS * (size_t)in);
    if (st == ST_OK && hx) {
        st_random_floats(&r, hx, ST_MAX_TOKENS * (size_t)in, 1.0f);
        st = st_ctx_alloc(c, sizeof(float) * ST_MAX_TOKENS * (size_t)in, (void **)&b.x);
        if (st == ST_OK) st = st_ctx_upload(c, b.x, hx, sizeof(float) * ST_MAX_TOKENS * (size_t)in);
        if (st == ST_OK) st = st_ctx_alloc(c, sizeof(float) * ST_MAX_TOKENS * (size_t)out, (void **)&b.y);
        if (st == ST_OK) st = st_ctx_alloc(c, 4096 * sizeof(float), (void **)&b.sink);
    }
    free(hx);
    int32_t ids[ST_MAX_PAIRS];
    float w[ST_MAX_PAIRS];
    if (st == ST_OK && b.expert) {
        st_random_routing(&r, ST_MAX_TOKENS, b.topk, b.n_expert, ids, w);
        st = st_ctx_alloc(c, sizeof ids, (void **)&b.ids);
        if (st == ST_OK) st = st_ctx_upload(c, b.ids, ids, sizeof ids);
        if (st == ST_OK) st = st_ctx_alloc(c, sizeof w, (void **)&b.wts);
        if (st == ST_OK) st = st_ctx_upload(c, b.wts, w, sizeof w);
    }
    char name[96];
    if (b.expert)
        snprintf(name, sizeof name, "%s/%s %dx%d e%d k%d", st_qtype_name(s->type), st_qtype_name(s->down_type), s->n_embd,
                 s->n_ff, s->n_expert, s->topk);
    else
        snprintf(name, sizeof name, "%s %dx%d", st_qtype_name(s->type), s->rows, s->cols);
    double nt1 = 0;
    for (int i = 0; i < nn && st == ST_OK; i++) {
        b.nt = nts[i];
        st_timing t[4];
        /* candidates: 0 same-size read, 1 default, 2 variant, 3 loads-only ablation */
        const bool ablate = !b.expert && st_ctx_backend(c) == ST_BACKEND_GPU; /* every format has one */
        if (ablate && !variant) b.variant[0] = b.variant[1] = 0;
        st_measure_spec spec = {ablate ? 4 : variant ? 3 : 2, e->quick ? 5 : 15, 0, 2, bench_launch, &b, NULL};
        st = st_measure(c, &spec, t);
        if (st != ST_OK) break;
        double bytes = (double)one;
        if (b.expert) {
            int used = 0;
            for (int p = 0; p < b.nt * b.topk; p++) {
                int dup = 0;
                for (int q = 0; q < p; q++) dup |= ids[q] == ids[p];
                used += !dup;
            }
            bytes = (double)used * (double)one / b.n_expert;
        }
        if (b.nt == 1) nt1 = t[1].median_us;
        emit(e, b.expert ? "expert" : "mmvq", name, b.nt, "default", &t[1], bytes, b.expert ? NULL : &t[0], b.nt == 1 ? 0 : nt1);
        if (ablate) emit(e, "mmvq", name, b.nt, "loads-only", &t[3], bytes, &t[0], 0);
        if (variant) {
            char vn[16];
            if (b.expert) snprintf(vn, sizeof vn, "rows %d/%d", variant[0], variant[1]);
            else snprintf(vn, sizeof vn, "rows %d", variant[0]);
            emit(e, b.expert ? "expert" : "mmvq", name, b.nt, vn, &t[2], bytes, b.expert ? NULL : &t[0], 0);
        }
    }
    for (int k = 0; k < b.copies * 3; k++) st_matrix_destroy(b.m[k]);
    free(b.m);
    st_ctx_free(c, b.x);
    st_ctx_free(c, b.y);
    st_ctx_free(c, b.sink);
    st_ctx_free(c, b.ids);
    st_ctx_free(c, b.wts);
    return st;
}

static st_status bench_model(st_ctx *c, bench_env *e, const st_verify_options *vo, const char *label)
{
    st_vmodel *vm = NULL;
    ST_TRY(st_vmodel_open(c, vo, &vm));
    int layers = 0;
    const int ops = st_vmodel_ops(vm, &layers);
    st_status s = ST_OK;
    double nt1 = 0;
    for (int nt = 1; nt <= ST_MAX_TOKENS && s == ST_OK; nt++) {
        const int rounds = e->quick ? 5 : 15;
        double us[64];
        for (int w = 0; w < 2 && s == ST_OK; w++) s = st_vmodel_step(c, vm, nt);
        for (int r = 0; r < rounds && s == ST_OK; r++) {
            double ms = 0;
            s = st_ctx_timer_start(c);
            if (s == ST_OK) s = st_vmodel_step(c, vm, nt);
            if (s == ST_OK) s = st_ctx_timer_stop(c, &ms);
            us[r] = ms * 1000;
        }
        if (s != ST_OK) break;
        st_timing t;
        st_timing_from_samples(us, rounds, &t);
        char name[96];
        snprintf(name, sizeof name, "%s (%d ops, %d MoE layers)", label, ops, layers);
        if (nt == 1) nt1 = t.median_us;
        emit(e, "step", name, nt, "default", &t, (double)st_vmodel_weight_bytes(c, vm, nt), NULL, nt == 1 ? 0 : nt1);
    }
    st_vmodel_close(c, vm);
    return s;
}

int cmd_bench(int argc, char **argv, const td_global *g)
{
    const char *specs[32], *model = NULL;
    int ns = 0, layers = 48, variant[2] = {0, 0};
    bool have_variant = false, suite = true, quick = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(BENCH_HELP, stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) {
            quick = true;
        } else if (!strcmp(a, "--no-suite")) {
            suite = false;
        } else if (i + 1 >= argc) {
            return td_usage_error("bench: %s needs a value", a);
        } else if (!strcmp(a, "--shape")) {
            if (ns >= 32) return td_usage_error("bench: at most 32 --shape");
            specs[ns++] = argv[++i];
        } else if (!strcmp(a, "--model")) {
            model = argv[++i];
        } else if (!strcmp(a, "--layers")) {
            layers = atoi(argv[++i]);
            if (layers < 0 || layers > 512) return td_usage_error("bench: --layers %s is out of range 0..512", argv[i]);
        } else if (!strcmp(a, "--variant")) {
            const char *v = argv[++i];
            int n = sscanf(v, "%d/%d", &variant[0], &variant[1]);
            if (n == 1 ? !st_mmvq_rows_valid(variant[0]) : n == 2 ? !st_expert_rows_valid(variant[0], variant[1]) : 1)
                return td_usage_error("bench: --variant '%s' is not a compiled-in variant (tune_decode variants)", v);
            have_variant = true;
        } else {
            return td_usage_error("bench: unknown option '%s'", a);
        }
    }
    if (ns) suite = false;
    st_ctx *c = NULL;
    if (td_open_ctx(g, &c) != 0) return 1;
    bench_env e = {0, 0, 0, st_ctx_llc_bytes(c), quick, cJSON_CreateArray(), g->json};
    st_status s = probes(c, &e);
    const st_identity *id = st_ctx_identity(c);
    if (s == ST_OK && !g->json) {
        printf("device: %s (%s, runtime %s, driver %s); last-level cache %.0f MB\n", id->device_name, id->arch, id->runtime,
               id->driver, e.llc / 1e6);
        printf("read bandwidth %.0f GB/s (streaming read, %s); copy %.0f GB/s (read + write); launch overhead %.2f us\n",
               e.read_gbs, quick ? "64 MiB" : "1 GiB", e.copy_gbs, e.launch_us);
        printf("\n%-6s %-32s %2s %-9s %9s %6s %8s %7s %7s %6s\n", "kind", "shape", "nt", "path", "us/call", "spread", "GB/s",
               "%read", "%same", "vs nt1");
    }
    st_tune_shape sh;
    const int nt4[] = {1, 2, 4, 8}, nt8[] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < ns && s == ST_OK; i++) {
        s = st_tune_parse_shape(specs[i], 64, 8, &sh);
        const int one[] = {sh.n_tokens};
        if (s == ST_OK)
            s = sh.kind == ST_SHAPE_MMVQ ? bench_shape(c, &e, &sh, nt4, 4, have_variant ? variant : NULL)
                                          : bench_shape(c, &e, &sh, one, 1, have_variant ? variant : NULL);
    }
    if (suite) {
        const st_qtype mt[] = {ST_IQ3_S, ST_IQ4_XS, ST_IQ4_NL};
        for (int i = 0; i < 3 && s == ST_OK; i++)
            for (int k = 0; k < 2 && s == ST_OK; k++) {
                st_tune_shape m = {ST_SHAPE_MMVQ, mt[i], ST_QTYPE_NONE, k ? 14336 : 4096, k ? 4096 : 14336, 0, 0, 0, 0, 0, {0}, ""};
                s = bench_shape(c, &e, &m, nt4, 4, NULL);
            }
        const st_qtype gus[] = {ST_IQ3_S, ST_IQ3_XXS, ST_IQ2_S, ST_IQ4_XS, ST_IQ4_NL, ST_Q8_0, ST_Q4_K};
        for (int i = 0; i < 7 && s == ST_OK; i++) {
            st_tune_shape x = {ST_SHAPE_EXPERT, gus[i], ST_IQ4_NL, 0, 0, 2560, 640, 1, 64, 8, {0}, ""};
            s = bench_shape(c, &e, &x, nt8, i == 0 ? 8 : 2, NULL);
        }
    }
    const char *tiny = model ? model : (suite ? "tests/data/gguf/tiny-moe.gguf" : NULL);
    FILE *tf = tiny ? fopen(tiny, "rb") : NULL;
    if (tf) fclose(tf);
    if (s == ST_OK && tf) {
        st_verify_options vo;
        st_verify_options_default(&vo);
        vo.model_path = tiny;
        s = bench_model(c, &e, &vo, tiny);
    }
    if (s == ST_OK && suite && layers > 0) {
        st_verify_options vo;
        st_verify_options_default(&vo);
        const char *shape = "expert iq3_s iq4_nl 2560 640 1";
        vo.shapes = &shape;
        vo.n_shapes = 1;
        vo.n_layers = quick ? 2 : layers;
        char label[64];
        snprintf(label, sizeof label, "synthetic %d x MoE iq3_s/iq4_nl 2560/640", vo.n_layers);
        s = bench_model(c, &e, &vo, label);
    }
    if (g->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON *idj = cJSON_AddObjectToObject(root, "identity");
        cJSON_AddStringToObject(idj, "device", id->device_name);
        cJSON_AddStringToObject(idj, "arch", id->arch);
        cJSON_AddStringToObject(idj, "runtime", id->runtime);
        cJSON_AddStringToObject(idj, "driver", id->driver);
        cJSON_AddNumberToObject(root, "read_gb_per_s", e.read_gbs);
        cJSON_AddNumberToObject(root, "copy_gb_per_s", e.copy_gbs);
        cJSON_AddNumberToObject(root, "launch_overhead_us", e.launch_us);
        cJSON_AddNumberToObject(root, "llc_bytes", (double)e.llc);
        cJSON_AddItemToObject(root, "rows", e.rows);
        e.rows = NULL;
        char *t = cJSON_Print(root);
        if (t) puts(t);
        free(t);
        cJSON_Delete(root);
    }
    cJSON_Delete(e.rows);
    st_ctx_destroy(c);
    if (s != ST_OK) {
        fprintf(stderr, "bench: %s\n", st_last_error()[0] ? st_last_error() : st_status_str(s));
        return 1;
    }
    return 0;
}
