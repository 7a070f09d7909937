/* GGUF reader for untrusted input (see gguf.h for the contract).
 *
 * Every read goes through a cursor that refuses to move past the end, and
 * every count is compared with the bytes that could hold it before anything
 * is allocated, so a hostile header cannot make us allocate or loop more than
 * the file's own size allows. */
#define _POSIX_C_SOURCE 200809L

#include "gguf.h"
#include "tools_internal.h"
#include "strata/files.h"
#include "strata/formats.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Smallest possible encodings: a KV is a key length, a value type and at
 * least one value byte; a tensor info is a name length, n_dims, the type and
 * the offset (n_dims may be 0). */
#define MIN_KV_BYTES (8 + 4 + 1)
#define MIN_TENSOR_INFO_BYTES (8 + 4 + 4 + 8)
#define MIN_ARRAY_BYTES (4 + 8)

struct st_gguf {
    const uint8_t *buf;
    size_t len;
    void *map; /* st_gguf_open's mapping (map_len bytes), else NULL */
    size_t map_len;
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    st_gguf_kv *kvs;
    size_t n_kv, cap_kv;
    st_gguf_tensor *tensors;
    size_t n_tensors, cap_tensors;
};

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char what[192]; /* what is being read, for the truncation message */
} reader;

/* ---- checked arithmetic ---- */

static bool mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    if (a != 0 && b > UINT64_MAX / a) return false;
    *r = a * b;
    return true;
}

/* ---- the cursor ---- */

static size_t left(const reader *r) { return r->len - r->pos; }

static st_status truncated(const reader *r)
{
    return st_fail(ST_ERR_PARSE, "gguf: truncated at byte %zu while reading %s", r->pos, r->what);
}

static uint64_t load_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static st_status read_le(reader *r, int n, uint64_t *v)
{
    *v = 0; /* defined on failure too (keeps -Wmaybe-uninitialized quiet) */
    if (left(r) < (size_t)n) return truncated(r);
    *v = load_le(r->buf + r->pos, n);
    r->pos += (size_t)n;
    return ST_OK;
}

static st_status read_u32(reader *r, uint32_t *v)
{
    uint64_t x;
    st_status s = read_le(r, 4, &x);
    *v = (uint32_t)x;
    return s;
}

static st_status read_u64(reader *r, uint64_t *v) { return read_le(r, 8, v); }

/* Reads a string's length and checks its bytes are there; *AT is where the
 * bytes start. */
static st_status read_string_span(reader *r, size_t *at, size_t *n)
{
    size_t start = r->pos;
    uint64_t len;
    *at = *n = 0;
    ST_TRY(read_u64(r, &len));
    if (len > ST_GGUF_MAX_STRING)
        return st_fail(ST_ERR_PARSE, "gguf: string length %" PRIu64 " at byte %zu while reading %s exceeds 1 MiB",
                       len, start, r->what);
    if (len > left(r)) return truncated(r);
    *at = r->pos;
    *n = (size_t)len;
    r->pos += (size_t)len;
    return ST_OK;
}

static st_status read_string(reader *r, char **out, size_t *out_len)
{
    size_t at, n;
    ST_TRY(read_string_span(r, &at, &n));
    char *s = malloc(n + 1);
    if (!s) return st_fail(ST_ERR_NOMEM, "gguf: out of memory for a %zu-byte string", n);
    memcpy(s, r->buf + at, n);
    s[n] = '\0';
    *out = s;
    *out_len = n;
    return ST_OK;
}

/* ---- names ---- */

const char *st_gguf_printable(char *dst, size_t n, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < n; i++) {
        if (i >= 60) {
            memcpy(dst + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            dst[o++] = (char)c;
        } else {
            snprintf(dst + o, n - o, "\\x%02x", c);
            o += 4;
        }
    }
    dst[o] = '\0';
    return dst;
}

static const char *const VTYPE_NAMES[] = {"u8",  "i8",  "u16", "i16", "u32", "i32", "f32",
                                          "bool", "str", "arr", "u64", "i64", "f64"};

const char *st_gguf_vtype_name(st_gguf_vtype t)
{
    return ((unsigned)t < ST_ARRAY_LEN(VTYPE_NAMES)) ? VTYPE_NAMES[t] : "?";
}

size_t st_gguf_vtype_size(st_gguf_vtype t)
{
    switch (t) {
    case ST_GGUF_UINT8: case ST_GGUF_INT8: case ST_GGUF_BOOL: return 1;
    case ST_GGUF_UINT16: case ST_GGUF_INT16: return 2;
    case ST_GGUF_UINT32: case ST_GGUF_INT32: case ST_GGUF_FLOAT32: return 4;
    case ST_GGUF_UINT64: case ST_GGUF_INT64: case ST_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static bool vtype_valid(uint32_t t) { return t <= ST_GGUF_FLOAT64; }

/* ggml's type names by id (ids ggml removed keep their old names). */
static const char *const GGML_TYPE_NAMES[] = {
    "f32",     "f16",     "q4_0",     "q4_1",   "q4_2",    "q4_3",     "q5_0",       "q5_1",
    "q8_0",    "q8_1",    "q2_K",     "q3_K",   "q4_K",    "q5_K",     "q6_K",       "q8_K",
    "iq2_xxs", "iq2_xs",  "iq3_xxs",  "iq1_s",  "iq4_nl",  "iq3_s",    "iq2_s",      "iq4_xs",
    "i8",      "i16",     "i32",      "i64",    "f64",     "iq1_m",    "bf16",       "q4_0_4_4",
    "q4_0_4_8", "q4_0_8_8", "tq1_0",  "tq2_0",  "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4",
};

const char *st_gguf_type_name(uint32_t t)
{
    return t < ST_ARRAY_LEN(GGML_TYPE_NAMES) ? GGML_TYPE_NAMES[t] : "?";
}

bool st_gguf_type_block(uint32_t t, uint32_t *values, uint32_t *bytes)
{
    switch (t) {
    case 0: *values = 1; *bytes = 4; return true;  /* F32 */
    case 1: *values = 1; *bytes = 2; return true;  /* F16 */
#define ST_GGUF_BLOCK_(id, name, ggml, qk, nb) \
    case ggml: *values = qk; *bytes = nb; return true;
    ST_QTYPES(ST_GGUF_BLOCK_)
#undef ST_GGUF_BLOCK_
    default: return false;
    }
}

/* ---- growing the tables (each entry consumed file bytes, so the memory
 * stays proportional to the input) ---- */

static st_status grow(void **arr, size_t *cap, size_t need, size_t elem, uint64_t limit)
{
    if (need <= *cap) return ST_OK;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > limit) c = (size_t)limit;
    if (c < need) c = need;
    void *p = realloc(*arr, c * elem);
    if (!p) return st_fail(ST_ERR_NOMEM, "gguf: out of memory for %zu table entries", c);
    *arr = p;
    *cap = c;
    return ST_OK;
}

/* ---- values ---- */

static st_status skip_array(reader *r, uint32_t elem, uint64_t count, int depth);

static st_status skip_elements(reader *r, uint32_t elem, uint64_t count, int depth)
{
    size_t at = r->pos;
    if (!vtype_valid(elem))
        return st_fail(ST_ERR_PARSE, "gguf: unknown array element type %" PRIu32 " at byte %zu while reading %s",
                       elem, at, r->what);
    size_t es = st_gguf_vtype_size((st_gguf_vtype)elem);
    size_t min = es ? es : (elem == ST_GGUF_STRING ? 8 : MIN_ARRAY_BYTES);
    if (count > left(r) / min)
        return st_fail(ST_ERR_PARSE,
                       "gguf: array of %" PRIu64 " %s elements at byte %zu while reading %s needs more than the "
                       "%zu bytes left",
                       count, st_gguf_vtype_name((st_gguf_vtype)elem), at, r->what, left(r));
    if (es) {
        r->pos += (size_t)count * es;
        return ST_OK;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (elem == ST_GGUF_STRING) {
            size_t s, n;
            ST_TRY(read_string_span(r, &s, &n));
        } else {
            uint32_t sub;
            uint64_t n;
            ST_TRY(read_u32(r, &sub));
            ST_TRY(read_u64(r, &n));
            ST_TRY(skip_array(r, sub, n, depth + 1));
        }
    }
    return ST_OK;
}

static st_status skip_array(reader *r, uint32_t elem, uint64_t count, int depth)
{
    if (depth > ST_GGUF_MAX_ARRAY_DEPTH)
        return st_fail(ST_ERR_PARSE, "gguf: arrays nested deeper than %d at byte %zu while reading %s",
                       ST_GGUF_MAX_ARRAY_DEPTH, r->pos, r->what);
    return skip_elements(r, elem, count, depth);
}

/* The value of a fixed-size type stored at P (its bytes are there). */
static void decode_scalar(st_gguf_kv *kv, const uint8_t *p)
{
    uint64_t x = load_le(p, (int)st_gguf_vtype_size(kv->type));
    switch (kv->type) {
    case ST_GGUF_INT8: kv->v.i64 = (int8_t)(uint8_t)x; break;
    case ST_GGUF_INT16: kv->v.i64 = (int16_t)(uint16_t)x; break;
    case ST_GGUF_INT32: kv->v.i64 = (int32_t)(uint32_t)x; break;
    case ST_GGUF_INT64: memcpy(&kv->v.i64, &x, 8); break;
    case ST_GGUF_FLOAT32: {
        uint32_t b = (uint32_t)x;
        memcpy(&kv->v.f32, &b, 4);
        break;
    }
    case ST_GGUF_FLOAT64: memcpy(&kv->v.f64, &x, 8); break;
    default: kv->v.u64 = x; break; /* unsigned types and BOOL */
    }
}

static st_status read_value(reader *r, st_gguf_kv *kv)
{
    size_t es = st_gguf_vtype_size(kv->type);
    if (es) {
        if (left(r) < es) return truncated(r);
        decode_scalar(kv, r->buf + r->pos);
        r->pos += es;
        return ST_OK;
    }
    if (kv->type == ST_GGUF_STRING) return read_string(r, &kv->v.str.s, &kv->v.str.len);
    /* ST_GGUF_ARRAY: the caller checked the type is a known one. */
    uint32_t elem;
    uint64_t count;
    ST_TRY(read_u32(r, &elem));
    ST_TRY(read_u64(r, &count));
    size_t start = r->pos;
    ST_TRY(skip_array(r, elem, count, 1));
    kv->v.arr.elem = (st_gguf_vtype)elem;
    kv->v.arr.count = count;
    kv->v.arr.raw = r->buf + start;
    kv->v.arr.raw_len = r->pos - start;
    return ST_OK;
}

static bool same_name(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && memcmp(a, b, alen) == 0;
}

static st_status read_kvs(reader *r, st_gguf *g, uint64_t n_kv)
{
    char pk[256];
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(r->what, sizeof r->what, "the key of kv %" PRIu64, i);
        size_t at = r->pos;
        char *key;
        size_t key_len;
        ST_TRY(read_string(r, &key, &key_len));
        st_status s = grow((void **)&g->kvs, &g->cap_kv, g->n_kv + 1, sizeof *g->kvs, n_kv);
        if (s != ST_OK) {
            free(key);
            return s;
        }
        st_gguf_kv *kv = &g->kvs[g->n_kv++];
        memset(kv, 0, sizeof *kv);
        kv->key = key;
        kv->key_len = key_len;
        kv->file_offset = at;
        kv->type = ST_GGUF_UINT8; /* nothing to free until the value is read */
        snprintf(r->what, sizeof r->what, "kv %" PRIu64 " (%s)", i, st_gguf_printable(pk, sizeof pk, key, key_len));
        uint32_t type;
        ST_TRY(read_u32(r, &type));
        if (!vtype_valid(type))
            return st_fail(ST_ERR_PARSE, "gguf: unknown value type %" PRIu32 " at byte %zu while reading %s", type,
                           r->pos - 4, r->what);
        kv->type = (st_gguf_vtype)type;
        ST_TRY(read_value(r, kv));
        if (same_name(key, key_len, "general.alignment", 17)) {
            if (kv->type != ST_GGUF_UINT32)
                return st_fail(ST_ERR_PARSE, "gguf: general.alignment at byte %zu has type %s (must be u32)", at,
                               st_gguf_vtype_name(kv->type));
            uint64_t a = kv->v.u64;
            if (a == 0 || (a & (a - 1)) != 0)
                return st_fail(ST_ERR_PARSE, "gguf: general.alignment %" PRIu64 " at byte %zu is not a power of two",
                               a, at);
            g->alignment = (size_t)a;
        }
    }
    return ST_OK;
}

/* ---- tensor infos ---- */

static st_status read_tensor_info(reader *r, st_gguf *g, uint64_t i, uint64_t n_tensors)
{
    char pn[256];
    snprintf(r->what, sizeof r->what, "tensor info %" PRIu64 " (name)", i);
    char *name;
    size_t name_len;
    ST_TRY(read_string(r, &name, &name_len));
    st_status s = grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof *g->tensors, n_tensors);
    if (s != ST_OK) {
        free(name);
        return s;
    }
    st_gguf_tensor *t = &g->tensors[g->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->name_len = name_len;
    const char *pname = st_gguf_printable(pn, sizeof pn, name, name_len);
    snprintf(r->what, sizeof r->what, "tensor info %" PRIu64 " (%s)", i, pname);

    size_t at = r->pos;
    ST_TRY(read_u32(r, &t->n_dims));
    if (t->n_dims > ST_GGUF_MAX_DIMS)
        return st_fail(ST_ERR_PARSE, "gguf: tensor %" PRIu64 " (%s) at byte %zu has %" PRIu32 " dimensions (at most %d)",
                       i, pname, at, t->n_dims, ST_GGUF_MAX_DIMS);
    uint64_t n_el = 1;
    for (int d = 0; d < ST_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if ((uint32_t)d < t->n_dims) {
            at = r->pos;
            ST_TRY(read_u64(r, &ne));
            if (ne > (uint64_t)INT64_MAX)
                return st_fail(ST_ERR_PARSE, "gguf: tensor %" PRIu64 " (%s) dimension %d at byte %zu is %" PRIu64
                               " (negative or too large)", i, pname, d, at, ne);
        }
        t->ne[d] = (int64_t)ne;
        if (!mul_u64(n_el, ne, &n_el) || n_el > (uint64_t)INT64_MAX)
            return st_fail(ST_ERR_PARSE, "gguf: tensor %" PRIu64 " (%s) element count overflows at byte %zu", i, pname,
                           at);
    }
    t->n_elements = (int64_t)n_el;

    at = r->pos;
    ST_TRY(read_u32(r, &t->type));
    uint32_t qk, nb;
    if (st_gguf_type_block(t->type, &qk, &nb)) {
        if (t->ne[0] % qk != 0)
            return st_fail(ST_ERR_PARSE, "gguf: tensor %" PRIu64 " (%s) row length %" PRId64
                           " is not a multiple of the %s block (%" PRIu32 " values; type at byte %zu)",
                           i, pname, t->ne[0], st_gguf_type_name(t->type), qk, at);
        uint64_t size = (uint64_t)t->ne[0] / qk;
        bool ok = mul_u64(size, nb, &size);
        for (int d = 1; d < ST_GGUF_MAX_DIMS && ok; d++) ok = mul_u64(size, (uint64_t)t->ne[d], &size);
        if (!ok)
            return st_fail(ST_ERR_PARSE, "gguf: tensor %" PRIu64 " (%s) byte size overflows (type at byte %zu)", i,
                           pname, at);
        t->size = size;
        t->size_known = true;
    }

    at = r->pos;
    ST_TRY(read_u64(r, &t->offset));
    if (t->offset % g->alignment != 0)
        return st_fail(ST_ERR_PARSE, "gguf: tensor %" PRIu64 " (%s) data offset %" PRIu64
                       " at byte %zu is not a multiple of the alignment %zu", i, pname, t->offset, at, g->alignment);
    return ST_OK;
}

/* Places every tensor's data inside the data section. */
static st_status place_tensors(st_gguf *g)
{
    char pn[256];
    if (g->n_tensors > 0 && g->data_offset > g->len)
        return st_fail(ST_ERR_PARSE, "gguf: the tensor data section would start at byte %zu, past the end of the file "
                       "(%zu bytes)", g->data_offset, g->len);
    uint64_t data_size = g->data_offset <= g->len ? g->len - g->data_offset : 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        st_gguf_tensor *t = &g->tensors[i];
        const char *pname = st_gguf_printable(pn, sizeof pn, t->name, t->name_len);
        if (t->offset > data_size)
            return st_fail(ST_ERR_PARSE, "gguf: tensor %zu (%s) data offset %" PRIu64 " is past the end of the data "
                           "section (%" PRIu64 " bytes from byte %zu)", i, pname, t->offset, data_size, g->data_offset);
        t->file_offset = g->data_offset + t->offset;
        if (t->size > data_size - t->offset)
            return st_fail(ST_ERR_PARSE, "gguf: tensor %zu (%s) data [offset %" PRIu64 ", %" PRIu64
                           " bytes) runs past the end of the file (%zu bytes)", i, pname, t->file_offset, t->size,
                           g->len);
        t->data = g->buf + t->file_offset;
    }
    return ST_OK;
}

/* ---- duplicate names (sorted, so a file with many tensors stays fast) ---- */

typedef struct {
    const char *s;
    size_t len, index;
} name_ref;

static int cmp_name_ref(const void *pa, const void *pb)
{
    const name_ref *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->index < b->index ? -1 : (a->index > b->index);
}

static st_status check_unique(st_gguf *g, bool tensors)
{
    size_t n = tensors ? g->n_tensors : g->n_kv;
    if (n < 2) return ST_OK;
    name_ref *refs = malloc(n * sizeof *refs);
    if (!refs) return st_fail(ST_ERR_NOMEM, "gguf: out of memory checking %zu names", n);
    for (size_t i = 0; i < n; i++) {
        refs[i].s = tensors ? g->tensors[i].name : g->kvs[i].key;
        refs[i].len = tensors ? g->tensors[i].name_len : g->kvs[i].key_len;
        refs[i].index = i;
    }
    qsort(refs, n, sizeof *refs, cmp_name_ref);
    st_status s = ST_OK;
    for (size_t i = 1; i < n && s == ST_OK; i++) {
        if (!same_name(refs[i - 1].s, refs[i - 1].len, refs[i].s, refs[i].len)) continue;
        char pn[256];
        st_gguf_printable(pn, sizeof pn, refs[i].s, refs[i].len);
        if (tensors)
            s = st_fail(ST_ERR_PARSE, "gguf: duplicate tensor name '%s' (tensors %zu and %zu)", pn, refs[i - 1].index,
                        refs[i].index);
        else
            s = st_fail(ST_ERR_PARSE, "gguf: duplicate key '%s' (kv %zu at byte %zu and kv %zu at byte %zu)", pn,
                        refs[i - 1].index, g->kvs[refs[i - 1].index].file_offset, refs[i].index,
                        g->kvs[refs[i].index].file_offset);
    }
    free(refs);
    return s;
}

/* ---- the file ---- */

static st_status parse_into(st_gguf *g)
{
    reader r = {.buf = g->buf, .len = g->len, .pos = 0};
    snprintf(r.what, sizeof r.what, "the header");
    if (g->len < 4) return truncated(&r);
    if (memcmp(g->buf, "GGUF", 4) != 0) {
        char pm[64];
        return st_fail(ST_ERR_PARSE, "gguf: not a GGUF file (magic '%s')",
                       st_gguf_printable(pm, sizeof pm, (const char *)g->buf, 4));
    }
    r.pos = 4;
    ST_TRY(read_u32(&r, &g->version));
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return st_fail(ST_ERR_PARSE, "gguf: big-endian GGUF file (only little-endian files are supported)");
    if (g->version != 2 && g->version != 3)
        return st_fail(ST_ERR_PARSE, "gguf: unsupported GGUF version %" PRIu32 " (2 and 3 are supported)", g->version);
    uint64_t n_tensors, n_kv;
    ST_TRY(read_u64(&r, &n_tensors));
    ST_TRY(read_u64(&r, &n_kv));
    size_t rest = left(&r);
    if (n_kv > rest / MIN_KV_BYTES)
        return st_fail(ST_ERR_PARSE, "gguf: header claims %" PRIu64 " key/value pairs (byte 16), but the %zu bytes "
                       "after the header hold at most %zu", n_kv, rest, rest / MIN_KV_BYTES);
    if (n_tensors > rest / MIN_TENSOR_INFO_BYTES)
        return st_fail(ST_ERR_PARSE, "gguf: header claims %" PRIu64 " tensors (byte 8), but the %zu bytes after the "
                       "header hold at most %zu", n_tensors, rest, rest / MIN_TENSOR_INFO_BYTES);
    if (n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_INFO_BYTES > rest)
        return st_fail(ST_ERR_PARSE, "gguf: header claims %" PRIu64 " key/value pairs and %" PRIu64
                       " tensors, more than the %zu bytes after the header can hold", n_kv, n_tensors, rest);

    ST_TRY(read_kvs(&r, g, n_kv));
    ST_TRY(check_unique(g, false));
    for (uint64_t i = 0; i < n_tensors; i++) ST_TRY(read_tensor_info(&r, g, i, n_tensors));
    ST_TRY(check_unique(g, true));
    /* r.pos <= len, so rounding up cannot overflow a size_t. */
    g->data_offset = (r.pos + g->alignment - 1) / g->alignment * g->alignment;
    return place_tensors(g);
}

st_status st_gguf_parse(const uint8_t *buf, size_t len, st_gguf **out)
{
    if (!out) return st_fail(ST_ERR_INVALID_ARG, "gguf: no output pointer");
    *out = NULL;
    if (!buf && len) return st_fail(ST_ERR_INVALID_ARG, "gguf: no buffer");
    st_gguf *g = calloc(1, sizeof *g);
    if (!g) return st_fail(ST_ERR_NOMEM, "gguf: out of memory");
    static const uint8_t empty[1];
    g->buf = buf ? buf : empty;
    g->len = len;
    g->alignment = ST_GGUF_DEFAULT_ALIGNMENT;
    st_status s = parse_into(g);
    if (s != ST_OK) {
        st_gguf_close(g);
        return s;
    }
    *out = g;
    return ST_OK;
}

st_status st_gguf_open(const char *path, st_gguf **out)
{
    if (!out || !path) return st_fail(ST_ERR_INVALID_ARG, "gguf: no path or output pointer");
    *out = NULL;
    /* Refuses a FIFO or a device without blocking on it (strata/files.h); a
     * regular file is mapped, so its size costs address space only. */
    int fd;
    uint64_t size;
    char why[ST_FILE_WHY_MAX];
    if (st_file_open_regular(path, &fd, &size, why, NULL) != ST_OK) return st_fail(ST_ERR_IO, "gguf: cannot open: %s", why);
    if (size > SIZE_MAX) {
        close(fd);
        return st_fail(ST_ERR_IO, "gguf: file too large to map");
    }
    size_t len = (size_t)size;
    void *map = NULL;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return st_fail(ST_ERR_IO, "gguf: cannot map %zu bytes (%s)", len, strerror(e));
        }
    }
    close(fd);
    st_gguf *g;
    st_status s = st_gguf_parse(map, len, &g);
    if (s != ST_OK) {
        if (map) munmap(map, len);
        return s;
    }
    g->map = map;
    g->map_len = len;
    *out = g;
    return ST_OK;
}

void st_gguf_close(st_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        if (g->kvs[i].type == ST_GGUF_STRING) free(g->kvs[i].v.str.s);
    }
    for (size_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kvs);
    free(g->tensors);
    if (g->map) munmap(g->map, g->map_len);
    free(g);
}

/* ---- accessors ---- */

uint32_t st_gguf_version(const st_gguf *g) { return g->version; }
size_t st_gguf_alignment(const st_gguf *g) { return g->alignment; }
size_t st_gguf_data_offset(const st_gguf *g) { return g->data_offset; }

const uint8_t *st_gguf_bytes(const st_gguf *g, size_t *len)
{
    if (len) *len = g->len;
    return g->buf;
}

size_t st_gguf_kv_count(const st_gguf *g) { return g->n_kv; }
size_t st_gguf_tensor_count(const st_gguf *g) { return g->n_tensors; }

const st_gguf_kv *st_gguf_kv_at(const st_gguf *g, size_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }

const st_gguf_tensor *st_gguf_tensor_at(const st_gguf *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const st_gguf_kv *st_gguf_find_kv(const st_gguf *g, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < g->n_kv; i++)
        if (same_name(g->kvs[i].key, g->kvs[i].key_len, key, n)) return &g->kvs[i];
    return NULL;
}

const st_gguf_tensor *st_gguf_find_tensor(const st_gguf *g, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < g->n_tensors; i++)
        if (same_name(g->tensors[i].name, g->tensors[i].name_len, name, n)) return &g->tensors[i];
    return NULL;
}

bool st_gguf_kv_int(const st_gguf_kv *kv, int64_t *out)
{
    if (!kv) return false;
    switch (kv->type) {
    case ST_GGUF_INT8: case ST_GGUF_INT16: case ST_GGUF_INT32: case ST_GGUF_INT64:
        *out = kv->v.i64;
        return true;
    case ST_GGUF_UINT8: case ST_GGUF_UINT16: case ST_GGUF_UINT32: case ST_GGUF_UINT64:
        if (kv->v.u64 > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)kv->v.u64;
        return true;
    default: return false;
    }
}

const char *st_gguf_kv_str(const st_gguf_kv *kv)
{
    return (kv && kv->type == ST_GGUF_STRING) ? kv->v.str.s : NULL;
}

bool st_gguf_array_int(const st_gguf_kv *kv, uint64_t i, int64_t *out)
{
    if (!kv || kv->type != ST_GGUF_ARRAY || i >= kv->v.arr.count) return false;
    st_gguf_kv e = {.type = kv->v.arr.elem};
    size_t es = st_gguf_vtype_size(e.type);
    if (!es) return false;
    decode_scalar(&e, kv->v.arr.raw + (size_t)i * es);
    return st_gguf_kv_int(&e, out);
}

bool st_gguf_array_next_str(const st_gguf_kv *kv, size_t *pos, const char **s, size_t *len)
{
    if (!kv || kv->type != ST_GGUF_ARRAY || kv->v.arr.elem != ST_GGUF_STRING) return false;
    if (*pos > kv->v.arr.raw_len || kv->v.arr.raw_len - *pos < 8) return false;
    uint64_t n = load_le(kv->v.arr.raw + *pos, 8);
    if (n > kv->v.arr.raw_len - *pos - 8) return false; /* cannot happen after parsing */
    *s = (const char *)kv->v.arr.raw + *pos + 8;
    *len = (size_t)n;
    *pos += 8 + (size_t)n;
    return true;
}
