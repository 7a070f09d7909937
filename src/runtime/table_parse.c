/* The tuning table parser: text -> st_table, with the checks against this
 * process's identity and dispatch knobs. Every refusal is one line whose
 * wording is part of the interface (docs/DESIGN.md section 4).
 *
 * The input is (pointer, length): it need not be NUL-terminated, may hold
 * NUL bytes (refused) and lines of any length. Nothing is read past LEN.
 * Check order: empty -> header token count -> space -> arch -> runtime ->
 * compiler -> device -> active knobs -> rows (the first bad line wins).
 * The device line ("device <model>", see st_identity.model) directly
 * follows the header, comments aside; GPU tables have one, CPU tables
 * none. */
#include "table_internal.h"
#include "internal.h"
#include "strata/variants.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lines and tokens ---------------------------------------------------- */

#define UTF8_BOM "\xef\xbb\xbf"

typedef struct {
    const char *s;
    size_t n;
} tok;

/* Enough for the longest row (expert: 8); further tokens are only counted. */
#define MAX_TOKENS 8

typedef enum { LINE_BLANK, LINE_COMMENT, LINE_WORDS, LINE_NUL } line_class;

typedef struct {
    line_class cls;
    size_t lineno;
    tok text; /* LINE_COMMENT: the text after '#' and one space */
    tok t[MAX_TOKENS];
    size_t ntok; /* all tokens of the line, stored or not */
} line_t;

typedef struct {
    const char *buf;
    size_t len, pos, lineno;
} reader;

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* The next line of R into *LN; false at the end of the input. */
static bool next_line(reader *r, line_t *ln)
{
    if (r->pos >= r->len) return false;
    const char *p = r->buf + r->pos;
    size_t rest = r->len - r->pos;
    const char *nl = memchr(p, '\n', rest);
    size_t n = nl ? (size_t)(nl - p) : rest;
    r->pos += nl ? n + 1 : n;
    memset(ln, 0, sizeof *ln);
    ln->lineno = ++r->lineno;
    if (memchr(p, '\0', n)) {
        ln->cls = LINE_NUL;
        return true;
    }
    while (n && (is_blank(p[n - 1]) || p[n - 1] == '\r')) n--;
    size_t i = 0;
    while (i < n && is_blank(p[i])) i++;
    if (i == n) {
        ln->cls = LINE_BLANK;
        return true;
    }
    if (p[i] == '#') {
        ln->cls = LINE_COMMENT;
        i++;
        if (i < n && p[i] == ' ') i++;
        ln->text.s = p + i;
        ln->text.n = n - i;
        return true;
    }
    ln->cls = LINE_WORDS;
    while (i < n) {
        size_t start = i;
        while (i < n && !is_blank(p[i])) i++;
        if (ln->ntok < MAX_TOKENS) ln->t[ln->ntok] = (tok){p + start, i - start};
        ln->ntok++;
        while (i < n && is_blank(p[i])) i++;
    }
    return true;
}

static bool tok_is(tok t, const char *s) { return t.n == strlen(s) && memcmp(t.s, s, t.n) == 0; }

/* A token as message text: at most MAX bytes, every byte that is not
 * printable ASCII as '?' (a token of a valid table is ASCII; the line goes
 * to a terminal, where control bytes and stray UTF-8 would act or hide),
 * "..." when cut. BUF needs MAX + 4 bytes. */
static const char *show_n(char *buf, tok t, size_t max)
{
    size_t n = t.n < max ? t.n : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)t.s[i];
        buf[i] = (ch < 0x20 || ch >= 0x7f) ? '?' : (char)ch;
    }
    strcpy(buf + n, t.n > max ? "..." : "");
    return buf;
}

#define SHOW_MAX 40
#define SHOW(buf, t) show_n(buf, t, SHOW_MAX)

static tok str_tok(const char *s) { return (tok){s, strlen(s)}; }

typedef enum { NUM_OK, NUM_BAD, NUM_RANGE } num_result;

/* Decimal digits only (no sign, no hex), value in LO..HI. Digits beyond
 * HI saturate instead of overflowing. */
static num_result parse_num(tok t, long long lo, long long hi, long long *v)
{
    if (t.n == 0) return NUM_BAD;
    long long x = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (t.s[i] < '0' || t.s[i] > '9') return NUM_BAD;
        if (x <= hi) x = x * 10 + (t.s[i] - '0');
    }
    *v = x;
    return (x < lo || x > hi) ? NUM_RANGE : NUM_OK;
}

/* ---- messages ------------------------------------------------------------ */

typedef struct {
    const char *path;
    char *msg;
    size_t msglen;
} pctx;

static st_status say(pctx *c, st_status s, const char *fmt, ...) ST_PRINTF(3, 4);
static st_status say_line(pctx *c, st_status s, size_t line, const char *fmt, ...)
    ST_PRINTF(4, 5);

static st_status vsay(pctx *c, st_status s, const char *prefix, const char *fmt, va_list ap)
{
    char body[1024];
    vsnprintf(body, sizeof body, fmt, ap);
    if (c->msg && c->msglen)
        snprintf(c->msg, c->msglen, ST_TABLE_MSG_PREFIX "%s: %s%s", c->path, prefix, body);
    return st_fail(s, "%s: %s%s", c->path, prefix, body);
}

static st_status say(pctx *c, st_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st_status r = vsay(c, s, "", fmt, ap);
    va_end(ap);
    return r;
}

static st_status say_line(pctx *c, st_status s, size_t line, const char *fmt, ...)
{
    char prefix[48];
    snprintf(prefix, sizeof prefix, "line %zu: ", line);
    va_list ap;
    va_start(ap, fmt);
    st_status r = vsay(c, s, prefix, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- header -------------------------------------------------------------- */

/* Skips to the header line: comments go to T (when not NULL). ST_OK with
 * *LN the header; otherwise the refusal. */
static st_status find_header(pctx *c, reader *r, st_table *t, line_t *ln)
{
    while (next_line(r, ln)) {
        switch (ln->cls) {
        case LINE_NUL:
            return say_line(c, ST_ERR_PARSE, ln->lineno, "contains a NUL byte");
        case LINE_BLANK:
            break;
        case LINE_COMMENT:
            if (t) ST_TRY(st_table_add_comment_n(t, ln->text.s, ln->text.n));
            break;
        case LINE_WORDS:
            return ST_OK;
        }
    }
    return say(c, ST_ERR_PARSE, "empty file (no header line)");
}

/* The header's structure: four tokens, words that fit st_identity, an
 * integer space. Fills *HDR. */
static st_status parse_header(pctx *c, const line_t *ln, st_identity *hdr)
{
    static const char *const names[3] = {"arch", "runtime", "compiler"};
    char b[SHOW_MAX + 4];
    if (ln->ntok == 3)
        return say(c, ST_ERR_REFUSED,
                   "made before the kernel selection space was tracked - the kernels have "
                   "changed since");
    if (ln->ntok != 4)
        return say_line(c, ST_ERR_PARSE, ln->lineno,
                        "header must have 4 tokens (<arch> <runtime> <compiler> <space>), "
                        "found %zu",
                        ln->ntok);
    /* a mark on a header line after comments: the same editor's mark, and
     * a header that could not be written back first in a file */
    if (ln->t[0].n >= 3 && memcmp(ln->t[0].s, UTF8_BOM, 3) == 0)
        return say_line(c, ST_ERR_PARSE, ln->lineno, "starts with a UTF-8 byte order mark (bytes EF BB BF): save the "
                                                     "table without it");
    memset(hdr, 0, sizeof *hdr);
    char *dst[3] = {hdr->arch, hdr->runtime, hdr->compiler};
    for (int i = 0; i < 3; i++) {
        if (ln->t[i].n >= ST_TOKEN_MAX)
            return say_line(c, ST_ERR_PARSE, ln->lineno,
                            "%s token '%s' is too long (at most %d characters)", names[i],
                            SHOW(b, ln->t[i]), ST_TOKEN_MAX - 1);
        memcpy(dst[i], ln->t[i].s, ln->t[i].n);
    }
    long long space = 0;
    switch (parse_num(ln->t[3], 0, INT_MAX, &space)) {
    case NUM_BAD:
        return say_line(c, ST_ERR_PARSE, ln->lineno, "space token '%s' is not a number",
                        SHOW(b, ln->t[3]));
    case NUM_RANGE:
        return say_line(c, ST_ERR_PARSE, ln->lineno, "space token %s is out of range 0..%d",
                        SHOW(b, ln->t[3]), INT_MAX);
    case NUM_OK:
        break;
    }
    hdr->space = (int)space;
    return ST_OK;
}

/* After the header: the optional device line into HDR->model. Comments go
 * to T (when not NULL). *PENDING is set when the first other line was read
 * and is no device line (it is then in *LN, for the rows). */
static st_status parse_device(pctx *c, reader *r, st_table *t, line_t *ln, st_identity *hdr, bool *pending)
{
    char b[SHOW_MAX + 4];
    *pending = false;
    while (next_line(r, ln)) {
        if (ln->cls == LINE_BLANK) continue;
        if (ln->cls == LINE_COMMENT) {
            if (t) ST_TRY(st_table_add_comment_n(t, ln->text.s, ln->text.n));
            continue;
        }
        if (ln->cls == LINE_NUL || !tok_is(ln->t[0], "device")) {
            *pending = true;
            return ST_OK;
        }
        if (ln->ntok != 2)
            return say_line(c, ST_ERR_PARSE, ln->lineno, "expected 2 tokens for the device line (device <model>), found %zu",
                            ln->ntok);
        if (ln->t[1].n >= ST_TOKEN_MAX)
            return say_line(c, ST_ERR_PARSE, ln->lineno, "device model '%s' is too long (at most %d characters)",
                            SHOW(b, ln->t[1]), ST_TOKEN_MAX - 1);
        memcpy(hdr->model, ln->t[1].s, ln->t[1].n);
        hdr->model[ln->t[1].n] = '\0';
        return ST_OK;
    }
    return ST_OK;
}

/* Whether the table made for HDR may engage in process ID with CFG. */
static st_status check_identity(pctx *c, const st_identity *hdr, const st_identity *id,
                                const st_dispatch_config *cfg)
{
    char a[ST_TOKEN_MAX + 4], b[ST_TOKEN_MAX + 4];
    if (hdr->space != id->space)
        return say(c, ST_ERR_REFUSED,
                   "made for kernel selection space %d, this build is %d (the kernels "
                   "changed): run the tuner again",
                   hdr->space, id->space);
    if (strcmp(hdr->arch, id->arch) != 0)
        return say(c, ST_ERR_REFUSED, "made for %s, this device is %s: run the tuner on this device",
                   show_n(a, str_tok(hdr->arch), ST_TOKEN_MAX), id->arch);
    if (strcmp(hdr->runtime, id->runtime) != 0)
        return say(c, ST_ERR_REFUSED,
                   "made for runtime %s, this process loaded %s: tune and run with the same "
                   "runtime library",
                   show_n(a, str_tok(hdr->runtime), ST_TOKEN_MAX), id->runtime);
    if (strcmp(hdr->compiler, id->compiler) != 0) {
        /* Four characters of each hash are enough to tell them apart. */
        tok h = str_tok(hdr->compiler), m = str_tok(id->compiler);
        h.n = h.n < 4 ? h.n : 4;
        m.n = m.n < 4 ? m.n : 4;
        return say(c, ST_ERR_REFUSED, "made by compiler %s.., this build is %s..: run the tuner again",
                   show_n(a, h, 4), show_n(b, m, 4));
    }
    if (strcmp(hdr->model, id->model) != 0) {
        if (!hdr->model[0])
            return say(c, ST_ERR_REFUSED, "names no device model, this device is %s: run the tuner on this device",
                       id->model);
        return say(c, ST_ERR_REFUSED, "made for device %s, this device is %s: run the tuner on this device",
                   show_n(a, str_tok(hdr->model), ST_TOKEN_MAX), id->model[0] ? id->model : "the CPU reference (no model)");
    }
    int k = cfg ? st_dispatch_config_first_active(cfg) : -1;
    if (k >= 0)
        return say(c, ST_ERR_REFUSED,
                   "%s reroutes the decode dispatch away from what the table measured",
                   st_knob_label((st_knob)k));
    return ST_OK;
}

/* ---- rows ---------------------------------------------------------------- */

static st_status field_type(pctx *c, size_t line, tok t, st_qtype *out)
{
    char name[16], b[SHOW_MAX + 4];
    *out = ST_QTYPE_NONE;
    if (t.n < sizeof name) {
        memcpy(name, t.s, t.n);
        name[t.n] = '\0';
        *out = st_qtype_from_name(name);
    }
    if (*out == ST_QTYPE_NONE || !st_qtype_valid(*out))
        return say_line(c, ST_ERR_PARSE, line, "unknown type '%s' (known: %s)", SHOW(b, t),
                        st_table_type_names());
    return ST_OK;
}

static st_status field_dim(pctx *c, size_t line, const char *name, tok t, int hi, int *out)
{
    char b[SHOW_MAX + 4];
    long long v = 0;
    switch (parse_num(t, 1, hi, &v)) {
    case NUM_BAD:
        return say_line(c, ST_ERR_PARSE, line, "%s '%s' is not a positive decimal integer", name,
                        SHOW(b, t));
    case NUM_RANGE:
        return say_line(c, ST_ERR_PARSE, line, "%s %s is out of range 1..%d", name, SHOW(b, t), hi);
    case NUM_OK:
        break;
    }
    *out = (int)v;
    return ST_OK;
}

/* A rows value: any decimal number; whether it is compiled in is checked
 * afterwards (-1 stands for one too large to be). */
static st_status field_rows(pctx *c, size_t line, const char *name, tok t, int *out)
{
    char b[SHOW_MAX + 4];
    long long v = 0;
    switch (parse_num(t, 0, INT_MAX, &v)) {
    case NUM_BAD:
        return say_line(c, ST_ERR_PARSE, line, "%s '%s' is not a decimal number", name, SHOW(b, t));
    case NUM_RANGE:
        v = -1;
        break;
    case NUM_OK:
        break;
    }
    *out = (int)v;
    return ST_OK;
}

static st_status check_block(pctx *c, size_t line, const char *name, int k, st_qtype type)
{
    int qk = st_qtype_block_values(type);
    if (qk <= 0 || k % qk != 0)
        return say_line(c, ST_ERR_PARSE, line, "%s %d is not a multiple of %d, the block of %s",
                        name, k, qk, st_qtype_name(type));
    return ST_OK;
}

static st_status parse_mmvq(pctx *c, const line_t *ln, st_table_row *r)
{
    size_t line = ln->lineno;
    char b[SHOW_MAX + 4], list[256];
    r->kind = ST_ROW_MMVQ;
    ST_TRY(field_type(c, line, ln->t[1], &r->mmvq.type));
    ST_TRY(field_dim(c, line, "n_rows", ln->t[2], ST_TABLE_MAX_DIM, &r->mmvq.n_rows));
    ST_TRY(field_dim(c, line, "n_cols", ln->t[3], ST_TABLE_MAX_DIM, &r->mmvq.n_cols));
    const tok rt = ln->t[4];
    ST_TRY(check_block(c, line, "n_cols", r->mmvq.n_cols, r->mmvq.type));
    if (!st_mmvq_variant_parse(rt.s, rt.n, &r->rows))
        return say_line(c, ST_ERR_PARSE, line, "rows %s is not a compiled-in variant (%s)", SHOW(b, rt),
                        st_mmvq_variant_list(list, sizeof list));
    if (!st_mmvq_variant_fits(r->rows, r->mmvq.n_cols))
        return say_line(c, ST_ERR_PARSE, line, "rows %s needs rows of at least %d values (128 streams); n_cols is %d",
                        SHOW(b, rt), st_mmvq_variant_min_cols(r->rows), r->mmvq.n_cols);
    return ST_OK;
}

static st_status parse_expert(pctx *c, const line_t *ln, st_table_row *r)
{
    size_t line = ln->lineno;
    char b[SHOW_MAX + 4], b2[SHOW_MAX + 4], list[256];
    r->kind = ST_ROW_EXPERT;
    st_expert_key *k = &r->expert;
    ST_TRY(field_type(c, line, ln->t[1], &k->gu_type));
    ST_TRY(field_type(c, line, ln->t[2], &k->down_type));
    ST_TRY(field_dim(c, line, "n_embd", ln->t[3], ST_TABLE_MAX_DIM, &k->n_embd));
    ST_TRY(field_dim(c, line, "n_ff", ln->t[4], ST_TABLE_MAX_DIM, &k->n_ff));
    ST_TRY(field_dim(c, line, "n_tokens", ln->t[5], ST_TABLE_MAX_TOKENS, &k->n_tokens));
    ST_TRY(field_rows(c, line, "gu_rows", ln->t[6], &r->gu_rows));
    ST_TRY(field_rows(c, line, "down_rows", ln->t[7], &r->down_rows));
    ST_TRY(check_block(c, line, "n_embd", k->n_embd, k->gu_type));
    ST_TRY(check_block(c, line, "n_ff", k->n_ff, k->down_type));
    if (!st_expert_rows_valid(r->gu_rows, r->down_rows))
        return say_line(c, ST_ERR_PARSE, line, "rows %s/%s is not a compiled-in variant (%s)",
                        SHOW(b, ln->t[6]), SHOW(b2, ln->t[7]),
                        st_expert_variant_list(list, sizeof list));
    return ST_OK;
}

static st_status parse_row(pctx *c, const line_t *ln, st_table *t)
{
    char b[SHOW_MAX + 4];
    if (tok_is(ln->t[0], "device"))
        return say_line(c, ST_ERR_PARSE, ln->lineno, "the device line must directly follow the header");
    bool mmvq = tok_is(ln->t[0], "mmvq");
    if (!mmvq && !tok_is(ln->t[0], "expert"))
        return say_line(c, ST_ERR_PARSE, ln->lineno,
                        "unknown kernel kind '%s' (expected expert or mmvq)", SHOW(b, ln->t[0]));
    size_t want = mmvq ? 5 : 8;
    if (ln->ntok != want)
        return say_line(c, ST_ERR_PARSE, ln->lineno, "expected %zu tokens for %s row, found %zu",
                        want, mmvq ? "an mmvq" : "an expert", ln->ntok);
    st_table_row r;
    memset(&r, 0, sizeof r);
    ST_TRY(mmvq ? parse_mmvq(c, ln, &r) : parse_expert(c, ln, &r));
    r.line = ln->lineno;
    size_t first = 0;
    st_status s = st_table_insert_row(t, &r, &first);
    if (s == ST_ERR_EXISTS)
        return say_line(c, ST_ERR_PARSE, ln->lineno, "duplicate shape (first on line %zu)", first);
    if (s != ST_OK) return say_line(c, s, ln->lineno, "%s", st_status_str(s));
    return ST_OK;
}

/* ---- entry points -------------------------------------------------------- */

static st_status parse_impl(const char *buf, size_t len, const char *path, const st_identity *id,
                            const st_dispatch_config *cfg, bool check, st_table **out,
                            char *msg, size_t msglen)
{
    pctx c = {path ? path : "(table)", msg, msglen};
    if (msg && msglen) msg[0] = '\0';
    if (!out) return say(&c, ST_ERR_INVALID_ARG, "no output table given");
    *out = NULL;
    if ((!buf && len) || (check && !id)) return say(&c, ST_ERR_INVALID_ARG, "invalid arguments");

    /* An editor's byte order mark would become part of the arch token and
     * give "made for cpu, this device is cpu": name it instead. */
    if (len >= 3 && memcmp(buf, UTF8_BOM, 3) == 0)
        return say_line(&c, ST_ERR_PARSE, 1, "starts with a UTF-8 byte order mark (bytes EF BB BF): save the table "
                                             "without it");
    st_table *t = NULL;
    ST_TRY(st_table_create(&(st_identity){.arch = "-", .runtime = "-", .compiler = "-"}, &t));
    reader r = {buf, len, 0, 0};
    line_t ln;
    st_identity hdr;
    bool pending = false;
    st_status s = find_header(&c, &r, t, &ln);
    if (s == ST_OK) s = parse_header(&c, &ln, &hdr);
    if (s == ST_OK) s = parse_device(&c, &r, t, &ln, &hdr, &pending);
    if (s == ST_OK && check) s = check_identity(&c, &hdr, id, cfg);
    if (s == ST_OK) st_table_set_identity(t, &hdr);
    while (s == ST_OK && (pending || next_line(&r, &ln))) {
        pending = false;
        switch (ln.cls) {
        case LINE_NUL:
            s = say_line(&c, ST_ERR_PARSE, ln.lineno, "contains a NUL byte");
            break;
        case LINE_BLANK:
            break;
        case LINE_COMMENT:
            s = st_table_add_comment_n(t, ln.text.s, ln.text.n);
            break;
        case LINE_WORDS:
            s = parse_row(&c, &ln, t);
            break;
        }
    }
    if (s != ST_OK) {
        st_table_destroy(t);
        return s;
    }
    char a[ST_TOKEN_MAX + 4], rt[ST_TOKEN_MAX + 4];
    if (msg && msglen)
        snprintf(msg, msglen, ST_TABLE_MSG_PREFIX "%zu shapes from %s (%s, runtime %s)",
                 st_table_count(t), c.path, show_n(a, str_tok(hdr.arch), ST_TOKEN_MAX),
                 show_n(rt, str_tok(hdr.runtime), ST_TOKEN_MAX));
    *out = t;
    return ST_OK;
}

st_status st_table_parse(const char *buf, size_t len, const char *path, const st_identity *id,
                         const st_dispatch_config *cfg, st_table **out, char *msg, size_t msglen)
{
    return parse_impl(buf, len, path, id, cfg, true, out, msg, msglen);
}

st_status st_table_parse_any(const char *buf, size_t len, const char *path, st_table **out,
                             char *msg, size_t msglen)
{
    return parse_impl(buf, len, path, NULL, NULL, false, out, msg, msglen);
}

st_status st_table_read_header(const char *buf, size_t len, st_identity *hdr)
{
    pctx c = {"(table)", NULL, 0};
    if (!hdr || (!buf && len)) return ST_ERR_INVALID_ARG;
    /* past a byte order mark, so a directory picks the table and its load
     * names the mark */
    const size_t bom = len >= 3 && memcmp(buf, UTF8_BOM, 3) == 0 ? 3 : 0;
    reader r = {buf + bom, len - bom, 0, 0};
    line_t ln;
    ST_TRY(find_header(&c, &r, NULL, &ln));
    ST_TRY(parse_header(&c, &ln, hdr));
    bool pending;
    return parse_device(&c, &r, NULL, &ln, hdr, &pending);
}
