/* strata-tune: the weight block formats (bit-compatible with ggml/GGUF) and
 * the q8_1 activation format. */
#ifndef STRATA_FORMATS_H
#define STRATA_FORMATS_H

#include "strata/version.h"

#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(ID, ggml name, ggml type id, values per block, bytes per block).
 * The enum value of each type IS its ggml type id. */
#define ST_QTYPES(X)                    \
    X(Q4_0, "q4_0", 2, 32, 18)          \
    X(Q4_1, "q4_1", 3, 32, 20)          \
    X(Q5_0, "q5_0", 6, 32, 22)          \
    X(Q5_1, "q5_1", 7, 32, 24)          \
    X(Q8_0, "q8_0", 8, 32, 34)          \
    X(Q2_K, "q2_K", 10, 256, 84)        \
    X(Q3_K, "q3_K", 11, 256, 110)       \
    X(Q4_K, "q4_K", 12, 256, 144)       \
    X(Q5_K, "q5_K", 13, 256, 176)       \
    X(Q6_K, "q6_K", 14, 256, 210)       \
    X(IQ2_XXS, "iq2_xxs", 16, 256, 66)  \
    X(IQ2_XS, "iq2_xs", 17, 256, 74)    \
    X(IQ3_XXS, "iq3_xxs", 18, 256, 98)  \
    X(IQ1_S, "iq1_s", 19, 256, 50)      \
    X(IQ4_NL, "iq4_nl", 20, 32, 18)     \
    X(IQ3_S, "iq3_s", 21, 256, 110)     \
    X(IQ2_S, "iq2_s", 22, 256, 82)      \
    X(IQ4_XS, "iq4_xs", 23, 256, 136)   \
    X(IQ1_M, "iq1_m", 29, 256, 56)      \
    X(MXFP4, "mxfp4", 39, 32, 17)

typedef enum {
    ST_QTYPE_NONE = -1,
#define ST_QTYPE_ENUM_(id, name, ggml, qk, bytes) ST_##id = ggml,
    ST_QTYPES(ST_QTYPE_ENUM_)
#undef ST_QTYPE_ENUM_
} st_qtype;

/* q8_1 activation block: f16 d, f16 s (sum of the f32 inputs, as ggml's CUDA
 * quantize kernel stores it), 32 int8 values. 36 bytes. */
#define ST_Q8_1_BLOCK_BYTES 36
#define ST_Q8_1_QK 32

/* Whether T is one of the types above. */
ST_API bool st_qtype_valid(int t);
/* ggml's name ("iq3_s"), or "?" for an unknown type. */
ST_API const char *st_qtype_name(st_qtype t);
/* Parses a ggml type name (case-insensitive). ST_QTYPE_NONE when unknown. */
ST_API st_qtype st_qtype_from_name(const char *name);
/* Values per block (32 or 256); 0 for an unknown type. */
ST_API int st_qtype_block_values(st_qtype t);
/* Bytes per block; 0 for an unknown type. */
ST_API int st_qtype_block_bytes(st_qtype t);
/* Bytes of one row of K values; 0 when K is not a multiple of the block. */
ST_API size_t st_qtype_row_bytes(st_qtype t, int64_t k);
/* Space-separated list of the supported type names, for messages. */
ST_API const char *st_qtype_names(void);

/* IEEE binary16 <-> binary32. f16->f32 is exact; f32->f16 rounds to nearest
 * even (overflow -> inf, NaN stays NaN). Same bits on every backend. */
ST_API float st_f16_to_f32(uint16_t h);
ST_API uint16_t st_f32_to_f16(float f);

/* Dequantizes one row of K values from ggml block bytes SRC into DST, bit for
 * bit as ggml's to_float does. K must be a multiple of the block size. */
ST_API st_status st_dequantize_row(st_qtype t, const void *src, float *dst, int64_t k);

/* Makes one block of random bytes a valid block of type T: overwrites its
 * float scale fields (f16 or e8m0, as the type stores them) from D, a value
 * of magnitude about 1e-3 of either sign, so every value is finite (test
 * and benchmark inputs: random quant bits, sane scales). */
ST_API st_status st_block_set_scales(st_qtype t, void *block, float d);

/* Quantizes K f32 values (K a multiple of 32) to q8_1 blocks
 * (K/32 * 36 bytes): d = max|x|/127 (IEEE division), q = roundf(x/d),
 * s = butterfly sum of x (lane i adds lane i^o for o = 16,8,4,2,1), d and s
 * stored as f16. Produces the same bytes as the GPU kernels. */
ST_API st_status st_quantize_q8_1(const float *x, void *dst, int64_t k);

#ifdef __cplusplus
}
#endif
#endif
