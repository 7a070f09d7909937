/* Host stand-ins for the device helpers of st_gpu.h, so that the unit
 * decoders (units.h) and the contract's per-unit arithmetic (dot.h's
 * st_unit_fma) compile as plain C++ in a CPU test and are checked against
 * the CPU reference on every build, without a GPU. Only the vendors' byte
 * permutes are emulated (as their manuals define them); the lookups built on
 * them are the kernels' own code (st_lut16.h), both vendors' paths. Included by st_gpu.h only when
 * ST_HOST_EMULATION is defined. */
#ifndef ST_GPU_EMU_H
#define ST_GPU_EMU_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_canon.h"

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

/* The permute primitives of st_lut16.h, as the vendors define them. */
static inline uint32_t st_perm_nib(uint32_t x, uint32_t y, uint32_t s)
{
    const uint64_t v = ((uint64_t)y << 32) | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

static inline uint32_t st_perm_byte(uint32_t s0, uint32_t s1, uint32_t sel)
{
    const uint64_t v = ((uint64_t)s0 << 32) | s1;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((sel >> (8 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

#define ST_HAVE_PERM_NIB 1
#define ST_HAVE_PERM_BYTE 1
#include "st_lut16.h" /* the very code the kernels use */

extern int st_emu_use_hip_lut; /* the test picks the vendor path */

ST_DEV uint32_t st_zip_bytes(uint32_t x, uint32_t y, int half)
{
    return st_emu_use_hip_lut ? st_zip_bytes_byte(x, y, half) : st_zip_bytes_nib(x, y, half);
}

ST_DEV void st_lut16(uint32_t q, const uint32_t tab[4], uint32_t &lo, uint32_t &hi)
{
    if (st_emu_use_hip_lut)
        st_lut16_byte(q, tab, lo, hi);
    else
        st_lut16_nib(q, tab, lo, hi);
}

/* Both ways of st_gpu.h's ST_FUNNEL_LOADS, with the vendor the test picks. */
#define ST_FUNNEL_LOADS (!st_emu_use_hip_lut)

ST_DEV uint32_t st_funnel_r(uint32_t lo, uint32_t hi, uint32_t sh)
{
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31u));
}

/* A load of a T at P as the device issues it: a GPU faults on one not
 * aligned to sizeof(T), so the emulation stops there with one line, and a
 * wrong alignment assumption of an in-place load (units.h) fails the CPU
 * test instead of a GPU run. */
template <typename T> static inline T st_ld_at(const uint8_t *p)
{
    if ((uintptr_t)p % sizeof(T) != 0) {
        fprintf(stderr, "misaligned %zu-byte load at %p: a GPU faults here\n", sizeof(T), (const void *)p);
        abort();
    }
    T v;
    memcpy(&v, p, sizeof v);
    return v;
}

ST_DEV float st_h2f(uint16_t h) { return st_half_to_float(h); }
ST_DEV int st_popc(uint32_t v) { return __builtin_popcount(v); }

#endif
