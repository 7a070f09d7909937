/* The weight block formats: type information from ST_QTYPES,
 * dequantization bit for bit as ggml's to_float (each format's dequantizer is
 * in its home, src/contract/formats/<fmt>.h, with the block layout the ggml
 * quant reference data describes; that data set is kept outside this
 * repository), and the q8_1 activation quantizer of ggml's CUDA backend.
 *
 * Built with -ffp-contract=off: every float operation below happens as
 * written, in the written order. */
#include "strata/formats.h"

#include "format_ops.h"
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

st_status st_dequantize_row(st_qtype t, const void *src, float *dst, int64_t k)
{
    const st_format_ops *f = st_format_ops_of(t);
    if (!f) return st_fail(ST_ERR_INVALID_ARG, "dequantize: unknown type %d (known: %s)", (int)t, st_qtype_names());
    if (!src || !dst) return st_fail(ST_ERR_INVALID_ARG, "dequantize: %s is NULL", src ? "dst" : "src");
    int qk = st_qtype_block_values(t), bytes = st_qtype_block_bytes(t);
    if (k < 0 || k % qk != 0)
        return st_fail(ST_ERR_INVALID_ARG, "dequantize: K = %lld is not a multiple of %s's block of %d",
                       (long long)k, st_qtype_name(t), qk);
    const uint8_t *b = src;
    for (int64_t i = 0; i < k / qk; i++) f->deq(b + i * bytes, dst + i * qk);
    return ST_OK;
}

st_status st_block_set_scales(st_qtype t, void *block, float d)
{
    const st_format_ops *f = st_format_ops_of(t);
    if (!f) return st_fail(ST_ERR_INVALID_ARG, "block scales: unknown type %d (known: %s)", (int)t, st_qtype_names());
    if (!block) return st_fail(ST_ERR_INVALID_ARG, "block scales: NULL block");
    f->scales(block, d);
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
