/* Host stand-ins for the device helpers of st_gpu.h, so that the unit
 * decoders (units.h) and the contract's per-unit arithmetic (dot.h's
 * st_unit_fma) compile as plain C++ in a CPU test and are checked against
 * the CPU reference on every build, without a GPU. The vendor byte permutes
 * are emulated bit for bit as their manuals define them; both vendors' table
 * lookups are kept so the test can run each. Included by st_gpu.h only when
 * ST_HOST_EMULATION is defined. */
#ifndef ST_GPU_EMU_H
#define ST_GPU_EMU_H

#include <stdint.h>
#include <string.h>

#include "../src/st_canon.h"

#define ST_DEV static inline
#define ST_WARP 32

struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };
struct int4 { int x, y, z, w; };
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

ST_DEV int st_dot4_i8(int a, int b, int c)
{
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}

/* CUDA __byte_perm(x, y, s): result byte i = byte (s >> 4i) & 7 of {y:x}. */
static inline uint32_t st_emu_byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
    const uint64_t v = ((uint64_t)y << 32) | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

/* AMD v_perm_b32(s0, s1, sel): result byte i from selector byte i; 0-3 pick
 * bytes of s1, 4-7 bytes of s0 (only those are used here). */
static inline uint32_t st_emu_amd_perm(uint32_t s0, uint32_t s1, uint32_t sel)
{
    const uint64_t v = ((uint64_t)s0 << 32) | s1;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((sel >> (8 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

/* The two vendor paths of st_lut16, written as in st_gpu.h. */
static inline void st_lut16_cuda(uint32_t q, const uint32_t tab[4], uint32_t &lo, uint32_t &hi)
{
    const uint32_t sel = 0x32103210u | ((q & 0x88888888u) >> 1);
    const uint32_t t0 = st_emu_byte_perm(st_emu_byte_perm(tab[0], tab[1], q), st_emu_byte_perm(tab[2], tab[3], q), sel);
    const uint32_t t1 = st_emu_byte_perm(st_emu_byte_perm(tab[0], tab[1], q >> 16), st_emu_byte_perm(tab[2], tab[3], q >> 16),
                                         sel >> 16);
    lo = st_emu_byte_perm(t0, t1, 0x6420);
    hi = st_emu_byte_perm(t0, t1, 0x7531);
}

static inline void st_lut16_hip(uint32_t q, const uint32_t tab[4], uint32_t &lo, uint32_t &hi)
{
    const uint32_t qe = q & 0x0f0f0f0fu, qo = (q >> 4) & 0x0f0f0f0fu;
    const uint32_t le = st_emu_amd_perm(tab[1], tab[0], qe & 0x07070707u);
    const uint32_t he = st_emu_amd_perm(tab[3], tab[2], qe & 0x07070707u);
    const uint32_t lo_ = st_emu_amd_perm(tab[1], tab[0], qo & 0x07070707u);
    const uint32_t ho = st_emu_amd_perm(tab[3], tab[2], qo & 0x07070707u);
    lo = st_emu_amd_perm(he, le, 0x03020100u | ((qe & 0x08080808u) >> 1));
    hi = st_emu_amd_perm(ho, lo_, 0x03020100u | ((qo & 0x08080808u) >> 1));
}

extern int st_emu_use_hip_lut; /* the test picks the vendor path */

ST_DEV void st_lut16(uint32_t q, const uint32_t tab[4], uint32_t &lo, uint32_t &hi)
{
    if (st_emu_use_hip_lut)
        st_lut16_hip(q, tab, lo, hi);
    else
        st_lut16_cuda(q, tab, lo, hi);
}

ST_DEV float st_h2f(uint16_t h) { return st_half_to_float(h); }
ST_DEV int st_popc(uint32_t v) { return __builtin_popcount(v); }

#endif
