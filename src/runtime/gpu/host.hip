/* The GPU backend's host side (src/gpu.h): device, memory, weight upload in
 * the device layout, and the dispatch of iq_mmvq and expert_grouped. Runtime
 * errors become st_status values carrying the runtime's own message. */
#include "common.h"
#include "strata/variants.h"

extern "C" {
#include "gpu.h"
#include "grids.h"
#include "internal.h"
#include "repack.h"
#include "st_build_info.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_gpu_buf {
    void *p = nullptr;
    size_t n = 0;
};

struct st_gpu {
    int device;
    st_launch L;
    st_rt_event ev[2];
    size_t llc;
    void *grids;
    st_gpu_buf xq, xblocks, h, hq, y, partial, groups, tickets;
};

static st_status rt_fail(st_rt_error e, const char *what)
{
    return st_fail(ST_ERR_GPU, "%s: %s (%d)", what, st_rt_error_string(e), (int)e);
}

#define RT_TRY(expr, what)                              \
    do {                                                \
        st_rt_error e_ = (expr);                        \
        if (e_ != ST_RT_SUCCESS) return rt_fail(e_, what); \
    } while (0)

static st_status ensure(st_gpu_buf &b, size_t n, const char *what)
{
    if (b.n >= n) return ST_OK;
    if (b.p) (void)st_rt_free(b.p);
    b.p = nullptr;
    b.n = 0;
    RT_TRY(st_rt_malloc(&b.p, n), what);
    b.n = n;
    return ST_OK;
}

extern "C" st_status st_gpu_open(int device, st_gpu **out, st_identity *id)
{
    *out = nullptr;
    int n = 0;
    st_rt_error e = st_rt_get_device_count(&n);
    if (e != ST_RT_SUCCESS || n == 0) {
        (void)st_rt_get_last_error();
        return st_fail(ST_ERR_NO_DEVICE, "no GPU device: %s", e != ST_RT_SUCCESS ? st_rt_error_string(e) : "none found");
    }
    if (device < 0 || device >= n) return st_fail(ST_ERR_NO_DEVICE, "GPU %d does not exist (%d found)", device, n);
    RT_TRY(st_rt_set_device(device), "set device");
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

    st_gpu *g = new (std::nothrow) st_gpu();
    if (!g) return st_fail(ST_ERR_NOMEM, "GPU context");
    g->device = device;
    st_rt_error se = st_rt_stream_create(&g->L.stream);
    if (se != ST_RT_SUCCESS) {
        delete g;
        return rt_fail(se, "create stream");
    }
    const size_t gb = sizeof(uint32_t) * (512 + 256) + sizeof(uint64_t) * 1024;
    se = st_rt_malloc(&g->grids, gb);
    if (se == ST_RT_SUCCESS) {
        uint8_t *host = (uint8_t *)malloc(gb);
        memcpy(host, st_iq2s_grid, sizeof(uint64_t) * 1024);
        memcpy(host + 8192, st_iq3s_grid, sizeof(uint32_t) * 512);
        memcpy(host + 8192 + 2048, st_iq3xxs_grid, sizeof(uint32_t) * 256);
        se = st_rt_memcpy_htod(g->grids, host, gb, g->L.stream);
        if (se == ST_RT_SUCCESS) se = st_rt_stream_sync(g->L.stream);
        free(host);
    }
    if (se != ST_RT_SUCCESS) {
        st_gpu_close(g);
        return rt_fail(se, "upload grids");
    }
    if ((se = st_rt_event_create(&g->ev[0])) != ST_RT_SUCCESS || (se = st_rt_event_create(&g->ev[1])) != ST_RT_SUCCESS) {
        st_gpu_close(g);
        return rt_fail(se, "create events");
    }
    g->llc = st_rt_l2_bytes(device);
    g->L.grids.iq2s = (const uint2 *)g->grids;
    g->L.grids.iq3s = (const uint32_t *)((uint8_t *)g->grids + 8192);
    g->L.grids.iq3xxs = (const uint32_t *)((uint8_t *)g->grids + 8192 + 2048);
    *out = g;
    return ST_OK;
}

extern "C" void st_gpu_close(st_gpu *g)
{
    if (!g) return;
    st_gpu_buf *bufs[] = {&g->xq, &g->xblocks, &g->h, &g->hq, &g->y, &g->partial, &g->groups, &g->tickets};
    for (st_gpu_buf *b : bufs)
        if (b->p) (void)st_rt_free(b->p);
    if (g->grids) (void)st_rt_free(g->grids);
    for (int i = 0; i < 2; i++)
        if (g->ev[i]) (void)st_rt_event_destroy(g->ev[i]);
    if (g->L.stream) (void)st_rt_stream_destroy(g->L.stream);
    delete g;
}

extern "C" st_status st_gpu_alloc(st_gpu *g, size_t bytes, void **ptr)
{
    RT_TRY(st_rt_malloc(ptr, bytes ? bytes : 1), "allocate device memory");
    return ST_OK;
}

extern "C" void st_gpu_free(st_gpu *g, void *ptr)
{
    if (ptr) (void)st_rt_free(ptr);
}

extern "C" st_status st_gpu_upload(st_gpu *g, void *dst, const void *src, size_t bytes)
{
    RT_TRY(st_rt_memcpy_htod(dst, src, bytes, g->L.stream), "copy to device");
    RT_TRY(st_rt_stream_sync(g->L.stream), "copy to device");
    return ST_OK;
}

extern "C" st_status st_gpu_download(st_gpu *g, void *dst, const void *src, size_t bytes)
{
    RT_TRY(st_rt_memcpy_dtoh(dst, src, bytes, g->L.stream), "copy from device");
    RT_TRY(st_rt_stream_sync(g->L.stream), "copy from device");
    return ST_OK;
}

extern "C" st_status st_gpu_sync(st_gpu *g)
{
    RT_TRY(st_rt_stream_sync(g->L.stream), "synchronize");
    return ST_OK;
}

extern "C" st_status st_gpu_matrix_upload(st_gpu *g, st_qtype t, int64_t rows, int64_t cols,
                                          const void *ggml_bytes, st_gpu_matrix *out)
{
    memset(out, 0, sizeof *out);
    const size_t n = st_repack_size(t, rows, cols);
    if (!n) return st_fail(ST_ERR_INVALID_ARG, "no device layout for %s %lld x %lld", st_qtype_name(t),
                           (long long)rows, (long long)cols);
    void *host = malloc(n);
    if (!host) return st_fail(ST_ERR_NOMEM, "repack buffer of %zu bytes", n);
    st_status s = st_repack(t, rows, cols, ggml_bytes, host);
    void *dev = nullptr;
    if (s == ST_OK) {
        st_rt_error e = st_rt_malloc(&dev, n);
        if (e == ST_RT_SUCCESS) e = st_rt_memcpy_htod(dev, host, n, g->L.stream);
        if (e == ST_RT_SUCCESS) e = st_rt_stream_sync(g->L.stream);
        if (e != ST_RT_SUCCESS) {
            if (dev) (void)st_rt_free(dev);
            dev = nullptr;
            s = rt_fail(e, "upload weights");
        }
    }
    free(host);
    if (s != ST_OK) return s;
    out->type = t;
    out->rows = rows;
    out->cols = cols;
    out->data = dev;
    out->bytes = n;
    return ST_OK;
}

extern "C" void st_gpu_matrix_free(st_gpu *g, st_gpu_matrix *m)
{
    if (m->data) (void)st_rt_free(m->data);
    m->data = nullptr;
}

static st_mat_dev mat_dev(const st_gpu_matrix *m)
{
    st_mat_dev d;
    memset(&d, 0, sizeof d);
    size_t off[ST_MAX_PLANES] = {0};
    const int n = st_repack_planes(m->type, m->rows, m->cols, off);
    for (int i = 0; i < n; i++) d.p[i] = (const uint8_t *)m->data + off[i];
    d.rows = m->rows;
    d.nu = (int)(m->cols / 32);
    d.nb = (int)(m->cols / st_qtype_block_values(m->type));
    return d;
}

/* Planar q8_1 scratch for N vectors of K values inside buffer B. */
static st_status xplanes(st_gpu_buf &b, int64_t k, int n, st_xplanes *xp, const char *what)
{
    const size_t nu = (size_t)(k / 32), cnt = nu * (size_t)n;
    const size_t qs = cnt * 32, d = cnt * 4, h = cnt * 2;
    ST_TRY(ensure(b, qs + d + 2 * h + 64, what));
    uint8_t *base = (uint8_t *)b.p;
    xp->qs = (int8_t *)base;
    xp->d = (float *)(base + qs);
    xp->d16 = (uint16_t *)(base + qs + d);
    xp->s16 = (uint16_t *)(base + qs + d + h);
    xp->nu = (int)nu;
    return ST_OK;
}

template <typename F>
static st_rt_error by_type(st_qtype t, F f)
{
    switch (t) {
    case ST_Q8_0: return f(std::integral_constant<int, T_Q8_0>());
    case ST_Q4_K: return f(std::integral_constant<int, T_Q4_K>());
    case ST_IQ3_XXS: return f(std::integral_constant<int, T_IQ3_XXS>());
    case ST_IQ4_NL: return f(std::integral_constant<int, T_IQ4_NL>());
    case ST_IQ3_S: return f(std::integral_constant<int, T_IQ3_S>());
    case ST_IQ2_S: return f(std::integral_constant<int, T_IQ2_S>());
    case ST_IQ4_XS: return f(std::integral_constant<int, T_IQ4_XS>());
    default: return ST_RT_INVALID_VALUE;
    }
}

extern "C" st_status st_gpu_mmvq(st_gpu *g, const st_gpu_matrix *w, const float *x, int nt, float *y, int rows,
                                 const st_dispatch_config *cfg)
{
    const bool legacy = rows == 0 && cfg->active[ST_KNOB_OLD_IQ_MMVQ];
    const bool stage = cfg->active[ST_KNOB_IQ_STAGE_GRID_MMVQ];
    st_xplanes xp;
    memset(&xp, 0, sizeof xp);
    uint8_t *blocks = nullptr;
    if (legacy) {
        ST_TRY(ensure(g->xblocks, (size_t)(w->cols / 32) * 36 * (size_t)nt, "activation scratch"));
        blocks = (uint8_t *)g->xblocks.p;
    } else {
        ST_TRY(xplanes(g->xq, w->cols, nt, &xp, "activation scratch"));
    }
    RT_TRY(st_launch_quantize(g->L, x, w->cols, nt, xp, blocks), "q8_1 launch");
    const st_mat_dev m = mat_dev(w);
    st_rt_error e = by_type(w->type, [&](auto tc) {
        return st_launch_mmvq<decltype(tc)::value>(g->L, m, xp, blocks, nt, y, rows, stage, legacy);
    });
    RT_TRY(e, "iq_mmvq launch");
    return ST_OK;
}

extern "C" st_status st_gpu_expert_grouped(st_gpu *g, const st_gpu_experts *ex, const float *x, const int32_t *ids,
                                           const float *wts, int nt, int topk, float *out, int gu_rows, int down_rows,
                                           const st_dispatch_config *cfg)
{
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
    st_expert_plan p;
    memset(&p, 0, sizeof p);
    const bool variant = gu_rows || down_rows;
    p.gu_rows = gu_rows;
    p.dn_rows = down_rows;
    p.gu_t = st_lanes_for_units(ex->n_embd / 32, cfg->active[ST_KNOB_NO_SUB16_GU] ? 16 : 8);
    p.dn_t = st_lanes_for_units(ex->n_ff / 32, 8);
    p.stage_grid = !cfg->active[ST_KNOB_IQ_STAGE_GRID_OFF];
    if (!variant) {
        p.v2 = cfg->active[ST_KNOB_EXPERT_V2];
        p.v2k = cfg->active[ST_KNOB_EXPERT_V2K];
        p.tsum = cfg->active[ST_KNOB_TSUM];
        p.grouped_v1 = cfg->active[ST_KNOB_GROUPED_V1];
    } else {
        p.stage_grid = true;
    }
    p.fused = !p.v2 && !p.v2k && !p.tsum && !p.grouped_v1;
    ST_TRY(xplanes(g->xq, ex->n_embd, nt, &a.xq, "activation scratch"));
    ST_TRY(ensure(g->h, sizeof(float) * (size_t)np * (size_t)ex->n_ff, "expert scratch"));
    a.h = (float *)g->h.p;
    ST_TRY(xplanes(g->hq, ex->n_ff, np, &a.hq, "expert scratch"));
    if (p.tsum || p.fused) {
        ST_TRY(ensure(g->y, sizeof(float) * (size_t)np * (size_t)ex->n_embd, "expert scratch"));
        a.y = (float *)g->y.p;
    }
    if (p.fused) {
        const size_t tb = sizeof(uint32_t) * (size_t)ex->n_embd;
        if (g->tickets.n < tb) {
            ST_TRY(ensure(g->tickets, tb, "expert scratch"));
            RT_TRY(st_rt_memset(g->tickets.p, 0, tb, g->L.stream), "clear tickets");
        }
        a.tickets = (uint32_t *)g->tickets.p;
    }
    /* pairs per block: one for a few pairs (widest grid), more when there
     * are many, so blocks are not dominated by their set-up */
    a.ppb = np <= 8 ? 1 : np <= 16 ? 2 : 4;
    if (p.v2k) {
        ST_TRY(ensure(g->partial, sizeof(float) * 64 * (size_t)np * (size_t)ex->n_ff, "expert scratch"));
        a.partial = (float *)g->partial.p;
    }
    if (p.grouped_v1) {
        ST_TRY(ensure(g->groups, sizeof(int32_t) * (1 + ST_MAX_PAIRS), "expert scratch"));
        a.groups = (int32_t *)g->groups.p;
    }
    const st_launch &L = g->L;
    RT_TRY(st_launch_quantize(L, x, ex->n_embd, nt, a.xq, nullptr), "q8_1 launch");
    if (p.grouped_v1) RT_TRY(st_launch_group_v1(L, a), "grouping launch");
    st_rt_error e = by_type(ex->gate->type, [&](auto tc) { return st_launch_gate_up<decltype(tc)::value>(L, a, p); });
    RT_TRY(e, "gate-up launch");
    if (p.v2k) RT_TRY(st_launch_combine_v2k(L, a), "k-split combine launch");
    RT_TRY(st_launch_quantize(L, a.h, ex->n_ff, np, a.hq, nullptr), "q8_1 launch");
    e = by_type(ex->down->type, [&](auto tc) { return st_launch_down<decltype(tc)::value>(L, a, p); });
    RT_TRY(e, "down launch");
    if (p.tsum) RT_TRY(st_launch_topk_sum(L, a), "top-k sum launch");
    return ST_OK;
}

extern "C" st_status st_gpu_timer_start(st_gpu *g)
{
    RT_TRY(st_rt_event_record(g->ev[0], g->L.stream), "record event");
    return ST_OK;
}

extern "C" st_status st_gpu_timer_stop(st_gpu *g, double *ms)
{
    RT_TRY(st_rt_event_record(g->ev[1], g->L.stream), "record event");
    RT_TRY(st_rt_event_sync(g->ev[1]), "wait for event");
    float f = 0;
    RT_TRY(st_rt_event_elapsed(&f, g->ev[0], g->ev[1]), "event time");
    *ms = f;
    return ST_OK;
}

extern "C" size_t st_gpu_llc_bytes(st_gpu *g) { return g->llc; }

extern "C" st_status st_gpu_mem_info(st_gpu *g, size_t *free_b, size_t *total_b)
{
    RT_TRY(st_rt_set_device(g->device), "set device");
    RT_TRY(st_rt_mem_info(free_b, total_b), "device memory info");
    return ST_OK;
}

extern "C" void st_gpu_default_expert_equiv(int n_embd, int n_ff, const st_dispatch_config *cfg, int *gu, int *dn)
{
    *gu = *dn = 0;
    if (st_dispatch_config_first_active(cfg) >= 0) return;
    if (st_lanes_for_units(n_embd / 32, 8) == 32 && st_lanes_for_units(n_ff / 32, 8) == 32) *gu = *dn = 4;
}

st_rt_error st_probe_read_launch(st_rt_stream s, const void *src, size_t bytes, float *sink);
st_rt_error st_probe_loads_launch(st_rt_stream s, int type, const st_mat_dev &m, float *sink);

extern "C" st_status st_gpu_probe_loads(st_gpu *g, const st_gpu_matrix *w, float *sink)
{
    RT_TRY(st_probe_loads_launch(g->L.stream, (int)w->type, mat_dev(w), sink), "loads-only probe launch");
    return ST_OK;
}
st_rt_error st_probe_empty_launch(st_rt_stream s);

extern "C" st_status st_gpu_probe_read(st_gpu *g, const void *src, size_t bytes, float *sink)
{
    RT_TRY(st_probe_read_launch(g->L.stream, src, bytes, sink), "read probe launch");
    return ST_OK;
}

extern "C" st_status st_gpu_probe_copy(st_gpu *g, void *dst, const void *src, size_t bytes)
{
    RT_TRY(st_rt_memcpy_dtod(dst, src, bytes, g->L.stream), "copy probe");
    return ST_OK;
}

extern "C" st_status st_gpu_probe_empty(st_gpu *g)
{
    RT_TRY(st_probe_empty_launch(g->L.stream), "empty launch");
    return ST_OK;
}
