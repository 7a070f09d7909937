/* The table's comment vocabulary (strata/table_meta.h): what each comment
 * line is, the token counts, tuned defaults written and read back through a
 * file's text, provenance, the merge note and the shape keys. The words are
 * spelled here on purpose: this test is the second witness of the format. */
#include "table_test_util.h"

#include "strata/table_meta.h"

static st_table *table_of(const char *body)
{
    st_table *t = NULL;
    char msg[MSG];
    const char *text = tbl(body);
    if (parse_cfg(text, strlen(text), NULL, &t, msg) != ST_OK) fail_msg("%s", msg);
    return t;
}

static void each_comment_has_one_kind(void **state)
{
    (void)state;
    static const struct {
        const char *c;
        st_comment_kind k;
    } cases[] = {
        {"tool: tune_decode 0.3.0", ST_COMMENT_PROVENANCE},
        {"model sha256: abc", ST_COMMENT_PROVENANCE},
        {"made by tune_decode 0.1.0 on 2026-10-01T00:00:00Z, device Box, driver 7", ST_COMMENT_PROVENANCE},
        {"ntok-mix 1 2 4 8", ST_COMMENT_NTOK_MIX},
        {"ntok-mix", ST_COMMENT_NTOK_MIX},
        {"tuned-default mmvq iq3_s 256 256", ST_COMMENT_TUNED_DEFAULT},
        {"tuned-default expert iq3_s iq4_nl 256 64 2", ST_COMMENT_TUNED_DEFAULT},
        /* a record the loader would not honour is free text */
        {"tuned-default", ST_COMMENT_OTHER},
        {"tuned-default ", ST_COMMENT_OTHER},
        {"tuned-default mmvq iq9_z 256 256", ST_COMMENT_OTHER},
        {"tuned-default expert iq3_s iq4_nl 256 64", ST_COMMENT_OTHER},
        {"tuned-default mmvq iq3_s 256 256 extra", ST_COMMENT_OTHER},
        {"tuned-defaults mmvq iq3_s 256 256", ST_COMMENT_OTHER},
        {"merged: shapes kept from the campaign of x", ST_COMMENT_MERGED},
        {"tool:x", ST_COMMENT_OTHER},
        {"hand-written by an operator", ST_COMMENT_OTHER},
        {"", ST_COMMENT_OTHER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (st_table_comment_kind(cases[i].c) != cases[i].k)
            fail_msg("'%s': kind %d, want %d", cases[i].c, (int)st_table_comment_kind(cases[i].c), (int)cases[i].k);
    assert_int_equal(st_table_comment_kind(NULL), ST_COMMENT_OTHER);
}

static void a_bare_tuned_default_line_is_no_shape(void **state)
{
    (void)state;
    /* the word alone, and with spaces after it (the parser trims them): no
     * record, nothing read past the line */
    st_table *t = table_of("# tuned-default\n# tuned-default   \n# tuned-default mmvq iq9_z 1 1\nmmvq q8_0 32 32 2\n");
    assert_int_equal(st_table_tuned_default_count(t), 0);
    assert_int_equal(st_table_comment_count(t), 3);
    st_table_destroy(t);
}

static void token_counts_round_trip(void **state)
{
    (void)state;
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    bool in[ST_MAX_TOKENS];
    assert_int_equal(st_table_ntok_mix(t, in), 0);
    for (int i = 0; i < ST_MAX_TOKENS; i++) assert_false(in[i]);
    const int bad[] = {1, ST_MAX_TOKENS + 1};
    assert_int_equal(st_table_set_ntok_mix(t, bad, 2), ST_ERR_INVALID_ARG);
    const int mix[] = {8, 2, 1, 2, 32};
    assert_int_equal(st_table_set_ntok_mix(t, mix, 5), ST_OK);
    assert_string_equal(st_table_comment_at(t, 0), "ntok-mix 1 2 8 32");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(st_table_format(t, &text, &len), ST_OK);
    st_table_destroy(t);
    char msg[MSG];
    assert_int_equal(parse_cfg(text, len, NULL, &t, msg), ST_OK);
    free(text);
    assert_int_equal(st_table_ntok_mix(t, in), 4);
    for (int i = 0; i < ST_MAX_TOKENS; i++) assert_int_equal(in[i], i + 1 == 1 || i + 1 == 2 || i + 1 == 8 || i + 1 == 32);
    st_table_destroy(t);
    /* the first line counts, in any order */
    t = table_of("# ntok-mix 4 3\n# ntok-mix 5\n");
    assert_int_equal(st_table_ntok_mix(t, in), 2);
    assert_true(in[2] && in[3] && !in[4]);
    st_table_destroy(t);
    /* a damaged first line is -1 with its reason, never "records none" nor
     * the next line's counts */
    static const char *const damaged[] = {"# ntok-mix\n",         "# ntok-mix \n",        "# ntok-mix x\n# ntok-mix 3\n",
                                          "# ntok-mix 1 x\n",     "# ntok-mix 0\n",       "# ntok-mix 33\n",
                                          "# ntok-mix 2 2\n",     "# ntok-mix 1  2\n",    "# ntok-mix 1,2\n",
                                          "# ntok-mix 1\t2\n",   "# ntok-mix 01\n",      "# ntok-mix -1\n",
                                          "# ntok-mix +1\n",      "# ntok-mix 3x\n",      "# ntok-mix 99999999999999999999\n"};
    for (size_t k = 0; k < sizeof damaged / sizeof damaged[0]; k++) {
        t = table_of(damaged[k]);
        in[0] = true;
        assert_int_equal(st_table_ntok_mix(t, in), -1);
        for (int i = 0; i < ST_MAX_TOKENS; i++) assert_false(in[i]);
        assert_non_null(strstr(st_last_error(), "distinct token counts 1..32"));
        st_table_destroy(t);
    }
}

static void tuned_defaults_are_written_and_read_back(void **state)
{
    (void)state;
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    const st_mmvq_key mk = {ST_IQ3_S, 4096, 14336};
    const st_expert_key ek = {ST_IQ3_S, ST_IQ4_NL, 2560, 640, 3};
    assert_int_equal(st_table_add_tuned_default_mmvq(t, &mk), ST_OK);
    assert_int_equal(st_table_add_tuned_default_expert(t, &ek), ST_OK);
    assert_int_equal(st_table_add_tuned_default_mmvq(t, &mk), ST_OK); /* twice: one record */
    assert_string_equal(st_table_comment_at(t, 0), "tuned-default mmvq iq3_s 4096 14336");
    assert_string_equal(st_table_comment_at(t, 1), "tuned-default expert iq3_s iq4_nl 2560 640 3");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(st_table_format(t, &text, &len), ST_OK);
    st_table_destroy(t);
    char msg[MSG];
    assert_int_equal(parse_cfg(text, len, NULL, &t, msg), ST_OK);
    free(text);
    assert_true(st_table_tuned_default_mmvq(t, &mk));
    assert_true(st_table_tuned_default_expert(t, &ek));
    const st_expert_key other = {ST_IQ3_S, ST_IQ4_NL, 2560, 640, 4};
    assert_false(st_table_tuned_default_expert(t, &other));
    assert_int_equal(st_table_tuned_default_count(t), 2);
    bool expert = true;
    st_mmvq_key m2 = {0};
    st_expert_key e2 = {0};
    st_table_tuned_default_at(t, 0, &expert, &m2, &e2);
    assert_false(expert);
    assert_memory_equal(&m2, &mk, sizeof mk);
    st_table_tuned_default_at(t, 1, &expert, &m2, &e2);
    assert_true(expert);
    assert_memory_equal(&e2, &ek, sizeof ek);
    st_table_destroy(t);
}

static void provenance_round_trips_and_a_merge_notes_the_earlier_campaign(void **state)
{
    (void)state;
    st_provenance p;
    memset(&p, 0, sizeof p);
    snprintf(p.tool, sizeof p.tool, "tune_decode 9.9.9");
    snprintf(p.date, sizeof p.date, "2026-12-02T00:00:00Z");
    snprintf(p.model, sizeof p.model, "m");
    snprintf(p.report, sizeof p.report, "r.json r.html");
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    assert_int_equal(st_provenance_to_table(t, &p), ST_OK);
    assert_int_equal(st_table_comment_count(t), 4); /* the empty fields write nothing */
    for (size_t i = 0; i < st_table_comment_count(t); i++)
        assert_int_equal(st_table_comment_kind(st_table_comment_at(t, i)), ST_COMMENT_PROVENANCE);
    assert_int_equal(st_table_add_merged_note(t, &p), ST_OK);
    assert_int_equal(st_table_comment_kind(st_table_comment_at(t, 4)), ST_COMMENT_MERGED);
    assert_non_null(strstr(st_table_comment_at(t, 4), "2026-12-02T00:00:00Z"));
    st_provenance q;
    st_provenance_from_table(t, &q);
    assert_memory_equal(&p, &q, sizeof p);
    for (int i = 0; i < ST_PROVENANCE_COUNT; i++) assert_true(st_provenance_key(i)[0] != '\0');
    assert_string_equal(st_provenance_key(ST_PROVENANCE_COUNT), "");
    st_table_destroy(t);
}

static void shape_keys_are_the_rows(void **state)
{
    (void)state;
    char b[128];
    const st_mmvq_key mk = {ST_Q8_0, 32, 64};
    const st_expert_key ek = {ST_IQ3_S, ST_IQ4_NL, 256, 64, 2};
    assert_string_equal(st_mmvq_key_text(&mk, b, sizeof b), "mmvq q8_0 32 64");
    assert_string_equal(st_expert_key_text(&ek, b, sizeof b), "expert iq3_s iq4_nl 256 64 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_comment_has_one_kind),
        cmocka_unit_test(a_bare_tuned_default_line_is_no_shape),
        cmocka_unit_test(token_counts_round_trip),
        cmocka_unit_test(tuned_defaults_are_written_and_read_back),
        cmocka_unit_test(provenance_round_trips_and_a_merge_notes_the_earlier_campaign),
        cmocka_unit_test(shape_keys_are_the_rows),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
