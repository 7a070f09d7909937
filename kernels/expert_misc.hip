/* Type-independent expert launches: the first-generation grouping, the
 * separate top-k sum, the k-split combine, and the combine and sum of the
 * composed FFN (st_expert_ffn beyond the fused kernels). */
#include "common.h"

/* GROUPED_V1: used experts in first-seen order over (t, k). One block. */
__global__ void st_group_v1_kernel(st_expert_args a)
{
    if (threadIdx.x != 0) return;
    const int np = a.nt * a.topk;
    int n = 0;
    for (int p = 0; p < np; p++) {
        const int e = a.ids[p];
        if ((unsigned)e >= (unsigned)a.n_expert) continue;
        bool seen = false;
        for (int q = 0; q < n; q++) seen |= a.groups[1 + q] == e;
        if (!seen) a.groups[1 + n++] = e;
    }
    a.groups[0] = n;
}

st_rt_error st_launch_group_v1(const st_launch &L, const st_expert_args &a)
{
    st_group_v1_kernel<<<1, 32, 0, L.stream>>>(a);
    return st_rt_get_last_error();
}

/* TSUM: out[t][i] = sum_k w[t][k] * y[t*topk+k][i], k in order. */
__global__ void st_topk_sum_kernel(st_expert_args a)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)a.nt * a.n_embd) return;
    const int t = (int)(idx / a.n_embd), i = (int)(idx % a.n_embd);
    float acc = 0.0f;
    for (int k = 0; k < a.topk; k++) {
        const int p = t * a.topk + k;
        const float y = (unsigned)a.ids[p] < (unsigned)a.n_expert ? a.y[(int64_t)p * a.n_embd + i] : 0.0f;
        acc = st_fma(a.wts[p], y, acc);
    }
    a.out[idx] = acc;
}

st_rt_error st_launch_topk_sum(const st_launch &L, const st_expert_args &a)
{
    const int64_t n = (int64_t)a.nt * a.n_embd;
    st_topk_sum_kernel<<<(unsigned)((n + 255) / 256), 256, 0, L.stream>>>(a);
    return st_rt_get_last_error();
}

/* EXPERT_V2K: butterfly over the 32 stored stream partials, then silu. */
__global__ void st_combine_v2k_kernel(st_expert_args a)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int np = a.nt * a.topk;
    if (idx >= (int64_t)np * a.n_ff) return;
    const int p = (int)(idx / a.n_ff);
    if ((unsigned)a.ids[p] >= (unsigned)a.n_expert) return;
    const float *pp = a.partial + idx * 64;
    float vg[32], vu[32];
    for (int s = 0; s < 32; s++) {
        vg[s] = pp[s];
        vu[s] = pp[32 + s];
    }
    a.h[idx] = st_silu_mul(st_canon_combine32(vg), st_canon_combine32(vu));
}

st_rt_error st_launch_combine_v2k(const st_launch &L, const st_expert_args &a)
{
    const int64_t n = (int64_t)a.nt * a.topk * a.n_ff;
    st_combine_v2k_kernel<<<(unsigned)((n + 127) / 128), 128, 0, L.stream>>>(a);
    return st_rt_get_last_error();
}

/* EXPERT_MMA: the pairs grouped by expert (common.h st_pair_table). One
 * block: the counts per expert, the used experts and their starts by a
 * scan over the experts (warp 0, 16 per lane), then each pair's place:
 * its expert's start plus the pairs before it with the same expert. */
__global__ void __launch_bounds__(512) st_expert_pairs_kernel(st_expert_args a)
{
    __shared__ int s_cnt[ST_MAX_EXPERTS], s_start[ST_MAX_EXPERTS], s_ids[ST_MAX_PAIRS];
    const st_pair_table t = st_pair_table_of(a.groups);
    const int np = a.nt * a.topk;
    for (int e = threadIdx.x; e < ST_MAX_EXPERTS; e += blockDim.x) s_cnt[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < np; p += blockDim.x) {
        const int e = a.ids[p];
        s_ids[p] = (unsigned)e < (unsigned)a.n_expert ? e : -1;
        if (s_ids[p] >= 0) atomicAdd(&s_cnt[e], 1);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        constexpr int PER = ST_MAX_EXPERTS / 32;
        const int lane = threadIdx.x, e0 = lane * PER;
        int sum = 0, used = 0;
        for (int i = 0; i < PER; i++) sum += s_cnt[e0 + i], used += s_cnt[e0 + i] > 0;
        int sx = sum, ux = used; /* inclusive scans over the lanes */
        for (int d = 1; d < 32; d <<= 1) {
            const int src = lane >= d ? lane - d : lane;
            const int so = st_shfl_idx_i(sx, src), uo = st_shfl_idx_i(ux, src);
            if (lane >= d) sx += so, ux += uo;
        }
        int at = sx - sum, u = ux - used;
        for (int i = 0; i < PER; i++) {
            const int e = e0 + i, c = s_cnt[e];
            s_start[e] = at;
            if (c > 0) {
                t.expert[u] = e;
                t.start[u] = at;
                t.count[u] = c;
                u++;
            }
            at += c;
        }
        if (lane == 31) *t.used = ux;
    }
    __syncthreads();
    for (int p = threadIdx.x; p < np; p += blockDim.x) {
        const int e = s_ids[p];
        if (e < 0) continue;
        int before = 0;
        for (int q = 0; q < p; q++) before += s_ids[q] == e;
        t.pairs[s_start[e] + before] = p;
    }
}

st_rt_error st_launch_expert_pairs(const st_launch &L, const st_expert_args &a)
{
    st_expert_pairs_kernel<<<1, 512, 0, L.stream>>>(a);
    return st_rt_get_last_error();
}

/* FFN_COMBINE: h[p][i] = combine(g + gate bias, u + up bias) of the pair's
 * expert (the act of st_activation; st_canon.h), 0 for an id out of range. */
__global__ void st_ffn_combine_kernel(st_ffn_args a)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)a.nt * a.topk * a.n_ff) return;
    const int p = (int)(idx / a.n_ff), i = (int)(idx % a.n_ff);
    const int e = a.ids[(int64_t)(p / a.topk) * a.ids_stride + p % a.topk];
    if ((unsigned)e >= (unsigned)a.n_expert) {
        a.h[idx] = 0.0f;
        return;
    }
    const int64_t b = (int64_t)e * a.n_ff + i;
    const float g = a.gate_bias ? st_fadd(a.g[idx], a.gate_bias[b]) : a.g[idx];
    const float u = a.up_bias ? st_fadd(a.u[idx], a.up_bias[b]) : a.u[idx];
    a.h[idx] = a.act == 1 ? st_gelu_mul(g, u) : a.act == 2 ? st_swiglu_oai_mul(g, u, a.alpha, a.limit) : st_silu_mul(g, u);
}

st_rt_error st_launch_ffn_combine(const st_launch &L, const st_ffn_args &a)
{
    const int64_t n = (int64_t)a.nt * a.topk * a.n_ff;
    st_ffn_combine_kernel<<<(unsigned)((n + 255) / 256), 256, 0, L.stream>>>(a);
    return st_rt_get_last_error();
}

/* FFN_SUM: out[t][i] = sum_k w[t][k] * (y[p][i] + down bias), k in order;
 * a slot out of range adds w * 0. */
__global__ void st_ffn_sum_kernel(st_ffn_args a)
{
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)a.nt * a.n_embd) return;
    const int t = (int)(idx / a.n_embd), i = (int)(idx % a.n_embd);
    float acc = 0.0f;
    for (int k = 0; k < a.topk; k++) {
        const int p = t * a.topk + k;
        const int e = a.ids[(int64_t)t * a.ids_stride + k];
        float y = 0.0f;
        if ((unsigned)e < (unsigned)a.n_expert) {
            y = a.y[(int64_t)p * a.n_embd + i];
            if (a.down_bias) y = st_fadd(y, a.down_bias[(int64_t)e * a.n_embd + i]);
        }
        acc = st_fma(a.wts[(int64_t)t * a.wts_stride + k], y, acc);
    }
    a.out[(int64_t)t * a.out_stride + i] = acc;
}

st_rt_error st_launch_ffn_sum(const st_launch &L, const st_ffn_args &a)
{
    const int64_t n = (int64_t)a.nt * a.n_embd;
    st_ffn_sum_kernel<<<(unsigned)((n + 255) / 256), 256, 0, L.stream>>>(a);
    return st_rt_get_last_error();
}
