/* The decode tuning table's header: engagement, the identity checks (arch,
 * runtime, compiler, selection space) and the knob refusal, in the
 * documented order and with the exact wording (DESIGN.md section 4). */
#include "table_test_util.h"

/* ---- success -------------------------------------------------------------- */
static void table_engages_matching_table_with_count_line(void **state)
{
    (void)state;
    expect_engages(tbl("# provenance\n"
                       "mmvq iq3_s 2560 2560 4\n"
                       "expert iq3_s iq4_nl 2560 640 1 4 2\n"
                       "\n"
                       "expert iq3_s iq4_nl 2560 640 2 8 8\n"),
                   3);
}

static void table_engages_header_only_table_with_zero_shapes(void **state)
{
    (void)state;
    expect_engages(tbl(""), 0);
    expect_engages(tbl("# nothing measured\n\n"), 0);
}

static void table_reads_crlf_comments_and_trailing_blanks(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof text,
             "# made on a machine with CRLF\r\n"
             "\r\n"
             "  %s \t\r\n"
             "#\r\n"
             "mmvq\tiq3_s  2560\t 2560 4 \t\r\n"
             "   # indented comment\r\n"
             "expert IQ3_S Iq4_Nl 2560 640 8 2 2\r\r\n"
             " \t \r\n",
             g_hdr);
    expect_engages(text, 2);
}

static void table_accepts_type_names_in_any_case(void **state)
{
    (void)state;
    st_table *t = NULL;
    char msg[MSG];
    const char *text = tbl("mmvq Q4_k 32 512 2\n");
    assert_int_equal(parse_cfg(text, strlen(text), NULL, &t, msg), ST_OK);
    st_mmvq_key k = {ST_Q4_K, 32, 512};
    int rows = 0;
    assert_true(st_table_lookup_mmvq(t, &k, &rows));
    assert_int_equal(rows, 2);
    st_table_destroy(t);
}

/* ---- header, identity, knobs ----------------------------------------------- */

static void table_refuses_empty_file(void **state)
{
    (void)state;
    expect_refusal("", ST_ERR_PARSE, "empty file (no header line)");
    expect_refusal_n(NULL, 0, NULL, ST_ERR_PARSE, "empty file (no header line)");
}

static void table_refuses_comment_only_file(void **state)
{
    (void)state;
    expect_refusal("# only a comment\n\n   \n#another\r\n", ST_ERR_PARSE,
                   "empty file (no header line)");
}

static void table_refuses_header_without_space_token(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "# old\n%s %s %s\nmmvq iq3_s 2560 2560 4\n", g_id.arch,
             g_id.runtime, g_id.compiler);
    expect_refusal(text, ST_ERR_REFUSED,
                   "made before the kernel selection space was tracked - the kernels have "
                   "changed since");
}

static void table_refuses_header_with_wrong_token_count(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "# c\n%s extra\n", g_hdr);
    expect_refusal(text, ST_ERR_PARSE,
                   "line 2: header must have 4 tokens (<arch> <runtime> <compiler> <space>), "
                   "found 5");
    expect_refusal("cpu 1\n", ST_ERR_PARSE,
                   "line 1: header must have 4 tokens (<arch> <runtime> <compiler> <space>), "
                   "found 2");
}

static void table_refuses_non_numeric_space(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "#\n%s %s %s x\n", g_id.arch, g_id.runtime, g_id.compiler);
    expect_refusal(text, ST_ERR_PARSE, "line 2: space token 'x' is not a number");
    snprintf(text, sizeof text, "%s %s %s -2\n", g_id.arch, g_id.runtime, g_id.compiler);
    expect_refusal(text, ST_ERR_PARSE, "line 1: space token '-2' is not a number");
}

static void table_refuses_wrong_space(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "%s %s %s 99\n", g_id.arch, g_id.runtime, g_id.compiler);
    expect_refusal(text, ST_ERR_REFUSED,
                   "made for kernel selection space 99, this build is %d (the kernels "
                   "changed): run the tuner again",
                   STRATA_SELECTION_SPACE);
}

static void table_refuses_wrong_arch(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "gfx1030 %s %s %d\n", g_id.runtime, g_id.compiler, g_id.space);
    expect_refusal(text, ST_ERR_REFUSED,
                   "made for gfx1030, this device is cpu: run the tuner on this device");
}

static void table_refuses_wrong_runtime(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "cpu 70152802 %s %d\n", g_id.compiler, g_id.space);
    expect_refusal(text, ST_ERR_REFUSED,
                   "made for runtime 70152802, this process loaded %s: tune and run with the "
                   "same runtime library",
                   g_id.runtime);
}

static void table_refuses_wrong_compiler_naming_four_chars_of_each(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "cpu %s 1a2b3c4d5e6f7081 %d\n", g_id.runtime, g_id.space);
    expect_refusal(text, ST_ERR_REFUSED, "made by compiler 1a2b.., this build is %.4s..: run the tuner again",
                   g_id.compiler);
}

static void table_refuses_while_any_knob_is_active(void **state)
{
    (void)state;
    const char *text = tbl("mmvq iq3_s 2560 2560 4\n");
    for (int k = 0; k < ST_KNOB_COUNT; k++) {
        st_dispatch_config cfg;
        st_dispatch_config_default(&cfg);
        cfg.active[k] = true;
        expect_refusal_n(text, strlen(text), &cfg, ST_ERR_REFUSED,
                         "%s reroutes the decode dispatch away from what the table measured",
                         st_knob_label((st_knob)k));
    }
    /* Two literal spellings from DESIGN.md. */
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    cfg.active[ST_KNOB_NO_SUB16_GU] = true;
    expect_refusal_n(text, strlen(text), &cfg, ST_ERR_REFUSED,
                     "STRATA_NO_SUB16_GU reroutes the decode dispatch away from what the table "
                     "measured");
    st_dispatch_config_default(&cfg);
    cfg.active[ST_KNOB_IQ_STAGE_GRID_OFF] = true;
    expect_refusal_n(text, strlen(text), &cfg, ST_ERR_REFUSED,
                     "STRATA_IQ_STAGE_GRID=0 reroutes the decode dispatch away from what the "
                     "table measured");
}

static void table_checks_in_documented_order(void **state)
{
    (void)state;
    char text[512];
    /* space before arch */
    snprintf(text, sizeof text, "gfx1030 1 2 99\n");
    expect_refusal(text, ST_ERR_REFUSED,
                   "made for kernel selection space 99, this build is %d (the kernels "
                   "changed): run the tuner again",
                   g_id.space);
    /* arch before runtime before compiler */
    snprintf(text, sizeof text, "gfx1030 1 2 %d\n", g_id.space);
    expect_refusal(text, ST_ERR_REFUSED,
                   "made for gfx1030, this device is cpu: run the tuner on this device");
    snprintf(text, sizeof text, "cpu 1 2222 %d\n", g_id.space);
    expect_refusal(text, ST_ERR_REFUSED,
                   "made for runtime 1, this process loaded %s: tune and run with the same "
                   "runtime library",
                   g_id.runtime);
    /* compiler before knobs, knobs before rows */
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    cfg.active[ST_KNOB_TSUM] = true;
    snprintf(text, sizeof text, "cpu %s zzzz %d\nbogus\n", g_id.runtime, g_id.space);
    expect_refusal_n(text, strlen(text), &cfg, ST_ERR_REFUSED,
                     "made by compiler zzzz.., this build is %.4s..: run the tuner again",
                     g_id.compiler);
    const char *bad = tbl("bogus\n");
    expect_refusal_n(bad, strlen(bad), &cfg, ST_ERR_REFUSED,
                     "STRATA_TSUM reroutes the decode dispatch away from what the table measured");
    /* the first bad row wins */
    expect_refusal(tbl("mmvq iq3_s 2560 2560 4\nmmvq iq3_s 1 100 4\nfoo\n"), ST_ERR_PARSE,
                   "line 3: n_cols 100 is not a multiple of 256, the block of iq3_s");
}

static void table_refuses_overlong_header_token(void **state)
{
    (void)state;
    char text[512], arch[80];
    memset(arch, 'a', 64);
    arch[64] = '\0';
    snprintf(text, sizeof text, "%s 1 2 2\n", arch);
    expect_refusal(text, ST_ERR_PARSE,
                   "line 1: arch token '%.40s...' is too long (at most %d characters)", arch,
                   ST_TOKEN_MAX - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_engages_matching_table_with_count_line),
        cmocka_unit_test(table_engages_header_only_table_with_zero_shapes),
        cmocka_unit_test(table_reads_crlf_comments_and_trailing_blanks),
        cmocka_unit_test(table_accepts_type_names_in_any_case),
        cmocka_unit_test(table_refuses_empty_file),
        cmocka_unit_test(table_refuses_comment_only_file),
        cmocka_unit_test(table_refuses_header_without_space_token),
        cmocka_unit_test(table_refuses_header_with_wrong_token_count),
        cmocka_unit_test(table_refuses_non_numeric_space),
        cmocka_unit_test(table_refuses_wrong_space),
        cmocka_unit_test(table_refuses_wrong_arch),
        cmocka_unit_test(table_refuses_wrong_runtime),
        cmocka_unit_test(table_refuses_wrong_compiler_naming_four_chars_of_each),
        cmocka_unit_test(table_refuses_while_any_knob_is_active),
        cmocka_unit_test(table_checks_in_documented_order),
        cmocka_unit_test(table_refuses_overlong_header_token),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
