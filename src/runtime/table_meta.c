#define _POSIX_C_SOURCE 200809L
/* The table's comment vocabulary (strata/table_meta.h): every word a
 * table's comments use is spelled here and nowhere else. */
#include "strata/table_meta.h"
#include "internal.h"
#include "table_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W_NTOK_MIX "ntok-mix"
#define W_TUNED_DEFAULT "tuned-default"
#define W_MERGED "merged:"
/* the provenance line of tables made before 0.2.x */
#define W_LEGACY_MADE "made by tune_decode "

/* ---- shape keys ------------------------------------------------------------ */

const char *st_mmvq_key_text(const st_mmvq_key *k, char *buf, size_t n)
{
    if (buf && n) snprintf(buf, n, "mmvq %s %d %d", st_qtype_name(k->type), k->n_rows, k->n_cols);
    return buf;
}

const char *st_expert_key_text(const st_expert_key *k, char *buf, size_t n)
{
    if (buf && n)
        snprintf(buf, n, "expert %s %s %d %d %d", st_qtype_name(k->gu_type), st_qtype_name(k->down_type), k->n_embd,
                 k->n_ff, k->n_tokens);
    return buf;
}

/* ---- provenance -------------------------------------------------------------- */

static const char *const KEYS[] = {
#define ST_PROV_KEY_(f, key, what) key,
    ST_PROVENANCE_FIELDS(ST_PROV_KEY_)
#undef ST_PROV_KEY_
};

const char *st_provenance_key(int i) { return i >= 0 && i < ST_PROVENANCE_COUNT ? KEYS[i] : ""; }

static char *field(st_provenance *p, int i)
{
    char *const f[] = {
#define ST_PROV_PTR_(fl, key, what) p->fl,
        ST_PROVENANCE_FIELDS(ST_PROV_PTR_)
#undef ST_PROV_PTR_
    };
    return f[i];
}

const char *st_provenance_value(const st_provenance *p, int i)
{
    return p && i >= 0 && i < ST_PROVENANCE_COUNT ? field((st_provenance *)p, i) : "";
}

/* The field whose "key: " starts C, or -1. */
static int key_of(const char *c)
{
    for (int i = 0; i < ST_PROVENANCE_COUNT; i++) {
        const size_t n = strlen(KEYS[i]);
        if (!strncmp(c, KEYS[i], n) && c[n] == ':' && c[n + 1] == ' ') return i;
    }
    return -1;
}

/* Whether C is the word W alone or followed by a space. */
static bool word(const char *c, const char *w)
{
    const size_t n = strlen(w);
    return !strncmp(c, w, n) && (c[n] == ' ' || c[n] == '\0');
}

static bool tuned_default(const char *c, st_table_row *r);

st_comment_kind st_table_comment_kind(const char *c)
{
    if (!c) return ST_COMMENT_OTHER;
    st_table_row r;
    if (key_of(c) >= 0 || !strncmp(c, W_LEGACY_MADE, strlen(W_LEGACY_MADE))) return ST_COMMENT_PROVENANCE;
    if (word(c, W_NTOK_MIX)) return ST_COMMENT_NTOK_MIX;
    /* only a record the loader honours: a malformed one is free text (kept
     * as it is by a merge, never read as a shape) */
    if (tuned_default(c, &r)) return ST_COMMENT_TUNED_DEFAULT;
    if (word(c, W_MERGED)) return ST_COMMENT_MERGED;
    return ST_COMMENT_OTHER;
}

static void copy_n(char *dst, const char *src, size_t n)
{
    if (n >= ST_PROVENANCE_VALUE_MAX) n = ST_PROVENANCE_VALUE_MAX - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* "made by tune_decode V on DATE, device D, driver R" (before 0.2.x). */
static void legacy_made(const char *c, st_provenance *p)
{
    const char *v = c + strlen(W_LEGACY_MADE), *on = strstr(v, " on "), *dev = strstr(v, ", device "),
               *drv = strstr(v, ", driver ");
    if (!on || !dev || !drv || !(on < dev && dev < drv)) return;
    if (!p->tool[0]) snprintf(p->tool, sizeof p->tool, "tune_decode %.*s", (int)(on - v), v);
    if (!p->date[0]) copy_n(p->date, on + 4, (size_t)(dev - on - 4));
    if (!p->device[0]) copy_n(p->device, dev + 9, (size_t)(drv - dev - 9));
    if (!p->driver[0]) copy_n(p->driver, drv + 9, strlen(drv + 9));
}

void st_provenance_from_table(const st_table *t, st_provenance *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; t && i < st_table_comment_count(t); i++) {
        const char *c = st_table_comment_at(t, i);
        const int k = key_of(c);
        if (k < 0) {
            if (!strncmp(c, W_LEGACY_MADE, strlen(W_LEGACY_MADE))) legacy_made(c, p);
            continue;
        }
        const char *v = c + strlen(KEYS[k]) + 2;
        char *f = field(p, k);
        if (f[0]) continue; /* the first line of a key counts */
        const char *thr = strstr(v, "; threshold ");
        if (!strcmp(KEYS[k], "report") && thr) {
            /* the old form "report: DIR/NAME.json; threshold T%": keep the file name */
            const char *slash = v;
            for (const char *q = v; q < thr; q++)
                if (*q == '/') slash = q + 1;
            copy_n(f, slash, (size_t)(thr - slash));
            if (!p->threshold[0]) copy_n(p->threshold, thr + 12, strlen(thr + 12));
        } else {
            copy_n(f, v, strlen(v));
        }
    }
}

st_status st_provenance_to_table(st_table *t, const st_provenance *p)
{
    if (!t || !p) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    char line[ST_PROVENANCE_VALUE_MAX + 32];
    for (int i = 0; i < ST_PROVENANCE_COUNT; i++) {
        const char *v = st_provenance_value(p, i);
        if (!v[0]) continue;
        snprintf(line, sizeof line, "%s: %s", KEYS[i], v);
        ST_TRY(st_table_add_comment(t, line));
    }
    return ST_OK;
}

/* ---- the token counts tuned ---------------------------------------------- */

st_status st_table_set_ntok_mix(st_table *t, const int *nts, int n)
{
    if (!t || (!nts && n)) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    bool in[ST_MAX_TOKENS] = {false};
    for (int i = 0; i < n; i++) {
        if (nts[i] < 1 || nts[i] > ST_MAX_TOKENS)
            return st_fail(ST_ERR_INVALID_ARG, "table: token count %d is outside 1..%d", nts[i], ST_MAX_TOKENS);
        in[nts[i] - 1] = true;
    }
    char line[16 + 4 * ST_MAX_TOKENS];
    size_t at = (size_t)snprintf(line, sizeof line, W_NTOK_MIX);
    for (int k = 0; k < ST_MAX_TOKENS && at < sizeof line; k++)
        if (in[k]) at += (size_t)snprintf(line + at, sizeof line - at, " %d", k + 1);
    return st_table_add_comment(t, line);
}

int st_table_ntok_mix(const st_table *t, bool *in_mix)
{
    for (int i = 0; i < ST_MAX_TOKENS; i++) in_mix[i] = false;
    for (size_t i = 0; t && i < st_table_comment_count(t); i++) {
        const char *c = st_table_comment_at(t, i);
        if (st_table_comment_kind(c) != ST_COMMENT_NTOK_MIX) continue;
        /* the first line counts, and only as st_table_set_ntok_mix writes
         * it: " K" for each count, 1..ST_MAX_TOKENS, none twice, at least
         * one; anything else is a damaged table, not a table that records
         * none (that would ask coverage for another mix, silently) */
        bool got[ST_MAX_TOKENS] = {false};
        int n = 0;
        const char *p = c + strlen(W_NTOK_MIX);
        while (*p == ' ' && p[1] >= '1' && p[1] <= '9') {
            char *end;
            const long v = strtol(p + 1, &end, 10);
            if (v > ST_MAX_TOKENS || got[v - 1] || (*end != ' ' && *end != '\0')) break;
            got[v - 1] = true;
            n++;
            p = end;
        }
        if (*p || n == 0) {
            st_fail(ST_ERR_PARSE, "table: '# %.64s%s' is not a list of distinct token counts 1..%d", c,
                    strlen(c) > 64 ? "..." : "", ST_MAX_TOKENS);
            return -1;
        }
        memcpy(in_mix, got, sizeof got);
        return n;
    }
    return 0;
}

/* ---- tuned defaults ------------------------------------------------------- */

st_status st_table_add_tuned_default_mmvq(st_table *t, const st_mmvq_key *key)
{
    if (!t || !key) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    char k[128], line[160];
    snprintf(line, sizeof line, W_TUNED_DEFAULT " %s", st_mmvq_key_text(key, k, sizeof k));
    return st_table_add_comment(t, line);
}

st_status st_table_add_tuned_default_expert(st_table *t, const st_expert_key *key)
{
    if (!t || !key) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    char k[128], line[160];
    snprintf(line, sizeof line, W_TUNED_DEFAULT " %s", st_expert_key_text(key, k, sizeof k));
    return st_table_add_comment(t, line);
}

/* "tuned-default mmvq TYPE ROWS COLS" / "tuned-default expert GU DN NE NF
 * NT" with known types, as a row's kind and key in *R. */
static bool tuned_default(const char *c, st_table_row *r)
{
    const size_t w = strlen(W_TUNED_DEFAULT);
    if (strncmp(c, W_TUNED_DEFAULT, w) != 0 || c[w] != ' ') return false;
    char kind[16], a[16], b[16];
    int v[3] = {0, 0, 0}, nt = 0, used = 0;
    memset(r, 0, sizeof *r);
    c += w + 1;
    if (sscanf(c, "mmvq %15s %d %d %n", a, &v[0], &v[1], &used) == 3 && !c[used]) {
        r->kind = ST_ROW_MMVQ;
        r->mmvq = (st_mmvq_key){st_qtype_from_name(a), v[0], v[1]};
        return r->mmvq.type != ST_QTYPE_NONE;
    }
    if (sscanf(c, "%15s %15s %15s %d %d %d %n", kind, a, b, &v[0], &v[1], &nt, &used) == 6 && !c[used] &&
        !strcmp(kind, "expert")) {
        r->kind = ST_ROW_EXPERT;
        r->expert = (st_expert_key){st_qtype_from_name(a), st_qtype_from_name(b), v[0], v[1], nt};
        return r->expert.gu_type != ST_QTYPE_NONE && r->expert.down_type != ST_QTYPE_NONE;
    }
    return false;
}

bool st_meta_tuned_default_row(const char *c, st_table_row *r) { return c && tuned_default(c, r); }

/* ---- merges --------------------------------------------------------------- */

st_status st_table_add_merged_note(st_table *t, const st_provenance *old)
{
    if (!t || !old) return st_fail(ST_ERR_INVALID_ARG, "table: NULL argument");
    char line[3 * ST_PROVENANCE_VALUE_MAX + 96];
    snprintf(line, sizeof line, W_MERGED " shapes kept from the campaign of %s (model %s, report %s)",
             old->date[0] ? old->date : "an unknown date", old->model[0] ? old->model : "unknown",
             old->report[0] ? old->report : "unknown");
    return st_table_add_comment(t, line);
}
