/* The compiled-in variants as ids, names and lists (strata/variants.h):
 * every place that turns a variant into text, text into a variant, or asks
 * whether one exists or fits a shape comes here, and the only lists are the
 * X-macros. */
#include "strata/variants.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

bool st_mmvq_rows_valid(int id)
{
    switch (id) {
#define ST_ROWS_CASE_(r) case STRATA_MMVQ_ID_ROWS(r):
        STRATA_MMVQ_ROWS_VARIANTS(ST_ROWS_CASE_)
#undef ST_ROWS_CASE_
#define ST_MMA_CASE_(w) case STRATA_MMVQ_ID_MMA(w):
        STRATA_MMVQ_MMA_VARIANTS(ST_MMA_CASE_)
#undef ST_MMA_CASE_
#define ST_SPLIT_CASE_(w) case STRATA_MMVQ_ID_SPLIT(w):
        STRATA_MMVQ_SPLIT_VARIANTS(ST_SPLIT_CASE_)
#undef ST_SPLIT_CASE_
#define ST_WIDE_CASE_(t, r) case STRATA_MMVQ_ID_WIDE(t, r):
        STRATA_MMVQ_WIDE_VARIANTS(ST_WIDE_CASE_)
#undef ST_WIDE_CASE_
        return true;
    default:
        return false;
    }
}

int st_mmvq_variant_min_cols(int id)
{
    if (!st_mmvq_rows_valid(id)) return -1;
    /* a wide-row variant runs 128 canonical streams: rows of
     * ST_CANON_WIDE_UNITS units or more */
    return st_mmvq_variant_of(id).family == ST_MMVQ_WIDE ? ST_CANON_WIDE_UNITS * ST_CANON_UNIT : 0;
}

bool st_mmvq_variant_fits(int id, int64_t cols)
{
    const int min = st_mmvq_variant_min_cols(id);
    return min >= 0 && cols >= min;
}

int st_mmvq_variant_ids(int *ids, int max)
{
    int n = 0;
#define ST_ID_ADD_(v) \
    if (n < max && ids) ids[n] = (v); \
    n++;
#define ST_ROWS_ID_(r) ST_ID_ADD_(STRATA_MMVQ_ID_ROWS(r))
#define ST_MMA_ID_(w) ST_ID_ADD_(STRATA_MMVQ_ID_MMA(w))
#define ST_SPLIT_ID_(w) ST_ID_ADD_(STRATA_MMVQ_ID_SPLIT(w))
#define ST_WIDE_ID_(t, r) ST_ID_ADD_(STRATA_MMVQ_ID_WIDE(t, r))
    STRATA_MMVQ_ROWS_VARIANTS(ST_ROWS_ID_)
    STRATA_MMVQ_MMA_VARIANTS(ST_MMA_ID_)
    STRATA_MMVQ_SPLIT_VARIANTS(ST_SPLIT_ID_)
    STRATA_MMVQ_WIDE_VARIANTS(ST_WIDE_ID_)
#undef ST_ROWS_ID_
#undef ST_MMA_ID_
#undef ST_SPLIT_ID_
#undef ST_WIDE_ID_
#undef ST_ID_ADD_
    return n;
}

const char *st_mmvq_variant_name(int id, char *buf, size_t n)
{
    if (!buf || !n) return buf;
    const st_mmvq_variant v = st_mmvq_variant_of(id);
    switch (v.family) {
    case ST_MMVQ_DEFAULT: snprintf(buf, n, "default"); break;
    case ST_MMVQ_ROWS: snprintf(buf, n, "%d", v.rows); break;
    case ST_MMVQ_MMA: snprintf(buf, n, "mma%d", v.warps); break;
    case ST_MMVQ_SPLIT: snprintf(buf, n, "split%d", v.warps); break;
    case ST_MMVQ_WIDE: snprintf(buf, n, "wide%dx%d", v.lanes, v.rows); break;
    default: snprintf(buf, n, "id %d", id); break;
    }
    return buf;
}

const char *st_mmvq_choice_name(int id, char *buf, size_t n)
{
    if (!buf || !n) return buf;
    char vn[32];
    st_mmvq_variant_name(id, vn, sizeof vn);
    snprintf(buf, n, st_mmvq_variant_of(id).family == ST_MMVQ_ROWS ? "rows %s" : "%s", vn);
    return buf;
}

/* A decimal in 0..MAX spelled S[0..N): digits only (no sign, no blank). */
static bool small_num(const char *s, size_t n, int max, int *out)
{
    if (n == 0 || n > 9) return false;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return false;
    *out = v;
    return true;
}

static bool starts(const char *s, size_t n, const char *word)
{
    const size_t w = strlen(word);
    return n > w && !memcmp(s, word, w);
}

bool st_mmvq_variant_parse(const char *s, size_t n, int *id)
{
    if (!s || !id) return false;
    st_mmvq_variant v = {ST_MMVQ_INVALID, 0, 0, 0};
    int a = 0, b = 0;
    if (starts(s, n, "mma")) {
        if (small_num(s + 3, n - 3, STRATA_MMVQ_SPLIT_BASE - 1, &a)) v.family = ST_MMVQ_MMA, v.warps = a;
    } else if (starts(s, n, "split")) {
        if (small_num(s + 5, n - 5, STRATA_MMVQ_WIDE_BASE - STRATA_MMVQ_SPLIT_BASE - 1, &a)) v.family = ST_MMVQ_SPLIT, v.warps = a;
    } else if (starts(s, n, "wide")) {
        const char *x = memchr(s + 4, 'x', n - 4);
        if (x && small_num(s + 4, (size_t)(x - s - 4), 320, &a) && a % 32 == 0 &&
            small_num(x + 1, (size_t)(s + n - x - 1), 9, &b))
            v.family = ST_MMVQ_WIDE, v.lanes = a, v.rows = b;
    } else if (small_num(s, n, STRATA_MMVQ_SPLIT_BASE - 1, &a)) {
        v.family = ST_MMVQ_ROWS, v.rows = a;
    }
    if (v.family == ST_MMVQ_INVALID) return false;
    const int r = st_mmvq_variant_id(v);
    if (!st_mmvq_rows_valid(r)) return false;
    *id = r;
    return true;
}

static void list_append(char *buf, size_t n, size_t *at, const char *item)
{
    if (*at >= n) return;
    const int w = snprintf(buf + *at, n - *at, *at ? " %s" : "%s", item);
    if (w > 0) *at += (size_t)w;
}

const char *st_mmvq_variant_list(char *buf, size_t n)
{
    if (!buf || !n) return buf;
    buf[0] = '\0';
    int ids[64];
    const int k = st_mmvq_variant_ids(ids, 64);
    size_t at = 0;
    char vn[32];
    for (int i = 0; i < k && i < 64; i++) list_append(buf, n, &at, st_mmvq_variant_name(ids[i], vn, sizeof vn));
    return buf;
}

bool st_expert_rows_valid(int gu, int dn)
{
#define ST_PAIR_TEST_(g, d) \
    if (gu == (g) && dn == (d)) return true;
    STRATA_EXPERT_ROWS_VARIANTS(ST_PAIR_TEST_)
#undef ST_PAIR_TEST_
    return false;
}

int st_expert_variant_ids(int (*pairs)[2], int max)
{
    int n = 0;
#define ST_PAIR_ADD_(g, d)      \
    if (n < max && pairs) {     \
        pairs[n][0] = (g);      \
        pairs[n][1] = (d);      \
    }                           \
    n++;
    STRATA_EXPERT_ROWS_VARIANTS(ST_PAIR_ADD_)
#undef ST_PAIR_ADD_
    return n;
}

const char *st_expert_variant_name(int gu, int dn, char *buf, size_t n)
{
    if (!buf || !n) return buf;
    if (gu == 0 && dn == 0) snprintf(buf, n, "default");
    else snprintf(buf, n, "%d/%d", gu, dn);
    return buf;
}

const char *st_expert_choice_name(int gu, int dn, char *buf, size_t n)
{
    if (!buf || !n) return buf;
    if (gu == 0 && dn == 0) snprintf(buf, n, "default");
    else snprintf(buf, n, "rows %d/%d", gu, dn);
    return buf;
}

bool st_expert_variant_parse(const char *s, size_t n, int *gu, int *dn)
{
    if (!s || !gu || !dn) return false;
    const char *slash = memchr(s, '/', n);
    int a = 0, b = 0;
    if (!slash || !small_num(s, (size_t)(slash - s), 9999, &a) || !small_num(slash + 1, (size_t)(s + n - slash - 1), 9999, &b))
        return false;
    if (!st_expert_rows_valid(a, b)) return false;
    *gu = a;
    *dn = b;
    return true;
}

const char *st_expert_variant_list(char *buf, size_t n)
{
    if (!buf || !n) return buf;
    buf[0] = '\0';
    int pairs[64][2];
    const int k = st_expert_variant_ids(pairs, 64);
    size_t at = 0;
    char vn[32];
    for (int i = 0; i < k && i < 64; i++) list_append(buf, n, &at, st_expert_variant_name(pairs[i][0], pairs[i][1], vn, sizeof vn));
    return buf;
}
