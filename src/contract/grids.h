/* ggml's lookup tables for the i-quants, IQ4_NL/IQ4_XS and MXFP4,
 * bit-identical to ggml-common.h at the ggml commit of the ggml quant
 * reference data (a data set kept outside this repository), and lossless
 * repackings of them for the GPU decoders. Generated into
 * src/contract/grids.c by tools/gen_grids.py from that data set's tables.
 *
 * Plain C with <stdint.h> types only, so the GPU kernels can include this
 * header too (they copy the tables into device memory or constant space).
 * Grid values: byte j (little-endian) of an entry is the magnitude of element
 * j of the group it encodes. */
#ifndef ST_GRIDS_H
#define ST_GRIDS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IQ3_S: 9-bit index -> 4 magnitudes (odd values 1..15). */
extern const uint32_t st_iq3s_grid[512];
/* IQ3_XXS: 8-bit index -> 4 magnitudes. */
extern const uint32_t st_iq3xxs_grid[256];
/* IQ2_S: 10-bit index -> 8 magnitudes (8, 25 or 43). */
extern const uint64_t st_iq2s_grid[1024];
/* IQ4_NL / IQ4_XS: 4-bit index -> signed value. */
extern const int8_t st_kvalues_iq4nl[16];
/* 7 stored sign bits -> 8 sign bits (bit 7 makes the count of set bits
 * even). Bit e set = element e of the group is negated. */
extern const uint8_t st_ksigns_iq2xs[128];
/* 1 << j: the sign bit of element j of a group of 8. */
extern const uint8_t st_kmask_iq2xs[8];
/* IQ2_XXS: 8-bit index -> 8 magnitudes (8, 25 or 43). */
extern const uint64_t st_iq2xxs_grid[256];
/* IQ2_XS: 9-bit index -> 8 magnitudes (8, 25 or 43). */
extern const uint64_t st_iq2xs_grid[512];
/* IQ1_S / IQ1_M: 11-bit index -> 8 values; byte j is the int8 value of
 * element j (-1, 0 or +1), not a magnitude. */
extern const uint64_t st_iq1s_grid[2048];
/* The same as nibbles value + 1 (0..2): byte i holds element i in its low
 * nibble and element i + 4 in its high nibble (ggml's iq1s_grid_gpu). */
extern const uint32_t st_iq1s_grid_gpu[2048];
/* MXFP4: 4-bit index -> the E2M1 value doubled (bit 3 = sign). */
extern const int8_t st_kvalues_mxfp4[16];

/* The tables the GPU decoders read from device memory (or stage in LDS):
 * X(st_grids field, element type on the device, host table). The GPU
 * backend uploads each once (src/runtime/gpu/host.hip); a format's decoder
 * names its field (its home). Tables of 16 entries live in registers and
 * are not here. */
#define ST_DEVICE_GRIDS(X)                \
    X(iq3s, uint32_t, st_iq3s_grid)       \
    X(iq3xxs, uint32_t, st_iq3xxs_grid)   \
    X(iq2s, uint2, st_iq2s_grid)          \
    X(iq2xxs, uint2, st_iq2xxs_grid)      \
    X(iq2xs, uint2, st_iq2xs_grid)        \
    X(iq1s, uint32_t, st_iq1s_grid_gpu)

#ifdef __cplusplus
}
#endif
#endif
