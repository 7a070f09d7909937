/* The variant module (strata/variants.h, src/contract/variant.c): every
 * compiled-in id round-trips through its family, its name and the parser;
 * nothing else is valid; fits and names; the expert pairs. The lists are
 * expanded here again from the X-macros, independently of the module. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/variants.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int expected_ids(int *ids)
{
    int n = 0;
#define T_ROWS_(r) ids[n++] = STRATA_MMVQ_ID_ROWS(r);
#define T_MMA_(w) ids[n++] = STRATA_MMVQ_ID_MMA(w);
#define T_SPLIT_(w) ids[n++] = STRATA_MMVQ_ID_SPLIT(w);
#define T_WIDE_(t, r) ids[n++] = STRATA_MMVQ_ID_WIDE(t, r);
    STRATA_MMVQ_ROWS_VARIANTS(T_ROWS_)
    STRATA_MMVQ_MMA_VARIANTS(T_MMA_)
    STRATA_MMVQ_SPLIT_VARIANTS(T_SPLIT_)
    STRATA_MMVQ_WIDE_VARIANTS(T_WIDE_)
#undef T_ROWS_
#undef T_MMA_
#undef T_SPLIT_
#undef T_WIDE_
    return n;
}

static void every_mmvq_id_round_trips(void **state)
{
    (void)state;
    int want[64], got[64];
    const int n = expected_ids(want);
    assert_int_equal(n, STRATA_MMVQ_VARIANT_COUNT);
    assert_int_equal(st_mmvq_variant_ids(got, 64), n);
    assert_int_equal(st_mmvq_variant_ids(NULL, 0), n); /* the count alone */
    for (int i = 0; i < n; i++) {
        assert_int_equal(got[i], want[i]);
        const int id = got[i];
        assert_true(st_mmvq_rows_valid(id));
        const st_mmvq_variant v = st_mmvq_variant_of(id);
        assert_true(v.family != ST_MMVQ_DEFAULT && v.family != ST_MMVQ_INVALID);
        assert_int_equal(st_mmvq_variant_id(v), id);
        char name[32];
        st_mmvq_variant_name(id, name, sizeof name);
        int back = 0;
        if (!st_mmvq_variant_parse(name, strlen(name), &back)) fail_msg("'%s' (id %d) does not parse back", name, id);
        assert_int_equal(back, id);
        char choice[32];
        st_mmvq_choice_name(id, choice, sizeof choice);
        if (v.family == ST_MMVQ_ROWS) {
            char want_choice[48];
            snprintf(want_choice, sizeof want_choice, "rows %s", name);
            assert_string_equal(choice, want_choice);
        } else {
            assert_string_equal(choice, name);
        }
    }
}

static void the_names_are_the_tables(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(st_mmvq_variant_name(STRATA_MMVQ_ID_ROWS(4), b, sizeof b), "4");
    assert_string_equal(st_mmvq_variant_name(STRATA_MMVQ_ID_MMA(16), b, sizeof b), "mma16");
    assert_string_equal(st_mmvq_variant_name(STRATA_MMVQ_ID_SPLIT(2), b, sizeof b), "split2");
    assert_string_equal(st_mmvq_variant_name(STRATA_MMVQ_ID_WIDE(64, 2), b, sizeof b), "wide64x2");
    assert_string_equal(st_mmvq_variant_name(0, b, sizeof b), "default");
    assert_string_equal(st_mmvq_choice_name(0, b, sizeof b), "default");
    char list[256];
    st_mmvq_variant_list(list, sizeof list);
    assert_string_equal(list, "1 2 4 8 16 mma8 mma16 mma32 split2 split4 split8 wide64x1 wide64x2 wide64x4 wide128x1 "
                              "wide128x2 wide128x4");
}

static void nothing_else_is_a_variant(void **state)
{
    (void)state;
    int ids[64];
    const int n = st_mmvq_variant_ids(ids, 64);
    int valid = 0;
    for (int id = -1000; id <= 1000; id++) {
        bool in = false;
        for (int i = 0; i < n; i++) in |= ids[i] == id;
        assert_int_equal(st_mmvq_rows_valid(id), in);
        valid += in;
        /* whatever the id, decoding is defined */
        const st_mmvq_variant v = st_mmvq_variant_of(id);
        if (v.family != ST_MMVQ_INVALID && v.family != ST_MMVQ_DEFAULT) assert_int_equal(st_mmvq_variant_id(v), id);
    }
    assert_int_equal(valid, n);
    static const int edge[] = {INT_MIN, INT_MIN + 1, -100, INT_MAX, 0};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        assert_false(st_mmvq_rows_valid(edge[i]));
        char b[32];
        st_mmvq_variant_name(edge[i], b, sizeof b); /* no overflow, no crash */
    }
    assert_int_equal(st_mmvq_variant_of(INT_MIN).family, ST_MMVQ_INVALID);
    assert_int_equal(st_mmvq_variant_of(INT_MAX).family, ST_MMVQ_INVALID); /* no lane count past a block */
    static const char *const junk[] = {"", "0", "3", "+4", "-4", "4x", "104", "222", "mma", "mma4", "mma-8",
                                       "split", "split3", "split4x", "wide", "wide64", "wide64x", "wide64x3",
                                       "wide96x2", "widex2", "wide64x2y", "default", "rows 4", "mma99999999999"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        int id = 12345;
        if (st_mmvq_variant_parse(junk[i], strlen(junk[i]), &id)) fail_msg("'%s' parsed as id %d", junk[i], id);
        assert_int_equal(id, 12345); /* untouched */
    }
    int id = 0;
    assert_true(st_mmvq_variant_parse("mma16xyz", 5, &id)); /* only N bytes are read */
    assert_int_equal(id, STRATA_MMVQ_ID_MMA(16));
}

static void wide_variants_need_wide_rows(void **state)
{
    (void)state;
    int ids[64];
    const int n = st_mmvq_variant_ids(ids, 64);
    const int wide_cols = ST_CANON_WIDE_UNITS * ST_CANON_UNIT;
    for (int i = 0; i < n; i++) {
        const bool wide = st_mmvq_variant_of(ids[i]).family == ST_MMVQ_WIDE;
        assert_int_equal(st_mmvq_variant_min_cols(ids[i]), wide ? wide_cols : 0);
        assert_int_equal(st_mmvq_variant_fits(ids[i], wide_cols - ST_CANON_UNIT), !wide);
        assert_true(st_mmvq_variant_fits(ids[i], wide_cols));
    }
    assert_int_equal(st_mmvq_variant_min_cols(3), -1);
    assert_false(st_mmvq_variant_fits(3, 1 << 20));
}

static void expert_pairs_round_trip(void **state)
{
    (void)state;
    int pairs[64][2];
    const int n = st_expert_variant_ids(pairs, 64);
    assert_int_equal(n, STRATA_EXPERT_VARIANT_COUNT);
    int k = 0;
#define T_PAIR_(g, d)                       \
    assert_int_equal(pairs[k][0], (g));     \
    assert_int_equal(pairs[k][1], (d));     \
    k++;
    STRATA_EXPERT_ROWS_VARIANTS(T_PAIR_)
#undef T_PAIR_
    for (int i = 0; i < n; i++) {
        char name[32], choice[32];
        st_expert_variant_name(pairs[i][0], pairs[i][1], name, sizeof name);
        int g = 0, d = 0;
        assert_true(st_expert_variant_parse(name, strlen(name), &g, &d));
        assert_int_equal(g, pairs[i][0]);
        assert_int_equal(d, pairs[i][1]);
        st_expert_choice_name(g, d, choice, sizeof choice);
        assert_int_equal(strncmp(choice, "rows ", 5), 0);
        assert_string_equal(choice + 5, name);
    }
    static const char *const junk[] = {"", "0/0", "3/5", "8/", "/8", "8//8", "8/8x", "x8/8", "-1/1"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        int g = 7, d = 7;
        assert_false(st_expert_variant_parse(junk[i], strlen(junk[i]), &g, &d));
        assert_int_equal(g + d, 14);
    }
    assert_false(st_expert_rows_valid(0, 0));
    char list[128];
    assert_string_equal(st_expert_variant_list(list, sizeof list), "1/1 2/2 4/2 4/4 8/4 8/8");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_mmvq_id_round_trips),
        cmocka_unit_test(the_names_are_the_tables),
        cmocka_unit_test(nothing_else_is_a_variant),
        cmocka_unit_test(wide_variants_need_wide_rows),
        cmocka_unit_test(expert_pairs_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
