/* The decode tuning table: parser, identity and knob checks, the exact
 * refusal wording (DESIGN.md section 4), the loader's one line, directory
 * auto-selection, the atomic write, and the knobs. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/knobs.h"
#include "strata/table.h"
#include "strata/variants.h"
#include "table_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH "t.table"
#define MSG 8192

/* "cpu <runtime> <compiler> <space>" of this build. */
static char g_hdr[256];
static st_identity g_id;

/* ---- helpers -------------------------------------------------------------- */

typedef struct {
    int count;
    char last[MSG];
} capture;

static void capture_line(void *user, const char *line)
{
    capture *c = user;
    c->count++;
    snprintf(c->last, sizeof c->last, "%s", line);
}

/* HDR + "\n" + BODY in a static buffer. */
static const char *tbl(const char *body)
{
    static char buf[1 << 16];
    snprintf(buf, sizeof buf, "%s\n%s", g_hdr, body);
    return buf;
}

static st_status parse_cfg(const char *text, size_t len, const st_dispatch_config *cfg,
                           st_table **t, char *msg)
{
    st_dispatch_config def;
    if (!cfg) {
        st_dispatch_config_default(&def);
        cfg = &def;
    }
    return st_table_parse(text, len, PATH, &g_id, cfg, t, msg, MSG);
}

static int g_dummy;

/* Parses TEXT for this process; asserts the status WANT, no table, and the
 * message "decode tuning: t.table: " + the formatted tail, word for word. */
static void expect_refusal_n(const char *text, size_t len, const st_dispatch_config *cfg,
                             st_status want, const char *fmt, ...)
{
    char tail[MSG], expected[MSG + 64], msg[MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    snprintf(expected, sizeof expected, "decode tuning: %s: %s", PATH, tail);
    st_table *t = (st_table *)&g_dummy;
    st_status s = parse_cfg(text, len, cfg, &t, msg);
    assert_string_equal(msg, expected);
    assert_int_equal(s, want);
    assert_null(t);
}

#define expect_refusal(text, want, ...) \
    expect_refusal_n(text, strlen(text), NULL, want, __VA_ARGS__)

static void expect_engages(const char *text, size_t shapes)
{
    char msg[MSG], expected[MSG];
    st_table *t = NULL;
    assert_int_equal(parse_cfg(text, strlen(text), NULL, &t, msg), ST_OK);
    assert_non_null(t);
    snprintf(expected, sizeof expected, "decode tuning: %zu shapes from %s (cpu, runtime %s)",
             shapes, PATH, g_id.runtime);
    assert_string_equal(msg, expected);
    assert_int_equal(st_table_count(t), shapes);
    st_table_destroy(t);
}

/* The variant lists, expanded here independently of the library. */
static void rows_list(char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
#define T_ROW_(r) at += (size_t)snprintf(buf + at, n - at, "%s%d", at ? " " : "", (r));
    STRATA_MMVQ_ROWS_VARIANTS(T_ROW_)
#undef T_ROW_
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

static char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/strata-table-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* st_table_load with a capturing sink: the status, the one line, and the
 * number of lines printed (must be 1). */
static st_status load_capture(const char *path, const st_dispatch_config *cfg, st_table **t,
                              capture *cap)
{
    st_dispatch_config def;
    st_dispatch_config_default(&def);
    memset(cap, 0, sizeof *cap);
    st_set_log(capture_line, cap);
    st_status s = st_table_load(path, &g_id, cfg ? cfg : &def, t);
    st_set_log(NULL, NULL);
    return s;
}

static int group_setup(void **state)
{
    (void)state;
    st_identity_cpu(&g_id);
    st_identity_header(&g_id, g_hdr, sizeof g_hdr);
    return 0;
}

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
    assert_string_equal(list, "1 2 4 8 16");
    assert_string_equal(plist, "1/1 2/2 4/2 4/4 8/4 8/8");
    const char *text = tbl("# a\n#b\n\nmmvq q8_0 32 32 1\nmmvq q8_0 64 32 2\nmmvq q8_0 96 32 3\n");
    expect_refusal(text, ST_ERR_PARSE, "line 7: rows 3 is not a compiled-in variant (1 2 4 8 16)");
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
    expect_refusal(tbl("mmvq q8_0 32 32 +1\n"), ST_ERR_PARSE,
                   "line 2: rows '+1' is not a decimal number");
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
    expect_refusal(tbl("#\nexpert iq3_s iq4_nl 2560 640 9 4 2\n"), ST_ERR_PARSE,
                   "line 3: n_tokens 9 is out of range 1..8");
    expect_refusal(tbl("expert iq3_s iq4_nl 2560 640 0 4 2\n"), ST_ERR_PARSE,
                   "line 2: n_tokens 0 is out of range 1..8");
    /* The largest values are accepted. */
    expect_engages(tbl("mmvq q8_0 1048576 1048576 1\nexpert q8_0 q8_0 1048576 1048576 8 1 1\n"), 2);
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
        {"a b c 1\nmmvq iq3_s 2560 2560 3\n", "decode tuning: o.table: line 2: rows 3 is not a compiled-in variant (1 2 4 8 16)"},
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
    st_expert_key e = {ST_IQ3_S, ST_IQ4_NL, 2560, 640, 9};
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

/* ---- files ----------------------------------------------------------------- */

static char *read_all(const char *path, size_t *len)
{
    char *buf = NULL;
    assert_int_equal(st_read_file(path, &buf, len), ST_OK);
    return buf;
}

static void table_write_atomic_replaces_file(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), path[4096];
    snprintf(path, sizeof path, "%s/x.table", dir);
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    st_mmvq_key m = {ST_IQ3_S, 2560, 2560};
    assert_int_equal(st_table_add_mmvq(t, &m, 4), ST_OK);
    write_text(dir, "x.table", "old contents\n");
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    char *want = NULL, *got = NULL;
    size_t wl = 0, gl = 0;
    assert_int_equal(st_table_format(t, &want, &wl), ST_OK);
    got = read_all(path, &gl);
    assert_int_equal(gl, wl);
    assert_memory_equal(got, want, wl);
    assert_int_equal(count_entries(dir), 1);
    free(want);
    free(got);
    /* into a directory that does not exist: an error, nothing created */
    char nowhere[4096];
    snprintf(nowhere, sizeof nowhere, "%s/missing/x.table", dir);
    assert_int_equal(st_table_write_atomic(t, nowhere), ST_ERR_IO);
    assert_int_equal(count_entries(dir), 1);
    st_table_destroy(t);
    remove_tree(dir);
    free(dir);
}

static void table_write_atomic_failure_keeps_old_file(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), path[4096];
    snprintf(path, sizeof path, "%s/x.table", dir);
    static const char old[] = "# the table that was there\ncpu 0 0 2\nmmvq q8_0 32 32 1\n";
    write_text(dir, "x.table", old);
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    for (int i = 1; i <= 50; i++) {
        st_mmvq_key m = {ST_Q8_0, i, 64};
        assert_int_equal(st_table_add_mmvq(t, &m, 2), ST_OK);
    }
    static const long fail_at[] = {0, 1, 10, 200};
    for (size_t i = 0; i < sizeof fail_at / sizeof fail_at[0]; i++) {
        st_table_write_fail_after_bytes = fail_at[i];
        st_status s = st_table_write_atomic(t, path);
        st_table_write_fail_after_bytes = -1;
        assert_int_equal(s, ST_ERR_IO);
        size_t n = 0;
        char *got = read_all(path, &n);
        assert_int_equal(n, sizeof old - 1);
        assert_memory_equal(got, old, n);
        free(got);
        assert_int_equal(count_entries(dir), 1); /* no temporary left behind */
    }
    /* and the hook off again: the write goes through */
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    assert_int_equal(count_entries(dir), 1);
    st_table_destroy(t);
    remove_tree(dir);
    free(dir);
}

static void table_load_prints_one_line_on_success_and_each_refusal(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), path[4096], expected[MSG];
    snprintf(path, sizeof path, "%s/a.table", dir);
    capture cap;
    st_table *t = NULL;

    write_text(dir, "a.table", tbl("mmvq iq3_s 2560 2560 4\nmmvq q8_0 32 32 1\n"));
    assert_int_equal(load_capture(path, NULL, &t, &cap), ST_OK);
    assert_non_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected, "decode tuning: 2 shapes from %s (cpu, runtime %s)", path,
             g_id.runtime);
    assert_string_equal(cap.last, expected);
    st_table_destroy(t);

    /* Each kind of refusal through the loader: one line, the parser's. */
    char other_space[512], no_space[512], other_rt[512], other_cc[512];
    snprintf(other_space, sizeof other_space, "cpu %s %s 99\n", g_id.runtime, g_id.compiler);
    snprintf(no_space, sizeof no_space, "cpu %s %s\n", g_id.runtime, g_id.compiler);
    snprintf(other_rt, sizeof other_rt, "cpu 70152802 %s %d\n", g_id.compiler, g_id.space);
    snprintf(other_cc, sizeof other_cc, "cpu %s zzzz %d\n", g_id.runtime, g_id.space);
    char *body1 = strdup(tbl("bogus\n"));
    char *body2 = strdup(tbl("mmvq iq3_s 2560 2560 3\n"));
    char *body3 = strdup(tbl("mmvq x 1 1 1\n"));
    const struct {
        const char *text;
        st_status status;
        const char *tail;
    } cases[] = {
        {"", ST_ERR_PARSE, "empty file (no header line)"},
        {"# c\n", ST_ERR_PARSE, "empty file (no header line)"},
        {no_space, ST_ERR_REFUSED,
         "made before the kernel selection space was tracked - the kernels have changed since"},
        {other_space, ST_ERR_REFUSED, NULL},
        {other_rt, ST_ERR_REFUSED, NULL},
        {other_cc, ST_ERR_REFUSED, NULL},
        {body1, ST_ERR_PARSE, "line 2: unknown kernel kind 'bogus' (expected expert or mmvq)"},
        {body2, ST_ERR_PARSE, "line 2: rows 3 is not a compiled-in variant (1 2 4 8 16)"},
        {body3, ST_ERR_PARSE, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(dir, "a.table", cases[i].text);
        t = (st_table *)&g_dummy;
        assert_int_equal(load_capture(path, NULL, &t, &cap), cases[i].status);
        assert_null(t);
        assert_int_equal(cap.count, 1);
        /* the loader prints exactly what the parser says */
        char msg[MSG];
        st_table *u = (st_table *)&g_dummy;
        assert_int_equal(st_table_parse(cases[i].text, strlen(cases[i].text), path, &g_id, NULL,
                                        &u, msg, sizeof msg),
                         cases[i].status);
        assert_null(u);
        assert_string_equal(cap.last, msg);
        if (cases[i].tail) {
            snprintf(expected, sizeof expected, "decode tuning: %s: %s", path, cases[i].tail);
            assert_string_equal(cap.last, expected);
        }
    }
    free(body1);
    free(body2);
    free(body3);
    char other_arch[64];
    snprintf(other_arch, sizeof other_arch, "gfx1100 1 2 %d\n", STRATA_SELECTION_SPACE);
    write_text(dir, "a.table", other_arch);
    t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(path, NULL, &t, &cap), ST_ERR_REFUSED);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: made for gfx1100, this device is cpu: run the tuner on this device",
             path);
    assert_string_equal(cap.last, expected);

    write_text(dir, "a.table", tbl(""));
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    cfg.active[ST_KNOB_EXPERT_V2] = true;
    t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(path, &cfg, &t, &cap), ST_ERR_REFUSED);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: STRATA_EXPERT_V2 reroutes the decode dispatch away from what the "
             "table measured",
             path);
    assert_string_equal(cap.last, expected);
    remove_tree(dir);
    free(dir);
}

static void table_load_refuses_unreadable_path(void **state)
{
    (void)state;
    capture cap;
    st_table *t = (st_table *)&g_dummy;
    char expected[MSG];
    const char *p = "/nonexistent/strata/x.table";
    assert_int_equal(load_capture(p, NULL, &t, &cap), ST_ERR_IO);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected, "decode tuning: %s: cannot read: %s", p, strerror(ENOENT));
    assert_string_equal(cap.last, expected);
}

static void write_table_for(const char *dir, const char *name, const char *arch,
                            const char *runtime, const char *compiler, int space)
{
    char text[1024];
    snprintf(text, sizeof text, "# provenance\n%s %s %s %d\nmmvq q8_0 32 32 1\n", arch, runtime,
             compiler, space);
    write_text(dir, name, text);
}

static void table_load_picks_the_matching_table_from_a_directory(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), expected[MSG], sub[4096];
    write_table_for(dir, "a.table", "gfx1030", g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "b.table", "cpu", "70152802", g_id.compiler, g_id.space);
    write_table_for(dir, "c.table", "cpu", g_id.runtime, "zzzzzzzz", g_id.space);
    write_table_for(dir, "d.table", "cpu", g_id.runtime, g_id.compiler, 99);
    write_text(dir, "e.table", "not a table at all");
    write_table_for(dir, "m.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    /* not *.table regular files: ignored even though they match */
    write_table_for(dir, "m.table.bak", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "notes.txt", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, ".hidden.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    snprintf(sub, sizeof sub, "%s/sub.table", dir);
    assert_int_equal(mkdir(sub, 0755), 0);

    capture cap;
    st_table *t = NULL;
    assert_int_equal(load_capture(dir, NULL, &t, &cap), ST_OK);
    assert_non_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected, "decode tuning: 1 shapes from %s/m.table (cpu, runtime %s)",
             dir, g_id.runtime);
    assert_string_equal(cap.last, expected);
    st_table_destroy(t);

    /* a trailing slash does not double up */
    char slashed[4096];
    snprintf(slashed, sizeof slashed, "%s/", dir);
    assert_int_equal(load_capture(slashed, NULL, &t, &cap), ST_OK);
    assert_string_equal(cap.last, expected);
    st_table_destroy(t);
    remove_tree(dir);
    free(dir);
}

static void table_load_reports_no_matching_table_in_directory(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), expected[MSG];
    write_table_for(dir, "a.table", "gfx1030", g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "b.table", "cpu", g_id.runtime, g_id.compiler, 99);
    write_text(dir, "c.table", "");
    write_table_for(dir, "match.txt", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    capture cap;
    st_table *t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(dir, NULL, &t, &cap), ST_ERR_NOT_FOUND);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: no table matches this process (%s); 3 tables skipped", dir, g_hdr);
    assert_string_equal(cap.last, expected);
    remove_tree(dir);
    free(dir);
}

static void table_load_refuses_several_matching_tables(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), expected[MSG];
    write_table_for(dir, "b.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "a.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "c.table", "gfx1030", g_id.runtime, g_id.compiler, g_id.space);
    capture cap;
    st_table *t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(dir, NULL, &t, &cap), ST_ERR_REFUSED);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: 2 tables match this process (a.table, b.table): keep one", dir);
    assert_string_equal(cap.last, expected);
    remove_tree(dir);
    free(dir);
}

/* ---- knobs ------------------------------------------------------------------ */

static const char *const k_when[ST_KNOB_COUNT] = {
#define T_WHEN_(id, env, when, what) when,
    STRATA_DISPATCH_KNOBS(T_WHEN_)
#undef T_WHEN_
};

static void knob_value_active_follows_each_knob_kind(void **state)
{
    (void)state;
    for (int k = 0; k < ST_KNOB_COUNT; k++) {
        st_knob kn = (st_knob)k;
        assert_false(st_knob_value_active(kn, NULL));
        assert_false(st_knob_value_active(kn, ""));
        char label[128];
        if (!k_when[k]) {
            assert_false(st_knob_value_active(kn, "0"));
            assert_true(st_knob_value_active(kn, "1"));
            assert_true(st_knob_value_active(kn, "yes"));
            snprintf(label, sizeof label, "%s", st_knob_env(kn));
        } else {
            bool zero = !strcmp(k_when[k], "0");
            assert_int_equal(st_knob_value_active(kn, "0"), zero);
            assert_int_equal(st_knob_value_active(kn, "1"), !zero);
            assert_false(st_knob_value_active(kn, "yes"));
            assert_string_equal(st_knob_when(kn), zero ? "=0" : "=1");
            snprintf(label, sizeof label, "%s=%s", st_knob_env(kn), k_when[k]);
        }
        assert_string_equal(st_knob_label(kn), label);
        assert_true(strlen(st_knob_what(kn)) > 0);
    }
}

static void dispatch_config_from_env_reads_each_knob(void **state)
{
    (void)state;
    for (int k = 0; k < ST_KNOB_COUNT; k++) unsetenv(st_knob_env((st_knob)k));
    st_dispatch_config cfg;
    st_dispatch_config_from_env(&cfg);
    assert_int_equal(st_dispatch_config_first_active(&cfg), -1);
    for (int k = 0; k < ST_KNOB_COUNT; k++) {
        const char *env = st_knob_env((st_knob)k);
        setenv(env, k_when[k] ? k_when[k] : "1", 1);
        st_dispatch_config_from_env(&cfg);
        for (int j = 0; j < ST_KNOB_COUNT; j++) assert_int_equal(cfg.active[j], j == k);
        assert_int_equal(st_dispatch_config_first_active(&cfg), k);
        setenv(env, k_when[k] ? (strcmp(k_when[k], "0") ? "0" : "1") : "0", 1);
        st_dispatch_config_from_env(&cfg);
        assert_false(cfg.active[k]);
        unsetenv(env);
    }
    st_dispatch_config_from_env(&cfg);
    assert_int_equal(st_dispatch_config_first_active(&cfg), -1);
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
        cmocka_unit_test(table_accepts_exactly_the_compiled_in_mmvq_rows),
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
        cmocka_unit_test(table_write_atomic_replaces_file),
        cmocka_unit_test(table_write_atomic_failure_keeps_old_file),
        cmocka_unit_test(table_load_prints_one_line_on_success_and_each_refusal),
        cmocka_unit_test(table_load_refuses_unreadable_path),
        cmocka_unit_test(table_load_picks_the_matching_table_from_a_directory),
        cmocka_unit_test(table_load_reports_no_matching_table_in_directory),
        cmocka_unit_test(table_load_refuses_several_matching_tables),
        cmocka_unit_test(knob_value_active_follows_each_knob_kind),
        cmocka_unit_test(dispatch_config_from_env_reads_each_knob),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
