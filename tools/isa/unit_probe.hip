/* Instruction-count probe (compiled for gfx1100 by tools/gfx1100-check.sh,
 * never linked): one lane decodes one 32-weight unit of TYPE from the device
 * layout and does its int8 dot and float accumulation for one token: exactly
 * the body of the iq_mmvq / expert inner loops (st_unit_dec + st_unit_fma).
 * tools/isa_count.py counts the kernel's vector instructions; st_unit_probe_blk
 * is the same unit read in place (load_blk). */
#include "dot.h"

template <int TYPE>
__global__ void st_unit_probe(st_mat_dev m, st_xvec x, st_grids g, float *out)
{
    const int u = threadIdx.x;
    st_dunit un;
    st_unit_dec<TYPE>::get(m, blockIdx.x, u, g, un);
    int4 a, b;
    float da;
    st_load_x<false>(x, u, a, b, da);
    out[blockIdx.x * 32 + u] = st_unit_fma<TYPE>(un, a, b, da, 0.0f);
}

/* The same from the in-place layout (ggml's blocks, layout.h rb): LOAD_BLK
 * instead of LOAD. */
template <int TYPE>
__global__ void st_unit_probe_blk(st_mat_dev m, st_xvec x, st_grids g, float *out)
{
    const int u = threadIdx.x;
    using D = st_unit_dec<TYPE>;
    typename D::raw r;
    D::load_blk(m, blockIdx.x, u, r);
    st_dunit un;
    D::dec(r, u, g, un);
    int4 a, b;
    float da;
    st_load_x<false>(x, u, a, b, da);
    out[blockIdx.x * 32 + u] = st_unit_fma<TYPE>(un, a, b, da, 0.0f);
}

#define ST_PROBE_(id, name, ggml, qk, bytes)                                                  \
    template __global__ void st_unit_probe<ST_##id>(st_mat_dev, st_xvec, st_grids, float *); \
    template __global__ void st_unit_probe_blk<ST_##id>(st_mat_dev, st_xvec, st_grids, float *);
ST_QTYPES(ST_PROBE_)
#undef ST_PROBE_
