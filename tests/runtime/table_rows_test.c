/* The decode tuning table's rows: exactly the compiled-in variant values
 * (the X-macro lists, expanded here independently), value and shape checks,
 * duplicates, NUL bytes, parsing bounded by the length, parse_any, the
 * formatter round trip, add and lookup. */
#include "table_test_util.h"

/* The variant lists, expanded here independently of the library. */
static void rows_list(char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
#define T_ROW_(r) at += (size_t)snprintf(buf + at, n - at, "%s%d", at ? " " : "", (r));
    STRATA_MMVQ_ROWS_VARIANTS(T_ROW_)
#undef T_ROW_
#define T_MMA_(w) at += (size_t)snprintf(buf + at, n - at, " mma%d", (w));
    STRATA_MMVQ_MMA_VARIANTS(T_MMA_)
#undef T_MMA_
#define T_SPLIT_(w) at += (size_t)snprintf(buf + at, n - at, " split%d", (w));
    STRATA_MMVQ_SPLIT_VARIANTS(T_SPLIT_)
#undef T_SPLIT_
#define T_WIDE_(t, r) at += (size_t)snprintf(buf + at, n - at, " wide%dx%d", (t), (r));
    STRATA_MMVQ_WIDE_VARIANTS(T_WIDE_)
#undef T_WIDE_
}

static void pairs_list(char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
#define T_PAIR_(g, d) at += (size_t)snprintf(buf + at, n - at, "%s%d/%d", at ? " " : "", (g), (d));
    STRATA_EXPERT_ROWS_VARIANTS(T_PAIR_)
#undef T_PAIR_
}

static bool in_rows(int r)
{
#define T_IN_(v) if (r == (v)) return true;
    STRATA_MMVQ_ROWS_VARIANTS(T_IN_)
#undef T_IN_
    return false;
}

static bool in_pairs(int g, int d)
{
#define T_INP_(a, b) if (g == (a) && d == (b)) return true;
    STRATA_EXPERT_ROWS_VARIANTS(T_INP_)
#undef T_INP_
    return false;
}

/* ---- rows ---------------------------------------------------------------- */
static void table_accepts_exactly_the_compiled_in_mmvq_rows(void **state)
{
    (void)state;
    char list[256], body[128];
    rows_list(list, sizeof list);
    int accepted = 0;
    for (int r = 0; r <= 64; r++) {
        snprintf(body, sizeof body, "mmvq iq3_s 2560 2560 %d\n", r);
        const char *text = tbl(body);
        assert_int_equal(st_mmvq_rows_valid(r), in_rows(r));
        if (in_rows(r)) {
            expect_engages(text, 1);
            accepted++;
        } else {
            expect_refusal(text, ST_ERR_PARSE, "line 2: rows %d is not a compiled-in variant (%s)",
                           r, list);
        }
    }
    int n = 0;
#define T_COUNT_(r) n++;
    STRATA_MMVQ_ROWS_VARIANTS(T_COUNT_)
#undef T_COUNT_
    assert_int_equal(accepted, n);
}

static bool in_mma(int w)
{
#define T_INM_(x) if (w == (x)) return true;
    STRATA_MMVQ_MMA_VARIANTS(T_INM_)
#undef T_INM_
    return false;
}

static bool in_split(int w)
{
#define T_INS_(x) if (w == (x)) return true;
    STRATA_MMVQ_SPLIT_VARIANTS(T_INS_)
#undef T_INS_
    return false;
}

/* A named variant family, "<PREFIX>W" for W = 0..64 (rows ROWS_OF(W)):
 * exactly the compiled-in W engage, and the table writes them back the same
 * way; the rest are refused with the list. Returns how many engaged. */
static int check_named_variants(const char *prefix, bool (*in)(int), int (*rows_of)(int))
{
    char list[256], body[128];
    rows_list(list, sizeof list);
    int accepted = 0;
    for (int w = 0; w <= 64; w++) {
        snprintf(body, sizeof body, "mmvq iq3_s 2560 2560 %s%d\n", prefix, w);
        const char *text = tbl(body);
        assert_int_equal(st_mmvq_rows_valid(rows_of(w)), in(w));
        if (in(w)) {
            st_table *t = NULL;
            char msg[ST_TABLE_MSG_MAX];
            assert_int_equal(parse_cfg(text, strlen(text), NULL, &t, msg), ST_OK);
            st_mmvq_key k = {ST_IQ3_S, 2560, 2560};
            int rows = 0;
            assert_true(st_table_lookup_mmvq(t, &k, &rows));
            assert_int_equal(rows, rows_of(w));
            char *out = NULL;
            size_t len = 0;
            assert_int_equal(st_table_format(t, &out, &len), ST_OK);
            char want[64];
            snprintf(want, sizeof want, "mmvq iq3_s 2560 2560 %s%d\n", prefix, w);
            assert_non_null(strstr(out, want));
            free(out);
            st_table_destroy(t);
            accepted++;
        } else {
            expect_refusal(text, ST_ERR_PARSE, "line 2: rows %s%d is not a compiled-in variant (%s)", prefix, w,
                           list);
        }
    }
    return accepted;
}

static int mma_rows(int w) { return STRATA_MMVQ_ID_MMA(w); }
static int split_rows(int w) { return STRATA_MMVQ_ID_SPLIT(w); }

/* "mmaW" names a matrix-instruction variant (rows -W). */
static void table_accepts_exactly_the_compiled_in_mma_variants(void **state)
{
    (void)state;
    int n = 0;
#define T_COUNTM_(w) n++;
    STRATA_MMVQ_MMA_VARIANTS(T_COUNTM_)
#undef T_COUNTM_
    assert_int_equal(check_named_variants("mma", in_mma, mma_rows), n);
}

/* "splitW" names a split variant (id STRATA_MMVQ_ID_SPLIT(W)); the
 * number itself is not a name for it. */
static void table_accepts_exactly_the_compiled_in_split_variants(void **state)
{
    (void)state;
    int n = 0;
#define T_COUNTS_(w) n++;
    STRATA_MMVQ_SPLIT_VARIANTS(T_COUNTS_)
#undef T_COUNTS_
    assert_int_equal(check_named_variants("split", in_split, split_rows), n);
    char list[256], body[128];
    rows_list(list, sizeof list);
#define T_NUM_(w)                                                                                        \
    snprintf(body, sizeof body, "mmvq iq3_s 2560 2560 %d\n", STRATA_MMVQ_ID_SPLIT(w));              \
    expect_refusal(tbl(body), ST_ERR_PARSE, "line 2: rows %d is not a compiled-in variant (%s)",         \
                   STRATA_MMVQ_ID_SPLIT(w), list);
    STRATA_MMVQ_SPLIT_VARIANTS(T_NUM_)
#undef T_NUM_
    expect_refusal(tbl("mmvq iq3_s 2560 2560 split104\n"), ST_ERR_PARSE,
                   "line 2: rows split104 is not a compiled-in variant (%s)", list);
}

static bool in_wide(int t, int r)
{
#define T_INW_(a, b) if (t == (a) && r == (b)) return true;
    STRATA_MMVQ_WIDE_VARIANTS(T_INW_)
#undef T_INW_
    return false;
}

/* "wideTxR" names a wide-row variant (id STRATA_MMVQ_ID_WIDE(T, R)) on a
 * shape of 8192 columns or more: exactly the compiled-in (T, R) engage and
 * write back the same way; a shorter shape refuses them, naming the length;
 * malformed names and the number itself are refused with the list. */
static void table_accepts_exactly_the_compiled_in_wide_variants_on_wide_rows(void **state)
{
    (void)state;
    char list[256], body[128];
    rows_list(list, sizeof list);
    int accepted = 0, n = 0;
#define T_COUNTW_(t, r) n++;
    STRATA_MMVQ_WIDE_VARIANTS(T_COUNTW_)
#undef T_COUNTW_
    for (int t = 0; t <= 160; t += 16)
        for (int r = 0; r <= 9; r++) {
            snprintf(body, sizeof body, "mmvq iq3_s 4096 14336 wide%dx%d\n", t, r);
            const char *text = tbl(body);
            if (!in_wide(t, r)) {
                expect_refusal(text, ST_ERR_PARSE, "line 2: rows wide%dx%d is not a compiled-in variant (%s)", t, r,
                               list);
                continue;
            }
            const int rows = STRATA_MMVQ_ID_WIDE(t, r);
            assert_true(st_mmvq_rows_valid(rows));
            st_table *tb = NULL;
            char msg[ST_TABLE_MSG_MAX];
            assert_int_equal(parse_cfg(text, strlen(text), NULL, &tb, msg), ST_OK);
            st_mmvq_key k = {ST_IQ3_S, 4096, 14336};
            int got = 0;
            assert_true(st_table_lookup_mmvq(tb, &k, &got));
            assert_int_equal(got, rows);
            char *out = NULL;
            size_t len = 0;
            assert_int_equal(st_table_format(tb, &out, &len), ST_OK);
            char want[64];
            snprintf(want, sizeof want, "mmvq iq3_s 4096 14336 wide%dx%d\n", t, r);
            assert_non_null(strstr(out, want));
            free(out);
            st_table_destroy(tb);
            /* one unit short of 128 streams per row: refused, and by add too */
            snprintf(body, sizeof body, "mmvq iq3_s 4096 7936 wide%dx%d\n", t, r);
            expect_refusal(tbl(body), ST_ERR_PARSE,
                           "line 2: rows wide%dx%d needs rows of at least 8192 values (128 streams); n_cols is 7936", t,
                           r);
            st_table *e = NULL;
            assert_int_equal(st_table_create(&g_id, &e), ST_OK);
            st_mmvq_key short_k = {ST_IQ3_S, 4096, 7936};
            assert_int_equal(st_table_add_mmvq(e, &short_k, rows), ST_ERR_INVALID_ARG);
            assert_non_null(strstr(st_last_error(), "needs rows of at least 8192 values"));
            assert_int_equal(st_table_add_mmvq(e, &k, rows), ST_OK);
            st_table_destroy(e);
            accepted++;
        }
    assert_int_equal(accepted, n);
    expect_refusal(tbl("mmvq iq3_s 4096 14336 wide\n"), ST_ERR_PARSE, "line 2: rows wide is not a compiled-in variant (%s)", list);
    const char *bad[] = {"wide64",    "wide64x",   "widex2",        "wide64x2x",
                         "wide64y2",  "wide-64x2", "wide64x02a", "wide99999999999999999999x2", "wide64x+2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "mmvq iq3_s 4096 14336 %s\n", bad[i]);
        expect_refusal(tbl(body), ST_ERR_PARSE, "line 2: rows %s is not a compiled-in variant (%s)", bad[i], list);
    }
    snprintf(body, sizeof body, "mmvq iq3_s 4096 14336 %d\n", STRATA_MMVQ_ID_WIDE(64, 2));
    expect_refusal(tbl(body), ST_ERR_PARSE, "line 2: rows %d is not a compiled-in variant (%s)",
                   STRATA_MMVQ_ID_WIDE(64, 2), list);
}

static void table_accepts_exactly_the_compiled_in_expert_pairs(void **state)
{
    (void)state;
    char list[256], body[128];
    pairs_list(list, sizeof list);
    int accepted = 0;
    for (int g = 0; g <= 17; g++)
        for (int d = 0; d <= 17; d++) {
            snprintf(body, sizeof body, "expert iq3_s iq4_nl 2560 640 3 %d %d\n", g, d);
            const char *text = tbl(body);
            assert_int_equal(st_expert_rows_valid(g, d), in_pairs(g, d));
            if (in_pairs(g, d)) {
                expect_engages(text, 1);
                accepted++;
            } else {
                expect_refusal(text, ST_ERR_PARSE,
                               "line 2: rows %d/%d is not a compiled-in variant (%s)", g, d, list);
            }
        }
    int n = 0;
#define T_COUNTP_(a, b) n++;
    STRATA_EXPERT_ROWS_VARIANTS(T_COUNTP_)
#undef T_COUNTP_
    assert_int_equal(accepted, n);
}

static void table_refuses_rows_not_compiled_in_with_documented_wording(void **state)
{
    (void)state;
    /* The DESIGN.md example, line 7, against this build's list. */
    char list[256], plist[256];
    rows_list(list, sizeof list);
    pairs_list(plist, sizeof plist);
    assert_string_equal(list, "1 2 4 8 16 mma8 mma16 mma32 split2 split4 split8 wide64x1 wide64x2 wide64x4 wide128x1 wide128x2 wide128x4");
    assert_string_equal(plist, "1/1 2/2 4/2 4/4 8/4 8/8");
    const char *text = tbl("# a\n#b\n\nmmvq q8_0 32 32 1\nmmvq q8_0 64 32 2\nmmvq q8_0 96 32 3\n");
    expect_refusal(text, ST_ERR_PARSE, "line 7: rows 3 is not a compiled-in variant (1 2 4 8 16 mma8 mma16 mma32 split2 split4 split8 wide64x1 wide64x2 wide64x4 wide128x1 wide128x2 wide128x4)");
    text = tbl("# a\n#b\n\nmmvq q8_0 32 32 1\nmmvq q8_0 64 32 2\nexpert q8_0 q8_0 32 32 1 3 5\n");
    expect_refusal(text, ST_ERR_PARSE,
                   "line 7: rows 3/5 is not a compiled-in variant (1/1 2/2 4/2 4/4 8/4 8/8)");
    expect_refusal(tbl("mmvq q8_0 32 32 99999999999999999999\n"), ST_ERR_PARSE,
                   "line 2: rows 99999999999999999999 is not a compiled-in variant (%s)", list);
}

static void table_refuses_rows_with_wrong_token_count(void **state)
{
    (void)state;
    expect_refusal(tbl("#\n#\n#\n#\n#\n#\n#\nexpert iq3_s iq4_nl 2560 640 1\n"), ST_ERR_PARSE,
                   "line 9: expected 8 tokens for an expert row, found 6");
    expect_refusal(tbl("expert iq3_s iq4_nl 2560 640 1 4 2 9\n"), ST_ERR_PARSE,
                   "line 2: expected 8 tokens for an expert row, found 9");
    expect_refusal(tbl("mmvq iq3_s 2560 2560\n"), ST_ERR_PARSE,
                   "line 2: expected 5 tokens for an mmvq row, found 4");
    expect_refusal(tbl("mmvq iq3_s 2560 2560 4 4\n"), ST_ERR_PARSE,
                   "line 2: expected 5 tokens for an mmvq row, found 6");
    expect_refusal(tbl("mmvq\n"), ST_ERR_PARSE,
                   "line 2: expected 5 tokens for an mmvq row, found 1");
}

static void table_refuses_values_that_are_not_positive_decimals(void **state)
{
    (void)state;
    static const char *const bad[] = {"abc", "-5", "+5", "0x10", "1.5", "1e3", "32k", "-0"};
    char body[128];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "mmvq q8_0 %s 32 1\n", bad[i]);
        expect_refusal(tbl(body), ST_ERR_PARSE,
                       "line 2: n_rows '%s' is not a positive decimal integer", bad[i]);
    }
    /* control bytes are shown as '?' */
    expect_refusal(tbl("mmvq q8_0 3\x01 32 1\n"), ST_ERR_PARSE,
                   "line 2: n_rows '3?' is not a positive decimal integer");
    expect_refusal(tbl("expert q8_0 q8_0 32 32 x 1 1\n"), ST_ERR_PARSE,
                   "line 2: n_tokens 'x' is not a positive decimal integer");
    expect_refusal(tbl("expert q8_0 q8_0 32 32 1 -1 1\n"), ST_ERR_PARSE,
                   "line 2: gu_rows '-1' is not a decimal number");
    char list[256];
    rows_list(list, sizeof list);
    expect_refusal(tbl("mmvq q8_0 32 32 +1\n"), ST_ERR_PARSE, "line 2: rows +1 is not a compiled-in variant (%s)", list);
}

static void table_refuses_zero_overflow_and_out_of_range_dims(void **state)
{
    (void)state;
    expect_refusal(tbl("mmvq q8_0 0 32 1\n"), ST_ERR_PARSE, "line 2: n_rows 0 is out of range 1..%d",
                   ST_TABLE_MAX_DIM);
    expect_refusal(tbl("mmvq q8_0 32 0 1\n"), ST_ERR_PARSE, "line 2: n_cols 0 is out of range 1..%d",
                   ST_TABLE_MAX_DIM);
    expect_refusal(tbl("mmvq q8_0 1048577 32 1\n"), ST_ERR_PARSE,
                   "line 2: n_rows 1048577 is out of range 1..1048576");
    expect_refusal(tbl("mmvq q8_0 32 184467440737095516160 1\n"), ST_ERR_PARSE,
                   "line 2: n_cols 184467440737095516160 is out of range 1..%d", ST_TABLE_MAX_DIM);
    expect_refusal(tbl("mmvq q8_0 4294967328 32 1\n"), ST_ERR_PARSE,
                   "line 2: n_rows 4294967328 is out of range 1..%d", ST_TABLE_MAX_DIM);
    char row[160];
    snprintf(row, sizeof row, "#\nexpert iq3_s iq4_nl 2560 640 %d 4 2\n", ST_TABLE_MAX_TOKENS + 1);
    expect_refusal(tbl(row), ST_ERR_PARSE, "line 3: n_tokens %d is out of range 1..%d", ST_TABLE_MAX_TOKENS + 1,
                   ST_TABLE_MAX_TOKENS);
    expect_refusal(tbl("expert iq3_s iq4_nl 2560 640 0 4 2\n"), ST_ERR_PARSE,
                   "line 2: n_tokens 0 is out of range 1..%d", ST_TABLE_MAX_TOKENS);
    /* The largest values are accepted. */
    snprintf(row, sizeof row, "mmvq q8_0 1048576 1048576 1\nexpert q8_0 q8_0 1048576 1048576 %d 1 1\n", ST_TABLE_MAX_TOKENS);
    expect_engages(tbl(row), 2);
    expect_engages(tbl("mmvq q8_0 0032 032 01\n"), 1);
}

static void table_refuses_shape_that_does_not_fit_its_block(void **state)
{
    (void)state;
    expect_refusal(tbl("#\n#\n#\nmmvq iq3_s 2560 100 4\n"), ST_ERR_PARSE,
                   "line 5: n_cols 100 is not a multiple of 256, the block of iq3_s");
    expect_refusal(tbl("expert iq3_s iq4_nl 2592 640 1 4 2\n"), ST_ERR_PARSE,
                   "line 2: n_embd 2592 is not a multiple of 256, the block of iq3_s");
    expect_refusal(tbl("expert iq3_s iq4_nl 2560 650 1 4 2\n"), ST_ERR_PARSE,
                   "line 2: n_ff 650 is not a multiple of 32, the block of iq4_nl");
    expect_refusal(tbl("mmvq Q4_K 32 544 1\n"), ST_ERR_PARSE,
                   "line 2: n_cols 544 is not a multiple of 256, the block of q4_K");
}

static void table_refuses_duplicate_shapes(void **state)
{
    (void)state;
    expect_refusal(tbl("#\n#\nmmvq iq3_s 2560 2560 4\n#\n#\n#\n#\nmmvq IQ3_S 2560 2560 8\n"),
                   ST_ERR_PARSE, "line 9: duplicate shape (first on line 4)");
    expect_refusal(tbl("expert iq3_s iq4_nl 2560 640 1 4 2\nexpert iq3_s iq4_nl 2560 640 1 4 2\n"),
                   ST_ERR_PARSE, "line 3: duplicate shape (first on line 2)");
    /* Keys that differ in one field are different shapes. */
    expect_engages(tbl("expert iq3_s iq4_nl 2560 640 1 4 2\n"
                       "expert iq3_s iq4_nl 2560 640 2 4 2\n"
                       "expert iq3_xxs iq4_nl 2560 640 1 4 2\n"
                       "expert iq3_s q8_0 2560 640 1 4 2\n"
                       "mmvq iq3_s 2560 2560 4\n"
                       "mmvq iq3_s 2560 2304 4\n"
                       "mmvq iq3_s 2304 2560 4\n"
                       "mmvq iq2_s 2560 2560 4\n"),
                   8);
}

static void table_refuses_unknown_kernel_kind(void **state)
{
    (void)state;
    expect_refusal(tbl("#\n#\n#\n#\n#\n#\n#\nfoo iq3_s 2560 2560 4\n"), ST_ERR_PARSE,
                   "line 9: unknown kernel kind 'foo' (expected expert or mmvq)");
    /* Kinds are lower case. */
    expect_refusal(tbl("Mmvq iq3_s 2560 2560 4\n"), ST_ERR_PARSE,
                   "line 2: unknown kernel kind 'Mmvq' (expected expert or mmvq)");
}

static void table_refuses_unknown_type_listing_known_ones(void **state)
{
    (void)state;
    char known[256];
    size_t at = 0;
#define T_NAME_(id, name, ggml, qk, bytes) \
    at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", at ? " " : "", name);
    ST_QTYPES(T_NAME_)
#undef T_NAME_
    expect_refusal(tbl("#\n#\n#\n#\n#\n#\n#\nmmvq q5_z 2560 2560 4\n"), ST_ERR_PARSE,
                   "line 9: unknown type 'q5_z' (known: %s)", known);
    expect_refusal(tbl("expert iq3_s iq4_nlx 2560 640 1 4 2\n"), ST_ERR_PARSE,
                   "line 2: unknown type 'iq4_nlx' (known: %s)", known);
    assert_non_null(strstr(known, "iq3_s"));
}

static void table_refuses_nul_byte_anywhere(void **state)
{
    (void)state;
    char text[1024];
    int n = snprintf(text, sizeof text, "%s\nmmvq iq3_s 2560 2560 4\nmmvq iq3_s 25X0 2560 4\n", g_hdr);
    char *x = strchr(text, 'X');
    *x = '\0';
    expect_refusal_n(text, (size_t)n, NULL, ST_ERR_PARSE, "line 3: contains a NUL byte");
    /* in a comment before the header */
    char pre[] = "# a\0b\nanything";
    expect_refusal_n(pre, sizeof pre - 1, NULL, ST_ERR_PARSE, "line 1: contains a NUL byte");
    /* in a trailing comment */
    n = snprintf(text, sizeof text, "%s\n#X\n", g_hdr);
    *strchr(text, 'X') = '\0';
    expect_refusal_n(text, (size_t)n, NULL, ST_ERR_PARSE, "line 2: contains a NUL byte");
    /* a lone NUL after the last newline */
    n = snprintf(text, sizeof text, "%s\nX", g_hdr);
    *strchr(text, 'X') = '\0';
    expect_refusal_n(text, (size_t)n, NULL, ST_ERR_PARSE, "line 2: contains a NUL byte");
}

static void table_parse_reads_only_len_bytes(void **state)
{
    (void)state;
    /* An exact-size heap copy with no terminator: ASan flags any overread. */
    const char *src = tbl("mmvq iq3_s 2560 2560 4\nmmvq q8_0 32 32 16");
    size_t n = strlen(src);
    char *exact = malloc(n);
    memcpy(exact, src, n);
    char msg[MSG];
    st_table *t = NULL;
    assert_int_equal(parse_cfg(exact, n, NULL, &t, msg), ST_OK);
    int rows = 0;
    st_mmvq_key k = {ST_Q8_0, 32, 32};
    assert_true(st_table_lookup_mmvq(t, &k, &rows));
    assert_int_equal(rows, 16);
    st_table_destroy(t);
    /* Cut inside the last token: "16" becomes "1". */
    assert_int_equal(parse_cfg(exact, n - 1, NULL, &t, msg), ST_OK);
    assert_true(st_table_lookup_mmvq(t, &k, &rows));
    assert_int_equal(rows, 1);
    st_table_destroy(t);
    free(exact);
}

static void table_parse_handles_very_long_lines_and_inputs(void **state)
{
    (void)state;
    size_t big = (size_t)1 << 21;
    char *text = malloc(big + 4096);
    /* a 2 MiB comment, then the table */
    text[0] = '#';
    memset(text + 1, 'c', big);
    int n = snprintf(text + big + 1, 4096, "\n%s\nmmvq iq3_s 2560 2560 4\n", g_hdr);
    char msg[MSG];
    st_table *t = NULL;
    assert_int_equal(parse_cfg(text, big + 1 + (size_t)n, NULL, &t, msg), ST_OK);
    assert_int_equal(st_table_count(t), 1);
    st_table_destroy(t);
    /* a 2 MiB kind token: the message shows its first 40 bytes */
    n = snprintf(text, 4096, "%s\n", g_hdr);
    memset(text + n, 'k', big);
    char forty[41];
    memset(forty, 'k', 40);
    forty[40] = '\0';
    expect_refusal_n(text, (size_t)n + big, NULL, ST_ERR_PARSE,
                     "line 2: unknown kernel kind '%s...' (expected expert or mmvq)", forty);
    /* many tokens on one row */
    n = snprintf(text, 4096, "%s\nmmvq", g_hdr);
    for (size_t i = 0; i < 100000; i++) memcpy(text + n + 2 * i, " 1", 2);
    expect_refusal_n(text, (size_t)n + 200000, NULL, ST_ERR_PARSE,
                     "line 2: expected 5 tokens for an mmvq row, found 100001");
    free(text);
}

static void table_parse_any_skips_identity_and_knob_checks(void **state)
{
    (void)state;
    const char *text = "# other machine\ngfx1030 70152802 1a2b3c4d 99\nmmvq iq3_s 2560 2560 4\n";
    char msg[MSG];
    st_table *t = NULL;
    assert_int_equal(st_table_parse_any(text, strlen(text), "o.table", &t, msg, sizeof msg), ST_OK);
    assert_string_equal(msg, "decode tuning: 1 shapes from o.table (gfx1030, runtime 70152802)");
    const st_identity *id = st_table_identity(t);
    assert_string_equal(id->arch, "gfx1030");
    assert_string_equal(id->runtime, "70152802");
    assert_string_equal(id->compiler, "1a2b3c4d");
    assert_int_equal(id->space, 99);
    st_table_destroy(t);
    /* structure still checked */
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"a b c d e\n", "decode tuning: o.table: line 1: header must have 4 tokens (<arch> <runtime> <compiler> <space>), found 5"},
        {"a b c x\n", "decode tuning: o.table: line 1: space token 'x' is not a number"},
        {"a b c 1\nmmvq iq3_s 2560 2560 3\n", "decode tuning: o.table: line 2: rows 3 is not a compiled-in variant (1 2 4 8 16 mma8 mma16 mma32 split2 split4 split8 wide64x1 wide64x2 wide64x4 wide128x1 wide128x2 wide128x4)"},
        {"a b c\n", "decode tuning: o.table: made before the kernel selection space was tracked - the kernels have changed since"},
        {"#\n", "decode tuning: o.table: empty file (no header line)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t = (st_table *)&g_dummy;
        assert_int_not_equal(st_table_parse_any(bad[i].text, strlen(bad[i].text), "o.table", &t, msg,
                                                sizeof msg),
                             ST_OK);
        assert_null(t);
        assert_string_equal(msg, bad[i].msg);
    }
}

/* ---- the data structure ---------------------------------------------------- */

static void table_round_trips_through_format_and_parse(void **state)
{
    (void)state;
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    assert_int_equal(st_table_add_comment(t, "device: CPU reference backend"), ST_OK);
    assert_int_equal(st_table_add_comment(t, "two\nlines  "), ST_OK);
    assert_int_equal(st_table_add_comment(t, ""), ST_OK);
    st_mmvq_key m1 = {ST_IQ3_S, 2560, 2560}, m2 = {ST_Q8_0, 32, 32};
    st_expert_key e1 = {ST_IQ3_S, ST_IQ4_NL, 2560, 640, 1};
    assert_int_equal(st_table_add_mmvq(t, &m1, 4), ST_OK);
    assert_int_equal(st_table_add_expert(t, &e1, 4, 2), ST_OK);
    assert_int_equal(st_table_add_mmvq(t, &m2, 1), ST_OK);

    char *text = NULL;
    size_t len = 0;
    assert_int_equal(st_table_format(t, &text, &len), ST_OK);
    char expected[1024];
    snprintf(expected, sizeof expected,
             "%s\n# device: CPU reference backend\n# two lines\n#\n"
             "mmvq iq3_s 2560 2560 4\nexpert iq3_s iq4_nl 2560 640 1 4 2\nmmvq q8_0 32 32 1\n",
             g_hdr);
    assert_string_equal(text, expected);
    assert_int_equal(len, strlen(expected));

    st_table *u = NULL;
    char msg[MSG];
    assert_int_equal(st_table_parse_any(text, len, PATH, &u, msg, sizeof msg), ST_OK);
    char *text2 = NULL;
    size_t len2 = 0;
    assert_int_equal(st_table_format(u, &text2, &len2), ST_OK);
    assert_int_equal(len2, len);
    assert_memory_equal(text2, text, len);

    /* lookups: hits and misses */
    int r = 0, g = 0, d = 0;
    assert_true(st_table_lookup_mmvq(u, &m1, &r));
    assert_int_equal(r, 4);
    assert_true(st_table_lookup_mmvq(u, &m2, &r));
    assert_int_equal(r, 1);
    assert_true(st_table_lookup_expert(u, &e1, &g, &d));
    assert_int_equal(g, 4);
    assert_int_equal(d, 2);
    st_mmvq_key miss = {ST_IQ3_S, 2560, 2304};
    assert_false(st_table_lookup_mmvq(u, &miss, &r));
    st_expert_key emiss = e1;
    emiss.n_tokens = 2;
    assert_false(st_table_lookup_expert(u, &emiss, &g, &d));
    assert_false(st_table_lookup_mmvq(NULL, &m1, &r));
    /* iteration in file order, per kind */
    assert_int_equal(st_table_count(u), 3);
    assert_int_equal(st_table_mmvq_count(u), 2);
    assert_int_equal(st_table_expert_count(u), 1);
    st_mmvq_key k;
    st_table_mmvq_at(u, 1, &k, &r);
    assert_int_equal(k.type, ST_Q8_0);
    assert_int_equal(r, 1);
    st_expert_key ek;
    st_table_expert_at(u, 0, &ek, &g, &d);
    assert_int_equal(ek.n_ff, 640);
    assert_true(st_identity_matches(st_table_identity(u), &g_id));
    free(text);
    free(text2);
    st_table_destroy(t);
    st_table_destroy(u);
    st_table_destroy(NULL);
}

static void table_format_moves_comments_after_header(void **state)
{
    (void)state;
    const char *text = "# before\n cpu r c 2 \nmmvq q8_0 32 32 1\n#  after\n";
    st_table *t = NULL;
    char msg[MSG], *out = NULL;
    assert_int_equal(st_table_parse_any(text, strlen(text), PATH, &t, msg, sizeof msg), ST_OK);
    assert_int_equal(st_table_format(t, &out, NULL), ST_OK);
    assert_string_equal(out, "cpu r c 2\n# before\n#  after\nmmvq q8_0 32 32 1\n");
    free(out);
    st_table_destroy(t);
}

static void table_add_rejects_invalid_shapes(void **state)
{
    (void)state;
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    st_mmvq_key m = {ST_IQ3_S, 2560, 2560};
    assert_int_equal(st_table_add_mmvq(t, &m, 3), ST_ERR_INVALID_ARG);
    assert_int_equal(st_table_add_mmvq(t, &m, 4), ST_OK);
    assert_int_equal(st_table_add_mmvq(t, &m, 8), ST_ERR_INVALID_ARG); /* duplicate */
    st_mmvq_key bad = {ST_IQ3_S, 2560, 100};
    assert_int_equal(st_table_add_mmvq(t, &bad, 4), ST_ERR_INVALID_ARG);
    bad = (st_mmvq_key){(st_qtype)5, 32, 32};
    assert_int_equal(st_table_add_mmvq(t, &bad, 4), ST_ERR_INVALID_ARG);
    bad = (st_mmvq_key){ST_Q8_0, 0, 32};
    assert_int_equal(st_table_add_mmvq(t, &bad, 4), ST_ERR_INVALID_ARG);
    st_expert_key e = {ST_IQ3_S, ST_IQ4_NL, 2560, 640, ST_TABLE_MAX_TOKENS + 1};
    assert_int_equal(st_table_add_expert(t, &e, 4, 2), ST_ERR_INVALID_ARG);
    e.n_tokens = 8;
    assert_int_equal(st_table_add_expert(t, &e, 2, 4), ST_ERR_INVALID_ARG);
    assert_int_equal(st_table_add_expert(t, &e, 4, 2), ST_OK);
    assert_int_equal(st_table_count(t), 2);
    st_table_destroy(t);
    /* identities a header could not carry */
    st_identity id = g_id;
    snprintf(id.arch, sizeof id.arch, "two words");
    assert_int_equal(st_table_create(&id, &t), ST_ERR_INVALID_ARG);
    assert_null(t);
    snprintf(id.arch, sizeof id.arch, "#cpu");
    assert_int_equal(st_table_create(&id, &t), ST_ERR_INVALID_ARG);
}

static void table_lookup_finds_every_row_of_a_large_table(void **state)
{
    (void)state;
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    static const int rows[] = {1, 2, 4, 8, 16};
    for (int i = 1; i <= 6000; i++) {
        st_mmvq_key k = {ST_Q8_0, i, 32 * (1 + i % 7)};
        assert_int_equal(st_table_add_mmvq(t, &k, rows[i % 5]), ST_OK);
    }
    for (int i = 1; i <= 3000; i++) {
        st_expert_key k = {ST_IQ3_S, ST_IQ4_NL, 256 * (1 + i % 9), 32 * i, 1 + i % 8};
        assert_int_equal(st_table_add_expert(t, &k, 4, 2), ST_OK);
    }
    assert_int_equal(st_table_count(t), 9000);
    for (int i = 1; i <= 6000; i++) {
        st_mmvq_key k = {ST_Q8_0, i, 32 * (1 + i % 7)};
        int r = 0;
        assert_true(st_table_lookup_mmvq(t, &k, &r));
        assert_int_equal(r, rows[i % 5]);
        k.n_cols += 32 * 7;
        assert_false(st_table_lookup_mmvq(t, &k, &r));
    }
    for (int i = 1; i <= 3000; i++) {
        st_expert_key k = {ST_IQ3_S, ST_IQ4_NL, 256 * (1 + i % 9), 32 * i, 1 + i % 8};
        assert_true(st_table_lookup_expert(t, &k, NULL, NULL));
        k.down_type = ST_Q8_0;
        assert_false(st_table_lookup_expert(t, &k, NULL, NULL));
    }
    st_table_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_accepts_exactly_the_compiled_in_mmvq_rows),
        cmocka_unit_test(table_accepts_exactly_the_compiled_in_mma_variants),
        cmocka_unit_test(table_accepts_exactly_the_compiled_in_split_variants),
        cmocka_unit_test(table_accepts_exactly_the_compiled_in_wide_variants_on_wide_rows),
        cmocka_unit_test(table_accepts_exactly_the_compiled_in_expert_pairs),
        cmocka_unit_test(table_refuses_rows_not_compiled_in_with_documented_wording),
        cmocka_unit_test(table_refuses_rows_with_wrong_token_count),
        cmocka_unit_test(table_refuses_values_that_are_not_positive_decimals),
        cmocka_unit_test(table_refuses_zero_overflow_and_out_of_range_dims),
        cmocka_unit_test(table_refuses_shape_that_does_not_fit_its_block),
        cmocka_unit_test(table_refuses_duplicate_shapes),
        cmocka_unit_test(table_refuses_unknown_kernel_kind),
        cmocka_unit_test(table_refuses_unknown_type_listing_known_ones),
        cmocka_unit_test(table_refuses_nul_byte_anywhere),
        cmocka_unit_test(table_parse_reads_only_len_bytes),
        cmocka_unit_test(table_parse_handles_very_long_lines_and_inputs),
        cmocka_unit_test(table_parse_any_skips_identity_and_knob_checks),
        cmocka_unit_test(table_round_trips_through_format_and_parse),
        cmocka_unit_test(table_format_moves_comments_after_header),
        cmocka_unit_test(table_add_rejects_invalid_shapes),
        cmocka_unit_test(table_lookup_finds_every_row_of_a_large_table),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
