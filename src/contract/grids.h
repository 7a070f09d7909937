/* ggml's lookup tables for the i-quants and IQ4_NL/IQ4_XS, bit-identical to
 * ggml-common.h at the testdata commit. Generated into src/grids.c by
 * tools/gen_grids.py from the testdata/formats/ tables.
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

#ifdef __cplusplus
}
#endif
#endif
