#include "randgen.h"

#include <string.h>

void st_rng_seed(st_rng *r, uint64_t seed) { r->s = seed ? seed : 0x9e3779b97f4a7c15ull; }

uint32_t st_rng_u32(st_rng *r)
{
    /* xorshift64* */
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

float st_rng_float(st_rng *r) { return (float)((int32_t)(st_rng_u32(r) >> 8) - 8388608) / 8388608.0f; }

void st_random_floats(st_rng *r, float *dst, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) dst[i] = st_rng_float(r) * scale;
}

void st_random_blocks(st_rng *r, st_qtype t, int64_t rows, int64_t cols, void *dst)
{
    if (st_qtype_block_bytes(t) <= 0) return;
    const size_t bb = (size_t)st_qtype_block_bytes(t);
    const int64_t nblocks = rows * (cols / st_qtype_block_values(t));
    uint8_t *p = dst;
    for (int64_t b = 0; b < nblocks; b++, p += bb) {
        for (size_t i = 0; i < bb; i += 4) {
            uint32_t v = st_rng_u32(r);
            size_t n = bb - i < 4 ? bb - i : 4;
            memcpy(p + i, &v, n);
        }
        /* Scales: positive and negative, spread over a few binades. */
        float d = (0.25f + 0.75f * (st_rng_float(r) * 0.5f + 0.5f)) * 0.001f;
        if (st_rng_u32(r) & 1) d = -d;
        st_block_set_scales(t, p, d); /* the format's home knows its scale fields */
    }
}

void st_random_routing(st_rng *r, int nt, int topk, int n_expert, int32_t *ids, float *w)
{
    for (int t = 0; t < nt; t++) {
        int32_t *id = ids + t * topk;
        float *wt = w + t * topk, sum = 0;
        for (int k = 0; k < topk; k++) {
            int e, dup;
            do {
                e = (int)(st_rng_u32(r) % (uint32_t)n_expert);
                dup = 0;
                for (int j = 0; j < k; j++) dup |= id[j] == e;
            } while (dup);
            id[k] = e;
            sum += (wt[k] = 0.1f + (st_rng_float(r) * 0.5f + 0.5f));
        }
        for (int k = 0; k < topk; k++) wt[k] /= sum;
    }
}
