/* Internal: a GGUF (the model file of ggml and llama.cpp) reader for untrusted input.
 *
 * GGUF v2 and v3, little-endian. The parser takes (pointer, length) and
 * checks every count, length and offset against the bytes that are actually
 * there before it allocates or reads anything. Nothing of this header may
 * appear in the public API (include/strata/tools/model.h wraps it).
 *
 * Lifetime: strings (keys, string values, tensor names) are copied and
 * NUL-terminated; array elements and tensor data are NOT copied, they point
 * into the parsed buffer. st_gguf_parse() therefore needs the buffer to
 * outlive the st_gguf; st_gguf_open() owns its read-only mapping.
 */
#ifndef STRATA_GGUF_H
#define STRATA_GGUF_H

#include "strata/tools/model.h"
#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits for hostile files (real models are far below them). */
#define ST_GGUF_MAX_STRING (1u << 20)   /* bytes of one key or string */
#define ST_GGUF_MAX_DIMS 4
#define ST_GGUF_MAX_ARRAY_DEPTH 4       /* an array inside an array ... */
#define ST_GGUF_DEFAULT_ALIGNMENT 32

/* Value types; the numbers are the file's. */
typedef enum {
    ST_GGUF_UINT8 = 0,
    ST_GGUF_INT8 = 1,
    ST_GGUF_UINT16 = 2,
    ST_GGUF_INT16 = 3,
    ST_GGUF_UINT32 = 4,
    ST_GGUF_INT32 = 5,
    ST_GGUF_FLOAT32 = 6,
    ST_GGUF_BOOL = 7,
    ST_GGUF_STRING = 8,
    ST_GGUF_ARRAY = 9,
    ST_GGUF_UINT64 = 10,
    ST_GGUF_INT64 = 11,
    ST_GGUF_FLOAT64 = 12,
} st_gguf_vtype;

typedef struct {
    char *key;             /* NUL-terminated copy (may hold an inner NUL) */
    size_t key_len;
    st_gguf_vtype type;
    size_t file_offset;    /* where the key's length field starts */
    union {
        uint64_t u64;      /* UINT8/16/32/64, BOOL (as stored) */
        int64_t i64;       /* INT8/16/32/64, sign-extended */
        float f32;
        double f64;
        struct {
            char *s;       /* NUL-terminated copy */
            size_t len;
        } str;
        struct {
            st_gguf_vtype elem;
            uint64_t count;
            const uint8_t *raw;  /* the elements as stored, raw_len bytes */
            size_t raw_len;
        } arr;
    } v;
} st_gguf_kv;

typedef struct {
    char *name;             /* NUL-terminated copy (may hold an inner NUL) */
    size_t name_len;
    uint32_t n_dims;        /* as stored (0..4) */
    int64_t ne[ST_GGUF_MAX_DIMS]; /* missing dimensions are 1 */
    int64_t n_elements;
    uint32_t type;          /* ggml type id, possibly unknown */
    uint64_t offset;        /* within the data section */
    uint64_t file_offset;   /* data_offset + offset */
    bool size_known;        /* the type's block layout is known */
    uint64_t size;          /* bytes; 0 when !size_known */
    const uint8_t *data;    /* into the buffer; NULL when offset is past the end */
} st_gguf_tensor;

typedef struct st_gguf st_gguf;

/* Parses LEN bytes at BUF. On success *OUT owns a description whose tensor
 * data and array elements point into BUF (which must outlive it). On failure
 * *OUT is NULL, st_last_error() names the problem and its byte offset, and
 * nothing is leaked. ST_ERR_PARSE for malformed input, ST_ERR_NOMEM. */
st_status st_gguf_parse(const uint8_t *buf, size_t len, st_gguf **out);

/* Maps PATH read-only and parses it; the st_gguf keeps the mapping.
 * ST_ERR_IO when the file cannot be opened or mapped. */
st_status st_gguf_open(const char *path, st_gguf **out);

/* Frees everything (and unmaps a file from st_gguf_open). NULL is ok. */
void st_gguf_close(st_gguf *g);

uint32_t st_gguf_version(const st_gguf *g);
size_t st_gguf_alignment(const st_gguf *g);
/* Absolute offset of the tensor data section. */
size_t st_gguf_data_offset(const st_gguf *g);
/* The whole parsed buffer (the mapping for st_gguf_open). */
const uint8_t *st_gguf_bytes(const st_gguf *g, size_t *len);

size_t st_gguf_kv_count(const st_gguf *g);
const st_gguf_kv *st_gguf_kv_at(const st_gguf *g, size_t i);
/* The pair with key KEY, or NULL. */
const st_gguf_kv *st_gguf_find_kv(const st_gguf *g, const char *key);

size_t st_gguf_tensor_count(const st_gguf *g);
const st_gguf_tensor *st_gguf_tensor_at(const st_gguf *g, size_t i);
/* The tensor named NAME, or NULL. */
const st_gguf_tensor *st_gguf_find_tensor(const st_gguf *g, const char *name);

/* The value of an integer KV (any of the 8 integer types; UINT64 only up to
 * INT64_MAX). False for other types. */
bool st_gguf_kv_int(const st_gguf_kv *kv, int64_t *out);
/* The string of a STRING KV, NULL for other types. */
const char *st_gguf_kv_str(const st_gguf_kv *kv);

/* Bytes of one element of a fixed-size type; 0 for STRING and ARRAY. */
size_t st_gguf_vtype_size(st_gguf_vtype t);
/* "u32", "str", "arr"...; "?" when unknown. */
const char *st_gguf_vtype_name(st_gguf_vtype t);

/* Element I of an array of an integer type, as int64 (UINT64 above
 * INT64_MAX: false). False when out of range or not integers. */
bool st_gguf_array_int(const st_gguf_kv *kv, uint64_t i, int64_t *out);
/* Walks an array of strings: start with *POS = 0; each call gives the next
 * element (pointer into the buffer, not NUL-terminated) and returns false at
 * the end or when KV is not an array of strings. The parser validated every
 * element, so the walk cannot run off the buffer. */
bool st_gguf_array_next_str(const st_gguf_kv *kv, size_t *pos, const char **s, size_t *len);

/* ggml's name of any ggml type id ("f32", "q5_1", "iq3_s"); "?" when the id
 * is none ggml ever had. */
const char *st_gguf_type_name(uint32_t ggml_type);
/* Block geometry of the types whose size the reader computes (F32, F16 and
 * every ST_QTYPES type); false for the others. */
bool st_gguf_type_block(uint32_t ggml_type, uint32_t *values, uint32_t *bytes);

/* Writes S (LEN bytes) into DST (N bytes, N > 0) for an error message:
 * printable ASCII kept, the rest as \xNN, cut with "..." past about 60
 * characters. Returns DST. */
const char *st_gguf_printable(char *dst, size_t n, const char *s, size_t len);

#endif
