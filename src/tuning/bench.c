#define _POSIX_C_SOURCE 200809L
/* The benchmark (strata/tools/bench.h): the card's read and copy bandwidth
 * and launch overhead, then iq_mmvq, expert_grouped and whole decode steps,
 * each as time per call (median, spread), weight bytes per second and that
 * rate as a fraction of the read bandwidth measured in the same run. Same
 * timing method as the tuner (measure.h): round-robin, device events,
 * weights rotated past the last-level cache. */
#include "strata/tools/bench.h"
#include "measure.h"
#include "randgen.h"
#include "report_json.h"
#include "strata/probe.h"
#include "strata/tools/model.h"
#include "strata/tools/verify.h"
#include "tools_internal.h"
#include "mem_fit.h"
#include "tuner_shapes.h"
#include "verify_internal.h"
#include "vmodel.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The token counts of the suite: every dense shape at the decode counts and
 * the verify batches, the MoE layer at 1..8 and the verify batches (the
 * whole range engines run: a suite that stopped where we lose would hide
 * the gap). */
static const int DENSE_NTS[] = {1, 2, 4, 8, 16, 24, 32};
static const int MOE_NTS[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 32};
_Static_assert(ST_MAX_TOKENS >= 32, "the suite measures verify batches of 32 tokens");

typedef struct {
    st_ctx *ctx;
    st_matrix **m; /* copies (x3 for experts) */
    int copies;
    bool expert;
    int n_expert, topk, nt;
    float *x, *y, *wts, *sink;
    int32_t *ids;
    int variant[ST_BENCH_MAX_VARIANTS][2];
    int nv;
    /* the in-place layout (GPU): the same blocks as ggml holds them in
     * device memory (RAW), wrapped (MI, laid out as M), or NULL */
    st_matrix **mi;
    void **raw;
    /* the variants (indexes into VARIANT) also timed on MI: the iq_mmvq
     * variants that are kernels of the in-place layout */
    int iv[ST_BENCH_MAX_VARIANTS];
    int niv;
} bench_run;

/* Candidates of a shape's round: 0 the same-size read, 1 the default
 * chain, 2.. the variants, then the in-place layout's default chain and
 * its variants (IV), and the loads-only ablation where they are measured. */
static int cand_in_place(const bench_run *b) { return b->mi ? 2 + b->nv : -1; }
static int cand_loads(const bench_run *b) { return 2 + b->nv + (b->mi ? 1 + b->niv : 0); }

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
    if (c == cand_loads(b)) return st_ctx_probe_loads(b->ctx, b->m[k], b->sink);
    const int ip = b->mi ? c - cand_in_place(b) : -1; /* 0 the in-place default, 1.. its variants */
    st_matrix **m = ip >= 0 ? b->mi : b->m;
    const int rows = ip > 0 ? b->variant[b->iv[ip - 1]][0] : c >= 2 && c < 2 + b->nv ? b->variant[c - 2][0] : 0;
    const int dn = c >= 2 && c < 2 + b->nv ? b->variant[c - 2][1] : 0;
    if (!b->expert) return st_iq_mmvq_variant(b->ctx, m[k], b->x, b->nt, b->y, rows);
    st_experts ex = {m[3 * k], m[3 * k + 1], m[3 * k + 2], b->n_expert};
    return st_expert_grouped_variant(b->ctx, &ex, b->x, b->ids, b->wts, b->nt, b->topk, b->y, rows, dn);
}

typedef struct {
    double read_gbs, copy_gbs, launch_us;
    size_t llc;
    const char *llc_source;
    bool quick;
    cJSON *rows;
    const st_bench_options *o;
} bench_env;

/* One human-readable line to the caller (st_bench_options.on_line). */
static void say(const bench_env *e, const char *fmt, ...) ST_PRINTF(2, 3);
static void say(const bench_env *e, const char *fmt, ...)
{
    if (!e->o->on_line) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    e->o->on_line(e->o->user, line);
}

static void emit(bench_env *e, const char *kind, const char *shape, int nt, const char *path, const st_timing *t,
                 double bytes, const st_timing *same, double nt1_us)
{
    const double gbs = bytes / (t->median_us * 1e3);
    const double same_gbs = same ? bytes / (same->median_us * 1e3) : 0;
    char pct_same[16], vs1[16];
    if (same) snprintf(pct_same, sizeof pct_same, " %6.1f%%", 100 * gbs / same_gbs);
    else snprintf(pct_same, sizeof pct_same, " %7s", "-");
    if (nt1_us > 0) snprintf(vs1, sizeof vs1, " %5.2fx", t->median_us / nt1_us);
    else snprintf(vs1, sizeof vs1, " %6s", "-");
    say(e, "%-6s %-32s %2d %-9s %9.2f %5.1f%% %8.1f %6.1f%%%s%s", kind, shape, nt, path, t->median_us, 100 * t->spread, gbs,
        100 * gbs / e->read_gbs, pct_same, vs1);
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
    ST_TRY(st_mem_fit(c, "the bandwidth probes", 1 << 20, 2 * big));
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

/* Whether SHAPE's benchmark fits: its weights on the host once and two
 * copies on the backend (st_mem_fit, one line with the bytes). */
static st_status bench_fit(st_ctx *c, const st_tune_shape *s)
{
    const size_t w = st_tune_shape_weight_bytes(s);
    char what[160];
    if (s->kind == ST_SHAPE_MMVQ)
        snprintf(what, sizeof what, "mmvq %s %d x %d", st_qtype_name(s->type), s->rows, s->cols);
    else
        snprintf(what, sizeof what, "expert %s/%s %d x %d, %d experts", st_qtype_name(s->type),
                 st_qtype_name(s->down_type), s->n_embd, s->n_ff, s->n_expert);
    return st_mem_fit(c, what, w, w > SIZE_MAX / 2 ? SIZE_MAX : 2 * w + st_tune_shape_io_bytes(s));
}

/* The default chain of an mmvq shape as an engine that captures its step
 * runs it: GRAPH_CALLS calls over the rotated copies captured once into a
 * graph and replayed; time per call = replay time / GRAPH_CALLS (median of
 * ROUNDS replays). The calls alternate between two activation vectors, the
 * last on the first: the replay's output must equal the bytes of a rows
 * variant (launched as usual, the same bytes by the contract) on that
 * vector, so a call that read the activations before its q8_1 kernel had
 * written them (the dependent launch) would show here. */
#define TD_GRAPH_CALLS 256
static st_status bench_graph(st_ctx *c, bench_run *b, const st_tune_shape *s, int rounds, st_timing *t)
{
    int first_variant = 0;
    st_mmvq_variant_ids(&first_variant, 1); /* a one-warp rows variant */
    const size_t n = (size_t)b->nt * (size_t)s->rows;
    const int last = (TD_GRAPH_CALLS - 1) % b->copies;
    const float *x2 = b->x + (size_t)ST_MAX_TOKENS * (size_t)s->cols; /* the other ST_MAX_TOKENS random rows */
    float *a = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    st_status st = a && g ? ST_OK : st_fail(ST_ERR_NOMEM, "bench: out of memory");
    st_ctx_graph *gr = NULL;
    if (st == ST_OK) st = st_iq_mmvq_variant(b->ctx, b->m[last], b->x, b->nt, b->y, first_variant);
    if (st == ST_OK) st = st_ctx_sync(c);
    if (st == ST_OK) st = st_ctx_download(c, a, b->y, n * sizeof(float));
    if (st == ST_OK) st = st_ctx_capture_begin(c);
    if (st == ST_OK) {
        st_status cs = ST_OK;
        for (int i = 0; i < TD_GRAPH_CALLS && cs == ST_OK; i++) {
            const float *xi = (TD_GRAPH_CALLS - 1 - i) % 2 ? x2 : b->x;
            cs = st_iq_mmvq_variant(b->ctx, b->m[i % b->copies], xi, b->nt, b->y, 0);
        }
        st = st_ctx_capture_end(c, &gr);
        if (cs != ST_OK) st = cs;
    }
    if (st == ST_OK) {
        memset(g, 0xff, n * sizeof(float));
        st = st_ctx_upload(c, b->y, g, n * sizeof(float));
    }
    for (int w = 0; w < 2 && st == ST_OK; w++) st = st_ctx_graph_launch(c, gr);
    if (st == ST_OK) st = st_ctx_sync(c);
    if (st == ST_OK) st = st_ctx_download(c, g, b->y, n * sizeof(float));
    if (st == ST_OK && memcmp(a, g, n * sizeof(float)))
        st = st_fail(ST_ERR_MISMATCH, "bench: the calls replayed from a graph differ from an eager call (n_tokens %d)", b->nt);
    double us[64];
    for (int r = 0; r < rounds && st == ST_OK; r++) {
        double ms = 0;
        st = st_ctx_timer_start(c);
        if (st == ST_OK) st = st_ctx_graph_launch(c, gr);
        if (st == ST_OK) st = st_ctx_timer_stop(c, &ms);
        us[r] = ms * 1000 / TD_GRAPH_CALLS;
    }
    if (st == ST_OK) st_timing_from_samples(us, rounds, t);
    st_ctx_graph_destroy(c, gr);
    free(a);
    free(g);
    return st;
}

static st_status bench_shape(st_ctx *c, bench_env *e, const st_tune_shape *s, const int *nts, int nn,
                             const int (*variant)[2], int nv)
{
    bench_run b;
    memset(&b, 0, sizeof b);
    b.ctx = c;
    b.expert = s->kind == ST_SHAPE_EXPERT;
    b.n_expert = s->n_expert;
    b.topk = s->topk;
    b.nv = nv;
    if (nv) memcpy(b.variant, variant, sizeof b.variant[0] * (size_t)nv);
    for (int v = 0; v < nv && !b.expert; v++)
        if (st_mmvq_in_place_variant(variant[v][0])) b.iv[b.niv++] = v;
    st_rng r;
    st_rng_seed(&r, 99);
    const int64_t r0 = b.expert ? (int64_t)s->n_expert * s->n_ff : s->rows, c0 = b.expert ? s->n_embd : s->cols;
    const int64_t r2 = (int64_t)s->n_expert * s->n_embd, c2 = s->n_ff;
    const size_t b0 = (size_t)r0 * st_qtype_row_bytes(s->type, c0);
    const size_t b2 = b.expert ? (size_t)r2 * st_qtype_row_bytes(s->down_type, c2) : 0;
    const size_t one = b.expert ? 2 * b0 + b2 : b0;
    bool short_of_rule = false;
    b.copies = st_rotation_copies(one, e->llc, e->quick ? (size_t)64 << 20 : (size_t)512 << 20, 2, &short_of_rule);
    /* two copies at least must fit (checked before the probes too); more
     * only in half the free memory */
    ST_TRY(bench_fit(c, s));
    size_t avail = 0, total = 0;
    if (st_ctx_mem_info(c, &avail, &total) == ST_OK)
        while (b.copies > 2 && (size_t)b.copies * one > avail / 2) {
            b.copies--;
            short_of_rule = true;
        }
    if (short_of_rule)
        say(e, "note: %s: %d copies (the cap, or half the free memory) rotate %.1f MB, less than 4x the last-level cache",
            s->kind == ST_SHAPE_MMVQ ? "mmvq" : "expert", b.copies, (double)b.copies * (double)one / 1048576.0);
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
    if (!b.m) st = st_fail(ST_ERR_NOMEM, "bench: out of memory");
    for (int k = 0; k < b.copies && st == ST_OK; k++) {
        if (!b.expert) {
            st = st_matrix_create(c, s->type, r0, c0, h0, &b.m[k]);
            continue;
        }
        st = st_matrix_create(c, s->type, r0, c0, h0, &b.m[3 * k]);
        if (st == ST_OK) st = st_matrix_create(c, s->type, r0, c0, h1, &b.m[3 * k + 1]);
        if (st == ST_OK) st = st_matrix_create(c, s->down_type, r2, c2, h2, &b.m[3 * k + 2]);
    }
    /* the in-place layout beside it (GPU; on the CPU both read ggml's
     * bytes): the same blocks uploaded as ggml holds them and wrapped */
    if (st == ST_OK && st_ctx_backend(c) == ST_BACKEND_GPU) {
        b.mi = calloc((size_t)b.copies * 3, sizeof *b.mi);
        b.raw = calloc((size_t)b.copies * 3, sizeof *b.raw);
        if (!b.mi || !b.raw) st = st_fail(ST_ERR_NOMEM, "bench: out of memory");
        const int per = b.expert ? 3 : 1;
        for (int k = 0; k < b.copies && st == ST_OK; k++)
            for (int j = 0; j < per && st == ST_OK; j++) {
                const bool dn = j == 2;
                const size_t nb = dn ? b2 : b0;
                const void *h = j == 0 ? h0 : j == 1 ? h1 : h2;
                st = st_ctx_alloc(c, nb, &b.raw[per * k + j]);
                if (st == ST_OK) st = st_ctx_upload(c, b.raw[per * k + j], h, nb);
                if (st == ST_OK)
                    st = st_matrix_wrap(c, dn ? s->down_type : s->type, dn ? r2 : r0, dn ? c2 : c0, b.raw[per * k + j],
                                        &b.mi[per * k + j]);
            }
    }
    free(h0);
    free(h1);
    free(h2);
    const int in = b.expert ? s->n_embd : s->cols, out = b.expert ? s->n_embd : s->rows;
    /* twice the activations a call takes: the graph check alternates two */
    const size_t nx = 2 * ST_MAX_TOKENS * (size_t)in;
    float *hx = malloc(sizeof(float) * nx);
    if (st == ST_OK && hx) {
        st_random_floats(&r, hx, nx, 1.0f);
        st = st_ctx_alloc(c, sizeof(float) * nx, (void **)&b.x);
        if (st == ST_OK) st = st_ctx_upload(c, b.x, hx, sizeof(float) * nx);
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
        st_timing t[4 + 2 * ST_BENCH_MAX_VARIANTS];
        /* candidates: cand_in_place and cand_loads say */
        const bool ablate = !b.expert && st_ctx_backend(c) == ST_BACKEND_GPU; /* every format has one */
        st_measure_spec spec = {cand_loads(&b) + (ablate ? 1 : 0), e->quick ? 5 : 15, 0, 2, bench_launch, &b, NULL, NULL};
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
        if (b.mi)
            emit(e, b.expert ? "expert" : "mmvq", name, b.nt, "in-place", &t[cand_in_place(&b)], bytes,
                 b.expert ? NULL : &t[0], 0);
        if (ablate) {
            emit(e, "mmvq", name, b.nt, "loads-only", &t[cand_loads(&b)], bytes, &t[0], 0);
            st_timing tg;
            st = bench_graph(c, &b, s, e->quick ? 5 : 15, &tg);
            if (st != ST_OK) break;
            emit(e, "mmvq", name, b.nt, "graph", &tg, bytes, &t[0], 0);
        }
        for (int v = 0; v < nv; v++) {
            char vn[32];
            const int *va = variant[v];
            if (b.expert) st_expert_choice_name(va[0], va[1], vn, sizeof vn);
            else st_mmvq_choice_name(va[0], vn, sizeof vn);
            emit(e, b.expert ? "expert" : "mmvq", name, b.nt, vn, &t[2 + v], bytes, b.expert ? NULL : &t[0], 0);
        }
        for (int v = 0; b.mi && v < b.niv; v++) {
            char vn[32], path[48];
            st_mmvq_choice_name(variant[b.iv[v]][0], vn, sizeof vn);
            snprintf(path, sizeof path, "in-place/%s", vn);
            emit(e, "mmvq", name, b.nt, path, &t[cand_in_place(&b) + 1 + v], bytes, &t[0], 0);
        }
    }
    for (int k = 0; b.m && k < b.copies * 3; k++) st_matrix_destroy(b.m[k]);
    free(b.m);
    for (int k = 0; b.mi && k < b.copies * 3; k++) st_matrix_destroy(b.mi[k]);
    for (int k = 0; b.raw && k < b.copies * 3; k++) st_ctx_free(c, b.raw[k]);
    free(b.mi);
    free(b.raw);
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
    double nt1 = 0, nt1g = 0;
    /* On a GPU the step is also captured once into a graph (as an engine
     * would) and replayed; eager and graph rounds alternate, and the graph's
     * outputs are checked against the eager step's bytes. */
    const bool graphs = st_ctx_backend(c) == ST_BACKEND_GPU;
    int step_nts[ST_MAX_TOKENS];
    const int n_step_nts = st_step_token_counts(step_nts);
    for (int si = 0; si < n_step_nts && s == ST_OK; si++) {
        const int nt = step_nts[si];
        const int rounds = e->quick ? 5 : 15;
        double us[64], gus[64];
        st_ctx_graph *gr = NULL;
        for (int w = 0; w < 2 && s == ST_OK; w++) s = st_vmodel_step(c, vm, nt);
        if (s == ST_OK && graphs) {
            const size_t n = st_vmodel_output_floats(vm, nt);
            float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
            s = a && b ? st_vmodel_outputs(c, vm, nt, a) : st_fail(ST_ERR_NOMEM, "bench: out of memory");
            if (s == ST_OK) s = st_ctx_capture_begin(c);
            if (s == ST_OK) {
                st_status cs = st_vmodel_step(c, vm, nt);
                s = st_ctx_capture_end(c, &gr);
                if (cs != ST_OK) s = cs;
            }
            if (s == ST_OK) s = st_vmodel_poison_outputs(c, vm, nt);
            if (s == ST_OK) s = st_ctx_graph_launch(c, gr);
            if (s == ST_OK) s = st_vmodel_outputs(c, vm, nt, b);
            if (s == ST_OK && memcmp(a, b, n * sizeof(float)))
                s = st_fail(ST_ERR_MISMATCH, "bench: the step replayed from a graph differs from the eager step (n_tokens %d)", nt);
            free(a);
            free(b);
        }
        for (int r = 0; r < rounds && s == ST_OK; r++) {
            double ms = 0;
            s = st_ctx_timer_start(c);
            if (s == ST_OK) s = st_vmodel_step(c, vm, nt);
            if (s == ST_OK) s = st_ctx_timer_stop(c, &ms);
            us[r] = ms * 1000;
            if (s != ST_OK || !gr) continue;
            s = st_ctx_timer_start(c);
            if (s == ST_OK) s = st_ctx_graph_launch(c, gr);
            if (s == ST_OK) s = st_ctx_timer_stop(c, &ms);
            gus[r] = ms * 1000;
        }
        st_ctx_graph_destroy(c, gr);
        if (s != ST_OK) break;
        st_timing t;
        st_timing_from_samples(us, rounds, &t);
        char name[96];
        snprintf(name, sizeof name, "%s (%d ops, %d MoE layers)", label, ops, layers);
        if (nt == 1) nt1 = t.median_us;
        const double bytes = (double)st_vmodel_weight_bytes(c, vm, nt);
        emit(e, "step", name, nt, "default", &t, bytes, NULL, nt == 1 ? 0 : nt1);
        if (graphs) {
            st_timing tg;
            st_timing_from_samples(gus, rounds, &tg);
            if (nt == 1) nt1g = tg.median_us;
            emit(e, "step", name, nt, "graph", &tg, bytes, NULL, nt == 1 ? 0 : nt1g);
        }
    }
    st_vmodel_close(c, vm);
    return s;
}

void st_bench_options_init_size(st_bench_options *o, size_t size)
{
    st_bench_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.suite = true;
    d.layers = 48;
    st_struct_init(o, size, &d, sizeof d);
}

void st_bench_result_init_size(st_bench_result *r, size_t size) { st_struct_init_zeros(r, size); }

void st_bench_result_clear(st_bench_result *r)
{
    if (!st_struct_size_of(r)) return;
    if (st_struct_has(r, offsetof(st_bench_result, json) + sizeof r->json)) free(r->json);
    st_struct_zero(r, sizeof *r);
}

/* The options as this build knows them: a caller compiled against an
 * older, smaller st_bench_options gets the defaults for what it lacks. */
static st_status read_options(const st_bench_options *o, st_bench_options *out)
{
    st_bench_options_default(out);
    return st_struct_in(out, sizeof *out, o, "bench: the options");
}

/* The shapes and variants of O, parsed: what was named is checked before
 * the minutes of probes. */
static st_status parse_all(const st_bench_options *o, st_tune_shape *shapes, int (*variant)[2])
{
    if (o->n_shapes < 0 || (o->n_shapes && !o->shapes) || o->n_variants < 0 || (o->n_variants && !o->variants))
        return st_fail(ST_ERR_INVALID_ARG, "bench: shapes or variants missing");
    if (o->n_shapes > ST_BENCH_MAX_SHAPES)
        return st_fail(ST_ERR_INVALID_ARG, "bench: at most %d shapes", ST_BENCH_MAX_SHAPES);
    if (o->n_variants > ST_BENCH_MAX_VARIANTS)
        return st_fail(ST_ERR_INVALID_ARG, "bench: at most %d variants", ST_BENCH_MAX_VARIANTS);
    if (o->n_variants && !o->n_shapes)
        return st_fail(ST_ERR_INVALID_ARG, "variants apply to the shapes given (the suite runs the default chain)");
    if (o->n_ntoks < 0 || o->n_ntoks > ST_MAX_TOKENS)
        return st_fail(ST_ERR_INVALID_ARG, "%d token counts: expected 0..%d of them", o->n_ntoks, ST_MAX_TOKENS);
    if (o->n_ntoks && !o->ntoks) return st_fail(ST_ERR_INVALID_ARG, "%d token counts and no array of them", o->n_ntoks);
    for (int i = 0; i < o->n_ntoks; i++) {
        if (o->ntoks[i] < 1 || o->ntoks[i] > ST_MAX_TOKENS)
            return st_fail(ST_ERR_INVALID_ARG, "token count %d is outside 1..%d", o->ntoks[i], ST_MAX_TOKENS);
        for (int k = 0; k < i; k++)
            if (o->ntoks[k] == o->ntoks[i]) return st_fail(ST_ERR_INVALID_ARG, "token count %d given twice", o->ntoks[i]);
    }
    bool any_mmvq = false;
    for (int i = 0; i < o->n_shapes; i++) {
        if (st_tune_parse_shape(o->shapes[i], 64, 8, &shapes[i]) != ST_OK) return ST_ERR_PARSE; /* its line stays */
        any_mmvq |= shapes[i].kind == ST_SHAPE_MMVQ;
    }
    if (o->n_ntoks && !any_mmvq)
        return st_fail(ST_ERR_INVALID_ARG, "token counts apply to the mmvq shapes given (an expert shape has its own)");
    for (int v = 0; v < o->n_variants; v++) {
        const char *name = o->variants[v];
        const size_t len = strlen(name);
        variant[v][1] = 0;
        const bool pair = memchr(name, '/', len) != NULL;
        const bool ok = pair ? st_expert_variant_parse(name, len, &variant[v][0], &variant[v][1])
                             : st_mmvq_variant_parse(name, len, &variant[v][0]);
        if (!ok) return st_fail(ST_ERR_INVALID_ARG, "'%s' is not a compiled-in variant (tune_decode variants)", name);
        for (int i = 0; i < o->n_shapes; i++) {
            const bool ex = shapes[i].kind == ST_SHAPE_EXPERT;
            if (ex != pair)
                return st_fail(ST_ERR_INVALID_ARG, "'%s': '%s' is %s shape, the variants of it are %s", name, o->shapes[i],
                               ex ? "an expert" : "an mmvq", ex ? "G/D pairs" : "R, mmaW, splitW or wideTxR");
            if (!ex && !st_mmvq_variant_fits(variant[v][0], shapes[i].cols))
                return st_fail(ST_ERR_INVALID_ARG, "%s needs rows of at least %d values (128 streams); '%s' has %d", name,
                               st_mmvq_variant_min_cols(variant[v][0]), o->shapes[i], shapes[i].cols);
        }
    }
    return ST_OK;
}

st_status st_bench_check(const st_bench_options *opt)
{
    st_bench_options o;
    ST_TRY(read_options(opt, &o));
    st_tune_shape shapes[ST_BENCH_MAX_SHAPES];
    int variant[ST_BENCH_MAX_VARIANTS][2];
    return parse_all(&o, shapes, variant);
}

/* The bench suite: by ggml name, a type this build lacks is left out. */
static st_status run_suite(st_ctx *c, bench_env *e)
{
    static const struct {
        const char *t;
        int rows, cols;
    } mm[] = {{"iq3_s", 4096, 14336}, {"iq3_s", 14336, 4096}, {"iq4_xs", 4096, 14336}, {"iq4_xs", 14336, 4096},
              {"iq4_nl", 4096, 14336}, {"iq4_nl", 14336, 4096}, {"q5_K", 4096, 4096},    {"q6_K", 4096, 4096},
              {"q6_K", 16384, 4096}};
    st_status s = ST_OK;
    for (size_t i = 0; i < sizeof mm / sizeof mm[0] && s == ST_OK; i++) {
        const st_qtype t = st_qtype_from_name(mm[i].t);
        if (t == ST_QTYPE_NONE) continue;
        st_tune_shape m = {ST_SHAPE_MMVQ, t, ST_QTYPE_NONE, mm[i].rows, mm[i].cols, 0, 0, 0, 0, 0, {0}, ""};
        s = bench_shape(c, e, &m, DENSE_NTS, (int)ST_ARRAY_LEN(DENSE_NTS), NULL, 0);
    }
    static const char *const gus[] = {"iq3_s", "iq3_xxs", "iq2_s", "iq4_xs", "iq4_nl", "q8_0", "q4_K", "iq2_xxs"};
    for (size_t i = 0; i < sizeof gus / sizeof gus[0] && s == ST_OK; i++) {
        const st_qtype gu = st_qtype_from_name(gus[i]);
        if (gu == ST_QTYPE_NONE) continue;
        st_tune_shape x = {ST_SHAPE_EXPERT, gu, ST_IQ4_NL, 0, 0, 2560, 640, 1, 64, 8, {0}, ""};
        /* the MoE layer of the suite at every count; the other pairs at 1 and 2 */
        s = bench_shape(c, e, &x, MOE_NTS, i == 0 ? (int)ST_ARRAY_LEN(MOE_NTS) : 2, NULL, 0);
    }
    return s;
}

st_status st_bench_run(st_ctx *c, const st_bench_options *opt, st_bench_result *res)
{
    st_bench_options o;
    ST_TRY(read_options(opt, &o));
    if (!c) return st_fail(ST_ERR_INVALID_ARG, "bench: no context");
    ST_TRY(st_struct_ready(res, "bench"));
    st_bench_result_clear(res);
    st_tune_shape parsed[ST_BENCH_MAX_SHAPES];
    int variant[ST_BENCH_MAX_VARIANTS][2];
    ST_TRY(parse_all(&o, parsed, variant));
    const int ns = o.n_shapes, nv = o.n_variants;
    const bool suite = o.suite && ns == 0;
    if (o.model_path) {
        st_model *m = NULL;
        const st_status ms = st_model_open(o.model_path, &m);
        if (ms != ST_OK) {
            char why[4096]; /* st_last_error's own buffer is about to be written */
            snprintf(why, sizeof why, "%s", st_last_error());
            return st_fail(ms, "%s: %s", o.model_path, why);
        }
        st_model_close(m);
    }
    bench_env e = {0, 0, 0, 0, NULL, o.quick, cJSON_CreateArray(), &o};
    if (!e.rows) return st_fail(ST_ERR_NOMEM, "bench: out of memory");
    e.llc = st_ctx_llc(c, &e.llc_source);
    st_status s = ST_OK;
    for (int i = 0; i < ns && s == ST_OK; i++) s = bench_fit(c, &parsed[i]);
    if (s == ST_OK) s = probes(c, &e);
    const st_identity *id = st_ctx_identity(c);
    if (s == ST_OK) {
        say(&e, "device: %s (%s, runtime %s, driver %s); last-level cache %.0f MB (%s); weights rotate over >= %.0f MB",
            id->device_name, id->arch, id->runtime, id->driver, e.llc / 1048576.0, e.llc_source, 4 * e.llc / 1048576.0);
        say(&e, "read bandwidth %.0f GB/s (streaming read, %s); copy %.0f GB/s (read + write); launch overhead %.2f us",
            e.read_gbs, o.quick ? "64 MiB" : "1 GiB", e.copy_gbs, e.launch_us);
        say(&e, "%s", "");
        say(&e, "%-6s %-32s %2s %-9s %9s %6s %8s %7s %7s %6s", "kind", "shape", "nt", "path", "us/call", "spread", "GB/s",
            "%read", "%same", "vs nt1");
    }
    /* the token counts given, in increasing order (1 first: the rows'
     * cost against 1 token) */
    int ntoks[ST_MAX_TOKENS];
    for (int i = 0; i < o.n_ntoks; i++) {
        int k = i;
        for (; k > 0 && ntoks[k - 1] > o.ntoks[i]; k--) ntoks[k] = ntoks[k - 1];
        ntoks[k] = o.ntoks[i];
    }
    for (int i = 0; i < ns && s == ST_OK; i++) {
        const st_tune_shape *sh = &parsed[i];
        const int one[] = {sh->n_tokens};
        const int *nts = o.n_ntoks ? ntoks : DENSE_NTS;
        const int nn = o.n_ntoks ? o.n_ntoks : (int)ST_ARRAY_LEN(DENSE_NTS);
        s = sh->kind == ST_SHAPE_MMVQ ? bench_shape(c, &e, sh, nts, nn, (const int(*)[2])variant, nv)
                                       : bench_shape(c, &e, sh, one, 1, (const int(*)[2])variant, nv);
    }
    if (s == ST_OK && suite) s = run_suite(c, &e);
    /* a model named must be there; the suite's own small model is run only
     * when present (from the source tree) */
    const char *tiny = o.model_path ? o.model_path : (suite ? o.suite_model_path : NULL);
    struct stat tst;
    const bool run_model = o.model_path || (tiny && stat(tiny, &tst) == 0);
    if (s == ST_OK && run_model) {
        st_verify_options vo;
        st_verify_options_default(&vo);
        vo.model_path = tiny;
        s = bench_model(c, &e, &vo, tiny);
    }
    if (s == ST_OK && suite && o.layers > 0) {
        st_verify_options vo;
        st_verify_options_default(&vo);
        const char *shape = "expert iq3_s iq4_nl 2560 640 1";
        vo.shapes = &shape;
        vo.n_shapes = 1;
        vo.n_layers = o.quick ? 2 : o.layers;
        char label[64];
        snprintf(label, sizeof label, "synthetic %d x MoE iq3_s/iq4_nl 2560/640", vo.n_layers);
        s = bench_model(c, &e, &vo, label);
    }
    st_bench_result r;
    st_bench_result_init(&r);
    r.read_gbs = e.read_gbs;
    r.copy_gbs = e.copy_gbs;
    r.launch_us = e.launch_us;
    r.llc = e.llc;
    cJSON *root = cJSON_CreateObject();
    if (root) {
        if (o.command_line) {
            st_json_report_header(root, "bench", id, o.command_line);
        } else {
            cJSON *idj = st_json_identity(id);
            if (idj) cJSON_AddItemToObject(root, "identity", idj);
        }
        cJSON_AddNumberToObject(root, "read_gb_per_s", e.read_gbs);
        cJSON_AddNumberToObject(root, "copy_gb_per_s", e.copy_gbs);
        cJSON_AddNumberToObject(root, "launch_overhead_us", e.launch_us);
        cJSON_AddNumberToObject(root, "llc_bytes", (double)e.llc);
        st_json_add_text(root, "llc_source", e.llc_source);
        cJSON_AddItemToObject(root, "rows", e.rows);
        e.rows = NULL;
        r.json = cJSON_Print(root);
        cJSON_Delete(root);
    }
    cJSON_Delete(e.rows);
    if (s == ST_OK && !r.json) s = st_fail(ST_ERR_NOMEM, "bench: out of memory");
    /* the document goes to the caller when its struct has room for it */
    if (!st_struct_has(res, offsetof(st_bench_result, json) + sizeof r.json)) {
        free(r.json);
        r.json = NULL;
    }
    st_struct_out(res, &r, sizeof r);
    return s;
}
