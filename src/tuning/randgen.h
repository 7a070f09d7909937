/* Deterministic random inputs: valid quantized blocks (finite scales, any
 * quant bits) and activations, for the tuner (when no model is given), the
 * benchmarks and the parity tests. Internal. */
#ifndef ST_RANDGEN_H
#define ST_RANDGEN_H

#include "strata/formats.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t s;
} st_rng;

void st_rng_seed(st_rng *r, uint64_t seed);
uint32_t st_rng_u32(st_rng *r);
/* Uniform in [-1, 1). */
float st_rng_float(st_rng *r);

/* ROWS x COLS of type T as ggml bytes into DST (rows * row_bytes): random
 * quant bits, block scales drawn so outputs stay in a sane range. */
void st_random_blocks(st_rng *r, st_qtype t, int64_t rows, int64_t cols, void *dst);
void st_random_floats(st_rng *r, float *dst, size_t n, float scale);
/* Routing for NT tokens: TOPK distinct experts of N_EXPERT each (TOPK <=
 * N_EXPERT), IDS/W [nt][topk], weights positive and summing to 1 per token. */
void st_random_routing(st_rng *r, int nt, int topk, int n_expert, int32_t *ids, float *w);

#endif
