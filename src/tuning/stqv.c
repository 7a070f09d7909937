/* STQV reference-vector reader: validate everything, then hand out pointers.
 * Layout: the reference data's README, "STQV binary format"
 * (strata/tools/vectors.h). */
#include "strata/tools/vectors.h"

#include "tools_internal.h"
#include "strata/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_sec_names[ST_STQV_N_SECTIONS] = {
#define ST_STQV_SEC_NAME_(id, name) name,
    ST_STQV_SECTIONS(ST_STQV_SEC_NAME_)
#undef ST_STQV_SEC_NAME_
};

const char *st_stqv_section_name(int sec)
{
    return (sec >= 0 && sec < ST_STQV_N_SECTIONS) ? g_sec_names[sec] : "?";
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

/* a*b*c in u64; false on overflow. */
static bool mul3(uint64_t a, uint64_t b, uint64_t c, uint64_t *r)
{
    if (a != 0 && b > UINT64_MAX / a) return false;
    uint64_t ab = a * b;
    if (ab != 0 && c > UINT64_MAX / ab) return false;
    *r = ab * c;
    return true;
}

#define PARSE_FAIL(...) st_fail(ST_ERR_PARSE, __VA_ARGS__)

/* Header fields that do not depend on the section table. */
static st_status check_header(const uint8_t *h, st_stqv *s)
{
    if (memcmp(h, "STQV", 4) != 0) return PARSE_FAIL("bad magic: not an STQV file");
    s->version = rd32(h + 4);
    if (s->version != ST_STQV_VERSION)
        return PARSE_FAIL("unsupported STQV version %u (this reader knows %d)", s->version, ST_STQV_VERSION);
    uint32_t type = rd32(h + 8);
    s->m = rd32(h + 12);
    s->k = rd32(h + 16);
    s->t = rd32(h + 20);
    s->seed = rd32(h + 24);
    s->flags = rd32(h + 28);
    s->qk = rd32(h + 32);
    s->block_bytes = rd32(h + 36);
    s->row_bytes = rd32(h + 40);
    s->vec_dot_type = rd32(h + 44);
    uint32_t n_sections = rd32(h + 48), header_size = rd32(h + 52);
    if (header_size != ST_STQV_HEADER_BYTES)
        return PARSE_FAIL("header_size is %u, version 1 has %d", header_size, ST_STQV_HEADER_BYTES);
    if (n_sections != ST_STQV_N_SECTIONS)
        return PARSE_FAIL("n_sections is %u, version 1 has %d", n_sections, ST_STQV_N_SECTIONS);
    if (!st_qtype_valid((int)type))
        return PARSE_FAIL("weight type id %u is not supported (supported: %s)", type, st_qtype_names());
    s->type = (st_qtype)type;
    if (s->m == 0 || s->k == 0 || s->t == 0)
        return PARSE_FAIL("empty shape: M=%u K=%u T=%u", s->m, s->k, s->t);
    if (s->qk != (uint32_t)st_qtype_block_values(s->type) || s->block_bytes != (uint32_t)st_qtype_block_bytes(s->type))
        return PARSE_FAIL("block of %u values / %u bytes does not match %s (%d / %d)", s->qk, s->block_bytes,
                          st_qtype_name(s->type), st_qtype_block_values(s->type), st_qtype_block_bytes(s->type));
    if (s->k % s->qk != 0) return PARSE_FAIL("K=%u is not a multiple of the %u-value block", s->k, s->qk);
    if ((uint64_t)s->k / s->qk * s->block_bytes != s->row_bytes)
        return PARSE_FAIL("row_bytes is %u, K=%u of %s needs %llu", s->row_bytes, s->k, st_qtype_name(s->type),
                          (unsigned long long)((uint64_t)s->k / s->qk * s->block_bytes));
    if (s->vec_dot_type != 8 && s->vec_dot_type != 9 && s->vec_dot_type != 15)
        return PARSE_FAIL("vec_dot_type %u is none of 8 (Q8_0), 9 (Q8_1), 15 (Q8_K)", s->vec_dot_type);
    if (s->vec_dot_type == 15 && s->k % 256 != 0)
        return PARSE_FAIL("vec_dot_type Q8_K needs K %% 256 == 0, K=%u", s->k);
    if ((s->flags & ST_STQV_FLAG_Q8_K) && s->k % 256 != 0)
        return PARSE_FAIL("flags say section 7 (Q8_K) is present but K=%u is not a multiple of 256", s->k);
    return ST_OK;
}

/* The size section I must have (ST_ERR_PARSE when the product overflows)
 * and whether it must be present. */
static st_status expected_size(const st_stqv *s, int i, uint64_t *size, bool *required)
{
    uint64_t M = s->m, K = s->k, T = s->t, r = 0;
    bool ok = true;
    *size = 0;
    *required = true;
    switch (i) {
    case ST_STQV_W_F32:
    case ST_STQV_W_DEQ: ok = mul3(4, M, K, &r); break;
    case ST_STQV_W_QUANT: ok = mul3(1, M, s->row_bytes, &r); break;
    case ST_STQV_X_F32: ok = mul3(4, T, K, &r); break;
    case ST_STQV_Y_DEQ_F64:
    case ST_STQV_Y_Q8_1_F64: ok = mul3(8, T, M, &r); break;
    case ST_STQV_X_Q8_1: ok = mul3(ST_Q8_1_BLOCK_BYTES, T, K / 32, &r); break;
    case ST_STQV_X_Q8_K:
        *required = (s->flags & ST_STQV_FLAG_Q8_K) != 0;
        ok = mul3(292, T, K / 256, &r);
        break;
    case ST_STQV_X_VDT:
        ok = s->vec_dot_type == 15  ? mul3(292, T, K / 256, &r)
             : s->vec_dot_type == 9 ? mul3(ST_Q8_1_BLOCK_BYTES, T, K / 32, &r)
                                    : mul3(34, T, K / 32, &r);
        break;
    case ST_STQV_Y_CPU_F32: ok = mul3(4, T, M, &r); break;
    case ST_STQV_ROW_SCALE_F32: ok = mul3(4, M, 1, &r); break;
    default: *required = false; break; /* reserved: any size, only bounds-checked */
    }
    if (!ok)
        return PARSE_FAIL("section %d (%s): size for M=%u K=%u T=%u overflows 64 bits", i, g_sec_names[i], s->m, s->k,
                          s->t);
    *size = r;
    return ST_OK;
}

static st_status check_sections(const uint8_t *h, size_t file_size, st_stqv *s)
{
    /* All implied sizes first: a shape whose sizes overflow is refused as
     * such, whatever the section table says. */
    uint64_t wants[ST_STQV_N_SECTIONS];
    bool requireds[ST_STQV_N_SECTIONS];
    for (int i = 0; i < ST_STQV_N_SECTIONS; i++) ST_TRY(expected_size(s, i, &wants[i], &requireds[i]));
    uint64_t prev_end = ST_STQV_HEADER_BYTES;
    int prev = -1;
    for (int i = 0; i < ST_STQV_N_SECTIONS; i++) {
        uint64_t off = rd64(h + 64 + 16 * i), size = rd64(h + 72 + 16 * i);
        uint64_t want = wants[i];
        bool required = requireds[i];
        bool present = off != 0 || size != 0;
        if (!present) {
            if (required) return PARSE_FAIL("section %d (%s) is missing", i, g_sec_names[i]);
            continue;
        }
        if (i == ST_STQV_X_Q8_K && !required)
            return PARSE_FAIL("section 7 (X_Q8_K) is present but flags bit 1 says it is not");
        if (i != ST_STQV_RESERVED && size != want)
            return PARSE_FAIL("section %d (%s) has %llu bytes, M=%u K=%u T=%u needs %llu", i, g_sec_names[i],
                              (unsigned long long)size, s->m, s->k, s->t, (unsigned long long)want);
        if (off % 8 != 0)
            return PARSE_FAIL("section %d (%s) offset %llu is not 8-byte aligned", i, g_sec_names[i],
                              (unsigned long long)off);
        if (off < prev_end) {
            if (prev < 0)
                return PARSE_FAIL("section %d (%s) offset %llu overlaps the %d-byte header", i, g_sec_names[i],
                                  (unsigned long long)off, ST_STQV_HEADER_BYTES);
            return PARSE_FAIL("section %d (%s) offset %llu overlaps section %d (%s) or comes before it", i,
                              g_sec_names[i], (unsigned long long)off, prev, g_sec_names[prev]);
        }
        if (size > UINT64_MAX - off)
            return PARSE_FAIL("section %d (%s): offset %llu + size %llu overflows", i, g_sec_names[i],
                              (unsigned long long)off, (unsigned long long)size);
        if (off + size > file_size)
            return PARSE_FAIL("section %d (%s) ends at byte %llu, past the end of the file (%zu bytes): truncated?", i,
                              g_sec_names[i], (unsigned long long)(off + size), file_size);
        s->sec_off[i] = off;
        s->sec_size[i] = size;
        prev_end = off + size;
        prev = i;
    }
    return ST_OK;
}

st_status st_stqv_parse(const void *data, size_t len, st_stqv **out)
{
    if (!out) return st_fail(ST_ERR_INVALID_ARG, "stqv: out is NULL");
    *out = NULL;
    if (!data && len) return st_fail(ST_ERR_INVALID_ARG, "stqv: data is NULL");
    if (len < ST_STQV_HEADER_BYTES)
        return PARSE_FAIL("truncated: %zu bytes, the header alone needs %d", len, ST_STQV_HEADER_BYTES);
    if (len > ST_STQV_MAX_BYTES) return PARSE_FAIL("file of %zu bytes is too large", len);
    st_stqv *s = calloc(1, sizeof *s);
    if (!s) return st_fail(ST_ERR_NOMEM, "stqv: out of memory");
    st_status rc = check_header(data, s);
    if (rc == ST_OK) rc = check_sections(data, len, s);
    if (rc == ST_OK) {
        s->data = malloc(len);
        if (!s->data) rc = st_fail(ST_ERR_NOMEM, "stqv: out of memory for %zu bytes", len);
    }
    if (rc != ST_OK) {
        free(s);
        return rc;
    }
    memcpy(s->data, data, len);
    s->size = len;
    *out = s;
    return ST_OK;
}

st_status st_stqv_open(const char *path, st_stqv **out)
{
    if (!out) return st_fail(ST_ERR_INVALID_ARG, "stqv: out is NULL");
    *out = NULL;
    if (!path) return st_fail(ST_ERR_INVALID_ARG, "stqv: path is NULL");
    /* A FIFO or a device is refused without blocking and the size bounds
     * what a huge file can cost (strata/files.h). */
    char *buf = NULL, why[ST_FILE_WHY_MAX];
    size_t len = 0;
    st_status rc = st_file_read_all(path, ST_STQV_MAX_BYTES, &buf, &len, why, NULL);
    if (rc != ST_OK) return st_fail(rc, "cannot open: %s", why);
    rc = st_stqv_parse(buf, len, out);
    free(buf);
    return rc;
}

void st_stqv_close(st_stqv *s)
{
    if (!s) return;
    free(s->data);
    free(s);
}

const void *st_stqv_section_data(const st_stqv *s, int sec, size_t *size)
{
    if (size) *size = 0;
    if (!s || sec < 0 || sec >= ST_STQV_N_SECTIONS || s->sec_size[sec] == 0) return NULL;
    if (size) *size = (size_t)s->sec_size[sec];
    return s->data + s->sec_off[sec];
}
