/* The weight block formats: type information, dequantization bit for bit as
 * ggml's to_float (testdata/formats/blocks.md), and the q8_1 activation
 * quantizer of ggml's CUDA backend.
 *
 * Built with -ffp-contract=off: every float operation below happens as
 * written, in the written order, so the results match ggml-base (which x86-64
 * compiles without FMA) to the bit. Do not "simplify" the arithmetic: e.g.
 * IQ3_XXS's d * (0.5f + ls) * 0.5f is not the same float as d * (ls + 0.5f)
 * / 2 in every case the compiler could pick. */
#include "strata/formats.h"

#include "grids.h"
#include "internal.h"
#include "st_canon.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- type information -------------------------------------------------- */

typedef struct {
    st_qtype type;
    const char *name;
    int qk;
    int bytes;
} qtype_info;

static const qtype_info g_qtypes[] = {
#define ST_QTYPE_INFO_(id, name, ggml, qk, bytes) {ST_##id, name, qk, bytes},
    ST_QTYPES(ST_QTYPE_INFO_)
#undef ST_QTYPE_INFO_
};

static const qtype_info *qinfo(int t)
{
    for (size_t i = 0; i < ST_ARRAY_LEN(g_qtypes); i++)
        if ((int)g_qtypes[i].type == t) return &g_qtypes[i];
    return NULL;
}

bool st_qtype_valid(int t) { return qinfo(t) != NULL; }

const char *st_qtype_name(st_qtype t) { return qinfo(t) ? qinfo(t)->name : "?"; }

static int ascii_lower(int c) { return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c; }

st_qtype st_qtype_from_name(const char *name)
{
    if (!name) return ST_QTYPE_NONE;
    for (size_t i = 0; i < ST_ARRAY_LEN(g_qtypes); i++) {
        const char *a = g_qtypes[i].name, *b = name;
        while (*a && *b && ascii_lower((unsigned char)*a) == ascii_lower((unsigned char)*b)) {
            a++;
            b++;
        }
        if (!*a && !*b) return g_qtypes[i].type;
    }
    return ST_QTYPE_NONE;
}

int st_qtype_block_values(st_qtype t) { return qinfo(t) ? qinfo(t)->qk : 0; }

int st_qtype_block_bytes(st_qtype t) { return qinfo(t) ? qinfo(t)->bytes : 0; }

size_t st_qtype_row_bytes(st_qtype t, int64_t k)
{
    const qtype_info *q = qinfo(t);
    if (!q || k < 0 || k % q->qk != 0) return 0;
    uint64_t blocks = (uint64_t)(k / q->qk);
    if (blocks > SIZE_MAX / (uint64_t)q->bytes) return 0;
    return (size_t)blocks * (size_t)q->bytes;
}

const char *st_qtype_names(void)
{
    /* " q8_0 q4_K ...": skip the leading space. */
    static const char names[] =
#define ST_QTYPE_NAME_(id, name, ggml, qk, bytes) " " name
        ST_QTYPES(ST_QTYPE_NAME_)
#undef ST_QTYPE_NAME_
        ;
    return names + 1;
}

/* ---- binary16 ----------------------------------------------------------- */

float st_f16_to_f32(uint16_t h) { return st_half_to_float(h); }

uint16_t st_f32_to_f16(float f) { return st_float_to_half(f); }

/* Little-endian loads, independent of the host's byte order. */
static inline uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline float ldh(const uint8_t *p) { return st_half_to_float(ld16(p)); }

/* Byte j (little-endian) of a grid entry: the magnitude of element j. */
static inline int grid_byte32(uint32_t g, int j) { return (int)((g >> (8 * j)) & 0xffu); }
static inline int grid_byte64(uint64_t g, int j) { return (int)((g >> (8 * j)) & 0xffu); }

/* ggml multiplies by (sign ? -1.f : 1.f); that product is an exact negation. */
static inline float neg_if(float v, unsigned bit) { return bit ? -v : v; }

/* ---- dequantizers: one block of QK values each -------------------------- */

static void deq_q8_0(const uint8_t *b, float *y)
{
    float d = ldh(b);
    for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)b[2 + i] * d;
}

static void q4_k_scale_min(int j, const uint8_t *s, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void deq_q4_k(const uint8_t *b, float *y)
{
    float d = ldh(b), dmin = ldh(b + 2);
    const uint8_t *scales = b + 4, *qs = b + 16;
    for (int g = 0; g < 4; g++) {
        const uint8_t *q = qs + 32 * g;
        for (int h = 0; h < 2; h++) {
            int sc, m;
            q4_k_scale_min(2 * g + h, scales, &sc, &m);
            float d1 = d * (float)sc;
            float m1 = dmin * (float)m;
            float *o = y + 64 * g + 32 * h;
            for (int l = 0; l < 32; l++) {
                int nib = h ? (q[l] >> 4) : (q[l] & 15);
                o[l] = d1 * (float)nib - m1;
            }
        }
    }
}

static void deq_iq4_nl(const uint8_t *b, float *y)
{
    float d = ldh(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)st_kvalues_iq4nl[qs[j] & 15];
        y[j + 16] = d * (float)st_kvalues_iq4nl[qs[j] >> 4];
    }
}

static void deq_iq4_xs(const uint8_t *b, float *y)
{
    float d = ldh(b);
    unsigned scales_h = ld16(b + 2);
    const uint8_t *scales_l = b + 4, *qs = b + 8;
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (int)(((scales_h >> (2 * ib)) & 3) << 4);
        float dl = d * (float)(ls - 32);
        const uint8_t *q = qs + 16 * ib;
        float *o = y + 32 * ib;
        for (int j = 0; j < 16; j++) {
            o[j] = dl * (float)st_kvalues_iq4nl[q[j] & 15];
            o[j + 16] = dl * (float)st_kvalues_iq4nl[q[j] >> 4];
        }
    }
}

static void deq_iq3_xxs(const uint8_t *b, float *y)
{
    float d = ldh(b);
    const uint8_t *qs = b + 2, *ss = b + 66;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t a = ld32(ss + 4 * ib);
        float db = d * (0.5f + (float)(a >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            unsigned signs = st_ksigns_iq2xs[(a >> (7 * l)) & 127];
            uint32_t g1 = st_iq3xxs_grid[qs[8 * ib + 2 * l]];
            uint32_t g2 = st_iq3xxs_grid[qs[8 * ib + 2 * l + 1]];
            float *o = y + 32 * ib + 8 * l;
            for (int j = 0; j < 4; j++) {
                o[j] = neg_if(db * (float)grid_byte32(g1, j), signs & (1u << j));
                o[j + 4] = neg_if(db * (float)grid_byte32(g2, j), signs & (1u << (j + 4)));
            }
        }
    }
}

static void deq_iq3_s(const uint8_t *b, float *y)
{
    float d = ldh(b);
    const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
    for (int ib = 0; ib < 8; ib++) {
        int s = (scales[ib / 2] >> (4 * (ib % 2))) & 15;
        float db = d * (float)(1 + 2 * s);
        for (int g = 0; g < 8; g++) {
            unsigned idx = qs[8 * ib + g] | (((unsigned)(qh[ib] >> g) & 1u) << 8);
            uint32_t G = st_iq3s_grid[idx];
            unsigned sb = signs[4 * ib + g / 2];
            float *o = y + 32 * ib + 4 * g;
            for (int j = 0; j < 4; j++)
                o[j] = neg_if(db * (float)grid_byte32(G, j), sb & (1u << ((g % 2) * 4 + j)));
        }
    }
}

static void deq_iq2_s(const uint8_t *b, float *y)
{
    float d = ldh(b);
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
    for (int ib = 0; ib < 8; ib++) {
        float db[2];
        db[0] = d * (0.5f + (float)(scales[ib] & 15)) * 0.25f;
        db[1] = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            float dl = db[l / 2];
            unsigned idx = qs[4 * ib + l] | (((unsigned)(qh[ib] >> (2 * l)) & 3u) << 8);
            uint64_t G = st_iq2s_grid[idx];
            unsigned sg = signs[4 * ib + l];
            float *o = y + 32 * ib + 8 * l;
            for (int j = 0; j < 8; j++) o[j] = neg_if(dl * (float)grid_byte64(G, j), sg & (1u << j));
        }
    }
}

typedef void (*deq_block_fn)(const uint8_t *b, float *y);

static deq_block_fn deq_fn(st_qtype t)
{
    switch (t) {
    case ST_Q8_0: return deq_q8_0;
    case ST_Q4_K: return deq_q4_k;
    case ST_IQ3_XXS: return deq_iq3_xxs;
    case ST_IQ4_NL: return deq_iq4_nl;
    case ST_IQ3_S: return deq_iq3_s;
    case ST_IQ2_S: return deq_iq2_s;
    case ST_IQ4_XS: return deq_iq4_xs;
    default: return NULL;
    }
}

st_status st_dequantize_row(st_qtype t, const void *src, float *dst, int64_t k)
{
    deq_block_fn fn = deq_fn(t);
    if (!fn) return st_fail(ST_ERR_INVALID_ARG, "dequantize: unknown type %d (known: %s)", (int)t, st_qtype_names());
    if (!src || !dst) return st_fail(ST_ERR_INVALID_ARG, "dequantize: %s is NULL", src ? "dst" : "src");
    int qk = st_qtype_block_values(t), bytes = st_qtype_block_bytes(t);
    if (k < 0 || k % qk != 0)
        return st_fail(ST_ERR_INVALID_ARG, "dequantize: K = %lld is not a multiple of %s's block of %d",
                       (long long)k, st_qtype_name(t), qk);
    const uint8_t *b = src;
    for (int64_t i = 0; i < k / qk; i++) fn(b + i * bytes, dst + i * qk);
    return ST_OK;
}

/* ---- q8_1 ----------------------------------------------------------------- */

/* One CUDA warp per block in ggml's quantize_q8_1; reproduced lane by lane. */
static void quantize_q8_1_block(const float *x, uint8_t *out)
{
    float amax = 0.0f;
    float v[32];
    for (int i = 0; i < 32; i++) {
        amax = fmaxf(amax, fabsf(x[i]));
        v[i] = x[i];
    }
    /* Lane i adds lane i^o for o = 16..1; lanes i and i^o hold the same sum
     * afterwards, so lanes 0..o-1 carry everything: st_canon_combine32 is
     * exactly that tree. */
    float sum = st_canon_combine32(v);
    float d = st_fdiv(amax, 127.0f);
    uint16_t hd = st_float_to_half(d), hs = st_float_to_half(sum);
    out[0] = (uint8_t)(hd & 0xff);
    out[1] = (uint8_t)(hd >> 8);
    out[2] = (uint8_t)(hs & 0xff);
    out[3] = (uint8_t)(hs >> 8);
    for (int i = 0; i < 32; i++) {
        int q = 0;
        if (amax != 0.0f) {
            float r = roundf(st_fdiv(x[i], d));
            /* Only non-finite inputs reach these guards (|x/d| <= 127 + ulps
             * otherwise); they keep the conversion defined. */
            if (!(r == r)) r = 0.0f;
            q = r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r;
        }
        out[4 + i] = (uint8_t)(int8_t)q;
    }
}

st_status st_quantize_q8_1(const float *x, void *dst, int64_t k)
{
    if (!x || !dst) return st_fail(ST_ERR_INVALID_ARG, "quantize_q8_1: %s is NULL", x ? "dst" : "x");
    if (k < 0 || k % ST_Q8_1_QK != 0)
        return st_fail(ST_ERR_INVALID_ARG, "quantize_q8_1: K = %lld is not a multiple of %d", (long long)k,
                       ST_Q8_1_QK);
    uint8_t *o = dst;
    for (int64_t i = 0; i < k / ST_Q8_1_QK; i++)
        quantize_q8_1_block(x + i * ST_Q8_1_QK, o + i * ST_Q8_1_BLOCK_BYTES);
    return ST_OK;
}
