/* strata-tune tools library: the reader of STQV reference-vector files
 * (version 1 of the format the README of the ggml quant reference data
 * defines; that data set is kept outside this repository, tests/data/vectors
 * holds vectors from it). The reader trusts nothing in
 * the file: every header field, section offset and size is checked against
 * the file length and against the sizes the header implies before anything
 * is handed out, so a hostile file gives one clear st_fail() message (see
 * st_last_error()), never an out-of-bounds read. */
#ifndef STRATA_TOOLS_VECTORS_H
#define STRATA_TOOLS_VECTORS_H

#include "strata/tools/base.h"

#include "strata/formats.h"
#include "strata/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_STQV_HEADER_BYTES 256
#define ST_STQV_VERSION 1
/* Files larger than this are refused (the public set is < 1 MB each). */
#define ST_STQV_MAX_BYTES ((size_t)1 << 30)

/* Section indices, in file order. X(ID, name). */
#define ST_STQV_SECTIONS(X) \
    X(W_F32, "W_F32")       \
    X(W_QUANT, "W_QUANT")   \
    X(W_DEQ, "W_DEQ")       \
    X(X_F32, "X_F32")       \
    X(Y_DEQ_F64, "Y_DEQ_F64") \
    X(X_Q8_1, "X_Q8_1")     \
    X(Y_Q8_1_F64, "Y_Q8_1_F64") \
    X(X_Q8_K, "X_Q8_K")     \
    X(X_VDT, "X_VDT")       \
    X(Y_CPU_F32, "Y_CPU_F32") \
    X(ROW_SCALE_F32, "ROW_SCALE_F32") \
    X(RESERVED, "reserved")

typedef enum {
#define ST_STQV_SEC_ENUM_(id, name) ST_STQV_##id,
    ST_STQV_SECTIONS(ST_STQV_SEC_ENUM_)
#undef ST_STQV_SEC_ENUM_
    ST_STQV_N_SECTIONS
} st_stqv_section;

/* Header flag bits. */
#define ST_STQV_FLAG_IMATRIX 1u
#define ST_STQV_FLAG_Q8_K 2u

/* An opened file. All fields are validated; read them, do not write them. */
typedef struct st_stqv {
    uint32_t version;
    st_qtype type;          /* a type st_qtype_valid() accepts */
    uint32_t m, k, t;       /* rows, row length, tokens; all > 0 */
    uint32_t seed, flags;
    uint32_t qk, block_bytes, row_bytes; /* agree with the type and K */
    uint32_t vec_dot_type;  /* 15 (Q8_K), 8 (Q8_0) or 9 (Q8_1: Q4_1, Q5_1) */
    uint64_t sec_off[ST_STQV_N_SECTIONS];  /* absolute, 8-aligned; 0 if absent */
    uint64_t sec_size[ST_STQV_N_SECTIONS]; /* 0 if absent */
    size_t size;            /* file length */
    uint8_t *data;          /* the whole file (malloc'd, so sections are aligned) */
} st_stqv;

/* Reads and validates the file at PATH. On success *OUT is a new reader to
 * close with st_stqv_close(); on failure *OUT is NULL and st_last_error()
 * says why (no path in the message: the caller names the file).
 * ST_ERR_IO: cannot open/read; ST_ERR_PARSE: not a valid STQV v1 file. */
ST_API st_status st_stqv_open(const char *path, st_stqv **out);

/* Same, from LEN bytes at DATA (copied; DATA need not stay alive). */
ST_API st_status st_stqv_parse(const void *data, size_t len, st_stqv **out);

/* Frees S. Accepts NULL. */
ST_API void st_stqv_close(st_stqv *s);

/* Pointer to section SEC and its size in *SIZE (may be NULL). NULL (and size
 * 0) when the section is absent or SEC is out of range. Sections required by
 * the format (0..6, 8..10, and 7 when flags say so) are always present after
 * a successful open, with exactly the size the header implies. The pointer
 * is 8-byte aligned: cast to float/double and read directly. */
ST_API const void *st_stqv_section_data(const st_stqv *s, int sec, size_t *size);

/* "W_DEQ" etc.; "?" when out of range. */
ST_API const char *st_stqv_section_name(int sec);

#ifdef __cplusplus
}
#endif
#endif
