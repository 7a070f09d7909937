/* The GPU backend's host side (backend.h): device, stream, the workspace,
 * weight upload in the device layout, and the dispatch of iq_mmvq and
 * expert_grouped. Runtime errors become st_status values carrying the
 * runtime's own message.
 *
 * Engine rules kept here: the decode calls only queue kernels on the
 * context's stream (the engine's, when it gave one): every buffer they use
 * was carved from the workspace at creation, the tickets of the fused down
 * kernel were cleared then and are left at zero by the kernel itself, and
 * nothing waits. Every entry makes the context's device current and puts
 * the caller's back (dev_guard). */
#include "common.h"
#include "strata/variants.h"

extern "C" {
#include "backend.h"
#include "devinfo.h"
#include "grids.h"
#include "internal.h"
#include "repack.h"
#include "st_build_info.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr size_t ALIGN = 256;
size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(ALIGN - 1); }

/* The scratch of one decode call, carved from the workspace (sizes for the
 * context's limits; see plan_workspace). */
struct ws_layout {
    size_t xq, xblocks, h, hq, y, tickets, groups, check, packed, partial, total;
};

struct gpu_backend {
    int device = 0;
    st_launch L{};          /* L.stream: where calls queue now (st_ctx_set_stream) */
    st_rt_stream own = nullptr; /* the context's own stream, when it made one */
    st_rt_event ev[2] = {};
    st_rt_event handover = nullptr; /* st_ctx_set_stream: the new stream waits on the old */
    size_t llc = 0;
    void *grids = nullptr;
    uint8_t *ws = nullptr;
    bool own_ws = false;
    ws_layout wl{};
    st_ctx_limits lim{};
    unsigned long long mma_launches = 0; /* L.mma points here */
};

struct graph_t {
    st_rt_graph g;
    st_rt_graph_exec e;
};

st_status rt_fail(st_rt_error e, const char *what)
{
    /* A failed allocation or copy stays the runtime's last error; cleared,
     * so that a later launch's check does not report it as its own (the
     * context stays usable: tests/gpu/gpu_faults_test.c). A sticky error (a
     * fault in a kernel) is not cleared by this: the context is lost then. */
    (void)st_rt_get_last_error();
    return st_fail(ST_ERR_GPU, "%s: %s (%d)", what, st_rt_error_string(e), (int)e);
}

#define RT_TRY(expr, what)                                 \
    do {                                                   \
        st_rt_error e_ = (expr);                           \
        if (e_ != ST_RT_SUCCESS) return rt_fail(e_, what); \
    } while (0)

/* st_gpu_fail_launch_at (backend.h): the launch to fail, counted down */
long g_fail_launch_in = 0;

/* A kernel launch's result, or the injected failure: a launch the runtime
 * refuses, made on stream S in its place. */
st_rt_error launched(st_rt_error e, st_rt_stream s)
{
    if (g_fail_launch_in > 0 && --g_fail_launch_in == 0 && e == ST_RT_SUCCESS) e = st_probe_bad_launch(s);
    return e;
}

/* RT_TRY for a kernel launch queued on stream S. */
#define LAUNCH_TRY(s, expr, what) RT_TRY(launched((expr), (s)), what)

/* Makes DEVICE current for the scope and restores the caller's device. */
struct dev_guard {
    int prev = -1;
    explicit dev_guard(int device)
    {
        int cur = -1;
        if (st_rt_get_device(&cur) == ST_RT_SUCCESS && cur == device) return;
        if (st_rt_set_device(device) == ST_RT_SUCCESS) prev = cur;
    }
    ~dev_guard()
    {
        if (prev >= 0) (void)st_rt_set_device(prev);
    }
};

size_t xplanes_bytes(int64_t k, int n)
{
    const size_t cnt = (size_t)(k / 32) * (size_t)n;
    return cnt * 32 + cnt * 4 + 2 * cnt * 2 + 64;
}

/* mmvq: q8_1 planes (or the legacy 36-byte blocks) of max_tokens vectors of
 * max_cols values. expert_grouped: those for x, then per (token, slot) pair
 * h (n_ff floats), its q8_1 planes, y (n_embd floats), one ticket per row
 * of the fused down, the GROUPED_V1 list or the STRATA_EXPERT_MMA pair
 * table (common.h st_pair_table), and the k-split partials of
 * STRATA_EXPERT_V2K (64 floats per pair and row: reserved only when the knob
 * is active at creation or they take at most 64 MiB, not for nothing in the
 * largest contexts). n_embd and n_ff are each a row count
 * and a row length of some matrix, so both are at most D. */
ws_layout plan_workspace(const st_ctx_limits *l, const st_dispatch_config *cfg)
{
    ws_layout w{};
    const int64_t d = (l->max_rows < l->max_cols ? l->max_rows : l->max_cols) / 32 * 32;
    const size_t np = (size_t)l->max_tokens * (size_t)l->max_topk;
    w.xq = align_up(xplanes_bytes(l->max_cols, st_xtile_tokens(l->max_tokens))); /* tiled: whole tiles */
    w.xblocks = align_up((size_t)(l->max_cols / 32) * 36 * (size_t)l->max_tokens);
    w.h = align_up(sizeof(float) * np * (size_t)d);
    w.hq = align_up(xplanes_bytes(d, (int)np));
    w.y = align_up(sizeof(float) * np * (size_t)d);
    w.tickets = align_up(sizeof(uint32_t) * (size_t)d);
    w.groups = align_up(sizeof(int32_t) * ST_GROUPS_WORDS);
    w.check = align_up(2 * sizeof(unsigned long long)); /* the checking mode's answers (gpu_check_ids) */
    w.packed = align_up((sizeof(int32_t) + sizeof(float)) * np); /* strided ids and weights, packed dense */
    /* the k-split partials: reserved when the knob is set at creation, or
     * when they are small enough not to matter (contexts sized for a model;
     * a knob can also be switched on later with st_ctx_set_dispatch) */
    const size_t partial = align_up(sizeof(float) * 64 * np * (size_t)d);
    w.partial = cfg->active[ST_KNOB_EXPERT_V2K] || partial <= ((size_t)64 << 20) ? partial : 0;
    w.total = w.xq + w.xblocks + w.h + w.hq + w.y + w.tickets + w.groups + w.check + w.packed + w.partial;
    return w;
}

struct ws_ptrs {
    uint8_t *xq, *xblocks, *h, *hq, *y, *tickets, *groups, *check, *packed, *partial;
};

ws_ptrs carve(const gpu_backend *g)
{
    ws_ptrs p;
    uint8_t *at = g->ws;
    p.xq = at;
    at += g->wl.xq;
    p.xblocks = at;
    at += g->wl.xblocks;
    p.h = at;
    at += g->wl.h;
    p.hq = at;
    at += g->wl.hq;
    p.y = at;
    at += g->wl.y;
    p.tickets = at;
    at += g->wl.tickets;
    p.groups = at;
    at += g->wl.groups;
    p.check = at;
    at += g->wl.check;
    p.packed = at;
    at += g->wl.packed;
    p.partial = g->wl.partial ? at : nullptr;
    return p;
}

/* Planar q8_1 of N vectors of K values at BASE. */
st_xplanes xplanes(uint8_t *base, int64_t k, int n)
{
    const size_t nu = (size_t)(k / 32), cnt = nu * (size_t)n;
    const size_t qs = cnt * 32, d = cnt * 4, h = cnt * 2;
    st_xplanes xp;
    xp.qs = (int8_t *)base;
    xp.d = (float *)(base + qs);
    xp.d16 = (uint16_t *)(base + qs + d);
    xp.s16 = (uint16_t *)(base + qs + d + h);
    xp.nu = (int)nu;
    xp.tiled = 0;
    return xp;
}

st_mat_dev mat_dev(const st_bmatrix *m)
{
    st_mat_dev d;
    memset(&d, 0, sizeof d);
    d.rows = m->rows;
    d.nu = (int)(m->cols / 32);
    d.nb = (int)(m->cols / st_qtype_block_values(m->type));
    if (m->in_place) { /* ggml's blocks, rows back to back */
        d.p[0] = (const uint8_t *)m->data;
        d.rb = (int64_t)st_qtype_row_bytes(m->type, m->cols);
        return d;
    }
    size_t off[ST_MAX_PLANES] = {0};
    const int n = st_repack_planes(m->type, m->rows, m->cols, off);
    for (int i = 0; i < n; i++) d.p[i] = (const uint8_t *)m->data + off[i];
    return d;
}

/* F(integral_constant<kernel type number>) for a matrix: its format's,
 * or ST_IN_PLACE + it for the in-place layout (kernels/units.h). */
template <typename F>
st_rt_error by_type(const st_bmatrix *w, F f)
{
    switch (w->type) {
#define ST_BY_TYPE_(id, name, ggml, qk, bytes)                                                         \
    case ST_##id:                                                                                      \
        return w->in_place ? f(std::integral_constant<int, ST_IN_PLACE + ST_##id>()) \
                           : f(std::integral_constant<int, ST_##id>());
        ST_QTYPES(ST_BY_TYPE_)
#undef ST_BY_TYPE_
    default: return ST_RT_INVALID_VALUE;
    }
}

gpu_backend *G(void *b) { return static_cast<gpu_backend *>(b); }

/* ---- the function table ------------------------------------------------ */
void gpu_close(void *b)
{
    gpu_backend *g = G(b);
    if (!g) return;
    dev_guard dg(g->device);
    if (g->L.stream) (void)st_rt_stream_sync(g->L.stream);
    if (g->own && g->own != g->L.stream) (void)st_rt_stream_sync(g->own);
    if (g->own_ws && g->ws) (void)st_rt_free(g->ws);
    if (g->grids) (void)st_rt_free(g->grids);
    for (int i = 0; i < 2; i++)
        if (g->ev[i]) (void)st_rt_event_destroy(g->ev[i]);
    if (g->handover) (void)st_rt_event_destroy(g->handover);
    if (g->own) (void)st_rt_stream_destroy(g->own);
    delete g;
}

void *gpu_stream(void *b) { return (void *)G(b)->L.stream; }

st_status gpu_alloc(void *b, size_t bytes, void **ptr)
{
    dev_guard dg(G(b)->device);
    RT_TRY(st_rt_malloc(ptr, bytes ? bytes : 1), "allocate device memory");
    return ST_OK;
}

void gpu_free(void *b, void *ptr)
{
    dev_guard dg(G(b)->device);
    if (ptr) (void)st_rt_free(ptr);
}

st_status gpu_upload(void *b, void *dst, const void *src, size_t bytes)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    RT_TRY(st_rt_memcpy_htod(dst, src, bytes, g->L.stream), "copy to device");
    RT_TRY(st_rt_stream_sync(g->L.stream), "copy to device");
    return ST_OK;
}

st_status gpu_download(void *b, void *dst, const void *src, size_t bytes)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    RT_TRY(st_rt_memcpy_dtoh(dst, src, bytes, g->L.stream), "copy from device");
    RT_TRY(st_rt_stream_sync(g->L.stream), "copy from device");
    return ST_OK;
}

st_status gpu_sync(void *b)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    RT_TRY(st_rt_stream_sync(g->L.stream), "synchronize");
    return ST_OK;
}

/* Weights from host memory are repacked on the host and uploaded; weights
 * already on the device are repacked there by the same per-block code. */
st_status gpu_matrix_create(void *b, st_qtype t, int64_t rows, int64_t cols, const void *bytes, bool on_device,
                            st_bmatrix *out)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    memset(out, 0, sizeof *out);
    const size_t n = st_repack_size(t, rows, cols);
    if (!n) return st_fail(ST_ERR_INVALID_ARG, "no device layout for %s %lld x %lld", st_qtype_name(t),
                           (long long)rows, (long long)cols);
    void *dev = nullptr;
    RT_TRY(st_rt_malloc(&dev, n), "allocate weights");
    st_status s = ST_OK;
    st_rt_error e = ST_RT_SUCCESS;
    if (on_device) {
        e = st_rt_memset(dev, 0, n, g->L.stream);
        st_repack_io io;
        memset(&io, 0, sizeof io);
        io.to_packed = 1;
        size_t off[ST_MAX_PLANES] = {0};
        const int np = st_repack_planes(t, rows, cols, off);
        for (int i = 0; i < np; i++) io.plane[i] = (uint8_t *)dev + off[i];
        const int64_t nblocks = rows * (cols / st_qtype_block_values(t));
        if (e == ST_RT_SUCCESS)
            e = st_launch_repack(g->L.stream, (int)t, io, bytes, (size_t)st_qtype_block_bytes(t), nblocks, dev);
        if (e == ST_RT_SUCCESS) e = st_rt_stream_sync(g->L.stream);
        if (e != ST_RT_SUCCESS) s = rt_fail(e, "repack weights on the device");
    } else {
        void *host = malloc(n);
        s = host ? st_repack(t, rows, cols, bytes, host) : st_fail(ST_ERR_NOMEM, "repack buffer of %zu bytes", n);
        if (s == ST_OK) {
            e = st_rt_memcpy_htod(dev, host, n, g->L.stream);
            if (e == ST_RT_SUCCESS) e = st_rt_stream_sync(g->L.stream);
            if (e != ST_RT_SUCCESS) s = rt_fail(e, "upload weights");
        }
        free(host);
    }
    if (s != ST_OK) {
        (void)st_rt_free(dev);
        return s;
    }
    *out = st_bmatrix{t, rows, cols, dev, n};
    return ST_OK;
}

void gpu_matrix_free(void *b, st_bmatrix *m)
{
    dev_guard dg(G(b)->device);
    if (m->data) (void)st_rt_free(m->data);
    m->data = nullptr;
}

st_status gpu_mmvq(void *b, const st_bmatrix *w, const float *x, int64_t xs, int nt, float *y, int64_t ys, int rows,
                   const st_dispatch_config *cfg)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    /* spaced output rows: a launch per token (the bytes of a token do not
     * depend on the others in its call: the batch invariance tests) */
    if (ys != w->rows && nt > 1) {
        for (int t = 0; t < nt; t++) ST_TRY(gpu_mmvq(b, w, x + t * xs, xs, 1, y + t * ys, w->rows, rows, cfg));
        return ST_OK;
    }
    const bool legacy = rows == 0 && cfg->active[ST_KNOB_OLD_IQ_MMVQ];
    const bool stage = cfg->active[ST_KNOB_IQ_STAGE_GRID_MMVQ];
    const bool one_row = cfg->active[ST_KNOB_MMVQ_ONE_ROW];
    const bool one_pass = cfg->active[ST_KNOB_MMA_ONE_PASS];
    const ws_ptrs p = carve(g);
    st_xplanes xp;
    memset(&xp, 0, sizeof xp);
    uint8_t *blocks = nullptr;
    if (legacy) {
        blocks = p.xblocks;
    } else {
        const bool tiled = st_mmvq_tiled(w->type, rows, nt, legacy);
        xp = xplanes(p.xq, w->cols, tiled ? st_xtile_tokens(nt) : nt);
        xp.tiled = tiled;
    }
    LAUNCH_TRY(g->L.stream, st_launch_quantize(g->L, x, w->cols, nt, xp, blocks, xs), "q8_1 launch");
    const st_mat_dev m = mat_dev(w);
    st_rt_error e = by_type(w, [&](auto tc) {
        return st_launch_mmvq<decltype(tc)::value>(g->L, m, xp, blocks, nt, y, rows, stage, legacy, one_row, one_pass);
    });
    LAUNCH_TRY(g->L.stream, e, "iq_mmvq launch");
    return ST_OK;
}

/* st_expert_mat's launch for W's type. */
st_rt_error launch_expert_mat(const st_launch &L, const st_bmatrix *w, const st_expert_mat_args &m, bool stage)
{
    return by_type(w, [&](auto tc) { return st_launch_expert_mat<decltype(tc)::value>(L, m, stage); });
}

/* st_expert_ffn beyond the fused kernels, composed of st_expert_mat's
 * launches: q8_1(x), gate into h and up into y ([np][n_ff] each), the
 * combine with the biases into h (in place), q8_1(h), down into y
 * ([np][n_embd]), the top-k sum with the down bias. The same operations in
 * the same order as the CPU reference. */
st_status gpu_ffn_composed(gpu_backend *g, const st_bexperts *ex, const st_ffn_options *o, const float *x,
                           const int32_t *ids, const float *wts, int nt, int topk, float *out,
                           const st_dispatch_config *cfg)
{
    dev_guard dg(g->device);
    const st_launch &L = g->L;
    const ws_ptrs p = carve(g);
    const int np = nt * topk;
    const bool stage = !cfg->active[ST_KNOB_IQ_STAGE_GRID_OFF];
    st_expert_mat_args m;
    memset(&m, 0, sizeof m);
    m.n_expert = ex->n_expert;
    m.nt = nt;
    m.topk = topk;
    m.ids = ids;
    m.ids_stride = o->ids_stride ? o->ids_stride : topk;
    m.x_slots = 1;
    m.x = xplanes(p.xq, ex->n_embd, nt);
    LAUNCH_TRY(L.stream, st_launch_quantize(L, x, ex->n_embd, nt, m.x, nullptr, o->x_stride), "q8_1 launch");
    m.rows = ex->n_ff;
    m.y_slot_stride = ex->n_ff;
    m.y_token_stride = (int64_t)ex->n_ff * topk;
    m.w = mat_dev(ex->gate);
    m.y = (float *)p.h;
    LAUNCH_TRY(L.stream, launch_expert_mat(L, ex->gate, m, stage), "gate launch");
    m.w = mat_dev(ex->up);
    m.y = (float *)p.y;
    LAUNCH_TRY(L.stream, launch_expert_mat(L, ex->up, m, stage), "up launch");
    st_ffn_args f;
    memset(&f, 0, sizeof f);
    f.n_expert = ex->n_expert;
    f.n_embd = ex->n_embd;
    f.n_ff = ex->n_ff;
    f.nt = nt;
    f.topk = topk;
    f.act = (int)o->act;
    f.alpha = o->alpha;
    f.limit = o->limit;
    f.ids = ids;
    f.ids_stride = m.ids_stride;
    f.wts = wts;
    f.wts_stride = o->wts_stride ? o->wts_stride : topk;
    f.gate_bias = o->gate_bias;
    f.up_bias = o->up_bias;
    f.down_bias = o->down_bias;
    f.g = (const float *)p.h;
    f.u = (const float *)p.y;
    f.h = (float *)p.h;
    LAUNCH_TRY(L.stream, st_launch_ffn_combine(L, f), "combine launch");
    m.x_slots = topk;
    m.x = xplanes(p.hq, ex->n_ff, np);
    LAUNCH_TRY(L.stream, st_launch_quantize(L, f.h, ex->n_ff, np, m.x, nullptr), "q8_1 launch");
    m.rows = ex->n_embd;
    m.y_slot_stride = ex->n_embd;
    m.y_token_stride = (int64_t)ex->n_embd * topk;
    m.w = mat_dev(ex->down);
    m.y = (float *)p.y;
    LAUNCH_TRY(L.stream, launch_expert_mat(L, ex->down, m, stage), "down launch");
    f.y = (const float *)p.y;
    f.out = out;
    f.out_stride = o->out_stride ? o->out_stride : ex->n_embd;
    LAUNCH_TRY(L.stream, st_launch_ffn_sum(L, f), "top-k sum launch");
    return ST_OK;
}

/* The token count from which the default expert_grouped chain takes the
 * matrix units for a gate of format GATE and a down of format DOWN under
 * CFG (st_ctx_default_expert_mma_tokens): 1 with the STRATA_EXPERT_MMA
 * knob, never (ST_MAX_TOKENS + 1) with another expert path's knob; with
 * the block decode on both formats (st_mma_block_decode) from
 * STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS, measured on an H100 (2026-12-06,
 * iq3_s/iq4_nl 2560/640, 64 experts, top-8, us, the pairs in expert order
 * -> the matrix units, two runs each: 12 tokens 186 -> 233, 16 267 -> 246,
 * 20 383 -> 268); else from STRATA_EXPERT_DEFAULT_MMA_TOKENS, measured on
 * the H200 with the per-warp decode (16 tokens 266 -> 288, 24 527 -> 318,
 * 32 937 -> 324). */
int default_mma_from(int gate, int down, const st_dispatch_config *cfg)
{
    if (cfg->active[ST_KNOB_EXPERT_V2] || cfg->active[ST_KNOB_EXPERT_V2K] || cfg->active[ST_KNOB_TSUM] ||
        cfg->active[ST_KNOB_GROUPED_V1])
        return ST_MAX_TOKENS + 1;
    if (cfg->active[ST_KNOB_EXPERT_MMA]) return 1;
    return st_mma_block_decode(gate) && st_mma_block_decode(down) ? STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS
                                                                   : STRATA_EXPERT_DEFAULT_MMA_TOKENS;
}

st_status gpu_expert_grouped(void *b, const st_bexperts *ex, const st_ffn_options *o, const float *x, const int32_t *ids,
                             const float *wts, int nt, int topk, float *out, int gu_rows, int down_rows,
                             const st_dispatch_config *cfg)
{
    gpu_backend *g = G(b);
    /* the fused kernels: silu, no bias, dense outputs (x, ids and weights
     * may be strided) */
    const bool fused = o->act == ST_ACT_SILU && !o->gate_bias && !o->up_bias && !o->down_bias &&
                       (!o->out_stride || o->out_stride == ex->n_embd);
    if (!fused) return gpu_ffn_composed(g, ex, o, x, ids, wts, nt, topk, out, cfg);
    const int64_t xs = o->x_stride ? o->x_stride : ex->n_embd;
    dev_guard dg(g->device);
    const int np = nt * topk;
    st_expert_args a;
    memset(&a, 0, sizeof a);
    a.gate = mat_dev(ex->gate);
    a.up = mat_dev(ex->up);
    a.down = mat_dev(ex->down);
    a.n_expert = ex->n_expert;
    a.n_embd = ex->n_embd;
    a.n_ff = ex->n_ff;
    a.nt = nt;
    a.topk = topk;
    a.ids = ids;
    a.wts = wts;
    a.out = out;
    st_expert_plan pl;
    memset(&pl, 0, sizeof pl);
    const bool variant = gu_rows || down_rows;
    pl.gu_rows = gu_rows;
    pl.dn_rows = down_rows;
    pl.gu_t = st_lanes_for_units(ex->n_embd / 32, cfg->active[ST_KNOB_NO_SUB16_GU] ? 16 : 8);
    pl.dn_t = st_lanes_for_units(ex->n_ff / 32, 8);
    pl.stage_grid = !cfg->active[ST_KNOB_IQ_STAGE_GRID_OFF];
    if (!variant) {
        pl.v2 = cfg->active[ST_KNOB_EXPERT_V2];
        pl.v2k = cfg->active[ST_KNOB_EXPERT_V2K];
        pl.tsum = cfg->active[ST_KNOB_TSUM];
        pl.grouped_v1 = cfg->active[ST_KNOB_GROUPED_V1];
        pl.mma = nt >= default_mma_from(ex->gate->type, ex->down->type, cfg);
    } else {
        pl.stage_grid = true;
    }
    pl.fused = !pl.v2 && !pl.v2k && !pl.tsum && !pl.grouped_v1 && !pl.mma;
    const ws_ptrs p = carve(g);
    if (pl.v2k && !p.partial)
        return st_fail(ST_ERR_UNSUPPORTED, "expert_grouped: STRATA_EXPERT_V2K needs k-split scratch this context did not "
                       "reserve (the knob was not set when it was created)");
    /* strided ids or weights (llama.cpp's top-k is a view of the whole
     * argsort: its token rows are n_expert apart) are packed dense into the
     * scratch first, by a 2D copy on the stream each (graph-capturable; one
     * token's row is dense as it is); after every refusal, so a refused call
     * queues nothing */
    {
        const ws_ptrs q = carve(g);
        int32_t *pid = (int32_t *)q.packed;
        float *pw = (float *)(q.packed + sizeof(int32_t) * (size_t)g->lim.max_tokens * (size_t)g->lim.max_topk);
        const size_t row = (size_t)topk;
        if (o->ids_stride && o->ids_stride != topk && nt > 1) {
            RT_TRY(st_rt_memcpy2d_dtod(pid, row * sizeof(int32_t), ids, (size_t)o->ids_stride * sizeof(int32_t),
                                       row * sizeof(int32_t), (size_t)nt, g->L.stream),
                   "pack the ids");
            a.ids = pid;
        }
        if (o->wts_stride && o->wts_stride != topk && nt > 1) {
            RT_TRY(st_rt_memcpy2d_dtod(pw, row * sizeof(float), wts, (size_t)o->wts_stride * sizeof(float),
                                       row * sizeof(float), (size_t)nt, g->L.stream),
                   "pack the weights");
            a.wts = pw;
        }
    }
    a.xq = xplanes(p.xq, ex->n_embd, nt);
    a.h = (float *)p.h;
    a.hq = xplanes(p.hq, ex->n_ff, np);
    a.y = (float *)p.y;
    a.tickets = (uint32_t *)p.tickets;
    a.groups = (int32_t *)p.groups;
    a.partial = (float *)p.partial;
    /* pairs per block: one for a few pairs (widest grid), more when there
     * are many, so blocks are not dominated by their set-up */
    a.ppb = np <= 8 ? 1 : np <= 16 ? 2 : 4;
    const st_launch &L = g->L;
    LAUNCH_TRY(L.stream, st_launch_quantize(L, x, ex->n_embd, nt, a.xq, nullptr, xs), "q8_1 launch");
    if (pl.grouped_v1) LAUNCH_TRY(L.stream, st_launch_group_v1(L, a), "grouping launch");
    if (pl.mma) LAUNCH_TRY(L.stream, st_launch_expert_pairs(L, a), "pair grouping launch");
    st_rt_error e = by_type(ex->gate, [&](auto tc) { return st_launch_gate_up<decltype(tc)::value>(L, a, pl); });
    LAUNCH_TRY(L.stream, e, "gate-up launch");
    if (pl.v2k) LAUNCH_TRY(L.stream, st_launch_combine_v2k(L, a), "k-split combine launch");
    LAUNCH_TRY(L.stream, st_launch_quantize(L, a.h, ex->n_ff, np, a.hq, nullptr, 0, a.ids, ex->n_expert), "q8_1 launch");
    e = by_type(ex->down, [&](auto tc) { return st_launch_down<decltype(tc)::value>(L, a, pl); });
    LAUNCH_TRY(L.stream, e, "down launch");
    if (pl.tsum || pl.mma) LAUNCH_TRY(L.stream, st_launch_topk_sum(L, a), "top-k sum launch");
    return ST_OK;
}

st_status gpu_timer_start(void *b)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    RT_TRY(st_rt_event_record(g->ev[0], g->L.stream), "record event");
    return ST_OK;
}

st_status gpu_timer_stop(void *b, double *ms)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    RT_TRY(st_rt_event_record(g->ev[1], g->L.stream), "record event");
    RT_TRY(st_rt_event_sync(g->ev[1]), "wait for event");
    float f = 0;
    RT_TRY(st_rt_event_elapsed(&f, g->ev[0], g->ev[1]), "event time");
    *ms = f;
    return ST_OK;
}

st_status gpu_mem_info(void *b, size_t *free_bytes, size_t *total_bytes)
{
    dev_guard dg(G(b)->device);
    RT_TRY(st_rt_mem_info(free_bytes, total_bytes), "device memory info");
    return ST_OK;
}

size_t gpu_llc_bytes(void *b) { return G(b)->llc; }

uint64_t gpu_mma_launches(void *b) { return G(b)->mma_launches; }

int gpu_expert_mma_from(void *b, int gate, int down, const st_dispatch_config *cfg)
{
    (void)b;
    return default_mma_from(gate, down, cfg);
}

void gpu_default_expert_equiv(void *b, int n_embd, int n_ff, const st_dispatch_config *cfg, int *gu, int *dn)
{
    *gu = *dn = 0;
    if (st_dispatch_config_first_active(cfg) >= 0) return;
    if (st_lanes_for_units(n_embd / 32, 8) == 32 && st_lanes_for_units(n_ff / 32, 8) == 32) *gu = *dn = 4;
}

} // namespace

namespace {

st_status gpu_probe_loads(void *b, const st_bmatrix *w, float *sink)
{
    if (w->in_place)
        return st_fail(ST_ERR_UNSUPPORTED, "the loads-only probe reads the row-planar layout, not an in-place matrix");
    dev_guard dg(G(b)->device);
    RT_TRY(st_probe_loads_launch(G(b)->L.stream, (int)w->type, mat_dev(w), sink), "loads-only probe launch");
    return ST_OK;
}

st_status gpu_probe_read(void *b, const void *src, size_t bytes, float *sink)
{
    dev_guard dg(G(b)->device);
    RT_TRY(st_probe_read_launch(G(b)->L.stream, src, bytes, sink), "read probe launch");
    return ST_OK;
}

st_status gpu_probe_copy(void *b, void *dst, const void *src, size_t bytes)
{
    dev_guard dg(G(b)->device);
    RT_TRY(st_rt_memcpy_dtod(dst, src, bytes, G(b)->L.stream), "copy probe");
    return ST_OK;
}

st_status gpu_probe_empty(void *b)
{
    dev_guard dg(G(b)->device);
    RT_TRY(st_probe_empty_launch(G(b)->L.stream), "empty launch");
    return ST_OK;
}

st_status gpu_capture_begin(void *b)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    RT_TRY(st_rt_begin_capture(g->L.stream), "begin stream capture");
    return ST_OK;
}

st_status gpu_capture_end(void *b, void **out)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    *out = nullptr;
    graph_t *gr = new (std::nothrow) graph_t{};
    if (!gr) return st_fail(ST_ERR_NOMEM, "graph");
    st_rt_error e = st_rt_end_capture(g->L.stream, &gr->g);
    if (e == ST_RT_SUCCESS) e = st_rt_graph_instantiate(&gr->e, gr->g);
    if (e != ST_RT_SUCCESS) {
        if (gr->g) (void)st_rt_graph_destroy(gr->g);
        delete gr;
        return rt_fail(e, "end stream capture and instantiate the graph");
    }
    *out = gr;
    return ST_OK;
}

st_status gpu_graph_launch(void *b, void *graph)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    RT_TRY(st_rt_graph_launch(static_cast<graph_t *>(graph)->e, g->L.stream), "graph launch");
    return ST_OK;
}

void gpu_graph_destroy(void *b, void *graph)
{
    dev_guard dg(G(b)->device);
    graph_t *gr = static_cast<graph_t *>(graph);
    (void)st_rt_graph_exec_destroy(gr->e);
    (void)st_rt_graph_destroy(gr->g);
    delete gr;
}

st_status gpu_check_ptr(void *b, const void *p, const char *call, const char *arg)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    int dev = -1;
    const int kind = st_rt_pointer_kind(p, &dev);
    if (kind == 2 || (kind == 1 && dev == g->device)) return ST_OK;
    if (kind == 1)
        return st_fail(ST_ERR_INVALID_ARG, "%s: %s is memory of device %d, this context runs on device %d (STRATA_CHECK)",
                       call, arg, dev, g->device);
    return st_fail(ST_ERR_INVALID_ARG, "%s: %s is host memory, not memory of device %d (STRATA_CHECK): upload it with "
                   "st_ctx_upload into st_ctx_alloc'd memory", call, arg, g->device);
}

/* The ids range-checked by a kernel (kernels/check.hip) into the
 * workspace's two answer words: [0] for an uncaptured call, [1] for calls
 * captured into a graph (what a replay finds waits there for the next
 * uncaptured check). Only the 16 bytes come back. */
st_status gpu_check_ids(void *b, const int32_t *ids, int64_t stride, int nt, int topk, int n_expert, bool captured,
                        st_bad_id *bad)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    memset(bad, 0, sizeof *bad);
    unsigned long long *ans = (unsigned long long *)carve(g).check;
    LAUNCH_TRY(g->L.stream, st_launch_check_ids(g->L, ids, stride, nt, topk, n_expert, ans + (captured ? 1 : 0)),
               "ids check launch");
    if (captured) return ST_OK;
    unsigned long long h[2] = {ST_BAD_ID_NONE, ST_BAD_ID_NONE};
    RT_TRY(st_rt_memcpy_dtoh(h, ans, sizeof h, g->L.stream), "copy the ids check");
    RT_TRY(st_rt_stream_sync(g->L.stream), "wait for the ids check");
    const int which = h[0] != ST_BAD_ID_NONE ? 0 : h[1] != ST_BAD_ID_NONE ? 1 : -1;
    if (which < 0) return ST_OK;
    RT_TRY(st_rt_memset(ans, 0xff, sizeof h, g->L.stream), "clear the ids check");
    const unsigned long long k = h[which];
    *bad = st_bad_id{true, which == 1, (int)(k >> 44), (int)((k >> 32) & 0xfff), (int32_t)(uint32_t)k};
    return ST_OK;
}

bool gpu_capturing(void *b)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    return st_rt_stream_capturing(g->L.stream);
}

/* The vectors N0.. of planes XP (a view: the quantize kernel writes vector
 * v at v * nu units). */
st_xplanes xplanes_from(const st_xplanes &xp, int n0)
{
    st_xplanes v = xp;
    const size_t u = (size_t)n0 * (size_t)xp.nu;
    v.qs += u * 32;
    v.d += u;
    v.d16 += u;
    v.s16 += u;
    return v;
}

/* st_expert_mat: the activations to q8_1 (a vector per token when every
 * slot reads the token's, else per pair: the scratch of x, or of h, which
 * ctx.c's limits size for them), then one launch. */
st_status gpu_expert_mat(void *b, const st_bmatrix *w, int n_expert, const float *x, int x_slots, int64_t xss,
                         int64_t xts, const int32_t *ids, int64_t ids_stride, int nt, int topk, float *y, int64_t yss,
                         int64_t yts, const st_dispatch_config *cfg)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    const ws_ptrs p = carve(g);
    const int64_t k = w->cols;
    st_expert_mat_args m;
    memset(&m, 0, sizeof m);
    m.w = mat_dev(w);
    m.n_expert = n_expert;
    m.rows = (int)(w->rows / n_expert);
    m.nt = nt;
    m.topk = topk;
    m.x_slots = x_slots;
    m.ids = ids;
    m.ids_stride = ids_stride;
    m.y = y;
    m.y_slot_stride = yss;
    m.y_token_stride = yts;
    if (x_slots == 1) {
        m.x = xplanes(p.xq, k, nt);
        LAUNCH_TRY(g->L.stream, st_launch_quantize(g->L, x, k, nt, m.x, nullptr, xts), "q8_1 launch");
    } else {
        m.x = xplanes(p.hq, k, nt * topk);
        if (xts == xss * topk) {
            LAUNCH_TRY(g->L.stream, st_launch_quantize(g->L, x, k, nt * topk, m.x, nullptr, xss), "q8_1 launch");
        } else {
            for (int t = 0; t < nt; t++)
                LAUNCH_TRY(g->L.stream,
                           st_launch_quantize(g->L, x + t * xts, k, topk, xplanes_from(m.x, t * topk), nullptr, xss),
                           "q8_1 launch");
        }
    }
    const bool stage = !cfg->active[ST_KNOB_IQ_STAGE_GRID_OFF];
    LAUNCH_TRY(g->L.stream, launch_expert_mat(g->L, w, m, stage), "expert_mat launch");
    return ST_OK;
}

st_status gpu_set_stream(void *b, void *stream)
{
    gpu_backend *g = G(b);
    dev_guard dg(g->device);
    if (st_rt_stream_capturing(g->L.stream))
        return st_fail(ST_ERR_INVALID_ARG, "st_ctx_set_stream: the context's stream is being captured (end the capture "
                       "first)");
    if (!stream && !g->own) RT_TRY(st_rt_stream_create(&g->own), "create stream");
    const st_rt_stream next = stream ? (st_rt_stream)stream : g->own;
    if (next != g->L.stream) {
        /* the context has one scratch area: the new stream's first call
         * must not overwrite it while a call queued on the old one still
         * reads it, so the new stream waits (on the device) for the old
         * stream's work so far; the host does not wait */
        if (!g->handover) RT_TRY(st_rt_event_create(&g->handover), "create event");
        RT_TRY(st_rt_event_record(g->handover, g->L.stream), "record event");
        RT_TRY(st_rt_stream_wait_event(next, g->handover), "order the new stream after the old");
    }
    g->L.stream = next;
    return ST_OK;
}

const st_backend_ops GPU_OPS = {
    gpu_close,        gpu_stream,         gpu_alloc,         gpu_free,
    gpu_upload,       gpu_download,       gpu_sync,          gpu_matrix_create,
    gpu_matrix_free,  gpu_mmvq,           gpu_expert_grouped, gpu_timer_start,
    gpu_timer_stop,   gpu_mem_info,       gpu_llc_bytes,     gpu_default_expert_equiv,
    gpu_probe_read,   gpu_probe_copy,     gpu_probe_empty,   gpu_probe_loads,
    gpu_capture_begin, gpu_capture_end,   gpu_graph_launch,  gpu_graph_destroy,
    gpu_check_ptr,    gpu_capturing,
    gpu_set_stream,   gpu_check_ids,    gpu_expert_mat,   gpu_expert_mma_from,
    gpu_mma_launches,
};

st_status open_device(int device, st_identity *id)
{
    int n = 0;
    st_rt_error e = st_rt_get_device_count(&n);
    if (e != ST_RT_SUCCESS || n == 0) {
        (void)st_rt_get_last_error();
        return st_fail(ST_ERR_NO_DEVICE, "no GPU device: %s", e != ST_RT_SUCCESS ? st_rt_error_string(e) : "none found");
    }
    if (device < 0 || device >= n) return st_fail(ST_ERR_NO_DEVICE, "GPU %d does not exist (%d found)", device, n);
    char arch[ST_TOKEN_MAX], name[128];
    RT_TRY(st_rt_device_info(device, arch, sizeof arch, name, sizeof name), "device properties");
    int rt = 0, drv = 0;
    RT_TRY(st_rt_runtime_version(&rt), "runtime version");
    RT_TRY(st_rt_driver_version(&drv), "driver version");
    memset(id, 0, sizeof *id);
    snprintf(id->arch, sizeof id->arch, "%s", arch);
    snprintf(id->runtime, sizeof id->runtime, "%d", rt);
    snprintf(id->compiler, sizeof id->compiler, "%s", ST_GPU_COMPILER_HASH);
    id->space = STRATA_SELECTION_SPACE;
    snprintf(id->device_name, sizeof id->device_name, "%s", name);
    snprintf(id->driver, sizeof id->driver, "%d", drv);
    id->compute_units = st_rt_compute_units(device);
    st_identity_set_model(id);
    return ST_OK;
}

st_status setup(gpu_backend *g, const st_ctx_params *p, const st_dispatch_config *cfg)
{
    if (p->stream) {
        g->L.stream = (st_rt_stream)p->stream;
    } else {
        RT_TRY(st_rt_stream_create(&g->own), "create stream");
        g->L.stream = g->own;
    }
    RT_TRY(st_rt_event_create(&g->ev[0]), "create events");
    RT_TRY(st_rt_event_create(&g->ev[1]), "create events");
    g->L.dependent = st_rt_dependent_launch(g->device) && st_quantize_takes_dependents();
    g->L.mma = &g->mma_launches;
    /* the tables of ST_DEVICE_GRIDS back to back, each 16-byte aligned */
    size_t gb = 0;
#define ST_GRID_SIZE_(name, type, table) gb = st_align16(gb) + sizeof(table);
    ST_DEVICE_GRIDS(ST_GRID_SIZE_)
#undef ST_GRID_SIZE_
    RT_TRY(st_rt_malloc(&g->grids, gb), "allocate grids");
    uint8_t *host = (uint8_t *)calloc(1, gb);
    if (!host) return st_fail(ST_ERR_NOMEM, "GPU lookup tables");
    size_t off = 0;
#define ST_GRID_COPY_(name, type, table)                               \
    off = st_align16(off);                                             \
    memcpy(host + off, table, sizeof(table));                          \
    g->L.grids.name = (const type *)((const uint8_t *)g->grids + off); \
    off += sizeof(table);
    ST_DEVICE_GRIDS(ST_GRID_COPY_)
#undef ST_GRID_COPY_
    st_rt_error e = st_rt_memcpy_htod(g->grids, host, gb, g->L.stream);
    if (e == ST_RT_SUCCESS) e = st_rt_stream_sync(g->L.stream);
    free(host);
    RT_TRY(e, "upload grids");
    g->llc = st_rt_l2_bytes(g->device);
    g->wl = plan_workspace(&g->lim, cfg);
    if (p->workspace) {
        if (p->workspace_bytes < g->wl.total || ((uintptr_t)p->workspace & (ALIGN - 1)))
            return st_fail(ST_ERR_INVALID_ARG, "st_ctx_params: the workspace has %zu bytes at %p, this context needs %zu, "
                           "256-byte aligned (st_ctx_workspace_bytes)", p->workspace_bytes, p->workspace, g->wl.total);
        g->ws = (uint8_t *)p->workspace;
    } else {
        void *ws = nullptr;
        RT_TRY(st_rt_malloc(&ws, g->wl.total), "allocate the workspace");
        g->ws = (uint8_t *)ws;
        g->own_ws = true;
    }
    /* the fused down's tickets start at zero; the kernel leaves them so */
    const ws_ptrs wp = carve(g);
    RT_TRY(st_rt_memset(wp.tickets, 0, g->wl.tickets, g->L.stream), "clear the workspace");
    RT_TRY(st_rt_memset(wp.check, 0xff, g->wl.check, g->L.stream), "clear the workspace"); /* ST_BAD_ID_NONE */
    RT_TRY(st_rt_stream_sync(g->L.stream), "clear the workspace");
    return ST_OK;
}

} // namespace

extern "C" void st_gpu_fail_launch_at(long n) { g_fail_launch_in = n > 0 ? n : 0; }

extern "C" size_t st_gpu_workspace_bytes(const st_ctx_limits *lim, const st_dispatch_config *cfg)
{
    return plan_workspace(lim, cfg).total;
}

extern "C" size_t st_gpu_layout_bytes(st_qtype t, int64_t rows, int64_t cols) { return st_repack_size(t, rows, cols); }

extern "C" int st_gpu_device_count(void)
{
    int n = 0;
    if (st_rt_get_device_count(&n) != ST_RT_SUCCESS) {
        (void)st_rt_get_last_error(); /* "no device" is an answer here, not a sticky error */
        return 0;
    }
    return n;
}

extern "C" st_status st_gpu_backend_open(const st_ctx_params *p, const st_ctx_limits *lim, const st_dispatch_config *cfg,
                                         const st_backend_ops **ops, void **out, st_identity *id)
{
    *out = nullptr;
    ST_TRY(open_device(p->device, id));
    if (!st_arch_built_for(id->arch, ST_GPU_ARCHS)) {
        /* refused before anything is launched; the auto backend then uses the CPU */
        char line[512];
        st_arch_refusal(line, sizeof line, p->device, id->arch, id->device_name, ST_GPU_ARCHS, ST_GPU_BACKEND_NAME);
        return st_fail(ST_ERR_UNSUPPORTED, "%s", line);
    }
    dev_guard dg(p->device);
    gpu_backend *g = new (std::nothrow) gpu_backend();
    if (!g) return st_fail(ST_ERR_NOMEM, "GPU context");
    g->device = p->device;
    g->lim = *lim;
    st_status s = setup(g, p, cfg);
    if (s != ST_OK) {
        gpu_close(g);
        return s;
    }
    *ops = &GPU_OPS;
    *out = g;
    return ST_OK;
}
