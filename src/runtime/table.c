/* The tuning table as a data structure: rows in insertion order, an
 * open-addressing hash over the keys for O(1) lookup, comments, and the
 * text form (st_table_format). Parsing is in table_parse.c, files in
 * table_io.c. */
#include "table_internal.h"
#include "internal.h"
#include "strata/table_meta.h"
#include "strata/variants.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_table {
    st_identity id;
    st_table_row *rows; /* insertion order */
    size_t n_rows, cap_rows;
    size_t *mmvq_idx, *expert_idx; /* indices into rows, per kind, in order */
    size_t n_mmvq, n_expert, cap_idx;
    /* Hash slots hold row index + 1; 0 is empty. Capacity is a power of two
     * kept at least twice the row count. */
    size_t *slots;
    size_t n_slots;
    char **comments;
    size_t n_comments, cap_comments;
    /* Shapes the tuner measured and kept the default for: its
     * "tuned-default <key>" comments, as rows of a table of their own
     * (created on the first such comment). */
    struct st_table *defaults;
};


const char *st_table_type_names(void)
{
    /* " q8_0 q4_K ..." as one literal; skip the leading space. */
#define ST_TYPE_NAME_TEXT_(id, name, ggml, qk, bytes) " " name
    static const char names[] = ST_QTYPES(ST_TYPE_NAME_TEXT_);
#undef ST_TYPE_NAME_TEXT_
    return names + 1;
}

/* ---- keys and hashing ---------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint64_t row_hash(const st_table_row *r)
{
    uint64_t h = mix(0x51a7a, (uint64_t)r->kind);
    if (r->kind == ST_ROW_MMVQ) {
        h = mix(h, (uint64_t)(uint32_t)r->mmvq.type);
        h = mix(h, (uint64_t)(uint32_t)r->mmvq.n_rows);
        return mix(h, (uint64_t)(uint32_t)r->mmvq.n_cols);
    }
    h = mix(h, (uint64_t)(uint32_t)r->expert.gu_type);
    h = mix(h, (uint64_t)(uint32_t)r->expert.down_type);
    h = mix(h, (uint64_t)(uint32_t)r->expert.n_embd);
    h = mix(h, (uint64_t)(uint32_t)r->expert.n_ff);
    return mix(h, (uint64_t)(uint32_t)r->expert.n_tokens);
}

static bool row_key_equal(const st_table_row *a, const st_table_row *b)
{
    if (a->kind != b->kind) return false;
    if (a->kind == ST_ROW_MMVQ)
        return a->mmvq.type == b->mmvq.type && a->mmvq.n_rows == b->mmvq.n_rows &&
               a->mmvq.n_cols == b->mmvq.n_cols;
    return a->expert.gu_type == b->expert.gu_type &&
           a->expert.down_type == b->expert.down_type &&
           a->expert.n_embd == b->expert.n_embd && a->expert.n_ff == b->expert.n_ff &&
           a->expert.n_tokens == b->expert.n_tokens;
}

/* The slot holding KEY, or the empty slot where it would go. */
static size_t find_slot(const st_table *t, const st_table_row *key)
{
    size_t mask = t->n_slots - 1;
    size_t i = (size_t)row_hash(key) & mask;
    while (t->slots[i] && !row_key_equal(&t->rows[t->slots[i] - 1], key))
        i = (i + 1) & mask;
    return i;
}

static st_status rehash(st_table *t, size_t n_slots)
{
    size_t *s = calloc(n_slots, sizeof *s);
    if (!s) return st_fail(ST_ERR_NOMEM, "table: out of memory");
    free(t->slots);
    t->slots = s;
    t->n_slots = n_slots;
    for (size_t r = 0; r < t->n_rows; r++) t->slots[find_slot(t, &t->rows[r])] = r + 1;
    return ST_OK;
}

static st_status grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return ST_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) return st_fail(ST_ERR_NOMEM, "table: too large");
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q) return st_fail(ST_ERR_NOMEM, "table: out of memory");
    *p = q;
    *cap = c;
    return ST_OK;
}

/* ---- create / destroy ---------------------------------------------------- */

static st_status table_new(st_table **out)
{
    st_table *t = calloc(1, sizeof *t);
    if (!t) return st_fail(ST_ERR_NOMEM, "table: out of memory");
    if (rehash(t, 16) != ST_OK) {
        free(t);
        return ST_ERR_NOMEM;
    }
    *out = t;
    return ST_OK;
}

/* A header token the parser can read back: non-empty, short enough, no
 * blank or control bytes, and (for the first) not starting a comment or
 * with a UTF-8 byte order mark (the parser refuses one by name). */
static bool token_ok(const char *s, bool first)
{
    const char *end = memchr(s, '\0', ST_TOKEN_MAX);
    size_t n = end ? (size_t)(end - s) : ST_TOKEN_MAX;
    if (n == 0 || n >= ST_TOKEN_MAX || (first && s[0] == '#')) return false;
    if (first && n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f) return false;
    return true;
}

st_status st_table_create(const st_identity *id, st_table **out)
{
    if (out) *out = NULL;
    if (!id || !out) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    if (!token_ok(id->arch, true) || !token_ok(id->runtime, false) ||
        !token_ok(id->compiler, false) || id->space < 0 || (id->model[0] && !token_ok(id->model, false)))
        return st_fail(ST_ERR_INVALID_ARG, "table: identity tokens must be non-empty words");
    ST_TRY(table_new(out));
    (*out)->id = *id;
    return ST_OK;
}

void st_table_destroy(st_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n_comments; i++) free(t->comments[i]);
    free(t->comments);
    free(t->rows);
    free(t->mmvq_idx);
    free(t->expert_idx);
    free(t->slots);
    st_table_destroy(t->defaults);
    free(t);
}

void st_table_set_identity(st_table *t, const st_identity *id)
{
    memcpy(t->id.arch, id->arch, sizeof t->id.arch);
    memcpy(t->id.runtime, id->runtime, sizeof t->id.runtime);
    memcpy(t->id.compiler, id->compiler, sizeof t->id.compiler);
    memcpy(t->id.model, id->model, sizeof t->id.model);
    t->id.space = id->space;
}

/* ---- adding rows --------------------------------------------------------- */

st_status st_table_insert_row(st_table *t, const st_table_row *row, size_t *first_line)
{
    size_t s = find_slot(t, row);
    if (t->slots[s]) {
        if (first_line) *first_line = t->rows[t->slots[s] - 1].line;
        return ST_ERR_EXISTS;
    }
    size_t n = t->n_rows + 1;
    ST_TRY(grow((void **)&t->rows, &t->cap_rows, n, sizeof *t->rows));
    if (t->cap_idx < t->cap_rows) {
        /* The per-kind index arrays follow the row array's capacity. */
        size_t *m = realloc(t->mmvq_idx, t->cap_rows * sizeof *m);
        if (!m) return st_fail(ST_ERR_NOMEM, "table: out of memory");
        t->mmvq_idx = m;
        size_t *e = realloc(t->expert_idx, t->cap_rows * sizeof *e);
        if (!e) return st_fail(ST_ERR_NOMEM, "table: out of memory");
        t->expert_idx = e;
        t->cap_idx = t->cap_rows;
    }
    if (n * 2 > t->n_slots) {
        ST_TRY(rehash(t, t->n_slots * 2));
        s = find_slot(t, row);
    }
    t->rows[t->n_rows] = *row;
    if (row->kind == ST_ROW_MMVQ)
        t->mmvq_idx[t->n_mmvq++] = t->n_rows;
    else
        t->expert_idx[t->n_expert++] = t->n_rows;
    t->slots[s] = n;
    t->n_rows = n;
    return ST_OK;
}

static bool dim_ok(int v, int max) { return v >= 1 && v <= max; }

static bool fits_block(st_qtype type, int k)
{
    int qk = st_qtype_block_values(type);
    return qk > 0 && k % qk == 0;
}

st_status st_table_add_mmvq(st_table *t, const st_mmvq_key *key, int rows)
{
    if (!t || !key) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    if (!st_qtype_valid(key->type)) return st_fail(ST_ERR_INVALID_ARG, "table: unknown type");
    if (!dim_ok(key->n_rows, ST_TABLE_MAX_DIM) || !dim_ok(key->n_cols, ST_TABLE_MAX_DIM) ||
        !fits_block(key->type, key->n_cols))
        return st_fail(ST_ERR_INVALID_ARG, "table: mmvq shape %d x %d does not fit %s",
                       key->n_rows, key->n_cols, st_qtype_name(key->type));
    if (!st_mmvq_rows_valid(rows))
        return st_fail(ST_ERR_INVALID_ARG, "table: rows %d is not a compiled-in variant", rows);
    if (!st_mmvq_variant_fits(rows, key->n_cols)) {
        char vn[24];
        return st_fail(ST_ERR_INVALID_ARG, "table: %s needs rows of at least %d values (128 streams); n_cols is %d",
                       st_mmvq_variant_name(rows, vn, sizeof vn), st_mmvq_variant_min_cols(rows), key->n_cols);
    }
    st_table_row r;
    memset(&r, 0, sizeof r);
    r.kind = ST_ROW_MMVQ;
    r.mmvq = *key;
    r.rows = rows;
    st_status s = st_table_insert_row(t, &r, NULL);
    if (s == ST_ERR_EXISTS) return st_fail(ST_ERR_INVALID_ARG, "table: duplicate mmvq shape");
    return s;
}

st_status st_table_add_expert(st_table *t, const st_expert_key *key, int gu_rows, int down_rows)
{
    if (!t || !key) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    if (!st_qtype_valid(key->gu_type) || !st_qtype_valid(key->down_type))
        return st_fail(ST_ERR_INVALID_ARG, "table: unknown type");
    if (!dim_ok(key->n_embd, ST_TABLE_MAX_DIM) || !dim_ok(key->n_ff, ST_TABLE_MAX_DIM) ||
        !dim_ok(key->n_tokens, ST_TABLE_MAX_TOKENS) || !fits_block(key->gu_type, key->n_embd) ||
        !fits_block(key->down_type, key->n_ff))
        return st_fail(ST_ERR_INVALID_ARG, "table: expert shape does not fit its types");
    if (!st_expert_rows_valid(gu_rows, down_rows))
        return st_fail(ST_ERR_INVALID_ARG, "table: rows %d/%d is not a compiled-in variant",
                       gu_rows, down_rows);
    st_table_row r;
    memset(&r, 0, sizeof r);
    r.kind = ST_ROW_EXPERT;
    r.expert = *key;
    r.gu_rows = gu_rows;
    r.down_rows = down_rows;
    st_status s = st_table_insert_row(t, &r, NULL);
    if (s == ST_ERR_EXISTS) return st_fail(ST_ERR_INVALID_ARG, "table: duplicate expert shape");
    return s;
}

/* A tuned-default comment (strata/table_meta.h) into T->defaults; any
 * other comment is only a comment. */
static st_status note_tuned_default(st_table *t, const char *c)
{
    st_table_row r;
    if (!st_meta_tuned_default_row(c, &r)) return ST_OK;
    if (!t->defaults) ST_TRY(table_new(&t->defaults));
    st_status s = st_table_insert_row(t->defaults, &r, NULL);
    return s == ST_ERR_EXISTS ? ST_OK : s;
}

st_status st_table_add_comment_n(st_table *t, const char *text, size_t n)
{
    if (!t || (!text && n)) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\r' ||
                 text[n - 1] == '\n'))
        n--;
    ST_TRY(grow((void **)&t->comments, &t->cap_comments, t->n_comments + 1, sizeof *t->comments));
    char *c = malloc(n + 1);
    if (!c) return st_fail(ST_ERR_NOMEM, "table: out of memory");
    for (size_t i = 0; i < n; i++) {
        char ch = text[i];
        /* A NUL would end the C string early; '\n' would start a new line. */
        c[i] = (ch == '\n' || ch == '\r' || ch == '\0') ? ' ' : ch;
    }
    c[n] = '\0';
    /* Spaces made from line breaks may now trail. */
    while (n && (c[n - 1] == ' ' || c[n - 1] == '\t')) c[--n] = '\0';
    t->comments[t->n_comments++] = c;
    return note_tuned_default(t, c);
}

st_status st_table_add_comment(st_table *t, const char *text)
{
    if (!text) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    return st_table_add_comment_n(t, text, strlen(text));
}

/* ---- queries ------------------------------------------------------------- */

size_t st_table_count(const st_table *t) { return t ? t->n_rows : 0; }
size_t st_table_mmvq_count(const st_table *t) { return t ? t->n_mmvq : 0; }
size_t st_table_expert_count(const st_table *t) { return t ? t->n_expert : 0; }
size_t st_table_comment_count(const st_table *t) { return t ? t->n_comments : 0; }

const st_identity *st_table_identity(const st_table *t) { return t ? &t->id : NULL; }

const char *st_table_comment_at(const st_table *t, size_t i)
{
    return (t && i < t->n_comments) ? t->comments[i] : NULL;
}

bool st_table_lookup_mmvq(const st_table *t, const st_mmvq_key *key, int *rows)
{
    if (!t || !key) return false;
    st_table_row k;
    memset(&k, 0, sizeof k);
    k.kind = ST_ROW_MMVQ;
    k.mmvq = *key;
    size_t s = find_slot(t, &k);
    if (!t->slots[s]) return false;
    if (rows) *rows = t->rows[t->slots[s] - 1].rows;
    return true;
}

bool st_table_lookup_expert(const st_table *t, const st_expert_key *key, int *gu_rows,
                            int *down_rows)
{
    if (!t || !key) return false;
    st_table_row k;
    memset(&k, 0, sizeof k);
    k.kind = ST_ROW_EXPERT;
    k.expert = *key;
    size_t s = find_slot(t, &k);
    if (!t->slots[s]) return false;
    const st_table_row *r = &t->rows[t->slots[s] - 1];
    if (gu_rows) *gu_rows = r->gu_rows;
    if (down_rows) *down_rows = r->down_rows;
    return true;
}

bool st_table_tuned_default_mmvq(const st_table *t, const st_mmvq_key *key)
{
    return t && !st_table_lookup_mmvq(t, key, NULL) && st_table_lookup_mmvq(t->defaults, key, NULL);
}

bool st_table_tuned_default_expert(const st_table *t, const st_expert_key *key)
{
    return t && !st_table_lookup_expert(t, key, NULL, NULL) && st_table_lookup_expert(t->defaults, key, NULL, NULL);
}

size_t st_table_tuned_default_count(const st_table *t) { return t && t->defaults ? t->defaults->n_rows : 0; }

void st_table_tuned_default_at(const st_table *t, size_t i, bool *expert, st_mmvq_key *mmvq, st_expert_key *exp)
{
    if (!t || !t->defaults || i >= t->defaults->n_rows) return;
    const st_table_row *r = &t->defaults->rows[i];
    if (expert) *expert = r->kind == ST_ROW_EXPERT;
    if (mmvq && r->kind == ST_ROW_MMVQ) *mmvq = r->mmvq;
    if (exp && r->kind == ST_ROW_EXPERT) *exp = r->expert;
}

void st_table_mmvq_at(const st_table *t, size_t i, st_mmvq_key *key, int *rows)
{
    if (!t || i >= t->n_mmvq) return;
    const st_table_row *r = &t->rows[t->mmvq_idx[i]];
    if (key) *key = r->mmvq;
    if (rows) *rows = r->rows;
}

void st_table_expert_at(const st_table *t, size_t i, st_expert_key *key, int *gu_rows,
                        int *down_rows)
{
    if (!t || i >= t->n_expert) return;
    const st_table_row *r = &t->rows[t->expert_idx[i]];
    if (key) *key = r->expert;
    if (gu_rows) *gu_rows = r->gu_rows;
    if (down_rows) *down_rows = r->down_rows;
}

/* ---- text form ----------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    bool failed;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) ST_PRINTF(2, 3);

static void sb_reserve(strbuf *b, size_t extra)
{
    if (b->failed || b->n + extra + 1 <= b->cap) return;
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + extra + 1) c *= 2;
    char *q = realloc(b->p, c);
    if (!q) {
        b->failed = true;
        return;
    }
    b->p = q;
    b->cap = c;
}

static void sb_printf(strbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof tmp) {
        b->failed = true; /* every formatted piece here is short */
        return;
    }
    sb_reserve(b, (size_t)w);
    if (b->failed) return;
    memcpy(b->p + b->n, tmp, (size_t)w + 1);
    b->n += (size_t)w;
}

static void sb_text(strbuf *b, const char *s)
{
    size_t n = strlen(s);
    sb_reserve(b, n);
    if (b->failed) return;
    memcpy(b->p + b->n, s, n + 1);
    b->n += n;
}

st_status st_table_format(const st_table *t, char **text, size_t *len)
{
    if (!t || !text) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    *text = NULL;
    if (len) *len = 0;
    strbuf b = {NULL, 0, 0, false};
    sb_printf(&b, "%s %s %s %d\n", t->id.arch, t->id.runtime, t->id.compiler, t->id.space);
    if (t->id.model[0]) sb_printf(&b, "device %s\n", t->id.model);
    for (size_t i = 0; i < t->n_comments; i++) {
        sb_text(&b, t->comments[i][0] ? "# " : "#");
        sb_text(&b, t->comments[i]);
        sb_text(&b, "\n");
    }
    for (size_t i = 0; i < t->n_rows; i++) {
        const st_table_row *r = &t->rows[i];
        char vn[24];
        if (r->kind == ST_ROW_MMVQ)
            sb_printf(&b, "mmvq %s %d %d %s\n", st_qtype_name(r->mmvq.type), r->mmvq.n_rows, r->mmvq.n_cols,
                      st_mmvq_variant_name(r->rows, vn, sizeof vn));
        else
            sb_printf(&b, "expert %s %s %d %d %d %d %d\n", st_qtype_name(r->expert.gu_type),
                      st_qtype_name(r->expert.down_type), r->expert.n_embd, r->expert.n_ff,
                      r->expert.n_tokens, r->gu_rows, r->down_rows);
    }
    if (b.failed) {
        free(b.p);
        return st_fail(ST_ERR_NOMEM, "table: out of memory while formatting");
    }
    *text = b.p;
    if (len) *len = b.n;
    return ST_OK;
}
