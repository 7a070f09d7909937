/* Bandwidth and launch-overhead probes for the benchmark and the tuner's
 * report: what the card's memory does with a plain streaming read, a
 * device-to-device copy, and an empty launch, measured in the same process
 * as the decode kernels. */
#include "common.h"

/* Each thread reads 16-byte vectors grid-stride and folds them into one
 * float; one store per block keeps the compiler from dropping the reads. */
__global__ void __launch_bounds__(256) st_read_kernel(const uint4 *__restrict__ src, size_t n, float *sink)
{
    uint32_t acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        const uint4 a = src[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x12345678u) sink[blockIdx.x] = (float)acc; /* practically never */
}

__global__ void st_empty_kernel() {}

struct st_probe_dims {
    unsigned grid;
};

static unsigned probe_grid(size_t n16)
{
    size_t g = (n16 + 255) / 256;
    if (g > 132 * 16) g = 132 * 16; /* enough blocks to fill any current GPU several times */
    return (unsigned)(g ? g : 1);
}

st_rt_error st_probe_read_launch(st_rt_stream s, const void *src, size_t bytes, float *sink)
{
    const size_t n = bytes / 16;
    st_read_kernel<<<probe_grid(n), 256, 0, s>>>((const uint4 *)src, n, sink);
    return st_rt_get_last_error();
}

st_rt_error st_probe_empty_launch(st_rt_stream s)
{
    st_empty_kernel<<<1, 32, 0, s>>>();
    return st_rt_get_last_error();
}

/* Ablation for the benchmark: the iq_mmvq default geometry (32 lanes per
 * row, 4 rows per block) making exactly the weight loads of the unit decoder
 * (layout.h planes) but no grid lookups, sign handling, int8 dots or float
 * work. Its time against the real kernel's is the cost of the decode. */
template <int TYPE>
__global__ void __launch_bounds__(128) st_loads_only_kernel(st_mat_dev m, float *sink)
{
    const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= m.rows) return;
    uint32_t acc = 0;
    for (int u = lane; u < m.nu; u += 32) {
        const int64_t ru = row * m.nu + u, rb = row * m.nb + u / 8;
        if (TYPE == T_IQ3_S) {
            const uint2 qs = *(const uint2 *)(m.p[1] + ru * 8);
            acc ^= qs.x ^ qs.y ^ m.p[2][ru] ^ *(const uint32_t *)(m.p[3] + ru * 4) ^ m.p[4][rb * 4 + (u & 7) / 2] ^
                   *(const uint16_t *)(m.p[0] + rb * 2);
        } else if (TYPE == T_IQ4_XS) {
            const uint4 q = *(const uint4 *)(m.p[1] + ru * 16);
            acc ^= q.x ^ q.y ^ q.z ^ q.w ^ *(const uint16_t *)(m.p[2] + rb * 2) ^ m.p[3][rb * 4 + (u & 7) / 2] ^
                   *(const uint16_t *)(m.p[0] + rb * 2);
        } else {
            const uint4 q = *(const uint4 *)(m.p[1] + ru * 16);
            acc ^= q.x ^ q.y ^ q.z ^ q.w ^ *(const uint16_t *)(m.p[0] + ru * 2);
        }
    }
    if (acc == 0x9e3779b9u) sink[blockIdx.x & 1023] = (float)acc;
}

st_rt_error st_probe_loads_launch(st_rt_stream s, int type, const st_mat_dev &m, float *sink)
{
    const unsigned grid = (unsigned)((m.rows + 3) / 4);
    if (type == T_IQ3_S)
        st_loads_only_kernel<T_IQ3_S><<<grid, 128, 0, s>>>(m, sink);
    else if (type == T_IQ4_XS)
        st_loads_only_kernel<T_IQ4_XS><<<grid, 128, 0, s>>>(m, sink);
    else if (type == T_IQ4_NL)
        st_loads_only_kernel<T_IQ4_NL><<<grid, 128, 0, s>>>(m, sink);
    else
        return ST_RT_INVALID_VALUE;
    return st_rt_get_last_error();
}
